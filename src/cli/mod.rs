//! One module per subcommand; shared helpers for loading the policy and mapping errors.

/// `println!` that does not panic when stdout is gone (`tyba approve ID | head -0`): the
/// answer or control was already carried out, and the report is best effort. The text is
/// for the person's terminal: cleaned by `tyba_supervisor::broker::text::clean_lines`
/// (paths, refs and other text from the agent or the repository show no control,
/// bidirectional or invisible format character).
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let text = tyba_supervisor::broker::text::clean_lines(&format!($($t)*));
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{text}");
    }};
}

/// [`say!`] for machine-readable output (JSON), written as it is: JSON escapes control
/// characters itself, and its strings must keep their exact text.
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, $($t)*);
    }};
}

/// `eprintln!` for the person's terminal: one message on stderr, cleaned as by [`say!`]
/// (`tyba_supervisor::broker::text::say`).
macro_rules! tell {
    ($($t:tt)*) => {
        tyba_supervisor::broker::text::say(&format!($($t)*))
    };
}

pub mod classify;
pub mod git_guard;
pub mod hook;
pub mod inbox;
pub mod policy;
pub mod run;
pub mod sessions;
pub mod trust;
pub mod worktrees;

use std::path::{Path, PathBuf};

/// Usage error: bad flags or input.
pub const EXIT_USAGE: u8 = 2;
/// The policy file could not be loaded.
pub const EXIT_POLICY: u8 = 3;
/// The sandbox could not be set up as required.
pub const EXIT_SANDBOX: u8 = 4;

/// A usage error to report with exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Maps an error to its documented exit status.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else if e.downcast_ref::<tyba_policy::ConfigError>().is_some() {
        EXIT_POLICY
    } else if e
        .downcast_ref::<tyba_supervisor::SandboxUnavailable>()
        .is_some()
    {
        EXIT_SANDBOX
    } else {
        1
    }
}

/// How the repository's policy file was read ([`load_policy_explained`]).
#[derive(Debug, Clone)]
pub struct RepoLayer {
    /// The file.
    pub path: PathBuf,
    /// Whether the person approved this exact content ([`trust`]); when not, only its
    /// restrictions apply.
    pub approved: bool,
    /// What was ignored because it widens access (empty when approved).
    pub ignored: Vec<String>,
}

impl RepoLayer {
    /// One line for `tyba policy show` and the start of `tyba run`.
    pub fn describe(&self) -> String {
        if self.approved {
            format!(
                "the repository's policy file {} is approved (tyba policy allow): read as written",
                self.path.display()
            )
        } else if self.ignored.is_empty() {
            format!(
                "the repository's policy file {} is not approved: only its restrictions apply (it has nothing else)",
                self.path.display()
            )
        } else {
            format!(
                "the repository's policy file {} is not approved: only its restrictions apply; ignored: {}; approve its exact content, outside a session, with `tyba policy allow {}`",
                self.path.display(),
                self.ignored.join(", "),
                self.path.display()
            )
        }
    }
}

/// Loads the effective policy: embedded default, then `$XDG_CONFIG_HOME/tyba/policy.toml`
/// (or `~/.config/tyba/policy.toml`), then `explicit` if given, else the repository's
/// `.tyba/policy.toml` under `worktree` (restricting only unless approved: [`trust`]).
pub fn load_policy(
    explicit: Option<&Path>,
    worktree: Option<&Path>,
) -> anyhow::Result<tyba_policy::Policy> {
    load_policy_explained(explicit, worktree).map(|(p, _)| p)
}

/// [`load_policy`], and how the repository's layer was read when there was one.
pub fn load_policy_explained(
    explicit: Option<&Path>,
    worktree: Option<&Path>,
) -> anyhow::Result<(tyba_policy::Policy, Option<RepoLayer>)> {
    let mut layers = Vec::new();
    if let Some(user) = user_policy_path() {
        if user.is_file() {
            layers.push(read_own_layer(&user)?);
        } else if let Ok(to) = std::fs::read_link(&user) {
            // A link that leads nowhere: the person's restrictions would silently not apply
            // (review 25).
            return Err(tyba_policy::ConfigError::Read {
                path: user,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "it is a symbolic link to {}, which is not a file that can be read",
                        to.display()
                    ),
                ),
            }
            .into());
        }
    }
    let mut repo_layer = None;
    match explicit {
        Some(p) => layers.push(read_own_layer(p)?),
        None => {
            if let Some(wt) = worktree {
                let repo = wt.join(".tyba/policy.toml");
                if repo.is_file() {
                    let (origin, text) = read_layer(&repo)?;
                    let repository = trust::repository_of(&repo);
                    if trust::is_approved(&repository, text.as_bytes()) {
                        layers.push((origin, text));
                        repo_layer = Some(RepoLayer {
                            path: repo,
                            approved: true,
                            ignored: Vec::new(),
                        });
                    } else {
                        let f = tyba_policy::PolicyFile::parse(&text, &origin)?;
                        let before = tyba_policy::Policy::from_layers(layers.clone())?;
                        let (kept, ignored) = trust::restricting_only(&f, before.config());
                        let kept = toml::to_string(&kept).map_err(|e| {
                            tyba_policy::ConfigError::Syntax {
                                origin: origin.clone(),
                                message: e.to_string(),
                            }
                        })?;
                        layers.push((format!("{origin} (not approved: restrictions only)"), kept));
                        repo_layer = Some(RepoLayer {
                            path: repo,
                            approved: false,
                            ignored,
                        });
                    }
                }
            }
        }
    }
    Ok((tyba_policy::Policy::from_layers(layers)?, repo_layer))
}

/// A policy file of the person's (theirs in tyba's configuration directory, or the one named
/// by `--policy`), read from one open file: a file with other names (hard links) is refused
/// ([`tyba_policy::ConfigError::SharedFile`]).
fn read_own_layer(p: &Path) -> anyhow::Result<(String, String)> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let read_error = |source| tyba_policy::ConfigError::Read {
        path: p.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(p).map_err(read_error)?;
    let links = f.metadata().map_err(read_error)?.nlink();
    if links > 1 {
        return Err(tyba_policy::ConfigError::SharedFile {
            path: p.to_path_buf(),
            links,
        }
        .into());
    }
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(read_error)?;
    Ok((p.display().to_string(), text))
}

fn read_layer(p: &Path) -> anyhow::Result<(String, String)> {
    let text = std::fs::read_to_string(p).map_err(|source| tyba_policy::ConfigError::Read {
        path: p.to_path_buf(),
        source,
    })?;
    Ok((p.display().to_string(), text))
}

/// The person's policy file: `policy.toml` in tyba's configuration directory
/// (`tyba_supervisor::broker::paths::config_dir`, absolute variables only).
fn user_policy_path() -> Option<PathBuf> {
    tyba_supervisor::broker::paths::config_dir().map(|d| d.join("policy.toml"))
}

/// The home directory `~` stands for: `$HOME` when set and absolute.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}
