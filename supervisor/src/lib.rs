//! # tyba-supervisor
//!
//! Launches an agent in its worktree under Landlock and seccomp and routes what it does
//! through the colour policy (DESIGN.md §5, issue 4).
//!
//! ## The process tree
//! ```text
//! tyba run (supervisor: notify loop, approvals, audit, pty relay; no sandbox)
//!  └─ stage 1: unshare(user, mount, pid, net, ipc, uts, cgroup namespaces), uid/gid map of
//!      │        the caller's ids
//!      └─ stage 2 = PID 1 of the new PID namespace: private /proc, private devpts (the
//!         agent's pty, its master handed to the supervisor), read-only binds over protected
//!         git files, loopback up, Landlock domain, seccomp filters (the last with a listener
//!         handed to the supervisor), then reaps
//!          └─ the agent (own session, own process group, own pty when there is a terminal)
//!              └─ the commands it starts (each exec classified by the policy)
//! ```
//! When the agent exits, stage 2 exits and the kernel kills everything left in the PID
//! namespace; when the supervisor dies, the parent-death signals bring the tree down.
//!
//! ## Threat model and limits
//! The agent and the commands it starts are assumed hostile. Landlock confines every open,
//! the namespaces hide other processes and the host network, seccomp denies the system calls
//! that break sandboxes and hands to the supervisor the ones Landlock does not cover
//! (`execve`/`execveat`, `connect`, `inotify_add_watch`, mode/owner/time changes). The supervisor never answers
//! `CONTINUE` on a pointer argument unless a kernel mechanism holds the line behind it; exec
//! classification is the exception by nature (an exec cannot be done on the process's behalf)
//! and is documented as such in `docs/sandbox.md`: a process racing its own argv can only run
//! what Landlock and the namespaces already allow.
//!
//! ## Example
//! ```no_run
//! use tyba_supervisor::{run, DenyAll, SessionConfig};
//! # fn cfg() -> SessionConfig { unimplemented!() }
//! let outcome = run(cfg(), std::sync::Arc::new(DenyAll::non_interactive()))?;
//! std::process::exit(outcome.exit_status);
//! # Ok::<(), tyba_supervisor::RunError>(())
//! ```
#![deny(missing_docs)]

pub mod agent;
pub mod approve;
pub mod bpf;
pub mod broker;
pub mod caches;
mod classify_worker;
pub mod control;
pub mod dirfd;
pub mod dns;
mod env;
mod exec;
pub mod git_layer;
pub mod here_watch;
mod hold;
mod launch;
pub mod launch_trace;
pub mod leftovers;
mod meta;
mod net;
mod notify;
pub mod objects_layer;
pub mod outside_fs;
pub mod own_branch;
mod procfs;
pub mod proxy;
mod ps_answer;
mod push_relay;
pub mod repo_leftovers;
mod runner;
pub mod sandbox;
pub mod session;
pub mod state_layer;
mod sys;
mod teller;
pub mod worktrees;

pub use approve::{AllowOnce, Answer, Approver, ApproverError, AskKind, AskRequest, DenyAll};
pub use env::{scrub_env, scrub_env_explained, SecretKind};
pub use launch::{
    end_session_on_signals, end_signal, run, run_with, AfterGo, Outcome, RunError, SessionConfig,
    END_SIGNALS,
};
pub use notify::AuditEvent;
pub use sandbox::{Enforcement, SandboxPlan};

/// Malloc arenas the supervisor's process keeps at most ([`limit_malloc_arenas`]).
pub const MALLOC_ARENAS: i32 = 2;

/// Caps the process's malloc arenas at [`MALLOC_ARENAS`], before `tyba run` starts its threads:
/// a session's threads mostly hand work to each other, and an arena per thread cost a launch
/// about 0.5 ms of CPU and 70 page faults here (docs/performance-run.md, run 18), in the
/// supervisor and again in each fork of its image. `false` when the allocator has no such
/// setting (the cap is a cost, never a protection).
pub fn limit_malloc_arenas() -> bool {
    sys::limit_malloc_arenas(MALLOC_ARENAS)
}

/// A signal's name as `signal(7)` gives it (`SIGSEGV`), or `signal N` for a number with no
/// name (real-time signals).
pub fn signal_name(n: i32) -> String {
    match nix::sys::signal::Signal::try_from(n) {
        Ok(s) => s.as_str().to_string(),
        Err(_) => format!("signal {n}"),
    }
}

/// The kernel cannot enforce the sandbox as required.
#[derive(Debug, thiserror::Error)]
#[error("sandbox unavailable: {0}")]
pub struct SandboxUnavailable(pub String);
