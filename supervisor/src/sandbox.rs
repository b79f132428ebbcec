//! What the sandbox grants and protects (issue 4 §2), and what the kernel can enforce.
//!
//! Landlock rules (kernel `Documentation/userspace-api/landlock.rst`):
//! - read-write (every filesystem right but making devices): the worktree, the session's
//!   private temp dir (`TMPDIR`), the policy's `read_write` paths (the toolchain caches) once
//!   a session-private overlay is mounted over each ([`crate::caches`]; read + execute
//!   without one), the `agent_state` paths (as session-private copies:
//!   [`crate::state_layer`]), and
//!   for a linked worktree the parts of the main git dir the agent's commits write
//!   (`objects`, `worktrees/<name>`, and its own branch: `refs/heads/tyba` and
//!   `logs/refs/heads/tyba` as the session-private directories [`crate::own_branch`] binds
//!   over them), and its root as the session-private layer [`crate::git_layer`] mounts over
//!   it (granted after the mount; its protected names bound read-only on top), never the
//!   person's branches, another session's, `packed-refs` or `HEAD`;
//! - read + execute: system paths (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/opt`, `/sys`,
//!   the private `/proc`), the policy's `read_only` paths, the agent program, the main git dir;
//! - devices: `/dev/null`, `/dev/zero`, `/dev/full` read-write, `/dev/random`,
//!   `/dev/urandom` read, `/dev/tty` read-write with terminal ioctls, and `/dev/ptmx`,
//!   `/dev/pts` too when they are the sandbox's private devpts instance (never the host's);
//! - TCP bind and connect handled with no port allowed (ABI 4): the agent's own connections
//!   are made by the supervisor and injected; abstract unix sockets and signals scoped (ABI 6).
//!
//! Landlock cannot carve a read-only hole in a read-write tree, so the files that would run
//! code outside the sandbox later or redirect the person's git (every file of [`git_files`],
//! the agents' settings/rules/hooks files) are bind-mounted read-only over themselves in the
//! sandbox's private mount namespace, absent ones first given a stand-in
//! ([`git_stand_ins`]), and git dirs inside a writable tree are pinned as mount points (a
//! mount point cannot be renamed).

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, RestrictionStatus,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// System paths granted read + execute when they exist.
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/proc",
];

/// Devices granted read-write.
pub const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Devices granted read-only.
pub const DEVICES_RO: &[&str] = &["/dev/random", "/dev/urandom"];
/// Terminal devices granted read-write with ioctls: the controlling terminal (the agent's own
/// pty, or none).
pub const DEVICES_TTY: &[&str] = &["/dev/tty"];
/// The pty devices, granted read-write with ioctls only when they are the sandbox's private
/// devpts instance ([`SandboxPlan::private_pts`]); the host's are the person's terminals.
pub const DEVICES_PTS: &[&str] = &["/dev/ptmx", "/dev/pts"];

/// The full plan for one session, computed by the supervisor before it forks.
#[derive(Debug, Clone, Default)]
pub struct SandboxPlan {
    /// Physical worktree path.
    pub worktree: PathBuf,
    /// The session's private temp dir.
    pub tmp_dir: PathBuf,
    /// Existing paths granted read-write (worktree and temp dir first).
    pub read_write: Vec<PathBuf>,
    /// Existing paths granted read + execute.
    pub read_only: Vec<PathBuf>,
    /// Existing paths bind-mounted read-only over themselves in the sandbox's mount namespace.
    pub protected: Vec<PathBuf>,
    /// Policy paths that do not exist and were left out (for the start-up report).
    pub missing: Vec<String>,
    /// Git dirs inside a writable tree, bind-mounted over themselves (writable) so that their
    /// name cannot be renamed or removed (`EBUSY`): the person's git finds them by name.
    pub pinned: Vec<PathBuf>,
    /// Session-private directories bound (writable) over a directory of the repository in
    /// the sandbox's mount namespace, `(private directory, bound over)`: the session's own
    /// branch over `refs/heads/tyba/` and its reflog over `logs/refs/heads/tyba/`
    /// ([`crate::own_branch`]; [`SandboxPlan::grant_own_branch`]).
    pub branch_binds: Vec<(PathBuf, PathBuf)>,
    /// Absent git files that must be kept from being created, with their stand-in
    /// ([`GitFile::stand_in`]); made by [`git_stand_ins`], which moves each to `protected`.
    pub wanted_stand_ins: Vec<(PathBuf, Option<&'static [u8]>)>,
    /// Protections that cannot be set up: the session refuses to start when any is left
    /// ([`crate::launch::run`]), unless `--allow-weaker-sandbox`.
    pub unprotected: Vec<String>,
    /// What the start-up report says about the plan (not failures).
    pub notes: Vec<String>,
    /// Whether `/dev/pts` (and `/dev/ptmx`) are a private devpts instance in the sandbox's
    /// mount namespace (set by the sandbox's stage 2 once mounted): only then are they
    /// granted.
    pub private_pts: bool,
    /// The agents' state as session-private copies, mounted over the state entries in the
    /// sandbox's mount namespace before the read-only binds ([`crate::state_layer`]).
    pub state_layers: Vec<crate::state_layer::StateLayer>,
    /// The policy's `read_write` paths (the toolchain caches; canonical, existing), each also
    /// in `read_only`: granted read-write only through a session-private overlay
    /// ([`crate::caches`]), never as they are.
    pub caches: Vec<PathBuf>,
    /// The session-private layer stage 2 mounts over the common git dir of a linked
    /// worktree ([`crate::git_layer`]); once mounted the common dir moves from `read_only` to
    /// `read_write` in stage 2's plan (its Landlock rule names the layer).
    pub git_layer: Option<crate::git_layer::GitLayer>,
    /// The overlay over the common dir's `objects/` whose upper layer is the session's own
    /// (a session with its own branch, not `--here`: [`crate::objects_layer`]); made by
    /// [`SandboxPlan::grant_own_branch`], mounted by stage 2 after the git layer.
    pub objects_layer: Option<crate::objects_layer::ObjectsLayer>,
    /// The overlays stage 2 mounts over `caches` ([`crate::caches::CacheLayers::prepare`]);
    /// each one mounted moves its cache from `read_only` to `read_write`.
    pub cache_layers: Vec<crate::caches::CacheLayer>,
    /// The person's shell startup files ([`SHELL_STARTUP_FILES`]) that no rule of the plan
    /// opens (canonical, regular files): in the sandbox's mount namespace each shows as empty
    /// (`/dev/null` bound over it), so the agent's shells start without reading them (they
    /// may export secrets) and without `Permission denied` on every start.
    pub blanked: Vec<PathBuf>,
    /// Files shown in the sandbox's mount namespace with other contents, (shown path, file
    /// bound read-only over it): `/etc/profile` with the session's `PATH` restored at its end
    /// (`crate::launch::login_profile`).
    pub replaced: Vec<(PathBuf, PathBuf)>,
    /// Whether to cover the entries around the worktree and in the home with the
    /// supervisor's outside-files server ([`crate::outside_fs`]; `--outside-files`).
    pub outside_files: crate::outside_fs::OutsideMode,
    /// The entries covered ([`crate::outside_fs::plan_covers`], computed at launch).
    pub outside_covers: Vec<PathBuf>,
    /// The covers stage 2 mounted (granted by Landlock to the server's view of them).
    pub outside_mounted: Vec<PathBuf>,
    /// The policy's `filesystem.history_files` (`~/…` or `/…` patterns): the outside-files
    /// server refuses them quietly to every process ([`crate::outside_fs::HistoryFiles`]).
    pub history_files: Vec<String>,
}

/// The shell startup files in the home that shells read by themselves (bash(1)
/// INVOCATION, zsh(1) STARTUP/SHUTDOWN FILES, dash(1), ksh(1)).
pub const SHELL_STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
];

/// What the kernel will and will not enforce for a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enforcement {
    /// Landlock ABI of the running kernel (0: none).
    pub landlock_abi: i32,
    /// Human descriptions of what is not enforced on this kernel.
    pub not_enforced: Vec<String>,
    /// Whether the filesystem rules cannot be enforced at all (refuse to start unless
    /// `--allow-weaker-sandbox`).
    pub filesystem_unenforceable: bool,
}

impl Enforcement {
    /// Probes the running kernel.
    pub fn probe() -> Self {
        let abi = crate::sys::landlock_abi();
        let mut e = Enforcement {
            landlock_abi: abi,
            ..Default::default()
        };
        if abi < 1 {
            e.filesystem_unenforceable = true;
            e.not_enforced
                .push("Landlock is not available: no filesystem confinement".to_string());
        } else if abi < 3 {
            e.filesystem_unenforceable = true;
            e.not_enforced
                .push(format!("Landlock ABI {abi} < 3: file renames across directories or truncation not controlled"));
        }
        if (1..4).contains(&abi) {
            e.not_enforced.push(
                "Landlock ABI < 4: TCP is confined by the network namespace only".to_string(),
            );
        }
        if (1..5).contains(&abi) {
            e.not_enforced
                .push("Landlock ABI < 5: device ioctls not controlled".to_string());
        }
        if (1..6).contains(&abi) {
            e.not_enforced
                .push("Landlock ABI < 6: signals and abstract unix sockets confined by the namespaces only".to_string());
        }
        if abi < 9 {
            e.not_enforced.push(
                "Landlock ABI < 9: datagrams sent with sendmsg to a unix socket path outside the worktree are not controlled (stream connects are)".to_string(),
            );
        }
        e
    }
}

fn abi_from(n: i32) -> ABI {
    match n {
        i32::MIN..=0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        8 => ABI::V8,
        9 => ABI::V9,
        _ => ABI::V10,
    }
}

/// Expands a policy path: `~` and `~/…` against `home`; other relative paths are left out.
pub fn expand_home(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    if p == "~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = p.strip_prefix("~/") {
        return home.map(|h| h.join(rest));
    }
    let pb = PathBuf::from(p);
    pb.is_absolute().then_some(pb)
}

/// Inputs of [`SandboxPlan::build`].
#[derive(Debug, Clone, Copy)]
pub struct PlanInputs<'a> {
    /// The session.
    pub session: &'a crate::session::Session,
    /// The session's private temp dir (created by the caller).
    pub tmp_dir: &'a Path,
    /// The effective policy configuration.
    pub config: &'a tyba_policy::EffectiveConfig,
    /// `~` for policy paths.
    pub home: Option<&'a Path>,
    /// The agent program, resolved on `PATH`: it, its installation's roots and the
    /// interpreters its `#!` line names are granted read + execute
    /// ([`crate::agent::AgentInstall::resolve`]).
    pub agent_program: Option<&'a Path>,
    /// The `PATH` the agent gets, for a `#!/usr/bin/env NAME` line.
    pub agent_path_env: Option<&'a std::ffi::OsStr>,
}

fn push_unique(v: &mut Vec<PathBuf>, p: PathBuf) {
    if !v.contains(&p) {
        v.push(p);
    }
}

/// What stands in for an absent git file, so that it can be bound read-only (a bind needs an
/// existing target) and the agent cannot create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIn {
    /// An empty directory (git ignores an empty `hooks/`, `info/`, `modules/`…).
    Dir,
    /// A file with these contents, which git reads as if the file were absent.
    File(&'static [u8]),
    /// None exists: the file must already be there, or the session refuses to start.
    None,
}

/// One file or directory git reads as configuration, code or redirection (see [`git_files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitFile {
    /// Its path.
    pub path: PathBuf,
    /// What stands in for it when it is absent.
    pub stand_in: StandIn,
}

/// Every file and directory of a repository's git dirs that the person's git reads as
/// configuration, runs as code, or follows as a redirection, by name
/// (`gitrepository-layout(5)`, `git-config(1)` "FILES", `git-worktree(1)` "DETAILS",
/// `githooks(5)`, `gitsubmodules(7)`):
///
/// - in the common dir: `config`; `hooks/`; `info/` (`attributes`, `exclude`, `grafts`,
///   `sparse-checkout`); `objects/info/alternates` and `http-alternates` (where objects are
///   read from; empty ones stand in, and the rest of `objects/info/` stays writable for `git
///   gc`'s commit-graph); `modules/` (each submodule's git dir, with its own config and hooks);
///   `worktrees/` (the other linked worktrees' admin dirs: their `commondir`, `gitdir`,
///   `config.worktree`); `branches/` and `remotes/` (remotes defined by file);
/// - in the worktree's git dir: `config.worktree` (read with `extensions.worktreeConfig`;
///   an empty one stands in), `commondir` (where git reads config and hooks; in a main git
///   dir, `.` stands in: the git dir is its own common dir), and for a linked worktree its
///   `gitdir` (the worktree it belongs to) and `modules/`;
/// - the worktree's `.git` when it is a file (`gitdir: PATH`: the git dir itself).
///
/// Only those under a writable root need protecting ([`SandboxPlan::build`] filters).
pub fn git_files(g: &crate::session::GitLayout, worktree: &Path) -> Vec<GitFile> {
    let f = |path: PathBuf, stand_in| GitFile { path, stand_in };
    let c = &g.common_dir;
    let mut v = vec![
        f(c.join("config"), StandIn::File(b"")),
        f(c.join("hooks"), StandIn::Dir),
        f(c.join("info"), StandIn::Dir),
        f(c.join("objects/info/alternates"), StandIn::File(b"")),
        f(c.join("objects/info/http-alternates"), StandIn::File(b"")),
        f(c.join("modules"), StandIn::Dir),
        f(c.join("worktrees"), StandIn::Dir),
        f(c.join("branches"), StandIn::Dir),
        f(c.join("remotes"), StandIn::Dir),
        f(g.git_dir.join("config.worktree"), StandIn::File(b"")),
    ];
    if g.git_dir == g.common_dir {
        v.push(f(g.git_dir.join("commondir"), StandIn::File(b".\n")));
    } else {
        v.push(f(g.git_dir.join("commondir"), StandIn::None));
        v.push(f(g.git_dir.join("gitdir"), StandIn::None));
        v.push(f(g.git_dir.join("modules"), StandIn::Dir));
    }
    let dotgit = worktree.join(".git");
    if std::fs::symlink_metadata(&dotgit).is_ok_and(|m| !m.is_dir()) {
        v.push(f(dotgit, StandIn::None));
    }
    v
}

/// Configuration keys whose value git runs as a command (its first word, after a leading
/// `!`, is a program): `git-config(1)`, `gitattributes(5)` (drivers), `githooks(5)`.
const COMMAND_KEYS: &[&str] = &[
    "core.sshcommand",
    "core.editor",
    "core.pager",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "gpg.program",
    "credential.helper",
    "uploadpack.packobjectshook",
];

/// Command keys of named sections (`diff.<driver>.textconv`, …): `(section, key)`.
const SUBSECTION_COMMAND_KEYS: &[(&str, &str)] = &[
    ("diff", "textconv"),
    ("diff", "command"),
    ("filter", "clean"),
    ("filter", "smudge"),
    ("filter", "process"),
    ("merge", "driver"),
    ("gpg", "program"),
    ("difftool", "cmd"),
    ("mergetool", "cmd"),
    ("alias", ""),
    ("pager", ""),
];

/// Sections whose values may name a program git runs ([`COMMAND_KEYS`],
/// [`SUBSECTION_COMMAND_KEYS`]).
const COMMAND_SECTIONS: &[&str] = &[
    "core",
    "sequence",
    "gpg",
    "credential",
    "uploadpack",
    "diff",
    "filter",
    "merge",
    "difftool",
    "mergetool",
    "alias",
    "pager",
];

/// Whether one configuration file's text may name a file for [`config_named_files`]: a line
/// of an `include`/`includeIf` section, `core.hooksPath`, or a value of a
/// [`COMMAND_SECTIONS`] section whose first word is a path; or a line it cannot read simply
/// (a continued value). A superset: the answer is only whether git need be asked.
fn config_text_may_name_files(text: &str) -> bool {
    let mut section = String::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.ends_with('\\') {
            return true;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some((head, after)) = rest.split_once(']') else {
                return true;
            };
            section = head
                .split(|c: char| c == '.' || c.is_whitespace() || c == '"')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            line = after.trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if section == "include" || section == "includeif" {
            return true;
        }
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let name = name.trim().to_ascii_lowercase();
        if section == "core" && name == "hookspath" {
            return true;
        }
        if COMMAND_SECTIONS.contains(&section.as_str()) {
            let first = value
                .trim()
                .trim_start_matches(['"', '!'])
                .split_whitespace()
                .next()
                .unwrap_or("");
            if first.contains('/') || first.contains('~') {
                return true;
            }
        }
    }
    false
}

/// Whether the git configuration files git reads for `g` (`git-config(1)` "FILES":
/// `/etc/gitconfig`, `$XDG_CONFIG_HOME/git/config`, `~/.gitconfig`, the repository's
/// `config` and `config.worktree`) may name a file for [`config_named_files`]
/// ([`config_text_may_name_files`]): spares running git at every start when none does. True
/// when a `GIT_CONFIG*` variable that adds or moves configuration is set (`GIT_CONFIG_GLOBAL`,
/// `GIT_CONFIG_SYSTEM`, `GIT_CONFIG_COUNT` and its `GIT_CONFIG_KEY_<n>`/`VALUE_<n>`,
/// `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG`: `git(1)` "ENVIRONMENT VARIABLES") or a file that
/// exists cannot be read. `GIT_CONFIG_NOSYSTEM` only leaves `/etc/gitconfig` out, which is
/// read here all the same (a superset).
pub fn config_may_name_files(g: &crate::session::GitLayout, home: Option<&Path>) -> bool {
    if std::env::vars_os().any(|(k, _)| config_env_adds_configuration(&k.to_string_lossy())) {
        return true;
    }
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    let files = [
        Some(PathBuf::from("/etc/gitconfig")),
        xdg.map(|x| x.join("git/config")),
        home.map(|h| h.join(".gitconfig")),
        Some(g.common_dir.join("config")),
        Some(g.git_dir.join("config.worktree")),
    ];
    files
        .into_iter()
        .flatten()
        .any(|f| match std::fs::read(&f) {
            Ok(b) => config_text_may_name_files(&String::from_utf8_lossy(&b)),
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        })
}

/// One entry of `git config --list -z --show-scope --show-origin --includes`
/// (git-config(1)).
#[derive(Debug, Clone)]
pub(crate) struct GitConfigEntry {
    /// `system`, `global`, `local`, `worktree` or `command`.
    pub scope: String,
    /// `file:PATH` (relative to the worktree for the repository's files), `command line:`, …
    pub origin: String,
    /// The key as git prints it (section and name lower-case, a subsection as written).
    pub key: String,
    /// The value (empty for a key given without one).
    pub value: String,
}

/// The configuration git reads in `worktree`, with includes, each entry with its scope and
/// origin. `env`: the environment git runs with, less any configuration given through it
/// (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`); the process's own when `None`. Empty when
/// git cannot be run.
pub(crate) fn git_config_list(
    worktree: &Path,
    env: Option<&[(std::ffi::OsString, std::ffi::OsString)]>,
) -> Vec<GitConfigEntry> {
    let mut c = std::process::Command::new("git");
    c.arg("-C").arg(worktree).args([
        "config",
        "--list",
        "-z",
        "--show-scope",
        "--show-origin",
        "--includes",
    ]);
    if let Some(env) = env {
        c.env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env_remove("GIT_CONFIG_PARAMETERS")
            .env_remove("GIT_CONFIG_COUNT");
    }
    let Ok(out) = c
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split('\0');
    let mut v = Vec::new();
    while let (Some(scope), Some(origin), Some(entry)) =
        (fields.next(), fields.next(), fields.next())
    {
        let (key, value) = entry.split_once('\n').unwrap_or((entry, ""));
        v.push(GitConfigEntry {
            scope: scope.to_string(),
            origin: origin.to_string(),
            key: key.to_string(),
            value: value.to_string(),
        });
    }
    v
}

/// The files the person's git reads as their own configuration besides `~/.gitconfig`
/// (git-config(1) FILES and "Includes", gitignore(5), gitattributes(5)):
/// `$XDG_CONFIG_HOME/git/config`, `ignore` and `attributes` (`~/.config` when the variable is
/// unset or empty); the files the system and global configuration include (`include.path =
/// ~/.gitconfig.local`, an `includeIf` that holds in `worktree`); and the files it names as
/// `core.excludesFile` and `core.attributesFile` (`~/.gitignore_global`). Only the system and
/// global scopes: what the repository's configuration (the agent's to write) includes or
/// names is not the person's. git is run (`git config --list --show-scope --show-origin
/// --includes` in `worktree`) only when a global file mentions an include or either key.
/// Each as its real path, when it is a regular file and no component names a credential
/// (`tyba_policy::credential_in_path`); never the credential store `git/credentials`.
pub fn persons_git_files(home: Option<&Path>, worktree: &Path) -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    let mut named: Vec<PathBuf> = Vec::new();
    if let Some(x) = &xdg {
        for f in ["config", "ignore", "attributes"] {
            named.push(x.join("git").join(f));
        }
    }
    let globals = [
        Some(PathBuf::from("/etc/gitconfig")),
        home.map(|h| h.join(".gitconfig")),
        xdg.map(|x| x.join("git/config")),
    ];
    let mentions = globals.iter().flatten().any(|f| {
        std::fs::read(f).is_ok_and(|b| {
            let t = String::from_utf8_lossy(&b).to_ascii_lowercase();
            t.contains("excludesfile") || t.contains("attributesfile") || t.contains("include")
        })
    });
    if mentions {
        for e in git_config_list(worktree, None) {
            if e.scope != "global" && e.scope != "system" {
                continue;
            }
            if let Some(f) = e.origin.strip_prefix("file:") {
                named.push(PathBuf::from(f));
            }
            let key = e.key.to_ascii_lowercase();
            if key == "core.excludesfile" || key == "core.attributesfile" {
                let v = e.value.trim();
                let p = match v.strip_prefix("~/") {
                    Some(rest) => home.map(|h| h.join(rest)),
                    None => Some(PathBuf::from(v)),
                };
                named.extend(p);
            }
        }
    }
    let mut v = Vec::new();
    for p in named.into_iter().filter(|p| p.is_absolute()) {
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if real.is_file()
            && tyba_policy::credential_in_path(&real).is_none()
            && tyba_policy::credential_in_path(&p).is_none()
        {
            push_unique(&mut v, real);
        }
    }
    v
}

/// Whether the environment variable `name` gives git configuration beyond the files
/// [`config_may_name_files`] reads: every `GIT_CONFIG*` name but `GIT_CONFIG_NOSYSTEM`.
fn config_env_adds_configuration(name: &str) -> bool {
    name.starts_with("GIT_CONFIG") && name != "GIT_CONFIG_NOSYSTEM"
}

/// The files and directories the repository's git configuration (system, global, local,
/// worktree, with includes; as `git config --list --show-origin --includes` reads it in the
/// worktree) names for git to read as configuration or to run: `include.path` and
/// `includeIf.*.path` (more configuration; relative to the including file), `core.hooksPath`
/// (the hooks; relative to the worktree), `core.fsmonitor` when it is a path, and the
/// programs of command-valued keys ([`COMMAND_KEYS`], drivers, aliases) when their first word
/// is a path (relative to the worktree). A project's `include.path = ../.gitconfig` or
/// `core.hooksPath = .husky` would otherwise make a worktree file the person's git obeys.
/// Only those under a writable root matter ([`SandboxPlan::build`] filters). Nothing when git
/// cannot be run.
pub fn config_named_files(worktree: &Path, home: Option<&Path>) -> Vec<GitFile> {
    let mut v = Vec::new();
    let resolve = |value: &str, base: &Path| -> Option<PathBuf> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if value == "~" || value.starts_with("~/") {
            return expand_home(value, home);
        }
        let p = Path::new(value);
        Some(if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        })
    };
    let program = |value: &str| -> Option<String> {
        let first = value
            .trim()
            .trim_start_matches('!')
            .split_whitespace()
            .next()?;
        let first = first.trim_matches(|c| c == '"' || c == '\'');
        first.contains('/').then(|| first.to_string())
    };
    for e in git_config_list(worktree, None) {
        let (origin, value) = (e.origin.as_str(), e.value.as_str());
        let key = e.key.to_ascii_lowercase();
        let origin_dir = origin
            .strip_prefix("file:")
            .map(|f| worktree.join(f))
            .and_then(|f| f.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| worktree.to_path_buf());
        let (section, rest) = key.split_once('.').unwrap_or((key.as_str(), ""));
        let (sub, name) = match rest.rsplit_once('.') {
            Some((sub, name)) => (Some(sub), name),
            None => (None, rest),
        };
        let found = match (section, sub, name) {
            ("include", None, "path") | ("includeif", Some(_), "path") => {
                resolve(value, &origin_dir).map(|p| (p, StandIn::File(b"")))
            }
            ("core", None, "hookspath") => resolve(value, worktree).map(|p| (p, StandIn::Dir)),
            ("core", None, "fsmonitor") if value.contains('/') => {
                resolve(value, worktree).map(|p| (p, StandIn::File(b"")))
            }
            _ => {
                let command = COMMAND_KEYS.contains(&key.as_str())
                    || SUBSECTION_COMMAND_KEYS.iter().any(|(sec, n)| {
                        *sec == section && (n.is_empty() || (sub.is_some() && n == &name))
                    });
                command
                    .then(|| program(value))
                    .flatten()
                    .and_then(|p| resolve(&p, worktree))
                    .map(|p| (p, StandIn::File(b"")))
            }
        };
        if let Some((p, stand_in)) = found {
            let p = match std::fs::canonicalize(&p) {
                Ok(real) => real,
                // Absent: where it would be, through its existing parent.
                Err(_) => match (
                    p.parent().and_then(|d| std::fs::canonicalize(d).ok()),
                    p.file_name(),
                ) {
                    (Some(d), Some(n)) => d.join(n),
                    _ => p,
                },
            };
            if !v.iter().any(|f: &GitFile| f.path == p) {
                v.push(GitFile { path: p, stand_in });
            }
        }
    }
    v
}

/// The directories of a common git dir the sessions' branches live in: `refs/heads/tyba` and
/// `logs/refs/heads/tyba` (DESIGN.md §5: the agent writes only its own branch, through the
/// private directories bound over these: [`SandboxPlan::grant_own_branch`]).
pub fn own_branch_dirs(common_dir: &Path) -> [PathBuf; 2] {
    [
        common_dir.join("refs/heads/tyba"),
        common_dir.join("logs/refs/heads/tyba"),
    ]
}

/// Makes `d` when absent and checks it is a real directory reached through no symbolic link
/// (a rule on a link would grant its target).
fn real_dir(d: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(d).is_err() {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let real = std::fs::canonicalize(d).map_err(|e| format!("{}: {e}", d.display()))?;
    if real != d || !std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "{} is not a plain directory (a symbolic link, or behind one): the agent's branches cannot be granted alone",
            d.display()
        ));
    }
    Ok(())
}

/// Makes (or takes up) the stand-ins [`SandboxPlan::build`] asked for
/// ([`SandboxPlan::wanted_stand_ins`]) and moves each one made or found to
/// [`SandboxPlan::protected`]; one that cannot be made goes to
/// [`SandboxPlan::unprotected`]. Stand-ins are counted across the user's sessions and
/// removed by the last one when still as made, like the agents' control files
/// ([`ControlPlaceholders`]).
pub fn git_stand_ins(plan: &mut SandboxPlan) -> ControlPlaceholders {
    let mut wanted = std::mem::take(&mut plan.wanted_stand_ins);
    let roots = plan.read_write.clone();
    // Each parent is made (or found) once: most stand-ins share theirs (`.git/`), and each
    // walk opens every directory on the way.
    let mut parents: Vec<(PathBuf, Option<i32>)> = Vec::new();
    wanted.retain(|(p, _)| {
        // A stand-in needs its directory (`objects/info/`, a `tools/` a driver names), made
        // beneath the writable root it is in through no link: a link an agent of an earlier
        // session left on the way (`.git/refs/heads/x` → anywhere, with a protected
        // `x/y` named by a repository policy it wrote) would have tyba make directories and
        // the stand-in wherever it points. One that cannot be made leaves the file
        // unprotected below.
        let parent = p.parent().unwrap_or(p);
        let Some(root) = roots
            .iter()
            .filter(|r| parent.starts_with(r))
            .max_by_key(|r| r.components().count())
        else {
            return true;
        };
        let made = match parents.iter().find(|(d, _)| d == parent) {
            Some((_, errno)) => *errno,
            None => {
                let made = match parent.strip_prefix(root) {
                    Ok(rel) if rel.as_os_str().is_empty() => Ok(()),
                    Ok(rel) => crate::dirfd::DirFd::open(root)
                        .and_then(|d| d.make_dirs(rel))
                        .map(drop),
                    Err(_) => Ok(()),
                };
                let errno = made.err().map(|e| e.raw_os_error().unwrap_or(libc::EIO));
                parents.push((parent.to_path_buf(), errno));
                errno
            }
        };
        match made {
            Some(libc::ELOOP | libc::ENOTDIR) => {
                plan.unprotected.push(format!(
                    "{} is reached through a symbolic link or a file in {} (left by an earlier session?): it cannot be kept read-only, so the agent could create it; look at that link",
                    p.display(),
                    root.display()
                ));
                false
            }
            _ => true,
        }
    });
    let mut me = ControlPlaceholders::make(wanted.clone(), stand_in_registry());
    // One removed as soon as made (the person's own git at work meanwhile: `git gc` prunes an
    // empty `worktrees/`) is made again, once.
    let gone: Vec<_> = wanted
        .iter()
        .filter(|(p, _)| std::fs::symlink_metadata(p).is_err())
        .cloned()
        .collect();
    let gone_first = gone.clone();
    if !gone.is_empty() {
        // This session's hold on their records goes first: a record held stays.
        me.held.retain(|h| !gone.iter().any(|(p, _)| *p == h.path));
        me.made.retain(|m| !gone.iter().any(|(p, _)| p == m));
        let again = ControlPlaceholders::make(gone, stand_in_registry());
        me.absorb(again);
    }
    for (p, _) in wanted {
        // Found the first time, or made again.
        let there =
            !gone_first.iter().any(|(g, _)| *g == p) || std::fs::symlink_metadata(&p).is_ok();
        if there {
            push_unique(&mut plan.protected, p);
        } else {
            plan.unprotected.push(format!(
                "{} does not exist and its stand-in could not be made (is $XDG_STATE_HOME or $HOME set and writable?), so the agent could create it",
                p.display()
            ));
        }
    }
    me
}

/// Whether the repository whose common git dir is `common_dir` keeps its refs in the reftable
/// format, where no ref is a file of its own that a bind could hold: as git decides, by
/// `extensions.refStorage` in its own `config`
/// ([`tyba_git_guard::repo::ref_storage_is_reftable`]), never by a `reftable/` directory
/// alone (an agent could plant one in a repository git still reads through loose refs, and
/// the loose refs would then go unprotected). A `config` that cannot be read counts as
/// reftable when that directory exists.
pub fn uses_reftable(common_dir: &Path) -> bool {
    tyba_git_guard::repo::ref_storage_is_reftable(common_dir)
        .unwrap_or_else(|| common_dir.join("reftable").exists())
}

/// The canonical path of `p` when it exists. An absent path fails one `lstat(2)` instead of
/// the `readlink(2)` of each of its components that `realpath(3)` makes first: most of the
/// policy's paths (agent state and caches of agents the person does not use) are absent.
pub(crate) fn canonical_existing(p: &Path) -> Option<PathBuf> {
    std::fs::symlink_metadata(p).ok()?;
    std::fs::canonicalize(p).ok()
}

/// Whether `p` is `root` or lies beneath it (component-wise).
pub fn is_within(p: &Path, root: &Path) -> bool {
    p.starts_with(root)
}

impl SandboxPlan {
    /// Computes the plan. Paths are canonicalised; ones that do not exist are left out (and
    /// listed in `missing` when they came from the policy).
    pub fn build(i: PlanInputs<'_>) -> SandboxPlan {
        let mut plan = SandboxPlan {
            worktree: i.session.worktree.clone(),
            tmp_dir: i.tmp_dir.to_path_buf(),
            ..Default::default()
        };
        plan.read_write.push(i.session.worktree.clone());
        push_unique(&mut plan.read_write, i.tmp_dir.to_path_buf());
        let fs = &i.config.filesystem;
        plan.history_files = fs.history_files.clone();
        // (list, is a cache, writable)
        for (list, cache, rw) in [
            (&fs.read_write, true, true),
            (&fs.agent_state, false, true),
            (&fs.read_only, false, false),
        ] {
            for s in list.iter() {
                match expand_home(s, i.home).and_then(|p| canonical_existing(&p)) {
                    // The toolchain caches the person's builds trust: read-only until their
                    // private layer is mounted ([`crate::caches`]).
                    Some(p) if cache => {
                        push_unique(&mut plan.caches, p.clone());
                        push_unique(&mut plan.read_only, p);
                    }
                    Some(p) if rw => push_unique(&mut plan.read_write, p),
                    Some(p) => push_unique(&mut plan.read_only, p),
                    None => plan.missing.push(s.clone()),
                }
            }
        }
        // What the person's git reads as their configuration besides `~/.gitconfig`: read by
        // every git command of the session, which else asked to read them (three asks for a
        // `git status` with `~/.config/git/config`, and the command failing when refused).
        for p in persons_git_files(i.home, &plan.worktree) {
            if !plan.read_write.iter().any(|r| is_within(&p, r)) {
                push_unique(&mut plan.read_only, p);
            }
        }
        for s in SYSTEM_READ_ONLY {
            let p = Path::new(s);
            if p.exists() {
                push_unique(&mut plan.read_only, p.to_path_buf());
            }
        }
        if let Some(a) = i.agent_program.and_then(|a| std::fs::canonicalize(a).ok()) {
            // The agent's installation is the agent (DESIGN.md §5; issue 12): an npm package
            // and the packages it depends on (Codex's launcher spawns its platform package's
            // binary, Gemini CLI loads its bundle's chunks), a venv, a native installer's
            // version file, wherever the person installed it (`~/.npm-global`, nvm's
            // `~/.nvm/versions/node/*`, `~/.local/share/pipx/venvs/*`), and the interpreter
            // that runs it (nvm's own `node`).
            let install = crate::agent::AgentInstall::resolve(&a, i.agent_path_env);
            push_unique(&mut plan.read_only, a);
            for p in install.roots.into_iter().chain(install.interpreters) {
                // Never the home or a directory above it (a `pyvenv.cfg` in the home would
                // make the whole home the installation): only what lies below.
                let holds_home = i.home.is_some_and(|h| {
                    std::fs::canonicalize(h)
                        .unwrap_or_else(|_| h.to_path_buf())
                        .starts_with(&p)
                });
                if !holds_home && p != Path::new("/") {
                    push_unique(&mut plan.read_only, p);
                }
            }
        }
        if let Some(g) = &i.session.git {
            let inside = is_within(&g.common_dir, &plan.worktree);
            if !inside {
                // A linked worktree (or `--here` in one): the main git dir is read-only but
                // for the objects and the session's own branch (its private directories over
                // `refs/heads/tyba/…` and their reflogs, granted by `grant_own_branch`); the
                // person's branches, other sessions', `packed-refs`, the main worktree's
                // `HEAD` and every other file of the main git dir stay read-only.
                push_unique(&mut plan.read_only, g.common_dir.clone());
                let objects = g.common_dir.join("objects");
                if objects.is_dir() {
                    push_unique(&mut plan.read_write, objects);
                }
                if uses_reftable(&g.common_dir) {
                    plan.notes.push(format!(
                        "{} uses the reftable backend, whose tables hold every branch together: no ref of it is writable, so the agent cannot commit or make branches there",
                        g.common_dir.display()
                    ));
                }
                // The agent's own branch: [`SandboxPlan::grant_own_branch`].
            }
            if !is_within(&g.git_dir, &plan.worktree) && g.git_dir != g.common_dir {
                push_unique(&mut plan.read_write, g.git_dir.clone());
            }
            // Git dirs inside a writable tree are pinned by name (a mount point cannot be
            // renamed or removed): `.git` moved aside and rebuilt would be obeyed as well.
            for d in [&g.git_dir, &g.common_dir] {
                if d.is_dir() && plan.read_write.iter().any(|r| is_within(d, r)) {
                    push_unique(&mut plan.pinned, d.clone());
                }
            }
            // The common git dir writable (`--here` in the main checkout): the protected
            // branches stay where they are (DESIGN.md §5). A loose one is bound read-only (a
            // ref is replaced by renaming `<ref>.lock` over it: `EBUSY` on a mount point); one
            // that is only packed is first written as the loose ref of the same value (what
            // git reads first; `O_EXCL`) and bound so; one that does not exist is held by an
            // empty directory stand-in; and `packed-refs` is read-only (an empty stand-in when
            // absent, which git reads as no packed ref).
            let common_writable = plan.read_write.iter().any(|r| is_within(&g.common_dir, r));
            // Read once: it parses the repository's config.
            let reftable = common_writable && uses_reftable(&g.common_dir);
            if reftable {
                // A reftable holds every branch in shared tables: no protected branch can be
                // held alone, so all of it is read-only (the agent cannot commit there).
                let tables = g.common_dir.join("reftable");
                if std::fs::symlink_metadata(&tables).is_ok() {
                    push_unique(&mut plan.protected, tables);
                    plan.notes.push(format!(
                        "{} uses the reftable backend, whose tables hold every branch together: with --here all of them stay read-only, so the agent cannot commit or make branches there",
                        g.common_dir.display()
                    ));
                } else {
                    plan.unprotected.push(format!(
                        "{} says it uses the reftable backend but has no reftable directory to keep read-only",
                        g.common_dir.display()
                    ));
                }
            }
            if common_writable && !reftable {
                let packed =
                    std::fs::read_to_string(g.common_dir.join("packed-refs")).unwrap_or_default();
                for b in &i.config.protected_branches {
                    // Checked when the policy is read; again here, as the name becomes a path.
                    if tyba_policy::check_branch_name(b).is_err()
                        || !Path::new(b)
                            .components()
                            .all(|c| matches!(c, std::path::Component::Normal(_)))
                    {
                        plan.unprotected.push(format!(
                            "the protected branch name {b:?} is not a branch name git accepts"
                        ));
                        continue;
                    }
                    let p = g.common_dir.join("refs/heads").join(b);
                    // Its directory, reached from the git dir through no link: a link an
                    // agent of an earlier `--here` session put there would point the ref,
                    // the write below and the bind somewhere else.
                    let rel = Path::new("refs/heads").join(b);
                    let parent = rel.parent().unwrap_or(Path::new("refs/heads"));
                    let dir =
                        crate::dirfd::DirFd::open(&g.common_dir).and_then(|c| c.open_dir(parent));
                    if let Err(e) = &dir {
                        if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
                            plan.unprotected.push(format!(
                                "the protected branch {b} is reached through a symbolic link or a file in {} (left by an earlier session?): it cannot be kept read-only; look at that link",
                                g.common_dir.join(parent).display()
                            ));
                            continue;
                        }
                    }
                    if std::fs::symlink_metadata(&p).is_err() {
                        let name = format!("refs/heads/{b}");
                        let value = packed.lines().find_map(|l| {
                            let (oid, r) = l.split_once(' ')?;
                            (r.trim() == name && !oid.starts_with(['#', '^'])).then_some(oid)
                        });
                        if let Some(oid) = value {
                            let made = crate::dirfd::DirFd::open(&g.common_dir)
                                .and_then(|c| c.make_dirs(parent))
                                .and_then(|d| {
                                    d.create_new_file(
                                        p.file_name().unwrap_or_default(),
                                        format!("{oid}\n").as_bytes(),
                                    )
                                });
                            if let Err(e) = made {
                                plan.unprotected.push(format!(
                                    "cannot write the packed protected branch {name} as a loose ref to keep it read-only: {e}"
                                ));
                            }
                        }
                    }
                    if std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
                        push_unique(&mut plan.protected, p);
                    } else {
                        // No such branch yet: an empty directory stand-in, bound read-only,
                        // holds its name. git reads a directory there as no ref, and creating
                        // the ref needs that directory removed (`EBUSY` on a mount point) or
                        // the lock renamed over it (`EISDIR`). git removes an empty directory
                        // in a ref's way, so one left behind stands in the way of no one. A
                        // directory found there may be another session's stand-in, which this
                        // session must hold too (or that session's end removes it under this
                        // one's bind), so it goes through the registry as well.
                        plan.wanted_stand_ins.push((p, None));
                    }
                }
                plan.wanted_stand_ins
                    .push((g.common_dir.join("packed-refs"), Some(b"")));
            }
            let named = if config_may_name_files(g, i.home) {
                config_named_files(&plan.worktree, i.home)
            } else {
                Vec::new()
            };
            if !inside {
                plan.git_layer = crate::git_layer::GitLayer::plan(g, &named);
                if plan.git_layer.is_none()
                    && g.git_dir != g.common_dir
                    && crate::caches::unmountable(&g.common_dir)
                {
                    plan.notes.push(format!(
                        "the git dir {} has a `,` `:` `\\` or control character in its path, which an overlay cannot name: its root stays read-only (git may print errors on packed-refs.lock and remote-tracking refs)",
                        g.common_dir.display()
                    ));
                }
            }
            for f in git_files(g, &plan.worktree).into_iter().chain(named) {
                let p = f.path;
                if !plan.read_write.iter().any(|r| is_within(&p, r)) {
                    continue;
                }
                // Whatever can have a stand-in goes through [`git_stand_ins`] even when it
                // exists: it may be another session's stand-in, which this session must rely
                // on (hold) too, or that session's end would remove it under this one's bind.
                match f.stand_in {
                    StandIn::Dir => plan.wanted_stand_ins.push((p, None)),
                    StandIn::File(c) => plan.wanted_stand_ins.push((p, Some(c))),
                    StandIn::None if std::fs::symlink_metadata(&p).is_ok() => {
                        push_unique(&mut plan.protected, p)
                    }
                    StandIn::None => plan.unprotected.push(format!(
                        "{} does not exist and has no stand-in, so the agent could create it",
                        p.display()
                    )),
                }
            }
        }
        for s in &fs.agent_control_files {
            if let Some(p) = expand_home(s, i.home).and_then(|p| canonical_existing(&p)) {
                push_unique(&mut plan.protected, p);
            }
        }
        // Only what lies under a writable root needs a read-only bind.
        let rw = plan.read_write.clone();
        plan.protected
            .retain(|p| rw.iter().any(|r| is_within(p, r)));
        if let Some(h) = i.home {
            for f in SHELL_STARTUP_FILES {
                let Ok(real) = std::fs::canonicalize(h.join(f)) else {
                    continue;
                };
                let opened = plan
                    .read_write
                    .iter()
                    .chain(&plan.read_only)
                    .any(|r| is_within(&real, r));
                if !opened && real.is_file() {
                    push_unique(&mut plan.blanked, real);
                }
            }
        }
        plan
    }

    /// The session's own branch (DESIGN.md §5; [`crate::own_branch`]): with `own`, its
    /// private directories are bound over `refs/heads/tyba/` and `logs/refs/heads/tyba/` of
    /// the common git dir (writable: granted read-write, the grant taken after the binds);
    /// without (the session owns no `tyba/` branch), `refs/heads/tyba/` stays read-only,
    /// bound so when a writable root covers it. Both directories are made when absent; one that is a
    /// symbolic link or behind one goes to [`SandboxPlan::unprotected`]. Nothing for a
    /// repository on the reftable backend (no ref of it is writable).
    pub fn grant_own_branch(
        &mut self,
        git: Option<&crate::session::GitLayout>,
        own: Option<&crate::own_branch::OwnBranch>,
    ) {
        let Some(g) = git else { return };
        if uses_reftable(&g.common_dir) {
            return;
        }
        for d in own_branch_dirs(&g.common_dir) {
            if let Err(e) = real_dir(&d) {
                self.unprotected.push(e);
                return;
            }
        }
        match own {
            Some(o) => {
                for (src, over) in o.binds() {
                    push_unique(&mut self.read_write, over.clone());
                    self.branch_binds.push((src, over));
                }
                // The person's objects stay as they are; the agent's new ones wait in the
                // session's upper layer until git has hashed them (`crate::objects_layer`).
                let objects = g.common_dir.join("objects");
                if !is_within(&g.common_dir, &self.worktree) && self.read_write.contains(&objects) {
                    let (upper, work) = o.objects_layer();
                    self.objects_layer = Some(crate::objects_layer::ObjectsLayer {
                        objects,
                        upper,
                        work,
                    });
                }
            }
            None => {
                // The branches only: their reflogs are not refs (and a bind there would pin
                // `logs/refs/`, through which git renames a reflog in `git branch -m`).
                let [refs, _logs] = own_branch_dirs(&g.common_dir);
                if self.read_write.iter().any(|r| is_within(&refs, r)) {
                    push_unique(&mut self.protected, refs);
                }
            }
        }
    }

    /// Pins the directories between a writable root and each read-only bind
    /// ([`SandboxPlan::protected`]) or branch bind under `refs/` inside it (bound over
    /// themselves, writable: [`SandboxPlan::pinned`]): a bind pins the inode at its path, but
    /// a parent directory renamed away takes the mount with it and a new one with the same
    /// name holds what the agent wrote (`.git/refs/heads` moved aside and rebuilt with a new
    /// `main`; `.git/objects/info` with an `alternates`). A mount point cannot be renamed
    /// (`EBUSY`). The writable root itself is left (its parent is not writable). Reflog
    /// directories are not pinned (git renames reflogs through `logs/refs/` when renaming a
    /// branch). Sorted shallow first, so that no pin hides a deeper one.
    pub fn pin_parents(&mut self) {
        let rw = self.read_write.clone();
        let targets: Vec<PathBuf> = self
            .protected
            .iter()
            .cloned()
            .chain(
                self.branch_binds
                    .iter()
                    .filter(|(src, _)| src.file_name().is_some_and(|n| n == "heads"))
                    .map(|(_, over)| over.clone()),
            )
            .collect();
        for t in targets {
            let mut cur = t.parent();
            while let Some(d) = cur {
                if !rw.iter().any(|r| d != r && is_within(d, r)) {
                    break;
                }
                if std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
                    push_unique(&mut self.pinned, d.to_path_buf());
                }
                cur = d.parent();
            }
        }
        self.pinned.sort_by_key(|p| p.components().count());
    }

    /// Moves `dir` from [`SandboxPlan::read_only`] to [`SandboxPlan::read_write`]: for a layer
    /// mounted over it in the sandbox's mount namespace (a cache's, the main git dir's), whose
    /// Landlock rule, made after the mount, names the layer's merged directory.
    pub(crate) fn grant_layered(&mut self, dir: &Path) {
        self.read_only.retain(|p| p != dir);
        if !self.read_write.iter().any(|p| p == dir) {
            self.read_write.push(dir.to_path_buf());
        }
    }

    /// Keeps the directory `dir` of the person's own (tyba's configuration, state and sockets)
    /// read-only for the session when a writable root covers it: made when absent, then bound
    /// read-only like the protected files. A `dir` that is a symbolic link (an entry of the
    /// configuration directory) is bound where it leads, file or directory, and never made;
    /// one that is a file (`--policy FILE`) is bound as it is. A symbolic link on the way that
    /// a writable root holds cannot be kept: it goes to [`SandboxPlan::unprotected`].
    /// One that cannot be made or followed goes to [`SandboxPlan::unprotected`] (the session
    /// refuses to start).
    pub fn keep_read_only(&mut self, dir: &Path) {
        let covered = |p: &Path, rw: &[PathBuf]| rw.iter().any(|r| is_within(p, r));
        // Compare where it is (or would be) physically: each link on the way followed, one
        // that leads nowhere yet too (`~/.config -> <worktree>/config`: review 22's r22-02,
        // which gave up there and left it writable).
        let real = crate::outside_fs::through_links(dir);
        // A cache's private layer (`crate::caches`) is writable too: the bind goes over it.
        let writable: Vec<PathBuf> = self
            .read_write
            .iter()
            .chain(&self.caches)
            .chain(std::iter::once(&self.worktree))
            .chain(std::iter::once(&self.tmp_dir))
            .cloned()
            .collect();
        // A symbolic link on the way that the agent writes would let it point `dir` at files
        // of its own for the next session (review 24's r24-01: `<worktree>/tyba -> hosts/a`
        // under `~/.config/tyba/policy.toml`). A link cannot be bound read-only: the start
        // stops.
        for link in crate::outside_fs::links_on_the_way(dir) {
            if covered(&link, &writable) {
                self.unprotected.push(format!(
                    "{} is a symbolic link on the way to tyba's own {}, in a path the agent writes: the agent could point it at files of its own for the next session (make it a plain directory or file there, or move it out of the worktree)",
                    link.display(),
                    dir.display()
                ));
            }
        }
        if !covered(&real, &writable) {
            return;
        }
        // An entry of tyba's configuration that is a symbolic link ([`own_dirs_named`]) is
        // bound where it leads, a file too. One that leads nowhere names neither a file nor a
        // directory to make: the start stops.
        //
        // [`own_dirs_named`]: crate::broker::paths::own_dirs_named
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            match std::fs::canonicalize(dir) {
                Ok(p) if covered(&p, &writable) => push_unique(&mut self.protected, p),
                Ok(_) => {}
                Err(e) => self.unprotected.push(format!(
                    "{} is a symbolic link to {} in a path the agent writes, and cannot be kept read-only: {e}",
                    dir.display(),
                    real.display()
                )),
            }
            return;
        }
        // A file (a policy file named on the command line) is bound as it is.
        if std::fs::metadata(&real).is_ok_and(|m| !m.is_dir()) {
            if let Ok(p) = std::fs::canonicalize(&real) {
                push_unique(&mut self.protected, p);
            }
            return;
        }
        match std::fs::create_dir_all(&real).and_then(|()| std::fs::canonicalize(&real)) {
            Ok(p) if covered(&p, &writable) => push_unique(&mut self.protected, p),
            Ok(_) => {}
            Err(e) => self.unprotected.push(format!(
                "cannot make {} to keep it read-only: {e}",
                real.display()
            )),
        }
    }

    /// Protected paths that are missing and could be created by the agent (reported at start).
    pub fn unprotected_control_files(
        &self,
        config: &tyba_policy::EffectiveConfig,
        home: Option<&Path>,
    ) -> Vec<PathBuf> {
        config
            .filesystem
            .agent_control_files
            .iter()
            .filter_map(|s| expand_home(s, home))
            .filter(|p| !p.exists() && self.read_write.iter().any(|r| is_within(p, r)))
            .collect()
    }
}

/// Empty stand-ins made for the agent control files that do not exist yet, so that they too
/// can be bound read-only (a bind mount needs an existing target). A missing control file
/// inside a writable agent state directory would otherwise be created by the agent itself:
/// a `settings.json` or `hooks.json` that approves its own actions.
///
/// Made with `O_EXCL` (never over anything); `*.json` files get `{}`, other files nothing,
/// names without an extension are made as empty directories (`hooks/`, `rules/`).
///
/// A stand-in lives in the user's own directories, where every session of that user sees it,
/// so it is shared and counted (issue 17): unlinking a file that is bind-mounted in another
/// session's mount namespace would detach that session's read-only bind (Linux ≥ 3.18 allows
/// it and lazily unmounts the others), and one session removing what another is about to
/// bind made it fail with `ENOENT`. So each stand-in has a record in the registry
/// (`/dev/shm/tyba-<uid>/stand-ins/<key>.lock`, else `$XDG_STATE_HOME/tyba/stand-ins/`:
/// [`stand_in_registry`]; its path, device and inode), and every
/// session that relies on it (the one that made it, and any later one that finds it) holds a
/// shared `flock(2)` on that record for its whole life (the kernel drops it however the
/// session ends). Records are made, taken and dropped only under an exclusive `flock` on
/// `stand-ins/registry.lock`. When a session ends it lets its shared lock go and, if it can
/// then take the record exclusively (no other live session relies on it), removes the
/// stand-in when it is still exactly as made (a file with other contents or a directory with
/// something inside is the user's now, and stays) and the record with it; a file is moved to
/// a pool for the next session instead ([`stand_in_pool`]). A stand-in left by
/// a session that died is taken up by the next session and removed at its end. Without a
/// state directory (no `HOME` nor `XDG_STATE_HOME`) no stand-in is made, and the start-up
/// report lists the files as not kept read-only.
#[derive(Debug, Default)]
pub struct ControlPlaceholders {
    /// The stand-ins this session made, for the start-up report.
    made: Vec<PathBuf>,
    /// Every stand-in this session relies on, with its record's shared lock.
    held: Vec<HeldStandIn>,
    /// The registry the records are in.
    registry: Option<PathBuf>,
}

#[derive(Debug)]
struct HeldStandIn {
    path: PathBuf,
    record: PathBuf,
    contents: Option<&'static [u8]>,
    _shared: nix::fcntl::Flock<std::fs::File>,
}

/// What a stand-in at `p` holds: `Some(bytes)` for a file, `None` for a directory.
fn stand_in_contents(p: &Path) -> Option<&'static [u8]> {
    match p.extension() {
        None => None,
        Some(e) if e == "json" => Some(b"{}\n"),
        Some(_) => Some(b""),
    }
}

/// The registry of stand-ins, made private: `/dev/shm/tyba-<uid>/stand-ins`
/// ([`crate::broker::paths::shm_dir`], named by the user id alone, so every session of the
/// user shares it whatever its environment, and its records cost no disk inode), else
/// `$XDG_STATE_HOME/tyba/stand-ins`; `None` without either.
fn stand_in_registry() -> Option<PathBuf> {
    let dir = crate::broker::paths::shm_dir()
        .map(|d| d.join("stand-ins"))
        .or_else(|| crate::broker::paths::state_dir().map(|d| d.join("stand-ins")))?;
    crate::broker::paths::ensure_private_dir(&dir).ok()?;
    Some(dir)
}

/// Where stand-ins wait between sessions: `$XDG_STATE_HOME/tyba/stand-in-pool`, on the disk
/// of the home (made when first used). A stand-in still as made is moved there at the end of
/// the last session relying on it, and moved (`renameat2(2)` `RENAME_NOREPLACE`) into place by
/// the next session that needs one of the same kind, instead of being removed and made anew:
/// making a file or directory costs an inode, which ext4 without a journal allocates only
/// after skipping every inode freed in the last minute (`fs/ext4/ialloc.c`,
/// `recently_deleted`), up to a millisecond of CPU each on a disk that builds churn, and
/// removing a directory frees a block the disk is then told to discard (`discard` mounts).
/// A rename works within one mount only; elsewhere the stand-in is made and removed as
/// before.
fn stand_in_pool() -> Option<PathBuf> {
    crate::broker::paths::state_dir().map(|d| d.join("stand-in-pool"))
}

/// Most entries kept in the pool ([`stand_in_pool`]); beyond it a stand-in is removed.
const POOL_MAX: usize = 64;

/// The pool's name prefix for a stand-in holding `contents` (`None`: a directory).
fn pool_prefix(contents: Option<&[u8]>) -> String {
    match contents {
        None => "d-".to_string(),
        Some(c) => {
            let h = c.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            format!("f{h:016x}-")
        }
    }
}

/// Whether `p` is a stand-in as made: the user's own file holding exactly `contents` with no
/// other name (a hard link elsewhere would share what is written to it), or (`None`) the
/// user's own empty directory.
fn is_stand_in(p: &Path, contents: Option<&[u8]>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return false;
    };
    if m.uid() != nix::unistd::geteuid().as_raw() {
        return false;
    }
    match contents {
        None => m.is_dir() && std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none()),
        Some(c) => {
            m.is_file()
                && m.nlink() == 1
                && m.len() == c.len() as u64
                && std::fs::read(p).is_ok_and(|now| now == c)
        }
    }
}

/// `renameat2(from, to, RENAME_NOREPLACE)`: never over an existing name.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> nix::Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        from,
        nix::fcntl::AT_FDCWD,
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
}

/// The pool's entries, read once per session start or end.
fn pool_entries(pool: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(pool)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// Moves a pooled stand-in of the kind of `contents` to `p` (absent), taking it out of
/// `entries`; whether one was moved. Stops at the first rename that fails for another reason
/// than a name gone or taken (another mount: `EXDEV`).
fn take_from_pool(
    pool: &Path,
    entries: &mut Vec<std::ffi::OsString>,
    contents: Option<&[u8]>,
    p: &Path,
) -> bool {
    let prefix = pool_prefix(contents);
    while let Some(i) = entries
        .iter()
        .position(|n| n.to_string_lossy().starts_with(&prefix))
    {
        let from = pool.join(entries.swap_remove(i));
        if !is_stand_in(&from, contents) {
            continue;
        }
        match rename_noreplace(&from, p) {
            Ok(()) => return true,
            Err(nix::errno::Errno::ENOENT) => continue,
            Err(_) => return false,
        }
    }
    false
}

/// Moves the stand-in at `p`, still as made, to the pool; whether it went. One found changed
/// once in the pool (written to, or given an entry, between the check and the move) is moved
/// back at once.
fn retire_to_pool(p: &Path, contents: Option<&[u8]>, pool: &Path, count: &mut usize) -> bool {
    use std::os::unix::fs::MetadataExt;
    if *count >= POOL_MAX || !is_stand_in(p, contents) {
        return false;
    }
    let Ok(ino) = std::fs::symlink_metadata(p).map(|m| m.ino()) else {
        return false;
    };
    let to = pool.join(format!("{}{ino}", pool_prefix(contents)));
    if rename_noreplace(p, &to).is_err() {
        return false;
    }
    if !is_stand_in(&to, contents) {
        let _ = rename_noreplace(&to, p);
        return true;
    }
    *count += 1;
    true
}

/// The exclusive lock on the registry, waited for (held only for a few file operations).
fn lock_registry(dir: &Path) -> Option<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir.join("registry.lock"))
        .ok()?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok()
}

/// The record file of the stand-in at `p`: a 64-bit FNV-1a hash of the path's bytes (the
/// record holds the path itself, and is trusted only when it matches).
fn stand_in_record(dir: &Path, p: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let h = p
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    dir.join(format!("{h:016x}.lock"))
}

fn record_text(p: &Path, m: &std::fs::Metadata) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut v = p.as_os_str().as_bytes().to_vec();
    v.push(0);
    v.extend_from_slice(format!("{} {}\n", m.dev(), m.ino()).as_bytes());
    v
}

/// Whether `record` says `p` is a stand-in, and `p` is still that very file.
fn record_names(record: &Path, p: &Path) -> bool {
    match (std::fs::read(record), std::fs::symlink_metadata(p)) {
        (Ok(text), Ok(m)) => text == record_text(p, &m),
        _ => false,
    }
}

fn open_record(record: &Path, create: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create_new(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(record)
}

fn shared(f: std::fs::File) -> Option<nix::fcntl::Flock<std::fs::File>> {
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock).ok()
}

/// Takes `record` exclusively without waiting; `None` while some session holds it (or it
/// is gone).
fn unused(record: &Path) -> Option<nix::fcntl::Flock<std::fs::File>> {
    let f = open_record(record, false).ok()?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).ok()
}

impl ControlPlaceholders {
    /// Makes (or takes up, when another session made them) the stand-ins for `config`'s
    /// `agent_control_files` whose parent directory exists and lies within one of its
    /// `agent_state` or `read_write` paths. Failures are skipped: the start-up report then
    /// lists the file as not kept read-only.
    pub fn create(config: &tyba_policy::EffectiveConfig, home: Option<&Path>) -> Self {
        Self::create_in(config, home, stand_in_registry())
    }

    /// [`ControlPlaceholders::create`] with the registry at `registry` (made private by the
    /// caller); none without one.
    fn create_in(
        config: &tyba_policy::EffectiveConfig,
        home: Option<&Path>,
        registry: Option<PathBuf>,
    ) -> Self {
        let fs = &config.filesystem;
        let roots: Vec<PathBuf> = fs
            .agent_state
            .iter()
            .chain(&fs.read_write)
            .filter_map(|s| expand_home(s, home).and_then(|p| canonical_existing(&p)))
            .collect();
        let mut wanted = Vec::new();
        for s in &fs.agent_control_files {
            let Some(p) = expand_home(s, home) else {
                continue;
            };
            let Some(parent) = p.parent().and_then(|d| std::fs::canonicalize(d).ok()) else {
                continue;
            };
            if !roots.iter().any(|r| is_within(&parent, r)) {
                continue;
            }
            let Some(name) = p.file_name() else {
                continue;
            };
            let p = parent.join(name);
            let contents = stand_in_contents(&p);
            wanted.push((p, contents));
        }
        Self::make(wanted, registry)
    }

    /// Makes (or takes up) a stand-in for each of `wanted` (`(path, contents)`: `None` for a
    /// directory) that does not exist, recorded in `registry`; none without one.
    fn make(wanted: Vec<(PathBuf, Option<&'static [u8]>)>, registry: Option<PathBuf>) -> Self {
        let mut me = ControlPlaceholders::default();
        if wanted.is_empty() {
            return me;
        }
        let Some(dir) = registry else {
            return me;
        };
        let Some(_registry) = lock_registry(&dir) else {
            return me;
        };
        me.registry = Some(dir.clone());
        let pool = stand_in_pool();
        let mut entries = pool.as_deref().map(pool_entries).unwrap_or_default();
        for (p, contents) in wanted {
            let record = stand_in_record(&dir, &p);
            // The record and the path looked at once each ([`record_names`]).
            let text = std::fs::read(&record);
            let here = std::fs::symlink_metadata(&p);
            let named = matches!((&text, &here), (Ok(t), Ok(m)) if *t == record_text(&p, m));
            if named {
                // Another session's stand-in (or one a dead session left): rely on it too.
                if let Some(l) = open_record(&record, false).ok().and_then(shared) {
                    me.held.push(HeldStandIn {
                        path: p,
                        record,
                        contents,
                        _shared: l,
                    });
                }
                continue;
            }
            if !matches!(&text, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
                // A stale record (its stand-in removed or replaced), or another path's: dropped
                // only when no session holds it, else this path gets no stand-in.
                match unused(&record) {
                    Some(l) => {
                        let _ = std::fs::remove_file(&record);
                        drop(l);
                    }
                    None => continue,
                }
            }
            if here.is_ok() {
                // The user's own file: bound read-only as it is.
                continue;
            }
            let pooled = pool
                .as_deref()
                .is_some_and(|pool| take_from_pool(pool, &mut entries, contents, &p));
            let made = pooled
                || match contents {
                    None => std::fs::create_dir(&p).is_ok(),
                    Some(c) => std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .and_then(|mut f| std::io::Write::write_all(&mut f, c))
                        .is_ok(),
                };
            if !made {
                continue;
            }
            let lock = std::fs::symlink_metadata(&p).ok().and_then(|m| {
                let mut f = open_record(&record, true).ok()?;
                std::io::Write::write_all(&mut f, &record_text(&p, &m)).ok()?;
                shared(f)
            });
            match lock {
                Some(l) => {
                    me.made.push(p.clone());
                    me.held.push(HeldStandIn {
                        path: p,
                        record,
                        contents,
                        _shared: l,
                    });
                }
                None => {
                    // Unrecorded, it could not be shared safely: not made after all.
                    let _ = std::fs::remove_file(&record);
                    remove_if_as_made(&p, contents);
                }
            }
        }
        me
    }

    /// Takes over `other`'s stand-ins (made with the same registry), held until this ends.
    fn absorb(&mut self, mut other: ControlPlaceholders) {
        self.made.append(&mut other.made);
        self.held.append(&mut other.held);
        if self.registry.is_none() {
            self.registry = other.registry.take();
        }
    }

    /// The placeholders this session made.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.made.iter().map(PathBuf::as_path)
    }
}

/// Removes the stand-in at `p` if it is still exactly as made.
fn remove_if_as_made(p: &Path, contents: Option<&[u8]>) {
    match contents {
        // Fails, and so keeps it, when something was put inside.
        None => {
            let _ = std::fs::remove_dir(p);
        }
        Some(c) => {
            let same = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
                && std::fs::read(p).is_ok_and(|now| now == c);
            if same {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

impl Drop for ControlPlaceholders {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let registry = self.registry.as_deref().and_then(lock_registry);
        let pool = stand_in_pool().filter(|p| crate::broker::paths::ensure_private_dir(p).is_ok());
        let mut count = pool.as_deref().map_or(0, |p| pool_entries(p).len());
        // Directories are removed after the files, together ([`remove_empty_dirs`]), each with
        // its record and the record's exclusive lock kept until it is gone.
        let mut dirs = Vec::new();
        for h in self.held.drain(..).rev() {
            let HeldStandIn {
                path,
                record,
                contents,
                _shared,
            } = h;
            drop(_shared);
            if registry.is_none() {
                continue;
            }
            // The last session relying on it removes it.
            let Some(last) = unused(&record) else {
                continue;
            };
            if record_names(&record, &path) {
                if contents.is_none() {
                    dirs.push((path, record, last));
                    continue;
                }
                let pooled = pool
                    .as_deref()
                    .is_some_and(|pool| retire_to_pool(&path, contents, pool, &mut count));
                if !pooled {
                    remove_if_as_made(&path, contents);
                }
            }
            let _ = std::fs::remove_file(&record);
            drop(last);
        }
        // The deepest first: a stand-in directory holding another is empty once that one went.
        dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
        let mut left = Vec::new();
        for (path, record, last) in dirs {
            let pooled = pool
                .as_deref()
                .is_some_and(|pool| retire_to_pool(&path, None, pool, &mut count));
            if pooled {
                let _ = std::fs::remove_file(&record);
                drop(last);
            } else {
                left.push((path, record, last));
            }
        }
        remove_empty_dirs(left);
    }
}

/// Removes the stand-in directories of `dirs` that are still empty (`rmdir(2)` fails, and so
/// keeps one, when something was put inside), then their records. Those that hold none of the
/// others are removed at the same time, one thread each, then the rest in the same way: an
/// `rmdir` frees the directory's block, which on ext4 mounted with `discard` and without a
/// journal (as on many VM images) waits for the disk to discard it, 1–10 ms each on a disk
/// other work keeps busy; waited for together they cost about one wait instead of one each.
fn remove_empty_dirs<L>(mut dirs: Vec<(PathBuf, PathBuf, L)>) {
    while !dirs.is_empty() {
        let paths: Vec<PathBuf> = dirs.iter().map(|(p, _, _)| p.clone()).collect();
        let holds_another = |p: &Path| paths.iter().any(|q| q != p && q.starts_with(p));
        // Never empty: the deepest directory holds no other.
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut dirs)
            .into_iter()
            .partition(|(p, _, _)| !holds_another(p));
        dirs = later;
        std::thread::scope(|s| {
            for (p, _, _) in &now {
                let spawned = std::thread::Builder::new()
                    .name("tyba-rmdir".into())
                    .spawn_scoped(s, move || remove_if_as_made(p, None));
                if spawned.is_err() {
                    remove_if_as_made(p, None);
                }
            }
        });
        for (_, record, last) in now {
            let _ = std::fs::remove_file(&record);
            drop(last);
        }
    }
}

/// A tree that could not be removed ([`remove_tree`]).
#[derive(Debug, thiserror::Error)]
#[error("cannot remove {}: {source}", path.display())]
pub struct CleanupError {
    /// The tree's root.
    pub path: PathBuf,
    /// The last removal error.
    pub source: std::io::Error,
}

/// Removes `dir` and everything beneath it, as its owner, never following a symbolic link:
/// each directory is made `0700` before it is read (the agent may have made directories
/// unreadable or unwritable, `chmod 000`). One directory is held open at a time and the way
/// down is kept as names, so no depth is too deep: `remove_dir_all` holds a descriptor per
/// level and recurses, and a tree deeper than the descriptor limit stayed behind (review
/// 31's r31-02: 5,000 levels under the session's temp dir left 300 MiB in `/dev/shm`). Call
/// only when no process of the sandbox is left (nothing can race the walk, which goes back
/// up through `..`). A `dir` that does not exist is removed already.
///
/// # Errors
/// [`CleanupError`] with the first error that stopped the removal.
pub fn remove_tree(dir: &Path) -> Result<(), CleanupError> {
    match remove_deep(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => Ok(()),
        r => r.map_err(|source| CleanupError {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// [`remove_tree`]'s walk: at each level its files are removed and its subdirectories'
/// names kept; the walk goes down into the next of them, and back up (through `..`) once a
/// directory is empty, which is then removed by its name in its parent.
fn remove_deep(dir: &Path) -> std::io::Result<()> {
    use nix::dir::{Dir, Type};
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::{fchmod, fstatat, Mode, SFlag};
    use nix::unistd::{unlinkat, UnlinkatFlags};
    use std::ffi::{OsStr, OsString};
    use std::os::unix::ffi::OsStrExt;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let owner = Mode::from_bits_truncate(0o700);
    if !std::fs::symlink_metadata(dir)?.is_dir() {
        return std::fs::remove_file(dir);
    }
    // A directory the agent made unreadable is made the owner's again first, by its name.
    let mut cur = match Dir::open(dir, flags, Mode::empty()) {
        Err(nix::errno::Errno::EACCES) => {
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
            Dir::open(dir, flags, Mode::empty())?
        }
        r => r?,
    };
    let open = |at: &Dir, name: &OsStr| -> std::io::Result<Dir> {
        match Dir::openat(at, name, flags, Mode::empty()) {
            Err(nix::errno::Errno::EACCES) => {
                nix::sys::stat::fchmodat(
                    at,
                    name,
                    owner,
                    nix::sys::stat::FchmodatFlags::NoFollowSymlink,
                )?;
                Ok(Dir::openat(at, name, flags, Mode::empty())?)
            }
            r => Ok(r?),
        }
    };
    // The way down: each level's name and the subdirectories of it still to remove.
    let mut way: Vec<(OsString, Vec<OsString>)> = Vec::new();
    let mut pending = Vec::new();
    loop {
        let _ = fchmod(&cur, owner);
        let entries: Vec<(OsString, Option<Type>)> = cur
            .iter()
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|e| !matches!(e.file_name().to_bytes(), b"." | b".."))
            .map(|e| {
                (
                    OsStr::from_bytes(e.file_name().to_bytes()).to_owned(),
                    e.file_type(),
                )
            })
            .collect();
        for (name, ty) in entries {
            let is_dir = match ty {
                Some(t) => t == Type::Directory,
                None => {
                    fstatat(&cur, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
                        SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
                    })
                }
            };
            if is_dir {
                pending.push(name);
            } else {
                unlinkat(&cur, name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
            }
        }
        // Down into the next subdirectory still there; else up, removing the levels done.
        loop {
            if let Some(name) = pending.pop() {
                let next = open(&cur, &name)?;
                way.push((name, std::mem::take(&mut pending)));
                cur = next;
                break;
            }
            let Some((name, rest)) = way.pop() else {
                drop(cur);
                return std::fs::remove_dir(dir);
            };
            cur = Dir::openat(&cur, "..", flags, Mode::empty())?;
            unlinkat(&cur, name.as_os_str(), UnlinkatFlags::RemoveDir)?;
            pending = rest;
        }
    }
}

/// Errors applying the Landlock domain.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// The ruleset could not be built or enforced.
    #[error("landlock: {0}")]
    Ruleset(#[from] RulesetError),
    /// A path could not be opened for a rule.
    #[error("landlock rule for {path}: {message}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// The kernel did not enforce the ruleset fully.
    #[error("landlock ruleset only {0:?}")]
    NotFull(String),
}

/// Applies the plan's Landlock domain to the calling thread (and so to everything it execs).
/// Call in the sandbox's stage 2, after the private `/proc` is mounted (rules name inodes).
///
/// # Errors
/// [`LandlockError`] when a rule cannot be added or the ruleset is not enforced (with
/// `require_full`, anything less than full enforcement of the kernel's ABI).
pub fn apply_landlock(
    plan: &SandboxPlan,
    abi_n: i32,
    require_full: bool,
) -> Result<RestrictionStatus, LandlockError> {
    restrict(
        landlock_ruleset(plan, &[], abi_n, require_full)?,
        require_full,
    )
}

/// Enforces a ruleset made by [`landlock_ruleset`] on the calling thread.
///
/// # Errors
/// [`LandlockError`] when the kernel refuses it, or with `require_full` does not enforce it
/// fully.
pub fn restrict(
    created: RulesetCreated,
    require_full: bool,
) -> Result<RestrictionStatus, LandlockError> {
    let status = created.restrict_self()?;
    if require_full && status.ruleset != landlock::RulesetStatus::FullyEnforced {
        return Err(LandlockError::NotFull(format!("{:?}", status.ruleset)));
    }
    Ok(status)
}

/// A ruleset handling every filesystem right of the ABI and TCP bind/connect (ABI 4), with
/// the compatibility level `require_full` asks for; plus the ABI's full and file-only rights.
fn handled_ruleset(
    abi_n: i32,
    require_full: bool,
) -> Result<
    (
        Ruleset,
        landlock::BitFlags<AccessFs>,
        landlock::BitFlags<AccessFs>,
    ),
    LandlockError,
> {
    let abi = abi_from(abi_n.min(7));
    let all = AccessFs::from_all(abi);
    let level = if require_full {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)?;
    if abi_n >= 4 {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    Ok((ruleset, all, AccessFs::from_file(abi)))
}

/// Creates `ruleset` with one path-beneath rule per `(path, rights)` (rights cut to the
/// file-only ones for a file); paths that no longer exist are skipped.
fn create_with_rules(
    ruleset: Ruleset,
    rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)>,
    file_rights: landlock::BitFlags<AccessFs>,
) -> Result<RulesetCreated, LandlockError> {
    let mut beneath = Vec::with_capacity(rules.len());
    for (p, access) in rules {
        let fd = match PathFd::new(&p) {
            Ok(fd) => fd,
            // Paths that vanished since the plan was made are skipped.
            Err(_) if !p.exists() => continue,
            Err(e) => {
                return Err(LandlockError::Path {
                    path: p,
                    message: e.to_string(),
                })
            }
        };
        let access = if p.is_dir() {
            access
        } else {
            access & file_rights
        };
        beneath.push(PathBeneath::new(fd, access));
    }
    Ok(ruleset
        .create()?
        .add_rules(beneath.into_iter().map(Ok::<_, RulesetError>))?)
}

/// Builds (without enforcing) the plan's Landlock ruleset, plus each of `extra` (an approved
/// command's own grants, see `crate::runner`: read-write when its flag is set, else read +
/// execute). Rules name inodes, so
/// call it where the rules' paths resolve as the sandboxed processes will see them.
///
/// # Errors
/// [`LandlockError`] when the ruleset cannot be made or a rule cannot be added.
pub fn landlock_ruleset(
    plan: &SandboxPlan,
    extra: &[(PathBuf, bool)],
    abi_n: i32,
    require_full: bool,
) -> Result<RulesetCreated, LandlockError> {
    let (mut ruleset, all, file_rights) = handled_ruleset(abi_n, require_full)?;
    let rw = all & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
    let ro = AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute;
    if abi_n >= 6 {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> = Vec::new();
    for p in &plan.read_only {
        rules.push((p.clone(), ro));
    }
    for p in &plan.read_write {
        rules.push((p.clone(), rw));
    }
    for (p, write) in extra {
        rules.push((p.clone(), if *write { rw } else { ro }));
    }
    // The outside-files server's covers: every access reaches the server, which decides
    // (`crate::outside_fs`); nothing is executed from them.
    for p in &plan.outside_mounted {
        rules.push((p.clone(), rw & !AccessFs::Execute));
    }
    for d in DEVICES_RW {
        rules.push((PathBuf::from(d), AccessFs::ReadFile | AccessFs::WriteFile));
    }
    for d in DEVICES_RO {
        rules.push((PathBuf::from(d), AccessFs::ReadFile.into()));
    }
    let tty = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev;
    for d in DEVICES_TTY {
        rules.push((PathBuf::from(d), tty & all));
    }
    if plan.private_pts {
        for d in DEVICES_PTS {
            rules.push((PathBuf::from(d), tty & all));
        }
    }
    create_with_rules(ruleset, rules, file_rights)
}

/// The roots the supervisor's exec classifier may read (`crate::classify_worker`): exactly
/// what the agent's domain may read, the plan's `read_only` and `read_write` roots, minus
/// `/proc` (the supervisor's `/proc` is the host's, not the sandbox's private one; the exec's
/// `/proc` entries are read before classifying, outside the classifier's domain).
pub fn classifier_roots(plan: &SandboxPlan) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for p in plan.read_only.iter().chain(&plan.read_write) {
        if !is_within(p, Path::new("/proc")) {
            push_unique(&mut roots, p.clone());
        }
    }
    roots
}

/// Builds (without enforcing) a read-only Landlock ruleset: read and execute beneath each of
/// `roots` (execute: gix may run `git` to find its installation's configuration), read-write
/// on `/dev/null` only (a child's null stdio), every other file access and TCP bind/connect
/// (ABI 4) denied. No device that never ends (`/dev/zero`, `/dev/urandom`) and no terminal is
/// granted: a configuration file could include one.
///
/// # Errors
/// [`LandlockError`] when the ruleset cannot be made or a rule cannot be added.
pub fn read_only_ruleset(
    roots: &[PathBuf],
    abi_n: i32,
    require_full: bool,
) -> Result<RulesetCreated, LandlockError> {
    let (ruleset, _, file_rights) = handled_ruleset(abi_n, require_full)?;
    let ro = AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute;
    let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> =
        roots.iter().map(|p| (p.clone(), ro)).collect();
    rules.push((
        PathBuf::from("/dev/null"),
        AccessFs::ReadFile | AccessFs::WriteFile,
    ));
    create_with_rules(ruleset, rules, file_rights)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn remove_tree_restores_permissions_and_follows_no_link() {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o500)).unwrap();
        let t = base.path().join("tmp");
        std::fs::create_dir_all(t.join("a/b/c")).unwrap();
        std::fs::write(t.join("a/b/c/f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, t.join("a/link")).unwrap();
        for d in ["a/b/c", "a/b", "a", ""] {
            std::fs::set_permissions(t.join(d), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        remove_tree(&t).unwrap();
        assert!(!t.exists());
        // The link's target kept its mode and contents.
        let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o500);
        assert!(outside.join("keep").exists());
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Removing what is not there is done already.
        remove_tree(&t).unwrap();
    }

    /// A tree deeper than the supervisor's descriptor limit as a user (1,024) and than
    /// `PATH_MAX`, with an unreadable directory and a link out half-way and a file at the
    /// bottom: removed, the link's target kept. (`remove_dir_all`, used before, failed on it
    /// with `EMFILE`, or overflowed the stack where the limit is high.)
    #[test]
    fn remove_tree_removes_a_tree_deeper_than_the_descriptor_limit() {
        use nix::fcntl::OFlag;
        use nix::sys::stat::Mode;
        const DEPTH: usize = 5000;
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let t = base.path().join("tmp");
        std::fs::create_dir(&t).unwrap();
        let dir = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        let mut cur = nix::dir::Dir::open(&t, dir, Mode::empty()).unwrap();
        for i in 0..DEPTH {
            nix::sys::stat::mkdirat(&cur, "d", Mode::from_bits_truncate(0o700)).unwrap();
            if i == DEPTH / 2 {
                nix::unistd::symlinkat(outside.as_path(), &cur, "link").unwrap();
                nix::sys::stat::mkdirat(&cur, "locked", Mode::empty()).unwrap();
                nix::sys::stat::mkdirat(&cur, "e", Mode::from_bits_truncate(0o700)).unwrap();
            }
            cur = nix::dir::Dir::openat(&cur, "d", dir, Mode::empty()).unwrap();
        }
        drop(
            nix::fcntl::openat(
                &cur,
                "blob",
                OFlag::O_CREAT | OFlag::O_WRONLY,
                Mode::from_bits_truncate(0o600),
            )
            .unwrap(),
        );
        drop(cur);
        remove_tree(&t).unwrap();
        assert!(!t.exists());
        assert!(outside.join("keep").exists());
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_files_git_configuration_names_are_found() {
        let t = tempfile::tempdir().unwrap();
        let wt = std::fs::canonicalize(t.path()).unwrap().join("wt");
        std::fs::create_dir_all(wt.join("tools")).unwrap();
        let git = |args: &[&str]| {
            let st = std::process::Command::new("git")
                .arg("-C")
                .arg(&wt)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", t.path())
                .status()
                .unwrap();
            assert!(st.success(), "{args:?}");
        };
        git(&["init", "-q"]);
        for (k, v) in [
            ("include.path", "../shared.gitconfig"),
            ("includeIf.onbranch:main.path", "/etc/tyba-test-absent/x"),
            ("core.hooksPath", ".githooks"),
            ("core.fsmonitor", "./tools/fsm"),
            ("diff.evil.textconv", "./tools/conv --flag"),
            ("alias.st", "!./tools/st.sh"),
            ("alias.lg", "log --format=a/b"),
            ("core.sshCommand", "ssh -i key"),
        ] {
            git(&["config", k, v]);
        }
        let found: Vec<PathBuf> = config_named_files(&wt, None)
            .into_iter()
            .map(|f| f.path)
            .collect();
        for p in [
            wt.join("shared.gitconfig"),
            wt.join(".githooks"),
            wt.join("tools/fsm"),
            wt.join("tools/conv"),
            wt.join("tools/st.sh"),
            PathBuf::from("/etc/tyba-test-absent/x"),
        ] {
            assert!(found.contains(&p), "{} in {found:?}", p.display());
        }
        // Nothing else in the worktree: an alias that runs git and a command named by a bare
        // program name name no file there.
        let in_wt = found.iter().filter(|p| p.starts_with(&wt)).count();
        assert_eq!(in_wt, 5, "{found:?}");
    }

    #[test]
    fn the_cheap_test_of_git_configuration_is_a_superset() {
        for t in [
            "[include]\n\tpath = x",
            "[includeIf \"gitdir:/a/\"]\npath = y",
            "[Core]\n\tHooksPath = .githooks",
            "[core] hooksPath = .husky",
            "[core]\n\tfsmonitor = ./fsm",
            "[diff \"x\"]\n\ttextconv = ./conv",
            "[alias]\n\tst = \"!./st.sh\"",
            "[core]\n\tsshCommand = ~/bin/ssh",
            "[alias]\n\tx = a \\\n\tb",
        ] {
            assert!(config_text_may_name_files(t), "{t:?}");
        }
        for t in [
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tlogallrefupdates = true",
            "[remote \"origin\"]\n\turl = https://example.com/a/b.git",
            "[credential \"https://x\"]\n\thelper = gcloud.sh",
            "[alias]\n\tlg = log --oneline\n# include = x",
            "[user]\n\tname = a/b",
        ] {
            assert!(!config_text_may_name_files(t), "{t:?}");
        }
    }

    #[test]
    fn only_git_config_variables_that_add_configuration_need_git() {
        // `git(1)` "ENVIRONMENT VARIABLES": each of these gives configuration the files read
        // by the cheap test do not hold.
        for k in [
            "GIT_CONFIG",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "GIT_CONFIG_PARAMETERS",
        ] {
            assert!(config_env_adds_configuration(k), "{k}");
        }
        // Leaving /etc/gitconfig out adds nothing (the cheap test reads it anyway).
        for k in [
            "GIT_CONFIG_NOSYSTEM",
            "GIT_DIR",
            "HOME",
            "git_config_global",
        ] {
            assert!(!config_env_adds_configuration(k), "{k}");
        }
    }

    fn stand_in_home() -> (
        tempfile::TempDir,
        PathBuf,
        PathBuf,
        tyba_policy::EffectiveConfig,
    ) {
        let t = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(t.path()).unwrap().join("home");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        let reg = t.path().join("stand-ins");
        crate::broker::paths::ensure_private_dir(&reg).unwrap();
        let config = tyba_policy::Policy::embedded_default().config().clone();
        (t, home, reg, config)
    }

    fn records(reg: &Path) -> Vec<std::ffi::OsString> {
        std::fs::read_dir(reg)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n != "registry.lock")
            .collect()
    }

    #[test]
    fn a_stand_in_stays_while_any_session_relies_on_it_and_goes_with_the_last() {
        let (_t, home, reg, config) = stand_in_home();
        let settings = home.join(".claude/settings.json");
        let hooks = home.join(".claude/hooks");
        let a = ControlPlaceholders::create_in(&config, Some(&home), Some(reg.clone()));
        assert!(a.paths().any(|p| p == settings), "{a:?}");
        assert_eq!(std::fs::read(&settings).unwrap(), b"{}\n");
        assert!(hooks.is_dir());
        // A second session finds them made: it relies on them, it does not make them.
        let b = ControlPlaceholders::create_in(&config, Some(&home), Some(reg.clone()));
        assert_eq!(b.paths().count(), 0, "{b:?}");
        assert_eq!(b.held.len(), a.held.len());
        drop(a);
        assert!(
            settings.exists() && hooks.is_dir(),
            "gone while b relies on them"
        );
        drop(b);
        assert!(
            !settings.exists() && !hooks.exists(),
            "left after the last session"
        );
        assert!(records(&reg).is_empty(), "{:?}", records(&reg));
    }

    #[test]
    fn stand_in_directories_go_together_the_inner_first_and_a_used_one_stays() {
        let (t, _home, reg, _config) = stand_in_home();
        let git = std::fs::canonicalize(t.path()).unwrap().join("repo.git");
        std::fs::create_dir_all(&git).unwrap();
        let (outer, inner, used, plain, file) = (
            git.join("modules"),
            git.join("modules/inner"),
            git.join("worktrees"),
            git.join("remotes"),
            git.join("config.worktree"),
        );
        let wanted = vec![
            (outer.clone(), None),
            (inner.clone(), None),
            (used.clone(), None),
            (plain.clone(), None),
            (file.clone(), Some(&b""[..])),
        ];
        let a = ControlPlaceholders::make(wanted, Some(reg.clone()));
        assert_eq!(a.paths().count(), 5, "{a:?}");
        // The person's git puts a linked worktree's admin dir in one while the session runs.
        std::fs::create_dir(used.join("wt1")).unwrap();
        drop(a);
        for p in [&outer, &inner, &plain, &file] {
            assert!(!p.exists(), "{} left behind", p.display());
        }
        assert!(
            used.join("wt1").is_dir(),
            "the person's directory was removed"
        );
        assert!(records(&reg).is_empty(), "{:?}", records(&reg));
    }

    #[test]
    fn a_changed_stand_in_is_the_users_and_a_dead_sessions_is_taken_up() {
        let (_t, home, reg, config) = stand_in_home();
        let settings = home.join(".claude/settings.json");
        let local = home.join(".claude/settings.local.json");
        let mut a = ControlPlaceholders::create_in(&config, Some(&home), Some(reg.clone()));
        // The person writes real settings into one while the session runs.
        std::fs::write(&settings, "{\"permissions\":{}}").unwrap();
        // The session dies: its locks go with it, its stand-ins and records stay.
        drop(std::mem::take(&mut a.held));
        drop(a);
        assert!(local.exists() && !records(&reg).is_empty());
        let b = ControlPlaceholders::create_in(&config, Some(&home), Some(reg.clone()));
        assert_eq!(b.paths().count(), 0, "taken up, not made again: {b:?}");
        drop(b);
        assert_eq!(
            std::fs::read_to_string(&settings).unwrap(),
            "{\"permissions\":{}}",
            "the person's file stays"
        );
        assert!(
            !local.exists(),
            "the dead session's stand-in is removed by the next"
        );
        assert!(records(&reg).is_empty(), "{:?}", records(&reg));
        // The person's file is no stand-in any more: a later session leaves it alone.
        let c = ControlPlaceholders::create_in(&config, Some(&home), Some(reg.clone()));
        assert!(!c.paths().any(|p| p == settings));
        drop(c);
        assert!(settings.exists());
    }
}
