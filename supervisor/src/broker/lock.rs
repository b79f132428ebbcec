//! Which sessions are alive, decided without races (issue 17).
//!
//! Each session holds an exclusive `flock(2)` on `<socket dir>/<session>.lock` for its whole
//! life (kernel `flock(2)`: the lock belongs to the open file description and goes away when
//! the last descriptor of it is closed, so however the supervisor dies, the kernel releases
//! it). The file only ever appears under its name already locked: it is made unnamed
//! (`O_TMPFILE`), locked, then linked under its name (or, on a filesystem without
//! `O_TMPFILE`, locked under a hidden staging name and hard-linked). So a lock file nobody
//! holds is proof that its session is dead, never that it is starting.
//!
//! A listing that finds a socket nobody listens on ([`probe`]) takes that lock without
//! waiting: when it gets it, the session is dead, and its files are removed while the lock is
//! still held ([`DeadSession::clean`]); when it does not, the session is alive and nothing is
//! touched. Only the session itself ([`SessionLock::release`]) or such a proof removes a
//! session's files.

use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The lock file of session `session` in the socket directory `dir`.
pub fn lock_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!("{session}.lock"))
}

/// Where session `session` binds its socket before renaming it to its listed name
/// ([`super::paths::socket_path`]) once it listens: a listed socket that refuses a
/// connection has no listener, never one about to listen.
pub fn staging_socket_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!(".{session}.starting"))
}

fn staging_lock_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!(".{session}.lock-new"))
}

fn errno_io(e: nix::errno::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

fn lock_nb(f: File, arg: FlockArg) -> std::io::Result<Flock<File>> {
    Flock::lock(f, arg).map_err(|(_, e)| errno_io(e))
}

/// Whether `path` names the very file `f` is open on.
fn names(path: &Path, f: &File) -> bool {
    match (std::fs::symlink_metadata(path), f.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The lock a live session holds; [`SessionLock::release`] (or the supervisor's death)
/// gives it up.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
    lock: Flock<File>,
}

impl SessionLock {
    /// Makes and locks `<dir>/<session>.lock` (mode 0600), published under its name only once
    /// locked.
    ///
    /// # Errors
    /// The file cannot be made, locked or linked; `AlreadyExists` when another lock file of
    /// that session id exists (session ids are random: a second session of the same id).
    pub fn acquire(dir: &Path, session: &str) -> std::io::Result<SessionLock> {
        let path = lock_path(dir, session);
        let tmp = nix::fcntl::open(
            dir,
            OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        );
        let lock = match tmp {
            Ok(fd) => {
                let lock = lock_nb(File::from(fd), FlockArg::LockExclusiveNonblock)?;
                let me = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&*lock));
                nix::unistd::linkat(
                    nix::fcntl::AT_FDCWD,
                    me.as_str(),
                    nix::fcntl::AT_FDCWD,
                    &path,
                    nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
                )
                .map_err(errno_io)?;
                lock
            }
            Err(_) => {
                // No O_TMPFILE here: lock under a name no listing looks at, then link.
                let staging = staging_lock_path(dir, session);
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&staging)?;
                let locked = lock_nb(f, FlockArg::LockExclusiveNonblock).and_then(|l| {
                    std::fs::hard_link(&staging, &path)?;
                    Ok(l)
                });
                let _ = std::fs::remove_file(&staging);
                locked?
            }
        };
        Ok(SessionLock { path, lock })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Ends the session's claim: removes the lock file, then lets the lock go. Call it after
    /// the session's socket is removed.
    pub fn release(self) {
        if names(&self.path, &self.lock) {
            let _ = std::fs::remove_file(&self.path);
        }
        drop(self.lock);
    }
}

/// What a session's lock says about it.
#[derive(Debug)]
pub enum Probe {
    /// Its supervisor holds the lock: starting, running or ending. Touch nothing.
    Alive,
    /// Nobody holds it: the session is dead. Its files may be removed
    /// ([`DeadSession::clean`]).
    Dead(DeadSession),
    /// There is no lock file: the session ended (it removes its lock file last), or the
    /// files are those of a tyba that took no lock.
    NoLock,
}

/// A session proved dead: its lock, now held by the caller.
#[derive(Debug)]
pub struct DeadSession {
    dir: PathBuf,
    session: String,
    lock: Flock<File>,
}

impl DeadSession {
    /// Removes the dead session's socket, staging socket and lock file (the lock last, while
    /// still held, so no other listing can take it meanwhile).
    pub fn clean(self) {
        let _ = std::fs::remove_file(super::paths::socket_path(&self.dir, &self.session));
        let _ = std::fs::remove_file(staging_socket_path(&self.dir, &self.session));
        let path = lock_path(&self.dir, &self.session);
        if names(&path, &self.lock) {
            let _ = std::fs::remove_file(&path);
        }
        drop(self.lock);
    }
}

/// Checks session `session`'s lock in `dir` without waiting and without ever holding it when
/// the session is alive.
pub fn probe(dir: &Path, session: &str) -> Probe {
    let path = lock_path(dir, session);
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nofollow()
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Probe::NoLock,
        // Unreadable (not ours, a symlink): nothing is proved.
        Err(_) => return Probe::Alive,
    };
    match lock_nb(f, FlockArg::LockExclusiveNonblock) {
        Ok(lock) if names(&path, &lock) => Probe::Dead(DeadSession {
            dir: dir.to_path_buf(),
            session: session.to_string(),
            lock,
        }),
        // Removed meanwhile by the session itself or another listing.
        Ok(_) if std::fs::symlink_metadata(&path).is_err() => Probe::NoLock,
        _ => Probe::Alive,
    }
}

/// `O_NOFOLLOW | O_CLOEXEC` on an [`std::fs::OpenOptions`].
trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
    }
}

/// The ids of the sessions that have a lock file in `dir`.
pub fn locked_ids(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".lock")?;
            (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
                .then(|| id.to_string())
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_alive_and_a_released_one_gone() {
        let t = tempfile::tempdir().unwrap();
        let l = SessionLock::acquire(t.path(), "abc123").unwrap();
        assert!(l.path().exists());
        assert!(matches!(probe(t.path(), "abc123"), Probe::Alive));
        // A second session of the same id cannot take it.
        assert!(SessionLock::acquire(t.path(), "abc123").is_err());
        assert_eq!(locked_ids(t.path()), ["abc123"]);
        l.release();
        assert!(matches!(probe(t.path(), "abc123"), Probe::NoLock));
        assert!(std::fs::read_dir(t.path()).unwrap().next().is_none());
    }

    #[test]
    fn a_lock_left_by_a_dead_holder_is_proved_dead_and_cleaned() {
        let t = tempfile::tempdir().unwrap();
        let l = SessionLock::acquire(t.path(), "dead1").unwrap();
        let sock = super::super::paths::socket_path(t.path(), "dead1");
        drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
        // The holder dies without releasing: the kernel drops the lock, the files stay.
        drop(l);
        let Probe::Dead(d) = probe(t.path(), "dead1") else {
            panic!("not proved dead");
        };
        // While one listing holds the proof, another sees the lock taken.
        assert!(matches!(probe(t.path(), "dead1"), Probe::Alive));
        d.clean();
        assert!(std::fs::read_dir(t.path()).unwrap().next().is_none());
    }
}
