//! Agent profiles: the per-agent facts of the embedded policy, as data (DESIGN.md §5 "who is
//! the agent"; issue 12).
//!
//! One `[agents.NAME]` table per agent (`claude-code`, `codex`, `gemini`, `aider` in the
//! embedded default; a user's policy layer may add agents or extend them, lists adding up like
//! every list of the policy file). Each says:
//! - how to recognise the agent from its resolved program: program file names, npm package
//!   names (`@openai/codex`, a trailing `*` for platform packages), Python distributions
//!   (`aider-chat`), installation directories of native installers
//!   (`~/.local/share/claude/versions`);
//! - its model hosts, reached by the agent program only;
//! - the environment variables that hold its key: passed to the agent program, never to the
//!   commands it starts;
//! - variables hidden from it (the person's tmux and ssh agent sockets);
//! - its state directories and control files inside them (settings, rules, hooks: read-only,
//!   so the agent cannot approve itself). The agent writes a session-private copy of its
//!   state (issue 13 class 8): only the files its `data` patterns name (transcripts,
//!   history, refreshed credentials) are merged back to the person's state at the session's
//!   end, as bytes; everything else it wrote there is dropped;
//! - its known start-up probes, each a program and words with the decision it gets.
//!
//! A probe's decision can only be quieter or stricter than asking: `quiet-refuse` refuses an
//! exec the general rules would ask about, logged and not asked (the agent copes with the
//! failure); `answer-own-processes` does not run it either, and answers a process-table look
//! at the session's own processes from the sandbox's private `/proc` (what the agent could
//! read itself: Codex's daemon cannot work without it). No decision allows anything: a probe that reads only the worktree is green by the
//! general rules, and nothing is made green by naming its string ([`ProbeDecision`] has no
//! allowing variant, and [`AgentProfile::probe_outcome`] answers only for an ask).
//!
//! ## The API the supervisor calls
//! ```
//! use std::path::Path;
//! use tyba_policy::{agents::InstallMarkers, Policy};
//! let policy = Policy::embedded_default();
//! let agents = &policy.config().agents;
//! let program = Path::new("/home/p/.npm-global/lib/node_modules/@openai/codex/bin/codex.js");
//! let markers = InstallMarkers::from_path(program);
//! let found = agents.profile_for(program, Some(Path::new("/home/p")), &markers).unwrap();
//! assert_eq!(found.name, "codex");
//! assert!(found.profile.key_env.iter().any(|k| k == "OPENAI_API_KEY"));
//! ```

use crate::decision::Decision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// `[agents.NAME]`: one agent's facts. Every list is optional; layers add to each.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// File names the agent's program is started as (`claude`), matched on the resolved
    /// program's file name and on the name the person typed.
    #[serde(default)]
    pub programs: Vec<String>,
    /// npm package names whose installation holds the program (`@anthropic-ai/claude-code`);
    /// a trailing `*` matches by prefix (`@openai/codex-*`, its platform packages).
    #[serde(default)]
    pub npm_packages: Vec<String>,
    /// Python distribution names (`aider-chat`), as the supervisor finds them beside a venv's
    /// program (`*.dist-info`).
    #[serde(default)]
    pub python_distributions: Vec<String>,
    /// Installation directories of native installers, `~` allowed
    /// (`~/.local/share/claude/versions`): a program below one is the agent.
    #[serde(default)]
    pub install_dirs: Vec<String>,
    /// `host:port` the agent program itself may connect to (its model API).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Environment variables holding the agent's key: passed to the agent program without
    /// `--pass-env`, never to the commands it starts.
    #[serde(default)]
    pub key_env: Vec<String>,
    /// Environment variables not handed to the agent at all (sockets of the person's side:
    /// `TMUX`, `TMUX_PANE`, `SSH_AUTH_SOCK`).
    #[serde(default)]
    pub hidden_env: Vec<String>,
    /// State directories and files, `~` allowed: the agent process writes a session-private
    /// copy of each (an overlay in the sandbox's mount namespace), never the person's.
    #[serde(default)]
    pub state: Vec<String>,
    /// The agent's own directories in the shared temporary directory, named for the user:
    /// absolute paths whose last name holds `{uid}` (the user's numeric id), e.g. Codex's
    /// socket rendezvous `/tmp/codex-daemon-{uid}` (its daemon binds its socket there, mode
    /// 0700, and links `~/.codex/app-server-control/app-server-control.sock` to it). When
    /// `tyba run` starts this agent, the kernel layer makes each one when it is absent (mode 0700, the user's, never over
    /// anything), refuses one that is not a real directory of the user's alone, and gives the
    /// agent a session-private copy of it like a `state` entry, so the sockets the agent binds
    /// there are its own and the person's stay out of reach (`docs/agents.md`).
    #[serde(default)]
    pub runtime_dirs: Vec<String>,
    /// Known data inside the state, merged back to the person's state at the session's end:
    /// paths with `~`, where `*` matches within one name and a `**` component any number of
    /// directories (`~/.codex/sessions/**/*.jsonl`). Only regular files are merged, copied as
    /// bytes; whatever else the agent wrote in its state copy is dropped and listed.
    #[serde(default)]
    pub data: Vec<String>,
    /// Files inside the state that stay read-only (settings, rules, hooks).
    #[serde(default)]
    pub control_files: Vec<String>,
    /// Known start-up probes and their decisions.
    #[serde(default)]
    pub probes: Vec<ProbeSpec>,
}

/// `[[agents.NAME.probes]]`: a command the agent runs at start, matched on its argv.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Stable id, logged with the decision.
    pub id: String,
    /// Program file name (`tmux`), matched on the base name of `argv[0]`.
    pub program: String,
    /// Words that must all appear among the arguments, exactly.
    #[serde(default)]
    pub args: Vec<String>,
    /// The arguments must be `args` and nothing else, in that order (`env` alone, not `env
    /// X=1 make`).
    #[serde(default)]
    pub exact: bool,
    /// For a shell the agent starts with a script (`bash -c -l SCRIPT`): `-c` is among the
    /// arguments and one argument, the script, starts with this text (Claude Code's shell
    /// snapshot script starts `SNAPSHOT_FILE=`). The script varies with the home and the time,
    /// so it is matched by its start; the decision can only refuse.
    #[serde(default)]
    pub script_prefix: Option<String>,
    /// What the probe gets instead of an ask.
    pub decision: ProbeDecision,
    /// Why, for the log and the agent.
    pub reason: String,
    /// Command lines (words separated by spaces) the probe must match; checked when the
    /// policy loads.
    #[serde(default)]
    pub examples: Vec<String>,
}

/// The decision a known probe gets, in place of an ask. No variant allows anything: no
/// program runs.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProbeDecision {
    /// Refused without asking, logged: the probe would reach outside the session (the
    /// person's tmux server, `ssh -T git@github.com`) or only tells the agent about the
    /// machine, and the agent works without it.
    QuietRefuse,
    /// A look at the process table about processes of the session itself (`ps -p PID -o
    /// stat= -o lstart=`: Codex's daemon checking the process it just started): `ps` does
    /// not run; tyba answers from the sandbox's private `/proc` (its own pid namespace, so
    /// only the session's processes exist there), which the agent could read itself, for the
    /// output fields `pid`, `ppid`, `stat`, `lstart` and `comm` with empty headers. Any other
    /// form of the command, or a process that is not the session's, is refused quietly.
    AnswerOwnProcesses,
}

/// A quiet refusal of a known probe: the supervisor refuses the exec with `reason` and logs
/// it, without asking the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuietRefusal {
    /// The agent profile's name.
    pub agent: String,
    /// The probe's id.
    pub probe: String,
    /// What the probe gets: refused, or answered without running (for
    /// [`ProbeDecision::AnswerOwnProcesses`] the supervisor refuses quietly when it cannot
    /// answer).
    pub decision: ProbeDecision,
    /// The probe's reason.
    pub reason: String,
}

/// Facts about where a program is installed, for [`AgentProfiles::profile_for`]. The path
/// gives the npm packages ([`InstallMarkers::from_path`]); the supervisor adds what it reads
/// from disk (a venv's `*.dist-info` names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallMarkers {
    /// npm packages holding the program, outermost first, each with its directory
    /// (`@openai/codex`, `/…/node_modules/@openai/codex`).
    pub npm_packages: Vec<(String, PathBuf)>,
    /// Python distribution names installed beside the program (`aider-chat`), normalised as
    /// PyPI names are (lower case, `_`/`.` as `-`).
    pub python_distributions: Vec<String>,
}

impl InstallMarkers {
    /// The npm packages a resolved program path lies in: each `node_modules/NAME` or
    /// `node_modules/@SCOPE/NAME` segment of the path, outermost first.
    pub fn from_path(program: &Path) -> Self {
        let parts: Vec<&str> = program
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .collect();
        let mut out = InstallMarkers::default();
        let mut dir = PathBuf::from("/");
        let mut i = 0;
        while i < parts.len() {
            dir.push(parts[i]);
            if parts[i] == "node_modules" && i + 1 < parts.len() {
                let (name, used) = if parts[i + 1].starts_with('@') && i + 2 < parts.len() {
                    (format!("{}/{}", parts[i + 1], parts[i + 2]), 2)
                } else {
                    (parts[i + 1].to_string(), 1)
                };
                let mut root = dir.clone();
                for p in &parts[i + 1..=i + used] {
                    root.push(p);
                }
                out.npm_packages.push((name, root.clone()));
                dir = root;
                i += used;
            }
            i += 1;
        }
        out
    }
}

/// How a program was recognised, strongest first.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evidence {
    /// It lies below one of the profile's installation directories; the directory it lies in
    /// directly below that one (`…/versions/2.1.332`) is the installation root.
    InstallDir(PathBuf),
    /// It lies in one of the profile's npm packages; the package directory is the root.
    NpmPackage {
        /// The package name.
        name: String,
        /// The package directory.
        root: PathBuf,
    },
    /// One of the profile's Python distributions is installed beside it.
    PythonDistribution(String),
    /// Only its file name matches: use this for the program the person named on
    /// `tyba run`'s command line, never for a program the agent starts.
    ProgramName,
}

/// A recognised agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognised<'a> {
    /// The profile's name (`claude-code`).
    pub name: &'a str,
    /// The profile.
    pub profile: &'a AgentProfile,
    /// What recognised it.
    pub evidence: Evidence,
}

/// Every agent profile of the merged policy, by name (sorted).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct AgentProfiles(pub BTreeMap<String, AgentProfile>);

impl AgentProfiles {
    /// The profile a resolved program belongs to, with the strongest evidence any profile
    /// has (installation directory, then npm package, then Python distribution, then file
    /// name); `None` when no profile knows it. `program` is the physical path (symlinks
    /// resolved); `home` expands `~` in installation directories (no home: those are skipped).
    pub fn profile_for<'a>(
        &'a self,
        program: &Path,
        home: Option<&Path>,
        markers: &InstallMarkers,
    ) -> Option<Recognised<'a>> {
        let mut found: Vec<(u8, Recognised<'_>)> = Vec::new();
        let mut consider = |rank: u8, r: Recognised<'a>| found.push((rank, r));
        for (name, p) in &self.0 {
            for d in p.install_dirs.iter().filter_map(|d| expand_home(d, home)) {
                if let Ok(rest) = program.strip_prefix(&d) {
                    let root = rest
                        .components()
                        .next()
                        .map_or(d.clone(), |c| d.join(c.as_os_str()));
                    consider(
                        0,
                        Recognised {
                            name,
                            profile: p,
                            evidence: Evidence::InstallDir(root),
                        },
                    );
                }
            }
            for (pkg, root) in &markers.npm_packages {
                if p.npm_packages.iter().any(|m| name_matches(m, pkg)) {
                    consider(
                        1,
                        Recognised {
                            name,
                            profile: p,
                            evidence: Evidence::NpmPackage {
                                name: pkg.clone(),
                                root: root.clone(),
                            },
                        },
                    );
                }
            }
            for dist in &markers.python_distributions {
                if p.python_distributions
                    .iter()
                    .any(|m| normalise_dist(m) == normalise_dist(dist))
                {
                    consider(
                        2,
                        Recognised {
                            name,
                            profile: p,
                            evidence: Evidence::PythonDistribution(dist.clone()),
                        },
                    );
                }
            }
            let file = program.file_name().and_then(|f| f.to_str()).unwrap_or("");
            if p.programs.iter().any(|n| n == file) {
                consider(
                    3,
                    Recognised {
                        name,
                        profile: p,
                        evidence: Evidence::ProgramName,
                    },
                );
            }
        }
        // The strongest evidence; among equals, the first profile by name.
        found
            .into_iter()
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, r)| r)
    }

    /// The profile of this name.
    pub fn get(&self, name: &str) -> Option<&AgentProfile> {
        self.0.get(name)
    }

    /// Adds a layer's profiles: new agents are added, lists of known ones extended.
    pub(crate) fn merge(&mut self, layer: &BTreeMap<String, AgentProfile>) {
        for (name, p) in layer {
            let mine = self.0.entry(name.clone()).or_default();
            for (into, from) in [
                (&mut mine.programs, &p.programs),
                (&mut mine.npm_packages, &p.npm_packages),
                (&mut mine.python_distributions, &p.python_distributions),
                (&mut mine.install_dirs, &p.install_dirs),
                (&mut mine.hosts, &p.hosts),
                (&mut mine.key_env, &p.key_env),
                (&mut mine.hidden_env, &p.hidden_env),
                (&mut mine.state, &p.state),
                (&mut mine.runtime_dirs, &p.runtime_dirs),
                (&mut mine.data, &p.data),
                (&mut mine.control_files, &p.control_files),
            ] {
                for s in from {
                    if !into.contains(s) {
                        into.push(s.clone());
                    }
                }
            }
            for probe in &p.probes {
                if !mine.probes.iter().any(|q| q.id == probe.id) {
                    mine.probes.push(probe.clone());
                }
            }
        }
    }
}

impl AgentProfile {
    /// The known probe an exec's argv matches, if any.
    pub fn probe(&self, argv: &[String]) -> Option<&ProbeSpec> {
        let (first, rest) = argv.split_first()?;
        let base = first.rsplit('/').next().unwrap_or(first);
        self.probes.iter().find(|p| {
            p.program == base
                && if p.exact {
                    p.args.as_slice() == rest
                } else {
                    p.args.iter().all(|a| rest.contains(a))
                }
                && p.script_prefix.as_ref().is_none_or(|pre| {
                    !pre.is_empty()
                        && rest.iter().any(|a| a == "-c")
                        && rest.iter().any(|a| a.starts_with(pre.as_str()))
                })
        })
    }

    /// What a known probe gets when the general rules decided `general` for it: a quiet
    /// refusal in place of an ask; `None` for every other decision (an allowed probe stays
    /// allowed, a refused one refused) and for an argv that is no known probe.
    pub fn probe_outcome(
        &self,
        agent: &str,
        argv: &[String],
        general: &Decision,
    ) -> Option<QuietRefusal> {
        if !matches!(general, Decision::Ask(_)) {
            return None;
        }
        let p = self.probe(argv)?;
        match p.decision {
            ProbeDecision::QuietRefuse | ProbeDecision::AnswerOwnProcesses => Some(QuietRefusal {
                agent: agent.to_string(),
                probe: p.id.clone(),
                decision: p.decision,
                reason: p.reason.clone(),
            }),
        }
    }
}

/// Checks one layer's profiles when it loads.
///
/// # Errors
/// A message naming the agent and what is wrong: a name that is not lower-case letters,
/// digits and `-`; a host that is not `host:port`; a variable name that is not an identifier
/// or makes programs run code (DESIGN.md §2a); a path that does not start with `~/` or `/`;
/// a probe with no id or reason, a program that is not a bare name, or an example it does not
/// match.
pub(crate) fn validate(layer: &BTreeMap<String, AgentProfile>) -> Result<(), String> {
    for (name, p) in layer {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(format!(
                "agent name `{name}` must be lower-case letters, digits and `-`"
            ));
        }
        let bad = |what: &str, v: &str| Err(format!("agents.{name}: {what} `{v}`"));
        for h in &p.hosts {
            let ok = h.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty()
                    && !host.contains(['/', ' ', '*'])
                    && port.parse::<u16>().is_ok_and(|n| n > 0)
            });
            if !ok {
                return bad("hosts entries must be host:port, got", h);
            }
        }
        for v in p.key_env.iter().chain(&p.hidden_env) {
            let ident = v
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident {
                return bad("not an environment variable name:", v);
            }
            if crate::analysis::is_exec_var(v) {
                return bad(
                    "a variable that makes programs run code cannot be passed:",
                    v,
                );
            }
        }
        for d in p
            .install_dirs
            .iter()
            .chain(&p.state)
            .chain(&p.control_files)
            .chain(&p.data)
        {
            if !(d.starts_with("~/") || d.starts_with('/')) || d.contains("/../") {
                return bad("paths must start with `~/` or `/`, got", d);
            }
        }
        for d in &p.runtime_dirs {
            // One directory per user, named for them, right below an existing directory.
            let last = d.rsplit('/').next().unwrap_or("");
            if !d.starts_with('/')
                || d.split('/').any(|c| c == ".." || c == ".")
                || !last.contains("{uid}")
                || d.matches("{uid}").count() != 1
            {
                return bad(
                    "runtime_dirs entries must be absolute paths whose last name holds `{uid}` once, got",
                    d,
                );
            }
        }
        for d in &p.data {
            // A pattern names files by their place in the state: no `.` or `..` (one outside
            // every `state` entry of the merged profile merges nothing).
            if d.split('/').any(|c| c == ".." || c == ".") || d.ends_with('/') {
                return bad("data patterns must name files without `.` or `..`, got", d);
            }
        }
        for n in p.programs.iter().chain(&p.python_distributions) {
            if n.is_empty() || n.contains(['/', ' ']) {
                return bad("not a bare name:", n);
            }
        }
        for n in &p.npm_packages {
            if n.is_empty() || n.contains(' ') || n.matches('/').count() > 1 {
                return bad("not an npm package name:", n);
            }
        }
        for probe in &p.probes {
            if probe.id.trim().is_empty() || probe.reason.trim().is_empty() {
                return Err(format!(
                    "agents.{name}: probe `{}` needs an id and a reason",
                    probe.id
                ));
            }
            if probe.program.is_empty() || probe.program.contains(['/', ' ']) {
                return bad("probe program must be a bare name, got", &probe.program);
            }
            if probe
                .script_prefix
                .as_ref()
                .is_some_and(|p| p.trim().is_empty())
            {
                return bad("probe script_prefix must not be empty, in probe", &probe.id);
            }
            if probe.args.is_empty() && !probe.exact && probe.script_prefix.is_none() {
                return Err(format!(
                    "agents.{name}: probe `{}` names no argument: it would match every `{}` (set `exact = true` for the program alone)",
                    probe.id, probe.program
                ));
            }
            let single = AgentProfile {
                probes: vec![probe.clone()],
                ..AgentProfile::default()
            };
            for ex in &probe.examples {
                let argv: Vec<String> = ex.split_whitespace().map(str::to_string).collect();
                if single.probe(&argv).is_none() {
                    return Err(format!(
                        "agents.{name}: probe `{}` does not match its example `{ex}`",
                        probe.id
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether `rel` (a path relative to a state entry, `/`-separated names) matches the
/// pattern `pat` (relative too): `*` within one name matches any run of characters, `?` one
/// character, a `**` component any number of directories (none included). Names are compared
/// exactly (case-sensitive); a name starting with `.` is matched by `*` too.
pub fn data_pattern_matches(pat: &str, rel: &str) -> bool {
    let p: Vec<&str> = pat.split('/').filter(|c| !c.is_empty()).collect();
    let r: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    components_match(&p, &r)
}

fn components_match(p: &[&str], r: &[&str]) -> bool {
    match p.split_first() {
        None => r.is_empty(),
        Some((&"**", rest)) => (0..=r.len()).any(|i| components_match(rest, &r[i..])),
        Some((first, rest)) => r.split_first().is_some_and(|(name, more)| {
            name_glob(first.as_bytes(), name.as_bytes()) && components_match(rest, more)
        }),
    }
}

fn name_glob(p: &[u8], n: &[u8]) -> bool {
    match p.split_first() {
        None => n.is_empty(),
        Some((b'*', rest)) => (0..=n.len()).any(|i| name_glob(rest, &n[i..])),
        Some((b'?', rest)) => !n.is_empty() && name_glob(rest, &n[1..]),
        Some((c, rest)) => n.first() == Some(c) && name_glob(rest, &n[1..]),
    }
}

fn expand_home(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(rest) = p.strip_prefix("~/") {
        home.map(|h| h.join(rest))
    } else if p.starts_with('/') {
        Some(PathBuf::from(p))
    } else {
        None
    }
}

fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// PyPI's name normalisation (PEP 503): lower case, runs of `-`, `_`, `.` as one `-`.
fn normalise_dist(n: &str) -> String {
    let mut out = String::new();
    for c in n.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn data_patterns_match_by_component() {
        let m = data_pattern_matches;
        assert!(m("history.jsonl", "history.jsonl"));
        assert!(!m("history.jsonl", "history.jsonl.bak"));
        assert!(!m("history.jsonl", "x/history.jsonl"));
        assert!(m(
            "sessions/**/*.jsonl",
            "sessions/2026/12/01/rollout-a.jsonl"
        ));
        assert!(m("sessions/**/*.jsonl", "sessions/a.jsonl"));
        assert!(!m("sessions/**/*.jsonl", "sessions/2026/a.json"));
        assert!(!m("sessions/**/*.jsonl", "other/a.jsonl"));
        assert!(m("projects/*/*.jsonl", "projects/-w-repo/abc.jsonl"));
        assert!(!m("projects/*/*.jsonl", "projects/-w-repo/sub/abc.jsonl"));
        assert!(!m("projects/*/*.jsonl", "projects/abc.jsonl"));
        assert!(m(
            "tmp/*/chats/session-?.json",
            "tmp/h/chats/session-1.json"
        ));
        assert!(!m("*.json", "settings.json/x"));
        assert!(!m("", "x"));
    }

    #[test]
    fn pypi_names_normalise() {
        assert_eq!(normalise_dist("Aider.Chat"), "aider-chat");
        assert_eq!(normalise_dist("aider__chat"), "aider-chat");
    }

    #[test]
    fn npm_patterns() {
        assert!(name_matches("@openai/codex", "@openai/codex"));
        assert!(!name_matches("@openai/codex", "@openai/codex-linux-x64"));
        assert!(name_matches("@openai/codex-*", "@openai/codex-linux-x64"));
        assert!(!name_matches("@openai/codex-*", "@openai-evil/codex-x"));
    }

    #[test]
    fn nested_packages_outermost_first() {
        let m =
            InstallMarkers::from_path(Path::new("/p/lib/node_modules/@a/b/node_modules/c/bin/x"));
        let names: Vec<&str> = m.npm_packages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["@a/b", "c"]);
        assert_eq!(
            m.npm_packages[1].1,
            Path::new("/p/lib/node_modules/@a/b/node_modules/c")
        );
        assert!(
            InstallMarkers::from_path(Path::new("/usr/bin/node_modules"))
                .npm_packages
                .is_empty()
        );
    }

    #[test]
    fn probes_match_words_or_exact_lists() {
        let p = AgentProfile {
            probes: vec![
                ProbeSpec {
                    id: "t".into(),
                    program: "tmux".into(),
                    args: vec!["display-message".into()],
                    exact: false,
                    decision: ProbeDecision::QuietRefuse,
                    reason: "r".into(),
                    examples: vec![],
                    script_prefix: None,
                },
                ProbeSpec {
                    id: "e".into(),
                    program: "env".into(),
                    args: vec![],
                    exact: true,
                    decision: ProbeDecision::QuietRefuse,
                    reason: "r".into(),
                    examples: vec![],
                    script_prefix: None,
                },
            ],
            ..AgentProfile::default()
        };
        let argv = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_string).collect() };
        assert_eq!(
            p.probe(&argv("/usr/bin/tmux display-message -p x"))
                .unwrap()
                .id,
            "t"
        );
        assert!(p.probe(&argv("tmux attach")).is_none());
        assert_eq!(p.probe(&argv("env")).unwrap().id, "e");
        assert!(p.probe(&argv("env X=1 make")).is_none());
        assert!(p.probe(&[]).is_none());
    }
}
