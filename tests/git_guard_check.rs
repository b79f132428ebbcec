//! `tyba git-guard check [--json] -- git push …`: verdict and resolved destinations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../git-guard/tests/common/mod.rs"]
mod common;
use common::*;
use std::process::Command;

#[test]
fn check_prints_verdict_and_destinations() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), h);
    let work = dir.join("work");
    let run = |args: &[&str]| {
        let mut c = clean(Command::new(env!("CARGO_BIN_EXE_tyba")), h);
        c.args(["git-guard", "check"]).args(args).current_dir(&work);
        c.output().unwrap()
    };
    let out = run(&["--", "git", "push"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("blocked"), "{text}");
    assert!(
        text.contains("refs/heads/main") && text.contains("PROTECTED"),
        "{text}"
    );

    let out = run(&[
        "--json",
        "--",
        "git",
        "push",
        "origin",
        "'refs/heads/*:refs/heads/*'",
        "^refs/heads/main",
        "^refs/heads/master",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // the quotes are part of the word here: git would reject the refspec; still not blocked
    assert!(v.get("verdict").is_some());

    let out = run(&[
        "--json",
        "--",
        "git",
        "push",
        "origin",
        "refs/heads/*:refs/heads/*",
        "^refs/heads/main",
        "^refs/heads/master",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "allowed");
    let dsts: Vec<String> = v["pushes"][0]["targets"][0]["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["dst"].as_str().unwrap().to_string())
        .collect();
    assert!(dsts.contains(&"refs/heads/feature".to_string()), "{dsts:?}");
    assert!(
        !dsts
            .iter()
            .any(|d| d == "refs/heads/main" || d == "refs/heads/master"),
        "{dsts:?}"
    );

    let out = run(&[
        "--",
        "GIT_CONFIG_GLOBAL=/dev/null",
        "git",
        "push",
        "origin",
        "feature",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("git.guard.hooks-path"));

    let out = run(&["--", "ls"]);
    assert_eq!(out.status.code(), Some(2));
}
