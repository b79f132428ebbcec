//! The real Claude Code end to end (issue 12): npm `@anthropic-ai/claude-code` 2.1.332 installed
//! as its users install it (`npm install -g --prefix PREFIX`: `PREFIX/bin/claude` is npm's link
//! to the package's `bin/claude.exe`, which the package's install step replaces by the native
//! binary of the platform package), started by the name users type: `tyba run --here -- claude
//! -p …` with `PREFIX/bin` on `PATH`. Fully offline against a scripted Messages API server on
//! 127.0.0.1 written here (`ANTHROPIC_BASE_URL`; `shared/notes/agents-offline.md`): one `Bash`
//! tool call per turn, the whole history in each request, so the `tool_result` of every step
//! (what the model read) is recorded. Claude Code runs every command inside its own wrapper
//! (`\builtin shopt -u extglob … && eval 'CMD' < /dev/null && pwd -P >| $TMPDIR/claude-…-cwd`):
//! the real thing, nothing here turns it off, so every step (the direct push too) goes through
//! it. Harness: `tests/agent_support.rs`.
//!
//! Three modes, as the test's user and as the unprivileged `TYBA_TEST_USER`:
//! `--non-interactive` (CI), a scripted person answering through `tyba inbox --json` /
//! `approve` / `deny`, and the same person with tyba's hook installed (`tyba hook install
//! claude-code --user`, tyba in `~/.cargo/bin`). The session adds a push to `main` from inside
//! `make` to the six steps.
//!
//! Install layouts, each started by name with zero asks before the first step: npm with the
//! system-wide prefix (`.ci/run`: `/opt/tyba-test-npm-global`), with a home prefix
//! (`~/.npm-global`), nvm's (`~/.nvm/versions/node/vX/…`), and the native installer's
//! (`~/.local/bin/claude` → `~/.local/share/claude/versions/2.1.332`, the package's native
//! binary), the last three rebuilt in the fake home from the installed files (`link_tree`).
//!
//! Claude Code is found under `TYBA_TEST_NPM_PREFIX` or `/opt/tyba-test-npm-global`; when it is
//! not there the test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agent_support.rs"]
mod agent;

use agent::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pinned version `.ci/run` installs.
const CLAUDE_VERSION: &str = "2.1.332";
const NPM_PREFIX: &str = "/opt/tyba-test-npm-global";
const PACKAGE: &str = "lib/node_modules/@anthropic-ai/claude-code";
/// A scripted step that calls the Read tool on the path after it (not a Bash command).
const READ_TOOL: &str = "Read tool: ";
/// A scripted step that calls the Write tool on the path after it, writing one line.
const WRITE_TOOL: &str = "Write tool: ";

/// The npm global prefix holding `bin/claude`, checked to be the pinned version.
fn npm_prefix() -> Option<PathBuf> {
    let prefix = std::env::var_os("TYBA_TEST_NPM_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(NPM_PREFIX));
    let pkg = prefix.join(PACKAGE).join("package.json");
    if prefix.join("bin/claude").exists() && pkg.is_file() {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&pkg).unwrap()).unwrap();
        assert_eq!(
            v["version"],
            CLAUDE_VERSION,
            "{} is not Claude Code {CLAUDE_VERSION}",
            pkg.display()
        );
        return Some(prefix);
    }
    assert!(
        !require_sandbox(),
        "Claude Code is not installed under {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `npm install -g --prefix {NPM_PREFIX} @anthropic-ai/claude-code@{CLAUDE_VERSION}` (as \
         .ci/run does) or point TYBA_TEST_NPM_PREFIX at an npm prefix holding it",
        prefix.display()
    );
    eprintln!(
        "SKIP: Claude Code is not installed under {}",
        prefix.display()
    );
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: `POST /v1/messages?beta=true`, server-sent events.

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

fn reply(body: &serde_json::Value, steps: &[String]) -> (usize, String) {
    let done = tool_results(body).len();
    let msg = serde_json::json!({
        "id": format!("msg_{done}"), "type": "message", "role": "assistant",
        "model": body["model"], "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    let mut s = sse("message_start", serde_json::json!({ "message": msg }));
    let (block, delta, stop) = match steps.get(done) {
        // A step `READ_TOOL PATH` (`WRITE_TOOL PATH`) is a call of the Read (Write) tool, any
        // other a Bash command.
        Some(step) if step.starts_with(WRITE_TOOL) => (
            serde_json::json!({"type": "tool_use", "id": format!("toolu_{done}"), "name": "Write", "input": {}}),
            serde_json::json!({"type": "input_json_delta", "partial_json":
                serde_json::json!({"file_path": &step[WRITE_TOOL.len()..], "content": "written by claude\n"}).to_string()}),
            "tool_use",
        ),
        Some(step) if step.starts_with(READ_TOOL) => (
            serde_json::json!({"type": "tool_use", "id": format!("toolu_{done}"), "name": "Read", "input": {}}),
            serde_json::json!({"type": "input_json_delta", "partial_json":
                serde_json::json!({"file_path": &step[READ_TOOL.len()..]}).to_string()}),
            "tool_use",
        ),
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
    (done, s)
}

fn handle(rec: &Recorded, steps: &[String], method: &str, path: &str, body: &[u8]) -> Reply {
    let messages = path == "/v1/messages" || path.starts_with("/v1/messages?");
    if method != "POST" || !messages {
        rec.other_request(format!("{method} {path}"));
        return ("404 Not Found", "text/plain", String::new());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        rec.other_request(format!("{method} {path}: bad JSON"));
        return ("400 Bad Request", "text/plain", String::new());
    };
    let (step, r) = reply(&v, steps);
    rec.model_request(v, step);
    ("200 OK", "text/event-stream", r)
}

// ---------------------------------------------------------------------------------------

/// The command inside Claude Code's wrapper (`… && eval 'CMD' < /dev/null && pwd -P >| …`,
/// `'` written `'\''` inside), or the line itself.
fn unwrap_claude(line: &str) -> String {
    let Some((_, rest)) = line.split_once("eval '") else {
        return line.to_string();
    };
    let mut out = String::new();
    let mut r = rest;
    loop {
        match r.find('\'') {
            Some(i) => {
                out.push_str(&r[..i]);
                if let Some(after) = r[i..].strip_prefix("'\\''") {
                    out.push('\'');
                    r = after;
                } else {
                    return out;
                }
            }
            None => return line.to_string(),
        }
    }
}

/// The scripted step an ask's action is for: `run `LINE`` (the kernel layer; the line maybe
/// Claude Code's wrapper around the step) or `CMD (Bash via claude-code)` (tyba's hook).
fn step_of(steps: &[String], action: &str) -> Option<String> {
    let a = action
        .strip_suffix(" (Bash via claude-code)")
        .or_else(|| {
            action
                .strip_prefix("run `")
                .and_then(|a| a.strip_suffix('`'))
        })
        .unwrap_or(action);
    let inner = unwrap_claude(a);
    steps.iter().find(|s| s.as_str() == inner).cloned()
}

/// The scripted step a refusal of the end-of-session summary (`exec LINE: REASON`) is for:
/// the step whose command is the line, or inside its wrapper; a `git push` refused inside
/// `make publish` is the push's.
fn entry_step(steps: &[String], entry: &str) -> Option<String> {
    let action = entry.strip_prefix("exec ").unwrap_or(entry);
    steps
        .iter()
        .filter(|c| {
            action.starts_with(&format!("{c}: "))
                || action
                    .split_once(": refused")
                    .or_else(|| action.split_once(": "))
                    .is_some_and(|(line, _)| unwrap_claude(line) == c.as_str())
        })
        .max_by_key(|c| c.len())
        .cloned()
}

/// The `tool_result` blocks of a request, in order: (tool_use_id, is_error, content).
fn results_of(req: &serde_json::Value) -> Vec<(String, bool, String)> {
    tool_results(req)
}

/// Where the agent is installed for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// npm global with the system prefix of `.ci/run`.
    System,
    /// `npm install -g --prefix ~/.npm-global`.
    HomePrefix,
    /// nvm: `~/.nvm/versions/node/vX/{bin,lib/node_modules}`.
    Nvm,
    /// The native installer: `~/.local/bin/claude` → `~/.local/share/claude/versions/V`.
    Native,
}

/// Builds `layout` in the fake home from the installed `prefix`; returns the `bin` to put on
/// `PATH` and the home directories that hold the installation (not snapshotted).
fn install(s: &Scripted, prefix: &Path, layout: Layout) -> (PathBuf, Vec<&'static str>) {
    let home = &s.fx.home;
    let at = match layout {
        Layout::System => return (prefix.join("bin"), Vec::new()),
        Layout::Native => {
            let v = home
                .join(".local/share/claude/versions")
                .join(CLAUDE_VERSION);
            std::fs::create_dir_all(v.parent().unwrap()).unwrap();
            std::fs::hard_link(prefix.join(PACKAGE).join("bin/claude.exe"), &v).unwrap();
            symlink(&v, &home.join(".local/bin/claude"));
            return (
                home.join(".local/bin"),
                vec![".local/share/claude", ".local/bin"],
            );
        }
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
            std::fs::create_dir_all(root.join("bin")).unwrap();
            let node = std::fs::canonicalize("/usr/bin/node").unwrap();
            std::fs::copy(&node, root.join("bin/node")).unwrap();
            root
        }
    };
    link_tree(&prefix.join(PACKAGE), &at.join(PACKAGE));
    symlink(
        "../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
        &at.join("bin/claude"),
    );
    let dirs = match layout {
        Layout::HomePrefix => vec![".npm-global"],
        _ => vec![".nvm"],
    };
    (at.join("bin"), dirs)
}

/// What the model read of each step, from the `tool_result` blocks of the last request.
fn seen_of(s: &Scripted, results: &[(String, bool, String)]) -> Vec<Seen> {
    (0..s.steps.len())
        .map(
            |i| match results.iter().find(|r| r.0 == format!("toolu_{i}")) {
                Some((_, is_error, text)) => Seen {
                    reported: true,
                    failed: *is_error,
                    text: text.clone(),
                },
                None => Seen::default(),
            },
        )
        .collect()
}

/// The environment of a Claude Code session against the scripted server on `port`
/// (tyba's hook installed first in [`Mode::Hook`], the session's tyba then the installed
/// one), and the agent's state paths in the home.
fn claude_env(
    s: &mut Scripted,
    who: &Who,
    prefix: &Path,
    mode: Mode,
    layout: Layout,
    port: u16,
) -> (
    Vec<(std::ffi::OsString, std::ffi::OsString)>,
    Vec<&'static str>,
) {
    // ~/.claude is the policy's agent state (writable by the agent; its settings files are
    // control files the sandbox keeps read-only).
    let config_dir = s.fx.home.join(".claude");
    std::fs::create_dir_all(&config_dir).unwrap();
    give(&s.fx.home, who);
    let mut env = s.fx.env();
    set_env(&mut env, "CLAUDE_CONFIG_DIR", config_dir.as_os_str());
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
            &["hook", "install", "claude-code", "--user"],
        );
        assert!(
            o.status.success(),
            "tyba hook install claude-code --user: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The person runs the tyba they installed: the session's tyba is the hook's.
        s.fx.tyba = bin.join("tyba");
    }
    // After every `give`: the layout's files are links to the installed ones.
    let (bin, install_dirs) = install(s, prefix, layout);
    set_env(&mut env, "PATH", path_with(&bin));
    set_env(
        &mut env,
        "ANTHROPIC_BASE_URL",
        format!("http://127.0.0.1:{port}"),
    );
    set_env(&mut env, "ANTHROPIC_API_KEY", "offline");
    set_env(&mut env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    set_env(&mut env, "CLAUDE_CODE_MAX_RETRIES", "0");
    // `--dangerously-skip-permissions` refuses to run as root without it.
    set_env(&mut env, "IS_SANDBOX", "1");
    let mut state = vec![".claude", ".claude.json"];
    state.extend(&install_dirs);
    (env, state)
}

/// `claude -p` as the sessions run it, with `prompt`: unattended, with the person's own
/// settings only.
fn claude_p(prompt: &'static str) -> [&'static str; 7] {
    [
        "claude",
        "-p",
        "--dangerously-skip-permissions",
        "--setting-sources",
        "user",
        "--",
        prompt,
    ]
}

fn run_claude_session(who: &Who, prefix: &Path, mode: Mode, layout: Layout) -> Measured {
    let t0 = Instant::now();
    let Some(s) = Scripted::new(who, "agent-claude") else {
        return Measured::default();
    };
    let mut s = s.with_make_push();
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));

    let (env, state) = claude_env(&mut s, who, prefix, mode, layout, port);
    let home_before = s.home_snapshot(&state);
    let steps = s.steps.clone();
    let (asks, code, out, err) = run_session(
        &s,
        mode,
        port,
        &["ANTHROPIC_API_KEY"],
        &claude_p("Run the scripted commands."),
        &env,
        None,
        &|a| step_of(&steps, a),
        Duration::from_secs(100),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let other = rec.other.lock().unwrap().clone();
    let first_step_at = *rec.first_step_at.lock().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let results = requests.last().map(results_of).unwrap_or_default();
    let seen = seen_of(&s, &results);
    let ctx = format!(
        "claude {layout:?} {who:?} {mode:?} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- tool results the model read\n{results:#?}\n--- other requests {other:?}\n",
        describe(&asks)
    );
    eprintln!("{ctx}");
    if mode == Mode::Hook {
        // Every decision of tyba's hook is in the session's audit log: the push to main the
        // hook refused (what the model was told), and the calls it allowed.
        let log = s.fx.log_lines();
        let hook = |decision: &str, needle: &str| {
            log.iter().any(|l| {
                l["kind"] == "hook"
                    && l["decision"] == decision
                    && l["action"].as_str().is_some_and(|a| a.contains(needle))
            })
        };
        assert!(
            hook("refuse", &format!("{PUSH} (Bash via claude-code)")),
            "{ctx}\n--- log {log:#?}"
        );
        assert!(
            log.iter().any(|l| l["kind"] == "hook"
                && l["decision"] == "refuse"
                && l["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("refs/heads/main"))),
            "{ctx}\n--- log {log:#?}"
        );
        assert!(
            hook("allow", "(Bash via claude-code)"),
            "{ctx}\n--- log {log:#?}"
        );
    }
    let home_changes = changes(&home_before, &s.home_snapshot(&state));
    check_outcome(
        &s,
        &Outcome {
            agent: "claude",
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
fn agent_claude_by_name_non_interactive() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_claude_session(who, &prefix, Mode::NonInteractive, Layout::System);
    });
}

#[test]
fn agent_claude_by_name_scripted_person() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_claude_session(who, &prefix, Mode::Person, Layout::System);
    });
}

#[test]
fn agent_claude_by_name_with_tyba_hook() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_claude_session(who, &prefix, Mode::Hook, Layout::System);
    });
}

/// One decision per command (issue 12): with tyba's hook installed, the person answers the
/// hook's ask of the yellow build `always`; Claude Code then runs it inside its wrapper
/// (`bash -c -l '… eval '\''sh build.sh'\'' …'`), and that exec is not asked again, nor is
/// the same build the model asks for a second time (either layer). A different yellow
/// command answered `once` through the hook is asked once and runs once; the same command
/// again is asked again. On main the build's wrapped exec was asked again after "always"
/// (the hook's answer was kept for the bare command, the kernel layer's ask was of the
/// wrapper).
#[test]
fn agent_claude_hook_always_and_once_are_one_ask_each() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        let Some(mut s) = Scripted::new(who, "agent-claude-always") else {
            return;
        };
        const TOUCH: &str = "touch made-by-once.txt";
        s.steps = vec![
            BUILD.to_string(),
            BUILD.to_string(),
            TOUCH.to_string(),
            TOUCH.to_string(),
        ];
        let rec = Arc::new(Recorded::default());
        let r = Arc::clone(&rec);
        let st = s.steps.clone();
        let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));
        let (env, _) = claude_env(&mut s, who, &prefix, Mode::Hook, Layout::System, port);
        let steps = s.steps.clone();
        let answer = |p: &serde_json::Value, step: Option<&str>| -> Vec<String> {
            let id = p["id"].as_str().unwrap_or("").to_string();
            let action = p["action"].as_str().unwrap_or("");
            let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            if step.is_none() && action.starts_with("run `/bin/sh -c '\"$0\" hook ") {
                return v(&["approve", &id, "--always"]);
            }
            match step {
                Some(BUILD) if p["always_allowed"] == true => v(&["approve", &id, "--always"]),
                Some(BUILD) => v(&["approve", &id]),
                Some(TOUCH) => v(&["approve", &id]),
                _ => v(&["deny", &id, "--reason", "not part of the scripted session"]),
            }
        };
        let (asks, code, out, err) = run_session_with(
            &s,
            Mode::Hook,
            port,
            &["ANTHROPIC_API_KEY"],
            &claude_p("Run the scripted commands."),
            &env,
            None,
            &|a| step_of(&steps, a),
            &answer,
            Duration::from_secs(100),
        );
        let requests = rec.requests.lock().unwrap().clone();
        let results = requests.last().map(results_of).unwrap_or_default();
        let ctx = format!(
            "claude always {who:?}\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- tool results\n{results:#?}\n",
            describe(&asks)
        );
        eprintln!("{ctx}");
        let of = |c: &str| {
            asks.iter()
                .filter(|a| step_of(&steps, &a.action).as_deref() == Some(c))
                .collect::<Vec<_>>()
        };
        let build = of(BUILD);
        let touch = of(TOUCH);
        println!(
            "MEASURED claude hook always {who:?}: build (answered always) asked {} times for 2 runs, touch (answered once) asked {} times for 2 runs",
            build.len(),
            touch.len()
        );
        let mut ck = Checks::default();
        ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
        ck.check(
            results.len() == 4,
            format!("4 tool results ({})", results.len()),
        );
        ck.check(
            build.len() == 1 && build[0].kind == "hook",
            format!(
                "the build asked once, by the hook, for both runs and both layers ({})",
                build.len()
            ),
        );
        ck.check(
            results
                .iter()
                .filter(|r| !r.1 && r.2.contains("build ok"))
                .count()
                == 2,
            "both builds ran",
        );
        ck.check(
            touch.len() == 2 && touch.iter().all(|a| a.kind == "hook"),
            format!(
                "the touch answered once is asked once per run, by the hook only ({})",
                touch.len()
            ),
        );
        ck.check(
            s.fx.wt.join("made-by-once.txt").is_file(),
            "the touch approved once ran",
        );
        ck.check(
            asks.iter()
                .all(|a| a.kind == "hook" || a.action.starts_with("run `/bin/sh -c '\"$0\" hook ")),
            "no exec asked after the hook's answer",
        );
        ck.finish(&ctx);
    });
}

/// One intent, one ask: the model reads `../notes.md` (beside the worktree) with Claude Code's
/// Read tool, reads `../other.md`, then writes `../notes.md` and a new `../docs/new.md` with
/// its Write tool. With tyba's hook each call is asked by the hook (red, outside the
/// worktree); the person approves all but the read of `other.md`, and Claude Code's own
/// runtime then opens exactly those files through the outside-files server, which takes the
/// hook's answer instead of asking again: the model reads the notes, both files are written
/// (the new one through Claude Code's atomic save, `new.md.tmp.PID.HEX` renamed over
/// `new.md`). The denied read never reaches the server. The control, without the hook: the
/// same calls are the agent program's own file access that no approval covers, refused
/// quietly (no ask; the model reads the errors; the audit log has them; nothing changes).
#[test]
fn agent_claude_hook_file_tools_outside_are_one_ask_each_and_reach_those_files_only() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    const WRITTEN: &str = "written by claude\n";
    for_each_who(|who| {
        for mode in [Mode::Hook, Mode::Person] {
            let Some(mut s) = Scripted::new(who, "agent-claude-files") else {
                return;
            };
            let parent = std::fs::canonicalize(s.fx.wt.parent().unwrap()).unwrap();
            let notes = parent.join("notes.md");
            let other = parent.join("other.md");
            let docs = parent.join("docs");
            let new = docs.join("new.md");
            std::fs::write(&notes, "the notes beside the worktree\n").unwrap();
            std::fs::write(&other, "other notes\n").unwrap();
            std::fs::create_dir_all(&docs).unwrap();
            for p in [&notes, &other, &docs] {
                give(p, who);
            }
            s.steps = vec![
                format!("{READ_TOOL}{}", notes.display()),
                format!("{READ_TOOL}{}", other.display()),
                format!("{WRITE_TOOL}{}", notes.display()),
                format!("{WRITE_TOOL}{}", new.display()),
            ];
            let rec = Arc::new(Recorded::default());
            let r = Arc::clone(&rec);
            let st = s.steps.clone();
            let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));
            let (env, _) = claude_env(&mut s, who, &prefix, mode, Layout::System, port);
            let answer = |p: &serde_json::Value, _: Option<&str>| -> Vec<String> {
                let id = p["id"].as_str().unwrap_or("").to_string();
                let action = p["action"].as_str().unwrap_or("");
                let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
                if action.starts_with("run `/bin/sh -c '\"$0\" hook ") {
                    return v(&["approve", &id, "--always"]);
                }
                if action.contains("other.md") {
                    return v(&["deny", &id, "--reason", "not that one"]);
                }
                v(&["approve", &id])
            };
            let (asks, code, out, err) = run_session_with(
                &s,
                mode,
                port,
                &["ANTHROPIC_API_KEY"],
                &claude_p("Read and write the scripted files."),
                &env,
                None,
                &|_| None,
                &answer,
                Duration::from_secs(100),
            );
            let requests = rec.requests.lock().unwrap().clone();
            let results = requests.last().map(results_of).unwrap_or_default();
            let log = s.fx.log_lines();
            let ctx = format!(
                "claude files {who:?} {mode:?}\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- tool results\n{results:#?}\n--- log\n{log:#?}",
                describe(&asks)
            );
            eprintln!("{ctx}");
            let by_hook = asks
                .iter()
                .filter(|a| a.kind == "hook" && a.action.contains(".md ("))
                .count();
            let quiet = |needle: &str| {
                log.iter().any(|l| {
                    l["kind"] == "file"
                        && l["decision"] == "quiet-refuse"
                        && l["action"].as_str().is_some_and(|a| a.contains(needle))
                })
            };
            let ok = |i: usize| results.get(i).is_some_and(|r| !r.1);
            let read_notes = results
                .first()
                .is_some_and(|r| !r.1 && r.2.contains("the notes beside the worktree"));
            let notes_now = std::fs::read_to_string(&notes).unwrap_or_default();
            let mut ck = Checks::default();
            ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
            ck.check(
                results.len() == 4,
                format!("4 tool results ({})", results.len()),
            );
            ck.check(
                !results.iter().any(|r| r.2.contains("other notes")),
                "the model never reads other.md",
            );
            ck.check(
                !asks.iter().any(|a| a.kind == "file"),
                "nothing asked by the file server",
            );
            match mode {
                Mode::Hook => {
                    ck.check(
                        by_hook == 4,
                        format!("one ask per call, each by the hook ({by_hook})"),
                    );
                    ck.check(read_notes, "the approved Read reaches the file");
                    ck.check(
                        ok(2) && notes_now == WRITTEN,
                        format!("the approved Write of notes.md lands ({notes_now:?})"),
                    );
                    ck.check(
                        ok(3) && std::fs::read_to_string(&new).unwrap_or_default() == WRITTEN,
                        "the approved Write of the new docs/new.md lands",
                    );
                    ck.check(!quiet(".md"), "no approved call is refused");
                    ck.check(
                        log.iter().any(|l| {
                            l["kind"] == "file"
                                && l["answered_by"] == "the person's answer to the agent hook's ask"
                                && l["action"]
                                    .as_str()
                                    .is_some_and(|a| a.starts_with("rename "))
                        }),
                        "the file server took the hook's answer for the atomic save (logged)",
                    );
                }
                _ => {
                    ck.check(by_hook == 0, format!("no ask without the hook ({by_hook})"));
                    ck.check(
                        !read_notes && !ok(2) && !ok(3),
                        "the Read and the Writes fail",
                    );
                    ck.check(
                        notes_now == "the notes beside the worktree\n" && !new.exists(),
                        "nothing written",
                    );
                    ck.check(
                        quiet("read ") && quiet("notes.md") && quiet("new.md"),
                        "refused quietly, in the audit log",
                    );
                    ck.check(
                        err.contains("tyba: refused quietly (not asked): "),
                        "counted in the end summary",
                    );
                }
            }
            ck.finish(&ctx);
        }
    });
}

#[test]
fn agent_claude_home_nvm_and_native_installer_layouts() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        for layout in [Layout::HomePrefix, Layout::Nvm, Layout::Native] {
            run_claude_session(who, &prefix, Mode::NonInteractive, layout);
        }
    });
}

// ---------------------------------------------------------------------------------------
// The interactive TUI (`claude`), in a real terminal.

/// Claude Code's first-run dialogs (2.1.332) and the option a person picks in each: the
/// folder trust (saved in `~/.claude.json`, agent state: answerable under tyba), the API key
/// found in the environment, and, with `--dangerously-skip-permissions`, the bypass warning.
fn claude_dialog(sc: &[String]) -> Option<(&'static str, Vec<&'static str>)> {
    let has = |t: &str| sc.iter().any(|l| l.contains(t));
    for (question, pick) in [
        (
            "Is this a project you created or one you trust?",
            "Yes, I trust this folder",
        ),
        ("Do you want to use this API key?", "Yes"),
        ("Bypass Permissions mode", "Yes, I accept"),
    ] {
        if has(question) {
            return choose(sc, pick).map(|k| (question, k));
        }
    }
    None
}

/// Claude Code's TUI as a person meets it.
fn claude_tui(argv: Vec<String>) -> TuiAgent<'static> {
    TuiAgent {
        name: "claude",
        argv,
        ready: &|sc| sc.iter().any(|l| l.trim() == "❯") && claude_dialog(sc).is_none(),
        dialog: &claude_dialog,
        // Its permission prompt: "Bash command", the description, the command between two
        // dashed rules, "Do you want to proceed?", "❯ 1. Yes" first.
        own_prompt: &|sc| {
            sc.iter()
                .any(|l| l.contains("Do you want to proceed?"))
                .then(|| {
                    let cmd = sc
                        .iter()
                        .skip_while(|l| !l.contains("Bash command"))
                        .skip_while(|l| !l.trim_start().starts_with('╌'))
                        .nth(1)
                        .map(|l| l.trim().to_string())
                        .unwrap_or_default();
                    (cmd, vec!["Enter"])
                })
        },
        quit: &["/exit"],
    }
}

/// One TUI session of Claude Code with `gate`: under tyba in its bypass mode
/// (`--dangerously-skip-permissions`: tyba is the gate, as with `-p` above); alone, in the
/// permission mode named by `own_mode`. Only the onboarding is pre-answered in the home
/// (`hasCompletedOnboarding`: the first-run theme and login screens check
/// `api.anthropic.com`, which is not there offline); every other dialog is answered on the
/// screen.
fn run_claude_tui(who: &Who, prefix: &Path, gate: Gate, own_mode: &str) -> Option<(usize, usize)> {
    let s = Scripted::new(who, "agent-claude-tui")?.with_make_push();
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));
    let config_dir = s.fx.home.join(".claude");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true, \"theme\": \"dark\"}\n",
    )
    .unwrap();
    give(&s.fx.home, who);
    let mut env = s.fx.env();
    set_env(&mut env, "CLAUDE_CONFIG_DIR", config_dir.as_os_str());
    set_env(&mut env, "PATH", path_with(&prefix.join("bin")));
    set_env(
        &mut env,
        "ANTHROPIC_BASE_URL",
        format!("http://127.0.0.1:{port}"),
    );
    set_env(&mut env, "ANTHROPIC_API_KEY", "offline");
    set_env(&mut env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    set_env(&mut env, "CLAUDE_CODE_MAX_RETRIES", "0");
    set_env(&mut env, "IS_SANDBOX", "1");
    set_env(&mut env, "TERM", "xterm-256color");
    let state = [".claude", ".claude.json"];
    let home_before = s.home_snapshot(&state);
    let mut argv: Vec<String> = vec!["claude".into()];
    match gate {
        Gate::Tyba => argv.push("--dangerously-skip-permissions".into()),
        Gate::AgentOwn => argv.extend(["--permission-mode".into(), own_mode.into()]),
    }
    argv.extend(["--setting-sources".into(), "user".into()]);
    let steps = s.steps.clone();
    let n = s.steps.len();
    let done = || {
        rec.requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| tool_results(r).len() >= n)
    };
    let run = run_tui(
        &s,
        gate,
        port,
        &["ANTHROPIC_API_KEY"],
        &claude_tui(argv),
        &env,
        "Run the scripted commands.",
        &|a| step_of(&steps, a),
        &rec,
        &done,
        Duration::from_secs(150),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let results = requests.last().map(results_of).unwrap_or_default();
    let other = rec.other.lock().unwrap().clone();
    let seen = seen_of(&s, &results);
    let t = TuiSeen {
        agent: "claude",
        seen: &seen,
        first_step_at: *rec.first_step_at.lock().unwrap(),
        other: &other,
        step_of: &|a| step_of(&s.steps, a),
        entry_step: &|e| entry_step(&s.steps, e),
        home_changes: changes(&home_before, &s.home_snapshot(&state)),
    };
    finish_tui(&s, gate, &run, &t, &results)
}

#[test]
fn agent_claude_tui_under_tyba() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    for_each_who(|who| {
        run_claude_tui(who, &prefix, Gate::Tyba, "");
    });
}

/// The same session without tyba in Claude Code's `default` permission mode (a prompt per
/// tool call it does not know to be read-only): its own prompts counted (`docs/agents.md`),
/// and the control of the TUI checks.
#[test]
fn agent_claude_tui_own_prompts() {
    let Some(prefix) = npm_prefix() else {
        return;
    };
    run_claude_tui(&whos().pop().unwrap(), &prefix, Gate::AgentOwn, "default");
}
