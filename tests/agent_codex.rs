//! The real Codex CLI end to end (issue 12): npm `@openai/codex` 0.171.0 installed as its users
//! install it (`npm install -g --prefix PREFIX`: `PREFIX/bin/codex` is npm's link to the
//! package's `bin/codex.js`, a `#!/usr/bin/env node` launcher that spawns the native binary of
//! its platform package), started by the name users type: `tyba run --here -- codex exec …`
//! with `PREFIX/bin` on `PATH`. Fully offline against a scripted Responses API server on
//! 127.0.0.1 written here (`shared/notes/agents-offline.md`): one `exec_command` call per turn,
//! the whole history in each request, so the `function_call_output` of every step (what the
//! model read) is recorded. Harness: `tests/agent_support.rs`.
//!
//! Three modes, as the test's user and as the unprivileged `TYBA_TEST_USER`:
//! `--non-interactive` (CI), a scripted person answering through `tyba inbox --json` /
//! `approve` / `deny`, and the same person with tyba's hook installed (`tyba hook install codex
//! --user`, tyba in `~/.cargo/bin`, `--dangerously-bypass-hook-trust`). The session adds a push
//! to `main` from inside `make` to the six steps; every command Codex runs goes through its own
//! process-setup wrapper (`codex --codex-run-as-process-setup … /bin/bash -lc CMD`), so the
//! direct push is the push inside the agent's wrapper.
//!
//! Install layouts, each started by name with zero asks before the first step: npm with the
//! system-wide prefix (`.ci/run`: `/opt/tyba-test-npm-global`), with a home prefix
//! (`~/.npm-global`), and nvm's (`~/.nvm/versions/node/vX/bin/{node,codex}`), the last two
//! rebuilt in the fake home from the installed files (`link_tree`).
//!
//! Codex is found under `TYBA_TEST_NPM_PREFIX` or `/opt/tyba-test-npm-global`; when it is not
//! there the test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agent_support.rs"]
mod agent;

use agent::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pinned version `.ci/run` installs.
const CODEX_VERSION: &str = "0.171.0";
const NPM_PREFIX: &str = "/opt/tyba-test-npm-global";
const PACKAGE: &str = "lib/node_modules/@openai/codex";

/// The npm global prefix holding `bin/codex`, checked to be the pinned version.
fn npm_prefix() -> Option<PathBuf> {
    let prefix = std::env::var_os("TYBA_TEST_NPM_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(NPM_PREFIX));
    let pkg = prefix.join(PACKAGE).join("package.json");
    if prefix.join("bin/codex").exists() && pkg.is_file() {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&pkg).unwrap()).unwrap();
        assert_eq!(
            v["version"],
            CODEX_VERSION,
            "{} is not Codex CLI {CODEX_VERSION}",
            pkg.display()
        );
        return Some(prefix);
    }
    assert!(
        !require_sandbox(),
        "the Codex CLI is not installed under {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `npm install -g --prefix {NPM_PREFIX} @openai/codex@{CODEX_VERSION}` (as scripts/install-test-agents does) \
         or point TYBA_TEST_NPM_PREFIX at an npm prefix holding it",
        prefix.display()
    );
    eprintln!(
        "SKIP: the Codex CLI is not installed under {}",
        prefix.display()
    );
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: `POST …/responses`, server-sent events.

fn sse(event: &str, data: &serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The `function_call_output` items of a request: (call_id, output).
fn call_outputs(req: &serde_json::Value) -> Vec<(String, String)> {
    req["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| {
            let out = match &i["output"] {
                serde_json::Value::String(s) => s.clone(),
                o => o.to_string(),
            };
            (i["call_id"].as_str().unwrap_or("").to_string(), out)
        })
        .collect()
}

fn reply(body: &serde_json::Value, steps: &[String]) -> (usize, String) {
    let done = call_outputs(body).len();
    let item = match steps.get(done) {
        Some(cmd) => serde_json::json!({
            "type": "function_call",
            "id": format!("fc_{done}"),
            "call_id": format!("call_{done}"),
            "name": "exec_command",
            "arguments": serde_json::json!({"cmd": cmd, "yield_time_ms": 30000}).to_string(),
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
    (done, s)
}

/// The reply to a request that is not the session ([`Recorded::side`]): one assistant
/// message, `{"title": …}` when the request asks for output of a JSON schema.
fn side_reply(req: &serde_json::Value) -> String {
    let text = if req["text"]["format"]["type"] == "json_schema" {
        serde_json::json!({"title": "Run scripted commands"}).to_string()
    } else {
        "Run scripted commands".to_string()
    };
    let item = serde_json::json!({
        "type": "message",
        "id": "msg_side",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    });
    let mut s = sse(
        "response.output_item.done",
        &serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    s.push_str(&sse(
        "response.completed",
        &serde_json::json!({"type": "response.completed", "response": {"id": "resp_side"}}),
    ));
    s
}

fn handle(rec: &Recorded, steps: &[String], method: &str, path: &str, body: &[u8]) -> Reply {
    if method != "POST" || !path.ends_with("/responses") {
        rec.other_request(format!("{method} {path}"));
        return ("404 Not Found", "text/plain", String::new());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        rec.other_request(format!("{method} {path}: bad JSON"));
        return ("400 Bad Request", "text/plain", String::new());
    };
    // Only a request that offers the session's tool is the session. Codex's TUI also asks
    // the model for a thread title (`text.format` a JSON schema, no tools); answered with
    // the session's steps, it would answer each `exec_command` with "unsupported call" and
    // ask again, and its history of such outputs looked like a finished session: the person
    // left (Ctrl-C) in the middle of the real one.
    let offers_exec = v["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == "exec_command"));
    if !offers_exec {
        let kind = v["client_metadata"]["x-codex-turn-metadata"]
            .as_str()
            .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
            .and_then(|m| m["thread_source"].as_str().map(str::to_string))
            .unwrap_or_else(|| "no exec_command tool".into());
        rec.side_request(kind);
        return ("200 OK", "text/event-stream", side_reply(&v));
    }
    let (step, r) = reply(&v, steps);
    rec.model_request(v, step);
    ("200 OK", "text/event-stream", r)
}

// ---------------------------------------------------------------------------------------

/// The scripted step an ask's action is for: `run `CMD`` (the kernel layer, maybe as
/// `/bin/bash -lc CMD`) or `CMD (Bash via codex)` (tyba's hook).
fn step_of(steps: &[String], action: &str) -> Option<String> {
    let a = action
        .strip_suffix(" (Bash via codex)")
        .or_else(|| {
            action
                .strip_prefix("run `")
                .and_then(|a| a.strip_suffix('`'))
        })
        .unwrap_or(action);
    steps
        .iter()
        .find(|s| {
            a == s.as_str()
                || a.strip_suffix(s.as_str())
                    .is_some_and(|p| p.ends_with(" -lc ") || p.ends_with(" -c "))
                || a.ends_with(&format!(" -lc '{s}'"))
                || a.ends_with(&format!(" -c '{s}'"))
        })
        .cloned()
}

/// The scripted step a refusal of the end-of-session summary (`exec ACTION: REASON`) is for.
fn entry_step(steps: &[String], entry: &str) -> Option<String> {
    let action = entry.strip_prefix("exec ").unwrap_or(entry);
    // Longest first: `make publish`'s entry is its `git push`.
    steps
        .iter()
        .filter(|c| {
            let (a, _) = action.split_once(": ").unwrap_or((action, ""));
            step_of(&[c.to_string()], &format!("run `{a}`")).is_some()
        })
        .max_by_key(|c| c.len())
        .cloned()
}

/// Where the agent is installed for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// npm global with the system prefix of `.ci/run`.
    System,
    /// `npm install -g --prefix ~/.npm-global`.
    HomePrefix,
    /// nvm: `~/.nvm/versions/node/vX/{bin/node,bin/codex,lib/node_modules/…}`.
    Nvm,
}

/// Builds `layout` in the fake home from the installed `prefix`; returns the `bin` to put on
/// `PATH` and the home directories that hold the installation (not snapshotted).
fn install(s: &Scripted, prefix: &Path, layout: Layout) -> (PathBuf, Vec<&'static str>) {
    let home = &s.fx.home;
    let at = match layout {
        Layout::System => return (prefix.join("bin"), Vec::new()),
        Layout::HomePrefix => home.join(".npm-global"),
        Layout::Nvm => {
            let v = String::from_utf8(
                std::process::Command::new("node")
                    .arg("--version")
                    .output()
                    .unwrap()
                    .stdout,
            )
            .unwrap();
            let root = home.join(".nvm/versions/node").join(v.trim());
            // nvm's node is its own file in its version's bin.
            std::fs::create_dir_all(root.join("bin")).unwrap();
            let node = std::fs::canonicalize("/usr/bin/node").unwrap();
            std::fs::copy(&node, root.join("bin/node")).unwrap();
            root
        }
    };
    link_tree(&prefix.join(PACKAGE), &at.join(PACKAGE));
    symlink(
        "../lib/node_modules/@openai/codex/bin/codex.js",
        &at.join("bin/codex"),
    );
    let dirs = match layout {
        Layout::HomePrefix => vec![".npm-global"],
        _ => vec![".nvm"],
    };
    (at.join("bin"), dirs)
}

/// What the model read of each step, from the `function_call_output`s of the last request.
/// Codex: `Process exited with code N` then the merged output; a hook's block is `Command
/// blocked by PreToolUse hook: …`; a failed spawn `exec_command failed: …`.
fn seen_of(s: &Scripted, results: &[(String, String)]) -> Vec<Seen> {
    (0..s.steps.len())
        .map(
            |i| match results.iter().find(|r| r.0 == format!("call_{i}")) {
                Some((_, o)) => Seen {
                    reported: true,
                    failed: !o.contains("exited with code 0"),
                    text: o.clone(),
                },
                None => Seen::default(),
            },
        )
        .collect()
}

fn run_codex_session(who: &Who, prefix: &Path, mode: Mode, layout: Layout) -> Measured {
    let t0 = Instant::now();
    let Some(s) = Scripted::new(who, "agent-codex") else {
        return Measured::default();
    };
    let mut s = s.with_make_push();
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));

    // CODEX_HOME is the fake home's ~/.codex (the policy's agent state; its config.toml and
    // rules/ are control files the sandbox keeps read-only).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/codex");
    let codex_home = s.fx.home.join(".codex");
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
            &["hook", "install", "codex", "--user"],
        );
        assert!(
            o.status.success(),
            "tyba hook install codex --user: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The person runs the tyba they installed: the session's tyba is the hook's.
        s.fx.tyba = bin.join("tyba");
    }
    // After every `give`: the layout's files are links to the installed ones.
    let (bin, install_dirs) = install(&s, prefix, layout);
    set_env(&mut env, "PATH", path_with(&bin));
    set_env(&mut env, "CODEX_HOME", codex_home.as_os_str());
    set_env(&mut env, "SCRIPTED_MODEL_KEY", "offline");
    let mut state = vec![".codex"];
    state.extend(&install_dirs);
    let home_before = s.home_snapshot(&state);
    let steps = s.steps.clone();
    let wt = s.fx.wt.to_str().unwrap().to_string();
    let mut agent = vec!["codex", "exec", "--skip-git-repo-check"];
    if mode == Mode::Hook {
        agent.push("--dangerously-bypass-hook-trust");
    }
    agent.extend(["-C", &wt, "Run the scripted commands."]);
    let (asks, code, out, err) = run_session(
        &s,
        mode,
        port,
        &["SCRIPTED_MODEL_KEY"],
        &agent,
        &env,
        None,
        &|a| step_of(&steps, a),
        Duration::from_secs(100),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let other = rec.other.lock().unwrap().clone();
    let first_step_at = *rec.first_step_at.lock().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let results = requests.last().map(call_outputs).unwrap_or_default();
    let seen = seen_of(&s, &results);
    let ctx = format!(
        "codex {layout:?} {who:?} {mode:?} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- outputs the model read\n{results:#?}\n--- other requests {other:?}\n",
        describe(&asks)
    );
    eprintln!("{ctx}");
    let home_changes = changes(&home_before, &s.home_snapshot(&state));
    check_outcome(
        &s,
        &Outcome {
            agent: "codex",
            who,
            mode,
            asks: &asks,
            code,
            out: &out,
            err: &err,
            seen: &seen,
            first_step_at,
            other: &other,
            step_of: &|a| step_of(&s.steps, a),
            entry_step: &|e| entry_step(&s.steps, e),
            home_changes,
        },
        &ctx,
    )
}

#[test]
fn agent_codex_by_name_non_interactive() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_codex_session(who, &prefix, Mode::NonInteractive, Layout::System);
    });
}

#[test]
fn agent_codex_by_name_scripted_person() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_codex_session(who, &prefix, Mode::Person, Layout::System);
    });
}

#[test]
fn agent_codex_by_name_with_tyba_hook() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_codex_session(who, &prefix, Mode::Hook, Layout::System);
    });
}

#[test]
fn agent_codex_npm_home_prefix_and_nvm_layouts() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        for layout in [Layout::HomePrefix, Layout::Nvm] {
            run_codex_session(who, &prefix, Mode::NonInteractive, layout);
        }
    });
}

// ---------------------------------------------------------------------------------------
// The interactive TUI (`codex`), in a real terminal.

/// Codex's TUI as a person meets it (0.171.0): `codex -C WT` as users type it, which starts
/// (or reuses) Codex's background app-server daemon, or with `--no-daemon` (the app server
/// inside the TUI's own process).
fn codex_tui(wt: &str, daemon: bool) -> TuiAgent<'static> {
    let mut argv: Vec<String> = vec!["codex".into()];
    if !daemon {
        argv.push("--no-daemon".into());
    }
    argv.extend(["-C".into(), wt.into()]);
    TuiAgent {
        name: "codex",
        argv,
        ready: &|sc| {
            sc.iter().any(|l| l.contains("Ask Codex to do anything"))
                && !sc.iter().any(|l| l.contains("Trust this folder?"))
        },
        // The folder-trust question of the first run in a folder: "1. Trust and continue".
        dialog: &|sc| {
            sc.iter()
                .any(|l| l.contains("Trust this folder?"))
                .then(|| ("Trust this folder?", vec!["Enter"]))
        },
        // Its approval prompt: the command on a `$ CMD` line, "1. Yes, proceed" first.
        own_prompt: &|sc| {
            sc.iter()
                .any(|l| l.contains("Would you like to run the following command?"))
                .then(|| {
                    let cmd = sc
                        .iter()
                        .find_map(|l| l.trim().strip_prefix("$ "))
                        .unwrap_or("")
                        .to_string();
                    (cmd, vec!["Enter"])
                })
        },
        quit: &["C-c", "C-c"],
    }
}

/// One TUI session of Codex with `gate`: under tyba, Codex's approvals off and its sandbox
/// off (tyba is the gate, as in `codex exec` above) and the folder trusted in its
/// `config.toml` beforehand (under tyba that file is a read-only control file, so the
/// answer could not be saved from the dialog); alone, Codex's defaults (no approval policy or
/// sandbox mode set, no rules), the dialog answered on the screen.
/// Whether an action (an ask's `run `…``, or the audit log's command line) is the daemon's
/// check of its own process right after starting it: `ps -p PID -o stat= -o lstart=`, PID a
/// process of the sandbox's private pid namespace. Refused, Codex gives up its daemon and
/// exits; tyba answers it from the sandbox's own `/proc` (probe `daemon-own-process`), so it
/// is never asked (`docs/agents.md`).
fn is_daemon_ps(action: &str) -> bool {
    let a = action
        .strip_prefix("run `")
        .and_then(|a| a.strip_suffix('`'))
        .unwrap_or(action);
    let w: Vec<&str> = a.split(' ').collect();
    matches!(
        w.as_slice(),
        ["ps", "-p", pid, "-o", "stat=", "-o", "lstart="]
            if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
    )
}

/// The entries of `dir` (names), empty when it does not exist.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn run_codex_tui(who: &Who, prefix: &Path, gate: Gate, daemon: bool) -> Option<(usize, usize)> {
    let s = Scripted::new(who, "agent-codex-tui")?.with_make_push();
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/codex");
    let codex_home = s.fx.home.join(".codex");
    std::fs::create_dir_all(codex_home.join("rules")).unwrap();
    let mut config = std::fs::read_to_string(data.join("config.toml"))
        .unwrap()
        .replace("@PORT@", &port.to_string());
    let wt = s.fx.wt.to_str().unwrap().to_string();
    match gate {
        Gate::Tyba => {
            config.push_str(&format!(
                "\n[projects.\"{wt}\"]\ntrust_level = \"trusted\"\n"
            ));
            std::fs::copy(
                data.join("allow-rm.rules"),
                codex_home.join("rules/allow-rm.rules"),
            )
            .unwrap();
        }
        Gate::AgentOwn => {
            config = config
                .lines()
                .filter(|l| !l.starts_with("approval_policy") && !l.starts_with("sandbox_mode"))
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    give(&s.fx.home, who);
    let mut env = s.fx.env();
    set_env(&mut env, "PATH", path_with(&prefix.join("bin")));
    set_env(&mut env, "CODEX_HOME", codex_home.as_os_str());
    set_env(&mut env, "SCRIPTED_MODEL_KEY", "offline");
    set_env(&mut env, "TERM", "xterm-256color");
    let home_before = s.home_snapshot(&[".codex"]);
    // The daemon's socket rendezvous on the person's side (`/tmp/codex-daemon-UID`, made by
    // tyba when absent): the session's daemon binds its socket in the session's copy of it.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&s.fx.home).unwrap());
    let rendezvous = PathBuf::from(format!("/tmp/codex-daemon-{uid}"));
    let rendezvous_before = entries(&rendezvous);
    let steps = s.steps.clone();
    let n = s.steps.len();
    let done = || {
        rec.requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| call_outputs(r).len() >= n)
    };
    let run = run_tui(
        &s,
        gate,
        port,
        &["SCRIPTED_MODEL_KEY"],
        &codex_tui(&wt, daemon),
        &env,
        "Run the scripted commands.",
        &|a| step_of(&steps, a),
        &rec,
        &done,
        Duration::from_secs(150),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let results = requests.last().map(call_outputs).unwrap_or_default();
    let other = rec.other.lock().unwrap().clone();
    eprintln!(
        "side requests (not the session): {:?}",
        rec.side.lock().unwrap()
    );
    let seen = seen_of(&s, &results);
    let t = TuiSeen {
        agent: "codex",
        seen: &seen,
        first_step_at: *rec.first_step_at.lock().unwrap(),
        other: &other,
        step_of: &|a| step_of(&s.steps, a),
        entry_step: &|e| entry_step(&s.steps, e),
        home_changes: changes(&home_before, &s.home_snapshot(&[".codex"])),
    };
    if gate == Gate::Tyba && daemon {
        check_daemon(&s, &run, &rendezvous, &rendezvous_before);
    }
    finish_tui(&s, gate, &run, &t, &results)
}

/// The daemon's effects, checked from outside: tyba started Codex's daemon as the agent
/// (`app-server --listen unix://` in the audit log, allowed), the daemon bound its socket in
/// the session's copy of its rendezvous (listed as dropped in tyba's end summary: a
/// 64-hex-digit name under `/tmp/codex-daemon-UID/`), the TUI reached it (no "did not become
/// ready"), the person's rendezvous holds what it held before, and the daemon's `ps` of its
/// own process was answered by tyba (the audit log) and never asked.
fn check_daemon(s: &Scripted, run: &TuiRun, rendezvous: &Path, before: &[String]) {
    let mut ck = Checks::default();
    let (code, out, _) = s.fx.cli(&["log", "--json"]);
    let daemon_started = code == 0
        && out.lines().any(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            v["kind"] == "exec"
                && v["decision"] == "allow"
                && v["action"]
                    .as_str()
                    .is_some_and(|a| a.contains(" app-server --listen unix://"))
        });
    ck.check(
        daemon_started,
        "the daemon `codex app-server --listen unix://` ran, allowed as the agent",
    );
    let text = format!("{}\n{}", run.history, run.lines.join("\n"));
    let prefix = format!("{}/", rendezvous.display());
    let bound = text.lines().any(|l| {
        l.split_whitespace().any(|w| {
            w.trim_end_matches(':')
                .strip_prefix(prefix.as_str())
                .is_some_and(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        })
    });
    ck.check(
        bound,
        format!(
            "the daemon's socket was bound in the session's copy of {}",
            rendezvous.display()
        ),
    );
    ck.check(
        !text.contains("did not become ready") && !text.contains("failed to record pid-managed"),
        "the TUI reached its daemon",
    );
    ck.check(
        entries(rendezvous) == before,
        format!(
            "the person's {} is as it was ({before:?}, now {:?})",
            rendezvous.display(),
            entries(rendezvous)
        ),
    );
    let asked: Vec<&Answered> = run
        .asks
        .iter()
        .filter(|a| is_daemon_ps(&a.action))
        .collect();
    ck.check(
        asked.is_empty(),
        format!("the daemon's look at its own process was never asked: {asked:?}"),
    );
    let answered = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["kind"] == "probe"
                && v["action"].as_str().is_some_and(is_daemon_ps)
                && v["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("answered by tyba from the sandbox's own /proc"))
        })
        .count();
    ck.check(
        answered > 0,
        "the daemon's `ps -p PID -o stat= -o lstart=` was answered by tyba, not run",
    );
    eprintln!(
        "MEASURED codex daemon {:?}: the daemon's `ps` of its own process answered {answered} times, asked {}",
        s.fx.who,
        asked.len()
    );
    ck.finish(&format!(
        "codex TUI with its daemon\n--- pane\n{}\n--- audit log\n{out}",
        run.history
    ));
}

/// `codex` as users start it: the TUI with its background daemon.
#[test]
fn agent_codex_tui_under_tyba() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_codex_tui(who, &prefix, Gate::Tyba, true);
    });
}

/// `codex --no-daemon`: the app server in the TUI's own process (what Codex's error tells the
/// person to run when its daemon cannot start), no daemon and no `ps`.
#[test]
fn agent_codex_tui_no_daemon_under_tyba() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_codex_tui(who, &prefix, Gate::Tyba, false);
    });
}

/// The same session without tyba, in Codex's default approval policy and sandbox: its own
/// prompts counted (`docs/agents.md`), and the control of the TUI checks.
#[test]
fn agent_codex_tui_own_prompts() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    // Without `--no-daemon` Codex would leave its daemon running on the machine after the
    // test (outside tyba nothing ends it); its prompts are the TUI's either way.
    run_codex_tui(&whos().pop().unwrap(), &prefix, Gate::AgentOwn, false);
}
