//! Out-of-tree file access asked at the kernel level (`tyba run --outside-files`, on by
//! default where `/dev/fuse` can be opened: [`OutsideMode`]).
//!
//! Landlock alone gives a program that opens a path outside the worktree a plain `EACCES`:
//! no ask, no line in the terminal or the audit log. Here the entries around the worktree and
//! in the person's home that no rule of the plan opens are **covered**: in the sandbox's
//! mount namespace each one is replaced by a bind of the same entry as served by a FUSE
//! filesystem of the supervisor ([`OutsideFs`]), and Landlock grants those bind mounts.
//! Everything the plan opens (the worktree, the temp dir, caches, the agent's state and
//! installation, system paths) stays the kernel's own mount at native speed: covers are only
//! ever *siblings* of those paths, never their ancestors ([`plan_covers`]), so no Landlock
//! right given to a cover reaches a native path beneath it.
//!
//! The server runs in the supervisor, in the host's mount namespace, and reaches the real
//! entries only relative to directory fds it opened at start, with `openat2(2)`
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: it never follows a
//! symbolic link (the kernel resolves the links it shows, hop by hop, and each hop lands on a
//! native path Landlock judges or on a cover the server judges). Looking up and `stat`ing
//! entries is answered (Landlock lets `stat` outside through too); opening a file, listing a
//! directory, creating, making a directory, removing, truncating, renaming, hard-linking and
//! making a symbolic link are decided per request ([`Op`]) by who makes it ([`Asker`]; the
//! FUSE header's pid, numbered in the supervisor's PID namespace because stage 1, which
//! creates the mount, lives there). A history file of a shell, REPL or pager (the policy's
//! `filesystem.history_files`) is refused quietly to anyone, never granted. The agent
//! program's own runtime and tyba's own hook are refused quietly (logged, counted, not asked:
//! not the model's commands), the agent program only unless the person's answer to its hook's
//! ask of the same file covers it ([`Approver::answered`]). A command, and a shell or
//! interpreter named as the agent (the model's own interpreter), is matched against the
//! grants and otherwise asked through the session's approver with the colour the policy gives
//! the worst path the operation names (DESIGN.md §2a "Outside means ask": red; a credential
//! path: red, with the credential named as the sensitive part, §4). An approval covers that
//! one operation (the one file, the one directory's listing, the one rename) for the asking
//! command and the processes it starts until it exits, or, when the asker is the agent, for
//! the agent only and never the commands it starts (identity by [`procfs::ProcId`], so a
//! reused pid inherits nothing); the ask says which. A deny fails the call with `EACCES`,
//! writes the refusal on the process's stderr and logs it. Device nodes (fifos, sockets,
//! whiteouts) are refused unasked (`EACCES`, logged).
//!
//! Fail closed: when the server thread ends or the connection is aborted, the kernel fails
//! every request on the covers (`ENOTCONN`); nothing passes through. A request the server
//! does not answer within [`REQUEST_BOUND`] while it is not waiting for the person aborts the
//! connection ([`Watchdog`]). tyba's own configuration, state and sockets are refused unasked
//! ([`own_dirs`]). The session keeps working in the worktree, which is not on FUSE.

use crate::approve::{Answer, Approver, AskKind, AskRequest};
use crate::notify::AuditEvent;
use crate::procfs::{self, ProcId};
use crate::sandbox::{is_within, SandboxPlan};
use crate::sys;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tyba_policy::Verdict;

/// System roots: never covered (programs read them through Landlock at native speed, and a
/// write there is refused by Landlock without an ask: DESIGN.md §2a).
pub const SYSTEM_ROOTS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys",
    "/proc", "/dev", "/run", "/boot", "/var",
];

/// At most this many covered entries per session (one bind mount each). Past it,
/// [`OutsideMode::Require`] refuses the start; [`OutsideMode::Auto`] leaves out the bases that
/// do not fit ([`CoverPlan::left_out`]).
pub const MAX_COVERS: usize = 2048;

/// Whether a session covers the outside entries (`tyba run --outside-files MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutsideMode {
    /// No covers: an outside open fails with `EACCES` from Landlock, unasked.
    #[default]
    Off,
    /// Covers where the machine allows them (`/dev/fuse` opened in the sandbox's user
    /// namespace, at most [`MAX_COVERS`]); otherwise the session starts with fewer or none
    /// and says so once, on the terminal and in the audit log. `tyba run`'s default.
    Auto,
    /// Covers or no session: the start fails (exit 4) when they cannot be set up
    /// (`--outside-files require`, `--ask-outside-files`).
    Require,
}

impl OutsideMode {
    /// The mode named `s` on the command line: `auto`, `require` or `off`.
    pub fn parse(s: &str) -> Option<OutsideMode> {
        match s {
            "auto" => Some(OutsideMode::Auto),
            "require" => Some(OutsideMode::Require),
            "off" => Some(OutsideMode::Off),
            _ => None,
        }
    }
}

/// What [`notice`] and the audit log call the feature.
pub const NOTE_WHAT: &str = "outside files not asked";

/// The notice a session without (some of) its covers gives once at start, in the person's
/// words: `cause` (what is missing), what it means, and how to get the asks.
pub fn notice(cause: &str) -> String {
    format!(
        "outside files are not asked in this session: {cause}. A program of the session that opens a file beside the worktree or in your home gets \"Permission denied\" there without an ask, as it would without tyba's asks; nothing is let through. To be asked instead, let your user open /dev/fuse (distributions ship it mode 0666: sudo chmod 0666 /dev/fuse); --outside-files require stops the start when the asks cannot be set up"
    )
}

/// Says `text` (a [`notice`]) once on the session's terminal and writes it to the audit log
/// ([`Approver::note`]).
pub fn tell(approver: &dyn Approver, text: &str) {
    crate::broker::text::say(&format!("tyba: {text}"));
    approver.note(NOTE_WHAT, text);
}

/// Whether this user may open `/dev/fuse` for reading and writing (`access(2)` with the
/// effective ids): what stage 1, in the sandbox's user namespace, then does for real (the
/// namespace maps the person's own uid only, so the device's mode and owner decide alike;
/// stage 1's open stays the deciding one). `Err` says why not.
pub fn fuse_openable() -> Result<(), String> {
    nix::unistd::faccessat(
        nix::fcntl::AT_FDCWD,
        "/dev/fuse",
        nix::unistd::AccessFlags::R_OK | nix::unistd::AccessFlags::W_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    )
    .map_err(|e| format!("/dev/fuse cannot be opened ({})", e.desc()))
}

/// How deep below a base [`plan_covers`] descends towards the native paths.
const MAX_DEPTH: usize = 24;

/// How long the kernel keeps an answer about a cover's own root (the bind mounts' roots must
/// not be revalidated away) and about anything else.
const ROOT_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
const TTL: Duration = Duration::from_secs(1);

/// The resolution of every path the server opens (`openat2(2)`).
const RESOLVE: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// Why the covers cannot be set up as required ([`OutsideMode::Require`]).
#[derive(Debug, thiserror::Error)]
pub enum CoverError {
    /// More entries than [`MAX_COVERS`].
    #[error("more than {MAX_COVERS} entries outside the worktree would be covered")]
    TooMany,
    /// `/dev/fuse` cannot be opened by this user.
    #[error("{0} (it must be readable and writable by the user; distributions ship it mode 0666)")]
    NoDevice(String),
}

/// The paths the plan opens natively: the covers must be neither these, nor beneath them,
/// nor their ancestors.
fn native_paths(plan: &SandboxPlan) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    v.push(plan.worktree.clone());
    v.push(plan.tmp_dir.clone());
    v.extend(plan.read_write.iter().cloned());
    v.extend(plan.read_only.iter().cloned());
    v.extend(plan.protected.iter().cloned());
    v.extend(plan.pinned.iter().cloned());
    v.extend(plan.caches.iter().cloned());
    v.extend(plan.state_layers.iter().map(|l| l.real.clone()));
    // The shell startup files shown empty (`/dev/null` bound over them): a cover bound on
    // top would hide the blank and ask for them at every shell start.
    v.extend(plan.blanked.iter().cloned());
    v
}

/// The covers of a session ([`plan_covers`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CoverPlan {
    /// The entries to cover (absolute, real paths), in order.
    pub covers: Vec<PathBuf>,
    /// The bases whose entries did not fit in [`MAX_COVERS`] with the bases before them:
    /// none of their entries is covered (Landlock refuses them, unasked).
    pub left_out: Vec<PathBuf>,
}

/// The entries to cover: beneath each base (the worktree's parent directory, then `home`),
/// every entry that is not a symbolic link, not a native path of the plan or beneath one,
/// descending into the entries that are ancestors of native paths. A base that is `/`, a
/// system root or beneath one, or itself opened by the plan, gets none. A base whose entries
/// would take the total past [`MAX_COVERS`] gets none either and is named in
/// [`CoverPlan::left_out`]. A directory on the way that cannot be listed is skipped (its
/// entries stay as they are: Landlock refuses them, unasked).
pub fn plan_covers(plan: &SandboxPlan, home: Option<&Path>) -> CoverPlan {
    let native = native_paths(plan);
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(p) = plan.worktree.parent() {
        bases.push(p.to_path_buf());
    }
    if let Some(h) = home.and_then(|h| std::fs::canonicalize(h).ok()) {
        bases.push(h);
    }
    let bases: Vec<PathBuf> = bases
        .iter()
        .filter(|b| {
            b.is_absolute()
                && b.as_path() != Path::new("/")
                && !SYSTEM_ROOTS.iter().any(|s| is_within(b, Path::new(s)))
                && !native.iter().any(|n| is_within(b, n))
                && !bases.iter().any(|o| o != *b && is_within(b, o))
        })
        .cloned()
        .collect();
    let mut out = CoverPlan::default();
    for b in &bases {
        let mut mine = Vec::new();
        match walk(b, &native, 0, MAX_COVERS - out.covers.len(), &mut mine) {
            Ok(()) => out.covers.append(&mut mine),
            Err(CoverError::TooMany | CoverError::NoDevice(_)) => out.left_out.push(b.clone()),
        }
    }
    out.covers.dedup();
    out
}

/// What a session covers in `mode` ([`plan_covers`], after [`fuse_openable`]), and the notice
/// to give when it covers less than it would: `(covers, notice)`. Nothing is planned (no
/// listing) when the mode is off or the device cannot be opened.
///
/// # Errors
/// In [`OutsideMode::Require`] only: the device cannot be opened, or a base left out.
pub fn prepare(
    plan: &SandboxPlan,
    home: Option<&Path>,
    mode: OutsideMode,
) -> Result<(Vec<PathBuf>, Option<String>), CoverError> {
    if mode == OutsideMode::Off {
        return Ok((Vec::new(), None));
    }
    if let Err(e) = fuse_openable() {
        return match mode {
            OutsideMode::Require => Err(CoverError::NoDevice(e)),
            _ => Ok((Vec::new(), Some(notice(&e)))),
        };
    }
    let p = plan_covers(plan, home);
    if p.left_out.is_empty() {
        return Ok((p.covers, None));
    }
    if mode == OutsideMode::Require {
        return Err(CoverError::TooMany);
    }
    let names: Vec<String> = p.left_out.iter().map(|b| b.display().to_string()).collect();
    let cause = format!(
        "{} {} more entries than tyba covers (at most {MAX_COVERS} bind mounts a session), so the files in {} are not asked{}",
        names.join(" and "),
        if names.len() == 1 { "holds" } else { "hold" },
        if names.len() == 1 { "it" } else { "them" },
        if p.covers.is_empty() {
            String::new()
        } else {
            format!(" ({} other entries are)", p.covers.len())
        }
    );
    Ok((p.covers, Some(notice(&cause))))
}

fn walk(
    dir: &Path,
    native: &[PathBuf],
    depth: usize,
    budget: usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), CoverError> {
    // A directory the person cannot list is left as it is: its entries stay unreachable
    // (Landlock refuses them, unasked), as without the option. Nothing is granted by it.
    let Ok(list) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    // The entry's type from the listing itself (`d_type`; an `lstat` only where the
    // filesystem does not say), never following a link.
    let mut names: Vec<(PathBuf, std::fs::FileType)> = list
        .filter_map(|e| e.ok().and_then(|e| Some((e.path(), e.file_type().ok()?))))
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    // The native paths by this directory's entry names, read once (not every path against
    // every entry): an entry that is native itself, and one with native paths beneath it.
    let mut native_entries = std::collections::HashSet::new();
    let mut above_native = std::collections::HashSet::new();
    for n in native {
        let mut rest = match n.strip_prefix(dir) {
            Ok(r) => r.components(),
            Err(_) => continue,
        };
        match (rest.next(), rest.next()) {
            (Some(std::path::Component::Normal(name)), None) => native_entries.insert(name),
            (Some(std::path::Component::Normal(name)), Some(_)) => above_native.insert(name),
            _ => false,
        };
    }
    for (p, t) in names {
        let name = p.file_name().unwrap_or_default();
        if t.is_symlink() || native_entries.contains(name) {
            continue;
        }
        if above_native.contains(name) {
            if t.is_dir() && depth < MAX_DEPTH {
                walk(&p, native, depth + 1, budget, out)?;
            }
            continue;
        }
        if !(t.is_dir() || t.is_file()) {
            // Sockets, fifos and devices stay as they are: Landlock refuses them.
            continue;
        }
        if out.len() >= budget {
            return Err(CoverError::TooMany);
        }
        out.push(p);
    }
    Ok(())
}

/// What a request does to a path, as asked and as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Open a file for reading.
    Read,
    /// Open a file for writing (or truncate it); covers reading too.
    Write,
    /// List a directory.
    List,
    /// Create a file in a directory.
    Create,
    /// Make a directory.
    Mkdir,
    /// Remove a file or an empty directory.
    Remove,
}

impl Access {
    fn word(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::List => "list",
            Access::Create => "create",
            Access::Mkdir => "mkdir",
            Access::Remove => "remove",
        }
    }

    fn scope(self) -> &'static str {
        match self {
            Access::Read => "reading this file",
            Access::Write => "reading and writing this file",
            Access::List => "listing this directory (not its files)",
            Access::Create => "creating this file and writing it",
            Access::Mkdir => "making this directory",
            Access::Remove => "removing this entry",
        }
    }

    /// Whether a grant of `self` covers a request of `other`.
    fn covers(self, other: Access) -> bool {
        self == other
            || matches!((self, other), (Access::Write, Access::Read))
            || matches!(
                (self, other),
                (Access::Create, Access::Read | Access::Write)
            )
    }

    /// Whether it changes the filesystem (a change under a system path is blocked).
    fn changes(self) -> bool {
        !matches!(self, Access::Read | Access::List)
    }
}

/// The most characters of one operand an ask's headline shows ([`Op::shown`]): two fit
/// in the headline's bound (`crate::broker::text::ACTION_MAX_CHARS`) with the words
/// around them.
const OPERAND_SHOWN: usize = 80;

/// `p` for a headline: as it is when short, else `…` and its last characters (the name
/// and the directories nearest it, which say what it is).
fn short(p: &Path) -> String {
    let s = p.display().to_string();
    let n = s.chars().count();
    if n <= OPERAND_SHOWN {
        return s;
    }
    let tail: String = s.chars().skip(n - (OPERAND_SHOWN - 1)).collect();
    format!("…{tail}")
}

/// What a request asks to do: an access to one path, or an operation that names two. Every
/// path is real (as the supervisor sees it); the server does the operation relative to the
/// directory fds it holds, following no link.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    /// `access` to the path.
    One(PathBuf, Access),
    /// `rename(2)` of `from` to `to`, within one cover; `exchange`: the two swap
    /// (`RENAME_EXCHANGE`); `replaces`: `to` existed when asked (it is replaced).
    Rename {
        from: PathBuf,
        to: PathBuf,
        exchange: bool,
        replaces: bool,
    },
    /// `link(2)`: `at` becomes a second name of the existing file `existing`.
    Link { existing: PathBuf, at: PathBuf },
    /// `symlink(2)`: `at` becomes a symbolic link whose target text is `text`. tyba never
    /// follows it; whoever opens through it is judged where it leads.
    Symlink { at: PathBuf, text: PathBuf },
}

impl Op {
    fn word(&self) -> &'static str {
        match self {
            Op::One(_, a) => a.word(),
            Op::Rename { .. } => "rename",
            Op::Link { .. } => "link",
            Op::Symlink { .. } => "symlink",
        }
    }

    /// The operands as the ask's headline shows them: each of two cut to [`OPERAND_SHOWN`]
    /// characters (its end kept), so both fit the headline's bound.
    fn shown(&self) -> String {
        self.text(short)
    }

    /// The operands in full (the audit log, the ask's reasons).
    fn full(&self) -> String {
        self.text(|p| p.display().to_string())
    }

    /// For an operation naming two paths: each named in full, one reason each (the ask's
    /// details), so the person sees the destination whatever the source's length.
    fn operands(&self) -> Vec<String> {
        let q = |p: &Path| p.display().to_string();
        match self {
            Op::One(..) => Vec::new(),
            Op::Rename {
                from,
                to,
                exchange: true,
                ..
            } => vec![
                format!("the first of the two swapped: {}", q(from)),
                format!("the second of the two swapped: {}", q(to)),
            ],
            Op::Rename { from, to, .. } => vec![
                format!("renamed: {}", q(from)),
                format!("its new name: {}", q(to)),
            ],
            Op::Link { existing, at } => vec![
                format!("the existing file: {}", q(existing)),
                format!("its new second name: {}", q(at)),
            ],
            Op::Symlink { at, text } => vec![
                format!("the new symbolic link: {}", q(at)),
                format!("what it points to: {}", q(text)),
            ],
        }
    }

    fn text(&self, show: impl Fn(&Path) -> String) -> String {
        match self {
            // One operand: the headline's own bound cuts it, if ever.
            Op::One(p, _) => p.display().to_string(),
            Op::Rename {
                from,
                to,
                exchange: true,
                ..
            } => format!("{} and {} (they swap names)", show(from), show(to)),
            Op::Rename {
                from, to, replaces, ..
            } => format!(
                "{} to {}{}",
                show(from),
                show(to),
                if *replaces {
                    " (replacing the existing one)"
                } else {
                    ""
                }
            ),
            Op::Link { existing, at } => {
                format!(
                    "{} (a second name of the existing file {})",
                    show(at),
                    show(existing)
                )
            }
            Op::Symlink { at, text } => format!("{} -> {}", show(at), show(text)),
        }
    }

    fn scope(&self) -> &'static str {
        match self {
            Op::One(_, a) => a.scope(),
            Op::Rename { .. } => "this rename, of this entry to this name",
            Op::Link { .. } => "this hard link (not reading or writing the file)",
            Op::Symlink { .. } => {
                "making this symbolic link (what is opened through it is asked where it leads)"
            }
        }
    }

    /// Whether it changes the filesystem.
    fn changes(&self) -> bool {
        match self {
            Op::One(_, a) => a.changes(),
            _ => true,
        }
    }

    /// What it does to each path it touches ([`Touch`]): the grants judge by it. A symbolic
    /// link's text is no path it touches.
    fn touches(&self) -> Vec<(&Path, Touch)> {
        match self {
            Op::One(p, Access::Read | Access::List) => vec![(p, Touch::Read)],
            Op::One(p, Access::Remove) => vec![(p, Touch::Name)],
            Op::One(p, Access::Write | Access::Create | Access::Mkdir) => vec![(p, Touch::Content)],
            Op::Rename { from, to, .. } => vec![(from, Touch::Name), (to, Touch::Name)],
            Op::Link { existing, at } => vec![(existing, Touch::Read), (at, Touch::Name)],
            Op::Symlink { at, .. } => vec![(at, Touch::Name)],
        }
    }

    /// The paths it touches: changed (`true`) or only read (`false`, [`Op::touches`]).
    fn touched(&self) -> Vec<(&Path, bool)> {
        self.touches()
            .into_iter()
            .map(|(p, t)| (p, t != Touch::Read))
            .collect()
    }

    /// The paths whose credential rule makes the ask sensitive: every operand, a symbolic
    /// link's text too (the worse colour of them all).
    fn named(&self) -> Vec<&Path> {
        match self {
            Op::Symlink { at, text } => vec![at, text],
            _ => self.touched().into_iter().map(|(p, _)| p).collect(),
        }
    }

    /// The real paths it names, as an ask carries them (`AskKind::File::real`).
    fn real_paths(&self) -> Vec<PathBuf> {
        match self {
            Op::One(p, _) => vec![p.clone()],
            Op::Rename { from, to, .. } => vec![from.clone(), to.clone()],
            Op::Link { existing, at } => vec![existing.clone(), at.clone()],
            Op::Symlink { at, .. } => vec![at.clone()],
        }
    }

    /// Whether a grant made for `self` covers a request for `other`.
    fn covers(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::One(p, a), Op::One(q, b)) => p == q && a.covers(*b),
            (
                Op::Rename {
                    from, to, exchange, ..
                },
                Op::Rename {
                    from: f2,
                    to: t2,
                    exchange: x2,
                    ..
                },
            ) => from == f2 && to == t2 && exchange == x2,
            (a, b) => a == b,
        }
    }
}

/// One approval: `op` for the process `root` and, unless `agent_only`, its descendants, while
/// it lives and keeps the role it had when asked. `agent_only` (the asker was the agent's own
/// runtime): `root` and the processes under it that are the agent too, never the commands it
/// starts.
#[derive(Debug, Clone)]
struct Grant {
    root: ProcId,
    agent_only: bool,
    op: Op,
    /// `root`'s role in the exec model when the grant was made (`None` without a session
    /// link). An exec that changes it (the agent's `exec python3 …` in place, a command's exec
    /// of another command: [`crate::exec::same_role`]) ends the grant: its pid and identity
    /// stay, but it is no longer whom the ask named.
    role: Option<crate::exec::Role>,
}

/// Whether process `pid` is `root` or one of its descendants (parent links in the
/// supervisor's `/proc`; the root's identity checked, so a reused pid is not it).
fn in_tree(pid: u32, root: ProcId) -> bool {
    let mut p = pid;
    for _ in 0..256 {
        let Ok((ppid, start)) = procfs::stat(p) else {
            return false;
        };
        if p == root.pid {
            return start == root.start;
        }
        if ppid <= 1 || ppid == p {
            return false;
        }
        p = ppid;
    }
    false
}

/// One covered entry: the directory that holds it (opened at start) and its name.
#[derive(Debug)]
struct CoverRoot {
    /// Shared by the covers of one directory (opened once).
    parent: Arc<OwnedFd>,
    parent_path: PathBuf,
}

/// An inode the kernel knows: which cover, and the path relative to that cover's parent
/// directory (its first component is the covered entry's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    cover: usize,
    rel: PathBuf,
}

/// An approved command's runner: its keeper's identity and the line's grants.
type RunnerGrants = (u64, Vec<RunnerGrant>);

/// What an approved line lets its command do to one path and what is beneath it, without
/// asking again (`crate::runner::Grant`, which makes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunnerGrant {
    /// The path (real).
    pub path: PathBuf,
    /// The line writes it: every operation.
    pub write: bool,
    /// The line removes, renames (either name) or links it: those operations on its names,
    /// never writing what a file holds, creating a file or making a directory.
    pub change: bool,
    /// Names beneath `path` that something from elsewhere was linked or renamed to since the
    /// line was approved: not covered (what was there when the line was asked is what it
    /// was approved for; a file brought in from outside the grant was never shown).
    pub arrived: Vec<PathBuf>,
    /// The line writes `path`, an existing regular file when it was approved or a new file,
    /// that its program saves by its own rule (`crate::runner::Grant::save`: an allowlist,
    /// `sed -i`, `install`, `cp`, `git config`): the command may save it that way without
    /// asking again, through a new file made
    /// beside it (its temporary copy, [`RunnerGrant::save_of`]) written, its mode and owner set
    /// and renamed over it, or by removing it and making it anew ([`Inner::own_file`]).
    pub file: bool,
    /// A new file the command made beside the `file` grant of `of`, with its identity: the
    /// command's own, to write and rename over `of`. One still there when the command ends
    /// is removed (an approval to write a file does not cover leaving new ones beside it).
    pub save_of: Option<SaveOf>,
    /// The line changes the mode or owner of `path` (`crate::runner::Grant::meta`): the
    /// metadata handler lets the command change them, and the times, on `path` and, with
    /// `meta_tree`, beneath it, while this grant holds ([`OutsideFs::runner_lets_meta`]).
    pub meta: bool,
    /// With `meta`: recursively (`chmod -R`).
    pub meta_tree: bool,
    /// The grant holds the name for a regular file only: what the command saves or makes
    /// anew there ([`Inner::saved_over`]), never a directory, a link or a symbolic link
    /// (review 13's r13-03).
    pub regular_only: bool,
    /// The line makes `path` as a directory, and the missing ones above it below this
    /// ancestor (`crate::runner::Grant::new_dirs`): the command may make each directory
    /// strictly beneath it down to `path`, and list those it made itself (`mkdir -p` opens
    /// each it made to go on from there: [`Inner::made_on_the_way`]); nothing else on the
    /// way, and at `path` a directory only (no file, link or symbolic link, no rename).
    pub dirs_from: Option<PathBuf>,
}

/// A command's temporary copy of a file it saves ([`RunnerGrant::save_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SaveOf {
    /// The file it saves (real).
    pub of: PathBuf,
    /// The copy's device and inode when made.
    pub id: (u64, u64),
}

impl RunnerGrant {
    /// A grant to write `path` (and what is beneath it), nothing more.
    fn writing(path: &Path) -> RunnerGrant {
        RunnerGrant {
            path: path.to_path_buf(),
            write: true,
            change: false,
            arrived: Vec::new(),
            file: false,
            save_of: None,
            meta: false,
            meta_tree: false,
            regular_only: false,
            dirs_from: None,
        }
    }

    /// Whether `path` is a directory the grant lets the command make and list on the way to
    /// its own ([`RunnerGrant::dirs_from`]): strictly beneath that ancestor, at or above the
    /// grant's path, and not beneath a name that arrived since.
    fn on_the_way(&self, path: &Path) -> bool {
        self.way_holds(path) && !self.arrived.iter().any(|a| is_within(path, a))
    }

    /// Whether `path` is on the way to the grant's path from [`RunnerGrant::dirs_from`]
    /// (strictly beneath it, at or above the path).
    fn way_holds(&self, path: &Path) -> bool {
        self.dirs_from
            .as_deref()
            .is_some_and(|from| path != from && is_within(path, from))
            && is_within(&self.path, path)
    }

    /// Whether the grant reaches `path`: its path and beneath, and the directories on its way.
    fn holds(&self, path: &Path) -> bool {
        is_within(path, &self.path) || self.way_holds(path)
    }

    /// Whether the grant lets the command do `touch` to `path`.
    fn lets(&self, path: &Path, touch: Touch) -> bool {
        is_within(path, &self.path)
            && !self.arrived.iter().any(|a| is_within(path, a))
            && match touch {
                Touch::Read => true,
                Touch::Name => self.write || self.change,
                Touch::Content => self.write,
            }
    }
}

/// What an operation does to one of the paths it names, as an approved line's grants judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Touch {
    /// Reads it or lists it.
    Read,
    /// Removes, renames or links the name (or makes it a symbolic link).
    Name,
    /// Writes what it holds, or creates it (a file, a directory).
    Content,
}

/// One entry of a listed directory: inode, type, name.
type DirEntry = (u64, FileType, OsString);

#[derive(Debug, Default)]
struct Nodes {
    by_ino: HashMap<u64, Node>,
    by_node: HashMap<Node, u64>,
    next: u64,
}

impl Nodes {
    /// After `rename(2)` of `from` to `to` in `cover` (`exchange`: swapped): the inodes the
    /// kernel knows keep their numbers and take their new paths, the entries beneath a moved
    /// directory too; what `to` was (replaced) is forgotten.
    fn renamed(&mut self, cover: usize, from: &Path, to: &Path, exchange: bool) {
        let moved = |rel: &Path, a: &Path, b: &Path| -> Option<PathBuf> {
            rel.strip_prefix(a).ok().map(|rest| {
                if rest.as_os_str().is_empty() {
                    b.to_path_buf()
                } else {
                    b.join(rest)
                }
            })
        };
        let mut changed = Vec::new();
        for (ino, n) in &self.by_ino {
            if n.cover != cover {
                continue;
            }
            let new = match moved(&n.rel, from, to) {
                Some(r) => Some(r),
                None if exchange => moved(&n.rel, to, from),
                None if n.rel.starts_with(to) => {
                    // Replaced: the old `to` (and, were it a directory, what was under it)
                    // is gone.
                    changed.push((*ino, None));
                    continue;
                }
                None => None,
            };
            if let Some(r) = new {
                changed.push((*ino, Some(r)));
            }
        }
        for (ino, _) in &changed {
            if let Some(old) = self.by_ino.remove(ino) {
                self.by_node.remove(&old);
            }
        }
        for (ino, rel) in changed {
            if let Some(rel) = rel {
                let n = Node { cover, rel };
                self.by_node.insert(n.clone(), ino);
                self.by_ino.insert(ino, n);
            }
        }
    }

    fn ino(&mut self, n: Node) -> u64 {
        if let Some(i) = self.by_node.get(&n) {
            return *i;
        }
        self.next += 1;
        let i = self.next;
        self.by_ino.insert(i, n.clone());
        self.by_node.insert(n, i);
        i
    }
}

struct Inner {
    covers: Vec<CoverRoot>,
    /// The covered entries' names, by cover index (the children of the filesystem's root).
    names: Vec<OsString>,
    nodes: Mutex<Nodes>,
    files: Mutex<HashMap<u64, (Arc<File>, bool)>>,
    dirs: Mutex<HashMap<u64, Vec<DirEntry>>>,
    /// The attributes of the root's listing, by its handle, as stated once for it
    /// ([`Inner::root_listing`]): its READDIRPLUS answers with them.
    root_attrs: Mutex<HashMap<u64, Vec<FileAttr>>>,
    next_fh: AtomicU64,
    grants: Mutex<Vec<Grant>>,
    /// The approved command lines running in domains of their own (`crate::runner`), by
    /// their keeper's pid in the sandbox's PID namespace: `(identity, [(path, write)])`. Their
    /// grants were shown in the ask that approved the line, so the opens they cover are not
    /// asked again.
    runners: Mutex<HashMap<u32, RunnerGrants>>,
    /// The files and directories each approved command (by its key in `runners`) made itself
    /// through the server, by identity (device, inode): their mode, owner and times are the
    /// command's to set ([`OutsideFs::runner_lets_meta`]).
    made: Mutex<HashMap<u32, HashSet<(u64, u64)>>>,
    approver: Arc<dyn Approver>,
    /// What the notify loop knows of the session's processes, set once it runs
    /// ([`OutsideFs::attach`]). Until then every asker counts as the agent's interpreter:
    /// asked, its grant reaching the least.
    session: std::sync::OnceLock<Box<dyn SessionLink>>,
    /// The directories the agent writes (its worktree, temp dir, `read_write` roots), set
    /// once ([`OutsideFs::set_agent_writable`]): no saver runs code from them.
    agent_writable: std::sync::OnceLock<Vec<PathBuf>>,
    /// The history files of shells, REPLs and pagers (the policy's
    /// `filesystem.history_files`) and the home (real) their `~/` stands for: refused
    /// quietly to every process, never asked, never granted ([`HistoryFiles`]).
    history: HistoryFiles,
    /// The supervisor's own process: its threads act for decisions already made (a `chmod`
    /// the metadata handler was approved for), so their requests pass.
    me: u32,
    uid: u32,
    gid: u32,
    /// tyba's own directories (its configuration, state and sockets: [`own_dirs`]), real
    /// paths: never reachable from the sandbox, not even by asking.
    own: Vec<PathBuf>,
    /// The same directories by identity (device, inode), taken at start: reached under
    /// another name (an ancestor renamed), they are still tyba's own.
    own_ids: Vec<FileId>,
    /// The directories holding them (their ancestors), by identity: never renamed or
    /// removed from the sandbox (that would give tyba's own directories another name).
    own_ancestors: Vec<FileId>,
    /// The run directories of the user's tyba sessions ([`RunDirs`]).
    run: RunDirs,
    /// The person's credential locations in the home by every name they are reached by
    /// ([`credential_places`]): `(real path, the home's name for it)`.
    credentials: Vec<(PathBuf, String)>,
    /// The requests being served, by their unique id ([`Served`]).
    flights: Mutex<HashMap<u64, Flight>>,
    /// Set when the connection was aborted for a late request: nothing more is asked.
    aborted: std::sync::atomic::AtomicBool,
    watchdog: Watchdog,
    /// Test builds only (`fault-points`): a lookup of an entry with this name never answers.
    #[cfg(feature = "fault-points")]
    hang: Option<OsString>,
}

/// Who makes a request, as the notify loop knows the process (`crate::exec::Role`): what an
/// outside operation of it gets (docs/sandbox.md, "Outside files asked at the kernel level").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// The agent program's own runtime, resolved to its installation (Claude Code, Codex,
    /// Gemini CLI, aider: `crate::agent::AgentInstall::has_installation`): the person's
    /// program, configured by them, given its own state directories. Its operations outside
    /// them are not the model's commands: refused quietly unless an approval covers them (the
    /// person's answer to the agent hook's ask of the same file, [`Approver::answered`]).
    AgentProgram,
    /// tyba's own hook, which the agent runs around its tool calls (`tyba hook …`, vouched
    /// for by the supervisor: "tyba's own hook"): tyba's code, not the model's; refused
    /// quietly.
    OwnHook,
    /// A shell or interpreter named as the agent (`tyba run -- bash`): the model's own
    /// interpreter, whose builtins' file access is the model's; asked, its grant reaching the
    /// agent only.
    AgentInterpreter,
    /// A command the agent started (a script, an interpreter, a build), or a process nothing
    /// is known of: asked, its grant reaching it and the processes it starts.
    Command,
}

impl Asker {
    /// Whether it is the agent itself (a grant to it reaches no command it starts).
    fn is_agent(self) -> bool {
        matches!(self, Asker::AgentProgram | Asker::AgentInterpreter)
    }
}

/// What the server learns from the notify loop once it runs ([`OutsideFs::attach`]).
pub(crate) trait SessionLink: Send + Sync {
    /// Who process `pid` (in the supervisor's PID namespace) is now.
    fn asker(&self, pid: u32) -> Asker;
    /// The role process `pid` has now in the exec model (`None` when it cannot be read): a
    /// grant holds only while its process keeps the role it was granted in.
    fn role(&self, pid: u32) -> Option<crate::exec::Role>;
    /// Logs a quiet refusal as the session's own (the audit log, and the end summary's
    /// "refused quietly" count).
    fn log_quiet(&self, event: AuditEvent);
}

/// The history and state files shells, REPLs and pagers write by themselves (the policy's
/// `filesystem.history_files`, `tyba_policy::config::is_history_file`), with the home their
/// `~/` stands for (real, canonical: the paths the server sees are real).
#[derive(Debug, Clone, Default)]
pub struct HistoryFiles {
    patterns: Vec<String>,
    home: Option<PathBuf>,
}

impl HistoryFiles {
    /// The policy's `patterns` for the person's `home` (resolved here).
    pub fn new(patterns: &[String], home: Option<&Path>) -> HistoryFiles {
        HistoryFiles {
            patterns: patterns.to_vec(),
            home: home.map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf())),
        }
    }

    /// Whether `path` (real) is one of them.
    pub fn matches(&self, path: &Path) -> bool {
        tyba_policy::config::is_history_file(&self.patterns, self.home.as_deref(), path)
    }
}

/// The FUSE filesystem serving the covered entries ([`fuser::Filesystem`]). Its root is a
/// directory whose children `0`, `1`, … are the covers, in the order given to [`OutsideFs::new`];
/// stage 2 binds child `i` over cover `i`.
#[derive(Clone)]
pub struct OutsideFs(Arc<Inner>);

impl std::fmt::Debug for OutsideFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutsideFs")
            .field("covers", &self.0.covers.len())
            .finish()
    }
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn errno(e: &io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec.clamp(0, 999_999_999) as u32)
    } else {
        UNIX_EPOCH
    }
}

fn kind_of(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn attr_of(ino: u64, st: &nix::sys::stat::FileStat) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size.max(0) as u64,
        blocks: st.st_blocks.max(0) as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: time(st.st_ctime, st.st_ctime_nsec),
        kind: kind_of(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize.max(512) as u32,
        flags: 0,
    }
}

/// tyba's own directories, as real paths (the longest existing ancestor resolved): its
/// configuration (the person's policy and the approvals of repositories' policies), its state
/// (audit logs, stand-ins, layers) and its sockets (`crate::broker::paths`). Before the
/// outside files, Landlock refused them unasked; an approval of them could let the agent
/// approve its own policy or answer its own asks, so the server refuses them unasked too.
/// The symbolic links on the way to them are listed too ([`links_on_the_way`]): replacing or
/// moving one moves tyba's configuration.
pub(crate) fn own_dirs() -> Vec<PathBuf> {
    use crate::broker::paths;
    let mut out = Vec::new();
    for d in paths::own_dirs_named() {
        // And where a symbolic link on the way that leads nowhere yet would put it
        // (`~/.config -> dotfiles/config` before the dotfiles are cloned: review 21's r21-01),
        // and the links on the way themselves (review 24's r24-02: one re-pointed moves them).
        let mut links = Vec::new();
        let through = through_links_noting(&d, &mut links);
        for p in [real_path(&d), through].into_iter().chain(links) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// tyba's own directories where they are now ([`through_links`] of each as named, the names
/// read once per process), and the symbolic links on the way to them
/// ([`links_on_the_way`]): what a link laid since the session started changes. Called on
/// each change the server judges, so it resolves links only (no `canonicalize`).
fn own_dirs_now() -> Vec<PathBuf> {
    static NAMED: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    let mut out = Vec::new();
    for d in NAMED.get_or_init(crate::broker::paths::own_dirs_named) {
        let mut links = Vec::new();
        let through = through_links_noting(d, &mut links);
        out.push(through);
        out.extend(links);
    }
    out
}

/// Where `p` (absolute) is, or would be once what is missing on the way is made: each
/// symbolic link on the way followed, one that leads nowhere yet too (its text taken as the
/// path it will be), `..` after a missing name taken lexically. At most 40 links are followed
/// (the kernel's limit); past them, or for a path that is not absolute, `p` as it is.
pub(crate) fn through_links(p: &Path) -> PathBuf {
    through_links_noting(p, &mut Vec::new())
}

/// The symbolic links [`through_links`] follows on the way to `p`, each where it lies (its
/// directory resolved, then its name): they decide where `p` is as much as its last
/// directory does, so what holds tyba's own places holds them too (review 24's r24-01: a
/// link on the way, re-pointed, moved tyba's policy into files the agent wrote).
pub(crate) fn links_on_the_way(p: &Path) -> Vec<PathBuf> {
    let mut links = Vec::new();
    through_links_noting(p, &mut links);
    links
}

fn through_links_noting(p: &Path, links: &mut Vec<PathBuf>) -> PathBuf {
    use std::path::Component;
    let mut todo: Vec<std::ffi::OsString> = Vec::new();
    let push_rev = |todo: &mut Vec<std::ffi::OsString>, path: &Path| {
        let parts: Vec<std::ffi::OsString> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some(std::ffi::OsString::from("..")),
                _ => None,
            })
            .collect();
        todo.extend(parts.into_iter().rev());
    };
    if !p.is_absolute() {
        return p.to_path_buf();
    }
    push_rev(&mut todo, p);
    let mut cur = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = todo.pop() {
        if name == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if !links.contains(&next) {
                    links.push(next.clone());
                }
                let Ok(text) = std::fs::read_link(&next) else {
                    return p.to_path_buf();
                };
                if hops > 40 {
                    return p.to_path_buf();
                }
                if text.is_absolute() {
                    cur = PathBuf::from("/");
                }
                push_rev(&mut todo, &text);
            }
            _ => cur = next,
        }
    }
    cur
}

/// The run directories of tyba's sessions (`tyba-UID-ID`, `tyba-UID-ID.state`,
/// `tyba-UID-ID.profile`: the temp dirs, the agents' state copies, the login profile), in the
/// session's temp dir's directory and on the memory filesystem beside it
/// (`crate::state_layer::beside_session`): tyba's own, never reached from the sandbox. A
/// session worked in beside them (`--here` in `/tmp/x`) would otherwise cover them.
#[derive(Debug, Default, Clone)]
struct RunDirs {
    /// The directories that hold them.
    places: Vec<PathBuf>,
    /// `tyba-UID-`: the names of the user's sessions' run dirs start with it.
    prefix: String,
    /// This session's own ones (real paths).
    this_session: Vec<PathBuf>,
}

impl RunDirs {
    fn of(tmp_dir: Option<&Path>, uid: u32) -> RunDirs {
        let Some(tmp) = tmp_dir else {
            return RunDirs::default();
        };
        let mut places = Vec::new();
        let mut this_session = vec![real_path(tmp)];
        for suffix in [".state", ".profile"] {
            this_session.push(real_path(&crate::state_layer::beside_session(tmp, suffix)));
        }
        for p in &this_session {
            if let Some(d) = p.parent() {
                if !places.iter().any(|x: &PathBuf| x == d) {
                    places.push(d.to_path_buf());
                }
            }
        }
        RunDirs {
            places,
            prefix: format!("tyba-{uid}-"),
            this_session,
        }
    }

    /// Whether `p` (real) is one of them or beneath one.
    fn holds(&self, p: &Path) -> bool {
        !self.prefix.is_empty()
            && self.places.iter().any(|d| {
                p.strip_prefix(d)
                    .ok()
                    .and_then(|r| r.components().next())
                    .is_some_and(|c| {
                        c.as_os_str()
                            .to_str()
                            .is_some_and(|n| n.starts_with(&self.prefix))
                    })
            })
    }
}

/// A file's identity: (device, inode).
type FileId = (u64, u64);

/// The identities of `dirs` (those that exist) and of the directories holding them, up to
/// `/` (taken at start, [`Inner::own_ids`], [`Inner::own_ancestors`]).
fn identities(dirs: &[PathBuf]) -> (Vec<FileId>, Vec<FileId>) {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    let own = dirs.iter().filter_map(|d| id(d)).collect();
    let mut above: Vec<FileId> = Vec::new();
    for d in dirs {
        for a in d.ancestors().skip(1) {
            if let Some(i) = id(a) {
                if !above.contains(&i) {
                    above.push(i);
                }
            }
        }
    }
    (own, above)
}

/// The credential locations of a home (DESIGN.md §4): the directories and files the
/// classifier calls credentials by name (`tyba_policy::credential_in_path`: `.ssh`, `.aws`,
/// `.gnupg`, `.kube`, `.docker`, `.netrc`, `.git-credentials`, `.npmrc`, `.pypirc`) and the
/// command-line tools' token stores (`.config/gh`, `.config/gcloud`, `.azure`,
/// `.password-store`).
const HOME_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gh",
    ".config/gcloud",
    ".azure",
    ".password-store",
];

/// The credential locations of `home` ([`HOME_CREDENTIALS`]) as real paths, resolved at
/// start: a file is a credential by every name it is reached by, so `~/.ssh` linked to
/// `~/dotfiles/ssh` makes `~/dotfiles/ssh/*` credentials too (the paths the server sees are
/// real, where the name `.ssh` no longer appears). `(real path, ~/NAME)` for each that
/// exists.
fn credential_places(home: Option<&Path>) -> Vec<(PathBuf, String)> {
    let Some(home) = home else {
        return Vec::new();
    };
    HOME_CREDENTIALS
        .iter()
        .filter_map(|n| {
            let real = std::fs::canonicalize(home.join(n)).ok()?;
            Some((real, format!("~/{n}")))
        })
        .collect()
}

/// `p` with its longest existing ancestor resolved (`canonicalize(3)`), the rest as written.
fn real_path(p: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            return rest.iter().rev().fold(c, |acc: PathBuf, n| acc.join(n));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                cur = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// [`REQUEST_BOUND`]; in test builds (`fault-points`) `TYBA_FAULT_OUTSIDE_BOUND_MS` may set
/// it shorter.
fn request_bound() -> Duration {
    #[cfg(feature = "fault-points")]
    if let Some(ms) = std::env::var("TYBA_FAULT_OUTSIDE_BOUND_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return Duration::from_millis(ms);
    }
    REQUEST_BOUND
}

impl OutsideFs {
    /// A server for `covers` (absolute paths from [`plan_covers`]), asking through
    /// `approver`, refusing `history` quietly; `uid`/`gid` own the filesystem's own root.
    /// `tmp_dir` is the session's temp dir: the run directories of tyba's sessions beside it
    /// ([`RunDirs`]) are tyba's own, like [`own_dirs`].
    ///
    /// # Errors
    /// When the directory holding a cover cannot be opened.
    pub fn new(
        covers: &[PathBuf],
        approver: Arc<dyn Approver>,
        history: HistoryFiles,
        uid: u32,
        gid: u32,
        tmp_dir: Option<&Path>,
    ) -> io::Result<OutsideFs> {
        let mut own = own_dirs();
        let run = RunDirs::of(tmp_dir, uid);
        own.extend(run.this_session.iter().cloned());
        let (own_ids, own_ancestors) = identities(&own);
        let credentials = credential_places(history.home.as_deref());
        let mut roots = Vec::new();
        let mut names = Vec::new();
        let mut opened: HashMap<&Path, Arc<OwnedFd>> = HashMap::new();
        for c in covers {
            let (Some(parent), Some(name)) = (c.parent(), c.file_name()) else {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            };
            let fd = match opened.get(parent) {
                Some(fd) => Arc::clone(fd),
                None => {
                    let fd = Arc::new(
                        nix::fcntl::open(
                            parent,
                            nix::fcntl::OFlag::O_PATH
                                | nix::fcntl::OFlag::O_DIRECTORY
                                | nix::fcntl::OFlag::O_CLOEXEC,
                            nix::sys::stat::Mode::empty(),
                        )
                        .map_err(io::Error::from)?,
                    );
                    opened.insert(parent, Arc::clone(&fd));
                    fd
                }
            };
            roots.push(CoverRoot {
                parent: fd,
                parent_path: parent.to_path_buf(),
            });
            names.push(name.to_os_string());
        }
        Ok(OutsideFs(Arc::new(Inner {
            covers: roots,
            names,
            nodes: Mutex::new(Nodes {
                next: 1,
                ..Nodes::default()
            }),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            root_attrs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            grants: Mutex::new(Vec::new()),
            runners: Mutex::new(HashMap::new()),
            made: Mutex::new(HashMap::new()),
            approver,
            session: std::sync::OnceLock::new(),
            agent_writable: std::sync::OnceLock::new(),
            history,
            me: std::process::id(),
            uid,
            gid,
            own_ids,
            own_ancestors,
            run,
            credentials,
            own,
            flights: Mutex::new(HashMap::new()),
            aborted: std::sync::atomic::AtomicBool::new(false),
            watchdog: Watchdog {
                bound: request_bound(),
                dev: Mutex::new(None),
            },
            #[cfg(feature = "fault-points")]
            hang: std::env::var_os("TYBA_FAULT_OUTSIDE_HANG"),
        })))
    }
}

impl OutsideFs {
    /// An approved command's runner started: its keeper is `ns_pid` (sandbox PID namespace)
    /// with identity `start` ([`procfs::Stat::start`]), and its line was approved with
    /// `grants` (a directory grants what is beneath it, as its Landlock rule does; a file
    /// that line creates is granted as that one name, never its directory:
    /// `crate::runner::Grant::new_file`).
    pub(crate) fn runner_started(&self, ns_pid: u32, start: u64, grants: Vec<RunnerGrant>) {
        if let Ok(mut r) = self.0.runners.lock() {
            r.insert(ns_pid, (start, grants));
        }
        if let Ok(mut m) = self.0.made.lock() {
            m.remove(&ns_pid);
        }
    }

    /// Tells the server who the session's processes are and where its quiet refusals are
    /// logged ([`SessionLink`]): a grant to the agent reaches the agent only, never the
    /// commands it starts, and the agent program's own requests are refused quietly. Set
    /// once; later calls change nothing.
    pub(crate) fn attach(&self, session: Box<dyn SessionLink>) {
        let _ = self.0.session.set(session);
    }

    /// The directories the agent writes (real paths: its worktree, temp dir and `read_write`
    /// roots), from which no process that saves a file by its program's rule
    /// ([`RunnerGrant::file`]) may run code. Until set, none saves that way. Set once; later
    /// calls change nothing.
    pub(crate) fn set_agent_writable(&self, roots: Vec<PathBuf>) {
        let _ = self.0.agent_writable.set(roots);
    }

    /// Whether thread `tid` runs under an approved command that may change the mode and owner
    /// (or, with `times` only, the times) of `path` (real), as the grants the server keeps
    /// for it now say: its line changes that path's mode or owner (beneath it too when
    /// recursive, [`RunnerGrant::meta`]); for the times, its line writes it; and whatever the
    /// command made itself through the server, by identity (a temporary copy of a file it
    /// saves, the file it writes made anew, what it makes in a directory it writes). These
    /// grants end when their name changes and leave out what arrived beneath them since
    /// ([`Inner::names_changed`]): a secret linked or renamed there is not the line's to
    /// change (review 12's r12-02).
    /// What the command made itself it may not open to others' writing unasked
    /// (`opens_to_others`: a mode with group or other write).
    pub(crate) fn runner_lets_meta(
        &self,
        tid: u32,
        path: &Path,
        times: bool,
        opens_to_others: bool,
    ) -> bool {
        let granted = self
            .0
            .with_runner(tid, |_, grants| grants_let_meta(grants, path, times))
            .unwrap_or(false);
        granted || (!opens_to_others && self.0.runner_made(tid, path))
    }

    /// Whether `path` (real) is tyba's own configuration, state, sockets or a session's run
    /// directory, or beneath one (by path, and by identity on the way: [`Inner::is_own`]).
    pub(crate) fn is_tybas_own(&self, path: &Path) -> bool {
        self.0.is_own(&Op::One(path.to_path_buf(), Access::Write))
    }

    /// Whether `path` (real) is tyba's own ([`OutsideFs::is_tybas_own`]) or a directory that
    /// holds some of it further down: its configuration, state and sockets, this user's
    /// sessions' run directories. A Landlock rule on such a directory would reach them.
    pub(crate) fn reaches_tybas_own(&self, path: &Path) -> bool {
        // Where they are now too: a link laid since the session started (review 22's r22-01;
        // beneath them, `is_tybas_own` takes that too).
        let now = own_dirs_now();
        self.is_tybas_own(path)
            || self.0.own.iter().chain(&now).any(|d| is_within(d, path))
            || self.0.run.places.iter().any(|d| is_within(d, path))
    }

    /// Whether the server serves `path` (real): it is a covered entry or beneath one, so
    /// every request on it reaches the server, which decides.
    pub(crate) fn serves(&self, path: &Path) -> bool {
        self.0
            .covers
            .iter()
            .zip(&self.0.names)
            .any(|(c, n)| is_within(path, &c.parent_path.join(n)))
    }

    /// The runner `ns_pid` with identity `start` ended. A temporary copy it made of a file
    /// it saves ([`RunnerGrant::save_of`]) and left is removed when it is still that very
    /// file, and logged: an approval to write a file does not cover leaving new ones beside
    /// it (`sed -i 's/a/b/w ../O/new'`: the ask said "read-write ../O/f" only).
    pub(crate) fn runner_ended(&self, ns_pid: u32, start: u64) {
        let ended = match self.0.runners.lock() {
            Ok(mut r) if r.get(&ns_pid).map(|(s, _)| *s) == Some(start) => r.remove(&ns_pid),
            _ => None,
        };
        if ended.is_some() {
            if let Ok(mut m) = self.0.made.lock() {
                m.remove(&ns_pid);
            }
        }
        for g in ended.map(|(_, g)| g).unwrap_or_default() {
            if let Some(save) = &g.save_of {
                self.0.remove_left_save(&g.path, save);
            }
        }
    }
}

impl Inner {
    /// Removes `path`, a temporary copy of `save.of` an approved command made and left, when
    /// it is still that file (same device and inode, no link followed to its directory's
    /// entry), and notes it in the audit log.
    fn remove_left_save(&self, path: &Path, save: &SaveOf) {
        use std::os::unix::fs::MetadataExt;
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let Ok(d) = crate::dirfd::DirFd::open(dir) else {
            return;
        };
        let same = d
            .meta(name)
            .is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == save.id);
        if same && d.unlink(name).is_ok() {
            self.approver.note(
                &format!("removed {}", path.display()),
                &format!(
                    "removed by tyba: the approved command made it beside {} and left it (its approval was to write that file, not to leave new ones beside it)",
                    save.of.display()
                ),
            );
        }
    }
}

/// Whether an approved command's `grants` cover every path `op` touches
/// ([`RunnerGrant::lets`]). Its temporary copies (`save_of`) are its own to write, remove and
/// rename over the file each saves, and nothing more: any other rename, link or symbolic link
/// naming one is judged without them (asked), so a copy never takes another name (review 12's
/// r12-01: one copy renamed over another, or exchanged with it, dropped both records and
/// outlived the command; the saved file renamed over a copy left under the copy's name).
fn grants_cover(grants: &[RunnerGrant], op: &Op) -> bool {
    let own_save = matches!(op, Op::Rename { from, to, exchange: false, .. }
        if grants.iter().any(|g| g.path == *from && g.save_of.as_ref().is_some_and(|s| s.of == *to)));
    let names_change = matches!(op, Op::Rename { .. } | Op::Link { .. } | Op::Symlink { .. });
    // A name held for a regular file only gets no directory, link or symbolic link.
    let makes_other = matches!(
        op,
        Op::One(_, Access::Mkdir) | Op::Link { .. } | Op::Symlink { .. }
    );
    // A name held for a directory the line makes gets no file, link or symbolic link, and
    // is not renamed (review 18's r18-01: a symbolic link planted where the person expects
    // the directory they approved).
    let at_made_dir = |g: &RunnerGrant| {
        g.dirs_from.is_some()
            && match op {
                Op::One(p, Access::Create | Access::Write) => *p == g.path,
                Op::Link { at, .. } | Op::Symlink { at, .. } => *at == g.path,
                Op::Rename { from, to, .. } => *from == g.path || *to == g.path,
                _ => false,
            }
    };
    let usable = |g: &&RunnerGrant| {
        (own_save || !names_change || g.save_of.is_none())
            && !(makes_other && g.regular_only)
            && !at_made_dir(g)
    };
    if let Op::One(path, Access::Mkdir) = op {
        if grants.iter().any(|g| g.on_the_way(path)) {
            return true;
        }
    }
    op.touches()
        .iter()
        .all(|(path, touch)| grants.iter().filter(usable).any(|g| g.lets(path, *touch)))
}

/// Whether an approved command's `grants` let it change the mode and owner (with `times`: the
/// times) of `path`: a metadata grant on that path, or beneath it when recursive, leaving out
/// what arrived beneath it since ([`RunnerGrant::arrived`]); for the times, a grant to write
/// it ([`OutsideFs::runner_lets_meta`]).
fn grants_let_meta(grants: &[RunnerGrant], path: &Path, times: bool) -> bool {
    grants.iter().any(|g| {
        let kept = !g.arrived.iter().any(|a| is_within(path, a));
        let named = g.path == path || (g.meta_tree && is_within(path, &g.path));
        (g.meta && named && kept) || (times && g.lets(path, Touch::Content))
    })
}

/// The programs whose own way of saving a file an approved line's command may use without
/// asking again ([`RunnerGrant::file`]), by the name of the system executable it runs.
const SAVERS: &[&str] = &["sed", "install", "cp", "git", "zip"];

/// Whether a process running `exe` with `maps` (`/proc/PID/maps`) and `environ`
/// (`/proc/PID/environ`) is one of [`SAVERS`] as the system ships it and runs nothing else:
/// its executable in a system `bin` directory; every executable mapping a file of the
/// system's directories or the kernel's `[vdso]`/`[vsyscall]` (no library the agent put there:
/// `LD_PRELOAD`, a `PATH` entry in the worktree, review 14's r14-01; and no executable memory
/// without a file, where such a library copies its code before unmapping itself, review 15's
/// r15-01); and no dynamic loader variable in its environment (`LD_*`, `GCONV_PATH`,
/// `LOCPATH`). A system directory can hold the agent's files too (a worktree under
/// `/usr/local/src`): [`maps_none_of`] is the other half of the rule.
fn is_system_saver(exe: &Path, maps: &str, environ: &[u8]) -> bool {
    let system = |p: &str| {
        ["/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/"]
            .iter()
            .any(|d| p.starts_with(d))
    };
    let named = exe
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| SAVERS.contains(&n));
    let in_bin = exe.parent().is_some_and(|d| {
        ["/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .any(|b| d == Path::new(b))
    });
    let loader_env = environ.split(|b| *b == 0).any(|v| {
        let locale = [b"LANG=" as &[u8], b"LANGUAGE=", b"LC_", b"TZ=", b"NLSPATH="]
            .iter()
            .any(|p| v.starts_with(p));
        v.starts_with(b"LD_")
            || v.starts_with(b"GCONV_PATH=")
            || v.starts_with(b"LOCPATH=")
            || locale && v.contains(&b'/')
    });
    named
        && in_bin
        && !loader_env
        && maps.lines().all(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !f.get(1).is_some_and(|p| p.contains('x')) {
                return true;
            }
            match (f.get(5), f.len()) {
                (Some(path), 6) if path.starts_with('/') => system(path),
                (Some(&"[vdso]" | &"[vsyscall]"), 6) => true,
                _ => false,
            }
        })
}

/// Whether `copy` is the name `saver` gives its temporary copy of `of` (the same directory is
/// the caller's to check): GNU sed's `sed` and six letters or digits (`mkostemp`), zip's `zi`
/// and six, git's
/// `<of>.lock` (its lock file, gitglossary(7)); `install` and `cp` make none (they remove the
/// file and make it anew). No other name: an approved `git config --file F` made and filled
/// any new file beside F (review 19's r19-01).
fn copy_name_fits(saver: &str, of: &Path, copy: &Path) -> bool {
    let Some(name) = copy.file_name().map(|n| n.as_encoded_bytes()) else {
        return false;
    };
    match saver {
        "sed" => {
            name.len() == 9
                && name.starts_with(b"sed")
                && name[3..].iter().all(u8::is_ascii_alphanumeric)
        }
        // zip's `zi` and six letters or digits (`mkstemp` in the archive's directory).
        "zip" => {
            name.len() == 8
                && name.starts_with(b"zi")
                && name[2..].iter().all(u8::is_ascii_alphanumeric)
        }
        "git" => of.file_name().is_some_and(|f| {
            let mut lock = f.as_encoded_bytes().to_vec();
            lock.extend_from_slice(b".lock");
            lock == name
        }),
        _ => false,
    }
}

/// Whether neither `exe` nor any file mapped executable in `maps` (`/proc/PID/maps`) is
/// beneath one of `roots` (the directories the agent writes: its worktree, temp dir and
/// `read_write` roots), whatever directory they are in.
fn maps_none_of(exe: &Path, maps: &str, roots: &[PathBuf]) -> bool {
    let theirs = |p: &Path| roots.iter().any(|r| is_within(p, r));
    !theirs(exe)
        && maps.lines().all(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let exec = f.get(1).is_some_and(|p| p.contains('x'));
            !exec || !f.get(5).is_some_and(|path| theirs(Path::new(path)))
        })
}

/// The key of the approved command in `runners` that process `pid` runs under: an ancestor
/// (or itself) is the command's keeper, by pid in the sandbox's PID namespace and identity.
fn keeper_of(runners: &HashMap<u32, RunnerGrants>, pid: u32) -> Option<u32> {
    if runners.is_empty() {
        return None;
    }
    let mut p = pid;
    for _ in 0..256 {
        let (ppid, start) = procfs::stat(p).ok()?;
        if let Some(ns) = procfs::ns_pid(p) {
            if runners.get(&ns).is_some_and(|(st, _)| *st == start) {
                return Some(ns);
            }
        }
        if ppid <= 1 || ppid == p {
            return None;
        }
        p = ppid;
    }
    None
}

impl Inner {
    /// Ends every grant on `changed` names or beneath them, made to any process or to an
    /// approved command's line: called before the server removes, renames or links a name
    /// (or makes it a symbolic link), once that change is decided. A grant is for what the
    /// name held when it was asked; after the change the name holds something else (another
    /// file linked or renamed there, nothing), which no one was asked about (review 9's
    /// r9-03: a `create` grant of a scratch name read and wrote a denied secret once the
    /// scratch was removed and the secret linked under its name). The approver's kept answers
    /// for those names end too ([`Approver::names_changed`]: the agent hook's answers).
    ///
    /// `brought` (source, destination): a file or directory that a link or rename makes
    /// appear at the destination. Beneath an approved line's directory grant, a destination
    /// whose source the same grant did not cover, or that itself arrived there, is no longer
    /// covered by it ([`RunnerGrant::arrived`]): a denied secret linked or renamed into a
    /// directory an approved command may read is not that command's to read (review 10's
    /// r10-01), nor under a name it was renamed or linked to next inside the directory
    /// (review 11's r11-01). A rename within the grant of what the line found there (a lock
    /// file renamed over the file it locks) brings nothing new.
    fn names_changed(
        &self,
        changed: &[&Path],
        rename: Option<(&Path, &Path)>,
        brought: &[(&Path, &Path)],
    ) {
        self.approver.names_changed(changed, rename);
        let hit = |p: &Path| changed.iter().any(|c| is_within(p, c));
        if let Ok(mut g) = self.grants.lock() {
            g.retain(|g| !g.op.touched().iter().any(|(p, _)| hit(p)));
        }
        if let Ok(mut r) = self.runners.lock() {
            for (_, grants) in r.values_mut() {
                grants.retain(|g| !hit(&g.path));
                for g in grants.iter_mut() {
                    for (src, dst) in brought {
                        // From outside the grant, or from something that arrived in it (a
                        // second step inside the directory carries what the first brought).
                        let from_elsewhere =
                            !g.holds(src) || g.arrived.iter().any(|a| is_within(src, a));
                        if g.holds(dst) && from_elsewhere {
                            g.arrived.push(dst.to_path_buf());
                        }
                    }
                }
            }
        }
    }

    /// Whether process `pid` runs under an approved command whose grants cover every path
    /// `op` touches: an ancestor (or itself) is that command's keeper, by pid in the
    /// sandbox's PID namespace and identity. Writing or creating a path needs a writable
    /// grant; removing, renaming or linking one a writable grant or one of the line's
    /// changes ([`RunnerGrant::lets`]).
    fn runner_covers(&self, pid: u32, op: &Op) -> bool {
        let Ok(r) = self.runners.lock() else {
            return false;
        };
        let Some(key) = keeper_of(&r, pid) else {
            return false;
        };
        grants_cover(&r[&key].1, op)
    }

    /// Runs `f` on the grants (and key) of the approved command thread `tid` runs under;
    /// `None` when it runs under none.
    fn with_runner<T>(
        &self,
        tid: u32,
        f: impl FnOnce(u32, &mut Vec<RunnerGrant>) -> T,
    ) -> Option<T> {
        let pid = procfs::tgid(tid).ok()?;
        let mut r = self.runners.lock().ok()?;
        let key = keeper_of(&r, pid)?;
        r.get_mut(&key).map(|(_, grants)| f(key, grants))
    }

    /// Whether thread `tid` is the approved command itself (the keeper's own child, not a
    /// process it started) running one of [`SAVERS`] as the system ships it
    /// ([`is_system_saver`]): only then does the command save files its program's way. A
    /// line's spelling cannot be trusted to say which process does the saving (`find -exec`,
    /// `xargs`, `env LD_PRELOAD=…`, a `PATH` of the agent's: review 14's r14-01). The saver's
    /// name when it is one.
    fn saver_process(&self, tid: u32) -> Option<String> {
        let pid = procfs::tgid(tid).ok()?;
        let (ppid, _) = procfs::stat(pid).ok()?;
        let keeper = |r: &HashMap<u32, RunnerGrants>| {
            let Ok((_, start)) = procfs::stat(ppid) else {
                return false;
            };
            procfs::ns_pid(ppid).is_some_and(|ns| r.get(&ns).is_some_and(|(st, _)| *st == start))
        };
        if !self.runners.lock().is_ok_and(|r| keeper(&r)) {
            return None;
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"));
        let environ = std::fs::read(format!("/proc/{pid}/environ"));
        // Until the session says which directories the agent writes, no process saves.
        let writable = self.agent_writable.get()?;
        match (exe, maps, environ) {
            (Ok(exe), Ok(maps), Ok(environ))
                if is_system_saver(&exe, &maps, &environ)
                    && maps_none_of(&exe, &maps, writable) =>
            {
                exe.file_name().map(|n| n.to_string_lossy().into_owned())
            }
            _ => None,
        }
    }

    /// The file that a create of `path` by thread `tid` saves ([`RunnerGrant::file`]): the
    /// process runs under an approved command whose line writes a regular file in the same
    /// directory, which no grant of its covers `path` and which is still that file (not
    /// brought in since). `None` for any other create.
    fn save_for(&self, tid: u32, path: &Path) -> Option<PathBuf> {
        let saver = self.saver_process(tid)?;
        self.with_runner(tid, |_, grants| {
            if grants.iter().any(|g| g.lets(path, Touch::Content)) {
                return None;
            }
            grants
                .iter()
                .find(|g| {
                    g.file
                        && g.write
                        && g.arrived.is_empty()
                        && g.path != path
                        && g.path.parent() == path.parent()
                        && copy_name_fits(&saver, &g.path, path)
                        // The file, or no file yet (`git config --file NEW`: its lock renamed
                        // to that name makes it).
                        && match std::fs::symlink_metadata(&g.path) {
                            Ok(m) => m.is_file(),
                            Err(e) => e.kind() == io::ErrorKind::NotFound,
                        }
                })
                .map(|g| g.path.clone())
        })
        .flatten()
    }

    /// Records `path`, just made by thread `tid` with identity `id`, as its command's
    /// temporary copy of `of` ([`Inner::save_for`]).
    fn saved(&self, tid: u32, path: &Path, of: PathBuf, id: (u64, u64)) {
        self.with_runner(tid, |_, grants| {
            grants.push(RunnerGrant {
                save_of: Some(SaveOf { of, id }),
                ..RunnerGrant::writing(path)
            });
        });
    }

    /// The approved command (its key) whose temporary copy `from` of `to` thread `tid`
    /// renames over `to`: its own save.
    fn own_save(&self, tid: u32, from: &Path, to: &Path) -> Option<u32> {
        self.with_runner(tid, |key, grants| {
            grants
                .iter()
                .any(|g| g.path == from && g.save_of.as_ref().is_some_and(|s| s.of == to))
                .then_some(key)
        })
        .flatten()
    }

    /// After command `key` saved `to` ([`Inner::own_save`]), or removed it to make it anew
    /// ([`Inner::own_file`]), the name holds what the command writes: its grant to write and
    /// save it again holds.
    fn saved_over(&self, key: u32, to: &Path) {
        if let Ok(mut r) = self.runners.lock() {
            if let Some((_, grants)) = r.get_mut(&key) {
                grants.push(RunnerGrant {
                    file: true,
                    regular_only: true,
                    ..RunnerGrant::writing(to)
                });
            }
        }
    }

    /// The approved command (its key) that thread `tid` runs under, when its line writes the
    /// regular file `path` itself ([`RunnerGrant::file`]): removing it (to make it anew) is
    /// that command's own change, after which its grant on the name holds. A link or rename
    /// to the name by anyone still ends it ([`Inner::names_changed`]).
    fn own_file(&self, tid: u32, path: &Path) -> Option<u32> {
        self.saver_process(tid)?;
        self.with_runner(tid, |key, grants| {
            grants
                .iter()
                .any(|g| g.file && g.write && g.path == path)
                .then_some(key)
        })
        .flatten()
    }

    /// Thread `tid` made the file or directory with identity `id` through the server: when it
    /// runs under an approved command, it is that command's own.
    fn made_by(&self, tid: u32, id: (u64, u64)) {
        if let Some(key) = self.with_runner(tid, |key, _| key) {
            if let Ok(mut m) = self.made.lock() {
                m.entry(key).or_default().insert(id);
            }
        }
    }

    /// Whether thread `tid` runs under an approved command that made what is at `path` now
    /// itself (a temporary copy of a file it saves, the file it writes made anew, what it
    /// extracts into a directory it writes), by identity: its mode, owner and times are the
    /// command's to set.
    /// Whether `path` is a directory on the way to one the approved command thread `tid` runs
    /// under makes ([`RunnerGrant::on_the_way`]) and that command made it itself (by identity,
    /// [`Inner::runner_made`]): its to list (`mkdir -p` opens each it made to go on). One made
    /// by anyone else since the ask is not (review 18's r18-02).
    fn made_on_the_way(&self, tid: u32, path: &Path) -> bool {
        self.with_runner(tid, |_, grants| grants.iter().any(|g| g.on_the_way(path)))
            .unwrap_or(false)
            && self.runner_made(tid, path)
    }

    fn runner_made(&self, tid: u32, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::symlink_metadata(path) else {
            return false;
        };
        let Some(key) = self.with_runner(tid, |key, _| key) else {
            return false;
        };
        self.made.lock().is_ok_and(|made| {
            made.get(&key)
                .is_some_and(|s| s.contains(&(m.dev(), m.ino())))
        })
    }

    fn node(&self, ino: INodeNo) -> Option<Node> {
        self.nodes.lock().ok()?.by_ino.get(&ino.0).cloned()
    }

    fn ino(&self, n: Node) -> u64 {
        match self.nodes.lock() {
            Ok(mut g) => g.ino(n),
            Err(_) => 0,
        }
    }

    fn real(&self, n: &Node) -> PathBuf {
        self.covers
            .get(n.cover)
            .map(|c| c.parent_path.join(&n.rel))
            .unwrap_or_default()
    }

    /// Opens the node's real object with `flags`, beneath its cover's directory, following
    /// no symbolic link (`O_PATH | O_NOFOLLOW` gives a final link itself).
    fn open_real(&self, n: &Node, flags: i32) -> io::Result<OwnedFd> {
        let c = self
            .covers
            .get(n.cover)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let p = c_path(&n.rel)?;
        // openat2 refuses flags that do not apply (`O_NOCTTY` with `O_PATH`: EINVAL).
        let mut flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        if flags & libc::O_PATH == 0 {
            flags |= libc::O_NOCTTY;
        }
        sys::openat2(c.parent.as_fd(), &p, flags as u64, RESOLVE)
    }

    /// The node's attributes, following no link: a cover's own entry by one `fstatat` of its
    /// name in the directory held for it (`AT_SYMLINK_NOFOLLOW`, no directory on the way),
    /// anything beneath through [`Inner::open_real`].
    fn stat_node(&self, n: &Node) -> io::Result<nix::sys::stat::FileStat> {
        let mut parts = n.rel.components();
        if let (Some(std::path::Component::Normal(name)), None, Some(c)) =
            (parts.next(), parts.next(), self.covers.get(n.cover))
        {
            return nix::sys::stat::fstatat(
                c.parent.as_fd(),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(io::Error::from);
        }
        let fd = self.open_real(n, libc::O_PATH)?;
        nix::sys::stat::fstat(fd.as_fd()).map_err(io::Error::from)
    }

    fn root_attr(&self) -> FileAttr {
        FileAttr {
            ino: INodeNo::ROOT,
            size: 0,
            blocks: 0,
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind: FileType::Directory,
            perm: 0o555,
            nlink: 2,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Option<Node> {
        if parent == INodeNo::ROOT {
            let i: usize = name.to_str()?.parse().ok()?;
            let entry = self.names.get(i)?;
            return Some(Node {
                cover: i,
                rel: PathBuf::from(entry),
            });
        }
        let p = self.node(parent)?;
        Some(Node {
            cover: p.cover,
            rel: p.rel.join(name),
        })
    }

    fn log(&self, what: String, allowed: bool, reason: Option<String>) {
        let _ = self.approver.record(&AuditEvent {
            kind: "file",
            what,
            allowed,
            reason,
            inner_command: None,
            quiet: false,
        });
    }

    /// Registers request `req` (FUSE operation `op`) as being served with `reply`.
    fn serve<R>(self: &Arc<Self>, req: &Request, op: &'static str, reply: R) -> Served<R> {
        let unique = u64::from(req.unique());
        if let Ok(mut f) = self.flights.lock() {
            f.insert(
                unique,
                Flight {
                    since: Instant::now(),
                    asking: false,
                    op,
                },
            );
        }
        Served {
            unique,
            inner: Arc::clone(self),
            reply: Some(reply),
        }
    }

    /// Request `unique` is answered (or dropped).
    fn landed(&self, unique: u64) {
        if let Ok(mut f) = self.flights.lock() {
            f.remove(&unique);
        }
    }

    /// Request `unique` waits for the person (`true`), or no longer does: its bound starts
    /// again from now.
    fn set_asking(&self, unique: u64, asking: bool) {
        if let Ok(mut f) = self.flights.lock() {
            if let Some(e) = f.get_mut(&unique) {
                e.asking = asking;
                e.since = Instant::now();
            }
        }
    }

    /// The watchdog's loop ([`Watchdog`]): until the connection ends or is aborted.
    fn watch(me: std::sync::Weak<Inner>) {
        let tick = match me.upgrade() {
            Some(m) => m.watchdog.tick(),
            None => return,
        };
        loop {
            std::thread::sleep(tick);
            let Some(m) = me.upgrade() else { return };
            match m.late() {
                Late::None => {}
                Late::Ended => return,
                Late::Aborted(what) => {
                    let text = format!(
                        "outside files: tyba's file server did not answer {what} within {} s while no ask was waiting; it is cut off, so from now on every file beside the worktree or in your home fails for this session's programs (\"Transport endpoint is not connected\"); the worktree keeps working. Start a new session to be asked again",
                        m.watchdog.bound.as_secs_f32()
                    );
                    crate::broker::text::say(&format!("tyba: {text}"));
                    m.approver.note("outside files cut off", &text);
                    return;
                }
            }
        }
    }

    /// Looks for late requests and aborts the connection when one is ([`Watchdog`]).
    fn late(&self) -> Late {
        let Ok(flights) = self.flights.lock() else {
            return Late::Ended;
        };
        let bound = self.watchdog.bound;
        let late: Vec<(u64, Flight)> = flights
            .iter()
            .filter(|(_, f)| !f.asking && f.since.elapsed() > bound)
            .map(|(u, f)| (*u, *f))
            .collect();
        let Ok(mut dev) = self.watchdog.dev.lock() else {
            return Late::Ended;
        };
        if dev.is_none() {
            return Late::Ended;
        }
        let Some((_, first)) = late.first() else {
            return Late::None;
        };
        // Every late request is in `flights`, so its reply, and with it fuser's device fd,
        // is alive while the lock is held (`Served`): `theirs` is that fd.
        if let Some((ours, theirs)) = dev.take() {
            for (u, _) in &late {
                let _ = sys::fuse_reply_error(ours.as_fd(), *u, libc::ENOTCONN);
            }
            self.aborted.store(true, Ordering::SeqCst);
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                let _ = sys::dup_onto(null.as_fd(), theirs);
            }
            drop(ours);
        }
        Late::Aborted(format!("a request ({})", first.op))
    }

    /// Whether `op` touches one of tyba's own directories ([`own_dirs`]): by path, or by
    /// the identity of a directory on its way (one of them reached under another name), or
    /// whether it renames or removes a directory holding them (by path or identity).
    fn is_own(&self, op: &Op) -> bool {
        let touched = op.touched();
        if touched
            .iter()
            .any(|(p, _)| self.own.iter().any(|d| is_within(p, d)) || self.run.holds(p))
        {
            return true;
        }
        // A change beneath where they are now: a link laid since the session started
        // (`~/.config -> dotfiles/config` over a served `~/dotfiles`: review 23's r23-02).
        // Resolved once per change (a rename, a removal and a link are changes too: used below).
        let now = if touched.iter().any(|(_, changed)| *changed) {
            own_dirs_now()
        } else {
            Vec::new()
        };
        if touched
            .iter()
            .any(|(p, changed)| *changed && now.iter().any(|d| is_within(p, d)))
        {
            return true;
        }
        if touched.iter().any(|(p, _)| {
            self.ids_on_the_way(p)
                .iter()
                .any(|i| self.own_ids.contains(i))
        }) {
            return true;
        }
        // A name moved or removed on the way to them (a directory holding them renamed), or
        // a link made where one of them would be reached through it (a link laid at a missing
        // `~/dotfiles/tyba` under `policy.toml -> ~/dotfiles/tyba/policy.toml`: review 25's
        // r25-02), with where they are now too. A plain directory made on the way leaves
        // what is beneath it tyba's own, and is let be (`mkdir -p ~/.config/nvim` in a home
        // with no `~/.config` yet).
        let moved: Vec<&Path> = match op {
            Op::Rename { from, to, .. } => vec![from, to],
            Op::One(p, Access::Remove) => vec![p],
            Op::Link { at, .. } | Op::Symlink { at, .. } => vec![at],
            _ => Vec::new(),
        };
        moved.iter().any(|p| {
            if self.own.iter().chain(&now).any(|d| is_within(d, p)) {
                return true;
            }
            let ids = self.ids_on_the_way(p);
            ids.len() == self.depth_in_cover(p)
                && ids.last().is_some_and(|i| self.own_ancestors.contains(i))
        })
    }

    /// The cover `p` (real) lies in, and its path relative to the cover's directory.
    fn in_cover(&self, p: &Path) -> Option<Node> {
        self.covers
            .iter()
            .zip(&self.names)
            .enumerate()
            .find(|(_, (c, n))| is_within(p, &c.parent_path.join(n)))
            .and_then(|(i, (c, _))| {
                Some(Node {
                    cover: i,
                    rel: p.strip_prefix(&c.parent_path).ok()?.to_path_buf(),
                })
            })
    }

    /// How many components `p` has below its cover's directory (0 when in no cover).
    fn depth_in_cover(&self, p: &Path) -> usize {
        self.in_cover(p).map_or(0, |n| n.rel.components().count())
    }

    /// The identities of the entries on the way to `p` (real) from its cover's own entry,
    /// `p` itself last, as far as they exist (no link followed).
    fn ids_on_the_way(&self, p: &Path) -> Vec<FileId> {
        let Some(n) = self.in_cover(p) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut rel = PathBuf::new();
        for c in n.rel.components() {
            rel.push(c);
            match self.stat_node(&Node {
                cover: n.cover,
                rel: rel.clone(),
            }) {
                Ok(st) => out.push((st.st_dev, st.st_ino)),
                Err(_) => break,
            }
        }
        out
    }

    /// The credential `p` (real) is or lies in: by its own names (the classifier's rule,
    /// `tyba_policy::credential_in_path`), or as one of the home's credential locations
    /// reached by another name ([`credential_places`]: `~/.ssh` linked elsewhere).
    fn credential(&self, p: &Path) -> Option<String> {
        if let Some(c) = tyba_policy::credential_in_path(p) {
            return Some(c);
        }
        self.credentials
            .iter()
            .find(|(real, _)| is_within(p, real))
            .map(|(_, name)| format!("{name}, reached by another name"))
    }

    /// Who process `pid` is (the agent's interpreter, until the notify loop has told:
    /// [`Inner::session`]).
    fn asker(&self, pid: u32) -> Asker {
        self.session
            .get()
            .map_or(Asker::AgentInterpreter, |s| s.asker(pid))
    }

    /// Whether grant `g` reaches process `pid`: `g.root` itself, or a process under it (that
    /// is the agent too, for a grant to the agent).
    fn reaches(&self, pid: u32, g: &Grant) -> bool {
        in_tree(pid, g.root)
            && self.same_role_as(g)
            && (!g.agent_only || pid == g.root.pid || self.asker(pid).is_agent())
    }

    /// The role of process `pid` now, in the exec model (`None` before the notify loop has
    /// told, or for a process it cannot read).
    fn role_of(&self, pid: u32) -> Option<crate::exec::Role> {
        self.session.get().and_then(|s| s.role(pid))
    }

    /// Whether grant `g`'s root still has the role it had when granted. Without a session
    /// link then and now, yes; a role unknown now (or only now known) is another.
    fn same_role_as(&self, g: &Grant) -> bool {
        match (&g.role, self.role_of(g.root.pid)) {
            (None, None) => self.session.get().is_none(),
            (Some(then), Some(now)) => crate::exec::same_role(then, &now),
            _ => false,
        }
    }

    /// Refuses `what` quietly: `EACCES` (what Landlock gives), logged as a quiet refusal of
    /// the session (kind `file`, counted under "refused quietly" at its end), nothing on the
    /// process's stderr (the agent's runtime draws its screen there) and no ask.
    fn refuse_quietly(&self, what: String, reason: String) -> i32 {
        let event = AuditEvent {
            kind: "file",
            what,
            allowed: false,
            reason: Some(reason),
            inner_command: None,
            quiet: true,
        };
        match self.session.get() {
            Some(s) => s.log_quiet(event),
            None => {
                let _ = self.approver.record(&event);
            }
        }
        libc::EACCES
    }

    /// The first history file of a shell, REPL or pager `op` touches ([`HistoryFiles`]).
    fn history_file<'a>(&self, op: &'a Op) -> Option<&'a Path> {
        op.touched()
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| self.history.matches(p))
    }

    /// Whether `op` by thread `tid` passes without an ask: the supervisor's own threads, a
    /// grant that reaches the process, an approved command's grants; never tyba's own
    /// directories or a history file, whatever was granted ([`Inner::decide`] refuses them).
    fn passes(&self, tid: u32, op: &Op) -> bool {
        if self.aborted.load(Ordering::SeqCst) || self.is_own(op) || self.history_file(op).is_some()
        {
            return false;
        }
        let Ok(pid) = procfs::tgid(tid) else {
            return false;
        };
        if pid == self.me {
            return true;
        }
        let granted = self.grants.lock().map(|g| {
            g.iter()
                .filter(|g| g.op.covers(op))
                .cloned()
                .collect::<Vec<_>>()
        });
        if let Ok(grants) = granted {
            if grants.iter().any(|g| self.reaches(pid, g)) {
                return true;
            }
        }
        self.runner_covers(pid, op)
            || matches!(op, Op::One(p, Access::Create) if self.save_for(tid, p).is_some())
            || matches!(op, Op::One(p, Access::List) if self.made_on_the_way(tid, p))
    }

    /// Who an approval asked by process `pid` (who is `asker`) reaches, as the ask says it:
    /// `(agent_only, text)`.
    fn holder(&self, pid: u32, asker: Asker) -> (bool, String) {
        let name = procfs::comm(pid).unwrap_or_else(|| "?".to_string());
        if asker.is_agent() {
            (
                true,
                format!("the agent itself ({name}, pid {pid}) until it exits; not the commands it starts, each asked on its own"),
            )
        } else {
            (
                false,
                format!(
                    "this command ({name}, pid {pid}) and the processes it starts, until it exits"
                ),
            )
        }
    }

    /// Decides `op` for thread `tid` (docs/sandbox.md, "What an outside operation of each
    /// kind of process gets"): the supervisor's own threads pass; tyba's own directories and
    /// a change under a system path are refused unasked (blocked); a history file of a shell,
    /// REPL or pager is refused quietly whoever asks; a grant or an approved command's grants
    /// pass; the agent program's own runtime passes where the person's answer to its hook's
    /// ask of the same file covers it ([`Approver::answered`]) and is refused quietly
    /// otherwise, as tyba's own hook is; anyone else is asked, with the colour the policy
    /// gives the worst of the paths it names (DESIGN.md §2a, §4). `Err(errno)` refuses (an
    /// asked refusal already on the process's stderr, every refusal in the log): `EACCES`,
    /// what the kernel gives a change without the permission.
    fn decide(&self, tid: u32, op: &Op, unique: u64) -> Result<(), i32> {
        if self.aborted.load(Ordering::SeqCst) {
            return Err(libc::ENOTCONN);
        }
        let what = format!("{} {}", op.word(), op.full());
        let Ok(pid) = procfs::tgid(tid) else {
            return Err(libc::EACCES);
        };
        if pid == self.me {
            return Ok(());
        }
        if self.is_own(op) {
            let reason = format!("refused by tyba (blocked): {what}: tyba's own configuration, state and sockets are not reachable from the sandbox");
            self.log(what, false, Some(reason.clone()));
            crate::notify::write_stderr(tid, &reason);
            return Err(libc::EACCES);
        }
        if op.changes()
            && op
                .touched()
                .iter()
                .any(|(p, _)| SYSTEM_ROOTS.iter().any(|s| is_within(p, Path::new(s))))
        {
            let reason = format!("refused by tyba (blocked): {what}: a change under a system path");
            self.log(what, false, Some(reason.clone()));
            crate::notify::write_stderr(tid, &reason);
            return Err(libc::EACCES);
        }
        // Before any grant: what the person typed is never passed through, whatever was
        // approved.
        if let Some(h) = self.history_file(op) {
            let reason = format!(
                "refused quietly by tyba: `{}` is a history file that shells, REPLs and pagers write by themselves (the policy's filesystem.history_files): never read or written from the sandbox, never asked",
                h.display()
            );
            return Err(self.refuse_quietly(what, reason));
        }
        if self.passes(tid, op) {
            return Ok(());
        }
        let asker = self.asker(pid);
        if asker == Asker::OwnHook {
            return Err(self.refuse_quietly(
                what,
                "refused quietly by tyba: tyba's own hook's file access outside the worktree (its own look, not a command the model ran)".into(),
            ));
        }
        let (agent_only, holder) = self.holder(pid, asker);
        let req = self.file_ask(op, holder, tid);
        let grant = |how: &str| -> Result<(), i32> {
            match (procfs::proc_id(pid), self.grants.lock()) {
                (Ok(root), Ok(mut g)) => {
                    g.push(Grant {
                        root,
                        agent_only,
                        op: op.clone(),
                        role: self.role_of(pid),
                    });
                    self.log(what.clone(), true, Some(how.into()));
                    Ok(())
                }
                _ => Err(libc::EACCES),
            }
        };
        if asker == Asker::AgentProgram {
            // The agent program's own file access is not the model's command: only an
            // approval of the same intent (its hook's ask of this file) lets it through.
            return match self.approver.answered(&req) {
                Some(Answer::Once | Answer::Always) => {
                    grant("the person's answer to the agent hook's ask")
                }
                _ => Err(self.refuse_quietly(
                    what,
                    "refused quietly by tyba: the agent program's own file access outside its state (not a command the model ran; no approval covers it)".into(),
                )),
            };
        }
        self.set_asking(unique, true);
        let answer = self.approver.ask(&req);
        self.set_asking(unique, false);
        let refusal = match answer {
            Ok(Answer::Once | Answer::Always) => match grant("Once") {
                Ok(()) => return Ok(()),
                Err(_) => req.default_refusal(),
            },
            Ok(Answer::Deny { reason }) => reason.unwrap_or_else(|| req.default_refusal()),
            Err(e) => format!("{} ({e})", req.default_refusal()),
        };
        self.log(what, false, Some(refusal.clone()));
        crate::notify::write_stderr(tid, &refusal);
        Err(libc::EACCES)
    }

    /// The ask of `op` by thread `tid`, whose approval reaches `holder`: red (DESIGN.md §2a
    /// "Outside means ask"), the worst of the paths it names deciding (a credential path
    /// among them, a symbolic link's text too, makes it sensitive: §4). Its headline names
    /// every operand, each cut to a bound ([`Op::shown`]), so a long source cannot push a
    /// rename's or link's destination out of sight; the reasons name each in full.
    fn file_ask(&self, op: &Op, holder: String, tid: u32) -> AskRequest {
        let mut reasons = Vec::new();
        for p in op.named() {
            if let Some(c) = self.credential(p) {
                reasons.push(format!(
                    "`{}` is a credential path ({c}): sensitive, confirm only if the agent must have it",
                    p.display()
                ));
            }
        }
        reasons.extend(op.operands());
        reasons.push(format!(
            "{} {}: outside the worktree and the paths the policy opens",
            op.word(),
            op.full()
        ));
        AskRequest {
            kind: AskKind::File {
                path: op.shown(),
                access: op.word(),
                scope: op.scope(),
                holder,
                real: op.real_paths(),
            },
            verdict: Verdict::Red,
            reasons,
            rememberable: false,
            pid: tid,
            exec: None,
        }
    }

    fn refuse_unasked(&self, tid: u32, what: String) -> Errno {
        let reason = format!("refused by tyba: {what} outside the worktree is not supported (device nodes and whiteouts are never made there)");
        self.log(what, false, Some(reason.clone()));
        crate::notify::write_stderr(tid, &reason);
        Errno::EACCES
    }

    fn add_file(&self, f: File, writable: bool) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut m) = self.files.lock() {
            m.insert(fh, (Arc::new(f), writable));
        }
        fh
    }

    fn file(&self, fh: FileHandle) -> Option<(Arc<File>, bool)> {
        self.files.lock().ok()?.get(&fh.0).cloned()
    }

    /// What an open with `flags` asks for.
    fn open_access(flags: i32) -> Access {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            Access::Write
        } else {
            Access::Read
        }
    }

    fn do_open(&self, tid: u32, n: &Node, flags: i32, unique: u64) -> Result<u64, Errno> {
        self.decide(
            tid,
            &Op::One(self.real(n), Self::open_access(flags)),
            unique,
        )
        .map_err(Errno::from_i32)?;
        self.open_now(n, flags)
    }

    /// The open itself, once decided.
    fn open_now(&self, n: &Node, flags: i32) -> Result<u64, Errno> {
        let write = Self::open_access(flags) == Access::Write;
        let keep = libc::O_ACCMODE | libc::O_APPEND | libc::O_TRUNC | libc::O_NONBLOCK;
        let fd = self.open_real(n, flags & keep).map_err(|e| errno(&e))?;
        Ok(self.add_file(File::from(fd), write))
    }

    fn do_opendir(&self, tid: u32, n: &Node, unique: u64) -> Result<u64, Errno> {
        self.decide(tid, &Op::One(self.real(n), Access::List), unique)
            .map_err(Errno::from_i32)?;
        self.opendir_now(n)
    }

    /// The filesystem root's listing: the covers, `0`, `1`, … (those whose entry can still
    /// be reached), as a directory handle.
    fn root_listing(&self) -> Result<u64, Errno> {
        let (mut entries, mut attrs) = (Vec::new(), Vec::new());
        for (i, name) in self.names.iter().enumerate() {
            let n = Node {
                cover: i,
                rel: PathBuf::from(name),
            };
            let Ok(st) = self.stat_node(&n) else { continue };
            let ino = self.ino(n);
            attrs.push(attr_of(ino, &st));
            entries.push((ino, kind_of(st.st_mode), OsString::from(i.to_string())));
        }
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut d) = self.dirs.lock() {
            d.insert(fh, entries);
        }
        if let Ok(mut r) = self.root_attrs.lock() {
            r.insert(fh, attrs);
        }
        Ok(fh)
    }

    /// The names directly in directory `dir` (real) that the approved command thread `tid`
    /// runs under has grants for (to write, change or make: `gzip F` opens F's directory to
    /// remove F relative to it), when it has any: what an opening of `dir` it was not granted
    /// lists, unasked. `None` for any other thread or directory.
    fn granted_names_in(&self, tid: u32, dir: &Path) -> Option<Vec<OsString>> {
        let pid = procfs::tgid(tid).ok()?;
        let r = self.runners.lock().ok()?;
        let key = keeper_of(&r, pid)?;
        let names: Vec<OsString> = r[&key]
            .1
            .iter()
            .filter(|g| g.write || g.change || g.meta)
            .filter(|g| g.path.parent() == Some(dir))
            .filter_map(|g| g.path.file_name().map(OsStr::to_os_string))
            .collect();
        (!names.is_empty()).then_some(names)
    }

    /// The listing itself, once decided.
    fn opendir_now(&self, n: &Node) -> Result<u64, Errno> {
        self.opendir_only(n, None)
    }

    /// [`Inner::opendir_now`], listing only the entries named in `only` when given.
    fn opendir_only(&self, n: &Node, only: Option<&[OsString]>) -> Result<u64, Errno> {
        let fd = self
            .open_real(n, libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| errno(&e))?;
        let list = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| errno(&e))?;
        let mut entries = Vec::new();
        for e in list.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let kind = if t.is_dir() {
                FileType::Directory
            } else if t.is_symlink() {
                FileType::Symlink
            } else {
                FileType::RegularFile
            };
            let name = e.file_name();
            if only.is_some_and(|o| !o.contains(&name)) {
                continue;
            }
            let ino = self.ino(Node {
                cover: n.cover,
                rel: n.rel.join(&name),
            });
            entries.push((ino, kind, name));
        }
        drop(fd);
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut d) = self.dirs.lock() {
            d.insert(fh, entries);
        }
        Ok(fh)
    }

    /// The entry `name` in directory `parent`, when it is beneath a cover's own entry (not
    /// the filesystem's root, and not a cover's own entry, which is a mount point in the
    /// sandbox and lies in a base directory no change may reach).
    fn below_cover(&self, parent: INodeNo, name: &OsStr) -> Option<Node> {
        if parent == INodeNo::ROOT {
            return None;
        }
        let n = self.child(parent, name)?;
        (n.rel.components().count() >= 2).then_some(n)
    }

    /// The directory holding node `n` (opened `O_PATH`, no link followed on the way) and
    /// `n`'s name in it, for a `*at` call on that name. A cover's own entry is in the cover's
    /// parent directory (read through only: [`Inner::below_cover`] keeps changes out).
    fn dir_of(&self, n: &Node) -> Result<(OwnedFd, OsString), Errno> {
        let name = n.rel.file_name().ok_or(Errno::EINVAL)?.to_os_string();
        let c = self.covers.get(n.cover).ok_or(Errno::ENOENT)?;
        let dir = match n.rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(p) => self.parent_dir(&Node {
                cover: n.cover,
                rel: p.to_path_buf(),
            })?,
            None => c.parent.try_clone().map_err(|e| errno(&e))?,
        };
        Ok((dir, name))
    }

    /// The node's parent directory, opened as a directory (for `*at` calls on a name in it).
    fn parent_dir(&self, n: &Node) -> Result<OwnedFd, Errno> {
        self.open_real(n, libc::O_PATH | libc::O_DIRECTORY)
            .map_err(|e| errno(&e))
    }

    fn entry_of(&self, n: Node) -> Result<FileAttr, Errno> {
        let st = self.stat_node(&n).map_err(|e| errno(&e))?;
        let ino = self.ino(n);
        Ok(attr_of(ino, &st))
    }
}

/// What [`Inner::late`] found.
#[derive(Debug)]
enum Late {
    /// No late request.
    None,
    /// The connection ended (or the watchdog already acted): nothing more to watch.
    Ended,
    /// A late request, named: the connection is aborted.
    Aborted(String),
}

/// How long the server may take to answer a request that is not waiting for the person:
/// past it, the connection to the kernel is aborted ([`Watchdog`]): the late request and every
/// later one on the covers fail, the worktree keeps working. Long enough for a slow network
/// home (the server's own reads of the real files), short enough that a hung one is seen.
pub const REQUEST_BOUND: Duration = Duration::from_secs(20);

/// One request being served: since when (reset when an ask ends), and whether it waits for
/// the person's answer now (then it has no bound).
#[derive(Debug, Clone, Copy)]
struct Flight {
    since: Instant,
    asking: bool,
    /// The FUSE operation, for the notice.
    op: &'static str,
}

/// A request being served, in [`Inner::flights`] from its dispatch until its reply is sent
/// ([`Served::send`]) or dropped unsent. Its entry is removed *before* the reply is let go:
/// while an entry exists its reply is alive, and with it fuser's device fd
/// ([`Watchdog::abort`] relies on it).
struct Served<R> {
    unique: u64,
    inner: Arc<Inner>,
    reply: Option<R>,
}

impl<R> Served<R> {
    /// Sends the reply with `f`, after the entry is gone.
    fn send(mut self, f: impl FnOnce(R)) {
        self.inner.landed(self.unique);
        if let Some(r) = self.reply.take() {
            f(r);
        }
    }
}

impl<R> Drop for Served<R> {
    fn drop(&mut self) {
        // Before the fields (the reply) are dropped.
        self.inner.landed(self.unique);
    }
}

/// Bounds the server's requests (issue 16, "fail closed"): every [`Watchdog::tick`] it looks
/// for a request older than its bound that is not waiting for the person; finding one, it
/// answers the late requests `ENOTCONN` itself and aborts the connection: the device's fd
/// table entries are closed (fuser's replaced by `/dev/null`, `dup2(2)`; its own dropped), so
/// the kernel releases the device as soon as no read holds it (at once, or when a reader
/// returns with the next request) and `fuse_abort_conn` fails every request after it.
///
/// Why not the kernel's own request timeout (`FUSE_REQUEST_TIMEOUT`, Linux 6.14, per
/// connection in the init reply or `/proc/sys/fs/fuse/default_request_timeout`): it counts
/// every request, those waiting for the person's answer too (it checks the oldest request of
/// the processing lists), so it would abort the connection whenever the person takes longer
/// than the bound to answer; and fuser 0.18's init reply does not carry it.
#[derive(Debug)]
struct Watchdog {
    /// The bound ([`REQUEST_BOUND`]).
    bound: Duration,
    /// A duplicate of the device (written to for the late replies) and the number of
    /// fuser's own fd, until the connection ends. `None` once aborted or ended.
    dev: Mutex<Option<(OwnedFd, std::os::fd::RawFd)>>,
}

impl Watchdog {
    /// How often the requests are looked at: a quarter of the bound, between 50 ms and 1 s.
    fn tick(&self) -> Duration {
        (self.bound / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }
}

/// Runs `f` on a thread of its own (an ask may wait for the person): the FUSE loop goes on
/// serving other requests. `Err(EAGAIN)` when no thread can be made.
fn off_thread(f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name("tyba-outside".into())
        .spawn(f)
        .is_ok()
}

impl Filesystem for OutsideFs {
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> io::Result<()> {
        // READDIRPLUS (the kernel picks it for a directory's first listing): stage 2's one
        // listing of the root then stands for a lookup per cover. Without it, each bind
        // looks its cover up.
        let _ = config.add_capabilities(
            fuser::InitFlags::FUSE_DO_READDIRPLUS | fuser::InitFlags::FUSE_READDIRPLUS_AUTO,
        );
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let reply = self.0.serve(req, "lookup", reply);
        let Some(n) = self.0.child(parent, name) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        // Test builds only: a server that hangs (as on a stuck network filesystem).
        #[cfg(feature = "fault-points")]
        if self.0.hang.as_deref() == Some(name) {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        let ttl = if parent == INodeNo::ROOT {
            ROOT_TTL
        } else {
            TTL
        };
        match self.0.entry_of(n) {
            Ok(a) => reply.send(|r| r.entry(&ttl, &a, Generation(0))),
            Err(e) => reply.send(|r| r.error(e)),
        }
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let reply = self.0.serve(req, "getattr", reply);
        if ino == INodeNo::ROOT {
            return reply.send(|r| r.attr(&ROOT_TTL, &self.0.root_attr()));
        }
        let Some(n) = self.0.node(ino) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        match self.0.stat_node(&n) {
            Ok(st) => reply.send(|r| r.attr(&TTL, &attr_of(ino.0, &st))),
            Err(e) => reply.send(|r| r.error(errno(&e))),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let reply = self.0.serve(req, "readlink", reply);
        let Some(n) = self.0.node(ino) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        match self
            .0
            .open_real(&n, libc::O_PATH)
            .and_then(|fd| nix::fcntl::readlinkat(fd.as_fd(), "").map_err(io::Error::from))
        {
            Ok(t) => reply.send(|r| r.data(t.as_bytes())),
            Err(e) => reply.send(|r| r.error(errno(&e))),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let reply = self.0.serve(req, "open", reply);
        let Some(n) = self.0.node(ino) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        let (me, tid) = (Arc::clone(&self.0), req.pid());
        // Granted already: answered here. An ask waits on a thread of its own; when no
        // thread can be made the reply is dropped unsent, which fuser answers with an error:
        // nothing passes.
        if me.passes(tid, &Op::One(me.real(&n), Inner::open_access(flags.0))) {
            return match me.open_now(&n, flags.0) {
                Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
                Err(e) => reply.send(|r| r.error(e)),
            };
        }
        let unique = reply.unique;
        off_thread(move || match me.do_open(tid, &n, flags.0, unique) {
            Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
            Err(e) => reply.send(|r| r.error(e)),
        });
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let reply = self.0.serve(req, "read", reply);
        let Some((f, _)) = self.0.file(fh) else {
            return reply.send(|r| r.error(Errno::EBADF));
        };
        let mut buf = vec![0u8; size as usize];
        match f.read_at(&mut buf, offset) {
            Ok(n) => reply.send(|r| r.data(&buf[..n])),
            Err(e) => reply.send(|r| r.error(errno(&e))),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let reply = self.0.serve(req, "write", reply);
        let Some((f, true)) = self.0.file(fh) else {
            return reply.send(|r| r.error(Errno::EBADF));
        };
        match f.write_at(data, offset) {
            Ok(n) => reply.send(|r| r.written(n as u32)),
            Err(e) => reply.send(|r| r.error(errno(&e))),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lo: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // Nothing to flush (writes reach the real file as they come; locks stay the
        // kernel's): ENOSYS makes the kernel stop sending FLUSH (`fc->no_flush`), one round
        // trip less for every close of an outside file.
        reply.error(Errno::ENOSYS);
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let reply = self.0.serve(req, "fsync", reply);
        match self.0.file(fh).map(|(f, _)| f.sync_all()) {
            Some(Ok(())) | None => reply.send(|r| r.ok()),
            Some(Err(e)) => reply.send(|r| r.error(errno(&e))),
        }
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let reply = self.0.serve(req, "release", reply);
        if let Ok(mut m) = self.0.files.lock() {
            m.remove(&fh.0);
        }
        reply.send(|r| r.ok());
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let reply = self.0.serve(req, "opendir", reply);
        if ino == INodeNo::ROOT {
            // The filesystem's own root is visible only to stage 2, while it binds the
            // covers (the agent does not run yet): its one listing (READDIRPLUS) tells the
            // kernel every cover with its attributes, so that the binds find them without a
            // lookup each.
            return match self.0.root_listing() {
                Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
                Err(e) => reply.send(|r| r.error(e)),
            };
        }
        let Some(n) = self.0.node(ino) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        let (me, tid) = (Arc::clone(&self.0), req.pid());
        if me.passes(tid, &Op::One(me.real(&n), Access::List)) {
            return match me.opendir_now(&n) {
                Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
                Err(e) => reply.send(|r| r.error(e)),
            };
        }
        // An approved command opening the directory of what its line names (to act relative
        // to it): the directory as far as its grants go, unasked.
        if let Some(names) = me.granted_names_in(tid, &me.real(&n)) {
            return match me.opendir_only(&n, Some(&names)) {
                Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
                Err(e) => reply.send(|r| r.error(e)),
            };
        }
        let unique = reply.unique;
        off_thread(move || match me.do_opendir(tid, &n, unique) {
            Ok(fh) => reply.send(|r| r.opened(FileHandle(fh), FopenFlags::empty())),
            Err(e) => reply.send(|r| r.error(e)),
        });
    }

    fn readdir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let mut reply = self.0.serve(req, "readdir", reply);
        let list = match self.0.dirs.lock() {
            Ok(d) => d.get(&fh.0).cloned(),
            Err(_) => return reply.send(|r| r.error(Errno::EIO)),
        };
        let Some(list) = list else {
            return reply.send(|r| r.error(Errno::EBADF));
        };
        for (i, (ino, kind, name)) in list.iter().enumerate().skip(offset as usize) {
            let full = reply
                .reply
                .as_mut()
                .is_some_and(|r| r.add(INodeNo(*ino), (i + 1) as u64, *kind, name));
            if full {
                break;
            }
        }
        reply.send(|r| r.ok());
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let mut reply = self.0.serve(req, "readdirplus", reply);
        let list = match self.0.dirs.lock() {
            Ok(d) => d.get(&fh.0).cloned(),
            Err(_) => return reply.send(|r| r.error(Errno::EIO)),
        };
        let Some(list) = list else {
            return reply.send(|r| r.error(Errno::EBADF));
        };
        let ttl = if ino == INodeNo::ROOT { ROOT_TTL } else { TTL };
        let stated = if ino == INodeNo::ROOT {
            self.0
                .root_attrs
                .lock()
                .ok()
                .and_then(|r| r.get(&fh.0).cloned())
        } else {
            None
        };
        for (i, (child, _, name)) in list.iter().enumerate().skip(offset as usize) {
            // The root's covers as stated for the listing; another directory's entries now
            // (one gone since the listing is left out).
            let a = match stated.as_ref().and_then(|s| s.get(i)) {
                Some(a) => Some(*a),
                None => self
                    .0
                    .node(INodeNo(*child))
                    .and_then(|n| self.0.entry_of(n).ok()),
            };
            let Some(a) = a else { continue };
            let full = reply.reply.as_mut().is_some_and(|r| {
                r.add(
                    INodeNo(*child),
                    (i + 1) as u64,
                    name,
                    &ttl,
                    &a,
                    Generation(0),
                )
            });
            if full {
                break;
            }
        }
        reply.send(|r| r.ok());
    }

    fn releasedir(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let reply = self.0.serve(req, "releasedir", reply);
        if let Ok(mut d) = self.0.dirs.lock() {
            d.remove(&fh.0);
        }
        if let Ok(mut r) = self.0.root_attrs.lock() {
            r.remove(&fh.0);
        }
        reply.send(|r| r.ok());
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let reply = self.0.serve(req, "create", reply);
        let (Some(p), Some(n)) = (self.0.node(parent), self.0.child(parent, name)) else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        let (me, tid, name) = (Arc::clone(&self.0), req.pid(), name.to_os_string());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<(FileAttr, u64), Errno> {
                let real = me.real(&n);
                // An approved command's temporary copy of a file it saves: a new name only.
                let save = me.save_for(tid, &real);
                me.decide(tid, &Op::One(real.clone(), Access::Create), unique)
                    .map_err(Errno::from_i32)?;
                let dir = me.parent_dir(&p)?;
                let keep = libc::O_ACCMODE | libc::O_APPEND | libc::O_TRUNC | libc::O_EXCL;
                let excl = if save.is_some() { libc::O_EXCL } else { 0 };
                let f = nix::fcntl::openat(
                    dir.as_fd(),
                    name.as_os_str(),
                    nix::fcntl::OFlag::from_bits_truncate(
                        (flags & keep) | excl | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    ),
                    nix::sys::stat::Mode::from_bits_truncate(mode & !umask & 0o777),
                )
                .map_err(|e| Errno::from_i32(e as i32))?;
                let st = nix::sys::stat::fstat(f.as_fd()).map_err(|e| Errno::from_i32(e as i32))?;
                let id = (st.st_dev, st.st_ino);
                me.made_by(tid, id);
                if let Some(of) = save {
                    me.saved(tid, &real, of, id);
                }
                let ino = me.ino(n.clone());
                let fh = me.add_file(File::from(f), true);
                // A create grant covers writing the new file for the same tree.
                Ok((attr_of(ino, &st), fh))
            })();
            match r {
                Ok((a, fh)) => reply.send(|r| {
                    r.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::empty())
                }),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let reply = self.0.serve(req, "mkdir", reply);
        let (Some(p), Some(n)) = (self.0.node(parent), self.0.child(parent, name)) else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        let (me, tid, name) = (Arc::clone(&self.0), req.pid(), name.to_os_string());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<FileAttr, Errno> {
                me.decide(tid, &Op::One(me.real(&n), Access::Mkdir), unique)
                    .map_err(Errno::from_i32)?;
                let dir = me.parent_dir(&p)?;
                nix::sys::stat::mkdirat(
                    dir.as_fd(),
                    name.as_os_str(),
                    nix::sys::stat::Mode::from_bits_truncate(mode & !umask & 0o777),
                )
                .map_err(|e| Errno::from_i32(e as i32))?;
                if let Ok(st) = nix::sys::stat::fstatat(
                    dir.as_fd(),
                    name.as_os_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                ) {
                    me.made_by(tid, (st.st_dev, st.st_ino));
                }
                me.entry_of(n)
            })();
            match r {
                Ok(a) => reply.send(|r| r.entry(&TTL, &a, Generation(0))),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, false, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, parent, name, true, reply);
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let reply = self.0.serve(req, "setattr", reply);
        let Some(n) = self.0.node(ino) else {
            return reply.send(|r| r.error(Errno::ENOENT));
        };
        let (me, tid) = (Arc::clone(&self.0), req.pid());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<FileAttr, Errno> {
                let path = me.real(&n);
                let from_me = procfs::tgid(tid).is_ok_and(|p| p == me.me);
                if let Some(size) = size {
                    // Truncating through a handle opened for writing (an approved open);
                    // otherwise it is a write of the file, asked.
                    let f = match fh.and_then(|h| me.file(h)) {
                        Some((f, true)) => f,
                        _ => {
                            me.decide(tid, &Op::One(path.clone(), Access::Write), unique)
                                .map_err(Errno::from_i32)?;
                            Arc::new(File::from(
                                me.open_real(&n, libc::O_WRONLY).map_err(|e| errno(&e))?,
                            ))
                        }
                    };
                    f.set_len(size).map_err(|e| errno(&e))?;
                }
                if mode.is_some()
                    || uid.is_some()
                    || gid.is_some()
                    || atime.is_some()
                    || mtime.is_some()
                {
                    // Mode, owner and times are notified by seccomp and decided by the
                    // supervisor's metadata handler, which then makes the change itself:
                    // only its requests get here legitimately.
                    if !from_me {
                        return Err(me.refuse_unasked(
                            tid,
                            format!("changing the metadata of {}", path.display()),
                        ));
                    }
                    let obj = me.open_real(&n, libc::O_PATH).map_err(|e| errno(&e))?;
                    if let Some(m) = mode {
                        sys::fchmod_object(obj.as_fd(), m & 0o7777).map_err(|e| errno(&e))?;
                    }
                    if uid.is_some() || gid.is_some() {
                        sys::fchown_object(
                            obj.as_fd(),
                            uid.unwrap_or(u32::MAX),
                            gid.unwrap_or(u32::MAX),
                        )
                        .map_err(|e| errno(&e))?;
                    }
                    if atime.is_some() || mtime.is_some() {
                        let ts = |t: Option<TimeOrNow>| match t {
                            None => libc::timespec {
                                tv_sec: 0,
                                tv_nsec: libc::UTIME_OMIT,
                            },
                            Some(TimeOrNow::Now) => libc::timespec {
                                tv_sec: 0,
                                tv_nsec: libc::UTIME_NOW,
                            },
                            Some(TimeOrNow::SpecificTime(t)) => {
                                let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
                                libc::timespec {
                                    tv_sec: d.as_secs() as libc::time_t,
                                    tv_nsec: i64::from(d.subsec_nanos()),
                                }
                            }
                        };
                        sys::utimens_object(obj.as_fd(), Some([ts(atime), ts(mtime)]))
                            .map_err(|e| errno(&e))?;
                    }
                }
                me.entry_of(n)
            })();
            match r {
                Ok(a) => reply.send(|r| r.attr(&TTL, &a)),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let reply = self.0.serve(req, "rename", reply);
        let (Some(from), Some(to)) = (
            self.0.below_cover(parent, name),
            self.0.below_cover(newparent, newname),
        ) else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        if flags.contains(fuser::RenameFlags::RENAME_WHITEOUT) {
            // A whiteout is a device node: never made outside.
            let what = format!("rename {} with a whiteout", self.0.real(&from).display());
            return reply.send(|r| r.error(self.0.refuse_unasked(req.pid(), what)));
        }
        if from.cover != to.cover {
            // Two covers are two mounts: the kernel refuses this first.
            return reply.send(|r| r.error(Errno::EXDEV));
        }
        let (me, tid) = (Arc::clone(&self.0), req.pid());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<(), Errno> {
                let (dir_from, name_from) = me.dir_of(&from)?;
                let (dir_to, name_to) = me.dir_of(&to)?;
                let exchange = flags.contains(fuser::RenameFlags::RENAME_EXCHANGE);
                let replaces = !exchange
                    && nix::sys::stat::fstatat(
                        dir_to.as_fd(),
                        name_to.as_os_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .is_ok();
                let op = Op::Rename {
                    from: me.real(&from),
                    to: me.real(&to),
                    exchange,
                    replaces,
                };
                me.decide(tid, &op, unique).map_err(Errno::from_i32)?;
                if let Op::Rename {
                    from, to, exchange, ..
                } = &op
                {
                    let own = (!*exchange).then(|| me.own_save(tid, from, to)).flatten();
                    let mut brought = vec![(from.as_path(), to.as_path())];
                    if *exchange {
                        brought.push((to, from));
                    }
                    me.names_changed(&[from, to], Some((from, to)), &brought);
                    if let Some(key) = own {
                        me.saved_over(key, to);
                    }
                }
                nix::fcntl::renameat2(
                    dir_from.as_fd(),
                    name_from.as_os_str(),
                    dir_to.as_fd(),
                    name_to.as_os_str(),
                    nix::fcntl::RenameFlags::from_bits_truncate(flags.bits()),
                )
                .map_err(|e| Errno::from_i32(e as i32))?;
                if let Ok(mut nodes) = me.nodes.lock() {
                    nodes.renamed(from.cover, &from.rel, &to.rel, exchange);
                }
                Ok(())
            })();
            match r {
                Ok(()) => reply.send(|r| r.ok()),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let reply = self.0.serve(req, "link", reply);
        let (Some(existing), Some(at)) = (self.0.node(ino), self.0.below_cover(newparent, newname))
        else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        if existing.cover != at.cover {
            return reply.send(|r| r.error(Errno::EXDEV));
        }
        let (me, tid) = (Arc::clone(&self.0), req.pid());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<FileAttr, Errno> {
                let op = Op::Link {
                    existing: me.real(&existing),
                    at: me.real(&at),
                };
                me.decide(tid, &op, unique).map_err(Errno::from_i32)?;
                let (dir_e, name_e) = me.dir_of(&existing)?;
                let (dir_a, name_a) = me.dir_of(&at)?;
                if let Op::Link { existing, at } = &op {
                    me.names_changed(&[at], None, &[(existing, at)]);
                }
                // No AT_SYMLINK_FOLLOW: a link is linked as the link itself.
                nix::unistd::linkat(
                    dir_e.as_fd(),
                    name_e.as_os_str(),
                    dir_a.as_fd(),
                    name_a.as_os_str(),
                    nix::fcntl::AtFlags::empty(),
                )
                .map_err(|e| Errno::from_i32(e as i32))?;
                me.entry_of(at)
            })();
            match r {
                Ok(a) => reply.send(|r| r.entry(&TTL, &a, Generation(0))),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let reply = self.0.serve(req, "symlink", reply);
        let Some(at) = self.0.below_cover(parent, link_name) else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        let (me, tid, text) = (Arc::clone(&self.0), req.pid(), target.to_path_buf());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<FileAttr, Errno> {
                let op = Op::Symlink {
                    at: me.real(&at),
                    text: text.clone(),
                };
                me.decide(tid, &op, unique).map_err(Errno::from_i32)?;
                let (dir, name) = me.dir_of(&at)?;
                if let Op::Symlink { at, .. } = &op {
                    // What the link leads to is judged where it leads, when opened through.
                    me.names_changed(&[at], None, &[]);
                }
                nix::unistd::symlinkat(text.as_os_str(), dir.as_fd(), name.as_os_str())
                    .map_err(|e| Errno::from_i32(e as i32))?;
                me.entry_of(at)
            })();
            match r {
                Ok(a) => reply.send(|r| r.entry(&TTL, &a, Generation(0))),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let reply = self.0.serve(req, "mknod", reply);
        let what = match self.0.child(parent, name) {
            Some(n) => format!("mknod {}", self.0.real(&n).display()),
            None => "mknod".to_string(),
        };
        let e = self.0.refuse_unasked(req.pid(), what);
        reply.send(|r| r.error(e));
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let reply = self.0.serve(req, "statfs", reply);
        let cover = self.0.node(ino).map(|n| n.cover).unwrap_or(0);
        let Some(c) = self.0.covers.get(cover) else {
            return reply.send(|r| r.statfs(0, 0, 0, 0, 0, 4096, 255, 4096));
        };
        match nix::sys::statvfs::fstatvfs(c.parent.as_fd()) {
            Ok(s) => reply.send(|r| {
                r.statfs(
                    s.blocks(),
                    s.blocks_free(),
                    s.blocks_available(),
                    s.files(),
                    s.files_free(),
                    s.block_size() as u32,
                    s.name_max() as u32,
                    s.fragment_size() as u32,
                )
            }),
            Err(e) => reply.send(|r| r.error(Errno::from_i32(e as i32))),
        }
    }
}

impl OutsideFs {
    fn remove(&self, req: &Request, parent: INodeNo, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        let reply = self.0.serve(req, "remove", reply);
        let (Some(p), Some(n)) = (self.0.node(parent), self.0.child(parent, name)) else {
            return reply.send(|r| r.error(Errno::EACCES));
        };
        let (me, tid, name) = (Arc::clone(&self.0), req.pid(), name.to_os_string());
        let unique = reply.unique;
        off_thread(move || {
            let r = (|| -> Result<(), Errno> {
                let path = me.real(&n);
                me.decide(tid, &Op::One(path.clone(), Access::Remove), unique)
                    .map_err(Errno::from_i32)?;
                let d = me.parent_dir(&p)?;
                let own = (!dir).then(|| me.own_file(tid, &path)).flatten();
                me.names_changed(&[&path], None, &[]);
                if let Some(key) = own {
                    me.saved_over(key, &path);
                }
                let flag = if dir {
                    nix::unistd::UnlinkatFlags::RemoveDir
                } else {
                    nix::unistd::UnlinkatFlags::NoRemoveDir
                };
                nix::unistd::unlinkat(d.as_fd(), name.as_os_str(), flag)
                    .map_err(|e| Errno::from_i32(e as i32))
            })();
            match r {
                Ok(()) => reply.send(|r| r.ok()),
                Err(e) => reply.send(|r| r.error(e)),
            }
        });
    }
}

/// Serves the sandbox's `/dev/fuse` with `fs`, on a thread started now that waits for the
/// device on `sock`: one packet carrying one fd (`SCM_RIGHTS`), sent by stage 1 as soon as
/// it has made the filesystem, so the handshake (`FUSE_INIT`, queued by the kernel when the
/// filesystem is created) is answered and the workers wait for requests while stage 2 is
/// still mounting the rest of the sandbox. The thread then serves until the connection ends.
///
/// The receiver gives one answer: `Ok(true)` once the handshake is answered, `Ok(false)` when
/// `sock` hung up with no device (stage 1 went without the filesystem), or why the device
/// cannot be served. On an error the device is closed: it is the connection's only one
/// (stage 1 keeps no copy), so the connection is aborted and every request on the covers
/// fails at once instead of waiting.
///
/// # Errors
/// When the thread cannot start.
pub fn serve_when_sent(
    fs: OutsideFs,
    sock: OwnedFd,
) -> io::Result<std::sync::mpsc::Receiver<io::Result<bool>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("tyba-outside-fs".into())
        .spawn(move || {
            let mut buf = [0u8; 1];
            let got = sys::recv_with_fds(sock.as_fd(), &mut buf, 1);
            drop(sock);
            let watched = Arc::clone(&fs.0);
            let device = match got {
                Ok((_, mut fds)) if fds.len() == 1 => Ok(fds.pop()),
                Ok((0, fds)) if fds.is_empty() => Ok(None),
                Ok(_) => Err(io::Error::other(
                    "stage 1 sent no single device for the outside files",
                )),
                Err(e) => Err(e),
            };
            match device.and_then(|d| d.map(|d| start_session(fs, d)).transpose()) {
                Ok(None) => {
                    let _ = tx.send(Ok(false));
                }
                Ok(Some(session)) => {
                    let _ = tx.send(Ok(true));
                    // The loop ends when the connection does (the sandbox's namespace gone,
                    // or the connection aborted).
                    let _ = session.run();
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
            // The session is gone: dropping the watchdog's duplicate closes the last fd of
            // the device, which fails whatever is still waiting.
            if let Ok(mut d) = watched.watchdog.dev.lock() {
                d.take();
            };
        })?;
    Ok(rx)
}

/// Answers the handshake on `dev` and starts the watchdog: the session, ready to run.
fn start_session(fs: OutsideFs, dev: OwnedFd) -> io::Result<fuser::Session<OutsideFs>> {
    let mut cfg = fuser::Config::default();
    cfg.n_threads = Some(2);
    cfg.acl = fuser::SessionACL::Owner;
    // The watchdog's own duplicate of the device, and the number fuser reads it by.
    let ours = dev.try_clone()?;
    let theirs = dev.as_raw_fd();
    let inner = Arc::downgrade(&fs.0);
    let watched = Arc::clone(&fs.0);
    let session = fuser::Session::from_fd(fs, dev, fuser::SessionACL::Owner, cfg)?;
    if let Ok(mut d) = watched.watchdog.dev.lock() {
        *d = Some((ours, theirs));
    }
    std::thread::Builder::new()
        .name("tyba-outside-watch".into())
        .spawn(move || Inner::watch(inner))?;
    Ok(session)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn covers_are_siblings_of_native_paths_never_their_ancestors() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let wt = root.join("wt");
        for d in ["wt", "O", "home/.cargo/registry", "home/docs", "home/.ssh"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("file.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        let mut plan = SandboxPlan {
            worktree: wt.clone(),
            tmp_dir: root.join("wt/tmp"),
            ..SandboxPlan::default()
        };
        plan.read_only.push(root.join("home/.cargo/registry"));
        std::fs::write(root.join("home/.bashrc"), "export X=1\n").unwrap();
        plan.blanked.push(root.join("home/.bashrc"));
        let covers = plan_covers(&plan, Some(&root.join("home"))).covers;
        let want: Vec<PathBuf> = ["O", "file.txt", "home/.ssh", "home/docs"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(covers, want);
        // None is an ancestor of, equal to or beneath a native path.
        for c in &covers {
            for n in native_paths(&plan) {
                assert!(!is_within(&n, c) && !is_within(c, &n), "{c:?} / {n:?}");
            }
        }
    }

    /// Entries are matched to native paths by whole names: `a` native leaves `ab` and `abc`
    /// covered, `ab` above a native path is descended into (its other entries covered, the
    /// native one not), and a native path beneath another native one changes nothing.
    #[test]
    fn native_paths_are_matched_by_whole_entry_names() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        for d in ["wt", "a/deep", "ab/inner", "ab/other", "abc"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("ab/file"), "x").unwrap();
        let mut plan = SandboxPlan {
            worktree: root.join("wt"),
            tmp_dir: root.join("wt/tmp"),
            ..SandboxPlan::default()
        };
        plan.read_only.push(root.join("a"));
        plan.read_only.push(root.join("a/deep"));
        plan.read_only.push(root.join("ab/inner"));
        let covers = plan_covers(&plan, None).covers;
        let want: Vec<PathBuf> = ["ab/file", "ab/other", "abc"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(covers, want);
    }

    #[test]
    fn a_base_that_is_a_system_path_or_opened_by_the_plan_gets_no_cover() {
        let mut plan = SandboxPlan {
            worktree: PathBuf::from("/usr/src/wt"),
            ..SandboxPlan::default()
        };
        assert!(plan_covers(&plan, None).covers.is_empty());
        plan.worktree = PathBuf::from("/wt");
        assert!(plan_covers(&plan, None).covers.is_empty());
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::create_dir_all(root.join("O")).unwrap();
        plan.worktree = root.join("wt");
        plan.read_only.push(root.clone());
        assert!(plan_covers(&plan, None).covers.is_empty());
    }

    #[test]
    fn a_base_with_more_entries_than_the_limit_is_left_out_whole() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        for d in ["side/wt", "side/O", "home"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for i in 0..=MAX_COVERS {
            std::fs::write(root.join(format!("home/f{i}")), "").unwrap();
        }
        let plan = SandboxPlan {
            worktree: root.join("side/wt"),
            tmp_dir: root.join("side/wt/tmp"),
            ..SandboxPlan::default()
        };
        let p = plan_covers(&plan, Some(&root.join("home")));
        assert_eq!(p.covers, vec![root.join("side/O")]);
        assert_eq!(p.left_out, vec![root.join("home")]);
        // One entry fewer fits: the control.
        std::fs::remove_file(root.join("home/f0")).unwrap();
        std::fs::remove_file(root.join("home/f1")).unwrap();
        let p = plan_covers(&plan, Some(&root.join("home")));
        assert!(p.left_out.is_empty(), "{:?}", p.left_out);
        assert_eq!(p.covers.len(), MAX_COVERS);
    }

    #[test]
    fn the_server_reaches_names_through_no_link() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("O/sub")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("elsewhere/x"), "x").unwrap();
        std::os::unix::fs::symlink("../elsewhere", root.join("O/link")).unwrap();
        let fs = OutsideFs::new(
            &[root.join("O")],
            Arc::new(crate::approve::DenyAll::non_interactive()),
            HistoryFiles::default(),
            0,
            0,
            None,
        )
        .unwrap();
        let node = |rel: &str| Node {
            cover: 0,
            rel: PathBuf::from(rel),
        };
        // The directory of a name under a link: refused, not followed (ELOOP).
        assert!(fs.0.dir_of(&node("O/link/x")).is_err());
        // The control: a real directory on the way.
        let (_, name) = fs.0.dir_of(&node("O/sub/x")).unwrap();
        assert_eq!(name, "x");
        // A cover's own entry: in the cover's parent, read through only.
        assert!(fs.0.below_cover(INodeNo::ROOT, OsStr::new("0")).is_none());
    }

    #[test]
    fn a_rename_moves_the_known_inodes_with_it() {
        let mut n = Nodes {
            next: 1,
            ..Nodes::default()
        };
        let node = |rel: &str| Node {
            cover: 0,
            rel: PathBuf::from(rel),
        };
        let dir = n.ino(node("O/d"));
        let inner = n.ino(node("O/d/f"));
        let old = n.ino(node("O/e"));
        let other = n.ino(node("O/dx"));
        n.renamed(0, Path::new("O/d"), Path::new("O/e"), false);
        assert_eq!(n.by_ino[&dir], node("O/e"));
        assert_eq!(n.by_ino[&inner], node("O/e/f"));
        assert!(
            !n.by_ino.contains_key(&old),
            "the replaced entry is forgotten"
        );
        assert_eq!(
            n.by_ino[&other],
            node("O/dx"),
            "a sibling sharing a prefix stays"
        );
        assert_eq!(n.by_node[&node("O/e/f")], inner);
        // Exchanged: both move.
        n.renamed(0, Path::new("O/e"), Path::new("O/dx"), true);
        assert_eq!(n.by_ino[&dir], node("O/dx"));
        assert_eq!(n.by_ino[&other], node("O/e"));
    }

    #[test]
    fn a_grant_for_an_operation_covers_that_operation_only() {
        let r = |from: &str, to: &str| Op::Rename {
            from: PathBuf::from(from),
            to: PathBuf::from(to),
            exchange: false,
            replaces: false,
        };
        assert!(r("/a", "/b").covers(&Op::Rename {
            from: PathBuf::from("/a"),
            to: PathBuf::from("/b"),
            exchange: false,
            replaces: true,
        }));
        assert!(!r("/a", "/b").covers(&r("/a", "/c")));
        assert!(!r("/a", "/b").covers(&r("/b", "/a")));
        assert!(!r("/a", "/b").covers(&Op::One(PathBuf::from("/b"), Access::Read)));
        let l = Op::Link {
            existing: PathBuf::from("/a"),
            at: PathBuf::from("/b"),
        };
        assert!(!l.covers(&Op::One(PathBuf::from("/a"), Access::Read)));
        // A symbolic link's text is named (its credential makes the ask sensitive) but never
        // touched.
        let s = Op::Symlink {
            at: PathBuf::from("/h/O/l"),
            text: PathBuf::from("/h/.ssh/id_rsa"),
        };
        assert_eq!(s.touched(), vec![(Path::new("/h/O/l"), true)]);
        assert!(s.named().contains(&Path::new("/h/.ssh/id_rsa")));
    }

    /// Only the system's own saver programs, running only system code, save files their way
    /// (review 14's r14-01).
    #[test]
    fn only_the_systems_savers_running_system_code_save() {
        let maps = "5581c000-5581d000 r-xp 00002000 fe:01 123 /usr/bin/sed\n\
                    7f00-7f01 r-xp 00000000 fe:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7ffd-7ffe r-xp 00000000 00:00 0 [vdso]\n\
                    7f02-7f03 rw-p 00000000 00:00 0 \n";
        let env = b"LANG=C.UTF-8\0HOME=/home/p\0";
        let sed = Path::new("/usr/bin/sed");
        assert!(is_system_saver(sed, maps, env));
        assert!(is_system_saver(Path::new("/bin/cp"), maps, env));
        // Another program, the agent's own `sed`, or agent code mapped in: not.
        assert!(!is_system_saver(Path::new("/usr/bin/find"), maps, env));
        assert!(!is_system_saver(Path::new("/tmp/wt/bin/sed"), maps, env));
        let preloaded = format!("{maps}7f04-7f05 r-xp 00000000 fe:01 789 /tmp/wt/x.so\n");
        assert!(!is_system_saver(sed, &preloaded, env));
        let deleted = format!("{maps}7f04-7f05 r-xp 00000000 fe:01 789 /usr/lib/x.so (deleted)\n");
        assert!(!is_system_saver(sed, &deleted, env));
        // Executable memory with no file (code copied there), or a loader variable: not
        // (review 15's r15-01).
        let anonymous = format!("{maps}7f06-7f07 r-xp 00000000 00:00 0 \n");
        assert!(!is_system_saver(sed, &anonymous, env));
        let memfd = format!("{maps}7f06-7f07 r-xp 00000000 00:01 9 /memfd:x (deleted)\n");
        assert!(!is_system_saver(sed, &memfd, env));
        assert!(!is_system_saver(
            sed,
            maps,
            b"LANG=C\0LD_PRELOAD=/usr/lib/x.so\0"
        ));
        // Nor a locale naming a path (review 16's r16-02: a message catalog of the agent's).
        assert!(!is_system_saver(sed, maps, b"LANGUAGE=../../wt/mo\0"));
        // A system directory may hold the agent's worktree: nothing mapped from there.
        let wt = [PathBuf::from("/usr/local/src/wt")];
        assert!(maps_none_of(sed, maps, &wt));
        let theirs = format!("{maps}7f04-7f05 r-xp 00000000 fe:01 789 /usr/local/src/wt/x.so\n");
        assert!(is_system_saver(sed, &theirs, env));
        assert!(!maps_none_of(sed, &theirs, &wt));
        assert!(!maps_none_of(Path::new("/usr/local/src/wt/sed"), maps, &wt));
        // A data mapping from there is no code.
        let data = format!("{maps}7f04-7f05 r--p 00000000 fe:01 789 /usr/local/src/wt/x.mo\n");
        assert!(maps_none_of(sed, &data, &wt));
        assert!(is_system_saver(Path::new("/usr/local/bin/git"), maps, env));
        assert!(is_system_saver(
            sed,
            maps,
            b"LANGUAGE=fr:en\0LC_ALL=C.UTF-8\0"
        ));
    }

    /// A path is where its symbolic links lead, one that leads nowhere yet too (review 21's
    /// r21-01: `~/.config -> dotfiles/config` before the dotfiles exist).
    #[test]
    fn a_path_through_a_link_that_leads_nowhere_yet_is_where_it_will_be() {
        let d = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(d.path()).unwrap();
        std::os::unix::fs::symlink("dotfiles/config", h.join(".config")).unwrap();
        let own = h.join(".config/tyba");
        assert_eq!(through_links(&own), h.join("dotfiles/config/tyba"));
        assert_eq!(real_path(&own), own, "real_path stops at the link");
        std::os::unix::fs::symlink(h.join("abs"), h.join("l")).unwrap();
        assert_eq!(through_links(&h.join("l/x/../y")), h.join("abs/y"));
        std::fs::create_dir(h.join("real")).unwrap();
        assert_eq!(through_links(&h.join("real/z")), h.join("real/z"));
        std::os::unix::fs::symlink("loop", h.join("loop")).unwrap();
        assert_eq!(through_links(&h.join("loop/x")), h.join("loop/x"));
    }

    /// Each saver's temporary copy has its program's own name, and no other (review 19's
    /// r19-01).
    #[test]
    fn a_savers_copy_has_its_programs_name_only() {
        let f = Path::new("/o/f.cfg");
        assert!(copy_name_fits("git", f, Path::new("/o/f.cfg.lock")));
        assert!(copy_name_fits("sed", f, Path::new("/o/sed8cZldx")));
        assert!(copy_name_fits("zip", f, Path::new("/o/zi5Xd8YK")));
        assert!(!copy_name_fits("zip", f, Path::new("/o/zi5Xd8YK.x")));
        for (saver, copy) in [
            ("git", "/o/config.lock"),
            ("git", "/o/f.cfg.lock.x"),
            ("git", "/o/sed8cZldx"),
            ("sed", "/o/sed8cZld"),
            ("sed", "/o/sed8cZ.dx"),
            ("sed", "/o/f.cfg.lock"),
            ("install", "/o/x"),
            ("cp", "/o/x"),
        ] {
            assert!(!copy_name_fits(saver, f, Path::new(copy)), "{saver} {copy}");
        }
    }

    /// A metadata grant is for its path (and beneath it only when recursive), and not for what
    /// arrived beneath it since (review 12's r12-02 and r12-04: a secret linked into a
    /// `chmod`-ed directory, what lies beneath a `chmod DIR` without `-R`).
    #[test]
    fn a_metadata_grant_is_its_path_and_beneath_only_when_recursive() {
        let p = |s: &str| PathBuf::from(s);
        let g = |path: &str, tree: bool, arrived: &[&str]| RunnerGrant {
            path: p(path),
            write: false,
            change: false,
            arrived: arrived.iter().map(|a| p(a)).collect(),
            file: false,
            save_of: None,
            meta: true,
            meta_tree: tree,
            regular_only: false,
            dirs_from: None,
        };
        let flat = [g("/o/d", false, &[])];
        assert!(grants_let_meta(&flat, &p("/o/d"), false));
        assert!(!grants_let_meta(&flat, &p("/o/d/f"), false));
        let tree = [g("/o/d", true, &["/o/d/secret"])];
        assert!(grants_let_meta(&tree, &p("/o/d/f"), false));
        assert!(!grants_let_meta(&tree, &p("/o/d/secret"), false));
        assert!(!grants_let_meta(&tree, &p("/o/e"), false));
        // The times of what the command writes.
        let w = [RunnerGrant {
            write: true,
            meta: false,
            ..g("/o/w", false, &[])
        }];
        assert!(grants_let_meta(&w, &p("/o/w/x"), true));
        assert!(!grants_let_meta(&w, &p("/o/w/x"), false));
    }

    /// A temporary copy an approved command left is removed when it ends, when it is still
    /// that very file (device and inode as made); anything else at its name stays.
    #[test]
    fn a_left_copy_is_removed_only_when_it_is_still_that_file() {
        use std::os::unix::fs::MetadataExt;
        let fs = server(&[], &[], None);
        let d = std::env::temp_dir().join(format!("tyba-left-copy-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (copy, other) = (d.join("copy"), d.join("other"));
        std::fs::write(&copy, "c").unwrap();
        std::fs::write(&other, "o").unwrap();
        let id = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let save = |p: &Path| SaveOf {
            of: d.join("f"),
            id: id(p),
        };
        // The same name, another file (the copy's identity recorded, another file there now):
        // kept.
        let was = save(&copy);
        std::fs::rename(&other, &copy).unwrap();
        fs.0.remove_left_save(&copy, &was);
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), "o");
        // The copy itself: removed.
        let now = save(&copy);
        fs.0.remove_left_save(&copy, &now);
        assert!(!copy.exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// An approved command's temporary copies are its own to write, remove and rename over
    /// the file each saves, and take no other name (review 12's r12-01): a copy renamed over
    /// another copy, exchanged with it, linked, or the saved file renamed over a copy, are
    /// judged without them (asked).
    #[test]
    fn a_commands_temporary_copies_take_no_other_name() {
        let p = |s: &str| PathBuf::from(s);
        let file = RunnerGrant {
            file: true,
            ..RunnerGrant::writing(&p("/o/f"))
        };
        let copy = |n: &str| RunnerGrant {
            path: p(n),
            file: false,
            save_of: Some(SaveOf {
                of: p("/o/f"),
                id: (1, 2),
            }),
            ..file.clone()
        };
        let grants = [file.clone(), copy("/o/t1"), copy("/o/t2")];
        let rename = |from: &str, to: &str, exchange: bool| Op::Rename {
            from: p(from),
            to: p(to),
            exchange,
            replaces: true,
        };
        // Its own save, writing and removing a copy: covered.
        assert!(grants_cover(&grants, &rename("/o/t1", "/o/f", false)));
        assert!(grants_cover(&grants, &Op::One(p("/o/t1"), Access::Write)));
        assert!(grants_cover(&grants, &Op::One(p("/o/t2"), Access::Remove)));
        // Any other name for a copy, or for the file through a copy: not.
        for op in [
            rename("/o/t1", "/o/t2", false),
            rename("/o/t1", "/o/t2", true),
            rename("/o/t1", "/o/f", true),
            rename("/o/f", "/o/t1", false),
            Op::Link {
                existing: p("/o/t1"),
                at: p("/o/t2"),
            },
            Op::Symlink {
                at: p("/o/t1"),
                text: p("/etc/passwd"),
            },
        ] {
            assert!(!grants_cover(&grants, &op), "{op:?}");
        }
        // The name the command made anew holds a regular file only (review 13's r13-03).
        let anew = [RunnerGrant {
            file: true,
            regular_only: true,
            ..RunnerGrant::writing(&p("/o/f"))
        }];
        assert!(grants_cover(&anew, &Op::One(p("/o/f"), Access::Create)));
        assert!(!grants_cover(&anew, &Op::One(p("/o/f"), Access::Mkdir)));
        assert!(!grants_cover(
            &anew,
            &Op::Symlink {
                at: p("/o/f"),
                text: p("secret.txt"),
            }
        ));
        // Control: without the copies' exclusion the first of those was covered.
        assert!(rename("/o/t1", "/o/t2", false)
            .touches()
            .iter()
            .all(|(path, t)| grants.iter().any(|g| g.lets(path, *t))));
    }

    /// What an approved line's grant lets its command do (`RunnerGrant::lets`, with
    /// `Op::touches`): a read grant reading and listing; a change grant (`rm`, `mv`, `ln`)
    /// removing, renaming and linking the names beneath it, never writing a file's content,
    /// creating a file or making a directory; a write grant everything.
    #[test]
    fn an_approved_lines_grant_lets_its_command_do_what_the_line_does() {
        let g = |path: &str, write: bool, change: bool| RunnerGrant {
            write,
            change,
            ..RunnerGrant::writing(Path::new(path))
        };
        let lets = |grants: &[RunnerGrant], op: &Op| {
            op.touches()
                .iter()
                .all(|(p, t)| grants.iter().any(|g| g.lets(p, *t)))
        };
        let one = |p: &str, a: Access| Op::One(PathBuf::from(p), a);
        let rename = |from: &str, to: &str| Op::Rename {
            from: PathBuf::from(from),
            to: PathBuf::from(to),
            exchange: false,
            replaces: false,
        };
        let read = [g("/o/a", false, false)];
        let change = [g("/o/a", false, true), g("/o/b", false, true)];
        let dir = [g("/o/d", false, true)];
        let write = [g("/o/a", true, false), g("/o/b", true, false)];
        // Reading: any grant.
        for grants in [&read[..], &change, &write] {
            assert!(lets(grants, &one("/o/a", Access::Read)));
        }
        // Removing and renaming: a change or a write grant of every name, never a read one.
        assert!(!lets(&read, &one("/o/a", Access::Remove)));
        assert!(lets(&change, &one("/o/a", Access::Remove)));
        assert!(lets(&write, &one("/o/a", Access::Remove)));
        assert!(lets(&change, &rename("/o/a", "/o/b")));
        assert!(
            !lets(&change, &rename("/o/a", "/o/c")),
            "the new name not granted"
        );
        assert!(!lets(&change[..1], &rename("/o/a", "/o/b")));
        assert!(lets(
            &change,
            &Op::Link {
                existing: PathBuf::from("/o/a"),
                at: PathBuf::from("/o/b"),
            }
        ));
        // `rm -rf /o/d`: what is beneath it, listed and removed; nothing beside it.
        assert!(lets(&dir, &one("/o/d/x/y", Access::Remove)));
        assert!(lets(&dir, &one("/o/d", Access::List)));
        assert!(!lets(&dir, &one("/o/dx", Access::Remove)));
        // A change grant writes nothing: no content, no new file, no directory.
        for a in [Access::Write, Access::Create, Access::Mkdir] {
            assert!(!lets(&change, &one("/o/a", a)), "{a:?}");
            assert!(lets(&write, &one("/o/a", a)), "{a:?}");
        }
    }

    /// A grant is for what its name held: a removal, a rename (either name), a link or a
    /// symbolic link made there ends every grant on that name or beneath it, the processes'
    /// and the approved lines' alike; grants on other names, and on the directory holding it,
    /// stay.
    #[test]
    fn a_change_of_a_name_ends_the_grants_made_for_it() {
        let fs = server(&[], &[], None);
        let root = ProcId { pid: 1, start: 1 };
        let grant = |op: Op| Grant {
            root,
            agent_only: false,
            op,
            role: None,
        };
        let p = |s: &str| PathBuf::from(s);
        let one = |s: &str, a: Access| Op::One(p(s), a);
        let rg = |s: &str| RunnerGrant::writing(&p(s));
        let fill = || {
            *fs.0.grants.lock().unwrap() = vec![
                grant(one("/o/scratch", Access::Create)),
                grant(one("/o/d/x", Access::Read)),
                grant(one("/o/d", Access::List)),
                grant(one("/o/other", Access::Write)),
                grant(Op::Link {
                    existing: p("/o/other"),
                    at: p("/o/scratch2"),
                }),
            ];
            fs.0.runners
                .lock()
                .unwrap()
                .insert(7, (1, vec![rg("/o/scratch"), rg("/o/d"), rg("/o/other")]));
        };
        let left = || -> (Vec<String>, Vec<PathBuf>) {
            let g = fs.0.grants.lock().unwrap();
            let r = fs.0.runners.lock().unwrap();
            (
                g.iter().map(|g| g.op.full()).collect(),
                r[&7].1.iter().map(|g| g.path.clone()).collect(),
            )
        };
        fill();
        fs.0.names_changed(&[Path::new("/o/scratch")], None, &[]);
        let (g, r) = left();
        assert!(!g.iter().any(|t| t == "/o/scratch"), "{g:?}");
        assert_eq!(g.len(), 4, "{g:?}");
        assert_eq!(r, [p("/o/d"), p("/o/other")]);
        // A directory renamed: what was granted beneath it ends, the directory's own grant too.
        fill();
        fs.0.names_changed(
            &[Path::new("/o/d"), Path::new("/o/e")],
            Some((Path::new("/o/d"), Path::new("/o/e"))),
            &[(Path::new("/o/d"), Path::new("/o/e"))],
        );
        let (g, r) = left();
        assert_eq!(g.len(), 3, "{g:?}");
        assert!(!g.iter().any(|t| t.starts_with("/o/d")), "{g:?}");
        assert_eq!(r, [p("/o/scratch"), p("/o/other")]);
        // A name that only begins like a granted one is another name.
        fill();
        fs.0.names_changed(&[Path::new("/o/scratch2")], None, &[]);
        let (g, r) = left();
        assert_eq!(g.len(), 4, "the link's grant names /o/scratch2: {g:?}");
        assert!(g.iter().any(|t| t == "/o/scratch"), "{g:?}");
        assert_eq!(r.len(), 3);
        // A file linked or renamed into a granted directory from outside the grant is not
        // the line's to reach (review 10's r10-01); one renamed within the grant is.
        fill();
        let lets = |path: &str| {
            let r = fs.0.runners.lock().unwrap();
            r[&7].1.iter().any(|g| g.lets(Path::new(path), Touch::Read))
        };
        assert!(
            lets("/o/d/x"),
            "control: the grant covers what the directory held"
        );
        fs.0.names_changed(
            &[Path::new("/o/d/s2")],
            None,
            &[(Path::new("/o/secret"), Path::new("/o/d/s2"))],
        );
        assert!(!lets("/o/d/s2"), "a secret linked in");
        fs.0.names_changed(
            &[Path::new("/o/secretdir"), Path::new("/o/d/sub")],
            Some((Path::new("/o/secretdir"), Path::new("/o/d/sub"))),
            &[(Path::new("/o/secretdir"), Path::new("/o/d/sub"))],
        );
        assert!(!lets("/o/d/sub/key"), "a directory renamed in");
        fs.0.names_changed(
            &[Path::new("/o/d/index.lock"), Path::new("/o/d/index")],
            Some((Path::new("/o/d/index.lock"), Path::new("/o/d/index"))),
            &[(Path::new("/o/d/index.lock"), Path::new("/o/d/index"))],
        );
        assert!(lets("/o/d/index"), "renamed within the grant");
        assert!(lets("/o/d/x"), "the rest of the directory");
        // What arrived stays out under its next names inside the directory (review 11's
        // r11-01): renamed, linked again, or moved out of an arrived directory.
        for (src, dst) in [
            ("/o/d/s2", "/o/d/s3"),
            ("/o/d/s3", "/o/d/s4"),
            ("/o/d/sub/key", "/o/d/key2"),
        ] {
            fs.0.names_changed(&[Path::new(dst)], None, &[(Path::new(src), Path::new(dst))]);
            assert!(!lets(dst), "{src} -> {dst}");
        }
        assert!(lets("/o/d/x"), "the rest of the directory still");
    }

    /// A server for `covers` asking nobody, whose own directories are `own` and whose home
    /// is `home`.
    fn server(covers: &[PathBuf], own: &[PathBuf], home: Option<&Path>) -> OutsideFs {
        let mut fs = OutsideFs::new(
            covers,
            Arc::new(crate::approve::DenyAll::non_interactive()),
            HistoryFiles::new(&[], home),
            0,
            0,
            None,
        )
        .unwrap();
        let inner = Arc::get_mut(&mut fs.0).unwrap();
        let (ids, above) = identities(own);
        inner.own = own.to_vec();
        inner.own_ids = ids;
        inner.own_ancestors = above;
        fs
    }

    #[test]
    fn a_renames_ask_names_source_and_destination_with_the_worse_colour() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("O")).unwrap();
        let fs = server(&[root.join("O")], &[], None);
        // A source long enough to fill the headline on its own.
        let from = root.join(format!("O/{}/notes.txt", "d".repeat(300)));
        let to = root.join("O/.ssh/authorized_keys");
        let op = Op::Rename {
            from: from.clone(),
            to: to.clone(),
            exchange: false,
            replaces: true,
        };
        let req = fs.0.file_ask(&op, "this command".into(), 1);
        let shown = req.shown();
        assert!(
            shown.contains("notes.txt") && shown.contains(".ssh/authorized_keys"),
            "{shown}"
        );
        let reasons = req.reasons.join("\n");
        assert!(reasons.contains(&from.display().to_string()), "{reasons}");
        assert!(reasons.contains(&to.display().to_string()), "{reasons}");
        // The destination is the credential: the ask is sensitive for it.
        assert_eq!(req.verdict, Verdict::Red);
        assert!(
            req.reasons[0].contains(&format!("`{}` is a credential path (.ssh)", to.display())),
            "{reasons}"
        );
        // The same for a link, and each way round; the control names no credential.
        let link = Op::Link {
            existing: to.clone(),
            at: from.clone(),
        };
        let req = fs.0.file_ask(&link, "this command".into(), 1);
        assert!(req.shown().contains("authorized_keys") && req.shown().contains("notes.txt"));
        assert!(req.reasons[0].contains("credential path"));
        let plain = Op::Rename {
            from: from.clone(),
            to: root.join("O/plain.txt"),
            exchange: false,
            replaces: false,
        };
        let req = fs.0.file_ask(&plain, "this command".into(), 1);
        assert!(!req.reasons.join(" ").contains("credential"));
    }

    #[test]
    fn tybas_own_directories_are_known_by_identity_and_their_ancestors_stay_put() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("O/state/tyba/log")).unwrap();
        std::fs::create_dir_all(root.join("O/other")).unwrap();
        let own = root.join("O/state/tyba");
        let fs = server(&[root.join("O")], std::slice::from_ref(&own), None);
        let read = |p: &str| Op::One(root.join(p), Access::Read);
        let rename = |a: &str, b: &str| Op::Rename {
            from: root.join(a),
            to: root.join(b),
            exchange: false,
            replaces: false,
        };
        assert!(fs.0.is_own(&read("O/state/tyba/log")));
        assert!(!fs.0.is_own(&read("O/other")), "the control");
        // Renaming or removing a directory that holds them: refused.
        assert!(fs.0.is_own(&rename("O/state", "O/s2")));
        assert!(fs.0.is_own(&Op::One(root.join("O/state"), Access::Remove)));
        assert!(!fs.0.is_own(&rename("O/other", "O/o2")), "the control");
        // Renamed all the same (by someone outside): reached under its new name, it is
        // still tyba's own.
        std::fs::rename(root.join("O/state"), root.join("O/s2")).unwrap();
        assert!(fs.0.is_own(&read("O/s2/tyba/log")));
        assert!(fs.0.is_own(&read("O/s2/tyba")));
        assert!(fs.0.is_own(&rename("O/s2", "O/s3")));
        assert!(!fs.0.is_own(&read("O/other")), "the control");
    }

    #[test]
    fn a_credential_directory_reached_by_a_link_is_a_credential_by_its_real_path() {
        let t = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(home.join("dotfiles/ssh")).unwrap();
        std::fs::write(home.join("dotfiles/ssh/work_key"), "KEY").unwrap();
        std::fs::create_dir_all(home.join("dotfiles/vim")).unwrap();
        std::os::unix::fs::symlink("dotfiles/ssh", home.join(".ssh")).unwrap();
        let fs = server(&[home.join("dotfiles")], &[], Some(&home));
        let key = home.join("dotfiles/ssh/work_key");
        assert_eq!(
            tyba_policy::credential_in_path(&key),
            None,
            "no name says so"
        );
        assert_eq!(
            fs.0.credential(&key).as_deref(),
            Some("~/.ssh, reached by another name")
        );
        let req =
            fs.0.file_ask(&Op::One(key, Access::Read), "this command".into(), 1);
        assert!(req.reasons[0].contains("sensitive"), "{:?}", req.reasons);
        assert_eq!(fs.0.credential(&home.join("dotfiles/vim/vimrc")), None);
    }

    #[test]
    fn grants_cover_what_was_approved_only() {
        assert!(Access::Write.covers(Access::Read));
        assert!(Access::Create.covers(Access::Write));
        assert!(!Access::Read.covers(Access::Write));
        assert!(!Access::List.covers(Access::Read));
        assert!(!Access::Read.covers(Access::List));
        assert!(!Access::Mkdir.covers(Access::Remove));
    }

    /// A grant to make a directory and the missing ones above it (`mkdir -p`) lets the
    /// command make and list the directories on the way, strictly beneath the ancestor that
    /// existed, and nothing else there: no file, no sibling, nothing above, nothing beneath
    /// a name that arrived since.
    #[test]
    fn a_made_directorys_grant_makes_the_directories_on_its_way_only() {
        let p = |s: &str| PathBuf::from(s);
        let g = RunnerGrant {
            dirs_from: Some(p("/o")),
            arrived: vec![p("/o/a/x")],
            ..RunnerGrant::writing(Path::new("/o/a/b/c"))
        };
        let grants = [g];
        let one = |s: &str, a: Access| grants_cover(&grants, &Op::One(p(s), a));
        for d in ["/o/a", "/o/a/b", "/o/a/b/c"] {
            assert!(one(d, Access::Mkdir), "{d}");
        }
        // Listing on the way is the command's only for what it made itself (by identity,
        // `Inner::made_on_the_way`), not by path.
        for d in ["/o/a", "/o/a/b"] {
            assert!(!one(d, Access::List), "{d}");
        }
        assert!(one("/o/a/b/c", Access::List));
        assert!(one("/o/a/b/c/f", Access::Create));
        // At its own name, a directory only (review 18's r18-01).
        assert!(!one("/o/a/b/c", Access::Create));
        let sym = |at: &str| Op::Symlink {
            at: p(at),
            text: p("/h/.bashrc"),
        };
        assert!(!grants_cover(&grants, &sym("/o/a/b/c")));
        assert!(grants_cover(&grants, &sym("/o/a/b/c/l")));
        let link = Op::Link {
            existing: p("/o/a/b/c/f"),
            at: p("/o/a/b/c"),
        };
        assert!(!grants_cover(&grants, &link));
        let rename = |from: &str, to: &str| Op::Rename {
            from: p(from),
            to: p(to),
            exchange: false,
            replaces: false,
        };
        assert!(!grants_cover(&grants, &rename("/o/a/b/c/f", "/o/a/b/c")));
        assert!(!grants_cover(&grants, &rename("/o/a/b/c", "/o/a/b/c/d")));
        assert!(grants_cover(&grants, &rename("/o/a/b/c/f", "/o/a/b/c/g")));
        for (path, a) in [
            ("/o", Access::Mkdir),
            ("/o/a/f", Access::Create),
            ("/o/a/b/f", Access::Write),
            ("/o/a/z", Access::Mkdir),
            ("/o/z", Access::Mkdir),
            ("/o/a", Access::Remove),
            ("/o/a/x", Access::Mkdir),
            ("/o/a/x/y", Access::List),
        ] {
            assert!(!one(path, a), "{path} {a:?}");
        }
        // A name that arrived on the way ends the way beneath it; what arrives there is
        // recorded (`Inner::names_changed` takes what the grant holds).
        let g = &grants[0];
        assert!(g.holds(&p("/o/a")) && g.holds(&p("/o/a/b/c/d")));
        assert!(!g.holds(&p("/o")) && !g.holds(&p("/o/a/z")) && !g.holds(&p("/o/z")));
        let arrived = [RunnerGrant {
            arrived: vec![p("/o/a")],
            ..g.clone()
        }];
        assert!(!grants_cover(
            &arrived,
            &Op::One(p("/o/a/b"), Access::Mkdir)
        ));
        // Without `dirs_from` (a file or an existing directory): only beneath its path.
        let plain = [RunnerGrant::writing(Path::new("/o/a/b/c"))];
        assert!(!grants_cover(&plain, &Op::One(p("/o/a/b"), Access::Mkdir)));
    }

    #[test]
    fn process_trees_are_matched_by_identity() {
        let me = procfs::proc_id(std::process::id()).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(in_tree(child.id(), me));
        assert!(in_tree(me.pid, me));
        let other = ProcId {
            pid: me.pid,
            start: me.start.wrapping_add(1),
        };
        assert!(!in_tree(child.id(), other), "a reused pid is not the root");
        let c = procfs::proc_id(child.id()).unwrap();
        assert!(!in_tree(me.pid, c), "a parent is not in its child's tree");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The server's answers before it serves: a hang-up with no device is "no filesystem",
    /// a packet without one is an error, and a device whose handshake fails is an error with
    /// the device closed (the connection's only copy: closing it is what fails the requests
    /// on the covers at once). The control: the same pipe, not sent, stays open.
    #[test]
    fn the_server_answers_once_whatever_stage_1_sends() {
        use std::io::Write;
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(root.join("O")).unwrap();
        let fs = || {
            OutsideFs::new(
                &[root.join("O")],
                Arc::new(crate::approve::DenyAll::non_interactive()),
                HistoryFiles::default(),
                0,
                0,
                None,
            )
            .unwrap()
        };
        let pair = || sys::seqpacket_pair().unwrap();
        let wait = |rx: std::sync::mpsc::Receiver<io::Result<bool>>| {
            rx.recv_timeout(Duration::from_secs(10)).unwrap()
        };

        let (ours, theirs) = pair();
        let rx = serve_when_sent(fs(), theirs).unwrap();
        drop(ours);
        assert!(!wait(rx).unwrap(), "a hang-up is no filesystem");

        let (ours, theirs) = pair();
        let rx = serve_when_sent(fs(), theirs).unwrap();
        sys::send_with_fds(ours.as_fd(), b"F", &[]).unwrap();
        assert!(wait(rx).is_err(), "a packet without a device");

        // Not a FUSE device: a pipe holding a request that is not FUSE_INIT (a LOOKUP of
        // "x": `fuse_in_header`, 40 bytes, then the name).
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mut w = File::from(w);
        let mut req = Vec::new();
        req.extend_from_slice(&48u32.to_ne_bytes()); // len
        req.extend_from_slice(&1u32.to_ne_bytes()); // opcode: FUSE_LOOKUP
        req.extend_from_slice(&1u64.to_ne_bytes()); // unique
        req.extend_from_slice(&1u64.to_ne_bytes()); // nodeid: the root
        req.extend_from_slice(&[0u8; 16]); // uid, gid, pid, total_extlen, padding
        req.extend_from_slice(b"x\0\0\0\0\0\0\0");
        w.write_all(&req).unwrap();
        let (ours, theirs) = pair();
        let rx = serve_when_sent(fs(), theirs).unwrap();
        sys::send_with_fds(ours.as_fd(), b"F", &[r.as_raw_fd()]).unwrap();
        // The control: while this copy of the read end lives, the pipe takes writes.
        w.write_all(b"x").unwrap();
        drop(r);
        assert!(wait(rx).is_err(), "a handshake that fails");
        let closed = w.write_all(b"x").map_err(|e| e.kind());
        assert_eq!(
            closed,
            Err(io::ErrorKind::BrokenPipe),
            "the server closed the device it could not serve"
        );
    }
}
