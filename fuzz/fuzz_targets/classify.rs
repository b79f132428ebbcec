//! Fuzzes the classifier with the properties of STYLE.md: no panic on any input; appending
//! `; rm -rf ~` never lowers a verdict; wrapping in `bash -c '…'` never lowers it.
//! Run: `cargo +nightly fuzz run classify` from this directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tyba_policy::{Action, Context, Policy, Verdict};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let policy = Policy::embedded_default();
    let wt = std::env::temp_dir();
    let home = wt.join("tyba-fuzz-home");
    let ctx = Context { worktree: &wt, cwd: &wt, home: Some(&home), scratch: None, git: None };
    let v = |s: &str| policy.classify(&Action::Exec { command: s.to_string() }, &ctx).verdict;
    let base = v(line);
    assert!(v(&format!("{line}; rm -rf ~")) >= base);
    let wrapped = v(&format!("bash -c '{}'", line.replace('\'', "'\\''")));
    assert!(wrapped >= base && wrapped >= Verdict::Yellow);
});
