//! `find` and `fd`: their predicates and actions (`-exec`, `-delete`, `--exec`), the
//! commands they run analysed as commands (DESIGN.md §2a green list).

use super::guard_tree::{FdTests, FindTests, Runner};
use super::*;

impl Analyzer<'_> {
    /// `find`: read-only without actions; `-exec`/`-ok` are wrappers; `-delete` is recursive
    /// deletion; `-fprint*`/`-fls` write files.
    pub(crate) fn find(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let args = inv.args;
        let mut i = 0;
        let mut starts: Vec<Field> = Vec::new();
        // Leading options -H -L -P -D x -Ox.
        let mut follows = false;
        while i < args.len() {
            match args[i].known().as_deref() {
                Some("-L") => {
                    follows = true;
                    i += 1;
                }
                Some("-H" | "-P") => i += 1,
                Some("-D") => i += 2,
                Some(t) if t.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        while i < args.len() {
            match args[i].known() {
                Some(t)
                    if t.starts_with('-') && t.len() > 1
                        || t == "("
                        || t == "!"
                        || t == ")"
                        || t == "," =>
                {
                    break
                }
                _ => {
                    starts.push(args[i].clone());
                    i += 1;
                }
            }
        }
        if starts.is_empty() {
            starts.push(Field::lit("."));
        }
        let mut deletes = false;
        let mut deletes_via_exec = false;
        let mut removes_via_exec = false;
        let mut tests = FindTests::default();
        let mut negate = false;
        let mut execs: Vec<Vec<Field>> = Vec::new();
        while i < args.len() {
            let t = args[i].known();
            i += 1;
            let Some(t) = t else {
                self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-args",
                    "`find` has an expression that cannot be known".to_string(),
                );
                continue;
            };
            let negated = std::mem::take(&mut negate);
            match t.as_str() {
                "!" | "-not" => negate = !negated,
                "-a" | "-and" => {}
                "-o" | "-or" | "," | "(" | ")" => tests.any = true,
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = args[i..]
                        .iter()
                        .position(|a| a.known().is_some_and(|x| x == ";" || x == "+"))
                        .map(|e| i + e)
                        .unwrap_or(args.len());
                    let mut inner: Vec<Field> = args[i..end].to_vec();
                    execs.push(inner.clone());
                    // `{}` stands for each found path, under the start paths.
                    for a in inner.iter_mut() {
                        if let Some(x) = a.known() {
                            if x.contains("{}") {
                                let (before, after) = x.split_once("{}").unwrap_or((&x, ""));
                                let start = if t == "-execdir" || t == "-okdir" {
                                    "./".to_string()
                                } else {
                                    match starts.first().and_then(Field::known) {
                                        Some(s) if starts.len() == 1 => {
                                            format!("{}/", s.trim_end_matches('/'))
                                        }
                                        _ => String::new(),
                                    }
                                };
                                *a = Field::around_unknown(&format!("{before}{start}"), after);
                            }
                        }
                    }
                    self.add(
                        Verdict::Yellow,
                        "wrapper.find-exec",
                        format!("`find {t}` runs a command on every match"),
                    );
                    let program = inner
                        .first()
                        .and_then(Field::known)
                        .map(|n| n.rsplit('/').next().unwrap_or("").to_string());
                    if program.as_deref().is_some_and(|n| {
                        matches!(
                            n,
                            "rm" | "shred"
                                | "unlink"
                                | "rmdir"
                                | "mv"
                                | "chmod"
                                | "chown"
                                | "chgrp"
                                | "truncate"
                                | "dd"
                        )
                    }) {
                        // Run on every file under the start points: as wide as a recursive one.
                        deletes_via_exec = true;
                    }
                    // A remover run on every match deletes recursively without confirmation,
                    // as `-delete` does.
                    removes_via_exec |= program
                        .as_deref()
                        .is_some_and(|n| matches!(n, "rm" | "shred" | "unlink" | "rmdir"));
                    if !inner.is_empty() {
                        let _ = self.invoke(
                            st.clone(),
                            &inner,
                            inv.env.clone(),
                            Stdin::Inherited,
                            depth,
                        );
                    }
                    i = end + 1;
                }
                "-delete" => deletes = true,
                "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                    self.add(
                        Verdict::Yellow,
                        "cmd.not-read-only",
                        format!("`find {t}` writes a file"),
                    );
                    if let Some(f) = args.get(i) {
                        self.path_field(st, f, Access::Write);
                    }
                    i += if t == "-fprintf" { 2 } else { 1 };
                }
                "-files0-from" => {
                    self.add(
                        Verdict::Yellow,
                        "cmd.dynamic-args",
                        "`find -files0-from` reads its start points at run time".to_string(),
                    );
                    if let Some(f) = args.get(i) {
                        self.path_field(st, f, Access::Read);
                    }
                    i += 1;
                }
                "-follow" => follows = true,
                "-newer" | "-anewer" | "-cnewer" | "-samefile" => {
                    if let Some(f) = args.get(i) {
                        self.path_field(st, f, Access::Read);
                    }
                    i += 1;
                }
                x if x.starts_with("-newer") && x.len() == 8 => {
                    if let Some(f) = args.get(i) {
                        if !x.ends_with('t') {
                            self.path_field(st, f, Access::Read);
                        }
                    }
                    i += 1;
                }
                "-name" | "-iname" | "-path" | "-ipath" | "-wholename" | "-iwholename"
                | "-type" | "-xtype" | "-maxdepth" | "-mindepth" => {
                    match args.get(i).and_then(Field::known) {
                        Some(v) => tests.tests.push((negated, t.clone(), v)),
                        None => tests.any = true,
                    }
                    i += 1
                }
                "-regex" | "-iregex" | "-lname" | "-ilname" | "-user" | "-group" | "-uid"
                | "-gid" | "-perm" | "-size" | "-mtime" | "-atime" | "-ctime" | "-mmin"
                | "-amin" | "-cmin" | "-links" | "-inum" | "-used" | "-printf" | "-context"
                | "-fstype" | "-regextype" => i += 1,
                _ => {}
            }
        }
        if deletes || removes_via_exec {
            let how = if deletes { "-delete" } else { "-exec rm" };
            self.add(
                Verdict::Red,
                "rm.find-delete",
                format!("`find {how}` deletes recursively without confirmation"),
            );
        }
        if follows {
            self.symlinks_out(st, &starts, deletes || deletes_via_exec);
        }
        // What the selection reaches of the pre-push hook (`guard_tree.rs`), and what it
        // prints of it into a pipe (`xargs` runs its command on those paths).
        let piped = self.stdout_piped;
        if deletes || !execs.is_empty() || piped {
            let mut printed = Vec::new();
            for s in &starts {
                let nodes: Vec<_> = self
                    .hook_nodes(st, s)
                    .into_iter()
                    .filter(|n| tests.may_select(n))
                    .collect();
                if deletes {
                    self.guard_selected_deletion("find -delete", &nodes);
                }
                for inner in &execs {
                    self.run_on_nodes(st, inner, &nodes, &inv.env, depth, Runner::Find);
                }
                if piped {
                    printed.extend(nodes);
                }
            }
            if piped {
                self.selection = Some(printed);
            }
        }
        for s in &starts {
            if deletes || deletes_via_exec {
                self.catastrophic_target(st, s, true, "find");
            }
            self.path_field(
                st,
                s,
                if deletes {
                    Access::Modify
                } else {
                    Access::Read
                },
            );
        }
    }

    /// `fd`: read-only unless `-x`/`-X` (wrappers).
    pub(crate) fn fd(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let args = inv.args;
        // The entry's table: which options take a value (`registry/walked.rs`).
        let spec = registry::lookup("fd").map_or(&[][..], |e| e.options);
        let mut operands = Vec::new();
        let mut execs: Vec<Vec<Field>> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let t = args[i].known();
            if let Some(first) = t.as_deref().and_then(fd_exec_start) {
                let end = args[i + 1..]
                    .iter()
                    .position(|a| a.known().as_deref() == Some(";"))
                    .map(|e| i + 1 + e)
                    .unwrap_or(args.len());
                let mut inner: Vec<Field> = first.iter().map(|w| Field::lit(w)).collect();
                inner.extend_from_slice(&args[i + 1..end]);
                execs.push(inner.clone());
                for a in inner.iter_mut() {
                    if a.known().is_some_and(|x| x.contains('{')) {
                        *a = Field::around_unknown("./", "");
                    }
                }
                if inner
                    .iter()
                    .all(|a| a.known().is_some_and(|x| !x.contains('{')))
                {
                    inner.push(Field::around_unknown("./", ""));
                }
                self.add(
                    Verdict::Yellow,
                    "wrapper.fd-exec",
                    "`fd -x/-X` runs a command on every match".to_string(),
                );
                let deleter = inner.first().and_then(Field::known).is_some_and(|n| {
                    matches!(
                        n.rsplit('/').next().unwrap_or(""),
                        "rm" | "shred" | "unlink" | "rmdir" | "mv" | "chmod" | "chown" | "truncate"
                    )
                });
                if inner.first().and_then(Field::known).is_some_and(|n| {
                    matches!(
                        n.rsplit('/').next().unwrap_or(""),
                        "rm" | "shred" | "unlink" | "rmdir"
                    )
                }) {
                    self.add(
                        Verdict::Red,
                        "rm.find-delete",
                        "`fd -x rm` deletes every match without confirmation".to_string(),
                    );
                }
                if deleter {
                    // Every match under the search paths: check those like a recursive target.
                    let positional: Vec<Field> = args[..i]
                        .iter()
                        .filter(|a| a.known().is_none_or(|t| !t.starts_with('-')))
                        .cloned()
                        .collect();
                    for path in positional.iter().skip(1) {
                        self.catastrophic_target(st, path, true, "fd");
                    }
                }
                if !inner.is_empty() {
                    let _ =
                        self.invoke(st.clone(), &inner, inv.env.clone(), Stdin::Inherited, depth);
                }
                i = end + 1;
                continue;
            }
            operands.push(args[i].clone());
            i += 1;
        }
        let mut pos = Vec::new();
        let mut sel = FdTests::default();
        for t in parse_opts(&operands, spec) {
            match t {
                Tok::Opt { name, value } => {
                    let v = value.as_ref().and_then(Field::known);
                    let n = name.as_str();
                    if n == "-H" || names(n, "--hidden") || n == "-u" || names(n, "--unrestricted")
                    {
                        sel.hidden = true;
                    } else if names(n, "--no-hidden") {
                        sel.hidden = false;
                    } else if n == "-g" || names(n, "--glob") {
                        sel.glob = true;
                    } else if n == "-F" || names(n, "--fixed-strings") {
                        sel.fixed = true;
                    } else if n == "-p" || names(n, "--full-path") {
                        sel.full_path = true;
                    } else if n == "-s" || names(n, "--case-sensitive") {
                        sel.case = Some(true);
                    } else if n == "-i" || names(n, "--ignore-case") {
                        sel.case = Some(false);
                    } else if n == "-e" || names(n, "--extension") {
                        sel.extensions.extend(v.clone());
                    } else if n == "-t" || names(n, "--type") {
                        sel.types.extend(v.clone());
                    } else if n == "-E" || names(n, "--exclude") {
                        sel.excludes.extend(v.clone());
                    } else if n == "-d" || names(n, "--max-depth") || names(n, "--maxdepth") {
                        sel.max_depth = v.as_deref().and_then(|x| x.parse().ok());
                    } else if names(n, "--min-depth") {
                        sel.min_depth = v.as_deref().and_then(|x| x.parse().ok());
                    } else if names(n, "--exact-depth") {
                        sel.max_depth = v.as_deref().and_then(|x| x.parse().ok());
                        sel.min_depth = sel.max_depth;
                    }
                    if names(&name, "--base-directory")
                        || names(&name, "--search-path")
                        || names(&name, "--ignore-file")
                    {
                        if let Some(v) = value {
                            self.path_field(st, &v, Access::Read);
                        }
                    }
                }
                Tok::DynamicOpt => self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-args",
                    "`fd` has arguments that cannot be known".to_string(),
                ),
                Tok::Operand(f) => pos.push(f),
            }
        }
        let mut it = pos.into_iter();
        let pattern = it.next();
        let rest: Vec<Field> = it.collect();
        // What the selection reaches of the pre-push hook (`guard_tree.rs`); a pattern that
        // cannot be known may match anything.
        let piped = self.stdout_piped;
        if !execs.is_empty() || piped {
            sel.pattern = pattern.as_ref().and_then(Field::known);
            let starts = if rest.is_empty() {
                vec![Field::lit(".")]
            } else {
                rest.clone()
            };
            let mut printed = Vec::new();
            for s in &starts {
                let nodes = sel.select(&self.hook_nodes(st, s));
                for inner in &execs {
                    self.run_on_nodes(st, inner, &nodes, &inv.env, depth, Runner::Fd);
                }
                if piped {
                    printed.extend(nodes);
                }
            }
            if piped {
                self.selection = Some(printed);
            }
        }
        let follows = args.iter().filter_map(Field::known).any(|t| {
            t == "--follow" || t.starts_with('-') && !t.starts_with("--") && t.contains('L')
        });
        if follows {
            let starts = if rest.is_empty() {
                vec![Field::lit(".")]
            } else {
                rest.clone()
            };
            self.symlinks_out(st, &starts, false);
        }
        if rest.is_empty() {
            self.path_field(st, &Field::lit("."), Access::Read);
        }
        for f in rest {
            self.path_field(st, &f, Access::Read);
        }
        if args.iter().any(|a| !a.is_known()) {
            self.add(
                Verdict::Yellow,
                "cmd.dynamic-args",
                "`fd` has arguments that cannot be known".to_string(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Green, Red, Yellow};

    #[test]
    fn find_and_fd() {
        expect(&[
            ("find . -name '*.rs'", Green, ""),
            ("find . -type f -newer Cargo.toml -print", Green, ""),
            ("find . -delete", Red, "rm.find-delete"),
            ("find . -exec rm -rf {} +", Red, ""),
            ("find . -exec cat {} \\;", Yellow, "wrapper.find-exec"),
            ("find . -fprint out.txt", Yellow, ""),
            ("fd -e rs", Green, ""),
            ("fd -x rm -rf", Red, ""),
        ]);
    }
}
