//! Links a command of the line makes, so that later words are resolved through them as the
//! kernel will once they exist (DESIGN.md §2: a path that goes through a symlink and leaves
//! the worktree, or reaches `.git/hooks`, `.git/config` or a credential, counts as such).
//!
//! `ln(1)`: `ln [-s] TARGET LINK`, `ln TARGET` (a link in the current directory), `ln
//! TARGET… DIR`, `ln -t DIR TARGET…`, `-T` (LINK is the link even when a directory), `-r`
//! (the target as seen from the current directory); without `-s` a hard link. `cp(1)` with
//! `-s`/`--symbolic-link` or `-l`/`--link` makes links instead of copies the same way;
//! `link(1)` makes one hard link. A link whose place is a directory that may be made earlier
//! on the line (`mkdir d; ln -s .git/config d`) is taken both as `d` and as `d/config`: the
//! later path is judged both ways, the worst wins.
//!
//! Copies and moves carry the links they copy or move: `mv` moves a link and every link
//! below a directory as they are; `cp` copies a link as a link with `-P`/`-d`/`-a`
//! (`--no-dereference`), and, recursive (`-r`, `-R`, `-a`) without `-L`, every link below a
//! directory and a source that is itself a link (without `-H` too), coreutils cp(1). Each
//! such link is made at the copy's place with the same target text (a relative one now
//! read from its new place): `cp -r d e; cat e/link/x` reads where `d/link` points.

use super::paths::{self, Link};
use super::registry;
use super::registry::options::{names, parse_opts, Tok};
use super::words::Field;
use std::path::{Path, PathBuf};

/// What one command makes: links at known places, and the targets of links whose place
/// cannot be known (`ln -s .git/config "$x"`: any later path may be one of them).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Made {
    pub links: Vec<Link>,
    /// Each target as an absolute path (a relative symbolic one taken from the current
    /// directory, the link's own being unknown); `None` when it cannot be known either.
    pub unplaced: Vec<Option<String>>,
}

/// The links `program ARGS` makes when run in `cwd`, with the links made before it (`made`)
/// already in place. Nothing for other programs.
pub(crate) fn made_by(program: &str, args: &[Field], cwd: &Path, made: &[Link]) -> Made {
    let mut m = Made::default();
    m.links = placed(program, args, cwd, made, &mut m.unplaced);
    if matches!(program, "cp" | "mv") {
        copied(program, args, cwd, made, &mut m);
    }
    m
}

/// Entries below one copied directory looked at before its links count as unknown.
const MAX_COPIED_ENTRIES: usize = 4096;

/// The links a copy or move carries to its destination (see the module doc), added to `m`.
fn copied(program: &str, args: &[Field], cwd: &Path, made: &[Link], m: &mut Made) {
    let spec = registry::lookup(program).map_or(&[][..], |e| e.options);
    let (mut recursive, mut follow_all, mut follow_named, mut keep_links) =
        (program == "mv", false, false, program == "mv");
    let mut place_args: Vec<Field> = vec![Field::lit("-s")];
    let mut sources: Vec<Field> = Vec::new();
    for t in parse_opts(args, spec) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if program == "cp" {
                    // A copy made of links is `placed`'s.
                    if n == "-s" || n == "-l" || names(n, "--symbolic-link") || names(n, "--link") {
                        return;
                    }
                    let archive = n == "-a" || names(n, "--archive");
                    recursive |= archive || n == "-r" || n == "-R" || names(n, "--recursive");
                    keep_links |= archive || n == "-P" || n == "-d" || names(n, "--no-dereference");
                    follow_all |= n == "-L" || names(n, "--dereference");
                    follow_named |= n == "-H";
                }
                if n == "-T" || names(n, "--no-target-directory") {
                    place_args.push(Field::lit("-T"));
                }
                if n == "-t" || names(n, "--target-directory") {
                    place_args.push(Field::lit("-t"));
                    place_args.push(value.unwrap_or_else(Field::unknown));
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => sources.push(f),
        }
    }
    place_args.extend(sources.iter().cloned());
    if !place_args
        .iter()
        .any(|a| a.known().as_deref() == Some("-t"))
    {
        // The last operand is the destination.
        sources.pop();
    }
    // A source that is a link itself is copied as one; a directory's links below it.
    let source_as_link = keep_links || (recursive && !follow_all && !follow_named);
    let inner_links = recursive && !follow_all;
    let mut carried: Vec<(String, Vec<(PathBuf, String)>)> = Vec::new();
    for s in &sources {
        let Some(text) = s.known() else { continue };
        let mut links = Vec::new();
        if let Some(at) = place(cwd, &text, made) {
            match paths::seen::node(&at) {
                paths::seen::Node::Link(Some(to)) if source_as_link => match to.to_str() {
                    Some(to) => links.push((PathBuf::new(), to.to_string())),
                    // A target that is no UTF-8 text: the copy leads where no word can say.
                    None => m.unplaced.push(None),
                },
                paths::seen::Node::Link(_) if !follow_all && !follow_named && !keep_links => {}
                _ if inner_links => {
                    let dir = paths::resolve_in(cwd, &text, made).0;
                    if !links_below(&dir, &mut links) {
                        m.unplaced.push(None);
                    }
                }
                _ => {}
            }
        }
        if !links.is_empty() {
            carried.push((text, links));
        }
    }
    if carried.is_empty() {
        return;
    }
    // Where each source's copy goes: where `ln -s SOURCE… DEST` would put a link to it.
    let mut unplaced = Vec::new();
    for root in placed("ln", &place_args, cwd, made, &mut unplaced) {
        let Some((_, links)) = carried.iter().find(|(t, _)| root.to.as_deref() == Some(t)) else {
            continue;
        };
        for (rel, to) in links {
            m.links.push(Link {
                at: root.at.join(rel),
                to: Some(to.clone()),
            });
        }
    }
    // A destination that cannot be known: the links may be anywhere (later paths unknown).
    if !unplaced.is_empty() {
        m.unplaced.push(None);
    }
}

/// The symbolic links below `dir` (not followed), each with its path under `dir` and its
/// target text; `false` when there were more entries than [`MAX_COPIED_ENTRIES`], or a
/// target is no UTF-8 text (where it leads cannot be written as a word).
fn links_below(dir: &Path, out: &mut Vec<(PathBuf, String)>) -> bool {
    let mut todo = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(rel) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > MAX_COPIED_ENTRIES {
                return false;
            }
            let Ok(t) = e.file_type() else { continue };
            let here = rel.join(e.file_name());
            if t.is_symlink() {
                if let Ok(to) = std::fs::read_link(e.path()) {
                    let Some(to) = to.to_str() else {
                        return false;
                    };
                    out.push((here, to.to_string()));
                }
            } else if t.is_dir() {
                todo.push(here);
            }
        }
    }
    true
}

fn placed(
    program: &str,
    args: &[Field],
    cwd: &Path,
    made: &[Link],
    unplaced: &mut Vec<Option<String>>,
) -> Vec<Link> {
    let mut symbolic = false;
    let mut hard = false;
    let mut no_target_dir = false;
    let mut relative = false;
    let mut target_dir: Option<Field> = None;
    let mut operands: Vec<Field> = Vec::new();
    let spec = registry::lookup(program).map_or(&[][..], |e| e.options);
    for t in parse_opts(args, spec) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                match program {
                    "ln" => {
                        symbolic |= n == "-s" || names(n, "--symbolic");
                        relative |= n == "-r" || names(n, "--relative");
                    }
                    "cp" => {
                        symbolic |= n == "-s" || names(n, "--symbolic-link");
                        hard |= n == "-l" || names(n, "--link");
                    }
                    _ => {}
                }
                no_target_dir |= n == "-T" || names(n, "--no-target-directory");
                if n == "-t" || names(n, "--target-directory") {
                    target_dir = value;
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f),
        }
    }
    match program {
        "ln" => hard = !symbolic,
        "link" => hard = true,
        "cp" if symbolic || hard => {}
        _ => return Vec::new(),
    }
    // The link's target as it is stored.
    let target = |t: &Field| -> Option<String> {
        let text = t.known()?;
        if hard {
            // A hard link is the file the path names.
            // One that is no UTF-8 text cannot be known as a word.
            paths::resolve_in(cwd, &text, made)
                .0
                .to_str()
                .map(str::to_string)
        } else if relative && !text.starts_with('/') {
            paths::lexical(cwd, &text).to_str().map(str::to_string)
        } else {
            Some(text)
        }
    };
    let base = |t: &Field| -> Option<String> {
        let text = t.known()?;
        let trimmed = text.trim_end_matches('/');
        trimmed
            .rsplit('/')
            .next()
            .filter(|b| !b.is_empty() && *b != "." && *b != "..")
            .map(str::to_string)
    };
    let absolute = |t: &Field| -> Option<String> {
        let text = target(t)?;
        paths::lexical(cwd, &text).to_str().map(str::to_string)
    };
    let mut out = Vec::new();
    let into = |dir: &PathBuf, t: &Field, out: &mut Vec<Link>| {
        if let Some(b) = base(t) {
            out.push(Link {
                at: dir.join(b),
                to: target(t),
            });
        }
    };
    if let Some(d) = target_dir {
        let Some(dir) = d.known().map(|d| place_dir(cwd, &d, made)) else {
            unplaced.extend(operands.iter().map(absolute));
            return out;
        };
        for t in &operands {
            into(&dir, t, &mut out);
        }
        return out;
    }
    let (dest, targets) = match operands.len() {
        0 => return out,
        // `ln TARGET`: a link of the same name in the current directory.
        1 => (None, &operands[..]),
        n => (Some(&operands[n - 1]), &operands[..n - 1]),
    };
    let Some(dest) = dest else {
        into(&cwd.to_path_buf(), &targets[0], &mut out);
        return out;
    };
    let Some(dest_text) = dest.known() else {
        unplaced.extend(targets.iter().map(absolute));
        return out;
    };
    let dir = place_dir(cwd, &dest_text, made);
    if no_target_dir {
        if let Some(t) = targets.first() {
            if let Some(at) = place(cwd, &dest_text, made) {
                out.push(Link { at, to: target(t) });
            }
        }
        return out;
    }
    if targets.len() > 1 || dest_text.ends_with('/') || dir.is_dir() {
        for t in targets {
            into(&dir, t, &mut out);
        }
        return out;
    }
    let t = &targets[0];
    if let Some(at) = place(cwd, &dest_text, made) {
        out.push(Link { at, to: target(t) });
    }
    if !dir.exists() {
        // Not there now: it may be a directory made earlier on the line.
        into(&dir, t, &mut out);
    }
    out
}

/// A directory operand, followed all the way (links the line made included).
fn place_dir(cwd: &Path, text: &str, made: &[Link]) -> PathBuf {
    paths::resolve_in(cwd, text, made).0
}

/// Where a new entry named by `text` goes: its directory followed, its own name not.
fn place(cwd: &Path, text: &str, made: &[Link]) -> Option<PathBuf> {
    let trimmed = text.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some(("", name)) => ("/", name),
        Some((parent, name)) => (parent, name),
        None => (".", trimmed),
    };
    if name.is_empty() || name == "." || name == ".." {
        return None;
    }
    Some(paths::resolve_in(cwd, parent, made).0.join(name))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::analysis::paths::Through;

    fn made(cmd: &str, cwd: &Path, before: &[Link]) -> Vec<Link> {
        let mut words = cmd.split_whitespace().map(Field::lit);
        let p = words.next().unwrap().known().unwrap();
        let args: Vec<Field> = words.collect();
        made_by(&p, &args, cwd, before).links
    }

    fn link(at: &Path, to: &str) -> Link {
        Link {
            at: at.to_path_buf(),
            to: Some(to.to_string()),
        }
    }

    #[test]
    fn where_each_spelling_puts_its_link() {
        let tmp = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(w.join("d")).unwrap();
        std::fs::write(w.join("f"), "").unwrap();
        assert_eq!(
            made("ln -s .git/hooks h", &w, &[]),
            [
                link(&w.join("h"), ".git/hooks"),
                link(&w.join("h/hooks"), ".git/hooks")
            ]
        );
        assert_eq!(
            made("ln -sf .git/config f", &w, &[]),
            [link(&w.join("f"), ".git/config")]
        );
        assert_eq!(
            made("ln -s ../.git/config d", &w, &[]),
            [link(&w.join("d/config"), "../.git/config")]
        );
        assert_eq!(
            made("ln -sT .git/config d", &w, &[]),
            [link(&w.join("d"), ".git/config")]
        );
        assert_eq!(
            made("ln -s -t d /etc/passwd .env", &w, &[]),
            [
                link(&w.join("d/passwd"), "/etc/passwd"),
                link(&w.join("d/.env"), ".env")
            ]
        );
        assert_eq!(made("ln -s /etc", &w, &[]), [link(&w.join("etc"), "/etc")]);
        let rel = made("ln -sr .git/config d/c", &w, &[]);
        assert_eq!(
            rel[0],
            link(&w.join("d/c"), &w.join(".git/config").to_string_lossy())
        );
        // Hard links name the file itself.
        let hard = made("ln f g", &w, &[]);
        assert_eq!(hard[0], link(&w.join("g"), &w.join("f").to_string_lossy()));
        assert_eq!(made("cp -s f d", &w, &[]), [link(&w.join("d/f"), "f")]);
        assert_eq!(
            made("cp --link f g", &w, &[])[0],
            link(&w.join("g"), &w.join("f").to_string_lossy())
        );
        assert_eq!(made("link f g", &w, &[])[0].at, w.join("g"));
        assert!(made("cp f g", &w, &[]).is_empty());
        assert!(made("ln -s", &w, &[]).is_empty());
        // A link into a link made before.
        let first = made("ln -s d e", &w, &[]);
        assert_eq!(
            made("ln -s .git/config e/c", &w, &first)[0].at,
            w.join("d/c")
        );
        // A target that cannot be known is kept as such.
        let unknown = made_by(
            "ln",
            &[Field::lit("-s"), Field::unknown(), Field::lit("x")],
            &w,
            &[],
        );
        assert_eq!(unknown.links[0].to, None);
        // A place that cannot be known: the target is kept, from here.
        let unplaced = made_by(
            "ln",
            &[
                Field::lit("-s"),
                Field::lit(".git/config"),
                Field::unknown(),
            ],
            &w,
            &[],
        );
        assert!(unplaced.links.is_empty());
        assert_eq!(
            unplaced.unplaced,
            [Some(w.join(".git/config").to_string_lossy().into_owned())]
        );
    }

    #[test]
    fn later_paths_resolve_through_links_made_before() {
        let tmp = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
        let links = made("ln -s .git/hooks h", &w, &[]);
        let (p, through) = paths::resolve_in(&w, "h/pre-push", &links);
        assert_eq!(
            (p, through),
            (w.join(".git/hooks/pre-push"), Through::Links)
        );
        // From a directory under the link, and with `..` after it (the physical parent).
        let (p, _) = paths::resolve_in(&w.join("h"), "pre-push", &links);
        assert_eq!(p, w.join(".git/hooks/pre-push"));
        let (p, _) = paths::resolve_in(&w, "h/../config", &links);
        assert_eq!(p, w.join(".git/config"));
        // Chains of links made on the line.
        let mut chain = made("ln -s .git g", &w, &[]);
        chain.extend(made("ln -s g/hooks k", &w, &chain));
        assert_eq!(
            paths::resolve_in(&w, "k/pre-push", &chain).0,
            w.join(".git/hooks/pre-push")
        );
        // Other paths are as before.
        assert_eq!(
            paths::resolve_in(&w, "src/lib.rs", &links),
            (w.join("src/lib.rs"), Through::Nothing)
        );
        let unknown = [Link {
            at: w.join("u"),
            to: None,
        }];
        assert_eq!(paths::resolve_in(&w, "u/x", &unknown).1, Through::Unknown);
    }
}
