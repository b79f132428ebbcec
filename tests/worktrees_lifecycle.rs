//! The worktree lifecycle on real sessions and real git (issue 14): an unchanged session's
//! worktree and branch are removed at its end; `tyba worktrees` lists running, changed,
//! merged and empty ones; `tyba clean` removes only finished ones without work unless asked;
//! the end summary says how to review and merge; warnings for a dirty tree, a repository
//! without commits and a directory that is not a repository; an agent killed by a signal is
//! reported as such; SIGTERM and SIGHUP to tyba end the session with its summary, also when
//! sent before its sandbox exists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

struct Fx {
    r: SandboxRepo,
    who: Who,
}

impl Fx {
    fn env(&self) -> Vec<(OsString, OsString)> {
        let rt = self.r.root.join("rt");
        std::fs::create_dir_all(&rt).unwrap();
        std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        give(&rt, &self.who);
        base_env(&self.r.home, &[("XDG_RUNTIME_DIR", rt.into_os_string())])
    }

    /// `tyba ARGS` in `dir`: (status, stdout, stderr).
    fn tyba_in(&self, dir: &Path, args: &[&str]) -> (i32, String, String) {
        let o = run_tyba(&self.who, &self.r.tyba, dir, &self.env(), args);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// A non-interactive session (`--autonomy high`) running `script` in a new worktree,
    /// left running, its stderr piped.
    fn spawn_session(&self, script: &str) -> std::process::Child {
        let mut c = command_as(&self.who, &self.r.tyba);
        c.args([
            "run",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            script,
        ])
        .current_dir(&self.r.wt)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for (k, v) in self.env() {
            c.env(k, v);
        }
        c.spawn().unwrap()
    }

    fn tyba(&self, args: &[&str]) -> (i32, String, String) {
        self.tyba_in(&self.r.wt, args)
    }

    /// A finished non-interactive session running `script` in a new worktree.
    fn session(&self, extra: &[&str], script: &str) -> (i32, String) {
        let mut args = vec!["run", "--non-interactive"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "bash", "-c", script]);
        let (code, _, err) = self.tyba(&args);
        (code, err)
    }

    fn list(&self) -> Vec<serde_json::Value> {
        let (code, out, err) = self.tyba(&["worktrees", "--json"]);
        assert_eq!(code, 0, "tyba worktrees: {err}");
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn state_of(&self, branch: &str) -> Option<String> {
        self.list()
            .iter()
            .find(|w| w["branch"] == branch)
            .map(|w| w["state"].as_str().unwrap().to_string())
    }

    fn git(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&git_as(&self.who, &self.r.wt, args).stdout).into_owned()
    }

    fn branches(&self) -> Vec<String> {
        self.git(&[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/tyba/",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }
}

/// The branch a session's stderr names (`tyba: new branch tyba/<id>`).
fn branch_of(err: &str) -> String {
    let at = err.find("new branch ").expect("a new branch is announced") + "new branch ".len();
    err[at..].lines().next().unwrap().trim().to_string()
}

fn worktree_of(fx: &Fx, branch: &str) -> PathBuf {
    let l = fx.list();
    let w = l.iter().find(|w| w["branch"] == branch).unwrap();
    PathBuf::from(w["path"].as_str().unwrap())
}

fn setup(who: &Who, tag: &str) -> Option<Fx> {
    let r = sandbox_repo(who, tag)?;
    Some(Fx {
        r,
        who: who.clone(),
    })
}

impl Fx {
    /// Commits the whole checkout on a branch `work` of the person's (`main` is protected),
    /// then waits past the filesystems' coarse clock: the person's files are older than the
    /// next session.
    fn commit_on_work(&self) {
        give(&self.r.root, &self.who);
        self.git(&["add", "-A"]);
        self.git(&["commit", "-qm", "tree"]);
        self.git(&["switch", "-q", "-c", "work"]);
        std::thread::sleep(Duration::from_millis(300));
    }

    /// A `--here` session at high autonomy running `script`: its exit code and stderr.
    fn here(&self, script: &str) -> (i32, String) {
        self.session(&["--here", "--autonomy", "high"], script)
    }

    /// A `--here` session running `script` that ends well and names nothing (a control).
    fn here_quiet(&self, script: &str) {
        let (code, err) = self.here(script);
        assert_eq!(code, 0, "{:?}: {err}", self.who);
        assert!(!err.contains("REVIEW"), "{:?}: control: {err}", self.who);
    }

    /// A `--here` session running `script` that ends well and whose REVIEW list names each
    /// of `files`: its stderr.
    fn here_naming(&self, script: &str, files: &[&str]) -> String {
        let (code, err) = self.here(script);
        assert_eq!(code, 0, "{:?}: {err}", self.who);
        for f in files {
            assert!(named(&err, f), "{:?}: {f} not named: {err}", self.who);
        }
        err
    }
}

/// Writes each `(path, text)` under `dir`, with the directories on the way.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (f, text) in files {
        std::fs::create_dir_all(dir.join(f).parent().unwrap()).unwrap();
        std::fs::write(dir.join(f), text).unwrap();
    }
}

/// Makes `dir` a repository with everything in it committed as `msg` ([`git_fixture`]).
fn committed_repo(dir: &Path, msg: &str) {
    git_fixture(dir, &["init", "-q"]);
    git_fixture(dir, &["add", "-A"]);
    git_fixture(dir, &["commit", "-qm", msg]);
}

/// The end of a script that forces the full look at the session's end: one `link()`, which
/// fails (the seccomp filter reports the attempt all the same).
const FORCE_FULL_LOOK: &str =
    "try:\n    os.link(\"no-such-file\", \"no-such-link\")\nexcept OSError:\n    pass\n";

/// git as the test's user in a fixture repository `dir` (of any owner), with an identity,
/// local submodules allowed and `main` as the first branch.
fn git_fixture(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(["-c", "safe.directory=*"])
        .args(args)
        .output()
        .unwrap();
    assert!(st.status.success(), "{args:?}: {st:?}");
}

/// Whether the `REVIEW` list on `err` names `f` (a line `tyba:   F: reason` after it).
fn named(err: &str, f: &str) -> bool {
    err.lines()
        .skip_while(|l| !l.starts_with("tyba: REVIEW:"))
        .any(|l| l.starts_with(&format!("tyba:   {f}:")))
}

#[test]
fn sessions_worktrees_are_listed_removed_when_unchanged_and_cleaned_when_merged() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-life") else {
            continue;
        };
        // Unchanged: removed at the end, branch and all.
        let (code, err) = fx.session(&[], "true");
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            err.contains("the session changed nothing: its worktree and branch tyba/"),
            "{who:?}: {err}"
        );
        assert!(fx.branches().is_empty(), "{who:?}: {:?}", fx.branches());
        assert_eq!(fx.git(&["worktree", "list"]).lines().count(), 1);

        // Kept on request: empty.
        let (_, err) = fx.session(&["--keep-worktree"], "true");
        let empty = branch_of(&err);
        assert_eq!(fx.state_of(&empty).as_deref(), Some("empty"), "{who:?}");

        // A commit of the agent's: changed, and the summary says how to review and merge.
        let (code, err) = fx.session(
            &["--autonomy", "high"],
            "echo work > w.txt && git add w.txt && git commit -q -m work",
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        let committed = branch_of(&err);
        assert!(
            err.contains(&format!(
                "review: git -C {} diff main...{committed}",
                fx.r.wt.display()
            )),
            "{who:?}: {err}"
        );
        assert!(
            err.contains(&format!(
                "merge:  git -C {} merge {committed}",
                fx.r.wt.display()
            )),
            "{who:?}: {err}"
        );
        assert!(err.contains("(1 commit)"), "{who:?}: {err}");
        let l = fx.list();
        let c = l.iter().find(|w| w["branch"] == committed).unwrap();
        assert_eq!(c["state"], "changed", "{who:?}: {c}");
        assert_eq!(c["unmerged_commits"], 1, "{who:?}: {c}");

        // Uncommitted work only: changed, and said so at the end.
        let (_, err) = fx.session(&["--autonomy", "high"], "echo draft > d.txt");
        let drafted = branch_of(&err);
        assert!(err.contains("1 uncommitted path there"), "{who:?}: {err}");
        assert_eq!(fx.state_of(&drafted).as_deref(), Some("changed"));

        // A running session is listed as running and never cleaned.
        let mut running = fx.spawn_session("sleep 60");
        let deadline = Instant::now() + Duration::from_secs(60);
        let live = loop {
            if let Some(w) = fx.list().iter().find(|w| w["state"] == "running") {
                break w["branch"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "{who:?}: never running");
            std::thread::sleep(Duration::from_millis(100));
        };
        let (code, out, err) = fx.tyba(&["clean"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains(&format!("kept {live} (running): its session is running")),
            "{who:?}: {out}"
        );
        assert!(
            out.contains(&format!("removed {empty} (empty")),
            "{who:?}: {out}"
        );
        assert!(
            out.contains(&format!("kept {committed} (changed)")),
            "{who:?}: {out}"
        );
        assert!(worktree_of(&fx, &live).is_dir());
        let (code, _, err) = fx.tyba(&["stop"]);
        assert_eq!(code, 0, "{err}");
        let _ = running.wait();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut running.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains("changed nothing"), "{who:?}: {err}");

        // Merged into main: cleaned; unmerged work stays unless asked.
        fx.git(&["merge", "-q", "--no-edit", &committed]);
        assert_eq!(fx.state_of(&committed).as_deref(), Some("merged"));
        let merged_wt = worktree_of(&fx, &committed);
        let (code, out, _) = fx.tyba(&["clean"]);
        assert_eq!(code, 0);
        assert!(
            out.contains(&format!("removed {committed} (merged")),
            "{out}"
        );
        assert!(!merged_wt.exists());
        assert!(out.contains(&format!("kept {drafted} (changed)")), "{out}");
        assert_eq!(fx.branches(), std::slice::from_ref(&drafted), "{who:?}");
        let (_, out, _) = fx.tyba(&["clean", "--unmerged", "--dry-run"]);
        assert!(out.contains(&format!("would remove {drafted}")), "{out}");
        assert_eq!(
            fx.branches(),
            std::slice::from_ref(&drafted),
            "dry run removes nothing"
        );
        let (code, out, _) = fx.tyba(&["clean", "--unmerged"]);
        assert_eq!(code, 0, "{out}");
        assert!(fx.branches().is_empty(), "{who:?}: {out}");
        let (_, out, _) = fx.tyba(&["worktrees"]);
        assert!(out.contains("no session worktrees"), "{out}");
    }
}

#[test]
fn warnings_for_a_dirty_tree_no_commits_and_no_repository() {
    let who = Who::Me;
    let Some(fx) = setup(&who, "wt-warn") else {
        return;
    };
    std::fs::write(fx.r.wt.join("README.md"), "changed\n").unwrap();
    let (_, err) = fx.session(&[], "true");
    assert!(
        err.contains("has 1 uncommitted path") && err.contains("without them"),
        "{err}"
    );
    // No commits yet.
    let empty = fx.r.root.join("fresh");
    std::fs::create_dir_all(&empty).unwrap();
    give(&empty, &who);
    git_as(&who, &empty, &["init", "-q", "-b", "main"]);
    let (code, _, err) = fx.tyba_in(&empty, &["run", "--non-interactive", "--", "true"]);
    assert_ne!(code, 0);
    assert!(err.contains("has no commits yet"), "{err}");
    assert!(err.contains("--here"), "{err}");
    // Not a repository.
    let plain = fx.r.root.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    give(&plain, &who);
    let (code, _, err) = fx.tyba_in(&plain, &["run", "--non-interactive", "--", "true"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is not in a git repository"), "{err}");
    let (code, _, err) = fx.tyba_in(&plain, &["worktrees"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not in a git repository"), "{err}");
}

#[test]
fn an_agent_killed_by_a_signal_is_reported_and_an_exit_code_is_not() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-sig") else {
            continue;
        };
        let (code, err) = fx.session(&[], "kill -SEGV $$");
        assert_eq!(code, 139, "{who:?}: {err}");
        assert!(
            err.contains("the agent was killed by SIGSEGV"),
            "{who:?}: {err}"
        );
        let (code, err) = fx.session(&[], "exit 139");
        assert_eq!(code, 139, "{who:?}: {err}");
        assert!(!err.contains("killed by"), "{who:?}: {err}");
    }
}

#[test]
fn sigterm_and_sighup_to_tyba_end_the_session_with_its_summary() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-term") else {
            continue;
        };
        for sig in ["TERM", "HUP"] {
            let mut child = fx.spawn_session("echo x > left.txt; sleep 60");
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let l = fx.list();
                if l.iter()
                    .any(|w| w["state"] == "running" && w["uncommitted"] == 1)
                {
                    break;
                }
                assert!(Instant::now() < deadline, "{who:?}: never running: {l:?}");
                std::thread::sleep(Duration::from_millis(100));
            }
            // The supervisor itself (setpriv execs it, so the child's pid is tyba's).
            let _ = std::process::Command::new("kill")
                .arg(format!("-{sig}"))
                .arg(child.id().to_string())
                .status();
            let status = child.wait().unwrap();
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert!(
                err.contains(&format!("ended by SIG{sig}")),
                "{who:?} {sig}: {err}"
            );
            assert!(err.contains("review: git -C"), "{who:?} {sig}: {err}");
            assert!(
                err.contains("1 uncommitted path there"),
                "{who:?} {sig}: {err}"
            );
            assert!(!status.success());
        }
    }
}

/// Whether `pid`'s main thread blocks SIGTERM (`SigBlk` in `/proc/PID/status`): tyba has
/// reached its start, where it blocks the end signals before anything else.
fn blocks_sigterm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigBlk:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
}

/// A SIGTERM sent as soon as tyba has started (before its sandbox exists, where the thread
/// that takes the end signals is not started yet) waits, pending, and ends the session as
/// soon as the sandbox is made: the agent's command never gets to its write, the summary is
/// printed, and the exit status is 128 + 15.
#[test]
fn a_sigterm_before_the_sandbox_exists_ends_the_session_once_it_does() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-early-term") else {
            continue;
        };
        let mut child = fx.spawn_session("sleep 1; echo x > late.txt; sleep 60");
        // setpriv execs tyba: the child's pid becomes tyba's, which blocks SIGTERM first.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !blocks_sigterm(child.id()) {
            assert!(
                Instant::now() < deadline,
                "{who:?}: tyba never blocked SIGTERM"
            );
            std::thread::yield_now();
        }
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let started = Instant::now();
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{who:?}: the signal did not end the session: {err}"
        );
        assert!(err.contains("ended by SIGTERM"), "{who:?}: {err}");
        assert_eq!(status.code(), Some(143), "{who:?}: {err}");
        // The write would have kept the session's worktree, with one uncommitted path.
        assert!(
            err.contains("the session changed nothing"),
            "{who:?}: {err}"
        );
        assert!(fx.list().is_empty(), "{who:?}: {err}");
    }
}

#[test]
fn a_worktree_moved_off_its_branch_is_kept_with_a_word_about_it() {
    let who = Who::Me;
    let Some(fx) = setup(&who, "wt-detach") else {
        return;
    };
    let (code, err) = fx.session(
        &["--autonomy", "high"],
        "git checkout -q --detach && echo x > y.txt && git add y.txt && git commit -q -m d",
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("changed nothing"), "{err}");
    assert!(err.contains("is no longer on tyba/"), "{err}");
    let branch = branch_of(&err);
    assert_eq!(fx.branches(), std::slice::from_ref(&branch));
}

/// A session whose working directory would be `/`, the person's home or a directory holding
/// the home is refused before anything runs: the agent would get read and write access to
/// the person's credentials, shell startup files and tyba's own state. A project directory
/// inside the home (the control) still starts.
#[test]
fn no_session_works_in_the_root_or_the_home() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-home") else {
            continue;
        };
        let home = &fx.r.home;
        let marker = "ran-in-the-home";
        let script = format!("touch {marker}; echo x >> .bashrc");
        // A plain home, a home that is a git repository (with --here) and the root.
        let repo_home = |args: &[&str]| fx.tyba_in(home, args);
        let (code, _, err) = repo_home(&[
            "run",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            &script,
        ]);
        assert_ne!(code, 0, "{who:?}: {err}");
        assert!(err.contains("is your home directory"), "{who:?}: {err}");
        git_as(&who, home, &["init", "-q", "-b", "work"]);
        let (code, _, err) = repo_home(&[
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            &script,
        ]);
        assert_ne!(code, 0, "{who:?}: {err}");
        assert!(err.contains("is your home directory"), "{who:?}: {err}");
        let (code, _, err) = fx.tyba_in(
            Path::new("/"),
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-c",
                "true",
            ],
        );
        assert_ne!(code, 0, "{who:?}: {err}");
        assert!(err.contains("root of the filesystem"), "{who:?}: {err}");
        assert!(
            !home.join(marker).exists(),
            "{who:?}: the agent ran in the home"
        );
        assert!(
            !std::fs::read_to_string(home.join(".bashrc"))
                .unwrap_or_default()
                .contains('x'),
            "{who:?}"
        );
        std::fs::remove_dir_all(home.join(".git")).unwrap();
        // Control: a project directory inside the home starts, and the agent runs there.
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        give(&project, &who);
        let (code, _, err) = fx.tyba_in(
            &project,
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-c",
                &script,
            ],
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(project.join(marker).exists(), "{who:?}: {err}");
    }
}

/// Files that run or approve code later, written by a program whose command line names none
/// of them (a script in the repository), are named in the end summary before the merge
/// hints; a session that wrote only ordinary files (the control) gets no such warning.
#[test]
fn files_that_run_code_later_are_named_at_the_end() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-ctl") else {
            continue;
        };
        let gen = r#"import os
for d in (".vscode", ".claude"):
    os.makedirs(d, exist_ok=True)
open(".vscode/tasks.json", "w").write('{"tasks":[{"runOptions":{"runOn":"folderOpen"},"command":"id"}]}')
open(".claude/settings.json", "w").write('{"hooks":{}}')
open(".envrc", "w").write("echo hi\n")
open("notes.txt", "w").write("plain\n")
"#;
        std::fs::write(fx.r.wt.join("gen.py"), gen).unwrap();
        std::fs::write(
            fx.r.wt.join("plain.py"),
            "open('notes.txt','w').write('x')\n",
        )
        .unwrap();
        give(&fx.r.wt, &who);
        fx.git(&["add", "gen.py", "plain.py"]);
        fx.git(&["commit", "-qm", "scripts"]);
        let (code, err) = fx.session(&["--autonomy", "high"], "python3 gen.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        let warn = err
            .find("REVIEW BEFORE MERGING")
            .unwrap_or_else(|| panic!("{who:?}: no warning: {err}"));
        let tail = &err[warn..];
        for f in [".vscode/tasks.json", ".claude/settings.json", ".envrc"] {
            assert!(tail.contains(f), "{who:?}: {f} not named: {err}");
        }
        assert!(!tail.contains("notes.txt:"), "{who:?}: {err}");
        assert!(
            warn < err.find("merge:").unwrap_or(usize::MAX),
            "{who:?}: the warning must come before the merge hint: {err}"
        );
        // The same files hidden by a `.gitignore` the session writes are still named (a
        // wholly ignored directory as its `dir/` entry).
        std::fs::write(
            fx.r.wt.join("hide.py"),
            format!("{gen}open('.gitignore','w').write('.vscode/\\n.claude/\\n.envrc\\n')\n"),
        )
        .unwrap();
        give(&fx.r.wt, &who);
        fx.git(&["add", "hide.py"]);
        fx.git(&["commit", "-qm", "hide"]);
        let (code, err) = fx.session(&["--autonomy", "high"], "python3 hide.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        let warn = err
            .find("REVIEW BEFORE MERGING")
            .unwrap_or_else(|| panic!("{who:?}: hidden by .gitignore, no warning: {err}"));
        for f in [".vscode/", ".claude/", ".envrc"] {
            assert!(err[warn..].contains(f), "{who:?}: {f} not named: {err}");
        }
        // Control: ordinary files only.
        let (code, err) = fx.session(&["--autonomy", "high"], "python3 plain.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(err.contains("merge:"), "{who:?}: {err}");
        assert!(!err.contains("REVIEW BEFORE MERGING"), "{who:?}: {err}");
    }
}

/// In the person's own checkout (`--here`) the files that run or approve code later that
/// the session wrote are named at the end too (review 3, r3-06: they were not, although they
/// land straight in the checkout), hidden by a `.gitignore` or not; what the person had
/// before the session (an untracked `.envrc` of their own) is not the session's and is not
/// named; a session that wrote only ordinary files gets no warning.
#[test]
fn files_that_run_code_later_are_named_at_the_end_of_a_here_session() {
    for who in whos() {
        let Some(fx) = setup(&who, "here-ctl") else {
            continue;
        };
        let gen = r#"import os
for d in (".vscode", ".claude"):
    os.makedirs(d, exist_ok=True)
open(".vscode/tasks.json", "w").write('{"tasks":[{"runOptions":{"runOn":"folderOpen"},"command":"id"}]}')
open(".claude/settings.json", "w").write('{"hooks":{}}')
open("notes.txt", "w").write("plain\n")
open(".gitignore", "w").write(".vscode/\n.claude/\n")
"#;
        std::fs::write(fx.r.wt.join("gen.py"), gen).unwrap();
        std::fs::write(
            fx.r.wt.join("plain.py"),
            "open('notes.txt','w').write('x')\n",
        )
        .unwrap();
        std::fs::write(fx.r.wt.join(".envrc"), "echo mine\n").unwrap();
        give(&fx.r.wt, &who);
        fx.git(&["add", "gen.py", "plain.py"]);
        fx.git(&["commit", "-qm", "scripts"]);
        // The person's files are older than the session by more than the clock's slack.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (code, err) = fx.here("python3 plain.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(!err.contains("REVIEW"), "{who:?}: control: {err}");
        let (code, err) = fx.here("python3 gen.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        let warn = err
            .find("tyba: REVIEW:")
            .unwrap_or_else(|| panic!("{who:?}: no warning: {err}"));
        for f in [".vscode/", ".claude/"] {
            assert!(err[warn..].contains(f), "{who:?}: {f} not named: {err}");
        }
        assert!(
            !err[warn..].contains(".envrc"),
            "{who:?}: the person's own .envrc: {err}"
        );
        assert!(!err[warn..].contains("notes.txt"), "{who:?}: {err}");
        // Review 5 (r5-01): a file rewritten in place inside a directory ignored as a whole
        // leaves the directory's ctime alone; the files are read. (r5-02): a commit whose
        // reflog entry the agent backdates is found against HEAD as it was at the start.
        fx.git(&["switch", "-q", "-c", "work"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let script = r#"printf '{"tasks":[]}' > .vscode/tasks.json
printf 'echo hi\n' > .envrc; git add -A
GIT_COMMITTER_DATE='@1000000000 +0000' git commit -qm fmt; echo rc=$?"#;
        let (code, err) = fx.here(script);
        assert_eq!(code, 0, "{who:?}: {err}");
        let warn = err
            .find("tyba: REVIEW:")
            .unwrap_or_else(|| panic!("{who:?}: no warning: {err}"));
        assert!(
            err[warn..].contains(".vscode/tasks.json"),
            "{who:?}: r5-01: {err}"
        );
        assert!(
            err[warn..].lines().any(|l| l.starts_with("tyba:   .envrc")),
            "{who:?}: r5-02: {err}"
        );
        assert_eq!(
            fx.git(&["log", "-1", "--format=%s"]).trim(),
            "fmt",
            "{who:?}: {err}"
        );
    }
}

/// The `--here` review list, by every way a session changes a file, in a checkout small
/// enough to be watched whole before the agent starts (`tyba_supervisor::here_watch`) and in
/// one with too many directories for that (the full look by `git status` and change times):
/// a control file rewritten in place deep in the tree, one whose mode alone changes, one
/// made as a hard link, one in a directory of the person's that the session moved (its
/// files keep their old change times), and one in a directory the session made. The control:
/// the same checkout after a session that only reads names nothing.
#[test]
fn every_way_of_changing_a_file_is_named_at_the_end_of_a_here_session() {
    for who in whos() {
        for many in [false, true] {
            let Some(fx) = setup(&who, if many { "here-ways-many" } else { "here-ways" }) else {
                continue;
            };
            let wt = &fx.r.wt;
            write_files(
                wt,
                &[
                    ("deep/er/.vscode/tasks.json", "{}\n"),
                    (".mcp.json", "{}\n"),
                    ("notes.txt", "plain\n"),
                    ("stage/pkg/.claude/settings.json", "{}\n"),
                ],
            );
            std::fs::write(
                wt.join("ways.py"),
                r#"import os
with open("deep/er/.vscode/tasks.json", "r+") as f:
    f.write('{"tasks":[1]}')
os.chmod(".mcp.json", 0o755)
os.rename("stage/pkg", "moved")
os.makedirs("made/.gemini")
open("made/.gemini/settings.json", "w").write("{}")
"#,
            )
            .unwrap();
            // A file written through a second name, made and removed again: the events name
            // only that name.
            std::fs::write(
                wt.join("link.py"),
                r#"import os
os.link(".mcp.json", "alias")
open("alias", "w").write('{"mcpServers":{}}')
os.unlink("alias")
os.link("notes.txt", ".tool-versions")
"#,
            )
            .unwrap();
            if many {
                // Far more directories than can be walked while the sandbox is set up.
                for i in 0..20_000 {
                    std::fs::create_dir_all(wt.join(format!("many/{}/{i}", i % 100))).unwrap();
                }
                std::fs::write(wt.join("many/7/7/keep"), "x\n").unwrap();
            }
            fx.commit_on_work();
            let (code, err) = fx.here(
                "cat deep/er/.vscode/tasks.json .mcp.json > /dev/null; git status > /dev/null",
            );
            assert_eq!(code, 0, "{who:?} {many}: {err}");
            assert!(!err.contains("REVIEW"), "{who:?} {many}: control: {err}");
            let (code, err) = fx.here("python3 ways.py");
            assert_eq!(code, 0, "{who:?} {many}: {err}");
            let warn = err
                .find("tyba: REVIEW:")
                .unwrap_or_else(|| panic!("{who:?} {many}: no warning: {err}"));
            for f in [
                "deep/er/.vscode/tasks.json",
                ".mcp.json",
                "moved/.claude/settings.json",
                "made/.gemini/settings.json",
            ] {
                assert!(
                    named(&err[warn..], f),
                    "{who:?} {many}: {f} not named: {err}"
                );
            }
            std::thread::sleep(Duration::from_millis(300));
            let (code, err) = fx.here("python3 link.py");
            assert_eq!(code, 0, "{who:?} {many}: {err}");
            for f in [".mcp.json", ".tool-versions"] {
                assert!(named(&err, f), "{who:?} {many}: {f} not named: {err}");
            }
            assert!(
                !named(&err, "deep/er/.vscode/tasks.json"),
                "{who:?} {many}: the first session's: {err}"
            );
        }
    }
}

/// Review 6: each way a hostile agent hid a changed control file from the `--here` review
/// list, in one session, named: a control name turned into a link to a file of `docs/`
/// (r6-01), a nested repository's hooks (r6-03), a rewrite through a shared mapping whose
/// last reference is left in flight in a unix socket (r6-02), a new directory holding a name
/// that is not text (r6-04: its files are read by their bytes). Then, with one failing `link()` forcing the full look, a
/// submodule's work tree (r6-05). The control: a session that only reads names nothing.
#[test]
fn the_here_review_list_holds_against_review_6() {
    for who in whos() {
        let Some(fx) = setup(&who, "here-r6") else {
            continue;
        };
        let wt = &fx.r.wt;
        let padded = format!("{{}}{}\n", " ".repeat(120));
        write_files(
            wt,
            &[
                (".zed/tasks.json", &padded),
                ("docs/readme.md", "docs\n"),
                (".gitignore", "vendor/\n"),
            ],
        );
        let sub_src = fx.r.root.join("subsrc");
        std::fs::create_dir_all(&sub_src).unwrap();
        std::fs::write(sub_src.join(".mcp.json"), "{}\n").unwrap();
        committed_repo(&sub_src, "sub");
        git_fixture(
            wt,
            &["submodule", "-q", "add", &sub_src.to_string_lossy(), "lib"],
        );
        write_files(wt, &[("vendor/lib/l.txt", "l\n")]);
        committed_repo(&wt.join("vendor/lib"), "l");
        std::fs::write(
            wt.join("r6.py"),
            r##"import os, mmap, socket
# r6-01: a control name made a link to a file of docs/.
open("docs/dc.json", "w").write('{"initializeCommand": "id"}')
os.symlink("docs/dc.json", ".devcontainer.json")
# r6-03: a nested repository's hook.
open("vendor/lib/.git/hooks/post-checkout", "w").write("#!/bin/sh\nid\n")
# r6-02: a rewrite through a shared mapping, the last reference left in flight.
fd = os.open(".zed/tasks.json", os.O_RDWR)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
payload = b'[{"label":"x","command":"id"}]'
m[:] = payload + b" " * (size - len(payload))
m.close()
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
socket.send_fds(a, [b"x"], [fd, a.fileno(), b.fileno()])
os.close(fd); a.close(); b.close()
# r6-04: a new directory with a name that is not text.
os.makedirs("tools/.claude")
open("tools/.claude/settings.json", "w").write("{}")
open(b"tools/\xff", "w").close()
"##,
        )
        .unwrap();
        std::fs::write(
            wt.join("r6e.py"),
            [
                r#"import os
os.makedirs("lib/.vscode")
open("lib/.vscode/tasks.json", "w").write('{"tasks":[]}')
open("lib/.mcp.json", "w").write('{"mcpServers":{}}')
"#,
                FORCE_FULL_LOOK,
            ]
            .concat(),
        )
        .unwrap();
        fx.commit_on_work();
        fx.here_quiet("cat .zed/tasks.json docs/readme.md lib/.mcp.json > /dev/null");
        fx.here_naming(
            "python3 r6.py",
            &[
                ".devcontainer.json",
                "vendor/lib/.git/hooks/post-checkout",
                ".zed/tasks.json",
                "tools/.claude/settings.json",
            ],
        );
        std::thread::sleep(Duration::from_millis(300));
        fx.here_naming(
            "python3 r6e.py",
            &["lib/.vscode/tasks.json", "lib/.mcp.json"],
        );
    }
}

/// Review 7: more ways a hostile agent hid a changed control file from the `--here` review
/// list. With the events' list: a committed link `.claude -> config/claude` and the target
/// edited (r7-03); a link the session made to a directory, `mise -> docs/m`, over a
/// `config.toml` (r7-04). With the full look (forced by one failing `link()`): the committed
/// link's target edited again (r7-03 there: the full look reads the links too), a control
/// file hidden behind `--skip-worktree` set through `git update-index --stdin` (r7-01), a nested
/// repository's config inside an ignored directory holding a name that is not text (r7-02),
/// and a control file under a directory whose name is not text (r7-05). The control: a
/// session that only reads names nothing.
#[test]
fn the_here_review_list_holds_against_review_7() {
    for who in whos() {
        let Some(fx) = setup(&who, "here-r7") else {
            continue;
        };
        let wt = &fx.r.wt;
        write_files(
            wt,
            &[
                (".mcp.json", "{}\n"),
                ("config/claude/settings.json", "{}\n"),
                ("docs/readme.md", "docs\n"),
                (".gitignore", "vendor/\n"),
                ("vendor/lib/l.txt", "l\n"),
            ],
        );
        std::os::unix::fs::symlink("config/claude", wt.join(".claude")).unwrap();
        // In a directory with no subdirectory, which the walk does not list.
        std::fs::create_dir_all(wt.join("leaf")).unwrap();
        std::fs::write(wt.join("config/leaf.json"), "{}\n").unwrap();
        std::os::unix::fs::symlink("../config/leaf.json", wt.join("leaf/.mcp.json")).unwrap();
        committed_repo(&wt.join("vendor/lib"), "l");
        std::fs::write(
            wt.join("r7.py"),
            r#"import os
open("config/claude/settings.json", "w").write('{"hooks":{}}')
open("config/leaf.json", "w").write('{"mcpServers":{}}')
os.makedirs("docs/m")
open("docs/m/config.toml", "w").write('[hooks]\nenter = "id"\n')
os.symlink("docs/m", "mise")
"#,
        )
        .unwrap();
        std::fs::write(
            wt.join("r7f.py"),
            [r#"import os, subprocess
subprocess.run(["git", "update-index", "--skip-worktree", "--stdin"], input=b".mcp.json\n", check=True)
open(".mcp.json", "w").write('{"mcpServers":{}}')
open("vendor/lib/.git/config", "a").write("[core]\n\tfsmonitor = id\n")
open(b"vendor/\xff", "w").close()
os.makedirs(b"svc\xff")
open(b"svc\xff/.envrc", "w").write("id\n")
open("config/claude/settings.json", "w").write('{"hooks":{"x":1}}')
"#, FORCE_FULL_LOOK].concat(),
        )
        .unwrap();
        fx.commit_on_work();
        fx.here_quiet("cat .mcp.json .claude/settings.json docs/readme.md > /dev/null");
        fx.here_naming(
            "python3 r7.py",
            &[
                ".claude/settings.json",
                "leaf/.mcp.json",
                "mise/config.toml",
            ],
        );
        std::thread::sleep(Duration::from_millis(300));
        let err = fx.here_naming(
            "python3 r7f.py",
            &[
                ".mcp.json",
                "vendor/lib/.git/config",
                ".claude/settings.json",
            ],
        );
        assert!(
            err.lines()
                .any(|l| l.starts_with("tyba:   svc") && l.contains("/.envrc:")),
            "{who:?}: svc?/.envrc not named: {err}"
        );
    }
}

/// Review 8: a third round of ways to hide a changed control file from the `--here` review
/// list. A directory made a git repository under another name than `.git`, its `config`
/// written (r8-02); a link to the checkout's root over a root `config.toml` (r8-05); a link
/// through a link (r8-06); the person's own ignored link in a directory with no
/// subdirectory, its target edited (r8-07); a committed `.mcp.json -> cfg/mcp.json` whose
/// `cfg/` a later session replaces by a link to a file the first session wrote (r8-08);
/// and, with the full look (one failing `link()`), an index the agent made unreadable
/// (r8-04: nothing in the index decides what is looked at). The control: a session that
/// only reads names nothing.
#[test]
fn the_here_review_list_holds_against_review_8() {
    for who in whos() {
        let Some(fx) = setup(&who, "here-r8") else {
            continue;
        };
        let wt = &fx.r.wt;
        write_files(
            wt,
            &[
                ("config.toml", "[tools]\n"),
                ("config/tasks.json", "{}\n"),
                (".gitignore", ".vscode/\n"),
                ("cfg/mcp.json", "{}\n"),
                ("notes/readme.md", "notes\n"),
                (".envrc", "echo mine\n"),
            ],
        );
        std::fs::create_dir_all(wt.join(".vscode")).unwrap();
        std::os::unix::fs::symlink("../config/tasks.json", wt.join(".vscode/tasks.json")).unwrap();
        std::os::unix::fs::symlink("cfg/mcp.json", wt.join(".mcp.json")).unwrap();
        std::fs::write(
            wt.join("r8.py"),
            r#"import os
os.makedirs("src/objects"); os.makedirs("src/refs")
open("src/HEAD", "w").write("ref: refs/heads/main\n")
open("src/config", "w").write("[core]\n\tfsmonitor = id\n")
os.symlink(".", "mise")
os.makedirs(".config"); os.makedirs("x"); os.makedirs("y")
open("y/f.toml", "w").write('[hooks]\nenter = "id"\n')
os.symlink("../y", "x/conf.d")
os.symlink("../x", ".config/mise")
open("config/tasks.json", "w").write('{"tasks":[1]}')
open("notes/mcp.json", "w").write('{"mcpServers":{}}')
"#,
        )
        .unwrap();
        std::fs::write(
            wt.join("r8b.py"),
            r#"import os, shutil
shutil.rmtree("cfg")
os.symlink("notes", "cfg")
"#,
        )
        .unwrap();
        std::fs::write(
            wt.join("r8c.py"),
            [
                r#"import os
open(".git/index", "wb").write(b"not an index")
open(".envrc", "w").write("id\n")
"#,
                FORCE_FULL_LOOK,
            ]
            .concat(),
        )
        .unwrap();
        fx.commit_on_work();
        fx.here_quiet("cat .mcp.json .vscode/tasks.json config.toml > /dev/null");
        fx.here_naming(
            "python3 r8.py",
            &[
                "src/config",
                "mise/config.toml",
                ".config/mise/conf.d/f.toml",
                ".vscode/tasks.json",
            ],
        );
        std::thread::sleep(Duration::from_millis(300));
        let (code, err) = fx.here("python3 r8b.py");
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(named(&err, ".mcp.json"), "{who:?}: r8-08: {err}");
        std::thread::sleep(Duration::from_millis(300));
        let (_, err) = fx.here("python3 r8c.py");
        assert!(named(&err, ".envrc"), "{who:?}: r8-04: {err}");
    }
}

/// Login shells (`bash -l`, `sh -lc`: how Claude Code and Codex run each command) read
/// `/etc/profile`, which sets `PATH` afresh here (Debian's does), then the person's
/// `~/.profile`, shown empty in the sandbox: the tools the person put on `PATH` (a marker
/// directory here, as `~/.cargo/bin` is for rustup) are still found, from the session's own
/// `PATH` restored at the end of `/etc/profile`'s copy. The copy is gone after the session.
#[test]
fn login_shells_keep_the_sessions_path() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-login-path") else {
            continue;
        };
        std::fs::write(fx.r.home.join(".profile"), "export SECRET_TOKEN=hunter2\n").unwrap();
        let marker = fx.r.root.join("it's-tools/bin");
        std::fs::create_dir_all(&marker).unwrap();
        let tool = marker.join("tyba-test-tool");
        std::fs::write(&tool, "#!/bin/sh\necho tool-found\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        give(&fx.r.root, &who);
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", marker.display());
        let mut env = fx.env();
        env.retain(|(k, _)| k != "PATH");
        env.push(("PATH".into(), path.clone().into()));
        let script = "bash -lc 'echo \"bash=$PATH\"; echo \"token=$SECRET_TOKEN\"'; sh -lc 'echo \"sh=$PATH\"'";
        // Control: outside the sandbox this machine's /etc/profile drops the marker.
        let resets = std::fs::read_to_string("/etc/profile")
            .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("PATH=")));
        let bare = command_as(&who, Path::new("/bin/bash"))
            .args([
                "-c",
                "env -u HOME HOME=/nonexistent sh -lc 'echo \"sh=$PATH\"'",
            ])
            .env_clear()
            .env("PATH", &path)
            .output()
            .unwrap();
        let bare = String::from_utf8_lossy(&bare.stdout);
        if resets {
            assert!(!bare.contains("it's-tools"), "{who:?}: control: {bare}");
        }
        let o = run_tyba(
            &who,
            &fx.r.tyba,
            &fx.r.wt,
            &env,
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-c",
                script,
            ],
        );
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        let want = format!("{}:", marker.display());
        assert!(
            out.lines()
                .any(|l| l.starts_with("bash=") && l.contains(&want))
                && out
                    .lines()
                    .any(|l| l.starts_with("sh=") && l.contains(&want)),
            "{who:?}: the login shells keep the session's PATH: {out} {err}"
        );
        assert!(
            out.contains("token=\n") || out.contains("token=\r"),
            "{who:?}: {out}"
        );
        assert!(
            !out.contains("hunter2") && !err.contains("hunter2"),
            "{who:?}: {out} {err}"
        );
        // Run by name from a login shell, as an agent's command is.
        let o = run_tyba(
            &who,
            &fx.r.tyba,
            &fx.r.wt,
            &env,
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-lc",
                "command -v tyba-test-tool >/dev/null && echo on-path",
            ],
        );
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("on-path"),
            "{who:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The person's shell startup files read as empty in the sandbox: the agent's shells start
/// without `Permission denied` and without their contents (they may export secrets). The
/// control reads the same file outside the sandbox and finds the secret.
#[test]
fn shell_startup_files_read_as_empty() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-rc") else {
            continue;
        };
        let secret = "export SECRET_TOKEN=hunter2";
        for f in [".bashrc", ".profile"] {
            std::fs::write(fx.r.home.join(f), format!("{secret}\n")).unwrap();
        }
        give(&fx.r.home, &who);
        let script = "bash -li -c 'echo started; echo \"token=$SECRET_TOKEN\"'; python3 -c 'import os; print(\"rc=\" + repr(open(os.path.expanduser(\"~/.bashrc\")).read()))'";
        // Control: the same script outside the sandbox reads the secret.
        let o = command_as(&who, Path::new("/bin/bash"))
            .args(["-c", script])
            .current_dir(&fx.r.wt)
            .env("HOME", &fx.r.home)
            .output()
            .unwrap();
        let bare = String::from_utf8_lossy(&o.stdout);
        assert!(bare.contains("hunter2"), "{who:?}: control: {bare}");
        let (code, out, err) = fx.tyba(&[
            "run",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            script,
        ]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("started") && out.contains("rc=''"),
            "{who:?}: {out} {err}"
        );
        assert!(!err.contains("Permission denied"), "{who:?}: {err}");
        assert!(
            !out.contains("hunter2") && !err.contains("hunter2"),
            "{who:?}: {out} {err}"
        );
    }
}

/// tyba's own git at the session's end, in `tyba worktrees` and `tyba clean --dry-run` runs
/// nothing the agent configured: a nested repository the agent made and added as a submodule
/// (a gitlink) with a `core.fsmonitor` in its own `.git/config` would run, as the person and
/// outside the sandbox, in every `git status` that looks into it. The control: the person's
/// own `git status` in that worktree runs it.
#[test]
fn tybas_own_git_runs_nothing_a_nested_repository_configures() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-fsm") else {
            continue;
        };
        let marker = fx.r.root.join("fsmonitor-ran");
        let gen = format!(
            "open('sub/.git/config', 'a').write('[core]\\n\\tfsmonitor = \"touch {}; echo\"\\n')\n",
            marker.display()
        );
        std::fs::write(fx.r.wt.join("gen.py"), gen).unwrap();
        give(&fx.r.wt, &who);
        fx.git(&["add", "gen.py"]);
        fx.git(&["commit", "-qm", "gen"]);
        let (code, err) = fx.session(
            &["--autonomy", "high"],
            "git init -q sub && git -C sub commit -q --allow-empty -m lib && git add sub && python3 gen.py && echo made",
        );
        assert_eq!(code, 0, "{who:?}: {err}");
        let branch = branch_of(&err);
        let wt = worktree_of(&fx, &branch);
        assert!(
            std::fs::read_to_string(wt.join("sub/.git/config"))
                .unwrap_or_default()
                .contains("fsmonitor"),
            "{who:?}: the session did not set the nested repository up: {err}"
        );
        assert!(!marker.exists(), "{who:?}: the session's end ran it: {err}");
        assert_ne!(
            fx.state_of(&branch).as_deref(),
            Some("merged"),
            "{who:?}: a worktree holding a submodule's work is not taken for empty"
        );
        assert!(!marker.exists(), "{who:?}: tyba worktrees ran it");
        let (code, _, err) = fx.tyba(&["clean", "--dry-run"]);
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(!marker.exists(), "{who:?}: tyba clean --dry-run ran it");
        assert!(wt.is_dir(), "{who:?}: the worktree was removed");
        // Control: the person's own `git status` there runs the agent's fsmonitor.
        let o = git_as(&who, &wt, &["status", "--porcelain"]);
        assert!(o.status.success(), "{who:?}: {o:?}");
        assert!(
            marker.exists(),
            "{who:?}: control: git status did not run the fsmonitor, so the checks above could not fail"
        );
    }
}

/// What the agent names cannot write on the person's terminal (hostile review F6): a
/// directory named with screen-clearing and colour escapes holding an `.envrc`, and branches
/// the agent made in its private refs with an escape, a C1 control, a bidi override and a
/// `$(…)` in their names. The session's stderr has no ESC or C1 byte from them (the names
/// appear with `?`), and each printed "to keep it" command, run with `bash -c`, makes exactly
/// the branch named (or git refuses it) and runs nothing else (no `pwned`). Control: the
/// same name unquoted in a `bash -c` line does run its `$(…)`.
#[test]
fn names_from_the_agent_never_write_on_the_terminal_and_pasted_commands_run_nothing() {
    for who in whos() {
        let Some(fx) = setup(&who, "wt-esc") else {
            continue;
        };
        let script = r#"set -e
d="$(printf 'd\033[2J\033[32mFAKE-DIR\033[0m')"
mkdir -p "$d"; echo 'echo hi' > "$d/.envrc"
heads="$(git rev-parse --git-common-dir)/refs/heads/tyba"
tip="$(git rev-parse HEAD)"
echo "$tip" > "$heads/x$(printf '\033[2J\033[31m')FAKE"
echo "$tip" > "$heads/"'q$(touch${IFS}pwned)'
echo "$tip" > "$heads/c$(printf '\302\2332J\342\200\256')rev"
echo made"#;
        let o = run_tyba(
            &who,
            &fx.r.tyba,
            &fx.r.wt,
            &fx.env(),
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-c",
                script,
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let ctx = format!("{who:?}: {err}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("made"), "{ctx}");
        assert!(!o.stderr.contains(&0x1b), "{ctx}");
        assert!(
            !err.chars()
                .any(|c| ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{202e}'),
            "{ctx}"
        );
        assert!(err.contains("REVIEW BEFORE MERGING"), "{ctx}");
        assert!(err.contains("d?[2J?[32mFAKE-DIR?[0m/.envrc"), "{ctx}");
        let pastes: Vec<&str> = err
            .lines()
            .filter_map(|l| l.split_once("to keep it: ").map(|(_, c)| c))
            .collect();
        assert_eq!(pastes.len(), 3, "{ctx}");
        let scratch = fx.r.root.join("paste");
        std::fs::create_dir_all(&scratch).unwrap();
        give(&scratch, &who);
        for p in &pastes {
            let out = command_as(&who, Path::new("/bin/bash"))
                .arg("-c")
                .arg(p)
                .current_dir(&scratch)
                .output()
                .unwrap();
            assert!(!scratch.join("pwned").exists(), "{p}: {out:?}");
            assert!(!fx.r.wt.join("pwned").exists(), "{p}: {out:?}");
        }
        let made = fx.branches();
        // git refuses a name with a control character; the others are made exactly.
        assert!(
            made.iter().any(|b| b == "tyba/q$(touch${IFS}pwned)"),
            "{made:?}"
        );
        assert!(
            made.iter().any(|b| b == "tyba/c\u{9b}2J\u{202e}rev"),
            "{made:?}"
        );
        assert!(!made.iter().any(|b| b.contains("FAKE")), "{made:?}");
        // Control: the name unquoted in a pasted line runs its `$(…)`.
        let out = command_as(&who, Path::new("/bin/bash"))
            .arg("-c")
            .arg("echo tyba/q$(touch${IFS}pwned)")
            .current_dir(&scratch)
            .output()
            .unwrap();
        assert!(scratch.join("pwned").exists(), "control: {out:?}");
    }
}
