//! The golden snapshot of `tyba classify --jsonl`: every case of the command corpora in
//! `tests/data` (`commands.jsonl`, `commands-extra.jsonl`, `commands-redteam*.jsonl`,
//! `commands-faults.jsonl`, `commands-bytes.jsonl` on the fixture with
//! `tests/data/bytes_fixture.sh` run after it) and
//! disguised variants of each command line (wrapped in `bash -c '…'`, with `; rm -rf ~`
//! appended, behind `env`, `timeout 5` and `nice -n 5`), classified through the binary on the
//! fixture of `tests/data/policy_fixture.sh`; one line per case and variant: `case`
//! (`FILE:ID:VARIANT`), `input` (the `--jsonl` line) and `output` (the result, see
//! `compact`).
//!
//! The output is compared byte for byte with `tests/data/classify-golden.jsonl`; the
//! fixture's temporary directory is written `<ROOT>` so the file does not depend on where the
//! test ran. Any difference fails the test and names the lines. After a deliberate change of
//! the policy, regenerate it with
//!
//! ```text
//! TYBA_BLESS=1 cargo test --test classify_golden
//! ```
//!
//! and say in the commit which lines changed and why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The corpora the snapshot covers, in order.
const CORPORA: &[&str] = &[
    "commands.jsonl",
    "commands-extra.jsonl",
    "commands-redteam.jsonl",
    "commands-redteam2.jsonl",
    "commands-redteam3.jsonl",
    "commands-redteam4.jsonl",
    "commands-redteam5.jsonl",
    "commands-redteam6.jsonl",
    "commands-faults.jsonl",
    "commands-bytes.jsonl",
];

/// Disguises of a command line that must never lower its verdict (DESIGN §2a: wrappers are
/// judged by what they run; a longer line is at least as bad as its first part).
fn variants(cmd: &str) -> Vec<(&'static str, String)> {
    let quoted = format!("'{}'", cmd.replace('\'', r"'\''"));
    vec![
        ("plain", cmd.to_string()),
        ("bash-c", format!("bash -c {quoted}")),
        ("rm-home", format!("{cmd}; rm -rf ~")),
        ("env", format!("env {cmd}")),
        ("timeout", format!("timeout 5 {cmd}")),
        ("nice", format!("nice -n 5 {cmd}")),
    ]
}

/// One input line for `tyba classify --jsonl` and the label it is written under.
fn inputs() -> Vec<(String, serde_json::Value)> {
    let mut out = Vec::new();
    for name in CORPORA {
        let text = std::fs::read_to_string(data(name)).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = case["id"].as_str().unwrap().to_string();
            let mut base = serde_json::Map::new();
            for key in ["tool", "paths", "url", "cwd"] {
                if let Some(v) = case.get(key) {
                    base.insert(key.to_string(), v.clone());
                }
            }
            match case.get("cmd").and_then(|c| c.as_str()) {
                Some(cmd) => {
                    for (variant, text) in variants(cmd) {
                        let mut input = base.clone();
                        input.insert("cmd".into(), text.into());
                        out.push((format!("{name}:{id}:{variant}"), input.into()));
                    }
                }
                None => out.push((format!("{name}:{id}:tool"), base.into())),
            }
        }
    }
    out
}

fn snapshot() -> String {
    let tmp = tempfile::tempdir().unwrap();
    // The fixture, then the names that are no UTF-8 text of `commands-bytes.jsonl` (in
    // `W/build/.bytes`, which no other case names).
    for script in ["policy_fixture.sh", "bytes_fixture.sh"] {
        assert!(Command::new("bash")
            .arg(data(script))
            .arg(tmp.path())
            .status()
            .unwrap()
            .success());
    }
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (w, home) = (root.join("W"), root.join("home"));
    let inputs = inputs();
    let mut stdin = String::new();
    for (_, input) in &inputs {
        stdin.push_str(&serde_json::to_string(input).unwrap());
        stdin.push('\n');
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_tyba"));
    c.current_dir(&w)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("XDG_CONFIG_HOME");
    for (k, _) in std::env::vars() {
        if k.starts_with("GIT_") && k != "GIT_CONFIG_NOSYSTEM" {
            c.env_remove(k);
        }
    }
    let mut child = c
        .args(["classify", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || pipe.write_all(stdin.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), inputs.len(), "one result line per input");
    let root_text = serde_json::to_string(root.to_str().unwrap()).unwrap();
    let root_text = root_text.trim_matches('"');
    let mut golden = String::new();
    for ((label, input), result) in inputs.iter().zip(lines) {
        let result: serde_json::Value = serde_json::from_str(result).unwrap();
        let line = serde_json::json!({
            "case": label,
            "input": input,
            "output": compact(input["cmd"].as_str(), &result, root.to_str().unwrap()),
        });
        golden.push_str(
            &serde_json::to_string(&line)
                .unwrap()
                .replace(root_text, "<ROOT>"),
        );
        golden.push('\n');
    }
    golden
}

/// The result with `rules` and `reasons` left out (both are `findings` again) and each finding
/// written `"COLOUR RULE: REASON"`, so one line stays readable.
///
/// A result naming a path that is neither in the fixture nor written in the command (a glob
/// over `/etc/*` or `/tmp/*` expanded on this machine), or of a command with a glob over a
/// directory outside the fixture, depends on the machine's files: it is kept as its verdict
/// and its sorted rule ids only, marked `machine_dependent`, without the two rules whose
/// presence is the number of files there (`path.glob-too-wide` and `path.unresolved` fire
/// when the glob matches more than the analysis expands: `echo /tmp/*` on a busy machine).
fn compact(cmd: Option<&str>, result: &serde_json::Value, root: &str) -> serde_json::Value {
    let from_machine = result["paths"].as_array().unwrap().iter().any(|p| {
        let p = p.as_str().unwrap();
        !p.starts_with(root) && !cmd.is_some_and(|c| c.contains(p))
    });
    let machine_glob = cmd.is_some_and(|c| {
        c.split_whitespace()
            .map(|w| w.trim_matches(|ch| ch == '\'' || ch == '"'))
            .any(|w| w.starts_with('/') && !w.starts_with(root) && w.contains(['*', '?', '[']))
    });
    if from_machine || machine_glob {
        let mut rules: Vec<&str> = result["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .filter(|r| *r != "path.glob-too-wide" && *r != "path.unresolved")
            .collect();
        rules.sort_unstable();
        rules.dedup();
        return serde_json::json!({
            "verdict": result["verdict"],
            "rules": rules,
            "machine_dependent": true,
        });
    }
    let findings: Vec<String> = result["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}: {}",
                f["verdict"].as_str().unwrap(),
                f["rule"].as_str().unwrap(),
                f["reason"].as_str().unwrap()
            )
        })
        .collect();
    serde_json::json!({
        "verdict": result["verdict"],
        "findings": findings,
        "paths": result["paths"],
        "writes": result["writes"],
        "hosts": result["hosts"],
        "shape": result["shape"],
    })
}

#[test]
fn classify_output_matches_the_golden_snapshot() {
    let got = snapshot();
    let path = data("classify-golden.jsonl");
    if std::env::var_os("TYBA_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want == got {
        return;
    }
    let label = |l: &str| {
        serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .and_then(|v| v["case"].as_str().map(str::to_string))
            .unwrap_or_else(|| l.chars().take(80).collect())
    };
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut diffs = Vec::new();
    for i in 0..w.len().max(g.len()) {
        match (w.get(i), g.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => diffs.push(format!("{}:\n  want {a}\n  got  {b}", label(a))),
            (Some(a), None) => diffs.push(format!("{}: missing from the output", label(a))),
            (None, Some(b)) => diffs.push(format!("{}: not in the snapshot", label(b))),
            (None, None) => {}
        }
    }
    panic!(
        "{} lines differ from tests/data/classify-golden.jsonl (regenerate with \
         TYBA_BLESS=1 cargo test --test classify_golden, and say why in the commit):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
