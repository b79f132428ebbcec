//! Simple commands: assignments, the command word, wrappers peeled, then the rules of each
//! program family (DESIGN.md §2/§2a).

use super::green::{self, names, parse_opts, OptSpec, Tok};
use super::paths::Access;
use super::words::Field;
use super::{Analyzer, State, Stdin};
use crate::action::{AliasExpansion, GitInvocation};
use crate::verdict::Verdict;
use brush_parser::ast;
use std::path::{Path, PathBuf};

/// Variables that make programs run code (DESIGN.md §2a), red when assigned in any form.
const EXEC_VARS: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RIPGREP_CONFIG_PATH",
    "LESSOPEN",
    "LESSCLOSE",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PROXY_COMMAND",
    "RUBYOPT",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "PS4",
];

/// Whether assigning `name` makes programs run code (DESIGN.md §2a's list, `GIT_CONFIG*`,
/// exported bash functions `BASH_FUNC_*`): red in any form of assignment.
pub(crate) fn is_exec_var(name: &str) -> bool {
    EXEC_VARS.contains(&name) || name.starts_with("GIT_CONFIG") || name.starts_with("BASH_FUNC_")
}

/// bash's builtin commands (bash(1) "SHELL BUILTIN COMMANDS"): what `builtin NAME` may run.
pub(crate) const SHELL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

/// Shells that take `-c STRING`, a script file, or stdin.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh", "rbash", "yash",
    "posh",
];

/// Network clients: red whatever they do (DESIGN.md §2 "network, always").
const NET_CLIENTS: &[&str] = &[
    "curl",
    "nc.openbsd",
    "nc.traditional",
    "slogin",
    "autossh",
    "sshfs",
    "sshpass",
    "mtr",
    "iperf",
    "iperf3",
    "nping",
    "arping",
    "axel",
    "curlie",
    "wscat",
    "pg_dump",
    "pg_dumpall",
    "pg_restore",
    "pg_basebackup",
    "mysqldump",
    "sqlplus",
    "influx",
    "mongodump",
    "mongorestore",
    "redis-benchmark",
    "ftpget",
    "ftpput",
    "ncftp",
    "rsh",
    "rlogin",
    "rcp",
    "drill",
    "kdig",
    "wg",
    "openvpn",
    "tailscale",
    "bore",
    "lt",
    "wget",
    "wget2",
    "ssh",
    "scp",
    "sftp",
    "nc",
    "ncat",
    "netcat",
    "socat",
    "telnet",
    "ftp",
    "tftp",
    "aria2c",
    "http",
    "https",
    "xh",
    "httpie",
    "lynx",
    "w3m",
    "links",
    "elinks",
    "mosh",
    "ping",
    "ping6",
    "dig",
    "nslookup",
    "host",
    "whois",
    "traceroute",
    "tracepath",
    "nmap",
    "psql",
    "mysql",
    "mariadb",
    "mongo",
    "mongosh",
    "redis-cli",
    "sqlcmd",
    "cqlsh",
    "clickhouse-client",
    "gh",
    "glab",
    "hub",
    "aws",
    "gcloud",
    "gsutil",
    "az",
    "kubectl",
    "helm",
    "heroku",
    "fly",
    "flyctl",
    "vercel",
    "netlify",
    "doctl",
    "ssh-copy-id",
    "rclone",
    "s3cmd",
    "ftp-ssl",
    "lftp",
    "smbclient",
    "openssl",
    "torsocks",
    "proxychains",
    "proxychains4",
    "nsupdate",
    "ldapsearch",
    "snmpget",
    "websocat",
    "grpcurl",
    "docker",
    "podman",
    "nerdctl",
    "terraform",
    "pulumi",
    "ansible",
    "ansible-playbook",
    "ngrok",
    "cloudflared",
];

/// Runners that fetch code from the network and execute it.
const FETCH_RUNNERS: &[&str] = &["npx", "uvx", "pnpx", "bunx", "pipx"];

/// Interpreters that take inline code.
fn interpreter(program: &str) -> Option<&'static [&'static str]> {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match base {
        "python" | "pypy" => &["-c"],
        "node" | "nodejs" => &["-e", "--eval", "-p", "--print"],
        "deno" | "bun" => &["-e", "--eval", "-p", "--print"],
        "perl" => &["-e", "-E"],
        "ruby" | "jruby" => &["-e"],
        "php" => &["-r"],
        "lua" | "luajit" => &["-e"],
        "Rscript" | "R" => &["-e"],
        "julia" => &["-e", "--eval"],
        "tclsh" | "wish" => &[],
        "pwsh" | "powershell" => &["-c", "-Command", "-command"],
        "osascript" => &["-e"],
        "guile" => &["-c"],
        "elixir" | "erl" => &["-e", "-eval"],
        "swift" => &["-e"],
        "groovy" => &["-e"],
        "scala" => &["-e"],
        "jshell" => &[],
        "irb" => &[],
        _ => return None,
    })
}

/// Extracts the host of a URL-like string (`https://host:port/…`, `user@host:path`).
pub(crate) fn host_of(s: &str) -> Option<String> {
    if let Some((_, rest)) = s.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = authority.rsplit('@').next().unwrap_or("");
        if !host.is_empty() {
            return Some(host.to_string());
        }
    }
    None
}

/// System directories whose programs are matched by name (DESIGN.md §2a "Words and paths").
pub(crate) const SYSTEM_BIN_DIRS: &[&str] =
    &["/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"];

/// Peels `/proc/self/root`, `/proc/thread-self/root`, `/proc/<pid>/root` and folds the path;
/// returns the program name when the result lies directly in a system bin directory.
fn system_program(path: &str) -> Option<String> {
    // Only an absolute path names a system program: `bin/cat` is a file in the worktree.
    if !path.starts_with('/') {
        return None;
    }
    let mut p = super::paths::lexical(Path::new("/"), path);
    loop {
        let s = p.to_string_lossy().into_owned();
        let rest = ["/proc/self/root", "/proc/thread-self/root"]
            .iter()
            .find_map(|pre| s.strip_prefix(pre).map(str::to_string))
            .or_else(|| {
                let r = s.strip_prefix("/proc/")?;
                let (pid, tail) = r.split_once('/')?;
                (pid.bytes().all(|b| b.is_ascii_digit()) && !pid.is_empty())
                    .then(|| tail.strip_prefix("root").map(str::to_string))?
            });
        match rest {
            Some(r) if r.is_empty() || r.starts_with('/') => {
                p = PathBuf::from(if r.is_empty() { "/".to_string() } else { r })
            }
            _ => break,
        }
    }
    // The directory is resolved physically (`/usr/bin/X11` is a link to `.` on Debian), the
    // program name is kept (`/bin/sh` may be a link to `dash`, and is still `sh`).
    let parent_lex = p.parent()?;
    let parent_phys = super::paths::resolve(Path::new("/"), &parent_lex.to_string_lossy());
    let parent = parent_lex.to_string_lossy().into_owned();
    if SYSTEM_BIN_DIRS.contains(&parent.as_str())
        || SYSTEM_BIN_DIRS
            .iter()
            .any(|d| super::paths::resolve(Path::new("/"), d) == parent_phys)
    {
        p.file_name().map(|n| n.to_string_lossy().into_owned())
    } else {
        None
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
        if let Some(prefix) = &s.prefix {
            for item in &prefix.0 {
                self.prefix_item(item, &st, &mut assigns, &mut words, &mut stdin, depth);
            }
        }
        let has_command_word = s.word_or_name.is_some();
        if let Some(w) = &s.word_or_name {
            words.extend(self.expand_word(&w.value, &st));
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
            ast::CommandPrefixOrSuffixItem::Word(w) => words.extend(self.expand_word(&w.value, st)),
            ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                if !words.is_empty() {
                    // After the command word (`export X=1`, `declare X=1`): an argument.
                    words.extend(self.expand_word(&w.value, st));
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
    pub(crate) fn assigns_variable(&mut self, name: &str, how: Option<&str>, _st: &State) {
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
        if is_exec_var(name) {
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
        match first.known() {
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
        // git's own programs (`/usr/lib/git-core/git-push`, `…/git-core/git`) are git.
        if name.starts_with('/') && (name.contains("/git-core/") || name.contains("/libexec/git")) {
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
                    self.path_field(&st, &Field::lit(name), Access::Read);
                    self.generic_paths(&st, args, Access::Any);
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
            // Its body was analysed where it was defined.
            self.generic_paths(&st, args, Access::Any);
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

    /// Checks every operand-like word as a path: operands, `--opt=VALUE` values, `key=VALUE`
    /// values and attached short-option values that look like paths.
    pub(crate) fn generic_paths(&mut self, st: &State, args: &[Field], access: Access) {
        for f in args {
            for cand in path_candidates(f) {
                let cand = self.tilde_value(&cand, f);
                self.path_field(st, &cand, access);
            }
        }
    }

    /// bash expands `~` after the `=` of `key=~/x` and `--opt=~/x` words: a value taken out of
    /// such a word gets that expansion.
    fn tilde_value(&self, cand: &Field, from: &Field) -> Field {
        if cand == from {
            return cand.clone();
        }
        match (cand.known(), self.ctx.home) {
            (Some(t), Some(h)) if t == "~" || t.starts_with("~/") => {
                Field::lit(&format!("{}{}", h.display(), &t[1..]))
            }
            _ => cand.clone(),
        }
    }

    /// A recursion that follows symlinks reads wherever they point: look for symlinks leading
    /// out of the worktree below the start paths (bounded; too many entries is not green).
    fn symlinks_out(&mut self, st: &State, starts: &[Field]) {
        const MAX_ENTRIES: usize = 4096;
        let mut queue: Vec<PathBuf> = Vec::new();
        for s in starts {
            match s.known() {
                Some(t) => {
                    for cwd in st.cwds.iter().flatten() {
                        queue.push(super::paths::resolve(cwd, &t));
                    }
                }
                None => {
                    self.add(
                        Verdict::Yellow,
                        "path.unresolved",
                        "a recursion that follows symlinks from a path that cannot be known"
                            .to_string(),
                    );
                    return;
                }
            }
        }
        let worktree = self.ctx.worktree.to_path_buf();
        let mut seen = 0usize;
        while let Some(dir) = queue.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                seen += 1;
                if seen > MAX_ENTRIES {
                    self.add(
                        Verdict::Yellow,
                        "path.symlink-scan",
                        "a recursion that follows symlinks over more entries than tyba checks"
                            .to_string(),
                    );
                    return;
                }
                let Ok(ft) = e.file_type() else { continue };
                let path = e.path();
                if ft.is_symlink() {
                    let target = super::paths::resolve(&dir, &e.file_name().to_string_lossy());
                    if !target.starts_with(&worktree) {
                        self.add(
                            Verdict::Red,
                            "path.outside-worktree",
                            format!("the recursion follows the symlink `{}` out of the worktree (to {})", path.display(), target.display()),
                        );
                        return;
                    }
                } else if ft.is_dir() && e.file_name() != ".git" {
                    queue.push(path);
                }
            }
        }
    }

    /// `--opt=VALUE` words of green-list commands whose value looks like a path: the value is
    /// a word like any other (DESIGN.md §2a), whatever the option.
    fn option_value_paths(&mut self, st: &State, args: &[Field]) {
        for f in args {
            let Some(t) = f.known() else { continue };
            let Some((name, v)) = t.strip_prefix("--").and_then(|l| l.split_once('=')) else {
                continue;
            };
            // Patterns, formats and colours are not paths (`rg --glob=.env` names no file).
            let pattern_valued = [
                "glob",
                "include",
                "exclude",
                "regexp",
                "pattern",
                "format",
                "color",
                "colour",
                "replace",
                "type",
                "sort",
                "label",
                "separator",
                "delimiter",
            ]
            .iter()
            .any(|k| name.contains(k))
                && !name.ends_with("-from");
            if pattern_valued || v.is_empty() {
                continue;
            }
            let cand = self.tilde_value(&Field::lit(v), f);
            self.path_field(st, &cand, Access::Read);
        }
    }

    fn judged(&mut self, st: &State, j: green::Judgement, args: &[Field]) {
        self.option_value_paths(st, args);
        if let Some(starts) = &j.follows_links {
            self.symlinks_out(st, starts);
        }
        for f in j.findings {
            self.out.add(f);
        }
        if j.reads_cwd {
            self.path_field(st, &Field::lit("."), Access::Read);
        }
        for (f, a) in j.paths {
            self.path_field(st, &f, a);
        }
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

    /// The rules of one program.
    fn program(&mut self, st: State, inv: Invocation<'_>, depth: usize) -> State {
        let p = inv.program.as_str();
        let args = inv.args;
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
        let fetch_runner = FETCH_RUNNERS.contains(&p) || self.is_fetch_runner(p, args);
        if fetch_runner {
            self.add(
                Verdict::Red,
                "net.fetch-and-run",
                format!("`{p}` fetches code from the network and runs it"),
            );
        }
        // Recursions that follow symlinks read wherever they point.
        let known_args: Vec<String> =
            if matches!(p, "ls" | "du" | "tree" | "tar" | "bsdtar" | "cp" | "rsync") {
                args.iter().filter_map(Field::known).collect()
            } else {
                Vec::new()
            };
        let short_has = |c: char| {
            known_args
                .iter()
                .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c))
        };
        let follows = match p {
            "ls" => {
                short_has('R')
                    && (short_has('L') || known_args.iter().any(|a| a == "--dereference"))
            }
            "du" => short_has('L') || known_args.iter().any(|a| a == "--dereference"),
            "tree" => short_has('l'),
            "tar" | "bsdtar" => short_has('h') || known_args.iter().any(|a| a == "--dereference"),
            "cp" | "rsync" => {
                short_has('L')
                    || known_args
                        .iter()
                        .any(|a| a == "--dereference" || a == "--copy-links")
            }
            _ => false,
        };
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
            self.symlinks_out(&st, &starts);
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
        if SHELLS.contains(&p) {
            self.shell(&st, &inv, depth);
            return st;
        }
        if let Some(flags) = interpreter(p) {
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
        if NET_CLIENTS.contains(&p) {
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
        match p {
            "rm" | "unlink" | "rmdir" | "shred" => self.rm(&st, &inv),
            "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" => self.chmod(&st, &inv),
            "cp" | "mv" | "ln" | "install" | "tee" | "touch" | "mkdir" | "truncate" | "dd"
            | "rsync" | "mkfifo" | "mknod" => self.writer(&st, &inv),
            "find" => self.find(&st, &inv, depth),
            "fd" | "fdfind" => self.fd(&st, &inv, depth),
            "sed" => {
                let j = green::judge_sed(args);
                self.judged(&st, j, args);
                if args.iter().any(|a| !a.is_known())
                    && args
                        .iter()
                        .all(|a| a.known().is_none_or(|t| t.starts_with('-')))
                {
                    self.opaque("sed", "a sed script that cannot be known");
                }
                self.dynamic_args_not_green(p, args);
            }
            "grep" | "egrep" | "fgrep" => {
                let j = green::judge_grep(args);
                self.judged(&st, j, args);
                self.dynamic_args_not_green(p, args);
            }
            "rg" => {
                let j = green::judge_rg(args);
                self.judged(&st, j, args);
                self.dynamic_args_not_green(p, args);
            }
            "jq" => {
                let j = green::judge_jq(args);
                self.judged(&st, j, args);
                self.dynamic_args_not_green(p, args);
            }
            "awk" | "gawk" | "mawk" | "nawk" => self.awk(&st, &inv),
            "tar" | "bsdtar" | "zip" | "unzip" | "7z" => self.archiver(&st, &inv),
            "npm" | "pnpm" | "yarn" | "pip" | "pip3" | "bun" | "uv" | "poetry" | "cargo" | "go"
            | "deno" | "pipenv" | "bundle" | "conda" | "mamba" | "micromamba" | "pyenv"
            | "rbenv" | "asdf" | "opam" | "stack" | "pixi" | "hatch" | "pdm" | "rye" => {
                self.package_tool(&st, &inv);
                // `uv run CMD`, `poetry run CMD`, `pnpm exec CMD`, `bundle exec CMD`…: wrappers
                // (`npm run`, `yarn run`, `bun run` take script names; `cargo`/`go run` build).
                let first = args
                    .iter()
                    .position(|a| a.known().is_some_and(|t| !t.starts_with('-')));
                if let Some(i) = first {
                    let sub = args[i].known().unwrap_or_default();
                    let runs_argv = match p {
                        "cargo" | "go" | "deno" | "bun" => false,
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
            "crontab" | "at" | "batch" | "systemd-run" | "launchctl" => {
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
            "kill" | "pkill" | "killall" => {
                self.unlisted(p);
                if args.iter().any(|a| a.known().is_some_and(|t| t == "-1")) && p == "kill" {
                    self.add(
                        Verdict::Red,
                        "proc.kill-all",
                        "`kill -1` signals every process of the user".to_string(),
                    );
                }
            }
            "env" | "printenv" => {
                self.unlisted(p);
            }
            "set" => {
                // `set -- WORDS` sets the positional parameters: the words are words.
                self.unlisted(p);
                self.generic_paths(&st, args, Access::Any);
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
                if let Some(j) = green::judge_simple(p, args) {
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

    /// Programs that execute what they read on a fed stdin: REPLs and command interpreters
    /// (gdb, sqlite3's `.shell`, ex/vim, m4's `syscmd`, dc's `!`…), and any code-reading tool
    /// told to take its program from stdin (`awk -f -`, `sed -f /dev/stdin`, `make -f -`).
    fn fed_code_reader(&mut self, inv: &Invocation<'_>) {
        const REPLS: &[&str] = &[
            "gdb", "lldb", "sqlite3", "ex", "ed", "red", "expect", "m4", "dc", "ghci", "racket",
            "sbcl", "clisp", "ocaml", "iex", "kotlinc", "scala", "jshell", "irb", "guile", "csi",
            "ipython", "bpython", "tclsh", "wish", "jq-repl", "sage",
        ];
        const CODE_FROM_FILE: &[&str] = &[
            "awk", "gawk", "mawk", "nawk", "sed", "make", "gmake", "deno", "bun", "node", "perl",
            "ruby", "php", "lua", "Rscript", "julia",
        ];
        let p = inv.program.as_str();
        let known: Vec<String> = inv.args.iter().filter_map(Field::known).collect();
        let vim_batch = matches!(p, "vim" | "nvim" | "vi" | "view")
            && known.iter().any(|a| {
                a == "-s" || a == "-es" || a == "-e" || a == "-Es" || a == "--headless" || a == "-"
            });
        let sqlite_reads =
            p == "sqlite3" && known.iter().filter(|a| !a.starts_with('-')).count() <= 1;
        let repl = REPLS.contains(&p) && (p != "sqlite3" || sqlite_reads);
        let from_stdin = CODE_FROM_FILE.contains(&p)
            && known
                .iter()
                .any(|a| is_stdin_path(a) || a == "-f-" || a == "--file=-");
        if repl || vim_batch || from_stdin {
            self.add(
                Verdict::Red,
                "shell.pipe-to-interpreter",
                format!("input is piped or redirected into `{p}`, which runs it as commands"),
            );
        }
    }

    /// A program nobody listed whose arguments hold a shell and its `-c` string (a launcher
    /// like `/proc/self/exe --run-as-process-setup … /bin/bash -lc CMD`): the string is the
    /// command that will run, so it is analysed too; approving the launcher must not hide it.
    fn carried_shell_lines(&mut self, st: &State, args: &[Field], stdin: Stdin, depth: usize) {
        for (i, a) in args.iter().enumerate() {
            let Some(t) = a.known() else { continue };
            let base = t.rsplit('/').next().unwrap_or("");
            if SHELLS.contains(&base) {
                let _ = self.invoke(st.clone(), &args[i..], Vec::new(), stdin, depth);
                return;
            }
        }
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

    /// Wrappers that run another command. Returns the state when `inv` was one.
    fn wrapper(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> Option<State> {
        let p = inv.program.as_str();
        let args = inv.args;
        let (spec, name): (OptSpec, &str) = match p {
            "sudo" | "doas" => (
                OptSpec {
                    short_val: "ugCDhprtUTc",
                    long_val: &[
                        "user",
                        "group",
                        "close-from",
                        "chdir",
                        "host",
                        "prompt",
                        "role",
                        "type",
                        "other-user",
                        "command-timeout",
                        "login-class",
                    ],
                },
                p,
            ),
            "nice" => (
                OptSpec {
                    short_val: "n",
                    long_val: &["adjustment"],
                },
                p,
            ),
            "ionice" => (
                OptSpec {
                    short_val: "cnp",
                    long_val: &["class", "classdata", "pid", "pgid", "uid"],
                },
                p,
            ),
            "timeout" => (
                OptSpec {
                    short_val: "sk",
                    long_val: &["signal", "kill-after"],
                },
                p,
            ),
            "stdbuf" => (
                OptSpec {
                    short_val: "ioe",
                    long_val: &["input", "output", "error"],
                },
                p,
            ),
            "time" => (
                OptSpec {
                    short_val: "fo",
                    long_val: &["format", "output"],
                },
                p,
            ),
            "nohup" | "setsid" | "builtin" => (
                OptSpec {
                    short_val: "",
                    long_val: &[],
                },
                p,
            ),
            "exec" => (
                OptSpec {
                    short_val: "a",
                    long_val: &[],
                },
                p,
            ),
            "command"
                if !args
                    .iter()
                    .any(|a| a.known().is_some_and(|t| t == "-v" || t == "-V")) =>
            {
                (
                    OptSpec {
                        short_val: "",
                        long_val: &[],
                    },
                    p,
                )
            }
            "env" => return Some(self.env_wrapper(st, inv, depth)),
            "xargs" => (
                // `-e[EOF]`, `-i[R]`, `-l[N]` and `--eof`, `--replace`, `--max-lines` take
                // optional values that must be attached: never the next word.
                OptSpec {
                    short_val: "adEILnPs",
                    long_val: &[
                        "arg-file",
                        "delimiter",
                        "max-args",
                        "max-procs",
                        "max-chars",
                        "process-slot-var",
                    ],
                },
                p,
            ),
            "parallel" => return Some(self.parallel(st, inv, depth)),
            "watch" => return Some(self.watch(st, inv, depth)),
            "chroot" => (
                OptSpec {
                    short_val: "",
                    long_val: &["userspec", "groups"],
                },
                p,
            ),
            // Wrappers whose options are not modelled one by one: every suffix is tried as the
            // command, and `-c STRING` is a shell string.
            "taskset" | "chrt" | "prlimit" | "numactl" | "cgexec" | "setpriv" | "runuser"
            | "su" | "sg" | "newgrp" | "strace" | "ltrace" | "valgrind" | "firejail" | "bwrap"
            | "unshare" | "nsenter" | "script" | "flock" | "sem" | "niceload" | "xvfb-run"
            | "dbus-launch" | "dbus-run-session" | "systemd-inhibit" | "caffeinate" | "proot"
            | "tsp" | "ifne" | "entr" | "pkexec" | "mise" | "rtx" | "direnv" | "nix-shell"
            | "perf" | "gdb" | "lldb" | "catchsegv" | "unbuffer" | "chronic" | "fakeroot"
            | "faketime" | "firejail-run" | "torify" | "with-contenv" | "s6-setuidgid"
            | "chpst" | "setarch" | "linux32" | "linux64" | "ionice-run" | "cpulimit"
            | "trickle" | "tmux" | "screen" | "xterm" | "corepack" | "dtach" | "abduco" => {
                return Some(self.opaque_wrapper(st, inv, depth));
            }
            "busybox" | "toybox" => {
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
            _ => return None,
        };
        self.add(
            Verdict::Yellow,
            &format!("wrapper.{name}"),
            format!("`{name}` runs another command"),
        );
        // Find where the inner command starts: after the options (and a duration/file for some).
        let toks = parse_opts_until_command(args, &spec);
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
                                .map(|c| c.as_ref().map(|c| super::paths::resolve(c, &t)))
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
    fn opaque_wrapper(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
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
    fn env_wrapper(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
        let normalized = normalize_env_args(inv.args);
        let args = &normalized[..];
        let mut i = 0;
        let mut env = inv.env.clone();
        let mut st2 = st.clone();
        let mut split: Option<Option<String>> = None;
        while i < args.len() {
            let Some(t) = args[i].known() else {
                // `NAME=VALUE` whose value is partly unknown is still an assignment.
                if let Some((n, value)) = super::assignments::split_assignment(&args[i]) {
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
                    .map(|c| c.as_ref().map(|c| super::paths::resolve(c, rest)))
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
    fn parallel(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
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
        for i in 0..head.len() {
            if head[i].known().is_some_and(|t| t.starts_with('-')) {
                continue;
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
    fn watch(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) -> State {
        self.add(
            Verdict::Yellow,
            "wrapper.watch",
            "`watch` runs a command repeatedly".to_string(),
        );
        let spec = OptSpec {
            short_val: "nq",
            long_val: &["interval", "differences", "equexit"],
        };
        let toks = parse_opts_until_command(inv.args, &spec);
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

    /// `sh|bash|… -c STRING`, a script file, or commands on stdin.
    fn shell(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let p = inv.program.as_str();
        let args = inv.args;
        let mut i = 0;
        let mut has_c = false;
        let mut reads_stdin = false;
        while i < args.len() {
            let Some(t) = args[i].known() else { break };
            if t == "--" {
                i += 1;
                break;
            }
            if t == "-" {
                reads_stdin = true;
                i += 1;
                break;
            }
            if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                if t.starts_with("--") {
                    if matches!(t.as_str(), "--rcfile" | "--init-file") {
                        if let Some(f) = args.get(i + 1) {
                            self.path_field(st, f, Access::Read);
                            self.add(
                                Verdict::Yellow,
                                "shell.script",
                                format!("`{p}` runs the file `{}`", f.display()),
                            );
                        }
                        i += 2;
                        continue;
                    }
                    if t == "--command" {
                        has_c = true;
                    }
                    i += 1;
                    continue;
                }
                let letters = &t[1..];
                if letters.contains('c') {
                    has_c = true;
                }
                if letters.contains('s') {
                    reads_stdin = true;
                }
                i += 1;
                if letters.contains('o') || letters.contains('O') {
                    i += 1;
                }
                continue;
            }
            break;
        }
        self.add(
            Verdict::Yellow,
            "shell.interpreter",
            format!("`{p}` runs shell code"),
        );
        if has_c {
            match args.get(i) {
                Some(code) => match code.known() {
                    Some(code) => {
                        self.line_with_stdin(&code, st.clone(), depth + 1, inv.stdin);
                        // `sh -c 'cat "$1"' _ .env`: the positional parameters are words too.
                        self.generic_paths(st, &args[(i + 2).min(args.len())..], Access::Any);
                    }
                    None => {
                        self.opaque(&format!("{p} -c"), "a command string that cannot be known")
                    }
                },
                None => self.add(
                    Verdict::Yellow,
                    "shell.interpreter",
                    format!("`{p} -c` without a command"),
                ),
            }
            return;
        }
        if args
            .get(i)
            .and_then(Field::known)
            .is_some_and(|t| is_stdin_path(&t))
        {
            reads_stdin = true;
        }
        if !reads_stdin {
            if let Some(script) = args.get(i) {
                match script.known() {
                    Some(_) => {
                        self.add(
                            Verdict::Yellow,
                            "shell.script",
                            format!("`{p}` runs the script `{}`", script.display()),
                        );
                        self.path_field(st, script, Access::Read);
                        self.generic_paths(st, &args[i + 1..], Access::Any);
                    }
                    None => self.opaque(
                        p,
                        "a script whose text cannot be known (a substitution or variable)",
                    ),
                }
                return;
            }
        }
        if inv.stdin == Stdin::Fed {
            self.add(
                Verdict::Red,
                "shell.pipe-to-shell",
                format!(
                    "input is piped or redirected into `{p}`: whatever produced it runs as code"
                ),
            );
        }
    }

    /// Interpreters: inline code is not analysed (yellow at least); code built at run time is
    /// red; stdin fed into them is red; servers are red.
    fn interpreter(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        code_flags: &[&str],
        _depth: usize,
    ) {
        let p = inv.program.as_str();
        let args = inv.args;
        self.add(
            Verdict::Yellow,
            "interp.code",
            format!("`{p}` runs code that tyba does not analyse"),
        );
        let mut i = 0;
        let mut code: Option<Field> = None;
        let mut module: Option<String> = None;
        while i < args.len() {
            let Some(t) = args[i].known() else { break };
            if t == "--" {
                i += 1;
                break;
            }
            if t == "-" {
                break;
            }
            if !t.starts_with('-') || t.len() == 1 {
                break;
            }
            // Inline code: `-c CODE`, `-cCODE`, clusters ending in a code flag (`perl -pe`).
            let flag = code_flags.iter().find(|f| {
                t == **f
                    || (f.len() == 2 && t.len() > 2 && !t.starts_with("--") && t.ends_with(&f[1..]))
            });
            if let Some(_f) = flag {
                code = args.get(i + 1).cloned();
                i += 2;
                break;
            }
            if let Some(f) = code_flags
                .iter()
                .find(|f| f.len() == 2 && t.starts_with(**f) && t.len() > 2 && !t.starts_with("--"))
            {
                code = Some(Field::lit(&t[f.len()..]));
                i += 1;
                break;
            }
            // python: `-m` anywhere in a cluster of flags (`-Im`, `-bm`) takes the module.
            if p.starts_with("py") && !t.starts_with("--") {
                if let Some(pos) = t[1..].find('m') {
                    let rest = &t[1 + pos + 1..];
                    if t[1..1 + pos].chars().all(|c| "bBdEhiIOqsSuvx".contains(c)) {
                        if rest.is_empty() {
                            module = args.get(i + 1).and_then(Field::known);
                            i += 2;
                        } else {
                            module = Some(rest.to_string());
                            i += 1;
                        }
                        break;
                    }
                }
            }
            if let Some(m) = t
                .strip_prefix("-m")
                .filter(|m| !m.is_empty() && p.starts_with("py"))
            {
                module = Some(m.to_string());
                i += 1;
                break;
            }
            if p == "php" && t.starts_with("-S") {
                self.add(
                    Verdict::Red,
                    "net.server",
                    "`php -S` starts a web server".to_string(),
                );
            }
            if matches!(
                t.as_str(),
                "-I" | "-r" | "-M" | "-W" | "-X" | "-Q" | "--require" | "--import" | "--loader"
            ) && !code_flags.contains(&t.as_str())
                && !(p.starts_with("py") && t == "-I")
            {
                if let Some(v) = args.get(i + 1) {
                    self.path_field(st, v, Access::Read);
                }
                i += 2;
                continue;
            }
            if p == "ruby" && t == "-run" {
                self.add(
                    Verdict::Red,
                    "net.server",
                    "`ruby -run` runs the un library (httpd)".to_string(),
                );
            }
            i += 1;
        }
        if let Some(m) = module.as_deref().filter(|m| *m == "pydoc") {
            if args.iter().any(|a| {
                a.known()
                    .is_some_and(|t| t == "-p" || t == "-b" || t.starts_with("-p"))
            }) {
                self.add(
                    Verdict::Red,
                    "net.server",
                    format!("`{p} -m {m} -p/-b` starts a documentation web server"),
                );
            }
        }
        if let Some(m) = module {
            if matches!(
                m.as_str(),
                "http.server"
                    | "wsgiref.simple_server"
                    | "flask"
                    | "uvicorn"
                    | "gunicorn"
                    | "SimpleHTTPServer"
                    | "CGIHTTPServer"
                    | "smtpd"
                    | "aiosmtpd"
                    | "pyftpdlib"
                    | "xmlrpc.server"
                    | "http.client"
                    | "urllib.request"
                    | "ftplib"
                    | "smtplib"
                    | "webbrowser"
            ) {
                self.add(
                    Verdict::Red,
                    "net.server",
                    format!("`{p} -m {m}` opens the network"),
                );
            }
            if m == "pip" || m == "venv" || m == "pytest" {
                // Installs and tests: yellow like builds.
            }
            self.generic_paths(st, &args[i.min(args.len())..], Access::Any);
            return;
        }
        if let Some(c) = code {
            if !c.is_known() {
                self.opaque(&format!("{p} inline code"), "code that cannot be known");
            }
            self.generic_paths(st, &args[i.min(args.len())..], Access::Any);
            return;
        }
        match args.get(i).and_then(Field::known) {
            Some(s) if !is_stdin_path(&s) => {
                if p == "deno" && (s == "run" || s == "eval") {
                    for a in &args[i + 1..] {
                        if let Some(h) = a.known().as_deref().and_then(host_of) {
                            self.out.hosts.push(h);
                            self.add(
                                Verdict::Red,
                                "net.fetch-and-run",
                                "`deno run URL` fetches code and runs it".to_string(),
                            );
                        }
                    }
                }
                if p == "bun" && matches!(s.as_str(), "x") {
                    self.add(
                        Verdict::Red,
                        "net.fetch-and-run",
                        "`bun x` fetches packages and runs them".to_string(),
                    );
                }
                self.path_field(st, &args[i], Access::Read);
                self.generic_paths(st, &args[i + 1..], Access::Any);
            }
            Some(_) | None if i < args.len() && !args[i].is_known() => {
                self.opaque(p, "a script whose text cannot be known");
            }
            _ => {
                if inv.stdin == Stdin::Fed {
                    self.add(Verdict::Red, "shell.pipe-to-interpreter", format!("input is piped or redirected into `{p}`: whatever produced it runs as code"));
                }
            }
        }
    }

    /// `eval ARGS…`: the joined words are a command line.
    ///
    /// Literal words are the code that runs, analysed inline with no floor of their own
    /// (DESIGN.md §2a, shell housekeeping); anything else is code assembled at run time.
    fn eval(&mut self, st: &State, args: &[Field], depth: usize, stdin: Stdin) -> State {
        match join_known(args) {
            Some(code) if code.trim().is_empty() => {
                // Like the empty command line (DESIGN.md §2): nothing to approve.
                self.add(Verdict::Yellow, "shell.empty", "`eval` of nothing");
                st.clone()
            }
            Some(code) => self.line_with_stdin(&code, st.clone(), depth + 1, stdin),
            None => {
                self.add(
                    Verdict::Yellow,
                    "shell.eval",
                    "`eval` runs its arguments as shell code".to_string(),
                );
                self.opaque("eval", "arguments that cannot be known");
                st.clone()
            }
        }
    }

    /// Builtins that assign variables from input: `read`, `mapfile`/`readarray` (whose `-C`
    /// callback is a command), `getopts`, `let` (arithmetic).
    fn assigning_builtin(&mut self, st: State, inv: &Invocation<'_>, depth: usize) -> State {
        let p = inv.program.as_str();
        let args = inv.args;
        self.unlisted(p);
        let mut st = st;
        let (short_val, long_val): (&str, &[&str]) = match p {
            "read" => ("adinNptu", &[]),
            "mapfile" | "readarray" => ("dnOsuCc", &[]),
            _ => ("", &[]),
        };
        let mut operands = Vec::new();
        for t in parse_opts(
            args,
            &OptSpec {
                short_val,
                long_val,
            },
        ) {
            match t {
                Tok::Opt { name, value } => {
                    if (name == "-a" && p == "read") || name == "-C" {
                        if name == "-C" {
                            match value.as_ref().and_then(Field::known) {
                                Some(code) => {
                                    self.add(
                                        Verdict::Yellow,
                                        "wrapper.mapfile",
                                        format!("`{p} -C` runs a callback"),
                                    );
                                    self.line(&code, st.clone(), depth + 1);
                                }
                                None => self.opaque(p, "a callback that cannot be known"),
                            }
                        } else if let Some(n) = value.as_ref().and_then(Field::known) {
                            self.assigns_variable(&n, Some(p), &st);
                            st.vars.insert(n, vec![None]);
                        }
                    }
                }
                Tok::DynamicOpt => self.opaque(p, "an option that cannot be known"),
                Tok::Operand(f) => operands.push(f),
            }
        }
        let names: Vec<Field> = match p {
            "getopts" => operands.into_iter().skip(1).take(1).collect(),
            "mapfile" | "readarray" => operands.into_iter().last().into_iter().collect(),
            _ => operands,
        };
        for f in names {
            let Some(t) = f.known() else {
                self.opaque(p, "a variable name that cannot be known");
                continue;
            };
            let name = t.split(['=', '[', '+']).next().unwrap_or("").to_string();
            if p == "let" {
                self.arith(&t, &st);
            }
            self.assigns_variable(&name, Some(p), &st);
            st.vars.insert(name, vec![None]);
        }
        st
    }

    /// `export`/`declare`/`local`/`readonly`: assignments, exec-capable variables red.
    fn declare(&mut self, st: State, inv: &Invocation<'_>) -> State {
        let mut st = st;
        let p = inv.program.as_str();
        self.unlisted(p);
        // `declare -n ref=NAME`: assigning `ref` assigns NAME.
        let nameref = inv
            .args
            .iter()
            .filter_map(Field::known)
            .any(|t| t.starts_with('-') && !t.starts_with("--") && t.contains('n'));
        for a in inv.args {
            match a.known() {
                Some(t) if t.starts_with('-') => {}
                Some(t) => {
                    let (n, v) = match t.split_once('=') {
                        Some((n, v)) => (n.trim_end_matches('+').to_string(), Some(v.to_string())),
                        None => (t.clone(), None),
                    };
                    if nameref {
                        if let Some(target) = &v {
                            self.assigns_variable(target, Some("declare -n"), &st);
                        }
                    }
                    if is_exec_var(&n) {
                        self.add(
                            Verdict::Red,
                            "env.exec-variable",
                            format!("`{p} {n}` makes programs run code"),
                        );
                    }
                    if let Some(v) = v {
                        for f in split_colon_list(&Field::lit(&v)) {
                            self.path_field(&st, &f, Access::Read);
                        }
                        st.vars.insert(n, vec![Some(v)]);
                    }
                }
                None => {
                    if let Some((_, value)) = super::assignments::split_assignment(a) {
                        self.assignment_value_paths(&st, &value);
                    }
                    let prefix = a.known_prefix();
                    let name = prefix.split('=').next().unwrap_or("");
                    if name.is_empty() || is_exec_var(name) || !prefix.contains('=') {
                        if name.is_empty() {
                            self.add(
                                Verdict::Red,
                                "env.exec-variable",
                                format!("`{p}` assigns a variable whose name cannot be known"),
                            );
                        } else if is_exec_var(name) {
                            self.add(
                                Verdict::Red,
                                "env.exec-variable",
                                format!("`{p} {name}` makes programs run code"),
                            );
                        }
                    }
                    if !name.is_empty() {
                        st.vars.insert(name.to_string(), vec![None]);
                    }
                }
            }
        }
        st
    }

    /// `cd DIR`, `pushd DIR`, `popd`, `cd -`: change where later words resolve.
    fn cd(&mut self, st: State, inv: &Invocation<'_>) -> State {
        let p = inv.program.as_str();
        let mut st = st;
        let operands: Vec<&Field> = super::bindings::cd_operands(inv.args);
        if p == "popd" {
            let prev = st.cwds.clone();
            st.cwds = st.dirstack.pop().unwrap_or_else(|| vec![None]);
            st.oldpwd = prev;
            return st;
        }
        // Several fields are several possible values (`${x:-..}`): every one is a candidate.
        if operands.len() > 1 {
            let mut all: Vec<Option<PathBuf>> = Vec::new();
            for f in &operands {
                let one = Invocation {
                    program: inv.program.clone(),
                    args: std::slice::from_ref(*f),
                    env: inv.env.clone(),
                    stdin: inv.stdin,
                };
                let after = self.cd(st.clone(), &one);
                super::union_vec(&mut all, &after.cwds);
            }
            let mut st = st;
            st.oldpwd = std::mem::replace(&mut st.cwds, all);
            return st;
        }
        let target = operands.first().copied();
        let new_cwds: Vec<Option<PathBuf>> = match target {
            None => {
                if p == "pushd" {
                    st.dirstack.last().cloned().unwrap_or_else(|| vec![None])
                } else {
                    match self.ctx.home {
                        Some(h) => {
                            self.path_field(&st, &Field::lit(&h.to_string_lossy()), Access::Read);
                            vec![Some(h.to_path_buf())]
                        }
                        None => {
                            self.add(
                                Verdict::Yellow,
                                "path.unresolved",
                                "`cd` to an unknown home directory".to_string(),
                            );
                            vec![None]
                        }
                    }
                }
            }
            Some(f) if f.known().as_deref() == Some("-") => {
                let old = st.oldpwd.clone();
                if old.contains(&None) {
                    self.add(
                        Verdict::Yellow,
                        "path.unresolved",
                        "`cd -` returns to a directory not known on this line".to_string(),
                    );
                }
                old
            }
            Some(f) => {
                self.path_field(&st, f, Access::Read);
                let mut dirs: Vec<Option<PathBuf>> = match f.known() {
                    Some(t) if !f.has_glob() => st
                        .cwds
                        .iter()
                        .map(|c| c.as_ref().map(|c| super::paths::resolve(c, &t)))
                        .collect(),
                    _ => vec![None],
                };
                // A relative name not starting with `.` is looked up in CDPATH first.
                if let Some(t) = f
                    .known()
                    .filter(|t| !t.starts_with('/') && !t.starts_with('.'))
                {
                    if let Some(values) = st.vars.get("CDPATH").cloned() {
                        for v in values {
                            match v {
                                Some(list) => {
                                    for entry in list.split(':').filter(|e| !e.is_empty()) {
                                        let cand = format!("{}/{t}", entry.trim_end_matches('/'));
                                        self.path_field(&st, &Field::lit(&cand), Access::Read);
                                        for c in st.cwds.clone().into_iter().flatten() {
                                            let d = Some(super::paths::resolve(&c, &cand));
                                            if !dirs.contains(&d) {
                                                dirs.push(d);
                                            }
                                        }
                                    }
                                }
                                None => {
                                    self.add(
                                        Verdict::Yellow,
                                        "path.unresolved",
                                        format!("`cd {t}` follows a CDPATH that cannot be known"),
                                    );
                                    dirs.push(None);
                                }
                            }
                        }
                    }
                }
                dirs
            }
        };
        if p == "pushd" {
            st.dirstack.push(st.cwds.clone());
        }
        st.oldpwd = std::mem::replace(&mut st.cwds, new_cwds);
        st
    }

    /// The vault's fixed denials for whole programs (DESIGN.md §2 "blocked"): file-system and
    /// partition-table makers whatever the target, and stopping or restarting the machine.
    fn vault(&mut self, _st: &State, inv: &Invocation<'_>) -> bool {
        let p = inv.program.as_str();
        let known = || inv.args.iter().filter_map(Field::known);
        let (rule, reason) = match p {
            _ if p.starts_with("mkfs") => ("vault.disk", "destroys file systems"),
            "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "wipefs" | "blkdiscard"
            | "sgdisk" | "sfdisk" => ("vault.disk", "destroys file systems or partition tables"),
            // Interactive partition editors only with a target or a script.
            "fdisk" | "parted" if known().any(|a| !a.starts_with('-') || a == "--script") => {
                ("vault.disk", "rewrites partition tables")
            }
            "shutdown" | "reboot" | "poweroff" | "halt" | "kexec" => {
                ("vault.power", "stops the machine")
            }
            "systemctl" | "loginctl"
                if known().any(|a| {
                    matches!(
                        a.trim_end_matches(".target"),
                        "reboot"
                            | "poweroff"
                            | "halt"
                            | "kexec"
                            | "rescue"
                            | "emergency"
                            | "shutdown"
                            | "soft-reboot"
                            | "suspend"
                            | "hibernate"
                    )
                }) =>
            {
                ("vault.power", "stops or restarts the machine")
            }
            "init" | "telinit" if known().any(|a| a == "0" || a == "6") => {
                ("vault.power", "changes to a halt or reboot runlevel")
            }
            _ => return false,
        };
        self.add(Verdict::Blocked, rule, format!("`{p}` {reason}"));
        true
    }

    /// Network clients (red), with the hosts they name.
    fn network(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        for a in inv.args {
            if let Some(t) = a.known() {
                if let Some(h) = host_of(&t) {
                    if !self.out.hosts.contains(&h) {
                        self.out.hosts.push(h);
                    }
                }
            }
        }
        if matches!(p, "nc" | "ncat" | "netcat")
            && inv.args.iter().any(|a| {
                a.known()
                    .is_some_and(|t| t.starts_with('-') && !t.starts_with("--") && t.contains('l'))
            })
        {
            self.add(
                Verdict::Red,
                "net.server",
                format!("`{p} -l` listens for connections"),
            );
        }
        self.add(
            Verdict::Red,
            "net.client",
            format!("`{p}` uses the network"),
        );
        // Local operands (`scp notes.txt host:`, `curl -o out`) are paths too.
        for a in inv.args {
            if let Some(t) = a.known() {
                if t.contains("://")
                    || (t.contains(':') && !t.starts_with('/') && !t.starts_with('.'))
                    || t.contains('@')
                {
                    continue;
                }
            }
            for c in path_candidates(a) {
                self.path_field(st, &c, Access::Any);
            }
        }
    }

    fn is_fetch_runner(&self, p: &str, args: &[Field]) -> bool {
        let first = args
            .iter()
            .find_map(|a| a.known().filter(|t| !t.starts_with('-')));
        match (p, first.as_deref()) {
            ("pnpm" | "yarn", Some("dlx")) => true,
            ("npm", Some("exec" | "x")) => true,
            ("bun", Some("x")) => true,
            ("pipx", Some("run")) => true,
            ("npm" | "yarn" | "pnpm" | "bun", Some("create")) => true,
            ("npm", Some("init")) => {
                args.iter()
                    .filter_map(Field::known)
                    .filter(|t| !t.starts_with('-'))
                    .count()
                    > 1
            }
            ("gem", Some("exec")) => true,
            ("deno", Some("run" | "x")) => args
                .iter()
                .filter_map(Field::known)
                .any(|t| t.starts_with("npm:") || t.starts_with("jsr:") || t.contains("://")),
            ("corepack", _) => args.iter().filter_map(Field::known).any(|t| t == "dlx"),
            ("nix", Some("run" | "shell" | "develop")) => true,
            ("nix-shell", _) => args
                .iter()
                .any(|a| a.known().is_some_and(|t| t == "-p" || t == "--packages")),
            ("uv", Some("tool")) => args.iter().any(|a| a.known().as_deref() == Some("run")),
            ("go", Some("run")) => args
                .iter()
                .any(|a| a.known().is_some_and(|t| t.contains('@'))),
            _ => false,
        }
    }

    /// Servers and listeners are network tools.
    fn server(&mut self, p: &str, args: &[Field]) -> bool {
        let known: Vec<String> = if p == "busybox" {
            args.iter().filter_map(Field::known).collect()
        } else {
            Vec::new()
        };
        let hit = match p {
            "darkhttpd" | "twistd" | "uvicorn" | "gunicorn" | "hypercorn" | "jupyter"
            | "jupyter-notebook" | "jupyter-lab" | "memcached" | "redis-server" | "mongod"
            | "postgres" | "mysqld" | "ngrok-agent" | "miniserve" | "caddy-server"
            | "http-server" | "serve" | "live-server" | "httpd" | "nginx" | "apache2"
            | "lighttpd" | "caddy" | "sshd" | "vsftpd" => true,
            "busybox" => known.first().is_some_and(|a| a == "httpd"),
            _ => false,
        };
        if hit {
            self.add(
                Verdict::Red,
                "net.server",
                format!("`{p}` serves on the network"),
            );
        }
        hit
    }

    /// `rm`, `unlink`, `rmdir`, `shred`.
    fn rm(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        let mut recursive = false;
        let mut force = false;
        let mut dynamic = false;
        let mut targets = Vec::new();
        for t in parse_opts(
            inv.args,
            &if p == "shred" {
                // shred -n N, -s N; `--remove[=HOW]` and `-u` take no separate value.
                OptSpec {
                    short_val: "ns",
                    long_val: &["iterations", "size", "random-source"],
                }
            } else {
                // rm's only value, `--interactive[=WHEN]`, is optional: never the next word.
                OptSpec {
                    short_val: "",
                    long_val: &[],
                }
            },
        ) {
            match t {
                Tok::Opt { name, .. } => {
                    let n = name.as_str();
                    if n == "-r" || n == "-R" || names(n, "--recursive") {
                        recursive = true;
                    } else if n == "-f" || names(n, "--force") {
                        force = true;
                    } else if names(n, "--no-preserve-root") {
                        self.add(
                            Verdict::Blocked,
                            "vault.no-preserve-root",
                            "`--no-preserve-root` lets rm delete /".to_string(),
                        );
                    }
                }
                Tok::DynamicOpt => dynamic = true,
                Tok::Operand(f) => targets.push(f),
            }
        }
        if p != "rm" {
            recursive = false;
        }
        self.add(Verdict::Yellow, "rm.delete", format!("`{p}` deletes files"));
        if recursive && (force || dynamic) {
            self.add(
                Verdict::Red,
                "rm.recursive-force",
                "recursive forced deletion".to_string(),
            );
        }
        if p == "shred"
            && targets.iter().any(|_| true)
            && inv.args.iter().any(|a| {
                a.known()
                    .is_some_and(|t| t == "-u" || t.starts_with("--remove"))
            })
        {
            self.add(
                Verdict::Yellow,
                "rm.delete",
                "`shred -u` deletes files".to_string(),
            );
        }
        for f in &targets {
            self.catastrophic_target(st, f, recursive, p);
            self.path_field(st, f, Access::Modify);
        }
    }

    /// A recursive modifying command aimed at `/`, `/*`, `~`, `$HOME` or a system path is a
    /// fixed denial (seed `004_893a9b0cb34e722a.txt`, the vault).
    fn catastrophic_target(&mut self, st: &State, f: &Field, recursive: bool, p: &str) {
        if !recursive {
            return;
        }
        let text = match f.known() {
            Some(t) => t,
            None => {
                let prefix = f.known_prefix();
                if prefix == "/" || prefix.is_empty() && f.empty_variant().is_empty() {
                    // `rm -rf /$X` reaches anything under /.
                    if prefix == "/" {
                        self.add(
                            Verdict::Blocked,
                            "vault.catastrophic",
                            format!(
                                "`{p}` recursively modifies `{}` (anything under /)",
                                f.display()
                            ),
                        );
                    }
                }
                return;
            }
        };
        let home = self
            .ctx
            .home
            .map(|h| h.to_string_lossy().trim_end_matches('/').to_string());
        let trimmed = text.trim_end_matches('/');
        // A glob reaches everything in the directory it starts in: `rm -rf *` in `~` is
        // `rm -rf ~/*`.
        let globbed_dir = f.has_glob().then(|| {
            let before = &text[..text.find(['*', '?', '[']).unwrap_or(text.len())];
            match before.rfind('/') {
                Some(0) => "/".to_string(),
                Some(i) => before[..i].to_string(),
                None => ".".to_string(),
            }
        });
        let unglobbed = match &globbed_dir {
            Some(d) => d.as_str(),
            None => trimmed.trim_end_matches('/'),
        };
        // `rm -rf ""` fails; `/`, `//`, `/.`, `/*` are the root.
        let is_root = !text.is_empty()
            && (trimmed.is_empty() || unglobbed.is_empty() || unglobbed == "/" || trimmed == "/.");
        let is_home = home
            .as_deref()
            .is_some_and(|h| unglobbed == h || trimmed == h);
        let mut system = false;
        for cwd in st.cwds.iter().flatten() {
            let phys = super::paths::resolve(cwd, unglobbed);
            if phys == Path::new("/")
                || super::paths::is_system_path(&phys) && phys.components().count() <= 3
            {
                system = true;
            }
            if home.as_deref().is_some_and(|h| phys == Path::new(h)) {
                system = true;
            }
        }
        if is_root || is_home || system {
            self.add(
                Verdict::Blocked,
                "vault.catastrophic",
                format!("`{p}` recursively modifies `{text}`"),
            );
        }
    }

    /// `chmod`, `chown`, `chgrp`, `chattr`, `setfacl`: metadata changes.
    fn chmod(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.metadata",
            format!("`{p}` changes file metadata"),
        );
        // These tools' only short options are flags (`-c -f -v -R -h -H -L -P`); any other word
        // starting with `-` is a mode (`chmod -w,u+w f`, `chattr -i f`) and so an operand.
        let mut recursive = false;
        let mut reference = false;
        let mut operands: Vec<Field> = Vec::new();
        let mut i = 0;
        let mut only_operands = false;
        while i < inv.args.len() {
            let a = &inv.args[i];
            i += 1;
            let Some(t) = a.known() else {
                operands.push(a.clone());
                continue;
            };
            if only_operands {
                operands.push(a.clone());
            } else if t == "--" {
                only_operands = true;
            } else if let Some(long) = t.strip_prefix("--") {
                let (name, val) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                if "recursive".starts_with(name) && !name.is_empty() {
                    recursive = true;
                } else if "reference".starts_with(name) && name.len() >= 3 {
                    reference = true;
                    let v = match val {
                        Some(v) => Some(Field::lit(v)),
                        None => {
                            i += 1;
                            inv.args.get(i - 1).cloned()
                        }
                    };
                    if let Some(v) = v {
                        self.path_field(st, &v, Access::Read);
                    }
                } else if "from".starts_with(name) && val.is_none() {
                    i += 1;
                }
            } else if t.len() > 1
                && t.starts_with('-')
                && t[1..].chars().all(|c| "cfvRHLPh".contains(c))
            {
                recursive |= t.contains('R');
            } else {
                operands.push(a.clone());
            }
        }
        // The first operand is the mode or owner, unless --reference gave it.
        let skip = usize::from(!reference);
        for f in operands.iter().skip(skip) {
            self.catastrophic_target(st, f, recursive, p);
            self.path_field(st, f, Access::Modify);
        }
    }

    /// Commands that write or create their targets.
    fn writer(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.writes",
            format!("`{p}` changes files"),
        );
        if p == "dd" {
            for a in inv.args {
                let Some(t) = a.known() else {
                    self.path_field(st, a, Access::Any);
                    continue;
                };
                let t = match (t.split_once('='), self.ctx.home) {
                    (Some((k, v)), Some(h)) if v == "~" || v.starts_with("~/") => {
                        format!("{k}={}{}", h.display(), &v[1..])
                    }
                    _ => t,
                };
                if let Some(v) = t.strip_prefix("of=") {
                    if v.starts_with("/dev/") && !super::paths::is_system_exception(v) {
                        self.add(
                            Verdict::Blocked,
                            "vault.device-write",
                            format!("`dd of={v}` writes a device"),
                        );
                    }
                    self.path_field(st, &Field::lit(v), Access::Write);
                } else if let Some(v) = t.strip_prefix("if=") {
                    self.path_field(st, &Field::lit(v), Access::Read);
                }
            }
            return;
        }
        let spec = match p {
            // Optional-valued options (`--backup[=C]`, `--context[=CTX]`, `--preserve[=L]`,
            // `--reflink[=W]`, `--update[=U]`, `-Z`) never take the next word.
            "cp" | "mv" | "ln" => OptSpec {
                short_val: "tS",
                long_val: &["target-directory", "suffix", "sparse", "no-preserve"],
            },
            "install" => OptSpec {
                short_val: "tSmog",
                long_val: &[
                    "target-directory",
                    "suffix",
                    "mode",
                    "owner",
                    "group",
                    "strip-program",
                ],
            },
            "touch" => OptSpec {
                short_val: "drt",
                long_val: &["date", "reference", "time"],
            },
            "mkdir" | "mkfifo" | "mknod" => OptSpec {
                short_val: "m",
                long_val: &["mode"],
            },
            "truncate" => OptSpec {
                short_val: "sr",
                long_val: &["size", "reference"],
            },
            "rsync" => OptSpec {
                short_val: "eBfT",
                long_val: &[
                    "rsh",
                    "rsync-path",
                    "exclude",
                    "include",
                    "filter",
                    "exclude-from",
                    "include-from",
                    "files-from",
                    "temp-dir",
                    "partial-dir",
                    "backup-dir",
                    "suffix",
                    "chmod",
                    "chown",
                    "log-file",
                    "password-file",
                    "compare-dest",
                    "copy-dest",
                    "link-dest",
                    "max-size",
                    "min-size",
                    "timeout",
                    "bwlimit",
                    "out-format",
                    "port",
                    "sockopts",
                    "protocol",
                    "iconv",
                    "info",
                    "debug",
                ],
            },
            _ => OptSpec {
                short_val: "",
                long_val: &[],
            },
        };
        let mut operands = Vec::new();
        let mut target_dir: Option<Field> = None;
        for t in parse_opts(inv.args, &spec) {
            match t {
                Tok::Opt { name, value } => {
                    let n = name.as_str();
                    if (n == "-t" || names(n, "--target-directory")) && p != "touch" {
                        target_dir = value;
                    } else if p == "rsync"
                        && (n == "-e" || names(n, "--rsh") || names(n, "--rsync-path"))
                    {
                        self.add(
                            Verdict::Red,
                            "cmd.program-option",
                            format!("`rsync {n}` runs a program"),
                        );
                    } else if p == "install" && names(n, "--strip-program") {
                        self.add(
                            Verdict::Red,
                            "cmd.program-option",
                            "`install --strip-program` runs a program".to_string(),
                        );
                    } else if let Some(v) = value {
                        if matches!(n, "-r")
                            || names(n, "--reference")
                            || names(n, "--exclude-from")
                            || names(n, "--files-from")
                            || names(n, "--include-from")
                            || names(n, "--password-file")
                        {
                            self.path_field(st, &v, Access::Read);
                        } else if names(n, "--log-file")
                            || names(n, "--temp-dir")
                            || names(n, "--backup-dir")
                            || names(n, "--partial-dir")
                        {
                            self.path_field(st, &v, Access::Write);
                        }
                    }
                }
                Tok::DynamicOpt => {}
                Tok::Operand(f) => operands.push(f),
            }
        }
        if p == "rsync"
            && operands.iter().any(|o| {
                o.known().is_some_and(|t| {
                    t.contains("::")
                        || t.starts_with("rsync://")
                        || t.split('/').next().is_some_and(|h| h.contains(':'))
                })
            })
        {
            self.add(
                Verdict::Red,
                "net.client",
                "`rsync` to a remote host uses the network".to_string(),
            );
            for o in &operands {
                if o.known()
                    .is_some_and(|t| t.split('/').next().is_some_and(|h| h.contains(':')))
                {
                    continue;
                }
                self.path_field(st, o, Access::Any);
            }
            return;
        }
        // `install -d DIR…` creates every operand.
        let install_dirs = p == "install"
            && inv.args.iter().any(|a| {
                a.known().is_some_and(|t| {
                    t == "--directory"
                        || t.starts_with('-') && !t.starts_with("--") && t.contains('d')
                })
            });
        match p {
            _ if install_dirs => {
                for o in operands {
                    self.path_field(st, &o, Access::Write);
                }
            }
            "tee" | "touch" | "mkdir" | "truncate" | "mkfifo" | "mknod" => {
                if p == "mknod" {
                    self.add(
                        Verdict::Red,
                        "cmd.device-node",
                        "`mknod` can create device nodes".to_string(),
                    );
                }
                for o in operands {
                    self.path_field(st, &o, Access::Write);
                }
            }
            _ => {
                // SOURCE… DEST, or -t DIR SOURCE….
                let (sources, dest): (Vec<Field>, Option<Field>) = match target_dir {
                    Some(d) => (operands, Some(d)),
                    None => {
                        let mut o = operands;
                        let d = if o.len() >= 2 || p == "ln" && o.len() == 1 {
                            o.pop()
                        } else {
                            None
                        };
                        if p == "ln" && d.is_none() {
                            (o, Some(Field::lit(".")))
                        } else {
                            (o, d)
                        }
                    }
                };
                // A hard link (`ln` without -s, `cp -l`) makes the source writable through the new
                // name: as good as changing it.
                let symbolic = inv.args.iter().filter_map(Field::known).any(|t| {
                    t == "--symbolic"
                        || t.starts_with('-') && !t.starts_with("--") && t.contains('s')
                });
                let hard_link = (p == "ln" && !symbolic)
                    || (p == "cp"
                        && inv.args.iter().filter_map(Field::known).any(|t| {
                            t == "--link"
                                || t.starts_with('-') && !t.starts_with("--") && t.contains('l')
                        }));
                let src_access = if p == "mv" || hard_link {
                    Access::Modify
                } else {
                    Access::Read
                };
                let recursive_copy = inv.args.iter().any(|a| {
                    a.known().is_some_and(|t| {
                        t == "-r"
                            || t == "-R"
                            || t == "-a"
                            || t.starts_with("--recursive")
                            || t.starts_with("--archive")
                            || t.starts_with('-')
                                && !t.starts_with("--")
                                && (t.contains('r') || t.contains('R') || t.contains('a'))
                    })
                });
                for s in &sources {
                    self.path_field(st, s, src_access);
                }
                if let Some(d) = dest {
                    if recursive_copy
                        && p == "rsync"
                        && inv
                            .args
                            .iter()
                            .any(|a| a.known().is_some_and(|t| t.starts_with("--delete")))
                    {
                        self.catastrophic_target(st, &d, true, p);
                    }
                    // `mv`/`ln` replace the destination itself (even `/dev/null`).
                    let dest_access = if p == "mv" || p == "ln" {
                        Access::Modify
                    } else {
                        Access::Write
                    };
                    self.path_field(st, &d, dest_access);
                }
            }
        }
    }

    /// `find`: read-only without actions; `-exec`/`-ok` are wrappers; `-delete` is recursive
    /// deletion; `-fprint*`/`-fls` write files.
    fn find(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
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
            match t.as_str() {
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = args[i..]
                        .iter()
                        .position(|a| a.known().is_some_and(|x| x == ";" || x == "+"))
                        .map(|e| i + e)
                        .unwrap_or(args.len());
                    let mut inner: Vec<Field> = args[i..end].to_vec();
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
                | "-regex" | "-iregex" | "-lname" | "-ilname" | "-type" | "-xtype" | "-user"
                | "-group" | "-uid" | "-gid" | "-perm" | "-size" | "-mtime" | "-atime"
                | "-ctime" | "-mmin" | "-amin" | "-cmin" | "-links" | "-inum" | "-maxdepth"
                | "-mindepth" | "-used" | "-printf" | "-context" | "-fstype" | "-regextype" => {
                    i += 1
                }
                _ => {}
            }
        }
        if deletes {
            self.add(
                Verdict::Red,
                "rm.find-delete",
                "`find -delete` deletes recursively without confirmation".to_string(),
            );
        }
        if follows {
            self.symlinks_out(st, &starts);
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
    fn fd(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let args = inv.args;
        let spec = OptSpec {
            short_val: "edEctjSoxX",
            long_val: &[
                "extension",
                "max-depth",
                "exclude",
                "color",
                "type",
                "threads",
                "size",
                "owner",
                "changed-within",
                "changed-before",
                "base-directory",
                "search-path",
                "max-results",
                "ignore-file",
                "path-separator",
                "batch-size",
                "format",
            ],
        };
        let mut operands = Vec::new();
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
        for t in parse_opts(&operands, &spec) {
            match t {
                Tok::Opt { name, value } => {
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
        it.next();
        let rest: Vec<Field> = it.collect();
        let follows = args.iter().filter_map(Field::known).any(|t| {
            t == "--follow" || t.starts_with('-') && !t.starts_with("--") && t.contains('L')
        });
        if follows {
            let starts = if rest.is_empty() {
                vec![Field::lit(".")]
            } else {
                rest.clone()
            };
            self.symlinks_out(st, &starts);
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

    /// awk: yellow (it runs programs); code built at run time is red.
    fn awk(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.awk",
            format!("`{p}` programs can run commands and write files"),
        );
        let spec = OptSpec {
            short_val: "fvFi",
            long_val: &[
                "file",
                "assign",
                "field-separator",
                "include",
                "load",
                "source",
            ],
        };
        let mut have_prog = false;
        let mut operands = Vec::new();
        for t in parse_opts(inv.args, &spec) {
            match t {
                Tok::Opt { name, value } => {
                    if name == "-f"
                        || names(&name, "--file")
                        || name == "-i"
                        || names(&name, "--include")
                    {
                        have_prog = true;
                        if let Some(v) = value {
                            self.path_field(st, &v, Access::Read);
                        }
                    }
                    if names(&name, "--source") {
                        have_prog = true;
                    }
                }
                Tok::DynamicOpt => {}
                Tok::Operand(f) => operands.push(f),
            }
        }
        let mut it = operands.into_iter();
        if !have_prog {
            if let Some(prog) = it.next() {
                if !prog.is_known() {
                    self.opaque(p, "a program text that cannot be known");
                }
            }
        }
        for f in it {
            if f.known()
                .is_some_and(|t| t.split_once('=').is_some_and(|(n, _)| is_identifier(n)))
            {
                continue;
            }
            self.path_field(st, &f, Access::Read);
        }
    }

    /// Archivers: program-valued options are red.
    fn archiver(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.unlisted(p);
        for a in inv.args {
            let Some(t) = a.known() else { continue };
            if [
                "--to-command",
                "--use-compress-program",
                "--checkpoint-action",
                "--info-script",
                "--new-volume-script",
                "--rsh-command",
                "--unzip-command",
                "--rmt-command",
            ]
            .iter()
            .any(|o| t.starts_with(o))
                || p == "zip" && (t == "-TT" || t.starts_with("--unzip-command"))
                || p == "tar" && t == "-I"
                || p == "tar" && t == "-F"
            {
                self.add(
                    Verdict::Red,
                    "cmd.program-option",
                    format!("`{p} {t}` runs a program"),
                );
            }
        }
        self.generic_paths(st, inv.args, Access::Any);
    }

    /// Package managers and build tools: yellow; global configuration writes are red.
    fn package_tool(&mut self, st: &State, inv: &Invocation<'_>) {
        let p = inv.program.as_str();
        self.add(
            Verdict::Yellow,
            "cmd.build",
            format!("`{p}` runs builds, scripts or installs (arbitrary code)"),
        );
        let known: Vec<String> = inv.args.iter().filter_map(Field::known).collect();
        let global = known.iter().any(|a| {
            a == "-g"
                || a == "--global"
                || a == "--location=global"
                || a == "--location=user"
                || a == "--user"
                || a == "--system"
                || a == "--site"
        });
        let config_write = known.first().is_some_and(|a| a == "config" || a == "set")
            && known.iter().any(|a| {
                a == "set"
                    || a == "unset"
                    || a == "delete"
                    || a == "edit"
                    || a == "rm"
                    || a == "add"
            });
        if config_write && global {
            self.add(
                Verdict::Red,
                "config.global",
                format!("`{p}` writes the user's or the system's configuration"),
            );
        }
        if p == "npm" && known.first().is_some_and(|a| a == "set") && global {
            self.add(
                Verdict::Red,
                "config.global",
                "`npm set -g` writes the global configuration".to_string(),
            );
        }
        self.generic_paths(st, inv.args, Access::Any);
    }

    /// `git`: global options, the green subcommands with their read-only flags, code-running
    /// configuration, network subcommands, the push guard.
    fn git(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let args = inv.args;
        let mut i = 0;
        let mut st_git = st.clone();
        let mut not_green: Vec<String> = Vec::new();
        let mut config_pairs: Vec<(String, Option<String>)> = Vec::new();
        while i < args.len() {
            let Some(t) = args[i].known() else {
                not_green.push("an option that cannot be known".to_string());
                self.opaque("git", "a global option that cannot be known");
                i += 1;
                continue;
            };
            // git.c: an unknown option ends the global options; `--version` and `-v` there
            // are the `version` subcommand.
            if !t.starts_with('-') || t == "--version" || t == "-v" {
                break;
            }
            i += 1;
            match t.as_str() {
                // DESIGN.md §2a: only `--no-pager`, `-C`, `--git-dir`, `--work-tree` keep git green.
                "--no-pager" => {}
                o if crate::git_tables::GLOBAL_VALUE_OPTIONS.contains(&o)
                    || o == "--exec-path"
                    || o == "--list-cmds" =>
                {
                    let v = args.get(i).cloned();
                    i += 1;
                    self.git_global(st, &mut st_git, &t, v, &mut not_green, &mut config_pairs);
                }
                "-p" | "--paginate" => {
                    not_green.push("`-p` (runs the configured pager)".to_string())
                }
                "-P" => {}
                // The other flags of git_tables leave the subcommand to run, not green.
                o if crate::git_tables::GLOBAL_FLAGS.contains(&o) => {
                    not_green.push(format!("`{t}`"));
                }
                _ => {
                    // `--opt=VALUE`, and `-C`/`-c` with the value attached.
                    let attached = t
                        .split_once('=')
                        .map(|(o, v)| (o.to_string(), v.to_string()))
                        .or_else(|| {
                            ["-C", "-c"].iter().find_map(|o| {
                                t.strip_prefix(o)
                                    .filter(|v| !v.is_empty())
                                    .map(|v| (o.to_string(), v.to_string()))
                            })
                        });
                    match attached {
                        Some((opt, v)) => self.git_global(
                            st,
                            &mut st_git,
                            &opt,
                            Some(Field::lit(&v)),
                            &mut not_green,
                            &mut config_pairs,
                        ),
                        None => not_green.push(format!("`{t}`")),
                    }
                }
            }
        }
        for (name, value) in &inv.env {
            if name == "GIT_DIR" || name == "GIT_WORK_TREE" {
                if let Some(v) = value {
                    self.path_field(st, &Field::lit(v), Access::Read);
                }
            }
        }
        let sub_field = args.get(i);
        let sub = sub_field.and_then(Field::known).map(|s| match s.as_str() {
            "--version" | "-v" => "version".to_string(),
            _ => s,
        });
        if std::mem::take(&mut self.hook_override) {
            let could_push = match sub.as_deref() {
                Some(s) => crate::git_tables::may_push(s),
                None => sub_field.is_some(),
            };
            // Switching hooks off for one command matters when it can push (DESIGN.md §2:
            // the push guard); for a read-only builtin (agents probe repositories with
            // `-c core.hooksPath=/dev/null`) no pre-push hook runs either way: not green.
            if could_push {
                self.add(
                    Verdict::Blocked,
                    "git.guard.hooks-path",
                    "a hooks path set for a command that can push switches the pre-push hook off"
                        .to_string(),
                );
            } else {
                self.add(
                    Verdict::Yellow,
                    "git.not-read-only",
                    "git with its hooks configuration replaced for one command".to_string(),
                );
            }
        }
        let rest = if i < args.len() {
            &args[i + 1..]
        } else {
            &[][..]
        };
        // The git inspector resolves aliases and pushes against the repository.
        let all: Vec<String> = args.iter().map(Field::display).collect();
        let env: Vec<(String, String)> = inv
            .env
            .iter()
            .map(|(n, v)| (n.clone(), v.clone().unwrap_or_else(|| "$?".to_string())))
            .collect();
        let mut alias = None;
        let protected = self.policy.config().protected_branches.clone();
        let git_cwds: Vec<PathBuf> = st_git.cwds.iter().flatten().cloned().collect();
        if let Some(g) = self.ctx.git {
            for cwd in &git_cwds {
                let report = g.inspect(&GitInvocation {
                    args: &all,
                    env: &env,
                    cwd,
                    protected: &protected,
                });
                for f in report.findings {
                    self.out.add(f);
                }
                if report.alias.is_some() {
                    alias = report.alias;
                }
            }
        }
        let Some(sub) = sub else {
            if sub_field.is_some() {
                self.add(
                    Verdict::Yellow,
                    "cmd.dynamic-args",
                    "the git subcommand cannot be known".to_string(),
                );
                if self.ctx.git.is_none() {
                    self.git_push_static(args, &protected);
                }
            } else {
                self.unlisted_git("git without a subcommand");
            }
            self.generic_paths(&st_git, rest, Access::Any);
            return;
        };
        for r in &not_green {
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                format!("git with {r} is not read-only"),
            );
        }
        self.git_subcommand_code(&sub, rest, &st_git, depth);
        let known_rest: Vec<String> = rest.iter().filter_map(Field::known).collect();
        let has = |o: &str| {
            known_rest
                .iter()
                .any(|a| a == o || a.starts_with(&format!("{o}=")))
        };
        // Options that switch on configured programs or write files, on any subcommand.
        for a in &known_rest {
            if a == "--ext-diff" || a == "--textconv" {
                self.add(
                    Verdict::Yellow,
                    "git.not-read-only",
                    format!("`git {sub} {a}` runs a configured program"),
                );
            }
            if a == "--output" {
                if let Some(v) = known_rest.iter().skip_while(|x| *x != "--output").nth(1) {
                    self.path_field(&st_git, &Field::lit(v), Access::Write);
                }
            }
            if a == "--output" || a.starts_with("--output=") {
                self.add(
                    Verdict::Yellow,
                    "git.not-read-only",
                    format!("`git {sub} --output` writes a file"),
                );
                if let Some(v) = a.strip_prefix("--output=") {
                    self.path_field(&st_git, &Field::lit(v), Access::Write);
                }
            }
        }
        if known_rest.iter().any(|a| a == "--help" || a == "-h") || sub == "help" {
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                format!("`git {sub} --help` runs man and a pager"),
            );
        }
        let network = matches!(sub.as_str(), "fetch" | "pull" | "push" | "clone" | "ls-remote" | "send-email" | "request-pull" | "send-pack" | "fetch-pack" | "archive" if sub != "archive" || has("--remote"))
            || sub == "remote"
                && known_rest
                    .iter()
                    .any(|s| matches!(s.as_str(), "show" | "update" | "prune" | "set-head"))
            || sub == "lfs"
                && known_rest.iter().any(|s| {
                    matches!(
                        s.as_str(),
                        "pull" | "fetch" | "push" | "clone" | "install" | "post-checkout"
                    )
                })
            || sub == "maintenance"
                && known_rest
                    .iter()
                    .any(|s| s.contains("prefetch") || s == "run")
            || sub == "subtree"
                && known_rest
                    .iter()
                    .any(|s| matches!(s.as_str(), "push" | "pull" | "add"))
            || sub == "submodule"
                && known_rest
                    .iter()
                    .any(|s| matches!(s.as_str(), "update" | "sync" | "add" | "foreach"))
            || sub == "svn";
        if network {
            for a in &known_rest {
                if let Some(h) = host_of(a) {
                    self.out.hosts.push(h);
                }
            }
            self.add(
                Verdict::Red,
                "net.git",
                format!("`git {sub}` uses the network"),
            );
        }
        if sub == "subtree" && known_rest.iter().any(|s| s == "push") {
            // `git subtree push --prefix=P REMOTE REF`: REF is the remote branch updated.
            if known_rest.iter().filter(|a| !a.starts_with('-')).any(|a| {
                protected
                    .iter()
                    .any(|p| a.trim_start_matches("refs/heads/").eq_ignore_ascii_case(p))
            }) {
                self.add(
                    Verdict::Blocked,
                    "git.push.protected",
                    "`git subtree push` would update a protected branch".to_string(),
                );
            }
        }
        if sub == "init" || sub == "clone" {
            let template = known_rest.iter().any(|a| a.starts_with("--template"))
                || config_pairs
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("init.templateDir"))
                || inv.env.iter().any(|(n, _)| n == "GIT_TEMPLATE_DIR")
                || st.vars.contains_key("GIT_TEMPLATE_DIR");
            if template {
                self.add(Verdict::Blocked, "git.guard.hook", format!("`git {sub}` with a template directory copies its hooks, the pre-push hook included"));
            }
        }
        // A changed home or global configuration can set core.hooksPath for the push.
        if sub == "push" {
            let moved = ["HOME", "XDG_CONFIG_HOME"]
                .iter()
                .any(|n| inv.env.iter().any(|(e, _)| e == n) || st.vars.contains_key(*n))
                || st
                    .vars
                    .keys()
                    .any(|k| k.starts_with("GIT_CONFIG") || k == "GIT_DIR" || k == "GIT_EXEC_PATH");
            if moved {
                self.add(Verdict::Blocked, "git.guard.hooks-path", "`git push` with another home or configuration directory can switch the pre-push hook off".to_string());
            }
        }
        if (sub == "push" || sub == "send-pack")
            && (rest.iter().any(|r| !r.is_known()) || inv.env.iter().any(|(_, v)| v.is_none()))
        {
            self.add(
                Verdict::Blocked,
                "git.push.unresolved",
                "the push has words that cannot be known before it runs; it could update a protected branch".to_string(),
            );
        }
        if sub == "push" || sub == "send-pack" {
            if sub == "send-pack" {
                self.add(
                    Verdict::Blocked,
                    "git.guard.send-pack",
                    "`git send-pack` pushes without running the pre-push hook".to_string(),
                );
            }
            if self.ctx.git.is_none() {
                self.git_push_static(args, &protected);
            }
            self.generic_paths(&st_git, rest, Access::Read);
            return;
        }
        let findings_before = self.out.findings.len();
        let green_sub = crate::git_tables::READ_ONLY_SUBCOMMANDS.contains(&sub.as_str());
        match sub.as_str() {
            "status" | "log" | "show" | "diff" | "blame" | "rev-parse" | "ls-files" | "ls-tree"
            | "cat-file" | "rev-list" | "show-ref" | "for-each-ref" | "merge-base" | "describe"
            | "shortlog" | "count-objects" => {
                if sub == "diff" && has("--no-index") {
                    // compares files anywhere: paths checked below
                }
                if sub == "cat-file" && (has("--filters") || has("--textconv")) {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        "`git cat-file --filters/--textconv` runs configured programs".to_string(),
                    );
                }
            }
            "grep" => {
                for a in &known_rest {
                    match git_grep_open_pager(a) {
                        Some(Some(cmd)) => self.add(
                            Verdict::Red,
                            "git.program-option",
                            format!("`git grep -O{cmd}` runs a program"),
                        ),
                        Some(None) => self.add(
                            Verdict::Yellow,
                            "git.not-read-only",
                            "`git grep -O` opens the configured pager".to_string(),
                        ),
                        None => {}
                    }
                }
            }
            "branch" | "tag" => {
                // Listing only: a closed set of listing options (DESIGN.md §2a); anything else
                // (creating, deleting, moving, upstream or description changes, verifying
                // signatures) is not read-only.
                let (flags, long): (&str, &[&str]) = if sub == "branch" {
                    (
                        "arlvqi",
                        &[
                            "all",
                            "remotes",
                            "list",
                            "verbose",
                            "contains",
                            "no-contains",
                            "merged",
                            "no-merged",
                            "points-at",
                            "sort",
                            "format",
                            "show-current",
                            "color",
                            "no-color",
                            "column",
                            "no-column",
                            "ignore-case",
                            "abbrev",
                            "no-abbrev",
                            "quiet",
                        ],
                    )
                } else {
                    (
                        "li",
                        &[
                            "list",
                            "contains",
                            "no-contains",
                            "merged",
                            "no-merged",
                            "points-at",
                            "sort",
                            "format",
                            "color",
                            "no-color",
                            "column",
                            "no-column",
                            "ignore-case",
                        ],
                    )
                };
                let mut listing_with_operands = false;
                let mut read_only = true;
                let mut positional = 0;
                for a in &known_rest {
                    if let Some(long_opt) = a.strip_prefix("--") {
                        let name = long_opt.split('=').next().unwrap_or("");
                        if !long.contains(&name) {
                            read_only = false;
                        }
                        listing_with_operands |= matches!(
                            name,
                            "list"
                                | "contains"
                                | "no-contains"
                                | "merged"
                                | "no-merged"
                                | "points-at"
                        );
                    } else if let Some(letters) = a.strip_prefix('-') {
                        let n_ok = sub == "tag"
                            && letters.starts_with('n')
                            && letters[1..].bytes().all(|b| b.is_ascii_digit());
                        let all_flags =
                            !letters.is_empty() && letters.chars().all(|c| flags.contains(c));
                        if !n_ok && !all_flags {
                            read_only = false;
                        }
                        listing_with_operands |= letters.contains('l');
                    } else {
                        positional += 1;
                    }
                }
                if !read_only || positional > 0 && !listing_with_operands {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        format!("`git {sub}` that is not a listing (creates, deletes, changes or verifies)"),
                    );
                }
            }
            "remote" => {
                let ok = known_rest.iter().all(|a| a == "-v" || a == "--verbose");
                if !ok && !network {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        "`git remote` that changes remotes".to_string(),
                    );
                }
            }
            "config" => self.git_config(&known_rest, rest, &st_git),
            "stash" => {
                if known_rest.first().map(String::as_str) != Some("list") {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        "`git stash` changes the working tree".to_string(),
                    );
                }
            }
            "worktree" => {
                if known_rest.first().map(String::as_str) != Some("list") {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        "`git worktree` that adds, moves or removes worktrees".to_string(),
                    );
                }
            }
            // `git version [--build-options]` prints git's own version (git-version(1)).
            "version" => {
                if rest
                    .iter()
                    .any(|a| a.known().as_deref() != Some("--build-options"))
                {
                    self.unlisted_git("`git version` with other arguments");
                }
            }
            "reflog" => {
                if known_rest
                    .first()
                    .is_some_and(|a| matches!(a.as_str(), "expire" | "delete" | "drop"))
                {
                    self.add(
                        Verdict::Yellow,
                        "git.not-read-only",
                        "`git reflog expire/delete` changes the reflog".to_string(),
                    );
                }
            }
            "clean" => {
                self.add(
                    Verdict::Yellow,
                    "git.not-read-only",
                    "`git clean` deletes untracked files".to_string(),
                );
                let mut f = false;
                let mut d_or_x = false;
                for a in &known_rest {
                    if a.starts_with("--") {
                        // git accepts unambiguous abbreviations (`--forc`, `--fo`).
                        f |= a.len() >= 4 && "--force".starts_with(a.as_str());
                    } else if let Some(l) = a.strip_prefix('-') {
                        f |= l.contains('f');
                        d_or_x |= l.contains('d') || l.contains('x') || l.contains('X');
                    }
                }
                if f && d_or_x {
                    self.add(
                        Verdict::Red,
                        "rm.recursive-force",
                        "`git clean -f` with `-d`/`-x` deletes recursively without confirmation"
                            .to_string(),
                    );
                }
            }
            "hook" => {
                self.add(
                    Verdict::Red,
                    "git.hook-run",
                    "`git hook run` runs repository hooks".to_string(),
                );
            }
            _ => {
                if !network {
                    // An alias (resolved by the inspector) or any other subcommand.
                    match alias {
                        Some(AliasExpansion::Git(words)) if depth < super::MAX_DEPTH => {
                            let mut line = String::from("git");
                            for w in &words {
                                line.push(' ');
                                line.push_str(&shell_quote(w));
                            }
                            for r in rest {
                                line.push(' ');
                                line.push_str(&shell_quote(&r.display()));
                            }
                            self.add(
                                Verdict::Yellow,
                                "git.alias",
                                format!("`git {sub}` is an alias"),
                            );
                            self.line(&line, st_git.clone(), depth + 1);
                        }
                        Some(AliasExpansion::Shell(text)) => {
                            self.add(
                                Verdict::Yellow,
                                "git.alias",
                                format!("`git {sub}` is a shell alias"),
                            );
                            self.line(&text, st_git.clone(), depth + 1);
                        }
                        _ => self.unlisted_git(&format!("`git {sub}`")),
                    }
                }
            }
        }
        self.dynamic_args_not_green("git", rest);
        // Revisions and pathspecs: paths are checked like any word (`HEAD:README.md` resolves
        // inside; `-- /etc/passwd` does not).
        let mut paths_rest: Vec<Field> = Vec::new();
        for r in rest {
            if let Some(t) = r.known() {
                if t.starts_with('-') {
                    // Option values are words: `--orderfile=.env`, and attached short values
                    // (`-O/etc/passwd`, `-X.env`) whatever the option.
                    if let Some((_, v)) = t.split_once('=') {
                        if !v.is_empty() {
                            paths_rest.push(self.tilde_value(&Field::lit(v), r));
                        }
                    } else if !t.starts_with("--") && t.len() > 2 {
                        let v: String = t.chars().skip(2).collect();
                        if v.starts_with(['/', '~', '.'])
                            || v.contains('/')
                            || super::paths::credential_component(&v)
                        {
                            paths_rest.push(self.tilde_value(&Field::lit(&v), r));
                        }
                    }
                    continue;
                }
                // Revision ranges (`a..b`, `a...b`) are not paths.
                if t.contains("..") && !t.contains('/') && !t.starts_with("..") {
                    continue;
                }
            }
            paths_rest.push(r.clone());
        }
        // Subcommands that change the tree (`mv`, `checkout`, `restore`, `checkout-index`…)
        // may write where their words point.
        let read_only = green_sub
            && !self.out.findings[findings_before.min(self.out.findings.len())..]
                .iter()
                .any(|f| f.rule == "git.not-read-only");
        let access = if read_only { Access::Read } else { Access::Any };
        for f in paths_rest {
            self.path_field(&st_git, &f, access);
        }
    }

    fn unlisted_git(&mut self, what: &str) {
        self.add(
            Verdict::Yellow,
            "git.not-read-only",
            format!("{what} is not a read-only git command"),
        );
    }

    /// One git global option.
    fn git_global(
        &mut self,
        st: &State,
        st_git: &mut State,
        opt: &str,
        v: Option<Field>,
        not_green: &mut Vec<String>,
        config: &mut Vec<(String, Option<String>)>,
    ) {
        let Some(v) = v else {
            not_green.push(format!("`{opt}` without a value"));
            return;
        };
        match opt {
            "-C" => {
                self.path_field(st_git, &v, Access::Read);
                st_git.enter(&v);
            }
            "--git-dir" | "--work-tree" => self.path_field(st_git, &v, Access::Read),
            "--exec-path" => {
                self.add(
                    Verdict::Red,
                    "git.program-option",
                    "`git --exec-path=DIR` runs git programs from another directory".to_string(),
                );
                self.path_field(st, &v, Access::Read);
            }
            "-c" => {
                match v.known() {
                    Some(kv) => {
                        let (k, val) = match kv.split_once('=') {
                            Some((k, val)) => (k.to_string(), Some(val.to_string())),
                            None => (kv.clone(), None),
                        };
                        self.git_config_key(&k, val.as_deref(), "-c");
                        // Values are words: `blame.ignoreRevsFile=.env` names a credential.
                        if let Some(val) = &val {
                            if !val.is_empty() {
                                let v = self.tilde_value(&Field::lit(val), &Field::default());
                                self.path_field(st_git, &v, Access::Read);
                            }
                        }
                        config.push((k, val));
                    }
                    None => {
                        self.opaque("git -c", "a configuration value that cannot be known");
                    }
                }
                not_green.push("`-c`".to_string());
            }
            "--config-env" => {
                match v.known() {
                    Some(kv) => {
                        let k = kv.split_once('=').map(|(k, _)| k.to_string()).unwrap_or(kv);
                        // The value comes from the environment: unknown, treat as code-capable.
                        self.git_config_key(&k, None, "--config-env");
                    }
                    None => self.opaque("git --config-env", "a key that cannot be known"),
                }
                not_green.push("`--config-env`".to_string());
            }
            _ => not_green.push(format!("`{opt}`")),
        }
    }

    /// Configuration keys whose value is a program (red) or that switch the push guard off
    /// (blocked).
    fn git_config_key(&mut self, key: &str, value: Option<&str>, how: &str) {
        let k = key.to_ascii_lowercase();
        if k == "core.hookspath" || k.starts_with("hook.") {
            if how == "-c" || how == "--config-env" {
                // For this one command: it matters when the command can push (decided once
                // the subcommand is known).
                self.hook_override = true;
                return;
            }
            self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git {how} {key}` changes which hooks git runs: it switches the push guard off"));
            return;
        }
        // Keys whose value git runs (git_tables, shared with the git guard).
        let code = crate::git_tables::runs_program(key, value);
        if code {
            let shown = value.map(|v| format!("={v}")).unwrap_or_default();
            self.add(
                Verdict::Red,
                "git.config-code",
                format!("`git {how} {key}{shown}` sets a key whose value git runs as a program"),
            );
        }
    }

    /// `git config`: reads (`--get*`, `--list`, `get`, `list`) are green; anything else is a
    /// write (yellow); global/system writes are red; hook keys and sections are blocked. Long
    /// options are matched the way git's parser does, abbreviations included (`--unset-a`,
    /// `--glob`); an option git would not recognise, or an ambiguous one, counts as a write.
    fn git_config(&mut self, known: &[String], rest: &[Field], st: &State) {
        const READ: &[&str] = &[
            "get",
            "get-all",
            "get-regexp",
            "get-urlmatch",
            "get-color",
            "get-colorbool",
            "list",
            "show-origin",
            "show-scope",
            "name-only",
            "null",
            "includes",
            "no-includes",
            "default",
            "type",
            "bool",
            "int",
            "path",
            "local",
            "worktree",
            "expiry-date",
            "bool-or-int",
            "fixed-value",
            "no-type",
            "all",
            "regexp",
            "url",
            "value",
        ];
        const WRITE: &[&str] = &[
            "add",
            "unset",
            "unset-all",
            "replace-all",
            "rename-section",
            "remove-section",
            "edit",
            "global",
            "system",
            "file",
            "blob",
            "comment",
            "append",
        ];
        let mut read = false;
        let mut write = false;
        let mut edit = false;
        let mut global = false;
        let mut positional: Vec<&String> = Vec::new();
        let mut i = 0;
        while i < known.len() {
            let a = &known[i];
            if let Some(long) = a.strip_prefix("--") {
                let (name, val) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                let exact = READ.contains(&name) || WRITE.contains(&name);
                let cands: Vec<&str> = READ
                    .iter()
                    .chain(WRITE)
                    .copied()
                    .filter(|o| o.starts_with(name))
                    .collect();
                let full = if exact {
                    Some(name)
                } else if cands.len() == 1 {
                    Some(cands[0])
                } else {
                    None
                };
                match full {
                    Some(f) if READ.contains(&f) => {
                        if f.starts_with("get") || f == "list" {
                            read = true;
                        }
                        if matches!(f, "default" | "type") && val.is_none() {
                            i += 1;
                        }
                    }
                    Some(f) => {
                        edit |= f == "edit";
                        write |= !matches!(f, "file" | "blob" | "global" | "system");
                        if matches!(f, "global" | "system") {
                            global = true;
                        }
                        if matches!(f, "file" | "blob") {
                            let v = match val {
                                Some(v) => Some(Field::lit(v)),
                                None => {
                                    i += 1;
                                    rest.get(i).cloned()
                                }
                            };
                            if let Some(v) = v {
                                self.path_field(st, &v, Access::Any);
                            }
                        }
                    }
                    None => write = true,
                }
            } else if let Some(letters) = a.strip_prefix('-') {
                for c in letters.chars() {
                    match c {
                        'l' => read = true,
                        'z' => {}
                        'e' => {
                            write = true;
                            edit = true;
                        }
                        'f' => {
                            i += 1;
                            if let Some(v) = rest.get(i) {
                                self.path_field(st, v, Access::Any);
                            }
                        }
                        _ => write = true,
                    }
                }
            } else {
                positional.push(a);
            }
            i += 1;
        }
        // git 2.46+: `git config get|list|set|unset|rename-section|remove-section|edit …`.
        let verb = positional.first().map(|s| s.as_str());
        let verb_form = matches!(
            verb,
            Some("get" | "list" | "set" | "unset" | "rename-section" | "remove-section" | "edit")
        );
        let sub_read = matches!(verb, Some("get" | "list"));
        let args: Vec<&String> = if verb_form {
            positional[1..].to_vec()
        } else {
            positional.clone()
        };
        let sectionwise = known
            .iter()
            .any(|a| a.starts_with("--rename-s") || a.starts_with("--remove-s"))
            || matches!(verb, Some("rename-section" | "remove-section"));
        if verb_form && !sub_read
            || !verb_form && !read && !args.is_empty() && (args.len() >= 2 || write)
        {
            write = true;
        }
        if edit || verb == Some("edit") {
            self.add(
                Verdict::Blocked,
                "git.guard.hooks-path",
                "`git config --edit` can change core.hooksPath, which switches the push guard off"
                    .to_string(),
            );
            self.add(
                Verdict::Red,
                "path.git-config",
                "`git config --edit` edits the configuration, which can run code later".to_string(),
            );
        }
        if write {
            if let Some(k) = args.first() {
                if sectionwise {
                    // Removing or renaming a section changes every key in it.
                    let sect = k.to_ascii_lowercase();
                    if sect == "core" || sect == "hook" || sect.starts_with("hook.") {
                        self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git config` changing the `{k}` section changes which hooks git runs"));
                    }
                    if sect.starts_with("alias")
                        || sect.starts_with("include")
                        || sect.starts_with("filter")
                        || sect.starts_with("diff")
                        || sect == "core"
                    {
                        self.add(
                            Verdict::Red,
                            "git.config-code",
                            format!(
                                "`git config` changing the `{k}` section changes programs git runs"
                            ),
                        );
                    }
                    if let Some(new) = args.get(1) {
                        let n = new.to_ascii_lowercase();
                        if n == "core"
                            || n.starts_with("hook")
                            || n.starts_with("alias")
                            || n.starts_with("include")
                        {
                            self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git config` renaming a section to `{new}` can change which hooks or programs git runs"));
                        }
                    }
                } else {
                    self.git_config_key(k, args.get(1).map(|s| s.as_str()), "config");
                }
            }
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                "`git config` that writes configuration".to_string(),
            );
            self.add(
                Verdict::Red,
                crate::rules::GIT_CONFIG_WRITE.id,
                "`git config` writes the repository's configuration (.git/config), which can run code later".to_string(),
            );
            if global {
                self.add(
                    Verdict::Red,
                    "config.global",
                    "`git config --global/--system` writes the user's or the system's configuration".to_string(),
                );
            }
        } else if !(read || sub_read) {
            // DESIGN.md §2a: `config` is green with `--get*`/`--list` only.
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                "`git config` without `--get`/`--list`".to_string(),
            );
        }
    }

    /// Without a git inspector: a push naming a protected branch, or switching the hook off,
    /// is blocked; a push whose destination cannot be seen from the line could reach a
    /// protected branch through the repository's configuration, so it is blocked too.
    fn git_push_static(&mut self, args: &[Field], protected: &[String]) {
        let known: Vec<String> = args.iter().filter_map(Field::known).collect();
        let push_at = known.iter().position(|a| a == "push" || a == "send-pack");
        let mut named = false;
        let mut explicit = false;
        for a in known.iter().skip(push_at.map(|p| p + 1).unwrap_or(0)) {
            if a.starts_with("--no-ver") || a.starts_with("--no-veri") || a == "--no-verify" {
                self.add(
                    Verdict::Blocked,
                    "git.guard.no-verify",
                    "`git push --no-verify` skips the pre-push hook that guards protected branches"
                        .to_string(),
                );
            }
            if a == "--all" || a == "--mirror" || a == "--branches" {
                named = true;
            }
            if a.starts_with('-') {
                continue;
            }
            explicit = true;
            let dst = a
                .rsplit(':')
                .next()
                .unwrap_or(a)
                .trim_start_matches(['+', '^']);
            let short = dst.trim_start_matches("refs/").trim_start_matches("heads/");
            if protected.iter().any(|p| p.eq_ignore_ascii_case(short))
                || dst == "HEAD"
                || dst == "@"
                || a.contains('*')
                || a == ":"
                || a == "+:"
            {
                named = true;
            }
        }
        if named || !explicit {
            self.add(Verdict::Blocked, "git.push.protected", "this push may update a protected branch (main/master) and the repository was not inspected".to_string());
        }
    }
}

/// `env`'s options as separate words: clusters split (`-vS x` → `-v -S x`), attached values
/// detached (`-uNAME` → `-u NAME`), `-` read as `-i`; everything from the command on is kept.
fn normalize_env_args(args: &[Field]) -> Vec<Field> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(t) = args[i].known() else { break };
        if t == "-" {
            out.push(Field::lit("-i"));
            i += 1;
            continue;
        }
        if t == "--" || !t.starts_with('-') || t.starts_with("--") {
            if t.starts_with("--") && t != "--" {
                out.push(args[i].clone());
                i += 1;
                continue;
            }
            break;
        }
        let letters: Vec<char> = t[1..].chars().collect();
        let mut j = 0;
        while j < letters.len() {
            let c = letters[j];
            out.push(Field::lit(&format!("-{c}")));
            if matches!(c, 'u' | 'C' | 'S') {
                let rest: String = letters[j + 1..].iter().collect();
                if !rest.is_empty() {
                    out.push(Field::lit(&rest));
                } else if let Some(next) = args.get(i + 1) {
                    out.push(next.clone());
                    i += 1;
                }
                break;
            }
            j += 1;
        }
        i += 1;
    }
    out.extend_from_slice(&args[i.min(args.len())..]);
    out
}

/// An option that takes an optional value, in every spelling getopt-style parsers accept:
/// long names and their unambiguous abbreviations (`--open=cmd` for
/// `--open-files-in-pager=cmd`), and short letters inside a cluster with the value attached
/// (`-nOcmd`). Returns `Some(Some(value))` with a value, `Some(None)` without, `None` when `t`
/// is another option. `value_letters` are the cluster's letters that take a value themselves
/// and so end it.
fn optional_value_option(
    t: &str,
    letters_of: &[char],
    longs: &[&str],
    min_abbrev: usize,
    value_letters: &str,
) -> Option<Option<String>> {
    if let Some(long) = t.strip_prefix("--") {
        let (name, val) = long
            .split_once('=')
            .map_or((long, None), |(n, v)| (n, Some(v)));
        let hit = name.len() >= min_abbrev && longs.iter().any(|l| l.starts_with(name));
        return hit.then(|| val.map(str::to_string));
    }
    let letters = t.strip_prefix('-')?;
    for (i, c) in letters.char_indices() {
        if letters_of.contains(&c) {
            let rest = &letters[i + c.len_utf8()..];
            return Some((!rest.is_empty()).then(|| rest.to_string()));
        }
        if value_letters.contains(c) {
            return None;
        }
    }
    None
}

/// Whether an `fd` argument starts `-x`/`-X`/`--exec`/`--exec-batch` (also bundled, `-Hx`,
/// attached, `-xrm`, or `--exec=rm`); returns the first word of the command when it is
/// attached to the option.
fn fd_exec_start(t: &str) -> Option<Option<String>> {
    optional_value_option(t, &['x', 'X'], &["exec", "exec-batch"], 3, "edEctjSo")
}

/// `git grep`'s `-O[<pager>]`/`--open-files-in-pager[=<pager>]` in any spelling git's option
/// parser accepts: `Some(Some(cmd))` runs a program, `Some(None)` opens the configured pager,
/// `None` is another option.
fn git_grep_open_pager(a: &str) -> Option<Option<String>> {
    optional_value_option(a, &['O'], &["open-files-in-pager"], 2, "ABCefm")
}

/// Paths that name the process's own stdin.
fn is_stdin_path(t: &str) -> bool {
    matches!(
        t,
        "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/proc/thread-self/fd/0"
    )
}

/// Parses options up to the first operand (the inner command of a wrapper).
struct UntilCommand {
    opts: Vec<(String, Option<Field>)>,
    command_at: usize,
}

fn parse_opts_until_command(args: &[Field], spec: &OptSpec) -> UntilCommand {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(t) = args[i].known() else { break };
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t.len() == 1 {
            break;
        }
        let parsed = parse_opts(&args[i..i + 1], spec);
        let mut consumed_next = false;
        for tok in parsed {
            if let Tok::Opt { name, value } = tok {
                let needs = if let Some(long) = name.strip_prefix("--") {
                    spec.long_val.iter().any(|l| l.starts_with(long)) && !t.contains('=')
                } else {
                    spec.short_val.contains(name.trim_start_matches('-')) && value.is_none()
                };
                if needs && value.is_none() {
                    opts.push((name, args.get(i + 1).cloned()));
                    consumed_next = true;
                } else {
                    opts.push((name, value));
                }
            }
        }
        i += if consumed_next { 2 } else { 1 };
    }
    UntilCommand {
        opts,
        command_at: i,
    }
}

/// The words of a field list joined by spaces, when all are known.
fn join_known(fields: &[Field]) -> Option<String> {
    let mut parts = Vec::new();
    for f in fields {
        parts.push(f.known()?);
    }
    Some(parts.join(" "))
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Path-like pieces of one argument: the operand itself, `--opt=VALUE` values, `key=VALUE`
/// values, attached short-option values that look like paths.
fn path_candidates(f: &Field) -> Vec<Field> {
    let Some(t) = f.known() else {
        return vec![f.clone()];
    };
    if let Some(long) = t.strip_prefix("--") {
        return match long.split_once('=') {
            Some((_, v)) if !v.is_empty() => split_colon_list(&Field::lit(v)),
            _ => Vec::new(),
        };
    }
    if t.starts_with('-') && t.len() > 2 {
        // `-opt=VALUE` (go, java -Dk=v) and an attached value anywhere in a cluster
        // (`-cf/tmp/x.tar`, `-o/tmp/x`).
        if let Some((_, v)) = t.split_once('=') {
            return split_colon_list(&Field::lit(unquote(v)));
        }
        // Past the dash and the option letter, which may be any character.
        let v = t.char_indices().nth(2).map_or("", |(i, _)| &t[i..]);
        if let Some(i) = v.find(['/', '~']) {
            return vec![Field::lit(&v[i..])];
        }
        if v.starts_with("..") {
            return vec![Field::lit(v)];
        }
        return Vec::new();
    }
    if t.starts_with('-') {
        return Vec::new();
    }
    if let Some((k, v)) = t.split_once('=') {
        if is_identifier(k)
            || k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return split_colon_list(&Field::lit(unquote(v)));
        }
    }
    vec![f.clone()]
}

/// A value without the quotes of a TOML or shell-in-a-string spelling (`"/tmp/t"`).
fn unquote(v: &str) -> &str {
    v.trim_matches(|c| c == '"' || c == '\'')
}

/// `PATH`-like values: each colon-separated absolute element is a path of its own.
fn split_colon_list(f: &Field) -> Vec<Field> {
    match f.known() {
        Some(t)
            if t.contains(':')
                && t.split(':')
                    .any(|p| p.starts_with('/') || p.starts_with('~'))
                && !t.contains("://") =>
        {
            t.split(':')
                .filter(|p| !p.is_empty())
                .map(Field::lit)
                .collect()
        }
        _ => vec![f.clone()],
    }
}

/// Single-quotes a word for re-parsing.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
