//! `tyba`: the command line over tyba-policy, tyba-git-guard and tyba-supervisor.
//!
//! This file is the clap CLI only: it parses flags, builds a validated configuration and calls
//! the crates. Exit codes (documented in README.md):
//! - 0: done (for `classify`: it classified, whatever the verdict);
//! - 1: refused (a pre-push hook rejecting a ref, a denied action, a session refusing an
//!   answer or a control, or not running);
//! - 2: usage error (bad flags, bad input);
//! - 3: policy file error;
//! - 4: the sandbox cannot be set up as required;
//! - other codes from `tyba run` are the agent's own exit status.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;

/// tyba: a git-aware sandbox supervisor for AI coding agents.
#[derive(Debug, Parser)]
#[command(name = "tyba", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Classify a command line or a tool action: green, yellow, red or blocked.
    Classify(cli::classify::Args),
    /// Show the effective policy.
    Policy(cli::policy::Args),
    /// Refuse pushes to protected branches: check a push, install the pre-push hook.
    #[command(name = "git-guard")]
    GitGuard(cli::git_guard::Args),
    /// Run an agent in its worktree under Landlock and seccomp.
    Run(cli::run::Args),
    /// Answer an agent's hook call (Claude Code, Codex, Gemini CLI); install or remove hooks.
    Hook(cli::hook::Args),
    /// List the pending asks of your live sessions.
    Inbox(cli::inbox::InboxArgs),
    /// Allow a pending ask (once, or --always for a yellow command).
    Approve(cli::inbox::ApproveArgs),
    /// Refuse a pending ask, optionally with a reason the agent gets.
    Deny(cli::inbox::DenyArgs),
    /// Show a session's audit log.
    Log(cli::inbox::LogArgs),
    /// List your live sessions: agent, worktree, branch, autonomy, counts.
    Sessions(cli::sessions::SessionsArgs),
    /// Change a live session's autonomy level (raising to high asks you to confirm).
    Autonomy(cli::sessions::AutonomyArgs),
    /// End a live session: pending asks denied, the agent's processes ended, its work kept.
    Stop(cli::sessions::StopArgs),
    /// List the sessions' worktrees and branches: running, changed, merged, empty or gone.
    Worktrees(cli::worktrees::ListArgs),
    /// Remove finished session worktrees that are empty or merged (--unmerged: all finished).
    Clean(cli::worktrees::CleanArgs),
}

fn main() -> ExitCode {
    tyba_supervisor::launch_trace::enable_from_env();
    tyba_supervisor::launch_trace::mark("run:main");
    // Inside a session, the process of an approved command that runs in its own sandbox
    // domain becomes that command's proxy here (tyba-supervisor's `runner` docs).
    tyba_supervisor::proxy::run_if_proxy();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Classify(a) => cli::classify::main(a),
        Command::Policy(a) => cli::policy::main(a),
        Command::GitGuard(a) => cli::git_guard::main(a),
        Command::Run(a) => cli::run::main(a),
        Command::Hook(a) => cli::hook::main(a),
        Command::Inbox(a) => cli::inbox::inbox(a),
        Command::Approve(a) => cli::inbox::approve(a),
        Command::Deny(a) => cli::inbox::deny(a),
        Command::Log(a) => cli::inbox::log(a),
        Command::Sessions(a) => cli::sessions::sessions(a),
        Command::Autonomy(a) => cli::sessions::autonomy(a),
        Command::Stop(a) => cli::sessions::stop(a),
        Command::Worktrees(a) => cli::worktrees::list(a),
        Command::Clean(a) => cli::worktrees::clean(a),
    };
    tyba_supervisor::launch_trace::mark("run:returned");
    match result {
        Ok(code) => code,
        Err(e) => {
            tyba_supervisor::broker::text::say(&format!("tyba: {e:#}"));
            ExitCode::from(cli::exit_code_for(&e))
        }
    }
}
