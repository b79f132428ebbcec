//! Approved commands in a Landlock domain of their own (issue 4 §3 and §9).
//!
//! Landlock domains only ever narrow: a process of the agent's domain cannot be given a path
//! the agent does not have. So when the person approves a command that names paths outside the
//! agent's grants (`cat ../notes/secret`, `cp x ~/out/`), the command is not let through in
//! the asking process. Instead:
//!
//! 1. The supervisor keeps its own copy of the exec's file, argv and environment (read once,
//!    when the exec was classified), takes the asking process's inheritable fds and working
//!    directory (`pidfd_getfd(2)`, `/proc/<pid>/cwd`), and asks stage 2 of the sandbox (PID 1
//!    of its namespaces, which carries the session's seccomp filter but no Landlock domain) to
//!    fork the **runner**: a process that enforces the agent's ruleset *plus* read-write on
//!    each out-of-tree path the approved line names ([`grants`]), then execs the supervisor's
//!    copy of the command. The runner and everything it starts are approved processes: their
//!    execs are not asked again; their connections are still asked.
//! 2. The asking process becomes the command's **proxy**: the supervisor injects tyba's own
//!    executable (fd 3) and a channel (fd 4) with `SECCOMP_IOCTL_NOTIF_ADDFD`, rewrites the
//!    exec's file name to `/dev/fd/3` and lets the exec continue. The proxy
//!    ([`crate::proxy`]) forwards the signals it gets to the runner and exits with the
//!    runner's status, so the agent sees its command's output, exit status and signals as if
//!    it had run in place.
//!
//! The rewrite is done only where it changes nothing but the exec: within the original file
//! name's bytes, or past them when the process is single-threaded and shares its memory with
//! no other process; always in a private mapping. Otherwise the approved command is refused
//! with a reason (fail closed).
//!
//! Wire between the supervisor and stage 2: a `SOCK_SEQPACKET` socketpair, one JSON message
//! per packet ([`ToStage`], [`FromStage`]); a spawn carries its fds with `SCM_RIGHTS` (the
//! payload in a memfd first, then the working directory, then the fds to install).

use crate::sandbox::{landlock_ruleset, restrict, SandboxPlan};
use crate::sys::{self, Forked};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::MsgFlags;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::CString;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// The most fds one spawn carries (the asking process's inheritable fds, plus two).
pub(crate) const MAX_FDS: usize = 200;

/// Supervisor → stage 2.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToStage {
    /// Fork a runner; fds: payload memfd, working directory, then one per `targets` entry.
    Spawn { id: u64, targets: Vec<i32> },
    /// Let runner `id` exec.
    Go { id: u64 },
    /// Send `sig` to runner `id`'s process group.
    Signal { id: u64, sig: i32 },
}

/// The part of a spawn too large for a packet: carried in a memfd.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SpawnPayload {
    /// The file to exec (absolute, or relative to the working directory).
    pub path: Vec<u8>,
    /// argv.
    pub argv: Vec<Vec<u8>>,
    /// envp, `NAME=value` each.
    pub envp: Vec<Vec<u8>>,
    /// Paths granted on top of the agent's ruleset.
    pub grants: Vec<Grant>,
}

/// Stage 2 → supervisor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromStage {
    /// The runner exists, waiting for `Go`; `pid` in the sandbox's PID namespace, `start`
    /// its start time (`/proc/<pid>/stat` field 22, clock ticks since boot: the same in
    /// every namespace), so that a later process with the same pid is never taken for it.
    Spawned { id: u64, pid: i32, start: u64 },
    /// The runner could not be made.
    Failed { id: u64, error: String },
    /// The runner ended: exit code, or the signal that killed it.
    Exited {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// After the agent's `Exited`: every other process of the sandbox's PID namespace is
    /// killed and reaped; only stage 2 is left, and it exits.
    Gone,
}

/// One path an approved command gets on top of the agent's ruleset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Grant {
    /// The path (canonical; for a new file, its canonical parent joined with its name).
    pub path: PathBuf,
    /// Read-write (the line writes it) rather than read + execute.
    pub write: bool,
    /// The line creates this file (it did not exist when asked): the approval covers that
    /// one name, never its directory ([`prepare_new_files`]).
    #[serde(default)]
    pub new_file: bool,
    /// The line removes, renames (either name) or links this name
    /// (`tyba_policy::Classification::changes`): the outside-files server lets the command do
    /// that to it (and to what is beneath it) without asking again, never write what it
    /// holds. Landlock cannot grant the removal or the renaming of one name without its
    /// directory, so the command's ruleset gets only what `write` says ([`Grant::landlock`]).
    #[serde(default)]
    pub change: bool,
    /// The line changes this path's mode, owner or group
    /// (`tyba_policy::Classification::metadata`: `chmod`, `chown`, `chgrp` operands): the
    /// supervisor's metadata handler lets the command change its mode, owner and times (and
    /// those of what is beneath it) without asking again (`crate::notify`). Landlock has no
    /// rights for metadata: the command's ruleset gets only what `write` says.
    #[serde(default)]
    pub meta: bool,
    /// With `meta`: the line changes it recursively (`chmod -R`,
    /// `tyba_policy::Classification::metadata_trees`), so what is beneath it too; without,
    /// that path only.
    #[serde(default)]
    pub meta_tree: bool,
    /// The line writes this file (existing, or new: `git config --file NEW` makes it by
    /// renaming its lock file to its name) and is one command whose program the policy knows
    /// saves it by its own rule (`tyba_policy::Classification::saves`: `sed -i` with a script
    /// that runs nothing, `install`, `cp`, `git config`), running no code the policy does not
    /// analyse: the
    /// command may save it through temporary copies beside it, or remove it and make it anew
    /// (`crate::outside_fs::RunnerGrant::file`). Any other line (`perl -pi -e CODE`,
    /// `./tool F`, `make`, a list of commands) gets the named file only (review 13's r13-01).
    #[serde(default)]
    pub save: bool,
    /// The line makes this directory, which did not exist when asked (`mkdir`, `install -d`:
    /// `tyba_policy::Classification::dirs_made`), and, with parents (`mkdir -p`), the missing
    /// directories above it: this is the deepest of its ancestors that existed then (its
    /// parent, without parents). Only the outside-files server can grant making those names
    /// and no other ([`served_changes`]): the command may make each directory strictly
    /// beneath this one down to `path`, and write beneath `path`; never a file or a link on
    /// the way. `None` for any other grant.
    #[serde(default)]
    pub new_dirs: Option<PathBuf>,
    /// With `new_dirs`: the line's program makes the missing directories above its own and
    /// takes one that exists already (`mkdir -p`, `install -d`:
    /// `tyba_policy::Classification::parents_made`), so where the outside-files server does
    /// not serve them, the supervisor makes them before the run ([`prepare_new_files`]).
    #[serde(default)]
    pub parents: bool,
    /// The line makes this name, which did not exist when asked, as a directory tree or as a
    /// file, which cannot be known before it runs (a recursive copy's destination:
    /// `tyba_policy::Classification::trees_made`): nothing can be made in its place
    /// beforehand, so only the outside-files server can grant it ([`served_changes`]).
    #[serde(default)]
    pub new_tree: bool,
}

impl Grant {
    /// The Landlock rule the grant adds to the command's ruleset (`(path, read-write)`):
    /// `None` for a name the line only changes and that does not exist (a `mv`'s new name):
    /// only the outside-files server can grant that one name.
    pub(crate) fn landlock(&self) -> Option<(PathBuf, bool)> {
        if self.new_dirs.is_some() {
            // Made before the run where no server serves it; served, it does not exist yet
            // when the ruleset is made, and gets no rule.
            return Some((self.path.clone(), true));
        }
        let only_a_name = self.change && !self.write && !self.new_file;
        (!only_a_name || std::fs::symlink_metadata(&self.path).is_ok())
            .then(|| (self.path.clone(), self.write))
    }

    /// What the grant lets the command do, to the outside-files server
    /// (`crate::outside_fs::RunnerGrant`).
    pub(crate) fn outside(&self) -> crate::outside_fs::RunnerGrant {
        crate::outside_fs::RunnerGrant {
            path: self.path.clone(),
            write: self.write,
            change: self.change,
            arrived: Vec::new(),
            file: self.save
                && self.write
                && (self.new_file
                    || std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.is_file())),
            save_of: None,
            meta: self.meta,
            meta_tree: self.meta_tree,
            regular_only: false,
            dirs_from: self.new_dirs.clone(),
        }
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(from) = &self.new_dirs {
            let above = match self.path.parent() {
                Some(p) if p != from => format!(
                    " and the missing directories above it under {}",
                    from.display()
                ),
                _ => String::new(),
            };
            return write!(
                f,
                "make the directory {}{above} and read-write in it (directories only on the way, nothing else in them)",
                self.path.display()
            );
        }
        if self.new_file {
            return write!(
                f,
                "create and read-write {} (that file only, not the rest of its directory)",
                self.path.display()
            );
        }
        let how = match (self.write, self.change) {
            (true, _) => "read-write",
            (false, true) => "read, remove, rename or link",
            (false, false) => "read",
        };
        let meta = match (self.meta, self.meta_tree) {
            (true, true) => " and change the mode, owner or times (recursively) of",
            (true, false) => " and change the mode, owner or times of",
            _ => "",
        };
        write!(f, "{how}{meta} {}", self.path.display())
    }
}

/// `p` as a grant names it: its canonical path when it exists, else its existing parent's
/// canonical path joined with its name (`None` when neither: no parent, or a name like
/// `..`).
pub(crate) fn real_target(p: &Path) -> Option<(PathBuf, bool)> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Some((c, false));
    }
    let name = p.file_name()?;
    let parent = std::fs::canonicalize(p.parent()?).ok()?;
    Some((parent.join(name), true))
}

/// For an absent path whose missing parent directories a line makes (`mkdir -p`): its
/// deepest existing ancestor's canonical path joined with the rest, and that ancestor.
/// `None` when `p` is not absolute, a component of the rest is not a plain name (`..`), or
/// no ancestor exists.
fn real_target_made(p: &Path) -> Option<(PathBuf, PathBuf)> {
    use std::path::Component;
    if !p.is_absolute() {
        return None;
    }
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            if !std::fs::metadata(&c).is_ok_and(|m| m.is_dir()) {
                return None;
            }
            let mut made = c.clone();
            for name in rest.iter().rev() {
                made.push(name);
            }
            return Some((made, c));
        }
        match at.components().next_back() {
            Some(Component::Normal(n)) => rest.push(n.to_os_string()),
            _ => return None,
        }
        at = at.parent()?;
    }
}

/// Why a new file an approved line creates cannot be prepared ([`prepare_new_files`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NewFileError {
    /// The directory that would hold it cannot be opened without following a link.
    #[error("the directory of {path} cannot be opened without following a link: {source}")]
    Directory {
        /// The new file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file cannot be created.
    #[error("{path} cannot be created: {source}")]
    Create {
        /// The new file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Its name now holds something that is not a regular file (a link, a directory).
    #[error("{path} exists now and is not a regular file")]
    NotAFile {
        /// The new file.
        path: PathBuf,
    },
}

/// Makes the new files of an approved line's grants enforceable as that one name each
/// (issue 16: an approval of `echo x > ../O/new.txt` covers `new.txt`, never its siblings):
/// - where the outside-files server serves the file's directory (`served`), nothing is done
///   here: the cover is granted to every process by Landlock and the server lets the
///   runner's tree create and write that name only (`crate::outside_fs`);
/// - elsewhere, no directory is handed out: the file is created now, empty (`O_CREAT |
///   O_EXCL`, in a directory reached from `/` with no link followed on the way, the final
///   name not followed either), so that the runner's Landlock rule is on that file alone (a
///   rule on a file gives no right on its directory). A regular file made there since the
///   ask is granted as it is; anything else refuses the run.
///
/// A directory a line makes with its parents ([`Grant::new_dirs`] with [`Grant::parents`]:
/// `mkdir -p`, `install -d`) where the server does not serve it is made now, with the
/// missing ones above it, each reached with no link followed (`DirFd::make_dirs`): the
/// runner's rule is on that new directory, and its program finds it made. (A plain `mkdir`
/// would fail on it: [`served_changes`] drops that grant.)
///
/// # Errors
/// [`NewFileError`]: the run is refused with it (fail closed).
pub(crate) fn prepare_new_files(
    grants: &[Grant],
    served: impl Fn(&Path) -> bool,
) -> Result<(), NewFileError> {
    let from_root = |dir: &Path, path: &Path| {
        crate::dirfd::DirFd::open(Path::new("/"))
            .and_then(|root| match dir.strip_prefix("/") {
                Ok(rel) if rel.as_os_str().is_empty() => Ok(root),
                Ok(rel) => root.open_dir(rel),
                Err(_) => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            })
            .map_err(|source| NewFileError::Directory {
                path: path.to_path_buf(),
                source,
            })
    };
    for g in grants {
        let Some(from) = g.new_dirs.as_deref().filter(|_| !served(&g.path)) else {
            continue;
        };
        let rest = g
            .path
            .strip_prefix(from)
            .map_err(|_| NewFileError::NotAFile {
                path: g.path.clone(),
            })?;
        from_root(from, &g.path)?
            .make_dirs(rest)
            .map_err(|source| NewFileError::Create {
                path: g.path.clone(),
                source,
            })?;
    }
    for g in grants.iter().filter(|g| g.new_file) {
        let (Some(parent), Some(name)) = (g.path.parent(), g.path.file_name()) else {
            return Err(NewFileError::NotAFile {
                path: g.path.clone(),
            });
        };
        if served(parent) {
            continue;
        }
        let dir = from_root(parent, &g.path)?;
        match dir.create_new_file(name, b"") {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let m = dir.meta(name).map_err(|source| NewFileError::Create {
                    path: g.path.clone(),
                    source,
                })?;
                if !m.file_type().is_file() {
                    return Err(NewFileError::NotAFile {
                        path: g.path.clone(),
                    });
                }
            }
            Err(source) => {
                return Err(NewFileError::Create {
                    path: g.path.clone(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// What an approved line gets on top of the agent's ruleset (`named`: the classification's
/// `paths`, `written`: its `writes`):
/// - a path it only reads: that path, read + execute, when it exists;
/// - a path it writes: that path read-write when it exists; when it does not exist yet (its
///   parent does), that one new name ([`Grant::new_file`]), never its directory: approving
///   `echo x > ../O/new.txt` must not let the command rewrite `../O/secret.txt`
///   ([`prepare_new_files`] makes it enforceable);
/// - a path whose mode or owner it changes ([`tyba_policy::Classification::metadata`]): that
///   change ([`Grant::meta`]), with reading;
/// - a path it removes, renames or links ([`tyba_policy::Classification::changes`]): that change ([`Grant::change`]), with reading
///   when it exists; when it does not (a `mv`'s new name), that name only;
/// - nothing for paths the agent already has (under `read_write`, or read-only paths under
///   `read_only`), for `/`, or for a line the policy gives no grants
///   ([`tyba_policy::Classification::grants_allowed`]: opaque, or its paths reached through
///   an alias or a script, which can change between the ask and the run).
pub(crate) fn grants(
    class: &tyba_policy::Classification,
    read_write: &[PathBuf],
    read_only: &[PathBuf],
) -> Vec<Grant> {
    if !class.grants_allowed() {
        return Vec::new();
    }
    let mut out: Vec<Grant> = Vec::new();
    for p in &class.paths {
        let write = class.writes.contains(p);
        let change = class.changes.contains(p);
        let meta = class.metadata.contains(p);
        let meta_tree = class.metadata_trees.contains(p);
        let dir = write && class.dirs_made.contains(p);
        let parents = dir && class.parents_made.contains(p);
        let (path, absent, new_dirs) = match real_target(p) {
            Some((path, true)) if dir => {
                let parent = path.parent().map(Path::to_path_buf);
                (path, true, parent)
            }
            Some((path, absent)) if write || change || !absent => (path, absent, None),
            None if parents => match real_target_made(p) {
                Some((path, from)) => (path, true, Some(from)),
                None => continue,
            },
            _ => continue,
        };
        let save = write && class.saves(p) && new_dirs.is_none();
        // A new name the line writes is made before it runs ([`prepare_new_files`]); one it
        // only renames something to, or links, is not (the rename makes it), nor a directory
        // it makes (`new_dirs`).
        let new_tree = absent && write && new_dirs.is_none() && class.trees_made.contains(p);
        let new_file = absent && write && new_dirs.is_none() && !new_tree;
        let under = |roots: &[PathBuf]| roots.iter().any(|r| path.starts_with(r));
        if path == Path::new("/") || under(read_write) || (!write && !meta && under(read_only)) {
            continue;
        }
        match out.iter_mut().find(|g| g.path == path) {
            Some(g) => {
                g.write |= write;
                g.new_file |= new_file;
                g.change |= change;
                g.meta |= meta;
                g.meta_tree |= meta_tree;
                g.save |= save;
                g.parents |= parents;
                g.new_tree |= new_tree;
                // One name made both as a file and as a directory: the file is made first.
                g.new_dirs = if g.new_file {
                    None
                } else {
                    g.new_dirs.take().or(new_dirs)
                };
            }
            None => out.push(Grant {
                path,
                write,
                new_file,
                change,
                meta,
                meta_tree,
                save,
                new_dirs,
                parents,
                new_tree,
            }),
        }
    }
    out
}

/// `grants` with [`Grant::change`] and [`Grant::new_dirs`] kept only where `served` (the
/// outside-files server serves the path, `crate::outside_fs::OutsideFs::serves`): nothing
/// else can let a command remove, rename or link one name, or make one directory and no other
/// (Landlock grants making directories anywhere beneath a directory, or nothing). A change
/// elsewhere is no grant: the name is kept for reading when it exists, and dropped when it
/// does not. A new directory elsewhere is kept when its program takes one that exists
/// ([`Grant::parents`]: the supervisor makes it before the run, [`prepare_new_files`]), and
/// dropped otherwise (a `mkdir` of one that exists fails: it fails unasked again, and nothing
/// is left in its place). So is a new name made as a tree or a file ([`Grant::new_tree`]: a
/// file made beforehand made `cp -r DIR` fail and stay, a directory would make it copy into
/// it). Returns the grants kept, and the paths whose change or new name was not (what an
/// approval of the line cannot let its command do, which the ask says).
pub(crate) fn served_changes(
    mut grants: Vec<Grant>,
    served: impl Fn(&Path) -> bool,
) -> (Vec<Grant>, Vec<PathBuf>) {
    let mut cannot = Vec::new();
    grants.retain_mut(|g| {
        let kept = if g.new_dirs.is_some() {
            g.parents || served(&g.path)
        } else if g.new_tree && !g.new_file {
            served(&g.path)
        } else if !g.change || served(&g.path) {
            true
        } else {
            cannot.push(g.path.clone());
            g.change = false;
            return g.write || g.new_file || std::fs::symlink_metadata(&g.path).is_ok();
        };
        if !kept {
            cannot.push(g.path.clone());
        }
        kept
    });
    (grants, cannot)
}

/// The only variables a runner takes from the asking process (besides `PATH`, filtered, and
/// `HOME`, reset): locale, terminal and time zone, which select formatting, never code. A
/// denylist cannot be complete: `TAR_OPTIONS`, `MAKEFLAGS`, `ZIPOPT`, `RUSTC_WRAPPER`,
/// `NPM_CONFIG_*` all make some program run what they name.
const RUNNER_KEPT: &[&str] = &[
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "COLUMNS",
    "LINES",
    "TMPDIR",
    "TYBA_SESSION",
    "TYBA_WORKTREE",
];

/// The environment of a runner: of the asking process's variables only [`RUNNER_KEPT`] and
/// `LC_*`, with `HOME` set to
/// the person's home and `PATH` without relative entries or entries under the session's
/// writable roots. The approved line then runs the programs and configuration its words name,
/// not ones the agent planted beside them or named in a variable the person never saw.
pub(crate) fn runner_env(
    envp: Vec<Vec<u8>>,
    read_write: &[PathBuf],
    home: Option<&Path>,
) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::with_capacity(envp.len());
    let mut saw_path = false;
    for e in envp {
        let Some(eq) = e.iter().position(|&b| b == b'=') else {
            continue;
        };
        let name = String::from_utf8_lossy(&e[..eq]).into_owned();
        let kept = RUNNER_KEPT.contains(&name.as_str()) || name.starts_with("LC_");
        if name != "PATH" && !kept {
            continue;
        }
        // Locale and time-zone values select formatting by name; one naming a path (`/`, `..`)
        // makes glibc read message catalogs, locale or zone data the agent wrote (a message
        // catalog's format strings run in the approved program: review 16's r16-02).
        let by_name = |v: &[u8]| !v.contains(&b'/') && !v.windows(2).any(|w| w == b"..");
        let locale = matches!(name.as_str(), "LANG" | "LANGUAGE" | "TZ") || name.starts_with("LC_");
        if locale && !by_name(&e[eq + 1..]) {
            continue;
        }
        if name == "PATH" {
            saw_path = true;
            let kept: Vec<&[u8]> = e[eq + 1..]
                .split(|&b| b == b':')
                .filter(|d| {
                    let d = Path::new(std::ffi::OsStr::from_bytes(d));
                    d.is_absolute() && !read_write.iter().any(|r| d.starts_with(r))
                })
                .collect();
            let mut v = b"PATH=".to_vec();
            v.extend(kept.join(&b':'));
            out.push(v);
            continue;
        }
        out.push(e);
    }
    if !saw_path {
        out.push(b"PATH=/usr/local/bin:/usr/bin:/bin".to_vec());
    }
    if let Some(h) = home {
        let mut v = b"HOME=".to_vec();
        v.extend_from_slice(h.as_os_str().as_bytes());
        out.push(v);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Stage 2 side.

struct Child {
    id: u64,
    go: Option<OwnedFd>,
}

fn send_json(sock: BorrowedFd<'_>, msg: &impl Serialize, fds: &[RawFd]) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    sys::send_with_fds(sock, &body, fds)
}

/// One packet and the fds it carried (installed close-on-exec). `Ok(None)` at hang-up.
fn recv_json<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; 64 * 1024];
    let (n, fds) = sys::recv_with_fds(sock, &mut buf, MAX_FDS + 2)?;
    if n == 0 {
        return Ok(None);
    }
    let v = serde_json::from_slice(&buf[..n]).map_err(std::io::Error::other)?;
    Ok(Some((v, fds)))
}

/// Waits for "a child changed state, or `fd` has something to read": `SIGCHLD` blocked and
/// read through a signalfd (polling every 50 ms when none can be made). Stage 2 and each
/// keeper are single-threaded loops over this.
struct ChildWatch {
    sfd: Option<SignalFd>,
}

impl ChildWatch {
    fn new() -> ChildWatch {
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGCHLD);
        let _ = mask.thread_block();
        ChildWatch {
            sfd: SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).ok(),
        }
    }

    /// Blocks until then; returns whether `fd` is readable (or hung up). Reap after it:
    /// children that ended before the watch existed are not signalled again.
    fn wait(&self, fd: Option<BorrowedFd<'_>>) -> bool {
        let mut fds = Vec::with_capacity(2);
        if let Some(f) = fd {
            fds.push(PollFd::new(f, PollFlags::POLLIN));
        }
        if let Some(s) = &self.sfd {
            fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
        }
        let timeout = if self.sfd.is_some() {
            PollTimeout::NONE
        } else {
            PollTimeout::from(50u16)
        };
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
        let ready = fd.is_some() && fds[0].revents().is_some_and(|r| !r.is_empty());
        drop(fds);
        if let Some(s) = &self.sfd {
            while let Ok(Some(_)) = s.read_signal() {}
        }
        ready
    }
}

/// Stage 2's loop after the agent is forked: serves spawn requests on `ctl` and reaps
/// children until the agent (`agent`, a pid in the sandbox's namespace) exits; returns its
/// exit code (128 + signal when killed). Everything left is killed with the namespace when
/// stage 2 exits.
pub(crate) fn serve_stage2(
    ctl: OwnedFd,
    agent: i32,
    plan: &SandboxPlan,
    abi: i32,
    require_full: bool,
) -> i32 {
    let watch = ChildWatch::new();
    let mut children: HashMap<i32, Child> = HashMap::new();
    let mut ctl = Some(ctl);
    loop {
        // Reap first: a child may have ended before the signalfd existed.
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(ws) => {
                    let (code, signal) = match ws {
                        WaitStatus::Exited(_, c) => (Some(c), None),
                        WaitStatus::Signaled(_, s, _) => (None, Some(s as i32)),
                        _ => continue,
                    };
                    let Some(pid) = ws.pid().map(|p| p.as_raw()) else {
                        continue;
                    };
                    if pid == agent {
                        // The supervisor learns how the agent ended (a signal is not an
                        // exit status: `exit(139)` is not SIGSEGV); id 0 is the agent's.
                        if let Some(s) = ctl.as_ref() {
                            let _ = send_json(
                                s.as_fd(),
                                &FromStage::Exited {
                                    id: AGENT_ID,
                                    code,
                                    signal,
                                },
                                &[],
                            );
                        }
                        // Then, nothing of the sandbox's left running, the supervisor goes on
                        // with the session's end while the kernel takes the namespaces down
                        // (stage 2's and stage 1's exits wait for RCU grace periods).
                        kill_namespace();
                        if let Some(s) = ctl.as_ref() {
                            let _ = send_json(s.as_fd(), &FromStage::Gone, &[]);
                        }
                        return AgentEnd { code, signal }.status();
                    }
                    if let (Some(c), Some(s)) = (children.remove(&pid), ctl.as_ref()) {
                        let _ = send_json(
                            s.as_fd(),
                            &FromStage::Exited {
                                id: c.id,
                                code,
                                signal,
                            },
                            &[],
                        );
                    }
                }
            }
        }
        if !watch.wait(ctl.as_ref().map(|c| c.as_fd())) {
            continue;
        }
        let Some(c) = ctl.as_ref() else { continue };
        match recv_json::<ToStage>(c.as_fd()) {
            Ok(Some((msg, fds))) => {
                if let Some(reply) = stage2_handle(msg, fds, &mut children, plan, abi, require_full)
                {
                    let _ = send_json(c.as_fd(), &reply, &[]);
                }
            }
            Ok(None) | Err(_) => {
                // The supervisor is gone: no runner may start any more.
                ctl = None;
                for (pid, _) in children.drain() {
                    let _ = nix::sys::signal::kill(Pid::from_raw(-pid), Signal::SIGKILL);
                }
            }
        }
    }
}

fn stage2_handle(
    msg: ToStage,
    fds: Vec<OwnedFd>,
    children: &mut HashMap<i32, Child>,
    plan: &SandboxPlan,
    abi: i32,
    require_full: bool,
) -> Option<FromStage> {
    match msg {
        ToStage::Spawn { id, targets } => {
            Some(match spawn_runner(fds, &targets, plan, abi, require_full) {
                Ok((pid, go)) => {
                    children.insert(pid, Child { id, go: Some(go) });
                    let start = crate::procfs::stat(pid as u32).map_or(0, |(_, s)| s);
                    FromStage::Spawned { id, pid, start }
                }
                Err(error) => FromStage::Failed { id, error },
            })
        }
        ToStage::Go { id } => {
            if let Some(c) = children.values_mut().find(|c| c.id == id) {
                if let Some(go) = &c.go {
                    let _ = nix::unistd::write(go, b"g");
                }
            }
            None
        }
        ToStage::Signal { id, sig } => {
            if let Some((&pid, c)) = children.iter_mut().find(|(_, c)| c.id == id) {
                if sig == libc::SIGKILL {
                    // The end of the command: its keeper kills every descendant (a keeper
                    // that never started just exits).
                    if let Some(go) = c.go.take() {
                        let _ = nix::unistd::write(&go, b"k");
                    }
                } else if let Ok(s) = Signal::try_from(sig) {
                    // The keeper blocks every signal; the command's process group gets it.
                    let _ = nix::sys::signal::kill(Pid::from_raw(-pid), s);
                }
            }
            None
        }
    }
}

/// In stage 2, the init of the sandbox's PID namespace: kills every other process of the
/// namespace (`kill(-1, SIGKILL)`: every process it may signal but itself, `kill(2)`) and
/// reaps its children until it has none. Orphans are reparented to the namespace's init (or
/// to a subreaper in it, killed too), so no child left means no process left; the kill is
/// sent again after each reap, for a process forked while the first went out. (A keeper,
/// which is no namespace's init, kills child by child instead: [`kill_descendants`].)
fn kill_namespace() {
    loop {
        let _ = nix::sys::signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
        match waitpid(None::<Pid>, Some(WaitPidFlag::__WALL)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
    }
}

/// Every child of the calling process (`/proc/<pid>/task/<pid>/children`, the calling
/// process single-threaded).
fn own_children() -> Vec<i32> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills every descendant of the calling child subreaper: each child is killed and reaped,
/// its own children are then reparented here, until none is left.
fn kill_descendants() {
    for _ in 0..10_000 {
        let kids = own_children();
        if kids.is_empty() {
            // Reap what died meanwhile.
            while let Ok(ws) = waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                if ws == WaitStatus::StillAlive {
                    break;
                }
            }
            return;
        }
        for k in &kids {
            let _ = nix::sys::signal::kill(Pid::from_raw(*k), Signal::SIGKILL);
        }
        for k in kids {
            let _ = waitpid(Pid::from_raw(k), None);
        }
    }
}

/// The runner's keeper (stage 2's child): a child subreaper in a session of its own that
/// forks the command, relays nothing, and when the command ends or stage 2 says `k`, kills
/// every process the command left (even those that left its process group), then ends as
/// the command ended. Never returns.
fn keeper(go: OwnedFd, command: impl FnOnce() -> std::convert::Infallible) -> ! {
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let _ = SigSet::all().thread_block();
    let mut b = [0u8; 1];
    if nix::unistd::read(&go, &mut b).unwrap_or(0) != 1 || b[0] != b'g' {
        sys::exit_now(125);
    }
    // SAFETY: the keeper is single-threaded (a fork of single-threaded stage 2).
    let cmd = match unsafe { sys::fork() } {
        Err(_) => sys::exit_now(126),
        Ok(Forked::Child) => match command() {},
        Ok(Forked::Parent(p)) => p,
    };
    // The keeper holds none of the command's fds, so pipes end when the command does.
    sys::close_fds_from_except(0, go.as_fd());
    let watch = ChildWatch::new();
    let mut status: Option<WaitStatus> = None;
    loop {
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(ws) if ws.pid() == Some(Pid::from_raw(cmd)) => status = Some(ws),
                Ok(_) => {}
            }
        }
        if status.is_some() {
            break;
        }
        if watch.wait(Some(go.as_fd())) {
            // `k`, or stage 2 gone: end the command and everything it started.
            let _ = nix::unistd::read(&go, &mut b);
            kill_descendants();
            sys::exit_now(128 + libc::SIGKILL);
        }
    }
    kill_descendants();
    match status {
        Some(WaitStatus::Exited(_, c)) => sys::exit_now(c),
        Some(WaitStatus::Signaled(_, sig, _)) => {
            let _ = nix::sys::signal::raise(sig);
            let mut one = SigSet::empty();
            one.add(sig);
            let _ = one.thread_unblock();
            sys::exit_now(128 + sig as i32)
        }
        _ => sys::exit_now(125),
    }
}

fn cstrings(v: &[Vec<u8>]) -> Result<Vec<CString>, String> {
    v.iter()
        .map(|b| CString::new(b.clone()).map_err(|_| "an argument contains a NUL byte".into()))
        .collect()
}

/// Forks a runner's keeper (stage 2 side), which forks the command once told `g`. Returns
/// the keeper's pid and the write end of its control pipe.
fn spawn_runner(
    fds: Vec<OwnedFd>,
    targets: &[i32],
    plan: &SandboxPlan,
    abi: i32,
    require_full: bool,
) -> Result<(i32, OwnedFd), String> {
    let mut fds = fds.into_iter();
    let (Some(payload), Some(cwd)) = (fds.next(), fds.next()) else {
        return Err("spawn without payload or working directory".into());
    };
    let install: Vec<OwnedFd> = fds.collect();
    if install.len() != targets.len() {
        return Err("spawn fds do not match their targets".into());
    }
    let mut f = std::fs::File::from(payload);
    let _ = f.rewind();
    let mut body = Vec::new();
    f.read_to_end(&mut body)
        .map_err(|e| format!("reading the spawn: {e}"))?;
    let p: SpawnPayload =
        serde_json::from_slice(&body).map_err(|e| format!("reading the spawn: {e}"))?;
    let path = CString::new(p.path.clone()).map_err(|_| "the file name contains a NUL byte")?;
    let argv = cstrings(&p.argv)?;
    let envp = cstrings(&p.envp)?;
    let extra: Vec<(PathBuf, bool)> = p.grants.iter().filter_map(Grant::landlock).collect();
    let ruleset = landlock_ruleset(plan, &extra, abi, require_full)
        .map_err(|e| format!("the approved command's Landlock ruleset: {e}"))?;
    let (go_r, go_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let high = targets.iter().copied().max().unwrap_or(2).max(2) + 1;
    // SAFETY: stage 2 is single-threaded.
    match unsafe { sys::fork() } {
        Err(e) => Err(format!("fork: {e}")),
        Ok(Forked::Parent(pid)) => Ok((pid, go_w)),
        Ok(Forked::Child) => {
            drop(go_w);
            let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
            let _ = nix::unistd::setsid();
            // Move the received fds above every target first, so installing one cannot
            // overwrite another that is still to be installed.
            let mut moved = Vec::with_capacity(install.len());
            for fd in &install {
                match sys::dup_at_least(fd.as_fd(), high) {
                    Ok(n) => moved.push(n),
                    Err(_) => sys::exit_now(126),
                }
            }
            drop(install);
            for (fd, &t) in moved.iter().zip(targets) {
                if sys::dup_onto(fd.as_fd(), t).is_err() {
                    sys::exit_now(126);
                }
            }
            drop(moved);
            // Standard streams the asking process had closed stay closed in effect: never
            // stage 2's own, which are the person's terminal or `tyba run`'s stdio.
            for t in 0..=2 {
                if !targets.contains(&t) {
                    let null = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null");
                    match null {
                        Ok(f) if sys::dup_onto(f.as_fd(), t).is_ok() => {}
                        _ => sys::exit_now(126),
                    }
                }
            }
            if nix::unistd::fchdir(cwd.as_fd()).is_err() {
                sys::exit_now(126);
            }
            drop(cwd);
            keeper(go_r, move || -> std::convert::Infallible {
                let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
                sys::reset_signals();
                crate::launch::restore_core_limit();
                if let Err(e) = restrict(ruleset, require_full) {
                    let _ = writeln!(
                        std::io::stderr(),
                        "tyba: cannot confine the approved command: {e}"
                    );
                    sys::exit_now(126);
                }
                let a: Vec<&std::ffi::CStr> = argv.iter().map(|s| s.as_c_str()).collect();
                let e_: Vec<&std::ffi::CStr> = envp.iter().map(|s| s.as_c_str()).collect();
                let e = sys::execve(&path, &a, &e_);
                let _ = writeln!(
                    std::io::stderr(),
                    "tyba: cannot run {}: {e}",
                    path.to_string_lossy()
                );
                sys::exit_now(if e.raw_os_error() == Some(libc::ENOENT) {
                    127
                } else {
                    126
                })
            })
        }
    }
}

// ---------------------------------------------------------------------------------------
// Supervisor side.

/// The id on the stage-2 link of the agent itself: its `Exited` is sent when it ends
/// (runners' ids start at 1).
const AGENT_ID: u64 = 0;

/// How the agent ended, as stage 2 reaped it: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AgentEnd {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl AgentEnd {
    /// The exit status a shell would give: the code, or 128 + the signal.
    pub(crate) fn status(self) -> i32 {
        self.code.unwrap_or_else(|| 128 + self.signal.unwrap_or(0))
    }
}

#[derive(Debug, Default)]
struct EndSeen {
    agent: Option<AgentEnd>,
    /// Stage 2 said every other process of the sandbox is gone ([`FromStage::Gone`]).
    gone: bool,
    hung_up: bool,
}

/// The supervisor's end of the stage-2 link: sends spawns, routes stage 2's answers to the
/// thread waiting for each runner.
pub(crate) struct StageLink {
    sock: OwnedFd,
    next: AtomicU64,
    waiters: Mutex<HashMap<u64, mpsc::Sender<FromStage>>>,
    end: Mutex<EndSeen>,
    end_cv: std::sync::Condvar,
}

impl std::fmt::Debug for StageLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageLink").finish_non_exhaustive()
    }
}

/// A runner stage 2 has forked.
pub(crate) struct Spawned {
    /// Its id on the link.
    pub id: u64,
    /// Its pid in the sandbox's PID namespace.
    pub pid: u32,
    /// Its start time (clock ticks since boot).
    pub start: u64,
    /// Where its end is reported.
    pub ended: mpsc::Receiver<FromStage>,
}

/// What the supervisor hands over to start one runner.
pub(crate) struct Spawn {
    pub payload: SpawnPayload,
    /// The asking process's working directory.
    pub cwd: OwnedFd,
    /// `(fd, number in the runner)`.
    pub fds: Vec<(OwnedFd, i32)>,
}

impl StageLink {
    pub(crate) fn new(sock: OwnedFd) -> StageLink {
        StageLink {
            sock,
            next: AtomicU64::new(1),
            waiters: Mutex::new(HashMap::new()),
            end: Mutex::new(EndSeen::default()),
            end_cv: std::sync::Condvar::new(),
        }
    }

    /// How the agent ended, once stage 2 said so; waits up to `timeout` for its message (it
    /// comes before stage 2 exits). `None` when stage 2 hung up without saying (killed).
    pub(crate) fn agent_end(&self, timeout: Duration) -> Option<AgentEnd> {
        let g = self.end.lock().ok()?;
        let (g, _) = self
            .end_cv
            .wait_timeout_while(g, timeout, |e| e.agent.is_none() && !e.hung_up)
            .ok()?;
        g.agent
    }

    /// How the agent ended, once stage 2 said so and that nothing else of the sandbox runs
    /// any more ([`FromStage::Gone`]); waits for it. `None` when stage 2 hung up without
    /// saying both (killed, or ended by a signal to the supervisor): the caller then waits
    /// for stage 1 to end, which ends with the namespace's last process.
    pub(crate) fn wait_gone(&self) -> Option<AgentEnd> {
        let g = self.end.lock().ok()?;
        let g = self.end_cv.wait_while(g, |e| !e.gone && !e.hung_up).ok()?;
        g.agent.filter(|_| g.gone)
    }

    /// Reads stage 2's messages until it hangs up; run on its own thread.
    pub(crate) fn read_loop(&self) {
        loop {
            match recv_json::<FromStage>(self.sock.as_fd()) {
                Ok(Some((FromStage::Exited { id, code, signal }, _))) if id == AGENT_ID => {
                    if let Ok(mut e) = self.end.lock() {
                        e.agent = Some(AgentEnd { code, signal });
                    }
                    self.end_cv.notify_all();
                }
                Ok(Some((FromStage::Gone, _))) => {
                    if let Ok(mut e) = self.end.lock() {
                        e.gone = true;
                    }
                    self.end_cv.notify_all();
                }
                Ok(Some((msg, _))) => {
                    let id = match &msg {
                        FromStage::Spawned { id, .. }
                        | FromStage::Failed { id, .. }
                        | FromStage::Exited { id, .. } => *id,
                        FromStage::Gone => continue,
                    };
                    if let Ok(w) = self.waiters.lock() {
                        if let Some(tx) = w.get(&id) {
                            let _ = tx.send(msg);
                        }
                    }
                }
                // ECONNRESET: stage 2 ended with messages of ours unread; what it sent
                // before (a runner's end, the agent's) is still queued and read on.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::ECONNRESET)) => {
                    continue
                }
                _ => {
                    // Hang-up: every waiter sees its channel close.
                    if let Ok(mut w) = self.waiters.lock() {
                        w.clear();
                    }
                    if let Ok(mut e) = self.end.lock() {
                        e.hung_up = true;
                    }
                    self.end_cv.notify_all();
                    return;
                }
            }
        }
    }

    /// Asks stage 2 for a runner; returns it, waiting for `Go`.
    pub(crate) fn spawn(&self, s: Spawn) -> Result<Spawned, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.waiters
            .lock()
            .map_err(|_| "poisoned".to_string())?
            .insert(id, tx);
        let result = (|| {
            let body = serde_json::to_vec(&s.payload).map_err(|e| e.to_string())?;
            let memfd = nix::sys::memfd::memfd_create(
                c"tyba-spawn",
                nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
            )
            .map_err(|e| format!("memfd: {e}"))?;
            let mut f = std::fs::File::from(memfd);
            f.write_all(&body).map_err(|e| format!("memfd: {e}"))?;
            let mut raw = vec![f.as_raw_fd(), s.cwd.as_raw_fd()];
            raw.extend(s.fds.iter().map(|(fd, _)| fd.as_raw_fd()));
            let targets = s.fds.iter().map(|(_, t)| *t).collect();
            send_json(self.sock.as_fd(), &ToStage::Spawn { id, targets }, &raw)
                .map_err(|e| format!("reaching the sandbox: {e}"))?;
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(FromStage::Spawned { pid, start, .. }) => Ok((pid as u32, start)),
                Ok(FromStage::Failed { error, .. }) => Err(error),
                Ok(FromStage::Exited { .. }) => Err("the runner ended before starting".into()),
                Ok(FromStage::Gone) | Err(_) => Err("the sandbox did not answer".into()),
            }
        })();
        match result {
            Ok((pid, start)) => Ok(Spawned {
                id,
                pid,
                start,
                ended: rx,
            }),
            Err(e) => {
                self.forget(id);
                Err(e)
            }
        }
    }

    /// Sends `msg` to stage 2 (best effort: a gone stage 2 has ended every runner).
    pub(crate) fn send(&self, msg: &ToStage) {
        let _ = send_json(self.sock.as_fd(), msg, &[]);
    }

    /// Stops routing messages for runner `id`.
    pub(crate) fn forget(&self, id: u64) {
        if let Ok(mut w) = self.waiters.lock() {
            w.remove(&id);
        }
    }
}

/// The asking process's inheritable fds (those without close-on-exec, as exec would pass
/// them; `(fd, number)`, at most [`MAX_FDS`]) and its working directory, taken with
/// `pidfd_getfd(2)` and `/proc/<pid>/cwd`.
///
/// # Errors
/// The reason, when the process is gone or holds too many fds.
pub(crate) fn inherited(tgid: u32) -> Result<(Vec<(OwnedFd, i32)>, OwnedFd), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let pidfd = sys::pidfd_open(tgid as i32).map_err(|e| e.to_string())?;
    let mut fds = Vec::new();
    let dir = std::fs::read_dir(format!("/proc/{tgid}/fd")).map_err(|e| e.to_string())?;
    for e in dir.flatten() {
        let Some(num) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if crate::procfs::fd_cloexec(tgid, num) {
            continue;
        }
        if fds.len() == MAX_FDS {
            return Err(format!("more than {MAX_FDS} open fds"));
        }
        if let Ok(fd) = sys::pidfd_getfd(pidfd.as_fd(), num) {
            fds.push((fd, num));
        }
    }
    let cwd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(format!("/proc/{tgid}/cwd"))
        .map_err(|e| format!("its working directory: {e}"))?;
    Ok((fds, cwd.into()))
}

/// One packet of a proxy channel (`crate::proxy` for the messages); `None` at its end.
/// A peer that closed with packets of ours unread makes the kernel report `ECONNRESET`
/// once, before the packets still queued here: they are read on.
pub(crate) fn recv_text(sock: &OwnedFd) -> Option<String> {
    let mut buf = [0u8; 64];
    loop {
        match nix::sys::socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(0) => return None,
            Ok(n) => return Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::ECONNRESET) => continue,
            Err(_) => return None,
        }
    }
}

/// How long an installed proxy may take to say hello ([`proxy_started`]) while its process
/// lives: a loaded machine can take seconds to run an exec, and the command has not started.
pub(crate) const PROXY_START_LIMIT: Duration = Duration::from_secs(120);

/// Whether the proxy said hello (`h`) on its channel: waits until it does, its process
/// (`pidfd`, the asking process) ends, or [`PROXY_START_LIMIT`] passes.
pub(crate) fn proxy_started(chan: &OwnedFd, pidfd: BorrowedFd<'_>) -> bool {
    let deadline = std::time::Instant::now() + PROXY_START_LIMIT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [
            PollFd::new(chan.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd, PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return false,
        }
        let said = fds[0].revents().is_some_and(|r| !r.is_empty());
        let ended = fds[1].revents().is_some_and(|r| !r.is_empty());
        if said {
            return recv_text(chan).as_deref() == Some("h");
        }
        if ended {
            return false;
        }
    }
}

/// Relays between a started runner `id` and its proxy until the runner ends: the signals the
/// proxy forwards (`s<N>`) go to the runner, the proxy's end kills it (with everything it
/// started), and the runner's end goes to the proxy (`x<CODE>` or `k<SIGNAL>`).
pub(crate) fn relay(
    stage: &std::sync::Arc<StageLink>,
    id: u64,
    chan: OwnedFd,
    ended: &mpsc::Receiver<FromStage>,
) {
    let chan = std::sync::Arc::new(chan);
    {
        let (chan, stage) = (std::sync::Arc::clone(&chan), std::sync::Arc::clone(stage));
        std::thread::spawn(move || loop {
            match recv_text(&chan) {
                Some(m) => {
                    if let Some(sig) = m.strip_prefix('s').and_then(|v| v.parse().ok()) {
                        stage.send(&ToStage::Signal { id, sig });
                    }
                }
                None => {
                    stage.send(&ToStage::Signal {
                        id,
                        sig: libc::SIGKILL,
                    });
                    return;
                }
            }
        });
    }
    let end = match ended.recv() {
        Ok(FromStage::Exited {
            signal: Some(sig), ..
        }) => format!("k{sig}"),
        Ok(FromStage::Exited { code, .. }) => format!("x{}", code.unwrap_or(125)),
        _ => format!("k{}", libc::SIGKILL),
    };
    stage.forget(id);
    let _ = nix::sys::socket::send(chan.as_raw_fd(), end.as_bytes(), MsgFlags::empty());
    let _ = nix::sys::socket::shutdown(chan.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The processes of the calling process's view whose parent chain reaches `root`
    /// (`procfs::stat`'s parent), `root` itself aside.
    fn descendants(root: i32) -> usize {
        let mut parent = HashMap::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok((pp, _)) = crate::procfs::stat(pid) {
                parent.insert(pid as i32, pp as i32);
            }
        }
        parent
            .keys()
            .filter(|&&p| {
                let mut q = p;
                for _ in 0..64 {
                    match parent.get(&q) {
                        Some(&pp) if pp == root => return p != root,
                        Some(&pp) if pp > 0 && pp != q => q = pp,
                        _ => return false,
                    }
                }
                false
            })
            .count()
    }

    /// In a PID namespace's init, `kill_namespace` leaves no other process: not an orphan
    /// that ignores SIGTERM, not a subreaper's grandchild, not one whose exit takes a while,
    /// not a stopped process, not the processes of a nested PID namespace. Counted from outside the namespace while its
    /// init still lives; the control (init kills nothing) leaves them all.
    #[test]
    fn killing_the_namespace_leaves_no_process_but_its_init() {
        for kill in [true, false] {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::empty()).unwrap();
            let (go_r, go_w) = nix::unistd::pipe2(nix::fcntl::OFlag::empty()).unwrap();
            // SAFETY: the child makes system calls, allocates and exits (glibc's fork
            // handlers keep malloc usable).
            let outer = match unsafe { sys::fork() }.unwrap() {
                Forked::Parent(p) => p,
                Forked::Child => {
                    let code = (|| -> i32 {
                        if nix::sched::unshare(
                            nix::sched::CloneFlags::CLONE_NEWUSER
                                | nix::sched::CloneFlags::CLONE_NEWPID,
                        )
                        .is_err()
                        {
                            return 90;
                        }
                        let (ready_r, ready_w) = nix::unistd::pipe().unwrap();
                        let leaf = |w: &OwnedFd| {
                            let _ = nix::unistd::write(w, b"r");
                            loop {
                                nix::unistd::pause();
                            }
                        };
                        // SAFETY: as above; this child is the namespace's init.
                        let init = match unsafe { sys::fork() }.unwrap() {
                            Forked::Parent(p) => p,
                            Forked::Child => {
                                let spawn = |f: &dyn Fn()| {
                                    // SAFETY: as above.
                                    if let Ok(Forked::Child) = unsafe { sys::fork() } {
                                        f();
                                        sys::exit_now(0)
                                    }
                                };
                                // An orphan that ignores SIGTERM.
                                spawn(&|| {
                                    spawn(&|| {
                                        // SAFETY: SIG_IGN for a catchable signal.
                                        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
                                        leaf(&ready_w)
                                    });
                                });
                                // A subreaper and its grandchild (orphaned to it).
                                spawn(&|| {
                                    let _ = nix::sys::prctl::set_child_subreaper(true);
                                    spawn(&|| spawn(&|| leaf(&ready_w)));
                                    leaf(&ready_w)
                                });
                                // One whose exit takes a while (its memory freed).
                                spawn(&|| {
                                    let big = vec![1u8; 64 << 20];
                                    std::hint::black_box(&big);
                                    leaf(&ready_w)
                                });
                                // A stopped process.
                                spawn(&|| {
                                    let _ = nix::unistd::write(&ready_w, b"r");
                                    // SAFETY: raise(3) takes a signal number.
                                    unsafe { libc::raise(libc::SIGSTOP) };
                                });
                                // A nested PID namespace's init and its child.
                                spawn(&|| {
                                    if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWPID)
                                        .is_ok()
                                    {
                                        spawn(&|| {
                                            spawn(&|| leaf(&ready_w));
                                            leaf(&ready_w)
                                        });
                                    }
                                    leaf(&ready_w)
                                });
                                let mut got = 0;
                                let mut b = [0u8; 16];
                                while got < 8 {
                                    match nix::unistd::read(&ready_r, &mut b) {
                                        Ok(n) if n > 0 => got += n,
                                        _ => sys::exit_now(91),
                                    }
                                }
                                if kill {
                                    kill_namespace();
                                }
                                let _ = nix::unistd::write(&w, b"k");
                                let _ = nix::unistd::read(&go_r, &mut b);
                                sys::exit_now(0)
                            }
                        };
                        let mut b = [0u8; 1];
                        if nix::unistd::read(&r, &mut b) != Ok(1) {
                            return 92;
                        }
                        let n = descendants(init);
                        let _ = nix::unistd::write(&go_w, b"g");
                        let _ = waitpid(Pid::from_raw(init), None);
                        i32::try_from(n).unwrap_or(99).min(80)
                    })();
                    sys::exit_now(code)
                }
            };
            let ws = waitpid(Pid::from_raw(outer), None).unwrap();
            let WaitStatus::Exited(_, n) = ws else {
                panic!("the outer child ended so: {ws:?}")
            };
            assert!(n < 90, "the set-up failed ({n})");
            if kill {
                assert_eq!(n, 0, "processes left in the namespace beside its init");
            } else {
                assert!(
                    n >= 8,
                    "the control left only {n} processes: the count cannot fail"
                );
            }
        }
    }

    fn class(paths: &[PathBuf], writes: &[PathBuf]) -> tyba_policy::Classification {
        let mut c = tyba_policy::Classification::green();
        c.paths = paths.to_vec();
        c.writes = writes.to_vec();
        c
    }

    /// A directory a line makes (`mkdir`) is granted as that directory and, with parents
    /// (`mkdir -p`), the missing ones above it from the deepest existing ancestor: never a
    /// new file made beforehand (`mkdir` then failed on it). Where the outside-files server
    /// does not serve it, a `mkdir -p` directory is made before the run (its program takes
    /// one that exists) and a plain `mkdir` gets nothing. An existing one is an ordinary grant.
    #[test]
    fn a_directory_a_line_makes_is_granted_as_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let o = std::fs::canonicalize(d.path()).unwrap().join("o");
        std::fs::create_dir_all(o.join("there")).unwrap();
        let deep = o.join("a/b/c");
        let (one, there, flat) = (o.join("n"), o.join("there"), o.join("x/y"));
        let names = [deep.clone(), one.clone(), there.clone(), flat.clone()];
        let mut c = class(&names, &names);
        c.dirs_made = names.to_vec();
        c.parents_made = vec![deep.clone(), there.clone()];
        let g = grants(&c, &[], &[]);
        let of = |p: &Path| g.iter().find(|g| g.path == p).cloned();
        let deep_g = of(&deep).unwrap();
        assert_eq!(deep_g.new_dirs.as_deref(), Some(o.as_path()));
        assert!(deep_g.write && deep_g.parents && !deep_g.new_file);
        let one_g = of(&one).unwrap();
        assert_eq!(one_g.new_dirs.as_deref(), Some(o.as_path()));
        assert!(!one_g.new_file && !one_g.parents);
        let there_g = of(&there).unwrap();
        assert_eq!(there_g.new_dirs, None);
        assert_eq!(there_g.landlock(), Some((there.clone(), true)));
        // `mkdir x/y` with `x` missing makes nothing: no grant.
        assert!(of(&flat).is_none(), "{g:#?}");
        // Served: all kept, nothing made beforehand (the server lets the command make them).
        let (served, cannot) = served_changes(g.clone(), |_| true);
        assert_eq!(served.len(), 3);
        assert!(cannot.is_empty());
        prepare_new_files(&served, |_| true).unwrap();
        assert!(
            !o.join("a").exists() && !one.exists(),
            "nothing made beforehand"
        );
        // Not served: the plain `mkdir` dropped, the `mkdir -p` one made now, its rule on it.
        let (unserved, cannot) = served_changes(g, |_| false);
        assert_eq!(cannot, vec![one.clone()]);
        let paths: Vec<&PathBuf> = unserved.iter().map(|g| &g.path).collect();
        assert_eq!(paths, [&deep, &there]);
        prepare_new_files(&unserved, |_| false).unwrap();
        assert!(deep.is_dir() && !one.exists());
        assert_eq!(unserved[0].landlock(), Some((deep.clone(), true)));
        // Made again over what exists: nothing changes; over a link on the way: refused.
        prepare_new_files(&unserved, |_| false).unwrap();
        std::fs::remove_dir_all(o.join("a")).unwrap();
        std::os::unix::fs::symlink(o.join("there"), o.join("a")).unwrap();
        assert!(prepare_new_files(&unserved, |_| false).is_err());
        assert!(!o.join("there/b").exists(), "nothing made through the link");
        // A name on the way that is not a plain one is no grant.
        assert_eq!(real_target_made(Path::new("a/b")), None);
        assert_eq!(real_target_made(&o.join("q/../r")), None);
        assert_eq!(
            real_target_made(&o.join("q/r")),
            Some((o.join("q/r"), o.clone()))
        );
    }

    /// A new name a recursive copy makes as a tree or a file is granted where the server
    /// serves it only: nothing is made in its place beforehand.
    #[test]
    fn a_new_tree_is_granted_where_served_only() {
        let d = tempfile::tempdir().unwrap();
        let o = std::fs::canonicalize(d.path()).unwrap();
        let t = o.join("copy");
        let mut c = class(std::slice::from_ref(&t), std::slice::from_ref(&t));
        c.trees_made = vec![t.clone()];
        let g = grants(&c, &[], &[]);
        assert!(g[0].new_tree && g[0].write && !g[0].new_file, "{g:#?}");
        assert_eq!(served_changes(g.clone(), |_| true).0.len(), 1);
        let (kept, cannot) = served_changes(g.clone(), |_| false);
        assert!(kept.is_empty());
        assert_eq!(cannot, vec![t.clone()]);
        prepare_new_files(&g, |_| false).unwrap();
        assert!(
            std::fs::symlink_metadata(&t).is_err(),
            "nothing made beforehand"
        );
    }

    #[test]
    fn grants_are_the_named_out_of_tree_paths_read_unless_written() {
        let d = std::env::temp_dir().join(format!("tyba-grants-{}", std::process::id()));
        let wt = d.join("wt");
        let o = d.join("o");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(o.join("sub")).unwrap();
        std::fs::write(o.join("secret"), "s").unwrap();
        std::fs::write(o.join("target"), "t").unwrap();
        let wt = std::fs::canonicalize(&wt).unwrap();
        let o = std::fs::canonicalize(&o).unwrap();
        let rw = vec![wt.clone()];
        let ro = vec![PathBuf::from("/usr")];
        let named = [
            wt.join("in.txt"),
            o.join("secret"),
            o.join("missing-read"),
            o.join("target"),
            o.join("sub/new-file"),
            o.join("gone/deeper"),
            PathBuf::from("/usr/bin/cat"),
            PathBuf::from("/"),
            o.join("secret"),
        ];
        let written = [
            o.join("target"),
            o.join("sub/new-file"),
            o.join("gone/deeper"),
        ];
        let g = grants(&class(&named, &written), &rw, &ro);
        // Read-only what is only read; the written file itself; a new file as that one name,
        // never its directory (issue 16: the approval of `> ../O/sub/new-file` must not
        // reach `../O/sub/*`); nothing for a missing read, a missing parent, covered paths,
        // `/` or a repeat.
        assert_eq!(
            g,
            vec![
                Grant {
                    path: o.join("secret"),
                    ..Default::default()
                },
                Grant {
                    path: o.join("target"),
                    write: true,
                    ..Default::default()
                },
                Grant {
                    path: o.join("sub/new-file"),
                    write: true,
                    new_file: true,
                    ..Default::default()
                },
            ]
        );
        assert!(!g.iter().any(|g| g.path == o.join("sub") || g.path == o));
        // Made beforehand where no server serves it: that file, empty, and nothing else; a
        // link planted under the name since the ask refuses the run, never followed.
        prepare_new_files(&g, |_| false).unwrap();
        assert_eq!(std::fs::read(o.join("sub/new-file")).unwrap(), b"");
        assert_eq!(std::fs::read_dir(o.join("sub")).unwrap().count(), 1);
        prepare_new_files(&g, |_| false).unwrap();
        std::fs::remove_file(o.join("sub/new-file")).unwrap();
        std::os::unix::fs::symlink("../secret", o.join("sub/new-file")).unwrap();
        assert!(matches!(
            prepare_new_files(&g, |_| false),
            Err(NewFileError::NotAFile { .. })
        ));
        assert_eq!(std::fs::read(o.join("secret")).unwrap(), b"s");
        std::fs::remove_file(o.join("sub/new-file")).unwrap();
        // Served by the outside-files server: nothing is made here.
        prepare_new_files(&g, |_| true).unwrap();
        assert!(!o.join("sub/new-file").exists());
        // A line whose paths came through an alias or a script, or that is opaque, gets none.
        let mut c = class(&named, &written);
        c.add(tyba_policy::Finding::new(
            tyba_policy::Verdict::Red,
            "git.alias",
            "alias",
        ));
        assert!(grants(&c, &rw, &ro).is_empty());
        let mut c = class(&named, &written);
        c.shape.opaque = true;
        assert!(grants(&c, &rw, &ro).is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_lines_metadata_changes_are_granted_as_such_and_said_so() {
        let d = std::env::temp_dir().join(format!("tyba-grants-meta-{}", std::process::id()));
        let o = d.join("o");
        std::fs::create_dir_all(&o).unwrap();
        std::fs::write(o.join("f"), "f").unwrap();
        std::fs::write(o.join("w"), "w").unwrap();
        let o = std::fs::canonicalize(&o).unwrap();
        let ro = vec![o.clone()];
        // `chmod 600 o/f o/missing; touch o/w`: `f` changes mode only (read + metadata, even
        // under a read-only root), a missing operand gets nothing, `w` is written.
        let named = [o.join("f"), o.join("missing"), o.join("w")];
        let mut c = class(&named, &[o.join("w")]);
        c.metadata = vec![o.join("f"), o.join("missing")];
        // `w` is saved by its program's own rule (`sed -i`): it may be saved through copies.
        c.saved = vec![o.join("w")];
        let g = grants(&c, &[d.join("wt")], &ro);
        let f = Grant {
            path: o.join("f"),
            meta: true,
            ..Default::default()
        };
        let w = Grant {
            path: o.join("w"),
            write: true,
            save: true,
            ..Default::default()
        };
        assert_eq!(g, vec![f.clone(), w.clone()]);
        // `chmod -R`: beneath it too, and the ask says so.
        c.metadata_trees = vec![o.join("f")];
        let tree = Grant {
            meta_tree: true,
            ..f.clone()
        };
        assert_eq!(
            grants(&c, &[d.join("wt")], &ro),
            vec![tree.clone(), w.clone()]
        );
        assert_eq!(
            tree.to_string(),
            format!(
                "read and change the mode, owner or times (recursively) of {}",
                o.join("f").display()
            )
        );
        c.metadata_trees.clear();
        // A line that runs code the policy does not analyse writes the file it names, and
        // saves nothing through copies beside it (review 12's r12-05).
        let mut code = c.clone();
        code.add(tyba_policy::Finding::new(
            tyba_policy::Verdict::Yellow,
            tyba_policy::rules::INTERP_CODE.id,
            "code".to_string(),
        ));
        // Nor does one command of a list or pipeline (another could use the copies: review
        // 13's r13-01), nor a file no known program saves.
        let mut list = c.clone();
        list.shape.compound = true;
        let mut unknown = c.clone();
        unknown.saved.clear();
        let unsaved = Grant { save: false, ..w };
        for line in [&code, &list, &unknown] {
            assert_eq!(
                grants(line, &[d.join("wt")], &ro),
                vec![f.clone(), unsaved.clone()]
            );
        }
        // Landlock: reading it, nothing more (it has no rights for metadata).
        assert_eq!(f.landlock(), Some((o.join("f"), false)));
        assert_eq!(
            f.to_string(),
            format!(
                "read and change the mode, owner or times of {}",
                o.join("f").display()
            )
        );
        // Control: read only, under the read-only root, it is no grant at all.
        c.metadata.clear();
        assert_eq!(grants(&c, &[d.join("wt")], &ro).len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_lines_changes_are_granted_as_changes_where_the_outside_files_serve_them() {
        let d = std::env::temp_dir().join(format!("tyba-grants-change-{}", std::process::id()));
        let o = d.join("o");
        std::fs::create_dir_all(o.join("dir")).unwrap();
        std::fs::write(o.join("a"), "a").unwrap();
        std::fs::write(o.join("gone"), "g").unwrap();
        let o = std::fs::canonicalize(&o).unwrap();
        let rw = vec![d.join("wt")];
        // `mv o/a o/b; rm -f o/gone; rm -rf o/dir`: every name changed, none written; `b`
        // does not exist yet.
        let names = [o.join("a"), o.join("b"), o.join("gone"), o.join("dir")];
        let mut c = class(&names, &[]);
        c.changes = names.to_vec();
        let g = grants(&c, &rw, &[]);
        let want = |p: &Path| Grant {
            path: p.to_path_buf(),
            change: true,
            ..Default::default()
        };
        assert_eq!(
            g,
            vec![
                want(&o.join("a")),
                want(&o.join("b")),
                want(&o.join("gone")),
                want(&o.join("dir")),
            ]
        );
        // Landlock: reading what exists; the new name only the server can grant.
        let rules: Vec<_> = g.iter().filter_map(Grant::landlock).collect();
        assert_eq!(
            rules,
            vec![
                (o.join("a"), false),
                (o.join("gone"), false),
                (o.join("dir"), false)
            ]
        );
        // Nothing is made for a name the line only renames something to.
        prepare_new_files(&g, |_| false).unwrap();
        assert!(!o.join("b").exists());
        // The server lets the command do exactly that to those names.
        let (served, _) = served_changes(g.clone(), |_| true);
        assert_eq!(served, g);
        let outside: Vec<_> = served.iter().map(Grant::outside).collect();
        assert!(outside.iter().all(|r| r.change && !r.write));
        // Where no server serves them, a change is no grant: what exists is kept for reading,
        // the new name is dropped.
        let (unserved, _) = served_changes(g.clone(), |p| p == o.join("gone"));
        assert_eq!(
            unserved,
            vec![
                Grant {
                    change: false,
                    ..want(&o.join("a"))
                },
                want(&o.join("gone")),
                Grant {
                    change: false,
                    ..want(&o.join("dir"))
                },
            ]
        );
        // The ask says what an approval adds.
        assert_eq!(
            want(&o.join("gone")).to_string(),
            format!("read, remove, rename or link {}", o.join("gone").display())
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn runner_env_drops_what_loads_other_code_and_planted_path_entries() {
        // A locale or zone naming a path is dropped with them (review 16's r16-02).
        let env: Vec<Vec<u8>> = [
            "BASH_ENV=/wt/.env.sh",
            "LD_PRELOAD=/wt/x.so",
            "BASH_FUNC_ls%%=() { evil; }",
            "GIT_CONFIG_GLOBAL=/wt/gc",
            "PYTHONPATH=/wt",
            "HOME=/wt/fakehome",
            "PATH=/wt/bin:relative:/usr/bin:/bin",
            "LANG=C.UTF-8",
            "LC_ALL=C",
            "LANGUAGE=../../../wt/mo",
            "LC_MESSAGES=/wt/locale",
            "TZ=/wt/zone",
            "TAR_OPTIONS=--checkpoint-action=exec=evil",
            "MAKEFLAGS=--eval=$(shell evil)",
            "FOO=bar",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let out = runner_env(env, &[PathBuf::from("/wt")], Some(Path::new("/home/u")));
        let out: Vec<String> = out
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect();
        assert_eq!(
            out,
            [
                "PATH=/usr/bin:/bin",
                "LANG=C.UTF-8",
                "LC_ALL=C",
                "HOME=/home/u"
            ]
        );
    }
}
