//! Assignment values and the program lookup they change.
//!
//! - An assignment value is a word (DESIGN.md §2a "Variables"), whatever spells it (`X=…`,
//!   `export`, `declare`, `local`, `readonly`, `typeset`, `env X=…`): each colon-separated
//!   piece is checked as a path even when another piece cannot be known, so
//!   `export PATH=/malicious/path:$PATH` names `/malicious/path` (outside the worktree: red).
//! - `PATH` (bash(1) "COMMAND EXECUTION"): a command word without a slash is looked up in the
//!   directories of `PATH` in order. Once the line gives `PATH` a value that puts any
//!   directory other than the system program directories first, or a value that cannot be
//!   known, a bare command word may be a program found there: it is a program nobody listed
//!   (yellow, `cmd.path-shadowed`), and a known directory is checked as a path read.
//! - Variables that move where programs read their configuration ([`CONFIG_DIR_VARS`]:
//!   `HOME=.` makes git read `./.gitconfig`, whose `core.fsmonitor` runs code): any assignment
//!   is at least yellow, red when the new place is in the worktree, the session's scratch
//!   directory or a shared temporary directory (files the agent can write), or cannot be
//!   known (`env.config-moved`). DESIGN.md §2a lists `GIT_CONFIG*` (exec variables already);
//!   these are the same kind of move through a directory.

use super::commands::SYSTEM_BIN_DIRS;
use super::paths::Access;
use super::words::{Field, Part};
use super::{Analyzer, State};
use crate::rules;
use crate::verdict::Verdict;

/// Variables naming a directory or file programs read configuration from, whose settings can
/// run code: `HOME` (`~/.gitconfig`, `~/.npmrc`, `~/.cargo/config.toml`, `~/.ssh/config`,
/// shell start-up files), the XDG base directories (XDG Base Directory Specification 0.8),
/// zsh's `ZDOTDIR`, git's repository directories (git(1) "ENVIRONMENT VARIABLES"), cargo's
/// and rustup's homes (`build.rustc-wrapper`), npm's (npm-config(7)) and pip's configuration
/// files, Python's user base (its `.pth` files run code), Docker's configuration directory
/// (credential helpers) and GnuPG's home.
pub(crate) const CONFIG_DIR_VARS: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "ZDOTDIR",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NPM_CONFIG_USERCONFIG",
    "NPM_CONFIG_GLOBALCONFIG",
    "NPM_CONFIG_PREFIX",
    "PIP_CONFIG_FILE",
    "PYTHONUSERBASE",
    "DOCKER_CONFIG",
    "GNUPGHOME",
];

/// Whether `name` is one of [`CONFIG_DIR_VARS`] (npm reads its variables in any case).
pub(crate) fn moves_config(name: &str) -> bool {
    CONFIG_DIR_VARS.contains(&name)
        || (name.len() > 11
            && name[..11].eq_ignore_ascii_case("npm_config_")
            && CONFIG_DIR_VARS.contains(&name.to_ascii_uppercase().as_str()))
}

/// Shared temporary directories anyone may write.
const SHARED_TMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// Shell builtins (the one list of `super::commands`) and the `time` keyword: bash runs them
/// without looking at `PATH`.
fn runs_without_path(name: &str) -> bool {
    name == "time" || super::commands::SHELL_BUILTINS.contains(&name)
}

/// Splits a word `NAME=VALUE` whose value may be partly unknown (`X=/opt/x:$Y`) into the
/// name and the value; `None` when the name part is not known text followed by `=`.
pub(crate) fn split_assignment(f: &Field) -> Option<(String, Field)> {
    let Some(Part::Lit { text, glob }) = f.parts.first() else {
        return None;
    };
    let (name, value) = text.split_once('=')?;
    let name = name.trim_end_matches('+');
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut parts = Vec::with_capacity(f.parts.len());
    if !value.is_empty() {
        parts.push(Part::Lit {
            text: value.to_string(),
            glob: *glob,
        });
    }
    parts.extend(f.parts[1..].iter().cloned());
    Some((
        name.to_string(),
        Field {
            parts,
            forced: true,
        },
    ))
}

/// The colon-separated pieces of a value (`PATH`-like lists), each a field of its own; a
/// piece holding an unknown part keeps it. A value with no colon, or a URL, is one piece.
pub(crate) fn colon_pieces(f: &Field) -> Vec<Field> {
    let has_colon = f.parts.iter().any(
        |p| matches!(p, Part::Lit { text, .. } if text.contains(':') && !text.contains("://")),
    );
    if !has_colon {
        return vec![f.clone()];
    }
    let mut out = Vec::new();
    let mut cur = Field::default();
    for p in &f.parts {
        match p {
            Part::Unknown => cur.parts.push(Part::Unknown),
            Part::Lit { text, glob } => {
                let mut pieces = text.split(':').peekable();
                while let Some(piece) = pieces.next() {
                    if !piece.is_empty() {
                        cur.parts.push(Part::Lit {
                            text: piece.to_string(),
                            glob: *glob,
                        });
                    }
                    if pieces.peek().is_some() && !cur.parts.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                }
            }
        }
    }
    if !cur.parts.is_empty() {
        out.push(cur);
    }
    out
}

/// The directories a `PATH` value puts before the first system program directory, in order
/// (`None` for one that cannot be known). Empty when the system directories come first.
fn shadowing_dirs(value: Option<&str>) -> Vec<Option<String>> {
    let Some(v) = value else {
        return vec![None];
    };
    let mut out = Vec::new();
    for dir in v.split(':') {
        let d = dir.trim_end_matches('/');
        if SYSTEM_BIN_DIRS.contains(&d) {
            break;
        }
        // An empty element is the current directory (bash(1)).
        out.push(Some(if dir.is_empty() {
            ".".to_string()
        } else {
            dir.to_string()
        }));
    }
    out
}

impl Analyzer<'_> {
    /// A variable of [`CONFIG_DIR_VARS`] assigned `value` (`None`: a value that cannot be
    /// known, as `read` or `for` bind): yellow when every piece of the value is a place
    /// outside what the agent can write (the real home keeps the configuration where it is:
    /// no finding), red otherwise.
    pub(crate) fn config_dir_assignment(&mut self, name: &str, value: Option<&Field>, st: &State) {
        if !moves_config(name) {
            return;
        }
        let git_dir = self.ctx.worktree.join(".git");
        let mut writable = value.is_none();
        let mut elsewhere = false;
        for piece in value.map(colon_pieces).unwrap_or_default() {
            let Some(text) = piece.known() else {
                writable = true;
                continue;
            };
            for cwd in &st.cwds {
                let Some(c) = cwd else {
                    writable = true;
                    continue;
                };
                let p = super::paths::resolve(c, &text);
                let at_home = self.ctx.home.is_some_and(|h| p == h);
                if at_home || (name.starts_with("GIT_") && p == git_dir) {
                    continue;
                }
                if p.starts_with(self.ctx.worktree)
                    || self.ctx.scratch.is_some_and(|s| p.starts_with(s))
                    || SHARED_TMP.iter().any(|t| p.starts_with(t))
                {
                    writable = true;
                } else {
                    elsewhere = true;
                }
            }
        }
        if writable {
            self.add(
                Verdict::Red,
                rules::ENV_CONFIG_MOVED.id,
                format!("`{name}` moves where programs read configuration to a place the agent can write or that cannot be known: its settings can run code"),
            );
        } else if elsewhere {
            self.add(
                Verdict::Yellow,
                rules::ENV_CONFIG_MOVED.id,
                format!("`{name}` moves where programs read configuration"),
            );
        }
    }

    /// git's configuration given through the environment (git-config(1) "ENVIRONMENT":
    /// `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_<n>`/`VALUE_<n>`;
    /// `GIT_CONFIG_GLOBAL`/`SYSTEM`, `GIT_CONFIG` name whole files): a hooks key there, or a
    /// value that cannot be known, switches the pre-push hook off for every git the line runs
    /// afterwards (blocked, `git.guard.hooks-path`). `value` is `None` when it cannot be known.
    pub(crate) fn git_config_env(&mut self, name: &str, value: Option<&Field>) {
        let hooks_key = |t: &str| {
            let t = t.to_ascii_lowercase();
            t.contains("core.hookspath") || t.contains("hook.")
        };
        let text = value.and_then(Field::known);
        let switches_off = match name {
            "GIT_CONFIG_PARAMETERS" => text.as_deref().is_none_or(hooks_key),
            _ if name.starts_with("GIT_CONFIG_KEY_") => text.as_deref().is_none_or(hooks_key),
            _ => false,
        };
        if switches_off {
            self.add(
                Verdict::Blocked,
                rules::GIT_GUARD_HOOKS_PATH.id,
                format!("`{name}` gives every later git a hooks configuration (or one that cannot be known): it switches the push guard off"),
            );
        }
    }

    /// Checks every piece of an assignment value as a path read (DESIGN.md §2a: assignment
    /// values are words; an absolute path outside the worktree is red).
    pub(crate) fn assignment_value_paths(&mut self, st: &State, value: &Field) {
        for piece in colon_pieces(value) {
            self.path_field(st, &piece, Access::Read);
        }
    }

    /// A bare command word looked up in a `PATH` the line changed: a program that may be
    /// found in a directory put before the system ones is not the program its name says.
    pub(crate) fn program_lookup(
        &mut self,
        st: &State,
        name: &str,
        env: &[(String, Option<String>)],
    ) {
        if name.contains('/') || runs_without_path(name) {
            return;
        }
        let mut dirs: Vec<Option<String>> = Vec::new();
        match env.iter().rev().find(|(n, _)| n == "PATH") {
            Some((_, v)) => dirs.extend(shadowing_dirs(v.as_deref())),
            None => {
                let Some(values) = st.vars.get("PATH") else {
                    return;
                };
                for v in values {
                    for d in shadowing_dirs(v.as_deref()) {
                        if !dirs.contains(&d) {
                            dirs.push(d);
                        }
                    }
                }
            }
        }
        if dirs.is_empty() {
            return;
        }
        let shown: Vec<String> = dirs
            .iter()
            .map(|d| {
                d.clone()
                    .unwrap_or_else(|| "a directory not known".to_string())
            })
            .collect();
        self.add(
            Verdict::Yellow,
            rules::CMD_PATH_SHADOWED.id,
            format!(
                "`{name}` may be a program in {} (PATH puts it before the system directories)",
                shown.join(", ")
            ),
        );
        for d in dirs.into_iter().flatten() {
            let cand = format!("{}/{name}", d.trim_end_matches('/'));
            self.path_field(st, &Field::lit(&cand), Access::Read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(fs: &[Field]) -> Vec<String> {
        fs.iter().map(Field::display).collect()
    }

    #[test]
    fn colon_pieces_keep_known_pieces_beside_unknown_ones() {
        let mut f = Field::lit("/malicious/path:");
        f.parts.push(Part::Unknown);
        let pieces = colon_pieces(&f);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].known().as_deref(), Some("/malicious/path"));
        assert!(!pieces[1].is_known());
        assert_eq!(
            shown(&colon_pieces(&Field::lit("https://x/y"))),
            ["https://x/y"]
        );
        assert_eq!(shown(&colon_pieces(&Field::lit("a::b"))), ["a", "b"]);
    }

    #[test]
    fn split_assignment_takes_a_partly_unknown_value() {
        let mut f = Field::lit("X=/opt/");
        f.parts.push(Part::Unknown);
        let (n, v) = split_assignment(&f).unwrap_or_default();
        assert_eq!(n, "X");
        assert_eq!(v.known_prefix(), "/opt/");
        assert!(split_assignment(&Field::lit("-x")).is_none());
        assert!(split_assignment(&Field::lit("a-b=c")).is_none());
    }

    #[test]
    fn path_shadowing_is_what_comes_before_the_system_directories() {
        assert!(shadowing_dirs(Some("/usr/bin:/tmp")).is_empty());
        assert_eq!(
            shadowing_dirs(Some("/tmp:/usr/bin")),
            [Some("/tmp".to_string())]
        );
        assert_eq!(shadowing_dirs(Some(":/bin")), [Some(".".to_string())]);
        assert_eq!(shadowing_dirs(None), [None]);
    }
}
