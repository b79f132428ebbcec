//! The seam between `tyba hook` and the live session's broker (inside `tyba run`).
//!
//! `tyba run` exports [`SESSION_SOCKET_ENV`] to the agent; the agent passes its environment
//! on to its hooks, so a hook finds the session it runs in. A hook asks the broker only for
//! actions the decision table says must be asked (yellow and red, after the session's
//! "always" memory); green is allowed and blocked refused without asking.
//!
//! The broker is not built yet: [`ask_session`] always fails, and the caller turns every
//! failure into a refusal (DESIGN.md §3, fail closed: "if the approval channel breaks, the
//! answer is deny").

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
}

/// The person's answer (DESIGN.md §1 "answer").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[expect(
    dead_code,
    reason = "the session broker constructs answers; until it exists every ask fails"
)]
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
    /// This build of tyba has no session broker to ask yet.
    #[error("this tyba cannot ask a live session yet (session socket {socket})")]
    Unsupported {
        /// The socket named by the environment.
        socket: PathBuf,
    },
}

/// Asks the session listening on `socket` and waits for the person's answer.
///
/// # Errors
/// Always [`SessionError::Unsupported`] for now: the broker work replaces this body with the
/// request/answer exchange on the socket, answering within [`HOOK_TIMEOUT_SECS`].
pub fn ask_session(socket: &Path, request: &AskRequest) -> Result<Answer, SessionError> {
    let _ = request;
    Err(SessionError::Unsupported {
        socket: socket.to_path_buf(),
    })
}
