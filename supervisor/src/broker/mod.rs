//! The broker: one per session, the person on the other side of every ask (DESIGN.md §3,
//! issue 5).
//!
//! The notify loop calls [`Approver::ask`] on a worker thread while the asking process stays
//! blocked in its system call; the broker queues the ask, tells the person (same-terminal
//! prompt, terminal bell and title, `notify-send`, the inbox on the session's socket) and
//! blocks that worker thread only, until someone answers. Any number of asks may wait at
//! once and be answered in any order.
//!
//! Fail closed: when the session ends ([`Broker::close`]) every pending ask is denied and
//! logged as such; an ask whose process died is denied; a poisoned lock is a deny; a client
//! that sends garbage or hangs up answers nothing. An `always` on a red ask is refused with
//! a reason (and could not be stored anyway: [`tyba_policy::AlwaysKey`] is made only from
//! yellow verdicts).
//!
//! Terms: an ask id is `<session>-<n>`, unique across the user's sessions because session ids
//! are random.
//!
//! ```no_run
//! use tyba_supervisor::broker::{Broker, BrokerConfig};
//! # fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = Broker::start(BrokerConfig::new("0a1b2c3d4e5f", "/work/repo".into()))?;
//! // hand `broker.clone()` to `tyba_supervisor::run` as its approver, then:
//! broker.close("the session ended");
//! # Ok(()) }
//! ```

pub mod audit;
pub mod client;
pub mod guard;
pub mod lock;
pub mod notice;
pub mod paths;
pub mod prompt;
pub mod proto;
mod server;
pub(crate) use server::runtime;
pub mod text;

use crate::approve::{Answer, Approver, ApproverError, AskKind, AskRequest, Reach};
use crate::control::{ControlError, Counted, SessionControl, SessionInfo};
use crate::notify::AuditEvent;
use audit::{AuditLine, AuditLog};
use proto::{HookAnswer, HookAsk, HookDecision, HookRecord, PendingView, SessionView, WireAnswer};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How often a waiting ask checks that its process is still alive.
const LIVENESS_PERIOD: Duration = Duration::from_millis(250);
/// The most hook asks that may wait at once; more are denied (a flood is not a question).
const MAX_HOOK_PENDING: usize = 64;
/// Why an ask whose process is gone, exiting or being killed is withdrawn ([`alive`]): not a
/// refusal of the agent's, so never counted by the repeated-failure guard.
const ASKER_GONE: &str = "the asking process is gone or being ended";
/// How long a hook ask's `once` stands for the kernel layer's ask of the same command.
const LINK_WINDOW: Duration = Duration::from_secs(120);
/// Who answers the asks of a non-interactive session, in the audit log.
pub const NOBODY: &str = "nobody (non-interactive session)";
/// Hook tools whose action is a shell command line.
const SHELL_TOOLS: &[&str] = &["bash", "run_shell_command", "shell", "exec_command"];

/// Errors starting a broker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The socket or log directory is unusable.
    #[error(transparent)]
    Path(#[from] paths::PathError),
    /// The socket or log cannot be made.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// No pending ask has this id (answered already, or never existed).
    #[error("no pending ask {0} in this session")]
    Unknown(String),
    /// `always` on an ask that can never be remembered.
    #[error("`always` is refused for {id}: it is {verdict}, and only a yellow command can be allowed for the session; answer once or deny")]
    AlwaysRefused {
        /// The ask.
        id: String,
        /// Its colour (or `a pause`).
        verdict: String,
    },
    /// The session has ended.
    #[error("the session has ended")]
    Closed,
}

/// Why a live control (`tyba autonomy`, `tyba stop`, the prompt's level key) was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlRefused {
    /// Raising to `high` without the person's confirmation.
    #[error("raising autonomy from {from} to high needs the person's confirmation on the terminal that asks for it (high is for trusted workspaces only)")]
    NotConfirmed {
        /// The level now.
        from: tyba_policy::Autonomy,
    },
    /// The session has ended.
    #[error("the session has ended")]
    Closed,
    /// The stop could not be carried out.
    #[error(transparent)]
    Stop(#[from] ControlError),
}

/// How a broker is set up.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The session id.
    pub session: String,
    /// The session's worktree (shown by `tyba inbox`).
    pub worktree: PathBuf,
    /// Open the per-user socket for `tyba inbox/approve/deny` (off in unit tests).
    pub socket: bool,
    /// Write the audit log under the state directory.
    pub audit: bool,
    /// The hook-only socket to listen on (inside the session's private temp dir), if any.
    pub hook_socket: Option<PathBuf>,
    /// Similar failures in a row before a nudge (policy `failures.nudge_after`; 0: never).
    pub nudge_after: u32,
    /// Similar failures in a row before a pause (policy `failures.pause_after`; 0: never).
    pub pause_after: u32,
    /// Ring the bell, set the title and call `notify-send` when an ask starts waiting.
    pub notices: bool,
    /// The session's policy: re-classifies the shell commands hooks ask about, so what the
    /// person is shown (and what an answer carries over to the kernel layer) does not rest
    /// on what a process in the sandbox claims. Without it hook asks are never linked.
    pub policy: Option<tyba_policy::Policy>,
    /// `~` for that classification.
    pub home: Option<PathBuf>,
    /// The session's scratch directory (its `TMPDIR`): an agent's wrapper redirecting into it
    /// is housekeeping, so the command inside the wrapper is what a hook's answer links to.
    pub scratch: Option<PathBuf>,
    /// The session's live controls, shared with the notify loop.
    pub control: Arc<SessionControl>,
    /// `--non-interactive`: nobody answers. Every ask (the sandbox's and the agent hook's) is
    /// denied at once with its reason and logged as an ask answered `deny` by `nobody
    /// (non-interactive session)`; the session is listed (marked so), stoppable and logged
    /// like any other.
    pub non_interactive: bool,
}

impl BrokerConfig {
    /// Socket and audit log on, no hook socket, the default thresholds (3, 8), notices on,
    /// controls of an unnamed agent at `medium`.
    pub fn new(session: &str, worktree: PathBuf) -> BrokerConfig {
        BrokerConfig {
            session: session.to_string(),
            worktree,
            socket: true,
            audit: true,
            hook_socket: None,
            nudge_after: 3,
            pause_after: 8,
            notices: true,
            policy: None,
            home: None,
            scratch: None,
            control: SessionControl::new(
                tyba_policy::Autonomy::Medium,
                SessionInfo::new(Vec::new(), "auto"),
            ),
            non_interactive: false,
        }
    }
}

/// What a pending entry is about.
#[derive(Debug, Clone)]
enum Subject {
    Kernel(AskRequest),
    Hook { ask: HookAsk, always_ok: bool },
    Pause { failures: u32, last: String },
}

#[derive(Debug)]
struct Entry {
    subject: Subject,
    pid: u32,
    argv: Vec<String>,
    cwd: String,
    /// For an exec: the environment assignments judged with it (`NAME=VALUE`).
    env: Vec<String>,
    started: Instant,
    started_at: SystemTime,
    answer: Option<(Answer, String)>,
    /// Wakes this ask's waiter on the socket server's runtime when it is answered, withdrawn
    /// or ended ([`Broker::wait_async`]; threads wait on [`Inner::changed`]).
    wake: Arc<tokio::sync::Notify>,
}

/// A hook ask's "once", waiting for the kernel layer's ask of the same command.
#[derive(Debug)]
struct LinkedOnce {
    command: String,
    at: Instant,
    shown: tyba_policy::Verdict,
    /// Canonical, as the kernel layer's working directory is compared.
    cwd: std::path::PathBuf,
    /// What the broker's classification shown to the person resolved: the kernel layer's
    /// ask is this answer only when its own reach lies within it ([`Reach::within`]).
    reach: Reach,
}

/// A file the person let the agent program read (or write) through a hook ask: the agent's
/// own access to it outside the worktree is that answer ([`Broker::linked_file`]) within
/// [`LINK_WINDOW`].
#[derive(Debug)]
struct LinkedFile {
    /// Real (resolved) path.
    path: std::path::PathBuf,
    /// Whether writing it was approved (reading is covered too).
    write: bool,
    at: Instant,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    pending: BTreeMap<u64, Entry>,
    closed: Option<String>,
    /// Refusal texts of asks the broker denied and logged itself, so `record` does not log
    /// them a second time (it still counts them as failures).
    logged_denials: Vec<String>,
    guard: guard::Guard,
    hook_always: HashSet<String>,
    /// Shell commands the person allowed once through a hook ask, with when, the verdict
    /// shown, and the directory the broker judged them in: the kernel layer's ask for the same
    /// command, in that directory, no worse than shown, within [`LINK_WINDOW`], is that answer.
    /// The hook's socket is reachable from inside the sandbox, so what a hook ask claims (its
    /// directory above all) vouches for nothing the kernel layer sees otherwise.
    linked_once: Vec<LinkedOnce>,
    /// Shell commands the person allowed always through a hook ask (yellow by the broker's
    /// own classification), with what the ask showed them to reach: the kernel layer's ask
    /// for the same line, reaching nothing more, is answered `always`.
    linked_always: HashMap<String, Reach>,
    /// Files the person let the agent program read or write through a hook ask of a file
    /// tool.
    linked_files: Vec<LinkedFile>,
    /// The atomic-save siblings (`FILE.tmp…`) the agent program created under a linked write
    /// answer, with when: only such a file, made new by the program and holding only what it
    /// wrote, is the save its rename over `FILE` completes. A sibling whose name changed since
    /// (removed, or something linked or renamed there) is no longer one.
    saves: Vec<(std::path::PathBuf, Instant)>,
    generation: u64,
}

type Listener = Box<dyn Fn(&PendingView) + Send + Sync>;

struct Inner {
    cfg: BrokerConfig,
    pid: u32,
    state: Mutex<State>,
    changed: Condvar,
    audit: Option<AuditLog>,
    socket: Mutex<Option<server::Served>>,
    /// The session's lock, held while the person's socket exists ([`lock`]).
    lock: Mutex<Option<lock::SessionLock>>,
    hook: Mutex<Option<server::Served>>,
    listeners: Mutex<Vec<Listener>>,
    prompt: Mutex<Option<Arc<prompt::Prompt>>>,
}

/// The session's broker; cheap to clone (all clones are the same broker).
#[derive(Clone)]
pub struct Broker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("session", &self.inner.cfg.session)
            .finish_non_exhaustive()
    }
}

/// The argv, working directory and environment assignments an ask shows: an exec's own, as
/// read at the exec, else the asking process's from `/proc`.
fn shown_process(subject: &Subject, pid: u32) -> (Vec<String>, String, Vec<String>) {
    if let Subject::Kernel(AskRequest { exec: Some(e), .. }) = subject {
        return (
            e.argv.clone(),
            e.cwd.display().to_string(),
            e.env.iter().map(|(n, v)| format!("{n}={v}")).collect(),
        );
    }
    // A hook's connection is made by the supervisor on the agent's behalf (the notify loop
    // connects the sandbox's unix sockets itself), so its peer is the supervisor: what is
    // shown is the tool call, in the directory the hook input names.
    if let Subject::Hook { ask, .. } = subject {
        return (Vec::new(), text::clean(&ask.cwd), Vec::new());
    }
    (proc_argv(pid), proc_cwd(pid), Vec::new())
}

/// The product an agent hook's `agent` names (`claude-code` → `Claude Code`).
fn agent_product(agent: &str) -> String {
    match agent {
        "claude-code" => "Claude Code".into(),
        "codex" => "Codex".into(),
        "gemini" => "Gemini CLI".into(),
        other => format!("the agent `{}`", text::clean(other)),
    }
}

/// Who asks, for a hook's ask: `Claude Code's tool call Bash`.
fn hook_caller(ask: &HookAsk) -> String {
    format!(
        "{}'s tool call {}",
        agent_product(&ask.agent),
        text::clean(&ask.tool)
    )
}

fn proc_argv(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn proc_cwd(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Whether the asking process can still use an answer: not gone, not exiting, no `SIGKILL`
/// pending ([`crate::procfs::ending`]). `0`: no process (tests, the person's own controls).
fn alive(pid: u32) -> bool {
    pid == 0 || !crate::procfs::ending(pid)
}

fn answer_name(a: &Answer) -> &'static str {
    match a {
        Answer::Once => "once",
        Answer::Always => "always",
        Answer::Deny { .. } => "deny",
    }
}

impl Subject {
    fn kind(&self) -> &'static str {
        match self {
            Subject::Kernel(r) => match r.kind {
                AskKind::Command { .. } => "command",
                AskKind::Connect { .. } => "connect",
                AskKind::File { .. } => "file",
                _ => "metadata",
            },
            Subject::Hook { .. } => "hook",
            Subject::Pause { .. } => "pause",
        }
    }

    fn action(&self) -> String {
        match self {
            Subject::Kernel(r) => r.kind.to_string(),
            Subject::Hook { ask, .. } => format!("{} ({} via {})", ask.action, ask.tool, ask.agent),
            Subject::Pause { failures, last } => format!(
                "resume the agent, paused after the same action was refused {failures} times: {last}"
            ),
        }
    }

    /// For an exec ask of a line in the agent's shell wrapper: the command inside it.
    fn inner_command(&self) -> Option<String> {
        match self {
            Subject::Kernel(r) => r.inner_command().map(str::to_string),
            Subject::Hook { .. } | Subject::Pause { .. } => None,
        }
    }

    fn verdict(&self) -> String {
        match self {
            Subject::Kernel(r) => r.verdict.to_string(),
            Subject::Hook { ask, .. } => ask.verdict.clone(),
            Subject::Pause { .. } => "paused".to_string(),
        }
    }

    fn reasons(&self) -> Vec<String> {
        match self {
            Subject::Kernel(r) => r.reasons.clone(),
            Subject::Hook { ask, .. } => ask.reasons.clone(),
            Subject::Pause { .. } => Vec::new(),
        }
    }

    /// The diff shown with a hook's edit, already cleaned by [`Broker::ask_hook`].
    fn diff(&self) -> Option<String> {
        match self {
            Subject::Hook { ask, .. } => ask.diff.clone(),
            Subject::Kernel(_) | Subject::Pause { .. } => None,
        }
    }

    fn always_ok(&self) -> bool {
        match self {
            Subject::Kernel(r) => r.rememberable && r.verdict == tyba_policy::Verdict::Yellow,
            Subject::Hook { always_ok, .. } => *always_ok,
            Subject::Pause { .. } => false,
        }
    }

    fn default_refusal(&self) -> String {
        match self {
            Subject::Kernel(r) => r.default_refusal(),
            Subject::Hook { ask, .. } => {
                format!("refused by tyba ({}): {}", ask.verdict, ask.action)
            }
            Subject::Pause { .. } => "the session was ended by the person".to_string(),
        }
    }
}

impl Broker {
    /// Starts a broker: its socket (when configured), its audit log and hook socket.
    ///
    /// # Errors
    /// [`BrokerError`] when the socket, the hook socket or the log cannot be made; nothing is
    /// left listening then.
    pub fn start(cfg: BrokerConfig) -> Result<Broker, BrokerError> {
        let audit = if cfg.audit {
            let dir = paths::private_log_dir()?;
            let path = paths::log_path(&dir, &cfg.session);
            Some(AuditLog::open(&path).map_err(|source| BrokerError::Io {
                what: "cannot open the audit log",
                path,
                source,
            })?)
        } else {
            None
        };
        let state = State {
            next: 1,
            // Nobody could resume a pause of a non-interactive session, and its refusals keep
            // the plain reason: the guard is off there.
            guard: if cfg.non_interactive {
                guard::Guard::new(0, 0)
            } else {
                guard::Guard::new(cfg.nudge_after, cfg.pause_after)
            },
            ..State::default()
        };
        let broker = Broker {
            inner: Arc::new(Inner {
                pid: std::process::id(),
                state: Mutex::new(state),
                changed: Condvar::new(),
                audit,
                socket: Mutex::new(None),
                lock: Mutex::new(None),
                hook: Mutex::new(None),
                listeners: Mutex::new(Vec::new()),
                prompt: Mutex::new(None),
                cfg,
            }),
        };
        if let Err(e) = broker.listen() {
            broker.unlisten();
            return Err(e);
        }
        if broker.inner.cfg.notices {
            let session = broker.inner.cfg.session.clone();
            broker.on_pending(Box::new(move |p| notice::announce(&session, p)));
        }
        Ok(broker)
    }

    /// Takes the session's lock, then opens the person's socket and the hook socket, as
    /// configured.
    fn listen(&self) -> Result<(), BrokerError> {
        if self.inner.cfg.socket {
            let dir = paths::private_socket_dir()?;
            let session = &self.inner.cfg.session;
            let l =
                lock::SessionLock::acquire(&dir, session).map_err(|source| BrokerError::Io {
                    what: "cannot take the session's lock",
                    path: lock::lock_path(&dir, session),
                    source,
                })?;
            if let Ok(mut g) = self.inner.lock.lock() {
                *g = Some(l);
            }
            let path = paths::socket_path(&dir, session);
            let staging = lock::staging_socket_path(&dir, session);
            let s = server::serve(self, &path, server::Role::Person, Some(&staging)).map_err(
                |source| BrokerError::Io {
                    what: "cannot listen on",
                    path,
                    source,
                },
            )?;
            if let Ok(mut g) = self.inner.socket.lock() {
                *g = Some(s);
            }
        }
        if let Some(path) = self.inner.cfg.hook_socket.clone() {
            let s = server::serve(self, &path, server::Role::Hook, None).map_err(|source| {
                BrokerError::Io {
                    what: "cannot listen on",
                    path,
                    source,
                }
            })?;
            if let Ok(mut g) = self.inner.hook.lock() {
                *g = Some(s);
            }
        }
        Ok(())
    }

    /// Removes the sockets, then gives up the session's lock (in that order: a listed socket
    /// always has its lock).
    fn unlisten(&self) {
        let served: Vec<server::Served> = [&self.inner.socket, &self.inner.hook]
            .into_iter()
            .filter_map(|slot| slot.lock().ok().and_then(|mut g| g.take()))
            .collect();
        server::Served::stop_all(served);
        if let Ok(mut g) = self.inner.lock.lock() {
            if let Some(l) = g.take() {
                l.release();
            }
        }
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.inner.cfg.session
    }

    /// The user socket's path, when listening.
    pub fn socket_path(&self) -> Option<PathBuf> {
        self.inner
            .socket
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|s| s.path.clone()))
    }

    /// The audit log's path, when logging.
    pub fn log_path(&self) -> Option<PathBuf> {
        self.inner.audit.as_ref().map(|a| a.path().to_path_buf())
    }

    /// Calls `f` each time an ask starts waiting (on the asking thread; keep it short).
    pub fn on_pending(&self, f: Box<dyn Fn(&PendingView) + Send + Sync>) {
        if let Ok(mut l) = self.inner.listeners.lock() {
            l.push(f);
        }
    }

    /// Attaches the same-terminal prompt (see [`prompt`]).
    pub fn set_prompt(&self, p: Arc<prompt::Prompt>) {
        if let Ok(mut g) = self.inner.prompt.lock() {
            *g = Some(p);
        }
    }

    fn lock(&self) -> Option<MutexGuard<'_, State>> {
        self.inner.state.lock().ok()
    }

    fn view(&self, id: u64, e: &Entry) -> PendingView {
        PendingView {
            id: format!("{}-{id}", self.inner.cfg.session),
            kind: e.subject.kind().to_string(),
            action: e.subject.action(),
            verdict: e.subject.verdict(),
            reasons: e.subject.reasons(),
            always_allowed: e.subject.always_ok(),
            pid: match e.subject {
                Subject::Hook { .. } => 0,
                _ => e.pid,
            },
            argv: e.argv.clone(),
            cwd: e.cwd.clone(),
            env: e.env.clone(),
            waited_ms: e.started.elapsed().as_millis() as u64,
            caller: match &e.subject {
                Subject::Hook { ask, .. } => Some(hook_caller(ask)),
                _ => None,
            },
            diff: e.subject.diff(),
            inner_command: e.subject.inner_command(),
        }
    }

    /// The session's live controls.
    pub fn control(&self) -> &Arc<SessionControl> {
        &self.inner.cfg.control
    }

    /// The session as listed.
    pub fn session_view(&self) -> SessionView {
        let c = &self.inner.cfg.control;
        let info = c.info();
        let counts = c.counts();
        SessionView {
            id: self.inner.cfg.session.clone(),
            worktree: self.inner.cfg.worktree.display().to_string(),
            pid: self.inner.pid,
            agent: info.agent.clone(),
            branch: info.branch(),
            autonomy: Some(c.autonomy()),
            exec_mode: info.exec_mode.clone(),
            pending: self.lock().map(|s| s.pending.len()).unwrap_or(0),
            allowed: counts.allowed,
            asked: counts.asked,
            denied: counts.denied,
            started_at: audit::rfc3339(info.started_at),
            stopped_by: c.stopped_by(),
            non_interactive: self.inner.cfg.non_interactive,
        }
    }

    /// Changes the session's autonomy level for the next decisions, on behalf of `by`, and
    /// writes it to the audit log. Returns the previous level. Showing it on the session's
    /// terminal is the caller's part ([`Broker::notice`]): the prompt calls this while it
    /// draws.
    ///
    /// # Errors
    /// [`ControlRefused::NotConfirmed`] when raising to `high` without `confirmed_high`;
    /// [`ControlRefused::Closed`] after the end.
    pub fn set_autonomy(
        &self,
        level: tyba_policy::Autonomy,
        confirmed_high: bool,
        by: &str,
    ) -> Result<tyba_policy::Autonomy, ControlRefused> {
        if self.is_closed() {
            return Err(ControlRefused::Closed);
        }
        let c = &self.inner.cfg.control;
        let now = c.autonomy();
        if level == tyba_policy::Autonomy::High && now < level && !confirmed_high {
            self.log_control(
                &format!("autonomy {now} -> {level}"),
                "refuse",
                by,
                Some(ControlRefused::NotConfirmed { from: now }.to_string()),
            );
            return Err(ControlRefused::NotConfirmed { from: now });
        }
        let previous = c.set_autonomy(level);
        self.log_control(
            &format!("autonomy {previous} -> {level}"),
            "autonomy",
            by,
            None,
        );
        Ok(previous)
    }

    /// Ends the session on behalf of `by`: logs it, denies every pending ask (logged so),
    /// closes the sockets, and ends the agent's processes ([`SessionControl::stop`]); the
    /// worktree is left as it is. Returns how many pending asks were denied.
    ///
    /// # Errors
    /// [`ControlRefused::Closed`] when the session has already ended or is stopping.
    pub fn stop(&self, by: &str) -> Result<usize, ControlRefused> {
        if self.is_closed() {
            return Err(ControlRefused::Closed);
        }
        self.log_control("stop", "stop", by, None);
        let mut pending = 0;
        self.inner.cfg.control.stop(by, || {
            pending = self.lock().map(|s| s.pending.len()).unwrap_or(0);
            self.close(&format!("the session was stopped by the person ({by})"));
        })?;
        Ok(pending)
    }

    /// Writes an attempt on the session's controls that was refused (from the hook socket, or
    /// a peer turned away) to the audit log and counts it as denied.
    pub fn refuse_control(&self, what: &str, by: &str, reason: &str) {
        self.inner.cfg.control.count(Counted::Denied);
        self.log_control(what, "refuse", by, Some(reason.to_string()));
    }

    fn log_control(&self, action: &str, decision: &str, by: &str, reason: Option<String>) {
        let Some(log) = &self.inner.audit else { return };
        log.write(&AuditLine {
            time: audit::rfc3339(SystemTime::now()),
            session: self.inner.cfg.session.clone(),
            kind: "control".into(),
            action: action.to_string(),
            decision: decision.into(),
            reason,
            answered_by: Some(by.to_string()),
            ..AuditLine::default()
        });
    }

    /// Shows `text` on the session's own terminal: in the same-terminal prompt when there is
    /// one, else on `tyba run`'s standard error (when notices are on).
    pub fn notice(&self, text: &str) {
        let p = self.inner.prompt.lock().ok().and_then(|g| g.clone());
        match p {
            Some(p) => p.notice(text),
            None if self.inner.cfg.notices => crate::broker::text::say(&format!("tyba: {text}")),
            None => {}
        }
    }

    /// Pending asks, oldest first: those still waiting for an answer (an answered ask is gone
    /// from the list at once, before its asker has taken the answer).
    pub fn pending(&self) -> Vec<PendingView> {
        match self.lock() {
            Some(s) => s
                .pending
                .iter()
                .filter(|(_, e)| e.answer.is_none())
                .map(|(id, e)| self.view(*id, e))
                .collect(),
            None => Vec::new(),
        }
    }

    /// A counter that changes whenever the pending set changes.
    pub fn generation(&self) -> u64 {
        self.lock().map(|s| s.generation).unwrap_or(0)
    }

    /// Waits until the pending set changes from `seen` or `timeout` passes; returns the
    /// current generation.
    pub fn wait_change(&self, seen: u64, timeout: Duration) -> u64 {
        let Some(g) = self.lock() else { return seen };
        match self
            .inner
            .changed
            .wait_timeout_while(g, timeout, |s| s.generation == seen && s.closed.is_none())
        {
            Ok((s, _)) => s.generation,
            Err(_) => seen,
        }
    }

    /// Queues an ask; `None` when the session is closed.
    fn submit(&self, subject: Subject, pid: u32) -> Option<(u64, PendingView)> {
        let mut s = self.lock()?;
        if s.closed.is_some() {
            return None;
        }
        let id = s.next;
        s.next += 1;
        if !matches!(subject, Subject::Pause { .. }) {
            self.inner.cfg.control.count(Counted::Asked);
        }
        let (argv, cwd, env) = shown_process(&subject, pid);
        let e = Entry {
            subject,
            pid,
            argv,
            cwd,
            env,
            started: Instant::now(),
            started_at: SystemTime::now(),
            answer: None,
            wake: Arc::default(),
        };
        let v = self.view(id, &e);
        s.pending.insert(id, e);
        s.generation += 1;
        drop(s);
        self.inner.changed.notify_all();
        Some((id, v))
    }

    /// Denies an ask at once in a non-interactive session with `reason`: counted as asked,
    /// logged as an ask answered `deny` by [`NOBODY`] after no wait (a kernel ask's refusal is
    /// then not logged a second time by `record`).
    fn deny_unattended(&self, subject: Subject, pid: u32, reason: String) -> Answer {
        self.inner.cfg.control.count(Counted::Asked);
        let answer = Answer::Deny {
            reason: Some(reason.clone()),
        };
        let id = match self.lock() {
            Some(mut s) => {
                let id = s.next;
                s.next += 1;
                if matches!(subject, Subject::Kernel(_)) {
                    s.logged_denials.push(reason);
                    if s.logged_denials.len() > 256 {
                        s.logged_denials.remove(0);
                    }
                }
                id
            }
            None => return answer,
        };
        let (argv, cwd, env) = shown_process(&subject, pid);
        let e = Entry {
            subject,
            pid,
            argv,
            cwd,
            env,
            started: Instant::now(),
            started_at: SystemTime::now(),
            answer: None,
            wake: Arc::default(),
        };
        self.log_entry(id, &e, &answer, NOBODY, Duration::ZERO);
        answer
    }

    fn announce(&self, v: &PendingView) {
        if let Ok(l) = self.inner.listeners.lock() {
            for f in l.iter() {
                f(v);
            }
        }
        let p = self.inner.prompt.lock().ok().and_then(|g| g.clone());
        if let Some(p) = p {
            p.wake();
        }
    }

    /// Blocks until `id` is answered, the session closes or the asking process dies.
    /// Returns the answer, who answered, and the wait; logs the line unless `close` did.
    fn wait(&self, id: u64) -> (Answer, String, Duration) {
        let Some(mut s) = self.lock() else {
            return channel_failed();
        };
        loop {
            s = match self.settle(s, id) {
                Ok(done) => return done,
                Err(s) => s,
            };
            s = match self.inner.changed.wait_timeout(s, LIVENESS_PERIOD) {
                Ok((g, _)) => g,
                Err(_) => return channel_failed(),
            };
        }
    }

    /// [`Broker::wait`] for the socket server's tasks: the same outcomes, awaited on the
    /// ask's own wake-up (its answer, withdrawal or the end of the session: no other ask's
    /// change wakes it) instead of blocking a thread. Cancel-safe: dropping the future
    /// leaves the ask pending (withdraw it with [`Broker::withdraw`]).
    pub(crate) async fn wait_async(&self, id: u64) -> (Answer, String, Duration) {
        let wake = match self.lock() {
            Some(s) => s.pending.get(&id).map(|e| Arc::clone(&e.wake)),
            None => return channel_failed(),
        };
        loop {
            let Some(s) = self.lock() else {
                return channel_failed();
            };
            let s = match self.settle(s, id) {
                Ok(done) => return done,
                Err(s) => s,
            };
            drop(s);
            let Some(wake) = &wake else {
                // Unreachable: an ask without its entry was settled above.
                return channel_failed();
            };
            // A wake-up given before this await is kept (`notify_one` stores it), so none
            // is lost; the liveness period checks the asking process again.
            let _ = tokio::time::timeout(LIVENESS_PERIOD, wake.notified()).await;
        }
    }

    /// One look at ask `id`: its outcome when it has one (answered, denied by the end of the
    /// session, or its process gone), else the guard back.
    #[allow(clippy::result_large_err)]
    fn settle<'a>(
        &self,
        mut s: MutexGuard<'a, State>,
        id: u64,
    ) -> Result<(Answer, String, Duration), MutexGuard<'a, State>> {
        let closed = |reason: &str| Answer::Deny {
            reason: Some(format!("refused by tyba: {reason}")),
        };
        let Some(e) = s.pending.get_mut(&id) else {
            // `close` answered and logged it.
            let why = s
                .closed
                .clone()
                .unwrap_or_else(|| "the ask was withdrawn".into());
            return Ok((closed(&why), "session end".into(), Duration::ZERO));
        };
        if let Some((answer, by)) = e.answer.take() {
            return Ok(self.finish(s, id, answer, by));
        }
        if !alive(e.pid) {
            return Ok(self.finish(s, id, closed(ASKER_GONE), "nobody (process gone)".into()));
        }
        Err(s)
    }

    /// Denies ask `id`, still unanswered, because its channel died (`why`, e.g. the hook's
    /// client hung up): fail closed. Its waiter takes the deny and logs it as answered by
    /// `nobody (…)`. An ask already answered, or gone, is left as it is.
    pub(crate) fn withdraw(&self, id: u64, why: &str) {
        let Some(mut s) = self.lock() else { return };
        let Some(e) = s.pending.get_mut(&id) else {
            return;
        };
        if e.answer.is_none() {
            e.answer = Some((
                Answer::Deny {
                    reason: Some(format!("refused by tyba: {why}")),
                },
                format!("nobody ({why})"),
            ));
            e.wake.notify_one();
            drop(s);
            self.inner.changed.notify_all();
        }
    }

    fn finish(
        &self,
        mut s: MutexGuard<'_, State>,
        id: u64,
        answer: Answer,
        by: String,
    ) -> (Answer, String, Duration) {
        let Some(e) = s.pending.remove(&id) else {
            return (answer, by, Duration::ZERO);
        };
        s.generation += 1;
        let waited = e.started.elapsed();
        // Only the notify loop reports refusals back through `record`.
        if let (Answer::Deny { reason: Some(r) }, Subject::Kernel(_)) = (&answer, &e.subject) {
            s.logged_denials.push(r.clone());
            if s.logged_denials.len() > 256 {
                s.logged_denials.remove(0);
            }
        }
        drop(s);
        self.inner.changed.notify_all();
        self.log_entry(id, &e, &answer, &by, waited);
        (answer, by, waited)
    }

    fn log_entry(&self, id: u64, e: &Entry, answer: &Answer, by: &str, waited: Duration) {
        let Some(log) = &self.inner.audit else { return };
        let ans = match (&e.subject, answer) {
            (Subject::Pause { .. }, Answer::Deny { .. }) => "end".to_string(),
            (Subject::Pause { .. }, _) => "resume".to_string(),
            (_, a) => answer_name(a).to_string(),
        };
        log.write(&AuditLine {
            time: audit::rfc3339(e.started_at),
            session: self.inner.cfg.session.clone(),
            id: Some(format!("{}-{id}", self.inner.cfg.session)),
            kind: e.subject.kind().to_string(),
            action: e.subject.action(),
            inner_command: e.subject.inner_command(),
            verdict: e.subject.verdict(),
            reasons: e.subject.reasons(),
            decision: if matches!(e.subject, Subject::Pause { .. }) {
                "pause".into()
            } else {
                "ask".into()
            },
            answer: Some(ans),
            reason: match answer {
                Answer::Deny { reason } => reason.clone(),
                _ => None,
            },
            answered_by: Some(by.to_string()),
            wait_ms: Some(waited.as_millis() as u64),
            // A hook's peer is the supervisor itself (see `shown_process`).
            pid: (!matches!(e.subject, Subject::Hook { .. })).then_some(e.pid),
            cwd: matches!(e.subject, Subject::Hook { .. }).then(|| e.cwd.clone()),
            diff: e.subject.diff(),
            ..AuditLine::default()
        });
    }

    /// Writes a decision an agent hook made without asking ([`HookRecord`]) to the audit
    /// log: kind `hook`, decision `allow` or `refuse`, the action as asks show it
    /// (`CMD (Bash via claude-code)`), answered by nobody. A refusal is counted as denied
    /// (the sandbox never sees what the hook refused). Without an audit log, nothing.
    pub fn record_hook(&self, r: HookRecord) {
        if r.decision == HookDecision::Refuse {
            self.inner.cfg.control.count(Counted::Denied);
        }
        let Some(log) = &self.inner.audit else { return };
        log.write(&AuditLine {
            time: audit::rfc3339(SystemTime::now()),
            session: self.inner.cfg.session.clone(),
            kind: "hook".into(),
            action: format!("{} ({} via {})", r.action, r.tool, r.agent),
            verdict: r.verdict,
            reasons: r.reasons,
            decision: match r.decision {
                HookDecision::Allow => "allow".into(),
                HookDecision::Refuse => "refuse".into(),
            },
            reason: r.reason,
            answered_by: Some(format!("{}'s hook (tyba hook)", agent_product(&r.agent))),
            cwd: (!r.cwd.is_empty()).then_some(r.cwd),
            ..AuditLine::default()
        });
    }

    /// Writes a hook ask the broker answered without the person: a refusal (`by` says why:
    /// blocked by its own classification, too many waiting, the session over) as decision
    /// `refuse`, an allow (the person's earlier `always`, said by `by`) as decision `allow`,
    /// like an exec the session's memory let through: neither is an ask the person answered.
    fn log_hook_done(&self, ask: &HookAsk, answer: &HookAnswer, by: &str) {
        let Some(log) = &self.inner.audit else { return };
        let subject = Subject::Hook {
            ask: ask.clone(),
            always_ok: false,
        };
        log.write(&AuditLine {
            time: audit::rfc3339(SystemTime::now()),
            session: self.inner.cfg.session.clone(),
            kind: subject.kind().to_string(),
            action: subject.action(),
            verdict: subject.verdict(),
            reasons: subject.reasons(),
            decision: match answer.answer {
                WireAnswer::Deny => "refuse".into(),
                _ => "allow".into(),
            },
            reason: match answer.answer {
                WireAnswer::Deny => answer.reason.clone(),
                _ => Some(by.to_string()),
            },
            answered_by: (answer.answer == WireAnswer::Deny).then(|| by.to_string()),
            cwd: Some(text::clean(&ask.cwd)),
            ..AuditLine::default()
        });
    }

    /// Answers a pending ask. `by` says who and where, for the log.
    ///
    /// A `deny` without a reason gets the policy's refusal text; with one, the person's
    /// reason is the refusal text the agent gets.
    ///
    /// # Errors
    /// [`AnswerError::Unknown`] for an id not pending here, [`AnswerError::AlwaysRefused`]
    /// for `always` on anything but a yellow command, [`AnswerError::Closed`] after the end.
    pub fn answer(
        &self,
        id: &str,
        answer: WireAnswer,
        reason: Option<String>,
        by: &str,
    ) -> Result<(), AnswerError> {
        let unknown = || AnswerError::Unknown(id.to_string());
        let (session, n) = paths::split_id(id).ok_or_else(unknown)?;
        if session != self.inner.cfg.session {
            return Err(unknown());
        }
        let mut s = self.lock().ok_or(AnswerError::Closed)?;
        if s.closed.is_some() {
            return Err(AnswerError::Closed);
        }
        let e = s.pending.get_mut(&n).ok_or_else(unknown)?;
        if e.answer.is_some() {
            return Err(unknown());
        }
        let a = match answer {
            WireAnswer::Once => Answer::Once,
            WireAnswer::Always if e.subject.always_ok() => Answer::Always,
            WireAnswer::Always => {
                return Err(AnswerError::AlwaysRefused {
                    id: id.to_string(),
                    verdict: match &e.subject {
                        Subject::Pause { .. } => "a pause".into(),
                        s => format!("{} ({})", s.verdict(), s.kind()),
                    },
                })
            }
            WireAnswer::Deny => Answer::Deny {
                reason: Some(match reason.filter(|r| !r.trim().is_empty()) {
                    Some(r) => r,
                    None => format!("{} (denied by the person)", e.subject.default_refusal()),
                }),
            },
        };
        e.answer = Some((a, by.to_string()));
        e.wake.notify_one();
        drop(s);
        self.inner.changed.notify_all();
        Ok(())
    }

    /// Ends the session: every pending ask is denied (and logged so), later asks are denied
    /// at once, the sockets are removed. Idempotent.
    pub fn close(&self, why: &str) {
        let drained: Vec<(u64, Entry)> = match self.inner.state.lock() {
            Ok(mut s) => {
                if s.closed.is_some() {
                    return;
                }
                s.closed = Some(why.to_string());
                s.generation += 1;
                std::mem::take(&mut s.pending).into_iter().collect()
            }
            Err(_) => Vec::new(),
        };
        self.inner.changed.notify_all();
        for (id, e) in drained {
            e.wake.notify_one();
            let deny = Answer::Deny {
                reason: Some(format!("refused by tyba: {why}")),
            };
            self.log_entry(id, &e, &deny, "session end", e.started.elapsed());
        }
        self.unlisten();
        let p = self.inner.prompt.lock().ok().and_then(|g| g.clone());
        if let Some(p) = p {
            p.wake();
        }
    }

    /// Whether [`Broker::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().map(|s| s.closed.is_some()).unwrap_or(true)
    }

    /// An ask from an agent hook. The hook's claims decide only what it is shown as: "always"
    /// is offered only when the hook says yellow and rememberable, and an "always" answer is
    /// remembered for later hook asks of the exact same action string only — never in the
    /// kernel layer's memory, so a process forging hook asks cannot widen what the sandbox
    /// lets through.
    ///
    /// A diff the hook sends is cleaned and bounded here ([`text::clean_diff`]) before anyone
    /// sees or logs it: its sender is inside the sandbox.
    pub fn ask_hook(&self, ask: HookAsk, pid: u32) -> HookAnswer {
        match self.hook_begin(ask, pid) {
            HookStep::Done(a) => a,
            HookStep::Waiting(w) => {
                let (answer, _, _) = self.wait(w.id);
                self.hook_end(w, answer)
            }
        }
    }

    /// The first half of [`Broker::ask_hook`]: classification, the answers given without the
    /// person, and the queueing. May take a while (the policy's classification): the socket
    /// server runs it off its tasks.
    pub(crate) fn hook_begin(&self, mut ask: HookAsk, pid: u32) -> HookStep {
        ask.diff = ask.diff.map(|d| text::clean_diff(&d));
        let shell = SHELL_TOOLS.contains(&ask.tool.to_ascii_lowercase().as_str());
        let ours = if shell { self.classify(&ask) } else { None };
        if let Some((verdict, reasons, _)) = &ours {
            if *verdict == tyba_policy::Verdict::Blocked {
                self.inner.cfg.control.count(Counted::Denied);
                let a = deny_answer(&format!("refused by tyba: {}", reasons.join("; ")));
                let mut shown = ask.clone();
                shown.verdict = verdict.to_string();
                shown.reasons = reasons.clone();
                self.log_hook_done(&shown, &a, "the session's policy (blocked)");
                return HookStep::Done(a);
            }
            let claimed = ask.verdict.parse().unwrap_or(tyba_policy::Verdict::Red);
            let worst = std::cmp::max(claimed, *verdict).max(tyba_policy::Verdict::Yellow);
            if worst != claimed || !reasons.is_empty() {
                ask.verdict = worst.to_string();
                ask.reasons = reasons.clone();
            }
        }
        let (files, writes) = self.hook_files(&ask);
        if !files.is_empty() {
            let shown: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            ask.reasons.push(format!(
                "an approval lets the agent program itself {} {} (outside the worktree: that file only, not the commands it starts)",
                if writes { "read and write" } else { "read" },
                shown.join(", ")
            ));
        }
        let always_ok = ask.rememberable && ask.verdict == "yellow";
        let link = ours.map(|(_, _, reach)| reach);
        let cwd = self.judged_cwd(&ask);
        let command = ask.action.clone();
        // What the person is shown and answers: a wrapped exec is linked only up to it.
        let shown: tyba_policy::Verdict = ask.verdict.parse().unwrap_or(tyba_policy::Verdict::Red);
        let key = format!("{}\u{0}{}", ask.tool, ask.action);
        if self.inner.cfg.non_interactive {
            self.inner.cfg.control.count(Counted::Denied);
            let subject = Subject::Hook { ask, always_ok };
            let reason = format!(
                "{} ({})",
                subject.default_refusal(),
                crate::approve::NON_INTERACTIVE_NOTE
            );
            return HookStep::Done(match self.deny_unattended(subject, pid, reason) {
                Answer::Deny { reason } => HookAnswer {
                    answer: WireAnswer::Deny,
                    reason,
                },
                _ => deny_answer("refused by tyba: non-interactive session"),
            });
        }
        {
            let Some(s) = self.lock() else {
                return HookStep::Done(deny_answer("refused by tyba: the approval channel failed"));
            };
            if always_ok && s.hook_always.contains(&key) {
                drop(s);
                let a = HookAnswer {
                    answer: WireAnswer::Always,
                    reason: None,
                };
                self.log_hook_done(
                    &ask,
                    &a,
                    "allowed by the person's earlier `always` for this exact action",
                );
                return HookStep::Done(a);
            }
            let hooks = s
                .pending
                .values()
                .filter(|e| matches!(e.subject, Subject::Hook { .. }))
                .count();
            if hooks >= MAX_HOOK_PENDING {
                drop(s);
                self.inner.cfg.control.count(Counted::Denied);
                let a = deny_answer("refused by tyba: too many hook asks are waiting");
                self.log_hook_done(&ask, &a, "nobody (too many hook asks waiting)");
                return HookStep::Done(a);
            }
        }
        let kept = ask.clone();
        let Some((id, v)) = self.submit(Subject::Hook { ask, always_ok }, pid) else {
            self.inner.cfg.control.count(Counted::Denied);
            let a = deny_answer("refused by tyba: the session has ended");
            self.log_hook_done(&kept, &a, "session end");
            return HookStep::Done(a);
        };
        self.announce(&v);
        HookStep::Waiting(HookWait {
            id,
            link,
            command,
            shown,
            key,
            cwd,
            files,
            writes,
        })
    }

    /// The second half of [`Broker::ask_hook`]: what the person's `answer` to a queued hook
    /// ask carries over (to later hook asks, and to the kernel layer's ask of the same
    /// command), as the hook's answer.
    pub(crate) fn hook_end(&self, w: HookWait, answer: Answer) -> HookAnswer {
        let HookWait {
            link,
            command,
            shown,
            key,
            cwd,
            files,
            writes,
            ..
        } = w;
        if matches!(answer, Answer::Once | Answer::Always) && !files.is_empty() {
            if let Some(mut s) = self.lock() {
                s.linked_files.retain(|l| l.at.elapsed() < LINK_WINDOW);
                let at = Instant::now();
                s.linked_files
                    .extend(files.into_iter().map(|path| LinkedFile {
                        path,
                        write: writes,
                        at,
                    }));
            }
        }
        match answer {
            Answer::Once => {
                if let (Some(reach), Some(mut s)) = (link, self.lock()) {
                    s.linked_once.retain(|l| l.at.elapsed() < LINK_WINDOW);
                    s.linked_once.push(LinkedOnce {
                        command: command.trim().to_string(),
                        at: Instant::now(),
                        shown,
                        cwd: std::fs::canonicalize(&cwd).unwrap_or(cwd),
                        reach,
                    });
                }
                HookAnswer {
                    answer: WireAnswer::Once,
                    reason: None,
                }
            }
            Answer::Always => {
                if let Some(mut s) = self.lock() {
                    s.hook_always.insert(key);
                    if let Some(reach) = link {
                        s.linked_always.insert(command.trim().to_string(), reach);
                    }
                }
                HookAnswer {
                    answer: WireAnswer::Always,
                    reason: None,
                }
            }
            Answer::Deny { reason } => {
                // The sandbox never sees what a hook's deny stopped: counted here.
                self.inner.cfg.control.count(Counted::Denied);
                HookAnswer {
                    answer: WireAnswer::Deny,
                    reason,
                }
            }
        }
    }

    /// The broker's own verdict and reasons for a hook's shell command.
    fn classify(&self, ask: &HookAsk) -> Option<(tyba_policy::Verdict, Vec<String>, Reach)> {
        let policy = self.inner.cfg.policy.as_ref()?;
        let wt = &self.inner.cfg.worktree;
        let cwd = self.judged_cwd(ask);
        let cwd = cwd.as_path();
        let inspector = tyba_git_guard::Inspector::new();
        let ctx = tyba_policy::Context {
            worktree: wt,
            cwd,
            home: self.inner.cfg.home.as_deref(),
            scratch: None,
            git: Some(&inspector),
        };
        let c = policy.classify(
            &tyba_policy::Action::Exec {
                command: ask.action.clone(),
            },
            &ctx,
        );
        let reasons = c.decisive_reasons().iter().map(|r| r.to_string()).collect();
        // Every path the line names, as it resolves now (what the person is shown): the
        // grants a runner of the same line would get are among them.
        let real = c.paths.iter().filter_map(|p| {
            let (real, _) = crate::runner::real_target(p)?;
            Some((real, c.writes.contains(p) || c.changes.contains(p)))
        });
        let reach = Reach::of(&c, real.collect::<Vec<_>>());
        Some((c.verdict, reasons, reach))
    }

    /// The directory a hook's shell command is judged in: the one it names when that is the
    /// worktree or beneath it, else the worktree.
    fn judged_cwd(&self, ask: &HookAsk) -> std::path::PathBuf {
        let wt = &self.inner.cfg.worktree;
        let cwd = std::path::Path::new(&ask.cwd);
        if cwd.is_absolute() && cwd.starts_with(wt) {
            cwd.to_path_buf()
        } else {
            wt.clone()
        }
    }

    /// The answer a hook ask already gave to this kernel-layer ask, if any (consumed): the
    /// same command (or the command behind the agent's wrapper), run in the directory the
    /// hook's ask was judged in, with a verdict no worse than the one the person was shown.
    fn linked(&self, request: &AskRequest) -> Option<Answer> {
        let AskKind::Command { command } = &request.kind else {
            return None;
        };
        let inner = request.inner_command();
        // What this exec reaches, as the kernel layer resolved it; an ask without one links
        // nothing.
        let reach = &request.exec.as_ref()?.reach;
        let mut s = self.lock()?;
        // "Always" on the hook's ask of CMD covers the agent's wrapped exec of CMD: the key
        // the kernel layer's own "always" uses ([`tyba_policy::decide`]), with its own
        // verdict yellow (rememberable) too, and reaching nothing the hook's ask did not show.
        let always = |key: &str| s.linked_always.get(key).is_some_and(|r| reach.within(r));
        if request.rememberable && (always(command.trim()) || inner.is_some_and(always)) {
            return Some(Answer::Always);
        }
        // Where the exec runs, as the kernel layer saw it; an ask without one links nothing.
        let here = request
            .exec
            .as_ref()
            .map(|e| std::fs::canonicalize(&e.cwd).unwrap_or_else(|_| e.cwd.clone()))?;
        // The same command is the same approval only when it reaches what the person was
        // shown: a link swapped, `$HOME` or a directory changed between the two asks make
        // the same text reach another file, which is asked on its own.
        let same = move |l: &LinkedOnce| {
            request.verdict <= l.shown && l.cwd == here && reach.within(&l.reach)
        };
        s.linked_once.retain(|l| l.at.elapsed() < LINK_WINDOW);
        let i = match s
            .linked_once
            .iter()
            .position(|l| l.command == command.trim() && same(l))
        {
            Some(i) => i,
            None if inner.is_some() => {
                // The agent's wrapped exec of the command the hook asked about (its wrapper
                // peeled by the supervisor's own classification of this exec).
                let inner = inner?;
                s.linked_once
                    .iter()
                    .position(|l| l.command == inner && same(l))?
            }
            None => {
                // The agent runs the command the hook asked about inside its own wrapper
                // (Claude Code's `… && eval 'CMD' < /dev/null && pwd -P >| $TMPDIR/…`, Gemini
                // CLI's background-pid trap): the same intent when the line is that one
                // command in neutral shell housekeeping (`Classification::inner_command`, the
                // key "always" uses), and neither the line nor this ask worse than what the
                // hook's ask showed the person.
                drop(s);
                let (inner, verdict) = self.inner_command(command)?;
                s = self.lock()?;
                s.linked_once.retain(|l| l.at.elapsed() < LINK_WINDOW);
                s.linked_once
                    .iter()
                    .position(|l| l.command == inner && verdict <= l.shown && same(l))?
            }
        };
        s.linked_once.remove(i);
        Some(Answer::Once)
    }

    /// The files of a file tool's hook ask ([`HookAsk::files`]), resolved as the kernel
    /// reaches them (`~/` the person's home, a relative path from the ask's directory when
    /// that is absolute, else the worktree), and whether the tool writes them: only when the
    /// action the person is shown is exactly that tool's text for those paths (`read P…`,
    /// `write P…`, `apply_patch P…`), so an approval never reaches a file the ask did not
    /// name. Empty otherwise.
    fn hook_files(&self, ask: &HookAsk) -> (Vec<std::path::PathBuf>, bool) {
        let none = (Vec::new(), false);
        let Some((verb, _)) = ask.action.split_once(' ') else {
            return none;
        };
        let writes = match verb {
            "read" => false,
            "write" | "apply_patch" => true,
            _ => return none,
        };
        if ask.files.is_empty() || ask.action != format!("{verb} {}", ask.files.join(" ")) {
            return none;
        }
        let cwd = std::path::Path::new(&ask.cwd);
        let cwd = if cwd.is_absolute() {
            cwd
        } else {
            self.inner.cfg.worktree.as_path()
        };
        let home = self.inner.cfg.home.as_deref();
        let files = ask
            .files
            .iter()
            .map(|f| match (f.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => tyba_policy::resolve_path(h, rest),
                _ => tyba_policy::resolve_path(cwd, f),
            })
            .collect();
        (files, writes)
    }

    /// The answer a file tool's hook ask gave to this ask of the outside-files server, if
    /// any, within [`LINK_WINDOW`] (not consumed: the tool's own opens of that file are one
    /// intent): a `read` of a file the person let the agent program read or write; when
    /// writing was approved, a `write` or `create` of it, and its atomic save ([`is_save_of`]:
    /// creating a new sibling `FILE.tmp…` and renaming it over the file). Only the agent
    /// program's own requests come here (`crate::outside_fs`), never a command's.
    fn linked_file(&self, request: &AskRequest) -> Option<Answer> {
        let AskKind::File { access, real, .. } = &request.kind else {
            return None;
        };
        let mut s = self.lock()?;
        s.linked_files.retain(|l| l.at.elapsed() < LINK_WINDOW);
        s.saves.retain(|(_, at)| at.elapsed() < LINK_WINDOW);
        let saves = &s.saves;
        let linked = s
            .linked_files
            .iter()
            .any(|l| match (*access, real.as_slice()) {
                ("read", [p]) => *p == l.path,
                ("write", [p]) => l.write && *p == l.path,
                ("create", [p]) => l.write && (*p == l.path || is_save_of(p, &l.path)),
                ("rename", [from, to]) => {
                    l.write
                        && *to == l.path
                        && is_save_of(from, &l.path)
                        && saves.iter().any(|(p, _)| p == from)
                }
                _ => false,
            });
        if linked && *access == "create" {
            if let [p] = real.as_slice() {
                if s.linked_files.iter().any(|l| is_save_of(p, &l.path)) {
                    s.saves.push((p.clone(), Instant::now()));
                }
            }
        }
        linked.then_some(Answer::Once)
    }

    /// The one command inside a line of shell housekeeping, with the line's verdict, as the
    /// session's policy sees it in the worktree.
    fn inner_command(&self, line: &str) -> Option<(String, tyba_policy::Verdict)> {
        let policy = self.inner.cfg.policy.as_ref()?;
        let wt = &self.inner.cfg.worktree;
        let inspector = tyba_git_guard::Inspector::new();
        let ctx = tyba_policy::Context {
            worktree: wt,
            cwd: wt,
            home: self.inner.cfg.home.as_deref(),
            scratch: self.inner.cfg.scratch.as_deref(),
            git: Some(&inspector),
        };
        let c = policy.classify(
            &tyba_policy::Action::Exec {
                command: line.to_string(),
            },
            &ctx,
        );
        Some((c.inner_command?, c.verdict))
    }

    fn log_linked(&self, request: &AskRequest, answer: &Answer) {
        let Some(log) = &self.inner.audit else { return };
        let subject = Subject::Kernel(request.clone());
        log.write(&AuditLine {
            time: audit::rfc3339(SystemTime::now()),
            session: self.inner.cfg.session.clone(),
            kind: subject.kind().to_string(),
            action: subject.action(),
            inner_command: subject.inner_command(),
            verdict: subject.verdict(),
            reasons: subject.reasons(),
            decision: "ask".into(),
            answer: Some(answer_name(answer).to_string()),
            answered_by: Some("the person's answer to the agent hook's ask".into()),
            wait_ms: Some(0),
            pid: Some(request.pid),
            ..AuditLine::default()
        });
    }

    /// Pauses the session after too many failures: freezes the agent's processes and asks
    /// the person to resume (once) or end (deny). Runs on its own thread.
    fn pause(&self, failures: u32, last: String) {
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("tyba-pause".into())
            .spawn(move || {
                guard::signal_tree(libc::SIGSTOP);
                // The ask is the agent's: withdrawn (and the session ended) if the agent is
                // killed while paused, instead of waiting on the person for nothing.
                let agent = guard::paused_agent().unwrap_or(0);
                let Some((id, v)) = me.submit(Subject::Pause { failures, last }, agent) else {
                    guard::signal_tree(libc::SIGCONT);
                    return;
                };
                me.announce(&v);
                let (answer, _, _) = me.wait(id);
                match answer {
                    Answer::Deny { .. } => {
                        guard::signal_tree(libc::SIGKILL);
                    }
                    _ => {
                        if let Some(mut s) = me.lock() {
                            s.guard.reset();
                        }
                        guard::signal_tree(libc::SIGCONT);
                    }
                }
            });
        if spawned.is_err() {
            guard::signal_tree(libc::SIGCONT);
        }
    }
}

/// The outcome of an ask whose broker state cannot be read (a poisoned lock): a deny.
fn channel_failed() -> (Answer, String, Duration) {
    (
        Answer::Deny {
            reason: Some("refused by tyba: the approval channel failed".into()),
        },
        "broker".into(),
        Duration::ZERO,
    )
}

/// A hook ask after [`Broker::hook_begin`]: answered already, or queued and waiting.
#[derive(Debug)]
pub(crate) enum HookStep {
    /// Answered without the person (blocked, remembered, flood, non-interactive, ended).
    Done(HookAnswer),
    /// Queued: wait for ask `id`, then [`Broker::hook_end`].
    Waiting(HookWait),
}

/// What [`Broker::hook_end`] needs of a queued hook ask.
#[derive(Debug)]
pub(crate) struct HookWait {
    /// The ask's number in this session.
    pub id: u64,
    command: String,
    shown: tyba_policy::Verdict,
    key: String,
    /// What the broker's classification of the command resolved, when it classified it (a
    /// shell tool under the session's policy): the kernel layer's ask of the same command is
    /// linked to this answer only then, and only within it.
    link: Option<Reach>,
    /// The directory the command was judged in ([`Broker::judged_cwd`]).
    cwd: std::path::PathBuf,
    /// A file tool's files, resolved, and whether it writes them ([`Broker::hook_files`]).
    files: Vec<std::path::PathBuf>,
    writes: bool,
}

/// Whether `p` is a file an editor saves `file` through: a sibling (same directory) named
/// `NAME.tmp` followed by anything, `NAME` being `file`'s name (Claude Code's `Write` and
/// `Edit` write `FILE.tmp.PID.HEX`, then rename it over `FILE`).
fn is_save_of(p: &std::path::Path, file: &std::path::Path) -> bool {
    let (Some(dir), Some(name), Some(own)) = (p.parent(), p.file_name(), file.file_name()) else {
        return false;
    };
    let mut prefix = own.as_encoded_bytes().to_vec();
    prefix.extend_from_slice(b".tmp");
    Some(dir) == file.parent() && name.as_encoded_bytes().starts_with(&prefix)
}

fn deny_answer(reason: &str) -> HookAnswer {
    HookAnswer {
        answer: WireAnswer::Deny,
        reason: Some(reason.to_string()),
    }
}

impl Approver for Broker {
    fn relay_gate(&self) -> Option<Arc<dyn crate::approve::RelayGate>> {
        let p = self.inner.prompt.lock().ok().and_then(|g| g.clone())?;
        Some(p)
    }

    fn answered(&self, request: &AskRequest) -> Option<Answer> {
        let a = self.linked_file(request)?;
        self.log_linked(request, &a);
        Some(a)
    }

    fn names_changed(
        &self,
        changed: &[&std::path::Path],
        rename: Option<(&std::path::Path, &std::path::Path)>,
    ) {
        let Some(mut s) = self.lock() else { return };
        let mut saves = std::mem::take(&mut s.saves);
        s.linked_files.retain(|l| {
            let own_save = rename.is_some_and(|(from, to)| {
                to == l.path && is_save_of(from, &l.path) && saves.iter().any(|(p, _)| p == from)
            });
            own_save || !changed.iter().any(|c| l.path.starts_with(c))
        });
        saves.retain(|(p, _)| !changed.iter().any(|c| p.starts_with(c)));
        s.saves = saves;
    }

    fn ask(&self, request: &AskRequest) -> Result<Answer, ApproverError> {
        if let Some(a) = self.linked(request) {
            self.log_linked(request, &a);
            return Ok(a);
        }
        if self.inner.cfg.non_interactive {
            let reason = format!(
                "{} ({})",
                request.default_refusal(),
                crate::approve::NON_INTERACTIVE_NOTE
            );
            return Ok(self.deny_unattended(Subject::Kernel(request.clone()), request.pid, reason));
        }
        let Some((id, v)) = self.submit(Subject::Kernel(request.clone()), request.pid) else {
            let reason = format!("{} (the session has ended)", request.default_refusal());
            return Ok(Answer::Deny {
                reason: Some(reason),
            });
        };
        self.announce(&v);
        let (answer, _, _) = self.wait(id);
        Ok(answer)
    }

    fn record_allowed(&self, execs: &[crate::notify::AllowedExec]) {
        if let Some(log) = &self.inner.audit {
            let lines: Vec<AuditLine> = execs
                .iter()
                .map(|exec| AuditLine {
                    time: audit::rfc3339(exec.time),
                    session: self.inner.cfg.session.clone(),
                    kind: "exec".into(),
                    action: exec.command.clone(),
                    inner_command: exec.inner_command.clone(),
                    verdict: exec.verdict.to_string(),
                    reasons: exec.rules.clone(),
                    decision: "allow".into(),
                    reason: (exec.why != "allowed").then(|| exec.why.clone()),
                    pid: Some(exec.pid),
                    argv: Some(exec.argv.clone()),
                    cwd: Some(exec.cwd.to_string_lossy().into_owned()),
                    ..AuditLine::default()
                })
                .collect();
            log.write_many(&lines);
        }
    }

    fn note(&self, what: &str, text: &str) {
        if let Some(log) = &self.inner.audit {
            log.write(&AuditLine {
                time: audit::rfc3339(SystemTime::now()),
                session: self.inner.cfg.session.clone(),
                kind: "sandbox".into(),
                action: what.to_string(),
                decision: "note".into(),
                reason: Some(text.to_string()),
                ..AuditLine::default()
            });
        }
    }

    fn record(&self, event: &AuditEvent) -> Option<String> {
        let mut s = self.lock()?;
        if event.allowed {
            s.guard.reset();
            return None;
        }
        if event.is_quiet() {
            // Not asked and not the model's doing: logged, never counted by the guard.
            if let Some(log) = &self.inner.audit {
                log.write(&AuditLine {
                    time: audit::rfc3339(SystemTime::now()),
                    session: self.inner.cfg.session.clone(),
                    kind: event.kind.to_string(),
                    action: event.what.clone(),
                    decision: "quiet-refuse".into(),
                    reason: event.reason.clone(),
                    ..AuditLine::default()
                });
            }
            return None;
        }
        let reason = event.reason.clone().unwrap_or_default();
        // An ask withdrawn because its process is going (the agent exited and the namespace
        // is being emptied: many at once): logged when withdrawn, no failure of the agent's.
        if reason == format!("refused by tyba: {ASKER_GONE}") {
            if let Some(i) = s.logged_denials.iter().position(|r| *r == reason) {
                s.logged_denials.remove(i);
            }
            return None;
        }
        // After the end, the only refusals left are the asks `close` denied and logged.
        let already = match s.closed {
            Some(_) => None,
            None => s.logged_denials.iter().position(|r| *r == reason),
        };
        match already {
            Some(i) => {
                s.logged_denials.remove(i);
            }
            None if s.closed.is_some() => {}
            None => {
                if let Some(log) = &self.inner.audit {
                    log.write(&AuditLine {
                        time: audit::rfc3339(SystemTime::now()),
                        session: self.inner.cfg.session.clone(),
                        kind: event.kind.to_string(),
                        action: event.what.clone(),
                        inner_command: event.inner_command.clone(),
                        decision: "refuse".into(),
                        reason: event.reason.clone(),
                        ..AuditLine::default()
                    });
                }
            }
        }
        // The action key, as "always" keys it: the command behind the agent's wrapper, else
        // the whole line (every wrapped line of an agent starts with the same housekeeping).
        let key = event.inner_command.as_deref().unwrap_or(&event.what);
        let step = s.guard.failure(event.kind, key, Instant::now());
        drop(s);
        match step {
            guard::Step::Quiet => None,
            guard::Step::Nudge(text) => Some(text),
            guard::Step::Pause { failures, text } => {
                self.pause(
                    failures,
                    text::shown_action(&event.what, event.inner_command.as_deref()),
                );
                Some(text)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
