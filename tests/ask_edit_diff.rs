//! At low autonomy an edit is asked with its diff shown (DESIGN.md §4), end to end: a real
//! `tyba run --here --autonomy low` whose agent runs `tyba hook claude-code` inside the
//! sandbox on recorded Claude Code inputs; the person sees the diff in `tyba inbox` (text and
//! `--json`) before answering, and the audit log keeps it with the answer. As the test's user
//! and as the unprivileged `TYBA_TEST_USER`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::Path;

/// A hook input from `tests/data/hooks/claude-code/recorded/`, with the fixture's paths and
/// `tool_input` replaced.
fn claude_input(fx: &Fx, recorded: &str, tool_input: serde_json::Value) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hooks/claude-code/recorded")
            .join(recorded),
    )
    .unwrap()
    .replace("@CWD@", fx.wt.to_str().unwrap())
    .replace("@HOME@", fx.home.to_str().unwrap());
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["tool_input"] = tool_input;
    v.to_string()
}

/// The one pending hook ask, once it is there.
fn hook_ask(fx: &Fx) -> serde_json::Value {
    loop {
        let p = fx.pending(1);
        if let Some(h) = p.iter().find(|x| x["kind"] == "hook") {
            return h.clone();
        }
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

#[test]
fn ask_edit_at_low_autonomy_shows_the_diff_in_the_inbox_and_the_log() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-diff") else {
            continue;
        };
        // The hook must be executable inside the sandbox: a copy in the worktree.
        copy_exe(&fx.tyba, &fx.wt.join("tyba"));
        let notes = fx.wt.join("notes.txt");
        let readme = fx.wt.join("README.md");
        let write = claude_input(
            &fx,
            "write-notes.json",
            serde_json::json!({"file_path": notes, "content": "hello\n\u{1b}[2Jthere\n"}),
        );
        let edit = claude_input(
            &fx,
            "edit-etc-hosts.json",
            serde_json::json!({"file_path": readme, "old_string": "hello", "new_string": "hello, world", "replace_all": false}),
        );
        let stale = claude_input(
            &fx,
            "edit-etc-hosts.json",
            serde_json::json!({"file_path": readme, "old_string": "goodbye", "new_string": "x", "replace_all": false}),
        );
        std::fs::write(fx.wt.join("write.json"), write).unwrap();
        std::fs::write(fx.wt.join("edit.json"), edit).unwrap();
        std::fs::write(fx.wt.join("stale.json"), stale).unwrap();
        give(&fx.wt, &who);
        let s = fx.start(
            &["--autonomy", "low"],
            "for f in write edit stale; do ./tyba hook claude-code < $f.json; echo; done; echo end",
        );
        // The hook's own exec is a command like any other: allowed for the session.
        let p = fx.pending(1);
        assert_eq!(p[0]["kind"], "command", "{who:?}: {p:?}");
        let id = p[0]["id"].as_str().unwrap();
        assert_eq!(fx.cli(&["approve", id, "--always"]).0, 0, "{who:?}");

        // A new file: the diff from /dev/null, the agent's escape sequence made harmless.
        let h = hook_ask(&fx);
        let n = notes.display();
        assert_eq!(h["verdict"], "green", "{who:?}: {h}");
        assert_eq!(
            h["diff"],
            format!("--- /dev/null\n+++ {n}\n@@ -0,0 +1,2 @@\n+hello\n+?[2Jthere\n"),
            "{who:?}: {h}"
        );
        let (code, text, err) = fx.cli(&["inbox"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            text.contains(&format!(
                "      diff:\n        --- /dev/null\n        +++ {n}\n        @@ -0,0 +1,2 @@\n        +hello\n"
            )),
            "{who:?}: {text}"
        );
        assert_eq!(fx.cli(&["approve", h["id"].as_str().unwrap()]).0, 0);

        // An edit that applies: the line it changes.
        let h = hook_ask(&fx);
        let r = readme.display();
        assert_eq!(
            h["diff"],
            format!("--- {r}\n+++ {r}\n@@ -1 +1 @@\n-hello\n+hello, world\n"),
            "{who:?}: {h}"
        );
        let id = h["id"].as_str().unwrap().to_string();
        assert_eq!(fx.cli(&["deny", &id, "--reason", "keep it short"]).0, 0);

        // An edit that does not apply: said instead of a diff, and still asked.
        let h = hook_ask(&fx);
        let diff = h["diff"].as_str().unwrap();
        assert!(
            diff.starts_with("tyba could not compute the diff: the edit does not apply to")
                && diff.contains("the text to replace is not in it"),
            "{who:?}: {h}"
        );
        assert_eq!(fx.cli(&["approve", h["id"].as_str().unwrap()]).0, 0);

        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("end"), "{who:?}: {out}");
        let answers: Vec<serde_json::Value> = out
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let decisions: Vec<&str> = answers
            .iter()
            .map(|a| {
                a["hookSpecificOutput"]["permissionDecision"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(decisions, ["allow", "deny", "allow"], "{who:?}: {out}");
        assert!(
            answers[1]["hookSpecificOutput"]["permissionDecisionReason"]
                .as_str()
                .unwrap()
                .contains("keep it short"),
            "{out}"
        );
        // The hook only asked; the files are as they were.
        assert!(!notes.exists());
        assert_eq!(std::fs::read_to_string(&readme).unwrap(), "hello\n");

        // The log keeps what the person was shown, with the answer.
        let log = fx.log_lines();
        let hooks: Vec<&serde_json::Value> = log.iter().filter(|l| l["kind"] == "hook").collect();
        assert_eq!(hooks.len(), 3, "{who:?}: {log:?}");
        assert_eq!(hooks[1]["answer"], "deny");
        assert_eq!(
            hooks[1]["diff"],
            format!("--- {r}\n+++ {r}\n@@ -1 +1 @@\n-hello\n+hello, world\n")
        );
        assert!(
            log.iter()
                .filter(|l| l["kind"] != "hook")
                .all(|l| l.get("diff").is_none()),
            "{log:?}"
        );
    }
}
