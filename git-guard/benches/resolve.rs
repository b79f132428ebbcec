//! Benchmarks of the git guard on a repository with 10,000 refs (5,000 branches, 5,000 tags,
//! packed), with a local bare remote holding the same refs.
//!
//! - library: `Inspector::analyze` for an explicit push, a matching push (every branch is
//!   compared with the remote), the default push; pre-push input parsing;
//! - processes (when a `tyba` binary is found: `$TYBA_BIN`, else `target/release/tyba`, else
//!   `target/debug/tyba`): the hook script git runs (`.git/hooks/pre-push`), the bare
//!   `tyba git-guard pre-push` process, and `git push --dry-run` with and without the hook,
//!   each next to a baseline measured in the same run: the `git rev-parse HEAD` process.
//!
//! Run: `cargo build --release && cargo bench -p tyba-git-guard`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tyba_git_guard::Inspector;
use tyba_policy::GitInvocation;

const REFS: usize = 10_000;

struct Fixture {
    _root: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    origin: PathBuf,
}

fn git(f_home: &Path, dir: &Path) -> Command {
    let mut c = Command::new("git");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            c.env_remove(&k);
        }
    }
    c.current_dir(dir)
        .env("HOME", f_home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.invalid")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.invalid");
    c
}

fn ok(c: &mut Command) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::env::set_var("HOME", &home);
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let work = root.path().join("work");
    ok(git(&home, root.path()).args(["init", "-q", "-b", "main", "work"]));
    ok(git(&home, &work).args(["commit", "-q", "--allow-empty", "-m", "c1"]));
    ok(git(&home, &work).args(["branch", "feature"]));
    let head = String::from_utf8(
        git(&home, &work)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let head = head.trim();
    let mut input = String::new();
    for i in 0..REFS / 2 {
        input.push_str(&format!(
            "create refs/heads/b{i:05} {head}\ncreate refs/tags/t{i:05} {head}\n"
        ));
    }
    let mut child = git(&home, &work)
        .args(["update-ref", "--stdin"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    ok(git(&home, &work).args(["pack-refs", "--all"]));
    let origin = root.path().join("origin.git");
    ok(git(&home, root.path()).args(["clone", "-q", "--bare", "work", "origin.git"]));
    ok(git(&home, &work)
        .arg("remote")
        .arg("add")
        .arg("origin")
        .arg(&origin));
    ok(git(&home, &work).args(["fetch", "-q", "origin"]));
    ok(git(&home, &work).args(["branch", "-q", "-u", "origin/main"]));
    Fixture {
        _root: root,
        home,
        work,
        origin,
    }
}

fn tyba_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TYBA_BIN") {
        return Some(PathBuf::from(p));
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    ["release/tyba", "debug/tyba"]
        .iter()
        .map(|p| target.join(p))
        .find(|p| p.is_file())
}

fn library(c: &mut Criterion) {
    let f = fixture();
    let protected = vec!["main".to_string(), "master".to_string()];
    let inspector = Inspector::new();
    let mut g = c.benchmark_group("library_10k_refs");
    g.sample_size(30).measurement_time(Duration::from_secs(5));
    for (name, words) in [
        (
            "explicit feature:main",
            vec!["push", "origin", "feature:main"],
        ),
        ("matching :", vec!["push", "origin", ":"]),
        ("default push", vec!["push"]),
        ("non-push (status)", vec!["status"]),
    ] {
        let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        g.bench_function(name, |b| {
            b.iter(|| {
                let inv = GitInvocation {
                    args: &args,
                    env: &[],
                    cwd: &f.work,
                    protected: &protected,
                };
                black_box(inspector.analyze(&inv))
            })
        });
    }
    let line = format!(
        "refs/heads/feature {0} refs/heads/feature {0}\n",
        "a".repeat(40)
    );
    let input = line.repeat(1000);
    g.bench_function("parse 1000 hook lines", |b| {
        b.iter(|| black_box(tyba_git_guard::hook::parse_hook_input(&input).unwrap()))
    });
    g.finish();
}

fn processes(c: &mut Criterion) {
    let Some(tyba) = tyba_bin() else {
        eprintln!("no tyba binary (build it, or set TYBA_BIN): process benchmarks skipped");
        return;
    };
    let f = fixture();
    ok(Command::new(&tyba)
        .args(["git-guard", "install", "--repo"])
        .arg(&f.work)
        .env("HOME", &f.home));
    let hook = f.work.join(".git/hooks/pre-push");
    let head = String::from_utf8(
        git(&f.home, &f.work)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let input = format!(
        "refs/heads/feature {0} refs/heads/feature {0}\n",
        head.trim()
    );
    let url = f.origin.display().to_string();
    let run_with_input = |cmd: &mut Command| {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    };
    let mut g = c.benchmark_group("process_10k_refs");
    g.sample_size(30).measurement_time(Duration::from_secs(8));
    g.bench_function("baseline: git rev-parse HEAD", |b| {
        b.iter(|| ok(git(&f.home, &f.work).args(["rev-parse", "HEAD"])))
    });
    g.bench_function("tyba git-guard pre-push (process)", |b| {
        b.iter(|| {
            run_with_input(
                Command::new(&tyba)
                    .args(["git-guard", "pre-push", "origin", &url])
                    .current_dir(&f.work)
                    .env("HOME", &f.home),
            )
        })
    });
    g.bench_function("pre-push hook script (as git runs it)", |b| {
        b.iter(|| {
            run_with_input(
                Command::new(&hook)
                    .args(["origin", &url])
                    .current_dir(&f.work)
                    .env("HOME", &f.home),
            )
        })
    });
    // the script `install` writes when it keeps a previous hook
    let chained_dir = tempfile::tempdir().unwrap();
    let chained_hook = chained_dir.path().join("pre-push");
    std::fs::write(
        &chained_hook,
        tyba_git_guard::hook::hook_script(&tyba, true),
    )
    .unwrap();
    std::fs::write(
        chained_dir.path().join("pre-push.tyba-chained"),
        "#!/bin/sh\ncat >/dev/null\nexit 0\n",
    )
    .unwrap();
    ok(Command::new("chmod")
        .arg("+x")
        .arg(&chained_hook)
        .arg(chained_dir.path().join("pre-push.tyba-chained")));
    g.bench_function("pre-push hook script chaining a previous hook", |b| {
        b.iter(|| {
            run_with_input(
                Command::new(&chained_hook)
                    .args(["origin", &url])
                    .current_dir(&f.work)
                    .env("HOME", &f.home),
            )
        })
    });
    g.bench_function("git push --dry-run origin feature (hook installed)", |b| {
        b.iter(|| {
            ok(git(&f.home, &f.work).args([
                "push",
                "-q",
                "--dry-run",
                "origin",
                "feature:feature2",
            ]))
        })
    });
    g.bench_function(
        "git push --dry-run origin feature (--no-verify, no hook)",
        |b| {
            b.iter(|| {
                ok(git(&f.home, &f.work).args([
                    "push",
                    "-q",
                    "--dry-run",
                    "--no-verify",
                    "origin",
                    "feature:feature2",
                ]))
            })
        },
    );
    g.bench_function("tyba git-guard check -- git push origin :", |b| {
        b.iter(|| {
            let out = Command::new(&tyba)
                .args(["git-guard", "check", "--", "git", "push", "origin", ":"])
                .current_dir(&f.work)
                .env("HOME", &f.home)
                .output()
                .unwrap();
            black_box(out)
        })
    });
    g.finish();
}

criterion_group!(benches, library, processes);
criterion_main!(benches);
