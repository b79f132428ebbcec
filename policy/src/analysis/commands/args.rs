//! Helpers over a command's argument words: option spellings the judges share, the option
//! words of a wrapper before its command, path-like pieces of one word, quoting.

use super::*;

/// `env`'s options as separate words: clusters split (`-vS x` → `-v -S x`), attached values
/// detached (`-uNAME` → `-u NAME`), `-` read as `-i`; everything from the command on is kept.
pub(super) fn normalize_env_args(args: &[Field]) -> Vec<Field> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(t) = args[i].known() else { break };
        if t == "-" {
            out.push(Field::lit("-i"));
            i += 1;
            continue;
        }
        if t == "--" || !t.starts_with('-') || t.starts_with("--") {
            if t.starts_with("--") && t != "--" {
                out.push(args[i].clone());
                i += 1;
                continue;
            }
            break;
        }
        let letters: Vec<char> = t[1..].chars().collect();
        let mut j = 0;
        while j < letters.len() {
            let c = letters[j];
            out.push(Field::lit(&format!("-{c}")));
            if matches!(c, 'u' | 'C' | 'S') {
                let rest: String = letters[j + 1..].iter().collect();
                if !rest.is_empty() {
                    out.push(Field::lit(&rest));
                } else if let Some(next) = args.get(i + 1) {
                    out.push(next.clone());
                    i += 1;
                }
                break;
            }
            j += 1;
        }
        i += 1;
    }
    out.extend_from_slice(&args[i.min(args.len())..]);
    out
}

/// An option that takes an optional value, in every spelling getopt-style parsers accept:
/// long names and their unambiguous abbreviations (`--open=cmd` for
/// `--open-files-in-pager=cmd`), and short letters inside a cluster with the value attached
/// (`-nOcmd`). Returns `Some(Some(value))` with a value, `Some(None)` without, `None` when `t`
/// is another option. `value_letters` are the cluster's letters that take a value themselves
/// and so end it.
pub(super) fn optional_value_option(
    t: &str,
    letters_of: &[char],
    longs: &[&str],
    min_abbrev: usize,
    value_letters: &str,
) -> Option<Option<String>> {
    if let Some(long) = t.strip_prefix("--") {
        let (name, val) = long
            .split_once('=')
            .map_or((long, None), |(n, v)| (n, Some(v)));
        let hit = name.len() >= min_abbrev && longs.iter().any(|l| l.starts_with(name));
        return hit.then(|| val.map(str::to_string));
    }
    let letters = t.strip_prefix('-')?;
    for (i, c) in letters.char_indices() {
        if letters_of.contains(&c) {
            let rest = &letters[i + c.len_utf8()..];
            return Some((!rest.is_empty()).then(|| rest.to_string()));
        }
        if value_letters.contains(c) {
            return None;
        }
    }
    None
}

/// Whether an `fd` argument starts `-x`/`-X`/`--exec`/`--exec-batch` (also bundled, `-Hx`,
/// attached, `-xrm`, or `--exec=rm`); returns the first word of the command when it is
/// attached to the option.
pub(super) fn fd_exec_start(t: &str) -> Option<Option<String>> {
    optional_value_option(t, &['x', 'X'], &["exec", "exec-batch"], 3, "edEctjSo")
}

/// `git grep`'s `-O[<pager>]`/`--open-files-in-pager[=<pager>]` in any spelling git's option
/// parser accepts: `Some(Some(cmd))` runs a program, `Some(None)` opens the configured pager,
/// `None` is another option.
pub(super) fn git_grep_open_pager(a: &str) -> Option<Option<String>> {
    optional_value_option(a, &['O'], &["open-files-in-pager"], 2, "ABCefm")
}

/// Paths that name the process's own stdin.
pub(super) fn is_stdin_path(t: &str) -> bool {
    matches!(
        t,
        "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/proc/thread-self/fd/0"
    )
}

/// Parses options up to the first operand (the inner command of a wrapper).
pub(super) struct UntilCommand {
    pub(super) opts: Vec<(String, Option<Field>)>,
    pub(super) command_at: usize,
}

pub(super) fn parse_opts_until_command<S: Syntax + ?Sized>(
    args: &[Field],
    spec: &S,
) -> UntilCommand {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(t) = args[i].known() else { break };
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t.len() == 1 {
            break;
        }
        let parsed = parse_opts(&args[i..i + 1], spec);
        let mut consumed_next = false;
        for tok in parsed {
            if let Tok::Opt { name, value } = tok {
                let needs = if let Some(long) = name.strip_prefix("--") {
                    spec.long_value_starts(long) && !t.contains('=')
                } else {
                    name.trim_start_matches('-')
                        .chars()
                        .next()
                        .is_some_and(|c| spec.short_takes_value(c))
                        && value.is_none()
                };
                if needs && value.is_none() {
                    opts.push((name, args.get(i + 1).cloned()));
                    consumed_next = true;
                } else {
                    opts.push((name, value));
                }
            }
        }
        i += if consumed_next { 2 } else { 1 };
    }
    UntilCommand {
        opts,
        command_at: i,
    }
}

/// The words of a field list joined by spaces, when all are known.
pub(super) fn join_known(fields: &[Field]) -> Option<String> {
    let mut parts = Vec::new();
    for f in fields {
        parts.push(f.known()?);
    }
    Some(parts.join(" "))
}

pub(super) fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Path-like pieces of one argument: the operand itself, `--opt=VALUE` values, `key=VALUE`
/// values, attached short-option values that look like paths.
pub(super) fn path_candidates(f: &Field) -> Vec<Field> {
    let Some(t) = f.known() else {
        return vec![f.clone()];
    };
    if let Some(long) = t.strip_prefix("--") {
        return match long.split_once('=') {
            Some((_, v)) if !v.is_empty() => split_colon_list(&Field::lit(v)),
            _ => Vec::new(),
        };
    }
    if t.starts_with('-') && t.len() > 2 {
        // `-opt=VALUE` (go, java -Dk=v) and an attached value anywhere in a cluster
        // (`-cf/tmp/x.tar`, `-o/tmp/x`).
        if let Some((_, v)) = t.split_once('=') {
            return split_colon_list(&Field::lit(unquote(v)));
        }
        // Past the dash and the option letter, which may be any character.
        let v = t.char_indices().nth(2).map_or("", |(i, _)| &t[i..]);
        if let Some(i) = v.find(['/', '~']) {
            return vec![Field::lit(&v[i..])];
        }
        if v.starts_with("..") {
            return vec![Field::lit(v)];
        }
        return Vec::new();
    }
    if t.starts_with('-') {
        return Vec::new();
    }
    if let Some((k, v)) = t.split_once('=') {
        if is_identifier(k)
            || k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return split_colon_list(&Field::lit(unquote(v)));
        }
    }
    vec![f.clone()]
}

/// A value without the quotes of a TOML or shell-in-a-string spelling (`"/tmp/t"`).
pub(super) fn unquote(v: &str) -> &str {
    v.trim_matches(|c| c == '"' || c == '\'')
}

/// `PATH`-like values: each colon-separated absolute element is a path of its own.
pub(super) fn split_colon_list(f: &Field) -> Vec<Field> {
    match f.known() {
        Some(t)
            if t.contains(':')
                && t.split(':')
                    .any(|p| p.starts_with('/') || p.starts_with('~'))
                && !t.contains("://") =>
        {
            t.split(':')
                .filter(|p| !p.is_empty())
                .map(Field::lit)
                .collect()
        }
        _ => vec![f.clone()],
    }
}

/// Single-quotes a word for re-parsing.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
