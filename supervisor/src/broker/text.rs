//! Text from the agent's side, made safe to show the person: a command line, a path, a reason,
//! the diff of an edit.
//!
//! Everything an ask carries may come from the sandbox (a hook's ask is sent by a process the
//! agent controls), so before it reaches the person's terminal, the inbox or the audit log:
//! - every control character becomes `?`, so no escape sequence can move the cursor, clear
//!   the screen or end the prompt's marker; so does every Unicode bidirectional control
//!   (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which would let a line read in
//!   another order than the one it is written in ("Trojan Source", CVE-2021-42574);
//! - so does every other invisible format character (zero-width spaces and joiners, word
//!   joiners, the byte-order mark, soft hyphen, line and paragraph separators, interlinear
//!   annotations, tag characters), which would let two different names look the same;
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

/// Whether `c` reorders text on display (the Unicode bidirectional formatting characters),
/// or is an invisible format character (Unicode general categories Cf, Zl, Zp that render
/// as nothing: U+00AD, U+180E, U+200B–U+200D, U+2028–U+2029, U+2060–U+2064, U+FEFF,
/// U+FFF9–U+FFFB, U+E0000–U+E007F).
fn bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    ) || matches!(
        c,
        '\u{00ad}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2028}'..='\u{2029}'
            | '\u{2060}'..='\u{2064}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// Whether `c` may not reach the person's terminal as it is: a control character (C0, DEL,
/// C1) or a character of [`bidi_control`].
pub fn unsafe_char(c: char) -> bool {
    c.is_control() || bidi_control(c)
}

/// Lines of text for the person's terminal: as [`clean`], but each line break kept (every
/// other control character, `\r` and tab included, becomes `?`). Every message of tyba's
/// that names a path, a ref or other text from the agent or the repository goes through
/// this before it is printed ([`say`]).
pub fn clean_lines(x: &str) -> String {
    x.split('\n').map(clean).collect::<Vec<_>>().join("\n")
}

/// Writes `line` and a line break on stderr, cleaned by [`clean_lines`]; write errors are
/// ignored (the report is best effort: stderr may be closed).
pub fn say(line: &str) {
    use std::io::Write as _;
    let mut t = clean_lines(line);
    t.push('\n');
    let _ = std::io::stderr().lock().write_all(t.as_bytes());
}

/// One word of a command line for the person to paste into a shell (bash, zsh, or a POSIX
/// shell with `$'…'`, POSIX.1-2024 "Dollar-Single-Quotes"): the word itself when it holds
/// only `A-Za-z0-9_/.,:=@%+-`; else in single quotes (`$(…)`, `;`, spaces are inert there);
/// else, when it holds a character of [`unsafe_char`], in `$'…'` with that character as
/// `\xHH` bytes (its UTF-8), so the printed text has no control character and the shell
/// still reads exactly the word.
///
/// ```
/// use tyba_supervisor::broker::text::shell_word;
/// assert_eq!(shell_word("tyba/x"), "tyba/x");
/// assert_eq!(shell_word("a$(touch p)"), "'a$(touch p)'");
/// assert_eq!(shell_word("it's"), "'it'\\''s'");
/// assert_eq!(shell_word("x\x1b[2J"), "$'x\\x1b[2J'");
/// ```
pub fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_/.,:=@%+-".contains(&b))
    {
        return w.to_string();
    }
    if !w.chars().any(unsafe_char) {
        return format!("'{}'", w.replace('\'', "'\\''"));
    }
    let mut out = String::from("$'");
    for c in w.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if unsafe_char(c) => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
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
    fn invisible_format_characters_and_lines() {
        assert_eq!(clean("a\u{200b}b\u{feff}c\u{2028}d\u{e0041}"), "a?b?c?d?");
        assert_eq!(clean("\u{9b}2J\u{85}"), "?2J?");
        assert_eq!(clean_lines("one\x1b[2J\ntwo\r\t"), "one?[2J\ntwo??");
    }

    /// Each pasted word is read back by a real bash as exactly the word, and runs nothing.
    #[test]
    fn a_shell_word_is_read_back_as_itself_and_runs_nothing() {
        let dir = std::env::temp_dir().join(format!("tyba-shell-word-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for w in [
            "plain",
            "tyba/x$(touch pwned)",
            "`touch pwned`",
            "a'b\"c;touch pwned",
            "x\x1b[2J\x1b[32mFAKE\x1b[0m",
            "\u{9b}31m\u{202e}rev\\'$(touch pwned)",
            "new\nline",
            "",
            "-n",
        ] {
            let q = shell_word(w);
            assert!(!q.chars().any(unsafe_char), "{q:?}");
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("printf %s {q}"))
                .current_dir(&dir)
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), w, "{q}");
            assert!(!dir.join("pwned").exists(), "{q}");
        }
        let _ = std::fs::remove_dir_all(&dir);
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
