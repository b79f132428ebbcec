//! The exec model (issue 11): every `execve` of a sandboxed process is decided for exactly
//! that exec, by what really runs, at any depth. One regression test per observation of the
//! issue, with real processes (git, make, a `git daemon` on loopback, Python, node), run as
//! the test's user and as the unprivileged `TYBA_TEST_USER`, each effect checked from outside
//! the sandbox, and each check paired with a control that shows it can fail (the same thing
//! run without tyba reaches the effect). Then the property: every blocked corpus command
//! (`tests/data/commands.jsonl`) run as a descendant of an approved `make`, `bash script.sh`,
//! `xargs -0 sh -c`, `npm run` or `python3 -c 'subprocess.run(…, shell=True)'` is refused.
//!
//! The model under test (docs/sandbox.md): a missing or non-executable file is answered with
//! its errno, never asked; the exec's code-running environment variables are classified as
//! if assigned on the command line; an approval covers the exec it was made for only;
//! blocked descendants of an approved command are refused at every depth; the agent's own
//! re-launch keeps the agent's role; a refused exec runs tyba's refusal program, which prints
//! `tyba: <reason>` on stderr and exits 126. Speed is measured by the exec-path benchmark,
//! never here.
//!
//! The `#[ignore]`d tests state what the model requires and fails to do today (each says
//! why); run them with `--include-ignored`.
//!
//! The property's sessions run in a `pids` cgroup (root only: the unprivileged run joins it
//! before `setpriv`), so that a fork bomb that got through stays inside the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::ffi::OsString;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Sessions with any agent program, answered by a scripted person.

/// The environment of a session: the fixture's, with `extra` set (replacing a variable of
/// the same name, e.g. `PATH`).
fn env_with(fx: &Fx, extra: &[(&str, OsString)]) -> Vec<(OsString, OsString)> {
    let mut env = fx.env();
    for (k, v) in extra {
        env.retain(|(n, _)| n != k);
        env.push(((*k).into(), v.clone()));
    }
    env
}

/// A running `tyba run --here FLAGS -- ARGV`, its output read while it runs.
struct Live {
    child: Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

/// What a session did: its status and output, and every ask the person saw (in order).
#[derive(Debug)]
struct Ran {
    code: i32,
    out: String,
    err: String,
    asks: Vec<serde_json::Value>,
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = r.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    })
}

/// Starts `tyba run --here FLAGS -- ARGV` as the fixture's user in the worktree, stdin
/// closed, with `env`; `cage` (a pids cgroup) holds the whole session when given.
fn start(
    fx: &Fx,
    flags: &[&str],
    env: &[(OsString, OsString)],
    argv: &[&str],
    cage: Option<&PidsCage>,
) -> Live {
    let mut c = match cage {
        None => command_as(&fx.who, &fx.tyba),
        Some(cage) => cage.command(&fx.who, &fx.tyba),
    };
    c.arg("run").arg("--here").args(flags).arg("--").args(argv);
    c.current_dir(&fx.wt).env_clear().stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    Live { child, out, err }
}

/// The scripted person's answer to one ask.
enum Reply {
    Approve,
    Deny(Option<&'static str>),
}

/// Answers every ask of the session with `answer` (through `tyba inbox --json`, `tyba
/// approve`, `tyba deny`) until the session ends (at most 150 s), and returns what it did.
fn drive(fx: &Fx, mut live: Live, mut answer: impl FnMut(&serde_json::Value) -> Reply) -> Ran {
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut asks: Vec<serde_json::Value> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    loop {
        let done = live.child.try_wait().unwrap().is_some();
        if done {
            break;
        }
        if Instant::now() > deadline {
            let _ = live.child.kill();
            break;
        }
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        if code == 0 {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) {
                for sess in v.as_array().cloned().unwrap_or_default() {
                    for p in sess["pending"].as_array().cloned().unwrap_or_default() {
                        let id = p["id"].as_str().unwrap_or_default().to_string();
                        if id.is_empty() || !seen.insert(id.clone()) {
                            continue;
                        }
                        let r = answer(&p);
                        asks.push(p);
                        let _ = match r {
                            Reply::Approve => fx.cli(&["approve", &id]),
                            Reply::Deny(None) => fx.cli(&["deny", &id]),
                            Reply::Deny(Some(reason)) => fx.cli(&["deny", &id, "--reason", reason]),
                        };
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    let st = live.child.wait().unwrap();
    Ran {
        code: st.code().unwrap_or(-1),
        out: live.out.join().unwrap(),
        err: live.err.join().unwrap(),
        asks,
    }
}

/// Runs a `--non-interactive` session to its end (no socket: nobody can be asked).
fn run_alone(fx: &Fx, flags: &[&str], env: &[(OsString, OsString)], argv: &[&str]) -> Ran {
    let mut f = vec!["--non-interactive"];
    f.extend_from_slice(flags);
    let live = start(fx, &f, env, argv, None);
    drive(fx, live, |p| panic!("a non-interactive session asked: {p}"))
}

/// The audit log of the fixture's latest session (empty when there is none, as for a
/// `--non-interactive` session).
fn log_of(fx: &Fx) -> Vec<serde_json::Value> {
    let (code, out, _) = fx.cli(&["log", "--json"]);
    if code != 0 {
        return Vec::new();
    }
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The asks' verdicts and actions, each cut to 200 characters (for failure messages).
fn brief(asks: &[serde_json::Value]) -> Vec<String> {
    asks.iter()
        .map(|a| {
            let t: String = action(a).chars().take(200).collect();
            format!("{} {t}", a["verdict"].as_str().unwrap_or_default())
        })
        .collect()
}

fn action(v: &serde_json::Value) -> String {
    v["action"].as_str().unwrap_or_default().to_string()
}

/// A command line without quotes and with single spaces, to compare the corpus text with
/// the way tyba shows an exec (`'if=/dev/zero'` for `if=/dev/zero`).
fn norm(s: &str) -> String {
    s.replace(['\'', '"', '`'], "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the first line of a refused child's stderr (`tyba: REASON`) names a reason, the
/// one the session's end-of-session summary gives for a refused exec.
fn reason_in_summary(child_stderr: &str, session_stderr: &str) -> bool {
    let Some(reason) = child_stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("tyba: "))
        .map(str::trim)
    else {
        return false;
    };
    reason.len() > 8
        && session_stderr
            .lines()
            .any(|l| l.starts_with("tyba:   exec ") && l.contains(reason))
}

/// The `RESULT {json}` lines an agent program of these tests prints on stdout.
fn results(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect()
}

fn result<'a>(rs: &'a [serde_json::Value], step: &str) -> Option<&'a serde_json::Value> {
    rs.iter().find(|r| r["step"] == step)
}

/// Writes `contents` at `wt/name` and gives the worktree to the fixture's user.
fn put(fx: &Fx, name: &str, contents: &str) -> PathBuf {
    let p = fx.wt.join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, contents).unwrap();
    give(&fx.wt, &fx.who);
    p
}

/// A `build/` directory with a file in it, the target of the `rm -rf build` checks.
fn make_build(fx: &Fx) {
    std::fs::create_dir_all(fx.wt.join("build")).unwrap();
    std::fs::write(fx.wt.join("build/out.o"), "object\n").unwrap();
    give(&fx.wt, &fx.who);
}

/// Runs `argv` as the fixture's user in `dir`, outside tyba (the controls): (status, stdout,
/// stderr).
fn outside(fx: &Fx, dir: &Path, env: &[(OsString, OsString)], argv: &[&str]) -> Ran {
    let mut c = command_as(&fx.who, Path::new(argv[0]));
    c.args(&argv[1..])
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    Ran {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
        asks: Vec::new(),
    }
}

/// A copy of the worktree (for controls that must not touch the session's files), owned by
/// the fixture's user.
fn copy_of_wt(fx: &Fx, name: &str) -> PathBuf {
    let dst = fx.scratch.dir.join(name);
    let st = Command::new("cp")
        .arg("-a")
        .arg(&fx.wt)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    give(&dst, &fx.who);
    dst
}

// ---------------------------------------------------------------------------------------
// A pids cgroup, so that a fork bomb that got through would stay inside the test.

/// A `pids` cgroup (v1 `Documentation/admin-guide/cgroup-v1/pids.rst`, or v2 with the `pids`
/// controller) that the whole session is started in, capped at `pids.max`; every process left
/// in it is killed on drop.
struct PidsCage {
    dir: PathBuf,
}

impl PidsCage {
    /// `None` when no pids cgroup can be made here (not root, or no `pids` controller).
    fn new(tag: &str) -> Option<PidsCage> {
        if my_uid() != 0 {
            return None;
        }
        let name = format!("tyba-test-{}-{tag}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let v2 = Path::new("/sys/fs/cgroup");
        let base = if v1.join("cgroup.procs").exists() {
            v1
        } else {
            let controllers =
                std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "pids") {
                return None;
            }
            // Children of the root get the controller only when the root hands it down.
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+pids");
            v2
        };
        let dir = base.join(name);
        std::fs::create_dir_all(&dir).ok()?;
        if std::fs::write(dir.join("pids.max"), "600").is_err() {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(PidsCage { dir })
    }

    /// A command that joins the cgroup and then runs `program` as `who`.
    fn command(&self, who: &Who, program: &Path) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
            .arg(&self.dir);
        let inner = command_as(who, program);
        c.arg(inner.get_program());
        c.args(inner.get_args());
        c
    }

    fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for PidsCage {
    fn drop(&mut self) {
        for _ in 0..200 {
            let left = self.pids();
            if left.is_empty() {
                break;
            }
            for p in left {
                kill(p, "KILL");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------
// A `git daemon` on loopback serving bare repositories with receive-pack.

struct Daemon {
    child: Child,
    port: u16,
    base: PathBuf,
}

impl Drop for Daemon {
    /// `git daemon` runs `git-daemon` as a child of its own: the whole process group goes.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs git as the test's user on repositories of any owner (`safe.directory = *` from a
/// global file in the fixture's `scratch` dir: git does not pass `-c` on to the
/// `upload-pack` of a local clone).
fn git_root(scratch: &Path, args: &[&str]) -> String {
    let global = scratch.join("gitconfig-safe");
    if !global.exists() {
        std::fs::write(&global, "[safe]\n\tdirectory = *\n").unwrap();
    }
    let o = Command::new("git")
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", &global)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl Daemon {
    /// Serves `base` (`--base-path`, `--export-all`, `--enable=receive-pack`) on
    /// 127.0.0.1 at a free port, as the test's user.
    fn start(base: &Path) -> Daemon {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("git")
            .arg("daemon")
            .arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg(base)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "git daemon never listened");
            std::thread::sleep(Duration::from_millis(30));
        }
        Daemon {
            child,
            port,
            base: base.to_path_buf(),
        }
    }

    fn url(&self, repo: &str) -> String {
        format!("git://127.0.0.1:{}/{repo}", self.port)
    }

    /// `git ls-remote` of a served repository, read from its directory.
    fn refs(&self, repo: &str) -> String {
        git_root(
            self.base.parent().unwrap(),
            &["ls-remote", &self.base.join(repo).display().to_string()],
        )
    }
}

/// A bare copy of the worktree's repository at `srv/name`, owned by the test's user (the
/// daemon's), with receive settings that let every push through (so only tyba can stop one).
fn bare_remote(fx: &Fx, srv: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(srv).unwrap();
    let dst = srv.join(name);
    git_root(
        &fx.scratch.dir,
        &[
            "clone",
            "-q",
            "--bare",
            &fx.wt.display().to_string(),
            &dst.display().to_string(),
        ],
    );
    let d = dst.display().to_string();
    git_root(
        &fx.scratch.dir,
        &["-C", &d, "config", "receive.denyDeletes", "false"],
    );
    git_root(
        &fx.scratch.dir,
        &["-C", &d, "config", "receive.denyNonFastForwards", "false"],
    );
    git_root(
        &fx.scratch.dir,
        &["-C", &d, "config", "receive.denyDeleteCurrent", "ignore"],
    );
    dst
}

fn commit(fx: &Fx, file: &str, text: &str) {
    std::fs::write(fx.wt.join(file), text).unwrap();
    give(&fx.wt, &fx.who);
    git_as(&fx.who, &fx.wt, &["add", file]);
    git_as(&fx.who, &fx.wt, &["commit", "-q", "-m", file]);
}

fn head(fx: &Fx) -> String {
    String::from_utf8_lossy(&git_as(&fx.who, &fx.wt, &["rev-parse", "HEAD"]).stdout)
        .trim()
        .to_string()
}

// ---------------------------------------------------------------------------------------
// 1. A push to `main` from an approved `make` target.

const MAKEFILE2: &str = "ship:\n\ttouch shipped-by-make\n\tgit push net HEAD:main\n";

struct PushFx {
    fx: Fx,
    daemon: Daemon,
    before: String,
}

fn push_fixture(who: &Who, tag: &str) -> Option<PushFx> {
    let fx = setup(who, tag)?;
    let srv = fx.scratch.dir.join("srv");
    bare_remote(&fx, &srv, "remote.git");
    let daemon = Daemon::start(&srv);
    git_as(
        who,
        &fx.wt,
        &["remote", "add", "net", &daemon.url("remote.git")],
    );
    put(&fx, "Makefile2", MAKEFILE2);
    commit(&fx, "Makefile2", MAKEFILE2);
    let before = daemon.refs("remote.git");
    assert!(!before.contains(&head(&fx)), "the remote starts behind");
    Some(PushFx { fx, daemon, before })
}

/// Checks the push was stopped by tyba as blocked (from outside: the remote's refs; from
/// tyba: its refusal), then pushes without tyba to show the remote takes the push.
fn check_push_refused(p: &PushFx, ran: &Ran, who: &Who, variant: &str) {
    let fx = &p.fx;
    let ctx = format!("{who:?} {variant}: out {} / err {}", ran.out, ran.err);
    assert!(
        fx.wt.join("shipped-by-make").exists(),
        "{ctx}: the approved make target ran"
    );
    assert_eq!(
        p.daemon.refs("remote.git"),
        p.before,
        "{ctx}: the remote's main moved"
    );
    for a in &ran.asks {
        assert!(
            !norm(&action(a)).contains("git push net HEAD:main"),
            "{ctx}: the blocked push was asked instead of refused: {a}"
        );
    }
    let log = log_of(fx);
    // Refused without an ask (the log keeps no verdict for refusals), for the protected ref.
    let in_log = log.iter().any(|l| {
        l["decision"] == "refuse"
            && (l["verdict"] == "blocked" || l["verdict"] == "")
            && norm(&action(l)).contains("git push net HEAD:main")
            && l["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("refs/heads/main")
    });
    let in_summary = ran.err.lines().any(|l| {
        l.starts_with("tyba:   ")
            && norm(l).contains("git push net HEAD:main")
            && l.contains("refs/heads/main")
    });
    assert!(
        in_log || in_summary,
        "{ctx}: no refusal of the push in the log {log:?} or the summary"
    );
    // make saw its recipe line fail with the refusal program's status.
    assert!(
        ran.err.contains("Error 126") && ran.out.contains("make-rc=2"),
        "{ctx}: make's push failed with tyba's status 126"
    );
}

/// The control: the same target without tyba moves the remote's main.
fn control_push(p: &PushFx, who: &Who) {
    let env = base_env(&p.fx.home, &[]);
    let r = outside(
        &p.fx,
        &p.fx.wt,
        &env,
        &["/usr/bin/make", "-f", "Makefile2", "ship"],
    );
    assert_eq!(r.code, 0, "{who:?}: control push: {} / {}", r.out, r.err);
    assert!(
        p.daemon.refs("remote.git").contains(&head(&p.fx)),
        "{who:?}: the control push did not reach the remote: the check above could not fail"
    );
}

/// Issue 14 ("asks that say what will happen"): an exec's ask carries the exec's own argv
/// and working directory (the process's `/proc` still shows the shell before its exec) and
/// the environment assignments judged with it.
#[test]
fn exec_ask_shows_the_execs_own_argv_and_environment() {
    for who in whos() {
        let Some(fx) = setup(&who, "askargv") else {
            continue;
        };
        let live = start(
            &fx,
            &[],
            &fx.env(),
            &[
                "bash",
                "-c",
                "GIT_PAGER='cat; touch pwned' git -p log -n1; echo rc=$?",
            ],
            None,
        );
        let ran = drive(&fx, live, |_| Reply::Deny(None));
        let ctx = format!("{who:?}: {:?}", ran.asks);
        let a = ran
            .asks
            .iter()
            .find(|a| action(a).contains("git -p log"))
            .unwrap_or_else(|| panic!("{ctx}"));
        assert_eq!(
            a["argv"],
            serde_json::json!(["git", "-p", "log", "-n1"]),
            "{ctx}"
        );
        let wt = std::fs::canonicalize(&fx.wt).unwrap();
        assert_eq!(a["cwd"], wt.to_string_lossy().as_ref(), "{ctx}");
        assert_eq!(
            a["env"],
            serde_json::json!(["GIT_PAGER=cat; touch pwned"]),
            "{ctx}"
        );
        assert!(!fx.wt.join("pwned").exists(), "{ctx}");
    }
}

/// Issue 14 ("a complete audit log"): every exec the supervisor allows without asking is in
/// `tyba log --json` with its verdict, rule ids, argv and working directory, and why it ran:
/// the agent program, allowed by the policy, or under an approved command.
#[test]
fn exec_allowed_execs_are_in_the_audit_log() {
    for who in whos() {
        let Some(fx) = setup(&who, "allowlog") else {
            continue;
        };
        put(&fx, "M", "t:\n\tls -a > /dev/null\n");
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &[
                "bash",
                "-c",
                "/bin/true; git status --short > /dev/null; make -s -f M t; echo done",
            ],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(ran.out.contains("done"), "{ctx}");
        let log = log_of(&fx);
        let allowed: Vec<&serde_json::Value> =
            log.iter().filter(|l| l["decision"] == "allow").collect();
        let find = |argv0: &str| {
            allowed
                .iter()
                .find(|l| l["argv"][0] == argv0)
                .unwrap_or_else(|| panic!("{ctx}: no allowed exec of {argv0} in {log:?}"))
        };
        let agent = find("bash");
        assert_eq!(agent["reason"], "the agent program", "{agent}");
        let t = find("/bin/true");
        assert_eq!(t["verdict"], "green", "{t}");
        assert_eq!(t["kind"], "exec", "{t}");
        let wt = std::fs::canonicalize(&fx.wt).unwrap();
        assert_eq!(t["cwd"], wt.to_string_lossy().as_ref(), "{t}");
        let g = find("git");
        assert_eq!(
            g["argv"],
            serde_json::json!(["git", "status", "--short"]),
            "{g}"
        );
        let m = find("make");
        assert!(m["reason"].is_null(), "allowed by the policy: {m}");
        // make runs `ls` through /bin/sh (or directly): under the command allowed above.
        let ls = allowed
            .iter()
            .find(|l| action(l).contains("ls -a"))
            .unwrap_or_else(|| panic!("{ctx}: `ls -a` not logged: {log:?}"));
        assert!(
            ls["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("under the approved command `make")),
            "{ls}"
        );
        // Every allowed line names its session and time.
        assert!(allowed
            .iter()
            .all(|l| l["session"].is_string() && l["time"].is_string()));
    }
}

#[test]
fn exec_makefile_push_to_main_is_refused_although_make_was_approved() {
    for who in whos() {
        let Some(p) = push_fixture(&who, "mkpush") else {
            continue;
        };
        // A person who approves every ask (make, its connect, anything else).
        let live = start(
            &p.fx,
            &[],
            &p.fx.env(),
            &["bash", "-c", "make -f Makefile2 ship; echo make-rc=$?"],
            None,
        );
        let ran = drive(&p.fx, live, |_| Reply::Approve);
        assert!(
            ran.asks
                .iter()
                .any(|a| action(a).contains("make -f Makefile2 ship")),
            "{who:?}: make itself was asked: {:?}",
            ran.asks
        );
        check_push_refused(&p, &ran, &who, "interactive, every ask approved");
        control_push(&p, &who);
    }
}

#[test]
fn exec_makefile_push_to_main_is_refused_at_high_autonomy() {
    for who in whos() {
        // Non-interactive at high autonomy: make (yellow) runs without an ask, the push
        // inside it is refused with nobody to ask.
        let Some(p) = push_fixture(&who, "mkpush-hi") else {
            continue;
        };
        let ran = run_alone(
            &p.fx,
            &["--autonomy", "high"],
            &p.fx.env(),
            &["bash", "-c", "make -f Makefile2 ship; echo make-rc=$?"],
        );
        check_push_refused(&p, &ran, &who, "non-interactive, high autonomy");
        // Interactive at high autonomy, every ask approved.
        let Some(p) = push_fixture(&who, "mkpush-hi2") else {
            continue;
        };
        let live = start(
            &p.fx,
            &["--autonomy", "high"],
            &p.fx.env(),
            &["bash", "-c", "make -f Makefile2 ship; echo make-rc=$?"],
            None,
        );
        let ran = drive(&p.fx, live, |_| Reply::Approve);
        check_push_refused(&p, &ran, &who, "interactive, high autonomy");
        control_push(&p, &who);
    }
}

#[test]
fn exec_makefile_push_non_interactive_medium_refuses_make_itself() {
    for who in whos() {
        let Some(p) = push_fixture(&who, "mkpush-ni") else {
            continue;
        };
        let ran = run_alone(
            &p.fx,
            &[],
            &p.fx.env(),
            &["bash", "-c", "make -f Makefile2 ship; echo make-rc=$?"],
        );
        assert!(ran.out.contains("make-rc=126"), "{who:?}: {ran:?}");
        assert!(!p.fx.wt.join("shipped-by-make").exists(), "{who:?}");
        assert_eq!(p.daemon.refs("remote.git"), p.before, "{who:?}");
        control_push(&p, &who);
    }
}

/// A red descendant of an approved command is asked, naming the approved command, never
/// rememberable; with nobody to ask it is refused. (DESIGN of issue 11: yellow descendants of
/// an approved build pass, red ones are asked.)
#[test]
fn exec_red_descendant_of_an_approved_make_is_asked_naming_it() {
    for who in whos() {
        let Some(fx) = setup(&who, "red-desc") else {
            continue;
        };
        put(
            &fx,
            "Makefile2",
            "clean:\n\ttouch cleaned-by-make\n\trm -rf build\n",
        );
        make_build(&fx);
        let live = start(
            &fx,
            &[],
            &fx.env(),
            &["bash", "-c", "make -f Makefile2 clean; echo make-rc=$?"],
            None,
        );
        let ran = drive(&fx, live, |a| {
            if action(a).contains("make -f Makefile2 clean") {
                Reply::Approve
            } else {
                Reply::Deny(Some("use git clean"))
            }
        });
        let ctx = format!(
            "{who:?}: out {} / err {} / asks {:?}",
            ran.out, ran.err, ran.asks
        );
        assert!(
            fx.wt.join("cleaned-by-make").exists(),
            "{ctx}: the yellow touch passed"
        );
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}: build/ removed");
        assert_eq!(
            ran.asks.len(),
            2,
            "{ctx}: make, then its rm (not its touch)"
        );
        let rm = &ran.asks[1];
        assert!(norm(&action(rm)).contains("rm -rf build"), "{ctx}");
        assert_eq!(rm["verdict"], "red", "{ctx}");
        assert_eq!(rm["always_allowed"], false, "{ctx}");
        assert!(
            rm["reasons"].as_array().into_iter().flatten().any(|r| r
                .as_str()
                .unwrap_or_default()
                .contains("make -f Makefile2 clean")),
            "{ctx}: the ask names the approved command"
        );
        assert!(
            ran.err.contains("tyba: use git clean") && ran.out.contains("make-rc=2"),
            "{ctx}"
        );
        // Nobody to ask, high autonomy: make passes, its rm is refused.
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &["bash", "-c", "make -f Makefile2 clean; echo make-rc=$?"],
        );
        assert!(fx.wt.join("build/out.o").exists(), "{who:?}: {ran:?}");
        assert!(ran.out.contains("make-rc=2"), "{who:?}: {ran:?}");
        // Control: without tyba the target removes build/.
        let dir = copy_of_wt(&fx, "red-desc-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/make", "-f", "Makefile2", "clean"],
        );
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// A red descendant that passes under its approved command says so in the audit log: a
/// recipe step red only for reading what the agent's own domain reads (`ls /usr/share`) runs
/// (the kernel holds the same line), logged `red`, its reason naming the approved command
/// and why it was covered; a red one reaching further (`cat ~/.bashrc`, outside the agent's
/// domain) is still refused with nobody to ask. Control: without tyba both run.
#[test]
fn exec_red_descendant_covered_by_its_approval_says_which_in_the_log() {
    for who in whos() {
        let Some(fx) = setup(&who, "red-covered") else {
            continue;
        };
        std::fs::write(fx.home.join(".bashrc"), "# the person's\n").unwrap();
        give(&fx.home, &who);
        put(
            &fx,
            "Makefile3",
            "peek:\n\tls /usr/share > listed.txt\n\tcat ~/.bashrc > copied.txt\n",
        );
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &["bash", "-c", "make -f Makefile3 peek; echo make-rc=$?"],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(fx.wt.join("listed.txt").exists(), "{ctx}");
        let copied = std::fs::read_to_string(fx.wt.join("copied.txt")).unwrap_or_default();
        assert!(!copied.contains("the person's"), "{ctx}");
        assert!(ran.out.contains("make-rc=2"), "{ctx}");
        let log = log_of(&fx);
        let ls = log
            .iter()
            .find(|e| e["argv"][0] == "ls")
            .unwrap_or_else(|| panic!("{ctx}: {log:?}"));
        assert_eq!(ls["verdict"], "red", "{ctx}: {ls}");
        assert_eq!(ls["decision"], "allow", "{ctx}: {ls}");
        let why = ls["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("under the approved command `make -f Makefile3 peek`")
                && why.contains("red only for reading what the agent's own domain reads"),
            "{ctx}: {ls}"
        );
        // Control: without tyba the recipe copies the person's file.
        let dir = copy_of_wt(&fx, "red-covered-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/make", "-f", "Makefile3", "peek"],
        );
        let copied = std::fs::read_to_string(dir.join("copied.txt")).unwrap_or_default();
        assert!(copied.contains("the person's"), "{who:?}: control: {r:?}");
    }
}

/// A build's own tools set code-running variables for the programs they start (cargo gives
/// each `rustc` and test binary `LD_LIBRARY_PATH=<worktree>/target/debug/deps:<toolchain>/lib`):
/// under an approved command such a value naming only the agent's own domain passes, logged
/// as covered, while one naming a place outside it (the home) is still refused with nobody to
/// ask. Control: without tyba both run.
#[test]
fn exec_a_builds_own_library_path_under_its_approval_passes() {
    for who in whos() {
        let Some(fx) = setup(&who, "ld-desc") else {
            continue;
        };
        std::fs::create_dir_all(fx.wt.join("lib")).unwrap();
        put(
            &fx,
            "spawn.py",
            "import os, subprocess, sys\nlib = os.getcwd() + '/lib:/usr/lib' if sys.argv[1] == 'in-domain' else os.environ['HOME'] + '/.local/lib'\nenv = dict(os.environ, LD_LIBRARY_PATH=lib)\nrc = subprocess.run(['/bin/true'], env=env).returncode\nif rc == 0:\n    open(sys.argv[1], 'w').close()\n",
        );
        put(
            &fx,
            "Makefile5",
            "libs:\n\tpython3 spawn.py in-domain\n\t-python3 spawn.py outside\n",
        );
        give(&fx.wt, &who);
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &["bash", "-c", "make -f Makefile5 libs; echo make-rc=$?"],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(
            fx.wt.join("in-domain").exists(),
            "{ctx}: the build's own path passed"
        );
        assert!(
            !fx.wt.join("outside").exists(),
            "{ctx}: a path outside is refused"
        );
        let log = log_of(&fx);
        let covered = log
            .iter()
            .find(|e| e["argv"][0] == "/bin/true" && e["decision"] == "allow")
            .unwrap_or_else(|| panic!("{ctx}: {log:?}"));
        assert!(
            covered["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("red only for a code-running variable"),
            "{ctx}: {covered}"
        );
        // Control: without tyba both run.
        let dir = copy_of_wt(&fx, "ld-desc-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/make", "-f", "Makefile5", "libs"],
        );
        assert!(
            dir.join("in-domain").exists() && dir.join("outside").exists(),
            "{who:?}: control: {r:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 2. Code-running configuration through the environment (GIT_CONFIG_*, GIT_PAGER, PAGER).

/// The agent: runs `git log -n1` (and `git -p log -n1`) on a pseudo-terminal it opens (git
/// starts no pager without a terminal on stdout, whatever `-p` says), once per form of
/// pager configuration, each form with its own victim `notes_F.md` and marker `pwned_F`.
const PAGER_AGENT: &str = r#"
import json, os, subprocess, sys

def pager(form):
    return "rm -f notes_%s.md; touch pwned_%s; cat" % (form, form)

FORMS = [
    ("config", ["git", "log", "-n1"], lambda f: {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.pager", "GIT_CONFIG_VALUE_0": pager(f)}),
    ("configp", ["git", "-p", "log", "-n1"], lambda f: {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.pager", "GIT_CONFIG_VALUE_0": pager(f)}),
    ("gitpager", ["git", "log", "-n1"], lambda f: {"GIT_PAGER": pager(f)}),
    ("pager", ["git", "log", "-n1"], lambda f: {"PAGER": pager(f)}),
    ("params", ["git", "log", "-n1"], lambda f: {"GIT_CONFIG_PARAMETERS": "'core.pager'='%s'" % pager(f)}),
]
only = sys.argv[1:]
for form, argv, extra in FORMS:
    if only and form not in only:
        continue
    env = dict(os.environ)
    env.update(extra(form))
    m, s = os.openpty()
    try:
        p = subprocess.Popen(argv, stdin=s, stdout=s, stderr=s, env=env)
        os.close(s)
        out = b""
        while True:
            try:
                b = os.read(m, 4096)
            except OSError:
                break
            if not b:
                break
            out += b
        rc = p.wait()
        print("RESULT " + json.dumps({"step": form, "rc": rc, "out": out.decode(errors="replace")}), flush=True)
    except OSError as e:
        os.close(s)
        print("RESULT " + json.dumps({"step": form, "errno": e.errno}), flush=True)
"#;

const PAGER_FORMS: &[&str] = &["config", "configp", "gitpager", "pager", "params"];

fn pager_fixture(who: &Who, tag: &str) -> Option<Fx> {
    let fx = setup(who, tag)?;
    put(&fx, "pager_agent.py", PAGER_AGENT);
    for f in PAGER_FORMS {
        put(&fx, &format!("notes_{f}.md"), "keep me\n");
    }
    Some(fx)
}

/// The control: outside tyba, on a copy, every form runs the pager (the victim goes, the
/// marker comes), so the checks in the sessions can fail.
fn control_pager(fx: &Fx, who: &Who) {
    let dir = copy_of_wt(fx, "pager-control");
    let r = outside(
        fx,
        &dir,
        &base_env(&fx.home, &[]),
        &["/usr/bin/python3", "pager_agent.py"],
    );
    for f in PAGER_FORMS {
        assert!(
            dir.join(format!("pwned_{f}")).exists() && !dir.join(format!("notes_{f}.md")).exists(),
            "{who:?}: control: the {f} form did not run its pager without tyba: {} / {}",
            r.out,
            r.err
        );
    }
}

fn check_pager_effects(fx: &Fx, who: &Who, ran: &Ran) {
    for f in PAGER_FORMS {
        assert!(
            fx.wt.join(format!("notes_{f}.md")).exists(),
            "{who:?}: the {f} pager deleted its victim: {} / {}",
            ran.out,
            ran.err
        );
        assert!(
            !fx.wt.join(format!("pwned_{f}")).exists(),
            "{who:?}: the {f} pager ran: {} / {}",
            ran.out,
            ran.err
        );
    }
}

#[test]
fn exec_environment_pager_is_classified_and_refused_non_interactive() {
    for who in whos() {
        let Some(fx) = pager_fixture(&who, "pager-ni") else {
            continue;
        };
        let ran = run_alone(&fx, &[], &fx.env(), &["python3", "pager_agent.py"]);
        check_pager_effects(&fx, &who, &ran);
        let rs = results(&ran.out);
        for f in PAGER_FORMS {
            let r = result(&rs, f).unwrap_or_else(|| panic!("{who:?}: no {f}: {ran:?}"));
            // The git exec itself is refused (the refusal program's status), not the pager
            // after git ran.
            assert_eq!(r["rc"], 126, "{who:?}: {f}: {r}");
            assert!(
                r["out"].as_str().unwrap_or_default().starts_with("tyba: "),
                "{who:?}: {f}: the caller reads tyba's reason first: {r}"
            );
        }
        // The refusals name the variables that made the command red, with their values.
        for (f, var) in [
            ("config", "GIT_CONFIG_VALUE_0="),
            ("configp", "GIT_CONFIG_VALUE_0="),
            ("gitpager", "GIT_PAGER="),
            ("pager", "PAGER="),
            ("params", "GIT_CONFIG_PARAMETERS="),
        ] {
            assert!(
                ran.err.lines().any(|l| l.starts_with("tyba:   ")
                    && l.contains(var)
                    && l.contains(&format!("notes_{f}.md"))
                    && l.contains("log -n1")),
                "{who:?}: the summary shows {var} of the {f} form: {}",
                ran.err
            );
        }
        control_pager(&fx, &who);
    }
}

#[test]
fn exec_environment_pager_is_asked_with_the_variables_and_a_deny_holds() {
    for who in whos() {
        let Some(fx) = pager_fixture(&who, "pager-ask") else {
            continue;
        };
        let live = start(
            &fx,
            &[],
            &fx.env(),
            &["python3", "pager_agent.py", "config", "gitpager"],
            None,
        );
        let ran = drive(&fx, live, |_| Reply::Deny(Some("no pagers")));
        let git_asks: Vec<&serde_json::Value> = ran
            .asks
            .iter()
            .filter(|a| action(a).contains("git"))
            .collect();
        assert_eq!(
            git_asks.len(),
            2,
            "{who:?}: one ask per git exec: {:?}",
            ran.asks
        );
        assert!(
            git_asks.iter().any(|a| {
                let t = action(a);
                t.contains("GIT_CONFIG_KEY_0=core.pager")
                    && t.contains("GIT_CONFIG_VALUE_0=")
                    && t.contains("rm -f notes_config.md")
                    && t.contains("git log -n1")
            }),
            "{who:?}: the ask shows the variables: {git_asks:?}"
        );
        assert!(
            git_asks
                .iter()
                .any(|a| action(a).contains("GIT_PAGER=") && action(a).contains("pwned_gitpager")),
            "{who:?}: {git_asks:?}"
        );
        for a in &git_asks {
            assert_eq!(a["verdict"], "red", "{who:?}: {a}");
        }
        for f in ["config", "gitpager"] {
            assert!(fx.wt.join(format!("notes_{f}.md")).exists(), "{who:?}: {f}");
            assert!(!fx.wt.join(format!("pwned_{f}")).exists(), "{who:?}: {f}");
        }
        let rs = results(&ran.out);
        for f in ["config", "gitpager"] {
            let r = result(&rs, f).unwrap_or_else(|| panic!("{who:?}: {ran:?}"));
            assert!(
                r["out"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("tyba: no pagers"),
                "{who:?}: the person's reason reaches the caller: {r}"
            );
        }
        control_pager(&fx, &who);
    }
}

/// git's own pager (`less`, git's default) for a green `git log` on a terminal is no
/// change of configuration: it must run unasked. git exports `GIT_EXEC_PATH` (its own
/// `--exec-path`) and `GIT_PREFIX` to every program it starts, so judging the variables a
/// covered program sets for its own children against the cover's environment makes the pager
/// red ("`export GIT_EXEC_PATH` makes programs run code"), and the same for git's hooks,
/// editors and helpers (as it did before `GIT_EXEC_PATH` under system paths was taken as the
/// system's own).
/// A gconv module: glibc's `iconv_open(3)` loads it from the directory `$GCONV_PATH` names
/// (with its `gconv-modules` file). Its constructor writes `gconv-code-ran` in the working
/// directory: the agent's native code ran.
const GCONV_C: &str = r#"
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
  int fd = open("gconv-code-ran", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) { write(fd, "ran\n", 4); close(fd); }
}
int gconv_init(void *s) { return 1; }
int gconv(void *a, void *b, const unsigned char **c, const unsigned char *d,
          unsigned char **e, void *f, int g, int h) { return 1; }
"#;

const GCONV_MODULES: &str = "module EVIL// INTERNAL EVIL 1\nmodule INTERNAL EVIL// EVIL 1\n";

/// The review's shape (the agent is a shell: `export` is a builtin, `git log --encoding=EVIL`
/// is green) and the other ways the variable reaches an exec: at depth (`bash -c` inheriting
/// it), as a prefix, through `env`. Then the same green command with a variable of the list
/// whose value loads nothing (`PYTHONWARNINGS=ignore`: it runs), and with one whose value
/// does (a dotted category: it is refused). Each step prints `RESULT {step, rc}`.
const GCONV_AGENT: &str = r#"
step() { echo "RESULT {\"step\": \"$1\", \"rc\": $2}"; }
export GCONV_PATH="$PWD"
git log --encoding=EVIL -1 >/dev/null 2>&1; step export $?
bash -c 'git log --encoding=EVIL -1 >/dev/null 2>&1'; step depth $?
unset GCONV_PATH
GCONV_PATH="$PWD" git log --encoding=EVIL -1 >/dev/null 2>&1; step prefix $?
env GCONV_PATH="$PWD" git log --encoding=EVIL -1 >/dev/null 2>&1; step env $?
export PYTHONWARNINGS=ignore
git log -1 --oneline >/dev/null 2>&1; step inert $?
export PYTHONWARNINGS=error::evil.Warning
git log -1 --oneline >/dev/null 2>&1; step module $?
"#;

/// `GCONV_PATH` (like every variable of DESIGN.md §2a's list) in an exec's environment is an
/// assignment on its command line: the green `git log --encoding=EVIL` the review ran with
/// it exported is refused, at every depth and however it was set, and the agent's module
/// never loads. `--autonomy high` (yellow passes by itself, so the `bash -c` step is refused
/// for the variable, not for being yellow; red is asked, and refused in a non-interactive
/// session). The control runs the same script without tyba: the module loads.
#[test]
fn exec_environment_gconv_path_is_classified_and_refused() {
    for who in whos() {
        let Some(fx) = setup(&who, "gconv") else {
            continue;
        };
        put(&fx, "evil.c", GCONV_C);
        put(&fx, "gconv-modules", GCONV_MODULES);
        let st = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(fx.wt.join("EVIL.so"))
            .arg(fx.wt.join("evil.c"))
            .status()
            .unwrap();
        assert!(st.success(), "cc");
        give(&fx.wt, &who);
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &["/bin/bash", "-c", GCONV_AGENT],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(
            !fx.wt.join("gconv-code-ran").exists(),
            "{ctx}: the module ran"
        );
        let rs = results(&ran.out);
        for step in ["export", "depth", "prefix", "env", "module"] {
            let r = result(&rs, step).unwrap_or_else(|| panic!("{ctx}: no {step}"));
            assert_eq!(r["rc"], 126, "{ctx}: {step} was not refused");
        }
        assert_eq!(
            result(&rs, "inert").map(|r| r["rc"].clone()),
            Some(serde_json::json!(0)),
            "{ctx}: a value that loads nothing was refused"
        );
        assert!(
            ran.err
                .lines()
                .any(|l| l.starts_with("tyba:   exec ") && l.contains("GCONV_PATH=")),
            "{ctx}: the summary names the variable"
        );
        // Control: without tyba every step loads the module.
        let dir = copy_of_wt(&fx, "gconv-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/bin/bash", "-c", GCONV_AGENT],
        );
        assert!(
            dir.join("gconv-code-ran").exists(),
            "{who:?}: control: the module did not run without tyba: {} / {}",
            r.out,
            r.err
        );
    }
}

#[test]
fn exec_git_log_on_a_terminal_runs_its_own_pager_unasked() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-pager") else {
            continue;
        };
        put(&fx, "pty.py", PTY_PY);
        // less needs a terminal type to page (and quits at once on one screen with -F).
        let env = env_with(&fx, &[("LESS", "FRX".into()), ("TERM", "xterm".into())]);
        let ran = run_alone(&fx, &[], &env, &["python3", "pty.py", "git", "log", "-n1"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        let r = result(&rs, "pty").unwrap_or_else(|| panic!("{ctx}"));
        assert_eq!(r["rc"], 0, "{ctx}: {r}");
        assert!(
            r["out"].as_str().unwrap_or_default().contains("commit "),
            "{ctx}"
        );
        assert!(!ran.err.contains("denied in this session"), "{ctx}");
        // Control: without tyba the same agent sees git's output through its pager.
        let r = outside(
            &fx,
            &fx.wt,
            &base_env(
                &fx.home,
                &[("LESS", "FRX".into()), ("TERM", "xterm".into())],
            ),
            &["/usr/bin/python3", "pty.py", "git", "log", "-n1"],
        );
        let rs = results(&r.out);
        assert_eq!(
            result(&rs, "pty").unwrap()["rc"],
            0,
            "{who:?}: control: {r:?}"
        );
    }
}

/// Writes the executable script `rel` (under `dir`) with `body`.
fn script(dir: &Path, rel: &str, body: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// Toolchain parents that set code-running variables for the programs they start, as
/// rustup's proxy (`~/.cargo/bin/cargo`, a link to `rustup`, sets `LD_LIBRARY_PATH` to its
/// toolchain's `lib` and execs the toolchain's `cargo`) and npm (exports `EDITOR=vi` into
/// every script it runs) do: a value naming only files in roots the sandbox keeps read-only
/// (the policy's `read_only` `~/.rustup`, system paths) or a viewer found there injects no
/// code, so the exec is not red and runs at high autonomy unasked. A parent naming a
/// directory of the worktree is red, but under its own allowed command it only loads code
/// the command could run anyway, so it passes, logged so; the same value set by the agent
/// itself, and `EDITOR=sh` (which runs what it is handed), are still red: refused with nobody
/// to ask. Effects checked from outside; the control runs them all.
#[test]
fn exec_toolchain_parents_setting_kept_paths_are_not_red() {
    for who in whos() {
        let Some(fx) = setup(&who, "kept-env") else {
            continue;
        };
        let h = &fx.home;
        std::fs::create_dir_all(h.join(".rustup/toolchains/t/lib")).unwrap();
        script(
            h,
            ".rustup/toolchains/t/bin/cargo",
            "#!/bin/sh\necho \"cargo $1 LD=$LD_LIBRARY_PATH\" > \"ran-$1\"\n",
        );
        script(
            h,
            ".cargo/bin/rustup",
            "#!/bin/sh\nLD_LIBRARY_PATH=\"$HOME/.rustup/toolchains/t/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\" \
             exec \"$HOME/.rustup/toolchains/t/bin/$(basename \"$0\")\" \"$@\"\n",
        );
        std::os::unix::fs::symlink("rustup", h.join(".cargo/bin/cargo")).unwrap();
        script(
            h,
            ".cargo/bin/cargo-bad",
            "#!/bin/sh\nLD_LIBRARY_PATH=\"$PWD/lib\" exec \"$HOME/.rustup/toolchains/t/bin/cargo\" bad\n",
        );
        script(
            h,
            ".local/bin/fnpm",
            "#!/bin/sh\nEDITOR=vi exec /bin/sh -c 'echo \"npm EDITOR=$EDITOR\" > ran-npm'\n",
        );
        script(
            h,
            ".local/bin/fnpm-sh",
            "#!/bin/sh\nEDITOR=sh exec /bin/sh -c 'echo npm > ran-npm-sh'\n",
        );
        give(h, &who);
        let path: OsString = format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            h.join(".cargo/bin").display(),
            h.join(".local/bin").display()
        )
        .into();
        let line = "cargo test; echo cargo-rc=$?; fnpm; echo npm-rc=$?; \
                    cargo-bad; echo bad-rc=$?; fnpm-sh; echo npmsh-rc=$?; \
                    LD_LIBRARY_PATH=$PWD/lib /bin/sh -c 'echo direct > ran-direct'; echo direct-rc=$?";
        let env = env_with(&fx, &[("PATH", path.clone())]);
        let ran = run_alone(&fx, &["--autonomy", "high"], &env, &["bash", "-c", line]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(ran.out.contains("cargo-rc=0"), "{ctx}");
        assert!(ran.out.contains("npm-rc=0"), "{ctx}");
        let cargo = std::fs::read_to_string(fx.wt.join("ran-test")).unwrap_or_default();
        assert!(cargo.contains(".rustup/toolchains/t/lib"), "{ctx}: {cargo}");
        let npm = std::fs::read_to_string(fx.wt.join("ran-npm")).unwrap_or_default();
        assert_eq!(npm.trim(), "npm EDITOR=vi", "{ctx}");
        assert!(ran.out.contains("bad-rc=0"), "{ctx}");
        assert!(fx.wt.join("ran-bad").exists(), "{ctx}");
        assert!(ran.out.contains("npmsh-rc=126"), "{ctx}");
        assert!(!fx.wt.join("ran-npm-sh").exists(), "{ctx}");
        assert!(ran.err.contains("EDITOR=sh"), "{ctx}");
        assert!(ran.out.contains("direct-rc=126"), "{ctx}");
        assert!(!fx.wt.join("ran-direct").exists(), "{ctx}");
        assert!(ran.err.contains("LD_LIBRARY_PATH"), "{ctx}");
        // `cargo`, found on PATH as `~/.cargo/bin/cargo` (a link to `rustup`), is judged as
        // the `cargo` the person typed; the toolchain's `cargo` its proxy runs by path, too.
        let log = log_of(&fx);
        let by_argv0 = |a0: &str| {
            log.iter()
                .find(|e| e["argv"][0].as_str().is_some_and(|a| a.ends_with(a0)))
                .unwrap_or_else(|| panic!("{ctx}: no exec of {a0} in {log:?}"))
        };
        for a0 in ["cargo", "/.rustup/toolchains/t/bin/cargo"] {
            let e = by_argv0(a0);
            assert_eq!(e["action"], "cargo test", "{ctx}: {e}");
            assert_eq!(e["verdict"], "yellow", "{ctx}: {e}");
        }
        // Control: without tyba every parent runs its child.
        let dir = copy_of_wt(&fx, "kept-env-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[("PATH", path.clone())]),
            &["/bin/bash", "-c", line],
        );
        for f in ["ran-test", "ran-npm", "ran-bad", "ran-npm-sh", "ran-direct"] {
            assert!(dir.join(f).exists(), "{who:?}: control {f}: {r:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 3. An approval covers the exec it was made for, and a failed exec keeps no approval.

/// The agent (Python): forked children, each of which tries an exec that fails and then
/// `execv("/usr/bin/rm", ["rm", "-rf", "build"])` in the same process. Before each step it
/// writes the step's name to `step.txt` (for the scripted person):
/// - `missing`: `/nonexistent-dir/cargo build` (ENOENT: must not be asked);
/// - `noexec`: `./plain.txt`, a file without the x bit (EACCES: must not be asked);
/// - `e2big`: `rm -rf build` itself with one environment string longer than the kernel's
///   `MAX_ARG_STRLEN` (128 KiB): E2BIG (`execve(2)`), answered before anything is decided;
/// - `true`: `/usr/bin/true` (green) failing the same way;
/// - `vanish`: `./lnk -rf build`, `lnk` a link to `/usr/bin/rm` made by the child (red:
///   asked); the person removes the link and approves once, so the approved exec fails
///   (ENOENT); the child makes the link again and execs the same line: asked again (instead
///   of `rm`, the second exec is this same line).
const FAILED_EXEC_AGENT: &str = r#"
import json, os, sys

def attempt(step, path, argv, env):
    with open("step.txt", "w") as f:
        f.write(step)
    if step == "vanish":
        os.symlink("/usr/bin/rm", "lnk")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.execve(path, argv, env)
        except OSError as e:
            os.write(w, str(e.errno).encode())
        os.close(w)
        again = ("./lnk", ["./lnk", "-rf", "build"]) if step == "vanish" else ("/usr/bin/rm", ["rm", "-rf", "build"])
        if step == "vanish":
            os.symlink("/usr/bin/rm", "lnk")
        try:
            os.execv(*again)
        except OSError as e:
            os._exit(200 + e.errno % 50)
    os.close(w)
    first = b""
    while True:
        b = os.read(r, 64)
        if not b:
            break
        first += b
    _, st = os.waitpid(pid, 0)
    print("RESULT " + json.dumps({"step": step, "first_errno": int(first or b"0"), "rc": os.waitstatus_to_exitcode(st), "build": os.path.isdir("build")}), flush=True)

env = dict(os.environ)
big = dict(env, TYBA_TEST_BIG="x" * 140000)
steps = sys.argv[1:] or ["missing", "noexec", "e2big", "true", "vanish"]
for s in steps:
    if s == "missing":
        attempt(s, "/nonexistent-dir/cargo", ["cargo", "build"], env)
    elif s == "noexec":
        attempt(s, "./plain.txt", ["plain.txt"], env)
    elif s == "e2big":
        attempt(s, "/usr/bin/rm", ["rm", "-rf", "build"], big)
    elif s == "true":
        attempt(s, "/usr/bin/true", ["true"], big)
    elif s == "vanish":
        attempt(s, "./lnk", ["./lnk", "-rf", "build"], env)
"#;

const ENOENT: i64 = 2;
const EACCES: i64 = 13;
const E2BIG: i64 = 7;

#[test]
fn exec_failed_exec_keeps_no_approval_and_missing_files_are_not_asked() {
    for who in whos() {
        let Some(fx) = setup(&who, "failed-exec") else {
            continue;
        };
        put(&fx, "agent.py", FAILED_EXEC_AGENT);
        put(&fx, "plain.txt", "#!/bin/sh\nrm -rf build\n");
        make_build(&fx);
        // The person removes the link and approves the first exec of the `vanish` step (which
        // then fails), and denies every other ask, with a reason.
        let step_file = fx.wt.join("step.txt");
        let link = fx.wt.join("lnk");
        let mut approved = false;
        let live = start(&fx, &[], &fx.env(), &["python3", "agent.py"], None);
        let ran = drive(&fx, live, |_| {
            let step = std::fs::read_to_string(&step_file).unwrap_or_default();
            if step == "vanish" && !approved {
                approved = true;
                std::fs::remove_file(&link).unwrap();
                Reply::Approve
            } else {
                Reply::Deny(Some("not now"))
            }
        });
        let ctx = format!(
            "{who:?}: out {} / err {} / asks {:?}",
            ran.out,
            ran.err,
            brief(&ran.asks)
        );
        assert!(
            fx.wt.join("build/out.o").exists(),
            "{ctx}: build/ was removed"
        );
        // Nothing was asked or logged about the missing or non-executable files.
        for what in ["cargo", "plain.txt"] {
            assert!(
                !ran.asks.iter().any(|a| action(a).contains(what)),
                "{ctx}: {what} was asked about"
            );
            assert!(
                !log_of(&fx).iter().any(|l| action(l).contains(what)),
                "{ctx}: {what} was logged"
            );
        }
        let rs = results(&ran.out);
        let get = |s: &str| {
            result(&rs, s)
                .unwrap_or_else(|| panic!("{ctx}: no {s}"))
                .clone()
        };
        assert_eq!(get("missing")["first_errno"], ENOENT, "{ctx}");
        assert_eq!(get("noexec")["first_errno"], EACCES, "{ctx}");
        assert_eq!(get("e2big")["first_errno"], E2BIG, "{ctx}");
        assert_eq!(get("true")["first_errno"], E2BIG, "{ctx}");
        assert!(approved, "{ctx}: the vanish exec was never asked");
        assert_eq!(
            get("vanish")["first_errno"],
            ENOENT,
            "{ctx}: the approved exec failed"
        );
        // Each step's later exec was asked, and denied: the refusal program ran in the
        // process (status 126) with the person's reason.
        for s in ["missing", "noexec", "e2big", "true", "vanish"] {
            assert_eq!(get(s)["rc"], 126, "{ctx}: {s}");
        }
        let rm_asks = ran
            .asks
            .iter()
            .filter(|a| norm(&action(a)) == "run rm -rf build")
            .count();
        assert_eq!(rm_asks, 4, "{ctx}: one ask per later `rm -rf build`");
        let lnk_asks = ran
            .asks
            .iter()
            .filter(|a| norm(&action(a)) == "run ./lnk -rf build")
            .count();
        assert_eq!(
            lnk_asks, 2,
            "{ctx}: the line approved for the exec that failed is asked again"
        );
        assert_eq!(ran.asks.len(), 6, "{ctx}");
        for a in &ran.asks {
            assert_eq!(a["verdict"], "red", "{ctx}");
        }
        assert_eq!(
            ran.err.matches("tyba: not now").count(),
            5,
            "{ctx}: the person's reason reached each refused process"
        );
        // Control: outside tyba the e2big step's first exec fails the same way and the rm
        // after it removes build/, so the checks above can fail (the vanish step's second
        // exec is the same rm through the link).
        let dir = copy_of_wt(&fx, "failed-exec-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/python3", "agent.py", "e2big"],
        );
        let rs = results(&r.out);
        assert_eq!(
            result(&rs, "e2big").unwrap()["first_errno"],
            E2BIG,
            "{who:?}: {r:?}"
        );
        assert!(
            !dir.join("build").exists(),
            "{who:?}: control: the rm after the failed exec removes build/"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 4. The agent's own re-launch is the agent, and its commands are still commands.

const FAKE_AGENT_JS: &str = r#"#!/usr/bin/env node
// A fake agent, installed like an npm package: it re-launches itself under node with a
// bigger heap (as Gemini CLI does), and the child runs the agent's commands. `fake-agent
// probe` and `fake-agent race` are the hostile variants of the tests below.
const cp = require('child_process');
const fs = require('fs');
const out = (o) => console.log('RESULT ' + JSON.stringify(o));
const mode = process.argv[2];
if (process.argv.includes('-rf')) {
  // Run through the swapped link: the agent's own file, doing nothing.
  process.exit(0);
} else if (mode === 'probe') {
  // Its own interpreter, but carrying other code: never the agent.
  const probes = [
    ['eval', process.execPath, ['-e', "require('fs').writeFileSync('pwned_eval', 'x')"], {}],
    ['require', process.execPath, ['--require', './evil.js', __filename, '--child'], {}],
    ['worktree_script', process.execPath, ['./evil.js'], {}],
  ];
  for (const [step, file, args, env] of probes) {
    const r = cp.spawnSync(file, args, { encoding: 'utf8', env: Object.assign({}, process.env, env, { EVIL_STEP: step }) });
    out({ step, status: r.status, stderr: r.stderr, error: r.error ? r.error.code : null });
  }
} else if (mode === 'node_options') {
  // Its own file, but with NODE_OPTIONS loading other code.
  const r = cp.spawnSync(process.execPath, [__filename, '--child'], { encoding: 'utf8', env: Object.assign({}, process.env, { NODE_OPTIONS: '--require ./evil.js', EVIL_STEP: 'node_options' }) });
  out({ step: 'node_options', status: r.status, stderr: r.stderr, error: r.error ? r.error.code : null });
} else if (mode === 'race') {
  // Swaps a link in the worktree between its own agent.js and /usr/bin/rm while it execs
  // the link: a decision made on one file must not run the other.
  const { Worker } = require('worker_threads');
  fs.symlinkSync(__filename, 'lnk');
  const w = new Worker(`
    const fs = require('fs');
    const targets = [${JSON.stringify(__filename)}, '/usr/bin/rm'];
    let i = 0;
    while (!fs.existsSync('stop')) {
      try { fs.symlinkSync(targets[i++ % 2], 'lnk.tmp'); fs.renameSync('lnk.tmp', 'lnk'); } catch (e) {}
    }`, { eval: true });
  let runs = 0, zero = 0;
  for (; runs < 1000 && fs.existsSync('build'); runs++) {
    const r = cp.spawnSync('./lnk', ['-rf', 'build'], { encoding: 'utf8' });
    if (r.status === 0) zero++;
  }
  fs.writeFileSync('stop', '');
  w.terminate();
  out({ step: 'race', runs, zero, build: fs.existsSync('build') });
} else if (!process.argv.includes('--child')) {
  const r = cp.spawnSync(process.execPath, ['--max-old-space-size=256', __filename, '--child'], { stdio: 'inherit' });
  out({ step: 'relaunch', status: r.status, error: r.error ? r.error.code : null });
  process.exit(r.status === null ? 99 : r.status);
} else {
  out({ step: 'child-start' });
  const r = cp.spawnSync('rm', ['-rf', 'build'], { encoding: 'utf8' });
  out({ step: 'rm', status: r.status, stderr: r.stderr, error: r.error ? r.error.code : null });
  process.stderr.write(r.stderr || '');
}
"#;

/// The code the hostile variants try to load: it leaves a marker named by its step.
const EVIL_JS: &str = "require('fs').writeFileSync('pwned_' + process.env.EVIL_STEP, 'x');\n";

struct AgentFx {
    fx: Fx,
    policy: PathBuf,
    path: OsString,
}

/// The fake agent under `~/.npm-global` (outside the worktree), named by `PATH`, and a policy
/// file opening that directory read-only (`[filesystem] read_only`, docs/policy.md): the
/// default policy opens `~/.local/bin` but no `node_modules` tree.
fn agent_fixture(who: &Who, tag: &str) -> Option<AgentFx> {
    let fx = setup(who, tag)?;
    let bin = install_npm_agent(&fx.home.join(".npm-global"), FAKE_AGENT_JS);
    give(&fx.home, who);
    let policy = fx.scratch.dir.join("f/agent-policy.toml");
    std::fs::write(&policy, "[filesystem]\nread_only = [\"~/.npm-global\"]\n").unwrap();
    make_build(&fx);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()).into();
    Some(AgentFx { fx, policy, path })
}

#[test]
fn exec_agent_relaunch_is_the_agent_and_its_commands_are_still_asked() {
    for who in whos() {
        let Some(a) = agent_fixture(&who, "relaunch") else {
            continue;
        };
        let fx = &a.fx;
        let env = env_with(fx, &[("PATH", a.path.clone())]);
        let policy = a.policy.display().to_string();
        let live = start(fx, &["--policy", &policy], &env, &["fake-agent"], None);
        let ran = drive(fx, live, |_| Reply::Deny(Some("keep the build")));
        let ctx = format!(
            "{who:?}: out {} / err {} / asks {:?}",
            ran.out,
            ran.err,
            brief(&ran.asks)
        );
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}: build/ removed");
        // The first ask is the agent's command; the re-launch was never asked.
        assert!(!ran.asks.is_empty(), "{ctx}: `rm -rf build` was not asked");
        assert!(
            norm(&action(&ran.asks[0])).contains("rm -rf build"),
            "{ctx}: an ask came before the agent's first command"
        );
        assert_eq!(ran.asks.len(), 1, "{ctx}");
        let rs = results(&ran.out);
        let rm = result(&rs, "rm").unwrap_or_else(|| panic!("{ctx}: the child never ran rm"));
        assert_eq!(rm["status"], 126, "{ctx}");
        assert!(
            rm["stderr"]
                .as_str()
                .unwrap_or_default()
                .starts_with("tyba: keep the build"),
            "{ctx}"
        );
        assert_eq!(result(&rs, "relaunch").unwrap()["status"], 0, "{ctx}");
    }
}

#[test]
fn exec_agent_relaunch_non_interactive_refuses_only_the_command() {
    for who in whos() {
        let Some(a) = agent_fixture(&who, "relaunch-ni") else {
            continue;
        };
        let fx = &a.fx;
        let env = env_with(fx, &[("PATH", a.path.clone())]);
        let policy = a.policy.display().to_string();
        let ran = run_alone(fx, &["--policy", &policy], &env, &["fake-agent"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}: build/ removed");
        let rs = results(&ran.out);
        assert!(
            result(&rs, "child-start").is_some(),
            "{ctx}: the re-launch was refused"
        );
        let rm = result(&rs, "rm").unwrap_or_else(|| panic!("{ctx}"));
        assert_eq!(rm["status"], 126, "{ctx}");
        let stderr = rm["stderr"].as_str().unwrap_or_default();
        assert!(
            stderr.starts_with("tyba: ") && reason_in_summary(stderr, &ran.err),
            "{ctx}: tyba's reason on the child's stderr"
        );
        // Only the command is in the refusals.
        let refused: Vec<&str> = ran
            .err
            .lines()
            .filter(|l| l.starts_with("tyba:   "))
            .collect();
        assert_eq!(refused.len(), 1, "{ctx}");
        assert!(norm(refused[0]).contains("rm -rf build"), "{ctx}");
        // Control: without tyba the agent removes build/.
        let dir = copy_of_wt(fx, "relaunch-control");
        let r = outside(fx, &dir, &env, &["/usr/bin/env", "fake-agent"]);
        assert_eq!(r.code, 0, "{who:?}: {r:?}");
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// A hostile agent cannot pass code off as its own re-launch: its interpreter with `-e`, with
/// `--require`, with `NODE_OPTIONS` changed, or running a script outside the installation
/// is a command, classified (and refused with nobody to ask), and the code never runs.
#[test]
fn exec_agent_interpreter_carrying_other_code_is_a_command() {
    for who in whos() {
        let Some(a) = agent_fixture(&who, "probe") else {
            continue;
        };
        let fx = &a.fx;
        put(fx, "evil.js", EVIL_JS);
        let env = env_with(fx, &[("PATH", a.path.clone())]);
        let policy = a.policy.display().to_string();
        let ran = run_alone(fx, &["--policy", &policy], &env, &["fake-agent", "probe"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        let steps = ["eval", "require", "worktree_script"];
        for step in steps {
            let r = result(&rs, step).unwrap_or_else(|| panic!("{ctx}: no {step}"));
            assert_eq!(r["status"], 126, "{ctx}: {step} was not refused: {r}");
            assert!(
                !fx.wt.join(format!("pwned_{step}")).exists(),
                "{ctx}: {step}: the code ran as the agent"
            );
        }
        // Control: without tyba every probe runs its code.
        let dir = copy_of_wt(fx, "probe-control");
        let r = outside(fx, &dir, &env, &["/usr/bin/env", "fake-agent", "probe"]);
        for step in steps {
            assert!(
                dir.join(format!("pwned_{step}")).exists(),
                "{who:?}: control: {step} did not run its code: {r:?}"
            );
        }
    }
}

/// The agent's own file re-launched with `NODE_OPTIONS` loading a script of the worktree is
/// not the agent (docs/sandbox.md: "with no code-running variable changed from the session's
/// start"): it is a command, classified with the variable shown, and refused with nobody to
/// ask.
///
/// The exec is refused now, but the line judged and shown is `node …/agent.js --child`
/// without the `NODE_OPTIONS` that loads `evil.js`: the environment an agent with an
/// installation gives its commands is not judged, so a person asked about it would approve
/// what looks like the agent's own re-launch.
#[test]
fn exec_agent_own_file_with_node_options_changed_is_a_command() {
    for who in whos() {
        let Some(a) = agent_fixture(&who, "node-options") else {
            continue;
        };
        let fx = &a.fx;
        put(fx, "evil.js", EVIL_JS);
        let env = env_with(fx, &[("PATH", a.path.clone())]);
        let policy = a.policy.display().to_string();
        let ran = run_alone(
            fx,
            &["--policy", &policy],
            &env,
            &["fake-agent", "node_options"],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        let r = result(&rs, "node_options").unwrap_or_else(|| panic!("{ctx}"));
        assert!(
            !fx.wt.join("pwned_node_options").exists(),
            "{ctx}: evil.js ran as the agent: {r}"
        );
        assert_eq!(r["status"], 126, "{ctx}: {r}");
        assert!(
            ran.err
                .lines()
                .any(|l| l.starts_with("tyba:   exec") && l.contains("NODE_OPTIONS")),
            "{ctx}: the changed NODE_OPTIONS is shown"
        );
        // Control: without tyba evil.js runs.
        let dir = copy_of_wt(fx, "node-options-control");
        let r = outside(
            fx,
            &dir,
            &env,
            &["/usr/bin/env", "fake-agent", "node_options"],
        );
        assert!(
            dir.join("pwned_node_options").exists(),
            "{who:?}: control: {r:?}"
        );
    }
}

/// The agent execs a link in the worktree that it swaps between its own `agent.js` (which
/// passes as the agent) and `/usr/bin/rm` (red): whichever file the decision was made on is
/// the one that runs, so `rm -rf build` never runs undecided.
///
/// Fails today (as root: rm ran after 3, 336, 289 and 70 runs, once not within 400): an exec
/// of the link decided while it named `agent.js` passes as the agent's own file and is
/// continued; the
/// kernel then resolves the link again, to `/usr/bin/rm`, and `rm -rf build` runs with no
/// decision made on it, in a `--non-interactive` session.
#[test]
fn exec_agent_swapping_a_link_between_its_own_file_and_rm_runs_nothing_undecided() {
    for who in whos() {
        let Some(a) = agent_fixture(&who, "race") else {
            continue;
        };
        let fx = &a.fx;
        let env = env_with(fx, &[("PATH", a.path.clone())]);
        let policy = a.policy.display().to_string();
        let ran = run_alone(fx, &["--policy", &policy], &env, &["fake-agent", "race"]);
        let ctx = format!(
            "{who:?}: out {} / err {}",
            ran.out.chars().take(3000).collect::<String>(),
            ran.err.chars().take(3000).collect::<String>()
        );
        let rs = results(&ran.out);
        let r = result(&rs, "race").unwrap_or_else(|| panic!("{ctx}"));
        assert!(
            fx.wt.join("build/out.o").exists(),
            "{ctx}: rm ran through the swapped link: {r}"
        );
        assert_eq!(r["runs"], 1000, "{ctx}: {r}");
        // Control: without tyba the swapped link soon runs rm.
        let dir = copy_of_wt(fx, "race-control");
        for f in ["lnk", "lnk.tmp", "stop"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        let r = outside(fx, &dir, &env, &["/usr/bin/env", "fake-agent", "race"]);
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// The agent program (C): a thread flips a file name between `/usr/bin/true` (green) and
/// `/usr/bin/rm` (red) while a vfork child, sharing that memory, execs it with `-rf build`.
const FLIP_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
extern char **environ;
static char buf[64] = "/usr/bin/true";
static volatile int stop;
static void *flip(void *a) {
    (void)a;
    while (!stop) {
        memcpy(buf, "/usr/bin/rm\0\0", 14);
        __asm__ volatile("" ::: "memory");
        memcpy(buf, "/usr/bin/true", 14);
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, flip, 0);
    char *argv[] = {"x", "-rf", "build", 0};
    struct stat s;
    int i;
    for (i = 0; i < 2000 && stat("build", &s) == 0; i++) {
        pid_t p = vfork();
        if (p == 0) { execve(buf, argv, environ); _exit(127); }
        int st;
        waitpid(p, &st, 0);
    }
    stop = 1;
    pthread_join(t, 0);
    printf("RESULT {\"step\": \"flip\", \"runs\": %d}\n", i);
    return 0;
}
"#;

/// The file name and argv an exec is decided on are read from the process's memory; a
/// process sharing that memory can change them before the kernel reads them again. What
/// runs must be what was decided: `rm -rf build` never runs in a `--non-interactive`
/// session.
///
/// Fails today, as root and as the unprivileged user (rm ran after 18 to 64 tries): an
/// allowed exec (and the refusal's rewritten name) is continued by address, and the kernel
/// then reads `/usr/bin/rm` from the shared memory.
#[test]
#[ignore = "known bug: an exec is continued by address, so a process sharing memory changes what runs after the decision"]
fn exec_file_name_changed_in_shared_memory_after_the_decision_runs_nothing_undecided() {
    for who in whos() {
        let Some(fx) = setup(&who, "flip") else {
            continue;
        };
        put(&fx, "flip.c", FLIP_C);
        let st = Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(fx.wt.join("flip"))
            .arg(fx.wt.join("flip.c"))
            .status()
            .unwrap();
        assert!(st.success(), "cc");
        give(&fx.wt, &who);
        make_build(&fx);
        let ran = run_alone(&fx, &[], &fx.env(), &["./flip"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}: rm ran");
        let rs = results(&ran.out);
        assert_eq!(result(&rs, "flip").unwrap()["runs"], 2000, "{ctx}");
        // Control: without tyba the flipped name soon runs rm.
        let dir = copy_of_wt(&fx, "flip-control");
        let r = outside(&fx, &dir, &base_env(&fx.home, &[]), &["./flip"]);
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// The agent program (C): execs `/usr/bin/rm -rf build` from a vfork child (`vfork`, and
/// glibc's `posix_spawn`, a `clone(CLONE_VM|CLONE_VFORK)`), the file name in heap memory it
/// shares with the child. The first thing the parent does when it runs again is copy what
/// its name reads; a program reuses or frees that memory from then on.
const VFORK_NAME_C: &str = r#"
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv_) {
    int n = argc > 1 ? atoi(argv_[1]) : 5;
    char *name = malloc(64);
    char *argv[] = {"rm", "-rf", "build", 0};
    for (int i = 0; i < 2 * n; i++) {
        strcpy(name, "/usr/bin/rm");
        char seen[16];
        pid_t p;
        if (i % 2 == 0) {
            p = vfork();
            if (p == 0) { execve(name, argv, environ); _exit(127); }
            memcpy(seen, name, sizeof seen);
        } else {
            int e = posix_spawn(&p, name, 0, 0, argv, environ);
            memcpy(seen, name, sizeof seen);
            if (e) p = -1;
        }
        seen[15] = 0;
        for (char *c = seen; *c; c++) if (*c < 32 || *c > 126 || *c == '"' || *c == '\\') *c = '?';
        int st = 0;
        if (p > 0) waitpid(p, &st, 0);
        printf("RESULT {\"step\": \"s%d\", \"seen\": \"%s\", \"rc\": %d}\n", i, seen,
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        fflush(stdout);
    }
    return 0;
}
"#;

/// When tyba runs something else in place of an exec (its refusal program; an approved
/// command's proxy) it rewrites the exec's file name, which a vfork child shares with its
/// parent. The parent must find its own name again the moment it runs: a write after that
/// lands in memory the parent may already have freed and reused (a Python caller crashed
/// with SIGSEGV this way). Refused (non-interactive) and approved, each with `vfork` and
/// `posix_spawn`.
#[test]
fn exec_vfork_parent_runs_again_only_with_its_own_file_name() {
    for who in whos() {
        let Some(fx) = setup(&who, "vforkname") else {
            continue;
        };
        put(&fx, "vname.c", VFORK_NAME_C);
        let st = Command::new("cc")
            .args(["-O1", "-o"])
            .arg(fx.wt.join("vname"))
            .arg(fx.wt.join("vname.c"))
            .status()
            .unwrap();
        assert!(st.success(), "cc");
        give(&fx.wt, &who);
        make_build(&fx);
        let check = |ran: &Ran, rc: i64, what: &str| {
            let ctx = format!("{who:?} {what}: out {} / err {}", ran.out, ran.err);
            let rs = results(&ran.out);
            assert_eq!(rs.len(), 6, "{ctx}");
            for r in &rs {
                assert_eq!(
                    r["seen"], "/usr/bin/rm",
                    "{ctx}: the parent ran on a rewritten name"
                );
                assert_eq!(r["rc"], rc, "{ctx}: {r}");
            }
        };
        // Refused: the refusal program's status; build/ stays.
        let ran = run_alone(&fx, &[], &fx.env(), &["./vname", "3"]);
        check(&ran, 126, "refused");
        assert!(
            fx.wt.join("build/out.o").exists(),
            "{who:?}: rm ran: {}",
            ran.err
        );
        // Approved: rm runs (as the approved command, through its proxy).
        let live = start(&fx, &[], &fx.env(), &["./vname", "3"], None);
        let ran = drive(&fx, live, |_| Reply::Approve);
        check(&ran, 0, "approved");
        assert!(
            !fx.wt.join("build").exists(),
            "{who:?}: the approved rm did not run"
        );
        // Control: without tyba rm runs each time and the name is the parent's own. (Before
        // the parent was held, it read `/dev/fd/3` here: the name was given back only once
        // the refusal program had started.)
        make_build(&fx);
        let dir = copy_of_wt(&fx, "vforkname-control");
        let r = outside(&fx, &dir, &base_env(&fx.home, &[]), &["./vname", "3"]);
        let rs = results(&r.out);
        assert_eq!(rs.len(), 6, "{who:?}: control: {r:?}");
        assert!(
            rs.iter()
                .all(|x| x["rc"] == 0 && x["seen"] == "/usr/bin/rm"),
            "{who:?}: {r:?}"
        );
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// The agent program (C) of review 4's race: the refused `rm -rf DIR` is exec'd by a process
/// whose file name other tasks share, and they write the original name back the moment tyba
/// rewrites it (they see `/dev/fd/…`), before the kernel reads it. The sharers tried: a
/// second thread of the grandparent, with a vfork chain (main thread vforks C1, C1 vforks C2,
/// which execs); a `clone(CLONE_VM|CLONE_PARENT)` child (looks like its caller's sibling); a
/// `clone(CLONE_VM)` child (shares the memory without being a thread or a blocked vfork
/// parent); a `clone(CLONE_FILES)` child (shares the descriptor table, where tyba installs
/// the refusal program as fd 3: review 31's r31-03). Prints the errno of each clone (0: it
/// ran).
const RACE_C: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static char name[64] = "/usr/bin/rm";
static char *victim;
static volatile int done;
static volatile long undone;
static void *racer(void *a) {
    (void)a;
    while (!done) {
        if (name[1] == 'd') { strcpy(name, "/usr/bin/rm"); undone++; }
    }
    return 0;
}
static int execer(void *a) {
    (void)a;
    char *argv[] = {"rm", "-rf", victim, 0};
    execv(name, argv);
    _exit(127);
}
static int st_of(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }
int main(int argc, char **argv) {
    victim = argv[1];
    const char *how = argv[2];
    if (!strcmp(how, "chain")) {
        pthread_t t;
        pthread_create(&t, 0, racer, 0);
        int st = 0;
        pid_t c1 = vfork();
        if (c1 == 0) {
            pid_t c2 = vfork();
            if (c2 == 0) execer(0);
            int s2 = 0;
            waitpid(c2, &s2, 0);
            _exit(st_of(s2));
        }
        waitpid(c1, &st, 0);
        done = 1;
        pthread_join(t, 0);
        printf("RESULT {\"step\": \"chain\", \"rc\": %d, \"undone\": %ld}\n", st_of(st), undone);
        return 0;
    }
    int flags = !strcmp(how, "clone-parent") ? CLONE_VM | CLONE_PARENT | SIGCHLD
              : !strcmp(how, "clone-files") ? CLONE_FILES | SIGCHLD
              : CLONE_VM | SIGCHLD;
    char *stk = malloc(1 << 16);
    pid_t c = clone(execer, stk + (1 << 16), flags, 0);
    int err = c < 0 ? errno : 0;
    if (c > 0) {
        /* Until the child is gone or has run (2 s at most): a zombie still answers kill 0. */
        for (long i = 0; i < 2000000000L; i++) {
            if (name[1] == 'd') { strcpy(name, "/usr/bin/rm"); undone++; }
            if ((i & 0xffff) == 0) {
                if (waitpid(c, 0, WNOHANG | __WALL) == c || kill(c, 0) != 0) break;
                struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
                static long start = -1;
                if (start < 0) start = ts.tv_sec;
                if (ts.tv_sec - start > 2) break;
            }
        }
        usleep(300000);
    }
    printf("RESULT {\"step\": \"%s\", \"errno\": %d, \"undone\": %ld}\n", how, err, undone);
    return 0;
}
"#;

/// Review 4 (r4-01, r4-02): a refused exec whose file name other tasks share must not run
/// when they write the original name back after tyba's rewrite: processes sharing memory
/// other than threads and blocked vfork parents are refused by the seccomp filter (and a
/// `CLONE_PARENT` child, which passed for the agent, and a process sharing the descriptor
/// table without being a thread), and a refusal where any process of the
/// vfork chain has other threads ends the child instead of rewriting. `rm -rf` never runs;
/// the control without tyba shows each way deletes the directory.
#[test]
fn exec_refused_name_shared_with_running_tasks_runs_nothing_refused() {
    for who in whos() {
        let Some(fx) = setup(&who, "racenames") else {
            continue;
        };
        put(&fx, "race.c", RACE_C);
        let st = Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(fx.wt.join("race"))
            .arg(fx.wt.join("race.c"))
            .status()
            .unwrap();
        assert!(st.success(), "cc");
        let ways = ["chain", "clone-parent", "clone-vm", "clone-files"];
        for w in ways {
            std::fs::create_dir_all(fx.wt.join(format!("v-{w}/a"))).unwrap();
        }
        give(&fx.wt, &who);
        let script = ways
            .iter()
            .map(|w| format!("./race v-{w} {w}"))
            .collect::<Vec<_>>()
            .join("; ");
        let ran = run_alone(
            &fx,
            &["--autonomy", "high"],
            &fx.env(),
            &["bash", "-c", &script],
        );
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        for w in ways {
            assert!(
                fx.wt.join(format!("v-{w}/a")).exists(),
                "{ctx}: rm ran by {w}"
            );
        }
        let rs = results(&ran.out);
        assert_ne!(result(&rs, "chain").unwrap()["rc"], 0, "{ctx}");
        for w in ["clone-parent", "clone-vm", "clone-files"] {
            assert_eq!(
                result(&rs, w).unwrap()["errno"],
                nix::errno::Errno::EPERM as i32,
                "{ctx}: {w}"
            );
        }
        // Control: without tyba each way runs rm (nothing refuses it; the clones work).
        let dir = copy_of_wt(&fx, "racenames-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/bin/bash", "-c", &script],
        );
        for w in ways {
            assert!(
                !dir.join(format!("v-{w}")).exists(),
                "{who:?}: control {w}: {r:?}"
            );
        }
    }
}

/// Whether `path` is a `#!` script.
fn is_script(path: &str) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"#!"))
}

/// An installed script is a program like an installed binary: `which`, `zcat` and `gunzip`
/// (`#!/bin/sh` scripts in `/usr/bin` on Debian) and a version manager's shim in the home's
/// read-only toolchain root (`~/.pyenv/shims/NAME`, `#!/usr/bin/env bash`) are judged by the
/// name the agent ran, not as `sh /usr/bin/which …`, a script outside the worktree (red: at
/// high autonomy every `which` and every pyenv user's `python3` was refused). A script the
/// agent can write is still judged by its `#!` line (the git-interpreter cases above).
#[test]
fn exec_installed_scripts_are_judged_by_their_names() {
    let system = ["/usr/bin/which", "/usr/bin/zcat", "/usr/bin/gunzip"];
    for p in system {
        let real = std::fs::canonicalize(p).unwrap();
        assert!(
            is_script(real.to_str().unwrap()),
            "{p} is a #! script on this machine (Debian's debianutils and gzip)"
        );
    }
    for who in whos() {
        let Some(fx) = setup(&who, "instscript") else {
            continue;
        };
        let shims = fx.home.join(".pyenv/shims");
        std::fs::create_dir_all(&shims).unwrap();
        let shim = shims.join("tyba-tool");
        std::fs::write(
            &shim,
            "#!/usr/bin/env bash\nexec /usr/bin/printf 'shim ran %s\\n' \"$1\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        give(&fx.home.join(".pyenv"), &who);
        // A shell of the agent's own: a copy in the worktree.
        std::fs::create_dir_all(fx.wt.join("b")).unwrap();
        std::fs::copy("/bin/dash", fx.wt.join("b/sh")).unwrap();
        give(&fx.wt, &who);
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", shims.display());
        let env = env_with(&fx, &[("PATH", path.into())]);
        let script = "echo x | gzip > a.gz; which sh > /dev/null && echo which-ok; \
                      zcat a.gz > /dev/null && echo zcat-ok; gunzip -t a.gz && echo gunzip-ok; \
                      tyba-tool 1; sh /usr/bin/zcat a.gz > /dev/null && echo shzcat-ok; \
                      bash \"$HOME/.pyenv/shims/tyba-tool\" 2; \
                      b/sh /usr/bin/zcat a.gz > /dev/null; \
                      echo end";
        let ran = run_alone(&fx, &["--autonomy", "high"], &env, &["bash", "-c", script]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        for want in [
            "which-ok",
            "zcat-ok",
            "gunzip-ok",
            "shim ran 1",
            "shzcat-ok",
            "shim ran 2",
            "end",
        ] {
            assert!(ran.out.contains(want), "{ctx}: {want}");
        }
        // The one refusal: a shell the agent made (a copy in the worktree) is no installed
        // interpreter, so its line is its own: `b/sh /usr/bin/zcat`, a script outside the
        // worktree, red.
        let denied: Vec<&str> = ran
            .err
            .lines()
            .filter(|l| l.starts_with("tyba:   exec "))
            .collect();
        assert_eq!(denied.len(), 1, "{ctx}: refusals");
        assert!(
            denied[0].starts_with("tyba:   exec b/sh /usr/bin/zcat")
                && denied[0].contains("reaches outside the worktree"),
            "{ctx}"
        );
        // What was judged: each by its name, none red.
        let log = log_of(&fx);
        for argv0 in ["which", "zcat", "gunzip", "tyba-tool"] {
            let l = log
                .iter()
                .find(|l| l["kind"] == "exec" && l["argv"][0] == argv0)
                .unwrap_or_else(|| panic!("{ctx}: no exec of {argv0} in {log:?}"));
            assert_ne!(l["verdict"], "red", "{ctx}: {l}");
            assert_eq!(l["decision"], "allow", "{ctx}: {l}");
        }
        // An installed interpreter run on an installed script as its `#!` line runs it (the
        // shim's `env` relaying to `bash SHIM ARGS`, or typed): the script by its name.
        let shim_s = shim.to_str().unwrap();
        for (argv, action) in [
            (vec!["bash", shim_s, "1"], "tyba-tool 1"),
            (vec!["bash", shim_s, "2"], "tyba-tool 2"),
            (vec!["sh", "/usr/bin/zcat", "a.gz"], "zcat a.gz"),
        ] {
            let l = log
                .iter()
                .find(|l| l["kind"] == "exec" && l["argv"] == serde_json::json!(argv))
                .unwrap_or_else(|| panic!("{ctx}: no exec of {argv:?} in {log:?}"));
            assert_eq!(l["action"], action, "{ctx}: {l}");
            assert_ne!(l["verdict"], "red", "{ctx}: {l}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 5. PATH walks through missing directories ask nothing.

const WALK_PY: &str = r#"
import json, subprocess
for i in range(12):
    r = subprocess.run(["git", "--version"], capture_output=True)
    print("RESULT " + json.dumps({"step": "git%d" % i, "rc": r.returncode, "out": r.stdout.decode()}), flush=True)
r = subprocess.run(["/usr/bin/rm", "-rf", "nothere"], capture_output=True)
print("RESULT " + json.dumps({"step": "red", "rc": r.returncode}), flush=True)
"#;

const WALK_JS: &str = r#"
const cp = require('child_process');
for (let i = 0; i < 12; i++) {
  const r = cp.spawnSync('rm', ['-f', 'x' + i], { encoding: 'utf8' });
  console.log('RESULT ' + JSON.stringify({ step: 'rm' + i, rc: r.status, err: r.stderr, error: r.error ? r.error.code : null }));
}
const r = cp.spawnSync('/usr/bin/rm', ['-rf', 'nothere'], { encoding: 'utf8' });
console.log('RESULT ' + JSON.stringify({ step: 'red', rc: r.status }));
"#;

#[test]
fn exec_path_walk_through_missing_directories_asks_nothing() {
    for who in whos() {
        let Some(fx) = setup(&who, "pathwalk") else {
            continue;
        };
        put(&fx, "walk.py", WALK_PY);
        put(&fx, "walk.js", WALK_JS);
        for i in 0..12 {
            put(&fx, &format!("x{i}"), "x\n");
        }
        // Missing directories inside the worktree, outside it, and nowhere.
        let path = format!(
            "{}:{}:/nonexistent/bin:{}:/usr/local/bin:/usr/bin:/bin",
            fx.wt.join("no-bin").display(),
            fx.scratch.dir.join("f/outside-missing/bin").display(),
            fx.home.join(".local/bin").display()
        );
        let env = env_with(&fx, &[("PATH", path.into())]);
        for (agent, script, per, expected) in [
            ("python3", "walk.py", "git", 1),
            ("node", "walk.js", "rm", 13),
        ] {
            // Medium autonomy, every ask approved: the yellow `rm -f xN` and the one red
            // exec at the end are asked (`git --version` is green: read-only), a candidate
            // in a missing directory never is.
            let live = start(&fx, &[], &env, &[agent, script], None);
            let ran = drive(&fx, live, |_| Reply::Approve);
            let ctx = format!(
                "{who:?} {agent}: out {} / err {} / asks {:?}",
                ran.out,
                ran.err,
                brief(&ran.asks)
            );
            assert_eq!(ran.asks.len(), expected, "{ctx}: asks beyond the commands");
            for a in &ran.asks {
                let t = action(a);
                assert!(
                    t == "run `git --version`"
                        || t.starts_with("run `rm -f x")
                        || t == "run `/usr/bin/rm -rf nothere`",
                    "{ctx}: asked about a PATH candidate: {t}"
                );
            }
            assert!(
                norm(&action(ran.asks.last().unwrap())).contains("rm -rf nothere"),
                "{ctx}"
            );
            let rs = results(&ran.out);
            for i in 0..12 {
                let r = result(&rs, &format!("{per}{i}")).unwrap_or_else(|| panic!("{ctx}"));
                assert_eq!(r["rc"], 0, "{ctx}: {r}");
            }
            assert_eq!(result(&rs, "red").unwrap()["rc"], 0, "{ctx}");
            let log = log_of(&fx);
            assert!(
                !log.iter().any(|l| l["decision"] == "pause"),
                "{ctx}: the repeated-failure guard paused: {log:?}"
            );
            assert!(
                !log.iter().any(|l| {
                    let a = action(l);
                    a.contains("no-bin")
                        || a.contains("outside-missing")
                        || a.contains("/nonexistent/")
                }),
                "{ctx}: a missing candidate reached the log: {log:?}"
            );
            assert!(!ran.err.contains("paused"), "{ctx}");
        }
        for i in 0..12 {
            assert!(
                !fx.wt.join(format!("x{i}")).exists(),
                "{who:?}: rm -f x{i} ran"
            );
        }
        // Nobody to ask, high autonomy (the yellow `git --version` passes): a candidate that
        // were judged would be refused, and 48 of them
        // (12 lookups, 4 missing directories each) would reach the repeated-failure guard
        // (`pause_after = 8`). Only the red exec at the end is refused.
        let ran = run_alone(&fx, &["--autonomy", "high"], &env, &["python3", "walk.py"]);
        let ctx = format!("{who:?} non-interactive: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        for i in 0..12 {
            let r = result(&rs, &format!("git{i}")).unwrap_or_else(|| panic!("{ctx}"));
            assert_eq!(r["rc"], 0, "{ctx}: {r}");
        }
        assert_eq!(result(&rs, "red").unwrap()["rc"], 126, "{ctx}");
        assert!(ran.err.contains("denied in this session (1)"), "{ctx}");
        assert!(!ran.err.contains("paused"), "{ctx}");
    }
}

// ---------------------------------------------------------------------------------------
// 6. A Popen/spawn caller reads tyba's reason from the child's stderr.

const POPEN_PY: &str = r#"
import json, subprocess
try:
    r = subprocess.run(["/usr/bin/rm", "-rf", "build"], capture_output=True)
    print("RESULT " + json.dumps({"step": "py", "rc": r.returncode, "err": r.stderr.decode()}), flush=True)
except OSError as e:
    print("RESULT " + json.dumps({"step": "py", "errno": e.errno, "exc": str(e)}), flush=True)
"#;

const SPAWN_JS: &str = r#"
const cp = require('child_process');
const r = cp.spawnSync('/usr/bin/rm', ['-rf', 'build'], { encoding: 'utf8' });
console.log('RESULT ' + JSON.stringify({ step: 'js', rc: r.status, err: r.stderr, error: r.error ? r.error.code : null }));
"#;

#[test]
fn exec_popen_and_spawn_callers_read_the_reason_from_the_childs_stderr() {
    for who in whos() {
        let Some(fx) = setup(&who, "popen") else {
            continue;
        };
        put(&fx, "popen.py", POPEN_PY);
        put(&fx, "spawn.js", SPAWN_JS);
        make_build(&fx);
        for (agent, script, step) in [("python3", "popen.py", "py"), ("node", "spawn.js", "js")] {
            // Non-interactive: the refusal's own reason.
            let ran = run_alone(&fx, &[], &fx.env(), &[agent, script]);
            let ctx = format!("{who:?} {agent}: out {} / err {}", ran.out, ran.err);
            let rs = results(&ran.out);
            let r = result(&rs, step).unwrap_or_else(|| panic!("{ctx}"));
            assert_eq!(r["rc"], 126, "{ctx}: {r}");
            let err = r["err"].as_str().unwrap_or_default();
            assert!(err.starts_with("tyba: "), "{ctx}: {r}");
            assert!(
                reason_in_summary(err, &ran.err) && !err.contains("Permission denied"),
                "{ctx}: the reason is named: {r}"
            );
            assert!(fx.wt.join("build/out.o").exists(), "{ctx}");
            // A person's reason.
            let live = start(&fx, &[], &fx.env(), &[agent, script], None);
            let ran = drive(&fx, live, |_| Reply::Deny(Some("use make clean")));
            let ctx = format!("{who:?} {agent}: out {} / err {}", ran.out, ran.err);
            assert_eq!(ran.asks.len(), 1, "{ctx}: {:?}", ran.asks);
            let rs = results(&ran.out);
            let r = result(&rs, step).unwrap_or_else(|| panic!("{ctx}"));
            assert_eq!(r["rc"], 126, "{ctx}: {r}");
            assert!(
                r["err"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("tyba: use make clean"),
                "{ctx}: {r}"
            );
            assert!(fx.wt.join("build/out.o").exists(), "{ctx}");
        }
        // Control: without tyba the caller sees rm's own success and build/ goes.
        let dir = copy_of_wt(&fx, "popen-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/python3", "popen.py"],
        );
        let rs = results(&r.out);
        assert_eq!(result(&rs, "py").unwrap()["rc"], 0, "{who:?}: {r:?}");
        assert!(!dir.join("build").exists(), "{who:?}");
    }
}

/// The agent (Python): `rm -rf build` through the shell (`/bin/sh`, as aider runs commands),
/// its stderr captured (`capture`) or inherited.
const SHELL_PY: &str = r#"
import json, subprocess, sys
capture = sys.argv[1] == "capture"
try:
    r = subprocess.run("rm -rf build", shell=True, capture_output=capture)
    print("RESULT " + json.dumps({"step": "shell", "rc": r.returncode, "err": (r.stderr or b"").decode()}), flush=True)
except OSError as e:
    print("RESULT " + json.dumps({"step": "shell", "errno": e.errno, "exc": str(e)}), flush=True)
"#;

/// `subprocess.run("…", shell=True)` runs `/bin/sh` from a vfork child: a file name shorter
/// than `/dev/fd/3`, in a process sharing memory, so the fallback applies (the reason written
/// to the child's stderr, then the child ended). With stderr inherited the reason reaches the
/// session's output whichever way the refusal went.
#[test]
fn exec_popen_shell_true_refusal_reason_reaches_the_inherited_stderr() {
    for who in whos() {
        let Some(fx) = setup(&who, "popen-sh") else {
            continue;
        };
        put(&fx, "shell.py", SHELL_PY);
        make_build(&fx);
        let ran = run_alone(&fx, &[], &fx.env(), &["python3", "shell.py", "inherit"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        let r = result(&rs, "shell").unwrap_or_else(|| panic!("{ctx}"));
        assert!(
            r["rc"] == 126 || r["rc"] == -9,
            "{ctx}: refused, and the spawn itself succeeded: {r}"
        );
        assert!(
            ran.err.lines().any(|l| l.starts_with("tyba: refused")),
            "{ctx}: the reason on the process's stderr"
        );
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}");
        // Control: without tyba the same program removes build/.
        let dir = copy_of_wt(&fx, "popen-sh-control");
        let r = outside(
            &fx,
            &dir,
            &base_env(&fx.home, &[]),
            &["/usr/bin/python3", "shell.py", "inherit"],
        );
        assert!(!dir.join("build").exists(), "{who:?}: control: {r:?}");
    }
}

/// Issue 11, observation 6 as aider meets it: `subprocess.run("…", shell=True,
/// capture_output=True)` must let the caller read tyba's reason. Failing the exec (EACCES)
/// would lose it: Python raises `[Errno 13] Permission denied: '/bin/sh'` and never reads the
/// pipe.
#[test]
fn exec_popen_shell_true_capturing_caller_reads_the_reason() {
    for who in whos() {
        let Some(fx) = setup(&who, "popen-sh-cap") else {
            continue;
        };
        put(&fx, "shell.py", SHELL_PY);
        make_build(&fx);
        let ran = run_alone(&fx, &[], &fx.env(), &["python3", "shell.py", "capture"]);
        let ctx = format!("{who:?}: out {} / err {}", ran.out, ran.err);
        let rs = results(&ran.out);
        let r = result(&rs, "shell").unwrap_or_else(|| panic!("{ctx}"));
        // The spawn succeeds (no OSError): the refusal program's 126, or, where the vfork
        // child's file name cannot be rewritten, the child ended by SIGKILL once its stderr
        // said why (docs/sandbox.md).
        assert!(r["rc"] == 126 || r["rc"] == -9, "{ctx}: {r}");
        let err = r["err"].as_str().unwrap_or_default();
        assert!(reason_in_summary(err, &ran.err), "{ctx}: {r}");
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}");
    }
}

// ---------------------------------------------------------------------------------------
// Property: blocked corpus commands are refused as descendants of approved commands.

/// The corpus's blocked exec cases (`tests/data/commands.jsonl`, `expect: blocked`, no other
/// tool).
fn blocked_corpus() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/commands.jsonl"),
    )
    .unwrap();
    let v: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|c| c["expect"] == "blocked")
        .filter(|c| c["tool"].as_str().is_none_or(|t| t == "exec"))
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["cmd"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(v.len() >= 15, "the corpus lost its blocked cases: {v:?}");
    v
}

#[derive(Debug, Clone, Copy)]
enum Wrapper {
    Make,
    /// [`Wrapper::Make`] with each command's program run through a symbolic link the agent
    /// made in the worktree (`./l-rm -> /usr/bin/rm`): the kernel runs the same program
    /// (review 31's r31-01).
    LinkedMake,
    /// [`Wrapper::LinkedMake`] with the links made by the approved `make` itself in
    /// `~/.cargo/registry`, which the session sees through its private cache layer: the
    /// person's view of that directory (where tyba's classifier reads) has no such link, the
    /// kernel's view in the sandbox does.
    LayerLinkedMake,
    /// [`Wrapper::Make`] with each command's program run as a copy the agent made in the
    /// worktree (`./l-rm`, the bytes of `/usr/bin/rm`), the lines make runs itself only.
    CopiedMake,
    BashScript,
    Xargs,
    NpmRun,
    PythonShell,
}

fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The wrapper's files in the worktree, and the agent's line that runs it (one approved
/// top-level command). Every wrapper first makes `wrapper-ran` (so the approved wrapper is
/// seen to run its descendants), then hands each blocked command to a shell, in turn, with
/// its status written to `rc/N` where the wrapper can.
/// `start` is what make's `start` target runs first (the make wrappers only).
fn wrapper_files(fx: &Fx, w: Wrapper, cmds: &[(String, String)], start: &[String]) -> String {
    let nul: String = std::iter::once("touch wrapper-ran".to_string())
        .chain(cmds.iter().map(|(_, c)| c.clone()))
        .map(|c| c + "\0")
        .collect();
    put(fx, "blocked.nul", &nul);
    std::fs::create_dir_all(fx.wt.join("rc")).unwrap();
    give(&fx.wt, &fx.who);
    match w {
        Wrapper::Make | Wrapper::LinkedMake | Wrapper::LayerLinkedMake | Wrapper::CopiedMake => {
            // Recipe lines as written: make runs a line without shell syntax itself (the
            // pushes, `rm -rf /`, `dd`, `mkfs`) and the rest through `/bin/sh -c`.
            let mut mk = String::from("all: start");
            for i in 0..cmds.len() {
                mk.push_str(&format!(" c{i}"));
            }
            mk.push_str("\nstart:\n\ttouch wrapper-ran\n");
            for l in start {
                mk.push_str(&format!("\t{l}\n"));
            }
            for (i, (_, c)) in cmds.iter().enumerate() {
                mk.push_str(&format!("c{i}: start\n\t-{}\n", c.replace('$', "$$")));
            }
            put(fx, "Makefile2", &mk);
            "make -k -f Makefile2 all >wrapper.out 2>wrapper.err".to_string()
        }
        Wrapper::BashScript => {
            let mut sh = String::from("touch wrapper-ran\n");
            for (i, (_, c)) in cmds.iter().enumerate() {
                sh.push_str(&format!("bash -c {}\necho $? > rc/{i}\n", sq(c)));
            }
            put(fx, "script.sh", &sh);
            "bash script.sh >wrapper.out 2>wrapper.err".to_string()
        }
        Wrapper::Xargs => {
            // `xargs -0 -n1 sh -c` typed by the agent is dynamic code, refused outright: it is
            // approved here as the script `bash xargs.sh` that runs it.
            put(fx, "xargs.sh", "xargs -0 -n1 sh -c <blocked.nul\n");
            "bash xargs.sh >wrapper.out 2>wrapper.err".to_string()
        }
        Wrapper::NpmRun => {
            let mut scripts = serde_json::Map::new();
            let mut all = String::from("touch wrapper-ran");
            for (i, (_, c)) in cmds.iter().enumerate() {
                scripts.insert(format!("c{i}"), c.clone().into());
                all.push_str(&format!("; npm run -s c{i}; echo $? > rc/{i}"));
            }
            scripts.insert("all".into(), all.into());
            let pkg = serde_json::json!({"name": "fx", "version": "1.0.0", "scripts": scripts});
            put(fx, "package.json", &pkg.to_string());
            "npm run -s all >wrapper.out 2>wrapper.err".to_string()
        }
        Wrapper::PythonShell => {
            let py = "import subprocess\n\
                      cs = [c for c in open('blocked.nul').read().split('\\0') if c]\n\
                      for i, c in enumerate(cs):\n    \
                          try:\n        \
                              rc = str(subprocess.run(c, shell=True).returncode)\n    \
                          except OSError as e:\n        \
                              rc = 'E%d' % e.errno\n    \
                          if i: open('rc/%d' % (i - 1), 'w').write(rc)\n";
            format!("python3 -c {} >wrapper.out 2>wrapper.err", sq(py))
        }
    }
}

/// The fixture of the property: the corpus's repository shape (main one commit ahead of
/// `origin`, `master` and `feature/x`), `origin` served by a `git daemon` on loopback that
/// takes every push, a file `tool`, markers in the worktree and the home.
struct PropFx {
    fx: Fx,
    daemon: Daemon,
    refs: String,
    git_config: Vec<u8>,
    hosts: Vec<u8>,
}

fn prop_fixture(who: &Who, tag: &str) -> Option<PropFx> {
    let fx = setup(who, tag)?;
    git_as(who, &fx.wt, &["branch", "master"]);
    let srv = fx.scratch.dir.join("srv");
    bare_remote(&fx, &srv, "origin.git");
    let daemon = Daemon::start(&srv);
    git_as(
        who,
        &fx.wt,
        &["remote", "add", "origin", &daemon.url("origin.git")],
    );
    commit(&fx, "notes.txt", "notes\n");
    git_as(who, &fx.wt, &["branch", "-f", "master", "HEAD"]);
    git_as(who, &fx.wt, &["branch", "feature/x", "HEAD"]);
    put(&fx, "tool", "#!/bin/sh\n");
    put(&fx, "keep.txt", "keep\n");
    std::fs::write(fx.home.join("keep.txt"), "keep\n").unwrap();
    give(&fx.home, who);
    let refs = daemon.refs("origin.git");
    Some(PropFx {
        git_config: std::fs::read(fx.wt.join(".git/config")).unwrap(),
        hosts: std::fs::read("/etc/hosts").unwrap_or_default(),
        fx,
        daemon,
        refs,
    })
}

/// Corpus cases: (id, command line).
type Cases = Vec<(String, String)>;

/// `cmds` with each one's first word, when it is a program found on the host's `PATH`,
/// replaced by `<dir>/l-<name>` (`./l-<name>` when `dir` is the worktree), and the programs
/// those names are to stand for: `(name's path, program)`, once each. Nothing is made here.
fn renamed_commands(
    fx: &Fx,
    cmds: &[(String, String)],
    dir: &Path,
) -> (Cases, Vec<(PathBuf, PathBuf)>) {
    let mut programs: Vec<(PathBuf, PathBuf)> = Vec::new();
    let renamed = cmds
        .iter()
        .map(|(id, c)| {
            let first = c.split_whitespace().next().unwrap_or_default();
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {}", sq(first))])
                .env(
                    "PATH",
                    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
                )
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .filter(|p| p.starts_with('/'));
            let Some(prog) = found else {
                return (id.clone(), c.clone());
            };
            let link = dir.join(format!("l-{first}"));
            let name = if dir == fx.wt {
                format!("./l-{first}")
            } else {
                link.display().to_string()
            };
            if !programs.iter().any(|(l, _)| *l == link) {
                programs.push((link, PathBuf::from(prog)));
            }
            (id.clone(), format!("{name}{}", &c[first.len()..]))
        })
        .collect();
    (renamed, programs)
}

/// Where [`Wrapper::LayerLinkedMake`] puts its links: `~/.cargo/registry/l-<name>`.
fn layer_link_dir(fx: &Fx) -> PathBuf {
    fx.home.join(".cargo/registry")
}

fn property(w: Wrapper) {
    let corpus = blocked_corpus();
    for who in whos() {
        let tag = format!("prop-{w:?}").to_lowercase();
        let Some(cage) = PidsCage::new(&format!("{tag}-{}", matches!(who, Who::Me))) else {
            assert!(
                !require_sandbox(),
                "no pids cgroup to hold a fork bomb that got through (needs root and \
                 /sys/fs/cgroup/pids)"
            );
            eprintln!("SKIP: no pids cgroup here");
            return;
        };
        let Some(p) = prop_fixture(&who, &tag) else {
            continue;
        };
        let fx = &p.fx;
        // The lines make runs itself (no shell syntax): each is one exec, judged by the file
        // the kernel runs. A shell line naming a copy or a layer's link is judged as a line
        // first (see docs/sandbox.md, "Known limits").
        let direct = || -> Vec<(String, String)> {
            let v: Vec<(String, String)> = corpus
                .iter()
                .filter(|(_, c)| !c.contains(|ch: char| ";&|<>()$*~'\"\\".contains(ch)))
                .cloned()
                .collect();
            assert!(v.len() >= 10, "{v:?}");
            v
        };
        let (cmds, make_first) = match w {
            Wrapper::LinkedMake | Wrapper::CopiedMake => {
                let from = if matches!(w, Wrapper::LinkedMake) {
                    corpus.clone()
                } else {
                    direct()
                };
                let (cmds, programs) = renamed_commands(fx, &from, &fx.wt);
                for (name, prog) in programs {
                    if matches!(w, Wrapper::CopiedMake) {
                        std::fs::copy(&prog, &name).unwrap();
                    } else {
                        std::os::unix::fs::symlink(&prog, &name).unwrap();
                    }
                }
                (cmds, Vec::new())
            }
            Wrapper::LayerLinkedMake => {
                // Made by the approved `make`: the links exist only in the session's layer.
                let dir = layer_link_dir(fx);
                std::fs::create_dir_all(dir.join("src")).unwrap();
                give(&fx.home, &fx.who);
                let (cmds, programs) = renamed_commands(fx, &direct(), &dir);
                let lines = programs
                    .iter()
                    .map(|(name, prog)| format!("ln -sf {} {}", prog.display(), name.display()))
                    .collect();
                (cmds, lines)
            }
            _ => (corpus.clone(), Vec::new()),
        };
        let line = wrapper_files(fx, w, &cmds, &make_first);
        let env = env_with(
            fx,
            &[
                (
                    "PATH",
                    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin".into(),
                ),
                ("npm_config_update_notifier", "false".into()),
                ("npm_config_logs_max", "0".into()),
                ("npm_config_cache", fx.home.join(".npm").into()),
            ],
        );
        let live = start(fx, &[], &env, &["bash", "-c", &line], Some(&cage));
        // The person approves every ask: only tyba's refusals can stop a blocked command.
        let ran = drive(fx, live, |_| Reply::Approve);
        let wout = std::fs::read_to_string(fx.wt.join("wrapper.out")).unwrap_or_default();
        let werr = std::fs::read_to_string(fx.wt.join("wrapper.err")).unwrap_or_default();
        let ctx =
            format!(
            "{who:?} {w:?}: out {} / err {} / wrapper out {wout} / wrapper err {werr} / asks {:?}",
            ran.out, ran.err, brief(&ran.asks)
        );
        assert!(
            fx.wt.join("wrapper-ran").exists(),
            "{ctx}: the approved wrapper did not run its descendants"
        );
        let log = log_of(fx);
        let mut failures = Vec::new();
        for (i, (id, c)) in cmds.iter().enumerate() {
            let n = norm(c);
            // (The repeated-failure guard's pause names the last refusal: it is no ask about
            // the command.)
            if ran
                .asks
                .iter()
                .any(|a| a["verdict"] != "paused" && norm(&action(a)).contains(&n))
            {
                failures.push(format!("{id}: asked instead of refused"));
            }
            // Refusals are logged without a verdict (`verdict` is empty); in a session whose
            // person approves every ask, a refusal is one made without asking.
            let refused = log.iter().any(|l| {
                l["decision"] == "refuse"
                    && (l["verdict"] == "blocked" || l["verdict"] == "")
                    && norm(&action(l)).contains(&n)
            });
            if !refused {
                failures.push(format!("{id}: no refusal of `{c}` in the log"));
            }
            // 126: the refusal program ran in the refused process. -9: the documented
            // fallback where the file name cannot be rewritten (`/bin/sh`, shorter than 10
            // bytes, in Python's vfork child): the reason on the child's stderr, then the
            // child ended. Never a failed spawn (`E13`).
            if let Ok(rc) = std::fs::read_to_string(fx.wt.join(format!("rc/{i}"))) {
                let fallback = matches!(w, Wrapper::PythonShell) && rc.trim() == "-9";
                if rc.trim() != "126" && !fallback {
                    failures.push(format!(
                        "{id}: the caller saw status {}, not 126",
                        rc.trim()
                    ));
                }
            }
        }
        // The effects, from outside.
        if p.daemon.refs("origin.git") != p.refs {
            failures.push(format!(
                "origin's refs changed: {}",
                p.daemon.refs("origin.git")
            ));
        }
        if std::fs::read(fx.wt.join(".git/config")).unwrap() != p.git_config {
            failures.push("the repository's config changed".into());
        }
        if std::fs::read("/etc/hosts").unwrap_or_default() != p.hosts {
            failures.push("/etc/hosts changed".into());
        }
        if Path::new("/usr/local/bin/tool").exists() {
            failures.push("/usr/local/bin/tool exists".into());
        }
        if !fx.wt.join("keep.txt").exists() || !fx.home.join("keep.txt").exists() {
            failures.push("a recursive deletion ran".into());
        }
        if matches!(
            w,
            Wrapper::Make | Wrapper::LinkedMake | Wrapper::LayerLinkedMake | Wrapper::CopiedMake
        ) {
            // 126 from the refusal program; make's own `/bin/sh` (a vfork child, a name too
            // short to rewrite) is ended once its stderr said why: `Killed` in make's words.
            let n = werr.matches("Error 126 (ignored)").count()
                + werr.matches("] Killed (ignored)").count();
            if n != cmds.len() {
                failures.push(format!(
                    "make saw {n} recipe lines refused by status 126 or ended after the reason"
                ));
            }
        }
        let refusals = werr.lines().filter(|l| l.starts_with("tyba: ")).count();
        if refusals < cmds.len() {
            failures.push(format!(
                "{refusals} `tyba: ` reasons reached the wrapper's stderr for {} commands",
                cmds.len()
            ));
        }
        let logged: Vec<String> = log
            .iter()
            .map(|l| format!("{} {} {}", l["decision"], l["verdict"], action(l)))
            .collect();
        assert!(
            failures.is_empty(),
            "{ctx}\n log {logged:#?}:\n  {}",
            failures.join("\n  ")
        );
        // Control: the remote takes a push without tyba, so the refs check could fail.
        let env = base_env(&fx.home, &[]);
        let r = outside(
            fx,
            &fx.wt,
            &env,
            &[
                "/usr/bin/env",
                "git",
                "push",
                "origin",
                "HEAD:refs/heads/control",
            ],
        );
        assert_eq!(r.code, 0, "{who:?}: control push: {r:?}");
        assert!(
            p.daemon.refs("origin.git").contains("refs/heads/control"),
            "{who:?}"
        );
        drop(cage);
    }
}

#[test]
fn exec_property_blocked_corpus_under_approved_make() {
    property(Wrapper::Make);
}

#[test]
fn exec_property_blocked_corpus_through_links_under_approved_make() {
    property(Wrapper::LinkedMake);
}

#[test]
fn exec_property_blocked_corpus_through_links_in_a_private_layer_under_approved_make() {
    property(Wrapper::LayerLinkedMake);
}

#[test]
fn exec_property_blocked_corpus_through_copies_under_approved_make() {
    property(Wrapper::CopiedMake);
}

#[test]
fn exec_property_blocked_corpus_under_approved_bash_script() {
    property(Wrapper::BashScript);
}

#[test]
fn exec_property_blocked_corpus_under_approved_xargs() {
    property(Wrapper::Xargs);
}

#[test]
fn exec_property_blocked_corpus_under_approved_npm_run() {
    property(Wrapper::NpmRun);
}

#[test]
fn exec_property_blocked_corpus_under_approved_python_subprocess() {
    property(Wrapper::PythonShell);
}

/// A green command covers nothing: nobody accepted it, so what it starts is judged as if
/// the agent had started it. A nested repository's `core.fsmonitor` (its configuration is
/// the agent's to write) turns a green `git -C sub status` into a program run: asked, and
/// denied, it does not run. The control: the same `git status` outside tyba runs it.
#[test]
fn exec_a_green_commands_descendants_are_judged_on_their_own() {
    for who in whos() {
        let Some(fx) = setup(&who, "green-cover") else {
            continue;
        };
        let sub = fx.wt.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        give(&fx.wt, &who);
        let env = fx.env();
        let r = outside(&fx, &sub, &env, &["/usr/bin/git", "init", "-q"]);
        assert_eq!(r.code, 0, "{who:?}: {r:?}");
        let marker = fx.wt.join("fsmonitor-ran");
        put(
            &fx,
            "sub/.git/config",
            &format!(
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch {}; echo\"\n",
                marker.display()
            ),
        );
        let live = start(
            &fx,
            &[],
            &env,
            &["bash", "-c", "git -C sub status --porcelain; echo st=$?"],
            None,
        );
        let ran = drive(&fx, live, |_| Reply::Deny(None));
        let ctx = format!("{who:?}: {:?} / {}", brief(&ran.asks), ran.err);
        assert!(ran.out.contains("st="), "{ctx}: the line did not run");
        assert!(
            ran.asks.iter().any(|a| action(a).contains("fsmonitor-ran")),
            "{ctx}: the fsmonitor was not asked"
        );
        assert!(!marker.exists(), "{ctx}: the denied fsmonitor ran");
        // Control: git runs it without tyba.
        let r = outside(&fx, &sub, &env, &["/usr/bin/git", "status", "--porcelain"]);
        assert_eq!(r.code, 0, "{who:?}: {r:?}");
        assert!(
            marker.exists(),
            "{who:?}: control: git did not run the fsmonitor, the check above could not fail"
        );
    }
}

/// A push judged with the configuration git will read: a home or `XDG_CONFIG_HOME` the
/// agent's shell exported (or an approved script set) holding `remote.net.push =
/// HEAD:refs/heads/main` makes the plain `git push net` a push to `main`, which git-guard's
/// reading of the person's configuration cannot see. Every ask approved, the push is refused
/// and the remote's `main` stays. The control: the same push without tyba moves it.
#[test]
fn exec_a_push_with_a_moved_home_or_config_dir_is_refused() {
    let push_cfg = "[remote \"net\"]\n\tpush = HEAD:refs/heads/main\n";
    let alias_cfg = "[alias]\n\tp = push net HEAD:refs/heads/main\n";
    for who in whos() {
        for (tag, cfg, control, script) in [
            (
                "homepush",
                push_cfg,
                "push",
                "mkdir -p h && cp pushcfg h/.gitconfig && export HOME=$PWD/h && git push net; echo rc=$?",
            ),
            (
                "xdgpush",
                push_cfg,
                "push",
                "python3 -c \"import os, subprocess; os.makedirs('x/git', exist_ok=True); open('x/git/config', 'w').write(open('pushcfg').read()); os.environ['XDG_CONFIG_HOME'] = os.path.abspath('x'); print('rc=%d' % subprocess.call(['git', 'push', 'net']))\"",
            ),
            (
                "aliaspush",
                alias_cfg,
                "p",
                "mkdir -p h && cp pushcfg h/.gitconfig && export HOME=$PWD/h && git p; echo rc=$?",
            ),
        ] {
            let Some(p) = push_fixture(&who, tag) else {
                continue;
            };
            put(&p.fx, "pushcfg", cfg);
            let live = start(&p.fx, &[], &p.fx.env(), &["bash", "-c", script], None);
            let ran = drive(&p.fx, live, |_| Reply::Approve);
            let ctx = format!("{who:?} {tag}: {:?} / {} / {}", brief(&ran.asks), ran.out, ran.err);
            assert!(ran.out.contains("rc="), "{ctx}: the push did not run");
            assert_eq!(
                p.daemon.refs("remote.git"),
                p.before,
                "{ctx}: the remote's main moved"
            );
            assert!(!ran.out.contains("rc=0"), "{ctx}: the push succeeded");
            // Control: the same configuration without tyba pushes HEAD to main.
            let home = p.fx.wt.join("h2");
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(home.join(".gitconfig"), cfg).unwrap();
            give(&p.fx.wt, &who);
            let mut env = p.fx.env();
            env.retain(|(k, _)| k != "HOME");
            env.push(("HOME".into(), home.into_os_string()));
            let argv: Vec<&str> = if control == "push" {
                vec!["/usr/bin/git", "push", "net"]
            } else {
                vec!["/usr/bin/git", control]
            };
            let r = outside(&p.fx, &p.fx.wt, &env, &argv);
            assert_eq!(r.code, 0, "{ctx}: control push: {r:?}");
            assert!(
                p.daemon.refs("remote.git").contains(&head(&p.fx)),
                "{ctx}: control: the push did not reach main, the check above could not fail"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the person reads of a command an agent runs inside its own shell wrapper.

/// An agent that runs each command the way Gemini CLI 0.61.0 does (`bash -c` of its
/// background-pid wrapper, a fresh scratch name per call), prints `RESULT` per step with the
/// command's exit status and stderr.
const WRAPPED_PY: &str = r#"
import json, os, subprocess, sys
tmp = os.environ.get("TMPDIR", "/tmp")
def wrapped(cmd, n):
    d = os.path.join(tmp, "gemini-shell-%d" % n)
    os.makedirs(d, exist_ok=True)
    return ("shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=%s/bgpids.tmp\n"
            "(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n%s\n)\n__code=$?\nexit $__code") % (d, cmd)
long_line = "".join("f%d() { :; }\n" % i for i in range(170)) + "rm -rf build"
steps = [
    ("rm", wrapped("rm -rf build", 1)),
    ("outside", wrapped("touch ../outside.txt", 2)),
    ("net", wrapped("curl -s http://127.0.0.1:9/", 3)),
    ("long", long_line),
    ("rm-again", wrapped("rm -rf build", 5)),
    ("rm-third", wrapped("rm -rf build", 6)),
]
for name, line in steps:
    p = subprocess.run(["bash", "-c", line], capture_output=True)
    print("RESULT " + json.dumps({"step": name, "rc": p.returncode,
                                  "err": p.stderr.decode(errors="replace")}), flush=True)
"#;

/// Issue 12: the ask, the end summary and `tyba log` name the command behind the agent's
/// wrapper (the audit log's JSON keeps the whole line); a line with no command inside is
/// cut to a bound with the count of the rest; three different refusals in the same wrapper
/// are no loop, the same one refused a third time is. On main the header and the summary
/// showed the wrapper (`shopt -u promptvars …`), the 5 KB line took 171 summary lines, and
/// the third different refusal carried the nudge (all keyed on `shopt`).
#[test]
fn exec_wrapped_commands_are_shown_as_the_command_inside() {
    for who in whos() {
        let Some(fx) = setup(&who, "wrapshown") else {
            continue;
        };
        std::fs::create_dir_all(fx.wt.join("build")).unwrap();
        put(&fx, "build/keep", "x\n");
        put(&fx, "w.py", WRAPPED_PY);
        let env = env_with(&fx, &[]);
        let live = start(&fx, &[], &env, &["python3", "w.py"], None);
        let ran = drive(&fx, live, |_| Reply::Deny(None));
        let ctx = format!(
            "{who:?}: out {} / err {} / asks {:?}",
            ran.out,
            ran.err,
            brief(&ran.asks)
        );
        let rs = results(&ran.out);
        assert_eq!(rs.len(), 6, "{ctx}");
        for r in &rs {
            assert_eq!(r["rc"], 126, "{ctx}: every step refused: {r}");
        }
        assert!(fx.wt.join("build/keep").exists(), "{ctx}");
        // The inbox: the command inside next to the whole line.
        let wrapped_asks: Vec<&serde_json::Value> = ran
            .asks
            .iter()
            .filter(|a| action(a).contains("shopt -u promptvars"))
            .collect();
        assert_eq!(wrapped_asks.len(), 5, "{ctx}");
        let inners: Vec<&str> = wrapped_asks
            .iter()
            .map(|a| a["inner_command"].as_str().unwrap_or("(none)"))
            .collect();
        assert_eq!(
            inners,
            [
                "rm -rf build",
                "touch ../outside.txt",
                "curl -s http://127.0.0.1:9/",
                "rm -rf build",
                "rm -rf build"
            ],
            "{ctx}"
        );
        // Different refusals: no nudge; the same one a third time (default nudge_after 3):
        // nudged.
        for step in ["rm", "outside", "net", "long", "rm-again"] {
            let err = result(&rs, step).unwrap()["err"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                !err.contains("stop retrying"),
                "{ctx}: {step} nudged: {err}"
            );
        }
        let third = result(&rs, "rm-third").unwrap()["err"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            third.contains("the same action refused 3 times") && third.contains("stop retrying"),
            "{ctx}: the retried refusal is nudged: {third}"
        );
        // The end summary: one line per denial, the command inside, the long line cut.
        let summary: Vec<&str> = ran
            .err
            .lines()
            .skip_while(|l| !l.starts_with("tyba: denied in this session ("))
            .take_while(|l| {
                l.starts_with("tyba: denied in this session (") || l.starts_with("tyba:   ")
            })
            .collect();
        assert_eq!(summary.len(), 7, "{ctx}: {summary:#?}");
        for l in &summary {
            assert!(!l.contains("shopt"), "{ctx}: the wrapper shown: {l}");
        }
        for cmd in [
            "rm -rf build",
            "touch ../outside.txt",
            "curl -s http://127.0.0.1:9/",
        ] {
            assert!(
                summary
                    .iter()
                    .any(|l| l.starts_with(&format!("tyba:   exec {cmd}: "))),
                "{ctx}: {cmd} in the summary: {summary:#?}"
            );
        }
        let long: Vec<&&str> = summary
            .iter()
            .filter(|l| l.contains("more characters; whole line in the audit log)"))
            .collect();
        assert_eq!(long.len(), 1, "{ctx}: {summary:#?}");
        assert!(
            long[0].starts_with("tyba:   exec f0() { :; }⏎f1() { :; }"),
            "{ctx}"
        );
        assert!(long[0].chars().count() < 600, "{ctx}: {}", long[0]);
        // `tyba log` for people: the same; `--json`: the whole line and the command inside.
        let (code, human, err) = fx.cli(&["log"]);
        assert_eq!(code, 0, "{ctx}: {err}");
        assert!(!human.contains("shopt -u promptvars"), "{ctx}: {human}");
        assert!(human.contains("rm -rf build"), "{ctx}: {human}");
        assert!(
            human.contains("more characters; whole line in the audit log)"),
            "{ctx}: {human}"
        );
        let log = log_of(&fx);
        let refused_rm: Vec<&serde_json::Value> = log
            .iter()
            .filter(|l| l["inner_command"] == "rm -rf build")
            .collect();
        assert!(!refused_rm.is_empty(), "{ctx}: {log:?}");
        for l in &refused_rm {
            assert!(
                action(l).contains("shopt -u promptvars") && action(l).contains("_bgpids_file"),
                "{ctx}: the whole line is kept: {l}"
            );
        }
        assert!(
            log.iter()
                .any(|l| action(l).contains("f169() { :; }") && l["inner_command"].is_null()),
            "{ctx}: the long line whole in the log"
        );
    }
}

/// What the person is asked is what runs (hostile review F5): an option's value of a shell
/// (`-o history`, `-co history`, `-rcfile FILE`, `-O extglob`) is never shown as the script.
/// The scripted person approves any ask that does not show the script (a harmless-looking
/// `history` or `/dev/null`) and denies the script itself; nothing of any script runs, each
/// checked from outside. Control: the same line outside tyba makes the file and removes
/// `build/`.
#[test]
fn exec_shell_option_values_are_never_asked_as_the_script() {
    let variants: &[&[&str]] = &[
        &["-c", "-o", "history"],
        &["-co", "history"],
        &["-c", "+O", "extglob"],
        &["-eo", "pipefail", "-c"],
        &["-rcfile", "/dev/null", "-c"],
        &["--norc", "-c", "-O", "extglob", "--"],
    ];
    for who in whos() {
        let Some(fx) = setup(&who, "shopts") else {
            continue;
        };
        make_build(&fx);
        let mut agent = String::new();
        for (n, opts) in variants.iter().enumerate() {
            let script = format!("touch pwned{n}; rm -rf build");
            let mut line = vec!["/bin/bash".to_string()];
            line.extend(opts.iter().map(|o| (*o).to_string()));
            line.push(script);
            let quoted: Vec<String> = line
                .iter()
                .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
                .collect();
            agent.push_str(&format!("{}; ", quoted.join(" ")));
        }
        agent.push_str("echo finished");
        let live = start(&fx, &[], &fx.env(), &["bash", "-c", &agent], None);
        let ran = drive(&fx, live, |a| {
            if action(a).contains("rm -rf build") {
                Reply::Deny(None)
            } else {
                Reply::Approve
            }
        });
        let ctx = format!("{who:?}: asks {:?} / err {}", brief(&ran.asks), ran.err);
        assert!(ran.out.contains("finished"), "{ctx}");
        for n in 0..variants.len() {
            assert!(!fx.wt.join(format!("pwned{n}")).exists(), "{n}: {ctx}");
            let shown = ran
                .asks
                .iter()
                .find(|a| action(a).contains(&format!("touch pwned{n}")));
            let shown = shown.unwrap_or_else(|| panic!("{n} never asked as the script: {ctx}"));
            assert_eq!(shown["verdict"], "red", "{n}: {ctx}");
        }
        assert!(fx.wt.join("build/out.o").exists(), "{ctx}");
        // Control: the same lines outside tyba run their scripts.
        let copy = copy_of_wt(&fx, "control");
        let out = outside(&fx, &copy, &fx.env(), &["/bin/bash", "-c", &agent]);
        assert!(out.out.contains("finished"), "{out:?}");
        for n in 0..variants.len() {
            assert!(
                copy.join(format!("pwned{n}")).exists(),
                "control {n}: {out:?}"
            );
        }
        assert!(!copy.join("build").exists(), "control: {out:?}");
    }
}

/// A name that is no UTF-8 text given to an exec (`cfg\xff`, a link to the worktree's
/// `.env`) is a word the policy cannot know (docs/policy.md "Names that are not UTF-8"):
/// `cat $'cfg\xff'` is refused when nobody can be asked and asked when someone can, naming
/// the bytes; a shell's `-c` script holding them is refused (code tyba cannot analyse); the
/// credential never reaches the output unasked. Before, the argument was decoded lossily to `cfg\u{FFFD}`, a path that
/// does not exist, and the `cat` ran green. Controls: the same line outside tyba prints it,
/// and so does the exec inside tyba once approved.
#[test]
fn exec_argument_that_is_no_utf8_naming_a_credential_link_is_not_run_unasked() {
    use std::os::unix::ffi::OsStrExt;
    const SECRET: &str = "tyba-bytes-secret";
    for who in whos() {
        let Some(fx) = setup(&who, "bytesarg") else {
            continue;
        };
        put(&fx, ".env", &format!("TOKEN={SECRET}\n"));
        std::os::unix::fs::symlink(".env", fx.wt.join(std::ffi::OsStr::from_bytes(b"cfg\xff")))
            .unwrap();
        give(&fx.wt, &fx.who);
        // The `cat` is asked; the shell whose script cannot be known is refused (blocked: code
        // tyba cannot analyse), asked never.
        for (line, asked) in [
            ("cat $'cfg\\xff'; echo rc=$?", true),
            ("bash -c $'cat cfg\\xff'; echo rc=$?", false),
        ] {
            let control = outside(&fx, &fx.wt, &fx.env(), &["/bin/bash", "-c", line]);
            assert!(control.out.contains(SECRET), "control {line}: {control:?}");

            let ran = run_alone(&fx, &[], &fx.env(), &["bash", "-c", line]);
            let ctx = format!("{who:?} {line}: out {} / err {}", ran.out, ran.err);
            assert!(!ran.out.contains(SECRET), "read unasked: {ctx}");
            assert!(ran.out.contains("rc=126"), "not refused: {ctx}");

            let live = start(&fx, &[], &fx.env(), &["bash", "-c", line], None);
            let ran = drive(&fx, live, |_| Reply::Deny(None));
            let ctx = format!(
                "{who:?} {line}: out {} / err {} / asks {:?}",
                ran.out,
                ran.err,
                brief(&ran.asks)
            );
            assert!(!ran.out.contains(SECRET), "read unasked: {ctx}");
            if !asked {
                assert!(ran.out.contains("rc=126") && ran.asks.is_empty(), "{ctx}");
                assert!(
                    ran.err.contains("exec bash -c $'cat cfg\\xff'"),
                    "the refusal names the bytes: {ctx}"
                );
                continue;
            }
            assert!(
                ran.asks.iter().any(|a| action(a).contains("cfg\\xff")),
                "not asked naming the bytes: {ctx}"
            );

            // Control inside tyba: approved, the same exec reads the file (the sandbox
            // alone does not keep it out, so the checks above can fail).
            let live = start(&fx, &[], &fx.env(), &["bash", "-c", line], None);
            let ran = drive(&fx, live, |_| Reply::Approve);
            assert!(ran.out.contains(SECRET), "approved control {line}: {ran:?}");
        }
    }
}

/// r3-07: git run under another name than `git push` — a `#!` script whose interpreter is
/// git, exec'd by a relative name (the kernel runs `GIT push net HEAD:main`), a link
/// `./git-push` to git (git dispatches on its argv[0]), the dynamic loader running git — is
/// judged as the push it is: the remote's main does not move although every ask is approved
/// at high autonomy. The control pushes the same way without tyba.
#[test]
fn exec_git_under_another_name_is_judged_as_the_push_it_runs() {
    let git = ["/usr/local/bin/git", "/usr/bin/git"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("git");
    let ldso = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let mut variants = vec![
        (
            "shebang",
            format!(
                "printf '#!{git}\\n' > push && chmod +x push && python3 -c 'import os; os.execv(\"push\", [\"push\", \"net\", \"HEAD:main\"])'"
            ),
        ),
        (
            "link",
            format!("ln -s {git} git-push && ./git-push net HEAD:main"),
        ),
    ];
    variants.push(("copy", format!("cp {git} gg && ./gg push net HEAD:main")));
    // A `#!` line naming a link to git under another name: git all the same.
    variants.push((
        "shebang-link",
        format!(
            "ln -s {git} g && printf '#!./g\\n' > push && chmod +x push && python3 -c 'import os; os.execv(\"push\", [\"push\", \"net\", \"HEAD:main\"])'"
        ),
    ));
    if let Some(l) = ldso {
        variants.push(("loader", format!("{l} {git} push net HEAD:main")));
        // A copy of the loader under another name.
        variants.push((
            "loader-copy",
            format!("cp {l} ./l && ./l {git} push net HEAD:main"),
        ));
    }
    let mut moved = Vec::new();
    for who in whos() {
        for (tag, line) in &variants {
            let Some(p) = push_fixture(&who, &format!("gx-{tag}")) else {
                continue;
            };
            let live = start(
                &p.fx,
                &["--autonomy", "high"],
                &p.fx.env(),
                &["bash", "-c", line],
                None,
            );
            let ran = drive(&p.fx, live, |_| Reply::Approve);
            if p.daemon.refs("remote.git") != p.before {
                moved.push(format!(
                    "{who:?} {tag}: the remote's main moved: out {} / err {} / asks {:?}",
                    ran.out,
                    ran.err,
                    brief(&ran.asks)
                ));
            }
            // Stopped by tyba as the push it is, not failed for another reason.
            let refused = log_of(&p.fx).iter().any(|l| {
                l["decision"] == "refuse"
                    && l["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("refs/heads/main")
            }) || ran
                .err
                .lines()
                .any(|l| l.starts_with("tyba:   ") && l.contains("refs/heads/main"));
            if !refused {
                moved.push(format!(
                    "{who:?} {tag}: no refusal for refs/heads/main: err {}",
                    ran.err
                ));
            }
            // The control: the same line without tyba moves the remote's main.
            let _ = std::fs::remove_file(p.fx.wt.join("push"));
            for f in ["git-push", "gg", "g", "l"] {
                let _ = std::fs::remove_file(p.fx.wt.join(f));
            }
            let env = base_env(&p.fx.home, &[]);
            let r = outside(&p.fx, &p.fx.wt, &env, &["/bin/bash", "-c", line]);
            assert!(
                p.daemon.refs("remote.git").contains(&head(&p.fx)),
                "{who:?} {tag}: the control push did not reach the remote: {} / {}",
                r.out,
                r.err
            );
        }
    }
    assert!(moved.is_empty(), "{}", moved.join("\n"));
}
