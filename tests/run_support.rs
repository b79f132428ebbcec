//! Shared harness for the `tyba run` and escape tests (included with `#[path]` by
//! `tests/run_*.rs` and `tests/escapes_*.rs`; as its own test crate it has no tests).
//!
//! - The sandbox is only ever installed in child processes (the `tyba` binary), never here.
//! - As root, the unprivileged runs use `TYBA_TEST_USER` (set by `.ci/run`): the binary is
//!   copied to a world-readable temp dir, fixtures are made owned by that user, and the binary
//!   runs under `setpriv` with that user's ids (works from a clone the user cannot read).
//! - `TYBA_REQUIRE_SANDBOX=1` turns a missing kernel feature or test user into a failure.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Whether a missing feature must fail the test.
pub fn require_sandbox() -> bool {
    std::env::var("TYBA_REQUIRE_SANDBOX").is_ok_and(|v| v == "1")
}

/// Who runs the `tyba` binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// The test process's own user (root in CI).
    Me,
    /// Another, unprivileged user.
    User { name: String, uid: u32, gid: u32 },
}

fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&name))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

/// The uid of the test process.
pub fn my_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

/// The unprivileged user tests run as when root and `TYBA_TEST_USER` is unset.
pub const DEFAULT_TEST_USER: &str = "tyba-ci";

/// The unprivileged user to test as: ourselves when not root, else `TYBA_TEST_USER`, else
/// [`DEFAULT_TEST_USER`] when it exists.
/// `None` (with a message) when there is none and the sandbox is not required.
pub fn unprivileged() -> Option<Who> {
    if my_uid() != 0 {
        return Some(Who::Me);
    }
    match std::env::var("TYBA_TEST_USER")
        .ok()
        .filter(|s| !s.is_empty())
    {
        Some(name) => match lookup_user(&name) {
            Some((uid, gid)) => Some(Who::User { name, uid, gid }),
            None => {
                assert!(!require_sandbox(), "TYBA_TEST_USER={name} does not exist");
                eprintln!("SKIP: TYBA_TEST_USER={name} does not exist");
                None
            }
        },
        None => {
            // The user `.ci/run` and `scripts/install-test-agents` create, when it exists.
            if let Some((uid, gid)) = lookup_user(DEFAULT_TEST_USER) {
                return Some(Who::User {
                    name: DEFAULT_TEST_USER.to_string(),
                    uid,
                    gid,
                });
            }
            assert!(
                !require_sandbox(),
                "running as root without TYBA_TEST_USER: cannot test as an unprivileged user"
            );
            eprintln!(
                "SKIP: root without TYBA_TEST_USER and no user {DEFAULT_TEST_USER}: the unprivileged run is skipped (scripts/install-test-agents creates it)"
            );
            None
        }
    }
}

/// A temp dir every user can enter, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    /// A directory of its own for each call: two tests of one binary with the same tag
    /// started within the clock's resolution got one shared directory (a CI failure: one
    /// test's git found the other's `index.lock`). A counter of the process tells them apart,
    /// and `create_dir` (not `create_dir_all`) fails on a name already taken, tried again.
    pub fn new(tag: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        let dir = loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!(
                "tyba-test-{tag}-{}-{n}-{nanos}",
                std::process::id()
            ));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("{}: {e}", dir.display()),
            }
        };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch {
            dir: std::fs::canonicalize(&dir).unwrap(),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Gives `path` (recursively) to `who`.
pub fn give(path: &Path, who: &Who) {
    if let Who::User { uid, gid, .. } = who {
        let st = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success(), "chown {}", path.display());
    }
}

/// The `tyba` binary as `who` can run it (a world-readable copy for another user).
pub fn tyba_for(who: &Who, scratch: &Scratch) -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_tyba"));
    match who {
        Who::Me => built,
        Who::User { .. } => {
            let dir = scratch.dir.join("bin");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            let dst = dir.join("tyba");
            copy_exe(&built, &dst);
            dst
        }
    }
}

/// Copies the executable `src` to `dst` (mode 0755) in a child process (`install`), so that
/// no write fd of the new file ever exists in this multi-threaded test process: a child
/// another test forks meanwhile would inherit it until its own exec, and running `dst`
/// would then fail with `ETXTBSY` ("Text file busy").
pub fn copy_exe(src: &Path, dst: &Path) {
    let st = Command::new("install")
        .arg("-m")
        .arg("0755")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success(), "install {} {}", src.display(), dst.display());
}

/// Writes an executable script at `path` (mode 0755) from a child process, for the same
/// reason as [`copy_exe`].
pub fn write_exe(path: &Path, contents: &str) {
    use std::io::Write as _;
    let mut c = Command::new("sh")
        .arg("-c")
        .arg(r#"cat > "$0" && chmod 755 "$0""#)
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(contents.as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success(), "writing {}", path.display());
}

/// Every user to test as: ourselves, and the unprivileged user when we are root.
pub fn whos() -> Vec<Who> {
    let mut v = vec![Who::Me];
    if let Some(u) = unprivileged() {
        if u != Who::Me {
            v.push(u);
        }
    }
    v
}

/// A scratch tree for one sandbox test as `who`: `root/home` (an empty HOME) and
/// `root/repo` (a committed repository), both owned by `who`, and the `tyba` binary `who` can
/// run.
#[derive(Debug)]
pub struct SandboxRepo {
    /// Removed on drop.
    pub scratch: Scratch,
    /// `scratch/f`.
    pub root: PathBuf,
    /// The repository, the session's worktree.
    pub wt: PathBuf,
    /// The fake HOME.
    pub home: PathBuf,
    /// The binary to run.
    pub tyba: PathBuf,
}

/// Makes a [`SandboxRepo`], or `None` (after a skip message) when the sandbox cannot start
/// here (a failure instead under `TYBA_REQUIRE_SANDBOX=1`).
pub fn sandbox_repo(who: &Who, tag: &str) -> Option<SandboxRepo> {
    let scratch = Scratch::new(tag);
    let tyba = tyba_for(who, &scratch);
    let root = scratch.dir.join("f");
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    give(&root, who);
    let wt = root.join("repo");
    make_repo(who, &wt);
    if !sandbox_works(who, &tyba, &wt, &home) {
        return None;
    }
    Some(SandboxRepo {
        scratch,
        root,
        wt,
        home,
        tyba,
    })
}

/// A command that runs `program` as `who`.
pub fn command_as(who: &Who, program: &Path) -> Command {
    match who {
        Who::Me => Command::new(program),
        Who::User { uid, gid, .. } => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg("--")
                .arg(program);
            c
        }
    }
}

/// Runs `git` in `dir` as `who` (so files it makes are the user's).
pub fn git_as(who: &Who, dir: &Path, args: &[&str]) -> Output {
    let mut c = command_as(who, Path::new("/usr/bin/env"));
    c.arg("git").arg("-C").arg(dir).args(args);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com");
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A repository with one commit at `dir`, owned by `who`.
pub fn make_repo(who: &Who, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("README.md"), "hello\n").unwrap();
    give(dir, who);
    git_as(who, dir, &["init", "-q", "-b", "main"]);
    git_as(who, dir, &["add", "."]);
    git_as(who, dir, &["commit", "-q", "-m", "init"]);
}

/// The environment the sandboxed agent gets in tests: a fake HOME, a plain PATH, git
/// identity, plus `extra`.
pub fn base_env(home: &Path, extra: &[(&str, OsString)]) -> Vec<(OsString, OsString)> {
    let mut v: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), home.into()),
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_AUTHOR_NAME".into(), "agent".into()),
        ("GIT_AUTHOR_EMAIL".into(), "agent@example.com".into()),
        ("GIT_COMMITTER_NAME".into(), "agent".into()),
        ("GIT_COMMITTER_EMAIL".into(), "agent@example.com".into()),
        ("XDG_STATE_HOME".into(), home.join(".local/state").into()),
        ("XDG_CONFIG_HOME".into(), home.join(".config").into()),
    ];
    for (k, val) in extra {
        v.push(((*k).into(), val.clone()));
    }
    v
}

/// The control of an escape test: `bash -c SCRIPT` as `who` in `dir`, without the sandbox,
/// with exactly `env`. Returns its stdout.
pub fn bare_bash_as(who: &Who, dir: &Path, env: &[(OsString, OsString)], script: &str) -> String {
    let mut c = command_as(who, Path::new("/bin/bash"));
    c.arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `tyba ARGS` as `who` in `cwd` with exactly `env`, stdin closed, within `timeout`.
pub fn run_tyba(
    who: &Who,
    tyba: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
    args: &[&str],
) -> Output {
    let mut c = command_as(who, tyba);
    c.args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its output is read while it runs (an output over a pipe's 64 KiB, such as a long audit
    // log, would otherwise block it until the deadline); past 120 s it is killed.
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = std::sync::Arc::clone(&done);
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::time::Instant::now() < deadline {
            if d.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if !d.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
        }
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

/// Fails (with `TYBA_REQUIRE_SANDBOX=1`) or reports a skip when `tyba run` cannot start a
/// sandbox here (exit status 4). Returns whether the sandbox works.
pub fn sandbox_works(who: &Who, tyba: &Path, cwd: &Path, home: &Path) -> bool {
    let o = run_tyba(
        who,
        tyba,
        cwd,
        &base_env(home, &[]),
        &["run", "--here", "--non-interactive", "--", "/bin/true"],
    );
    if o.status.code() == Some(4) {
        let msg = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            !require_sandbox(),
            "the sandbox is unavailable and TYBA_REQUIRE_SANDBOX=1: {msg}"
        );
        eprintln!("SKIP: sandbox unavailable: {msg}");
        return false;
    }
    assert!(
        o.status.success(),
        "tyba run -- true failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    true
}

/// Collects failures and reports them all at once.
#[derive(Debug, Default)]
pub struct Checks {
    pub failures: Vec<String>,
    pub passed: usize,
}

impl Checks {
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        if ok {
            self.passed += 1;
        } else {
            self.failures.push(what.into());
        }
    }

    pub fn finish(self, context: &str) {
        assert!(
            self.failures.is_empty(),
            "{context}: {} of {} checks failed:\n  {}",
            self.failures.len(),
            self.failures.len() + self.passed,
            self.failures.join("\n  ")
        );
    }
}
