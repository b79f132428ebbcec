//! The decision table of DESIGN.md §4 and the "always" memory of §3, and the policy file's
//! guarantees (it can never add to the green list, make a green command ask, or weaken a rule).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use tyba_policy::{
    decide, Action, ActionKind, Autonomy, Classification, Context, Decision, ExecMode, Finding,
    Policy, SessionMemory, Verdict,
};

fn class(v: Verdict) -> Classification {
    let mut c = Classification::green();
    if v != Verdict::Green {
        c.add(Finding::new(v, "test.rule", "test reason"));
    }
    c
}

/// The context of an action run in the worktree `wt`, with no home, scratch or git.
fn in_worktree(wt: &std::path::Path) -> Context<'_> {
    Context {
        worktree: wt,
        cwd: wt,
        home: None,
        scratch: None,
        git: None,
    }
}

fn kind_of(d: &Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Ask(a) if a.rememberable.is_some() => "ask+always",
        Decision::Ask(a) if a.show_diff => "ask+diff",
        Decision::Ask(_) => "ask",
        Decision::Refuse { .. } => "refuse",
    }
}

#[test]
fn decision_table_matches_design_section_4() {
    let mem = SessionMemory::new();
    let rows: &[(Autonomy, [&str; 5])] = &[
        // green command, green edit, yellow, red, blocked
        (
            Autonomy::Low,
            ["allow", "ask+diff", "ask+always", "ask", "refuse"],
        ),
        (
            Autonomy::Medium,
            ["allow", "allow", "ask+always", "ask", "refuse"],
        ),
        (Autonomy::High, ["allow", "allow", "allow", "ask", "refuse"]),
    ];
    for (level, want) in rows {
        let got = [
            decide(
                &class(Verdict::Green),
                ActionKind::Command,
                "ls",
                *level,
                ExecMode::Auto,
                &mem,
            ),
            decide(
                &class(Verdict::Green),
                ActionKind::Edit,
                "write src/a.rs",
                *level,
                ExecMode::Auto,
                &mem,
            ),
            decide(
                &class(Verdict::Yellow),
                ActionKind::Command,
                "cargo test",
                *level,
                ExecMode::Auto,
                &mem,
            ),
            decide(
                &class(Verdict::Red),
                ActionKind::Command,
                "curl x",
                *level,
                ExecMode::Auto,
                &mem,
            ),
            decide(
                &class(Verdict::Blocked),
                ActionKind::Command,
                "git push origin main",
                *level,
                ExecMode::Auto,
                &mem,
            ),
        ];
        let got: Vec<&str> = got.iter().map(kind_of).collect();
        assert_eq!(&got[..], &want[..], "autonomy {level}");
    }
}

#[test]
fn always_is_for_the_exact_string_only() {
    let mut mem = SessionMemory::new();
    let yellow = class(Verdict::Yellow);
    let Decision::Ask(ask) = decide(
        &yellow,
        ActionKind::Command,
        "cargo test",
        Autonomy::Medium,
        ExecMode::Auto,
        &mem,
    ) else {
        panic!("yellow must ask")
    };
    mem.remember(ask.rememberable.unwrap());
    assert_eq!(
        decide(
            &yellow,
            ActionKind::Command,
            "cargo test",
            Autonomy::Medium,
            ExecMode::Auto,
            &mem
        ),
        Decision::Allow
    );
    for other in [
        "cargo test --release",
        "cargo test ",
        " cargo test",
        "cargo  test",
    ] {
        assert!(
            matches!(
                decide(
                    &yellow,
                    ActionKind::Command,
                    other,
                    Autonomy::Medium,
                    ExecMode::Auto,
                    &mem
                ),
                Decision::Ask(_)
            ),
            "{other:?}"
        );
    }
}

#[test]
fn red_is_never_rememberable_even_when_the_string_was_remembered() {
    let mut mem = SessionMemory::new();
    let Decision::Ask(ask) = decide(
        &class(Verdict::Yellow),
        ActionKind::Command,
        "x",
        Autonomy::Medium,
        ExecMode::Auto,
        &mem,
    ) else {
        panic!()
    };
    mem.remember(ask.rememberable.unwrap());
    // The same string classified red (e.g. the worktree changed under it) still asks.
    let d = decide(
        &class(Verdict::Red),
        ActionKind::Command,
        "x",
        Autonomy::High,
        ExecMode::Auto,
        &mem,
    );
    assert!(
        matches!(d, Decision::Ask(ref a) if a.rememberable.is_none()),
        "{d:?}"
    );
}

#[test]
fn safe_mode_refuses_compound_lines_with_a_hint_and_auto_refuses_opaque_ones() {
    let p = Policy::embedded_default();
    let wt = std::env::temp_dir();
    let ctx = in_worktree(&wt);
    let mem = SessionMemory::new();
    let c = p.classify(
        &Action::Exec {
            command: "ls && pwd".into(),
        },
        &ctx,
    );
    assert_eq!(c.verdict, Verdict::Green);
    match decide(
        &c,
        ActionKind::Command,
        "ls && pwd",
        Autonomy::Medium,
        ExecMode::Safe,
        &mem,
    ) {
        Decision::Refuse { reason } => assert!(reason.contains("split"), "{reason}"),
        d => panic!("{d:?}"),
    }
    assert_eq!(
        decide(
            &c,
            ActionKind::Command,
            "ls && pwd",
            Autonomy::Medium,
            ExecMode::Auto,
            &mem
        ),
        Decision::Allow
    );
    let opaque = p.classify(
        &Action::Exec {
            command: "eval \"$X\"".into(),
        },
        &ctx,
    );
    assert!(opaque.shape.opaque);
    assert!(matches!(
        decide(
            &opaque,
            ActionKind::Command,
            "eval \"$X\"",
            Autonomy::High,
            ExecMode::Auto,
            &mem
        ),
        Decision::Refuse { .. }
    ));
    let bypass = ExecMode::dangerous_bypass_from_startup_flag();
    assert!(matches!(
        decide(
            &opaque,
            ActionKind::Command,
            "eval \"$X\"",
            Autonomy::High,
            bypass,
            &mem
        ),
        Decision::Ask(_)
    ));
}

#[test]
fn bypass_mode_needs_the_startup_flag() {
    let (m, warn) = ExecMode::requested("dangerous_bypass", false).unwrap();
    assert_eq!(m, ExecMode::Auto);
    assert!(warn.is_some());
    let (m, warn) = ExecMode::requested("dangerous_bypass", true).unwrap();
    assert_eq!(m.as_str(), "dangerous_bypass");
    assert!(warn.is_none());
    assert!(ExecMode::requested("yolo", true).is_err());
}

#[test]
fn blocked_is_refused_with_its_reason_at_every_level_and_mode() {
    let mem = SessionMemory::new();
    for level in [Autonomy::Low, Autonomy::Medium, Autonomy::High] {
        for mode in [
            ExecMode::Safe,
            ExecMode::Auto,
            ExecMode::dangerous_bypass_from_startup_flag(),
        ] {
            match decide(
                &class(Verdict::Blocked),
                ActionKind::Command,
                "x",
                level,
                mode,
                &mem,
            ) {
                Decision::Refuse { reason } => assert!(reason.contains("test reason")),
                d => panic!("{d:?}"),
            }
        }
    }
}

fn load(text: &str) -> Result<Policy, tyba_policy::ConfigError> {
    Policy::from_layers(vec![("test.toml".to_string(), text.to_string())])
}

#[test]
fn policy_file_cannot_add_green_or_make_green_ask() {
    let green =
        "[[rule]]\nid = \"x\"\nverdict = \"green\"\nprogram = \"terraform\"\nreason = \"r\"\n";
    assert!(load(green).unwrap_err().to_string().contains("green list"));
    let ask_ls = "[[rule]]\nid = \"x\"\nverdict = \"yellow\"\nprogram = \"ls\"\nreason = \"r\"\n";
    assert!(load(ask_ls).unwrap_err().to_string().contains("green list"));
}

#[test]
fn policy_file_rules_are_checked_against_their_examples() {
    let ok = "[[rule]]\nid = \"deploy\"\nverdict = \"red\"\nprogram = \"deploy\"\nargs = [\"prod\"]\nreason = \"deploys to production\"\nexamples = [\"deploy prod\", \"sudo deploy --now prod\"]\nnot_examples = [\"deploy staging\"]\n";
    let p = load(ok).unwrap();
    let wt = std::env::temp_dir();
    let ctx = in_worktree(&wt);
    let c = p.classify(
        &Action::Exec {
            command: "deploy prod".into(),
        },
        &ctx,
    );
    assert_eq!(c.verdict, Verdict::Red);
    assert!(c.rules().contains(&"policy.deploy"));
    let bad = ok.replace("\"deploy staging\"", "\"deploy prod\"");
    assert!(load(&bad)
        .unwrap_err()
        .to_string()
        .contains("counter-example"));
    let bad2 = ok.replace("\"deploy prod\", ", "\"deploy dev\", ");
    assert!(load(&bad2)
        .unwrap_err()
        .to_string()
        .contains("does not match"));
}

#[test]
fn bad_policy_files_name_the_line() {
    let err = load("[filesystem]\nread_write = [\"~/.cache\"]\nbogus = 1\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3") || err.contains("3:"), "{err}");
    let err = load("[git]\nprotected_branches = \"main\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2") || err.contains("2:"), "{err}");
}

#[test]
fn policy_layers_add_and_never_unprotect() {
    let p =
        load("[git]\nprotected_branches = [\"release\"]\n[failures]\nnudge_after = 5\n").unwrap();
    let b = &p.config().protected_branches;
    assert!(
        b.iter().any(|x| x == "main")
            && b.iter().any(|x| x == "master")
            && b.iter().any(|x| x == "release")
    );
    assert_eq!(p.config().nudge_after, 5);
    assert_eq!(p.config().pause_after, 8);
    assert!(p
        .config()
        .filesystem
        .read_write
        .iter()
        .any(|x| x == "~/.cargo/registry"));
}

#[test]
fn embedded_default_loads_with_its_rules() {
    Policy::check_embedded_default().unwrap();
    let p = Policy::from_layers(Vec::new()).unwrap();
    assert!(p.config().rules.iter().any(|r| r.id == "terraform-destroy"));
}

#[test]
fn the_session_scratch_dir_is_like_the_worktree() {
    let p = Policy::embedded_default();
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (wt, tmp) = (root.join("wt"), root.join("tmp"));
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let line = format!("pwd -P >| {}/claude-1-cwd", tmp.display());
    let with = Context {
        worktree: &wt,
        cwd: &wt,
        home: None,
        scratch: Some(&tmp),
        git: None,
    };
    let without = Context {
        scratch: None,
        ..with
    };
    assert_eq!(
        p.classify(
            &Action::Exec {
                command: line.clone()
            },
            &with
        )
        .verdict,
        // A write into the session's scratch directory is housekeeping (DESIGN.md §2a).
        Verdict::Green
    );
    assert_eq!(
        p.classify(&Action::Exec { command: line }, &without)
            .verdict,
        Verdict::Red
    );
    let cred = format!("cat {}/.env", tmp.display());
    assert_eq!(
        p.classify(&Action::Exec { command: cred }, &with).verdict,
        Verdict::Red
    );
}

/// The session's scratch directory on the memory filesystem (`/dev/shm/tyba-UID-ID`, where
/// tyba puts it when `/tmp` is on a disk) is still the session's own: the agent's wrapper
/// writing there is housekeeping, not a device write. A link in it to a device is still one.
#[test]
fn a_scratch_dir_under_dev_shm_is_no_device() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIP: no /dev/shm");
        assert!(
            std::env::var_os("TYBA_REQUIRE_SANDBOX").is_none(),
            "/dev/shm is required"
        );
        return;
    }
    let p = Policy::embedded_default();
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let wt = root.join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("tyba-test-scratch-")
        .tempdir_in(shm)
        .unwrap();
    let tmp = std::fs::canonicalize(tmp.path()).unwrap();
    std::os::unix::fs::symlink("/dev/sda", tmp.join("disk")).unwrap();
    let with = Context {
        worktree: &wt,
        cwd: &wt,
        home: None,
        scratch: Some(&tmp),
        git: None,
    };
    let without = Context {
        scratch: None,
        ..with
    };
    let verdict =
        |line: String, ctx: &Context| p.classify(&Action::Exec { command: line }, ctx).verdict;
    let cwd_file = format!("pwd -P >| {}/claude-1-cwd", tmp.display());
    assert_eq!(verdict(cwd_file.clone(), &with), Verdict::Green);
    assert_eq!(
        verdict(format!("cp a {}/f", tmp.display()), &with),
        Verdict::Yellow
    );
    // Without a session the same place is a system path.
    assert_eq!(verdict(cwd_file, &without), Verdict::Blocked);
    // A link in the scratch directory to a device, and `..` out of it, are device writes.
    assert_eq!(
        verdict(format!("echo x > {}/disk", tmp.display()), &with),
        Verdict::Blocked
    );
    assert_eq!(
        verdict(format!("echo x > {}/../../sda", tmp.display()), &with),
        Verdict::Blocked
    );
}

/// Review 6 (r6-01): a control file's name that is a link to a file of the worktree is the
/// control file: the tools read through the link. Writing it, by the edit tool or the shell,
/// is red, like writing the name itself; writing the link's target by its own name stays
/// what it was (the control). A directory link named like a control directory counts too.
#[test]
fn a_control_name_that_is_a_link_is_a_control_file() {
    let p = Policy::embedded_default();
    let root = tempfile::tempdir().unwrap();
    let wt = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir_all(wt.join("docs/examples/claude")).unwrap();
    std::fs::create_dir_all(wt.join(".vscode")).unwrap();
    std::fs::write(wt.join("docs/examples/servers.json"), "{}").unwrap();
    std::fs::write(wt.join("docs/examples/tasks.json"), "{}").unwrap();
    std::os::unix::fs::symlink("docs/examples/servers.json", wt.join(".mcp.json")).unwrap();
    std::os::unix::fs::symlink("../docs/examples/tasks.json", wt.join(".vscode/tasks.json"))
        .unwrap();
    std::os::unix::fs::symlink("docs/examples/claude", wt.join(".claude")).unwrap();
    let ctx = in_worktree(&wt);
    let write = |path: &str| {
        p.classify(
            &Action::Write {
                paths: vec![path.to_string()],
            },
            &ctx,
        )
    };
    let shell = |line: &str| {
        p.classify(
            &Action::Exec {
                command: line.to_string(),
            },
            &ctx,
        )
        .verdict
    };
    for name in [
        ".mcp.json",
        ".vscode/tasks.json",
        ".claude/settings.json",
        ".claude",
    ] {
        let c = write(name);
        assert_eq!(c.verdict, Verdict::Red, "{name}: {c:?}");
        assert!(
            c.findings.iter().any(|f| f.rule == "path.control-file"),
            "{name}: {c:?}"
        );
        assert_eq!(shell(&format!("echo x > {name}")), Verdict::Red, "{name}");
    }
    // Control: the targets by their own names.
    for name in [
        "docs/examples/servers.json",
        "docs/examples/claude/settings.json",
    ] {
        assert!(write(name).verdict < Verdict::Red, "{name}");
        assert!(shell(&format!("echo x > {name}")) < Verdict::Red, "{name}");
    }
}

/// What a line does to the paths it names: `writes` holds what it writes or creates, `changes`
/// what it deletes, renames (either name) or links, `metadata` what it changes the mode or
/// owner of; an approval of the line grants its command exactly that (`docs/sandbox.md`,
/// "One ask per intent").
#[test]
fn a_lines_changes_are_its_removals_renames_and_links_not_its_writes_or_metadata() {
    let p = Policy::embedded_default();
    let wt = std::env::temp_dir().join(format!("tyba-changes-{}", std::process::id()));
    let o = wt
        .parent()
        .unwrap()
        .join(format!("tyba-changes-o-{}", std::process::id()));
    std::fs::create_dir_all(&wt).unwrap();
    let ctx = in_worktree(&wt);
    let at = |n: &str| o.join(n);
    let cases: &[(String, Vec<PathBuf>, Vec<PathBuf>)] = &[
        (
            format!("rm -f {}", at("a").display()),
            vec![at("a")],
            vec![],
        ),
        (
            format!("rm -rf {}", at("d").display()),
            vec![at("d")],
            vec![],
        ),
        (
            format!("mv {} {}", at("a").display(), at("b").display()),
            vec![at("a"), at("b")],
            vec![],
        ),
        (
            format!("ln -s {} {}", at("t").display(), at("l").display()),
            vec![at("l")],
            vec![],
        ),
        // Metadata only: judged as a change, named among the line's `metadata` (below).
        (format!("chmod +x {}", at("s").display()), vec![], vec![]),
        (
            format!("chown -R 1000 {}", at("d").display()),
            vec![],
            vec![],
        ),
        (
            format!("cp {} {}", at("a").display(), at("b").display()),
            vec![],
            vec![at("b")],
        ),
        (format!("cat {}", at("a").display()), vec![], vec![]),
        // In place: perl's and ruby's `-i` write the files after the code.
        (
            format!("perl -pi -e s/a/b/ {}", at("a").display()),
            vec![],
            vec![at("a")],
        ),
        (
            format!("ruby -i.bak -pe 1 {}", at("a").display()),
            vec![],
            vec![at("a")],
        ),
        (
            format!("perl -pe s/a/b/ {}", at("a").display()),
            vec![],
            vec![],
        ),
    ];
    // What a known program saves by its own rule, and only as one command that runs no code
    // the policy does not analyse (review 13's r13-01).
    let class_of = |line: String| p.classify(&Action::Exec { command: line }, &ctx);
    let f = at("f");
    let c = class_of(format!("sed -i s/a/b/ {}", f.display()));
    assert_eq!(c.saved, vec![f.clone()]);
    assert!(c.saves(&f));
    let c = class_of(format!("install -m 644 x {}", f.display()));
    assert!(c.saves(&f), "{c:?}");
    let c = class_of(format!("cp --remove-destination x {}", f.display()));
    assert!(c.saves(&f), "{c:?}");
    for line in [
        format!("sed -i '1e id' {}", f.display()),
        format!("perl -pi -e s/a/b/ {}", f.display()),
        format!("./tool {}", f.display()),
        format!("sed -i s/a/b/ {} && ./tool", f.display()),
        format!("make -C {}", o.display()),
        // A `cp` that may make a link instead of the file (review 16's r16-01).
        format!("cp -P --remove-destination lnk {}", f.display()),
        format!("cp -a x {}", f.display()),
        format!("cp -s x {}", f.display()),
    ] {
        assert!(
            !class_of(line.clone()).saves(&f),
            "`{line}` saves nothing through copies"
        );
    }
    // `git config` names the file it writes (saved through its lock file), never its key
    // or value; reading, only a `--file` it names.
    let c = class_of(format!("git config --file {} a.b c", f.display()));
    assert_eq!(
        (c.writes.clone(), c.paths.clone()),
        (vec![f.clone()], vec![f.clone()])
    );
    assert!(c.saves(&f), "{c:?}");
    let c = class_of(format!("git config -f {} --get a.b", f.display()));
    assert_eq!(
        (c.writes.clone(), c.paths.clone()),
        (vec![], vec![f.clone()])
    );
    for line in ["git config --get user.name .env", "git config user.name x"] {
        assert!(class_of(line.to_string()).paths.is_empty(), "{line}");
    }
    // `-fF` is `-f F`; `--no-file` goes back to the repository's file (review 19's r19-02).
    let c = class_of(format!("git config -f{} a.b c", f.display()));
    assert_eq!(c.writes, vec![f.clone()], "{c:?}");
    let c = class_of(format!("git config --file {} --no-file a.b c", f.display()));
    assert!(c.writes.is_empty() && c.saved.is_empty(), "{c:?}");
    assert_eq!(c.verdict, Verdict::Red);
    // `--edit` runs the configured editor: code the policy does not see, no save rule.
    let c = class_of(format!("git config --file {} --edit", f.display()));
    assert!(c.runs_unanalysed_code() && !c.saves(&f), "{c:?}");
    let home = o.join("home");
    let with_home = Context {
        home: Some(&home),
        ..ctx
    };
    let c = p.classify(
        &Action::Exec {
            command: "git config --global user.name x".into(),
        },
        &with_home,
    );
    assert_eq!(c.writes, vec![home.join(".gitconfig")]);
    assert_eq!(c.verdict, Verdict::Red);
    // A recursive copy's new name may become a tree or a file; `git clone` makes its
    // directory (and the missing ones above it), whatever options come before.
    let d = at("d");
    for (line, tree, made) in [
        (format!("cp -r x {}", d.display()), true, false),
        (format!("cp -a x {}", d.display()), true, false),
        (format!("rsync -a x/ {}", d.display()), true, false),
        (format!("cp x {}", d.display()), false, false),
        (format!("git clone -q ../r {}", d.display()), false, true),
        (
            format!(
                "git clone --depth 1 -b main -o up --no-tags ../r {}",
                d.display()
            ),
            false,
            true,
        ),
        (
            format!("git clone -bmain ../r {}", d.display()),
            false,
            true,
        ),
        (format!("git clone -- ../r {}", d.display()), false, true),
    ] {
        let c = class_of(line.clone());
        let some = |b: bool| if b { vec![d.clone()] } else { vec![] };
        assert_eq!(c.trees_made, some(tree), "trees `{line}` makes");
        assert_eq!(c.dirs_made, some(made), "directories `{line}` makes");
        assert_eq!(c.parents_made, some(made), "parents `{line}` makes");
    }
    // `-b`'s value is no directory; nor is a repository without one.
    for line in [
        "git clone -b x ../r",
        "git clone ../r",
        "git clone --depth 1 ../r",
    ] {
        let c = class_of(line.to_string());
        assert!(c.dirs_made.is_empty(), "`{line}`: {:?}", c.dirs_made);
    }
    // git's transport programs by their bare or system name are git's: `upload-pack` (a
    // local `git clone`'s) reads the repository, `receive-pack` writes it.
    let gitdir = wt.join(".git");
    for (line, v) in [
        (
            format!("git-upload-pack '{}'", gitdir.display()),
            Verdict::Yellow,
        ),
        (
            format!("/usr/bin/git-upload-pack {}", gitdir.display()),
            Verdict::Yellow,
        ),
        (
            format!("git-receive-pack {}", gitdir.display()),
            Verdict::Blocked,
        ),
        (
            format!("./git-upload-pack {}", gitdir.display()),
            Verdict::Blocked,
        ),
    ] {
        assert_eq!(class_of(line.clone()).verdict, v, "`{line}`");
    }
    // An archiver's option that runs a program, in any spelling getopt takes (review 21's
    // r21-02): attached, abbreviated, in a cluster, in tar's old spelling.
    for line in [
        "tar -I./x -cf a.tar d",
        "tar --use-compress=./x -cf a.tar d",
        "tar --to-com=./x -xf a.tar",
        "tar cIf ./x a.tar d",
        "tar -cFf ./x a.tar d",
        "tar --checkpoint-act=exec=./x -cf a.tar d",
        "zip -TT=./x a.zip d",
        "zip --unzip-c ./x a.zip d",
    ] {
        let c = class_of(line.to_string());
        assert!(c.rules().contains(&"cmd.program-option"), "`{line}`: {c:?}");
    }
    for line in [
        "tar -czf a.tgz d",
        "tar -cf a.tar --format=gnu d",
        "tar xf a.tar",
    ] {
        let c = class_of(line.to_string());
        assert!(
            !c.rules().contains(&"cmd.program-option"),
            "`{line}`: {c:?}"
        );
    }
    // The archive a line writes: tar's `-f` in a create mode (dashed, old and long
    // spellings), zip's archive (`.zip` added without an extension, saved by zip's rule).
    let a = at("a.tgz");
    for (line, written) in [
        (format!("tar -czf {} d", a.display()), Some(a.clone())),
        (format!("tar czf {} d", a.display()), Some(a.clone())),
        (
            format!("tar --create --file={} d", a.display()),
            Some(a.clone()),
        ),
        (format!("tar -rf {} d", a.display()), Some(a.clone())),
        (format!("tar -xzf {}", a.display()), None),
        (format!("tar -tf {}", a.display()), None),
        ("tar -czf - d".to_string(), None),
        (format!("tar -cbf 20 {} d", a.display()), None),
        (
            format!("zip -qr {} d", at("z.zip").display()),
            Some(at("z.zip")),
        ),
        (format!("zip -r {} d", at("z").display()), Some(at("z.zip"))),
    ] {
        let c = class_of(line.clone());
        assert_eq!(
            c.writes,
            written.clone().into_iter().collect::<Vec<_>>(),
            "`{line}`"
        );
        let saved = written.filter(|_| line.starts_with("zip"));
        assert_eq!(c.saved, saved.into_iter().collect::<Vec<_>>(), "`{line}`");
    }
    // The directories a line makes, and whether it makes the missing ones above them.
    let d = at("d");
    for (line, dirs, parents) in [
        (format!("mkdir {}", d.display()), true, false),
        (format!("mkdir -pv {}", d.display()), true, true),
        (
            format!("mkdir --parents -m 700 {}", d.display()),
            true,
            true,
        ),
        (format!("mkdir -m 700 {}", d.display()), true, false),
        (format!("install -d {}", d.display()), true, true),
        (format!("install -m 644 x {}", d.display()), false, false),
        (format!("touch {}", d.display()), false, false),
        (format!("mkfifo {}", d.display()), false, false),
    ] {
        let c = class_of(line.clone());
        assert_eq!(c.writes, vec![d.clone()], "writes of `{line}`");
        let some = |b: bool| if b { vec![d.clone()] } else { vec![] };
        assert_eq!(c.dirs_made, some(dirs), "directories `{line}` makes");
        assert_eq!(c.parents_made, some(parents), "parents `{line}` makes");
        // The mode `-m` names is the line's own change (review 18's r18-03).
        assert_eq!(
            c.metadata,
            some(line.contains(" -m ")),
            "metadata of `{line}`"
        );
    }
    for (line, changes, writes) in cases {
        let c = p.classify(
            &Action::Exec {
                command: line.clone(),
            },
            &ctx,
        );
        assert_eq!(&c.changes, changes, "changes of `{line}`");
        assert_eq!(&c.writes, writes, "writes of `{line}`");
        let metadata: Vec<PathBuf> = match line.split(' ').next() {
            Some("chmod") => vec![at("s")],
            Some("chown") => vec![at("d")],
            _ => vec![],
        };
        assert_eq!(c.metadata, metadata, "metadata of `{line}`");
        // `chown -R` reaches beneath its operand, `chmod` (no `-R`) only the operand.
        let trees: Vec<PathBuf> = match line.split(' ').next() {
            Some("chown") => vec![at("d")],
            _ => vec![],
        };
        assert_eq!(c.metadata_trees, trees, "metadata trees of `{line}`");
        for x in changes.iter().chain(writes).chain(&metadata) {
            assert!(c.paths.contains(x), "`{line}`: {x:?} among its paths");
        }
    }
    let _ = std::fs::remove_dir_all(&wt);
}
