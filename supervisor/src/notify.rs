//! The notify loop: answers the system calls the seccomp filter hands to the supervisor
//! (`seccomp_unotify(2)`).
//!
//! - `execve`/`execveat`: the **launch chain** (the agent program the person named, and the
//!   images its own process execs into before any other process of the session makes a
//!   notified call) passes; a process whose ancestor (or itself) is an **approved command** passes
//!   (an approved command's children are not asked again); every other exec is a command the
//!   agent started: it is classified by the policy and decided (allow, ask, refuse).
//! - `connect`: made by the supervisor itself on its own copy of the address, never continued:
//!   the agent program's connections to its hosts get a socket from the host's network
//!   namespace injected in place of theirs; everything else is red and asked.
//! - metadata calls: see [`crate::meta`].
//!
//! A refusal's reason is written to the refused process's stderr, and its call fails.

use crate::approve::{Answer, Approver, AskKind, AskRequest};
use crate::control::{Counted, SessionControl};
use crate::meta::{self, Target};
use crate::net::{self, AgentHosts, Dest};
use crate::procfs::{self, Mem, ProcId};
use crate::runner::{self, Spawn, SpawnPayload, StageLink, ToStage};
use crate::sys::{self, Notif, Reply};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tyba_policy::{decide, ActionKind, AlwaysKey, Decision, ExecMode, SessionMemory, Verdict};

/// One audited event of the session: what was decided about a notified call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// `exec`, `connect` or `metadata`.
    pub kind: &'static str,
    /// What was attempted (command line, destination, path).
    pub what: String,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The refusal text or the ask's answer.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AgentState {
    NotStarted,
    Running(ProcId),
    /// The agent's process exec'd into a command: no process is the agent any more.
    Replaced,
}

#[derive(Debug)]
pub(crate) struct State {
    agent: AgentState,
    launch_chain_open: bool,
    approved: HashSet<ProcId>,
    /// Live runner keepers forked by stage 2: pid in the sandbox's namespace → start time.
    runners: HashMap<u32, u64>,
    memory: SessionMemory,
    pub(crate) log: Vec<AuditEvent>,
}

/// Everything the loop needs; shared with worker threads.
pub(crate) struct Notifier {
    pub listener: OwnedFd,
    /// Classifies exec command lines with the policy (off this thread, confined, bounded).
    pub classifier: crate::classify_worker::Classifier,
    /// The live level (changed by `tyba autonomy` between decisions) and the counts.
    pub control: Arc<SessionControl>,
    pub mode: ExecMode,
    pub worktree: PathBuf,
    pub approver: Arc<dyn Approver>,
    pub hosts: AgentHosts,
    pub writable: Vec<PathBuf>,
    /// Paths the agent's domain grants read + execute.
    pub readable: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    /// The link to stage 2, which forks approved commands into their own domains.
    pub stage: Arc<StageLink>,
    /// tyba's own executable, exec'd as an approved command's proxy.
    pub proxy_exe: Option<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    /// Pid (supervisor's namespace) of the sandbox's PID 1.
    pub stage2: u32,
    pub state: Mutex<State>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("worktree", &self.worktree)
            .finish_non_exhaustive()
    }
}

impl State {
    pub(crate) fn new() -> State {
        State {
            agent: AgentState::NotStarted,
            launch_chain_open: false,
            approved: HashSet::new(),
            runners: HashMap::new(),
            memory: SessionMemory::new(),
            log: Vec::new(),
        }
    }
}

enum ExecDecision {
    Continue,
    Refuse(String),
    Ask(AskRequest, Option<AlwaysKey>, ProcId, Option<ExecCopy>),
}

/// The supervisor's own copy of an exec whose approval needs a domain of its own.
struct ExecCopy {
    path: String,
    argv: Vec<String>,
    envp: Vec<Vec<u8>>,
    grants: Vec<runner::Grant>,
}

const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// Directories searched for bare program names on a standard `PATH`.
const SYSTEM_BIN_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// The program word of an exec: the file the kernel runs (`path`, made explicit when relative),
/// shown as `argv[0]` only when `argv[0]` names that same file: equal to `path`, or a bare
/// name whose system program (`/usr/bin/NAME`, …) is `path`.
///
/// `argv[0]` is a label the caller chooses (`exec -a`, `execve("/usr/bin/python3",
/// ["bash", "-c", …])`); classifying it instead of the file would let any program pass as a
/// listed one.
fn program_word(path: &str, argv0: Option<&str>) -> String {
    let explicit = if path.contains('/') {
        path.to_string()
    } else {
        // execve(2) does not search PATH: a bare name is relative to the working directory.
        format!("./{path}")
    };
    if let Some(a0) = argv0 {
        if a0 == path || a0 == explicit {
            return a0.to_string();
        }
        if !a0.contains('/') && !a0.is_empty() {
            let same_system_program = SYSTEM_BIN_DIRS
                .iter()
                .any(|d| path.strip_prefix(d).and_then(|r| r.strip_prefix('/')) == Some(a0));
            if same_system_program {
                return a0.to_string();
            }
        }
    }
    explicit
}

/// The command line an exec stands for: the script of `SHELL [opts] -c SCRIPT …` when the
/// file run is a system shell (`/usr/bin/bash`, `/bin/sh`, …), else the program word ([`program_word`]) and `argv[1..]`,
/// shell-quoted and joined.
pub(crate) fn command_line(path: &str, argv: &[String]) -> String {
    let program = program_word(path, argv.first().map(String::as_str));
    // Only the system's shells are shells: a file the agent named `bash` in the worktree is a
    // program nobody listed, shown and classified with its path and whole argv.
    let system_shell = SYSTEM_BIN_DIRS.iter().any(|d| {
        path.strip_prefix(d)
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(|name| SHELLS.contains(&name))
    });
    if system_shell {
        let mut saw_c = false;
        for a in argv.iter().skip(1) {
            if a.starts_with('-') || a.starts_with('+') {
                if a != "--" && !a.starts_with("--") && a[1..].contains('c') {
                    saw_c = true;
                }
                continue;
            }
            if saw_c {
                return a.clone();
            }
            break;
        }
    }
    std::iter::once(program.as_str())
        .chain(argv.iter().skip(1).map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_/.,:=@%+-".contains(&b))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EACCES)
}

impl Notifier {
    fn reply(&self, id: u64, r: Reply) {
        // ENOENT: the process died or was interrupted meanwhile; nothing to answer.
        let _ = sys::notif_send(self.listener.as_fd(), id, r);
    }

    fn valid(&self, id: u64) -> bool {
        sys::notif_id_valid(self.listener.as_fd(), id)
    }

    fn log(&self, e: AuditEvent) {
        let _ = self.approver.record(&e);
        if let Ok(mut s) = self.state.lock() {
            s.log.push(e);
        }
    }

    /// Writes `tyba: <reason>` on the process's stderr, logs, and fails the call with `errno`.
    fn refuse(&self, n: &Notif, kind: &'static str, what: String, reason: String, errno: i32) {
        let mut event = AuditEvent {
            kind,
            what,
            allowed: false,
            reason: Some(reason),
        };
        // The approver's note (the repeated-failure guard's nudge) goes into the refusal.
        if let Some(note) = self.approver.record(&event) {
            event.reason = event.reason.map(|r| r + &note);
        }
        let reason = event.reason.clone().unwrap_or_default();
        self.control.count(Counted::Denied);
        if let Ok(mut s) = self.state.lock() {
            s.log.push(event);
        }
        if let Ok(pid) = procfs::tgid(n.pid) {
            if let Ok(pidfd) = sys::pidfd_open(pid as i32) {
                if let Ok(fd) = sys::pidfd_getfd(pidfd.as_fd(), 2) {
                    let mut f = std::fs::File::from(fd);
                    let _ = writeln!(f, "tyba: {reason}");
                }
            }
        }
        self.reply(n.id, Reply::Errno(errno));
    }

    /// Asks the approver on this thread; `Err`/`Deny` refuse (fail closed).
    fn ask(&self, req: &AskRequest) -> Result<Answer, String> {
        match self.approver.ask(req) {
            Ok(Answer::Deny { reason }) => Err(reason.unwrap_or_else(|| req.default_refusal())),
            Ok(a) => Ok(a),
            Err(e) => Err(format!("{} ({e})", req.default_refusal())),
        }
    }

    fn handle(self: &Arc<Self>, n: Notif) {
        if n.arch != crate::bpf::AUDIT_ARCH_X86_64 {
            return self.reply(n.id, Reply::Errno(libc::ENOSYS));
        }
        match i64::from(n.nr) {
            libc::SYS_execve | libc::SYS_execveat => self.handle_exec(n),
            libc::SYS_connect => {
                let me = Arc::clone(self);
                std::thread::spawn(move || me.handle_connect(n));
            }
            nr if crate::bpf::METADATA_SYSCALLS.contains(&nr) => self.handle_meta(n),
            libc::SYS_inotify_add_watch => meta::handle_watch(self, n),
            _ => self.reply(n.id, Reply::Errno(libc::ENOSYS)),
        }
    }

    fn handle_exec(self: &Arc<Self>, n: Notif) {
        match self.exec_decision(&n) {
            Ok(ExecDecision::Continue) => self.reply(n.id, Reply::Continue),
            Ok(ExecDecision::Refuse(reason)) => {
                let what = self.exec_what(&n);
                self.refuse(&n, "exec", what, reason, libc::EACCES)
            }
            Ok(ExecDecision::Ask(req, key, pid, copy)) => {
                let me = Arc::clone(self);
                std::thread::spawn(move || {
                    let what = match &req.kind {
                        AskKind::Command { command } => command.clone(),
                        k => k.to_string(),
                    };
                    match me.ask(&req) {
                        Ok(answer) => {
                            if let Ok(mut s) = me.state.lock() {
                                if let (Answer::Always, Some(k)) = (&answer, key) {
                                    s.memory.remember(k);
                                }
                                if copy.is_none() {
                                    s.approved.insert(pid);
                                }
                                if s.agent == AgentState::Running(pid) {
                                    s.agent = AgentState::Replaced;
                                }
                            }
                            me.log(AuditEvent {
                                kind: "exec",
                                what: what.clone(),
                                allowed: true,
                                reason: Some(format!("{answer:?}")),
                            });
                            match copy {
                                None => me.reply(n.id, Reply::Continue),
                                Some(c) => {
                                    if let Err(reason) = me.run_approved(&n, c) {
                                        me.refuse(&n, "exec", what, reason, libc::EACCES)
                                    }
                                }
                            }
                        }
                        Err(reason) => me.refuse(&n, "exec", what, reason, libc::EACCES),
                    }
                });
            }
            Err(e) => self.reply(n.id, Reply::Errno(errno_of(&e))),
        }
    }

    fn exec_what(&self, n: &Notif) -> String {
        self.read_exec(n)
            .map(|(path, argv)| command_line(&path, &argv))
            .unwrap_or_else(|_| "(unreadable exec)".to_string())
    }

    /// `(path, argv)` of an execve/execveat, lossily decoded. For `execveat(2)` the path is
    /// made absolute from its directory fd (`AT_EMPTY_PATH` with an empty path: the fd's own
    /// file), as the kernel resolves it.
    fn read_exec(&self, n: &Notif) -> std::io::Result<(String, Vec<String>)> {
        let mem = Mem::open(n.pid)?;
        let (path_ptr, argv_ptr) = if i64::from(n.nr) == libc::SYS_execveat {
            (n.args[1], n.args[2])
        } else {
            (n.args[0], n.args[1])
        };
        let path = String::from_utf8_lossy(&mem.read_cstr(path_ptr, libc::PATH_MAX as usize)?)
            .into_owned();
        let argv = mem.read_argv(argv_ptr, 65_536, 2 << 20)?;
        let path = if i64::from(n.nr) == libc::SYS_execveat && !path.starts_with('/') {
            // The dirfd argument is an int: the low 32 bits of the register.
            let dirfd = n.args[0] as u32 as i32;
            let dir = if dirfd == libc::AT_FDCWD {
                procfs::cwd(n.pid)?
            } else {
                std::fs::read_link(format!("/proc/{}/fd/{dirfd}", n.pid))?
            };
            let dir = dir.to_string_lossy().into_owned();
            if path.is_empty() {
                dir
            } else {
                format!("{}/{path}", dir.trim_end_matches('/'))
            }
        } else {
            path
        };
        Ok((
            path,
            argv.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect(),
        ))
    }

    fn exec_decision(&self, n: &Notif) -> std::io::Result<ExecDecision> {
        let pid = procfs::proc_id(n.pid)?;
        {
            let mut s = self
                .state
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            match s.agent {
                AgentState::NotStarted => {
                    s.agent = AgentState::Running(pid);
                    s.launch_chain_open = true;
                    return Ok(ExecDecision::Continue);
                }
                AgentState::Running(a) if a == pid && s.launch_chain_open => {
                    return Ok(ExecDecision::Continue)
                }
                _ => {}
            }
            s.launch_chain_open = false;
            // An approved command's descendants (and its own further execs) pass.
            let agent_pid = match s.agent {
                AgentState::Running(a) => Some(a.pid),
                _ => None,
            };
            let mut cur = pid;
            for _ in 0..128 {
                if s.approved.contains(&cur) {
                    return Ok(ExecDecision::Continue);
                }
                if Some(cur.pid) == agent_pid || cur.pid == self.stage2 || cur.pid <= 1 {
                    break;
                }
                let Ok((ppid, _)) = procfs::stat(cur.pid) else {
                    break;
                };
                // A runner's keeper (`crate::runner`), a child of stage 2 the supervisor asked
                // for and known by its pid in the sandbox and its start time: everything under
                // it is the approved command, started from the supervisor's own copy.
                if ppid == self.stage2
                    && !s.runners.is_empty()
                    && procfs::ns_pid(cur.pid)
                        .is_some_and(|ns| s.runners.get(&ns) == Some(&cur.start))
                {
                    return Ok(ExecDecision::Continue);
                }
                let Ok((_, start)) = procfs::stat(ppid) else {
                    break;
                };
                cur = ProcId { pid: ppid, start };
            }
        }
        let (path, argv) = self.read_exec(n)?;
        if !self.valid(n.id) {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        let command = command_line(&path, &argv);
        let cwd = procfs::cwd(n.pid).unwrap_or_else(|_| self.worktree.clone());
        // Pushes and aliases resolve against the repository (tyba-git-guard), like `tyba
        // classify`, on a worker confined to what the agent may read, under a deadline
        // (`crate::classify_worker`); its refusals fail closed.
        let class = match self.classifier.classify(&command, &cwd) {
            Ok(c) => c,
            Err(reason) => return Ok(ExecDecision::Refuse(reason)),
        };
        let mut s = self
            .state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        match decide(
            &class,
            ActionKind::Command,
            &command,
            self.control.autonomy(),
            self.mode,
            &s.memory,
        ) {
            Decision::Allow => {
                self.control.count(Counted::Allowed);
                s.approved.insert(pid);
                if s.agent == AgentState::Running(pid) {
                    s.agent = AgentState::Replaced;
                }
                Ok(ExecDecision::Continue)
            }
            Decision::Refuse { reason } => Ok(ExecDecision::Refuse(reason)),
            Decision::Ask(a) => {
                let grants = runner::grants(&class, &self.writable, &self.readable);
                let mut reasons: Vec<String> = class
                    .decisive_reasons()
                    .iter()
                    .map(|r| r.to_string())
                    .collect();
                if !grants.is_empty() {
                    let list: Vec<String> = grants.iter().map(|g| g.to_string()).collect();
                    reasons.push(format!(
                        "if approved, it runs in a sandbox domain of its own that adds: {}",
                        list.join("; ")
                    ));
                }
                let copy = if grants.is_empty() {
                    None
                } else {
                    Some(ExecCopy {
                        path,
                        argv,
                        envp: self.read_envp(n)?,
                        grants,
                    })
                };
                Ok(ExecDecision::Ask(
                    AskRequest {
                        kind: AskKind::Command { command },
                        verdict: a.verdict,
                        reasons,
                        rememberable: a.rememberable.is_some(),
                        pid: n.pid,
                    },
                    a.rememberable,
                    pid,
                    copy,
                ))
            }
        }
    }

    /// The environment of an execve/execveat.
    fn read_envp(&self, n: &Notif) -> std::io::Result<Vec<Vec<u8>>> {
        let envp_ptr = if i64::from(n.nr) == libc::SYS_execveat {
            n.args[3]
        } else {
            n.args[2]
        };
        Mem::open(n.pid)?.read_argv(envp_ptr, 65_536, 2 << 20)
    }

    /// Runs an approved exec in a Landlock domain of its own (`crate::runner`): forks the
    /// runner through stage 2, turns the asking process into its proxy, relays the end.
    /// Replies to the notification itself, except on `Err` (the refusal reason).
    fn run_approved(&self, n: &Notif, c: ExecCopy) -> Result<(), String> {
        let cannot = |why: String| {
            format!("approved, but tyba cannot run it in its own sandbox domain: {why}")
        };
        let exe = self
            .proxy_exe
            .as_ref()
            .and_then(|p| std::fs::File::open(p).ok())
            .ok_or_else(|| cannot("tyba's own executable is unreadable".into()))?;
        let tgid = procfs::tgid(n.pid).map_err(|e| cannot(e.to_string()))?;
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        if execveat && n.args[4] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0 {
            return Err(cannot("execveat with AT_SYMLINK_NOFOLLOW".into()));
        }
        // Where the exec's file name is, and whether rewriting it changes nothing else.
        let name_ptr = if execveat { n.args[1] } else { n.args[0] };
        let new_name = format!("{}\0", crate::proxy::PROXY_EXEC_FN);
        let mem = Mem::open_rw(n.pid).map_err(|e| cannot(e.to_string()))?;
        let mut old_name = mem
            .read_cstr(name_ptr, libc::PATH_MAX as usize)
            .map_err(|e| cannot(e.to_string()))?;
        old_name.push(0);
        let old_len = old_name.len();
        let parent = procfs::stat(tgid).ok().map(|(pp, _)| pp);
        // A vfork/posix_spawn child shares its parent's memory: the rewrite lands in the
        // parent's copy of the name too, and is undone there once the proxy runs.
        let shares_with_parent =
            parent.filter(|&pp| !sys::same_address_space(tgid, pp).is_ok_and(|same| !same));
        let alone = procfs::threads(tgid) == Some(1) && shares_with_parent.is_none();
        if old_len < new_name.len() && !alone {
            return Err(cannot(format!(
                "its file name is shorter than {} bytes and its process shares memory; run it by its full path",
                new_name.len() - 1
            )));
        }
        if !procfs::private_mapping(tgid, name_ptr, new_name.len() as u64) {
            return Err(cannot("its file name is not in private memory".into()));
        }
        let (fds, cwd) = runner::inherited(tgid).map_err(cannot)?;
        let spawn = Spawn {
            payload: SpawnPayload {
                path: c.path.into_bytes(),
                argv: c.argv.into_iter().map(String::into_bytes).collect(),
                envp: runner::runner_env(c.envp, &self.writable, self.classifier.home()),
                grants: c.grants,
            },
            cwd,
            fds,
        };
        let runner::Spawned {
            id,
            pid: ns_pid,
            start,
            ended: rx,
        } = self.stage.spawn(spawn).map_err(cannot)?;
        let unregister = || {
            if let Ok(mut s) = self.state.lock() {
                if s.runners.get(&ns_pid) == Some(&start) {
                    s.runners.remove(&ns_pid);
                }
            }
        };
        let abort = |why: String| {
            self.stage.send(&ToStage::Signal {
                id,
                sig: libc::SIGKILL,
            });
            self.stage.forget(id);
            unregister();
            cannot(why)
        };
        if let Ok(mut s) = self.state.lock() {
            s.runners.insert(ns_pid, start);
        }
        let (sup, prox) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| abort(e.to_string()))?;
        sys::notif_addfd_setfd(self.listener.as_fd(), n.id, exe.as_fd(), 3, true)
            .and_then(|_| {
                sys::notif_addfd_setfd(
                    self.listener.as_fd(),
                    n.id,
                    prox.as_fd(),
                    crate::proxy::CHANNEL_FD as u32,
                    false,
                )
            })
            .map_err(|e| abort(format!("installing its proxy: {e}")))?;
        drop(prox);
        mem.write(name_ptr, new_name.as_bytes())
            .map_err(|e| abort(format!("installing its proxy: {e}")))?;
        self.reply(n.id, Reply::Continue);
        if !runner::proxy_started(&sup) {
            let reason = abort("its proxy did not start".into());
            self.log(AuditEvent {
                kind: "exec",
                what: "(approved command)".into(),
                allowed: false,
                reason: Some(reason),
            });
            return Ok(());
        }
        if let Some(pp) = shares_with_parent {
            // The proxy runs in a memory of its own now; give the parent its name back (when
            // it is still our rewrite, and the bytes fit where they were).
            if old_len >= new_name.len() {
                if let Ok(pm) = Mem::open_rw(pp) {
                    if pm.read(name_ptr, new_name.len()).ok().as_deref()
                        == Some(new_name.as_bytes())
                    {
                        let _ = pm.write(name_ptr, &old_name[..new_name.len()]);
                    }
                }
            }
        }
        self.stage.send(&ToStage::Go { id });
        runner::relay(&self.stage, id, sup, &rx);
        // A runner that ended before its exec must not leave its pid to a later process.
        unregister();
        Ok(())
    }

    /// Whether `pid` is the agent program; a notified call by any other process ends the
    /// launch chain.
    fn is_agent(&self, pid: ProcId) -> bool {
        self.state
            .lock()
            .map(|mut s| {
                let agent = s.agent == AgentState::Running(pid);
                if !agent {
                    s.launch_chain_open = false;
                }
                agent
            })
            .unwrap_or(false)
    }

    fn handle_connect(&self, n: Notif) {
        let r = self.connect_inner(&n);
        if let Err(e) = r {
            self.reply(n.id, Reply::Errno(errno_of(&e)));
        }
    }

    fn connect_inner(&self, n: &Notif) -> std::io::Result<()> {
        let pid = procfs::proc_id(n.pid)?;
        let len = usize::try_from(n.args[2]).unwrap_or(usize::MAX);
        if len > 128 {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let raw = Mem::open(n.pid)?.read(n.args[1], len)?;
        let pidfd = sys::pidfd_open(pid.pid as i32)?;
        let sock = sys::pidfd_getfd(pidfd.as_fd(), n.args[0] as i32)?;
        let domain = sys::getsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_DOMAIN)?;
        if !self.valid(n.id) {
            return Ok(());
        }
        let dest = net::parse_sockaddr(&raw)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let by_agent = self.is_agent(pid);
        match (domain, &dest) {
            (libc::AF_UNIX, Dest::UnixAbstract(_)) | (_, Dest::Other(_)) => {
                // In the sandbox's own network namespace and Landlock-scoped: done on its own
                // socket with the supervisor's copy of the address.
                self.reply_result(n.id, sys::connect_raw(sock.as_fd(), &raw));
                Ok(())
            }
            (libc::AF_UNIX, Dest::UnixPath(p)) => {
                let target = Target::Path {
                    dirfd: libc::AT_FDCWD,
                    path: p.clone(),
                    nofollow: false,
                };
                let obj = meta::open_target(n.pid, &pidfd, &target)?;
                let real = meta::object_path(&obj)?;
                // The person's approval sockets: never reachable from the sandbox, not even
                // by asking (an approved connection could answer its own asks).
                if crate::broker::paths::socket_dir()
                    .and_then(|d| std::fs::canonicalize(d).ok())
                    .is_some_and(|d| real.starts_with(d))
                {
                    self.refuse(
                        n,
                        "connect",
                        real.display().to_string(),
                        "refused by tyba: the session's approval sockets are not reachable from the sandbox".to_string(),
                        libc::EACCES,
                    );
                    return Ok(());
                }
                let inside = meta::path_allowed(&real, &self.writable, &[]);
                if !inside {
                    let req = AskRequest {
                        kind: AskKind::Connect {
                            destination: format!("unix:{}", real.display()),
                            by_agent,
                        },
                        verdict: Verdict::Red,
                        reasons: vec![format!(
                            "connects to a unix socket outside the worktree ({})",
                            real.display()
                        )],
                        rememberable: false,
                        pid: n.pid,
                    };
                    if let Err(reason) = self.ask(&req) {
                        self.refuse(
                            n,
                            "connect",
                            real.display().to_string(),
                            reason,
                            libc::EACCES,
                        );
                        return Ok(());
                    }
                }
                let via = format!("/proc/self/fd/{}", obj.as_raw_fd());
                let addr = net::sockaddr_un(via.as_bytes())
                    .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
                self.reply_result(n.id, sys::connect_raw(sock.as_fd(), &addr));
                Ok(())
            }
            (libc::AF_INET | libc::AF_INET6, Dest::Inet(a)) => {
                if !(by_agent && self.hosts.allows(a)) {
                    let who = if by_agent { "the agent" } else { "a command" };
                    let req = AskRequest {
                        kind: AskKind::Connect {
                            destination: a.to_string(),
                            by_agent,
                        },
                        verdict: Verdict::Red,
                        reasons: vec![format!("network: {who} connects to {a}")],
                        rememberable: false,
                        pid: n.pid,
                    };
                    if let Err(reason) = self.ask(&req) {
                        self.refuse(n, "connect", a.to_string(), reason, libc::EACCES);
                        return Ok(());
                    }
                    self.log(AuditEvent {
                        kind: "connect",
                        what: a.to_string(),
                        allowed: true,
                        reason: Some("approved".into()),
                    });
                }
                self.inject_connected(n, pid, &sock, domain, &raw)
            }
            _ => Err(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
        }
    }

    fn reply_result(&self, id: u64, r: std::io::Result<()>) {
        match r {
            Ok(()) => self.reply(id, Reply::Value(0)),
            Err(e) => self.reply(id, Reply::Errno(errno_of(&e))),
        }
    }

    /// Makes a socket in the host's network namespace, connects it to the supervisor's copy of
    /// the address and installs it in place of the process's socket.
    fn inject_connected(
        &self,
        n: &Notif,
        pid: ProcId,
        sock: &OwnedFd,
        domain: i32,
        raw: &[u8],
    ) -> std::io::Result<()> {
        let ty = sys::getsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_TYPE)?;
        let proto = sys::getsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_PROTOCOL)?;
        let fl = nix::fcntl::fcntl(sock.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .map_err(std::io::Error::from)?;
        let nonblock = fl & libc::O_NONBLOCK != 0;
        let new = sys::socket(
            domain,
            ty | if nonblock { libc::SOCK_NONBLOCK } else { 0 },
            proto,
        )?;
        let r = sys::connect_raw(new.as_fd(), raw);
        let result = match r {
            Ok(()) => Reply::Value(0),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                Reply::Errno(libc::EINPROGRESS)
            }
            Err(e) => {
                self.reply(n.id, Reply::Errno(errno_of(&e)));
                return Ok(());
            }
        };
        let cloexec = procfs::fd_cloexec(pid.pid, n.args[0] as i32);
        sys::notif_addfd_setfd(
            self.listener.as_fd(),
            n.id,
            new.as_fd(),
            n.args[0] as u32,
            cloexec,
        )?;
        self.reply(n.id, result);
        Ok(())
    }

    fn handle_meta(self: &Arc<Self>, n: Notif) {
        let r = (|| -> std::io::Result<Option<(meta::MetaOp, OwnedFd, PathBuf)>> {
            let pid = procfs::tgid(n.pid)?;
            let mem = Mem::open(n.pid)?;
            let call = meta::decode(&mem, i64::from(n.nr), n.args)?;
            let pidfd = sys::pidfd_open(pid as i32)?;
            let obj = meta::open_target(n.pid, &pidfd, &call.target)?;
            if !self.valid(n.id) {
                return Ok(None);
            }
            let real = meta::object_path(&obj)?;
            Ok(Some((call.op, obj, real)))
        })();
        if let Ok(pid) = procfs::proc_id(n.pid) {
            self.is_agent(pid);
        }
        let (op, obj, real) = match r {
            Ok(Some(x)) => x,
            Ok(None) => return,
            Err(e) => return self.reply(n.id, Reply::Errno(errno_of(&e))),
        };
        let what = format!("{} {}", op.name(), real.display());
        if meta::path_allowed(&real, &self.writable, &self.protected) {
            return self.finish_meta(&n, op, &obj, what);
        }
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            let req = AskRequest {
                kind: AskKind::Metadata {
                    path: real.display().to_string(),
                    operation: op.name(),
                },
                verdict: Verdict::Red,
                reasons: vec![format!(
                    "changes {} of {} outside the worktree or in a protected file",
                    op.name(),
                    real.display()
                )],
                rememberable: false,
                pid: n.pid,
            };
            match me.ask(&req) {
                Ok(_) => me.finish_meta(&n, op, &obj, what),
                Err(reason) => me.refuse(&n, "metadata", what, reason, libc::EPERM),
            }
        });
    }

    fn finish_meta(&self, n: &Notif, op: meta::MetaOp, obj: &OwnedFd, what: String) {
        if let Err((e, reason)) = meta::check_op(obj, op, self.uid, self.gid) {
            return self.refuse(n, "metadata", what, format!("refused by tyba: {reason}"), e);
        }
        self.reply_result(n.id, meta::perform(obj, op));
    }
}

/// Runs the loop until `stop` is set or the listener hangs up (no sandboxed process left).
pub(crate) fn serve(n: Arc<Notifier>, stop: Arc<AtomicBool>) {
    // Blocking in SECCOMP_IOCTL_NOTIF_RECV itself (no poll first) is what the synchronous
    // wake-up mode hands the CPU to. The thread is left blocked when the session ends: the
    // supervisor exits right after.
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match sys::notif_recv(n.listener.as_fd()) {
            Ok(notif) => n.handle(notif),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINTR)) => {
                continue
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shell_dash_c_is_the_command() {
        assert_eq!(
            command_line("/bin/bash", &v(&["/bin/bash", "-c", "ls -la | wc"])),
            "ls -la | wc"
        );
        assert_eq!(
            command_line("/usr/bin/bash", &v(&["bash", "-lc", "git status"])),
            "git status"
        );
        assert_eq!(
            command_line("/bin/bash", &v(&["/bin/bash", "-c", "-l", "echo hi"])),
            "echo hi"
        );
        assert_eq!(
            command_line("/usr/bin/sh", &v(&["sh", "script.sh"])),
            "sh script.sh"
        );
    }

    #[test]
    fn argv_is_quoted() {
        assert_eq!(
            command_line("/usr/bin/rm", &v(&["rm", "-f", "a b", "it's"])),
            "rm -f 'a b' 'it'\\''s'"
        );
        assert_eq!(
            command_line("/usr/bin/touch", &v(&["touch", ""])),
            "touch ''"
        );
    }

    #[test]
    fn the_file_run_is_the_program_not_argv0() {
        // A label that names another program is replaced by the file the kernel runs.
        assert_eq!(
            command_line("/usr/bin/python3", &v(&["bash", "-c", "ls"])),
            "/usr/bin/python3 -c ls"
        );
        assert_eq!(
            command_line("/work/wt/evil.sh", &v(&["ls", "-la"])),
            "/work/wt/evil.sh -la"
        );
        assert_eq!(command_line("evil", &v(&["ls"])), "./evil");
        assert_eq!(command_line("./evil", &v(&["./evil"])), "./evil");
        assert_eq!(
            command_line("/usr/bin/cat", &v(&["/bin/cat", "x"])),
            "/usr/bin/cat x"
        );
        // A shell run under another label is still a shell.
        assert_eq!(
            command_line("/usr/bin/bash", &v(&["-bash", "-c", "rm -rf x"])),
            "rm -rf x"
        );
        // A file named like a shell outside the system's directories is not one.
        assert_eq!(
            command_line("/work/wt/bash", &v(&["bash", "-c", "echo hi > ~/x"])),
            "/work/wt/bash -c 'echo hi > ~/x'"
        );
        assert_eq!(
            command_line("/work/wt/bash", &v(&["/work/wt/bash", "-c", "ls"])),
            "/work/wt/bash -c ls"
        );
        assert_eq!(
            command_line("/usr/bin/../../work/wt/sh", &v(&["sh", "-c", "ls"])),
            "/usr/bin/../../work/wt/sh -c ls"
        );
        // An empty argv still names the file.
        assert_eq!(command_line("/usr/bin/id", &[]), "/usr/bin/id");
    }
}
