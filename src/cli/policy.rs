//! `tyba policy show`: the effective policy after merging the embedded default, the user's
//! file and the repository's (or `--policy FILE`), and whether the repository's file is
//! approved; `tyba policy allow|revoke [FILE]`: the person's approval of a repository's
//! policy file, by exact content (`super::trust`).
use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `tyba policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// `tyba policy` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print the effective policy (TOML, or JSON with --json) and where each layer came from.
    Show {
        /// Policy file layered over the embedded default and the user's.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Print JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
    /// Print the embedded default policy file as shipped.
    Default,
    /// Approve the exact content of a repository's policy file (default: `.tyba/policy.toml`
    /// of the current repository), so that it may widen access; run it outside a session.
    Allow {
        /// The policy file.
        file: Option<PathBuf>,
    },
    /// Withdraw the approval of a repository's policy file's current content.
    Revoke {
        /// The policy file.
        file: Option<PathBuf>,
    },
}

fn repo_top() -> anyhow::Result<Option<PathBuf>> {
    let here = std::env::current_dir().context("cannot read the current directory")?;
    Ok(here
        .ancestors()
        .find(|d| d.join(".git").exists())
        .map(PathBuf::from))
}

/// The policy file named, or the current repository's; canonical, with its bytes.
fn policy_file(file: Option<PathBuf>) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let f = match file {
        Some(f) => f,
        None => repo_top()?
            .map(|t| t.join(".tyba/policy.toml"))
            .ok_or_else(|| {
                super::UsageError("not in a git repository: name the policy file".into())
            })?,
    };
    let f = std::fs::canonicalize(&f)
        .map_err(|e| super::UsageError(format!("{}: {e}", f.display())))?;
    if f.file_name().is_none_or(|n| n != "policy.toml")
        || f.parent()
            .and_then(|d| d.file_name())
            .is_none_or(|n| n != ".tyba")
    {
        return Err(super::UsageError(format!(
            "{}: a repository's policy file is DIR/.tyba/policy.toml",
            f.display()
        ))
        .into());
    }
    let bytes = std::fs::read(&f).with_context(|| format!("cannot read {}", f.display()))?;
    Ok((f, bytes))
}

/// Runs `tyba policy`.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    match a.command {
        PolicyCommand::Show { policy, json } => {
            let top = repo_top()?;
            let (p, repo) = super::load_policy_explained(policy.as_deref(), top.as_deref())?;
            if let Some(r) = &repo {
                tell!("tyba: {}", r.describe());
            }
            if json {
                println!("{}", serde_json::to_string_pretty(p.config())?);
            } else {
                say!(
                    "# layers, in merge order: {}",
                    p.config().sources.join(", ")
                );
                if let Some(r) = &repo {
                    say!("# {}", r.describe());
                }
                // TOML escapes control characters in strings; the cleaning also takes the
                // format characters (bidi overrides) a repository's policy may hold.
                say!("{}", toml::to_string_pretty(p.config())?.trim_end());
            }
        }
        PolicyCommand::Default => print!("{}", tyba_policy::config::EMBEDDED_DEFAULT),
        PolicyCommand::Allow { file } => {
            if std::env::var_os("TYBA_SESSION").is_some() {
                // Inside a session the approvals dir is not writable anyway (Landlock, and a
                // read-only bind when a policy path covers it); say why plainly.
                return Err(super::UsageError(
                    "a policy file is approved by the person, outside a tyba session".into(),
                )
                .into());
            }
            let (f, bytes) = policy_file(file)?;
            let text = String::from_utf8_lossy(&bytes);
            tyba_policy::Policy::from_layers(vec![(f.display().to_string(), text.into_owned())])?;
            let repo = super::trust::repository_of(&f);
            let (rec, replaced) = super::trust::approve(&repo, &f, &bytes)?;
            say!(
                "approved {} (this exact content, for {}); recorded in {}",
                f.display(),
                repo.display(),
                rec.display()
            );
            if !replaced.is_empty() {
                say!(
                    "withdrew {} earlier approval(s) of this repository's policy: only this content is read as written",
                    replaced.len()
                );
            }
        }
        PolicyCommand::Revoke { file } => {
            let (f, bytes) = policy_file(file)?;
            let repo = super::trust::repository_of(&f);
            if super::trust::revoke(&repo, &bytes)? {
                say!("approval of {} withdrawn", f.display());
            } else {
                say!("{} (as it is now) was not approved", f.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
