//! git-push.jsonl through the built binary: `tyba classify --json` gives `blocked` for the
//! corpus's blocked cases and `red` (network) for the allowed ones; the test data copies match
//! the shared corpus where it exists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../git-guard/tests/common/mod.rs"]
mod common;
use common::*;
use std::path::Path;
use std::process::Command;

#[test]
fn corpus_copies_match_shared_corpus() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if !shared.is_dir() {
        eprintln!("no ../shared/corpus here: nothing to compare");
        return;
    }
    for f in ["git-push.jsonl", "git_fixture.sh"] {
        let ours = std::fs::read(data_dir().join(f)).unwrap();
        let theirs = std::fs::read(shared.join(f)).unwrap();
        assert!(
            ours == theirs,
            "tests/data/{f} differs from ../shared/corpus/{f}: copy it again"
        );
    }
}

#[test]
fn corpus_cases_through_tyba_classify() {
    let home = tempfile::tempdir().unwrap();
    let cases = load_cases();
    let mut failures = Vec::new();
    for case in &cases {
        let root = tempfile::tempdir().unwrap();
        let dir = fixture(root.path(), home.path());
        setup(&dir, home.path(), &case.setup);
        let cmd = subst(&case.cmd, &dir);
        let mut c = clean(Command::new(env!("CARGO_BIN_EXE_tyba")), home.path());
        c.args(["classify", "--json", "--cwd"])
            .arg(dir.join("work"))
            .arg(&cmd);
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let verdict = serde_json::from_str::<serde_json::Value>(&stdout)
            .ok()
            .and_then(|v| {
                v.get("verdict")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| {
                format!(
                    "<no verdict: {stdout} {}>",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let want = if case.expect == "blocked" {
            "blocked"
        } else {
            "red"
        };
        if verdict != want {
            failures.push(format!(
                "{}: expected {want}, got {verdict} for `{}` ({})",
                case.id, case.cmd, case.note
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
