//! What the disk holds at a path (`lstat(2)`, and `readlink(2)` of a symbolic link), looked
//! at once per classification.
//!
//! A classification reads the disk and writes nothing to it; its rules resolve the same
//! paths several times (a target's checks, the pre-push hook's tree, the glob of a later
//! word), each time component by component like the kernel. While [`Seen::start`]'s guard is
//! alive on a thread, a path's answer is kept and given again; when it drops (the
//! classification ends, or unwinds) the answers go, so the next classification looks at the
//! disk anew and no change on the disk between two classifications can be missed. Outside a
//! classification ([`crate::resolve_path`] for the agents' hook) nothing is kept.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a path is, not following a symbolic link at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// Nothing is there, or it cannot be looked at (`lstat` failed: `ENOENT`, `EACCES`,
    /// `ENOTDIR`, a NUL byte…).
    Missing,
    /// A symbolic link and its target text (`None`: `readlink` failed).
    Link(Option<PathBuf>),
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Anything else (a device, a socket, a FIFO).
    Other,
}

/// Paths whose answers are kept in a list searched in order: a typical line resolves a
/// handful, and a search through this many costs less than one system call.
const SCANNED: usize = 64;

/// Paths whose answers one classification keeps at most, the list and the map together
/// (beyond, each is looked at again): an `xargs` line of tens of thousands of file names
/// resolves each of their directories once, not once per name (about 100 bytes a path).
const MAX_SEEN: usize = 1 << 16;

/// The answers kept: the first [`SCANNED`] in a list (no hashing for a typical line), the
/// rest by the path's bytes in a map.
#[derive(Debug, Default)]
struct Answers {
    scanned: Vec<(OsString, Node)>,
    hashed: HashMap<OsString, Node>,
}

impl Answers {
    fn get(&self, p: &Path) -> Option<Node> {
        self.scanned
            .iter()
            .find(|(k, _)| k.as_os_str() == p.as_os_str())
            .map(|(_, n)| n.clone())
            .or_else(|| self.hashed.get(p.as_os_str()).cloned())
    }

    fn keep(&mut self, p: &Path, n: &Node) {
        if self.scanned.len() < SCANNED {
            self.scanned.push((p.as_os_str().to_owned(), n.clone()));
        } else if self.scanned.len() + self.hashed.len() < MAX_SEEN {
            self.hashed.insert(p.as_os_str().to_owned(), n.clone());
        }
    }
}

thread_local! {
    static SEEN: RefCell<Option<Answers>> = const { RefCell::new(None) };
}

/// While alive, answers are kept on this thread (see the module doc).
#[derive(Debug)]
pub(crate) struct Seen {
    /// The answers of an enclosing classification, given back when this one ends.
    outer: Option<Answers>,
}

impl Seen {
    /// Starts keeping answers, fresh: nothing an earlier classification saw is reused.
    pub(crate) fn start() -> Seen {
        let outer = SEEN.with(|s| s.replace(Some(Answers::default())));
        Seen { outer }
    }
}

impl Drop for Seen {
    fn drop(&mut self) {
        let outer = self.outer.take();
        SEEN.with(|s| s.replace(outer));
    }
}

/// What is at `p`: kept while a [`Seen`] guard is alive, else looked at each time.
pub(crate) fn node(p: &Path) -> Node {
    if let Some(n) = SEEN.with(|s| s.borrow().as_ref().and_then(|m| m.get(p))) {
        return n;
    }
    let n = look(p);
    SEEN.with(|s| {
        if let Some(m) = s.borrow_mut().as_mut() {
            m.keep(p, &n);
        }
    });
    n
}

fn look(p: &Path) -> Node {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => Node::Link(std::fs::read_link(p).ok()),
        Ok(m) if m.is_dir() => Node::Dir,
        Ok(m) if m.is_file() => Node::File,
        Ok(_) => Node::Other,
        Err(_) => Node::Missing,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kept_for_one_classification_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        assert_eq!(node(&p), Node::Missing);
        std::fs::write(&p, "").unwrap();
        // Nothing kept outside a classification.
        assert_eq!(node(&p), Node::File);
        {
            let _seen = Seen::start();
            assert_eq!(node(&p), Node::File);
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink("/etc", &p).unwrap();
            // The classification's own view of the disk.
            assert_eq!(node(&p), Node::File);
            {
                // A classification inside it starts fresh, and gives the outer one back.
                let _inner = Seen::start();
                assert_eq!(node(&p), Node::Link(Some(PathBuf::from("/etc"))));
            }
            assert_eq!(node(&p), Node::File);
        }
        // The next classification sees the change.
        let _seen = Seen::start();
        assert_eq!(node(&p), Node::Link(Some(PathBuf::from("/etc"))));
        assert_eq!(node(dir.path()), Node::Dir);
        assert_eq!(node(Path::new("/dev/null")), Node::Other);
        assert_eq!(node(Path::new("a\0b")), Node::Missing);
    }

    /// Past the scanned list, answers are still kept (in the map), so a line of thousands of
    /// names looks at each directory once.
    #[test]
    fn many_paths_are_kept_past_the_scanned_list() {
        let dir = tempfile::tempdir().unwrap();
        let _seen = Seen::start();
        let paths: Vec<PathBuf> = (0..SCANNED * 3)
            .map(|i| dir.path().join(format!("f{i}")))
            .collect();
        for p in &paths {
            assert_eq!(node(p), Node::Missing);
        }
        for p in &paths {
            std::fs::write(p, "").unwrap();
        }
        // Every one of them answered from what this classification saw, the last included.
        for p in &paths {
            assert_eq!(node(p), Node::Missing, "{}", p.display());
        }
        drop(_seen);
        assert_eq!(node(&paths[SCANNED * 3 - 1]), Node::File);
    }

    /// A change on the disk between two classifications changes the verdict: nothing the
    /// first one saw is given to the second.
    #[test]
    fn a_later_classification_sees_the_disk_anew() {
        use crate::{Action, Context, Policy, Verdict};
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let (w, out) = (root.join("w"), root.join("out"));
        std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(w.join("build")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(w.join("notes"), "").unwrap();
        std::fs::write(out.join("notes"), "").unwrap();
        let ctx = Context {
            worktree: &w,
            cwd: &w,
            home: None,
            scratch: None,
            git: None,
        };
        let policy = Policy::embedded_default();
        let verdict = |line: &str| {
            let action = Action::Exec {
                command: line.to_string(),
            };
            policy.classify(&action, &ctx).verdict
        };
        assert_eq!(verdict("cat notes && cat notes"), Verdict::Green);
        std::fs::remove_file(w.join("notes")).unwrap();
        std::os::unix::fs::symlink(out.join("notes"), w.join("notes")).unwrap();
        assert_ne!(verdict("cat notes && cat notes"), Verdict::Green);
        // The pre-push hook appearing under a tree that is deleted.
        assert_eq!(verdict("rm -r build; rm -r ."), Verdict::Yellow);
        std::fs::write(w.join(".git/hooks/pre-push"), "#!/bin/sh\n").unwrap();
        assert_eq!(verdict("rm -r build; rm -r ."), Verdict::Blocked);
        assert_eq!(verdict("find . -delete"), Verdict::Blocked);
        std::fs::remove_file(w.join(".git/hooks/pre-push")).unwrap();
        assert_eq!(verdict("rm -r build; rm -r ."), Verdict::Yellow);
        assert_eq!(verdict("find . -delete"), Verdict::Red);
    }
}
