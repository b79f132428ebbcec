//! Text from the agent's side, made safe to show the person: a command line, a path, a reason,
//! the diff of an edit.
//!
//! Everything an ask carries may come from the sandbox (a hook's ask is sent by a process the
//! agent controls), so before it reaches the person's terminal, the inbox or the audit log:
//! - every control character becomes `?`, so no escape sequence can move the cursor, clear
//!   the screen or end the prompt's marker; so does every Unicode bidirectional control
//!   (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which would let a line read in
//!   another order than the one it is written in ("Trojan Source", CVE-2021-42574);
//! - a block (a diff) keeps its line breaks, shows tabs as four spaces, and is cut to
//!   [`DIFF_MAX_LINES`] lines of at most [`DIFF_MAX_LINE_CHARS`] characters, the rest counted
//!   in a last line (`… 12 more lines`).
//!
//! ```
//! use tyba_supervisor::broker::text;
//! assert_eq!(text::clean("a\x1b[2Jb\u{202e}c"), "a?[2Jb?c");
//! assert_eq!(text::clean_diff("-\told\n+new\r\n"), "-    old\n+new?\n");
//! ```

/// The most lines of a diff shown, before the count of the rest.
pub const DIFF_MAX_LINES: usize = 200;
/// The most characters of one diff line shown; longer lines end with `…`.
pub const DIFF_MAX_LINE_CHARS: usize = 400;

/// Whether `c` reorders text on display (the Unicode bidirectional formatting characters).
fn bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// One line of text from the agent's side, every control character (line breaks included)
/// and every bidirectional control replaced by `?`.
pub fn clean(x: &str) -> String {
    x.chars()
        .map(|c| {
            if c.is_control() || bidi_control(c) {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// A block of text (a diff) cut to `max_lines` lines of at most `max_line_chars` characters,
/// each line cleaned as by [`clean`] with tabs shown as four spaces. The line breaks are
/// kept (a `\r` before one is a control character like any other, shown as `?`); when lines
/// were cut, a last line says how many: `… N more lines`. The result ends with a line break
/// unless it is empty.
pub fn clean_block(x: &str, max_lines: usize, max_line_chars: usize) -> String {
    let mut out = String::new();
    let mut lines = x.split_terminator('\n');
    for line in lines.by_ref().take(max_lines) {
        for (shown, c) in line.chars().enumerate() {
            if shown >= max_line_chars {
                out.push('…');
                break;
            }
            if c == '\t' {
                out.push_str("    ");
            } else if c.is_control() || bidi_control(c) {
                out.push('?');
            } else {
                out.push(c);
            }
        }
        out.push('\n');
    }
    let rest = lines.count();
    if rest > 0 {
        out.push_str(&format!(
            "… {rest} more line{}\n",
            if rest == 1 { "" } else { "s" }
        ));
    }
    out
}

/// [`clean_block`] with the diff bounds ([`DIFF_MAX_LINES`], [`DIFF_MAX_LINE_CHARS`]).
pub fn clean_diff(x: &str) -> String {
    clean_block(x, DIFF_MAX_LINES, DIFF_MAX_LINE_CHARS)
}

/// The most characters of an action shown on one line (ask header, end summary, `tyba log`,
/// `tyba inbox`) before it is cut with [`shown_action`]'s marker.
pub const ACTION_MAX_CHARS: usize = 200;

/// An action as the person reads it on one line: the command behind the agent's shell
/// wrapper when the line has one (`inner`: `tyba_policy::Classification::inner_command`,
/// the line's one part that is not neutral housekeeping, so it is the whole risk), else the
/// whole line; cleaned as by [`clean`] with each line break shown as `⏎`, and cut to
/// [`ACTION_MAX_CHARS`] characters with `… (N more characters; whole line in the audit log)`.
/// The audit log keeps the whole line (`action`) next to it (`inner_command`).
///
/// ```
/// use tyba_supervisor::broker::text::shown_action;
/// assert_eq!(shown_action("shopt -u dotglob; ( make ); exit $?", Some("make")), "make");
/// let long = "x".repeat(250);
/// assert_eq!(
///     shown_action(&long, None),
///     format!("{}… (50 more characters; whole line in the audit log)", "x".repeat(200))
/// );
/// ```
pub fn shown_action(whole: &str, inner: Option<&str>) -> String {
    let text = inner.unwrap_or(whole).trim();
    let total = text.chars().count();
    let mut out = String::new();
    for c in text.chars().take(ACTION_MAX_CHARS) {
        if c == '\n' {
            out.push('⏎');
        } else if c.is_control() || bidi_control(c) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    if total > ACTION_MAX_CHARS {
        out.push_str(&format!(
            "… ({} more characters; whole line in the audit log)",
            total - ACTION_MAX_CHARS
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_reordering_never_reach_the_terminal() {
        assert_eq!(clean("x\x1b]2;owned\x07y"), "x?]2;owned?y");
        assert_eq!(clean("a\nb\rc\u{9b}d"), "a?b?c?d");
        assert_eq!(clean("if \u{202e}x\u{2066}"), "if ?x?");
        let b = clean_block("ok\n\x1b[H\x1b[2J\nbad\u{2067}\n", 10, 100);
        assert_eq!(b, "ok\n?[H?[2J\nbad?\n");
        assert!(!b.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn a_block_is_cut_in_lines_and_in_line_length_and_says_how_much_was_left() {
        let text: String = (1..=205).map(|n| format!("line {n}\n")).collect();
        let b = clean_diff(&text);
        assert_eq!(b.lines().count(), DIFF_MAX_LINES + 1);
        assert!(b.starts_with("line 1\n"), "{b}");
        assert!(b.contains("line 200\n") && !b.contains("line 201"), "{b}");
        assert!(b.ends_with("… 5 more lines\n"), "{b}");
        assert_eq!(clean_block("a\nb\n", 1, 10), "a\n… 1 more line\n");
        let long = "x".repeat(DIFF_MAX_LINE_CHARS + 50);
        let b = clean_diff(&long);
        assert_eq!(b.chars().count(), DIFF_MAX_LINE_CHARS + 2, "{b}");
        assert!(b.ends_with("…\n"));
        assert_eq!(clean_diff(""), "");
        assert_eq!(clean_diff("no newline"), "no newline\n");
    }

    #[test]
    fn an_action_shows_its_inner_command_or_is_cut_with_a_count() {
        // Codex's shell snapshot: kilobytes over many lines, no inner command.
        let snapshot: String = (0..170).map(|n| format!("f{n}() {{ :; }}\n")).collect();
        let s = shown_action(&snapshot, None);
        assert!(!s.contains('\n'), "{s}");
        assert!(s.starts_with("f0() { :; }⏎f1()"), "{s}");
        let rest = snapshot.trim().chars().count() - ACTION_MAX_CHARS;
        assert!(
            s.ends_with(&format!(
                "… ({rest} more characters; whole line in the audit log)"
            )),
            "{s}"
        );
        // The command inside the wrapper, whole when short, cut the same way when long.
        let wrapped = "\\builtin shopt -u extglob 2>/dev/null || true && eval 'rm -rf build' < /dev/null && pwd -P >| /tmp/x";
        assert_eq!(shown_action(wrapped, Some("rm -rf build")), "rm -rf build");
        let long = format!("echo {}", "y".repeat(300));
        let s = shown_action(wrapped, Some(&long));
        assert!(
            s.starts_with("echo yyy") && s.contains("105 more characters"),
            "{s}"
        );
        // Short lines are shown whole; control characters never pass.
        assert_eq!(shown_action("cargo test", None), "cargo test");
        assert_eq!(shown_action("a\x1b[2J\u{202e}b", None), "a?[2J?b");
        let exact = "z".repeat(ACTION_MAX_CHARS);
        assert_eq!(shown_action(&exact, None), exact);
    }
}
