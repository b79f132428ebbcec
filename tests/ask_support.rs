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
use std::process::{Child, Command, Output, Stdio};
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
        self.start_argv(extra, &[], &["bash", "-c", script])
    }

    /// Starts `tyba run --here EXTRA -- ARGV` in the background, with `env` added to tyba's
    /// own environment (stdin closed, as [`Fx::start`]).
    pub fn start_argv(&self, extra: &[&str], env: &[(&str, &str)], argv: &[&str]) -> Session {
        let mut c = command_as(&self.who, &self.tyba);
        c.arg("run").arg("--here").args(extra).arg("--").args(argv);
        c.current_dir(&self.wt).env_clear().stdin(Stdio::null());
        for (k, v) in self.env() {
            c.env(k, v);
        }
        for (k, v) in env {
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

/// A tmux server of the test's own (its socket in the fixture's runtime dir), running as the
/// fixture's user, with one pane `t` running a script: a person's terminal, driven by tmux
/// keys and read from tmux's own rendering of the screen (`tests/ask_terminal.rs`, the agents'
/// TUIs in `tests/agent_*.rs`).
#[derive(Debug)]
pub struct Tmux {
    pub sock: PathBuf,
    pub who: Who,
    pub home: PathBuf,
}

impl Tmux {
    /// Writes `script` (a `#!/bin/sh` script) to the runtime dir as `run.sh` and starts it in
    /// a detached pane of `cols`×`rows`; the pane stays after the script ends
    /// (`remain-on-exit`), so what it printed last can still be read.
    pub fn start(fx: &Fx, script: &str, cols: usize, rows: usize) -> Tmux {
        let run = fx.runtime.join("run.sh");
        write_exe(&run, script);
        give(&run, &fx.who);
        let t = Tmux {
            sock: fx.runtime.join("tmux.sock"),
            who: fx.who.clone(),
            home: fx.home.clone(),
        };
        let o = t.cmd(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            &run.display().to_string(),
        ]);
        assert!(
            o.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        t.cmd(&["set-option", "-t", "t", "remain-on-exit", "on"]);
        t
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        let mut c = command_as(&self.who, Path::new("/usr/bin/tmux"));
        c.arg("-f")
            .arg("/dev/null")
            .arg("-S")
            .arg(&self.sock)
            .args(args);
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("TERM", "xterm")
            .env("LANG", "C.UTF-8");
        c.output().unwrap()
    }

    /// The pane's screen as tmux renders it, one string per row.
    pub fn screen(&self) -> Vec<String> {
        let o = self.cmd(&["capture-pane", "-p", "-t", "t"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The pane's whole history and screen, wrapped lines joined (`capture-pane -J`).
    pub fn history(&self) -> String {
        let o = self.cmd(&["capture-pane", "-p", "-J", "-S", "-", "-t", "t"]);
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Waits (up to 60 s) for the screen to show `needle`.
    pub fn wait(&self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let s = self.screen();
            if s.iter().any(|l| l.contains(needle)) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "never showed {needle:?}:\n{}",
                s.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` one key at a time, `gap` apart, like a person typing.
    pub fn type_text(&self, text: &str, gap: Duration) {
        for c in text.chars() {
            self.cmd(&["send-keys", "-t", "t", "-l", &c.to_string()]);
            std::thread::sleep(gap);
        }
    }

    /// Sends a whole line at once, then Enter (the agent's shell gets it).
    pub fn line(&self, text: &str) {
        self.cmd(&["send-keys", "-t", "t", "-l", text]);
        self.cmd(&["send-keys", "-t", "t", "Enter"]);
    }

    /// One key named as tmux names it (`o`, `Enter`, `C-c`, `Space`), pressed by a person
    /// who read the prompt first.
    pub fn press(&self, key: &str) {
        std::thread::sleep(Duration::from_millis(1100));
        self.cmd(&["send-keys", "-t", "t", key]);
    }

    /// Whether the pane's script still runs.
    pub fn alive(&self) -> bool {
        let o = self.cmd(&["display-message", "-p", "-t", "t", "#{pane_dead}"]);
        o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "0"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Installs a fake agent program as npm installs a package with a `bin` entry, under
/// `prefix` (`~/.npm-global`, outside the worktree): `lib/node_modules/fake-agent` with its
/// `package.json` and `bin/agent.js` (`script`, executable), and `bin/fake-agent` linking to
/// it. An installation of its own, so the agent program (`crate::agent`), not an interpreter.
/// Returns the `bin` directory to put on `PATH`.
pub fn install_npm_agent(prefix: &Path, script: &str) -> PathBuf {
    let pkg = prefix.join("lib/node_modules/fake-agent");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"fake-agent","version":"1.0.0","bin":{"fake-agent":"bin/agent.js"}}"#,
    )
    .unwrap();
    write_exe(&pkg.join("bin/agent.js"), script);
    std::os::unix::fs::symlink(
        "../lib/node_modules/fake-agent/bin/agent.js",
        prefix.join("bin/fake-agent"),
    )
    .unwrap();
    prefix.join("bin")
}

/// Asserts that `text` holds each of `lines` (`who` and `what` name the check).
pub fn assert_has_all(who: &Who, what: &str, text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{who:?}: {what}: {line}: {text}");
    }
}

/// An agent (Python) that runs ARGV on a new terminal (its stdin, stdout and stderr, its
/// controlling tty: where git pages) and prints `RESULT {"step": "pty", "rc": …, "out": …}`.
pub const PTY_PY: &str = r#"
import fcntl, json, os, struct, subprocess, sys, termios
m, s = os.openpty()
fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))

def controlling_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)

p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, preexec_fn=controlling_tty)
os.close(s)
out = b""
while True:
    try:
        b = os.read(m, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
print("RESULT " + json.dumps({"step": "pty", "rc": p.wait(), "out": out.decode(errors="replace")}), flush=True)
"#;
