//! Recursive changes that reach the pre-push hook. DESIGN.md §2 blocks "any change — write,
//! removal, rename, link, mode — to the file git would run as the pre-push hook": a recursive
//! change (`rm -r`, `chmod -R`, `chown -R`, `chgrp -R`, `setfacl -R`, `rsync --delete`, `find
//! -delete`, `find -exec`/`fd -x` of a command that changes what it is given) whose tree holds
//! that file is such a change, though the hook is named nowhere on the line
//! (`git.guard.hook`).
//!
//! The hook counts when it exists: a tree without one keeps the verdict of its other rules.
//! `find` and `fd` are judged by what they would select: the start point and each directory
//! on the way down to the hook, and the hook itself, are tried against the tests the analyser
//! reads (`find -name/-iname/-path/-type/-maxdepth/-mindepth`, negated with `!`/`-not`;
//! `fd`'s pattern, `-g`, `-F`, `-p`, `-e`, `-t`, `-E`, depths and hidden files); an expression
//! with other operators (`-o`, `,`, parentheses) may select anything. Each node a command is
//! run on is put in place of `{}` and the command analysed again, so its own rules say
//! whether it changes its operand (`rm {}` and `sed -i … {}` do, `cat {}` does not).

use super::*;
use crate::analysis::paths::{self, pattern::Pattern};
use crate::rules;

/// One path on the way from a recursion's start point down to the hook, inclusive.
#[derive(Debug, Clone)]
pub(crate) struct HookNode {
    /// The path as the recursion would spell it (`./.git/hooks`).
    pub word: String,
    /// Its last component as written (`.` for the start point `.`).
    pub name: String,
    /// Levels below the start point (0 for the start point).
    pub depth: usize,
    /// `f` file, `d` directory, `l` symbolic link, `o` anything else or unknown (find's
    /// `-type` letters).
    pub kind: char,
    /// Whether it is the hook itself.
    pub is_hook: bool,
}

fn kind_of(p: &Path) -> char {
    match paths::seen::node(p) {
        paths::seen::Node::Link(_) => 'l',
        paths::seen::Node::Dir => 'd',
        paths::seen::Node::File => 'f',
        paths::seen::Node::Other | paths::seen::Node::Missing => 'o',
    }
}

impl Analyzer<'_> {
    /// The nodes from each place `start` can name (every directory the line may be in; a
    /// glob's matches) down to the existing pre-push hook; empty when no tree holds it or
    /// `start` cannot be known.
    pub(crate) fn hook_nodes(&self, st: &State, start: &Field) -> Vec<HookNode> {
        let pc = self.path_ctx();
        // Whether the hook exists is looked at once a tree holds its path (most hold none).
        let place = pc.session.hook();
        let hook = &place.path;
        let mut exists = None;
        let Some(text) = start.known_text() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let glob = start.has_glob();
        for cwd in st.cwds.iter().flatten() {
            // The glob's matches, or the word itself.
            let one = [&*text];
            let matches: Vec<String>;
            let many: Vec<&str>;
            let words: &[&str] = if glob {
                matches = paths::glob(cwd, &text, st.glob_opts()).unwrap_or_default();
                many = matches.iter().map(String::as_str).collect();
                &many
            } else {
                &one
            };
            for &w in words {
                let phys = paths::resolve(cwd, w);
                let Some(rel) = place.below(&phys) else {
                    continue;
                };
                if !*exists.get_or_insert_with(|| paths::hook_exists(hook)) {
                    return Vec::new();
                }
                let base = w.trim_end_matches('/');
                let name = base.rsplit('/').next().unwrap_or(base);
                out.push(HookNode {
                    word: w.to_string(),
                    name: if name.is_empty() { "/" } else { name }.to_string(),
                    depth: 0,
                    kind: kind_of(&phys),
                    is_hook: rel.as_os_str().is_empty(),
                });
                let mut word = if base.is_empty() {
                    String::new()
                } else {
                    base.to_string()
                };
                let mut here = phys.clone();
                let comps: Vec<_> = rel.components().collect();
                for (i, c) in comps.iter().enumerate() {
                    let n = c.as_os_str().to_string_lossy().into_owned();
                    word = format!("{word}/{n}");
                    here.push(&n);
                    out.push(HookNode {
                        word: word.clone(),
                        name: n,
                        depth: i + 1,
                        kind: kind_of(&here),
                        is_hook: i + 1 == comps.len(),
                    });
                }
            }
        }
        out
    }

    /// `p` changes `f` and everything below it: blocked when that tree holds the hook.
    pub(crate) fn guard_tree(&mut self, st: &State, f: &Field, p: &str) {
        if self.hook_nodes(st, f).is_empty() {
            return;
        }
        self.add(
            Verdict::Blocked,
            rules::GIT_GUARD_HOOK.id,
            format!(
                "`{p}` recursively changes `{}`, which holds the pre-push hook that keeps pushes off protected branches",
                f.display()
            ),
        );
    }

    /// A selection (`find`, `fd`) that would delete the hook.
    pub(crate) fn guard_selected_deletion(&mut self, p: &str, nodes: &[HookNode]) {
        if let Some(n) = nodes.iter().find(|n| n.is_hook) {
            self.add(
                Verdict::Blocked,
                rules::GIT_GUARD_HOOK.id,
                format!(
                    "`{p}` would select and delete `{}`, the pre-push hook that keeps pushes off protected branches",
                    n.word
                ),
            );
        }
    }

    /// Analyses `inner` (a command `find -exec`/`fd -x`/`xargs` runs) once per selected node,
    /// each put in place of `by`'s placeholders (fd and xargs append it when there is none).
    pub(crate) fn run_on_nodes(
        &mut self,
        st: &State,
        inner: &[Field],
        nodes: &[HookNode],
        env: &[(String, Option<String>)],
        depth: usize,
        by: Runner<'_>,
    ) {
        let fill = |word: &str, n: &HookNode| match by {
            Runner::Find => fill_find(word, n),
            Runner::Fd => fill_fd(word, n),
            Runner::Xargs(marker) => {
                marker.and_then(|m| word.contains(m).then(|| word.replace(m, &n.word)))
            }
        };
        let append_if_none = match by {
            Runner::Find => false,
            Runner::Fd => true,
            // `-I`: only where the marker is.
            Runner::Xargs(marker) => marker.is_none(),
        };
        for n in nodes {
            let mut used = false;
            let mut words: Vec<Field> = inner
                .iter()
                .map(|a| match a.known().and_then(|t| fill(&t, n)) {
                    Some(t) => {
                        used = true;
                        Field::lit(&t)
                    }
                    None => a.clone(),
                })
                .collect();
            if !used && append_if_none {
                words.push(Field::lit(&n.word));
            }
            if !words.is_empty() && (used || append_if_none) {
                let _ = self.invoke(st.clone(), &words, env.to_vec(), Stdin::Inherited, depth);
            }
        }
    }
}

/// Which program runs a command on its selection, for its placeholders.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Runner<'a> {
    /// `find -exec/-execdir/-ok/-okdir`: `{}`.
    Find,
    /// `fd -x/-X`: `{}`, `{/}`, `{//}`, `{.}`, `{/.}`, the path appended when none is given.
    Fd,
    /// `xargs` reading a selection: the path appended, or put in place of the `-I` marker.
    Xargs(Option<&'a str>),
}

/// find's `{}` replaced by the node (`None` when the word holds none).
pub(crate) fn fill_find(word: &str, n: &HookNode) -> Option<String> {
    word.contains("{}").then(|| word.replace("{}", &n.word))
}

/// fd's placeholders (`{}`, `{/}`, `{//}`, `{.}`, `{/.}`; fd(1)) replaced by the node.
pub(crate) fn fill_fd(word: &str, n: &HookNode) -> Option<String> {
    if !word.contains('{') {
        return None;
    }
    let path = n.word.as_str();
    let base = path.rsplit('/').next().unwrap_or(path);
    let parent = path.rsplit_once('/').map_or(".", |(d, _)| d);
    let strip = |s: &str| match s.rfind('.') {
        Some(i) if i > 0 => s[..i].to_string(),
        _ => s.to_string(),
    };
    let out = word
        .replace("{//}", parent)
        .replace("{/.}", &strip(base))
        .replace("{/}", base)
        .replace("{.}", &strip(path))
        .replace("{}", path);
    (out != word).then_some(out)
}

/// find's tests the analyser reads, in an expression of conjunctions (`-a`, `-and` or
/// nothing between them) and negations of one test.
#[derive(Debug, Default)]
pub(crate) struct FindTests {
    /// `(negated, test, value)`.
    pub tests: Vec<(bool, String, String)>,
    /// An operator the analyser does not model (`-o`, `,`, parentheses): anything may match.
    pub any: bool,
}

impl FindTests {
    /// Whether `n` may be selected.
    pub(crate) fn may_select(&self, n: &HookNode) -> bool {
        if self.any {
            return true;
        }
        self.tests.iter().all(|(neg, t, v)| {
            let r = match t.as_str() {
                "-name" => glob_may_match(v, &n.name, false),
                "-iname" => glob_may_match(v, &n.name, true),
                "-path" | "-wholename" => glob_may_match(v, &n.word, false),
                "-ipath" | "-iwholename" => glob_may_match(v, &n.word, true),
                "-type" | "-xtype" => Some(
                    v.split(',')
                        .any(|k| k == n.kind.to_string() || n.kind == 'o'),
                ),
                "-maxdepth" => v.parse::<usize>().ok().map(|d| n.depth <= d),
                "-mindepth" => v.parse::<usize>().ok().map(|d| n.depth >= d),
                _ => None,
            };
            // Unknown answers may go either way.
            match r {
                Some(m) => m != *neg,
                None => true,
            }
        })
    }
}

/// fnmatch(3) without flags, as find's `-name`/`-path` use it (`*` also matches `/` and a
/// leading `.`); `None` when the pattern is beyond the matcher.
fn glob_may_match(pattern: &str, text: &str, icase: bool) -> Option<bool> {
    let (p, t) = if icase {
        (pattern.to_lowercase(), text.to_lowercase())
    } else {
        (pattern.to_string(), text.to_string())
    };
    Pattern::parse(&p).ok()?.matches(&t)
}

/// fd's selection of a node below its search path (fd(1)): hidden names (a component
/// starting with `.` below the search path) only with `-H`/`-u`; the pattern (a regular
/// expression, smart case; `-g` a glob; `-F` a fixed string; `-p` against the whole path)
/// against the name; `-e`, `-t`, `-E`, `-d`, `--min-depth`.
#[derive(Debug, Default)]
pub(crate) struct FdTests {
    pub hidden: bool,
    pub pattern: Option<String>,
    pub glob: bool,
    pub fixed: bool,
    pub full_path: bool,
    pub case: Option<bool>,
    pub extensions: Vec<String>,
    pub types: Vec<String>,
    pub excludes: Vec<String>,
    pub max_depth: Option<usize>,
    pub min_depth: Option<usize>,
}

impl FdTests {
    /// The nodes strictly below the search path fd may select.
    pub(crate) fn select(&self, nodes: &[HookNode]) -> Vec<HookNode> {
        let mut out = Vec::new();
        let mut hidden_on_the_way = false;
        let mut excluded = false;
        for n in nodes {
            if n.depth == 0 {
                hidden_on_the_way = false;
                excluded = false;
                continue;
            }
            hidden_on_the_way |= n.name.starts_with('.');
            excluded |= self
                .excludes
                .iter()
                .any(|e| glob_may_match(e.trim_end_matches('/'), &n.name, false) == Some(true));
            if (hidden_on_the_way && !self.hidden) || excluded {
                continue;
            }
            if self.may_select(n) {
                out.push(n.clone());
            }
        }
        out
    }

    fn may_select(&self, n: &HookNode) -> bool {
        if self.max_depth.is_some_and(|d| n.depth > d)
            || self.min_depth.is_some_and(|d| n.depth < d)
        {
            return false;
        }
        if !self.extensions.is_empty()
            && !self
                .extensions
                .iter()
                .any(|e| n.name.ends_with(&format!(".{}", e.trim_start_matches('.'))))
        {
            return false;
        }
        if !self.types.is_empty()
            && !self.types.iter().any(|t| match t.as_str() {
                "f" | "file" => n.kind == 'f' || n.kind == 'o',
                "d" | "dir" | "directory" => n.kind == 'd',
                "l" | "symlink" => n.kind == 'l',
                "x" | "executable" => n.kind != 'd',
                _ => true,
            })
        {
            return false;
        }
        let Some(pat) = self.pattern.as_deref().filter(|p| !p.is_empty()) else {
            return true;
        };
        let subject = if self.full_path {
            n.word.as_str()
        } else {
            n.name.as_str()
        };
        let icase = self.case.map_or_else(
            || !pat.chars().any(char::is_uppercase),
            |sensitive| !sensitive,
        );
        if self.glob {
            return glob_may_match(pat, subject, icase) != Some(false);
        }
        if self.fixed {
            return if icase {
                subject.to_lowercase().contains(&pat.to_lowercase())
            } else {
                subject.contains(pat)
            };
        }
        regex::RegexBuilder::new(pat)
            .case_insensitive(icase)
            .size_limit(1 << 20)
            .build()
            .map_or(true, |re| re.is_match(subject))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::expect_git as expect_in;
    use super::{fill_fd, HookNode};
    use crate::Verdict::{Blocked, Green, Red, Yellow};

    const G: &str = "git.guard.hook";

    #[test]
    fn recursive_changes_of_a_tree_holding_the_hook_are_blocked() {
        expect_in(
            true,
            &[
                ("chmod -R a-x .", Blocked, G),
                ("chown -R nobody .", Blocked, G),
                ("chgrp --recursive staff ./", Blocked, G),
                ("setfacl -R -m u:nobody:r .", Blocked, G),
                ("rm -r .", Blocked, G),
                ("rm -rf .git/..", Blocked, G),
                ("cd src && rm -rf ..", Blocked, G),
                ("rsync -a --delete src/ .", Blocked, G),
                ("find . -delete", Blocked, G),
                ("find . -name pre-push -delete", Blocked, G),
                ("find . -iname 'PRE-*' -delete", Blocked, G),
                ("find . -type f -delete", Blocked, G),
                ("find . -name pre-push -exec rm {} \\;", Blocked, G),
                ("find . -type f -exec sed -i s/a/b/ {} +", Blocked, G),
                ("find . -type f -execdir chmod 644 {} +", Blocked, G),
                ("find . -name .git -exec rm -rf {} +", Blocked, G),
                (
                    "find . -path '*/hooks/*' -exec truncate -s0 {} +",
                    Blocked,
                    G,
                ),
                ("fd -H pre-push -x rm", Blocked, G),
                ("fd --hidden -t f -x chmod -x", Blocked, G),
                ("fd -u -g 'pre-*' -X rm", Blocked, G),
                ("fd -H -x mv {} {}.off", Blocked, G),
                ("fd pre-push .git -x rm", Blocked, G),
                ("shopt -s dotglob; rm -rf *", Blocked, G),
                ("shopt -s dotglob; chmod -R a-x ./*", Blocked, G),
                ("GLOBIGNORE=x; rm -rf *", Blocked, G),
                ("export GLOBIGNORE=.env; chmod -R a-x *", Blocked, G),
            ],
        );
    }

    #[test]
    fn selections_that_miss_the_hook_keep_their_colour() {
        expect_in(
            true,
            &[
                ("rm -rf build", Red, "rm.recursive-force"),
                ("chmod -R a-x src", Yellow, "cmd.metadata"),
                ("find . -name '*.o' -delete", Red, "rm.find-delete"),
                ("find . -maxdepth 2 -delete", Red, "rm.find-delete"),
                ("find . -type d -empty -delete", Red, "rm.find-delete"),
                ("find . ! -path './.git/*' -type f -delete", Red, ""),
                ("find . -name pre-push -exec cat {} +", Yellow, ""),
                ("find . -name pre-push -exec cp {} build/ \\;", Yellow, ""),
                ("find . -name '*.rs' -exec rm {} +", Red, ""),
                ("fd pre-push -x rm", Red, ""),
                ("fd -H -e o -x rm", Red, ""),
                ("fd -H -E .git -x rm", Red, ""),
                ("fd -H -t f -d 2 -x rm", Red, ""),
                ("rm -rf *", Red, "rm.recursive-force"),
                ("GLOBIGNORE=; rm -rf *", Red, "rm.recursive-force"),
                ("find . -name pre-push", Green, ""),
            ],
        );
    }

    #[test]
    fn without_the_hook_the_tree_rule_is_silent() {
        expect_in(
            false,
            &[
                ("chmod -R a-x .", Yellow, "cmd.metadata"),
                ("chown -R nobody .", Yellow, ""),
                ("rm -r .", Yellow, "rm.delete"),
                ("find . -delete", Red, "rm.find-delete"),
                ("find . -name pre-push -exec rm {} \\;", Red, ""),
                ("fd -H pre-push -x rm", Red, ""),
                ("rsync -a --delete src/ .", Red, ""),
            ],
        );
    }

    #[test]
    fn fd_placeholders() {
        let n = HookNode {
            word: "./.git/hooks/pre-push".into(),
            name: "pre-push".into(),
            depth: 3,
            kind: 'f',
            is_hook: true,
        };
        assert_eq!(fill_fd("{}", &n).as_deref(), Some("./.git/hooks/pre-push"));
        assert_eq!(fill_fd("{/}", &n).as_deref(), Some("pre-push"));
        assert_eq!(fill_fd("{//}", &n).as_deref(), Some("./.git/hooks"));
        assert_eq!(fill_fd("x", &n), None);
    }
}
