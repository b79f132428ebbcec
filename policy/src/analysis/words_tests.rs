//! Unit tests of the word expander, and its baseline against real bash: each case is expanded
//! by tyba and by `bash` (`set -- WORD; printf '%s\0' "$#" "$@"`) with the same variables,
//! home and directories, and the fields must be the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::process::Command;

/// Variables every case may use (assigned the same way in bash).
const VARS: &[(&str, &str)] = &[
    ("s", "hello world"),
    ("p", "/usr/local/lib/file.tar.gz"),
    ("e", ""),
    ("w", "  two  words  "),
    ("g", "*.none"),
    ("n", "name"),
];

/// The home directory the cases expand `~` to.
const HOME: &str = "/home/tyba-words";

struct Setup {
    dir: tempfile::TempDir,
    vars: HashMap<String, VarValues>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let vars = VARS
        .iter()
        .map(|(n, v)| (n.to_string(), vec![Some(v.to_string())]))
        .collect();
    Setup { dir, vars }
}

/// tyba's fields for `word`: `Some(texts)` when every field is known.
fn tyba(s: &Setup, word: &str) -> (Option<Vec<String>>, ExpandNotes) {
    let cwd = s.dir.path().to_path_buf();
    let env = ExpandEnv {
        vars: &s.vars,
        home: Some(Path::new(HOME)),
        cwd: Some(&cwd),
        oldpwd: Some(Path::new("/")),
        params: None,
    };
    let mut notes = ExpandNotes::default();
    let fields = expand(word, &env, &mut notes);
    let known: Option<Vec<String>> = fields.iter().map(Field::known).collect();
    (known, notes)
}

/// Real bash's fields for `word`, run in the case's directory (entered from `/`, so `~-` is
/// `/`) with the same variables and `HOME`.
fn bash(s: &Setup, word: &str) -> Vec<String> {
    let mut script = String::from("cd / && cd \"$1\" || exit 99\n");
    for (n, v) in VARS {
        script.push_str(&format!("{n}='{v}'\n"));
    }
    script.push_str(&format!("set -- {word}\nprintf '%s\\0' \"$#\" \"$@\"\n"));
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &script, "bash"])
        .arg(s.dir.path())
        .env_clear()
        .env("HOME", HOME)
        .env("PATH", "/usr/bin:/bin")
        // `$'\u00e9'` is UTF-8 only in a UTF-8 locale (tyba's words are UTF-8).
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "bash failed on {word:?}: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut parts: Vec<String> = text.split('\0').map(str::to_string).collect();
    parts.pop(); // after the last NUL
    let count: usize = parts.remove(0).parse().unwrap();
    assert_eq!(count, parts.len(), "{word:?}");
    parts
}

/// Words whose every field tyba knows, by the expansion they exercise.
const QUOTES: &[&str] = &[
    "plain",
    "'a b'",
    "\"a b\"",
    "a\\ b",
    "\"a\"'b'c",
    "\"\"",
    "''",
    "a''",
    "\\$s",
    "'$s'",
    "\"\\$s\"",
    "\"a\\\"b\"",
    "\"a\\b\"",
    "$'a\\tb'",
    "$'\\x41\\u00e9\\n'",
    "$'it\\'s'",
    "\"it's\"",
    "'a'\\''b'",
    "\"$s\"",
    "$s",
    "$w",
    "\"$w\"",
    "x$e",
    "\"$e\"",
    "$e",
    "${e}x",
    "$g",
    "\"$g\"",
    "*.none",
    "'*'",
    // bash truncates an ANSI-C string at a NUL.
    "$'ab\\0cd'x",
    "$'\\x00etc'x",
    "$'a\\000b'",
    "$'\\u0000z'",
    "$'\\c@z'",
];

const BRACES: &[&str] = &[
    "{a,b}",
    "x{1..3}",
    "{a,b}{c,d}",
    "{1..10..3}",
    "{a..c}",
    "{3..1}",
    "{x,01..03}",
    "{,x}",
    "{a}",
    "a{b,c}d",
    "{a,{b,c}}",
    "\"{a,b}\"",
    "'{a,b}'",
    "{a,b}$s",
    "\\{a,b}",
    "{}",
];

/// Zero-padded sequences: bash pads them; tyba does not compute the padding.
const BRACES_UNCOMPUTED: &[&str] = &[
    "{01..03}",
    "{1..010..3}",
    "{-01..1}",
    "a{01..2}",
    "{1..03}",
    "{-01..2}",
];

const TILDES: &[&str] = &[
    "~", "~/x", "~root", "~root/x", "x~", "\"~\"", "'~'/x", "\\~", "~+", "~-", "~+/y",
];

const PARAMETERS: &[&str] = &[
    "${s}",
    "${s:-d}",
    "${e:-d}",
    "${s:+alt}",
    "\"${s:-x y}\"",
    "${e:-x y}",
    "${n}_${s}",
    "\"$s\"/\"$n\"",
];

/// Forms whose value tyba takes as every value it may have (the variable's and the
/// default's): bash's fields must be among tyba's.
const PARAMETER_ALTERNATIVES: &[&str] = &["${e-d}", "${e:+alt}", "${s-d}"];

/// Forms tyba does not compute: unknown is right; a known value must be bash's.
const PARAMETERS_UNCOMPUTED: &[&str] = &[
    // Not assigned on the line: the environment may hold it.
    "${u:-d}",
    "${#s}",
    "${#e}",
    "${p#*/}",
    "${p##*/}",
    "${p%.*}",
    "${p%%.*}",
    "${s/o/0}",
    "${s//o/0}",
    "${s/#h/H}",
    "${s/%d/D}",
    "${s^}",
    "${s^^}",
    "${s,,}",
    "${s:1:3}",
    "${s:6}",
    "${s: -5}",
];

/// How tyba's fields must relate to bash's.
#[derive(Clone, Copy, PartialEq)]
enum Expect {
    /// Known and the same fields.
    Same,
    /// Known, and every field bash gives among them.
    Covers,
    /// Unknown, or known and the same.
    SameOrUnknown,
}

fn compare(cases: &[&str], expect: Expect) {
    let s = setup();
    let mut diffs = Vec::new();
    for word in cases {
        let (ours, notes) = tyba(&s, word);
        let theirs = bash(&s, word);
        match (ours, expect) {
            (Some(ours), Expect::Same | Expect::SameOrUnknown) if ours == theirs => {}
            (Some(ours), Expect::Covers) if theirs.iter().all(|f| ours.contains(f)) => {}
            (None, Expect::SameOrUnknown) => {}
            (Some(ours), _) => diffs.push(format!("{word}: tyba {ours:?}, bash {theirs:?}")),
            (None, _) => diffs.push(format!(
                "{word}: tyba does not know it ({notes:?}), bash {theirs:?}"
            )),
        }
    }
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
}

#[test]
fn quote_removal_and_splitting_match_bash() {
    compare(QUOTES, Expect::Same);
}

#[test]
fn brace_expansion_matches_bash() {
    compare(BRACES, Expect::Same);
    compare(BRACES_UNCOMPUTED, Expect::SameOrUnknown);
    let s = setup();
    for w in BRACES_UNCOMPUTED {
        assert!(tyba(&s, w).0.is_none(), "{w}");
    }
}

#[test]
fn tilde_expansion_matches_bash() {
    compare(TILDES, Expect::Same);
}

#[test]
fn parameter_forms_match_bash() {
    compare(PARAMETERS, Expect::Same);
    compare(PARAMETER_ALTERNATIVES, Expect::Covers);
    compare(PARAMETERS_UNCOMPUTED, Expect::SameOrUnknown);
}

/// What bash computes when the line runs is unknown to tyba: never a guess, never empty.
#[test]
fn run_time_values_are_unknown_never_empty() {
    let s = setup();
    for word in [
        "$undefined",
        "\"$undefined\"",
        "$(date)",
        "`id -u`",
        "$RANDOM",
        "${undefined:-x}y",
        "$1",
        "${!n}",
        "a$(pwd)b",
        "$((RANDOM+1))",
    ] {
        let (ours, _) = tyba(&s, word);
        assert!(ours.is_none(), "{word} expanded to {ours:?}");
    }
    // The parts around an unknown stay known.
    let cwd = s.dir.path().to_path_buf();
    let env = ExpandEnv {
        vars: &s.vars,
        home: None,
        cwd: Some(&cwd),
        oldpwd: None,
        params: None,
    };
    let mut notes = ExpandNotes::default();
    let f = expand("pre$(x)post", &env, &mut notes);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].known_prefix(), "pre");
    assert_eq!(notes.substitutions, ["x"]);
    // Without a known home, `~` is unknown, not the literal `~`.
    let mut notes = ExpandNotes::default();
    assert!(expand("~/x", &env, &mut notes)[0].known().is_none());
}

#[test]
fn unquoted_pattern_characters_are_globs_and_quoted_ones_are_not() {
    let s = setup();
    let cwd = s.dir.path().to_path_buf();
    let env = ExpandEnv {
        vars: &s.vars,
        home: None,
        cwd: Some(&cwd),
        oldpwd: None,
        params: None,
    };
    let mut notes = ExpandNotes::default();
    assert!(expand("*.txt", &env, &mut notes)[0].has_glob());
    assert!(expand("$g", &env, &mut notes)[0].has_glob());
    assert!(!expand("'*.txt'", &env, &mut notes)[0].has_glob());
    assert!(!expand("\"$g\"", &env, &mut notes)[0].has_glob());
    assert!(!expand("\\*.txt", &env, &mut notes)[0].has_glob());
}

#[test]
fn ansi_c_escapes_decode() {
    let d = |s: &str| decode_ansi_c(s).unwrap();
    assert_eq!(d("a\\tb"), "a\tb");
    assert_eq!(d("\\x41\\101\\u00e9"), "AAé");
    assert_eq!(d("\\\\"), "\\");
    assert_eq!(d("\\'"), "'");
    // `\xHH` and `\NNN` are bytes (bash keeps the low byte of `\777`): UTF-8 when they
    // spell it, else no text at all.
    assert_eq!(d("\\xc3\\xa9"), "é");
    assert_eq!(d("\\303\\251"), "é");
    assert_eq!(d("\\c\\xff"), "\u{1c}xff");
    for s in [
        "cfg\\xff",
        "cfg\\377",
        "cfg\\777",
        "\\xe9",
        "\\ud800",
        "\\U110000",
        "\\c\u{e9}",
    ] {
        assert_eq!(decode_ansi_c(s), None, "{s}");
    }
    // bash ends the string at a NUL, however it is spelled.
    for s in [
        "ab\\0cd",
        "ab\\x00cd",
        "ab\\u0000cd",
        "ab\\000cd",
        "ab\\c@cd",
    ] {
        assert_eq!(d(s), "ab", "{s}");
    }
    assert!(!zero_padded("{1..10}"));
    assert!(zero_padded("{01..10}") && zero_padded("{1..010}") && zero_padded("{-01..1}"));
}

/// The expansion as the classifier uses it: a NUL in `$'…'` ends the text, so what follows
/// it cannot hide the directory bash really removes.
#[test]
fn a_nul_ends_an_ansi_c_string_in_classification() {
    use crate::{Action, Context, Policy, Verdict};
    let wt = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ctx = Context {
        worktree: wt.path(),
        cwd: wt.path(),
        home: Some(home.path()),
        scratch: None,
        git: None,
    };
    let policy = Policy::embedded_default();
    for line in [
        "rm -rf ~/$'\\0foo'",
        "rm -rf ~/$'\\x00foo'",
        "rm -rf ~/$'\\u0000foo'",
        "rm -rf \"$HOME\"/$'\\000build'",
    ] {
        let c = policy.classify(
            &Action::Exec {
                command: line.to_string(),
            },
            &ctx,
        );
        assert_eq!(c.verdict, Verdict::Blocked, "{line}: {:?}", c.findings);
    }
}

/// `$@`, `$*`, `$#` and `$N` after `set -- PARAMS` (and with none, as an agent's `bash -c
/// LINE` has), against bash: `set -- PARAMS; set -- WORD; printf '%s\0' "$#" "$@"`.
#[test]
fn positional_parameters_match_bash() {
    let s = setup();
    let cwd = s.dir.path().to_path_buf();
    let lists: &[&[&str]] = &[&[], &["a", "b c"], &["", "x"], &["rm", "-rf", "build"]];
    let words = [
        "\"$@\"",
        "$@",
        "\"$*\"",
        "$*",
        "\"$1\"",
        "$2",
        "x\"$@\"y",
        "\"x$@\"",
        "\"$@$@\"",
        "\"$#\"",
        "${1}",
        "\"${@}\"",
        "\"${2}\"",
        "\"$3\"",
        "\"${@:2}\"",
        "${@:1}",
        "\"${@:1:1}\"",
        "\"${*:2}\"",
        "\"${@: -1}\"",
        "\"${@:5}\"",
    ];
    for list in lists {
        let quoted: Vec<String> = list
            .iter()
            .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
            .collect();
        let params = [Some(list.iter().map(|w| w.to_string()).collect::<Vec<_>>())];
        for word in words {
            let script = format!(
                "set -- {}; set -- {word}; printf '%s\\0' \"$#\" \"$@\"",
                quoted.join(" ")
            );
            let out = Command::new("bash")
                .args(["--norc", "--noprofile", "-c", &script, "ZERO"])
                .env_clear()
                .output()
                .expect("bash runs");
            let text = String::from_utf8(out.stdout).unwrap();
            let mut theirs: Vec<String> = text.split('\0').map(str::to_string).collect();
            theirs.pop();
            theirs.remove(0);
            let env = ExpandEnv {
                vars: &s.vars,
                home: None,
                cwd: Some(&cwd),
                oldpwd: None,
                params: Some(&params),
            };
            let mut notes = ExpandNotes::default();
            let ours: Option<Vec<String>> = expand(word, &env, &mut notes)
                .iter()
                .map(Field::known)
                .collect();
            if theirs.iter().any(|t| t.contains("ZERO")) {
                // `$0` (`${@: -1}` of none) is not known to tyba.
                assert_eq!(ours, None, "{word} after set -- {list:?}");
            } else {
                assert_eq!(ours, Some(theirs), "{word} after set -- {list:?}");
            }
        }
    }
    // The line's own: none, and `"$@"` is no field even quoted.
    let env = ExpandEnv {
        vars: &s.vars,
        home: None,
        cwd: Some(&cwd),
        oldpwd: None,
        params: None,
    };
    let mut notes = ExpandNotes::default();
    assert!(expand("\"$@\"", &env, &mut notes).is_empty());
    // A list that cannot be known expands to unknown fields, never to nothing.
    let unknown = [None];
    let env = ExpandEnv {
        params: Some(&unknown),
        ..env
    };
    for word in ["\"$@\"", "$*", "$1", "\"$#\""] {
        let f = expand(word, &env, &mut notes);
        assert!(!f.is_empty() && f.iter().any(|f| !f.is_known()), "{word}");
    }
}

#[test]
fn plain_words_expand_as_the_grammar_expands_them() {
    // Every character the shortcut admits, alone, doubled, beside letters and at a word's
    // start and end; assignments, options, paths, patterns.
    let admitted: Vec<char> = (0u8..128)
        .map(char::from)
        .filter(|c| is_plain(&c.to_string()))
        .collect();
    assert_eq!(
        admitted
            .iter()
            .filter(|c| !c.is_ascii_alphanumeric())
            .count(),
        "_./,:@%+-=*?".len()
    );
    let mut words: Vec<String> = Vec::new();
    for c in &admitted {
        for w in [
            format!("{c}"),
            format!("{c}{c}"),
            format!("a{c}"),
            format!("{c}a"),
            format!("a{c}b"),
            format!("-{c}"),
            format!("x={c}"),
        ] {
            words.push(w);
        }
    }
    words.extend(
        [
            "git",
            "-rf",
            "--all",
            "src/main.rs",
            "*.rs",
            "a?c",
            "PATH=/usr/bin:/bin",
            "--opt=value",
            "user@host:path",
            "100%",
            "a+b",
            "../x/./y",
            "-",
            "--",
        ]
        .map(String::from),
    );
    let s = setup();
    let env = ExpandEnv {
        vars: &s.vars,
        home: Some(Path::new(HOME)),
        cwd: Some(s.dir.path()),
        oldpwd: Some(Path::new("/")),
        params: None,
    };
    for w in &words {
        assert!(is_plain(w), "{w}");
        let (mut fast, mut slow) = (ExpandNotes::default(), ExpandNotes::default());
        let a = expand(w, &env, &mut fast);
        let b = expand_parsed(w, &env, &mut slow);
        assert_eq!(a, b, "{w}");
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{w}");
    }
    // Words the shortcut must leave to the grammar.
    for w in [
        "", "~", "a~", "$x", "'a'", "\"a\"", "a\\b", "{a,b}", "a[b]", "!(x)", "a b", "`x`", "a;b",
        "a&b", "a|b", "<x", "#x", "^x",
    ] {
        assert!(!is_plain(w), "{w}");
    }
    assert!(!is_plain(&"a".repeat(MAX_VALUE_BYTES + 1)));
}
