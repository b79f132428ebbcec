//! `tyba inbox`, `tyba approve`, `tyba deny`, `tyba log`: answering the asks of the user's
//! live sessions from any terminal, and reading a session's audit log (issue 5 §3, §6).
//!
//! ```text
//! tyba inbox [--json] [--watch]
//! tyba approve ID [--always]
//! tyba deny ID [--reason TEXT]
//! tyba log [SESSION] [--json]
//! ```
//!
//! Sessions are found by listing the socket directory (`$XDG_RUNTIME_DIR/tyba/`, else
//! `$XDG_STATE_HOME/tyba/run/`); an ask id is `<session>-<n>`. Exit status: 0 done; 1 the
//! session refused the answer (unknown id, `--always` on a red ask) or cannot be reached;
//! 2 usage errors.
//!
//! Also here: [`session_approver`], how `tyba run` sets up the broker for a session.

use super::UsageError;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tyba_supervisor::broker::proto::{PendingView, WireAnswer};
use tyba_supervisor::broker::{audit, client, paths, prompt, Broker, BrokerConfig};
// Text from the agent's side has every control character replaced: the agent cannot send
// escape sequences to the person's terminal through a command line, a path or a diff.
use tyba_supervisor::broker::text::{self, clean};
use tyba_supervisor::{Approver, DenyAll};

/// The variable naming the session's hook socket in the agent's environment.
const HOOK_SOCKET_ENV: &str = "TYBA_SESSION_SOCKET";

/// Arguments of `tyba inbox`.
#[derive(Debug, clap::Args)]
pub struct InboxArgs {
    /// One JSON document: `[{"session": {…}, "pending": [{…}]}]`.
    #[arg(long)]
    pub json: bool,
    /// Keep listing as asks come and go (one listing per change; Ctrl-C to stop).
    #[arg(long)]
    pub watch: bool,
}

/// Arguments of `tyba approve`.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The ask id, as `tyba inbox` lists it (`SESSION-N`).
    pub id: String,
    /// Allow this exact command for the rest of the session (yellow commands only).
    #[arg(long)]
    pub always: bool,
}

/// Arguments of `tyba deny`.
#[derive(Debug, clap::Args)]
pub struct DenyArgs {
    /// The ask id, as `tyba inbox` lists it (`SESSION-N`).
    pub id: String,
    /// Why; the agent gets it as the refusal text, so it can try another way.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// Arguments of `tyba log`.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The session id (default: the most recent session's log).
    pub session: Option<String>,
    /// The raw JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// A refusal from the session, reported with exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

fn client_err(e: client::ClientError) -> anyhow::Error {
    match e {
        client::ClientError::BadId(_) => UsageError(e.to_string()).into(),
        other => Refused(other.to_string()).into(),
    }
}

fn snapshot() -> anyhow::Result<serde_json::Value> {
    let (sessions, silent) = client::list_sessions_and_silent().map_err(client_err)?;
    report_silent(&silent);
    Ok(serde_json::Value::Array(
        sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "session": s.reply.session,
                    "pending": s.reply.pending,
                })
            })
            .collect(),
    ))
}

fn describe(p: &PendingView) -> String {
    // The command behind the agent's wrapper, or the action cut to a bound: `--json` has
    // the whole line.
    let action = match &p.inner_command {
        Some(i) => format!(
            "run `{}` (inside the agent's shell wrapper; --json has the whole line)",
            text::shown_action(&p.action, Some(i))
        ),
        None => text::shown_action(&p.action, None),
    };
    let mut s = format!(
        "  {}  {}  {}  (waiting {}s{})\n",
        clean(&p.id),
        clean(&p.verdict),
        action,
        p.waited_ms / 1000,
        if p.always_allowed {
            "; --always allowed"
        } else {
            ""
        }
    );
    for r in &p.reasons {
        s.push_str(&format!("      why: {}\n", clean(r)));
    }
    if let Some(c) = &p.caller {
        s.push_str(&format!("      by {} in {}\n", clean(c), clean(&p.cwd)));
    } else if p.pid != 0 {
        s.push_str(&format!(
            "      by pid {} `{}` in {}\n",
            p.pid,
            clean(&p.argv.join(" ")),
            clean(&p.cwd)
        ));
    }
    for e in &p.env {
        s.push_str(&format!("      sets: {}\n", clean(e)));
    }
    if let Some(diff) = &p.diff {
        s.push_str("      diff:\n");
        for line in diff.lines() {
            s.push_str(&format!("        {}\n", clean(line)));
        }
    }
    s
}

fn render(v: &serde_json::Value) -> String {
    let mut out = String::new();
    let empty = Vec::new();
    let sessions = v.as_array().unwrap_or(&empty);
    if sessions.is_empty() {
        return "no live tyba sessions\n".to_string();
    }
    for s in sessions {
        let sess = &s["session"];
        out.push_str(&format!(
            "session {}  {}  (supervisor pid {}){}\n",
            clean(sess["id"].as_str().unwrap_or("?")),
            clean(sess["worktree"].as_str().unwrap_or("?")),
            sess["pid"],
            if sess["non_interactive"] == true {
                "  non-interactive: asks are denied at once"
            } else {
                ""
            }
        ));
        let pending: Vec<PendingView> =
            serde_json::from_value(s["pending"].clone()).unwrap_or_default();
        if pending.is_empty() {
            out.push_str("  no pending asks\n");
        }
        for p in &pending {
            out.push_str(&describe(p));
        }
    }
    out.push_str("answer with: tyba approve ID [--always] | tyba deny ID [--reason TEXT]\n");
    out
}

/// Runs `tyba inbox`.
pub fn inbox(a: InboxArgs) -> anyhow::Result<ExitCode> {
    let mut last: Option<String> = None;
    loop {
        let v = snapshot()?;
        // The waiting times change every second; a change is in what is pending.
        let key = v
            .as_array()
            .map(|ss| {
                ss.iter()
                    .map(|s| {
                        let ids: Vec<&str> = s["pending"]
                            .as_array()
                            .map(|p| p.iter().filter_map(|x| x["id"].as_str()).collect())
                            .unwrap_or_default();
                        format!("{}:{}", s["session"]["id"], ids.join(","))
                    })
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .unwrap_or_default();
        if last.as_deref() != Some(key.as_str()) {
            let text = if a.json { format!("{v}\n") } else { render(&v) };
            let mut o = std::io::stdout().lock();
            if a.watch && !a.json && last.is_some() {
                let _ = writeln!(o, "---");
            }
            if o.write_all(text.as_bytes())
                .and_then(|()| o.flush())
                .is_err()
            {
                return Ok(ExitCode::SUCCESS);
            }
            last = Some(key);
        }
        if !a.watch {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Says on stderr which sessions hold a socket but did not answer the listing, so that a
/// stuck session is never mistaken for none (`tyba stop SESSION` still reaches it).
pub(crate) fn report_silent(silent: &[(std::path::PathBuf, String)]) {
    for (sock, why) in silent {
        let id = sock
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        tell!(
            "tyba: session {} did not answer ({}); `tyba stop {}` still reaches it",
            clean(&id),
            clean(why),
            tyba_supervisor::broker::text::shell_word(&id)
        );
    }
}

/// Runs `tyba approve`.
pub fn approve(a: ApproveArgs) -> anyhow::Result<ExitCode> {
    let w = if a.always {
        WireAnswer::Always
    } else {
        WireAnswer::Once
    };
    client::answer(&a.id, w, None).map_err(client_err)?;
    say!(
        "{}: allowed {}",
        a.id,
        if a.always {
            "for the rest of the session (this exact command)"
        } else {
            "once"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `tyba deny`.
pub fn deny(a: DenyArgs) -> anyhow::Result<ExitCode> {
    client::answer(&a.id, WireAnswer::Deny, a.reason.clone()).map_err(client_err)?;
    say!("{}: denied", a.id);
    Ok(ExitCode::SUCCESS)
}

fn latest_log(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .max_by_key(|p| {
            // A log that reached its bound goes on in its `.tail` file.
            let mut tail = p.as_os_str().to_owned();
            tail.push(".tail");
            [p.clone(), PathBuf::from(tail)]
                .iter()
                .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
                .max()
                .unwrap_or(std::time::UNIX_EPOCH)
        })
}

/// Runs `tyba log`.
pub fn log(a: LogArgs) -> anyhow::Result<ExitCode> {
    let dir = paths::log_dir()
        .ok_or_else(|| UsageError("no state directory: set XDG_STATE_HOME or HOME".to_string()))?;
    let path = match &a.session {
        Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            paths::log_path(&dir, s)
        }
        Some(s) => return Err(UsageError(format!("`{s}` is not a session id")).into()),
        None => latest_log(&dir)
            .ok_or_else(|| Refused(format!("no session logs in {}", dir.display())))?,
    };
    let lines =
        audit::read(&path).map_err(|e| Refused(format!("cannot read {}: {e}", path.display())))?;
    if lines.is_empty() {
        // Valid (empty) JSON lines on stdout for --json; the note for people either way.
        if a.json {
            tell!("tyba: no entries in {}", path.display());
        } else {
            say!("no entries in {}", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = std::io::stdout().lock();
    for l in &lines {
        let text = if a.json {
            serde_json::to_string(l).unwrap_or_default()
        } else if l.kind == audit::TRUNCATED {
            format!("{}  -- {}", clean(&l.time), clean(&l.action))
        } else {
            let outcome = match (&l.answer, &l.reason) {
                (Some(ans), _) => format!("{} {ans}", l.decision),
                (None, _) => l.decision.clone(),
            };
            // The command behind the agent's wrapper, or the line cut to a bound: `--json`
            // has the whole line.
            let action = text::shown_action(&l.action, l.inner_command.as_deref());
            let mut t = format!(
                "{}  {:<8} {:<7} {:<12} {}",
                clean(&l.time),
                clean(&l.kind),
                clean(&l.verdict),
                clean(&outcome),
                action
            );
            if let Some(by) = &l.answered_by {
                t.push_str(&format!("  [by {}", clean(by)));
                if let Some(w) = l.wait_ms {
                    t.push_str(&format!(", waited {w} ms"));
                }
                t.push(']');
            }
            if let (Some(r), false) = (&l.reason, l.answer.as_deref() == Some("once")) {
                t.push_str(&format!("\n    {}", clean(r)));
            }
            t
        };
        if writeln!(o, "{text}").is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The session's hook socket, `tmp_dir/tyba-hook.sock`, named to the agent in `env`
/// ([`HOOK_SOCKET_ENV`], replacing any inherited value) before the agent is forked, so that
/// the broker behind it ([`session_approver`]) can start while the sandbox sets itself up;
/// `None`, and the person told, when the path is too long for a unix socket (107 bytes):
/// hooks then deny what they would ask, as they do when nothing listens there.
pub fn hook_socket(tmp_dir: &Path, env: &mut Vec<(OsString, OsString)>) -> Option<PathBuf> {
    env.retain(|(k, _)| k != HOOK_SOCKET_ENV);
    let hook_socket = tmp_dir.join("tyba-hook.sock");
    if hook_socket.as_os_str().len() >= 100 {
        tell!(
            "tyba: the temp dir path is too long for the hook socket: agent hooks will deny what they would ask"
        );
        return None;
    }
    env.push((HOOK_SOCKET_ENV.into(), hook_socket.clone().into_os_string()));
    Some(hook_socket)
}

/// The approver `tyba run` uses and the broker behind it, if any.
///
/// A [`Broker`] answerable from `tyba inbox/approve/deny` and steered by `tyba
/// autonomy/stop` through `control`, with the same-terminal prompt when standard input is a
/// terminal, and a hook-only socket in the session's private temp dir named by
/// `TYBA_SESSION_SOCKET` in the agent's environment. With `--non-interactive` the broker is
/// the same (listed by `tyba sessions` marked non-interactive, stoppable, writing the audit
/// log) but answers every ask at once with a deny, and there is no prompt. If the broker
/// cannot start, every ask is denied (fail closed) and the reason is printed.
///
/// The hook socket is `hook_socket` (from [`hook_socket`], already in the agent's
/// environment); a hook that finds nothing there gets a deny.
pub fn session_approver(
    non_interactive: bool,
    session: &tyba_supervisor::session::Session,
    policy: &tyba_policy::Policy,
    tmp_dir: &Path,
    hook_socket: Option<PathBuf>,
    control: &Arc<tyba_supervisor::control::SessionControl>,
) -> (Arc<dyn Approver>, Option<Broker>) {
    let mut cfg = BrokerConfig::new(&session.id, session.worktree.clone());
    cfg.hook_socket = hook_socket;
    cfg.nudge_after = policy.config().nudge_after;
    cfg.pause_after = policy.config().pause_after;
    cfg.policy = Some(policy.clone());
    cfg.home = super::home_dir();
    cfg.scratch = Some(std::fs::canonicalize(tmp_dir).unwrap_or_else(|_| tmp_dir.to_path_buf()));
    cfg.control = Arc::clone(control);
    cfg.non_interactive = non_interactive;
    let broker = match Broker::start(cfg) {
        Ok(b) => b,
        Err(e) if non_interactive => {
            tell!(
                "tyba: cannot start the session's broker ({e}): asks are denied as always in a non-interactive session, but this session is not listed, cannot be stopped by `tyba stop` and writes no audit log"
            );
            return (Arc::new(DenyAll::non_interactive()), None);
        }
        Err(e) => {
            tell!("tyba: cannot start the approval broker ({e}): every ask will be denied");
            return (
                Arc::new(DenyAll::with_note(format!(
                    "the approval broker could not start: {e}"
                ))),
                None,
            );
        }
    };
    if non_interactive {
        tell!(
            "tyba: non-interactive session {}: asks are denied at once; listed by `tyba sessions`, ended by `tyba stop {}`",
            session.id, session.id
        );
    } else if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        let word = prompt::secret_word();
        tell!(
            "tyba: asks are shown in this terminal marked with the session word «{word}» (a prompt without it is not tyba's), and listed by `tyba inbox`"
        );
        prompt::Prompt::start(&broker, word, Box::new(std::io::stdout()));
    } else {
        tell!(
            "tyba: asks wait for an answer from another terminal: tyba inbox, then tyba approve|deny {}-N",
            session.id
        );
    }
    if let Some(p) = broker.log_path() {
        tell!("tyba: audit log {}", p.display());
    }
    (Arc::new(broker.clone()), Some(broker))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_ask_lists_its_diff_indented_under_it() {
        let p = PendingView {
            id: "0a1b2c3d4e5f-1".into(),
            kind: "hook".into(),
            action: "write src/a.txt (Write via claude-code)".into(),
            verdict: "green".into(),
            reasons: Vec::new(),
            always_allowed: false,
            pid: 0,
            argv: Vec::new(),
            cwd: "/wt".into(),
            env: Vec::new(),
            waited_ms: 2000,
            caller: Some("Claude Code's tool call Write".into()),
            diff: Some("--- /dev/null\n+++ src/a.txt\n@@ -0,0 +1 @@\n+hi\x1b[2J\n".into()),
            inner_command: None,
        };
        assert_eq!(
            describe(&p),
            "  0a1b2c3d4e5f-1  green  write src/a.txt (Write via claude-code)  (waiting 2s)\n\
             \x20     by Claude Code's tool call Write in /wt\n\
             \x20     diff:\n\
             \x20       --- /dev/null\n\
             \x20       +++ src/a.txt\n\
             \x20       @@ -0,0 +1 @@\n\
             \x20       +hi?[2J\n"
        );
    }

    #[test]
    fn a_wrapped_command_is_listed_as_the_command_inside_and_a_long_line_cut() {
        let wrapper = "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/s/gemini-shell-1/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\ncargo build\n)\n__code=$?\nexit $__code";
        let mut p = PendingView {
            id: "0a1b2c3d4e5f-2".into(),
            kind: "command".into(),
            action: format!("run `{wrapper}`"),
            verdict: "yellow".into(),
            reasons: Vec::new(),
            always_allowed: true,
            pid: 7,
            argv: vec!["bash".into(), "-c".into()],
            cwd: "/wt".into(),
            env: Vec::new(),
            waited_ms: 0,
            caller: None,
            diff: None,
            inner_command: Some("cargo build".into()),
        };
        let first = describe(&p);
        let first = first.lines().next().unwrap();
        assert!(
            first.contains("  yellow  run `cargo build` (inside the agent's shell wrapper;"),
            "{first}"
        );
        assert!(!first.contains("shopt"), "{first}");
        // No command inside: the line itself, cut with the count of the rest.
        p.inner_command = None;
        p.action = format!("run `{}`", "f() { :; }\n".repeat(100));
        let first = describe(&p);
        let first = first.lines().next().unwrap();
        assert!(first.contains("run `f() { :; }⏎f() {"), "{first}");
        assert!(
            first.contains("more characters; whole line in the audit log)"),
            "{first}"
        );
        assert!(first.chars().count() < 320, "{first}");
    }
}
