//! Shared harness for the asking tests (included with `#[path]` by `tests/ask_*.rs`; as its
//! own test crate it has no tests): a `tyba run --here` session started in the background
//! without `--non-interactive`, answered by a scripted person through `tyba inbox/approve/
//! deny`, as the test's user and as the unprivileged `TYBA_TEST_USER`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

pub use support::*;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One fixture: a repository, a home, a private runtime dir, the binary.
#[derive(Debug)]
pub struct Fx {
    pub scratch: Scratch,
    pub wt: PathBuf,
    pub home: PathBuf,
    pub runtime: PathBuf,
    pub tyba: PathBuf,
    pub who: Who,
}

/// A fixture for `who`, or `None` (after a skip message) when the sandbox cannot start here.
pub fn setup(who: &Who, tag: &str) -> Option<Fx> {
    let r = sandbox_repo(who, tag)?;
    let runtime = r.root.join("rt");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    give(&runtime, who);
    Some(Fx {
        scratch: r.scratch,
        wt: r.wt,
        home: r.home,
        runtime,
        tyba: r.tyba,
        who: who.clone(),
    })
}

impl Fx {
    /// The environment of `tyba` (session and CLI alike).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        base_env(
            &self.home,
            &[("XDG_RUNTIME_DIR", self.runtime.clone().into_os_string())],
        )
    }

    /// Runs a CLI command (`inbox`, `approve`, …) and returns (status, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let o = run_tyba(&self.who, &self.tyba, &self.wt, &self.env(), args);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Starts `tyba run --here -- bash -c SCRIPT` in the background (stdin closed, so no
    /// prompt: asks wait for the inbox).
    pub fn start(&self, extra: &[&str], script: &str) -> Session {
        let mut c = command_as(&self.who, &self.tyba);
        c.arg("run").arg("--here").args(extra);
        c.args(["--", "bash", "-c", script]);
        c.current_dir(&self.wt).env_clear().stdin(Stdio::null());
        for (k, v) in self.env() {
            c.env(k, v);
        }
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Session { child }
    }

    /// The pending asks of every live session, waiting up to 60 s for at least `n`.
    pub fn pending(&self, n: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (code, out, err) = self.cli(&["inbox", "--json"]);
            assert_eq!(code, 0, "tyba inbox: {err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let all: Vec<serde_json::Value> = v
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
                .collect();
            if all.len() >= n {
                return all;
            }
            assert!(Instant::now() < deadline, "never {n} pending asks: {v}");
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// The first pending ask: `(id, action)`.
    pub fn next_ask(&self) -> (String, String) {
        let p = self.pending(1);
        (
            p[0]["id"].as_str().unwrap().to_string(),
            p[0]["action"].as_str().unwrap().to_string(),
        )
    }

    /// The audit log of the only session that ran.
    pub fn log_lines(&self) -> Vec<serde_json::Value> {
        let (code, out, err) = self.cli(&["log", "--json"]);
        assert_eq!(code, 0, "tyba log: {err}");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A running `tyba run`.
#[derive(Debug)]
pub struct Session {
    pub child: Child,
}

impl Session {
    /// Waits (up to 120 s) for the end: (status, stdout, stderr).
    pub fn finish(mut self) -> (i32, String, String) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut out).unwrap();
        }
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        let st = self.child.wait().unwrap();
        (st.code().unwrap_or(-1), out, err)
    }
}

/// Whether a process with this pid exists.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Kills the process with `sig` (via kill(1)).
pub fn kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}
