//! The proxy an approved command's asking process becomes (see `crate::runner`): it stands
//! in the agent's process tree for the runner, which runs in its own Landlock domain outside
//! that tree.
//!
//! The supervisor execs the asking process as tyba's own executable through the file name
//! [`PROXY_EXEC_FN`], with the channel at fd [`CHANNEL_FD`] (a `SOCK_SEQPACKET` socket). The
//! proxy says hello (`h`), forwards the signals it receives (`s<N>`: interrupt, terminate,
//! hang-up, quit, user signals, window size, alarm, continue), and ends as the runner ended:
//! `x<CODE>` exits with that code, `k<N>` dies of signal N. If the supervisor goes away
//! before it says how to end, the proxy exits with 125 after saying so on stderr. A message
//! the supervisor queued before the process ran (a refusal's `r<REASON>`, an answer's
//! `x<CODE>`) is read even when the supervisor's end is already closed, so a refusal never
//! depends on how soon the refused process runs. Stopping (`SIGTSTP`) stops the proxy only.
//!
//! The same program is tyba's **refusal program**: a refused exec runs it, and the supervisor
//! sends `r<REASON>`; it prints `tyba: <REASON>` on its stderr (the refused process's own) and
//! exits 126, the status of a command found but not run, so every spawn API sees a process
//! that says why (DESIGN.md §5, "exec").

use crate::sys;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// The file name the supervisor makes the asking process exec (`/dev/fd/3`: tyba's own
/// executable, injected as fd 3, close-on-exec).
pub const PROXY_EXEC_FN: &str = "/dev/fd/3";
/// The channel's fd number in the proxy.
pub const CHANNEL_FD: RawFd = 4;
/// The longest refusal reason (bytes) the supervisor sends in an `r<REASON>` message.
pub const MAX_REASON: usize = 4000;

const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
    Signal::SIGALRM,
    Signal::SIGCONT,
];

/// If this process was started as an approved command's proxy (its exec file name is
/// [`PROXY_EXEC_FN`] and fd [`CHANNEL_FD`] is a seqpacket socket), runs the proxy and never
/// returns; otherwise returns at once. Call first thing in `main`.
pub fn run_if_proxy() {
    match sys::exec_fn() {
        Some(p) if p.as_bytes() == PROXY_EXEC_FN.as_bytes() => {}
        _ => return,
    }
    let Some(chan) = sys::take_seqpacket_fd(CHANNEL_FD) else {
        return;
    };
    let code = proxy(chan);
    sys::exit_now(code)
}

/// One packet to the supervisor; `false` when its end is closed (`MSG_NOSIGNAL`: `EPIPE`,
/// never `SIGPIPE`).
fn send(chan: &OwnedFd, msg: &str) -> bool {
    nix::sys::socket::send(
        chan.as_raw_fd(),
        msg.as_bytes(),
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    )
    .is_ok()
}

fn proxy(chan: OwnedFd) -> i32 {
    // The runner holds the command's fds; keeping stdin/stdout here would hold pipes open.
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = sys::dup_onto(null.as_fd(), 0);
        let _ = sys::dup_onto(null.as_fd(), 1);
    }
    sys::close_fds_from(CHANNEL_FD as u32 + 1);
    let mut mask = SigSet::empty();
    for s in FORWARDED {
        mask.add(*s);
    }
    let _ = mask.thread_block();
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).ok();
    // Test builds only (`fault-points`): a proxy that starts late, as on a loaded machine.
    #[cfg(feature = "fault-points")]
    if let Some(ms) = std::env::var("TYBA_FAULT_PROXY_HELLO_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    // A closed supervisor's end fails the hello, but what it queued before closing is still
    // read below (then the end of the channel).
    let _ = send(&chan, "h");
    loop {
        let mut fds = vec![PollFd::new(chan.as_fd(), PollFlags::POLLIN)];
        if let Some(s) = &sfd {
            fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
        }
        if let Err(e) = nix::poll::poll(&mut fds, PollTimeout::NONE) {
            if e == nix::errno::Errno::EINTR {
                continue;
            }
            return lost();
        }
        let chan_ready = fds[0].revents().is_some_and(|r| !r.is_empty());
        drop(fds);
        if let Some(s) = &sfd {
            while let Ok(Some(info)) = s.read_signal() {
                let _ = send(&chan, &format!("s{}", info.ssi_signo));
            }
        }
        if !chan_ready {
            continue;
        }
        let mut buf = [0u8; MAX_REASON + 64];
        let n = match nix::sys::socket::recv(
            chan.as_raw_fd(),
            &mut buf,
            nix::sys::socket::MsgFlags::empty(),
        ) {
            Ok(n) => n,
            // ECONNRESET: the supervisor closed its end with something of ours unread (a
            // hello, a forwarded signal). The kernel reports that once, before the packets
            // still queued here (`unix_release_sock`, `__skb_try_recv_datagram`): what the
            // supervisor sent is read on the next call.
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::ECONNRESET) => continue,
            Err(_) => 0,
        };
        let msg = String::from_utf8_lossy(&buf[..n]);
        let msg = msg.as_ref();
        if let Some(reason) = msg.strip_prefix('r') {
            say(reason);
            return 126;
        }
        if let Some(c) = msg.strip_prefix('x').and_then(|c| c.parse::<i32>().ok()) {
            return c;
        }
        if let Some(sig) = msg
            .strip_prefix('k')
            .and_then(|c| c.parse::<i32>().ok())
            .and_then(|c| Signal::try_from(c).ok())
        {
            // Die of the same signal, so the agent sees the same wait status: the signals are
            // only blocked (never handled), so unblocking delivers them with their default
            // action.
            let _ = nix::sys::signal::raise(sig);
            let _ = mask.thread_unblock();
            let mut one = SigSet::empty();
            one.add(sig);
            let _ = one.thread_unblock();
            return 128 + sig as i32;
        }
        if n == 0 {
            return lost();
        }
    }
}

fn lost() -> i32 {
    say("the supervisor of this command is gone before it said how the command ends; it was ended");
    125
}

/// Writes `tyba: <text>` on stderr when it can be written within a second, else nothing: a
/// full pipe nobody reads must not keep a refused command from ending (`poll(2)` for
/// `POLLOUT`, then one write of less than a pipe buffer). The descriptor's own flags, which
/// the agent shares, are left as they are.
fn say(text: &str) {
    let err = std::io::stderr();
    let mut pfd = [PollFd::new(err.as_fd(), PollFlags::POLLOUT)];
    let ready = matches!(nix::poll::poll(&mut pfd, PollTimeout::from(1000u16)), Ok(n) if n > 0)
        && pfd[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLOUT));
    if ready {
        let mut line = format!("tyba: {text}");
        line.truncate(
            (0..=MAX_REASON.min(line.len()))
                .rev()
                .find(|&i| line.is_char_boundary(i))
                .unwrap_or(0),
        );
        line.push('\n');
        let _ = err.lock().write_all(line.as_bytes());
    }
}
