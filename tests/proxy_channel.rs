//! tyba's proxy and refusal program (`tyba_supervisor::proxy`) as the supervisor starts it:
//! tyba's own executable run through the file name `/dev/fd/3`, with its channel, a
//! `SOCK_SEQPACKET` socket, at fd 4. What the supervisor queued before the program ran is
//! read even when the supervisor's end is already closed: a refusal never depends on how
//! soon the refused process runs, or on a thread of the supervisor waiting for it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use nix::sys::socket::{socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};

/// The program started as the supervisor's exec rewrite makes it run (tyba's executable as
/// `/dev/fd/3`, the channel at fd 4), with `queued` sent on the supervisor's end first.
/// Returns the child and the supervisor's end.
fn start_proxy(queued: &[&str]) -> (std::process::Child, OwnedFd) {
    let (sup, prox) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .unwrap();
    for m in queued {
        nix::sys::socket::send(sup.as_raw_fd(), m.as_bytes(), MsgFlags::empty()).unwrap();
    }
    let exe = std::fs::File::open(env!("CARGO_BIN_EXE_tyba")).unwrap();
    let (exe_fd, prox_fd) = (exe.as_raw_fd(), prox.as_raw_fd());
    let mut cmd = Command::new("/dev/fd/3");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only dup2 and fcntl, both async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            for (from, to, cloexec) in [(exe_fd, 3, true), (prox_fd, 4, false)] {
                if libc::dup2(from, to) < 0
                    || libc::fcntl(
                        to,
                        libc::F_SETFD,
                        if cloexec { libc::FD_CLOEXEC } else { 0 },
                    ) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(prox);
    drop(exe);
    (child, sup)
}

/// Runs the program with `queued` sent first; the supervisor's end is closed before the
/// program starts when `close`, else what the program sends is read until it ends.
/// Returns (exit code, signal, stderr, what the program sent).
fn run_proxy(queued: &[&str], close: bool) -> (Option<i32>, Option<i32>, String, Vec<String>) {
    let (child, sup) = start_proxy(queued);
    let sup = (!close).then_some(sup);
    let mut sent = Vec::new();
    if let Some(s) = &sup {
        // Read what the program says (its hello) until it ends.
        let mut buf = [0u8; 64];
        while let Ok(n) = nix::sys::socket::recv(s.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            if n == 0 {
                break;
            }
            sent.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        sent,
    )
}

#[test]
fn a_refusal_queued_before_the_program_runs_is_read_after_the_supervisor_closed() {
    let (code, _, err, _) = run_proxy(&["rrefused by tyba: `x` is not for this task"], true);
    assert_eq!(code, Some(126), "{err}");
    assert_eq!(err, "tyba: refused by tyba: `x` is not for this task\n");
}

#[test]
fn an_end_queued_before_the_program_runs_is_read_after_the_supervisor_closed() {
    let (code, _, err, _) = run_proxy(&["x7"], true);
    assert_eq!(code, Some(7), "{err}");
    assert!(err.is_empty(), "{err}");
    let (code, sig, err, _) = run_proxy(&["k15"], true);
    assert_eq!((code, sig), (None, Some(15)), "{err}");
}

#[test]
fn a_supervisor_gone_with_nothing_queued_ends_the_program_with_125() {
    // The control: with nothing queued, the program cannot make up an end; it says so.
    let (code, _, err, _) = run_proxy(&[], true);
    assert_eq!(code, Some(125), "{err}");
    assert!(err.starts_with("tyba: the supervisor"), "{err}");
}

#[test]
fn a_supervisor_still_there_hears_the_hello_first() {
    let (code, _, err, sent) = run_proxy(&["x3"], false);
    assert_eq!(code, Some(3), "{err}");
    assert_eq!(sent.first().map(String::as_str), Some("h"), "{sent:?}");
}

#[test]
fn a_refusal_is_read_when_the_supervisor_closed_with_the_programs_packets_unread() {
    // The supervisor closes its end with the program's hello (or a forwarded signal) unread:
    // the kernel then reports ECONNRESET to the program once, before the refusal still queued
    // for it (`unix_release_sock` sets the peer's error; `__skb_try_recv_datagram` returns it
    // first). The program is held with ptrace meanwhile (a signal would be forwarded, and
    // that send would take the error first), so the close is sure to come before its read.
    use nix::sys::{ptrace, wait};
    let (child, sup) = start_proxy(&[]);
    let mut ready = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&sup),
        nix::poll::PollFlags::POLLIN,
    )];
    assert_eq!(
        nix::poll::poll(&mut ready, nix::poll::PollTimeout::from(10_000u16)).unwrap(),
        1,
        "the program said hello"
    );
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    ptrace::seize(pid, ptrace::Options::empty()).unwrap();
    ptrace::interrupt(pid).unwrap();
    match wait::waitpid(pid, Some(wait::WaitPidFlag::__WALL)).unwrap() {
        wait::WaitStatus::PtraceEvent(..) => {}
        other => panic!("the program did not stop for the interrupt: {other:?}"),
    }
    nix::sys::socket::send(
        sup.as_raw_fd(),
        b"rrefused by tyba: `curl` uses the network",
        MsgFlags::empty(),
    )
    .unwrap();
    drop(sup);
    ptrace::detach(pid, None).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert_eq!(err, "tyba: refused by tyba: `curl` uses the network\n");
}
