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

/// `tyba run …` parsed against `run`'s own arguments only, without building the commands of
/// the other subcommands: about 0.2 ms of every launch (docs/performance-run.md, run 18).
/// `None` for any other command line and for any `run` line this parse does not accept
/// (help, errors), which the whole parser then parses, and prints, as always: the two
/// accept the same `run` lines (the test `run_alone_parses_as_the_whole_parser`).
fn parse_run_alone() -> Option<cli::run::Args> {
    parse_run_alone_from(std::env::args_os())
}

fn parse_run_alone_from(
    argv: impl IntoIterator<Item = std::ffi::OsString>,
) -> Option<cli::run::Args> {
    let mut argv = argv.into_iter();
    argv.next()?;
    let sub = argv.next()?;
    if sub != "run" {
        return None;
    }
    let cmd = <cli::run::Args as clap::Args>::augment_args(clap::Command::new("run"));
    let m = cmd
        .try_get_matches_from(std::iter::once(sub).chain(argv))
        .ok()?;
    <cli::run::Args as clap::FromArgMatches>::from_arg_matches(&m).ok()
}

fn main() -> ExitCode {
    tyba_supervisor::launch_trace::enable_from_env();
    tyba_supervisor::launch_trace::mark("run:main");
    // Inside a session, the process of an approved command that runs in its own sandbox
    // domain becomes that command's proxy here (tyba-supervisor's `runner` docs).
    tyba_supervisor::proxy::run_if_proxy();
    let cli = match parse_run_alone().map(|a| Cli {
        command: Command::Run(a),
    }) {
        Some(c) => Ok(c),
        None => Cli::try_parse(),
    };
    let cli = match cli {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { cli::EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    tyba_supervisor::launch_trace::mark("run:parsed");
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn argv(line: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("tyba")
            .chain(line.iter().copied())
            .map(Into::into)
            .collect()
    }

    /// Every `run` line the whole parser accepts, the parse of `run` alone accepts, into the
    /// same arguments; every line it refuses (or answers with help), the parse alone leaves
    /// to it. Lines of the other subcommands are never taken.
    #[test]
    fn run_alone_parses_as_the_whole_parser() {
        let lines: &[&[&str]] = &[
            &["run", "--", "true"],
            &["run", "claude"],
            &[
                "run",
                "--here",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "/bin/true",
            ],
            &[
                "run",
                "--worktree",
                "/tmp/w",
                "--branch",
                "tyba/x",
                "--",
                "codex",
                "exec",
                "-q",
            ],
            &[
                "run",
                "--allow-host",
                "a.example:443",
                "--allow-host",
                "b",
                "--pass-env",
                "K",
                "--",
                "sh",
                "-c",
                "x",
            ],
            &[
                "run",
                "--outside-files",
                "off",
                "--keep-worktree",
                "--",
                "aider",
                "--yes",
            ],
            &[
                "run",
                "--ask-outside-files",
                "--policy",
                "p.toml",
                "--",
                "gemini",
            ],
            &[
                "run",
                "--exec-mode",
                "safe",
                "--dangerously-bypass-shell-validation",
                "--allow-weaker-sandbox",
                "--",
                "x",
            ],
            &["run", "--autonomy=low", "--", "bash", "--norc"],
            &["run", "bash", "--here"],
            &["run", "--", "--here"],
            // an unknown flag first is the agent program (as `tyba run --version`)
            &["run", "--no-such-flag", "--", "x"],
            &["run", "--version"],
            // refused or answered by the whole parser
            &["run"],
            &["run", "--here", "--branch", "tyba/x", "--", "x"],
            &["run", "--outside-files", "maybe", "--", "x"],
            &[
                "run",
                "--ask-outside-files",
                "--outside-files",
                "off",
                "--",
                "x",
            ],
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--autonomy"],
            // other subcommands
            &["classify", "run"],
            &["--version"],
            &[],
        ];
        let mut taken = 0;
        for line in lines {
            let alone = parse_run_alone_from(argv(line));
            match Cli::try_parse_from(argv(line)) {
                Ok(Cli {
                    command: Command::Run(whole),
                }) => {
                    let alone = alone.unwrap_or_else(|| panic!("{line:?}: not taken alone"));
                    assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{line:?}");
                    taken += 1;
                }
                _ => assert!(
                    alone.is_none(),
                    "{line:?}: taken alone, not by the whole parser"
                ),
            }
        }
        assert_eq!(taken, 13, "the lines the whole parser accepts");
    }
}
