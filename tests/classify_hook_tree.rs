//! The cases of `tests/data/commands-redteam6-hook.jsonl` through `tyba classify --jsonl`, on
//! the fixture of `tests/data/policy_fixture.sh` with an executable `.git/hooks/pre-push`
//! (the worktree of a session whose guard is installed): a recursive change whose tree holds
//! the hook is blocked (DESIGN.md §2), a selection that misses it keeps its colour. The same
//! lines without the hook are cases of `commands-redteam6.jsonl` (`rt6-tree-*`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn recursive_changes_reaching_the_installed_hook() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(Command::new("bash")
        .arg(data("policy_fixture.sh"))
        .arg(tmp.path())
        .status()
        .unwrap()
        .success());
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (w, home) = (root.join("W"), root.join("home"));
    let hook = w.join(".git/hooks/pre-push");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

    let text = std::fs::read_to_string(data("commands-redteam6-hook.jsonl")).unwrap();
    let cases: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!cases.is_empty());
    let mut c = Command::new(env!("CARGO_BIN_EXE_tyba"));
    c.current_dir(&w)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("XDG_CONFIG_HOME");
    for (k, _) in std::env::vars() {
        if k.starts_with("GIT_") && k != "GIT_CONFIG_NOSYSTEM" {
            c.env_remove(k);
        }
    }
    let mut child = c
        .args(["classify", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let results: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), cases.len());
    let failures: Vec<String> = cases
        .iter()
        .zip(&results)
        .filter(|(case, got)| case["expect"] != got["verdict"])
        .map(|(case, got)| {
            format!(
                "{}: expected {}, got {} {}",
                case["id"], case["expect"], got["verdict"], got["rules"]
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    // Classifying changed nothing: the hook is still there, executable.
    let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111);
}
