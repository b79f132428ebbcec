//! Every `unsafe` of the crate lives here: thin wrappers over the syscalls the supervisor needs
//! and that neither `nix` nor `landlock` expose safely. Each wrapper takes and returns owned or
//! borrowed file descriptors, never bare integers, except where the kernel API names a number in
//! *another* process (a target fd in the sandboxed child).
//!
//! Kernel documents followed: `seccomp(2)`, `seccomp_unotify(2)`, `pidfd_open(2)`,
//! `pidfd_getfd(2)`, `openat2(2)`, `close_range(2)`, `landlock_create_ruleset(2)`, `fork(2)`.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// One classic BPF instruction (`struct sock_filter`, `linux/filter.h`).
pub type SockFilter = libc::sock_filter;

fn cvt(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_int(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The Landlock ABI version of the running kernel (`landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`), or 0 when Landlock is absent or disabled.
pub fn landlock_abi() -> i32 {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the kernel reads no
    // memory and returns the ABI number or an error.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, /* LANDLOCK_CREATE_RULESET_VERSION */
        )
    };
    if r < 0 {
        0
    } else {
        i32::try_from(r).unwrap_or(0)
    }
}

/// Caps glibc's malloc at `arenas` arenas (`mallopt(M_ARENA_MAX, arenas)`, mallopt(3)); `false`
/// when glibc refused. Without a cap, each new thread that allocates gets an arena of its own,
/// up to eight per CPU: a 128 MiB reservation mapped, trimmed and made writable, then faulted
/// in page by page. Called before the process starts a thread (mallopt(3) changes no arena
/// already made).
#[cfg(target_env = "gnu")]
pub fn limit_malloc_arenas(arenas: i32) -> bool {
    // SAFETY: mallopt takes two integers and changes a setting of glibc's allocator; it
    // reads or writes no memory of the caller's.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

/// Without glibc's allocator there is no arena setting: `false`.
#[cfg(not(target_env = "gnu"))]
pub fn limit_malloc_arenas(_arenas: i32) -> bool {
    false
}

/// Sets `PR_SET_NO_NEW_PRIVS` on the calling thread (`prctl(2)`).
///
/// # Errors
/// The prctl error.
pub fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    cvt_int(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

/// Installs a seccomp filter on the calling thread and returns its user-notification listener
/// (`seccomp(SECCOMP_SET_MODE_FILTER, flags | SECCOMP_FILTER_FLAG_NEW_LISTENER, prog)`).
/// `no_new_privs` must already be set.
///
/// # Errors
/// The seccomp error (EINVAL for an unknown flag or a malformed program, EFAULT, ENOMEM).
pub fn install_filter_with_listener(
    prog: &[SockFilter],
    flags: libc::c_ulong,
) -> io::Result<OwnedFd> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, which outlives the call; the kernel copies the program.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags | libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    })?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: with NEW_LISTENER the kernel returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A notification read from the listener (`struct seccomp_notif`).
#[derive(Debug, Clone, Copy)]
pub struct Notif {
    /// Cookie to answer with.
    pub id: u64,
    /// Thread id of the caller, in the supervisor's PID namespace.
    pub pid: u32,
    /// System call number (x86_64 table).
    pub nr: i32,
    /// Audit architecture of the call.
    pub arch: u32,
    /// The six raw arguments.
    pub args: [u64; 6],
}

/// Waits for the next notification (`SECCOMP_IOCTL_NOTIF_RECV`). Blocks.
///
/// # Errors
/// ENOENT when the target died before the read; EINTR; other ioctl errors.
pub fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<Notif> {
    // SAFETY: seccomp_notif is plain data; all-zero is a valid value and the kernel requires it.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one `seccomp_notif` into `n`, which is large enough.
    cvt_int(unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) })?;
    Ok(Notif {
        id: n.id,
        pid: n.pid,
        nr: n.data.nr,
        arch: n.data.arch,
        args: n.data.args,
    })
}

/// Whether the listener reports `POLLHUP`: its filter has no users left, so no notification
/// can come any more and `SECCOMP_IOCTL_NOTIF_RECV` answers ENOENT at once
/// (`seccomp_notify_poll` and `recv_wait_event` in kernel/seccomp.c). A poll that fails other
/// than by a signal counts as hung up: the listener itself is unusable.
pub fn notif_listener_hung_up(listener: BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(listener, PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(_) => fds[0].revents().is_none_or(|r| {
            r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
        }),
        Err(nix::errno::Errno::EINTR) => false,
        Err(_) => true,
    }
}

/// Whether the notification is still pending (`SECCOMP_IOCTL_NOTIF_ID_VALID`): the target has
/// not died nor been interrupted, so memory read from it belongs to the call being judged.
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from `&id`.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

/// How to answer a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Let the call run in the kernel (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Only where another
    /// kernel mechanism (Landlock, the namespaces) backs the decision.
    Continue,
    /// Fail with this errno.
    Errno(i32),
    /// Pretend the call returned this value (the supervisor did the work).
    Value(i64),
}

/// Answers a notification (`SECCOMP_IOCTL_NOTIF_SEND`).
///
/// # Errors
/// ENOENT when the target died or was interrupted meanwhile.
pub fn notif_send(listener: BorrowedFd<'_>, id: u64, reply: Reply) -> io::Result<()> {
    let mut r = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match reply {
        Reply::Continue => r.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        Reply::Errno(e) => r.error = -e,
        Reply::Value(v) => r.val = v,
    }
    // SAFETY: the ioctl reads one `seccomp_notif_resp` from `&r`.
    cvt_int(unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &r) })
        .map(drop)
}

/// Switches the listener to synchronous wake-up (`SECCOMP_IOCTL_NOTIF_SET_FLAGS` with
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, passed **by value**: a pointer gives EINVAL).
///
/// # Errors
/// EINVAL on kernels before 6.6.
pub fn notif_set_sync_wakeup(listener: BorrowedFd<'_>) -> io::Result<()> {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    // SAFETY: this ioctl takes its flag argument by value and reads no memory.
    cvt_int(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    })
    .map(drop)
}

/// Installs `src` in the notifying process as fd `target_fd` (replacing what was there), and
/// returns the number it got (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SETFD`).
///
/// # Errors
/// ENOENT when the notification is gone; EBADF/EMFILE.
pub fn notif_addfd_setfd(
    listener: BorrowedFd<'_>,
    id: u64,
    src: BorrowedFd<'_>,
    target_fd: u32,
    cloexec: bool,
) -> io::Result<i32> {
    let a = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SETFD as u32,
        srcfd: src.as_raw_fd() as u32,
        newfd: target_fd,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one `seccomp_notif_addfd` from `&a`.
    cvt_int(unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD, &a) })
}

/// Installs `src` in the notifying process at its lowest free descriptor number, which it
/// returns (`SECCOMP_IOCTL_NOTIF_ADDFD` without `SECCOMP_ADDFD_FLAG_SETFD`;
/// `seccomp_unotify(2)`), close-on-exec when `cloexec`.
///
/// # Errors
/// ENOENT when the notification is gone; EBADF/EMFILE.
pub fn notif_addfd(
    listener: BorrowedFd<'_>,
    id: u64,
    src: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<i32> {
    let a = libc::seccomp_notif_addfd {
        id,
        flags: 0,
        srcfd: src.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads one `seccomp_notif_addfd` from `&a`.
    cvt_int(unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ADDFD, &a) })
}

/// A pidfd for `pid` (`pidfd_open(2)`); `pid` must be a thread-group leader.
///
/// # Errors
/// ESRCH when the process is gone.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })?;
    // SAFETY: the kernel returned a fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the process of `pidfd` has exited: a pidfd is readable once it has
/// (`pidfd_open(2)`), asked with `poll(2)` and no wait. A failed poll counts as exited.
pub fn pidfd_exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// What `PIDFD_GET_INFO` reports of a process (the `struct pidfd_info` of
/// `include/uapi/linux/pidfd.h`, Linux ≥ 6.13), in the caller's PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidfdInfo {
    /// Thread-group id.
    pub tgid: u32,
    /// Parent's thread-group id.
    pub ppid: u32,
}

/// The kernel's `struct pidfd_info`, first version (64 bytes, `PIDFD_INFO_SIZE_VER0`; the
/// kernel dispatches on the request's number and copies what fits the size it encodes).
#[repr(C)]
struct RawPidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ids: [u32; 8],
    exit_code: i32,
}

/// `PIDFD_GET_INFO`: `_IOWR(PIDFS_IOCTL_MAGIC = 0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<RawPidfdInfo>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;
/// `PIDFD_INFO_PID`: ask for the pid, tgid and ppid fields.
const PIDFD_INFO_PID: u64 = 1;

/// The thread-group id and parent of the process behind `pidfd` (`ioctl(PIDFD_GET_INFO)`,
/// `pidfd_open(2)`, Linux ≥ 6.13): one call, no `/proc` lookup.
///
/// # Errors
/// ESRCH when the process has exited; ENOTTY or EINVAL on kernels without the ioctl.
pub fn pidfd_get_info(pidfd: BorrowedFd<'_>) -> io::Result<PidfdInfo> {
    let mut info = RawPidfdInfo {
        mask: PIDFD_INFO_PID,
        cgroupid: 0,
        pid: 0,
        tgid: 0,
        ppid: 0,
        ids: [0; 8],
        exit_code: 0,
    };
    // SAFETY: the ioctl reads and writes one `struct pidfd_info`, whose size is encoded in the
    // request number and is the size of `info`.
    cvt_int(unsafe { libc::ioctl(pidfd.as_raw_fd(), PIDFD_GET_INFO, &mut info) })?;
    if info.mask & PIDFD_INFO_PID == 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(PidfdInfo {
        tgid: info.tgid,
        ppid: info.ppid,
    })
}

/// Sends `sig` to the process behind `pidfd` (`pidfd_send_signal(2)`): unlike `kill(2)` it
/// cannot reach another process that reused the pid.
///
/// # Errors
/// ESRCH when the process has exited; EPERM; EINVAL for a bad signal.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: integer arguments and a null `siginfo` pointer, which the kernel reads as "the
    // default siginfo of kill(2)".
    cvt(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    })
    .map(|_| ())
}

/// Writes `buf` at the current position of `fd` without waiting (`pwritev2(2)` with offset
/// -1 and `RWF_NOWAIT`): `EAGAIN` when it would wait (a full pipe), `EOPNOTSUPP` where the
/// file does not take the flag (a terminal). The open file description's own flags, which
/// another process may share, are left as they are.
///
/// # Errors
/// The syscall error.
pub fn write_nowait(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, which outlives the call and is only read by it.
    let n = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A duplicate, in this process, of fd number `target_fd` of the process behind `pidfd`
/// (`pidfd_getfd(2)`; needs ptrace-attach rights over it, which the supervisor has as the owner
/// of the sandbox's user namespace).
///
/// # Errors
/// EBADF when the target has no such fd; EPERM; ESRCH.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target_fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0u32) })?;
    // SAFETY: the kernel returned a fresh fd installed with O_CLOEXEC.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Closes every fd from `first` up (`close_range(first, ~0U, 0)`); used in the child before
/// exec.
pub fn close_fds_from(first: u32) {
    // SAFETY: closing fds this process owns; no Rust object in the child refers to them after
    // this point (the child only execs or exits).
    unsafe {
        libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32);
    }
}

/// Closes every fd from `first` up except `keep` (`close_range(2)` around it); for stage 2,
/// which keeps its link to the supervisor.
pub fn close_fds_from_except(first: u32, keep: BorrowedFd<'_>) {
    let keep = keep.as_raw_fd() as u32;
    // SAFETY: as for `close_fds_from`: the caller's only live fd object at or above `first`
    // is `keep`, which stays open.
    unsafe {
        if keep > first {
            libc::syscall(libc::SYS_close_range, first, keep - 1, 0u32);
        }
        let after = if keep >= first { keep + 1 } else { first };
        libc::syscall(libc::SYS_close_range, after, u32::MAX, 0u32);
    }
}

/// Result of [`fork`].
#[derive(Debug)]
pub enum Forked {
    /// In the parent, with the child's pid.
    Parent(i32),
    /// In the child.
    Child,
}

/// `fork(2)`.
///
/// # Safety
/// The child has one thread, and any lock another thread of the parent held at the fork
/// stays held in the child forever. Until it execs or exits, the child must therefore take
/// no lock another thread may hold: no `std::io::stdout`/`stderr`, no `std::env`, no
/// `Mutex` shared with other threads, no tokio. glibc's `malloc` is safe (its fork handlers
/// take and reset the arena locks), and so are system calls and files of the child's own.
/// (`fork(2)`, `signal-safety(7)`; glibc `malloc/arena.c` fork handlers.)
///
/// # Errors
/// EAGAIN, ENOMEM.
pub unsafe fn fork() -> io::Result<Forked> {
    // SAFETY: the caller guarantees the child takes no lock another thread may hold.
    let r = cvt_int(unsafe { libc::fork() })?;
    Ok(if r == 0 {
        Forked::Child
    } else {
        Forked::Parent(r)
    })
}

/// Runs `work` in a process of its own that outlives the caller, and returns its pid at once:
/// the end of a session hands it work the person need not wait for. The child is forked
/// ([`fork`]), leads a new session (`setsid(2)`: no controlling terminal, so no signal the
/// person's keyboard or a closed terminal sends reaches it), works in `/`, has the usual signal state
/// ([`reset_signals`]), its standard streams on `/dev/null` (a caller reading the parent's
/// output, `$(tyba run …)`, sees its end when the parent exits) and every other fd closed but
/// `keep`; it leaves with `_exit(2)` once `work` returns (no destructor, atexit handler or
/// buffer of the parent's runs twice). Its parent being gone, `init` (or the nearest
/// subreaper) reaps it.
///
/// # Safety
/// As for [`fork`]: `work` takes no lock another thread of the caller may hold (no
/// `stdout`/`stderr`, no `std::env`, no shared `Mutex`, no tokio); it may allocate and use
/// files of its own.
///
/// # Errors
/// The fork's (EAGAIN, ENOMEM); the caller then does the work itself.
pub unsafe fn detach(keep: BorrowedFd<'_>, work: impl FnOnce()) -> io::Result<i32> {
    // SAFETY: the caller guarantees `work` takes no lock another thread may hold; the child
    // below makes only system calls before it.
    match unsafe { fork() }? {
        Forked::Parent(pid) => Ok(pid),
        Forked::Child => {
            let _ = nix::unistd::setsid();
            // Not the caller's working directory: it would stay busy (an `umount` of the disk
            // holding the checkout) for as long as the work runs.
            let _ = nix::unistd::chdir("/");
            reset_signals();
            if let Ok(null) = nix::fcntl::open(
                "/dev/null",
                nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            ) {
                for fd in 0..3 {
                    // SAFETY: dup2 onto the standard fds, which no Rust object of the child
                    // uses after this point but as those numbers.
                    unsafe { libc::dup2(null.as_raw_fd(), fd) };
                }
            }
            close_fds_from_except(3, keep);
            work();
            // SAFETY: ends this process without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Closes the caller's descriptor of a file locked with `flock(2)` without unlocking it: the
/// lock belongs to the open file description, which another descriptor (a [`detach`]ed
/// child's) still refers to and keeps locked; dropping the `Flock` would unlock it for both
/// (`flock(2)`: released by `LOCK_UN` on any duplicate, or once all are closed).
pub fn close_keeping_lock(l: nix::fcntl::Flock<std::fs::File>) {
    let l = std::mem::ManuallyDrop::new(l);
    // SAFETY: the `File` is read out of `l` once, and `l` is never used or dropped again: the
    // `File` is the only owner of the descriptor, which its drop closes.
    let f: std::fs::File = unsafe { std::ptr::read(&**l) };
    drop(f);
}

/// A system call made without the C library (`syscall` instruction, x86_64 Linux ABI: the
/// number in `rax`, arguments in `rdi`, `rsi`, `rdx`, `r10`; the kernel clobbers `rcx` and
/// `r11`). It returns the kernel's value, `-errno` on failure, and writes no `errno`: for a
/// process whose thread-local storage another process uses ([`clone_sharing_memory`]).
///
/// # Safety
/// The call must be valid with these arguments (pointers valid for what the kernel reads or
/// writes).
#[cfg(target_arch = "x86_64")]
unsafe fn raw_syscall4(nr: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the caller guarantees the call is valid; the registers follow the kernel's
    // x86_64 system call convention, and the asm touches no stack.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A stack for a cloned child: `len` bytes reserved, not committed (`MAP_NORESERVE`), the
/// lowest page a guard page. Returns the mapping and the stack's 16-byte aligned top (it
/// grows down).
///
/// # Errors
/// The `mmap` error.
fn child_stack(len: usize) -> io::Result<(*mut libc::c_void, usize)> {
    // SAFETY: an anonymous private mapping at an address the kernel chooses; nothing is
    // read or written by the call.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the lowest page of the mapping just made becomes the guard page.
    unsafe { libc::mprotect(stack, 4096, libc::PROT_NONE) };
    Ok((stack, (stack as usize + len) & !15))
}

/// Blocks every signal of the calling thread (`pthread_sigmask(3)`); returns the mask it
/// had, for [`set_signal_mask`]. A child cloned meanwhile starts with all of them blocked.
fn block_all_signals() -> libc::sigset_t {
    // SAFETY: all-zero `sigset_t`s are valid, filled or written below.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid `sigset_t`s owned here.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    old
}

/// Sets the calling thread's signal mask to `mask` (`pthread_sigmask(3)`).
fn set_signal_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a valid `sigset_t`, read during the call.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// Stack of a child made by [`clone_sharing_memory`]: a main thread's default (8 MiB,
/// reserved, not committed: `MAP_NORESERVE`), with a guard page below.
const SHARED_CHILD_STACK: usize = 8 << 20;

/// Starts `f` in a child process that shares the caller's memory (`clone(2)` with `CLONE_VM`
/// and exit signal `SIGCHLD`; no `CLONE_FILES`, `CLONE_FS` or `CLONE_SIGHAND`: its own
/// descriptor table, directory and signal handlers, copied), on a stack of its own. Making
/// it copies no page table, and its exit frees none: the cost a fork of a large image pays
/// twice (`copy_page_range` at the fork, `exit_mmap` at the exit). Returns the child's pid.
///
/// # Safety
/// The caller has one thread, and from the clone on touches no memory `f` may use (the
/// heap, thread-local storage, `errno`): it may only call [`wait_shared_child_and_exit`].
/// `f` must not return (it exits or execs).
///
/// # Errors
/// The `mmap` or `clone` error; `f` is then dropped here.
#[cfg(target_arch = "x86_64")]
pub unsafe fn clone_sharing_memory(f: Box<dyn FnOnce()>) -> io::Result<i32> {
    extern "C" fn start(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the pointer `Box::into_raw` made below, given to this child only.
        let f: Box<Box<dyn FnOnce()>> = unsafe { Box::from_raw(arg.cast()) };
        f();
        // `f` must not return; should it, the child leaves without touching anything more.
        exit_now(4)
    }
    let (stack, top) = child_stack(SHARED_CHILD_STACK)?;
    let arg = Box::into_raw(Box::new(f));
    // SAFETY: `start` runs on the new stack, which nothing else uses, and owns `arg`; the
    // caller guarantees it leaves the shared memory to the child from here on.
    let pid = unsafe {
        libc::clone(
            start,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::SIGCHLD,
            arg.cast(),
        )
    };
    if pid < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: no child was made: `arg` is still this process's only.
        drop(unsafe { Box::from_raw(arg) });
        // SAFETY: the mapping made above, used by no one.
        unsafe { libc::munmap(stack, SHARED_CHILD_STACK) };
        return Err(e);
    }
    Ok(pid)
}

/// Stack of a child made by [`spawn_sharing_memory`] (reserved, not committed), with a guard
/// page below; unmapped once the child has exec'd or exited.
const SPAWN_STACK: usize = 1 << 20;

/// Runs `f` in a child that shares the caller's memory, the caller suspended until the child
/// execs or exits: `clone(2)` with `CLONE_VM | CLONE_VFORK` and exit signal `SIGCHLD`, on a
/// stack of its own (what `posix_spawn(3)` does). Unlike a fork, it copies no page table, the
/// child's exec frees none, and the caller's later writes cause no copy-on-write faults.
/// The child has its own descriptor table, directory and signal handlers (copies); every
/// signal is blocked around the clone, and in the child every handler of the caller's is
/// set back to the default before `f` runs, so none runs on the shared memory. Returns the
/// child's pid, once it has exec'd or exited.
///
/// # Safety
/// The caller has one thread: nothing else touches the shared memory while the child runs.
/// `f` runs on the caller's memory, so it must drop nothing the caller still owns (the
/// caller would free it again) and must leave it consistent; it may allocate (what it keeps
/// is the caller's, leaked). `f` must exec or exit; should it return, the child exits 127.
///
/// # Errors
/// The `mmap` or `clone` error.
#[cfg(target_arch = "x86_64")]
pub unsafe fn spawn_sharing_memory(f: &mut dyn FnMut()) -> io::Result<i32> {
    extern "C" fn start(arg: *mut libc::c_void) -> libc::c_int {
        for sig in 1..libc::SIGRTMAX() {
            // SAFETY: an all-zero `sigaction` is valid to be written; querying a signal
            // number the kernel does not know fails and is skipped.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: `old` is written by the call, nothing is read.
            if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                // SAFETY: SIG_DFL is a valid disposition for a catchable signal.
                unsafe { libc::signal(sig, libc::SIG_DFL) };
            }
        }
        // SAFETY: `arg` is the pointer to the caller's `&mut dyn FnMut()` made below; the
        // caller is suspended until this child execs or exits.
        let f = unsafe { &mut *arg.cast::<&mut dyn FnMut()>() };
        f();
        exit_now(127)
    }
    let (stack, top) = child_stack(SPAWN_STACK)?;
    let mut f = f;
    let old = block_all_signals();
    // SAFETY: `start` runs on the stack mapped above, which nothing else uses, and calls `f`
    // through the pointer to `f` on this frame, which outlives the child's use of it (the
    // clone returns only once the child has exec'd or exited).
    let pid = unsafe {
        libc::clone(
            start,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::addr_of_mut!(f).cast(),
        )
    };
    let err = (pid < 0).then(io::Error::last_os_error);
    set_signal_mask(&old);
    // SAFETY: the stack, which the child no longer uses (it exec'd or exited), is unmapped.
    unsafe { libc::munmap(stack, SPAWN_STACK) };
    err.map_or(Ok(pid), Err)
}

/// What the parent of a [`clone_sharing_memory`] child does next, with raw system calls only
/// ([`raw_syscall4`]: no `errno`, no heap, no thread-local storage): blocks every signal
/// it can, writes `B <pid>` and a newline on `status_fd`, closes every descriptor from 3,
/// waits for the child and exits with its status (`128 + signal` when killed).
pub fn wait_shared_child_and_exit(status_fd: Option<RawFd>, child: i32) -> ! {
    let all: u64 = !0;
    // SAFETY: `rt_sigprocmask(SIG_BLOCK, &all, NULL, 8)` reads the 8-byte set on this stack.
    unsafe {
        raw_syscall4(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK as usize,
            std::ptr::addr_of!(all) as usize,
            0,
            8,
        )
    };
    if let Some(fd) = status_fd {
        let mut line = [0u8; 16];
        line[0] = b'B';
        line[1] = b' ';
        let mut digits = [0u8; 10];
        let (mut n, mut k) = (child.unsigned_abs(), 0);
        loop {
            digits[k] = b'0' + (n % 10) as u8;
            k += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for (i, d) in digits[..k].iter().rev().enumerate() {
            line[2 + i] = *d;
        }
        line[2 + k] = b'\n';
        // SAFETY: `write(fd, line, len)` reads `line` on this stack.
        unsafe {
            raw_syscall4(
                libc::SYS_write,
                fd as usize,
                line.as_ptr() as usize,
                3 + k,
                0,
            )
        };
    }
    // SAFETY: `close_range(3, ~0, 0)` takes integers.
    unsafe { raw_syscall4(libc::SYS_close_range, 3, libc::c_uint::MAX as usize, 0, 0) };
    let mut status: libc::c_int = 0;
    let code = loop {
        // SAFETY: `wait4(child, &status, 0, NULL)` writes `status` on this stack.
        let r = unsafe {
            raw_syscall4(
                libc::SYS_wait4,
                child as usize,
                std::ptr::addr_of_mut!(status) as usize,
                0,
                0,
            )
        };
        if r == child as isize {
            if libc::WIFEXITED(status) {
                break libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                break 128 + libc::WTERMSIG(status);
            }
        } else if r != -(libc::EINTR as isize) {
            break 4;
        }
    };
    // SAFETY: `exit_group(code)` does not return.
    unsafe { raw_syscall4(libc::SYS_exit_group, code as usize, 0, 0, 0) };
    exit_now(code)
}

/// Puts the calling thread in the batch scheduling class (`SCHED_BATCH`, `sched(7)`): its
/// share of the CPUs is a normal thread's, but it never preempts a thread that wakes up, so
/// work that has to happen soon (the launch) goes first while this keeps running on what is
/// left. Lowering the nice value instead starves such a thread on a busy machine (at nice 19
/// the watch's walk took up to 170 ms beside two CPU-bound processes). An unprivileged
/// thread may enter it; nothing is done if it cannot.
pub fn batch_scheduling() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a valid `sched_param` read during the call; 0 is the calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &p) };
}

/// Closes `fd` in a short-lived child rather than here, for a descriptor whose last close
/// waits (an inotify instance: `fsnotify_destroy_group` waits for an SRCU grace period).
///
/// The child is `clone(2)`d with `CLONE_VM` on a stack of its own (no exec, no copy of the
/// address space, no signal when it ends: it is reaped by whoever outlives the caller, its
/// exit signal made `SIGCHLD` when it is reparented). It closes every descriptor but `fd`
/// and a pipe's read end (`close_range(2)`), so it holds nothing else of the caller's, and
/// reads the pipe until the caller has closed its own copy of `fd` and then the pipe's write
/// end: only then does it exit, so the last close (and its wait) is always the child's. All
/// signals are blocked around the clone, so no handler of the caller's runs in the child.
/// The child's stack (64 KiB) is left allocated: the caller cannot know when the child is
/// done with it.
///
/// # Errors
/// The pipe, `mmap` or `clone` error; `fd` is then closed here.
pub fn close_in_child(fd: OwnedFd) -> io::Result<()> {
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // The two descriptors travel in the argument's bits (`fd`, then the pipe's read end
        // shifted by 32): nothing of the caller's memory is read, which the caller may
        // reuse as soon as the clone returns.
        let bits = arg as usize as u64;
        let (fd, r) = (
            (bits & 0xffff_ffff) as libc::c_uint,
            (bits >> 32) as libc::c_uint,
        );
        let (lo, hi) = (fd.min(r), fd.max(r));
        let mut b = 0u8;
        // SAFETY: raw system calls on integers and on `b` (this stack's), then `_exit`:
        // nothing else of the shared memory is touched. They cannot fail in a way that
        // writes `errno` (the caller's thread's, whose TLS this child runs on): the
        // descriptors are valid and every signal is blocked (no `EINTR`).
        unsafe {
            if lo > 0 {
                libc::syscall(
                    libc::SYS_close_range,
                    0 as libc::c_uint,
                    lo - 1,
                    0 as libc::c_uint,
                );
            }
            if hi > lo + 1 {
                libc::syscall(libc::SYS_close_range, lo + 1, hi - 1, 0 as libc::c_uint);
            }
            libc::syscall(
                libc::SYS_close_range,
                hi + 1,
                libc::c_uint::MAX,
                0 as libc::c_uint,
            );
            libc::syscall(libc::SYS_read, r, std::ptr::addr_of_mut!(b), 1usize);
            libc::syscall(libc::SYS_exit, 0);
            0
        }
    }
    const STACK: usize = 64 * 1024;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let (Ok(f), Ok(rr)) = (u32::try_from(fd.as_raw_fd()), u32::try_from(r.as_raw_fd())) else {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    };
    let arg = (u64::from(f) | (u64::from(rr) << 32)) as usize;
    let (_, top) = child_stack(STACK)?;
    let old = block_all_signals();
    // SAFETY: `child` runs on the stack mapped above, which nothing else uses; it makes system
    // calls and exits without returning. No exit signal (the low byte of the flags is 0).
    let pid = unsafe {
        libc::clone(
            child,
            top as *mut libc::c_void,
            libc::CLONE_VM,
            arg as *mut libc::c_void,
        )
    };
    let err = (pid < 0).then(io::Error::last_os_error);
    set_signal_mask(&old);
    // This copy first, then the pipe: the child's close is the last.
    drop(fd);
    drop(r);
    drop(w);
    err.map_or(Ok(()), Err)
}

/// Leaves the process at once with `code`, without running destructors or atexit handlers
/// (`_exit(2)`): what a forked child must do instead of returning.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// `execve(2)`: replaces the process image; returns only on error.
pub fn execve(path: &CStr, argv: &[&CStr], envp: &[&CStr]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: `path`, `a` and `e` are NUL-terminated C strings and NULL-terminated arrays
    // that outlive the call.
    unsafe { libc::execve(path.as_ptr(), a.as_ptr(), e.as_ptr()) };
    io::Error::last_os_error()
}

/// How many times [`openat2`] tries a resolution confined to a root that a concurrent rename
/// or mount made the kernel give up on (`EAGAIN`).
const OPENAT2_TRIES: usize = 64;

/// Opens `path` relative to `dir` with `openat2(2)` and these `RESOLVE_*` flags.
///
/// With `RESOLVE_IN_ROOT` or `RESOLVE_BENEATH`, the kernel fails with `EAGAIN` when a rename
/// or a mount anywhere on the system raced a `..` of the walk (it cannot then tell that the
/// `..` stayed inside: `openat2(2)`, "the caller may choose to retry"): such a failure is
/// tried again, up to [`OPENAT2_TRIES`] times. (A symbolic link like `/usr/bin/npm ->
/// ../lib/node_modules/npm/bin/npm-cli.js` has a `..`; the exec decision's open of it failed
/// the agent's `execve` with `EAGAIN` while other sandboxes were being set up.)
///
/// # Errors
/// The openat2 error (ELOOP, EXDEV for a resolution the flags forbid, ENOENT…); `EAGAIN`
/// when every try raced.
pub fn openat2(dir: BorrowedFd<'_>, path: &CStr, flags: u64, resolve: u64) -> io::Result<OwnedFd> {
    let confined = resolve & (libc::RESOLVE_IN_ROOT | libc::RESOLVE_BENEATH) != 0
        && resolve & libc::RESOLVE_CACHED == 0;
    let mut tries = 0;
    loop {
        tries += 1;
        match openat2_once(dir, path, flags, resolve) {
            Err(e)
                if confined && e.raw_os_error() == Some(libc::EAGAIN) && tries < OPENAT2_TRIES =>
            {
                continue
            }
            r => return r,
        }
    }
}

fn openat2_once(dir: BorrowedFd<'_>, path: &CStr, flags: u64, resolve: u64) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain data; all-zero is valid (and required for unused fields).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.resolve = resolve;
    // SAFETY: `path` is a C string and `how` a valid open_how; both outlive the call.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    })?;
    // SAFETY: fresh fd from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `fchmodat2(fd, "", mode, AT_EMPTY_PATH)`: changes the mode of the object `fd` refers to
/// (an `O_PATH` fd is fine; Linux ≥ 6.6).
///
/// # Errors
/// The syscall error.
pub fn fchmod_object(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: the empty path is a static C string; other arguments are integers.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: changes the owner of the object `fd` refers to.
///
/// # Errors
/// The syscall error.
pub fn fchown_object(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: the empty path is a static C string; other arguments are integers.
    cvt_int(unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) })
        .map(drop)
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH)`: sets the timestamps of the object `fd` refers
/// to; `None` means "now" for both.
///
/// # Errors
/// The syscall error.
pub fn utimens_object(fd: BorrowedFd<'_>, times: Option<[libc::timespec; 2]>) -> io::Result<()> {
    let p = match &times {
        Some(t) => t.as_ptr(),
        None => std::ptr::null(),
    };
    // SAFETY: `p` is NULL or points at two timespecs that outlive the call.
    cvt_int(unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), p, libc::AT_EMPTY_PATH) })
        .map(drop)
}

/// Adds a watch on `path` to the inotify instance `inotify` (`inotify_add_watch(2)`) and
/// returns the watch descriptor.
///
/// # Errors
/// EINVAL when `inotify` is not an inotify instance or the mask is empty; ENOENT, EACCES,
/// ENOSPC (watch limit), ENOTDIR (`IN_ONLYDIR`), EEXIST (`IN_MASK_CREATE`).
pub fn inotify_add_watch(inotify: BorrowedFd<'_>, path: &CStr, mask: u32) -> io::Result<i32> {
    // SAFETY: `path` is a C string that outlives the call; other arguments are integers.
    cvt_int(unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) })
}

/// Brings the loopback interface `lo` up in the current network namespace
/// (`SIOCGIFFLAGS`/`SIOCSIFFLAGS`, `netdevice(7)`).
///
/// # Errors
/// The socket or ioctl error.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: integer arguments only.
    let s =
        cvt_int(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fresh fd.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: ifreq is plain data; zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, b) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *b as libc::c_char;
    }
    // SAFETY: the ioctl reads and writes one ifreq.
    cvt_int(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: reading the union member SIOCGIFFLAGS just wrote.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: the ioctl reads one ifreq.
    cvt_int(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(drop)
}

/// Gives the loopback interface the IPv4 address `ip/32` as the alias `lo:<n>` in the current
/// network namespace (`SIOCSIFADDR` then `SIOCSIFNETMASK` on the alias, `netdevice(7)`).
///
/// # Errors
/// The socket or ioctl error (EPERM without `CAP_NET_ADMIN` in the namespace).
pub fn add_loopback_alias_v4(n: u8, ip: std::net::Ipv4Addr) -> io::Result<()> {
    // SAFETY: integer arguments only.
    let s =
        cvt_int(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fresh fd.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let name = format!("lo:{n}\0");
    let set = |req: u64, addr: std::net::Ipv4Addr| -> io::Result<()> {
        // SAFETY: ifreq is plain data; zero is valid.
        let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, b) in r.ifr_name.iter_mut().zip(name.as_bytes()) {
            *d = *b as libc::c_char;
        }
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(addr.octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a sockaddr_in fits in the union's sockaddr; both are plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(&sin).cast::<u8>(),
                std::ptr::from_mut(&mut r.ifr_ifru).cast::<u8>(),
                std::mem::size_of::<libc::sockaddr_in>(),
            );
        }
        // SAFETY: the ioctl reads one ifreq.
        cvt_int(unsafe { libc::ioctl(s.as_raw_fd(), req, &r) }).map(drop)
    };
    set(libc::SIOCSIFADDR, ip)?;
    set(libc::SIOCSIFNETMASK, std::net::Ipv4Addr::BROADCAST)
}

/// `connect(2)` on a socket the supervisor holds, to an address it built itself.
///
/// # Errors
/// The connect error (EINPROGRESS for a non-blocking socket).
pub fn connect_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `addr` is a sockaddr of `len` bytes owned by the caller.
    cvt_int(unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), len) }).map(drop)
}

/// An integer socket option (`getsockopt(2)`, e.g. `SO_DOMAIN`, `SO_TYPE`, `SO_PROTOCOL`).
///
/// # Errors
/// ENOTSOCK for a non-socket.
pub fn getsockopt_int(sock: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes of the sizes given.
    cvt_int(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// A new socket (`socket(2)`) with close-on-exec set.
///
/// # Errors
/// The socket error.
pub fn socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = cvt_int(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Restores default dispositions for the signals a Rust parent ignores (`SIGPIPE`) and
/// unblocks every signal, so the agent starts with the usual signal state (`signal(7)`).
pub fn reset_signals() {
    for s in [
        libc::SIGPIPE,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGCHLD,
    ] {
        // SAFETY: SIG_DFL is a valid disposition for these catchable signals.
        unsafe {
            libc::signal(s, libc::SIG_DFL);
        }
    }
    // SAFETY: an empty set is a valid sigset_t once initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Makes `tty` the controlling terminal of the calling session leader (`TIOCSCTTY`,
/// `ioctl_tty(2)`).
///
/// # Errors
/// The ioctl error.
pub fn set_controlling_tty(tty: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an integer argument.
    cvt_int(unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSCTTY, 0) }).map(drop)
}

/// Duplicates `fd` onto descriptor number `target` (`dup2(2)`), used in the child before
/// exec to set up its standard streams.
///
/// # Errors
/// The dup2 error.
pub fn dup_onto(fd: BorrowedFd<'_>, target: RawFd) -> io::Result<()> {
    // SAFETY: dup2 on descriptors; `target` is one of the standard stream numbers the child
    // owns and nothing else in the child holds.
    cvt_int(unsafe { libc::dup2(fd.as_raw_fd(), target) }).map(drop)
}

/// The terminal window size of `tty` (`TIOCGWINSZ`).
pub fn get_winsize(tty: BorrowedFd<'_>) -> Option<libc::winsize> {
    // SAFETY: winsize is plain data.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one winsize.
    let r = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (r == 0).then_some(ws)
}

/// Sets the terminal window size of `tty` (`TIOCSWINSZ`).
pub fn set_winsize(tty: BorrowedFd<'_>, ws: &libc::winsize) {
    // SAFETY: the ioctl reads one winsize.
    unsafe {
        libc::ioctl(tty.as_raw_fd(), libc::TIOCSWINSZ, ws);
    }
}

/// The file name this process was started with, as passed to `execve(2)`
/// (`getauxval(AT_EXECFN)`, `getauxval(3)`), or `None` when the auxiliary vector has none.
pub fn exec_fn() -> Option<std::ffi::CString> {
    // SAFETY: `getauxval` only reads the process's auxiliary vector.
    let p = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
    if p.is_null() {
        return None;
    }
    // SAFETY: AT_EXECFN points at the NUL-terminated file name the kernel copied onto this
    // process's stack at exec; it lives (unmodified by Rust code) for the whole process.
    Some(unsafe { CStr::from_ptr(p) }.to_owned())
}

/// Whether processes `a` and `b` share one address space (`kcmp(2)` with `KCMP_VM`).
///
/// # Errors
/// ESRCH when either is gone; EPERM without ptrace rights over both; ENOSYS without
/// `CONFIG_KCMP`. Callers treat an error as "shared" (the cautious answer).
pub fn same_address_space(a: u32, b: u32) -> io::Result<bool> {
    const KCMP_VM: libc::c_int = 1;
    // SAFETY: integer arguments only.
    let r = cvt(unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a as libc::pid_t,
            b as libc::pid_t,
            KCMP_VM,
            0u64,
            0u64,
        )
    })?;
    Ok(r == 0)
}

/// A connected pair of close-on-exec Unix sockets that keep message boundaries
/// (`SOCK_SEQPACKET`, `socketpair(2)`): one packet per `send`, fds carried with it.
///
/// # Errors
/// The `socketpair` error.
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )?)
}

/// Sends `buf` as one packet on `sock` with `fds` (`SCM_RIGHTS`, none when empty): each
/// fd stays open in this process too, and the receiver gets its own copy of the same open
/// file (`sendmsg(2)`, `unix(7)`).
///
/// # Errors
/// The `sendmsg` error.
pub fn send_with_fds(sock: BorrowedFd<'_>, buf: &[u8], fds: &[RawFd]) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
    let iov = [io::IoSlice::new(buf)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
    sendmsg::<UnixAddr>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None)?;
    Ok(())
}

/// Receives one packet on `sock` into `buf`, with the fds it carries (`SCM_RIGHTS`,
/// installed close-on-exec), up to `max_fds` of them (`recvmsg(2)`, `unix(7)`).
///
/// # Errors
/// The `recvmsg` error.
pub fn recv_with_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
    let mut space = vec![0u8; nix::sys::socket::cmsg_space::<RawFd>() * max_fds.max(1)];
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<UnixAddr>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(v) = c {
            for fd in v {
                // SAFETY: the kernel installed these fds in this process for this message;
                // nothing else owns them.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Ok((msg.bytes, fds))
}

/// `fd` registered with the current tokio runtime's reactor (`tokio::io::unix::AsyncFd`,
/// readable and writable interest), for a non-blocking fd the caller owns.
///
/// # Errors
/// When there is no current runtime (called outside `Runtime::enter`) or epoll refuses the fd.
pub fn async_fd(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(io::Error::other("no tokio runtime to register the fd with"));
    }
    // SAFETY: an `OwnedFd` is a valid open fd whose `as_raw_fd` always returns that same fd,
    // and it is closed only when dropped, which the `AsyncFd` owning it does after
    // deregistering it; nothing else can close or replace it meanwhile.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// A close-on-exec duplicate of `fd` numbered `min` or above (`fcntl(F_DUPFD_CLOEXEC)`).
///
/// # Errors
/// EMFILE/EINVAL when no such number is free.
pub fn dup_at_least(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let n = cvt_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) })?;
    // SAFETY: the kernel returned a fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Takes fd `n` if it is open and a `SOCK_SEQPACKET` socket; used once, at start-up of an
/// approved command's proxy, where the supervisor installed its channel at that number.
pub fn take_seqpacket_fd(n: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_GETFD only tests whether `n` is open.
    if unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `n` is open, and at the start of the process nothing in it owns fd `n` (the
    // Rust runtime opens none; the supervisor injected it for this use).
    let fd = unsafe { OwnedFd::from_raw_fd(n) };
    match nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SockType) {
        Ok(nix::sys::socket::SockType::SeqPacket) => Some(fd),
        _ => {
            // Not ours: leave it open, as it was.
            std::mem::forget(fd);
            None
        }
    }
}

/// A FUSE filesystem as a detached mount (`fsopen(2)`, `fsconfig(2)`, `fsmount(2)`; the
/// options of `Documentation/filesystems/fuse/fuse.rst`): served through `dev` (an open
/// `/dev/fuse`, which must have been opened in the caller's user namespace: the kernel
/// refuses a device opened in another with `EINVAL`), root a directory, owned by `uid`/`gid`
/// (the caller's ids in its user namespace), `default_permissions` (the kernel checks mode
/// bits against the attributes the server returns), mounted `nosuid,nodev,noexec`. The
/// connection's PID namespace, in which the kernel numbers the requesting processes, is the
/// caller's active one. Returns the mount's fd (`O_CLOEXEC`), to be attached with
/// [`attach_tree`].
///
/// # Errors
/// The failing call's error (`EPERM` without `CAP_SYS_ADMIN` in the user namespace that owns
/// the mount namespace; `ENODEV` without FUSE).
pub fn fuse_fsmount(dev: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_SET_FLAG: libc::c_uint = 0;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
    const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;
    const MOUNT_ATTR_NOEXEC: libc::c_uint = 0x8;
    let fstype = c"fuse";
    // SAFETY: a C string that outlives the call.
    let fs = cvt(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    // SAFETY: fresh fd from the kernel.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    let set = |key: &str, value: Option<&str>| -> io::Result<()> {
        let k =
            std::ffi::CString::new(key).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let v = value
            .map(std::ffi::CString::new)
            .transpose()
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let (cmd, vp) = match &v {
            Some(v) => (FSCONFIG_SET_STRING, v.as_ptr()),
            None => (FSCONFIG_SET_FLAG, std::ptr::null()),
        };
        // SAFETY: `fs` is an fs context fd; `k` and `v` are C strings that outlive the call.
        cvt(unsafe { libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), cmd, k.as_ptr(), vp, 0) })
            .map(drop)
    };
    set("fd", Some(&dev.as_raw_fd().to_string()))?;
    set("rootmode", Some("40000"))?;
    set("user_id", Some(&uid.to_string()))?;
    set("group_id", Some(&gid.to_string()))?;
    set("default_permissions", None)?;
    // SAFETY: `fs` is an fs context fd; no pointers.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    let attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    // SAFETY: `fs` is a created fs context fd; no pointers.
    let m =
        cvt(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })?;
    // SAFETY: fresh fd from the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(m as RawFd) })
}

/// Answers FUSE request `unique` with `-errno` on the device `dev` (a `fuse_out_header` of
/// 16 bytes, `Documentation/filesystems/fuse/fuse.rst`): what the outside-files server's
/// watchdog sends for a request its handler did not answer in time. A request already
/// answered gives `ENOENT`.
///
/// # Errors
/// The write's error.
pub fn fuse_reply_error(dev: BorrowedFd<'_>, unique: u64, errno: i32) -> io::Result<()> {
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(&16u32.to_ne_bytes());
    out[4..8].copy_from_slice(&(-errno).to_ne_bytes());
    out[8..16].copy_from_slice(&unique.to_ne_bytes());
    nix::unistd::write(dev, &out)
        .map_err(io::Error::from)
        .map(drop)
}

/// `move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`: attaches a detached
/// mount over `target` (`move_mount(2)`; a final symbolic link of `target` is not followed).
///
/// # Errors
/// The syscall error.
pub fn attach_tree(tree: BorrowedFd<'_>, target: &CStr) -> io::Result<()> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    // SAFETY: both paths are C strings that outlive the call.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// Pages of this process's own memory followed by a page that is not mapped, for tests of
/// readers that must stop where memory ends (`crate::procfs`). Unmapped when dropped.
/// Makes the process `cmd` starts die with the thread that starts it (`prctl(2)`
/// `PR_SET_PDEATHSIG`, `SIGKILL`): a git command tyba runs on what the agent wrote (the end's
/// carry-in of its objects) must not outlive a supervisor that was killed.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the forked child before exec and makes one system call
    // (prctl); it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

#[cfg(test)]
#[derive(Debug)]
pub struct GuardedPages {
    ptr: *mut u8,
    len: usize,
}

#[cfg(test)]
impl GuardedPages {
    /// `pages` zeroed, readable and writable pages of 4096 bytes, the page after them unmapped.
    ///
    /// # Errors
    /// The `mmap(2)` or `munmap(2)` error.
    pub fn new(pages: usize) -> io::Result<GuardedPages> {
        let len = pages * 4096;
        // SAFETY: a fresh anonymous private mapping at an address the kernel picks; nothing
        // else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the last page of the mapping just made; no reference to it exists.
        if unsafe { libc::munmap(ptr.cast::<u8>().add(len).cast(), 4096) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: the whole mapping just made, unused.
            unsafe { libc::munmap(ptr, len + 4096) };
            return Err(e);
        }
        Ok(GuardedPages {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The mapped pages.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes mapped read-write at `ptr` for as long as `self` lives, borrowed
        // mutably through `self` only.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

#[cfg(test)]
impl Drop for GuardedPages {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer borrowed.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::process::CommandExt;

    /// Stage 2's look at stage 1 ([`pidfd_exited`]): a running process has not exited; the
    /// same process once it has (not yet reaped) has.
    #[test]
    fn a_pidfd_tells_a_running_process_from_one_that_exited() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = pidfd_open(child.id() as i32).unwrap();
        assert!(!pidfd_exited(fd.as_fd()), "a running process");
        pidfd_send_signal(fd.as_fd(), libc::SIGKILL).unwrap();
        let start = std::time::Instant::now();
        while !pidfd_exited(fd.as_fd()) && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(pidfd_exited(fd.as_fd()), "a process that exited");
        let _ = child.wait();
    }

    /// A child sharing its parent's memory runs; the parent writes `B <pid>` and leaves with
    /// the child's status: its exit code, or 128 + the signal that killed it.
    #[test]
    fn a_child_sharing_memory_is_waited_for_and_its_status_passed_on() {
        for (killed, want) in [(false, 7), (true, 128 + libc::SIGKILL)] {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
            // SAFETY: the child makes system calls and exits (the test's one-thread child).
            match unsafe { fork() }.unwrap() {
                Forked::Child => {
                    drop(r);
                    let status = w.as_raw_fd();
                    let f = Box::new(move || {
                        if killed {
                            // SAFETY: raise(3) takes a signal number.
                            unsafe { libc::raise(libc::SIGKILL) };
                        }
                        exit_now(7)
                    });
                    // SAFETY: this child has one thread and only waits after the clone.
                    match unsafe { clone_sharing_memory(f) } {
                        Ok(pid) => wait_shared_child_and_exit(Some(status), pid),
                        Err(_) => exit_now(99),
                    }
                }
                Forked::Parent(p) => {
                    drop(w);
                    let mut line = String::new();
                    std::io::Read::read_to_string(&mut std::fs::File::from(r), &mut line).unwrap();
                    let pid = line
                        .strip_prefix("B ")
                        .and_then(|l| l.strip_suffix('\n'))
                        .and_then(|n| n.parse::<i32>().ok())
                        .unwrap_or_else(|| panic!("not a pid line: {line:?}"));
                    assert!(pid > 0 && pid != p, "{pid} beside {p}");
                    let ws = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(p), None).unwrap();
                    assert_eq!(
                        ws,
                        nix::sys::wait::WaitStatus::Exited(nix::unistd::Pid::from_raw(p), want)
                    );
                }
            }
        }
    }

    /// A child spawned sharing its parent's memory writes where the parent reads it, is
    /// waited for until it execs or exits, and runs none of the parent's signal handlers: a
    /// signal the parent catches kills the child (the default action), the handler's counter
    /// untouched.
    #[test]
    fn a_spawned_child_shares_memory_and_runs_no_handler_of_the_parents() {
        static HANDLED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        extern "C" fn on_usr1(_: libc::c_int) {
            HANDLED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let sh = std::ffi::CString::new("/bin/sh").unwrap();
        let (c, line) = (
            std::ffi::CString::new("-c").unwrap(),
            std::ffi::CString::new("exit 7").unwrap(),
        );
        // SAFETY: the child is the test's one-thread process; it makes system calls and exits.
        match unsafe { fork() }.unwrap() {
            Forked::Child => {
                // SAFETY: `on_usr1` only touches an atomic.
                unsafe { libc::signal(libc::SIGUSR1, on_usr1 as *const () as libc::sighandler_t) };
                let code = (|| {
                    for raise in [true, false] {
                        let mut seen = 0u32;
                        let mut f = || {
                            seen = 1;
                            if raise {
                                reset_signals();
                                // SAFETY: raise(3) takes a signal number.
                                unsafe { libc::raise(libc::SIGUSR1) };
                                exit_now(3)
                            }
                            let _ = execve(&sh, &[&sh, &c, &line], &[]);
                            exit_now(4)
                        };
                        // SAFETY: this process has one thread; `f` borrows, then execs or exits.
                        let Ok(pid) = (unsafe { spawn_sharing_memory(&mut f) }) else {
                            return 10;
                        };
                        if seen != 1 {
                            return 11;
                        }
                        let want = if raise {
                            nix::sys::wait::WaitStatus::Signaled(
                                nix::unistd::Pid::from_raw(pid),
                                nix::sys::signal::Signal::SIGUSR1,
                                false,
                            )
                        } else {
                            nix::sys::wait::WaitStatus::Exited(nix::unistd::Pid::from_raw(pid), 7)
                        };
                        if nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None)
                            != Ok(want)
                        {
                            return 12;
                        }
                    }
                    if HANDLED.load(std::sync::atomic::Ordering::SeqCst) != 0 {
                        return 13;
                    }
                    0
                })();
                exit_now(code)
            }
            Forked::Parent(p) => {
                let ws = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(p), None).unwrap();
                assert_eq!(
                    ws,
                    nix::sys::wait::WaitStatus::Exited(nix::unistd::Pid::from_raw(p), 0),
                    "10: no spawn, 11: memory not shared, 12: wrong end, 13: the parent's handler ran"
                );
            }
        }
    }

    /// A resolution confined to a root that walks a `..` (through a link) while renames run
    /// elsewhere: one try alone fails with `EAGAIN` now and then (the control), `openat2`
    /// never does.
    #[test]
    fn a_confined_open_through_dotdot_survives_concurrent_renames() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("usr/lib/pkg")).unwrap();
        std::fs::create_dir_all(t.path().join("usr/bin")).unwrap();
        std::fs::write(t.path().join("usr/lib/pkg/cli.js"), "x").unwrap();
        std::os::unix::fs::symlink("../lib/pkg/cli.js", t.path().join("usr/bin/npm")).unwrap();
        let churn = tempfile::tempdir().unwrap();
        std::fs::write(churn.path().join("a"), "x").unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let renamer = {
            let (stop, dir) = (std::sync::Arc::clone(&stop), churn.path().to_path_buf());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(dir.join("a"), dir.join("b"));
                    let _ = std::fs::rename(dir.join("b"), dir.join("a"));
                }
            })
        };
        let root = std::fs::File::open(t.path()).unwrap();
        let path = std::ffi::CString::new("/usr/bin/npm").unwrap();
        let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
        let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
        let started = std::time::Instant::now();
        let mut raced = 0;
        let mut tries = 0;
        while raced == 0 && started.elapsed() < std::time::Duration::from_secs(20) {
            tries += 1;
            match openat2_once(root.as_fd(), &path, flags, resolve) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => raced += 1,
                Err(e) => panic!("{e}"),
            }
        }
        for _ in 0..20_000 {
            openat2(root.as_fd(), &path, flags, resolve).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        renamer.join().unwrap();
        assert!(raced > 0, "control: no single try raced in {tries}");
    }

    /// `close_in_child` leaves no copy of the descriptor here, and the child's copy is
    /// closed in the end: the pipe's reader sees its end of file.
    #[test]
    fn a_descriptor_closed_in_a_child_is_closed_everywhere() {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let ino = std::fs::File::from(r.try_clone().unwrap())
            .metadata()
            .unwrap()
            .ino();
        let held_here = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy() == format!("pipe:[{ino}]"))
                })
                .count()
        };
        // Control: both ends are held here.
        assert_eq!(held_here(), 2);
        close_in_child(w).unwrap();
        assert_eq!(held_here(), 1, "only the read end is left here");
        let mut f = std::fs::File::from(r);
        let mut b = [0u8; 1];
        assert_eq!(f.read(&mut b).unwrap(), 0, "the child's copy was closed");
    }

    /// A listener hangs up exactly when the last task using its filter is gone: the case the
    /// notify loop must leave on instead of spinning on ENOENT.
    #[test]
    fn a_listener_hangs_up_when_its_filter_has_no_users() {
        const AT: RawFd = 200;
        let prog = crate::bpf::notify_filter(&[libc::SYS_getppid]).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("0.3");
        // SAFETY: the closure runs in the forked child before exec and only makes system
        // calls (prctl, seccomp, dup2); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                set_no_new_privs()?;
                let l = install_filter_with_listener(&prog, 0)?;
                dup_onto(l.as_fd(), AT)
            });
        }
        let mut child = cmd.spawn().unwrap();
        let pidfd = pidfd_open(child.id() as i32).unwrap();
        let listener = pidfd_getfd(pidfd.as_fd(), AT).unwrap();
        assert!(
            !notif_listener_hung_up(listener.as_fd()),
            "a filter in use must not poll as hung up"
        );
        assert!(child.wait().unwrap().success());
        assert!(
            notif_listener_hung_up(listener.as_fd()),
            "with its only task gone the listener must poll as hung up"
        );
        let e = notif_recv(listener.as_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }
}
