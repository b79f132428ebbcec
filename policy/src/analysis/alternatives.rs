//! A variable with several possible values (`true && g=git`, `if …; then g=a; else g=b; fi`,
//! `for g in ls git`) is each of them in turn: a simple command naming it is analysed once per
//! value, the known ones included, and the worst verdict wins (DESIGN.md §2: "a compound
//! command takes the worst colour of its parts"; a value that cannot be known is one of the
//! possibilities, never a reason to forget the known ones).
//!
//! Without this the expansion of `$g` lists every value as a separate word, so
//! `for g in ls git; do $g push origin HEAD:main; done` read as `ls git push …`.

use super::{Analyzer, State, Stdin};
use brush_parser::ast;

/// At most this many combinations of values are analysed one by one; beyond, the words of all
/// values are analysed together (every value still checked as a word).
const MAX_COMBINATIONS: usize = 16;
/// Values of variables in the command word are split up to this many combinations, whatever
/// the other words: which program runs decides most.
const MAX_PROGRAM_COMBINATIONS: usize = 64;

impl Analyzer<'_> {
    /// Analyses a simple command once for each combination of the possible values of the
    /// variables its words name; returns the union of the states those runs may leave.
    pub(crate) fn simple_each_value(
        &mut self,
        s: &ast::SimpleCommand,
        st: State,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        let split = variables_to_split(s, &st);
        if split.is_empty() {
            if s.word_or_name.as_ref().is_some_and(|w| w.value == "read") {
                let before = st.clone();
                let mut after = self.simple(s, st, stdin, depth);
                self.bind_here_string_read(s, &before, &mut after);
                return after;
            }
            return self.simple(s, st, stdin, depth);
        }
        let mut states = vec![st.clone()];
        for name in &split {
            let values = st.vars.get(name).cloned().unwrap_or_default();
            let mut next = Vec::with_capacity(states.len() * values.len());
            for one in &states {
                for v in &values {
                    let mut s2 = one.clone();
                    s2.vars.insert(name.clone(), vec![v.clone()]);
                    next.push(s2);
                }
            }
            states = next;
        }
        // Each further run is work like another command (the line's budget, MAX_WORK).
        if self.over_budget((states.len() - 1) * st.cwds.len().max(1)) {
            return st;
        }
        let mut out: Option<State> = None;
        for one in states {
            let after = self.simple(s, one, stdin, depth);
            match &mut out {
                None => out = Some(after),
                Some(o) => o.union(&after),
            }
        }
        out.unwrap_or(st)
    }
}

/// Variables with more than one possible value that the command's words name, those of the
/// command word first, bounded by the combination limits.
fn variables_to_split(s: &ast::SimpleCommand, st: &State) -> Vec<String> {
    if !st.vars.values().any(|v| v.len() > 1) {
        return Vec::new();
    }
    let mut program_names: Vec<String> = Vec::new();
    if let Some(w) = &s.word_or_name {
        names_in(&w.value, &mut program_names);
    }
    let mut other: Vec<String> = Vec::new();
    let prefix = s.prefix.iter().flat_map(|p| p.0.iter());
    let suffix = s.suffix.iter().flat_map(|p| p.0.iter());
    {
        for item in prefix.chain(suffix) {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) => names_in(&w.value, &mut other),
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    names_in(&w.value, &mut other)
                }
                ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                    names_in(&io.to_string(), &mut other)
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {}
            }
        }
    }
    let count = |n: &String| st.vars.get(n).map_or(1, Vec::len);
    let mut split = Vec::new();
    let mut combos = 1usize;
    for n in program_names {
        let c = count(&n);
        if c > 1 && !split.contains(&n) && combos * c <= MAX_PROGRAM_COMBINATIONS {
            combos *= c;
            split.push(n);
        }
    }
    for n in other {
        let c = count(&n);
        if c > 1 && !split.contains(&n) && combos * c <= MAX_COMBINATIONS {
            combos *= c;
            split.push(n);
        }
    }
    split
}

/// Names of the variables a raw word refers to (`$x`, `${x…}`, `${#x}`, `${!x}`), in order;
/// an over-approximation (names in single quotes count too), which only costs a repeat.
fn names_in(raw: &str, out: &mut Vec<String>) {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        i += 1;
        while i < b.len() && matches!(b[i], b'{' | b'!' | b'#') {
            i += 1;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start && !b[start].is_ascii_digit() {
            let name = &raw[start..i];
            if !out.iter().any(|n| n == name) {
                out.push(name.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::names_in;

    #[test]
    fn names_in_finds_every_parameter_form() {
        let mut v = Vec::new();
        names_in("$a${b}x${#c}${!d}$1${e:-$f}'$g'", &mut v);
        assert_eq!(v, ["a", "b", "c", "d", "e", "f", "g"]);
    }
}
