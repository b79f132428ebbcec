//! # tyba-supervisor
//!
//! Launches an agent in its worktree under Landlock and seccomp and routes what it does
//! through the colour policy.
#![deny(missing_docs)]

/// The kernel cannot enforce the sandbox as required.
#[derive(Debug, thiserror::Error)]
#[error("sandbox unavailable: {0}")]
pub struct SandboxUnavailable(pub String);
