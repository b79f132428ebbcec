//! Live session controls end to end (issue 7): `tyba sessions`, `tyba autonomy`, `tyba stop`
//! on real `tyba run --here -- bash -c '…'` sessions, as the test's user and as the
//! unprivileged `TYBA_TEST_USER`; and the same controls tried from inside the sandbox, where
//! every attempt fails and, where the supervisor can see it, is in the audit log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The live sessions, as `tyba sessions --json` lists them.
fn sessions(fx: &Fx) -> Vec<serde_json::Value> {
    let (code, out, err) = fx.cli(&["sessions", "--json"]);
    assert_eq!(code, 0, "tyba sessions: {err}");
    serde_json::from_str::<serde_json::Value>(&out)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The only live session, waiting up to 60 s for it.
fn the_session(fx: &Fx) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = sessions(fx);
        if s.len() == 1 {
            return s[0].clone();
        }
        assert!(Instant::now() < deadline, "never one session: {s:?}");
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// Waits up to 60 s for `path` to exist.
fn wait_file(path: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "never made: {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes `name` in the worktree, from outside, as `who` would own it.
fn touch(fx: &Fx, name: &str) {
    let p = fx.wt.join(name);
    std::fs::write(&p, "").unwrap();
    give(&p, &fx.who);
}

/// Lines of the audit log that are controls (kind `control`).
fn control_lines(fx: &Fx) -> Vec<serde_json::Value> {
    fx.log_lines()
        .into_iter()
        .filter(|l| l["kind"] == "control")
        .collect()
}

#[test]
fn sessions_lists_the_agent_worktree_branch_level_mode_and_counts() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-list") else {
            continue;
        };
        let script = "ls >/dev/null; touch a.txt; echo a=$?";
        let s = fx.start(&["--exec-mode", "safe"], script);
        let (id, _) = fx.next_ask();
        let v = the_session(&fx);
        assert_eq!(format!("{}-1", v["id"].as_str().unwrap()), id, "{who:?}");
        assert_eq!(v["agent"], serde_json::json!(["bash", "-c", script]));
        assert_eq!(v["worktree"], fx.wt.display().to_string());
        assert_eq!(v["branch"], "main");
        assert_eq!(v["autonomy"], "medium");
        assert_eq!(v["exec_mode"], "safe");
        assert_eq!(v["pending"], 1);
        assert_eq!(v["asked"], 1);
        assert_eq!(v["allowed"], 1, "`ls` was green: {v}");
        assert_eq!(v["denied"], 0);
        assert!(v["started_at"].as_str().unwrap().ends_with('Z'), "{v}");
        assert_eq!(v["pid"], s.child.id());
        let (code, text, err) = fx.cli(&["sessions"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            text.contains(&format!(
                "session {}  autonomy medium  mode safe",
                v["id"].as_str().unwrap()
            )) && text.contains("pending 1  allowed 1  asked 1  denied 0")
                && text.contains("(branch main)"),
            "{who:?}: {text}"
        );
        assert_eq!(fx.cli(&["deny", &id]).0, 0);
        let (_, out, _) = s.finish();
        assert!(out.contains("a=126"), "{out}");
        assert!(sessions(&fx).is_empty(), "gone after the end");
        let (_, text, _) = fx.cli(&["sessions"]);
        assert!(text.contains("no live tyba sessions"), "{text}");
    }
}

#[test]
fn autonomy_change_applies_to_the_next_action_is_logged_and_shown_on_the_session() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-level") else {
            continue;
        };
        // Builtins only while waiting: the loops themselves are no actions.
        let script = "touch a.txt; echo a=$?; until [ -e go ]; do :; done; \
                      touch b.txt; echo b=$?; until [ -e go2 ]; do :; done; \
                      touch c.txt; echo c=$?";
        let s = fx.start(&[], script);
        let (id, action) = fx.next_ask();
        assert_eq!(action, "run `touch a.txt`");
        let (code, out, err) = fx.cli(&["autonomy", "high", "--yes"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("autonomy medium -> high"), "{out}");
        assert_eq!(the_session(&fx)["autonomy"], "high");
        // The ask already waiting stays asked.
        assert_eq!(fx.next_ask().0, id, "{who:?}");
        assert_eq!(fx.cli(&["approve", &id]).0, 0);
        wait_file(&fx.wt.join("a.txt"));
        touch(&fx, "go");
        // At high the yellow `touch b.txt` runs without asking.
        wait_file(&fx.wt.join("b.txt"));
        assert!(fx.pending(0).is_empty(), "{who:?}: nothing asked at high");
        let sid = the_session(&fx)["id"].as_str().unwrap().to_string();
        let (code, out, err) = fx.cli(&["autonomy", &sid, "medium"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("autonomy high -> medium"), "{out}");
        touch(&fx, "go2");
        let (id3, action3) = fx.next_ask();
        assert_eq!(
            action3, "run `touch c.txt`",
            "{who:?}: asked again at medium"
        );
        assert_eq!(fx.cli(&["deny", &id3]).0, 0);
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("a=0") && out.contains("b=0") && out.contains("c=126"),
            "{who:?}: {out}"
        );
        // Shown on the session's own terminal (its stderr without a pty).
        assert!(
            err.contains("autonomy medium -> high (by tyba autonomy (pid ")
                && err.contains("autonomy high -> medium (by tyba autonomy (pid "),
            "{who:?}: {err}"
        );
        let c = control_lines(&fx);
        let changes: Vec<&str> = c
            .iter()
            .filter(|l| l["decision"] == "autonomy")
            .map(|l| l["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            changes,
            ["autonomy medium -> high", "autonomy high -> medium"],
            "{who:?}: {c:?}"
        );
        assert!(c.iter().all(|l| l["answered_by"]
            .as_str()
            .unwrap()
            .starts_with("tyba autonomy (pid ")));
    }
}

/// Runs `tyba ARGS` on a pty (`script(1)`), typing `keys`; returns (status, screen).
fn on_pty(fx: &Fx, args: &str, keys: &str) -> (i32, String) {
    let inner = format!("{} {args}", fx.tyba.display());
    let mut c = command_as(&fx.who, std::path::Path::new("/usr/bin/script"));
    c.args(["-qfec", &inner, "/dev/null"])
        .current_dir(&fx.wt)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    // Type once the question is up (script echoes what it reads, so wait on the process).
    std::thread::sleep(Duration::from_millis(700));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(keys.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    (status.code().unwrap_or(-1), reader.join().unwrap())
}

#[test]
fn raising_to_high_asks_on_the_issuing_terminal_and_never_without_it() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-high") else {
            continue;
        };
        let s = fx.start(&[], "touch a.txt; echo a=$?");
        let (id, _) = fx.next_ask();
        let sid = the_session(&fx)["id"].as_str().unwrap().to_string();
        // No terminal, no --yes: refused, nothing changes.
        let (code, _, err) = fx.cli(&["autonomy", &sid, "high"]);
        assert_eq!(code, 2, "{who:?}: {err}");
        assert!(err.contains("needs confirmation on a terminal"), "{err}");
        assert_eq!(the_session(&fx)["autonomy"], "medium");
        // On a terminal, declining keeps the level.
        let (code, screen) = on_pty(&fx, &format!("autonomy {sid} high"), "n\r");
        assert_eq!(code, 1, "{who:?}: {screen}");
        assert!(
            screen.contains("raise session") && screen.contains("[y/N]"),
            "{screen}"
        );
        assert!(screen.contains("not confirmed"), "{screen}");
        assert_eq!(the_session(&fx)["autonomy"], "medium");
        // Confirming raises it.
        let (code, screen) = on_pty(&fx, &format!("autonomy {sid} high"), "y\r");
        assert_eq!(code, 0, "{who:?}: {screen}");
        assert!(screen.contains("autonomy medium -> high"), "{screen}");
        assert_eq!(the_session(&fx)["autonomy"], "high");
        // A client that skips the confirmation is refused by the session itself.
        use std::io::BufRead;
        if who == Who::Me {
            assert_eq!(fx.cli(&["autonomy", &sid, "low"]).0, 0);
            let sock = fx.runtime.join("tyba").join(format!("{sid}.sock"));
            let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
            c.write_all(b"{\"op\":\"set_autonomy\",\"level\":\"high\"}\n")
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(c).read_line(&mut line).unwrap();
            assert!(
                line.contains("\"ok\":false") && line.contains("confirmation"),
                "{line}"
            );
            assert_eq!(the_session(&fx)["autonomy"], "low");
        }
        assert_eq!(fx.cli(&["deny", &id]).0, 0);
        let _ = s.finish();
        let c = control_lines(&fx);
        let changes: Vec<&str> = c
            .iter()
            .filter(|l| l["decision"] == "autonomy")
            .map(|l| l["action"].as_str().unwrap())
            .collect();
        assert_eq!(changes[0], "autonomy medium -> high", "{who:?}: {c:?}");
        if who == Who::Me {
            assert!(
                c.iter()
                    .any(|l| l["decision"] == "refuse" && l["action"] == "autonomy low -> high"),
                "the unconfirmed raise is logged as refused: {c:?}"
            );
        }
    }
}

#[test]
fn stop_denies_the_pending_asks_ends_the_agent_and_keeps_the_worktree() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-stop") else {
            continue;
        };
        // An agent that ignores SIGTERM is still ended (after the grace period).
        let s = fx.start(
            &[],
            "trap '' TERM; echo kept > kept.txt; touch never.txt; echo after=$?; \
             until [ -e never ]; do :; done",
        );
        let (id, _) = fx.next_ask();
        let started = Instant::now();
        let (code, out, err) = fx.cli(&["stop"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("stopped; 1 pending ask denied")
                && out.contains(&format!("worktree: {}", fx.wt.display()))
                && out.contains("the agent's processes have ended"),
            "{who:?}: {out}"
        );
        let (_, sout, serr) = s.finish();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{who:?}: ended in {:?}",
            started.elapsed()
        );
        assert!(!sout.contains("after=0"), "{who:?}: {sout}");
        assert!(
            serr.contains("stopped by tyba stop (pid "),
            "{who:?}: {serr}"
        );
        assert!(!fx.wt.join("never.txt").exists());
        assert_eq!(
            std::fs::read_to_string(fx.wt.join("kept.txt")).unwrap(),
            "kept\n"
        );
        // No process is left in the worktree.
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c == fx.wt))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "{who:?}: left running: {left:?}");
        let log = fx.log_lines();
        let ask = log.iter().find(|l| l["id"] == id).unwrap();
        assert_eq!(ask["answer"], "deny", "{log:?}");
        assert!(
            ask["reason"]
                .as_str()
                .unwrap()
                .contains("stopped by the person"),
            "{ask}"
        );
        assert!(
            log.iter().any(|l| l["kind"] == "control"
                && l["decision"] == "stop"
                && l["answered_by"]
                    .as_str()
                    .unwrap()
                    .starts_with("tyba stop (pid ")),
            "{log:?}"
        );
        let (code, _, err) = fx.cli(&["stop"]);
        assert_eq!(code, 1, "nothing left to stop: {err}");
    }
}

#[test]
fn bad_input_gets_a_clear_error_and_a_documented_exit_code() {
    let Some(fx) = setup(&Who::Me, "sess-bad") else {
        return;
    };
    let cases: &[(&[&str], i32, &str)] = &[
        (&["autonomy", "low"], 1, "no live tyba session"),
        (&["stop"], 1, "no live tyba session"),
        (&["autonomy", "loud"], 2, "unknown autonomy level `loud`"),
        (&["autonomy", "abc", "loud"], 2, "unknown autonomy level"),
        (&["stop", "../x"], 2, "is not a session id"),
        (&["autonomy", "a/b", "low"], 2, "is not a session id"),
        (&["stop", "0123456789ab"], 1, "is not running"),
        (&["autonomy"], 2, "LEVEL"),
    ];
    let mut checks = Checks::default();
    for (args, want, text) in cases {
        let (code, _, err) = fx.cli(args);
        checks.check(
            code == *want && err.contains(text) && !err.contains("panicked"),
            format!("{args:?}: exit {code}, want {want} with {text:?}: {err}"),
        );
    }
    // A dead socket (its supervisor was killed): not running, and cleared.
    let dir = fx.runtime.join("tyba");
    std::fs::create_dir_all(&dir).unwrap();
    let dead = dir.join("deadbeef0000.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let (code, _, err) = fx.cli(&["autonomy", "deadbeef0000", "low"]);
    checks.check(
        code == 1 && err.contains("is not running"),
        format!("dead socket: {code} {err}"),
    );
    checks.check(!dead.exists(), "the dead socket is removed");
    // A socket nobody listens on while its session's lock is held (here by flock(1)): the
    // supervisor lives, so nothing of it is removed, and the listing says so. Once the lock
    // is free (the holder died), the next listing removes the socket and the lock.
    let held_sock = dir.join("10cced000000.sock");
    let held_lock = dir.join("10cced000000.lock");
    let lone_lock = dir.join("10cced000001.lock");
    drop(std::os::unix::net::UnixListener::bind(&held_sock).unwrap());
    std::fs::write(&held_lock, "").unwrap();
    std::fs::write(&lone_lock, "").unwrap();
    let holders: Vec<std::process::Child> = [&held_lock, &lone_lock]
        .iter()
        .map(|l| {
            let mut c = std::process::Command::new("flock")
                // -o: the lock stays with flock itself, not with the command it runs.
                .args(["-n", "-o"])
                .arg(l)
                // The command ends when the test closes its stdin.
                .args(["-c", "echo locked; exec cat"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(c.stdout.take().unwrap()),
                &mut line,
            )
            .unwrap();
            assert_eq!(line, "locked\n");
            c
        })
        .collect();
    for args in [
        &["sessions"][..],
        &["inbox"][..],
        &["stop", "10cced000000"][..],
    ] {
        let (code, _, err) = fx.cli(args);
        checks.check(
            held_sock.exists() && held_lock.exists() && lone_lock.exists(),
            format!(
                "{args:?}: the files of a session whose lock is held were touched: {code} {err}"
            ),
        );
        if args[0] != "stop" {
            checks.check(
                err.contains("session 10cced000000 did not answer")
                    && err.contains("still holds the session's lock"),
                format!("{args:?}: a held lock is reported: {err}"),
            );
        }
    }
    for mut h in holders {
        let _ = h.kill();
        let _ = h.wait();
        drop(h.stdin.take());
    }
    let (code, out, err) = fx.cli(&["sessions", "--json"]);
    checks.check(
        code == 0 && out.trim() == "[]" && err.is_empty(),
        format!("after the holder died: {code} {out} {err}"),
    );
    checks.check(
        !held_sock.exists() && !held_lock.exists() && !lone_lock.exists(),
        "a session proved dead has its socket and lock removed, and a lone free lock too",
    );
    // Two live sessions and none named: ambiguous, nothing changed.
    let a = fx.start(&[], "touch a.txt; echo a=$?");
    let b = fx.start(&[], "touch b.txt; echo b=$?");
    let deadline = Instant::now() + Duration::from_secs(60);
    while sessions(&fx).len() < 2 {
        if Instant::now() > deadline {
            panic!("never two sessions: {:?} {:?}", a.finish(), b.finish());
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let (code, _, err) = fx.cli(&["autonomy", "low"]);
    checks.check(
        code == 2 && err.contains("2 live sessions") && err.contains("name one"),
        format!("ambiguous: {code} {err}"),
    );
    let (code, _, err) = fx.cli(&["stop"]);
    checks.check(code == 2, format!("ambiguous stop: {code} {err}"));
    let levels: Vec<String> = sessions(&fx)
        .iter()
        .map(|s| s["autonomy"].as_str().unwrap().to_string())
        .collect();
    checks.check(levels == ["medium", "medium"], format!("{levels:?}"));
    for s in sessions(&fx) {
        let (code, _, err) = fx.cli(&["stop", s["id"].as_str().unwrap()]);
        checks.check(code == 0, format!("stop by id: {err}"));
    }
    let _ = (a.finish(), b.finish());
    checks.finish("bad input");
}

/// The script a hostile agent runs: every way in it has at the controls. `./tyba-in` is a copy
/// of the tyba binary in the worktree; `sup.pid` holds the supervisor's pid (the test writes
/// it: a process in the sandbox has no way to learn it).
const INSIDE: &str = r#"
until [ -e sup.pid ]; do :; done
read SUP < sup.pid
SOCK="$XDG_RUNTIME_DIR/tyba/$TYBA_SESSION.sock"
./tyba-in autonomy high --yes >/dev/null 2>&1; echo autonomy-unnamed=$?
./tyba-in autonomy "$TYBA_SESSION" high --yes >/dev/null 2>&1; echo autonomy=$?
./tyba-in approve "$TYBA_SESSION-1" >/dev/null 2>&1; echo approve=$?
./tyba-in stop "$TYBA_SESSION" >/dev/null 2>&1; echo stop=$?
./tyba-in sessions >/dev/null 2>&1; echo sessions=$?
printf '{"op":"stop"}\n' > "$SOCK" 2>/dev/null; echo write=$?
python3 - "$SOCK" "$TYBA_SESSION_SOCKET" <<'PY' 2>&1
import socket, sys
def talk(path, lines):
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
    except OSError as e:
        return "connect-failed %d" % e.errno
    out = []
    f = c.makefile("rb")
    for l in lines:
        c.sendall(l + b"\n")
        out.append(f.readline().decode().strip())
    return " | ".join(out)
print("person:", talk(sys.argv[1], [b'{"op":"set_autonomy","level":"high","confirm_high":true}']))
print("hook:", talk(sys.argv[2], [
    b'{"op":"set_autonomy","level":"high","confirm_high":true}',
    b'{"op":"stop"}',
    b'{"op":"answer","id":"x-1","answer":"once"}',
    b'{"op":"autonomy"}',
]))
PY
kill -TERM "$SUP" 2>/dev/null; echo kill-sup=$?
kill -KILL 1 2>/dev/null; echo kill-init=$?
kill -TERM "$PPID" 2>/dev/null; echo kill-parent=$?
echo still-alive
: > ready
until [ -e fin ]; do :; done
echo done
"#;

#[test]
fn controls_are_unreachable_from_inside_the_sandbox_and_attempts_are_logged() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-inside") else {
            continue;
        };
        let inside = fx.wt.join("tyba-in");
        copy_exe(&fx.tyba, &inside);
        give(&inside, &fx.who);
        let mut s = fx.start(&[], INSIDE);
        let sid = the_session(&fx)["id"].as_str().unwrap().to_string();
        std::fs::write(fx.wt.join("sup.pid"), format!("{}\n", s.child.id())).unwrap();
        give(&fx.wt.join("sup.pid"), &fx.who);
        // The person approves every command the agent runs (`./tyba-in`, `python3`): the worst
        // case, where only the controls' own protection is left.
        let deadline = Instant::now() + Duration::from_secs(90);
        while !fx.wt.join("ready").exists() {
            let (_, j, _) = fx.cli(&["inbox", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&j).unwrap();
            for sess in v.as_array().unwrap() {
                for p in sess["pending"].as_array().cloned().unwrap_or_default() {
                    let _ = fx.cli(&["approve", p["id"].as_str().unwrap()]);
                }
            }
            assert!(
                s.child.try_wait().unwrap().is_none(),
                "{who:?}: the session ended early"
            );
            assert!(
                Instant::now() < deadline,
                "{who:?}: the script never got through"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Checked from outside, while the session still lives: nothing changed.
        let v = the_session(&fx);
        assert_eq!(v["autonomy"], "medium", "{who:?}: {v}");
        assert!(v.get("stopped_by").is_none(), "{who:?}: {v}");
        touch(&fx, "fin");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for want in [
            "autonomy-unnamed=1",
            "autonomy=1",
            "approve=1",
            "stop=1",
            "sessions=1",
            "write=1",
            "person: connect-failed 13",
            "still-alive",
            "done",
        ] {
            assert!(out.contains(want), "{who:?}: no {want:?} in {out}");
        }
        let hook = out.lines().find(|l| l.starts_with("hook:")).unwrap();
        assert_eq!(
            hook.matches("the hook socket only takes asks").count(),
            3,
            "{who:?}: set_autonomy, stop and answer refused: {hook}"
        );
        assert!(
            hook.ends_with(r#"{"ok":true,"autonomy":"medium"}"#),
            "{who:?}: the level is readable, not writable: {hook}"
        );
        // The supervisor's pid does not exist in the sandbox's PID namespace (ESRCH), and its
        // PID 1 ignores signals from inside: the session went on.
        assert!(out.contains("kill-sup=1"), "{who:?}: {out}");
        let log = fx.log_lines();
        let sock = fx.runtime.join("tyba").join(format!("{sid}.sock"));
        let connects = log
            .iter()
            .filter(|l| {
                l["kind"] == "connect"
                    && l["decision"] == "refuse"
                    && l["action"] == sock.display().to_string()
                    && l["reason"]
                        .as_str()
                        .unwrap()
                        .contains("approval sockets are not reachable")
            })
            .count();
        assert_eq!(
            connects, 4,
            "{who:?}: autonomy, approve and stop by name, and python's connect: {log:?}"
        );
        let refused: Vec<&str> = log
            .iter()
            .filter(|l| l["kind"] == "control" && l["decision"] == "refuse")
            .map(|l| l["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            refused,
            ["set autonomy high", "stop", "answer x-1 once"],
            "{who:?}: {log:?}"
        );
        assert!(
            !log.iter()
                .any(|l| l["decision"] == "autonomy" || l["decision"] == "stop"),
            "{who:?}: no control was carried out: {log:?}"
        );
        assert!(
            err.contains("refused `set autonomy high` from a process of the sandbox"),
            "{who:?}: shown on the session's terminal: {err}"
        );
    }
}

#[test]
fn hooks_inside_a_session_decide_at_its_live_level() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-hook") else {
            continue;
        };
        let inside = fx.wt.join("tyba-in");
        copy_exe(&fx.tyba, &inside);
        give(&inside, &fx.who);
        let input = format!(
            r#"{{"cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"touch x.txt"}}}}"#,
            fx.wt.display()
        );
        std::fs::write(fx.wt.join("in.json"), input).unwrap();
        give(&fx.wt.join("in.json"), &fx.who);
        let s = fx.start(
            &["--autonomy", "high"],
            "./tyba-in hook claude-code < in.json > h1.json; echo h1=$?; \
             until [ -e go ]; do :; done; \
             ./tyba-in hook claude-code < in.json > h2.json; echo h2=$?",
        );
        // At high the hook allows the yellow command without asking.
        wait_file(&fx.wt.join("h1.json"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(fx.wt.join("h1.json"))
            .unwrap()
            .contains('}')
        {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        let h1 = std::fs::read_to_string(fx.wt.join("h1.json")).unwrap();
        assert!(
            h1.contains(r#""permissionDecision":"allow""#),
            "{who:?}: {h1}"
        );
        assert!(fx.pending(0).is_empty());
        assert_eq!(fx.cli(&["autonomy", "medium"]).0, 0);
        touch(&fx, "go");
        // At medium, running ./tyba-in is asked, then the hook asks for `touch x.txt`.
        let (id, action) = fx.next_ask();
        assert!(action.contains("tyba-in hook"), "{who:?}: {action}");
        assert_eq!(fx.cli(&["approve", &id]).0, 0);
        let p = fx.pending(1);
        assert_eq!(p[0]["kind"], "hook", "{who:?}: {p:?}");
        assert!(p[0]["action"].as_str().unwrap().contains("touch x.txt"));
        assert_eq!(
            fx.cli(&["deny", p[0]["id"].as_str().unwrap(), "--reason", "not now"])
                .0,
            0
        );
        let (_, out, err) = s.finish();
        assert!(out.contains("h2=0"), "{who:?}: {out} / {err}");
        let h2 = std::fs::read_to_string(fx.wt.join("h2.json")).unwrap();
        assert!(
            h2.contains(r#""permissionDecision":"deny""#) && h2.contains("not now"),
            "{who:?}: {h2}"
        );
    }
}

#[test]
fn a_session_that_does_not_answer_is_reported_not_hidden() {
    let Some(fx) = setup(&Who::Me, "sess-silent") else {
        return;
    };
    let dir = fx.runtime.join("tyba");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // A listener that accepts and never answers: a stuck supervisor.
    let l = std::os::unix::net::UnixListener::bind(dir.join("5111e47abc12.sock")).unwrap();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in l.incoming().take(2) {
            conns.push(c);
        }
        std::thread::sleep(Duration::from_secs(8));
        drop(conns);
    });
    for args in [&["sessions"][..], &["inbox"][..]] {
        let (code, out, err) = fx.cli(args);
        assert_eq!(code, 0, "{args:?}: {out} / {err}");
        assert!(
            err.contains("session 5111e47abc12 did not answer")
                && err.contains("tyba stop 5111e47abc12"),
            "{args:?}: a silent session is reported: {out} / {err}"
        );
    }
    drop(held);
}

#[test]
fn a_non_interactive_session_is_listed_stopped_and_logged_its_asks_denied_at_once() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-nonint") else {
            continue;
        };
        let inside = fx.wt.join("tyba-in");
        copy_exe(&fx.tyba, &inside);
        give(&inside, &fx.who);
        let input = format!(
            r#"{{"cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"touch ../hooked.txt"}}}}"#,
            fx.wt.display()
        );
        std::fs::write(fx.wt.join("in.json"), input).unwrap();
        give(&fx.wt.join("in.json"), &fx.who);
        let go = fx.wt.join("go");
        let st = std::process::Command::new("mkfifo")
            .arg(&go)
            .status()
            .unwrap();
        assert!(st.success());
        give(&go, &fx.who);
        // At high `./tyba-in` (yellow) runs without asking; the red asks meet nobody. The
        // agent then waits on a FIFO nobody opens: only `tyba stop` ends it.
        let s = fx.start(
            &["--non-interactive", "--autonomy", "high"],
            "./tyba-in hook claude-code < in.json > h.json; echo h=$?; \
             touch ../outside.txt; echo t=$?; : > ready; read x < go; echo after",
        );
        wait_file(&fx.wt.join("ready"));
        let v = the_session(&fx);
        assert_eq!(v["non_interactive"], true, "{who:?}: {v}");
        assert_eq!(v["pending"], 0, "{who:?}: asks do not wait: {v}");
        assert_eq!(
            (&v["asked"], &v["denied"]),
            (&serde_json::json!(2), &serde_json::json!(2)),
            "{who:?}: the hook's ask and the sandbox's, both denied: {v}"
        );
        assert_eq!(v["pid"], s.child.id());
        let sid = v["id"].as_str().unwrap().to_string();
        let (code, text, err) = fx.cli(&["sessions"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            text.contains(&format!("session {sid}  non-interactive  autonomy high")),
            "{who:?}: {text}"
        );
        let (code, text, err) = fx.cli(&["inbox"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            text.contains("non-interactive: asks are denied at once")
                && text.contains("no pending asks"),
            "{who:?}: {text}"
        );
        let (code, out, err) = fx.cli(&["stop"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains(&format!("session {sid}: stopped; 0 pending asks denied"))
                && out.contains("the agent's processes have ended"),
            "{who:?}: {out}"
        );
        let (_, sout, serr) = s.finish();
        assert!(
            sout.contains("h=0") && sout.contains("t=126") && !sout.contains("after"),
            "{who:?}: {sout} / {serr}"
        );
        assert!(
            serr.contains("stopped by tyba stop (pid "),
            "{who:?}: {serr}"
        );
        assert!(sessions(&fx).is_empty(), "{who:?}: gone after the stop");
        assert!(!fx.wt.join("../outside.txt").exists());
        let h = std::fs::read_to_string(fx.wt.join("h.json")).unwrap();
        assert!(
            h.contains(r#""permissionDecision":"deny""#)
                && h.contains("non-interactive session: asks are denied"),
            "{who:?}: {h}"
        );
        // The same audit log as any session: both asks, answered by nobody, and the stop.
        let log = fx.log_lines();
        let asks: Vec<(&str, &str)> = log
            .iter()
            .filter(|l| l["decision"] == "ask")
            .map(|l| (l["kind"].as_str().unwrap(), l["action"].as_str().unwrap()))
            .collect();
        assert_eq!(asks.len(), 2, "{who:?}: {log:?}");
        assert!(
            asks[0].0 == "hook" && asks[0].1.contains("touch ../hooked.txt"),
            "{who:?}: {asks:?}"
        );
        assert_eq!(
            asks[1],
            ("command", "run `touch ../outside.txt`"),
            "{who:?}"
        );
        for l in log.iter().filter(|l| l["decision"] == "ask") {
            assert_eq!(l["answer"], "deny", "{l}");
            assert_eq!(l["answered_by"], "nobody (non-interactive session)", "{l}");
            assert_eq!(l["wait_ms"], 0, "{l}");
            assert!(
                l["reason"]
                    .as_str()
                    .unwrap()
                    .ends_with("(non-interactive session: asks are denied)"),
                "{l}"
            );
        }
        assert!(
            !log.iter()
                .any(|l| l["decision"] == "refuse" && l["action"] == "touch ../outside.txt"),
            "{who:?}: the denied ask is logged once: {log:?}"
        );
        assert!(
            log.iter().any(|l| l["kind"] == "control"
                && l["decision"] == "stop"
                && l["answered_by"]
                    .as_str()
                    .unwrap()
                    .starts_with("tyba stop (pid ")),
            "{who:?}: {log:?}"
        );
        assert!(
            std::fs::read_dir(fx.runtime.join("tyba"))
                .unwrap()
                .next()
                .is_none(),
            "{who:?}: its socket and lock are gone"
        );
    }
}

/// In a session without outside files (`--outside-files off`), an edit-tool write outside the
/// worktree is refused by the hook at once with why (the kernel would refuse it after any
/// approval), with no ask; the same write inside the worktree (the control) is allowed at
/// high. With them (the default, where /dev/fuse opens) the hook asks instead:
/// `tests/ask_outside_files.rs`.
#[test]
fn a_hook_write_outside_the_worktree_is_refused_at_once_not_asked() {
    for who in whos() {
        let Some(fx) = setup(&who, "sess-hook-out") else {
            continue;
        };
        let inside = fx.wt.join("tyba-in");
        copy_exe(&fx.tyba, &inside);
        give(&inside, &fx.who);
        // `l/../x` is `side/../x` to the kernel (the link first, then `..`): beside the
        // worktree, not `x` in it.
        let side = fx.wt.parent().unwrap().join("side/deeper");
        std::fs::create_dir_all(&side).unwrap();
        std::os::unix::fs::symlink(&side, fx.wt.join("l")).unwrap();
        for (name, path) in [
            ("out.json", "../outside.txt".to_string()),
            ("out2.json", "l/../outside2.txt".to_string()),
            ("in.json", "notes.txt".to_string()),
        ] {
            let input = format!(
                r#"{{"cwd":"{}","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{{"file_path":"{path}","content":"x"}}}}"#,
                fx.wt.display()
            );
            std::fs::write(fx.wt.join(name), input).unwrap();
            give(&fx.wt.join(name), &fx.who);
        }
        let s = fx.start(
            &["--autonomy", "high", "--outside-files", "off"],
            "./tyba-in hook claude-code < out.json > h-out.json; ./tyba-in hook claude-code < out2.json > h-out2.json; ./tyba-in hook claude-code < in.json > h-in.json; echo done=$?",
        );
        let (_, out, err) = s.finish();
        assert!(out.contains("done=0"), "{who:?}: {out} / {err}");
        let h = std::fs::read_to_string(fx.wt.join("h-out.json")).unwrap();
        assert!(
            h.contains(r#""permissionDecision":"deny""#)
                && h.contains("outside the session's worktree"),
            "{who:?}: {h}"
        );
        let h = std::fs::read_to_string(fx.wt.join("h-out2.json")).unwrap();
        assert!(
            h.contains(r#""permissionDecision":"deny""#)
                && h.contains("outside the session's worktree"),
            "{who:?}: {h}"
        );
        let h = std::fs::read_to_string(fx.wt.join("h-in.json")).unwrap();
        assert!(
            h.contains(r#""permissionDecision":"allow""#),
            "{who:?}: {h}"
        );
        assert!(fx.pending(0).is_empty(), "{who:?}");
    }
}
