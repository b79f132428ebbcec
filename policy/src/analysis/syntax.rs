//! Helpers over the text and tree of a line: parsing, nesting depth, here-document
//! delimiters, substitutions inside text, the functions a function body calls and loops that
//! spawn without end.

use super::grammar_gaps;
use super::words;
use brush_parser::ast;

/// Delimiters of the here-documents a line opens (`<<EOF`, `<<-'EOF'`, `<< "EOF"`), in order.
pub(super) fn heredoc_delimiters(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<<") {
        let after = &rest[i + 2..];
        if let Some(here_string) = after.strip_prefix('<') {
            rest = here_string;
            continue;
        }
        let after = after.strip_prefix('-').unwrap_or(after).trim_start();
        let word: String = after
            .chars()
            .take_while(|c| {
                !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | '<' | '>' | '(' | ')')
            })
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        if !word.is_empty() {
            out.push(word);
        }
        rest = after;
    }
    (!out.is_empty()).then_some(out)
}

/// The command texts of `$(…)` and backquotes in `text` (parentheses matched, quotes
/// skipped roughly; an unclosed one runs to the end).
pub(super) fn substitutions_in(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && b.get(i + 1) == Some(&b'(') {
            let start = i + 2;
            let mut depth = 1;
            let mut j = start;
            let mut quote: Option<u8> = None;
            while j < b.len() && depth > 0 {
                match (quote, b[j]) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, b'\'') | (None, b'"') => quote = Some(b[j]),
                    (None, b'(') => depth += 1,
                    (None, b')') => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            let end = if depth == 0 { j - 1 } else { j };
            out.push(text[start..end].to_string());
            i = j;
        } else if b[i] == b'`' {
            let start = i + 1;
            let end = text[start..].find('`').map_or(text.len(), |e| start + e);
            out.push(text[start..end].to_string());
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// Deepest nesting of `(`/`{`/`[` in a line, beyond which the recursive-descent grammar could
/// exhaust the stack; such lines are refused as opaque (stricter, never more permissive).
pub(super) const MAX_NESTING: usize = 200;

pub(super) fn nesting(text: &str) -> usize {
    let mut depth: usize = 0;
    let mut max = 0;
    for b in text.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Parses a line with the bash grammar (through [`grammar_gaps`] where the grammar crate
/// rejects what bash runs).
pub(super) fn parse(text: &str) -> Result<ast::Program, String> {
    parse_source(text).map(|(prog, _)| prog)
}

/// Parses a line as rewritten by [`grammar_gaps::rewrite`] (when that changes it and the
/// result parses) or as it is; returns the tree and the rewritten text the tree's positions
/// refer to (`None`: the line itself). The rewrite is tried first because the grammar crate
/// also accepts some such lines wrongly: inside double quotes `"$(case x in x) id;; esac)"`
/// tokenizes, as a substitution of `case x in x` followed by text.
pub(super) fn parse_source(text: &str) -> Result<(ast::Program, Option<String>), String> {
    if let Some(t) = grammar_gaps::rewrite(text) {
        if let Ok(prog) = parse_exact(&t) {
            return Ok((prog, Some(t)));
        }
    }
    parse_exact(text).map(|prog| (prog, None))
}

/// A line's tree and rewritten text ([`parse_source`]), or why it does not parse.
pub(super) type Parsed = Result<(ast::Program, Option<String>), String>;

/// Lines kept parsed per classification ([`super::Analyzer::parsed`]).
const MAX_KEPT_PARSES: usize = 32;

impl super::Analyzer<'_> {
    /// [`parse_source`] of `text`, kept for the rest of the classification: the analysis
    /// and the "always" key's peel ([`super::housekeeping`]) parse the same lines, and a tree
    /// is a function of the text alone (no file or context is read), so a kept one is never
    /// stale. At most [`MAX_KEPT_PARSES`] lines are kept; others are parsed each time.
    pub(super) fn parsed(&self, text: &str) -> std::rc::Rc<Parsed> {
        if let Some((_, p)) = self.parses.borrow().iter().find(|(t, _)| t == text) {
            return p.clone();
        }
        let p = std::rc::Rc::new(parse_source(text));
        let mut kept = self.parses.borrow_mut();
        if kept.len() < MAX_KEPT_PARSES {
            kept.push((text.to_string(), p.clone()));
        }
        p
    }
}

fn parse_exact(text: &str) -> Result<ast::Program, String> {
    let opts = words::options();
    let tokens = brush_parser::tokenize_str_with_options(text, &opts.tokenizer_options())
        .map_err(|e| e.to_string())?;
    brush_parser::parse_tokens(&tokens, &opts).map_err(|e| e.to_string())
}

/// How a simple command is reached inside a body.
#[derive(Debug, Clone, Copy, Default)]
struct Reach {
    /// It runs in a process of its own: a pipeline stage, a subshell, a command or process
    /// substitution, a background job or a coprocess.
    forked: bool,
    /// The body does not wait for it: a background job (`&`) or a coprocess.
    background: bool,
    /// It runs beside other commands at once: a stage of a pipeline of several.
    concurrent: bool,
    /// It runs only on a condition: in an `if` or `case` branch, a loop's body, or after
    /// `&&`/`||`.
    guarded: bool,
}

impl Reach {
    fn guarded(self) -> Reach {
        Reach {
            guarded: true,
            ..self
        }
    }

    /// Whether a call reached so adds processes that a recursion multiplies: one the body
    /// does not wait for, one beside others, or an unconditional one in a process of its own.
    /// A single waited-for call on a condition (`if …; then echo "$(f y)"; fi`, as shells'
    /// own snapshot scripts have) recurses one process at a time and ends with its condition.
    fn multiplies(self) -> bool {
        self.forked && (self.background || self.concurrent || !self.guarded)
    }
}

/// The simple commands a compound command runs, by name, with how each is reached
/// (function definitions inside are not entered: they only define).
fn reached_names(cc: &ast::CompoundCommand, reach: Reach, out: &mut Vec<(String, Reach)>) {
    let list = |l: &ast::CompoundList, out: &mut Vec<(String, Reach)>| reached_list(l, reach, out);
    match cc {
        ast::CompoundCommand::BraceGroup(g) => list(&g.list, out),
        ast::CompoundCommand::Subshell(g) => reached_list(
            &g.list,
            Reach {
                forked: true,
                ..reach
            },
            out,
        ),
        ast::CompoundCommand::ForClause(f) => reached_list(&f.body.list, reach.guarded(), out),
        ast::CompoundCommand::ArithmeticForClause(f) => {
            reached_list(&f.body.list, reach.guarded(), out)
        }
        ast::CompoundCommand::CaseClause(c) => {
            for item in &c.cases {
                if let Some(l) = &item.cmd {
                    reached_list(l, reach.guarded(), out);
                }
            }
        }
        ast::CompoundCommand::IfClause(i) => {
            list(&i.condition, out);
            reached_list(&i.then, reach.guarded(), out);
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    reached_list(c, reach.guarded(), out);
                }
                reached_list(&e.body, reach.guarded(), out);
            }
        }
        ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
            list(&w.0, out);
            reached_list(&w.1.list, reach.guarded(), out);
        }
        ast::CompoundCommand::Coprocess(c) => reached_command(
            &c.body,
            Reach {
                forked: true,
                background: true,
                ..reach
            },
            out,
        ),
        ast::CompoundCommand::Arithmetic(_) => {}
    }
}

fn reached_list(list: &ast::CompoundList, reach: Reach, out: &mut Vec<(String, Reach)>) {
    for item in &list.0 {
        let reach = if matches!(item.1, ast::SeparatorOperator::Async) {
            Reach {
                forked: true,
                background: true,
                ..reach
            }
        } else {
            reach
        };
        let aol = &item.0;
        let rest = aol.additional.iter().map(|a| match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => (p, true),
        });
        for (p, after) in std::iter::once((&aol.first, false)).chain(rest) {
            let reach = if after { reach.guarded() } else { reach };
            let reach = if p.seq.len() > 1 {
                Reach {
                    forked: true,
                    concurrent: true,
                    ..reach
                }
            } else {
                reach
            };
            for c in &p.seq {
                reached_command(c, reach, out);
            }
        }
    }
}

fn reached_command(c: &ast::Command, reach: Reach, out: &mut Vec<(String, Reach)>) {
    match c {
        ast::Command::Simple(s) => {
            if let Some(n) = &s.word_or_name {
                out.push((n.value.clone(), reach));
            }
            // `$(f)`, `` `f` ``, `<(f)`: each runs in a process of its own.
            let inner = Reach {
                forked: true,
                ..reach
            };
            for text in substitutions_in(&s.to_string()) {
                if let Ok(prog) = parse(&text) {
                    for cc in &prog.complete_commands {
                        reached_list(cc, inner, out);
                    }
                }
            }
            let items = s.prefix.iter().flat_map(|p| p.0.iter());
            for item in items.chain(s.suffix.iter().flat_map(|p| p.0.iter())) {
                if let ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) = item {
                    reached_list(&sub.list, inner, out);
                }
            }
        }
        ast::Command::Compound(cc, _) => reached_names(cc, reach, out),
        ast::Command::Function(_) | ast::Command::ExtendedTest(..) => {}
    }
}

/// The names a function body runs, each with whether a call of it multiplies processes
/// ([`Reach::multiplies`]: in a process of its own that the body does not wait for, that runs
/// beside others, or unconditionally): the edges of the call graph [`spawn_cycle`] searches.
pub(super) fn called_names(body: &ast::CompoundCommand) -> Vec<(String, bool)> {
    let mut reached = Vec::new();
    reached_names(body, Reach::default(), &mut reached);
    let mut out: Vec<(String, bool)> = Vec::new();
    for (name, reach) in reached {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 |= reach.multiplies(),
            None => out.push((name, reach.multiplies())),
        }
    }
    out
}

/// Whether the functions defined on a line call each other in a cycle (directly, `f(){ f &
/// f; }`, or mutually, `a(){ b & b; }; b(){ a & a; }`) where at least one call of the cycle
/// multiplies processes ([`Reach::multiplies`]): every call then adds processes without
/// end, a fork bomb (DESIGN.md §2: fork bombs are blocked). A cycle of plain calls only
/// recurses in one process, which bash ends at its nesting limit, and one waited-for call on
/// a condition recurses one process at a time. Returns a function of the cycle.
pub(super) fn spawn_cycle(calls: &[(String, Vec<(String, bool)>)]) -> Option<String> {
    let reaches = |from: &str, to: &str| {
        let mut stack = vec![from.to_string()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            let Some((_, callees)) = calls.iter().find(|(f, _)| *f == n) else {
                continue;
            };
            for (c, _) in callees {
                if !seen.contains(c) {
                    seen.push(c.clone());
                    stack.push(c.clone());
                }
            }
        }
        false
    };
    for (caller, callees) in calls {
        for (callee, forked) in callees {
            if *forked && reaches(callee, caller) {
                return Some(caller.clone());
            }
        }
    }
    None
}

/// Whether a loop condition always lets the loop go on: `while` with `true`, `:`, a
/// non-zero arithmetic literal or a test of a non-empty literal (`[ 1 ]`), `until` with
/// `false`; `!` inverts. False when it may end (or cannot be known).
fn endless_condition(cond: &ast::CompoundList, until: bool) -> bool {
    let Some(last) = cond.0.last() else {
        return false;
    };
    if !last.0.additional.is_empty() || last.0.first.seq.len() != 1 {
        return false;
    }
    let p = &last.0.first;
    let goes_on_when = until == p.bang;
    let succeeds = match &p.seq[0] {
        ast::Command::Simple(s) => {
            let name = s.word_or_name.as_ref().map(|w| w.value.as_str());
            let args: Vec<&str> = s
                .suffix
                .iter()
                .flat_map(|x| x.0.iter())
                .filter_map(|i| match i {
                    ast::CommandPrefixOrSuffixItem::Word(w) => Some(w.value.as_str()),
                    _ => None,
                })
                .collect();
            let literal = |a: &str| {
                !a.is_empty() && !a.contains(['$', '`', '"', '\'']) && !a.starts_with('-')
            };
            match (
                name.map(|n| n.rsplit('/').next().unwrap_or(n)),
                args.as_slice(),
            ) {
                (Some("true" | ":"), _) => Some(true),
                (Some("false"), _) => Some(false),
                (Some("["), [a, "]"]) | (Some("test"), [a]) if literal(a) => Some(true),
                _ => None,
            }
        }
        ast::Command::Compound(ast::CompoundCommand::Arithmetic(a), _) => {
            let e = a.expr.value.trim();
            match e.parse::<i64>() {
                Ok(n) => Some(n != 0),
                Err(_) => None,
            }
        }
        _ => None,
    };
    succeeds == Some(goes_on_when)
}

/// Whether a loop goes on without end while starting background jobs each round (`while
/// true; do ls & done`, `until false; do f & done`, `for ((;;)); do … & done`): processes
/// pile up until the system's limit, as in a fork bomb. A `break`, `exit` or `return` in the
/// body that runs in the loop's own process counts as an end. `cond` is `None` for
/// `for ((;;))`.
pub(super) fn endless_spawning_loop(
    cond: Option<&ast::CompoundList>,
    until: bool,
    body: &ast::CompoundList,
) -> bool {
    if let Some(c) = cond {
        if !endless_condition(c, until) {
            return false;
        }
    }
    let mut reached = Vec::new();
    reached_list(body, Reach::default(), &mut reached);
    let ends = reached
        .iter()
        .any(|(n, r)| !r.forked && matches!(n.as_str(), "break" | "exit" | "return" | "exec"));
    !ends && reached.iter().any(|(_, r)| r.background)
}
