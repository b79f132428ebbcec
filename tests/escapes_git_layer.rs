//! The session-private layer over the common git dir's root (default linked worktree): a
//! commit and an approved push under `tyba run` print no git error (`packed-refs.lock`,
//! `update_ref failed`) and the remote gets the branch, while nothing the agent writes in the
//! layer reaches the person's repository or makes the person's git run code. Real git, a
//! real bare remote, a scripted person approving through `tyba inbox`/`approve`, the effects
//! checked from outside after the session, as root and as the unprivileged `TYBA_TEST_USER`;
//! each check with a control that shows it can fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `git -C dir ARGS` as `who`, outside; its trimmed stdout ("" when it fails).
fn git_out(who: &Who, dir: &Path, args: &[&str]) -> String {
    let mut c = command_as(who, Path::new("/usr/bin/env"));
    c.arg("git").arg("-C").arg(dir).args(args);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "person")
        .env("GIT_AUTHOR_EMAIL", "person@example.com")
        .env("GIT_COMMITTER_NAME", "person")
        .env("GIT_COMMITTER_EMAIL", "person@example.com")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn worktree_from(stderr: &str) -> Option<PathBuf> {
    let line = stderr.lines().find(|l| l.contains(": worktree "))?;
    Some(PathBuf::from(line.split(": worktree ").nth(1)?.trim()))
}

/// A repository (`r.wt`, branch `main`) with a bare remote `origin` at `root/remote.git`
/// that has `main`, and a private runtime dir for the inbox; the environment of `tyba`.
fn with_remote(r: &SandboxRepo, who: &Who) -> (PathBuf, Vec<(OsString, OsString)>) {
    let remote = r.root.join("remote.git");
    let rt = r.root.join("rt");
    std::fs::create_dir_all(&rt).unwrap();
    std::fs::set_permissions(&rt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    give(&rt, who);
    git_as(who, &r.root, &["init", "-q", "--bare", "remote.git"]);
    git_as(
        who,
        &r.wt,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git_as(who, &r.wt, &["push", "-q", "origin", "main"]);
    git_as(who, &remote, &["branch", "other", "main"]);
    // `git push` made origin/main: the person's packed and loose refs both exist.
    git_as(who, &r.wt, &["branch", "packed"]);
    git_as(who, &r.wt, &["pack-refs", "--all"]);
    let env = base_env(&r.home, &[("XDG_RUNTIME_DIR", rt.into_os_string())]);
    (remote, env)
}

/// Starts `tyba run --autonomy high -- bash -c SCRIPT` (the default linked worktree, stdin closed: asks wait
/// for the inbox), approves every ask that comes within `asks` answers, and waits for the
/// end: (status, stderr, the approved actions).
fn run_approving(
    r: &SandboxRepo,
    who: &Who,
    env: &[(OsString, OsString)],
    asks: usize,
    script: &str,
) -> (i32, String, Vec<String>) {
    let mut c = command_as(who, &r.tyba);
    c.args(["run", "--autonomy", "high", "--", "bash", "-c", script])
        .current_dir(&r.wt)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let mut approved = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let o = run_tyba(who, &r.tyba, &r.wt, env, &["inbox", "--json"]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        let pending: Vec<serde_json::Value> = v
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
            .collect();
        for p in pending {
            if approved.len() >= asks {
                break;
            }
            let id = p["id"].as_str().unwrap_or_default().to_string();
            let o = run_tyba(who, &r.tyba, &r.wt, env, &["approve", &id]);
            if o.status.success() {
                approved.push(p["action"].as_str().unwrap_or_default().to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    let st = child.wait().unwrap();
    (st.code().unwrap_or(-1), err, approved)
}

/// The agent's work: a commit (which deletes `AUTO_MERGE`, taking `packed-refs.lock` in the
/// common dir), a remote-tracking ref made and deleted, a push of its branch to `feature-x`
/// (which updates `refs/remotes/origin/feature-x`) and a fetch (which makes
/// `refs/remotes/origin/other`); everything git prints goes to `report/git`.
const WORK_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
{
echo x >> README.md
git commit -qam agent-work; echo "commit $?"
git update-ref refs/remotes/origin/scratch HEAD; echo "update-ref $?"
git update-ref -d refs/remotes/origin/scratch; echo "delete-ref $?"
git push origin HEAD:feature-x; echo "push $?"
git fetch origin; echo "fetch $?"
git rev-parse HEAD > "$R/head"
git rev-parse refs/remotes/origin/other > "$R/other"
} > "$R/git" 2>&1
echo finished > "$R/finished"
"#;

/// What git prints when it cannot write the common dir's root or its remote-tracking refs.
fn git_errors(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| {
            l.contains("packed-refs.lock")
                || l.contains("update_ref failed")
                || l.contains("cannot lock ref")
                || l.starts_with("error:")
                || l.starts_with("fatal:")
        })
        .collect()
}

/// Lists a directory tree below `d` (relative names, sorted).
fn tree(d: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in rd.flatten() {
            let q = e.path();
            out.push(q.strip_prefix(d).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(q);
            }
        }
    }
    out.sort();
    out
}

fn work_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let (remote, env) = with_remote(&r, &who);
    let git_dir = r.wt.join(".git");
    let packed_before = read(&git_dir.join("packed-refs"));
    let config_before = read(&git_dir.join("config"));
    let refs_before = git_out(&who, &r.wt, &["for-each-ref"]);
    let remotes_before = tree(&git_dir.join("refs/remotes"));
    let logs_before = tree(&git_dir.join("logs"));
    let mut c = Checks::default();

    // The push, the fetch, and the `git-upload-pack` the fetch starts on the local remote.
    let (_st, err, approved) = run_approving(&r, &who, &env, 4, WORK_SCRIPT);
    let wt = worktree_from(&err);
    let report = wt.clone().unwrap_or_else(|| r.root.clone()).join("report");
    let out = read(&report.join("git"));
    c.check(
        read(&report.join("finished")).trim() == "finished" && wt.is_some(),
        format!("the agent ran in a linked worktree: {err}"),
    );
    c.check(
        approved.iter().any(|a| a.contains("git push"))
            && approved.iter().any(|a| a.contains("git fetch")),
        format!("the push and the fetch were asked and approved: {approved:?} / {err}"),
    );
    c.check(
        out.contains("commit 0")
            && out.contains("update-ref 0")
            && out.contains("delete-ref 0")
            && out.contains("push 0")
            && out.contains("fetch 0"),
        format!("commit, ref update and deletion, push, fetch succeed: {out}"),
    );
    c.check(
        git_errors(&out).is_empty(),
        format!("git printed no error: {:?}", git_errors(&out)),
    );
    let head = read(&report.join("head")).trim().to_string();
    c.check(
        read(&report.join("other")).trim() == git_out(&who, &remote, &["rev-parse", "other"]),
        "the fetched remote-tracking ref is there for the agent's git",
    );
    c.check(
        !head.is_empty() && git_out(&who, &remote, &["rev-parse", "refs/heads/feature-x"]) == head,
        format!("the remote got feature-x at the agent's commit {head}"),
    );
    // After the session, from outside: nothing of the layer is in the person's `.git`.
    c.check(
        std::fs::symlink_metadata(git_dir.join("packed-refs.lock")).is_err(),
        "no packed-refs.lock left",
    );
    c.check(
        tree(&git_dir.join("refs/remotes")) == remotes_before
            && tree(&git_dir.join("logs")).iter().all(|l| {
                logs_before.contains(l) || l.starts_with("refs/heads/tyba") || l == "HEAD"
            }),
        format!(
            "no remote-tracking ref or reflog written by the agent: {:?} / {:?}",
            tree(&git_dir.join("refs/remotes")),
            tree(&git_dir.join("logs"))
        ),
    );
    c.check(
        git_out(&who, &r.wt, &["for-each-ref", "--exclude=refs/heads/tyba/"]) == refs_before,
        "the person's refs are as they were",
    );
    c.check(
        read(&git_dir.join("packed-refs")) == packed_before
            && read(&git_dir.join("config")) == config_before,
        "packed-refs and config unchanged",
    );
    if let Some(wt) = &wt {
        c.check(
            git_out(&who, wt, &["log", "-1", "--format=%s"]) == "agent-work",
            "the agent's commit landed on its branch (objects are the real ones)",
        );
    }

    // Controls, in the same linked worktree without tyba. (1) Its common dir's root
    // read-only, as the sandbox had it before the layer (a private mount namespace with a
    // read-only bind of the root, writable ones of what was granted): git prints the errors.
    if let Some(wt) = &wt {
        std::fs::remove_dir_all(&report).unwrap();
        let admin = git_out(&who, wt, &["rev-parse", "--absolute-git-dir"]);
        let common = git_dir.display().to_string();
        let script = format!(
            "set -e; C='{common}'; for d in \"$C\" \"$C/objects\" '{admin}' \"$C/refs/heads/tyba\" \"$C/logs/refs/heads/tyba\"; do mount --bind \"$d\" \"$d\"; done; mount -o remount,bind,ro \"$C\"; set +e; {WORK_SCRIPT}"
        );
        let mut u = command_as(&who, Path::new("/usr/bin/unshare"));
        u.args(["-Urm", "/bin/bash", "-c", &script])
            .current_dir(wt)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in &env {
            u.env(k, v);
        }
        u.status().unwrap();
        let out = read(&report.join("git"));
        c.check(
            out.contains("packed-refs.lock") && out.contains("update_ref failed"),
            format!("control: with the root read-only git prints the errors: {out}"),
        );
        // (2) Without any sandbox, the remote-tracking refs land in the person's `.git`.
        std::fs::remove_dir_all(&report).unwrap();
        bare_bash_as(
            &who,
            wt,
            &env,
            &WORK_SCRIPT.replace("feature-x", "feature-y"),
        );
        c.check(
            tree(&git_dir.join("refs/remotes")) != remotes_before,
            "control: without tyba the push writes refs/remotes in the person's .git",
        );
    }
    c.finish(tag);
}

#[test]
fn a_commit_and_an_approved_push_print_no_git_error_as_root_or_self() {
    work_suite(Who::Me, "gitlayer-work-me");
}

#[test]
fn a_commit_and_an_approved_push_print_no_git_error_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    work_suite(who, "gitlayer-work-user");
}

/// Plants, through the layer, everything that would make the person's git run code or move
/// the person's branches: `config` (an fsmonitor), a hook, `commondir`, `info/attributes`
/// with a filter, `packed-refs` with a moved `main`, the main worktree's `config.worktree`
/// and `HEAD`; directly, by rename over, and by moving the directory aside and rebuilding it.
/// Then makes a remote-tracking ref with git, which the layer takes.
const PLANT_SCRIPT: &str = r##"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
NEW=$(git commit-tree -m evil "HEAD^{tree}")
C="$C" NEW="$NEW" perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", "$ENV{C}/$p")) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  sub over { my ($p, $t) = @_; put("$p.new", $t); rename("$ENV{C}/$p.new", "$ENV{C}/$p") ? print "renamed $p\n" : print "rename $p: $!\n" }
  my $cfg = "[core]\n\tfsmonitor = $ENV{HOOKS}/config\n[filter \"evil\"]\n\tclean = $ENV{HOOKS}/filter\n\tsmudge = $ENV{HOOKS}/filter\n";
  put("config", $cfg); over("config", $cfg);
  put("hooks/post-commit", "#!/bin/sh\necho ran > $ENV{MARKS}/hook\n"); chmod(0755, "$ENV{C}/hooks/post-commit");
  rename("$ENV{C}/hooks", "$ENV{C}/hooks-away") ? print "renamed hooks\n" : print "rename hooks: $!\n";
  put("commondir", "/tmp\n"); over("commondir", "/tmp\n");
  put("info/attributes", "* filter=evil\n");
  rename("$ENV{C}/info", "$ENV{C}/info-away") ? print "renamed info\n" : print "rename info: $!\n";
  put("packed-refs", "$ENV{NEW} refs/heads/main\n"); over("packed-refs", "$ENV{NEW} refs/heads/main\n");
  put("config.worktree", $cfg); over("config.worktree", $cfg);
  put("HEAD", "ref: refs/heads/packed\n"); over("HEAD", "ref: refs/heads/packed\n");
  put("refs/heads/main", "$ENV{NEW}\n");
  rename("$ENV{C}/refs", "$ENV{C}/refs-away") ? print "renamed refs\n" : print "rename refs: $!\n";
' > "$R/plant" 2>&1
git update-ref refs/remotes/origin/planted "$NEW"; echo "update-ref planted $?" >> "$R/plant"
git -c core.hooksPath=/dev/null update-ref refs/heads/main "$NEW"; echo "update-ref main $?" >> "$R/plant"
git rev-parse refs/remotes/origin/planted > "$R/planted" 2>&1
echo finished > "$R/finished"
"##;

fn plant_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let (_remote, mut env) = with_remote(&r, &who);
    let hooks = r.root.join("hooks");
    let marks = r.root.join("marks");
    for d in [&hooks, &marks] {
        std::fs::create_dir_all(d).unwrap();
    }
    for n in ["config", "filter"] {
        write_exe(
            &hooks.join(n),
            &format!("#!/bin/sh\necho ran > {}/{n}\ncat\n", marks.display()),
        );
    }
    give(&r.root, &who);
    env.push(("HOOKS".into(), hooks.clone().into()));
    env.push(("MARKS".into(), marks.clone().into()));
    let git_dir = r.wt.join(".git");
    let before: Vec<(String, String)> = ["config", "packed-refs", "HEAD", "refs/heads/main"]
        .iter()
        .map(|n| (n.to_string(), read(&git_dir.join(n))))
        .collect();
    let main_before = git_out(&who, &r.wt, &["rev-parse", "main"]);
    let tree_before = tree(&git_dir);
    let mut c = Checks::default();

    let (_st, err, _approved) = run_approving(&r, &who, &env, 0, PLANT_SCRIPT);
    let wt = worktree_from(&err);
    let report = wt.clone().unwrap_or_else(|| r.root.clone()).join("report");
    let plant = read(&report.join("plant"));
    c.check(
        read(&report.join("finished")).trim() == "finished" && wt.is_some(),
        format!("the agent ran in a linked worktree: {err}"),
    );
    // Inside: every protected name refuses; only the remote-tracking ref is written.
    let written: Vec<&str> = plant
        .lines()
        .filter(|l| l.starts_with("wrote ") || l.starts_with("renamed "))
        .filter(|l| !l.ends_with(".new"))
        .collect();
    c.check(
        written.is_empty() && plant.contains("update-ref planted 0"),
        format!("no protected name is written, a remote-tracking ref is: {plant} / {err}"),
    );
    c.check(
        plant.contains("update-ref main ") && !plant.contains("update-ref main 0"),
        format!("git cannot move main: {plant}"),
    );
    c.check(
        read(&report.join("planted")).trim().len() == 40,
        format!(
            "the agent's git reads its private ref: {}",
            read(&report.join("planted"))
        ),
    );
    // After: the person's real git, outside.
    for (n, b) in &before {
        c.check(&read(&git_dir.join(n)) == b, format!("{n} unchanged"));
    }
    let after = tree(&git_dir);
    let new: Vec<&String> = after
        .iter()
        .filter(|p| !tree_before.contains(p))
        .filter(|p| !p.starts_with("objects/") && !p.starts_with("worktrees"))
        .filter(|p| !p.contains("tyba"))
        .collect();
    c.check(
        new.is_empty(),
        format!(
            "nothing new in the person's .git but objects, the worktree and its branch: {new:?}"
        ),
    );
    c.check(
        git_out(&who, &r.wt, &["rev-parse", "main"]) == main_before,
        "the person's main did not move",
    );
    std::fs::write(r.wt.join("README.md"), "changed\n").unwrap();
    give(&r.wt.join("README.md"), &who);
    let _ = git_out(&who, &r.wt, &["status", "--porcelain"]);
    let _ = git_out(&who, &r.wt, &["commit", "-qam", "person"]);
    for m in ["config", "filter", "hook"] {
        c.check(
            !marks.join(m).exists(),
            format!("the person's git status and commit ran no planted {m}"),
        );
    }
    // Control: the same script without tyba, in the same worktree, plants them and the
    // person's git runs them.
    if let Some(wt) = &wt {
        std::fs::remove_dir_all(&report).unwrap();
        bare_bash_as(&who, wt, &env, PLANT_SCRIPT);
        let plant = read(&report.join("plant"));
        c.check(
            plant.contains("wrote config") && plant.contains("wrote hooks/post-commit"),
            format!("control: without tyba the files are written: {plant}"),
        );
        // Undo the redirections that would keep git from finding the repository.
        let _ = std::fs::remove_file(git_dir.join("commondir"));
        for (away, name) in [
            ("hooks-away", "hooks"),
            ("info-away", "info"),
            ("refs-away", "refs"),
        ] {
            if git_dir.join(away).exists() && !git_dir.join(name).exists() {
                std::fs::rename(git_dir.join(away), git_dir.join(name)).unwrap();
            }
        }
        std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(r.wt.join("README.md"), "again\n").unwrap();
        give(&r.wt.join("README.md"), &who);
        let _ = git_out(&who, &r.wt, &["commit", "-qam", "person2"]);
        c.check(
            marks.join("config").exists()
                || marks.join("filter").exists()
                || marks.join("hook").exists(),
            "control: without tyba the person's git runs what was planted",
        );
    }
    c.finish(tag);
}

#[test]
fn the_layer_cannot_make_the_persons_git_run_code_as_root_or_self() {
    plant_suite(Who::Me, "gitlayer-plant-me");
}

#[test]
fn the_layer_cannot_make_the_persons_git_run_code_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    plant_suite(who, "gitlayer-plant-user");
}

/// A commit, and a file written in the main git dir's root: with the layer it is written
/// (privately), without one it is refused.
const ROOT_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
{
echo y >> README.md; git commit -qam y; echo "commit $?"
( echo x > "$C/planted-in-root" ) 2>/dev/null; echo "root $?"
} > "$R/out" 2>&1
echo finished > "$R/finished"
"#;

/// Fail closed: a layer that cannot be made (here: the session's temp dir, where its tmpfs is
/// staged, has a `,` in its path, which overlay options cannot carry) leaves the root
/// read-only, as without a layer, with one warning; the agent's commit still lands.
fn fail_closed_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let odd = r.root.join("t,mp");
    std::fs::create_dir_all(&odd).unwrap();
    give(&odd, &who);
    let git_dir = r.wt.join(".git");
    let mut c = Checks::default();
    for (odd_tmp, layered) in [(true, false), (false, true)] {
        let mut env = base_env(&r.home, &[]);
        if odd_tmp {
            env.push(("TMPDIR".into(), odd.clone().into()));
        }
        let o = run_tyba(
            &who,
            &r.tyba,
            &r.wt,
            &env,
            &[
                "run",
                "--non-interactive",
                "--autonomy",
                "high",
                "--",
                "bash",
                "-c",
                ROOT_SCRIPT,
            ],
        );
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let wt = worktree_from(&err);
        let report = wt.clone().unwrap_or_else(|| r.root.clone()).join("report");
        let out = read(&report.join("out"));
        let warnings = err.matches("stays read-only for this session").count();
        c.check(
            read(&report.join("finished")).trim() == "finished" && out.contains("commit 0"),
            format!("the agent's commit lands (layer {layered}): {out} / {err}"),
        );
        c.check(
            out.contains(if layered { "root 0" } else { "root 1" }),
            format!("the root is writable only through a layer (layer {layered}): {out}"),
        );
        c.check(
            warnings == usize::from(!layered),
            format!("one warning when the layer cannot be made, none else: {warnings} / {err}"),
        );
        c.check(
            std::fs::symlink_metadata(git_dir.join("planted-in-root")).is_err(),
            format!("nothing written in the person's .git (layer {layered})"),
        );
    }
    c.finish(tag);
}

#[test]
fn without_a_layer_the_root_stays_read_only_as_root_or_self() {
    fail_closed_suite(Who::Me, "gitlayer-closed-me");
}

#[test]
fn without_a_layer_the_root_stays_read_only_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    fail_closed_suite(who, "gitlayer-closed-user");
}
