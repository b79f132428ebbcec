//! The session writes only its own branch (DESIGN.md §5; issue 13 class 6).
//!
//! Landlock cannot grant one file name in a directory: git writes `<ref>.lock` beside the ref
//! and renames it over the ref (`git-update-ref(1)`, `gitrepository-layout(5)`), so granting
//! `refs/heads/tyba/` let one session's agent move or make every other session's branch. So
//! in the sandbox's mount namespace a **session-private directory** is bound over
//! `refs/heads/tyba/` and another over `logs/refs/heads/tyba/`, holding only this session's
//! branch (at its value when the session starts) and its reflog. The agent commits there as
//! usual; the real `refs/heads/tyba/` is never writable inside. At the end the supervisor,
//! outside the sandbox with no process of it left, carries the branch back with
//! `git update-ref -m … refs/heads/tyba/<name> <new> <old>` once `<new>` is a commit object
//! ([`OwnBranch::carry_back`]); branches the agent made beside it are reported, never
//! carried. `packed-refs` stays read-only (the private branch is a loose ref).
//!
//! The private directory lives in tyba's state dir (`$XDG_STATE_HOME/tyba/refs/<session>/`,
//! which no agent's writable root covers), not on a memory filesystem: when the supervisor is
//! killed (`SIGKILL`), the sandbox dies with it and the real branch stays where it was, while
//! the agent's commits stay in the objects and their tip in that directory. The supervisor
//! holds an exclusive `flock` on `<dir>/lock` while the session runs, so a later `tyba
//! worktrees`, `tyba clean` or `tyba run` of the same repository finds a directory nobody
//! holds and carries it back the same way ([`recover`]).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory names of the session-private refs: `heads/` (bound over
/// `refs/heads/tyba/`) and `logs/` (bound over `logs/refs/heads/tyba/`).
const HEADS: &str = "heads";
const LOGS: &str = "logs";
/// The record of what the directory is for (`common`, `branch`, `old` lines).
const RECORD: &str = "session";
/// The file whose `flock` says a supervisor holds the directory.
const LOCK: &str = "lock";
/// The prefix of the branches a session may own.
const PREFIX: &str = "tyba/";

/// Errors setting up a session's private branch directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnBranchError {
    /// No state dir (`$XDG_STATE_HOME`, `$HOME`) to keep the directory in.
    #[error("no $XDG_STATE_HOME or $HOME to keep the session's branch in")]
    NoStateDir,
    /// The branch is not one a session may own.
    #[error("{0} is not a session branch (tyba/NAME)")]
    NotASessionBranch(String),
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Git {
        /// The arguments, space-joined.
        args: String,
        /// What git said.
        stderr: String,
    },
    /// A filesystem operation failed.
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

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> OwnBranchError {
    let path = path.to_path_buf();
    move |source| OwnBranchError::Io { what, path, source }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, OwnBranchError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // The agent chose the branch's tip: no promisor remote hears of it
        // (`crate::objects_layer::carry_in`).
        .env("GIT_NO_LAZY_FETCH", "1")
        .output()
        .map_err(|e| OwnBranchError::Git {
            args: args.join(" "),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(OwnBranchError::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Where the private directories are kept: `<tyba state dir>/refs`.
pub fn refs_root() -> Option<PathBuf> {
    crate::broker::paths::state_dir().map(|s| s.join("refs"))
}

/// A session's own branch, kept in a session-private directory while the session runs.
#[derive(Debug)]
pub struct OwnBranch {
    /// The branch, `tyba/NAME`.
    pub branch: String,
    /// The repository's common git dir.
    pub common_dir: PathBuf,
    /// The private directory (`<refs_root>/<session>`).
    pub dir: PathBuf,
    /// The branch's commit when the session started (full hash).
    pub old: String,
    /// The `flock` on `<dir>/lock`, held while the session runs.
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// What carrying a private branch back did, for the person (one sentence each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CarryReport {
    /// The branch, when known.
    pub branch: String,
    /// The commit the branch was moved to, when it moved.
    pub moved_to: Option<String>,
    /// Things the person should know: branches not carried, refusals, failures.
    pub notes: Vec<String>,
    /// Whether the private directory is kept (the branch could not be carried back).
    pub kept: bool,
    /// Whether the agent left objects that were refused, or commits that name objects the
    /// repository lacks: the session's worktree may name them too
    /// ([`crate::objects_layer::mend_worktree`]).
    pub broken: bool,
}

impl OwnBranch {
    /// Makes the private directory of `session` for `branch` (`tyba/NAME`) of the repository
    /// whose common git dir is `common_dir`, in `root` ([`refs_root`]): `heads/NAME` holding
    /// the branch's current commit, `logs/NAME` a copy of its reflog, and takes its lock.
    ///
    /// # Errors
    /// [`OwnBranchError`] when the branch cannot be read or the directory cannot be made.
    pub fn prepare(
        common_dir: &Path,
        branch: &str,
        session: &str,
        root: &Path,
    ) -> Result<OwnBranch, OwnBranchError> {
        let name = branch
            .strip_prefix(PREFIX)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| OwnBranchError::NotASessionBranch(branch.to_string()))?;
        // The loose ref when there is one (what git reads first; no git process at launch),
        // else git's answer (a packed branch). Read from the common dir through no link: an
        // agent of an earlier `--here` session could have made any of these names a link.
        let held = crate::dirfd::DirFd::open(common_dir).ok();
        let loose = held
            .as_ref()
            .and_then(|c| read_ref_file(c, &Path::new("refs/heads").join(branch)))
            .filter(|v| is_object_id(v));
        let old = match loose {
            Some(v) => v,
            None => git(
                common_dir,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{branch}^{{commit}}"),
                ],
            )?,
        };
        crate::broker::paths::ensure_private_dir(root).map_err(|e| OwnBranchError::Io {
            what: "cannot create",
            path: root.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let dir = root.join(session);
        std::fs::create_dir(&dir).map_err(io("cannot create", &dir))?;
        let lock = lock_file(&dir, true).map_err(io("cannot lock", &dir))?;
        // Canonical, as [`recover`] compares it.
        let common = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
        let record = format!("common {}\nbranch {branch}\nold {old}\n", common.display());
        std::fs::write(dir.join(RECORD), record).map_err(io("cannot write", &dir))?;
        let head = dir.join(HEADS).join(name);
        let log = dir.join(LOGS).join(name);
        for p in [&head, &log] {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(io("cannot create", d))?;
            }
        }
        std::fs::write(&head, format!("{old}\n")).map_err(io("cannot write", &head))?;
        // The upper layer and work dir of the overlay over the object store
        // (`crate::objects_layer`), on the same filesystem.
        for d in [
            dir.join(crate::objects_layer::UPPER),
            dir.join(crate::objects_layer::WORK),
        ] {
            std::fs::create_dir(&d).map_err(io("cannot create", &d))?;
        }
        // The reflog, so that `git reflog` inside works; never carried back (git writes the
        // real one's entry at the carry-back). Only a regular file reached through no link
        // is copied: the copy is the agent's to read, and a link planted there (by an agent
        // of an earlier `--here` session) would hand it any file the person can read.
        let text = held
            .as_ref()
            .and_then(|c| {
                c.read_file(&Path::new("logs/refs/heads").join(branch), MAX_REFLOG)
                    .ok()
            })
            .unwrap_or_default();
        std::fs::write(&log, text).map_err(io("cannot write", &log))?;
        Ok(OwnBranch {
            branch: branch.to_string(),
            common_dir: common_dir.to_path_buf(),
            dir,
            old,
            _lock: lock,
        })
    }

    /// The binds stage 2 makes, writable: `(private directory, over this directory)`.
    pub fn binds(&self) -> Vec<(PathBuf, PathBuf)> {
        vec![
            (
                self.dir.join(HEADS),
                self.common_dir.join("refs/heads/tyba"),
            ),
            (
                self.dir.join(LOGS),
                self.common_dir.join("logs/refs/heads/tyba"),
            ),
        ]
    }

    /// Starts carrying the agent's new objects in while the session runs
    /// ([`crate::objects_layer::Carrier`]); stopped before [`OwnBranch::carry_back`].
    pub fn start_carrying(&self) -> Option<crate::objects_layer::Carrier> {
        crate::objects_layer::Carrier::start(
            &self.common_dir,
            &self.dir.join(crate::objects_layer::UPPER),
        )
    }

    /// The upper layer and work dir of the overlay over the object store
    /// ([`crate::objects_layer`]): `(<dir>/objects-upper, <dir>/objects-work)`.
    pub fn objects_layer(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join(crate::objects_layer::UPPER),
            self.dir.join(crate::objects_layer::WORK),
        )
    }

    /// Carries the branch back once no process of the sandbox is left: the agent's tip
    /// (`heads/NAME`, a plain file of a full object id) moves the real branch with `git
    /// update-ref <new> <old>` when it names a commit object; anything else (a symbolic ref,
    /// a deleted branch, a tree, garbage, a real branch moved meanwhile) leaves the real one
    /// where it is and is said. Other branches the agent made in its directory are listed,
    /// not carried. The directory is removed unless the branch could not be carried back.
    pub fn carry_back(self, session: &str) -> CarryReport {
        let r = carry(
            &self.common_dir,
            &self.branch,
            &self.old,
            &self.dir,
            session,
        );
        if !r.kept {
            let _ = crate::sandbox::remove_tree(&self.dir);
        }
        r
    }
}

fn lock_file(dir: &Path, create: bool) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join(LOCK))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))
}

/// Largest reflog copied into a session's private directory (bytes); a longer one is left
/// out (the session's `git reflog` then starts empty).
const MAX_REFLOG: u64 = 64 << 20;

/// Reads a ref file (`rel` beneath `dir`) the agent could have written: a regular file
/// reached through no symbolic link at all (`crate::dirfd`), at most 4 KiB; its first line.
fn read_ref_file(dir: &crate::dirfd::DirFd, rel: &Path) -> Option<String> {
    let bytes = dir.read_file(rel, 4096).ok()?;
    let s = String::from_utf8(bytes).ok()?;
    Some(s.lines().next().unwrap_or("").trim().to_string())
}

/// A full object id (SHA-1 or SHA-256), lower-case hex.
pub(crate) fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Most entries of a private `heads/` directory looked at.
const MAX_LISTED: usize = 10_000;

/// The branches under `heads/` (names relative to it), files only, each directory opened
/// from `heads` through no link.
fn listed_branches(heads: &crate::dirfd::DirFd) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, Option<crate::dirfd::DirFd>)> = vec![(PathBuf::new(), None)];
    while let Some((rel, dir)) = stack.pop() {
        let dir = dir.as_ref().unwrap_or(heads);
        let Ok(names) = dir.names(MAX_LISTED) else {
            continue;
        };
        for n in names {
            seen += 1;
            if seen > MAX_LISTED {
                break;
            }
            let Ok(m) = dir.meta(&n) else { continue };
            let r = rel.join(&n);
            if m.is_dir() {
                if let Ok(sub) = dir.open_dir(Path::new(&n)) {
                    stack.push((r, Some(sub)));
                }
            } else if !r.to_string_lossy().ends_with(".lock") {
                out.push(r.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn carry(common: &Path, branch: &str, old: &str, dir: &Path, session: &str) -> CarryReport {
    let mut r = CarryReport {
        branch: branch.to_string(),
        ..Default::default()
    };
    let Some(name) = branch.strip_prefix(PREFIX) else {
        r.notes.push(format!(
            "{branch} is not a session branch: not carried back"
        ));
        return r;
    };
    // The agent's new objects first, each named by git from its content
    // (`crate::objects_layer`): the branch moves only to a commit the store then holds.
    match crate::objects_layer::carry_in(common, &dir.join(crate::objects_layer::UPPER)) {
        Ok(c) => {
            if !c.rewritten.is_empty() {
                r.notes.push(format!(
                    "the agent rewrote {} of the repository's objects in its session (for example {}): only its own view changed, the repository's objects are unchanged",
                    c.rewritten.len(),
                    c.rewritten[0]
                ));
            }
            r.broken = !c.refused.is_empty() || c.refused_packs > 0;
            if c.refused_packs > 0 {
                r.notes.push(format!(
                    "{} pack(s) the agent's git wrote in its session could not be read by git: not carried into the repository",
                    c.refused_packs
                ));
            }
            if !c.refused.is_empty() {
                r.notes.push(format!(
                    "{} object(s) the agent wrote in its session are damaged or hold content that does not match their name (for example {}): not carried into the repository, whose objects are unchanged",
                    c.refused.len(),
                    c.refused[0]
                ));
            }
        }
        Err(e) => {
            r.kept = true;
            r.notes.push(format!(
                "the objects the agent wrote in its session could not be carried into the repository ({e}): they and its branch are kept in {}, and the branch stays at {old}",
                dir.display()
            ));
            return r;
        }
    }
    let Some(heads) = crate::dirfd::DirFd::open(dir)
        .and_then(|d| d.open_dir(Path::new(HEADS)))
        .ok()
    else {
        r.notes.push(format!(
            "the session's branch directory {} cannot be read: the branch stays at {old}",
            dir.join(HEADS).display()
        ));
        r.kept = true;
        return r;
    };
    for other in listed_branches(&heads).into_iter().filter(|b| b != name) {
        let tip = read_ref_file(&heads, Path::new(&other)).unwrap_or_default();
        let exists = git(
            common,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/tyba/{other}"),
            ],
        )
        .is_ok();
        if exists || !is_object_id(&tip) {
            r.notes.push(format!(
                "the agent wrote the branch tyba/{other}, not its own, in its session: not carried back (a session writes only its own branch)"
            ));
        } else {
            r.notes.push(format!(
                "the agent made the branch tyba/{other} (at {tip}) in its session: not carried back (a session writes only its own branch); to keep it: git -C {} branch {} {tip}",
                // A command to paste: every word shell-quoted, the agent's name inert.
                crate::broker::text::shell_word(&common.to_string_lossy()),
                crate::broker::text::shell_word(&format!("tyba/{other}")),
            ));
        }
    }
    let new = match read_ref_file(&heads, Path::new(name)) {
        None => {
            r.notes.push(format!(
                "the agent deleted or replaced its branch {branch} in its session: the branch stays at {old}"
            ));
            return r;
        }
        Some(n) if n == old => return r,
        Some(n) if is_object_id(&n) => n,
        Some(n) if n.starts_with("ref:") => {
            r.notes.push(format!(
                "the agent made its branch {branch} a symbolic ref to {} in its session (a commit on it would have moved that branch): not carried back, the branch stays at {old}",
                n.trim_start_matches("ref:").trim().chars().take(200).collect::<String>()
            ));
            return r;
        }
        Some(n) => {
            r.notes.push(format!(
                "the agent left its branch {branch} as `{}`, not a commit: the branch stays at {old}",
                n.chars().take(80).collect::<String>()
            ));
            return r;
        }
    };
    let kind = git(common, &["cat-file", "-t", &new]).unwrap_or_default();
    if kind != "commit" {
        r.notes.push(format!(
            "the agent left its branch {branch} at {new}, which is not a commit ({}): the branch stays at {old}",
            if kind.is_empty() { "no such object" } else { &kind }
        ));
        return r;
    }
    // Every object the new commits reach must be in the store and readable (review 29's
    // r29-03: a commit whose tree nobody has, once on a branch, makes the person's `git gc`,
    // `repack -ad` and `prune` stop with `bad tree object` until the branch is deleted).
    if let Err(e) = git(
        common,
        &[
            "rev-list",
            "--objects",
            "--verify-objects",
            "--quiet",
            &new,
            "--not",
            "--all",
        ],
    ) {
        r.notes.push(format!(
            "the agent left its branch {branch} at {new}, whose commits name objects the repository lacks or cannot read ({e}): the branch stays at {old}"
        ));
        r.broken = true;
        return r;
    }
    let msg = format!("tyba: session {session}: the agent's commits");
    match git(
        common,
        &[
            "update-ref",
            "-m",
            &msg,
            &format!("refs/heads/{branch}"),
            &new,
            old,
        ],
    ) {
        Ok(_) => r.moved_to = Some(new),
        Err(e) => {
            r.kept = true;
            r.notes.push(format!(
                "the agent's commits ({new}) could not be put on {branch} ({e}); they are kept in {}: git -C {} branch {} {new}",
                dir.display(),
                crate::broker::text::shell_word(&common.to_string_lossy()),
                crate::broker::text::shell_word(&format!("{branch}-work")),
            ));
        }
    }
    r
}

/// Carries back the private branch directories in `root` ([`refs_root`]) that belong to the
/// repository whose common git dir is `common_dir` and that no supervisor holds (their
/// session was killed before its end). Each is carried back as at a session's end
/// ([`OwnBranch::carry_back`]) and removed when done.
pub fn recover(common_dir: &Path, root: &Path) -> Vec<CarryReport> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else {
        return out;
    };
    let common = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
    for e in rd.flatten() {
        let dir = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(record) = read_record(&dir) else {
            continue;
        };
        if record.0 != common {
            continue;
        }
        // Held: its session runs. A lock that cannot be opened: not ours to judge.
        let Ok(lock) = lock_file(&dir, false) else {
            continue;
        };
        let session = e.file_name().to_string_lossy().into_owned();
        let r = carry(&common, &record.1, &record.2, &dir, &session);
        if !r.kept {
            let _ = crate::sandbox::remove_tree(&dir);
        }
        drop(lock);
        out.push(r);
    }
    out
}

/// The private directories in `root` of the repository whose common git dir is
/// `common_dir` that no supervisor holds, as `(branch, directory)`: after [`recover`], those
/// whose branch could not be carried back (their work is only there and in the objects).
pub fn left_behind(common_dir: &Path, root: &Path) -> Vec<(String, PathBuf)> {
    let common = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter_map(|dir| {
            let (c, branch, _) = read_record(&dir)?;
            (c == common && lock_file(&dir, false).is_ok()).then_some((branch, dir))
        })
        .collect()
}

/// `(common dir, branch, old)` of a private directory's record.
fn read_record(dir: &Path) -> Option<(PathBuf, String, String)> {
    let text = std::fs::read_to_string(dir.join(RECORD)).ok()?;
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' ')))
            .map(str::to_string)
    };
    let (common, branch, old) = (field("common")?, field("branch")?, field("old")?);
    (branch.starts_with(PREFIX) && is_object_id(&old)).then(|| (PathBuf::from(common), branch, old))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn git_ok(dir: &Path, args: &[&str]) -> String {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e")
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn repo() -> (tempfile::TempDir, PathBuf, String) {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git_ok(&repo, &["init", "-q", "-b", "main"]);
        git_ok(&repo, &["commit", "-q", "--allow-empty", "-m", "i"]);
        git_ok(&repo, &["branch", "tyba/s1"]);
        let head = git_ok(&repo, &["rev-parse", "HEAD"]);
        (t, repo, head)
    }

    #[test]
    fn only_a_commit_is_carried_back_and_only_onto_the_old_value() {
        let (t, repo, head) = repo();
        let common = repo.join(".git");
        let root = t.path().join("refs");
        let tree = git_ok(&repo, &["rev-parse", "HEAD^{tree}"]);
        let commit = git_ok(&repo, &["commit-tree", "-m", "w", "-p", &head, &tree]);
        // A commit whose tree the repository lacks (review 29's r29-03).
        let hollow = {
            let text = format!(
                "tree {}\nparent {head}\nauthor a <a@e> 1 +0000\ncommitter a <a@e> 1 +0000\n\nh\n",
                "1".repeat(40)
            );
            let mut c = Command::new("git");
            c.arg("-C").arg(&repo).args([
                "hash-object",
                "-t",
                "commit",
                "-w",
                "--literally",
                "--stdin",
            ]);
            let o = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut ch| {
                    use std::io::Write as _;
                    ch.stdin.take().unwrap().write_all(text.as_bytes())?;
                    ch.wait_with_output()
                })
                .unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(hollow.len(), 40);
        let cases: [(&str, Option<&str>); 6] = [
            ("ref: refs/heads/main\n", None),
            ("not a ref\n", None),
            (&*format!("{tree}\n"), None),
            ("0123456789012345678901234567890123456789\n", None),
            (&*format!("{hollow}\n"), None),
            (&*format!("{commit}\n"), Some(commit.as_str())),
        ];
        for (i, (text, moved)) in cases.iter().enumerate() {
            git_ok(&repo, &["update-ref", "refs/heads/tyba/s1", &head]);
            let b = OwnBranch::prepare(&common, "tyba/s1", &format!("s{i}"), &root).unwrap();
            let heads = b.dir.join(HEADS);
            std::fs::write(heads.join("s1"), text).unwrap();
            std::fs::write(heads.join("other"), format!("{commit}\n")).unwrap();
            let r = b.carry_back(&format!("s{i}"));
            assert_eq!(r.moved_to.as_deref(), *moved, "{text}: {r:?}");
            let now = git_ok(&repo, &["rev-parse", "refs/heads/tyba/s1"]);
            assert_eq!(now, moved.unwrap_or(&head), "{text}");
            assert!(r.notes.iter().any(|n| n.contains("tyba/other")), "{r:?}");
            assert!(
                git_ok(&repo, &["branch", "--list", "tyba/other"]).is_empty(),
                "another branch is never made"
            );
        }
        // The real branch moved meanwhile: nothing is overwritten, the work is kept.
        git_ok(&repo, &["update-ref", "refs/heads/tyba/s1", &head]);
        let b = OwnBranch::prepare(&common, "tyba/s1", "moved", &root).unwrap();
        std::fs::write(b.dir.join("heads/s1"), format!("{commit}\n")).unwrap();
        let c2 = git_ok(&repo, &["commit-tree", "-m", "x", &tree]);
        git_ok(&repo, &["update-ref", "refs/heads/tyba/s1", &c2]);
        let dir = b.dir.clone();
        let r = b.carry_back("moved");
        assert!(r.kept && r.moved_to.is_none(), "{r:?}");
        assert!(dir.join("heads/s1").exists());
        assert_eq!(
            left_behind(&common, &root),
            vec![("tyba/s1".to_string(), dir.clone())],
            "the kept work is found for `tyba worktrees`"
        );
        assert_eq!(git_ok(&repo, &["rev-parse", "refs/heads/tyba/s1"]), c2);
    }

    #[test]
    fn a_directory_nobody_holds_is_recovered_and_a_held_one_is_not() {
        let (t, repo, head) = repo();
        let common = std::fs::canonicalize(repo.join(".git")).unwrap();
        let root = t.path().join("refs");
        let tree = git_ok(&repo, &["rev-parse", "HEAD^{tree}"]);
        let commit = git_ok(&repo, &["commit-tree", "-m", "w", "-p", &head, &tree]);
        let held = OwnBranch::prepare(&common, "tyba/s1", "held", &root).unwrap();
        std::fs::write(held.dir.join("heads/s1"), format!("{commit}\n")).unwrap();
        assert!(
            recover(&common, &root).is_empty(),
            "a held directory is left"
        );
        assert_eq!(git_ok(&repo, &["rev-parse", "refs/heads/tyba/s1"]), head);
        // The supervisor is gone (its lock with it) but the directory stays.
        let dir = held.dir.clone();
        drop(held);
        let r = recover(&common, &root);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].moved_to.as_deref(), Some(commit.as_str()));
        assert_eq!(git_ok(&repo, &["rev-parse", "refs/heads/tyba/s1"]), commit);
        assert!(!dir.exists());
    }

    #[test]
    fn nothing_is_read_through_a_link_the_agent_planted() {
        let (t, repo, head) = repo();
        let common = repo.join(".git");
        let root = t.path().join("refs");
        let secret = t.path().join("secret");
        std::fs::write(&secret, "the person's private key\n").unwrap();
        // Control: the branch's own reflog is copied for the session.
        let b = OwnBranch::prepare(&common, "tyba/s1", "plain", &root).unwrap();
        let copied = std::fs::read_to_string(b.dir.join("logs/s1")).unwrap();
        assert!(copied.contains(&head), "{copied}");
        drop(b);
        // The reflog made a link (an agent of a `--here` session can): nothing of the file
        // it names reaches the copy the next session reads.
        let log = common.join("logs/refs/heads/tyba/s1");
        std::fs::remove_file(&log).unwrap();
        std::os::unix::fs::symlink(&secret, &log).unwrap();
        let b = OwnBranch::prepare(&common, "tyba/s1", "linked", &root).unwrap();
        assert_eq!(std::fs::read(b.dir.join("logs/s1")).unwrap(), b"");
        assert_eq!(b.old, head);
        drop(b);
        // The same for a directory of the path made a link.
        std::fs::remove_file(&log).unwrap();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("s1"), "the person's private key\n").unwrap();
        std::fs::remove_dir(common.join("logs/refs/heads/tyba")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, common.join("logs/refs/heads/tyba")).unwrap();
        let b = OwnBranch::prepare(&common, "tyba/s1", "dirlinked", &root).unwrap();
        assert_eq!(std::fs::read(b.dir.join("logs/s1")).unwrap(), b"");
        drop(b);

        // At the carry-back: the agent's branch `tyba/x/s2` behind a directory it made a
        // link (to where a commit id waits) is not read, so not carried.
        git_ok(&repo, &["branch", "tyba/x/s2"]);
        let tree = git_ok(&repo, &["rev-parse", "HEAD^{tree}"]);
        let commit = git_ok(&repo, &["commit-tree", "-m", "w", "-p", &head, &tree]);
        let b = OwnBranch::prepare(&common, "tyba/x/s2", "carry", &root).unwrap();
        let away = t.path().join("away");
        std::fs::create_dir(&away).unwrap();
        std::fs::write(away.join("s2"), format!("{commit}\n")).unwrap();
        std::fs::remove_dir_all(b.dir.join("heads/x")).unwrap();
        std::os::unix::fs::symlink(&away, b.dir.join("heads/x")).unwrap();
        let r = b.carry_back("carry");
        assert!(r.moved_to.is_none(), "{r:?}");
        assert_eq!(git_ok(&repo, &["rev-parse", "refs/heads/tyba/x/s2"]), head);
        // Control: the same commit in the real directory is carried.
        let b = OwnBranch::prepare(&common, "tyba/x/s2", "carry2", &root).unwrap();
        std::fs::write(b.dir.join("heads/x/s2"), format!("{commit}\n")).unwrap();
        let r = b.carry_back("carry2");
        assert_eq!(r.moved_to.as_deref(), Some(commit.as_str()), "{r:?}");
    }
}
