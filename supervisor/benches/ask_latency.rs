//! Asking latency, excluding human time (issue 5 §8): from the moment an ask is visible in
//! the broker (the notification) to the moment the blocked asker has its answer (applied),
//! with the answer sent as `tyba approve` sends it: one JSON line on the session's unix
//! socket, over a connection already open.
//!
//! `cargo bench -p tyba-supervisor --bench ask_latency`; figures in
//! docs/performance-asking.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tyba_supervisor::broker::{Broker, BrokerConfig};
use tyba_supervisor::{Answer, Approver, AskKind, AskRequest};

fn ask_latency(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // Edition 2021: set before any thread reads the environment.
    std::env::set_var("XDG_RUNTIME_DIR", dir.path());
    std::env::set_var("XDG_STATE_HOME", dir.path());
    let mut cfg = BrokerConfig::new("be11c4a5e000", dir.path().to_path_buf());
    cfg.notices = false;
    cfg.audit = true;
    let broker = Broker::start(cfg).unwrap();
    let sock = broker.socket_path().unwrap();

    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let asker = broker.clone();
    std::thread::spawn(move || {
        let req = AskRequest {
            kind: AskKind::Command {
                command: "cargo test".into(),
            },
            verdict: tyba_policy::Verdict::Yellow,
            reasons: vec!["builds run code".into()],
            rememberable: true,
            pid: std::process::id(),
            exec: None,
        };
        while go_rx.recv().is_ok() {
            let a = asker.ask(&req).unwrap();
            assert_eq!(a, Answer::Once);
            done_tx.send(Instant::now()).unwrap();
        }
    });
    let mut conn = UnixStream::connect(&sock).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    let mut seen = broker.generation();

    c.bench_function("notification to answer applied", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                go_tx.send(()).unwrap();
                let id = loop {
                    seen = broker.wait_change(seen, Duration::from_secs(5));
                    if let Some(p) = broker.pending().first() {
                        break p.id.clone();
                    }
                };
                let t0 = Instant::now();
                conn.write_all(
                    format!("{{\"op\":\"answer\",\"id\":\"{id}\",\"answer\":\"once\"}}\n")
                        .as_bytes(),
                )
                .unwrap();
                line.clear();
                reader.read_line(&mut line).unwrap();
                let t1 = done_rx.recv().unwrap();
                total += t1.duration_since(t0);
            }
            total
        })
    });
    broker.close("bench over");
}

criterion_group!(benches, ask_latency);
criterion_main!(benches);
