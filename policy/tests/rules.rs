//! The rule registry (`tyba_policy::rules`) against what the code emits:
//! - `docs/rules.md` is the registry's Markdown (regenerate with
//!   `TYBA_BLESS=1 cargo test -p tyba-policy --test rules`);
//! - every rule id written at an emission site in the sources of the policy, the git guard,
//!   the supervisor and the binary is registered, at the colour it is emitted with, and every
//!   registered rule is emitted somewhere;
//! - every finding over all the command corpora in `tests/data` names a registered rule at
//!   one of its colours (this catches ids built at run time, `wrapper.<program>`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tyba_policy::rules::{self, Rule};
use tyba_policy::{Action, Context, Policy, Verdict};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn docs_rules_md_is_generated_from_the_registry() {
    let path = root().join("docs/rules.md");
    let want = rules::markdown();
    if std::env::var_os("TYBA_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let got = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "docs/rules.md is stale: regenerate it with TYBA_BLESS=1 cargo test -p tyba-policy --test rules"
    );
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn colour(name: &str) -> Verdict {
    match name {
        "Green" => Verdict::Green,
        "Yellow" => Verdict::Yellow,
        "Red" => Verdict::Red,
        "Blocked" => Verdict::Blocked,
        other => panic!("unknown colour {other}"),
    }
}

/// `(id, colour)` pairs at emission sites: `Verdict::X, "id"` (the argument order of
/// `Analyzer::add` and `Finding::new`), `Verdict::X, &format!("family.{…}")`, and the
/// vault's `("vault.…", reason)` table (emitted blocked). The git guard's `RULE_…` consts
/// are the registry's own entries.
/// `text` up to its first inline test module.
fn code_before_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        let after = text[at + "#[cfg(test)]".len()..].trim_start();
        let inline = after.strip_prefix("mod ").is_some_and(|m| {
            let brace = m.find('{').unwrap_or(usize::MAX);
            let semi = m.find(';').unwrap_or(usize::MAX);
            brace < semi
        });
        if inline || !after.starts_with("mod ") && !after.starts_with("pub") {
            return &text[..at];
        }
        from = at + "#[cfg(test)]".len();
    }
    text
}

fn emitted() -> BTreeMap<String, BTreeSet<Verdict>> {
    let mut files = Vec::new();
    for d in ["policy/src", "git-guard/src", "supervisor/src", "src"] {
        sources(&root().join(d), &mut files);
    }
    let mut out: BTreeMap<String, BTreeSet<Verdict>> = BTreeMap::new();
    for f in files {
        if f.ends_with("policy/src/rules.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // Test modules build findings of their own: the code ends at the first inline test
        // module (`#[cfg(test)]` then `mod NAME {`); a test module declared in a file of its
        // own (`mod NAME;`) ends nothing, that file is skipped where it starts.
        let code = code_before_tests(&text);
        let mut i = 0;
        while let Some(at) = code[i..].find("Verdict::") {
            let start = i + at + "Verdict::".len();
            let name: String = code[start..]
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            i = start + name.len();
            let rest = code[i..].trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if !code[i..].trim_start().starts_with(',') {
                continue;
            }
            let rest = rest
                .strip_prefix("&format!(")
                .or_else(|| rest.strip_prefix("format!("))
                .unwrap_or(rest);
            if let Some(r) = const_rule(rest) {
                out.entry(r.id.to_string())
                    .or_default()
                    .insert(colour(&name));
            }
            if let Some(lit) = rest.strip_prefix('"') {
                let id: String = lit.chars().take_while(|c| *c != '"').collect();
                if id.contains('.') && !id.contains(' ') {
                    out.entry(id).or_default().insert(colour(&name));
                }
            }
        }
    }
    // The vault's table (the analyser's tools judge) may be laid out over lines: any
    // `("vault.x", "…")` pair counts.
    let mut analysis = Vec::new();
    sources(&root().join("policy/src/analysis"), &mut analysis);
    for f in analysis {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut j = 0;
        while let Some(at) = code[j..].find("(\"vault.") {
            let s = j + at + 2;
            let id: String = code[s..].chars().take_while(|c| *c != '"').collect();
            out.entry(id).or_default().insert(Verdict::Blocked);
            j = s;
        }
    }
    out
}

/// The registry entry `rest` starts naming as a const (`rules::NAME`, `crate::rules::NAME`,
/// `tyba_policy::rules::NAME`).
fn const_rule(rest: &str) -> Option<Rule> {
    let at = rest.find("rules::")?;
    let before = &rest[..at];
    if !(before.is_empty() || before == "crate::" || before == "tyba_policy::") {
        return None;
    }
    let name: String = rest[at + "rules::".len()..]
        .chars()
        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
        .collect();
    rules::BY_NAME
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
}

/// Registry entries the sources name as consts anywhere outside tests (the git guard's
/// `RULE_…` consts are such references).
fn referenced() -> BTreeSet<&'static str> {
    let mut files = Vec::new();
    for d in ["policy/src", "git-guard/src", "supervisor/src", "src"] {
        sources(&root().join(d), &mut files);
    }
    let mut out = BTreeSet::new();
    for f in files {
        if f.ends_with("policy/src/rules.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut i = 0;
        while let Some(at) = code[i..].find("rules::") {
            let s = i + at;
            let start = code[..s]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(0, |k| k + 1);
            if let Some(r) = const_rule(&code[start..]) {
                out.insert(r.id);
            }
            i = s + "rules::".len();
        }
    }
    out
}

/// The registry entry of an emitted id; `family.{…}` (built with `format!`) is the family's.
fn registered(id: &str) -> Option<&'static Rule> {
    match id.split_once(".{") {
        Some((family, _)) => rules::lookup(&format!("{family}.x")),
        None => rules::lookup(id),
    }
}

#[test]
fn every_emitted_rule_is_registered_and_every_registered_rule_is_emitted() {
    let found = emitted();
    assert!(
        found.len() > 50,
        "the source scan found {} rules",
        found.len()
    );
    let mut problems = Vec::new();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    for (id, colours) in &found {
        let Some(rule) = registered(id) else {
            problems.push(format!("`{id}` is emitted but not registered"));
            continue;
        };
        used.insert(rule.id);
        for c in colours {
            if !rule.colours.contains(c) {
                problems.push(format!(
                    "`{id}` is emitted {c} but registered {:?}",
                    rule.colours
                ));
            }
        }
    }
    // Policy-file rules are emitted from the configuration; consts named anywhere (the git
    // guard's `RULE_…`) are emitted where those are.
    used.insert(rules::POLICY.id);
    used.extend(referenced());
    for r in rules::ALL {
        if !used.contains(r.id) {
            problems.push(format!("`{}` is registered but emitted nowhere", r.id));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_finding_over_the_corpora_names_a_registered_rule_at_its_colour() {
    let data = root().join("tests/data");
    let tmp = tempfile::tempdir().unwrap();
    assert!(std::process::Command::new("bash")
        .arg(data.join("policy_fixture.sh"))
        .arg(tmp.path())
        .status()
        .unwrap()
        .success());
    let r = std::fs::canonicalize(tmp.path()).unwrap();
    let (w, home) = (r.join("W"), r.join("home"));
    let policy = Policy::embedded_default();
    let mut problems = BTreeSet::new();
    let mut count = 0;
    for e in std::fs::read_dir(&data).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("commands") && name.ends_with(".jsonl")) {
            continue;
        }
        for line in std::fs::read_to_string(&p).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let Some(cmd) = v["cmd"].as_str() else {
                continue;
            };
            let cwd = w.join(v["cwd"].as_str().unwrap_or("."));
            let ctx = Context {
                worktree: &w,
                cwd: &cwd,
                home: Some(&home),
                scratch: None,
                git: None,
            };
            for variant in [cmd.to_string(), format!("sudo {cmd}")] {
                let c = policy.classify(&Action::Exec { command: variant }, &ctx);
                for f in &c.findings {
                    count += 1;
                    match rules::lookup(&f.rule) {
                        Some(r) if r.colours.contains(&f.verdict) => {}
                        Some(r) => {
                            problems.insert(format!(
                                "`{}` found {} but registered {:?}",
                                f.rule, f.verdict, r.colours
                            ));
                        }
                        None => {
                            problems.insert(format!("`{}` is not registered", f.rule));
                        }
                    }
                }
            }
        }
    }
    assert!(count > 1000, "only {count} findings");
    assert!(
        problems.is_empty(),
        "{}",
        problems.into_iter().collect::<Vec<_>>().join("\n")
    );
}
