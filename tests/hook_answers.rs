//! `tyba hook claude-code|codex|gemini`: recorded real-format inputs get the right answer in
//! each agent's format (green allowed, yellow/red asked or refused, blocked refused), and
//! every bad input (malformed, truncated, unknown tool or field, wrong event) is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Fx {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    home: PathBuf,
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn fixture() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let w = root.join("w");
    let home = root.join("home");
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(w.join("README.md"), "old\n").unwrap();
    git(&w, &["init", "-q", "-b", "work"]);
    git(
        &w,
        &["remote", "add", "origin", "https://example.invalid/r.git"],
    );
    Fx { _tmp: tmp, w, home }
}

/// An answer, read strictly in the agent's format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Allow,
    Ask(String),
    Deny(String),
}

struct Out {
    stdout: String,
    stderr: String,
    code: i32,
}

fn tyba(fx: &Fx) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tyba"));
    c.current_dir(&fx.w)
        .env("HOME", &fx.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TYBA_SESSION_SOCKET")
        .env_remove("CODEX_HOME");
    for (k, _) in std::env::vars() {
        if k.starts_with("GIT_") && k != "GIT_CONFIG_NOSYSTEM" && k != "GIT_CONFIG_GLOBAL" {
            c.env_remove(k);
        }
    }
    c
}

fn run_with(fx: &Fx, agent: &str, input: &[u8], env: &[(&str, &str)]) -> Out {
    let mut cmd = tyba(fx);
    cmd.args(["hook", agent])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The hook may answer before reading everything; a broken pipe here is fine.
    let _ = stdin.write_all(input);
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    Out {
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
        code: o.status.code().expect("exit status"),
    }
}

fn run(fx: &Fx, agent: &str, input: &[u8]) -> Out {
    run_with(fx, agent, input, &[])
}

/// Reads the answer as the agent would, and fails on anything the agent could not read as a
/// decision (which it would let through).
fn read(agent: &str, o: &Out) -> Answer {
    match agent {
        "claude-code" => {
            assert_eq!(o.code, 0, "claude-code answers with exit 0: {}", o.stderr);
            let v: serde_json::Value = serde_json::from_str(&o.stdout)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", o.stdout));
            let h = &v["hookSpecificOutput"];
            assert_eq!(h["hookEventName"], "PreToolUse", "{v}");
            let reason = h["permissionDecisionReason"].as_str().unwrap().to_string();
            assert!(!reason.trim().is_empty(), "{v}");
            match h["permissionDecision"].as_str().unwrap() {
                "allow" => Answer::Allow,
                "ask" => Answer::Ask(reason),
                "deny" => Answer::Deny(reason),
                other => panic!("unknown decision {other}"),
            }
        }
        "codex" => match o.code {
            0 => {
                assert_eq!(o.stdout, "", "codex allow is an empty stdout");
                Answer::Allow
            }
            2 => {
                assert!(
                    !o.stderr.trim().is_empty(),
                    "exit 2 needs a reason on stderr"
                );
                assert_eq!(o.stdout, "");
                Answer::Deny(o.stderr.trim().to_string())
            }
            c => panic!("codex answer with exit {c}: {} {}", o.stdout, o.stderr),
        },
        "gemini" => {
            assert_eq!(o.code, 0, "gemini answers with exit 0: {}", o.stderr);
            let v: serde_json::Value = serde_json::from_str(&o.stdout)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", o.stdout));
            match v["decision"].as_str().unwrap() {
                "allow" => Answer::Allow,
                "deny" => {
                    let r = v["reason"].as_str().unwrap().to_string();
                    assert!(!r.trim().is_empty(), "{v}");
                    Answer::Deny(r)
                }
                other => panic!("unknown decision {other}"),
            }
        }
        _ => unreachable!(),
    }
}

fn recorded(fx: &Fx, agent: &str, name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/hooks")
        .join(agent)
        .join(format!("{name}.json"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .replace("@CWD@", fx.w.to_str().unwrap())
        .replace("@HOME@", fx.home.to_str().unwrap())
}

#[derive(Debug, Clone, Copy)]
enum Want {
    Allow,
    /// Claude Code asks the person itself; the text must contain this.
    Ask(&'static str),
    /// Refused; the reason must contain this.
    Deny(&'static str),
    /// Asked or refused, never allowed.
    NotAllow,
}

const CASES: &[(&str, &str, Want)] = &[
    // Captured from Claude Code 2.1.332 running offline against a scripted model server.
    ("claude-code", "recorded/bash-git-status", Want::Allow),
    ("claude-code", "recorded/write-notes", Want::Allow),
    ("claude-code", "recorded/read-notes", Want::Allow),
    (
        "claude-code",
        "recorded/bash-cargo-build",
        Want::Ask("yellow"),
    ),
    ("claude-code", "recorded/bash-rm-rf", Want::Ask("red")),
    ("claude-code", "recorded/webfetch", Want::Ask("red")),
    (
        "claude-code",
        "recorded/bash-push-main",
        Want::Deny("refs/heads/main"),
    ),
    (
        "claude-code",
        "recorded/edit-etc-hosts",
        Want::Deny("/etc/hosts"),
    ),
    ("claude-code", "bash-green", Want::Allow),
    ("claude-code", "subagent-bash-green", Want::Allow),
    ("claude-code", "bash-yellow", Want::Ask("yellow")),
    ("claude-code", "bash-red", Want::Ask("red")),
    ("claude-code", "bash-blocked", Want::Deny("main")),
    ("claude-code", "write-in-tree", Want::Allow),
    ("claude-code", "multiedit-in-tree", Want::Allow),
    ("claude-code", "notebookedit-in-tree", Want::Allow),
    ("claude-code", "edit-outside", Want::NotAllow),
    ("claude-code", "read-in-tree", Want::Allow),
    ("claude-code", "glob-in-tree", Want::Allow),
    ("claude-code", "grep-in-tree", Want::Allow),
    ("claude-code", "webfetch", Want::Ask("red")),
    ("claude-code", "websearch", Want::Ask("red")),
    ("claude-code", "mcp", Want::Ask("MCP")),
    ("claude-code", "todowrite", Want::Allow),
    // The agent may not rewrite its own hook settings (the policy's control files are red).
    (
        "claude-code",
        "write-own-settings",
        Want::Ask("control file"),
    ),
    (
        "claude-code",
        "unknown-tool",
        Want::Deny("unknown Claude Code tool `Frobnicate`"),
    ),
    (
        "claude-code",
        "unknown-arg",
        Want::Deny("unknown argument `cwd`"),
    ),
    // Captured from Codex 0.171.0 running offline against a scripted model server.
    ("codex", "recorded/bash-git-status", Want::Allow),
    (
        "codex",
        "recorded/bash-cargo-build",
        Want::Deny("`tyba run`"),
    ),
    (
        "codex",
        "recorded/bash-push-main",
        Want::Deny("refs/heads/main"),
    ),
    ("codex", "bash-green", Want::Allow),
    ("codex", "bash-argv-green", Want::Allow),
    ("codex", "bash-argv-red", Want::Deny("tyba run")),
    ("codex", "bash-yellow", Want::Deny("tyba run")),
    ("codex", "bash-blocked", Want::Deny("master")),
    ("codex", "apply-patch-in-tree", Want::Allow),
    ("codex", "apply-patch-escape", Want::Deny("")),
    ("codex", "mcp", Want::Deny("MCP")),
    ("codex", "update-plan", Want::Allow),
    ("codex", "patch-own-hooks", Want::Deny("control file")),
    ("codex", "unknown-tool", Want::Deny("unknown Codex tool")),
    ("gemini", "shell-green", Want::Allow),
    ("gemini", "shell-dir-green", Want::Allow),
    ("gemini", "shell-yellow", Want::Deny("tyba run")),
    ("gemini", "shell-blocked", Want::Deny("main")),
    ("gemini", "write-in-tree", Want::Allow),
    ("gemini", "replace-outside", Want::NotAllow),
    ("gemini", "read-in-tree", Want::Allow),
    ("gemini", "glob-in-tree", Want::Allow),
    ("gemini", "search", Want::Deny("tyba run")),
    ("gemini", "todos", Want::Allow),
    ("gemini", "write-own-settings", Want::Deny("control file")),
    ("gemini", "mcp", Want::Deny("MCP")),
    // Gemini CLI 0.61: `delay_ms`, the background-process tools and subagents.
    ("gemini", "shell-delay-green", Want::Allow),
    ("gemini", "shell-background-yellow", Want::Deny("tyba run")),
    ("gemini", "list-background", Want::Allow),
    ("gemini", "read-background-output", Want::Allow),
    ("gemini", "invoke-agent", Want::Allow),
    (
        "gemini",
        "unknown-tool",
        Want::Deny("unknown Gemini CLI tool"),
    ),
];

fn check(got: &Answer, want: Want) -> bool {
    match (got, want) {
        (Answer::Allow, Want::Allow) => true,
        (Answer::Ask(r), Want::Ask(s)) => r.contains(s),
        (Answer::Deny(r), Want::Deny(s)) => r.contains(s),
        (Answer::Ask(_) | Answer::Deny(_), Want::NotAllow) => true,
        _ => false,
    }
}

#[test]
fn recorded_inputs_get_the_expected_answer_outside_a_session() {
    let fx = fixture();
    let mut bad = Vec::new();
    for &(agent, name, want) in CASES {
        let o = run(&fx, agent, recorded(&fx, agent, name).as_bytes());
        let got = read(agent, &o);
        if !check(&got, want) {
            bad.push(format!("{agent}/{name}: want {want:?}, got {got:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn codex_and_gemini_refusals_say_how_to_be_asked() {
    let fx = fixture();
    for (agent, name) in [("codex", "bash-yellow"), ("gemini", "shell-yellow")] {
        let got = read(
            agent,
            &run(&fx, agent, recorded(&fx, agent, name).as_bytes()),
        );
        let Answer::Deny(r) = got else {
            panic!("{agent}: {got:?}")
        };
        assert!(r.contains("yellow") && r.contains("`tyba run`"), "{r}");
    }
}

#[test]
fn inside_a_session_asks_fail_closed_until_the_broker_exists() {
    let fx = fixture();
    let sock = fx.home.join("session.sock");
    let env = [("TYBA_SESSION_SOCKET", sock.to_str().unwrap())];
    for agent in ["claude-code", "codex", "gemini"] {
        let (green, yellow, blocked) = match agent {
            "claude-code" => ("bash-green", "bash-yellow", "bash-blocked"),
            "codex" => ("bash-green", "bash-yellow", "bash-blocked"),
            _ => ("shell-green", "shell-yellow", "shell-blocked"),
        };
        let o = |n| {
            read(
                agent,
                &run_with(&fx, agent, recorded(&fx, agent, n).as_bytes(), &env),
            )
        };
        assert_eq!(o(green), Answer::Allow, "{agent} green");
        match o(yellow) {
            Answer::Deny(r) => assert!(r.contains("session could not be reached"), "{r}"),
            other => panic!("{agent} yellow in a session: {other:?}"),
        }
        assert!(matches!(o(blocked), Answer::Deny(_)), "{agent} blocked");
    }
    // MCP tools are asked too, so they are refused as well.
    let got = read(
        "claude-code",
        &run_with(
            &fx,
            "claude-code",
            recorded(&fx, "claude-code", "mcp").as_bytes(),
            &env,
        ),
    );
    assert!(
        matches!(got, Answer::Deny(ref r) if r.contains("session")),
        "{got:?}"
    );
}

/// Inputs no agent should send; each must be refused in the agent's format.
fn malformed(fx: &Fx, agent: &str) -> Vec<(String, Vec<u8>)> {
    let event = if agent == "gemini" {
        "BeforeTool"
    } else {
        "PreToolUse"
    };
    let tool = if agent == "gemini" {
        "run_shell_command"
    } else {
        "Bash"
    };
    let w = fx.w.to_str().unwrap();
    let base = |cwd: &str, ev: &str, input: &str| {
        format!(
            r#"{{"cwd":{},"hook_event_name":"{ev}","tool_name":"{tool}","tool_input":{input}}}"#,
            serde_json::Value::String(cwd.to_string())
        )
    };
    vec![
        ("empty".into(), b"".to_vec()),
        ("whitespace".into(), b" \n".to_vec()),
        ("not json".into(), b"ls -la".to_vec()),
        ("array".into(), b"[]".to_vec()),
        ("string".into(), b"\"ls\"".to_vec()),
        ("empty object".into(), b"{}".to_vec()),
        ("not utf-8".into(), b"{\"cwd\":\"\xff\xfe\"}".to_vec()),
        (
            "nested too deep".into(),
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        ),
        (
            "two objects".into(),
            format!("{0}{0}", base(w, event, r#"{"command":"ls"}"#)).into_bytes(),
        ),
        (
            "wrong event".into(),
            base(w, "PostToolUse", r#"{"command":"ls"}"#).into_bytes(),
        ),
        (
            "relative cwd".into(),
            base("w", event, r#"{"command":"ls"}"#).into_bytes(),
        ),
        (
            "missing cwd dir".into(),
            base("/nonexistent/tyba/dir", event, r#"{"command":"ls"}"#).into_bytes(),
        ),
        (
            "tool_input not an object".into(),
            base(w, event, r#""ls""#).into_bytes(),
        ),
        (
            "command not a string".into(),
            base(w, event, r#"{"command":42}"#).into_bytes(),
        ),
        (
            "command missing".into(),
            base(w, event, r#"{"description":"x"}"#).into_bytes(),
        ),
        (
            "unknown top-level field".into(),
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"{event}","tool_name":"{tool}","tool_input":{{"command":"ls"}},"sandbox":"off"}}"#
            )
            .into_bytes(),
        ),
        (
            "tool_name not a string".into(),
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"{event}","tool_name":["{tool}"],"tool_input":{{"command":"ls"}}}}"#
            )
            .into_bytes(),
        ),
    ]
}

#[test]
fn malformed_inputs_are_refused_in_the_agents_format() {
    let fx = fixture();
    for agent in ["claude-code", "codex", "gemini"] {
        for (what, bytes) in malformed(&fx, agent) {
            let got = read(agent, &run(&fx, agent, &bytes));
            assert!(
                matches!(got, Answer::Deny(ref r) if r.starts_with("refused by tyba")),
                "{agent}, {what}: {got:?}"
            );
        }
    }
}

#[test]
fn every_prefix_of_a_valid_input_is_refused_or_answered_as_the_whole() {
    let fx = fixture();
    for (agent, name) in [
        ("claude-code", "bash-green"),
        ("codex", "bash-green"),
        ("gemini", "shell-green"),
    ] {
        let full = recorded(&fx, agent, name);
        let whole = read(agent, &run(&fx, agent, full.as_bytes()));
        assert_eq!(whole, Answer::Allow);
        for cut in 0..full.len() {
            let prefix = &full.as_bytes()[..cut];
            let got = read(agent, &run(&fx, agent, prefix));
            if full[..cut].trim_end() == full.trim_end() {
                assert_eq!(got, whole, "{agent}: the whole input without its newline");
            } else {
                assert!(
                    matches!(got, Answer::Deny(_)),
                    "{agent}: prefix of {cut} bytes got {got:?}"
                );
            }
        }
    }
}

#[test]
fn claude_code_falls_back_to_exit_2_when_stdout_is_gone() {
    let fx = fixture();
    let input = recorded(&fx, "claude-code", "bash-blocked");
    let mut child = tyba(&fx)
        .args(["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the hook has its input, so its answer cannot be written.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("main"), "{err}");
}

#[test]
fn a_hook_that_never_gets_its_input_end_still_answers() {
    // Stdin held open without data would hang the hook until the agent's timeout (which lets
    // the call through); tyba gives up first and refuses. Only checked for its bound here.
    let fx = fixture();
    let mut child = tyba(&fx)
        .args(["hook", "codex"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _keep_open = child.stdin.take().unwrap();
    let start = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8(o.stderr).unwrap().contains("did not end"));
}

#[test]
fn a_large_write_is_read_whole_and_answered() {
    let fx = fixture();
    let input = serde_json::json!({
        "cwd": fx.w, "hook_event_name": "BeforeTool", "tool_name": "write_file",
        "tool_input": {"file_path": fx.w.join("big.txt"), "content": "x".repeat(8 << 20)}
    })
    .to_string();
    assert_eq!(
        read("gemini", &run(&fx, "gemini", input.as_bytes())),
        Answer::Allow
    );
}

/// A stand-in for the session's hook socket: answers the autonomy level `high` (where yellow
/// would pass unasked) and denies every ask, recording it.
fn fake_session(sock: &Path) -> std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>> {
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;
    let listener = UnixListener::bind(sock).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut line = String::new();
            if BufReader::new(&conn).read_line(&mut line).is_err() {
                continue;
            }
            let req: serde_json::Value = serde_json::from_str(&line).unwrap();
            let reply = match req["op"].as_str() {
                Some("autonomy") => serde_json::json!({"ok": true, "autonomy": "high"}),
                Some("ask") => {
                    record.lock().unwrap().push(req.clone());
                    serde_json::json!({"ok": true, "answer": {"answer": "deny", "reason": "seen"}})
                }
                _ => serde_json::json!({"ok": false, "error": "unexpected"}),
            };
            let _ = conn.write_all(format!("{reply}\n").as_bytes());
        }
    });
    seen
}

/// DESIGN.md §7: a field or tool tyba does not know is never a silent allow. Inside a session
/// it is asked with the raw input shown, not rememberable, even where the level would let the
/// call through; outside one it is refused with the reason.
#[test]
fn unknown_fields_and_tools_are_asked_inside_a_session_and_refused_outside() {
    let fx = fixture();
    let sock = fx.home.join("hook.sock");
    let seen = fake_session(&sock);
    let env = [("TYBA_SESSION_SOCKET", sock.to_str().unwrap())];
    let w = fx.w.to_str().unwrap();
    let cases = [
        (
            "claude-code",
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"ls"}},"sandbox":"off"}}"#
            ),
            "`sandbox`",
        ),
        (
            "claude-code",
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"ls","cwd":"/etc"}}}}"#
            ),
            "`tool_input.cwd`",
        ),
        (
            "codex",
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"teleport","tool_input":{{"to":"/"}}}}"#
            ),
            "the tool `teleport`",
        ),
        (
            "gemini",
            format!(
                r#"{{"cwd":"{w}","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{{"command":"ls","new_knob":1}}}}"#
            ),
            "`tool_input.new_knob`",
        ),
    ];
    for (agent, input, what) in &cases {
        // Outside a session: refused, naming the unknown part.
        let out = read(agent, &run(&fx, agent, input.as_bytes()));
        assert!(
            matches!(out, Answer::Deny(ref r) if r.starts_with("refused by tyba") && r.contains("unknown")),
            "{agent} outside: {out:?}"
        );
        // Inside: asked (the fake session denies), with the raw input as the action.
        let before = seen.lock().unwrap().len();
        let got = read(agent, &run_with(&fx, agent, input.as_bytes(), &env));
        assert!(
            matches!(got, Answer::Deny(ref r) if r.contains("seen")),
            "{agent} inside: {got:?}"
        );
        let asks = seen.lock().unwrap();
        assert_eq!(asks.len(), before + 1, "{agent}: one ask");
        let ask = &asks[before];
        assert_eq!(ask["action"].as_str().unwrap(), input.trim(), "{agent}");
        assert_eq!(
            ask["rememberable"],
            serde_json::Value::Bool(false),
            "{agent}"
        );
        let reasons = ask["reasons"].to_string();
        assert!(reasons.contains(what), "{agent}: {reasons}");
    }
    // A blocked command stays blocked, unknown field or not: refused without asking.
    let before = seen.lock().unwrap().len();
    let push = format!(
        r#"{{"cwd":"{w}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"git push origin HEAD:main"}},"sandbox":"off"}}"#
    );
    let got = read(
        "claude-code",
        &run_with(&fx, "claude-code", push.as_bytes(), &env),
    );
    assert!(
        matches!(got, Answer::Deny(ref r) if !r.contains("seen")),
        "{got:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), before);
}

/// Fields and tools current versions send (docs/agents.md): Gemini CLI 0.61's
/// `run_shell_command.delay_ms`, its background-process and subagent tools, Claude Code
/// 2.1.3xx's `scratchpad_dir`.
#[test]
fn current_versions_inputs_are_understood() {
    let fx = fixture();
    let w = fx.w.to_str().unwrap();
    let cases = [
        (
            "gemini",
            format!(
                r#"{{"session_id":"s","transcript_path":"/t","cwd":"{w}","hook_event_name":"BeforeTool","timestamp":"2026-11-30T00:50:12.345Z","tool_name":"run_shell_command","tool_input":{{"command":"git status","description":"d","is_background":false,"delay_ms":200}}}}"#
            ),
        ),
        (
            "gemini",
            format!(
                r#"{{"session_id":"s","cwd":"{w}","hook_event_name":"BeforeTool","tool_name":"list_background_processes","tool_input":{{}}}}"#
            ),
        ),
        (
            "gemini",
            format!(
                r#"{{"session_id":"s","cwd":"{w}","hook_event_name":"BeforeTool","tool_name":"read_background_output","tool_input":{{"pid":12345}}}}"#
            ),
        ),
        (
            "gemini",
            format!(
                r#"{{"session_id":"s","cwd":"{w}","hook_event_name":"BeforeTool","tool_name":"invoke_agent","tool_input":{{"agent_name":"codebase_investigator","prompt":"look"}}}}"#
            ),
        ),
        (
            "claude-code",
            format!(
                r#"{{"session_id":"s","transcript_path":"/t","cwd":"{w}","scratchpad_dir":"/tmp/claude-scratch","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"git status"}},"tool_use_id":"toolu_1"}}"#
            ),
        ),
    ];
    for (agent, input) in &cases {
        let got = read(agent, &run(&fx, agent, input.as_bytes()));
        assert_eq!(got, Answer::Allow, "{agent}: {input}");
    }
}

/// How a fake session treats `record` requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Records {
    /// Taken (`{"ok":true}`) and kept.
    Taken,
    /// Refused (`{"ok":false}`).
    Refused,
    /// The connection is closed without a reply.
    HungUp,
}

/// A session socket that answers `autonomy` (medium) and handles `record` as `mode` says;
/// returns the records it received (asks are answered deny and not kept).
fn recording_session(
    sock: &Path,
    mode: Records,
) -> std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>> {
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixListener;
    let listener = UnixListener::bind(sock).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut line = String::new();
            if BufReader::new(&conn).read_line(&mut line).is_err() {
                continue;
            }
            let req: serde_json::Value = serde_json::from_str(&line).unwrap();
            let reply = match (req["op"].as_str(), mode) {
                (Some("autonomy"), _) => serde_json::json!({"ok": true, "autonomy": "medium"}),
                (Some("ask"), _) => {
                    serde_json::json!({"ok": true, "answer": {"answer": "deny", "reason": "asked"}})
                }
                (Some("record"), Records::Taken) => {
                    keep.lock().unwrap().push(req.clone());
                    serde_json::json!({"ok": true})
                }
                (Some("record"), Records::Refused) => {
                    keep.lock().unwrap().push(req.clone());
                    serde_json::json!({"ok": false, "error": "no log"})
                }
                (Some("record"), Records::HungUp) => {
                    keep.lock().unwrap().push(req.clone());
                    continue;
                }
                _ => serde_json::json!({"ok": false, "error": "unexpected"}),
            };
            let _ = conn.write_all(format!("{reply}\n").as_bytes());
        }
    });
    seen
}

/// Inside a session, each decision the hook makes alone is sent to the session as a record
/// (an allow, a blocked refusal, an edit outside the worktree, an unreadable input), with
/// the answer the agent got; an ask is not (the session logs it with its answer). When the
/// session refuses the record or hangs up, the answer is the same: a refusal stays a
/// refusal, and the record's failure never turns into a refusal of an allowed call either.
#[test]
fn inside_a_session_every_lone_decision_is_recorded_and_a_failed_record_changes_nothing() {
    for (n, mode) in [Records::Taken, Records::Refused, Records::HungUp]
        .into_iter()
        .enumerate()
    {
        let fx = fixture();
        let sock = fx.home.join(format!("rec{n}.sock"));
        let records = recording_session(&sock, mode);
        // The session's own temp dir, as `tyba run` gives it (files there are the session's).
        let tmp = fx.home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let env = [
            ("TYBA_SESSION_SOCKET", sock.to_str().unwrap()),
            ("TMPDIR", tmp.to_str().unwrap()),
        ];
        let w = fx.w.to_str().unwrap();
        let outside = recorded(&fx, "claude-code", "write-in-tree")
            .replace(&format!("{w}/src/notes.txt"), "~/elsewhere/outside.txt");
        let cases: Vec<(String, &str, &str, &str)> = vec![
            (
                recorded(&fx, "claude-code", "read-in-tree"),
                "allow",
                "read ",
                "green",
            ),
            (
                recorded(&fx, "claude-code", "bash-blocked"),
                "deny",
                "git push origin HEAD:main",
                "blocked",
            ),
            (outside, "deny", "outside.txt", ""),
            ("{not json".to_string(), "deny", "{not json", ""),
        ];
        for (input, want, action, verdict) in &cases {
            let before = records.lock().unwrap().len();
            let o = run_with(&fx, "claude-code", input.as_bytes(), &env);
            let got = read("claude-code", &o);
            match (*want, &got) {
                ("allow", Answer::Allow) | ("deny", Answer::Deny(_)) => {}
                _ => panic!("{action}: {got:?}"),
            }
            let recs = records.lock().unwrap();
            assert_eq!(recs.len(), before + 1, "{action}: one record");
            let r = &recs[before];
            assert_eq!(r["agent"], "claude-code", "{r}");
            assert!(r["action"].as_str().unwrap().contains(action), "{r}");
            assert_eq!(
                r["decision"],
                if *want == "allow" { "allow" } else { "refuse" },
                "{r}"
            );
            if !verdict.is_empty() {
                assert_eq!(r["verdict"], *verdict, "{r}");
            }
            match &got {
                Answer::Deny(reason) => assert_eq!(r["reason"], reason.as_str(), "{r}"),
                _ => assert!(r.get("reason").is_none(), "{r}"),
            }
        }
        // An ask goes to the session as an ask, not as a record.
        let before = records.lock().unwrap().len();
        let o = run_with(
            &fx,
            "claude-code",
            recorded(&fx, "claude-code", "bash-yellow").as_bytes(),
            &env,
        );
        assert!(
            matches!(read("claude-code", &o), Answer::Deny(ref r) if r.contains("asked")),
            "{} / {}",
            o.stdout,
            o.stderr
        );
        assert_eq!(records.lock().unwrap().len(), before);
    }
}
