//! The agents' state as a session-private copy (issue 13 class 8; docs/sandbox.md "Agent
//! state").
//!
//! An agent's state directories (`~/.claude`, `~/.codex`, `~/.gemini`…, the policy's
//! `agent_state`) hold files the person's next run of the agent executes or obeys: MCP
//! servers in `~/.claude.json`, `LD_PRELOAD` in `~/.codex/.env`, `~/.gemini/extensions/*`,
//! trusted-folder lists, hooks. So the agent never writes them: each state directory is an
//! overlay in the sandbox's mount namespace (`Documentation/filesystems/overlayfs.rst`: the
//! person's directory the lower layer, read through; a session-private directory outside every
//! writable root the upper layer, where every write lands), and each state *file*
//! (`~/.claude.json`) a private copy bound over it. The agent's first-run answers (folder
//! trust) are saved to that copy, so its TUI proceeds, and the person's settings stay as they
//! were.
//!
//! At the session's end, with no process of the sandbox left, [`merge_back`] carries back
//! only the files its profile names as data (`[agents.NAME] data`: transcripts, history,
//! refreshed credentials), each copied as bytes into a new file of the person's state (never
//! a link, a device or a directory; size bounded; not executable) through directories opened
//! one by one without following any symbolic link. Everything else the agent wrote is
//! dropped and listed. It fails closed: when any file to merge cannot be read or staged, none
//! is merged, and the report says why.
//!
//! The mounts are made by [`mount_layers`] in the sandbox's stage 2 (`crate::launch`), before
//! the read-only binds of the control files, which then bind the overlay's view.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Largest data file merged back, in bytes: a larger one fails the merge (nothing merged).
pub const MAX_DATA_FILE: u64 = 64 << 20;
/// Largest total merged back in one session, in bytes.
pub const MAX_DATA_TOTAL: u64 = 512 << 20;
/// Most entries walked in the session copies (a larger tree fails the merge).
const MAX_ENTRIES: usize = 200_000;
/// Deepest directory walked.
const MAX_DEPTH: usize = 64;

/// What one state entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// A directory: an overlay with the person's directory as its lower layer.
    Dir,
    /// A file: a private copy bound over it.
    File,
}

/// One agent state entry and its session-private copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLayer {
    /// The person's state entry, physical (canonical) path.
    pub real: PathBuf,
    /// Directory or file.
    pub kind: LayerKind,
    /// The overlay's upper directory (a directory), or the private copy (a file).
    pub upper: PathBuf,
    /// The overlay's work directory (a directory; unused for a file).
    pub work: PathBuf,
    /// Data patterns relative to `real` (`sessions/**/*.jsonl`): the files merged back.
    pub data: Vec<String>,
}

/// Every state layer of a session, under one private directory.
#[derive(Debug, Default)]
pub struct StateLayers {
    /// The private directory (mode 0700) holding the upper layers and copies; removed by
    /// [`StateLayers::remove`].
    pub root: Option<PathBuf>,
    /// The layers, outermost state entries only (one inside another is covered by it).
    pub layers: Vec<StateLayer>,
}

/// Where the session copies go, never inside a writable root: `tyba-UID-ID.state` (from
/// `tmp_dir`, `…/tyba-UID-ID`) on a memory filesystem when one is at hand, else beside the
/// session's temp dir. A directory made and removed on a disk costs a block, and on a disk
/// mounted `discard` each removal waits for the device (milliseconds per launch); state
/// copies are small and read back from memory at the end anyway (the overlay is
/// `volatile`). The memory filesystem is, in order: `$XDG_RUNTIME_DIR` when it is the
/// user's own tmpfs of mode 0700 (XDG Base Directory Specification), `/dev/shm` when it is
/// a tmpfs with the sticky bit. Neither is granted to the agent
/// ([`crate::sandbox`]'s devices).
pub fn layers_root_for(tmp_dir: &Path) -> PathBuf {
    beside_session(tmp_dir, ".state")
}

/// `tyba-UID-ID<suffix>` (from `tmp_dir`, `…/tyba-UID-ID`) where [`layers_root_for`] puts the
/// state copies: on a memory filesystem when one is at hand, else beside the session's temp
/// dir; never inside a root the agent may write.
pub fn beside_session(tmp_dir: &Path, suffix: &str) -> PathBuf {
    let mut name = tmp_dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    if let Some(dir) = memory_dir() {
        return dir.join(name);
    }
    let mut s = tmp_dir.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// A tmpfs directory for the session copies ([`layers_root_for`]), if there is one.
pub(crate) fn memory_dir() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        let own = std::fs::symlink_metadata(&run).is_ok_and(|m| {
            m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o077 == 0
        });
        if run.is_absolute() && own && crate::broker::paths::is_memory_fs(&run) {
            return Some(run);
        }
    }
    crate::broker::paths::shared_memory_fs().map(Path::to_path_buf)
}

/// Whether a path can be named in overlayfs's mount options (they are split at `,` and `:`;
/// `\` escapes).
fn option_safe(p: &Path) -> bool {
    p.to_str()
        .is_some_and(|s| !s.contains([',', ':', '\\', '\n']))
}

/// The agent's own directories in the shared temporary directory (`dirs`: its profile's
/// `runtime_dirs`, `{uid}` replaced by `uid`, the effective user's when `None`: Codex's `/tmp/codex-daemon-UID`, where its
/// daemon binds its socket), made ready to be state entries of the session: each is made
/// when absent (mode 0700, never over anything: `mkdir(2)` fails on any existing name) and
/// must then be a real directory (not a symbolic link) owned by `uid` with no access for
/// group or others, as the agent itself requires of it. `/tmp` is sticky (`S_ISVTX`), so
/// nobody else can rename or replace a directory of the user's there.
///
/// Returns the directories to add to the session's agent state (each gets a session-private
/// copy: the agent binds its sockets in the copy, the person's sockets in the directory are
/// not reachable through it), and one message per directory left out (then the agent finds
/// no such directory it may use and reports it as it would without tyba). The directories
/// stay after the session, as the agent leaves them itself.
pub fn prepare_runtime_dirs(dirs: &[String], uid: Option<u32>) -> (Vec<PathBuf>, Vec<String>) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let uid = uid.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    let mut ready: Vec<PathBuf> = Vec::new();
    let mut left_out = Vec::new();
    for d in dirs {
        let dir = PathBuf::from(d.replace("{uid}", &uid.to_string()));
        if ready.contains(&dir) {
            continue;
        }
        let made = std::fs::DirBuilder::new().mode(0o700).create(&dir);
        if let Err(e) = &made {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                left_out.push(format!("{}: cannot be made: {e}", dir.display()));
                continue;
            }
        }
        let m = match std::fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(e) => {
                left_out.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        let mode = m.permissions().mode() & 0o7777;
        if m.file_type().is_dir() && m.uid() == uid && mode & 0o077 == 0 {
            ready.push(dir);
            continue;
        }
        let what = if m.file_type().is_symlink() {
            "symbolic link"
        } else if m.is_dir() {
            "directory"
        } else {
            "file"
        };
        left_out.push(format!(
            "{}: not a directory of user {uid} alone (a {what}, owner {}, mode {mode:o}); the agent gets no copy of it",
            dir.display(),
            m.uid(),
        ));
    }
    (ready, left_out)
}

impl StateLayers {
    /// Makes the session copies of `config`'s agent state (`filesystem.agent_state`, which
    /// holds every profile's `state`) under `root` (created, mode 0700; it must not exist):
    /// an empty upper and work directory per state directory, a byte copy per state file.
    /// Entries that do not exist are skipped (the agent gets no access to them, as before).
    /// Each profile's `data` patterns go to the layer of the state entry they lie in.
    ///
    /// # Errors
    /// A message when the root or a copy cannot be made, or a state path cannot be named in
    /// overlayfs's options: the session must refuse to start (the state would otherwise be
    /// the person's own).
    pub fn prepare(
        config: &tyba_policy::EffectiveConfig,
        home: Option<&Path>,
        root: &Path,
    ) -> Result<StateLayers, String> {
        use std::os::unix::fs::DirBuilderExt;
        let fs = &config.filesystem;
        let mut reals: Vec<(PathBuf, LayerKind)> = Vec::new();
        for s in &fs.agent_state {
            let Some(p) = crate::sandbox::expand_home(s, home) else {
                continue;
            };
            let Some(real) = crate::sandbox::canonical_existing(&p) else {
                continue;
            };
            let Ok(m) = std::fs::metadata(&real) else {
                continue;
            };
            let kind = if m.is_dir() {
                LayerKind::Dir
            } else if m.is_file() {
                LayerKind::File
            } else {
                continue;
            };
            if !reals.iter().any(|(r, _)| r == &real) {
                reals.push((real, kind));
            }
        }
        // One inside another is covered by the outer one's layer.
        let all = reals.clone();
        reals.retain(|(r, _)| !all.iter().any(|(o, _)| o != r && r.starts_with(o)));
        let mut me = StateLayers::default();
        if reals.is_empty() {
            return Ok(me);
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(root)
            .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        me.root = Some(root.to_path_buf());
        for (i, (real, kind)) in reals.into_iter().enumerate() {
            let dir = root.join(i.to_string());
            let mk = |d: &Path| {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(d)
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))
            };
            mk(&dir)?;
            let (upper, work) = (dir.join("upper"), dir.join("work"));
            match kind {
                LayerKind::Dir => {
                    if !option_safe(&real) || !option_safe(&upper) {
                        return Err(format!(
                            "{} cannot be named in an overlay's options (`,`, `:` or `\\` in the path): its session copy cannot be made",
                            real.display()
                        ));
                    }
                    mk(&upper)?;
                    mk(&work)?;
                }
                LayerKind::File => copy_file_private(&real, &upper)?,
            }
            me.layers.push(StateLayer {
                real,
                kind,
                upper,
                work,
                data: Vec::new(),
            });
        }
        for p in config.agents.0.values() {
            for s in &p.state {
                let Some(real) = crate::sandbox::expand_home(s, home)
                    .and_then(|x| std::fs::canonicalize(x).ok())
                else {
                    continue;
                };
                for d in &p.data {
                    let Some(rel) = d.strip_prefix(s.as_str()).and_then(|r| r.strip_prefix('/'))
                    else {
                        continue;
                    };
                    // The layer holding this state entry (itself, or the outer one).
                    if let Some(l) = me.layers.iter_mut().find(|l| real.starts_with(&l.real)) {
                        let below = real
                            .strip_prefix(&l.real)
                            .map(|b| b.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let pat = if below.is_empty() {
                            rel.to_string()
                        } else {
                            format!("{below}/{rel}")
                        };
                        if !l.data.contains(&pat) {
                            l.data.push(pat);
                        }
                    }
                }
            }
        }
        Ok(me)
    }

    /// Removes the session copies ([`crate::sandbox::remove_tree`]). Call after
    /// [`merge_back`], when no process of the sandbox is left.
    ///
    /// # Errors
    /// [`crate::sandbox::CleanupError`] when the tree cannot be removed.
    pub fn remove(&mut self) -> Result<(), crate::sandbox::CleanupError> {
        match self.root.take() {
            Some(r) => crate::sandbox::remove_tree(&r),
            None => Ok(()),
        }
    }
}

/// Copies the regular file `from` (not followed if a link) to the new file `to`, mode 0600.
fn copy_file_private(from: &Path, to: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("cannot copy {} for the session: {e}", from.display());
    let mut src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(from)
        .map_err(err)?;
    let m = src.metadata().map_err(err)?;
    if !m.is_file() || m.len() > MAX_DATA_FILE {
        return Err(format!(
            "{} is not a regular file of at most {MAX_DATA_FILE} bytes: its session copy cannot be made",
            from.display()
        ));
    }
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(to)
        .map_err(err)?;
    std::io::copy(&mut src, &mut dst).map_err(err)?;
    Ok(())
}

/// Mounts every layer over its state entry, in the calling process's (the sandbox's) mount
/// namespace: an overlay (`lowerdir=REAL,upperdir=UPPER,workdir=WORK,userxattr,volatile`, no set-uid programs
/// nor devices) over a directory, a bind of the private copy over a file. Call in stage 2
/// after the namespace is made private and before the read-only binds of the control files.
///
/// # Errors
/// The first mount that fails, as a message: the session must not start (the agent would
/// write the person's state).
pub fn mount_layers(layers: &[StateLayer]) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    for l in layers {
        match l.kind {
            LayerKind::Dir => {
                // `userxattr`: the overlay's own marks (opaque directories, a directory made
                // where a file was removed) as `user.overlay.*` attributes, which a mount in a
                // user namespace can set (`trusted.*` it cannot: EIO). `volatile`: no sync of
                // the upper filesystem (at every `fsync`, and of the whole filesystem when the
                // namespace goes): the copy is read back from the page cache at the end, and
                // after a crash it is never merged.
                let opts = format!(
                    "lowerdir={},upperdir={},workdir={},userxattr,volatile",
                    l.real.display(),
                    l.upper.display(),
                    l.work.display()
                );
                mount(
                    Some("overlay"),
                    &l.real,
                    Some("overlay"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                    Some(opts.as_str()),
                )
                .map_err(|e| {
                    format!(
                        "cannot mount the session copy of {} (overlay): {e}",
                        l.real.display()
                    )
                })?;
            }
            LayerKind::File => mount(
                Some(&l.upper),
                &l.real,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| format!("cannot bind the session copy of {}: {e}", l.real.display()))?,
        }
    }
    Ok(())
}

/// What [`merge_back`] did, for the session's end summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MergeReport {
    /// Data files carried back to the person's state (their real paths).
    pub merged: Vec<PathBuf>,
    /// What the agent wrote in its state copy that is not carried back, each with why (its
    /// real path and a short reason). A directory the agent made that holds no data is one
    /// entry, with the number of files in it.
    pub dropped: Vec<(PathBuf, String)>,
    /// Files the agent removed in its copy (not removed from the person's state).
    pub removed_in_copy: usize,
    /// Why nothing was merged, when the merge failed (then `merged` is empty).
    pub failed: Option<String>,
}

/// One data file to carry back.
struct Candidate {
    /// The upper layer's root and the file's path relative to it.
    upper_root: PathBuf,
    /// The person's state directory.
    real_root: PathBuf,
    rel: PathBuf,
    len: u64,
    mode: u32,
}

/// Carries the data files of each layer back to the person's state ([module docs](self)):
/// regular files whose path relative to the state directory matches one of the layer's data
/// patterns ([`tyba_policy::agents::data_pattern_matches`]), each at most [`MAX_DATA_FILE`]
/// bytes and [`MAX_DATA_TOTAL`] together. Call when no process of the sandbox is left.
///
/// Every data file is first staged (copied into a new temporary file beside its target, in
/// directories opened from the state directory with `openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS)`); only when all are staged are they renamed into place. Any failure
/// before that removes what was staged and merges nothing ([`MergeReport::failed`]).
pub fn merge_back(layers: &[StateLayer]) -> MergeReport {
    let mut report = MergeReport::default();
    let mut candidates = Vec::new();
    let mut entries = 0usize;
    let mut total = 0u64;
    for l in layers {
        match l.kind {
            LayerKind::File => {
                let same = match (std::fs::read(&l.upper), std::fs::read(&l.real)) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                };
                if !same {
                    report.dropped.push((
                        l.real.clone(),
                        "a state file, not data: changed in the session copy only".into(),
                    ));
                }
            }
            LayerKind::Dir => {
                if let Err(e) = walk(
                    l,
                    Path::new(""),
                    0,
                    &mut entries,
                    &mut total,
                    &mut candidates,
                    &mut report,
                ) {
                    report.failed = Some(e);
                    report.merged.clear();
                    return report;
                }
            }
        }
    }
    match stage_and_commit(&candidates) {
        Ok(merged) => report.merged = merged,
        Err(e) => report.failed = Some(e),
    }
    report
}

fn walk(
    l: &StateLayer,
    rel: &Path,
    depth: usize,
    entries: &mut usize,
    total: &mut u64,
    out: &mut Vec<Candidate>,
    report: &mut MergeReport,
) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    if depth > MAX_DEPTH {
        return Err(format!(
            "the session copy of {} is deeper than {MAX_DEPTH} directories",
            l.real.display()
        ));
    }
    let dir = l.upper.join(rel);
    let rd = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read the session copy {}: {e}", dir.display()))?;
    let mut names: Vec<_> = rd
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the session copy {}: {e}", dir.display()))?;
    names.sort();
    for name in names {
        *entries += 1;
        if *entries > MAX_ENTRIES {
            return Err(format!(
                "the session copies hold more than {MAX_ENTRIES} entries"
            ));
        }
        let r = rel.join(&name);
        let p = l.upper.join(&r);
        let real = l.real.join(&r);
        let m = std::fs::symlink_metadata(&p)
            .map_err(|e| format!("cannot read the session copy {}: {e}", p.display()))?;
        let ft = m.file_type();
        let is_data = r.to_str().is_some_and(|s| {
            l.data
                .iter()
                .any(|d| tyba_policy::agents::data_pattern_matches(d, s))
        });
        if ft.is_dir() {
            let (dropped_before, data_before, seen) = (report.dropped.len(), out.len(), *entries);
            walk(l, &r, depth + 1, entries, total, out, report)?;
            let made = std::fs::symlink_metadata(&real).is_err();
            let n = *entries - seen;
            if made && out.len() == data_before && report.dropped.len() - dropped_before > 1 {
                // A directory the agent made with nothing of data in it: one line.
                report.dropped.truncate(dropped_before);
                report.dropped.push((
                    real,
                    format!("a directory made in the session copy, no data in it ({n} entries)"),
                ));
            }
        } else if ft.is_char_device() && m.rdev() == 0 {
            // An overlay whiteout: the agent removed the file in its copy.
            report.removed_in_copy += 1;
        } else if ft.is_file() && is_data {
            if m.len() > MAX_DATA_FILE {
                return Err(format!(
                    "{} is larger than {MAX_DATA_FILE} bytes",
                    real.display()
                ));
            }
            *total += m.len();
            if *total > MAX_DATA_TOTAL {
                return Err(format!(
                    "the data to merge back is larger than {MAX_DATA_TOTAL} bytes"
                ));
            }
            out.push(Candidate {
                upper_root: l.upper.clone(),
                real_root: l.real.clone(),
                rel: r,
                len: m.len(),
                mode: m.mode() & 0o666,
            });
        } else if is_data {
            report.dropped.push((
                real,
                "a data name, but not a regular file (a link, device or pipe)".into(),
            ));
        } else if ft.is_file() {
            report
                .dropped
                .push((real, "not data of the agent's profile".into()));
        } else {
            report.dropped.push((
                real,
                "not data of the agent's profile (not a regular file)".into(),
            ));
        }
    }
    Ok(())
}

/// `openat2` beneath `dir` following no symbolic link at all.
fn open_beneath(
    dir: &OwnedFd,
    name: &Path,
    flags: nix::fcntl::OFlag,
    mode: u32,
) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(flags | nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NOFOLLOW)
        .mode(nix::sys::stat::Mode::from_bits_truncate(mode))
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS
                | ResolveFlag::RESOLVE_NO_XDEV,
        );
    nix::fcntl::openat2(dir.as_fd(), name, how)
}

fn open_dir_path(p: &Path) -> nix::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    nix::fcntl::open(
        p,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
}

/// A staged file: its directory, its temporary name and its final name.
struct Staged {
    dir: OwnedFd,
    tmp: std::ffi::OsString,
    name: std::ffi::OsString,
    real: PathBuf,
}

/// Opens (making what is absent, mode 0700) each directory of `rel` beneath `root`, never
/// following a link; returns the innermost and the directories made (for undoing).
fn open_parents(
    root: OwnedFd,
    real_root: &Path,
    rel: &Path,
    made: &mut Vec<PathBuf>,
) -> Result<OwnedFd, String> {
    use nix::fcntl::OFlag;
    let mut dir = root;
    let mut at = real_root.to_path_buf();
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return Err(format!("{}: not a plain path", rel.display()));
        };
        at.push(name);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        let next = match open_beneath(&dir, Path::new(name), flags, 0) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => {
                nix::sys::stat::mkdirat(
                    dir.as_fd(),
                    name,
                    nix::sys::stat::Mode::from_bits_truncate(0o700),
                )
                .map_err(|e| format!("cannot make {}: {e}", at.display()))?;
                made.push(at.clone());
                open_beneath(&dir, Path::new(name), flags, 0)
                    .map_err(|e| format!("cannot open {}: {e}", at.display()))?
            }
            Err(e) => {
                return Err(format!(
                    "cannot open {} (a symbolic link, or not a directory?): {e}",
                    at.display()
                ))
            }
        };
        dir = next;
    }
    Ok(dir)
}

fn stage_and_commit(candidates: &[Candidate]) -> Result<Vec<PathBuf>, String> {
    let mut staged: Vec<Staged> = Vec::new();
    let mut made: Vec<PathBuf> = Vec::new();
    let undo = |staged: &mut Vec<Staged>, made: &mut Vec<PathBuf>| {
        for s in staged.drain(..) {
            let _ = nix::unistd::unlinkat(
                s.dir.as_fd(),
                s.tmp.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        for d in made.drain(..).rev() {
            let _ = std::fs::remove_dir(d);
        }
    };
    for (n, c) in candidates.iter().enumerate() {
        match stage_one(c, n, &mut made) {
            Ok(s) => staged.push(s),
            Err(e) => {
                undo(&mut staged, &mut made);
                return Err(format!("nothing was merged back: {e}"));
            }
        }
    }
    let mut merged = Vec::new();
    let mut failed = None;
    for s in &staged {
        match nix::fcntl::renameat(
            s.dir.as_fd(),
            s.tmp.as_os_str(),
            s.dir.as_fd(),
            s.name.as_os_str(),
        ) {
            Ok(()) => merged.push(s.real.clone()),
            Err(e) => {
                let _ = nix::unistd::unlinkat(
                    s.dir.as_fd(),
                    s.tmp.as_os_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
                failed.get_or_insert(format!("cannot put {} in place: {e}", s.real.display()));
            }
        }
    }
    match failed {
        Some(e) => Err(format!("{e} (merged before it: {})", merged.len())),
        None => Ok(merged),
    }
}

fn stage_one(c: &Candidate, n: usize, made: &mut Vec<PathBuf>) -> Result<Staged, String> {
    use nix::fcntl::OFlag;
    use std::io::{Read, Write};
    let real = c.real_root.join(&c.rel);
    let (Some(parent), Some(name)) = (c.rel.parent(), c.rel.file_name()) else {
        return Err(format!("{}: no file name", real.display()));
    };
    // The source: beneath the upper root, no link anywhere, a regular file of the size seen.
    let up = open_dir_path(&c.upper_root).map_err(|e| {
        format!(
            "cannot open the session copy {}: {e}",
            c.upper_root.display()
        )
    })?;
    let src = open_beneath(&up, &c.rel, OFlag::O_RDONLY, 0)
        .map_err(|e| format!("cannot open the session copy of {}: {e}", real.display()))?;
    let st = nix::sys::stat::fstat(&src).map_err(|e| format!("{}: {e}", real.display()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 != c.len {
        return Err(format!(
            "the session copy of {} changed while merging",
            real.display()
        ));
    }
    let root = open_dir_path(&c.real_root)
        .map_err(|e| format!("cannot open {}: {e}", c.real_root.display()))?;
    let dir = open_parents(root, &c.real_root, parent, made)?;
    // The target, when it exists, must be a regular file (renaming over a directory fails;
    // over a link would replace the link, but a link there is the person's: leave it).
    match nix::sys::stat::fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(t) if t.st_mode & libc::S_IFMT != libc::S_IFREG => {
            return Err(format!(
                "{} exists and is not a regular file",
                real.display()
            ))
        }
        Ok(_) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(format!("{}: {e}", real.display())),
    }
    let mut tmp = std::ffi::OsString::from(format!(".tyba-merge-{}-{n}-", std::process::id()));
    tmp.push(name);
    let out = open_beneath(
        &dir,
        Path::new(&tmp),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
        c.mode,
    )
    .map_err(|e| format!("cannot stage {}: {e}", real.display()))?;
    let staged = Staged {
        dir,
        tmp,
        name: name.to_os_string(),
        real: real.clone(),
    };
    let copy = (|| -> std::io::Result<()> {
        let mut r = std::fs::File::from(src).take(c.len + 1);
        let mut w = std::fs::File::from(out);
        let copied = std::io::copy(&mut r, &mut w)?;
        if copied != c.len {
            return Err(std::io::Error::other("its size changed while merging"));
        }
        w.flush()?;
        w.sync_all()
    })();
    if let Err(e) = copy {
        let _ = nix::unistd::unlinkat(
            staged.dir.as_fd(),
            staged.tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(format!("cannot stage {}: {e}", real.display()));
    }
    Ok(staged)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A profile's `runtime_dirs` with one directory `agent-{uid}` in `dir`.
    fn runtime_config(dir: &Path) -> Vec<String> {
        vec![dir.join("agent-{uid}").to_string_lossy().into_owned()]
    }

    #[test]
    fn runtime_dirs_are_made_private_or_taken_only_when_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let uid = nix::unistd::geteuid().as_raw();
        let t = tempfile::tempdir().unwrap();
        let config = runtime_config(t.path());
        let dir = t.path().join(format!("agent-{uid}"));
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;

        // Absent: made, 0700, the user's.
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert_eq!(
            (ready.clone(), left.len()),
            (vec![dir.clone()], 0),
            "{left:?}"
        );
        assert_eq!(mode(&dir), 0o700);
        // There already, the user's alone, with a socket of the person's in it: taken as it is.
        std::fs::write(dir.join("kept"), "x").unwrap();
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert_eq!((ready, left.len()), (vec![dir.clone()], 0));
        assert_eq!(std::fs::read_to_string(dir.join("kept")).unwrap(), "x");
        // Open to others: left out, not changed.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert!(ready.is_empty() && left[0].contains("mode 755"), "{left:?}");
        assert_eq!(mode(&dir), 0o755);
        std::fs::remove_dir_all(&dir).unwrap();
        // A symbolic link at the name (to a directory of the user's): left out, nothing made.
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert!(
            ready.is_empty() && left[0].contains("symbolic link"),
            "{left:?}"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        std::fs::remove_file(&dir).unwrap();
        // A file at the name: left out.
        std::fs::write(&dir, "").unwrap();
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert!(ready.is_empty() && left[0].contains("a file"), "{left:?}");
        // Another user's name, a directory of this user's there: not theirs alone, left out.
        let other = uid.wrapping_add(1);
        let theirs = t.path().join(format!("agent-{other}"));
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (ready, left) = prepare_runtime_dirs(&config, Some(other));
        assert!(
            ready.is_empty() && left[0].contains(&format!("owner {uid}")),
            "{left:?}"
        );
        // A parent that does not exist: nothing is made above it.
        let config = runtime_config(&t.path().join("no/such"));
        let (ready, left) = prepare_runtime_dirs(&config, Some(uid));
        assert!(
            ready.is_empty() && left[0].contains("cannot be made"),
            "{left:?}"
        );
        assert!(!t.path().join("no").exists());
        assert_eq!(
            prepare_runtime_dirs(&[], Some(uid)),
            (Vec::new(), Vec::new())
        );
    }

    fn layer(t: &Path, data: &[&str]) -> StateLayer {
        let real = t.join("real");
        let upper = t.join("upper");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        StateLayer {
            real,
            kind: LayerKind::Dir,
            upper,
            work: t.join("work"),
            data: data.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn data_is_copied_as_bytes_and_the_rest_dropped() {
        let t = tempfile::tempdir().unwrap();
        let l = layer(t.path(), &["sessions/**/*.jsonl", "history.jsonl"]);
        std::fs::create_dir_all(l.upper.join("sessions/2026/12")).unwrap();
        std::fs::write(l.upper.join("sessions/2026/12/a.jsonl"), "{}\n").unwrap();
        std::fs::write(l.upper.join(".env"), "LD_PRELOAD=/x.so\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", l.upper.join("history.jsonl")).unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        assert_eq!(r.failed, None);
        assert_eq!(r.merged, vec![l.real.join("sessions/2026/12/a.jsonl")]);
        assert_eq!(
            std::fs::read_to_string(l.real.join("sessions/2026/12/a.jsonl")).unwrap(),
            "{}\n"
        );
        assert!(!l.real.join(".env").exists());
        assert!(std::fs::symlink_metadata(l.real.join("history.jsonl")).is_err());
        let dropped: Vec<_> = r.dropped.iter().map(|(p, _)| p.clone()).collect();
        assert!(dropped.contains(&l.real.join(".env")), "{dropped:?}");
        assert!(
            dropped.contains(&l.real.join("history.jsonl")),
            "{dropped:?}"
        );
    }

    #[test]
    fn a_new_directory_without_data_is_one_dropped_entry() {
        let t = tempfile::tempdir().unwrap();
        let l = layer(t.path(), &["sessions/**/*.jsonl"]);
        std::fs::create_dir_all(l.upper.join("skills/a/b")).unwrap();
        for f in ["skills/a/x.md", "skills/a/b/y.md", "skills/z.md"] {
            std::fs::write(l.upper.join(f), "x").unwrap();
        }
        // A directory that exists in the person's state lists its files one by one.
        std::fs::create_dir_all(l.real.join("rules")).unwrap();
        std::fs::create_dir_all(l.upper.join("rules")).unwrap();
        std::fs::write(l.upper.join("rules/a.rules"), "x").unwrap();
        std::fs::write(l.upper.join("rules/b.rules"), "x").unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        let paths: Vec<_> = r.dropped.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            paths,
            vec![
                l.real.join("rules/a.rules"),
                l.real.join("rules/b.rules"),
                l.real.join("skills"),
            ],
            "{r:?}"
        );
        assert!(r.dropped[2].1.contains("5 entries"), "{r:?}");
    }

    #[test]
    fn a_link_in_the_persons_tree_fails_the_merge_closed() {
        let t = tempfile::tempdir().unwrap();
        let l = layer(t.path(), &["sessions/**/*.jsonl", "history.jsonl"]);
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, l.real.join("sessions")).unwrap();
        std::fs::create_dir_all(l.upper.join("sessions")).unwrap();
        std::fs::write(l.upper.join("sessions/a.jsonl"), "x").unwrap();
        std::fs::write(l.upper.join("history.jsonl"), "h").unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        assert!(r.failed.is_some(), "{r:?}");
        assert!(r.merged.is_empty());
        // Nothing at all was merged, not even the file staged first.
        assert!(!l.real.join("history.jsonl").exists());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        let left: Vec<_> = std::fs::read_dir(&l.real)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn an_oversized_data_file_fails_the_merge() {
        let t = tempfile::tempdir().unwrap();
        let l = layer(t.path(), &["*.jsonl"]);
        std::fs::write(l.upper.join("a.jsonl"), "a").unwrap();
        let f = std::fs::File::create(l.upper.join("b.jsonl")).unwrap();
        f.set_len(MAX_DATA_FILE + 1).unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        assert!(r.failed.is_some() && r.merged.is_empty(), "{r:?}");
        assert!(!l.real.join("a.jsonl").exists());
    }

    #[test]
    fn an_existing_data_file_is_replaced_and_a_directory_in_its_place_fails() {
        let t = tempfile::tempdir().unwrap();
        let l = layer(t.path(), &["*.json"]);
        std::fs::write(l.real.join("auth.json"), "old").unwrap();
        std::fs::write(l.upper.join("auth.json"), "new").unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        assert_eq!(r.failed, None);
        assert_eq!(
            std::fs::read_to_string(l.real.join("auth.json")).unwrap(),
            "new"
        );
        std::fs::create_dir(l.real.join("x.json")).unwrap();
        std::fs::write(l.upper.join("x.json"), "x").unwrap();
        let r = merge_back(std::slice::from_ref(&l));
        assert!(r.failed.is_some(), "{r:?}");
    }
}
