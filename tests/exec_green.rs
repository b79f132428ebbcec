//! No false asks at the exec layer: every command line that `tyba classify` calls green in
//! the corpus's fixture (`tests/data/policy_fixture.sh`) runs unasked when the agent really
//! runs it. tyba judges each `execve` of the session again (the exec model, docs/sandbox.md):
//! the command line it builds from the exec (its file, argv, code-running environment, `#!`
//! line, multi-call identity, the role of the process that made it) must not come out
//! yellow, red or blocked where the text said green — at `--autonomy medium` that is an ask
//! the person did not need, in a `--non-interactive` session a refusal.
//!
//! The cases: the green exec cases of every policy corpus file (`tests/data/commands*.jsonl`)
//! and [`EXTRA`], the read-only commands agents run most (many are already in the corpus;
//! the others are added here), each kept only when the binary classifies it green in the
//! fixture, with the session's own environment. Safe to run for real: a green line is
//! read-only by the policy's definition (DESIGN.md §2: no writes outside the worktree, no
//! network, no program of the agent's); on top of that, [`unsafe_to_run`] leaves out, by an
//! explicit rule, lines that name the network or never end. Files the fixture lacks are
//! fine: a failing command still shows its verdict.
//!
//! The session runs with a person's home as agents meet it ([`persons_home`]): programs
//! found first in the home's toolchain roots, and git configured there (`diff.external`,
//! includes, a global excludes file, `~/.config/git`).
//!
//! All cases run in ONE `tyba run --here --non-interactive --autonomy medium -- bash SCRIPT`
//! session per user (as root and as `TYBA_TEST_USER`): each line once inline (`( cd CWD &&
//! LINE ) </dev/null >/dev/null 2>&1`, so each exec is the agent's own) and once the way agent
//! programs send a line (`bash -c LINE`, whose descendants are a command's). The session
//! must end with every case's status printed, no `tyba:   exec …` line in its end summary,
//! no refusal on its stderr and no entry of `tyba log --json` decided other than `allow`.
//! The control: the same harness with one yellow line does report it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Read-only commands agents run that the corpus may lack (run only when green in the
/// text, like the corpus's). Some found false asks at the exec layer before they were fixed;
/// each such line says so.
const EXTRA: &[&str] = &[
    "which git",
    "which ls cat",
    "file README.md",
    "file src/main.rs",
    "file -b src/main.rs",
    "file -z a.gz",
    "head README.md",
    "head -n 2 notes.txt",
    "head -c 4 README.md",
    "tail -n 1 notes.txt",
    "tail README.md",
    "wc -l README.md notes.txt",
    "wc -c src/main.rs",
    "sort notes.txt",
    "sort -u notes.txt",
    "uniq notes.txt",
    "grep -rn fn src",
    "grep -rn fixture .",
    "grep -n foo notes.txt",
    "grep -c foo notes.txt",
    "egrep foo notes.txt",
    "fgrep foo notes.txt",
    "find . -name '*.md'",
    "find src -type f",
    "find . -maxdepth 1 -type d",
    "ls -la",
    "ls -la src docs",
    "ls -R src",
    "cat README.md notes.txt",
    "cat src/main.rs src/lib.rs",
    "git log",
    "git log --oneline",
    "git log -n 3 --stat",
    "git log --graph --oneline --all",
    "git log -1 --pretty=%B",
    "git log --format=%H -n 1",
    "git --no-pager log -n 1",
    "git log --follow README.md",
    "git diff",
    "git diff HEAD~1",
    "git diff --stat main",
    "git diff --submodule=diff",
    "git show",
    "git show --stat HEAD",
    "git status",
    "git status -s",
    "git -C mod status",
    "git branch",
    "git branch -v",
    "git rev-parse HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files",
    "git ls-tree HEAD",
    "git blame README.md",
    "git describe --tags",
    "git shortlog -sn HEAD",
    "git grep fn",
    "git cat-file -p HEAD",
    "git rev-list --count HEAD",
    "git merge-base main feature/x",
    "git stash list",
    "git for-each-ref",
    "git remote",
    "git tag",
    "git st",
    "env",
    "printenv PATH",
    "pwd",
    "date",
    "date -u +%Y",
    "uname -a",
    "uname -r",
    "id",
    "whoami",
    "python3 --version",
    "node --version",
    "cargo --version",
    "make -n",
    "sed -n p README.md",
    "sed -n '1,3p' notes.txt",
    "awk '{print}' README.md",
    "jq --version",
    "jq . x.json",
    "echo '{\"a\":1}' | jq .a",
    "diff README.md notes.txt",
    "diff -u src/main.rs src/lib.rs",
    "cmp README.md notes.txt",
    "basename src/main.rs",
    "dirname src/main.rs",
    "realpath src/main.rs",
    "readlink -f inside",
    "stat src/main.rs",
    "stat -c %s README.md",
    "du -sh .",
    "du -sh src",
    "tree",
    "tree src",
    "ls | xargs echo",
    "find . -name '*.rs' | xargs wc -l",
    "cat notes.txt | sort | uniq -c | sort -rn",
    "git log --oneline | head -n 1",
    "ls -la | grep src | wc -l",
    "cd src && ls",
    "cd src && cat main.rs lib.rs",
    "cd docs && cat guide.md && cd ..",
    "cd src && grep -n fn main.rs",
    "cd mod && git log --oneline",
    "(cd src && ls)",
    "test -f README.md",
    "[ -d src ]",
    "echo done",
    "printf '%s\\n' a b",
    "seq 1 3",
    "tr a-z A-Z < README.md",
    "cut -d' ' -f1 notes.txt",
    "nl README.md",
    "tac notes.txt",
    "md5sum README.md",
    "sha256sum src/main.rs",
    "od -c README.md",
    "xxd README.md",
    "base64 README.md",
    "comm README.md notes.txt",
    "paste README.md notes.txt",
    "column -t notes.txt",
];

/// The explicit rule for lines not run for real although green: a line naming the network
/// (a URL, a host, a network program or git's network words) and a line that need not end
/// (a shell function calling itself, `sleep`, `yes`, `watch`, `tail -f`, `read`). Green lines
/// are read-only already (see the module's comment); this keeps the test fast and offline
/// whatever the policy calls green.
fn unsafe_to_run(line: &str) -> Option<&'static str> {
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || ";&|()<>".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    if line.contains("://")
        || [
            "curl", "wget", "ssh", "scp", "nc", "ping", "fetch", "pull", "push", "clone",
        ]
        .iter()
        .any(|w| has(w))
        || words.iter().any(|w| w.starts_with("ls-remote"))
    {
        return Some("names the network");
    }
    if ["sleep", "yes", "watch", "read"].iter().any(|w| has(w)) || line.contains("tail -f") {
        return Some("need not end");
    }
    // `f(){ f "$@"; }; f x`: a function whose body calls it recurses until bash dies.
    if let Some((name, rest)) = line.split_once("()") {
        let name = name.trim().trim_start_matches("function ").trim();
        let body = rest.split('}').next().unwrap_or_default();
        if !name.is_empty()
            && body
                .split(|c: char| c.is_whitespace() || ";&|(){".contains(c))
                .any(|w| w == name)
        {
            return Some("calls itself without end");
        }
    }
    None
}

/// One case: where it came from, the line and the directory it runs in (relative to the
/// worktree).
#[derive(Debug, Clone)]
struct Case {
    id: String,
    cmd: String,
    cwd: String,
}

/// The green exec cases of every `tests/data/commands*.jsonl` and [`EXTRA`].
fn candidates() -> Vec<Case> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("commands") && n.ends_with(".jsonl")
        })
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the corpus files moved: {files:?}");
    let mut v = Vec::new();
    for f in &files {
        for l in std::fs::read_to_string(f).unwrap().lines() {
            if l.trim().is_empty() {
                continue;
            }
            let c: serde_json::Value = serde_json::from_str(l).unwrap();
            if c["expect"] != "green" || c["tool"].as_str().is_some_and(|t| t != "exec") {
                continue;
            }
            v.push(Case {
                id: c["id"].as_str().unwrap().to_string(),
                cmd: c["cmd"].as_str().unwrap().to_string(),
                cwd: c["cwd"].as_str().unwrap_or(".").to_string(),
            });
        }
    }
    assert!(
        v.len() >= 80,
        "the corpus lost its green cases: {}",
        v.len()
    );
    v.extend(EXTRA.iter().enumerate().map(|(i, c)| Case {
        id: format!("extra-{i}"),
        cmd: (*c).to_string(),
        cwd: ".".into(),
    }));
    v
}

/// The corpus's fixture built as `who` in `dir` (`dir/W` the worktree), with what the extra
/// cases read: `x.json`, `a.gz`, and a submodule `mod` with a change (git's own children:
/// `git status` runs `git status --porcelain=2` in it).
fn fixture(who: &Who, dir: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/policy_fixture.sh");
    let sh = |cwd: &Path, line: &str| {
        let o = command_as(who, Path::new("/bin/bash"))
            .arg("-c")
            .arg(line)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", dir.join("home"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let parent = dir.parent().unwrap();
    sh(
        parent,
        &format!(
            "bash {} {}",
            script.display(),
            dir.to_str().unwrap() // a scratch path: no quoting needed
        ),
    );
    let w = dir.join("W");
    sh(
        &w,
        "echo '{\"a\": 1}' > x.json && echo x | gzip > a.gz && \
         git init -q -b main mod && (cd mod && echo m > m.txt && git add . && git commit -qm m) && \
         git -c protocol.file.allow=always submodule add -q ./mod mod && git commit -qm sub && \
         echo more >> mod/m.txt",
    );
    w
}

/// `tyba classify --jsonl` of `cases` as `who` in `w` with `env`: the verdict of each.
fn classify(fx: &Fx, w: &Path, env: &[(OsString, OsString)], cases: &[Case]) -> Vec<String> {
    let mut c = command_as(&fx.who, &fx.tyba);
    c.args(["classify", "--jsonl"])
        .current_dir(w)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let input: String = cases
        .iter()
        .map(|k| serde_json::json!({"cmd": k.cmd, "cwd": k.cwd}).to_string() + "\n")
        .collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "tyba classify: {:?}", out.status);
    let v: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let j: serde_json::Value = serde_json::from_str(l).unwrap();
            j["verdict"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(v.len(), cases.len());
    v
}

fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The session's script: each case inline in a subshell, then each as `bash -c LINE`, with
/// `RC <n> <status>` printed after each (`n` counts both passes).
fn script(cases: &[Case]) -> String {
    // The corpus reads `@(…)` as bash reads it with extglob (an agent's interactive shell).
    let mut s = String::from("shopt -s extglob\n");
    for (i, c) in cases.iter().enumerate() {
        s.push_str(&format!(
            "( cd {} && {}\n) </dev/null >/dev/null 2>&1; echo \"RC {i} $?\"\n",
            sq(&c.cwd),
            c.cmd
        ));
    }
    let n = cases.len();
    for (i, c) in cases.iter().enumerate() {
        s.push_str(&format!(
            "( cd {} && bash -c {} ) </dev/null >/dev/null 2>&1; echo \"RC {} $?\"\n",
            sq(&c.cwd),
            sq(&c.cmd),
            n + i
        ));
    }
    s
}

/// What a `--here --non-interactive` session printed, and its audit log (`tyba log --json`).
struct HereRun {
    code: Option<i32>,
    out: String,
    err: String,
    log_text: String,
    log: Vec<serde_json::Value>,
}

/// `tyba run --here --non-interactive EXTRA -- ARGV` in `w` with `env`, then its log.
fn here_session(
    fx: &Fx,
    w: &Path,
    env: &[(OsString, OsString)],
    extra: &[&str],
    argv: &[&str],
) -> HereRun {
    let mut args = vec!["run", "--here", "--non-interactive"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(argv);
    let o = run_tyba(&fx.who, &fx.tyba, w, env, &args);
    let l = run_tyba(&fx.who, &fx.tyba, w, env, &["log", "--json"]);
    let log_text = String::from_utf8_lossy(&l.stdout).into_owned();
    assert_eq!(
        l.status.code(),
        Some(0),
        "tyba log: {}",
        String::from_utf8_lossy(&l.stderr)
    );
    HereRun {
        code: o.status.code(),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
        log: log_text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        log_text,
    }
}

/// What the session did that a run of green lines must not: the summary's denied execs,
/// refusals on stderr, log entries not allowed, statuses missing.
fn false_asks(fx: &Fx, w: &Path, env: &[(OsString, OsString)], cases: &[Case]) -> Vec<String> {
    std::fs::write(w.join(".green.sh"), script(cases)).unwrap();
    give(&w.join(".green.sh"), &fx.who);
    let run = here_session(
        fx,
        w,
        env,
        &["--autonomy", "medium"],
        &["bash", ".green.sh"],
    );
    let (out, err, log, entries) = (&run.out, &run.err, &run.log_text, &run.log);
    let mut bad = Vec::new();
    let statuses: Vec<(usize, String)> = out
        .lines()
        .filter_map(|l| {
            let mut p = l.strip_prefix("RC ")?.split(' ');
            Some((p.next()?.parse().ok()?, p.next()?.to_string()))
        })
        .collect();
    if statuses.len() != 2 * cases.len() {
        bad.push(format!(
            "{} of {} statuses printed (exit {:?}): stderr {err}",
            statuses.len(),
            2 * cases.len(),
            run.code
        ));
    }
    for l in err.lines() {
        if l.starts_with("tyba:   exec ") || l.starts_with("tyba: refused") {
            bad.push(format!("session: {l}"));
        }
    }
    // Statuses that look like a refusal (126), to name the cases.
    for (i, rc) in &statuses {
        if rc == "126" {
            let c = &cases[i % cases.len()];
            let how = if *i < cases.len() {
                "inline"
            } else {
                "bash -c"
            };
            bad.push(format!("{} ({how}): `{}` exited 126", c.id, c.cmd));
        }
    }
    assert!(
        entries.iter().filter(|e| e["kind"] == "exec").count() >= cases.len(),
        "the log holds too few execs: {log}"
    );
    for e in entries {
        if e["decision"] != "allow" {
            bad.push(format!(
                "log: {} {} {} {} ({}) argv {} in {}",
                e["kind"],
                e["decision"],
                e["verdict"],
                e["action"],
                e["reasons"],
                e["argv"],
                e["cwd"]
            ));
        }
    }
    bad
}

/// A person's home as agents meet it, and the session's environment with it: programs in
/// the read-only toolchain roots found first on `PATH` (`rg` in `~/.cargo/bin`, `tree` in
/// `~/.local/bin`: copies of `grep` and `ls`, run under those names), a `~/.gitconfig` with
/// an external diff there (`diff.external`, run by every `git diff`), an alias and a global
/// excludes file (`~/.gitignore_global`, read by every `git status`) and includes
/// (`~/.gitconfig.local`, a `includeIf "gitdir:/"`), and `~/.config/git/{config,ignore,
/// attributes}`: each read by every git command, each asked before they were granted
/// read-only like `~/.gitconfig` (and git failed where refused).
fn persons_home(fx: &Fx) -> Vec<(OsString, OsString)> {
    let cargo = fx.home.join(".cargo/bin");
    let local = fx.home.join(".local/bin");
    program(&cargo, "rg", "/bin/grep");
    program(&cargo, "tyba-difft", "/bin/true");
    program(&local, "tree", "/bin/ls");
    std::fs::write(
        fx.home.join(".gitconfig"),
        "[diff]\n\texternal = tyba-difft\n[alias]\n\tst = status\n\
         [core]\n\texcludesFile = ~/.gitignore_global\n\
         [include]\n\tpath = ~/.gitconfig.local\n\
         [includeIf \"gitdir:/\"]\n\tpath = ~/.gitconfig-work\n",
    )
    .unwrap();
    std::fs::write(fx.home.join(".gitignore_global"), "*.swp\n").unwrap();
    std::fs::write(fx.home.join(".gitconfig.local"), "[user]\n\tname = P\n").unwrap();
    std::fs::write(
        fx.home.join(".gitconfig-work"),
        "[user]\n\temail = p@example.com\n",
    )
    .unwrap();
    // git's own places in `~/.config/git` (the session's `XDG_CONFIG_HOME`): a person who
    // keeps the configuration there, with an alias, ignore patterns and attributes.
    let xdg = fx.home.join(".config/git");
    std::fs::create_dir_all(&xdg).unwrap();
    std::fs::write(xdg.join("config"), "[alias]\n\tlg = log --oneline\n").unwrap();
    std::fs::write(xdg.join("ignore"), "*.tmp\n").unwrap();
    std::fs::write(xdg.join("attributes"), "*.rs diff=rust\n").unwrap();
    give(&fx.home, &fx.who);
    let mut env = fx.env();
    env.retain(|(k, _)| k != "PATH");
    env.push((
        "PATH".into(),
        format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            cargo.display(),
            local.display()
        )
        .into(),
    ));
    env
}

#[test]
fn exec_green_lines_run_unasked() {
    let all = candidates();
    for who in whos() {
        let Some(fx) = setup(&who, "execgreen") else {
            continue;
        };
        let start = std::time::Instant::now();
        let w = fixture(&who, &fx.wt.parent().unwrap().join("pf"));
        let env = persons_home(&fx);
        let verdicts = classify(&fx, &w, &env, &all);
        let mut skipped = Vec::new();
        let cases: Vec<Case> = all
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| *v == "green")
            .map(|(c, _)| c.clone())
            .filter(|c| match unsafe_to_run(&c.cmd) {
                Some(why) => {
                    skipped.push(format!("{}: {why}", c.id));
                    false
                }
                None => true,
            })
            .collect();
        let extras = cases.iter().filter(|c| c.id.starts_with("extra-")).count();
        assert!(
            cases.len() >= 150 && extras >= 80,
            "{who:?}: only {} green cases ({extras} extra) to run; skipped {skipped:?}",
            cases.len()
        );
        assert!(skipped.len() <= 3, "{who:?}: skipped {skipped:?}");
        let bad = false_asks(&fx, &w, &env, &cases);
        assert!(
            bad.is_empty(),
            "{who:?}: green lines asked or refused at the exec layer:\n  {}",
            bad.join("\n  ")
        );
        eprintln!(
            "{who:?}: {} green lines, twice, in {:?}; skipped {skipped:?}",
            cases.len(),
            start.elapsed()
        );
        // The control: the same harness reports a line the text calls yellow (`nproc`, no
        // listed program), run with the green ones.
        let mut control = cases[..3].to_vec();
        control.push(Case {
            id: "control".into(),
            cmd: "nproc".into(),
            cwd: ".".into(),
        });
        assert_eq!(
            classify(&fx, &w, &env, &control[3..]),
            ["yellow"],
            "{who:?}: the control line is no longer yellow: pick another"
        );
        let bad = false_asks(&fx, &w, &env, &control);
        assert!(
            bad.iter().any(|b| b.contains("control (inline)"))
                && bad.iter().any(|b| b.contains("control (bash -c)"))
                && bad
                    .iter()
                    .any(|b| b.starts_with("session: tyba:   exec nproc"))
                && bad
                    .iter()
                    .any(|b| b.starts_with("log: ") && b.contains("nproc")),
            "{who:?}: the control was not reported: {bad:?}"
        );
    }
}

/// Copies the system program `from` to `dir/name` (mode 0755).
fn program(dir: &Path, name: &str, from: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(from, dir.join(name)).unwrap();
    std::fs::set_permissions(
        dir.join(name),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
}

/// The programs the person's own git configuration names for a green git command are part
/// of it: `core.pager = tyba-pager` (run bare on a terminal), `pager.show = tyba-pager -u`
/// (run as `sh -c 'tyba-pager -u'`, then the program), `diff.external = tyba-difft` (run with
/// the two sides), all in `~/.gitconfig` and `~/.cargo/bin` (read-only toolchain root), run
/// unasked — before, each was judged as the agent's own `tyba-pager`, a program nobody
/// listed: asked, and at every `git log`/`git diff` refused in a `--non-interactive` session.
/// The same names found first in a directory of the worktree (`PATH` starting there) are the
/// agent's programs, not the person's: refused.
#[test]
fn exec_green_git_runs_the_persons_configured_programs_unasked() {
    for who in whos() {
        let Some(fx) = setup(&who, "persongit") else {
            continue;
        };
        let w = fixture(&who, &fx.wt.parent().unwrap().join("pf"));
        let bin = fx.home.join(".cargo/bin");
        program(&bin, "tyba-pager", "/bin/cat");
        program(&bin, "tyba-difft", "/bin/true");
        program(&bin, "tyba-filter", "/bin/cat");
        std::fs::write(
            fx.home.join(".gitconfig"),
            "[core]\n\tpager = tyba-pager\n[pager]\n\tshow = tyba-pager -u\n\
             [diff]\n\texternal = tyba-difft\n[diff \"tyba\"]\n\ttextconv = tyba-filter\n\
             [filter \"tyba\"]\n\tclean = tyba-filter\n",
        )
        .unwrap();
        // The repository's attributes select the person's drivers for `*.txt`; `notes.txt`,
        // changed since the first commit, touched so that `git status` reads it through the
        // clean filter.
        std::fs::write(w.join(".gitattributes"), "*.txt diff=tyba filter=tyba\n").unwrap();
        let notes = std::fs::read(w.join("notes.txt")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(w.join("notes.txt"), notes).unwrap();
        give(&fx.home, &who);
        std::fs::write(w.join("pty.py"), PTY_PY).unwrap();
        // The agent's own programs of the same names, for the second session.
        let own = w.join("bin");
        program(&own, "tyba-pager", "/bin/cat");
        program(&own, "tyba-difft", "/bin/true");
        program(&own, "tyba-filter", "/bin/cat");
        give(&w, &who);
        // (`--no-pager`: the external diff runs even where the pager was refused.)
        let line = "git log -n 1; git show -s --format=shown-%h; git --no-pager diff HEAD~1; \
                    git --no-pager diff --no-ext-diff HEAD~2; git status --short; echo end";
        let session = |path: String| {
            let mut env = fx.env();
            env.retain(|(k, _)| k != "PATH");
            env.push(("PATH".into(), path.into()));
            env.push(("TERM".into(), "xterm".into()));
            let r = here_session(
                &fx,
                &w,
                &env,
                &["--autonomy", "medium"],
                &["python3", "pty.py", "bash", "-c", line],
            );
            (r.out, r.err, r.log)
        };
        let execs_of = |log: &[serde_json::Value], name: &str| -> Vec<serde_json::Value> {
            log.iter()
                .filter(|e| {
                    e["kind"] == "exec"
                        && e["argv"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str())
                            // `/…/NAME`, `NAME`, or a shell's `NAME -u`.
                            .any(|a| {
                                a.rsplit('/').next().and_then(|b| b.split(' ').next()) == Some(name)
                            })
                })
                .cloned()
                .collect()
        };

        // The person's programs.
        let (out, err, log) = session(format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()));
        let ctx = format!("{who:?}: out {out} / err {err} / log {log:#?}");
        assert!(out.contains("shown-") && out.contains("end"), "{ctx}");
        assert!(
            !err.contains("tyba:   exec") && !err.contains("refused by tyba"),
            "{ctx}"
        );
        assert!(log.iter().all(|e| e["decision"] == "allow"), "{ctx}");
        let pager = execs_of(&log, "tyba-pager");
        // `core.pager`: the program, for `git log`; `pager.show`: `sh -c` and the program, for
        // `git show`.
        for (key, shape) in [("core.pager", 1), ("pager.show", 2)] {
            let n = pager
                .iter()
                .filter(|e| {
                    e["reason"].as_str().is_some_and(|r| {
                        r.contains(&format!("`{key}`")) && r.contains(".gitconfig")
                    })
                })
                .count();
            assert_eq!(n, shape, "{ctx}: {key}");
        }
        for key in ["`diff.tyba.textconv`", "`filter.tyba.clean`"] {
            assert!(
                execs_of(&log, "tyba-filter")
                    .iter()
                    .any(|e| e["reason"].as_str().is_some_and(|r| r.contains(key))),
                "{ctx}: {key}"
            );
        }
        let difft = execs_of(&log, "tyba-difft");
        assert!(
            !difft.is_empty()
                && difft.iter().all(|e| e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("`diff.external`"))),
            "{ctx}"
        );

        // The agent's programs under the same names: its own code, refused (asked at
        // medium autonomy, and nobody to ask).
        let (out, err, log) = session(format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            own.display(),
            bin.display()
        ));
        let ctx = format!("{who:?}: out {out} / err {err} / log {log:#?}");
        assert!(out.contains("end"), "{ctx}");
        let refused: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("tyba:   exec "))
            .collect();
        for name in ["bin/tyba-pager", "bin/tyba-difft", "bin/tyba-filter"] {
            assert!(refused.iter().any(|l| l.contains(name)), "{ctx}: {name}");
        }
        // (`sh -c 'tyba-pager -u'` is the person's value and runs; the file its shell then
        // finds is the agent's.)
        let own_s = own.to_str().unwrap();
        let allowed_own = execs_of(&log, "tyba-pager")
            .into_iter()
            .chain(execs_of(&log, "tyba-difft"))
            .chain(execs_of(&log, "tyba-filter"))
            .filter(|e| e["argv"][0].as_str().is_some_and(|a| a.starts_with(own_s)))
            .filter(|e| e["decision"] == "allow")
            .count();
        let denied_own = log
            .iter()
            .filter(|e| {
                e["decision"] != "allow" && e["action"].as_str().is_some_and(|a| a.contains(own_s))
            })
            .count();
        assert!(allowed_own == 0 && denied_own >= 3, "{ctx}");
    }
}

/// What the repository's configuration (the agent's to write) includes is not the person's:
/// a `.git/config` with `include.path` naming a file in the home, left by an earlier session,
/// grants nothing at the next start; reading it stays an ask (refused here), while the file
/// the person's `~/.gitconfig` includes is read unasked.
#[test]
fn exec_green_git_reads_only_the_persons_own_includes_unasked() {
    for who in whos() {
        let Some(fx) = setup(&who, "gitincl") else {
            continue;
        };
        let w = fixture(&who, &fx.wt.parent().unwrap().join("pf"));
        std::fs::write(
            fx.home.join(".gitconfig"),
            "[include]\n\tpath = ~/.gitconfig.local\n",
        )
        .unwrap();
        std::fs::write(fx.home.join(".gitconfig.local"), "[user]\n\tname = P\n").unwrap();
        std::fs::write(
            fx.home.join("notes.cfg"),
            "[user]\n\temail = n@example.com\n",
        )
        .unwrap();
        give(&fx.home, &who);
        let env = fx.env();
        let session = || {
            let r = here_session(
                &fx,
                &w,
                &env,
                &[],
                &[
                    "bash",
                    "-c",
                    "git config --get user.name; git config --get user.email; echo end",
                ],
            );
            (r.out, r.err, r.log_text)
        };
        let asks = |log: &str| -> Vec<String> {
            log.lines()
                .filter(|l| l.contains("\"decision\":\"ask\""))
                .map(String::from)
                .collect()
        };
        // The person's include: read unasked.
        let (out, err, log) = session();
        let ctx = format!("{who:?}: out {out} / err {err} / log {log}");
        assert!(out.contains("P\n") && out.contains("end"), "{ctx}");
        assert!(asks(&log).is_empty(), "{ctx}");
        // The repository's include of a home file: asked (refused: git then stops).
        let cfg = w.join(".git/config");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(&format!(
            "[include]\n\tpath = {}\n",
            fx.home.join("notes.cfg").display()
        ));
        std::fs::write(&cfg, text).unwrap();
        let (out, err, log) = session();
        let ctx = format!("{who:?}: out {out} / err {err} / log {log}");
        assert!(!out.contains("n@example.com"), "{ctx}");
        let asks = asks(&log);
        assert!(
            !asks.is_empty() && asks.iter().all(|l| l.contains("notes.cfg")),
            "{ctx}"
        );
        assert!(!log.contains(".gitconfig.local (an approval"), "{ctx}");
    }
}

// Classes of false asks this file found, and where they were fixed:
// - a program the person's own git configuration names (`core.pager`, `pager.<cmd>`,
//   `diff.external`, diff and filter drivers), run by a green git command, was judged as the
//   agent's own line (`exec::persons_git_program`);
// - the files the person's git reads as configuration besides `~/.gitconfig`
//   (`~/.config/git/*`, includes, `core.excludesFile`) were asked at every git command
//   (`sandbox::persons_git_files`).
