//! Asking end to end (issue 5): a real `tyba run --here -- bash -c '…'` whose asks a scripted
//! person answers through `tyba inbox/approve/deny`, as the test's user and as the
//! unprivileged `TYBA_TEST_USER`. Checked from outside: what the agent saw, what happened to
//! the files, what the audit log says.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::time::Duration;

#[test]
fn ask_once_lets_exactly_that_access_through_and_the_same_red_asks_again() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-once") else {
            continue;
        };
        let s = fx.start(
            &[],
            "cat /etc/hostname >/dev/null; echo first=$?; cat /etc/hostname >/dev/null; echo second=$?",
        );
        let (id, action) = fx.next_ask();
        assert!(action.contains("cat /etc/hostname"), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        // The identical red read asks again: `once` is once.
        let p = fx.pending(1);
        let id2 = p[0]["id"].as_str().unwrap().to_string();
        assert_ne!(id, id2, "{who:?}");
        assert_eq!(p[0]["verdict"], "red");
        assert_eq!(p[0]["always_allowed"], false);
        let (code, _, err) = fx.cli(&["deny", &id2]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("first=0") && out.contains("second=126"),
            "{who:?}: {out} / {err}"
        );
        let log = fx.log_lines();
        let answers: Vec<&str> = log.iter().filter_map(|l| l["answer"].as_str()).collect();
        assert_eq!(answers, ["once", "deny"], "{who:?}: {log:?}");
    }
}

#[test]
fn ask_always_allows_the_exact_string_only() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-always") else {
            continue;
        };
        let s = fx.start(
            &[],
            "touch a.txt; echo one=$?; touch a.txt; echo two=$?; touch ./a.txt; echo three=$?",
        );
        let (id, action) = fx.next_ask();
        assert_eq!(action, "run `touch a.txt`", "{who:?}");
        let (code, out, err) = fx.cli(&["approve", &id, "--always"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("rest of the session"), "{out}");
        // `touch ./a.txt` is another string: asked.
        let (id2, action2) = fx.next_ask();
        assert_eq!(action2, "run `touch ./a.txt`", "{who:?}");
        let (code, _, err) = fx.cli(&["deny", &id2, "--reason", "one space is enough"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("one=0") && out.contains("two=0") && out.contains("three=126"),
            "{who:?}: {out} / {err}"
        );
        assert!(err.contains("tyba: one space is enough"), "{who:?}: {err}");
    }
}

#[test]
fn ask_red_always_is_refused_with_a_reason() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-red") else {
            continue;
        };
        let s = fx.start(&[], "rm -rf build; echo rm=$?");
        let (id, _) = fx.next_ask();
        let (code, _, err) = fx.cli(&["approve", &id, "--always"]);
        assert_eq!(code, 1, "{who:?}: {err}");
        assert!(
            err.contains("`always` is refused") && err.contains("red"),
            "{who:?}: {err}"
        );
        // Still pending, and answerable.
        assert_eq!(fx.next_ask().0, id);
        let (code, _, err) = fx.cli(&["deny", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (_, out, err) = s.finish();
        assert!(out.contains("rm=126"), "{who:?}: {out} / {err}");
        assert!(err.contains("denied by the person"), "{who:?}: {err}");
    }
}

#[test]
fn ask_deny_reason_reaches_the_agent_and_the_log() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-deny") else {
            continue;
        };
        let s = fx.start(&[], "touch x.txt; echo rc=$?");
        let (id, _) = fx.next_ask();
        let (code, _, err) = fx.cli(&["deny", &id, "--reason", "use the make target"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (_, out, err) = s.finish();
        assert!(out.contains("rc=126"), "{who:?}: {out}");
        assert!(err.contains("tyba: use the make target"), "{who:?}: {err}");
        assert!(!fx.wt.join("x.txt").exists());
        let log = fx.log_lines();
        let l = log.iter().find(|l| l["decision"] == "ask").unwrap();
        assert_eq!(l["decision"], "ask", "{l}");
        assert_eq!(l["answer"], "deny");
        assert_eq!(l["reason"], "use the make target");
        assert_eq!(l["verdict"], "yellow");
        assert_eq!(l["kind"], "command");
        assert!(l["answered_by"].as_str().unwrap().starts_with("inbox"));
        assert!(l["wait_ms"].as_u64().is_some() && l["time"].as_str().is_some());
        // Never a rule to reload: the log holds answers only.
        assert!(!serde_json::to_string(&log).unwrap().contains("\"rule\""));
    }
}

#[test]
fn ask_many_pending_answered_in_any_order_only_the_asker_blocks() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-many") else {
            continue;
        };
        // Two asks from two background processes; a third process keeps working.
        let s = fx.start(
            &[],
            "(touch a.txt; echo a=$? >> res) & (touch b.txt; echo b=$? >> res) & \
             for i in 1 2 3 4 5; do echo tick >> ticks; done; wait; cat res",
        );
        let p = fx.pending(2);
        // The agent's own loop finishes while both asks wait.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let ticks = loop {
            let t = std::fs::read_to_string(fx.wt.join("ticks")).unwrap_or_default();
            if t.lines().count() >= 5 || std::time::Instant::now() > deadline {
                break t;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(fx.pending(2).len(), 2, "{who:?}: both still wait");
        let find = |f: &str| {
            p.iter()
                .find(|x| x["action"].as_str().unwrap().contains(f))
                .map(|x| x["id"].as_str().unwrap().to_string())
                .unwrap()
        };
        let (a, b) = (find("a.txt"), find("b.txt"));
        // The later one first.
        assert_eq!(fx.cli(&["deny", &b]).0, 0);
        assert_eq!(fx.cli(&["approve", &a]).0, 0);
        let (_, out, err) = s.finish();
        assert!(
            out.contains("a=0") && out.contains("b=126"),
            "{who:?}: {out} / {err}"
        );
        assert_eq!(
            ticks.lines().count(),
            5,
            "{who:?}: the rest of the session went on while two asks waited"
        );
    }
}

#[test]
fn ask_session_end_denies_what_is_pending_and_logs_it() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-end") else {
            continue;
        };
        // The agent exits while its background command waits for an answer.
        let s = fx.start(&[], "touch late.txt & while [ $SECONDS -lt 2 ]; do :; done");
        let _ = fx.next_ask();
        let (code, _, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(!fx.wt.join("late.txt").exists());
        let log = fx.log_lines();
        let asks: Vec<_> = log.iter().filter(|l| l["decision"] == "ask").collect();
        assert_eq!(asks.len(), 1, "{who:?}: {log:?}");
        assert_eq!(asks[0]["answer"], "deny", "{log:?}");
        // Nobody can answer it any more.
        let (_, out, _) = fx.cli(&["inbox"]);
        assert!(out.contains("no live tyba sessions"), "{out}");
    }
}

#[test]
fn ask_killed_supervisor_takes_the_agent_down_and_its_socket_is_cleared() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-kill") else {
            continue;
        };
        let s = fx.start(&[], "touch never.txt; echo never");
        let _ = fx.next_ask();
        let sup = s.child.id();
        kill(sup, "KILL");
        let _ = s.finish();
        // No process is left in the worktree (the agent's bash and its waiting `touch`).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left: Vec<String> = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c == fx.wt))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{who:?}: processes outlived their supervisor: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!fx.wt.join("never.txt").exists());
        let (_, out, _) = fx.cli(&["inbox"]);
        assert!(out.contains("no live tyba sessions"), "{who:?}: {out}");
    }
}

#[test]
fn ask_broken_channel_is_never_a_permission() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let Some(fx) = setup(&Who::Me, "ask-broken") else {
        return;
    };
    let s = fx.start(&[], "touch z.txt; echo rc=$?");
    let (id, _) = fx.next_ask();
    let dir = fx.runtime.join("tyba");
    let sock = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .unwrap();
    // Garbage, a half-written request, a peer that hangs up mid-line.
    for junk in [
        &b"{not json\n"[..],
        b"{\"op\":\"answer\",\"id\":",
        b"\xff\xfe\n",
    ] {
        let mut c = UnixStream::connect(&sock).unwrap();
        let _ = c.write_all(junk);
        drop(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(fx.next_ask().0, id, "still pending, not allowed");
    assert!(!fx.wt.join("z.txt").exists());
    assert_eq!(fx.cli(&["deny", &id]).0, 0);
    let (_, out, _) = s.finish();
    assert!(out.contains("rc=126"), "{out}");
}

#[test]
fn ask_socket_is_private_and_unreachable_from_inside_the_sandbox() {
    for who in whos() {
        let Some(fx) = setup(&who, "ask-reach") else {
            continue;
        };
        // A process in the sandbox knows its session id (TYBA_SESSION), so the socket's path,
        // and tries to connect to list and answer its own asks.
        let script = r#"
ls "$XDG_RUNTIME_DIR/tyba" >/dev/null 2>&1; echo list=$?
ln -s "$XDG_RUNTIME_DIR/tyba/$TYBA_SESSION.sock" via-link.sock
for s in "$XDG_RUNTIME_DIR/tyba/$TYBA_SESSION.sock" via-link.sock; do
  python3 - "$s" <<'PY' 2>&1 || true
import socket, sys
try:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    c.sendall(b'{"op":"list"}\n')
    print("CONNECTED", c.recv(4096))
except OSError as e:
    print("connect-failed", e.errno)
PY
done
echo done"#;
        let s = fx.start(&["--autonomy", "high"], script);
        // python3 and ls are yellow/red: at high autonomy yellow passes; the out-of-tree
        // path makes `ls` red, answered once so the probe goes as far as it can.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut s = Some(s);
        let (code, out, err) = loop {
            let (_, j, _) = fx.cli(&["inbox", "--json"]);
            let v: serde_json::Value = serde_json::from_str(&j).unwrap();
            for sess in v.as_array().unwrap() {
                for p in sess["pending"].as_array().cloned().unwrap_or_default() {
                    let _ = fx.cli(&["approve", p["id"].as_str().unwrap()]);
                }
            }
            let done = s.as_mut().unwrap().child.try_wait().unwrap().is_some();
            if done || std::time::Instant::now() > deadline {
                break s.take().unwrap().finish();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("done"), "{who:?}: {out} / {err}");
        assert!(
            !out.contains("CONNECTED"),
            "{who:?}: reached the socket: {out}"
        );
        assert_eq!(
            out.matches("connect-failed 13").count(),
            2,
            "{who:?}: EACCES, by path and through a symlink in the worktree: {out}"
        );
        assert!(
            err.contains("approval sockets are not reachable from the sandbox"),
            "{who:?}: refused by the notify loop, not asked: {err}"
        );
        // Checked from outside: the directory and socket modes.
        use std::os::unix::fs::PermissionsExt;
        let dir = fx.runtime.join("tyba");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{who:?}");
    }
}

#[test]
fn ask_socket_mode_is_0600_while_the_session_lives() {
    use std::os::unix::fs::PermissionsExt;
    let Some(fx) = setup(&Who::Me, "ask-mode") else {
        return;
    };
    let s = fx.start(&[], "touch m.txt; echo m");
    let (id, _) = fx.next_ask();
    let sock = fx
        .runtime
        .join("tyba")
        .join(format!("{}.sock", id.rsplit_once('-').unwrap().0));
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(fx.cli(&["deny", &id]).0, 0);
    let _ = s.finish();
    assert!(!sock.exists(), "removed at the end");
}

#[test]
fn ask_non_interactive_denies_at_once_and_is_listed_while_it_runs() {
    let Some(fx) = setup(&Who::Me, "ask-nonint") else {
        return;
    };
    let s = fx.start(
        &["--non-interactive"],
        "touch n.txt; echo rc=$?; : > ready; until [ -e go ]; do :; done",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !fx.wt.join("ready").exists() {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, out, err) = fx.cli(&["inbox", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["session"]["non_interactive"], true, "{v}");
    assert_eq!(v[0]["pending"], serde_json::json!([]), "nothing waits: {v}");
    std::fs::write(fx.wt.join("go"), "").unwrap();
    let (_, out, err) = s.finish();
    assert!(out.contains("rc=126"), "{out} / {err}");
    assert!(err.contains("non-interactive"), "{err}");
    let (_, out, _) = fx.cli(&["inbox"]);
    assert!(out.contains("no live tyba sessions"), "{out}");
}

#[test]
fn ask_inbox_text_and_log_carry_no_control_characters_from_the_agent() {
    let Some(fx) = setup(&Who::Me, "ask-esc") else {
        return;
    };
    let s = fx.start(&[], "touch $'\\e]2;pwned\\a\\e[2Jx.txt'; echo rc=$?");
    let (id, _) = fx.next_ask();
    let (code, out, _) = fx.cli(&["inbox"]);
    assert_eq!(code, 0);
    assert!(out.contains(&id), "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
    assert_eq!(fx.cli(&["deny", &id]).0, 0);
    let _ = s.finish();
    let (_, log, _) = fx.cli(&["log"]);
    assert!(log.contains("deny"), "{log}");
    assert!(!log.contains('\x1b') && !log.contains('\x07'), "{log:?}");
}

#[test]
fn ask_inbox_watch_prints_each_change() {
    use std::io::BufRead;
    let Some(fx) = setup(&Who::Me, "ask-watch") else {
        return;
    };
    let mut c = command_as(&fx.who, &fx.tyba);
    c.args(["inbox", "--watch", "--json"])
        .current_dir(&fx.wt)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let mut watch = c.spawn().unwrap();
    let mut lines = std::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "[]", "no session yet");
    let s = fx.start(&[], "touch w.txt; echo rc=$?");
    let mut id = None;
    for l in lines.by_ref() {
        let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
        if let Some(p) = v[0]["pending"].as_array().and_then(|p| p.first()) {
            id = Some(p["id"].as_str().unwrap().to_string());
            break;
        }
    }
    let id = id.unwrap();
    assert_eq!(fx.cli(&["approve", &id]).0, 0);
    let next: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let still: Vec<&str> = next
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["pending"].as_array().into_iter().flatten())
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert!(!still.contains(&id.as_str()), "{next}");
    let _ = watch.kill();
    let _ = watch.wait();
    let (_, out, _) = s.finish();
    assert!(out.contains("rc=0"), "{out}");
}
