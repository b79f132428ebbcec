//! Every case of the colour-policy corpus (`tests/data/commands.jsonl`, a copy of
//! `shared/corpus/commands.jsonl`) and of our own cases (`tests/data/commands-extra.jsonl`),
//! classified on the fixture the corpus README describes. All mismatches are reported at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use tyba_policy::{Action, Context, Policy, Verdict};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// The fixture (`policy_fixture.sh`), then each of `extra` (scripts of `tests/data` run on the same directory).
fn fixture_with(extra: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    for script in std::iter::once("policy_fixture.sh").chain(extra.iter().copied()) {
        let st = std::process::Command::new("bash")
            .arg(data(script))
            .arg(tmp.path())
            .status()
            .unwrap();
        assert!(st.success(), "fixture script {script} failed");
    }
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    (tmp, root.join("W"), root.join("home"))
}

#[derive(serde::Deserialize)]
struct Case {
    id: String,
    cmd: Option<String>,
    tool: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    url: Option<String>,
    cwd: Option<String>,
    expect: Verdict,
}

fn run_file(name: &str) {
    run_file_on(name, &[]);
}

/// [`run_file`] on the fixture with `extra` scripts run after it ([`fixture_with`]).
fn run_file_on(name: &str, extra: &[&str]) {
    let (_tmp, w, home) = fixture_with(extra);
    let policy = Policy::embedded_default();
    let text = std::fs::read_to_string(data(name)).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1));
        let action = match (case.tool.as_deref(), case.cmd.clone()) {
            (None | Some("exec"), Some(command)) => Action::Exec { command },
            (Some("write"), _) => Action::Write {
                paths: case.paths.clone(),
            },
            (Some("read"), _) => Action::Read {
                paths: case.paths.clone(),
            },
            (Some("apply_patch"), _) => Action::ApplyPatch {
                paths: case.paths.clone(),
            },
            (Some("fetch"), _) => Action::Fetch {
                url: case.url.clone().unwrap(),
            },
            other => panic!("{}: unknown case shape {other:?}", case.id),
        };
        let cwd = w.join(case.cwd.as_deref().unwrap_or("."));
        let ctx = Context {
            worktree: &w,
            cwd: &cwd,
            home: Some(&home),
            scratch: None,
            git: None,
        };
        let c = policy.classify(&action, &ctx);
        count += 1;
        if c.verdict != case.expect {
            let kind = if c.verdict < case.expect {
                "GREENER (security bug)"
            } else {
                "redder (friction)"
            };
            failures.push(format!(
                "{}: expected {}, got {} [{kind}] rules {:?} for {:?}",
                case.id,
                case.expect,
                c.verdict,
                c.rules(),
                action
            ));
        }
    }
    assert!(count > 0, "{name} has no cases");
    assert!(
        failures.is_empty(),
        "{} of {count} cases in {name} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn shared_corpus_commands() {
    run_file("commands.jsonl");
}

#[test]
fn extra_cases() {
    run_file("commands-extra.jsonl");
}

#[test]
fn red_team_cases() {
    run_file("commands-redteam.jsonl");
}

#[test]
fn red_team_round_two_cases() {
    run_file("commands-redteam2.jsonl");
}

#[test]
fn red_team_round_three_cases() {
    run_file("commands-redteam3.jsonl");
}

/// Our cases of the fault classes of issue 15 (loop-bound globs, assignment values, several
/// possible values, git's deletion and exec spellings, configuration writes, persistence,
/// output-directory options, `cd --`), with disguised variants.
#[test]
fn fault_class_cases() {
    run_file("commands-faults.jsonl");
}

/// Our cases of the fault classes a fourth red-team round found (POSIX classes and extended
/// patterns in globs, fork bombs without a pipe, configuration moved by assignments, and
/// the rest of `tyba`'s red-team findings), with disguised variants.
#[test]
fn red_team_round_four_cases() {
    run_file("commands-redteam4.jsonl");
}

/// Names that are no UTF-8 text (`tests/data/bytes_fixture.sh` makes them): a glob that may
/// match one, a `$'\xff'` word, a link whose target is one are never green, never decoded
/// into another name (docs/policy.md "Names that are not UTF-8"), with controls that stay
/// green.
#[test]
fn names_that_are_no_utf8_cases() {
    run_file_on("commands-bytes.jsonl", &["bytes_fixture.sh"]);
}

/// Where `../shared/corpus` exists beside the repository, the copies must be current.
#[test]
fn corpus_copies_are_current() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    if !shared.is_dir() {
        return;
    }
    for (ours, theirs) in [
        ("commands.jsonl", "commands.jsonl"),
        ("corpus-README.md", "README.md"),
    ] {
        let a = std::fs::read(data(ours)).unwrap();
        let b = std::fs::read(shared.join(theirs)).unwrap();
        assert!(
            a == b,
            "tests/data/{ours} differs from shared/corpus/{theirs}: copy it again"
        );
    }
}
