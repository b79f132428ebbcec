//! git's own spellings of deletion and of running commands (git 2.47 documentation):
//!
//! - `git rm -r -f` (`-rf`, `--force`, `-r --forc`…) deletes a tree from the working tree
//!   without the up-to-date check: a recursive forced deletion like `rm -rf` (red,
//!   `rm.recursive-force`), unless `--cached` keeps the files.
//! - Subcommands that run a command they are given are wrappers (DESIGN.md §2a "Wrappers":
//!   the worse of yellow and the command): `git rebase --exec/-x CMD` and
//!   `git submodule foreach CMD` (a shell line), `git bisect run CMD ARGS…` (an argument
//!   vector), `git difftool -x/--extcmd CMD`, `git filter-branch --*-filter CMD`. A command
//!   that cannot be known is code assembled at run time (red).
//! - `git config` that may write (DESIGN.md §2 red: writes to `.git/config`, code that runs
//!   later): every write is red (`git.config-write`), and so is a `git config` whose words
//!   cannot be known without a read-only option.

use super::words::Field;
use super::{Analyzer, State};
use crate::rules;
use crate::verdict::Verdict;

/// Options of a subcommand whose value is a shell line git runs (`--exec=CMD`, `-x CMD`).
const SHELL_LINE_OPTIONS: &[(&str, &[&str])] = &[
    ("rebase", &["--exec", "-x"]),
    ("difftool", &["--extcmd", "-x"]),
    (
        "filter-branch",
        &[
            "--env-filter",
            "--tree-filter",
            "--index-filter",
            "--parent-filter",
            "--msg-filter",
            "--commit-filter",
            "--tag-name-filter",
        ],
    ),
];

impl Analyzer<'_> {
    /// Rules of git subcommands that delete recursively or run commands; `rest` are the
    /// words after the subcommand.
    pub(crate) fn git_subcommand_code(
        &mut self,
        sub: &str,
        rest: &[Field],
        st: &State,
        depth: usize,
    ) {
        match sub {
            "rm" => self.git_rm(rest),
            "bisect" => {
                let run = rest
                    .iter()
                    .position(|a| a.known().as_deref() == Some("run"));
                if let Some(i) = run {
                    let argv = &rest[i + 1..];
                    self.git_runs("bisect run");
                    if !argv.is_empty() {
                        let _ = self.invoke(
                            st.clone(),
                            argv,
                            Vec::new(),
                            super::Stdin::Inherited,
                            depth + 1,
                        );
                    }
                }
            }
            "submodule" => {
                let at = rest
                    .iter()
                    .position(|a| a.known().as_deref() == Some("foreach"));
                if let Some(i) = at {
                    let words: Vec<&Field> = rest[i + 1..]
                        .iter()
                        .skip_while(|a| {
                            a.known()
                                .is_some_and(|t| t == "--recursive" || t == "--quiet" || t == "-q")
                        })
                        .collect();
                    self.git_runs("submodule foreach");
                    // One word is a shell line; several are a command git runs through the
                    // shell with the rest as its arguments: both readings are analysed.
                    if let Some(first) = words.first() {
                        self.git_shell_line(st, first, "submodule foreach", depth);
                    }
                    if words.len() > 1 {
                        let joined: Vec<String> = words
                            .iter()
                            .map(|w| super::commands::shell_quote(&w.display()))
                            .collect();
                        if words.iter().all(|w| w.is_known()) {
                            self.line(&joined.join(" "), st.clone(), depth + 1);
                        }
                    }
                }
            }
            "config" => {
                let read = rest.iter().filter_map(Field::known).any(|a| {
                    a.starts_with("--get")
                        || a == "--list"
                        || a == "-l"
                        || a == "get"
                        || a == "list"
                });
                if !read && rest.iter().any(|a| !a.is_known()) {
                    self.add(
                        Verdict::Red,
                        rules::GIT_CONFIG_WRITE.id,
                        "`git config` with words that cannot be known may write the repository's configuration".to_string(),
                    );
                }
            }
            _ => {}
        }
        if let Some((_, options)) = SHELL_LINE_OPTIONS.iter().find(|(s, _)| *s == sub) {
            let mut i = 0;
            while i < rest.len() {
                let t = rest[i].known();
                i += 1;
                let Some(t) = t else { continue };
                if t == "--" {
                    break;
                }
                for o in options.iter() {
                    let value = if t == *o {
                        let v = rest.get(i).cloned();
                        i += 1;
                        Some(v)
                    } else if let Some(v) = t.strip_prefix(&format!("{o}=")) {
                        Some(Some(Field::lit(v)))
                    } else if o.len() == 2 && t.len() > 2 && t.starts_with(o) {
                        // `-xCMD`: a short option's value attached.
                        Some(Some(Field::lit(&t[2..])))
                    } else {
                        None
                    };
                    if let Some(v) = value {
                        let what = format!("{sub} {o}");
                        self.git_runs(&what);
                        match v {
                            Some(v) => self.git_shell_line(st, &v, &what, depth),
                            None => self.add(
                                Verdict::Yellow,
                                rules::GIT_RUNS_COMMAND.id,
                                format!("`git {what}` without its command"),
                            ),
                        }
                        break;
                    }
                }
            }
        }
    }

    /// `git rm` with `-r` and `-f` (any spelling git's option parser accepts) and without
    /// `--cached`.
    fn git_rm(&mut self, rest: &[Field]) {
        let (mut r, mut f, mut cached) = (false, false, false);
        for a in rest.iter().filter_map(Field::known) {
            if a == "--" {
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                // parse-options accepts unambiguous prefixes (`--forc`, `--cach`).
                f |= long.len() >= 2 && "force".starts_with(long);
                cached |= long.len() >= 2 && "cached".starts_with(long);
            } else if let Some(letters) = a.strip_prefix('-') {
                r |= letters.contains('r');
                f |= letters.contains('f');
            }
        }
        if r && f && !cached {
            self.add(
                Verdict::Red,
                rules::RM_RECURSIVE_FORCE.id,
                "`git rm -r -f` deletes a tree from the working tree without confirmation"
                    .to_string(),
            );
        }
    }

    fn git_runs(&mut self, what: &str) {
        self.add(
            Verdict::Yellow,
            rules::GIT_RUNS_COMMAND.id,
            format!("`git {what}` runs a command it is given"),
        );
    }

    /// A shell line git runs: analysed as a line; red when it cannot be known.
    fn git_shell_line(&mut self, st: &State, code: &Field, what: &str, depth: usize) {
        match code.known() {
            Some(c) => {
                self.line(&c, st.clone(), depth + 1);
            }
            None => self.opaque(&format!("git {what}"), "a command that cannot be known"),
        }
    }
}
