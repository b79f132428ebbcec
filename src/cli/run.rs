//! `tyba run`: the agent in its worktree under Landlock and seccomp (issue 4, DESIGN.md §5).
//!
//! `tyba run [--here | --worktree DIR] [--branch NAME] [--autonomy low|medium|high]
//! [--exec-mode safe|auto] [--dangerously-bypass-shell-validation] [--non-interactive]
//! [--policy FILE] [--allow-host HOST[:PORT]]… [--pass-env NAME]… [--allow-weaker-sandbox]
//! [--outside-files auto|require|off | --ask-outside-files]
//! -- AGENT [ARGS…]`
//!
//! Exit status: the agent's own (128 + N when killed by signal N); 4 when the sandbox cannot
//! be set up as required; 2 for usage errors; 3 for policy errors.

use super::UsageError;
use anyhow::Context as _;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tyba_policy::{Autonomy, ExecMode};
use tyba_supervisor::broker::text;
use tyba_supervisor::control::{SessionControl, SessionInfo};
use tyba_supervisor::outside_fs::OutsideMode;
use tyba_supervisor::session::{self, WorktreeChoice};
use tyba_supervisor::{Enforcement, RunError, SandboxPlan, SessionConfig};

/// Arguments of `tyba run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use the current directory as the worktree (implied outside a git repository).
    #[arg(long, conflicts_with = "worktree")]
    pub here: bool,
    /// Use DIR as the worktree when it exists; otherwise create a linked worktree there.
    #[arg(long, value_name = "DIR")]
    pub worktree: Option<PathBuf>,
    /// Branch of a new linked worktree, `tyba/NAME` (default `tyba/<session-id>`).
    #[arg(long, value_name = "NAME", conflicts_with = "here")]
    pub branch: Option<String>,
    /// Autonomy level: low, medium or high.
    #[arg(long, default_value = "medium", value_name = "LEVEL")]
    pub autonomy: String,
    /// Execution mode: safe or auto (dangerous_bypass needs the flag below).
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub exec_mode: String,
    /// Allow the dangerous_bypass execution mode (shell validation off; the sandbox stays).
    #[arg(long)]
    pub dangerously_bypass_shell_validation: bool,
    /// Nobody answers: every ask is denied with its reason.
    #[arg(long)]
    pub non_interactive: bool,
    /// Policy file layered over the embedded default and the user's.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A host the agent program itself may reach (repeatable), e.g. a model server.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_host: Vec<String>,
    /// Pass this environment variable although it looks like a secret (repeatable).
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
    /// Keep the session's new worktree and branch even when the session changed nothing.
    #[arg(long)]
    pub keep_worktree: bool,
    /// Start even when the kernel cannot enforce the whole sandbox (says what is missing).
    #[arg(long)]
    pub allow_weaker_sandbox: bool,
    /// Files beside the worktree and in the home that the policy does not open: `auto` (the
    /// default) asks when any process of the session opens, lists, creates, removes, renames
    /// or links one (they are served by tyba's own FUSE filesystem), where /dev/fuse can be
    /// opened, and otherwise says once that they fail unasked; `require` stops the start
    /// (exit 4) when they cannot be asked; `off` lets them fail unasked (EACCES).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "require", "off"])]
    pub outside_files: String,
    /// The same as `--outside-files require`.
    #[arg(long, conflicts_with = "outside_files")]
    pub ask_outside_files: bool,
    /// The agent program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "AGENT"
    )]
    pub agent: Vec<OsString>,
}

fn resolve_program(name: &OsString, cwd: &Path) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.as_os_str().is_empty() {
        return None;
    }
    if p.components().count() > 1 || p.is_absolute() {
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        return full.is_file().then_some(full);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| {
        use std::os::unix::fs::PermissionsExt;
        c.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

fn make_tmp_dir(base: &Path, id: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = base.join(format!("tyba-{}-{id}", nix_uid()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("cannot create the session's temp dir {}", dir.display()))?;
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn nix_uid() -> u32 {
    // The real uid names the temp dir; it is informational only.
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap_or(0)
}

/// The end of the session's worktree: removed when the session changed nothing (unless
/// `keep`), else the commands to review, merge and remove it, after a warning naming the
/// files the session wrote that run or approve code later ([`code_running`]). In the
/// person's own checkout (`--here`) only that warning, for what changed during the session
/// ([`session::Session::changed_here`]).
fn end_of_worktree(
    session: &session::Session,
    keep: bool,
    policy: &tyba_policy::Policy,
    watched: Option<tyba_supervisor::here_watch::Changes>,
) {
    match session.finish(keep) {
        session::Finished::NotOurs => {
            // The person's own checkout: what the session changed there is already in it.
            let here = session.changed_here(watched);
            let mut risky = code_running(session, here.paths, policy);
            // What tyba could not read whole is not vouched for.
            risky.extend(here.unread.into_iter().map(|d| {
                (
                    d,
                    "not read whole (more names than tyba reads at a session's end, or a directory it cannot read): look inside".to_string(),
                )
            }));
            if here.checkout_unread {
                risky.push((
                    "./".to_string(),
                    "the checkout has more names than tyba reads at a session's end (500,000), or one it cannot read: files it holds and links to what the session changed were not all looked at".to_string(),
                ));
            }
            if !risky.is_empty() {
                tell!(
                    "tyba: REVIEW: the session changed {} file{} in {} that run or approve code when you open, build or commit there (red for the agent to write):",
                    risky.len(),
                    if risky.len() == 1 { "" } else { "s" },
                    session.worktree.display()
                );
                for (path, why) in risky.iter().take(20) {
                    tell!("tyba:   {path}: {why}");
                }
                if risky.len() > 20 {
                    tell!("tyba:   … and {} more", risky.len() - 20);
                }
            }
        }
        session::Finished::Removed => tell!(
            "tyba: the session changed nothing: its worktree and branch {} are removed",
            session.created_branch.as_deref().unwrap_or("")
        ),
        session::Finished::RemoveFailed(e) => {
            tell!("tyba: the session changed nothing, but removing its worktree failed: {e}");
            if let Some(h) = session.removal_hint() {
                tell!("tyba: {h}");
            }
        }
        session::Finished::Kept {
            commits,
            uncommitted,
        } => {
            let risky = code_running(session, session.changed_paths(), policy);
            if !risky.is_empty() {
                tell!(
                    "tyba: REVIEW BEFORE MERGING: the session wrote {} file{} that run or approve code when you open, build or merge the work (red for the agent to write):",
                    risky.len(),
                    if risky.len() == 1 { "" } else { "s" }
                );
                for (path, why) in risky.iter().take(20) {
                    tell!("tyba:   {path}: {why}");
                }
                if risky.len() > 20 {
                    tell!("tyba:   … and {} more", risky.len() - 20);
                }
            }
            for l in session.review_hint(commits, uncommitted) {
                tell!("tyba: {l}");
            }
        }
    }
}

/// The lines about a session's own branch carried back ([`tyba_supervisor::own_branch`]).
pub(crate) fn report_carry(r: &tyba_supervisor::own_branch::CarryReport, whose: &str) {
    if let Some(to) = &r.moved_to {
        tell!(
            "tyba: {whose} commits are on its branch {} (now at {})",
            r.branch,
            &to[..to.len().min(12)]
        );
    }
    for n in &r.notes {
        tell!("tyba: warning: {n}");
    }
}

/// Of `paths` the session changed ([`session::Session::changed_paths`] or
/// [`session::Session::changed_here`]), those the policy
/// makes red or blocked for the agent to write (DESIGN.md §2: hooks, agent and IDE control
/// files, `.envrc`, credentials…), with the policy's reason: whatever program wrote them
/// (a script, a build, the agent's own edit tool), they act when the person opens, builds
/// or merges the work.
fn code_running(
    session: &session::Session,
    paths: Vec<String>,
    policy: &tyba_policy::Policy,
) -> Vec<(String, String)> {
    let home = super::home_dir();
    let wt = &session.worktree;
    paths
        .into_iter()
        .filter_map(|p| {
            let action = tyba_policy::Action::Write {
                paths: vec![p.clone()],
            };
            let ctx = tyba_policy::Context {
                worktree: wt,
                cwd: wt,
                home: home.as_deref(),
                scratch: None,
                git: None,
            };
            if let Some(why) = session::git_obeys(wt, &p) {
                return Some((p, why));
            }
            let c = policy.classify(&action, &ctx);
            (c.verdict >= tyba_policy::Verdict::Red).then(|| {
                let why = c
                    .findings
                    .iter()
                    .filter(|f| f.verdict >= tyba_policy::Verdict::Red)
                    .map(|f| f.reason.clone())
                    .next()
                    .unwrap_or_else(|| format!("{}", c.verdict));
                (p, why)
            })
        })
        .collect()
}

/// The end summary's lines about the agent's state ([`tyba_supervisor::state_layer`]).
fn report_merge(m: &tyba_supervisor::state_layer::MergeReport, root: &Path) {
    const SHOWN: usize = 40;
    if let Some(e) = &m.failed {
        tell!(
            "tyba: WARNING: the agent's data was not merged back to its state ({e}); its session copies are kept in {}",
            root.display()
        );
    } else if !m.merged.is_empty() {
        tell!(
            "tyba: merged back to the agent's state (known data, {}):",
            m.merged.len()
        );
        for p in m.merged.iter().take(SHOWN) {
            tell!("tyba:   {}", p.display());
        }
        if m.merged.len() > SHOWN {
            tell!("tyba:   … and {} more", m.merged.len() - SHOWN);
        }
    }
    if !m.dropped.is_empty() {
        tell!(
            "tyba: dropped from the agent's session copy of its state, not carried back ({}):",
            m.dropped.len()
        );
        for (p, why) in m.dropped.iter().take(SHOWN) {
            tell!("tyba:   {}: {why}", p.display());
        }
        if m.dropped.len() > SHOWN {
            tell!("tyba:   … and {} more", m.dropped.len() - SHOWN);
        }
    }
    if m.removed_in_copy > 0 {
        tell!(
            "tyba: {} files the agent removed in its session copy stay in its state",
            m.removed_in_copy
        );
    }
}

/// Runs `tyba run`.
pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    // Before any thread: the session's threads share two malloc arenas.
    tyba_supervisor::limit_malloc_arenas();
    // First, before any thread: a SIGTERM or SIGHUP to tyba ends the session and the clean-up
    // below still runs.
    if let Err(e) = tyba_supervisor::end_session_on_signals() {
        tell!("tyba: warning: a signal to tyba would end it without cleaning up: {e}");
    }
    let autonomy: Autonomy = args.autonomy.parse().map_err(UsageError)?;
    let (exec_mode, mode_warning) =
        ExecMode::requested(&args.exec_mode, args.dangerously_bypass_shell_validation)
            .map_err(UsageError)?;
    if let Some(w) = mode_warning {
        tell!("tyba: warning: {w}");
    }
    tyba_supervisor::launch_trace::mark("run:args");
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let program = resolve_program(&args.agent[0], &cwd).ok_or_else(|| {
        UsageError(format!(
            "agent program `{}` not found",
            args.agent[0].to_string_lossy()
        ))
    })?;
    let choice = if args.here {
        WorktreeChoice::Existing(cwd.clone())
    } else if let Some(dir) = &args.worktree {
        if dir.is_dir() {
            WorktreeChoice::Existing(dir.clone())
        } else {
            WorktreeChoice::New {
                at: Some(dir.clone()),
                branch: args.branch.clone(),
            }
        }
    } else {
        WorktreeChoice::New {
            at: None,
            branch: args.branch.clone(),
        }
    };
    if let Some(b) = &args.branch {
        // The agent writes only its own branches (DESIGN.md §5): `refs/heads/tyba/…`.
        if !b.starts_with("tyba/") || b.len() <= "tyba/".len() {
            return Err(UsageError(format!(
                "--branch {b}: the agent's branches are named tyba/NAME (it cannot write other branches of the repository)"
            ))
            .into());
        }
    }
    tyba_supervisor::launch_trace::mark("run:pre-session");
    let session = session::prepare(&cwd, &choice)?;
    for w in &session.warnings {
        tell!("tyba: warning: {w}");
    }
    // In the person's own checkout, what the session changes there is named at the end: from
    // the kernel's events when every directory is watched before the agent starts, walked
    // beside the launch (`tyba_supervisor::here_watch`).
    tyba_supervisor::launch_trace::mark("run:session");
    let here_watch = (session.created_branch.is_none() && session.git.is_some())
        .then(|| tyba_supervisor::here_watch::HereWatch::start(&session.worktree))
        .flatten()
        .map(Arc::new);
    // While the session runs, git refuses to remove its worktree and `tyba worktrees` lists
    // it as running.
    let running_lock = match (&session.created_branch, &session.main_repo) {
        (Some(_), Some(repo)) => {
            tyba_supervisor::worktrees::RunningLock::take(repo, &session.worktree, &session.id)
        }
        _ => None,
    };
    // The policy file named by `--policy` is read as written by the next session that names
    // it: tyba's own for this session, like the person's (reviews 24's r24-03, 25's r25-03).
    if let Some(p) = args
        .policy
        .as_deref()
        .and_then(|p| std::path::absolute(p).ok())
    {
        tyba_supervisor::broker::paths::set_session_policy_file(p);
    }
    tyba_supervisor::launch_trace::mark("run:pre-policy");
    let (policy, repo_layer) =
        super::load_policy_explained(args.policy.as_deref(), Some(&session.worktree))?;
    // Protected branches do not move locally either (DESIGN.md §5): the kernel keeps their
    // refs read-only in the sandbox (`SandboxPlan::build`), so in a checkout on one the
    // agent may edit but its commits fail; the person is told how to let it commit.
    if let Some(b) = session.protected_head(&policy.config().protected_branches) {
        tell!(
            "tyba: warning: {} is on {b}, a protected branch: the agent may change files but not commit there ({b} stays read-only). For commits of its own, run without --here (a new worktree on a branch tyba/<session>, to review and merge), or switch to a branch of your own first (git switch -c NAME)",
            session.worktree.display()
        );
    }
    let home = super::home_dir();
    // Held for the whole run, taken before the temp dir is made: a later session that finds
    // this session's files with nobody holding the lock removes them (a killed supervisor
    // cannot). The sweep of earlier sessions' files runs beside the agent.
    // Both on a memory filesystem unless the person chose a `TMPDIR` (`leftovers::session_base`).
    tyba_supervisor::launch_trace::mark("run:session-and-policy");
    let base = tyba_supervisor::leftovers::session_base();
    let live_lock = tyba_supervisor::leftovers::LiveLock::take(&base, &session.id);
    // The same thread returns the git stand-ins at the session's end, beside the end's checks
    // (each stand-in is a file or directory git reads as absent, so none of those checks
    // depends on whether it is still there): a thread started then would cost its start. It
    // starts once the agent may start (`SessionConfig::after_go`): on two CPUs, the sweep
    // took its share from the plan's when it ran beside it, and a thread started while the
    // sandbox is set up from the set-up's chain.
    let (end_tx, end_rx) =
        std::sync::mpsc::channel::<tyba_supervisor::sandbox::ControlPlaceholders>();
    let (sweeper_tx, sweeper_rx) = std::sync::mpsc::channel();
    let start_sweeper = {
        let own = session.id.clone();
        move || {
            std::thread::Builder::new()
                .name("tyba-sweep".into())
                .spawn(move || {
                    tyba_supervisor::leftovers::sweep(&own);
                    for stand_ins in end_rx {
                        drop(stand_ins);
                    }
                })
                .ok()
        }
    };
    let tmp_dir = make_tmp_dir(&base, &session.id)?;
    // The session's own branch, kept in a private directory while it runs (the agent writes
    // no other branch); first, the branches of sessions of this repository that were killed
    // before their end are carried back.
    let refs_root = tyba_supervisor::own_branch::refs_root();
    let mut own_branch = None;
    let mut own_branch_error = None;
    let branch = session.own_branch();
    if let (Some(g), Some(root)) = (&session.git, &refs_root) {
        for r in tyba_supervisor::own_branch::recover(&g.common_dir, root) {
            report_carry(&r, "a killed session's");
        }
        if let Some(b) = branch {
            if !tyba_supervisor::sandbox::uses_reftable(&g.common_dir) {
                match tyba_supervisor::own_branch::OwnBranch::prepare(
                    &g.common_dir,
                    &b,
                    &session.id,
                    root,
                ) {
                    Ok(o) => own_branch = Some(o),
                    Err(e) => own_branch_error = Some(format!("the session's own branch {b}: {e}")),
                }
            }
        }
    } else if session.git.is_some() && branch.is_some() {
        own_branch_error =
            Some(tyba_supervisor::own_branch::OwnBranchError::NoStateDir.to_string());
    }

    tyba_supervisor::launch_trace::mark("run:plan-start");
    let enforcement = Enforcement::probe();
    let path_env = std::env::var_os("PATH");
    // The agent's profile, from its resolved program.
    let resolved = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let markers = tyba_policy::agents::InstallMarkers::from_path(&resolved);
    let recognised = policy
        .config()
        .agents
        .profile_for(&resolved, home.as_deref(), &markers);
    // The agent's own directories in the shared temporary directory (Codex's daemon socket
    // rendezvous), made when absent: state of the session like the profiles' `state`.
    let (runtime_dirs, runtime_left_out) = tyba_supervisor::state_layer::prepare_runtime_dirs(
        recognised
            .as_ref()
            .map_or(&[][..], |r| &r.profile.runtime_dirs),
        None,
    );
    let mut config = policy.config().clone();
    for d in &runtime_dirs {
        let d = d.to_string_lossy().into_owned();
        if !config.filesystem.agent_state.contains(&d) {
            config.filesystem.agent_state.push(d);
        }
    }
    // Kept until the session ends; dropping it removes the placeholders left unchanged.
    let placeholders =
        tyba_supervisor::sandbox::ControlPlaceholders::create(&config, home.as_deref());
    tyba_supervisor::launch_trace::mark("run:plan-build");
    let mut plan = SandboxPlan::build(tyba_supervisor::sandbox::PlanInputs {
        session: &session,
        tmp_dir: &tmp_dir,
        config: &config,
        home: home.as_deref(),
        agent_program: Some(&program),
        agent_path_env: path_env.as_deref(),
    });
    plan.grant_own_branch(session.git.as_ref(), own_branch.as_ref());
    plan.unprotected.extend(own_branch_error);
    plan.notes.extend(
        runtime_left_out
            .into_iter()
            .map(|m| format!("an agent's own directory is not part of the session: {m}")),
    );
    // The git files the person's git obeys that do not exist yet get stand-ins, bound
    // read-only like the others (kept until the session ends, as the placeholders above).
    tyba_supervisor::launch_trace::mark("run:stand-ins");
    let git_stand_ins = tyba_supervisor::sandbox::git_stand_ins(&mut plan);
    // The person's tyba config (the user policy, the approvals of repository policies), state
    // (audit logs) and sockets stay the person's even when a policy path opens a tree holding
    // them or a link on the way leads into the worktree (review 22's r22-02, r22-04).
    tyba_supervisor::launch_trace::mark("run:own-dirs");
    for d in tyba_supervisor::broker::paths::own_dirs_named() {
        plan.keep_read_only(&d);
    }
    // The agents' state: the agent writes session-private copies; only known data is merged
    // back at the end (issue 13 class 8). One that cannot be made stops the start.
    tyba_supervisor::launch_trace::mark("run:state-layers");
    let layers_root = tyba_supervisor::state_layer::layers_root_for(&tmp_dir);
    let mut state_layers = match tyba_supervisor::state_layer::StateLayers::prepare(
        &config,
        home.as_deref(),
        &layers_root,
    ) {
        Ok(l) => l,
        Err(e) => {
            let _ = tyba_supervisor::sandbox::remove_tree(&layers_root);
            plan.unprotected.push(e);
            tyba_supervisor::state_layer::StateLayers::default()
        }
    };
    plan.state_layers = state_layers.layers.clone();
    // Every read-only bind's parents inside a writable root are pinned by name.
    plan.pin_parents();
    // The toolchain caches get session-private layers (removed when this is dropped, after
    // the sandbox is gone).
    let cache_layers = tyba_supervisor::caches::CacheLayers::prepare(&mut plan, &session.id);
    tyba_supervisor::launch_trace::mark("run:plan-done");
    plan.outside_files = if args.ask_outside_files {
        OutsideMode::Require
    } else {
        OutsideMode::parse(&args.outside_files).unwrap_or(OutsideMode::Auto)
    };
    let mut agent_hosts = policy.config().network.agent_hosts.clone();
    agent_hosts.extend(args.allow_host.iter().cloned());

    let (mut env, stripped) =
        tyba_supervisor::scrub_env_explained(std::env::vars_os(), &args.pass_env);
    env.retain(|(k, _)| k != "TMPDIR" && k != "TYBA_SESSION" && k != "TYBA_WORKTREE");
    // What the agent's profile hides at the source (the person's tmux and ssh agent
    // sockets): its start-up probes of them then find nothing to ask about.
    if let Some(r) = &recognised {
        let hidden: Vec<String> = env
            .iter()
            .filter(|(k, _)| r.profile.hidden_env.iter().any(|h| k == h.as_str()))
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        if !hidden.is_empty() {
            tell!(
                "tyba: hidden from {} (its profile): {}",
                r.name,
                hidden.join(", ")
            );
        }
        env.retain(|(k, _)| !r.profile.hidden_env.iter().any(|h| k == h.as_str()));
    }
    env.push(("TMPDIR".into(), tmp_dir.clone().into_os_string()));
    env.push(("TYBA_SESSION".into(), session.id.clone().into()));
    env.push((
        "TYBA_WORKTREE".into(),
        session.worktree.clone().into_os_string(),
    ));
    // The agent's hook asks about edits outside the worktree instead of refusing them: the
    // kernel layer can then grant them (`--outside-files`, when /dev/fuse can be opened; the
    // launch says so when it cannot). Set by the agent it only turns a refusal into an ask.
    env.retain(|(k, _)| k != super::hook::OUTSIDE_FILES_ENV);
    if plan.outside_files != OutsideMode::Off
        && tyba_supervisor::outside_fs::fuse_openable().is_ok()
    {
        env.push((super::hook::OUTSIDE_FILES_ENV.into(), "ask".into()));
    }

    tell!(
        "tyba: session {}: worktree {}",
        session.id,
        session.worktree.display()
    );
    if let Some(b) = &session.created_branch {
        tell!("tyba: new branch {b}");
    }
    for n in &enforcement.not_enforced {
        tell!("tyba: not enforced: {n}");
    }
    if let Some(r) = &repo_layer {
        tell!("tyba: {}", r.describe());
    }
    for n in &plan.notes {
        tell!("tyba: note: {n}");
    }
    if args.allow_weaker_sandbox {
        for u in &plan.unprotected {
            tell!("tyba: not enforced: {u}");
        }
    }
    let missing: Vec<String> = plan
        .unprotected_control_files(policy.config(), home.as_deref())
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        tell!(
            "tyba: not enforced: these agent control files do not exist, so they cannot be kept read-only: {}",
            missing.join(", ")
        );
    }
    let made: Vec<String> = placeholders
        .paths()
        .map(|p| p.display().to_string())
        .collect();
    if !made.is_empty() {
        tell!(
            "tyba: made empty, to keep read-only for the session (removed at the end if unchanged): {}",
            made.join(", ")
        );
    }
    if !stripped.is_empty() {
        tell!(
            "tyba: withheld from the agent (secrets; --pass-env NAME to pass): {}",
            stripped
                .iter()
                .map(|(n, k)| format!("{n} ({})", k.describe()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut info = SessionInfo::new(
        args.agent
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exec_mode.as_str(),
    );
    info.git_dir = session.git.as_ref().map(|g| g.git_dir.clone());
    let control = SessionControl::new(autonomy, info);
    // The broker behind the hook socket starts once the sandbox is forked (`run_with`); the
    // agent's environment names the socket now.
    let hook_socket = super::inbox::hook_socket(&tmp_dir, &mut env);
    // Made on the launch's own thread (`run_with`), handed back here.
    let (made_tx, made_rx) = std::sync::mpsc::channel();
    let make_approver = {
        let (session, policy, tmp_dir) = (session.clone(), policy.clone(), tmp_dir.clone());
        let (control, roots, non_interactive) = (
            Arc::clone(&control),
            plan.read_write.clone(),
            args.non_interactive,
        );
        move || {
            let (approver, broker) = super::inbox::session_approver(
                non_interactive,
                &session,
                &policy,
                &tmp_dir,
                hook_socket,
                &control,
            );
            // What the agent may leave in the repository that breaks the person's next git
            // command (lock files, directories moved, `HEAD`): recorded before it runs,
            // checked at the end.
            let snapshot = session.git.as_ref().map(|g| {
                tyba_supervisor::repo_leftovers::RepoSnapshot::take(
                    &session.worktree,
                    g,
                    session.created_branch.is_none(),
                    &roots,
                )
            });
            // What git would put back for tyba's own files in this checkout (review 25's
            // r25-04), read here beside the sandbox's set-up, before the agent runs.
            let own_records = session.own_records();
            let _ = made_tx.send((broker, snapshot, own_records));
            approver
        }
    };
    let plan_has_objects_layer = plan.objects_layer.is_some();
    let cfg = SessionConfig {
        session: session.clone(),
        plan,
        enforcement,
        allow_weaker: args.allow_weaker_sandbox,
        program,
        argv: args.agent.clone(),
        env,
        // Kept for the end of the session (the changed files are judged by it).
        policy: policy.clone(),
        control: Arc::clone(&control),
        exec_mode,
        agent_hosts,
        home,
        use_pty: true,
        here_watch: here_watch.clone(),
        after_go: Some(tyba_supervisor::AfterGo(Box::new(move || {
            let _ = sweeper_tx.send(start_sweeper());
        }))),
    };
    tyba_supervisor::launch_trace::mark("run:launch");
    // The agent's new objects reach the person's store while the session runs (their objects
    // layer only: `tyba_supervisor::objects_layer`).
    let carrier = own_branch
        .as_ref()
        .filter(|_| plan_has_objects_layer)
        .and_then(tyba_supervisor::own_branch::OwnBranch::start_carrying);
    let result = tyba_supervisor::run_with(cfg, make_approver);
    if let Some(c) = carrier {
        c.stop();
    }
    let (broker, repo_snapshot, own_records) = made_rx.try_recv().unwrap_or((None, None, None));
    let sweeper = sweeper_rx.try_recv().ok().flatten();
    // No process of the sandbox is left: its events are all queued. A hard link the session
    // made is a name the events may not have seen: the full look then.
    tyba_supervisor::launch_trace::mark("end:start");
    // The git stand-ins go back to the pool (or away) on the sweep's thread, beside the checks
    // below; joined before the session's lock is released. Without that thread, here.
    let git_stand_ins = match end_tx.send(git_stand_ins) {
        Ok(()) => None,
        Err(back) => Some(back.0),
    };
    drop(end_tx);
    let mut here_watch = here_watch.and_then(|w| Arc::try_unwrap(w).ok());
    // The watch's thread reads the last events while the repository is checked below (the
    // checks repair only the git dir, which the watch leaves out).
    if let Some(w) = here_watch.as_mut() {
        w.stop();
    }
    let sandbox_ended = std::time::SystemTime::now();
    // No process of the sandbox is left: the agent's own branch goes back to the repository.
    if let Some(o) = own_branch.take() {
        let r = o.carry_back(&session.id);
        report_carry(&r, "the session's");
        if let (true, Some(g)) = (r.broken && plan_has_objects_layer, &session.git) {
            if let Some(m) =
                tyba_supervisor::objects_layer::mend_worktree(&session.worktree, &g.git_dir)
            {
                tell!("tyba: warning: {m}");
            }
        }
    }
    tyba_supervisor::launch_trace::mark("end:repo-check");
    if let Some(s) = &repo_snapshot {
        let found = s.check(sandbox_ended);
        if !found.is_empty() {
            tell!("tyba: the session left things in the repository that would trip your git:");
            for f in found {
                tell!("tyba:   {}: {}", f.found, f.done);
            }
        }
    }
    if let Some(before) = &own_records {
        let now = session.own_records();
        let changed = now
            .as_ref()
            .map_or_else(|| vec!["the records git keeps"], |n| before.changed(n));
        if !changed.is_empty() {
            tell!(
                "tyba: REVIEW: the session changed what git keeps for tyba's own configuration in this checkout ({}): {}. Your `git restore` or `git reset --hard` would install the agent's version; look with `git diff --cached` and `git log -p` on it first.",
                before.paths.join(", "),
                changed.join(" and ")
            );
        }
    }
    let watched = here_watch
        .as_mut()
        .and_then(tyba_supervisor::here_watch::HereWatch::finish)
        .filter(|_| result.as_ref().is_ok_and(|o| !o.hard_links));
    // No process of the sandbox is left: carry the known data back, drop the rest.
    tyba_supervisor::launch_trace::mark("end:state-merge");
    let merge = result
        .is_ok()
        .then(|| tyba_supervisor::state_layer::merge_back(&state_layers.layers));
    if merge.as_ref().is_some_and(|m| m.failed.is_some()) {
        // Kept for the person to look at: what the agent wrote is there.
        state_layers.root = None;
    } else if let Err(e) = state_layers.remove() {
        tell!("tyba: WARNING: the session copies of the agent's state are left behind: {e}");
    }
    tyba_supervisor::launch_trace::mark("end:broker-close");
    if let Some(b) = &broker {
        // Fail closed: whatever still waits is denied and logged so.
        b.close("the session ended");
    }
    if let Err(e) = tyba_supervisor::sandbox::remove_tree(&tmp_dir) {
        tell!("tyba: WARNING: the session's temp dir is left behind: {e}");
    }
    tyba_supervisor::launch_trace::mark("end:drops");
    cache_layers.remove_detached();
    tyba_supervisor::launch_trace::mark("end:stand-ins");
    drop(git_stand_ins);
    tyba_supervisor::launch_trace::mark("end:placeholders");
    drop(placeholders);
    if let Some(t) = sweeper {
        let _ = t.join();
    }
    tyba_supervisor::launch_trace::mark("end:swept");
    if let Some(l) = live_lock {
        l.release();
    }
    let outcome = match result {
        Ok(o) => o,
        Err(RunError::Unavailable(u)) => {
            drop(running_lock);
            end_of_worktree(&session, false, &policy, watched);
            // An end signal that came before the sandbox was ready killed its set-up: the
            // session ended by that signal, not for want of a sandbox.
            if let Some(sig) = tyba_supervisor::end_signal() {
                tell!(
                    "tyba: session {} ended by {sig} before its sandbox was ready",
                    session.id
                );
                return Ok(ExitCode::from(128 + sig as u8));
            }
            return Err(anyhow::Error::new(u));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(sig) = outcome.ended_by {
        tell!("tyba: session {} ended by {sig}", session.id);
    }
    if let Some(n) = outcome.agent_signal {
        let name = tyba_supervisor::signal_name(n);
        tell!(
            "tyba: the agent was killed by {name} (exit status {})",
            outcome.exit_status
        );
    }
    if let Some(by) = control.stopped_by() {
        let c = control.counts();
        tell!(
            "tyba: session {} stopped by {by}: allowed {}, asked {}, denied {}",
            session.id,
            c.allowed,
            c.asked,
            c.denied
        );
    }
    let denied: Vec<_> = outcome
        .events
        .iter()
        .filter(|e| !e.allowed && !e.is_quiet())
        .collect();
    if !denied.is_empty() {
        tell!("tyba: denied in this session ({}):", denied.len());
        for d in denied {
            tell!("{}", denied_entry(d));
        }
    }
    // Refusals nobody was asked about and the model did not ask for: the agent's known
    // probes its profile refuses, watches outside the readable roots, refused lookups.
    // Summarised (an agent probes at every turn, with lines of kilobytes): the audit log has
    // each in full.
    let quiet: Vec<(String, String, String)> = outcome
        .events
        .iter()
        .filter(|e| e.is_quiet())
        .map(|e| {
            (
                e.kind.to_string(),
                e.what.clone(),
                e.reason.clone().unwrap_or_else(|| "refused".into()),
            )
        })
        .collect();
    for line in quiet_summary(&quiet, &session.id) {
        tell!("{line}");
    }
    if let Some(m) = &merge {
        report_merge(m, &layers_root);
    }
    drop(running_lock);
    end_of_worktree(&session, args.keep_worktree, &policy, watched);
    tyba_supervisor::launch_trace::mark("end:done");
    Ok(ExitCode::from(
        u8::try_from(outcome.exit_status).unwrap_or(1),
    ))
}

/// One denied action of the end summary, on one line: `tyba:   KIND ACTION: REASON`, the
/// action being the command behind the agent's shell wrapper when it has one, else the whole
/// line cut to a bound with the count of the rest (`tyba_supervisor::broker::text::shown_action`;
/// the audit log has the whole line).
fn denied_entry(d: &tyba_supervisor::AuditEvent) -> String {
    format!(
        "tyba:   {} {}: {}",
        d.kind,
        text::shown_action(&d.what, d.inner_command.as_deref()),
        d.reason.as_deref().unwrap_or("refused")
    )
}

/// The longest part of a quietly refused request the end summary shows, in characters.
const QUIET_SHOWN: usize = 100;

/// The first line of `s`, at most `max` characters, with `…` when anything was left out.
fn first_line_cut(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(max).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The end summary's lines for the requests refused quietly (`(kind, what, reason)` each, in
/// order): none when there are none; else their count, how many differ and where they are in
/// full (`tyba log SESSION`), and the first one cut to [`QUIET_SHOWN`] characters.
fn quiet_summary(quiet: &[(String, String, String)], session: &str) -> Vec<String> {
    let Some((kind, what, _)) = quiet.first() else {
        return Vec::new();
    };
    let mut distinct: Vec<&(String, String, String)> = Vec::new();
    for q in quiet {
        if !distinct.contains(&q) {
            distinct.push(q);
        }
    }
    let cut = |s: &str| first_line_cut(s, QUIET_SHOWN);
    vec![
        format!(
            "tyba: refused quietly (not asked): {} ({} different); each is in `tyba log {session}`",
            quiet.len(),
            distinct.len()
        ),
        format!("tyba:   first: {kind} {}", cut(what)),
    ]
}

#[cfg(test)]
mod quiet_tests {
    use super::*;

    #[test]
    fn quiet_refusals_are_counted_and_the_first_is_cut_short() {
        assert!(quiet_summary(&[], "s1").is_empty());
        let long = format!("git -c core.fsmonitor=false {}", "x".repeat(8000));
        let q = |w: &str| {
            (
                "exec".to_string(),
                w.to_string(),
                "refused quietly".to_string(),
            )
        };
        let lines = quiet_summary(&[q(&long), q(&long), q("git status\nsecond line")], "s1");
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "tyba: refused quietly (not asked): 3 (2 different); each is in `tyba log s1`"
        );
        assert!(lines[1].starts_with("tyba:   first: exec git -c core.fsmonitor=false x"));
        assert!(lines[1].ends_with('…'));
        assert!(lines[1].chars().count() < 140, "{}", lines[1]);
        let short = quiet_summary(&[q("git status")], "s2");
        assert_eq!(short[1], "tyba:   first: exec git status");
        let two_lines = quiet_summary(&[q("a\nb")], "s2");
        assert_eq!(two_lines[1], "tyba:   first: exec a…");
    }
}
