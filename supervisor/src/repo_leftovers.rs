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
//! the git dirs and of those directories, the checkout's `HEAD` and the in-progress
//! operation files present; [`RepoSnapshot::check`], once no process of the sandbox is left,
//! compares and returns what it found and what it did.
//!
//! **Nothing the agent planted redirects what tyba does.** Every look-up and change is made
//! from the git dir opened and checked against its recorded identity, one directory at a
//! time, never through a symbolic link ([`crate::dirfd`]: `openat2(2)` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `renameat2(2)` and `unlinkat(2)` relative to
//! directories held open). A directory is acted in only when it is the very directory
//! recorded at the start (or was just put back as it): a link the agent put in place of
//! `logs/refs` (to `refs/`, or to another repository's) is reported, never followed, and
//! nothing beneath it is touched.
//!
//! - a directory found elsewhere in its parent or in a git dir's root (same device and
//!   inode, not a link) is renamed back (`RENAME_NOREPLACE`); what was put in its place (a
//!   file, a link, another directory) is first moved aside, in the same directory, to
//!   `<name>.tyba-<16 random hex digits>` (another name tried when one is taken: no name the
//!   agent made in advance stops the repair) and named; one that is nowhere is reported with
//!   what stands in its place, and the directories beneath it are reported unchecked;
//! - a lock file (or a link named like one) made during the session (birth time, `statx(2)`
//!   `STATX_BTIME`, else change time, between the snapshot and the sandbox's end), in a
//!   directory the agent could write (the git dir's root, `refs/` and below, `objects/info`,
//!   `objects/info/commit-graphs`, `objects/pack`), is removed when no process outside the
//!   ended sandbox (tyba, the processes it was started from and its own command line's
//!   process group aside) has its working directory in the repository or a file of the git
//!   dir open: then no git of the person's can be holding it. Otherwise it is kept and
//!   reported with the command to remove it. A link on the way to one of those directories is
//!   not followed (their locks are not looked for);
//! - a `HEAD` git cannot read (a link included) is moved aside and put back as it was; a
//!   `HEAD` detached at the very commit its start branch still points to is re-attached to
//!   that branch (nothing else changes: index and files are those of that commit); a `HEAD`
//!   detached elsewhere or on another branch is reported with the command to go back (moving
//!   it would leave the index and the files of another commit);
//! - an operation the agent began and left (`MERGE_HEAD`, `rebase-merge/`, `sequencer/`…) is
//!   reported: the person's `git commit` would record the merge, `git rebase --continue`
//!   would run its todo list;
//! - a git dir that is no longer the one recorded (moved or replaced) is reported and nothing
//!   in it is checked or changed.

use crate::dirfd::{DirFd, Id};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Directories of a common git dir git finds by name (`gitrepository-layout(5)`), each after
/// its parent.
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

/// Where git's lock files are looked for in each git dir, and whether below too: the root
/// and the object store's metadata directories, not recursively; `refs/` recursively (a
/// ref's lock is beside the ref).
const LOCK_DIRS: &[(&str, bool)] = &[
    ("", false),
    ("refs", true),
    ("objects/info", false),
    ("objects/info/commit-graphs", false),
    ("objects/pack", false),
];

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

/// Most entries walked looking for lock files, and most entries of one directory searched
/// for a moved one.
const MAX_WALK: usize = 20_000;

/// Largest `HEAD`, loose ref or `packed-refs` read (bytes).
const MAX_HEAD: u64 = 4096;
const MAX_PACKED_REFS: u64 = 64 << 20;

/// One directory as it was: in which git dir (index into [`RepoSnapshot::git_dirs`]), its
/// path relative to it, and its identity.
#[derive(Debug, Clone)]
struct DirId {
    root: usize,
    rel: PathBuf,
    id: Id,
}

/// What a session's repository looked like before the agent ran.
#[derive(Debug, Clone)]
pub struct RepoSnapshot {
    /// The git dirs the agent could write, each once: the common dir and the worktree's own
    /// (the checkout's, last), with their identity at the start.
    git_dirs: Vec<(PathBuf, Option<Id>)>,
    /// The repository's worktrees (their working directories), for the live-process test.
    worktrees: Vec<PathBuf>,
    dirs: Vec<DirId>,
    /// The directories looked in for lock files: `(git dir, relative path, recursively)`,
    /// those the agent could write.
    lock_dirs: Vec<(usize, &'static str, bool)>,
    /// The checkout's `HEAD` bytes, when the checkout is the person's.
    head: Option<Vec<u8>>,
    /// The checkout's index as found at the start (identity, size, change time), when the
    /// checkout is the person's: `Some(None)` when it had none.
    index: Option<Option<FileStamp>>,
    /// Operation state present at the start, by name in the checkout's git dir.
    operations: Vec<&'static str>,
    started: SystemTime,
}

/// A file's identity, size and change time: when all are the same, its bytes are taken to
/// be too (the index's check at the end reads it only when not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// The largest index the end's check reads (a checkout of a million files has one of about
/// 100 MiB); a larger one is not checked.
const MAX_INDEX: u64 = 512 << 20;

/// Why git could not read `data` as an index (`Documentation/gitformat-index.txt`: the
/// `DIRC` header, the entries and extensions, then the hash of all that, SHA-1 or SHA-256 as
/// the repository's, or zeros under `index.skipHash`); `None` when it can. Decoded by
/// `gix-index`, after the trailing hash is checked as git checks it.
fn index_fault(data: &[u8]) -> Option<String> {
    let mut last = String::from("too short");
    for kind in [gix::hash::Kind::Sha1, gix::hash::Kind::Sha256] {
        let n = kind.len_in_bytes();
        if data.len() < 12 + n {
            continue;
        }
        let (body, trailer) = data.split_at(data.len() - n);
        if trailer.iter().any(|b| *b != 0) {
            let mut h = gix::hash::hasher(kind);
            h.update(body);
            match h.try_finalize() {
                Ok(id) if id.as_bytes() == trailer => {}
                _ => {
                    last = "its checksum does not match its content".into();
                    continue;
                }
            }
        }
        let options = gix::index::decode::Options {
            alloc_limit_bytes: Some(MAX_INDEX as usize),
            ..Default::default()
        };
        match gix::index::State::from_bytes(data, filetime::FileTime::zero(), kind, options) {
            Ok(_) => return None,
            Err(e) => last = e.to_string(),
        }
    }
    Some(last)
}

/// One thing found at the session's end, and what tyba did about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was found, naming the path.
    pub found: String,
    /// What tyba did (or what the person can do).
    pub done: String,
}

/// What stands at a name now, for the person.
fn describe(at: &DirFd, name: &OsStr, m: &std::io::Result<std::fs::Metadata>) -> String {
    match m {
        Ok(m) if m.file_type().is_symlink() => {
            let to = at
                .link_text(name)
                .map(|t| crate::broker::text::clean_lines(&t.to_string_lossy()))
                .unwrap_or_else(|_| "?".into());
            format!("was replaced by a symbolic link (to {to})")
        }
        Ok(m) if m.is_dir() => "was replaced by another directory".into(),
        Ok(_) => "was replaced by a file".into(),
        Err(_) => "is gone".into(),
    }
}

/// The open directories of a check: each git dir's root (when it is still the one recorded)
/// and the recorded directories found to be the very ones recorded.
struct Open {
    roots: Vec<Option<DirFd>>,
    verified: Vec<(usize, PathBuf, DirFd)>,
}

impl Open {
    /// The directory `rel` of git dir `root` when it is verified (`""`: the root).
    fn get(&self, root: usize, rel: &Path) -> Option<&DirFd> {
        if rel.as_os_str().is_empty() {
            return self.roots.get(root)?.as_ref();
        }
        self.verified
            .iter()
            .find(|(r, p, _)| *r == root && p == rel)
            .map(|(_, _, d)| d)
    }

    /// The checkout's own git dir (the last of the snapshot's `git_dirs`) when verified: it
    /// holds `HEAD`, the index and the operation state.
    fn checkout(&self) -> Option<&DirFd> {
        self.roots.last()?.as_ref()
    }
}

impl RepoSnapshot {
    /// Records the repository of `worktree` (git layout `g`) before the agent runs.
    /// `persons_checkout`: the worktree is the person's own (`--here`, `--worktree` on an
    /// existing one), so its `HEAD` is checked too; a worktree tyba made is the session's.
    /// `writable`: the roots the agent may write; only what lies under one is recorded.
    pub fn take(
        worktree: &Path,
        g: &crate::session::GitLayout,
        persons_checkout: bool,
        writable: &[PathBuf],
    ) -> RepoSnapshot {
        let under = |p: &Path| writable.iter().any(|r| p.starts_with(r));
        let mut roots = vec![g.common_dir.clone()];
        if g.git_dir != g.common_dir {
            roots.push(g.git_dir.clone());
        }
        let git_dirs: Vec<(PathBuf, Option<Id>)> = roots
            .into_iter()
            .map(|p| {
                let id = DirFd::open(&p).and_then(|d| d.id()).ok();
                (p, id)
            })
            .collect();
        let mut dirs = Vec::new();
        let mut lock_dirs = Vec::new();
        for (i, (root, id)) in git_dirs.iter().enumerate() {
            let Some(open) = id.and_then(|_| DirFd::open(root).ok()) else {
                continue;
            };
            let names = if i == 0 { COMMON_DIRS } else { WORKTREE_DIRS };
            for rel in names {
                let path = root.join(rel);
                if !under(&path) {
                    continue;
                }
                if let Ok(d) = open.open_dir(Path::new(rel)) {
                    if let Ok(id) = d.id() {
                        dirs.push(DirId {
                            root: i,
                            rel: PathBuf::from(rel),
                            id,
                        });
                    }
                }
            }
            for (rel, deep) in LOCK_DIRS {
                if under(&root.join(rel)) {
                    lock_dirs.push((i, *rel, *deep));
                }
            }
        }
        let last = git_dirs.len() - 1;
        let checkout = DirFd::open(&git_dirs[last].0).ok();
        let head = (persons_checkout && under(&git_dirs[last].0.join("HEAD")))
            .then(|| {
                checkout
                    .as_ref()?
                    .read_file(Path::new("HEAD"), MAX_HEAD)
                    .ok()
            })
            .flatten();
        let index = (persons_checkout && under(&git_dirs[last].0.join("index"))).then(|| {
            checkout
                .as_ref()
                .and_then(|c| c.meta(OsStr::new("index")).ok())
                .map(|m| FileStamp::of(&m))
        });
        let operations = OPERATION_STATE
            .iter()
            .copied()
            .filter(|n| {
                checkout
                    .as_ref()
                    .is_some_and(|c| c.meta(OsStr::new(n)).is_ok())
            })
            .collect();
        RepoSnapshot {
            git_dirs,
            worktrees: vec![worktree.to_path_buf()],
            dirs,
            lock_dirs,
            head,
            index,
            operations,
            started: coarse_now(),
        }
    }

    /// Compares the repository with the snapshot, once no process of the sandbox is left
    /// (`ended`: when the sandbox ended), repairs what can be repaired safely and returns
    /// what was found, in order.
    pub fn check(&self, ended: SystemTime) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut open = Open {
            roots: Vec::new(),
            verified: Vec::new(),
        };
        for (path, id) in &self.git_dirs {
            let now = DirFd::open(path);
            let same = match (&now, id) {
                (Ok(d), Some(id)) => d.id().ok().as_ref() == Some(id),
                _ => false,
            };
            if same {
                open.roots.push(now.ok());
                continue;
            }
            if id.is_some() {
                out.push(Finding {
                    found: format!(
                        "{} is not the git dir the session started with (moved or replaced)",
                        path.display()
                    ),
                    done: "nothing in it was checked or changed: look at it before using the repository".into(),
                });
            }
            open.roots.push(None);
        }
        // Parents before children: `logs` is restored before `logs/refs` is looked for.
        for d in &self.dirs {
            self.check_dir(d, &mut open, &mut out);
        }
        self.check_locks(ended, &open, &mut out);
        self.check_head(&open, &mut out);
        self.check_index(&open, &mut out);
        self.check_operations(&open, &mut out);
        out
    }

    /// The path of `rel` in git dir `root`, for the person.
    fn shown(&self, root: usize, rel: &Path) -> PathBuf {
        self.git_dirs[root].0.join(rel)
    }

    /// Where directory `d` (not where it belongs) is now: an entry of `places` that is a
    /// directory (not a link) with its identity.
    fn find_moved<'a>(d: &DirId, places: &[&'a DirFd]) -> Option<(&'a DirFd, OsString)> {
        places.iter().find_map(|place| {
            place.names(MAX_WALK).ok()?.into_iter().find_map(|n| {
                let m = place.meta(&n).ok()?;
                (m.is_dir() && Id::of(&m) == d.id).then_some((*place, n))
            })
        })
    }

    fn check_dir(&self, d: &DirId, open: &mut Open, out: &mut Vec<Finding>) {
        if open.roots.get(d.root).and_then(Option::as_ref).is_none() {
            return;
        }
        let shown = self.shown(d.root, &d.rel);
        let shown = shown.display();
        let (Some(parent_rel), Some(name)) = (d.rel.parent(), d.rel.file_name()) else {
            return;
        };
        let Some(parent) = open.get(d.root, parent_rel) else {
            // Its parent is not the directory recorded (reported above): nothing beneath it
            // is looked at through it. Where the original went, when it is in a git dir's
            // root, is said.
            let roots: Vec<&DirFd> = open.roots.iter().flatten().collect();
            let at = Self::find_moved(d, &roots)
                .map(|(p, n)| format!(" (the original is at {})", p.path().join(n).display()))
                .unwrap_or_default();
            out.push(Finding {
                found: format!("{shown} was not checked{at}"),
                done: format!(
                    "left as it is: {} is not the directory it was (above), and tyba follows nothing the session made",
                    self.shown(d.root, parent_rel).display()
                ),
            });
            return;
        };
        let now = parent.meta(name);
        if now.as_ref().is_ok_and(|m| m.is_dir() && Id::of(m) == d.id) {
            // The very directory, opened through no link, and still it once open.
            if let Ok(fd) = parent.open_dir(Path::new(name)) {
                if fd.id().ok() == Some(d.id) {
                    open.verified.push((d.root, d.rel.clone(), fd));
                }
            }
            return;
        }
        let what = describe(parent, name, &now);
        // Where it went: its parent, or the git dirs' roots.
        let mut places: Vec<&DirFd> = vec![parent];
        let parent_id = parent.id().ok();
        for r in open.roots.iter().flatten() {
            if r.id().ok() != parent_id {
                places.push(r);
            }
        }
        let Some((from, from_name)) = Self::find_moved(d, &places) else {
            let link = now.as_ref().is_ok_and(|m| m.file_type().is_symlink());
            out.push(Finding {
                found: format!("{shown} {what}"),
                done: if link {
                    format!(
                        "left as it is (the original is nowhere in the git dir; tyba follows and changes nothing the session put there). Your git would follow this link and write where it points: remove it before using the repository: rm {}",
                        shell_path(&self.shown(d.root, &d.rel))
                    )
                } else {
                    "left as it is (the original is nowhere in the git dir; tyba changes nothing the session put there): look at it before using the repository".into()
                },
            });
            return;
        };
        let moved = from.path().join(&from_name);
        let moved = moved.display();
        let mut done = String::new();
        if now.is_ok() {
            match parent.rename_aside(name) {
                Ok(aside) => {
                    done = format!(
                        "; what stood in its place is kept at {}",
                        parent.path().join(aside).display()
                    );
                }
                Err(e) => {
                    out.push(Finding {
                        found: format!("{shown} was moved to {moved}"),
                        done: format!(
                            "left as it is (what stands in its place could not be moved aside: {e})"
                        ),
                    });
                    return;
                }
            }
        }
        match from.rename_noreplace(&from_name, parent, name) {
            Ok(()) => {
                out.push(Finding {
                    found: format!("{shown} was moved to {moved}"),
                    done: format!("moved back{done}"),
                });
                if let Ok(fd) = parent.open_dir(Path::new(name)) {
                    if fd.id().ok() == Some(d.id) {
                        open.verified.push((d.root, d.rel.clone(), fd));
                    }
                }
            }
            Err(e) => out.push(Finding {
                found: format!("{shown} was moved to {moved}"),
                done: format!("could not be moved back ({e}){done}"),
            }),
        }
    }

    /// The lock files made between the snapshot and `ended` in the directories the agent
    /// could write, as `(directory, name, path shown)`, each directory reached from its git
    /// dir through no link.
    fn new_locks(&self, ended: SystemTime, open: &Open) -> Vec<(DirFd, OsString, PathBuf)> {
        let mut found = Vec::new();
        let mut seen = 0usize;
        let mut walked: Vec<Id> = Vec::new();
        let mut todo: Vec<(DirFd, bool)> = Vec::new();
        for (root, rel, deep) in &self.lock_dirs {
            let Some(r) = open.roots.get(*root).and_then(Option::as_ref) else {
                continue;
            };
            // A recorded directory that is not the one it was is not looked in.
            let rel = Path::new(rel);
            if self
                .dirs
                .iter()
                .any(|d| d.root == *root && d.rel == rel && open.get(*root, rel).is_none())
            {
                continue;
            }
            let d = if rel.as_os_str().is_empty() {
                r.try_clone()
            } else {
                r.open_dir(rel)
            };
            if let Ok(d) = d {
                todo.push((d, *deep));
            }
        }
        while let Some((dir, deep)) = todo.pop() {
            match dir.id() {
                Ok(id) if !walked.contains(&id) => walked.push(id),
                _ => continue,
            }
            let Ok(names) = dir.names(MAX_WALK) else {
                continue;
            };
            let mut here = Vec::new();
            for name in names {
                seen += 1;
                if seen > MAX_WALK {
                    break;
                }
                let Ok(m) = dir.meta(&name) else { continue };
                if m.is_dir() {
                    if deep {
                        if let Ok(sub) = dir.open_dir(Path::new(&name)) {
                            todo.push((sub, true));
                        }
                    }
                    continue;
                }
                let lock = name.as_encoded_bytes().ends_with(b".lock")
                    && (m.is_file() || m.file_type().is_symlink());
                if lock && made_between(&m, self.started, ended) {
                    here.push(name);
                }
            }
            for name in here {
                let Ok(d) = dir.try_clone() else { continue };
                let shown = dir.path().join(&name);
                found.push((d, name, shown));
            }
            if seen > MAX_WALK {
                break;
            }
        }
        found.sort_by(|a, b| a.2.cmp(&b.2));
        found
    }

    fn check_locks(&self, ended: SystemTime, open: &Open, out: &mut Vec<Finding>) {
        let locks = self.new_locks(ended, open);
        if locks.is_empty() {
            return;
        }
        let busy = self.someone_works_here();
        for (dir, name, p) in locks {
            let shown = p.display();
            match &busy {
                None => match dir.unlink(&name) {
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
        let roots: Vec<&PathBuf> = self
            .worktrees
            .iter()
            .chain(self.git_dirs.iter().map(|(p, _)| p))
            .collect();
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
                            .is_ok_and(|t| self.git_dirs.iter().any(|(g, _)| t.starts_with(g)))
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

    /// The checkout's index, when it changed: one git can no longer read makes every later
    /// `git status` fail (review 33's r33-02). Named, not repaired: `git reset` rebuilds it
    /// from `HEAD`, and what was staged in it is gone either way.
    fn check_index(&self, open: &Open, out: &mut Vec<Finding>) {
        let Some(was) = &self.index else {
            return;
        };
        let Some(g) = open.checkout() else {
            return;
        };
        let name = OsStr::new("index");
        let m = g.meta(name);
        let now = m.as_ref().ok().map(FileStamp::of);
        if now == *was || now.is_none() {
            // Unchanged, or removed (git reads a missing index as an empty one).
            return;
        }
        let shown = g.path().join(name);
        let fault = match m {
            Ok(m) if !m.is_file() => Some("it is not a file".to_string()),
            Ok(m) if m.len() > MAX_INDEX => return,
            _ => match g.read_file(Path::new(name), MAX_INDEX) {
                Ok(data) => index_fault(&data),
                Err(e) => Some(e.to_string()),
            },
        };
        if let Some(why) = fault {
            out.push(Finding {
                found: format!(
                    "{} is no index git can read ({why}): every git command in the checkout fails",
                    shown.display()
                ),
                done: "left as it is: `git reset` rebuilds it from HEAD (what was staged is lost)"
                    .into(),
            });
        }
    }

    fn check_head(&self, open: &Open, out: &mut Vec<Finding>) {
        let Some(was) = &self.head else {
            return;
        };
        let Some(g) = open.checkout() else {
            return;
        };
        let name = OsStr::new("HEAD");
        let path = g.path().join(name);
        let shown = path.display();
        let m = g.meta(name);
        let now = m
            .as_ref()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|_| g.read_file(Path::new(name), MAX_HEAD).ok());
        if now.as_ref() == Some(was) {
            return;
        }
        let start_branch = symref_branch(was);
        let Some(now) = now.filter(|b| head_is_valid(b)) else {
            // Git cannot read it (or it is a link): put back the start's.
            let mut done = String::new();
            if m.is_ok() {
                match g.rename_aside(name) {
                    Ok(aside) => {
                        done = format!(
                            "; the session's is kept at {}",
                            g.path().join(aside).display()
                        );
                    }
                    Err(e) => {
                        out.push(Finding {
                            found: format!("{shown} is no HEAD git can read"),
                            done: format!("left as it is (it could not be moved aside: {e})"),
                        });
                        return;
                    }
                }
            }
            let r = g.replace_file(name, was);
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
                let tip = self.branch_tip(open, &b);
                if tip.as_deref() == Some(text.as_str()) {
                    let line = format!("ref: refs/heads/{b}\n");
                    let r = g.replace_file(name, line.as_bytes());
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
    /// `packed-refs`), full hex; read from the common git dir through no link.
    fn branch_tip(&self, open: &Open, b: &str) -> Option<String> {
        let common = open.roots.first()?.as_ref()?;
        let name = format!("refs/heads/{b}");
        if let Ok(t) = common.read_file(Path::new(&name), MAX_HEAD) {
            let t = String::from_utf8_lossy(&t);
            let t = t.trim();
            return is_hex_oid(t).then(|| t.to_string());
        }
        let packed = common
            .read_file(Path::new("packed-refs"), MAX_PACKED_REFS)
            .ok()?;
        let packed = String::from_utf8_lossy(&packed);
        packed.lines().find_map(|l| {
            let (oid, r) = l.split_once(' ')?;
            (r.trim() == name && is_hex_oid(oid)).then(|| oid.to_string())
        })
    }

    fn check_operations(&self, open: &Open, out: &mut Vec<Finding>) {
        let Some(g) = open.checkout() else {
            return;
        };
        for n in OPERATION_STATE {
            if !self.operations.contains(n) && g.meta(OsStr::new(n)).is_ok() {
                out.push(Finding {
                    found: format!("{}: an operation the session began is in progress", g.path().join(n).display()),
                    done: "left so: `git status` names it; `--abort` it unless you mean to go on (your next commit or `--continue` obeys it)".into(),
                });
            }
        }
    }
}

/// Whether the entry of `m` was made between `from` and `to`: its birth time (`statx(2)`),
/// else its last status change, lies in that span.
/// The time as the filesystems stamp files (`CLOCK_REALTIME_COARSE`, clock_gettime(2): the
/// clock of the inode times, a tick behind the precise one at most), so that a file made
/// after this moment is never stamped before it. The precise clock when the coarse one is
/// unreadable.
fn coarse_now() -> SystemTime {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE)
        .ok()
        .and_then(|t| {
            let secs = u64::try_from(t.tv_sec()).ok()?;
            let nanos = u32::try_from(t.tv_nsec()).ok()?;
            SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
        })
        .unwrap_or_else(SystemTime::now)
}

fn made_between(m: &std::fs::Metadata, from: SystemTime, to: SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
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

    /// Indexes as git writes them are read (with a checksum, and with `index.skipHash`'s
    /// zeros); garbage, a truncated one and one with a byte changed are not.
    #[test]
    fn index_fault_tells_an_index_git_reads_from_one_it_does_not() {
        let t = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(t.path())
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", t.path())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(t.path().join("a"), "a").unwrap();
        git(&["add", "a"]);
        let index = std::fs::read(t.path().join(".git/index")).unwrap();
        assert_eq!(index_fault(&index), None);
        let mut changed = index.clone();
        changed[20] ^= 1;
        assert!(index_fault(&changed).is_some());
        assert!(index_fault(&index[..index.len() - 1]).is_some());
        assert!(index_fault(b"DIRC garbage").is_some());
        std::fs::write(t.path().join("b"), "b").unwrap();
        git(&["-c", "index.skipHash=true", "add", "b"]);
        let skipped = std::fs::read(t.path().join(".git/index")).unwrap();
        assert!(skipped[skipped.len() - 20..].iter().all(|b| *b == 0));
        assert_eq!(index_fault(&skipped), None);
    }
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

    /// A repository's git dir with every recorded directory, `refs/heads/main` and a
    /// reflog, and its snapshot (all of it writable, as with `--here`).
    fn repo(t: &Path) -> (PathBuf, RepoSnapshot) {
        let git = std::fs::canonicalize(t).unwrap().join(".git");
        for d in COMMON_DIRS {
            std::fs::create_dir_all(git.join(d)).unwrap();
        }
        std::fs::write(git.join("logs/HEAD"), "reflog\n").unwrap();
        std::fs::write(git.join("logs/refs/heads/main"), "reflog of main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{}\n", "a".repeat(40))).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let g = crate::session::GitLayout {
            git_dir: git.clone(),
            common_dir: git.clone(),
        };
        let s = RepoSnapshot::take(t, &g, true, std::slice::from_ref(&git));
        (git, s)
    }

    fn ino(p: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::symlink_metadata(p).unwrap())
    }

    fn asides(dir: &Path, prefix: &str) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{prefix}.tyba-"))
            })
            .collect()
    }

    #[test]
    fn a_renamed_directory_is_moved_back_and_what_replaced_it_kept_aside() {
        let t = tempfile::tempdir().unwrap();
        let (git, s) = repo(t.path());
        std::fs::rename(git.join("logs"), git.join("logs-away")).unwrap();
        std::fs::write(git.join("logs"), "planted").unwrap();
        // The aside names a session could guess are taken in advance: the repair still works.
        std::fs::create_dir(git.join("logs.tyba-0a1b2c3d4e5f")).unwrap();
        std::fs::create_dir(git.join(format!("logs.tyba-{}", std::process::id()))).unwrap();
        // Control: nothing else changed, so only this is found.
        let f = s.check(SystemTime::now());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].done.starts_with("moved back"), "{f:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("logs/HEAD")).unwrap(),
            "reflog\n"
        );
        let kept: Vec<PathBuf> = asides(&git, "logs")
            .into_iter()
            .filter(|p| p.is_file())
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), "planted");
        assert!(f[0].done.contains(&kept[0].display().to_string()), "{f:?}");
        assert!(s.check(SystemTime::now()).is_empty());
    }

    /// The plant of the review's `moves main` finding: `logs/refs/heads` moved to the git
    /// dir's root and filled with a `main` of the agent's, `logs/refs` moved out of sight and
    /// replaced by a link to `refs/` (or to another repository's `refs/`). Following the
    /// link, the repair would rename the person's `refs/heads` aside and the agent's
    /// directory in its place.
    fn plant_link_over_logs_refs(git: &Path, to: &Path) {
        std::fs::rename(git.join("logs/refs/heads"), git.join("HH")).unwrap();
        std::fs::write(git.join("HH/main"), format!("{}\n", "b".repeat(40))).unwrap();
        std::fs::create_dir(git.join("logs/keep")).unwrap();
        std::fs::rename(git.join("logs/refs"), git.join("logs/keep/refs")).unwrap();
        std::os::unix::fs::symlink(to, git.join("logs/refs")).unwrap();
    }

    #[test]
    fn a_link_in_place_of_a_recorded_directory_is_reported_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let (git, s) = repo(t.path());
        let heads = ino(&git.join("refs/heads"));
        plant_link_over_logs_refs(&git, &git.join("refs"));
        let f = s.check(SystemTime::now());
        assert_eq!(
            std::fs::read_to_string(git.join("refs/heads/main")).unwrap(),
            format!("{}\n", "a".repeat(40)),
            "{f:?}"
        );
        assert_eq!(ino(&git.join("refs/heads")), heads, "{f:?}");
        assert!(asides(&git.join("refs"), "heads").is_empty(), "{f:?}");
        assert!(git.join("HH/main").exists(), "{f:?}");
        assert!(
            f.iter().any(|x| x
                .found
                .contains("logs/refs was replaced by a symbolic link (to ")
                && x.done.starts_with("left as it is")),
            "{f:?}"
        );
        assert!(
            f.iter().any(|x| x
                .found
                .contains("logs/refs/heads was not checked (the original is at")
                && x.found.contains("/HH)")),
            "{f:?}"
        );

        // Another repository's refs (the person's bare remote): unchanged too.
        let t2 = tempfile::tempdir().unwrap();
        let (git2, s2) = repo(t2.path());
        let remote = t2.path().join("remote.git");
        std::fs::create_dir_all(remote.join("refs/heads")).unwrap();
        std::fs::write(remote.join("refs/heads/main"), "remote\n").unwrap();
        let remote_heads = ino(&remote.join("refs/heads"));
        plant_link_over_logs_refs(&git2, &remote.join("refs"));
        let f = s2.check(SystemTime::now());
        assert_eq!(ino(&remote.join("refs/heads")), remote_heads, "{f:?}");
        assert_eq!(
            std::fs::read_dir(remote.join("refs")).unwrap().count(),
            1,
            "{f:?}"
        );

        // Control: the same moves without the link are repaired (the repair acts where it
        // is safe, so it is the link that stopped it above).
        let t3 = tempfile::tempdir().unwrap();
        let (git3, s3) = repo(t3.path());
        let logs_heads = ino(&git3.join("logs/refs/heads"));
        std::fs::rename(git3.join("logs/refs/heads"), git3.join("HH")).unwrap();
        let f = s3.check(SystemTime::now());
        assert_eq!(ino(&git3.join("logs/refs/heads")), logs_heads, "{f:?}");
        assert!(f[0].done.starts_with("moved back"), "{f:?}");
    }

    #[test]
    fn locks_are_looked_for_through_no_link() {
        let t = tempfile::tempdir().unwrap();
        let (git, s) = repo(t.path());
        let other = t.path().join("other.git");
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(&other, git.join("objects/info/commit-graphs")).unwrap();
        // The person's lock in another repository, and the session's own left in the git dir,
        // both made during the session.
        std::fs::write(other.join("index.lock"), "").unwrap();
        std::fs::write(git.join("index.lock"), "").unwrap();
        std::fs::create_dir(git.join("refs/heads/topic")).unwrap();
        std::fs::write(git.join("refs/heads/topic/x.lock"), "").unwrap();
        let f = s.check(SystemTime::now());
        assert!(other.join("index.lock").exists(), "{f:?}");
        // Control: the locks inside are removed.
        assert!(!git.join("index.lock").exists(), "{f:?}");
        assert!(!git.join("refs/heads/topic/x.lock").exists(), "{f:?}");
        // A lock made before the snapshot is not the session's.
        let t2 = tempfile::tempdir().unwrap();
        let git2 = std::fs::canonicalize(t2.path()).unwrap().join(".git");
        std::fs::create_dir_all(git2.join("refs")).unwrap();
        std::fs::write(git2.join("old.lock"), "").unwrap();
        // Past the coarse clock's tick (at most 10 ms): a file of the same tick as the
        // snapshot cannot be told from one made just after it.
        std::thread::sleep(std::time::Duration::from_millis(25));
        let g2 = crate::session::GitLayout {
            git_dir: git2.clone(),
            common_dir: git2.clone(),
        };
        let s2 = RepoSnapshot::take(t2.path(), &g2, false, std::slice::from_ref(&git2));
        let f = s2.check(SystemTime::now());
        assert!(git2.join("old.lock").exists(), "{f:?}");
    }

    #[test]
    fn a_head_made_a_link_is_put_back_without_writing_through_it() {
        let t = tempfile::tempdir().unwrap();
        let (git, s) = repo(t.path());
        let victim = t.path().join("victim");
        std::fs::write(&victim, "the person's file\n").unwrap();
        std::fs::remove_file(git.join("HEAD")).unwrap();
        std::os::unix::fs::symlink(&victim, git.join("HEAD")).unwrap();
        let f = s.check(SystemTime::now());
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the person's file\n"
        );
        assert!(!std::fs::symlink_metadata(git.join("HEAD"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(git.join("HEAD")).unwrap(),
            "ref: refs/heads/main\n",
            "{f:?}"
        );
        assert_eq!(asides(&git, "HEAD").len(), 1, "{f:?}");
    }

    #[test]
    fn a_git_dir_replaced_is_not_looked_into() {
        let t = tempfile::tempdir().unwrap();
        let (git, s) = repo(t.path());
        std::fs::rename(&git, t.path().join("moved.git")).unwrap();
        std::fs::create_dir_all(git.join("refs")).unwrap();
        std::fs::write(git.join("index.lock"), "").unwrap();
        let f = s.check(SystemTime::now());
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0]
            .found
            .contains("is not the git dir the session started with"));
        assert!(git.join("index.lock").exists());
    }
}
