//! Where a session's socket and audit log live.
//!
//! - Sockets: `$XDG_RUNTIME_DIR/tyba/<session>.sock`, or without `XDG_RUNTIME_DIR`,
//!   `/dev/shm/tyba-<uid>/run/` ([`shm_dir`]), or without a usable `/dev/shm`,
//!   `$XDG_STATE_HOME/tyba/run/` (`~/.local/state/tyba/run/`): a socket is a file made and
//!   removed by every session, which a memory filesystem makes in microseconds and a disk
//!   in up to a millisecond. The directory is made mode
//!   0700 and must be owned by the user; each socket is mode 0600. Beside each socket, the
//!   session's lock file `<session>.lock`, which decides whether the session is alive
//!   ([`super::lock`]).
//! - Audit logs: `$XDG_STATE_HOME/tyba/log/<session>.jsonl` (`~/.local/state/tyba/log/`).
//!
//! None of these is granted by the sandbox's Landlock rules, the notify loop refuses
//! (without asking) every `connect` from the sandbox to a socket under [`socket_dir`], and the
//! outside-files server refuses every access to them, to [`state_dir`] and to
//! [`config_dir`] without asking (`crate::outside_fs`).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Errors finding or making the broker's directories.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// Neither `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` nor `HOME` is set to an absolute path.
    #[error("no runtime or state directory: set XDG_RUNTIME_DIR, XDG_STATE_HOME or HOME")]
    NoBase,
    /// A directory cannot be made or checked.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A symbolic link on the way leads nowhere (a dotfiles link laid before its target is
    /// made): the directory cannot be made beneath it (review 23's r23-05).
    #[error("cannot create {path}: {link} is a symbolic link to {target}, which does not exist; make that directory or remove the link")]
    DanglingLink {
        /// The directory to make.
        path: PathBuf,
        /// The link on the way.
        link: PathBuf,
        /// Its text.
        target: PathBuf,
    },
    /// The directory exists but is not private to the user.
    #[error("{path} is not a directory owned by uid {uid} with mode 0700 (mode {mode:o}, owner {owner})")]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// The expected owner.
        uid: u32,
        /// Its owner.
        owner: u32,
        /// Its permission bits.
        mode: u32,
    },
}

/// The environment variable `name` as a path, when it is set, non-empty and absolute.
pub(crate) fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// `$XDG_STATE_HOME/tyba`, else `$HOME/.local/state/tyba`.
pub fn state_dir() -> Option<PathBuf> {
    env_dir("XDG_STATE_HOME")
        .map(|x| x.join("tyba"))
        .or_else(|| env_dir("HOME").map(|h| h.join(".local/state/tyba")))
}

/// The person's tyba configuration directory: `$XDG_CONFIG_HOME/tyba`, else
/// `~/.config/tyba` (the user's policy, the approvals of repositories' policies). Only an
/// absolute `XDG_CONFIG_HOME` or `HOME` counts (the XDG Base Directory Specification: "If
/// an implementation encounters a relative path in any of these variables it should consider
/// the path invalid and ignore it"); a relative one put it in the current directory, the
/// worktree (review 23's r23-01).
pub fn config_dir() -> Option<PathBuf> {
    env_dir("XDG_CONFIG_HOME")
        .map(|x| x.join("tyba"))
        .or_else(|| env_dir("HOME").map(|h| h.join(".config/tyba")))
}

/// tyba's own directories as named (not resolved, not created): [`config_dir`],
/// [`state_dir`], [`socket_dir`], the policy file named on the command line
/// ([`set_session_policy_file`]), and the configuration and state directories under `HOME`
/// where `XDG_CONFIG_HOME`/`XDG_STATE_HOME` move them for this process only (the person's
/// other shells, without the variable, read and write those: review 22's r22-05). Then each
/// entry of the configuration directories that is a symbolic link, as named: what it leads
/// to is tyba's configuration too, wherever it lies (`policy.toml -> ~/dotfiles/tyba/policy.toml`,
/// as a dotfiles manager that links file by file lays it).
pub fn own_dirs_named() -> Vec<PathBuf> {
    let mut out = own_dirs_only();
    if let Some(p) = SESSION_POLICY_FILE.get() {
        if !out.contains(p) {
            out.push(p.clone());
        }
    }
    let home = env_dir("HOME");
    for conf in [config_dir(), home.map(|h| h.join(".config/tyba"))]
        .into_iter()
        .flatten()
    {
        let Ok(entries) = std::fs::read_dir(&conf) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                let p = conf.join(e.file_name());
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The policy file this process was told to read (`tyba run --policy FILE`): the person's
/// too for the session ([`own_dirs_named`]; review 24's r24-03, review 25's r25-03).
static SESSION_POLICY_FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the policy file this process reads besides the person's own (`--policy FILE`,
/// absolute): from then on [`own_dirs_named`] lists it. Set once, before a session starts;
/// a second call is ignored.
pub fn set_session_policy_file(p: PathBuf) {
    let _ = SESSION_POLICY_FILE.set(p);
}

/// The directories of [`own_dirs_named`], without the linked entries.
fn own_dirs_only() -> Vec<PathBuf> {
    let home = env_dir("HOME");
    let mut out: Vec<PathBuf> = [config_dir(), state_dir(), socket_dir()]
        .into_iter()
        .flatten()
        .collect();
    for d in [
        home.as_ref().map(|h| h.join(".config/tyba")),
        home.as_ref().map(|h| h.join(".local/state/tyba")),
    ]
    .into_iter()
    .flatten()
    {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The directory holding the user's session sockets (not created).
pub fn socket_dir() -> Option<PathBuf> {
    env_dir("XDG_RUNTIME_DIR")
        .map(|x| x.join("tyba"))
        .or_else(|| shm_dir().map(|s| s.join("run")))
        .or_else(|| state_dir().map(|s| s.join("run")))
}

/// `/dev/shm` when it is the system's shared memory filesystem as distributions mount it: a
/// tmpfs directory owned by root with the sticky bit (`S_ISVTX`), so that no other user can
/// rename or remove an entry of the user's there.
pub fn shared_memory_fs() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    let shared = std::fs::symlink_metadata(shm)
        .is_ok_and(|m| m.is_dir() && m.mode() & 0o1000 != 0 && m.uid() == 0);
    (shared && is_memory_fs(shm)).then_some(shm)
}

/// Whether `p` is on a tmpfs (`statfs(2)` `TMPFS_MAGIC`).
pub fn is_memory_fs(p: &Path) -> bool {
    nix::sys::statfs::statfs(p).is_ok_and(|f| f.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

/// `/dev/shm/tyba-<uid>`, the user's private directory on the shared memory filesystem
/// ([`shared_memory_fs`]), made mode 0700 and checked to be the user's own real directory
/// ([`ensure_private_dir`]). Named by the user id alone, never by an environment variable,
/// so every session of the user finds the same one (the stand-in registry relies on it:
/// `crate::sandbox`). `None` when `/dev/shm` is not such a filesystem or the directory is
/// not the user's.
pub fn shm_dir() -> Option<PathBuf> {
    let dir = shared_memory_fs()?.join(format!("tyba-{}", euid()));
    ensure_private_dir(&dir).ok()?;
    Some(dir)
}

/// The directory holding the per-session audit logs (not created).
pub fn log_dir() -> Option<PathBuf> {
    state_dir().map(|s| s.join("log"))
}

/// The socket of session `session` in `dir`.
pub fn socket_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!("{session}.sock"))
}

/// The audit log of session `session` in `dir`.
pub fn log_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!("{session}.jsonl"))
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Makes `dir` (and its parents) with mode 0700 and checks it is the user's and private.
///
/// # Errors
/// [`PathError::Io`] when it cannot be made, [`PathError::NotPrivate`] when someone else
/// owns it or others may enter it.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| match dangling_link_on_the_way(dir) {
            Some((link, target)) => PathError::DanglingLink {
                path: dir.to_path_buf(),
                link,
                target,
            },
            None => PathError::Io {
                what: "cannot create",
                path: dir.to_path_buf(),
                source,
            },
        })?;
    let m = std::fs::symlink_metadata(dir).map_err(|source| PathError::Io {
        what: "cannot inspect",
        path: dir.to_path_buf(),
        source,
    })?;
    let uid = euid();
    let mode = m.permissions().mode() & 0o7777;
    if !m.is_dir() || m.uid() != uid {
        return Err(PathError::NotPrivate {
            path: dir.to_path_buf(),
            uid,
            owner: m.uid(),
            mode,
        });
    }
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| PathError::Io {
                what: "cannot make private",
                path: dir.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}

/// The first symbolic link on the way to `dir` (itself included) whose target does not
/// exist, with its text.
fn dangling_link_on_the_way(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut ways: Vec<&Path> = dir.ancestors().collect();
    ways.reverse();
    ways.into_iter().find_map(|p| {
        let m = std::fs::symlink_metadata(p).ok()?;
        (m.file_type().is_symlink() && std::fs::metadata(p).is_err())
            .then(|| std::fs::read_link(p).ok().map(|t| (p.to_path_buf(), t)))
            .flatten()
    })
}

/// The socket directory, made private.
///
/// # Errors
/// See [`ensure_private_dir`]; [`PathError::NoBase`] without any base directory.
pub fn private_socket_dir() -> Result<PathBuf, PathError> {
    let dir = socket_dir().ok_or(PathError::NoBase)?;
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// The audit-log directory, made private.
///
/// # Errors
/// See [`ensure_private_dir`]; [`PathError::NoBase`] without any base directory.
pub fn private_log_dir() -> Result<PathBuf, PathError> {
    let dir = log_dir().ok_or(PathError::NoBase)?;
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Splits an ask id `<session>-<n>` into its session and number.
pub fn split_id(id: &str) -> Option<(&str, u64)> {
    let (s, n) = id.rsplit_once('-')?;
    let valid_session = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    valid_session.then_some(())?;
    Some((s, n.parse().ok()?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_into_session_and_number() {
        assert_eq!(split_id("0a1b2c3d4e5f-12"), Some(("0a1b2c3d4e5f", 12)));
        assert_eq!(split_id("abc-x"), None);
        assert_eq!(split_id("-3"), None);
        assert_eq!(split_id("../x-3"), None);
        assert_eq!(split_id("3"), None);
    }

    #[test]
    fn a_shared_directory_is_made_private() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/tyba");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&d).unwrap();
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    /// `~/.local/state -> ../dotstate` before the dotfiles are cloned (review 23's r23-05):
    /// the error names the link and where it leads, not a bare "File exists". Once the target
    /// exists the directory is made through the link (the control).
    #[test]
    fn a_dangling_link_on_the_way_is_named() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        std::fs::create_dir(home.join(".local")).unwrap();
        std::os::unix::fs::symlink("../dotstate", home.join(".local/state")).unwrap();
        let d = home.join(".local/state/tyba/log");
        let e = ensure_private_dir(&d).unwrap_err();
        let shown = e.to_string();
        assert!(
            matches!(&e, PathError::DanglingLink { link, target, .. }
                if link == &home.join(".local/state") && target == Path::new("../dotstate")),
            "{shown}"
        );
        assert!(
            shown.contains(".local/state is a symbolic link to ../dotstate"),
            "{shown}"
        );
        std::fs::create_dir(home.join("dotstate")).unwrap();
        ensure_private_dir(&d).unwrap();
        assert!(home.join("dotstate/tyba/log").is_dir());
    }
}
