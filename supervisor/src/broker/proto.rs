//! The line-delimited JSON protocol on a session's socket and on the agent's hook channel.
//!
//! One request per line, one reply line per request; the connection may carry several.
//!
//! ```text
//! → {"op":"list"}
//! ← {"ok":true,"session":{"id":"0a1b2c3d4e5f","worktree":"/…","pid":4242},"pending":[{…}]}
//! → {"op":"answer","id":"0a1b2c3d4e5f-3","answer":"deny","reason":"use make"}
//! ← {"ok":true}
//! → {"op":"answer","id":"0a1b2c3d4e5f-4","answer":"always"}
//! ← {"ok":false,"error":"`always` is refused: …"}
//! ```
//!
//! The hook socket (in the session's private temp dir, named by `TYBA_SESSION_SOCKET` in the
//! agent's environment; see [`crate::broker::Broker::ask_hook`]) takes only
//! `{"op":"ask",…}` and answers `{"ok":true,"answer":{"answer":"once"}}` once the person has
//! answered; every other operation is refused there.

use serde::{Deserialize, Serialize};

/// The largest request line accepted, in bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// A request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The session and its pending asks.
    List,
    /// Answers one pending ask.
    Answer {
        /// `<session>-<n>`.
        id: String,
        /// The answer.
        answer: WireAnswer,
        /// For `deny`: the reason the agent gets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An ask from the agent's hook (hook channel only).
    Ask(HookAsk),
}

/// The three answers (DESIGN.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireAnswer {
    /// Allow this once.
    Once,
    /// Allow this exact action for the rest of the session (yellow only).
    Always,
    /// Refuse.
    Deny,
}

/// An ask from an agent hook (`tyba hook …` inside `tyba run`), as the hook classified it.
/// The broker does not trust the hook's verdict to widen anything: see
/// [`crate::broker::Broker::ask_hook`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookAsk {
    /// `claude-code`, `codex` or `gemini`.
    pub agent: String,
    /// The tool's name as the agent sent it.
    pub tool: String,
    /// The exact action string.
    pub action: String,
    /// `yellow` or `red`.
    pub verdict: String,
    /// The decisive reasons.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Whether the hook would offer "always".
    #[serde(default)]
    pub rememberable: bool,
    /// The directory the action runs in.
    #[serde(default)]
    pub cwd: String,
    /// The worktree it was classified against.
    #[serde(default)]
    pub worktree: String,
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// The session id.
    pub id: String,
    /// Its worktree.
    pub worktree: String,
    /// The supervisor's pid.
    pub pid: u32,
}

/// One pending ask as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingView {
    /// `<session>-<n>`.
    pub id: String,
    /// `command`, `connect`, `metadata`, `hook` or `pause`.
    pub kind: String,
    /// What is asked, for people (`run \`cargo test\``).
    pub action: String,
    /// `yellow` or `red` (`paused` for a pause).
    pub verdict: String,
    /// The policy's reasons, in order.
    pub reasons: Vec<String>,
    /// Whether `always` may be answered.
    pub always_allowed: bool,
    /// The asking process (thread id in the supervisor's PID namespace).
    pub pid: u32,
    /// Its argv, from `/proc` (empty when unreadable).
    pub argv: Vec<String>,
    /// Its working directory, from `/proc`.
    pub cwd: String,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
}

/// The answer sent back on the hook channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookAnswer {
    /// The answer.
    pub answer: WireAnswer,
    /// For `deny`: the reason for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A reply line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the request was carried out.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionView>,
    /// For `list`: pending asks, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingView>,
    /// For `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<HookAnswer>,
}

impl Reply {
    /// A failed reply.
    pub fn error(e: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            error: Some(e.into()),
            ..Reply::default()
        }
    }

    /// A plain success.
    pub fn ok() -> Reply {
        Reply {
            ok: true,
            ..Reply::default()
        }
    }
}
