//! The broker under load (issue 14), on a real `tyba run --here` session: 50 hook asks from
//! five agent processes at once (each on its own connection to the hook socket, as `tyba
//! hook` asks), watched by ten `tyba inbox --watch --json` clients, while clients misbehave
//! on the person's socket (one watcher killed, one that sends half a line and stalls, one
//! that sends requests and never reads the replies) and one hook client hangs up mid-ask.
//! As the test's user and as the unprivileged `TYBA_TEST_USER`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const AGENT: &str = include_str!("../scripts/broker-load-agent.py");
const AGENTS: usize = 5;
const ASKS: usize = 10;
const WATCHERS: usize = 10;

/// The latest snapshot a watcher printed: the actions pending, or `None` before its first.
type Seen = Arc<Mutex<Option<BTreeSet<String>>>>;

/// Starts `tyba inbox --watch --json` as the fixture's user, following its output.
fn watcher(fx: &Fx) -> (Child, Seen) {
    let mut c = command_as(&fx.who, &fx.tyba);
    c.args(["inbox", "--watch", "--json"]).env_clear();
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen: Seen = Arc::new(Mutex::new(None));
    let out = child.stdout.take().unwrap();
    let s = Arc::clone(&seen);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let acts = v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
                .map(|p| p["action"].as_str().unwrap_or("").to_string())
                .collect();
            *s.lock().unwrap() = Some(acts);
        }
    });
    (child, seen)
}

/// A misbehaving client of the person's socket, run as the fixture's user: `half` sends half
/// a request line and stalls; `deaf` sends a flood of requests and never reads a reply.
fn bad_client(fx: &Fx, socket: &std::path::Path, kind: &str) -> Child {
    let script = r#"
import socket, sys, time
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
if sys.argv[2] == "half":
    c.sendall(b'{"op":"li')
else:
    c.setblocking(False)
    line = b'{"op":"list"}\n' * 64
    for _ in range(20000):
        try:
            c.send(line)
        except BlockingIOError:
            break
print("ready", flush=True)
time.sleep(600)
"#;
    let mut c = command_as(&fx.who, std::path::Path::new("/usr/bin/python3"));
    c.args(["-c", script])
        .arg(socket)
        .arg(kind)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = c.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the {kind} client");
    child
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ok() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The asks the agents make: `touch fA-K`.
fn actions() -> BTreeSet<String> {
    (0..AGENTS)
        .flat_map(|a| (0..ASKS).map(move |k| format!("touch f{a}-{k}")))
        .collect()
}

#[test]
fn fifty_concurrent_asks_all_answered_ten_watchers_see_them_bad_clients_stall_nothing() {
    for who in whos() {
        let Some(fx) = setup(&who, "broker-load") else {
            continue;
        };
        let agent = fx.wt.join("agent.py");
        std::fs::write(&agent, AGENT).unwrap();
        give(&agent, &fx.who);
        let script = format!("python3 agent.py {AGENTS} {ASKS} 1 go");
        let s = fx.start(&["--autonomy", "high"], &script);
        let socket_dir = fx.runtime.join("tyba");
        wait_until("the session's socket", || {
            std::fs::read_dir(&socket_dir).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sock")))
            })
        });
        let socket = std::fs::read_dir(&socket_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "sock"))
            .unwrap();

        // One more watcher than counted: it is killed once it has listed, mid-session.
        let mut watchers: Vec<(Child, Seen)> = (0..=WATCHERS).map(|_| watcher(&fx)).collect();
        wait_until("every watcher's first listing", || {
            watchers.iter().all(|(_, s)| s.lock().unwrap().is_some())
        });
        let (mut killed, _) = watchers.remove(0);
        killed.kill().unwrap();
        killed.wait().unwrap();
        let mut bad = [
            bad_client(&fx, &socket, "half"),
            bad_client(&fx, &socket, "deaf"),
        ];

        std::fs::write(fx.wt.join("go"), "").unwrap();
        give(&fx.wt.join("go"), &fx.who);
        let want = actions();
        let hung_up = "touch hangup0-0 (Bash via load-0)";
        // Every watcher sees all fifty waiting at once; the ask whose client hung up is gone.
        wait_until(
            "all fifty asks in every watcher, the hung-up one gone",
            || {
                watchers.iter().all(|(_, s)| {
                    s.lock().unwrap().as_ref().is_some_and(|acts| {
                        !acts.contains(hung_up)
                            && want.iter().all(|a| {
                                acts.contains(&format!("{a} (Bash via load-{})", &a[7..8]))
                            })
                    })
                })
            },
        );
        let pending = fx.pending(AGENTS * ASKS);
        assert_eq!(pending.len(), AGENTS * ASKS, "{pending:?}");
        // Even asks once, odd ones denied with a reason of their own.
        let mut expect: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
        for p in &pending {
            let id = p["id"].as_str().unwrap();
            let action = p["action"].as_str().unwrap().split(" (").next().unwrap();
            let k: usize = action.rsplit('-').next().unwrap().parse().unwrap();
            if k % 2 == 0 {
                assert_eq!(fx.cli(&["approve", id]).0, 0, "approve {id}");
                expect.insert(action.to_string(), ("once".into(), None));
            } else {
                let reason = format!("not {action}");
                assert_eq!(fx.cli(&["deny", id, "--reason", &reason]).0, 0, "deny {id}");
                expect.insert(action.to_string(), ("deny".into(), Some(reason)));
            }
        }
        wait_until("every watcher's empty inbox", || {
            watchers
                .iter()
                .all(|(_, s)| s.lock().unwrap().as_ref().is_some_and(|a| a.is_empty()))
        });
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        let got: BTreeMap<String, (String, Option<String>)> = out
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|r| {
                assert!(r["error"].is_null(), "{r}");
                (
                    r["action"].as_str().unwrap().to_string(),
                    (
                        r["answer"].as_str().unwrap().to_string(),
                        r["reason"].as_str().map(str::to_string),
                    ),
                )
            })
            .collect();
        assert_eq!(got, expect, "{who:?}: every answer delivered, to its asker");

        // The hung-up ask was denied (fail closed) and logged so.
        let log = fx.log_lines();
        let h = log
            .iter()
            .find(|l| l["action"] == hung_up)
            .unwrap_or_else(|| panic!("no log line for the hung-up ask: {log:?}"));
        assert_eq!(h["answer"], "deny", "{h}");
        assert_eq!(
            h["answered_by"], "nobody (the asking client hung up)",
            "{h}"
        );
        let asked = log
            .iter()
            .filter(|l| l["kind"] == "hook" && l["decision"] == "ask")
            .count();
        assert_eq!(asked, AGENTS * ASKS + 1, "{log:?}");

        for c in bad.iter_mut().chain(watchers.iter_mut().map(|(c, _)| c)) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
