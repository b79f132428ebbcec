//! Agent profiles (issue 12): recognition from every install layout
//! (`tests/data/agent-installs.jsonl`), layering by the user's policy file, validation at
//! load, the kernel layer's lists, and known probes that can only be refused quietly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use tyba_policy::agents::{Evidence, InstallMarkers};
use tyba_policy::{
    decide, Action, ActionKind, Autonomy, ConfigError, Context, Decision, ExecMode, Policy,
    SessionMemory,
};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

#[derive(serde::Deserialize)]
struct Install {
    id: String,
    path: String,
    expect: String,
    evidence: Option<String>,
    #[serde(default)]
    python: Vec<String>,
}

#[test]
fn every_install_layout_is_recognised() {
    let policy = Policy::embedded_default();
    let agents = &policy.config().agents;
    let home = Path::new("/home/person");
    let text = std::fs::read_to_string(data("agent-installs.jsonl")).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Install = serde_json::from_str(line).unwrap();
        let path = PathBuf::from(case.path.replace("@HOME@", "/home/person"));
        let mut markers = InstallMarkers::from_path(&path);
        markers.python_distributions = case.python.clone();
        let found = agents.profile_for(&path, Some(home), &markers);
        count += 1;
        let got = found.as_ref().map_or("none", |r| r.name);
        if got != case.expect {
            failures.push(format!("{}: expected {}, got {got}", case.id, case.expect));
            continue;
        }
        let evidence = found.map(|r| match r.evidence {
            Evidence::InstallDir(_) => "install-dir",
            Evidence::NpmPackage { .. } => "npm",
            Evidence::PythonDistribution(_) => "python",
            Evidence::ProgramName => "name",
            _ => "other",
        });
        if evidence != case.evidence.as_deref() {
            failures.push(format!(
                "{}: evidence {evidence:?}, expected {:?}",
                case.id, case.evidence
            ));
        }
    }
    assert!(count > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn roots_of_installations() {
    let policy = Policy::embedded_default();
    let agents = &policy.config().agents;
    let home = Path::new("/home/person");
    let p = Path::new("/home/person/.local/share/claude/versions/2.1.332");
    let r = agents
        .profile_for(p, Some(home), &InstallMarkers::from_path(p))
        .unwrap();
    assert_eq!(
        r.evidence,
        Evidence::InstallDir(PathBuf::from(
            "/home/person/.local/share/claude/versions/2.1.332"
        ))
    );
    let p = Path::new("/usr/local/lib/node_modules/@openai/codex/vendor/x/codex/codex");
    let m = InstallMarkers::from_path(p);
    assert_eq!(
        m.npm_packages,
        vec![(
            "@openai/codex".to_string(),
            PathBuf::from("/usr/local/lib/node_modules/@openai/codex")
        )]
    );
    // Without a home directory, `~` installation directories are not guessed.
    assert!(agents
        .profile_for(Path::new("/x/y"), None, &InstallMarkers::default())
        .is_none());
}

/// Known data (merged back from the session copy of the state) lies inside the profile's own
/// state, and names none of the files the agents run or obey.
#[test]
fn the_embedded_data_patterns_name_data_only() {
    use tyba_policy::agents::data_pattern_matches;
    let policy = Policy::embedded_default();
    let c = policy.config();
    for (name, p) in &c.agents.0 {
        for d in &p.data {
            assert!(
                p.state.iter().any(|s| d
                    .strip_prefix(s.as_str())
                    .is_some_and(|r| r.starts_with('/'))),
                "{name}: {d} lies in no state entry"
            );
        }
    }
    let code_or_config = [
        ("claude-code", "~/.claude/", "settings.json"),
        ("claude-code", "~/.claude/", ".claude.json"),
        ("claude-code", "~/.claude/", "plugins/x/hooks/hooks.json"),
        (
            "claude-code",
            "~/.claude/",
            "shell-snapshots/snapshot-bash-1.sh",
        ),
        ("claude-code", "~/.claude/", "commands/x.md"),
        ("claude-code", "~/.claude/", "agents/x.md"),
        ("claude-code", "~/.claude/", "projects/x/settings.json"),
        ("codex", "~/.codex/", ".env"),
        ("codex", "~/.codex/", "config.toml"),
        ("codex", "~/.codex/", "hooks.json"),
        ("codex", "~/.codex/", "rules/default.rules"),
        ("codex", "~/.codex/", "AGENTS.md"),
        ("codex", "~/.codex/", "prompts/x.md"),
        ("gemini", "~/.gemini/", "settings.json"),
        ("gemini", "~/.gemini/", "trustedFolders.json"),
        ("gemini", "~/.gemini/", "extensions/x/gemini-extension.json"),
        ("gemini", "~/.gemini/", ".env"),
        ("gemini", "~/.gemini/", "GEMINI.md"),
        ("gemini", "~/.gemini/", "history/h/.git/hooks/post-commit"),
        ("gemini", "~/.gemini/", "tmp/h/chats/../../settings.json"),
        // Credentials: a token file the agent wrote would log the person's next run into
        // the account it names.
        ("claude-code", "~/.claude/", ".credentials.json"),
        ("codex", "~/.codex/", "auth.json"),
        ("gemini", "~/.gemini/", "oauth_creds.json"),
        ("gemini", "~/.gemini/", "google_accounts.json"),
    ];
    for (name, root, rel) in code_or_config {
        let p = c.agents.get(name).unwrap();
        for d in &p.data {
            let pat = d.strip_prefix(root).unwrap_or(d);
            assert!(!data_pattern_matches(pat, rel), "{name}: {d} matches {rel}");
        }
    }
    for (name, root, rel) in [
        ("claude-code", "~/.claude/", "projects/-w-repo/0b1c.jsonl"),
        ("codex", "~/.codex/", "sessions/2026/12/01/rollout-x.jsonl"),
        ("gemini", "~/.gemini/", "tmp/ab12/chats/session-x.json"),
    ] {
        let p = c.agents.get(name).unwrap();
        assert!(
            p.data
                .iter()
                .any(|d| data_pattern_matches(d.strip_prefix(root).unwrap_or(d), rel)),
            "{name}: {rel} is data"
        );
    }
}

#[test]
fn the_kernel_layer_lists_hold_every_profile() {
    let policy = Policy::embedded_default();
    let c = policy.config();
    for (name, p) in &c.agents.0 {
        for h in &p.hosts {
            assert!(c.network.agent_hosts.contains(h), "{name}: {h}");
        }
        for s in &p.state {
            assert!(c.filesystem.agent_state.contains(s), "{name}: {s}");
        }
        for s in &p.control_files {
            assert!(c.filesystem.agent_control_files.contains(s), "{name}: {s}");
        }
    }
    for name in ["claude-code", "codex", "gemini", "aider"] {
        let p = c.agents.get(name).unwrap();
        assert!(!p.key_env.is_empty(), "{name} has no key variables");
        assert!(!p.hosts.is_empty(), "{name} has no hosts");
        assert!(p.hidden_env.iter().any(|v| v == "SSH_AUTH_SOCK"));
    }
}

#[test]
fn a_user_layer_extends_and_adds_agents() {
    let user = r#"
[agents.codex]
hosts = ["codex.example.internal:8443"]
key_env = ["AZURE_OPENAI_API_KEY"]

[agents.my-agent]
programs = ["my-agent"]
npm_packages = ["@example/my-agent"]
hosts = ["llm.example.internal:443"]
state = ["~/.my-agent"]
control_files = ["~/.my-agent/config.json"]
"#;
    let p = Policy::from_layers(vec![("user".into(), user.into())]).unwrap();
    let c = p.config();
    let codex = c.agents.get("codex").unwrap();
    assert!(codex.hosts.iter().any(|h| h == "api.openai.com:443"));
    assert!(codex
        .hosts
        .iter()
        .any(|h| h == "codex.example.internal:8443"));
    assert!(codex.key_env.iter().any(|k| k == "OPENAI_API_KEY"));
    assert!(codex.key_env.iter().any(|k| k == "AZURE_OPENAI_API_KEY"));
    assert!(c
        .network
        .agent_hosts
        .iter()
        .any(|h| h == "llm.example.internal:443"));
    assert!(c.filesystem.agent_state.iter().any(|s| s == "~/.my-agent"));
    let path = Path::new("/usr/local/lib/node_modules/@example/my-agent/bin.js");
    let r = c
        .agents
        .profile_for(path, None, &InstallMarkers::from_path(path))
        .unwrap();
    assert_eq!(r.name, "my-agent");
}

#[test]
fn bad_profiles_are_load_errors() {
    let cases = [
        ("[agents.codex]\nhostz = [\"x:1\"]\n", "unknown field"),
        ("[agents.codex]\nhosts = [\"no-port\"]\n", "host:port"),
        ("[agents.codex]\nhosts = [\"x:0\"]\n", "host:port"),
        ("[agents.codex]\nkey_env = [\"LD_PRELOAD\"]\n", "run code"),
        ("[agents.codex]\nkey_env = [\"A-B\"]\n", "variable name"),
        ("[agents.codex]\nstate = [\"rel/dir\"]\n", "must start with"),
        ("[agents.codex]\ndata = [\"sessions/*.jsonl\"]\n", "must start with"),
        ("[agents.codex]\ndata = [\"~/.codex/../.bashrc\"]\n", "must start with"),
        ("[agents.codex]\ndata = [\"~/.codex/./x\"]\n", "without `.` or `..`"),
        ("[agents.codex]\nruntime_dirs = [\"/tmp/codex-daemon\"]\n", "`{uid}` once"),
        ("[agents.codex]\nruntime_dirs = [\"tmp/x-{uid}\"]\n", "`{uid}` once"),
        ("[agents.codex]\nruntime_dirs = [\"~/x-{uid}\"]\n", "`{uid}` once"),
        ("[agents.codex]\nruntime_dirs = [\"/tmp/{uid}/x\"]\n", "`{uid}` once"),
        ("[agents.codex]\nruntime_dirs = [\"/tmp/../etc/x-{uid}\"]\n", "`{uid}` once"),
        ("[agents.codex]\nruntime_dirs = [\"/tmp/x-{uid}-{uid}\"]\n", "`{uid}` once"),
        ("[agents.Bad_Name]\n", "lower-case"),
        (
            "[[agents.codex.probes]]\nid = \"p\"\nprogram = \"tmux\"\ndecision = \"quiet-refuse\"\nreason = \"r\"\n",
            "names no argument",
        ),
        (
            "[[agents.codex.probes]]\nid = \"p\"\nprogram = \"tmux\"\nargs = [\"ls\"]\ndecision = \"allow\"\nreason = \"r\"\n",
            "unknown variant",
        ),
        (
            "[[agents.codex.probes]]\nid = \"p\"\nprogram = \"tmux\"\nargs = [\"ls\"]\ndecision = \"quiet-refuse\"\nreason = \"r\"\nexamples = [\"tmux attach\"]\n",
            "does not match",
        ),
        (
            "[[agents.codex.probes]]\nid = \"p\"\nprogram = \"/usr/bin/tmux\"\nargs = [\"ls\"]\ndecision = \"quiet-refuse\"\nreason = \"r\"\n",
            "bare name",
        ),
    ];
    for (text, want) in cases {
        match Policy::from_layers(vec![("user".into(), text.into())]) {
            Err(e @ (ConfigError::Agent { .. } | ConfigError::Syntax { .. })) => {
                assert!(e.to_string().contains(want), "{text}: {e}");
            }
            Err(e) => panic!("{text}: unexpected error {e}"),
            Ok(_) => panic!("{text}: loaded"),
        }
    }
}

fn decision_for(policy: &Policy, cmd: &str) -> Decision {
    let dir = tempfile::tempdir().unwrap();
    let wt = std::fs::canonicalize(dir.path()).unwrap();
    let ctx = Context {
        worktree: &wt,
        cwd: &wt,
        home: None,
        scratch: None,
        git: None,
    };
    let c = policy.classify(
        &Action::Exec {
            command: cmd.to_string(),
        },
        &ctx,
    );
    decide(
        &c,
        ActionKind::Command,
        cmd,
        Autonomy::Medium,
        ExecMode::Auto,
        &SessionMemory::new(),
    )
}

#[test]
fn known_probes_are_refused_quietly_never_allowed() {
    let policy = Policy::embedded_default();
    let agents = &policy.config().agents;
    let argv = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_string).collect() };
    let claude = agents.get("claude-code").unwrap();
    let codex = agents.get("codex").unwrap();
    for (profile, name, cmd) in [
        (claude, "claude-code", "tmux display-message -p #{pane_id}"),
        (claude, "claude-code", "ssh -T git@github.com"),
        (claude, "claude-code", "env"),
        (codex, "codex", "lsb_release -a"),
        (codex, "codex", "getconf LONG_BIT"),
    ] {
        let general = decision_for(&policy, cmd);
        assert!(matches!(general, Decision::Ask(_)), "{cmd}: {general:?}");
        let q = profile
            .probe_outcome(name, &argv(cmd), &general)
            .unwrap_or_else(|| panic!("{cmd} is a known probe"));
        assert_eq!(q.agent, name);
    }
    // `env` with a command is no probe: `exact`.
    let general = decision_for(&policy, "env X=1 make");
    assert!(claude
        .probe_outcome("claude-code", &argv("env X=1 make"), &general)
        .is_none());
    // A probe the general rules allow stays allowed; one they refuse stays refused.
    assert!(claude
        .probe_outcome("claude-code", &argv("env"), &Decision::Allow)
        .is_none());
    let refused = Decision::Refuse {
        reason: "blocked".into(),
    };
    assert!(claude
        .probe_outcome("claude-code", &argv("env"), &refused)
        .is_none());
}

#[test]
fn the_embedded_profiles_check() {
    Policy::check_embedded_default().unwrap();
}

#[test]
fn a_script_probe_matches_only_a_shell_running_a_script_that_starts_so() {
    let policy = Policy::embedded_default();
    let claude = policy.config().agents.get("claude-code").unwrap();
    let general = Decision::Ask(tyba_policy::Ask {
        verdict: tyba_policy::Verdict::Red,
        rememberable: None,
        show_diff: false,
    });
    let snap =
        "SNAPSHOT_FILE=/home/p/.claude/shell-snapshots/snapshot-bash-1-x.sh\nsource ~/.bashrc";
    let is = |argv: &[&str]| {
        let v: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        claude.probe_outcome("claude-code", &v, &general)
    };
    assert_eq!(
        is(&["/bin/bash", "-c", "-l", snap]).map(|q| q.probe),
        Some("shell-snapshot".to_string())
    );
    // Not a script that starts so, not run with -c, not another program.
    assert!(is(&["/bin/bash", "-c", "-l", "echo SNAPSHOT_FILE=x"]).is_none());
    assert!(is(&["/bin/bash", snap]).is_none());
    assert!(is(&["/bin/sh", "-c", snap]).is_none());
    // Never more than a quiet refusal: an allowed one stays allowed.
    let v: Vec<String> = ["/bin/bash", "-c", snap]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(claude
        .probe_outcome("claude-code", &v, &Decision::Allow)
        .is_none());
}
