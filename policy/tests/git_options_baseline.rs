//! The git option engine (`tyba_policy::git_options`) against the real git: the
//! parse-options dialect against `git rev-parse --parseopt` (git's own parser fed our
//! tables), the tables against `git <cmd> -h` and `git <cmd> --git-completion-helper-all`,
//! and the global options against real git commands on a temporary repository, their effect
//! (a tag created or not) checked from outside.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use tyba_policy::git_options::{
    parse, parse_global, Arg, GlobalArg, GlobalEnd, Parsed, Spec, CLEAN_OPTIONS, GLOBAL_OPTIONS,
    PUSH_OPTIONS,
};

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat");
    c
}

/// A repository with one commit.
fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let ok = git(t.path())
        .args(["init", "-q"])
        .status()
        .unwrap()
        .success()
        && git(t.path())
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ])
            .status()
            .unwrap()
            .success();
    assert!(ok);
    t
}

/// `table` written as a `git rev-parse --parseopt` specification (aliases left out: the
/// specification cannot say them).
fn parseopt_spec(table: &[Spec]) -> String {
    let mut s = String::from("t [options]\n--\n");
    for o in table.iter().filter(|o| o.alias_of.is_none()) {
        let mut name = String::new();
        if let Some(c) = o.short {
            name.push(c);
            if !o.long.is_empty() {
                name.push(',');
            }
        }
        name.push_str(o.long);
        match o.arg {
            Arg::None => {}
            Arg::Required => name.push('='),
            Arg::Optional => name.push('?'),
        }
        if !o.negatable {
            name.push('!');
        }
        s.push_str(&format!("{name}  an option\n"));
    }
    s
}

/// What git's parser prints for `words` (`set -- …` with `--stuck-long`), or `None` when it
/// dies with a usage message.
fn git_parseopt(spec: &str, words: &[String]) -> Option<String> {
    let mut child = Command::new("git")
        .args(["rev-parse", "--parseopt", "--stuck-long", "--"])
        .args(words)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(spec.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    match out.status.code() {
        Some(0) => Some(
            String::from_utf8(out.stdout)
                .unwrap()
                .trim_end()
                .to_string(),
        ),
        Some(129) => None,
        other => panic!("git rev-parse --parseopt {words:?} exited {other:?}"),
    }
}

/// Our parse written the way `git rev-parse --parseopt --stuck-long` prints one.
fn render(p: &Parsed) -> String {
    let mut s = String::from("set --");
    for o in &p.options {
        s.push(' ');
        if o.long.is_empty() {
            s.push('-');
            s.push(o.short.unwrap());
        } else {
            s.push_str(if o.unset { "--no-" } else { "--" });
            s.push_str(o.long);
        }
        if let Some(v) = &o.value {
            if !o.long.is_empty() {
                s.push('=');
            }
            s.push_str(&format!("'{v}'"));
        }
    }
    s.push_str(" --");
    for w in &p.operands {
        s.push_str(&format!(" '{w}'"));
    }
    s
}

/// Spellings of every option of `table`: full, each abbreviation, negated, with `=value`,
/// short letters alone, stuck to a value and clustered, among operands and after `--` and
/// `--end-of-options`.
fn spellings(table: &[Spec]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let one = |w: &str| vec![w.to_string()];
    for o in table.iter().filter(|o| !o.long.is_empty()) {
        for n in 1..=o.long.len() {
            let p = &o.long[..n];
            for w in [
                format!("--{p}"),
                format!("--no-{p}"),
                format!("--{p}=v"),
                format!("--no-{p}=v"),
            ] {
                out.push(one(&w));
                out.push(vec![w.clone(), "val".into(), "op".into()]);
            }
        }
        if let Some(rest) = o.long.strip_prefix("no-") {
            out.push(one(&format!("--{rest}")));
        }
    }
    for p in ["--n", "--no", "--no-"] {
        out.push(one(p));
    }
    let shorts: Vec<char> = table.iter().filter_map(|o| o.short).collect();
    for &a in &shorts {
        out.push(one(&format!("-{a}")));
        out.push(vec![format!("-{a}"), "val".into(), "op".into()]);
        out.push(one(&format!("-{a}val")));
        for &b in &shorts {
            out.push(vec![format!("-{a}{b}"), "op".into()]);
        }
    }
    let first = table.iter().find(|o| !o.long.is_empty()).unwrap();
    for end in ["--", "--end-of-options"] {
        out.push(vec![
            "op".into(),
            format!("--{}", first.long),
            end.into(),
            format!("--{}", first.long),
            "-x".into(),
        ]);
    }
    out.push(vec!["-".into(), "op".into()]);
    out
}

fn dialect_matches_git(table: &[Spec]) {
    let table: Vec<Spec> = table
        .iter()
        .copied()
        .filter(|o| o.alias_of.is_none())
        .collect();
    let spec = parseopt_spec(&table);
    let mut checked = 0;
    for words in spellings(&table) {
        // `-h` is git's help in every table; rev-parse prints the usage on stdout for it.
        if words.iter().any(|w| w == "-h" || w.starts_with("--h")) {
            continue;
        }
        let ours = parse(&words, &table).ok().map(|p| render(&p));
        let theirs = git_parseopt(&spec, &words);
        assert_eq!(ours, theirs, "{words:?}");
        checked += 1;
    }
    assert!(checked > 50, "only {checked} spellings checked");
}

#[test]
fn negations_of_no_options_parse_as_git_parses_them() {
    use tyba_policy::git_options::opt;
    for long in ["no-verify", "nonsense", "notify"] {
        dialect_matches_git(&[
            opt(None, long, Arg::None),
            opt(Some('f'), "force", Arg::None),
        ]);
    }
}

#[test]
fn push_options_parse_as_git_parses_them() {
    dialect_matches_git(PUSH_OPTIONS);
}

#[test]
fn clean_options_parse_as_git_parses_them() {
    dialect_matches_git(CLEAN_OPTIONS);
}

/// The long options git lists for `cmd` (`--git-completion-helper-all`: `--name=` for a
/// required value, `--no-name` for each negation).
fn completion(dir: &Path, cmd: &str) -> BTreeSet<String> {
    let out = git(dir)
        .args([cmd, "--git-completion-helper-all"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .filter(|w| *w != "--")
        .map(str::to_string)
        .collect()
}

fn our_completion(table: &[Spec]) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    for o in table.iter().filter(|o| !o.long.is_empty()) {
        let eq = if o.arg == Arg::Required { "=" } else { "" };
        s.insert(format!("--{}{eq}", o.long));
        if o.negatable {
            match o.long.strip_prefix("no-") {
                Some(rest) => s.insert(format!("--{rest}")),
                None => s.insert(format!("--no-{}", o.long)),
            };
        }
    }
    s
}

/// The (short, long) pairs of `git cmd -h` (`-f, --[no-]force`, `-d`, `--repo <r>`).
fn usage_pairs(dir: &Path, cmd: &str) -> BTreeSet<(Option<char>, String)> {
    let out = git(dir).args([cmd, "-h"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut s = BTreeSet::new();
    for line in text.lines().map(str::trim_start) {
        // git's own line for the positive form of a `no-` option (`--verify`).
        if line.contains("opposite of --no-") {
            continue;
        }
        let Some(first) = line.split("  ").next() else {
            continue;
        };
        let first = first.split(' ').take(2).collect::<Vec<_>>().join(" ");
        let (short, long) = if let Some(rest) = first.strip_prefix("--") {
            (None, rest)
        } else if let Some(rest) = first.strip_prefix('-') {
            let mut cs = rest.chars();
            let c = cs.next().unwrap();
            let after = cs.as_str();
            (Some(c), after.strip_prefix(", --").unwrap_or(""))
        } else {
            continue;
        };
        let long = long
            .trim_start_matches("[no-]")
            .split(['[', ' ', '='])
            .next()
            .unwrap();
        s.insert((short, long.to_string()));
    }
    s
}

#[test]
fn the_tables_are_git_2_47s() {
    let r = repo();
    for (cmd, table) in [("push", PUSH_OPTIONS), ("clean", CLEAN_OPTIONS)] {
        assert_eq!(
            our_completion(table),
            completion(r.path(), cmd),
            "git {cmd}"
        );
        let ours: BTreeSet<(Option<char>, String)> = table
            .iter()
            .map(|o| (o.short, o.long.to_string()))
            .collect();
        assert_eq!(ours, usage_pairs(r.path(), cmd), "git {cmd} -h");
    }
}

/// Runs `git WORDS tag probe` in `dir` and says whether the tag was created and whether git
/// died with a usage message.
fn run_global(dir: &Path, words: &[&str], n: usize) -> (bool, bool) {
    let tag = format!("probe-{n}");
    let out = git(dir)
        .args(words)
        .args(["tag", &tag])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let listed = git(dir)
        .args(["for-each-ref", "--format=%(refname)"])
        .output()
        .unwrap();
    let created = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .any(|l| l.ends_with(&format!("/{tag}")));
    (created, out.status.code() == Some(129))
}

#[test]
fn global_options_end_where_gits_do() {
    let r = repo();
    let d = r.path();
    let cases: &[&[&str]] = &[
        &[],
        &["-C", "."],
        &["-C."],
        &["-C", ".git", "--bare"],
        &["-c", "a.b=c"],
        &["-ca.b=c"],
        &["--git-dir=.git"],
        &["--git-dir", ".git"],
        &["--git-d=.git"],
        &["--work-tree=."],
        &["--work-tree", "."],
        &["--namespace=n"],
        &["--namespace", "n"],
        &["--config-env=a.b=HOME"],
        &["--config-env", "a.b=HOME"],
        &["--attr-source=HEAD"],
        &["--attr-source", "HEAD"],
        &["--shallow-file", "none"],
        &["--shallow-file=none"],
        &["--super-prefix=x"],
        &["-p"],
        &["--paginate"],
        &["-P"],
        &["--no-pager"],
        &["--no-pag"],
        &["--no-replace-objects"],
        &["--literal-pathspecs"],
        &["--no-literal-pathspecs"],
        &["--glob-pathspecs"],
        &["--noglob-pathspecs"],
        &["--icase-pathspecs"],
        &["--no-optional-locks"],
        &["--no-advice"],
        &["--no-lazy-fetch"],
        &["--exec-path"],
        &["--html-path"],
        &["--man-path"],
        &["--info-path"],
        &["--list-cmds=main"],
        &["--list-cmds", "main"],
        &["-v"],
        &["--version"],
        &["--"],
        &["--end-of-options"],
        &["-x"],
        &["-P", "-C", ".", "-c", "x.y=z", "--no-pager"],
    ];
    for (n, words) in cases.iter().enumerate() {
        let mut with_tag: Vec<&str> = words.to_vec();
        with_tag.extend(["tag", "probe"]);
        let g = parse_global(&with_tag);
        let (created, usage) = run_global(d, words, n);
        match g.end {
            GlobalEnd::Subcommand(i) => {
                assert_eq!(with_tag[i], "tag", "{words:?}");
                assert!(
                    created && !usage,
                    "{words:?}: git did not run the subcommand"
                );
            }
            GlobalEnd::Exits(_) => {
                assert!(!created && !usage, "{words:?}: git ran the subcommand");
            }
            GlobalEnd::Unknown(_) | GlobalEnd::MissingValue(_) => {
                assert!(!created && usage, "{words:?}: git accepted the options");
            }
            GlobalEnd::NoSubcommand => panic!("{words:?}: the tag is a subcommand"),
        }
    }
    // `-C`/`-c` and their kin at the end of the words, missing their value.
    for o in GLOBAL_OPTIONS
        .iter()
        .filter(|o| matches!(o.arg, GlobalArg::Next | GlobalArg::EqualsOrNext))
    {
        assert_eq!(parse_global(&[o.name]).end, GlobalEnd::MissingValue(0));
        let out = git(d).arg(o.name).output().unwrap();
        assert!(!out.status.success(), "git {}", o.name);
    }
}
