//! The pre-push hook: parsing what git feeds it, judging it, and installing/uninstalling the
//! hook script (githooks(5), "pre-push").

use crate::error::{HookInputError, InstallError};
use crate::push::is_protected;
use crate::repo::{Locator, RepoState};
use std::path::{Path, PathBuf};

/// One line of pre-push input:
/// `<local ref> SP <local oid> SP <remote ref> SP <remote oid> LF` (githooks(5)). The local
/// ref may contain spaces (it is whatever was written on the command line, e.g. `:/fix bug`),
/// so lines are split from the right. A deletion has local ref `(delete)` and an all-zero
/// local id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookLine {
    /// The local ref or source expression as git reports it.
    pub local_ref: String,
    /// Local object id, 40 (SHA-1) or 64 (SHA-256) hex digits; all zeros for a deletion.
    pub local_oid: String,
    /// The remote ref to be updated.
    pub remote_ref: String,
    /// The remote's current id (all zeros when the ref is created).
    pub remote_oid: String,
}

impl HookLine {
    /// Whether this line deletes the remote ref.
    pub fn is_delete(&self) -> bool {
        self.local_oid.bytes().all(|b| b == b'0')
    }
}

fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Parses the whole of git's pre-push input. An empty input (nothing to push) is valid.
///
/// # Errors
/// [`HookInputError`] for any line that does not have git's shape: the hook must then refuse.
pub fn parse_hook_input(input: &str) -> Result<Vec<HookLine>, HookInputError> {
    let mut out = Vec::new();
    let body = input.strip_suffix('\n').unwrap_or(input);
    if body.is_empty() {
        return Ok(out);
    }
    for (n, line) in body.split('\n').enumerate() {
        let line_no = n + 1;
        let mut parts = line.rsplitn(4, ' ');
        let (Some(remote_oid), Some(remote_ref), Some(local_oid), Some(local_ref)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(HookInputError::Fields { line: line_no });
        };
        for oid in [local_oid, remote_oid] {
            if !is_oid(oid) {
                return Err(HookInputError::ObjectId {
                    line: line_no,
                    oid: oid.to_string(),
                });
            }
        }
        if local_oid.len() != remote_oid.len() {
            return Err(HookInputError::ObjectId {
                line: line_no,
                oid: remote_oid.to_string(),
            });
        }
        if remote_ref.is_empty() || remote_ref.chars().any(|c| c.is_control()) {
            return Err(HookInputError::RemoteRef {
                line: line_no,
                name: remote_ref.to_string(),
            });
        }
        if local_ref.is_empty() {
            return Err(HookInputError::Fields { line: line_no });
        }
        out.push(HookLine {
            local_ref: local_ref.to_string(),
            local_oid: local_oid.to_string(),
            remote_ref: remote_ref.to_string(),
            remote_oid: remote_oid.to_string(),
        });
    }
    Ok(out)
}

/// The lines of `lines` that update, create or delete a protected branch.
pub fn protected_lines<'a>(lines: &'a [HookLine], protected: &[String]) -> Vec<&'a HookLine> {
    lines
        .iter()
        .filter(|l| is_protected(&l.remote_ref, protected))
        .collect()
}

/// First line of every hook script tyba writes; how `install`/`uninstall` recognise it.
pub const HOOK_MARKER: &str = "# tyba git-guard pre-push hook";
/// Suffix of an existing hook kept and chained by `install`.
pub const CHAINED_SUFFIX: &str = ".tyba-chained";

/// The hook script: runs `tyba git-guard pre-push "$1" "$2"` by absolute path on git's input.
/// With `chained`, it first saves the input, then runs an existing hook kept as
/// `pre-push.tyba-chained` on the same input; without, it `exec`s tyba directly (one process
/// less on every push).
pub fn hook_script(tyba: &Path, chained: bool) -> String {
    let exe = tyba.display().to_string().replace('\'', "'\\''");
    let head = format!(
        "#!/bin/sh\n{HOOK_MARKER} (installed by `tyba git-guard install`; remove with `tyba git-guard uninstall`)\n\
         # Refuses pushes that update, create or delete a protected branch.\n"
    );
    if !chained {
        return format!("{head}exec '{exe}' git-guard pre-push \"$1\" \"$2\"\n");
    }
    // No temporary file, no `dirname`: the input is held in a variable (git's lines never
    // hold NULs or blank lines) and fed to each hook; `${0%/*}` is the hooks directory.
    format!(
        "{head}# Then runs the hook it replaced, on the same input.\n\
         tyba_input=$(cat) || exit 1\n\
         tyba_feed() {{ if [ -n \"$tyba_input\" ]; then printf '%s\\n' \"$tyba_input\"; fi; }}\n\
         tyba_feed | '{exe}' git-guard pre-push \"$1\" \"$2\" || exit 1\n\
         case $0 in */*) tyba_dir=${{0%/*}} ;; *) tyba_dir=. ;; esac\n\
         tyba_chained=\"$tyba_dir/pre-push{CHAINED_SUFFIX}\"\n\
         if [ -e \"$tyba_chained\" ]; then\n\
         \x20   tyba_feed | \"$tyba_chained\" \"$@\" || exit 1\n\
         else\n\
         \x20   echo \"tyba git-guard: the chained hook $tyba_chained is missing\" >&2\n\
         \x20   exit 1\n\
         fi\n\
         exit 0\n"
    )
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// A new hook was written at this path.
    Fresh(PathBuf),
    /// The existing tyba hook was rewritten (idempotent re-install).
    Refreshed(PathBuf),
    /// An existing hook was kept as `pre-push.tyba-chained` and runs after tyba's.
    Chained(PathBuf),
}

/// What `uninstall` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uninstalled {
    /// tyba's hook was removed (and a chained hook, if any, put back).
    Removed(PathBuf),
    /// No tyba hook was there (a foreign hook, if any, was left alone).
    NotInstalled(PathBuf),
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> InstallError {
    let path = path.to_path_buf();
    move |source| InstallError::Io {
        action,
        path,
        source,
    }
}

/// The pre-push hook path of the repository at or above `repo` (honouring `core.hooksPath`;
/// otherwise in the common git dir, shared by linked worktrees).
///
/// # Errors
/// [`InstallError::Repo`] when there is no repository.
pub fn hook_path_for(repo: &Path) -> Result<PathBuf, InstallError> {
    let state = RepoState::open(&Locator {
        cwd: repo.to_path_buf(),
        ..Locator::default()
    })?;
    Ok(state.hooks_dir().join("pre-push"))
}

/// Installs the hook for the repository at or above `repo`, calling `tyba` by absolute path.
///
/// # Errors
/// [`InstallError`] when there is no repository or the hooks directory cannot be written.
pub fn install(repo: &Path, tyba: &Path) -> Result<Installed, InstallError> {
    let path = hook_path_for(repo)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let existing = std::fs::read(&path).ok();
    let outcome = match existing {
        Some(bytes) if String::from_utf8_lossy(&bytes).contains(HOOK_MARKER) => {
            Installed::Refreshed(path.clone())
        }
        Some(_) => {
            let chained = chained_path(&path);
            if chained.exists() {
                // a previous chained hook is never overwritten: keep both by refusing
                return Err(InstallError::Io {
                    action: "refusing to overwrite",
                    path: chained,
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "a chained hook already exists",
                    ),
                });
            }
            std::fs::rename(&path, &chained).map_err(io_err("renaming", &path))?;
            Installed::Chained(path.clone())
        }
        None => Installed::Fresh(path.clone()),
    };
    let script = hook_script(tyba, chained_path(&path).exists());
    let tmp = dir.join(".pre-push.tyba-tmp");
    std::fs::write(&tmp, script).map_err(io_err("writing", &tmp))?;
    set_executable(&tmp)?;
    std::fs::rename(&tmp, &path).map_err(io_err("renaming", &tmp))?;
    Ok(outcome)
}

/// Removes tyba's hook, putting back a chained hook.
///
/// # Errors
/// [`InstallError`] when there is no repository or the files cannot be changed.
pub fn uninstall(repo: &Path) -> Result<Uninstalled, InstallError> {
    let path = hook_path_for(repo)?;
    let ours = std::fs::read(&path)
        .map(|b| String::from_utf8_lossy(&b).contains(HOOK_MARKER))
        .unwrap_or(false);
    if !ours {
        return Ok(Uninstalled::NotInstalled(path));
    }
    std::fs::remove_file(&path).map_err(io_err("removing", &path))?;
    let chained = chained_path(&path);
    if chained.exists() {
        std::fs::rename(&chained, &path).map_err(io_err("renaming", &chained))?;
    }
    Ok(Uninstalled::Removed(path))
}

fn chained_path(hook: &Path) -> PathBuf {
    let mut s = hook.as_os_str().to_os_string();
    s.push(CHAINED_SUFFIX);
    PathBuf::from(s)
}

#[cfg(unix)]
fn set_executable(p: &Path) -> Result<(), InstallError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).map_err(io_err("chmod", p))
}

#[cfg(not(unix))]
fn set_executable(_p: &Path) -> Result<(), InstallError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const Z40: &str = "0000000000000000000000000000000000000000";
    const A40: &str = "02af7a38e1be929e95ed06da7d02152a6d7ba54f";

    #[test]
    fn parses_from_the_right() {
        let input = format!(
            ":/fix bug here {A40} refs/heads/main {A40}\n(delete) {Z40} refs/heads/x {A40}\n"
        );
        let l = parse_hook_input(&input).unwrap();
        assert_eq!(l[0].local_ref, ":/fix bug here");
        assert_eq!(l[0].remote_ref, "refs/heads/main");
        assert!(l[1].is_delete());
        let a64 = "a".repeat(64);
        assert!(parse_hook_input(&format!("refs/heads/a {a64} refs/heads/b {a64}\n")).is_ok());
        assert!(parse_hook_input(&format!("refs/heads/a {a64} refs/heads/b {A40}\n")).is_err());
        assert!(parse_hook_input("garbage\n").is_err());
        assert!(parse_hook_input(&format!("refs/heads/a {A40} refs/heads/b\n")).is_err());
        assert!(parse_hook_input(&format!("\n{A40}")).is_err());
        assert!(parse_hook_input("").unwrap().is_empty());
    }
}
