//! `tyba git-guard`: check a push, install/uninstall the pre-push hook, run as the hook.
//!
//! Exit codes: 0 done (for `check`: the push is allowed; for `pre-push`: no protected ref);
//! 1 refused (`check`: blocked; `pre-push`: a protected ref or malformed input); 2 usage error.
use super::UsageError;
use clap::Subcommand;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tyba_git_guard::hook::{self, Installed, Uninstalled};
use tyba_git_guard::{Inspector, PushPlan};
use tyba_policy::redact::{redact_credentials, redact_url};
use tyba_policy::GitInvocation;

/// Arguments of `tyba git-guard`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: GuardCommand,
}

#[derive(Debug, Subcommand)]
enum GuardCommand {
    /// Install the pre-push hook in the repository's hooks directory (common git dir, or
    /// core.hooksPath), chaining an existing hook. Idempotent.
    Install {
        /// Repository (default: the current directory).
        #[arg(long)]
        repo: Option<PathBuf>,
    },
    /// Remove the pre-push hook installed by `install`, restoring a chained hook.
    Uninstall {
        /// Repository (default: the current directory).
        #[arg(long)]
        repo: Option<PathBuf>,
    },
    /// Run as git's pre-push hook: read ref lines on stdin, refuse protected remote refs.
    #[command(name = "pre-push")]
    PrePush {
        /// The remote's name (or URL when pushing to a URL), as git passes it.
        remote: String,
        /// The remote's URL, as git passes it.
        url: Option<String>,
        /// Policy file to load in addition to the defaults.
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Resolve a git command line (`-- git push …`) and print the verdict and destinations.
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Directory git would run in (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Policy file to load in addition to the defaults.
        #[arg(long)]
        policy: Option<PathBuf>,
        /// `[NAME=VALUE…] git ARGS…`
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// Runs `tyba git-guard`.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    match a.command {
        GuardCommand::Install { repo } => install(repo),
        GuardCommand::Uninstall { repo } => uninstall(repo),
        GuardCommand::PrePush {
            remote,
            url,
            policy,
        } => pre_push(&remote, url.as_deref(), policy.as_deref()),
        GuardCommand::Check {
            json,
            cwd,
            policy,
            command,
        } => check(json, cwd, policy.as_deref(), &command),
    }
}

fn current_dir() -> anyhow::Result<PathBuf> {
    Ok(std::env::current_dir()?)
}

fn install(repo: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let repo = match repo {
        Some(r) => r,
        None => current_dir()?,
    };
    let exe = std::env::current_exe()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    match hook::install(&repo, &exe)? {
        Installed::Fresh(p) => say!("installed the pre-push hook at {}", p.display()),
        Installed::Refreshed(p) => say!("the pre-push hook at {} is up to date", p.display()),
        Installed::Chained(p) => say!(
            "installed the pre-push hook at {}; the previous hook runs after it (pre-push{})",
            p.display(),
            hook::CHAINED_SUFFIX
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn uninstall(repo: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let repo = match repo {
        Some(r) => r,
        None => current_dir()?,
    };
    match hook::uninstall(&repo)? {
        Uninstalled::Removed(p) => say!("removed the pre-push hook at {}", p.display()),
        Uninstalled::NotInstalled(p) => say!("no tyba pre-push hook at {}", p.display()),
    }
    Ok(ExitCode::SUCCESS)
}

fn protected_branches(policy: Option<&Path>, worktree: Option<&Path>) -> Vec<String> {
    match super::load_policy(policy, worktree) {
        Ok(p) => p.config().protected_branches.clone(),
        // A broken policy file must not switch the guard off: fall back to the defaults.
        Err(e) => {
            tell!("tyba git-guard: {e:#}; using the default protected branches");
            vec!["main".to_string(), "master".to_string()]
        }
    }
}

fn refuse(why: &str) -> anyhow::Result<ExitCode> {
    tell!("tyba git-guard: push refused: {why}");
    Ok(ExitCode::from(1))
}

fn pre_push(remote: &str, url: Option<&str>, policy: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        return refuse(&format!("cannot read the hook input: {e}"));
    }
    let Ok(text) = String::from_utf8(input) else {
        return refuse("malformed pre-push input: not UTF-8");
    };
    let lines = match hook::parse_hook_input(&text) {
        Ok(l) => l,
        Err(e) => return refuse(&format!("malformed pre-push input: {e}")),
    };
    let cwd = std::env::current_dir().ok();
    let protected = protected_branches(policy, cwd.as_deref());
    let bad = hook::protected_lines(&lines, &protected);
    if bad.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    // git passes the URL as configured, credentials included; the message reaches the agent.
    let place = match url {
        Some(u) if u != remote => format!("{} ({})", redact_url(remote), redact_url(u)),
        _ => redact_url(remote).into_owned(),
    };
    for l in bad {
        let verb = if l.is_delete() { "delete" } else { "update" };
        tell!(
            "tyba git-guard: push refused: it would {verb} protected {} on remote {place}",
            l.remote_ref
        );
    }
    tell!(
        "tyba git-guard: protected branches ({}) are never pushed to; push a feature branch instead",
        protected.join(", ")
    );
    Ok(ExitCode::from(1))
}

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(n, _)| {
        !n.is_empty()
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    })
}

#[derive(serde::Serialize)]
struct CheckJson<'a> {
    verdict: &'static str,
    findings: &'a [tyba_policy::Finding],
    pushes: &'a [PushPlan],
}

fn check(
    json: bool,
    cwd: Option<PathBuf>,
    policy: Option<&Path>,
    command: &[String],
) -> anyhow::Result<ExitCode> {
    let mut env = Vec::new();
    let mut i = 0;
    while i < command.len() && is_assignment(&command[i]) {
        if let Some((n, v)) = command[i].split_once('=') {
            env.push((n.to_string(), v.to_string()));
        }
        i += 1;
    }
    match command.get(i) {
        Some(g) if g == "git" || g.ends_with("/git") => {}
        _ => {
            return Err(UsageError(
                "check expects `-- git …` (optionally after NAME=VALUE assignments)".into(),
            )
            .into())
        }
    }
    let args = &command[i + 1..];
    let cwd = match cwd {
        Some(c) if c.is_absolute() => c,
        Some(c) => current_dir()?.join(c),
        None => current_dir()?,
    };
    let protected = protected_branches(policy, Some(&cwd));
    let inv = GitInvocation {
        args,
        env: &env,
        cwd: &cwd,
        protected: &protected,
    };
    let analysis = Inspector::new().analyze(&inv);
    let blocked = !analysis.findings.is_empty();
    let verdict = if blocked { "blocked" } else { "allowed" };
    if json {
        let out = CheckJson {
            verdict,
            findings: &analysis.findings,
            pushes: &analysis.pushes,
        };
        say_raw!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(verdict, &analysis, &protected);
    }
    Ok(if blocked {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_text(verdict: &str, analysis: &tyba_git_guard::Analysis, protected: &[String]) {
    say!("{verdict}");
    for f in &analysis.findings {
        say!("  {}: {}", f.rule, f.reason);
    }
    for plan in &analysis.pushes {
        if let Some(why) = &plan.git_fails {
            say!("  git would refuse this push: {why}");
        }
        for t in &plan.targets {
            let url = t
                .url
                .as_deref()
                .filter(|u| *u != t.remote)
                .map(|u| format!(" ({})", redact_url(u)))
                .unwrap_or_default();
            let known = if t.remote_refs_known {
                ""
            } else {
                " [remote refs unknown]"
            };
            say!("  remote {}{url}{known}:", redact_url(&t.remote));
            for u in &t.updates {
                let action = if u.src.is_none() { "delete" } else { "update" };
                let src = u
                    .src
                    .as_deref()
                    .map(|s| format!(" <- {s}"))
                    .unwrap_or_default();
                let forced = if u.force { " forced" } else { "" };
                let possible = if u.certain { "" } else { " (possible)" };
                let prot = if tyba_git_guard::is_protected(&u.dst, protected) {
                    " PROTECTED"
                } else {
                    ""
                };
                say!("    {action} {}{src}{forced}{possible}{prot}", u.dst);
            }
        }
        for n in &plan.notes {
            say!("  note: {}", redact_credentials(n));
        }
    }
}
