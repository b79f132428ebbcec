//! Mode, owner and timestamp changes (`chmod`, `chown`, `utimensat` families): Landlock has
//! no rights for them, so the filter hands them to the supervisor, which finds the object the
//! call names (race-free: it opens the object itself, through the process's root, cwd or fd),
//! checks where the object is, and performs the change on its own handle. The process's
//! pointer arguments are read once and never reused by the kernel.
//!
//! Watches (`inotify_add_watch`) are handled the same way: the path names what is watched and
//! the events report the names of files made, changed and removed there, so a watch on a
//! directory the agent cannot list would list it. The supervisor opens the object, checks it
//! lies beneath a root the agent may read, and adds the watch itself, to the agent's own
//! inotify instance (the same open file, taken with `pidfd_getfd`); elsewhere `EACCES`.

use crate::procfs::Mem;
use crate::sys;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The operation a metadata call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaOp {
    /// New mode bits.
    Chmod(u32),
    /// New owner and group (`u32::MAX`: unchanged).
    Chown(u32, u32),
    /// New access and modification times (`None`: now).
    Utimes(Option<[libc::timespec; 2]>),
}

impl MetaOp {
    /// `chmod`, `chown` or `utimes`.
    pub fn name(&self) -> &'static str {
        match self {
            MetaOp::Chmod(_) => "chmod",
            MetaOp::Chown(..) => "chown",
            MetaOp::Utimes(_) => "utimes",
        }
    }
}

/// Which object a call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An fd of the process.
    Fd(i32),
    /// A path relative to a dirfd of the process (`AT_FDCWD` for its cwd).
    Path {
        /// The dirfd argument.
        dirfd: i32,
        /// The path bytes.
        path: Vec<u8>,
        /// `AT_SYMLINK_NOFOLLOW` or an `l…` call.
        nofollow: bool,
    },
}

/// A decoded metadata call.
#[derive(Debug, Clone)]
pub struct MetaCall {
    /// The object.
    pub target: Target,
    /// The change.
    pub op: MetaOp,
}

fn ts_from_timeval(sec: i64, usec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: usec * 1000,
    }
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_le_bytes(a)
}

/// Decodes a notified metadata syscall (x86_64 argument layouts from the man pages).
///
/// # Errors
/// Memory read errors; EINVAL for an unknown call.
pub fn decode(mem: &Mem, nr: i64, a: [u64; 6]) -> io::Result<MetaCall> {
    let path = |addr: u64| mem.read_cstr(addr, libc::PATH_MAX as usize);
    let at_fdcwd = libc::AT_FDCWD;
    let p = |dirfd: i32, addr: u64, nofollow: bool| -> io::Result<Target> {
        Ok(Target::Path {
            dirfd,
            path: path(addr)?,
            nofollow,
        })
    };
    let empty_or = |dirfd: i32, addr: u64, flags: u64| -> io::Result<Target> {
        let nofollow = flags & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
        if addr == 0 {
            return Ok(Target::Fd(dirfd));
        }
        let bytes = path(addr)?;
        if bytes.is_empty() && flags & libc::AT_EMPTY_PATH as u64 != 0 {
            return Ok(Target::Fd(dirfd));
        }
        Ok(Target::Path {
            dirfd,
            path: bytes,
            nofollow,
        })
    };
    let times_ts = |addr: u64| -> io::Result<Option<[libc::timespec; 2]>> {
        if addr == 0 {
            return Ok(None);
        }
        let b = mem.read(addr, 32)?;
        Ok(Some([
            libc::timespec {
                tv_sec: i64_at(&b, 0),
                tv_nsec: i64_at(&b, 8),
            },
            libc::timespec {
                tv_sec: i64_at(&b, 16),
                tv_nsec: i64_at(&b, 24),
            },
        ]))
    };
    let times_tv = |addr: u64| -> io::Result<Option<[libc::timespec; 2]>> {
        if addr == 0 {
            return Ok(None);
        }
        let b = mem.read(addr, 32)?;
        Ok(Some([
            ts_from_timeval(i64_at(&b, 0), i64_at(&b, 8)),
            ts_from_timeval(i64_at(&b, 16), i64_at(&b, 24)),
        ]))
    };
    let fd = |x: u64| x as i32;
    let call = match nr {
        libc::SYS_chmod => MetaCall {
            target: p(at_fdcwd, a[0], false)?,
            op: MetaOp::Chmod(a[1] as u32),
        },
        libc::SYS_fchmod => MetaCall {
            target: Target::Fd(fd(a[0])),
            op: MetaOp::Chmod(a[1] as u32),
        },
        libc::SYS_fchmodat => MetaCall {
            target: p(fd(a[0]), a[1], false)?,
            op: MetaOp::Chmod(a[2] as u32),
        },
        libc::SYS_fchmodat2 => MetaCall {
            target: empty_or(fd(a[0]), a[1], a[3])?,
            op: MetaOp::Chmod(a[2] as u32),
        },
        libc::SYS_chown => MetaCall {
            target: p(at_fdcwd, a[0], false)?,
            op: MetaOp::Chown(a[1] as u32, a[2] as u32),
        },
        libc::SYS_lchown => MetaCall {
            target: p(at_fdcwd, a[0], true)?,
            op: MetaOp::Chown(a[1] as u32, a[2] as u32),
        },
        libc::SYS_fchown => MetaCall {
            target: Target::Fd(fd(a[0])),
            op: MetaOp::Chown(a[1] as u32, a[2] as u32),
        },
        libc::SYS_fchownat => MetaCall {
            target: empty_or(fd(a[0]), a[1], a[4])?,
            op: MetaOp::Chown(a[2] as u32, a[3] as u32),
        },
        libc::SYS_utime => {
            let t = if a[1] == 0 {
                None
            } else {
                let b = mem.read(a[1], 16)?;
                Some([
                    ts_from_timeval(i64_at(&b, 0), 0),
                    ts_from_timeval(i64_at(&b, 8), 0),
                ])
            };
            MetaCall {
                target: p(at_fdcwd, a[0], false)?,
                op: MetaOp::Utimes(t),
            }
        }
        libc::SYS_utimes => MetaCall {
            target: p(at_fdcwd, a[0], false)?,
            op: MetaOp::Utimes(times_tv(a[1])?),
        },
        libc::SYS_futimesat => MetaCall {
            target: empty_or(fd(a[0]), a[1], 0)?,
            op: MetaOp::Utimes(times_tv(a[2])?),
        },
        libc::SYS_utimensat => MetaCall {
            target: empty_or(fd(a[0]), a[1], a[3])?,
            op: MetaOp::Utimes(times_ts(a[2])?),
        },
        _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    Ok(call)
}

/// Opens the object `target` names in process `pid` (thread `tid`), as that process would
/// resolve it: absolute paths from its root, relative ones from its cwd or dirfd.
///
/// # Errors
/// The errno the process would most likely have got (ENOENT, ENOTDIR, ELOOP…), or EBADF.
pub fn open_target(tid: u32, pidfd: &OwnedFd, target: &Target) -> io::Result<OwnedFd> {
    open_target_in(tid, pidfd, None, target)
}

/// [`open_target`] with the process's root directory already open (`root`): every process
/// of the sandbox has the same root, since `chroot(2)`, `pivot_root(2)`, `setns(2)` and
/// `unshare(2)` are denied (`crate::bpf`).
///
/// # Errors
/// As [`open_target`].
pub fn open_target_in(
    tid: u32,
    pidfd: &OwnedFd,
    root: Option<BorrowedFd<'_>>,
    target: &Target,
) -> io::Result<OwnedFd> {
    let o_path = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    match target {
        Target::Fd(fd) => sys::pidfd_getfd(pidfd.as_fd(), *fd),
        Target::Path {
            dirfd,
            path,
            nofollow,
        } => {
            if path.is_empty() {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            }
            let flags = o_path
                | if *nofollow {
                    libc::O_NOFOLLOW as u64
                } else {
                    0
                };
            let opened: OwnedFd;
            let (base, rel, resolve): (BorrowedFd<'_>, &[u8], u64) = if path[0] == b'/' {
                let root = match root {
                    Some(r) => r,
                    None => {
                        opened = std::fs::File::open(format!("/proc/{tid}/root"))?.into();
                        opened.as_fd()
                    }
                };
                let rel = &path[path.iter().position(|&b| b != b'/').unwrap_or(path.len())..];
                (
                    root,
                    rel,
                    libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
                )
            } else if *dirfd == libc::AT_FDCWD {
                opened = std::fs::File::open(format!("/proc/{tid}/cwd"))?.into();
                (opened.as_fd(), path.as_slice(), libc::RESOLVE_NO_MAGICLINKS)
            } else {
                opened = sys::pidfd_getfd(pidfd.as_fd(), *dirfd)?;
                (opened.as_fd(), path.as_slice(), libc::RESOLVE_NO_MAGICLINKS)
            };
            let rel = if rel.is_empty() { b".".as_slice() } else { rel };
            let c = CString::new(rel).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            sys::openat2(base, &c, flags, resolve)
        }
    }
}

/// The path the kernel gives for an object the supervisor holds.
pub fn object_path(obj: &OwnedFd) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", obj.as_raw_fd()))
}

/// Whether a metadata change of `path` is within the sandbox's writable paths and outside its
/// protected ones.
pub fn path_allowed(path: &Path, writable: &[PathBuf], protected: &[PathBuf]) -> bool {
    let s = path.as_os_str().as_encoded_bytes();
    if s.ends_with(b" (deleted)") {
        return false;
    }
    writable.iter().any(|w| path.starts_with(w)) && !protected.iter().any(|p| path.starts_with(p))
}

/// Checks the change itself: no set-user-id/set-group-id bits on non-directories, owners only
/// unchanged or the sandbox's own ids, and only on objects the sandbox's user owns.
///
/// # Errors
/// EPERM with the reason.
pub fn check_op(obj: &OwnedFd, op: MetaOp, uid: u32, gid: u32) -> Result<(), (i32, String)> {
    let st =
        nix::sys::stat::fstat(obj.as_fd()).map_err(|e| (e as i32, format!("cannot stat: {e}")))?;
    if st.st_uid != uid {
        return Err((libc::EPERM, "not the owner".to_string()));
    }
    match op {
        MetaOp::Chmod(mode) => {
            let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            if !is_dir && mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                return Err((
                    libc::EPERM,
                    "set-user-id and set-group-id bits are not allowed in the sandbox".to_string(),
                ));
            }
        }
        MetaOp::Chown(u, g) => {
            if (u != u32::MAX && u != uid) || (g != u32::MAX && g != gid) {
                return Err((
                    libc::EPERM,
                    "ownership can only stay with the sandbox's user".to_string(),
                ));
            }
        }
        MetaOp::Utimes(_) => {}
    }
    Ok(())
}

/// Performs the change on the supervisor's handle.
///
/// # Errors
/// The syscall error.
pub fn perform(obj: &OwnedFd, op: MetaOp) -> io::Result<()> {
    match op {
        MetaOp::Chmod(mode) => sys::fchmod_object(obj.as_fd(), mode & 0o7777),
        MetaOp::Chown(u, g) => sys::fchown_object(obj.as_fd(), u, g),
        MetaOp::Utimes(t) => sys::utimens_object(obj.as_fd(), t),
    }
}

/// `IN_DONT_FOLLOW` (`inotify(7)`): do not follow a final symbolic link.
const IN_DONT_FOLLOW: u32 = 0x0200_0000;

/// Whether a watch on `path` may be added: it lies beneath one of `readable` or `writable`
/// (the roots the agent's Landlock domain may read), and is not a deleted object.
pub fn watch_allowed(path: &Path, readable: &[PathBuf], writable: &[PathBuf]) -> bool {
    if path.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
        return false;
    }
    readable
        .iter()
        .chain(writable)
        .any(|r| crate::sandbox::is_within(path, r))
}

/// What a notified `inotify_add_watch` comes to.
enum Watch {
    /// The watch was added: its descriptor.
    Added(i32),
    /// The object is outside every readable root: the path the kernel gives for it.
    Outside(PathBuf),
    /// The notification is gone (the process died or was interrupted).
    Gone,
}

fn add_watch(nf: &crate::notify::Notifier, n: &sys::Notif) -> io::Result<Watch> {
    let pid = crate::procfs::tgid(n.pid)?;
    let mem = Mem::open(n.pid)?;
    let path = mem.read_cstr(n.args[1], libc::PATH_MAX as usize)?;
    let mask = n.args[2] as u32;
    let nofollow = mask & IN_DONT_FOLLOW != 0;
    let pidfd = sys::pidfd_open(pid as i32)?;
    let target = Target::Path {
        dirfd: libc::AT_FDCWD,
        path,
        nofollow,
    };
    let obj = open_target(n.pid, &pidfd, &target)?;
    let inotify = sys::pidfd_getfd(pidfd.as_fd(), n.args[0] as i32)?;
    if !sys::notif_id_valid(nf.listener.as_fd(), n.id) {
        return Ok(Watch::Gone);
    }
    let real = object_path(&obj)?;
    if !watch_allowed(&real, &nf.readable, &nf.writable) {
        return Ok(Watch::Outside(real));
    }
    let st = nix::sys::stat::fstat(obj.as_fd()).map_err(io::Error::from)?;
    if nofollow && st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        // The watch would be added through `/proc/self/fd/N`, which names the link's target,
        // not the link: not done rather than done on another object.
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    use std::os::fd::AsRawFd;
    let via = CString::new(format!("/proc/self/fd/{}", obj.as_raw_fd()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    sys::inotify_add_watch(inotify.as_fd(), &via, mask & !IN_DONT_FOLLOW).map(Watch::Added)
}

/// Answers a notified `inotify_add_watch(fd, path, mask)`: added by the supervisor on the
/// object it opened itself when that object lies beneath a readable root (the watch
/// descriptor is the reply), refused with `EACCES` otherwise (logged, counted as denied; not
/// asked: a watch outside the roots can be nothing but a listing the domain forbids).
pub(crate) fn handle_watch(nf: &crate::notify::Notifier, n: sys::Notif) {
    let reply = match add_watch(nf, &n) {
        Ok(Watch::Added(wd)) => sys::Reply::Value(i64::from(wd)),
        Ok(Watch::Gone) => return,
        Ok(Watch::Outside(real)) => {
            let event = crate::notify::AuditEvent {
                kind: "watch",
                what: real.display().to_string(),
                allowed: false,
                reason: Some(
                    "refused by tyba: inotify watch outside the paths the sandbox may read"
                        .to_string(),
                ),
                inner_command: None,
                quiet: true,
            };
            let _ = nf.approver.record(&event);
            nf.control.count(crate::control::Counted::Denied);
            if let Ok(mut s) = nf.state.lock() {
                s.log.push(event);
            }
            sys::Reply::Errno(libc::EACCES)
        }
        Err(e) => sys::Reply::Errno(e.raw_os_error().unwrap_or(libc::EACCES)),
    };
    let _ = sys::notif_send(nf.listener.as_fd(), n.id, reply);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn watches_only_beneath_readable_roots() {
        let ro = vec![PathBuf::from("/usr"), PathBuf::from("/etc")];
        let rw = vec![PathBuf::from("/home/p/wt")];
        for ok in [
            "/usr",
            "/usr/lib",
            "/etc/passwd",
            "/home/p/wt",
            "/home/p/wt/src",
        ] {
            assert!(watch_allowed(Path::new(ok), &ro, &rw), "{ok}");
        }
        for no in [
            "/home/p",
            "/home/p/wt2",
            "/home/p/.ssh",
            "/tmp",
            "/",
            "/usr2",
            "/home/p/wt/gone (deleted)",
        ] {
            assert!(!watch_allowed(Path::new(no), &ro, &rw), "{no}");
        }
    }
}
