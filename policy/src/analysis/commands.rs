//! Simple commands: assignments, the command word, wrappers peeled, then the rules of each
//! program family (DESIGN.md §2/§2a).

use super::paths::Access;
use super::registry::options::{names, parse_opts, Opt, Syntax, Tok};
use super::registry::{self, Effect, Judgement, Walk, Wraps};
use super::words::Field;
use super::{housekeeping, links, Analyzer, State, Stdin};
use crate::action::{AliasExpansion, GitInvocation};
use crate::verdict::Verdict;
use brush_parser::ast;
use std::path::{Path, PathBuf};

mod args;
mod builtins;
mod code;
mod files;
mod functions;
mod git;
mod guard_tree;
mod known;
mod net_hosts;
mod operands;
mod search;
mod signals;
mod tools;
mod wrappers;

#[cfg(test)]
pub(crate) mod testing;

pub(crate) use args::shell_quote;
use args::*;
pub(crate) use guard_tree::HookNode;
use known::system_program;
pub(crate) use known::{host_of, is_exec_assignment, is_exec_var, SHELL_BUILTINS, SYSTEM_BIN_DIRS};

/// The system roots the sandbox grants read + execute and nothing of a session writes
/// (`docs/sandbox.md`): a program there (`/opt/rust/bin/cargo`, `/usr/lib/jvm/…/java`) is an
/// unlisted program, not a reach outside the worktree (DESIGN.md §2a "Words and paths").
const SYSTEM_ROOTS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// Whether the absolute `path`, with `.` and `..` folded and, when it exists, its links
/// resolved, lies under one of [`SYSTEM_ROOTS`].
fn in_system_root(path: &str) -> bool {
    let under = |p: &Path| SYSTEM_ROOTS.iter().any(|r| p.starts_with(r));
    path.starts_with('/')
        && under(&super::paths::lexical(Path::new("/"), path))
        && match std::fs::canonicalize(path) {
            Ok(real) => under(&real),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
}

/// A command ready for its program's rules.
pub(crate) struct Invocation<'a> {
    pub program: String,
    pub args: &'a [Field],
    /// Prefix assignments (name, value when known).
    pub env: Vec<(String, Option<String>)>,
    pub stdin: Stdin,
}

/// git's transport programs, which git installs in the system's `bin` directories too and
/// runs by their bare name (a local `git clone` runs `git-upload-pack REPO` through `sh -c`).
const GIT_TRANSPORTS: &[&str] = &["git-upload-pack", "git-upload-archive", "git-receive-pack"];

impl Analyzer<'_> {
    /// Analyses a simple command; returns the state it may leave (cd, assignments).
    pub(crate) fn simple(
        &mut self,
        s: &ast::SimpleCommand,
        st: State,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        let mut stdin = stdin;
        let mut assigns: Vec<(String, Vec<Field>, bool)> = Vec::new();
        let mut words: Vec<Field> = Vec::new();
        let mut st = st;
        // What it reads on stdin, when literal: the pipe's, unless a redirection replaces it.
        self.fed_script = self.piped_script.clone();
        if let Some(prefix) = &s.prefix {
            for item in &prefix.0 {
                self.prefix_item(item, &st, &mut assigns, &mut words, &mut stdin, depth);
            }
        }
        let has_command_word = s.word_or_name.is_some();
        if let Some(w) = &s.word_or_name {
            self.expand_word_into(&w.value, &st, &mut words);
        }
        if let Some(suffix) = &s.suffix {
            for item in &suffix.0 {
                self.prefix_item(item, &st, &mut assigns, &mut words, &mut stdin, depth);
            }
        }

        if !has_command_word && assigns.is_empty() && words.is_empty() {
            // Redirections alone (`< /dev/null`): the command runs nothing, like the empty one.
            self.add(
                Verdict::Yellow,
                "shell.empty",
                "the command has nothing to run but its redirections",
            );
            return st;
        }
        if !has_command_word || words.is_empty() && !assigns.is_empty() {
            // Bare assignments: neutral when literal, but recorded for later words.
            let numeric: Vec<String> = s
                .prefix
                .iter()
                .flat_map(|p| p.0.iter())
                .filter_map(|item| match item {
                    ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                        match (&a.name, &a.value) {
                            (
                                ast::AssignmentName::VariableName(n),
                                ast::AssignmentValue::Scalar(v),
                            ) if !a.append && super::housekeeping::numeric_special(&v.value) => {
                                Some(n.clone())
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect();
            for (name, fields, _) in &assigns {
                self.assignment_rules(name, fields, &st, false);
                if numeric.contains(name) {
                    // `__code=$?`: a number, never a path.
                    st.vars.insert(name.clone(), vec![None]);
                    continue;
                }
                // Assignment values are words like any other (DESIGN.md §2a).
                for f in fields {
                    for v in split_colon_list(f) {
                        self.path_field(&st, &v, Access::Read);
                    }
                }
                let value = join_known(fields);
                st.vars.insert(name.clone(), vec![value]);
            }
            if has_command_word && words.is_empty() {
                self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-name",
                    "the command word expands to nothing that can be known",
                );
            }
            return st;
        }
        let mut env = Vec::new();
        for (name, fields, _) in &assigns {
            self.assignment_rules(name, fields, &st, true);
            env.push((name.clone(), join_known(fields)));
        }
        if words.is_empty() {
            self.add(
                Verdict::Yellow,
                "cmd.dynamic-name",
                "the command word expands to nothing that can be known",
            );
            return st;
        }
        self.invoke(st, &words, env, stdin, depth)
    }

    fn prefix_item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        st: &State,
        assigns: &mut Vec<(String, Vec<Field>, bool)>,
        words: &mut Vec<Field>,
        stdin: &mut Stdin,
        depth: usize,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                if self.redirect(io, st, depth) {
                    *stdin = Stdin::Fed;
                }
            }
            ast::CommandPrefixOrSuffixItem::Word(w) => self.expand_word_into(&w.value, st, words),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                if !words.is_empty() {
                    // After the command word (`export X=1`, `declare X=1`): an argument.
                    self.expand_word_into(&w.value, st, words);
                    return;
                }
                let name = match &a.name {
                    ast::AssignmentName::VariableName(n) => n.clone(),
                    ast::AssignmentName::ArrayElementName(n, idx) => {
                        self.arith(idx, st);
                        n.clone()
                    }
                };
                let fields = match &a.value {
                    ast::AssignmentValue::Scalar(v) => {
                        // Assignment values are not split and keep `~` expansion after `=`:
                        // the fields of the raw value joined are the value.
                        let fields = self.expand_word(&v.value, st);
                        if fields.len() > 1 {
                            vec![Field::joined(fields)]
                        } else {
                            fields
                        }
                    }
                    ast::AssignmentValue::Array(items) => {
                        // Kept as one value, elements joined by spaces (see `${a[@]}`).
                        let mut elements = Vec::new();
                        for (_, v) in items {
                            elements.extend(self.expand_word(&v.value, st));
                        }
                        vec![Field::joined(elements)]
                    }
                };
                assigns.push((name, fields, a.append));
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                self.out.shape.compound = true;
                // `>(cmd)` as an argument (`tee >(sh)`): cmd reads what is written to it.
                let fed = if matches!(kind, ast::ProcessSubstitutionKind::Write) {
                    Stdin::Fed
                } else {
                    Stdin::Inherited
                };
                self.compound_list_stdin(&sub.list, st.clone(), fed, depth);
                words.push(Field::unknown());
            }
        }
    }

    /// A variable assigned in any form (`X=`, `export`, `declare`, `read`, `printf -v`,
    /// `mapfile`, `getopts`, `let`, a `for` variable, `${X:=…}`): exec-capable names are red
    /// (DESIGN.md §2a "Variables").
    pub(crate) fn assigns_variable(&mut self, name: &str, how: Option<&str>, st: &State) {
        self.config_dir_assignment(name, None, st);
        self.git_config_env(name, None);
        if is_exec_var(name) {
            let how = how.map(|h| format!(" through `{h}`")).unwrap_or_default();
            self.add(
                Verdict::Red,
                "env.exec-variable",
                format!("assigning `{name}`{how} makes programs run code"),
            );
        }
    }

    /// Rules on one assignment (prefix, bare, export, env NAME=VALUE).
    fn assignment_rules(&mut self, name: &str, fields: &[Field], st: &State, prefix: bool) {
        let value = Field::joined(fields.iter().cloned());
        self.config_dir_assignment(name, Some(&value), st);
        self.git_config_env(name, Some(&value));
        if is_exec_assignment(name, value.known_text().as_deref()) {
            self.add(
                Verdict::Red,
                "env.exec-variable",
                format!("assigning `{name}` makes programs run code"),
            );
        }
        if prefix {
            self.add(
                Verdict::Yellow,
                "env.prefix-assignment",
                format!("the command runs with `{name}` changed"),
            );
            for f in fields {
                for v in split_colon_list(f) {
                    self.path_field(st, &v, Access::Read);
                }
            }
        }
    }

    /// Runs the rules for a command whose words are expanded.
    pub(crate) fn invoke(
        &mut self,
        st: State,
        words: &[Field],
        env: Vec<(String, Option<String>)>,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        let Some(first) = words.first() else {
            return st;
        };
        let args = &words[1..];
        match first.known_text() {
            Some(name) => self.invoke_named(st, &name, args, env, stdin, depth),
            None => {
                self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-name",
                    format!(
                        "the program `{}` is not known before it runs",
                        first.display()
                    ),
                );
                if stdin == Stdin::Fed {
                    self.add(
                        Verdict::Red,
                        "shell.pipe-to-shell",
                        format!(
                            "input is piped into `{}`, which may be a shell",
                            first.display()
                        ),
                    );
                }
                self.generic_paths(&st, args, Access::Any);
                // Unknown parts may be empty: `r${X}m` may be `rm`.
                let ev = first.empty_variant();
                if !ev.is_empty() {
                    let mut w = vec![Field::lit(&ev)];
                    w.extend_from_slice(args);
                    let _ = self.invoke(st.clone(), &w, env, stdin, depth);
                } else if !args.is_empty() {
                    let _ = self.invoke(st.clone(), args, env, stdin, depth);
                }
                st
            }
        }
    }

    /// The installed programs the program path `name` reaches through links (on the disk,
    /// or made earlier on the line), each analysed as `PROGRAM ARGS…` by the name of the file
    /// reached when that differs from `name`'s. Only files in a system root count: a file the
    /// agent can write is its own program, judged as such above.
    fn reached_programs(
        &mut self,
        st: &State,
        name: &str,
        args: &[Field],
        env: &[(String, Option<String>)],
        stdin: Stdin,
        depth: usize,
    ) {
        let own = name.rsplit('/').next().unwrap_or(name);
        let mut reached: Vec<String> = Vec::new();
        for cwd in st.cwds.iter().flatten() {
            for (real, _) in super::paths::resolve_all(cwd, name, &self.links) {
                let Some(text) = real.to_str() else { continue };
                let Some(base) = real.file_name().and_then(|b| b.to_str()) else {
                    continue;
                };
                if base != own
                    && in_system_root(text)
                    && system_program(text).is_some()
                    && !reached.iter().any(|r| r == base)
                {
                    reached.push(base.to_string());
                }
            }
        }
        for program in reached {
            let mut words = vec![Field::lit(&program)];
            words.extend_from_slice(args);
            let _ = self.invoke(st.clone(), &words, env.to_vec(), stdin, depth);
        }
    }

    fn invoke_named(
        &mut self,
        st: State,
        name: &str,
        args: &[Field],
        env: Vec<(String, Option<String>)>,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        // bash's `time` keyword takes `-p` and `--` before the command; a command word that is
        // an option is no program: analyse what follows as the command too.
        if name.starts_with('-') {
            self.add(
                Verdict::Yellow,
                "cmd.unlisted",
                format!("`{name}` is not a program"),
            );
            if !args.is_empty() {
                return self.invoke(st, args, env, stdin, depth);
            }
            return st;
        }
        // git's own programs (`/usr/lib/git-core/git-push`, `…/git-core/git`) are git, and so
        // are the transport programs git installs in the system's `bin` directories
        // (`/usr/bin/git-upload-pack`, which a local `git clone` runs).
        let transport = name
            .rsplit('/')
            .next()
            .is_some_and(|b| GIT_TRANSPORTS.contains(&b))
            && system_program(name).is_some();
        if name.starts_with('/')
            && (name.contains("/git-core/") || name.contains("/libexec/git") || transport)
        {
            let base = name.rsplit('/').next().unwrap_or("");
            if base == "git" {
                return self.invoke_named(st, "git", args, env, stdin, depth);
            }
            if let Some(sub) = base.strip_prefix("git-") {
                let mut words = vec![Field::lit("git"), Field::lit(sub)];
                words.extend_from_slice(args);
                return self.invoke(st, &words, env, stdin, depth);
            }
        }
        // What really runs, whatever the name (a link `./git-push -> git`, a copy, a name
        // found on `PATH`): git dispatches on the name it is run by, so `git-<sub>` is also
        // judged as `git <sub>`, and a program path named `git` as git; the dynamic loader
        // runs the program it is given.
        if !st.functions.iter().any(|f| f == name) {
            let base = name.rsplit('/').next().unwrap_or("");
            if let Some(sub) = base.strip_prefix("git-").filter(|s| !s.is_empty()) {
                let mut words = vec![Field::lit("git"), Field::lit(sub)];
                words.extend_from_slice(args);
                let st2 = self.invoke(st.clone(), &words, env.clone(), stdin, depth);
                // A transport program by its bare name (the line a local `git clone` gives
                // `sh -c`) is git's, wherever `PATH` finds it (which is judged): not a
                // program nobody listed whose words may be anything.
                let bare_transport = !name.contains('/') && GIT_TRANSPORTS.contains(&base);
                if bare_transport {
                    self.program_lookup(&st, name, &env);
                    return st2;
                }
            } else if base == "git" && name.contains('/') && system_program(name).is_none() {
                let mut words = vec![Field::lit("git")];
                words.extend_from_slice(args);
                let _ = self.invoke(st.clone(), &words, env.clone(), stdin, depth);
            }
            if is_dynamic_loader(base) {
                return self.loader(st, name, args, env, stdin, depth);
            }
        }
        if !st.functions.iter().any(|f| f == name) {
            self.program_lookup(&st, name, &env);
        }
        let program = if name.contains('/') {
            match system_program(name) {
                Some(p) => p,
                None => {
                    self.add(
                        Verdict::Yellow,
                        "cmd.unlisted-program",
                        format!("`{name}` is a program path nobody listed"),
                    );
                    if !in_system_root(name) {
                        self.path_field(&st, &Field::lit(name), Access::Read);
                    }
                    self.generic_paths(&st, args, Access::Any);
                    // A program path that reaches an installed program (`./mycp`, a link to
                    // `/usr/bin/cp` on the disk or made earlier on the line): the kernel runs
                    // that program, so the line is also judged as it, by the name of the file
                    // reached; the worse verdict wins (review 31's r31-01).
                    self.reached_programs(&st, name, args, &env, stdin, depth);
                    // A program named like a registered one may be a build of it
                    // (`./target/release/tyba approve`): its effects count.
                    if let Some(base) = name.rsplit('/').next().filter(|b| !b.is_empty()) {
                        self.program_effects(&st, base, args);
                    }
                    self.carried_shell_lines(&st, args, stdin, depth);
                    return st;
                }
            }
        } else {
            name.to_string()
        };
        // A name sourced definitions bind: their bodies run (and, should bash lack them, the
        // command itself; both are analysed below).
        self.defined_use(&st, &program, args, depth);
        if st.functions.iter().any(|f| f == &program) {
            // Its body was analysed where it was defined, without arguments; a body that uses
            // its positional parameters is analysed again with this call's.
            self.generic_paths(&st, args, Access::Any);
            self.function_call(&st, &program, args, stdin, depth);
            return st;
        }
        let inv = Invocation {
            program,
            args,
            env,
            stdin,
        };
        self.program(st, inv, depth)
    }

    /// The dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2 [OPTIONS] PROGRAM
    /// ARGS…`, ld.so(8)): a wrapper of the program it loads, which is judged with its
    /// arguments (and, with `--argv0 NAME`, as the program that name selects: git's
    /// `git-<sub>`, an applet). Options that load other code (`--preload`, `--audit`,
    /// `--library-path`, `--glibc-hwcaps-prepend`) are red; an option it does not know is
    /// unlisted and what follows is judged as the program too.
    fn loader(
        &mut self,
        st: State,
        name: &str,
        args: &[Field],
        env: Vec<(String, Option<String>)>,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        self.add(
            Verdict::Yellow,
            "wrapper.loader",
            format!("`{name}` is the dynamic loader: it runs the program it is given"),
        );
        if name.contains('/') && !in_system_root(name) {
            self.path_field(&st, &Field::lit(name), Access::Read);
        }
        let mut argv0: Option<Field> = None;
        let mut i = 0;
        while i < args.len() {
            let Some(w) = args[i].known_text().map(|c| c.into_owned()) else {
                // A word that cannot be known: it may be any option or program.
                self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-args",
                    format!("`{name}` has arguments that cannot be known before it runs"),
                );
                break;
            };
            let (opt, inline) = match w.split_once('=') {
                Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
                _ => (w.clone(), None),
            };
            let takes_value = matches!(
                opt.as_str(),
                "--library-path"
                    | "--inhibit-rpath"
                    | "--audit"
                    | "--preload"
                    | "--argv0"
                    | "--glibc-hwcaps-prepend"
                    | "--glibc-hwcaps-mask"
            );
            let flag = matches!(
                opt.as_str(),
                "--list"
                    | "--verify"
                    | "--inhibit-cache"
                    | "--help"
                    | "--version"
                    | "--list-tunables"
                    | "--list-diagnostics"
            );
            if takes_value {
                let value = match inline {
                    Some(v) => Some(Field::lit(&v)),
                    None => {
                        i += 1;
                        args.get(i).cloned()
                    }
                };
                if matches!(
                    opt.as_str(),
                    "--library-path" | "--audit" | "--preload" | "--glibc-hwcaps-prepend"
                ) {
                    self.add(
                        Verdict::Red,
                        "loader.code",
                        format!("`{name} {opt}` makes the program load other code"),
                    );
                    if let Some(v) = &value {
                        self.generic_paths(&st, std::slice::from_ref(v), Access::Read);
                    }
                }
                if opt == "--argv0" {
                    argv0 = value;
                }
                i += 1;
                continue;
            }
            if flag {
                i += 1;
                continue;
            }
            if w.starts_with('-') && w != "-" {
                self.add(
                    Verdict::Yellow,
                    "cmd.unlisted",
                    format!("`{name}` option `{w}` is not known"),
                );
                i += 1;
                continue;
            }
            break;
        }
        let rest = &args[i.min(args.len())..];
        if rest.is_empty() {
            return st;
        }
        let _ = self.invoke(st.clone(), rest, env.clone(), stdin, depth);
        if let Some(a0) = argv0 {
            // The program loaded sees this name as its argv[0]: a multi-call program (git's
            // `git-<sub>`, busybox) does what the name says.
            let base = a0
                .known_text()
                .map(|t| t.rsplit('/').next().unwrap_or("").to_string());
            let first = match base {
                Some(b) if !b.is_empty() => Field::lit(&b),
                _ => a0,
            };
            let mut words = vec![first];
            words.extend_from_slice(&rest[1..]);
            let _ = self.invoke(st.clone(), &words, env, stdin, depth);
        }
        st
    }

    fn unlisted(&mut self, program: &str) {
        self.add(
            Verdict::Yellow,
            "cmd.unlisted",
            format!("`{program}` is not on the green list"),
        );
    }

    fn dynamic_args_not_green(&mut self, program: &str, args: &[Field]) {
        if args.iter().any(|a| !a.is_known()) {
            self.add(
                Verdict::Yellow,
                "cmd.dynamic-args",
                format!("`{program}` has arguments that cannot be known before it runs"),
            );
        }
    }

    /// The rules of one program, then the links it makes (`links::made_by`), which the
    /// words of later commands are resolved through.
    fn program(&mut self, st: State, inv: Invocation<'_>, depth: usize) -> State {
        let p = inv.program.clone();
        let args = inv.args;
        let mut st = self.program_rules(st, inv, depth);
        if p == "shopt" {
            st.shopt(args);
        }
        if matches!(p.as_str(), "ln" | "cp" | "link" | "mv") {
            for cwd in st.cwds.iter().flatten() {
                let made = links::made_by(&p, args, cwd, &self.links);
                for l in made.links {
                    if !self.links.contains(&l) {
                        self.links.push(l);
                    }
                }
                for t in made.unplaced {
                    if !self.unplaced_links.contains(&t) {
                        self.unplaced_links.push(t);
                    }
                }
            }
        }
        st
    }

    fn program_rules(&mut self, mut st: State, inv: Invocation<'_>, depth: usize) -> State {
        let p = inv.program.as_str();
        let args = inv.args;
        // `shopt -s dotglob` (or an option name that cannot be known) makes later globs match
        // dot files (`rm -rf *` then reaches `.git`); unsetting it may fail, so it stays.
        if p == "shopt"
            && args.iter().any(|a| a.known().as_deref() == Some("-s"))
            && args
                .iter()
                .any(|a| a.known().is_none_or(|t| t == "dotglob"))
        {
            st.dotglob = true;
        }
        self.extra_rules(p, args);
        self.program_effects(&st, p, args);
        if !inv.env.is_empty() && p == "git" {
            // handled in git()
        }
        if inv.stdin == Stdin::Fed {
            self.fed_code_reader(&inv);
        }
        if p == "direnv"
            && args
                .first()
                .and_then(Field::known)
                .is_some_and(|a| matches!(a.as_str(), "allow" | "permit" | "grant"))
        {
            self.add(
                Verdict::Red,
                "persist.scheduler",
                "`direnv allow` approves .envrc code that the person's shell runs later"
                    .to_string(),
            );
        }
        // Checked before the interpreters and wrappers return (`deno run npm:x`, `bun x`).
        let fetch_runner =
            registry::walk(p) == Some(Walk::FetchRunner) || self.is_fetch_runner(p, args);
        if fetch_runner {
            self.add(
                Verdict::Red,
                "net.fetch-and-run",
                format!("`{p}` fetches code from the network and runs it"),
            );
        }
        // Recursions that follow symlinks read wherever they point (the entry's effect).
        let follows = registry::lookup(p).is_some_and(|e| {
            e.effects.iter().any(|x| match x {
                Effect::FollowsLinks {
                    needs,
                    letters,
                    longs,
                } => {
                    let known: Vec<String> = args.iter().filter_map(Field::known).collect();
                    // tar's first word may be its letters without a dash (`tar chf x.tar d`).
                    let bare_first = matches!(p, "tar" | "bsdtar");
                    let short_has = |c: char| {
                        known.iter().enumerate().any(|(i, a)| {
                            let cluster = a.starts_with('-') && !a.starts_with("--")
                                || bare_first && i == 0 && !a.starts_with('-');
                            cluster && a.contains(c)
                        })
                    };
                    needs.is_none_or(short_has)
                        && (letters.chars().any(short_has)
                            || known.iter().any(|a| longs.contains(&a.as_str())))
                }
                _ => false,
            })
        });
        if follows {
            let starts: Vec<Field> = args
                .iter()
                .filter(|a| a.known().is_none_or(|t| !t.starts_with('-')))
                .cloned()
                .collect();
            let starts = if starts.is_empty() {
                vec![Field::lit(".")]
            } else {
                starts
            };
            // Metadata changes follow the links to change what they lead to.
            let changes = registry::walk(p) == Some(Walk::Metadata);
            self.symlinks_out(&st, &starts, changes);
        }
        // The shell expands a glob by reading its directory, whatever the command does with
        // the result (`echo /tmp/*` lists /tmp).
        for a in args.iter().filter(|a| a.has_glob()) {
            self.path_field(&st, a, Access::Read);
        }
        // Shell housekeeping (DESIGN.md §2a): neutral, or analysed as what it wraps.
        if let Some(st2) = self.housekeeping(&st, &inv, depth) {
            return st2;
        }
        // Wrappers: the worse of yellow and the inner command.
        if let Some(st2) = self.wrapper(&st, &inv, depth) {
            return st2;
        }
        if registry::walk(p) == Some(Walk::Shell) {
            self.shell(&st, &inv, depth);
            return st;
        }
        if let Some(flags) = registry::interpreter_flags(p) {
            self.interpreter(&st, &inv, flags, depth);
            return st;
        }
        match p {
            "cd" | "pushd" | "popd" => return self.cd(st, &inv),
            "eval" => return self.eval(&st, args, depth, inv.stdin),
            "source" | "." => return self.source(st, &inv, depth),
            "read" | "mapfile" | "readarray" | "getopts" | "let" => {
                return self.assigning_builtin(st, &inv, depth);
            }
            "printf" => {
                if let Some(name) = args.iter().filter_map(Field::known).find_map(|t| {
                    t.strip_prefix("-v")
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                }) {
                    let base = name.split('[').next().unwrap_or("").to_string();
                    self.assigns_variable(&base, Some("printf -v"), &st);
                }
                if let Some(i) = args.iter().position(|a| a.known().as_deref() == Some("-v")) {
                    if let Some(name) = args.get(i + 1).and_then(Field::known) {
                        let base = name.split('[').next().unwrap_or("").to_string();
                        self.assigns_variable(&base, Some("printf -v"), &st);
                    } else if args.get(i + 1).is_some() {
                        self.opaque("printf -v", "a variable name that cannot be known");
                    }
                }
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                return self.declare(st, &inv)
            }
            "unset" => {
                // bash(1): `unset [-fv] [-n] [--] NAME…`; `-f` removes functions (an agent's
                // wrapper removes its own shadowing definitions this way), after which the
                // name is the program again. Only a plain `-f` does: bash refuses `-fv` and
                // `-f -v`, and then the definitions stay (kept here too, so a call is still
                // analysed as them).
                let mut st = st;
                let known: Vec<String> = args.iter().filter_map(Field::known).collect();
                let opts: Vec<&String> = known
                    .iter()
                    .take_while(|n| n.starts_with('-') && *n != "--")
                    .collect();
                let functions = opts.iter().any(|o| *o == "-f")
                    && opts.iter().all(|o| *o == "-f")
                    && known.len() == args.len();
                let mut options = true;
                for a in args {
                    if let Some(n) = a.known() {
                        if options && n.starts_with('-') {
                            options = n != "--";
                            continue;
                        }
                        if functions {
                            st.functions.retain(|f| *f != n);
                            st.defs.retain(|d| {
                                d.name != n || d.kind != super::housekeeping::DefKind::Function
                            });
                        } else {
                            st.vars.insert(n, vec![None]);
                        }
                    }
                }
                return st;
            }
            "alias" => {
                self.unlisted(p);
                for a in args {
                    if let Some((_, v)) = a.known().as_deref().and_then(|t| t.split_once('=')) {
                        self.line(v, st.clone(), depth + 1);
                    } else if !a.is_known() {
                        self.opaque("alias", "an alias whose text cannot be known");
                    }
                }
                return st;
            }
            "trap" => {
                self.unlisted(p);
                if let Some(a) = args
                    .iter()
                    .find(|a| a.known().is_none_or(|t| !t.starts_with('-')))
                {
                    match a.known() {
                        Some(code) => {
                            self.line(&code, st.clone(), depth + 1);
                        }
                        None => self.opaque("trap", "a trap whose code cannot be known"),
                    }
                }
                return st;
            }
            "git" | "hub" => {
                if p == "hub" {
                    self.add(
                        Verdict::Red,
                        "net.client",
                        "`hub` uses the network".to_string(),
                    );
                }
                self.git(&st, &inv, depth);
                return st;
            }
            _ => {}
        }
        if self.vault(&st, &inv) {
            return st;
        }
        if registry::walk(p) == Some(Walk::Network) {
            self.network(&st, &inv);
            return st;
        }
        if fetch_runner {
            self.generic_paths(&st, args, Access::Any);
            return st;
        }
        if self.server(p, args) {
            self.generic_paths(&st, args, Access::Any);
            return st;
        }
        let kind = registry::walk(p);
        match p {
            _ if kind == Some(Walk::Remove) => self.rm(&st, &inv),
            _ if kind == Some(Walk::Metadata) => self.chmod(&st, &inv),
            _ if kind == Some(Walk::Writer) => self.writer(&st, &inv),
            "find" => self.find(&st, &inv, depth),
            "fd" | "fdfind" => self.fd(&st, &inv, depth),
            _ if kind == Some(Walk::Awk) => self.awk(&st, &inv),
            _ if kind == Some(Walk::Archiver) => self.archiver(&st, &inv),
            _ if kind == Some(Walk::PackageTool) => {
                self.package_tool(&st, &inv);
                // `uv run CMD`, `poetry run CMD`, `pnpm exec CMD`, `bundle exec CMD`…: wrappers
                // (`npm run`, `yarn run`, `bun run` take script names; `cargo`/`go run` build).
                let first = args
                    .iter()
                    .position(|a| a.known().is_some_and(|t| !t.starts_with('-')));
                if let Some(i) = first {
                    let sub = args[i].known().unwrap_or_default();
                    let runs_argv = match p {
                        "cargo" | "go" => false,
                        "npm" | "yarn" => sub == "exec",
                        _ => matches!(sub.as_str(), "run" | "exec" | "x" | "tool"),
                    };
                    if runs_argv {
                        let rest = Invocation {
                            program: p.to_string(),
                            args: &args[i + 1..],
                            env: inv.env.clone(),
                            stdin: inv.stdin,
                        };
                        self.opaque_wrapper(&st, &rest, depth);
                    }
                }
            }
            _ if kind == Some(Walk::Scheduler) => {
                self.add(
                    Verdict::Red,
                    "persist.scheduler",
                    format!("`{p}` schedules code that runs outside the sandbox later"),
                );
                self.generic_paths(&st, args, Access::Any);
            }
            "systemctl"
                if args
                    .iter()
                    .any(|a| a.known().is_some_and(|t| t == "--user")) =>
            {
                self.add(
                    Verdict::Red,
                    "persist.scheduler",
                    "`systemctl --user` manages services that run outside the sandbox".to_string(),
                );
            }
            "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "zstd" | "unzstd" => {
                self.compressor(&st, &inv)
            }
            "kill" | "pkill" | "killall" | "killall5" => self.signals(&st, p, args),
            "fuser" => {
                self.signals(&st, p, args);
                self.generic_paths(&st, args, Access::Any);
            }
            "env" | "printenv" => {
                self.unlisted(p);
            }
            "set" => {
                // `set -- WORDS` sets the positional parameters: the words are words, and
                // later `$@`, `$1`… expand to them. Literal words after harmless options are
                // neutral like a bare assignment of a literal (DESIGN.md §2a "Variables");
                // anything else (`set` alone prints every variable) is not green.
                let (change, options) = housekeeping::set_params(args);
                let opts: Option<Vec<String>> = args[..options].iter().map(Field::known).collect();
                let neutral_opts =
                    options == 0 || opts.is_some_and(|o| housekeeping::set_neutral(&o));
                match change {
                    housekeeping::SetParams::To(words)
                        if neutral_opts && words.iter().all(Field::is_known) => {}
                    _ => self.unlisted(p),
                }
                self.generic_paths(&st, args, Access::Any);
                match change {
                    housekeeping::SetParams::To(words) => st.set_params(words),
                    housekeeping::SetParams::Unknown => st.params = Some(vec![None]),
                    housekeeping::SetParams::Unchanged => {}
                }
            }
            "shift" => {
                self.unlisted(p);
                let n = match args {
                    [] => Some(1),
                    [n] => n.known().and_then(|t| t.parse::<usize>().ok()),
                    _ => None,
                };
                st.shift_params(n);
            }
            "command" => {
                // `command -v x` / `-V`: a lookup like `type`.
                if !args
                    .iter()
                    .any(|a| a.known().is_some_and(|t| t == "-v" || t == "-V"))
                {
                    self.unlisted(p);
                }
            }
            _ => {
                if let Some(entry) = registry::judged(p) {
                    let j = entry.judge(p, args);
                    self.judged(&st, j, args);
                    self.dynamic_args_not_green(p, args);
                } else {
                    self.unlisted(p);
                    self.generic_paths(&st, args, Access::Any);
                    self.carried_shell_lines(&st, args, inv.stdin, depth);
                }
            }
        }
        st
    }

    pub(crate) fn opaque(&mut self, what: &str, reason: &str) {
        self.out.shape.opaque = true;
        self.add(
            Verdict::Red,
            "shell.dynamic-code",
            format!(
                "{what}: {reason}; code assembled at run time is treated like a pipe into a shell"
            ),
        );
    }
}

/// Whether `base`, a program's file name, is the dynamic loader (ld.so(8): `ld.so`,
/// `ld-linux-x86-64.so.2`, `ld-linux-aarch64.so.1`, `ld64.so.2`, musl's `ld-musl-x86_64.so.1`).
fn is_dynamic_loader(base: &str) -> bool {
    base == "ld.so" || (base.starts_with("ld-") || base.starts_with("ld64")) && base.contains(".so")
}
