//! `!` shell aliases (git-config(1), `alias.*`): git runs `sh -c '<text> "$@"'` with the
//! remaining words as arguments. The text is split into simple commands at unquoted `;`, `&`,
//! `|` and newlines; each is split into words with a POSIX splitter; a command whose program is
//! `git` is inspected like any invocation. Anything the guard cannot see through (substitutions,
//! expansions, nested shells) that mentions a push or the hook configuration is blocked.

use crate::inspect::{analyze, Analysis, RULE_UNRESOLVED};
use std::path::Path;

/// Splits shell text into simple-command texts at unquoted `;`, `&`, `|`, newlines and
/// parentheses; `None` when quotes are unbalanced.
fn segments(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == '\\' && q == '"' {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '\\' => {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                ';' | '&' | '|' | '\n' | '(' | ')' => {
                    out.push(std::mem::take(&mut cur));
                }
                _ => cur.push(c),
            },
        }
    }
    if quote.is_some() {
        return None;
    }
    out.push(cur);
    Some(out.into_iter().filter(|s| !s.trim().is_empty()).collect())
}

fn mentions_guarded(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "push",
        "send-pack",
        "hookspath",
        "hook.",
        "no-verify",
        "config",
        "include",
    ]
    .iter()
    .any(|k| t.contains(k))
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((n, _)) => {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Substitutes `$1`…`$9`, `$@`, `"$@"` and `$*` with the alias's arguments when every argument
/// is a plain word; leaves the text alone otherwise.
fn substitute_positional(text: &str, args: &[String]) -> String {
    let mut s = text.replace("\"$@\"", &args.join(" "));
    s = s
        .replace("$@", &args.join(" "))
        .replace("$*", &args.join(" "));
    for i in (1..=9).rev() {
        let v = args.get(i - 1).cloned().unwrap_or_default();
        s = s
            .replace(&format!("${{{i}}}"), &v)
            .replace(&format!("${i}"), &v);
    }
    s
}

/// Inspects the commands of a shell alias run with `args`.
pub(crate) fn analyze_shell(
    text: &str,
    args: &[String],
    env: &[(String, String)],
    cwd: &Path,
    protected: &[String],
    depth: usize,
) -> Analysis {
    let mut a = Analysis::default();
    let plain_args = args.iter().all(|w| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:+^@=~".contains(c))
    });
    let mut full = if plain_args {
        substitute_positional(text, args)
    } else {
        text.to_string()
    };
    if !args.is_empty() && plain_args {
        // git appends "$@" to the text
        full.push(' ');
        full.push_str(&args.join(" "));
    }
    let opaque = |a: &mut Analysis, why: &str| {
        let f = crate::inspect::blocked(
            RULE_UNRESOLVED,
            &format!("shell alias `{text}`: {why}; it mentions a push or the hook configuration"),
        );
        if !a.findings.contains(&f) {
            a.findings.push(f);
        }
    };
    if !plain_args && mentions_guarded(text) {
        opaque(&mut a, "arguments the guard cannot substitute");
    }
    let Some(segs) = segments(&full) else {
        if mentions_guarded(text) {
            opaque(&mut a, "unbalanced quotes");
        }
        return a;
    };
    for seg in segs {
        if seg.contains('$')
            || seg.contains('`')
            || seg.contains('<')
            || seg.contains('>')
            || seg.contains('{')
        {
            if mentions_guarded(&seg) {
                opaque(&mut a, "expansions the guard cannot see through");
            }
            continue;
        }
        let Some(words) = shlex::split(&seg) else {
            if mentions_guarded(&seg) {
                opaque(&mut a, "words the guard cannot split");
            }
            continue;
        };
        let mut seg_env: Vec<(String, String)> = env.to_vec();
        let mut k = 0;
        while k < words.len() && is_assignment(&words[k]) {
            if let Some((n, v)) = words[k].split_once('=') {
                seg_env.push((n.to_string(), v.to_string()));
            }
            k += 1;
        }
        let Some(prog) = words.get(k) else { continue };
        let base = prog.rsplit('/').next().unwrap_or(prog);
        if base == "git" {
            let sub = analyze(&words[k + 1..], &seg_env, cwd, protected, depth + 1);
            a.merge(sub);
        } else if matches!(
            base,
            "exec"
                | "command"
                | "env"
                | "sudo"
                | "nice"
                | "nohup"
                | "time"
                | "xargs"
                | "sh"
                | "bash"
                | "dash"
                | "zsh"
                | "eval"
        ) && mentions_guarded(&seg)
        {
            opaque(&mut a, "a wrapper or nested shell");
        }
    }
    a
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn splits_segments() {
        assert_eq!(
            segments("git fetch && git push origin 'a;b'").unwrap(),
            vec!["git fetch ", " git push origin 'a;b'"]
        );
        assert!(segments("git push 'x").is_none());
    }
}
