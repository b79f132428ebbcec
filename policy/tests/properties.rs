//! Properties of the classifier (STYLE.md "Fuzz the shell parser and classifier with
//! properties"): no panic on any input; appending `; rm -rf ~` never lowers a verdict;
//! wrapping a line in `bash -c '…'` never lowers it. Plus the regressions on size and depth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use tyba_policy::{Action, Context, Policy, Verdict};

struct Fx {
    _tmp: tempfile::TempDir,
    w: PathBuf,
    home: PathBuf,
}

fn fixture() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/policy_fixture.sh");
    let st = std::process::Command::new("bash")
        .arg(script)
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success());
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    Fx {
        w: root.join("W"),
        home: root.join("home"),
        _tmp: tmp,
    }
}

fn verdict(p: &Policy, fx: &Fx, line: &str) -> Verdict {
    let ctx = Context {
        worktree: &fx.w,
        cwd: &fx.w,
        home: Some(&fx.home),
        scratch: None,
        git: None,
    };
    p.classify(
        &Action::Exec {
            command: line.to_string(),
        },
        &ctx,
    )
    .verdict
}

fn single_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

const PIECES: &[&str] = &[
    "ls",
    "cat README.md",
    "rm -rf build",
    "rm notes.txt",
    "curl x",
    "sh",
    "bash -c",
    "echo hi",
    "git status",
    "git push origin main",
    "cd src",
    "cd ..",
    "cd /tmp",
    "find . -delete",
    "sudo",
    "env",
    "xargs",
    "$X",
    "$(ls)",
    "`id`",
    "'q'",
    "\"d\"",
    "~",
    "/etc/passwd",
    ".env",
    "outdir/secret.txt",
    "src/*.rs",
    "{a,b}",
    "x=1",
    "export PAGER=x",
    "LD_PRELOAD=x",
    "2>/dev/null",
    "> out",
    "< in",
    "<<EOF\nhi\nEOF\n",
    "<(ls)",
    "$'\\x72m'",
    "\\rm",
    "eval",
    "source",
    "python3 -c",
    "sed -n 1p",
    "git -c core.pager=x log",
];
const SEPS: &[&str] = &[
    " ", "; ", " && ", " || ", " | ", " & ", "\n", " ( ", " ) ", " { ", " } ",
];

fn line_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (prop::sample::select(PIECES), prop::sample::select(SEPS)),
        1..7,
    )
    .prop_map(|v| {
        let mut s = String::new();
        for (p, sep) in v {
            s.push_str(p);
            s.push_str(sep);
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn no_panic_on_any_text(s in "\\PC{0,80}") {
        let fx = fixture_once();
        let _ = verdict(&Policy::embedded_default(), fx, &s);
    }

    #[test]
    fn appending_rm_rf_home_never_lowers(line in line_strategy()) {
        let fx = fixture_once();
        let p = Policy::embedded_default();
        let before = verdict(&p, fx, &line);
        let after = verdict(&p, fx, &format!("{line}; rm -rf ~"));
        prop_assert!(after >= before, "{line:?}: {before} then {after}");
    }

    #[test]
    fn wrapping_in_bash_c_never_lowers(line in line_strategy()) {
        let fx = fixture_once();
        let p = Policy::embedded_default();
        let before = verdict(&p, fx, &line);
        let wrapped = format!("bash -c {}", single_quote(&line));
        let after = verdict(&p, fx, &wrapped);
        prop_assert!(after >= before, "{line:?}: {before}, wrapped {after}");
        prop_assert!(after >= Verdict::Yellow, "an interpreter is at least yellow");
    }
}

fn fixture_once() -> &'static Fx {
    static FX: std::sync::OnceLock<Fx> = std::sync::OnceLock::new();
    FX.get_or_init(fixture)
}

#[test]
fn appended_rm_rf_home_is_blocked_after_green_and_yellow_lines() {
    let fx = fixture_once();
    let p = Policy::embedded_default();
    for line in ["ls", "cargo build", "cat README.md | wc -l", "cd src && ls"] {
        assert_eq!(
            verdict(&p, fx, &format!("{line}; rm -rf ~")),
            Verdict::Blocked,
            "{line}"
        );
    }
}

#[test]
fn ten_thousand_parts_are_analysed_whole() {
    let fx = fixture_once();
    let p = Policy::embedded_default();
    let mut line = vec!["ls"; 10_000].join("; ");
    assert_eq!(verdict(&p, fx, &line), Verdict::Green);
    line.push_str("; rm -rf /");
    assert_eq!(verdict(&p, fx, &line), Verdict::Blocked);
    let piped = format!("{} | sh", vec!["cat README.md"; 10_000].join(" | "));
    assert_eq!(verdict(&p, fx, &piped), Verdict::Red);
}

#[test]
fn deep_nesting_is_refused_not_a_crash() {
    let fx = fixture_once();
    let p = Policy::embedded_default();
    for n in [12, 60, 199, 5_000] {
        let braces = format!("{}rm -rf /;{}", "{ ".repeat(n), " };".repeat(n));
        assert_eq!(verdict(&p, fx, &braces), Verdict::Blocked, "braces {n}");
        let subst = format!("echo {}ls{}", "\"$(".repeat(n), ")\"".repeat(n));
        assert!(
            verdict(&p, fx, &subst) >= Verdict::Yellow,
            "substitutions {n}"
        );
    }
    // Deep nesting on a small caller stack still classifies.
    let h = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let fx = fixture_once();
            let p = Policy::embedded_default();
            verdict(
                &p,
                fx,
                &format!("{}rm -rf /{}", "( ".repeat(150), " )".repeat(150)),
            )
        })
        .unwrap();
    assert_eq!(h.join().unwrap(), Verdict::Blocked);
}

#[test]
fn parentheses_apart_are_subshells_not_arithmetic() {
    let fx = fixture_once();
    let p = Policy::embedded_default();
    assert_eq!(verdict(&p, fx, "( (rm -rf /) )"), Verdict::Blocked);
    assert_eq!(verdict(&p, fx, "((1 + 2))"), Verdict::Green);
}

#[test]
fn long_cd_chains_and_nested_loops_end_in_a_closed_verdict() {
    let fx = fixture_once();
    let p = Policy::embedded_default();
    // Every unguarded `cd` may fail, so the set of directories grows; the analysis stays
    // bounded and refuses what it cannot finish.
    let chain = format!("{};ls", vec!["cd src;cd .."; 3_000].join(";"));
    assert!(verdict(&p, fx, &chain) >= Verdict::Red);
    let nested = format!(
        "{}cd src; ls{}",
        "for i in 1; do ".repeat(40),
        "; done".repeat(40)
    );
    assert_eq!(verdict(&p, fx, &nested), Verdict::Blocked);
    // A short loop with a `cd` is analysed precisely.
    assert_eq!(
        verdict(&p, fx, "for i in 1 2; do cd src; done; cat main.rs"),
        Verdict::Green
    );
    assert_eq!(
        verdict(&p, fx, "for i in 1 2; do cd ..; done; cat x"),
        Verdict::Red
    );
}
