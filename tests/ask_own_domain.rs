//! An approved command that names paths outside the worktree runs in a Landlock domain of its
//! own (escapes.md: "with an approver that answers once, the same out-of-tree read must
//! succeed"), while the agent's own domain stays as it was. Real `tyba run` sessions answered
//! through `tyba approve/deny`, as the test's user and as the unprivileged `TYBA_TEST_USER`;
//! effects checked from outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::PathBuf;

/// A directory beside the worktree with a secret, owned by the user under test.
fn outside(fx: &Fx) -> PathBuf {
    let o = fx.wt.parent().unwrap().join("O");
    std::fs::create_dir_all(&o).unwrap();
    std::fs::write(o.join("secret"), "topsecret\n").unwrap();
    give(&o, &fx.who);
    o
}

#[test]
fn approved_out_of_tree_read_and_write_succeed_and_the_agent_stays_confined() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain") else {
            continue;
        };
        let o = outside(&fx);
        let o = o.display();
        let script = format!(
            r#"cat {o}/secret; echo read=$?
cp README.md {o}/copied; echo write=$?
read -r l < {o}/secret; echo builtin=$?
sh -c 'cat {o}/secret > /dev/null; echo inner=$? >&2; exit 7'; echo status=$?
cat {o}/secret > /dev/null; echo again=$?"#
        );
        let s = fx.start(&[], &script);
        for (expect, answer) in [
            ("cat ", "approve"),
            ("cp README.md", "approve"),
            // The agent's own builtin read reaches the outside-files server (on by default):
            // asked as the agent's, denied.
            ("read ", "deny"),
            ("exit 7", "approve"),
            ("cat ", "deny"),
        ] {
            let (id, action) = fx.next_ask();
            assert!(action.contains(expect), "{who:?}: {action} / {expect}");
            let (code, _, err) = fx.cli(&[answer, &id]);
            assert_eq!(code, 0, "{who:?}: {err}");
        }
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        // The approved read and write happened, from their own domain.
        assert!(
            out.contains("topsecret") && out.contains("read=0"),
            "{who:?}: approved read: {out} / {err}"
        );
        assert!(
            out.contains("write=0"),
            "{who:?}: approved write: {out} / {err}"
        );
        let copied = fx.wt.parent().unwrap().join("O/copied");
        assert_eq!(
            std::fs::read_to_string(&copied).ok(),
            std::fs::read_to_string(fx.wt.join("README.md")).ok(),
            "{who:?}: the approved copy landed outside: {err}"
        );
        // The approved shell's children are not asked again and share its grants; its exit
        // status and its stderr reach the agent.
        assert!(
            out.contains("status=7") && err.contains("inner=0"),
            "{who:?}: status and stderr of the approved command: {out} / {err}"
        );
        // The agent's own domain did not widen: its builtin read of the same file fails, and
        // `once` was once.
        assert!(out.contains("builtin=1"), "{who:?}: {out} / {err}");
        assert!(out.contains("again=126"), "{who:?}: {out} / {err}");
        let answers: Vec<String> = fx
            .log_lines()
            .iter()
            .filter_map(|l| l["answer"].as_str().map(str::to_string))
            .collect();
        assert_eq!(answers, ["once", "once", "deny", "once", "deny"], "{who:?}");
    }
}

#[test]
fn approved_command_in_its_own_domain_gets_the_agents_signals_and_ends_with_them() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-sig") else {
            continue;
        };
        let o = outside(&fx);
        // `tail -f` runs until killed; the agent kills the process it started (the proxy),
        // the signal reaches the command in its own domain, and the agent sees it die of it.
        let script = format!(
            r#"tail -f {o}/secret > tail.out & p=$!
until [ -s tail.out ]; do :; done
kill -TERM $p; wait $p; echo tail=$?"#,
            o = o.display()
        );
        let s = fx.start(&[], &script);
        let (id, action) = fx.next_ask();
        assert!(action.contains("tail -f"), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("tail=143"), "{who:?}: {out} / {err}");
        assert_eq!(
            std::fs::read_to_string(fx.wt.join("tail.out")).unwrap(),
            "topsecret\n",
            "{who:?}"
        );
    }
}

/// Runs `script`, whose one ask is a line reading `O/secret` and ending with `exit 5`,
/// approves it, and checks the session ended with the command's status and output.
fn approve_the_secret_read(fx: &Fx, script: &str) {
    let who = &fx.who;
    let s = fx.start(&[], script);
    let (id, action) = fx.next_ask();
    assert!(action.contains("exit 5"), "{who:?}: {action}");
    let (code, _, err) = fx.cli(&["approve", &id]);
    assert_eq!(code, 0, "{who:?}: {err}");
    let (code, out, err) = s.finish();
    assert_eq!(code, 5, "{who:?}: {out} / {err}");
    assert!(out.contains("topsecret"), "{who:?}: {out} / {err}");
}

#[test]
fn approved_command_the_agent_execs_itself_gives_the_session_its_status() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-exec") else {
            continue;
        };
        let o = outside(&fx);
        // After a first command, the agent's own process execs the approved command: the
        // agent's process itself becomes the proxy, and the command's children (`cat`, red
        // for the very rule the command was approved for) share its domain without being
        // asked again.
        let script = format!(
            "ls > /dev/null; exec sh -c 'cat {}/secret; exit 5'",
            o.display()
        );
        approve_the_secret_read(&fx, &script);
        let asked = fx
            .log_lines()
            .iter()
            .filter(|l| l["answer"].is_string())
            .count();
        assert_eq!(asked, 1, "{who:?}: only the approved command was asked");
    }
}

#[test]
fn approved_command_runs_the_programs_its_line_names_not_ones_the_agent_planted() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-env") else {
            continue;
        };
        let o = outside(&fx);
        let o = o.display();
        // The agent plants a start-up file for bash and a `cat` of its own on PATH, then
        // asks for lines that only read outside: the runner must run the system's `ls` and
        // `cat` with neither, and may not write where the line only reads.
        let script = format!(
            r#"printf 'echo planted > {o}/by-bash-env; echo ran > {wt}/ran-bash-env\n' > .env.sh
mkdir -p bin; printf '#!/bin/sh\necho planted > {o}/by-path; echo ran > {wt}/ran-path\n' > bin/cat
BASH_ENV=$PWD/.env.sh bash -c "ls {o} > /dev/null"; echo ls=$?
PATH=$PWD/bin:$PATH bash -c "cat {o}/secret"; echo cat=$?"#,
            wt = fx.wt.display()
        );
        let s = fx.start(&["--autonomy", "high"], &script);
        for expect in ["ls ", "cat "] {
            let (id, action) = fx.next_ask();
            assert!(action.contains(expect), "{who:?}: {action}");
            let p = fx.pending(1);
            let reasons = p[0]["reasons"].to_string();
            assert!(
                reasons.contains("sandbox domain of its own that adds: read "),
                "{who:?}: the ask names the grant: {reasons}"
            );
            let (code, _, err) = fx.cli(&["approve", &id]);
            assert_eq!(code, 0, "{who:?}: {err}");
        }
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("ls=0"), "{who:?}: {out} / {err}");
        assert!(
            out.contains("topsecret") && out.contains("cat=0"),
            "{who:?}: the system's cat ran: {out} / {err}"
        );
        let outside_dir = fx.wt.parent().unwrap().join("O");
        for planted in ["by-bash-env", "by-path"] {
            assert!(
                !outside_dir.join(planted).exists(),
                "{who:?}: {planted} wrote with the approved command's grants: {out} / {err}"
            );
        }
        // The planted code did not run at all (it would have marked the worktree).
        for ran in ["ran-bash-env", "ran-path"] {
            assert!(
                !fx.wt.join(ran).exists(),
                "{who:?}: {ran}: planted code ran in the approved command: {out} / {err}"
            );
        }
    }
}

#[test]
fn killing_an_approved_command_ends_everything_it_started_even_outside_its_group() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-kill") else {
            continue;
        };
        let o = outside(&fx);
        let o = o.display();
        // The approved line leaves a `setsid` daemon writing outside (shell builtins only, so
        // it never execs again), then waits; the agent kills it (its proxy) with SIGKILL and
        // keeps working for a while.
        let script = format!(
            r#"sh -c "setsid sh -c 'i=0; while [ \$i -lt 5000000 ]; do echo x >> {o}/daemon; i=\$((i+1)); done' & exec sleep 60" & p=$!
until [ -s {o}/daemon ]; do :; done
kill -KILL $p; wait $p; echo killed=$? > killed
end=$((SECONDS + 4)); while [ $SECONDS -lt $end ]; do :; done"#
        );
        let s = fx.start(&[], &script);
        let (id, action) = fx.next_ask();
        assert!(action.contains("setsid"), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let daemon = fx.wt.parent().unwrap().join("O/daemon");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !fx.wt.join("killed").exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{who:?}: never killed"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Give the keeper a moment, then the daemon must have stopped while the session lives.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let size = std::fs::metadata(&daemon).unwrap().len();
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let later = std::fs::metadata(&daemon).unwrap().len();
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(fx.wt.join("killed"))
                .unwrap()
                .trim(),
            "killed=137",
            "{who:?}: {out} / {err}"
        );
        assert_eq!(
            size, later,
            "{who:?}: the daemon kept writing after its command was killed"
        );
    }
}

#[test]
fn approved_command_from_posix_spawn_leaves_the_parents_memory_as_it_was() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-spawn") else {
            continue;
        };
        let o = outside(&fx);
        // bash execs python (a command of the agent: asked); python's posix_spawn child
        // shares its memory (CLONE_VM|CLONE_VFORK) and execs `cat` from python's own bytes
        // object: a red descendant of the approved python, asked again.
        let script = format!(
            r#"exec python3 -c "
import os
p = b'/usr/bin/cat'
pid = os.posix_spawn(p, [b'cat', b'{o}/secret'], os.environ)
_, st = os.waitpid(pid, 0)
print('status', os.waitstatus_to_exitcode(st))
print('name', p.decode())
""#,
            o = o.display()
        );
        let s = fx.start(&[], &script);
        let (id, action) = fx.next_ask();
        assert!(action.contains("python3 -c"), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (id, action) = fx.next_ask();
        assert!(action.contains("cat "), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {out} / {err}");
        assert!(
            out.contains("topsecret") && out.contains("status 0"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            out.contains("name /usr/bin/cat"),
            "{who:?}: the parent's copy of the file name was restored: {out} / {err}"
        );
    }
}

#[test]
fn a_file_named_like_a_shell_is_shown_and_confined_as_the_program_it_is() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-fakeshell") else {
            continue;
        };
        let o = outside(&fx);
        // A `bash` of the agent's own in the worktree, run with a `-c` line that reads
        // outside: the ask must name that file, and approving it grants nothing outside.
        write_exe(
            &fx.wt.join("bash"),
            &format!(
                "#!/bin/sh\ncat {o}/secret > {wt}/leaked; echo ran > {wt}/ran\n",
                o = o.display(),
                wt = fx.wt.display()
            ),
        );
        give(&fx.wt, &fx.who);
        // TAR_OPTIONS makes tar run what it names; the runner never takes it.
        let script = format!(
            r#"(exec -a bash ./bash -c "cat {o}/secret"); echo fake=$?
TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=touch {wt}/ran-tar' bash -c "tar cf - README.md > {o}/backup.tar"; echo tar=$?"#,
            o = o.display(),
            wt = fx.wt.display()
        );
        let s = fx.start(&[], &script);
        let (id, action) = fx.next_ask();
        assert!(
            action.contains("/bash -c"),
            "{who:?}: the ask names the file run, not only its -c line: {action}"
        );
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        // The approval covers that exec only: the fake shell's own read outside is asked
        // again, naming the approved command; denied, it fails.
        let (id, action) = fx.next_ask();
        assert!(
            action.contains("cat ") && action.contains("secret"),
            "{who:?}: {action}"
        );
        let (code, _, err) = fx.cli(&["deny", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (id, action) = fx.next_ask();
        assert!(action.contains("tar cf"), "{who:?}: {action}");
        let (code, _, err) = fx.cli(&["approve", &id]);
        assert_eq!(code, 0, "{who:?}: {err}");
        let (code, out, err) = s.finish();
        assert_eq!(code, 0, "{who:?}: {err}");
        let leaked = std::fs::read_to_string(fx.wt.join("leaked")).unwrap_or_default();
        assert!(
            fx.wt.join("ran").exists() && !leaked.contains("topsecret"),
            "{who:?}: the fake shell ran in the agent's domain only: {leaked} / {out} / {err}"
        );
        assert!(out.contains("tar=0"), "{who:?}: {out} / {err}");
        assert!(
            fx.wt.parent().unwrap().join("O/backup.tar").exists(),
            "{who:?}: the approved write happened: {out} / {err}"
        );
        assert!(
            !fx.wt.join("ran-tar").exists(),
            "{who:?}: TAR_OPTIONS ran code in the approved command: {out} / {err}"
        );
    }
}

#[test]
fn approved_command_whose_proxy_starts_late_still_runs() {
    for who in whos() {
        let Some(fx) = setup(&who, "own-domain-late") else {
            continue;
        };
        let o = outside(&fx);
        // The asking process becomes the command's proxy, which says hello to the supervisor
        // before the command starts. On a loaded machine that exec can take seconds; the
        // supervisor waits for it as long as the process lives (test builds delay the hello
        // past the 10 s a supervisor once gave it).
        let script = format!(
            "TYBA_FAULT_PROXY_HELLO_MS=11000 sh -c 'cat {}/secret; exit 5'",
            o.display()
        );
        approve_the_secret_read(&fx, &script);
    }
}
