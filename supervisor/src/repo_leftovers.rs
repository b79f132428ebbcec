//! What the agent left in the person's repository that breaks the person's next git
//! command, found at the session's end and repaired when that is safe (DESIGN.md §5; issue
//! 13's F4).
//!
//! The agent writes the repository's git dir where the session lets it (`--here`: the whole
//! git dir of the person's checkout but the protected files; a linked worktree: the object
//! store and the worktree's admin dir), and git trusts what it finds there:
//!
//! - **lock files** (`refs/heads/main.lock`, `index.lock`, `HEAD.lock`, `config.lock`,
//!   `packed-refs.lock`, `objects/info/commit-graph.lock`…): git's lockfile protocol
//!   (`Documentation/technical/api-lockfile.txt`, `lockfile.h`) makes each writer create
//!   `<file>.lock` with `O_EXCL`; one left behind makes every later writer of that file fail
//!   ("Unable to create '….lock': File exists. Another git process seems to be running…")
//!   until someone removes it by hand;
//! - **directories renamed or replaced**: `.git/logs` moved away (the reflogs, the person's
//!   record of where each branch was, vanish from `git reflog`) or replaced by a file (every
//!   reflog append fails), `refs/tags` or `objects/pack` moved away (tags or every packed
//!   object gone: "bad object HEAD");
//! - **`HEAD`** of the person's own checkout rewritten: garbage (git no longer takes the
//!   directory for a repository), or detached / moved to another branch (the person's next
//!   commit lands on a detached `HEAD` or on that branch).
//!
//! [`RepoSnapshot::take`] records, before the agent runs, the identity (device, inode) of
//! those directories, the checkout's `HEAD` and the in-progress operation files present;
//! [`RepoSnapshot::check`], once no process of the sandbox is left, compares and returns
//! what it found and what it did:
//!
//! - a directory found elsewhere in its parent or in the git dir (same inode) is renamed back
//!   (`RENAME_NOREPLACE`); what was put in its place is first moved aside to
//!   `<name>.tyba-<session>` and named; one that is gone is reported;
//! - a lock file made during the session (birth time, `statx(2)` `STATX_BTIME`, else change
//!   time, between the snapshot and the sandbox's end) is removed when no process outside the
//!   ended sandbox (tyba, the processes it was started from and its own command line's
//!   process group aside) has its working directory in the repository or a file of the git
//!   dir open: then no git of the person's can be holding it. Otherwise
//!   it is kept and reported with the command to remove it;
//! - a `HEAD` git cannot read is put back as it was; a `HEAD` detached at the very commit
//!   its start branch still points to is re-attached to that branch (nothing else changes:
//!   index and files are those of that commit); a `HEAD` detached elsewhere or on another
//!   branch is reported with the command to go back (moving it would leave the index and
//!   the files of another commit);
//! - an operation the agent began and left (`MERGE_HEAD`, `rebase-merge/`, `sequencer/`…) is
//!   reported: the person's `git commit` would record the merge, `git rebase --continue`
//!   would run its todo list.

use crate::sandbox::rename_noreplace;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Directories of a common git dir git finds by name (`gitrepository-layout(5)`).
const COMMON_DIRS: &[&str] = &[
    "refs",
    "refs/heads",
    "refs/tags",
    "refs/remotes",
    "logs",
    "logs/refs",
    "logs/refs/heads",
    "objects",
    "objects/pack",
    "objects/info",
];

/// Directories of a linked worktree's own git dir git finds by name.
const WORKTREE_DIRS: &[&str] = &["logs"];

/// Files and directories of an operation in progress (`git-status(1)`, `git-rebase(1)`,
/// `git-sequencer`): what the person's next `git commit` or `--continue` obeys.
const OPERATION_STATE: &[&str] = &[
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
    "rebase-merge",
    "rebase-apply",
    "sequencer",
];

/// Most entries walked under `refs/` looking for lock files.
const MAX_WALK: usize = 20_000;

/// One directory as it was: its path and identity.
#[derive(Debug, Clone)]
struct DirId {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// What a session's repository looked like before the agent ran.
#[derive(Debug, Clone)]
pub struct RepoSnapshot {
    session: String,
    /// The git dirs the agent could write, each once: the common dir and the worktree's own.
    git_dirs: Vec<PathBuf>,
    /// The repository's worktrees (their working directories), for the live-process test.
    worktrees: Vec<PathBuf>,
    dirs: Vec<DirId>,
    /// The checkout's `HEAD` path and bytes, when the checkout is the person's.
    head: Option<(PathBuf, Vec<u8>)>,
    /// Operation state present at the start, by path.
    operations: Vec<PathBuf>,
    started: SystemTime,
}

/// One thing found at the session's end, and what tyba did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was found, naming the path.
    pub found: String,
    /// What tyba did (or what the person can do).
    pub done: String,
}

impl RepoSnapshot {
    /// Records the repository of `worktree` (git layout `g`) before the agent runs.
    /// `persons_checkout`: the worktree is the person's own (`--here`, `--worktree` on an
    /// existing one), so its `HEAD` is checked too; a worktree tyba made is the session's.
    /// `writable`: the roots the agent may write; only what lies under one is recorded.
    pub fn take(
        session: &str,
        worktree: &Path,
        g: &crate::session::GitLayout,
        persons_checkout: bool,
        writable: &[PathBuf],
    ) -> RepoSnapshot {
        let under = |p: &Path| writable.iter().any(|r| p.starts_with(r));
        let mut git_dirs = vec![g.common_dir.clone()];
        if g.git_dir != g.common_dir {
            git_dirs.push(g.git_dir.clone());
        }
        let mut dirs = Vec::new();
        let names = COMMON_DIRS.iter().map(|n| g.common_dir.join(n)).chain(
            (g.git_dir != g.common_dir)
                .then(|| WORKTREE_DIRS.iter().map(|n| g.git_dir.join(n)))
                .into_iter()
                .flatten(),
        );
        for path in names {
            if !under(&path) {
                continue;
            }
            if let Ok(m) = std::fs::symlink_metadata(&path) {
                if m.is_dir() {
                    dirs.push(DirId {
                        dev: m.dev(),
                        ino: m.ino(),
                        path,
                    });
                }
            }
        }
        let head_path = g.git_dir.join("HEAD");
        let head = (persons_checkout && under(&head_path))
            .then(|| std::fs::read(&head_path).ok().map(|b| (head_path, b)))
            .flatten();
        let operations = OPERATION_STATE
            .iter()
            .map(|n| g.git_dir.join(n))
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect();
        RepoSnapshot {
            session: session.to_string(),
            git_dirs,
            worktrees: vec![worktree.to_path_buf()],
            dirs,
            head,
            operations,
            started: SystemTime::now(),
        }
    }

    /// Compares the repository with the snapshot, once no process of the sandbox is left
    /// (`ended`: when the sandbox ended), repairs what can be repaired safely and returns
    /// what was found, in order.
    pub fn check(&self, ended: SystemTime) -> Vec<Finding> {
        let mut out = Vec::new();
        // Parents before children: `logs` is restored before `logs/refs` is looked for.
        for d in &self.dirs {
            self.check_dir(d, &mut out);
        }
        self.check_locks(ended, &mut out);
        self.check_head(&mut out);
        self.check_operations(&mut out);
        out
    }

    fn aside(&self, p: &Path) -> PathBuf {
        let mut s = p.as_os_str().to_os_string();
        s.push(format!(".tyba-{}", self.session));
        PathBuf::from(s)
    }

    fn check_dir(&self, d: &DirId, out: &mut Vec<Finding>) {
        let now = std::fs::symlink_metadata(&d.path);
        if now
            .as_ref()
            .is_ok_and(|m| m.is_dir() && m.dev() == d.dev && m.ino() == d.ino)
        {
            return;
        }
        let shown = d.path.display();
        // Where it went: its parent, or the git dirs' roots.
        let mut places: Vec<PathBuf> = d.path.parent().map(Path::to_path_buf).into_iter().collect();
        for g in &self.git_dirs {
            if !places.contains(g) {
                places.push(g.clone());
            }
        }
        let moved = places.iter().find_map(|dir| {
            std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
                let m = std::fs::symlink_metadata(e.path()).ok()?;
                (m.is_dir() && m.dev() == d.dev && m.ino() == d.ino).then(|| e.path())
            })
        });
        let Some(moved) = moved else {
            let what = match &now {
                Ok(m) if m.is_dir() => "was replaced by another directory",
                Ok(_) => "was replaced by a file",
                Err(_) => "is gone",
            };
            out.push(Finding {
                found: format!("{shown} {what}"),
                done: "left as it is (the original is nowhere in the git dir)".into(),
            });
            return;
        };
        let mut done = String::new();
        if now.is_ok() {
            let aside = self.aside(&d.path);
            if rename_noreplace(&d.path, &aside).is_err() {
                out.push(Finding {
                    found: format!("{shown} was moved to {}", moved.display()),
                    done: "left as it is (what stands in its place could not be moved aside)"
                        .into(),
                });
                return;
            }
            done = format!("; what stood in its place is kept at {}", aside.display());
        }
        match rename_noreplace(&moved, &d.path) {
            Ok(()) => out.push(Finding {
                found: format!("{shown} was moved to {}", moved.display()),
                done: format!("moved back{done}"),
            }),
            Err(e) => out.push(Finding {
                found: format!("{shown} was moved to {}", moved.display()),
                done: format!("could not be moved back ({e}){done}"),
            }),
        }
    }

    /// The lock files under the git dirs made between the snapshot and `ended`.
    fn new_locks(&self, ended: SystemTime) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut seen = 0usize;
        let mut todo: Vec<(PathBuf, bool)> = Vec::new();
        for g in &self.git_dirs {
            // The root and the object store's metadata directories, not recursively; `refs/`
            // recursively (a ref's lock is beside the ref).
            todo.push((g.clone(), false));
            todo.push((g.join("refs"), true));
            todo.push((g.join("objects/info"), false));
            todo.push((g.join("objects/info/commit-graphs"), false));
            todo.push((g.join("objects/pack"), false));
        }
        while let Some((dir, deep)) = todo.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > MAX_WALK {
                    return found;
                }
                let Ok(ft) = e.file_type() else { continue };
                let name = e.file_name();
                if ft.is_dir() {
                    if deep {
                        todo.push((e.path(), true));
                    }
                    continue;
                }
                if !name.to_string_lossy().ends_with(".lock") {
                    continue;
                }
                let p = e.path();
                if made_between(&p, self.started, ended) && !found.contains(&p) {
                    found.push(p);
                }
            }
        }
        found.sort();
        found
    }

    fn check_locks(&self, ended: SystemTime, out: &mut Vec<Finding>) {
        let locks = self.new_locks(ended);
        if locks.is_empty() {
            return;
        }
        let busy = self.someone_works_here();
        for p in locks {
            let shown = p.display();
            match &busy {
                None => match std::fs::remove_file(&p) {
                    Ok(()) => out.push(Finding {
                        found: format!("{shown}: a git lock file the session left"),
                        done: "removed (no other process works in the repository)".into(),
                    }),
                    Err(e) => out.push(Finding {
                        found: format!("{shown}: a git lock file the session left"),
                        done: format!("could not be removed ({e}): rm {}", shell_path(&p)),
                    }),
                },
                Some(who) => out.push(Finding {
                    found: format!("{shown}: a git lock file made while the session ran"),
                    done: format!(
                        "kept ({who} works in the repository and may hold it); once no git runs there: rm {}",
                        shell_path(&p)
                    ),
                }),
            }
        }
    }

    /// A process outside the ended sandbox that works in the repository: its working
    /// directory in a worktree or git dir, or a file of a git dir open. tyba itself and the
    /// processes it was started from are not counted. `None` when there is none.
    fn someone_works_here(&self) -> Option<String> {
        let me = std::process::id();
        // The command line tyba was started in (`tyba run … | tee log`): one process group.
        let group = nix::unistd::getpgrp().as_raw();
        let mut mine = vec![me];
        let mut p = me;
        while let Some(pp) = parent_of(p).filter(|&pp| pp > 1 && !mine.contains(&pp)) {
            mine.push(pp);
            p = pp;
        }
        let roots: Vec<&PathBuf> = self.worktrees.iter().chain(&self.git_dirs).collect();
        let inside = |t: &Path| roots.iter().any(|r| t.starts_with(r));
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Some("an unknown process (/proc cannot be read)".into());
        };
        for e in procs.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if mine.contains(&pid)
                || stat_field(pid, 2).and_then(|g| g.parse::<i32>().ok()) == Some(group)
            {
                continue;
            }
            let dir = e.path();
            let cwd = std::fs::read_link(dir.join("cwd")).ok();
            let open_here = || {
                std::fs::read_dir(dir.join("fd")).ok().is_some_and(|fds| {
                    fds.flatten().any(|f| {
                        std::fs::read_link(f.path())
                            .is_ok_and(|t| self.git_dirs.iter().any(|g| t.starts_with(g)))
                    })
                })
            };
            if cwd.as_deref().is_some_and(inside) || open_here() {
                let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
                return Some(format!("process {pid} ({})", comm.trim()));
            }
        }
        None
    }

    fn check_head(&self, out: &mut Vec<Finding>) {
        let Some((path, was)) = &self.head else {
            return;
        };
        let shown = path.display();
        let m = std::fs::symlink_metadata(path);
        let now = m
            .as_ref()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|_| std::fs::read(path).ok());
        if now.as_ref() == Some(was) {
            return;
        }
        let start_branch = symref_branch(was);
        let Some(now) = now.filter(|b| head_is_valid(b)) else {
            // Git cannot read it: put back the start's.
            let mut done = String::new();
            if m.is_ok() {
                let aside = self.aside(path);
                if rename_noreplace(path, &aside).is_err() {
                    out.push(Finding {
                        found: format!("{shown} is no HEAD git can read"),
                        done: "left as it is (it could not be moved aside)".into(),
                    });
                    return;
                }
                done = format!("; the session's is kept at {}", aside.display());
            }
            let r = write_atomically(path, was);
            out.push(Finding {
                found: format!("{shown} is no HEAD git can read"),
                done: match r {
                    Ok(()) => format!("put back as it was at the start{done}"),
                    Err(e) => format!("could not be put back ({e}){done}"),
                },
            });
            return;
        };
        let text = String::from_utf8_lossy(&now).trim().to_string();
        match (symref_branch(&now), start_branch) {
            (None, Some(b)) => {
                let tip = self.branch_tip(&b);
                if tip.as_deref() == Some(text.as_str()) {
                    let line = format!("ref: refs/heads/{b}\n");
                    let r = write_atomically(path, line.as_bytes());
                    out.push(Finding {
                        found: format!("{shown} was detached at {b}'s own commit"),
                        done: match r {
                            Ok(()) => format!(
                                "re-attached to {b} (the files and index are that commit's)"
                            ),
                            Err(e) => format!("could not be re-attached ({e}): git switch {b}"),
                        },
                    });
                } else {
                    out.push(Finding {
                        found: format!("{shown} was detached at {text} (it was on {b})"),
                        done: format!(
                            "left so (the files are another commit's); to go back: git -C {} switch {b}",
                            shell_path(&self.worktrees[0])
                        ),
                    });
                }
            }
            (Some(now_b), Some(b)) if now_b != b => out.push(Finding {
                found: format!("{shown} is on branch {now_b} (it was on {b})"),
                done: format!(
                    "left so (the files are that branch's); to go back: git -C {} switch {b}",
                    shell_path(&self.worktrees[0])
                ),
            }),
            _ => out.push(Finding {
                found: format!(
                    "{shown} changed: {}",
                    crate::broker::text::clean_lines(&text)
                ),
                done: "left so".into(),
            }),
        }
    }

    /// The commit branch `b` points to, read as git stores it (a loose ref, else
    /// `packed-refs`), full hex.
    fn branch_tip(&self, b: &str) -> Option<String> {
        let common = &self.git_dirs[0];
        let name = format!("refs/heads/{b}");
        if let Ok(t) = std::fs::read_to_string(common.join(&name)) {
            let t = t.trim();
            return is_hex_oid(t).then(|| t.to_string());
        }
        let packed = std::fs::read_to_string(common.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| {
            let (oid, r) = l.split_once(' ')?;
            (r.trim() == name && is_hex_oid(oid)).then(|| oid.to_string())
        })
    }

    fn check_operations(&self, out: &mut Vec<Finding>) {
        let Some(g) = self.git_dirs.last() else {
            return;
        };
        // The checkout's own git dir holds them (the last of `git_dirs`).
        for n in OPERATION_STATE {
            let p = g.join(n);
            if !self.operations.contains(&p) && std::fs::symlink_metadata(&p).is_ok() {
                out.push(Finding {
                    found: format!("{}: an operation the session began is in progress", p.display()),
                    done: "left so: `git status` names it; `--abort` it unless you mean to go on (your next commit or `--continue` obeys it)".into(),
                });
            }
        }
    }
}

/// Writes `bytes` to `path` through a new file renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(format!(".tyba-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let r = f
        .write_all(bytes)
        .and_then(|()| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Whether `p` was made between `from` and `to`: its birth time (`statx(2)`), else its last
/// status change, lies in that span.
fn made_between(p: &Path, from: SystemTime, to: SystemTime) -> bool {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return false;
    };
    let t = m.created().or_else(|_| {
        let secs = u64::try_from(m.ctime()).unwrap_or(0);
        let nanos = u32::try_from(m.ctime_nsec()).unwrap_or(0);
        Ok::<_, std::io::Error>(SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, nanos))
    });
    t.is_ok_and(|t| t >= from && t <= to)
}

/// Field `n` after the command of `/proc/<pid>/stat` (`proc(5)`: 0 the state, 1 the parent,
/// 2 the process group).
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`: the command may hold spaces and parentheses.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(n).map(str::to_string)
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_field(pid, 1)?.parse().ok()
}

/// The branch of a symbolic `HEAD` (`ref: refs/heads/NAME`).
fn symref_branch(head: &[u8]) -> Option<String> {
    let t = std::str::from_utf8(head).ok()?.trim_end();
    t.strip_prefix("ref: refs/heads/").map(str::to_string)
}

fn is_hex_oid(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether git reads `head` as a `HEAD` (`setup.c` `validate_headref`): a symbolic ref to
/// `refs/…`, or an object id.
fn head_is_valid(head: &[u8]) -> bool {
    let Ok(t) = std::str::from_utf8(head) else {
        return false;
    };
    let t = t.trim_end_matches('\n');
    if t.contains('\n') {
        return false;
    }
    match t.strip_prefix("ref:") {
        Some(r) => r.trim_start().starts_with("refs/"),
        None => is_hex_oid(t),
    }
}

/// `p` as one shell word, for a command the person pastes.
fn shell_path(p: &Path) -> String {
    crate::broker::text::shell_word(&p.to_string_lossy())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn heads_git_reads_are_told_from_garbage() {
        assert!(head_is_valid(b"ref: refs/heads/main\n"));
        assert!(head_is_valid(b"0123456789abcdef0123456789abcdef01234567\n"));
        assert!(!head_is_valid(b"ref: main\n"));
        assert!(!head_is_valid(b"garbage\n"));
        assert!(!head_is_valid(b""));
        assert!(!head_is_valid(b"ref: refs/heads/a\nref: refs/heads/b\n"));
        assert_eq!(
            symref_branch(b"ref: refs/heads/x/y\n").as_deref(),
            Some("x/y")
        );
        assert_eq!(symref_branch(b"0123"), None);
    }

    #[test]
    fn a_renamed_directory_is_moved_back_and_what_replaced_it_kept_aside() {
        let t = tempfile::tempdir().unwrap();
        let git = std::fs::canonicalize(t.path()).unwrap().join(".git");
        for d in COMMON_DIRS {
            std::fs::create_dir_all(git.join(d)).unwrap();
        }
        std::fs::write(git.join("logs/HEAD"), "reflog\n").unwrap();
        let g = crate::session::GitLayout {
            git_dir: git.clone(),
            common_dir: git.clone(),
        };
        let s = RepoSnapshot::take(
            "0a1b2c3d4e5f",
            t.path(),
            &g,
            false,
            std::slice::from_ref(&git),
        );
        std::fs::rename(git.join("logs"), git.join("logs-away")).unwrap();
        std::fs::write(git.join("logs"), "planted").unwrap();
        // Control: nothing else changed, so only this is found.
        let f = s.check(SystemTime::now());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].done.starts_with("moved back"), "{f:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("logs/HEAD")).unwrap(),
            "reflog\n"
        );
        assert_eq!(
            std::fs::read_to_string(git.join("logs.tyba-0a1b2c3d4e5f")).unwrap(),
            "planted"
        );
        assert!(s.check(SystemTime::now()).is_empty());
    }
}
