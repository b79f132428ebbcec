//! The seam between `tyba hook` and the live session's broker (inside `tyba run`).
//!
//! `tyba run` exports [`SESSION_SOCKET_ENV`] to the agent; the agent passes its environment
//! on to its hooks, so a hook finds the session it runs in. A hook asks the broker only for
//! actions the decision table says must be asked (yellow and red, after the session's
//! "always" memory); green is allowed and blocked refused without asking.
//!
//! `tyba run` points [`SESSION_SOCKET_ENV`] at the session's **hook socket**, in the session's
//! private temp dir inside the sandbox. It takes only asks (never answers, never listings):
//! the person's own socket, which can answer, is out of the sandbox's reach. Any failure to
//! get an answer is a refusal (DESIGN.md §3, fail closed: "if the approval channel breaks,
//! the answer is deny").

use serde::Serialize;
use std::path::{Path, PathBuf};
use tyba_policy::Verdict;

/// The environment variable holding the session broker's socket path, set by `tyba run`.
pub const SESSION_SOCKET_ENV: &str = "TYBA_SESSION_SOCKET";

/// The longest a hook may wait for an answer, in seconds: the timeout tyba's installed hook
/// entries give the agent. An agent lets a call through when its hook times out, so the broker
/// must answer (deny, when the person has not answered) before this.
pub const HOOK_TIMEOUT_SECS: u64 = 600;

/// One ask, as the hook sends it to the broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AskRequest {
    /// `claude-code`, `codex` or `gemini`.
    pub agent: &'static str,
    /// The tool's name as the agent sent it (`Bash`, `apply_patch`, `run_shell_command`, …).
    pub tool: String,
    /// The exact action string the person answers for; with `rememberable`, the key an
    /// "always" answer remembers (the command line byte for byte, or a tool's canonical text).
    pub action: String,
    /// Yellow or red.
    pub verdict: Verdict,
    /// The decisive reasons, for the prompt.
    pub reasons: Vec<String>,
    /// Whether "always" may be offered (yellow only; never red).
    pub rememberable: bool,
    /// The directory the action runs in.
    pub cwd: PathBuf,
    /// The worktree it was classified against.
    pub worktree: PathBuf,
    /// For an edit the decision shows with its diff (autonomy `low`): the diff, or why there
    /// is none, already cleaned and bounded (`diff::for_call`).
    pub diff: Option<String>,
    /// For a file tool: its paths as the agent wrote them (`action` is the tool's text for
    /// them), so that an approval reaches the agent program's own access to those files.
    pub files: Vec<String>,
}

/// The person's answer (DESIGN.md §1 "answer").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Allowed this once.
    Once,
    /// Allowed, and remembered by the session for this exact action.
    Always,
    /// Denied; the reason, if the person gave one, reaches the agent.
    Deny {
        /// The person's reason.
        reason: Option<String>,
    },
}

/// Why the session could not answer; every one becomes a refusal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session's hook socket could not be reached or did not answer.
    #[error("session socket {socket}: {source}")]
    Channel {
        /// The socket named by the environment.
        socket: PathBuf,
        /// What failed.
        source: tyba_supervisor::broker::client::ClientError,
    },
}

/// The session's live autonomy level, read on its hook socket (a read-only request).
///
/// # Errors
/// [`SessionError::Channel`] when the socket cannot be reached or does not say.
pub fn live_autonomy(socket: &Path) -> Result<tyba_policy::Autonomy, SessionError> {
    use tyba_supervisor::broker::{client, proto};
    let channel = |source| SessionError::Channel {
        socket: socket.to_path_buf(),
        source,
    };
    let r = client::request(
        socket,
        &proto::Request::Autonomy,
        Some(std::time::Duration::from_secs(10)),
    )
    .map_err(channel)?;
    match (r.ok, r.autonomy) {
        (true, Some(a)) => Ok(a),
        _ => Err(channel(client::ClientError::Refused(
            r.error
                .unwrap_or_else(|| "the session did not say its level".into()),
        ))),
    }
}

/// Asks the session listening on `socket` and waits for the person's answer, at most a little
/// less than [`HOOK_TIMEOUT_SECS`] (the agent would let the call through at its timeout).
///
/// # Errors
/// [`SessionError::Channel`] when the socket cannot be reached, hangs up, answers garbage or
/// does not answer in time.
pub fn ask_session(socket: &Path, request: &AskRequest) -> Result<Answer, SessionError> {
    use tyba_supervisor::broker::{client, proto};
    let ask = proto::HookAsk {
        agent: request.agent.to_string(),
        tool: request.tool.clone(),
        action: request.action.clone(),
        verdict: request.verdict.to_string(),
        reasons: request.reasons.clone(),
        rememberable: request.rememberable,
        cwd: request.cwd.display().to_string(),
        worktree: request.worktree.display().to_string(),
        diff: request.diff.clone(),
        files: request.files.clone(),
    };
    let wait = std::time::Duration::from_secs(HOOK_TIMEOUT_SECS.saturating_sub(15));
    let a = client::ask_hook(socket, &ask, wait).map_err(|source| SessionError::Channel {
        socket: socket.to_path_buf(),
        source,
    })?;
    Ok(match a.answer {
        proto::WireAnswer::Once => Answer::Once,
        proto::WireAnswer::Always => Answer::Always,
        proto::WireAnswer::Deny => Answer::Deny { reason: a.reason },
    })
}

/// What a hook decided without asking, as [`record`] sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Let through.
    Allow,
    /// Refused.
    Refuse,
}

/// A decision the hook made without asking the person, for the session's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `claude-code`, `codex` or `gemini`.
    pub agent: &'static str,
    /// The tool's name as the agent sent it (empty when the input could not be read).
    pub tool: String,
    /// The action as the hook saw it (the key an ask would answer for), or the raw input.
    pub action: String,
    /// The verdict, or empty when there was none.
    pub verdict: String,
    /// The decisive reasons.
    pub reasons: Vec<String>,
    /// What the hook answered.
    pub decision: Decision,
    /// For a refusal, the text the agent got.
    pub reason: Option<String>,
    /// The directory the tool call runs in.
    pub cwd: String,
}

/// How long a hook waits for the session to take a record: a record never holds up the
/// answer for long.
const RECORD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Sends `r` to the session listening on `socket`, which writes it to its audit log as a
/// `hook` line (`{"op":"record",…}`, `crate::broker::proto::HookRecord`). The caller's
/// answer does not depend on it (DESIGN.md §3: a failure of the channel never allows).
///
/// # Errors
/// [`SessionError::Channel`] when the socket cannot be reached, refuses the record or does
/// not answer within 5 seconds.
pub fn record(socket: &Path, r: &Record) -> Result<(), SessionError> {
    use tyba_supervisor::broker::{client, proto};
    let channel = |source| SessionError::Channel {
        socket: socket.to_path_buf(),
        source,
    };
    let req = proto::Request::Record(proto::HookRecord {
        agent: r.agent.to_string(),
        tool: r.tool.clone(),
        action: r.action.clone(),
        verdict: r.verdict.clone(),
        reasons: r.reasons.clone(),
        decision: match r.decision {
            Decision::Allow => proto::HookDecision::Allow,
            Decision::Refuse => proto::HookDecision::Refuse,
        },
        reason: r.reason.clone(),
        cwd: r.cwd.clone(),
    });
    let reply = client::request(socket, &req, Some(RECORD_TIMEOUT)).map_err(channel)?;
    if reply.ok {
        Ok(())
    } else {
        Err(channel(client::ClientError::Refused(
            reply
                .error
                .unwrap_or_else(|| "the session did not take the record".into()),
        )))
    }
}
