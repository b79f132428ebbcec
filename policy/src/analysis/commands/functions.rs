//! Calls of functions defined on the line: a body that uses its positional parameters is
//! analysed again with each call's words (DESIGN.md §2a: wrappers are judged by what they run).

use super::*;

impl Analyzer<'_> {
    /// A call of a function defined on the line whose body uses its positional parameters
    /// (`f(){ git "$@"; }; f push origin HEAD:main`, `f(){ rm -rf "$1"; }; f /etc`): the
    /// body is analysed again with `$@`, `$*`, `$N` replaced by the call's words (DESIGN.md
    /// §2a: wrappers are judged by what they run). Arguments that cannot be known stay
    /// unknown there. A call whose stdin is fed (`x | f`) analyses the body again reading it,
    /// as every command of the body does (`f(){ sh; }; curl … | f`). Each function is
    /// expanded once per call chain (no recursion).
    pub(super) fn function_call(
        &mut self,
        st: &State,
        name: &str,
        args: &[Field],
        stdin: Stdin,
        depth: usize,
    ) {
        if self.calling.iter().any(|c| c == name) {
            return;
        }
        let Some(body) = self
            .function_bodies
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
        else {
            return;
        };
        let uses = body.contains("$@")
            || body.contains("$*")
            || body.contains("${@")
            || body.contains("${*")
            || (1..=9)
                .any(|n| body.contains(&format!("${n}")) || body.contains(&format!("${{{n}}}")));
        if !uses && stdin == Stdin::Inherited {
            return;
        }
        // A word as it can stand in the body's text: plain when it has no characters the
        // shell treats specially (then it reads the same quoted or not), single-quoted else;
        // an unknown word as a variable nobody set.
        let word = |f: &Field| match f.known() {
            Some(t)
                if !t.is_empty()
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_./:@%+=,-^~".contains(c)) =>
            {
                t
            }
            Some(t) => format!("'{}'", t.replace('\'', r"'\''")),
            None => "${__tyba_unknown_argument}".to_string(),
        };
        let all: Vec<String> = args.iter().map(word).collect();
        let mut text = body;
        for spelling in [
            "\"$@\"", "\"${@}\"", "\"$*\"", "\"${*}\"", "${@}", "${*}", "$@", "$*",
        ] {
            text = text.replace(spelling, &all.join(" "));
        }
        for n in (1..=9).rev() {
            let value = args.get(n - 1).map(word).unwrap_or_default();
            for spelling in [
                format!("\"${{{n}}}\""),
                format!("\"${n}\""),
                format!("${{{n}}}"),
                format!("${n}"),
            ] {
                text = text.replace(&spelling, &value);
            }
        }
        self.calling.push(name.to_string());
        self.line_with_stdin(&text, st.clone(), depth + 1, stdin);
        self.calling.pop();
    }
}
