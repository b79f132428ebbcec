//! The person's git objects (issue 13 classes 5 and 6; review 27's r27-01): an agent in a
//! session with its own branch (the default linked worktree) rewrites objects of the person's
//! repository under their own names (in place, by a rename over them), removes one, writes an
//! object whose content does not match its name and a commit-graph, and commits its own work,
//! through perl with paths from the environment (only the kernel layer stops those), at
//! `--non-interactive --autonomy high`, as root and as the unprivileged `TYBA_TEST_USER`.
//! Checked from outside: the person's objects are as they were and git's `fsck` finds nothing,
//! the forged object and the commit-graph are not carried, the agent's commit is, and the
//! person is told. Control: the same script without the sandbox rewrites the person's object.
//! Then a session killed after its commit: the next `tyba worktrees` carries its objects and
//! branch in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `git -C dir ARGS` as `who`, outside: (whether it succeeded, stdout and stderr).
fn git_run(who: &Who, dir: &Path, args: &[&str]) -> (bool, String) {
    let mut c = command_as(who, Path::new("/usr/bin/env"));
    c.arg("git").arg("-C").arg(dir).args(args);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null());
    let o = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text.trim().to_string())
}

fn git_out(who: &Who, dir: &Path, args: &[&str]) -> String {
    let (ok, text) = git_run(who, dir, args);
    if ok {
        text
    } else {
        String::new()
    }
}

/// The loose object file of `id` in the common dir `c`.
fn object_file(c: &Path, id: &str) -> PathBuf {
    c.join("objects").join(&id[..2]).join(&id[2..])
}

fn worktree_from(stderr: &str) -> Option<PathBuf> {
    let line = stderr.lines().find(|l| l.contains(": worktree "))?;
    Some(PathBuf::from(line.split(": worktree ").nth(1)?.trim()))
}

/// `tyba run --non-interactive --autonomy high -- bash -c SCRIPT` in the person's checkout
/// (a linked worktree is made for it): (stderr, the worktree, its `report` directory).
fn agent_session(
    r: &SandboxRepo,
    who: &Who,
    env: &[(OsString, OsString)],
    script: &str,
) -> (String, Option<PathBuf>, PathBuf) {
    let args = [
        "run",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        script,
    ];
    let o = run_tyba(who, &r.tyba, &r.wt, env, &args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let wt = worktree_from(&err);
    let report = wt.clone().unwrap_or_else(|| r.root.clone()).join("report");
    (err, wt, report)
}

/// The agent's own commit first (it needs the person's commit as its parent), then every way
/// of changing the person's objects: the README's blob rewritten in place (made writable
/// first), the root tree replaced by a rename over it, the person's commit removed, an
/// object written under a name its content does not have, a commit-graph.
const OBJECTS_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
B=$(git rev-parse main:README.md); T=$(git rev-parse 'main^{tree}'); P=$(git rev-parse main)
echo own > own.txt; git add own.txt; git commit -q -m own-work; echo "commit $?" > "$R/own"
git rev-parse --abbrev-ref HEAD > "$R/branch"
E=$(echo 'planted by the agent' | git hash-object -w --stdin)
C="$C" B="$B" T="$T" P="$P" E="$E" perl -e '
  sub obj { my $id = shift; return "$ENV{C}/objects/" . substr($id, 0, 2) . "/" . substr($id, 2) }
  open(my $i, "<", obj($ENV{E})) or die "read: $!"; binmode $i; local $/; my $d = <$i>; close $i;
  sub put { my ($p, $t) = @_; if (open(my $o, ">", $p)) { binmode $o; print $o $t; close $o; return 1 } print "open $p: $!\n"; return 0 }
  chmod(0644, obj($ENV{B}));
  print "rewrote blob\n" if put(obj($ENV{B}), $d);
  my $tmp = "$ENV{C}/objects/" . substr($ENV{T}, 0, 2) . "/tmp_evil";
  if (put($tmp, $d)) { rename($tmp, obj($ENV{T})) ? print "renamed over tree\n" : print "rename: $!\n" }
  unlink(obj($ENV{P})) ? print "removed commit\n" : print "unlink commit: $!\n";
  mkdir("$ENV{C}/objects/ab");
  print "forged\n" if put("$ENV{C}/objects/ab/" . ("c" x 38), $d);
  print "commit-graph\n" if put("$ENV{C}/objects/info/commit-graph", "CGPH");
' > "$R/perl"
git cat-file blob "$B" > "$R/inside"
echo finished > "$R/finished"
"#;

fn objects_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let c = r.wt.join(".git");
    let blob = git_out(&who, &r.wt, &["rev-parse", "HEAD:README.md"]);
    let tree = git_out(&who, &r.wt, &["rev-parse", "HEAD^{tree}"]);
    let commit = git_out(&who, &r.wt, &["rev-parse", "HEAD"]);
    let blob_bytes = std::fs::read(object_file(&c, &blob)).unwrap();
    let tree_bytes = std::fs::read(object_file(&c, &tree)).unwrap();
    let forged = format!("ab{}", "c".repeat(38));
    let env = base_env(&r.home, &[]);
    let mut k = Checks::default();

    let (err, wt, report) = agent_session(&r, &who, &env, OBJECTS_SCRIPT);
    k.check(
        read(&report.join("finished")).trim() == "finished" && wt.is_some(),
        format!("the agent ran in a linked worktree: {err}"),
    );
    let perl = read(&report.join("perl"));
    // Inside, every attempt seems to work: the agent's view is its own.
    k.check(
        [
            "rewrote blob",
            "renamed over tree",
            "removed commit",
            "forged",
            "commit-graph",
        ]
        .iter()
        .all(|l| perl.lines().any(|p| p == *l))
            && read(&report.join("inside")).trim() == "planted by the agent",
        format!("inside the session the attempts reach the agent's view: {perl}"),
    );
    // Outside, the person's objects are as they were.
    k.check(
        std::fs::read(object_file(&c, &blob)).ok() == Some(blob_bytes.clone())
            && git_out(&who, &r.wt, &["cat-file", "blob", &blob]) == "hello",
        "the README's blob is unchanged outside",
    );
    k.check(
        std::fs::read(object_file(&c, &tree)).ok() == Some(tree_bytes.clone()),
        "the root tree is unchanged outside",
    );
    k.check(
        git_out(&who, &r.wt, &["cat-file", "-t", &commit]) == "commit",
        "the person's commit is still there",
    );
    k.check(
        git_out(&who, &r.wt, &["cat-file", "-t", &forged]).is_empty()
            && !object_file(&c, &forged).exists(),
        "the object whose content does not match its name is not carried",
    );
    k.check(
        !c.join("objects/info/commit-graph").exists(),
        "the agent's commit-graph is not carried",
    );
    let (fsck_ok, fsck) = git_run(&who, &r.wt, &["fsck", "--no-dangling"]);
    k.check(
        fsck_ok && fsck.is_empty(),
        format!("git fsck is clean: {fsck}"),
    );
    // The agent's own work is carried, and the person is told of the rest.
    let branch = read(&report.join("branch")).trim().to_string();
    k.check(
        read(&report.join("own")).trim() == "commit 0"
            && branch.starts_with("tyba/")
            && git_out(&who, &r.wt, &["log", "-1", "--format=%s", &branch]) == "own-work",
        format!("the agent's commit is on its branch outside: {branch} / {err}"),
    );
    k.check(
        err.contains("rewrote 2 of the repository's objects")
            && err.contains(&forged)
            && err.contains("does not match their name"),
        format!("the person is told of the rewritten and the forged objects: {err}"),
    );

    // Control: the same script without the sandbox, in the same worktree, rewrites the
    // person's blob and tree and removes their commit.
    if let Some(wt) = &wt {
        std::fs::remove_dir_all(&report).unwrap();
        bare_bash_as(&who, wt, &env, OBJECTS_SCRIPT);
        k.check(
            std::fs::read(object_file(&c, &blob)).ok() != Some(blob_bytes)
                && git_out(&who, &r.wt, &["cat-file", "blob", &blob]) == "planted by the agent",
            "control: without tyba the person's blob now holds the agent's content",
        );
        k.check(
            std::fs::read(object_file(&c, &tree)).ok() != Some(tree_bytes),
            "control: without tyba the person's tree is replaced",
        );
        k.check(
            git_out(&who, &r.wt, &["cat-file", "-t", &commit]).is_empty(),
            "control: without tyba the person's commit is gone",
        );
    }
    k.finish(tag);
}

#[test]
fn the_persons_objects_cannot_be_rewritten_as_root_or_self() {
    objects_suite(Who::Me, "objects-me");
}

#[test]
fn the_persons_objects_cannot_be_rewritten_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    objects_suite(who, "objects-user");
}

/// Starts `tyba run --non-interactive --autonomy high -- bash -c SCRIPT` in the person's
/// checkout without waiting, then waits (at most 60 s) for the agent's worktree to hold the
/// file `committed`: (the running `tyba`, that worktree).
fn start_until_committed(
    r: &SandboxRepo,
    who: &Who,
    env: &[(OsString, OsString)],
    script: &str,
) -> (std::process::Child, Option<PathBuf>) {
    let mut c = command_as(who, &r.tyba);
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
    .current_dir(&r.wt)
    .env_clear()
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    for (key, v) in env {
        c.env(key, v);
    }
    let child = c.spawn().unwrap();
    let wts = r.home.join(".local/state/tyba/worktrees");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if let Ok(rd) = std::fs::read_dir(&wts) {
            if let Some(wt) = rd
                .flatten()
                .map(|e| e.path())
                .find(|p| p.join("committed").exists())
            {
                return (child, Some(wt));
            }
        }
    }
    (child, None)
}

/// The agent commits, says so, and waits to be killed.
const KILLED_SCRIPT: &str = r#"
echo own > own.txt; git add own.txt; git commit -q -m killed-work
git rev-parse --abbrev-ref HEAD > committed.tmp && mv committed.tmp committed
sleep 60
"#;

fn killed_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env: Vec<(OsString, OsString)> = base_env(&r.home, &[]);
    let mut k = Checks::default();
    let (mut child, wt) = start_until_committed(&r, &who, &env, KILLED_SCRIPT);
    let branch = wt
        .map(|w| read(&w.join("committed")).trim().to_string())
        .unwrap_or_default();
    // The supervisor is killed: its sandbox dies with it, before any end of session.
    let _ = child.kill();
    let _ = child.wait();
    k.check(
        branch.starts_with("tyba/"),
        format!("the agent committed: {branch}"),
    );
    k.check(
        git_out(&who, &r.wt, &["log", "-1", "--format=%s", &branch]) != "killed-work",
        "before a recovery the branch is where it was",
    );
    let o = run_tyba(&who, &r.tyba, &r.wt, &env, &["worktrees"]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    k.check(
        git_out(&who, &r.wt, &["log", "-1", "--format=%s", &branch]) == "killed-work",
        format!("`tyba worktrees` carries the killed session's objects and branch in: {out}"),
    );
    let (fsck_ok, fsck) = git_run(&who, &r.wt, &["fsck", "--no-dangling"]);
    k.check(
        fsck_ok && fsck.is_empty(),
        format!("git fsck is clean: {fsck}"),
    );
    k.finish(tag);
}

#[test]
fn a_killed_sessions_objects_are_carried_in_later_as_root_or_self() {
    killed_suite(Who::Me, "objects-killed-me");
}

#[test]
fn a_killed_sessions_objects_are_carried_in_later_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    killed_suite(who, "objects-killed-user");
}

/// The person's packs are never copied into the session's layer: git freshens a packed
/// object it would write again by setting the pack's times, which would copy the whole pack
/// up; the packs are read-only binds, so the times cannot be set (`EROFS`) and git writes the
/// object loose instead. The agent's `git hash-object -w` of a packed blob succeeds.
const PACKS_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
git hash-object -w README.md > "$R/hashed"; echo "hash-object $?" >> "$R/hashed"
C="$C" perl -e '
  for my $p (glob("$ENV{C}/objects/pack/*.pack")) { utime(undef, undef, $p) ? print "set times\n" : print "utime: $!\n" }
' > "$R/perl"
echo finished > "$R/finished"
"#;

fn packs_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    git_run(&who, &r.wt, &["gc", "-q"]);
    let packs = r.wt.join(".git/objects/pack");
    let listed = |d: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        (
                            e.file_name().to_string_lossy().into_owned(),
                            std::fs::read(e.path()).unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let before = listed(&packs);
    let env = base_env(&r.home, &[]);
    let mut k = Checks::default();
    k.check(
        before.iter().any(|(n, _)| n.ends_with(".pack")),
        "the person's objects are packed",
    );
    let (err, wt, report) = agent_session(&r, &who, &env, PACKS_SCRIPT);
    k.check(
        read(&report.join("finished")).trim() == "finished",
        format!("the agent ran: {err}"),
    );
    k.check(
        read(&report.join("hashed")).contains("hash-object 0"),
        format!(
            "the agent's git writes a packed object again: {}",
            read(&report.join("hashed"))
        ),
    );
    let perl = read(&report.join("perl"));
    k.check(
        perl.contains("utime: Read-only file system") && !perl.contains("set times"),
        format!("the person's packs are read-only binds inside: {perl}"),
    );
    k.check(listed(&packs) == before, "the person's packs are unchanged");
    // Control: without the sandbox the times are set.
    if let Some(wt) = &wt {
        std::fs::remove_dir_all(&report).unwrap();
        bare_bash_as(&who, wt, &env, PACKS_SCRIPT);
        k.check(
            read(&report.join("perl")).contains("set times"),
            "control: without tyba the pack's times are set",
        );
    }
    k.finish(tag);
}

#[test]
fn the_persons_packs_are_never_copied_into_the_layer_as_root_or_self() {
    packs_suite(Who::Me, "objects-packs-me");
}

#[test]
fn the_persons_packs_are_never_copied_into_the_layer_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    packs_suite(who, "objects-packs-user");
}

/// The agent commits, says so, and waits for the person's go (review 28's r28-03: the
/// person's own `git gc` walks the session's worktree, whose index and `HEAD` reflog name the
/// agent's new objects).
const GC_SCRIPT: &str = r#"
echo own > own.txt; git add own.txt; git commit -q -m gc-work
git rev-parse HEAD > committed.tmp && mv committed.tmp committed
for i in $(seq 300); do [ -e go ] && break; sleep 0.1; done
"#;

fn gc_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env: Vec<(OsString, OsString)> = base_env(&r.home, &[]);
    let mut k = Checks::default();
    let (mut child, wt) = start_until_committed(&r, &who, &env, GC_SCRIPT);
    k.check(wt.is_some(), "the agent committed");
    // While the session runs, the person's own gc in the main repository succeeds once the
    // agent's objects are carried in (every 2 s).
    let mut gc = (false, String::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while std::time::Instant::now() < deadline {
        gc = git_run(&who, &r.wt, &["gc", "-q"]);
        if gc.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    k.check(
        gc.0,
        format!("the person's git gc succeeds during the session: {}", gc.1),
    );
    let (prune_ok, prune) = git_run(&who, &r.wt, &["prune"]);
    k.check(
        prune_ok,
        format!("the person's git prune succeeds during the session: {prune}"),
    );
    if let Some(wt) = &wt {
        std::fs::write(wt.join("go"), "").unwrap();
    }
    let _ = child.wait();
    let (fsck_ok, fsck) = git_run(&who, &r.wt, &["fsck", "--no-dangling"]);
    k.check(
        fsck_ok && fsck.is_empty(),
        format!("git fsck is clean after: {fsck}"),
    );
    let branch = git_out(
        &who,
        &r.wt,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/tyba/",
        ],
    );
    k.check(
        git_out(&who, &r.wt, &["log", "-1", "--format=%s", &branch]) == "gc-work",
        format!("the agent's commit is on its branch: {branch}"),
    );
    k.finish(tag);
}

#[test]
fn the_persons_gc_works_while_a_session_runs_as_root_or_self() {
    gc_suite(Who::Me, "objects-gc-me");
}

#[test]
fn the_persons_gc_works_while_a_session_runs_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    gc_suite(who, "objects-gc-user");
}

/// The agent moves its branch (and so its worktree's `HEAD` reflog) to a commit whose tree
/// nobody has (review 30's r30-02): the branch is not carried back, and the worktree is
/// mended so that the person's own `git gc` does not stop on it.
const BROKEN_SCRIPT: &str = r#"
B=$(printf 'tree 1111111111111111111111111111111111111111\nauthor a <a@e> 1 +0000\ncommitter a <a@e> 1 +0000\n\nbroken\n' | git hash-object -t commit -w --stdin)
git update-ref -m broken HEAD "$B"; echo "moved $?" > moved
"#;

fn broken_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env = base_env(&r.home, &[]);
    let mut k = Checks::default();
    let (err, wt, _) = agent_session(&r, &who, &env, BROKEN_SCRIPT);
    let Some(wt) = wt else {
        k.check(false, format!("the agent ran in a linked worktree: {err}"));
        return k.finish(tag);
    };
    k.check(
        read(&wt.join("moved")).trim() == "moved 0",
        format!("the agent moved its branch to the broken commit: {err}"),
    );
    k.check(
        err.contains("name objects the repository lacks"),
        format!("the person is told: {err}"),
    );
    let (gc_ok, gc) = git_run(&who, &r.wt, &["gc", "-q"]);
    k.check(
        gc_ok,
        format!("the person's git gc succeeds after the session: {gc}"),
    );
    // Control: the same script without the sandbox leaves the person's gc stopping.
    bare_bash_as(&who, &wt, &env, BROKEN_SCRIPT);
    let (gc_ok, _) = git_run(&who, &r.wt, &["gc", "-q"]);
    k.check(
        !gc_ok,
        "control: without tyba the person's git gc stops on the broken commit",
    );
    k.finish(tag);
}

#[test]
fn a_commit_naming_missing_objects_leaves_the_persons_gc_working_as_root_or_self() {
    broken_suite(Who::Me, "objects-broken-me");
}

#[test]
fn a_commit_naming_missing_objects_leaves_the_persons_gc_working_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    broken_suite(who, "objects-broken-user");
}
