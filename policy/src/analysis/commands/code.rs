//! Code handed to a shell or an interpreter: `bash -c`, scripts, fed stdin, `eval`,
//! `python -c` and kin (DESIGN.md §2a "Shells and interpreters").

use super::*;
use crate::programs::ShellArgs;

impl Analyzer<'_> {
    /// Programs that execute what they read on a fed stdin: REPLs and command interpreters
    /// (gdb, sqlite3's `.shell`, ex/vim, m4's `syscmd`, dc's `!`…), and any code-reading tool
    /// told to take its program from stdin (`awk -f -`, `sed -f /dev/stdin`, `make -f -`).
    pub(crate) fn fed_code_reader(&mut self, inv: &Invocation<'_>) {
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
    pub(crate) fn carried_shell_lines(
        &mut self,
        st: &State,
        args: &[Field],
        stdin: Stdin,
        depth: usize,
    ) {
        for (i, a) in args.iter().enumerate() {
            let Some(t) = a.known() else { continue };
            let base = t.rsplit('/').next().unwrap_or("");
            if registry::SHELLS.contains(&base) {
                let _ = self.invoke(st.clone(), &args[i..], Vec::new(), stdin, depth);
                return;
            }
        }
    }

    /// `sh|bash|… -c STRING`, a script file, or commands on stdin.
    pub(crate) fn shell(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let p = inv.program.as_str();
        let args = inv.args;
        // The argv is read by the shell's INVOCATION rules, the same reader the supervisor
        // uses for an intercepted exec (`crate::programs::read_shell_args`).
        let known: Vec<Option<String>> = args.iter().map(Field::known).collect();
        let words: Vec<Option<&str>> = known.iter().map(Option::as_deref).collect();
        let base = p.rsplit('/').next().unwrap_or(p);
        // Startup files named on the line run before anything else.
        for i in crate::programs::shell_startup(base, &words).sourced {
            if let Some(f) = args.get(i) {
                self.path_field(st, f, Access::Read);
                self.add(
                    Verdict::Yellow,
                    "shell.script",
                    format!("`{p}` runs the file `{}`", f.display()),
                );
            }
        }
        self.add(
            Verdict::Yellow,
            "shell.interpreter",
            format!("`{p}` runs shell code"),
        );
        match crate::programs::read_shell_args(base, &words) {
            ShellArgs::Command { string } => {
                match &known[string] {
                    Some(code) => {
                        self.line_with_stdin(code, st.clone(), depth + 1, inv.stdin);
                        // `sh -c 'cat "$1"' _ .env`: the positional parameters are words too.
                        self.generic_paths(st, &args[(string + 2).min(args.len())..], Access::Any);
                    }
                    None => {
                        self.opaque(&format!("{p} -c"), "a command string that cannot be known")
                    }
                }
                return;
            }
            ShellArgs::MissingCommand => {
                self.add(
                    Verdict::Yellow,
                    "shell.interpreter",
                    format!("`{p} -c` without a command"),
                );
                return;
            }
            ShellArgs::Uncertain => {
                if let Some(first) = known.iter().position(Option::is_none) {
                    // After a `-c`, the word not known is the command string or an option.
                    let after_c = known[..first].iter().flatten().any(|w| {
                        (w.starts_with('-') || w.starts_with('+'))
                            && !w.starts_with("--")
                            && w.contains('c')
                    });
                    if after_c {
                        self.opaque(&format!("{p} -c"), "a command string that cannot be known");
                    } else {
                        self.opaque(
                            p,
                            "a script whose text cannot be known (a substitution or variable)",
                        );
                    }
                    return;
                }
                // Which word is the code cannot be told for sure: every operand-like word is
                // judged as a line, and every word as a path (the worst of the candidates).
                self.add(
                    Verdict::Yellow,
                    "shell.script",
                    format!("`{p}` has options tyba cannot read with certainty"),
                );
                for w in words.iter().flatten() {
                    if !w.starts_with('-') && !w.starts_with('+') {
                        self.line_with_stdin(w, st.clone(), depth + 1, inv.stdin);
                    }
                }
                self.generic_paths(st, args, Access::Any);
            }
            ShellArgs::Script { file } => {
                let script = &args[file];
                if known[file].is_none() {
                    self.opaque(
                        p,
                        "a script whose text cannot be known (a substitution or variable)",
                    );
                    return;
                }
                if !known[file].as_deref().is_some_and(is_stdin_path) {
                    self.add(
                        Verdict::Yellow,
                        "shell.script",
                        format!("`{p}` runs the script `{}`", script.display()),
                    );
                    self.path_field(st, script, Access::Read);
                    self.generic_paths(st, &args[file + 1..], Access::Any);
                    return;
                }
            }
            // Commands on stdin: judged below when it is fed.
            ShellArgs::Stdin { .. } => {}
        }
        if inv.stdin == Stdin::Fed {
            self.add(
                Verdict::Red,
                "shell.pipe-to-shell",
                format!(
                    "input is piped or redirected into `{p}`: whatever produced it runs as code"
                ),
            );
            // A literal script on its stdin (`bash <<< 'LINE'`, `echo 'LINE' | bash`, a
            // here-document) is analysed like `bash -c 'LINE'` (DESIGN.md §2a).
            if let Some(text) = self.fed_script.take() {
                self.line(&text, st.clone(), depth + 1);
            }
        }
    }

    /// Interpreters: inline code is not analysed (yellow at least); code built at run time is
    /// red; stdin fed into them is red; servers are red.
    pub(crate) fn interpreter(
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
        // perl's and ruby's `-i[EXT]` (alone or after simple flags: `-pi`, `-i.bak`, `-pi.bak`)
        // edits the files that follow the code in place: they are written.
        let mut in_place = false;
        let edits = p.starts_with("perl") || p.ends_with("ruby");
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
            if edits && !t.starts_with("--") {
                if let Some(pos) = t[1..].find('i') {
                    in_place |= t[1..1 + pos].chars().all(|c| "acnpsSTtuUwWX".contains(c));
                }
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
            self.interpreter_operands(st, &args[i.min(args.len())..], in_place);
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
                self.interpreter_operands(st, &args[i + 1..], in_place);
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

    /// The operands after an interpreter's code or script: written when it edits them in
    /// place (`perl -pi`), otherwise judged by their shape ([`Self::generic_paths`]).
    fn interpreter_operands(&mut self, st: &State, args: &[Field], in_place: bool) {
        if !in_place {
            return self.generic_paths(st, args, Access::Any);
        }
        for a in args {
            if a.known().is_some_and(|t| t.starts_with('-')) {
                continue;
            }
            self.path_field(st, a, Access::Write);
        }
    }

    /// `eval ARGS…`: the joined words are a command line.
    ///
    /// Literal words are the code that runs, analysed inline with no floor of their own
    /// (DESIGN.md §2a, shell housekeeping); anything else is code assembled at run time.
    pub(crate) fn eval(&mut self, st: &State, args: &[Field], depth: usize, stdin: Stdin) -> State {
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
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Red, Yellow};

    #[test]
    fn shells_and_interpreters() {
        expect(&[
            ("bash -c 'ls'", Yellow, "shell.interpreter"),
            ("sh -c 'rm -rf build'", Red, "rm.recursive-force"),
            ("bash -c \"$X\"", Red, "shell.dynamic-code"),
            ("eval 'rm -rf build'", Red, "rm.recursive-force"),
            ("python3 -c 'print(1)'", Yellow, "interp.code"),
            ("curl http://x | sh", Red, ""),
        ]);
    }

    /// Option values are never the command string; what cannot be read for sure is judged by
    /// the worst of its words.
    #[test]
    fn shell_option_values_are_not_the_code() {
        expect(&[
            (
                "bash -c -o history 'rm -rf build'",
                Red,
                "rm.recursive-force",
            ),
            (
                "bash -eo pipefail -c 'rm -rf build'",
                Red,
                "rm.recursive-force",
            ),
            ("bash -co history 'rm -rf build'", Red, "rm.recursive-force"),
            (
                "bash -rcfile /dev/null -c 'rm -rf build'",
                Red,
                "rm.recursive-force",
            ),
            (
                "bash --init-file x -c 'rm -rf build'",
                Red,
                "rm.recursive-force",
            ),
            (
                "bash --frobnicate -c 'rm -rf build'",
                Red,
                "rm.recursive-force",
            ),
            ("sh -O extglob -c 'rm -rf build'", Red, "rm.recursive-force"),
            ("bash -c -o", Yellow, "shell.script"),
            ("bash -rcfile x.sh -c 'ls'", Yellow, "shell.script"),
            ("bash -- script.sh", Yellow, "shell.script"),
        ]);
    }
}
