//! Classification cost over the shared corpus, beside the cost of the bash grammar alone on the
//! same lines (the baseline measured in the same run). Figures: docs/performance.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::Path;
use tyba_policy::{Action, Context, Policy};

fn corpus_commands() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/commands.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("cmd").and_then(|c| c.as_str()).map(str::to_string))
        .collect()
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/policy_fixture.sh");
    assert!(std::process::Command::new("bash")
        .arg(script)
        .arg(tmp.path())
        .status()
        .unwrap()
        .success());
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (w, home) = (root.join("W"), root.join("home"));
    let policy = Policy::embedded_default();
    let ctx = Context {
        worktree: &w,
        cwd: &w,
        home: Some(&home),
        scratch: None,
        git: None,
    };
    let cmds = corpus_commands();
    let opts = brush_parser::ParserOptions::default();

    let mut g = c.benchmark_group("corpus");
    g.throughput(Throughput::Elements(cmds.len() as u64));
    g.bench_function("parse_only", |b| {
        b.iter(|| {
            for cmd in &cmds {
                if let Ok(t) =
                    brush_parser::tokenize_str_with_options(cmd, &opts.tokenizer_options())
                {
                    black_box(brush_parser::parse_tokens(&t, &opts).ok());
                }
            }
        })
    });
    g.bench_function("classify", |b| {
        b.iter(|| {
            for cmd in &cmds {
                black_box(policy.classify(
                    &Action::Exec {
                        command: cmd.clone(),
                    },
                    &ctx,
                ));
            }
        })
    });
    g.finish();

    let mut t = c.benchmark_group("typical");
    for cmd in [
        "git status",
        "cargo test",
        "cat README.md | grep foo | wc -l",
        "rm -rf build",
        "ls -la",
        "cd src && cat main.rs",
    ] {
        t.bench_with_input(BenchmarkId::new("parse_only", cmd), cmd, |b, cmd| {
            b.iter(|| {
                let t = brush_parser::tokenize_str_with_options(cmd, &opts.tokenizer_options())
                    .unwrap();
                black_box(brush_parser::parse_tokens(&t, &opts).ok())
            })
        });
        t.bench_with_input(BenchmarkId::new("classify", cmd), cmd, |b, cmd| {
            b.iter(|| {
                black_box(policy.classify(
                    &Action::Exec {
                        command: cmd.to_string(),
                    },
                    &ctx,
                ))
            })
        });
    }
    t.finish();

    // The agents' wrappers around one command (tests/data/agent-wrappers.jsonl), in a session
    // with a scratch directory and the shell snapshot fixture in the home directory.
    let scratch = root.join("scratch");
    let snaps = home.join(".claude/shell-snapshots");
    std::fs::create_dir_all(&snaps).unwrap();
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/agents/claude-code/snapshot-bash.sh"),
        snaps.join("snapshot-bash-1764580000000-q7xk2a.sh"),
    )
    .unwrap();
    let session = Context {
        scratch: Some(&scratch),
        ..ctx
    };
    let wrappers = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/agent-wrappers.jsonl"),
    )
    .unwrap();
    let mut wg = c.benchmark_group("wrapped");
    let cmd = "git status";
    wg.bench_function("bare", |b| {
        b.iter(|| {
            black_box(policy.classify(
                &Action::Exec {
                    command: cmd.to_string(),
                },
                &session,
            ))
        })
    });
    for line in wrappers.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let agent = v["agent"].as_str().unwrap().to_string();
        let inner = if v["quote"] == "single" {
            format!("'{cmd}'")
        } else {
            cmd.to_string()
        };
        let wrapped = v["template"]
            .as_str()
            .unwrap()
            .replace("@SCRATCH@", &scratch.display().to_string())
            .replace("@HOME@", &home.display().to_string())
            .replace("@CMD@", &inner);
        wg.bench_function(agent, |b| {
            b.iter(|| {
                black_box(policy.classify(
                    &Action::Exec {
                        command: wrapped.clone(),
                    },
                    &session,
                ))
            })
        });
    }
    wg.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
