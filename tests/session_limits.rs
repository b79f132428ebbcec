//! A session's sandbox holds at most `[limits] processes` processes and threads at once
//! (`RLIMIT_NPROC` in the sandbox's user namespace): a fork bomb of a command the agent runs
//! stops there, and the person's own processes outside are not counted.
//!
//! Run as the unprivileged user only: the kernel does not apply `RLIMIT_NPROC` to root's uid
//! (fork.c: `real_cred->user != INIT_USER`), which docs/sandbox.md states.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::Path;
use std::process::Command;

/// Forks up to `argv[1]` children; each marks itself in `kids/` and sleeps; prints how many
/// forks succeeded, then ends them.
const FORKER: &str = r#"
import os, sys, time
n = int(sys.argv[1]); kids = []
os.makedirs("kids", exist_ok=True)
try:
    for i in range(n):
        p = os.fork()
        if p == 0:
            open("kids/%d" % os.getpid(), "w").close()
            time.sleep(20); os._exit(0)
        kids.append(p)
    print("RESULT forked %d" % len(kids), flush=True)
except OSError as e:
    print("RESULT failed after %d errno %d" % (len(kids), e.errno), flush=True)
time.sleep(1)
for k in kids:
    os.kill(k, 9); os.waitpid(k, 0)
"#;

fn marks(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("kids"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_session_forks_at_most_its_process_limit_and_the_persons_processes_do_not_count() {
    let Some(who) = unprivileged() else {
        return;
    };
    let Some(fx) = setup(&who, "nproc") else {
        return;
    };
    let cfg = fx.home.join(".config/tyba");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("policy.toml"), "[limits]\nprocesses = 64\n").unwrap();
    give(&fx.home, &who);
    std::fs::write(fx.wt.join("forker.py"), FORKER).unwrap();
    give(&fx.wt, &who);
    let s = fx.start_argv(
        &["--non-interactive", "--autonomy", "high"],
        &[],
        &["/usr/bin/python3", "forker.py", "200"],
    );
    let (code, out, err) = s.finish();
    let ctx = format!("{who:?}: status {code}, out {out} / err {err}");
    assert!(out.contains("RESULT failed after"), "{ctx}");
    assert!(out.contains("errno 11"), "{ctx}: EAGAIN");
    // Seen from outside: fewer than 64 children ever ran.
    let n = marks(&fx.wt);
    assert!((1..64).contains(&n), "{ctx}: {n} children ran");
    // Control: the same program outside tyba, as the same user, forks all 200 (the person's
    // own limit is far above), so the check above can fail.
    let dir = fx.wt.parent().unwrap().join("control");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("forker.py"), FORKER).unwrap();
    give(&dir, &who);
    let o = command_as(&who, Path::new("/usr/bin/python3"))
        .arg("forker.py")
        .arg("200")
        .current_dir(&dir)
        .output()
        .unwrap();
    let cout = String::from_utf8_lossy(&o.stdout);
    assert!(
        cout.contains("RESULT forked 200"),
        "{who:?}: control: {cout}"
    );
    assert_eq!(marks(&dir), 200, "{who:?}: control");
    let _ = Command::new("rm").arg("-rf").arg(&dir).status();
}
