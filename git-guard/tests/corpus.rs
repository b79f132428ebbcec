//! Every case of tests/data/git-push.jsonl through the library's `Inspector`, on a real
//! fixture repository; all mismatches are reported at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;
use tyba_git_guard::Inspector;
use tyba_policy::{GitInspector, GitInvocation};

/// Splits a simple corpus command line into prefix assignments and the words after `git`.
pub fn split_git(cmd: &str) -> (Vec<(String, String)>, Vec<String>) {
    let words = shlex::split(cmd).unwrap();
    let mut env = Vec::new();
    let mut i = 0;
    while let Some((n, v)) = words[i].split_once('=') {
        if !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            break;
        }
        env.push((n.to_string(), v.to_string()));
        i += 1;
    }
    assert_eq!(words[i], "git", "{cmd}");
    (env, words[i + 1..].to_vec())
}

#[test]
fn corpus_cases_through_the_inspector() {
    let home = isolate_once();
    let cases = load_cases();
    assert!(cases.len() >= 60, "corpus too small: {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let root = tempfile::tempdir().unwrap();
        let dir = fixture(root.path(), home);
        setup(&dir, home, &case.setup);
        let (env, args) = split_git(&subst(&case.cmd, &dir));
        let protected = protected();
        let cwd = dir.join("work");
        let inv = GitInvocation {
            args: &args,
            env: &env,
            cwd: &cwd,
            protected: &protected,
        };
        let report = Inspector::new().inspect(&inv);
        let got = if report.findings.is_empty() {
            "allowed"
        } else {
            "blocked"
        };
        if std::env::var_os("TYBA_DEBUG").is_some() {
            eprintln!(
                "{} {} {:?}",
                case.id,
                got,
                report
                    .findings
                    .iter()
                    .map(|f| f.reason.clone())
                    .collect::<Vec<_>>()
            );
        }
        if got != case.expect {
            failures.push(format!(
                "{}: expected {}, got {} for `{}` ({})\n    findings: {:?}",
                case.id, case.expect, got, case.cmd, case.note, report.findings
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
