//! Shared helpers: the corpus, the fixture, a clean git environment.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace's test data directory (`tests/data`).
pub fn data_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.join("tests/data/git-push.jsonl").exists() {
        here.join("tests/data")
    } else {
        here.join("../tests/data")
    }
}

/// One case of git-push.jsonl.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Case {
    pub id: String,
    pub setup: Vec<String>,
    pub cmd: String,
    pub expect: String,
    pub layer: String,
    pub effect: Vec<String>,
    pub note: String,
}

pub fn load_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(data_dir().join("git-push.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad corpus line {l}: {e}")))
        .collect()
}

/// A `git` (or `bash`) command with a clean environment: no GIT_* from the caller, HOME set to
/// an empty directory, no system config.
pub fn clean(mut cmd: Command, home: &Path) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("LC_ALL", "C")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid");
    cmd
}

/// Sets this test process's environment like [`clean`] (for in-process gix reads). Call it
/// from the only test of a test binary, before anything else.
pub fn isolate_process(home: &Path) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GIT_") {
            std::env::remove_var(&k);
        }
    }
    std::env::set_var("HOME", home);
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    std::env::set_var("XDG_CONFIG_HOME", home.join(".config"));
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh fixture in `root/fx` (git_fixture.sh), returning DIR.
pub fn fixture(root: &Path, home: &Path) -> PathBuf {
    let dir = root.join("fx");
    let mut c = clean(Command::new("bash"), home);
    c.arg(data_dir().join("git_fixture.sh")).arg(&dir);
    run_ok(&mut c);
    dir.canonicalize().unwrap()
}

/// Isolates this process once (HOME set to a fresh empty directory that lives as long as the
/// process, no GIT_* variables, no system config) and returns that HOME. Safe to call from
/// every test of a binary: the first caller sets the environment, the others wait for it.
pub fn isolate_once() -> &'static Path {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        let home = tempfile::tempdir().unwrap();
        isolate_process(home.path());
        home
    })
    .path()
}

/// Runs a case's setup lines in DIR/work with `$FIXTURE` set.
pub fn setup(dir: &Path, home: &Path, lines: &[String]) {
    for l in lines {
        let mut c = clean(Command::new("bash"), home);
        c.arg("-c")
            .arg(l)
            .current_dir(dir.join("work"))
            .env("FIXTURE", dir);
        run_ok(&mut c);
    }
}

pub fn subst(s: &str, dir: &Path) -> String {
    s.replace("$FIXTURE", &dir.display().to_string())
}

pub fn protected() -> Vec<String> {
    vec!["main".to_string(), "master".to_string()]
}

/// Every ref of a repository: `name oid` lines.
pub fn refs_of(repo: &Path, home: &Path) -> Vec<String> {
    let mut c = clean(Command::new("git"), home);
    c.arg("-C")
        .arg(repo)
        .args(["for-each-ref", "--format=%(refname) %(objectname)"]);
    let out = c.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
