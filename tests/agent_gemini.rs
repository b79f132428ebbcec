//! The real Gemini CLI end to end (issue 12): npm `@google/gemini-cli` 0.61.0, installed as its
//! users install it (`npm install -g --prefix /opt/tyba-test-npm-global`, done by `.ci/run`: a
//! `bin/gemini` symlink to the package's `bundle/gemini.js`, a multi-file JS bundle run by
//! `node` through its `#!/usr/bin/env node` line), started by the name users type:
//! `tyba run --here -- gemini -p … --approval-mode yolo` with the npm bin dir on `PATH`. Fully
//! offline against a scripted Generative Language API server on 127.0.0.1 written here
//! (`GOOGLE_GEMINI_BASE_URL`): one `run_shell_command` call per turn, the whole history in each
//! request, so the `functionResponse` of every step (what the model saw) is recorded. Gemini
//! re-launches itself (`node --max-old-space-size=N …/gemini.js …`) and wraps every shell
//! command (`_bgpids_file=…` / `( trap 'jobs -p > "$_bgpids_file"' EXIT` / CMD / `)` / …):
//! both are the real thing, nothing here turns them off.
//!
//! Three modes, as the test's user and as the unprivileged `TYBA_TEST_USER`:
//! - `--non-interactive` (CI): each yellow/red step is one refusal with tyba's reason, the
//!   green read runs, the push is refused as a push to protected `main`;
//! - a scripted person answering through `tyba inbox --json` / `approve` / `deny`: the build is
//!   asked once and approved, `rm -rf build` denied with a reason the model then reads;
//! - the same person with tyba's hook installed (`tyba hook install gemini --user`, tyba in
//!   `~/.cargo/bin`): still one ask per step (the hook's, the exec then not asked again), and a
//!   refusal reaches the model as the command's output or as Gemini's `Tool execution
//!   blocked: …` with the reason.
//!
//! All assert: no ask or refusal before the first scripted step, none but the steps' own in
//! the whole session, nothing outside the worktree changed.
//!
//! Gemini is found under `TYBA_TEST_GEMINI_PREFIX` or `/opt/tyba-test-npm-global`; when it is
//! not there the test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agent_support.rs"]
mod agent;

use agent::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pinned version `.ci/run` installs.
const GEMINI_VERSION: &str = "0.61.0";
const NPM_PREFIX: &str = "/opt/tyba-test-npm-global";
/// The model named on the command line (skips Gemini's model-router request).
const MODEL: &str = "gemini-2.5-flash";

/// The npm prefix holding `bin/gemini`, checked to be the pinned version.
fn gemini_prefix() -> Option<PathBuf> {
    let prefix = std::env::var_os("TYBA_TEST_GEMINI_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(NPM_PREFIX));
    let pkg = prefix.join("lib/node_modules/@google/gemini-cli/package.json");
    if prefix.join("bin/gemini").is_file() && pkg.is_file() {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&pkg).unwrap()).unwrap();
        assert_eq!(
            v["version"],
            GEMINI_VERSION,
            "{} is not Gemini CLI {GEMINI_VERSION}",
            pkg.display()
        );
        return Some(prefix);
    }
    assert!(
        !require_sandbox(),
        "the Gemini CLI is not installed under {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `npm install -g --prefix {NPM_PREFIX} @google/gemini-cli@{GEMINI_VERSION}` (as .ci/run \
         does) or point TYBA_TEST_GEMINI_PREFIX at an npm prefix holding it",
        prefix.display()
    );
    eprintln!(
        "SKIP: the Gemini CLI is not installed under {}",
        prefix.display()
    );
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` (one SSE
// event holding a `GenerateContentResponse`) and `…:generateContent` (the same, as JSON).

/// The `functionResponse` parts of a request, in order: (id, response as text).
fn function_responses(req: &serde_json::Value) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for c in req["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            let fr = &p["functionResponse"];
            if fr.is_object() {
                let r = &fr["response"];
                let text = match (&r["output"], &r["error"]) {
                    (serde_json::Value::String(o), serde_json::Value::String(e)) => {
                        format!("{o}\n{e}")
                    }
                    (serde_json::Value::String(o), _) => o.clone(),
                    (_, serde_json::Value::String(e)) => e.clone(),
                    _ => r.to_string(),
                };
                v.push((fr["id"].as_str().unwrap_or("").to_string(), text));
            }
        }
    }
    v
}

fn reply(body: &serde_json::Value, steps: &[String]) -> (usize, serde_json::Value) {
    let done = function_responses(body).len();
    let part = match steps.get(done) {
        Some(cmd) => serde_json::json!({"functionCall": {
            "id": format!("call_{done}"),
            "name": "run_shell_command",
            "args": {"command": cmd, "description": "scripted step"},
        }}),
        None => serde_json::json!({"text": "scripted session done"}),
    };
    (
        done,
        serde_json::json!({
            "candidates": [{
                "content": {"role": "model", "parts": [part]},
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            "modelVersion": MODEL,
        }),
    )
}

fn handle(rec: &Recorded, steps: &[String], method: &str, path: &str, body: &[u8]) -> Reply {
    let stream = path.contains(":streamGenerateContent");
    if method != "POST" || !(stream || path.contains(":generateContent")) {
        rec.other_request(format!("{method} {path}"));
        return ("404 Not Found", "text/plain", String::new());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        rec.other_request(format!("{method} {path}: bad JSON"));
        return ("400 Bad Request", "text/plain", String::new());
    };
    let (step, r) = reply(&v, steps);
    rec.model_request(v, step);
    if stream {
        ("200 OK", "text/event-stream", format!("data: {r}\n\n"))
    } else {
        ("200 OK", "application/json", r.to_string())
    }
}

// ---------------------------------------------------------------------------------------

/// The scripted step an ask's action is for: `run `CMD`` as the kernel layer shows a command,
/// or Gemini's wrapper around it (the command is one line of the wrapped script).
fn step_of(steps: &[String], action: &str) -> Option<String> {
    // tyba's hook asks `CMD (run_shell_command via gemini)`.
    let action = action
        .strip_suffix(" (run_shell_command via gemini)")
        .unwrap_or(action);
    let inner = action
        .strip_prefix("run `")
        .and_then(|a| a.strip_suffix('`'))
        .unwrap_or(action);
    if let Some(s) = steps.iter().find(|s| s.as_str() == inner) {
        return Some(s.clone());
    }
    if inner.contains("_bgpids_file") {
        return steps
            .iter()
            .find(|s| inner.lines().any(|l| l.trim() == s.as_str()))
            .cloned();
    }
    None
}

/// The scripted step a refusal of the end-of-session summary (`exec ACTION: REASON`) is for.
fn entry_step(steps: &[String], entry: &str) -> Option<String> {
    let action = entry.strip_prefix("exec ").unwrap_or(entry);
    if let Some(c) = steps.iter().find(|c| action.starts_with(&format!("{c}: "))) {
        return Some(c.clone());
    }
    if action.contains("_bgpids_file") {
        return steps
            .iter()
            .find(|c| action.lines().any(|l| l.trim() == c.as_str()))
            .cloned();
    }
    None
}

fn run_gemini_session(who: &Who, prefix: &Path, mode: Mode) {
    let t0 = Instant::now();
    let Some(mut s) = Scripted::new(who, "agent-gemini") else {
        return;
    };
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));

    // ~/.gemini is the policy's agent state; settings.json in it is a control file the
    // sandbox keeps read-only.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/gemini");
    std::fs::create_dir_all(s.fx.home.join(".gemini")).unwrap();
    std::fs::copy(
        data.join("settings.json"),
        s.fx.home.join(".gemini/settings.json"),
    )
    .unwrap();
    give(&s.fx.home, who);

    let mut env = s.fx.env();
    if mode == Mode::Hook {
        // The hook runs inside the sandbox, so tyba must be where the sandbox may execute
        // it: `~/.cargo/bin` (policy `read_only`), as after `cargo install`.
        let bin = s.fx.home.join(".cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        copy_exe(&s.fx.tyba, &bin.join("tyba"));
        give(&s.fx.home, who);
        let o = run_tyba(
            who,
            &bin.join("tyba"),
            &s.fx.wt,
            &env,
            &["hook", "install", "gemini", "--user"],
        );
        assert!(
            o.status.success(),
            "tyba hook install gemini --user: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The person runs the tyba they installed: the session's tyba is the hook's.
        s.fx.tyba = bin.join("tyba");
    }
    set_env(&mut env, "PATH", path_with(&prefix.join("bin")));
    set_env(
        &mut env,
        "GOOGLE_GEMINI_BASE_URL",
        format!("http://127.0.0.1:{port}"),
    );
    set_env(&mut env, "GEMINI_API_KEY", "offline");
    let home_before = s.home_snapshot(&[".gemini"]);
    let steps = s.steps.clone();
    let (asks, code, out, err) = run_session(
        &s,
        mode,
        port,
        &["GEMINI_API_KEY"],
        &[
            "gemini",
            "-p",
            "Run the scripted commands.",
            "--approval-mode",
            "yolo",
            "--model",
            MODEL,
        ],
        &env,
        None,
        &|a| step_of(&steps, a),
        Duration::from_secs(100),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let other = rec.other.lock().unwrap().clone();
    let first_step_at = *rec.first_step_at.lock().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let results = requests.last().map(function_responses).unwrap_or_default();
    let refusals = summary_refusals(&err);
    let ctx = format!(
        "{who:?} {mode:?} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- function responses\n{results:#?}\n--- other requests {other:?}\n",
        describe(&asks)
    );
    eprintln!("{ctx}");

    let out_of = |i: usize| {
        results
            .iter()
            .find(|r| r.0 == format!("call_{i}"))
            .map(|r| r.1.clone())
            .unwrap_or_default()
    };
    // Gemini reports a failing command as `Output: …` then `Exit Code: N`.
    let failed = |i: usize, text: &str| {
        let o = out_of(i);
        o.contains("Exit Code: ") && o.contains(text)
    };
    // A refusal with `reason`: the refused exec's `tyba: REASON` in the command's output, or
    // (with the hook) Gemini's `Tool execution blocked: …` carrying the reason.
    let refused = |i: usize, reason: &str| {
        let o = out_of(i);
        failed(i, &format!("tyba: {reason}"))
            || (mode == Mode::Hook && o.contains("Tool execution blocked") && o.contains(reason))
    };
    let ok = |i: usize, text: &str| {
        let o = out_of(i);
        !o.contains("Exit Code: ") && !o.contains("Tool execution blocked") && o.contains(text)
    };
    let step_asks = |c: &str| {
        asks.iter()
            .filter(|a| step_of(&s.steps, &a.action).as_deref() == Some(c))
            .count()
    };
    let answered = |c: &str, ans: &str| {
        asks.iter().any(|a| {
            step_of(&s.steps, &a.action).as_deref() == Some(c) && a.answer == ans && a.rc == 0
        })
    };
    let refused_for = |c: &str| {
        refusals
            .iter()
            .filter(|e| entry_step(&s.steps, e).as_deref() == Some(c))
            .count()
    };

    let mut ck = Checks::default();
    // Start-up: nothing asked or refused before the first step, nothing but the steps after.
    let before: Vec<&Answered> = asks
        .iter()
        .filter(|a| first_step_at.is_none_or(|t| a.at < t))
        .collect();
    ck.check(
        before.is_empty(),
        format!(
            "no ask before the first scripted step ({} asked)",
            before.len()
        ),
    );
    let stray: Vec<&Answered> = asks
        .iter()
        .filter(|a| step_of(&s.steps, &a.action).is_none())
        .collect();
    ck.check(
        stray.is_empty(),
        format!("no ask but the scripted steps' ({} others)", stray.len()),
    );
    let stray_refusals: Vec<&String> = refusals
        .iter()
        .filter(|e| entry_step(&s.steps, e).is_none())
        .collect();
    let refused_before =
        refusals_before_first_step(&refusals, |e| entry_step(&s.steps, e).is_some());
    ck.check(
        refused_before == 0,
        format!("no refusal before the first scripted step ({refused_before} refused)"),
    );
    ck.check(
        stray_refusals.is_empty(),
        format!("no refusal but the scripted steps' ({stray_refusals:?})"),
    );
    ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
    ck.check(
        out.contains("scripted session done"),
        "gemini printed the final message",
    );
    ck.check(
        results.len() == s.steps.len(),
        format!(
            "a function response per step ({} of {})",
            results.len(),
            s.steps.len()
        ),
    );
    ck.check(
        other.is_empty(),
        "no other request reached the model server",
    );

    // 1. The green read: never asked or refused; the agent saw the file.
    ck.check(step_asks(READ) == 0, "the green read is not asked");
    ck.check(refused_for(READ) == 0, "the green read is not refused");
    ck.check(
        ok(0, "hello from the fixture"),
        format!("the agent read README.md: {:?}", out_of(0)),
    );
    match mode {
        Mode::Person | Mode::Hook => {
            // 2. The yellow build: asked once, approved, ran.
            ck.check(step_asks(BUILD) == 1, "the build is asked exactly once");
            ck.check(answered(BUILD, "approve"), "the build was approved");
            ck.check(
                ok(1, "build ok"),
                format!("the agent saw the build's output: {:?}", out_of(1)),
            );
            ck.check(s.fx.wt.join("build/out.txt").is_file(), "the build ran");
            // 3. rm -rf: asked once, denied with a reason the model read.
            ck.check(step_asks(RM) == 1, "`rm -rf build` is asked exactly once");
            ck.check(answered(RM, "deny"), "`rm -rf build` was denied");
            ck.check(
                refused(2, RM_REASON),
                format!("the agent saw \"tyba: {RM_REASON}\": {:?}", out_of(2)),
            );
            // 5, 6: asked once each, denied with reasons the model read.
            ck.check(step_asks(OUTSIDE) == 1, "the outside write is asked once");
            ck.check(
                refused(4, OUTSIDE_REASON),
                format!("the agent saw \"tyba: {OUTSIDE_REASON}\": {:?}", out_of(4)),
            );
            ck.check(step_asks(&s.net) == 1, "the network call is asked once");
            ck.check(
                refused(5, NET_REASON),
                format!("the agent saw \"tyba: {NET_REASON}\": {:?}", out_of(5)),
            );
            ck.check(
                asks.len() == 4,
                format!("four asks in the session (got {})", asks.len()),
            );
        }
        Mode::NonInteractive => {
            // 2. The yellow build: one refusal, the model saw tyba's reason.
            ck.check(refused_for(BUILD) == 1, "the build is refused once");
            ck.check(
                failed(1, "tyba: ") && failed(1, "non-interactive"),
                format!("the agent saw the build refused: {:?}", out_of(1)),
            );
            ck.check(
                !s.fx.wt.join("build/out.txt").exists(),
                "the refused build did not run",
            );
            // 3. rm -rf: one refusal with tyba's reason.
            ck.check(refused_for(RM) == 1, "`rm -rf build` is refused once");
            ck.check(
                failed(2, "tyba: ") && failed(2, "deletion"),
                format!("the agent saw tyba's reason for `rm -rf`: {:?}", out_of(2)),
            );
            ck.check(
                refused_for(OUTSIDE) == 1,
                "the outside write is refused once",
            );
            ck.check(
                failed(4, "tyba: "),
                format!("outside write: {:?}", out_of(4)),
            );
            ck.check(refused_for(&s.net) == 1, "the network call is refused once");
            ck.check(failed(5, "tyba: "), format!("network: {:?}", out_of(5)));
        }
    }
    ck.check(
        s.fx.wt.join("build/earlier.txt").is_file(),
        "build/ is still there",
    );
    // 4. The push to main: never asked, refused as a push to protected main, remote unmoved.
    ck.check(step_asks(PUSH) == 0, "the push to main is never asked");
    ck.check(
        (failed(3, "tyba: ") && failed(3, "protected"))
            || (mode == Mode::Hook
                && out_of(3).contains("Tool execution blocked")
                && out_of(3).contains("protected")),
        format!("the agent saw the push refused: {:?}", out_of(3)),
    );
    ck.check(
        s.remote_main_now() == s.remote_main,
        "the remote's main did not move",
    );
    // Nothing outside the worktree.
    ck.check(
        !s.root.join("outside.txt").exists(),
        "../outside.txt does not exist",
    );
    let home_changes = changes(&home_before, &s.home_snapshot(&[".gemini"]));
    ck.check(
        home_changes.is_empty(),
        format!("nothing in the home but the agent's state changed: {home_changes:?}"),
    );
    let changes = s.outside_changes();
    ck.check(
        changes.is_empty(),
        format!("nothing outside the worktree changed: {changes:?}"),
    );
    ck.check(
        s.net_hits.load(std::sync::atomic::Ordering::SeqCst) == 0,
        "the second listener got no connection",
    );
    eprintln!(
        "MEASURED gemini {who:?} {mode:?}: asks before the first step {}, asks in the session {}, refusals before the first step {refused_before}, refusals {} ({} not of a step)",
        before.len(),
        asks.len(),
        refusals.len(),
        stray_refusals.len()
    );
    ck.finish(&ctx);
}

#[test]
fn agent_gemini_by_name_non_interactive() {
    let Some(prefix) = gemini_prefix() else {
        return;
    };
    for_each_who(|who| run_gemini_session(who, &prefix, Mode::NonInteractive));
}

#[test]
fn agent_gemini_by_name_scripted_person() {
    let Some(prefix) = gemini_prefix() else {
        return;
    };
    for_each_who(|who| run_gemini_session(who, &prefix, Mode::Person));
}

#[test]
fn agent_gemini_by_name_with_tyba_hook() {
    let Some(prefix) = gemini_prefix() else {
        return;
    };
    for_each_who(|who| run_gemini_session(who, &prefix, Mode::Hook));
}

// ---------------------------------------------------------------------------------------
// The interactive TUI (`gemini`), in a real terminal.

/// Gemini CLI's TUI as a person meets it (0.61.0; its folder trust is off in the test
/// settings, as in `-p` above).
fn gemini_tui(argv: Vec<String>) -> TuiAgent<'static> {
    TuiAgent {
        name: "gemini",
        argv,
        ready: &|sc| sc.iter().any(|l| l.contains("Type your message")),
        dialog: &|sc| {
            sc.iter()
                .any(|l| l.contains("Do you trust this folder?"))
                .then(|| choose(sc, "Trust folder"))
                .flatten()
                .map(|k| ("Do you trust this folder?", k))
        },
        // Its confirmation: `? Shell  CMD`, the command, "Allow execution of [Shell]?",
        // "1. Allow once" first.
        own_prompt: &|sc| {
            sc.iter().any(|l| l.contains("Allow execution")).then(|| {
                let cmd = sc
                    .iter()
                    .find_map(|l| l.split_once("? Shell").map(|(_, c)| c))
                    .map(|c| c.trim_matches(|ch: char| ch == '│' || ch.is_whitespace()))
                    .unwrap_or("")
                    .to_string();
                (cmd, vec!["Enter"])
            })
        },
        quit: &["C-c", "C-c"],
    }
}

/// One TUI session of Gemini CLI with `gate`: under tyba with `--approval-mode yolo` (tyba is
/// the gate, as with `-p` above); alone, in its default approval mode.
fn run_gemini_tui(who: &Who, prefix: &Path, gate: Gate) -> Option<(usize, usize)> {
    let s = Scripted::new(who, "agent-gemini-tui")?;
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/gemini");
    std::fs::create_dir_all(s.fx.home.join(".gemini")).unwrap();
    std::fs::copy(
        data.join("settings.json"),
        s.fx.home.join(".gemini/settings.json"),
    )
    .unwrap();
    give(&s.fx.home, who);
    let mut env = s.fx.env();
    set_env(&mut env, "PATH", path_with(&prefix.join("bin")));
    set_env(
        &mut env,
        "GOOGLE_GEMINI_BASE_URL",
        format!("http://127.0.0.1:{port}"),
    );
    set_env(&mut env, "GEMINI_API_KEY", "offline");
    set_env(&mut env, "TERM", "xterm-256color");
    let home_before = s.home_snapshot(&[".gemini"]);
    let mut argv: Vec<String> = vec!["gemini".into(), "--model".into(), MODEL.into()];
    if gate == Gate::Tyba {
        argv.extend(["--approval-mode".into(), "yolo".into()]);
    }
    let steps = s.steps.clone();
    let n = s.steps.len();
    let done = || {
        rec.requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| function_responses(r).len() >= n)
    };
    let run = run_tui(
        &s,
        gate,
        port,
        &["GEMINI_API_KEY"],
        &gemini_tui(argv),
        &env,
        "Run the scripted commands.",
        &|a| step_of(&steps, a),
        &rec,
        &done,
        Duration::from_secs(150),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let results = requests.last().map(function_responses).unwrap_or_default();
    let other = rec.other.lock().unwrap().clone();
    // Gemini reports a failing command as `Output: …` then `Exit Code: N`.
    let seen: Vec<Seen> = (0..s.steps.len())
        .map(
            |i| match results.iter().find(|r| r.0 == format!("call_{i}")) {
                Some((_, o)) => Seen {
                    reported: true,
                    failed: o.contains("Exit Code: ") || o.contains("Tool execution blocked"),
                    text: o.clone(),
                },
                None => Seen::default(),
            },
        )
        .collect();
    let t = TuiSeen {
        agent: "gemini",
        seen: &seen,
        first_step_at: *rec.first_step_at.lock().unwrap(),
        other: &other,
        step_of: &|a| step_of(&s.steps, a),
        entry_step: &|e| entry_step(&s.steps, e),
        home_changes: changes(&home_before, &s.home_snapshot(&[".gemini"])),
    };
    finish_tui(&s, gate, &run, &t, &results)
}

#[test]
fn agent_gemini_tui_under_tyba() {
    let Some(prefix) = gemini_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_gemini_tui(who, &prefix, Gate::Tyba);
    });
}

/// The same session without tyba in Gemini CLI's default approval mode: its own prompts
/// counted (`docs/agents.md`), and the control of the TUI checks.
#[test]
fn agent_gemini_tui_own_prompts() {
    let Some(prefix) = gemini_prefix() else {
        return;
    };
    run_gemini_tui(&whos().pop().unwrap(), &prefix, Gate::AgentOwn);
}
