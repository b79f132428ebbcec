//! `tyba run` (owned by the supervisor work).
use std::process::ExitCode;

/// Arguments of `tyba run`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tyba run`.
pub fn main(_a: Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
