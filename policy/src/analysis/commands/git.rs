//! `git` (and `hub`): global options, aliases (resolved by the git inspector), the
//! subcommands' read-only sets and options, configuration writes and pushes (DESIGN.md §2a
//! "git", §3 the guard).

use super::*;

mod config;
mod push;
mod subcommands;

use subcommands::*;

impl Analyzer<'_> {
    /// `git`: global options, the green subcommands with their read-only flags, code-running
    /// configuration, network subcommands, the push guard.
    pub(crate) fn git(&mut self, st: &State, inv: &Invocation<'_>, depth: usize) {
        let args = inv.args;
        let mut i = 0;
        // The state git runs in: `-C DIR` moves it, else it is the command's.
        let mut st_git = std::borrow::Cow::Borrowed(st);
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
                    let st_git = st_git.to_mut();
                    self.git_global(st, st_git, &t, v, &mut not_green, &mut config_pairs);
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
                            st_git.to_mut(),
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
        // Both belong to this invocation's own `-c` options: taken, so a later git on the
        // line starts without them.
        let code_may_push = std::mem::take(&mut self.config_code_may_push);
        if std::mem::take(&mut self.hook_override) {
            // A key whose value git runs (`core.fsmonitor`, an alias) runs code that inherits
            // the hooks path through GIT_CONFIG_PARAMETERS: a `git push` there skips the hook.
            let could_push = match sub.as_deref() {
                Some(s) => crate::git_tables::may_push(s),
                None => sub_field.is_some(),
            } || code_may_push;
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
        let mut alias = None;
        let policy = self.policy;
        let protected = &policy.config().protected_branches;
        // The git inspector resolves aliases and pushes against the repository.
        if let Some(g) = self.ctx.git {
            let all: Vec<String> = args.iter().map(Field::display).collect();
            let env: Vec<(String, String)> = inv
                .env
                .iter()
                .map(|(n, v)| (n.clone(), v.clone().unwrap_or_else(|| "$?".to_string())))
                .collect();
            let git_cwds: Vec<PathBuf> = st_git.cwds.iter().flatten().cloned().collect();
            for cwd in &git_cwds {
                let report = g.inspect(&GitInvocation {
                    args: &all,
                    env: &env,
                    cwd,
                    protected,
                });
                for f in report.findings {
                    self.out.add(f);
                }
                for p in report.pushes {
                    if !self.out.pushes.contains(&p) {
                        self.out.pushes.push(p);
                    }
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
                    self.git_push_static(args, protected);
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
        // `git credential fill`, `git credential-store get`: the stored credentials printed.
        if sub == "credential" || sub.starts_with("credential-") {
            self.add(
                Verdict::Red,
                "path.credential",
                format!("`git {sub}` reads or changes stored credentials"),
            );
        }
        if switches_head(&sub, &known_rest, rest.iter().all(Field::is_known)) {
            self.head_moved = true;
        }
        if known_rest.iter().any(|a| a == "--help" || a == "-h") || sub == "help" {
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                format!("`git {sub} --help` runs man and a pager"),
            );
        }
        // git's transports and servers (git(1) "Low-level commands", "Interacting with
        // Others"): `remote-<transport>` helpers, the daemon and web servers, mail senders.
        let network = matches!(sub.as_str(), "fetch" | "pull" | "push" | "clone" | "ls-remote" | "send-email" | "request-pull" | "send-pack" | "fetch-pack" | "http-fetch" | "http-push" | "daemon" | "instaweb" | "imap-send" | "p4" | "cvsimport" | "cvsserver" | "archimport" | "archive" if sub != "archive" || has("--remote"))
            || sub.starts_with("remote-")
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
            // Only the prefetch task fetches (git-maintenance(1) TASKS). It has no `--auto`
            // condition, so `maintenance run --auto` (which `git commit` spawns) never runs
            // it, whatever `--task` or the configuration say; `--task=gc` runs gc alone.
            // Without either, the configuration (`maintenance.prefetch.enabled`,
            // `maintenance.strategy` with `--schedule`) may enable it. Checked with git 2.47.
            || sub == "maintenance"
                && (rest.iter().any(|f| f.known().is_none()) || maintenance_fetches(&known_rest))
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
            // The repository in scp-like syntax (`git@github.com:o/r.git`): ssh, port 22.
            if rest.iter().all(Field::is_known) {
                if let Some(h) = super::net_hosts::git_repository(&sub, &known_rest)
                    .and_then(super::net_hosts::git_ssh_host)
                {
                    if !self.out.hosts.contains(&h) {
                        self.out.hosts.push(h);
                    }
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
        // `GIT_DIR`/`--git-dir` name the repository `git init` reinitialises, wherever it runs.
        let git_dir_named = inv.env.iter().any(|(n, _)| n == "GIT_DIR")
            || st.vars.contains_key("GIT_DIR")
            || args
                .iter()
                .filter_map(Field::known)
                .any(|a| a.starts_with("--git-dir"));
        if sub == "init" && self.init_moves_git_dir(&st_git, rest, git_dir_named) {
            self.add(
                Verdict::Blocked,
                crate::rules::GIT_GUARD_GIT_DIR.id,
                "`git init --separate-git-dir` in an existing repository moves its git directory, and with it the configuration and hooks git uses: the pre-push hook would no longer run".to_string(),
            );
        }
        // A changed home or global configuration can set core.hooksPath for the push, or a
        // `remote.*.push` to a protected branch; an alias or external command (a word that is
        // no builtin) can be a push that configuration defines.
        let no_builtin = !crate::git_tables::BUILTINS.contains(&&*sub);
        if sub == "push" || no_builtin {
            let moved = ["HOME", "XDG_CONFIG_HOME"]
                .iter()
                .any(|n| inv.env.iter().any(|(e, _)| e == n) || st.vars.contains_key(*n))
                || st
                    .vars
                    .keys()
                    .any(|k| k.starts_with("GIT_CONFIG") || k == "GIT_DIR" || k == "GIT_EXEC_PATH");
            if moved {
                let why = if no_builtin {
                    format!("`git {sub}` (an alias or a program of its own) with another home or configuration directory can be a push that configuration defines, with the pre-push hook off")
                } else {
                    "`git push` with another home or configuration directory can switch the pre-push hook off".to_string()
                };
                self.add(Verdict::Blocked, "git.guard.hooks-path", why);
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
            // After a branch switch on the line, the repository as inspected now is not
            // the one the push runs in: judge it from the line alone (DESIGN.md §3).
            if self.ctx.git.is_none() || self.head_moved {
                self.git_push_static(args, protected);
            }
            self.generic_paths(&st_git, rest, Access::Read);
            return;
        }
        let findings_before = self.out.findings.len();
        let read_only_kind = crate::git_tables::read_only(&sub);
        let green_sub = read_only_kind.is_some();
        match sub.as_str() {
            _ if read_only_kind == Some(crate::git_tables::ReadOnly::Plain) => {
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
                let (f, d_or_x) = git_clean_force_recursive(rest, &known_rest);
                // `clean.requireForce=false` (git-clean(1)) makes `-f` unneeded; a value that
                // cannot be known may be false, and the environment may carry it.
                let force_off = config_pairs.iter().any(|(k, v)| {
                    k.eq_ignore_ascii_case("clean.requireForce")
                        && v.as_deref()
                            .is_none_or(|v| crate::git_options::config_bool(v) != Some(true))
                }) || st.vars.keys().any(|k| k.starts_with("GIT_CONFIG"))
                    || inv.env.iter().any(|(k, _)| k.starts_with("GIT_CONFIG"));
                if (f || force_off) && d_or_x {
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
                        Some(AliasExpansion::Git(words)) if depth < crate::analysis::MAX_DEPTH => {
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
                            self.line(&line, State::clone(&st_git), depth + 1);
                        }
                        Some(AliasExpansion::Shell(text)) => {
                            self.add(
                                Verdict::Yellow,
                                "git.alias",
                                format!("`git {sub}` is a shell alias"),
                            );
                            self.line(&text, State::clone(&st_git), depth + 1);
                        }
                        _ => self.unlisted_git(&format!("`git {sub}`")),
                    }
                }
            }
        }
        self.dynamic_args_not_green("git", rest);
        // `git config`'s words are keys and values; the file it reads or writes it names
        // itself (`git_config`).
        if sub == "config" {
            return;
        }
        // `git clone REPO DIR` makes DIR, and the missing directories above it, and fills it
        // (git-clone(1): "Clones a repository into a newly created directory"; an existing one
        // must be empty).
        if sub == "clone" {
            if let Some(dir) = clone_directory(rest) {
                self.dir_field(&st_git, dir, true);
            }
        }
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
                            || crate::analysis::paths::credential_component(&v)
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
        // `upload-pack` and `upload-archive` serve a repository to a fetch or an archive (a
        // local `git clone` runs `git-upload-pack REPO`): they read it, never write it.
        let serves = matches!(sub.as_str(), "upload-pack" | "upload-archive");
        let access = if read_only || serves {
            Access::Read
        } else {
            Access::Any
        };
        for f in paths_rest {
            self.path_field(&st_git, &f, access);
        }
    }

    pub(crate) fn unlisted_git(&mut self, what: &str) {
        self.add(
            Verdict::Yellow,
            "git.not-read-only",
            format!("{what} is not a read-only git command"),
        );
    }
}

/// The directory operand of `git clone [OPTIONS] REPO DIR` (git-clone(1)): the second operand,
/// after the options that take a value in the next word. `None` without one, or when a word
/// before it cannot be known (it could be an option taking the next word).
fn clone_directory(rest: &[Field]) -> Option<&Field> {
    const LONG_VALUES: &[&str] = &[
        "origin",
        "branch",
        "upload-pack",
        "template",
        "reference",
        "reference-if-able",
        "separate-git-dir",
        "depth",
        "shallow-since",
        "shallow-exclude",
        "jobs",
        "filter",
        "config",
        "server-option",
        "bundle-uri",
        "ref-format",
    ];
    let mut operands = 0;
    let mut only_operands = false;
    let mut i = 0;
    while i < rest.len() {
        let f = &rest[i];
        i += 1;
        let t = f.known()?;
        if !only_operands && t == "--" {
            only_operands = true;
        } else if !only_operands && t.starts_with("--") {
            if !t.contains('=') && LONG_VALUES.contains(&&t[2..]) {
                i += 1;
            }
        } else if !only_operands && t.starts_with('-') && t.len() > 1 {
            // A cluster of short options: one that takes a value takes the rest of the word,
            // or the next word when it is last.
            if let Some(at) = t[1..].find(|c| "objuc".contains(c)) {
                if at + 2 == t.len() {
                    i += 1;
                }
            }
        } else {
            operands += 1;
            if operands == 2 {
                return Some(f);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Blocked, Green, Red, Yellow};

    #[test]
    fn read_only_and_writing_subcommands() {
        expect(&[
            ("git status", Green, ""),
            ("git -C . log --oneline", Green, ""),
            ("git diff --stat HEAD~1", Green, ""),
            ("git commit -m x", Yellow, "git.not-read-only"),
            ("git fetch origin", Red, "net.git"),
            ("git config user.email x@y", Red, "git.config-write"),
            ("git -c core.pager=sh status", Red, ""),
        ]);
    }

    #[test]
    fn pushes_to_protected_branches_are_blocked() {
        expect(&[
            ("git push origin HEAD:main", Blocked, "git.push.protected"),
            (
                "git push --no-verify origin x",
                Blocked,
                "git.guard.no-verify",
            ),
            ("git send-pack origin main", Blocked, "git.guard.send-pack"),
        ]);
    }
}
