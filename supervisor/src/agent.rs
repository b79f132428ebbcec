//! Who is the agent: the agent program resolved to its installation (DESIGN.md §5, "who is the
//! agent"; issue 11).
//!
//! The person names a program (`claude`, `codex`, `gemini`, `aider`, `bash`). What runs is
//! often not that file: npm's `bin` entry is a `#!/usr/bin/env node` script inside its package,
//! which starts the package's native binary (Codex) or re-launches itself under `node` with
//! other options (Gemini CLI); pip's entry point is a script whose `#!` names the venv's
//! Python. [`AgentInstall::resolve`] follows the program through `PATH` and symlinks to its
//! **installation**:
//!
//! - the npm package directory that holds it (nearest ancestor whose parent is
//!   `node_modules`, or `node_modules/@scope`, with a `package.json`), plus the directories of
//!   the package's `dependencies` and `optionalDependencies`, resolved the way Node resolves
//!   them (nested `node_modules` first, then each ancestor's);
//! - else the Python virtual environment that holds it (nearest ancestor with `pyvenv.cfg`);
//! - else the program file alone (`tyba run -- bash`: only `/usr/bin/bash` is the agent).
//!
//! and to its **interpreters**: the program named by its `#!` line (through `env` and `PATH`
//! when the line is `#!/usr/bin/env NAME`), canonical.
//!
//! [`AgentInstall::is_own_exec`] then says whether an exec by the agent's own process tree
//! runs the agent itself: a file under one of the roots, or an interpreter whose script
//! operand is under one of the roots with only options that load no other code. The rule is
//! by place, never by timing or by name.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The agent program's installation: the places whose files are the agent itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentInstall {
    /// The program the person named, resolved (canonical).
    pub program: PathBuf,
    /// Files or directories (canonical) whose files are the agent's own.
    pub roots: Vec<PathBuf>,
    /// Interpreters (canonical) that run the agent's scripts (`node`, the venv's `python3`).
    pub interpreters: Vec<PathBuf>,
    /// The policy's profile of this agent, when one recognises the program (its name and
    /// facts, `tyba_policy::agents`): its known start-up probes are refused quietly.
    pub profile: Option<(String, tyba_policy::agents::AgentProfile)>,
}

/// Interpreter options that load or run code other than the script operand: an exec with one
/// of them is a command, never the agent (`node -e`, `--require`, `python3 -c`, `-m`).
///
/// Options not listed here and not in [`HARMLESS_VALUE_OPTIONS`] are refused too: only the
/// options listed as harmless keep the agent's identity.
const HARMLESS_FLAGS: &[&str] = &[
    // node(1)
    "--no-warnings",
    "--no-deprecation",
    "--enable-source-maps",
    "--expose-gc",
    "--trace-warnings",
    "--trace-uncaught",
    "--no-experimental-fetch",
    "--experimental-vm-modules",
    "--no-experimental-global-navigator",
    // python(1)
    "-E",
    "-s",
    "-S",
    "-I",
    "-u",
    "-B",
    "-O",
    "-OO",
    "-P",
    "-q",
];

/// Options taking a value (`--opt=VALUE` or, for single letters, the next argument) that change
/// only resources or diagnostics.
const HARMLESS_VALUE_OPTIONS: &[&str] = &[
    "--max-old-space-size",
    "--max-semi-space-size",
    "--stack-size",
    "--disable-warning",
    "--unhandled-rejections",
    "--title",
];

impl AgentInstall {
    /// Resolves `program` (absolute, as found on `PATH`) to its installation; `path_env` is
    /// the `PATH` the agent gets (for `#!/usr/bin/env NAME`).
    pub fn resolve(program: &Path, path_env: Option<&OsStr>) -> AgentInstall {
        let canonical = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
        let mut install = AgentInstall {
            program: canonical.clone(),
            ..AgentInstall::default()
        };
        if let Some(pkg) = npm_package_of(&canonical) {
            for dep in npm_dependencies(&pkg) {
                push_unique(&mut install.roots, dep);
            }
            install.roots.insert(0, pkg);
        } else if let Some(venv) = venv_of(&canonical) {
            install.roots.push(venv);
        } else if !is_general_program(&canonical) && !is_general_program(program) {
            install.roots.push(canonical.clone());
        }
        if let Some(interp) = shebang_interpreter(&canonical, path_env) {
            push_unique(&mut install.interpreters, interp);
        }
        install
    }

    /// Adds the profile of `profiles` that recognises the resolved program (`home` expands
    /// `~` in the profiles' installation directories), by its place first, then its name
    /// ([`tyba_policy::agents::AgentProfiles::profile_for`]).
    pub fn with_profile(
        mut self,
        profiles: &tyba_policy::agents::AgentProfiles,
        home: Option<&Path>,
    ) -> AgentInstall {
        let markers = tyba_policy::agents::InstallMarkers::from_path(&self.program);
        self.profile = profiles
            .profile_for(&self.program, home, &markers)
            .map(|r| (r.name.to_string(), r.profile.clone()));
        self
    }

    /// The quiet refusal the agent's profile gives an exec `argv` of the agent's own process
    /// for which the general rules decided `general` (DESIGN.md §5; issue 12): only an ask of
    /// a known probe becomes a refusal, logged and not asked; nothing is ever allowed here.
    ///
    /// `line` is the command line the exec was classified as: a shell the agent starts for
    /// one plain command (`/bin/sh -c env`) is classified as that command, and is matched by
    /// its words when they are plain (no quoting, expansion or operator). A line of literal
    /// commands ([`tyba_policy::literal_commands`]: pipelines and lists, nothing that
    /// expands) matches when one of its commands is a known probe and `green` says each of
    /// the others is green by itself (`ps aux | grep -v grep`): refusing it refuses only what
    /// the probe's output would have fed.
    pub fn quiet_probe(
        &self,
        argv: &[String],
        line: &str,
        general: &tyba_policy::Decision,
        green: &dyn Fn(&[String]) -> bool,
    ) -> Option<tyba_policy::agents::QuietRefusal> {
        let (name, profile) = self.profile.as_ref()?;
        profile
            .probe_outcome(name, argv, general)
            .or_else(|| {
                let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:@#{},%+ ".contains(c);
                if line.is_empty() || !line.chars().all(plain) {
                    return None;
                }
                let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
                profile.probe_outcome(name, &words, general)
            })
            .or_else(|| {
                let cmds = tyba_policy::literal_commands(line)?;
                let (i, q) = cmds
                    .iter()
                    .enumerate()
                    .find_map(|(i, c)| profile.probe_outcome(name, c, general).map(|q| (i, q)))?;
                cmds.iter()
                    .enumerate()
                    .all(|(j, c)| j == i || green(c))
                    .then_some(q)
            })
    }

    /// Whether the agent has an installation of its own (a package, a venv, a program that
    /// is no shell or interpreter): then it is the person's program, and the environment it
    /// gives its commands is its configuration.
    pub fn has_installation(&self) -> bool {
        !self.roots.is_empty()
    }

    /// Whether `file` (canonical, the file the kernel runs) lies under one of the roots.
    pub fn owns(&self, file: &Path) -> bool {
        self.roots.iter().any(|r| file.starts_with(r))
    }

    /// Whether an exec of `file` (canonical) with `argv`, by the agent's own process, runs the
    /// agent itself: a file of the installation, or one of its interpreters running a script
    /// of the installation with harmless options only, named by a path outside `writable`
    /// (where a link could be swapped after the check). `cwd` resolves a relative script.
    pub fn is_own_exec(
        &self,
        file: &Path,
        argv: &[String],
        cwd: &Path,
        writable: &[PathBuf],
    ) -> bool {
        if self.owns(file) {
            return true;
        }
        if !self.interpreters.iter().any(|i| i == file) {
            return false;
        }
        match script_operand(argv) {
            Some(script) if !crate::exec::lexically_within(script.as_bytes(), cwd, writable) => {
                let p = cwd.join(script);
                std::fs::canonicalize(&p).is_ok_and(|c| self.owns(&c) && c.is_file())
            }
            _ => false,
        }
    }
}

/// The executable regular files of an agent's installation, by size: where
/// [`AgentInstall::index`] looks for the file an agent's copy of its own program was made
/// from (DESIGN.md §5 "who is the agent"; `docs/sandbox.md`, "The agent's copy of its own
/// program").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallIndex {
    by_size: std::collections::HashMap<u64, Vec<PathBuf>>,
}

/// At most this many files of an installation are indexed ([`AgentInstall::index`]); an
/// installation with more has only the first ones found (an agent's copy of a file left out
/// is then judged as a command, as before).
pub const MAX_INDEXED: usize = 100_000;

/// How deep below a root [`AgentInstall::index`] looks.
const MAX_INDEX_DEPTH: usize = 32;

impl InstallIndex {
    /// The installation's executable files of `size` bytes (canonical paths).
    pub fn of_size(&self, size: u64) -> &[PathBuf] {
        self.by_size.get(&size).map(Vec::as_slice).unwrap_or(&[])
    }

    /// How many files it holds.
    pub fn len(&self) -> usize {
        self.by_size.values().map(Vec::len).sum()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by_size.is_empty()
    }
}

impl AgentInstall {
    /// The executable regular files (any execute bit) under the installation's roots, by
    /// size: symbolic links are not followed, at most [`MAX_INDEXED`] files,
    /// [`MAX_INDEX_DEPTH`] levels; unreadable directories are skipped. Empty for an agent
    /// without an installation (a shell or interpreter named as the agent).
    pub fn index(&self) -> InstallIndex {
        use std::os::unix::fs::PermissionsExt;
        let mut idx = InstallIndex::default();
        let mut count = 0usize;
        let mut stack: Vec<(PathBuf, usize)> = self.roots.iter().map(|r| (r.clone(), 0)).collect();
        let mut seen = std::collections::HashSet::new();
        while let Some((p, depth)) = stack.pop() {
            if count >= MAX_INDEXED {
                break;
            }
            let Ok(md) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if md.is_file() {
                if md.permissions().mode() & 0o111 != 0 && seen.insert(p.clone()) {
                    idx.by_size.entry(md.len()).or_default().push(p);
                    count += 1;
                }
            } else if md.is_dir() && depth < MAX_INDEX_DEPTH {
                let Ok(rd) = std::fs::read_dir(&p) else {
                    continue;
                };
                for e in rd.flatten() {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
        idx
    }
}

/// Whether `a` and `b` hold the same bytes, read to their ends in chunks of 1 MiB: the check
/// that an agent's copy of its own program is that program.
///
/// # Errors
/// A read failing.
pub fn same_bytes(a: &mut impl std::io::Read, b: &mut impl std::io::Read) -> std::io::Result<bool> {
    const CHUNK: usize = 1 << 20;
    let (mut x, mut y) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    loop {
        let n = fill(a, &mut x)?;
        let m = fill(b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Reads into `buf` until it is full or the reader ends; the count read.
fn fill(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The agents whose hook protocol `tyba hook install` writes, by their names on tyba's
/// command line (`tyba hook codex`).
pub const HOOK_AGENTS: &[&str] = &["claude-code", "codex", "gemini"];

/// The `sh` script around tyba in the hook command `tyba hook install` writes
/// (`/bin/sh -c '<script>' <tyba>`; docs/agents.md "`tyba hook install|uninstall`"): the agents
/// let a call through when a hook exits with a status other than 0 or 2, so every other status
/// becomes exit 2 with a reason on stderr. It holds no `'` or `\`.
pub fn hook_wrapper_script(agent: &str) -> String {
    format!(
        r#""$0" hook {agent}; s=$?; [ "$s" -eq 0 ] || [ "$s" -eq 2 ] || {{ echo "tyba hook {agent} could not answer (exit status $s; is $0 still there?): refusing the tool call" >&2; exit 2; }}; exit "$s""#
    )
}

/// Whether an exec `argv` (of the agent's own process, in `cwd`) runs tyba's own hook around
/// this very executable `own_exe`: exactly the command `tyba hook install` writes, `/bin/sh -c
/// '<script>' EXE`, either as the exec itself or as the one line of a shell's `-c`/`-lc` (Codex
/// runs hooks with `$SHELL -lc`), with `EXE` an absolute name outside `/proc`, `/dev` and
/// `writable` (where a link could be swapped after the check) that `is_own_exe` finds to be
/// the session's own tyba as the execing process resolves it. tyba's hook only reads the tool
/// call and answers or asks through the session: it is tyba, not a command of the agent's.
pub fn is_own_hook(
    argv: &[String],
    cwd: &Path,
    writable: &[PathBuf],
    is_own_exe: &dyn Fn(&str) -> bool,
) -> bool {
    let same_file = |exe: &str| {
        use std::os::unix::ffi::OsStrExt;
        // A name through `/proc` or `/dev` (`/proc/self/exe`, `/proc/self/cwd/…`, `/dev/fd/N`)
        // names something else for each process that resolves it.
        Path::new(exe).is_absolute()
            && !exe.starts_with("/proc/")
            && !exe.starts_with("/dev/")
            && !crate::exec::lexically_within(OsStr::new(exe).as_bytes(), cwd, writable)
            && is_own_exe(exe)
    };
    let direct = |words: &[String]| match words {
        [sh, c, script, exe] => {
            sh == "/bin/sh"
                && c == "-c"
                && HOOK_AGENTS
                    .iter()
                    .any(|a| *script == hook_wrapper_script(a))
                && same_file(exe)
        }
        _ => false,
    };
    if direct(argv) {
        return true;
    }
    // `SHELL -lc LINE`, LINE being the installed command (its path bare or single-quoted).
    let [shell, c, line] = argv else {
        return false;
    };
    let shell_name = Path::new(shell).file_name().and_then(OsStr::to_str);
    if !matches!(shell_name, Some("sh" | "bash" | "zsh" | "dash"))
        || !matches!(c.as_str(), "-c" | "-lc")
    {
        return false;
    }
    HOOK_AGENTS.iter().any(|a| {
        let head = format!("/bin/sh -c '{}' ", hook_wrapper_script(a));
        line.strip_prefix(&head).is_some_and(|exe| {
            let exe = exe
                .strip_prefix('\'')
                .and_then(|e| e.strip_suffix('\''))
                .unwrap_or(exe);
            !exe.contains(['\'', ' ', '\t', '\n'])
                && direct(&[
                    "/bin/sh".to_string(),
                    "-c".to_string(),
                    hook_wrapper_script(a),
                    exe.to_string(),
                ])
        })
    })
}

/// Programs that run whatever command line or script they are given: shells and general
/// interpreters. Such a program named as the agent is the agent for its first exec only; its
/// re-execs (`bash -c …` from a `bash` agent) are commands, analysed as the lines they are.
/// (The shells are the policy's own, `tyba_policy::programs::SHELLS`; these are the rest.)
const GENERAL_PROGRAMS: &[&str] = &[
    "busybox", "env", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua", "tclsh",
];

/// Whether `p` is a shell or a general interpreter ([`GENERAL_PROGRAMS`], `python`,
/// `python3`, `python3.11`, …) by its file name.
fn is_general_program(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(OsStr::to_str) else {
        return false;
    };
    GENERAL_PROGRAMS.contains(&name)
        || tyba_policy::programs::is_shell(name)
        || name
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn push_unique(v: &mut Vec<PathBuf>, p: PathBuf) {
    if !v.contains(&p) {
        v.push(p);
    }
}

/// The script operand of an interpreter's argv: the first word after only harmless options;
/// `None` when an option loads other code, reads the program from standard input, or is
/// unknown.
fn script_operand(argv: &[String]) -> Option<&str> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next().map(String::as_str);
        }
        if !a.starts_with('-') || a == "-" {
            return (a != "-").then_some(a.as_str());
        }
        if HARMLESS_FLAGS.contains(&a.as_str()) {
            continue;
        }
        if let Some((name, _)) = a.split_once('=') {
            if HARMLESS_VALUE_OPTIONS.contains(&name) {
                continue;
            }
            return None;
        }
        if HARMLESS_VALUE_OPTIONS.contains(&a.as_str()) {
            // Its value is the next word.
            it.next()?;
            continue;
        }
        return None;
    }
    None
}

/// The npm package directory holding `file`: the nearest ancestor `D` whose parent is a
/// `node_modules` directory (or `node_modules/@scope`) and that has a `package.json`.
fn npm_package_of(file: &Path) -> Option<PathBuf> {
    let mut cur = file.parent();
    while let Some(d) = cur {
        let parent = d.parent()?;
        let in_modules = parent.file_name() == Some(OsStr::new("node_modules"))
            || (parent
                .file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"@"))
                && parent.parent().and_then(Path::file_name) == Some(OsStr::new("node_modules")));
        if in_modules && d.join("package.json").is_file() {
            return Some(d.to_path_buf());
        }
        cur = d.parent();
    }
    None
}

/// The directories of `pkg`'s `dependencies` and `optionalDependencies` (one level), found
/// as Node finds them: `pkg/node_modules/NAME`, then `node_modules/NAME` in each ancestor.
fn npm_dependencies(pkg: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(pkg.join("package.json")) else {
        return Vec::new();
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for key in ["dependencies", "optionalDependencies"] {
        let Some(map) = json.get(key).and_then(|v| v.as_object()) else {
            continue;
        };
        for name in map.keys() {
            // A package name is `name` or `@scope/name`, nothing that walks directories.
            let valid = !name.is_empty()
                && name.split('/').count() <= 2
                && name
                    .split('/')
                    .all(|p| !p.is_empty() && p != "." && p != "..");
            if !valid {
                continue;
            }
            let mut base = Some(pkg);
            while let Some(b) = base {
                let cand = b.join("node_modules").join(name);
                if cand.join("package.json").is_file() {
                    if let Ok(c) = std::fs::canonicalize(&cand) {
                        push_unique(&mut out, c);
                    }
                    break;
                }
                base = b.parent();
            }
        }
    }
    out
}

/// The Python virtual environment holding `file`: the nearest ancestor with `pyvenv.cfg`.
fn venv_of(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|d| d.join("pyvenv.cfg").is_file())
        .map(Path::to_path_buf)
}

/// The canonical interpreter named by `file`'s `#!` line: the path itself, or with
/// `/usr/bin/env [-S] NAME` the first `NAME` found on `path_env`.
fn shebang_interpreter(file: &Path, path_env: Option<&OsStr>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interp = words.next()?;
    let interp = if Path::new(interp).file_name() == Some(OsStr::new("env")) {
        let name = words.find(|w| !w.starts_with('-'))?;
        if name.contains('/') {
            PathBuf::from(name)
        } else {
            std::env::split_paths(path_env?)
                .map(|d| d.join(name))
                .find(|c| c.is_file())?
        }
    } else {
        PathBuf::from(interp)
    };
    std::fs::canonicalize(interp).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_known_probe_is_refused_quietly_by_its_argv_or_its_plain_line_and_nothing_allowed() {
        let policy = tyba_policy::Policy::embedded_default();
        let agents = &policy.config().agents;
        let program = Path::new("/p/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
        let install = AgentInstall {
            program: program.to_path_buf(),
            ..AgentInstall::default()
        }
        .with_profile(agents, None);
        assert_eq!(
            install.profile.as_ref().map(|p| p.0.as_str()),
            Some("claude-code")
        );
        let ask = tyba_policy::Decision::Ask(tyba_policy::Ask {
            verdict: tyba_policy::Verdict::Yellow,
            rememberable: None,
            show_diff: false,
        });
        // Green by itself, for this test: grep only.
        let green = |c: &[String]| c.first().is_some_and(|p| p == "grep");
        let q = |argv: &[&str], line: &str, d: &tyba_policy::Decision| {
            install
                .quiet_probe(&v(argv), line, d, &green)
                .map(|q| q.probe)
        };
        assert_eq!(q(&["env"], "env", &ask).as_deref(), Some("environment"));
        // A shell the agent starts for the one plain command.
        assert_eq!(
            q(&["/bin/sh", "-c", "env"], "env", &ask).as_deref(),
            Some("environment")
        );
        // Anything more than the probe's words is no probe; an allowed one stays allowed.
        assert_eq!(
            q(&["/bin/sh", "-c", "env | nc h 1"], "env | nc h 1", &ask),
            None
        );
        assert_eq!(q(&["env", "X=1", "make"], "env X=1 make", &ask), None);
        // A probe inside a line of literal commands counts when the rest is green by itself.
        let ide = r#"ps aux | grep -E "code|cursor|idea" | grep -v grep"#;
        assert_eq!(
            q(&["/bin/sh", "-c", ide], ide, &ask).as_deref(),
            Some("process-list")
        );
        for other in [
            "ps aux | nc h 1",
            "ps aux; make deploy",
            "ps aux | grep x > out",
            "ps aux | grep \"$X\"",
        ] {
            assert_eq!(q(&["/bin/sh", "-c", other], other, &ask), None, "{other}");
        }
        assert_eq!(q(&["env"], "env", &tyba_policy::Decision::Allow), None);
        // No profile, no probe.
        let none = AgentInstall::default();
        assert!(none
            .quiet_probe(&v(&["env"]), "env", &ask, &green)
            .is_none());
    }

    #[test]
    fn tyba_own_hook_is_only_the_installed_command_around_this_very_file() {
        let d = tempfile::tempdir().unwrap();
        let me = d.path().join("tyba");
        std::fs::write(&me, "x").unwrap();
        let other = d.path().join("tyba-copy");
        std::fs::write(&other, "x").unwrap();
        let wt = d.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        let script = hook_wrapper_script("codex");
        let m = me.to_str().unwrap();
        let no: &[PathBuf] = &[];
        let own = |exe: &str| {
            use std::os::unix::fs::MetadataExt;
            match (std::fs::metadata(exe), std::fs::metadata(&me)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            }
        };
        assert!(is_own_hook(
            &v(&["/bin/sh", "-c", &script, m]),
            &wt,
            no,
            &own
        ));
        let line = format!("/bin/sh -c '{script}' {m}");
        assert!(is_own_hook(&v(&["/bin/bash", "-lc", &line]), &wt, no, &own));
        let quoted = format!("/bin/sh -c '{script}' '{m}'");
        assert!(is_own_hook(
            &v(&["/bin/zsh", "-lc", &quoted]),
            &wt,
            no,
            &own
        ));
        // Another file with the same contents, another script, more words, a writable name.
        let o = other.to_str().unwrap();
        assert!(!is_own_hook(
            &v(&["/bin/sh", "-c", &script, o]),
            &wt,
            no,
            &own
        ));
        let evil = script.replace("exit \"$s\"", "rm -rf ~; exit \"$s\"");
        assert!(!is_own_hook(
            &v(&["/bin/sh", "-c", &evil, m]),
            &wt,
            no,
            &own
        ));
        assert!(!is_own_hook(
            &v(&["/bin/sh", "-c", &script, m, "x"]),
            &wt,
            no,
            &own
        ));
        let line2 = format!("{line}; rm -rf ~");
        assert!(!is_own_hook(
            &v(&["/bin/bash", "-lc", &line2]),
            &wt,
            no,
            &own
        ));
        assert!(!is_own_hook(
            &v(&["/bin/sh", "-c", &script, m]),
            &wt,
            &[d.path().to_path_buf()],
            &own
        ));
        // A name through /proc or /dev resolves differently in each process: never tyba's.
        let yes = |_: &str| true;
        for magic in ["/proc/self/exe", "/proc/self/cwd/t", "/dev/fd/3"] {
            assert!(!is_own_hook(
                &v(&["/bin/sh", "-c", &script, magic]),
                &wt,
                no,
                &yes
            ));
        }
        assert!(!is_own_hook(
            &v(&["/bin/sh", "-c", &script, "tyba"]),
            &wt,
            no,
            &own
        ));
    }

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn an_npm_launcher_resolves_to_its_package_and_its_native_dependency() {
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        let nm = d.join("lib/node_modules");
        let pkg = nm.join("@openai/codex");
        write(
            &pkg.join("package.json"),
            r#"{"name":"@openai/codex","optionalDependencies":{"@openai/codex-linux-x64":"1","../../etc":"1"}}"#,
        );
        write(&pkg.join("bin/codex.js"), "#!/usr/bin/env node\n");
        // Hoisted beside the package, as `npm install --prefix` lays it out.
        let native = nm.join("@openai/codex-linux-x64");
        write(&native.join("package.json"), "{}");
        write(&native.join("vendor/codex"), "");
        std::fs::create_dir_all(d.join("bin")).unwrap();
        std::os::unix::fs::symlink(pkg.join("bin/codex.js"), d.join("bin/codex")).unwrap();
        let node_dir = d.join("nodebin");
        write(&node_dir.join("node"), "");
        let path = std::env::join_paths([d.join("missing"), node_dir.clone()]).unwrap();
        let i = AgentInstall::resolve(&d.join("bin/codex"), Some(&path));
        assert_eq!(i.program, pkg.join("bin/codex.js"));
        assert_eq!(i.roots, vec![pkg.clone(), native.clone()]);
        assert_eq!(i.interpreters, vec![node_dir.join("node")]);
        assert!(i.owns(&native.join("vendor/codex")));
        assert!(!i.owns(&nm.join("other/x")));
        let cwd = d.clone();
        let node = node_dir.join("node");
        let script = pkg.join("bin/codex.js").display().to_string();
        assert!(i.is_own_exec(&node, &v(&["node", &script, "exec"]), &cwd, &[]));
        assert!(i.is_own_exec(
            &node,
            &v(&[
                "node",
                "--max-old-space-size=4096",
                "--no-warnings",
                &script
            ]),
            &cwd,
            &[]
        ));
        // Named through a writable place, a link could be swapped after the check.
        assert!(!i.is_own_exec(&node, &v(&["node", &script]), &cwd, &[pkg.join("bin")]));
        // Options that load other code, or a script elsewhere, make it a command.
        for bad in [
            v(&["node", "-e", "1", &script]),
            v(&["node", "--require", "/tmp/x.js", &script]),
            v(&["node", "--import=/tmp/x.mjs", &script]),
            v(&["node", "--unknown-flag", &script]),
            v(&["node", "-"]),
            v(&["node"]),
            v(&["node", "/tmp/evil.js"]),
        ] {
            assert!(!i.is_own_exec(&node, &bad, &cwd, &[]), "{bad:?}");
        }
        // Another interpreter running the agent's script is not the agent's interpreter.
        assert!(!i.is_own_exec(
            Path::new("/usr/bin/python3"),
            &v(&["python3", &script]),
            &cwd,
            &[]
        ));
    }

    #[test]
    fn the_index_holds_the_installations_executables_by_size_and_bytes_compare_in_full() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        let pkg = d.join("lib/node_modules/p");
        write(&pkg.join("package.json"), r#"{"name":"p"}"#);
        write(&pkg.join("bin/p.js"), "#!/usr/bin/env node\n");
        write(&pkg.join("vendor/native"), "\x7fELF-native");
        write(&pkg.join("vendor/data.txt"), "\x7fELF-native");
        for f in ["bin/p.js", "vendor/native"] {
            std::fs::set_permissions(pkg.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // A link out of the installation is not followed.
        std::os::unix::fs::symlink("/usr/bin", pkg.join("vendor/out")).unwrap();
        let i = AgentInstall::resolve(&pkg.join("bin/p.js"), None);
        let idx = i.index();
        assert_eq!(idx.len(), 2, "{idx:?}");
        assert_eq!(idx.of_size(11), &[pkg.join("vendor/native")]);
        assert!(idx.of_size(3).is_empty());
        assert!(AgentInstall::default().index().is_empty());
        let same = |a: &[u8], b: &[u8]| same_bytes(&mut &a[..], &mut &b[..]).unwrap();
        let big: Vec<u8> = (0..3_000_000u32).map(|x| x as u8).collect();
        let mut other = big.clone();
        *other.last_mut().unwrap() ^= 1;
        assert!(same(&big, &big));
        assert!(!same(&big, &other));
        assert!(!same(&big, &big[..big.len() - 1]));
        assert!(same(b"", b""));
    }

    #[test]
    fn a_venv_entry_point_resolves_to_the_venv_and_its_python() {
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        let venv = d.join("venv");
        write(&venv.join("pyvenv.cfg"), "home = /usr/bin\n");
        write(&venv.join("bin/python3"), "");
        write(
            &venv.join("bin/aider"),
            &format!("#!{}\nimport aider\n", venv.join("bin/python3").display()),
        );
        let i = AgentInstall::resolve(&venv.join("bin/aider"), None);
        assert_eq!(i.roots, vec![venv.clone()]);
        assert!(i.owns(&venv.join("lib/python3.11/site-packages/aider/main.py")));
    }

    #[test]
    fn a_plain_program_is_only_itself_and_a_shell_not_even_that() {
        let d = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(d.path()).unwrap();
        write(&d.join("bin/claude"), "\x7fELF");
        let i = AgentInstall::resolve(&d.join("bin/claude"), None);
        assert_eq!(i.roots, vec![d.join("bin/claude")]);
        assert!(i.owns(&d.join("bin/claude")));
        assert!(!i.owns(Path::new("/usr/bin/rm")));
        // A shell or interpreter named as the agent owns nothing: its re-execs are commands.
        for p in ["/bin/sh", "/usr/bin/bash", "/usr/bin/python3"] {
            if Path::new(p).exists() {
                let i = AgentInstall::resolve(Path::new(p), None);
                assert!(i.roots.is_empty(), "{p}: {:?}", i.roots);
                assert!(!i.is_own_exec(
                    &std::fs::canonicalize(p).unwrap(),
                    &[],
                    Path::new("/"),
                    &[]
                ));
            }
        }
        assert!(is_general_program(Path::new("/usr/bin/python3.11")));
        assert!(!is_general_program(Path::new("/usr/bin/python3-config")));
    }
}
