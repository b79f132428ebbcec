//! The repository state a push is resolved against, read with gix: the effective
//! configuration, every local ref name, HEAD, the git and common directories, and the refs of
//! remotes that are local paths.

use crate::config::FlatConfig;
use crate::error::RepoError;
use std::path::{Path, PathBuf};

/// Where HEAD points (gitrevisions(7), `HEAD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// On a branch (born or unborn): its full name, `refs/heads/<b>`.
    Branch(String),
    /// Detached.
    Detached,
}

/// What git would see in one repository.
#[derive(Debug, Clone)]
pub struct RepoState {
    pub(crate) config: FlatConfig,
    /// Every ref under `refs/`, full names, sorted (git's `get_local_heads` order).
    pub(crate) local_refs: Vec<String>,
    pub(crate) head: Head,
    pub(crate) git_dir: PathBuf,
    pub(crate) common_dir: PathBuf,
    pub(crate) workdir: Option<PathBuf>,
}

/// How to find the repository: git's own start directory and the `--git-dir`/`GIT_DIR`,
/// `--work-tree`/`GIT_WORK_TREE` overrides, plus configuration overrides (`key=value`) from
/// `-c`, `--config-env`, `GIT_CONFIG_COUNT`/`GIT_CONFIG_PARAMETERS`, in git's order.
#[derive(Debug, Clone, Default)]
pub struct Locator {
    /// Absolute directory git runs in (after `-C`).
    pub cwd: PathBuf,
    /// Explicit git directory, absolute.
    pub git_dir: Option<PathBuf>,
    /// Explicit work tree, absolute.
    pub work_tree: Option<PathBuf>,
    /// `key=value` (or bare `key` for an implicit `true`) overrides.
    pub overrides: Vec<String>,
}

impl RepoState {
    /// Opens the repository git would use for this location.
    ///
    /// # Errors
    /// [`RepoError`] when there is no repository or it cannot be read.
    pub fn open(loc: &Locator) -> Result<RepoState, RepoError> {
        match &loc.git_dir {
            Some(dir) => check_git_dir_files(dir)?,
            None => check_discovered_files(&loc.cwd)?,
        }
        let opts = gix::open::Options::default().cli_overrides(loc.overrides.clone());
        let repo = match &loc.git_dir {
            Some(dir) => gix::open_opts(dir, opts.clone()).map_err(|e| RepoError::Open {
                path: dir.clone(),
                message: e.to_string(),
            })?,
            None => gix::ThreadSafeRepository::discover_opts(
                &loc.cwd,
                gix::discover::upwards::Options::default(),
                gix::sec::trust::Mapping {
                    full: opts.clone(),
                    reduced: opts,
                },
            )
            .map(gix::Repository::from)
            .map_err(|e| RepoError::Discover {
                path: loc.cwd.clone(),
                message: e.to_string(),
            })?,
        };
        Self::from_repo(&repo, loc.work_tree.clone())
    }

    fn from_repo(
        repo: &gix::Repository,
        work_tree: Option<PathBuf>,
    ) -> Result<RepoState, RepoError> {
        let refs_err = |e: &dyn std::fmt::Display| RepoError::Refs {
            path: repo.git_dir().to_path_buf(),
            message: e.to_string(),
        };
        let config = FlatConfig::from_gix(repo.config_snapshot().plumbing());
        // A linked worktree's common directory was not checked before opening.
        check_git_dir_files(repo.common_dir())?;
        let local_refs = match ref_names_on_disk(repo, &config) {
            Some(names) => names,
            None => {
                let mut names = Vec::new();
                let platform = repo.references().map_err(|e| refs_err(&e))?;
                for r in platform.all().map_err(|e| refs_err(&e))? {
                    let r = r.map_err(|e| refs_err(&e))?;
                    names.push(r.name().as_bstr().to_string());
                }
                names.sort();
                names.dedup();
                names
            }
        };
        let head = match repo.head_name().map_err(|e| refs_err(&e))? {
            Some(name) => Head::Branch(name.as_bstr().to_string()),
            None => Head::Detached,
        };
        let mut state = RepoState {
            config,
            local_refs,
            head,
            git_dir: repo.git_dir().to_path_buf(),
            common_dir: repo.common_dir().to_path_buf(),
            workdir: work_tree.or_else(|| repo.workdir().map(Path::to_path_buf)),
        };
        // HEAD on a branch that is itself a symbolic ref (`refs/heads/feat` holding
        // `ref: refs/heads/main`): git's current branch is the end of the chain.
        if let Head::Branch(b) = &state.head {
            let (end, _) = state.resolve_symref(b);
            state.head = Head::Branch(end);
        }
        Ok(state)
    }

    /// The target of `name` when it is a symbolic ref in the files backend (a loose ref file
    /// holding `ref: <target>`, gitrepository-layout(5)); `None` for a ref holding an object
    /// id, a missing ref, or anything that is not a regular file (a FIFO is never opened).
    /// Per-worktree refs (`refs/bisect/`, `refs/worktree/`, `refs/rewritten/`) are read in the
    /// git dir, the rest in the common dir, as git does.
    pub(crate) fn symref_target(&self, name: &str) -> Option<String> {
        use std::io::Read;
        if !name.starts_with("refs/") || name.split('/').any(|c| c.is_empty() || c == "..") {
            return None;
        }
        let per_worktree = ["refs/bisect/", "refs/worktree/", "refs/rewritten/"]
            .iter()
            .any(|p| name.starts_with(p));
        let dir = if per_worktree {
            &self.git_dir
        } else {
            &self.common_dir
        };
        let path = dir.join(name);
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let mut buf = Vec::new();
        std::fs::File::open(&path)
            .ok()?
            .take(4096)
            .read_to_end(&mut buf)
            .ok()?;
        let text = std::str::from_utf8(buf.strip_prefix(b"ref:")?).ok()?;
        let target = text.trim();
        (!target.is_empty()).then(|| target.to_string())
    }

    /// Where `name` ends after following symbolic refs, as git's `resolve_ref_unsafe` does
    /// (at most 5 levels, `SYMREF_MAXDEPTH` in git's refs.c), and whether the chain ended
    /// within them (`false`: git fails; the last name seen is given).
    pub(crate) fn resolve_symref(&self, name: &str) -> (String, bool) {
        let mut cur = name.to_string();
        for _ in 0..5 {
            match self.symref_target(&cur) {
                Some(next) => cur = next,
                None => return (cur, true),
            }
        }
        (cur, false)
    }

    /// The refs of a repository at a local path (a bare or non-bare repository), for a remote
    /// given by path. `None` when it cannot be opened.
    pub(crate) fn remote_refs_at(path: &Path) -> Option<Vec<String>> {
        check_git_dir_files(path).ok()?;
        check_git_dir_files(&path.join(".git")).ok()?;
        let opts = gix::open::Options::isolated();
        let repo = gix::open_opts(path, opts).ok()?;
        let config = FlatConfig::from_gix(repo.config_snapshot().plumbing());
        let mut out = match ref_names_on_disk(&repo, &config) {
            Some(names) => names,
            None => {
                let mut out = Vec::new();
                for r in repo.references().ok()?.all().ok()? {
                    out.push(r.ok()?.name().as_bstr().to_string());
                }
                out
            }
        };
        // The remote advertises HEAD too; git's matching sees it as a ref named `HEAD`.
        out.push("HEAD".to_string());
        out.sort();
        out.dedup();
        Some(out)
    }

    /// The directory relative paths in remote URLs are resolved against: the top of the work
    /// tree (git changes there during setup), or the git directory of a bare repository.
    pub(crate) fn base_dir(&self) -> &Path {
        self.workdir.as_deref().unwrap_or(&self.git_dir)
    }

    /// The full name of the current branch, if HEAD is on one.
    pub(crate) fn current_branch(&self) -> Option<&str> {
        match &self.head {
            Head::Branch(b) => Some(b.as_str()),
            Head::Detached => None,
        }
    }

    /// The hooks directory git uses: `core.hooksPath` (relative to the work tree top, `~/`
    /// expanded) or `<common dir>/hooks` (githooks(5)).
    pub fn hooks_dir(&self) -> PathBuf {
        match self.config.string("core", None, "hookspath") {
            Some(p) if !p.is_empty() => {
                let expanded = expand_tilde(p);
                if expanded.is_absolute() {
                    expanded
                } else {
                    self.base_dir().join(expanded)
                }
            }
            _ => self.common_dir.join("hooks"),
        }
    }

    /// The common git directory (shared by linked worktrees).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }
}

/// Files of a git directory that gix or this module read whole. Opening a FIFO blocks until a
/// writer comes, and a device may never end: a repository the agent made
/// (`mkfifo .git/config`) would hang whoever reads it. Such a repository is refused (the push
/// is then judged blind, fail closed). A cheap first line only: includes and other files are
/// not checked, and callers that read repositories for a hostile party bound the time it
/// takes (the supervisor classifies under a deadline).
const GIT_DIR_FILES: &[&str] = &[
    "HEAD",
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "packed-refs",
];

/// Whether `p` exists and is not what a reader expects: following symlinks (a symlink to a
/// FIFO blocks too), `stat` only, which never blocks.
fn not_regular(p: &Path, dir_ok: bool) -> bool {
    match std::fs::metadata(p) {
        Ok(m) => !(m.is_file() || dir_ok && m.is_dir()),
        // A dangling symlink reads as missing; anything else is for the reader to report.
        Err(_) => false,
    }
}

fn check_git_dir_files(dir: &Path) -> Result<(), RepoError> {
    for f in GIT_DIR_FILES {
        let p = dir.join(f);
        if not_regular(&p, false) {
            return Err(RepoError::NotRegular { path: p });
        }
    }
    Ok(())
}

/// The files discovery from `cwd` reads first: the nearest `.git` (a directory, or a
/// `gitdir:` file) and its git directory's files; a bare repository met on the way up.
fn check_discovered_files(cwd: &Path) -> Result<(), RepoError> {
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if std::fs::symlink_metadata(&dot_git).is_ok() {
            if not_regular(&dot_git, true) {
                return Err(RepoError::NotRegular { path: dot_git });
            }
            if dot_git.is_dir() {
                check_git_dir_files(&dot_git)?;
            }
            return Ok(());
        }
        if dir.join("objects").is_dir() && dir.join("refs").is_dir() {
            return check_git_dir_files(dir);
        }
    }
    Ok(())
}

/// `~/x` → `$HOME/x` (git's path expansion for config values of type path).
pub(crate) fn expand_tilde(p: &str) -> PathBuf {
    if p == "~" || p.starts_with("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(p.trim_start_matches('~').trim_start_matches('/'));
        }
    }
    PathBuf::from(p)
}

/// Every ref name of a repository with the files backend, read from `packed-refs` and the
/// loose `refs/` directories (the common dir's, and a linked worktree's own) without opening
/// each loose file: names are all the resolution needs, and reading 10,000 loose refs one by
/// one costs tens of milliseconds. `None` for another backend (reftable) or an unreadable
/// layout; the caller then asks gix.
fn ref_names_on_disk(repo: &gix::Repository, config: &FlatConfig) -> Option<Vec<String>> {
    if config
        .string("extensions", None, "refstorage")
        .is_some_and(|v| !v.eq_ignore_ascii_case("files"))
    {
        return None;
    }
    let mut names = Vec::new();
    let common = repo.common_dir();
    match std::fs::read(common.join("packed-refs")) {
        Ok(bytes) => {
            for line in bytes.split(|b| *b == b'\n') {
                if line.is_empty() || line[0] == b'#' || line[0] == b'^' {
                    continue;
                }
                let text = std::str::from_utf8(line).ok()?;
                let (_, name) = text.split_once(' ')?;
                names.push(name.trim_end_matches('\r').to_string());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    walk_loose(&common.join("refs"), "refs", &mut names).ok()?;
    if repo.git_dir() != common {
        walk_loose(&repo.git_dir().join("refs"), "refs", &mut names).ok()?;
    }
    names.sort();
    names.dedup();
    Some(names)
}

fn walk_loose(dir: &Path, prefix: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".lock") || name.starts_with('.') {
            continue;
        }
        let full = format!("{prefix}/{name}");
        let ft = entry.file_type()?;
        if ft.is_dir() {
            walk_loose(&entry.path(), &full, out)?;
        } else {
            out.push(full);
        }
    }
    Ok(())
}

/// Whether the repository whose common git dir is `common_dir` keeps its refs in a reftable
/// (`extensions.refStorage = reftable` in its own `config`, git-config(1)): what git itself
/// decides by, never a `reftable/` directory alone (one may be planted in a repository git
/// still reads through loose refs and `packed-refs`). Includes are not followed: git reads
/// repository extensions from the repository's own file. A `config` that cannot be read or
/// parsed gives `None` (callers decide what an unknown format costs).
pub fn ref_storage_is_reftable(common_dir: &Path) -> Option<bool> {
    let file = gix::config::File::from_path_no_includes(
        common_dir.join("config"),
        gix::config::Source::Local,
    )
    .ok()?;
    let flat = FlatConfig::from_gix(&file);
    Some(
        flat.string("extensions", None, "refstorage")
            .is_some_and(|v| v.eq_ignore_ascii_case("reftable")),
    )
}
