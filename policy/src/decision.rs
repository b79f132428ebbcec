//! From verdict to decision: autonomy levels, execution modes and the session's "always"
//! memory (DESIGN.md §3–§4, seed `004_893a9b0cb34e722a.txt`).
//!
//! | autonomy | green | in-worktree edits | yellow | red | blocked |
//! |---|---|---|---|---|---|
//! | low | allow | ask (show the diff) | ask | ask, never always | refuse |
//! | medium (default) | allow | allow | ask | ask, never always | refuse |
//! | high | allow | allow | allow | ask, never always | refuse |

use crate::verdict::{Classification, Verdict};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;

/// How much the agent may do without asking (seed `004_893a9b0cb34e722a.txt`, "níveis de autonomia").
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Autonomy {
    /// Edits ask too, showing the diff.
    Low,
    /// Green and in-worktree edits pass; yellow and red ask.
    #[default]
    Medium,
    /// Yellow passes too; for trusted workspaces only.
    High,
}

impl Autonomy {
    /// `low`, `medium` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::Low => "low",
            Autonomy::Medium => "medium",
            Autonomy::High => "high",
        }
    }
}

impl fmt::Display for Autonomy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Autonomy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "low" => Ok(Autonomy::Low),
            "medium" => Ok(Autonomy::Medium),
            "high" => Ok(Autonomy::High),
            other => Err(format!(
                "unknown autonomy level `{other}` (expected low, medium or high)"
            )),
        }
    }
}

/// Proof that the binary was started with the explicit bypass flag. Only
/// [`ExecMode::dangerous_bypass_from_startup_flag`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BypassFlag(());

/// Which shell syntax is offered at all (DESIGN.md §4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ExecMode {
    /// Simple commands only: operators, redirections and substitutions are refused with a hint
    /// to split the line.
    Safe,
    /// Parsed with a real bash grammar; constructs the analyser cannot see through are refused.
    #[default]
    Auto,
    /// Shell validation off (opaque constructs are offered, at least yellow). Reachable only
    /// through [`ExecMode::dangerous_bypass_from_startup_flag`].
    DangerousBypass(BypassFlag),
}

impl ExecMode {
    /// The bypass mode. Call this only when the person started the binary with
    /// `--dangerously-bypass-shell-validation`; anything else asking for the bypass gets
    /// [`ExecMode::Auto`] (see [`ExecMode::requested`]).
    pub fn dangerous_bypass_from_startup_flag() -> Self {
        ExecMode::DangerousBypass(BypassFlag(()))
    }

    /// Parses a requested mode name (`safe`, `auto`, `dangerous_bypass`). The bypass is granted
    /// only with `startup_flag`; without it the result is `Auto` and the second value is a
    /// warning to show.
    ///
    /// # Errors
    /// An unknown mode name.
    pub fn requested(name: &str, startup_flag: bool) -> Result<(Self, Option<String>), String> {
        match name {
            "safe" => Ok((ExecMode::Safe, None)),
            "auto" => Ok((ExecMode::Auto, None)),
            "dangerous_bypass" | "dangerous-bypass" if startup_flag => {
                Ok((ExecMode::dangerous_bypass_from_startup_flag(), None))
            }
            "dangerous_bypass" | "dangerous-bypass" => Ok((
                ExecMode::Auto,
                Some(
                    "execution mode dangerous_bypass needs --dangerously-bypass-shell-validation at startup; using auto"
                        .to_string(),
                ),
            )),
            other => Err(format!("unknown execution mode `{other}` (expected safe or auto)")),
        }
    }

    /// `safe`, `auto` or `dangerous_bypass`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecMode::Safe => "safe",
            ExecMode::Auto => "auto",
            ExecMode::DangerousBypass(_) => "dangerous_bypass",
        }
    }
}

/// What kind of action a classification was for; the decision table treats edits apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// A shell command line.
    Command,
    /// An edit tool writing files (write, edit, apply_patch).
    Edit,
    /// A read tool, a kernel-level open, a connection, a web fetch.
    Other,
}

/// A key the session may remember as "always": the exact command string, byte for byte.
///
/// It can only be made by [`decide`] from a **yellow** classification, so a red, blocked or
/// green action can never be remembered (DESIGN.md §3: "a red verdict can never be stored").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct AlwaysKey(String);

impl AlwaysKey {
    /// The exact action string this key allows.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An ask: the person must answer before the action goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ask {
    /// Yellow or red (blocked is refused, green is allowed).
    pub verdict: Verdict,
    /// Present only when "always" may be offered (yellow verdicts).
    pub rememberable: Option<AlwaysKey>,
    /// At low autonomy an edit asks with its diff shown.
    pub show_diff: bool,
}

/// The outcome for one action (DESIGN.md §1 "decision").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    /// Goes through without asking.
    Allow,
    /// Waits for the person.
    Ask(Ask),
    /// Refused at once; `reason` reaches the agent.
    Refuse {
        /// Why, for the agent and the log.
        reason: String,
    },
}

/// The session's "always" memory: exact action strings the person allowed for this session.
///
/// Lives in the supervisor's memory only; it is never written to disk and has no constructor
/// from stored data.
#[derive(Debug, Default)]
pub struct SessionMemory {
    always: HashSet<String>,
}

impl SessionMemory {
    /// An empty memory, for a new session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers the key; only [`decide`] can make one, and only for yellow verdicts.
    pub fn remember(&mut self, key: AlwaysKey) {
        self.always.insert(key.0);
    }

    /// Whether the exact string was remembered.
    pub fn contains(&self, action: &str) -> bool {
        self.always.contains(action)
    }

    /// How many entries the memory holds.
    pub fn len(&self) -> usize {
        self.always.len()
    }

    /// Whether the memory is empty.
    pub fn is_empty(&self) -> bool {
        self.always.is_empty()
    }
}

/// Turns a classification into a decision (DESIGN.md §4 table).
///
/// `action` is the exact string that "always" would remember (the command line as the agent
/// sent it, or a tool's canonical description). For a command line that is one command in
/// neutral shell housekeeping (an agent's wrapper, [`Classification::inner_command`]), that
/// command's text is the key instead, so "always" on the bare command matches the next
/// wrapped call of it and the other way round; a line with any other part keeps its own text. Blocked is refused at every level; red asks at
/// every level and is never rememberable; green commands never ask; in `safe` mode any compound
/// line is refused with a hint to split it, and in `auto` mode opaque constructs are refused.
pub fn decide(
    class: &Classification,
    kind: ActionKind,
    action: &str,
    autonomy: Autonomy,
    mode: ExecMode,
    memory: &SessionMemory,
) -> Decision {
    let action = match (kind, &class.inner_command) {
        (ActionKind::Command, Some(inner)) => inner.as_str(),
        _ => action,
    };
    if class.verdict == Verdict::Blocked {
        return Decision::Refuse {
            reason: refusal_text(class),
        };
    }
    if kind == ActionKind::Command {
        match mode {
            ExecMode::Safe if class.shape.compound || class.shape.opaque => {
                return Decision::Refuse {
                    reason: "safe execution mode offers simple commands only: split the line into separate commands without operators, redirections or substitutions".to_string(),
                };
            }
            ExecMode::Auto if class.shape.opaque => {
                return Decision::Refuse {
                    reason: format!(
                        "the command builds code at run time that tyba cannot analyse ({}); write it out literally",
                        class.decisive_reasons().join("; ")
                    ),
                };
            }
            _ => {}
        }
    }
    match class.verdict {
        Verdict::Green => {
            if kind == ActionKind::Edit && autonomy == Autonomy::Low {
                Decision::Ask(Ask {
                    verdict: Verdict::Green,
                    rememberable: None,
                    show_diff: true,
                })
            } else {
                Decision::Allow
            }
        }
        Verdict::Yellow => {
            if autonomy == Autonomy::High || memory.contains(action) {
                Decision::Allow
            } else {
                Decision::Ask(Ask {
                    verdict: Verdict::Yellow,
                    rememberable: Some(AlwaysKey(action.to_string())),
                    show_diff: kind == ActionKind::Edit && autonomy == Autonomy::Low,
                })
            }
        }
        Verdict::Red => Decision::Ask(Ask {
            verdict: Verdict::Red,
            rememberable: None,
            show_diff: kind == ActionKind::Edit && autonomy == Autonomy::Low,
        }),
        Verdict::Blocked => Decision::Refuse {
            reason: refusal_text(class),
        },
    }
}

/// The text an agent gets for a refused or denied classification: the decisive reasons.
pub fn refusal_text(class: &Classification) -> String {
    let reasons = class.decisive_reasons();
    if reasons.is_empty() {
        format!("refused by tyba ({})", class.verdict)
    } else {
        format!("refused by tyba: {}", reasons.join("; "))
    }
}
