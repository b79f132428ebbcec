//! What a killed session leaves behind, found and removed by a later one.
//!
//! A session's supervisor removes its own files at the end: the session's temp dir
//! (`tyba-UID-ID` in [`session_base`], the agent's `TMPDIR`) and its private copies beside it on a memory
//! filesystem (`tyba-UID-ID.state`, the agents' state layers; `tyba-UID-ID.profile`, the login
//! profile copy; [`crate::state_layer::beside_session`]). A supervisor killed with `SIGKILL`
//! (or a machine that lost power) cannot, and on a memory filesystem the copies hold memory
//! until the next boot. So each supervisor holds a **liveness lock** for its whole run: an
//! exclusive `flock(2)` on `tyba-UID-ID.live` beside its temp dir, taken before the temp dir
//! is made (the agent may write in its temp dir, not beside it; the temp dir's parent is
//! sticky, so no other user can remove or replace the file). A later session sweeps, off its
//! own start's path, every such entry of the same user whose lock no process holds.
//!
//! What is removed, and only that: an entry directly in one of those directories, named
//! `tyba-<our uid>-<12 hex digits>` with no suffix, `.state`, `.profile` or `.live`, owned by
//! the effective user, not a symbolic link, whose session's lock file (in the temp dir;
//! a regular file of the user's, nothing another user put under its name)
//! exists and can be locked (its supervisor is gone). A session with no lock file (one started by a tyba from before
//! the lock, or one between its start and its lock) is left alone unless its entry was last
//! changed more than [`NO_LOCK_AGE`] ago. The directories are removed as their owner with
//! [`crate::sandbox::remove_tree`] (no symbolic link followed). An error leaves the entry;
//! the sweep never fails a session.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The suffixes of a session's entries beside its temp dir ([`crate::state_layer`]).
const SUFFIXES: [&str; 4] = ["", ".state", ".profile", LIVE];
/// The suffix of a session's liveness lock, beside its temp dir.
const LIVE: &str = ".live";
/// How old an entry with no lock file must be to be taken for a dead session's.
pub const NO_LOCK_AGE: Duration = Duration::from_secs(24 * 3600);

/// A session's liveness lock, held until dropped (the session's end), which removes the file.
/// The file stays if the supervisor is killed: the sweep of a later session removes it.
#[derive(Debug)]
pub struct LiveLock {
    path: PathBuf,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl LiveLock {
    /// Takes the lock of session `id` (`[0-9a-f]{12}`) in `tmp` (the directory the session's
    /// temp dir is made in): `tmp/tyba-<uid>-<id>.live`, made new (mode 0600, never over an
    /// existing name). `None` when it cannot be made or taken: the session then runs without
    /// one, and a later sweep leaves its files alone until they are [`NO_LOCK_AGE`] old.
    pub fn take(tmp: &Path, id: &str) -> Option<LiveLock> {
        use std::os::unix::fs::OpenOptionsExt;
        if !is_session_id(id) {
            return None;
        }
        let uid = nix::unistd::geteuid().as_raw();
        let path = tmp.join(format!("tyba-{uid}-{id}{LIVE}"));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .ok()?;
        let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()?;
        Some(LiveLock { path, _lock: lock })
    }

    /// Ends the session's lock: the same as dropping it, said where the session ends.
    pub fn release(self) {}
}

impl Drop for LiveLock {
    /// Removes the lock file, then lets the lock go (the fields drop after this): on every
    /// way out of a session but `SIGKILL`.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `s` is a session id as tyba makes them (12 lowercase hex digits).
fn is_session_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The session id of `name` when it is one of this user's session entries
/// (`tyba-<uid>-<id><suffix>`, a suffix of [`SUFFIXES`]).
fn entry_session(name: &str, uid: u32) -> Option<&str> {
    let rest = name.strip_prefix(&format!("tyba-{uid}-"))?;
    let id = rest.get(..12)?;
    let suffix = rest.get(12..)?;
    (is_session_id(id) && SUFFIXES.contains(&suffix)).then_some(id)
}

/// Where a session's temp dir (`tyba-UID-ID`, the agent's `TMPDIR`) and its liveness lock
/// are made: `$TMPDIR` when the person set it (their choice of disk or memory is kept); else
/// the system temp dir (`std::env::temp_dir`, `/tmp`) when it is a memory filesystem; else
/// the shared memory filesystem (`/dev/shm`, [`crate::broker::paths::shared_memory_fs`]) when
/// it lets programs run from it (not mounted `noexec`: builds and tests run what they put in
/// `TMPDIR`); else the system temp dir. A directory made and removed on a disk costs an inode
/// each launch, which ext4 without a journal allocates only after skipping every inode freed
/// in the last minute (`fs/ext4/ialloc.c`, `recently_deleted`): up to a millisecond of CPU on
/// a disk that builds churn, against microseconds on tmpfs (docs/performance-run.md, run 7).
/// What the agent writes there is held in memory, as on the distributions whose `/tmp` is a
/// tmpfs; `TMPDIR=/some/disk/dir tyba run …` keeps it on that disk.
pub fn session_base() -> PathBuf {
    let tmp = std::env::temp_dir();
    let set = std::env::var_os("TMPDIR").is_some_and(|v| !v.is_empty());
    if set || crate::broker::paths::is_memory_fs(&tmp) {
        return tmp;
    }
    let runs = |p: &Path| {
        nix::sys::statvfs::statvfs(p)
            .is_ok_and(|v| !v.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC))
    };
    match crate::broker::paths::shared_memory_fs() {
        Some(shm) if runs(shm) => shm.to_path_buf(),
        _ => tmp,
    }
}

/// Whether the supervisor of session `id` is gone: its lock file, in one of `dirs` (where
/// sessions' temp dirs are made), can be locked, or (with no lock file in any) the entry,
/// last changed at `changed`, is older than [`NO_LOCK_AGE`].
///
/// Only a lock file [`LiveLock::take`] could have made counts: a regular file of the
/// effective user (no other user can make one). The directories are shared (`/tmp`, `/dev/shm`), so
/// another user can put anything under a session's name there before the sweep looks: a file
/// of theirs that anyone can lock (taken for proof that a running session is gone, whose
/// files would be removed under its agent), or a named pipe (whose `open(2)` would wait for a
/// writer forever). Such an entry is passed over (looked at with `lstat(2)` before it is
/// opened, then opened with `O_NONBLOCK`, never followed, and checked again with `fstat(2)`
/// before any lock is tried), and the session's own lock is looked for in the other
/// directories; so is a socket (whose `open` fails with `ENXIO`) and a file another user holds
/// a lease on (whose `open` fails with `EWOULDBLOCK`), which would otherwise keep a dead
/// session's files for ever (review r37).
fn session_gone(dirs: &[PathBuf], uid: u32, id: &str, changed: Option<SystemTime>) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let ours = |m: &std::fs::Metadata| m.is_file() && m.uid() == uid;
    for dir in dirs {
        let path = dir.join(format!("tyba-{uid}-{id}{LIVE}"));
        // Looked at first: what is not the user's regular file (a socket or a FIFO, whose
        // `open` fails or waits, a file another user may hold a lease on, a link, a
        // directory) is not a lock of the session's, whatever opening it would say.
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| ours(&m)) {
            continue;
        }
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
        {
            // Checked again as opened: the name may have been replaced meanwhile. A hard link
            // another user made to the lock (where `fs.protected_hardlinks` allows it) is the
            // lock itself, and answers truly.
            Ok(f) if f.metadata().is_ok_and(|m| ours(&m)) => {
                return nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
                    .is_ok();
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP)) => {}
            // Another failure on the user's own file (no descriptor left): not known gone.
            Err(_) => return false,
        }
    }
    changed
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age > NO_LOCK_AGE)
}

/// Removes what dead sessions of the effective user left in `tmp` (where their temp dirs and
/// liveness locks are) and `others` (the memory filesystem of
/// [`crate::state_layer::beside_session`], and where other sessions made their temp dirs),
/// never the entries of session `own`; the lock files last. Returns the paths removed.
pub fn sweep_in(tmp: &Path, others: &[PathBuf], own: &str) -> Vec<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = Vec::new();
    let mut locks = Vec::new();
    let dirs: Vec<PathBuf> = std::iter::once(tmp.to_path_buf())
        .chain(others.iter().cloned())
        .collect();
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| entry_session(n, uid)) else {
                continue;
            };
            if id == own {
                continue;
            }
            let path = e.path();
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if m.file_type().is_symlink() || m.uid() != uid {
                continue;
            }
            let changed = SystemTime::UNIX_EPOCH
                .checked_add(Duration::from_secs(u64::try_from(m.ctime()).unwrap_or(0)));
            if name.to_str().is_some_and(|n| n.ends_with(LIVE)) {
                locks.push((id.to_string(), path));
                continue;
            }
            if !session_gone(&dirs, uid, id, changed) {
                continue;
            }
            let ok = if m.is_dir() {
                crate::sandbox::remove_tree(&path).is_ok()
            } else {
                std::fs::remove_file(&path).is_ok()
            };
            if ok {
                removed.push(path);
            }
        }
    }
    for (id, path) in locks {
        if session_gone(&dirs, uid, &id, None) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// [`sweep_in`] over the directories tyba puts a session's files in: the temp dir
/// (`std::env::temp_dir`), [`session_base`] and the memory filesystem the copies go to, each
/// once.
pub fn sweep(own: &str) -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let mut others: Vec<PathBuf> = Vec::new();
    for d in [Some(session_base()), crate::state_layer::memory_dir()]
        .into_iter()
        .flatten()
    {
        if d != tmp && !others.contains(&d) {
            others.push(d);
        }
    }
    sweep_in(&tmp, &others, own)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn only_this_users_session_entries_are_recognised() {
        assert_eq!(
            entry_session("tyba-1000-0a1b2c3d4e5f", 1000),
            Some("0a1b2c3d4e5f")
        );
        assert_eq!(
            entry_session("tyba-1000-0a1b2c3d4e5f.state", 1000),
            Some("0a1b2c3d4e5f")
        );
        assert_eq!(
            entry_session("tyba-1000-0a1b2c3d4e5f.profile", 1000),
            Some("0a1b2c3d4e5f")
        );
        assert_eq!(entry_session("tyba-1001-0a1b2c3d4e5f", 1000), None);
        assert_eq!(entry_session("tyba-1000-0a1b2c3d4e5f.other", 1000), None);
        assert_eq!(entry_session("tyba-1000-0A1B2C3D4E5F", 1000), None);
        assert_eq!(entry_session("tyba-1000-0a1b2c3d4e", 1000), None);
        assert_eq!(entry_session("tyba-1000-", 1000), None);
        assert_eq!(entry_session("fuse16-tyba-release", 1000), None);
    }

    #[test]
    fn only_dead_sessions_files_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("tmp");
        let shm = root.path().join("shm");
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::create_dir_all(&shm).unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let name = |id: &str, suffix: &str| format!("tyba-{uid}-{id}{suffix}");
        let (dead, live, nolock, own) = (
            "0000000000d1",
            "0000000000a1",
            "0000000000f1",
            "0000000000e1",
        );
        for id in [dead, live, nolock, own] {
            std::fs::create_dir(tmp.join(name(id, ""))).unwrap();
            std::fs::create_dir_all(tmp.join(name(id, "")).join("sub/deeper")).unwrap();
            std::fs::create_dir(shm.join(name(id, ".state"))).unwrap();
            std::fs::write(shm.join(name(id, ".profile")), "PATH=x\n").unwrap();
        }
        // The dead session's lock file is left, held by nobody (what a `SIGKILL` leaves); the
        // live one's is held.
        std::fs::write(tmp.join(name(dead, LIVE)), "").unwrap();
        let held = LiveLock::take(&tmp, live).unwrap();
        let _own = LiveLock::take(&tmp, own).unwrap();
        // A symbolic link with a session's name, to a directory of the dead session's kind.
        let victim = root.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, shm.join(name(dead, ""))).unwrap();
        // Another user's name and a name that only looks like one.
        std::fs::create_dir(tmp.join(format!("tyba-{}-{dead}", uid + 1))).unwrap();
        std::fs::create_dir(tmp.join(name(dead, ".kept"))).unwrap();

        let removed = sweep_in(&tmp, std::slice::from_ref(&shm), own);

        for p in [
            tmp.join(name(dead, "")),
            shm.join(name(dead, ".state")),
            shm.join(name(dead, ".profile")),
            tmp.join(name(dead, LIVE)),
        ] {
            assert!(!p.exists(), "{} left", p.display());
            assert!(removed.contains(&p), "{} not reported", p.display());
        }
        for id in [live, nolock, own] {
            assert!(
                tmp.join(name(id, "")).join("sub/deeper").is_dir(),
                "{id} swept"
            );
            assert!(shm.join(name(id, ".state")).is_dir(), "{id} swept");
            assert!(shm.join(name(id, ".profile")).is_file(), "{id} swept");
        }
        assert!(tmp.join(name(live, LIVE)).exists());
        assert!(victim.join("keep").exists(), "a link was followed");
        assert!(std::fs::symlink_metadata(shm.join(name(dead, ""))).is_ok());
        assert!(tmp.join(format!("tyba-{}-{dead}", uid + 1)).exists());
        assert!(tmp.join(name(dead, ".kept")).exists());

        // Control: once its supervisor is gone, the live session's files go too.
        held.release();
        assert!(
            !tmp.join(name(live, LIVE)).exists(),
            "an ended session keeps no lock file"
        );
        std::fs::write(tmp.join(name(live, LIVE)), "").unwrap();
        sweep_in(&tmp, std::slice::from_ref(&shm), own);
        assert!(!tmp.join(name(live, "")).exists());
        assert!(!shm.join(name(live, ".state")).exists());
    }

    /// Another user puts entries under a running session's lock name in the first directory
    /// the sweep looks in (reviews r36-02, r36-03, r37): a named pipe, a file anyone can lock
    /// (of another user when the tests run as root, who can make one), a link to a free lock,
    /// a socket, a directory. None counts as the session's lock: the session's own, held in
    /// the second directory, keeps its files, and the look does not wait. Control: with its
    /// own lock free, the session is taken for gone past each of the same entries (none keeps
    /// a dead session's files for ever).
    #[test]
    fn entries_planted_under_a_sessions_lock_name_are_not_its_lock() {
        let root = tempfile::tempdir().unwrap();
        let (tmp, shm) = (root.path().join("tmp"), root.path().join("shm"));
        std::fs::create_dir(&tmp).unwrap();
        std::fs::create_dir(&shm).unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let id = "0000000000b2";
        let lock_name = format!("tyba-{uid}-{id}{LIVE}");
        let dirs = vec![tmp.clone(), shm.clone()];
        let look = |dirs: Vec<PathBuf>| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(session_gone(&dirs, uid, id, None));
            });
            rx.recv_timeout(Duration::from_secs(5))
                .expect("the look at a session's lock waited")
        };
        let held = LiveLock::take(&shm, id).unwrap();
        let free = root.path().join("free");
        std::fs::write(&free, "").unwrap();
        let planted = tmp.join(&lock_name);
        let mut kinds = vec!["fifo", "link", "socket", "directory"];
        if uid == 0 {
            kinds.push("another user's file");
        }
        let plant = |kind: &str| {
            let _ = std::fs::remove_file(&planted);
            let _ = std::fs::remove_dir(&planted);
            match kind {
                "fifo" => {
                    nix::unistd::mkfifo(&planted, nix::sys::stat::Mode::from_bits_truncate(0o666))
                        .unwrap()
                }
                "link" => std::os::unix::fs::symlink(&free, &planted).unwrap(),
                "socket" => drop(std::os::unix::net::UnixListener::bind(&planted).unwrap()),
                "directory" => std::fs::create_dir(&planted).unwrap(),
                _ => {
                    std::fs::write(&planted, "").unwrap();
                    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
                    std::fs::set_permissions(
                        &planted,
                        std::os::unix::fs::PermissionsExt::from_mode(0o666),
                    )
                    .unwrap();
                }
            }
        };
        for kind in &kinds {
            plant(kind);
            assert!(
                !look(dirs.clone()),
                "{kind}: a running session taken for gone"
            );
        }
        // Control: the session's own lock free, each entry in the way: a session that ended
        // is found gone past it, and its files can be swept.
        drop(held);
        std::fs::write(shm.join(&lock_name), "").unwrap();
        for kind in &kinds {
            plant(kind);
            assert!(
                look(dirs.clone()),
                "{kind}: a session whose lock is free is gone"
            );
        }
    }
}
