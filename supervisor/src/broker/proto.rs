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
//! → {"op":"set_autonomy","level":"high","confirm_high":true}
//! ← {"ok":true,"session":{…,"autonomy":"high",…},"previous":"medium"}
//! → {"op":"stop"}
//! ← {"ok":true,"session":{…},"denied_pending":1}
//! ```
//!
//! `set_autonomy` to `high` from a lower level is refused unless `confirm_high` is true: the
//! client sets it only after the person confirmed on the terminal that issued it (or passed
//! `--yes`). `stop` denies the pending asks and ends the agent's processes; the reply comes
//! once the asks are denied, before the processes are gone.
//!
//! The hook socket (in the session's private temp dir, named by `TYBA_SESSION_SOCKET` in the
//! agent's environment; see [`crate::broker::Broker::ask_hook`]) takes only
//! `{"op":"ask",…}`, which it answers `{"ok":true,"answer":{"answer":"once"}}` once the person
//! has answered, and `{"op":"autonomy"}` (the live level, read only:
//! `{"ok":true,"autonomy":"medium"}`, so that hooks decide at the session's level), and
//! `{"op":"record",…}` (a decision the hook made without asking, an allow or a refusal,
//! written to the session's audit log as a `hook` line: `{"ok":true}`). Every other
//! operation is refused there, and the refusal is written to the audit log.

use serde::{Deserialize, Serialize};
use tyba_policy::Autonomy;

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
    /// The live autonomy level (both sockets; read only).
    Autonomy,
    /// A decision the agent's hook made without asking, for the audit log (hook channel
    /// only).
    Record(HookRecord),
    /// Changes the autonomy level for the next decisions (the person's socket only).
    SetAutonomy {
        /// The new level.
        level: Autonomy,
        /// The person confirmed raising to `high` (required to raise to it).
        #[serde(default)]
        confirm_high: bool,
    },
    /// Ends the session: pending asks denied, the agent's processes ended, its work kept
    /// (the person's socket only).
    Stop,
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
    /// For an edit asked at low autonomy: the unified diff of the change the tool would make
    /// (a patch tool's own patch), or why there is none (`tyba could not compute the diff:
    /// …`). The broker cleans and bounds it again ([`crate::broker::text::clean_diff`]): it
    /// comes from inside the sandbox. Absent from older hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// For a file tool (`action` is `read`, `write` or `apply_patch` and these paths, as the
    /// agent wrote them, joined by spaces): the paths, so that the person's approval can
    /// reach the agent program's own access to exactly those files outside the worktree (the
    /// broker resolves them itself and shows what an approval lets through:
    /// [`crate::broker::Broker::ask_hook`]). Empty for any other tool, and from older hooks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// What a hook decided without asking the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookDecision {
    /// Let through (green, or internal to the agent).
    Allow,
    /// Refused (blocked, an edit outside the worktree, unreadable input, no session to ask).
    Refuse,
}

/// A decision of the agent's hook (`tyba hook …` inside `tyba run`) that no ask carried to
/// the broker, for the session's audit log (DESIGN.md §6: every decision is logged). It is
/// the hook's own account, sent from inside the sandbox: the broker writes it as such
/// (`kind` `hook`) and nothing reads it back into a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRecord {
    /// `claude-code`, `codex` or `gemini`.
    pub agent: String,
    /// The tool's name as the agent sent it (empty when the input could not be read).
    #[serde(default)]
    pub tool: String,
    /// The action as the hook saw it (the command line, `write PATH`, …), or the raw input
    /// when it could not be read.
    pub action: String,
    /// `green`, `yellow`, `red`, `blocked`, or empty when there was no verdict.
    #[serde(default)]
    pub verdict: String,
    /// The policy's decisive reasons, in order.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// What the hook answered.
    pub decision: HookDecision,
    /// For a refusal: the text the agent got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The directory the tool call runs in (the hook input's `cwd`), resolved.
    #[serde(default)]
    pub cwd: String,
}

/// A session as listed (`tyba inbox --json`'s `session`, `tyba sessions --json`'s items).
///
/// Fields after `pid` were added with the live session controls; a reply without them
/// (an older supervisor) reads as empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// The session id.
    pub id: String,
    /// Its worktree.
    pub worktree: String,
    /// The supervisor's pid.
    pub pid: u32,
    /// The agent's argv as the person gave it.
    #[serde(default)]
    pub agent: Vec<String>,
    /// The branch checked out in the worktree now (absent when detached or not git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The live autonomy level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<Autonomy>,
    /// The execution mode: `safe`, `auto` or `dangerous_bypass`.
    #[serde(default)]
    pub exec_mode: String,
    /// How many asks are pending.
    #[serde(default)]
    pub pending: usize,
    /// Commands let through without asking.
    #[serde(default)]
    pub allowed: u64,
    /// Asks put to the person.
    #[serde(default)]
    pub asked: u64,
    /// Refusals (by the policy or by the person).
    #[serde(default)]
    pub denied: u64,
    /// When the session started, RFC 3339 UTC.
    #[serde(default)]
    pub started_at: String,
    /// Who stopped it, once someone has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// A `tyba run --non-interactive` session: nobody answers, its asks are denied at once
    /// (and logged). `false` from older supervisors, which did not list such sessions.
    #[serde(default)]
    pub non_interactive: bool,
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
    /// For an exec, the exec's own argv (read at the exec); else the asking process's, from
    /// `/proc` (empty when unreadable).
    pub argv: Vec<String>,
    /// The working directory, from the same source.
    pub cwd: String,
    /// For an exec: the environment assignments judged with it (`NAME=VALUE`, code-running
    /// variables that differ from the session's start). Empty otherwise, and from older
    /// supervisors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
    /// For a hook's ask: who is asking, for people (`Claude Code's tool call Bash`). The
    /// hook's connection is made by the supervisor on the agent's behalf, so `pid` and
    /// `argv` cannot name the hook's process: they are `0` and empty, and `cwd` is the
    /// directory the tool call runs in, as the hook input gives it. Absent for every other
    /// ask, and from older supervisors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// For a hook's edit asked at low autonomy: the diff the person is shown before answering
    /// (lines of text, control characters replaced, at most
    /// [`crate::broker::text::DIFF_MAX_LINES`] lines and a last `… N more lines`), or why
    /// there is none. Absent for every other ask, and from older supervisors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// For an exec ask of a line that is one command in the agent's shell wrapper: that
    /// command (`tyba_policy::Classification::inner_command`), what the prompt's header and
    /// `tyba inbox` show first; `action` keeps the whole line. Absent for every other ask,
    /// and from older supervisors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_command: Option<String>,
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
    /// For `autonomy`: the live level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy: Option<Autonomy>,
    /// For `set_autonomy`: the level before the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Autonomy>,
    /// For `stop`: how many pending asks were denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_pending: Option<usize>,
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
