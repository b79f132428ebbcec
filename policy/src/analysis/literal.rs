//! The words of a line made only of plain commands ([`literal_commands`]).

use brush_parser::ast;

/// The simple commands of `line` with their words after quote removal, when the line is
/// only pipelines and lists (`|`, `&&`, `||`, `;`) of simple commands whose words are all
/// literal: no expansion (`$`, backquotes, `~`, globs, braces), no escapes, no assignment,
/// redirection, background job, subshell or compound command. `None` for anything else, so
/// a caller matching known words can never be fooled by text that means something else to
/// bash. Two words are kept as written although they expand: `$PPID` and `$$`, which the
/// shell sets to a process id (one word, digits only) whatever the environment says.
pub(crate) fn literal_commands(line: &str) -> Option<Vec<Vec<String>>> {
    let prog = super::parse(line).ok()?;
    let mut out = Vec::new();
    for cc in &prog.complete_commands {
        for item in &cc.0 {
            if matches!(item.1, ast::SeparatorOperator::Async) {
                return None;
            }
            let aol = &item.0;
            let mut pipes = vec![&aol.first];
            for a in &aol.additional {
                match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => pipes.push(p),
                }
            }
            for p in pipes {
                if p.timed.is_some() || p.bang {
                    return None;
                }
                for c in &p.seq {
                    let ast::Command::Simple(s) = c else {
                        return None;
                    };
                    if s.prefix.is_some() {
                        return None;
                    }
                    let mut words = vec![unquote(&s.word_or_name.as_ref()?.value)?];
                    for i in s.suffix.iter().flat_map(|x| &x.0) {
                        match i {
                            // After the command name `k=v` is an argument like any other.
                            ast::CommandPrefixOrSuffixItem::Word(w)
                            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                                words.push(unquote(&w.value)?)
                            }
                            _ => return None,
                        }
                    }
                    out.push(words);
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A word's text after quote removal when nothing in it expands: plain characters, and
/// single- or double-quoted text without `$`, backquotes or backslashes.
fn unquote(raw: &str) -> Option<String> {
    if raw == "$PPID" || raw == "$$" {
        return Some(raw.to_string());
    }
    let mut out = String::new();
    let mut chars = raw.chars();
    let mut first = true;
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '$' | '`' | '\\' => return None,
                    c => out.push(c),
                }
            },
            '~' if first => return None,
            c if c.is_ascii_alphanumeric() || "-_./=:@%+,^".contains(c) => out.push(c),
            _ => return None,
        }
        first = false;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn w(v: &[&[&str]]) -> Option<Vec<Vec<String>>> {
        Some(
            v.iter()
                .map(|c| c.iter().map(|s| s.to_string()).collect())
                .collect(),
        )
    }

    #[test]
    fn plain_pipelines_and_lists_give_their_words() {
        assert_eq!(
            literal_commands(r#"ps aux | grep -E "code|cursor|idea" | grep -v grep"#),
            w(&[
                &["ps", "aux"],
                &["grep", "-E", "code|cursor|idea"],
                &["grep", "-v", "grep"]
            ])
        );
        assert_eq!(
            literal_commands("ps -o comm= -p 13 && echo 'a b'; true || false"),
            w(&[
                &["ps", "-o", "comm=", "-p", "13"],
                &["echo", "a b"],
                &["true"],
                &["false"]
            ])
        );
    }

    #[test]
    fn anything_that_expands_or_redirects_is_not_literal() {
        assert_eq!(
            literal_commands("ps -o comm= -p $PPID"),
            w(&[&["ps", "-o", "comm=", "-p", "$PPID"]])
        );
        for line in [
            "ps -o comm= -p $PPIDX",
            "ps -o comm= -p \"$PPID\"x",
            "ps -o comm= -p ${PPID}",
            "ps aux > /tmp/x",
            "ps aux | grep \"$HOME\"",
            "echo `id`",
            "echo $(id)",
            "ls ~/x",
            "ls *.rs",
            "ls {a,b}",
            "X=1 ps",
            "ps aux &",
            "(ps aux)",
            "{ ps aux; }",
            "! ps",
            "echo a\\ b",
            "ps aux | while read l; do rm -rf /; done",
            "",
            "ps 'unterminated",
        ] {
            assert_eq!(literal_commands(line), None, "{line}");
        }
    }
}
