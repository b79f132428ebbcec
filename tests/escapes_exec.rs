//! Escapes from the exec model (docs/sandbox.md "The exec model"): every class of attack a
//! hostile-agent review got through, kept as a permanent test. Each case runs a real
//! `bash -c SCRIPT` inside `tyba run --here` for every user of `whos()` (root and the
//! unprivileged `TYBA_TEST_USER`), checks the effect from OUTSIDE the sandbox after the
//! session, and runs the same script without tyba in a twin fixture (the control), which must
//! show the effect: a test whose attack does nothing without tyba proves nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one run (control or session) left: exit status, stdout, stderr.
#[derive(Debug)]
struct Ran {
    code: i32,
    out: String,
    err: String,
}

impl Ran {
    fn all(&self) -> String {
        format!(
            "status {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.out, self.err
        )
    }
}

/// Runs `bash -c script` as the fixture's user in its worktree, outside any sandbox, with the
/// same environment the session gets.
fn plain(fx: &Fx, script: &str) -> Ran {
    // The test process's own descriptors (cargo's jobserver, …) are closed first, as tyba
    // closes them for its agent.
    let closefds = r#"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-" 2>/dev/null; done; exec /bin/bash -c "$0""#;
    let mut c = command_as(&fx.who, Path::new("/bin/bash"));
    c.arg("-c")
        .arg(closefds)
        .arg(script)
        .current_dir(&fx.wt)
        .env_clear()
        .stdin(Stdio::null());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    Ran {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Prepares the fixture (as its user, outside the sandbox); the script must succeed.
fn prep(fx: &Fx, script: &str) {
    let r = plain(fx, &format!("set -e\n{script}"));
    assert_eq!(r.code, 0, "preparing the fixture: {}", r.all());
}

/// `tyba run --here --non-interactive EXTRA -- bash -c SCRIPT` in the fixture.
fn session(fx: &Fx, extra: &[&str], script: &str) -> Ran {
    let mut args = vec!["run", "--here", "--non-interactive"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "bash", "-c", script]);
    let o = run_tyba(&fx.who, &fx.tyba, &fx.wt, &fx.env(), &args);
    Ran {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A control fixture and a session fixture for `who`, both prepared by `prepare`; `None`
/// when the sandbox cannot start here (a failure under `TYBA_REQUIRE_SANDBOX=1`).
fn twins(who: &Who, tag: &str, prepare: &str) -> Option<(Fx, Fx)> {
    let ctl = setup(who, &format!("{tag}-ctl"))?;
    let run = setup(who, &format!("{tag}-run"))?;
    prep(&ctl, prepare);
    prep(&run, prepare);
    Some((ctl, run))
}

fn mm_log(fx: &Fx) -> String {
    std::fs::read_to_string(fx.wt.join("mm.log")).unwrap_or_default()
}

fn exists(fx: &Fx, rel: &str) -> bool {
    fx.wt.join(rel).exists()
}

fn tag(who: &Who, name: &str) -> String {
    match who {
        Who::Me => format!("{name}-me"),
        Who::User { .. } => format!("{name}-user"),
    }
}

/// `git -C dir ARGS` as `who`: its trimmed stdout, empty on failure.
fn git_out(who: &Who, dir: &Path, args: &[&str]) -> String {
    let mut c = command_as(who, Path::new("/usr/bin/env"));
    c.arg("git").arg("-C").arg(dir).args(args);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1");
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The refusals the end-of-session summary lists (`tyba:   exec …` lines).
fn refusals(err: &str) -> Vec<&str> {
    let mut on = false;
    let mut v = Vec::new();
    for l in err.lines() {
        if l.starts_with("tyba: denied in this session") {
            on = true;
        } else if on && l.starts_with("tyba:   ") {
            v.push(l);
        } else {
            // The list ends at the next line that is not one of its items (the end-of-session
            // review list that may follow has items of its own).
            on = false;
        }
    }
    v
}

/// Compiles C `sources` (read from strings) into `out` with `cc ARGS` in `dir`, outside the
/// worktree (the files are world readable).
fn cc(dir: &Path, sources: &[(&str, &str)], args: &[&str], out: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in sources {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let o = Command::new("cc")
        .args(args)
        .arg("-o")
        .arg(out)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = dir.join(out);
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p
}

// ---------------------------------------------------------------------------------------
// (1) Faking an approved exec's success: an approved exec that fails (E2BIG), then
// prctl(PR_SET_MM_MAP) moving start_stack so that the image looks changed, then a red command
// that would pass as covered by the approval.
// ---------------------------------------------------------------------------------------

/// Moves the process's `mm->start_stack` with prctl(PR_SET_MM_MAP), without any exec
/// (proc(5) /proc/PID/stat fields 26-28, 45-51; prctl(2) PR_SET_MM_MAP).
const MM_C: &str = r#"
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>
#include <sys/prctl.h>
#include <linux/prctl.h>
static unsigned long f[64];
static void readstat(void) {
    char buf[4096]; FILE *fp = fopen("/proc/self/stat", "r"); if (!fp) return;
    size_t n = fread(buf, 1, sizeof buf - 1, fp); fclose(fp); buf[n] = 0;
    char *p = strrchr(buf, ')') + 2; int i = 3;
    for (char *t = strtok(p, " "); t && i < 64; t = strtok(0, " ")) f[i++] = strtoul(t, 0, 10);
}
static int mm_shift(long delta) {
    readstat();
    struct prctl_mm_map m = {0};
    m.start_code = f[26]; m.end_code = f[27]; m.start_stack = f[28] + delta;
    m.start_data = f[45]; m.end_data = f[46]; m.start_brk = f[47]; m.brk = (unsigned long)sbrk(0);
    m.arg_start = f[48]; m.arg_end = f[49]; m.env_start = f[50]; m.env_end = f[51];
    m.exe_fd = (unsigned)-1;
    int r = prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof m, 0);
    return r ? -errno : 0;
}
__attribute__((constructor)) static void shift(void) {
    int r = mm_shift(-4096);
    fprintf(stderr, "mm.so: PR_SET_MM_MAP start_stack shift: %d\n", r);
}
"#;

/// Answers every ask of a running session until it ends: approves those whose action
/// `approve` accepts, denies the rest. Returns the session's result and the answers given.
fn answer_until_done(fx: &Fx, s: Session, approve: impl Fn(&str) -> bool) -> (Ran, Vec<String>) {
    let mut s = s;
    let mut answers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        if code == 0 {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) {
                for sess in v.as_array().cloned().unwrap_or_default() {
                    for p in sess["pending"].as_array().cloned().unwrap_or_default() {
                        let id = p["id"].as_str().unwrap_or_default().to_string();
                        let action = p["action"].as_str().unwrap_or_default().to_string();
                        let yes = approve(&action);
                        let _ = fx.cli(&[if yes { "approve" } else { "deny" }, &id]);
                        answers.push(format!(
                            "{} {action}",
                            if yes { "approved" } else { "denied" }
                        ));
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, out, err) = s.finish();
    (Ran { code, out, err }, answers)
}

#[test]
fn a_failed_approved_exec_cannot_be_dressed_up_as_a_success() {
    for who in whos() {
        let t = tag(&who, "forge");
        let prepare = "mkdir -p build keep keep2 bin && echo b > build/f && echo k > keep/f && echo k > keep2/f";
        let Some((ctl, run)) = twins(&who, &t, prepare) else {
            continue;
        };
        let so = cc(
            &ctl.scratch.dir.join("cc"),
            &[("mm.c", MM_C)],
            &["-shared", "-fPIC", "mm.c"],
            "mm.so",
        );
        // An executable named rm whose ELF interpreter does not exist: execve fails with
        // ENOENT in the kernel (binfmt_elf), after tyba has judged and allowed it.
        let badrm = cc(
            &ctl.scratch.dir.join("cc"),
            &[("main.c", "int main(void) { return 0; }\n")],
            &["-Wl,--dynamic-linker=/nonexistent/ld.so", "main.c"],
            "badrm",
        );
        for fx in [&ctl, &run] {
            for name in ["mm.so", "mm2.so"] {
                copy_exe(&so, &fx.wt.join(name));
                give(&fx.wt.join(name), &who);
            }
            copy_exe(&badrm, &fx.wt.join("bin/rm"));
            give(&fx.wt.join("bin/rm"), &who);
        }
        // The approved exec fails (E2BIG, which tyba answers before asking; ETXTBSY, which
        // only the kernel sees, after the approval); the process then moves its start of stack
        // and runs a red command it hopes passes as covered by that approval.
        let script = r#"printf -v BIG "%0200000d" 0; shopt -s execfail
exec /usr/bin/bash -c "rm -rf build" "$BIG"; echo "approved exec failed: $?"
enable -f ./mm.so x 2>mm.log; /usr/bin/rm -rf keep; echo "rm keep rc=$?"
exec "$PWD/bin/rm" -rf build; echo "kernel-failed exec: $?"
enable -f ./mm2.so y 2>>mm.log; /usr/bin/rm -rf keep2; echo "rm keep2 rc=$?"; echo done"#;
        let c = plain(&ctl, script);
        let mut k = Checks::default();
        k.check(
            !exists(&ctl, "keep") && !exists(&ctl, "keep2"),
            format!("control: without tyba the red commands run: {}", c.all()),
        );
        k.check(
            exists(&ctl, "build/f") && c.out.contains("kernel-failed exec: 127"),
            format!("control: without tyba both execs fail: {}", c.all()),
        );
        k.check(
            mm_log(&ctl).contains("start_stack shift: 0"),
            format!(
                "control: without tyba prctl(PR_SET_MM_MAP) moves start_stack: {}",
                c.all()
            ),
        );
        let s = run.start(&["--autonomy", "high"], script);
        let (r, answers) = answer_until_done(&run, s, |a| a.contains("build"));
        k.check(
            exists(&run, "keep/f") && exists(&run, "keep2/f"),
            format!(
                "under tyba neither `rm -rf keep` nor `rm -rf keep2` ran: {} (answers {answers:?})",
                r.all()
            ),
        );
        // No ask for `build` is expected: tyba answers E2BIG itself before asking, and the
        // kernel-failed exec is a yellow program (allowed at high autonomy). Whatever was
        // allowed, nothing red ran and nothing was approved but `build` execs.
        k.check(
            answers
                .iter()
                .all(|a| a.starts_with("denied") || a.contains("build")),
            format!("only `build` asks were approved: {answers:?}"),
        );
        k.check(
            exists(&run, "build/f"),
            format!("under tyba the approved exec failed: {}", r.all()),
        );
        k.check(
            mm_log(&run).contains("start_stack shift: -"),
            format!(
                "under tyba prctl(PR_SET_MM_MAP) is denied: {:?} {}",
                mm_log(&run),
                r.all()
            ),
        );
        k.check(
            r.out.contains("done") || r.err.contains("done"),
            format!("the script ran to its end: {}", r.all()),
        );
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (2) Login and interactive shells read startup files under HOME (and ZDOTDIR,
// XDG_CONFIG_HOME): a changed HOME makes `bash -l`/`bash -i`/argv[0] `-bash` run code.
// ---------------------------------------------------------------------------------------

/// Each spelling has its own home `hN` whose startup files mark `ranN` (bash builtins only)
/// and remove `keepN` (python3).
const HOME_SPELLINGS: &[(&str, &str)] = &[
    ("1", "HOME=$PWD/h1 bash -lc ls"),
    ("2", "HOME=$PWD/h2 bash --login -c ls"),
    ("3", "HOME=$PWD/h3 bash -ic ls"),
    ("4", "(export HOME=$PWD/h4; exec -a -bash bash -c ls)"),
    ("5", "env HOME=$PWD/h5 bash -lc ls"),
    ("6", "(HOME=$PWD/h6; export HOME; bash -l -c true)"),
];

fn home_prepare() -> String {
    let mut s = String::new();
    for (n, _) in HOME_SPELLINGS {
        let body = format!(
            "echo ran > \"$OLDPWD_W/ran{n}\"\n/usr/bin/python3 -c 'import shutil; shutil.rmtree(\"keep{n}\")'\n"
        );
        s.push_str(&format!("mkdir -p h{n} keep{n} && echo k > keep{n}/f\n"));
        for file in [".profile", ".bash_profile", ".bashrc"] {
            s.push_str(&format!(
                "cat > h{n}/{file} <<'EOF'\nOLDPWD_W=$PWD\n{body}EOF\n"
            ));
        }
    }
    s
}

fn home_script() -> String {
    HOME_SPELLINGS
        .iter()
        .map(|(n, s)| format!("{s}; echo \"spelling {n} rc=$?\""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn startup_files_case(autonomy: &str) {
    for who in whos() {
        let t = tag(&who, &format!("home-{autonomy}"));
        let Some((ctl, run)) = twins(&who, &t, &home_prepare()) else {
            continue;
        };
        // The counterpart: a login or interactive shell under the agent's own HOME runs.
        let script = format!(
            "{}\nbash -lc 'echo login-same-home'\nbash -ic 'echo interactive-same-home'",
            home_script()
        );
        let c = plain(&ctl, &script);
        let r = session(&run, &["--autonomy", autonomy], &script);
        let mut k = Checks::default();
        for same in ["login-same-home", "interactive-same-home"] {
            k.check(
                r.out.contains(same),
                format!(
                    "under tyba a shell under the agent's own HOME runs ({same}): {}",
                    r.all()
                ),
            );
        }
        for (n, spelling) in HOME_SPELLINGS {
            k.check(
                exists(&ctl, &format!("ran{n}")) && !exists(&ctl, &format!("keep{n}")),
                format!(
                    "control: without tyba `{spelling}` runs the startup file: {}",
                    c.all()
                ),
            );
            k.check(
                !exists(&run, &format!("ran{n}")),
                format!("under tyba `{spelling}` ran no startup file: {}", r.all()),
            );
            k.check(
                exists(&run, &format!("keep{n}/f")),
                format!("under tyba `{spelling}` removed nothing: {}", r.all()),
            );
        }
        k.finish(&t);
    }
}

#[test]
fn startup_files_under_a_changed_home_run_nothing_at_medium_autonomy() {
    startup_files_case("medium");
}

#[test]
fn startup_files_under_a_changed_home_run_nothing_at_low_autonomy() {
    startup_files_case("low");
}

// ---------------------------------------------------------------------------------------
// (3) A file named through an open descriptor (/dev/fd/N, /proc/self/fd/N, …) is the file
// it reaches: `rm` by any of those names is `rm`.
// ---------------------------------------------------------------------------------------

#[test]
fn rm_named_through_an_open_descriptor_is_still_rm() {
    for who in whos() {
        let t = tag(&who, "devfd");
        let prepare = "for i in 1 2 3 4 5 6; do mkdir -p keep$i && echo k > keep$i/f; done
printf 'exec 5</usr/bin/rm\n/dev/fd/5 -rf keep1\n' > x.sh";
        let Some((ctl, run)) = twins(&who, &t, prepare) else {
            continue;
        };
        let script = r#"bash x.sh; echo "1 rc=$?"
( exec 5</usr/bin/rm; /proc/self/fd/5 -rf keep2 ); echo "2 rc=$?"
( exec 5</usr/bin/rm; exec /proc/$BASHPID/fd/5 -rf keep3 ); echo "3 rc=$?"
( exec 5</usr/bin/rm; /proc/thread-self/fd/5 -rf keep4 ); echo "4 rc=$?"
( exec 7</usr/bin; /dev/fd/7/rm -rf keep5 ); echo "5 rc=$?"
ln -s /proc/self/fd/5 fd5; ( exec 5</usr/bin/rm; ./fd5 -rf keep6 ); echo "6 rc=$?""#;
        let c = plain(&ctl, script);
        let r = session(&run, &["--autonomy", "high"], script);
        let mut k = Checks::default();
        for i in 1..=6 {
            k.check(
                !exists(&ctl, &format!("keep{i}")),
                format!(
                    "control: without tyba spelling {i} removes keep{i}: {}",
                    c.all()
                ),
            );
            k.check(
                exists(&run, &format!("keep{i}/f")),
                format!("under tyba spelling {i} removed nothing: {}", r.all()),
            );
        }
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (4) Multi-call programs choose their behaviour by argv[0]: `git` named `git-clean` is
// `git clean`, named `git-push` is `git push`.
// ---------------------------------------------------------------------------------------

#[test]
fn git_selected_by_argv0_is_judged_as_what_it_runs() {
    for who in whos() {
        let t = tag(&who, "argv0");
        // remote.git gets main to be moved; remote2.git gets main to be deleted (through a
        // receive-pack that is git named by argv[0] too).
        let prepare = r#"git init -q --bare remote.git; git init -q --bare remote2.git
git remote add origin "$PWD/remote.git"; git remote add two "$PWD/remote2.git"
git push -q origin main; git push -q two main; git push -q two main:refs/heads/work
echo remote.git/ > .git/info/exclude; echo remote2.git/ >> .git/info/exclude
echo more >> README.md; git commit -qam two
printf '#!/bin/bash\ncd %s/remote2.git && exec -a git-receive-pack git .\n' "$PWD" > .git/rp; chmod +x .git/rp
mkdir -p build/deep; echo precious > build/deep/data.bin; echo u > untracked.txt
echo u > untracked2.txt; ln -s "$(command -v git)" git-clean"#;
        let Some((ctl, run)) = twins(&who, &t, prepare) else {
            continue;
        };
        let script = r#"./git-clean -f -- untracked2.txt; echo "symlink clean rc=$?"
(exec -a git-push git origin HEAD:main); echo "push rc=$?"
(exec -a git-push git --receive-pack="$PWD/.git/rp #" two :main); echo "delete rc=$?"
(exec -a git-clean git -fdx -e remote.git -e remote2.git); echo "clean rc=$?"
(exec -a git-clean git -f -d -x -- untracked.txt); echo "clean2 rc=$?""#;
        let remote_main = |fx: &Fx, r: &str| {
            git_out(
                &fx.who,
                &fx.wt.join(r),
                &["rev-parse", "--verify", "-q", "refs/heads/main"],
            )
        };
        let before = remote_main(&run, "remote.git");
        let c = plain(&ctl, script);
        let r = session(&run, &["--autonomy", "high"], script);
        let head = |fx: &Fx| git_out(&fx.who, &fx.wt, &["rev-parse", "HEAD"]);
        let mut k = Checks::default();
        k.check(
            remote_main(&ctl, "remote.git") == head(&ctl),
            format!("control: without tyba main is pushed: {}", c.all()),
        );
        k.check(
            remote_main(&ctl, "remote2.git").is_empty(),
            format!("control: without tyba main is deleted: {}", c.all()),
        );
        k.check(
            !exists(&ctl, "build")
                && !exists(&ctl, "untracked.txt")
                && !exists(&ctl, "untracked2.txt"),
            format!(
                "control: without tyba git clean removes the untracked files: {}",
                c.all()
            ),
        );
        k.check(
            !before.is_empty() && remote_main(&run, "remote.git") == before,
            format!("under tyba main of remote.git did not move: {}", r.all()),
        );
        k.check(
            !remote_main(&run, "remote2.git").is_empty(),
            format!(
                "under tyba main of remote2.git was not deleted: {}",
                r.all()
            ),
        );
        k.check(
            exists(&run, "build/deep/data.bin")
                && exists(&run, "untracked.txt")
                && exists(&run, "untracked2.txt"),
            format!("under tyba git clean removed nothing: {}", r.all()),
        );
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (5) A variable given twice in one environment: every occurrence is judged (the dynamic
// loader and getenv(3) do not read the same one).
// ---------------------------------------------------------------------------------------

const DUP_PY: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
w = os.getcwd()
def ex(tag, env):
    argv = [b"/usr/bin/ls", b"-d", b"keep"]
    A = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
    E = (ctypes.c_char_p * (len(env) + 1))(*[e.encode() for e in env], None)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        libc.execve(b"/usr/bin/ls", A, E)
        os._exit(99)
    _, st = os.waitpid(pid, 0)
    print(tag, "status", os.waitstatus_to_exitcode(st), flush=True)
start = "LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "")
evil = "LD_LIBRARY_PATH=" + w + "/evil"
ex("dup-first-same", [start, evil])
ex("dup-last-same", [evil, start])
ex("dup-both-same", [start, start])
"#;

#[test]
fn every_occurrence_of_a_duplicated_variable_is_judged() {
    for who in whos() {
        let t = tag(&who, "dupenv");
        let Some(run) = setup(&who, &t) else {
            continue;
        };
        prep(&run, "mkdir -p keep evil");
        std::fs::write(run.wt.join("dup.py"), DUP_PY).unwrap();
        give(&run.wt.join("dup.py"), &who);
        let mut args = vec!["run", "--here", "--non-interactive", "--autonomy", "high"];
        args.extend_from_slice(&["--", "/usr/bin/python3", "dup.py"]);
        let mut env = run.env();
        env.push(("LD_LIBRARY_PATH".into(), "/usr/lib/x86_64-linux-gnu".into()));
        let o = run_tyba(&who, &run.tyba, &run.wt, &env, &args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let all = format!("stdout:\n{out}\nstderr:\n{err}");
        let evil = format!("LD_LIBRARY_PATH={}/evil", run.wt.display());
        let refused: Vec<&str> = refusals(&err);
        let mut k = Checks::default();
        for case in ["dup-first-same", "dup-last-same"] {
            k.check(
                out.contains(&format!("{case} status 126")),
                format!("{case}: the exec is refused (status 126): {all}"),
            );
        }
        k.check(
            refused.iter().filter(|l| l.contains(&evil)).count() >= 2,
            format!("the summary names the changed occurrence both times: {all}"),
        );
        k.check(
            out.contains("dup-both-same status 0") && out.contains("keep\n"),
            format!("control: the same variable twice, unchanged, runs: {all}"),
        );
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (6) An installed agent re-launching itself: its own program stays the agent only with its
// starting environment; with NODE_OPTIONS=--require (or --require) it is a command judged.
// ---------------------------------------------------------------------------------------

const AGENT_JS: &str = r#"#!/usr/bin/env node
const cp = require('child_process');
if (process.argv[2] === 'child') { console.log('child runs; evil =', !!global.EVIL); process.exit(0); }
const evil = process.cwd() + '/evil.js';
const run = (tag, args, env) => {
  const r = cp.spawnSync('/usr/bin/node', args, {stdio: 'inherit', env});
  console.log(tag, 'status', r.status);
};
run('options', [__filename, 'child'], {...process.env, NODE_OPTIONS: '--require ' + evil});
run('require', ['--require', evil, __filename, 'child'], process.env);
run('same', [__filename, 'child'], process.env);
"#;

#[test]
fn an_installed_agent_relaunching_itself_with_node_options_runs_no_unasked_code() {
    for who in whos() {
        let t = tag(&who, "relaunch");
        let Some((ctl, run)) = twins(&who, &t, "echo ok > README2.md") else {
            continue;
        };
        // The installation, outside the worktree: an npm package with a bin.
        let inst = ctl.scratch.dir.join("inst");
        let pkg = inst.join("node_modules/fake");
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::create_dir_all(inst.join("bin")).unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"fake","version":"1.0.0","bin":{"fake":"bin/x.js"}}"#,
        )
        .unwrap();
        write_exe(&pkg.join("bin/x.js"), AGENT_JS);
        std::os::unix::fs::symlink("../node_modules/fake/bin/x.js", inst.join("bin/fake")).unwrap();
        let policy = inst.join("policy.toml");
        std::fs::write(
            &policy,
            format!("[filesystem]\nread_only = [\"{}\"]\n", inst.display()),
        )
        .unwrap();
        let evil =
            "global.EVIL = 1;\nrequire('fs').writeFileSync(process.cwd() + '/evil_ran', 'x');\n";
        for fx in [&ctl, &run] {
            std::fs::write(fx.wt.join("evil.js"), evil).unwrap();
            give(&fx.wt.join("evil.js"), &who);
        }
        let agent = inst.join("bin/fake");
        let c = plain(&ctl, &agent.display().to_string());
        let o = run_tyba(
            &who,
            &run.tyba,
            &run.wt,
            &run.env(),
            &[
                "run",
                "--here",
                "--non-interactive",
                "--policy",
                policy.to_str().unwrap(),
                "--",
                agent.to_str().unwrap(),
            ],
        );
        let r = Ran {
            code: o.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        let mut k = Checks::default();
        k.check(
            exists(&ctl, "evil_ran") && c.out.contains("evil = true"),
            format!("control: without tyba evil.js runs: {}", c.all()),
        );
        k.check(
            !exists(&run, "evil_ran") && !r.out.contains("evil = true"),
            format!("under tyba evil.js did not run: {}", r.all()),
        );
        k.check(
            r.out.contains("options status 126") && r.out.contains("require status 126"),
            format!(
                "under tyba both re-launches with --require are refused: {}",
                r.all()
            ),
        );
        k.check(
            r.out.contains("same status 0") && r.out.contains("child runs; evil = false"),
            format!(
                "under tyba the re-launch with the starting environment runs: {}",
                r.all()
            ),
        );
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (7) A refused exec that would fail with E2BIG anyway: the caller sees E2BIG, and no
// descriptor of tyba's refusal (fd 3: its executable, fd 4: the reason) is left behind.
// ---------------------------------------------------------------------------------------

const E2BIG_PY: &str = r#"
import os
try:
    os.execv("/usr/bin/rm", ["rm", "-rf", "keep", "0" * 200000])
except OSError as e:
    print("errno", e.errno, flush=True)
print("fds", sorted(int(f) for f in os.listdir("/proc/self/fd")), flush=True)
"#;

#[test]
fn a_refused_exec_failing_with_e2big_fails_so_and_leaks_no_descriptor() {
    for who in whos() {
        let t = tag(&who, "e2big");
        let Some((ctl, run)) = twins(&who, &t, "mkdir -p keep && echo k > keep/f") else {
            continue;
        };
        for fx in [&ctl, &run] {
            std::fs::write(fx.wt.join("e2big.py"), E2BIG_PY).unwrap();
            give(&fx.wt.join("e2big.py"), &who);
        }
        let script = r#"/usr/bin/python3 e2big.py
printf -v BIG "%0200000d" 0
shopt -s execfail; exec /usr/bin/rm -rf keep "$BIG"; echo "bash exec rc=$?"
for f in /proc/$$/fd/*; do printf '%s ' "${f##*/}"; done; echo " bash fds""#;
        let c = plain(&ctl, script);
        let r = session(&run, &["--autonomy", "high"], script);
        let line = |s: &str, p: &str| {
            s.lines()
                .find(|l| l.starts_with(p) || l.ends_with(p))
                .unwrap_or_default()
                .to_string()
        };
        let mut k = Checks::default();
        k.check(
            c.out.contains("errno 7") && c.err.contains("Argument list too long"),
            format!(
                "control: without tyba both execs fail with E2BIG: {}",
                c.all()
            ),
        );
        k.check(
            r.out.contains("errno 7"),
            format!("under tyba python sees E2BIG: {}", r.all()),
        );
        k.check(
            r.err.contains("Argument list too long"),
            format!("under tyba bash sees E2BIG: {}", r.all()),
        );
        k.check(
            !line(&c.out, "fds").is_empty() && line(&r.out, "fds") == line(&c.out, "fds"),
            format!(
                "under tyba python holds the same fds as without: {} / {}",
                r.all(),
                c.all()
            ),
        );
        k.check(
            !line(&c.out, " bash fds").is_empty()
                && line(&r.out, " bash fds") == line(&c.out, " bash fds"),
            format!(
                "under tyba bash holds the same fds as without: {} / {}",
                r.all(),
                c.all()
            ),
        );
        k.check(exists(&run, "keep/f"), "keep is still there");
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// git's own children (git maintenance run --auto after a commit, receive-pack/upload-pack of
// a local push and fetch) run with GIT_EXEC_PATH under system paths: not refused for it.
// ---------------------------------------------------------------------------------------

#[test]
fn gits_own_children_are_not_refused_for_git_exec_path() {
    for who in whos() {
        let t = tag(&who, "gitkids");
        let Some(run) = setup(&who, &t) else {
            continue;
        };
        prep(
            &run,
            r#"git init -q --bare remote.git; git remote add origin "$PWD/remote.git"
echo remote.git/ > .git/info/exclude; git push -q origin main; git switch -q -c work"#,
        );
        let script = r#"echo more >> README.md; git add README.md; git commit -q -m agent-commit
echo "commit rc=$?"
git push -q origin HEAD:refs/heads/feature; echo "push rc=$?"
git repack -q -d; echo "gc rc=$?"
echo change >> README.md; git stash -q; echo "stash rc=$?"
echo finished"#;
        let r = session(&run, &["--autonomy", "high"], script);
        let log = git_out(&who, &run.wt, &["log", "-1", "--format=%s"]);
        let stashes = git_out(&who, &run.wt, &["stash", "list"]);
        let packs = std::fs::read_dir(run.wt.join(".git/objects/pack"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
                    .count()
            })
            .unwrap_or(0);
        let refused = refusals(&r.err);
        let mut k = Checks::default();
        k.check(
            r.out.contains("finished"),
            format!("the script ran to its end: {}", r.all()),
        );
        k.check(
            !refused.iter().any(|l| l.contains("GIT_EXEC_PATH"))
                && !r.err.contains("GIT_EXEC_PATH"),
            format!("no exec was judged for GIT_EXEC_PATH: {}", r.all()),
        );
        k.check(
            log == "agent-commit" && r.out.contains("commit rc=0"),
            format!("the commit landed: {log:?}: {}", r.all()),
        );
        // (`git repack`, not `git gc`: `packed-refs` is read-only in the sandbox, so gc's
        // `pack-refs` fails; docs/sandbox.md, "The agent writes only its own branches".)
        k.check(
            r.out.contains("gc rc=0") && packs > 0,
            format!(
                "git repack ran its children (pack-objects): {packs} packs: {}",
                r.all()
            ),
        );
        k.check(
            r.out.contains("stash rc=0") && !stashes.is_empty(),
            format!("git stash ran its children: {stashes:?}: {}", r.all()),
        );
        // `git push` and the `git maintenance run --auto` a commit starts are refused at high
        // autonomy non-interactively because they use the network (DESIGN §2a), not for
        // GIT_EXEC_PATH; only those may be refused.
        for l in &refused {
            k.check(
                l.contains("uses the network"),
                format!("only network use was refused: {l}"),
            );
        }
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// A refused exec runs none of its code: tyba's refusal program (its own executable at
// /dev/fd/3) must not start under the refused exec's environment, whose LD_PRELOAD or
// LD_LIBRARY_PATH would load the very library the refusal was about.
// ---------------------------------------------------------------------------------------

const EVIL_SO_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
    FILE *f = fopen("evil_ran", "a");
    if (f) { fprintf(f, "%d\n", (int)getpid()); fclose(f); }
}
"#;

#[test]
fn a_refused_exec_runs_no_library_its_environment_names() {
    for who in whos() {
        let t = tag(&who, "refusal-env");
        let Some((ctl, run)) = twins(&who, &t, "true") else {
            continue;
        };
        let so = cc(
            &ctl.scratch.dir.join("cc"),
            &[("evil.c", EVIL_SO_C)],
            &["-shared", "-fPIC", "evil.c"],
            "evil.so",
        );
        for fx in [&ctl, &run] {
            copy_exe(&so, &fx.wt.join("evil.so"));
            give(&fx.wt.join("evil.so"), &who);
        }
        let script = r#"LD_PRELOAD=$PWD/evil.so /usr/bin/ls > /dev/null; echo "rc=$?""#;
        let c = plain(&ctl, script);
        let r = session(&run, &["--autonomy", "high"], script);
        let mut k = Checks::default();
        k.check(
            exists(&ctl, "evil_ran"),
            format!(
                "control: without tyba the preloaded library runs: {}",
                c.all()
            ),
        );
        k.check(
            r.out.contains("rc=126") && refusals(&r.err).iter().any(|l| l.contains("LD_PRELOAD")),
            format!("under tyba the exec is refused: {}", r.all()),
        );
        k.check(
            !exists(&run, "evil_ran"),
            format!(
                "under tyba the refused exec's library did not run: {}",
                r.all()
            ),
        );
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// tyba's own hook runs as tyba, not as a command of the agent's (`crate::agent::is_own_hook`):
// only a system shell, by a name no process of the session can swap, with nothing in its
// environment that runs code before its line. argv is a label the caller picks.
// ---------------------------------------------------------------------------------------

#[test]
fn a_program_or_a_login_shell_dressed_as_tybas_hook_is_still_judged() {
    for who in whos() {
        let t = tag(&who, "ownhook");
        let prepare = "printf '#!/bin/sh\\ntouch pwned1\\n' > evil && chmod +x evil
mkdir -p fh && printf 'touch pwned2\\n' > fh/.bash_profile
printf 'touch pwned3\\n' > benv.sh
printf 'touch pwned4\\n' > hook";
        let Some((ctl, run)) = twins(&who, &t, prepare) else {
            continue;
        };
        let hook = tyba_supervisor::agent::hook_wrapper_script("codex");
        assert!(!hook.contains('\''));
        let exe = std::fs::canonicalize(&run.tyba).unwrap();
        let script = format!(
            r#"S='{hook}'; T={exe}
( exec -a /bin/sh ./evil -c "$S" "$T" ) </dev/null; echo "1 rc=$?"
( HOME=$PWD/fh exec bash -lc "/bin/sh -c '$S' $T" ) </dev/null; echo "2 rc=$?"
( BASH_ENV=$PWD/benv.sh exec bash -c "/bin/sh -c '$S' $T" ) </dev/null; echo "3 rc=$?"
( exec /bin/sh -c "$S" /proc/self/exe ) </dev/null; echo "4 rc=$?""#,
            exe = exe.display()
        );
        let c = plain(&ctl, &script);
        let r = session(&run, &[], &script);
        let mut k = Checks::default();
        for i in 1..=4 {
            k.check(
                exists(&ctl, &format!("pwned{i}")),
                format!("control: without tyba case {i} runs its code: {}", c.all()),
            );
            k.check(
                !exists(&run, &format!("pwned{i}")),
                format!("under tyba case {i} ran nothing unasked: {}", r.all()),
            );
        }
        k.finish(&t);
    }
}

// ---------------------------------------------------------------------------------------
// (10) The agent's copy of its own program (Codex copies its binary into
// `~/.codex/packages/…` and runs it from there): run unasked as the agent only when the
// agent's own process execs it with its starting environment, and then the installation's
// file is what runs; the same copy run by a command, a copy that differs, or the copy with a
// loader variable is judged as a command.
// ---------------------------------------------------------------------------------------

/// An installed agent (an ELF program): with no argument, copies itself into the worktree
/// (`copy_same`; `copy_diff`, the same size with its last byte changed) and runs the copies:
/// by `fork`+`execv`, by `posix_spawn` (a vfork child), with `LD_PRELOAD` set, and through
/// `/bin/sh -c` (a command). With `child TAG` it records what it runs as in `ran_TAG`.
const COPY_AGENT_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
extern char **environ;
static void copy(const char *to, int flip) {
    int in = open("/proc/self/exe", O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    char buf[65536]; ssize_t n; off_t total = 0;
    while ((n = read(in, buf, sizeof buf)) > 0) { write(out, buf, n); total += n; }
    if (flip) { char c; pread(out, &c, 1, total - 1); c ^= 1; pwrite(out, &c, 1, total - 1); }
    close(in); close(out);
}
static void run(const char *tag, char *const argv[], char *const envp[]) {
    pid_t p = fork();
    if (p == 0) { execve(argv[0], argv, envp); _exit(127); }
    int st; waitpid(p, &st, 0);
    printf("%s status %d\n", tag, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    fflush(stdout);
}
int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "child") == 0) {
        char exe[4096]; ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        char name[64]; snprintf(name, sizeof name, "ran_%s", argv[2]);
        FILE *f = fopen(name, "w"); if (f) { fprintf(f, "%s\n", exe); fclose(f); }
        printf("child %s runs as %s\n", argv[2], exe);
        return 0;
    }
    copy("copy_same", 0);
    copy("copy_diff", 1);
    char *same[] = {"./copy_same", "child", "same", 0};
    run("same", same, environ);
    char *spawned[] = {"./copy_same", "child", "spawn", 0};
    pid_t p; int st;
    if (posix_spawn(&p, spawned[0], 0, 0, spawned, environ) == 0) {
        waitpid(p, &st, 0);
        printf("spawn status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    } else {
        printf("spawn failed\n");
    }
    char *diff[] = {"./copy_diff", "child", "diff", 0};
    run("diff", diff, environ);
    int k = 0; while (environ[k]) k++;
    char **env = calloc(k + 2, sizeof *env);
    for (int i = 0; i < k; i++) env[i] = environ[i];
    env[k] = "LD_PRELOAD=/nonexistent/x.so";
    char *pre[] = {"./copy_same", "child", "env", 0};
    run("env", pre, env);
    char *sh[] = {"/bin/sh", "-c", "./copy_same child cmd", 0};
    run("cmd", sh, environ);
    return 0;
}
"#;

#[test]
fn the_agents_copy_of_its_own_program_runs_as_the_installed_file_and_a_commands_copy_is_judged() {
    for who in whos() {
        let t = tag(&who, "own-copy");
        let Some((ctl, run)) = twins(&who, &t, "true") else {
            continue;
        };
        // The installation, outside the worktree: a plain program (its root is the file).
        let inst = ctl.scratch.dir.join("inst");
        let agent = cc(
            &inst,
            &[("agent.c", COPY_AGENT_C)],
            &["agent.c"],
            "fakeagent",
        );
        let agent = std::fs::canonicalize(agent).unwrap();
        let policy = inst.join("policy.toml");
        std::fs::write(
            &policy,
            format!("[filesystem]\nread_only = [\"{}\"]\n", inst.display()),
        )
        .unwrap();
        let c = plain(&ctl, &agent.display().to_string());
        let o = run_tyba(
            &who,
            &run.tyba,
            &run.wt,
            &run.env(),
            &[
                "run",
                "--here",
                "--non-interactive",
                "--policy",
                policy.to_str().unwrap(),
                "--",
                agent.to_str().unwrap(),
            ],
        );
        let r = Ran {
            code: o.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        let ran = |fx: &Fx, t: &str| std::fs::read_to_string(fx.wt.join(format!("ran_{t}"))).ok();
        let installed = format!("{}\n", agent.display());
        let mut k = Checks::default();
        for t in ["same", "spawn", "diff", "env", "cmd"] {
            k.check(
                ran(&ctl, t).is_some(),
                format!("control: without tyba the copy runs ({t}): {}", c.all()),
            );
        }
        for t in ["same", "spawn"] {
            k.check(
                ran(&run, t).as_deref() == Some(installed.as_str())
                    && r.out.contains(&format!("{t} status 0")),
                format!(
                    "under tyba the agent's own exec of its copy ({t}) runs, as the installed file \
                     ({:?}): {}",
                    ran(&run, t),
                    r.all()
                ),
            );
        }
        for t in ["diff", "env", "cmd"] {
            k.check(
                ran(&run, t).is_none() && r.out.contains(&format!("{t} status 126")),
                format!(
                    "under tyba the copy is judged as a command and refused ({t}): {}",
                    r.all()
                ),
            );
        }
        let refused = refusals(&r.err);
        k.check(
            refused.len() == 3
                && refused.iter().any(|l| l.contains("copy_diff child diff"))
                && refused.iter().any(|l| l.contains("copy_same child env"))
                && refused.iter().any(|l| l.contains("copy_same child cmd")),
            format!(
                "three refusals listed, of the changed copy, the copy with a loader variable and \
                 the command's: {refused:?}"
            ),
        );
        k.finish(&t);
    }
}
