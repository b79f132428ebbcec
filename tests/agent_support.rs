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
/// A push to `main` from inside a build tool: `make publish` runs `git push origin HEAD:main`
/// (added to the session by [`Scripted::with_make_push`]).
pub const MAKE_PUSH: &str = "make publish";
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
    /// Model requests the agent makes for itself besides the session (Codex's TUI asks for a
    /// thread title, offering no tools), answered with a plain message: what they hold is
    /// not what the model read of the session, and their replies carry no step.
    pub side: Mutex<Vec<String>>,
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

    /// Records a side request ([`Recorded::side`]), described by `what`.
    pub fn side_request(&self, what: String) {
        self.side.lock().unwrap().push(what);
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
        std::fs::write(
            fx.wt.join("Makefile"),
            "publish:\n\tgit push origin HEAD:main\n",
        )
        .unwrap();
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

    /// The session with [`MAKE_PUSH`] after the direct push: the push to `main` from inside
    /// an approved build tool.
    pub fn with_make_push(mut self) -> Scripted {
        let at = self
            .steps
            .iter()
            .position(|c| c == PUSH)
            .map_or(0, |i| i + 1);
        self.steps.insert(at, MAKE_PUSH.to_string());
        self
    }

    /// The index of step `c` in [`Scripted::steps`].
    pub fn index(&self, c: &str) -> usize {
        self.steps.iter().position(|s| s == c).unwrap()
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
        Some(READ) | Some(BUILD) | Some(MAKE_PUSH) => v(&["approve", &id]),
        Some(RM) => v(&["deny", &id, "--reason", RM_REASON]),
        Some(OUTSIDE) => v(&["deny", &id, "--reason", OUTSIDE_REASON]),
        Some(s) if s == net => v(&["deny", &id, "--reason", NET_REASON]),
        _ => v(&["deny", &id, "--reason", "not part of the scripted session"]),
    }
}

/// How a scripted person answers one ask (`p` as `tyba inbox --json` lists it, `step` the
/// scripted step it is for): the `tyba` arguments to run.
pub type AnswerFn<'a> = dyn Fn(&serde_json::Value, Option<&str>) -> Vec<String> + Sync + 'a;

/// Answers every ask of the session until `stop`, with `step_of` telling which scripted step
/// an ask's action is for.
/// `answer` gives the person's answer to each ask ([`answer_for`] in the common sessions).
pub fn approver(
    s: &Scripted,
    step_of: &(dyn Fn(&str) -> Option<String> + Sync),
    answer: &AnswerFn<'_>,
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
                    let args = answer(&p, step.as_deref());
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
    let answer = |p: &serde_json::Value, step: Option<&str>| answer_for(p, step, &s.net);
    run_session_with(
        s, mode, port, pass_env, agent, env, stdin, step_of, &answer, limit,
    )
}

/// [`run_session`] with the person's answers given by `answer`.
#[allow(clippy::too_many_arguments)]
pub fn run_session_with(
    s: &Scripted,
    mode: Mode,
    port: u16,
    pass_env: &[&str],
    agent: &[&str],
    env: &[(OsString, OsString)],
    stdin: Option<String>,
    step_of: &(dyn Fn(&str) -> Option<String> + Sync),
    answer: &AnswerFn<'_>,
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
                approver(s, step_of, answer, &stop)
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

// ---------------------------------------------------------------------------------------
// The common assertions of a scripted session.

/// What the model was told of one step, read from the requests the scripted server got.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// The agent reported the step to the model at all.
    pub reported: bool,
    /// The agent reported it as failed (a non-zero exit, a blocked call).
    pub failed: bool,
    /// The output or error text the model read.
    pub text: String,
}

/// One finished session, as the checks read it.
#[allow(missing_debug_implementations)]
pub struct Outcome<'a> {
    pub agent: &'a str,
    pub who: &'a Who,
    pub mode: Mode,
    pub asks: &'a [Answered],
    pub code: i32,
    pub out: &'a str,
    pub err: &'a str,
    /// Per step of [`Scripted::steps`], in order.
    pub seen: &'a [Seen],
    pub first_step_at: Option<Instant>,
    /// Requests to the scripted server that were not model requests.
    pub other: &'a [String],
    /// The scripted step an ask's action is for.
    pub step_of: &'a dyn Fn(&str) -> Option<String>,
    /// The scripted step an end-of-session refusal entry is for.
    pub entry_step: &'a dyn Fn(&str) -> Option<String>,
    /// What changed in the home outside the agent's state.
    pub home_changes: Vec<String>,
}

/// The counts one session measured (for `docs/agents.md`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    pub asks_before_first_step: usize,
    pub asks: usize,
    pub refusals_before_first_step: usize,
    pub refusals: usize,
    /// Refusals quietly made (logged, not asked) of the agent's known probes.
    pub quiet: usize,
}

/// How many refusals were made quietly in a session, from its end-of-session summary line
/// (`tyba: refused quietly (not asked): N (K different); each is in `tyba log ID``); 0 when
/// there is none.
pub fn quiet_refusals(stderr: &str) -> usize {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("tyba: refused quietly (not asked): "))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Checks what the issue asks of every agent's scripted session: nothing asked or refused
/// before the first step; the green read unasked; one ask (CI: one refusal) per yellow/red
/// step; `rm -rf` refused with tyba's reason (the person's words) in what the model read; a
/// push to `main` refused on every path of the session (direct through the agent's own
/// wrapper, inside `make`) and never asked; nothing outside the worktree changed. Panics with
/// every failed check and `ctx`.
pub fn check_outcome(s: &Scripted, o: &Outcome, ctx: &str) -> Measured {
    let step_of = o.step_of;
    let entry_step = o.entry_step;
    let refusals = summary_refusals(o.err);
    let quiet = quiet_refusals(o.err);
    let i = |c: &str| s.index(c);
    let seen = |c: &str| o.seen.get(i(c)).cloned().unwrap_or_default();
    let step_asks = |c: &str| {
        o.asks
            .iter()
            .filter(|a| step_of(&a.action).as_deref() == Some(c))
            .count()
    };
    let answered = |c: &str, ans: &str| {
        o.asks
            .iter()
            .any(|a| step_of(&a.action).as_deref() == Some(c) && a.answer == ans && a.rc == 0)
    };
    let refused_for = |c: &str| {
        refusals
            .iter()
            .filter(|e| entry_step(e).as_deref() == Some(c))
            .count()
    };
    let ok = |c: &str, text: &str| {
        let v = seen(c);
        v.reported && !v.failed && v.text.contains(text)
    };
    let failed = |c: &str, text: &str| {
        let v = seen(c);
        v.reported && v.failed && v.text.contains(text)
    };
    let has_make = s.steps.iter().any(|c| c == MAKE_PUSH);

    let mut ck = Checks::default();
    let before: Vec<&Answered> = o
        .asks
        .iter()
        .filter(|a| o.first_step_at.is_none_or(|t| a.at < t))
        .collect();
    ck.check(
        before.is_empty(),
        format!(
            "no ask before the first scripted step ({} asked)",
            before.len()
        ),
    );
    let stray: Vec<&Answered> = o
        .asks
        .iter()
        .filter(|a| step_of(&a.action).is_none())
        .collect();
    ck.check(
        stray.is_empty(),
        format!(
            "no ask but the scripted steps' ({} others: {})",
            stray.len(),
            stray
                .iter()
                .map(|a| a.action.replace('\n', "⏎"))
                .collect::<Vec<_>>()
                .join(" | ")
        ),
    );
    let stray_refusals: Vec<&String> = refusals
        .iter()
        .filter(|e| entry_step(e).is_none())
        .collect();
    let refused_before = refusals_before_first_step(&refusals, |e| entry_step(e).is_some());
    ck.check(
        refused_before == 0,
        format!("no refusal before the first scripted step ({refused_before} refused)"),
    );
    ck.check(
        stray_refusals.is_empty(),
        format!("no refusal but the scripted steps' ({stray_refusals:?})"),
    );
    ck.check(o.code == 0, format!("tyba run exits 0 (got {})", o.code));
    ck.check(
        o.out.contains("scripted session done"),
        format!("{} printed the final message", o.agent),
    );
    let reported = o.seen.iter().filter(|v| v.reported).count();
    ck.check(
        reported == s.steps.len(),
        format!(
            "the model got a result per step ({reported} of {})",
            s.steps.len()
        ),
    );
    ck.check(
        o.other.is_empty(),
        format!("no other request reached the model server ({:?})", o.other),
    );

    // The green read: never asked or refused; the model saw the file.
    ck.check(step_asks(READ) == 0, "the green read is not asked");
    ck.check(refused_for(READ) == 0, "the green read is not refused");
    ck.check(
        ok(READ, "hello from the fixture"),
        format!("the model read README.md: {:?}", seen(READ)),
    );
    let mut yellow_red = vec![BUILD, RM, OUTSIDE, s.net.as_str()];
    if has_make {
        yellow_red.push(MAKE_PUSH);
    }
    match o.mode {
        Mode::Person | Mode::Hook => {
            for c in &yellow_red {
                ck.check(
                    step_asks(c) == 1,
                    format!("`{c}` is asked exactly once (asked {})", step_asks(c)),
                );
                ck.check(
                    refused_for(c) <= 1,
                    format!("`{c}` is refused at most once"),
                );
            }
            ck.check(answered(BUILD, "approve"), "the build was approved");
            ck.check(
                ok(BUILD, "build ok"),
                format!("the model saw the build's output: {:?}", seen(BUILD)),
            );
            ck.check(s.fx.wt.join("build/out.txt").is_file(), "the build ran");
            ck.check(answered(RM, "deny"), "`rm -rf build` was denied");
            for (c, reason) in [
                (RM, RM_REASON),
                (OUTSIDE, OUTSIDE_REASON),
                (s.net.as_str(), NET_REASON),
            ] {
                ck.check(
                    failed(c, reason),
                    format!(
                        "the model read the refusal of `{c}` with \"{reason}\": {:?}",
                        seen(c)
                    ),
                );
            }
            if has_make {
                ck.check(
                    answered(MAKE_PUSH, "approve"),
                    "`make publish` was approved",
                );
                ck.check(
                    failed(MAKE_PUSH, "protected"),
                    format!(
                        "the model read the push inside make refused as a push to a protected branch: {:?}",
                        seen(MAKE_PUSH)
                    ),
                );
            }
            ck.check(
                o.asks.len() == yellow_red.len(),
                format!(
                    "{} asks in the session, one per yellow/red step (got {})",
                    yellow_red.len(),
                    o.asks.len()
                ),
            );
        }
        Mode::NonInteractive => {
            for c in &yellow_red {
                ck.check(
                    refused_for(c) == 1,
                    format!("`{c}` is refused once (refused {})", refused_for(c)),
                );
                ck.check(
                    failed(c, "tyba: ") && failed(c, "non-interactive"),
                    format!("the model read tyba's refusal of `{c}`: {:?}", seen(c)),
                );
            }
            ck.check(
                failed(RM, "deletion"),
                format!("the model read tyba's reason for `rm -rf`: {:?}", seen(RM)),
            );
            ck.check(
                !s.fx.wt.join("build/out.txt").exists(),
                "the refused build did not run",
            );
            ck.check(o.asks.is_empty(), "nobody was asked");
        }
    }
    ck.check(
        s.fx.wt.join("build/earlier.txt").is_file(),
        "build/ is still there",
    );
    // The direct push: never asked, refused as a push to protected main.
    ck.check(step_asks(PUSH) == 0, "the push to main is never asked");
    ck.check(
        failed(PUSH, "protected"),
        format!("the model read the push refused: {:?}", seen(PUSH)),
    );
    ck.check(
        s.remote_main_now() == s.remote_main,
        "the remote's main did not move",
    );
    ck.check(
        !s.root.join("outside.txt").exists(),
        "../outside.txt does not exist",
    );
    ck.check(
        o.home_changes.is_empty(),
        format!(
            "nothing in the home but the agent's state changed: {:?}",
            o.home_changes
        ),
    );
    let changes = s.outside_changes();
    ck.check(
        changes.is_empty(),
        format!("nothing outside the worktree changed: {changes:?}"),
    );
    ck.check(
        s.net_hits.load(Ordering::SeqCst) == 0,
        "the second listener got no connection",
    );
    let m = Measured {
        asks_before_first_step: before.len(),
        asks: o.asks.len(),
        refusals_before_first_step: refused_before,
        refusals: refusals.len(),
        quiet,
    };
    eprintln!(
        "MEASURED {} {:?} {:?}: asks before the first step {}, asks in the session {}, refusals before the first step {}, refusals {} ({} not of a step), refused quietly {}",
        o.agent,
        o.who,
        o.mode,
        m.asks_before_first_step,
        m.asks,
        m.refusals_before_first_step,
        m.refusals,
        stray_refusals.len(),
        m.quiet
    );
    ck.finish(ctx);
    m
}

/// Hard links (`cp -al`) of the installed tree `from` at `to`: an install layout rebuilt at
/// another prefix with the same files (the paths under `to` are canonical: tyba sees the
/// layout, not the original). The links are made as root after every `give`, so the files
/// stay the original owner's; nothing of them is changed.
pub fn link_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-al")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -al {} {}", from.display(), to.display());
}

/// A symbolic link at `at` to `target` (its directory made).
pub fn symlink(target: impl AsRef<Path>, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, at).unwrap();
}

// ---------------------------------------------------------------------------------------
// The agents' TUIs in a real terminal.

/// What gates the agent's actions in a TUI session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `tyba run --here --allow-host … -- AGENT`, the agent in its own no-prompt mode: tyba
    /// asks in the same terminal and the person answers there.
    Tyba,
    /// The agent alone, in its default permission mode: the person answers the agent's own
    /// approval prompts (each approved once).
    AgentOwn,
}

/// Keys named as tmux names them (`Enter`, `Down`, `C-c`).
pub type Keys = Vec<&'static str>;

/// What a screen shows that needs an answer: a label (a dialog's question, the action an
/// approval prompt shows) and the keys that answer it.
pub type Answer<L> = Option<(L, Keys)>;

/// How one agent's TUI looks to a person: what to answer on its screens.
#[allow(missing_debug_implementations)]
pub struct TuiAgent<'a> {
    pub name: &'a str,
    /// The agent's command line (started by name from `PATH`).
    pub argv: Vec<String>,
    /// The screen shows the agent's input prompt, ready for the task.
    pub ready: &'a dyn Fn(&[String]) -> bool,
    /// A first-run dialog on the screen: its question, and the keys a person presses to
    /// answer it.
    pub dialog: &'a dyn Fn(&[String]) -> Answer<&'static str>,
    /// The agent's own approval prompt on the screen: what it shows of the action, and the
    /// keys that approve it once.
    pub own_prompt: &'a dyn Fn(&[String]) -> Answer<String>,
    /// The keys a person presses to leave the agent (tmux key names; a `/command` is typed,
    /// then Enter).
    pub quit: &'a [&'a str],
}

/// One TUI session as the test saw it from outside.
#[derive(Debug, Default)]
pub struct TuiRun {
    /// tyba's asks, answered at its prompt in the pane.
    pub asks: Vec<Answered>,
    /// The agent's own approval prompts (what each showed), approved once each.
    pub own: Vec<String>,
    /// When each of `own` appeared.
    pub own_at: Vec<Instant>,
    /// First-run dialogs answered, as the screens showed them.
    pub dialogs: Vec<String>,
    /// The exit status of `tyba run` (or of the agent, without tyba), `-1` when unknown.
    pub code: i32,
    /// The pane's whole history after the end (tyba's end-of-session lines are in it).
    pub history: String,
    /// Every screen where something was answered, and the last one, for reports.
    pub screens: Vec<String>,
    /// Every distinct line the pane showed during the session (an agent's TUI may clear its
    /// transcript when it ends), in the order first seen.
    pub lines: Vec<String>,
    /// How often the person had to resize the window to get a screen drawn at all (the
    /// agent showed no input prompt for 20 s; a resize makes it redraw).
    pub resized: usize,
    /// How often the person pressed Enter again because the typed task had not been sent
    /// after 8 s.
    pub enter_again: usize,
    /// Asks that waited in `tyba inbox` for 10 s while the pane did not show tyba's prompt.
    pub unshown: Vec<String>,
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The keys that answer tyba's prompt for `p` as [`answer_for`] decides, typed at the
/// prompt: `o` (a red ask: then `y`), `a`, `d`, or `r` and the reason, Enter.
fn answer_at_prompt(t: &Tmux, p: &serde_json::Value, args: &[String]) {
    let red = p["verdict"] == "red";
    match args[0].as_str() {
        "approve" if args.iter().any(|a| a == "--always") && !red => t.press("a"),
        "approve" => {
            t.press("o");
            if red {
                t.wait("allow this RED action once");
                t.press("y");
            }
        }
        _ => match args.iter().position(|a| a == "--reason") {
            Some(i) => {
                t.press("r");
                std::thread::sleep(Duration::from_millis(600));
                t.type_text(&args[i + 1], Duration::from_millis(40));
                t.press("Enter");
            }
            None => t.press("d"),
        },
    }
}

/// Runs the agent's TUI in a tmux pane as a person would: answers its first-run dialogs,
/// types `task` at its input prompt, answers every prompt (tyba's at tyba's keys, as
/// [`answer_for`] decides; the agent's own approved once) until the scripted server has sent
/// its final message (`done`), then types the agent's quit lines and waits for the end.
#[allow(clippy::too_many_arguments)]
pub fn run_tui(
    s: &Scripted,
    gate: Gate,
    port: u16,
    pass_env: &[&str],
    agent: &TuiAgent,
    env: &[(OsString, OsString)],
    task: &str,
    step_of: &(dyn Fn(&str) -> Option<String> + Sync),
    rec: &Recorded,
    done: &dyn Fn() -> bool,
    limit: Duration,
) -> TuiRun {
    let mut script = String::from("#!/bin/sh\n");
    for (k, v) in env {
        script.push_str(&format!(
            "export {}={}\n",
            k.to_string_lossy(),
            sh_quote(&v.to_string_lossy())
        ));
    }
    script.push_str(&format!("cd {}\n", sh_quote(&s.fx.wt.to_string_lossy())));
    let argv: Vec<String> = agent.argv.iter().map(|a| sh_quote(a)).collect();
    match gate {
        Gate::Tyba => {
            script.push_str(&format!(
                "{} run --here --allow-host 127.0.0.1:{port}",
                sh_quote(&s.fx.tyba.to_string_lossy())
            ));
            for p in pass_env {
                script.push_str(&format!(" --pass-env {p}"));
            }
            script.push_str(&format!(" -- {}\n", argv.join(" ")));
        }
        Gate::AgentOwn => script.push_str(&format!("{}\n", argv.join(" "))),
    }
    script.push_str("echo \"session-exit=$?\"\n");
    let t = Tmux::start(&s.fx, &script, 120, 40);
    let mut run = TuiRun {
        code: -1,
        ..TuiRun::default()
    };
    let deadline = Instant::now() + limit;
    let mut word: Option<String> = None;
    let mut answered = std::collections::HashSet::new();
    let mut typed = false;
    let mut last_inbox = Instant::now();
    let mut waiting: BTreeMap<String, Instant> = BTreeMap::new();
    let mut typed_at = Instant::now();
    let mut ready_since: Option<Instant> = None;
    let mut finished_at: Option<Instant> = None;
    let mut quit_sent = false;
    let trace = std::env::var_os("TYBA_TEST_TUI_TRACE").map(PathBuf::from);
    let mut seen_lines = std::collections::HashSet::new();
    let started = Instant::now();
    // tyba prints the session word before the agent starts; an agent's TUI may clear the
    // screen and the history right after, so it is read at once.
    while gate == Gate::Tyba && word.is_none() && started.elapsed() < Duration::from_secs(30) {
        let h = t.history();
        if let Some(at) = h.find("session word «") {
            word = Some(
                h[at + "session word «".len()..]
                    .chars()
                    .take_while(|c| *c != '»')
                    .collect(),
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut blank_since = Instant::now();
    while t.alive() && Instant::now() < deadline {
        let screen = t.screen();
        for l in &screen {
            if !l.trim().is_empty() && seen_lines.insert(l.clone()) {
                run.lines.push(l.clone());
            }
        }
        if let Some(f) = &trace {
            let _ = std::fs::write(
                f,
                format!("typed {typed} quit {quit_sent}\n{}", screen.join("\n")),
            );
        }
        let marker = word.as_ref().map(|w| format!("session word: {w}"));
        if let Some(m) = marker.as_ref().filter(|m| screen[0].contains(m.as_str())) {
            let _ = m;
            let (code, out, _) = s.fx.cli(&["inbox", "--json"]);
            let v: serde_json::Value = if code == 0 {
                serde_json::from_str(&out).unwrap_or_default()
            } else {
                serde_json::Value::Null
            };
            let shown = v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|sess| sess["pending"].as_array().cloned().unwrap_or_default())
                .find(|p| {
                    let id = p["id"].as_str().unwrap_or("");
                    !id.is_empty() && screen[0].contains(id) && !answered.contains(id)
                });
            if let Some(p) = shown {
                let id = p["id"].as_str().unwrap_or("").to_string();
                answered.insert(id);
                let action = p["action"].as_str().unwrap_or("").to_string();
                let args = answer_for(&p, step_of(&action).as_deref(), &s.net);
                run.screens.push(screen.join("\n"));
                let at = Instant::now();
                answer_at_prompt(&t, &p, &args);
                run.asks.push(Answered {
                    kind: p["kind"].as_str().unwrap_or("").into(),
                    verdict: p["verdict"].as_str().unwrap_or("").into(),
                    action,
                    answer: args[0].clone(),
                    rc: 0,
                    at,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        if gate == Gate::Tyba && last_inbox.elapsed() > Duration::from_secs(5) {
            last_inbox = Instant::now();
            let (code, out, _) = s.fx.cli(&["inbox", "--json"]);
            let v: serde_json::Value = if code == 0 {
                serde_json::from_str(&out).unwrap_or_default()
            } else {
                serde_json::Value::Null
            };
            for p in v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|sess| sess["pending"].as_array().cloned().unwrap_or_default())
            {
                let id = p["id"].as_str().unwrap_or("").to_string();
                let first = *waiting.entry(id.clone()).or_insert_with(Instant::now);
                if !answered.contains(&id)
                    && first.elapsed() > Duration::from_secs(10)
                    && !run.unshown.iter().any(|u| u.starts_with(&id))
                {
                    run.unshown
                        .push(format!("{id} {}", p["action"].as_str().unwrap_or("")));
                    run.screens.push(screen.join("\n"));
                }
            }
        }
        if let Some((what, keys)) = (agent.own_prompt)(&screen) {
            run.screens.push(screen.join("\n"));
            run.own.push(what);
            run.own_at.push(Instant::now());
            for k in keys {
                t.press(k);
            }
            // The prompt goes away before the next one can be counted.
            let gone = Instant::now() + Duration::from_secs(20);
            while Instant::now() < gone && (agent.own_prompt)(&t.screen()).is_some() {
                std::thread::sleep(Duration::from_millis(100));
            }
            continue;
        }
        if let Some((question, keys)) = (agent.dialog)(&screen) {
            ready_since = None;
            blank_since = Instant::now();
            run.dialogs.push(question.to_string());
            run.screens.push(screen.join("\n"));
            for k in keys {
                t.press(k);
            }
            std::thread::sleep(Duration::from_millis(500));
            continue;
        }
        if !typed && !(agent.ready)(&screen) && blank_since.elapsed() > Duration::from_secs(20) {
            // Nothing a person can use for 20 s: they resize the window (one column less and
            // back), which makes the agent draw its screen again.
            t.cmd(&["resize-window", "-t", "t", "-x", "119", "-y", "40"]);
            std::thread::sleep(Duration::from_millis(500));
            t.cmd(&["resize-window", "-t", "t", "-x", "120", "-y", "40"]);
            run.resized += 1;
            blank_since = Instant::now();
            continue;
        }
        // Ready for 3 s on end: a dialog that comes up over the input prompt is answered first.
        if !typed && (agent.ready)(&screen) {
            let since = *ready_since.get_or_insert_with(Instant::now);
            if since.elapsed() < Duration::from_secs(3) {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            t.type_text(task, Duration::from_millis(40));
            t.press("Enter");
            typed = true;
            typed_at = Instant::now();
            continue;
        }
        if typed
            && run.enter_again < 2
            && rec.requests.lock().unwrap().is_empty()
            && typed_at.elapsed() > Duration::from_secs(8)
        {
            t.press("Enter");
            run.enter_again += 1;
            typed_at = Instant::now();
            continue;
        }
        if typed && done() {
            let at = *finished_at.get_or_insert_with(Instant::now);
            // The final message drawn, then the person leaves.
            if !quit_sent && at.elapsed() > Duration::from_secs(3) {
                run.screens.push(screen.join("\n"));
                for k in agent.quit {
                    if k.starts_with('/') {
                        t.type_text(k, Duration::from_millis(40));
                        t.press("Enter");
                    } else {
                        t.press(k);
                    }
                }
                quit_sent = true;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if t.alive() {
        run.screens.push(t.screen().join("\n"));
    }
    run.history = t.history();
    run.code = run
        .history
        .rsplit_once("session-exit=")
        .and_then(|(_, r)| {
            r.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        })
        .unwrap_or(-1);
    run
}

/// What one TUI session gives [`check_tui`] besides the run itself.
#[allow(missing_debug_implementations)]
pub struct TuiSeen<'a> {
    pub agent: &'a str,
    pub seen: &'a [Seen],
    pub first_step_at: Option<Instant>,
    pub other: &'a [String],
    pub step_of: &'a dyn Fn(&str) -> Option<String>,
    pub entry_step: &'a dyn Fn(&str) -> Option<String>,
    pub home_changes: Vec<String>,
}

/// Checks a TUI session under tyba from outside, as [`check_outcome`] checks a person's
/// session (zero asks before the first step, one per yellow/red step, `rm -rf` refused with
/// the person's reason, the push refused and never asked, main unmoved, nothing outside the
/// worktree changed), and more: every ask was shown at tyba's prompt in the pane and answered
/// there (the audit log's `answered_by` is `terminal`), and the agent's own prompts never
/// came up. Panics with every failed check.
pub fn check_tui(s: &Scripted, run: &TuiRun, t: &TuiSeen, ctx: &str) -> Measured {
    let shown = format!(
        "{}\n{}\n{}",
        run.lines.join("\n"),
        run.screens.join("\n"),
        run.history
    );
    eprintln!(
        "TUI {} {:?}: first-run dialogs answered {:?}; window resized to get a screen {}; Enter pressed again {}",
        t.agent, s.fx.who, run.dialogs, run.resized, run.enter_again
    );
    let mut ck = Checks::default();
    ck.check(
        run.unshown.is_empty(),
        format!(
            "every ask was shown at tyba's prompt in the pane (waited unshown: {:?})",
            run.unshown
        ),
    );
    ck.check(
        run.own.is_empty(),
        format!("the agent's own prompts never came up: {:?}", run.own),
    );
    // The session's own log: its id is in `tyba: session ID: worktree …`, printed in the pane
    // before the agent starts.
    let id = format!("{}\n{}", run.history, run.lines.join("\n"))
        .lines()
        .find_map(|l| l.strip_prefix("tyba: session "))
        .and_then(|r| r.split_once(':'))
        .map(|(id, _)| id.to_string())
        .unwrap_or_default();
    let (code, out, _) = s.fx.cli(&["log", "--json", &id]);
    let log: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .collect();
    let dir = s.fx.home.join(".local/state/tyba/log");
    let logs: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            format!(
                "{}: {} lines",
                e.file_name().to_string_lossy(),
                text.lines().count()
            )
        })
        .collect();
    eprintln!("session {id:?}; audit logs in the home: {logs:?}");
    let by: Vec<String> = log
        .iter()
        .filter(|l| l["decision"] == "ask")
        .map(|l| l["answered_by"].as_str().unwrap_or("").to_string())
        .collect();
    ck.check(
        code == 0 && by.len() == run.asks.len() && by.iter().all(|b| b == "terminal"),
        format!(
            "every ask of session {id:?} answered at the terminal ({} asks, answered by {by:?})",
            run.asks.len()
        ),
    );
    // The checks of a person's session, then these: every failure of both is reported.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_outcome(
            s,
            &Outcome {
                agent: t.agent,
                who: &s.fx.who,
                mode: Mode::Person,
                asks: &run.asks,
                code: run.code,
                out: &shown,
                err: &run.history,
                seen: t.seen,
                first_step_at: t.first_step_at,
                other: t.other,
                step_of: t.step_of,
                entry_step: t.entry_step,
                home_changes: t.home_changes.clone(),
            },
            "",
        )
    }));
    let measured = match outcome {
        Ok(m) => Some(m),
        Err(e) => {
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            ck.check(false, format!("the session's checks: {}", msg.trim()));
            None
        }
    };
    ck.finish(ctx);
    measured.unwrap_or_default()
}

/// The agent's own prompts of a session without tyba: how many came before the first
/// scripted step and in all, printed as `MEASURED-OWN` for `docs/agents.md`; and the control:
/// the checks of [`check_tui`] fail on it (without tyba nothing is asked at tyba's prompt and
/// nothing is refused with tyba's reasons), so they cannot pass without tyba in the path.
pub fn measure_own(s: &Scripted, run: &TuiRun, t: &TuiSeen, who: &Who) -> (usize, usize) {
    let before = run
        .own_at
        .iter()
        .filter(|a| t.first_step_at.is_none_or(|f| **a < f))
        .count();
    eprintln!(
        "MEASURED-OWN {} {who:?}: the agent's own prompts before the first step {before}, in the session {} ({:?}), first-run dialogs {:?}",
        t.agent,
        run.own.len(),
        run.own,
        run.dialogs
    );
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check_tui(s, run, t, "control: the agent without tyba")
    }));
    assert!(
        checked.is_err(),
        "{}: the TUI checks passed without tyba in the path",
        t.agent
    );
    (before, run.own.len())
}

/// The keys that move a TUI menu's cursor (`❯` or `›`) from where it is to the option whose
/// line contains `option`, then Enter; `None` when the screen does not show that option.
pub fn choose(screen: &[String], option: &str) -> Option<Vec<&'static str>> {
    let is_cursor = |l: &str| {
        let t = l.trim_start();
        t.starts_with('❯') || t.starts_with('›')
    };
    let want = screen.iter().rposition(|l| l.contains(option))?;
    let at = screen
        .iter()
        .enumerate()
        .filter(|(_, l)| is_cursor(l))
        .map(|(i, _)| i)
        .min_by_key(|i| i.abs_diff(want))?;
    let mut keys = if want >= at {
        vec!["Down"; want - at]
    } else {
        vec!["Up"; at - want]
    };
    keys.push("Enter");
    Some(keys)
}

/// The end of one TUI session: prints what it saw (`results`: what the model read, as the
/// agent's server records it), then checks it under tyba ([`check_tui`]) or counts the
/// agent's own prompts and runs the control without tyba ([`measure_own`]: the counts).
pub fn finish_tui(
    s: &Scripted,
    gate: Gate,
    run: &TuiRun,
    t: &TuiSeen,
    results: &dyn std::fmt::Debug,
) -> Option<(usize, usize)> {
    let ctx = format!(
        "{} TUI {:?} {gate:?}\n--- exit {}\n--- asks\n{}\n--- own prompts {:?}\n--- dialogs {:?}\n--- screens\n{}\n--- pane\n{}\n--- what the model read\n{results:#?}\n--- other requests {:?}\n",
        t.agent,
        s.fx.who,
        run.code,
        describe(&run.asks),
        run.own,
        run.dialogs,
        run.screens.join("\n-----\n"),
        run.history,
        t.other
    );
    eprintln!("{ctx}");
    match gate {
        Gate::Tyba => {
            check_tui(s, run, t, &ctx);
            None
        }
        Gate::AgentOwn => Some(measure_own(s, run, t, &s.fx.who)),
    }
}
