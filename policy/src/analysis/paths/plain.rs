//! The common case of [`check_path`](super::check_path) by string operations: a path inside
//! the worktree reached through no symbolic link (its physical form is its lexical one), in
//! normal form. The rules are the same and so are their findings, in the same order; only
//! the comparisons differ: on a normal absolute path (`/` and components that are neither
//! empty, `.` nor `..`, no trailing `/`) a prefix, a parent or a suffix of components is a
//! prefix, a parent or a suffix of its text at a `/`, which is what `std::path` compares
//! component by component at several times the cost. A path that is not in that form, not
//! inside the worktree, or a hook place that is not, takes the general route; a test below
//! checks both routes give the same findings on paths of every kind.

use super::{control_rules_of, credential_in, found, locates_git_dir, Access, Finding, PathCtx};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the pre-push hook is, and the directories the hook rules compare paths with;
/// computed once per classification ([`super::SessionPaths::hook`]).
#[derive(Debug)]
pub(crate) struct HookPlace {
    /// The file git runs as the pre-push hook ([`super::SessionPaths::pre_push_path`], else
    /// `.git/hooks/pre-push` of the worktree), whether it exists or not.
    pub path: PathBuf,
    /// The directory holding the hooks directory (the git directory, or what
    /// `core.hooksPath` names the parent of); the hook itself when it has no such parent.
    pub git_dir: PathBuf,
    /// Whether the hooks directory is a configured one (`core.hooksPath`, `.husky`: no
    /// component of the hook's path ends with `.git`), whose other hooks the path rules
    /// judge (hooks under a git directory have their rule in `control_rules`).
    pub configured: bool,
    /// Whether `path` and `git_dir` are normal text ([`is_normal`]).
    normal: bool,
}

impl HookPlace {
    /// The hook's place for a session: `pre_push` when known, else the worktree's
    /// `.git/hooks/pre-push`.
    pub(crate) fn new(worktree: &Path, pre_push: Option<&Path>) -> HookPlace {
        // The usual place, built as text: `WORKTREE/.git/hooks/pre-push` in the git directory
        // `WORKTREE/.git`, whose `.git` component makes it no configured one.
        match (pre_push, worktree.to_str()) {
            (None, Some(w)) if w != "/" && is_normal(w) => {
                let mut git_dir = String::with_capacity(w.len() + 5);
                git_dir.push_str(w);
                git_dir.push_str("/.git");
                let mut path = String::with_capacity(git_dir.len() + 15);
                path.push_str(&git_dir);
                path.push_str("/hooks/pre-push");
                HookPlace {
                    path: PathBuf::from(path),
                    git_dir: PathBuf::from(git_dir),
                    configured: false,
                    normal: true,
                }
            }
            _ => Self::by_components(worktree, pre_push),
        }
    }

    /// [`Self::new`] by `std::path`'s operations, for any place.
    fn by_components(worktree: &Path, pre_push: Option<&Path>) -> HookPlace {
        let path = pre_push
            .map(Path::to_path_buf)
            .unwrap_or_else(|| worktree.join(".git/hooks/pre-push"));
        let git_dir = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(&path)
            .to_path_buf();
        // A component ending with `.git` is one of the text's pieces between `/`s that does.
        let configured = !path
            .as_os_str()
            .as_bytes()
            .split(|b| *b == b'/')
            .any(|c| c.ends_with(b".git"));
        let normal = match (path.to_str(), git_dir.to_str()) {
            (Some(p), Some(g)) => is_normal(p) && is_normal(g),
            _ => false,
        };
        HookPlace {
            path,
            git_dir,
            configured,
            normal,
        }
    }

    /// The hook's path and its git directory as text, when both are normal.
    fn texts(&self) -> Option<(&str, &str)> {
        if !self.normal {
            return None;
        }
        Some((self.path.to_str()?, self.git_dir.to_str()?))
    }

    /// Whether `p` is the hook or a directory between the git directory and the hook
    /// (`.git`, `.git/hooks`): removing, replacing or renaming it changes the hook.
    pub(super) fn holds(&self, p: &Path) -> bool {
        self.path.starts_with(p) && p.starts_with(&self.git_dir)
    }

    /// What of the hook's path lies below `p` (`Path::strip_prefix`): `None` when `p` is not
    /// the hook or a directory above it.
    pub(crate) fn below(&self, p: &Path) -> Option<&Path> {
        match (self.texts(), p.to_str()) {
            (Some((hook, _)), Some(p)) if is_normal(p) => rest(hook, p).map(Path::new),
            _ => self.path.strip_prefix(p).ok(),
        }
    }

    /// Whether `p` is another file in the directory the hook is in.
    pub(super) fn beside(&self, p: &Path) -> bool {
        p.parent() == self.path.parent() && p != self.path.as_path()
    }
}

/// Whether `s` is an absolute path in normal form: `/`, or `/` followed by components that
/// are neither empty, `.` nor `..`, with no trailing `/`.
pub(crate) fn is_normal(s: &str) -> bool {
    let b = s.as_bytes();
    if b.first() != Some(&b'/') {
        return false;
    }
    if b.len() == 1 {
        return true;
    }
    // Each component: the bytes after a `/` up to the next one or the end.
    let mut start = 1;
    for i in 1..=b.len() {
        if i == b.len() || b[i] == b'/' {
            if matches!(&b[start..i], b"" | b"." | b"..") {
                return false;
            }
            start = i + 1;
        }
    }
    true
}

/// `Path::starts_with` of two normal paths.
fn under(p: &str, base: &str) -> bool {
    rest(p, base).is_some()
}

/// `Path::strip_prefix` of two normal paths: what follows `base` in `p`, without its `/`.
fn rest<'a>(p: &'a str, base: &str) -> Option<&'a str> {
    let r = p.strip_prefix(base)?;
    if base == "/" || r.is_empty() {
        Some(r)
    } else {
        r.strip_prefix('/')
    }
}

/// `Path::parent` of a normal path.
fn parent(p: &str) -> Option<&str> {
    match p.rfind('/') {
        _ if p == "/" => None,
        Some(0) => Some("/"),
        Some(i) => Some(&p[..i]),
        None => None,
    }
}

/// [`check_path`](super::check_path)'s rules for `phys`, the physical and lexical form of
/// `word`, when it is normal and inside the worktree (and, for a change, the hook's place is
/// normal too): pushes the findings and returns `true`. Returns `false`, having pushed
/// nothing, for any other path.
pub(super) fn check_inside(
    pc: &PathCtx<'_>,
    word: &str,
    phys: &Path,
    access: Access,
    out: &mut Vec<Finding>,
) -> bool {
    let (Some(p), Some(wt)) = (phys.to_str(), pc.session.worktree_text()) else {
        return false;
    };
    if !is_normal(p) {
        return false;
    }
    let Some(rel) = rest(p, wt) else {
        return false;
    };
    let hook = match access.modifies() {
        true => match pc.session.hook().texts() {
            Some(h) => Some(h),
            None => return false,
        },
        false => None,
    };
    let cred = word
        .split(':')
        .find_map(credential_in)
        .or_else(|| credential_in(rel));
    if let Some(name) = cred {
        out.push(found::credential(word, &name));
    }
    let Some((hook, git_dir)) = hook else {
        return true;
    };
    let names_hook = p.ends_with("/hooks/pre-push");
    if names_hook || (under(hook, p) && under(p, git_dir)) {
        out.push(found::hook(word));
    }
    if pc.session.hook().configured && !names_hook && parent(p) == parent(hook) && p != hook {
        out.push(found::hooks_dir(word));
    }
    let name = p.rsplit('/').next().unwrap_or(p);
    if matches!(name, "commondir" | "gitdir" | ".git") && locates_git_dir(pc.worktree, phys) {
        out.push(found::git_dir_moved(word));
    }
    let comps: Vec<&str> = if rel.is_empty() {
        Vec::new()
    } else {
        rel.split('/').collect()
    };
    control_rules_of(&comps, word, access, out);
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::check_path_general;
    use super::super::SessionPaths;
    use super::*;

    #[test]
    fn the_usual_hook_place_is_the_one_by_components() {
        for w in ["/w", "/a/b c/w", "/w.git", "/"] {
            let (a, b) = (
                HookPlace::new(Path::new(w), None),
                HookPlace::by_components(Path::new(w), None),
            );
            assert_eq!(
                (a.path, a.git_dir, a.configured, a.normal),
                (b.path, b.git_dir, b.configured, b.normal),
                "{w}"
            );
        }
    }

    #[test]
    fn normal_text_ops_are_paths_ops() {
        for s in ["/", "/a", "/a/b", "/a/b.git/c"] {
            assert!(is_normal(s), "{s}");
        }
        for s in ["", "a", "/a/", "//a", "/a/./b", "/a/..", "/a//b", "/."] {
            assert!(!is_normal(s), "{s}");
        }
        let all = ["/", "/a", "/ab", "/a/b", "/a/b/c", "/b", "/a/bc"];
        for p in all {
            assert_eq!(
                parent(p),
                Path::new(p).parent().and_then(Path::to_str),
                "{p}"
            );
            for b in all {
                let (pp, bp) = (Path::new(p), Path::new(b));
                assert_eq!(under(p, b), pp.starts_with(bp), "{p} under {b}");
                assert_eq!(
                    rest(p, b),
                    pp.strip_prefix(bp).ok().and_then(Path::to_str),
                    "{p} less {b}"
                );
            }
        }
    }

    struct Session {
        hook: HookPlace,
        worktree: PathBuf,
    }

    impl SessionPaths for Session {
        fn pre_push_path(&self) -> Option<&Path> {
            Some(&self.hook.path)
        }
        fn hook(&self) -> &HookPlace {
            &self.hook
        }
        fn worktree_text(&self) -> Option<&str> {
            self.worktree.to_str().filter(|w| is_normal(w))
        }
        fn opened_paths(&self) -> &[PathBuf] {
            &[]
        }
    }

    /// Both routes of `check_path` give the same findings and the same physical path, for
    /// words of every kind (credentials, git directories, hooks, control files, links, `..`,
    /// missing components) from directories inside the worktree, with the hook in the git
    /// directory, in a configured hooks directory inside the worktree, and outside it.
    #[test]
    fn both_routes_agree() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let w = root.join("w");
        for d in [
            ".git/hooks",
            ".git/modules/m/hooks",
            ".husky",
            "src/deep",
            ".claude",
            ".config/mise",
            "sub.git/hooks",
        ] {
            std::fs::create_dir_all(w.join(d)).unwrap();
        }
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(w.join(".git/hooks/pre-push"), "").unwrap();
        std::fs::write(w.join("src/main.rs"), "").unwrap();
        std::os::unix::fs::symlink("../out", w.join("outdir")).unwrap();
        std::os::unix::fs::symlink("src", w.join("inside")).unwrap();
        let words = [
            "build",
            "src",
            "src/main.rs",
            "src/main.rs/x",
            "src/deep/new",
            ".git",
            ".git/hooks",
            ".git/hooks/pre-push",
            ".git/hooks/pre-commit",
            ".git/config",
            ".git/HEAD",
            ".git/commondir",
            ".git/modules/m/hooks/x",
            ".git/modules/m/config",
            "sub.git/hooks/x",
            "x/gitdir",
            ".husky",
            ".husky/pre-push",
            ".husky/pre-commit",
            ".env",
            ".ENV.local",
            "config/credentials.json",
            "HEAD:.env",
            "a:b",
            ".ssh/id_rsa",
            ".claude/settings.json",
            ".vscode/tasks.json",
            ".config/mise/config.toml",
            "mise.local.toml",
            "outdir",
            "outdir/secret",
            "inside/main.rs",
            "./src",
            "src/../.git",
            "..",
            "../w/src",
            "/etc",
            "src//main.rs",
            "src/",
            "-weird",
            "hooks/pre-push",
        ];
        let hooks = [
            None,
            Some(w.join(".husky/pre-push")),
            Some(root.join("common.git/hooks/pre-push")),
            Some(root.join("hooks/pre-push")),
        ];
        let accesses = [Access::Read, Access::Write, Access::Modify, Access::Any];
        let mut fast = 0;
        for hook in &hooks {
            let session = Session {
                hook: HookPlace::new(&w, hook.as_deref()),
                worktree: w.clone(),
            };
            let pc = PathCtx {
                worktree: &w,
                scratch: None,
                session: &session,
            };
            for cwd in [w.clone(), w.join("src"), w.join(".git")] {
                for word in words {
                    for access in accesses {
                        let (mut a, mut b) = (Vec::new(), Vec::new());
                        let got = super::super::check_path(&pc, &cwd, word, access, &mut a);
                        let want = check_path_general(&pc, &cwd, word, access, &mut b);
                        assert_eq!(got, want, "{word} from {}", cwd.display());
                        assert_eq!(a, b, "{word} from {} ({access:?})", cwd.display());
                        let phys = super::super::resolve(&cwd, word);
                        let same = phys == super::super::lexical(&cwd, word);
                        let mut c = Vec::new();
                        if same && check_inside(&pc, word, &phys, access, &mut c) {
                            fast += 1;
                        }
                    }
                }
            }
        }
        // The fast route was taken (most of these words are inside the worktree).
        assert!(fast > 600, "{fast}");
    }
}
