//! What the agent leaves in the person's repository that trips the person's next git command
//! (issue 13's F4): lock files (`refs/heads/main.lock`, `index.lock`, `packed-refs.lock`,
//! `HEAD.lock`, `objects/info/commit-graph.lock`), directories moved away or replaced
//! (`.git/logs` by a file, `refs/tags`, `objects/pack`), and a detached `HEAD` in the
//! person's own checkout (`--here`); from a linked worktree, the object store's `pack/` and a
//! lock beside the commit-graph, which stay in the session's objects layer. Attempted from inside `tyba run --non-interactive --autonomy
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

/// From a linked worktree: the object store (the agent's view of it is the objects layer, whose
/// lower layer is the person's store: `supervisor::objects_layer`).
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
        out.contains("lock commit-graph"),
        format!("the agent made its lock in its view of the object store: {out} {err}"),
    );
    // Neither plant reached the person's store, so there is nothing to repair or name.
    let (obj_ok, _) = git(&who, &r.wt, &["cat-file", "-e", "v1^{commit}"]);
    c.check(
        obj_ok
            && r.wt.join(".git/objects/pack").is_dir()
            && !r.wt.join(".git/objects/pack-away").exists()
            && !r.wt.join(".git/objects/info/commit-graph.lock").exists()
            && !err.contains("commit-graph.lock")
            && !err.contains("objects/pack was moved"),
        format!("after the linked session the person's object store is as it was: {err}"),
    );
    drop(r);
    c.finish(&format!("{who:?}: repository leftovers"));
}

/// The plant that made the repair follow a link (`--here`, in perl: nothing is classified):
/// `logs/refs/heads` (recorded at the start) moved to the git dir's root as `HH` and given a
/// `main` at `$PLANT_COMMIT`; `logs/refs` (recorded too) moved out of sight and replaced by a
/// symbolic link to `$PLANT_TO` (the person's own `refs/`, or another repository's; in the
/// environment, as a path on a command line would be refused by the classifier). A repair
/// that followed the link would rename `<target>/heads` aside and `HH` in its place.
const LINK_PLANT: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my ($c, $to, $commit) = ($ENV{C}, $ENV{PLANT_TO}, $ENV{PLANT_COMMIT});
  rename("$c/logs/refs/heads", "$c/HH") or die "HH: $!";
  unlink glob("$c/HH/*");
  open(my $h, ">", "$c/HH/main") or die "main: $!"; print $h "$commit\n"; close $h;
  open($h, ">", "$c/HH/AGENT-WAS-HERE") or die; close $h;
  mkdir("$c/logs/keep") or die "keep: $!";
  rename("$c/logs/refs", "$c/logs/keep/refs") or die "keep/refs: $!";
  symlink($to, "$c/logs/refs") or die "link: $!";
  print "planted\n";
'
"#;

/// The lock-sweep plant: `objects/info/commit-graphs` made a link to `$PLANT_TO` (another
/// repository's git dir, which the sandbox cannot even read), then the agent waits until the
/// test says go (`objects/info/go`), while the person's git takes a lock there.
const LOCK_LINK_PLANT: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my ($c, $to) = ($ENV{C}, $ENV{PLANT_TO});
  symlink($to, "$c/objects/info/commit-graphs") or die "link: $!";
  $| = 1; print "linked\n";
  for (1 .. 1200) { last if -e "$c/objects/info/go"; select(undef, undef, undef, 0.05) }
  print "went\n";
'
"#;

/// The aside name of the old repair (`<dir>.tyba-<session>`, the session id is in the
/// agent's environment) taken in advance, `logs` moved away and replaced by a file.
const ASIDE_TAKEN: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my $c = $ENV{C};
  rename("$c/logs", "$c/logs-away") or die "logs: $!";
  open(my $h, ">", "$c/logs") or die; print $h "not a directory\n"; close $h;
  mkdir("$c/logs.tyba-$ENV{TYBA_SESSION}") or die "aside: $!";
  mkdir("$c/logs.tyba-" . getppid()) or die "aside: $!";
  print "taken\n";
'
"#;

/// An agent of a `--here` session makes another session's reflog
/// (`logs/refs/heads/tyba/keep`) a link to `$PLANT_TO`.
const REFLOG_LINK: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  my $l = "$ENV{C}/logs/refs/heads/tyba/keep";
  unlink($l); symlink($ENV{PLANT_TO}, $l) or die "link: $!";
  print "linked reflog\n";
'
"#;

/// The agent of the session on `tyba/keep` reads its own reflog (the session's copy), and
/// tries the file the link named directly.
const READ_REFLOG: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  open(my $h, "<", "$ENV{C}/logs/refs/heads/tyba/keep") or print "no reflog: $!\n";
  print "reflog read: ", join("", <$h>) if $h;
  print "\n";
  print open(my $x, "<", "$ENV{C}/../../secret") ? "direct: yes\n" : "direct: no\n";
'
"#;

/// An agent of a `--here` session makes `refs/heads/evil` a link to `$PLANT_TO` and writes
/// a repository policy protecting `evil/made`.
const PROTECTED_LINK: &str = r#"
C="$(git rev-parse --path-format=absolute --git-common-dir)" perl -e '
  symlink($ENV{PLANT_TO}, "$ENV{C}/refs/heads/evil") or die "link: $!";
  mkdir(".tyba");
  open(my $h, ">", ".tyba/policy.toml") or die "policy: $!";
  print $h "[git]\nprotected_branches = [\"evil/made\"]\n"; close $h;
  print "linked evil\n";
'
"#;

/// `tyba run --here --non-interactive --autonomy high -- bash -c SCRIPT` in `dir`, with
/// `PLANT_TO` and `PLANT_COMMIT` in the agent's environment: (stdout, stderr).
fn tyba_here_in(
    r: &support::SandboxRepo,
    who: &Who,
    dir: &Path,
    script: &str,
    to: &str,
    commit: &str,
) -> (String, String) {
    let env = base_env(
        &r.home,
        &[("PLANT_TO", to.into()), ("PLANT_COMMIT", commit.into())],
    );
    let a = [
        "run",
        "--here",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        script,
    ];
    let o = run_tyba(who, &r.tyba, dir, &env, &a);
    (
        stdout_of(&o),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// [`tyba_here_in`] the repository.
fn tyba_here(
    r: &support::SandboxRepo,
    who: &Who,
    script: &str,
    to: &str,
    commit: &str,
) -> (String, String) {
    tyba_here_in(r, who, &r.wt, script, to, commit)
}

fn rev(who: &Who, dir: &Path, what: &str) -> String {
    git(who, dir, &["rev-parse", what]).1
}

/// Runs `sh -c SCRIPT` as `who` outside any sandbox.
fn sh_as(who: &Who, dir: &Path, script: &str) {
    let mut c = command_as(who, Path::new("/bin/sh"));
    c.arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _ = c.status();
}

fn links_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    // Two commits on main, pushed to a bare remote of the person's outside the worktree.
    git_as(&who, &r.wt, &["commit", "-q", "--allow-empty", "-m", "two"]);
    let first = git(&who, &r.wt, &["rev-list", "--max-parents=0", "main"]).1;
    let main = rev(&who, &r.wt, "main");
    let remote = r.root.join("remote.git");
    git_as(
        &who,
        &r.root,
        &["init", "-q", "--bare", "-b", "main", "remote.git"],
    );
    git_as(
        &who,
        &r.wt,
        &["push", "-q", &remote.to_string_lossy(), "main"],
    );
    let git_dir = r.wt.join(".git");

    // 1. The link to the person's own refs/: main would move to the agent's (first) commit.
    let to = git_dir.join("refs").to_string_lossy().into_owned();
    let (out, err) = tyba_here(&r, &who, LINK_PLANT, &to, &first);
    c.check(
        out.contains("planted"),
        format!("the agent planted the link: {out} {err}"),
    );
    c.check(
        rev(&who, &r.wt, "main") == main,
        format!("the person's main did not move: {err}"),
    );
    c.check(
        !git_dir.join("refs/heads/AGENT-WAS-HERE").exists()
            && std::fs::read_dir(git_dir.join("refs"))
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with("heads.tyba-")),
        "the person's refs/heads was not moved aside",
    );
    c.check(
        err.contains("logs/refs was replaced by a symbolic link (to ")
            && err.contains("logs/refs/heads was not checked (the original is at"),
        format!("the summary names the link and what it did not touch: {err}"),
    );
    // Control: what the repair did when it followed the link (rename through it), done by
    // hand: main moves, so the check above can fail.
    sh_as(
        &who,
        &git_dir,
        "mv logs/refs/heads logs/refs/heads.old && mv HH logs/refs/heads",
    );
    c.check(
        rev(&who, &r.wt, "main") == first,
        "control: renaming through the link moves the person's main",
    );
    sh_as(
        &who,
        &git_dir,
        "rm -rf refs/heads && mv refs/heads.old refs/heads && rm logs/refs && mv logs/keep/refs logs/refs && rmdir logs/keep",
    );
    c.check(
        rev(&who, &r.wt, "main") == main,
        "the repository is put back for the next case",
    );

    // 2. The link to another repository's refs/ (the person's bare remote, which the
    // sandbox cannot even read): its main would roll back and hold the agent's file.
    let to = remote.join("refs").to_string_lossy().into_owned();
    let (out, err) = tyba_here(&r, &who, LINK_PLANT, &to, &first);
    c.check(
        out.contains("planted"),
        format!("the agent planted the link: {out} {err}"),
    );
    c.check(
        rev(&who, &remote, "main") == main && !remote.join("refs/heads/AGENT-WAS-HERE").exists(),
        format!("the remote's main did not move: {err}"),
    );
    c.check(
        std::fs::read_dir(remote.join("refs"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("heads.tyba-")),
        "nothing was moved aside in the remote",
    );
    sh_as(
        &who,
        &git_dir,
        "rm logs/refs && mv logs/keep/refs logs/refs && rmdir logs/keep && rm -rf HH",
    );

    // 3. The lock sweep through a link to another repository: the person's lock there,
    // taken while the session runs, stays; the control without tyba shows it is there to go.
    let other = r.root.join("other");
    make_repo(&who, &other);
    let victim = other.join(".git/index.lock");
    // With `--here` only: from a linked worktree the link is made in the session's objects
    // layer and never reaches the person's store (`tests/escapes_objects.rs`).
    {
        let mode = "--here";
        let _ = std::fs::remove_file(&victim);
        let link = git_dir.join("objects/info/commit-graphs");
        let go = git_dir.join("objects/info/go");
        let giver = {
            let (link, go, victim, who) = (link.clone(), go.clone(), victim.clone(), who.clone());
            std::thread::spawn(move || {
                for _ in 0..1200 {
                    if std::fs::symlink_metadata(&link).is_ok() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let v = victim.to_string_lossy().into_owned();
                sh_as(&who, Path::new("/"), &format!("touch '{v}'"));
                sh_as(&who, Path::new("/"), &format!("touch '{}'", go.display()));
            })
        };
        let env = base_env(&r.home, &[("PLANT_TO", other.join(".git").into())]);
        let mut a = vec!["run"];
        if mode == "--here" {
            a.push("--here");
        }
        a.extend([
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            LOCK_LINK_PLANT,
        ]);
        let o = run_tyba(&who, &r.tyba, &r.wt, &env, &a);
        giver.join().unwrap();
        let out = stdout_of(&o);
        c.check(
            out.contains("linked") && out.contains("went"),
            format!("{mode}: the agent linked and waited: {out}"),
        );
        c.check(
            victim.exists(),
            format!(
                "{mode}: the person's lock in another repository is still there: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
        );
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_file(&go);
    }

    // 5. A link planted where tyba copies a session branch's reflog from (by an agent of a
    // `--here` session; the branch is another session's, `tyba/keep`): the next session on
    // that branch must not get the file it names in its copy of the reflog.
    let secret = r.root.join("secret");
    std::fs::write(&secret, "THE PERSON'S PRIVATE KEY\n").unwrap();
    give(&secret, &who);
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    git_as(&who, &r.wt, &["branch", "tyba/keep"]);
    let keep_wt = r.root.join("wt-keep");
    git_as(
        &who,
        &r.wt,
        &[
            "worktree",
            "add",
            "-q",
            &keep_wt.to_string_lossy(),
            "tyba/keep",
        ],
    );
    let (out, err) = tyba_here(&r, &who, REFLOG_LINK, &secret.to_string_lossy(), "");
    c.check(
        out.contains("linked reflog") && git_dir.join("logs/refs/heads/tyba/keep").is_symlink(),
        format!("the agent linked the other session's reflog: {out} {err}"),
    );
    let (out, err) = tyba_here_in(&r, &who, &keep_wt, READ_REFLOG, "", "");
    c.check(
        out.contains("reflog read") && !out.contains("PRIVATE KEY"),
        format!("the next session's copy of its reflog holds nothing of the file: {out} {err}"),
    );
    c.check(
        out.contains("direct: no"),
        format!("control: the file itself is out of the agent's reach: {out}"),
    );
    let _ = std::fs::remove_file(git_dir.join("logs/refs/heads/tyba/keep"));

    // 6. A link planted on the way to a protected branch a repository policy (which only
    // restricts, so it applies unapproved) names: the next session would make its stand-in
    // and bind wherever the link points. It refuses to start instead, naming the link.
    let elsewhere = r.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    give(&elsewhere, &who);
    let (out, err) = tyba_here(&r, &who, PROTECTED_LINK, &elsewhere.to_string_lossy(), "");
    c.check(
        out.contains("linked evil"),
        format!("the agent planted the link and the policy: {out} {err}"),
    );
    let (out, err) = tyba_here(
        &r,
        &who,
        "test -e \"$(git rev-parse --git-dir)/refs/heads/evil/made\" && echo made; echo ran",
        "",
        "",
    );
    c.check(
        !out.contains("ran")
            && err.contains("is reached through a symbolic link")
            && std::fs::read_dir(&elsewhere).unwrap().count() == 0,
        format!("the next session refuses to start, nothing made through the link: {out} {err}"),
    );
    // Control: with the link gone, the same policy starts and holds the branch's name.
    std::fs::remove_file(git_dir.join("refs/heads/evil")).unwrap();
    let (out, err) = tyba_here(
        &r,
        &who,
        "test -d \"$(git rev-parse --git-dir)/refs/heads/evil/made\" && echo held; echo ran",
        "",
        "",
    );
    c.check(
        out.contains("ran") && out.contains("held"),
        format!("control: without the link the session starts and holds evil/made: {out} {err}"),
    );
    let _ = std::fs::remove_dir_all(r.wt.join(".tyba"));

    // 4. The aside name taken in advance: the repair still puts logs back.
    let (out, err) = tyba_here(&r, &who, ASIDE_TAKEN, "", "");
    c.check(
        out.contains("taken"),
        format!("the agent took the names: {out} {err}"),
    );
    c.check(
        git_dir.join("logs").is_dir()
            && err.contains("logs was moved to")
            && err.contains("moved back; what stood in its place is kept at"),
        format!("logs is put back though the old aside name was taken: {err}"),
    );
    let (commit_ok, _) = git(
        &who,
        &r.wt,
        &["commit", "-q", "--allow-empty", "-m", "person"],
    );
    let (_, reflog) = git(&who, &r.wt, &["reflog", "-n", "1", "--format=%gs"]);
    c.check(
        commit_ok && reflog.contains("person"),
        format!("the person's commit and reflog work after: {commit_ok} {reflog:?}"),
    );
    // Control: the same plant without tyba leaves logs a file (the check can fail).
    let bare = r.root.join("bare-aside");
    make_repo(&who, &bare);
    let mut b = command_as(&who, Path::new("/bin/bash"));
    b.arg("-c")
        .arg(ASIDE_TAKEN)
        .current_dir(&bare)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TYBA_SESSION", "0a1b2c3d4e5f")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let bo = b.output().unwrap();
    c.check(
        stdout_of(&bo).contains("taken") && bare.join(".git/logs").is_file(),
        "control: without tyba the plant leaves logs a file",
    );
    drop(r);
    c.finish(&format!(
        "{who:?}: links the agent planted in the repository"
    ));
}

#[test]
fn the_end_repair_follows_no_link_the_agent_planted_as_root_or_self() {
    links_suite(Who::Me, "repo-links-me");
}

#[test]
fn the_end_repair_follows_no_link_the_agent_planted_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    links_suite(who, "repo-links-user");
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

/// An index the agent garbles in the person's checkout makes every later git command fail:
/// the end names it (review 33's r33-02). An index the agent changes as git does (`git add`)
/// is not named.
fn index_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let said = "is no index git can read";
    let (_, err) = tyba_here(&r, &who, "echo n > n.txt && git add n.txt", "", "");
    assert!(!err.contains(said), "a git add is named: {err}");
    let (ok, staged) = git(&who, &r.wt, &["diff", "--cached", "--name-only"]);
    assert!(
        ok && staged.contains("n.txt"),
        "the agent's git add: {staged} {err}"
    );
    let (_, err) = tyba_here(&r, &who, "printf 'DIRC garbage' > .git/index", "", "");
    assert!(err.contains(said), "the garbled index is not named: {err}");
    // The check can fail: the person's git does trip on it.
    assert!(!git(&who, &r.wt, &["status", "--porcelain"]).0);
}

#[test]
fn a_garbled_index_is_named_at_the_end_as_root_or_self() {
    index_suite(Who::Me, "repo-index-me");
}

#[test]
fn a_garbled_index_is_named_at_the_end_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    index_suite(who, "repo-index-user");
}
