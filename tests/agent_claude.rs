//! The real Claude Code CLI end to end (issue 6, item 4): `claude -p` (npm
//! `@anthropic-ai/claude-code` 2.1.332, the native binary inside it, installed by `.ci/run`
//! under `/opt/tyba-test-npm`) runs under `tyba run --here`, fully offline, against a scripted
//! Messages API server on 127.0.0.1 written here (`ANTHROPIC_BASE_URL`). The same session as
//! `tests/agent_codex.rs`: one `Bash` tool call per turn, a scripted person answering through
//! `tyba inbox --json` / `tyba approve` / `tyba deny`. Kernel layer only (no hook): Claude
//! Code's shell reports the command's stderr, so tyba's refusal text reaches the model as the
//! `tool_result`. As the test's user and as the unprivileged `TYBA_TEST_USER`.
//!
//! Claude Code is found at `TYBA_TEST_CLAUDE` or under `/opt/tyba-test-npm`; when it is not
//! there the test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
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

const CLAUDE_VERSION: &str = "2.1.332";
const NPM_PREFIX: &str = "/opt/tyba-test-npm";
const CLAUDE_NATIVE: &str = "node_modules/@anthropic-ai/claude-code-linux-x64/claude";

const READ: &str = "cat README.md";
const BUILD: &str = "sh build.sh";
const RM: &str = "rm -rf build";
const PUSH: &str = "git push origin HEAD:main";
const OUTSIDE: &str = "echo x > ../outside.txt";
const RM_REASON: &str = "use git clean";
const OUTSIDE_REASON: &str = "stay in the worktree";
const NET_REASON: &str = "no network in this task";

fn claude_binary() -> Option<PathBuf> {
    let p = std::env::var_os("TYBA_TEST_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(NPM_PREFIX).join(CLAUDE_NATIVE));
    if p.is_file() {
        return Some(p);
    }
    assert!(
        !require_sandbox(),
        "Claude Code is not installed at {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `npm install --prefix {NPM_PREFIX} @anthropic-ai/claude-code@{CLAUDE_VERSION}` (as \
         .ci/run does) or point TYBA_TEST_CLAUDE at the native `claude` binary",
        p.display()
    );
    eprintln!("SKIP: Claude Code is not installed at {}", p.display());
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: Messages API over server-sent events, loopback only.

#[derive(Debug, Default)]
struct Model {
    requests: Mutex<Vec<serde_json::Value>>,
    other: Mutex<Vec<String>>,
}

fn sse(event: &str, mut data: serde_json::Value) -> String {
    data["type"] = event.into();
    format!("event: {event}\ndata: {data}\n\n")
}

/// The `tool_result` blocks of a request, in order: (tool_use_id, is_error, content).
fn tool_results(req: &serde_json::Value) -> Vec<(String, bool, String)> {
    let mut v = Vec::new();
    for m in req["messages"].as_array().into_iter().flatten() {
        for c in m["content"].as_array().into_iter().flatten() {
            if c["type"] == "tool_result" {
                let content = match &c["content"] {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Array(a) => a
                        .iter()
                        .filter_map(|x| x["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                v.push((
                    c["tool_use_id"].as_str().unwrap_or("").to_string(),
                    c["is_error"].as_bool().unwrap_or(false),
                    content,
                ));
            }
        }
    }
    v
}

impl Model {
    fn reply(&self, body: &serde_json::Value, steps: &[String]) -> String {
        let done = tool_results(body).len();
        let msg = serde_json::json!({
            "id": format!("msg_{done}"), "type": "message", "role": "assistant",
            "model": body["model"], "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        });
        let mut s = sse("message_start", serde_json::json!({ "message": msg }));
        let (block, delta, stop) = match steps.get(done) {
            Some(cmd) => (
                serde_json::json!({"type": "tool_use", "id": format!("toolu_{done}"), "name": "Bash", "input": {}}),
                serde_json::json!({"type": "input_json_delta", "partial_json":
                    serde_json::json!({"command": cmd, "description": "scripted step"}).to_string()}),
                "tool_use",
            ),
            None => (
                serde_json::json!({"type": "text", "text": ""}),
                serde_json::json!({"type": "text_delta", "text": "scripted session done"}),
                "end_turn",
            ),
        };
        s.push_str(&sse(
            "content_block_start",
            serde_json::json!({"index": 0, "content_block": block}),
        ));
        s.push_str(&sse(
            "content_block_delta",
            serde_json::json!({"index": 0, "delta": delta}),
        ));
        s.push_str(&sse("content_block_stop", serde_json::json!({"index": 0})));
        s.push_str(&sse(
            "message_delta",
            serde_json::json!({"delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ));
        s.push_str(&sse("message_stop", serde_json::json!({})));
        s
    }

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
            let messages = path == "/v1/messages" || path.starts_with("/v1/messages?");
            let (status, ctype, payload) = if method == "POST" && messages {
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

/// The command line an ask is about. Claude Code 2.1.332 runs each `Bash` call as one
/// `bash -c` line that ends `… && eval 'CMD' < /dev/null && pwd -P >| $TMPDIR/claude-XXXX-cwd`,
/// which the kernel layer classifies (and shows) whole; the person reads `CMD` out of it.
fn command_of(action: &str) -> Option<&str> {
    let rest = action.split_once(" && eval '")?.1;
    let end = rest.find("' < /dev/null")?;
    Some(&rest[..end])
}

fn is_ask_for(action: &str, c: &str) -> bool {
    action == format!("run `{c}`") || command_of(action) == Some(c)
}

fn answer_for(p: &serde_json::Value, net: &str) -> Vec<String> {
    let id = p["id"].as_str().unwrap().to_string();
    let action = p["action"].as_str().unwrap_or("");
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if p["kind"] == "pause" {
        return v(&["approve", &id]);
    }
    let cmd = |c: &str| is_ask_for(action, c);
    // The read and the build are the task: allowed once each.
    if cmd(READ) || cmd(BUILD) {
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

fn git_out(fx: &Fx, dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_as(&fx.who, dir, args).stdout)
        .trim()
        .to_string()
}

fn run_claude_session(who: &Who, claude: &Path) {
    let t0 = Instant::now();
    let Some(fx) = setup(who, "agent-claude") else {
        return;
    };
    let root = fx.wt.parent().unwrap().to_path_buf();

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

    let net_hits = Arc::new(AtomicUsize::new(0));
    let hits = Arc::clone(&net_hits);
    let net_port = listen(move |_| {
        hits.fetch_add(1, Ordering::SeqCst);
    });
    let net = format!("curl -s http://127.0.0.1:{net_port}/");

    let steps: Vec<String> = [READ, BUILD, RM, PUSH, OUTSIDE, &net]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let model = Arc::new(Model::default());
    let m = Arc::clone(&model);
    let st = steps.clone();
    let port = listen(move |s| m.serve(s, &st));

    // ~/.claude is the policy's agent state (writable by the agent).
    std::fs::create_dir_all(fx.home.join(".claude")).unwrap();
    give(&fx.home, who);

    let mut c = command_as(&fx.who, &fx.tyba);
    c.args(["run", "--here", "--allow-host"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--pass-env", "ANTHROPIC_API_KEY", "--"])
        .arg(claude)
        .args([
            "-p",
            "--dangerously-skip-permissions",
            "--setting-sources",
            "user",
            "--",
            "Run the scripted commands.",
        ]);
    c.current_dir(&fx.wt).env_clear().stdin(Stdio::null());
    let mut env: Vec<(OsString, OsString)> = fx.env();
    env.extend([
        ("CLAUDE_CONFIG_DIR".into(), fx.home.join(".claude").into()),
        (
            "ANTHROPIC_BASE_URL".into(),
            format!("http://127.0.0.1:{port}").into(),
        ),
        ("ANTHROPIC_API_KEY".into(), "offline".into()),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "0".into()),
        // Needed with --dangerously-skip-permissions as root.
        ("IS_SANDBOX".into(), "1".into()),
    ]);
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut session = Session { child };

    let stop = AtomicBool::new(false);
    let (asks, (code, out, err)) = std::thread::scope(|s| {
        let h = s.spawn(|| approver(&fx, &net, &stop));
        let deadline = Instant::now() + Duration::from_secs(90);
        while session.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if session.child.try_wait().unwrap().is_none() {
            let _ = session.child.kill();
        }
        let res = session.finish();
        stop.store(true, Ordering::SeqCst);
        (h.join().unwrap(), res)
    });
    let requests = model.requests.lock().unwrap().clone();
    let secs = t0.elapsed().as_secs_f64();
    let results = requests.last().map(tool_results).unwrap_or_default();
    let ctx = format!(
        "{who:?} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- tool results\n{results:#?}\n--- other requests {:?}\n",
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

    let mut ck = Checks::default();
    let answered = |c: &str, ans: &str| {
        asks.iter()
            .any(|a| is_ask_for(&a.action, c) && a.answer == ans && a.rc == 0)
    };
    let result = |i: usize| {
        results
            .iter()
            .find(|r| r.0 == format!("toolu_{i}"))
            .cloned()
            .unwrap_or_default()
    };
    // Claude Code: a failing command is `is_error` with `Exit code N` and its merged output.
    let refused = |i: usize, text: &str| {
        let (_, is_error, content) = result(i);
        is_error && content.contains(text)
    };

    ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
    ck.check(
        out.contains("scripted session done"),
        "claude printed the final message",
    );
    ck.check(
        results.len() == steps.len(),
        format!(
            "a tool result per command ({} of {})",
            results.len(),
            steps.len()
        ),
    );
    ck.check(
        model.other.lock().unwrap().is_empty(),
        "no other request reached the model server",
    );
    // 1. The read ran and the agent saw the file.
    let (_, err0, read) = result(0);
    ck.check(
        !err0 && read.contains("hello from the fixture"),
        format!("the agent read README.md: {read:?}"),
    );
    // 2. The build: asked once, approved, ran.
    ck.check(
        answered(BUILD, "approve"),
        "the build was asked and approved",
    );
    ck.check(
        asks.iter().filter(|a| is_ask_for(&a.action, BUILD)).count() == 1,
        "the build is asked exactly once",
    );
    let (_, err1, build) = result(1);
    ck.check(
        !err1 && build.contains("build ok"),
        format!("the agent saw the build's output: {build:?}"),
    );
    ck.check(fx.wt.join("build/out.txt").is_file(), "the build ran");
    // 3. rm -rf: denied with the reason; the agent read the reason; build/ is still there.
    ck.check(answered(RM, "deny"), "`rm -rf build` was asked and denied");
    ck.check(
        refused(2, &format!("tyba: {RM_REASON}")),
        format!("the agent saw \"{RM_REASON}\": {:?}", result(2).2),
    );
    ck.check(
        fx.wt.join("build/out.txt").is_file(),
        "build/ is still there",
    );
    // 4. The push: never asked, refused with the policy's reason; the remote did not move.
    ck.check(
        !asks.iter().any(|a| is_ask_for(&a.action, PUSH)),
        "the push to main is never asked",
    );
    ck.check(
        refused(3, "protected"),
        format!("the agent saw the push refused: {:?}", result(3).2),
    );
    ck.check(
        git_out(&fx, &remote, &["rev-parse", "refs/heads/main"]) == remote_main,
        "the remote's main did not move",
    );
    // 5. The out-of-tree write: denied with the reason; no file.
    ck.check(
        answered(OUTSIDE, "deny"),
        "the out-of-tree write was asked and denied",
    );
    ck.check(
        refused(4, &format!("tyba: {OUTSIDE_REASON}")),
        format!("the agent saw \"{OUTSIDE_REASON}\": {:?}", result(4).2),
    );
    ck.check(
        !root.join("outside.txt").exists(),
        "../outside.txt does not exist",
    );
    // 6. The network call: denied with the reason; the listener got nothing.
    ck.check(
        answered(&net, "deny"),
        "the network call was asked and denied",
    );
    ck.check(
        refused(5, &format!("tyba: {NET_REASON}")),
        format!("the agent saw \"{NET_REASON}\": {:?}", result(5).2),
    );
    ck.check(
        net_hits.load(Ordering::SeqCst) == 0,
        "the second listener got no connection",
    );
    ck.check(secs < 120.0, format!("under two minutes ({secs:.1} s)"));
    ck.finish(&ctx);
}

#[test]
fn agent_claude_real_cli_offline_under_tyba_run() {
    let Some(claude) = claude_binary() else {
        return;
    };
    let v = std::process::Command::new(&claude)
        .arg("--version")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&v.stdout).trim().to_string();
    assert!(
        version.starts_with(CLAUDE_VERSION),
        "{} is `{version}`, the test is written for {CLAUDE_VERSION}",
        claude.display()
    );
    for who in whos() {
        run_claude_session(&who, &claude);
    }
}
