//! Properties of the inspector over generated command lines on the corpus fixture: it never
//! panics, and adding a refspec that names a protected destination always blocks the push.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;
use tyba_git_guard::Inspector;
use tyba_policy::{GitInspector, GitInvocation};

const WORDS: &[&str] = &[
    "push",
    "origin",
    "upstream",
    ".",
    "feature",
    "main",
    "master",
    "Main",
    "HEAD",
    "@",
    ":",
    "+:",
    "^",
    "*",
    "feature:main",
    ":main",
    "refs/heads/*:refs/heads/*",
    "^refs/heads/main",
    "main~1:feature",
    "v1",
    "tag",
    "-f",
    "-d",
    "-fd",
    "-n",
    "-u",
    "-o",
    "-q",
    "-v",
    "--all",
    "--mirror",
    "--tags",
    "--prune",
    "--delete",
    "--no-verify",
    "--verify",
    "--no-verif",
    "--no-v",
    "--repo",
    "--repo=origin",
    "--force-with-lease",
    "--force-with-lease=main:x",
    "--",
    "--end-of-options",
    "--no-",
    "--=",
    "-",
    "",
    " ",
    "mаin",
    "-c",
    "core.hooksPath=/x",
    "alias.x=push",
    "x",
    "send-pack",
    "config",
    "-C",
    "..",
    "--git-dir=/nonexistent",
    "--exec-path",
    "é:é",
    "::",
    ":::",
    "+",
    "++main",
    "refs/heads/",
    "refs/heads/ma*:refs/heads/ma*",
];

/// Push options that take no value (`-o`, `--repo` would take `origin` as theirs and make the
/// refspec the repository: then git pushes elsewhere, rightly not blocked).
const OPTS: &[&str] = &[
    "-f",
    "-d",
    "-n",
    "-u",
    "-q",
    "-v",
    "--all",
    "--mirror",
    "--tags",
    "--prune",
    "--delete",
    "--verify",
    "--force-with-lease",
    "--atomic",
    "--follow-tags",
    "--no-thin",
    "--porcelain",
    "--",
];

fn work() -> &'static PathBuf {
    static W: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &W.get_or_init(|| {
        let home = isolate_once();
        let root = tempfile::tempdir().unwrap();
        let dir = fixture(root.path(), home);
        (root, dir.join("work"))
    })
    .1
}

fn analyze(args: &[String]) -> usize {
    let protected = protected();
    let inv = GitInvocation {
        args,
        env: &[],
        cwd: work(),
        protected: &protected,
    };
    Inspector::new().inspect(&inv).findings.len()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn never_panics(words in proptest::collection::vec(proptest::sample::select(WORDS), 0..8)) {
        let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        analyze(&args);
        let mut pushed = vec!["push".to_string()];
        pushed.extend(args);
        analyze(&pushed);
    }

    #[test]
    fn a_protected_destination_always_blocks(
        opts in proptest::collection::vec(proptest::sample::select(OPTS), 0..4),
        refspecs in proptest::collection::vec(proptest::sample::select(&["feature", "v2", "refs/heads/*:refs/heads/x/*", "^refs/heads/feature", ":", "HEAD:feature"][..]), 0..3),
        dst in proptest::sample::select(&["feature:main", "HEAD:refs/heads/master", "+feature:MAIN", "v1:refs/heads/main", ":main", "main", "feature:heads/main"][..]),
    ) {
        let mut args = vec!["push".to_string()];
        args.extend(opts.iter().map(|s| s.to_string()));
        args.push("origin".into());
        args.extend(refspecs.iter().map(|s| s.to_string()));
        args.push(dst.to_string());
        prop_assert!(analyze(&args) > 0, "not blocked: git {}", args.join(" "));
    }
}
