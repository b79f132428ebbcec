//! The notify loop: answers the system calls the seccomp filter hands to the supervisor
//! (`seccomp_unotify(2)`).
//!
//! - `execve`/`execveat`: decided one by one by the exec model of [`crate::exec`]: a missing
//!   or non-executable file is answered with the kernel's errno, unasked; an exec by the
//!   agent's own runtime of a file of its installation ([`crate::agent`]) is the agent;
//!   every other exec is a command, classified with the code-running variables of its
//!   environment and decided by the autonomy level (a command of the agent) or by the command
//!   that covers it (a command's descendant: blocked refused at every depth, red asked). A
//!   refused exec runs tyba's refusal program, which prints the reason and exits 126.
//! - `connect`: made by the supervisor itself on its own copy of the address, never continued:
//!   the agent's stream connections to its hosts get a stream socket from the host's network
//!   namespace injected in place of theirs (close-on-exec); other streams are red and asked;
//!   other socket types (UDP: name servers, anything) are connected in place, in the
//!   sandbox's namespace, where the resolver relay is (`crate::dns`).
//! - metadata calls: see [`crate::meta`].

use crate::agent::AgentInstall;
use crate::approve::{Answer, Approver, AskKind, AskRequest, ExecAsk};
use crate::control::{Counted, SessionControl};
use crate::exec::{self, Cover, Covered, FileId, ProcTable, Role};
use crate::hold::{NameBack, ParentHold};
use crate::meta::{self, Target};
use crate::net::{self, AgentHosts, Dest};
use crate::procfs::{self, Mem, ProcId};
use crate::push_relay;
use crate::runner::{self, Spawn, SpawnPayload, StageLink, ToStage};
use crate::sys::{self, Notif, Reply};
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tyba_policy::{
    decide, refusal_text, ActionKind, AlwaysKey, Classification, Decision, ExecMode, SessionMemory,
    Verdict,
};

/// One audited event of the session: what was decided about a notified call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// `exec`, `connect`, `metadata`, `watch`, `lookup` (a name the resolver relay refused),
    /// `probe` (an agent's known start-up probe its profile refuses quietly), or `file` (a
    /// request of the outside-files server, `crate::outside_fs`).
    pub kind: &'static str,
    /// What was attempted (command line, destination, path).
    pub what: String,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The refusal text or the ask's answer.
    pub reason: Option<String>,
    /// For an exec of a line that is one command in the agent's shell wrapper: that command
    /// (`tyba_policy::Classification::inner_command`), what the end summary shows, and the
    /// key the repeated-failure guard counts by. `None` for any other event.
    pub inner_command: Option<String>,
    /// Whether a refusal is a quiet one ([`AuditEvent::is_quiet`]): never asked, and not the
    /// model's doing.
    pub quiet: bool,
}

/// The kinds of the notify loop's own refusals that are all quiet: an agent's known probe, an
/// inotify watch outside the readable roots, a name lookup the resolver relay refused.
const QUIET_KINDS: &[&str] = &["probe", "watch", "lookup"];

/// An exec the supervisor let run without asking, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedExec {
    /// The command line as classified (with its environment assignments).
    pub command: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// The rule ids that fired on it.
    pub rules: Vec<String>,
    /// Why it ran unasked: `the agent program`, `the agent's own runtime`, `tyba's own hook`,
    /// `allowed` (the policy and the autonomy level let it), or `under the approved command
    /// `…``.
    pub why: String,
    /// The exec's own argv.
    pub argv: Vec<String>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The thread that made it (supervisor's PID namespace).
    pub pid: u32,
    /// When it was allowed (the audit line's time; the line is written a little later).
    pub time: std::time::SystemTime,
    /// The command behind the agent's shell wrapper, when the line is one
    /// (`tyba_policy::Classification::inner_command`); `None` otherwise.
    pub inner_command: Option<String>,
}

#[derive(Debug)]
pub(crate) struct State {
    /// Whether the agent program's exec (the first of the session) has been seen.
    agent_started: bool,
    /// The roles of the session's processes ([`crate::exec`]).
    procs: ProcTable,
    /// Live runner keepers forked by stage 2: pid in the sandbox's namespace → start time and
    /// the approved command everything under it runs under.
    runners: HashMap<u32, (u64, Arc<Cover>)>,
    memory: SessionMemory,
    pub(crate) log: Vec<AuditEvent>,
    /// Files already seen to be ELF, by identity and change times ([`ElfKey`]): their first
    /// bytes are not read again.
    elf: std::collections::HashSet<ElfKey>,
    /// Copies of installation files already compared, by identity and change times: the
    /// installation file each is a byte-identical copy of.
    copies: HashMap<ElfKey, PathBuf>,
}

/// A file's identity and the stamps any change of its content moves: device, inode, size,
/// mtime and ctime (seconds and nanoseconds).
type ElfKey = (u64, u64, i64, i64, i64, i64, i64);

/// A file's identity and change stamps, as [`ElfKey`]: device, inode, size, modification and
/// status-change times (a file changed in place, or replaced, gets another key).
fn elf_key(st: &libc::stat) -> ElfKey {
    (
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec,
        st.st_ctime,
        st.st_ctime_nsec,
    )
}

/// The most files [`State::elf`] remembers; past it, it starts over.
const ELF_MEMO: usize = 4096;

/// The agent program's exec, as tyba makes it ([`Notifier::agent_exec`]).
#[derive(Debug, Clone)]
pub(crate) struct AgentExec {
    /// The program's path.
    pub path: String,
    /// Its arguments, `argv[0]` first.
    pub argv: Vec<String>,
    /// Its working directory (the worktree).
    pub cwd: PathBuf,
}

/// Everything the loop needs; shared with worker threads.
pub(crate) struct Notifier {
    pub listener: OwnedFd,
    /// Whether a process of the session called `link`/`linkat` ([`crate::here_watch`]).
    pub hard_links: std::sync::atomic::AtomicBool,
    /// Classifies exec command lines with the policy (off this thread, confined, bounded).
    pub classifier: crate::classify_worker::Classifier,
    /// The live level (changed by `tyba autonomy` between decisions) and the counts.
    pub control: Arc<SessionControl>,
    pub mode: ExecMode,
    pub worktree: PathBuf,
    pub approver: Arc<dyn Approver>,
    pub hosts: AgentHosts,
    /// The session's name resolution memory, shared with the resolver relay
    /// ([`crate::dns::Lookups`]).
    pub lookups: Arc<crate::dns::Lookups>,
    pub writable: Vec<PathBuf>,
    /// Every host directory the agent writes, also indirectly: `writable`, and the upper and
    /// work directories of the state and cache layers its writes land in (a repository there
    /// is the agent's, whatever its path says: `crate::push_relay`).
    pub agent_writes: Vec<PathBuf>,
    /// Paths the agent's domain grants read + execute.
    pub readable: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    /// The link to stage 2, which forks approved commands into their own domains.
    pub stage: Arc<StageLink>,
    /// tyba's own executable, exec'd as an approved command's proxy.
    pub proxy_exe: Option<PathBuf>,
    /// The outside-files server (`--ask-outside-files`), told of approved commands' grants.
    pub outside: Option<crate::outside_fs::OutsideFs>,
    pub uid: u32,
    pub gid: u32,
    /// Pid (supervisor's namespace) of the sandbox's PID 1.
    pub stage2: u32,
    /// The agent program's installation: what the agent's own runtime may exec as itself.
    pub install: AgentInstall,
    /// The installation's files by size ([`Notifier::install_index`]), made once: at session
    /// set-up on a thread of its own ([`Notifier::index_install`]), or by the first exec that
    /// needs it first.
    pub install_index: std::sync::OnceLock<crate::agent::InstallIndex>,
    /// The code-running variables (`tyba_policy::is_code_running_var`) and the shells'
    /// startup-file locations (`crate::exec::STARTUP_VARS`) the agent started with, by name:
    /// an exec's variable with another value is an assignment.
    pub start_env: HashMap<String, String>,
    /// The programs the person's git configuration and starting environment name for git to
    /// run while it shows something (`core.pager = delta`, `diff.external = difft`:
    /// [`exec::persons_git_programs`]), read once at the start.
    pub person_git: Vec<exec::PersonsGitProgram>,
    /// The sandbox's root directory (stage 2's, `O_PATH`), the root of every process of the
    /// session ([`meta::open_target_in`]); `None` when it could not be opened (each lookup
    /// then opens the process's own).
    pub root: Option<OwnedFd>,
    /// Where allowed execs go for the audit log ([`Approver::record_allowed`], on a thread of
    /// its own: [`allowed_log`]).
    pub allowed: AuditLog,
    /// When the session started (before the agent ran): a relayed push's repository whose
    /// hooks or configuration changed since is not relayed ([`crate::push_relay`]).
    pub started: std::time::SystemTime,
    /// The agent program's own exec as stage 2's child makes it: what the audit log records
    /// for the session's first exec, which tyba itself makes, so not read from the process
    /// while it waits for its answer.
    pub agent_exec: AgentExec,
    pub state: Mutex<State>,
}

/// What an exec's decision leaves for after its reply ([`Notifier::after_reply`]), on the
/// thread that decided it.
#[derive(Default)]
struct AfterReply {
    /// Allowed execs for the audit log.
    log: Vec<AllowedExec>,
    /// Descriptors the decision opened, closed after the reply.
    fds: Vec<Arc<OwnedFd>>,
}

thread_local! {
    static AFTER_REPLY: std::cell::RefCell<AfterReply> = std::cell::RefCell::new(AfterReply::default());
}

/// Keeps `fd` open until the exec being decided on this thread has its answer: closing a
/// process's `/proc` directory or a file it runs is no part of the decision.
fn close_after_reply(fd: Arc<OwnedFd>) {
    AFTER_REPLY.with_borrow_mut(|a| a.fds.push(fd));
}

/// What the notify loop hands the audit thread ([`allowed_log`]).
#[derive(Debug)]
pub(crate) enum AuditMsg {
    /// An exec allowed without asking.
    Exec(AllowedExec),
    /// Everything sent before has been written: answered on the channel (the session's end).
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// The audit thread's channel ([`allowed_log`]).
pub(crate) type AuditLog = std::sync::mpsc::Sender<AuditMsg>;

/// The audit log's channel and the thread that hands what comes on it to `approver`
/// ([`AuditThread::start`]); the sender goes into [`Notifier::allowed`]. What is sent before
/// the thread runs waits in the channel.
pub(crate) fn allowed_log(approver: Arc<dyn Approver>) -> (AuditLog, AuditThread) {
    let (tx, rx) = std::sync::mpsc::channel::<AuditMsg>();
    (tx, AuditThread { rx, approver })
}

/// The audit log's thread, not started yet ([`allowed_log`]).
pub(crate) struct AuditThread {
    rx: std::sync::mpsc::Receiver<AuditMsg>,
    approver: Arc<dyn Approver>,
}

impl AuditThread {
    /// Starts the thread: it blocks until something comes, then writes all that has come
    /// with one `write`, answers [`AuditMsg::Flush`] once all before it is written, and ends
    /// when every sender is gone.
    ///
    /// Fails closed: when the thread cannot start (`EAGAIN`: the user's process limit, which
    /// the agent's own processes count against), `end_session` is called first (the agent's
    /// allowed execs would go unrecorded), then what came so far is written here with a note
    /// of why the session ended, and the error is returned.
    ///
    /// It does not pause to let execs gather: measured on a 2-vCPU VM, a pause (10 ms) cut
    /// the thread's CPU per exec from 24 to 6 µs but made each `posix_spawn` under tyba
    /// about 100 µs slower (the other vCPU, left idle longer, took longer to wake for the
    /// spawning parent), while pinned to one CPU it changed nothing.
    pub(crate) fn start(self, end_session: impl FnOnce()) -> std::io::Result<()> {
        let parts = Arc::new(Mutex::new(Some(self)));
        let theirs = Arc::clone(&parts);
        let spawned = std::thread::Builder::new()
            .name("tyba-audit".into())
            .spawn(move || {
                let Some(AuditThread { rx, approver }) =
                    theirs.lock().ok().and_then(|mut p| p.take())
                else {
                    return;
                };
                let (mut batch, mut acks) = (Vec::new(), Vec::new());
                // Blocks only while idle; each wake-up takes everything queued.
                while let Ok(first) = rx.recv() {
                    for m in std::iter::once(first).chain(rx.try_iter()) {
                        match m {
                            AuditMsg::Exec(e) => batch.push(e),
                            AuditMsg::Flush(ack) => acks.push(ack),
                        }
                    }
                    if !batch.is_empty() {
                        approver.record_allowed(&batch);
                        batch.clear();
                    }
                    for ack in acks.drain(..) {
                        let _ = ack.try_send(());
                    }
                }
            });
        let Err(e) = spawned else {
            return Ok(());
        };
        end_session();
        if let Some(AuditThread { rx, approver }) = parts.lock().ok().and_then(|mut p| p.take()) {
            let batch: Vec<AllowedExec> = rx
                .try_iter()
                .filter_map(|m| match m {
                    AuditMsg::Exec(x) => Some(x),
                    AuditMsg::Flush(_) => None,
                })
                .collect();
            if !batch.is_empty() {
                approver.record_allowed(&batch);
            }
            approver.note(
                "session ended",
                &format!("the audit log's writer could not start ({e}): the session was ended, as its allowed execs would go unrecorded"),
            );
        }
        Err(e)
    }
}

/// Waits (at most `limit`) until every allowed exec handed to the audit thread before this
/// call has been written.
pub(crate) fn flush_allowed_log(log: &AuditLog, limit: std::time::Duration) {
    let (ack, done) = std::sync::mpsc::sync_channel(1);
    if log.send(AuditMsg::Flush(ack)).is_ok() {
        let _ = done.recv_timeout(limit);
    }
}

impl AuditEvent {
    /// Whether this refusal is a quiet one: logged and listed, never asked, not counted by the
    /// repeated-failure guard, because the model did not ask for it: an agent's known probe
    /// its profile refuses, an inotify watch outside the readable roots, a name lookup the
    /// resolver relay refused (a program's own, told on its stderr when it is a command's),
    /// the agent program's own file access outside its state and the history files of shells
    /// and REPLs (`crate::outside_fs`).
    pub fn is_quiet(&self) -> bool {
        !self.allowed && self.quiet
    }
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
            agent_started: false,
            procs: ProcTable::new(),
            runners: HashMap::new(),
            memory: SessionMemory::new(),
            log: Vec::new(),
            elf: std::collections::HashSet::new(),
            copies: HashMap::new(),
        }
    }
}

enum ExecDecision {
    /// Runs; the process takes `role` once its image has changed.
    Continue(Option<Pending>),
    /// The file cannot run: the kernel's own answer, given by the supervisor.
    Errno(i32),
    /// Refused: the reason, and the command behind the agent's wrapper when the line has one.
    Refuse(String, Option<String>),
    /// Refused without asking: a known probe of the agent's profile (logged as `probe`).
    Quiet(String),
    /// A known probe answered without running (`answer-own-processes`, [`crate::ps_answer`]):
    /// its stdout and exit status, and the log's reason.
    Answer {
        out: String,
        code: i32,
        reason: String,
    },
    Ask(Box<PendingAsk>),
    /// git's receive-pack of an approved push to a local repository: run by the supervisor
    /// (`crate::push_relay`), the process becoming its proxy.
    Relay(Box<push_relay::Relay>),
    /// The agent's exec of a byte-identical copy of a file of its installation: runs that
    /// installation file instead (this descriptor of it), as the agent
    /// ([`Notifier::installed_original`]).
    RunInstead(OwnedFd, Pending),
}

/// A step of git's own transport of an approved push to a local repository.
enum PushStep {
    /// The shell git starts for its receive-pack: passes under the push's cover.
    Shell,
    /// git's receive-pack itself: relayed.
    Relay(Box<push_relay::Relay>),
    /// It may not or cannot be relayed (the repository's hooks or configuration changed in
    /// the session, its streams cannot be taken): refused with the reason.
    Refuse(String),
}

/// What an exec's process becomes once the exec succeeds.
struct Pending {
    tgid: u32,
    stat: procfs::Stat,
    now: Role,
    then: Role,
    /// The file the exec runs, then its `#!` interpreters.
    files: Vec<FileId>,
    /// The process's image before the exec; `None` where the exec does not change the
    /// process's role ([`exec::same_role`]): it has that role whether the exec succeeds or
    /// fails, so nothing needs to tell the two apart.
    mark: Option<exec::ImageMark>,
    /// A pidfd of the process, for its entry ([`exec::ProcTable`]).
    pidfd: Arc<OwnedFd>,
}

struct PendingAsk {
    req: AskRequest,
    key: Option<AlwaysKey>,
    copy: Option<ExecCopy>,
    /// The approved command, which what it starts runs under.
    cover: Arc<Cover>,
    /// The role the process takes when approved: a command under `cover`.
    pending: Pending,
}

/// The supervisor's own copy of an exec whose approval needs a domain of its own.
struct ExecCopy {
    path: String,
    argv: Vec<String>,
    envp: Vec<Vec<u8>>,
    grants: Vec<runner::Grant>,
}

/// What an asked exec reaches ([`crate::approve::Reach`]): its classification's findings and
/// hosts, and the grants its runner would get (`copy`), so a hook's answer for the same text
/// stands for it only when the hook's ask showed all of that.
fn exec_reach(class: &Classification, copy: Option<&ExecCopy>) -> crate::approve::Reach {
    crate::approve::Reach::of(
        class,
        copy.into_iter().flat_map(|c| {
            c.grants
                .iter()
                .map(|g| (g.path.clone(), g.write || g.change))
        }),
    )
}

/// An exec as read from the process: file name, argv, environment, working directory.
struct ExecRead {
    path: String,
    argv: Vec<String>,
    envp: Vec<Vec<u8>>,
    cwd: PathBuf,
    /// The file name as passed, and the directory fd it is relative to (`AT_FDCWD` for
    /// `execve`); for `execveat(fd, "", AT_EMPTY_PATH)` the name is empty.
    raw_path: Vec<u8>,
    dirfd: i32,
    /// The thread's `/proc` directory.
    dir: procfs::ProcDir,
    /// For a `#!` script, the words the kernel puts before the script's name (binfmt_script,
    /// each level's interpreter and its optional argument, outermost first), as exact text;
    /// empty for any other file. Set by `exec_file`.
    shebang: Vec<String>,
    /// The file of the interpreter the kernel runs last for that script (canonical), when
    /// it can be named: judged by identity like the exec's own file (a link or copy of git).
    shebang_real: Option<PathBuf>,
}

// The policy's own program facts: a shell and a system program are the same to both.
use tyba_policy::programs::{SHELLS, SYSTEM_BIN_DIRS};

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
/// Whether `path` is one of the system's shells: a [`SHELLS`] name directly in one of the
/// [`SYSTEM_BIN_DIRS`].
fn is_system_shell(path: &std::path::Path) -> bool {
    SYSTEM_BIN_DIRS
        .iter()
        .any(|d| path.parent() == Some(std::path::Path::new(d)))
        && path
            .file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|name| SHELLS.contains(&name))
}

pub(crate) fn command_line(path: &str, argv: &[String]) -> String {
    let program = program_word(path, argv.first().map(String::as_str));
    // Only the system's shells are shells: a file the agent named `bash` in the worktree is a
    // program nobody listed, shown and classified with its path and whole argv.
    // The shell's argv is read by the policy's own reader of INVOCATION rules: an option's
    // value (`-o history`, `--rcfile FILE`) is never taken for the script; what it cannot
    // read with certainty is judged whole, every word seen by the policy.
    if is_system_shell(std::path::Path::new(path)) {
        let name = std::path::Path::new(path)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let rest: Vec<Option<&str>> = argv.iter().skip(1).map(|a| Some(a.as_str())).collect();
        if let tyba_policy::programs::ShellArgs::Command { string } =
            tyba_policy::programs::read_shell_args(name, &rest)
        {
            // A script with bytes that are no UTF-8 text is not read as a line: the shell
            // and its argv are shown, the script one word the policy cannot know.
            if let Some(script) = argv.get(string + 1).filter(|s| !exec::has_byte_escapes(s)) {
                return script.clone();
            }
        }
    }
    std::iter::once(program.as_str())
        .chain(argv.iter().skip(1).map(String::as_str))
        .map(shell_quote)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `NAME ARGS…` for the file `real` run with `argv`: the program by its file name.
fn name_line(real: &std::path::Path, argv: &[String]) -> String {
    let name = real
        .file_name()
        .map(|n| exec::exec_text(n.as_bytes()))
        .unwrap_or_default();
    std::iter::once(shell_quote(&name))
        .chain(argv.iter().skip(1).map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command line an exec stands for when judged by its `argv[0]`: for a program whose
/// behaviour argv[0] selects — git's `git-<command>` names, busybox applets — or any argv[0]
/// naming another program than the file run, that name with `argv[1..]`. `None` when argv[0]
/// names the file itself.
pub(crate) fn argv0_line(path: &str, argv: &[String]) -> Option<String> {
    let a0 = argv.first()?;
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let (a0b, fileb) = (base(a0), base(path));
    if a0b.is_empty() || a0b == fileb || a0 == path {
        return None;
    }
    let rest = argv.iter().skip(1).map(|a| shell_quote(a));
    let words: Vec<String> = match a0b.strip_prefix("git-") {
        Some(sub) if fileb == "git" && !sub.is_empty() => ["git".to_string(), shell_quote(sub)]
            .into_iter()
            .chain(rest)
            .collect(),
        // A login shell's `-bash`: judged by its startup files (`crate::exec::StartupFiles`).
        _ if a0b.starts_with('-') => return None,
        _ => std::iter::once(shell_quote(&a0b)).chain(rest).collect(),
    };
    Some(words.join(" "))
}

/// The line the kernel runs for a `#!` script named `path` (as the exec passed it) with `argv`:
/// the interpreter words `shebang` (`crate::notify`'s `interpreters`), the script's name, then
/// `argv[1..]`. `None` when the file is no script.
pub(crate) fn shebang_line(shebang: &[String], path: &str, argv: &[String]) -> Option<String> {
    if shebang.is_empty() {
        return None;
    }
    let words: Vec<String> = shebang
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(path))
        .chain(argv.iter().skip(1).map(String::as_str))
        .map(shell_quote)
        .collect();
    Some(words.join(" "))
}

/// The line a multi-call program runs when the file `real` is one whatever its name
/// ([`exec::multi_call_of`]: git, busybox, by name, hard link or copy): git as `git <sub>
/// ARGS…` for an argv[0] named `git-<sub>`, else `git ARGS…`; busybox and toybox as the
/// applet argv[0] names (`NAME ARGS…`), or `busybox ARGS…` when argv[0] names busybox; the
/// dynamic loader as `ld.so ARGS…`.
pub(crate) fn multi_call_line(real: &std::path::Path, argv: &[String]) -> Option<String> {
    let program = exec::multi_call_of(real)?;
    let a0 = argv.first().map(String::as_str).unwrap_or_default();
    let a0 = a0.rsplit('/').next().unwrap_or(a0);
    let mut words: Vec<String> = match (program, a0.strip_prefix("git-")) {
        ("git", Some(sub)) if !sub.is_empty() => vec!["git".into(), shell_quote(sub)],
        ("git", _) => vec!["git".into()],
        // The loader does not read its argv[0]: it runs the program it is given.
        ("ld.so", _) => vec!["ld.so".into()],
        (p, _) if a0.is_empty() || a0 == p => vec![p.to_string()],
        (_, _) => vec![shell_quote(a0)],
    };
    words.extend(argv.iter().skip(1).map(|a| shell_quote(a)));
    Some(words.join(" "))
}

/// `a` as one shell word. Bytes that are no UTF-8 text ([`exec::exec_text`]'s escapes) are
/// written as `$'…\xHH…'`, the bytes bash makes of it: the policy reads such a word as bytes
/// that are no text, a word it cannot know, and nothing is decoded into another name.
pub(crate) fn shell_quote(a: &str) -> String {
    if exec::has_byte_escapes(a) {
        let mut s = String::from("$'");
        for c in a.chars() {
            match (exec::escaped_byte(c), c) {
                (Some(b), _) => s.push_str(&format!("\\x{b:02x}")),
                (None, '\\' | '\'') => {
                    s.push('\\');
                    s.push(c);
                }
                (None, c) if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        s.push_str(&format!("\\x{b:02x}"));
                    }
                }
                (None, c) => s.push(c),
            }
        }
        s.push('\'');
        return s;
    }
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

/// Whether `class`, an exec under a cover that was approved with `granted` paths, is red only
/// for reaching those paths (outside the worktree, or a repository's git directory as a
/// whole: the local remote an approved `git push` was granted, which git's `receive-pack`
/// then writes), every path it names lying in a grant and every path it writes in a
/// read-write one. The approval showed those grants; the command's domain, which the
/// descendant runs in, has them, and no more.
fn within_the_grants(class: &Classification, granted: &[runner::Grant]) -> bool {
    if granted.is_empty() || class.verdict != Verdict::Red || class.paths.is_empty() {
        return false;
    }
    let in_grant = |p: &std::path::Path, write: bool| {
        let p = runner::real_target(p).map_or_else(|| p.to_path_buf(), |(p, _)| p);
        granted
            .iter()
            .any(|g| p.starts_with(&g.path) && (g.write || !write))
    };
    class
        .findings
        .iter()
        .filter(|f| f.verdict == Verdict::Red)
        .all(|f| {
            f.rule == tyba_policy::rules::PATH_OUTSIDE_WORKTREE.id
                || f.rule == tyba_policy::rules::PATH_GIT_DIR.id
        })
        && class.paths.iter().all(|p| in_grant(p, false))
        && class.writes.iter().all(|p| in_grant(p, true))
}

/// Whether the command `line` runs git: its first word names git.
fn runs_git(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    std::path::Path::new(first).file_name() == Some("git".as_ref())
}

/// Whether an exec of `real` with `argv`, under the green command `line`, is git's default
/// pager: `line` runs git (its first word), and the exec is the system's `less` or `more`
/// (in a system bin directory, by its real file) with no operand or option (git-var(1)
/// `GIT_PAGER`: "less" by default, run directly when it has no shell metacharacters).
fn is_gits_default_pager(line: &str, real: &std::path::Path, argv: &[String]) -> bool {
    let git = runs_git(line);
    let name = real.file_name().and_then(|n| n.to_str()).unwrap_or("");
    git && matches!(name, "less" | "more")
        && argv.len() == 1
        && SYSTEM_BIN_DIRS
            .iter()
            .any(|d| real.parent() == Some(std::path::Path::new(d)))
}

/// The rule ids of a classification's decisive findings (those of its verdict's colour).
fn decisive_rules(c: &Classification) -> Vec<String> {
    c.findings
        .iter()
        .filter(|f| f.verdict == c.verdict)
        .map(|f| f.rule.clone())
        .collect()
}

/// `s` cut to at most `max` bytes at a character boundary, with `…` when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Tells `tyba: <reason>` on the stderr of thread `tid`'s process, without waiting on it
/// ([`crate::teller`]: a full pipe nobody reads never holds the thread that decides).
pub(crate) fn write_stderr(tid: u32, reason: &str) {
    crate::teller::tell(tid, reason);
}

/// Makes `notifier` hear the resolver relay's refused lookups ([`crate::dns::Lookups`]):
/// each is logged (kind `lookup`, counted as denied) and told on the querying process's
/// stderr, naming the command it runs, so a lookup is never dropped silently (a resolver
/// retries a `REFUSED` name and reports `EAI_AGAIN`, saying nothing of why). Held weakly: the
/// relay outlives no session.
pub(crate) fn hear_refused_lookups(notifier: &Arc<Notifier>) {
    let weak = Arc::downgrade(notifier);
    notifier
        .lookups
        .on_refused(Box::new(move |_from, inode, name| {
            if let Some(n) = weak.upgrade() {
                n.refused_lookup(inode, name);
            }
        }));
}

/// The process (supervisor's PID namespace) holding the socket whose inode is `inode`, found
/// by its `/proc/<pid>/fd` links (`socket:[INODE]`, proc(5)); the first one when several do.
/// Only processes in the network namespace of process `netns_pid` (the sandbox's, where the
/// socket was made) have their descriptors listed: one link read for each other process.
fn socket_owner(inode: u64, netns_pid: u32) -> Option<u32> {
    let want = format!("socket:[{inode}]");
    let netns = std::fs::read_link(format!("/proc/{netns_pid}/ns/net")).ok()?;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(e.path().join("ns/net")).ok().as_ref() != Some(&netns) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// After a refused exec was answered `Continue` with its name rewritten: waits (at most 2 s)
/// for process `tgid` (`pidfd`) to leave its image `before`, and kills it at once when the
/// new image is not tyba's refusal program (`proxy`, device and inode): whatever wrote the
/// old name back between the rewrite and the kernel's read ran what was refused, and ends
/// there. A process that is gone, or whose exec failed (its image unchanged), is left.
fn kill_unless_refusal_program(
    tgid: u32,
    pidfd: &OwnedFd,
    before: Option<(u64, u64)>,
    proxy: (u64, u64),
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut pause = std::time::Duration::from_micros(50);
    while std::time::Instant::now() < deadline {
        if sys::pidfd_send_signal(pidfd.as_fd(), 0).is_err() {
            return;
        }
        match procfs::exe_id(tgid) {
            None => return,
            Some(id) if id == proxy => return,
            Some(id) if Some(id) != before => {
                let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
                return;
            }
            Some(_) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(2));
    }
}

/// The processes above `tgid` sharing its memory, nearest first: its vfork parent, that
/// one's vfork parent, … (at most 16). Since the seccomp filter refuses `CLONE_VM` without
/// `CLONE_THREAD` or `CLONE_VFORK` (`crate::bpf`), these and their threads are every other
/// task that can see the memory. A parent whose sharing cannot be told (`kcmp` fails) counts
/// as sharing and ends the walk.
fn vfork_chain(tgid: u32) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut cur = tgid;
    for _ in 0..16 {
        let Some(pp) = procfs::stat(cur)
            .ok()
            .map(|(pp, _)| pp)
            .filter(|&pp| pp > 1)
        else {
            break;
        };
        match sys::same_address_space(tgid, pp) {
            Ok(true) => {
                chain.push(pp);
                cur = pp;
            }
            Ok(false) => break,
            Err(_) => {
                chain.push(pp);
                break;
            }
        }
    }
    chain
}

/// A proxy installed in place of an exec ([`Notifier::install_proxy`]).
struct InstalledProxy {
    /// The supervisor's end of the proxy's channel.
    chan: OwnedFd,
    /// The vfork parent sharing the rewritten name, held until its exec is done, and the
    /// name to give back ([`crate::hold`]).
    hold: Option<(ParentHold, NameBack)>,
}

impl InstalledProxy {
    /// To be called right after the exec was answered `Continue`: a held vfork parent gets
    /// its file name back once the exec is done, before it runs again ([`crate::hold`]).
    fn continued(&mut self) {
        if let Some((hold, back)) = self.hold.take() {
            hold.release_after_exec(back);
        }
    }
}

/// Runs `f` on a thread of its own; `false` when no thread can be started (the agent's uid
/// out of processes, `RLIMIT_NPROC`): the caller then denies, never panics.
fn spawn_worker(f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name("tyba-worker".into())
        .spawn(f)
        .is_ok()
}

/// A worker thread started before its work is known: for work that must not be lost once
/// the process it concerns runs again, the thread is started first, and a process whose
/// thread cannot start is refused (EACCES) rather than resumed without it.
struct Waiting(std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>);

impl Waiting {
    /// The started thread, waiting; `None` when no thread can be started.
    fn start() -> Option<Waiting> {
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        spawn_worker(move || {
            if let Ok(f) = rx.recv() {
                f();
            }
        })
        .then_some(Waiting(tx))
    }

    /// Runs `f` on the waiting thread. (Dropping a `Waiting` unused ends its thread.)
    fn run(self, f: impl FnOnce() + Send + 'static) {
        let _ = self.0.send(Box::new(f));
    }
}

impl Notifier {
    fn reply(&self, id: u64, r: Reply) {
        // ENOENT: the process died or was interrupted meanwhile; nothing to answer.
        let _ = sys::notif_send(self.listener.as_fd(), id, r);
    }

    /// The agent installation's files by size, made now if the set-up thread
    /// ([`Notifier::index_install`]) has not made it yet (waited for while it does).
    fn install_index(&self) -> &crate::agent::InstallIndex {
        self.install_index.get_or_init(|| self.install.index())
    }

    /// Makes the installation's index on a thread of its own, so that the walk of up to
    /// [`crate::agent::MAX_INDEXED`] files is neither on the launch path nor on the notify
    /// loop. Nothing for an agent without an installation (the index is then never needed).
    pub(crate) fn index_install(self: &Arc<Self>) {
        if self.install.roots.is_empty() {
            return;
        }
        let weak = Arc::downgrade(self);
        let _ = std::thread::Builder::new()
            .name("tyba-index".into())
            .spawn(move || {
                if let Some(n) = weak.upgrade() {
                    n.install_index();
                }
            });
    }

    /// Hands an allowed exec to the audit log's thread.
    fn log_allowed(&self, e: AllowedExec) {
        let _ = self.allowed.send(AuditMsg::Exec(e));
    }

    /// [`Self::log_allowed`] once the exec being decided on this thread has its answer
    /// ([`Self::after_reply`]): handing a record to the audit thread wakes it, which on a VM
    /// costs as much as a tenth of the decision, and the process waiting for its exec need
    /// not wait for that.
    fn log_after_reply(&self, e: AllowedExec) {
        AFTER_REPLY.with_borrow_mut(|a| a.log.push(e));
    }

    /// What the decision just answered left for after its reply: its allowed execs go to
    /// the audit thread, its descriptors are closed.
    fn after_reply(&self) {
        let (log, fds) = AFTER_REPLY
            .with_borrow_mut(|a| (std::mem::take(&mut a.log), std::mem::take(&mut a.fds)));
        for e in log {
            self.log_allowed(e);
        }
        drop(fds);
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
        let reason = self.record_refusal(kind, what, None, reason);
        write_stderr(n.pid, &reason);
        self.reply(n.id, Reply::Errno(errno));
    }

    /// Logs and counts a refusal (of `what`, behind the agent's wrapper `inner`: see
    /// [`AuditEvent::inner_command`]); returns its reason with the approver's note (the
    /// repeated-failure guard's nudge) added.
    fn record_refusal(
        &self,
        kind: &'static str,
        what: String,
        inner: Option<String>,
        reason: String,
    ) -> String {
        let mut event = AuditEvent {
            kind,
            what,
            allowed: false,
            reason: Some(reason),
            inner_command: inner,
            quiet: QUIET_KINDS.contains(&kind),
        };
        if let Some(note) = self.approver.record(&event) {
            event.reason = event.reason.map(|r| r + &note);
        }
        let reason = event.reason.clone().unwrap_or_default();
        self.control.count(Counted::Denied);
        if let Ok(mut s) = self.state.lock() {
            s.log.push(event);
        }
        reason
    }

    /// A lookup the resolver relay refused (`name`, asked from the socket `inode` when one
    /// socket was bound at the querying address): logged and told to the process that asked.
    fn refused_lookup(&self, inode: Option<u64>, name: &str) {
        let pid = inode.and_then(|i| socket_owner(i, self.lookups.netns_pid()));
        let role = pid.and_then(|p| self.role_now(procfs::proc_id(p).ok()?));
        let who = match &role {
            Some(Role::Command(c)) => format!("`{}`", c.shown()),
            Some(Role::Agent) => "the agent".to_string(),
            _ => pid.map_or_else(|| "a process".to_string(), |p| format!("pid {p}")),
        };
        let reason = format!(
            "refused the lookup of `{name}` by {who}: name lookups carry data out, so only the \
             agent's hosts and the hosts an approved command's own line names resolve; run the \
             session with `--allow-host {name}` to allow it"
        );
        let reason = self.record_refusal("lookup", format!("{name} (by {who})"), None, reason);
        // The agent's own runtime draws its screen on its stderr: its refusals are in the
        // log and the end summary only.
        match (pid, &role) {
            (Some(_), Some(Role::Agent)) | (None, _) => {}
            (Some(p), _) => write_stderr(p, &reason),
        }
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
                if !spawn_worker(move || me.handle_connect(n)) {
                    self.reply(n.id, Reply::Errno(libc::EAGAIN));
                }
            }
            nr if crate::bpf::METADATA_SYSCALLS.contains(&nr) => self.handle_meta(n),
            libc::SYS_inotify_add_watch => meta::handle_watch(self, n),
            libc::SYS_link | libc::SYS_linkat => {
                self.hard_links
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.reply(n.id, Reply::Continue)
            }
            _ => self.reply(n.id, Reply::Errno(libc::ENOSYS)),
        }
    }

    fn handle_exec(self: &Arc<Self>, n: Notif) {
        self.answer_exec_decision(n);
        self.after_reply();
    }

    fn answer_exec_decision(self: &Arc<Self>, n: Notif) {
        match self.exec_decision(&n) {
            Ok(ExecDecision::Continue(pending)) => {
                if let Some(p) = pending {
                    self.set_pending(p);
                }
                self.reply(n.id, Reply::Continue)
            }
            Ok(ExecDecision::Errno(e)) => self.reply(n.id, Reply::Errno(e)),
            Ok(ExecDecision::RunInstead(original, pending)) => {
                match self.run_instead(&n, &original) {
                    Ok(hold) => {
                        self.set_pending(pending);
                        self.reply(n.id, Reply::Continue);
                        if let Some((h, back)) = hold {
                            h.release_after_exec(back);
                        }
                    }
                    Err(why) => {
                        let what = self.exec_what(&n);
                        self.refuse_exec(
                        &n,
                        what,
                        format!("refused by tyba: the agent's copy of its own program cannot be run as the installed file ({why})"),
                    )
                    }
                }
            }
            Ok(ExecDecision::Refuse(reason, inner)) => {
                let what = self.exec_what(&n);
                self.refuse_exec_as(&n, "exec", what, inner, reason)
            }
            Ok(ExecDecision::Quiet(reason)) => {
                let what = self.exec_what(&n);
                self.refuse_exec_as(&n, "probe", what, None, reason)
            }
            Ok(ExecDecision::Answer { out, code, reason }) => {
                let what = self.exec_what(&n);
                self.answer_exec(&n, what, out, code, reason)
            }
            Ok(ExecDecision::Ask(ask)) => {
                let me = Arc::clone(self);
                let started = spawn_worker(move || {
                    let PendingAsk {
                        req,
                        key,
                        copy,
                        cover,
                        pending,
                    } = *ask;
                    let what = match &req.kind {
                        AskKind::Command { command } => command.clone(),
                        k => k.to_string(),
                    };
                    let inner = req.inner_command().map(str::to_string);
                    match me.ask(&req) {
                        Ok(answer) => {
                            if let (Answer::Always, Some(k)) = (&answer, key) {
                                if let Ok(mut s) = me.state.lock() {
                                    s.memory.remember(k);
                                }
                            }
                            me.log(AuditEvent {
                                kind: "exec",
                                what: what.clone(),
                                allowed: true,
                                reason: Some(format!("{answer:?}")),
                                inner_command: inner.clone(),
                                quiet: false,
                            });
                            match copy {
                                None => {
                                    me.set_pending(pending);
                                    me.reply(n.id, Reply::Continue)
                                }
                                Some(c) => {
                                    if let Err(reason) = me.run_approved(&n, c, cover) {
                                        me.refuse_exec_as(&n, "exec", what, inner, reason)
                                    }
                                }
                            }
                        }
                        Err(reason) => me.refuse_exec_as(&n, "exec", what, inner, reason),
                    }
                });
                if !started {
                    let what = self.exec_what(&n);
                    self.refuse_exec(
                        &n,
                        what,
                        "refused by tyba: the supervisor cannot start a thread to ask (the user's process limit is reached)".into(),
                    );
                }
            }
            Ok(ExecDecision::Relay(relay)) => {
                let what = self.exec_what(&n);
                let me = Arc::clone(self);
                let w = what.clone();
                if !spawn_worker(move || me.run_relay(&n, w, *relay)) {
                    self.refuse_exec(
                        &n,
                        what,
                        "refused by tyba: the supervisor cannot start a thread to relay the push (the user's process limit is reached)".into(),
                    );
                }
            }
            Err(e) => self.reply(n.id, Reply::Errno(errno_of(&e))),
        }
    }

    /// git's own transport of a push to a local repository under `cover`, an approved push
    /// that named that repository (`crate::push_relay`): the shell git starts for it
    /// (`sh -c "git-receive-pack '<path>'"` word for word, with no code-running variable
    /// changed: `env_clean`) passes, and the exec of git's own receive-pack on it from that
    /// shell is relayed. `None` for every other exec, which is classified as usual.
    #[allow(clippy::too_many_arguments)]
    fn local_push_step(
        &self,
        n: &Notif,
        pidfd: &OwnedFd,
        tgid: u32,
        r: &ExecRead,
        real: Option<&std::path::Path>,
        cover: &Arc<Cover>,
        env_clean: &dyn Fn() -> bool,
    ) -> Option<PushStep> {
        if cover.pushes.is_empty() {
            return None;
        }
        let real = real?;
        let approved_at = |p: &str| {
            push_relay::git_dir_at(&r.cwd.join(p))
                .and_then(|repo| cover.pushes.iter().find(|a| a.repo == repo).cloned())
        };
        if is_system_shell(real) {
            let path = push_relay::transport_shell(&r.argv)?;
            let approved = approved_at(&path)?;
            if !env_clean() {
                return None;
            }
            self.control.count(Counted::Allowed);
            self.log_after_reply(AllowedExec {
                command: command_line(&r.path, &r.argv),
                verdict: cover.verdict,
                rules: Vec::new(),
                why: format!(
                    "git's transport of the approved push `{}` to {}",
                    cover.shown(),
                    approved.repo.display()
                ),
                argv: r.argv.clone(),
                cwd: r.cwd.clone(),
                pid: n.pid,
                time: std::time::SystemTime::now(),
                inner_command: None,
            });
            return Some(PushStep::Shell);
        }
        let system = exec::is_system_program(real)
            || SYSTEM_BIN_DIRS
                .iter()
                .any(|d| real.parent() == Some(std::path::Path::new(d)));
        if !system {
            return None;
        }
        let path = push_relay::receive_pack_path(real, &r.argv)?;
        // Started by git's transport shell on that same path: the process is that shell now
        // (its image, or the vfork child sharing it). Another `receivepack` (an agent's
        // script exec'ing git's receive-pack) is classified as usual.
        let now_shell =
            std::fs::read_link(format!("/proc/{tgid}/exe")).is_ok_and(|exe| is_system_shell(&exe));
        let now_argv: Vec<String> = std::fs::read(format!("/proc/{tgid}/cmdline"))
            .map(|b| {
                b.split(|&c| c == 0)
                    .map(exec::exec_text)
                    .collect::<Vec<_>>()
            })
            .map(|mut v| {
                if v.last().is_some_and(String::is_empty) {
                    v.pop();
                }
                v
            })
            .unwrap_or_default();
        if !now_shell || push_relay::transport_shell(&now_argv).as_deref() != Some(path.as_str()) {
            return None;
        }
        let approved = approved_at(&path)?;
        if !env_clean() {
            return None;
        }
        if let Some(why) =
            push_relay::config_refusal(&approved.repo, &self.agent_writes, self.classifier.home())
        {
            return Some(PushStep::Refuse(format!(
                "refused by tyba: the push is not relayed: {why} (the receive-pack would run it outside the sandbox)"
            )));
        }
        if let Some(changed) = push_relay::changed_since(&approved.repo, self.started) {
            return Some(PushStep::Refuse(format!(
                "refused by tyba: the push is not relayed: {} changed during this session (the receive-pack would run what it says outside the sandbox)",
                changed.display()
            )));
        }
        let take = |fd: i32| sys::pidfd_getfd(pidfd.as_fd(), fd);
        match (take(0), take(1), take(2)) {
            (Ok(stdin), Ok(stdout), Ok(stderr)) => {
                Some(PushStep::Relay(Box::new(push_relay::Relay {
                    approved,
                    protected: self.classifier.protected_branches(),
                    home: self.classifier.home().map(std::path::Path::to_path_buf),
                    stdin,
                    stdout,
                    stderr,
                    argv: r.argv.clone(),
                    cwd: r.cwd.clone(),
                })))
            }
            _ => Some(PushStep::Refuse(
                "approved, but tyba cannot relay the push: its standard streams cannot be taken"
                    .into(),
            )),
        }
    }

    /// Relays an approved push's receive-pack (`crate::push_relay`): the process becomes
    /// tyba's proxy, the supervisor runs `git receive-pack` outside the sandbox, the proxy
    /// ends as it ended (or prints the refusal). Replies to the notification.
    fn run_relay(&self, n: &Notif, what: String, relay: push_relay::Relay) {
        let mut installed = match self.install_proxy(n, false, false, false) {
            Ok(i) => i,
            Err(why) => {
                return self.refuse_exec(
                    n,
                    what,
                    format!("approved, but tyba cannot relay the push: {why}"),
                )
            }
        };
        let pidfd = procfs::tgid(n.pid).and_then(|t| sys::pidfd_open(t as i32));
        self.reply(n.id, Reply::Continue);
        installed.continued();
        if !pidfd.is_ok_and(|p| runner::proxy_started(&installed.chan, p.as_fd())) {
            self.log(AuditEvent {
                kind: "exec",
                what,
                allowed: false,
                reason: Some("the relayed push's proxy did not start".into()),
                inner_command: None,
                quiet: false,
            });
            return;
        }
        let chan = Arc::new(installed.chan);
        let repo = relay.approved.repo.clone();
        let (argv, cwd) = (relay.argv.clone(), relay.cwd.clone());
        let outcome = push_relay::run(relay, |pidfd| {
            if let Ok(p) = pidfd.try_clone() {
                let c = Arc::clone(&chan);
                spawn_worker(move || push_relay::watch_proxy(&c, &p));
            }
        });
        let outcome = match outcome {
            push_relay::Outcome::Ran(code) => {
                self.log_allowed(AllowedExec {
                    command: what,
                    verdict: Verdict::Red,
                    rules: Vec::new(),
                    why: format!(
                        "relayed: git receive-pack on {} run by tyba outside the sandbox (exit {code})",
                        repo.display()
                    ),
                    argv,
                    cwd,
                    pid: n.pid,
                    time: std::time::SystemTime::now(),
                    inner_command: None,
                });
                push_relay::Outcome::Ran(code)
            }
            push_relay::Outcome::Refused(reason) => {
                push_relay::Outcome::Refused(self.record_refusal("exec", what, None, reason))
            }
        };
        push_relay::report(&chan, &outcome);
    }

    fn set_pending(&self, p: Pending) {
        if let Ok(mut s) = self.state.lock() {
            match p.mark {
                Some(mark) => s.procs.set_pending(
                    exec::Who {
                        pid: p.tgid,
                        start: p.stat.start,
                        pidfd: Some(p.pidfd),
                    },
                    p.now,
                    p.then,
                    p.files,
                    mark,
                ),
                None => s.procs.set(p.tgid, p.stat.start, p.then, Some(p.pidfd)),
            }
        }
    }

    fn exec_what(&self, n: &Notif) -> String {
        self.read_exec(n)
            .map(|r| command_line(&r.path, &r.argv))
            .unwrap_or_else(|_| "(unreadable exec)".to_string())
    }

    /// The file name, argv, environment and working directory of an execve/execveat; the
    /// file name and argv as exact text ([`exec::exec_text`]: bytes that are no UTF-8 text
    /// kept apart as escapes, never decoded lossily). For `execveat(2)` the path is made absolute from its directory fd
    /// (`AT_EMPTY_PATH` with an empty path: the fd's own file), as the kernel resolves it.
    fn read_exec(&self, n: &Notif) -> std::io::Result<ExecRead> {
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        let (path_ptr, argv_ptr, envp_ptr) = if execveat {
            (n.args[1], n.args[2], n.args[3])
        } else {
            (n.args[0], n.args[1], n.args[2])
        };
        let procfs::ExecArgs {
            path: raw_path,
            argv,
            envp,
        } = procfs::read_exec_args(
            n.pid,
            path_ptr,
            argv_ptr,
            envp_ptr,
            libc::PATH_MAX as usize,
            65_536,
            2 << 20,
        )?;
        // Exactly, never lossily: bytes that are no UTF-8 text stay apart from any text
        // (`exec::exec_text`), and the policy finds such a word unknown.
        let path = exec::exec_text(&raw_path);
        // The dirfd argument is an int: the low 32 bits of the register.
        let dirfd = if execveat {
            n.args[0] as u32 as i32
        } else {
            libc::AT_FDCWD
        };
        let dir = procfs::ProcDir::open(n.pid)?;
        close_after_reply(dir.shared());
        let cwd = dir.cwd()?;
        let path = if execveat && !path.starts_with('/') {
            let dir = if dirfd == libc::AT_FDCWD {
                cwd.clone()
            } else {
                std::fs::read_link(format!("/proc/{}/fd/{dirfd}", n.pid))?
            };
            let dir = exec::exec_text(dir.as_os_str().as_bytes());
            if path.is_empty() {
                dir
            } else {
                format!("{}/{path}", dir.trim_end_matches('/'))
            }
        } else {
            path
        };
        Ok(ExecRead {
            path,
            argv: argv.iter().map(|a| exec::exec_text(a)).collect(),
            envp,
            cwd,
            raw_path,
            dirfd,
            dir,
            shebang: Vec::new(),
            shebang_real: None,
        })
    }

    /// The file an exec would run, as the process resolves its name: `Ok(Some((canonical
    /// path, identity)))`, `Ok(None)` when the supervisor cannot name it exactly (a magic
    /// link, a deleted file: it is then only classified), or `Err(errno)` with the errno the
    /// kernel's exec would fail with (ENOENT, ENOTDIR, EACCES for a directory, a file without
    /// execute bits or outside the Landlock rules' execute roots, ENOEXEC for a file that is
    /// neither ELF nor `#!`).
    fn exec_file(
        &self,
        n: &Notif,
        pidfd: &OwnedFd,
        tgid: u32,
        r: &mut ExecRead,
    ) -> Result<Option<(PathBuf, Vec<FileId>)>, i32> {
        use std::os::unix::fs::MetadataExt;
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        let nofollow = execveat && n.args[4] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
        let empty_path = execveat && n.args[4] & libc::AT_EMPTY_PATH as u64 != 0;
        // Names the kernel resolves through the process's own /proc: its fds and itself.
        // The rest of the name as its bytes: never decoded into another name.
        let under = |dir: String, rest: &[u8]| {
            std::path::Path::new(&dir).join(std::ffi::OsStr::from_bytes(rest))
        };
        let own = |rest: &[u8]| under(format!("/proc/{tgid}"), rest);
        let raw = r.raw_path.as_slice();
        let magic = if r.raw_path.is_empty() && empty_path && r.dirfd != libc::AT_FDCWD {
            // fexecve(3): the fd's own file.
            Some(own(format!("fd/{}", r.dirfd).as_bytes()))
        } else if r.raw_path.is_empty() {
            return Err(libc::ENOENT);
        } else if r.dirfd != libc::AT_FDCWD && !r.raw_path.starts_with(b"/") {
            None
        } else if let Some(rest) = raw.strip_prefix(b"/proc/self/") {
            Some(own(rest))
        } else if let Some(rest) = raw.strip_prefix(b"/proc/thread-self/") {
            Some(under(format!("/proc/{}", n.pid), rest))
        } else {
            raw.strip_prefix(b"/dev/fd/")
                .map(|rest| under(format!("/proc/{tgid}/fd"), rest))
        };
        let obj = match magic {
            Some(m) => {
                let md = std::fs::metadata(&m).map_err(|e| errno_of(&e))?;
                if !md.is_file() {
                    return Err(libc::EACCES);
                }
                if md.mode() & 0o111 == 0 {
                    return Err(libc::EACCES);
                }
                // A script reached through an fd (`fexecve(3)` of a `#!` file): its
                // interpreter line too is what runs.
                if let Ok(f) = std::fs::File::open(&m) {
                    let fd = OwnedFd::from(f);
                    let (more, words, last) = self.interpreters(n, pidfd, &fd);
                    if !words.is_empty() {
                        r.shebang = words;
                        r.shebang_real = last;
                        let mut ids = vec![(md.dev(), md.ino())];
                        ids.extend(more);
                        return Ok(std::fs::canonicalize(&m)
                            .ok()
                            .filter(|c| c.is_absolute() && c.is_file())
                            .map(|c| (c, ids)));
                    }
                }
                return Ok(std::fs::canonicalize(&m)
                    .ok()
                    .filter(|c| c.is_absolute() && c.is_file())
                    .map(|c| (c, vec![(md.dev(), md.ino())])));
            }
            None => {
                let target = Target::Path {
                    dirfd: r.dirfd,
                    path: r.raw_path.clone(),
                    nofollow,
                };
                match meta::open_target_in(
                    n.pid,
                    pidfd,
                    self.root.as_ref().map(|r| r.as_fd()),
                    &target,
                ) {
                    Ok(o) => o,
                    // A symlink through a magic link: the kernel follows it, this open does not.
                    Err(e) if e.raw_os_error() == Some(libc::ELOOP) && !nofollow => {
                        return Ok(None)
                    }
                    Err(e) => return Err(errno_of(&e)),
                }
            }
        };
        let st = nix::sys::stat::fstat(obj.as_fd()).map_err(|e| e as i32)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_mode & 0o111 == 0 {
            return Err(libc::EACCES);
        }
        let real = meta::object_path(&obj).map_err(|e| errno_of(&e))?;
        let inside = |roots: &[PathBuf]| roots.iter().any(|w| real.starts_with(w));
        if !inside(&self.readable) && !inside(&self.writable) {
            // Landlock grants execute nowhere else: the kernel would answer EACCES.
            return Err(libc::EACCES);
        }
        let key = elf_key(&st);
        if self.state.lock().is_ok_and(|s| s.elf.contains(&key)) {
            close_after_reply(Arc::new(obj));
            return Ok(Some((real, vec![(st.st_dev, st.st_ino)])));
        }
        // What binfmt would take: ELF or `#!`; anything else fails with ENOEXEC (a shell then
        // runs it as a script itself, each of its commands an exec of its own).
        let mut head = [0u8; 4];
        let n_read = std::fs::File::open(format!("/proc/self/fd/{}", obj.as_raw_fd()))
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .unwrap_or(4);
        if n_read >= 2 && !head.starts_with(b"#!") && !(n_read == 4 && &head == b"\x7fELF") {
            return Err(libc::ENOEXEC);
        }
        let mut ids = vec![(st.st_dev, st.st_ino)];
        if n_read == 4 && &head == b"\x7fELF" {
            if let Ok(mut s) = self.state.lock() {
                if s.elf.len() >= ELF_MEMO {
                    s.elf.clear();
                }
                s.elf.insert(key);
            }
        }
        if head.starts_with(b"#!") {
            // What the process's /proc/PID/exe will be: the `#!` interpreter (binfmt_script
            // runs it, recursively, a few levels deep).
            let (more, words, last) = self.interpreters(n, pidfd, &obj);
            ids.extend(more);
            r.shebang = words;
            r.shebang_real = last;
        }
        close_after_reply(Arc::new(obj));
        Ok(Some((real, ids)))
    }

    /// Whether the absolute name `exe`, resolved as process `n` resolves it (in the sandbox's
    /// root, no magic link followed), is tyba's own executable `me`, and lies outside the
    /// writable roots.
    fn is_own_exe(&self, n: &Notif, pidfd: &OwnedFd, exe: &str, me: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let target = Target::Path {
            dirfd: libc::AT_FDCWD,
            path: exe.as_bytes().to_vec(),
            nofollow: false,
        };
        let Ok(obj) =
            meta::open_target_in(n.pid, pidfd, self.root.as_ref().map(|r| r.as_fd()), &target)
        else {
            return false;
        };
        let (Ok(st), Ok(mine)) = (nix::sys::stat::fstat(obj.as_fd()), std::fs::metadata(me)) else {
            return false;
        };
        let outside = meta::object_path(&obj)
            .is_ok_and(|real| !self.writable.iter().any(|w| real.starts_with(w)));
        outside && st.st_dev == mine.dev() && st.st_ino == mine.ino()
    }

    /// The identities of the `#!` interpreters `script` runs through, as the process resolves
    /// their names, at most 4 deep (binfmt_script's limit), and the words the kernel puts
    /// before the script's name: each interpreter as written and its one optional argument
    /// (the rest of the line, blanks trimmed, as binfmt_script reads it), outermost first.
    /// Only the first 256 bytes of each file are read (the kernel's own bound).
    fn interpreters(
        &self,
        n: &Notif,
        pidfd: &OwnedFd,
        script: &OwnedFd,
    ) -> (Vec<FileId>, Vec<String>, Option<PathBuf>) {
        let mut out = Vec::new();
        let mut words: Vec<String> = Vec::new();
        let mut last = None;
        let mut cur = std::fs::File::open(format!("/proc/self/fd/{}", script.as_raw_fd())).ok();
        for _ in 0..4 {
            let Some(mut f) = cur.take() else { break };
            let mut line = [0u8; 256];
            let got = std::io::Read::read(&mut f, &mut line).unwrap_or(0);
            let Some(rest) = line[..got].strip_prefix(b"#!") else {
                break;
            };
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let blank = |b: &u8| *b == b' ' || *b == b'\t';
            let Some(name) = rest[..end].split(blank).find(|w| !w.is_empty()) else {
                break;
            };
            // The optional argument: everything after the name, blanks trimmed, one word.
            let start = rest[..end]
                .iter()
                .position(|b| !blank(b))
                .map_or(end, |p| p + name.len());
            let arg = rest[start..end]
                .iter()
                .position(|b| !blank(b))
                .map(|p| &rest[start + p..end]);
            let arg = arg.map(|a| {
                let last = a.iter().rposition(|b| !blank(b)).map_or(0, |p| p + 1);
                &a[..last]
            });
            let mut level = vec![exec::exec_text(name)];
            level.extend(arg.filter(|a| !a.is_empty()).map(exec::exec_text));
            // This level's interpreter runs first: its words go before the ones read so far.
            level.append(&mut words);
            words = level;
            let target = Target::Path {
                dirfd: libc::AT_FDCWD,
                path: name.to_vec(),
                nofollow: false,
            };
            let Ok(obj) =
                meta::open_target_in(n.pid, pidfd, self.root.as_ref().map(|r| r.as_fd()), &target)
            else {
                break;
            };
            let Ok(st) = nix::sys::stat::fstat(obj.as_fd()) else {
                break;
            };
            out.push((st.st_dev, st.st_ino));
            last = meta::object_path(&obj).ok();
            cur = std::fs::File::open(format!("/proc/self/fd/{}", obj.as_raw_fd())).ok();
        }
        (out, words, last)
    }

    /// The installed script an installed interpreter is run on as its own `#!` line runs it:
    /// `INTERP SCRIPT ARGS…` (argv[0] naming the exec's own file) where SCRIPT is an absolute
    /// name of a `#!` script in a root the session cannot write whose line is
    /// `#!…/INTERP [ARG]` or `#!/usr/bin/env INTERP`: what `env` execs for a version
    /// manager's shim (`#!/usr/bin/env bash` in `~/.pyenv/shims`), or a person typing
    /// `sh /usr/bin/zcat`. Both files installed: what runs is installed code with the
    /// agent's arguments, the script as a program. Only for the policy's shells
    /// (`tyba_policy::programs::is_shell`), so that no other exec pays the script's read.
    /// `None` otherwise.
    fn relayed_installed_script(
        &self,
        n: &Notif,
        pidfd: &OwnedFd,
        r: &ExecRead,
        kept: &exec::KeptRoots<'_>,
    ) -> Option<PathBuf> {
        let interp = std::path::Path::new(&r.path).file_name()?;
        if !interp.to_str().is_some_and(tyba_policy::programs::is_shell) {
            return None;
        }
        let a0 = r.argv.first()?;
        if std::path::Path::new(a0).file_name() != Some(interp) {
            return None;
        }
        let script = std::path::Path::new(r.argv.get(1)?);
        if !script.is_absolute()
            || exec::lexically_within(script.as_os_str().as_bytes(), &r.cwd, &self.writable)
            || !kept.holds(script)
        {
            return None;
        }
        let target = Target::Path {
            dirfd: libc::AT_FDCWD,
            path: script.as_os_str().as_bytes().to_vec(),
            nofollow: false,
        };
        let obj =
            meta::open_target_in(n.pid, pidfd, self.root.as_ref().map(|r| r.as_fd()), &target)
                .ok()?;
        let real = meta::object_path(&obj).ok()?;
        if !kept.holds(&real) || self.writable.iter().any(|w| real.starts_with(w)) {
            return None;
        }
        let mut f = std::fs::File::open(format!("/proc/self/fd/{}", obj.as_raw_fd())).ok()?;
        let mut line = [0u8; 256];
        let got = std::io::Read::read(&mut f, &mut line).ok()?;
        let rest = line[..got].strip_prefix(b"#!")?;
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let words: Vec<&[u8]> = rest[..end]
            .split(|b| *b == b' ' || *b == b'\t')
            .filter(|w| !w.is_empty())
            .collect();
        let base = |w: &[u8]| w.rsplit(|b| *b == b'/').next().map(<[u8]>::to_vec);
        let names_interp = match words.as_slice() {
            [env, name] if base(env).as_deref() == Some(b"env".as_slice()) => {
                *name == interp.as_bytes()
            }
            [first, ..] => base(first).as_deref() == Some(interp.as_bytes()),
            [] => false,
        };
        names_interp.then(|| script.to_path_buf())
    }

    /// The file of the agent's installation that the exec's file (`real`, canonical, as the
    /// process resolves the exec's name) is a byte-identical copy of, opened read-only in the
    /// sandbox's root: the descriptor, its identity and its path (docs/sandbox.md, "The
    /// agent's copy of its own program").
    ///
    /// Only an ELF file in a writable root (where the agent can have made a copy) that is not
    /// itself the installation's is looked for; the original must be a regular executable
    /// file of the installation, outside the writable roots, of the same size and bytes (read
    /// in full from the descriptors compared, the copy as opened now). Copies already
    /// compared are remembered by identity and change times.
    fn installed_original(
        &self,
        n: &Notif,
        pidfd: &OwnedFd,
        r: &ExecRead,
        real: &std::path::Path,
    ) -> Option<(OwnedFd, FileId, PathBuf)> {
        use std::io::{Read, Seek};
        use std::os::unix::ffi::OsStrExt;
        if r.raw_path.is_empty()
            || self.install.owns(real)
            || !self.writable.iter().any(|w| real.starts_with(w))
        {
            return None;
        }
        let root = self.root.as_ref().map(|r| r.as_fd());
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        let nofollow = execveat && n.args[4] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0;
        let target = Target::Path {
            dirfd: r.dirfd,
            path: r.raw_path.clone(),
            nofollow,
        };
        let copy = meta::open_target_in(n.pid, pidfd, root, &target).ok()?;
        let st = nix::sys::stat::fstat(copy.as_fd()).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        let mut cf = std::fs::File::open(format!("/proc/self/fd/{}", copy.as_raw_fd())).ok()?;
        let mut head = [0u8; 4];
        cf.read_exact(&mut head).ok()?;
        if &head != b"\x7fELF" {
            return None;
        }
        let key = elf_key(&st);
        let known = self.state.lock().ok()?.copies.get(&key).cloned();
        let size = u64::try_from(st.st_size).ok()?;
        // A copy compared before and unchanged since (its ctime moves with any write, and no
        // process can set it) is not read again.
        let compared = known.is_some();
        let candidates: Vec<PathBuf> = match known {
            Some(p) => vec![p],
            None => self.install_index().of_size(size).to_vec(),
        };
        for cand in candidates {
            let t = Target::Path {
                dirfd: libc::AT_FDCWD,
                path: cand.as_os_str().as_bytes().to_vec(),
                nofollow: true,
            };
            let Ok(obj) = meta::open_target_in(n.pid, pidfd, root, &t) else {
                continue;
            };
            let Ok(ost) = nix::sys::stat::fstat(obj.as_fd()) else {
                continue;
            };
            let Ok(oreal) = meta::object_path(&obj) else {
                continue;
            };
            if ost.st_mode & libc::S_IFMT != libc::S_IFREG
                || ost.st_mode & 0o111 == 0
                || ost.st_size != st.st_size
                || !self.install.owns(&oreal)
                || self.writable.iter().any(|w| oreal.starts_with(w))
                || !self.readable.iter().any(|w| oreal.starts_with(w))
            {
                continue;
            }
            let Ok(mut of) = std::fs::File::open(format!("/proc/self/fd/{}", obj.as_raw_fd()))
            else {
                continue;
            };
            if cf.rewind().is_err() {
                return None;
            }
            if compared || crate::agent::same_bytes(&mut cf, &mut of).unwrap_or(false) {
                if let Ok(mut s) = self.state.lock() {
                    if s.copies.len() >= ELF_MEMO {
                        s.copies.clear();
                    }
                    s.copies.insert(key, oreal.clone());
                }
                return Some((of.into(), (ost.st_dev, ost.st_ino), oreal));
            }
        }
        None
    }

    /// Makes the exec of `n` run `original` instead of the file it names: installs it in the
    /// process at its lowest free descriptor `N` (close-on-exec: the program does not inherit
    /// it) and rewrites the exec's file name to `/dev/fd/N`, which the kernel resolves to
    /// that very file. The caller replies `Continue`. Where the name lies in a vfork parent's
    /// memory, that parent held ([`crate::hold`]) and the name to give it back once the exec
    /// is done: [`ParentHold::release_after_exec`] right after the answer.
    ///
    /// # Errors
    /// Why it cannot (the name shorter than the new one, not in private memory, the process
    /// gone).
    fn run_instead(
        &self,
        n: &Notif,
        original: &OwnedFd,
    ) -> Result<Option<(ParentHold, NameBack)>, String> {
        let tgid = procfs::tgid(n.pid).map_err(|e| e.to_string())?;
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        let name_ptr = if execveat { n.args[1] } else { n.args[0] };
        let mem = Mem::open_rw(n.pid).map_err(|e| e.to_string())?;
        let mut old_name = mem
            .read_cstr(name_ptr, libc::PATH_MAX as usize)
            .map_err(|e| e.to_string())?;
        old_name.push(0);
        let shares_with_parent = vfork_chain(tgid).first().copied();
        let fd = sys::notif_addfd(self.listener.as_fd(), n.id, original.as_fd(), true)
            .map_err(|e| format!("installing its descriptor: {e}"))?;
        let new_name = format!("/dev/fd/{fd}\0").into_bytes();
        if old_name.len() < new_name.len() {
            return Err(format!(
                "its file name is shorter than {} bytes",
                new_name.len() - 1
            ));
        }
        if !procfs::private_mapping(tgid, name_ptr, new_name.len() as u64) {
            return Err("its file name is not in private memory".into());
        }
        // Held before the write: from then on the parent runs only once its name is back.
        let hold = shares_with_parent
            .map(|pp| ParentHold::start(pp, tgid))
            .transpose()?;
        mem.write(name_ptr, &new_name)
            .map_err(|e| format!("rewriting its file name: {e}"))?;
        Ok(hold.map(|h| {
            (
                h,
                NameBack {
                    child: tgid,
                    name_ptr,
                    old_name,
                    new_name,
                },
            )
        }))
    }

    fn exec_decision(&self, n: &Notif) -> std::io::Result<ExecDecision> {
        // A thread-group leader (the common case) is its own process: `pidfd_open` succeeds
        // only for leaders, which spares reading `/proc/<tid>/status`. The pidfd then serves
        // every lookup of this decision.
        let (tgid, pidfd) = match sys::pidfd_open(n.pid as i32) {
            Ok(fd) => (n.pid, fd),
            Err(_) => {
                let t = procfs::tgid(n.pid)?;
                (t, sys::pidfd_open(t as i32)?)
            }
        };
        let pidfd = Arc::new(pidfd);
        let stat = procfs::stat_of(pidfd.as_fd(), tgid)?;
        {
            let mut s = self
                .state
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            if !s.agent_started {
                // The first exec of the session: stage 2's child starting the agent program.
                s.agent_started = true;
                s.procs
                    .set(tgid, stat.start, Role::Agent, Some(Arc::clone(&pidfd)));
                drop(s);
                let AgentExec { path, argv, cwd } = self.agent_exec.clone();
                self.log_after_reply(AllowedExec {
                    command: command_line(&path, &argv),
                    verdict: Verdict::Green,
                    rules: Vec::new(),
                    why: "the agent program".into(),
                    argv,
                    cwd,
                    pid: n.pid,
                    time: std::time::SystemTime::now(),
                    inner_command: None,
                });
                return Ok(ExecDecision::Continue(None));
            }
        }
        let mut r = self.read_exec(n)?;
        if let Err(errno) = exec::check_sizes(tgid, &r.argv, &r.envp) {
            // The kernel would fail it with E2BIG: answered here, before anything is decided
            // or rewritten for an exec that cannot happen.
            return Ok(ExecDecision::Errno(errno));
        }
        let file = match self.exec_file(n, &pidfd, tgid, &mut r) {
            Ok(f) => f,
            Err(errno) => return Ok(ExecDecision::Errno(errno)),
        };
        if !self.valid(n.id) {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        let role = self.role_of(tgid, &stat);
        let file_ids = file
            .as_ref()
            .map(|(_, ids)| ids.clone())
            .unwrap_or_default();
        // The image before the exec, read once and only where the exec changes the role.
        let mark = std::cell::OnceCell::new();
        let dir = r.dir.clone();
        let pending = |then: Role| Pending {
            tgid,
            stat,
            mark: (!exec::same_role(&role, &then))
                .then(|| *mark.get_or_init(|| exec::ImageMark::read(&dir, &file_ids))),
            now: role.clone(),
            then,
            files: file_ids.clone(),
            pidfd: Arc::clone(&pidfd),
        };
        let covered_env: &[(String, String)] = match &role {
            Role::Command(c) => &c.env,
            _ => &[],
        };
        // An agent with an installation sets its commands' environment itself (Claude Code's
        // `GIT_EDITOR=true`, its git probes' `GIT_CONFIG_*` hardening): the person's program
        // and its configuration, not the model's. A shell or interpreter named as the agent
        // is the model's own interpreter: what it sets is judged.
        let shell = file
            .as_ref()
            .and_then(|(real, _)| exec::StartupFiles::of(real, &r.argv));
        // What a cover made here allows its descendants: the code-running variables this
        // exec runs with.
        let env = exec::code_env(&r.envp);
        // A value naming only the person's code in roots the session cannot change
        // (rustup's `LD_LIBRARY_PATH`, npm's `EDITOR=vi`) is no assignment.
        let kept = exec::KeptRoots {
            readable: &self.readable,
            writable: &self.writable,
        };
        let judged = |covered: &[(String, String)]| {
            exec::drop_inert(
                exec::assignments_of(&env, &r.envp, &self.start_env, covered, shell.as_ref()),
                &r.envp,
                &kept,
            )
        };
        // The agent's own file, reached by a name no process of the session can change
        // between this check and the kernel's (no link in the worktree or scratch dir).
        let own_file = role.is_agent()
            && !exec::lexically_within(&r.raw_path, &r.cwd, &self.writable)
            && file.as_ref().is_some_and(|(real, _)| {
                self.install
                    .is_own_exec(real, &r.argv, &r.cwd, &self.writable)
            });
        if own_file && judged(&[]).is_empty() {
            // The agent's own re-launch keeps its identity only with the environment it
            // started with: `NODE_OPTIONS=--require x.js` makes it run other code.
            self.log_after_reply(AllowedExec {
                command: command_line(&r.path, &r.argv),
                verdict: Verdict::Green,
                rules: Vec::new(),
                why: "the agent's own runtime".into(),
                argv: r.argv.clone(),
                cwd: r.cwd.clone(),
                pid: n.pid,
                time: std::time::SystemTime::now(),
                inner_command: None,
            });
            return Ok(ExecDecision::Continue(Some(pending(Role::Agent))));
        }
        // The agent's copy of its own program (Codex copies its binary into `~/.codex/packages/`
        // and runs it from there): the installation file it is a byte-identical copy of is
        // what runs, through a descriptor tyba opened, so what the copy's name holds after this
        // check does not matter. The agent could have run that file itself with this argv and
        // environment: nothing it could not already do. A command's copy is a command.
        if role.is_agent() && !own_file && self.install.has_installation() && judged(&[]).is_empty()
        {
            if let Some((original, id, path)) = file
                .as_ref()
                .and_then(|(real, _)| self.installed_original(n, &pidfd, &r, real))
            {
                self.log_after_reply(AllowedExec {
                    command: command_line(&r.path, &r.argv),
                    verdict: Verdict::Green,
                    rules: Vec::new(),
                    why: format!(
                        "the agent's own program: a byte-identical copy of `{}`, run as that file",
                        path.display()
                    ),
                    argv: r.argv.clone(),
                    cwd: r.cwd.clone(),
                    pid: n.pid,
                    time: std::time::SystemTime::now(),
                    inner_command: None,
                });
                let files = vec![id];
                let mark = (!exec::same_role(&role, &Role::Agent))
                    .then(|| exec::ImageMark::read(&r.dir, &files));
                return Ok(ExecDecision::RunInstead(
                    original,
                    Pending {
                        tgid,
                        stat,
                        now: role.clone(),
                        then: Role::Agent,
                        files,
                        mark,
                        pidfd: Arc::clone(&pidfd),
                    },
                ));
            }
        }
        // tyba's own hook, as `tyba hook install` wrote it around this executable: tyba. The
        // argv is a label the caller picks: the file run must be a system shell, reached by a
        // name no process of the session can swap, with nothing in its environment that runs
        // code before the line (`BASH_ENV`, `LD_PRELOAD`, a login shell's `HOME`, an exported
        // function named `/bin/sh`). The agent's other variables (Claude Code's
        // `GIT_EDITOR`) reach only tyba's hook, which reads none of them.
        // Cheapest first: every shell command of the agent passes here.
        if role.is_agent()
            && file.as_ref().is_some_and(|(real, _)| is_system_shell(real))
            && self.proxy_exe.as_deref().is_some_and(|me| {
                crate::agent::is_own_hook(&r.argv, &r.cwd, &self.writable, &|exe| {
                    self.is_own_exe(n, &pidfd, exe, me)
                })
            })
            && !exec::lexically_within(&r.raw_path, &r.cwd, &self.writable)
            && !exec::shell_env_changed(&r.envp, &self.start_env)
        {
            self.control.count(Counted::Allowed);
            self.log_after_reply(AllowedExec {
                command: command_line(&r.path, &r.argv),
                verdict: Verdict::Green,
                rules: Vec::new(),
                why: "tyba's own hook".into(),
                argv: r.argv.clone(),
                cwd: r.cwd.clone(),
                pid: n.pid,
                time: std::time::SystemTime::now(),
                inner_command: None,
            });
            return Ok(ExecDecision::Continue(Some(pending(Role::Command(
                Arc::new(Cover {
                    line: r.argv.join(" "),
                    inner_command: None,
                    verdict: Verdict::Green,
                    rules: Vec::new(),
                    env: env.clone(),
                    hosts: Vec::new(),
                    granted: Vec::new(),
                    pushes: Vec::new(),
                    // tyba vouches for its own hook: its wrapper shell and `tyba hook` run.
                    accepted: true,
                    own_hook: true,
                }),
            )))));
        }
        // git's own transport of an approved push to a local repository: relayed, never
        // granted (`crate::push_relay`).
        if let Role::Command(c) = &role {
            let real = file.as_ref().map(|(real, _)| real.as_path());
            if let Some(d) = self.local_push_step(n, &pidfd, tgid, &r, real, c, &|| {
                judged(covered_env).is_empty()
            }) {
                return Ok(match d {
                    PushStep::Shell => {
                        ExecDecision::Continue(Some(pending(Role::Command(Arc::clone(c)))))
                    }
                    PushStep::Relay(relay) => ExecDecision::Relay(relay),
                    PushStep::Refuse(reason) => ExecDecision::Refuse(reason, None),
                });
            }
        }
        let assigns = if role.is_agent() && self.install.has_installation() && !own_file {
            Vec::new()
        } else {
            // For the agent's own file with a changed environment: shown and judged, since
            // the environment is what makes it a command.
            judged(covered_env)
        };
        // A name through the process's own fds or /proc entry (`/dev/fd/5`, `/proc/self/exe`)
        // says nothing of the program: the file it reaches is shown and classified.
        let shown = match &file {
            Some((real, _)) if exec::is_magic_name(&r.raw_path, r.raw_path.is_empty()) => {
                exec::exec_text(real.as_os_str().as_bytes())
            }
            _ => r.path.clone(),
        };
        let mut prefix = assigns.clone();
        if let Some(sh) = &shell {
            prefix.extend(sh.sourced.iter().map(|f| (String::new(), f.clone())));
        }
        // A system program outside the bin directories (`/usr/lib/gcc/…/cc1`,
        // `/usr/lib/git-core/git`) is also judged by its name: `git push` is git whatever its
        // directory. A command's descendant running one is the build's own work, not a path
        // it reaches: judged by the name only.
        let by_name = file
            .as_ref()
            .filter(|(real, _)| exec::is_system_program(real))
            .map(|(real, _)| name_line(real, &r.argv));
        // A program the person installed in a root the session cannot change (a system
        // root, a `read_only` toolchain: `/opt/rust/bin/cargo`, `~/.cargo/bin/cargo`) is the
        // program its name says when the exec was made by that bare name (`cargo`, found on
        // `PATH`: the person typed `cargo`), or by a command's descendant (the build's own
        // steps). Judged by the name the exec used, not the file a link reaches (rustup's
        // proxies are links to `rustup`, which takes its part from that name).
        let exec_path = std::path::Path::new(&r.path);
        let typed = r
            .argv
            .first()
            .is_some_and(|a0| !a0.contains('/') && exec_path.file_name() == Some(a0.as_ref()));
        // Only looked up where it decides something (a name typed, or a command's step):
        // `holds` resolves links.
        // The file is the person's or the system's: reached by an absolute name no process
        // of the session can change, in a root the session cannot write.
        let installed_file = exec_path.is_absolute()
            && !exec::lexically_within(&r.raw_path, &r.cwd, &self.writable)
            && file.as_ref().is_some_and(|(real, _)| kept.holds(real))
            && kept.holds(exec_path);
        let installed = (typed || matches!(role, Role::Command(_))) && installed_file;
        let relayed = (installed_file && r.shebang.is_empty())
            .then(|| self.relayed_installed_script(n, &pidfd, &r, &kept))
            .flatten();
        let typed_line = (installed && typed && !is_system_shell(exec_path))
            .then(|| name_line(exec_path, &r.argv));
        let by_name = match by_name {
            // The relayed script is the program: `bash SCRIPT` is no alternative.
            _ if relayed.is_some() => None,
            None if installed && matches!(role, Role::Command(_)) => {
                Some(name_line(exec_path, &r.argv))
            }
            b => b,
        };
        // The name typed first (`npm test`, although `/usr/bin/npm` is a link to
        // `npm-cli.js`); the name of the file a system program is stays an alternative.
        let own_line = match (&role, &by_name, typed_line) {
            _ if relayed.is_some() => {
                name_line(relayed.as_deref().unwrap_or(exec_path), &r.argv[1..])
            }
            (_, _, Some(t)) => t,
            (Role::Command(_), Some(l), None) => l.clone(),
            _ => command_line(&shown, &r.argv),
        };
        let command = exec::classified_line(&prefix, &own_line);
        // Pushes and aliases resolve against the repository (tyba-git-guard), like `tyba
        // classify`, on a worker confined to what the agent may read, under a deadline
        // (`crate::classify_worker`); its refusals fail closed.
        let file_id = file_ids.first().copied();
        let mut class = match self.classifier.classify(&command, &r.cwd, file_id) {
            Ok(c) => c,
            Err(reason) => return Ok(ExecDecision::Refuse(reason, None)),
        };
        // A program that takes what it does from its argv[0] (`git-clean`, busybox applets)
        // is also judged as what argv[0] names; the worse verdict wins.
        // A `#!` script is what the kernel runs: `INTERPRETER [ARG] SCRIPT ARGS…`, the
        // script by the name the exec passed (a `#!/usr/local/bin/git` file `push` run as
        // `push net main` is `git push net main`).
        // An installed script (`/usr/bin/which`, `zcat`, `ldd`, a version manager's shim in a
        // read-only toolchain root) is a program like an installed binary: its `#!` line was
        // written by whoever installed it, and what the agent chose is its name and argv, so it
        // is judged by its name (`which git`, not `sh /usr/bin/which git`, a script outside the
        // worktree). Its interpreter's identity still counts below (a `#!` line naming git).
        let installed_script = !r.shebang.is_empty()
            && (installed_file
                || file
                    .as_ref()
                    .is_some_and(|(real, _)| exec::is_system_program(real)));
        // The program the kernel runs under a name of the agent's is also judged by its own
        // name (review 31's r31-01: `ln -s /usr/bin/cp mycp; ./mycp src prod` passed for an
        // unlisted program, past the person's `blocked` rule on `cp … prod`, unasked under an
        // approved `make`): an installed file reached by a link or `/proc/self/fd/N`, or a
        // copy of a system program in a root the agent writes ([`exec::system_copy_of`]).
        // Names the installation chose (`/usr/bin/awk` reaching `mawk`) are judged as before.
        let reached_installed = file
            .as_ref()
            .and_then(|(real, _)| {
                if installed_file {
                    None
                } else if kept.holds(real) {
                    (real.file_name() != exec_path.file_name()).then(|| real.clone())
                } else {
                    exec::system_copy_of(real)
                }
            })
            .map(|program| name_line(&program, &r.argv))
            .filter(|l| *l != own_line && Some(l) != by_name.as_ref());
        let alts = argv0_line(&shown, &r.argv)
            .into_iter()
            .chain(shebang_line(&r.shebang, &r.path, &r.argv).filter(|_| !installed_script))
            .chain(r.shebang_real.as_ref().and_then(|interp| {
                // The interpreter run with the argv the kernel builds: a link or copy of git
                // as the interpreter is git.
                let argv: Vec<String> = r
                    .shebang
                    .iter()
                    .cloned()
                    .chain(std::iter::once(r.path.clone()))
                    .chain(r.argv.iter().skip(1).cloned())
                    .collect();
                multi_call_line(interp, &argv)
            }))
            .chain(
                file.as_ref()
                    .and_then(|(real, _)| multi_call_line(real, &r.argv))
                    .filter(|l| *l != own_line),
            )
            .chain(by_name.filter(|l| *l != own_line))
            .chain(reached_installed);
        for alt in alts {
            let alt = exec::classified_line(&prefix, &alt);
            match self.classifier.classify(&alt, &r.cwd, file_id) {
                Ok(c) => class.merge(c),
                Err(reason) => return Ok(ExecDecision::Refuse(reason, None)),
            }
        }
        // A push is resolved (tyba-git-guard) with the person's configuration files, but git
        // reads `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config` from the environment it runs
        // with: one the session did not start with (`export HOME=$PWD/h; git push net`, or a
        // script's own `HOME=`) can hold a `remote.*.push` to `main` or a `core.hooksPath`.
        // So every git exec that may push (a push, an alias that configuration defines, git's
        // dashed `git-push`) is judged with those variables on its line, where the policy blocks it with a moved
        // home or configuration directory. Only those: a test suite's own `HOME` for its
        // `git init` moves nothing of the person's.
        let real = file.as_ref().map(|(real, _)| real.as_path());
        if exec::git_may_push(&r.path, real, &r.argv) {
            let moved = exec::config_moves(&r.envp, &self.start_env, &r.cwd);
            if !moved.is_empty() {
                let with: Vec<(String, String)> = moved.into_iter().chain(prefix.clone()).collect();
                let alt = exec::classified_line(&with, &own_line);
                match self.classifier.classify(&alt, &r.cwd, file_id) {
                    Ok(c) => class.merge(c),
                    Err(reason) => return Ok(ExecDecision::Refuse(reason, None)),
                }
            }
        }
        let rules = decisive_rules(&class);
        // The pushes to local repositories an approval would relay (`crate::push_relay`).
        let local_pushes = push_relay::approved(&class, &self.agent_writes);
        // An approval covers the connections and lookups of the hosts its line names (the
        // policy's hosts of network clients); an allow without asking covers none.
        let new_cover = |command: &str, hosts: &[String], approved: bool| {
            Arc::new(Cover {
                line: command.to_string(),
                inner_command: class.inner_command.clone(),
                verdict: class.verdict,
                rules: rules.clone(),
                env: env.clone(),
                hosts: hosts.to_vec(),
                granted: if approved {
                    runner::grants(&class, &self.writable, &self.readable)
                } else {
                    Vec::new()
                },
                pushes: if approved {
                    local_pushes.clone()
                } else {
                    Vec::new()
                },
                accepted: approved || class.verdict >= Verdict::Yellow,
                own_hook: false,
            })
        };
        // Only a command someone accepted covers its descendants (`Cover::accepted`): one the
        // person approved, a yellow or red one the autonomy level let run, tyba's own hook.
        // A green command was accepted by nobody: what it starts (a pager, an fsmonitor, a hook the repository's
        // configuration names, which the agent may have written) is judged as if the agent
        // had started it itself.
        if let Some(c) = match &role {
            Role::Command(c) if c.accepted => Some(c),
            _ => None,
        } {
            // A build's own steps name the system's files (`ld … /usr/lib/…/crt1.o`): reading
            // what the agent's domain reads anyway is no reach outside for a command's
            // descendant; Landlock holds the line. Writing outside still is.
            // Why a red one passes unasked, for the log: each is a part of what the approval
            // of `c` covers (docs/sandbox.md, "What a command can do").
            let red_why = if class.verdict != Verdict::Red {
                None
            } else if self.reads_only_what_the_domain_reads(&class) {
                Some("red only for reading what the agent's own domain reads")
            } else if within_the_grants(&class, &c.granted) {
                Some("red only for paths that approval granted")
            } else if c.verdict >= Verdict::Yellow && self.loads_only_session_code(&class, &assigns)
            {
                Some(
                    "red only for a code-running variable naming the session's and the system's files, under an approved command that runs such code anyway",
                )
            } else {
                None
            };
            let verdict = if red_why.is_some() {
                Verdict::Yellow
            } else {
                class.verdict
            };
            return Ok(match exec::covered(verdict, &rules, c) {
                Covered::Pass => {
                    self.control.count(Counted::Allowed);
                    let red_why = match (red_why, class.verdict) {
                        (Some(w), _) => format!(": {w}"),
                        (None, Verdict::Red) => ", approved red for the same rules".to_string(),
                        _ => String::new(),
                    };
                    self.log_after_reply(AllowedExec {
                        command: command.clone(),
                        verdict: class.verdict,
                        rules: rules.clone(),
                        why: format!("under the approved command `{}`{red_why}", c.shown()),
                        argv: r.argv.clone(),
                        cwd: r.cwd.clone(),
                        pid: n.pid,
                        time: std::time::SystemTime::now(),
                        inner_command: class.inner_command.clone(),
                    });
                    ExecDecision::Continue(Some(pending(Role::Command(exec::narrowed(
                        c,
                        &class.hosts,
                    )))))
                }
                Covered::Refuse => {
                    ExecDecision::Refuse(refusal_text(&class), class.inner_command.clone())
                }
                Covered::Ask => {
                    let first = format!("started by the approved command `{}`", c.shown());
                    let (argv, cwd) = (r.argv.clone(), r.cwd.clone());
                    let (mut reasons, copy) = self.ask_parts(&class, Some(first), r);
                    let exec = ExecAsk {
                        argv,
                        cwd,
                        env: assigns.clone(),
                        inner_command: class.inner_command.clone(),
                        reach: exec_reach(&class, copy.as_ref()),
                    };
                    reasons.extend(push_relay::ask_reasons(&local_pushes));
                    let cover = new_cover(&command, &class.hosts, true);
                    ExecDecision::Ask(Box::new(PendingAsk {
                        req: AskRequest {
                            kind: AskKind::Command {
                                command: command.clone(),
                            },
                            verdict: class.verdict,
                            reasons,
                            rememberable: false,
                            pid: n.pid,
                            exec: Some(exec),
                        },
                        key: None,
                        copy,
                        pending: pending(Role::Command(Arc::clone(&cover))),
                        cover,
                    }))
                }
            });
        }
        // git's own pager for a green git command on a terminal (`git log`): `less` or `more`
        // of the system, exec'd bare (git's default when no `core.pager`, `GIT_PAGER` or
        // `PAGER` names another program; a configured one is a line, judged above as the
        // agent's own), with the pager's own variables as the session started (git sets
        // `LESS=FRX` and `LV=-c` when they are unset). It pages the green command's output:
        // part of that command, not a program run on the agent's behalf.
        // An exec that is part of the green command `c` (git's pager, the person's own git
        // program): allowed under it, and logged with `why`.
        let part_of = |c: &Arc<Cover>, why: String| {
            self.control.count(Counted::Allowed);
            self.log_after_reply(AllowedExec {
                command: command.clone(),
                inner_command: None,
                verdict: class.verdict,
                rules: rules.clone(),
                why,
                argv: r.argv.clone(),
                cwd: r.cwd.clone(),
                pid: n.pid,
                time: std::time::SystemTime::now(),
            });
            ExecDecision::Continue(Some(pending(Role::Command(Arc::clone(c)))))
        };
        if let (Role::Command(c), Some((real, _))) = (&role, &file) {
            if !c.accepted
                && is_gits_default_pager(&c.line, real, &r.argv)
                && exec::pager_env_unchanged(&r.envp, &self.start_env)
            {
                return Ok(part_of(
                    c,
                    format!("git's own pager, for the green command `{}`", c.shown()),
                ));
            }
        }
        // A program the person's own git configuration names (`core.pager = delta`,
        // `diff.external = difft`, in `~/.gitconfig`, which no process of the session can
        // change), run by a green git command in the shape git runs it, by a name no process
        // of the session can swap, with no code-running variable changed: part of that
        // command, as the person set git up, not a program run on the agent's behalf. The
        // value must be the very one configured: a repository's `core.pager` (the agent's to
        // write) naming another program, or the same with other arguments, is judged above.
        // Never a blocked one.
        if let (Role::Command(c), Some((real, _))) = (&role, &file) {
            let shell = is_system_shell(real);
            let reached = if shell {
                !exec::lexically_within(&r.raw_path, &r.cwd, &self.writable)
                    && !exec::shell_env_changed(&r.envp, &self.start_env)
            } else {
                installed_file
            };
            let found = (!c.accepted
                && class.verdict != Verdict::Blocked
                && runs_git(&c.line)
                && reached
                && assigns.is_empty())
            .then(|| exec::persons_git_program(&self.person_git, &r.argv, shell))
            .flatten()
            .filter(|p| {
                p.kind != exec::GitProgramKind::Pager
                    || exec::pager_env_unchanged(&r.envp, &self.start_env)
            });
            if let Some(p) = found {
                return Ok(part_of(
                    c,
                    format!(
                        "the person's own program for git ({}), run by git for the green command `{}`",
                        p.origin,
                        c.shown()
                    ),
                ));
            }
        }
        let s = self
            .state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let decision = decide(
            &class,
            ActionKind::Command,
            &command,
            self.control.autonomy(),
            self.mode,
            &s.memory,
        );
        drop(s);
        // A probe inside a line of the agent's own shell (`ps aux | grep -E "code|…"`) counts
        // when every other command of the line is green by itself.
        let green = |words: &[String]| {
            let line = words
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" ");
            self.classifier
                .classify(&line, &r.cwd, None)
                .is_ok_and(|c| c.verdict == Verdict::Green)
        };
        if let Some(q) = self
            .install
            .quiet_probe(&r.argv, &command, &decision, &green)
        {
            // A look at the session's own processes, exec'd as itself (not inside a shell
            // line): answered from the sandbox's /proc, nothing runs; else refused quietly.
            if q.decision == tyba_policy::agents::ProbeDecision::AnswerOwnProcesses {
                if let Some((out, code)) = self.answer_own_processes(&r.argv) {
                    return Ok(ExecDecision::Answer {
                        out,
                        code,
                        reason: format!(
                            "answered by tyba from the sandbox's own /proc, nothing ran: {} (a known start-up probe of {}, `{}` in its profile)",
                            q.reason, q.agent, q.probe
                        ),
                    });
                }
            }
            return Ok(ExecDecision::Quiet(format!(
                "refused quietly by tyba: {} (a known start-up probe of {}, `{}` in its profile)",
                q.reason, q.agent, q.probe
            )));
        }
        match decision {
            Decision::Allow => {
                self.control.count(Counted::Allowed);
                self.log_after_reply(AllowedExec {
                    command: command.clone(),
                    verdict: class.verdict,
                    rules: rules.clone(),
                    why: "allowed".into(),
                    argv: r.argv.clone(),
                    cwd: r.cwd.clone(),
                    pid: n.pid,
                    time: std::time::SystemTime::now(),
                    inner_command: class.inner_command.clone(),
                });
                Ok(ExecDecision::Continue(Some(pending(Role::Command(
                    new_cover(&command, &[], false),
                )))))
            }
            Decision::Refuse { reason } => {
                Ok(ExecDecision::Refuse(reason, class.inner_command.clone()))
            }
            Decision::Ask(a) => {
                let (argv, cwd) = (r.argv.clone(), r.cwd.clone());
                let (mut reasons, copy) = self.ask_parts(&class, None, r);
                let exec = ExecAsk {
                    argv,
                    cwd,
                    env: assigns.clone(),
                    inner_command: class.inner_command.clone(),
                    reach: exec_reach(&class, copy.as_ref()),
                };
                reasons.extend(push_relay::ask_reasons(&local_pushes));
                let cover = new_cover(&command, &class.hosts, true);
                Ok(ExecDecision::Ask(Box::new(PendingAsk {
                    req: AskRequest {
                        kind: AskKind::Command {
                            command: command.clone(),
                        },
                        verdict: a.verdict,
                        reasons,
                        rememberable: a.rememberable.is_some(),
                        pid: n.pid,
                        exec: Some(exec),
                    },
                    key: a.rememberable,
                    copy,
                    pending: pending(Role::Command(Arc::clone(&cover))),
                    cover,
                })))
            }
        }
    }

    /// Whether `class` is red only for naming, without writing them, paths outside the
    /// worktree that the agent's Landlock domain may read anyway (system paths, paths the
    /// policy opens).
    /// Whether `class` is red only for code-running variables (`assigns`, DESIGN.md §2a) whose
    /// values are paths of the agent's own domain (and for naming such paths): each entry
    /// absolute, with no `..`, in a writable or readable root both as named and resolved (cargo's `LD_LIBRARY_PATH` of
    /// `target/debug/deps` and the toolchain's `lib` for each `rustc` and test binary it
    /// starts). A descendant of an approved yellow or red command may run the worktree's
    /// code anyway (a yellow descendant passes under it: `./build.sh`), so such a value gives
    /// it nothing more; under a green cover, or with a value that is a command line, a path
    /// outside, `/proc`, or unknown, it stays red.
    fn loads_only_session_code(
        &self,
        class: &Classification,
        assigns: &[(String, String)],
    ) -> bool {
        let kept = exec::KeptRoots {
            readable: &self.readable,
            writable: &self.writable,
        };
        let holds = |entry: &str| kept.in_domain(std::path::Path::new(entry));
        class.verdict == Verdict::Red
            && !assigns.is_empty()
            && class
                .findings
                .iter()
                .filter(|f| f.verdict == Verdict::Red)
                .all(|f| {
                    f.rule == tyba_policy::rules::ENV_EXEC_VARIABLE.id
                        || f.rule == tyba_policy::rules::PATH_OUTSIDE_WORKTREE.id
                })
            && assigns.iter().all(|(_, v)| {
                let entries: Vec<&str> = v.split([':', ' ']).filter(|e| !e.is_empty()).collect();
                !entries.is_empty() && entries.iter().all(|e| holds(e))
            })
            && self.reads_only_within_the_domain(class)
    }

    /// Whether every path `class` names lies in the agent's own domain and every write in a
    /// writable root.
    fn reads_only_within_the_domain(&self, class: &Classification) -> bool {
        let under = |p: &std::path::Path, roots: &[PathBuf]| roots.iter().any(|r| p.starts_with(r));
        class.writes.iter().all(|w| under(w, &self.writable))
            && class
                .paths
                .iter()
                .all(|p| under(p, &self.writable) || under(p, &self.readable))
    }

    fn reads_only_what_the_domain_reads(&self, class: &Classification) -> bool {
        class.verdict == Verdict::Red
            && class
                .findings
                .iter()
                .filter(|f| f.verdict == Verdict::Red)
                .all(|f| f.rule == tyba_policy::rules::PATH_OUTSIDE_WORKTREE.id)
            && self.reads_only_within_the_domain(class)
    }

    /// The reasons an exec's ask shows (`first`, then the classification's decisive ones,
    /// then the grants), and the supervisor's copy of the exec when approving it grants paths
    /// outside the agent's domain (it then runs in a domain of its own, `crate::runner`).
    fn ask_parts(
        &self,
        class: &Classification,
        first: Option<String>,
        r: ExecRead,
    ) -> (Vec<String>, Option<ExecCopy>) {
        let served = |p: &std::path::Path| self.outside.as_ref().is_some_and(|o| o.serves(p));
        let mut all = runner::grants(class, &self.writable, &self.readable);
        // Where no server judges each request, a grant to write (or make) a path that is or
        // holds tyba's own configuration, state, sockets or run directories would reach them
        // through its Landlock rule: never given, whatever is approved (review 20's r20-01: an
        // approved `git clone X ~/.config` with no `~/.config` yet wrote tyba's policy).
        let own: Vec<std::path::PathBuf> = all
            .iter()
            .filter(|g| g.write || g.new_file || g.new_dirs.is_some() || g.new_tree)
            .filter(|g| !served(&g.path) && self.reaches_tybas_own(&g.path))
            .map(|g| g.path.clone())
            .collect();
        all.retain(|g| !own.contains(&g.path));
        let (grants, cannot) = runner::served_changes(all, served);
        let mut reasons: Vec<String> = first.into_iter().collect();
        reasons.extend(class.decisive_reasons().iter().map(|r| r.to_string()));
        if !own.is_empty() {
            let list: Vec<String> = own.iter().map(|p| p.display().to_string()).collect();
            reasons.push(format!(
                "if approved, it still cannot write {}: it is or holds tyba's own configuration or state",
                list.join(", ")
            ));
        }
        if !cannot.is_empty() {
            let list: Vec<String> = cannot.iter().map(|p| p.display().to_string()).collect();
            reasons.push(format!(
                "if approved, it still cannot make, remove or rename {}: there only tyba's outside-files server can grant one name, and it does not serve it (that step fails with a permission error)",
                list.join(", ")
            ));
        }
        if grants.is_empty() {
            return (reasons, None);
        }
        let list: Vec<String> = grants.iter().map(|g| g.to_string()).collect();
        reasons.push(format!(
            "if approved, it runs in a sandbox domain of its own that adds: {}",
            list.join("; ")
        ));
        let copy = ExecCopy {
            path: r.path,
            argv: r.argv,
            envp: r.envp,
            grants,
        };
        (reasons, Some(copy))
    }

    /// The role of process `tgid` ([`crate::exec::ProcTable::role_of`]); a process under a
    /// runner keeper is the approved command that keeper runs.
    /// Who process `tgid` is now, to the outside-files server (`crate::outside_fs::Asker`):
    /// the agent's own runtime is the agent program when the agent has an installation, else
    /// the model's interpreter; a process under tyba's own hook is the hook; any other is a
    /// command (an unreadable one too).
    pub(crate) fn outside_asker(&self, tgid: u32) -> crate::outside_fs::Asker {
        use crate::outside_fs::Asker;
        let Ok(st) = procfs::stat_ext(tgid) else {
            return Asker::Command;
        };
        match self.role_of(tgid, &st) {
            Role::Agent if self.install.has_installation() => Asker::AgentProgram,
            Role::Agent => Asker::AgentInterpreter,
            Role::Command(c) if c.own_hook => Asker::OwnHook,
            Role::Command(_) | Role::Stray => Asker::Command,
        }
    }

    /// The role of process `tgid` now, to the outside-files server (its grants hold while the
    /// process keeps the role they were made in); `None` when it cannot be read.
    pub(crate) fn outside_role(&self, tgid: u32) -> Option<Role> {
        let st = procfs::stat_ext(tgid).ok()?;
        Some(self.role_of(tgid, &st))
    }

    /// Logs a quiet refusal of the outside-files server as the session's own: in the audit
    /// log, the end summary's quiet refusals and the session's denied count, as a probe's
    /// (never the repeated-failure guard's: [`AuditEvent::is_quiet`]).
    pub(crate) fn log_quiet(&self, e: AuditEvent) {
        self.control.count(Counted::Denied);
        self.log(e);
    }

    fn role_of(&self, tgid: u32, stat: &procfs::Stat) -> Role {
        let Ok(mut s) = self.state.lock() else {
            return Role::Stray;
        };
        let State { procs, runners, .. } = &mut *s;
        let keeper = |pid: u32, start: u64| -> Option<Role> {
            if runners.is_empty() {
                return None;
            }
            let ns = procfs::ns_pid(pid)?;
            match runners.get(&ns) {
                Some((st, c)) if *st == start => Some(Role::Command(Arc::clone(c))),
                _ => None,
            }
        };
        procs.role_of(tgid, stat, self.stage2, &keeper)
    }

    /// Refuses an exec: logs and counts it, then makes the process run tyba's refusal
    /// program (the proxy told to refuse, `crate::proxy`), which prints `tyba: <reason>` on
    /// its stderr and exits 126, so a caller that spawned it sees why. Where the exec's file
    /// name cannot be rewritten safely, the exec fails with EACCES and the reason is written
    /// to the process's stderr instead.
    fn refuse_exec(&self, n: &Notif, what: String, reason: String) {
        self.refuse_exec_as(n, "exec", what, None, reason)
    }

    /// [`Self::refuse_exec`], logged as an event of `kind`, with the command behind the
    /// agent's wrapper when the line has one ([`AuditEvent::inner_command`]).
    fn refuse_exec_as(
        &self,
        n: &Notif,
        kind: &'static str,
        what: String,
        inner: Option<String>,
        reason: String,
    ) {
        let reason = self.record_refusal(kind, what, inner, reason);
        // The rewrite of the file name can be raced by another thread sharing the process's
        // memory; only the agent's own runtime (whose power it would not widen) may have one.
        let racers_trusted = procfs::tgid(n.pid)
            .and_then(|t| procfs::stat_ext(t).map(|st| (t, st)))
            .is_ok_and(|(t, st)| self.role_of(t, &st).is_agent());
        let loader_env = self
            .read_exec(n)
            .map(|r| {
                r.envp
                    .iter()
                    .any(|e| e.starts_with(b"LD_") || e.starts_with(b"GCONV_PATH="))
            })
            .unwrap_or(true);
        // What the refused process runs next, watched from outside: its image before, and
        // the refusal program's.
        let watch = procfs::tgid(n.pid).ok().and_then(|t| {
            let pidfd = sys::pidfd_open(t as i32).ok()?;
            Some((t, pidfd, procfs::exe_id(t)))
        });
        let proxy_id = self.proxy_exe.as_ref().and_then(|p| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
        });
        // The watch runs on a thread started before anything is installed: a process whose
        // watch cannot start is refused with EACCES below instead.
        let watcher = Waiting::start();
        let installed = match &watcher {
            Some(_) => self.install_proxy(n, racers_trusted, true, loader_env),
            None => Err(
                "the supervisor cannot start a thread (the user's process limit is reached)".into(),
            ),
        };
        match installed {
            Ok(mut installed) => {
                // The refusal is queued before the process runs again, and the supervisor's end
                // closed: the refusal program reads it however late it starts (`crate::proxy`).
                let msg = format!("r{}", shorten(&reason, crate::proxy::MAX_REASON));
                let _ = nix::sys::socket::send(
                    installed.chan.as_raw_fd(),
                    msg.as_bytes(),
                    nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                );
                self.reply(n.id, Reply::Continue);
                installed.continued();
                drop(installed);
                if let Some(w) = watcher {
                    w.run(move || {
                        if let (Some((t, pidfd, before)), Some(proxy)) = (&watch, proxy_id) {
                            kill_unless_refusal_program(*t, pidfd, *before, proxy);
                        }
                    });
                }
            }
            Err(_) => {
                if let Some(child) = self.vfork_child(n) {
                    // A vfork/posix_spawn child whose file name cannot be rewritten (too
                    // short for the refusal program's name, or its parent's other threads
                    // share the memory): failing its exec makes the caller raise
                    // `Permission denied` and drop what the child wrote. It is ended instead,
                    // once its stderr says why: the spawn succeeds, and the caller reads the
                    // reason from the child's output (its status: killed by SIGKILL). Told
                    // by the teller, which never waits on a full pipe on its stderr; the
                    // child is killed once it is written or dropped.
                    let kill = move |c: OwnedFd| {
                        let _ = sys::pidfd_send_signal(c.as_fd(), libc::SIGKILL);
                    };
                    match sys::pidfd_getfd(child.as_fd(), 2) {
                        Ok(fd) => {
                            crate::teller::tell_fd(fd, &reason, Some(Box::new(move || kill(child))))
                        }
                        Err(_) => kill(child),
                    }
                    return;
                }
                write_stderr(n.pid, &reason);
                self.reply(n.id, Reply::Errno(libc::EACCES));
            }
        }
    }

    /// The answer to a process-table look `argv` at the session's own processes
    /// ([`crate::ps_answer`]), read from the sandbox's private `/proc` through the sandbox's
    /// root: (stdout, exit status); `None` for any other form or an unreadable `/proc`.
    fn answer_own_processes(&self, argv: &[String]) -> Option<(String, i32)> {
        let q = crate::ps_answer::parse(argv)?;
        let clock = crate::ps_answer::Clock::system()?;
        let root = self.root.as_ref()?;
        let proc_dir = format!("/proc/self/fd/{}/proc", root.as_raw_fd());
        crate::ps_answer::answer(&q, &clock, &|pid| {
            std::fs::read_to_string(format!("{proc_dir}/{pid}/stat")).ok()
        })
    }

    /// Answers an exec in place of running it: logs it as a `probe` that did not run, makes
    /// the process run tyba's refusal program (as [`Self::refuse_exec_as`]), writes `out` to
    /// the process's own stdout (taken before the program replaces it with `/dev/null`) and
    /// makes the program exit with `code`. Where the program cannot be installed, the exec is
    /// refused quietly instead.
    fn answer_exec(&self, n: &Notif, what: String, out: String, code: i32, reason: String) {
        let stdout = procfs::tgid(n.pid)
            .and_then(|t| sys::pidfd_open(t as i32))
            .and_then(|p| sys::pidfd_getfd(p.as_fd(), 1));
        let racers_trusted = procfs::tgid(n.pid)
            .and_then(|t| procfs::stat_ext(t).map(|st| (t, st)))
            .is_ok_and(|(t, st)| self.role_of(t, &st).is_agent());
        let loader_env = self
            .read_exec(n)
            .map(|r| {
                r.envp
                    .iter()
                    .any(|e| e.starts_with(b"LD_") || e.starts_with(b"GCONV_PATH="))
            })
            .unwrap_or(true);
        // Only the agent's own runtime is answered (the probe is its own exec), and only with
        // no loader variable: the program then keeps the exec's environment, which it must,
        // since the agent spawns these from threads sharing the memory of the environment
        // (a vfork/posix_spawn child), as for the agent's copy of its own program.
        let cannot =
            |why: &str| format!("refused quietly by tyba: it could not be answered ({why})");
        // The answer is written on a thread started before anything is installed (the
        // process's stdout may be a pipe nobody reads yet).
        let Some(writer) = Waiting::start() else {
            let reason = cannot("the supervisor cannot start a thread");
            return self.refuse_exec_as(n, "probe", what, None, reason);
        };
        let installed = match stdout {
            Ok(_) if !racers_trusted => Err("not the agent's own process".to_string()),
            Ok(_) if loader_env => Err("its environment sets loader variables".to_string()),
            Ok(out_fd) => self
                .install_proxy(n, racers_trusted, false, loader_env)
                .map(|i| (i, out_fd)),
            Err(e) => Err(e.to_string()),
        };
        let (mut installed, out_fd) = match installed {
            Ok(v) => v,
            Err(why) => return self.refuse_exec_as(n, "probe", what, None, cannot(&why)),
        };
        let _ = self.record_refusal("probe", what, None, reason);
        self.reply(n.id, Reply::Continue);
        installed.continued();
        // The output is written first, then the status sent: the program ends only once
        // its output is in place. It need not have started yet: the status is queued.
        writer.run(move || {
            let mut f = std::fs::File::from(out_fd);
            let status = if f.write_all(out.as_bytes()).is_ok() {
                code
            } else {
                1
            };
            drop(f);
            let msg = format!("x{status}");
            let _ = nix::sys::socket::send(
                installed.chan.as_raw_fd(),
                msg.as_bytes(),
                nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            );
        });
    }

    /// A pidfd of the process of `n` when it is a vfork child (it shares its parent's
    /// address space: `vfork(2)`, `posix_spawn(3)`, `clone(CLONE_VM)`) still waiting in this
    /// notification.
    fn vfork_child(&self, n: &Notif) -> Option<OwnedFd> {
        let tgid = procfs::tgid(n.pid).ok()?;
        let pidfd = sys::pidfd_open(tgid as i32).ok()?;
        let st = procfs::stat_of(pidfd.as_fd(), tgid).ok()?;
        let shared = sys::same_address_space(tgid, st.ppid).ok()?;
        // Valid still: the pidfd is of the process the notification is from.
        (shared && self.valid(n.id)).then_some(pidfd)
    }

    /// Makes the exec of `n` run tyba's own executable as a proxy: injects it at fd 3 and a
    /// channel at fd [`crate::proxy::CHANNEL_FD`], and rewrites the exec's file name to
    /// [`crate::proxy::PROXY_EXEC_FN`], where that changes nothing but this exec. The caller
    /// replies `Continue`.
    ///
    /// # Errors
    /// Why it cannot (an unreadable executable, a file name too short in shared memory, …).
    fn install_proxy(
        &self,
        n: &Notif,
        racers_trusted: bool,
        empty_env: bool,
        loader_env: bool,
    ) -> Result<InstalledProxy, String> {
        let exe = self
            .proxy_exe
            .as_ref()
            .and_then(|p| std::fs::File::open(p).ok())
            .ok_or_else(|| "tyba's own executable is unreadable".to_string())?;
        let tgid = procfs::tgid(n.pid).map_err(|e| e.to_string())?;
        let execveat = i64::from(n.nr) == libc::SYS_execveat;
        if execveat && n.args[4] & libc::AT_SYMLINK_NOFOLLOW as u64 != 0 {
            return Err("execveat with AT_SYMLINK_NOFOLLOW".into());
        }
        // Where the exec's file name is, and whether rewriting it changes nothing else.
        let name_ptr = if execveat { n.args[1] } else { n.args[0] };
        let new_name = format!("{}\0", crate::proxy::PROXY_EXEC_FN).into_bytes();
        let mem = Mem::open_rw(n.pid).map_err(|e| e.to_string())?;
        let mut old_name = mem
            .read_cstr(name_ptr, libc::PATH_MAX as usize)
            .map_err(|e| e.to_string())?;
        old_name.push(0);
        // A vfork/posix_spawn child shares its parent's memory (and that one its own vfork
        // parent's): the rewrite lands in their copy of the name too, given back while the
        // nearest is held ([`crate::hold`]); the others wait in their vfork.
        let chain = vfork_chain(tgid);
        let shares_with_parent = chain.first().copied();
        let one_thread = procfs::threads(tgid) == Some(1);
        let alone = one_thread && chain.is_empty();
        // Every process sharing the memory has one thread, each waiting in its vfork but the
        // exec's own: nothing can run on the memory between the rewrite and the kernel's read.
        let chain_single = chain.iter().all(|&p| procfs::threads(p) == Some(1));
        let single = one_thread && chain_single;
        if !single && !racers_trusted {
            return Err("another thread shares its memory".into());
        }
        // A refusal's rewrite in memory shared with a process that has other threads running
        // is visible to them: they could write the name back before the kernel reads it (and
        // run what was refused), or a program that cached the path it spawns would spawn
        // `/dev/fd/3` next. Refused with EACCES instead.
        if empty_env && !chain_single {
            return Err(
                "other threads of a process sharing the memory of its file name run".into(),
            );
        }
        if old_name.len() < new_name.len() && !alone {
            return Err(format!(
                "its file name is shorter than {} bytes and its process shares memory; run it by its full path",
                new_name.len() - 1
            ));
        }
        if !procfs::private_mapping(tgid, name_ptr, new_name.len() as u64) {
            return Err("its file name is not in private memory".into());
        }
        // A refusal program starts with no environment: the refused command's `LD_PRELOAD`
        // or `LD_LIBRARY_PATH` would load its code into tyba's own executable. Its `envp[0]`
        // is emptied where the memory is the process's own; a vfork parent's cannot be
        // written (it resumes, and may free it, as soon as the exec is done), so a refused
        // exec whose environment names loader variables then falls back to EACCES.
        let envp_ptr = if execveat { n.args[3] } else { n.args[2] };
        let clear_env = empty_env && envp_ptr != 0 && shares_with_parent.is_none();
        if empty_env && shares_with_parent.is_some() && loader_env {
            return Err("its environment loads code and lives in its parent's memory".into());
        }
        if clear_env && !procfs::private_mapping(tgid, envp_ptr, 8) {
            return Err("its environment is not in private memory".into());
        }
        let (sup, prox) = sys::seqpacket_pair().map_err(|e| e.to_string())?;
        // Held before anything is written: from then on the parent runs only once its name
        // is back ([`crate::hold`]).
        let hold = shares_with_parent
            .map(|pp| ParentHold::start(pp, tgid))
            .transpose()?;
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
            .map_err(|e| format!("installing its proxy: {e}"))?;
        drop(prox);
        if clear_env {
            mem.write(envp_ptr, &[0u8; 8])
                .map_err(|e| format!("installing its proxy: {e}"))?;
        }
        mem.write(name_ptr, &new_name)
            .map_err(|e| format!("installing its proxy: {e}"))?;
        Ok(InstalledProxy {
            chan: sup,
            hold: hold.map(|h| {
                (
                    h,
                    NameBack {
                        child: tgid,
                        name_ptr,
                        old_name,
                        new_name,
                    },
                )
            }),
        })
    }

    /// Runs an approved exec in a Landlock domain of its own (`crate::runner`): forks the
    /// runner through stage 2, turns the asking process into its proxy, relays the end.
    /// Replies to the notification itself, except on `Err` (the refusal reason).
    fn run_approved(&self, n: &Notif, c: ExecCopy, cover: Arc<Cover>) -> Result<(), String> {
        let cannot = |why: String| {
            format!("approved, but tyba cannot run it in its own sandbox domain: {why}")
        };
        let tgid = procfs::tgid(n.pid).map_err(|e| cannot(e.to_string()))?;
        let (fds, cwd) = runner::inherited(tgid).map_err(cannot)?;
        // A new file is granted as that one name: served by the outside-files server, which
        // lets the runner's tree make and write it only; elsewhere made now, so that the
        // Landlock rule is on the file and never on its directory.
        runner::prepare_new_files(&c.grants, |dir| {
            self.outside.as_ref().is_some_and(|o| o.serves(dir))
        })
        .map_err(|e| cannot(e.to_string()))?;
        let outside_grants: Vec<crate::outside_fs::RunnerGrant> =
            c.grants.iter().map(runner::Grant::outside).collect();
        let spawn = Spawn {
            payload: SpawnPayload {
                // The bytes the process gave, escapes and all (`exec::exec_text`).
                path: exec::exec_bytes(&c.path),
                argv: c.argv.iter().map(|a| exec::exec_bytes(a)).collect(),
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
                if s.runners.get(&ns_pid).map(|(st, _)| *st) == Some(start) {
                    s.runners.remove(&ns_pid);
                }
            }
            if let Some(o) = &self.outside {
                o.runner_ended(ns_pid, start);
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
            s.runners.insert(ns_pid, (start, cover));
        }
        if let Some(o) = &self.outside {
            o.runner_started(ns_pid, start, outside_grants);
        }
        let pidfd = sys::pidfd_open(tgid as i32).map_err(|e| abort(e.to_string()))?;
        let mut installed = self.install_proxy(n, true, false, false).map_err(abort)?;
        self.reply(n.id, Reply::Continue);
        installed.continued();
        if !runner::proxy_started(&installed.chan, pidfd.as_fd()) {
            let reason = abort("its proxy did not start".into());
            self.log(AuditEvent {
                kind: "exec",
                what: "(approved command)".into(),
                allowed: false,
                reason: Some(reason),
                inner_command: None,
                quiet: false,
            });
            return Ok(());
        }
        self.stage.send(&ToStage::Go { id });
        runner::relay(&self.stage, id, installed.chan, &rx);
        // A runner that ended before its exec must not leave its pid to a later process.
        unregister();
        Ok(())
    }

    /// Whether process `pid` is the agent's own runtime ([`crate::exec::Role::Agent`]).
    fn is_agent(&self, pid: ProcId) -> bool {
        self.role_now(pid).is_some_and(|r| r.is_agent())
    }

    /// The role of process `pid` now, `None` when it is gone or another process took its pid.
    fn role_now(&self, pid: ProcId) -> Option<Role> {
        match procfs::stat_ext(pid.pid) {
            Ok(st) if st.start == pid.start => Some(self.role_of(pid.pid, &st)),
            _ => None,
        }
    }

    /// The host of `cover`'s approved line that destination `a` is, if any: an entry with
    /// `a`'s port (the line's explicit port or its scheme's default, see the policy's
    /// `hosts`) whose host is an IP literal with `a`'s address, or a name that resolved to
    /// `a`'s address through the relay or when the supervisor resolves it itself (`/etc/hosts`
    /// included: `localhost`). An entry without a port covers no connection: the person was
    /// shown one destination, not every service of that host.
    fn covered_host(&self, cover: &Cover, a: &std::net::SocketAddr) -> Option<String> {
        let ip = crate::dns::canonical(a.ip());
        cover
            .hosts
            .iter()
            .find(|h| {
                let Some(spec) = net::parse_host_spec(h) else {
                    return false;
                };
                if spec.port != Some(a.port()) {
                    return false;
                }
                if let Ok(lit) = spec.host.parse::<std::net::IpAddr>() {
                    return crate::dns::canonical(lit) == ip;
                }
                self.lookups.resolved_to(&spec.host, ip) || {
                    use std::net::ToSocketAddrs;
                    (spec.host.as_str(), a.port())
                        .to_socket_addrs()
                        .is_ok_and(|mut it| it.any(|r| crate::dns::canonical(r.ip()) == ip))
                }
            })
            .cloned()
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
        let role = self.role_now(pid);
        let by_agent = role.as_ref().is_some_and(Role::is_agent);
        let cover = match &role {
            Some(Role::Command(c)) if !c.hosts.is_empty() => Some(Arc::clone(c)),
            _ => None,
        };
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
                        exec: None,
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
                // Only stream sockets of the host's namespace are handed out (to the agent's
                // hosts, or approved): a datagram socket could be sent anywhere (`sendto`),
                // disconnected and bound. Other types (UDP to the name servers included) are
                // the process's own, connected in the sandbox's namespace, where the resolver
                // relay is (crate::dns).
                let ty = sys::getsockopt_int(sock.as_fd(), libc::SOL_SOCKET, libc::SO_TYPE)?;
                if ty != libc::SOCK_STREAM {
                    let r = sys::connect_raw(sock.as_fd(), &raw);
                    // An approved command's resolver socket may look up the names its line
                    // names (crate::dns::Lookups): known by its local address and inode.
                    if let (Ok(()), Some(c)) = (&r, &cover) {
                        self.cover_lookups(&sock, &c.hosts);
                    }
                    // Closed before the reply: the relay finds a querying socket's process
                    // by the descriptors that hold it (`socket_owner`).
                    drop(sock);
                    self.reply_result(n.id, r);
                    return Ok(());
                }
                if let Some((c, h)) = cover
                    .as_ref()
                    .and_then(|c| self.covered_host(c, a).map(|h| (c, h)))
                {
                    self.log(AuditEvent {
                        kind: "connect",
                        what: a.to_string(),
                        allowed: true,
                        reason: Some(format!(
                            "covered by the approved command `{}`, which names {h}",
                            c.shown()
                        )),
                        inner_command: None,
                        quiet: false,
                    });
                    return self.inject_connected(n, &sock, domain, &raw);
                }
                if !(by_agent && self.hosts.allows(a)) {
                    let who = if by_agent { "the agent" } else { "a command" };
                    // The name it resolved this address from, when the relay passed the answer.
                    let names = self.lookups.names_of(a.ip());
                    let shown = match names.as_slice() {
                        [] => a.to_string(),
                        ns => format!("{}:{} ({a})", ns.join(" or "), a.port()),
                    };
                    let program = procfs::comm(n.pid)
                        .map(|c| format!(", from `{c}`"))
                        .unwrap_or_default();
                    let req = AskRequest {
                        kind: AskKind::Connect {
                            destination: shown.clone(),
                            by_agent,
                        },
                        verdict: Verdict::Red,
                        reasons: vec![format!("network: {who} connects to {shown}{program}")],
                        rememberable: false,
                        pid: n.pid,
                        exec: None,
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
                        inner_command: None,
                        quiet: false,
                    });
                }
                self.inject_connected(n, &sock, domain, &raw)
            }
            _ => Err(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
        }
    }

    /// Records the datagram socket `sock` (connected in the sandbox) as an approved command's
    /// resolver socket that may look up the names of `hosts`.
    fn cover_lookups(&self, sock: &OwnedFd, hosts: &[String]) {
        use std::os::unix::fs::MetadataExt;
        let Ok(fd) = sock.try_clone() else {
            return;
        };
        // A dup of the same socket: its local address, then its inode.
        let udp = std::net::UdpSocket::from(fd);
        let Ok(local) = udp.local_addr() else {
            return;
        };
        let local = std::net::SocketAddr::new(crate::dns::canonical(local.ip()), local.port());
        let Ok(meta) = std::fs::File::from(OwnedFd::from(udp)).metadata() else {
            return;
        };
        self.lookups.cover_socket(local, meta.ino(), hosts);
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
        // Close-on-exec whatever the process asked: the commands it starts never inherit it.
        let cloexec = true;
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
        if let meta::MetaOp::Chmod(m) = op {
            // A directory holding tyba's own keeps its owner's access and no one else's write:
            // `chmod 0 ~/.local/state` left the next session without its broker and audit
            // log, `chmod -R 777 ~/.config` let others replace the person's policy (review
            // 13's r13-04).
            if (m & 0o700 != 0o700 || m & 0o022 != 0) && self.holds_tybas_own(&real) {
                let reason = format!(
                    "refused by tyba (blocked): {} holds tyba's own configuration or state: its owner keeps read, write and search, and no one else may write it",
                    real.display()
                );
                return self.refuse(&n, "metadata", what, reason, libc::EPERM);
            }
        }
        if meta::path_allowed(&real, &self.writable, &self.protected) {
            return self.finish_meta(&n, op, &obj, what);
        }
        if self.is_tybas_own(&real) {
            // As the outside-files server: never asked, whatever was approved (an approved
            // `chmod -R 700 ~` must not make the person's policy unreadable: review 12's
            // r12-03).
            let reason = "refused by tyba (blocked): tyba's own configuration, state and sockets are not reachable from the sandbox".to_string();
            return self.refuse(&n, "metadata", what, reason, libc::EPERM);
        }
        if self.approved_meta(n.pid, &real, op) {
            return self.finish_meta(&n, op, &obj, what);
        }
        let me = Arc::clone(self);
        let id = n.id;
        let started = spawn_worker(move || {
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
                exec: None,
            };
            match me.ask(&req) {
                Ok(_) => me.finish_meta(&n, op, &obj, what),
                Err(reason) => me.refuse(&n, "metadata", what, reason, libc::EPERM),
            }
        });
        if !started {
            self.reply(id, Reply::Errno(libc::EAGAIN));
        }
    }

    /// Whether thread `tid` runs under an approved command line whose grants let it make
    /// `op` on `real`: the line changes that path's mode or owner ([`runner::Grant::meta`]:
    /// its `chmod`, `chown`, `chgrp` operands, and what is beneath them with `-R`), any
    /// change; the line writes it ([`runner::Grant::write`]), its times (`touch -d`, `cp -p`);
    /// a file the line makes (a new file it names; through the outside-files server, what the
    /// command made itself: `crate::outside_fs::OutsideFs::runner_lets_meta`), any change.
    /// Never a protected path. The person approved the line and its grants as the ask showed
    /// them: the metadata call its command makes is not asked again.
    fn approved_meta(&self, tid: u32, real: &std::path::Path, op: meta::MetaOp) -> bool {
        if self.protected.iter().any(|p| real.starts_with(p)) {
            return false;
        }
        let Ok(tgid) = procfs::tgid(tid) else {
            return false;
        };
        let Ok(st) = procfs::stat_ext(tgid) else {
            return false;
        };
        let Role::Command(cover) = self.role_of(tgid, &st) else {
            return false;
        };
        let times = matches!(op, meta::MetaOp::Utimes(_));
        // Where the outside-files server serves the path, the grants it keeps (which end when
        // a name changes); elsewhere the sandbox cannot change names (Landlock), and the
        // line's grants as approved decide.
        let opens = matches!(op, meta::MetaOp::Chmod(m) if m & 0o022 != 0);
        if let Some(o) = self.outside.as_ref().filter(|o| o.serves(real)) {
            return o.runner_lets_meta(tid, real, times, opens);
        }
        cover.granted.iter().any(|g| {
            let named = real == g.path || (g.meta_tree && real.starts_with(&g.path));
            (g.meta && named)
                || (g.write && times && real.starts_with(&g.path))
                || (g.new_file && real == g.path && !opens)
                // A directory made for the line before the run (`runner::prepare_new_files`):
                // only its runner can make anything in it, so all of it is the command's own.
                || (g.new_dirs.is_some() && real.starts_with(&g.path) && !opens)
        })
    }

    /// Whether `real` is tyba's own configuration, state, sockets or a session's run
    /// directory: the outside-files server's rule ([`crate::outside_fs::OutsideFs::is_tybas_own`]),
    /// or by path when the session has no server.
    fn is_tybas_own(&self, real: &std::path::Path) -> bool {
        match &self.outside {
            Some(o) => o.is_tybas_own(real),
            None => crate::outside_fs::own_dirs()
                .iter()
                .any(|d| real.starts_with(d)),
        }
    }

    /// Whether `real` is tyba's own or holds some of it further down
    /// ([`crate::outside_fs::OutsideFs::reaches_tybas_own`]; by path when the session has no
    /// server).
    fn reaches_tybas_own(&self, real: &std::path::Path) -> bool {
        match &self.outside {
            Some(o) => o.reaches_tybas_own(real),
            None => self.is_tybas_own(real) || self.holds_tybas_own(real),
        }
    }

    /// Whether `real` is a directory that holds tyba's own configuration, state or sockets
    /// ([`crate::outside_fs::own_dirs`]) further down.
    fn holds_tybas_own(&self, real: &std::path::Path) -> bool {
        crate::outside_fs::own_dirs()
            .iter()
            .any(|d| d != real && d.starts_with(real))
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
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                // ENOENT is also the answer, at once and forever, once no task uses the filter
                // any more (`recv_wait_event` in kernel/seccomp.c returns when the filter's
                // users reach zero); the listener then polls as hung up. Looping on it would
                // spin a CPU from the last sandboxed exit until the session's end, and at a
                // real-time priority starve the supervisor's own teardown.
                if sys::notif_listener_hung_up(n.listener.as_fd()) {
                    return;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
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

    /// An exec's strings that are no UTF-8 text are kept exactly (`exec::exec_text`), come
    /// back as the same bytes for a run the supervisor makes itself, and are written on the
    /// classified line as `$'…\xHH…'`, which the policy finds unknown: `cat $'cfg\xff'` is
    /// never `cat cfg\u{FFFD}`, and a script that is no text is not read as a line.
    #[test]
    fn exec_strings_that_are_no_utf8_are_exact_and_unknown_to_the_policy() {
        let raw: &[&[u8]] = &[
            b"cfg\xff",
            b"cfg\xfe",
            b"\xc3\xa9\xff",
            b"ok",
            "\u{10FF80}x".as_bytes(),
            b"a'b\\\xe2\x82",
        ];
        let texts: Vec<String> = raw.iter().map(|b| exec::exec_text(b)).collect();
        for (b, t) in raw.iter().zip(&texts) {
            assert_eq!(exec::exec_bytes(t), *b, "{t:?}");
            assert!(!t.contains('\u{FFFD}'));
        }
        assert_ne!(texts[0], texts[1], "two names stay two");
        assert_eq!(texts[3], "ok");
        assert_eq!(shell_quote(&texts[0]), "$'cfg\\xff'");
        assert_eq!(shell_quote(&texts[4]), "$'\\xf4\\x8f\\xbe\\x80x'");
        assert_eq!(shell_quote(&texts[5]), "$'a\\'b\\\\\\xe2\\x82'");

        let wt = tempfile::tempdir().unwrap();
        std::fs::write(wt.path().join(".env"), "TOKEN=x").unwrap();
        std::os::unix::fs::symlink(
            ".env",
            wt.path().join(std::ffi::OsStr::from_bytes(b"cfg\xff")),
        )
        .unwrap();
        let policy = tyba_policy::Policy::embedded_default();
        let ctx = tyba_policy::Context {
            worktree: wt.path(),
            cwd: wt.path(),
            home: None,
            scratch: None,
            git: None,
        };
        let classify = |line: String| {
            policy
                .classify(&tyba_policy::Action::Exec { command: line }, &ctx)
                .verdict
        };
        let cat = command_line("/bin/cat", &[v(&["cat"]), vec![texts[0].clone()]].concat());
        assert_eq!(cat, "cat $'cfg\\xff'");
        assert!(classify(cat) >= Verdict::Yellow);
        let sh = command_line(
            "/bin/sh",
            &[v(&["sh", "-c"]), vec![format!("cat {}", texts[0])]].concat(),
        );
        assert_eq!(sh, "sh -c $'cat cfg\\xff'");
        assert!(classify(sh) >= Verdict::Yellow);
        // A program named by bytes that are no text is no program the policy knows.
        let prog = exec::exec_text(b"/bin/c\xffat");
        assert!(classify(command_line(&prog, &v(&["cat", "README"]))) >= Verdict::Yellow);
    }

    /// A socket's holder is looked for in the sandbox's network namespace only: the
    /// supervisor's own copy of an agent's socket (taken to connect it) is never its owner.
    #[test]
    fn a_sockets_owner_is_found_in_the_named_network_namespace_only() {
        use std::os::unix::fs::MetadataExt;
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let inode = {
            let fd = std::os::fd::AsFd::as_fd(&sock)
                .try_clone_to_owned()
                .unwrap();
            std::fs::File::from(fd).metadata().unwrap().ino()
        };
        let me = std::process::id();
        assert_eq!(
            socket_owner(inode, me),
            Some(me),
            "control: found in its own namespace"
        );
        // A process in a network namespace of its own (as the sandbox's stage 2 is).
        let Ok(mut other) = std::process::Command::new("unshare")
            .args(["--user", "--map-root-user", "--net", "sleep", "30"])
            .spawn()
        else {
            panic!("unshare(1) is needed for this test");
        };
        let netns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while netns(other.id()) == netns(me) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let found = socket_owner(inode, other.id());
        let _ = other.kill();
        let _ = other.wait();
        assert_ne!(netns(me), None);
        assert_eq!(
            found, None,
            "a holder outside the namespace is not its owner"
        );
        assert_eq!(
            socket_owner(inode, u32::MAX),
            None,
            "no such process: no owner"
        );
    }

    #[test]
    fn a_descendant_is_within_its_covers_grants_only_for_the_granted_paths() {
        use tyba_policy::{rules, Finding};
        let remote = PathBuf::from("/nonexistent-tyba/remote.git");
        let class = |paths: &[&str], writes: &[&str], rules: &[&str]| {
            let mut c = Classification::green();
            for r in rules {
                c.add(Finding::new(Verdict::Red, *r, "r".to_string()));
            }
            c.paths = paths.iter().map(PathBuf::from).collect();
            c.writes = writes.iter().map(PathBuf::from).collect();
            c
        };
        let rw = [runner::Grant {
            path: remote.clone(),
            write: true,
            ..Default::default()
        }];
        let ro = [runner::Grant {
            path: remote.clone(),
            ..Default::default()
        }];
        let out = rules::PATH_OUTSIDE_WORKTREE.id;
        let gitdir = rules::PATH_GIT_DIR.id;
        // git's receive-pack on the remote an approved push was granted.
        let rp = class(&["/nonexistent-tyba/remote.git"], &[], &[out, gitdir]);
        assert!(within_the_grants(&rp, &rw));
        assert!(within_the_grants(&rp, &ro), "named, not written");
        assert!(!within_the_grants(&rp, &[]), "no grants: asked");
        // Another path, a write into a read grant, another red rule: asked.
        let other = class(&["/nonexistent-tyba/other.git"], &[], &[out, gitdir]);
        assert!(!within_the_grants(&other, &rw));
        let w = class(
            &["/nonexistent-tyba/remote.git/x"],
            &["/nonexistent-tyba/remote.git/x"],
            &[out],
        );
        assert!(within_the_grants(&w, &rw));
        assert!(!within_the_grants(&w, &ro));
        let net = class(&["/nonexistent-tyba/remote.git"], &[], &[out, "net.client"]);
        assert!(!within_the_grants(&net, &rw));
        let none = class(&[], &[], &["fs.delete-outside"]);
        assert!(!within_the_grants(&none, &rw));
    }

    #[test]
    fn a_shell_option_value_is_never_the_command() {
        let script = "echo T > notes2.md; rm -f victim2";
        for opts in [
            &["-c", "-o", "history"][..],
            &["-c", "+o", "history"],
            &["-c", "-O", "extglob"],
            &["-c", "+O", "extglob"],
            &["-eo", "pipefail", "-c"],
            &["-co", "history"],
            &["--rcfile", "/dev/null", "-c"],
            &["-rcfile", "/dev/null", "-c"],
            &["--init-file", "x", "-c"],
            &["--noprofile", "-c", "-O", "extglob", "--"],
        ] {
            let mut argv = vec!["bash"];
            argv.extend_from_slice(opts);
            argv.extend_from_slice(&[script, "a0", "a1"]);
            assert_eq!(command_line("/usr/bin/bash", &v(&argv)), script, "{argv:?}");
        }
        assert_eq!(
            command_line("/bin/dash", &v(&["dash", "-c", "-o", "errexit", script])),
            script
        );
        // Not read with certainty: the whole argv is the line, never one word of it.
        for argv in [
            &["bash", "--frobnicate", "-c", script][..],
            &["bash", "-c", "--norc", script],
            &["dash", "-rcfile", "/dev/null", "-c", script],
            &["sh", "-O", "extglob", "-c", script],
            &["bash", "-c", "-o"],
        ] {
            let line = command_line(&format!("/usr/bin/{}", argv[0]), &v(argv));
            assert!(line.starts_with(argv[0]), "{line}");
            if argv.len() > 3 {
                assert!(line.contains(script), "{line}");
            }
        }
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
    fn a_script_is_judged_as_the_line_the_kernel_runs() {
        assert_eq!(
            shebang_line(
                &v(&["/usr/local/bin/git"]),
                "push",
                &v(&["push", "net", "main"])
            )
            .as_deref(),
            Some("/usr/local/bin/git push net main")
        );
        assert_eq!(
            shebang_line(&v(&["/usr/bin/env", "-S git"]), "./x", &v(&["x", "a b"])).as_deref(),
            Some("/usr/bin/env '-S git' ./x 'a b'")
        );
        assert_eq!(shebang_line(&[], "./x", &v(&["x"])), None);
    }

    #[test]
    fn a_copy_or_link_of_git_is_git_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let Some(git) = ["/usr/bin/git", "/usr/local/bin/git"]
            .into_iter()
            .map(std::path::Path::new)
            .find(|p| p.is_file())
        else {
            return;
        };
        let copy = dir.path().join("gg");
        std::fs::copy(git, &copy).unwrap();
        let real = std::fs::canonicalize(git).unwrap();
        let expect = if real.file_name() == Some("git".as_ref()) {
            Some("git push net main")
        } else {
            None
        };
        assert_eq!(
            multi_call_line(&copy, &v(&["./gg", "push", "net", "main"])).as_deref(),
            expect
        );
        assert_eq!(
            multi_call_line(&copy, &v(&["git-push", "net", "main"])).as_deref(),
            expect.map(|_| "git push net main")
        );
        // Another program of the same size is no git: one byte changed.
        let mut bytes = std::fs::read(&copy).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let other = dir.path().join("other");
        std::fs::write(&other, bytes).unwrap();
        assert_eq!(multi_call_line(&other, &v(&["./other", "push"])), None);
    }

    #[test]
    fn argv0_names_what_multi_call_programs_do() {
        assert_eq!(
            argv0_line("/usr/bin/git", &v(&["git-clean", "-fdx"])),
            Some("git clean -fdx".to_string())
        );
        assert_eq!(
            argv0_line("/usr/local/bin/git", &v(&["git-push", "origin", ":main"])),
            Some("git push origin :main".to_string())
        );
        assert_eq!(
            argv0_line("/bin/busybox", &v(&["rm", "-rf", "x"])),
            Some("rm -rf x".to_string())
        );
        assert_eq!(argv0_line("/usr/bin/git", &v(&["git", "status"])), None);
        assert_eq!(
            argv0_line("/usr/bin/git", &v(&["/usr/bin/git", "status"])),
            None
        );
        assert_eq!(
            argv0_line("/usr/bin/bash", &v(&["-bash", "-c", "ls"])),
            None
        );
        assert_eq!(argv0_line("/usr/bin/id", &[]), None);
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
