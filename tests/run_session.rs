//! `tyba run` end to end: exec classification (refusal reason on the command's stderr with a
//! failing status, approved commands' children not asked again), the agent's own hosts vs its
//! commands' connections, worktree sessions, secrets, exit status. Each test runs as the test
//! process's user and as the unprivileged `TYBA_TEST_USER` (see `run_support.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use support::*;

struct Env {
    _scratch: Scratch,
    wt: PathBuf,
    home: PathBuf,
    tyba: PathBuf,
    who: Who,
}

fn setup(who: &Who, tag: &str) -> Option<Env> {
    let r = sandbox_repo(who, tag)?;
    Some(Env {
        _scratch: r.scratch,
        wt: r.wt,
        home: r.home,
        tyba: r.tyba,
        who: who.clone(),
    })
}

/// `tyba run FLAGS -- bash -c SCRIPT` in the worktree: (status, stdout, stderr).
fn run_bash(e: &Env, flags: &[&str], script: &str) -> (i32, String, String) {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--", "bash", "-c", script]);
    run(e, &[], &args)
}

fn run(e: &Env, extra_env: &[(&str, OsString)], args: &[&str]) -> (i32, String, String) {
    let o = run_tyba(&e.who, &e.tyba, &e.wt, &base_env(&e.home, extra_env), args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn run_refusal_reason_reaches_the_command_stderr_with_failing_status() {
    for who in whos() {
        let Some(e) = setup(&who, "refuse") else {
            continue;
        };
        let script = "touch made-by-agent.txt; echo rc=$?";
        let (code, out, err) = run_bash(&e, &["--here", "--non-interactive"], script);
        assert_eq!(code, 0, "{who:?}: the agent itself exits normally: {err}");
        assert!(
            out.contains("rc=126"),
            "{who:?}: the refused command fails (stdout {out:?}, stderr {err})"
        );
        assert!(
            err.contains("tyba: refused by tyba"),
            "{who:?}: the reason is on the command's stderr: {err}"
        );
        assert!(
            err.contains("denied in this session"),
            "{who:?}: the summary lists the denial: {err}"
        );
        assert!(
            !e.wt.join("made-by-agent.txt").exists(),
            "{who:?}: the refused command had no effect"
        );
    }
}

#[test]
fn run_exec_is_classified_by_the_file_run_not_by_its_argv0_label() {
    for who in whos() {
        let Some(e) = setup(&who, "argv0") else {
            continue;
        };
        // A script in the worktree (yellow) and `rm -rf` (red), run under green labels
        // (`ls`, `bash -c ls`): the kernel runs the file, so the file is what is classified.
        let evil = e.wt.join("evil.sh");
        write_exe(&evil, "#!/bin/sh\nfor a; do :; done; echo ran > \"$a\"\n");
        std::fs::create_dir_all(e.wt.join("victim")).unwrap();
        std::fs::write(e.wt.join("victim/f"), "keep").unwrap();
        give(&e.wt, &e.who);
        let script = r#"(exec -a ls ./evil.sh made-as-ls); echo as_ls=$?
(exec -a bash ./evil.sh -c ls made-as-bash); echo as_bash=$?
(exec -a ls /usr/bin/rm -rf victim); echo as_rm=$?
(exec -a cat /bin/cat README.md) > /dev/null; echo same_program=$?"#;
        let (code, out, err) = run_bash(&e, &["--here", "--non-interactive"], script);
        assert_eq!(code, 0, "{who:?}: {err}");
        for (label, made) in [("as_ls", "made-as-ls"), ("as_bash", "made-as-bash")] {
            assert!(
                !e.wt.join(made).exists(),
                "{who:?}: the program run as `{label}` was classified by its label: {out} / {err}"
            );
            assert!(
                out.contains(&format!("{label}=126")),
                "{who:?}: {label} was refused: {out} / {err}"
            );
        }
        assert!(
            e.wt.join("victim/f").exists() && out.contains("as_rm=126"),
            "{who:?}: `rm -rf` under the label `ls` was refused: {out} / {err}"
        );
        assert!(
            err.contains("evil.sh made-as-ls") && err.contains("/usr/bin/rm -rf victim"),
            "{who:?}: the refusal names the file run: {err}"
        );
        // A label naming the same system program keeps its green colour.
        assert!(out.contains("same_program=0"), "{who:?}: {out} / {err}");
    }
}

#[test]
fn run_missing_agent_control_files_are_kept_read_only_and_left_as_found() {
    for who in whos() {
        let Some(e) = setup(&who, "control") else {
            continue;
        };
        // Agent state directories exist, their settings and hooks do not yet.
        for d in [".claude", ".codex"] {
            std::fs::create_dir_all(e.home.join(d)).unwrap();
        }
        give(&e.home, &e.who);
        // perl makes the calls itself, so only the kernel layer can stop them.
        let script = r#"perl -e '
open(my $f, ">", "$ENV{HOME}/.claude/settings.json") and print $f "{\"permissions\":{}}"; print "settings=", (-s "$ENV{HOME}/.claude/settings.json" > 3) ? "written" : "refused", "\n";
print "hookdir=", (mkdir("$ENV{HOME}/.claude/hooks/h") ? "made" : "refused"), "\n";
open(my $g, ">", "$ENV{HOME}/.codex/hooks.json") and print $g "{}"; print "codex_hooks=", (-s "$ENV{HOME}/.codex/hooks.json" > 3) ? "written" : "refused", "\n";
print "state=", (open(my $h, ">", "$ENV{HOME}/.claude/history.jsonl") ? "written" : "refused"), "\n";
'"#;
        let (code, out, err) = run_bash(
            &e,
            &["--here", "--non-interactive", "--autonomy", "high"],
            script,
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        for line in ["settings=refused", "hookdir=refused", "codex_hooks=refused"] {
            assert!(out.contains(line), "{who:?}: {line}: {out} / {err}");
        }
        // The rest of the agent's state stays writable.
        assert!(out.contains("state=written"), "{who:?}: {out} / {err}");
        // The placeholders are gone, the agent's own state file stays.
        for p in [
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".claude/hooks",
            ".codex/config.toml",
            ".codex/rules",
            ".codex/hooks.json",
        ] {
            assert!(
                std::fs::symlink_metadata(e.home.join(p)).is_err(),
                "{who:?}: {p} left behind"
            );
        }
        assert!(e.home.join(".claude/history.jsonl").exists(), "{who:?}");
    }
}

#[test]
fn run_green_command_passes_without_asking() {
    for who in whos() {
        let Some(e) = setup(&who, "green") else {
            continue;
        };
        let (code, out, err) = run_bash(
            &e,
            &["--here", "--non-interactive"],
            "ls; echo rc=$?; cat README.md",
        );
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("README.md") && out.contains("rc=0") && out.contains("hello"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            !err.contains("denied in this session"),
            "{who:?}: nothing denied: {err}"
        );
    }
}

#[test]
fn run_children_of_an_approved_command_pass_when_yellow_and_are_asked_when_red() {
    for who in whos() {
        let Some(e) = setup(&who, "children") else {
            continue;
        };
        let secret = e.wt.parent().unwrap().join("outside-secret.txt");
        std::fs::write(&secret, "topsecret\n").unwrap();
        give(&secret, &who);
        write_exe(
            &e.wt.join("build.sh"),
            &format!(
                "#!/bin/sh\ntouch built.txt\necho touch-rc=$?\ncat /etc/hostname > host.txt\necho sys-rc=$?\ncat {} > from-child.txt\necho child-rc=$?\n",
                secret.display()
            ),
        );
        give(&e.wt.join("build.sh"), &who);
        // At high autonomy the yellow `./build.sh` is allowed. Its yellow `touch` runs under
        // that approval, unasked, and so does its read of a system file the sandbox reads
        // anyway. Its `cat` of a file outside that the sandbox cannot read is red: the
        // approval of the build does not cover it, so it is asked (here: refused,
        // non-interactive), naming the approved command. The agent's own `cat
        // /etc/hostname` is red and refused: the agent named a path outside.
        let script = "./build.sh; cat /etc/hostname > from-agent.txt; echo agent-rc=$?";
        let (code, out, err) = run_bash(
            &e,
            &["--here", "--non-interactive", "--autonomy", "high"],
            script,
        );
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("touch-rc=0") && e.wt.join("built.txt").exists(),
            "{who:?}: the yellow child ran: {out} / {err}"
        );
        assert!(
            out.contains("sys-rc=0"),
            "{who:?}: the child's read of a system file ran: {out} / {err}"
        );
        assert!(
            out.contains("child-rc=126"),
            "{who:?}: the red child was refused: {out} / {err}"
        );
        assert!(
            err.contains("started by the approved command `./build.sh`"),
            "{who:?}: the refusal names the approved command: {err}"
        );
        assert!(
            out.contains("agent-rc=126"),
            "{who:?}: the agent's own red command was refused: {out} / {err}"
        );
        assert_eq!(
            std::fs::read_to_string(e.wt.join("from-child.txt")).unwrap_or_default(),
            "",
            "{who:?}: nothing was read through the refused child"
        );
    }
}

#[test]
fn run_nothing_of_the_agents_runs_before_the_supervisor_holds_its_listener() {
    // Stage 2 forks the agent's process before the supervisor has taken the seccomp listener:
    // the agent program's own exec is a notified call, so it runs only once the supervisor
    // answers. A supervisor that cannot take the listener (test builds: after 300 ms, time
    // enough for an ungated agent to run) ends the start, and the agent never ran.
    for who in whos() {
        let Some(e) = setup(&who, "no-go") else {
            continue;
        };
        let mark = e.wt.join("agent-ran");
        let script = format!("echo ran > {}", mark.display());
        let args = [
            "run",
            "--here",
            "--non-interactive",
            "--",
            "bash",
            "-c",
            script.as_str(),
        ];
        let fault = [("TYBA_FAULT_TAKE_LISTENER_MS", OsString::from("300"))];
        let (code, _, err) = run(&e, &fault, &args);
        assert_ne!(code, 0, "the start must fail: {err}");
        assert!(err.contains("fault point"), "{err}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !mark.exists(),
            "the agent ran with nobody holding its listener ({who:?}): {err}"
        );
        // Control: the same agent, the listener taken, runs and leaves its mark.
        let (code, _, err) = run(&e, &[], &args);
        assert_eq!(code, 0, "{err}");
        assert!(mark.exists(), "the control's agent left no mark: {err}");
    }
}

#[test]
fn run_the_agent_programs_exec_is_logged_as_started() {
    // The session's first exec, the agent program started by tyba, is logged from what tyba
    // started (not read from the waiting process): its path, argv and working directory.
    for who in whos() {
        let Some(e) = setup(&who, "first-exec") else {
            continue;
        };
        let (code, _, err) = run_bash(&e, &["--here", "--non-interactive"], "/bin/true x");
        assert_eq!(code, 0, "{err}");
        // The session's audit log (the latest session's: `tyba log --json`).
        let (code, out, err) = run(&e, &[], &["log", "--json"]);
        assert_eq!(code, 0, "tyba log: {err}");
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let agent: Vec<_> = lines
            .iter()
            .filter(|l| l["reason"] == "the agent program")
            .collect();
        assert_eq!(agent.len(), 1, "{who:?}: {lines:?}");
        let a = agent[0];
        assert_eq!(
            a["argv"],
            serde_json::json!(["bash", "-c", "/bin/true x"]),
            "{a}"
        );
        assert!(
            a["action"]
                .as_str()
                .is_some_and(|s| s.contains("/bin/true x")),
            "{a}"
        );
        assert_eq!(a["cwd"].as_str(), e.wt.to_str(), "{a}");
        assert_eq!(a["verdict"], "green", "{a}");
        // The command the agent ran is its own line, with its own argv.
        assert!(
            lines
                .iter()
                .any(|l| l["argv"] == serde_json::json!(["/bin/true", "x"])
                    && l["reason"] != "the agent program"),
            "{who:?}: {lines:?}"
        );
    }
}

/// The soft `RLIMIT_CORE` of a process, as `/proc/PID/limits` shows it (`unlimited` or a
/// number of bytes).
fn core_soft(limits: &str) -> Option<String> {
    let l = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))?;
    l.split_whitespace().nth(4).map(str::to_string)
}

#[test]
fn run_stages_write_no_core_file_and_the_agent_keeps_the_persons_limit() {
    // Stage 1 and stage 2 hold a copy of the supervisor's image (the person's whole
    // environment, the withheld secrets included): their soft core-size limit is 0, read from
    // outside while the session runs; the agent gets the person's back (review 33's r33-01).
    for who in whos() {
        let Some(e) = setup(&who, "core") else {
            continue;
        };
        let tag = format!("core-limit-{}", std::process::id());
        // Shell builtins only (a non-interactive session asks about nothing else).
        let script = format!(
            "while read -r l; do case $l in 'Max core'*) echo \"$l\" > agent-core.txt;; esac; done < /proc/self/limits; read -t 3 x < /dev/zero; exit 0 # {tag}"
        );
        let scan = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while std::time::Instant::now() < deadline {
                for p in std::fs::read_dir("/proc").unwrap().flatten() {
                    let dir = p.path();
                    let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
                    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
                    let nspid = status.lines().find(|l| l.starts_with("NSpid:"));
                    let is_stage2 = nspid.is_some_and(|l| {
                        let f: Vec<_> = l.split_whitespace().skip(1).collect();
                        f.len() == 2 && f[1] == "1"
                    });
                    if !is_stage2 || !String::from_utf8_lossy(&cmd).contains(&tag) {
                        continue;
                    }
                    let ppid = status
                        .lines()
                        .find_map(|l| l.strip_prefix("PPid:"))
                        .map(|v| v.trim().to_string())
                        .unwrap();
                    let read = |d: &Path| std::fs::read_to_string(d.join("limits")).unwrap();
                    let stage1 = Path::new("/proc").join(ppid);
                    return Some((core_soft(&read(&dir)), core_soft(&read(&stage1))));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            None
        });
        // The person's soft limit raised to the hard one first.
        let mut args = vec![
            "-c",
            "ulimit -S -c \"$(ulimit -H -c)\" && exec \"$0\" \"$@\"",
            e.tyba.to_str().unwrap(),
        ];
        args.extend(["run", "--here", "--non-interactive", "--", "bash", "-c"]);
        args.push(&script);
        let o = run_tyba(
            &e.who,
            Path::new("/bin/bash"),
            &e.wt,
            &base_env(&e.home, &[]),
            &args,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let (stage2, stage1) = scan.join().unwrap().expect("stage 2 seen while it ran");
        assert_eq!(stage2.as_deref(), Some("0"), "stage 2 ({who:?})");
        assert_eq!(stage1.as_deref(), Some("0"), "stage 1 ({who:?})");
        // Control: the agent's own limit is the person's, not 0.
        let agent = std::fs::read_to_string(e.wt.join("agent-core.txt")).unwrap();
        let agent = core_soft(&agent);
        assert!(
            agent.as_deref().is_some_and(|a| a != "0"),
            "the agent's: {agent:?}"
        );
    }
}

#[test]
fn run_exit_status_is_the_agents() {
    for who in whos() {
        let Some(e) = setup(&who, "exit") else {
            continue;
        };
        let (code, _, err) = run_bash(&e, &["--here", "--non-interactive"], "exit 7");
        assert_eq!(code, 7, "{err}");
        let (code, _, _) = run_bash(&e, &["--here", "--non-interactive"], "kill -TERM $$");
        assert_eq!(code, 128 + 15);
    }
}

#[test]
fn run_missing_agent_is_a_usage_error() {
    let who = Who::Me;
    let Some(e) = setup(&who, "usage") else {
        return;
    };
    let (code, _, err) = run(
        &e,
        &[],
        &["run", "--here", "--", "no-such-agent-program-xyz"],
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn run_secrets_are_withheld_unless_passed() {
    for who in whos() {
        let Some(e) = setup(&who, "env") else {
            continue;
        };
        let script = "echo \"tok=${GITHUB_TOKEN:-unset} key=${MY_API_KEY:-unset} tmp=${TMPDIR}\"; echo x > \"$TMPDIR/t\" && echo tmp-ok";
        let extra = [
            ("GITHUB_TOKEN", OsString::from("ghp_secret")),
            ("MY_API_KEY", OsString::from("k")),
        ];
        let (code, out, err) = run(
            &e,
            &extra,
            &[
                "run",
                "--here",
                "--non-interactive",
                "--pass-env",
                "MY_API_KEY",
                "--",
                "bash",
                "-c",
                script,
            ],
        );
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("tok=unset"), "{who:?}: {out}");
        assert!(
            out.contains("key=k"),
            "{who:?}: --pass-env passes it: {out}"
        );
        assert!(
            out.contains("tmp-ok"),
            "{who:?}: the private TMPDIR is writable: {out} / {err}"
        );
        assert!(
            err.contains("GITHUB_TOKEN"),
            "{who:?}: the withheld names are reported: {err}"
        );
    }
}

fn accept_all(l: &TcpListener, wait_ms: u64) -> Vec<String> {
    l.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    let mut got = Vec::new();
    while std::time::Instant::now() < deadline {
        match l.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                    .unwrap();
                let mut b = String::new();
                let _ = s.read_to_string(&mut b);
                got.push(b);
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    got
}

#[test]
fn run_agent_reaches_its_hosts_and_its_commands_do_not() {
    for who in whos() {
        let Some(e) = setup(&who, "net") else {
            continue;
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // The agent (bash itself) connects: allowed by --allow-host. Then a command it starts
        // (perl, yellow, allowed at high autonomy) connects to the same place: red, denied.
        let script = r#"exec 3<>"/dev/tcp/127.0.0.1/$P" && echo agent-hello >&3; exec 3>&-
perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or die; if (connect($s, pack_sockaddr_in($ENV{P}, inet_aton("127.0.0.1")))) { print $s "command-hello\n"; print "cmd-connected\n" } else { print "cmd-refused $!\n" }'
echo done"#;
        let allow = format!("127.0.0.1:{port}");
        let args = [
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--allow-host",
            &allow,
            "--",
            "bash",
            "-c",
            script,
        ];
        let (code, out, err) = run(&e, &[("P", port.to_string().into())], &args);
        // Connections made during the run wait in the listener's backlog, data buffered.
        let got = accept_all(&l, 500);
        assert_eq!(code, 0, "{err}");
        assert!(
            got.iter().any(|g| g.contains("agent-hello")),
            "{who:?}: the agent reached its host: {got:?} / {err}"
        );
        assert!(
            !got.iter().any(|g| g.contains("command-hello")),
            "{who:?}: the command did not: {got:?}"
        );
        assert!(
            out.contains("cmd-refused"),
            "{who:?}: the command saw the refusal: {out} / {err}"
        );
        assert!(
            err.contains("a command connects to"),
            "{who:?}: reason reported: {err}"
        );
        // Without --allow-host the agent's own connection is red too.
        let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
        let p2 = l2.local_addr().unwrap().port();
        let (_, _, err) = run(
            &e,
            &[("P", p2.to_string().into())],
            &[
                "run",
                "--here",
                "--non-interactive",
                "--",
                "bash",
                "-c",
                "exec 3<>/dev/tcp/127.0.0.1/$P; echo x >&3",
            ],
        );
        assert!(
            accept_all(&l2, 300).is_empty(),
            "{who:?}: no connection without --allow-host"
        );
        assert!(err.contains("the agent connects to"), "{who:?}: {err}");
    }
}

fn worktree_from(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find(|l| l.contains(": worktree "))
        .expect("worktree line");
    PathBuf::from(line.split(": worktree ").nth(1).unwrap().trim())
}

#[test]
fn run_default_session_is_a_linked_worktree_on_its_own_branch() {
    for who in whos() {
        let Some(e) = setup(&who, "linked") else {
            continue;
        };
        let script = r#"echo agent > agent.txt; git add agent.txt && git commit -q -m agent-commit; echo commit=$?
echo evil > "$(git rev-parse --path-format=absolute --git-common-dir)/hooks/pre-push"; echo hook=$?
echo "gitdir: /tmp" > .git; echo dotgit=$?
echo '[core]' >> "$(git rev-parse --path-format=absolute --git-common-dir)/config"; echo config=$?
echo /tmp/evil > "$(git rev-parse --path-format=absolute --git-dir)/commondir"; echo commondir=$?
mkdir -p "$(git rev-parse --path-format=absolute --git-dir)/modules/x" "$(git rev-parse --path-format=absolute --git-common-dir)/modules/x"; echo modules=$?
git status --porcelain; echo status=$?"#;
        let (code, out, err) = run_bash(&e, &["--non-interactive", "--autonomy", "high"], script);
        assert_eq!(code, 0, "{err}");
        let wt = worktree_from(&err);
        assert!(
            wt.starts_with(&e.home),
            "{who:?}: worktree under XDG_STATE_HOME: {}",
            wt.display()
        );
        assert!(
            wt.join("agent.txt").exists(),
            "{who:?}: the agent worked in the new worktree"
        );
        assert!(
            !e.wt.join("agent.txt").exists(),
            "{who:?}: the main checkout is untouched"
        );
        assert!(
            out.contains("commit=0"),
            "{who:?}: git commit works in a linked worktree: {out} / {err}"
        );
        assert!(
            !out.contains("hook=0") && !e.wt.join(".git/hooks/pre-push").exists(),
            "{who:?}: main hooks protected: {out}"
        );
        assert!(
            !out.contains("dotgit=0"),
            "{who:?}: the worktree's .git file is read-only: {out}"
        );
        assert!(
            !out.contains("config=0"),
            "{who:?}: the main config is read-only: {out}"
        );
        assert!(
            !out.contains("commondir=0"),
            "{who:?}: the linked worktree's commondir is read-only: {out}"
        );
        assert!(
            !out.contains("modules=0"),
            "{who:?}: submodule git dirs cannot be planted: {out}"
        );
        assert!(out.contains("status=0"), "{who:?}: git status works: {out}");
        let branch = err
            .lines()
            .find_map(|l| l.strip_prefix("tyba: new branch "))
            .expect("branch line")
            .trim()
            .to_string();
        assert!(branch.starts_with("tyba/"), "{branch}");
        let log = git_as(&who, &e.wt, &["log", "--format=%s", &branch]);
        assert!(
            String::from_utf8_lossy(&log.stdout).contains("agent-commit"),
            "{who:?}: the commit is on {branch}"
        );
        assert!(
            err.contains("worktree remove"),
            "{who:?}: removal hint printed: {err}"
        );
        assert!(
            std::fs::read_to_string(wt.join(".git"))
                .unwrap()
                .starts_with("gitdir: "),
            "{who:?}: .git file intact"
        );
        let _ = Path::new(&wt);
    }
}

#[test]
fn run_refuses_to_start_when_the_sandbox_cannot_be_enforced() {
    // tyba inside tyba: the outer filter denies unshare(2), so the inner one cannot make its
    // namespaces and must refuse with exit status 4, saying why.
    for who in whos() {
        let Some(e) = setup(&who, "nested") else {
            continue;
        };
        let inner = e.wt.join("tyba-inner");
        copy_exe(Path::new(env!("CARGO_BIN_EXE_tyba")), &inner);
        give(&inner, &who);
        let (code, _, err) = run(
            &e,
            &[],
            &[
                "run",
                "--here",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "./tyba-inner",
                "run",
                "--here",
                "--non-interactive",
                "--",
                "/bin/true",
            ],
        );
        assert_eq!(
            code, 4,
            "{who:?}: the inner tyba refuses with exit 4: {err}"
        );
        assert!(
            err.contains("cannot create user, mount, PID, network, IPC, UTS and cgroup namespaces"),
            "{who:?}: {err}"
        );
    }
}

#[test]
fn run_here_a_commondir_cannot_be_planted_for_the_persons_git_to_follow() {
    for who in whos() {
        let Some(e) = setup(&who, "commondir") else {
            continue;
        };
        // The agent's own process writes it (perl: no command for the classifier to see);
        // the name an earlier quarantine used is taken first.
        let script = r#"mkdir .git/commondir.tyba-quarantined; perl -e 'open(F, ">", ".git/commondir") or die "open: $!"; print F "/tmp/evil\n"; close F; print "planted\n"'"#;
        let (code, out, err) = run_bash(
            &e,
            &["--here", "--non-interactive", "--autonomy", "high"],
            script,
        );
        assert_ne!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            !out.contains("planted") && err.contains("open: Read-only file system"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            !e.wt.join(".git/commondir").exists(),
            "{who:?}: no commondir after the session (the stand-in is gone): {err}"
        );
        let st = command_as(&e.who, Path::new("git"))
            .env("HOME", &e.home)
            .arg("-C")
            .arg(&e.wt)
            .args(["status", "--porcelain"])
            .output()
            .unwrap();
        assert!(st.status.success(), "{who:?}: the person's git still works");
    }
}

#[test]
fn run_an_agent_profile_hides_the_persons_tmux_and_ssh_agent_sockets() {
    for who in whos() {
        let Some(e) = setup(&who, "hidden-env") else {
            continue;
        };
        // Claude Code installed the npm way under the fake home, started by its path: its
        // profile is recognised by the package, and TMUX/SSH_AUTH_SOCK never reach it.
        let pkg = e
            .home
            .join(".npm-global/lib/node_modules/@anthropic-ai/claude-code");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@anthropic-ai/claude-code"}"#,
        )
        .unwrap();
        write_exe(
            &pkg.join("cli.sh"),
            "#!/bin/sh\necho \"tmux=${TMUX-unset} pane=${TMUX_PANE-unset} ssh=${SSH_AUTH_SOCK-unset} keep=${KEEP-unset}\"\n",
        );
        give(&e.home, &who);
        let prog = pkg.join("cli.sh");
        let prog = prog.to_str().unwrap();
        let extra = [
            ("TMUX", OsString::from("/tmp/tmux-1000/default,42,0")),
            ("TMUX_PANE", OsString::from("%3")),
            ("SSH_AUTH_SOCK", OsString::from("/tmp/ssh-x/agent.1")),
            ("KEEP", OsString::from("yes")),
        ];
        let (code, out, err) = run(
            &e,
            &extra,
            &["run", "--here", "--non-interactive", "--", prog],
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("tmux=unset pane=unset ssh=unset keep=yes"),
            "{who:?}: {out} / {err}"
        );
        assert!(err.contains("claude-code"), "{who:?}: said so: {err}");
        // Control: a program no profile knows keeps the person's TMUX.
        let (code, out, err) = run(
            &e,
            &extra,
            &[
                "run",
                "--here",
                "--non-interactive",
                "--",
                "bash",
                "-c",
                "echo tmux=${TMUX-unset}",
            ],
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("tmux=/tmp/tmux-1000"),
            "{who:?}: {out} / {err}"
        );
    }
}

#[test]
fn run_a_c_build_runs_under_the_approval_of_make_and_a_push_inside_it_does_not() {
    for who in whos() {
        let Some(e) = setup(&who, "cbuild") else {
            continue;
        };
        std::fs::write(e.wt.join("m1.c"), "int f1(int x) { return x * 2; }\n").unwrap();
        std::fs::write(e.wt.join("main.c"), "int main(void) { return 0; }\n").unwrap();
        // gcc runs cc1, as, collect2 and ld from /usr/lib with the system's own files on their
        // lines: the build's own work under the approval of `make`. A step that names a file
        // the sandbox cannot read, or pushes to main through git's own directory, is not.
        std::fs::write(
            e.wt.join("Makefile"),
            "prog: m1.o main.o\n\tcc -o prog m1.o main.o\n%.o: %.c\n\tcc -O1 -c $< -o $@\n\
             leak:\n\tcat /root/.profile > leaked.txt\n\
             ship:\n\t/usr/lib/git-core/git push origin HEAD:main\n",
        )
        .unwrap();
        give(&e.wt, &who);
        let (code, out, err) = run_bash(
            &e,
            &["--here", "--non-interactive", "--autonomy", "high"],
            "make -s prog; echo build=$?; make -s leak; echo leak=$?; make -s ship; echo ship=$?",
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("build=0") && e.wt.join("prog").exists(),
            "{who:?}: the build ran: {out} / {err}"
        );
        assert!(
            !out.contains("leak=0"),
            "{who:?}: the read outside was refused: {out} / {err}"
        );
        assert!(
            std::fs::read_to_string(e.wt.join("leaked.txt"))
                .unwrap_or_default()
                .is_empty(),
            "{who:?}: nothing read: {err}"
        );
        assert!(
            !out.contains("ship=0"),
            "{who:?}: the push was refused: {out} / {err}"
        );
        assert!(
            err.contains("refs/heads/main"),
            "{who:?}: the push is refused as a push to main: {err}"
        );
    }
}
