//! `tyba classify`, the CLI contract: every corpus case through `--jsonl` with the git
//! inspector in place, single lines with `--json`, tool actions, and usage errors (exit 2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

struct Fx {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    assert!(Command::new("bash")
        .arg(data("policy_fixture.sh"))
        .arg(tmp.path())
        .status()
        .unwrap()
        .success());
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    Fx {
        w: root.join("W"),
        home: root.join("home"),
        _tmp: tmp,
    }
}

fn tyba(fx: &Fx) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tyba"));
    c.current_dir(&fx.w)
        .env("HOME", &fx.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("XDG_CONFIG_HOME");
    for (k, _) in std::env::vars() {
        if k.starts_with("GIT_") && k != "GIT_CONFIG_NOSYSTEM" {
            c.env_remove(k);
        }
    }
    c
}

fn jsonl(fx: &Fx, input: &str) -> Vec<serde_json::Value> {
    let mut child = tyba(fx)
        .args(["classify", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_file(name: &str) {
    let fx = fixture();
    let text = std::fs::read_to_string(data(name)).unwrap();
    let cases: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results = jsonl(&fx, &text);
    assert_eq!(results.len(), cases.len());
    let mut failures = Vec::new();
    for (case, got) in cases.iter().zip(&results) {
        if case["expect"] != got["verdict"] {
            failures.push(format!(
                "{}: expected {}, got {} {}",
                case["id"], case["expect"], got["verdict"], got["rules"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_through_the_binary() {
    check_file("commands.jsonl");
}

#[test]
fn extra_cases_through_the_binary() {
    check_file("commands-extra.jsonl");
}

#[test]
fn red_team_cases_through_the_binary() {
    check_file("commands-redteam.jsonl");
    check_file("commands-redteam2.jsonl");
    check_file("commands-redteam3.jsonl");
    check_file("commands-redteam4.jsonl");
    check_file("commands-redteam5.jsonl");
    check_file("commands-redteam6.jsonl");
}

#[test]
fn fault_class_cases_through_the_binary() {
    check_file("commands-faults.jsonl");
}

#[test]
fn json_output_has_the_contract_fields() {
    let fx = fixture();
    let out = tyba(&fx)
        .args(["classify", "--json", "cat outdir/secret.txt"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "red");
    assert!(v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r == "path.outside-worktree"));
    assert!(!v["reasons"].as_array().unwrap().is_empty());
    let secret = fx.w.parent().unwrap().join("O/secret.txt");
    assert!(
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str() == Some(secret.to_str().unwrap())),
        "{v}"
    );
}

#[test]
fn cwd_and_worktree_flags() {
    let fx = fixture();
    let out = tyba(&fx)
        .args(["classify", "--cwd", "src", "cat ../README.md"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some("green")
    );
    let out = tyba(&fx)
        .args([
            "classify",
            "--worktree",
            "src",
            "--cwd",
            "src",
            "cat ../README.md",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some("red")
    );
}

#[test]
fn tool_actions() {
    let fx = fixture();
    let run = |args: &[&str]| {
        let out = tyba(&fx)
            .arg("classify")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["verdict"].as_str().unwrap().to_string()
    };
    assert_eq!(run(&["--tool", "write", "--path", "src/new.rs"]), "green");
    assert_eq!(
        run(&[
            "--tool",
            "apply_patch",
            "--path",
            "src/a.rs",
            "--path",
            "../x.rs"
        ]),
        "red"
    );
    assert_eq!(run(&["--tool", "write", "--path", "/etc/hosts"]), "blocked");
    assert_eq!(run(&["--tool", "read", "--path", ".env"]), "red");
    assert_eq!(
        run(&["--tool", "fetch", "--url", "https://example.com"]),
        "red"
    );
}

#[test]
fn usage_errors_exit_2() {
    let fx = fixture();
    for args in [
        vec!["classify"],
        vec!["classify", "--tool", "fetch"],
        vec!["classify", "--bogus", "ls"],
        vec!["classify", "--tool", "write", "ls"],
    ] {
        let out = tyba(&fx).args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut child = tyba(&fx)
        .args(["classify", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{not json\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_policy_file_exits_3_with_the_line() {
    let fx = fixture();
    let bad = fx.w.join("bad.toml");
    std::fs::write(&bad, "[git]\nprotected = 1\n").unwrap();
    let out = tyba(&fx)
        .args(["classify", "--policy"])
        .arg(&bad)
        .arg("ls")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") || err.contains(":2:"), "{err}");
}

/// A relative `XDG_CONFIG_HOME` is no configuration directory (the XDG Base Directory
/// Specification: ignored): it put the person's policy in the current directory, a worktree
/// the agent writes (review 23's r23-01). The same policy under `HOME` is read (the control
/// that the check can fail).
#[test]
fn a_relative_xdg_config_home_is_ignored() {
    let fx = fixture();
    let planted = fx.w.join(".config/tyba");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("policy.toml"), "[git]\nprotected = 1\n").unwrap();
    let run = |xdg: &str| {
        tyba(&fx)
            .env("XDG_CONFIG_HOME", xdg)
            .args(["classify", "ls"])
            .output()
            .unwrap()
    };
    let out = run(".config");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(fx.w.join(".config").to_str().unwrap());
    assert_eq!(
        out.status.code(),
        Some(3),
        "the same file, named absolutely: {out:?}"
    );
}

/// The person's policy file with a second name (a hard link, as some dotfiles set-ups make)
/// is not loaded: an approved command writing the other name would set the next session's
/// policy (review 22's r22-03). Every command that loads the policy stops with exit 3 and
/// names the file; the same file behind a symbolic link loads (the control).
#[test]
fn a_policy_file_with_another_name_is_not_loaded() {
    let fx = fixture();
    let conf = fx.home.join(".config/tyba");
    let dots = fx.home.join("dotfiles/tyba");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&dots).unwrap();
    std::fs::write(
        dots.join("policy.toml"),
        "[git]\nprotected_branches = [\"release\"]\n",
    )
    .unwrap();
    std::fs::hard_link(dots.join("policy.toml"), conf.join("policy.toml")).unwrap();
    for args in [&["classify", "ls"][..], &["policy", "show"][..]] {
        let out = tyba(&fx).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {out:?}");
        assert!(
            err.contains(&*conf.join("policy.toml").to_string_lossy()) && err.contains("2 names"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_file(conf.join("policy.toml")).unwrap();
    std::os::unix::fs::symlink(dots.join("policy.toml"), conf.join("policy.toml")).unwrap();
    let out = tyba(&fx)
        .args(["policy", "show", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["protected_branches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == "release"),
        "the file was read through its link: {v}"
    );
}

/// Review 24's r24-04: approvals were kept per content, so after the person approved a wide
/// content A and then a narrower B, the agent could write A back into its worktree and have
/// it read as written. Approving B withdraws A; B itself stays approved (the control).
#[test]
fn approving_a_repository_policy_withdraws_its_earlier_approvals() {
    let fx = fixture();
    std::fs::create_dir_all(fx.w.join(".tyba")).unwrap();
    let file = fx.w.join(".tyba/policy.toml");
    let wide = "[network]\nagent_hosts = [\"wide.example:443\"]\n";
    let narrow = "[network]\nagent_hosts = [\"narrow.example:443\"]\n";
    let show = || {
        let out = tyba(&fx).args(["policy", "show"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let allow = || {
        let out = tyba(&fx)
            .env_remove("TYBA_SESSION")
            .args(["policy", "allow"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    std::fs::write(&file, wide).unwrap();
    allow();
    assert!(show().contains("is approved"), "{}", show());
    std::fs::write(&file, narrow).unwrap();
    let said = allow();
    assert!(said.contains("withdrew 1 earlier approval"), "{said}");
    assert!(show().contains("is approved"), "the control: {}", show());
    std::fs::write(&file, wide).unwrap();
    let shown = show();
    assert!(shown.contains("is not approved"), "{shown}");
}

/// The person's policy file as a symbolic link that leads nowhere (the dotfiles not cloned
/// yet): their restrictions would silently not apply, so the policy does not load (exit 3,
/// naming the link). Once the target exists it loads (the control).
#[test]
fn a_policy_link_that_leads_nowhere_is_a_policy_error() {
    let fx = fixture();
    let conf = fx.home.join(".config/tyba");
    std::fs::create_dir_all(&conf).unwrap();
    let target = fx.home.join("dotfiles/tyba/policy.toml");
    std::os::unix::fs::symlink(&target, conf.join("policy.toml")).unwrap();
    let out = tyba(&fx).args(["classify", "ls"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        err.contains(&format!("symbolic link to {}", target.display())),
        "{err}"
    );
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::write(&target, "[git]\nprotected_branches = [\"release\"]\n").unwrap();
    let out = tyba(&fx).args(["classify", "ls"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the control: {out:?}");
}

/// Review 25's r25-01: the repository's identity came from whatever `.git` lay above the
/// policy file, so an agent that unpacked `.git/commondir` (naming the person's repository)
/// and a copy of that repository's approved policy into a plain directory had it read as
/// approved there. A `commondir` counts only for a worktree its repository lists; in the
/// repository itself the approval holds (the control).
#[test]
fn an_approval_does_not_follow_a_forged_commondir() {
    let fx = fixture();
    std::fs::create_dir_all(fx.w.join(".tyba")).unwrap();
    let wide = "[network]\nagent_hosts = [\"wide.example:443\"]\n";
    std::fs::write(fx.w.join(".tyba/policy.toml"), wide).unwrap();
    let out = tyba(&fx).args(["policy", "allow"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let show = |dir: &std::path::Path| {
        let out = tyba(&fx)
            .current_dir(dir)
            .args(["policy", "show"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    assert!(
        show(&fx.w).contains("is approved"),
        "the control: {}",
        show(&fx.w)
    );
    let plain = fx.home.join("plain");
    std::fs::create_dir_all(plain.join(".git")).unwrap();
    std::fs::create_dir_all(plain.join(".tyba")).unwrap();
    std::fs::write(
        plain.join(".git/commondir"),
        fx.w.join(".git").to_str().unwrap(),
    )
    .unwrap();
    std::fs::write(plain.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(plain.join(".tyba/policy.toml"), wide).unwrap();
    let shown = show(&plain);
    assert!(shown.contains("is not approved"), "{shown}");
    // Review 26's r26-01: a `.git` file or link naming the repository's git dir.
    for (name, lay) in [("file", "file"), ("link", "link")] {
        let d = fx.home.join(name);
        std::fs::create_dir_all(d.join(".tyba")).unwrap();
        std::fs::write(d.join(".tyba/policy.toml"), wide).unwrap();
        if lay == "file" {
            std::fs::write(
                d.join(".git"),
                format!("gitdir: {}\n", fx.w.join(".git").display()),
            )
            .unwrap();
        } else {
            std::os::unix::fs::symlink(fx.w.join(".git"), d.join(".git")).unwrap();
        }
        let shown = show(&d);
        assert!(shown.contains("is not approved"), "{name}: {shown}");
    }
    // A separate git dir (`git init --separate-git-dir`) names no checkout back: its
    // approval is its checkout's own, and a `.git` file elsewhere naming it does not carry it.
    let sep = fx.home.join("sep");
    let store = fx.home.join("store.git");
    let init = Command::new("git")
        .args(["init", "-q", "--separate-git-dir"])
        .arg(&store)
        .arg(&sep)
        .status()
        .unwrap();
    assert!(init.success());
    std::fs::create_dir_all(sep.join(".tyba")).unwrap();
    std::fs::write(sep.join(".tyba/policy.toml"), wide).unwrap();
    let out = tyba(&fx)
        .current_dir(&sep)
        .args(["policy", "allow"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        show(&sep).contains("is approved"),
        "the control: {}",
        show(&sep)
    );
    let claim = fx.home.join("claim");
    std::fs::create_dir_all(claim.join(".tyba")).unwrap();
    std::fs::write(claim.join(".tyba/policy.toml"), wide).unwrap();
    std::fs::write(claim.join(".git"), format!("gitdir: {}\n", store.display())).unwrap();
    let shown = show(&claim);
    assert!(shown.contains("is not approved"), "{shown}");
}

#[test]
fn policy_show_prints_the_merged_layers() {
    let fx = fixture();
    std::fs::create_dir_all(fx.w.join(".tyba")).unwrap();
    std::fs::write(
        fx.w.join(".tyba/policy.toml"),
        "[git]\nprotected_branches = [\"release\"]\n",
    )
    .unwrap();
    let out = tyba(&fx)
        .args(["policy", "show", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = v["protected_branches"].as_array().unwrap();
    assert!(b.iter().any(|x| x == "release") && b.iter().any(|x| x == "main"));
}

/// With `core.hooksPath` pointing at a worktree directory (`.husky`), every hook there runs
/// outside the sandbox later: writing one is red (DESIGN.md §2), the pre-push hook blocked,
/// through the shell and through the edit tool alike.
#[test]
fn hooks_in_the_configured_hooks_directory_are_hooks() {
    let fx = fixture();
    std::fs::create_dir_all(fx.w.join(".husky")).unwrap();
    std::fs::write(fx.w.join(".husky/pre-push"), "#!/bin/sh\n").unwrap();
    assert!(Command::new("git")
        .current_dir(&fx.w)
        .args(["config", "core.hooksPath", ".husky"])
        .status()
        .unwrap()
        .success());
    let verdict = |args: &[&str]| -> (String, Vec<String>) {
        let out = tyba(&fx)
            .args(["classify", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rules = v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect();
        (v["verdict"].as_str().unwrap().to_string(), rules)
    };
    for args in [
        &["echo x > .husky/post-commit"][..],
        &["cp README.md .husky/pre-commit"],
        &["--tool", "write", "--path", ".husky/post-checkout"],
    ] {
        let (v, rules) = verdict(args);
        assert_eq!(v, "red", "{args:?}: {rules:?}");
        assert!(
            rules.iter().any(|r| r == "path.git-hooks"),
            "{args:?}: {rules:?}"
        );
    }
    assert_eq!(verdict(&["echo x > .husky/pre-push"]).0, "blocked");
    assert_eq!(verdict(&["cat .husky/post-commit"]).0, "green");
}
