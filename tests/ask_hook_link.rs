//! A hook ask's answer stands for the kernel layer's ask of the same command only when the
//! kernel's ask reaches what the person was shown: the agent runs `tyba hook claude-code`
//! inside a `tyba run --here` session (as an agent's hook would), the person approves those
//! asks, then the agent swaps a link the command goes through and runs the same text. The
//! kernel's ask then reaches another file and is asked on its own (denied here); without the
//! swap the hook's answer still stands (no second ask). Effects checked from outside, as the
//! test's user and as the unprivileged `TYBA_TEST_USER`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::time::{Duration, Instant};

/// A Claude Code `PreToolUse` call of its Bash tool for `command`, run in `cwd`.
fn bash_call(cwd: &std::path::Path, command: &str) -> String {
    serde_json::json!({
        "session_id": "s1",
        "transcript_path": "/dev/null",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "x"},
        "cwd": cwd.display().to_string(),
        "permission_mode": "default",
    })
    .to_string()
}

/// What one run saw: the asks answered `(kind, action, reasons)`, the session's output, the
/// hook replies, the audit log.
struct Seen {
    asks: Vec<(String, String, String)>,
    out: String,
    replies: String,
    log: Vec<serde_json::Value>,
}

/// Runs the agent: two hook asks (a read and a write of `lnk/NAME`, `lnk` pointing at
/// `home/sibling`), approved by the person; then, when `swap` names a directory of the home
/// (`""` the home itself), `lnk` is pointed there; then the same two commands run. Every ask
/// that is not the hook's is denied. `home/sibling/NAME` holds `PUBLIC`, `home/SWAP/NAME`
/// `HOME-SECRET`.
fn run(fx: &Fx, name: &str, swap: Option<&str>) -> Seen {
    let home = &fx.home;
    let secret_dir = home.join(swap.unwrap_or(""));
    std::fs::create_dir_all(home.join("sibling")).unwrap();
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join(name), "HOME-SECRET\n").unwrap();
    std::fs::write(home.join("sibling").join(name), "PUBLIC\n").unwrap();
    give(&secret_dir, &fx.who);
    give(&secret_dir.join(name), &fx.who);
    give(&home.join("sibling"), &fx.who);
    let inside = fx.wt.join("tyba-in");
    copy_exe(&fx.tyba, &inside);
    give(&inside, &fx.who);
    for (file, text) in [
        ("payload.txt", "PWNED-BY-AGENT\n".to_string()),
        ("read.json", bash_call(&fx.wt, &format!("cat lnk/{name}"))),
        (
            "write.json",
            bash_call(&fx.wt, &format!("cp payload.txt lnk/{name}")),
        ),
    ] {
        std::fs::write(fx.wt.join(file), text).unwrap();
        give(&fx.wt.join(file), &fx.who);
    }
    std::os::unix::fs::symlink(home.join("sibling"), fx.wt.join("lnk")).unwrap();
    let swap_line = if swap.is_some() {
        format!(
            "python3 -c 'import os; os.symlink(\"{}\", \"lnk2\"); os.rename(\"lnk2\", \"lnk\")'; ",
            secret_dir.display()
        )
    } else {
        String::new()
    };
    let script = format!(
        "./tyba-in hook claude-code < read.json > h1.json; \
         ./tyba-in hook claude-code < write.json > h2.json; \
         {swap_line}\
         cat lnk/{name} > leaked.txt; echo read=$?; \
         cp payload.txt lnk/{name}; echo write=$?"
    );
    let mut s = fx.start(&["--autonomy", "high"], &script);
    let mut asks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while s.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        if code == 0 {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            let pending = v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default());
            for p in pending {
                let id = p["id"].as_str().unwrap().to_string();
                let kind = p["kind"].as_str().unwrap_or("").to_string();
                let verb = if kind == "hook" { "approve" } else { "deny" };
                let (code, _, err) = fx.cli(&[verb, &id]);
                assert_eq!(code, 0, "{:?}: {verb} {id}: {err}", fx.who);
                asks.push((
                    kind,
                    p["action"].as_str().unwrap_or("").to_string(),
                    p["reasons"].to_string(),
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out, err) = s.finish();
    let replies = ["h1.json", "h2.json"]
        .iter()
        .map(|f| std::fs::read_to_string(fx.wt.join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    Seen {
        asks,
        out: format!("{out}\n--- stderr\n{err}"),
        replies,
        log: fx.log_lines(),
    }
}

fn linked_by_hook(log: &[serde_json::Value]) -> usize {
    log.iter()
        .filter(|l| {
            l["kind"] == "command"
                && l["answered_by"] == "the person's answer to the agent hook's ask"
        })
        .count()
}

/// The swapped run of `name`, the secret in `home/dir`: each command asked on its own.
fn swapped(tag: &str, name: &str, dir: &str) {
    for who in whos() {
        let Some(fx) = setup(&who, tag) else {
            continue;
        };
        let seen = run(&fx, name, Some(dir));
        let secret = fx.home.join(dir).join(name);
        let leaked = std::fs::read_to_string(fx.wt.join("leaked.txt")).unwrap_or_default();
        let home_now = std::fs::read_to_string(&secret).unwrap();
        let kernel: Vec<_> = seen.asks.iter().filter(|a| a.0 != "hook").collect();
        let mut ck = Checks::default();
        ck.check(
            seen.asks.iter().filter(|a| a.0 == "hook").count() == 2,
            "the two hook asks were shown",
        );
        ck.check(
            seen.asks
                .iter()
                .filter(|a| a.0 == "hook")
                .all(|a| a.2.contains(&format!("sibling/{name}"))),
            "the hook asks showed the sibling's file",
        );
        ck.check(!leaked.contains("HOME-SECRET"), "the home file is not read");
        ck.check(home_now == "HOME-SECRET\n", "the home file is not written");
        ck.check(
            kernel.len() == 2
                && kernel
                    .iter()
                    .all(|a| a.2.contains(&secret.display().to_string())),
            "each command is asked on its own, naming the home file",
        );
        ck.check(
            linked_by_hook(&seen.log) == 0,
            "no command answered by the hook's answer",
        );
        ck.check(
            seen.replies.contains("tyba: approved by the person (once)")
                && !seen.replies.contains("tyba: green"),
            "the hook's reply says what the person approved",
        );
        ck.finish(&format!(
            "{who:?}\n--- asks\n{:#?}\n--- out\n{}\n--- replies\n{}\n--- log\n{:#?}",
            seen.asks, seen.out, seen.replies, seen.log
        ));
    }
}

#[test]
fn a_hook_answer_does_not_stand_for_the_same_text_reaching_another_file() {
    swapped("hooklink-swap", "dotsecret.txt", "");
}

/// The same through a link swapped to `~/.ssh`: the kernel's ask names a credential path the
/// hook's ask never showed, so it is asked on its own.
#[test]
fn a_hook_answer_does_not_stand_for_a_credential_reached_through_a_swapped_link() {
    swapped("hooklink-ssh", "config", ".ssh");
}

#[test]
fn without_a_swap_the_hook_answer_still_stands_for_the_same_command() {
    for who in whos() {
        let Some(fx) = setup(&who, "hooklink-same") else {
            continue;
        };
        let seen = run(&fx, "dotsecret.txt", None);
        let leaked = std::fs::read_to_string(fx.wt.join("leaked.txt")).unwrap_or_default();
        let sibling = std::fs::read_to_string(fx.home.join("sibling/dotsecret.txt")).unwrap();
        let home_now = std::fs::read_to_string(fx.home.join("dotsecret.txt")).unwrap();
        let mut ck = Checks::default();
        ck.check(
            seen.asks.len() == 2 && seen.asks.iter().all(|a| a.0 == "hook"),
            "only the two hook asks: no second ask",
        );
        ck.check(leaked == "PUBLIC\n", "the approved read reaches the file");
        ck.check(
            sibling == "PWNED-BY-AGENT\n",
            "the approved write lands in the shown file",
        );
        ck.check(home_now == "HOME-SECRET\n", "the home file is untouched");
        ck.check(
            linked_by_hook(&seen.log) == 2,
            "both commands answered by the hook's answer",
        );
        ck.finish(&format!(
            "{who:?}\n--- asks\n{:#?}\n--- out\n{}\n--- replies\n{}\n--- log\n{:#?}",
            seen.asks, seen.out, seen.replies, seen.log
        ));
    }
}
