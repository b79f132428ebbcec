//! What the agent leaves in the person's repository that trips the person's next git command
//! (issue 13's F4): lock files (`refs/heads/main.lock`, `index.lock`, `packed-refs.lock`,
//! `HEAD.lock`, `objects/info/commit-graph.lock`), directories moved away or replaced
//! (`.git/logs` by a file, `refs/tags`, `objects/pack`), and a detached `HEAD` in the
//! person's own checkout (`--here`); from a linked worktree, the object store's `pack/` and a
//! lock beside the commit-graph. Attempted from inside `tyba run --non-interactive --autonomy
//! high` as root and as the unprivileged `TYBA_TEST_USER`, checked from outside: the person's
//! `git commit`, `git tag`, `git reflog` and `git cat-file` work after the session, and the
//! end summary names each thing found and what tyba did. Controls: the same script without
//! the sandbox leaves the repository broken (so the checks can fail), and a lock made while
//! another process works in the repository is kept and named, not removed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::*;

/// Plants everything from the worktree (`C`: the common git dir), in perl so that the
/// classifier, which refuses the same writes named on a command line, stops none of it: only
/// what tyba does at the end is tested. `HEAD` is detached first (the planted `index.lock`
/// would stop git).
const HERE_SCRIPT: &str = r#"
git checkout -q --detach && echo detached
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my $c = $ENV{C};
  for my $f ("refs/heads/main.lock", "index.lock", "packed-refs.lock", "HEAD.lock", "objects/info/commit-graph.lock") {
    if (open(my $h, ">", "$c/$f")) { close $h; print "lock $f\n" } else { print "lock $f: $!\n" }
  }
  rename("$c/logs", "$c/logs-away") ? print "moved logs\n" : print "logs: $!\n";
  if (open(my $h, ">", "$c/logs")) { print $h "not a directory\n"; close $h; print "file logs\n" }
  rename("$c/refs/tags", "$c/refs/tags-away") ? print "moved tags\n" : print "tags: $!\n";
  rename("$c/objects/pack", "$c/objects/pack-away") ? print "moved pack\n" : print "pack: $!\n";
'
"#;

/// From a linked worktree: the person's object store (writable for the agent's commits).
const LINKED_SCRIPT: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my $c = $ENV{C};
  if (open(my $h, ">", "$c/objects/info/commit-graph.lock")) { close $h; print "lock commit-graph\n" } else { print "lock: $!\n" }
  rename("$c/objects/pack", "$c/objects/pack-away") ? print "moved pack\n" : print "pack: $!\n";
'
"#;

fn stdout_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// `git -C dir ARGS` as `who`, outside the sandbox: (success, stdout).
fn git(who: &Who, dir: &Path, args: &[&str]) -> (bool, String) {
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
    (o.status.success(), stdout_of(&o))
}

/// A repository on `feature` with a tag, a reflog and its objects packed.
fn prepare(who: &Who, repo: &Path) {
    for args in [
        &["checkout", "-q", "-b", "feature"][..],
        &["tag", "v1"],
        &["gc", "-q"],
    ] {
        assert!(git_as(who, repo, args).status.success(), "git {args:?}");
    }
}

/// What the person's git says of `repo` after a session (or the bare control): the checks
/// that pass only when nothing trips it.
fn persons_git_works(who: &Who, repo: &Path, c: &mut Checks, what: &str, expect: bool) {
    let git_dir = repo.join(".git");
    let locks: Vec<&str> = [
        "refs/heads/main.lock",
        "index.lock",
        "packed-refs.lock",
        "HEAD.lock",
        "objects/info/commit-graph.lock",
    ]
    .into_iter()
    .filter(|l| git_dir.join(l).exists())
    .collect();
    let head = std::fs::read_to_string(git_dir.join("HEAD")).unwrap_or_default();
    let (tag_ok, tags) = git(who, repo, &["tag"]);
    let (obj_ok, _) = git(who, repo, &["cat-file", "-e", "v1^{commit}"]);
    let (_, reflog) = git(who, repo, &["reflog", "-n", "20", "--format=%gs"]);
    let (commit_ok, _) = git(
        who,
        repo,
        &["commit", "-q", "--allow-empty", "-m", "person"],
    );
    let (_, on) = git(who, repo, &["symbolic-ref", "-q", "--short", "HEAD"]);
    let all = locks.is_empty()
        && head == "ref: refs/heads/feature\n"
        && tag_ok
        && tags == "v1"
        && obj_ok
        && reflog.contains("checkout: moving from main to feature")
        && git_dir.join("logs").is_dir()
        && commit_ok
        && on == "feature";
    c.check(
        all == expect,
        format!(
            "{what}: the person's git works = {all} (expected {expect}): locks left {locks:?}, HEAD {head:?}, tag {tag_ok} {tags:?}, objects {obj_ok}, reflog {reflog:?}, commit {commit_ok} on {on:?}"
        ),
    );
}

fn suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    let env = base_env(&r.home, &[]);

    // --here in the person's checkout.
    prepare(&who, &r.wt);
    let o = run_tyba(
        &who,
        &r.tyba,
        &r.wt,
        &env,
        &[
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            HERE_SCRIPT,
        ],
    );
    let out = stdout_of(&o);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    c.check(
        [
            "detached",
            "lock index.lock",
            "moved logs",
            "file logs",
            "moved tags",
            "moved pack",
        ]
        .iter()
        .all(|w| out.contains(w)),
        format!("the agent planted everything inside: {out}"),
    );
    for said in [
        "logs was moved to",
        "moved back; what stood in its place is kept at",
        "refs/tags was moved to",
        "objects/pack was moved to",
        "index.lock: a git lock file the session left: removed",
        "refs/heads/main.lock: a git lock file the session left: removed",
        "HEAD was detached at feature's own commit: re-attached to feature",
    ] {
        c.check(
            err.contains(said),
            format!("the summary says {said:?}: {err}"),
        );
    }
    persons_git_works(&who, &r.wt, &mut c, "after the --here session", true);
    let aside: Vec<PathBuf> = std::fs::read_dir(r.wt.join(".git"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("logs.tyba-"))
        .collect();
    c.check(
        aside.len() == 1
            && std::fs::read_to_string(&aside[0]).unwrap_or_default() == "not a directory\n",
        format!("what stood in place of logs is kept aside: {aside:?}"),
    );

    // Control: the same script without the sandbox leaves the person's git tripping.
    let bare = r.root.join("bare");
    make_repo(&who, &bare);
    prepare(&who, &bare);
    let mut b = command_as(&who, Path::new("/bin/bash"));
    b.arg("-c")
        .arg(HERE_SCRIPT)
        .current_dir(&bare)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.clone(), v.clone())))
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let bo = b.output().unwrap();
    c.check(
        stdout_of(&bo).contains("moved pack"),
        format!(
            "control: the script plants without the sandbox: {}",
            stdout_of(&bo)
        ),
    );
    persons_git_works(&who, &bare, &mut c, "control without the sandbox", false);

    // Control of the removal rule: a lock made while another process works in the
    // repository (a shell of the person's sitting there) is kept, and named.
    // In a process group of its own, as a shell of another terminal is (tyba's own command
    // line, its process group, is not counted).
    let mut sitter = command_as(&who, Path::new("/bin/sleep"));
    std::os::unix::process::CommandExt::process_group(&mut sitter, 0);
    sitter
        .arg("120")
        .current_dir(&r.wt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut sitter = sitter.spawn().unwrap();
    let o = run_tyba(
        &who,
        &r.tyba,
        &r.wt,
        &env,
        &[
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            r#"D="$(git rev-parse --absolute-git-dir)" perl -e 'open(my $h, ">", "$ENV{D}/index.lock") and print "lock\n"'"#,
        ],
    );
    let _ = sitter.kill();
    let _ = sitter.wait();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    c.check(
        stdout_of(&o).contains("lock")
            && r.wt.join(".git/index.lock").exists()
            && err.contains("index.lock: a git lock file made while the session ran: kept")
            && err.contains("(sleep) works in the repository"),
        format!(
            "a lock made while another process works in the repository is kept and named: {err}"
        ),
    );
    let _ = std::fs::remove_file(r.wt.join(".git/index.lock"));

    // A linked worktree: the person's object store.
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
            LINKED_SCRIPT,
        ],
    );
    let out = stdout_of(&o);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    c.check(
        out.contains("lock commit-graph") && out.contains("moved pack"),
        format!("the agent planted in the object store from a linked worktree: {out} {err}"),
    );
    c.check(
        err.contains("objects/pack was moved to")
            && err.contains("commit-graph.lock: a git lock file the session left: removed"),
        format!("the summary names the object store's: {err}"),
    );
    let (obj_ok, _) = git(&who, &r.wt, &["cat-file", "-e", "v1^{commit}"]);
    c.check(
        obj_ok
            && r.wt.join(".git/objects/pack").is_dir()
            && !r.wt.join(".git/objects/pack-away").exists()
            && !r.wt.join(".git/objects/info/commit-graph.lock").exists(),
        "after the linked session the packs are back and no lock is left",
    );
    drop(r);
    c.finish(&format!("{who:?}: repository leftovers"));
}

#[test]
fn what_the_agent_leaves_in_the_repository_is_repaired_or_named_as_root_or_self() {
    suite(Who::Me, "repo-left-me");
}

#[test]
fn what_the_agent_leaves_in_the_repository_is_repaired_or_named_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    suite(who, "repo-left-user");
}
