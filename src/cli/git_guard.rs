//! `tyba git-guard` (owned by the git guard work).
use std::process::ExitCode;

/// Arguments of `tyba git-guard`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tyba git-guard`.
pub fn main(_a: Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
