//! The git fault classes of the second review of the kernel layer (issue 13): the person's
//! branches (class 6) and the git files the person's git runs or obeys (class 5), each
//! attempted from inside `tyba run` (the default linked worktree, and `--here`) at
//! `--non-interactive --autonomy high`, as root and as the unprivileged `TYBA_TEST_USER`, with
//! the effect checked from outside the sandbox, and each with a control: the same attempt run
//! as the same user without the sandbox, which must succeed (so the check can fail).
//!
//! The attempts are made through perl with paths from the environment where the classifier
//! would refuse the command line first: only the kernel layer stops those.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `tyba run FLAGS --non-interactive --autonomy high -- bash -c SCRIPT` in `dir`:
/// (stdout, stderr).
fn tyba_bash(
    r: &SandboxRepo,
    who: &Who,
    dir: &Path,
    flags: &[&str],
    env: &[(OsString, OsString)],
    script: &str,
) -> (String, String) {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend([
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        script,
    ]);
    let o = run_tyba(who, &r.tyba, dir, env, &args);
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `git -C dir ARGS` as `who`, outside; its trimmed stdout ("" when it fails).
fn git_out(who: &Who, dir: &Path, args: &[&str]) -> String {
    let mut c = command_as(who, Path::new("/usr/bin/env"));
    c.arg("git").arg("-C").arg(dir).args(args);
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let o = c.output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn worktree_from(stderr: &str) -> Option<PathBuf> {
    let line = stderr.lines().find(|l| l.contains(": worktree "))?;
    Some(PathBuf::from(line.split(": worktree ").nth(1)?.trim()))
}

// ------------------------------------------------------------- class 6: branches ----

/// Moves, makes and deletes the person's refs of the main repository from a linked
/// worktree: with git (`update-ref`, `branch -f`, deleting a packed branch), and by writing
/// the files directly (loose refs, `packed-refs` written and replaced by rename, the main
/// worktree's `HEAD`, reflogs, tags, replace refs, remote-tracking refs). Then the agent's
/// own work: a commit on its branch and a new `tyba/…` branch.
const BRANCH_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
NEW=$(git commit-tree -m evil "HEAD^{tree}")
git update-ref refs/heads/main "$NEW"; echo "update-ref main $?" >> "$R/git"
git update-ref refs/heads/packed "$NEW"; echo "update-ref packed $?" >> "$R/git"
git branch -f feature "$NEW"; echo "branch -f feature $?" >> "$R/git"
git update-ref -d refs/heads/packed; echo "delete packed $?" >> "$R/git"
git branch person-new "$NEW"; echo "branch person-new $?" >> "$R/git"
C="$C" NEW="$NEW" perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", "$ENV{C}/$p")) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  put("refs/heads/main", "$ENV{NEW}\n");
  put("refs/heads/feature", "$ENV{NEW}\n");
  put("refs/heads/person-new", "$ENV{NEW}\n");
  put("refs/tags/v-evil", "$ENV{NEW}\n");
  put("refs/remotes/origin/main", "$ENV{NEW}\n");
  put("refs/replace/$ENV{NEW}", "$ENV{NEW}\n");
  put("packed-refs", "$ENV{NEW} refs/heads/packed\n");
  put("packed-refs.new", "$ENV{NEW} refs/heads/packed\n");
  rename("$ENV{C}/packed-refs.new", "$ENV{C}/packed-refs") ? print "renamed packed-refs\n" : print "rename packed-refs: $!\n";
  put("HEAD", "ref: refs/heads/feature\n");
  put("logs/refs/heads/main", "");
  mkdir("$ENV{C}/refs/heads/evil") ? print "mkdir refs/heads/evil\n" : print "mkdir refs/heads/evil: $!\n";
  unlink("$ENV{C}/refs/heads/feature") ? print "unlinked feature\n" : print "unlink feature: $!\n";
  # Through its own branch directory: a hard link to main written in place, a symbolic link.
  if (link("$ENV{C}/refs/heads/main", "$ENV{C}/refs/heads/tyba/hard")) { put("refs/heads/tyba/hard", "$ENV{NEW}\n") } else { print "link main: $!\n" }
  if (symlink("../main", "$ENV{C}/refs/heads/tyba/soft")) { put("refs/heads/tyba/soft", "$ENV{NEW}\n") } else { print "symlink main: $!\n" }
' > "$R/perl"
echo own > own.txt; git add own.txt; git commit -q -m own-work; echo "commit $?" >> "$R/own"
git branch tyba/extra; echo "branch tyba/extra $?" >> "$R/own"
echo finished > "$R/finished"
"#;

fn branch_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    // The person's branches: `main` checked out (loose), `feature` (loose), `packed` (only in
    // packed-refs).
    git_as(&who, &r.wt, &["branch", "packed"]);
    git_as(&who, &r.wt, &["pack-refs", "--all"]);
    git_as(&who, &r.wt, &["branch", "feature"]);
    let git_dir = r.wt.join(".git");
    let refs_before = git_out(&who, &r.wt, &["for-each-ref"]);
    let packed_before = read(&git_dir.join("packed-refs"));
    let head_before = read(&git_dir.join("HEAD"));
    let main_log_before = read(&git_dir.join("logs/refs/heads/main"));
    let env = base_env(&r.home, &[]);
    let mut c = Checks::default();

    let (_out, err) = tyba_bash(&r, &who, &r.wt, &[], &env, BRANCH_SCRIPT);
    let wt = worktree_from(&err);
    let report = wt.clone().unwrap_or_else(|| r.root.clone()).join("report");
    c.check(
        read(&report.join("finished")).trim() == "finished" && wt.is_some(),
        format!("the agent ran in a linked worktree: {err}"),
    );
    let perl = read(&report.join("perl"));
    // The common dir's root is the session's private layer (`crate::git_layer`): names
    // outside the person's branches, `packed-refs` and `HEAD` (tags, remote-tracking and
    // replace refs, reflogs, a new file in the root) are written there, never in the main
    // git dir (checked from outside below).
    let layered = |l: &str| {
        [
            "refs/tags/",
            "refs/remotes/",
            "refs/replace/",
            "logs/",
            "packed-refs.new",
        ]
        .iter()
        .any(|n| l.strip_prefix("wrote ").is_some_and(|p| p.starts_with(n)))
    };
    c.check(
        !perl.lines().any(|l| l.starts_with("wrote ") && !layered(l))
            && !perl.contains("renamed")
            && !perl.contains("unlinked")
            && !perl.lines().any(|l| l == "mkdir refs/heads/evil"),
        format!("no ref file of the main repository written directly: {perl}"),
    );
    let gitlog = read(&report.join("git"));
    c.check(
        gitlog.lines().all(|l| !l.ends_with(" 0")),
        format!("git cannot move, make or delete the person's refs: {gitlog}"),
    );
    c.check(
        git_out(&who, &r.wt, &["for-each-ref", "--exclude=refs/heads/tyba/"]) == refs_before,
        format!(
            "the person's refs are as they were: {} vs {refs_before}",
            git_out(&who, &r.wt, &["for-each-ref"])
        ),
    );
    c.check(
        read(&git_dir.join("packed-refs")) == packed_before,
        "packed-refs unchanged",
    );
    c.check(
        read(&git_dir.join("HEAD")) == head_before,
        "the main worktree's HEAD unchanged",
    );
    c.check(
        read(&git_dir.join("logs/refs/heads/main")) == main_log_before,
        "main's reflog unchanged",
    );
    for p in [
        "refs/heads/person-new",
        "refs/heads/evil",
        "refs/tags/v-evil",
        "refs/remotes/origin/main",
        "refs/replace",
        "packed-refs.new",
    ] {
        c.check(
            std::fs::symlink_metadata(git_dir.join(p)).is_err(),
            format!("{p} not made in the main git dir"),
        );
    }
    // The agent's own work still lands on its own branch; a branch it makes beside it stays
    // in its session (named at the end, not carried back).
    let own = read(&report.join("own"));
    c.check(
        own.contains("commit 0") && own.contains("branch tyba/extra 0"),
        format!("the agent commits on its branch and makes branches inside: {own} / {err}"),
    );
    let branches = git_out(&who, &r.wt, &["branch", "--list", "tyba/*"]);
    c.check(
        !branches.contains("tyba/extra") && err.contains("tyba/extra"),
        format!("tyba/extra is not made outside, and said: {branches} / {err}"),
    );
    if let Some(wt) = &wt {
        c.check(
            git_out(&who, wt, &["log", "-1", "--format=%s"]) == "own-work",
            "the agent's commit is on its branch",
        );
    }

    // Control: the same script without the sandbox, in the same linked worktree, moves the
    // person's branches and rewrites the main git dir.
    if let Some(wt) = &wt {
        std::fs::remove_dir_all(&report).unwrap();
        bare_bash_as(&who, wt, &env, BRANCH_SCRIPT);
        let perl = read(&report.join("perl"));
        c.check(
            perl.contains("wrote refs/heads/main") && perl.contains("renamed packed-refs"),
            format!("control: without tyba the files are written: {perl}"),
        );
        c.check(
            git_out(&who, &r.wt, &["for-each-ref"]) != refs_before
                && read(&git_dir.join("HEAD")) != head_before,
            "control: without tyba the person's refs and HEAD move",
        );
    }
    c.finish(tag);
}

#[test]
fn the_persons_branches_cannot_move_from_a_linked_worktree_as_root_or_self() {
    branch_suite(Who::Me, "branches-me");
}

#[test]
fn the_persons_branches_cannot_move_from_a_linked_worktree_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    branch_suite(who, "branches-user");
}

// ------------------------------------------------------------ class 5: git files ----

/// Plants, in the `--here` checkout, every kind of git file the person's git then obeys:
/// `.git` renamed away and rebuilt with a `core.fsmonitor`, a `commondir` to a copy with one
/// (its old quarantine name taken first), an absent `config.worktree` created (with
/// `extensions.worktreeConfig`), the other linked worktree's `commondir` and
/// `config.worktree`, an object `alternates`, `info/attributes`, a remote by file. Each
/// fsmonitor hook marks a file of its own outside when it runs.
const HERE_SCRIPT: &str = r##"
R="$PWD/report"; mkdir -p "$R"
mkdir -p .git/commondir.tyba-quarantined 2>/dev/null
cp -a .git evil-common 2>/dev/null
printf '[core]\n\tfsmonitor = %s\n' "$HOOKS/commondir" >> evil-common/config
perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", $p)) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  put(".git/commondir", "../evil-common\n");
  put(".git/config.worktree", "[core]\n\tfsmonitor = $ENV{HOOKS}/config-worktree\n");
  put(".git/worktrees/other/commondir", "$ENV{PWD}/evil-common\n");
  put(".git/worktrees/other/config.worktree", "[core]\n\tfsmonitor = $ENV{HOOKS}/other-config-worktree\n");
  put(".git/objects/info/alternates", "$ENV{PWD}/evil-common/objects\n");
  put(".git/info/attributes", "* filter=evil\n");
  mkdir(".git/remotes"); put(".git/remotes/origin", "URL: /tmp/evil\n");
  put("shared.gitconfig", "[core]\n\tfsmonitor = $ENV{HOOKS}/include\n");
  mkdir(".githooks"); put(".githooks/pre-commit", "#!/bin/sh\n");
  put("tools/conv.sh", "#!/bin/sh\n");
' > "$R/plant"
perl -e '
  if (rename(".git", ".git-away")) {
    print "renamed .git\n";
    system("cp", "-a", ".git-away", ".git");
    open(my $f, ">>", ".git/config") or die; print $f "[core]\n\tfsmonitor = $ENV{HOOKS}/rebuilt\n"; close $f;
  } else { print "rename .git: $!\n" }
  rmdir(".git") ? print "removed .git\n" : print "rmdir .git: $!\n";
' > "$R/rename"
echo finished > "$R/finished"
"##;

/// Writes an fsmonitor hook at `hooks/NAME` that marks `marks/NAME` when git runs it.
fn hook(hooks: &Path, marks: &Path, name: &str) {
    write_exe(
        &hooks.join(name),
        &format!("#!/bin/sh\necho ran > {}/{name}\nexit 1\n", marks.display()),
    );
}

const HOOK_NAMES: &[&str] = &[
    "include",
    "commondir",
    "config-worktree",
    "other-config-worktree",
    "rebuilt",
];

fn here_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let hooks = r.root.join("hooks");
    let marks = r.root.join("marks");
    let report = r.wt.join("report");
    for d in [&hooks, &marks] {
        std::fs::create_dir_all(d).unwrap();
    }
    for n in HOOK_NAMES {
        hook(&hooks, &marks, n);
    }
    give(&r.root, &who);
    git_as(
        &who,
        &r.wt,
        &["config", "extensions.worktreeConfig", "true"],
    );
    // Configuration that names worktree files for git to read or run: a shared config
    // included from the worktree, a hooks dir and a diff driver's program in it (absent).
    git_as(
        &who,
        &r.wt,
        &["config", "include.path", "../shared.gitconfig"],
    );
    git_as(&who, &r.wt, &["config", "core.hooksPath", ".githooks"]);
    git_as(
        &who,
        &r.wt,
        &["config", "diff.evil.textconv", "./tools/conv.sh"],
    );
    std::fs::create_dir_all(r.wt.join("tools")).unwrap();
    give(&r.wt.join("tools"), &who);
    let other = r.root.join("other");
    git_as(
        &who,
        &r.wt,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "other",
            other.to_str().unwrap(),
        ],
    );
    let git_dir = r.wt.join(".git");
    let ino_before = std::fs::metadata(&git_dir).unwrap().ino();
    let other_commondir = read(&git_dir.join("worktrees/other/commondir"));
    let config_before = read(&git_dir.join("config"));
    let env = base_env(&r.home, &[("HOOKS", hooks.clone().into())]);
    // What the person runs afterwards, in both checkouts: each planted hook would mark.
    let persons_status = || {
        for d in [&r.wt, &other] {
            let _ = git_out(&who, d, &["status", "--porcelain"]);
        }
    };
    let mut c = Checks::default();

    let (_out, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, HERE_SCRIPT);
    c.check(
        read(&report.join("finished")).trim() == "finished",
        format!("the agent ran: {err}"),
    );
    let plant = read(&report.join("plant"));
    c.check(
        !plant.contains("wrote "),
        format!("no git file planted: {plant}"),
    );
    let ren = read(&report.join("rename"));
    c.check(
        ren.contains("rename .git: Device or resource busy") && !ren.contains("removed .git"),
        format!(".git cannot be renamed or removed: {ren}"),
    );
    c.check(
        std::fs::metadata(&git_dir).unwrap().ino() == ino_before,
        ".git is the same directory",
    );
    for p in [
        "commondir",
        "config.worktree",
        "worktrees/other/config.worktree",
        "objects/info/alternates",
        "info/attributes",
        "remotes/origin",
        "../shared.gitconfig",
        "../.githooks",
        "../tools/conv.sh",
    ] {
        c.check(
            std::fs::symlink_metadata(git_dir.join(p)).is_err(),
            format!(".git/{p} absent after the session: {err}"),
        );
    }
    c.check(
        read(&git_dir.join("worktrees/other/commondir")) == other_commondir,
        "the other worktree's commondir unchanged",
    );
    c.check(
        read(&git_dir.join("config")) == config_before,
        "the config unchanged",
    );
    persons_status();
    for n in HOOK_NAMES {
        c.check(
            !marks.join(n).exists(),
            format!("the person's git status ran no planted fsmonitor ({n})"),
        );
    }
    c.check(
        git_out(&who, &r.wt, &["rev-parse", "HEAD"]).len() == 40,
        "the person's git still works",
    );

    // Control: the same script without the sandbox plants every file, and the person's
    // next `git status` runs the hooks.
    let _ = std::fs::remove_dir_all(r.wt.join("evil-common"));
    let _ = std::fs::remove_dir_all(&report);
    bare_bash_as(&who, &r.wt, &env, HERE_SCRIPT);
    let plant = read(&report.join("plant"));
    c.check(
        plant.contains("wrote .git/commondir")
            && plant.contains("wrote .git/worktrees/other/commondir"),
        format!("control: without tyba the files are written: {plant}"),
    );
    c.check(
        read(&report.join("rename")).contains("renamed .git")
            && std::fs::metadata(&git_dir).unwrap().ino() != ino_before,
        "control: without tyba .git is renamed away and rebuilt",
    );
    // The rebuilt git dir holds the planted commondir too; without it the planted
    // config.worktree (which wins over the rebuilt config) is obeyed.
    let _ = std::fs::remove_file(git_dir.join("commondir"));
    persons_status();
    for n in ["config-worktree", "other-config-worktree"] {
        c.check(
            marks.join(n).exists(),
            format!("control: without tyba the person's git status runs the planted {n}"),
        );
    }
    // Back to the original git dir (the rebuilt one's fsmonitor line wins over the include),
    // without the planted commondir and config.worktree: the included worktree file is
    // obeyed.
    if r.wt.join(".git-away").is_dir() {
        std::fs::remove_dir_all(&git_dir).unwrap();
        std::fs::rename(r.wt.join(".git-away"), &git_dir).unwrap();
    }
    let _ = std::fs::remove_file(git_dir.join("commondir"));
    let _ = std::fs::remove_file(git_dir.join("config.worktree"));
    persons_status();
    c.check(
        marks.join("include").exists() && plant.contains("wrote .githooks/pre-commit"),
        format!("control: without tyba the included worktree config is obeyed: {plant}"),
    );
    c.finish(tag);
}

#[test]
fn git_files_the_person_obeys_cannot_be_planted_here_as_root_or_self() {
    here_suite(Who::Me, "gitfiles-here-me");
}

#[test]
fn git_files_the_person_obeys_cannot_be_planted_here_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    here_suite(who, "gitfiles-here-user");
}

/// The same kinds in the default linked worktree: its absent `config.worktree` (with
/// `extensions.worktreeConfig`), its `gitdir` and `commondir`, the main git dir's object
/// `alternates`, and the `.git` file.
const LINKED_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
G=$(git rev-parse --absolute-git-dir); C=$(git rev-parse --path-format=absolute --git-common-dir)
G="$G" C="$C" perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", $p)) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  put("$ENV{G}/config.worktree", "[core]\n\tfsmonitor = $ENV{HOOKS}/linked-config-worktree\n");
  put("$ENV{G}/commondir", "/tmp\n");
  put("$ENV{G}/gitdir", "/tmp/.git\n");
  put("$ENV{C}/objects/info/alternates", "/tmp\n");
  put(".git", "gitdir: /tmp\n");
  rename("$ENV{G}/config.worktree", "$ENV{G}/cw-away") ? print "renamed config.worktree\n" : print "rename config.worktree: $!\n";
' > "$R/plant"
echo finished > "$R/finished"
"#;

fn linked_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let hooks = r.root.join("hooks");
    let marks = r.root.join("marks");
    for d in [&hooks, &marks] {
        std::fs::create_dir_all(d).unwrap();
    }
    hook(&hooks, &marks, "linked-config-worktree");
    give(&r.root, &who);
    git_as(
        &who,
        &r.wt,
        &["config", "extensions.worktreeConfig", "true"],
    );
    let env = base_env(&r.home, &[("HOOKS", hooks.clone().into())]);
    let mut c = Checks::default();
    let (_out, err) = tyba_bash(&r, &who, &r.wt, &[], &env, LINKED_SCRIPT);
    let Some(wt) = worktree_from(&err) else {
        c.check(false, format!("no linked worktree: {err}"));
        return c.finish(tag);
    };
    let report = wt.join("report");
    let plant = read(&report.join("plant"));
    c.check(
        read(&report.join("finished")).trim() == "finished" && !plant.contains("wrote "),
        format!("nothing planted in the linked worktree: {plant} / {err}"),
    );
    let admin = PathBuf::from(git_out(&who, &wt, &["rev-parse", "--absolute-git-dir"]));
    c.check(
        admin.starts_with(r.wt.join(".git/worktrees")),
        format!(
            "the person's git still finds the admin dir: {}",
            admin.display()
        ),
    );
    c.check(
        std::fs::symlink_metadata(admin.join("config.worktree")).is_err()
            && std::fs::symlink_metadata(r.wt.join(".git/objects/info/alternates")).is_err(),
        "no config.worktree nor alternates after the session",
    );
    let _ = git_out(&who, &wt, &["status", "--porcelain"]);
    c.check(
        !marks.join("linked-config-worktree").exists(),
        "the person's git status in the worktree ran no planted fsmonitor",
    );
    // Control: without tyba the same script plants them and the hook runs.
    let _ = std::fs::remove_dir_all(&report);
    bare_bash_as(&who, &wt, &env, LINKED_SCRIPT);
    let plant = read(&report.join("plant"));
    c.check(
        plant.contains("config.worktree\n") && plant.contains("alternates"),
        format!("control: without tyba the files are written: {plant}"),
    );
    let _ = std::fs::remove_file(r.wt.join(".git/objects/info/alternates"));
    // Undo the redirections the control made so that git finds the admin dir again.
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
    std::fs::write(admin.join("commondir"), "../..\n").unwrap();
    let _ = std::fs::rename(admin.join("cw-away"), admin.join("config.worktree"));
    let _ = git_out(&who, &wt, &["status", "--porcelain"]);
    c.check(
        marks.join("linked-config-worktree").exists(),
        "control: without tyba the person's git status runs the planted fsmonitor",
    );
    c.finish(tag);
}

#[test]
fn git_files_the_person_obeys_cannot_be_planted_in_a_linked_worktree_as_root_or_self() {
    linked_suite(Who::Me, "gitfiles-linked-me");
}

#[test]
fn git_files_the_person_obeys_cannot_be_planted_in_a_linked_worktree_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    linked_suite(who, "gitfiles-linked-user");
}

// ------------------------------------------------- class 7: the repository's policy ----

/// Reads the person's secret in the home directory and plants a file there, through perl
/// (only the kernel layer sees these paths); then tries to approve its own policy file: with
/// `tyba policy allow`, and by writing the approval record (its key computed as tyba does)
/// and the user's policy file directly.
const POLICY_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
perl -e 'if (open(my $f, "<", "$ENV{HOME}/secret.txt")) { print <$f> } else { print "read: $!\n" }' > "$R/read"
perl -e 'if (open(my $f, ">", "$ENV{HOME}/planted")) { print $f "x"; print "planted\n" } else { print "plant: $!\n" }' > "$R/plant"
"$TYBA" policy allow > "$R/allow" 2>&1; echo "allow $?" >> "$R/allow"
perl -MDigest::SHA=sha256_hex -e '
  local $/; open(my $p, "<", ".tyba/policy.toml") or die; my $t = <$p>;
  my $key = sha256_hex("tyba-policy-approval\0" . $ENV{REPO} . "\0" . $t . "\0");
  my $d = "$ENV{XDG_CONFIG_HOME}/tyba/trusted-policies";
  mkdir("$ENV{XDG_CONFIG_HOME}/tyba"); mkdir($d);
  if (open(my $f, ">", "$d/$key")) { print $f "x"; print "recorded\n" } else { print "record: $!\n" }
  if (open(my $f, ">>", "$ENV{XDG_CONFIG_HOME}/tyba/policy.toml")) { print $f "\n"; print "user policy\n" } else { print "user policy: $!\n" }
' > "$R/record"
echo finished > "$R/finished"
"#;

const WIDE_POLICY: &str = "[filesystem]\nread_write = [\"~\"]\n";

fn policy_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    std::fs::write(r.home.join("secret.txt"), "PERSONS-SECRET\n").unwrap();
    give(&r.home, &who);
    let repo_id = std::fs::canonicalize(r.wt.join(".git")).unwrap();
    let env = base_env(
        &r.home,
        &[
            ("TYBA", r.tyba.clone().into()),
            ("REPO", repo_id.clone().into()),
        ],
    );
    let report = r.wt.join("report");
    let approvals = r.home.join(".config/tyba/trusted-policies");
    let mut c = Checks::default();
    // Session 1: the agent writes the repository's policy file (in its worktree, allowed).
    let (_o, err) = tyba_bash(
        &r,
        &who,
        &r.wt,
        &["--here"],
        &env,
        &format!(
            "mkdir -p .tyba && printf '{}' > .tyba/policy.toml",
            WIDE_POLICY.replace('\n', "\\n")
        ),
    );
    c.check(
        read(&r.wt.join(".tyba/policy.toml")) == WIDE_POLICY,
        format!("the agent wrote the repository's policy file: {err}"),
    );
    // Session 2: that file is not approved, so it opens nothing.
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, POLICY_SCRIPT);
    c.check(
        read(&report.join("finished")).trim() == "finished",
        format!("session 2 ran: {err}"),
    );
    c.check(
        !read(&report.join("read")).contains("PERSONS-SECRET"),
        format!(
            "the unapproved policy does not open ~: {}",
            read(&report.join("read"))
        ),
    );
    c.check(
        !r.home.join("planted").exists() && read(&report.join("plant")).trim() != "planted",
        format!(
            "nothing planted in ~ under the unapproved policy, not even in the session: {}",
            read(&report.join("plant"))
        ),
    );
    c.check(
        err.contains("is not approved: only its restrictions apply")
            && err.contains("filesystem.read_write = [\"~\"]"),
        format!("the start-up report says the file is not approved and what is ignored: {err}"),
    );
    c.check(
        !read(&report.join("allow")).contains("allow 0")
            && !read(&report.join("record")).contains("recorded")
            && !read(&report.join("record")).contains("user policy\n")
            && std::fs::read_dir(&approvals).map_or(0, |d| d.count()) == 0,
        format!(
            "the agent cannot approve its own policy file: {} / {}",
            read(&report.join("allow")),
            read(&report.join("record"))
        ),
    );
    let show = run_tyba(&who, &r.tyba, &r.wt, &env, &["policy", "show"]);
    let show_out = String::from_utf8_lossy(&show.stdout).into_owned();
    let json = run_tyba(&who, &r.tyba, &r.wt, &env, &["policy", "show", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_default();
    let rw = json["filesystem"]["read_write"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    c.check(
        show_out.contains("is not approved") && !rw.is_empty() && !rw.iter().any(|v| v == "~"),
        format!("tyba policy show says it is not approved and opens nothing: {show_out}"),
    );

    // Control: the person approves this exact content from outside; the same session then
    // reads the secret and writes in `~` (so the checks above can fail; a `read_write` path
    // is written through the session's private layer, `supervisor/src/caches.rs`, so the
    // plant stays the session's), but still cannot write the person's tyba config although
    // `~` is writable.
    let allow = run_tyba(&who, &r.tyba, &r.wt, &env, &["policy", "allow"]);
    c.check(
        allow.status.success(),
        format!(
            "tyba policy allow: {}",
            String::from_utf8_lossy(&allow.stderr)
        ),
    );
    let show = run_tyba(&who, &r.tyba, &r.wt, &env, &["policy", "show"]);
    c.check(
        String::from_utf8_lossy(&show.stdout).contains("is approved"),
        "tyba policy show says it is approved",
    );
    let records_before = std::fs::read_dir(&approvals).map_or(0, |d| d.count());
    let _ = std::fs::remove_dir_all(&report);
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, POLICY_SCRIPT);
    c.check(
        read(&report.join("read")).contains("PERSONS-SECRET")
            && read(&report.join("plant")).trim() == "planted",
        format!(
            "control: the approved policy opens ~: {} {} / {err}",
            read(&report.join("read")),
            read(&report.join("plant"))
        ),
    );
    c.check(
        !r.home.join("planted").exists(),
        "what the session wrote in ~ stayed in its private layer",
    );
    c.check(
        !read(&report.join("record")).contains("recorded")
            && !read(&report.join("record")).contains("user policy\n")
            && std::fs::read_dir(&approvals).map_or(0, |d| d.count()) == records_before,
        format!(
            "with ~ writable the person's tyba config stays read-only: {}",
            read(&report.join("record"))
        ),
    );
    let _ = std::fs::remove_file(r.home.join("planted"));
    // Any change to the approved bytes needs a new approval.
    std::fs::write(
        r.wt.join(".tyba/policy.toml"),
        format!("{WIDE_POLICY}# changed\n"),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&report);
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, POLICY_SCRIPT);
    c.check(
        !read(&report.join("read")).contains("PERSONS-SECRET")
            && !r.home.join("planted").exists()
            && read(&report.join("plant")).trim() != "planted",
        format!("a changed file is not approved any more: {err}"),
    );
    // And the record the agent computes is the real key: written from outside without the
    // sandbox, it approves the file (so the agent's failure to write it above is the guard).
    let _ = std::fs::remove_dir_all(&report);
    give(&r.home, &who);
    bare_bash_as(&who, &r.wt, &env, POLICY_SCRIPT);
    c.check(
        read(&report.join("record")).contains("recorded"),
        format!(
            "control: without tyba the record is written: {}",
            read(&report.join("record"))
        ),
    );
    let show = run_tyba(&who, &r.tyba, &r.wt, &env, &["policy", "show"]);
    c.check(
        String::from_utf8_lossy(&show.stdout).contains("is approved"),
        "control: the record the agent computes approves the file",
    );
    c.finish(tag);
}

#[test]
fn the_repository_policy_widens_nothing_until_the_person_approves_it_as_root_or_self() {
    policy_suite(Who::Me, "repo-policy-me");
}

#[test]
fn the_repository_policy_widens_nothing_until_the_person_approves_it_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    policy_suite(who, "repo-policy-user");
}

/// A repository with the reftable backend keeps every branch in the same tables: none is
/// writable from a linked worktree (fail closed), said at start.
const REFTABLE_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
NEW=$(git commit-tree -m evil "HEAD^{tree}")
git update-ref refs/heads/main "$NEW"; echo "update-ref main $?" >> "$R/git"
C="$C" perl -e '
  if (open(my $f, ">>", "$ENV{C}/reftable/tables.list")) { print $f "evil.ref\n"; print "wrote tables.list\n" } else { print "tables.list: $!\n" }
  if (open(my $f, ">", "$ENV{C}/reftable/evil.ref")) { print "wrote evil.ref\n" } else { print "evil.ref: $!\n" }
' > "$R/perl"
echo finished > "$R/finished"
"#;

fn reftable_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let rt = r.root.join("rt");
    std::fs::create_dir_all(&rt).unwrap();
    std::fs::write(rt.join("README.md"), "hello\n").unwrap();
    give(&rt, &who);
    git_as(
        &who,
        &rt,
        &["init", "-q", "-b", "main", "--ref-format=reftable"],
    );
    git_as(&who, &rt, &["add", "."]);
    git_as(&who, &rt, &["commit", "-q", "-m", "init"]);
    let main_before = git_out(&who, &rt, &["rev-parse", "main"]);
    let list_before = read(&rt.join(".git/reftable/tables.list"));
    let env = base_env(&r.home, &[]);
    let mut c = Checks::default();
    let (_o, err) = tyba_bash(&r, &who, &rt, &[], &env, REFTABLE_SCRIPT);
    let Some(wt) = worktree_from(&err) else {
        c.check(false, format!("no linked worktree: {err}"));
        return c.finish(tag);
    };
    let report = wt.join("report");
    let perl = read(&report.join("perl"));
    c.check(
        read(&report.join("finished")).trim() == "finished" && !perl.contains("wrote"),
        format!("the reftable tables are not writable: {perl} / {err}"),
    );
    c.check(
        err.contains("reftable backend"),
        format!("the start-up report says so: {err}"),
    );
    // (`git worktree add -b tyba/…` before the session rewrote the tables: compared by
    // content, not by file.)
    let list = read(&rt.join(".git/reftable/tables.list"));
    c.check(
        git_out(&who, &rt, &["rev-parse", "main"]) == main_before && !list.contains("evil"),
        format!("main and the tables are unchanged: {list_before:?} -> {list:?}"),
    );
    // `--here` in the reftable checkout itself: the tables are read-only too.
    let (_o, err) = tyba_bash(&r, &who, &rt, &["--here"], &env, REFTABLE_SCRIPT);
    let here_report = rt.join("report");
    let perl = read(&here_report.join("perl"));
    c.check(
        read(&here_report.join("finished")).trim() == "finished"
            && !perl.contains("wrote")
            && !read(&here_report.join("git")).contains(" 0\n"),
        format!("--here: the reftable tables are not writable: {perl} / {err}"),
    );
    c.check(
        git_out(&who, &rt, &["rev-parse", "main"]) == main_before
            && !read(&rt.join(".git/reftable/tables.list")).contains("evil"),
        "--here: main and the tables are unchanged",
    );
    let _ = std::fs::remove_dir_all(&here_report);
    // A `reftable` directory planted in a files-backend repository (as an agent with
    // `--here` can): the next `--here` session still holds the loose protected branches.
    std::fs::create_dir_all(r.wt.join(".git/reftable")).unwrap();
    give(&r.wt.join(".git/reftable"), &who);
    let files_main = git_out(&who, &r.wt, &["rev-parse", "main"]);
    git_as(&who, &r.wt, &["switch", "-q", "-c", "side"]);
    const PLANTED: &str = r#"
NEW=$(git commit-tree -m evil "HEAD^{tree}")
git update-ref refs/heads/main "$NEW"; echo "update-ref main $?" > planted
NEW="$NEW" perl -e 'if (open(my $f, ">", ".git/refs/heads/main")) { print $f "$ENV{NEW}\n"; print "wrote main\n" } else { print "main: $!\n" }' >> planted
"#;
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, PLANTED);
    let planted = read(&r.wt.join("planted"));
    c.check(
        planted.contains("update-ref main ")
            && !planted.contains("update-ref main 0")
            && !planted.contains("wrote main")
            && git_out(&who, &r.wt, &["rev-parse", "main"]) == files_main,
        format!("a planted reftable directory switches no protection off: {planted} / {err}"),
    );
    let _ = std::fs::remove_file(r.wt.join("planted"));
    std::fs::remove_dir(r.wt.join(".git/reftable")).unwrap();
    // Control: the same script without the sandbox moves main.
    let _ = std::fs::remove_dir_all(&report);
    bare_bash_as(&who, &wt, &env, REFTABLE_SCRIPT);
    c.check(
        git_out(&who, &rt, &["rev-parse", "main"]) != main_before,
        format!(
            "control: without tyba main moves: {}",
            read(&report.join("git"))
        ),
    );
    c.finish(tag);
}

/// A repository policy (approved or not) naming a protected branch that is no branch name
/// (`../../…`): tyba refuses to start, naming it, and makes nothing outside the repository
/// (the name would have become a stand-in's path). Control: the same policy with a valid
/// name starts.
fn branch_name_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    let env = base_env(&r.home, &[]);
    let outside = r.root.join("OUTSIDE");
    let rel = "../../../OUTSIDE/made/by/tyba";
    std::fs::create_dir_all(r.wt.join(".tyba")).unwrap();
    let policy = r.wt.join(".tyba/policy.toml");
    std::fs::write(
        &policy,
        format!("[git]\nprotected_branches = [\"{rel}\"]\n"),
    )
    .unwrap();
    give(&r.wt.join(".tyba"), &who);
    git_as(&who, &r.wt, &["switch", "-q", "-c", "side"]);
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, "echo started > started");
    c.check(
        err.contains("invalid protected branch name") && !r.wt.join("started").exists(),
        format!("the session refuses to start, naming the name: {err}"),
    );
    c.check(
        std::fs::symlink_metadata(&outside).is_err(),
        format!("nothing made outside: {}", outside.display()),
    );
    std::fs::write(&policy, "[git]\nprotected_branches = [\"release/next\"]\n").unwrap();
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, "echo started > started");
    c.check(
        r.wt.join("started").exists(),
        format!("control: a valid name starts: {err}"),
    );
    c.finish(tag);
}

#[test]
fn protected_branch_names_that_are_no_branch_names_are_refused_as_root_or_self() {
    branch_name_suite(Who::Me, "branch-name-me");
}

#[test]
fn protected_branch_names_that_are_no_branch_names_are_refused_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    branch_name_suite(who, "branch-name-user");
}

#[test]
fn a_reftable_repository_has_no_writable_ref_as_root_or_self() {
    reftable_suite(Who::Me, "reftable-me");
}

#[test]
fn a_reftable_repository_has_no_writable_ref_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    reftable_suite(who, "reftable-user");
}

// ------------------------------------- class 6: symbolic refs left for the person ----

/// The agent makes its own branch and its worktree's `HEAD` symbolic refs to `main` (both
/// files it may write), and leaves work so the worktree is kept. The person's next commit
/// in that worktree must not move `main`: tyba undoes both at the session's end.
const SYMREF_SCRIPT: &str = r#"
G=$(git rev-parse --path-format=absolute --git-dir)
C=$(git rev-parse --path-format=absolute --git-common-dir)
B=$(git symbolic-ref HEAD)
printf 'ref: refs/heads/main\n' > "$C/$B" && echo "branch symref" >> made
printf 'ref: refs/heads/main\n' > "$G/HEAD" && echo "head symref" >> made
echo work > work.txt
"#;

fn symref_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env = base_env(&r.home, &[]);
    let main_before = git_out(&who, &r.wt, &["rev-parse", "main"]);
    let mut c = Checks::default();
    let (_out, err) = tyba_bash(&r, &who, &r.wt, &[], &env, SYMREF_SCRIPT);
    let Some(wt) = worktree_from(&err) else {
        c.check(false, format!("the agent ran in a linked worktree: {err}"));
        return c.finish(tag);
    };
    c.check(
        read(&wt.join("made")).lines().count() == 2,
        format!("the agent wrote both symbolic refs: {err}"),
    );
    c.check(
        err.contains("symbolic ref to refs/heads/main") && err.contains("HEAD at refs/heads/main"),
        format!("the person is told what was undone: {err}"),
    );
    // The person commits in the kept worktree.
    git_as(&who, &wt, &["add", "work.txt"]);
    git_as(&who, &wt, &["commit", "-q", "-m", "person"]);
    c.check(
        git_out(&who, &r.wt, &["rev-parse", "main"]) == main_before,
        "the person's commit in the agent's worktree did not move main",
    );
    // Control: the same symbolic refs without tyba's undoing, and the same commit, move main.
    let ctl = sandbox_repo(&who, &format!("{tag}-ctl"));
    if let Some(ctl) = ctl {
        let cwt = ctl.root.join("ctl-wt");
        git_as(
            &who,
            &ctl.wt,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "tyba/ctl",
                cwt.to_str().unwrap(),
            ],
        );
        bare_bash_as(&who, &cwt, &env, SYMREF_SCRIPT);
        let before = git_out(&who, &ctl.wt, &["rev-parse", "main"]);
        git_as(&who, &cwt, &["add", "work.txt"]);
        git_as(&who, &cwt, &["commit", "-q", "-m", "person"]);
        c.check(
            git_out(&who, &ctl.wt, &["rev-parse", "main"]) != before,
            "control: without tyba the same commit moves main",
        );
    }
    c.finish(tag);
}

#[test]
fn symbolic_refs_the_agent_left_cannot_move_main_as_root_or_self() {
    symref_suite(Who::Me, "symref-me");
}

#[test]
fn symbolic_refs_the_agent_left_cannot_move_main_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    symref_suite(who, "symref-user");
}

// ------------------------------------------ class 6: another session's branch ----

/// From one session's worktree, against another session's branch `tyba/$OTHER`: moved with
/// git (`update-ref`, `branch -f`), deleted, written directly, replaced by a rename, and
/// new `tyba/…` branches made (git and a file write) and a nested one. Then its own commit.
const SESSIONS_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
C=$(git rev-parse --path-format=absolute --git-common-dir)
echo forged > forged.txt; git add forged.txt; git commit -q -m forged; echo "commit $?" >> "$R/own"
git update-ref "refs/heads/tyba/$OTHER" HEAD; echo "update-ref other $?" >> "$R/git"
git branch -f "tyba/$OTHER" HEAD; echo "branch -f other $?" >> "$R/git"
git update-ref -d "refs/heads/tyba/$OTHER"; echo "delete other $?" >> "$R/git"
git branch tyba/newbranch; echo "branch newbranch $?" >> "$R/git"
C="$C" NEW=$(git rev-parse HEAD) perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", "$ENV{C}/$p")) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  put("refs/heads/tyba/$ENV{OTHER}", "$ENV{NEW}\n");
  put("refs/heads/tyba/newbranch2", "$ENV{NEW}\n");
  mkdir("$ENV{C}/refs/heads/tyba/nested"); put("refs/heads/tyba/nested/x", "$ENV{NEW}\n");
  put("refs/heads/tyba/other.tmp", "$ENV{NEW}\n");
  rename("$ENV{C}/refs/heads/tyba/other.tmp", "$ENV{C}/refs/heads/tyba/$ENV{OTHER}") ? print "renamed over other\n" : print "rename: $!\n";
  put("logs/refs/heads/tyba/$ENV{OTHER}", "");
  rename("$ENV{C}/refs/heads/tyba", "$ENV{C}/refs/heads/tyba-away") ? print "renamed tyba dir\n" : print "rename tyba dir: $!\n";
' > "$R/perl"
echo finished > "$R/finished"
"#;

/// The other session's commit, made like a real session's: `tyba run` that commits, kept.
fn session_with_commit(r: &SandboxRepo, who: &Who, env: &[(OsString, OsString)]) -> Option<String> {
    let (_o, err) = tyba_bash(
        r,
        who,
        &r.wt,
        &[],
        env,
        "echo a > a.txt; git add a.txt; git commit -q -m session-a",
    );
    err.lines()
        .find_map(|l| l.strip_prefix("tyba: new branch "))
        .map(|b| b.trim().to_string())
}

fn sessions_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env0 = base_env(&r.home, &[]);
    let mut c = Checks::default();
    let Some(a) = session_with_commit(&r, &who, &env0) else {
        c.check(false, "the first session made no branch");
        return c.finish(tag);
    };
    let a_id = a.trim_start_matches("tyba/").to_string();
    let a_tip = git_out(&who, &r.wt, &["rev-parse", &a]);
    c.check(
        git_out(&who, &r.wt, &["log", "-1", "--format=%s", &a]) == "session-a",
        format!("the first session's commit is on its branch {a}"),
    );
    let a_log = read(&r.wt.join(".git/logs/refs/heads").join(&a));
    let env = base_env(&r.home, &[("OTHER", a_id.clone().into())]);
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &[], &env, SESSIONS_SCRIPT);
    let Some(wt) = worktree_from(&err) else {
        c.check(false, format!("no linked worktree: {err}"));
        return c.finish(tag);
    };
    let report = wt.join("report");
    c.check(
        read(&report.join("finished")).trim() == "finished",
        format!("the agent ran: {err}"),
    );
    c.check(
        git_out(&who, &r.wt, &["rev-parse", &a]) == a_tip,
        format!("the other session's branch did not move: {err}"),
    );
    c.check(
        read(&r.wt.join(".git/logs/refs/heads").join(&a)) == a_log,
        "the other session's reflog unchanged",
    );
    let branches = git_out(&who, &r.wt, &["branch", "--list", "tyba/*"]);
    c.check(
        !branches.contains("newbranch") && !branches.contains("nested"),
        format!("no new tyba/ branch outside: {branches}"),
    );
    c.check(
        std::fs::symlink_metadata(r.wt.join(".git/refs/heads/tyba-away")).is_err()
            && r.wt.join(".git/refs/heads/tyba").is_dir(),
        "refs/heads/tyba is in place",
    );
    // Inside, git and the writes worked on the session's private copy (which is why the
    // outside check means something), and the person is told what was not carried back.
    let gitlog = read(&report.join("git"));
    c.check(
        gitlog.contains("update-ref other 0") && gitlog.contains("branch newbranch 0"),
        format!("inside, git wrote its private copy: {gitlog}"),
    );
    c.check(
        err.contains(&format!("tyba/{a_id}, not its own")) && err.contains("tyba/newbranch "),
        format!("the end summary names the branches not carried back: {err}"),
    );
    // Its own commit lands on its own branch.
    let b = err
        .lines()
        .find_map(|l| l.strip_prefix("tyba: new branch "))
        .map(|b| b.trim().to_string())
        .unwrap_or_default();
    c.check(
        read(&report.join("own")).contains("commit 0")
            && git_out(&who, &r.wt, &["log", "-1", "--format=%s", &b]) == "forged",
        format!("the session's own commit is on its branch {b}: {err}"),
    );
    // `tyba worktrees` does not call the other session's work merged.
    let o = run_tyba(&who, &r.tyba, &r.wt, &env0, &["worktrees"]);
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    c.check(
        listing
            .lines()
            .any(|l| l.starts_with("changed") && l.contains(&a)),
        format!("the other session is still `changed`: {listing}"),
    );

    // Control: the same script without the sandbox, in the same worktree, moves the other
    // session's branch and makes new ones.
    std::fs::remove_dir_all(&report).unwrap();
    bare_bash_as(&who, &wt, &env, SESSIONS_SCRIPT);
    let gitlog = read(&report.join("git"));
    let perl = read(&report.join("perl"));
    let away = r.wt.join(".git/refs/heads/tyba-away");
    c.check(
        gitlog.contains("update-ref other 0")
            && perl.contains("renamed over other")
            && read(&away.join(&a_id)).trim() != a_tip,
        format!("control: without tyba the other session's branch moves: {gitlog} {perl}"),
    );
    c.check(
        gitlog.contains("branch newbranch 0")
            && perl.contains("wrote refs/heads/tyba/newbranch2")
            && away.join("newbranch").is_file()
            && perl.contains("renamed tyba dir"),
        format!("control: without tyba new branches are made: {gitlog} {perl}"),
    );
    c.finish(tag);
}

#[test]
fn another_sessions_branch_cannot_be_moved_or_made_as_root_or_self() {
    sessions_suite(Who::Me, "sessions-me");
}

#[test]
fn another_sessions_branch_cannot_be_moved_or_made_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    sessions_suite(who, "sessions-user");
}

/// Two sessions at the same time: the first commits, waits while the second attacks its
/// branch, then commits again; each ends with its own commits only.
const WAITING_SCRIPT: &str = r#"
echo 1 > one.txt; git add one.txt; git commit -q -m first-1
touch started
for i in $(seq 1 600); do [ -e go ] && break; sleep 0.1; done
echo 2 > two.txt; git add two.txt; git commit -q -m first-2
"#;

fn concurrent_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    let env0 = base_env(&r.home, &[]);
    let wts = r.home.join(".local/state/tyba/worktrees");
    let first = std::thread::scope(|s| {
        let h = s.spawn(|| tyba_bash(&r, &who, &r.wt, &[], &env0, WAITING_SCRIPT));
        // The first session's worktree, once its first commit is made.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        let mut a_wt = None;
        while a_wt.is_none() && std::time::Instant::now() < deadline {
            a_wt = std::fs::read_dir(&wts).ok().and_then(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .find(|p| p.join("started").exists())
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let attack = a_wt.as_ref().map(|a_wt| {
            let id = a_wt
                .file_name()
                .unwrap()
                .to_string_lossy()
                .rsplit('-')
                .next()
                .unwrap()
                .to_string();
            let env = base_env(&r.home, &[("OTHER", id.into())]);
            let out = tyba_bash(&r, &who, &r.wt, &[], &env, SESSIONS_SCRIPT);
            std::fs::write(a_wt.join("go"), "").unwrap();
            out
        });
        if a_wt.is_none() {
            // Let the first session end anyway.
            for e in std::fs::read_dir(&wts).into_iter().flatten().flatten() {
                let _ = std::fs::write(e.path().join("go"), "");
            }
        }
        (h.join().unwrap(), attack)
    });
    let ((_o, err_a), attack) = first;
    let a = err_a
        .lines()
        .find_map(|l| l.strip_prefix("tyba: new branch "))
        .map(|b| b.trim().to_string())
        .unwrap_or_default();
    c.check(
        attack.is_some(),
        format!("the second session ran while the first did: {err_a}"),
    );
    let log = git_out(&who, &r.wt, &["log", "--format=%s", &format!("main..{a}")]);
    c.check(
        log == "first-2\nfirst-1",
        format!("the first session's branch holds its own two commits only: {log:?} / {err_a}"),
    );
    if let Some((_o, err_b)) = &attack {
        let b = err_b
            .lines()
            .find_map(|l| l.strip_prefix("tyba: new branch "))
            .map(|b| b.trim().to_string())
            .unwrap_or_default();
        c.check(
            git_out(&who, &r.wt, &["log", "-1", "--format=%s", &b]) == "forged",
            format!("the second session's commit is on its own branch: {err_b}"),
        );
    }
    c.finish(tag);
}

#[test]
fn sessions_at_the_same_time_keep_their_own_branches_as_root_or_self() {
    concurrent_suite(Who::Me, "concurrent-me");
}

#[test]
fn sessions_at_the_same_time_keep_their_own_branches_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    concurrent_suite(who, "concurrent-user");
}

// ------------------------------------------ class 6: `--here` and protected branches ----

/// In the person's own checkout (`--here`, on `feature`): the protected branches `main`
/// (loose) and `release` (only in `packed-refs`, protected by the policy) moved or deleted with git and by writing the files, `packed-refs` rewritten, the
/// checkout switched to `main` and committed on; another session's branch moved and a new
/// `tyba/` branch made; `master`, protected and with no branch yet, made by git and by
/// writing its file. Then the agent's own commit on `feature`.
const HERE_BRANCHES_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
NEW=$(git commit-tree -m evil "HEAD^{tree}")
git update-ref refs/heads/main "$NEW"; echo "update-ref main $?" >> "$R/git"
git branch -f main "$NEW"; echo "branch -f main $?" >> "$R/git"
git update-ref refs/heads/release "$NEW"; echo "update-ref release $?" >> "$R/git"
git update-ref -d refs/heads/release; echo "delete release $?" >> "$R/git"
git update-ref refs/heads/tyba/other "$NEW"; echo "update-ref tyba/other $?" >> "$R/git"
git branch tyba/new "$NEW"; echo "branch tyba/new $?" >> "$R/git"
git branch master "$NEW"; echo "branch master $?" >> "$R/git"
git update-ref refs/heads/master "$NEW"; echo "update-ref master $?" >> "$R/git"
git checkout -q -b master && { git commit -q --allow-empty -m on-master; echo "commit on master $?" >> "$R/git"; }
git checkout -q feature
git pack-refs --all; git update-ref --no-deref refs/heads/master "$NEW"; echo "packed update-ref master $?" >> "$R/git"
git checkout -q main && { git commit -q --allow-empty -m on-main; echo "commit on main $?" >> "$R/git"; }
git checkout -q feature
NEW="$NEW" perl -e '
  sub put { my ($p, $t) = @_; if (open(my $f, ">", ".git/$p")) { print $f $t; close $f; print "wrote $p\n" } else { print "open $p: $!\n" } }
  put("refs/heads/main", "$ENV{NEW}\n");
  put("refs/heads/release", "$ENV{NEW}\n");
  put("refs/heads/tyba/other", "$ENV{NEW}\n");
  # master, a protected name with no branch yet: made as a file, or its stand-in removed.
  put("refs/heads/master", "$ENV{NEW}\n");
  rmdir(".git/refs/heads/master") ? print "removed master\n" : print "rmdir master: $!\n";
  put("master.new", "$ENV{NEW}\n");
  rename(".git/master.new", ".git/refs/heads/master") ? print "renamed over master\n" : print "rename master: $!\n";
  put("refs/heads/master/x", "$ENV{NEW}\n");
  put("packed-refs", "$ENV{NEW} refs/heads/release\n");
  put("main.new", "$ENV{NEW}\n");
  rename(".git/main.new", ".git/refs/heads/main") ? print "renamed over main\n" : print "rename main: $!\n";
  unlink(".git/refs/heads/main") ? print "unlinked main\n" : print "unlink main: $!\n";
  rename(".git/refs/heads/tyba", ".git/tyba-away") ? print "renamed tyba\n" : print "rename tyba: $!\n";
  rename(".git/packed-refs", ".git/packed-away") ? print "renamed packed-refs\n" : print "rename packed-refs: $!\n";
  # A parent of the read-only binds moved aside and rebuilt with a new main.
  for my $d (".git/refs/heads", ".git/refs") {
    if (rename($d, "$d-away")) { print "renamed $d\n"; mkdir(".git/refs"); mkdir(".git/refs/heads"); put("refs/heads/main", "$ENV{NEW}\n") } else { print "rename $d: $!\n" }
  }
' > "$R/perl"
echo own > own.txt; git add own.txt; git commit -q -m own-work; echo "commit $?" >> "$R/own"
echo finished > "$R/finished"
"#;

fn here_branches_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let policy = r.root.join("policy.toml");
    std::fs::write(&policy, "[git]\nprotected_branches = [\"release\"]\n").unwrap();
    give(&policy, &who);
    let pol = policy.to_str().unwrap();
    let env = base_env(&r.home, &[]);
    let mut c = Checks::default();

    // On `main`: told what to do; the agent's commit and `update-ref` fail, main stays.
    const ON_MAIN: &str = "git commit -q --allow-empty -m on-main; echo \"commit $?\" > on-main; git update-ref refs/heads/main \"$(git commit-tree -m x 'HEAD^{tree}')\"; echo \"update-ref $?\" >> on-main";
    let main_before = git_out(&who, &r.wt, &["rev-parse", "main"]);
    let (_o, err) = tyba_bash(&r, &who, &r.wt, &["--here"], &env, ON_MAIN);
    let on_main = read(&r.wt.join("on-main"));
    c.check(
        err.contains("protected branch") && err.contains("git switch -c"),
        format!("--here on main says what to do: {err}"),
    );
    c.check(
        on_main.contains("commit ") && !on_main.contains(" 0\n"),
        format!("--here on main: the agent's commit and update-ref fail: {on_main:?}"),
    );
    c.check(
        git_out(&who, &r.wt, &["rev-parse", "main"]) == main_before,
        "--here on main: main did not move",
    );
    std::fs::remove_file(r.wt.join("on-main")).unwrap();
    // Control: the same without tyba moves main.
    bare_bash_as(&who, &r.wt, &env, ON_MAIN);
    c.check(
        git_out(&who, &r.wt, &["rev-parse", "main"]) != main_before,
        "control: without tyba the commit on main moves it",
    );
    git_as(&who, &r.wt, &["reset", "-q", "--hard", &main_before]);
    std::fs::remove_file(r.wt.join("on-main")).unwrap();

    // `release` only packed, `main` loose (a commit after packing), another session's
    // `tyba/other`; the person's checkout on `feature`.
    git_as(&who, &r.wt, &["branch", "release"]);
    git_as(&who, &r.wt, &["branch", "tyba/other"]);
    git_as(&who, &r.wt, &["pack-refs", "--all"]);
    git_as(
        &who,
        &r.wt,
        &["commit", "-q", "--allow-empty", "-m", "loose-main"],
    );
    git_as(&who, &r.wt, &["switch", "-q", "-c", "feature"]);
    let git_dir = r.wt.join(".git");
    let refs_before = git_out(
        &who,
        &r.wt,
        &["for-each-ref", "--exclude=refs/heads/feature"],
    );
    let feature_before = git_out(&who, &r.wt, &["rev-parse", "feature"]);
    let packed_before = read(&git_dir.join("packed-refs"));
    c.check(
        std::fs::symlink_metadata(git_dir.join("refs/heads/main")).is_ok()
            && std::fs::symlink_metadata(git_dir.join("refs/heads/release")).is_err()
            && packed_before.contains("refs/heads/release"),
        "set-up: main loose, release only packed",
    );
    let (_o, err) = tyba_bash(
        &r,
        &who,
        &r.wt,
        &["--here", "--policy", pol],
        &env,
        HERE_BRANCHES_SCRIPT,
    );
    let report = r.wt.join("report");
    c.check(
        read(&report.join("finished")).trim() == "finished",
        format!("the agent ran on feature: {err}"),
    );
    let gitlog = read(&report.join("git"));
    c.check(
        gitlog.lines().all(|l| !l.ends_with(" 0")),
        format!("git moves, makes and deletes no protected or other session's branch: {gitlog}"),
    );
    let perl = read(&report.join("perl"));
    c.check(
        !perl.contains("wrote refs")
            && !perl.contains("wrote packed")
            && !perl.contains("renamed")
            && !perl.contains("unlinked")
            && !perl.contains("removed master"),
        format!("no ref file written, replaced or removed: {perl}"),
    );
    c.check(
        git_out(
            &who,
            &r.wt,
            &["for-each-ref", "--exclude=refs/heads/feature"],
        ) == refs_before,
        format!(
            "the protected branches and the other session's are as they were: {}",
            git_out(&who, &r.wt, &["for-each-ref"])
        ),
    );
    c.check(
        read(&git_dir.join("packed-refs")) == packed_before,
        "packed-refs unchanged",
    );
    for p in [
        "refs/heads/tyba/new",
        "refs/heads/master",
        "tyba-away",
        "packed-away",
        "refs-away",
        "refs/heads-away",
    ] {
        c.check(
            std::fs::symlink_metadata(git_dir.join(p)).is_err(),
            format!("{p} absent after the session (stand-ins removed)"),
        );
    }
    c.check(
        read(&report.join("own")).contains("commit 0")
            && git_out(&who, &r.wt, &["log", "-1", "--format=%s", "feature"]) == "own-work"
            && git_out(&who, &r.wt, &["rev-parse", "feature^"]) == feature_before,
        format!("the agent's commit is on feature: {err}"),
    );

    // Control: without tyba the same script moves main and the others.
    let _ = std::fs::remove_dir_all(&report);
    bare_bash_as(&who, &r.wt, &env, HERE_BRANCHES_SCRIPT);
    let perl = read(&report.join("perl"));
    c.check(
        perl.contains("renamed .git/refs/heads") && perl.contains("renamed over main"),
        format!("control: without tyba the refs are replaced and their directory renamed: {perl}"),
    );
    let gitlog = read(&report.join("git"));
    c.check(
        gitlog.contains("update-ref main 0")
            && gitlog.contains("update-ref release 0")
            && gitlog.contains("update-ref tyba/other 0")
            && gitlog.contains("branch master 0")
            && git_out(
                &who,
                &r.wt,
                &["for-each-ref", "--exclude=refs/heads/feature"],
            ) != refs_before,
        format!("control: without tyba the branches move: {gitlog}"),
    );
    c.finish(tag);
}

#[test]
fn protected_branches_cannot_move_here_as_root_or_self() {
    here_branches_suite(Who::Me, "here-branches-me");
}

#[test]
fn protected_branches_cannot_move_here_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    here_branches_suite(who, "here-branches-user");
}

// ------------------------------------------------ class 6: a killed supervisor ----

/// A session whose supervisor is killed (`SIGKILL`) after the agent committed: the branch
/// stays at its start (nothing lost), the agent's commit is kept in the session's private
/// directory, and the next `tyba worktrees` carries it onto the branch.
fn killed_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    let env = base_env(&r.home, &[]);
    let start = git_out(&who, &r.wt, &["rev-parse", "HEAD"]);
    let mut cmd = command_as(&who, &r.tyba);
    cmd.args([
        "run",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        "echo k > k.txt; git add k.txt; git commit -q -m killed-work; touch committed; sleep 100",
    ])
    .current_dir(&r.wt)
    .env_clear()
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let wts = r.home.join(".local/state/tyba/worktrees");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let mut wt = None;
    while wt.is_none() && std::time::Instant::now() < deadline {
        wt = std::fs::read_dir(&wts).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.join("committed").exists())
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    let Some(wt) = wt else {
        c.check(false, "the agent never committed");
        return c.finish(tag);
    };
    // Let the sandbox die with its supervisor (parent-death signals).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let id = wt
        .file_name()
        .unwrap()
        .to_string_lossy()
        .rsplit('-')
        .next()
        .unwrap()
        .to_string();
    let branch = format!("tyba/{id}");
    let private = r.home.join(".local/state/tyba/refs").join(&id);
    c.check(
        git_out(&who, &r.wt, &["rev-parse", &branch]) == start,
        "after SIGKILL the branch is where it started (not lost, not moved)",
    );
    c.check(
        private.join("heads").join(&id).is_file(),
        format!("the agent's tip is kept in {}", private.display()),
    );
    let o = run_tyba(&who, &r.tyba, &r.wt, &env, &["worktrees"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    c.check(
        git_out(&who, &r.wt, &["log", "-1", "--format=%s", &branch]) == "killed-work",
        format!("tyba worktrees carried the killed session's commit onto its branch: {err}"),
    );
    c.check(
        err.contains("a killed session's commits") && !private.exists(),
        format!("and said so, and removed the private directory: {err}"),
    );
    // What the killed supervisor could not remove (its temp dir, its liveness lock, its
    // copies on the memory filesystem) is removed by the next session of the same user.
    let uid = match &who {
        Who::Me => my_uid(),
        Who::User { uid, .. } => *uid,
    };
    // The temp dir and its lock are on the memory filesystem, or in the temp dir
    // (`leftovers::session_base`).
    let tmp = std::env::temp_dir();
    let shm = Path::new("/dev/shm");
    let left: Vec<PathBuf> = [
        tmp.join(format!("tyba-{uid}-{id}")),
        tmp.join(format!("tyba-{uid}-{id}.live")),
        shm.join(format!("tyba-{uid}-{id}")),
        shm.join(format!("tyba-{uid}-{id}.live")),
        shm.join(format!("tyba-{uid}-{id}.state")),
        shm.join(format!("tyba-{uid}-{id}.profile")),
    ]
    .into_iter()
    .filter(|p| std::fs::symlink_metadata(p).is_ok())
    .collect();
    c.check(
        left.iter().any(|p| p.ends_with(format!("tyba-{uid}-{id}")))
            && left.iter().any(|p| p.to_string_lossy().ends_with(".live")),
        format!("control: the killed session left its temp dir and lock: {left:?}"),
    );
    let o = run_tyba(
        &who,
        &r.tyba,
        &r.wt,
        &env,
        &["run", "--non-interactive", "--", "true"],
    );
    c.check(
        o.status.success(),
        format!(
            "a later session ran: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
    );
    let still: Vec<&PathBuf> = left
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    c.check(
        still.is_empty(),
        format!("the next session removed the killed one's leftovers: left {still:?}"),
    );
    c.finish(tag);
}

#[test]
fn a_killed_sessions_commits_are_carried_back_later_as_root_or_self() {
    killed_suite(Who::Me, "killed-me");
}

#[test]
fn a_killed_sessions_commits_are_carried_back_later_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    killed_suite(who, "killed-user");
}
