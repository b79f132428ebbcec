//! `tyba worktrees [--json] [--repo DIR]` and `tyba clean [--unmerged] [--dry-run]
//! [--repo DIR]`: the sessions' worktrees and branches of a repository, and removing the
//! finished ones that hold no work (issue 14; states in `tyba_supervisor::worktrees`).
//!
//! Exit status: 0 done; 1 when a removal failed or outside a repository.

use std::path::PathBuf;
use std::process::ExitCode;
use tyba_supervisor::worktrees::{self, Cleaned, State};

/// Arguments of `tyba worktrees`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// One JSON document: an array of {session, branch, path, state, head, unmerged_commits,
    /// uncommitted, pid, kept_work}.
    #[arg(long)]
    pub json: bool,
    /// The repository (default: the current directory's).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

/// Arguments of `tyba clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Also remove finished worktrees that hold work no other branch has (it is lost).
    #[arg(long)]
    pub unmerged: bool,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The repository (default: the current directory's).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
}

fn repo_dir(repo: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match repo {
        Some(r) => Ok(r),
        None => Ok(std::env::current_dir()?),
    }
}

/// Carries back the own branches of this repository's sessions that were killed before
/// their end (`tyba_supervisor::own_branch::recover`), so that their states count that work.
fn recover_killed(dir: &std::path::Path) {
    let (Some(g), Some(root)) = (
        tyba_supervisor::session::git_layout(dir),
        tyba_supervisor::own_branch::refs_root(),
    ) else {
        return;
    };
    for r in tyba_supervisor::own_branch::recover(&g.common_dir, &root) {
        super::run::report_carry(&r, "a killed session's");
    }
}

/// Runs `tyba worktrees`.
pub fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let dir = repo_dir(args.repo)?;
    recover_killed(&dir);
    let all = worktrees::list(&dir)?;
    if args.json {
        say_raw!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        say!("no session worktrees in this repository");
        return Ok(ExitCode::SUCCESS);
    }
    for w in &all {
        let path = w
            .path
            .as_ref()
            .map_or("(no worktree)".to_string(), |p| p.display().to_string());
        let detail = match w.state {
            State::Changed => format!("  ({})", worktrees::work_summary(w)),
            State::Running => w
                .pid
                .map(|p| format!("  (supervisor pid {p})"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        say!("{:<8} {}  {path}{detail}", w.state.to_string(), w.branch);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `tyba clean`.
pub fn clean(args: CleanArgs) -> anyhow::Result<ExitCode> {
    let dir = repo_dir(args.repo)?;
    if !args.dry_run {
        recover_killed(&dir);
    }
    let done = worktrees::clean(&dir, args.unmerged, args.dry_run)?;
    let mut failed = false;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    if done.is_empty() {
        say!("no session worktrees in this repository");
    }
    for c in &done {
        match c {
            Cleaned::Removed(w) => say!(
                "{verb} {} ({}{})",
                w.branch,
                w.state,
                w.path
                    .as_ref()
                    .map(|p| format!(", {}", p.display()))
                    .unwrap_or_default()
            ),
            Cleaned::Kept(w, why) => say!("kept {} ({}): {why}", w.branch, w.state),
            Cleaned::Failed(w, e) => {
                failed = true;
                tell!("tyba: could not remove {}: {e}", w.branch);
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
