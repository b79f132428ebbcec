//! `tyba sessions`, `tyba autonomy`, `tyba stop`: seeing and steering the user's live sessions
//! from any terminal of theirs (issue 7).
//!
//! ```text
//! tyba sessions [--json]
//! tyba autonomy [SESSION] low|medium|high [--yes]
//! tyba stop [SESSION]
//! ```
//!
//! SESSION may be left out when exactly one session is live. Raising to `high` asks the
//! person to confirm on the terminal that runs the command (standard input and standard error
//! must be terminals); `--yes` confirms for scripts. Without either, nothing changes.
//!
//! These reach a session only through its socket, which no process of any sandbox can
//! reach (docs/sessions.md). Exit status: 0 done; 1 the session refused, is not running,
//! none is live, or the person declined at the confirmation; 2 usage errors (a malformed
//! level or session id, several live sessions and none named, `high` without a terminal or
//! `--yes`).

use super::UsageError;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tyba_policy::Autonomy;
use tyba_supervisor::broker::client::{self, ClientError};
use tyba_supervisor::broker::proto::{Request, SessionView};
use tyba_supervisor::broker::text::clean;

/// Arguments of `tyba sessions`.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// One JSON document: an array of sessions (docs/sessions.md lists the fields).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tyba autonomy`.
#[derive(Debug, clap::Args)]
pub struct AutonomyArgs {
    /// The session id (optional when only one is live), or the level when it is left out.
    #[arg(value_name = "SESSION")]
    pub first: String,
    /// The level: low, medium or high.
    #[arg(value_name = "LEVEL")]
    pub second: Option<String>,
    /// Confirm raising to high without asking (for scripts; high is for trusted workspaces).
    #[arg(long)]
    pub yes: bool,
}

/// Arguments of `tyba stop`.
#[derive(Debug, clap::Args)]
pub struct StopArgs {
    /// The session id (optional when only one is live).
    pub session: Option<String>,
}

/// A refusal or an unreachable session, reported with exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

fn client_err(e: ClientError) -> anyhow::Error {
    match e {
        ClientError::BadSession(_) | ClientError::Ambiguous { .. } => {
            UsageError(e.to_string()).into()
        }
        other => Refused(other.to_string()).into(),
    }
}

fn live_sessions() -> anyhow::Result<Vec<SessionView>> {
    let (live, silent) = client::list_sessions_and_silent().map_err(client_err)?;
    super::inbox::report_silent(&silent);
    Ok(live.into_iter().filter_map(|l| l.reply.session).collect())
}

fn level_name(v: &SessionView) -> &'static str {
    v.autonomy.map(Autonomy::as_str).unwrap_or("?")
}

fn render(sessions: &[SessionView]) -> String {
    if sessions.is_empty() {
        return "no live tyba sessions\n".to_string();
    }
    let mut out = String::new();
    for s in sessions {
        out.push_str(&format!(
            "session {}  {}autonomy {}  mode {}  started {}\n",
            clean(&s.id),
            if s.non_interactive {
                "non-interactive  "
            } else {
                ""
            },
            level_name(s),
            clean(&s.exec_mode),
            clean(&s.started_at)
        ));
        out.push_str(&format!("  agent     {}\n", clean(&s.agent.join(" "))));
        let branch = s
            .branch
            .as_deref()
            .map(|b| format!("  (branch {})", clean(b)))
            .unwrap_or_default();
        out.push_str(&format!("  worktree  {}{branch}\n", clean(&s.worktree)));
        out.push_str(&format!(
            "  pending {}  allowed {}  asked {}  denied {}  (supervisor pid {})\n",
            s.pending, s.allowed, s.asked, s.denied, s.pid
        ));
    }
    out.push_str("steer with: tyba autonomy [SESSION] low|medium|high | tyba stop [SESSION]\n");
    out
}

/// Runs `tyba sessions`.
pub fn sessions(a: SessionsArgs) -> anyhow::Result<ExitCode> {
    let live = live_sessions()?;
    let text = if a.json {
        format!("{}\n", serde_json::to_string(&live)?)
    } else {
        render(&live)
    };
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes()).and_then(|()| o.flush());
    Ok(ExitCode::SUCCESS)
}

/// Asks the person on this terminal to confirm the raise to high. `Ok(false)`: declined.
fn confirm_high(session: &str) -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() || !std::io::stderr().is_terminal() {
        return Err(UsageError(
            "raising autonomy to high needs confirmation on a terminal (high lets yellow commands — builds, scripts, installs — run without asking; for trusted workspaces only): run this in a terminal, or pass --yes"
                .to_string(),
        )
        .into());
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "tyba: raise session {session} to autonomy high? Yellow commands (builds, scripts, installs) will run without asking; red still asks. For trusted workspaces only. [y/N] "
    );
    let _ = err.flush();
    drop(err);
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Runs `tyba autonomy`.
pub fn autonomy(a: AutonomyArgs) -> anyhow::Result<ExitCode> {
    let (session, level) = match &a.second {
        None => (None, &a.first),
        Some(level) => (Some(a.first.as_str()), level),
    };
    let level: Autonomy = level.parse().map_err(UsageError)?;
    let socket = client::resolve_session(session).map_err(client_err)?;
    let id = socket
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let confirmed = level == Autonomy::High;
    if confirmed && !a.yes && !confirm_high(&id)? {
        return Err(Refused(format!(
            "not confirmed: session {id} keeps its autonomy level"
        ))
        .into());
    }
    let r = client::control(
        &socket,
        &Request::SetAutonomy {
            level,
            confirm_high: confirmed,
        },
    )
    .map_err(client_err)?;
    let previous = r.previous.map(Autonomy::as_str).unwrap_or("?");
    say!("session {id}: autonomy {previous} -> {level}; applies to its next action");
    Ok(ExitCode::SUCCESS)
}

/// Whether `pid` is a process that has not exited (a zombie has).
fn running(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold anything.
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        .is_some_and(|st| st != 'Z' && st != 'X')
}

/// How long `tyba stop` waits for the supervisor to exit before saying it is still ending.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// Runs `tyba stop`.
pub fn stop(a: StopArgs) -> anyhow::Result<ExitCode> {
    let socket = client::resolve_session(a.session.as_deref()).map_err(client_err)?;
    let r = client::control(&socket, &Request::Stop).map_err(client_err)?;
    let s = r.session.unwrap_or_default();
    let n = r.denied_pending.unwrap_or(0);
    say!(
        "session {}: stopped; {n} pending ask{} denied",
        clean(&s.id),
        if n == 1 { "" } else { "s" }
    );
    say!(
        "  before the stop: allowed {}  asked {}  denied {}",
        s.allowed,
        s.asked,
        s.denied
    );
    let branch = s
        .branch
        .as_deref()
        .map(|b| format!(" (branch {})", clean(b)))
        .unwrap_or_default();
    say!(
        "  worktree: {}{branch} (kept when it holds work; a worktree tyba made that the session left unchanged is removed)",
        clean(&s.worktree)
    );
    // The supervisor exits once the sandbox is gone.
    let deadline = Instant::now() + STOP_WAIT;
    while running(s.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if running(s.pid) {
        say!(
            "  the supervisor (pid {}) is still ending the agent's processes",
            s.pid
        );
    } else {
        say!("  the agent's processes have ended");
    }
    Ok(ExitCode::SUCCESS)
}
