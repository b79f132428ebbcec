//! The same-terminal prompt, driven through a real pty (`script(1)` gives `tyba run` a
//! terminal; the test types keys into it and reads the screen bytes): once, deny with a
//! reason, `always` refused on red, the agent's output held while the prompt is shown, the
//! session word in the prompt, and the screen given back (alternate screen left).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The screen bytes so far, shared with the reader thread.
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Waits until the screen has shown `needle` `n` times.
    fn wait_for(&self, needle: &str, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let t = self.text();
            if t.matches(needle).count() >= n {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {needle:?} x{n}: {t:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs `tyba run --here -- bash -c SCRIPT` on a pty; `drive` types keys on `stdin`.
fn on_pty(
    fx: &Fx,
    script: &str,
    hang_up: bool,
    drive: impl FnOnce(&Screen, &mut dyn Write),
) -> (String, std::process::ExitStatus) {
    let inner = format!(
        "{} run --here -- bash -c {}",
        fx.tyba.display(),
        shell_quote(script)
    );
    let mut c = command_as(&fx.who, std::path::Path::new("/usr/bin/script"));
    c.args(["-qfec", &inner, "/dev/null"])
        .current_dir(&fx.wt)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    c.env("TERM", "xterm");
    let mut child = c.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let buf = Arc::new(Mutex::new(Vec::new()));
    let b2 = Arc::clone(&buf);
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = out.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b2.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    let screen = Screen(buf);
    let mut stdin = child.stdin.take().unwrap();
    drive(&screen, &mut stdin);
    if hang_up {
        // The person's terminal goes away: the pty's other side closes.
        let _ = child.kill();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
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
    if !hang_up {
        let _ = reader.join();
    }
    (screen.text(), status)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The session word `tyba run` printed before the agent started.
fn word(screen: &str) -> String {
    let start = screen.find("session word «").unwrap() + "session word «".len();
    let end = start + screen[start..].find('»').unwrap();
    screen[start..end].to_string()
}

fn type_keys(w: &mut dyn Write, keys: &str) {
    w.write_all(keys.as_bytes()).unwrap();
    w.flush().unwrap();
}

#[test]
fn ask_prompt_once_holds_the_agent_output_and_gives_the_screen_back() {
    for who in whos() {
        let Some(fx) = setup(&who, "prompt-once") else {
            continue;
        };
        let script = "echo before; (touch p.txt; echo rc=$?) & \
                      for i in $(seq 1 100000); do :; done; echo during; wait; echo after";
        let (screen, status) = on_pty(&fx, script, false, |s, w| {
            let t = s.wait_for("session word: ", 1);
            let word = word(&t);
            assert!(
                t.contains(&format!("session word: {word} ")),
                "{who:?}: the prompt carries the session word"
            );
            assert!(
                t.contains("run `touch p.txt`") && t.contains("[o] once"),
                "{t}"
            );
            // Give the agent time to print "during" while the prompt is up.
            std::thread::sleep(Duration::from_millis(1500));
            assert!(!s.text().contains("during"), "{who:?}: output held: {t}");
            type_keys(w, "o");
            s.wait_for("after", 1);
        });
        assert!(status.success(), "{who:?}: {screen}");
        let left = screen.find("\x1b[?1049l").expect("alternate screen left");
        let entered = screen.find("\x1b[?1049h").unwrap();
        let during = screen.find("during").unwrap();
        assert!(entered < left && left < during, "{who:?}: {screen:?}");
        assert!(screen.contains("rc=0"), "{who:?}: {screen}");
        assert!(fx.wt.join("p.txt").exists());
        let log = fx.log_lines();
        let ask = log.iter().find(|l| l["decision"] == "ask").unwrap();
        assert_eq!(ask["answered_by"], "terminal", "{log:?}");
    }
}

#[test]
fn ask_prompt_deny_with_reason_and_always_refused_on_red() {
    for who in whos() {
        let Some(fx) = setup(&who, "prompt-deny") else {
            continue;
        };
        let script = "rm -rf build; echo rm=$?; touch q.txt; echo touch=$?";
        let (screen, _) = on_pty(&fx, script, false, |s, w| {
            s.wait_for("rm -rf build", 1);
            type_keys(w, "a");
            s.wait_for("`always` is refused", 1);
            type_keys(w, "r");
            s.wait_for("reason (Enter sends", 1);
            type_keys(w, "not the build dir\r");
            s.wait_for("run `touch q.txt`", 1);
            type_keys(w, "d");
            s.wait_for("touch=", 1);
        });
        assert!(screen.contains("rm=126"), "{who:?}: {screen}");
        assert!(
            screen.contains("tyba: not the build dir"),
            "{who:?}: {screen}"
        );
        assert!(screen.contains("touch=126"), "{who:?}: {screen}");
        assert!(!fx.wt.join("q.txt").exists());
    }
}

#[test]
fn ask_prompt_closed_terminal_is_a_deny() {
    let Some(fx) = setup(&Who::Me, "prompt-hup") else {
        return;
    };
    let script = "touch h.txt; echo rc=$?";
    let (_screen, _status) = on_pty(&fx, script, true, |s, _w| {
        s.wait_for("run `touch h.txt`", 1);
    });
    // tyba run loses its terminal (SIGHUP), so the session and its agent end: the pending
    // ask is never allowed, and no process is left in the worktree.
    let deadline = Instant::now() + Duration::from_secs(10);
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
        assert!(Instant::now() < deadline, "left running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!fx.wt.join("h.txt").exists());
    let log = fx.log_lines();
    assert!(
        log.iter()
            .all(|l| l["answer"] != "once" && l["answer"] != "always"),
        "{log:?}"
    );
}
