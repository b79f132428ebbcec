//! Path resolution against the worktree and the path rules of DESIGN.md §2/§2a: leaving the
//! worktree, system paths (the vault), credentials, agent and IDE control files, the pre-push
//! hook.

use crate::rules;
use crate::verdict::{Finding, Verdict};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

pub(crate) mod control;
mod glob;
pub(crate) mod pattern;
mod plain;
pub(crate) mod seen;

pub(crate) use glob::{glob, GlobOpts};
pub(crate) use plain::{is_normal, HookPlace};

/// Symlink hops before resolution gives up (the kernel's limit is 40).
const MAX_SYMLINK_HOPS: usize = 40;

/// How a command uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Reads it (or only looks at it).
    Read,
    /// Writes or creates it.
    Write,
    /// Deletes, renames, links or changes its metadata.
    Modify,
    /// Unknown: a command nobody listed may do anything with its operands.
    Any,
}

impl Access {
    fn modifies(self) -> bool {
        matches!(self, Access::Write | Access::Modify | Access::Any)
    }
}

/// The system paths every command touches; naming them is not leaving the worktree
/// (DESIGN.md §2).
pub(crate) fn is_system_exception(p: &str) -> bool {
    matches!(
        p,
        "/dev/null"
            | "/dev/stdin"
            | "/dev/stdout"
            | "/dev/stderr"
            | "/dev/tty"
            | "/dev/zero"
            | "/dev/urandom"
    ) || p
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether an absolute path lies in a system directory whose modification is a fixed denial
/// (`/etc`, `/usr`, `/bin`, `/sbin`, `/lib*`, `/boot`, `/sys`, `/proc`, `/dev`).
pub(crate) fn is_system_path(p: &Path) -> bool {
    let mut comps = p.components();
    if comps.next() != Some(Component::RootDir) {
        return false;
    }
    match comps.next() {
        Some(Component::Normal(first)) => {
            let f = first.to_string_lossy();
            matches!(
                f.as_ref(),
                "etc" | "usr" | "bin" | "sbin" | "boot" | "sys" | "proc" | "dev"
            ) || f.starts_with("lib")
        }
        _ => false,
    }
}

/// Whether an absolute path is one of the top-level directories that hold the system's and
/// its users' state (`/var`, `/opt`, `/run`, `/srv`, `/home`, `/root`): a recursive
/// modification of one of them is catastrophic, while files below them (`/var/tmp`, the
/// session's scratch) keep their own rules.
pub(crate) fn is_system_root(p: &Path) -> bool {
    let mut comps = p.components();
    if comps.next() != Some(Component::RootDir) {
        return false;
    }
    match (comps.next(), comps.next()) {
        (Some(Component::Normal(first)), None) => matches!(
            first.to_string_lossy().as_ref(),
            "var" | "opt" | "run" | "srv" | "home" | "root"
        ),
        _ => false,
    }
}

/// Resolves `word` against `cwd` the way the kernel walks a path: `.` skipped, `..` the
/// physical parent, symlinks followed through the real filesystem; components that do not
/// exist are taken lexically. Returns the absolute physical path.
pub(crate) fn resolve(cwd: &Path, word: &str) -> PathBuf {
    match resolve_linkless(cwd, word) {
        Some(p) => p,
        None => resolve_in(cwd, word, &[]).0,
    }
}

/// [`resolve`] of a name as the disk gives it (a directory's entry): one that is no UTF-8
/// text is walked as its bytes, never decoded into another name.
pub(crate) fn resolve_os(cwd: &Path, word: &OsStr) -> PathBuf {
    if let Some(w) = word.to_str() {
        return resolve(cwd, w);
    }
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, word);
    let walk = Walk {
        out: if word.as_bytes().starts_with(b"/") {
            PathBuf::from("/")
        } else {
            cwd.to_path_buf()
        },
        pending,
        hops: 0,
        exists: true,
        through: Through::Nothing,
    };
    let mut results = Vec::new();
    walk.run(&[], &mut results);
    results
        .into_iter()
        .next()
        .map_or_else(|| cwd.join(word), |(p, _)| p)
}

/// [`resolve`] while no component on the way is a symbolic link: the same walk over the same
/// paths (`.` skipped, `..` the parent, each component looked at until one is missing), built
/// in place. `None` when a link is met (the general walk, [`resolve_all`], then follows it;
/// the answers looked at so far are kept by [`seen`]) or when the word starts under `/proc/`
/// (whose `self` is the process that runs the command).
fn resolve_linkless(cwd: &Path, word: &str) -> Option<PathBuf> {
    if word.starts_with("/proc/") {
        return None;
    }
    let mut out = PathBuf::with_capacity(cwd.as_os_str().len() + word.len() + 1);
    out.push(if word.starts_with('/') {
        Path::new("/")
    } else {
        cwd
    });
    let mut exists = true;
    for c in word.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => {
                out.push(name);
                if exists {
                    match seen::node(&out) {
                        seen::Node::Link(_) => return None,
                        seen::Node::Missing => exists = false,
                        seen::Node::Dir | seen::Node::File | seen::Node::Other => {}
                    }
                }
            }
        }
    }
    Some(out)
}

/// Whether a resolution went through a link the line made ([`resolve_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Through {
    /// No link of the line was on the way.
    Nothing,
    /// At least one was, and every one had a known target.
    Links,
    /// One was whose target cannot be known: the result is where the walk stopped.
    Unknown,
}

/// [`resolve`] with the links made earlier on the line taken as already there (a link the
/// line made shadows what the disk has at its place, as it would once made), following every
/// one on the way. Also says whether such a link was on the way.
pub(crate) fn resolve_in(cwd: &Path, word: &str, made: &[Link]) -> (PathBuf, Through) {
    resolve_all(cwd, word, made)
        .into_iter()
        .next()
        .unwrap_or_else(|| (lexical(cwd, word), Through::Nothing))
}

/// Every path `word` may resolve to when each link made earlier on the line may or may not be
/// there (a command that makes one may fail): the one following every link first, the one
/// following none (plain [`resolve`]) last. At most [`MAX_LINK_BRANCHES`] paths; beyond, the
/// rest are one unknown.
pub(crate) fn resolve_all(cwd: &Path, word: &str, made: &[Link]) -> Vec<(PathBuf, Through)> {
    if made.is_empty() {
        // No link of the line: one path, the walk's through the disk.
        if let Some(p) = resolve_linkless(cwd, word) {
            return vec![(p, Through::Nothing)];
        }
    }
    // `/proc/self` is the process that runs the command, not tyba: its `root` is `/`, its
    // `cwd` is the command's directory; anything else under it is left as written.
    for me in ["/proc/self", "/proc/thread-self"] {
        if let Some(rest) = word.strip_prefix(me) {
            if let Some(r) = rest.strip_prefix("/root") {
                return resolve_all(Path::new("/"), if r.is_empty() { "/" } else { r }, made);
            }
            if let Some(r) = rest.strip_prefix("/cwd") {
                return resolve_all(cwd, r.trim_start_matches('/'), made);
            }
            if rest.is_empty() || rest.starts_with('/') {
                return vec![(lexical(Path::new("/"), word), Through::Nothing)];
            }
        }
    }
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, OsStr::new(word));
    let out = if word.starts_with('/') {
        PathBuf::from("/")
    } else if made.is_empty() {
        cwd.to_path_buf()
    } else {
        // The directory itself may be under a link the line made (`ln -s .git g; cd g`).
        push_components(&mut pending, cwd.as_os_str());
        PathBuf::from("/")
    };
    let mut results = Vec::new();
    let walk = Walk {
        out,
        pending,
        hops: 0,
        exists: true,
        through: Through::Nothing,
    };
    walk.run(made, &mut results);
    results
}

/// Paths [`resolve_all`] lists at most.
const MAX_LINK_BRANCHES: usize = 16;

/// One resolution under way.
#[derive(Clone)]
struct Walk {
    out: PathBuf,
    /// Components still to walk, last first: bytes, as a link's target on the disk may be no
    /// UTF-8 text (its name is looked up as it is, never decoded into another).
    pending: Vec<OsString>,
    hops: usize,
    exists: bool,
    through: Through,
}

impl Walk {
    fn run(mut self, made: &[Link], results: &mut Vec<(PathBuf, Through)>) {
        while let Some(c) = self.pending.pop() {
            match c.as_bytes() {
                b"" | b"." => {}
                b".." => {
                    self.out.pop();
                }
                _ => {
                    self.out.push(&c);
                    if let Some(link) = made.iter().rev().find(|l| l.at == self.out) {
                        if results.len() + 1 >= MAX_LINK_BRANCHES {
                            results.push((self.out, Through::Unknown));
                            return;
                        }
                        let mut follow = self.clone();
                        follow.hops += 1;
                        match link
                            .to
                            .as_deref()
                            .filter(|_| follow.hops <= MAX_SYMLINK_HOPS)
                        {
                            Some(target) => {
                                if follow.through == Through::Nothing {
                                    follow.through = Through::Links;
                                }
                                follow.out.pop();
                                if target.starts_with('/') {
                                    follow.out = PathBuf::from("/");
                                }
                                push_components(&mut follow.pending, OsStr::new(target));
                                // What the disk has under the link's target still counts.
                                follow.exists = true;
                                follow.run(made, results);
                            }
                            None => results.push((follow.out, Through::Unknown)),
                        }
                        // Or the link is not there (the command that makes it failed): on
                        // as the disk has it.
                    }
                    if !self.exists {
                        continue;
                    }
                    match seen::node(&self.out) {
                        seen::Node::Link(target) => {
                            self.hops += 1;
                            if self.hops > MAX_SYMLINK_HOPS {
                                self.exists = false;
                                continue;
                            }
                            match target {
                                Some(target) => {
                                    self.out.pop();
                                    if target.as_os_str().as_bytes().starts_with(b"/") {
                                        self.out = PathBuf::from("/");
                                    }
                                    push_components(&mut self.pending, target.as_os_str());
                                }
                                None => self.exists = false,
                            }
                        }
                        seen::Node::Missing => self.exists = false,
                        seen::Node::Dir | seen::Node::File | seen::Node::Other => {}
                    }
                }
            }
        }
        results.push((self.out, self.through));
    }
}

/// A link a command of the line makes (`ln -s`, `ln`, `cp -s`, `cp -l`, `link`): later
/// words are resolved through it as the kernel would once it exists.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Link {
    /// Where the link is: its directory resolved, its own name not followed.
    pub at: PathBuf,
    /// What it points to: a symbolic link's text (relative to the link's directory unless
    /// absolute), or a hard link's file (absolute); `None` when it cannot be known.
    pub to: Option<String>,
}

/// Pushes the components of `s` onto the stack so that they pop in order.
fn push_components(stack: &mut Vec<OsString>, s: &OsStr) {
    for c in s.as_bytes().split(|b| *b == b'/').rev() {
        stack.push(OsStr::from_bytes(c).to_os_string());
    }
}

/// Lexical absolute form of `word` against `cwd` (`.`/`..` folded without touching the disk).
pub(crate) fn lexical(cwd: &Path, word: &str) -> PathBuf {
    let mut out = if word.starts_with('/') {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    };
    for c in word.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            n => out.push(n),
        }
    }
    out
}

/// Credential names (DESIGN.md §2a "Credentials"): a component `.ssh`, `.aws`, `.gnupg`,
/// `.kube`, `.docker`; a file `.env`/`.env.*`, `credentials`/`credentials.*`, `.netrc`,
/// `.git-credentials`, `.npmrc`, `.pypirc`, `.envrc`; private keys `id_rsa`, `id_dsa`,
/// `id_ecdsa`, `id_ed25519` with or without `_sk` (not `.pub`).
pub(crate) fn credential_component(name: &str) -> bool {
    // Case-insensitive: `.ENV` and `ID_RSA` are the same secrets on case-insensitive file
    // systems, and a rename away.
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(name.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(name)
    };
    matches!(
        name.as_ref(),
        ".ssh" | ".aws" | ".gnupg" | ".kube" | ".docker"
    ) || credential_file(&name)
}

fn credential_file(name: &str) -> bool {
    if name == ".env" || name.starts_with(".env.") {
        return true;
    }
    if name == "credentials"
        || name
            .strip_prefix("credentials.")
            .is_some_and(|e| !e.is_empty())
    {
        return true;
    }
    if matches!(
        name,
        ".netrc" | ".git-credentials" | ".npmrc" | ".pypirc" | ".envrc"
    ) {
        return true;
    }
    let key = name.strip_suffix("_sk").unwrap_or(name);
    matches!(key, "id_rsa" | "id_dsa" | "id_ecdsa" | "id_ed25519")
}

/// The first credential name among the components of `p` ([`credential_in`] of its text).
pub(crate) fn has_credential(p: &Path) -> Option<String> {
    credential_in(&p.to_string_lossy())
}

/// The first component of the path `text` that is a credential name
/// ([`credential_component`]); `""`, `.` and `..` are no names (the components `Path` calls
/// normal, in order).
pub(crate) fn credential_in(text: &str) -> Option<String> {
    text.split('/')
        .filter(|c| !matches!(*c, "" | "." | ".."))
        .find(|c| credential_component(c))
        .map(str::to_string)
}

/// Whether `p` (a physical path) is the git directory holding the pre-push hook or a
/// directory between it and the hook (`.git`, `.git/hooks`): replacing, removing or
/// renaming it changes the hook; writing into it does not by itself.
pub(crate) fn holds_hook(pc: &PathCtx<'_>, p: &Path) -> bool {
    let h = pc.session.hook();
    h.holds(p) && p != h.path
}

/// Whether something (a file, a link or anything else) is at `hook`: what a recursion below
/// one of its directories reaches.
pub(crate) fn hook_exists(hook: &Path) -> bool {
    seen::node(hook) != seen::Node::Missing
}

/// Session facts that cost I/O or allocation, computed only when a rule needs them.
pub(crate) trait SessionPaths {
    /// The file git runs as the pre-push hook, when known.
    fn pre_push_path(&self) -> Option<&Path>;
    /// The pre-push hook's place ([`HookPlace::new`] of the worktree and
    /// [`Self::pre_push_path`]).
    fn hook(&self) -> &HookPlace;
    /// The worktree's path as text when it is in normal form ([`plain::is_normal`]).
    fn worktree_text(&self) -> Option<&str>;
    /// Paths the policy file opens (absolute, `~` expanded).
    fn opened_paths(&self) -> &[PathBuf];
}

/// What the path rules need to know about the session.
pub(crate) struct PathCtx<'a> {
    pub worktree: &'a Path,
    /// The session's private temp dir, treated like the worktree.
    pub scratch: Option<&'a Path>,
    /// The pre-push hook and the paths the policy opens, computed on first use.
    pub session: &'a dyn SessionPaths,
}

/// Classifies one known path word used with `access` from `cwd`. Pushes findings; returns the
/// physical path (for the report).
pub(crate) fn check_path(
    pc: &PathCtx<'_>,
    cwd: &Path,
    word: &str,
    access: Access,
    out: &mut Vec<Finding>,
) -> Option<PathBuf> {
    check_path_by(pc, cwd, word, access, out, Route::Plain)
}

/// Which route [`check_path_by`] may take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    /// [`plain::check_inside`] where it applies, else the general route.
    Plain,
    /// `std::path`'s comparisons for every path.
    #[cfg_attr(not(test), allow(dead_code))]
    General,
}

fn check_path_by(
    pc: &PathCtx<'_>,
    cwd: &Path,
    word: &str,
    access: Access,
    out: &mut Vec<Finding>,
    route: Route,
) -> Option<PathBuf> {
    if word.is_empty() {
        return None;
    }
    let lex = lexical(cwd, word);
    // The exceptions are for reading and writing them; deleting, renaming or chmod-ing
    // `/dev/null` is a change inside /dev.
    if access != Access::Modify
        && (is_system_exception(&lex.to_string_lossy())
            || (word.starts_with('/') && is_system_exception(word)))
    {
        return None;
    }
    // The physical form: the lexical one when no link is on the way (the same bytes, then
    // `lex_other` is `None`).
    let phys = resolve(cwd, word);
    let lex_other = (phys.as_os_str() != lex.as_os_str()).then_some(lex);
    let same = lex_other.is_none();
    let lex: &Path = lex_other.as_deref().unwrap_or(&phys);
    let lex_s = lex.to_string_lossy();
    if route == Route::Plain && same && plain::check_inside(pc, word, &phys, access, out) {
        return Some(phys);
    }
    let inside = phys.starts_with(pc.worktree) || pc.scratch.is_some_and(|s| phys.starts_with(s));

    // Credentials anywhere: in the word as written, and in the physical target.
    // `REV:PATH`, `host:path`, `a:b` lists: every colon-separated piece counts.
    let cred = word.split(':').find_map(credential_in).or_else(|| {
        let rel = phys.strip_prefix(pc.worktree).unwrap_or(&phys);
        has_credential(rel)
    });
    if let Some(name) = cred {
        out.push(found::credential(word, &name));
    }

    // The pre-push hook and the directories holding it: any change switches the guard off.
    if access.modifies() {
        let hook = pc.session.hook();
        // Each rule below asks of the physical and of the lexical form; when both are the
        // same path, once.
        let lex_too = (!same).then_some(lex);
        let either = |f: &dyn Fn(&Path) -> bool| f(&phys) || lex_too.is_some_and(f);
        let names_hook = either(&|p| p.ends_with("hooks/pre-push"));
        // Removing or renaming a directory that holds the hook (`.git`, `.git/hooks`) changes it too.
        if names_hook || either(&|p| hook.holds(p)) {
            out.push(found::hook(word));
        }
        // Every other hook in the directory git runs hooks from (`core.hooksPath`, `.husky`)
        // is code that runs outside the sandbox later (DESIGN.md §2: hooks red).
        // (Hooks under a git directory have their rule in `control_rules`.)
        if hook.configured && !names_hook && either(&|p| hook.beside(p)) {
            out.push(found::hooks_dir(word));
        }
        if either(&|p| locates_git_dir(pc.worktree, p)) {
            out.push(found::git_dir_moved(word));
        }
    }

    if inside {
        if access.modifies() {
            if let Ok(rel) = phys.strip_prefix(pc.worktree) {
                control_rules(rel, word, access, out);
            }
            // A link on the way: the name as written is what the tools read too (a `.mcp.json`
            // that is a link to `docs/servers.json` starts the servers written there).
            if let Some(rel) = (!same)
                .then(|| lex.strip_prefix(pc.worktree).ok())
                .flatten()
            {
                control_rules(rel, word, access, out);
            }
        }
        return Some(phys);
    }

    // Outside the worktree.
    let system = is_system_path(&phys)
        || (is_system_path(lex) && !lex_s.starts_with("/proc/") && !lex_s.starts_with("/dev/fd/"));
    if system && access.modifies() && access != Access::Any {
        out.push(Finding::new(
            Verdict::Blocked,
            "vault.system-path",
            format!("`{word}` modifies a system path ({})", phys.display()),
        ));
        return Some(phys);
    }
    if access.modifies() {
        // Linked worktrees keep hooks and config in the common git dir, outside the tree.
        control_rules(&phys, word, access, out);
    }
    let opened = pc
        .session
        .opened_paths()
        .iter()
        .any(|o| phys.starts_with(o) || lex.starts_with(o));
    if opened && !system {
        out.push(Finding::new(
            Verdict::Yellow,
            "path.policy-opened",
            format!(
                "`{word}` is outside the worktree, in a path the policy opens ({})",
                phys.display()
            ),
        ));
    } else {
        let what = match access {
            Access::Write => "writes",
            Access::Modify => "changes",
            _ => "reaches",
        };
        let via = if phys != lex {
            format!(" (resolves to {})", phys.display())
        } else {
            String::new()
        };
        out.push(Finding::new(
            Verdict::Red,
            "path.outside-worktree",
            format!("`{word}` {what} outside the worktree{via}"),
        ));
    }
    Some(phys)
}

/// Whether `p` is a file that tells git where its directory is (gitrepository-layout(5)):
/// `commondir` of a git directory or of `worktrees/<id>/` (the common directory, holding
/// `config` and `hooks/`), `gitdir` there, or the worktree's `.git` when it is a file
/// (`gitdir: PATH` of a linked worktree or a submodule). Rewriting one points git at
/// configuration and hooks of the writer's choosing.
fn locates_git_dir(worktree: &Path, p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str());
    if matches!(name, Some("commondir") | Some("gitdir")) {
        return p.parent().is_some_and(|dir| {
            dir.components().any(|c| match c {
                Component::Normal(n) => {
                    let n = n.to_string_lossy();
                    n == ".git" || n.ends_with(".git")
                }
                _ => false,
            }) || dir
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|w| w == "worktrees")
        });
    }
    // `worktree/.git`, not a directory.
    name == Some(".git") && p.parent() == Some(worktree) && !p.is_dir()
}

fn control_rules(rel: &Path, word: &str, access: Access, out: &mut Vec<Finding>) {
    let names: Vec<std::borrow::Cow<'_, str>> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy()),
            _ => None,
        })
        .collect();
    let comps: Vec<&str> = names.iter().map(|c| c.as_ref()).collect();
    control_rules_of(&comps, word, access, out);
}

/// [`control_rules`] of a path given as its normal components.
fn control_rules_of(comps: &[&str], word: &str, access: Access, out: &mut Vec<Finding>) {
    let before = out.len();
    // Hooks of nested git directories (`.git/modules/x/hooks/`) run code too.
    if let Some(g) = comps.iter().position(|c| c.ends_with(".git")) {
        if comps.len() > g + 2
            && comps[g + 1..].contains(&"hooks")
            && comps.get(g + 1).copied() != Some("hooks")
        {
            out.push(Finding::new(
                Verdict::Red,
                "path.git-hooks",
                format!("`{word}` writes git hooks: code that runs outside the sandbox later"),
            ));
        }
        if comps.len() > g + 2 && comps.last().is_some_and(|c| *c == "config") {
            out.push(Finding::new(
                Verdict::Red,
                "path.git-config",
                format!("`{word}` writes a git configuration, which can run code later"),
            ));
        }
    }
    for (i, c) in comps.iter().enumerate() {
        if c.ends_with(".git") {
            match comps.get(i + 1).copied() {
                Some("hooks") => out.push(Finding::new(
                    Verdict::Red,
                    "path.git-hooks",
                    format!("`{word}` writes git hooks: code that runs outside the sandbox later"),
                )),
                Some("config") | Some("config.worktree") => out.push(Finding::new(
                    Verdict::Red,
                    "path.git-config",
                    format!("`{word}` writes the repository's git configuration, which can run code later"),
                )),
                None => out.push(Finding::new(
                    Verdict::Red,
                    rules::PATH_GIT_DIR.id,
                    format!("`{word}` changes the repository's git directory as a whole"),
                )),
                // Refs, objects (`objects/info/alternates`), `info/attributes`, `HEAD`,
                // `packed-refs`…: state git trusts on the person's side too (once: a nested
                // git directory's hooks or config have their rule above).
                Some(_) if matches!(access, Access::Write | Access::Modify) && out.len() == before => {
                    out.push(Finding::new(
                        Verdict::Red,
                        rules::PATH_GIT_DIR.id,
                        format!("`{word}` writes inside the repository's git directory"),
                    ))
                }
                _ => {}
            }
        }
        if let Some(c) = control::control_component(comps, i) {
            out.push(Finding::new(
                Verdict::Red,
                "path.control-file",
                format!(
                    "`{word}` writes an agent or IDE control file ({c}): approvals or code later"
                ),
            ));
        }
    }
}

/// A field whose value is partly unknown: never green; its known directory prefix is still
/// checked (`/tmp/$X` is outside whatever `$X` is).
pub(crate) fn check_partial(
    pc: &PathCtx<'_>,
    cwd: Option<&Path>,
    prefix: &str,
    display: &str,
    access: Access,
    out: &mut Vec<Finding>,
) {
    out.push(Finding::new(
        Verdict::Yellow,
        "path.unresolved",
        format!("`{display}` cannot be resolved before it runs"),
    ));
    if let Some(cred) = prefix.split('/').find(|c| credential_component(c)) {
        out.push(Finding::new(
            Verdict::Red,
            "path.credential",
            format!("`{display}` is a credential path ({cred})"),
        ));
    }
    let dir = match prefix.rfind('/') {
        Some(0) => "/",
        Some(i) => &prefix[..i],
        None => return,
    };
    let base = match cwd {
        Some(c) => c.to_path_buf(),
        None if dir.starts_with('/') => PathBuf::from("/"),
        None => return,
    };
    // The unknown rest could name anything below the prefix directory: take the directory
    // itself as the target, and `/` stays `/`.
    let mut sub = Vec::new();
    check_path(pc, &base, dir, access, &mut sub);
    if dir == "/" && access.modifies() && access != Access::Any {
        sub.push(Finding::new(
            Verdict::Blocked,
            "vault.system-path",
            format!("`{display}` can modify anything under /"),
        ));
    }
    out.extend(sub);
}

/// The finding of a path `word` leads to through a name that is no UTF-8 text (a link's
/// target, a directory's entry): no word names it, so it is judged as a path that cannot be
/// resolved, never decoded into another path (docs/policy.md "Names that are not UTF-8").
pub(crate) fn not_text(word: &str) -> Finding {
    Finding::new(
        Verdict::Yellow,
        rules::PATH_UNRESOLVED.id,
        format!("`{word}` leads through a name that is no UTF-8 text, which tyba cannot look at"),
    )
}

/// The findings the path rules push, one constructor each (both routes of [`check_path`]
/// give the same text).
mod found {
    use crate::rules;
    use crate::verdict::{Finding, Verdict};

    pub(super) fn credential(word: &str, name: &str) -> Finding {
        Finding::new(
            Verdict::Red,
            "path.credential",
            format!("`{word}` is a credential path ({name})"),
        )
    }

    pub(super) fn hook(word: &str) -> Finding {
        Finding::new(
            Verdict::Blocked,
            "git.guard.hook",
            format!(
                "`{word}` would change the pre-push hook that keeps pushes off protected branches"
            ),
        )
    }

    pub(super) fn hooks_dir(word: &str) -> Finding {
        Finding::new(
            Verdict::Red,
            "path.git-hooks",
            format!("`{word}` writes a git hook: code that runs outside the sandbox later"),
        )
    }

    pub(super) fn git_dir_moved(word: &str) -> Finding {
        Finding::new(
            Verdict::Blocked,
            rules::GIT_GUARD_GIT_DIR.id,
            format!("`{word}` would move git's directory, and with it the configuration and hooks git uses: the pre-push hook would no longer run"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`check_path`] by the general route only (what the plain route is checked against).
    pub(super) fn check_path_general(
        pc: &PathCtx<'_>,
        cwd: &Path,
        word: &str,
        access: Access,
        out: &mut Vec<Finding>,
    ) -> Option<PathBuf> {
        check_path_by(pc, cwd, word, access, out, Route::General)
    }

    #[test]
    fn credential_names() {
        for n in [
            ".env",
            ".env.production",
            "credentials",
            "credentials.json",
            "id_ed25519",
            "id_ecdsa_sk",
            ".npmrc",
            ".envrc",
        ] {
            assert!(credential_component(n), "{n}");
        }
        for n in [
            "env.example",
            "id_ed25519.pub",
            "credentials.",
            "src",
            ".environment",
        ] {
            assert!(!credential_component(n), "{n}");
        }
    }

    #[test]
    fn system_exceptions() {
        assert!(is_system_exception("/dev/null"));
        assert!(is_system_exception("/dev/fd/3"));
        assert!(!is_system_exception("/dev/fd/"));
        assert!(!is_system_exception("/dev/sda"));
    }
}
