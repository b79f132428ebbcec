//! Approval of a repository's policy file (DESIGN.md §5: "a repository policy file only
//! widens access once the person approved its exact content from outside a session").
//!
//! A repository's `.tyba/policy.toml` is written by whoever writes the repository, the agent
//! included: a session that writes `read_write = ["~"]` would open the home directory to the
//! next one. So a repository layer is read in one of two ways:
//!
//! - **approved**: the person ran `tyba policy allow FILE` outside a session on exactly this
//!   content for this repository. The approval is a file in the person's own config dir,
//!   `$XDG_CONFIG_HOME/tyba/trusted-policies/<key>` (else `~/.config/tyba/…`), named by
//!   `key` = SHA-256 of `tyba-policy-approval`, the repository's identity (its common git
//!   dir, else the directory holding `.tyba/`) and the file's bytes, each followed by a NUL
//!   byte (the idea of direnv's `allow`). Any change to the file's bytes needs a new
//!   approval, and a new approval withdraws the repository's earlier ones: only the content
//!   approved last is read as written. `tyba run` keeps `$XDG_CONFIG_HOME/tyba` read-only for the agent when a
//!   policy path makes it writable (`src/cli/run.rs`), and the agent's domain cannot write
//!   it otherwise, so the agent cannot approve anything.
//! - **not approved**: only what restricts applies: `agent_control_files` (more files kept
//!   read-only), `history_files` (more files refused quietly), `git.protected_branches` (more
//!   branches), `[[rule]]`s (yellow, red or blocked only), and `failures` thresholds no
//!   higher than the layers before it. What widens access is ignored and reported:
//!   `filesystem.read_write`, `read_only`, `agent_state`, `network.agent_hosts`,
//!   `[agents.*]` profiles (their state directories and hosts), higher thresholds.
//!
//! `--policy FILE` is the person's own choice on the command line and is read as written;
//! like the person's own policy file, it is refused when it has other names (hard links) and
//! kept read-only for the session when a path the agent writes holds it.

use sha2::Digest as _;
use std::path::{Path, PathBuf};
use tyba_policy::PolicyFile;

/// The person's tyba config dir: `$XDG_CONFIG_HOME/tyba`, else `~/.config/tyba`.
pub fn config_dir() -> Option<PathBuf> {
    tyba_supervisor::broker::paths::config_dir()
}

/// Where approvals are kept: `<config dir>/trusted-policies`.
pub fn approvals_dir() -> Option<PathBuf> {
    config_dir().map(|d| d.join("trusted-policies"))
}

/// The repository a policy file at `file` (`<top>/.tyba/policy.toml`) belongs to: the
/// common git dir of `<top>` (shared by the person's checkout and every linked worktree of
/// it) when that git dir names `<top>` back (`session::names_checkout_back`), else `<top>`
/// itself, canonical.
pub fn repository_of(file: &Path) -> PathBuf {
    let top = file
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    // Only a git dir that names this checkout back vouches for the repository: a `.git` file
    // or link that merely claims one (laid by an agent, review 26's r26-01) keys by the
    // checkout itself.
    tyba_supervisor::session::git_layout(&top)
        .filter(|g| tyba_supervisor::session::names_checkout_back(&top, g))
        .map(|g| g.common_dir)
        .unwrap_or(top)
}

/// The approval key of `content` for `repository`: lower-case hex SHA-256 (see the module
/// docs).
pub fn approval_key(repository: &Path, content: &[u8]) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h = sha2::Sha256::new();
    h.update(b"tyba-policy-approval\0");
    h.update(repository.as_os_str().as_bytes());
    h.update(b"\0");
    h.update(content);
    h.update(b"\0");
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the person approved exactly `content` for `repository`.
pub fn is_approved(repository: &Path, content: &[u8]) -> bool {
    approvals_dir().is_some_and(|d| {
        std::fs::symlink_metadata(d.join(approval_key(repository, content)))
            .is_ok_and(|m| m.is_file())
    })
}

/// Records the person's approval of `content` for `repository` (the record holds the
/// file's path and the repository, for the person to read), and withdraws the repository's
/// earlier approvals: only the content approved last is read as written, so an agent
/// cannot write back a wider content the person approved before a narrower one (review 24's
/// r24-04). Returns the record's path and the earlier records removed.
///
/// # Errors
/// When there is no config dir or it cannot be written, or an earlier record of the
/// repository cannot be removed.
pub fn approve(
    repository: &Path,
    file: &Path,
    content: &[u8],
) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = approvals_dir()
        .ok_or_else(|| anyhow::anyhow!("neither XDG_CONFIG_HOME nor HOME is set"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let rec = dir.join(approval_key(repository, content));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&rec)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", rec.display()))?;
    std::io::Write::write_all(
        &mut f,
        format!("{}\n{}\n", file.display(), repository.display()).as_bytes(),
    )?;
    let mut replaced = Vec::new();
    for e in std::fs::read_dir(&dir)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?
        .flatten()
    {
        let other = e.path();
        if other == rec || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        // A record is `FILE\nREPOSITORY\n`; one that cannot be read is not this repository's.
        let names_it = std::fs::read_to_string(&other)
            .is_ok_and(|t| t.lines().nth(1) == Some(&*repository.to_string_lossy()));
        if names_it {
            std::fs::remove_file(&other)
                .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", other.display()))?;
            replaced.push(other);
        }
    }
    Ok((rec, replaced))
}

/// Removes every approval of `content` for `repository`; returns whether one existed.
///
/// # Errors
/// When the record exists and cannot be removed.
pub fn revoke(repository: &Path, content: &[u8]) -> anyhow::Result<bool> {
    let Some(dir) = approvals_dir() else {
        return Ok(false);
    };
    let rec = dir.join(approval_key(repository, content));
    match std::fs::remove_file(&rec) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::anyhow!("cannot remove {}: {e}", rec.display())),
    }
}

/// The restricting part of an unapproved layer `f`, and what was left out (as
/// `section.key = value` for the report). `nudge_after`, `pause_after` and
/// `limits.processes` are kept only when no higher than `current` (the merged layers before
/// it).
pub fn restricting_only(
    f: &PolicyFile,
    current: &tyba_policy::EffectiveConfig,
) -> (PolicyFile, Vec<String>) {
    let mut ignored = Vec::new();
    let list = |name: &str, v: &[String], ignored: &mut Vec<String>| {
        if !v.is_empty() {
            ignored.push(format!("{name} = {v:?}"));
        }
    };
    list(
        "filesystem.read_write",
        &f.filesystem.read_write,
        &mut ignored,
    );
    list(
        "filesystem.read_only",
        &f.filesystem.read_only,
        &mut ignored,
    );
    list(
        "filesystem.agent_state",
        &f.filesystem.agent_state,
        &mut ignored,
    );
    list("network.agent_hosts", &f.network.agent_hosts, &mut ignored);
    for name in f.agents.keys() {
        ignored.push(format!("[agents.{name}]"));
    }
    let mut out = PolicyFile {
        rules: f.rules.clone(),
        ..PolicyFile::default()
    };
    out.filesystem.agent_control_files = f.filesystem.agent_control_files.clone();
    out.filesystem.history_files = f.filesystem.history_files.clone();
    out.git.protected_branches = f.git.protected_branches.clone();
    for (name, v, now, slot) in [
        (
            "failures.nudge_after",
            f.failures.nudge_after,
            current.nudge_after,
            &mut out.failures.nudge_after,
        ),
        (
            "failures.pause_after",
            f.failures.pause_after,
            current.pause_after,
            &mut out.failures.pause_after,
        ),
        (
            "limits.processes",
            f.limits.processes,
            current.max_processes,
            &mut out.limits.processes,
        ),
    ] {
        match v {
            Some(n) if n <= now => *slot = Some(n),
            Some(n) => ignored.push(format!("{name} = {n} (higher than {now})")),
            None => {}
        }
    }
    (out, ignored)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn an_unapproved_layer_keeps_only_what_restricts() {
        let text = r#"
[filesystem]
read_write = ["~"]
read_only = ["/srv"]
agent_state = ["~/.x"]
agent_control_files = ["~/.x/settings.json"]
history_files = ["~/.x_history"]
[network]
agent_hosts = ["evil.example:443"]
[git]
protected_branches = ["release"]
[failures]
nudge_after = 2
pause_after = 100
[limits]
processes = 100000
[agents.evil]
programs = ["evil"]
state = ["~"]
"#;
        let f = PolicyFile::parse(text, "t").unwrap();
        let base = tyba_policy::Policy::embedded_default().config().clone();
        let (out, ignored) = restricting_only(&f, &base);
        assert!(out.filesystem.read_write.is_empty() && out.filesystem.read_only.is_empty());
        assert!(out.filesystem.agent_state.is_empty() && out.network.agent_hosts.is_empty());
        assert!(out.agents.is_empty());
        assert_eq!(out.filesystem.agent_control_files, ["~/.x/settings.json"]);
        assert_eq!(out.filesystem.history_files, ["~/.x_history"]);
        assert_eq!(out.git.protected_branches, ["release"]);
        assert_eq!(out.failures.nudge_after, Some(2));
        assert_eq!(out.failures.pause_after, None);
        assert_eq!(out.limits.processes, None);
        let all = ignored.join("\n");
        for k in [
            "[agents.evil]",
            "filesystem.read_write = [\"~\"]",
            "filesystem.read_only",
            "filesystem.agent_state",
            "network.agent_hosts",
            "failures.pause_after = 100",
            "limits.processes = 100000",
        ] {
            assert!(all.contains(k), "{k} in {all}");
        }
        // What is kept loads again as a layer.
        let back = toml::to_string(&out).unwrap();
        assert_eq!(PolicyFile::parse(&back, "again").unwrap(), out);
    }

    #[test]
    fn the_key_binds_repository_and_exact_bytes() {
        let a = approval_key(Path::new("/r/.git"), b"x");
        assert_eq!(a.len(), 64);
        assert_ne!(a, approval_key(Path::new("/r/.git"), b"x\n"));
        assert_ne!(a, approval_key(Path::new("/s/.git"), b"x"));
        // No shifting of bytes between the parts gives the same key.
        assert_ne!(
            approval_key(Path::new("/r"), b"a"),
            approval_key(Path::new("/r\0a"), b"")
        );
    }
}
