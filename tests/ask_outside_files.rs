//! `tyba run --ask-outside-files`: a program that opens a path beside the worktree without
//! naming it on its command line (a Python script) is asked at the kernel level, through the
//! supervisor's FUSE filesystem (`supervisor/src/outside_fs.rs`), and the person's answer
//! decides. Real sessions answered through `tyba approve/deny`, as the test's user and as the
//! unprivileged `TYBA_TEST_USER`; effects checked from outside, each with a control that shows
//! the check can fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether `who` may open `/dev/fuse` for reading and writing (`test -r -a -w`, as that user).
fn fuse_openable_by(who: &Who) -> bool {
    command_as(who, Path::new("/usr/bin/test"))
        .args(["-r", "/dev/fuse", "-a", "-w", "/dev/fuse"])
        .status()
        .is_ok_and(|s| s.success())
}

/// A fixture, or `None` when the sandbox or FUSE cannot run here (a failure under
/// `TYBA_REQUIRE_SANDBOX=1`). The unprivileged user needs `/dev/fuse` as distributions ship
/// it (mode `0666`, the fuse package's udev rule; `.ci/run` sets it so on machines without
/// udev): the tests never change the device's mode themselves (other tests run beside them).
fn fixture(who: &Who, tag: &str) -> Option<Fx> {
    if !Path::new("/dev/fuse").exists() {
        assert!(!require_sandbox(), "no /dev/fuse");
        eprintln!("SKIP: no /dev/fuse");
        return None;
    }
    if !fuse_openable_by(who) {
        assert!(
            !require_sandbox(),
            "{who:?} cannot open /dev/fuse: make it mode 0666 as distributions ship it (.ci/run does)"
        );
        eprintln!("SKIP: {who:?} cannot open /dev/fuse");
        return None;
    }
    setup(who, tag)
}

/// `dir` beside the worktree, with `files` (name, content), owned by the user under test.
fn beside(fx: &Fx, dir: &str, files: &[(&str, &str)]) -> PathBuf {
    let o = fx.wt.parent().unwrap().join(dir);
    std::fs::create_dir_all(&o).unwrap();
    for (n, c) in files {
        if let Some(d) = o.join(n).parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(o.join(n), c).unwrap();
    }
    give(&o, &fx.who);
    o
}

/// The control of a test: `script` run by `sh` without the sandbox, in the worktree with the
/// fixture's home; its standard output.
fn bare_sh(fx: &Fx, script: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", script])
        .env("HOME", &fx.home)
        .current_dir(&fx.wt)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `code` as `name` in the worktree (owned by the user under test).
fn script(fx: &Fx, name: &str, code: &str) {
    let p = fx.wt.join(name);
    std::fs::write(&p, code).unwrap();
    give(&p, &fx.who);
}

/// `code` after the Python prelude the scripts of these tests share: `import os` and
/// `step(name, f)`, which calls `f` and prints `name=ok`, or `name=ERR<errno>` when it raises
/// `OSError`.
fn stepped(code: &str) -> String {
    format!(
        r#"import os
def step(name, f):
    try:
        f(); print(name + "=ok", flush=True)
    except OSError as e:
        print(name + "=ERR%d" % e.errno, flush=True)
{code}"#
    )
}

/// `tyba run`'s options for a session with the outside-files server (`served`), or with none
/// (`--outside-files off`: Landlock alone decides outside the worktree).
fn server_args(served: bool) -> &'static [&'static str] {
    if served {
        &["--ask-outside-files"]
    } else {
        &["--outside-files", "off"]
    }
}

/// The same Python file run without any sandbox, as the user under test, in the worktree.
fn without_sandbox(fx: &Fx, name: &str) -> String {
    without_sandbox_args(fx, name, &[])
}

/// [`without_sandbox`] with arguments for the script.
fn without_sandbox_args(fx: &Fx, name: &str, args: &[&str]) -> String {
    let mut c = command_as(&fx.who, Path::new("/usr/bin/python3"));
    c.arg(name).args(args).current_dir(&fx.wt).env_clear();
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Answers the next ask (which must contain `expect`) with `answer`; returns its reasons.
fn answer(fx: &Fx, expect: &str, answer: &str) -> String {
    let p = fx.pending(1);
    let action = p[0]["action"].as_str().unwrap().to_string();
    assert!(action.contains(expect), "{:?}: {action} / {expect}", fx.who);
    let reasons = p[0]["reasons"].to_string();
    let id = p[0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = fx.cli(&[answer, &id]);
    assert_eq!(code, 0, "{:?}: {err}", fx.who);
    reasons
}

/// The answers in the session's audit log, in order (`once`, `always`, `deny`).
fn answers_logged(fx: &Fx) -> Vec<String> {
    fx.log_lines()
        .iter()
        .filter_map(|l| l["answer"].as_str().map(str::to_string))
        .collect()
}

const READ_TWICE: &str = r#"
import subprocess, sys
def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError as e:
        return "ERR%d" % e.errno
print("first=" + read("../O/secret.txt"), flush=True)
print("again=" + read("../O/secret.txt"), flush=True)
# A child of this process: inside the approved tree.
r = subprocess.run(["/usr/bin/python3", "other.py", "child"], capture_output=True, text=True)
print(r.stdout.strip(), flush=True)
sys.stderr.write(r.stderr)
"#;

/// Run by `READ_TWICE` as its child, and by the shell after it as a process of its own.
const OTHER: &str = r#"
import sys
try:
    print(sys.argv[1] + "=" + open("../O/secret.txt").read().strip(), flush=True)
except OSError as e:
    print(sys.argv[1] + "=ERR%d" % e.errno, flush=True)
"#;

/// The agent's line: the script, then another process reading the same file.
const RUN_BOTH: &str = "/usr/bin/python3 t.py; /usr/bin/python3 other.py other";

#[test]
fn an_outside_open_is_asked_and_the_approval_holds_for_that_process_only() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-read") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(&fx, "t.py", READ_TWICE);
        script(&fx, "other.py", OTHER);
        // Control: without the sandbox the script reads the file every time.
        let bare = without_sandbox(&fx, "t.py");
        assert!(
            bare.contains("first=topsecret") && bare.contains("child=topsecret"),
            "{who:?}: control: {bare}"
        );
        // The default: no option.
        let s = fx.start(&["--autonomy", "high"], RUN_BOTH);
        let first = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            first.contains("this command (python3, pid")
                && first.contains("and the processes it starts, until it exits"),
            "{who:?}: whom the approval covers: {first}"
        );
        let reasons = answer(&fx, "read ", "approve");
        assert!(
            reasons.contains("outside the worktree"),
            "{who:?}: {reasons}"
        );
        // The python run after it is a process of its own, outside the approved tree: asked,
        // and denied.
        answer(&fx, "read ", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("first=topsecret"), "{who:?}: {out} / {err}");
        assert!(
            out.contains("again=topsecret") && out.contains("child=topsecret"),
            "{who:?}: the approval holds for the process and its children: {out} / {err}"
        );
        assert!(
            out.contains("other=ERR13"),
            "{who:?}: denied with EACCES: {out} / {err}"
        );
        assert!(
            err.contains("tyba: refused by tyba") || err.contains("tyba: "),
            "{who:?}: the refusal reaches the process's stderr: {err}"
        );
        let lines = fx.log_lines();
        let answers: Vec<String> = lines
            .iter()
            .filter_map(|l| l["answer"].as_str().map(str::to_string))
            .collect();
        assert_eq!(answers, ["once", "deny"], "{who:?}: {lines:?}");
        assert!(
            lines.iter().any(|l| l["kind"] == "file"
                && l.to_string().contains("secret.txt")
                && l.to_string().contains("deny")),
            "{who:?}: the denial is in the audit log: {lines:?}"
        );
    }
}

#[test]
fn switched_off_the_same_open_fails_unasked() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-off") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(&fx, "t.py", READ_TWICE);
        script(&fx, "other.py", OTHER);
        let s = fx.start(&["--autonomy", "high", "--outside-files", "off"], RUN_BOTH);
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("first=ERR13") && out.contains("other=ERR13"),
            "{who:?}: Landlock alone: {out} / {err}"
        );
        assert!(
            !err.contains("outside files are not asked"),
            "{who:?}: switched off on purpose: nothing to say: {err}"
        );
        assert!(
            !fx.log_lines().iter().any(|l| l["answer"].is_string()),
            "{who:?}: nothing asked"
        );
    }
}

#[test]
fn non_interactive_denies_at_once_and_logs_it() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-nonint") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(&fx, "t.py", READ_TWICE);
        script(&fx, "other.py", OTHER);
        let s = fx.start(
            &[
                "--autonomy",
                "high",
                "--ask-outside-files",
                "--non-interactive",
            ],
            RUN_BOTH,
        );
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("first=ERR13") && out.contains("other=ERR13"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            err.contains("refused by tyba") && err.contains("secret.txt"),
            "{who:?}: the refusal is in the terminal: {err}"
        );
        let lines = fx.log_lines();
        assert!(
            lines.iter().any(|l| l.to_string().contains("secret.txt")),
            "{who:?}: logged: {lines:?}"
        );
    }
}

#[test]
fn a_credential_path_asks_with_the_sensitive_confirmation() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-cred") else {
            continue;
        };
        beside(
            &fx,
            "O",
            &[(".env", "TOKEN=abc\n"), ("plain.txt", "plain\n")],
        );
        // And a key in the person's home.
        let ssh = fx.home.join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(ssh.join("id_ed25519"), "KEY\n").unwrap();
        give(&ssh, &fx.who);
        script(
            &fx,
            "t.py",
            r#"
import os
for p in ["../O/plain.txt", "../O/.env", os.path.expanduser("~/.ssh/id_ed25519")]:
    try:
        print(p, open(p).read().strip(), flush=True)
    except OSError as e:
        print(p, "ERR%d" % e.errno, flush=True)
"#,
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        // The control: an ordinary outside file is red but names no credential.
        let plain = answer(&fx, "plain.txt", "approve");
        assert!(!plain.contains("credential"), "{who:?}: {plain}");
        let p = fx.pending(1);
        assert_eq!(p[0]["verdict"], "red", "{who:?}: {p:?}");
        let cred = answer(&fx, ".env", "deny");
        assert!(
            cred.contains("credential path (.env)") && cred.contains("sensitive"),
            "{who:?}: {cred}"
        );
        let key = answer(&fx, "id_ed25519", "deny");
        assert!(
            key.contains("credential path (.ssh)") && key.contains("sensitive"),
            "{who:?}: {key}"
        );
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("../O/plain.txt plain"), "{who:?}: {out}");
        assert!(out.contains("../O/.env ERR13"), "{who:?}: {out}");
        assert!(out.contains("id_ed25519 ERR13"), "{who:?}: {out}");
    }
}

#[test]
fn a_write_under_etc_is_refused_without_an_ask() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-etc") else {
            continue;
        };
        // A file under /etc the user under test may write outside the sandbox (the control).
        let probe = PathBuf::from(format!("/etc/tyba-outside-probe-{}", std::process::id()));
        std::fs::write(&probe, "before\n").unwrap();
        give(&probe, &who);
        script(
            &fx,
            "t.py",
            &format!(
                r#"
try:
    open("{p}", "w").write("written\n"); print("etc=ok")
except OSError as e:
    print("etc=ERR%d" % e.errno)
"#,
                p = probe.display()
            ),
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        let (code, out, err) = s.finish();
        let after = std::fs::read_to_string(&probe).unwrap();
        let bare = without_sandbox(&fx, "t.py");
        let after_bare = std::fs::read_to_string(&probe).unwrap();
        let _ = std::fs::remove_file(&probe);
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("etc=ERR13"), "{who:?}: {out} / {err}");
        assert_eq!(after, "before\n", "{who:?}: /etc unchanged");
        assert!(
            !fx.log_lines().iter().any(|l| l["answer"].is_string()),
            "{who:?}: nothing asked"
        );
        assert!(
            bare.contains("etc=ok") && after_bare == "written\n",
            "{who:?}: control: {bare}"
        );
    }
}

#[test]
fn a_planted_symlink_does_not_widen_an_approval() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-link") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        let o2 = beside(&fx, "O2", &[("other.txt", "othersecret\n")]);
        script(
            &fx,
            "t.py",
            r#"
import os
def read(p):
    try:
        return open(p).read().strip()
    except OSError as e:
        return "ERR%d" % e.errno
print("approved=" + read("../O/secret.txt"), flush=True)
# Links planted after the approval, one in the worktree, one in the approved directory.
os.symlink("../O2/other.txt", "wt-link")
print("wt-link=" + read("wt-link"), flush=True)
try:
    os.symlink("../O2/other.txt", "../O/o-link"); print("planted=yes", flush=True)
except OSError as e:
    print("planted=ERR%d" % e.errno, flush=True)
print("o-link=" + read("../O/o-link"), flush=True)
try:
    print("listing=" + ",".join(sorted(os.listdir("../O"))), flush=True)
except OSError as e:
    print("listing=ERR%d" % e.errno, flush=True)
"#,
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        answer(&fx, "secret.txt", "approve");
        // The link into O2 resolves to O2's file: its own ask, denied.
        answer(&fx, "other.txt", "deny");
        // Making a link in the approved directory is asked, its text shown; approved, the
        // server makes it, and reading through it is asked where it leads, denied.
        answer(&fx, "symlink ", "approve");
        answer(&fx, "read ", "deny");
        // Listing O is not covered by the file's approval either.
        answer(&fx, "list ", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("approved=topsecret"), "{who:?}: {out}");
        assert!(out.contains("wt-link=ERR13"), "{who:?}: {out} / {err}");
        assert!(out.contains("planted=yes"), "{who:?}: {out} / {err}");
        assert!(out.contains("o-link=ERR13"), "{who:?}: {out} / {err}");
        assert_eq!(
            std::fs::read_link(fx.wt.parent().unwrap().join("O/o-link")).unwrap(),
            Path::new("../O2/other.txt"),
            "{who:?}: the link as the agent wrote it"
        );
        assert!(out.contains("listing=ERR13"), "{who:?}: {out}");
        // Control: the worktree link exists and leads to the file, readable outside.
        assert_eq!(
            std::fs::read_to_string(fx.wt.join("wt-link")).unwrap(),
            "othersecret\n"
        );
        assert!(o2.join("other.txt").exists());
    }
}

#[test]
fn an_approved_command_line_is_not_asked_again_when_it_opens_what_it_named() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-runner") else {
            continue;
        };
        beside(
            &fx,
            "O",
            &[("secret.txt", "topsecret\n"), ("not-named.txt", "nn\n")],
        );
        // `cat` names the file: the exec is asked (red, out of tree) and runs in a domain of
        // its own; its open reaches the file server, which knows the approved line's grants.
        // The same command opening a file its line does not name is asked by the server.
        let s = fx.start(
            &["--ask-outside-files"],
            r#"cat ../O/secret.txt; echo cat=$?
/usr/bin/python3 -c "print(open('../O/not-named.txt').read())" ../O/secret.txt; echo py=$?"#,
        );
        answer(&fx, "cat ../O/secret.txt", "approve");
        answer(&fx, "python3 -c", "approve");
        answer(&fx, "not-named.txt", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("topsecret") && out.contains("cat=0"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            out.contains("py=1") && !out.contains("nn"),
            "{who:?}: {out} / {err}"
        );
        let answers = answers_logged(&fx);
        assert_eq!(
            answers,
            ["once", "once", "deny"],
            "{who:?}: asked once per intent"
        );
    }
}

/// Answers the pending ask whose action contains `expect` (waiting up to 60 s for one),
/// whatever else is pending beside it.
fn answer_the(fx: &Fx, expect: &str, answer: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, out, err) = fx.cli(&["inbox", "--json"]);
        assert_eq!(code, 0, "tyba inbox: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let found = v.as_array().unwrap().iter().find_map(|s| {
            s["pending"].as_array()?.iter().find_map(|p| {
                p["action"]
                    .as_str()
                    .is_some_and(|a| a.contains(expect))
                    .then(|| p["id"].as_str().unwrap().to_string())
            })
        });
        if let Some(id) = found {
            let (code, _, err) = fx.cli(&[answer, &id]);
            assert_eq!(code, 0, "{:?}: {err}", fx.who);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}: no ask of {expect}: {v}",
            fx.who
        );
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// An approved line that names a directory reads what the directory held, not a file brought
/// in later from outside its grant: a denied secret linked into the directory (the link
/// approved, its ask saying it reads and writes nothing) is asked when the line's command
/// opens it (review 10's r10-01). The line's own files are not asked (the control that the
/// directory grant holds), and the same without the sandbox reads the secret.
#[test]
fn a_file_linked_into_an_approved_lines_directory_is_not_that_lines_to_read() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-brought-in") else {
            continue;
        };
        let o = beside(
            &fx,
            "O",
            &[("secret.txt", "topsecret\n"), ("sub/deep.txt", "deep\n")],
        );
        script(
            &fx,
            "worker.py",
            r#"
import os, sys, time
d = sys.argv[1]
# Until the agent has linked the secret in (a look-up is answered unasked).
for _ in range(600):
    if os.path.exists(d + "/s2"):
        break
    time.sleep(0.05)
def read(p):
    try:
        return open(p).read().strip()
    except OSError as e:
        return "ERR%d" % e.errno
print("deep=" + read(d + "/deep.txt"), flush=True)
print("s2=" + read(d + "/s2"), flush=True)
# Then under the name the agent renames it to inside the directory (review 11's r11-01).
for _ in range(600):
    if os.path.exists(d + "/s3"):
        break
    time.sleep(0.05)
print("s3=" + read(d + "/s3"), flush=True)
"#,
        );
        let s = fx.start(
            &["--ask-outside-files"],
            r#"/usr/bin/python3 worker.py ../O/sub & w=$!
cat ../O/secret.txt; echo cat=$?
ln ../O/secret.txt ../O/sub/s2; echo ln=$?
mv ../O/sub/s2 ../O/sub/s3; echo mv=$?
wait $w; echo worker=$?"#,
        );
        answer_the(&fx, "worker.py ../O/sub", "approve");
        answer_the(&fx, "cat ../O/secret.txt", "deny");
        answer_the(&fx, "ln ../O/secret.txt", "approve");
        answer_the(&fx, "read ", "deny");
        answer_the(&fx, "mv ../O/sub/s2", "approve");
        answer_the(&fx, "s3", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in [
            "deep=deep",
            "s2=ERR13",
            "s3=ERR13",
            "ln=0",
            "mv=0",
            "worker=0",
        ] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(!out.contains("topsecret"), "{who:?}: {out}");
        // Checked from outside: the link was made and renamed (what the person approved).
        assert_eq!(
            std::fs::read_to_string(o.join("sub/s3")).unwrap(),
            "topsecret\n"
        );
        // The control: without the sandbox the worker reads it.
        std::fs::hard_link(o.join("secret.txt"), o.join("sub/s2")).unwrap();
        let bare = without_sandbox_args(&fx, "worker.py", &["../O/sub"]);
        assert!(
            bare.contains("s2=topsecret") && bare.contains("s3=topsecret"),
            "{who:?}: control: {bare}"
        );
    }
}

/// An outside-files ask of a process that is being ended is withdrawn: once the server has
/// read a FUSE request, the kernel waits for its reply uninterruptibly, so a process left
/// waiting on an ask could not be killed and the session never ended after its agent exited
/// (review 9's r9-02; the same after `SIGTERM` or a closed terminal, which also end the
/// session by killing what is left). The agent leaves ten daemons whose reads of an outside
/// file are asked, and exits: the session ends within seconds with nobody answering, each ask
/// is denied as the asker's ("process gone"), the withdrawals are no refusals the
/// repeated-failure guard counts (ten of them once raised its "resume the agent" ask for an
/// agent that had exited, and the session waited on it: review 10's r10-02), and nothing of
/// the session is left. The control: the daemons' asks are really pending (seen in the
/// inbox) before the agent exits.
#[test]
fn an_ask_of_a_process_being_ended_is_withdrawn_and_the_session_ends() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-pending-end") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        let marker = format!("tyba-pending-{}-{:?}", std::process::id(), who)
            .replace([' ', '"', '{', '}', ':', ','], "");
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            &format!(
                r#"for n in 1 2 3 4 5 6 7 8 9 10; do
  setsid /usr/bin/python3 -c "open('../O/secret.txt').read()" {marker} > /dev/null 2>&1 &
done
for i in $(seq 1 600); do [ -e go ] && break; sleep 0.05; done
exit 0"#
            ),
        );
        let p = fx.pending(10);
        assert!(
            p.iter().all(|a| a["action"]
                .as_str()
                .is_some_and(|a| a.contains("secret.txt"))),
            "{who:?}: control: {p:?}"
        );
        std::fs::write(fx.wt.join("go"), "").unwrap();
        give(&fx.wt.join("go"), &fx.who);
        let t = std::time::Instant::now();
        let (code, out, err) = s.finish();
        let took = t.elapsed();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            took < std::time::Duration::from_secs(20),
            "{who:?}: the session ended {took:?} after its agent: {err}"
        );
        let left: Vec<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
            })
            .collect();
        assert!(left.is_empty(), "{who:?}: left behind: {left:?}");
        let asked: Vec<serde_json::Value> = fx
            .log_lines()
            .into_iter()
            .filter(|l| {
                l["kind"] == "file"
                    && l["action"]
                        .as_str()
                        .is_some_and(|a| a.contains("secret.txt"))
            })
            .collect();
        let withdrawn = asked
            .iter()
            .filter(|l| {
                l["answer"] == "deny"
                    && l["answered_by"]
                        .as_str()
                        .is_some_and(|b| b.contains("process gone"))
            })
            .count();
        assert_eq!(withdrawn, 10, "{who:?}: {asked:?}");
        assert!(
            !fx.log_lines()
                .iter()
                .any(|l| l["kind"] == "pause" || l["decision"] == "pause"),
            "{who:?}: no pause of an agent that has exited"
        );
    }
}

/// A grant is for what its name held when asked: once the name is removed and another file
/// linked under it, the old grant reaches nothing (review 9's r9-03: a `create` grant of a
/// scratch name read and appended to a secret whose read had been denied, through the
/// approved removal of the scratch and link of the secret under its name, whose ask says
/// "not reading or writing the file").
#[test]
fn a_grant_ends_when_its_name_is_removed_and_another_file_linked_there() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-relink") else {
            continue;
        };
        let o = beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(
            &fx,
            "t.py",
            r#"
import os
def step(name, f):
    try:
        r = f(); print(name + "=ok " + repr(r), flush=True)
    except OSError as e:
        print(name + "=ERR%d" % e.errno, flush=True)
def create():
    with open("../O/scratch.txt", "x") as fh:
        fh.write("mine\n")
def append():
    with open("../O/scratch.txt", "a") as fh:
        fh.write("APPENDED\n")
step("secret", lambda: open("../O/secret.txt").read())
step("create", create)
step("mine", lambda: open("../O/scratch.txt").read())
step("remove", lambda: os.unlink("../O/scratch.txt"))
step("link", lambda: os.link("../O/secret.txt", "../O/scratch.txt"))
step("relinked", lambda: open("../O/scratch.txt").read())
step("append", append)
"#,
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        answer(&fx, "read ", "deny");
        answer(&fx, "create ", "approve");
        answer(&fx, "remove ", "approve");
        answer(&fx, "link ", "approve");
        // The name now holds the secret: asked again, as a read and as a write.
        answer(&fx, "scratch.txt", "deny");
        answer(&fx, "scratch.txt", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in [
            "secret=ERR13",
            "create=ok",
            "mine=ok 'mine\\n'",
            "remove=ok",
            "link=ok",
            "relinked=ERR13",
            "append=ERR13",
        ] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(!out.contains("topsecret"), "{who:?}: {out}");
        // Checked from outside: the secret is as it was, under both names.
        assert_eq!(
            std::fs::read_to_string(o.join("secret.txt")).unwrap(),
            "topsecret\n"
        );
        let answers = answers_logged(&fx);
        assert_eq!(
            answers,
            ["deny", "once", "once", "once", "deny", "deny"],
            "{who:?}"
        );
        // The control: without the sandbox the same script reads and appends to the secret.
        std::fs::remove_file(o.join("scratch.txt")).unwrap();
        let bare = without_sandbox(&fx, "t.py");
        assert!(
            bare.contains("relinked=ok 'topsecret") && bare.contains("append=ok"),
            "{who:?}: control: {bare}"
        );
    }
}

/// An approved line that removes or renames outside paths (`rm`, `mv`) is one ask: its
/// command's removal and rename reach the file server, which knows the line changes those
/// names (review 9's r9-01: each was asked a second time by the server, and a denial there
/// failed the approved command half-way). A denied line changes nothing (the control).
#[test]
fn an_approved_removal_or_rename_outside_is_asked_once() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-runner-change") else {
            continue;
        };
        let o = beside(
            &fx,
            "O",
            &[("gone.txt", "g\n"), ("a.txt", "a\n"), ("kept.txt", "k\n")],
        );
        let s = fx.start(
            &["--ask-outside-files"],
            r#"rm -f ../O/gone.txt; echo rm=$?
mv ../O/a.txt ../O/b.txt; echo mv=$?
rm -f ../O/kept.txt; echo rm2=$?"#,
        );
        answer(&fx, "rm -f ../O/gone.txt", "approve");
        answer(&fx, "mv ../O/a.txt ../O/b.txt", "approve");
        answer(&fx, "rm -f ../O/kept.txt", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in ["rm=0", "mv=0"] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(!out.contains("rm2=0"), "{who:?}: {out} / {err}");
        // Checked from outside: the approved lines did what they said, the denied one nothing.
        assert!(!o.join("gone.txt").exists(), "{who:?}: {out} / {err}");
        assert!(!o.join("a.txt").exists(), "{who:?}: {out} / {err}");
        assert_eq!(std::fs::read_to_string(o.join("b.txt")).unwrap(), "a\n");
        assert_eq!(std::fs::read_to_string(o.join("kept.txt")).unwrap(), "k\n");
        let answers = answers_logged(&fx);
        assert_eq!(
            answers,
            ["once", "once", "deny"],
            "{who:?}: asked once per intent"
        );
    }
}

#[test]
fn creating_making_and_removing_outside_are_asked_each() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-modify") else {
            continue;
        };
        let o = beside(&fx, "O", &[("keep.txt", "keep\n")]);
        script(
            &fx,
            "t.py",
            &stepped(
                r#"
def create():
    with open("../O/new.txt", "w") as fh:
        fh.write("made\n")
step("create", create)
step("reread", lambda: open("../O/new.txt").read())
step("mkdir", lambda: os.mkdir("../O/sub"))
step("remove", lambda: os.unlink("../O/keep.txt"))
step("rename", lambda: os.rename("../O/new.txt", "../O/moved.txt"))
"#,
            ),
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        answer(&fx, "create ", "approve");
        answer(&fx, "mkdir ", "deny");
        answer(&fx, "remove ", "deny");
        answer(&fx, "rename ", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in [
            "create=ok",
            "reread=ok",
            "mkdir=ERR13",
            "remove=ERR13",
            "rename=ERR13",
        ] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        // Checked from outside: the approved file landed, the denied changes did not.
        assert_eq!(
            std::fs::read_to_string(o.join("new.txt")).unwrap(),
            "made\n"
        );
        assert!(!o.join("sub").exists() && !o.join("moved.txt").exists());
        assert_eq!(
            std::fs::read_to_string(o.join("keep.txt")).unwrap(),
            "keep\n"
        );
        // The control: the same script without the sandbox makes every change.
        std::fs::remove_file(o.join("new.txt")).unwrap();
        let bare = without_sandbox(&fx, "t.py");
        assert!(
            bare.contains("mkdir=ok") && bare.contains("remove=ok") && bare.contains("rename=ok"),
            "{who:?}: control: {bare}"
        );
        assert!(o.join("sub").is_dir() && !o.join("keep.txt").exists());
    }
}

/// The FUSE connection's directory in `fusectl` (`Documentation/filesystems/fuse/fuse.rst`,
/// "Control filesystem"), mounted when absent (root only).
fn fusectl() -> Option<PathBuf> {
    let d = PathBuf::from("/sys/fs/fuse/connections");
    if my_uid() != 0 {
        return None;
    }
    let mounted = std::fs::read_to_string("/proc/self/mounts")
        .is_ok_and(|m| m.lines().any(|l| l.contains(" /sys/fs/fuse/connections ")));
    if !mounted {
        let st = Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(&d)
            .status()
            .ok()?;
        if !st.success() {
            return None;
        }
    }
    Some(d)
}

#[test]
fn a_dead_server_leaves_every_outside_path_failing_and_the_worktree_working() {
    let Some(ctl) = fusectl() else {
        assert!(!require_sandbox(), "fusectl cannot be mounted");
        eprintln!("SKIP: fusectl needs root");
        return;
    };
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-dead") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        beside(&fx, "O3", &[("more.txt", "more\n")]);
        script(
            &fx,
            "t.py",
            r#"
import os, time
def read(p):
    try:
        return open(p).read().strip()
    except OSError as e:
        return "ERR%d" % e.errno
print("before=" + read("../O/secret.txt"), flush=True)
open("conn", "w").write(str(os.minor(os.stat("../O").st_dev)))
while not os.path.exists("go"):
    time.sleep(0.05)
print("after=" + read("../O/secret.txt"), flush=True)
print("other=" + read("../O3/more.txt"), flush=True)
try:
    os.stat("../O/secret.txt"); print("stat=ok", flush=True)
except OSError as e:
    print("stat=ERR%d" % e.errno, flush=True)
open("inside.txt", "w").write("still works\n")
print("inside=" + read("inside.txt"), flush=True)
"#,
        );
        let s = fx.start(
            &["--autonomy", "high", "--ask-outside-files"],
            "/usr/bin/python3 t.py",
        );
        answer(&fx, "secret.txt", "approve");
        let conn = fx.wt.join("conn");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(&conn)
            .unwrap_or_default()
            .is_empty()
        {
            assert!(Instant::now() < deadline, "{who:?}: no connection id");
            std::thread::sleep(Duration::from_millis(50));
        }
        let id = std::fs::read_to_string(&conn).unwrap();
        // What the kernel does when the server's last device fd closes (its death):
        // `fuse_abort_conn`.
        std::fs::write(ctl.join(id.trim()).join("abort"), "1").unwrap();
        std::fs::write(fx.wt.join("go"), "").unwrap();
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("before=topsecret"), "{who:?}: control: {out}");
        for (what, line) in [
            ("approved file", "after="),
            ("other file", "other="),
            ("stat", "stat="),
        ] {
            let v = out.lines().find_map(|l| l.strip_prefix(line)).unwrap_or("");
            assert!(
                v.starts_with("ERR"),
                "{who:?}: {what} after the server died: {out} / {err}"
            );
        }
        assert!(out.contains("inside=still works"), "{who:?}: {out} / {err}");
        assert!(
            !fx.log_lines()
                .iter()
                .any(|l| l.to_string().contains("more.txt") && l["answer"].is_string()),
            "{who:?}: nothing asked after the server died"
        );
    }
}

/// Starts `tyba run --here EXTRA -- bash -c SCRIPT` as `fx`'s user (not root) in a mount
/// namespace of its own where `/dev/fuse` is a node of the same device owned by root with mode
/// `0600` (as on a machine without udev), so that the user's open of it really fails with
/// `EACCES`: the device itself, and what every other test sees, stay as they are.
fn start_without_fuse(fx: &Fx, extra: &[&str], script: &str) -> Session {
    let Who::User { uid, gid, .. } = &fx.who else {
        panic!("root opens a 0600 root device")
    };
    let d = fx.scratch.dir.join("nofuse");
    std::fs::create_dir_all(&d).unwrap();
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"]);
    c.arg(
        r#"set -e
d="$1"; shift
mount -t tmpfs -o mode=0755 tyba-test-nofuse "$d"
mknod -m 0600 "$d/fuse" c $((0x$(stat -c %t /dev/fuse))) $((0x$(stat -c %T /dev/fuse)))
mount --bind "$d/fuse" /dev/fuse
exec "$@""#,
    );
    c.arg("sh").arg(&d);
    c.arg("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(&fx.tyba);
    c.arg("run").arg("--here").args(extra);
    c.args(["--", "bash", "-c", script]);
    c.current_dir(&fx.wt)
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    Session { child }
}

#[test]
fn without_dev_fuse_the_session_starts_says_why_once_and_outside_opens_fail_unasked() {
    if my_uid() != 0 {
        assert!(!require_sandbox(), "needs root to make a private /dev/fuse");
        eprintln!("SKIP: a private /dev/fuse needs root");
        return;
    }
    let Some(who) = whos().into_iter().find(|w| *w != Who::Me) else {
        assert!(!require_sandbox(), "no unprivileged user");
        return;
    };
    let Some(fx) = fixture(&who, "outside-nofuse") else {
        return;
    };
    beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
    script(&fx, "t.py", READ_TWICE);
    script(&fx, "other.py", OTHER);
    // The default mode: the session starts without covers and says so once.
    let s = start_without_fuse(&fx, &["--autonomy", "high"], RUN_BOTH);
    let (code, out, err) = s.finish();
    assert_eq!(code, 0, "{who:?}: {out} / {err}");
    assert!(
        out.contains("first=ERR13") && out.contains("other=ERR13"),
        "{who:?}: EACCES, unasked: {out} / {err}"
    );
    assert_eq!(
        err.matches("outside files are not asked in this session")
            .count(),
        1,
        "{who:?}: said once: {err}"
    );
    assert!(
        err.contains("/dev/fuse cannot be opened (Permission denied)")
            && err.contains("sudo chmod 0666 /dev/fuse"),
        "{who:?}: why, and how to get the asks: {err}"
    );
    let lines = fx.log_lines();
    assert!(
        lines.iter().any(|l| l["kind"] == "sandbox"
            && l["decision"] == "note"
            && l["reason"]
                .as_str()
                .is_some_and(|r| r.contains("/dev/fuse"))),
        "{who:?}: in the audit log: {lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l["answer"].is_string()),
        "{who:?}: nothing asked: {lines:?}"
    );
    // Requiring the covers: the start fails (exit 4), naming the device.
    let s = start_without_fuse(&fx, &["--outside-files", "require"], "true");
    let (code, out, err) = s.finish();
    assert_eq!(code, 4, "{who:?}: {out} / {err}");
    assert!(err.contains("/dev/fuse"), "{who:?}: {err}");
    // The control: the same user, the same script, with the machine's /dev/fuse (which
    // `fixture` checked it can open):
    // asked (denied at once: non-interactive), the refusal on the process's stderr.
    let s = fx.start(&["--autonomy", "high", "--non-interactive"], RUN_BOTH);
    let (code, out, err) = s.finish();
    assert_eq!(code, 0, "{who:?}: {out} / {err}");
    assert!(
        !err.contains("outside files are not asked")
            && err.contains("refused by tyba: read")
            && err.contains("secret.txt"),
        "{who:?}: control: {err}"
    );
}

/// The steps of [`renames_links_and_symbolic_links_are_asked_and_made_by_the_server`], in
/// order; each prints `name=ok` or `name=ERR<errno>`.
const CHANGES: &str = r#"
def read(p):
    with open(p) as f:
        return f.read()
step("rename", lambda: os.rename("../O/a.txt", "../O/b.txt"))
step("rename-denied", lambda: os.rename("../O/keep.txt", "../O/gone.txt"))
step("replace-denied", lambda: os.rename("../O/b.txt", "../O/keep.txt"))
step("rename-cred", lambda: os.rename("../O/.env", "../O/env.bak"))
step("across-covers", lambda: os.rename("../O/x.txt", "../O2/x.txt"))
step("link", lambda: os.link("../O/b.txt", "../O/hard.txt"))
step("link-denied", lambda: os.link("../O/keep.txt", "../O/hard2.txt"))
step("symlink", lambda: os.symlink("../O2/other.txt", "../O/sym"))
step("through-symlink", lambda: read("../O/sym"))
step("symlink-denied", lambda: os.symlink("/etc/passwd", "../O/sym2"))
step("fifo", lambda: os.mkfifo("../O/fifo"))
"#;

/// Makes `O` (`a.txt`, `keep.txt`, `.env`, `x.txt`) and `O2` (`other.txt`) beside the worktree afresh.
fn change_fixture(fx: &Fx) -> (PathBuf, PathBuf) {
    let side = fx.wt.parent().unwrap();
    let _ = std::fs::remove_dir_all(side.join("O"));
    let _ = std::fs::remove_dir_all(side.join("O2"));
    let o = beside(
        fx,
        "O",
        &[
            ("a.txt", "a\n"),
            ("keep.txt", "keep\n"),
            (".env", "TOKEN=1\n"),
            ("x.txt", "x\n"),
        ],
    );
    let o2 = beside(fx, "O2", &[("other.txt", "othersecret\n")]);
    (o, o2)
}

#[test]
fn renames_links_and_symbolic_links_are_asked_and_made_by_the_server() {
    use std::os::unix::fs::MetadataExt;
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-rename") else {
            continue;
        };
        let (o, o2) = change_fixture(&fx);
        script(&fx, "t.py", &stepped(CHANGES));
        let s = fx.start(&["--autonomy", "high"], "/usr/bin/python3 t.py");
        let p = fx.pending(1);
        let action = p[0]["action"].as_str().unwrap().to_string();
        assert!(
            action.contains(&format!(
                "rename {} to {}",
                o.join("a.txt").display(),
                o.join("b.txt").display()
            )) && action.contains("this command (python3"),
            "{who:?}: both names and who the approval covers: {action}"
        );
        answer(&fx, "rename ", "approve");
        answer(&fx, "keep.txt to", "deny");
        let replace = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            replace.contains("replacing the existing one"),
            "{who:?}: {replace}"
        );
        answer(&fx, "b.txt to", "deny");
        // A credential among the names: the worse colour, the sensitive confirmation.
        let cred = answer(&fx, ".env to", "deny");
        assert!(
            cred.contains("credential path (.env)") && cred.contains("sensitive"),
            "{who:?}: {cred}"
        );
        answer(&fx, "link ", "approve");
        answer(&fx, "link ", "deny");
        let sym = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            sym.contains(&format!(
                "symlink {} -> ../O2/other.txt",
                o.join("sym").display()
            )),
            "{who:?}: the link's text shown: {sym}"
        );
        answer(&fx, "symlink ", "approve");
        // Through the approved link: asked where it leads.
        answer(
            &fx,
            &format!("read {}", o2.join("other.txt").display()),
            "deny",
        );
        answer(&fx, "/etc/passwd", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in [
            "rename=ok",
            "rename-denied=ERR13",
            "replace-denied=ERR13",
            "rename-cred=ERR13",
            // Two covers are two mounts: the kernel's own EXDEV, nothing asked.
            "across-covers=ERR18",
            "link=ok",
            "link-denied=ERR13",
            "symlink=ok",
            "through-symlink=ERR13",
            "symlink-denied=ERR13",
            // Device nodes (a fifo too) stay refused unasked.
            "fifo=ERR13",
        ] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(
            err.contains("refused by tyba") && err.contains("keep.txt"),
            "{who:?}: the refusal on the process's stderr: {err}"
        );
        // Checked from outside: what was approved was done, the rest is as it was.
        assert!(!o.join("a.txt").exists() && o.join("b.txt").exists());
        assert_eq!(
            std::fs::read_to_string(o.join("keep.txt")).unwrap(),
            "keep\n"
        );
        assert!(!o.join("gone.txt").exists() && o.join(".env").exists());
        assert_eq!(
            std::fs::metadata(o.join("hard.txt")).unwrap().ino(),
            std::fs::metadata(o.join("b.txt")).unwrap().ino(),
            "{who:?}: a hard link"
        );
        assert!(!o.join("hard2.txt").exists() && !o.join("sym2").exists());
        assert!(!o.join("fifo").exists());
        assert_eq!(
            std::fs::read_link(o.join("sym")).unwrap(),
            Path::new("../O2/other.txt")
        );
        let lines = fx.log_lines();
        let answers: Vec<&str> = lines.iter().filter_map(|l| l["answer"].as_str()).collect();
        assert_eq!(
            answers,
            ["once", "deny", "deny", "deny", "once", "deny", "once", "deny", "deny"],
            "{who:?}: {lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.to_string().contains("fifo")),
            "{who:?}: the refused fifo is logged: {lines:?}"
        );
        // The control: the same script without the sandbox makes every change.
        change_fixture(&fx);
        let bare = without_sandbox(&fx, "t.py");
        for line in [
            "rename-denied=ok",
            "rename-cred=ok",
            "across-covers=ok",
            "link-denied=ok",
            "symlink-denied=ok",
            "fifo=ok",
        ] {
            assert!(bare.contains(line), "{who:?}: control: {line}: {bare}");
        }
    }
}

/// Starts `tyba run --here EXTRA -- /usr/bin/python3 agent.py`: the agent program is Python
/// itself (its own runtime, not a command of it).
fn start_python_agent(fx: &Fx, extra: &[&str]) -> Session {
    fx.start_argv(extra, &[], &["/usr/bin/python3", "agent.py"])
}

#[test]
fn an_approval_to_the_agent_covers_the_agent_and_not_the_commands_it_starts() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-agent") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(&fx, "other.py", OTHER);
        // The agent reads twice, then starts a command (`other.py child`) reading the same.
        script(&fx, "agent.py", READ_TWICE);
        let s = start_python_agent(&fx, &["--autonomy", "high"]);
        let first = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            first.contains("the agent itself (python3, pid")
                && first.contains("not the commands it starts"),
            "{who:?}: the ask names the agent and the reach: {first}"
        );
        answer(&fx, "read ", "approve");
        let second = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            second.contains("this command (python3, pid"),
            "{who:?}: the command's own ask: {second}"
        );
        answer(&fx, "read ", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("first=topsecret") && out.contains("again=topsecret"),
            "{who:?}: the approval holds for the agent: {out} / {err}"
        );
        // The control of the reach: the same child under an approved command reads it
        // (`an_outside_open_is_asked_and_the_approval_holds_for_that_process_only`).
        assert!(
            out.contains("child=ERR13"),
            "{who:?}: not for the command it started: {out} / {err}"
        );
    }
}

/// Runs `tyba run --here --autonomy high -- bash -c SCRIPT`, approving the first ask and
/// denying every later one until the session ends: (asks' actions, stdout).
fn approve_first_only(fx: &Fx, script: &str) -> (Vec<String>, String) {
    let mut s = fx.start(&["--autonomy", "high"], script);
    let mut asks: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while s.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        for p in fx.pending(0) {
            let id = p["id"].as_str().unwrap().to_string();
            let verb = if asks.is_empty() { "approve" } else { "deny" };
            let (code, _, err) = fx.cli(&[verb, &id]);
            assert_eq!(code, 0, "{:?}: {verb} {id}: {err}", fx.who);
            asks.push(p["action"].as_str().unwrap_or("").to_string());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out, err) = s.finish();
    (asks, format!("{out}\n--- stderr\n{err}"))
}

/// The agent (bash) reads an outside file twice, then `exec`s a command in its place (or,
/// when `fork`, starts it) that reads the same file.
fn agent_then_command(fork: bool) -> String {
    format!(
        "read -r x < ../O/secret.txt; echo \"first=$x\"; \
         read -r y < ../O/secret.txt; echo \"again=$y\"; \
         {} python3 -c 'import sys
try:
    print(\"py=\" + open(\"../O/secret.txt\").read().strip(), flush=True)
except OSError as e:
    print(\"py=ERR%d\" % e.errno, flush=True)'",
        if fork { "" } else { "exec" }
    )
}

#[test]
fn an_approval_to_the_agent_ends_when_it_execs_a_command_in_its_place() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-agent-exec") else {
            continue;
        };
        beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        for fork in [false, true] {
            let (asks, out) = approve_first_only(&fx, &agent_then_command(fork));
            let mut ck = Checks::default();
            ck.check(
                asks.first()
                    .is_some_and(|a| a.contains("for the agent itself (bash, pid")),
                "the first ask names the agent",
            );
            ck.check(
                out.contains("first=topsecret") && out.contains("again=topsecret"),
                "the agent's own reads stay approved (asked once)",
            );
            ck.check(
                asks.len() == 2 && asks[1].contains("this command (python3, pid"),
                "the command's read is asked on its own",
            );
            ck.check(out.contains("py=ERR13"), "the command's read is refused");
            ck.finish(&format!(
                "{who:?} fork={fork}\n--- asks\n{asks:#?}\n--- out\n{out}"
            ));
        }
    }
}

/// The script of [`a_server_that_hangs_fails_closed_within_its_bound`]: an asked read, then a
/// `stat` the server hangs on, then another outside read and the worktree.
const HANGS: &str = r#"
import os, time
def read(p):
    try:
        with open(p) as f:
            return f.read().strip()
    except OSError as e:
        return "ERR%d" % e.errno
print("asked=" + read("../O/secret.txt"), flush=True)
t = time.monotonic()
try:
    os.stat("../O/hang.txt"); r = "ok"
except OSError as e:
    r = "ERR%d" % e.errno
print("hang=%s after=%.1f" % (r, time.monotonic() - t), flush=True)
print("other=" + read("../O/secret.txt"), flush=True)
open("inside.txt", "w").write("still works\n")
print("inside=" + read("inside.txt"), flush=True)
"#;

#[test]
fn a_server_that_hangs_fails_closed_within_its_bound() {
    // The bound, shortened for the test (`fault-points`, test builds only).
    const BOUND_MS: u64 = 2000;
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-hang") else {
            continue;
        };
        beside(
            &fx,
            "O",
            &[("secret.txt", "topsecret\n"), ("hang.txt", "h\n")],
        );
        script(&fx, "t.py", HANGS);
        let bound = BOUND_MS.to_string();
        let env = [
            ("TYBA_FAULT_OUTSIDE_HANG", "hang.txt"),
            ("TYBA_FAULT_OUTSIDE_BOUND_MS", bound.as_str()),
        ];
        let s = fx.start_argv(&["--autonomy", "high"], &env, &["/usr/bin/python3", "t.py"]);
        // A request waiting for the person has no bound: answered after it, it still reads.
        fx.pending(1);
        std::thread::sleep(Duration::from_millis(BOUND_MS * 2));
        answer(&fx, "secret.txt", "approve");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("asked=topsecret"),
            "{who:?}: the ask outlived the bound: {out} / {err}"
        );
        // The hung lookup failed (ENOTCONN), after the bound and well before forever.
        let after: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("hang=ERR107 after="))
            .unwrap_or_else(|| panic!("{who:?}: {out} / {err}"))
            .parse()
            .unwrap();
        assert!(
            after >= BOUND_MS as f64 / 1000.0 - 0.1 && after < 30.0,
            "{who:?}: failed after {after} s"
        );
        // The connection is cut: every outside path fails, the worktree works.
        assert!(
            out.lines()
                .any(|l| l.starts_with("other=ERR") && l != "other=topsecret"),
            "{who:?}: {out} / {err}"
        );
        assert!(out.contains("inside=still works"), "{who:?}: {out} / {err}");
        assert_eq!(
            err.matches("tyba's file server did not answer").count(),
            1,
            "{who:?}: the person is told once: {err}"
        );
        assert!(
            fx.log_lines()
                .iter()
                .any(|l| l["kind"] == "sandbox" && l["action"] == "outside files cut off"),
            "{who:?}: in the audit log"
        );
        // The control: without the fault the same stat answers.
        let s = fx.start_argv(
            &["--autonomy", "high", "--non-interactive"],
            &[],
            &["/usr/bin/python3", "t.py"],
        );
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("hang=ok"), "{who:?}: control: {out} / {err}");
    }
}

#[test]
fn tybas_own_configuration_and_state_are_refused_unasked() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-own") else {
            continue;
        };
        let config = fx.home.join(".config");
        std::fs::create_dir_all(config.join("tyba")).unwrap();
        std::fs::write(config.join("tyba/policy.toml"), "").unwrap();
        give(&config, &who);
        script(
            &fx,
            "t.py",
            &stepped(&format!(
                r#"
step("policy", lambda: open("{c}/tyba/policy.toml", "w").write("[[rule]]\n"))
step("approvals", lambda: os.mkdir("{c}/tyba/trusted-policies"))
step("logs", lambda: os.listdir("{s}/tyba/log"))
step("other", lambda: open("{c}/other.toml", "w").write("x\n"))
"#,
                c = config.display(),
                s = fx.home.join(".local/state").display()
            )),
        );
        let s = fx.start(&["--autonomy", "high"], "/usr/bin/python3 t.py");
        // Only the control (another file in the same directory) is asked.
        answer(&fx, "other.toml", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in [
            "policy=ERR13",
            "approvals=ERR13",
            "logs=ERR13",
            "other=ERR13",
        ] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(
            err.contains("tyba's own configuration, state and sockets are not reachable"),
            "{who:?}: {err}"
        );
        let lines = fx.log_lines();
        let answers: Vec<&str> = lines.iter().filter_map(|l| l["answer"].as_str()).collect();
        assert_eq!(answers, ["deny"], "{who:?}: {lines:?}");
        assert_eq!(
            std::fs::read_to_string(config.join("tyba/policy.toml")).unwrap(),
            "",
            "{who:?}: the policy is unchanged"
        );
        // The control: without the sandbox the same script writes tyba's policy.
        let bare = without_sandbox(&fx, "t.py");
        assert!(
            bare.contains("policy=ok") && bare.contains("logs=ok"),
            "{who:?}: control: {bare}"
        );
    }
}

/// The agent program of [`agent_program_fixture`] (an npm package, so an installation of its
/// own: the person's program, not the model's interpreter): its own runtime reads a file
/// beside the worktree, makes a directory in the home and creates a file beside the worktree,
/// then starts a command (`python3 cmd.py`) that does the first two again.
const FAKE_AGENT_JS: &str = r#"#!/usr/bin/env node
const fs = require('fs'), cp = require('child_process');
function step(name, f) {
  try { f(); console.log(name + '=ok'); } catch (e) { console.log(name + '=' + (e.code || e.message)); }
}
step('agent-read', () => fs.readFileSync('../O/secret.txt'));
step('agent-mkdir', () => fs.mkdirSync(process.env.HOME + '/docs/by-agent'));
step('agent-create', () => fs.writeFileSync('../O/by-agent.txt', 'x'));
const r = cp.spawnSync('/usr/bin/python3', ['cmd.py'], { encoding: 'utf8' });
process.stdout.write(r.stdout || '');
process.stderr.write(r.stderr || '');
"#;

/// The command the fake agent starts: the same read and the same kind of directory.
const AGENT_CMD_PY: &str = r#"
step("command-read", lambda: open("../O/secret.txt").read())
step("command-mkdir", lambda: os.mkdir(os.environ["HOME"] + "/docs/by-command"))
"#;

/// A fixture with the fake agent installed under `~/.npm-global` (npm's layout: the package,
/// and `bin/fake-agent` linking to its script), the policy file that opens that prefix, and
/// the `PATH` that finds it; `../O/secret.txt` beside the worktree, `~/docs` in the home.
fn agent_program_fixture(who: &Who, tag: &str) -> Option<(Fx, String, String)> {
    let fx = fixture(who, tag)?;
    let bin = install_npm_agent(&fx.home.join(".npm-global"), FAKE_AGENT_JS);
    std::fs::create_dir_all(fx.home.join("docs")).unwrap();
    give(&fx.home, who);
    beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
    script(&fx, "cmd.py", &stepped(AGENT_CMD_PY));
    let policy = fx.scratch.dir.join("f/agent-policy.toml");
    std::fs::write(&policy, "[filesystem]\nread_only = [\"~/.npm-global\"]\n").unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    Some((fx, policy.display().to_string(), path))
}

#[test]
fn the_agent_programs_own_outside_access_is_refused_quietly_and_its_commands_are_asked() {
    for who in whos() {
        let Some((fx, policy, path)) = agent_program_fixture(&who, "outside-program") else {
            continue;
        };
        let s = fx.start_argv(
            &["--autonomy", "high", "--policy", &policy],
            &[("PATH", &path)],
            &["fake-agent"],
        );
        // Only the command the agent started is asked: its read, then its directory.
        let first = fx.pending(1)[0]["action"].as_str().unwrap().to_string();
        assert!(
            first.contains("secret.txt") && first.contains("this command (python3, pid"),
            "{who:?}: the first ask is the command's read: {first}"
        );
        answer(&fx, "secret.txt", "deny");
        answer(&fx, "by-command", "deny");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        let lines = [
            "agent-read=EACCES",
            "agent-mkdir=EACCES",
            "agent-create=EACCES",
            "command-read=ERR13",
            "command-mkdir=ERR13",
        ];
        assert_has_all(&who, &format!("stderr {err}"), &out, &lines);
        assert!(!fx.home.join("docs/by-agent").exists(), "{who:?}");
        assert!(!fx.wt.parent().unwrap().join("O/by-agent.txt").exists());
        let lines = fx.log_lines();
        let answers: Vec<&str> = lines.iter().filter_map(|l| l["answer"].as_str()).collect();
        assert_eq!(answers, ["deny", "deny"], "{who:?}: {lines:?}");
        // The agent's own three are logged as quiet refusals, with the reason.
        let quiet = |needle: &str| {
            lines.iter().any(|l| {
                l["kind"] == "file"
                    && l["decision"] == "quiet-refuse"
                    && l["action"].as_str().is_some_and(|a| a.contains(needle))
                    && l["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("the agent program's own file access"))
            })
        };
        for needle in ["read ", "by-agent.txt", "docs/by-agent"] {
            assert!(
                quiet(needle),
                "{who:?}: {needle} refused quietly: {lines:?}"
            );
        }
        assert!(
            !quiet("by-command"),
            "{who:?}: the command's operation is no quiet refusal"
        );
        // Counted in the end summary, and none of them on the agent's stderr.
        let n: usize = err
            .lines()
            .find_map(|l| l.strip_prefix("tyba: refused quietly (not asked): "))
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{who:?}: no summary: {err}"));
        assert!(n >= 3, "{who:?}: {n}: {err}");
        assert!(
            !err.contains("the agent program's own file access"),
            "{who:?}: {err}"
        );
        // The control: without the sandbox the same agent and command do it all.
        let mut c = command_as(&who, Path::new("/usr/bin/env"));
        c.arg("fake-agent").current_dir(&fx.wt).env_clear();
        for (k, v) in fx.env() {
            c.env(k, v);
        }
        c.env("PATH", &path);
        let bare = String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned();
        let lines = [
            "agent-read=ok",
            "agent-mkdir=ok",
            "agent-create=ok",
            "command-read=ok",
            "command-mkdir=ok",
        ];
        assert_has_all(&who, "control", &bare, &lines);
    }
}

/// Reads and writes the history files of shells, REPLs and pagers (and, as the control, another
/// dotfile) from a command of the session: existing ones in the home (each a cover of its
/// own), a new one and a rename in covered directories (a name made directly in the home is
/// no cover: Landlock refuses it, unlogged).
const HISTORY_PY: &str = r#"
import os
h = os.environ["HOME"]
def step(name, f):
    try:
        r = f(); print(name + "=" + (r if isinstance(r, str) else "ok"), flush=True)
    except OSError as e:
        print(name + "=ERR%d" % e.errno, flush=True)
step("read-history", lambda: open(h + "/.bash_history").read().strip())
step("write-history", lambda: open(h + "/.bash_history", "a").write("echo planted\n"))
step("truncate-history", lambda: open(h + "/.python_history", "w").write("x\n"))
step("create-history", lambda: open(h + "/.local/share/nano/search_history", "w").write("x\n"))
step("lesshst", lambda: os.rename(h + "/.local/state/lesshsQ", h + "/.local/state/lesshst"))
step("other", lambda: open(h + "/.toolrc").read().strip())
"#;

#[test]
fn history_files_are_refused_quietly_to_every_process_reading_too() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-history") else {
            continue;
        };
        let history = "export TOKEN=hunter2\n";
        std::fs::write(fx.home.join(".bash_history"), history).unwrap();
        std::fs::write(fx.home.join(".python_history"), "1 + 1\n").unwrap();
        std::fs::create_dir_all(fx.home.join(".local/share/nano")).unwrap();
        std::fs::create_dir_all(fx.home.join(".local/state")).unwrap();
        std::fs::write(fx.home.join(".local/state/lesshsQ"), "less\n").unwrap();
        std::fs::write(fx.home.join(".toolrc"), "tool settings\n").unwrap();
        give(&fx.home, &who);
        script(&fx, "h.py", HISTORY_PY);
        // The agent is bash (the model's interpreter): its builtin read of the history, then
        // a command's reads and writes of it, then a line the person approves that names it.
        let s = fx.start(
            &["--autonomy", "high"],
            "read -r l < ~/.bash_history; echo builtin=$?; /usr/bin/python3 h.py; cat ~/.bash_history; echo cat=$?",
        );
        // Asked: the other dotfile (denied), and the line naming the history (approved: its
        // grant still does not reach a history file).
        answer(&fx, ".toolrc", "deny");
        answer(&fx, "run `cat ", "approve");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        let lines = [
            "builtin=1",
            "read-history=ERR13",
            "write-history=ERR13",
            "truncate-history=ERR13",
            "create-history=ERR13",
            "lesshst=ERR13",
            "other=ERR13",
            "cat=1",
        ];
        assert_has_all(&who, &format!("stderr {err}"), &out, &lines);
        assert!(
            !out.contains("hunter2"),
            "{who:?}: the history leaked: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(fx.home.join(".bash_history")).unwrap(),
            history,
            "{who:?}: the history is unchanged"
        );
        assert_eq!(
            std::fs::read_to_string(fx.home.join(".python_history")).unwrap(),
            "1 + 1\n"
        );
        assert!(!fx.home.join(".local/share/nano/search_history").exists());
        let state = fx.home.join(".local/state");
        assert!(state.join("lesshsQ").exists() && !state.join("lesshst").exists());
        let lines = fx.log_lines();
        let asked: Vec<&str> = lines
            .iter()
            .filter(|l| l["answer"].is_string())
            .filter_map(|l| l["action"].as_str())
            .collect();
        assert_eq!(asked.len(), 2, "{who:?}: {asked:?}");
        let names_history = |a: &str| {
            [
                ".bash_history",
                ".python_history",
                "search_history",
                "lesshs",
            ]
            .iter()
            .any(|h| a.contains(h))
        };
        assert!(
            !asked
                .iter()
                .any(|a| !a.starts_with("run `") && names_history(a)),
            "{who:?}: no history file asked: {asked:?}"
        );
        let quiet = |needle: &str| {
            lines.iter().any(|l| {
                l["kind"] == "file"
                    && l["decision"] == "quiet-refuse"
                    && l["action"].as_str().is_some_and(|a| a.contains(needle))
                    && l["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("history file"))
            })
        };
        for needle in [
            "read ",
            "write ",
            "create ",
            ".python_history",
            "search_history",
            "rename ",
        ] {
            assert!(quiet(needle), "{who:?}: {needle}: {lines:?}");
        }
        assert!(
            err.contains("tyba: refused quietly (not asked): "),
            "{who:?}: counted in the end summary: {err}"
        );
        // The control: without the sandbox the same script reads and writes them all.
        let bare = without_sandbox(&fx, "h.py");
        let lines = [
            "read-history=export TOKEN=hunter2",
            "write-history=ok",
            "truncate-history=ok",
            "create-history=ok",
            "lesshst=ok",
            "other=tool settings",
        ];
        assert_has_all(&who, "control", &bare, &lines);
    }
}

/// Answers every ask of the running session `s` until it ends: approved when its action
/// contains `approve`, denied otherwise. Returns each ask's action with its reasons, and the
/// session's end (status, stdout, stderr).
fn drive(fx: &Fx, s: Session, approve: &str) -> (Vec<String>, (i32, String, String)) {
    drive_with(fx, s, |action| action.contains(approve))
}

/// [`drive`], approving the asks whose action `approve` accepts.
fn drive_with(
    fx: &Fx,
    mut s: Session,
    approve: impl Fn(&str) -> bool,
) -> (Vec<String>, (i32, String, String)) {
    let mut asked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while s.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        let v: serde_json::Value = if code == 0 {
            serde_json::from_str(&out).unwrap_or_default()
        } else {
            serde_json::Value::Null
        };
        let pending: Vec<serde_json::Value> = v
            .as_array()
            .map(|a| {
                a.iter()
                    .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        for p in pending {
            let action = p["action"].as_str().unwrap_or("").to_string();
            let id = p["id"].as_str().unwrap_or("").to_string();
            let verb = if approve(&action) { "approve" } else { "deny" };
            let _ = fx.cli(&[verb, &id]);
            asked.push(format!("{action} / {}", p["reasons"]));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (asked, s.finish())
}

/// An approved line that changes the mode or the times of a file outside the worktree
/// (`chmod`, `touch -d`), or extracts an archive there (`tar -x`, which sets the mode and time
/// of each file it makes), is asked once: the metadata calls its command then makes are the
/// line's, not a second ask each (the metadata handler asked them again). The approval is that
/// line's: another line's `chmod` of another file is asked, and denied it changes nothing
/// (the control that the check from outside can fail).
#[test]
fn an_approved_metadata_change_outside_is_asked_once() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-meta") else {
            continue;
        };
        let files = [
            ("ok-mode.txt", "m\n"),
            ("ok-times.txt", "t\n"),
            ("no-mode.txt", "n\n"),
        ];
        let o = beside(&fx, "O", &files);
        for (n, _) in files {
            std::fs::set_permissions(o.join(n), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::create_dir(o.join("ok-dst")).unwrap();
        give(&o, &fx.who);
        // An archive in the worktree: a directory and a program (mode 0755, an old time).
        let pkg = fx.wt.join("pkg/bin");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("tool"), "x\n").unwrap();
        std::fs::set_permissions(pkg.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tarred = Command::new("tar")
            .args(["--mtime=2001-02-03", "-cf", "t.tar", "pkg"])
            .current_dir(&fx.wt)
            .status()
            .unwrap();
        assert!(tarred.success());
        std::fs::remove_dir_all(fx.wt.join("pkg")).unwrap();
        give(&fx.wt.join("t.tar"), &fx.who);
        // A directory the next line changes the mode of (not recursively), and a file in it
        // that the line's own code then tries to change (review 12's r12-04).
        std::fs::create_dir(o.join("ok-d")).unwrap();
        std::fs::write(o.join("ok-d/f"), "f\n").unwrap();
        std::fs::set_permissions(o.join("ok-d/f"), std::fs::Permissions::from_mode(0o644)).unwrap();
        give(&o, &fx.who);
        script(
            &fx,
            "t.py",
            r#"
import os
try:
    os.chmod("../O/ok-d/f", 0o666); print("beneath=ok", flush=True)
except OSError as e:
    print("beneath=ERR%d" % e.errno, flush=True)
"#,
        );
        // tyba's own configuration: never changed, whatever was approved (r12-03).
        let own = fx.home.join(".config/tyba/ok-own.toml");
        std::fs::create_dir_all(own.parent().unwrap()).unwrap();
        std::fs::write(&own, "# mine\n").unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
        give(&fx.home.join(".config"), &fx.who);
        std::fs::create_dir_all(fx.home.join(".local/state")).unwrap();
        give(&fx.home.join(".local"), &fx.who);
        let local_was = std::fs::metadata(fx.home.join(".local")).unwrap().mode() & 0o777;
        let s = fx.start(
            &["--ask-outside-files"],
            r#"chmod 600 ../O/ok-mode.txt; echo chmod=$?
touch -m -d 2001-02-03 ../O/ok-times.txt; echo touch=$?
tar -xf t.tar -C ../O/ok-dst; echo untar=$?
sh -c 'chmod 700 ../O/ok-d && /usr/bin/python3 t.py'; echo tidy=$?
chmod 600 "$HOME/.config/tyba/ok-own.toml"; echo own=$?
chmod 0 "$HOME/.local"; echo above=$?
chmod 600 ../O/no-mode.txt; echo other=$?"#,
        );
        // Only the lines are approved: any other ask (a second one for a line's own call,
        // the change beneath the directory) is denied and counted.
        let (asked, (code, out, err)) = drive_with(&fx, s, |a| {
            a.starts_with("run `") && (a.contains("ok-") || a.contains("/.local`"))
        });
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in ["chmod=0", "touch=0", "untar=0"] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(!out.contains("other=0"), "{who:?}: {out} / {err}");
        // What the approved `tar -x` made has the archive's mode and time (set by tar on
        // the files it made itself, not asked again).
        let tool = std::fs::metadata(o.join("ok-dst/pkg/bin/tool")).unwrap();
        assert_eq!(tool.mode() & 0o777, 0o755, "{who:?}: {out} / {err}");
        assert!(tool.mtime() < 1_000_000_000, "{who:?}: {out} / {err}");
        // A directory holding tyba's own state keeps its owner's access (review 13's r13-04).
        assert!(!out.contains("above=0"), "{who:?}: {out} / {err}");
        let local = std::fs::metadata(fx.home.join(".local")).unwrap().mode() & 0o777;
        assert_eq!(local, local_was, "{who:?}: {out} / {err}");
        // tyba's own configuration: refused, unasked, though the line was approved.
        assert!(!out.contains("own=0"), "{who:?}: {out} / {err}");
        let own_mode = std::fs::metadata(&own).unwrap().mode() & 0o777;
        assert_eq!(own_mode, 0o644, "{who:?}: {out} / {err}");
        // Checked from outside: the approved lines changed what they named, the denied one
        // nothing.
        let mode = |n: &str| std::fs::metadata(o.join(n)).unwrap().mode() & 0o777;
        assert_eq!(mode("ok-mode.txt"), 0o600, "{who:?}: {out} / {err}");
        assert_eq!(mode("no-mode.txt"), 0o644, "{who:?}: {out} / {err}");
        // `chmod 700 DIR` changed DIR, and nothing beneath it unasked (asked, denied).
        assert!(out.contains("beneath=ERR"), "{who:?}: {out} / {err}");
        assert_eq!(mode("ok-d"), 0o700, "{who:?}: {out} / {err}");
        assert_eq!(mode("ok-d/f"), 0o644, "{who:?}: {out} / {err}");
        let mtime = std::fs::metadata(o.join("ok-times.txt")).unwrap().mtime();
        assert!(
            mtime < 1_000_000_000,
            "{who:?}: mtime {mtime}: {out} / {err}"
        );
        // One ask per line, and the change beneath `ok-d`.
        assert_eq!(asked.len(), 8, "{who:?}: asked once per line: {asked:#?}");
        assert!(
            asked
                .iter()
                .any(|a| a.starts_with("chmod ") && a.contains("ok-d/f")),
            "{who:?}: {asked:#?}"
        );
    }
}

/// An approved line that edits a file outside the worktree in place (`sed -i`), or removes it
/// to make it anew (`install`, `cp --remove-destination`), is asked once: the program saves
/// the file as programs do (a temporary copy made beside it, its owner and mode set, renamed
/// over it), and each of those steps was asked again. The approval covers that save and what
/// the ask named (the file sed's `w` command writes, in another directory) and no more: a line
/// that runs code the policy does not analyse (sed's `e`, review 12's r12-05) saves nothing
/// through copies unasked (sed's own copy is asked, denied here: the file stays as it was),
/// and nothing else is left in either directory. (A copy left when its command ends is
/// removed: `outside_fs::tests::a_left_copy_is_removed_only_when_it_is_still_that_file`.)
#[test]
fn an_approved_in_place_edit_outside_is_asked_once() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-save") else {
            continue;
        };
        let o = beside(
            &fx,
            "O",
            &[
                ("edit.txt", "a\n"),
                ("away.txt", "a\n"),
                ("code.txt", "a\n"),
                ("inst.txt", "old\n"),
                ("cpd.txt", "old\n"),
                ("found.txt", "a\n"),
            ],
        );
        let p = beside(&fx, "P", &[("keep.txt", "k\n")]);
        let s = fx.start(
            &["--ask-outside-files"],
            r#"sed -i s/a/b/ ../O/edit.txt; echo edit=$?
sed -i 's/a/b/w ../P/new.txt' ../O/away.txt; echo away=$?
sed -i '1e true' ../O/code.txt; echo code=$?
echo hi > in.txt
install -m 640 in.txt ../O/inst.txt; echo install=$?
cp --remove-destination in.txt ../O/cpd.txt; echo cpd=$?
find in.txt -exec sed -i s/a/b/ ../O/found.txt ';'; echo found=$?"#,
        );
        let (asked, (code, out, err)) = drive(&fx, s, "run `");
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        for line in ["edit=0", "away=0", "install=0", "cpd=0"] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        assert!(!out.contains("code=0"), "{who:?}: {out} / {err}");
        // Checked from outside: the edits landed, the code-running line's did not, and
        // nothing but what the asks named is in either directory.
        let read = |d: &Path, n: &str| std::fs::read_to_string(d.join(n)).unwrap();
        assert_eq!(read(&o, "edit.txt"), "b\n", "{who:?}: {out} / {err}");
        assert_eq!(read(&o, "away.txt"), "b\n", "{who:?}: {out} / {err}");
        assert_eq!(read(&p, "new.txt"), "b\n", "{who:?}: {out} / {err}");
        assert_eq!(read(&o, "code.txt"), "a\n", "{who:?}: {out} / {err}");
        // sed started by another program (`find -exec`: the line's spelling does not say
        // which process saves, review 14's r14-01): its copy asked, denied, the file as it was.
        assert_eq!(read(&o, "found.txt"), "a\n", "{who:?}: {out} / {err}");
        // Removed and made anew by the approved line (`install`, `cp --remove-destination`).
        assert_eq!(read(&o, "inst.txt"), "hi\n", "{who:?}: {out} / {err}");
        assert_eq!(read(&o, "cpd.txt"), "hi\n", "{who:?}: {out} / {err}");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(o.join("inst.txt")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o640, "{who:?}: {out} / {err}");
        let names = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            names(&o),
            [
                "away.txt",
                "code.txt",
                "cpd.txt",
                "edit.txt",
                "found.txt",
                "inst.txt"
            ],
            "{who:?}: {out} / {err}"
        );
        assert_eq!(names(&p), ["keep.txt", "new.txt"], "{who:?}: {out} / {err}");
        // One ask per line, and sed's copy for the code-running one.
        assert_eq!(asked.len(), 8, "{who:?}: {asked:#?}");
        assert!(
            asked[7].starts_with("create ") && asked[7].contains("/O/"),
            "{who:?}: {asked:#?}"
        );
        assert!(
            asked[3].starts_with("create ") && asked[3].contains("/O/"),
            "{who:?}: {asked:#?}"
        );
    }
}

/// Run by the approved line of
/// [`approving_a_new_outside_file_covers_that_file_only_with_and_without_the_server`]: writes
/// the approved new file again, an existing sibling and a new sibling.
const SIBLINGS_PY: &str = r#"
def w(p, t):
    name = p.split("/")[-1]
    try:
        with open(p, "w") as f:
            f.write(t)
        print(name + "=ok", flush=True)
    except OSError as e:
        print(name + "=ERR%d" % e.errno, flush=True)
w("../O/new.txt", "again\n")
w("../O/secret.txt", "pwned\n")
w("../O/other-new.txt", "pwned\n")
"#;

/// Issue 16 (hostile review, HIGH): approving a line that creates one file outside the
/// worktree (`echo made > ../O/new.txt`) granted its whole directory read-write, so the
/// command tree could rewrite every sibling. The approval covers that one file: with the
/// outside-files server (which lets the runner's tree make and write that name only) and
/// without it (`--outside-files off`: the file is made beforehand and only it is granted).
#[test]
fn approving_a_new_outside_file_covers_that_file_only_with_and_without_the_server() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served {
                "newfile-fuse"
            } else {
                "newfile-off"
            };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let o = beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
            script(&fx, "siblings.py", SIBLINGS_PY);
            let mut extra = vec!["--autonomy", "high"];
            if !served {
                extra.extend(["--outside-files", "off"]);
            }
            let line =
                "/bin/sh -c 'echo made > ../O/new.txt; /usr/bin/python3 siblings.py'; echo sh=$?";
            let (asked, (code, out, err)) = drive(&fx, fx.start(&extra, line), "siblings.py");
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            for line in ["new.txt=ok", "secret.txt=ERR13", "other-new.txt=ERR13"] {
                assert!(out.contains(line), "{line}: {ctx}");
            }
            // Checked from outside: the approved file holds what the command wrote; the
            // sibling is unchanged and no other file was made.
            assert_eq!(
                std::fs::read_to_string(o.join("new.txt")).unwrap(),
                "again\n",
                "{ctx}"
            );
            assert_eq!(
                std::fs::read_to_string(o.join("secret.txt")).unwrap(),
                "topsecret\n",
                "{ctx}"
            );
            assert!(!o.join("other-new.txt").exists(), "{ctx}");
            assert!(
                asked.first().is_some_and(
                    |a| a.contains("siblings.py") && a.contains("new.txt (that file only")
                ),
                "the ask says what an approval grants: {ctx}"
            );
            // The control: without the sandbox the same script rewrites the sibling.
            let bare = without_sandbox(&fx, "siblings.py");
            assert!(
                bare.contains("secret.txt=ok") && bare.contains("other-new.txt=ok"),
                "control: {bare}"
            );
        }
    }
}

/// Run by [`refusals_are_answered_when_the_agents_stderr_is_a_full_pipe`]: three refusals
/// that tyba tells on the process's stderr, each timed.
const REFUSALS_PY: &str = r#"
import os, socket, subprocess, time
def step(name, f):
    t = time.time()
    try:
        r = f()
        r = "ok" if r is None else str(r)
    except OSError as e:
        r = "ERR%d" % e.errno
    print("%s=%s in %ds" % (name, r, int(time.time() - t)), flush=True)
step("mkfifo", lambda: os.mkfifo("../O/fifo"))
step("connect", lambda: socket.create_connection(("192.0.2.1", 80), timeout=60).close())
step("exec", lambda: subprocess.run(["/bin/cat", "../O/secret.txt"], stdout=subprocess.DEVNULL).returncode)
"#;

/// Issue 16 (hostile review, MEDIUM): tyba told refusals on the process's stderr with a
/// blocking write from the thread that answers the request, so an agent whose stderr was a
/// pipe nobody reads (filled first) hung the file server (a refused `mkfifo`) and the notify
/// loop (a refused connect) for good, and the session could not end. Now each refusal is
/// answered within a bound and the session ends.
#[test]
fn refusals_are_answered_when_the_agents_stderr_is_a_full_pipe() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-fullpipe") else {
            continue;
        };
        let o = beside(&fx, "O", &[("secret.txt", "topsecret\n")]);
        script(&fx, "refusals.py", REFUSALS_PY);
        // stderr: a pipe to a reader that never reads, filled by a writer left blocked.
        let line = r#"exec 2> >(exec /bin/sleep 100000)
( /usr/bin/head -c 1000000 /dev/zero >&2 ) &
/bin/sleep 1
/usr/bin/python3 refusals.py
echo end"#;
        let t = Instant::now();
        let s = fx.start(&["--autonomy", "high", "--non-interactive"], line);
        let (code, out, err) = s.finish();
        let ctx = format!("{who:?}: {out} / {err}");
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "the session ends: {ctx}"
        );
        assert_eq!(code, 0, "{ctx}");
        for step in ["mkfifo=ERR13 in ", "connect=ERR", "end"] {
            assert!(out.contains(step), "{step}: {ctx}");
        }
        // The refusal program's status, or SIGKILL for a spawn whose file name could not be
        // rewritten (its reason told first): refused either way.
        assert!(
            out.contains("exec=126 in ") || out.contains("exec=-9 in "),
            "{ctx}"
        );
        // Each answered promptly (the proxy gives up its own message after a second).
        for l in out.lines().filter(|l| l.contains(" in ")) {
            let secs: u64 = l
                .rsplit(" in ")
                .next()
                .unwrap()
                .trim_end_matches('s')
                .parse()
                .unwrap();
            assert!(secs <= 5, "{l}: {ctx}");
        }
        assert!(!o.join("fifo").exists(), "{ctx}");
        // The refusals are logged all the same.
        let log = fx.log_lines();
        assert!(
            log.iter().any(|l| l.to_string().contains("mknod")),
            "{who:?}: {log:?}"
        );
    }
}

/// Issue 16 (hostile review): tyba's own directories were refused by path only, so renaming
/// one of their ancestors (approved) reached them under another name. Renaming or removing a
/// directory that holds them is refused unasked, even when every ask is approved.
#[test]
fn tybas_own_directories_are_not_reached_through_a_renamed_ancestor() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-own-moved") else {
            continue;
        };
        let local = fx.home.join(".local");
        std::fs::create_dir_all(local.join("state/tyba")).unwrap();
        std::fs::create_dir_all(local.join("other")).unwrap();
        give(&local, &who);
        script(
            &fx,
            "t.py",
            &format!(
                r#"
import os
def step(name, f):
    try:
        r = f(); print(name + "=ok " + str(r), flush=True)
    except OSError as e:
        print(name + "=ERR%d" % e.errno, flush=True)
l = "{l}"
step("move-state", lambda: os.rename(l + "/state", l + "/s2"))
step("list-moved", lambda: os.listdir(l + "/s2/tyba"))
step("move-other", lambda: os.rename(l + "/other", l + "/other2"))
"#,
                l = local.display()
            ),
        );
        let (asked, (code, out, err)) = drive(
            &fx,
            fx.start(&["--autonomy", "high"], "/usr/bin/python3 t.py"),
            "",
        );
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("move-state=ERR13"), "{ctx}");
        assert!(!out.contains("list-moved=ok"), "{ctx}");
        assert!(local.join("state/tyba").is_dir(), "{ctx}");
        assert!(!local.join("s2").exists(), "{ctx}");
        assert!(
            !asked.iter().any(|a| a.contains("/state")),
            "refused unasked: {ctx}"
        );
        // The control: a sibling that holds nothing of tyba's is asked and moved.
        assert!(out.contains("move-other=ok"), "{ctx}");
        assert!(local.join("other2").is_dir(), "{ctx}");
    }
}

/// Issue 16 (hostile review): a credential behind a symbolic link (`~/.ssh` linked to
/// `~/dotfiles/ssh`) was asked without the sensitive confirmation, the credential rule being
/// lexical on the real path the server sees. It is a credential by every name it is reached
/// by.
#[test]
fn a_credential_behind_a_linked_dotfile_directory_asks_as_sensitive() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-cred-link") else {
            continue;
        };
        let dot = fx.home.join("dotfiles");
        std::fs::create_dir_all(dot.join("ssh")).unwrap();
        std::fs::write(dot.join("ssh/work_key"), "KEY\n").unwrap();
        std::fs::write(dot.join("vimrc"), "set nu\n").unwrap();
        std::os::unix::fs::symlink("dotfiles/ssh", fx.home.join(".ssh")).unwrap();
        give(&dot, &who);
        script(
            &fx,
            "t.py",
            r#"
import os
for p in ["~/dotfiles/vimrc", "~/.ssh/work_key", "~/dotfiles/ssh/work_key"]:
    try:
        print(p, open(os.path.expanduser(p)).read().strip(), flush=True)
    except OSError as e:
        print(p, "ERR%d" % e.errno, flush=True)
"#,
        );
        let s = fx.start(&["--autonomy", "high"], "/usr/bin/python3 t.py");
        // The control: an ordinary file beside it names no credential.
        let plain = answer(&fx, "vimrc", "approve");
        assert!(!plain.contains("credential"), "{who:?}: {plain}");
        for _ in 0..2 {
            let key = answer(&fx, "work_key", "deny");
            assert!(
                key.contains("credential path (~/.ssh, reached by another name)")
                    && key.contains("sensitive"),
                "{who:?}: {key}"
            );
        }
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(out.contains("~/dotfiles/vimrc set nu"), "{who:?}: {out}");
        assert!(out.contains("~/.ssh/work_key ERR13"), "{who:?}: {out}");
        assert!(
            out.contains("~/dotfiles/ssh/work_key ERR13"),
            "{who:?}: {out}"
        );
    }
}

/// An approved line that makes a directory outside the worktree is asked once, and its
/// command makes what the line names and no more: `mkdir -p` the missing directories on the
/// way (each was asked again, one ask per level), `mkdir` and `install -d` the one directory.
/// On the way it makes directories only (the line's own code, asked for a file beside one,
/// is denied), and a sibling its code makes is asked (denied: the control that the check from
/// outside can fail). Without the outside-files server (Landlock cannot grant one name) the
/// directories of `mkdir -p` and `install -d` are made before the run and only the new one is
/// granted, the same checks holding; a plain `mkdir` (which fails on a directory that exists)
/// is not granted: it fails and leaves nothing in its place (a file was made there, so
/// `mkdir` failed with "File exists" and an empty file stayed).
#[test]
fn an_approved_mkdir_outside_is_asked_once_and_makes_that_directory_only() {
    use std::os::unix::fs::PermissionsExt;
    for who in whos() {
        for served in [true, false] {
            let tag = if served { "mkdir-fuse" } else { "mkdir-off" };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let o = beside(&fx, "O", &[("keep.txt", "k\n")]);
            script(
                &fx,
                "t.py",
                &stepped(
                    r#"
step("file-on-the-way", lambda: open("../O/ok-x/planted", "w").close())
step("sibling", lambda: os.mkdir("../O/ok-x/z"))
step("beneath", lambda: open("../O/ok-x/y/made", "w").close())
"#,
                ),
            );
            // Code that runs before the line's `mkdir -p`: it makes the way, then plants a
            // symbolic link where the approved directory is to be (review 18's r18-01).
            script(
                &fx,
                "sym.py",
                &stepped(
                    r#"
step("way", lambda: os.mkdir("../O/ok-s"))
step("symlink-at-dir", lambda: os.symlink(os.environ["HOME"] + "/.profile", "../O/ok-s/t"))
step("file-at-dir", lambda: open("../O/ok-s/t", "w").write("x"))
"#,
                ),
            );
            let extra = server_args(served);
            let s = fx.start(
                extra,
                r#"mkdir -p ../O/ok-a/b/c; echo p=$?
mkdir -m 777 ../O/ok-n; echo n=$?
install -d -m 775 ../O/ok-i/j; echo i=$?
sh -c 'mkdir -p ../O/ok-x/y && /usr/bin/python3 t.py'; echo x=$?
sh -c '/usr/bin/python3 sym.py; mkdir -p ../O/ok-s/t'; echo s=$?
mkdir -p "$HOME/ok-h/sub"; echo h=$?
mkdir ../O/no-m; echo m=$?"#,
            );
            // Only the lines naming `ok-` are approved: any other ask (a second one for a
            // line's own call, what the script tries) is denied and counted.
            let (asked, (code, out, err)) =
                drive_with(&fx, s, |a| a.starts_with("run `") && a.contains("ok-"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            assert!(!out.contains("m=0"), "{ctx}");
            assert!(!o.join("no-m").exists(), "{ctx}");
            if !served {
                // A plain `mkdir` is not granted: it fails, and nothing is left in its place;
                // its ask says so.
                assert!(!out.contains("n=0"), "{ctx}");
                assert!(!o.join("ok-n").exists(), "{ctx}");
                assert!(
                    asked
                        .iter()
                        .any(|a| a.starts_with("run `mkdir -m 777")
                            && a.contains("still cannot make")),
                    "{ctx}"
                );
            } else {
                // With the mode the line names, not asked again (review 18's r18-03).
                assert!(out.contains("n=0"), "{ctx}");
                let mode = std::fs::metadata(o.join("ok-n"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o777, "{ctx}");
            }
            // Nothing but a directory at the approved directory's name: the planted link and
            // file are refused (asked, denied; without the server the directory is there
            // before the run), and the line's `mkdir -p` then makes the directory.
            assert!(out.contains("s=0"), "{ctx}");
            for step in ["symlink-at-dir", "file-at-dir"] {
                assert!(out.contains(&format!("{step}=ERR")), "{step}: {ctx}");
            }
            let t = std::fs::symlink_metadata(o.join("ok-s/t")).unwrap();
            assert!(t.is_dir(), "{ctx}");
            // A new directory in the home (here an entry of the worktree's parent, so served
            // when the server is on; made before the run when it is off).
            assert!(out.contains("h=0"), "{ctx}");
            assert!(fx.home.join("ok-h/sub").is_dir(), "{ctx}");
            for line in ["p=0", "i=0", "x=0", "beneath=ok"] {
                assert!(out.contains(line), "{line}: {ctx}");
            }
            for line in ["file-on-the-way=ERR13", "sibling=ERR13"] {
                assert!(out.contains(line), "{line}: {ctx}");
            }
            // Checked from outside: what the approved lines named, and nothing else.
            for d in ["ok-a/b/c", "ok-i/j", "ok-x/y"] {
                assert!(o.join(d).is_dir(), "{d}: {ctx}");
            }
            assert!(o.join("ok-x/y/made").is_file(), "{ctx}");
            assert!(!o.join("ok-x/planted").exists(), "{ctx}");
            assert!(!o.join("ok-x/z").exists(), "{ctx}");
            let mode = std::fs::metadata(o.join("ok-i/j"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o775, "{ctx}");
            // One ask per line, and (served: asked, denied; else unasked `EACCES`) the two
            // tries of the script.
            let tries = if served { 4 } else { 0 };
            assert_eq!(asked.len(), 7 + tries, "{ctx}");
            let bare = without_sandbox(&fx, "t.py");
            assert!(
                bare.contains("file-on-the-way=ok") && bare.contains("sibling=ok"),
                "control: {bare}"
            );
        }
    }
}

/// An approved `git config --file F` of a file outside writes that file and is asked once:
/// git saves it through its lock file (`F.lock` made beside it, written, renamed over it),
/// and each step was asked again; the line named its key and value as paths, not the file.
/// `git config --global` names `~/.gitconfig` (the file it writes) in its ask; its lock file
/// would be a new name directly in the home, a base no cover serves, so it still fails, and
/// leaves nothing (the known limit in docs/sandbox.md). The approval covers the named file:
/// another line writing another file is asked, and denied it writes nothing (the control that
/// the check from outside can fail).
#[test]
fn an_approved_git_config_of_a_file_outside_is_asked_once() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-gitconfig") else {
            continue;
        };
        let o = beside(&fx, "O", &[("ok.cfg", "[a]\n\tb = 1\n")]);
        let gc = fx.home.join(".gitconfig");
        std::fs::write(&gc, "[user]\n\tname = before\n").unwrap();
        give(&gc, &fx.who);
        let s = fx.start(
            &["--ask-outside-files"],
            r#"git config --file ../O/ok.cfg a.b 2; echo file=$?
git config --file ../O/ok-new.cfg a.b 3; echo new=$?
git config --global user.name after; echo global=$?
git config --file ../O/no.cfg a.b 3; echo other=$?"#,
        );
        let (asked, (code, out, err)) = drive_with(&fx, s, |a| {
            a.starts_with("run `git config --global")
                || a.contains("ok.cfg")
                || a.contains("ok-new.cfg")
        });
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("file=0"), "{ctx}");
        // A new file too (review 19's r19-03: its lock file was asked again).
        assert!(out.contains("new=0"), "{ctx}");
        let new = std::fs::read_to_string(o.join("ok-new.cfg")).unwrap_or_default();
        assert!(new.contains("b = 3"), "{new}: {ctx}");
        assert!(!o.join("ok-new.cfg.lock").exists(), "{ctx}");
        assert!(!out.contains("other=0"), "{ctx}");
        // Checked from outside: the approved line wrote what it named, and left no lock
        // file; the denied one wrote nothing; the person's own configuration is as it was.
        let file = std::fs::read_to_string(o.join("ok.cfg")).unwrap();
        assert!(file.contains("b = 2"), "{file}: {ctx}");
        assert!(!o.join("ok.cfg.lock").exists(), "{ctx}");
        assert!(!o.join("no.cfg").exists(), "{ctx}");
        let global = std::fs::read_to_string(&gc).unwrap();
        assert!(global.contains("name = before"), "{global}: {ctx}");
        assert!(!fx.home.join(".gitconfig.lock").exists(), "{ctx}");
        assert!(
            asked
                .iter()
                .any(|a| a.starts_with("run `git config --global")
                    && a.contains(&format!("read-write {}", gc.display()))),
            "the ask names the file: {ctx}"
        );
        assert_eq!(asked.len(), 4, "one ask per line: {ctx}");
    }
}

/// An approved recursive copy or clone to a new name outside the worktree is asked once and
/// makes that tree: `git clone` was asked again for the directory it makes (and each file
/// in it after), the policy having named its directory as a path it reads; `git clone` makes
/// its directory (with the missing ones above it) as `mkdir -p` does, also without the
/// server. A recursive copy's new name may become a directory or a file: with the server it is
/// the line's to make; without it nothing can be made there beforehand, so it is not granted
/// (a file was made there, `cp -r` failed on it and the empty file stayed). A denied copy
/// makes nothing (the control that the check from outside can fail).
#[test]
fn an_approved_copy_or_clone_to_a_new_name_outside_is_asked_once() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served { "tree-fuse" } else { "tree-off" };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let o = beside(&fx, "O", &[("keep.txt", "k\n")]);
            let src = o.join("src");
            std::fs::create_dir(&src).unwrap();
            std::fs::write(src.join("f.txt"), "f\n").unwrap();
            let git = |args: &[&str]| {
                let ok = Command::new("git")
                    .args(["-c", "user.name=t", "-c", "user.email=t@e"])
                    .args(args)
                    .current_dir(&src)
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "git {args:?}");
            };
            git(&["init", "-q"]);
            git(&["add", "."]);
            git(&["commit", "-qm", "init"]);
            give(&o, &fx.who);
            std::fs::create_dir_all(fx.wt.join("d/sub")).unwrap();
            std::fs::write(fx.wt.join("d/sub/a.txt"), "a\n").unwrap();
            give(&fx.wt.join("d"), &fx.who);
            let extra = server_args(served);
            let s = fx.start(
                extra,
                r#"cp -r d ../O/ok-copy; echo copy=$?
git clone -q --no-hardlinks ../O/src ../O/ok-clones/one; echo clone=$?
git clone -q --no-hardlinks . ../O/ok-self; echo self=$?
cp -r d ../O/no-copy; echo other=$?"#,
            );
            let (asked, (code, out, err)) =
                drive_with(&fx, s, |a| a.starts_with("run `") && a.contains("ok-"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            // Checked from outside: the clone is whole, with or without the server.
            assert!(out.contains("clone=0"), "{ctx}");
            let cloned = std::fs::read_to_string(o.join("ok-clones/one/f.txt"));
            assert_eq!(cloned.ok().as_deref(), Some("f\n"), "{ctx}");
            assert!(o.join("ok-clones/one/.git/HEAD").is_file(), "{ctx}");
            // A clone of the worktree's own repository: git's `git-upload-pack REPO` reads it
            // (it was taken as changing the repository's git directory, and refused).
            assert!(out.contains("self=0"), "{ctx}");
            assert!(o.join("ok-self/.git/HEAD").is_file(), "{ctx}");
            if served {
                assert!(out.contains("copy=0"), "{ctx}");
                let copied = std::fs::read_to_string(o.join("ok-copy/sub/a.txt"));
                assert_eq!(copied.ok().as_deref(), Some("a\n"), "{ctx}");
            } else {
                // Not granted: it fails, and nothing is left in its place; its ask says so.
                assert!(!out.contains("copy=0"), "{ctx}");
                assert!(
                    asked
                        .iter()
                        .any(|a| a.starts_with("run `cp -r d ../O/ok-copy")
                            && a.contains("still cannot make")),
                    "{ctx}"
                );
                assert!(
                    std::fs::symlink_metadata(o.join("ok-copy")).is_err(),
                    "{ctx}"
                );
            }
            assert!(!out.contains("other=0"), "{ctx}");
            assert!(
                std::fs::symlink_metadata(o.join("no-copy")).is_err(),
                "{ctx}"
            );
            assert_eq!(asked.len(), 4, "one ask per line: {ctx}");
        }
    }
}

/// An approved line that writes an archive outside the worktree (`tar -c`, in its dashed and
/// old spellings, and `zip`, which writes a temporary copy beside the archive and renames it
/// over it) or compresses a file there (`gzip`, which makes `FILE.gz` and removes `FILE`
/// unless `-k`) is asked once: the policy named the archive as a path the line reads, so its
/// creation was asked again (and zip's copy and rename, gzip's removal after). The approval covers that
/// archive: a denied line makes none (the control that the check from outside can fail),
/// and zip leaves no copy beside it.
#[test]
fn an_approved_archive_outside_is_asked_once() {
    for who in whos() {
        let Some(fx) = fixture(&who, "outside-archive") else {
            continue;
        };
        let o = beside(
            &fx,
            "O",
            &[
                ("keep.txt", "k\n"),
                ("ok-k.txt", "kk\n"),
                ("ok-z.txt", "zz\n"),
            ],
        );
        std::fs::create_dir_all(fx.wt.join("d/sub")).unwrap();
        std::fs::write(fx.wt.join("d/sub/a.txt"), "a\n").unwrap();
        give(&fx.wt.join("d"), &fx.who);
        let s = fx.start(
            &["--ask-outside-files"],
            r#"tar -czf ../O/ok.tgz d; echo tgz=$?
tar cf ../O/ok.tar d; echo tar=$?
zip -qr ../O/ok.zip d; echo zip=$?
zip -qr ../O/ok.zip d/sub; echo update=$?
gzip -k ../O/ok-k.txt; echo gzipk=$?
gzip ../O/ok-z.txt; echo gzip=$?
tar -czf ../O/no.tgz d; echo other=$?"#,
        );
        let (asked, (code, out, err)) =
            drive_with(&fx, s, |a| a.starts_with("run `") && a.contains("../O/ok"));
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        for line in ["tgz=0", "tar=0", "zip=0", "update=0", "gzipk=0", "gzip=0"] {
            assert!(out.contains(line), "{line}: {ctx}");
        }
        assert!(!out.contains("other=0"), "{ctx}");
        // Checked from outside: each archive holds the tree; nothing else was left.
        let list = |args: &[&str]| {
            let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let tgz = o.join("ok.tgz");
        let tar = o.join("ok.tar");
        let zip = o.join("ok.zip");
        assert!(
            list(&["tar", "-tzf", tgz.to_str().unwrap()]).contains("d/sub/a.txt"),
            "{ctx}"
        );
        assert!(
            list(&["tar", "-tf", tar.to_str().unwrap()]).contains("d/sub/a.txt"),
            "{ctx}"
        );
        let zipped = list(&["python3", "-m", "zipfile", "-l", zip.to_str().unwrap()]);
        assert!(zipped.contains("d/sub/a.txt"), "{zipped}: {ctx}");
        let mut names: Vec<String> = std::fs::read_dir(&o)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        // gzip made each `.gz` and removed the file it was not told to keep.
        let gunzip = |n: &str| list(&["gzip", "-dc", o.join(n).to_str().unwrap()]);
        assert_eq!(gunzip("ok-k.txt.gz"), "kk\n", "{ctx}");
        assert_eq!(gunzip("ok-z.txt.gz"), "zz\n", "{ctx}");
        assert_eq!(
            names,
            [
                "keep.txt",
                "ok-k.txt",
                "ok-k.txt.gz",
                "ok-z.txt.gz",
                "ok.tar",
                "ok.tgz",
                "ok.zip"
            ],
            "{ctx}"
        );
        assert_eq!(asked.len(), 7, "one ask per line: {ctx}");
    }
}

/// Review 20's r20-01 (high): where no server judges each request (`--outside-files off`, a
/// new name directly in the home), an approved line's grant is a Landlock rule, and one on a
/// directory that is or holds tyba's own configuration reached it: `cp -r cfg/. ~/.config/`
/// (or `git clone X ~/.config` with no `~/.config` yet, made before the run) wrote tyba's
/// policy. Such a grant is never given, whatever is approved, and the ask says so; with the
/// server it refuses them as before. Checked from outside; the control without the sandbox
/// writes the file.
#[test]
fn an_approved_line_never_gets_tybas_own_configuration() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served { "own-fuse" } else { "own-off" };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let own = fx.home.join(".config/tyba");
            std::fs::create_dir_all(&own).unwrap();
            std::fs::write(own.join("notes.txt"), "mine\n").unwrap();
            give(&fx.home.join(".config"), &fx.who);
            std::fs::create_dir_all(fx.wt.join("cfg/tyba")).unwrap();
            std::fs::write(fx.wt.join("cfg/tyba/notes.txt"), "planted\n").unwrap();
            give(&fx.wt.join("cfg"), &fx.who);
            let extra = server_args(served);
            let s = fx.start(
                extra,
                r#"cp -r cfg/. "$HOME/.config/"; echo cp=$?
mkdir -p "$HOME/.config/tyba/sub"; echo mk=$?"#,
            );
            let (asked, (code, out, err)) = drive_with(&fx, s, |a| a.starts_with("run `"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            let notes = std::fs::read_to_string(own.join("notes.txt")).unwrap();
            assert_eq!(notes, "mine\n", "{ctx}");
            assert!(!own.join("sub").exists(), "{ctx}");
            assert!(!out.contains("cp=0") && !out.contains("mk=0"), "{ctx}");
            if !served {
                assert!(
                    asked.iter().all(|a| a.contains("still cannot write")),
                    "the asks say so: {ctx}"
                );
            }
            // The control: without the sandbox the same copy writes the file.
            let bare = Command::new("cp")
                .args(["-r", "cfg/.", own.parent().unwrap().to_str().unwrap()])
                .current_dir(&fx.wt)
                .status()
                .unwrap();
            assert!(bare.success());
            let notes = std::fs::read_to_string(own.join("notes.txt")).unwrap();
            assert_eq!(notes, "planted\n", "control: {ctx}");
        }
    }
}

/// The person's policy file as a symbolic link to a dotfiles copy (a dotfiles manager that
/// links file by file, `stow --no-folding`): tyba knew its configuration by directory, so the
/// copy was the agent's to write through an approved line (`cp -r cfg/. ~/dotfiles/`), or
/// freely when the link leads into the worktree. What an entry of the configuration
/// directory leads to is tyba's own now: refused by the server, never granted without it,
/// bound read-only in the worktree. Checked from outside; the other files beside it are
/// written (the control that the lines ran), and without the sandbox the copy writes it.
#[test]
fn a_policy_file_behind_a_symbolic_link_stays_tybas_own() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served {
                "ownfile-fuse"
            } else {
                "ownfile-off"
            };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let own = fx.home.join(".config/tyba");
            std::fs::create_dir_all(&own).unwrap();
            let dots = fx.home.join("dotfiles/tyba");
            std::fs::create_dir_all(&dots).unwrap();
            std::fs::write(dots.join("policy.toml"), "# mine\n").unwrap();
            std::os::unix::fs::symlink(dots.join("policy.toml"), own.join("policy.toml")).unwrap();
            // A second entry leads into the worktree.
            std::fs::create_dir_all(fx.wt.join("dot")).unwrap();
            std::fs::write(fx.wt.join("dot/trusted"), "mine\n").unwrap();
            give(&fx.wt.join("dot"), &fx.who);
            std::os::unix::fs::symlink(fx.wt.join("dot/trusted"), own.join("trusted-policies"))
                .unwrap();
            give(&fx.home.join("dotfiles"), &fx.who);
            std::fs::create_dir_all(fx.wt.join("cfg/tyba")).unwrap();
            std::fs::write(fx.wt.join("cfg/tyba/policy.toml"), "# planted\n").unwrap();
            std::fs::write(fx.wt.join("cfg/tyba/other.txt"), "other\n").unwrap();
            give(&fx.wt.join("cfg"), &fx.who);
            let s = fx.start(
                server_args(served),
                r#"echo planted > dot/trusted; echo wt=$?
echo beside > dot/beside; echo beside=$?
cp -r cfg/. "$HOME/dotfiles/"; echo cp=$?"#,
            );
            let (asked, (code, out, err)) = drive_with(&fx, s, |a| a.starts_with("run `"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            let policy = std::fs::read_to_string(dots.join("policy.toml")).unwrap();
            assert_eq!(policy, "# mine\n", "{ctx}");
            let trusted = std::fs::read_to_string(fx.wt.join("dot/trusted")).unwrap();
            assert_eq!(trusted, "mine\n", "{ctx}");
            assert!(!out.contains("wt=0") && !out.contains("cp=0"), "{ctx}");
            assert!(out.contains("beside=0"), "the lines ran: {ctx}");
            if served {
                // The server refuses the one file; the rest of the copy is written.
                assert!(dots.join("other.txt").exists(), "{ctx}");
            } else {
                assert!(
                    asked.iter().any(|a| a.contains("still cannot write")),
                    "the ask says so: {ctx}"
                );
            }
            // The control: without the sandbox the same copy writes it through the link.
            let bare = Command::new("cp")
                .args(["-r", "cfg/.", fx.home.join("dotfiles").to_str().unwrap()])
                .current_dir(&fx.wt)
                .status()
                .unwrap();
            assert!(bare.success());
            let policy = std::fs::read_to_string(own.join("policy.toml")).unwrap();
            assert_eq!(policy, "# planted\n", "control: {ctx}");
        }
    }
}

/// Review 24's r24-01 (high): tyba protected where its configuration resolves to, not the
/// symbolic links on the way there. In a dotfiles checkout with `~/.config/tyba/policy.toml ->
/// <worktree>/tyba/policy.toml` and `<worktree>/tyba -> hosts/a`, the agent re-pointed its own
/// link (`ln -sfn hosts/b tyba`) and the next session read its policy. A link on the way that
/// lies where the agent writes stops the start (exit 4, naming it); the same layout with a
/// plain directory there starts, and keeps the policy (the control).
#[test]
fn a_link_on_the_way_to_tybas_configuration_in_the_worktree_stops_the_start() {
    for who in whos() {
        let Some(fx) = fixture(&who, "ownway") else {
            continue;
        };
        let own = fx.home.join(".config/tyba");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(fx.wt.join("hosts/a")).unwrap();
        std::fs::create_dir_all(fx.wt.join("hosts/b")).unwrap();
        std::fs::write(fx.wt.join("hosts/a/policy.toml"), "# mine\n").unwrap();
        std::fs::write(fx.wt.join("hosts/b/policy.toml"), "# planted\n").unwrap();
        give(&fx.wt.join("hosts"), &fx.who);
        std::os::unix::fs::symlink("hosts/a", fx.wt.join("tyba")).unwrap();
        std::os::unix::fs::symlink(fx.wt.join("tyba/policy.toml"), own.join("policy.toml"))
            .unwrap();
        let script = "ln -sfn hosts/b tyba; echo ln=$?";
        let s = fx.start(&["--autonomy", "high", "--non-interactive"], script);
        let (code, out, err) = s.finish();
        let ctx = format!("{who:?}: {out} / {err}");
        assert_eq!(code, 4, "{ctx}");
        assert!(
            err.contains(&format!(
                "{} is a symbolic link on the way to tyba's own",
                fx.wt.join("tyba").display()
            )),
            "{ctx}"
        );
        assert!(!out.contains("ln="), "the agent never ran: {ctx}");
        let policy = std::fs::read_to_string(own.join("policy.toml")).unwrap();
        assert_eq!(policy, "# mine\n", "{ctx}");
        // The control: a plain directory on the way; the session runs, the policy file is
        // bound read-only where it lies, and the agent's line runs.
        std::fs::remove_file(fx.wt.join("tyba")).unwrap();
        std::fs::create_dir(fx.wt.join("tyba")).unwrap();
        std::fs::write(fx.wt.join("tyba/policy.toml"), "# mine\n").unwrap();
        give(&fx.wt.join("tyba"), &fx.who);
        let script = "echo '# planted' > tyba/policy.toml; echo w=$?; echo ran";
        let s = fx.start(&["--autonomy", "high", "--non-interactive"], script);
        let (code, out, err) = s.finish();
        let ctx = format!("control {who:?}: {out} / {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("ran") && !out.contains("w=0"), "{ctx}");
        let policy = std::fs::read_to_string(own.join("policy.toml")).unwrap();
        assert_eq!(policy, "# mine\n", "{ctx}");
    }
}

/// Review 24's r24-03: a policy file named by `--policy` inside the worktree was the agent's
/// to rewrite, with shell builtins and no ask, and the next `tyba run --policy FILE` read it as
/// written. It is kept read-only for the session; one with another name (a hard link) is
/// refused at load (exit 3). The file beside it is written (the control that the line ran).
#[test]
fn a_policy_file_named_on_the_command_line_stays_the_persons() {
    for who in whos() {
        let Some(fx) = fixture(&who, "ownarg") else {
            continue;
        };
        let strict = fx.wt.join("strict.toml");
        std::fs::write(&strict, "# mine\n").unwrap();
        give(&strict, &fx.who);
        let arg = strict.to_str().unwrap().to_string();
        let script =
            "echo '# planted' > strict.toml; echo w=$?; echo beside > beside.txt; echo b=$?";
        let s = fx.start(
            &["--autonomy", "high", "--non-interactive", "--policy", &arg],
            script,
        );
        let (code, out, err) = s.finish();
        let ctx = format!("{who:?}: {out} / {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(!out.contains("w=0") && out.contains("b=0"), "{ctx}");
        assert_eq!(
            std::fs::read_to_string(&strict).unwrap(),
            "# mine\n",
            "{ctx}"
        );
        // A second name for it: not loaded.
        std::fs::hard_link(&strict, fx.wt.join("again.toml")).unwrap();
        let s = fx.start(
            &["--autonomy", "high", "--non-interactive", "--policy", &arg],
            "echo ran",
        );
        let (code, out, err) = s.finish();
        assert_eq!(code, 3, "{who:?}: {out} / {err}");
        assert!(
            err.contains("2 names") && !out.contains("ran"),
            "{who:?}: {err}"
        );
    }
}

/// Review 24's r24-02: the same class through the server. With `policy.toml ->
/// ~/dotfiles/tyba/policy.toml` and `~/dotfiles/tyba -> hosts/a`, one approved
/// `ln -sfn <worktree>/cfg ~/dotfiles/tyba` replaced the link, and the next session read the
/// agent's policy. A link on the way to tyba's own places is tyba's own: refused unasked,
/// whatever is approved. Checked from outside; the control without the sandbox re-points it.
#[test]
fn a_link_on_the_way_to_tybas_configuration_is_never_replaced() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served { "ownlnk-fuse" } else { "ownlnk-off" };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let own = fx.home.join(".config/tyba");
            std::fs::create_dir_all(&own).unwrap();
            let dots = fx.home.join("dotfiles");
            std::fs::create_dir_all(dots.join("hosts/a")).unwrap();
            std::fs::write(dots.join("hosts/a/policy.toml"), "# mine\n").unwrap();
            std::os::unix::fs::symlink("hosts/a", dots.join("tyba")).unwrap();
            std::os::unix::fs::symlink(dots.join("tyba/policy.toml"), own.join("policy.toml"))
                .unwrap();
            give(&dots, &fx.who);
            std::fs::create_dir_all(fx.wt.join("cfg")).unwrap();
            std::fs::write(fx.wt.join("cfg/policy.toml"), "# planted\n").unwrap();
            give(&fx.wt.join("cfg"), &fx.who);
            let script = format!(
                "ln -sfn {} \"$HOME/dotfiles/tyba\"; echo ln=$?\nmkdir -p \"$HOME/dotfiles/other\"; echo mk=$?",
                fx.wt.join("cfg").display()
            );
            let s = fx.start(server_args(served), &script);
            // Every ask approved: the person trusts the line.
            let (asked, (code, out, err)) = drive_with(&fx, s, |_| true);
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            assert!(!out.contains("ln=0"), "{ctx}");
            assert_eq!(
                std::fs::read_link(dots.join("tyba")).unwrap(),
                Path::new("hosts/a"),
                "{ctx}"
            );
            let policy = std::fs::read_to_string(own.join("policy.toml")).unwrap();
            assert_eq!(policy, "# mine\n", "{ctx}");
            if served {
                // The line beside it in the same directory is granted (the control that
                // the approval worked).
                assert!(out.contains("mk=0") && dots.join("other").is_dir(), "{ctx}");
            }
            // The control: without the sandbox the same line re-points it.
            assert!(bare_sh(&fx, &script).contains("ln=0"));
            let policy = std::fs::read_to_string(own.join("policy.toml")).unwrap();
            assert_eq!(policy, "# planted\n", "control: {ctx}");
        }
    }
}

/// Review 25's r25-02: an entry of tyba's configuration directory a link through a name that
/// does not exist yet (`trusted-policies -> ~/dotfiles/tyba/trusted`, the dotfiles not
/// cloned): one approved `ln -s <worktree>/cfg ~/dotfiles/tyba` laid the missing name as a link
/// into files the agent wrote (approvals of its own), and the next session read them. A link
/// made where tyba's own places would be reached through it is refused unasked, every ask
/// approved; a plain directory beside it is made (the control that the line's other steps
/// ran). Without the sandbox the same line lays it.
#[test]
fn a_link_laid_on_the_way_to_tybas_configuration_is_refused() {
    for who in whos() {
        let Some(fx) = fixture(&who, "ownlay") else {
            continue;
        };
        let own = fx.home.join(".config/tyba");
        std::fs::create_dir_all(&own).unwrap();
        let dots = fx.home.join("dotfiles");
        std::fs::create_dir_all(&dots).unwrap();
        give(&dots, &fx.who);
        std::os::unix::fs::symlink(dots.join("tyba/trusted"), own.join("trusted-policies"))
            .unwrap();
        std::fs::create_dir_all(fx.wt.join("cfg/trusted")).unwrap();
        std::fs::write(fx.wt.join("cfg/trusted/forged"), "x\n").unwrap();
        give(&fx.wt.join("cfg"), &fx.who);
        let script = format!(
            "ln -s {} \"$HOME/dotfiles/tyba\"; echo ln=$?\nmkdir -p \"$HOME/dotfiles/vim\"; echo mk=$?",
            fx.wt.join("cfg").display()
        );
        let s = fx.start(&["--ask-outside-files"], &script);
        let (asked, (code, out, err)) = drive_with(&fx, s, |_| true);
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        assert!(!out.contains("ln=0") && out.contains("mk=0"), "{ctx}");
        assert!(
            std::fs::symlink_metadata(dots.join("tyba")).is_err(),
            "{ctx}"
        );
        assert!(!own.join("trusted-policies/forged").exists(), "{ctx}");
        // The control: without the sandbox the same line lays the link.
        assert!(bare_sh(&fx, &script).contains("ln=0"));
        assert!(
            own.join("trusted-policies/forged").exists(),
            "control: {ctx}"
        );
    }
}

/// Review 25's r25-03: a policy file named by `--policy` outside the worktree was an ordinary
/// outside file, so one approved `cp` over it weakened the next `--policy` run. It is tyba's
/// own for the session: refused unasked, every ask approved. Without the sandbox the copy
/// writes it.
#[test]
fn a_policy_file_named_on_the_command_line_is_never_granted() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served {
                "ownarg2-fuse"
            } else {
                "ownarg2-off"
            };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let o = beside(&fx, "O", &[("strict.toml", "# mine\n")]);
            std::fs::write(fx.wt.join("planted.toml"), "# planted\n").unwrap();
            give(&fx.wt.join("planted.toml"), &fx.who);
            let strict = o.join("strict.toml");
            let arg = strict.to_str().unwrap().to_string();
            let script = "cp planted.toml ../O/strict.toml; echo cp=$?\ncp planted.toml ../O/other.toml; echo other=$?";
            let mut args = vec!["--policy", &arg];
            args.extend(server_args(served));
            let s = fx.start(&args, script);
            let (asked, (code, out, err)) = drive_with(&fx, s, |_| true);
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            assert!(!out.contains("cp=0") && out.contains("other=0"), "{ctx}");
            assert_eq!(
                std::fs::read_to_string(&strict).unwrap(),
                "# mine\n",
                "{ctx}"
            );
            // The control: without the sandbox the copy writes it.
            assert!(bare_sh(&fx, script).contains("cp=0"));
            assert_eq!(std::fs::read_to_string(&strict).unwrap(), "# planted\n");
        }
    }
}

/// Review 25's r25-04: with the person's policy tracked in the checkout a `--here` session
/// works in (`~/.config/tyba/policy.toml -> <checkout>/tyba/policy.toml`), the file stays
/// read-only, but the index was the agent's to write: its `git update-index` put its own
/// policy where the person's `git restore .` would install it, and nothing was said. The end
/// of the session names it; a session that leaves the index alone says nothing (the control).
#[test]
fn a_session_that_stages_tybas_configuration_is_named_at_the_end() {
    for who in whos() {
        let Some(fx) = fixture(&who, "ownidx") else {
            continue;
        };
        let own = fx.home.join(".config/tyba");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(fx.wt.join("tyba")).unwrap();
        std::fs::write(fx.wt.join("tyba/policy.toml"), "# mine\n").unwrap();
        give(&fx.wt.join("tyba"), &fx.who);
        let git = |args: &[&str]| {
            let o = git_as(&fx.who, &fx.wt, args);
            assert!(o.status.success(), "{args:?}: {o:?}");
        };
        git(&["add", "tyba/policy.toml"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "policy",
        ]);
        std::os::unix::fs::symlink(fx.wt.join("tyba/policy.toml"), own.join("policy.toml"))
            .unwrap();
        let review = "changed what git keeps for tyba's own configuration";
        // The control first: the session reads the index and leaves it.
        let s = fx.start(
            &["--autonomy", "high", "--non-interactive"],
            "git status --short >/dev/null; echo ran",
        );
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("ran") && !err.contains(review),
            "{who:?}: {err}"
        );
        let script = "printf '# planted\\n' > p.txt; b=$(git hash-object -w p.txt); git update-index --cacheinfo 100644,$b,tyba/policy.toml; echo idx=$?";
        let s = fx.start(&["--autonomy", "high", "--non-interactive"], script);
        let (code, out, err) = s.finish();
        let ctx = format!("{who:?}: {out} / {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("idx=0"), "the agent staged it: {ctx}");
        assert!(
            err.contains(review) && err.contains("tyba/policy.toml") && err.contains("the index"),
            "{ctx}"
        );
        assert_eq!(
            std::fs::read_to_string(own.join("policy.toml")).unwrap(),
            "# mine\n",
            "{ctx}"
        );
        // Review 26's r26-02: the entries left as they were, the person's blob replaced
        // (`git replace`): what a checkout of the unchanged entry puts back is the agent's.
        let o = git_as(&fx.who, &fx.wt, &["reset", "-q", "--", "tyba/policy.toml"]);
        assert!(o.status.success(), "{o:?}");
        let script = "mine=$(git rev-parse HEAD:tyba/policy.toml); printf '# planted\\n' > p.txt; b=$(git hash-object -w p.txt); git replace $mine $b; echo rep=$?";
        let s = fx.start(&["--autonomy", "high", "--non-interactive"], script);
        let (code, out, err) = s.finish();
        let ctx = format!("{who:?}: {out} / {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("rep=0"), "the agent replaced it: {ctx}");
        assert!(
            err.contains(review) && err.contains("the replacement refs"),
            "{ctx}"
        );
        // Review 27's r27-01: the person's object file rewritten in place under its own id,
        // every entry and ref left as it was (its ask approved, as a person might).
        let o = git_as(&fx.who, &fx.wt, &["replace", "-d", &replaced_blob(&fx)]);
        assert!(o.status.success(), "{o:?}");
        let script = r#"id=$(git rev-parse HEAD:tyba/policy.toml); printf '# planted\n' > p.txt; nb=$(git hash-object -w p.txt); d=$(git rev-parse --git-path objects); cp -f "$d/${nb:0:2}/${nb:2}" "$d/${id:0:2}/${id:2}"; echo swap=$?"#;
        let s = fx.start(&["--autonomy", "high"], script);
        let (asked, (code, out, err)) = drive_with(&fx, s, |_| true);
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("swap=0"), "the agent swapped it: {ctx}");
        assert!(
            err.contains(review) && err.contains("the stored objects"),
            "{ctx}"
        );
    }
}

/// The blob `tyba/policy.toml` names at HEAD in the fixture's checkout.
fn replaced_blob(fx: &Fx) -> String {
    let o = git_as(&fx.who, &fx.wt, &["rev-parse", "HEAD:tyba/policy.toml"]);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Review 21's r21-01 (high): tyba's own directories were known by the path the existing part
/// resolves to, so with `~/.config` a symbolic link that leads nowhere yet (`dotfiles/config`,
/// the dotfiles not cloned), an approved line making `~/dotfiles/config/tyba` wrote the
/// person's policy through the link. Its directories are also where such a link will put
/// them. Checked from outside; the control without the sandbox writes the file.
#[test]
fn tybas_own_configuration_behind_a_link_that_leads_nowhere_yet_is_never_granted() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served {
                "ownlink-fuse"
            } else {
                "ownlink-off"
            };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let config = fx.home.join(".config");
            if config.exists() {
                std::fs::remove_dir_all(&config).unwrap();
            }
            std::os::unix::fs::symlink("dotfiles/config", &config).unwrap();
            let planted = fx.home.join("dotfiles/config/tyba/policy.toml");
            let s = fx.start(
                server_args(served),
                r#"mkdir -p "$HOME/dotfiles/config/tyba"; echo mk=$?
sh -c 'echo "[[rule]]" > "$HOME/dotfiles/config/tyba/policy.toml"'; echo w=$?"#,
            );
            let (asked, (code, out, err)) = drive_with(&fx, s, |a| a.starts_with("run `"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            assert!(!planted.exists(), "{ctx}");
            assert!(!out.contains("w=0"), "{ctx}");
            // The control: without the sandbox the same lines write it through the link.
            let bare = Command::new("sh")
                .args([
                    "-c",
                    r#"mkdir -p "$H/dotfiles/config/tyba" && echo x > "$H/.config/tyba/policy.toml""#,
                ])
                .env("H", &fx.home)
                .status()
                .unwrap();
            assert!(bare.success() && planted.exists(), "control: {ctx}");
        }
    }
}

/// Review 22: tyba's own directories were found where this session's variables and the
/// existing part of their path put them. With `~/.config` a link that leads into the worktree
/// and nowhere yet (r22-02), the agent wrote the person's policy unasked; with
/// `XDG_CONFIG_HOME` set for the session only (r22-05), an approved line wrote
/// `~/.config/tyba`, which the person's other shells read. Both are tyba's own now, with and
/// without the server. Checked from outside; the controls without the sandbox write them.
#[test]
fn tybas_own_directories_are_found_wherever_the_person_will_use_them() {
    for who in whos() {
        for served in [true, false] {
            let tag = if served { "ownxdg-fuse" } else { "ownxdg-off" };
            let Some(fx) = fixture(&who, tag) else {
                continue;
            };
            let config = fx.home.join(".config");
            if config.exists() {
                std::fs::remove_dir_all(&config).unwrap();
            }
            std::os::unix::fs::symlink(fx.wt.join("config"), &config).unwrap();
            let xdg = fx.home.join("xdgcfg");
            std::fs::create_dir_all(&xdg).unwrap();
            give(&xdg, &fx.who);
            let in_wt = fx.wt.join("config/tyba/policy.toml");
            let script = r#"mkdir -p config/tyba; echo '[[rule]]' > config/tyba/policy.toml; echo wt=$?
sh -c 'mkdir -p "$HOME/.config/tyba" && echo x > "$HOME/.config/tyba/trusted"'; echo home=$?"#;
            let s = fx.start_argv(
                server_args(served),
                &[("XDG_CONFIG_HOME", xdg.to_str().unwrap())],
                &["bash", "-c", script],
            );
            let (asked, (code, out, err)) = drive_with(&fx, s, |a| a.starts_with("run `"));
            let ctx = format!("{who:?} served={served}: {out} / {err} / {asked:#?}");
            assert_eq!(code, 0, "{ctx}");
            assert!(!out.contains("wt=0") && !out.contains("home=0"), "{ctx}");
            let planted = std::fs::read_to_string(&in_wt).unwrap_or_default();
            assert!(planted.is_empty(), "{planted}: {ctx}");
            assert!(!fx.wt.join("config/tyba/trusted").exists(), "{ctx}");
            // The control: without the sandbox the same lines write both.
            let bare = Command::new("bash")
                .args(["-c", script])
                .current_dir(&fx.wt)
                .env("HOME", &fx.home)
                .output()
                .unwrap();
            let bare = String::from_utf8_lossy(&bare.stdout);
            assert!(
                bare.contains("wt=0") && bare.contains("home=0"),
                "control: {bare}"
            );
            assert!(in_wt.exists() && fx.wt.join("config/tyba/trusted").exists());
        }
    }
}

/// Review 23's r23-02: the server judged with tyba's own directories as they were when the
/// session started, so a link the person laid during it (`~/.config -> dotfiles/config`,
/// over a served `~/dotfiles`) let an approved `cp -r cfg/. ~/dotfiles/` write the policy.
/// Each change it serves is judged with where they are now too. Checked from outside; the
/// control without the sandbox writes it.
#[test]
fn a_link_laid_during_the_session_does_not_open_tybas_own_configuration() {
    for who in whos() {
        let Some(fx) = fixture(&who, "ownlate") else {
            continue;
        };
        let config = fx.home.join(".config");
        if config.exists() {
            std::fs::remove_dir_all(&config).unwrap();
        }
        std::fs::create_dir_all(fx.home.join("dotfiles")).unwrap();
        give(&fx.home.join("dotfiles"), &fx.who);
        std::fs::create_dir_all(fx.wt.join("cfg/config/tyba")).unwrap();
        std::fs::write(fx.wt.join("cfg/config/tyba/policy.toml"), "[[rule]]\n").unwrap();
        give(&fx.wt.join("cfg"), &fx.who);
        let planted = fx.home.join("dotfiles/config/tyba/policy.toml");
        let s = fx.start(
            &["--ask-outside-files"],
            r#"while [ ! -e go ]; do sleep 0.1; done
cp -r cfg/. "$HOME/dotfiles/"; echo cp=$?"#,
        );
        // The person lays the link while the session runs, then lets the line go on.
        std::thread::sleep(Duration::from_millis(1500));
        std::os::unix::fs::symlink("dotfiles/config", &config).unwrap();
        std::fs::write(fx.wt.join("go"), "").unwrap();
        give(&fx.wt.join("go"), &fx.who);
        let (asked, (code, out, err)) = drive_with(&fx, s, |a| a.starts_with("run `"));
        let ctx = format!("{who:?}: {out} / {err} / {asked:#?}");
        assert_eq!(code, 0, "{ctx}");
        assert!(!planted.exists(), "{ctx}");
        assert!(!out.contains("cp=0"), "{ctx}");
        // The control: without the sandbox the same copy writes it.
        let bare = Command::new("cp")
            .args(["-r", "cfg/.", fx.home.join("dotfiles").to_str().unwrap()])
            .current_dir(&fx.wt)
            .status()
            .unwrap();
        assert!(bare.success() && planted.exists(), "control: {ctx}");
    }
}
