//! What a `--here` session changed in the person's checkout, as the kernel reports it
//! (inotify(7)), so that the end of the session need not look at every file of the checkout.
//!
//! At the end of a session run in the person's own checkout, tyba names the files the
//! session wrote there that run or approve code later ([`crate::session::Session::changed_here`]).
//! Found by change times alone (the full look), that costs a `lstat` of every file of the
//! checkout: about 15 ms for 12,000 files here, paid by every session, however little it did.
//!
//! So while the sandbox is set up, a thread walks the checkout's directories (its own
//! `.git` aside) and puts an inotify watch on each, for every event that changes an entry or what a
//! file holds: `IN_MODIFY`, `IN_ATTRIB` (mode, owner, link count, times, extended
//! attributes), `IN_CLOSE_WRITE`, `IN_CREATE`, `IN_MOVED_TO`, and `IN_OPEN` (a file written
//! through a shared mapping whose last reference outlives the session sends nothing else in
//! time: opened files are kept when their change time is the session's). A watch on a
//! directory reports these for each entry in it, by name, whichever process acts
//! (inotify(7)). The events are
//! read as they come (a session that writes much cannot fill the queue while the reader
//! keeps up), and what they name is the list.
//!
//! **Sound or not used.** The list replaces the full look only when every directory was
//! watched before the agent's first process was started ([`HereWatch::seal`], called before
//! the sandbox's "go"), so no write of the session can come before its watch. Otherwise the
//! end falls back to the full look, as do a queue that overflowed (`IN_Q_OVERFLOW`), more
//! than [`MAX_NAMES`] names, or a watch that could not be added (`max_user_watches`). A
//! directory the session made or moved into the checkout is not watched (it did not exist
//! at the walk): all of it is read at the end. The walk stops when the sandbox is ready, so
//! it adds nothing to a launch; a checkout with more directories than can be walked by then,
//! or than an eighth of the user's inotify watches ([`watch_budget`]), gets the full look.
//!
//! **Hard links.** A write through another name of a file is reported under that name
//! only, and a change of a file's link count to no directory watch. So a session that made a
//! hard link (`link`, `linkat`: the seccomp filter of a watched session reports each,
//! [`crate::bpf::LINK_SYSCALLS`]) gets the full
//! look. Not seen: a file of the checkout that the person had hard-linked elsewhere before
//! the session (outside the checkout, where the session may write), written through that
//! other name.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Most names kept; beyond, the end falls back to the full look.
pub const MAX_NAMES: usize = 200_000;

/// How long the launch waits for a walk still going before it stops it
/// ([`HereWatch::seal`]); the end then makes the full look.
pub const SEAL_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Most directories watched by one session, whatever the user's inotify limit
/// ([`watch_budget`]).
pub const MAX_WATCHES: usize = 16_384;

/// What the events named, relative to the checkout.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Entries written, made, moved in, or whose attributes changed (they may be gone since).
    pub entries: Vec<PathBuf>,
    /// Directories made or moved into the checkout during the session: read whole at the end.
    pub new_dirs: Vec<PathBuf>,
    /// Files opened during the session and named by no other event: a file written through a
    /// shared mapping (`mmap`) sends no `IN_MODIFY`, and its `IN_CLOSE_WRITE` comes only when
    /// its last reference goes, which a process can put off past the session's end (an fd
    /// left in flight in a unix socket nobody can receive from, freed by the kernel's unix
    /// socket collector later). Kept at the end when their change time is the session's.
    pub opened: Vec<PathBuf>,
}

/// Where the walk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Walking,
    /// The walk ended; `true` when every directory is watched.
    Walked(bool),
}

#[derive(Debug)]
struct Shared {
    sealed: AtomicBool,
    phase: Mutex<Phase>,
    walked: Condvar,
}

/// The watch of one checkout ([`HereWatch::start`]).
#[derive(Debug)]
pub struct HereWatch {
    shared: Arc<Shared>,
    stop: Option<OwnedFd>,
    /// What the reader found, sent once it has read the last events; it then releases the
    /// inotify instance ([`release`]) off the session's path and ends.
    found: std::sync::mpsc::Receiver<Option<Changes>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The events that change an entry of a watched directory or what a file holds.
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_OPEN
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

impl HereWatch {
    /// Starts watching `root` (a checkout, absolute), every directory beneath it but its own
    /// git dir (`root/.git`): a thread walks them and then reads the events. `None` when inotify cannot be had; the end then makes the full
    /// look.
    pub fn start(root: &Path) -> Option<HereWatch> {
        let ino = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
        let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
        let shared = Arc::new(Shared {
            sealed: AtomicBool::new(false),
            phase: Mutex::new(Phase::Walking),
            walked: Condvar::new(),
        });
        let (root, sh) = (root.to_path_buf(), Arc::clone(&shared));
        let (tx, found) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("tyba-here-watch".into())
            .spawn(move || {
                let walk_all = || {
                    let mut wds = HashMap::new();
                    (walk(&ino, &root, &sh.sealed, &mut wds), wds)
                };
                // The walk on a thread of the batch class (the launch's own threads go first
                // when they wake), joined before the events are read here; here when no
                // thread can be had.
                let walked = std::thread::scope(|s| {
                    std::thread::Builder::new()
                        .name("tyba-here-walk".into())
                        .spawn_scoped(s, || {
                            crate::sys::batch_scheduling();
                            walk_all()
                        })
                        .ok()
                        .map(|t| t.join())
                });
                let (complete, wds) = match walked {
                    Some(Ok(w)) => w,
                    Some(Err(_)) => (false, HashMap::new()),
                    None => walk_all(),
                };
                if let Ok(mut p) = sh.phase.lock() {
                    *p = Phase::Walked(complete);
                }
                sh.walked.notify_all();
                let got = if complete {
                    read_events(&ino, &wds, &stop_r)
                } else {
                    None
                };
                let _ = tx.send(got);
                release(OwnedFd::from(ino));
            })
            .ok()?;
        Some(HereWatch {
            shared,
            stop: Some(stop_w),
            found,
            thread: Some(thread),
        })
    }

    /// Ends the walk (called before the agent's first process starts): whether every
    /// directory is watched. A walk still going is waited for, up to [`SEAL_WAIT`] (it yields
    /// to the launch, so it may be behind when the launch is done), then stopped.
    /// When not every directory is watched, [`HereWatch::finish`] gives `None`.
    pub fn seal(&self) -> bool {
        self.seal_within(SEAL_WAIT)
    }

    /// [`HereWatch::seal`], waiting at most `wait` for the walk.
    fn seal_within(&self, wait: std::time::Duration) -> bool {
        let Ok(mut p) = self.shared.phase.lock() else {
            self.shared.sealed.store(true, Ordering::SeqCst);
            return false;
        };
        let deadline = std::time::Instant::now() + wait;
        while *p == Phase::Walking {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            p = match self.shared.walked.wait_timeout(p, left) {
                Ok((p, _)) => p,
                Err(_) => {
                    self.shared.sealed.store(true, Ordering::SeqCst);
                    return false;
                }
            };
        }
        self.shared.sealed.store(true, Ordering::SeqCst);
        while *p == Phase::Walking {
            p = match self.shared.walked.wait(p) {
                Ok(p) => p,
                Err(_) => return false,
            };
        }
        *p == Phase::Walked(true)
    }

    /// Tells the watch's thread that no process of the sandbox is left: it reads the last
    /// events and makes the changes while the caller goes on; [`HereWatch::finish`] takes
    /// them (and stops the watch itself when this was not called).
    pub fn stop(&mut self) {
        drop(self.stop.take());
    }

    /// Once no process of the sandbox is left: what the events named, after reading the
    /// last of them (once; `None` after). `None` when the list cannot stand for the full look (the walk was not
    /// complete or not sealed, the queue overflowed, too many names, the thread failed).
    /// Keep the watch until the session's end: dropping it waits for the reader to end.
    pub fn finish(&mut self) -> Option<Changes> {
        let sealed = self.seal();
        drop(self.stop.take());
        let got = self.found.recv().ok()?;
        got.filter(|_| sealed)
    }
}

impl Drop for HereWatch {
    fn drop(&mut self) {
        self.shared.sealed.store(true, Ordering::SeqCst);
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Closes the inotify instance `ino` in another process, which the session does not wait
/// for. The last close of an instance waits for the kernel to free its watches
/// (`fsnotify_destroy_group`, an SRCU grace period): measured here at 0.1 ms most of the time
/// and 15 ms one close in three, whatever the number of watches. Closed in tyba itself, it
/// would hold the end of the session (or the exit) that long. So the last close is a child's,
/// made to hold nothing else and to exit at once ([`crate::sys::close_in_child`]), which
/// costs no exec (a `/bin/sh` started to hold it cost half a millisecond of CPU at each
/// session's end). Without it (the clone fails), closed here.
fn release(ino: OwnedFd) {
    let _ = crate::sys::close_in_child(ino);
}

/// Watches every directory under `root` but its own `.git`, links not followed; `false`
/// when the walk was sealed before its end, a directory could not be read or a watch not
/// added.
///
/// A directory's link count is 2 plus its subdirectories on the filesystems that keep it so
/// ([`counts_subdirs`]): one of link count 2 there has none and is not listed (a checkout's
/// directories are mostly such leaves, and listing is most of the walk). Each directory is
/// watched before it is looked at: a subdirectory made after that is reported (and read
/// whole at the end), so neither the count nor the listing can miss one.
fn walk(
    ino: &Inotify,
    root: &Path,
    sealed: &AtomicBool,
    wds: &mut HashMap<WatchDescriptor, PathBuf>,
) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(root_meta) = std::fs::symlink_metadata(root) else {
        return false;
    };
    let leaves_known = counts_subdirs(root);
    let most = watch_budget();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        if sealed.load(Ordering::SeqCst) || wds.len() >= most {
            return false;
        }
        let dir = root.join(&rel);
        let Ok(wd) = ino.add_watch(&dir, mask()) else {
            return false;
        };
        wds.insert(wd, rel.clone());
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            return false;
        };
        if leaves_known && m.dev() == root_meta.dev() && m.nlink() == 2 {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return false;
        };
        for e in rd {
            let Ok(e) = e else {
                return false;
            };
            let Ok(t) = e.file_type() else {
                return false;
            };
            // The checkout's own git dir aside (`--here` binds what git obeys there read-only);
            // a nested repository's is watched like any directory: its hooks and config run
            // when the person works in it.
            if t.is_dir() && !(rel.as_os_str().is_empty() && e.file_name() == ".git") {
                todo.push(rel.join(e.file_name()));
            }
        }
    }
    true
}

/// Most directories one session watches: an eighth of the user's inotify watches
/// (`/proc/sys/fs/inotify/max_user_watches`, shared by every program of the user: an
/// editor watching the same checkout must keep finding watches while the session runs), and
/// never more than [`MAX_WATCHES`]. A checkout with more gets the full look, and its watches
/// are freed when the walk gives up, at the launch.
fn watch_budget() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .map_or(1024, |n| n / 8)
        .min(MAX_WATCHES)
}

/// Whether the filesystem of `root` keeps a directory's link count at 2 plus its
/// subdirectories (the Unix convention; ext2/3/4, XFS and tmpfs do, btrfs and many FUSE and
/// network filesystems do not: statfs(2) magic numbers). Others are listed whole.
fn counts_subdirs(root: &Path) -> bool {
    use nix::sys::statfs::{EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC};
    // ext2 and ext3 share ext4's magic number.
    nix::sys::statfs::statfs(root).is_ok_and(|s| {
        [EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, TMPFS_MAGIC].contains(&s.filesystem_type())
    })
}

/// Reads the events until `stop` hangs up, then the last ones; `None` on overflow, too
/// many names or a read error.
fn read_events(
    ino: &Inotify,
    wds: &HashMap<WatchDescriptor, PathBuf>,
    stop: &OwnedFd,
) -> Option<Changes> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut entries: HashSet<PathBuf> = HashSet::new();
    let mut new_dirs: HashSet<PathBuf> = HashSet::new();
    let mut opened: HashSet<PathBuf> = HashSet::new();
    let mut ended = false;
    loop {
        // After the stop: the kernel queued every event of the ended sandbox before its last
        // process was reaped; what is left is read until the queue is empty.
        loop {
            let events = match ino.read_events() {
                Ok(ev) => ev,
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return None,
            };
            for ev in events {
                if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    return None;
                }
                let (Some(dir), Some(name)) = (wds.get(&ev.wd), ev.name) else {
                    continue;
                };
                let path = dir.join(name);
                let made_dir = ev.mask.contains(AddWatchFlags::IN_ISDIR)
                    && ev
                        .mask
                        .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
                let is_dir = ev.mask.contains(AddWatchFlags::IN_ISDIR);
                if made_dir {
                    new_dirs.insert(path);
                } else if !is_dir && ev.mask == AddWatchFlags::IN_OPEN {
                    opened.insert(path);
                } else if !is_dir {
                    entries.insert(path);
                }
                if entries.len() + new_dirs.len() + opened.len() > MAX_NAMES {
                    return None;
                }
            }
        }
        if ended {
            break;
        }
        let mut fds = [
            PollFd::new(ino.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            ended = true;
        }
    }
    let sorted = |s: HashSet<PathBuf>| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = s.into_iter().collect();
        v.sort();
        v
    };
    let opened: HashSet<PathBuf> = opened.difference(&entries).cloned().collect();
    Some(Changes {
        entries: sorted(entries),
        new_dirs: sorted(new_dirs),
        opened: sorted(opened),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tree() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        for sub in ["a/b/c", ".git/objects", "ignored/deep"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        for f in [
            "a/b/c/tracked.txt",
            "a/keep.txt",
            "ignored/deep/x",
            "top.txt",
        ] {
            std::fs::write(root.join(f), "old\n").unwrap();
        }
        (d, root)
    }

    #[test]
    fn every_kind_of_change_is_named_and_nothing_else() {
        let (_d, root) = tree();
        // Beside the tree, on the same filesystem (a rename does not cross one).
        let beside = tempfile::tempdir_in(root.parent().unwrap()).unwrap();
        let outside = beside.path().to_path_buf();
        std::fs::create_dir_all(outside.join("moved/inner")).unwrap();
        std::fs::write(outside.join("moved/inner/f"), "x").unwrap();
        let mut w = HereWatch::start(&root).unwrap();
        // The launch's set-up takes milliseconds; a small tree is walked by then.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(w.seal(), "a small tree is watched whole");
        // In place, deep; mode only; a hard link; a new directory; one moved in; the git dir.
        std::fs::write(root.join("a/b/c/tracked.txt"), "new\n").unwrap();
        std::fs::set_permissions(
            root.join("ignored/deep/x"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::hard_link(root.join("top.txt"), root.join("a/linked")).unwrap();
        std::fs::create_dir_all(root.join("a/new/sub")).unwrap();
        std::fs::write(root.join("a/new/sub/file"), "x").unwrap();
        std::fs::rename(outside.join("moved"), root.join("a/b/moved")).unwrap();
        std::fs::write(root.join(".git/objects/o"), "x").unwrap();
        let c = w.finish().unwrap();
        // `top.txt`'s link count changed: no directory watch hears of it (hence the full
        // look after a hard link, `crate::Outcome::hard_links`).
        let names = |v: &[PathBuf]| {
            v.iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&c.entries),
            vec!["a/b/c/tracked.txt", "a/linked", "ignored/deep/x"],
            "{c:?}"
        );
        assert_eq!(names(&c.new_dirs), vec!["a/b/moved", "a/new"], "{c:?}");
    }

    #[test]
    fn a_walk_sealed_before_its_end_gives_no_list_and_the_launch_waits_for_it() {
        let (_d, root) = tree();
        for i in 0..3000 {
            std::fs::create_dir_all(root.join(format!("many/{i}"))).unwrap();
        }
        let mut w = HereWatch::start(&root).unwrap();
        // Sealed at once, without waiting: the thread may not even have begun.
        let complete = w.seal_within(std::time::Duration::ZERO);
        std::fs::write(root.join("top.txt"), "new\n").unwrap();
        let got = w.finish();
        assert_eq!(got.is_some(), complete);
        assert!(
            !complete,
            "3,000 directories are not walked before the seal"
        );
        // Control: the same tree, sealed at once as the launch seals (which waits for the
        // walk), is watched whole.
        let mut w = HereWatch::start(&root).unwrap();
        assert!(w.seal());
        std::fs::write(root.join("top.txt"), "newer\n").unwrap();
        assert_eq!(w.finish().unwrap().entries, vec![PathBuf::from("top.txt")]);
    }
}
