//! Launching the sandbox: the process tree of the crate docs, the hand-over of the seccomp
//! listener, the pty relay, and the end of the session.
//!
//! The listener crosses from the sandbox to the supervisor without `sendmsg` (which the filter
//! could hold while the supervisor waits for it: `notes/kernel-facts.md`): stage 2 writes the
//! fd number on a pipe and the supervisor takes the fd with `pidfd_getfd(2)`, then answers on
//! a second pipe; stage 2 execs nothing before that answer, so no notified call can wait
//! on a supervisor that is not listening, and a supervisor that fails never lets it start.

use crate::approve::Approver;
use crate::control::SessionControl;
use crate::notify::{self, AuditEvent, Notifier};
use crate::outside_fs::OutsideMode;
use crate::sandbox::{landlock_ruleset, restrict, Enforcement, SandboxPlan};
use crate::session::Session;
use crate::sys::{self, Forked};
use crate::SandboxUnavailable;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use std::ffi::{CString, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use tyba_policy::{ExecMode, Policy};

/// Everything `tyba run` decided before launching.
#[derive(Debug)]
pub struct SessionConfig {
    /// The session and its worktree.
    pub session: Session,
    /// What Landlock grants and what is bound read-only.
    pub plan: SandboxPlan,
    /// What the kernel enforces (from [`Enforcement::probe`]).
    pub enforcement: Enforcement,
    /// `--allow-weaker-sandbox`: start even when part of the sandbox cannot be enforced.
    pub allow_weaker: bool,
    /// The agent program, absolute.
    pub program: PathBuf,
    /// Its argv, `argv[0]` first.
    pub argv: Vec<OsString>,
    /// Its environment (already scrubbed of secrets).
    pub env: Vec<(OsString, OsString)>,
    /// The effective policy.
    pub policy: Policy,
    /// The live autonomy level, the counts and the stop (`tyba autonomy`, `tyba stop`).
    pub control: Arc<SessionControl>,
    /// Execution mode for decisions.
    pub exec_mode: ExecMode,
    /// `host[:port]` the agent program itself may reach (policy plus `--allow-host`).
    pub agent_hosts: Vec<String>,
    /// `~` for classification.
    pub home: Option<PathBuf>,
    /// Give the agent its own pty when standard input is a terminal.
    pub use_pty: bool,
    /// The watch of the person's checkout (`--here`), sealed before the agent program's
    /// first exec can be answered ([`crate::here_watch::HereWatch::seal`]).
    pub here_watch: Option<Arc<crate::here_watch::HereWatch>>,
    /// Work of the caller's to start once the agent may start (after the sandbox's "go"),
    /// not while the sandbox is set up: on two CPUs, a thread started then takes a CPU
    /// from the set-up's chain (docs/performance-run.md, run 20).
    pub after_go: Option<AfterGo>,
}

/// Work to start once the agent may start ([`SessionConfig::after_go`]).
pub struct AfterGo(pub Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for AfterGo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterGo(..)")
    }
}

/// How a session ended.
#[derive(Debug)]
pub struct Outcome {
    /// The agent's exit status (128 + signal number when killed by a signal).
    pub exit_status: i32,
    /// The signal that killed the agent, when one did (as its sandbox's init reaped it:
    /// `exit(139)` is not SIGSEGV); `None` when it exited, or when the session was ended by
    /// a signal to the supervisor ([`end_signal`]).
    pub agent_signal: Option<i32>,
    /// What the supervisor decided on notified calls, in order (denials, and asks answered).
    pub events: Vec<AuditEvent>,
    /// Things the sandbox reported it could not enforce, in order.
    pub warnings: Vec<String>,
    /// Whether a process of the session made a hard link (`link`, `linkat`): the changes
    /// of a `--here` session are then found by the full look ([`crate::here_watch`]).
    pub hard_links: bool,
    /// The end signal to the supervisor that ended the session ([`end_session_on_signals`]),
    /// when one did: then [`Outcome::exit_status`] is 128 + its number. One that came once
    /// the sandbox had ended by itself is not counted.
    pub ended_by: Option<Signal>,
    /// Stage 1, reaped when the outcome is dropped.
    _stage1: Reaper,
}

/// Errors of [`run`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The sandbox cannot be set up as required.
    #[error(transparent)]
    Unavailable(#[from] SandboxUnavailable),
    /// An operating-system error in the supervisor.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

fn io_err(what: &'static str) -> impl FnOnce(std::io::Error) -> RunError {
    move |source| RunError::Io { what, source }
}

fn nix_err(what: &'static str) -> impl FnOnce(nix::errno::Errno) -> RunError {
    move |e| RunError::Io {
        what,
        source: std::io::Error::from(e),
    }
}

struct ChildCtx {
    sup_pid: Pid,
    status_w: Option<OwnedFd>,
    /// Stage 2's end of its link to the supervisor (`crate::runner`).
    ctl: Option<OwnedFd>,
    ack_r: Option<OwnedFd>,
    /// The agent's end of its pty, opened by stage 2 in the sandbox's private devpts.
    pty_slave: Option<OwnedFd>,
    /// The person's terminal size when the agent gets a pty (`Some(None)`: size unknown).
    want_pty: Option<Option<libc::winsize>>,
    /// Which of the agent's standard fds (0, 1, 2) are its pty: those that are a terminal in
    /// the supervisor, all three when standard input is one.
    pty_fds: [bool; 3],
    plan: SandboxPlan,
    abi: i32,
    allow_weaker: bool,
    /// The user-notification filter (installed last, with the listener).
    filter: Vec<sys::SockFilter>,
    /// The static filters (`seccompiler`), installed first.
    static_filters: Vec<seccompiler::BpfProgram>,
    uid: u32,
    gid: u32,
    /// The name servers stage 2 binds the resolver relay's sockets to (`crate::dns`).
    nameservers: Vec<std::net::IpAddr>,
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    /// Where stage 1 sends the sandbox's `/dev/fuse`, once opened in the sandbox's user
    /// namespace, to the supervisor's server ([`crate::outside_fs::serve_when_sent`]);
    /// `None` when there are no covers.
    fuse_to_server: Option<OwnedFd>,
    /// The outside-files filesystem's detached mount, made by stage 1 (`crate::outside_fs`).
    fuse: Option<OwnedFd>,
    /// Processes and threads the sandbox may hold at once (`[limits] processes`).
    max_processes: u32,
}

/// The signals that end a session instead of the supervisor (`signal(7)`): terminate, hang-up
/// (the person's terminal closed), interrupt and quit (from a terminal without a pty, or
/// `kill`).
pub const END_SIGNALS: &[Signal] = &[
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
];

/// The first end signal received, and the sandbox to kill when one is.
#[derive(Debug, Default)]
struct EndState {
    received: Option<Signal>,
    /// A pidfd of stage 1 while a session runs: killing it brings the namespace down
    /// (parent-death signals, then the PID namespace's init).
    sandbox: Option<OwnedFd>,
}

static END_STATE: OnceLock<Mutex<EndState>> = OnceLock::new();

/// Makes [`END_SIGNALS`] end the running session (its sandbox killed, then [`run`] returns
/// as for an agent that exited, with exit status 128 + the signal's number) instead of
/// killing the supervisor before it cleans up. Call it first, before any thread starts: it
/// blocks those signals in the calling thread (which every later thread and child inherits;
/// the agent's signal state is reset before it starts) and takes them on a thread of its own
/// with `sigwait(3)`. A signal that comes before the sandbox starts ends it as soon as it
/// does. Calling it again does nothing.
///
/// # Errors
/// [`RunError::Io`] when the mask cannot be set or the thread cannot start.
pub fn end_session_on_signals() -> Result<(), RunError> {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};
    if END_STATE.get().is_some() {
        return Ok(());
    }
    let mut set = SigSet::empty();
    for s in END_SIGNALS {
        set.add(*s);
    }
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)
        .map_err(nix_err("blocking the end signals"))?;
    let state = END_STATE.get_or_init(|| Mutex::new(EndState::default()));
    std::thread::Builder::new()
        .name("tyba-signals".into())
        .spawn(move || loop {
            // sigwait fails only for an invalid set: stop rather than spin.
            let Ok(sig) = set.wait() else { return };
            if let Ok(mut s) = state.lock() {
                s.received.get_or_insert(sig);
                if let Some(p) = &s.sandbox {
                    let _ = sys::pidfd_send_signal(p.as_fd(), libc::SIGKILL);
                }
            }
        })
        .map_err(io_err("starting the signal thread"))?;
    Ok(())
}

/// The end signal that ended (or will end) the session, if one came
/// ([`end_session_on_signals`]).
pub fn end_signal() -> Option<Signal> {
    END_STATE
        .get()
        .and_then(|m| m.lock().ok().and_then(|s| s.received))
}

/// Registers stage 1 as the sandbox an end signal kills; kills it at once if one came.
fn arm_end_signals(stage1: Pid) {
    let Some(m) = END_STATE.get() else { return };
    let Ok(pfd) = sys::pidfd_open(stage1.as_raw()) else {
        return;
    };
    if let Ok(mut s) = m.lock() {
        if s.received.is_some() {
            let _ = sys::pidfd_send_signal(pfd.as_fd(), libc::SIGKILL);
        }
        s.sandbox = Some(pfd);
    }
}

fn disarm_end_signals() {
    if let Some(Ok(mut s)) = END_STATE.get().map(|m| m.lock()) {
        s.sandbox = None;
    }
}

fn cstring(b: &[u8]) -> Result<CString, RunError> {
    CString::new(b).map_err(|_| RunError::Io {
        what: "argument contains a NUL byte",
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })
}

/// Launches the agent in its sandbox and serves its notified calls until it exits.
///
/// # Errors
/// [`RunError::Unavailable`] when the sandbox cannot be enforced as required (nothing was
/// started then); [`RunError::Io`] for supervisor-side failures.
pub fn run(cfg: SessionConfig, approver: Arc<dyn Approver>) -> Result<Outcome, RunError> {
    run_with(cfg, move || approver)
}

/// [`run`] with the approver made by `approver` on a thread of its own once the sandbox's
/// stage 1 is forked: what starts it (a broker's sockets, its runtime and audit log, about
/// half a millisecond) runs while the sandbox sets itself up, not before, and without holding
/// up the supervisor's answers to the sandbox's set-up. `approver` has run when the agent
/// starts (the "go" waits for it); when the launch fails before the fork it is not called.
/// Until it has run, whatever needs the approver waits for it.
///
/// # Errors
/// As [`run`].
pub fn run_with(
    mut cfg: SessionConfig,
    approver: impl FnOnce() -> Arc<dyn Approver> + Send + 'static,
) -> Result<Outcome, RunError> {
    let after_go = cfg.after_go.take();
    if cfg.enforcement.filesystem_unenforceable && !cfg.allow_weaker {
        return Err(SandboxUnavailable(format!(
            "the kernel cannot enforce the filesystem rules ({}); rerun with --allow-weaker-sandbox to start anyway",
            cfg.enforcement.not_enforced.join("; ")
        ))
        .into());
    }
    if !cfg.plan.unprotected.is_empty() && !cfg.allow_weaker {
        return Err(SandboxUnavailable(format!(
            "cannot protect the git files the person's git obeys: {}; rerun with --allow-weaker-sandbox to start anyway",
            cfg.plan.unprotected.join("; ")
        ))
        .into());
    }
    let here_watch = cfg.here_watch.clone();
    crate::launch_trace::mark("run:run-with");
    let filter_err = |e| RunError::Io {
        what: "building the seccomp filters",
        source: std::io::Error::other(e),
    };
    let mut notified = crate::bpf::notified_syscalls();
    if here_watch.is_some() {
        notified.extend(crate::bpf::LINK_SYSCALLS);
    }
    let filter = crate::bpf::notify_filter(&notified).map_err(filter_err)?;
    let static_filters = crate::bpf::static_filters().map_err(filter_err)?;
    let (status_r, status_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(nix_err("pipe"))?;
    let (ack_r, ack_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(nix_err("pipe"))?;
    let (ctl_sup, ctl_stage) = sys::seqpacket_pair().map_err(io_err("socketpair"))?;
    // tyba's own executable: an approved command's asking process execs it as the command's
    // proxy (`crate::runner`), so the agent's domain may read and execute that one file.
    let mut plan = cfg.plan.clone();
    if let Ok(exe) = std::env::current_exe().and_then(std::fs::canonicalize) {
        if !plan.read_only.contains(&exe) {
            plan.read_only.push(exe);
        }
    }
    // Held until the session ends: the copy of `/etc/profile` bound over it in the sandbox.
    let _login_profile = login_profile(&mut plan, &cfg.env);
    // The entries around the worktree and in the home that the plan does not open, served by
    // the supervisor's own filesystem (`crate::outside_fs`, `--outside-files`).
    // The history files the server refuses quietly, their `~/` the person's home.
    let history = crate::outside_fs::HistoryFiles::new(&plan.history_files, cfg.home.as_deref());
    // Told (and logged) once the approver is made, after the fork.
    let outside_note =
        match crate::outside_fs::prepare(&plan, cfg.home.as_deref(), plan.outside_files) {
            Ok((covers, note)) => {
                plan.outside_covers = covers;
                note
            }
            Err(e) if cfg.allow_weaker => Some(crate::outside_fs::notice(&e.to_string())),
            Err(e) => {
                return Err(SandboxUnavailable(format!("--outside-files require: {e}")).into());
            }
        };
    let (fuse_sup, fuse_stage) = if plan.outside_covers.is_empty() {
        (None, None)
    } else {
        let (a, b) = sys::seqpacket_pair().map_err(io_err("socketpair"))?;
        (Some(a), Some(b))
    };
    // The agent's pty is allocated by stage 2 in the sandbox's own devpts instance, never
    // in the host's (whose other terminals are the person's): see `private_devpts`.
    // A terminal among the standard fds is the person's: the agent never holds it. With
    // standard input a terminal the agent's three standard fds are its pty (keys relayed in,
    // output out); with only standard output or error one (`tyba run … < file`), those are,
    // and the relay only carries output.
    let terms = [Term::In, Term::Out, Term::Err].map(|t| t.with(|fd| nix::unistd::isatty(fd)));
    let terms = terms.map(|r| r.unwrap_or(false));
    let pty_fds = if terms[0] { [true; 3] } else { terms };
    let person = [Term::In, Term::Out, Term::Err]
        .into_iter()
        .zip(terms)
        .find_map(|(t, is)| is.then_some(t));
    let want_pty = person
        .filter(|_| cfg.use_pty)
        .map(|t| t.with(sys::get_winsize));
    let ctx = ChildCtx {
        sup_pid: nix::unistd::getpid(),
        status_w: Some(status_w),
        ctl: Some(ctl_stage),
        ack_r: Some(ack_r),
        pty_slave: None,
        want_pty,
        pty_fds,
        plan: plan.clone(),
        abi: cfg.enforcement.landlock_abi,
        allow_weaker: cfg.allow_weaker,
        max_processes: cfg.policy.config().max_processes,
        filter,
        static_filters,
        uid: nix::unistd::geteuid().as_raw(),
        gid: nix::unistd::getegid().as_raw(),
        nameservers: crate::dns::nameservers(),
        program: cstring(cfg.program.as_os_str().as_bytes())?,
        argv: cfg
            .argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<_, _>>()?,
        env: cfg
            .env
            .iter()
            .map(|(k, v)| {
                let mut b = k.as_bytes().to_vec();
                b.push(b'=');
                b.extend_from_slice(v.as_bytes());
                cstring(&b)
            })
            .collect::<Result<_, _>>()?,
        fuse_to_server: fuse_stage,
        fuse: None,
    };
    crate::launch_trace::mark("run:fork");
    // SAFETY: other threads run here (the broker's tokio runtime, the terminal prompt, the
    // audit writer), but stage 1 and everything it forks until the agent's exec only allocate
    // (glibc's fork handlers keep `malloc` usable), make system calls and write to the status
    // pipe of their own: no stdio, `std::env` or shared lock (the notify loop and the pty
    // relay start below, after the fork).
    let a_pid = match unsafe { sys::fork() }.map_err(io_err("fork"))? {
        Forked::Child => stage1(ctx),
        Forked::Parent(p) => Pid::from_raw(p),
    };
    arm_end_signals(a_pid);
    let deferred = Arc::new(crate::approve::Deferred::default());
    let maker = {
        let d = Arc::clone(&deferred);
        std::thread::Builder::new()
            .name("tyba-approver".into())
            .spawn(move || {
                // A maker that panics leaves a deny-all approver behind.
                struct Unmade(Arc<crate::approve::Deferred>);
                impl Drop for Unmade {
                    fn drop(&mut self) {
                        self.0.fail();
                    }
                }
                let unmade = Unmade(Arc::clone(&d));
                d.set(approver());
                drop(unmade);
            })
            .map_err(io_err("starting the approval broker"))?
    };
    // Joined on every way out: a launch that fails still has its approver made (and so
    // its broker started) before it returns, for its caller to close.
    let maker = JoinOnDrop(Some(maker));
    let early_approver: Arc<dyn Approver> = Arc::clone(&deferred) as Arc<dyn Approver>;
    let ChildCtx {
        status_w,
        ctl,
        ack_r,
        pty_slave,
        fuse_to_server,
        uid,
        gid,
        ..
    } = ctx;
    drop((status_w, ctl, ack_r, pty_slave, fuse_to_server));
    // The outside-files server, waiting for the device while the sandbox sets itself up.
    let outside = match fuse_sup {
        None => None,
        Some(sock) => {
            let served = crate::outside_fs::OutsideFs::new(
                &plan.outside_covers,
                Arc::clone(&early_approver),
                history.clone(),
                uid,
                gid,
                Some(&plan.tmp_dir),
            )
            .and_then(|fs| {
                let mut writable = vec![plan.worktree.clone(), plan.tmp_dir.clone()];
                writable.extend(plan.read_write.iter().cloned());
                fs.set_agent_writable(writable);
                Ok((fs.clone(), crate::outside_fs::serve_when_sent(fs, sock)?))
            });
            match served {
                Ok(s) => Some(s),
                Err(e) => {
                    let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
                    let _ = waitpid(a_pid, None);
                    return Err(
                        SandboxUnavailable(format!("cannot serve the outside files: {e}")).into(),
                    );
                }
            }
        }
    };
    // While the sandbox sets itself up (on the other CPU), the supervisor starts its own parts
    // that need nothing from it: the link to stage 2, the agent's installation, the classifier's
    // worker (which confines itself with a Landlock domain of its own, so before the agent's
    // first exec needs it) and the audit thread. The classifier's roots are the union of the
    // plan's read-only and read-write paths, which stage 2's cache layers only move from one to
    // the other.
    crate::launch_trace::mark("run:outside-server-made");
    let stage = Arc::new(crate::runner::StageLink::new(ctl_sup));
    {
        let s = Arc::clone(&stage);
        std::thread::Builder::new()
            .name("tyba-stage".into())
            .spawn(move || s.read_loop())
            .map_err(io_err("starting the stage-2 link"))?;
    }
    let install = crate::agent::AgentInstall::resolve(
        &cfg.program,
        cfg.env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_os_str()),
    )
    .with_profile(&cfg.policy.config().agents, cfg.home.as_deref());
    let classifier =
        crate::classify_worker::Classifier::new(crate::classify_worker::ClassifySetup {
            policy: cfg.policy,
            worktree: cfg.session.worktree.clone(),
            scratch: std::fs::canonicalize(&cfg.plan.tmp_dir)
                .unwrap_or_else(|_| cfg.plan.tmp_dir.clone()),
            home: cfg.home,
            roots: crate::sandbox::classifier_roots(&plan),
            abi: cfg.enforcement.landlock_abi,
            require_full: !cfg.allow_weaker,
        });

    crate::launch_trace::mark("run:classifier-made");
    let mut warnings = Vec::new();
    let mut stage2 = None;
    let mut listener_no = None;
    let mut master_no = None;
    let mut relay_nos: Vec<(i32, std::net::IpAddr)> = Vec::new();
    let mut reader = BufReader::new(std::fs::File::from(status_r));
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(io_err("reading the sandbox's status"))?;
        if n == 0 {
            break;
        }
        let l = line.trim_end();
        if let Some(p) = l.strip_prefix("B ") {
            // Stage 1 reports stage 2's pid after forking it, so this line may come after
            // stage 2's own "L".
            stage2 = p.parse::<i32>().ok();
            if listener_no.is_some() {
                break;
            }
        } else if let Some(w) = l.strip_prefix("W ") {
            crate::broker::text::say(&format!("tyba: not enforced: {w}"));
            warnings.push(w.to_string());
        } else if let Some(n) = l.strip_prefix("N ") {
            // The outside files went without (some of) their covers.
            crate::outside_fs::tell(&*early_approver, n);
        } else if let Some(e) = l.strip_prefix("E ") {
            let _ = waitpid(a_pid, None);
            return Err(SandboxUnavailable(e.to_string()).into());
        } else if let Some(d) = l.strip_prefix("D ") {
            // A resolver relay socket (written by stage 2 before its "L"): `fd address`.
            if let Some((fd, ip)) = d.split_once(' ') {
                if let (Ok(fd), Ok(ip)) = (fd.parse::<i32>(), ip.parse()) {
                    relay_nos.push((fd, ip));
                }
            }
        } else if let Some(i) = l.strip_prefix("C ") {
            // A cache's private layer is mounted (written by stage 2 before its "L"): the
            // cache is writable in the sandbox, through the layer only.
            if let Ok(i) = i.parse::<usize>() {
                crate::caches::grant_layer(&mut plan, i);
            }
        } else if let Some(fd) = l.strip_prefix("P ") {
            // Written by stage 2 before its "L".
            master_no = fd.parse::<i32>().ok();
        } else if let Some(fd) = l.strip_prefix("L ") {
            listener_no = fd.parse::<i32>().ok();
            if stage2.is_some() {
                break;
            }
        }
    }
    let (Some(stage2), Some(listener_no)) = (stage2, listener_no) else {
        let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
        let st = waitpid(a_pid, None);
        return Err(SandboxUnavailable(format!(
            "the sandbox set-up ended before handing over its seccomp listener (stage 2 {stage2:?}, listener {listener_no:?}, stage 1 {st:?})"
        ))
        .into());
    };
    // Stage 2 made its covers (or went without them) before its "L": by now the server has
    // its device and has answered the handshake, or stage 1 sent none.
    let outside = match outside.map(|(fs, served)| (fs, served.recv())) {
        None | Some((_, Ok(Ok(false)))) => None,
        Some((fs, Ok(Ok(true)))) => Some(fs),
        Some((_, failed)) => {
            let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
            let _ = waitpid(a_pid, None);
            let why = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "its thread ended".to_string(),
            };
            return Err(
                SandboxUnavailable(format!("cannot serve the outside files: {why}")).into(),
            );
        }
    };
    crate::launch_trace::mark("run:sandbox-ready");
    // Test builds only (`fault-points`): the listener cannot be taken, after a wait in which
    // an agent started without its first exec being notified would have run.
    #[cfg(feature = "fault-points")]
    if let Some(ms) = std::env::var("TYBA_FAULT_TAKE_LISTENER_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
        let _ = waitpid(a_pid, None);
        return Err(
            SandboxUnavailable("cannot take the seccomp listener (fault point)".into()).into(),
        );
    }
    let taken = sys::pidfd_open(stage2).and_then(|pfd| {
        let listener = sys::pidfd_getfd(pfd.as_fd(), listener_no)?;
        let master = master_no
            .map(|m| sys::pidfd_getfd(pfd.as_fd(), m))
            .transpose()?;
        let relays = relay_nos
            .iter()
            .map(|(fd, ip)| sys::pidfd_getfd(pfd.as_fd(), *fd).map(|s| (s, *ip)))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok((listener, master, relays))
    });
    let (listener, master, relays) = taken.map_err(|e| {
        let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
        let _ = waitpid(a_pid, None);
        SandboxUnavailable(format!(
            "cannot take the seccomp listener or the pty from the sandbox: {e}"
        ))
    })?;
    if let Err(e) = sys::notif_set_sync_wakeup(listener.as_fd()) {
        let w = format!("seccomp synchronous wake-up unavailable ({e}): notified calls are slower");
        crate::broker::text::say(&format!("tyba: not enforced: {w}"));
        warnings.push(w);
    }
    // The agent's name resolution: the relay sockets live in the sandbox's network namespace;
    // upstream queries go from the supervisor's own (`crate::dns`).
    // Their threads start after the "go" (below): a query sent before waits in its socket.
    let names = crate::dns::allowed_names(&cfg.agent_hosts);
    let lookups = crate::dns::Lookups::new(stage2 as u32);
    // The approver is made before anything of the agent's runs.
    drop(maker);
    let approver = deferred.get();
    crate::launch_trace::mark("run:approver-made");
    if let Some(n) = outside_note {
        crate::outside_fs::tell(&*approver, &n);
    }
    let (allowed, audit) = notify::allowed_log(Arc::clone(&approver));
    let gate = approver.relay_gate();
    let control = Arc::clone(&cfg.control);
    control.register_sandbox(a_pid.as_raw(), stage2 as u32);
    let notifier = Arc::new(Notifier {
        hard_links: AtomicBool::new(false),
        listener,
        classifier,
        control: Arc::clone(&control),
        mode: cfg.exec_mode,
        worktree: cfg.session.worktree.clone(),
        allowed,
        approver,
        hosts: crate::net::AgentHosts::new(&cfg.agent_hosts),
        lookups: Arc::clone(&lookups),
        writable: plan.read_write.clone(),
        agent_writes: plan
            .read_write
            .iter()
            .cloned()
            .chain(plan.state_layers.iter().flat_map(|l| {
                // A state file's copy is the file itself: its directory holds no other.
                [l.upper.clone(), l.work.clone()]
            }))
            .chain(
                plan.cache_layers
                    .iter()
                    .flat_map(|l| [l.upper.clone(), l.work.clone()]),
            )
            .collect(),
        readable: plan.read_only.clone(),
        protected: plan.protected.clone(),
        stage: Arc::clone(&stage),
        proxy_exe: std::env::current_exe().ok(),
        outside,
        uid,
        gid,
        stage2: stage2 as u32,
        install,
        install_index: std::sync::OnceLock::new(),
        start_env: cfg
            .env
            .iter()
            .filter_map(|(k, v)| {
                let k = k.to_string_lossy();
                (tyba_policy::is_code_running_var(&k) || crate::exec::STARTUP_VARS.contains(&&*k))
                    .then(|| (k.into_owned(), v.to_string_lossy().into_owned()))
            })
            .collect(),
        person_git: crate::exec::persons_git_programs(
            &cfg.env,
            &cfg.session.worktree,
            &plan.read_write,
        ),
        root: nix::fcntl::open(
            format!("/proc/{stage2}/root").as_str(),
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok(),
        started: std::time::SystemTime::now(),
        agent_exec: notify::AgentExec {
            path: crate::exec::exec_text(cfg.program.as_os_str().as_bytes()),
            argv: cfg
                .argv
                .iter()
                .map(|a| crate::exec::exec_text(a.as_bytes()))
                .collect(),
            cwd: plan.worktree.clone(),
        },
        state: Mutex::new(notify::State::new()),
    });
    if let Some(o) = &notifier.outside {
        o.attach(Box::new(OutsideLink(Arc::downgrade(&notifier))));
    }
    crate::launch_trace::mark("run:notifier-made");
    notify::hear_refused_lookups(&notifier);
    // Every directory of the person's checkout is watched before the agent runs, or the
    // watch is not used (`crate::here_watch`). Sealed before the notify loop starts: the
    // agent's process may already wait in its first exec, which the loop answers.
    if let Some(w) = &here_watch {
        w.seal();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let loop_thread = {
        let (n, s) = (Arc::clone(&notifier), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("tyba-notify".into())
            .spawn(move || notify::serve(n, s))
            .map_err(io_err("starting the notify loop"))?
    };
    crate::launch_trace::mark("run:go");
    let mut ack = std::fs::File::from(ack_w);
    ack.write_all(b"g")
        .map_err(io_err("starting the sandbox"))?;
    drop(ack);
    // What the agent's first steps do not wait for starts now, beside them: each thread
    // started before the notify loop delayed the agent's first exec by about 50 µs on a
    // 2-vCPU VM (docs/performance-run.md, run 20). Until its thread runs, an allowed exec
    // waits in the audit channel, a name lookup in its relay socket, and a look at the
    // installation's index makes the index itself (`Notifier::install_index`).
    let mut warn = |w: String| {
        crate::broker::text::say(&format!("tyba: {w}"));
        warnings.push(w);
    };
    if let Err(e) = audit.start(|| {
        let _ = nix::sys::signal::kill(a_pid, Signal::SIGKILL);
    }) {
        warn(format!(
            "the audit log's writer could not start ({e}): the session is ended, as the agent's allowed execs would go unrecorded"
        ));
    }
    if let Some(AfterGo(f)) = after_go {
        f();
    }
    for (sock, ip) in relays {
        let sock = std::net::UdpSocket::from(sock);
        let names = names.clone();
        let lk = Arc::clone(&lookups);
        let started = std::thread::Builder::new()
            .name("tyba-dns-relay".into())
            .spawn(move || crate::dns::serve(sock, names, lk, std::net::SocketAddr::new(ip, 53)));
        // The agent runs already: its lookups then fail (the socket is closed), as for a
        // host it may not reach.
        if let Err(e) = started {
            warn(format!(
                "the resolver relay did not start ({e}): the agent's name lookups fail"
            ));
        }
    }
    notifier.index_install();

    let relay = match person {
        Some(t) => master.map(|m| start_relay(m, gate, t)).transpose()?,
        None => None,
    };
    // The end goes on once stage 2 has said that no process of the sandbox is left; stage 1
    // is reaped when the outcome is dropped (`Reaper`), its and stage 2's exits (the
    // namespaces taken down) running meanwhile. When stage 2 hangs up without saying so
    // (killed, or the session ended by a signal), stage 1's own end is waited for: it
    // comes after the namespace's last process.
    let (status, stage1) = match stage.wait_gone() {
        Some(e) => (e.status(), Reaper(Some(a_pid))),
        None => (exit_status_of(a_pid)?, Reaper(None)),
    };
    crate::launch_trace::mark("run:sandbox-ended");
    disarm_end_signals();
    // Read once: a signal that comes from here on finds the session ended by itself, and
    // the status and the report must say the same (review r36-04).
    let ended_by = end_signal();
    let agent_signal = if ended_by.is_some() {
        None
    } else {
        stage
            .agent_end(std::time::Duration::from_millis(500))
            .and_then(|e| e.signal)
    };
    // Ended by a signal to the supervisor: the status says which (as a shell would).
    let status = ended_by.map_or(status, |s| 128 + s as i32);
    control.sandbox_ended();
    if let Some(r) = relay {
        r.finish();
    }
    // Every sandboxed process is gone: the loop sees the listener hang up, or the flag within
    // one poll period; it holds nothing that needs joining.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(loop_thread);
    // Refusals that could not be told on a process's stderr without waiting on it
    // (`crate::teller`): said once, in the audit log.
    let untold = crate::teller::dropped();
    if untold > 0 {
        notifier.approver.note(
            "refusals not told",
            &format!(
                "{untold} refusal message(s) were not written on the refused processes' stderr (it was full, or the queue was); each refusal is in this log"
            ),
        );
    }
    // The audit thread writes allowed execs in batches: the last ones are on disk before the
    // session's end is reported.
    notify::flush_allowed_log(&notifier.allowed, std::time::Duration::from_secs(2));
    crate::launch_trace::mark("run:log-flushed");
    let events = notifier
        .state
        .lock()
        .map(|s| s.log.clone())
        .unwrap_or_default();
    Ok(Outcome {
        exit_status: status,
        agent_signal,
        events,
        warnings,
        hard_links: notifier
            .hard_links
            .load(std::sync::atomic::Ordering::SeqCst),
        ended_by,
        _stage1: stage1,
    })
}

/// Waits for `pid` to end; its exit status as a shell gives it (128 + signal when killed).
fn exit_status_of(pid: Pid) -> Result<i32, RunError> {
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, c)) => return Ok(c),
            Ok(WaitStatus::Signaled(_, s, _)) => return Ok(128 + s as i32),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(nix_err("waiting for the sandbox")(e)),
        }
    }
}

/// Stage 1, once no process of the sandbox is left: waited for when this is dropped (it
/// exits once stage 2 has).
#[derive(Debug)]
struct Reaper(Option<Pid>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            while waitpid(p, None) == Err(nix::errno::Errno::EINTR) {}
        }
    }
}

/// A thread joined when this is dropped.
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

/// One of the supervisor's standard streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    In,
    Out,
    Err,
}

impl Term {
    fn with<R>(self, f: impl FnOnce(std::os::fd::BorrowedFd<'_>) -> R) -> R {
        match self {
            Term::In => f(std::io::stdin().as_fd()),
            Term::Out => f(std::io::stdout().as_fd()),
            Term::Err => f(std::io::stderr().as_fd()),
        }
    }
}

/// The terminal relay's tasks on the broker's tokio runtime (`crate::broker`): the pty's
/// output (its end is the session's), the person's keys and the window size (ended by
/// [`Relay::finish`]).
struct Relay {
    saved: Option<nix::sys::termios::Termios>,
    /// Told when the output task ended (the pty's last output is written).
    out_done: std::sync::mpsc::Receiver<()>,
    /// The keys and window-size tasks.
    others: Vec<tokio::task::JoinHandle<()>>,
}

impl Relay {
    fn finish(self) {
        let _ = self.out_done.recv();
        for t in &self.others {
            t.abort();
        }
        if let Some(t) = self.saved {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin().as_fd(),
                nix::sys::termios::SetArg::TCSANOW,
                &t,
            );
        }
    }
}

/// `fd` with `O_NONBLOCK` set, for [`tokio::io::unix::AsyncFd`].
fn non_blocking(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(std::io::Error::from)?;
    fcntl(
        &fd,
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .map_err(std::io::Error::from)?;
    Ok(fd)
}

/// The person's terminal at standard input, opened anew (`/proc/self/fd/0`): an open file
/// description of the relay's own, so that making it non-blocking leaves the one the
/// person's shell shares untouched.
fn own_stdin() -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/proc/self/fd/0")?;
    Ok(OwnedFd::from(f))
}

/// One non-blocking read of `fd` once it is readable: the bytes read (0 at the end).
async fn read_ready(
    fd: &tokio::io::unix::AsyncFd<OwnedFd>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    loop {
        let mut guard = fd.readable().await?;
        match guard.try_io(|f| nix::unistd::read(f.get_ref(), buf).map_err(std::io::Error::from)) {
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

/// Writes all of `bytes` to the non-blocking `fd`, waiting for it to be writable.
async fn write_ready(
    fd: &tokio::io::unix::AsyncFd<OwnedFd>,
    mut bytes: &[u8],
) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let mut guard = fd.writable().await?;
        match guard.try_io(|f| nix::unistd::write(f.get_ref(), bytes).map_err(std::io::Error::from))
        {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
    Ok(())
}

/// Relays between the agent's pty `master` and the person's terminal `person`: keys from
/// standard input when it is that terminal (then in raw mode until [`Relay::finish`]), the
/// pty's output to standard output (or standard error when only that is the terminal), and
/// window sizes. Tasks on the broker's tokio runtime (DESIGN.md: the broker and the terminal
/// relay on tokio; the seccomp notify loop keeps its own thread): the pty and the keys are
/// read when epoll says they are ready, the agent's output is held by the prompt (`gate`)
/// on a blocking section of its own, so a prompt on screen holds no worker of the runtime.
fn start_relay(
    master: OwnedFd,
    gate: Option<Arc<dyn crate::approve::RelayGate>>,
    person: Term,
) -> Result<Relay, RunError> {
    use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
    use tokio::io::AsyncWriteExt;
    let rt = crate::broker::runtime().map_err(io_err("starting the terminal relay"))?;
    let _entered = rt.enter();
    let master = Arc::new(
        non_blocking(master)
            .and_then(sys::async_fd)
            .map_err(io_err("pty"))?,
    );
    let stdin = std::io::stdin();
    let keys = person == Term::In;
    let saved = if keys {
        tcgetattr(stdin.as_fd()).ok()
    } else {
        None
    };
    if let Some(t) = &saved {
        let mut raw = t.clone();
        cfmakeraw(&mut raw);
        let _ = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
    }
    let mut others = Vec::new();
    // Standard input that is not the terminal is not the pty's: the agent reads it itself.
    if keys {
        // The keys, read when the terminal is readable from a description of the relay's own;
        // where the terminal cannot be opened anew (a device the user may not open, no
        // `/proc`), from standard input itself on a blocking section (never made
        // non-blocking: the person's shell shares it).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        match own_stdin().and_then(sys::async_fd) {
            Ok(input) => others.push(rt.spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = read_ready(&input, &mut buf).await {
                    if tx.send(buf[..n].to_vec()).await.is_err() {
                        break;
                    }
                }
            })),
            Err(_) => {
                rt.spawn_blocking(move || {
                    let mut buf = [0u8; 4096];
                    let mut input = std::io::stdin();
                    while let Ok(n @ 1..) = input.read(&mut buf) {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                });
            }
        }
        let (m, in_gate) = (Arc::clone(&master), gate.clone());
        others.push(rt.spawn(async move {
            while let Some(chunk) = rx.recv().await {
                // Keys answering a prompt never reach the agent; the terminal's reports to
                // the agent's own queries always do.
                let (reports, keys) = crate::broker::prompt::split_reports(&chunk);
                let taken = match &in_gate {
                    Some(g) => {
                        let g = Arc::clone(g);
                        tokio::task::block_in_place(|| g.input(&keys))
                    }
                    None => false,
                };
                let send: &[u8] = if taken { &reports } else { &chunk };
                if write_ready(&m, send).await.is_err() {
                    break;
                }
            }
        }));
    }
    // Window resizes: the person's terminal size is copied to the pty when it changes; the
    // kernel then sends SIGWINCH to the agent's foreground process group. A full-screen agent
    // a prompt drew over is made to redraw the same way: one row less, then the size again.
    {
        let (m, redraw_gate) = (Arc::clone(&master), gate.clone());
        others.push(rt.spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last = person.with(sys::get_winsize).map(|w| (w.ws_row, w.ws_col));
            loop {
                tick.tick().await;
                let pty = m.get_ref().as_fd();
                let now = person.with(sys::get_winsize);
                let key = now.map(|w| (w.ws_row, w.ws_col));
                if key != last {
                    if let Some(w) = now {
                        sys::set_winsize(pty, &w);
                    }
                    last = key;
                } else if redraw_gate.as_ref().is_some_and(|g| g.take_redraw()) {
                    if let Some(w) = now.filter(|w| w.ws_row > 1) {
                        // Two resizes the agent sees apart: a TUI reads the size when it
                        // handles SIGWINCH and redraws only when it changed, so a size set and
                        // restored at once (one signal, the same size) redraws nothing.
                        let mut shorter = w;
                        shorter.ws_row -= 1;
                        sys::set_winsize(pty, &shorter);
                        tokio::time::sleep(REDRAW_PAUSE).await;
                        let pty = m.get_ref().as_fd();
                        sys::set_winsize(pty, &w);
                    }
                }
            }
        }));
    }
    let (done, out_done) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let mut buf = vec![0u8; 8192];
        let mut out: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>> = if person == Term::Err {
            Box::pin(tokio::io::stderr())
        } else {
            Box::pin(tokio::io::stdout())
        };
        loop {
            // The pty's end: EIO once the last process holding its other side is gone.
            let n = match read_ready(&master, &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(g) = &gate {
                // Waits while a prompt is shown: on a blocking section, not a worker.
                let g = Arc::clone(g);
                tokio::task::block_in_place(|| g.output(&buf[..n]));
                continue;
            }
            if out.write_all(&buf[..n]).await.is_err() {
                break;
            }
            let _ = out.flush().await;
        }
        let _ = done.send(());
    });
    Ok(Relay {
        saved,
        out_done,
        others,
    })
}

/// The outside-files server's view of the notify loop ([`crate::outside_fs::SessionLink`]);
/// once the loop is gone every process counts as the agent's interpreter (asked, its grant
/// reaching the least) and quiet refusals go to the audit log alone.
struct OutsideLink(std::sync::Weak<notify::Notifier>);

impl crate::outside_fs::SessionLink for OutsideLink {
    fn asker(&self, pid: u32) -> crate::outside_fs::Asker {
        self.0
            .upgrade()
            .map_or(crate::outside_fs::Asker::AgentInterpreter, |n| {
                n.outside_asker(pid)
            })
    }

    fn role(&self, pid: u32) -> Option<crate::exec::Role> {
        self.0.upgrade().and_then(|n| n.outside_role(pid))
    }

    fn log_quiet(&self, event: notify::AuditEvent) {
        if let Some(n) = self.0.upgrade() {
            n.log_quiet(event);
        }
    }
}

/// Writes one status line with a single `write` (stage 1 and stage 2 share the pipe; writes
/// up to `PIPE_BUF` bytes are atomic, `writeln!` could split a line in two writes).
fn report(st: &mut Option<std::fs::File>, line: &str) {
    if let Some(f) = st {
        let mut l: String = line.replace('\n', " ").chars().take(3000).collect();
        l.push('\n');
        let _ = f.write_all(l.as_bytes());
    }
}

fn fail(st: &mut Option<std::fs::File>, msg: &str) -> ! {
    report(st, &format!("E {msg}"));
    sys::exit_now(4)
}

/// The soft core-size limit (`RLIMIT_CORE`, `getrlimit(2)`) the person's processes had, kept
/// by [`no_core_dumps`] in stage 1 (and so in stage 2, which shares its memory) and given
/// back by [`restore_core_limit`] to the agent and to approved commands before their exec.
static PERSONS_CORE_SOFT: OnceLock<u64> = OnceLock::new();

/// Stage 1 and stage 2 write no core file: their memory is a copy of the supervisor's image,
/// which holds the person's whole environment, secrets tyba withholds from the agent
/// included, and a core file goes where the kernel's `core_pattern` says, by default the
/// crashing process's working directory, the person's checkout (review 33's r33-01). The soft
/// limit goes to 0 (`core(5)`: no file is written); the hard limit is kept, so that the
/// agent's processes get the person's own back. Not `PR_SET_DUMPABLE` 0: the supervisor takes
/// stage 2's descriptors with `pidfd_getfd(2)`, which a process that is not dumpable refuses
/// to an unprivileged supervisor. A core handler that is a pipe (`|…` in `core_pattern`)
/// ignores the limit; it writes where the system's administrator chose, not into the checkout.
fn no_core_dumps() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_CORE) {
        let _ = PERSONS_CORE_SOFT.set(soft);
        let _ = setrlimit(Resource::RLIMIT_CORE, 0, hard);
    }
}

/// Gives the person's soft core-size limit back ([`no_core_dumps`]), in the agent's process
/// and an approved command's, before their exec: their cores are their own memory.
pub(crate) fn restore_core_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let (Some(&soft), Ok((_, hard))) =
        (PERSONS_CORE_SOFT.get(), getrlimit(Resource::RLIMIT_CORE))
    {
        let _ = setrlimit(Resource::RLIMIT_CORE, soft.min(hard), hard);
    }
}

/// Stage 1 (child of the supervisor): new namespaces, id maps, then stage 2 as their PID 1.
fn stage1(mut c: ChildCtx) -> ! {
    crate::launch_trace::mark("s1:start");
    no_core_dumps();
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if nix::unistd::getppid() != c.sup_pid {
        sys::exit_now(1);
    }
    let mut st = c.status_w.take().map(std::fs::File::from);
    // IPC: SysV shared memory, semaphores and message queues and POSIX message queues of
    // processes outside are out of reach, and the sandbox's own die with it
    // (`ipc_namespaces(7)`). UTS and cgroup: the host name and the cgroup tree are the
    // sandbox's own view (`uts_namespaces(7)`, `cgroup_namespaces(7)`).
    let flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWNET
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWCGROUP;
    let ns = match unshare(flags) {
        Ok(()) => true,
        Err(e) if c.allow_weaker => {
            report(
                &mut st,
                &format!("W namespaces unavailable ({e}): no PID, network, IPC, UTS or cgroup namespace, private /proc, private terminals or read-only git files"),
            );
            false
        }
        Err(e) => fail(
            &mut st,
            &format!(
                "cannot create user, mount, PID, network, IPC, UTS and cgroup namespaces: {e}"
            ),
        ),
    };
    if ns {
        let maps = [
            ("/proc/self/setgroups", "deny".to_string()),
            ("/proc/self/uid_map", format!("{0} {0} 1", c.uid)),
            ("/proc/self/gid_map", format!("{0} {0} 1", c.gid)),
        ];
        for (p, v) in maps {
            if let Err(e) = std::fs::write(p, v) {
                fail(&mut st, &format!("cannot write {p}: {e}"));
            }
        }
    }
    if ns {
        limit_processes(&mut st, c.max_processes);
    }
    crate::launch_trace::mark("s1:id-maps");
    // The outside-files filesystem: `/dev/fuse` must be opened in the user namespace that
    // mounts it (the kernel refuses a device opened in another), and the connection numbers
    // requesting processes in the PID namespace of the process that creates it: stage 1's,
    // which is the supervisor's. The device goes to the supervisor's server at once (stage 1
    // keeps no copy: the server's is the connection's only one, and the connection ends with
    // it); stage 2 attaches the filesystem (`crate::outside_fs`).
    let to_server = c.fuse_to_server.take();
    if let (true, Some(to_server)) = (ns && !c.plan.outside_covers.is_empty(), &to_server) {
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse cannot be opened ({e})"))
            .and_then(|dev| {
                let dev = OwnedFd::from(dev);
                sys::fuse_fsmount(dev.as_fd(), c.uid, c.gid)
                    .map(|m| (dev, m))
                    .map_err(|e| format!("the FUSE filesystem cannot be created ({e})"))
            })
            .and_then(|(dev, m)| {
                sys::send_with_fds(to_server.as_fd(), b"F", &[dev.as_raw_fd()])
                    .map(|()| m)
                    .map_err(|e| format!("the FUSE device cannot be handed to tyba ({e})"))
            });
        match made {
            Ok(m) => c.fuse = Some(m),
            Err(e) if c.allow_weaker || c.plan.outside_files != OutsideMode::Require => {
                report(&mut st, &format!("N {}", crate::outside_fs::notice(&e)));
                c.plan.outside_covers.clear();
            }
            Err(e) => fail(&mut st, &format!("--outside-files require: {e}")),
        }
    }
    crate::launch_trace::mark("s1:fuse-device");
    // Closed before stage 2 is forked: the server hears a hang-up when no device came.
    drop(to_server);
    crate::launch_trace::mark("s1:fork");
    // Stage 2 shares stage 1's memory instead of a copy of it: stage 1 only waits for it from
    // here on, with raw system calls, and a copy of the supervisor's image would cost its
    // page tables at the clone and their teardown at stage 2's exit.
    let status_fd = st.as_ref().map(|f| f.as_raw_fd());
    c.status_w = match st.as_ref().map(std::fs::File::try_clone).transpose() {
        Ok(w) => w.map(OwnedFd::from),
        Err(e) => fail(
            &mut st,
            &format!("cannot pass the status pipe to stage 2: {e}"),
        ),
    };
    // Stage 2 learns from this whether stage 1 died before stage 2's death signal was set
    // (an end signal kills stage 1 at any moment): a process that exited is readable.
    let stage1 = match sys::pidfd_open(nix::unistd::getpid().as_raw()) {
        Ok(fd) => fd,
        Err(e) => fail(&mut st, &format!("pidfd_open: {e}")),
    };
    // SAFETY: stage 1 is a fork child and has one thread; from the clone on it touches
    // nothing of the shared memory (`wait_shared_child_and_exit`), and `stage2` never
    // returns.
    match unsafe { sys::clone_sharing_memory(Box::new(move || stage2(c, ns, stage1))) } {
        Err(e) => fail(&mut st, &format!("clone: {e}")),
        Ok(b) => sys::wait_shared_child_and_exit(status_fd, b),
    }
}

pub(crate) fn bind_read_only(p: &Path) -> Result<(), String> {
    mount(Some(p), p, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| format!("bind {}: {e}", p.display()))?;
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    if let Ok(v) = nix::sys::statvfs::statvfs(p) {
        use nix::sys::statvfs::FsFlags;
        let f = v.flags();
        for (s, m) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if f.contains(s) {
                flags |= m;
            }
        }
    }
    mount(None::<&str>, p, None::<&str>, flags, None::<&str>)
        .map_err(|e| format!("remount {} read-only: {e}", p.display()))
}

/// How long the agent's pty stays one row shorter when a prompt gave its screen back: long
/// enough for a TUI to handle the first SIGWINCH before the second.
const REDRAW_PAUSE: std::time::Duration = std::time::Duration::from_millis(80);

/// A file tyba made for the session, removed when dropped.
struct SessionFile(PathBuf);

impl Drop for SessionFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The system profile login shells read (sh(1), bash(1) INVOCATION).
const SYSTEM_PROFILE: &str = "/etc/profile";

/// Login shells (`bash -l`, `sh -lc`: how Claude Code and Codex run each command) read
/// `/etc/profile`, which sets `PATH` afresh (Debian's does), then the person's `~/.profile`,
/// which would add `~/.cargo/bin`, `~/.local/bin`… but is shown empty
/// ([`SandboxPlan::blanked`]): every tool the person installed in the home would be "not
/// found". So the sandbox sees `/etc/profile` as a copy of itself ending with the session's
/// own `PATH` (the one the agent started with, which the agent has anyway): a file tyba
/// writes beside the session ([`crate::state_layer::beside_session`], never in a root the
/// agent may write; `O_EXCL`, no link followed), bound read-only over it
/// ([`SandboxPlan::replaced`]). Nothing when there is no `PATH` or no regular
/// `/etc/profile`, or the copy cannot be made (shells then start as before).
/// Limits the sandbox to `max` processes and threads at once: `RLIMIT_NPROC`, soft and hard
/// (the agent cannot raise it back), set in the sandbox's new user namespace, where since
/// Linux 5.14 the kernel counts the tasks of that namespace only (`ucounts`), not every
/// process of the person's. On an older kernel the count would be of all the person's
/// processes, so nothing is set and the session says so; the kernel exempts root's uid.
fn limit_processes(st: &mut Option<std::fs::File>, max: u32) {
    let release = nix::sys::utsname::uname()
        .ok()
        .and_then(|u| u.release().to_str().map(str::to_string))
        .unwrap_or_default();
    let mut nums = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    if (major, minor) < (5, 14) {
        report(
            st,
            &format!("W not enforced: kernel {release} counts processes per user, not per user namespace: no process limit for the session"),
        );
        return;
    }
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC)
        .map(|(_, h)| h)
        .unwrap_or(nix::sys::resource::RLIM_INFINITY);
    let n = u64::from(max).min(hard);
    if let Err(e) = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, n, n)
    {
        report(st, &format!("W no process limit for the session: {e}"));
    }
}

fn login_profile(
    plan: &mut SandboxPlan,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Option<SessionFile> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v)?;
    let system = Path::new(SYSTEM_PROFILE);
    if !std::fs::symlink_metadata(system).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut text = std::fs::read(system).ok()?;
    let quoted = path
        .as_bytes()
        .split(|&b| b == b'\'')
        .collect::<Vec<_>>()
        .join(&b"'\\''"[..]);
    text.extend_from_slice(b"\n# tyba: the session's PATH, which the person's own profile (shown empty) would have set\nPATH='");
    text.extend_from_slice(&quoted);
    text.extend_from_slice(b"'\nexport PATH\n");
    let file = crate::state_layer::beside_session(&plan.tmp_dir, ".profile");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&file)
        .ok()?;
    let made = SessionFile(file.clone());
    f.write_all(&text).ok()?;
    plan.replaced.push((system.to_path_buf(), file));
    Some(made)
}

/// Binds `/dev/null` over the file `p`, read-only: it reads as empty
/// ([`SandboxPlan::blanked`]).
fn bind_blank(p: &Path) -> Result<(), String> {
    bind_file_read_only(Path::new("/dev/null"), p)
}

/// Binds the file `src` over the file `p`, read-only, no set-id, no exec.
fn bind_file_read_only(src: &Path, p: &Path) -> Result<(), String> {
    mount(Some(src), p, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| format!("cannot show {} as {}: {e}", p.display(), src.display()))?;
    mount(
        None::<&str>,
        p,
        None::<&str>,
        MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("cannot keep {} read-only: {e}", p.display()))
}

/// Mounts a new devpts instance over `/dev/pts` and binds its `ptmx` over `/dev/ptmx`, in the
/// sandbox's mount namespace: the host's terminals (the person's other shells) are neither
/// visible nor openable, and every pty opened inside is the sandbox's own
/// (`Documentation/filesystems/devpts.rst`: `newinstance`; `ptmxmode=0666` so the
/// sandbox's user can open its `ptmx`). Landlock grants `/dev/pts` and `/dev/ptmx` only when
/// this succeeded ([`SandboxPlan::private_pts`]).
fn private_devpts() -> Result<(), String> {
    mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| format!("mount devpts on /dev/pts: {e}"))?;
    if Path::new("/dev/ptmx").exists() {
        mount(
            Some("/dev/pts/ptmx"),
            "/dev/ptmx",
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("bind /dev/pts/ptmx over /dev/ptmx: {e}"))?;
    }
    Ok(())
}

/// Opens a pty pair in the private instance (`/dev/ptmx` is its `ptmx` after
/// [`private_devpts`]), sized like the person's terminal; returns `(master, slave)`.
fn open_private_pty(ws: Option<&libc::winsize>) -> Result<(OwnedFd, OwnedFd), String> {
    use nix::fcntl::OFlag;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
        .map_err(|e| format!("open /dev/ptmx: {e}"))?;
    nix::pty::grantpt(&master).map_err(|e| format!("grantpt: {e}"))?;
    nix::pty::unlockpt(&master).map_err(|e| format!("unlockpt: {e}"))?;
    let name = nix::pty::ptsname_r(&master).map_err(|e| format!("ptsname: {e}"))?;
    if !name.starts_with("/dev/pts/") {
        return Err(format!("the pty {name} is not in /dev/pts"));
    }
    let slave = nix::fcntl::open(
        name.as_str(),
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| format!("open {name}: {e}"))?;
    if let Some(ws) = ws {
        sys::set_winsize(slave.as_fd(), ws);
    }
    Ok((master.into(), slave))
}

/// The resolver relay's sockets, in the sandbox's network namespace (`crate::dns`): for each
/// name server, `lo` gets its address (an IPv4 `/32` alias `lo:N`; loopback addresses are
/// there already) and a UDP socket is bound to `<address>:53`, its fd reported as `D FD
/// ADDRESS` for the supervisor to take. A name server that cannot be relayed (an IPv6 address
/// other than `::1`, a failed alias or bind) is reported: the agent's lookups through it fail.
fn relay_sockets(
    nameservers: &[std::net::IpAddr],
    st: &mut Option<std::fs::File>,
) -> Vec<std::net::UdpSocket> {
    use std::net::IpAddr;
    let mut out: Vec<std::net::UdpSocket> = Vec::new();
    for (i, ip) in nameservers.iter().enumerate().take(8) {
        if out
            .iter()
            .any(|s| s.local_addr().is_ok_and(|a| a.ip() == *ip))
        {
            continue;
        }
        let on_lo = match ip {
            IpAddr::V4(v4) if v4.is_loopback() => Ok(()),
            IpAddr::V4(v4) => sys::add_loopback_alias_v4(i as u8, *v4),
            IpAddr::V6(v6) if v6.is_loopback() => Ok(()),
            IpAddr::V6(_) => Err(std::io::Error::other("IPv6 name servers are not relayed")),
        };
        match on_lo.and_then(|()| std::net::UdpSocket::bind((*ip, 53))) {
            Ok(s) => {
                report(st, &format!("D {} {ip}", s.as_raw_fd()));
                out.push(s);
            }
            Err(e) => report(
                st,
                &format!("W no name resolution through {ip} in the sandbox: {e}"),
            ),
        }
    }
    out
}

/// Stage 2: PID 1 of the sandbox. Mounts, Landlock, seccomp, listener hand-over, then the
/// agent, then reaping until the agent exits.
fn stage2(mut c: ChildCtx, ns: bool, stage1: OwnedFd) -> ! {
    crate::launch_trace::mark("s2:start");
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // A parent that died before the line above sent no death signal, and as PID 1 of its
    // namespace this stage cannot ask `getppid(2)` (review r36-01: an end signal between the
    // clone and here left stage 2, then the agent, running with no stage 1 and a supervisor
    // waiting forever). Stage 1 exited: nothing is set up.
    if sys::pidfd_exited(stage1.as_fd()) {
        sys::exit_now(1);
    }
    drop(stage1);
    let mut st = c.status_w.take().map(std::fs::File::from);
    // Held until the supervisor has taken them (after the "go" below).
    let mut relays = Vec::new();
    if ns {
        if let Err(e) = mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        ) {
            fail(
                &mut st,
                &format!("cannot make the mount namespace private: {e}"),
            );
        }
        // The agents' state: session-private copies, before any bind inside them.
        if let Err(e) = crate::state_layer::mount_layers(&c.plan.state_layers) {
            if c.allow_weaker {
                report(
                    &mut st,
                    &format!("W the agent writes the person's own state: {e}"),
                );
            } else {
                fail(&mut st, &e);
            }
        }
        let pf = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        if let Err(e) = mount(Some("proc"), "/proc", Some("proc"), pf, None::<&str>) {
            if c.allow_weaker {
                report(&mut st, &format!("W cannot mount a private /proc ({e}): other processes' environ/maps visible"));
            } else {
                fail(&mut st, &format!("cannot mount a private /proc: {e}"));
            }
        }
        crate::launch_trace::mark("s2:proc");
        match private_devpts() {
            Ok(()) => c.plan.private_pts = true,
            Err(e) if c.allow_weaker => report(
                &mut st,
                &format!("W no private terminal instance ({e}): the agent gets no pty and no terminal device"),
            ),
            Err(e) => fail(&mut st, &format!("cannot mount a private devpts: {e}")),
        }
        crate::launch_trace::mark("s2:devpts");
        // The caches' private layers first: the read-only binds below may lie inside one.
        for (i, l) in c.plan.cache_layers.clone().iter().enumerate() {
            match crate::caches::mount_layer(l) {
                Ok(()) => {
                    crate::caches::grant_layer(&mut c.plan, i);
                    report(&mut st, &format!("C {i}"));
                }
                Err(e) => report(
                    &mut st,
                    &format!(
                        "W a cache is read-only for this session (no private layer: {e}): {}",
                        l.cache.display()
                    ),
                ),
            }
        }
        // The common git dir's private layer (`crate::git_layer`), before the binds inside
        // it (the own branch's, the pins, the protected files of the worktree's admin dir).
        if let Some(l) = c.plan.git_layer.clone() {
            match crate::git_layer::mount_layer(&l, &c.plan.tmp_dir) {
                Ok(()) => crate::git_layer::grant(&mut c.plan),
                Err(e) => report(
                    &mut st,
                    &format!(
                        "W the git dir {} stays read-only for this session (no private layer: {e}): git may print errors on packed-refs.lock and remote-tracking refs",
                        l.common.display()
                    ),
                ),
            }
        }
        // The person's objects as the lower layer of the session's own
        // (`crate::objects_layer`); when it cannot be mounted the store is read-only, so no
        // existing object can be rewritten (the agent cannot commit then, and is told).
        if let Some(l) = c.plan.objects_layer.clone() {
            let mounted = crate::objects_layer::mount(&l);
            if mounted.is_ok() {
                crate::objects_layer::hold_packs(&l);
            }
            if let Err(e) = mounted {
                if let Err(e2) = bind_read_only(&l.objects) {
                    fail(
                        &mut st,
                        &format!(
                            "cannot keep the objects of {} from being rewritten: {e}; {e2}",
                            l.objects.display()
                        ),
                    );
                }
                report(
                    &mut st,
                    &format!(
                        "W the object store {} is read-only for this session (no private layer for the agent's objects: {e}): the agent cannot commit",
                        l.objects.display()
                    ),
                );
            }
        }
        for p in c.plan.pinned.clone() {
            // A mount point cannot be renamed or removed: the name stays this git dir.
            if let Err(e) = mount(Some(&p), &p, None::<&str>, MsFlags::MS_BIND, None::<&str>) {
                fail(
                    &mut st,
                    &format!("cannot pin the git dir {} in place: {e}", p.display()),
                );
            }
        }
        // The session's own branch: its private directories over `refs/heads/tyba/` and
        // its reflogs (`crate::own_branch`), before the Landlock rules are opened on those
        // paths below (a rule is on the inode it opens: the private directory).
        for (src, over) in c.plan.branch_binds.clone() {
            if let Err(e) = mount(
                Some(&src),
                &over,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            ) {
                fail(
                    &mut st,
                    &format!(
                        "cannot bind the session's own branches {} over {}: {e}",
                        src.display(),
                        over.display()
                    ),
                );
            }
        }
        crate::launch_trace::mark("s2:protected-binds");
        for p in c.plan.protected.clone() {
            if let Err(e) = bind_read_only(&p) {
                fail(
                    &mut st,
                    &format!("cannot keep {} read-only: {e}", p.display()),
                );
            }
        }
        for p in c.plan.blanked.clone() {
            // Not a protection (Landlock denies these files anyway): a failure only leaves
            // the shells' `Permission denied`.
            if let Err(e) = bind_blank(&p) {
                report(&mut st, &format!("W {e}"));
            }
        }
        for (p, src) in c.plan.replaced.clone() {
            // As the blanked files: a failure only leaves login shells their system PATH.
            if let Err(e) = bind_file_read_only(&src, &p) {
                report(&mut st, &format!("W {e}"));
            }
        }
        // The outside-files covers, last: each is a sibling of the paths mounted above, never
        // their ancestor. The filesystem is attached for a moment over the session's temp dir
        // (the agent does not run yet), child `i` of it is bound over cover `i` (its first
        // lookup waits for the supervisor's server), and the attachment is detached again.
        crate::launch_trace::mark("s2:covers");
        if let Some(mnt) = c.fuse.take() {
            let staging = c.plan.tmp_dir.clone();
            let attached = CString::new(staging.as_os_str().as_bytes())
                .map_err(std::io::Error::other)
                .and_then(|t| sys::attach_tree(mnt.as_fd(), &t));
            // Without a cover an entry stays as it is (Landlock refuses it, unasked): in the
            // default mode a cover that cannot be made is said and the rest go without.
            let require = c.plan.outside_files == OutsideMode::Require && !c.allow_weaker;
            match attached {
                Err(e) if require => fail(
                    &mut st,
                    &format!("--outside-files require: cannot attach the filesystem: {e}"),
                ),
                Err(e) => report(
                    &mut st,
                    &format!(
                        "N {}",
                        crate::outside_fs::notice(&format!(
                            "the filesystem cannot be attached ({e})"
                        ))
                    ),
                ),
                Ok(()) => {
                    // One listing of the filesystem's root (READDIRPLUS) makes the kernel
                    // know every cover and its attributes: the binds below then resolve
                    // `staging/i` without a request to the server each. The listing is
                    // [`LISTING_REQUESTS`] requests the stage waits for: with fewer covers,
                    // each bind's own lookup is fewer.
                    let covers = c.plan.outside_covers.clone();
                    if covers.len() > LISTING_REQUESTS {
                        let _ = std::fs::read_dir(&staging).map(Iterator::count);
                    }
                    for (i, p) in covers.iter().enumerate() {
                        let src = staging.join(i.to_string());
                        let Err(e) =
                            mount(Some(&src), p, None::<&str>, MsFlags::MS_BIND, None::<&str>)
                        else {
                            c.plan.outside_mounted.push(p.clone());
                            continue;
                        };
                        if require {
                            let _ = nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH);
                            fail(
                                &mut st,
                                &format!(
                                    "--outside-files require: cannot cover {}: {e}",
                                    p.display()
                                ),
                            );
                        }
                        let cause = match covers.len() - i - 1 {
                            0 => format!("{} cannot be covered ({e})", p.display()),
                            n => format!(
                                "{} cannot be covered ({e}), nor the {n} entries after it",
                                p.display()
                            ),
                        };
                        report(&mut st, &format!("N {}", crate::outside_fs::notice(&cause)));
                        break;
                    }
                    if let Err(e) = nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH)
                    {
                        fail(
                            &mut st,
                            &format!(
                                "the outside-files filesystem cannot be detached from {}: {e}",
                                staging.display()
                            ),
                        );
                    }
                }
            }
            drop(mnt);
        }
        crate::launch_trace::mark("s2:loopback");
        if let Err(e) = sys::loopback_up() {
            report(
                &mut st,
                &format!("W loopback interface not up in the sandbox: {e}"),
            );
        }
        relays = relay_sockets(&c.nameservers, &mut st);
    } else if !c.plan.protected.is_empty()
        || !c.plan.pinned.is_empty()
        || !c.plan.branch_binds.is_empty()
        || !c.plan.state_layers.is_empty()
        || !c.plan.cache_layers.is_empty()
    {
        let list: Vec<String> = c
            .plan
            .protected
            .iter()
            .chain(&c.plan.pinned)
            .chain(c.plan.branch_binds.iter().map(|(_, over)| over))
            .chain(c.plan.state_layers.iter().map(|l| &l.real))
            .map(|p| p.display().to_string())
            .collect();
        if !list.is_empty() {
            report(
                &mut st,
                &format!("W NOT read-only (no mount namespace): {}", list.join(", ")),
            );
        }
        if !c.plan.cache_layers.is_empty() {
            report(
                &mut st,
                "W the toolchain caches are read-only for this session (no mount namespace for their private layers)",
            );
        }
    }
    // The agent's pty, in the private instance only. The master goes to the supervisor
    // (taken with `pidfd_getfd` like the listener, before the "go"), which relays it to the
    // person's terminal.
    let pty_master = match c.want_pty {
        Some(ws) if c.plan.private_pts => match open_private_pty(ws.as_ref()) {
            Ok((master, slave)) => {
                report(&mut st, &format!("P {}", master.as_raw_fd()));
                c.pty_slave = Some(slave);
                Some(master)
            }
            Err(e) => fail(
                &mut st,
                &format!("cannot open a pty in the private devpts: {e}"),
            ),
        },
        Some(_) => {
            report(
                &mut st,
                "W the agent runs without a pty (no private devpts instance)",
            );
            None
        }
        None => None,
    };
    // Stage 2 itself stays outside every Landlock domain: it forks the agent into the
    // session's domain and approved commands into domains of their own (`crate::runner`).
    // The ruleset is built here, before the hand-over, so a rule that cannot be made stops
    // the start.
    let require_full = !c.allow_weaker;
    crate::launch_trace::mark("s2:landlock-ruleset");
    let ruleset = match landlock_ruleset(&c.plan, &[], c.abi, require_full) {
        Ok(r) => Some(r),
        Err(e) if c.allow_weaker => {
            report(&mut st, &format!("W Landlock not fully enforced: {e}"));
            None
        }
        Err(e) => fail(&mut st, &format!("cannot enforce the Landlock rules: {e}")),
    };
    crate::launch_trace::mark("s2:filters");
    if let Err(e) = sys::set_no_new_privs() {
        fail(&mut st, &format!("cannot set no_new_privs: {e}"));
    }
    // The static filters first, the notification filter (with its listener) last: the
    // kernel runs them all and the most restrictive action wins (`crate::bpf`).
    for p in &c.static_filters {
        if let Err(e) = seccompiler::apply_filter(p) {
            fail(&mut st, &format!("cannot install the seccomp filter: {e}"));
        }
    }
    let killable = libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    let listener = match sys::install_filter_with_listener(&c.filter, killable) {
        Ok(l) => l,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            match sys::install_filter_with_listener(&c.filter, 0) {
                Ok(l) => {
                    report(&mut st, "W seccomp WAIT_KILLABLE_RECV unavailable: a signal during an ask may repeat it");
                    l
                }
                Err(e) => fail(&mut st, &format!("cannot install the seccomp filter: {e}")),
            }
        }
        Err(e) => fail(&mut st, &format!("cannot install the seccomp filter: {e}")),
    };
    {
        report(&mut st, &format!("L {}", listener.as_raw_fd()));
        crate::launch_trace::mark("s2:listener-sent");
    }
    drop(st);
    // The agent's process is made and restricted while the supervisor takes the listener
    // and makes its notifier: its first exec (the agent program) is a notified call, so
    // nothing of the agent's runs before the supervisor answers it, and that answer comes
    // only from the notifier made after the "go" is due. Should the supervisor never send
    // the "go", stage 2 exits and the kernel kills the waiting child with the namespace;
    // should the listener close untaken, the exec fails (`seccomp_unotify(2)`: ENOSYS).
    // The child shares stage 2's memory until its exec, stage 2 suspended meanwhile (no
    // copy of the supervisor's image to make and then free at the exec); so it only
    // borrows what it uses (its descriptors are its own: the exec closes the rest).
    let mut start_agent = || {
        if let Some(r) = &ruleset {
            match r
                .try_clone()
                .map_err(|e| e.to_string())
                .and_then(|r| restrict(r, require_full).map_err(|e| e.to_string()))
            {
                Ok(_) => {}
                Err(e) if c.allow_weaker => child_say(&format!(
                    "tyba: not enforced: Landlock not fully enforced: {e}"
                )),
                Err(e) => {
                    child_say(&format!("tyba: cannot enforce the Landlock rules: {e}"));
                    sys::exit_now(4)
                }
            }
        }
        exec_agent(&c)
    };
    // SAFETY: stage 2 has one thread (stage 1, whose memory it shares, only waits for it
    // with raw system calls); `start_agent` borrows only, and execs or exits.
    let spawned = unsafe { sys::spawn_sharing_memory(&mut start_agent) };
    match spawned {
        Err(_) => sys::exit_now(4),
        Ok(agent) => {
            drop(ruleset);
            drop(c.pty_slave.take());
            // The supervisor has taken the listener, the pty and the relays once it says "go".
            let mut ack = [0u8; 1];
            let got = c
                .ack_r
                .take()
                .map(|r| std::fs::File::from(r).read(&mut ack).unwrap_or(0))
                .unwrap_or(0);
            if got != 1 {
                sys::exit_now(4);
            }
            drop(listener);
            drop(pty_master);
            drop(relays);
            let Some(ctl) = c.ctl.take() else {
                sys::exit_now(4)
            };
            sys::close_fds_from_except(3, ctl.as_fd());
            let code = crate::runner::serve_stage2(ctl, agent, &c.plan, c.abi, require_full);
            crate::launch_trace::mark("s2:agent-reaped");
            // Leaving kills whatever the agent left behind in the namespace.
            sys::exit_now(code)
        }
    }
}

/// Requests stage 2 waits for when it lists the outside-files filesystem's root: OPENDIR
/// and two READDIRPLUS (the entries, then the end); RELEASEDIR is not waited for.
const LISTING_REQUESTS: usize = 3;

/// The agent: own session and process group, own pty, then exec. Run in a child that
/// shares stage 2's memory ([`sys::spawn_sharing_memory`]): it only borrows `c`.
fn exec_agent(c: &ChildCtx) -> ! {
    let _ = nix::unistd::setsid();
    if let Some(slave) = &c.pty_slave {
        let _ = sys::set_controlling_tty(slave.as_fd());
        for (t, pty) in (0..3).zip(c.pty_fds) {
            if pty {
                let _ = sys::dup_onto(slave.as_fd(), t);
            }
        }
    }
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    sys::reset_signals();
    restore_core_limit();
    if let Err(e) = nix::unistd::chdir(&c.plan.worktree) {
        child_say(&format!(
            "tyba: cannot enter the worktree {}: {e}",
            c.plan.worktree.display()
        ));
        sys::exit_now(127);
    }
    sys::close_fds_from(3);
    let argv: Vec<&std::ffi::CStr> = c.argv.iter().map(|a| a.as_c_str()).collect();
    let env: Vec<&std::ffi::CStr> = c.env.iter().map(|a| a.as_c_str()).collect();
    crate::launch_trace::mark("agent:execve");
    let e = sys::execve(&c.program, &argv, &env);
    child_say(&format!(
        "tyba: cannot run {}: {e}",
        c.program.to_string_lossy()
    ));
    sys::exit_now(127)
}

/// Writes one line on stderr from a fork child of the supervisor, with `write(2)` on fd 2:
/// `eprintln!` takes stderr's lock, which another thread of the supervisor may have held at
/// the fork (see [`sys::fork`]).
fn child_say(line: &str) {
    use std::os::fd::AsFd;
    let mut b = line.as_bytes().to_vec();
    b.push(b'\n');
    let _ = nix::unistd::write(std::io::stderr().as_fd(), &b);
}
