//! The real Codex CLI end to end (issue 6, item 3): `codex exec` (npm `@openai/codex` 0.171.0,
//! installed by `.ci/run` under `/opt/tyba-test-npm`) runs under `tyba run --here`, fully
//! offline, against a scripted Responses API server on 127.0.0.1 written here. The scripted
//! model asks for six shell commands, one per turn; a scripted person answers the session's
//! asks through `tyba inbox --json` / `tyba approve` / `tyba deny`. Checked: what the agent saw
//! (the `function_call_output` items of the recorded requests) and what really happened (the
//! files, a local bare remote, a second listener), as the test's user and as the unprivileged
//! `TYBA_TEST_USER`. Two runs of the same session:
//!
//! - `agent_codex_real_cli_offline_under_tyba_run`: the kernel layer alone. The model sees a
//!   refusal as the output of tyba's refusal program: exit 126 and `tyba: <reason>`, the
//!   person's reason when they gave one.
//! - `agent_codex_with_tyba_hook_reasons_reach_the_model`: with `tyba hook install codex
//!   --user` (tyba copied to `~/.cargo/bin`, where the sandbox may execute it) and
//!   `--dangerously-bypass-hook-trust`. The model sees the person's reasons and the policy's
//!   refusal, and the build approved through the hook is not asked again by the kernel layer.
//!
//! Codex is found at `TYBA_TEST_CODEX` or under `/opt/tyba-test-npm`; when it is not there the
//! test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The pinned version `.ci/run` installs.
const CODEX_VERSION: &str = "0.171.0";
const NPM_PREFIX: &str = "/opt/tyba-test-npm";
/// The native binary inside the npm package (the `codex` script is a node wrapper that
/// spawns it; running the binary itself keeps node out of the session).
const CODEX_NATIVE: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";

/// The scripted session: one shell command per model turn.
const READ: &str = "cat README.md";
const BUILD: &str = "sh build.sh";
const RM: &str = "rm -rf build";
const PUSH: &str = "git push origin HEAD:main";
const OUTSIDE: &str = "echo x > ../outside.txt";
const RM_REASON: &str = "use git clean";
const OUTSIDE_REASON: &str = "stay in the worktree";
const NET_REASON: &str = "no network in this task";

fn codex_binary() -> Option<PathBuf> {
    let p = std::env::var_os("TYBA_TEST_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(NPM_PREFIX).join(CODEX_NATIVE));
    if p.is_file() {
        return Some(p);
    }
    assert!(
        !require_sandbox(),
        "the Codex CLI is not installed at {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `npm install --prefix {NPM_PREFIX} @openai/codex@{CODEX_VERSION}` (as .ci/run does) \
         or point TYBA_TEST_CODEX at the native `codex` binary",
        p.display()
    );
    eprintln!("SKIP: the Codex CLI is not installed at {}", p.display());
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: Responses API over server-sent events, loopback only.

#[derive(Debug, Default)]
struct Model {
    /// Every request body, in order.
    requests: Mutex<Vec<serde_json::Value>>,
    /// Requests that were not `POST …/responses` (method and path).
    other: Mutex<Vec<String>>,
}

fn sse(event: &str, data: &serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl Model {
    /// The reply to one request: the next command of `steps` (one per `function_call_output`
    /// already in the history), then a final message.
    fn reply(&self, body: &serde_json::Value, steps: &[String]) -> String {
        let done = body["input"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|i| i["type"] == "function_call_output")
                    .count()
            })
            .unwrap_or(0);
        let item = match steps.get(done) {
            Some(cmd) => serde_json::json!({
                "type": "function_call",
                "id": format!("fc_{done}"),
                "call_id": format!("call_{done}"),
                "name": "exec_command",
                "arguments": serde_json::json!({"cmd": cmd, "yield_time_ms": 10000}).to_string(),
                "status": "completed",
            }),
            None => serde_json::json!({
                "type": "message",
                "id": "msg_final",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "scripted session done", "annotations": []}],
            }),
        };
        let mut s = sse(
            "response.output_item.done",
            &serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        );
        s.push_str(&sse(
            "response.completed",
            &serde_json::json!({"type": "response.completed", "response": {"id": format!("resp_{done}")}}),
        ));
        s
    }

    /// Serves one connection (keep-alive: any number of requests).
    fn serve(&self, stream: TcpStream, steps: &[String]) {
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
            let (status, ctype, payload) = if method == "POST" && path.ends_with("/responses") {
                match serde_json::from_slice::<serde_json::Value>(&body) {
                    Ok(v) => {
                        let reply = self.reply(&v, steps);
                        self.requests.lock().unwrap().push(v);
                        ("200 OK", "text/event-stream", reply)
                    }
                    Err(e) => {
                        self.other
                            .lock()
                            .unwrap()
                            .push(format!("{method} {path}: bad JSON ({e})"));
                        ("400 Bad Request", "text/plain", String::new())
                    }
                }
            } else {
                self.other.lock().unwrap().push(format!("{method} {path}"));
                ("404 Not Found", "text/plain", String::new())
            };
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
}

/// A loopback listener in a background thread; returns its port.
fn listen(on_conn: impl Fn(TcpStream) + Send + Sync + 'static) -> u16 {
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

/// The `output` of the `function_call_output` for `call_i` in the last request that has it.
fn output_of(requests: &[serde_json::Value], i: usize) -> Option<String> {
    let id = format!("call_{i}");
    requests.iter().rev().find_map(|r| {
        r["input"].as_array()?.iter().find_map(|it| {
            (it["type"] == "function_call_output" && it["call_id"] == id.as_str())
                .then(|| it["output"].as_str().map(str::to_string))
                .flatten()
        })
    })
}

// ---------------------------------------------------------------------------------------
// The scripted person.

#[derive(Debug, Clone)]
struct Answered {
    kind: String,
    verdict: String,
    action: String,
    answer: String,
    rc: i32,
}

/// What the person answers to an ask. Codex's own start-up probes (`lsb_release -a`,
/// `getconf LONG_BIT`, its `git -c safe.bareRepository=explicit config …`) are harmless
/// yellow reads: allowed for the session. Codex 0.171.0 starts each shell command through its
/// own binary (`/proc/self/exe --codex-run-as-process-setup … /bin/bash -lc CMD`); approving
/// that would approve a command the ask does not show as such, so the person refuses it, and
/// Codex then starts `/bin/bash -lc CMD` itself, which tyba classifies as `CMD`.
/// Whether an ask's action is the command line `c`: asked by the kernel layer (the exec) or
/// by tyba's Codex hook (the tool call).
fn is_ask_for(action: &str, c: &str) -> bool {
    action == format!("run `{c}`") || action == format!("{c} (Bash via codex)")
}

fn answer_for(p: &serde_json::Value, net: &str) -> Vec<String> {
    let id = p["id"].as_str().unwrap().to_string();
    let action = p["action"].as_str().unwrap_or("");
    let kind = p["kind"].as_str().unwrap_or("");
    let cmd = |c: &str| is_ask_for(action, c);
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if kind == "pause" {
        // The repeated-failure guard, tripped by Codex's refused git probes: resume.
        return v(&["approve", &id]);
    }
    if action.contains("--codex-run-as-process-setup") {
        return v(&["deny", &id, "--reason", "run the command itself"]);
    }
    if cmd("lsb_release -a")
        || cmd("getconf LONG_BIT")
        || action.starts_with("run `git -c safe.bareRepository=explicit config ")
    {
        return v(&["approve", &id, "--always"]);
    }
    if action.starts_with("run `/bin/sh -c '\"$0\" hook codex;") {
        // tyba's own hook, as `tyba hook install codex` wrote it.
        return v(&["approve", &id, "--always"]);
    }
    if cmd(BUILD) {
        return v(&["approve", &id]);
    }
    if cmd(RM) {
        return v(&["deny", &id, "--reason", RM_REASON]);
    }
    if cmd(OUTSIDE) {
        return v(&["deny", &id, "--reason", OUTSIDE_REASON]);
    }
    if cmd(net) {
        return v(&["deny", &id, "--reason", NET_REASON]);
    }
    v(&["deny", &id, "--reason", "not part of the scripted session"])
}

fn approver(fx: &Fx, net: &str, stop: &AtomicBool) -> Vec<Answered> {
    let mut seen = std::collections::HashSet::new();
    let mut log = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        if code == 0 {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            for s in v.as_array().cloned().unwrap_or_default() {
                for p in s["pending"].as_array().cloned().unwrap_or_default() {
                    let id = p["id"].as_str().unwrap_or("").to_string();
                    if !seen.insert(id) {
                        continue;
                    }
                    let args = answer_for(&p, net);
                    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                    let (rc, _, _) = fx.cli(&refs);
                    log.push(Answered {
                        kind: p["kind"].as_str().unwrap_or("").into(),
                        verdict: p["verdict"].as_str().unwrap_or("").into(),
                        action: p["action"].as_str().unwrap_or("").into(),
                        answer: args[0].clone(),
                        rc,
                    });
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log
}

// ---------------------------------------------------------------------------------------

fn git_out(fx: &Fx, dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_as(&fx.who, dir, args).stdout)
        .trim()
        .to_string()
}

fn run_codex_session(who: &Who, codex: &Path, hooks: bool) {
    let t0 = Instant::now();
    let Some(fx) = setup(who, "agent-codex") else {
        return;
    };
    let root = fx.wt.parent().unwrap().to_path_buf();

    // The repository: a build script, a bare remote whose main is the first commit, and a
    // local commit a push to main would publish.
    std::fs::write(
        fx.wt.join("build.sh"),
        "mkdir -p build\necho built > build/out.txt\necho build ok\n",
    )
    .unwrap();
    std::fs::write(fx.wt.join("README.md"), "hello from the fixture\n").unwrap();
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
    let remote_main = git_out(&fx, &remote, &["rev-parse", "refs/heads/main"]);
    std::fs::write(fx.wt.join("notes.txt"), "unpublished\n").unwrap();
    give(&fx.wt, who);
    git_as(who, &fx.wt, &["add", "notes.txt"]);
    git_as(who, &fx.wt, &["commit", "-q", "-m", "local only"]);
    let local_head = git_out(&fx, &fx.wt, &["rev-parse", "HEAD"]);
    assert_ne!(remote_main, local_head);

    // The second listener: nothing may reach it.
    let net_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&net_hits);
    let net_port = listen(move |_| {
        hits.fetch_add(1, Ordering::SeqCst);
    });
    let net = format!("curl -s http://127.0.0.1:{net_port}/");

    // The scripted model.
    let steps: Vec<String> = [READ, BUILD, RM, PUSH, OUTSIDE, &net]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let model = Arc::new(Model::default());
    let m = Arc::clone(&model);
    let st = steps.clone();
    let port = listen(move |s| m.serve(s, &st));

    // CODEX_HOME = the fake home's ~/.codex (the policy's agent state: writable by the agent;
    // its config.toml and rules/ are kept read-only by the sandbox).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/codex");
    let codex_home = fx.home.join(".codex");
    std::fs::create_dir_all(codex_home.join("rules")).unwrap();
    let config = std::fs::read_to_string(data.join("config.toml"))
        .unwrap()
        .replace("@PORT@", &port.to_string());
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    std::fs::copy(
        data.join("allow-rm.rules"),
        codex_home.join("rules/allow-rm.rules"),
    )
    .unwrap();
    give(&fx.home, who);
    let mut env: Vec<(OsString, OsString)> = fx.env();
    env.push(("CODEX_HOME".into(), codex_home.clone().into()));
    env.push(("SCRIPTED_MODEL_KEY".into(), "offline".into()));
    if hooks {
        // The hook runs inside the sandbox, so tyba must be where the sandbox may execute
        // it: `~/.cargo/bin` (policy `read_only`), as after `cargo install`.
        let bin = fx.home.join(".cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        copy_exe(&fx.tyba, &bin.join("tyba"));
        give(&fx.home, who);
        let o = run_tyba(
            who,
            &bin.join("tyba"),
            &fx.wt,
            &env,
            &["hook", "install", "codex", "--user"],
        );
        assert!(
            o.status.success(),
            "tyba hook install codex --user: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    // The session.
    let mut c = command_as(&fx.who, &fx.tyba);
    c.args(["run", "--here", "--allow-host"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--pass-env", "SCRIPTED_MODEL_KEY", "--"])
        .arg(codex)
        .args(["exec", "--skip-git-repo-check"])
        .args(hooks.then_some("--dangerously-bypass-hook-trust"))
        .arg("-C")
        .arg(&fx.wt)
        .arg("Run the scripted commands.");
    c.current_dir(&fx.wt).env_clear().stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let session = Session { child };

    let stop = AtomicBool::new(false);
    let (asks, (code, out, err)) = std::thread::scope(|s| {
        let h = s.spawn(|| approver(&fx, &net, &stop));
        // Codex retries forever when something goes wrong: 90 s at most.
        let mut session = session;
        let deadline = Instant::now() + Duration::from_secs(90);
        while session.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let res = session.finish_now();
        stop.store(true, Ordering::SeqCst);
        (h.join().unwrap(), res)
    });
    let requests = model.requests.lock().unwrap().clone();
    let secs = t0.elapsed().as_secs_f64();
    let ctx = format!(
        "{who:?} hooks={hooks} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- other requests {:?}\n",
        asks.iter()
            .map(|a| format!(
                "{} {} {} -> {} ({})",
                a.kind,
                a.verdict,
                a.action.replace('\n', " "),
                a.answer,
                a.rc
            ))
            .collect::<Vec<_>>()
            .join("\n"),
        model.other.lock().unwrap()
    );
    eprintln!("{ctx}");

    let outs: Vec<String> = (0..steps.len())
        .map(|i| output_of(&requests, i).unwrap_or_default())
        .collect();
    for (s, o) in steps.iter().zip(&outs) {
        eprintln!("--- the agent saw for `{s}`:\n{o}");
    }
    let mut ck = Checks::default();
    let asked = |c: &str| asks.iter().any(|a| is_ask_for(&a.action, c));
    let answered = |c: &str, ans: &str| {
        asks.iter()
            .any(|a| is_ask_for(&a.action, c) && a.answer == ans && a.rc == 0)
    };

    ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
    ck.check(
        out.contains("scripted session done"),
        "codex printed the final message",
    );
    ck.check(
        requests.len() == steps.len() + 1,
        format!(
            "one request per turn: {} requests for {} commands",
            requests.len(),
            steps.len()
        ),
    );
    ck.check(
        model.other.lock().unwrap().is_empty(),
        "no other request reached the model server",
    );
    for (i, o) in outs.iter().enumerate() {
        ck.check(
            !o.is_empty(),
            format!("the agent got an output for `{}`", steps[i]),
        );
    }
    let exited0 = |o: &str| o.contains("exited with code 0");
    // What a refusal looks like to the model: with tyba's hook, Codex's block message with
    // tyba's reason; without it, the refused exec ran tyba's refusal program: exit 126 and
    // `tyba: <reason>` (the person's own words when they gave a reason) in its output.
    let refused = |o: &str, reason: &str| {
        !exited0(o)
            && if hooks {
                o.starts_with("Command blocked by PreToolUse hook: ") && o.contains(reason)
            } else {
                let said = reason
                    .strip_prefix("denied by the person: ")
                    .unwrap_or(reason);
                o.contains("exited with code 126") && o.contains(&format!("tyba: {said}"))
            }
    };

    // 1. Green read: runs, never asked; the agent saw the file.
    ck.check(!asked(READ), "the green read is not asked");
    ck.check(
        exited0(&outs[0]) && outs[0].contains("hello from the fixture"),
        format!("the agent read README.md: {:?}", outs[0]),
    );
    // 2. Yellow build: asked once, approved once, ran.
    ck.check(
        answered(BUILD, "approve"),
        "the yellow build was asked and approved",
    );
    ck.check(
        asks.iter().filter(|a| is_ask_for(&a.action, BUILD)).count() == 1,
        "the build is asked exactly once",
    );
    ck.check(
        exited0(&outs[1]) && outs[1].contains("build ok"),
        format!("the agent saw the build's output: {:?}", outs[1]),
    );
    // 3. Red rm -rf: asked, denied with a reason; the build dir is still there.
    ck.check(
        answered(RM, "deny"),
        "the red `rm -rf build` was asked and denied",
    );
    ck.check(
        refused(&outs[2], &format!("denied by the person: {RM_REASON}")),
        format!("the agent saw `rm -rf build` fail: {:?}", outs[2]),
    );
    ck.check(
        fx.wt.join("build/out.txt").is_file(),
        "build/ is still there",
    );
    // 4. Push to main: blocked, never asked; the remote's main did not move.
    ck.check(!asked(PUSH), "the push to main is never asked");
    ck.check(
        refused(
            &outs[3],
            "refused by tyba: push could update protected refs/heads/main",
        ),
        format!("the agent saw the push fail: {:?}", outs[3]),
    );
    ck.check(
        git_out(&fx, &remote, &["rev-parse", "refs/heads/main"]) == remote_main,
        "the remote's main did not move",
    );
    // 5. Out-of-tree write: asked, denied; no file.
    ck.check(
        answered(OUTSIDE, "deny"),
        "the out-of-tree write was asked and denied",
    );
    ck.check(
        refused(&outs[4], &format!("denied by the person: {OUTSIDE_REASON}")),
        format!("the agent saw the write fail: {:?}", outs[4]),
    );
    ck.check(
        !root.join("outside.txt").exists(),
        "../outside.txt does not exist",
    );
    // 6. Network: asked, denied; the listener got nothing.
    ck.check(
        answered(&net, "deny"),
        "the network call was asked and denied",
    );
    ck.check(
        refused(&outs[5], &format!("denied by the person: {NET_REASON}")),
        format!("the agent saw curl fail: {:?}", outs[5]),
    );
    ck.check(
        net_hits.load(Ordering::SeqCst) == 0,
        "the second listener got no connection",
    );
    // The audit log: the person's reasons and the policy's refusal.
    let (_, log, _) = fx.cli(&["log", "--json"]);
    let log: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let logged = |action: &str, answer: &str, reason: &str| {
        log.iter().any(|l| {
            l["action"].as_str().is_some_and(|a| is_ask_for(a, action))
                && l["answer"] == answer
                && l["reason"].as_str().unwrap_or("").contains(reason)
        })
    };
    ck.check(
        logged(RM, "deny", RM_REASON),
        format!("the log has `{RM}` denied with \"{RM_REASON}\""),
    );
    let push_logged = log.iter().any(|l| {
        l["decision"] == "refuse"
            && l["action"].as_str().is_some_and(|a| a.contains(PUSH))
            && l.to_string().contains("protected")
    });
    if hooks {
        // The hook refuses a blocked call without asking the session, and Codex then never
        // starts it: the session's audit log does not see it (known gap, reported).
        eprintln!("push in the audit log with the hook: {push_logged}");
    } else {
        ck.check(
            push_logged,
            "the log has the push refused as a push to protected main",
        );
    }
    ck.check(secs < 120.0, format!("under two minutes ({secs:.1} s)"));
    ck.finish(&ctx);
}

impl Session {
    /// Kills the session if it still runs, then collects (status, stdout, stderr).
    fn finish_now(mut self) -> (i32, String, String) {
        if self.child.try_wait().unwrap().is_none() {
            let _ = self.child.kill();
        }
        self.finish()
    }
}

#[test]
fn agent_codex_real_cli_offline_under_tyba_run() {
    let Some(codex) = codex_binary() else {
        return;
    };
    let v = std::process::Command::new(&codex)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&v.stdout).trim().to_string();
    assert!(
        version.ends_with(CODEX_VERSION),
        "{} is `{version}`, the test is written for {CODEX_VERSION}",
        codex.display()
    );
    for who in whos() {
        run_codex_session(&who, &codex, false);
    }
}

#[test]
fn agent_codex_with_tyba_hook_reasons_reach_the_model() {
    let Some(codex) = codex_binary() else {
        return;
    };
    for who in whos() {
        run_codex_session(&who, &codex, true);
    }
}
