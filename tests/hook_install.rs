//! `tyba hook install|uninstall`: merges tyba's entry into each agent's settings without
//! touching anything else, is idempotent, removes only its own entry, refuses files it cannot
//! keep intact, and the command it installs answers hook calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Fx {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    home: PathBuf,
    root: PathBuf,
}

fn fixture() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let w = root.join("w");
    let home = root.join("home");
    std::fs::create_dir_all(w.join("sub")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&w)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    Fx {
        _tmp: tmp,
        w,
        home,
        root,
    }
}

fn tyba_in(fx: &Fx, dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tyba"))
        .args(args)
        .current_dir(dir)
        .env("HOME", &fx.home)
        .env_remove("CODEX_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap()
}

fn tyba(fx: &Fx, args: &[&str]) -> Output {
    // From a subdirectory: --project means the git top-level, not the cwd.
    tyba_in(fx, &fx.w.join("sub"), args)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn exe() -> String {
    env!("CARGO_BIN_EXE_tyba").to_string()
}

/// The command `install` writes: tyba by absolute path inside an `sh` wrapper that turns any
/// exit status other than 0 and 2 into a refusal.
fn installed(agent: &str) -> String {
    format!(
        r#"/bin/sh -c '"$0" hook {agent}; s=$?; [ "$s" -eq 0 ] || [ "$s" -eq 2 ] || {{ echo "tyba hook {agent} could not answer (exit status $s; is $0 still there?): refusing the tool call" >&2; exit 2; }}; exit "$s"' {}"#,
        exe()
    )
}

fn load(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The tyba handlers under `hooks.<event>` of a settings document.
fn tyba_handlers(doc: &Value, event: &str) -> Vec<Value> {
    doc["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
        .filter(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.contains(" hook ") && c.contains("tyba"))
        })
        .collect()
}

const CLAUDE_SETTINGS: &str = r#"{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(npm run lint)"],
    "deny": ["Read(./.env)"]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "/usr/local/bin/my-check", "timeout": 5}]
      }
    ],
    "PostToolUse": [
      {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}
    ]
  },
  "env": {"FOO": "1"}
}
"#;

#[test]
fn claude_code_project_install_merges_is_idempotent_and_uninstalls_cleanly() {
    let fx = fixture();
    let path = fx.w.join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, CLAUDE_SETTINGS).unwrap();
    let before = load(&path);

    let out = ok(&tyba(&fx, &["hook", "install", "claude-code"]));
    assert!(out.contains("installed"), "{out}");
    let doc = load(&path);
    // Everything the person had is still there.
    for key in ["model", "permissions", "env"] {
        assert_eq!(doc[key], before[key], "{key}");
    }
    assert_eq!(doc["hooks"]["PostToolUse"], before["hooks"]["PostToolUse"]);
    assert_eq!(
        doc["hooks"]["PreToolUse"][0],
        before["hooks"]["PreToolUse"][0]
    );
    // Plus exactly tyba's entry, calling this binary by absolute path.
    assert_eq!(
        doc["hooks"]["PreToolUse"][1],
        json!({"matcher": "*", "hooks": [{"type": "command", "command": installed("claude-code"), "timeout": 600}]})
    );
    assert_eq!(doc["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
    // Key order is the person's.
    let text = std::fs::read_to_string(&path).unwrap();
    let pos = |k: &str| text.find(k).unwrap();
    assert!(pos("\"model\"") < pos("\"permissions\"") && pos("\"hooks\"") < pos("\"env\""));

    // Installing again changes nothing.
    let out = ok(&tyba(&fx, &["hook", "install", "claude-code", "--project"]));
    assert!(out.contains("already installed"), "{out}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    // Uninstall removes tyba's entry and nothing else.
    let out = ok(&tyba(&fx, &["hook", "uninstall", "claude-code"]));
    assert!(out.contains("removed"), "{out}");
    assert_eq!(load(&path), before);
    let out = ok(&tyba(&fx, &["hook", "uninstall", "claude-code"]));
    assert!(out.contains("no tyba hook"), "{out}");
    assert_eq!(load(&path), before);
}

#[test]
fn a_stale_tyba_entry_is_replaced_not_duplicated() {
    let fx = fixture();
    let path = fx.w.join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"/old/place/tyba hook claude-code"},{"type":"command","command":"audit-log"}]}]}}"#,
    )
    .unwrap();
    ok(&tyba(&fx, &["hook", "install", "claude-code"]));
    let doc = load(&path);
    let ours = tyba_handlers(&doc, "PreToolUse");
    assert_eq!(ours.len(), 1, "{doc}");
    assert_eq!(ours[0]["command"], installed("claude-code"));
    // The person's handler that shared the group stays.
    assert_eq!(
        doc["hooks"]["PreToolUse"][0],
        json!({"matcher":"*","hooks":[{"type":"command","command":"audit-log"}]})
    );
}

#[test]
fn fresh_files_for_each_agent_and_scope() {
    let fx = fixture();
    let cases: [(&str, &[&str], PathBuf, &str, Value); 6] = [
        (
            "claude-code",
            &[],
            fx.w.join(".claude/settings.json"),
            "PreToolUse",
            json!({"type":"command","command":installed("claude-code"),"timeout":600}),
        ),
        (
            "codex",
            &[],
            fx.w.join(".codex/hooks.json"),
            "PreToolUse",
            json!({"type":"command","command":installed("codex"),"timeout":600,"statusMessage":"tyba: checking the tool call"}),
        ),
        (
            "gemini",
            &[],
            fx.w.join(".gemini/settings.json"),
            "BeforeTool",
            json!({"name":"tyba","type":"command","command":installed("gemini"),"timeout":600000,"description":"tyba: classify every tool call, refuse what the policy refuses"}),
        ),
        (
            "claude-code",
            &["--user"],
            fx.home.join(".claude/settings.json"),
            "PreToolUse",
            json!({"type":"command","command":installed("claude-code"),"timeout":600}),
        ),
        (
            "codex",
            &["--user"],
            fx.home.join(".codex/hooks.json"),
            "PreToolUse",
            json!({"type":"command","command":installed("codex"),"timeout":600,"statusMessage":"tyba: checking the tool call"}),
        ),
        (
            "gemini",
            &["--user"],
            fx.home.join(".gemini/settings.json"),
            "BeforeTool",
            json!({"name":"tyba","type":"command","command":installed("gemini"),"timeout":600000,"description":"tyba: classify every tool call, refuse what the policy refuses"}),
        ),
    ];
    for (agent, flags, path, event, handler) in cases {
        let mut args = vec!["hook", "install", agent];
        args.extend_from_slice(flags);
        ok(&tyba(&fx, &args));
        let doc = load(&path);
        assert_eq!(
            doc,
            json!({"hooks": {event: [{"matcher": "*", "hooks": [handler]}]}}),
            "{agent} {flags:?}"
        );
        args[1] = "uninstall";
        ok(&tyba(&fx, &args));
        assert_eq!(load(&path), json!({}), "{agent} {flags:?}");
    }
}

#[test]
fn codex_user_scope_follows_codex_home() {
    let fx = fixture();
    let codex_home = fx.root.join("codex-home");
    let o = Command::new(env!("CARGO_BIN_EXE_tyba"))
        .args(["hook", "install", "codex", "--user"])
        .current_dir(&fx.w)
        .env("HOME", &fx.home)
        .env("CODEX_HOME", &codex_home)
        .output()
        .unwrap();
    ok(&o);
    assert_eq!(
        tyba_handlers(&load(&codex_home.join("hooks.json")), "PreToolUse").len(),
        1
    );
    assert!(!fx.home.join(".codex").exists());
}

#[test]
fn gemini_keeps_its_hook_switches_and_other_events() {
    let fx = fixture();
    let path = fx.w.join(".gemini/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let original = json!({
        "general": {"vimMode": true},
        "hooksConfig": {"enabled": true},
        "hooks": {
            "disabled": ["secret-scanner"],
            "BeforeTool": [{"matcher": "write_file|replace", "hooks": [{"name": "secret-scanner", "type": "command", "command": "./scan.sh"}]}],
            "AfterTool": [{"matcher": "*", "hooks": [{"type": "command", "command": "./log.sh"}]}]
        }
    });
    std::fs::write(&path, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    ok(&tyba(&fx, &["hook", "install", "gemini"]));
    ok(&tyba(&fx, &["hook", "install", "gemini"]));
    let doc = load(&path);
    assert_eq!(doc["general"], original["general"]);
    assert_eq!(doc["hooksConfig"], original["hooksConfig"]);
    assert_eq!(doc["hooks"]["disabled"], original["hooks"]["disabled"]);
    assert_eq!(doc["hooks"]["AfterTool"], original["hooks"]["AfterTool"]);
    assert_eq!(
        doc["hooks"]["BeforeTool"][0],
        original["hooks"]["BeforeTool"][0]
    );
    assert_eq!(tyba_handlers(&doc, "BeforeTool").len(), 1);
    ok(&tyba(&fx, &["hook", "uninstall", "gemini"]));
    assert_eq!(load(&path), original);
}

#[test]
fn settings_that_are_not_json_are_refused_not_overwritten() {
    let fx = fixture();
    let bad: [(&str, &str, &str); 4] = [
        (
            "claude-code",
            ".claude/settings.json",
            "{\"model\": \"opus\",,}",
        ),
        // Gemini CLI tolerates comments; tyba cannot keep them, so it refuses.
        (
            "gemini",
            ".gemini/settings.json",
            "{\n  // my settings\n  \"a\": 1\n}\n",
        ),
        (
            "codex",
            ".codex/hooks.json",
            "{\"hooks\": {\"PreToolUse\": {\"matcher\": \"*\"}}}",
        ),
        ("claude-code", ".claude/settings.json", "[1, 2]"),
    ];
    for (agent, rel, text) in bad {
        let path = fx.w.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        for verb in ["install", "uninstall"] {
            let o = tyba(&fx, &["hook", verb, agent]);
            assert!(!o.status.success(), "{agent} {verb} {text}");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("will not overwrite"), "{err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn project_scope_needs_a_repository_and_scopes_are_exclusive() {
    let fx = fixture();
    let outside = fx.root.join("plain");
    std::fs::create_dir_all(&outside).unwrap();
    let o = tyba_in(&fx, &outside, &["hook", "install", "claude-code"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not inside a git repository"));
    assert!(!outside.join(".claude").exists());
    let o = tyba(&fx, &["hook", "install", "codex", "--user", "--project"]);
    assert_eq!(o.status.code(), Some(2));
}

fn run_sh(fx: &Fx, command: &str, input: &Value) -> Output {
    // Agents run hook commands through a shell.
    let mut child = Command::new("sh")
        .args(["-c", command])
        .current_dir(&fx.w)
        .env("HOME", &fx.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hook that fails before reading may close its stdin first.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes());
    child.wait_with_output().unwrap()
}

fn bash_input(fx: &Fx, command: &str) -> Value {
    json!({
        "session_id": "s", "transcript_path": "/t", "cwd": fx.w, "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_use_id": "t1"
    })
}

fn installed_command(fx: &Fx, agent: &str, event: &str, rel: &str) -> String {
    ok(&tyba(fx, &["hook", "install", agent]));
    let doc = load(&fx.w.join(rel));
    tyba_handlers(&doc, event)[0]["command"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_installed_command_answers_hook_calls() {
    let fx = fixture();
    let command = installed_command(&fx, "claude-code", "PreToolUse", ".claude/settings.json");
    let o = run_sh(&fx, &command, &bash_input(&fx, "git push origin HEAD:main"));
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    let o = run_sh(&fx, &command, &bash_input(&fx, "git status"));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "allow",
        "{v}"
    );

    // Codex: a refusal is exit 2 with the reason, passed through the wrapper unchanged.
    let command = installed_command(&fx, "codex", "PreToolUse", ".codex/hooks.json");
    let o = run_sh(&fx, &command, &bash_input(&fx, "cargo build"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("refused by tyba") && !err.contains("could not answer"),
        "{err}"
    );
}

#[test]
fn the_installed_command_refuses_when_tyba_is_gone_or_killed() {
    let fx = fixture();
    let command = installed_command(&fx, "codex", "PreToolUse", ".codex/hooks.json");
    // The binary moved away (cargo clean, an upgrade to another path).
    let gone = command.replace(&exe(), "/nonexistent/bin/tyba");
    // The binary killed by a signal before answering.
    let killer = fx.root.join("bin/tyba");
    std::fs::create_dir_all(killer.parent().unwrap()).unwrap();
    std::fs::write(&killer, "#!/bin/sh\nkill -KILL $$\n").unwrap();
    let mut perm = std::fs::metadata(&killer).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&killer, perm).unwrap();
    let killed = command.replace(&exe(), killer.to_str().unwrap());
    for (what, cmd) in [("gone", gone), ("killed", killed)] {
        let o = run_sh(&fx, &cmd, &bash_input(&fx, "git status"));
        assert_eq!(o.status.code(), Some(2), "{what}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("could not answer"), "{what}: {err}");
    }
}
