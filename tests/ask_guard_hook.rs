//! The repeated-failure guard and the agent-hook path, end to end in `tyba run`:
//! - after `nudge_after` similar refusals the refusal text carries a nudge; after
//!   `pause_after` the session is frozen and the person decides (resume or end);
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

#[test]
fn ask_guard_nudges_then_pauses_and_the_person_resumes() {
    for who in whos() {
        let Some((fx, policy)) = guard_fixture(&who, "guard-resume") else {
            continue;
        };
        let s = fx.start(
            &["--policy", &policy],
            "for f in a b c d; do touch $f.txt; echo $f=$?; done; echo end",
        );
        for _ in 0..3 {
            assert_eq!(answer_next(&fx, &["deny"]), "command");
        }
        // The third similar refusal paused the session: the person is asked to resume.
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
            err.contains("2 similar refusals in a row: stop retrying"),
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
fn ask_guard_pause_denied_ends_the_session() {
    let Some((fx, policy)) = guard_fixture(&Who::Me, "guard-end") else {
        return;
    };
    let s = fx.start(
        &["--policy", &policy],
        "for f in a b c d; do touch $f.txt; echo $f=$?; done; echo end",
    );
    for _ in 0..3 {
        answer_next(&fx, &["deny"]);
    }
    let pause = loop {
        if let Some(id) = ids_of_kind(&fx, "pause") {
            break id;
        }
    };
    assert_eq!(fx.cli(&["deny", &pause]).0, 0);
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
    }
}
