//! Refusals told on a sandboxed process's stderr without any thread that answers requests
//! ever waiting on it (issue 16, hostile review: the FUSE server and the notify loop hung on
//! an agent whose stderr was a full pipe nobody read).
//!
//! The thread that decides only takes the process's fd 2 (`pidfd_getfd(2)`, which does not
//! wait on the process) and queues it with the text on a bounded queue; when the queue is full
//! the message is dropped and counted ([`dropped`]), the sender never waits. One detached
//! writer thread writes each message, bounded in size ([`MAX_TEXT`]), without blocking on the
//! agent: a pipe with `pwritev2(RWF_NOWAIT)`, a terminal through a new open file description
//! of its own made non-blocking (`/proc/self/fd/N` reopened with `O_NONBLOCK`), a socket with
//! `MSG_DONTWAIT` (the agent's own description, whose flags it shares, is never changed);
//! what would wait is dropped. A
//! regular file is written as it is (a file on the outside-files mount is answered by the
//! server's own threads, which never wait for this one, and is bounded by its watchdog).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock};

/// The longest text written for one refusal (bytes, the newline included); longer ones are
/// cut. Within `PIPE_BUF`: a write to a pipe is whole or not at all.
pub(crate) const MAX_TEXT: usize = 2048;

/// How many messages may wait for the writer.
const QUEUE: usize = 64;

/// What runs after a message is written, or dropped (a refused vfork child is killed once its
/// stderr says why).
pub(crate) type Then = Box<dyn FnOnce() + Send>;

struct Job {
    fd: OwnedFd,
    text: Vec<u8>,
    then: Option<Then>,
}

static DROPPED: AtomicU64 = AtomicU64::new(0);
static QUEUE_TX: OnceLock<Option<Mutex<SyncSender<Job>>>> = OnceLock::new();

/// How many messages were dropped because the writer's queue was full or the writer could
/// not write them without waiting.
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

fn sender() -> Option<&'static Mutex<SyncSender<Job>>> {
    QUEUE_TX
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Job>(QUEUE);
            std::thread::Builder::new()
                .name("tyba-teller".into())
                .spawn(move || {
                    for job in rx {
                        if !write_now(job.fd.as_fd(), &job.text) {
                            DROPPED.fetch_add(1, Ordering::Relaxed);
                        }
                        drop(job.fd);
                        if let Some(then) = job.then {
                            then();
                        }
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// `tyba: <reason>\n`, cut to [`MAX_TEXT`] bytes on a character boundary.
fn line(reason: &str) -> Vec<u8> {
    let mut s = format!("tyba: {reason}");
    if s.len() > MAX_TEXT - 4 {
        let mut end = MAX_TEXT - 4;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s.push('\n');
    s.into_bytes()
}

/// Queues `tyba: <reason>` for `fd` (a process's stderr, taken by the caller); `then` runs
/// once it is written or dropped. Never waits.
pub(crate) fn tell_fd(fd: OwnedFd, reason: &str, then: Option<Then>) {
    let job = Job {
        fd,
        text: line(reason),
        then,
    };
    let Some(tx) = sender() else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = job.then {
            t();
        }
        return;
    };
    let sent = match tx.lock() {
        Ok(tx) => tx.try_send(job),
        Err(_) => Err(TrySendError::Disconnected(job)),
    };
    if let Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) = sent {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        drop(job.fd);
        if let Some(t) = job.then {
            t();
        }
    }
}

/// Queues `tyba: <reason>` for the stderr of thread `tid`'s process, if it can be taken.
pub(crate) fn tell(tid: u32, reason: &str) {
    let Ok(pid) = crate::procfs::tgid(tid) else {
        return;
    };
    let Ok(pidfd) = crate::sys::pidfd_open(pid as i32) else {
        return;
    };
    if let Ok(fd) = crate::sys::pidfd_getfd(pidfd.as_fd(), 2) {
        tell_fd(fd, reason, None);
    }
}

/// Writes `text` on `fd` without waiting on whoever reads it: whether it was written.
fn write_now(fd: std::os::fd::BorrowedFd<'_>, text: &[u8]) -> bool {
    let Ok(st) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => nix::sys::socket::send(
            fd.as_raw_fd(),
            text,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        )
        .is_ok(),
        libc::S_IFIFO | libc::S_IFCHR => {
            // This write only, non-blocking (a pipe takes `RWF_NOWAIT`): the agent's open
            // file description keeps its flags.
            match crate::sys::write_nowait(fd, text) {
                Ok(n) => return n == text.len(),
                Err(e) if e.raw_os_error() != Some(libc::EOPNOTSUPP) => return false,
                Err(_) => {}
            }
            // A terminal: a description of our own, non-blocking.
            let own = nix::fcntl::open(
                format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(),
                nix::fcntl::OFlag::O_WRONLY
                    | nix::fcntl::OFlag::O_NONBLOCK
                    | nix::fcntl::OFlag::O_NOCTTY
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            );
            match own {
                Ok(own) => nix::unistd::write(&own, text).is_ok_and(|n| n == text.len()),
                // Not ours to reopen: written only when it has room now (a terminal that
                // fills meanwhile holds this thread, never one that answers requests).
                Err(_) => {
                    let mut pfd = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
                    let ready = matches!(
                        nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(200u16)),
                        Ok(n) if n > 0
                    ) && pfd[0]
                        .revents()
                        .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLOUT));
                    ready && nix::unistd::write(fd, text).is_ok_and(|n| n == text.len())
                }
            }
        }
        libc::S_IFREG => nix::unistd::write(fd, text).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_full_pipe_never_holds_the_sender_or_the_writer() {
        let (r, w) = nix::unistd::pipe().unwrap();
        // Fill the pipe: nobody reads it.
        nix::fcntl::fcntl(
            &w,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        while nix::unistd::write(&w, &[0u8; 4096]).is_ok() {}
        nix::fcntl::fcntl(
            &w,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )
        .unwrap();
        let t = Instant::now();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for i in 0..(QUEUE * 3) {
            let d = done_tx.clone();
            tell_fd(
                w.try_clone().unwrap(),
                &"x".repeat(10_000),
                Some(Box::new(move || {
                    let _ = d.send(i);
                })),
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the sender never waits"
        );
        // Every message ends (written or dropped) within a bound: the writer never waits.
        for _ in 0..(QUEUE * 3) {
            done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert!(dropped() >= 1);
        // The pipe's own description is left blocking (the agent's flags).
        let fl = nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(fl & libc::O_NONBLOCK, 0);
        drop(r);
    }

    #[test]
    fn a_reason_is_cut_to_the_bound_on_a_character_boundary() {
        let l = line(&"é".repeat(5000));
        assert!(l.len() <= MAX_TEXT);
        assert!(std::str::from_utf8(&l).is_ok());
        assert!(l.ends_with(b"\n"));
    }
}
