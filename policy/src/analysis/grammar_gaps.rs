//! Workarounds for two places where the bash grammar crate (brush-parser 0.4) rejects lines
//! that bash runs, so the line is judged by what bash runs rather than as a parse error:
//!
//! - a `case` pattern without its optional opening parenthesis (`case x in x) …;; esac`)
//!   inside `$(…)`, `<(…)` or `(…)`: the crate's tokenizer finds the end of a command
//!   substitution by counting parentheses, so the pattern's `)` closes it early. bash(1)
//!   "Compound Commands" allows `(pattern)`: the rewrite adds the opening parenthesis to every
//!   `case` pattern that lacks it, which bash reads the same way. The crate also rejects a
//!   `case` that ends a subshell (`(case a in a) ls;; esac)`): a `;` goes between `esac` and
//!   the `)`.
//! - `select NAME [in WORDS]; do LIST; done`: the crate reserves the word but has no grammar
//!   for it. bash(1) runs LIST with NAME set to one of WORDS or to the empty string (a choice
//!   out of range), until a `break`; the rewrite is `for NAME [in WORDS '']; do LIST; done`,
//!   whose body the walk analyses with NAME bound to every one of those values.
//!
//! - `for ((INIT;;UPDATE))` and `for ((;;))`: the crate's tokenizer reads two adjacent `;` of
//!   an arithmetic `for` header as the case separator `;;` and rejects the line (`for ((i=0;
//!   ; i++))` parses). bash(1): an empty expression there is no-op, or 1 for the condition;
//!   the rewrite puts a blank between the two `;`, which bash reads the same way.
//!
//! The rewrite is used only when its result parses. It only inserts text, and only at a `case` pattern's start, after a
//! `select` word list or in place of the `select` keyword; quotes, escapes, comments,
//! here-documents and nested substitutions are skipped like bash's own reader does.

/// The line with both workarounds applied, when either changed something.
pub(super) fn rewrite(text: &str) -> Option<String> {
    if !text.contains("case") && !text.contains("select") && !text.contains(";;") {
        return None;
    }
    let mut r = Rewriter {
        b: text.as_bytes(),
        i: 0,
        out: Vec::with_capacity(text.len() + 8),
        changed: false,
        heredocs: Vec::new(),
        depth: 0,
        gave_up: false,
        arith: 0,
    };
    loop {
        match r.list(false) {
            Stop::End => break,
            // An unmatched `)` or a stray `;;` at the top: copy it and go on.
            Stop::CloseParen | Stop::CaseSep | Stop::Esac => {
                if !r.copy_one() {
                    break;
                }
            }
        }
    }
    if !r.changed || r.gave_up {
        return None;
    }
    String::from_utf8(r.out).ok()
}

/// Nesting beyond which the rewriter gives up (the line is then a parse error as before).
const MAX_DEPTH: usize = 200;

/// Why a list stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    End,
    /// An unmatched `)` (not consumed).
    CloseParen,
    /// `;;`, `;&` or `;;&` inside a case body (not consumed).
    CaseSep,
    /// The word `esac` in command position inside a case body (not consumed).
    Esac,
}

struct Rewriter<'a> {
    b: &'a [u8],
    i: usize,
    out: Vec<u8>,
    changed: bool,
    /// Here-documents opened on the current line: delimiter and whether tabs are stripped.
    heredocs: Vec<(Vec<u8>, bool)>,
    depth: usize,
    /// Nesting went beyond [`MAX_DEPTH`]: no rewrite.
    gave_up: bool,
    /// Inside `$((…))` or `((…))`, where `<<` is a shift, not a here-document.
    arith: usize,
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

/// Reserved words after which a command starts.
fn opens_command(word: &[u8]) -> bool {
    matches!(
        word,
        b"do" | b"then" | b"else" | b"elif" | b"if" | b"while" | b"until" | b"!" | b"time" | b"{"
    )
}

impl Rewriter<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn copy_one(&mut self) -> bool {
        match self.peek() {
            Some(c) => {
                self.out.push(c);
                self.i += 1;
                true
            }
            None => false,
        }
    }

    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.copy_one();
        }
    }

    /// Blanks, newlines (with any here-document bodies) and comments.
    fn gaps(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => {
                    self.copy_one();
                }
                Some(b'\n') => self.newline(),
                Some(b'#') => self.comment(),
                _ => return,
            }
        }
    }

    fn comment(&mut self) {
        while self.peek().is_some_and(|c| c != b'\n') {
            self.copy_one();
        }
    }

    /// A newline, then the bodies of the here-documents opened before it.
    fn newline(&mut self) {
        self.copy_one();
        for (delim, strip_tabs) in std::mem::take(&mut self.heredocs) {
            loop {
                let start = self.i;
                let end = self.b[start..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(self.b.len(), |p| start + p);
                let mut line = &self.b[start..end];
                if strip_tabs {
                    while let Some(rest) = line.strip_prefix(b"\t") {
                        line = rest;
                    }
                }
                let done = line == delim.as_slice() || end == self.b.len();
                self.out.extend_from_slice(&self.b[start..end]);
                self.i = end;
                if self.peek() == Some(b'\n') {
                    self.copy_one();
                }
                if done {
                    break;
                }
            }
        }
    }

    /// A plain word (letters only) starting here and ending at a metacharacter or the end.
    fn plain_word(&self) -> Option<&[u8]> {
        let rest = &self.b[self.i..];
        let n = rest.iter().take_while(|c| c.is_ascii_alphabetic()).count();
        (n > 0 && rest.get(n).is_none_or(|&c| is_meta(c))).then_some(&rest[..n])
    }

    /// Commands until the end, an unmatched `)` or (in a case body) `;;`/`esac`.
    fn list(&mut self, case_body: bool) -> Stop {
        self.depth += 1;
        let stop = self.list_inner(case_body);
        self.depth -= 1;
        stop
    }

    fn list_inner(&mut self, case_body: bool) -> Stop {
        if self.depth > MAX_DEPTH {
            self.i = self.b.len();
            self.gave_up = true;
            return Stop::End;
        }
        let mut command_start = true;
        loop {
            self.blanks();
            let Some(c) = self.peek() else {
                return Stop::End;
            };
            match c {
                b'#' => self.comment(),
                b'\n' => {
                    self.newline();
                    command_start = true;
                }
                b';' => {
                    if case_body && matches!(self.at(1), Some(b';' | b'&')) {
                        return Stop::CaseSep;
                    }
                    self.copy_one();
                    command_start = true;
                }
                b'&' | b'|' => {
                    self.copy_one();
                    command_start = true;
                }
                b'(' => {
                    let arith = command_start && self.at(1) == Some(b'(');
                    // `NAME()`: a function's body follows, a command.
                    let definition = !command_start && self.at(1) == Some(b')');
                    self.copy_one();
                    self.arith += usize::from(arith);
                    if self.list(false) == Stop::CloseParen {
                        self.copy_one();
                    }
                    self.arith -= usize::from(arith);
                    command_start = definition;
                }
                b')' => return Stop::CloseParen,
                b'<' | b'>' => {
                    self.redirection();
                    command_start = false;
                }
                _ => {
                    if command_start {
                        match self.plain_word() {
                            Some(b"esac") if case_body => return Stop::Esac,
                            Some(b"case") => {
                                self.copy_word();
                                self.case_clause();
                                command_start = false;
                                continue;
                            }
                            Some(b"select") => {
                                self.select_clause();
                                command_start = false;
                                continue;
                            }
                            Some(b"for") if self.arithmetic_for() => {
                                self.for_header();
                                command_start = false;
                                continue;
                            }
                            _ => {}
                        }
                    }
                    let start = self.out.len();
                    self.word();
                    command_start = command_start && opens_command(&self.out[start..]);
                }
            }
        }
    }

    /// `<`, `>`, their doubled and `&` forms, process substitutions and here-documents.
    fn redirection(&mut self) {
        if self.at(1) == Some(b'(') {
            self.copy_one();
            self.copy_one();
            if self.list(false) == Stop::CloseParen {
                self.copy_one();
            }
            return;
        }
        let here_doc = self.arith == 0
            && self.peek() == Some(b'<')
            && self.at(1) == Some(b'<')
            && self.at(2) != Some(b'<');
        while matches!(self.peek(), Some(b'<' | b'>' | b'&' | b'|')) {
            self.copy_one();
        }
        if here_doc {
            let strip_tabs = self.peek() == Some(b'-');
            if strip_tabs {
                self.copy_one();
            }
            self.blanks();
            let start = self.out.len();
            self.word();
            let delim: Vec<u8> = self.out[start..]
                .iter()
                .copied()
                .filter(|c| !matches!(c, b'\'' | b'"' | b'\\'))
                .collect();
            self.heredocs.push((delim, strip_tabs));
        }
    }

    /// Copies one plain word (a keyword).
    fn copy_word(&mut self) {
        while self.peek().is_some_and(|c| !is_meta(c)) {
            self.copy_one();
        }
    }

    /// One shell word: quotes, escapes, expansions and extended globs kept whole.
    fn word(&mut self) {
        while let Some(c) = self.peek() {
            if is_meta(c) {
                // `@(…)`-style extended globs continue the word.
                let extglob = c == b'('
                    && self
                        .out
                        .last()
                        .is_some_and(|p| matches!(p, b'@' | b'!' | b'+' | b'*' | b'?'));
                if !extglob {
                    return;
                }
                self.copy_one();
                if self.list(false) == Stop::CloseParen {
                    self.copy_one();
                }
                continue;
            }
            self.word_piece(false);
        }
    }

    /// One piece of a word at the cursor (`in_double`: inside double quotes).
    fn word_piece(&mut self, in_double: bool) {
        let Some(c) = self.peek() else {
            return;
        };
        match c {
            b'\\' => {
                self.copy_one();
                self.copy_one();
            }
            b'\'' if !in_double => {
                self.copy_one();
                while self.peek().is_some_and(|c| c != b'\'') {
                    self.copy_one();
                }
                self.copy_one();
            }
            b'"' if !in_double => {
                self.copy_one();
                while let Some(c) = self.peek() {
                    if c == b'"' {
                        self.copy_one();
                        break;
                    }
                    self.word_piece(true);
                }
            }
            b'`' => {
                self.copy_one();
                while let Some(c) = self.peek() {
                    self.copy_one();
                    if c == b'\\' {
                        self.copy_one();
                    } else if c == b'`' {
                        break;
                    }
                }
            }
            b'$' if self.at(1) == Some(b'\'') && !in_double => {
                self.copy_one();
                self.copy_one();
                while let Some(c) = self.peek() {
                    self.copy_one();
                    if c == b'\\' {
                        self.copy_one();
                    } else if c == b'\'' {
                        break;
                    }
                }
            }
            b'$' if self.at(1) == Some(b'(') => {
                let arith = self.at(2) == Some(b'(');
                self.copy_one();
                self.copy_one();
                self.arith += usize::from(arith);
                if self.list(false) == Stop::CloseParen {
                    self.copy_one();
                }
                self.arith -= usize::from(arith);
            }
            b'$' if self.at(1) == Some(b'{') => {
                self.copy_one();
                self.copy_one();
                let mut depth = 1usize;
                while let Some(c) = self.peek() {
                    match c {
                        b'}' => {
                            self.copy_one();
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b'{' => {
                            self.copy_one();
                            depth += 1;
                        }
                        b'\\' | b'$' | b'`' | b'"' | b'\'' => {
                            let before = self.i;
                            self.word_piece(in_double);
                            if self.i == before {
                                self.copy_one();
                            }
                        }
                        _ => {
                            self.copy_one();
                        }
                    }
                }
            }
            _ => {
                self.copy_one();
            }
        }
    }

    /// After `case`: the subject, `in`, then each pattern (given its opening parenthesis) and
    /// body, up to `esac`.
    fn case_clause(&mut self) {
        self.gaps();
        self.word();
        self.gaps();
        if self.plain_word() != Some(b"in") {
            return;
        }
        self.copy_word();
        loop {
            self.gaps();
            match self.peek() {
                None => return,
                Some(b'(') => {
                    self.copy_one();
                }
                Some(_) => {
                    if self.plain_word() == Some(b"esac") {
                        self.copy_word();
                        self.end_before_paren();
                        return;
                    }
                    self.out.push(b'(');
                    self.changed = true;
                }
            }
            // The pattern list, up to its `)`.
            loop {
                self.blanks();
                match self.peek() {
                    None => return,
                    Some(b')') => {
                        self.copy_one();
                        break;
                    }
                    Some(b'|') => {
                        self.copy_one();
                    }
                    Some(b'\n' | b';' | b'&' | b'<' | b'>') => return,
                    Some(b'(') => {
                        // `@(…)` after a glob character is handled by `word`; a bare `(` here
                        // is not a pattern bash accepts.
                        return;
                    }
                    Some(_) => self.word(),
                }
            }
            match self.list(true) {
                Stop::CaseSep => {
                    self.copy_one();
                    self.copy_one();
                    if self.peek() == Some(b'&') {
                        self.copy_one();
                    }
                }
                Stop::Esac => {
                    self.copy_word();
                    self.end_before_paren();
                    return;
                }
                Stop::End | Stop::CloseParen => return,
            }
        }
    }

    /// After `esac`: a `)` that closes a group right after it gets a `;` before it (the
    /// grammar crate rejects `(case a in a) ls;; esac)`, which bash runs).
    fn end_before_paren(&mut self) {
        let rest = &self.b[self.i..];
        let blanks = rest
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count();
        if rest.get(blanks) == Some(&b')') {
            self.out.push(b';');
            self.changed = true;
        }
    }

    /// Whether the `for` here opens an arithmetic header (`for ((`, blanks between).
    fn arithmetic_for(&self) -> bool {
        let rest = &self.b[self.i + "for".len()..];
        let blanks = rest
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count();
        rest[blanks..].starts_with(b"((")
    }

    /// `for ((…))`, copied with a blank between two adjacent `;` of the header (not inside
    /// a nested `(…)`). A quote, escape or newline in the header: no rewrite at all.
    fn for_header(&mut self) {
        self.copy_word();
        self.blanks();
        self.copy_one();
        self.copy_one();
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b')' if depth == 0 && self.at(1) == Some(b')') => {
                    self.copy_one();
                    self.copy_one();
                    return;
                }
                b'(' => depth += 1,
                b')' => depth = depth.saturating_sub(1),
                b'\'' | b'"' | b'`' | b'\\' | b'\n' => {
                    self.gave_up = true;
                    return;
                }
                b';' if depth == 0 && self.at(1) == Some(b';') => {
                    self.copy_one();
                    self.out.push(b' ');
                    self.changed = true;
                    continue;
                }
                _ => {}
            }
            self.copy_one();
        }
    }

    /// `select NAME [in WORDS]` rewritten as `for NAME [in WORDS '']`.
    fn select_clause(&mut self) {
        self.i += "select".len();
        self.out.extend_from_slice(b"for");
        self.changed = true;
        self.blanks();
        self.word();
        self.gaps();
        if self.plain_word() != Some(b"in") {
            return;
        }
        self.copy_word();
        loop {
            self.blanks();
            match self.peek() {
                None | Some(b';' | b'\n') => {
                    self.out.extend_from_slice(b" ''");
                    return;
                }
                Some(c) if is_meta(c) => return,
                Some(_) => self.word(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn case_patterns_get_their_opening_parenthesis() {
        assert_eq!(
            rewrite("echo $(case x in x) rm -rf /;; esac)").as_deref(),
            Some("echo $(case x in (x) rm -rf /;; esac;)")
        );
        assert_eq!(
            rewrite("echo \"$(case $v in a|b) cat .env;; *) ls;; esac)\"").as_deref(),
            Some("echo \"$(case $v in (a|b) cat .env;; (*) ls;; esac;)\"")
        );
        // Already given, nested, fall-through separators, newlines.
        assert_eq!(
            rewrite("x=$(case a in (a) case b in b) id;;& esac;; esac)").as_deref(),
            Some("x=$(case a in (a) case b in (b) id;;& esac;; esac;)")
        );
        assert_eq!(
            rewrite("(case a in a) ls;; esac )").as_deref(),
            Some("(case a in (a) ls;; esac; )")
        );
        assert_eq!(
            rewrite("echo $(case a in\n  a)\n id ;&\n  @(b|c)) ls;;\nesac)").as_deref(),
            Some("echo $(case a in\n  (a)\n id ;&\n  (@(b|c)) ls;;\nesac;)")
        );
    }

    #[test]
    fn words_that_only_look_like_case_are_left_alone() {
        assert_eq!(rewrite("echo case x in x)"), None);
        assert_eq!(rewrite("echo 'case x in x)'"), None);
        assert_eq!(rewrite("echo \"case x in x)\" # case y in y)"), None);
        assert_eq!(rewrite("ls $(echo case) x)"), None);
        // `<<` in arithmetic is a shift, not a here-document.
        assert_eq!(
            rewrite("echo $((1<<2))\necho $(case a in a) id;; esac)").as_deref(),
            Some("echo $((1<<2))\necho $(case a in (a) id;; esac;)")
        );
        assert_eq!(
            rewrite("(( x = 1<<2 ))\necho $(case a in a) id;; esac)").as_deref(),
            Some("(( x = 1<<2 ))\necho $(case a in (a) id;; esac;)")
        );
        assert_eq!(
            rewrite("cat <<E\ncase x in x) ;;\nE\necho $(case a in a) id;; esac)").as_deref(),
            Some("cat <<E\ncase x in x) ;;\nE\necho $(case a in (a) id;; esac;)")
        );
    }

    #[test]
    fn select_becomes_for_with_the_empty_choice() {
        assert_eq!(
            rewrite("select i in $(rm -rf /); do break; done").as_deref(),
            Some("for i in $(rm -rf /) ''; do break; done")
        );
        assert_eq!(
            rewrite("select f in a 'b c'\ndo cat \"$f\"; done").as_deref(),
            Some("for f in a 'b c' ''\ndo cat \"$f\"; done")
        );
        assert_eq!(
            rewrite("select f; do echo $f; done").as_deref(),
            Some("for f; do echo $f; done")
        );
        assert_eq!(rewrite("echo select i in a"), None);
    }

    #[test]
    fn no_panic_on_broken_text() {
        for t in [
            "case",
            "case x",
            "case x in",
            "case x in a",
            "$(",
            "\"$(",
            "${",
            "`",
            "select",
            "select i in",
            "<<",
            "<<E\n",
            "))))",
            ";;",
        ] {
            let _ = rewrite(t);
        }
        let deep = "$(".repeat(500);
        assert_eq!(rewrite(&format!("{deep}case x in x) y;; esac")), None);
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod against_bash {
    use super::super::syntax::parse;
    use std::process::Command;

    /// Lines bash accepts (checked with `bash -n`) that the grammar crate rejects or misreads
    /// as they are: each must parse, into as many simple commands as bash runs.
    #[test]
    fn lines_bash_accepts_parse() {
        let lines = [
            ("echo $(case x in x) rm -rf /;; esac)", "rm"),
            ("echo \"$(case x in x) cat .env;; esac)\"", "cat"),
            ("echo \"a$(case x in x|y) id;; *) ls;; esac)b\"", "ls"),
            ("cat <(case a in a) cat .env;; esac)", "cat .env"),
            ("(case a in a) rm -rf build;; esac)", "rm"),
            ("( case a in (a) id;; esac )", "id"),
            (
                "echo $(case a in a) echo $(case b in b) id;; esac);; esac)",
                "id",
            ),
            ("echo $(case a in\n a)\n  cat .env\n ;;\nesac)", "cat"),
            ("v=$(case \"$1\" in *) git push;; esac)", "git push"),
            ("select i in $(rm -rf /); do break; done", "rm"),
            ("select x; do rm -rf build; done", "rm"),
            ("select x in a b\ndo git push; done", "git push"),
            ("select f in */*.txt; do cat \"$f\"; break; done", "cat"),
            ("for ((;;)); do rm -rf build; done", "rm"),
            ("for ((i=0;;i++)); do git push; done", "git push"),
            ("for((;;)) do x & done", "x"),
            ("for (( ;;)) ; do cat .env; done", "cat .env"),
            ("echo $(for ((;;)); do id; done)", "id"),
            ("f(){ for ((;;)); do f & done; }; f", "f&"),
            ("f() { case a in a) id;; esac; }", "id"),
        ];
        for (line, runs) in lines {
            let ok = Command::new("bash")
                .args(["-n", "-c", line])
                .status()
                .expect("bash runs")
                .success();
            assert!(ok, "bash -n rejects {line:?}");
            let prog = parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            let shown = format!("{prog}");
            assert!(shown.contains(runs), "{line:?} parsed as {shown:?}");
        }
    }
}
