//! Actions an agent asks for, and the context they are classified in.

use crate::verdict::Finding;
use std::path::{Path, PathBuf};

/// What the agent asks to do (DESIGN.md §1 "action").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A whole shell command line, as the agent sent it (one string, parsed as bash).
    Exec {
        /// The command line.
        command: String,
    },
    /// An edit tool writing or creating files (`Write`, `Edit`, `MultiEdit`).
    Write {
        /// Paths as the agent wrote them (relative to the context's cwd, `~` allowed).
        paths: Vec<String>,
    },
    /// A read tool.
    Read {
        /// Paths as the agent wrote them.
        paths: Vec<String>,
    },
    /// A patch touching several files; the worst path wins.
    ApplyPatch {
        /// Paths the patch touches.
        paths: Vec<String>,
    },
    /// A web fetch or search by the agent's web tool: network, always red.
    Fetch {
        /// The URL (or search query) as given.
        url: String,
    },
}

/// Where an action is classified: the session's worktree, the directory the action runs in,
/// the home directory `~` stands for, and an optional git inspector.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// Absolute, physical path of the worktree root (symlinks resolved).
    pub worktree: &'a Path,
    /// Absolute directory the action runs in (may be outside the worktree).
    pub cwd: &'a Path,
    /// Absolute home directory (`~`, `$HOME`); `None` means unknown, so `~` paths are never green.
    pub home: Option<&'a Path>,
    /// The session's private temp dir (`TMPDIR` under `tyba run`), physical: paths in it are
    /// the session's own scratch space, treated like the worktree (credential and control
    /// rules still apply). `None` outside a session.
    pub scratch: Option<&'a Path>,
    /// Resolves `git push` and git aliases against the repository; without one, pushes are
    /// judged from the command line alone (blocked when they name a protected ref).
    pub git: Option<&'a dyn GitInspector>,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("worktree", &self.worktree)
            .field("cwd", &self.cwd)
            .field("home", &self.home)
            .field("scratch", &self.scratch)
            .field("git", &self.git.is_some())
            .finish()
    }
}

/// One `git` invocation as the shell would run it, for a [`GitInspector`].
#[derive(Debug, Clone, Copy)]
pub struct GitInvocation<'a> {
    /// Words after `git`, after quote removal and expansion (global options included), e.g.
    /// `["-C", "sub", "push", "origin", "HEAD:main"]`.
    pub args: &'a [String],
    /// Prefix assignments on the command (`GIT_DIR=… git push`), name and value.
    pub env: &'a [(String, String)],
    /// Absolute directory git starts in.
    pub cwd: &'a Path,
    /// Protected branch names (e.g. `main`, `master`), compared case-insensitively against
    /// `refs/heads/<name>` on every remote.
    pub protected: &'a [String],
}

/// What a git alias expands to (`git help config`, `alias.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AliasExpansion {
    /// A git alias: these words replace the alias name (the rest of the line follows).
    Git(Vec<String>),
    /// A `!` shell alias: this shell text runs with the remaining words as arguments.
    Shell(String),
}

/// What a [`GitInspector`] found about one invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitReport {
    /// Findings from resolving the invocation: a push updating a protected ref
    /// (`git.push.protected`), a guard bypass (`git.guard.*`), each blocked.
    pub findings: Vec<Finding>,
    /// The alias the subcommand expands to, if it is an alias.
    pub alias: Option<AliasExpansion>,
    /// Every push the invocation would make (its own, or inside its aliases), one entry per
    /// push URL: copied to [`crate::Classification::pushes`].
    pub pushes: Vec<crate::PushReport>,
}

/// Resolves git invocations against the repository state (configuration, refs, HEAD): the
/// seam through which the git guard (crate `tyba-git-guard`) feeds the colour policy.
pub trait GitInspector: Send + Sync {
    /// Inspects one invocation. Must never fail open: a push it cannot resolve that could
    /// reach a protected ref is reported as blocked.
    fn inspect(&self, inv: &GitInvocation<'_>) -> GitReport;

    /// The file git would run as the pre-push hook for a repository containing `cwd`
    /// (honouring `core.hooksPath`), if `cwd` is in a repository.
    fn pre_push_hook_path(&self, cwd: &Path) -> Option<PathBuf>;
}
