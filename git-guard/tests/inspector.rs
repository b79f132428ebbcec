//! Spellings beyond the corpus: each line is resolved by the `Inspector` on the corpus fixture
//! and must be blocked (or allowed) as listed. All mismatches are reported at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;
use std::path::PathBuf;
use tyba_git_guard::Inspector;
use tyba_policy::{AliasExpansion, GitInspector, GitInvocation};

/// `(setup, words after git, env, expect blocked)`; `F` in words stands for the fixture dir.
/// `(setup lines, words, env, blocked)`.
type Case = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    bool,
);

const CASES: &[Case] = &[
    // option spellings
    (&[], &["push", "--no-verif", "origin", "feature"], &[], true),
    (&[], &["push", "--no-verify", "--verify", "origin", "feature"], &[], false),
    (&[], &["push", "--verify", "--no-verify", "origin", "feature"], &[], true),
    (&[], &["push", "--no-v", "origin", "feature"], &[], true), // ambiguous: git dies, still refused
    (&[], &["push", "-fd", "origin", "main"], &[], true),
    (&[], &["push", "--del", "origin", "master"], &[], true),
    (&[], &["push", "--force-with-lease=main:abc", "origin", "feature"], &[], false),
    (&[], &["push", "origin", "feature", "--", "main"], &[], true),
    (&[], &["push", "--repo", "origin"], &[], true),
    (&[], &["push", "--mirr", "origin"], &[], true),
    (&[], &["push", "--bra", "origin"], &[], true),
    (&[], &["push", "--tags", "origin"], &[], false),
    (&[], &["push", "origin", "tag", "v1"], &[], false),
    (&[], &["push", "-d", "origin", "tag", "v1"], &[], false),
    // refspec grammar
    (&[], &["push", "origin", "+HEAD:refs/heads/MASTER"], &[], true),
    (&[], &["push", "origin", "@:main"], &[], true),
    (&[], &["push", "origin", "HEAD@{0}:main"], &[], true),
    (&[], &["push", "origin", "main:refs/heads/feature"], &[], false),
    (&[], &["push", "origin", "refs/heads/feature:refs/heads/mainline"], &[], false),
    (&[], &["push", "origin", "refs/heads/f*:refs/heads/*"], &[], false),
    (&[], &["push", "origin", "refs/heads/*:refs/heads/x/*"], &[], false),
    (&[], &["push", "origin", "refs/heads/m*:refs/heads/m*", "^refs/heads/main"], &[], true),
    (&[], &["push", "origin", "refs/heads/m*:refs/heads/m*", "^refs/heads/ma*"], &[], false),
    (&[], &["push", "origin", "nonexistent:main"], &[], true),
    (&[], &["push", "origin", ":MASTER"], &[], true),
    // configuration from -c and the environment
    (&[], &["-c", "remote.origin.push=refs/heads/feature:refs/heads/main", "push", "origin", "feature"], &[], true),
    (&[], &["-c", "push.default=matching", "push"], &[], true),
    (&[], &["-c", "push.default=nothing", "push"], &[], false),
    (&[], &["-c", "push.default=bogus", "push"], &[], true),
    (&[], &["push"], &[("GIT_CONFIG_COUNT", "1"), ("GIT_CONFIG_KEY_0", "push.default"), ("GIT_CONFIG_VALUE_0", "nothing")], false),
    (&[], &["push", "origin", "feature"], &[("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/x'")], true),
    (&[], &["--config-env=core.hooksPath=HOOKS", "push", "origin", "feature"], &[("HOOKS", "/x")], true),
    // a hooks override on a command that cannot push switches no push guard off
    (&[], &["-c", "hook.pre-push.command=true", "status"], &[], false),
    (&[], &["-c", "core.hooksPath=/dev/null", "rev-parse", "--show-toplevel"], &[], false),
    (&[], &["-c", "hook.pre-push.command=true", "push", "origin", "feature"], &[], true),
    (&[], &["-c", "core.hooksPath=/dev/null", "ship"], &[], true),
    // (an include for a command that cannot push: the colour policy calls it red, not blocked)
    (&[], &["-c", "includeIf.onbranch:main.path=/tmp/x", "status"], &[], false),
    (&[], &["-c", "includeIf.onbranch:main.path=/tmp/x", "push", "origin", "feature"], &[], true),
    (&[], &["push", "origin", "feature"], &[("GIT_CONFIG_GLOBAL", "/dev/null")], true),
    (&[], &["push", "origin", "feature"], &[("GIT_COMMON_DIR", "/tmp")], true),
    (&[], &["-c", "core.pager=less", "push", "origin", "feature"], &[], false),
    // repositories and remotes
    (&[], &["-C", "F/work", "push", "origin", "HEAD:main"], &[], true),
    (&[], &["--git-dir=F/work/.git", "push", "F/origin.git", "feature:master"], &[], true),
    (&[], &["push", "F/origin.git", "feature:feature"], &[("GIT_DIR", "F/work/.git")], false),
    (&[], &["push", "file://F/origin.git", "feature:main"], &[], true),
    (&["git remote add net https://example.invalid/r.git"], &["push", "net", ":"], &[], true),
    (&["git remote add net https://example.invalid/r.git"], &["push", "net", "feature"], &[], false),
    (&["git remote add net https://example.invalid/r.git"], &["push", "--prune", "net", "refs/heads/*:refs/heads/*"], &[], true),
    (&["git remote add net https://example.invalid/r.git", "git branch -q -D master"], &["push", "--prune", "net", "refs/heads/f*:refs/heads/f*"], &[], false),
    (&["git remote add net https://example.invalid/r.git"], &["push", "net", "feature:heads/main"], &[], true),
    (&["git config url.F/origin.git.pushInsteadOf nowhere:", "git remote add nw nowhere:x"], &["push", "nw", ":"], &[], true),
    (&["mkdir -p .git/remotes", "printf 'URL: F/origin.git\\nPush: refs/heads/feature:refs/heads/master\\n' > .git/remotes/old"], &["push", "old"], &[], true),
    (&["git config remote.pushDefault upstream"], &["push"], &[], true),
    (&["git checkout -q feature", "git config push.default current"], &["push"], &[], false),
    // aliases
    (&["git config alias.p push"], &["p", "origin", "main"], &[], true),
    (&["git config alias.p push"], &["p", "origin", "feature"], &[], false),
    (&["git config alias.p 'p2 origin'", "git config alias.p2 push"], &["p", "HEAD:main"], &[], true),
    (&["git config alias.loop loop"], &["loop"], &[], true),
    (&[], &["-c", "alias.s=push origin HEAD:master", "s"], &[], true),
    (&["git config alias.s '!git fetch && git push origin HEAD:main'"], &["s"], &[], true),
    (&["git config alias.s '!git push origin \"$1\"'"], &["s", "main"], &[], true),
    (&["git config alias.s '!git push origin \"$1\"'"], &["s", "feature"], &[], false),
    (&["git config alias.s '!f() { git push origin HEAD:main; }; f'"], &["s"], &[], true),
    (&["git config alias.s '!sh -c \"git push origin HEAD:main\"'"], &["s"], &[], true),
    (&["git config alias.s '!echo hello'"], &["s"], &[], false),
    // config writes
    (&[], &["config", "--global", "core.hooksPath", "/x"], &[], true),
    (&[], &["config", "set", "core.hookspath", "/x"], &[], true),
    (&[], &["config", "--unset", "core.hooksPath"], &[], true),
    (&[], &["config", "--add", "include.path", "/x"], &[], true),
    (&[], &["config", "--rename-section", "foo", "core"], &[], true),
    // An edit in an editor names no key: the colour policy asks (red, DESIGN.md §2).
    (&[], &["config", "-e"], &[], false),
    (&[], &["config", "edit"], &[], false),
    (&[], &["config", "core.hooksPath"], &[], false),
    (&[], &["config", "--get", "core.hooksPath"], &[], false),
    (&[], &["config", "user.name", "x"], &[], false),
    // no readable repository: judged from the line alone
    (&[], &["--git-dir=/nonexistent", "push", "origin", "feature"], &[], true),
    (&[], &["--git-dir=/nonexistent", "push", "origin", "feature:feature"], &[], false),
    (&[], &["--git-dir=/nonexistent", "push", "origin", "feature:main"], &[], true),
    (&[], &["--git-dir=/nonexistent", "push", "--tags", "origin"], &[], false),
    (&[], &["--git-dir=/nonexistent", "push", "-d", "origin", "feature"], &[], false),
    (&[], &["--git-dir=/nonexistent", "push", "-d", "origin", "main"], &[], true),
    (&[], &["--git-dir=/nonexistent", "push", "origin", "refs/heads/*:refs/heads/*"], &[], true),
    (&[], &["--git-dir=/nonexistent", "push"], &[], true),
    // submodules pushed along have their own hooks
    (&["touch .gitmodules"], &["push", "--recurse-submodules=on-demand", "origin", "feature"], &[], true),
    (&["touch .gitmodules", "git config submodule.recurse true"], &["push", "origin", "feature"], &[], true),
    (&["touch .gitmodules"], &["push", "--recurse-submodules=check", "origin", "feature"], &[], false),
    (&[], &["push", "--recurse-submodules=on-demand", "origin", "feature"], &[], false),
    // plumbing and other commands
    (&[], &["send-pack", "F/origin.git", "feature:feature"], &[], true),
    (&[], &["http-push", "https://example.invalid/", "feature"], &[], true),
    (&[], &["status"], &[], false),
    (&[], &["--version"], &[], false),
];

#[test]
fn spellings_beyond_the_corpus() {
    let home = isolate_once();
    let protected = protected();
    let mut failures = Vec::new();
    for (setup_lines, words, env, want) in CASES {
        let root = tempfile::tempdir().unwrap();
        let dir = fixture(root.path(), home);
        let f = dir.display().to_string();
        let lines: Vec<String> = setup_lines
            .iter()
            .map(|l| l.replace("F/", &format!("{f}/")))
            .collect();
        setup(&dir, home, &lines);
        let args: Vec<String> = words
            .iter()
            .map(|w| w.replace("F/", &format!("{f}/")))
            .collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.replace("F/", &format!("{f}/"))))
            .collect();
        let cwd = dir.join("work");
        let inv = GitInvocation {
            args: &args,
            env: &env,
            cwd: &cwd,
            protected: &protected,
        };
        let report = Inspector::new().inspect(&inv);
        let got = !report.findings.is_empty();
        if got != *want {
            failures.push(format!(
                "git {} (env {env:?}, setup {setup_lines:?}): expected {}, findings {:?}",
                words.join(" "),
                if *want { "blocked" } else { "allowed" },
                report.findings
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn aliases_are_reported() {
    let home = isolate_once();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), home);
    let protected = protected();
    let cwd = dir.join("work");
    let args: Vec<String> = ["-c", "alias.ship=push origin HEAD:main", "ship"]
        .map(String::from)
        .to_vec();
    let inv = GitInvocation {
        args: &args,
        env: &[],
        cwd: &cwd,
        protected: &protected,
    };
    let r = Inspector::new().inspect(&inv);
    assert_eq!(
        r.alias,
        Some(AliasExpansion::Git(vec![
            "push".into(),
            "origin".into(),
            "HEAD:main".into()
        ]))
    );
    assert!(r
        .findings
        .iter()
        .any(|f| f.rule == "git.push.protected" && f.reason.contains("origin")));
    let args: Vec<String> = ["-c", "alias.ship=!git push origin HEAD:main", "ship"]
        .map(String::from)
        .to_vec();
    let inv = GitInvocation {
        args: &args,
        env: &[],
        cwd: &cwd,
        protected: &protected,
    };
    let r = Inspector::new().inspect(&inv);
    assert_eq!(
        r.alias,
        Some(AliasExpansion::Shell("git push origin HEAD:main".into()))
    );
    assert!(r.findings.iter().any(|f| f.rule == "git.push.protected"));
    // outside any repository, aliases still come from the global configuration
    std::fs::write(
        home.join(".gitconfig"),
        "[alias]\n\tzzship = push origin HEAD:main\n",
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    let args: Vec<String> = vec!["zzship".into()];
    let inv = GitInvocation {
        args: &args,
        env: &[],
        cwd: outside.path(),
        protected: &protected,
    };
    let r = Inspector::new().inspect(&inv);
    assert!(matches!(r.alias, Some(AliasExpansion::Git(_))), "{r:?}");
    assert!(!r.findings.is_empty(), "{r:?}");
    // the hook path honours core.hooksPath
    assert_eq!(
        Inspector::new().pre_push_hook_path(&cwd),
        Some(cwd.join(".git/hooks/pre-push"))
    );
}

/// A remote URL with credentials (the security review's `https://alice:ghp_…@github.com`):
/// the push is still blocked, and neither the findings nor the serialized plan carry them.
#[test]
fn url_credentials_never_reach_findings_or_reports() {
    let home = isolate_once();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), home);
    setup(
        &dir,
        home,
        &[
            "git remote add cred https://alice:ghp_SECRETTOKEN123@github.com/x/y".into(),
            "git remote add scp bob:hunter2@example.invalid:x/y.git".into(),
        ],
    );
    let protected = protected();
    let cwd = dir.join("work");
    for (line, secrets) in [
        (
            vec!["push", "cred", "HEAD:main"],
            &["ghp_SECRETTOKEN123", "alice"][..],
        ),
        (vec!["push", "scp", "HEAD:main"], &["hunter2", "bob:"][..]),
        (
            vec!["push", "https://carol:pw123@github.com/x/y", "HEAD:main"],
            &["pw123", "carol"][..],
        ),
    ] {
        let args: Vec<String> = line.iter().map(|s| s.to_string()).collect();
        let inv = GitInvocation {
            args: &args,
            env: &[],
            cwd: &cwd,
            protected: &protected,
        };
        let a = Inspector::new().analyze(&inv);
        assert!(
            a.findings.iter().any(|f| f.rule == "git.push.protected"),
            "{line:?} is still blocked: {:?}",
            a.findings
        );
        let json = serde_json::to_string(&a.pushes).unwrap();
        let text: Vec<&str> = a.findings.iter().map(|f| f.reason.as_str()).collect();
        for s in secrets {
            assert!(
                !text.iter().any(|r| r.contains(s)),
                "{line:?}: {s} in {text:?}"
            );
            assert!(!json.contains(s), "{line:?}: {s} in {json}");
        }
        assert!(
            text.iter().any(|r| r.contains("***@")),
            "{line:?}: the remote is still named, redacted: {text:?}"
        );
    }
}

/// `mkfifo .git/config` (and a FIFO `HEAD`, a FIFO `.git`): the repository is refused at
/// once instead of blocking the reader, and a push that could reach a protected branch is
/// blocked as unresolved (fail closed).
#[test]
fn fifo_repository_files_are_refused_without_blocking() {
    let home = isolate_once();
    let root = tempfile::tempdir().unwrap();
    let protected = protected();
    for (name, fifo) in [
        ("cfg", ".git/config"),
        ("head", ".git/HEAD"),
        ("dotgit", ".git"),
    ] {
        let repo = root.path().join(name);
        std::fs::create_dir_all(&repo).unwrap();
        run_ok(
            clean(std::process::Command::new("git"), home)
                .args(["init", "-q", "-b", "main"])
                .current_dir(&repo),
        );
        let target = repo.join(fifo);
        if target.is_dir() {
            std::fs::remove_dir_all(&target).unwrap();
        } else {
            std::fs::remove_file(&target).unwrap();
        }
        run_ok(std::process::Command::new("mkfifo").arg(&target));
        let (tx, rx) = std::sync::mpsc::channel();
        let (cwd, protected) = (repo.clone(), protected.clone());
        std::thread::spawn(move || {
            let args: Vec<String> = ["push", "origin", "main"].map(String::from).to_vec();
            let inv = GitInvocation {
                args: &args,
                env: &[],
                cwd: &cwd,
                protected: &protected,
            };
            let _ = tx.send(Inspector::new().inspect(&inv));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{fifo}: the inspector blocked on the FIFO"));
        assert!(
            r.findings
                .iter()
                .any(|f| f.rule == "git.push.unresolved" && f.reason.contains("not a regular file")),
            "{fifo}: {:?}",
            r.findings
        );
    }
}

/// The report of a push carries each push URL's local path when it is one (`file://…`, an
/// absolute or relative path: git's `url_is_local_not_ssh`), none for network and scp-like
/// URLs, and the remote refs it would update: what the supervisor's relay of pushes to local
/// repositories compares with (`docs/sandbox.md`, "Pushes to a repository on a local path").
#[test]
fn push_reports_name_local_paths_and_the_refs_they_update() {
    let home = isolate_once();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), home);
    let work = dir.join("work");
    setup(
        &dir,
        home,
        &[
            "git remote add abs /srv/r.git".into(),
            "git remote add file file:///srv/f.git".into(),
            "git remote add rel ../rel.git".into(),
            "git remote add net https://example.invalid/x.git".into(),
            "git remote add scp host:/srv/r.git".into(),
        ],
    );
    let protected = protected();
    for (remote, want) in [
        ("abs", Some(PathBuf::from("/srv/r.git"))),
        ("file", Some(PathBuf::from("/srv/f.git"))),
        ("rel", Some(work.join("../rel.git"))),
        ("net", None),
        ("scp", None),
    ] {
        let args: Vec<String> = ["push", remote, "HEAD:refs/heads/feature-x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let r = Inspector::new().inspect(&GitInvocation {
            args: &args,
            env: &[],
            cwd: &work,
            protected: &protected,
        });
        assert_eq!(r.pushes.len(), 1, "{remote}: {r:?}");
        assert_eq!(r.pushes[0].local_path, want, "{remote}");
        let dsts: Vec<&str> = r.pushes[0].refs.iter().map(|u| u.dst.as_str()).collect();
        assert_eq!(dsts, ["refs/heads/feature-x"], "{remote}");
        assert!(!r.pushes[0].refs[0].delete && !r.pushes[0].refs[0].force);
    }
}
