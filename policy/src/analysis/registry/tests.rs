//! The registry's checks, each entry's examples against the classifier, and the table
//! judge.

use super::*;
use crate::{Action, Context, Policy};

#[test]
fn the_registry_loads() {
    if let Err(e) = check(&families()) {
        panic!("{e}");
    }
    assert!(lookup("cat").is_some());
    assert!(lookup("no-such-program").is_none());
}

#[test]
fn a_name_registered_twice_is_refused() {
    const A: &[Program] = &[Program {
        family: "a",
        names: &["cat", "dog"],
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[ex("cat f", Verdict::Green)],
    }];
    const B: &[Program] = &[Program {
        family: "b",
        names: &["dog"],
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[ex("dog f", Verdict::Green)],
    }];
    assert_eq!(
        check(&[A, B]).err(),
        Some(RegistryError::DuplicateName {
            name: "dog",
            first: "a",
            second: "b"
        })
    );
    // Within one family too, and against the real registry.
    assert!(check(&[A, A]).is_err());
    let mut real = families().to_vec();
    real.push(A);
    assert!(matches!(
        check(&real),
        Err(RegistryError::DuplicateName { name: "cat", .. })
    ));
}

#[test]
fn malformed_entries_are_refused() {
    const TWICE: &[Program] = &[Program {
        family: "a",
        names: &["x"],
        green: true,
        options: &[Opt::val('o', "output"), Opt::flag('o', "other")],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[ex("x f", Verdict::Green)],
    }];
    assert!(matches!(
        check(&[TWICE]),
        Err(RegistryError::DuplicateOption { .. })
    ));
    const OTHER: &[Program] = &[Program {
        family: "a",
        names: &["x"],
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[ex("y f", Verdict::Green)],
    }];
    assert!(matches!(
        check(&[OTHER]),
        Err(RegistryError::ExampleNamesOther { .. })
    ));
    const NONE: &[Program] = &[Program {
        family: "a",
        names: &["x"],
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[],
    }];
    assert!(matches!(
        check(&[NONE]),
        Err(RegistryError::NoExamples { .. })
    ));
    const NOT_GREEN: &[Program] = &[Program {
        family: "a",
        names: &["x"],
        green: false,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: &[],
        examples: &[ex("x f", Verdict::Yellow)],
    }];
    assert!(matches!(
        check(&[NOT_GREEN]),
        Err(RegistryError::JudgedButNotGreen { .. })
    ));
}

/// Every example classifies as its entry says, in an empty worktree, and emits only the
/// rules its entry declares.
#[test]
fn every_example_classifies_as_its_entry_says() {
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().canonicalize().unwrap();
    let ctx = Context {
        worktree: &wt,
        cwd: &wt,
        home: None,
        scratch: None,
        git: None,
    };
    let policy = Policy::embedded_default();
    let mut failures = Vec::new();
    let mut count = 0;
    for family in families() {
        for p in family {
            for e in p.examples {
                count += 1;
                let c = policy.classify(
                    &Action::Exec {
                        command: e.line.to_string(),
                    },
                    &ctx,
                );
                if c.verdict != e.verdict {
                    failures.push(format!(
                        "{}: `{}` is {:?}, the entry says {:?} ({:?})",
                        p.family, e.line, c.verdict, e.verdict, c.findings
                    ));
                }
                for f in &c.findings {
                    if !p
                        .rules
                        .iter()
                        .any(|r| r.id == f.rule || rules::lookup(&f.rule) == Some(r))
                    {
                        failures.push(format!(
                            "{}: `{}` emits `{}`, not among the entry's rules",
                            p.family, e.line, f.rule
                        ));
                    }
                }
            }
        }
    }
    assert!(count > 50, "only {count} examples");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The green list is exactly the green entries, and the entries the analyser walks are
/// not judged by the registry.
#[test]
fn green_and_judged_follow_the_entries() {
    for family in families() {
        for p in family {
            for n in p.names {
                assert_eq!(is_green_program(n), p.green, "{n}");
                assert_eq!(
                    judged(n).is_some(),
                    !matches!(p.judge, Judge::Walker(_)),
                    "{n}"
                );
            }
        }
    }
    assert!(!is_green_program("rm"));
    assert_eq!(interpreter_flags("python3.12"), Some(&["-c"][..]));
    assert_eq!(interpreter_flags("node"), interpreter_flags("nodejs18"));
    assert!(interpreter_flags("bash").is_none());
    assert!(interpreter_flags("pip3").is_none());
    assert!(judged("cd").is_none());
    // Wrappers are entries, read by their kind.
    assert_eq!(walk("timeout"), Some(Walk::Wrapper(Wraps::Options)));
    assert_eq!(walk("env"), Some(Walk::Wrapper(Wraps::Env)));
    assert_eq!(walk("su"), Some(Walk::Wrapper(Wraps::Opaque)));
    assert!(!is_green_program("sudo"));
    assert!(judged("xargs").is_none());
}

/// The table judge: roles and operands.
#[test]
fn the_table_judge_acts_on_roles_and_operands() {
    let judge = |line: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let p = lookup(words[0]).unwrap();
        let args: Vec<Field> = words[1..].iter().map(|w| Field::lit(w)).collect();
        p.judge(words[0], &args)
    };
    let rules = |j: &Judgement| -> Vec<String> {
        j.findings
            .iter()
            .map(|f| f.rule.clone())
            .collect::<Vec<_>>()
    };
    let j = judge("sort -o out in");
    assert_eq!(rules(&j), ["cmd.not-read-only"]);
    assert!(j
        .paths
        .iter()
        .any(|(f, a)| f.known().as_deref() == Some("out") && *a == Access::Write));
    assert_eq!(
        rules(&judge("sort --compress-prog=gzip in")),
        ["cmd.program-option"]
    );
    // An abbreviation of a role-bearing option is that option.
    assert_eq!(rules(&judge("sort --out=o in")), ["cmd.not-read-only"]);
    let j = judge("sort -T /tmp in");
    assert!(j.findings.is_empty());
    assert_eq!(j.paths.len(), 2);
    assert_eq!(
        rules(&judge("wc --files0-from=list")),
        ["cmd.not-read-only"]
    );
    assert_eq!(rules(&judge("sha256sum -c sums")), ["cmd.not-read-only"]);
    assert!(judge("ls").reads_cwd);
    assert!(!judge("cat").reads_cwd);
    assert_eq!(rules(&judge("uniq a b")), ["cmd.not-read-only"]);
    assert!(judge("uniq a").findings.is_empty());
    assert_eq!(rules(&judge("date 01010000")), ["cmd.not-read-only"]);
    assert!(judge("date +%s").findings.is_empty());
    assert!(judge("echo /etc/passwd").paths.is_empty());
    // A value of a common file option is a path read, for any table-judged program.
    let j = judge("ls --input=/etc/shadow");
    assert!(j
        .paths
        .iter()
        .any(|(f, a)| f.known().as_deref() == Some("/etc/shadow") && *a == Access::Read));
}

/// Every program the dispatch of `commands.rs` selects by name is a registry entry (so a
/// second registration of any of them fails the load, and its examples are checked).
#[test]
fn programs_the_walk_selects_by_name_are_entries() {
    for n in [
        "cd",
        "pushd",
        "popd",
        "eval",
        "source",
        ".",
        "read",
        "mapfile",
        "readarray",
        "getopts",
        "let",
        "export",
        "declare",
        "typeset",
        "local",
        "readonly",
        "unset",
        "alias",
        "trap",
        "set",
        "git",
        "hub",
        "find",
        "fd",
        "fdfind",
        "systemctl",
        "loginctl",
        "kill",
        "pkill",
        "killall",
        "killall5",
        "fuser",
        "printenv",
        "command",
        "env",
        "direnv",
        "busybox",
    ] {
        assert!(lookup(n).is_some(), "`{n}` is not registered");
        assert!(
            judged(n).is_none(),
            "`{n}` is walked, not judged by its table"
        );
    }
    // `printf -v NAME` is read by name, then the rest by printf's table.
    assert!(judged("printf").is_some());
    // The effects of a program are its entry's.
    assert!(lookup("unzip").is_some_and(|p| !p.effects.is_empty()));
    assert!(lookup("systemctl").is_some_and(|p| p.effects == [Effect::ServiceManager]));
    assert!(lookup("cat").is_some_and(|p| p.effects.is_empty()));
}

/// A `FollowsLinks` effect scans the start paths for symlinks out of the worktree; the same
/// command without the option, or a program without the effect, does not follow them.
#[test]
fn a_recursion_that_follows_links_reads_where_they_point() {
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().canonicalize().unwrap();
    std::fs::create_dir(wt.join("d")).unwrap();
    std::os::unix::fs::symlink("/etc", wt.join("d/out")).unwrap();
    let ctx = Context {
        worktree: &wt,
        cwd: &wt,
        home: None,
        scratch: None,
        git: None,
    };
    let policy = Policy::embedded_default();
    let verdict = |line: &str| {
        policy
            .classify(
                &Action::Exec {
                    command: line.to_string(),
                },
                &ctx,
            )
            .verdict
    };
    for (line, want) in [
        ("ls -RL d", Verdict::Red),
        ("ls -L d", Verdict::Green),
        ("ls -R d", Verdict::Green),
        ("du -L d", Verdict::Red),
        ("tree -l d", Verdict::Red),
        ("tar -chf a.tar d", Verdict::Red),
        ("cp -r --dereference d x", Verdict::Red),
        ("rsync -a --copy-links d/ x/", Verdict::Red),
        ("cp -r d x", Verdict::Yellow),
        ("mv -L d x", Verdict::Yellow),
    ] {
        assert_eq!(verdict(line), want, "{line}");
    }
}
