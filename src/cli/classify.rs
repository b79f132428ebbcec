//! `tyba classify`.
use std::process::ExitCode;

/// Arguments of `tyba classify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The whole command line, one argument.
    pub command_line: Option<String>,
}

/// Runs `tyba classify`.
pub fn main(_a: Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
