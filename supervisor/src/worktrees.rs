//! The lifecycle of sessions' worktrees (issue 14): which there are, what state each is in,
//! and removing the finished ones that hold no work.
//!
//! A session's worktree is a linked worktree on a branch `tyba/<session-id>` (the default of
//! `tyba run`; sessions given `--here` or `--branch NAME` are the person's own and never
//! listed here). A running session locks its worktree (`git worktree lock`, reason
//! `tyba session <id> (pid <pid>)`), so git itself refuses to remove it; a lock whose
//! supervisor is gone is stale (a session that was killed).
//!
//! States, from git alone (`git-worktree(1)`, `git-for-each-ref(1)` `--contains`):
//! - `running`: locked by a live `tyba` process;
//! - `changed`: uncommitted changes (untracked files included), or commits no other branch
//!   contains (removing the branch would lose them);
//! - `merged`: nothing uncommitted, and another branch contains the branch's tip;
//! - `empty`: like merged, and the branch never moved from the commit it was made at (the
//!   oldest entry of its reflog);
//! - `gone`: the branch is there but no worktree has it checked out (its directory was
//!   removed, or its worktree was switched to another branch or a detached `HEAD`, which
//!   `tyba clean` leaves alone: only the branch is removed, when merged).
//!
//! Only `empty`, `merged` and (when its branch is merged) `gone` are removed by [`clean`],
//! unless the person asks for unmerged work to go too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The prefix of session branches.
pub const BRANCH_PREFIX: &str = "tyba/";

/// Errors of the worktree lifecycle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// Not in a git repository.
    #[error("{0} is not in a git repository")]
    NotARepository(PathBuf),
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Git {
        /// The arguments, space-joined.
        args: String,
        /// What git said.
        stderr: String,
    },
}

/// The state of one session worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Its session is running.
    Running,
    /// It holds work that exists nowhere else.
    Changed,
    /// Its commits are in another branch and nothing is uncommitted.
    Merged,
    /// Nothing was done in it.
    Empty,
    /// Its directory is gone; the branch remains.
    Gone,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Running => "running",
            State::Changed => "changed",
            State::Merged => "merged",
            State::Empty => "empty",
            State::Gone => "gone",
        })
    }
}

/// One session's worktree and branch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionWorktree {
    /// The session id (the branch name after `tyba/`).
    pub session: String,
    /// `tyba/<session>`.
    pub branch: String,
    /// The worktree's path, when the branch is checked out in one.
    pub path: Option<PathBuf>,
    /// Its state.
    pub state: State,
    /// The branch's tip commit.
    pub head: String,
    /// Commits on the branch that no other branch contains.
    pub unmerged_commits: usize,
    /// Paths with uncommitted changes (untracked included), from `git status --porcelain`.
    pub uncommitted: usize,
    /// The supervisor pid named by the worktree's lock, when locked by tyba.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Where the session's commits are kept when they could not be carried onto its branch
    /// (`crate::own_branch`): the branch is then `changed` whatever it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_work: Option<PathBuf>,
}

/// Options every git command tyba runs in a session's worktree (or its repository) starts
/// with: the agent wrote that tree, so nothing configured there may run as the person,
/// outside the sandbox. `core.fsmonitor` is a program git starts for `status` and `diff`
/// (git-config(1)); a `-c` value is passed on to every git git starts (through
/// `GIT_CONFIG_PARAMETERS`), submodules' included, and wins over their own configuration.
/// `status.submoduleSummary` would run `git submodule summary`. Status and diff also take
/// `--ignore-submodules=dirty` ([`IGNORE_SUBMODULE_WORK`]), and a worktree with a populated
/// submodule counts as holding work ([`populated_submodules`]). `--no-optional-locks`
/// (git(1)): `status` then never writes the index it refreshes (the person's, with `--here`),
/// so tyba's look at a checkout neither takes `index.lock` from the person's own git nor
/// makes a file on the disk. tyba's git commands on the person's repository also run with
/// `GIT_NO_LAZY_FETCH=1`: in a partial clone a missing object the agent named would be fetched
/// from the promisor remote, taking the name (anything the agent encodes in it) off the machine.
pub(crate) const HARDENED: [&str; 5] = [
    "--no-optional-locks",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "status.submoduleSummary=false",
];

/// `git status`/`git diff` look inside a submodule's work tree (a `git status` run in it,
/// which obeys the submodule's own configuration: the agent's) unless told not to; with it a
/// changed submodule commit still shows (gitmodules(5), git-status(1) `--ignore-submodules`).
pub(crate) const IGNORE_SUBMODULE_WORK: &str = "--ignore-submodules=dirty";

/// The submodules of `worktree`'s index that are populated (their directory holds a `.git`):
/// their work tree is not looked into by tyba's own git ([`IGNORE_SUBMODULE_WORK`]), nor by
/// git's own check before `git worktree remove` may run there, so a worktree holding one
/// counts as holding work (kept for the person, never removed unasked). Gitlinks are index
/// entries of mode `160000` (`git ls-files --stage`). `0` when git cannot list them.
pub(crate) fn populated_submodules(worktree: &Path) -> usize {
    populated_submodule_paths(worktree).len()
}

/// The paths (relative to `worktree`) of [`populated_submodules`].
pub(crate) fn populated_submodule_paths(worktree: &Path) -> Vec<String> {
    let Ok(out) = git(worktree, &["ls-files", "--stage", "-z"]) else {
        return Vec::new();
    };
    out.split('\0')
        .filter_map(|e| e.strip_prefix("160000 "))
        .filter_map(|e| e.split_once('\t').map(|(_, path)| path))
        .filter(|path| std::fs::symlink_metadata(worktree.join(path).join(".git")).is_ok())
        .map(str::to_string)
        .collect()
}

/// `git -C dir` [`HARDENED`] `ARGS`, never fetching a missing object (`GIT_NO_LAZY_FETCH`):
/// its trimmed standard output.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(HARDENED)
        .args(args)
        .env("GIT_NO_LAZY_FETCH", "1")
        .output()
        .map_err(|e| WorktreeError::Git {
            args: args.join(" "),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(WorktreeError::Git {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The reason a running session's lock carries.
pub fn lock_reason(session: &str, pid: u32) -> String {
    format!("tyba session {session} (pid {pid})")
}

/// The supervisor pid of a lock reason written by [`lock_reason`].
fn lock_pid(reason: &str) -> Option<u32> {
    let rest = reason.strip_prefix("tyba session ")?;
    let pid = rest.split("(pid ").nth(1)?.strip_suffix(')')?;
    pid.parse().ok()
}

/// Whether `pid` is a live tyba process.
fn live_tyba(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
        exe.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("tyba"))
    }) || std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|c| c.trim_end().starts_with("tyba"))
}

#[derive(Debug, Default)]
struct Listed {
    path: PathBuf,
    branch: Option<String>,
    locked: Option<String>,
    prunable: bool,
}

/// `git worktree list --porcelain`, parsed.
fn list_worktrees(repo: &Path) -> Result<Vec<Listed>, WorktreeError> {
    let out = git(repo, &["worktree", "list", "--porcelain"])?;
    let mut v = Vec::new();
    let mut cur: Option<Listed> = None;
    for line in out.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            v.extend(cur.take());
            cur = Some(Listed {
                path: PathBuf::from(p),
                ..Listed::default()
            });
        } else if let Some(c) = cur.as_mut() {
            if let Some(b) = line.strip_prefix("branch refs/heads/") {
                c.branch = Some(b.to_string());
            } else if line == "locked" {
                c.locked = Some(String::new());
            } else if let Some(r) = line.strip_prefix("locked ") {
                c.locked = Some(r.to_string());
            } else if line.starts_with("prunable") {
                c.prunable = true;
            }
        }
    }
    v.extend(cur);
    Ok(v)
}

/// Every session worktree of the repository containing `dir`, sorted by branch.
///
/// # Errors
/// [`WorktreeError::NotARepository`] outside a repository; [`WorktreeError::Git`] when git
/// fails.
pub fn list(dir: &Path) -> Result<Vec<SessionWorktree>, WorktreeError> {
    if git(dir, &["rev-parse", "--git-dir"]).is_err() {
        return Err(WorktreeError::NotARepository(dir.to_path_buf()));
    }
    let worktrees = list_worktrees(dir)?;
    let left = match (
        crate::session::git_layout(dir),
        crate::own_branch::refs_root(),
    ) {
        (Some(g), Some(root)) => crate::own_branch::left_behind(&g.common_dir, &root),
        _ => Vec::new(),
    };
    let refs = git(
        dir,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname:strip=2)",
            &format!("refs/heads/{BRANCH_PREFIX}"),
        ],
    )?;
    let mut out = Vec::new();
    for line in refs.lines() {
        let Some((head, branch)) = line.split_once(' ') else {
            continue;
        };
        let session = branch
            .strip_prefix(BRANCH_PREFIX)
            .unwrap_or(branch)
            .to_string();
        let wt = worktrees
            .iter()
            .find(|w| w.branch.as_deref() == Some(branch));
        let unmerged_commits = unmerged(dir, branch)?;
        let path = wt.map(|w| w.path.clone());
        let present = wt.is_some_and(|w| !w.prunable && w.path.is_dir());
        let uncommitted = match (&path, present) {
            (Some(p), true) => git(
                p,
                &[
                    "status",
                    "--porcelain",
                    "--untracked-files=all",
                    IGNORE_SUBMODULE_WORK,
                ],
            )
            .map(|s| s.lines().count() + populated_submodules(p))
            // A worktree git cannot read is treated as holding work.
            .unwrap_or(usize::MAX),
            _ => 0,
        };
        let pid = wt.and_then(|w| w.locked.as_deref()).and_then(lock_pid);
        let kept_work = left
            .iter()
            .find(|(b, _)| b == branch)
            .map(|(_, d)| d.clone());
        let state = if pid.is_some_and(live_tyba) {
            State::Running
        } else if kept_work.is_some() {
            State::Changed
        } else if !present {
            State::Gone
        } else if uncommitted > 0 || unmerged_commits > 0 {
            State::Changed
        } else if never_moved(dir, branch, head) {
            State::Empty
        } else {
            State::Merged
        };
        out.push(SessionWorktree {
            session,
            branch: branch.to_string(),
            path,
            state,
            head: head.to_string(),
            unmerged_commits,
            uncommitted,
            pid,
            kept_work,
        });
    }
    out.sort_by(|a, b| a.branch.cmp(&b.branch));
    Ok(out)
}

/// Commits reachable from `branch` and from no other local branch.
fn unmerged(dir: &Path, branch: &str) -> Result<usize, WorktreeError> {
    let own = format!("refs/heads/{branch}");
    let others = git(dir, &["for-each-ref", "--format=%(refname)", "refs/heads/"])?;
    let mut args: Vec<String> = vec!["rev-list".into(), "--count".into(), own.clone()];
    for r in others.lines().filter(|r| *r != own) {
        args.push(format!("^{r}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let n = git(dir, &refs)?;
    Ok(n.trim().parse().unwrap_or(usize::MAX))
}

/// Whether `branch` is still at the commit it was created at (the oldest entry of its
/// reflog). Without a reflog it is not known to be unmoved.
fn never_moved(dir: &Path, branch: &str, head: &str) -> bool {
    git(
        dir,
        &[
            "reflog",
            "show",
            "--format=%H",
            &format!("refs/heads/{branch}"),
        ],
    )
    .ok()
    .and_then(|s| s.lines().last().map(str::to_string))
    .is_some_and(|first| first == head)
}

/// What [`clean`] did with one worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleaned {
    /// Removed (worktree and branch).
    Removed(SessionWorktree),
    /// Kept, and why.
    Kept(SessionWorktree, String),
    /// Removing failed.
    Failed(SessionWorktree, String),
}

/// Removes the finished session worktrees of the repository containing `dir` that hold no
/// work (`empty`, `merged`, and `gone` ones whose branch is merged); with `unmerged`, the
/// `changed` ones too (their uncommitted changes and unmerged commits are lost). Never a
/// running one. With `dry_run`, says what it would do and does nothing.
///
/// # Errors
/// As [`list`].
pub fn clean(dir: &Path, unmerged: bool, dry_run: bool) -> Result<Vec<Cleaned>, WorktreeError> {
    let mut out = Vec::new();
    for w in list(dir)? {
        let removable = match w.state {
            State::Running => false,
            State::Empty | State::Merged => true,
            State::Gone => w.unmerged_commits == 0 || unmerged,
            State::Changed => unmerged,
        };
        if !removable {
            let why = match w.state {
                State::Running => "its session is running".to_string(),
                _ => format!(
                    "it holds work ({}): `tyba clean --unmerged` removes it",
                    work_summary(&w)
                ),
            };
            out.push(Cleaned::Kept(w, why));
            continue;
        }
        if dry_run {
            out.push(Cleaned::Removed(w));
            continue;
        }
        match remove(dir, &w, w.state == State::Changed) {
            Ok(()) => out.push(Cleaned::Removed(w)),
            Err(e) => out.push(Cleaned::Failed(w, e.to_string())),
        }
    }
    if !dry_run {
        let _ = git(dir, &["worktree", "prune"]);
    }
    Ok(out)
}

/// "2 commits in no other branch, 3 uncommitted paths".
pub fn work_summary(w: &SessionWorktree) -> String {
    let mut parts = Vec::new();
    if w.unmerged_commits > 0 {
        parts.push(format!(
            "{} commit{} in no other branch",
            w.unmerged_commits,
            if w.unmerged_commits == 1 { "" } else { "s" }
        ));
    }
    if let Some(d) = &w.kept_work {
        parts.push(format!(
            "commits not on the branch, kept in {}",
            d.display()
        ));
    }
    if w.uncommitted == usize::MAX {
        parts.push("a status git cannot read".to_string());
    } else if w.uncommitted > 0 {
        parts.push(format!(
            "{} uncommitted path{}",
            w.uncommitted,
            if w.uncommitted == 1 { "" } else { "s" }
        ));
    }
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(", ")
    }
}

/// Removes `w`'s worktree (when it has one) and its branch. `force` removes uncommitted
/// changes and unmerged commits too; without it git's own checks stay (`git worktree remove`
/// refuses a dirty worktree).
fn remove(dir: &Path, w: &SessionWorktree, force: bool) -> Result<(), WorktreeError> {
    if let Some(p) = w.path.as_ref().filter(|p| p.is_dir()) {
        let p = p.to_string_lossy();
        drop_empty_modules_dir(Path::new(&*p));
        // A stale lock (its supervisor is gone) is lifted first.
        if w.pid.is_some() {
            let _ = git(dir, &["worktree", "unlock", &p]);
        }
        if force {
            git(dir, &["worktree", "remove", "--force", &p])?;
        } else {
            git(dir, &["worktree", "remove", &p])?;
        }
    } else {
        let _ = git(dir, &["worktree", "prune"]);
    }
    // The branch's commits are in another branch (checked by `list`), or the person asked.
    git(dir, &["branch", "-D", "--", &w.branch])?;
    Ok(())
}

/// Removes the worktree's `<git dir>/modules` when it is an empty directory: the sandbox
/// makes one to bind it read-only (`crate::sandbox`), and `git worktree remove` takes any
/// `modules` directory for submodules and refuses. A non-empty one stays (real submodules).
pub fn drop_empty_modules_dir(worktree: &Path) {
    if let Ok(gd) = git(worktree, &["rev-parse", "--absolute-git-dir"]) {
        let _ = std::fs::remove_dir(Path::new(gd.trim()).join("modules"));
    }
}

/// The lock of a running session's worktree: `git worktree lock` with [`lock_reason`], lifted
/// on drop. The lock makes git refuse to remove or prune the worktree while the session runs,
/// and tells [`list`] the session is running.
#[derive(Debug)]
pub struct RunningLock {
    repo: PathBuf,
    worktree: PathBuf,
}

impl RunningLock {
    /// Locks `worktree` (a linked worktree of `repo`) for `session`; `None` when git cannot
    /// (the worktree is still usable, only not marked).
    pub fn take(repo: &Path, worktree: &Path, session: &str) -> Option<RunningLock> {
        let reason = lock_reason(session, std::process::id());
        let wt = worktree.to_string_lossy();
        git(repo, &["worktree", "lock", "--reason", &reason, &wt]).ok()?;
        Some(RunningLock {
            repo: repo.to_path_buf(),
            worktree: worktree.to_path_buf(),
        })
    }
}

impl Drop for RunningLock {
    fn drop(&mut self) {
        let wt = self.worktree.to_string_lossy();
        let _ = git(&self.repo, &["worktree", "unlock", &wt]);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_reason_names_its_supervisor() {
        assert_eq!(lock_pid(&lock_reason("0a1b", 4242)), Some(4242));
        assert_eq!(lock_pid("kept for a reason"), None);
        assert_eq!(lock_pid("tyba session x (pid x)"), None);
    }

    /// tyba's `git status` in a checkout whose files' stat data moved (a `touch`) leaves the
    /// index as it was; the person's own `git status` there rewrites it (the control).
    #[test]
    fn tybas_status_never_writes_the_index() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        let plain = |args: &[&str]| {
            let st = std::process::Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap();
            assert!(st.status.success(), "{args:?}");
        };
        plain(&["init", "-q"]);
        std::fs::write(dir.join("f"), "x\n").unwrap();
        plain(&["add", "f"]);
        plain(&["commit", "-qm", "f"]);
        let index = || {
            std::fs::metadata(dir.join(".git/index"))
                .unwrap()
                .modified()
                .unwrap()
        };
        let touch = || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let f = std::fs::File::options()
                .write(true)
                .open(dir.join("f"))
                .unwrap();
            f.set_modified(std::time::SystemTime::now()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        touch();
        let before = index();
        git(&dir, &["status", "--porcelain"]).unwrap();
        assert_eq!(index(), before, "tyba's status wrote the index");
        plain(&["status", "--porcelain"]);
        assert_ne!(
            index(),
            before,
            "control: git's own status refreshes the index"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
