//! The same-terminal prompt as a person meets it (issue 14): a real `tyba run -- bash` in a
//! tmux pane, driven by tmux keys and read from tmux's own rendering of the screen. Keys
//! typed for the agent before and while a prompt appears answer nothing; a red ask takes a
//! confirmation; the header stays on the screen for a 5,000-character command; the waiting
//! time moves; Ctrl-C leaves the prompt and the ask still waits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::Path;
use std::time::{Duration, Instant};

const ROWS: usize = 40;
const COLS: usize = 100;

/// How many asks wait now, in every live session.
fn pending_now(fx: &Fx) -> Vec<serde_json::Value> {
    let (code, out, err) = fx.cli(&["inbox", "--json"]);
    assert_eq!(code, 0, "tyba inbox: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn waiting_secs(screen: &[String]) -> u64 {
    let l = screen
        .iter()
        .find(|l| l.contains("(waiting "))
        .unwrap_or_else(|| panic!("no waiting time:\n{}", screen.join("\n")));
    let start = l.find("(waiting ").unwrap() + "(waiting ".len();
    let end = start + l[start..].find('s').unwrap();
    l[start..end].parse().unwrap()
}

fn start(fx: &Fx) -> Tmux {
    let mut script = String::from("#!/bin/sh\n");
    for (k, v) in fx.env() {
        script.push_str(&format!(
            "export {}='{}'\n",
            k.to_string_lossy(),
            v.to_string_lossy().replace('\'', "'\\''")
        ));
    }
    script.push_str("export PS1='agent$ '\n");
    script.push_str(&format!("cd '{}'\n", fx.wt.display()));
    script.push_str(&format!(
        "exec '{}' run --here -- bash --norc --noprofile -i\n",
        fx.tyba.display()
    ));
    Tmux::start(fx, &script, COLS, ROWS)
}

#[test]
fn a_prompt_in_a_real_terminal_cannot_be_answered_by_accident() {
    if !Path::new("/usr/bin/tmux").exists() {
        assert!(!require_sandbox(), "tmux is needed (apt-get install tmux)");
        eprintln!("SKIP: no tmux");
        return;
    }
    for who in whos() {
        let Some(fx) = setup(&who, "prompt-tmux") else {
            continue;
        };
        let t = start(&fx);
        let first = t.wait("agent$");
        let all = first.join("\n");
        let at = all
            .find("session word «")
            .expect("the session word is printed");
        let word: String = all[at + "session word «".len()..]
            .chars()
            .take_while(|c| *c != '»')
            .collect();
        let marker = format!("session word: {word}");

        // Type-ahead before the prompt: keys typed straight after the command, for the agent.
        t.line("touch a.txt; echo T=$?");
        t.type_text("oyoa", Duration::from_millis(30));
        let s = t.wait(&marker);
        // ... and during it: `echo done` typed key by key while the prompt is up.
        t.type_text("echo done", Duration::from_millis(90));
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(pending_now(&fx).len(), 1, "{who:?}: type-ahead answered");
        assert!(!fx.wt.join("a.txt").exists(), "{who:?}");
        let s2 = t.screen();
        assert!(
            s2.iter().any(|l| l.contains("keys ignored")),
            "{who:?}: the prompt says it ignored keys:\n{}",
            s2.join("\n")
        );
        // The waiting time moves.
        let w1 = waiting_secs(&s);
        std::thread::sleep(Duration::from_millis(2200));
        let w2 = waiting_secs(&t.screen());
        assert!(w2 >= w1 + 2, "{who:?}: waiting {w1}s then {w2}s");
        // A deliberate key answers a yellow ask.
        t.press("o");
        t.wait("T=0");
        assert!(fx.wt.join("a.txt").exists(), "{who:?}");
        t.cmd(&["send-keys", "-t", "t", "C-u"]);

        // A red ask takes a confirmation.
        t.line("rm -rf build; echo R=$?");
        t.wait("rm -rf build`");
        t.press("o");
        t.wait("allow this RED action once");
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(pending_now(&fx).len(), 1, "{who:?}: `o` alone allowed red");
        t.press("y");
        t.wait("R=0");

        // The header stays on screen for a 5,000-character command, in details too.
        let long = format!("touch{}", " n".repeat(2500));
        std::fs::write(fx.wt.join("long.txt"), &long).unwrap();
        give(&fx.wt.join("long.txt"), &who);
        t.line("bash -c \"$(cat long.txt)\"; echo L=$?");
        let s = t.wait(&marker);
        let check = |s: &[String], what: &str| {
            assert!(s.len() <= ROWS, "{who:?} {what}: {} rows", s.len());
            assert!(
                s[0].contains(&marker),
                "{who:?} {what}: header row:\n{}",
                s.join("\n")
            );
            assert!(
                s[1].contains("yellow: run `touch n n") && s[1].contains("[?] shows all"),
                "{who:?} {what}: summary row:\n{}",
                s.join("\n")
            );
            assert!(
                s.iter().any(|l| l.contains("[d] deny")),
                "{who:?} {what}: keys:\n{}",
                s.join("\n")
            );
        };
        check(&s, "first");
        t.press("?");
        let s = t.wait("[Space] next page");
        check(&s, "details");
        t.press("Space");
        std::thread::sleep(Duration::from_millis(500));
        check(&t.screen(), "next page");
        t.press("d");
        t.wait("L=126");

        // Ctrl-C leaves the prompt; the ask still waits, answered from elsewhere.
        t.line("touch c.txt; echo C=$?");
        t.wait("run `touch c.txt`");
        t.press("C-c");
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.screen().iter().any(|l| l.contains(&marker)) {
            assert!(Instant::now() < deadline, "{who:?}: Ctrl-C left nothing");
            std::thread::sleep(Duration::from_millis(50));
        }
        let p = pending_now(&fx);
        assert_eq!(p.len(), 1, "{who:?}: {p:?}");
        let id = p[0]["id"].as_str().unwrap().to_string();
        let (code, _, err) = fx.cli(&["deny", &id]);
        assert_eq!(code, 0, "{err}");
        t.wait("C=126");
        assert!(!fx.wt.join("c.txt").exists());

        // The agent's interactive bash saves its history in the person's home as it exits: a
        // history file of the policy, refused quietly (logged, never asked).
        t.line("exit");
        let deadline = Instant::now() + Duration::from_secs(30);
        while t.alive() {
            assert!(
                Instant::now() < deadline,
                "{who:?}: the session never ended"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = fx.log_lines();
        let by_terminal: Vec<&str> = log
            .iter()
            .filter(|l| l["answered_by"] == "terminal")
            .filter_map(|l| l["answer"].as_str())
            .collect();
        assert_eq!(by_terminal, ["once", "once", "deny"], "{who:?}: {log:?}");
        assert!(
            log.iter().any(|l| l["kind"] == "file"
                && l["decision"] == "quiet-refuse"
                && l["action"]
                    .as_str()
                    .is_some_and(|a| a.contains(".bash_history"))),
            "{who:?}: the history write is logged as refused quietly: {log:?}"
        );
        assert!(
            !log.iter().any(|l| l["decision"] == "ask"
                && l["action"]
                    .as_str()
                    .is_some_and(|a| a.contains(".bash_history"))),
            "{who:?}: and never asked: {log:?}"
        );
    }
}
