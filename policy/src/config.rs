//! The policy file (TOML): what the kernel layer opens, which branches are protected, the
//! repeated-failure thresholds, and extra yellow/red/blocked rules.
//!
//! Layers merge in order: the embedded default ([`EMBEDDED_DEFAULT`]), the user's
//! (`$XDG_CONFIG_HOME/tyba/policy.toml`), then the repository's (`.tyba/policy.toml`) or
//! `--policy FILE`. Lists add up; numbers take the last layer that sets them. No layer can add
//! to the green list, make a green command ask, soften a blocked one or unprotect a branch:
//! those are not expressible, or are load errors.

use crate::agents::{AgentProfile, AgentProfiles};
use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The policy compiled into the binary; `tyba policy show` prints it merged with the others.
pub const EMBEDDED_DEFAULT: &str = include_str!("default-policy.toml");

/// [`EMBEDDED_DEFAULT`] as JSON, written by the crate's build script: what loading reads
/// ([`PolicyFile::embedded_default`]), since every `tyba` process loads it and the JSON reader
/// is about four times faster on it than the TOML parser.
const EMBEDDED_DEFAULT_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/default-policy.json"));

/// Errors loading a policy file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown or mistyped keys; the message names the line.
    #[error("invalid policy file {origin}: {message}")]
    Syntax {
        /// Where the text came from (a path, or `embedded default`).
        origin: String,
        /// toml's message, with line and column.
        message: String,
    },
    /// A protected branch name is not a branch name git accepts (git-check-ref-format(1)):
    /// tyba joins these names to `refs/heads/` to hold the branches in the sandbox, so a name
    /// such as `../../x` would reach outside the repository.
    #[error("invalid protected branch name {name:?} in {origin}: {message}")]
    Branch {
        /// Where the text came from.
        origin: String,
        /// The name as written.
        name: String,
        /// git's rule it breaks.
        message: String,
    },
    /// The person's own policy file has other names (hard links, `st_nlink` > 1). tyba keeps
    /// its configuration out of the sandbox's reach by where it lies (its directory, resolved),
    /// and an approved command that writes one of the other names would rewrite the policy of
    /// the next session; such a file is not loaded (review 22's r22-03).
    #[error("the policy file {path} has {links} names (hard links): tyba cannot keep its other names out of an agent's reach, so it does not load it; keep a single copy, or make the other names symbolic links to it")]
    SharedFile {
        /// The file, as named.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// An agent profile is malformed (see [`crate::agents`]).
    #[error("invalid agent profile in {origin}: {message}")]
    Agent {
        /// Where the text came from.
        origin: String,
        /// What is wrong, naming the agent.
        message: String,
    },
    /// A `[filesystem]` entry is malformed (a `history_files` pattern that is not `~/…` or
    /// `/…`, or names `.` or `..`).
    #[error("invalid [filesystem] entry in {origin}: {message}")]
    Filesystem {
        /// Where the text came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A rule is malformed, would weaken the policy, or its examples do not match.
    #[error("invalid rule `{rule}` in {origin}: {message}")]
    Rule {
        /// Where the text came from.
        origin: String,
        /// The rule id.
        rule: String,
        /// What is wrong.
        message: String,
    },
}

/// One layer of policy as written in a file. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Paths the kernel layer opens.
    #[serde(default)]
    pub filesystem: FilesystemSection,
    /// Hosts the agent program itself may reach.
    #[serde(default)]
    pub network: NetworkSection,
    /// The git guard.
    #[serde(default)]
    pub git: GitSection,
    /// The repeated-failure guard.
    #[serde(default)]
    pub failures: FailureSection,
    /// Resource limits of a session.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Extra rules (yellow, red or blocked only).
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSpec>,
    /// `[agents.NAME]`: agent profiles ([`crate::agents`]).
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, AgentProfile>,
}

/// `[filesystem]`: paths opened at kernel level (Landlock), `~` allowed. Commands naming them
/// are still at least yellow.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FilesystemSection {
    /// Read, write and create (toolchain caches, e.g. `~/.cargo/registry`), through a
    /// session-private layer the person's tools never read (`tyba-supervisor`'s `caches`);
    /// read-only when a session cannot give the path one.
    #[serde(default)]
    pub read_write: Vec<String>,
    /// Read and execute only (toolchains, e.g. `~/.rustup`).
    #[serde(default)]
    pub read_only: Vec<String>,
    /// State directories of every agent (writable by the agent process), e.g. `~/.claude`;
    /// the files listed in `agent_control_files` stay read-only. Kept for older policy files:
    /// the merged value also holds every profile's `state` (prefer `[agents.NAME] state`).
    #[serde(default)]
    pub agent_state: Vec<String>,
    /// Files inside agent state directories that stay read-only (settings, rules, hooks). The
    /// merged value also holds every profile's `control_files`.
    #[serde(default)]
    pub agent_control_files: Vec<String>,
    /// History and state files that shells, REPLs and pagers write by themselves in the home
    /// (`~/.bash_history`, `~/.python_history`, `~/.lesshst`…; `~/…` or `/…`, `*` and `?`
    /// within a name as in [`crate::agents::data_pattern_matches`]): outside the worktree,
    /// every process of a session is refused them quietly, reading too (a history holds what
    /// the person typed), never asked and never granted (docs/sandbox.md, "Outside files").
    /// Layers add to the list; it only ever refuses more.
    #[serde(default)]
    pub history_files: Vec<String>,
}

/// `[network]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    /// `host` or `host:port` the agent program itself (not the commands it runs) may connect to.
    /// The merged value also holds every profile's `hosts` (prefer `[agents.NAME] hosts`).
    #[serde(default)]
    pub agent_hosts: Vec<String>,
}

/// `[git]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GitSection {
    /// Branch names protected on every remote, compared case-insensitively; layers add to the
    /// list, never remove (`main` and `master` are always protected).
    #[serde(default)]
    pub protected_branches: Vec<String>,
}

/// `[failures]`: the repeated-failure guard (seed `004_893a9b0cb34e722a.txt`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureSection {
    /// Similar failures in a row before the agent gets a nudge (default 3).
    pub nudge_after: Option<u32>,
    /// Similar failures in a row before the agent is paused and the person asked (default 8).
    pub pause_after: Option<u32>,
}

/// `[limits]`: what a session's processes may use of the machine.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Processes and threads a session's sandbox may hold at once (`RLIMIT_NPROC`, counted
    /// per user namespace: setrlimit(2), Linux 5.14 and later), so that a fork bomb of a
    /// command the agent runs stops there, not at the machine's `pid_max` (default 4096).
    pub processes: Option<u32>,
}

/// Processes and threads of a session's sandbox by default ([`LimitsSection::processes`]).
pub const DEFAULT_SESSION_PROCESSES: u32 = 4096;

/// `[[rule]]`: an extra rule matching a program and, optionally, some of its arguments.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Stable id, reported as `policy.<id>`.
    pub id: String,
    /// `yellow`, `red` or `blocked` (`green` is a load error).
    pub verdict: Verdict,
    /// Program name as it appears after wrappers are peeled (`terraform`, `kubectl`).
    pub program: String,
    /// Words that must all appear among the arguments (exact words after quote removal).
    #[serde(default)]
    pub args: Vec<String>,
    /// Human reason shown with the verdict.
    pub reason: String,
    /// Command lines this rule must match; checked when the file loads.
    #[serde(default)]
    pub examples: Vec<String>,
    /// Command lines this rule must not match; checked when the file loads.
    #[serde(default)]
    pub not_examples: Vec<String>,
}

/// Whether `name` is a branch name git accepts: `refs/heads/<name>` passes git's reference
/// name rules (git-check-ref-format(1): no `..` or empty component, no component starting with
/// `.` or ending with `.lock`, no control character, space, `~^:?*[\\`, no `@{`, not `HEAD`).
///
/// # Errors
/// The rule it breaks.
pub fn check_branch_name(name: &str) -> Result<(), String> {
    let full = format!("refs/heads/{name}");
    gix_validate::reference::branch_name(full.as_str().into())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl PolicyFile {
    /// Parses one layer.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] with toml's line and column.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        for b in &file.git.protected_branches {
            check_branch_name(b).map_err(|message| ConfigError::Branch {
                origin: origin.to_string(),
                name: b.clone(),
                message,
            })?;
        }
        Ok(file)
    }

    /// The embedded default ([`EMBEDDED_DEFAULT`]), read from its build-time JSON form.
    ///
    /// Its branch names are not checked here: [`crate::Policy::check_embedded_default`] (run by
    /// the test suite) parses the TOML source with every check and compares the two.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] if the JSON does not match [`PolicyFile`] (a build that bypassed
    /// the build script).
    pub fn embedded_default() -> Result<Self, ConfigError> {
        serde_json::from_str(EMBEDDED_DEFAULT_JSON).map_err(|e| ConfigError::Syntax {
            origin: "embedded default".to_string(),
            message: e.to_string(),
        })
    }

    /// Reads and parses one layer from disk.
    ///
    /// # Errors
    /// [`ConfigError::Read`] or [`ConfigError::Syntax`].
    pub fn read(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }
}

/// The effective policy configuration after merging every layer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EffectiveConfig {
    /// Merged `[filesystem]`.
    pub filesystem: FilesystemSection,
    /// Merged `[network]`.
    pub network: NetworkSection,
    /// Protected branch names (always includes `main` and `master`).
    pub protected_branches: Vec<String>,
    /// Similar failures in a row before a nudge.
    pub nudge_after: u32,
    /// Similar failures in a row before a pause.
    pub pause_after: u32,
    /// Processes and threads a session's sandbox may hold at once ([`LimitsSection`]).
    pub max_processes: u32,
    /// Extra rules, in layer order.
    pub rules: Vec<RuleSpec>,
    /// Agent profiles, merged: a layer adds agents and extends the lists of known ones.
    pub agents: AgentProfiles,
    /// Where each layer came from, in merge order.
    pub sources: Vec<String>,
}

impl EffectiveConfig {
    /// Merges layers in order (each `(origin, file)`), applying the monotonic rules.
    pub fn merge(layers: &[(String, PolicyFile)]) -> Self {
        let mut out = EffectiveConfig {
            filesystem: FilesystemSection::default(),
            network: NetworkSection::default(),
            protected_branches: vec!["main".to_string(), "master".to_string()],
            nudge_after: 3,
            pause_after: 8,
            max_processes: DEFAULT_SESSION_PROCESSES,
            rules: Vec::new(),
            agents: AgentProfiles::default(),
            sources: Vec::new(),
        };
        for (origin, f) in layers {
            out.sources.push(origin.clone());
            extend_unique(&mut out.filesystem.read_write, &f.filesystem.read_write);
            extend_unique(&mut out.filesystem.read_only, &f.filesystem.read_only);
            extend_unique(&mut out.filesystem.agent_state, &f.filesystem.agent_state);
            extend_unique(
                &mut out.filesystem.agent_control_files,
                &f.filesystem.agent_control_files,
            );
            extend_unique(
                &mut out.filesystem.history_files,
                &f.filesystem.history_files,
            );
            extend_unique(&mut out.network.agent_hosts, &f.network.agent_hosts);
            for b in &f.git.protected_branches {
                if !out
                    .protected_branches
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(b))
                {
                    out.protected_branches.push(b.clone());
                }
            }
            if let Some(n) = f.failures.nudge_after {
                out.nudge_after = n;
            }
            if let Some(n) = f.failures.pause_after {
                out.pause_after = n;
            }
            if let Some(n) = f.limits.processes {
                out.max_processes = n;
            }
            out.rules.extend(f.rules.iter().cloned());
            out.agents.merge(&f.agents);
        }
        // The lists the kernel layer reads hold every profile's too.
        let profiles: Vec<AgentProfile> = out.agents.0.values().cloned().collect();
        for p in &profiles {
            extend_unique(&mut out.filesystem.agent_state, &p.state);
            extend_unique(&mut out.filesystem.agent_control_files, &p.control_files);
            extend_unique(&mut out.network.agent_hosts, &p.hosts);
        }
        out
    }
}

impl FilesystemSection {
    /// Checks the entries whose shape is fixed: each `history_files` pattern starts with `~/`
    /// or `/` and names no `.` or `..` component (a pattern is matched by its names, never
    /// resolved).
    ///
    /// # Errors
    /// The first malformed entry, named.
    pub fn validate(&self) -> Result<(), String> {
        for p in &self.history_files {
            let rest = p.strip_prefix("~/").or_else(|| p.strip_prefix('/'));
            let ok = rest.is_some_and(|r| {
                !r.is_empty()
                    && !r.ends_with('/')
                    && r.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
            });
            if !ok {
                return Err(format!(
                    "history_files patterns must be `~/…` or `/…` naming files without `.` or `..`, got `{p}`"
                ));
            }
        }
        Ok(())
    }

    /// Whether `path` (absolute, as the kernel reaches it) is one of the `history_files`
    /// ([`is_history_file`]).
    pub fn is_history_file(&self, home: Option<&std::path::Path>, path: &std::path::Path) -> bool {
        is_history_file(&self.history_files, home, path)
    }
}

/// Whether `path` (absolute, as the kernel reaches it) matches one of `patterns` (the policy's
/// `filesystem.history_files`): `~/` stands for `home` (real, canonical). Names are compared
/// exactly; `*` and `?` match within one name ([`crate::agents::data_pattern_matches`]). A
/// path that is not UTF-8 matches none.
pub fn is_history_file(
    patterns: &[String],
    home: Option<&std::path::Path>,
    path: &std::path::Path,
) -> bool {
    let Some(text) = path.to_str() else {
        return false;
    };
    patterns.iter().any(|p| match p.strip_prefix("~/") {
        Some(rel) => home
            .and_then(|h| path.strip_prefix(h).ok())
            .and_then(|r| r.to_str())
            .is_some_and(|r| crate::agents::data_pattern_matches(rel, r)),
        None => p.starts_with('/') && crate::agents::data_pattern_matches(p, text),
    })
}

fn extend_unique(into: &mut Vec<String>, from: &[String]) {
    for s in from {
        if !into.contains(s) {
            into.push(s.clone());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn history_files_match_by_name_under_the_home_and_nothing_beside_them() {
        let p = crate::Policy::embedded_default();
        let fs = &p.config().filesystem;
        let home = Some(Path::new("/home/p"));
        for yes in [
            "/home/p/.bash_history",
            "/home/p/.bash_history-01234.tmp",
            "/home/p/.bash_history-",
            "/home/p/.python_history",
            "/home/p/.lesshst",
            "/home/p/.lesshsQ",
            "/home/p/.viminfo",
            "/home/p/.viminfo.tmp",
            "/home/p/.local/share/fish/fish_history",
            "/home/p/.psql_history",
            "/home/p/.wget-hsts",
        ] {
            assert!(fs.is_history_file(home, Path::new(yes)), "{yes}");
        }
        for no in [
            // Another dotfile, a history file's directory, one elsewhere, a longer name.
            "/home/p/.bashrc",
            "/home/p/.local/share/fish",
            "/srv/p/.bash_history",
            "/home/p/proj/.bash_history",
            "/home/p/.lesshstx",
            "/home/p/.node_repl_history.bak",
        ] {
            assert!(!fs.is_history_file(home, Path::new(no)), "{no}");
        }
        // Without a home, `~/` names nothing.
        assert!(!fs.is_history_file(None, Path::new("/home/p/.bash_history")));
        // An absolute pattern of a layer.
        let abs = FilesystemSection {
            history_files: vec!["/srv/shared/*.hist".into()],
            ..FilesystemSection::default()
        };
        assert!(abs.validate().is_ok());
        assert!(abs.is_history_file(None, Path::new("/srv/shared/a.hist")));
        assert!(!abs.is_history_file(None, Path::new("/srv/shared/x/a.hist")));
    }

    #[test]
    fn a_malformed_history_pattern_is_a_load_error() {
        for bad in ["relative", "~/../x", "~/a/./b", "/", "~/", "~/dir/"] {
            let text = format!("[filesystem]\nhistory_files = [{bad:?}]\n");
            let e = crate::Policy::from_layers(vec![("t".into(), text)]).unwrap_err();
            assert!(matches!(e, ConfigError::Filesystem { .. }), "{bad}: {e}");
        }
        crate::Policy::check_embedded_default().unwrap();
    }
}
