//! Searches and stream editors: `grep`, `rg`, `jq`, `sed`. Their operands mix patterns,
//! filters or scripts with paths, and some options run programs (`rg --pre`), so each has a
//! judge function beside its entry; the option tables below are their syntax.

use super::options::{names, parse_opts, Opt, Tok};
use super::{ex, Judge, Judgement, Operands, Program};
use crate::analysis::paths::Access;
use crate::analysis::words::Field;
use crate::rules;
use crate::verdict::Verdict::{Green, Red, Yellow};

pub(super) const PROGRAMS: &[Program] = &[
    Program {
        family: "search",
        names: &["grep", "egrep", "fgrep"],
        green: true,
        options: &[
            Opt::val('e', "regexp"),
            Opt::val('f', "file"),
            Opt::val('m', "max-count"),
            Opt::val('A', "after-context"),
            Opt::val('B', "before-context"),
            Opt::val('C', "context"),
            Opt::val('d', "directories"),
            Opt::val('D', "devices"),
            Opt::val('\0', "include"),
            Opt::val('\0', "exclude"),
            Opt::val('\0', "exclude-dir"),
            Opt::val('\0', "exclude-from"),
            Opt::val('\0', "label"),
            Opt::val('\0', "binary-files"),
            Opt::val('\0', "group-separator"),
        ],
        operands: Operands::Read,
        judge: Judge::Fn(judge_grep),
        effects: &[],
        rules: &[rules::CMD_DYNAMIC_ARGS],
        examples: &[
            ex("grep -rn TODO src", Green),
            ex("grep -e foo -f patterns.txt a.txt", Green),
            ex("egrep 'a|b' a.txt", Green),
            ex("fgrep -R x .", Green),
        ],
    },
    Program {
        family: "search",
        names: &["rg"],
        green: true,
        options: &[
            Opt::val('e', "regexp"),
            Opt::val('f', "file"),
            Opt::val('g', "glob"),
            Opt::val('t', "type"),
            Opt::val('T', "type-not"),
            Opt::val('m', "max-count"),
            Opt::val('A', "after-context"),
            Opt::val('B', "before-context"),
            Opt::val('C', "context"),
            Opt::val('j', "threads"),
            Opt::val('M', "max-columns"),
            Opt::val('d', "max-depth"),
            Opt::val('r', "replace"),
            Opt::val('E', "encoding"),
            Opt::val('V', ""),
            Opt::val('\0', "iglob"),
            Opt::val('\0', "type-add"),
            Opt::val('\0', "type-clear"),
            Opt::val('\0', "max-filesize"),
            Opt::val('\0', "ignore-file"),
            Opt::val('\0', "path-separator"),
            Opt::val('\0', "sort"),
            Opt::val('\0', "sortr"),
            Opt::val('\0', "color"),
            Opt::val('\0', "colors"),
            Opt::val('\0', "engine"),
            Opt::val('\0', "field-context-separator"),
            Opt::val('\0', "field-match-separator"),
            Opt::val('\0', "context-separator"),
            Opt::val('\0', "pre"),
            Opt::val('\0', "pre-glob"),
            Opt::val('\0', "hostname-bin"),
            Opt::val('\0', "dfa-size-limit"),
            Opt::val('\0', "regex-size-limit"),
            Opt::val('\0', "hyperlink-format"),
            Opt::val('\0', "generate"),
        ],
        operands: Operands::ReadOrCwd,
        judge: Judge::Fn(judge_rg),
        effects: &[],
        rules: &[
            rules::CMD_NOT_READ_ONLY,
            rules::CMD_PROGRAM_OPTION,
            rules::CMD_DYNAMIC_ARGS,
        ],
        examples: &[
            ex("rg -n TODO", Green),
            ex("rg --files src", Green),
            ex("rg --pre ./filter x", Red),
            ex("rg --hostname-bin=./h x", Red),
            ex("rg -z x", Yellow),
        ],
    },
    Program {
        family: "search",
        names: &["jq"],
        green: true,
        // jq's judge reads its own few value-taking options (`--arg N V` takes two words).
        options: &[],
        operands: Operands::Read,
        judge: Judge::Fn(judge_jq),
        effects: &[],
        rules: &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS],
        examples: &[
            ex("jq .name package.json", Green),
            ex("jq -r --arg k v '.[$k]' a.json", Green),
            ex("jq -n env", Yellow),
            ex("jq 'import \"m\" as m; .' a.json", Yellow),
        ],
    },
    Program {
        family: "search",
        names: &["sed"],
        green: true,
        options: &[
            Opt::val('e', "expression"),
            Opt::val('f', "file"),
            Opt::val('l', "line-length"),
        ],
        operands: Operands::Read,
        judge: Judge::Fn(judge_sed),
        effects: &[],
        rules: &[
            rules::CMD_NOT_READ_ONLY,
            rules::SHELL_DYNAMIC_CODE,
            rules::CMD_DYNAMIC_ARGS,
            rules::INTERP_CODE,
        ],
        examples: &[
            ex("sed -n 1,5p a.txt", Green),
            ex("sed -n '/x/p' a.txt", Green),
            ex("sed -i s/a/b/ a.txt", Yellow),
            ex("sed 1d a.txt", Yellow),
            ex("sed -n '1e id' a.txt", Yellow),
        ],
    },
];

/// `grep`, `egrep`, `fgrep`: the first operand is the pattern unless `-e`/`-f` gave one.
fn judge_grep(p: &Program, _program: &str, args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut have_pattern = false;
    let mut recursive = false;
    let mut follows = false;
    let mut operands = Vec::new();
    for t in parse_opts(args, p.options) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if n == "-e" || names(n, "--regexp") {
                    have_pattern = true;
                } else if n == "-f" || names(n, "--file") || names(n, "--exclude-from") {
                    if n == "-f" || names(n, "--file") {
                        have_pattern = true;
                    }
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                } else if n == "-r" || names(n, "--recursive") {
                    recursive = true;
                } else if n == "-R" || names(n, "--dereference-recursive") {
                    recursive = true;
                    follows = true;
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if !have_pattern {
        it.next();
    }
    j.search_paths(it.collect(), recursive, follows);
    j
}

/// `rg`: `--pre`/`--hostname-bin` run programs (red); `--pre-glob`, `-z` switch on
/// preprocessors (yellow).
fn judge_rg(p: &Program, _program: &str, args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut follows = false;
    let mut have_pattern = false;
    let mut operands = Vec::new();
    for t in parse_opts(args, p.options) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if names(n, "--pre") && !names(n, "--pre-glob") || n == "--pre" {
                    j.red(
                        "cmd.program-option",
                        "`rg --pre` runs a program on every file".to_string(),
                    );
                } else if names(n, "--hostname-bin") {
                    j.red(
                        "cmd.program-option",
                        "`rg --hostname-bin` runs a program".to_string(),
                    );
                } else if names(n, "--pre-glob") {
                    j.not_green("rg", "--pre-glob");
                } else if n == "-z" || names(n, "--search-zip") {
                    j.not_green("rg", "--search-zip (runs decompression programs)");
                } else if n == "-e" || names(n, "--regexp") || n == "--files" || n == "--type-list"
                {
                    // `--files` and `--type-list` take no pattern: every operand is a path.
                    have_pattern = true;
                } else if n == "-L" || n == "--follow" {
                    follows = true;
                } else if n == "-f" || names(n, "--file") || names(n, "--ignore-file") {
                    if n == "-f" || names(n, "--file") {
                        have_pattern = true;
                    }
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if !have_pattern {
        it.next();
    }
    j.search_paths(it.collect(), true, follows);
    j
}

/// `jq`: the filter is not a path; `--rawfile`/`--slurpfile`/`-f`/`-L` values are. A filter
/// that reads the environment (`env`, `$ENV`) prints secrets like `printenv`, and one that
/// loads modules (`import`, `include`) reads files found at run time: neither is green.
fn judge_jq(_p: &Program, _program: &str, args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut filter_from_file = false;
    let mut filter: Option<Field> = None;
    let mut files = Vec::new();
    let mut rest_are_args = false;
    let mut i = 0;
    while i < args.len() {
        let f = &args[i];
        i += 1;
        let t = f.known();
        match t.as_deref() {
            Some("--arg") | Some("--argjson") => i += 2,
            Some("--slurpfile") | Some("--rawfile") => {
                if let Some(p) = args.get(i + 1) {
                    j.path(p.clone(), Access::Read);
                }
                i += 2;
            }
            Some("--from-file") => {
                if let Some(p) = args.get(i) {
                    j.path(p.clone(), Access::Read);
                }
                filter_from_file = true;
                i += 1;
            }
            Some("--indent") => i += 1,
            Some("--args") | Some("--jsonargs") => rest_are_args = true,
            Some(s) if s.starts_with("--") => {}
            Some(s) if s.starts_with("-L") && s.len() > 2 => {
                j.path(Field::lit(&s[2..]), Access::Read)
            }
            // Short clusters: `-f FILE` and `-L DIR` take the next word, wherever in the cluster.
            Some(s) if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    if c == 'f' || c == 'L' {
                        if let Some(p) = args.get(i) {
                            j.path(p.clone(), Access::Read);
                        }
                        filter_from_file |= c == 'f';
                        i += 1;
                    }
                }
            }
            // The first positional word is the filter (even after `--args`); after `--args`
            // the others are arguments, not files.
            _ if filter.is_none() && !filter_from_file => filter = Some(f.clone()),
            _ if rest_are_args => {}
            _ => files.push(f.clone()),
        }
    }
    if let Some(filter) = filter {
        let text = filter.known().unwrap_or_default();
        let squeezed = text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace("$ ", "$");
        let words: Vec<&str> = squeezed
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .collect();
        if squeezed.contains("$ENV") || words.contains(&"env") {
            j.not_green("jq", "a filter that reads the environment");
        }
        if words.contains(&"import") || words.contains(&"include") || words.contains(&"modulemeta")
        {
            j.not_green("jq", "a filter that loads modules from files");
        }
    }
    for f in files {
        j.path(f, Access::Read);
    }
    j
}

/// `sed`: green only as `sed -n` whose script prints (`p`, addressed by line numbers, ranges or
/// regular expressions). `-i` writes; `e`, `w`, `W`, `r`, `R` and every other command are not
/// read-only.
fn judge_sed(p: &Program, _program: &str, args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut quiet = false;
    let mut scripts: Vec<Option<String>> = Vec::new();
    let mut operands = Vec::new();
    let mut in_place = false;
    let mut script_file = false;
    for t in parse_opts(args, p.options) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if n == "-n" || names(n, "--quiet") || names(n, "--silent") {
                    quiet = true;
                } else if n == "-e" || names(n, "--expression") {
                    scripts.push(value.and_then(|v| v.known()));
                } else if n == "-f" || names(n, "--file") {
                    script_file = true;
                    j.not_green("sed", "a script file");
                    // Its text is not on the line: it may run commands (`e`) or write files.
                    j.findings.push(crate::Finding::new(
                        Yellow,
                        rules::INTERP_CODE.id,
                        "`sed -f` runs a script file that tyba does not analyse (it can run commands and write files)".to_string(),
                    ));
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                } else if n == "-i" || names(n, "--in-place") {
                    in_place = true;
                } else if matches!(n, "-E" | "-r" | "-s" | "-u" | "-z" | "-l")
                    || names(n, "--regexp-extended")
                    || names(n, "--separate")
                    || names(n, "--unbuffered")
                    || names(n, "--null-data")
                    || names(n, "--posix")
                    || names(n, "--debug")
                    || names(n, "--follow-symlinks")
                    || names(n, "--line-length")
                {
                } else {
                    j.not_green("sed", &format!("option `{n}`"));
                }
            }
            Tok::DynamicOpt => j.not_green("sed", "a dynamic option"),
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if scripts.is_empty() && !script_file {
        scripts.push(it.next().and_then(|f| f.known()));
    }
    let files: Vec<Field> = it.collect();
    if in_place {
        j.not_green("sed", "-i (edits files in place)");
    }
    // An in-place edit by a script tyba reads through and that runs nothing: sed saves each
    // file through a temporary copy beside it (`Classification::saved`).
    j.saves = in_place
        && !script_file
        && !scripts.is_empty()
        && scripts
            .iter()
            .all(|s| s.as_deref().and_then(sed_effects).is_some_and(|e| !e.runs));
    if !quiet {
        j.not_green("sed", "a script that is not `-n` printing");
    }
    for s in &scripts {
        match s {
            Some(s) if sed_prints_only(s) => {}
            Some(_) => j.not_green("sed", "a script that does more than print"),
            None => j.not_green("sed", "a script that cannot be known"),
        }
        let Some(s) = s else { continue };
        match sed_effects(s) {
            Some(e) => {
                if e.runs {
                    j.findings.push(crate::Finding::new(
                        Yellow,
                        rules::INTERP_CODE.id,
                        "the sed script runs commands (`e`)".to_string(),
                    ));
                }
                for w in e.writes.into_iter().filter(|w| !w.is_empty()) {
                    j.path(Field::lit(&w), Access::Write);
                }
                for r in e.reads.into_iter().filter(|r| !r.is_empty()) {
                    j.path(Field::lit(&r), Access::Read);
                }
            }
            None => j.findings.push(crate::Finding::new(
                Yellow,
                rules::INTERP_CODE.id,
                "a sed script tyba cannot read through (it may run commands or write files)"
                    .to_string(),
            )),
        }
    }
    for f in files {
        j.path(
            f,
            if in_place {
                Access::Write
            } else {
                Access::Read
            },
        );
    }
    // A script word that cannot be known among nothing but options: the script itself.
    if args.iter().any(|a| !a.is_known())
        && args
            .iter()
            .all(|a| a.known().is_none_or(|t| t.starts_with('-')))
    {
        j.opaque.push(("sed", "a sed script that cannot be known"));
    }
    j
}

/// What a sed script does besides editing its input, by its commands (GNU sed's grammar:
/// `info sed`, "sed scripts"): [`sed_effects`].
#[derive(Debug, Default, PartialEq, Eq)]
struct SedEffects {
    /// It runs commands: the `e` command, or `s///` with the `e` flag.
    runs: bool,
    /// Files it writes: `w FILE`, `W FILE`, `s///w FILE`.
    writes: Vec<String>,
    /// Files it reads: `r FILE`, `R FILE`.
    reads: Vec<String>,
}

/// The effects of a sed script, or `None` when it cannot be read through (a command tyba
/// does not know, an unterminated `s`, `y` or address): such a script may do anything.
fn sed_effects(script: &str) -> Option<SedEffects> {
    let b = script.as_bytes();
    let mut out = SedEffects::default();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t') {
            *i += 1;
        }
    };
    // The rest of the line, for `a i c r R w W e : b t T` and a `s///w` file.
    let rest_of_line = |i: &mut usize| -> String {
        let start = *i;
        while *i < b.len() && b[*i] != b'\n' {
            *i += 1;
        }
        String::from_utf8_lossy(&b[start..*i]).trim().to_string()
    };
    // A delimited part (`/re/`, the parts of `s` and `y`), from just after its opening
    // delimiter to just after its closing one; `false` when unterminated.
    let delimited = |i: &mut usize, d: u8| -> bool {
        while *i < b.len() && b[*i] != d {
            if b[*i] == b'\\' {
                *i += 1;
            }
            *i += 1;
        }
        if *i >= b.len() {
            return false;
        }
        *i += 1;
        true
    };
    loop {
        skip_ws(&mut i);
        while i < b.len() && matches!(b[i], b';' | b'\n' | b' ' | b'\t' | b'{' | b'}') {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        // Addresses: up to two, then `!`.
        for n in 0..2 {
            skip_ws(&mut i);
            match b.get(i) {
                Some(b'0'..=b'9') => {
                    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'~') {
                        i += 1;
                    }
                }
                Some(b'$') => i += 1,
                Some(b'+' | b'~') if n == 1 => {
                    i += 1;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                Some(b'/') => {
                    i += 1;
                    if !delimited(&mut i, b'/') {
                        return None;
                    }
                    while i < b.len() && matches!(b[i], b'I' | b'M') {
                        i += 1;
                    }
                }
                Some(b'\\') => {
                    let d = *b.get(i + 1)?;
                    i += 2;
                    if !delimited(&mut i, d) {
                        return None;
                    }
                    while i < b.len() && matches!(b[i], b'I' | b'M') {
                        i += 1;
                    }
                }
                _ => {}
            }
            skip_ws(&mut i);
            if n == 0 && b.get(i) == Some(&b',') {
                i += 1;
            } else {
                break;
            }
        }
        skip_ws(&mut i);
        while b.get(i) == Some(&b'!') {
            i += 1;
            skip_ws(&mut i);
        }
        let Some(&c) = b.get(i) else {
            return Some(out);
        };
        i += 1;
        match c {
            b'{' | b'}' | b';' | b'\n' => {}
            b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p' | b'P' | b'x'
            | b'z' | b'F' => {}
            b'l' | b'L' | b'q' | b'Q' => {
                skip_ws(&mut i);
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            b'a' | b'i' | b'c' => {
                // Text: to the end of the line, a `\` at its end continuing it.
                // An odd number of backslashes at its end continues it (`\\\\` is one).
                loop {
                    rest_of_line(&mut i);
                    let escapes = b[..i].iter().rev().take_while(|c| **c == b'\\').count();
                    if i < b.len() && escapes % 2 == 1 {
                        i += 1;
                        continue;
                    }
                    break;
                }
            }
            b'#' => {
                // A comment: to the end of the line, never further.
                rest_of_line(&mut i);
            }
            b':' | b'v' | b'b' | b't' | b'T' => {
                // A label or a version: one word, to the next blank, `;` or line (GNU sed 4.9
                // ends them there: `:x;1e id` and `:x 1e id` run `id`, reviews 13 and 14).
                skip_ws(&mut i);
                while i < b.len() && !matches!(b[i], b';' | b'\n' | b'}' | b' ' | b'\t') {
                    i += 1;
                }
            }
            b'r' | b'R' => out.reads.push(rest_of_line(&mut i)),
            b'w' | b'W' => out.writes.push(rest_of_line(&mut i)),
            b'e' => {
                out.runs = true;
                rest_of_line(&mut i);
            }
            b's' | b'y' => {
                let d = *b.get(i)?;
                if matches!(d, b'\n' | b'\\') {
                    return None;
                }
                i += 1;
                if !delimited(&mut i, d) || !delimited(&mut i, d) {
                    return None;
                }
                if c == b'y' {
                    continue;
                }
                // The flags of `s`: `w FILE` ends the command at the end of the line.
                while let Some(&f) = b.get(i) {
                    match f {
                        b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9' => i += 1,
                        b'e' => {
                            out.runs = true;
                            i += 1;
                        }
                        b'w' => {
                            i += 1;
                            out.writes.push(rest_of_line(&mut i));
                        }
                        _ => break,
                    }
                }
            }
            _ => return None,
        }
    }
}

/// Whether a sed script only prints: commands separated by `;` or newlines, each an optional
/// address (number, `$`, `/re/`, `\cREc`) or range, optional `!`, then `p`.
fn sed_prints_only(script: &str) -> bool {
    let b = script.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t') {
            *i += 1;
        }
    };
    let address = |i: &mut usize| -> bool {
        if *i >= b.len() {
            return true;
        }
        match b[*i] {
            b'0'..=b'9' => {
                while *i < b.len() && (b[*i].is_ascii_digit() || b[*i] == b'~') {
                    *i += 1;
                }
                true
            }
            b'$' => {
                *i += 1;
                true
            }
            b'/' | b'\\' => {
                let delim = if b[*i] == b'\\' {
                    *i += 1;
                    match b.get(*i) {
                        Some(d) => *d,
                        None => return false,
                    }
                } else {
                    b'/'
                };
                *i += 1;
                while *i < b.len() && b[*i] != delim {
                    if b[*i] == b'\\' {
                        *i += 1;
                    }
                    *i += 1;
                }
                if *i >= b.len() {
                    return false;
                }
                *i += 1;
                while *i < b.len() && (b[*i] == b'I' || b[*i] == b'M') {
                    *i += 1;
                }
                true
            }
            _ => true,
        }
    };
    let mut saw_command = false;
    loop {
        skip_ws(&mut i);
        while i < b.len() && (b[i] == b';' || b[i] == b'\n') {
            i += 1;
            skip_ws(&mut i);
        }
        if i >= b.len() {
            return saw_command;
        }
        if !address(&mut i) {
            return false;
        }
        skip_ws(&mut i);
        if i < b.len() && b[i] == b',' {
            i += 1;
            skip_ws(&mut i);
            if i < b.len() && (b[i] == b'+' || b[i] == b'~') {
                i += 1;
            }
            if !address(&mut i) {
                return false;
            }
            skip_ws(&mut i);
        }
        if i < b.len() && b[i] == b'!' {
            i += 1;
            skip_ws(&mut i);
        }
        if i < b.len() && b[i] == b'p' {
            i += 1;
            saw_command = true;
            skip_ws(&mut i);
            if i < b.len() && b[i] != b';' && b[i] != b'\n' {
                return false;
            }
        } else {
            return false;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sed_print_scripts() {
        for s in [
            "1,5p", "p", "/foo/p", "$p", "10,$p", "1p;3p", "/a/,/b/p", "2!p", "\\,x,p",
        ] {
            assert!(sed_prints_only(s), "{s}");
        }
        for s in [
            "1e id",
            "w out",
            "1,5w /tmp/x",
            "s/a/b/",
            "p;e id",
            "",
            "1r /etc/passwd",
            "1,5pw x",
        ] {
            assert!(!sed_prints_only(s), "{s}");
        }
    }

    fn judge(line: &str) -> Judgement {
        let words: Vec<&str> = line.split_whitespace().collect();
        let entry = super::super::lookup(words[0]).unwrap();
        let args: Vec<Field> = words[1..].iter().map(|w| Field::lit(w)).collect();
        entry.judge(words[0], &args)
    }

    fn paths(j: &Judgement) -> Vec<String> {
        j.paths.iter().filter_map(|(f, _)| f.known()).collect()
    }

    fn rules(j: &Judgement) -> Vec<&str> {
        j.findings.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn grep_reads_its_operands_after_the_pattern() {
        assert_eq!(paths(&judge("grep foo a b")), ["a", "b"]);
        assert_eq!(paths(&judge("grep -e foo a")), ["a"]);
        assert_eq!(paths(&judge("grep -f pats a")), ["pats", "a"]);
        assert_eq!(paths(&judge("egrep -A 3 foo a")), ["a"]);
        let j = judge("grep -r foo");
        assert!(j.reads_cwd && j.follows_links.is_none());
        assert!(judge("grep -R foo src").follows_links.is_some());
        assert!(judge("grep foo a").findings.is_empty());
    }

    #[test]
    fn rg_options_that_run_programs_are_red() {
        assert_eq!(rules(&judge("rg --pre ./f x")), ["cmd.program-option"]);
        // `--pr` is ambiguous (`--pre`, `--pre-glob`): not green either way.
        assert_eq!(rules(&judge("rg --pr=./f x")), ["cmd.not-read-only"]);
        assert_eq!(
            rules(&judge("rg --hostname-bin=h x")),
            ["cmd.program-option"]
        );
        assert_eq!(
            rules(&judge("rg --pre-glob '*.gz' x")),
            ["cmd.not-read-only"]
        );
        assert_eq!(rules(&judge("rg -z x")), ["cmd.not-read-only"]);
        assert_eq!(paths(&judge("rg --files src")), ["src"]);
        assert!(judge("rg x").reads_cwd);
        assert!(judge("rg -L x").follows_links.is_some());
    }

    #[test]
    fn jq_filters_are_not_paths_and_env_is_not_green() {
        assert_eq!(paths(&judge("jq .a f.json")), ["f.json"]);
        assert_eq!(
            paths(&judge("jq --rawfile v secret .a f.json")),
            ["secret", "f.json"]
        );
        assert_eq!(paths(&judge("jq -f prog.jq f.json")), ["prog.jq", "f.json"]);
        assert!(paths(&judge("jq -n --args .a x y")).is_empty());
        assert_eq!(rules(&judge("jq -n env")), ["cmd.not-read-only"]);
        assert_eq!(rules(&judge("jq -n $ENV.HOME")), ["cmd.not-read-only"]);
        assert!(judge("jq .environment f").findings.is_empty());
    }

    #[test]
    fn sed_is_green_only_printing() {
        assert!(judge("sed -n 1,5p a").findings.is_empty());
        assert!(!judge("sed -n 1,5p -i a").findings.is_empty());
        assert!(!judge("sed s/a/b/ a").findings.is_empty());
        assert_eq!(paths(&judge("sed -n p a b")), ["a", "b"]);
        let unknown = judge_sed(
            super::super::lookup("sed").unwrap(),
            "sed",
            &[Field::lit("-n"), Field::unknown()],
        );
        assert_eq!(unknown.opaque.len(), 1);
    }

    /// What a sed script does besides editing (review 12's r12-05: `sed -i -f FILE` and
    /// `1e CMD` ran commands under an approval that showed only an in-place edit): commands
    /// (`e`, `s///e`), files written (`w`, `W`, `s///w`) and read (`r`, `R`); a script tyba
    /// cannot read through may do anything.
    #[test]
    fn sed_scripts_that_run_commands_or_write_files_are_known() {
        let plain = Some(SedEffects::default());
        for s in [
            "s/a/b/",
            "s/hello/bye/g",
            "1d;$d",
            "/^oldhost /d",
            "y/abc/xyz/",
            "/x/{s/a/b/;p}",
            "1a hello; e id",
            "s|e|f|2",
            "0,/re/I s/x/y/",
        ] {
            assert_eq!(sed_effects(s), plain, "{s}");
        }
        for s in [
            "1e id",
            "s/a/b/e",
            "/x/e",
            "s/a/b/ge",
            "1d\n2e printf x > f",
            // A label or a version ends at `;`, a comment at the line's end, whatever
            // precedes it (review 13's r13-02).
            ":x;1e id",
            "v;1e id",
            "b end;1e id",
            ":x 1e id",
            "v 4.2 1e id",
            "s/a/b/;tx;:x 1e id",
            "$a tidy\\\\\n1e id",
            "# note \\\n1e id",
        ] {
            assert!(sed_effects(s).is_some_and(|e| e.runs), "{s}");
        }
        assert_eq!(
            sed_effects("s/a/b/w out.txt").map(|e| e.writes),
            Some(vec!["out.txt".to_string()])
        );
        assert_eq!(
            sed_effects("/x/W log\nr other").map(|e| (e.writes, e.reads)),
            Some((vec!["log".to_string()], vec!["other".to_string()]))
        );
        for s in ["s/a", "k", "y/ab/", "\\"] {
            assert_eq!(sed_effects(s), None, "{s}");
        }
        // In the judgement: code that runs is `interp.code`, a written file a write.
        assert!(rules(&judge("sed -i 1e\\ id a")).contains(&"interp.code"));
        assert!(rules(&judge("sed -i -f fix.sed a")).contains(&"interp.code"));
        assert!(!rules(&judge("sed -i s/a/b/ a")).contains(&"interp.code"));
        // Only an in-place edit by a script that runs nothing saves through copies.
        assert!(judge("sed -i s/a/b/ a").saves);
        assert!(!judge("sed -i 1e\\ id a").saves);
        assert!(!judge("sed -i -f fix.sed a").saves);
        assert!(!judge("sed s/a/b/ a").saves);
    }
}
