//! Many sessions of one user at once (issue 17): real `tyba run --here` sessions started
//! and ended several at a time, while other processes list them in a loop, as the test's user
//! and as the unprivileged `TYBA_TEST_USER`.
//!
//! Each round starts [`AT_ONCE`] sessions together in one worktree and one home whose agent
//! state directories exist without their control files (so every session makes, or takes
//! up, the stand-ins), of four kinds in turn: the agent exits at once; it waits, then ends by
//! itself; it waits and is ended by `tyba stop`; `--non-interactive`, waiting, ended either
//! way by round. Meanwhile [`POLLERS`] processes run `tyba inbox --json` and `tyba sessions
//! --json` back to back. Checked from outside: every session's broker came up (its stderr
//! names its audit log; the waiting ones are listed, with their socket and lock), none lost
//! its socket while others came and went, the stand-ins stayed read-only inside every
//! waiting session after the others ended, every listing succeeded with nothing on stderr,
//! and at the end nothing is left: no socket, lock or staging file, no stand-in or its
//! record, no session temp dir; every session wrote its audit log. Bounded: [`ROUNDS`] ×
//! [`AT_ONCE`] sessions per user, each wait at most [`WAIT`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Rounds per user.
const ROUNDS: usize = 10;
/// Sessions started together in a round.
const AT_ONCE: usize = 6;
/// Processes listing the sessions in a loop meanwhile.
const POLLERS: usize = 3;
/// The longest any one wait may take.
const WAIT: Duration = Duration::from_secs(30);

/// The control files of the default policy under `~/.claude` and `~/.codex`.
const CONTROL: &[&str] = &[
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/hooks",
    ".codex/rules",
    ".codex/hooks.json",
];

/// What a session of the round does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The agent exits at once.
    Instant,
    /// Waits for its FIFO, then ends by itself.
    Released,
    /// Waits; ended by `tyba stop`.
    Stopped,
    /// `--non-interactive`, waits; released or stopped by round.
    NonInteractive { stop: bool },
}

/// The script of a waiting agent: says its session, waits on its FIFO without spinning,
/// then tries to write a control file (a stand-in: must still be read-only).
fn waiting_script(tag: &str) -> String {
    format!(
        "echo \"$TYBA_SESSION\" > sid-{tag}; read x < go-{tag}; \
         {{ echo '{{\"permissions\":{{}}}}' > \"$HOME/.claude/settings.json\"; }} 2>/dev/null; \
         echo w=$?"
    )
}

fn mkfifo(fx: &Fx, name: &str) {
    let p = fx.wt.join(name);
    let st = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap();
    assert!(st.success());
    give(&p, &fx.who);
}

/// Opens the FIFO for writing once its reader is there, and writes a line.
fn release(fx: &Fx, name: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let p = fx.wt.join(name);
    let deadline = Instant::now() + WAIT;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, b"\n").unwrap();
                return;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "{name}: no reader: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Waits for `sid-TAG` and returns the session id in it.
fn session_id(fx: &Fx, tag: &str) -> String {
    let p = fx.wt.join(format!("sid-{tag}"));
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(s) = std::fs::read_to_string(&p) {
            if s.ends_with('\n') {
                return s.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no session id in {}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The ids `tyba sessions --json` lists now.
fn listed(fx: &Fx) -> BTreeSet<String> {
    let (code, out, err) = fx.cli(&["sessions", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

fn uid_of(who: &Who) -> u32 {
    match who {
        Who::Me => my_uid(),
        Who::User { uid, .. } => *uid,
    }
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn stress(who: &Who) {
    let Some(fx) = setup(who, "stress") else {
        return;
    };
    for d in [".claude", ".codex"] {
        std::fs::create_dir_all(fx.home.join(d)).unwrap();
    }
    give(&fx.home, who);
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let polls = AtomicUsize::new(0);
    let poll_failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut checks = Checks::default();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut sessions = 0;
    std::thread::scope(|sc| {
        // Stops the pollers however this closure ends: a failed assertion here must not
        // leave the scope waiting for them forever.
        let _stop_pollers = StopOnDrop(&stop);
        for n in 0..POLLERS {
            let (fx, stop, polls, poll_failures) = (&fx, &stop, &polls, &poll_failures);
            sc.spawn(move || {
                let mut i = n;
                while !stop.load(Ordering::SeqCst) {
                    let args: &[&str] = if i % 2 == 0 {
                        &["inbox", "--json"]
                    } else {
                        &["sessions", "--json"]
                    };
                    i += 1;
                    let (code, out, err) = fx.cli(args);
                    let parsed = serde_json::from_str::<serde_json::Value>(&out)
                        .ok()
                        .filter(serde_json::Value::is_array);
                    if code != 0 || parsed.is_none() || !err.is_empty() {
                        poll_failures.lock().unwrap().push(format!(
                            "{args:?}: exit {code}: stderr {err:?} / stdout {out}"
                        ));
                    }
                    polls.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        for round in 0..ROUNDS {
            let mut running = Vec::new();
            for i in 0..AT_ONCE {
                let tag = format!("{round}-{i}");
                let kind = match i % 4 {
                    0 => Kind::Instant,
                    1 => Kind::Released,
                    2 => Kind::Stopped,
                    _ => Kind::NonInteractive {
                        stop: round % 2 == 1,
                    },
                };
                let (extra, script): (&[&str], String) = match kind {
                    Kind::Instant => (&[], "echo \"$TYBA_SESSION\" >> ids".to_string()),
                    Kind::NonInteractive { .. } => (&["--non-interactive"], waiting_script(&tag)),
                    _ => (&[], waiting_script(&tag)),
                };
                if kind != Kind::Instant {
                    mkfifo(&fx, &format!("go-{tag}"));
                }
                running.push((tag, kind, fx.start(extra, &script)));
                sessions += 1;
            }
            // The waiting ones come up, are listed, and hold their socket and lock.
            let mut waiting = Vec::new();
            for (tag, kind, _) in &running {
                if *kind != Kind::Instant {
                    waiting.push((tag.clone(), *kind, session_id(&fx, tag)));
                }
            }
            let deadline = Instant::now() + WAIT;
            loop {
                let l = listed(&fx);
                if waiting.iter().all(|(_, _, id)| l.contains(id)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{who:?} round {round}: never all listed: {waiting:?} vs {l:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            // Let the instant ones end meanwhile, then check nothing of the others was lost.
            let mut results: Vec<(String, Kind, (i32, String, String))> = Vec::new();
            let mut live = Vec::new();
            for (tag, kind, s) in running {
                if kind == Kind::Instant {
                    results.push((tag, kind, s.finish()));
                } else {
                    live.push((tag, kind, s));
                }
            }
            let rt = fx.runtime.join("tyba");
            let l = listed(&fx);
            for (tag, kind, id) in &waiting {
                checks.check(
                    rt.join(format!("{id}.sock")).exists()
                        && rt.join(format!("{id}.lock")).exists(),
                    format!("{who:?} {tag} {kind:?}: socket or lock of {id} lost"),
                );
                checks.check(
                    l.contains(id),
                    format!("{who:?} {tag} {kind:?}: {id} no longer listed"),
                );
            }
            for c in CONTROL {
                checks.check(
                    std::fs::symlink_metadata(fx.home.join(c)).is_ok(),
                    format!(
                        "{who:?} round {round}: the stand-in {c} went while sessions rely on it"
                    ),
                );
            }
            // End the waiting ones: by themselves or by `tyba stop`.
            for (tag, kind, id) in &waiting {
                let by_stop = matches!(kind, Kind::Stopped | Kind::NonInteractive { stop: true });
                if by_stop {
                    let (code, out, err) = fx.cli(&["stop", id]);
                    checks.check(
                        code == 0 && out.contains("stopped"),
                        format!("{who:?} {tag}: tyba stop {id}: {code} {out} {err}"),
                    );
                } else {
                    release(&fx, &format!("go-{tag}"));
                }
            }
            for (tag, kind, s) in live {
                results.push((tag, kind, s.finish()));
            }
            for (tag, kind, result) in &results {
                let (code, out, err) = result.clone();
                let by_stop = matches!(kind, Kind::Stopped | Kind::NonInteractive { stop: true });
                checks.check(
                    err.contains("tyba: audit log ")
                        && !err.contains("cannot start")
                        && !err.contains("cannot keep")
                        && !err.contains("did not answer"),
                    format!("{who:?} {tag} {kind:?}: the broker did not come up cleanly: {err}"),
                );
                if by_stop {
                    checks.check(
                        err.contains("stopped by tyba stop"),
                        format!("{who:?} {tag} {kind:?}: not stopped: {code} {err}"),
                    );
                } else {
                    checks.check(
                        code == 0,
                        format!("{who:?} {tag} {kind:?}: exit {code}: {err}"),
                    );
                }
                if matches!(kind, Kind::Released | Kind::NonInteractive { stop: false }) {
                    checks.check(
                        out.contains("w=1"),
                        format!("{who:?} {tag} {kind:?}: the stand-in was writable inside: {out} / {err}"),
                    );
                }
            }
            for (_, _, id) in waiting {
                ids.insert(id);
            }
        }
    });
    for line in std::fs::read_to_string(fx.wt.join("ids")).unwrap().lines() {
        ids.insert(line.to_string());
    }
    checks.check(
        ids.len() == sessions,
        format!(
            "{who:?}: {} distinct session ids for {sessions} sessions",
            ids.len()
        ),
    );
    let polls = polls.load(Ordering::SeqCst);
    checks.check(
        polls >= 2 * ROUNDS,
        format!("{who:?}: only {polls} listings ran"),
    );
    for f in poll_failures.lock().unwrap().iter() {
        checks.check(false, format!("{who:?}: listing failed: {f}"));
    }
    // Nothing is left behind.
    let rt = fx.runtime.join("tyba");
    let left: Vec<String> = std::fs::read_dir(&rt)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    checks.check(
        left.is_empty(),
        format!("{who:?}: left in {}: {left:?}", rt.display()),
    );
    // The registry is the user's, shared with every session of that user
    // (`/dev/shm/tyba-<uid>/stand-ins`, else under the state dir): the records naming this
    // home's files.
    let uid = uid_of(who);
    let home = fx.home.to_string_lossy().into_owned();
    let records: Vec<String> = [
        std::path::PathBuf::from(format!("/dev/shm/tyba-{uid}/stand-ins")),
        fx.home.join(".local/state/tyba/stand-ins"),
    ]
    .iter()
    .filter_map(|reg| std::fs::read_dir(reg).ok())
    .flatten()
    .flatten()
    .filter(|e| e.file_name() != "registry.lock")
    .filter(|e| std::fs::read(e.path()).is_ok_and(|t| String::from_utf8_lossy(&t).contains(&home)))
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .collect();
    checks.check(
        records.is_empty(),
        format!("{who:?}: stand-in records left: {records:?}"),
    );
    for c in CONTROL {
        checks.check(
            std::fs::symlink_metadata(fx.home.join(c)).is_err(),
            format!("{who:?}: the stand-in {c} was left behind"),
        );
    }
    let logs = fx.home.join(".local/state/tyba/log");
    for id in &ids {
        // The temp dir and its lock are made on a memory filesystem, or in the temp dir.
        for tmp in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
            let dir = tmp.join(format!("tyba-{uid}-{id}"));
            checks.check(
                !dir.exists(),
                format!("{who:?}: temp dir {} left", dir.display()),
            );
            let lock = tmp.join(format!("tyba-{uid}-{id}.live"));
            checks.check(
                !lock.exists(),
                format!("{who:?}: liveness lock {} left", lock.display()),
            );
        }
        checks.check(
            logs.join(format!("{id}.jsonl")).exists(),
            format!("{who:?}: session {id} wrote no audit log"),
        );
    }
    eprintln!(
        "{who:?}: {sessions} sessions, {polls} listings in {:?}",
        started.elapsed()
    );
    checks.finish("many sessions of one user");
}

#[test]
fn many_sessions_of_one_user_start_and_end_while_others_list_them() {
    for who in whos() {
        stress(&who);
    }
}
