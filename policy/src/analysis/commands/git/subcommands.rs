//! What particular git subcommands do beyond their read-only sets, each read as git reads
//! its words: which ones may switch `HEAD`, `git clean`'s force and recursion, whether `git
//! maintenance` fetches, whether `git init` moves an existing repository's git directory.

use super::*;

/// Whether `git SUB REST` may change which branch `HEAD` names (git-checkout(1),
/// git-switch(1), git-symbolic-ref(1), git-rebase(1) `<upstream> <branch>`, git-bisect(1),
/// git-branch(1) `-m`, git-update-ref(1) of `HEAD`). `git checkout -- PATHS` only restores
/// files. Words that cannot be known may do it.
pub(super) fn switches_head(sub: &str, known: &[String], all_known: bool) -> bool {
    let has = |w: &str| known.iter().any(|a| a == w);
    match sub {
        "checkout" => !all_known || known.first().is_none_or(|a| a != "--"),
        "switch" | "bisect" | "rebase" => true,
        "symbolic-ref" | "update-ref" => !all_known || has("HEAD"),
        "branch" => {
            !all_known
                || known.iter().any(|a| {
                    a == "-m"
                        || a == "-M"
                        || a.starts_with("--mov")
                        || a.starts_with("-") && !a.starts_with("--") && a.contains(['m', 'M'])
                })
        }
        _ => false,
    }
}

/// `git clean`'s force and recursion (`-d`, or `-x`/`-X`, which remove ignored files and
/// directories too), read by git's own parser (`--f` is `--force`, `-exd` excludes `xd`,
/// `--no-force` after `-f` resets it). When a word cannot be known or git would reject the
/// words, every letter of every short option counts.
pub(super) fn git_clean_force_recursive(rest: &[Field], known: &[String]) -> (bool, bool) {
    if rest.iter().all(Field::is_known) {
        if let Ok(p) = crate::git_options::parse(known, crate::git_options::CLEAN_OPTIONS) {
            let set = |n: &str| p.last_bool(n) == Some(true);
            return (set("force"), set("d") || set("x") || set("X"));
        }
    }
    let mut f = false;
    let mut d_or_x = false;
    for a in known {
        if let Some(long) = a.strip_prefix("--") {
            f |= !long.is_empty() && "force".starts_with(long);
        } else if let Some(l) = a.strip_prefix('-') {
            f |= l.contains('f');
            d_or_x |= l.contains('d') || l.contains('x') || l.contains('X');
        }
    }
    (f, d_or_x)
}

/// Whether `git maintenance ARGS` (`args` after `maintenance`) may run the prefetch task, the
/// only one that fetches: a `run` not `--auto` (the last of `--auto`/`--no-auto` decides)
/// whose `--task`s, when it names any, include prefetch; any other argument naming prefetch.
/// The caller counts a word it cannot know as fetching.
pub(super) fn maintenance_fetches(args: &[String]) -> bool {
    if !args.iter().any(|a| a == "run") {
        return args.iter().any(|a| a.contains("prefetch"));
    }
    let auto = args
        .iter()
        .rev()
        .find(|a| *a == "--auto" || *a == "--no-auto")
        .is_some_and(|a| a == "--auto");
    if auto {
        return false;
    }
    let mut tasks = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(t) = a.strip_prefix("--task=") {
            tasks.push(t.to_string());
        } else if a == "--task" {
            tasks.push(it.next().cloned().unwrap_or_default());
        }
    }
    tasks.is_empty() || tasks.iter().any(|t| t.contains("prefetch") || t.is_empty())
}

impl Analyzer<'_> {
    /// Whether `git init ARGS` (git-init(1)) has `--separate-git-dir` (any unambiguous
    /// abbreviation) and may run on an existing repository: its directory operand (default:
    /// where git runs) cannot be known, is the worktree, or holds a `.git`. On an existing
    /// repository git moves the git directory there and leaves a `.git` file pointing to it,
    /// like a `commondir`/`gitdir` write (DESIGN.md §2: switching the push guard off).
    /// `git_dir_named`: `GIT_DIR` or `--git-dir` names the repository.
    pub(super) fn init_moves_git_dir(
        &self,
        st: &State,
        rest: &[Field],
        git_dir_named: bool,
    ) -> bool {
        const VALUED: &[&str] = &[
            "--template",
            "--separate-git-dir",
            "--object-format",
            "--ref-format",
            "--initial-branch",
            "-b",
        ];
        let mut separate = false;
        let mut dir: Option<Option<String>> = None;
        let mut i = 0;
        let mut options = true;
        while i < rest.len() {
            let Some(a) = rest[i].known() else {
                if dir.is_none() {
                    dir = Some(None);
                }
                i += 1;
                continue;
            };
            i += 1;
            if options && a == "--" {
                options = false;
                continue;
            }
            if options && a.starts_with('-') && a.len() > 1 {
                let name = a.split('=').next().unwrap_or(&a);
                // `--se` is already unambiguous (`--s` is also `--shared`).
                if name.len() >= 4 && "--separate-git-dir".starts_with(name) {
                    separate = true;
                }
                if !a.contains('=')
                    && VALUED.iter().any(|v| {
                        *v == name
                            || name.len() > 3 && v.starts_with(name) && name.starts_with("--")
                    })
                {
                    i += 1;
                }
                continue;
            }
            if dir.is_none() {
                dir = Some(Some(a));
            }
        }
        if !separate {
            return false;
        }
        if git_dir_named {
            return true;
        }
        let dir = match dir {
            None => Some(".".to_string()),
            Some(d) => d,
        };
        let Some(dir) = dir else {
            return true;
        };
        st.cwds.iter().any(|c| match c {
            Some(c) => {
                let d = crate::analysis::paths::resolve(c, &dir);
                d == self.ctx.worktree || d.join(".git").exists()
            }
            None => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::expect;
    use crate::Verdict::{Blocked, Yellow};

    #[test]
    fn init_that_moves_the_git_dir_of_an_existing_repository() {
        expect(&[
            (
                "git init --separate-git-dir=evil",
                Blocked,
                "git.guard.git-dir",
            ),
            (
                "git init --separate-git-dir evil .",
                Blocked,
                "git.guard.git-dir",
            ),
            ("git init --se=evil", Blocked, "git.guard.git-dir"),
            (
                "git init -q --separate-git-dir=e \"$d\"",
                Blocked,
                "git.guard.git-dir",
            ),
            (
                "GIT_DIR=.git git -C sub init --separate-git-dir=e",
                Blocked,
                "git.guard.git-dir",
            ),
            ("git init --separate-git-dir=e newrepo", Yellow, ""),
            ("git init -b main newrepo", Yellow, ""),
            ("git init --shared=group new", Yellow, ""),
        ]);
    }
}
