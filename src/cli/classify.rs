//! `tyba classify`: the colour of one command line or tool action, or of a stream of them.
//!
//! Contract (used by tests and tools outside the project):
//! - `tyba classify [--worktree DIR] [--cwd DIR] [--json] [--] COMMAND_LINE`
//! - `tyba classify --tool write|read|apply_patch --path P [--path P…]`, `--tool fetch --url URL`
//! - `tyba classify --jsonl`: JSON lines `{"cmd": …}` or `{"tool": …, "paths": […], "url": …,
//!   "cwd": …}` on stdin (a relative `cwd` is taken from the worktree root), one result line each.
//!
//! Exit status 0 when it classified (whatever the verdict), 2 on usage errors.

use super::UsageError;
use anyhow::Context as _;
use serde::Deserialize;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tyba_policy::{Action, Classification, Context, GitInspector, Policy};

/// Arguments of `tyba classify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root of the worktree the agent may change (default: the git top-level of the cwd, or
    /// the cwd).
    #[arg(long, value_name = "DIR")]
    pub worktree: Option<PathBuf>,
    /// Directory the action runs in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Read JSON lines from stdin and write one result line each.
    #[arg(long, conflicts_with_all = ["command_line", "tool", "json"])]
    pub jsonl: bool,
    /// Classify a tool action instead of a command line.
    #[arg(long, value_enum, conflicts_with = "command_line")]
    pub tool: Option<Tool>,
    /// A path the tool touches (repeatable).
    #[arg(long = "path", value_name = "P")]
    pub paths: Vec<String>,
    /// The URL of a fetch.
    #[arg(long)]
    pub url: Option<String>,
    /// Policy file layered over the embedded default and the user's.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The whole shell line, as one argument.
    #[arg(value_name = "COMMAND_LINE", allow_hyphen_values = true)]
    pub command_line: Option<String>,
}

/// Tool actions besides command lines.
#[derive(Debug, Clone, Copy, clap::ValueEnum, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// An edit tool writing files.
    Write,
    /// A read tool.
    Read,
    /// A patch over several files.
    #[value(name = "apply_patch", alias = "apply-patch")]
    ApplyPatch,
    /// A web fetch.
    Fetch,
    /// A shell command line (`cmd`); only in `--jsonl`.
    #[value(skip)]
    Exec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    cmd: Option<String>,
    tool: Option<Tool>,
    #[serde(default)]
    paths: Vec<String>,
    url: Option<String>,
    cwd: Option<String>,
    // Corpus fields carried along and ignored.
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    expect: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

/// Runs `tyba classify`.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = match &a.cwd {
        Some(c) => canonical(&here.join(c))?,
        None => canonical(&here)?,
    };
    let worktree = match &a.worktree {
        Some(w) => canonical(&here.join(w))?,
        None => git_toplevel(&cwd).unwrap_or_else(|| cwd.clone()),
    };
    let policy = super::load_policy(a.policy.as_deref(), Some(&worktree))?;
    let home = super::home_dir();
    let inspector = git_inspector(&policy);
    let git: Option<&dyn GitInspector> = inspector.as_deref();

    if a.jsonl {
        let stdin = std::io::stdin();
        let mut out = std::io::stdout().lock();
        for (n, line) in stdin.lock().lines().enumerate() {
            let line = line.context("cannot read stdin")?;
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line = serde_json::from_str(&line)
                .map_err(|e| UsageError(format!("line {}: {e}", n + 1)))?;
            let _ = (&parsed.id, &parsed.expect, &parsed.note);
            let cwd_n = match &parsed.cwd {
                Some(c) => canonical(&worktree.join(c)).unwrap_or_else(|_| worktree.join(c)),
                None => worktree.clone(),
            };
            let action = to_action(parsed.tool, parsed.cmd, parsed.paths, parsed.url)
                .map_err(|e| UsageError(format!("line {}: {e}", n + 1)))?;
            let ctx = Context {
                worktree: &worktree,
                cwd: &cwd_n,
                home: home.as_deref(),
                scratch: None,
                git,
            };
            let c = policy.classify(&action, &ctx);
            writeln!(out, "{}", serde_json::to_string(&report(&c))?)?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    let tool = a.tool.or(if a.command_line.is_some() {
        Some(Tool::Exec)
    } else {
        None
    });
    let action = to_action(tool, a.command_line, a.paths, a.url).map_err(UsageError)?;
    let ctx = Context {
        worktree: &worktree,
        cwd: &cwd,
        home: home.as_deref(),
        scratch: None,
        git,
    };
    let c = policy.classify(&action, &ctx);
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report(&c))?)?;
    } else {
        let colour = std::io::stdout().is_terminal();
        writeln!(out, "{}", human(&c, colour))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The git inspector the policy consults to resolve pushes and aliases against the
/// repository (tyba-git-guard).
fn git_inspector(_policy: &Policy) -> Option<Box<dyn GitInspector>> {
    Some(Box::new(tyba_git_guard::Inspector::new()))
}

fn to_action(
    tool: Option<Tool>,
    cmd: Option<String>,
    paths: Vec<String>,
    url: Option<String>,
) -> Result<Action, String> {
    match (tool, cmd) {
        (None | Some(Tool::Exec), Some(command)) => Ok(Action::Exec { command }),
        (Some(Tool::Write), None) => Ok(Action::Write { paths }),
        (Some(Tool::Read), None) => Ok(Action::Read { paths }),
        (Some(Tool::ApplyPatch), None) => Ok(Action::ApplyPatch { paths }),
        (Some(Tool::Fetch), None) => url
            .map(|url| Action::Fetch { url })
            .ok_or_else(|| "--tool fetch needs --url".to_string()),
        (Some(t), Some(_)) if t != Tool::Exec => {
            Err("give either a command line or a tool, not both".to_string())
        }
        _ => Err("nothing to classify: give a COMMAND_LINE, --tool, or --jsonl".to_string()),
    }
}

/// The JSON shape of one result: `verdict`, `rules`, `reasons`, `paths`, `hosts`,
/// `findings` (each `{verdict, rule, reason}`), `shape` (`{compound, opaque}`).
fn report(c: &Classification) -> serde_json::Value {
    serde_json::json!({
        "verdict": c.verdict,
        "rules": c.rules(),
        "reasons": c.findings.iter().map(|f| f.reason.as_str()).collect::<Vec<_>>(),
        // Shown as text: a path through a name that is no UTF-8 text is written with
        // U+FFFD where its bytes are (display only; the policy judged its bytes).
        "paths": c.paths.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
        "writes": c.writes.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>(),
        "hosts": c.hosts,
        "findings": c.findings,
        "shape": c.shape,
    })
}

fn human(c: &Classification, colour: bool) -> String {
    let (on, off) = if colour {
        let code = match c.verdict {
            tyba_policy::Verdict::Green => "32",
            tyba_policy::Verdict::Yellow => "33",
            tyba_policy::Verdict::Red => "31",
            tyba_policy::Verdict::Blocked => "1;35",
        };
        (format!("\x1b[{code}m"), "\x1b[0m".to_string())
    } else {
        (String::new(), String::new())
    };
    let mut s = format!("{on}{}{off}", c.verdict);
    let decisive: Vec<_> = c
        .findings
        .iter()
        .filter(|f| f.verdict == c.verdict)
        .collect();
    for f in decisive {
        s.push_str(&format!("\n  {}: {}", f.rule, f.reason));
    }
    s
}

fn canonical(p: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(p)
        .map_err(|e| UsageError(format!("cannot resolve {}: {e}", p.display())).into())
}

/// The top of the git worktree containing `dir` (a directory holding `.git`, directory or file).
fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}
