//! Wrappers that run another command (`timeout`, `nice`, `env`, `xargs`, `parallel`,
//! `watch`…): the worse of yellow and the command they run (DESIGN.md §2a "Wrappers").

use super::*;

impl Analyzer<'_> {
    /// Wrappers that run another command. Returns the state when `inv` was one.
    pub(crate) fn wrapper(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        depth: usize,
    ) -> Option<State> {
        let p = inv.program.as_str();
        let args = inv.args;
        let Some(Walk::Wrapper(wraps)) = registry::walk(p) else {
            return None;
        };
        let spec = registry::lookup(p)?.options;
        match wraps {
            Wraps::Options => {}
            Wraps::Env => return Some(self.env_wrapper(st, inv, depth)),
            Wraps::Parallel => return Some(self.parallel(st, inv, depth)),
            Wraps::Watch => return Some(self.watch(st, inv, spec, depth)),
            Wraps::Opaque => return Some(self.opaque_wrapper(st, inv, depth)),
            Wraps::Multicall => {
                self.add(
                    Verdict::Yellow,
                    "wrapper.multicall",
                    format!("`{p}` runs the applet named by its first argument"),
                );
                if args.is_empty() {
                    return Some(st.clone());
                }
                let _ = self.invoke(st.clone(), args, inv.env.clone(), inv.stdin, depth);
                return Some(st.clone());
            }
        }
        // `command -v NAME`/`-V` looks a name up: not a wrapper.
        if p == "command"
            && args
                .iter()
                .any(|a| a.known().is_some_and(|t| t == "-v" || t == "-V"))
        {
            return None;
        }
        let name = p;
        self.add(
            Verdict::Yellow,
            &format!("wrapper.{name}"),
            format!("`{name}` runs another command"),
        );
        // Find where the inner command starts: after the options (and a duration/file for some).
        let toks = parse_opts_until_command(args, spec);
        let mut inner_start = toks.command_at;
        let mut st2 = st.clone();
        for (opt, val) in &toks.opts {
            let o = opt.as_str();
            if let Some(v) = val {
                match (p, o) {
                    ("sudo" | "doas", "-D") | ("sudo", "--chdir") => {
                        self.path_field(st, v, Access::Read);
                        if let Some(t) = v.known() {
                            st2.cwds = st
                                .cwds
                                .iter()
                                .map(|c| c.as_ref().map(|c| crate::analysis::paths::resolve(c, &t)))
                                .collect();
                        } else {
                            st2.cwds = vec![None];
                        }
                    }
                    ("time", "-o") | ("time", "--output") => {
                        self.path_field(st, v, Access::Write);
                    }
                    ("xargs", "-a") | ("xargs", "--arg-file") => {
                        self.path_field(st, v, Access::Read)
                    }
                    ("flock", "-c") | ("flock", "--command") => match v.known() {
                        Some(code) => {
                            self.line(&code, st.clone(), depth + 1);
                        }
                        None => self.opaque("flock -c", "a command string that cannot be known"),
                    },
                    _ => {}
                }
            }
            if matches!(p, "sudo" | "doas")
                && (o == "-s" || o == "-i" || names(o, "--shell") || names(o, "--login"))
            {
                // The command runs through the user's shell: `-c` semantics.
                let rest: Vec<Field> = args[inner_start.min(args.len())..].to_vec();
                if rest.is_empty() {
                    self.add(
                        Verdict::Yellow,
                        "wrapper.shell",
                        "`sudo -s/-i` opens a root shell".to_string(),
                    );
                    if inv.stdin == Stdin::Fed {
                        self.add(
                            Verdict::Red,
                            "shell.pipe-to-shell",
                            "input is piped or redirected into a shell".to_string(),
                        );
                    }
                } else {
                    match join_known(&rest) {
                        Some(code) => {
                            self.line(&code, st.clone(), depth + 1);
                        }
                        None => self.opaque("sudo -s", "a command that cannot be known"),
                    }
                }
                return Some(st.clone());
            }
            if matches!(p, "sudo") && (o == "-e" || names(o, "--edit")) {
                for f in &args[inner_start.min(args.len())..] {
                    self.path_field(st, f, Access::Write);
                }
                return Some(st.clone());
            }
        }
        match p {
            "timeout" => inner_start += 1, // DURATION
            "flock" => {
                // LOCKFILE or FD, then the command (unless -c gave it).
                if let Some(f) = args.get(inner_start) {
                    self.path_field(st, f, Access::Write);
                }
                inner_start += 1;
            }
            "chroot" => {
                if let Some(f) = args.get(inner_start) {
                    self.path_field(st, f, Access::Read);
                }
                self.add(
                    Verdict::Red,
                    "wrapper.chroot",
                    "`chroot` runs a command in another root".to_string(),
                );
                inner_start += 1;
            }
            _ => {}
        }
        let mut inner: Vec<Field> = Vec::new();
        let mut env = inv.env.clone();
        let mut rest = &args[inner_start.min(args.len())..];
        // sudo and env accept NAME=VALUE before the command.
        if matches!(p, "sudo" | "doas") {
            while let Some(f) = rest.first() {
                match f
                    .known()
                    .as_deref()
                    .and_then(|t| t.split_once('='))
                    .filter(|(n, _)| is_identifier(n))
                {
                    Some((n, v)) => {
                        self.assignment_rules(n, &[Field::lit(v)], st, true);
                        env.push((n.to_string(), Some(v.to_string())));
                        rest = &rest[1..];
                    }
                    None => break,
                }
            }
        }
        inner.extend_from_slice(rest);
        // The items xargs reads, when its stdin is literal text (`echo .env | xargs cat`,
        // `xargs rm <<< /etc/passwd`): split at blanks, as xargs does for unquoted input.
        let from_file = toks
            .opts
            .iter()
            .any(|(o, _)| o == "-a" || names(o, "--arg-file"));
        let literal_text: Option<String> = (p == "xargs" && inv.stdin == Stdin::Fed && !from_file)
            .then(|| self.fed_script.take())
            .flatten()
            .filter(|t| !t.contains(['\'', '"', '\\']));
        if p == "xargs" || p == "parallel" {
            if inner.is_empty() {
                inner.push(Field::lit("echo"));
            }
            // Items read from stdin become more arguments.
            let f = Field::unknown();
            let replace = toks
                .opts
                .iter()
                .any(|(o, _)| o == "-I" || o == "-i" || names(o, "--replace"));
            // A selection piped in (`find . -name x | xargs rm`): the command runs on the
            // paths it prints, as `find -exec CMD {} +` would; those of the pre-push hook's
            // tree are analysed one by one (`guard_tree.rs`).
            let selection = (p == "xargs" && inv.stdin == Stdin::Fed && !from_file)
                .then(|| self.piped_selection.take())
                .flatten();
            if let Some(nodes) = selection {
                let marker = replace.then(|| {
                    toks.opts
                        .iter()
                        .find(|(o, _)| o == "-I")
                        .and_then(|(_, v)| v.as_ref())
                        .and_then(Field::known)
                        .unwrap_or_else(|| "{}".to_string())
                });
                self.run_on_nodes(
                    &st2,
                    &inner,
                    &nodes,
                    &env,
                    depth,
                    super::guard_tree::Runner::Xargs(marker.as_deref()),
                );
            }
            // `-I`: one item per input line, leading blanks dropped (xargs(1)).
            let literal_items: Option<Vec<String>> = literal_text.map(|t| {
                if replace {
                    t.lines()
                        .map(str::trim_start)
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect()
                } else {
                    t.split_whitespace().map(str::to_string).collect()
                }
            });
            if let (Some(items), false) = (&literal_items, replace) {
                inner.extend(items.iter().map(|i| Field::lit(i)));
                let _ = self.invoke(st2, &inner, env, Stdin::Inherited, depth);
                return Some(st.clone());
            }
            if let (Some(items), true) = (&literal_items, replace) {
                let marker = toks
                    .opts
                    .iter()
                    .find(|(o, _)| o == "-I")
                    .and_then(|(_, v)| v.as_ref())
                    .and_then(Field::known)
                    .unwrap_or_else(|| "{}".to_string());
                for item in items {
                    let each: Vec<Field> = inner
                        .iter()
                        .enumerate()
                        .map(|(n, a)| match a.known() {
                            Some(t) if n > 0 => Field::lit(&t.replace(marker.as_str(), item)),
                            _ => a.clone(),
                        })
                        .collect();
                    let _ = self.invoke(st2.clone(), &each, env.clone(), Stdin::Inherited, depth);
                }
                return Some(st.clone());
            }
            if replace {
                // `-I {}`: the placeholder stands for each item.
                let marker = toks
                    .opts
                    .iter()
                    .find(|(o, _)| o == "-I")
                    .and_then(|(_, v)| v.as_ref())
                    .and_then(Field::known)
                    .unwrap_or_else(|| "{}".to_string());
                for a in inner.iter_mut().skip(1) {
                    if let Some((before, after)) = a
                        .known()
                        .as_deref()
                        .and_then(|t| t.split_once(marker.as_str()))
                        .map(|(b, a)| (b.to_string(), a.to_string()))
                    {
                        *a = Field::around_unknown(&before, &after);
                        continue;
                    }
                    if a.known().as_deref() == Some(marker.as_str()) {
                        *a = f.clone();
                    }
                }
            } else {
                inner.push(f);
            }
        }
        if inner.is_empty() {
            if p == "exec" || p == "command" || p == "builtin" {
                return Some(st.clone());
            }
            return Some(st.clone());
        }
        let stdin = if p == "xargs" {
            Stdin::Inherited
        } else {
            inv.stdin
        };
        let after = self.invoke(st2, &inner, env, stdin, depth);
        Some(if p == "exec" || p == "command" || p == "builtin" {
            after
        } else {
            st.clone()
        })
    }

    /// Wrappers whose own options we do not model: the command is not known precisely, so it
    /// is red unless every word after the options is a green-list read.
    pub(crate) fn opaque_wrapper(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        depth: usize,
    ) -> State {
        let p = inv.program.as_str();
        // `-c CMD` / `--command=CMD` (su, runuser, script, flock…) and a lone word that is a
        // whole command line (sg GROUP 'CMD') run through a shell.
        let mut shell_string = false;
        let mut i = 0;
        while i < inv.args.len() {
            let a = &inv.args[i];
            let t = a.known();
            let code = match t.as_deref() {
                Some("-c" | "--command" | "-C") => {
                    i += 1;
                    inv.args.get(i).cloned()
                }
                Some(x) if x.starts_with("--command=") => Some(Field::lit(&x[10..])),
                Some(x)
                    if x.contains(char::is_whitespace)
                        || x.contains([';', '|', '&', '$', '`', '>', '<']) =>
                {
                    Some(a.clone())
                }
                None => Some(a.clone()),
                _ => None,
            };
            if let Some(code) = code {
                shell_string = true;
                match code.known() {
                    Some(c) => {
                        self.line_with_stdin(&c, st.clone(), depth + 1, inv.stdin);
                    }
                    None => self.opaque(p, "a command string that cannot be known"),
                }
            }
            i += 1;
        }
        let runs_shell = matches!(p, "su" | "sg" | "runuser" | "script" | "newgrp");
        if runs_shell && !shell_string && inv.stdin == Stdin::Fed {
            self.add(
                Verdict::Red,
                "shell.pipe-to-shell",
                format!("input is piped or redirected into `{p}`, which starts a shell"),
            );
        }
        self.add(
            Verdict::Yellow,
            &format!("wrapper.{p}"),
            format!("`{p}` runs another command with changed privileges or limits"),
        );
        // Try every suffix of the arguments as the inner command: the worst wins.
        for i in 0..inv.args.len() {
            if inv.args[i].known().is_some_and(|t| t.starts_with('-')) {
                continue;
            }
            let _ = self.invoke(
                st.clone(),
                &inv.args[i..],
                inv.env.clone(),
                inv.stdin,
                depth,
            );
        }
        st.clone()
    }

    /// `env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE…] [COMMAND [ARG…]]`.
    pub(crate) fn env_wrapper(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
        let normalized = normalize_env_args(inv.args);
        let args = &normalized[..];
        let mut i = 0;
        let mut env = inv.env.clone();
        let mut st2 = st.clone();
        let mut split: Option<Option<String>> = None;
        while i < args.len() {
            let Some(t) = args[i].known() else {
                // `NAME=VALUE` whose value is partly unknown is still an assignment.
                if let Some((n, value)) = crate::analysis::assignments::split_assignment(&args[i]) {
                    self.assignment_rules(&n, std::slice::from_ref(&value), st, true);
                    self.assignment_value_paths(st, &value);
                    env.push((n, None));
                    i += 1;
                    continue;
                }
                break;
            };
            if t == "--" {
                // Options end; `NAME=VALUE` assignments still follow.
                i += 1;
                while let Some((n, v)) = args
                    .get(i)
                    .and_then(Field::known)
                    .as_deref()
                    .and_then(|t| t.split_once('='))
                    .filter(|(n, _)| is_identifier(n))
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                {
                    self.assignment_rules(&n, &[Field::lit(&v)], st, true);
                    env.push((n, Some(v)));
                    i += 1;
                }
                break;
            }
            if t == "-u"
                || t == "-C"
                || t == "-S"
                || t == "--unset"
                || t == "--chdir"
                || t == "--split-string"
            {
                let v = args.get(i + 1).cloned();
                if t == "-C" || t == "--chdir" {
                    if let Some(v) = &v {
                        self.path_field(st, v, Access::Read);
                        st2.cwds = st.cwds.clone();
                        st2.enter(v);
                    }
                }
                if t == "-S" || t == "--split-string" {
                    split = Some(v.and_then(|f| f.known()));
                    i += 2;
                    break;
                }
                i += 2;
                continue;
            }
            if let Some(rest) = t
                .strip_prefix("--split-string=")
                .or_else(|| t.strip_prefix("-S").filter(|r| !r.is_empty()))
            {
                split = Some(Some(rest.to_string()));
                i += 1;
                break;
            }
            if let Some(rest) = t.strip_prefix("--chdir=").or_else(|| {
                t.strip_prefix("-C")
                    .filter(|r| !r.is_empty() && !t.starts_with("--"))
            }) {
                self.path_field(st, &Field::lit(rest), Access::Read);
                st2.cwds = st
                    .cwds
                    .iter()
                    .map(|c| c.as_ref().map(|c| crate::analysis::paths::resolve(c, rest)))
                    .collect();
                i += 1;
                continue;
            }
            if t.starts_with('-') && t.len() > 1 {
                i += 1;
                continue;
            }
            if let Some((n, v)) = t.split_once('=').filter(|(n, _)| is_identifier(n)) {
                self.assignment_rules(n, &[Field::lit(v)], st, true);
                env.push((n.to_string(), Some(v.to_string())));
                i += 1;
                continue;
            }
            break;
        }
        self.add(
            Verdict::Yellow,
            "wrapper.env",
            "`env` runs another command or prints the environment".to_string(),
        );
        match split {
            Some(Some(s)) => {
                // -S splits its string into words like a shell line (quotes honoured).
                let mut line = s;
                for a in &args[i..] {
                    line.push(' ');
                    line.push_str(&shell_quote(&a.display()));
                }
                self.line_with_stdin(&line, st2, depth + 1, inv.stdin);
            }
            Some(None) => self.opaque("env -S", "a split string that cannot be known"),
            None => {
                if i < args.len() {
                    let _ = self.invoke(st2, &args[i..], env, inv.stdin, depth);
                }
            }
        }
        st.clone()
    }

    /// `parallel [OPTIONS] COMMAND ::: ARGS`: the command with unknown arguments.
    pub(crate) fn parallel(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
        self.add(
            Verdict::Yellow,
            "wrapper.parallel",
            "`parallel` runs commands".to_string(),
        );
        // GNU parallel has many value-taking options: every suffix before `:::` is tried as the
        // command (the worst wins), with an unknown input and with each literal input after
        // `:::` as its last argument; those inputs are words too.
        let end = inv
            .args
            .iter()
            .position(|a| a.known().is_some_and(|t| t.starts_with(":::")))
            .unwrap_or(inv.args.len());
        let (head, inputs) = inv.args.split_at(end);
        for a in inputs {
            self.path_field(st, a, Access::Any);
        }
        if head
            .iter()
            .all(|a| a.known().is_some_and(|t| t.starts_with('-')))
        {
            self.opaque("parallel", "commands given as input");
            return st.clone();
        }
        let literal: Vec<Field> = inputs
            .iter()
            .filter(|a| a.known().is_some_and(|t| !t.starts_with(":::")))
            .take(64)
            .cloned()
            .collect();
        // A selection piped in (`find . | parallel rm`): each path of the pre-push hook's tree
        // it prints is an input, put in place of `{}` (and the other placeholders fd also
        // has) or appended.
        let selection = (inv.stdin == Stdin::Fed)
            .then(|| self.piped_selection.take())
            .flatten();
        for i in 0..head.len() {
            if head[i].known().is_some_and(|t| t.starts_with('-')) {
                continue;
            }
            if let Some(nodes) = &selection {
                self.run_on_nodes(
                    st,
                    &head[i..],
                    nodes,
                    &inv.env,
                    depth,
                    super::guard_tree::Runner::Fd,
                );
            }
            for last in std::iter::once(Field::unknown()).chain(literal.iter().cloned()) {
                let mut inner: Vec<Field> = head[i..].to_vec();
                inner.push(last);
                let _ = self.invoke(st.clone(), &inner, inv.env.clone(), Stdin::Inherited, depth);
            }
            // parallel runs the command line through a shell.
            if let Some(line) = join_known(&head[i..]) {
                self.line(&line, st.clone(), depth + 1);
            }
        }
        st.clone()
    }

    /// `watch [OPTIONS] COMMAND…`: the words are joined and run by `sh -c` (unless `-x`).
    pub(crate) fn watch(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        spec: &[Opt],
        depth: usize,
    ) -> State {
        self.add(
            Verdict::Yellow,
            "wrapper.watch",
            "`watch` runs a command repeatedly".to_string(),
        );
        let toks = parse_opts_until_command(inv.args, spec);
        let exec = toks
            .opts
            .iter()
            .any(|(o, _)| o == "-x" || names(o, "--exec"));
        let rest = &inv.args[toks.command_at.min(inv.args.len())..];
        if rest.is_empty() {
            return st.clone();
        }
        if exec {
            let _ = self.invoke(st.clone(), rest, inv.env.clone(), Stdin::Inherited, depth);
        } else {
            match join_known(rest) {
                Some(line) => {
                    self.line(&line, st.clone(), depth + 1);
                }
                None => self.opaque("watch", "a command that cannot be known"),
            }
        }
        st.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Red, Yellow};

    #[test]
    fn a_wrapper_is_at_least_yellow_and_as_bad_as_what_it_runs() {
        expect(&[
            ("timeout 5 ls", Yellow, ""),
            ("nice -n 5 cat a", Yellow, ""),
            ("timeout 5 rm -rf build", Red, "rm.recursive-force"),
            ("env X=1 rm -rf build", Red, "rm.recursive-force"),
            ("xargs rm -rf", Red, ""),
            ("nohup curl http://x", Red, "net.client"),
        ]);
    }
}
