//! `tyba policy show`.
use std::process::ExitCode;

/// Arguments of `tyba policy`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tyba policy`.
pub fn main(_a: Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
