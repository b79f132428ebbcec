//! Classification of command lines for the judges' unit tests: in a fresh, empty worktree
//! (its own home beside it), with the embedded policy.
#![allow(clippy::unwrap_used)]

use crate::{Action, Classification, Context, Policy, Verdict};

/// Classifies `line`.
pub(crate) fn classify(line: &str) -> Classification {
    let wt = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ctx = Context {
        worktree: wt.path(),
        cwd: wt.path(),
        home: Some(home.path()),
        scratch: None,
        git: None,
    };
    Policy::embedded_default().classify(
        &Action::Exec {
            command: line.to_string(),
        },
        &ctx,
    )
}

/// Asserts each line's colour and that it names `rule` (when not empty).
pub(crate) fn expect(cases: &[(&str, Verdict, &str)]) {
    let mut bad = Vec::new();
    for (line, verdict, rule) in cases {
        let c = classify(line);
        if c.verdict != *verdict
            || (!rule.is_empty() && !c.findings.iter().any(|f| f.rule == *rule))
        {
            bad.push(format!("{line}: {:?} {:?}", c.verdict, c.findings));
        }
    }
    assert!(bad.is_empty(), "\n{}", bad.join("\n"));
}

/// Like [`expect`], in a worktree holding `src/`, `build/x.o` and, with `hook`, an
/// executable `.git/hooks/pre-push`; asserts the colour and, when given, the rule.
pub(crate) fn expect_git(hook: bool, cases: &[(&str, Verdict, &str)]) {
    use std::os::unix::fs::PermissionsExt;
    let wt = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let w = wt.path();
    std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::create_dir_all(w.join("build")).unwrap();
    std::fs::write(w.join("src/lib.rs"), "").unwrap();
    std::fs::write(w.join("build/x.o"), "").unwrap();
    if hook {
        let h = w.join(".git/hooks/pre-push");
        std::fs::write(&h, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ctx = Context {
        worktree: w,
        cwd: w,
        home: Some(home.path()),
        scratch: None,
        git: None,
    };
    let mut bad = Vec::new();
    for (line, verdict, rule) in cases {
        let c = Policy::embedded_default().classify(
            &Action::Exec {
                command: line.to_string(),
            },
            &ctx,
        );
        if c.verdict != *verdict
            || (!rule.is_empty() && !c.findings.iter().any(|f| f.rule == *rule))
        {
            bad.push(format!("{line}: {:?} {:?}", c.verdict, c.findings));
        }
    }
    assert!(bad.is_empty(), "hook {hook}:\n{}", bad.join("\n"));
}
