//! # tyba-git-guard
//!
//! Never lets a push reach a protected branch (`main`, `master`, in any letter case, on any
//! remote; DESIGN.md §2 "blocked" and §6), at two layers:
//!
//! - **command level**: [`Inspector`] implements [`tyba_policy::GitInspector`]. Given one
//!   `git` invocation (words after `git`, prefix assignments, directory), it resolves what
//!   git would do against the repository state read with `gix`: global options (`-C`,
//!   `--git-dir`, `-c`, `--config-env`), `GIT_DIR`/`GIT_CONFIG_*` assignments, aliases (git and
//!   `!` shell aliases), and for `git push` the remote refs it would update
//!   ([`push::resolve`]: option parsing with git's abbreviation and last-wins rules, the
//!   refspec grammar, `push.default`, `remote.*.push`, `remote.*.mirror`, `pushRemote`,
//!   `autoSetupRemote`, legacy `remotes/` and `branches/` files, local-path remotes).
//! - **ref level**: a pre-push hook ([`hook`]) that reads the ref lines git feeds it and
//!   refuses the same destinations.
//!
//! Findings are all [`Verdict::Blocked`](tyba_policy::Verdict::Blocked): `git.push.protected`
//! (a protected destination; the reason names the ref and the remote), `git.push.unresolved`
//! (the guard cannot see what would be pushed and a protected ref could be reached),
//! `git.guard.no-verify`, `git.guard.hooks-path` (`core.hooksPath`, `hook.*` or includes
//! changed by `-c`, `--config-env`, environment, or `git config` writes),
//! `git.guard.send-pack`. Network colours are the policy's business, not this crate's.
//!
//! ## Threat model and limits
//! The agent may spell a push any way git accepts. Where git would fail on a line that names a
//! protected destination, the line is still blocked. Where the remote's refs cannot be read
//! (network URLs), the guard assumes the remote has every branch (matching pushes) and may
//! hold protected refs that `--prune`/`--mirror` would delete. Shell aliases are split into
//! simple commands; anything opaque that mentions a push is blocked. External `git-<cmd>`
//! programs and code run by other tools are outside this crate: the pre-push hook and the
//! kernel layer hold behind it.
//!
//! ## Example
//! ```no_run
//! use tyba_git_guard::Inspector;
//! use tyba_policy::{GitInspector, GitInvocation};
//! let args: Vec<String> = ["push", "origin", "HEAD:main"].map(String::from).to_vec();
//! let protected = vec!["main".to_string(), "master".to_string()];
//! let inv = GitInvocation { args: &args, env: &[], cwd: std::path::Path::new("/repo"), protected: &protected };
//! let report = Inspector::new().inspect(&inv);
//! assert!(report.findings.iter().any(|f| f.rule == "git.push.protected"));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod alias;
mod config;
mod error;
pub mod hook;
mod inspect;
pub mod push;
pub mod refspec;
pub mod repo;

pub use error::{HookInputError, InstallError, RepoError};
pub use inspect::{
    Analysis, RULE_HOOKS_PATH, RULE_NO_VERIFY, RULE_PROTECTED, RULE_SEND_PACK, RULE_UNRESOLVED,
};
pub use push::{is_protected, PushPlan, RefUpdate, Target};
/// git's option errors, from the engine the guard shares with the policy.
pub use tyba_policy::git_options::OptionError;

use std::path::{Path, PathBuf};
use tyba_policy::{GitInspector, GitInvocation, GitReport};

/// The git guard's [`GitInspector`]: resolves invocations against the repository on disk.
/// Stateless; every call reads the repository afresh (a few milliseconds).
#[derive(Debug, Clone, Default)]
pub struct Inspector {}

impl Inspector {
    /// A new inspector.
    pub fn new() -> Self {
        Inspector {}
    }

    /// The full analysis of one invocation: findings, alias, and every push resolved (for
    /// `tyba git-guard check`). Never panics; errors reading the repository give
    /// conservative findings.
    pub fn analyze(&self, inv: &GitInvocation<'_>) -> Analysis {
        inspect::analyze(inv.args, inv.env, inv.cwd, inv.protected, 0)
    }
}

impl GitInspector for Inspector {
    fn inspect(&self, inv: &GitInvocation<'_>) -> GitReport {
        let a = self.analyze(inv);
        let pushes = a
            .pushes
            .iter()
            .flat_map(|p| p.targets.iter())
            .map(|t| tyba_policy::PushReport {
                url: t.url.clone().unwrap_or_else(|| t.remote.clone()),
                local_path: t.local_path.clone(),
                refs: t
                    .updates
                    .iter()
                    .map(|u| tyba_policy::PushRef {
                        dst: u.dst.clone(),
                        delete: u.src.is_none(),
                        force: u.force,
                    })
                    .collect(),
            })
            .collect();
        GitReport {
            findings: a.findings,
            alias: a.alias,
            pushes,
        }
    }

    fn pre_push_hook_path(&self, cwd: &Path) -> Option<PathBuf> {
        inspect::hook_path(cwd)
    }
}
