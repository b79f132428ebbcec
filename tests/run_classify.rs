//! `tyba run`: the supervisor's exec classification reads no more than the agent may, never
//! repeats URL credentials, and cannot be hung by what it reads (security review, faults 1
//! and 2). Each test runs as the test process's user and as the unprivileged
//! `TYBA_TEST_USER` (see `run_support.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

const SECRET: &str = "ghp_SECRETTOKEN123";
const SECRET_URL: &str = "https://alice:ghp_SECRETTOKEN123@github.com/x/y";

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

/// The value after `name=` in the agent's output (`rc` of each step).
fn step(out: &str, name: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
}

struct Fixture {
    _scratch: Scratch,
    wt: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    tyba: PathBuf,
}

/// A worktree whose `origin` carries a token; a repository outside the worktree (which the
/// agent cannot read) with the same remote; in the worktree, `sub` with a FIFO as its
/// `.git/config` and `sub2` whose `.git` file points at a git dir (also in the worktree) with
/// a FIFO `config`.
fn fixture(who: &Who, tag: &str) -> Option<Fixture> {
    let SandboxRepo {
        scratch,
        root,
        wt,
        home,
        tyba,
    } = sandbox_repo(who, tag)?;
    git_as(who, &wt, &["remote", "add", "origin", SECRET_URL]);
    let outside = root.join("rt6/P");
    make_repo(who, &outside);
    git_as(who, &outside, &["remote", "add", "origin", SECRET_URL]);
    for d in ["sub", "sub2"] {
        std::fs::create_dir_all(wt.join(d)).unwrap();
    }
    give(&wt, who);
    git_as(who, &wt.join("sub"), &["init", "-q", "-b", "main"]);
    let sub2_git = wt.join("sub2.git");
    git_as(
        who,
        &wt.join("sub2"),
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            sub2_git.to_str().unwrap(),
        ],
    );
    for cfg in [wt.join("sub/.git/config"), sub2_git.join("config")] {
        std::fs::remove_file(&cfg).unwrap();
        mkfifo(&cfg);
    }
    give(&wt, who);
    Some(Fixture {
        _scratch: scratch,
        wt,
        home,
        outside,
        tyba,
    })
}

/// Fault 1: the supervisor opened a repository the agent cannot read and quoted its
/// credentialed remote URL in the refusal. Fault 2: a FIFO as a repository's config hung the
/// notify loop for the whole session.
#[test]
fn run_classification_reads_only_what_the_agent_may_and_cannot_hang_the_session() {
    for who in whos() {
        let Some(f) = fixture(&who, "cls") else {
            continue;
        };
        let out_git = f.outside.join(".git");
        let script = format!(
            "cat {cfg}; echo cat=$?\n\
             git --git-dir={git} push origin main; echo outside=$?\n\
             git push origin main; echo inside=$?\n\
             cd sub && git st; echo fifo=$?; cd ..\n\
             s=$SECONDS; cd sub2 && git st; echo fifo2=$? took=$((SECONDS - s)); cd ..\n\
             ls; echo ls=$?\n\
             rm -rf ../rt6; echo rm=$?\n",
            cfg = out_git.join("config").display(),
            git = out_git.display(),
        );
        let started = Instant::now();
        let o = run_tyba(
            &who,
            &f.tyba,
            &f.wt,
            &base_env(&f.home, &[]),
            &[
                "run",
                "--here",
                "--non-interactive",
                "--",
                "bash",
                "-c",
                &script,
            ],
        );
        let elapsed = started.elapsed();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let ctx = format!("{who:?}\n--- stdout\n{out}\n--- stderr\n{err}");
        assert_eq!(o.status.code(), Some(0), "{ctx}");

        // Fault 1: nothing of the outside repository's configuration reaches anyone.
        assert!(!out.contains(SECRET) && !err.contains(SECRET), "{ctx}");
        assert!(!out.contains("alice") && !err.contains("alice"), "{ctx}");
        assert_ne!(step(&out, "cat").as_deref(), Some("0"), "{ctx}");
        // The outside push is still refused (judged without the repository: fail closed) …
        assert_eq!(step(&out, "outside").as_deref(), Some("126"), "{ctx}");
        assert!(err.contains("cannot resolve the push"), "{ctx}");
        // … and a push the classifier may resolve names its remote with the token redacted.
        assert_eq!(step(&out, "inside").as_deref(), Some("126"), "{ctx}");
        assert!(
            err.contains("refs/heads/main on remote origin (https://***@github.com/x/y)"),
            "{ctx}"
        );

        // Fault 2: both FIFO repositories are refused, the second at the deadline.
        assert_eq!(step(&out, "fifo").as_deref(), Some("126"), "{ctx}");
        assert_eq!(step(&out, "fifo2").as_deref(), Some("126"), "{ctx}");
        assert!(
            err.contains("classifying the command took longer than 5 s"),
            "{ctx}"
        );
        let took: u64 = out
            .lines()
            .find_map(|l| {
                l.split_once("took=")
                    .map(|(_, t)| t.trim().parse().unwrap())
            })
            .unwrap();
        assert!(
            took <= 8,
            "refused within the deadline, not {took} s: {ctx}"
        );
        // The session goes on: a green command runs, a red one is still refused.
        assert_eq!(step(&out, "ls").as_deref(), Some("0"), "{ctx}");
        assert!(out.contains("README.md"), "{ctx}");
        assert_eq!(step(&out, "rm").as_deref(), Some("126"), "{ctx}");
        assert!(f.outside.join(".git/config").exists(), "{ctx}");
        assert!(elapsed < Duration::from_secs(60), "{ctx}");
    }
}
