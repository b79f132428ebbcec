//! `tyba hook`: answers the hook calls of Claude Code, Codex and Gemini CLI, and installs or
//! removes tyba's hook entry in their settings.
//!
//! Contract (docs/agents.md):
//! - `tyba hook claude-code|codex|gemini` reads one hook input (JSON) on stdin and answers in
//!   the agent's format. The call is classified like `tyba classify` (worktree = the git
//!   top-level of the input's `cwd`) and decided at autonomy `medium` (inside `tyba run`: the
//!   session's live level, asked of the session each call; `low` when it cannot be read),
//!   execution mode `auto`, with an empty "always" memory. Green is allowed, blocked refused with the reason. Yellow
//!   and red: inside `tyba run` (with [`session::SESSION_SOCKET_ENV`] set) they are asked
//!   through the session; outside one, Claude Code gets `ask` (its own prompt) and Codex and
//!   Gemini CLI a refusal saying how to be asked. When the decision shows the diff (an edit at
//!   autonomy `low`), the ask carries the diff of the change the tool would make
//!   ([`diff::for_call`]), or why there is none.
//! - Logged: inside `tyba run`, every decision the hook makes without asking (an allow, a
//!   refusal: blocked, an edit outside the worktree, unreadable input, no session to ask) is
//!   sent to the session ([`session::record`]) and written to its audit log as a `hook`
//!   line; asks are logged by the session with their answers. A record that cannot be
//!   delivered changes nothing: the answer stays what it was (a refusal stays a refusal).
//!   Outside a session nothing is logged.
//! - Fail closed: these agents let a call through when a hook crashes, times out or prints
//!   something they cannot read. So the answer is always written: any error, unreadable or
//!   unknown input, and even a panic, is a refusal with its reason.
//! - `tyba hook install|uninstall claude-code|codex|gemini [--project|--user]` merges (removes)
//!   tyba's entry in the agent's settings file, keeping everything else.

mod diff;
mod input;
mod install;
pub mod session;

use input::{Agent, Call, What};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tyba_policy::{
    decide, Action, ActionKind, Autonomy, Classification, Context, Decision, ExecMode, Finding,
    GitInspector, SessionMemory, Verdict,
};

/// Arguments of `tyba hook`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Answer a Claude Code `PreToolUse` hook call (JSON on stdin).
    #[command(name = "claude-code")]
    ClaudeCode,
    /// Answer a Codex `PreToolUse` hook call (JSON on stdin).
    Codex,
    /// Answer a Gemini CLI `BeforeTool` hook call (JSON on stdin).
    Gemini,
    /// Add tyba's hook entry to the agent's settings (idempotent).
    Install(install::Args),
    /// Remove tyba's hook entry from the agent's settings, and nothing else.
    Uninstall(install::Args),
}

/// Runs `tyba hook`.
///
/// # Errors
/// Only `install`/`uninstall` return errors (a settings file that is not valid JSON, no git
/// repository for `--project`, I/O); answering a hook call never fails: it refuses.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    match a.command {
        Command::ClaudeCode => Ok(answer(Agent::ClaudeCode)),
        Command::Codex => Ok(answer(Agent::Codex)),
        Command::Gemini => Ok(answer(Agent::Gemini)),
        Command::Install(i) => install::install(&i),
        Command::Uninstall(i) => install::uninstall(&i),
    }
}

/// What tyba answers one call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Let it through, saying why (Claude Code shows the reason): `tyba: green`, the
    /// session's autonomy, or what the person approved.
    Allow(String),
    /// Let the agent ask the person itself (Claude Code only), with this text.
    Ask(String),
    /// Refuse, with the reason the agent sees.
    Deny(String),
}

/// The most input a hook call may carry: a whole file written by an edit tool fits.
const MAX_INPUT_BYTES: u64 = 64 << 20;
/// How long tyba waits for the agent to finish writing the input.
const INPUT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
enum StdinError {
    #[error("cannot read the hook input: {0}")]
    Read(#[source] std::io::Error),
    #[error("the hook input is larger than {MAX_INPUT_BYTES} bytes")]
    TooLarge,
    #[error("the hook input did not end within {} seconds", INPUT_TIMEOUT.as_secs())]
    Timeout,
}

fn answer(agent: Agent) -> ExitCode {
    // A panic's default report would reach the agent as noise on stderr; its text is put
    // into the refusal instead.
    std::panic::set_hook(Box::new(|_| {}));
    let socket = std::env::var_os(session::SESSION_SOCKET_ENV)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let logged_to = socket.clone();
    let (outcome, seen) = match std::panic::catch_unwind(|| handle(agent, socket)) {
        Ok(done) => done,
        Err(payload) => (panic_refusal(&payload), Some(Seen::unread(String::new()))),
    };
    // DESIGN.md §6: every decision of the session is in its audit log. The answer is decided
    // already; a record that fails (or panics) cannot change it.
    if let (Some(sock), Some(record)) = (logged_to, seen.and_then(|s| s.record(agent, &outcome))) {
        let _ = std::panic::catch_unwind(|| session::record(&sock, &record));
    }
    emit(agent, &outcome)
}

/// What the hook saw of a call it decided alone (no ask carried it to the session), for the
/// session's audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    tool: String,
    action: String,
    verdict: String,
    reasons: Vec<String>,
    cwd: String,
}

/// The most characters of an action a record carries (a raw input, an internal tool's
/// arguments): the rest is cut, so that a record always fits the session's request line.
const MAX_RECORDED_ACTION: usize = 4000;

/// `text` trimmed and cut to [`MAX_RECORDED_ACTION`] characters, `…` marking a cut.
fn cut_action(text: &str) -> String {
    let text = text.trim();
    let mut out: String = text.chars().take(MAX_RECORDED_ACTION).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

impl Seen {
    /// An input that could not be read as a call: its raw text.
    fn unread(raw: String) -> Seen {
        Seen {
            action: raw,
            ..Seen::default()
        }
    }

    /// A call, before it is classified.
    fn of(call: &Call) -> Seen {
        Seen {
            tool: call.tool.clone(),
            action: match &call.what {
                What::Act(a) => key_of(a),
                _ => format!("{} {}", call.tool, call.input),
            },
            cwd: call.action_cwd.display().to_string(),
            ..Seen::default()
        }
    }

    /// The record of `outcome`; `None` for an ask (the session logs it with its answer).
    fn record(self, agent: Agent, outcome: &Outcome) -> Option<session::Record> {
        let (decision, reason) = match outcome {
            Outcome::Allow(_) => (session::Decision::Allow, None),
            Outcome::Deny(r) => (session::Decision::Refuse, Some(non_empty(r).to_string())),
            Outcome::Ask(_) => return None,
        };
        Some(session::Record {
            agent: agent.cli_name(),
            tool: self.tool,
            action: cut_action(&self.action),
            verdict: self.verdict,
            reasons: self.reasons,
            decision,
            reason,
            cwd: self.cwd,
        })
    }
}

/// The refusal naming a panic's message.
fn panic_refusal(payload: &Box<dyn std::any::Any + Send>) -> Outcome {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string());
    Outcome::Deny(format!(
        "refused by tyba: the hook failed internally ({what})"
    ))
}

/// The outcome of one call, and what the hook saw of it when it decided alone (`None` when
/// the session was asked: it logs the ask).
fn handle(agent: Agent, socket: Option<PathBuf>) -> (Outcome, Option<Seen>) {
    let bytes = match read_stdin() {
        Ok(b) => b,
        Err(e) => {
            return (
                Outcome::Deny(format!("refused by tyba: {e}")),
                Some(Seen::unread(String::new())),
            )
        }
    };
    let unread = || Some(Seen::unread(String::from_utf8_lossy(&bytes).into_owned()));
    match input::parse(agent, &bytes) {
        Ok(call) => decide_call(agent, &call, socket.as_deref(), None),
        // DESIGN.md §7: an unknown field or tool is never a silent allow; inside a session it
        // is asked with the raw input shown, outside one refused with the reason.
        Err(e) if e.is_unknown() && socket.is_some() => match input::parse_lenient(agent, &bytes) {
            Ok((call, unknowns)) if !unknowns.is_empty() => {
                let unknown = Unknown {
                    reason: e.to_string(),
                    raw: String::from_utf8_lossy(&bytes).trim().to_string(),
                    what: unknowns,
                };
                decide_call(agent, &call, socket.as_deref(), Some(&unknown))
            }
            Ok(_) => (Outcome::Deny(format!("refused by tyba: {e}")), unread()),
            Err(e) => (Outcome::Deny(format!("refused by tyba: {e}")), unread()),
        },
        Err(e) => (Outcome::Deny(format!("refused by tyba: {e}")), unread()),
    }
}

/// An input holding fields or a tool tyba does not know, to be asked about inside a session.
struct Unknown {
    /// The strict parser's reason.
    reason: String,
    /// The input as the agent sent it, shown to the person.
    raw: String,
    /// What was unknown.
    what: input::Unknowns,
}

fn read_stdin() -> Result<Vec<u8>, StdinError> {
    let (tx, rx) = std::sync::mpsc::channel();
    // The reader may block forever on an agent that never closes the pipe; the process exits
    // with its answer without waiting for it.
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut buf)
            .map(|_| buf);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(INPUT_TIMEOUT) {
        Ok(Ok(buf)) if buf.len() as u64 > MAX_INPUT_BYTES => Err(StdinError::TooLarge),
        Ok(Ok(buf)) => Ok(buf),
        Ok(Err(e)) => Err(StdinError::Read(e)),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(StdinError::Timeout),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(StdinError::Read(
            std::io::Error::other("the reader stopped without a result"),
        )),
    }
}

/// Classifies and decides one understood call; `unknown` when the input held fields or a
/// tool tyba does not know (then it is always asked, never remembered, never allowed alone).
/// With the outcome, what the hook saw when it decided alone (`None` once the session was
/// asked).
fn decide_call(
    agent: Agent,
    call: &Call,
    socket: Option<&Path>,
    unknown: Option<&Unknown>,
) -> (Outcome, Option<Seen>) {
    let mut seen = Seen::of(call);
    if let Some(u) = unknown {
        seen.action = u.raw.clone();
    }
    if call.what == What::Internal && unknown.is_none() {
        seen.verdict = Verdict::Green.to_string();
        return (Outcome::Allow("tyba: green".into()), Some(seen));
    }
    let cwd = match std::fs::canonicalize(&call.cwd) {
        Ok(c) => c,
        Err(e) => {
            return (
                Outcome::Deny(format!(
                    "refused by tyba: cannot resolve the agent's directory {}: {e}",
                    call.cwd.display()
                )),
                Some(seen),
            )
        }
    };
    let action_cwd = match std::fs::canonicalize(&call.action_cwd) {
        Ok(c) => c,
        Err(e) => {
            return (
                Outcome::Deny(format!(
                    "refused by tyba: cannot resolve the directory the call runs in {}: {e}",
                    call.action_cwd.display()
                )),
                Some(seen),
            )
        }
    };
    seen.cwd = action_cwd.display().to_string();
    let worktree = git_toplevel(&cwd).unwrap_or_else(|| cwd.clone());
    let policy = match super::load_policy(None, Some(&worktree)) {
        Ok(p) => p,
        Err(e) => {
            return (
                Outcome::Deny(format!(
                    "refused by tyba: the policy could not be loaded ({e:#})"
                )),
                Some(seen),
            )
        }
    };
    let home = super::home_dir();
    let inspector = tyba_git_guard::Inspector::new();
    let git: Option<&dyn GitInspector> = Some(&inspector);
    let ctx = Context {
        worktree: &worktree,
        cwd: &action_cwd,
        home: home.as_deref(),
        scratch: None,
        git,
    };
    let (mut class, kind, mut key) = match &call.what {
        What::Act(action) => (
            policy.classify(action, &ctx),
            kind_of(action),
            key_of(action),
        ),
        What::Opaque => {
            let mut c = Classification::green();
            c.add(Finding::new(
                Verdict::Yellow,
                "hook.opaque-tool",
                format!(
                    "`{}` reaches an MCP server, which tyba cannot see into",
                    call.tool
                ),
            ));
            (
                c,
                ActionKind::Other,
                format!("{} {}", call.tool, call.input),
            )
        }
        What::Internal | What::Unknown => (
            Classification::green(),
            ActionKind::Other,
            format!("{} {}", call.tool, call.input),
        ),
    };
    if let Some(u) = unknown {
        let what = match (&u.what.tool, u.what.fields.as_slice()) {
            (Some(t), _) => format!("the tool `{t}`"),
            (None, f) => format!(
                "the field{} {}",
                if f.len() == 1 { "" } else { "s" },
                f.iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        class.add(Finding::new(
            Verdict::Yellow,
            "hook.unknown-input",
            format!(
                "the {} hook input holds {what}, which tyba does not know ({}); the raw input is shown",
                agent.product(),
                u.reason
            ),
        ));
        // The person answers for the input as the agent sent it.
        key = u.raw.clone();
    }
    // Inside a session, its live level (`tyba autonomy` changes it); the strictest when the
    // session does not say (its asks then fail closed too).
    let autonomy = match socket {
        Some(s) => session::live_autonomy(s).unwrap_or(Autonomy::Low),
        None => Autonomy::Medium,
    };
    seen.verdict = class.verdict.to_string();
    seen.reasons = class
        .decisive_reasons()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let ask = match decide(
        &class,
        kind,
        &key,
        autonomy,
        ExecMode::Auto,
        &SessionMemory::new(),
    ) {
        Decision::Allow if unknown.is_none() => {
            let why = if class.verdict == Verdict::Green {
                "tyba: green".to_string()
            } else {
                format!("tyba: {} allowed at the session's autonomy", class.verdict)
            };
            return (Outcome::Allow(why), Some(seen));
        }
        // At any autonomy an unknown input waits for the person.
        Decision::Allow => tyba_policy::Ask {
            verdict: class.verdict.max(Verdict::Yellow),
            rememberable: None,
            show_diff: false,
        },
        Decision::Refuse { reason } => return (Outcome::Deny(reason), Some(seen)),
        Decision::Ask(ask) => ask,
    };
    let reasons: Vec<String> = seen.reasons.clone();
    let summary = if reasons.is_empty() {
        ask.verdict.to_string()
    } else {
        format!("{}: {}", ask.verdict, reasons.join("; "))
    };
    // DESIGN.md §4: at low autonomy an edit is asked with its diff shown before the write.
    let diff = ask
        .show_diff
        .then(|| diff::for_call(agent, &call.tool, &call.input, &action_cwd));
    // In a session the kernel lets the agent write only its worktree and the session's temp
    // dir: an approval of an edit elsewhere could not take effect (the write would fail with
    // EACCES after the person said yes), so it is refused at once, saying why.
    let outside_asked = std::env::var_os(OUTSIDE_FILES_ENV).is_some_and(|v| v == "ask");
    if let (Some(_), What::Act(Action::Write { paths } | Action::ApplyPatch { paths }), false) =
        (socket, &call.what, outside_asked)
    {
        let scratch = std::fs::canonicalize(std::env::temp_dir()).ok();
        if let Some(p) = paths.iter().find(|p| {
            let real = physical(&action_cwd, p, home.as_deref());
            !real.starts_with(&worktree) && !scratch.as_ref().is_some_and(|s| real.starts_with(s))
        }) {
            return (
                Outcome::Deny(format!(
                    "refused by tyba: `{p}` is outside the session's worktree, and in a tyba session the agent writes only its worktree (the kernel refuses the write even if approved); write it inside the worktree, or ask the person to do it"
                )),
                Some(seen),
            );
        }
    }
    match socket {
        Some(socket) => {
            let approved = cut_action(&key);
            let request = session::AskRequest {
                agent: agent.cli_name(),
                tool: call.tool.clone(),
                action: key,
                verdict: ask.verdict,
                reasons,
                // An input tyba does not fully know is answered once at a time.
                rememberable: ask.rememberable.is_some() && unknown.is_none(),
                cwd: action_cwd,
                worktree,
                diff,
                files: match &call.what {
                    What::Act(
                        Action::Read { paths }
                        | Action::Write { paths }
                        | Action::ApplyPatch { paths },
                    ) if unknown.is_none() => paths.clone(),
                    _ => Vec::new(),
                },
            };
            match session::ask_session(socket, &request) {
                // The session logged the ask and its answer.
                Ok(a @ (session::Answer::Once | session::Answer::Always)) => {
                    let how = if a == session::Answer::Once { "once" } else { "always" };
                    (
                        Outcome::Allow(format!(
                            "tyba: approved by the person ({how}): `{approved}` ({summary})"
                        )),
                        None,
                    )
                }
                Ok(session::Answer::Deny { reason }) => (
                    Outcome::Deny(match reason {
                        Some(r) if !r.trim().is_empty() => format!("denied by the person: {r}"),
                        _ => "denied by the person".to_string(),
                    }),
                    None,
                ),
                // Whether the session logged it is unknown: the refusal is recorded (a
                // second line at worst, never a missing one).
                Err(e) => (
                    Outcome::Deny(format!(
                        "refused by tyba: this needs the person's approval ({summary}), but the session could not be reached to ask ({e})"
                    )),
                    Some(seen),
                ),
            }
        }
        None => (
            match agent {
                Agent::ClaudeCode => Outcome::Ask(claude_ask_text(&summary, diff.as_deref())),
                Agent::Codex | Agent::Gemini => Outcome::Deny(format!(
                    "refused by tyba: this needs the person's approval ({summary}), and no one can be asked outside a tyba session; run the agent under `tyba run` to be asked, or do it another way"
                )),
            },
            None,
        ),
    }
}

/// Set to `ask` in the agent's environment by `tyba run` when the kernel layer asks about
/// files outside the worktree (`--outside-files`, the default, where /dev/fuse can be
/// opened), so the hook asks about such edits too.
pub(crate) const OUTSIDE_FILES_ENV: &str = "TYBA_OUTSIDE_FILES";

/// Where the path `p` (as the agent wrote it, relative to `cwd`, `~` for `home`) is
/// physically, resolved as the kernel resolves it ([`tyba_policy::resolve_path`]).
fn physical(cwd: &Path, p: &str, home: Option<&Path>) -> PathBuf {
    match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => tyba_policy::resolve_path(h, rest),
        _ if p == "~" => home.map_or_else(|| cwd.join(p), Path::to_path_buf),
        _ => tyba_policy::resolve_path(cwd, p),
    }
}

/// The reason Claude Code shows in its own prompt when tyba lets it ask: the summary, and the
/// diff when the decision shows one.
fn claude_ask_text(summary: &str, diff: Option<&str>) -> String {
    match diff {
        Some(d) => format!("tyba: {summary}\n{d}"),
        None => format!("tyba: {summary}"),
    }
}

fn kind_of(a: &Action) -> ActionKind {
    match a {
        Action::Exec { .. } => ActionKind::Command,
        Action::Write { .. } | Action::ApplyPatch { .. } => ActionKind::Edit,
        Action::Read { .. } | Action::Fetch { .. } => ActionKind::Other,
    }
}

/// The exact text an "always" answer would remember: the command line byte for byte, or the
/// tool and its paths.
fn key_of(a: &Action) -> String {
    match a {
        Action::Exec { command } => command.clone(),
        Action::Write { paths } => format!("write {}", paths.join(" ")),
        Action::Read { paths } => format!("read {}", paths.join(" ")),
        Action::ApplyPatch { paths } => format!("apply_patch {}", paths.join(" ")),
        Action::Fetch { url } => format!("fetch {url}"),
    }
}

/// The top of the git worktree containing `dir` (a directory holding `.git`).
fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// What goes out: stdout, stderr and the exit status.
struct Reply {
    stdout: String,
    stderr: String,
    code: u8,
}

/// The agent's wire format for an outcome.
fn reply(agent: Agent, outcome: &Outcome) -> Reply {
    let out = |stdout: serde_json::Value| Reply {
        stdout: format!("{stdout}\n"),
        stderr: String::new(),
        code: 0,
    };
    match (agent, outcome) {
        // Claude Code hooks reference, PreToolUse decision control.
        (Agent::ClaudeCode, o) => {
            let (decision, reason) = match o {
                Outcome::Allow(r) => ("allow", r.as_str()),
                Outcome::Ask(r) => ("ask", non_empty(r)),
                Outcome::Deny(r) => ("deny", non_empty(r)),
            };
            out(json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": decision,
                    "permissionDecisionReason": reason,
                }
            }))
        }
        // Codex can only refuse: allow is exit 0 with nothing on stdout; a refusal is exit 2
        // with the reason on stderr (an empty stderr with exit 2 would not block).
        (Agent::Codex, Outcome::Allow(_)) => Reply {
            stdout: String::new(),
            stderr: String::new(),
            code: 0,
        },
        (Agent::Codex, Outcome::Ask(r) | Outcome::Deny(r)) => Reply {
            stdout: String::new(),
            stderr: format!("{}\n", non_empty(r)),
            code: 2,
        },
        // Gemini CLI hooks reference, BeforeTool: decision allow|deny and reason.
        (Agent::Gemini, Outcome::Allow(_)) => out(json!({ "decision": "allow" })),
        (Agent::Gemini, Outcome::Ask(r) | Outcome::Deny(r)) => {
            out(json!({ "decision": "deny", "reason": non_empty(r) }))
        }
    }
}

fn non_empty(r: &str) -> &str {
    if r.trim().is_empty() {
        "refused by tyba"
    } else {
        r
    }
}

/// Writes the reply. If stdout cannot take it, falls back to exit 2 with the reason on
/// stderr, which every one of these agents reads as a refusal.
fn emit(agent: Agent, outcome: &Outcome) -> ExitCode {
    let r = reply(agent, outcome);
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(r.stdout.as_bytes())
        .and_then(|()| stdout.flush());
    if written.is_err() {
        let reason = match outcome {
            Outcome::Deny(r) | Outcome::Ask(r) => non_empty(r).to_string(),
            Outcome::Allow(_) => "refused by tyba: the answer could not be written".to_string(),
        };
        let _ = writeln!(std::io::stderr(), "{reason}");
        return ExitCode::from(2);
    }
    if !r.stderr.is_empty() {
        let _ = std::io::stderr().write_all(r.stderr.as_bytes());
    }
    ExitCode::from(r.code)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Runs `f`, turning a panic into a refusal naming it, as [`answer`] does.
    fn guarded<F: FnOnce() -> Outcome + std::panic::UnwindSafe>(f: F) -> Outcome {
        std::panic::catch_unwind(f).unwrap_or_else(|p| panic_refusal(&p))
    }

    #[test]
    fn a_panic_becomes_a_refusal_in_every_format() {
        let o = guarded(|| panic!("index out of bounds"));
        assert_eq!(
            o,
            Outcome::Deny(
                "refused by tyba: the hook failed internally (index out of bounds)".into()
            )
        );
        let n = 3;
        let o = guarded(move || panic!("bad {n}"));
        assert!(matches!(o, Outcome::Deny(ref r) if r.contains("bad 3")));
        let codex = reply(Agent::Codex, &o);
        assert_eq!((codex.code, codex.stdout.as_str()), (2, ""));
        assert!(codex.stderr.contains("bad 3"));
        let gemini: serde_json::Value =
            serde_json::from_str(&reply(Agent::Gemini, &o).stdout).unwrap();
        assert_eq!(gemini["decision"], "deny");
        let claude: serde_json::Value =
            serde_json::from_str(&reply(Agent::ClaudeCode, &o).stdout).unwrap();
        assert_eq!(claude["hookSpecificOutput"]["permissionDecision"], "deny");
    }

    #[test]
    fn claude_codes_own_ask_carries_the_diff_when_one_is_shown() {
        assert_eq!(claude_ask_text("red: x", None), "tyba: red: x");
        let o = Outcome::Ask(claude_ask_text("green", Some("--- /dev/null\n+++ a\n")));
        let v: serde_json::Value =
            serde_json::from_str(&reply(Agent::ClaudeCode, &o).stdout).unwrap();
        assert_eq!(
            v["hookSpecificOutput"]["permissionDecisionReason"],
            "tyba: green\n--- /dev/null\n+++ a\n"
        );
    }

    #[test]
    fn an_empty_reason_is_never_sent() {
        let o = Outcome::Deny("  ".into());
        assert_eq!(reply(Agent::Codex, &o).stderr, "refused by tyba\n");
        let g: serde_json::Value = serde_json::from_str(&reply(Agent::Gemini, &o).stdout).unwrap();
        assert_eq!(g["reason"], "refused by tyba");
    }

    #[test]
    fn a_record_is_made_for_allows_and_refusals_only_and_fits_a_request_line() {
        let seen = Seen::unread(format!("  {}  ", "x".repeat(MAX_RECORDED_ACTION + 10)));
        let r = seen
            .clone()
            .record(
                Agent::ClaudeCode,
                &Outcome::Deny("refused by tyba: bad".into()),
            )
            .unwrap();
        assert_eq!(r.decision, session::Decision::Refuse);
        assert_eq!(r.reason.as_deref(), Some("refused by tyba: bad"));
        assert_eq!(r.action.chars().count(), MAX_RECORDED_ACTION + 1);
        assert!(r.action.starts_with('x') && r.action.ends_with('…'));
        let a = seen
            .clone()
            .record(Agent::Codex, &Outcome::Allow("tyba: green".into()))
            .unwrap();
        assert_eq!(
            (a.decision, a.reason, a.agent),
            (session::Decision::Allow, None, "codex")
        );
        // Claude Code's own prompt: the person decides there, tyba's hook decided nothing.
        assert!(seen
            .record(Agent::ClaudeCode, &Outcome::Ask("tyba: red".into()))
            .is_none());
        assert_eq!(cut_action(" short "), "short");
    }
}
