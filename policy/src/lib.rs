//! # tyba-policy
//!
//! The colour policy of tyba: every action an AI coding agent asks for (a shell command line,
//! a file write/read/patch, a web fetch) is classified **green**, **yellow**, **red** or
//! **blocked** ([`Verdict`]), and turned into **allow**, **ask** or **refuse** ([`Decision`])
//! by the autonomy level, the execution mode and the session's "always" memory.
//!
//! The rules are DESIGN.md §2 and §2a, restating the seed `000_cd5b01d9f66b8535.txt`
//! (colours, asking) and `004_893a9b0cb34e722a.txt` (autonomy, execution modes, the vault).
//!
//! - Command lines are parsed with a real bash grammar (`brush-parser`); the whole syntax tree
//!   is walked: pipelines, lists, subshells, groups, functions, substitutions, here-documents,
//!   redirections, assignments and every quoting form.
//! - Green is a **closed, compiled-in list** of read-only commands with their read-only flags;
//!   nothing configurable can extend it. Anything unlisted is at best yellow; in doubt, yellow.
//! - Words are expanded statically: quotes removed, literal variables on the same line
//!   substituted, `~`/`$HOME` resolved; anything that cannot be known is *unknown*, never
//!   empty, and a path built from it is never green.
//! - Paths are resolved against the worktree physically (symlinks followed through the real
//!   filesystem, like the kernel), so `outdir/secret` behind a symlink out is seen as outside.
//!
//! ## Threat model and limits
//! The agent is assumed hostile and clever with spelling. The classifier sees through quoting,
//! wrappers, interpreters' `-c` strings, aliases resolved by the git inspector and line
//! structure; it does not analyse code in other languages' strings (`python -c`, `node -e`,
//! awk programs): those are at least yellow, and the kernel layer (tyba-supervisor) holds the
//! line behind them. Symlinks are resolved when the action is classified; a race that swaps
//! one afterwards is the kernel layer's to stop.
//!
//! ## Example
//! ```
//! use tyba_policy::{Action, Context, Policy, Verdict};
//! let policy = Policy::embedded_default();
//! let wt = std::env::temp_dir();
//! let ctx = Context { worktree: &wt, cwd: &wt, home: None, scratch: None, git: None };
//! let c = policy.classify(&Action::Exec { command: "ls && rm -rf build".into() }, &ctx);
//! assert_eq!(c.verdict, Verdict::Red);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod action;
pub mod agents;
mod analysis;
pub mod config;
mod decision;
pub mod git_options;
pub mod git_tables;
pub mod programs;
pub mod redact;
pub mod rules;
mod verdict;

pub use action::{Action, AliasExpansion, Context, GitInspector, GitInvocation, GitReport};
pub use config::{check_branch_name, ConfigError, EffectiveConfig, PolicyFile, RuleSpec};
pub use decision::{
    decide, refusal_text, ActionKind, AlwaysKey, Ask, Autonomy, BypassFlag, Decision, ExecMode,
    SessionMemory,
};
pub use verdict::{Classification, Finding, PushRef, PushReport, Shape, Verdict};

/// Whether an environment variable makes programs run code when set (DESIGN.md §2a: the
/// list of variables red when assigned in any form, `GIT_CONFIG*`, exported bash functions).
/// The supervisor reads an exec's environment with this: such a variable set to a value the
/// session did not start with is judged as an assignment on the command line.
pub fn is_code_running_var(name: &str) -> bool {
    analysis::is_exec_var(name)
}

/// Whether `name=value` in an environment can make a program run code: a
/// [`is_code_running_var`] variable, except values of it that load nothing (a
/// `PYTHONWARNINGS` whose categories are built-in warning names, `ignore`, `error::…Warning`;
/// a `PYTHONBREAKPOINT` naming no module). The classifier judges a literal assignment on a
/// command line with it, the supervisor an exec's environment.
pub fn is_code_running_assignment(name: &str, value: &str) -> bool {
    analysis::is_exec_assignment(name, Some(value))
}

/// Whether an environment variable moves where programs read their configuration from
/// (`HOME`, the XDG base directories, `GIT_DIR`, `CARGO_HOME`…; DESIGN.md §2a "Assignment
/// values are words"): assigned on a line it is `env.config-moved`, and with `git push` it is
/// blocked (the moved configuration can hold `remote.*.push` or `core.hooksPath`). The
/// supervisor reads an exec's environment with this for pushes: such a variable set to a
/// value the session did not start with is judged as an assignment on the command line.
pub fn is_config_dir_var(name: &str) -> bool {
    analysis::moves_config(name)
}

/// The simple commands of `line` with their words after quote removal, when the line is
/// only pipelines and lists (`|`, `&&`, `||`, `;`) of simple commands whose words are all
/// literal (nothing expands, no redirection, assignment, background job or compound
/// command); `None` otherwise. Parsed with the bash grammar the classifier uses. For matching
/// known command lines by their words (an agent's start-up probes), never for allowing.
pub fn literal_commands(line: &str) -> Option<Vec<Vec<String>>> {
    analysis::literal_commands(line)
}

/// A loaded, validated policy: the compiled-in rules plus the merged policy files.
#[derive(Debug, Clone)]
pub struct Policy {
    config: EffectiveConfig,
}

impl Policy {
    /// The embedded default policy alone.
    pub fn embedded_default() -> Self {
        match Self::from_layers(Vec::new()) {
            Ok(p) => p,
            // The embedded default is checked by the test suite; should it ever fail to load,
            // fall back to the compiled-in rules with no extra rules (stricter defaults only).
            Err(_) => Policy::bare(),
        }
    }

    /// The embedded default followed by these layers, each `(origin, text)`, in merge order.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] for a bad file (with its line), [`ConfigError::Rule`] for a rule
    /// that is green, matches a green-list program, has no program, or whose examples do not
    /// match it.
    pub fn from_layers(layers: Vec<(String, String)>) -> Result<Self, ConfigError> {
        let mut parsed = vec![(
            "embedded default".to_string(),
            PolicyFile::embedded_default()?,
        )];
        for (origin, text) in layers {
            let f = PolicyFile::parse(&text, &origin)?;
            parsed.push((origin, f));
        }
        // The embedded default's examples are checked by the test suite; files are checked here.
        for (origin, f) in parsed.iter().skip(1) {
            agents::validate(&f.agents).map_err(|message| ConfigError::Agent {
                origin: origin.clone(),
                message,
            })?;
            f.filesystem
                .validate()
                .map_err(|message| ConfigError::Filesystem {
                    origin: origin.clone(),
                    message,
                })?;
            for r in &f.rules {
                analysis::validate_rule(r).map_err(|message| ConfigError::Rule {
                    origin: origin.clone(),
                    rule: r.id.clone(),
                    message,
                })?;
            }
        }
        Ok(Policy {
            config: EffectiveConfig::merge(&parsed),
        })
    }

    /// Checks every rule of the embedded default against its examples, its branch names, and
    /// that its build-time JSON form (what loading reads) is the TOML source's exact content.
    /// The test suite calls this; loading skips it to keep every `tyba` process fast.
    ///
    /// # Errors
    /// The first check that does not hold.
    pub fn check_embedded_default() -> Result<(), ConfigError> {
        let f = PolicyFile::parse(config::EMBEDDED_DEFAULT, "embedded default")?;
        // What loading reads is the build script's JSON form of the same file.
        if PolicyFile::embedded_default()? != f {
            return Err(ConfigError::Syntax {
                origin: "embedded default".to_string(),
                message: "its JSON form (the build script's) differs from the TOML source"
                    .to_string(),
            });
        }
        agents::validate(&f.agents).map_err(|message| ConfigError::Agent {
            origin: "embedded default".to_string(),
            message,
        })?;
        f.filesystem
            .validate()
            .map_err(|message| ConfigError::Filesystem {
                origin: "embedded default".to_string(),
                message,
            })?;
        for r in &f.rules {
            analysis::validate_rule(r).map_err(|message| ConfigError::Rule {
                origin: "embedded default".to_string(),
                rule: r.id.clone(),
                message,
            })?;
        }
        Ok(())
    }

    /// The compiled-in rules with no policy file at all.
    pub(crate) fn bare() -> Self {
        Policy {
            config: EffectiveConfig::merge(&[]),
        }
    }

    pub(crate) fn set_rules(&mut self, rules: Vec<RuleSpec>) {
        self.config.rules = rules;
    }

    /// The effective configuration (for the kernel layer and `tyba policy show`).
    pub fn config(&self) -> &EffectiveConfig {
        &self.config
    }

    /// Classifies one action in its context. Never panics and never fails: unparseable input
    /// is yellow (in doubt, yellow), and nothing unresolvable is green.
    pub fn classify(&self, action: &Action, ctx: &Context<'_>) -> Classification {
        analysis::classify(self, action, ctx)
    }
}

/// The first component of `path` that names a credential (DESIGN.md §2a "Credentials": `.ssh`,
/// `.aws`, `.env`, `id_rsa`…, case-insensitive), or `None`. The same rule the command
/// classifier applies to words (`path.credential`), for callers that judge a path the kernel
/// reached (the supervisor's outside-files server).
pub fn credential_in_path(path: &std::path::Path) -> Option<String> {
    analysis::paths::has_credential(path)
}

/// Resolves `word` against `cwd` the way the kernel walks a path (`.` skipped, `..` the
/// physical parent, symbolic links followed through the real filesystem, components that do
/// not exist taken lexically): the absolute physical path. The same resolution the command
/// classifier applies to path words, for callers that must agree with it (the agents' hook).
pub fn resolve_path(cwd: &std::path::Path, word: &str) -> std::path::PathBuf {
    analysis::paths::resolve(cwd, word)
}
