//! The real aider end to end (issue 12): PyPI `aider-chat` 0.86.2 installed as its users
//! install it, `pip install` into a virtual environment (`/opt/tyba-test-venv`, made by
//! `.ci/run` with the system `python3.11`), started by the name users type: `tyba run --here
//! -- aider …` with the venv's `bin` on `PATH` (the `aider` entry point, a `#!` script run by
//! the venv's `python`). Fully offline against a scripted OpenAI-compatible server on 127.0.0.1
//! written here (`--openai-api-base`, `POST /v1/chat/completions`, streamed).
//!
//! aider runs shell commands the model suggests in a fenced ```` ```bash ```` block, each after
//! its own "Run shell command?" confirmation (`--yes-always` answers *no* to that one), through
//! `subprocess.Popen(CMD, shell=True)`: `/bin/sh -c CMD`; the output is added to the chat
//! ("Add command output to the chat?") and reaches the model in the next request as `Output
//! from CMD` + the merged stdout and stderr. So the person at aider's own prompt is scripted
//! on its stdin (`--no-fancy-input`): the task, then per step an empty line for each
//! confirmation (the default, yes) and `Continue.`; the files the steps name are in the chat
//! (`--read`), so aider does not offer to add them. aider runs in the repository with git
//! (GitPython: `git version` and friends at start), as its users run it; the fake home has a
//! git identity in `~/.gitconfig`, as theirs does.
//!
//! Two modes, as the test's user and as the unprivileged `TYBA_TEST_USER`: `--non-interactive`
//! (CI) and a scripted person answering tyba's asks through `tyba inbox --json` / `approve` /
//! `deny`. Both assert: no ask or refusal before the first scripted step, none but the steps'
//! own in the whole session, tyba's reasons reach the model, nothing outside the worktree
//! changed.
//!
//! aider runs each command with `Popen(shell=True)`: a `vfork` child execing `/bin/sh`, whose
//! refusal reaches the model through the child's captured output (`docs/sandbox.md`, "The
//! exec model": refusals).
//!
//! The venv is found at `TYBA_TEST_AIDER_VENV` or `/opt/tyba-test-venv`; when it is not there
//! the test fails with `TYBA_REQUIRE_SANDBOX=1` and is skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agent_support.rs"]
mod agent;

use agent::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The pinned version `.ci/run` installs.
const AIDER_VERSION: &str = "0.86.2";
const VENV: &str = "/opt/tyba-test-venv";
/// The model as aider names it (litellm's `openai/` provider prefix); its metadata is in
/// `tests/data/agents/aider/model-metadata.json` so that aider looks nothing up.
const MODEL: &str = "openai/scripted";
/// In every scripted reply that carries a step, so the steps already asked can be counted
/// in the history (aider's own prompt holds example replies with shell blocks too).
const MARK: &str = "Scripted step";

/// The venv holding `bin/aider`, checked to be the pinned version.
fn aider_venv() -> Option<PathBuf> {
    let venv = std::env::var_os("TYBA_TEST_AIDER_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(VENV));
    let meta = venv.join(format!(
        "lib/python3.11/site-packages/aider_chat-{AIDER_VERSION}.dist-info/METADATA"
    ));
    if venv.join("bin/aider").is_file() {
        assert!(
            meta.is_file(),
            "{} is not aider-chat {AIDER_VERSION} for python3.11 ({} is missing)",
            venv.display(),
            meta.display()
        );
        return Some(venv);
    }
    assert!(
        !require_sandbox(),
        "aider is not installed in {} and TYBA_REQUIRE_SANDBOX=1: install it with \
         `python3.11 -m venv {VENV} && {VENV}/bin/pip install aider-chat=={AIDER_VERSION}` (as \
         .ci/run does) or point TYBA_TEST_AIDER_VENV at a venv holding it",
        venv.display()
    );
    eprintln!("SKIP: aider is not installed in {}", venv.display());
    None
}

// ---------------------------------------------------------------------------------------
// The scripted model: OpenAI chat completions, streamed (`data: chunk` … `data: [DONE]`) or
// not.

/// The text of a chat message (a string, or a list of `{type: text, text}` parts).
fn text_of(m: &serde_json::Value) -> String {
    match &m["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => a
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// How many steps the history already holds (scripted replies carrying one).
fn steps_done(body: &serde_json::Value) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant" && text_of(m).contains(MARK))
        .count()
}

/// What aider reported of `cmd` to the model: the text after `Output from CMD\n` in the
/// last user message holding it, up to the next `Output from ` block.
fn output_of(requests: &[serde_json::Value], cmd: &str) -> Option<String> {
    let head = format!("Output from {cmd}\n");
    requests.iter().rev().find_map(|r| {
        r["messages"].as_array()?.iter().rev().find_map(|m| {
            if m["role"] != "user" {
                return None;
            }
            let t = text_of(m);
            let rest = &t[t.find(&head)? + head.len()..];
            let end = rest.find("\nOutput from ").unwrap_or(rest.len());
            Some(rest[..end].to_string())
        })
    })
}

fn reply_text(body: &serde_json::Value, steps: &[String]) -> (usize, String) {
    let done = steps_done(body);
    let text = match steps.get(done) {
        Some(cmd) => format!("{MARK} {}: run this.\n\n```bash\n{cmd}\n```\n", done + 1),
        None => "scripted session done".to_string(),
    };
    (done, text)
}

fn handle(rec: &Recorded, steps: &[String], method: &str, path: &str, body: &[u8]) -> Reply {
    if method != "POST" || !path.ends_with("/chat/completions") {
        rec.other_request(format!("{method} {path}"));
        return ("404 Not Found", "text/plain", String::new());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        rec.other_request(format!("{method} {path}: bad JSON"));
        return ("400 Bad Request", "text/plain", String::new());
    };
    let (step, text) = reply_text(&v, steps);
    let stream = v["stream"].as_bool().unwrap_or(false);
    rec.model_request(v, step);
    let id = format!("chatcmpl-{step}");
    if stream {
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            serde_json::json!({
                "id": id, "object": "chat.completion.chunk", "created": 0, "model": "scripted",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
        };
        let mut s = format!(
            "data: {}\n\n",
            chunk(
                serde_json::json!({"role": "assistant", "content": text}),
                serde_json::Value::Null
            )
        );
        s.push_str(&format!(
            "data: {}\n\n",
            chunk(serde_json::json!({}), "stop".into())
        ));
        s.push_str("data: [DONE]\n\n");
        ("200 OK", "text/event-stream", s)
    } else {
        let r = serde_json::json!({
            "id": id, "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        });
        ("200 OK", "application/json", r.to_string())
    }
}

// ---------------------------------------------------------------------------------------

/// The scripted step an ask's action (`run `CMD``) or a summary refusal (`exec CMD: REASON`)
/// is for.
fn step_of(steps: &[String], action: &str) -> Option<String> {
    let inner = action
        .strip_prefix("run `")
        .and_then(|a| a.strip_suffix('`'))
        .unwrap_or(action);
    steps.iter().find(|s| s.as_str() == inner).cloned()
}

fn entry_step(steps: &[String], entry: &str) -> Option<String> {
    let action = entry.strip_prefix("exec ").unwrap_or(entry);
    steps
        .iter()
        .find(|c| action.starts_with(&format!("{c}: ")))
        .cloned()
}

/// Where aider is installed for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// `pip install` into a venv: its `bin` on `PATH`.
    Venv(PathBuf),
    /// A tool manager's layout in the home, rebuilt from the one `.ci/run` made under a
    /// stand-in home (`ROOT/home`): pipx (`~/.local/share/pipx/venvs/aider-chat`) or uv
    /// (`~/.local/share/uv/tools/aider-chat`), the launcher `~/.local/bin/aider` a link to
    /// the venv's `bin/aider`.
    Tool {
        /// The stand-in home `.ci/run` installed into.
        root: PathBuf,
        /// The venv's place under a home (`.local/share/pipx/venvs/aider-chat`).
        venv: &'static str,
    },
}

const PIPX_ROOT: &str = "/opt/tyba-test-pipx/home";
const PIPX_VENV: &str = ".local/share/pipx/venvs/aider-chat";
const UV_ROOT: &str = "/opt/tyba-test-uv/home";
const UV_VENV: &str = ".local/share/uv/tools/aider-chat";

/// The tool layout under `root`, checked to hold the pinned aider; `None` (after a skip
/// message) or a failure under `TYBA_REQUIRE_SANDBOX=1` when it is missing.
fn tool_layout(root: &str, venv: &'static str, how: &str) -> Option<Layout> {
    let root = PathBuf::from(root);
    let meta = root.join(venv).join(format!(
        "lib/python3.11/site-packages/aider_chat-{AIDER_VERSION}.dist-info/METADATA"
    ));
    if meta.is_file() && root.join(venv).join("bin/aider").is_file() {
        return Some(Layout::Tool { root, venv });
    }
    assert!(
        !require_sandbox(),
        "aider {AIDER_VERSION} is not installed with {how} under {} and TYBA_REQUIRE_SANDBOX=1 (.ci/run installs it)",
        root.display()
    );
    eprintln!(
        "SKIP: aider is not installed with {how} under {}",
        root.display()
    );
    None
}

/// Builds `layout` in the fake home; returns the `bin` to put on `PATH` and the home
/// directories that hold the installation (not snapshotted). The venv's files are hard links
/// to the installed ones, but for `bin/aider`, whose `#!` line names the venv's `python` by
/// its absolute path: rewritten for the new place, as a tool manager writes it.
fn install(s: &Scripted, layout: &Layout) -> (PathBuf, Vec<&'static str>) {
    let (root, venv) = match layout {
        Layout::Venv(v) => return (v.join("bin"), Vec::new()),
        Layout::Tool { root, venv } => (root, *venv),
    };
    let from = root.join(venv);
    let to = s.fx.home.join(venv);
    link_tree(&from, &to);
    let script = std::fs::read_to_string(from.join("bin/aider")).unwrap();
    let script = script.replacen(
        &format!("#!{}/bin/python", from.display()),
        &format!("#!{}/bin/python", to.display()),
        1,
    );
    assert!(
        script.starts_with(&format!("#!{}/bin/python", to.display())),
        "{script}"
    );
    std::fs::remove_file(to.join("bin/aider")).unwrap();
    write_exe(&to.join("bin/aider"), &script);
    symlink(to.join("bin/aider"), &s.fx.home.join(".local/bin/aider"));
    let top = if venv.contains("pipx") {
        ".local/share/pipx"
    } else {
        ".local/share/uv"
    };
    (s.fx.home.join(".local/bin"), vec![top, ".local/bin"])
}

/// Runs the scripted session; with `start_only` it checks only the start (nothing asked or
/// refused before the first step, the green read ran and reached the model, the session
/// ended with aider's final reply).
fn run_aider_session(who: &Who, layout: &Layout, mode: Mode, start_only: bool) {
    let t0 = Instant::now();
    let Some(s) = Scripted::new(who, "agent-aider") else {
        return;
    };
    let rec = Arc::new(Recorded::default());
    let r = Arc::clone(&rec);
    let st = s.steps.clone();
    let port = listen(move |c| serve_http(c, &|m, p, b| handle(&r, &st, m, p, b)));

    // ~/.aider is the policy's agent state (readable and writable by the agent).
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents/aider");
    let state = s.fx.home.join(".aider");
    std::fs::create_dir_all(&state).unwrap();
    let metadata = state.join("model-metadata.json");
    std::fs::copy(data.join("model-metadata.json"), &metadata).unwrap();
    // The person's git identity, where their git keeps it.
    std::fs::write(
        s.fx.home.join(".gitconfig"),
        "[user]\n\tname = A Person\n\temail = person@example.com\n",
    )
    .unwrap();
    give(&s.fx.home, who);

    let mut env = s.fx.env();
    // After every `give`: the layout's files are links to the installed ones.
    let (bin, install_dirs) = install(&s, layout);
    set_env(&mut env, "PATH", path_with(&bin));
    set_env(&mut env, "OPENAI_API_KEY", "offline");
    // litellm's bundled model cost map instead of a download.
    set_env(&mut env, "LITELLM_LOCAL_MODEL_COST_MAP", "True");
    let base = format!("http://127.0.0.1:{port}/v1");
    let metadata = metadata.to_str().unwrap().to_string();
    let agent = [
        "aider",
        "--model",
        MODEL,
        "--openai-api-base",
        &base,
        "--model-metadata-file",
        &metadata,
        "--edit-format",
        "diff",
        "--no-fancy-input",
        "--no-check-update",
        "--analytics-disable",
        "--no-show-model-warnings",
        "--no-show-release-notes",
        "--no-gitignore",
        "--no-detect-urls",
        "--map-tokens",
        "0",
        "--no-auto-commits",
        // The files the steps name, read-only in the chat: aider then does not offer to add
        // them when the model mentions them (another confirmation on stdin).
        "--read",
        "README.md",
        "--read",
        "build.sh",
    ];
    let mut stdin = String::from("Run the scripted commands.\n");
    for _ in 0..s.steps.len() {
        stdin.push_str("\n\n\nContinue.\n");
    }
    let mut state = vec![".aider"];
    state.extend(&install_dirs);
    let home_before = s.home_snapshot(&state);
    let steps = s.steps.clone();
    let (asks, code, out, err) = run_session(
        &s,
        mode,
        port,
        &["OPENAI_API_KEY"],
        &agent,
        &env,
        Some(stdin),
        &|a| step_of(&steps, a),
        Duration::from_secs(150),
    );
    let requests = rec.requests.lock().unwrap().clone();
    let other = rec.other.lock().unwrap().clone();
    let first_step_at = *rec.first_step_at.lock().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let refusals = summary_refusals(&err);
    let outs: Vec<String> = s
        .steps
        .iter()
        .map(|c| output_of(&requests, c).unwrap_or_default())
        .collect();
    let ctx = format!(
        "{who:?} {mode:?} ({secs:.1} s)\n--- tyba run exit {code}\n--- stdout\n{out}\n--- stderr\n{err}\n--- asks\n{}\n--- outputs the model saw\n{outs:#?}\n--- {} model requests; other requests {other:?}\n",
        describe(&asks),
        requests.len()
    );
    eprintln!("{ctx}");

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
    let saw = |i: usize, text: &str| outs[i].contains(text);
    if start_only {
        let mut ck = Checks::default();
        let before = asks
            .iter()
            .filter(|a| first_step_at.is_none_or(|t| a.at < t))
            .count();
        let refused_before =
            refusals_before_first_step(&refusals, |e| entry_step(&s.steps, e).is_some());
        ck.check(
            before == 0,
            format!("no ask before the first step ({before})"),
        );
        ck.check(
            refused_before == 0,
            format!("no refusal before the first step ({refused_before})"),
        );
        ck.check(code == 0, format!("tyba run exits 0 (got {code})"));
        ck.check(
            out.contains("scripted session done"),
            "aider printed the final reply",
        );
        ck.check(
            saw(0, "hello from the fixture"),
            format!("the model saw README.md: {:?}", outs[0]),
        );
        ck.check(
            s.remote_main_now() == s.remote_main,
            "the remote's main did not move",
        );
        let changes = s.outside_changes();
        ck.check(
            changes.is_empty(),
            format!("nothing outside the worktree changed: {changes:?}"),
        );
        eprintln!(
            "MEASURED aider {layout:?} {who:?} {mode:?}: asks before the first step {before}, refusals before the first step {refused_before}"
        );
        ck.finish(&ctx);
        return;
    }

    let mut ck = Checks::default();
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
        "aider printed the final reply",
    );
    ck.check(
        requests.len() == s.steps.len() + 1,
        format!(
            "one request per turn: {} requests for {} steps",
            requests.len(),
            s.steps.len()
        ),
    );
    ck.check(
        other.is_empty(),
        "no other request reached the model server",
    );

    // 1. The green read: never asked or refused; the model saw the file.
    ck.check(step_asks(READ) == 0, "the green read is not asked");
    ck.check(refused_for(READ) == 0, "the green read is not refused");
    ck.check(
        saw(0, "hello from the fixture"),
        format!("the model saw README.md: {:?}", outs[0]),
    );
    match mode {
        Mode::Person | Mode::Hook => {
            ck.check(step_asks(BUILD) == 1, "the build is asked exactly once");
            ck.check(answered(BUILD, "approve"), "the build was approved");
            ck.check(
                saw(1, "build ok"),
                format!("the model saw the build's output: {:?}", outs[1]),
            );
            ck.check(s.fx.wt.join("build/out.txt").is_file(), "the build ran");
            ck.check(step_asks(RM) == 1, "`rm -rf build` is asked exactly once");
            ck.check(answered(RM, "deny"), "`rm -rf build` was denied");
            ck.check(
                saw(2, &format!("tyba: {RM_REASON}")),
                format!("the model saw \"tyba: {RM_REASON}\": {:?}", outs[2]),
            );
            ck.check(step_asks(OUTSIDE) == 1, "the outside write is asked once");
            ck.check(
                saw(4, &format!("tyba: {OUTSIDE_REASON}")),
                format!("the model saw \"tyba: {OUTSIDE_REASON}\": {:?}", outs[4]),
            );
            ck.check(step_asks(&s.net) == 1, "the network call is asked once");
            ck.check(
                saw(5, &format!("tyba: {NET_REASON}")),
                format!("the model saw \"tyba: {NET_REASON}\": {:?}", outs[5]),
            );
            ck.check(
                asks.len() == 4,
                format!("four asks in the session (got {})", asks.len()),
            );
        }
        Mode::NonInteractive => {
            ck.check(refused_for(BUILD) == 1, "the build is refused once");
            ck.check(
                saw(1, "tyba: ") && saw(1, "non-interactive"),
                format!("the model saw the build refused: {:?}", outs[1]),
            );
            ck.check(
                !s.fx.wt.join("build/out.txt").exists(),
                "the refused build did not run",
            );
            ck.check(refused_for(RM) == 1, "`rm -rf build` is refused once");
            ck.check(
                saw(2, "tyba: ") && saw(2, "deletion"),
                format!("the model saw tyba's reason for `rm -rf`: {:?}", outs[2]),
            );
            ck.check(
                refused_for(OUTSIDE) == 1,
                "the outside write is refused once",
            );
            ck.check(saw(4, "tyba: "), format!("outside write: {:?}", outs[4]));
            ck.check(refused_for(&s.net) == 1, "the network call is refused once");
            ck.check(saw(5, "tyba: "), format!("network: {:?}", outs[5]));
        }
    }
    ck.check(
        s.fx.wt.join("build/earlier.txt").is_file(),
        "build/ is still there",
    );
    ck.check(step_asks(PUSH) == 0, "the push to main is never asked");
    ck.check(
        saw(3, "tyba: ") && saw(3, "protected"),
        format!("the model saw the push refused: {:?}", outs[3]),
    );
    ck.check(
        s.remote_main_now() == s.remote_main,
        "the remote's main did not move",
    );
    ck.check(
        !s.root.join("outside.txt").exists(),
        "../outside.txt does not exist",
    );
    let home_changes = changes(&home_before, &s.home_snapshot(&state));
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
        "MEASURED aider {who:?} {mode:?}: asks before the first step {}, asks in the session {}, refusals before the first step {refused_before}, refusals {} ({} not of a step)",
        before.len(),
        asks.len(),
        refusals.len(),
        stray_refusals.len()
    );
    ck.finish(&ctx);
}

#[test]
fn agent_aider_by_name_non_interactive() {
    let Some(venv) = aider_venv() else {
        return;
    };
    for_each_who(|who| {
        run_aider_session(
            who,
            &Layout::Venv(venv.clone()),
            Mode::NonInteractive,
            false,
        )
    });
}

#[test]
fn agent_aider_by_name_scripted_person() {
    let Some(venv) = aider_venv() else {
        return;
    };
    for_each_who(|who| run_aider_session(who, &Layout::Venv(venv.clone()), Mode::Person, false));
}

#[test]
fn agent_aider_venv_pipx_and_uv_layouts_start_unasked() {
    let Some(venv) = aider_venv() else {
        return;
    };
    let mut layouts = vec![Layout::Venv(venv)];
    layouts.extend(tool_layout(PIPX_ROOT, PIPX_VENV, "pipx"));
    layouts.extend(tool_layout(UV_ROOT, UV_VENV, "uv tool"));
    for_each_who(|who| {
        for l in &layouts {
            run_aider_session(who, l, Mode::NonInteractive, true);
        }
    });
}
