//! Approved pushes to a repository on a local path (`origin = ~/remote.git`, `file://…`),
//! relayed to a `git receive-pack` the supervisor runs itself, outside the sandbox
//! (`docs/sandbox.md`, "Pushes to a repository on a local path"; issue 14).
//!
//! git's local transport runs `git-receive-pack '<path>'` through `sh -c` (`connect.c`
//! `git_connect`, `run-command.c` `prepare_shell_cmd`) and speaks the pack protocol with it
//! over a pipe pair (gitprotocol-pack(5)). The sandbox never gets write access to the remote:
//! the path, `remote.*.receivepack` and the hooks all come from configuration the agent can
//! write, so a grant taken from them once let agent code write whatever directory they named.
//! Instead, under the cover of an approved `git push` whose resolution named a local
//! repository ([`ApprovedPush`], computed by the supervisor when the push was asked and shown
//! in the ask):
//!
//! - the shell git starts, `sh -c "git-receive-pack '<path>'"` word for word
//!   ([`transport_line`]), passes when `<path>` is that repository;
//! - the exec of git's own receive-pack (`git-receive-pack <path>`, `git receive-pack
//!   <path>`, a system program) from that shell, on that repository, is not let run: the
//!   process becomes tyba's proxy, and the supervisor runs `git receive-pack` on the
//!   repository as the supervisor canonicalised it, with a clean environment (no variable of
//!   the agent's, no system configuration: the remote's own and the person's global only),
//!   its stdout and stderr the process's own; the supervisor reads the ref-update commands at
//!   the start of the stream the push sends ([`read_commands`]) and passes them on only when
//!   every ref they update is one the approval named, none is protected, and a deletion was
//!   approved as one ([`check_commands`]). Without an approved forced update the remote also
//!   refuses non-fast-forwards (`receive.denyNonFastForwards`), and without an approved
//!   deletion every deletion (`receive.denyDeletes`).
//!
//! Any other `receivepack`, any other command the push runs, and a repository the agent can
//! write (inside its writable roots, or holding one: its hooks would then be the agent's) get
//! no relay: they are classified as usual.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use tyba_policy::{Classification, PushRef};

/// The largest command section (bytes before the first flush packet) the relay reads before
/// it refuses: far beyond any honest push (one command is about 100 bytes).
pub(crate) const MAX_COMMANDS_BYTES: usize = 1 << 20;

/// How far behind the clock file status times may lag (one scheduler tick is at most 10 ms).
const CTIME_SLACK: std::time::Duration = std::time::Duration::from_millis(20);

/// `PATH` of the receive-pack the supervisor runs: system directories only.
const RELAY_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A push to a repository on a local path that an approval covers: the repository (its git
/// directory, canonical, as the supervisor found it when the push was asked) and the remote
/// refs the push's resolution named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApprovedPush {
    /// The repository's git directory, canonical.
    pub repo: PathBuf,
    /// The refs the approval named.
    pub refs: Vec<PushRef>,
}

/// The git directory git's receive-pack opens for `path` (`setup.c` `enter_repo`, not
/// strict: of `path/.git`, `path`, `path.git/.git`, `path.git`, the first that is a regular
/// file or a git directory, symbolic links followed), canonical. `None` when none is, and
/// when the first is a regular file: git reads it as a gitfile (`gitdir: …`) and goes where
/// it says, which is not the repository the person approved. A git directory with a
/// `commondir` file is refused too (its objects and refs are elsewhere).
pub(crate) fn git_dir_at(path: &Path) -> Option<PathBuf> {
    let base = path.as_os_str().to_os_string();
    for s in ["/.git", "", ".git/.git", ".git"] {
        let mut p = base.clone();
        p.push(s);
        let p = PathBuf::from(p);
        match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => return None,
            Ok(m) if m.is_dir() && is_git_dir(&p) => {
                if std::fs::symlink_metadata(p.join("commondir")).is_ok() {
                    return None;
                }
                return std::fs::canonicalize(p).ok();
            }
            _ => {}
        }
    }
    None
}

/// Whether `p` is a git directory (`setup.c` `is_git_directory`: `objects/` and `refs/`
/// directories and a `HEAD` file).
pub(crate) fn is_git_dir(p: &Path) -> bool {
    p.join("objects").is_dir() && p.join("refs").is_dir() && p.join("HEAD").is_file()
}

/// Whether `name` is one tyba gives a session's directory in a temp dir or a memory
/// filesystem: `tyba-<uid>-<12 hex digits>` (the temp dir), with `.state` (the state
/// copies), or `tyba-<uid>-caches` (cache layers when the state directory cannot hold them).
fn is_session_dir_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("tyba-") else {
        return false;
    };
    let Some((uid, tail)) = rest.split_once('-') else {
        return false;
    };
    if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let id = tail.strip_suffix(".state").unwrap_or(tail);
    tail == "caches" || (id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether the agent could write into repository `repo` (or replace it): it lies under one of
/// its `writable` roots, or holds one, or lies in directories tyba makes for sessions, this
/// one's or another's (tyba's state directory with the session worktrees and cache layers,
/// and the `tyba-*` directories of the temp dir and the memory filesystems: temp dirs, state
/// copies), which some session's agent writes through.
fn agent_writable(repo: &Path, writable: &[PathBuf]) -> bool {
    let in_sessions = crate::broker::paths::state_dir()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .is_some_and(|d| repo.starts_with(d));
    let scratch_roots = [
        Some(std::env::temp_dir()),
        Some(PathBuf::from("/dev/shm")),
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
    ];
    let in_scratch = scratch_roots
        .iter()
        .flatten()
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
        .any(|d| {
            repo.strip_prefix(&d).is_ok_and(|rest| {
                rest.components()
                    .next()
                    .is_some_and(|c| is_session_dir_name(&c.as_os_str().to_string_lossy()))
            })
        });
    in_sessions
        || in_scratch
        || writable
            .iter()
            .any(|w| repo.starts_with(w) || w.starts_with(repo))
}

/// The local pushes an approval of `class` covers: each of its push URLs that names a local
/// repository ([`git_dir_at`]) the agent cannot write, with the refs resolved for it.
/// Pushes to the same repository (two URLs, an alias) are merged.
pub(crate) fn approved(class: &Classification, writable: &[PathBuf]) -> Vec<ApprovedPush> {
    let mut out: Vec<ApprovedPush> = Vec::new();
    for p in &class.pushes {
        let Some(repo) = p.local_path.as_deref().and_then(git_dir_at) else {
            continue;
        };
        if agent_writable(&repo, writable) || p.refs.is_empty() {
            continue;
        }
        match out.iter_mut().find(|a| a.repo == repo) {
            Some(a) => {
                for r in &p.refs {
                    if !a.refs.contains(r) {
                        a.refs.push(r.clone());
                    }
                }
            }
            None => out.push(ApprovedPush {
                repo,
                refs: p.refs.clone(),
            }),
        }
    }
    out
}

/// The first of the files of repository `repo` that decide what its receive-pack runs (its
/// `config`, `commondir`, the `hooks` directory and each entry in it) whose status changed
/// (`ctime`, which no process can set back) at or after `since`, if any. The relay runs
/// the repository's own hooks and configuration as the person: ones written during the
/// session (an approved command with a grant on the repository can write them) are not.
/// File times come from the kernel's coarse clock (up to one scheduler tick behind the
/// clock `since` was read from): a change up to [`CTIME_SLACK`] before `since` counts.
pub(crate) fn changed_since(repo: &Path, since: std::time::SystemTime) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let since = since
        .checked_sub(CTIME_SLACK)
        .unwrap_or(std::time::UNIX_EPOCH)
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let hooks = repo.join("hooks");
    let mut files = vec![repo.join("config"), repo.join("commondir"), hooks.clone()];
    if let Ok(rd) = std::fs::read_dir(&hooks) {
        files.extend(rd.flatten().map(|e| e.path()));
    }
    files.into_iter().find(|f| {
        std::fs::symlink_metadata(f).is_ok_and(|m| {
            let ctime = i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec());
            u128::try_from(ctime).map_or(true, |c| c >= since)
        })
    })
}

/// Why the relay may not run repository `repo`'s receive-pack with its own configuration,
/// if it may not: the configuration includes other files (`[include]`, `[includeIf …]`:
/// files the session may have written, which [`changed_since`] does not watch), or its
/// `core.hooksPath` names a directory the agent writes (`writable`, tyba's session
/// directories: [`agent_writable`]). `home` expands a `~/` in that path as git does.
pub(crate) fn config_refusal(
    repo: &Path,
    writable: &[PathBuf],
    home: Option<&Path>,
) -> Option<String> {
    let config = repo.join("config");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    if text
        .lines()
        .any(|l| l.trim_start().to_ascii_lowercase().starts_with("[include"))
    {
        return Some(format!(
            "{} includes other files, which tyba does not watch",
            config.display()
        ));
    }
    let out = std::process::Command::new("git")
        .env_clear()
        .env("PATH", RELAY_PATH)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .arg("config")
        .arg("--file")
        .arg(&config)
        .args(["--get", "core.hooksPath"])
        .output()
        .ok()?;
    let hooks = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if hooks.is_empty() {
        return None;
    }
    let p = crate::sandbox::expand_home(&hooks, home).unwrap_or_else(|| repo.join(&hooks));
    let p = std::fs::canonicalize(&p).unwrap_or(p);
    agent_writable(&p, writable).then(|| {
        format!(
            "its core.hooksPath {} is a directory the agent writes",
            p.display()
        )
    })
}

/// What the ask says of each local push an approval would relay.
pub(crate) fn ask_reasons(pushes: &[ApprovedPush]) -> Vec<String> {
    pushes
        .iter()
        .map(|p| {
            let refs: Vec<String> = p
                .refs
                .iter()
                .map(|r| match (r.delete, r.force) {
                    (true, _) => format!("delete {}", r.dst),
                    (false, true) => format!("{} (forced)", r.dst),
                    (false, false) => r.dst.clone(),
                })
                .collect();
            format!(
                "if approved, tyba runs git's receive-pack on the local repository {} itself, outside the sandbox, accepting only: {}",
                p.repo.display(),
                refs.join(", ")
            )
        })
        .collect()
}

/// `path` quoted as git quotes it for the shell (`quote.c` `sq_quote_buf`: in single quotes,
/// with `'` and `!` each closed, backslash-escaped and reopened).
fn sq_quote(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    out.push('\'');
    for c in path.chars() {
        if c == '\'' || c == '!' {
            out.push('\'');
            out.push('\\');
            out.push(c);
            out.push('\'');
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// The path of git's own transport command line `line` (`git-receive-pack '<path>'` or `git
/// receive-pack '<path>'`, quoted as git quotes it), if it is one.
pub(crate) fn transport_line(line: &str) -> Option<String> {
    let quoted = line
        .strip_prefix("git-receive-pack ")
        .or_else(|| line.strip_prefix("git receive-pack "))?;
    let words = shlex_one(quoted)?;
    (sq_quote(&words) == quoted).then_some(words)
}

/// The single shell word `s` is, when it is one single-quoted word (with git's `'\''`
/// and `'\!'` escapes).
fn shlex_one(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    let mut in_quote = false;
    while let Some(c) = chars.next() {
        match (in_quote, c) {
            (false, '\'') | (true, '\'') => in_quote = !in_quote,
            (true, c) => out.push(c),
            (false, '\\') => out.push(chars.next()?),
            (false, _) => return None,
        }
    }
    (!in_quote).then_some(out)
}

/// The path of the shell argv git's transport starts (`[sh, "-c", LINE]`, or with `LINE`
/// again as `$0`: `prepare_shell_cmd`), when `LINE` is a [`transport_line`].
pub(crate) fn transport_shell(argv: &[String]) -> Option<String> {
    match argv {
        [_, c, line] if c == "-c" => transport_line(line),
        [_, c, line, zero] if c == "-c" && zero == line => transport_line(line),
        _ => None,
    }
}

/// The path an exec of git's own receive-pack is started on: `git-receive-pack <path>` or
/// `git receive-pack <path>`, by the name of the file run (`real`, a system program).
pub(crate) fn receive_pack_path(real: &Path, argv: &[String]) -> Option<String> {
    let name = real.file_name()?.to_str()?;
    match (name, argv) {
        ("git-receive-pack", [_, p]) => Some(p.clone()),
        ("git", [_, sub, p]) if sub == "receive-pack" => Some(p.clone()),
        _ => None,
    }
}

/// One ref-update command of a push (gitprotocol-pack(5) `command`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// The object id the ref has now (all zeros: it is created).
    pub old: String,
    /// The object id it gets (all zeros: it is deleted).
    pub new: String,
    /// The full ref name.
    pub name: String,
}

impl Command {
    fn deletes(&self) -> bool {
        self.new.bytes().all(|b| b == b'0')
    }
}

/// Why a push's command section is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RelayError {
    /// The stream is not pkt-lines of ref updates.
    #[error("the push's ref-update commands are malformed: {0}")]
    Malformed(String),
    /// More than [`MAX_COMMANDS_BYTES`] before the first flush.
    #[error("the push's ref-update commands exceed {MAX_COMMANDS_BYTES} bytes")]
    TooLong,
    /// A signed push: its certificate's ref list is not read.
    #[error("a signed push (push-cert) is not relayed")]
    Certificate,
    /// A ref the approval did not name.
    #[error("the push updates {0}, which the approval did not name")]
    NotApproved(String),
    /// A protected ref.
    #[error("the push updates the protected branch {0}")]
    Protected(String),
    /// A deletion the approval did not name as one.
    #[error("the push deletes {0}, which the approval did not name as a deletion")]
    Deletion(String),
    /// A ref that is (or is reached through) a symbolic ref of the remote, whose target the
    /// update would move instead.
    #[error("{0} is a symbolic ref (or under a symbolic link) in the remote: the update would move what it points to")]
    Symbolic(String),
    /// Reading the stream failed.
    #[error("reading the push failed: {0}")]
    Io(String),
}

/// Reads the command section at the start of a push stream (gitprotocol-pack(5)
/// `update-requests`: `shallow` lines, then commands, the first with capabilities after a
/// NUL, up to the first flush packet): the raw bytes read, and the commands. An end of the
/// stream before any byte is no commands (nothing to push).
///
/// # Errors
/// [`RelayError`] for a malformed or oversized section, a certificate, or a read failure.
pub(crate) fn read_commands(r: &mut impl Read) -> Result<(Vec<u8>, Vec<Command>), RelayError> {
    let mut raw = Vec::new();
    let mut out = Vec::new();
    loop {
        let mut len = [0u8; 4];
        match read_full(r, &mut len)? {
            0 if raw.is_empty() => return Ok((raw, out)),
            4 => {}
            _ => return Err(RelayError::Malformed("the stream ended early".into())),
        }
        raw.extend_from_slice(&len);
        let n = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| RelayError::Malformed("a packet length is not hex".into()))?;
        if n == 0 {
            return Ok((raw, out));
        }
        if n < 4 {
            return Err(RelayError::Malformed(format!("a packet of length {n}")));
        }
        if raw.len() + n > MAX_COMMANDS_BYTES {
            return Err(RelayError::TooLong);
        }
        let mut payload = vec![0u8; n - 4];
        if read_full(r, &mut payload)? != payload.len() {
            return Err(RelayError::Malformed("the stream ended early".into()));
        }
        raw.extend_from_slice(&payload);
        let line = payload.strip_suffix(b"\n").unwrap_or(&payload);
        let line = match line.iter().position(|&b| b == 0) {
            Some(i) => &line[..i],
            None => line,
        };
        let line = std::str::from_utf8(line)
            .map_err(|_| RelayError::Malformed("a command is not UTF-8".into()))?;
        if line.starts_with("push-cert") {
            return Err(RelayError::Certificate);
        }
        if let Some(oid) = line.strip_prefix("shallow ") {
            if out.is_empty() && crate::own_branch::is_object_id(oid) {
                continue;
            }
            return Err(RelayError::Malformed(format!("`{line}`")));
        }
        let mut w = line.splitn(3, ' ');
        let (Some(old), Some(new), Some(name)) = (w.next(), w.next(), w.next()) else {
            return Err(RelayError::Malformed(format!("`{line}`")));
        };
        if !crate::own_branch::is_object_id(old)
            || !crate::own_branch::is_object_id(new)
            || name.is_empty()
            || name.contains(' ')
        {
            return Err(RelayError::Malformed(format!("`{line}`")));
        }
        out.push(Command {
            old: old.to_string(),
            new: new.to_string(),
            name: name.to_string(),
        });
    }
}

/// Reads until `buf` is full or the stream ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, RelayError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RelayError::Io(e.to_string())),
        }
    }
    Ok(got)
}

/// Whether `commands` may reach the remote under `approved`: every ref one of them updates
/// is one the approval named, none is protected (`protected`: branch names, compared as
/// `tyba-git-guard` compares them), and a deletion was approved as one.
///
/// # Errors
/// The first command that may not, as a [`RelayError`].
pub(crate) fn check_commands(
    commands: &[Command],
    approved: &ApprovedPush,
    protected: &[String],
) -> Result<(), RelayError> {
    for c in commands {
        if tyba_git_guard::push::is_protected(&c.name, protected) {
            return Err(RelayError::Protected(c.name.clone()));
        }
        let Some(r) = approved.refs.iter().find(|r| r.dst == c.name) else {
            return Err(RelayError::NotApproved(c.name.clone()));
        };
        if c.deletes() && !r.delete {
            return Err(RelayError::Deletion(c.name.clone()));
        }
    }
    Ok(())
}

/// Refuses a ref that receive-pack would not update as itself: one that is a symbolic ref
/// in `repo` (a loose ref file `ref: refs/heads/main`, or a symbolic link: receive-pack
/// updates the ref it points to), one reached through a symbolic link on the way, and every
/// ref of a repository whose refs are in a reftable (which tyba does not read).
fn plain_ref(repo: &Path, name: &str) -> Result<(), RelayError> {
    let aliased = || Err(RelayError::Symbolic(name.to_string()));
    // Either sign of a reftable refuses: the relay reads loose refs only, so any doubt fails
    // closed (the sandbox plan, which protects loose refs, goes by the config alone).
    if crate::sandbox::uses_reftable(repo) || repo.join("reftable").exists() {
        return aliased();
    }
    let mut p = repo.to_path_buf();
    for part in name.split('/') {
        p.push(part);
        match std::fs::symlink_metadata(&p) {
            Err(_) => return Ok(()),
            Ok(m) if m.file_type().is_symlink() => return aliased(),
            Ok(m) if m.is_file() => {
                let mut head = [0u8; 4];
                let n = std::fs::File::open(&p)
                    .and_then(|mut f| f.read(&mut head))
                    .unwrap_or(0);
                return if head[..n].starts_with(b"ref:") {
                    aliased()
                } else {
                    Ok(())
                };
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// One relayed push: the repository, what the approval covers, and the pushing process's
/// standard streams (taken with `pidfd_getfd(2)` before it became the proxy).
pub(crate) struct Relay {
    pub approved: ApprovedPush,
    pub protected: Vec<String>,
    /// The person's home (`HOME` of the receive-pack), if known.
    pub home: Option<PathBuf>,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The exec's argv and working directory, for the audit log.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
}

/// How a relayed push ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// receive-pack ran and exited with this code (or was killed: 128 + signal).
    Ran(i32),
    /// The push was refused before anything reached receive-pack's input.
    Refused(String),
}

/// Runs `git receive-pack` on the approved repository with a clean environment, its stdout
/// and stderr the pushing process's, and passes it the push stream once its commands passed
/// [`check_commands`]. `on_started` gets a pidfd of the receive-pack as soon as it runs (the
/// caller kills it through that when the proxy goes away, [`watch_proxy`]). A failure to start
/// it, and a refused command section (the receive-pack is then killed before any byte of the
/// push reached it), are an [`Outcome::Refused`] with the reason.
pub(crate) fn run(relay: Relay, on_started: impl FnOnce(&OwnedFd)) -> Outcome {
    let denies = |f: fn(&PushRef) -> bool| !relay.approved.refs.iter().any(f);
    let mut cmd = std::process::Command::new("git");
    cmd.env_clear()
        .env("PATH", RELAY_PATH)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_NO_LAZY_FETCH", "1")
        .current_dir(&relay.approved.repo);
    if let Some(h) = &relay.home {
        cmd.env("HOME", h);
    }
    // No global configuration: the person's `~/.gitconfig` and `~/.config/git/config` can be
    // written by an approved command of the session (a grant on `~/.config`), and a
    // `core.hooksPath` there would run the agent's hooks here, outside the sandbox. The
    // remote's own configuration is the only one read ([`config_refusal`]).
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
    if denies(|r| r.force) {
        cmd.args(["-c", "receive.denyNonFastForwards=true"]);
    }
    if denies(|r| r.delete) {
        cmd.args(["-c", "receive.denyDeletes=true"]);
    }
    cmd.arg("receive-pack")
        .arg(&relay.approved.repo)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::from(relay.stdout))
        .stderr(std::process::Stdio::from(relay.stderr));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Refused(format!("git receive-pack could not start: {e}")),
    };
    if let Ok(pidfd) = crate::sys::pidfd_open(child.id() as i32) {
        on_started(&pidfd);
    }
    let mut input = std::fs::File::from(relay.stdin);
    let checked = read_commands(&mut input).and_then(|(raw, cmds)| {
        check_commands(&cmds, &relay.approved, &relay.protected)?;
        for c in &cmds {
            plain_ref(&relay.approved.repo, &c.name)?;
        }
        Ok(raw)
    });
    let raw = match checked {
        Ok(raw) => raw,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::Refused(format!("refused by tyba: {e}"));
        }
    };
    if let Some(mut to) = child.stdin.take() {
        // A receive-pack that ended early (a refusal of its own) closes its input: what is
        // left of the stream is dropped, its status tells.
        if to.write_all(&raw).is_ok() {
            let _ = std::io::copy(&mut input, &mut to);
        }
    }
    drop(input);
    match child.wait() {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            Outcome::Ran(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)))
        }
        Err(e) => Outcome::Refused(format!("waiting for git receive-pack failed: {e}")),
    }
}

/// Kills the receive-pack of `pidfd` when a signal the proxy forwards would end it, or when
/// the proxy's channel closes.
pub(crate) fn watch_proxy(chan: &OwnedFd, pidfd: &OwnedFd) {
    loop {
        match crate::runner::recv_text(chan) {
            Some(m) => {
                let ends = m
                    .strip_prefix('s')
                    .and_then(|v| v.parse::<i32>().ok())
                    .is_some_and(|s| {
                        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT].contains(&s)
                    });
                if ends {
                    let _ = crate::sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGTERM);
                }
            }
            None => {
                let _ = crate::sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
                return;
            }
        }
    }
}

/// Tells the proxy on `chan` how the push ended: the receive-pack's code, or the refusal
/// (printed on the pushing process's stderr, exit 126); then closes the channel.
pub(crate) fn report(chan: &OwnedFd, outcome: &Outcome) {
    let msg = match outcome {
        Outcome::Ran(code) => format!("x{code}"),
        Outcome::Refused(r) => format!(
            "r{}",
            r.chars().take(crate::proxy::MAX_REASON).collect::<String>()
        ),
    };
    let _ = nix::sys::socket::send(
        chan.as_raw_fd(),
        msg.as_bytes(),
        nix::sys::socket::MsgFlags::empty(),
    );
    let _ = nix::sys::socket::shutdown(chan.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const Z: &str = "0000000000000000000000000000000000000000";
    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn pkt(s: &str) -> Vec<u8> {
        let mut v = format!("{:04x}", s.len() + 4).into_bytes();
        v.extend_from_slice(s.as_bytes());
        v
    }

    fn stream(lines: &[String], rest: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for l in lines {
            v.extend(pkt(l));
        }
        v.extend_from_slice(b"0000");
        v.extend_from_slice(rest);
        v
    }

    fn approval(refs: &[(&str, bool)]) -> ApprovedPush {
        ApprovedPush {
            repo: PathBuf::from("/r.git"),
            refs: refs
                .iter()
                .map(|(d, del)| PushRef {
                    dst: d.to_string(),
                    delete: *del,
                    force: false,
                })
                .collect(),
        }
    }

    fn prot() -> Vec<String> {
        vec!["main".into(), "master".into()]
    }

    #[test]
    fn the_command_section_is_read_up_to_the_flush_and_no_further() {
        let s = stream(
            &[
                format!("{Z} {A} refs/heads/feature-x\0report-status side-band-64k\n"),
                format!("{A} {B} refs/tags/v1\n"),
            ],
            b"PACK-rest",
        );
        let mut r = std::io::Cursor::new(s.clone());
        let (raw, cmds) = read_commands(&mut r).unwrap();
        assert_eq!(raw, s[..s.len() - 9]);
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[0].name, "refs/heads/feature-x");
        assert_eq!(cmds[1].old, A);
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"PACK-rest");
    }

    #[test]
    fn malformed_signed_and_oversized_sections_are_refused() {
        let bad = [
            b"00zzjunk".to_vec(),
            b"0003".to_vec(),
            stream(&[format!("{Z} {A}\n")], b""),
            stream(&[format!("{Z} xyz refs/heads/a\n")], b""),
            stream(&[format!("{Z} {A} refs/heads/a b\n")], b""),
            stream(
                &[format!("{Z} {A} refs/heads/a\n"), format!("shallow {A}")],
                b"",
            ),
            pkt(&format!("{Z} {A} refs/heads/a\n")),
        ];
        for b in bad {
            let e = read_commands(&mut std::io::Cursor::new(b.clone()));
            assert!(
                matches!(e, Err(RelayError::Malformed(_))),
                "{:?}: {e:?}",
                String::from_utf8_lossy(&b)
            );
        }
        let cert = stream(&["push-cert\0report-status\n".to_string()], b"");
        assert_eq!(
            read_commands(&mut std::io::Cursor::new(cert)).unwrap_err(),
            RelayError::Certificate
        );
        let line = format!("{Z} {A} refs/heads/{}\n", "x".repeat(60000));
        let many: Vec<String> = (0..20).map(|_| line.clone()).collect();
        assert_eq!(
            read_commands(&mut std::io::Cursor::new(stream(&many, b""))).unwrap_err(),
            RelayError::TooLong
        );
        // Shallow lines first are fine; an empty stream pushes nothing.
        let ok = stream(
            &[format!("shallow {A}"), format!("{Z} {A} refs/heads/a\n")],
            b"",
        );
        assert_eq!(
            read_commands(&mut std::io::Cursor::new(ok))
                .unwrap()
                .1
                .len(),
            1
        );
        assert!(read_commands(&mut std::io::Cursor::new(Vec::new()))
            .unwrap()
            .1
            .is_empty());
    }

    fn cmd(old: &str, new: &str, name: &str) -> Command {
        Command {
            old: old.into(),
            new: new.into(),
            name: name.into(),
        }
    }

    #[test]
    fn only_the_approved_unprotected_refs_pass() {
        let a = approval(&[("refs/heads/feature-x", false), ("refs/heads/gone", true)]);
        let ok = [
            cmd(Z, A, "refs/heads/feature-x"),
            cmd(A, Z, "refs/heads/gone"),
        ];
        assert_eq!(check_commands(&ok, &a, &prot()), Ok(()));
        for (c, want) in [
            (
                cmd(Z, A, "refs/heads/main"),
                RelayError::Protected("refs/heads/main".into()),
            ),
            (
                cmd(Z, A, "refs/heads/MASTER"),
                RelayError::Protected("refs/heads/MASTER".into()),
            ),
            (
                cmd(Z, A, "refs/heads/other"),
                RelayError::NotApproved("refs/heads/other".into()),
            ),
            (
                cmd(Z, A, "refs/tags/feature-x"),
                RelayError::NotApproved("refs/tags/feature-x".into()),
            ),
            (
                cmd(A, Z, "refs/heads/feature-x"),
                RelayError::Deletion("refs/heads/feature-x".into()),
            ),
        ] {
            let cmds = [cmd(Z, A, "refs/heads/feature-x"), c];
            assert_eq!(check_commands(&cmds, &a, &prot()), Err(want));
        }
        // Even an approval that named a protected ref (it never should) does not pass it.
        let a = approval(&[("refs/heads/main", false)]);
        assert!(check_commands(&[cmd(Z, A, "refs/heads/main")], &a, &prot()).is_err());
    }

    #[test]
    fn only_gits_own_transport_lines_are_recognised() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let line = "git-receive-pack '/home/me/remote.git'";
        assert_eq!(
            transport_shell(&v(&["/bin/sh", "-c", line, line])).as_deref(),
            Some("/home/me/remote.git")
        );
        assert_eq!(
            transport_shell(&v(&["sh", "-c", "git receive-pack '/r'"])).as_deref(),
            Some("/r")
        );
        assert_eq!(
            transport_line(&format!("git-receive-pack {}", sq_quote("/a'b!c"))).as_deref(),
            Some("/a'b!c")
        );
        for not in [
            v(&["sh", "-c", "sh /w/rp.sh '/r'"]),
            v(&["sh", "-c", "git-receive-pack '/r'; echo x"]),
            v(&["sh", "-c", "git-receive-pack '/r' '/s'"]),
            v(&["sh", "-c", "git-receive-pack /r"]),
            v(&["sh", "-c", "git-receive-pack '$(id)'x"]),
            v(&["sh", "-c", line, "other"]),
            v(&["sh", "/w/rp.sh", "/r"]),
            v(&["sh", "-c"]),
        ] {
            assert_eq!(transport_shell(&not), None, "{not:?}");
        }
        let p = Path::new("/usr/lib/git-core/git-receive-pack");
        assert_eq!(
            receive_pack_path(p, &v(&["git-receive-pack", "/r"])).as_deref(),
            Some("/r")
        );
        assert_eq!(
            receive_pack_path(
                Path::new("/usr/bin/git"),
                &v(&["git", "receive-pack", "/r"])
            )
            .as_deref(),
            Some("/r")
        );
        assert_eq!(
            receive_pack_path(p, &v(&["x", "--stateless-rpc", "/r"])),
            None
        );
        assert_eq!(
            receive_pack_path(Path::new("/usr/bin/git"), &v(&["git", "upload-pack", "/r"])),
            None
        );
    }

    #[test]
    fn the_repository_is_found_as_git_finds_it_and_an_agent_writable_one_is_not_relayed() {
        let d = tempfile::tempdir().unwrap();
        let bare = d.path().join("r.git");
        for sub in ["objects", "refs"] {
            std::fs::create_dir_all(bare.join(sub)).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/x\n").unwrap();
        let canon = std::fs::canonicalize(&bare).unwrap();
        assert_eq!(git_dir_at(&bare), Some(canon.clone()));
        assert_eq!(git_dir_at(&d.path().join("r")), Some(canon.clone()));
        assert_eq!(
            git_dir_at(d.path()),
            None,
            "a directory that is no repository"
        );
        let mut c = Classification::green();
        c.pushes.push(tyba_policy::PushReport {
            url: bare.display().to_string(),
            local_path: Some(bare.clone()),
            refs: vec![PushRef {
                dst: "refs/heads/feature-x".into(),
                delete: false,
                force: false,
            }],
        });
        c.pushes.push(tyba_policy::PushReport {
            url: "https://example.com/x.git".into(),
            local_path: None,
            refs: vec![],
        });
        let a = approved_of(&c, &[PathBuf::from("/elsewhere")]);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].repo, canon);
        assert!(approved_of(&c, &[std::fs::canonicalize(d.path()).unwrap()]).is_empty());
        assert!(approved_of(&c, &[canon.join("hooks")]).is_empty());
        assert!(ask_reasons(&a)[0].contains("refs/heads/feature-x"));

        // A gitfile where git looks first sends git elsewhere: no repository is named.
        let redirected = d.path().join("m");
        for sub in ["objects", "refs"] {
            std::fs::create_dir_all(redirected.join(sub)).unwrap();
        }
        std::fs::write(redirected.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(git_dir_at(&redirected).is_some());
        std::fs::write(redirected.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(
            git_dir_at(&redirected),
            None,
            "a gitfile redirects receive-pack"
        );
        std::fs::remove_file(redirected.join(".git")).unwrap();
        std::fs::write(redirected.join("commondir"), "../elsewhere\n").unwrap();
        assert_eq!(
            git_dir_at(&redirected),
            None,
            "a commondir redirects objects and refs"
        );
        // Session directories of tyba's are some agent's, whatever the writable roots say.
        for name in [
            "tyba-1001-0a1b2c3d4e5f",
            "tyba-0-0a1b2c3d4e5f.state",
            "tyba-7-caches",
        ] {
            assert!(is_session_dir_name(name), "{name}");
            let r = std::env::temp_dir().join(name).join("1/upper/m");
            assert!(agent_writable(&r, &[]), "{name}");
        }
        for name in [
            "tyba-test-x",
            "tyba-1001-zz",
            "tyba--0a1b2c3d4e5f",
            "notyba-1-caches",
        ] {
            assert!(!is_session_dir_name(name), "{name}");
        }
    }

    /// A remote whose configuration includes other files, or whose `core.hooksPath` names a
    /// directory the agent writes, is not relayed; one whose hooks path is its own is.
    #[test]
    fn configuration_that_runs_the_agents_files_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("r.git");
        let wt = d.path().join("wt");
        std::fs::create_dir_all(repo.join("hooks")).unwrap();
        std::fs::create_dir_all(wt.join(".hk")).unwrap();
        let wt = std::fs::canonicalize(&wt).unwrap();
        let w = vec![wt.clone()];
        let set = |text: &str| std::fs::write(repo.join("config"), text).unwrap();
        set("[core]\n\tbare = true\n");
        assert_eq!(config_refusal(&repo, &w, None), None);
        set(&format!(
            "[core]\n\thooksPath = {}\n",
            wt.join(".hk").display()
        ));
        assert!(config_refusal(&repo, &w, None).is_some_and(|w| w.contains("core.hooksPath")));
        set("[core]\n\thooksPath = hooks\n");
        assert_eq!(config_refusal(&repo, &w, None), None);
        set("[include]\n\tpath = /elsewhere/x\n");
        assert!(config_refusal(&repo, &w, None).is_some_and(|w| w.contains("includes")));
        set("[includeIf \"gitdir:/x\"]\n\tpath = y\n");
        assert!(config_refusal(&repo, &w, None).is_some());
    }

    /// A ref that is a symbolic ref of the remote (or lies under a symbolic link) is not
    /// relayed: receive-pack would move its target, `main` for one the person made.
    #[test]
    fn symbolic_refs_of_the_remote_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("refs/heads")).unwrap();
        std::fs::write(r.join("refs/heads/dev"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            r.join("refs/heads/plain"),
            "0123456789012345678901234567890123456789\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("main", r.join("refs/heads/lnk")).unwrap();
        std::fs::create_dir_all(r.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(r.join("elsewhere"), r.join("refs/heads/dir")).unwrap();
        for name in ["refs/heads/dev", "refs/heads/lnk", "refs/heads/dir/x"] {
            assert!(
                matches!(plain_ref(r, name), Err(RelayError::Symbolic(_))),
                "{name}"
            );
        }
        for name in ["refs/heads/plain", "refs/heads/new", "refs/heads/new/sub"] {
            assert!(plain_ref(r, name).is_ok(), "{name}");
        }
        std::fs::create_dir_all(r.join("reftable")).unwrap();
        assert!(
            plain_ref(r, "refs/heads/plain").is_err(),
            "reftable: not read"
        );
    }

    #[test]
    fn a_repository_whose_hooks_or_configuration_changed_during_the_session_is_named() {
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("r.git");
        std::fs::create_dir_all(repo.join("hooks")).unwrap();
        std::fs::write(repo.join("config"), "[core]\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let start = std::time::SystemTime::now();
        assert_eq!(changed_since(&repo, start), None);
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::write(repo.join("hooks/pre-receive"), "#!/bin/sh\n").unwrap();
        assert!(changed_since(&repo, start).is_some());
        std::fs::remove_file(repo.join("hooks/pre-receive")).unwrap();
        assert_eq!(
            changed_since(&repo, start),
            Some(repo.join("hooks")),
            "the directory itself changed"
        );
        std::thread::sleep(std::time::Duration::from_millis(60));
        let start = std::time::SystemTime::now();
        std::thread::sleep(std::time::Duration::from_millis(30));
        std::fs::write(repo.join("config"), "[core]\n\thooksPath = /x\n").unwrap();
        assert_eq!(changed_since(&repo, start), Some(repo.join("config")));
    }

    fn approved_of(c: &Classification, w: &[PathBuf]) -> Vec<ApprovedPush> {
        super::approved(c, w)
    }
}
