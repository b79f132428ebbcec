//! Helpers over the text and tree of a line: parsing, nesting depth, here-document
//! delimiters, substitutions inside text, and the functions a function body spawns.

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

/// Parses a line with the bash grammar.
pub(super) fn parse(text: &str) -> Result<ast::Program, String> {
    let opts = words::options();
    let tokens = brush_parser::tokenize_str_with_options(text, &opts.tokenizer_options())
        .map_err(|e| e.to_string())?;
    brush_parser::parse_tokens(&tokens, &opts).map_err(|e| e.to_string())
}

/// Whether a function body runs the function itself in a pipeline or in the background.
/// Names a function body runs in a pipeline or in the background (what a fork bomb does).
pub(super) fn spawned_names(body: &ast::CompoundCommand) -> Vec<String> {
    let text = body.to_string();
    let Ok(prog) = parse(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cc in &prog.complete_commands {
        for item in &cc.0 {
            let async_ = matches!(item.1, ast::SeparatorOperator::Async);
            visit_pipelines(&item.0, &mut |p: &ast::Pipeline| {
                if p.seq.len() > 1 || async_ {
                    for c in &p.seq {
                        if let Some(n) = command_name(c) {
                            if !out.contains(&n) {
                                out.push(n);
                            }
                        }
                    }
                }
            });
        }
    }
    out
}

/// Whether the functions defined on a line spawn each other in a cycle (`f(){ f|f& }`, or
/// `a(){ b|b& }; b(){ a|a& }`): a fork bomb.
pub(super) fn spawn_cycle(spawns: &[(String, Vec<String>)]) -> Option<String> {
    for (start, _) in spawns {
        let mut stack = vec![start.clone()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(n) = stack.pop() {
            let Some((_, callees)) = spawns.iter().find(|(f, _)| *f == n) else {
                continue;
            };
            for c in callees {
                if c == start {
                    return Some(start.clone());
                }
                if !seen.contains(c) {
                    seen.push(c.clone());
                    stack.push(c.clone());
                }
            }
        }
    }
    None
}

pub(super) fn visit_pipelines(aol: &ast::AndOrList, f: &mut dyn FnMut(&ast::Pipeline)) {
    f(&aol.first);
    for a in &aol.additional {
        match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => f(p),
        }
    }
    let inner = |p: &ast::Pipeline, f: &mut dyn FnMut(&ast::Pipeline)| {
        for c in &p.seq {
            if let ast::Command::Compound(ast::CompoundCommand::BraceGroup(g), _) = c {
                for item in &g.list.0 {
                    visit_pipelines(&item.0, f);
                }
            }
        }
    };
    inner(&aol.first, f);
}

pub(super) fn command_name(c: &ast::Command) -> Option<String> {
    match c {
        ast::Command::Simple(s) => s.word_or_name.as_ref().map(|w| w.value.clone()),
        _ => None,
    }
}
