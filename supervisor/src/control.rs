//! Live session controls (issue 7): the autonomy level a running session decides with, its
//! counts of decisions, and the way to end it.
//!
//! One [`SessionControl`] is shared by the notify loop (which reads the level for every
//! decision and counts what it decides), the broker (which changes the level and asks for the
//! stop on behalf of `tyba autonomy` and `tyba stop`, and counts asks) and `tyba run` (which
//! prints the summary). Nothing here is reachable from the sandbox: the only ways in are the
//! person's socket (out of the sandbox's reach, see [`crate::broker::paths`]) and the
//! same-terminal prompt's keys.
//!
//! Terms:
//! - **allowed**: commands the agent started that the supervisor let through without asking
//!   (green, remembered with `always`, or yellow at `high`); the agent program's own
//!   connections to its model hosts and file changes inside the worktree are not counted;
//! - **asked**: asks that waited for the person (the sandbox's and the agent hook's);
//! - **denied**: refusals, by the policy at once or by the person's answer, or because the
//!   session ended. An ask the person denied counts as asked and as denied.
//!
//! A change of level applies to the next decision: an ask already waiting stays asked.
//!
//! ```
//! use tyba_supervisor::control::{SessionControl, SessionInfo};
//! use tyba_policy::Autonomy;
//! let c = SessionControl::new(Autonomy::Medium, SessionInfo::new(vec!["claude".into()], "auto"));
//! assert_eq!(c.set_autonomy(Autonomy::Low), Autonomy::Medium);
//! assert_eq!(c.autonomy(), Autonomy::Low);
//! ```

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tyba_policy::Autonomy;

/// How long the agent's processes get to end after `SIGTERM` before the sandbox is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// What a session is, as `tyba sessions` lists it (fixed at the start).
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The agent's argv as the person gave it.
    pub agent: Vec<String>,
    /// The execution mode (`safe`, `auto`, `dangerous_bypass`).
    pub exec_mode: String,
    /// The worktree's own git dir, to read the current branch from its `HEAD`.
    pub git_dir: Option<PathBuf>,
    /// When the session started.
    pub started_at: SystemTime,
}

impl SessionInfo {
    /// A session of `agent` in `exec_mode`, starting now, without a git dir.
    pub fn new(agent: Vec<String>, exec_mode: &str) -> SessionInfo {
        SessionInfo {
            agent,
            exec_mode: exec_mode.to_string(),
            git_dir: None,
            started_at: SystemTime::now(),
        }
    }

    /// The branch checked out in the worktree now (`None` when detached or not git).
    ///
    /// `HEAD` is in a directory the agent can write: it is read only when it is a regular
    /// file (not a FIFO, device or symlink), without blocking, and at most 4 KiB of it.
    pub fn branch(&self) -> Option<String> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.git_dir.as_ref()?.join("HEAD"))
            .ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut head = String::new();
        f.take(4096).read_to_string(&mut head).ok()?;
        head.trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_string)
    }
}

/// What a decision counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Let through without asking.
    Allowed,
    /// Put to the person.
    Asked,
    /// Refused.
    Denied,
}

/// The session's counts so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Actions let through without asking.
    pub allowed: u64,
    /// Asks put to the person.
    pub asked: u64,
    /// Refusals.
    pub denied: u64,
}

/// Errors asking a session to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The session was already asked to stop.
    #[error("the session is already stopping (asked by {by})")]
    AlreadyStopping {
        /// Who asked first.
        by: String,
    },
    /// The thread that ends the sandbox could not start.
    #[error("cannot start ending the sandbox: {0}")]
    Thread(std::io::Error),
}

#[derive(Debug)]
struct Sandbox {
    /// A pidfd of stage 1 (the supervisor's child): signalled without a pid-reuse race.
    stage1: OwnedFd,
    /// Stage 2's pid in the supervisor's namespace (PID 1 of the sandbox).
    stage2: u32,
}

/// The live controls of one session; share it with `Arc`.
#[derive(Debug)]
pub struct SessionControl {
    info: SessionInfo,
    level: AtomicU8,
    allowed: AtomicU64,
    asked: AtomicU64,
    denied: AtomicU64,
    sandbox: Mutex<Option<Sandbox>>,
    stopped: Mutex<Option<String>>,
    ended: AtomicBool,
}

fn encode(a: Autonomy) -> u8 {
    match a {
        Autonomy::Low => 0,
        Autonomy::Medium => 1,
        Autonomy::High => 2,
    }
}

fn decode(v: u8) -> Autonomy {
    match v {
        1 => Autonomy::Medium,
        2 => Autonomy::High,
        // Anything else cannot be stored; the strictest level if it ever were.
        _ => Autonomy::Low,
    }
}

impl SessionControl {
    /// Controls for a session starting at `level`.
    pub fn new(level: Autonomy, info: SessionInfo) -> Arc<SessionControl> {
        Arc::new(SessionControl {
            info,
            level: AtomicU8::new(encode(level)),
            allowed: AtomicU64::new(0),
            asked: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            sandbox: Mutex::new(None),
            stopped: Mutex::new(None),
            ended: AtomicBool::new(false),
        })
    }

    /// What the session is.
    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    /// The level the next decision is made at.
    pub fn autonomy(&self) -> Autonomy {
        decode(self.level.load(Ordering::SeqCst))
    }

    /// Sets the level for the next decisions; returns the previous one. Whether the caller may
    /// raise it (the person's confirmation for `high`) is checked by the caller
    /// ([`crate::broker::Broker::set_autonomy`]).
    pub fn set_autonomy(&self, level: Autonomy) -> Autonomy {
        decode(self.level.swap(encode(level), Ordering::SeqCst))
    }

    /// Counts one decision.
    pub fn count(&self, c: Counted) {
        let n = match c {
            Counted::Allowed => &self.allowed,
            Counted::Asked => &self.asked,
            Counted::Denied => &self.denied,
        };
        n.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        Counts {
            allowed: self.allowed.load(Ordering::Relaxed),
            asked: self.asked.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
        }
    }

    /// Who stopped the session, once someone has.
    pub fn stopped_by(&self) -> Option<String> {
        self.stopped.lock().ok().and_then(|g| g.clone())
    }

    /// Called by the launcher once the sandbox runs: what [`SessionControl::stop`] ends.
    /// A stop asked for before this ends the sandbox now.
    pub(crate) fn register_sandbox(self: &Arc<Self>, stage1: i32, stage2: u32) {
        let Ok(pidfd) = crate::sys::pidfd_open(stage1) else {
            return;
        };
        if let Ok(mut g) = self.sandbox.lock() {
            *g = Some(Sandbox {
                stage1: pidfd,
                stage2,
            });
        }
        if self.stopped_by().is_some() {
            let me = Arc::clone(self);
            let _ = std::thread::Builder::new()
                .name("tyba-stop".into())
                .spawn(move || me.end_sandbox());
        }
    }

    /// Called by the launcher when the sandbox has exited (before its pids are reaped).
    pub(crate) fn sandbox_ended(&self) {
        self.ended.store(true, Ordering::SeqCst);
        if let Ok(mut g) = self.sandbox.lock() {
            *g = None;
        }
    }

    /// Ends the session on behalf of `by`: the sandbox's processes are frozen (`SIGSTOP`), so
    /// that nothing more happens while `meanwhile` runs (the broker denies the pending asks
    /// there, [`crate::broker::Broker::stop`]); then they get `SIGTERM` and `SIGCONT`, and
    /// after [`STOP_GRACE`] the sandbox is killed (stage 1 with `SIGKILL`, which takes the
    /// sandbox's PID namespace with it). Returns once `meanwhile` has run; the launcher's
    /// wait returns when the sandbox is gone.
    ///
    /// # Errors
    /// [`ControlError::AlreadyStopping`] on a second call (`meanwhile` is not run then);
    /// [`ControlError::Thread`].
    pub fn stop(self: &Arc<Self>, by: &str, meanwhile: impl FnOnce()) -> Result<(), ControlError> {
        {
            let mut g = self
                .stopped
                .lock()
                .map_err(|_| ControlError::AlreadyStopping {
                    by: "(unknown)".into(),
                })?;
            if let Some(first) = g.as_ref() {
                return Err(ControlError::AlreadyStopping { by: first.clone() });
            }
            *g = Some(by.to_string());
        }
        let stage2 = self
            .sandbox
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.stage2));
        if let Some(root) = stage2 {
            signal_descendants(root, libc::SIGSTOP);
        }
        meanwhile();
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("tyba-stop".into())
            .spawn(move || me.end_sandbox())
            .map(|_| ())
            .map_err(ControlError::Thread)
    }

    fn end_sandbox(&self) {
        let stage2 = match self.sandbox.lock() {
            Ok(g) => match g.as_ref() {
                Some(s) => s.stage2,
                None => return,
            },
            Err(_) => return,
        };
        // A signal sent to a stopped process waits; SIGCONT then lets SIGTERM act first.
        for sig in [libc::SIGTERM, libc::SIGCONT] {
            signal_descendants(stage2, sig);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline && !self.ended.load(Ordering::SeqCst) {
            let exited = match self.sandbox.lock() {
                Ok(g) => g.as_ref().is_none_or(|s| has_exited(s.stage1.as_fd())),
                Err(_) => true,
            };
            if exited {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(g) = self.sandbox.lock() {
            if let Some(s) = g.as_ref() {
                // Stage 2 has a parent-death signal: it dies with stage 1, and with it, as
                // PID 1, every process of the sandbox.
                let _ = crate::sys::pidfd_send_signal(s.stage1.as_fd(), libc::SIGKILL);
            }
        }
    }
}

fn has_exited(pidfd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// Sends `sig` to every descendant of `root` (not `root` itself: PID 1 of the sandbox ignores
/// what it has no handler for, and it exits when the agent does).
fn signal_descendants(root: u32, sig: i32) {
    let tree = crate::procfs::descendants(root);
    let Ok(s) = nix::sys::signal::Signal::try_from(sig) else {
        return;
    };
    for pid in tree {
        if let Ok(raw) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), s);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn control() -> Arc<SessionControl> {
        SessionControl::new(Autonomy::Medium, SessionInfo::new(vec!["a".into()], "auto"))
    }

    #[test]
    fn the_level_round_trips_and_the_previous_one_is_returned() {
        let c = control();
        for (to, before) in [
            (Autonomy::High, Autonomy::Medium),
            (Autonomy::Low, Autonomy::High),
            (Autonomy::Medium, Autonomy::Low),
        ] {
            assert_eq!(c.set_autonomy(to), before);
            assert_eq!(c.autonomy(), to);
        }
    }

    #[test]
    fn an_unknown_stored_value_reads_as_the_strictest_level() {
        assert_eq!(decode(7), Autonomy::Low);
    }

    #[test]
    fn counts_are_kept_apart() {
        let c = control();
        c.count(Counted::Allowed);
        c.count(Counted::Allowed);
        c.count(Counted::Asked);
        c.count(Counted::Denied);
        assert_eq!(
            c.counts(),
            Counts {
                allowed: 2,
                asked: 1,
                denied: 1
            }
        );
    }

    #[test]
    fn a_second_stop_is_refused_and_names_the_first() {
        let c = control();
        let mut ran = 0;
        c.stop("tyba stop (pid 1)", || ran += 1).unwrap();
        match c.stop("someone else", || ran += 1) {
            Err(ControlError::AlreadyStopping { by }) => assert_eq!(by, "tyba stop (pid 1)"),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.stopped_by().as_deref(), Some("tyba stop (pid 1)"));
        assert_eq!(ran, 1, "what runs meanwhile runs once");
    }

    #[test]
    fn the_branch_is_read_from_head_and_detached_is_none() {
        let t = tempfile::tempdir().unwrap();
        let mut info = SessionInfo::new(Vec::new(), "auto");
        info.git_dir = Some(t.path().to_path_buf());
        std::fs::write(t.path().join("HEAD"), "ref: refs/heads/tyba/abc\n").unwrap();
        assert_eq!(info.branch().as_deref(), Some("tyba/abc"));
        std::fs::write(t.path().join("HEAD"), "0123456789abcdef\n").unwrap();
        assert_eq!(info.branch(), None);
    }
}
