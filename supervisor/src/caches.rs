//! Session-private layers over the toolchain caches (issue 13, class 9).
//!
//! The policy's `read_write` paths are the toolchain caches builds write to
//! (`~/.cargo/registry`, `~/.npm/_cacache`, `~/.cache/pip`, …). The person's next build
//! outside the sandbox trusts what is in them: a `build.rs` added to an extracted crate under
//! `~/.cargo/registry/src` runs, a changed tarball in `_cacache` is installed, a `.pth` in a
//! pip cache is imported. So the agent never writes them: each one that exists gets an
//! overlay in the sandbox's mount namespace (`Documentation/filesystems/overlayfs.rst`),
//! mounted over the cache's own path, whose lower layer is the person's cache (read-only) and
//! whose upper and work dirs are the session's own, in
//! `$XDG_STATE_HOME/tyba/caches/<session>/{u,w}<n>`, a directory no grant of the agent covers.
//! Builds in the session read the cache at native speed and add to it; the person's tools
//! read only the lower layer; the upper layer is removed when the session ends (and, after a
//! session that died, by the next session's start).
//!
//! - Options: `userxattr` (the overlay's own attributes are `user.overlay.*`, as an overlay
//!   mounted in a user namespace must use), and with it `redirect_dir=nofollow`,
//!   `metacopy=off`, `index=off`, `nfs_export=off` spelled out (no attribute of a layer makes
//!   the overlay follow a path elsewhere; the kernel refuses `userxattr` with
//!   `redirect_dir=on` or `metacopy=on`), `volatile` (the upper layer is thrown away, so
//!   nothing of it need reach the disk: without it the unmount of each overlay when the
//!   namespace ends syncs the whole filesystem the upper layer is on, the person's home,
//!   every other program's unwritten data with it), and `nosuid`, `nodev`, plus `noexec`
//!   when the cache's own mount has it.
//! - Landlock: an overlay's merged tree is its own hierarchy (`landlock.rst`, "OverlayFS"),
//!   so a cache is granted read-write only when its overlay is mounted, by a rule made after
//!   the mount on the merged directory; until then, and whenever the overlay cannot be
//!   mounted, the cache is granted read + execute only. Fail closed: never the person's cache
//!   writable.
//! - A cache that does not exist is left absent (not made in the person's home, not granted,
//!   listed as missing at start); a cache inside another one is covered by the outer one's
//!   overlay; a cache holding another writable root (the worktree, the temp dir, an agent
//!   state dir) or the layers' directory is not layered (its overlay would take the writes
//!   to those) and stays read-only.

use crate::sandbox::{is_within, remove_tree, SandboxPlan};
use nix::fcntl::{Flock, FlockArg};
use nix::mount::{mount, MsFlags};
use std::path::{Path, PathBuf};

/// One cache and its session-private layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLayer {
    /// The person's cache (canonical, a directory): the overlay's lower layer and its mount
    /// point.
    pub cache: PathBuf,
    /// The overlay's upper dir: what the session adds or changes.
    pub upper: PathBuf,
    /// The overlay's work dir (on the upper dir's filesystem).
    pub work: PathBuf,
}

/// The session's layers directory (`$XDG_STATE_HOME/tyba/caches/<session>`), held with an
/// exclusive `flock(2)` on `<session>.lock` beside it for the session's life and removed on
/// drop. Every session's start removes the layers of sessions whose lock is free (they died
/// without cleaning up).
#[derive(Debug, Default)]
pub struct CacheLayers {
    dir: Option<PathBuf>,
    lock: Option<(PathBuf, Flock<std::fs::File>)>,
}

/// Overlay options a path cannot carry in `mount(2)`'s option string (`,` separates
/// options, `:` lower layers, `\` escapes).
pub(crate) fn unmountable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\' | b'\n') || *b < 0x20)
}

/// Where `p` is (or would be) physically: its nearest existing ancestor canonicalised, the
/// rest appended.
fn physical(p: &Path) -> PathBuf {
    let mut base = p.to_path_buf();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&base).is_err() {
        match (base.file_name().map(|n| n.to_os_string()), base.parent()) {
            (Some(n), Some(d)) => {
                rest.push(n);
                base = d.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = std::fs::canonicalize(&base).unwrap_or(base);
    for n in rest.into_iter().rev() {
        real.push(n);
    }
    real
}

fn open_lock(p: &Path, create: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create_new(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
}

/// Removes the layers of sessions that ended without removing them: every `<name>/` in
/// `base` whose `<name>.lock` is absent or free. Called with `base/registry.lock` held.
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let mut lock_name = e.file_name();
        lock_name.push(".lock");
        let lock = base.join(lock_name);
        let free = match open_lock(&lock, false) {
            Ok(f) => Flock::lock(f, FlockArg::LockExclusiveNonblock).ok(),
            Err(_) => None,
        };
        let absent = std::fs::symlink_metadata(&lock).is_err();
        if (free.is_some() || absent) && remove_tree(&p).is_ok() {
            let _ = std::fs::remove_file(&lock);
        }
    }
}

impl CacheLayers {
    /// Chooses the caches of `plan` to layer ([`SandboxPlan::caches`], see the module doc),
    /// makes their upper and work dirs under the user's state directory and records them in
    /// [`SandboxPlan::cache_layers`]; what cannot be layered stays read-only, with a note in
    /// [`SandboxPlan::notes`]. The stage 2 of the sandbox mounts them ([`mount_layer`]).
    ///
    /// The layers go in `$XDG_STATE_HOME/tyba/caches`, or when that lies in a cache or a
    /// writable root (a policy that layers the whole home) in `$TMPDIR/tyba-<uid>-caches`.
    pub fn prepare(plan: &mut SandboxPlan, session_id: &str) -> CacheLayers {
        let uid = nix::unistd::geteuid().as_raw();
        let candidates = [
            crate::broker::paths::state_dir().map(|s| s.join("caches")),
            Some(std::env::temp_dir().join(format!("tyba-{uid}-caches"))),
        ];
        let outside = |b: &Path| {
            let b = physical(b);
            !plan
                .caches
                .iter()
                .chain(&plan.read_write)
                .any(|r| is_within(&b, r))
        };
        let base = candidates.iter().flatten().find(|b| outside(b)).cloned();
        Self::prepare_in(plan, base, session_id)
    }

    /// [`CacheLayers::prepare`] with the layers under `base` (`None`: no state directory).
    pub fn prepare_in(
        plan: &mut SandboxPlan,
        base: Option<PathBuf>,
        session_id: &str,
    ) -> CacheLayers {
        let mut me = CacheLayers::default();
        if plan.caches.is_empty() {
            return me;
        }
        let mut caches = plan.caches.clone();
        // Outer caches first: one inside another is covered by the outer overlay.
        caches.sort_by_key(|c| c.components().count());
        let read_only = |plan: &mut SandboxPlan, why: String| {
            plan.notes.push(format!(
                "{why}: the toolchain caches are read-only for this session"
            ));
        };
        let ok_id = !session_id.is_empty()
            && session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && !session_id.starts_with('.');
        let Some(base) = base.filter(|_| ok_id) else {
            read_only(
                plan,
                "no private place for the session's cache layers (no $XDG_STATE_HOME or $HOME)"
                    .into(),
            );
            return me;
        };
        if let Err(e) = crate::broker::paths::ensure_private_dir(&base) {
            read_only(plan, format!("cannot make {}: {e}", base.display()));
            return me;
        }
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        if let Some(r) = plan.read_write.iter().find(|r| is_within(&base, r)) {
            read_only(
                plan,
                format!(
                    "the cache layers' directory {} lies in the writable {}",
                    base.display(),
                    r.display()
                ),
            );
            return me;
        }
        let registry = open_lock(&base.join("registry.lock"), false)
            .or_else(|_| open_lock(&base.join("registry.lock"), true))
            .ok()
            .and_then(|f| Flock::lock(f, FlockArg::LockExclusive).ok());
        if registry.is_none() {
            read_only(
                plan,
                format!("cannot lock {}/registry.lock", base.display()),
            );
            return me;
        }
        sweep(&base);
        let lock_path = base.join(format!("{session_id}.lock"));
        let dir = base.join(session_id);
        let lock = open_lock(&lock_path, true)
            .ok()
            .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).ok());
        let Some(lock) = lock else {
            read_only(plan, format!("cannot make {}", lock_path.display()));
            return me;
        };
        me.lock = Some((lock_path, lock));
        if let Err(e) = crate::broker::paths::ensure_private_dir(&dir) {
            read_only(plan, format!("cannot make {}: {e}", dir.display()));
            return me;
        }
        me.dir = Some(dir.clone());
        drop(registry);
        let mut chosen: Vec<PathBuf> = Vec::new();
        let mut layered = Vec::new();
        for c in caches {
            if chosen.iter().any(|o| is_within(&c, o)) {
                continue;
            }
            let holds = plan
                .read_write
                .iter()
                .find(|r| is_within(r, &c))
                .cloned()
                .or_else(|| is_within(&base, &c).then(|| base.clone()));
            if let Some(r) = holds {
                plan.notes.push(format!(
                    "the cache {} holds {}, so it gets no private layer and is read-only for this session",
                    c.display(),
                    r.display()
                ));
                continue;
            }
            if unmountable(&c) {
                plan.notes.push(format!(
                    "the cache {} has a `,` `:` `\\` or control character in its path, which an overlay cannot name: read-only for this session",
                    c.display()
                ));
                continue;
            }
            // Two directories per layer, nothing more: each costs a journalled create and
            // remove on the person's filesystem.
            let n = plan.cache_layers.len();
            let (upper, work) = (dir.join(format!("u{n}")), dir.join(format!("w{n}")));
            let made = [&upper, &work]
                .iter()
                .try_for_each(|d| crate::broker::paths::ensure_private_dir(d));
            if let Err(e) = made {
                plan.notes.push(format!(
                    "cannot make a private layer for the cache {} ({e}): read-only for this session",
                    c.display()
                ));
                continue;
            }
            chosen.push(c.clone());
            layered.push(c.display().to_string());
            plan.cache_layers.push(CacheLayer {
                cache: c,
                upper,
                work,
            });
        }
        if !layered.is_empty() {
            plan.notes.push(format!(
                "the toolchain caches get a private layer: what the session writes to them is its own and discarded at the end: {}",
                layered.join(", ")
            ));
        }
        me
    }

    /// Removes the layers ([`Drop`] does the same) in a process of its own
    /// ([`crate::sys::detach`]) that keeps the session's lock until they are gone, and
    /// returns at once: the end of `tyba run` does not wait for them. Removing a directory
    /// frees a block the disk is told to discard, and on a `discard` mount without a journal
    /// ext4 waits for each (`ext4_free_blocks`): with three caches the sixteen directories
    /// (the session's, an upper and a work dir per cache, and the `work/incompat/volatile`
    /// the kernel makes in each) took 2.7 ms, on the person's way back to the prompt
    /// (docs/performance-run.md, run 21). Nothing of the person's reads the layers, and while
    /// the lock is held no other session's start removes them; a removal that fails or is
    /// killed leaves them to the next session's start ([`sweep`]). When the process cannot
    /// be made, they are removed here.
    pub fn remove_detached(mut self) {
        let (Some(dir), Some((lock_path, lock))) = (self.dir.take(), self.lock.take()) else {
            return;
        };
        let work = || {
            let _ = remove_layers(&dir);
            let _ = std::fs::remove_file(&lock_path);
        };
        // SAFETY: the work removes files of its own with system calls and allocations
        // (glibc's malloc is fork-safe) and takes no lock: no output, no environment.
        let detached = unsafe { crate::sys::detach(std::os::fd::AsFd::as_fd(&*lock), work) };
        match detached {
            Ok(_) => crate::sys::close_keeping_lock(lock),
            Err(_) => {
                self.dir = Some(dir);
                self.lock = Some((lock_path, lock));
            }
        }
    }
}

/// Removes the layers directory `d` of one session: the kernel leaves each work dir's
/// `work/`, `work/incompat/` and `work/incompat/volatile/` with mode 0, so they are made the
/// owner's first and the tree goes in one pass ([`remove_tree`] would fail once and walk it
/// again).
fn remove_layers(d: &Path) -> Result<(), crate::sandbox::CleanupError> {
    if let Ok(entries) = std::fs::read_dir(d) {
        for e in entries.flatten() {
            if !e.file_name().as_encoded_bytes().starts_with(b"w") {
                continue;
            }
            for sub in ["work", "work/incompat", "work/incompat/volatile"] {
                let w = e.path().join(sub);
                if std::fs::symlink_metadata(&w).is_ok_and(|m| m.is_dir()) {
                    let _ = std::fs::set_permissions(
                        &w,
                        std::os::unix::fs::PermissionsExt::from_mode(0o700),
                    );
                }
            }
        }
    }
    remove_tree(d)
}

impl Drop for CacheLayers {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            if let Err(e) = remove_layers(&d) {
                // The next session's start removes it (its lock is free then).
                crate::broker::text::say(&format!(
                    "tyba: warning: the session's cache layers are left behind: {e}"
                ));
            }
        }
        if let Some((p, lock)) = self.lock.take() {
            let _ = std::fs::remove_file(&p);
            drop(lock);
        }
    }
}

/// The longest option string [`mount_layer`] passes: `mount(2)` copies at most one page
/// (4096 bytes on the platforms tyba runs on), terminating NUL included.
const MOUNT_OPTIONS_MAX: usize = 4096;

/// Mounts `l`'s overlay over its cache, in the calling process's mount namespace (stage 2 of
/// the sandbox, before any rule is made: the read-write rule names the merged directory).
///
/// # Errors
/// A description when the cache is no longer a plain directory or the kernel refuses the
/// overlay (`EINVAL` for options it does not know: kernels before 5.11 have no `userxattr`;
/// `EPERM` without a user namespace's mount rights).
pub(crate) fn mount_layer(l: &CacheLayer) -> Result<(), String> {
    let c = &l.cache;
    if !std::fs::symlink_metadata(c).is_ok_and(|m| m.is_dir()) {
        return Err(format!("{} is no longer a directory", c.display()));
    }
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if let Ok(v) = nix::sys::statvfs::statvfs(c) {
        if v.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC) {
            flags |= MsFlags::MS_NOEXEC;
        }
    }
    mount_overlay(c, &l.upper, &l.work, flags, true)
}

/// Mounts an overlay over `dir` whose lower layer is `dir` itself and whose upper and work
/// dirs are `upper` and `work`, with `flags` and the options of the module doc (`volatile`
/// when asked and the kernel knows it), in the calling process's mount namespace; checks it
/// came up writable. Shared by the caches' layers and the git dir's ([`crate::git_layer`]).
///
/// # Errors
/// A description when a path cannot be named in the options, the options are longer than
/// `mount(2)` takes, the kernel refuses the overlay (`EINVAL` for options it does not know:
/// kernels before 5.11 have no `userxattr`; `EPERM` without a user namespace's mount rights),
/// or it came up read-only (then it is unmounted again).
pub(crate) fn mount_overlay(
    dir: &Path,
    upper: &Path,
    work: &Path,
    flags: MsFlags,
    volatile: bool,
) -> Result<(), String> {
    let c = dir;
    for p in [dir, upper, work] {
        if unmountable(p) {
            return Err(format!(
                "{} cannot be named in overlay options",
                p.display()
            ));
        }
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={},userxattr,redirect_dir=nofollow,metacopy=off,index=off,nfs_export=off",
        c.display(),
        upper.display(),
        work.display()
    );
    let with_volatile = if volatile {
        format!("{opts},volatile")
    } else {
        opts.clone()
    };
    // `mount(2)` copies one page of options: longer ones would be cut, and an overlay whose
    // `upperdir` was cut off mounts read-only with no error.
    if with_volatile.len() >= MOUNT_OPTIONS_MAX {
        return Err(format!(
            "its overlay options are {} bytes, more than mount(2) takes ({MOUNT_OPTIONS_MAX})",
            with_volatile.len()
        ));
    }
    let try_mount = |o: &str| mount(Some("overlay"), c, Some("overlay"), flags, Some(o));
    try_mount(&with_volatile)
        .or_else(|e| match e {
            // `volatile` is 5.10's; without it only the unmount is slower.
            nix::errno::Errno::EINVAL if volatile => try_mount(&opts),
            e => Err(e),
        })
        .map_err(|e| format!("overlay on {}: {e}", c.display()))?;
    // An overlay without its upper layer is read-only: then it is no layer.
    let read_only = nix::sys::statvfs::statvfs(c)
        .map(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(true);
    if read_only {
        let _ = nix::mount::umount2(c, nix::mount::MntFlags::MNT_DETACH);
        return Err(format!("the overlay on {} came up read-only", c.display()));
    }
    Ok(())
}

/// Grants the cache of layer `i` read-write in `plan` (its overlay is mounted): moved from
/// [`SandboxPlan::read_only`] to [`SandboxPlan::read_write`]. Stage 2 calls it on its plan
/// after [`mount_layer`] succeeded, the supervisor on its own when stage 2 reports it
/// (`C i`); nothing for an index out of range.
pub(crate) fn grant_layer(plan: &mut SandboxPlan, i: usize) {
    if let Some(c) = plan.cache_layers.get(i).map(|l| l.cache.clone()) {
        plan.grant_layered(&c);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn plan_with(root: &Path, caches: &[&str], rw: &[&str]) -> SandboxPlan {
        let mut plan = SandboxPlan::default();
        for c in caches {
            let p = root.join(c);
            std::fs::create_dir_all(&p).unwrap();
            plan.caches.push(p.clone());
            plan.read_only.push(p);
        }
        for r in rw {
            let p = root.join(r);
            std::fs::create_dir_all(&p).unwrap();
            plan.read_write.push(p);
        }
        plan
    }

    #[test]
    fn outer_caches_cover_inner_ones_and_a_cache_holding_a_writable_root_is_not_layered() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let mut plan = plan_with(
            &root,
            &[
                "home/.cache/pip",
                "home/.cache",
                "home/.cargo/registry",
                "home/p",
            ],
            &["home/p/wt"],
        );
        let base = root.join("state/caches");
        let layers = CacheLayers::prepare_in(&mut plan, Some(base.clone()), "s1");
        let got: Vec<&Path> = plan
            .cache_layers
            .iter()
            .map(|l| l.cache.as_path())
            .collect();
        assert_eq!(
            got,
            [root.join("home/.cache"), root.join("home/.cargo/registry")],
            "{:?}",
            plan.notes
        );
        assert!(
            plan.notes.iter().any(|n| n.contains("home/p holds")),
            "{:?}",
            plan.notes
        );
        // Nothing is granted read-write before a mount succeeds.
        assert!(plan.read_write.iter().all(|p| !p.ends_with(".cache")));
        for l in &plan.cache_layers {
            assert!(l.upper.is_dir() && l.work.is_dir() && l.upper.starts_with(base.join("s1")));
        }
        grant_layer(&mut plan, 1);
        assert!(plan.read_write.contains(&root.join("home/.cargo/registry")));
        assert!(!plan.read_only.contains(&root.join("home/.cargo/registry")));
        drop(layers);
        assert!(!base.join("s1").exists() && !base.join("s1.lock").exists());
    }

    #[test]
    fn layers_left_by_a_dead_session_are_removed_and_a_live_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let base = root.join("caches");
        let mut a_plan = plan_with(&root, &["c"], &[]);
        let a = CacheLayers::prepare_in(&mut a_plan, Some(base.clone()), "live");
        // A dead session: its dir without a held lock (one a `chmod 000` made hard to remove).
        let dead = base.join("dead/0/upper/x");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("f"), "x").unwrap();
        std::fs::set_permissions(
            base.join("dead/0/upper"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        std::fs::write(base.join("dead.lock"), "").unwrap();
        let mut b_plan = plan_with(&root, &["c"], &[]);
        let b = CacheLayers::prepare_in(&mut b_plan, Some(base.clone()), "next");
        assert!(!base.join("dead").exists() && !base.join("dead.lock").exists());
        assert!(
            base.join("live/u0").is_dir(),
            "a live session's layer is kept"
        );
        drop((a, b));
        assert!(!base.join("live").exists() && !base.join("next").exists());
    }

    #[test]
    fn layers_removed_detached_go_in_a_process_that_keeps_the_lock_until_they_are_gone() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let base = root.join("caches");
        let mut plan = plan_with(&root, &["c"], &[]);
        let layers = CacheLayers::prepare_in(&mut plan, Some(base.clone()), "s1");
        // What a session wrote to its layer (enough that removing it takes a while), and a
        // work dir as the kernel leaves it (mode 0).
        let upper = base.join("s1/u0/many");
        std::fs::create_dir_all(&upper).unwrap();
        for i in 0..3000 {
            std::fs::write(upper.join(format!("f{i}")), "x").unwrap();
        }
        let work = base.join("s1/w0/work/incompat/volatile");
        std::fs::create_dir_all(&work).unwrap();
        for d in [
            "s1/w0/work/incompat/volatile",
            "s1/w0/work/incompat",
            "s1/w0/work",
        ] {
            std::fs::set_permissions(
                base.join(d),
                std::os::unix::fs::PermissionsExt::from_mode(0o000),
            )
            .unwrap();
        }
        let lock = base.join("s1.lock");
        layers.remove_detached();
        // This process keeps no descriptor of the lock, and has not unlocked it: while the
        // layers are still there, no one else can take it.
        let fds: Vec<PathBuf> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect();
        assert!(!fds.contains(&lock), "{fds:?}");
        if let Ok(f) = open_lock(&lock, false) {
            let taken = Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok();
            assert!(
                !(taken && base.join("s1/u0").exists()),
                "the lock was free while the layers were still there"
            );
        }
        let start = std::time::Instant::now();
        while (base.join("s1").exists() || lock.exists())
            && start.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!base.join("s1").exists(), "the layers are removed");
        assert!(!lock.exists(), "and their lock file");
    }

    #[test]
    fn without_a_private_place_the_caches_stay_read_only() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        for (base, id) in [
            (None, "s"),
            (Some(root.join("b")), "../x"),
            (Some(root.join("rw/b")), "s"),
        ] {
            let mut plan = plan_with(&root, &["c"], &["rw"]);
            let _l = CacheLayers::prepare_in(&mut plan, base, id);
            assert!(plan.cache_layers.is_empty(), "{id}");
            assert!(plan.read_only.contains(&root.join("c")));
            assert!(!plan.read_write.contains(&root.join("c")));
            assert!(
                plan.notes.iter().any(|n| n.contains("read-only")),
                "{:?}",
                plan.notes
            );
        }
    }

    #[test]
    fn paths_an_overlay_cannot_name_are_refused() {
        for p in ["/a,b", "/a:b", "/a\\b", "/a\nb"] {
            assert!(unmountable(Path::new(p)), "{p:?}");
        }
        assert!(!unmountable(Path::new("/home/p/.cargo/registry")));
    }
}
