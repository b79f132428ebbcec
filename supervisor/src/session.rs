//! Sessions and their worktrees (issue 4 §1).
//!
//! Default: a new linked worktree on a new branch `tyba/<session-id>` from `HEAD`, made with
//! `git worktree add`, at `$XDG_STATE_HOME/tyba/worktrees/<repo>-<session-id>` (or
//! `~/.local/state/tyba/worktrees/…`). It is kept when the session ends; remove it with
//! `git worktree remove <path> && git branch -D tyba/<session-id>`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors preparing a session's worktree.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A git command failed.
    #[error("`git {args}` failed in {dir}: {stderr}")]
    Git {
        /// The arguments, space-joined.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// What git said.
        stderr: String,
    },
    /// Filesystem error.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// How the worktree is chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorktreeChoice {
    /// A new linked worktree in the default location (or at this path when given).
    New {
        /// Where to create it; `None` for the default location.
        at: Option<PathBuf>,
        /// Branch name; `None` for `tyba/<session-id>`.
        branch: Option<String>,
    },
    /// Use this existing directory as the worktree (`--here`, or `--worktree DIR` naming an
    /// existing directory).
    Existing(PathBuf),
}

/// Git layout of a worktree, for the Landlock rules and the protected files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLayout {
    /// `git rev-parse --absolute-git-dir`: the worktree's own git dir.
    pub git_dir: PathBuf,
    /// `git rev-parse --git-common-dir`, absolute: the shared git dir (objects, refs, hooks).
    pub common_dir: PathBuf,
}

/// A prepared session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Session id: 12 lower-case hex digits.
    pub id: String,
    /// Physical path of the worktree (symlinks resolved).
    pub worktree: PathBuf,
    /// The git layout, when the worktree is in a git repository.
    pub git: Option<GitLayout>,
    /// When tyba created a linked worktree: its branch.
    pub created_branch: Option<String>,
    /// The main repository the linked worktree was added to.
    pub main_repo: Option<PathBuf>,
}

impl Session {
    /// The text printed at the end: where the worktree is and how to remove it.
    pub fn removal_hint(&self) -> Option<String> {
        let branch = self.created_branch.as_ref()?;
        let repo = self.main_repo.as_ref()?;
        Some(format!(
            "the session's worktree is kept at {wt} (branch {branch}); remove it with: git -C {repo} worktree remove --force {wt} && git -C {repo} branch -D {branch}",
            wt = self.worktree.display(),
            repo = repo.display(),
        ))
    }
}

/// A new random session id (12 hex digits from the kernel's random source).
pub fn new_session_id() -> String {
    let mut b = [0u8; 6];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    if ok.is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mixed = t ^ (u128::from(std::process::id()) << 64);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (mixed >> (i * 8)) as u8;
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn git(dir: &Path, args: &[&str]) -> Result<String, SessionError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|source| SessionError::Io {
            what: "cannot run git in",
            path: dir.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(SessionError::Git {
            args: args.join(" "),
            dir: dir.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string())
}

/// The top level of the git worktree containing `dir`, if any.
pub fn repo_toplevel(dir: &Path) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .ok()
        .map(PathBuf::from)
}

/// The git layout of the worktree at `dir`, if it is in a repository.
///
/// Found the way git finds it for a worktree (`gitrepository-layout(5)`), without running git
/// (a launch must stay fast): the nearest `.git` upwards, a directory or a `gitdir: PATH` file,
/// and the git dir's `commondir` file for linked worktrees. Falls back to `git rev-parse`
/// when `.git` is neither.
pub fn git_layout(dir: &Path) -> Option<GitLayout> {
    let mut cur = Some(dir);
    while let Some(d) = cur {
        let dotgit = d.join(".git");
        if let Ok(meta) = std::fs::symlink_metadata(&dotgit) {
            let git_dir = if meta.is_dir() {
                dotgit
            } else if meta.is_file() {
                let text = std::fs::read_to_string(&dotgit).ok()?;
                match text.lines().next().and_then(|l| l.strip_prefix("gitdir:")) {
                    Some(p) => d.join(p.trim()),
                    None => return git_layout_by_git(dir),
                }
            } else {
                return git_layout_by_git(dir);
            };
            let common = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(c) => git_dir.join(c.trim()),
                Err(_) => git_dir.clone(),
            };
            return Some(GitLayout {
                git_dir: canonical(&git_dir),
                common_dir: canonical(&common),
            });
        }
        cur = d.parent();
    }
    None
}

fn git_layout_by_git(dir: &Path) -> Option<GitLayout> {
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"]).ok()?;
    let common = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .ok()?;
    Some(GitLayout {
        git_dir: canonical(Path::new(&git_dir)),
        common_dir: canonical(Path::new(&common)),
    })
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The default parent of new worktrees: `$XDG_STATE_HOME/tyba/worktrees`, else
/// `$HOME/.local/state/tyba/worktrees`, else `<tmp>/tyba-worktrees`.
pub fn default_worktrees_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("tyba/worktrees");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".local/state/tyba/worktrees");
    }
    std::env::temp_dir().join("tyba-worktrees")
}

/// Prepares the session's worktree from the current directory `cwd`.
///
/// Outside a git repository a `New` choice falls back to using `cwd` itself (`--here` is
/// implied).
///
/// # Errors
/// [`SessionError`] when git fails or a directory cannot be made.
pub fn prepare(cwd: &Path, choice: &WorktreeChoice) -> Result<Session, SessionError> {
    let id = new_session_id();
    match choice {
        WorktreeChoice::Existing(dir) => {
            let wt = std::fs::canonicalize(dir).map_err(|source| SessionError::Io {
                what: "cannot open worktree",
                path: dir.clone(),
                source,
            })?;
            let git = git_layout(&wt);
            Ok(Session {
                id,
                worktree: wt,
                git,
                created_branch: None,
                main_repo: None,
            })
        }
        WorktreeChoice::New { at, branch } => {
            let Some(top) = repo_toplevel(cwd) else {
                let wt = std::fs::canonicalize(cwd).map_err(|source| SessionError::Io {
                    what: "cannot open",
                    path: cwd.to_path_buf(),
                    source,
                })?;
                return Ok(Session {
                    id,
                    worktree: wt,
                    git: None,
                    created_branch: None,
                    main_repo: None,
                });
            };
            let name = top
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repo".into());
            let path = match at {
                Some(p) => p.clone(),
                None => default_worktrees_dir().join(format!("{name}-{id}")),
            };
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| SessionError::Io {
                    what: "cannot create",
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            let branch = branch.clone().unwrap_or_else(|| format!("tyba/{id}"));
            let path_s = path.to_string_lossy().into_owned();
            git(
                &top,
                &["worktree", "add", "--quiet", "-b", &branch, &path_s, "HEAD"],
            )?;
            let wt = canonical(&path);
            let git = git_layout(&wt);
            Ok(Session {
                id,
                worktree: wt,
                git,
                created_branch: Some(branch),
                main_repo: Some(top),
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn git_ok(dir: &Path, args: &[&str]) {
        let st = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }

    #[test]
    fn layout_matches_git_for_main_and_linked_worktrees() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        git_ok(&repo, &["init", "-q"]);
        git_ok(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "i",
            ],
        );
        git_ok(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "x",
                t.path().join("wt").to_str().unwrap(),
            ],
        );
        for d in [repo.clone(), repo.join("sub"), t.path().join("wt")] {
            assert_eq!(git_layout(&d), git_layout_by_git(&d), "{}", d.display());
        }
        assert_eq!(git_layout(t.path()), None);
    }
}
