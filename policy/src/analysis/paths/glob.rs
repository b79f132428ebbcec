//! Pathname expansion of the words of a line against the filesystem (bash(1) "Pathname
//! Expansion"), with the shell options that change what a glob matches.

use super::pattern;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Glob matches listed before a glob counts as "could match anything".
const MAX_GLOB_MATCHES: usize = 512;

/// The shell options that change what a glob matches (bash(1) "Pathname Expansion"), each
/// `true` when it may be on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GlobOpts {
    /// `shopt -s nocaseglob`: letters match in either case.
    pub nocase: bool,
    /// `shopt -s dotglob` (or a non-empty `GLOBIGNORE`): names starting with `.` match
    /// without a literal `.` (never `.` and `..`).
    pub dot: bool,
    /// `shopt -s globstar`: a component `**` matches zero or more directories and what
    /// they hold, at any depth.
    pub star: bool,
}

/// Expands a glob pattern (`*`, `?`, `[…]` with POSIX classes, extended patterns; see
/// [`pattern`]) against the filesystem from `cwd`. Returns `None` when it matches more than
/// can be listed, holds a construct the matcher does not model, or may match a name that is
/// no UTF-8 text (no word can name it: it may then match anything); an empty list when
/// nothing matches (bash then passes the word literally). A
/// name whose match depends on the locale counts as matched. With `dotglob` (`shopt -s
/// dotglob`, bash(1) "Pathname Expansion") a pattern matches names starting with `.` too
/// (never `.` and `..`); `opts` says which options may be on.
/// Under `nocaseglob` (`opts.nocase`) a name matches when it or its lower case does (never
/// fewer matches than bash; more for a few bracket expressions such as `[^a-z]`).
/// Under `globstar` (`opts.star`) a component `**` matches the place it starts in and every
/// file and directory below it (bash(1): "all files and zero or more directories and
/// subdirectories"); symbolic links are matched and not descended into, as bash does since
/// 4.3, so `**/*.txt` reaches the files of a linked directory, one level down (bash 5.2
/// does so for `dir/**/*.txt` and not for a leading `**`: never fewer matches than bash).
pub(crate) fn glob(cwd: &Path, pattern: &str, opts: GlobOpts) -> Option<Vec<String>> {
    let absolute = pattern.starts_with('/');
    let comps: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let mut current: Vec<(PathBuf, String)> = vec![(
        if absolute {
            PathBuf::from("/")
        } else {
            cwd.to_path_buf()
        },
        if absolute {
            "/".to_string()
        } else {
            String::new()
        },
    )];
    for (i, comp) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        let mut next = Vec::new();
        if opts.star && *comp == "**" {
            for (dir, shown) in &current {
                // Zero directories: the place itself (as a match of its own only when named).
                if !last || !shown.is_empty() {
                    next.push((dir.clone(), shown.clone()));
                }
                globstar(dir, shown, opts.dot, &mut next)?;
            }
            current = next;
            continue;
        }
        let compiled = if pattern::is_pattern(comp) {
            Some(pattern::Pattern::parse(comp).ok()?)
        } else {
            None
        };
        // Under nocaseglob, the pattern and the names compared in lower case too.
        let folded = match &compiled {
            Some(_) if opts.nocase => Some(pattern::Pattern::parse(&comp.to_lowercase()).ok()?),
            _ => None,
        };
        for (dir, shown) in &current {
            let join = |name: &str| {
                if shown.is_empty() || shown.ends_with('/') {
                    format!("{shown}{name}")
                } else {
                    format!("{shown}/{name}")
                }
            };
            let Some(pat) = &compiled else {
                let p = dir.join(comp);
                if last || p.is_dir() || *comp == ".." || *comp == "." {
                    next.push((p, join(comp)));
                }
                continue;
            };
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in rd.flatten() {
                let raw = e.file_name();
                if raw.as_bytes().starts_with(b".") && !opts.dot && !pat.may_match_dot_names() {
                    continue;
                }
                let Some(name) = raw.to_str() else {
                    // A name that is no UTF-8 text: bash matches it byte by byte, and what
                    // it names cannot be written as a word. When the pattern may match it,
                    // the glob may match anything (docs/policy.md "Names that are not UTF-8").
                    if pat.may_match_bytes(raw.as_bytes(), opts.nocase) {
                        return None;
                    }
                    continue;
                };
                let folded_match = folded
                    .as_ref()
                    .is_some_and(|f| f.matches(&name.to_lowercase()) != Some(false));
                if pat.matches(name) != Some(false) || folded_match {
                    next.push((dir.join(name), join(name)));
                    if next.len() > MAX_GLOB_MATCHES {
                        return None;
                    }
                }
            }
        }
        current = next;
    }
    let mut v: Vec<String> = current.into_iter().map(|(_, s)| s).collect();
    v.sort();
    Some(v)
}

/// Everything below `dir` (shown as `shown`) that a globstar `**` matches: each entry (names
/// starting with `.` only when `dot`), and what the directories that are no symbolic links
/// hold. `None` beyond [`MAX_GLOB_MATCHES`] in all.
fn globstar(dir: &Path, shown: &str, dot: bool, out: &mut Vec<(PathBuf, String)>) -> Option<()> {
    let mut todo = vec![(dir.to_path_buf(), shown.to_string())];
    while let Some((dir, shown)) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let raw = e.file_name();
            if raw.as_bytes().starts_with(b".") && !dot {
                continue;
            }
            // A name that is no UTF-8 text cannot be listed as a word: anything may match.
            let name = raw.to_str()?;
            let here = if shown.is_empty() || shown.ends_with('/') {
                format!("{shown}{name}")
            } else {
                format!("{shown}/{name}")
            };
            let path = dir.join(name);
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push((path.clone(), here.clone()));
            }
            out.push((path, here));
            if out.len() > MAX_GLOB_MATCHES {
                return None;
            }
        }
    }
    Some(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;

    /// What bash expands `pat` to in `dir` with `-O extglob -O nullglob` and `options`, one
    /// match a line, sorted: the baseline the matcher's tests compare with.
    pub(in crate::analysis::paths) fn bash_glob(
        dir: &Path,
        options: &[&str],
        pat: &str,
    ) -> Vec<String> {
        let out = std::process::Command::new("bash")
            .current_dir(dir)
            .args(["-O", "extglob", "-O", "nullglob"])
            .args(options)
            .arg("-c")
            .arg(format!("for f in {pat}; do printf '%s\\n' \"$f\"; done"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{pat} {options:?}");
        let mut lines: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }

    /// A glob that may match a name that is no UTF-8 text (`cfg\xff`, a link to a
    /// credential) is one that may match anything (`None`), never the name decoded into
    /// another that does not exist; one whose literal head or tail rules such names out
    /// lists the rest. Checked against what bash matches: wherever bash's matches hold such a
    /// name, the answer is `None`.
    #[test]
    fn names_that_are_no_utf8_make_a_glob_unknown() {
        use std::ffi::OsStr;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join(".env"), "TOKEN=x").unwrap();
        std::fs::write(d.join("notes.txt"), "").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::os::unix::fs::symlink(".env", d.join(OsStr::from_bytes(b"cfg\xff"))).unwrap();
        std::fs::write(d.join(OsStr::from_bytes(b"\xc3\xa9\xff")), "").unwrap();
        std::fs::create_dir(d.join(OsStr::from_bytes(b"sub/x\xfe"))).unwrap();
        std::fs::write(d.join(OsStr::from_bytes(b"sub/x\xfe/f.txt")), "").unwrap();
        let star = GlobOpts {
            star: true,
            ..Default::default()
        };
        let nocase = GlobOpts {
            nocase: true,
            ..Default::default()
        };
        for (pat, opts, bash_opts) in [
            ("cfg*", GlobOpts::default(), &[][..]),
            ("cfg?", GlobOpts::default(), &[]),
            ("c*", GlobOpts::default(), &[]),
            ("CFG*", nocase, &["-O", "nocaseglob"][..]),
            ("*", GlobOpts::default(), &[]),
            ("???", GlobOpts::default(), &[]),
            ("é*", GlobOpts::default(), &[]),
            ("*[!a]", GlobOpts::default(), &[]),
            ("*.txt", GlobOpts::default(), &[]),
            ("n*", GlobOpts::default(), &[]),
            ("sub/*/*.txt", GlobOpts::default(), &[]),
            ("sub/*", GlobOpts::default(), &[]),
            ("**/*.txt", star, &["-O", "globstar"]),
        ] {
            let out = std::process::Command::new("bash")
                .current_dir(d)
                .args(["-O", "extglob", "-O", "nullglob"])
                .args(bash_opts)
                .arg("-c")
                .arg(format!("for f in {pat}; do printf '%s\\n' \"$f\"; done"))
                .output()
                .unwrap();
            let bash_has_bytes = out
                .stdout
                .split(|b| *b == b'\n')
                .any(|l| std::str::from_utf8(l).is_err());
            let got = glob(d, pat, opts);
            if bash_has_bytes {
                assert_eq!(
                    got, None,
                    "{pat}: bash matches a name that is no UTF-8 text"
                );
            } else {
                let want: Vec<String> = String::from_utf8(out.stdout)
                    .unwrap()
                    .lines()
                    .map(str::to_string)
                    .collect();
                let got = got.unwrap_or_else(|| panic!("{pat}: listed by bash as {want:?}"));
                for w in &want {
                    assert!(got.contains(w), "{pat}: {w} missing from {got:?}");
                }
            }
        }
        // Ruled out by its literal head or tail, a name that is no text is passed over.
        assert_eq!(
            glob(d, "*.txt", GlobOpts::default()),
            Some(vec!["notes.txt".to_string()])
        );
        assert_eq!(
            glob(d, "n*", GlobOpts::default()),
            Some(vec!["notes.txt".to_string()])
        );
        assert_eq!(glob(d, "cfg*", GlobOpts::default()), None);
    }

    /// `**` under globstar matches what bash matches (a trailing `/` of bash's own aside), and
    /// more only inside a linked directory, one level down (bash 5.2 reaches those for
    /// `a/**/*.txt` and not for `**/*.txt`) or paths that are not there. Nothing below a
    /// hidden directory without dotglob.
    #[test]
    fn globstar_matches_what_bash_matches() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("secret.txt"), "").unwrap();
        for d in ["a/b/c", ".hidden/x", "d"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in [
            "top.txt",
            "a/one.txt",
            "a/b/two.md",
            "a/b/c/three.txt",
            ".hidden/x/h.txt",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        std::os::unix::fs::symlink(out.path(), dir.path().join("a/b/lnk")).unwrap();
        for pat in [
            "**",
            "**/*.txt",
            "a/**",
            "a/**/*.txt",
            "**/b",
            "a/**/c/*",
            "**/lnk/*",
        ] {
            for dot in [false, true] {
                let mut args = vec!["-O", "globstar"];
                if dot {
                    args.extend(["-O", "dotglob"]);
                }
                let mut want: Vec<String> = bash_glob(dir.path(), &args, pat)
                    .iter()
                    .map(|l| l.trim_end_matches('/').to_string())
                    .collect();
                want.sort();
                want.dedup();
                let opts = GlobOpts {
                    nocase: false,
                    dot,
                    star: true,
                };
                let mut got = glob(dir.path(), pat, opts).unwrap();
                got.dedup();
                for w in &want {
                    assert!(
                        got.contains(w),
                        "{pat} (dotglob {dot}): {w} missing from {got:?}"
                    );
                }
                // More: through the link, or a last literal component that is not there
                // (`**/b` lists `a/b/b`: a path checked that names nothing).
                for g in got.iter().filter(|g| !want.contains(g)) {
                    assert!(
                        g.contains("lnk/") || !dir.path().join(g).exists(),
                        "{pat} (dotglob {dot}): {g} is more than bash"
                    );
                }
            }
        }
    }
}
