//! `tyba policy show`: the effective policy after merging the embedded default, the user's
//! file and the repository's (or `--policy FILE`).
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
}

/// Runs `tyba policy`.
pub fn main(a: Args) -> anyhow::Result<ExitCode> {
    match a.command {
        PolicyCommand::Show { policy, json } => {
            let here = std::env::current_dir().context("cannot read the current directory")?;
            let top = here
                .ancestors()
                .find(|d| d.join(".git").exists())
                .map(PathBuf::from);
            let p = super::load_policy(policy.as_deref(), top.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(p.config())?);
            } else {
                println!(
                    "# layers, in merge order: {}",
                    p.config().sources.join(", ")
                );
                print!("{}", toml::to_string_pretty(p.config())?);
            }
        }
        PolicyCommand::Default => print!("{}", tyba_policy::config::EMBEDDED_DEFAULT),
    }
    Ok(ExitCode::SUCCESS)
}
