//! Holding a vfork parent while tyba rewrites an exec's file name in memory it shares.
//!
//! tyba runs something else in place of an exec (its refusal program, an approved command's
//! proxy, the agent's own installed file) by rewriting the exec's file name in the process's
//! memory before answering `Continue` (`seccomp_unotify(2)`: the arguments are read by the
//! kernel after the answer). A `vfork(2)`/`posix_spawn(3)` child shares that memory with its
//! parent, whose copy of the name must be given back. The parent resumes the moment the
//! child's exec is past its point of no return, and from then on the memory is the parent's
//! to free and reuse: a write after that corrupts whatever now lives there (it crashed a
//! Python caller whose freed argument block had been reused).
//!
//! So the parent is held: before the answer, the parent's threads that are waiting in a
//! `clone`/`vfork` (all its threads when none is) are attached with `PTRACE_SEIZE` and
//! interrupted (`PTRACE_INTERRUPT`, ptrace(2)). A thread waiting for its vfork child cannot
//! stop there; it stops on its way back to user space, before running an instruction. Once
//! every held thread is stopped and the child no longer shares the memory (its exec done,
//! or the child gone), the name is given back, and the threads are detached (a signal that
//! arrived meanwhile is delivered on `PTRACE_DETACH`). Attachments belong to the thread that
//! made them, so each hold has a thread of its own; when that thread ends, the kernel
//! detaches whatever it still holds.

use crate::procfs::Mem;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a held parent may wait for its child's exec before tyba lets it go without
/// giving the name back (the child's exec failed and the child runs on: no point of no
/// return was reached; the name then stays rewritten, never written into a running process).
const EXEC_WAIT: Duration = Duration::from_secs(10);

/// The parent's copy of a rewritten exec file name, to give back.
#[derive(Debug)]
pub(crate) struct NameBack {
    /// The child whose exec was rewritten (supervisor's PID namespace).
    pub child: u32,
    /// Where the name is, in both processes' shared memory.
    pub name_ptr: u64,
    /// The name as it was, with its NUL.
    pub old_name: Vec<u8>,
    /// The name as tyba wrote it, with its NUL (never longer than `old_name`).
    pub new_name: Vec<u8>,
}

/// A vfork parent held by a thread of its own ([`ParentHold::start`]).
#[derive(Debug)]
pub(crate) struct ParentHold {
    tx: mpsc::SyncSender<NameBack>,
}

impl ParentHold {
    /// Attaches to and interrupts the threads of process `parent` that may run after the
    /// exec of its vfork child is done; returns once they are attached.
    ///
    /// # Errors
    /// Why the parent cannot be held: no thread could be started, a thread is traced by
    /// another process, ptrace is not permitted (Yama `ptrace_scope` 3), the parent is gone.
    pub(crate) fn start(parent: u32, child: u32) -> Result<ParentHold, String> {
        // The parent's identity, pinned: a pidfd taken while `child` still shares its memory
        // stays that process's (never a later process given the same number), and ptrace is
        // used only while it is alive.
        let pidfd = crate::sys::pidfd_open(parent as i32)
            .map_err(|e| format!("its parent cannot be held: {e}"))?;
        if !crate::sys::same_address_space(child, parent).is_ok_and(|same| same) {
            return Err(
                "its parent cannot be held: no longer the process sharing its memory".into(),
            );
        }
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let (tx, rx) = mpsc::sync_channel::<NameBack>(1);
        std::thread::Builder::new()
            .name("tyba-hold".into())
            .spawn(move || {
                let held = match seize_threads(parent, &pidfd) {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                // Dropped unused: the name was not rewritten; ending the thread detaches.
                if let Ok(back) = rx.recv() {
                    give_back(&held, &back);
                }
            })
            .map_err(|e| format!("no thread to hold its parent: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ParentHold { tx }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the thread holding its parent ended".into()),
        }
    }

    /// Called once the exec was answered `Continue` with the name rewritten: gives `back`
    /// to the parent when it is safe ([`give_back`]), on the holding thread.
    pub(crate) fn release_after_exec(self, back: NameBack) {
        let _ = self.tx.send(back);
    }
}

/// The threads of `parent` to hold: those in a `clone`, `clone3` or `vfork` system call (the
/// one waiting for its vfork child among them), or every thread when none is (a child
/// made with `CLONE_VM` and no `CLONE_VFORK`: its parent runs on). From
/// `/proc/<pid>/task/<tid>/syscall` (proc(5)).
fn threads_to_hold(parent: u32) -> Result<Vec<u32>, String> {
    let tasks = std::fs::read_dir(format!("/proc/{parent}/task"))
        .map_err(|e| format!("its parent's threads cannot be listed: {e}"))?;
    let all: Vec<u32> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let spawning: Vec<u32> = all
        .iter()
        .copied()
        .filter(|t| {
            std::fs::read_to_string(format!("/proc/{parent}/task/{t}/syscall"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok())
                .is_some_and(|nr| {
                    nr == libc::SYS_clone || nr == libc::SYS_clone3 || nr == libc::SYS_vfork
                })
        })
        .collect();
    Ok(if spawning.is_empty() { all } else { spawning })
}

/// Seizes and interrupts each thread to hold. On failure, what was attached is let go when
/// the holding thread ends (ptrace(2): a tracer's exit detaches its tracees). Once attached,
/// each thread is checked to be the parent's, and the parent (`pidfd`) to be alive: a thread
/// number reused by another process between the listing and the attachment is never held.
fn seize_threads(parent: u32, pidfd: &OwnedFd) -> Result<Vec<Pid>, String> {
    let cannot =
        |e: &dyn std::fmt::Display| format!("its parent cannot be held while its exec runs: {e}");
    let mut held = Vec::new();
    for t in threads_to_hold(parent)? {
        let pid = Pid::from_raw(t as i32);
        ptrace::seize(pid, ptrace::Options::empty())
            .and_then(|()| ptrace::interrupt(pid))
            .map_err(|e| cannot(&e))?;
        held.push(pid);
        // An attached thread that ends stays a zombie for its tracer: its number is not
        // given to another thread while this holds it.
        if !std::path::Path::new(&format!("/proc/{parent}/task/{t}")).exists() {
            return Err(cannot(&"a thread left it"));
        }
    }
    crate::sys::pidfd_send_signal(pidfd.as_fd(), 0).map_err(|e| cannot(&e))?;
    Ok(held)
}

/// Waits until the held thread `pid` is stopped: `Some(signal to deliver on detach)` (a
/// signal-delivery stop's signal; none for the interrupt's own stop), `None` when it is gone
/// or the deadline passed.
#[allow(clippy::option_option)]
fn wait_stopped(pid: Pid, deadline: Instant) -> Option<Option<Signal>> {
    let mut pause = Duration::from_micros(20);
    loop {
        match waitpid(pid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(WaitStatus::PtraceEvent(..)) => return Some(None),
            Ok(WaitStatus::Stopped(_, sig)) => return Some(Some(sig)),
            // Exited, killed, or no longer ours to wait for.
            Ok(_) | Err(_) => return None,
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

/// Once every held thread is stopped and the child no longer shares the parent's memory,
/// writes the old name back where the rewrite still is, then detaches.
fn give_back(held: &[Pid], back: &NameBack) {
    let deadline = Instant::now() + EXEC_WAIT;
    let mut stopped = Vec::with_capacity(held.len());
    for &pid in held {
        if let Some(sig) = wait_stopped(pid, deadline) {
            stopped.push((pid, sig));
        }
    }
    let Some(&(leader, _)) = stopped.first() else {
        return;
    };
    let mut pause = Duration::from_micros(20);
    let exec_done = loop {
        match crate::sys::same_address_space(back.child, leader.as_raw() as u32) {
            Ok(true) => {}
            // A new image, or the child gone: the kernel has the name it needed.
            Ok(false) | Err(_) => break true,
        }
        if Instant::now() >= deadline {
            break false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    };
    if exec_done && stopped.len() == held.len() {
        if let Ok(pm) = Mem::open_rw(leader.as_raw() as u32) {
            if pm.read(back.name_ptr, back.new_name.len()).ok().as_deref()
                == Some(back.new_name.as_slice())
            {
                let _ = pm.write(back.name_ptr, &back.old_name[..back.new_name.len()]);
            }
        }
    }
    for (pid, sig) in stopped {
        let _ = ptrace::detach(pid, sig);
    }
}
