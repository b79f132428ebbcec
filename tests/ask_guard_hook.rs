//! The repeated-failure guard and the agent-hook path, end to end in `tyba run`:
//! - after `nudge_after` refusals of the same action (retried) the refusal text carries a
//!   nudge; after `pause_after` the session is frozen and the person decides (resume or
//!   end); different refusals are no loop;
//! - `tyba hook codex` run by the agent inside the sandbox asks the session through its
//!   hook-only socket; the person's deny reason reaches the hook's answer, `always` is
//!   remembered for that exact hook action.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;

fn ids_of_kind(fx: &Fx, kind: &str) -> Option<String> {
    let p = fx.pending(1);
    p.iter()
        .find(|x| x["kind"] == kind)
        .map(|x| x["id"].as_str().unwrap().to_string())
}

/// Answers the next pending ask with `args` (after the id); returns its kind.
fn answer_next(fx: &Fx, args: &[&str]) -> String {
    let p = fx.pending(1);
    let id = p[0]["id"].as_str().unwrap();
    let mut a: Vec<&str> = vec![args[0], id];
    a.extend_from_slice(&args[1..]);
    let (code, _, err) = fx.cli(&a);
    assert_eq!(code, 0, "{a:?}: {err}");
    p[0]["kind"].as_str().unwrap().to_string()
}

fn guard_fixture(who: &Who, tag: &str) -> Option<(Fx, String)> {
    let fx = setup(who, tag)?;
    let policy = fx.scratch.dir.join(format!("{tag}-policy.toml"));
    std::fs::write(&policy, "[failures]\nnudge_after = 2\npause_after = 3\n").unwrap();
    give(&policy, who);
    let p = policy.display().to_string();
    Some((fx, p))
}

/// A pause is the agent's: when the agent is killed while paused (a timer of its own, the
/// person's `kill -9`), its ask is withdrawn and the session ends, instead of waiting on the
/// person to resume an agent that is gone (review 11's r11-03: the session waited until
/// `tyba stop`, a SIGTERM to `tyba run` included). The control: the pause is up, and names
/// the agent, before the kill.
#[test]
fn ask_guard_pause_of_an_agent_killed_meanwhile_ends_the_session() {
    for who in whos() {
        let Some((fx, policy)) = guard_fixture(&who, "guard-killed") else {
            continue;
        };
        let marker = format!("guard-killed-{}", std::process::id());
        let s = fx.start(
            &["--policy", &policy],
            &format!("# {marker}\nfor f in a b c d; do touch x.txt; echo $f=$?; done; echo end"),
        );
        for _ in 0..3 {
            assert_eq!(answer_next(&fx, &["deny"]), "command");
        }
        let pause = loop {
            let p = fx.pending(1);
            if let Some(x) = p.iter().find(|x| x["kind"] == "pause") {
                break x.clone();
            }
        };
        let agent = pause["pid"].as_u64().unwrap_or(0) as u32;
        let cmdline = std::fs::read(format!("/proc/{agent}/cmdline")).unwrap_or_default();
        assert!(
            String::from_utf8_lossy(&cmdline).contains(&marker),
            "{who:?}: control: the pause names the agent ({agent}): {pause}"
        );
        kill(agent, "KILL");
        let t = std::time::Instant::now();
        let (code, out, err) = s.finish();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{who:?}: the session waited {:?} after its agent was killed: {err}",
            t.elapsed()
        );
        assert_ne!(code, 0, "{who:?}: {out} / {err}");
        assert!(!out.contains("end"), "{who:?}: {out}");
        let log = fx.log_lines();
        assert!(
            log.iter().any(|l| l["decision"] == "pause"
                && l["answer"] == "end"
                && l["answered_by"]
                    .as_str()
                    .is_some_and(|b| b.contains("process gone"))),
            "{who:?}: {log:?}"
        );
    }
}

#[test]
fn ask_guard_nudges_then_pauses_and_the_person_resumes() {
    for who in whos() {
        let Some((fx, policy)) = guard_fixture(&who, "guard-resume") else {
            continue;
        };
        let s = fx.start(
            &["--policy", &policy],
            "for f in a b c d; do touch x.txt; echo $f=$?; done; echo end",
        );
        for _ in 0..3 {
            assert_eq!(answer_next(&fx, &["deny"]), "command");
        }
        // The third refusal of the same action paused the session: the person is asked to
        // resume.
        let pause = loop {
            if let Some(id) = ids_of_kind(&fx, "pause") {
                break id;
            }
        };
        assert_eq!(fx.cli(&["approve", &pause, "--always"]).0, 1, "{who:?}");
        assert_eq!(fx.cli(&["approve", &pause]).0, 0, "{who:?}");
        assert_eq!(answer_next(&fx, &["deny"]), "command");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("d=126") && out.contains("end"), "{out}");
        assert!(
            err.contains("the same action refused 2 times within 5 minutes: stop retrying it"),
            "{who:?}: nudge: {err}"
        );
        assert!(err.contains("the session is paused"), "{who:?}: {err}");
        let log = fx.log_lines();
        assert!(
            log.iter()
                .any(|l| l["decision"] == "pause" && l["answer"] == "resume"),
            "{log:?}"
        );
    }
}

#[test]
fn ask_guard_different_refusals_are_no_loop() {
    for who in whos() {
        let Some((fx, policy)) = guard_fixture(&who, "guard-different") else {
            continue;
        };
        // Four different commands, each refused: not the agent retrying one thing.
        let s = fx.start(
            &["--policy", &policy],
            "for f in a b c d; do touch $f.txt; echo $f=$?; done; echo end",
        );
        for _ in 0..4 {
            assert_eq!(answer_next(&fx, &["deny"]), "command");
        }
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("d=126") && out.contains("end"), "{out}");
        assert!(!err.contains("stop retrying"), "{who:?}: nudged: {err}");
        assert!(!err.contains("paused"), "{who:?}: paused: {err}");
        let log = fx.log_lines();
        assert!(
            !log.iter().any(|l| l["decision"] == "pause"),
            "{who:?}: {log:?}"
        );
    }
}

#[test]
fn ask_guard_pause_denied_ends_the_session() {
    let Some((fx, policy)) = guard_fixture(&Who::Me, "guard-end") else {
        return;
    };
    let s = fx.start(
        &["--policy", &policy],
        "for f in a b c d; do touch x.txt; echo $f=$?; done; echo end",
    );
    for _ in 0..3 {
        answer_next(&fx, &["deny"]);
    }
    let pause = loop {
        if let Some(id) = ids_of_kind(&fx, "pause") {
            break id;
        }
    };
    let (code, _, denied) = fx.cli(&["deny", &pause]);
    assert_eq!(code, 0, "tyba deny {pause}: {denied}");
    let (code, out, err) = s.finish();
    assert_ne!(code, 0, "{out} / {err}");
    assert!(!out.contains("end"), "the agent did not go on: {out}");
    let log = fx.log_lines();
    assert!(
        log.iter()
            .any(|l| l["decision"] == "pause" && l["answer"] == "end"),
        "{log:?}"
    );
}

#[test]
fn ask_hook_inside_the_session_reaches_the_person() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-hook") else {
            continue;
        };
        // The hook must be executable inside the sandbox: a copy in the worktree.
        let inner = fx.wt.join("tyba");
        copy_exe(&fx.tyba, &inner);
        let input = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/hooks/codex/bash-yellow.json"),
        )
        .unwrap()
        .replace("@CWD@", fx.wt.to_str().unwrap())
        .replace("\"cargo test\"", "\"touch hooked.txt\"");
        std::fs::write(fx.wt.join("in.json"), input).unwrap();
        give(&fx.wt, &who);
        let s = fx.start(
            &[],
            "./tyba hook codex < in.json; echo h1=$?; ./tyba hook codex < in.json; echo h2=$?; \
             bash -lc 'touch hooked.txt'; echo linked=$?; \
             ./tyba hook codex < in.json; echo h3=$?",
        );
        // The hook's own exec is a command like any other: allowed for the session.
        assert_eq!(answer_next(&fx, &["approve", "--always"]), "command");
        let p = fx.pending(1);
        assert_eq!(p[0]["kind"], "hook", "{p:?}");
        assert!(
            p[0]["action"]
                .as_str()
                .unwrap()
                .contains("touch hooked.txt"),
            "{p:?}"
        );
        answer_next(&fx, &["deny", "--reason", "not now, run make check"]);
        answer_next(&fx, &["approve", "--always"]);
        // The agent then runs the command the person allowed through its hook: the kernel
        // layer's ask for the same line is that answer, so nothing more is asked.
        let mut s = s;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while s.child.try_wait().unwrap().is_none() {
            let (_, j, _) = fx.cli(&["inbox", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&j).unwrap();
            let asked: Vec<String> = v
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|x| x["pending"].as_array().cloned().unwrap_or_default())
                .map(|x| x["action"].to_string())
                .collect();
            if !asked.is_empty() || std::time::Instant::now() > deadline {
                let _ = s.child.kill();
                panic!("{who:?}: asked again: {asked:?}");
            }
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let (code, out, err) = s.finish();
        assert!(out.contains("linked=0"), "{who:?}: {out} / {err}");
        assert!(fx.wt.join("hooked.txt").exists());
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("h1=2") && out.contains("h2=0") && out.contains("h3=0"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            err.contains("denied by the person: not now, run make check"),
            "{who:?}: {err}"
        );
        // The third call, let through by the person's `always`, is in the log as an allow
        // (not as an ask the person answered).
        let log = fx.log_lines();
        let hooked: Vec<&serde_json::Value> = log
            .iter()
            .filter(|l| {
                l["kind"] == "hook" && l["action"].as_str().unwrap().contains("touch hooked.txt")
            })
            .collect();
        let shape: Vec<(String, String)> = hooked
            .iter()
            .map(|l| (l["decision"].to_string(), l["answer"].to_string()))
            .collect();
        assert_eq!(
            shape,
            [
                ("\"ask\"".to_string(), "\"deny\"".to_string()),
                ("\"ask\"".to_string(), "\"always\"".to_string()),
                ("\"allow\"".to_string(), "null".to_string()),
            ],
            "{who:?}: {log:#?}"
        );
        assert!(
            hooked[2]["reason"].as_str().unwrap().contains("always"),
            "{:?}",
            hooked[2]
        );
    }
}

/// A recorded Claude Code input with its placeholders filled, the call made in `cwd`.
fn claude_input(name: &str, cwd: &std::path::Path, home: &std::path::Path) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/hooks/claude-code")
            .join(format!("{name}.json")),
    )
    .unwrap()
    .replace("@CWD@", cwd.to_str().unwrap())
    .replace("@HOME@", home.to_str().unwrap())
}

/// Every decision of tyba's Claude Code hook inside a session is in the session's audit log
/// (`tyba log --json`), said to come from the hook: a refused push to main, a refused Write
/// outside the worktree, an allowed Read, and an ask with its answer. The ask names the tool
/// call and the directory it runs in (a subdirectory of the worktree here, not the
/// supervisor's directory), never the supervisor's process.
#[test]
fn claude_code_hook_decisions_are_in_the_sessions_audit_log() {
    for who in whos() {
        let Some(fx) = setup(&who, "hook-log") else {
            continue;
        };
        let inner = fx.wt.join("tyba");
        copy_exe(&fx.tyba, &inner);
        let sub = fx.wt.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("README.md"), "hi\n").unwrap();
        let outside = fx.home.join("r22/outside.txt");
        let inputs = [
            ("push", claude_input("bash-blocked", &sub, &fx.home)),
            (
                "write",
                claude_input("write-in-tree", &sub, &fx.home).replace(
                    &format!("{}/src/notes.txt", sub.display()),
                    "~/r22/outside.txt",
                ),
            ),
            (
                "read",
                claude_input("read-in-tree", &sub, &fx.home)
                    .replace(&format!("{}/README.md", sub.display()), "README.md"),
            ),
            ("yellow", claude_input("bash-yellow", &sub, &fx.home)),
        ];
        for (name, text) in &inputs {
            std::fs::write(sub.join(format!("{name}.json")), text).unwrap();
        }
        give(&fx.wt, &who);
        // Outside files off: the hook then refuses the Write outside at once (with them on,
        // where /dev/fuse opens, it asks instead, since the kernel layer could grant it:
        // `tests/ask_outside_files.rs`); the refusal is what this test logs.
        let s = fx.start(
            &["--outside-files", "off"],
            "cd sub && for f in push write read yellow; do \
             cp $f.json in.json; ../tyba hook claude-code < in.json; echo \"$f=$?\"; done",
        );
        // The hook's own exec is a command like any other: allowed for the session (the
        // copied program's path, then the hook run from the subdirectory).
        let mut approved = Vec::new();
        let p = loop {
            let p = fx.pending(1);
            if p[0]["kind"] != "command" || approved.len() > 4 {
                break p;
            }
            approved.push(p[0]["action"].to_string());
            answer_next(&fx, &["approve", "--always"]);
        };
        let ask = &p[0];
        assert_eq!(ask["kind"], "hook", "{who:?}: {p:?} after {approved:?}");
        assert!(
            ask["action"].as_str().unwrap().contains("cargo build"),
            "{who:?}: {ask}"
        );
        // The tool call's directory, not the supervisor's (the worktree's top); no process
        // of the supervisor named.
        assert_eq!(ask["cwd"], sub.to_str().unwrap(), "{who:?}: {ask}");
        assert_eq!(ask["pid"], 0, "{who:?}: {ask}");
        assert_eq!(ask["argv"], serde_json::json!([]), "{who:?}: {ask}");
        assert_eq!(
            ask["caller"], "Claude Code's tool call Bash",
            "{who:?}: {ask}"
        );
        let (_, listed, _) = fx.cli(&["inbox"]);
        assert!(
            listed.contains(&format!(
                "by Claude Code's tool call Bash in {}",
                sub.display()
            )),
            "{who:?}: {listed}"
        );
        assert!(!listed.contains("tyba run"), "{who:?}: {listed}");
        answer_next(&fx, &["deny", "--reason", "not now"]);
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for f in ["push", "write", "read", "yellow"] {
            assert!(out.contains(&format!("{f}=0")), "{who:?}: {out} / {err}");
        }
        // What the model was told.
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
        assert_eq!(
            decisions,
            ["deny", "deny", "allow", "deny"],
            "{who:?}: {out}"
        );
        assert!(!outside.exists());

        let log = fx.log_lines();
        let hook_line = |needle: &str| -> serde_json::Value {
            let found: Vec<&serde_json::Value> = log
                .iter()
                .filter(|l| l["kind"] == "hook" && l["action"].as_str().unwrap().contains(needle))
                .collect();
            assert_eq!(found.len(), 1, "{who:?}: one `{needle}` line in {log:#?}");
            found[0].clone()
        };
        let push = hook_line("git push origin HEAD:main");
        assert_eq!(push["decision"], "refuse", "{push}");
        assert_eq!(push["verdict"], "blocked", "{push}");
        assert!(
            push["action"]
                .as_str()
                .unwrap()
                .ends_with("(Bash via claude-code)"),
            "{push}"
        );
        let told = answers[0]["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap();
        assert_eq!(push["reason"], told, "{push}");
        assert!(told.contains("refs/heads/main"), "{told}");
        assert!(!push["reasons"].as_array().unwrap().is_empty(), "{push}");
        assert!(
            push["answered_by"].as_str().unwrap().contains("hook"),
            "{push}"
        );
        assert_eq!(push["cwd"], sub.to_str().unwrap(), "{push}");

        let write = hook_line("outside.txt");
        assert_eq!(write["decision"], "refuse", "{write}");
        assert!(
            write["action"]
                .as_str()
                .unwrap()
                .ends_with("(Write via claude-code)"),
            "{write}"
        );
        assert!(
            write["reason"]
                .as_str()
                .unwrap()
                .contains("outside the session's worktree"),
            "{write}"
        );

        let read = hook_line("read README.md");
        assert_eq!(read["decision"], "allow", "{read}");
        assert_eq!(read["verdict"], "green", "{read}");
        assert!(read.get("reason").is_none(), "{read}");
        assert_eq!(read["cwd"], sub.to_str().unwrap(), "{read}");

        // The ask, once, with its answer and the tool call's directory; no supervisor pid.
        let asked = hook_line("cargo build");
        assert_eq!(asked["decision"], "ask", "{asked}");
        assert_eq!(asked["answer"], "deny", "{asked}");
        assert_eq!(asked["cwd"], sub.to_str().unwrap(), "{asked}");
        assert!(asked.get("pid").is_none(), "{asked}");
    }
}
