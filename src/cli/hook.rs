//! `tyba hook` (owned by the agent-integration work).
use std::process::ExitCode;

/// Arguments of `tyba hook`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tyba hook`.
pub fn main(_a: Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
