//! The ask path end to end (escapes.md, last paragraph): with an approver answering "once",
//! an asked command runs and an asked connection reaches its listener outside the sandbox;
//! with one answering "deny" with a reason, the reason reaches the agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Stdio};

fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let st = Command::new("git")
        .arg("-C")
        .arg(t.path())
        .args(["init", "-q"])
        .status()
        .unwrap();
    assert!(st.success());
    t
}

fn harness(dir: &std::path::Path, mode: &str, port: u16, script: &str) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tyba-approver-harness"))
        .args([mode, "--", "/bin/bash", "-c", script])
        .current_dir(dir)
        .env("P", port.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn sandbox_missing(err: &str, code: i32) -> bool {
    if code == 4 && err.contains("sandbox unavailable") {
        assert!(
            std::env::var("TYBA_REQUIRE_SANDBOX").as_deref() != Ok("1"),
            "sandbox required: {err}"
        );
        eprintln!("SKIP: {err}");
        return true;
    }
    false
}

const SCRIPT: &str = r#"touch asked.txt; echo touch=$?
perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or die; if (connect($s, pack_sockaddr_in($ENV{P}, inet_aton("127.0.0.1")))) { print $s "approved-hello\n"; print "connected\n" } else { print "refused $!\n" }'"#;

#[test]
fn approver_once_lets_the_asked_command_and_connection_through() {
    let t = repo();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (code, out, err) = harness(t.path(), "once", port, SCRIPT);
    if sandbox_missing(&err, code) {
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("touch=0") && t.path().join("asked.txt").exists(),
        "the asked command ran: {out} / {err}"
    );
    assert!(
        out.contains("connected"),
        "the asked connection succeeded: {out} / {err}"
    );
    l.set_nonblocking(true).unwrap();
    let (mut s, _) = l.accept().expect("the listener outside got the connection");
    s.set_nonblocking(false).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    assert_eq!(got, "approved-hello\n");
}

#[test]
fn approver_deny_reason_reaches_the_agent() {
    let t = repo();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (code, out, err) = harness(
        t.path(),
        "deny:use the project's make target instead",
        port,
        SCRIPT,
    );
    if sandbox_missing(&err, code) {
        return;
    }
    assert!(out.contains("touch=126"), "{out} / {err}");
    assert!(
        err.contains("tyba: use the project's make target instead"),
        "the person's reason reached the command: {err}"
    );
    assert!(!t.path().join("asked.txt").exists());
    l.set_nonblocking(true).unwrap();
    assert!(l.accept().is_err(), "no connection when denied");
}
