//! The pre-push hook on real repositories: `tyba git-guard install|uninstall|pre-push`, and
//! real pushes with real git to local bare remotes proving protected refs never move.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../git-guard/tests/common/mod.rs"]
mod common;
use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn tyba(home: &Path) -> Command {
    clean(Command::new(env!("CARGO_BIN_EXE_tyba")), home)
}

fn git(home: &Path, dir: &Path) -> Command {
    let mut c = clean(Command::new("git"), home);
    c.current_dir(dir);
    c
}

fn pre_push(home: &Path, input: &str) -> Output {
    let mut c = tyba(home);
    c.args(["git-guard", "pre-push", "origin", "/x/origin.git"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const Z40: &str = "0000000000000000000000000000000000000000";
const A40: &str = "02af7a38e1be929e95ed06da7d02152a6d7ba54f";

#[test]
fn pre_push_parses_from_the_right_and_refuses_protected_refs() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let a64 = "ab".repeat(32);
    let z64 = "0".repeat(64);
    let ok = [
        String::new(),
        format!("refs/heads/feature {A40} refs/heads/feature {A40}\n"),
        format!("refs/heads/mainline {A40} refs/heads/mainline {Z40}\n"),
        format!(":/fix main here {A40} refs/heads/feature {A40}\n"),
        format!("refs/heads/x {a64} refs/heads/x {z64}\n"),
        format!("(delete) {Z40} refs/heads/old {A40}\n"),
    ];
    for input in &ok {
        let out = pre_push(h, input);
        assert!(
            out.status.success(),
            "refused {input:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let refused = [
        format!("refs/heads/feature {A40} refs/heads/main {A40}\n"),
        format!("refs/heads/feature {A40} refs/heads/MAIN {A40}\n"),
        format!("refs/heads/feature {A40} refs/heads/feature {A40}\nHEAD {A40} refs/heads/master {Z40}\n"),
        format!("(delete) {Z40} refs/heads/main {A40}\n"),
        format!("(delete) {z64} refs/heads/Master {a64}\n"),
        // a local ref with spaces that would fool a left-to-right split
        format!("x refs/heads/feature {A40} refs/heads/main {A40}\n"),
        format!(":/fix bug here {A40} refs/heads/main {A40}\n"),
    ];
    for input in &refused {
        let out = pre_push(h, input);
        assert_eq!(out.status.code(), Some(1), "allowed {input:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("push refused") && err.contains("refs/heads/"),
            "unclear message: {err}"
        );
    }
    let malformed = [
        "garbage\n".to_string(),
        format!("refs/heads/feature {A40} refs/heads/feature\n"),
        format!("refs/heads/feature {A40} refs/heads/feature {a64}\n"),
        format!(
            "refs/heads/feature {} refs/heads/feature {A40}\n",
            "g".repeat(40)
        ),
        format!("refs/heads/feature {A40}  {A40}\n"),
        format!("\nrefs/heads/feature {A40} refs/heads/feature {A40}\n"),
        format!(
            "refs/heads/feature {} refs/heads/feature {A40}\n",
            &A40[..39]
        ),
    ];
    for input in &malformed {
        let out = pre_push(h, input);
        assert_eq!(out.status.code(), Some(1), "accepted malformed {input:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("malformed"));
    }
}

fn hooks_dir(home: &Path, work: &Path) -> PathBuf {
    let out = git(home, work)
        .args(["rev-parse", "--git-path", "hooks"])
        .output()
        .unwrap();
    work.join(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn install_is_idempotent_chains_and_uninstalls() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), h);
    let work = dir.join("work");
    let hooks = hooks_dir(h, &work);
    // an existing hook that records that it ran
    std::fs::create_dir_all(&hooks).unwrap();
    let marker = root.path().join("chained-ran");
    let existing = format!("#!/bin/sh\ncat >'{}'\nexit 0\n", marker.display());
    std::fs::write(hooks.join("pre-push"), &existing).unwrap();
    run_ok(Command::new("chmod").arg("+x").arg(hooks.join("pre-push")));

    for _ in 0..2 {
        let out = run_ok(tyba(h).args(["git-guard", "install", "--repo"]).arg(&work));
        assert!(!String::from_utf8_lossy(&out.stdout).is_empty());
    }
    let hook = std::fs::read_to_string(hooks.join("pre-push")).unwrap();
    assert!(
        hook.contains("tyba git-guard pre-push hook") && hook.contains(env!("CARGO_BIN_EXE_tyba"))
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push.tyba-chained")).unwrap(),
        existing
    );

    // an allowed push runs the chained hook too
    run_ok(git(h, &work).args(["push", "-q", "origin", "feature"]));
    let seen = std::fs::read_to_string(&marker).expect("the chained hook did not run");
    assert!(
        seen.starts_with("refs/heads/feature ")
            && seen.ends_with('\n')
            && seen.lines().count() == 1,
        "the chained hook got {seen:?}"
    );
    // a protected push is refused before it
    let out = git(h, &work)
        .args(["push", "origin", "feature:main"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("push refused"));

    run_ok(
        tyba(h)
            .args(["git-guard", "uninstall", "--repo"])
            .arg(&work),
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push")).unwrap(),
        existing
    );
    assert!(!hooks.join("pre-push.tyba-chained").exists());
    let out = run_ok(
        tyba(h)
            .args(["git-guard", "uninstall", "--repo"])
            .arg(&work),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no tyba pre-push hook"));
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push")).unwrap(),
        existing
    );
}

#[test]
fn install_honours_hooks_path_and_linked_worktrees() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), h);
    let work = dir.join("work");
    // from a linked worktree, the hook goes to the common dir
    run_ok(
        git(h, &work)
            .args(["worktree", "add", "-q"])
            .arg(dir.join("wt2"))
            .arg("feature2"),
    );
    run_ok(
        tyba(h)
            .args(["git-guard", "install", "--repo"])
            .arg(dir.join("wt2")),
    );
    assert!(work.join(".git/hooks/pre-push").is_file());
    let out = git(h, &dir.join("wt2"))
        .args(["push", "origin", "HEAD:main"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "push from the linked worktree was not refused"
    );
    run_ok(
        tyba(h)
            .args(["git-guard", "uninstall", "--repo"])
            .arg(&work),
    );
    assert!(!work.join(".git/hooks/pre-push").exists());
    // core.hooksPath is honoured (relative to the work tree top)
    run_ok(git(h, &work).args(["config", "core.hooksPath", "myhooks"]));
    run_ok(
        tyba(h)
            .args(["git-guard", "install"])
            .current_dir(work.join(".git").parent().unwrap()),
    );
    assert!(work.join("myhooks/pre-push").is_file());
    let out = git(h, &work)
        .args(["push", "origin", "feature:master"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

fn protected_refs(home: &Path, dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for repo in ["origin.git", "upstream.git", "other.git", "work"] {
        let p = dir.join(repo);
        if p.exists() {
            let refs: Vec<String> = refs_of(&p, home)
                .into_iter()
                .filter(|l| {
                    let name = l.split(' ').next().unwrap_or("");
                    name.strip_prefix("refs/heads/").is_some_and(|b| {
                        b.eq_ignore_ascii_case("main") || b.eq_ignore_ascii_case("master")
                    })
                })
                .collect();
            out.push((repo.to_string(), refs));
        }
    }
    out
}

#[test]
fn real_pushes_with_the_hook_never_move_protected_refs() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in load_cases() {
        let stop = case.layer == "cli+hook";
        let allowed_with_effect = case.expect == "allowed" && !case.effect.is_empty();
        if !stop && !allowed_with_effect {
            continue;
        }
        ran += 1;
        let root = tempfile::tempdir().unwrap();
        let dir = fixture(root.path(), h);
        setup(&dir, h, &case.setup);
        run_ok(
            tyba(h)
                .args(["git-guard", "install", "--repo"])
                .arg(dir.join("work")),
        );
        let before = protected_refs(h, &dir);
        let mut c = clean(Command::new("bash"), h);
        c.arg("-c")
            .arg(&case.cmd)
            .current_dir(dir.join("work"))
            .env("FIXTURE", &dir);
        let out = c.output().unwrap();
        let after = protected_refs(h, &dir);
        let err = String::from_utf8_lossy(&out.stderr);
        if stop {
            if before != after {
                failures.push(format!(
                    "{}: protected refs moved: {before:?} -> {after:?}",
                    case.id
                ));
            }
            if out.status.success() {
                failures.push(format!(
                    "{}: `{}` succeeded with the hook installed",
                    case.id, case.cmd
                ));
            }
            if case.effect.iter().any(|e| !e.starts_with("work:")) && !err.contains("push refused")
            {
                failures.push(format!(
                    "{}: the hook did not explain the refusal: {err}",
                    case.id
                ));
            }
        } else if !out.status.success() {
            failures.push(format!(
                "{}: allowed push `{}` failed with the hook installed: {err}",
                case.id, case.cmd
            ));
        }
    }
    assert!(ran >= 45, "only {ran} cases ran");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sha256_repository_hook_refuses_protected_refs() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    run_ok(git(h, r).args([
        "init",
        "-q",
        "--bare",
        "--object-format=sha256",
        "-b",
        "main",
        "origin.git",
    ]));
    run_ok(git(h, r).args(["init", "-q", "--object-format=sha256", "-b", "main", "work"]));
    let work = r.join("work");
    run_ok(git(h, &work).args(["commit", "-q", "--allow-empty", "-m", "c1"]));
    run_ok(git(h, &work).args(["branch", "feature"]));
    run_ok(
        git(h, &work)
            .arg("remote")
            .arg("add")
            .arg("origin")
            .arg(r.join("origin.git")),
    );
    run_ok(tyba(h).args(["git-guard", "install", "--repo"]).arg(&work));
    run_ok(git(h, &work).args(["push", "-q", "origin", "feature"]));
    let out = git(h, &work)
        .args(["push", "origin", "HEAD:main"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "sha256 push to main was not refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("push refused"));
    let refs = refs_of(&r.join("origin.git"), h);
    assert!(
        refs.iter().all(|l| !l.starts_with("refs/heads/main ")),
        "{refs:?}"
    );
    assert!(refs.iter().any(
        |l| l.starts_with("refs/heads/feature ") && l.len() == "refs/heads/feature ".len() + 64
    ));
    // the command layer resolves SHA-256 repositories too
    let out = tyba(h)
        .args([
            "git-guard",
            "check",
            "--",
            "git",
            "push",
            "origin",
            "HEAD:main",
        ])
        .current_dir(&work)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("git.push.protected"));
}
