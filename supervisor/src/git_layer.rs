//! A session-private layer over the root of the common git dir (linked worktree mode).
//!
//! In the default linked worktree the common git dir (the person's `.git`) is read-only but
//! for `objects/`, the worktree's admin dir and the session's own branch. git writes more
//! there than those: a ref deletion in the files backend always locks `packed-refs`
//! (`packed-refs.lock` in the common dir's root, dropped again when the ref is not packed:
//! `refs/files-backend.c`), and git 2.47 deletes the per-worktree `AUTO_MERGE` on every
//! commit; a push or fetch updates the remote-tracking refs (`refs/remotes/…` and their
//! reflogs), a fetch the tags it follows and `shallow`. With the root read-only each of these
//! prints an error (`unable to create '…/packed-refs.lock': Permission denied`,
//! `update_ref failed for ref 'refs/remotes/…'`) that agents read and act on.
//!
//! So the agent's view of the common git dir is an overlay (`Documentation/filesystems/
//! overlayfs.rst`) mounted over it in the sandbox's mount namespace: the person's directory
//! is its lower layer, read-only; its upper and work dirs are on a tmpfs mounted for a moment
//! over the session's temp dir and detached again once the overlay holds it (the overlay
//! keeps a private clone of its upper layer's mount: no path in the sandbox or outside leads
//! to it). What git creates in the root is the session's own and vanishes with the sandbox's
//! mount namespace; nothing of it ever reaches the person's repository or the person's git.
//! On top of the layer, before any Landlock rule is made:
//!
//! - every name protected today stays read-only, bound over itself ([`GitLayer::read_only`]):
//!   `config`, `hooks/`, `info/`, `modules/`, `worktrees/`, `branches/`, `remotes/`, the
//!   person's branches (`refs/heads/`), the main worktree's `HEAD`, `packed-refs`, the main
//!   git dir's `commondir` and `config.worktree`, and the files the repository's
//!   configuration names inside it; an absent one gets its stand-in *in the layer* (never in
//!   the person's repository);
//! - the directories the agent's work must reach are the real ones, bound writable over their
//!   path in the layer ([`GitLayer::real`]): `objects/` (its commits) and the worktree's admin
//!   dir (`worktrees/<name>`: its index, `HEAD`, `FETCH_HEAD`, `ORIG_HEAD`);
//! - the session's own branch is its private directory bound over `refs/heads/tyba/` as
//!   before ([`crate::own_branch`]), on top of the read-only `refs/heads/`.
//!
//! Landlock: an overlay is its own hierarchy (`Documentation/security/landlock.rst`,
//! "OverlayFS"), so the common dir is granted read-write only once the layer is mounted, by a
//! rule made after the mount on the merged directory ([`grant`]); when the layer cannot be
//! made the root stays read-only, as without it, with one warning.
//!
//! Not layered: `--here` (the common dir is the worktree's `.git`, writable already: the
//! index and the current branch are the person's own there, see `docs/sandbox.md`), and a
//! repository on the reftable backend (its tables hold every ref together: nothing of it is
//! writable, with or without a layer).

use crate::sandbox::{GitFile, SandboxPlan, StandIn};
use nix::mount::{mount, MntFlags, MsFlags};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The plan of the layer over one common git dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLayer {
    /// The common git dir (canonical): the overlay's lower layer and its mount point.
    pub common: PathBuf,
    /// Paths inside `common` bound read-only over themselves on top of the layer, in this
    /// order, each with what stands in for it (made in the layer) when it is absent.
    pub read_only: Vec<GitFile>,
    /// Real directories inside `common` bound writable over their own path in the layer,
    /// after the read-only binds (one of them may lie in a read-only directory:
    /// `worktrees/<name>`).
    pub real: Vec<PathBuf>,
}

/// The tmpfs the upper layer lives on: private to the user (`mode=0700`), at most 256 MiB
/// (remote-tracking refs of a few tens of thousands of branches), no devices, no set-id, no
/// execution (nothing in the upper layer is a program: `hooks/` is the person's, bound over).
const TMPFS_OPTIONS: &str = "mode=0700,size=256m";

impl GitLayer {
    /// The layer for the common git dir of `g` (a linked worktree: `g.common_dir` outside
    /// the worktree), or `None` when its refs are in the reftable backend
    /// ([`crate::sandbox::uses_reftable`]) or it is no plain directory. `named` are the files
    /// the repository's git configuration names ([`crate::sandbox::config_named_files`]):
    /// those inside the common dir stay read-only too.
    pub fn plan(g: &crate::session::GitLayout, named: &[GitFile]) -> Option<GitLayer> {
        let c = &g.common_dir;
        // A git dir that is its own common dir (a separate `--git-dir` outside the
        // worktree) holds the index in its root: layered, the agent's index would be lost.
        if g.git_dir == *c
            || !std::fs::symlink_metadata(c).is_ok_and(|m| m.is_dir())
            || crate::sandbox::uses_reftable(c)
            || crate::caches::unmountable(c)
        {
            return None;
        }
        let f = |name: &str, stand_in| GitFile {
            path: c.join(name),
            stand_in,
        };
        let mut read_only = vec![
            f("config", StandIn::File(b"")),
            f("hooks", StandIn::Dir),
            f("info", StandIn::Dir),
            f("modules", StandIn::Dir),
            f("worktrees", StandIn::Dir),
            f("branches", StandIn::Dir),
            f("remotes", StandIn::Dir),
            f("refs/heads", StandIn::Dir),
            f("HEAD", StandIn::None),
            f("packed-refs", StandIn::File(b"")),
            // The main worktree's: git there reads them as the linked worktree's own.
            f("commondir", StandIn::File(b".\n")),
            f("config.worktree", StandIn::File(b"")),
        ];
        let mut real = Vec::new();
        let objects = c.join("objects");
        if objects.is_dir() {
            real.push(objects.clone());
        }
        if g.git_dir != *c && g.git_dir.starts_with(c) && g.git_dir.is_dir() {
            real.push(g.git_dir.clone());
        }
        for n in named {
            // Inside a real directory it is protected there already (`SandboxPlan::build`).
            let in_real = real.iter().any(|r| n.path.starts_with(r));
            if n.path.starts_with(c)
                && n.path != *c
                && !in_real
                && !read_only.iter().any(|r| n.path.starts_with(&r.path))
            {
                read_only.push(n.clone());
            }
        }
        Some(GitLayer {
            common: c.clone(),
            read_only,
            real,
        })
    }
}

/// Mounts `l` (stage 2 of the sandbox, in its mount namespace, before the own-branch binds,
/// the read-only binds and any Landlock rule): the tmpfs over `staging` (the session's temp
/// dir, which the agent does not use yet), the overlay over the common dir, `staging`
/// detached again, then the read-only binds and the real directories of the module doc.
/// When any step fails after the overlay is mounted, the whole layer is detached again, so
/// the common dir is as without a layer (read-only root).
///
/// # Errors
/// A description of the step that failed.
pub(crate) fn mount_layer(l: &GitLayer, staging: &Path) -> Result<(), String> {
    let c = &l.common;
    if !std::fs::symlink_metadata(c).is_ok_and(|m| m.is_dir()) {
        return Err(format!("{} is no longer a directory", c.display()));
    }
    // The real directories, opened before the overlay hides them.
    let mut real: Vec<(PathBuf, OwnedFd)> = Vec::new();
    for p in &l.real {
        use nix::fcntl::OFlag;
        let fd = nix::fcntl::open(
            p,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| format!("open {}: {e}", p.display()))?;
        real.push((p.clone(), fd));
    }
    let tmpfs_flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(
        Some("tmpfs"),
        staging,
        Some("tmpfs"),
        tmpfs_flags,
        Some(TMPFS_OPTIONS),
    )
    .map_err(|e| format!("tmpfs for the layer on {}: {e}", staging.display()))?;
    let detach_staging = || nix::mount::umount2(staging, MntFlags::MNT_DETACH);
    let (upper, work) = (staging.join("u"), staging.join("w"));
    let made = [&upper, &work].iter().try_for_each(|d| {
        std::fs::create_dir(d).map_err(|e| format!("mkdir {}: {e}", d.display()))
    });
    // No `noexec`: the person's hooks, bound over the layer, run in the session as before.
    let mounted = made.and_then(|()| {
        crate::caches::mount_overlay(
            c,
            &upper,
            &work,
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            false,
        )
    });
    // The overlay holds its own clone of the upper layer's mount: the tmpfs leaves every
    // path now.
    let detached = detach_staging();
    mounted?;
    let undo = |e: String| {
        let _ = nix::mount::umount2(c, MntFlags::MNT_DETACH);
        e
    };
    detached.map_err(|e| undo(format!("detach {}: {e}", staging.display())))?;
    for f in &l.read_only {
        let p = &f.path;
        if std::fs::symlink_metadata(p).is_err() {
            make_stand_in(p, f.stand_in).map_err(undo)?;
        }
        crate::launch::bind_read_only(p).map_err(undo)?;
    }
    for (p, fd) in &real {
        let src = format!("/proc/self/fd/{}", fd.as_raw_fd());
        mount(
            Some(src.as_str()),
            p,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| undo(format!("bind the real {} over the layer: {e}", p.display())))?;
    }
    Ok(())
}

/// Makes the stand-in for the absent `p` in the layer (a directory, or a file with its
/// contents); its parent must exist (the files of [`GitLayer::plan`] are one or two levels
/// down in the common dir, whose `refs/` git needs anyway).
fn make_stand_in(p: &Path, s: StandIn) -> Result<(), String> {
    let made = match s {
        StandIn::Dir => std::fs::create_dir(p),
        StandIn::File(c) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
            .and_then(|mut f| std::io::Write::write_all(&mut f, c)),
        StandIn::None => {
            return Err(format!(
                "{} does not exist and has no stand-in",
                p.display()
            ))
        }
    };
    made.map_err(|e| format!("stand-in {}: {e}", p.display()))
}

/// Grants the common dir of the mounted layer read-write in `plan` (moved from
/// [`SandboxPlan::read_only`] to [`SandboxPlan::read_write`]): the Landlock rule on it, made
/// after the mount, names the layer's merged directory.
pub(crate) fn grant(plan: &mut SandboxPlan) {
    if let Some(c) = plan.git_layer.as_ref().map(|l| l.common.clone()) {
        plan.grant_layered(&c);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn layout(root: &Path) -> crate::session::GitLayout {
        let c = root.join("repo/.git");
        for d in ["objects", "refs/heads", "worktrees/wt1", "hooks"] {
            std::fs::create_dir_all(c.join(d)).unwrap();
        }
        std::fs::write(c.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(c.join("config"), "").unwrap();
        crate::session::GitLayout {
            git_dir: c.join("worktrees/wt1"),
            common_dir: c,
        }
    }

    #[test]
    fn the_layer_keeps_every_protected_name_read_only_and_the_work_real() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let g = layout(&root);
        let c = g.common_dir.clone();
        let named = [
            GitFile {
                path: c.join("extra.cfg"),
                stand_in: StandIn::File(b""),
            },
            GitFile {
                path: c.join("hooks/inner"),
                stand_in: StandIn::File(b""),
            },
            GitFile {
                path: c.join("worktrees/wt1/x.cfg"),
                stand_in: StandIn::File(b""),
            },
            GitFile {
                path: root.join("elsewhere"),
                stand_in: StandIn::File(b""),
            },
        ];
        let l = GitLayer::plan(&g, &named).unwrap();
        let ro: Vec<&Path> = l.read_only.iter().map(|f| f.path.as_path()).collect();
        for n in [
            "config",
            "hooks",
            "info",
            "modules",
            "worktrees",
            "branches",
            "remotes",
            "refs/heads",
            "HEAD",
            "packed-refs",
            "commondir",
            "config.worktree",
            "extra.cfg",
        ] {
            assert!(ro.contains(&c.join(n).as_path()), "{n} in {ro:?}");
        }
        // Covered by a read-only directory, inside a real one, or outside: not bound again.
        for p in [
            c.join("hooks/inner"),
            c.join("worktrees/wt1/x.cfg"),
            root.join("elsewhere"),
        ] {
            assert!(!ro.contains(&p.as_path()), "{}", p.display());
        }
        assert_eq!(l.real, [c.join("objects"), c.join("worktrees/wt1")]);
        // Nothing of the remote-tracking refs, tags or the root itself is held.
        for n in ["refs", "refs/remotes", "refs/tags", "logs", "objects"] {
            assert!(!ro.contains(&c.join(n).as_path()), "{n}");
        }
    }

    #[test]
    fn no_layer_for_a_reftable_repository_or_a_name_overlay_options_cannot_carry() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let g = layout(&root);
        std::fs::write(
            g.common_dir.join("config"),
            "[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n",
        )
        .unwrap();
        assert_eq!(GitLayer::plan(&g, &[]), None);
        let odd = root.join("a,b");
        std::fs::create_dir_all(odd.join(".git/objects")).unwrap();
        let g = crate::session::GitLayout {
            git_dir: odd.join(".git/worktrees/x"),
            common_dir: odd.join(".git"),
        };
        assert_eq!(GitLayer::plan(&g, &[]), None);
    }

    #[test]
    fn the_grant_moves_only_the_common_dir() {
        let mut plan = SandboxPlan {
            read_only: vec![PathBuf::from("/r/.git"), PathBuf::from("/usr")],
            read_write: vec![PathBuf::from("/wt")],
            ..Default::default()
        };
        grant(&mut plan);
        assert_eq!(
            plan.read_write,
            [PathBuf::from("/wt")],
            "no layer, no grant"
        );
        plan.git_layer = Some(GitLayer {
            common: PathBuf::from("/r/.git"),
            read_only: Vec::new(),
            real: Vec::new(),
        });
        grant(&mut plan);
        assert_eq!(plan.read_only, [PathBuf::from("/usr")]);
        assert_eq!(
            plan.read_write,
            [PathBuf::from("/wt"), PathBuf::from("/r/.git")]
        );
    }
}
