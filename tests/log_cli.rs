//! `tyba log` on a session that logged nothing ("no entries") and on a log that reached its
//! bound (the note says how many entries were dropped; the first and newest stay).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use support::*;
use tyba_supervisor::broker::audit::{AuditLine, AuditLog};

#[test]
fn an_empty_log_says_no_entries_and_a_bounded_one_says_what_it_dropped() {
    let who = Who::Me;
    let Some(r) = sandbox_repo(&who, "log-cli") else {
        return;
    };
    let env = base_env(&r.home, &[]);
    // A session that logged nothing (one that ended before its first decision): its log
    // exists, empty, as the broker opens it.
    let dir = r.home.join(".local/state/tyba/log");
    std::fs::create_dir_all(&dir).unwrap();
    drop(AuditLog::open(&dir.join("5e5e5e5e5e5e.jsonl")).unwrap());
    let o = run_tyba(&who, &r.tyba, &r.wt, &env, &["log", "5e5e5e5e5e5e"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.starts_with("no entries in "), "{out}");
    let o = run_tyba(
        &who,
        &r.tyba,
        &r.wt,
        &env,
        &["log", "5e5e5e5e5e5e", "--json"],
    );
    assert!(o.status.success());
    assert!(o.stdout.is_empty(), "JSON lines: none");
    assert!(String::from_utf8_lossy(&o.stderr).contains("no entries"));

    // A log written past its bound, as a flooding session would.
    let log = AuditLog::open_bounded(&dir.join("0a1b2c3d4e5f.jsonl"), 20_000).unwrap();
    for n in 0..2_000 {
        log.write(&AuditLine {
            session: "0a1b2c3d4e5f".into(),
            kind: "exec".into(),
            action: format!("make step-{n}"),
            decision: "allow".into(),
            ..AuditLine::default()
        });
    }
    let o = run_tyba(&who, &r.tyba, &r.wt, &env, &["log", "0a1b2c3d4e5f"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(out.contains("make step-0\n"), "{out}");
    assert!(out.contains("make step-1999\n"), "{out}");
    assert!(out.contains("-- the audit log reached its bound"), "{out}");
    let dropped: u64 = out
        .lines()
        .find_map(|l| l.split("-- ").nth(1)?.strip_suffix(" bytes per session)"))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .expect("a line counts the dropped entries");
    let kept = out.lines().filter(|l| l.contains("make step-")).count() as u64;
    assert_eq!(kept + dropped, 2_000, "{out}");
}
