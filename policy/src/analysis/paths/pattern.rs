//! Shell pattern matching of one path component, as bash matches it: `*`, `?`, bracket
//! expressions with ranges, POSIX character classes `[:alpha:]`, equivalence classes `[=e=]`
//! and collating symbols `[.e.]`, and the extended patterns `@( )`, `+( )`, `!( )`, `?( )`,
//! `*( )` (bash(1) "Pattern Matching"; glob(7); POSIX.1-2017 XCU 2.13 and XBD 9.3.5).
//!
//! Where the answer depends on what the matcher does not model (the locale's classes and
//! collation for non-ASCII characters, collating-element names, a pattern whose matching
//! would take too long), the answer is [`None`]: "may match", which callers treat as a match
//! or as a glob that could match anything, never as "no match".

/// Steps of the backtracking matcher before the answer becomes "may match".
const MAX_STEPS: usize = 200_000;

/// Whether a word's text holds a pattern construct bash expands: `*`, `?`, `[`, or an
/// extended pattern opener `@(`, `+(`, `!(` (`?(` and `*(` contain `?` and `*`).
pub(crate) fn is_pattern(text: &str) -> bool {
    // The first such construct ends the literal prefix.
    literal_prefix(text).len() < text.len()
}

/// The literal text before the first pattern construct of `text` (all of it when there is
/// none): the part of a glob that names fixed directories.
pub(crate) fn literal_prefix(text: &str) -> &str {
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'*' | b'?' | b'[' => return &text[..i],
            b'@' | b'+' | b'!' if bytes.get(i + 1) == Some(&b'(') => return &text[..i],
            _ => {}
        }
    }
    text
}

/// One element of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Lit(char),
    /// `?`: any one character.
    Any,
    /// `*`: any string.
    Star,
    Bracket {
        negate: bool,
        items: Vec<Item>,
    },
    Ext {
        kind: Ext,
        alternatives: Vec<Vec<Node>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ext {
    /// `@(a|b)`: exactly one of the alternatives.
    One,
    /// `?(a|b)`: zero or one.
    ZeroOrOne,
    /// `*(a|b)`: zero or more.
    ZeroOrMore,
    /// `+(a|b)`: one or more.
    OneOrMore,
    /// `!(a|b)`: anything except one of the alternatives.
    Not,
}

/// A member of a bracket expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Char(char),
    Range(char, char),
    Class(Class),
    /// `[=c=]`: in the C locale `c` itself; other locales add characters that collate alike
    /// (accented letters), which only non-ASCII names can be.
    Equivalent(char),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Alnum,
    Alpha,
    Blank,
    Cntrl,
    Digit,
    Graph,
    Lower,
    Print,
    Punct,
    Space,
    Upper,
    Xdigit,
    /// bash's own `[:word:]`: alphanumerics and `_`.
    Word,
}

impl Class {
    fn named(name: &str) -> Option<Class> {
        Some(match name {
            "alnum" => Class::Alnum,
            "alpha" => Class::Alpha,
            "blank" => Class::Blank,
            "cntrl" => Class::Cntrl,
            "digit" => Class::Digit,
            "graph" => Class::Graph,
            "lower" => Class::Lower,
            "print" => Class::Print,
            "punct" => Class::Punct,
            "space" => Class::Space,
            "upper" => Class::Upper,
            "xdigit" => Class::Xdigit,
            "word" => Class::Word,
            _ => return None,
        })
    }

    /// Membership of an ASCII character (the C locale's classes, which every locale keeps for
    /// ASCII).
    fn has(self, c: char) -> bool {
        match self {
            Class::Alnum => c.is_ascii_alphanumeric(),
            Class::Alpha => c.is_ascii_alphabetic(),
            Class::Blank => c == ' ' || c == '\t',
            Class::Cntrl => c.is_ascii_control(),
            Class::Digit => c.is_ascii_digit(),
            Class::Graph => c.is_ascii_graphic(),
            Class::Lower => c.is_ascii_lowercase(),
            Class::Print => c.is_ascii_graphic() || c == ' ',
            Class::Punct => c.is_ascii_punctuation(),
            Class::Space => c.is_ascii_whitespace() || c == '\x0b',
            Class::Upper => c.is_ascii_uppercase(),
            Class::Xdigit => c.is_ascii_hexdigit(),
            Class::Word => c.is_ascii_alphanumeric() || c == '_',
        }
    }
}

/// A pattern the matcher cannot model (an unknown class name, a multi-character collating
/// element): it may match any name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unmodelled;

/// A parsed pattern for one path component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    nodes: Vec<Node>,
}

impl Pattern {
    /// Parses `text` (quote removal already done) as a bash pattern with extended patterns
    /// on. An unclosed `[` or extended pattern is literal text, as in bash.
    pub(crate) fn parse(text: &str) -> Result<Pattern, Unmodelled> {
        let chars: Vec<char> = text.chars().collect();
        let (nodes, _) = parse_seq(&chars, 0, false)?;
        Ok(Pattern { nodes })
    }

    /// Whether a name starting with `.` can match without `dotglob`: bash requires the
    /// leading dot to be matched by a literal `.` of the pattern; an extended pattern at the
    /// start may supply it (`@(.env)`, `*(.)env` match `.env`), so that is taken as "can".
    pub(crate) fn may_match_dot_names(&self) -> bool {
        may_start_with_dot(&self.nodes)
    }

    /// Whether the pattern may match a file name that is no UTF-8 text (`name`, its bytes).
    /// bash then matches byte by byte (`?` is one byte, `???` matches `é\xff`), which the
    /// matcher does not model; only the pattern's literal head and tail are certain: the name
    /// must start and end with their bytes (letters in either case under `nocase`). `true`
    /// whenever that does not rule the name out.
    pub(crate) fn may_match_bytes(&self, name: &[u8], nocase: bool) -> bool {
        let lit = |n: &Node| match n {
            Node::Lit(c) => Some(*c),
            _ => None,
        };
        let head: String = self.nodes.iter().map_while(lit).collect();
        let whole = head.chars().count() == self.nodes.len();
        let tail: String = if whole {
            String::new()
        } else {
            let mut t: Vec<char> = self.nodes.iter().rev().map_while(lit).collect();
            t.reverse();
            t.into_iter().collect()
        };
        if whole {
            // No pattern node: the name is the text (the `nocase` spelling aside).
            return if nocase && !head.is_ascii() {
                true
            } else if nocase {
                name.eq_ignore_ascii_case(head.as_bytes())
            } else {
                name == head.as_bytes()
            };
        }
        // Under `nocase` a non-ASCII letter may match another byte spelling: not ruled out.
        if nocase && !(head.is_ascii() && tail.is_ascii()) {
            return true;
        }
        // Head and tail lie on either side of a pattern node: both must fit.
        if head.len() + tail.len() > name.len() {
            return false;
        }
        let same = |a: &[u8], b: &[u8]| {
            if nocase {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        let (h, t) = (head.as_bytes(), tail.as_bytes());
        same(&name[..h.len()], h) && same(&name[name.len() - t.len()..], t)
    }

    /// Matches one file name: `Some(true)`/`Some(false)` when certain, `None` when the answer
    /// depends on the locale or the matcher gave up.
    pub(crate) fn matches(&self, name: &str) -> Option<bool> {
        let s: Vec<char> = name.chars().collect();
        let mut steps = 0usize;
        match_seq(&self.nodes, &s, &mut steps)
    }
}

/// Whether the first character a sequence matches can be a literal `.`: a `.` first, or an
/// extended pattern (not `!( )`, which bash never lets match a leading dot) whose
/// alternatives can start with one, or that can match nothing before such a sequence.
fn may_start_with_dot(nodes: &[Node]) -> bool {
    match nodes.split_first() {
        Some((Node::Lit('.'), _)) => true,
        Some((Node::Ext { kind, alternatives }, rest)) => {
            *kind != Ext::Not
                && (alternatives.iter().any(|a| may_start_with_dot(a))
                    || (matches!(kind, Ext::ZeroOrOne | Ext::ZeroOrMore)
                        && may_start_with_dot(rest)))
        }
        _ => false,
    }
}

/// Parses nodes from `i` until the end, or inside an extended pattern until `|` or `)`.
/// Returns the nodes and the index after them.
fn parse_seq(p: &[char], mut i: usize, nested: bool) -> Result<(Vec<Node>, usize), Unmodelled> {
    let mut nodes = Vec::new();
    while i < p.len() {
        let c = p[i];
        if nested && (c == '|' || c == ')') {
            return Ok((nodes, i));
        }
        if matches!(c, '@' | '+' | '!' | '?' | '*') && p.get(i + 1) == Some(&'(') {
            if let Some((node, next)) = parse_ext(p, i)? {
                nodes.push(node);
                i = next;
                continue;
            }
        }
        match c {
            '*' => {
                if nodes.last() != Some(&Node::Star) {
                    nodes.push(Node::Star);
                }
                i += 1;
            }
            '?' => {
                nodes.push(Node::Any);
                i += 1;
            }
            '[' => match parse_bracket(p, i)? {
                Some((node, next)) => {
                    nodes.push(node);
                    i = next;
                }
                None => {
                    nodes.push(Node::Lit('['));
                    i += 1;
                }
            },
            '\\' if i + 1 < p.len() => {
                nodes.push(Node::Lit(p[i + 1]));
                i += 2;
            }
            _ => {
                nodes.push(Node::Lit(c));
                i += 1;
            }
        }
    }
    Ok((nodes, i))
}

/// An extended pattern at `i` (`p[i]` is the kind, `p[i+1]` is `(`); `None` when it is not
/// closed (the characters are then literal).
fn parse_ext(p: &[char], i: usize) -> Result<Option<(Node, usize)>, Unmodelled> {
    let kind = match p[i] {
        '@' => Ext::One,
        '+' => Ext::OneOrMore,
        '!' => Ext::Not,
        '?' => Ext::ZeroOrOne,
        _ => Ext::ZeroOrMore,
    };
    let mut alternatives = Vec::new();
    let mut j = i + 2;
    loop {
        let (alt, next) = parse_seq(p, j, true)?;
        alternatives.push(alt);
        match p.get(next) {
            Some('|') => j = next + 1,
            Some(')') => {
                return Ok(Some((Node::Ext { kind, alternatives }, next + 1)));
            }
            _ => return Ok(None),
        }
    }
}

/// A bracket expression at `i` (`p[i]` is `[`); `None` when it is not closed.
fn parse_bracket(p: &[char], i: usize) -> Result<Option<(Node, usize)>, Unmodelled> {
    let mut j = i + 1;
    let negate = matches!(p.get(j), Some('!') | Some('^'));
    if negate {
        j += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    while j < p.len() {
        let c = p[j];
        if c == ']' && !first {
            return Ok(Some((Node::Bracket { negate, items }, j + 1)));
        }
        first = false;
        // `[:class:]`, `[=c=]`, `[.c.]`
        let low = if c == '[' && matches!(p.get(j + 1), Some(':') | Some('=') | Some('.')) {
            let delim = p[j + 1];
            let start = j + 2;
            let end =
                (start..p.len().saturating_sub(1)).find(|&k| p[k] == delim && p[k + 1] == ']');
            match end {
                Some(end) => {
                    let name: String = p[start..end].iter().collect();
                    j = end + 2;
                    match delim {
                        ':' => {
                            items.push(Item::Class(Class::named(&name).ok_or(Unmodelled)?));
                            continue;
                        }
                        '=' => {
                            let mut cs = name.chars();
                            match (cs.next(), cs.next()) {
                                (Some(e), None) => {
                                    items.push(Item::Equivalent(e));
                                    continue;
                                }
                                _ => return Err(Unmodelled),
                            }
                        }
                        _ => {
                            let mut cs = name.chars();
                            match (cs.next(), cs.next()) {
                                // A collating symbol of one character is that character,
                                // and can start a range.
                                (Some(e), None) => e,
                                _ => return Err(Unmodelled),
                            }
                        }
                    }
                }
                None => {
                    j += 1;
                    '['
                }
            }
        } else if c == '\\' && j + 1 < p.len() {
            j += 2;
            p[j - 1]
        } else {
            j += 1;
            c
        };
        if p.get(j) == Some(&'-') && p.get(j + 1).is_some_and(|&n| n != ']') {
            let (high, next) = if p[j + 1] == '['
                && p.get(j + 2) == Some(&'.')
                && p.get(j + 4) == Some(&'.')
                && p.get(j + 5) == Some(&']')
            {
                (p[j + 3], j + 6)
            } else if p[j + 1] == '[' && matches!(p.get(j + 2), Some(':') | Some('=') | Some('.')) {
                return Err(Unmodelled);
            } else if p[j + 1] == '\\' && j + 2 < p.len() {
                (p[j + 2], j + 3)
            } else {
                (p[j + 1], j + 2)
            };
            items.push(Item::Range(low, high));
            j = next;
        } else {
            items.push(Item::Char(low));
        }
    }
    Ok(None)
}

/// Tri-state "or": true wins, then unknown.
fn any_of(results: impl IntoIterator<Item = Option<bool>>) -> Option<bool> {
    let mut unknown = false;
    for r in results {
        match r {
            Some(true) => return Some(true),
            None => unknown = true,
            Some(false) => {}
        }
    }
    if unknown {
        None
    } else {
        Some(false)
    }
}

/// Tri-state "and" of two answers.
fn both(a: Option<bool>, b: impl FnOnce() -> Option<bool>) -> Option<bool> {
    match a {
        Some(false) => Some(false),
        Some(true) => b(),
        None => match b() {
            Some(false) => Some(false),
            _ => None,
        },
    }
}

fn bracket_has(negate: bool, items: &[Item], c: char) -> Option<bool> {
    let mut found = false;
    for item in items {
        let hit = match *item {
            Item::Char(x) => x == c,
            // bash's default `globasciiranges`: ranges by code point.
            Item::Range(lo, hi) => lo <= c && c <= hi,
            Item::Class(_) | Item::Equivalent(_) if !c.is_ascii() => return None,
            Item::Class(class) => class.has(c),
            Item::Equivalent(e) => e == c,
        };
        if hit {
            found = true;
            break;
        }
    }
    Some(found != negate)
}

fn match_seq(nodes: &[Node], s: &[char], steps: &mut usize) -> Option<bool> {
    *steps += 1;
    if *steps > MAX_STEPS {
        return None;
    }
    let Some((node, rest)) = nodes.split_first() else {
        return Some(s.is_empty());
    };
    match node {
        Node::Lit(c) => match s.split_first() {
            Some((x, tail)) if x == c => match_seq(rest, tail, steps),
            _ => Some(false),
        },
        Node::Any => match s.split_first() {
            Some((_, tail)) => match_seq(rest, tail, steps),
            None => Some(false),
        },
        Node::Star => any_of((0..=s.len()).map(|i| match_seq(rest, &s[i..], steps))),
        Node::Bracket { negate, items } => match s.split_first() {
            Some((x, tail)) => both(bracket_has(*negate, items, *x), || {
                match_seq(rest, tail, steps)
            }),
            None => Some(false),
        },
        Node::Ext { kind, alternatives } => match kind {
            Ext::One => any_of((0..=s.len()).map(|j| {
                both(one_of(alternatives, &s[..j], steps), || {
                    match_seq(rest, &s[j..], steps)
                })
            })),
            Ext::ZeroOrOne => any_of([match_seq(rest, s, steps)].into_iter().chain(
                (0..=s.len()).map(|j| {
                    both(one_of(alternatives, &s[..j], steps), || {
                        match_seq(rest, &s[j..], steps)
                    })
                }),
            )),
            Ext::ZeroOrMore => repeat(alternatives, rest, s, steps),
            Ext::OneOrMore => any_of((0..=s.len()).map(|j| {
                both(one_of(alternatives, &s[..j], steps), || {
                    repeat(alternatives, rest, &s[j..], steps)
                })
            })),
            Ext::Not => any_of((0..=s.len()).map(|j| {
                let excluded = one_of(alternatives, &s[..j], steps).map(|m| !m);
                both(excluded, || match_seq(rest, &s[j..], steps))
            })),
        },
    }
}

/// Whether `s` is matched entirely by one of the alternatives.
fn one_of(alternatives: &[Vec<Node>], s: &[char], steps: &mut usize) -> Option<bool> {
    any_of(alternatives.iter().map(|a| match_seq(a, s, steps)))
}

/// Zero or more non-empty matches of the alternatives, then `rest`.
fn repeat(
    alternatives: &[Vec<Node>],
    rest: &[Node],
    s: &[char],
    steps: &mut usize,
) -> Option<bool> {
    *steps += 1;
    if *steps > MAX_STEPS {
        return None;
    }
    any_of(
        [match_seq(rest, s, steps)]
            .into_iter()
            .chain((1..=s.len()).map(|j| {
                both(one_of(alternatives, &s[..j], steps), || {
                    repeat(alternatives, rest, &s[j..], steps)
                })
            })),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> Option<bool> {
        Pattern::parse(p).unwrap().matches(s)
    }

    /// A name that is no UTF-8 text is ruled out only by the pattern's literal head and
    /// tail, compared as bytes (ASCII letters in either case under `nocase`).
    #[test]
    fn names_that_are_no_utf8_are_ruled_out_by_literal_head_and_tail_only() {
        let b =
            |p: &str, n: &[u8], nocase: bool| Pattern::parse(p).unwrap().may_match_bytes(n, nocase);
        for (p, n) in [
            ("cfg*", &b"cfg\xff"[..]),
            ("cfg?", b"cfg\xff"),
            ("*", b"\xff"),
            ("???", b"\xc3\xa9\xff"),
            ("\u{e9}*", b"\xc3\xa9\xff"),
            ("*[!a]", b"cfg\xff"),
            ("@(x|y)*", b"cfg\xff"),
        ] {
            assert!(b(p, n, false), "{p} may match {n:?}");
        }
        for (p, n) in [
            ("*.txt", &b"cfg\xff"[..]),
            ("n*", b"cfg\xff"),
            ("cfg*x", b"cfg\xff"),
            ("abc*abc", b"abc\xff"),
        ] {
            assert!(!b(p, n, false), "{p} rules out {n:?}");
        }
        assert!(b("CFG*", b"cfg\xff", true));
        assert!(!b("CFG*", b"cfg\xff", false));
        assert!(
            b("\u{c9}*", b"\xc3\xa9\xff", true),
            "non-ASCII under nocase: not ruled out"
        );
    }

    #[test]
    fn wildcards_and_ranges() {
        assert_eq!(m("*.rs", "main.rs"), Some(true));
        assert_eq!(m("*.rs", "main.rc"), Some(false));
        assert_eq!(m("m?in.[rx]s", "main.rs"), Some(true));
        assert_eq!(m("[!a]*", "bcd"), Some(true));
        assert_eq!(m("[!a]*", "abc"), Some(false));
        assert_eq!(m("[^a]*", "abc"), Some(false));
        assert_eq!(m("*", ""), Some(true));
        assert_eq!(m(".[a-z]nv", ".env"), Some(true));
        assert_eq!(m("[]x]", "]"), Some(true));
        assert_eq!(m("[a-]", "-"), Some(true));
        assert_eq!(m("[", "["), Some(true));
        assert_eq!(m("[ab", "[ab"), Some(true));
        assert_eq!(m("\\*", "*"), Some(true));
        assert_eq!(m("\\*", "x"), Some(false));
    }

    #[test]
    fn posix_classes_equivalence_and_collating_symbols() {
        assert_eq!(m(".[[:alpha:]]nv", ".env"), Some(true));
        assert_eq!(m("[[:alpha:]]utdir", "outdir"), Some(true));
        assert_eq!(m("[[:digit:]]utdir", "outdir"), Some(false));
        assert_eq!(m("[![:digit:]]utdir", "outdir"), Some(true));
        assert_eq!(m("[[:upper:][:lower:]]x", "Ex"), Some(true));
        assert_eq!(m(".[[=e=]]nv", ".env"), Some(true));
        assert_eq!(m(".[[=a=]]nv", ".env"), Some(false));
        assert_eq!(m(".[[.e.]]nv", ".env"), Some(true));
        assert_eq!(m(".[[.a.]-[.f.]]nv", ".env"), Some(true));
        assert_eq!(m("[[:punct:]]", "-"), Some(true));
        assert_eq!(m("[[:word:]]", "_"), Some(true));
        // The locale decides for non-ASCII characters.
        assert_eq!(m("[[:alpha:]]", "é"), None);
        assert_eq!(m("[[=e=]]", "é"), None);
        // Names the matcher does not model.
        assert_eq!(Pattern::parse("[[:foo:]]"), Err(Unmodelled));
        assert_eq!(Pattern::parse("[[.hyphen.]]"), Err(Unmodelled));
    }

    #[test]
    fn extended_patterns() {
        assert_eq!(m(".@(env)", ".env"), Some(true));
        assert_eq!(m(".@(env|x)", ".x"), Some(true));
        assert_eq!(m(".@(env|x)", ".y"), Some(false));
        assert_eq!(m(".+(e)nv", ".eeenv"), Some(true));
        assert_eq!(m(".+(e)nv", ".nv"), Some(false));
        assert_eq!(m(".*(e)nv", ".nv"), Some(true));
        assert_eq!(m(".?(e)nv", ".nv"), Some(true));
        assert_eq!(m(".?(e)nv", ".eenv"), Some(false));
        assert_eq!(m("!(x)", "outdir"), Some(true));
        assert_eq!(m("!(x)", "x"), Some(false));
        assert_eq!(m("!(*.txt)", "a.txt"), Some(false));
        assert_eq!(m("@(out|in)dir", "outdir"), Some(true));
        assert_eq!(m("@(o@(u|x)t)dir", "outdir"), Some(true));
        assert_eq!(m("+([[:alpha:]])", "outdir"), Some(true));
        // Unclosed: literal.
        assert_eq!(m("@(x", "@(x"), Some(true));
    }

    #[test]
    fn dot_names() {
        assert!(Pattern::parse(".*").unwrap().may_match_dot_names());
        assert!(Pattern::parse("@(.env)").unwrap().may_match_dot_names());
        assert!(!Pattern::parse("*").unwrap().may_match_dot_names());
        assert!(!Pattern::parse("[.]env").unwrap().may_match_dot_names());
        assert!(Pattern::parse("*(.)env").unwrap().may_match_dot_names());
        assert!(Pattern::parse("?(x).env").unwrap().may_match_dot_names());
        assert!(Pattern::parse("*(x)@(.)env").unwrap().may_match_dot_names());
        assert!(Pattern::parse("@(x|.e)nv").unwrap().may_match_dot_names());
        assert!(!Pattern::parse("!(x)").unwrap().may_match_dot_names());
        assert!(!Pattern::parse("!(.x)").unwrap().may_match_dot_names());
        assert!(!Pattern::parse("@(x)").unwrap().may_match_dot_names());
    }

    /// Baseline against real bash: each pattern expanded by `bash -O extglob` in a directory
    /// of names, compared with [`super::super::glob`] there.
    #[test]
    fn matches_like_bash() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            ".env",
            ".git",
            "outdir",
            "Makefile",
            "README.md",
            "a.txt",
            "b.rs",
            "x",
            "_u",
            "-dash",
            "]b",
            "e1",
            "9lives",
            ".eeenv",
            ".nv",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let patterns = [
            "*",
            ".*",
            "?",
            "[[:alpha:]]*",
            ".[[:alpha:]]nv",
            ".[[=e=]]nv",
            ".[[.e.]]nv",
            "[[:upper:]]*",
            "[![:lower:]]*",
            "[[:digit:]]*",
            "[[:punct:]]*",
            "[]]b",
            "[a-c].*",
            "[^a-z]*",
            ".@(env|git)",
            ".+(e)nv",
            ".*(e)nv",
            ".?(e)nv",
            "!(x)",
            "!(*.*)",
            "@(out|in)dir",
            "*(x)@(.)env",
            "+([[:alpha:]])",
            "@([[:upper:]])*",
            "?(x).env",
            "[[:alpha:]]utdir",
            "[[:alnum:]_]u",
            "*.@(md|rs)",
            "!([[:upper:]]*)",
        ];
        for pat in patterns {
            let bash = super::super::glob::tests::bash_glob;
            let want = bash(dir.path(), &[], pat);
            let got = super::super::glob(dir.path(), pat, Default::default()).unwrap();
            assert_eq!(got, want, "{pat}");
            // The same with `shopt -s dotglob`.
            let want = bash(dir.path(), &["-O", "dotglob"], pat);
            let got = super::super::glob(
                dir.path(),
                pat,
                super::super::GlobOpts {
                    nocase: false,
                    dot: true,
                    star: false,
                },
            )
            .unwrap();
            assert_eq!(got, want, "dotglob {pat}");
        }
        // With nocaseglob and dotglob (`shopt -s`), never fewer matches than bash; the same
        // ones for patterns without brackets (a name matches when it or its lower case does,
        // which is more than bash for `[^a-z]*`: stricter, never more permissive).
        use super::super::GlobOpts;
        let both = GlobOpts {
            nocase: true,
            dot: true,
            star: false,
        };
        let runs = [
            (
                GlobOpts {
                    nocase: true,
                    dot: false,
                    star: false,
                },
                vec!["-O", "nocaseglob"],
            ),
            (
                GlobOpts {
                    nocase: false,
                    dot: true,
                    star: false,
                },
                vec!["-O", "dotglob"],
            ),
            (both, vec!["-O", "nocaseglob", "-O", "dotglob"]),
        ];
        let extra = [
            "*ENV",
            ".E*",
            "MAKE*",
            "readme.*",
            "*[E]nv",
            ".[A-Z]nv",
            "@(.ENV|x)",
        ];
        for (opts, flags) in runs {
            for pat in patterns.iter().chain(extra.iter()) {
                let want = super::super::glob::tests::bash_glob(dir.path(), &flags, pat);
                let got = super::super::glob(dir.path(), pat, opts).unwrap();
                for w in &want {
                    assert!(
                        got.contains(w),
                        "{pat} {flags:?}: bash matches {w}, ours {got:?}"
                    );
                }
                if !pat.contains('[') {
                    assert_eq!(got, want, "{pat} {flags:?}");
                }
            }
        }
    }

    #[test]
    fn prefixes() {
        assert!(is_pattern(".@(env)"));
        assert!(is_pattern("x/+(a)"));
        assert!(is_pattern("!(a)"));
        assert!(!is_pattern("a@b(c)"));
        assert_eq!(literal_prefix("outdir/@(s)ecret"), "outdir/");
        assert_eq!(literal_prefix("a/b[c]"), "a/b");
        assert_eq!(literal_prefix("plain"), "plain");
    }
}
