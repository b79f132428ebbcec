//! The seam between the notify loop and whoever answers asks (DESIGN.md §3).
//!
//! The loop hands an [`AskRequest`] to an [`Approver`] on a worker thread (the asking process
//! stays blocked in its system call, the rest of the session goes on). The approver returns
//! [`Answer::Once`], [`Answer::Always`] (honoured only when the request is rememberable) or
//! [`Answer::Deny`]; an `Err` is a deny (fail closed). `tyba run` uses the session's
//! [`crate::broker::Broker`], or [`DenyAll`] with `--non-interactive`.

use tyba_policy::Verdict;

/// What an ask is about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AskKind {
    /// A command the agent started: the command line as classified (the `-c` script of a
    /// shell, or the argv shell-quoted and joined).
    Command {
        /// The command line.
        command: String,
    },
    /// A network connection by a process of the session: `host:port` or a socket path.
    Connect {
        /// The destination.
        destination: String,
        /// Whether the agent program itself opened it (otherwise one of its commands).
        by_agent: bool,
    },
    /// A change of mode, owner or timestamps outside the writable paths.
    Metadata {
        /// The path as the kernel names the object.
        path: String,
        /// `chmod`, `chown` or `utimes`.
        operation: &'static str,
    },
    /// An access to a file or directory outside the worktree, asked by the outside-files
    /// server ([`crate::outside_fs`]) when a process of the session reaches it.
    File {
        /// The real path (as the supervisor sees it), or the operands of an operation that
        /// names two (`A to B`, `LINK -> TEXT`).
        path: String,
        /// `read`, `write`, `list`, `create`, `mkdir`, `remove`, `rename`, `link` or
        /// `symlink`.
        access: &'static str,
        /// What an approval covers, shown in the ask: `reading this file`, `listing this
        /// directory (not its files)`, `this rename, of this entry to this name`…
        scope: &'static str,
        /// Whom an approval covers and until when: the asking command and the processes it
        /// starts, until it exits; or, when the agent asked, the agent itself and not the
        /// commands it starts.
        holder: String,
        /// The real paths it names, in order: the one path of an access (`read`, `write`,
        /// `list`, `create`, `mkdir`, `remove`); `[from, to]` of a `rename`; `[existing,
        /// new]` of a `link`; `[at]` of a `symlink`.
        real: Vec<std::path::PathBuf>,
    },
}

impl std::fmt::Display for AskKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskKind::Command { command } => write!(f, "run `{command}`"),
            AskKind::Connect {
                destination,
                by_agent: true,
            } => write!(f, "agent connects to {destination}"),
            AskKind::Connect {
                destination,
                by_agent: false,
            } => write!(f, "command connects to {destination}"),
            AskKind::Metadata { path, operation } => write!(f, "{operation} {path}"),
            AskKind::File {
                path,
                access,
                scope,
                holder,
                ..
            } => write!(
                f,
                "{access} {path} (an approval covers {scope}, for {holder})"
            ),
        }
    }
}

/// One ask: what, its colour, the policy's reasons, and whether "always" may be offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRequest {
    /// What is asked.
    pub kind: AskKind,
    /// Yellow or red.
    pub verdict: Verdict,
    /// The decisive reasons, in order (may be empty for a plain yellow).
    pub reasons: Vec<String>,
    /// Whether [`Answer::Always`] would be remembered (yellow commands only).
    pub rememberable: bool,
    /// Thread id of the asking process, in the supervisor's PID namespace.
    pub pid: u32,
    /// For an exec: what it would run, read at the exec (the process's own `/proc` still
    /// shows the program before it). `None` for other asks.
    pub exec: Option<ExecAsk>,
}

/// What an asked exec would run: its own argv, working directory, and the environment
/// assignments that matter (code-running variables that differ from the session's start, as
/// classified: `export NAME=…;`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecAsk {
    /// The exec's argv (lossily decoded).
    pub argv: Vec<String>,
    /// Its working directory.
    pub cwd: std::path::PathBuf,
    /// `(name, value)` of the assignments judged with it, in the order of its environment.
    pub env: Vec<(String, String)>,
    /// The command behind the agent's shell wrapper, when the line is one command in neutral
    /// shell housekeeping (`tyba_policy::Classification::inner_command`): what the person is
    /// shown first, and the key a hook's answer for that command is matched on. `None` when
    /// the line is its own command (then the line is shown, cut to a bound).
    pub inner_command: Option<String>,
    /// What its classification resolved, as far as an approval reaches ([`Reach`]): a hook
    /// ask's answer stands for this exec only when it showed the person all of it.
    pub reach: Reach,
}

/// What an approval of a command line reaches, as its classification resolved it at the
/// ask: the reasons of its yellow and red findings (which name paths as resolved through
/// links, credential and sensitive paths, pushes, code-running variables), the hosts it
/// names, and the real paths it reads or writes (for an exec: the grants its runner would get
/// on top of the agent's domain). Two asks of the same text can reach different things (a
/// link swapped, another directory, another home), so one ask's answer stands for another only
/// when the other's reach lies within what the first showed ([`Reach::within`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Reasons of the yellow and red findings.
    pub reasons: std::collections::BTreeSet<String>,
    /// Network destinations named.
    pub hosts: std::collections::BTreeSet<String>,
    /// Real paths reached, each with whether it is written or changed (removed, renamed,
    /// linked: `tyba_policy::Classification::changes`).
    pub paths: std::collections::BTreeMap<std::path::PathBuf, bool>,
}

impl Reach {
    /// The reach of `class`, with `paths` (real path, written or changed) as what it reaches
    /// on disk.
    pub fn of(
        class: &tyba_policy::Classification,
        paths: impl IntoIterator<Item = (std::path::PathBuf, bool)>,
    ) -> Reach {
        let mut reach = Reach {
            reasons: class
                .findings
                .iter()
                .filter(|f| f.verdict > Verdict::Green)
                .map(|f| f.reason.clone())
                .collect(),
            hosts: class.hosts.iter().cloned().collect(),
            paths: Default::default(),
        };
        for (p, w) in paths {
            *reach.paths.entry(p).or_default() |= w;
        }
        reach
    }

    /// Whether everything `self` reaches was shown in `shown`: each reason and host among
    /// its, each path among its, and each written path written there.
    pub fn within(&self, shown: &Reach) -> bool {
        self.reasons.is_subset(&shown.reasons)
            && self.hosts.is_subset(&shown.hosts)
            && self
                .paths
                .iter()
                .all(|(p, w)| shown.paths.get(p).is_some_and(|sw| *sw || !*w))
    }
}

impl AskRequest {
    /// The command behind the agent's wrapper for an exec ask that has one
    /// ([`ExecAsk::inner_command`]).
    pub fn inner_command(&self) -> Option<&str> {
        self.exec.as_ref().and_then(|e| e.inner_command.as_deref())
    }

    /// What is asked, for people, on one line: `run \`CMD\`` with the command behind the
    /// agent's wrapper, or the whole action cut to a bound
    /// ([`crate::broker::text::shown_action`]).
    pub fn shown(&self) -> String {
        match &self.kind {
            AskKind::Command { command } => format!(
                "run `{}`",
                crate::broker::text::shown_action(command, self.inner_command())
            ),
            k => crate::broker::text::shown_action(&k.to_string(), None),
        }
    }

    /// The refusal text for a deny without a reason of its own (naming the action as
    /// [`AskRequest::shown`] does).
    pub fn default_refusal(&self) -> String {
        if self.reasons.is_empty() {
            format!("refused by tyba ({}): {}", self.verdict, self.shown())
        } else {
            format!("refused by tyba: {}", self.reasons.join("; "))
        }
    }
}

/// The person's answer (DESIGN.md §1 "answer").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Allow this one time.
    Once,
    /// Allow for the rest of the session (exact string; yellow only, else treated as once).
    Always,
    /// Refuse; the reason, when given, reaches the agent as the refusal text.
    Deny {
        /// Why, in the person's words.
        reason: Option<String>,
    },
}

/// Why an approver could not answer; the loop treats it as a deny.
#[derive(Debug, thiserror::Error)]
#[error("approval channel failed: {0}")]
pub struct ApproverError(pub String);

/// Answers asks. Implementations may block (a person typing); they run on worker threads.
pub trait Approver: Send + Sync {
    /// Answers one ask.
    ///
    /// # Errors
    /// Any failure of the channel; the caller denies the ask.
    fn ask(&self, request: &AskRequest) -> Result<Answer, ApproverError>;

    /// The answer an earlier ask already gave to `request`, without asking anyone: the
    /// person's answer to the agent hook's ask of the same intent (a `Read` of the same file),
    /// consumed or bounded in time as the approver keeps it, and logged by it. `None` when no
    /// earlier answer covers it (the default: nothing is ever answered here by itself).
    fn answered(&self, _request: &AskRequest) -> Option<Answer> {
        None
    }

    /// The names `changed` (real paths) are about to hold something else than when they were
    /// asked about: the outside-files server removes, renames, links or makes them a symbolic
    /// link. Answers kept for them, or for what is beneath them, end: an answer is for what
    /// the name held (a file linked or renamed there since was never asked about). `rename`
    /// (`from`, `to`) when the change is a rename: an answered file's own atomic save (its
    /// `FILE.tmp…` sibling renamed over it) keeps that file's answer. The default keeps none.
    fn names_changed(
        &self,
        _changed: &[&std::path::Path],
        _rename: Option<(&std::path::Path, &std::path::Path)>,
    ) {
    }

    /// Hears every event the notify loop logs (refusals, answered asks), for the audit log
    /// and the repeated-failure guard. For a refusal, the returned text is appended to the
    /// refusal the agent gets (a nudge to change approach).
    fn record(&self, _event: &crate::notify::AuditEvent) -> Option<String> {
        None
    }

    /// Hears a note about the session that is neither a request nor a decision (what could
    /// not be set up at start and what that means, said once: `what` names it, `text` says
    /// it), for the audit log.
    fn note(&self, _what: &str, _text: &str) {}

    /// Hears the execs the supervisor allowed without asking, for the audit log: off the
    /// notify thread (the loop hands them over a channel), in the order they were allowed, a
    /// batch at a time (all that came while the previous batch was written).
    fn record_allowed(&self, _execs: &[crate::notify::AllowedExec]) {}

    /// The same-terminal prompt, when this approver has one: the pty relay passes the
    /// agent's output and the person's keys through it.
    fn relay_gate(&self) -> Option<std::sync::Arc<dyn RelayGate>> {
        None
    }
}

/// Sits in the pty relay between the agent and the person's terminal (issue 5 §3): while a
/// prompt is shown the agent's output is held and the person's keys answer the prompt.
pub trait RelayGate: Send + Sync {
    /// Writes the agent's output to the terminal, waiting while a prompt is shown.
    fn output(&self, bytes: &[u8]);
    /// Offers the person's keys to the prompt; `true` when it took them (they must not reach
    /// the agent).
    fn input(&self, bytes: &[u8]) -> bool;
    /// Whether the agent's screen needs a redraw (taken once): a prompt that was shown over
    /// the agent's own full-screen display cleared it on leaving.
    fn take_redraw(&self) -> bool {
        false
    }
}

/// The note a non-interactive session's refusals of asks end with.
pub const NON_INTERACTIVE_NOTE: &str = "non-interactive session: asks are denied";

/// Denies every ask with its reason: `--non-interactive`, or when the broker cannot start.
#[derive(Debug, Clone)]
pub struct DenyAll {
    note: String,
}

impl DenyAll {
    /// The `--non-interactive` approver.
    pub fn non_interactive() -> Self {
        DenyAll {
            note: NON_INTERACTIVE_NOTE.to_string(),
        }
    }

    /// A deny-all approver whose refusals end with `note`.
    pub fn with_note(note: impl Into<String>) -> Self {
        DenyAll { note: note.into() }
    }
}

impl Approver for DenyAll {
    fn ask(&self, request: &AskRequest) -> Result<Answer, ApproverError> {
        Ok(Answer::Deny {
            reason: Some(format!("{} ({})", request.default_refusal(), self.note)),
        })
    }
}

/// An approver being made on another thread while the sandbox sets itself up
/// ([`crate::launch::run_with`]): each call waits until it is made. One whose maker ended
/// without making it (it panicked) is a [`DenyAll`] ([`Deferred::fail`]).
#[derive(Default)]
pub(crate) struct Deferred {
    made: std::sync::Mutex<Option<std::sync::Arc<dyn Approver>>>,
    set: std::sync::Condvar,
}

impl Deferred {
    /// Sets the approver, once; later calls change nothing.
    pub(crate) fn set(&self, a: std::sync::Arc<dyn Approver>) {
        let mut m = self
            .made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if m.is_none() {
            *m = Some(a);
        }
        self.set.notify_all();
    }

    /// Sets a deny-all approver if none was set.
    pub(crate) fn fail(&self) {
        self.set(std::sync::Arc::new(DenyAll::with_note(
            "the approval broker could not start",
        )));
    }

    /// The approver, waited for.
    pub(crate) fn get(&self) -> std::sync::Arc<dyn Approver> {
        let mut m = self
            .made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(a) = m.as_ref() {
                return std::sync::Arc::clone(a);
            }
            m = self
                .set
                .wait(m)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl Approver for Deferred {
    fn ask(&self, request: &AskRequest) -> Result<Answer, ApproverError> {
        self.get().ask(request)
    }
    fn answered(&self, request: &AskRequest) -> Option<Answer> {
        self.get().answered(request)
    }
    fn names_changed(
        &self,
        changed: &[&std::path::Path],
        rename: Option<(&std::path::Path, &std::path::Path)>,
    ) {
        self.get().names_changed(changed, rename);
    }
    fn record(&self, event: &crate::notify::AuditEvent) -> Option<String> {
        self.get().record(event)
    }
    fn note(&self, what: &str, text: &str) {
        self.get().note(what, text);
    }
    fn record_allowed(&self, execs: &[crate::notify::AllowedExec]) {
        self.get().record_allowed(execs);
    }
    fn relay_gate(&self) -> Option<std::sync::Arc<dyn RelayGate>> {
        self.get().relay_gate()
    }
}

/// Allows every ask once: only for tests of the ask path (escapes.md: "with an approver that
/// answers once, the same out-of-tree read and the same connection must succeed").
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowOnce;

impl Approver for AllowOnce {
    fn ask(&self, _request: &AskRequest) -> Result<Answer, ApproverError> {
        Ok(Answer::Once)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(reasons: &[&str], hosts: &[&str], paths: &[(&str, bool)]) -> Reach {
        Reach {
            reasons: reasons.iter().map(|s| s.to_string()).collect(),
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            paths: paths.iter().map(|(p, w)| (p.into(), *w)).collect(),
        }
    }

    #[test]
    fn a_reach_is_within_only_what_was_shown() {
        let shown = reach(
            &["`lnk/f` reaches outside the worktree (resolves to /h/sibling/f)"],
            &["example.com"],
            &[("/h/sibling/f", true), ("/h/other", false)],
        );
        assert!(Reach::default().within(&shown));
        assert!(shown.within(&shown));
        assert!(reach(&[], &[], &[("/h/other", false)]).within(&shown));
        // Another resolution, another host, another path, a write of a path shown read.
        assert!(!reach(
            &["`lnk/f` reaches outside the worktree (resolves to /h/f)"],
            &[],
            &[]
        )
        .within(&shown));
        assert!(!reach(&[], &["evil.example"], &[]).within(&shown));
        assert!(!reach(&[], &[], &[("/h/f", false)]).within(&shown));
        assert!(!reach(&[], &[], &[("/h/other", true)]).within(&shown));
    }
}
