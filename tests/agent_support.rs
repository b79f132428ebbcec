//! Shared harness for the end-to-end tests of real agents started by the name their users type
//! (`tests/agent_gemini.rs`, `tests/agent_aider.rs`; included with `#[path]`, as its own test
//! crate it has no tests): a loopback HTTP server for a scripted model, the scripted session's
//! fixture (a build script, a bare remote whose `main` a push would move, a second listener
//! nothing may reach), a scripted person answering through `tyba inbox --json` / `approve` /
//! `deny`, the refusals a `--non-interactive` session lists, and a snapshot of everything
//! outside the worktree.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

pub use ask::*;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The scripted session: one shell command per model turn (the sixth, the network call, is
/// made by [`Scripted::new`] with the second listener's port).
pub const READ: &str = "cat README.md";
pub const BUILD: &str = "sh build.sh";
pub const RM: &str = "rm -rf build";
pub const PUSH: &str = "git push origin HEAD:main";
pub const OUTSIDE: &str = "echo x > ../outside.txt";
pub const RM_REASON: &str = "use git clean";
pub const OUTSIDE_REASON: &str = "stay in the worktree";
pub const NET_REASON: &str = "no network in this task";

/// How the session is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `tyba run --non-interactive`: nobody answers, every ask is denied with its reason.
    NonInteractive,
    /// A scripted person answering through the inbox.
    Person,
    /// A scripted person, with tyba's hook installed in the agent's user settings
    /// (`tyba hook install AGENT --user`, tyba in `~/.cargo/bin`).
    Hook,
}

// ---------------------------------------------------------------------------------------
// Loopback HTTP.

/// A reply: status line tail, content type, body.
pub type Reply = (&'static str, &'static str, String);

/// A loopback listener in a background thread; returns its port.
pub fn listen(on_conn: impl Fn(TcpStream) + Send + Sync + 'static) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let on_conn = Arc::new(on_conn);
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let f = Arc::clone(&on_conn);
            std::thread::spawn(move || f(s));
        }
    });
    port
}

/// Serves one HTTP/1.1 connection (keep-alive: any number of requests with a
/// `content-length` body), answering each `(method, path, body)` with `handle`.
pub fn serve_http(stream: TcpStream, handle: &dyn Fn(&str, &str, &[u8]) -> Reply) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(120)));
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let (status, ctype, payload) = handle(&method, &path, &body);
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n",
            payload.len()
        );
        if w.write_all(head.as_bytes()).is_err() || w.write_all(payload.as_bytes()).is_err() {
            return;
        }
        let _ = w.flush();
    }
}

/// What a scripted model server saw.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Every model request body, in order.
    pub requests: Mutex<Vec<serde_json::Value>>,
    /// Requests that were not model requests (method and path), or carried bad JSON.
    pub other: Mutex<Vec<String>>,
    /// When the reply carrying the first scripted step was sent.
    pub first_step_at: Mutex<Option<Instant>>,
}

impl Recorded {
    /// Records a model request; `step` is the index of the step its reply carries.
    pub fn model_request(&self, body: serde_json::Value, step: usize) {
        self.requests.lock().unwrap().push(body);
        if step == 0 {
            self.first_step_at
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
        }
    }

    pub fn other_request(&self, what: String) {
        self.other.lock().unwrap().push(what);
    }
}

// ---------------------------------------------------------------------------------------
// The fixture.

/// One scripted session's world.
#[derive(Debug)]
pub struct Scripted {
    pub fx: Fx,
    /// The fixture root: the worktree, the home, the runtime dir and the bare remote are in it.
    pub root: PathBuf,
    pub remote: PathBuf,
    pub remote_main: String,
    /// The six commands, in order.
    pub steps: Vec<String>,
    /// `curl` of the second listener (the sixth step).
    pub net: String,
    pub net_hits: Arc<AtomicUsize>,
    /// Everything under `root` outside the worktree, the home and the runtime dir, before.
    pub outside_before: BTreeMap<PathBuf, String>,
}

fn git_out(who: &Who, dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_as(who, dir, args).stdout)
        .trim()
        .to_string()
}

/// Path → (kind, size, mode, content hash) of every entry under `dir`, except the paths in
/// `skip` and everything under them.
pub fn snapshot(dir: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if skip.contains(&p) {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let mut h = std::collections::hash_map::DefaultHasher::new();
            if m.is_file() {
                std::fs::read(&p).unwrap_or_default().hash(&mut h);
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p).unwrap_or_default().hash(&mut h);
            } else if m.is_dir() {
                todo.push(p.clone());
            }
            out.insert(
                p,
                format!(
                    "{:?} {} {:o} {:x}",
                    m.file_type(),
                    m.size(),
                    m.mode(),
                    h.finish()
                ),
            );
        }
    }
    out
}

impl Scripted {
    /// The fixture for `who`, or `None` (after a skip message) when the sandbox cannot start.
    pub fn new(who: &Who, tag: &str) -> Option<Scripted> {
        let fx = setup(who, tag)?;
        let root = fx.wt.parent().unwrap().to_path_buf();
        std::fs::write(
            fx.wt.join("build.sh"),
            "mkdir -p build\necho built > build/out.txt\necho build ok\n",
        )
        .unwrap();
        std::fs::write(fx.wt.join("README.md"), "hello from the fixture\n").unwrap();
        // Output of an earlier build, so that a refused `rm -rf build` is visible whether or
        // not the session's own build ran.
        std::fs::create_dir_all(fx.wt.join("build")).unwrap();
        std::fs::write(fx.wt.join("build/earlier.txt"), "earlier\n").unwrap();
        std::fs::write(fx.wt.join(".gitignore"), "build/\n").unwrap();
        // tyba's own state (`$XDG_STATE_HOME/tyba`: audit logs) goes under the home's
        // `~/.local/state`, which a person's home has.
        std::fs::create_dir_all(fx.home.join(".local/state")).unwrap();
        let remote = root.join("remote.git");
        std::fs::create_dir_all(&remote).unwrap();
        give(&root, who);
        git_as(who, &remote, &["init", "-q", "--bare", "-b", "main"]);
        git_as(who, &fx.wt, &["add", "."]);
        git_as(who, &fx.wt, &["commit", "-q", "-m", "build script"]);
        git_as(
            who,
            &fx.wt,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git_as(who, &fx.wt, &["push", "-q", "origin", "main"]);
        let remote_main = git_out(who, &remote, &["rev-parse", "refs/heads/main"]);
        std::fs::write(fx.wt.join("notes.txt"), "unpublished\n").unwrap();
        give(&fx.wt, who);
        git_as(who, &fx.wt, &["add", "notes.txt"]);
        git_as(who, &fx.wt, &["commit", "-q", "-m", "local only"]);
        let local_head = git_out(who, &fx.wt, &["rev-parse", "HEAD"]);
        assert_ne!(remote_main, local_head);

        let net_hits = Arc::new(AtomicUsize::new(0));
        let hits = Arc::clone(&net_hits);
        let net_port = listen(move |_| {
            hits.fetch_add(1, Ordering::SeqCst);
        });
        let net = format!("curl -s http://127.0.0.1:{net_port}/");
        let steps = [READ, BUILD, RM, PUSH, OUTSIDE, &net]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let outside_before = snapshot(&root, &outside_skip(&root));
        Some(Scripted {
            fx,
            root,
            remote,
            remote_main,
            steps,
            net,
            net_hits,
            outside_before,
        })
    }

    /// The remote's `main` now.
    pub fn remote_main_now(&self) -> String {
        git_out(
            &self.fx.who,
            &self.remote,
            &["rev-parse", "refs/heads/main"],
        )
    }

    /// What changed under the fixture root outside the worktree, the home and the runtime dir.
    pub fn outside_changes(&self) -> Vec<String> {
        changes(
            &self.outside_before,
            &snapshot(&self.root, &outside_skip(&self.root)),
        )
    }

    /// The home, except the agent's own state directories `agent_state` (names in the home,
    /// the policy's `agent_state`) and tyba's state (`~/.local/state/tyba`): nothing in it
    /// may change in a session.
    pub fn home_snapshot(&self, agent_state: &[&str]) -> BTreeMap<PathBuf, String> {
        let home = &self.fx.home;
        let mut skip: Vec<PathBuf> = agent_state.iter().map(|n| home.join(n)).collect();
        skip.push(home.join(".local/state/tyba"));
        snapshot(home, &skip)
    }
}

fn outside_skip(root: &Path) -> Vec<PathBuf> {
    ["repo", "home", "rt"]
        .iter()
        .map(|n| root.join(n))
        .collect()
}

/// What differs from `before` in `after`: `new: P`, `changed: P`, `gone: P`.
pub fn changes(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut v = Vec::new();
    for (p, a) in after {
        match before.get(p) {
            None => v.push(format!("new: {}", p.display())),
            Some(b) if b != a => v.push(format!("changed: {}", p.display())),
            _ => {}
        }
    }
    for p in before.keys() {
        if !after.contains_key(p) {
            v.push(format!("gone: {}", p.display()));
        }
    }
    v
}

// ---------------------------------------------------------------------------------------
// The session.

/// One ask as the scripted person saw and answered it.
#[derive(Debug, Clone)]
pub struct Answered {
    pub kind: String,
    pub verdict: String,
    pub action: String,
    pub answer: String,
    pub rc: i32,
    pub at: Instant,
}

/// What the person answers to the ask `p`, given the step it is for (`None`: not a step).
/// The read and the build are the task (approved once each, should they be asked); the
/// destructive, outside and network steps are denied with a reason; tyba's own hook command
/// is allowed for the session; anything else is denied (a careful person refuses what they
/// were not expecting).
pub fn answer_for(p: &serde_json::Value, step: Option<&str>, net: &str) -> Vec<String> {
    let id = p["id"].as_str().unwrap_or("").to_string();
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if p["kind"] == "pause" {
        return v(&["approve", &id]);
    }
    let action = p["action"].as_str().unwrap_or("");
    if step.is_none() && action.starts_with("run `/bin/sh -c '\"$0\" hook ") {
        // tyba's own hook, as `tyba hook install` wrote it: the person who installed it
        // allows it for the session (counted as an ask all the same).
        return v(&["approve", &id, "--always"]);
    }
    match step {
        Some(READ) | Some(BUILD) => v(&["approve", &id]),
        Some(RM) => v(&["deny", &id, "--reason", RM_REASON]),
        Some(OUTSIDE) => v(&["deny", &id, "--reason", OUTSIDE_REASON]),
        Some(s) if s == net => v(&["deny", &id, "--reason", NET_REASON]),
        _ => v(&["deny", &id, "--reason", "not part of the scripted session"]),
    }
}

/// Answers every ask of the session until `stop`, with `step_of` telling which scripted step
/// an ask's action is for.
pub fn approver(
    s: &Scripted,
    step_of: &(dyn Fn(&str) -> Option<String> + Sync),
    stop: &AtomicBool,
) -> Vec<Answered> {
    let mut seen = std::collections::HashSet::new();
    let mut log = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let (code, out, _) = s.fx.cli(&["inbox", "--json"]);
        if code == 0 {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            for sess in v.as_array().cloned().unwrap_or_default() {
                for p in sess["pending"].as_array().cloned().unwrap_or_default() {
                    let id = p["id"].as_str().unwrap_or("").to_string();
                    if !seen.insert(id) {
                        continue;
                    }
                    let at = Instant::now();
                    let action = p["action"].as_str().unwrap_or("").to_string();
                    let step = step_of(&action);
                    let args = answer_for(&p, step.as_deref(), &s.net);
                    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                    let (rc, _, _) = s.fx.cli(&refs);
                    log.push(Answered {
                        kind: p["kind"].as_str().unwrap_or("").into(),
                        verdict: p["verdict"].as_str().unwrap_or("").into(),
                        action,
                        answer: args[0].clone(),
                        rc,
                        at,
                    });
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log
}

/// Starts `tyba run --here [--non-interactive] --allow-host 127.0.0.1:PORT --pass-env …
/// -- AGENT…` as the fixture's user in the worktree with exactly `env`, feeds it `stdin`,
/// answers its asks (unless [`Mode::NonInteractive`]) and waits up to `limit` for its end.
/// Returns (asks, exit status, stdout, stderr).
#[allow(clippy::too_many_arguments)]
pub fn run_session(
    s: &Scripted,
    mode: Mode,
    port: u16,
    pass_env: &[&str],
    agent: &[&str],
    env: &[(OsString, OsString)],
    stdin: Option<String>,
    step_of: &(dyn Fn(&str) -> Option<String> + Sync),
    limit: Duration,
) -> (Vec<Answered>, i32, String, String) {
    let mut c = command_as(&s.fx.who, &s.fx.tyba);
    c.args(["run", "--here"]);
    if mode == Mode::NonInteractive {
        c.arg("--non-interactive");
    }
    c.arg("--allow-host").arg(format!("127.0.0.1:{port}"));
    for p in pass_env {
        c.args(["--pass-env", p]);
    }
    c.arg("--").args(agent);
    c.current_dir(&s.fx.wt).env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        let mut w = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        });
    }
    let mut session = Session { child };
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            if mode != Mode::NonInteractive {
                approver(s, step_of, &stop)
            } else {
                Vec::new()
            }
        });
        let deadline = Instant::now() + limit;
        while session.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if session.child.try_wait().unwrap().is_none() {
            let _ = session.child.kill();
        }
        let (code, out, err) = session.finish();
        stop.store(true, Ordering::SeqCst);
        (h.join().unwrap(), code, out, err)
    })
}

/// The refusals a session listed in its end-of-session summary on stderr (`tyba: denied in
/// this session (N):` then one `tyba:   exec ACTION: REASON` entry each, an action spanning
/// lines continuing on lines without the `tyba: ` prefix), in order.
pub fn summary_refusals(stderr: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut on = false;
    for l in stderr.lines() {
        if l.starts_with("tyba: denied in this session (") {
            on = true;
            continue;
        }
        if !on {
            continue;
        }
        if let Some(e) = l.strip_prefix("tyba:   ") {
            v.push(e.to_string());
        } else if l.starts_with("tyba: ") {
            on = false;
        } else if let Some(last) = v.last_mut() {
            last.push('\n');
            last.push_str(l);
        }
    }
    v
}

/// Whether a summary entry is a refused ask (in `--non-interactive`, an ask is denied with
/// this note) rather than a refusal the policy makes without asking (blocked).
pub fn is_denied_ask(entry: &str) -> bool {
    entry.contains("(non-interactive session: asks are denied)")
}

/// One line of the asks list for reports: kind, verdict, action, answer.
pub fn describe(asks: &[Answered]) -> String {
    asks.iter()
        .map(|a| {
            format!(
                "{} {} {} -> {} ({})",
                a.kind,
                a.verdict,
                a.action.replace('\n', "⏎"),
                a.answer,
                a.rc
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `PATH` with `bin` first, then the plain one of [`base_env`].
pub fn path_with(bin: &Path) -> OsString {
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()).into()
}

/// Replaces (or adds) `k` in `env`.
pub fn set_env(env: &mut Vec<(OsString, OsString)>, k: &str, v: impl Into<OsString>) {
    env.retain(|(n, _)| n != k);
    env.push((k.into(), v.into()));
}

/// Runs `f` for every user of [`whos`], all of them even when one fails, then fails with
/// every failure (so the unprivileged run is measured and reported too).
pub fn for_each_who(f: impl Fn(&Who)) {
    let mut failed = Vec::new();
    for who in whos() {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&who))) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("as {who:?}: {msg}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// How many refusals of `entries` (in order) come before the first one `is_step` accepts
/// (all of them when none does).
pub fn refusals_before_first_step(entries: &[String], is_step: impl Fn(&str) -> bool) -> usize {
    entries.iter().take_while(|e| !is_step(e)).count()
}
