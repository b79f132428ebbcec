//! `tyba hook install|uninstall`: tyba's entry in an agent's hook settings.
//!
//! | agent | `--project` (default) | `--user` | event |
//! |---|---|---|---|
//! | Claude Code | `<git top>/.claude/settings.json` | `~/.claude/settings.json` | `hooks.PreToolUse` |
//! | Codex | `<git top>/.codex/hooks.json` | `$CODEX_HOME/hooks.json` (default `~/.codex`) | `hooks.PreToolUse` |
//! | Gemini CLI | `<git top>/.gemini/settings.json` | `~/.gemini/settings.json` | `hooks.BeforeTool` |
//!
//! The file is edited, never replaced: keys keep their order, other settings and other hooks
//! stay as they were, and a file that is not valid JSON is refused rather than overwritten.
//! tyba's entry is a matcher group `*` holding one command hook that runs this binary by
//! absolute path inside a small `sh` wrapper (see [`wrapper_script`]) that turns a missing or
//! killed binary into a refusal; an existing tyba entry (any path to a binary named like this
//! one) is replaced, so installing twice leaves one entry.

use super::input::{shell_quote, Agent};
use super::session::HOOK_TIMEOUT_SECS;
use crate::cli::UsageError;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `tyba hook install|uninstall`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent whose settings to change.
    #[arg(value_enum)]
    agent: Agent,
    /// The repository's settings, under the git top-level of the current directory (default).
    #[arg(long, conflicts_with = "user")]
    project: bool,
    /// The person's own settings, under $HOME (Codex: $CODEX_HOME, default ~/.codex).
    #[arg(long)]
    user: bool,
}

/// Why the settings could not be changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The settings file is not JSON tyba can keep intact.
    #[error(
        "{path} is not valid JSON ({source}); tyba will not overwrite it: fix or move it first"
    )]
    Invalid {
        /// The settings file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A key tyba must edit holds something else than the agent's format says.
    #[error("{path}: {key} is not {expected}; tyba will not overwrite it")]
    Shape {
        /// The settings file.
        path: PathBuf,
        /// Dotted key.
        key: String,
        /// What the agent expects there.
        expected: &'static str,
    },
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The settings file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The settings file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path of this binary is unknown.
    #[error("cannot find the path of the tyba binary: {0}")]
    Exe(#[source] std::io::Error),
}

/// Runs `tyba hook install`.
///
/// # Errors
/// [`InstallError`], or a [`UsageError`] when the settings' place cannot be found.
pub fn install(a: &Args) -> anyhow::Result<ExitCode> {
    let path = settings_path(a)?;
    let exe = std::env::current_exe().map_err(InstallError::Exe)?;
    let command = hook_command(&exe, a.agent);
    let mut doc = read(&path)?.unwrap_or_else(|| J::Obj(Vec::new()));
    let changed = add_entry(&mut doc, a.agent, &command, &exe_name(&exe), &path)?;
    let mut out = std::io::stdout().lock();
    if changed {
        write(&path, &doc)?;
        writeln!(
            out,
            "installed tyba's {} hook in {}\n  command: {command}",
            event(a.agent),
            path.display()
        )?;
    } else {
        writeln!(
            out,
            "tyba's {} hook is already installed in {}",
            event(a.agent),
            path.display()
        )?;
    }
    if a.agent == Agent::Codex {
        writeln!(
            out,
            "  Codex runs a new hook only once it is trusted: review it with /hooks in codex, or pass --dangerously-bypass-hook-trust to codex exec"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `tyba hook uninstall`.
///
/// # Errors
/// [`InstallError`], or a [`UsageError`] when the settings' place cannot be found.
pub fn uninstall(a: &Args) -> anyhow::Result<ExitCode> {
    let path = settings_path(a)?;
    let exe = std::env::current_exe().map_err(InstallError::Exe)?;
    let mut out = std::io::stdout().lock();
    let Some(mut doc) = read(&path)? else {
        writeln!(out, "no tyba hook in {} (no such file)", path.display())?;
        return Ok(ExitCode::SUCCESS);
    };
    if remove_entry(&mut doc, a.agent, &exe_name(&exe), &path)? {
        write(&path, &doc)?;
        writeln!(
            out,
            "removed tyba's {} hook from {}",
            event(a.agent),
            path.display()
        )?;
    } else {
        writeln!(out, "no tyba hook in {}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn event(agent: Agent) -> &'static str {
    agent.event()
}

fn exe_name(exe: &Path) -> String {
    exe.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tyba".into())
}

fn settings_path(a: &Args) -> anyhow::Result<PathBuf> {
    let home = || {
        crate::cli::home_dir()
            .ok_or_else(|| UsageError("--user needs HOME set to an absolute path".into()))
    };
    if a.user {
        let base = home()?;
        return Ok(match a.agent {
            Agent::ClaudeCode => base.join(".claude/settings.json"),
            Agent::Gemini => base.join(".gemini/settings.json"),
            Agent::Codex => match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
                Some(c) => PathBuf::from(c).join("hooks.json"),
                None => base.join(".codex/hooks.json"),
            },
        });
    }
    let here = std::env::current_dir()?;
    let top = here
        .ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            UsageError(format!(
                "{} is not inside a git repository: run this in the project, or use --user",
                here.display()
            ))
        })?;
    Ok(match a.agent {
        Agent::ClaudeCode => top.join(".claude/settings.json"),
        Agent::Codex => top.join(".codex/hooks.json"),
        Agent::Gemini => top.join(".gemini/settings.json"),
    })
}

fn read(path: &Path) -> Result<Option<J>, InstallError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(InstallError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if text.trim().is_empty() {
        return Ok(Some(J::Obj(Vec::new())));
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| InstallError::Invalid {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes the document next to the file, then renames it into place (keeping the old mode).
fn write(path: &Path, doc: &J) -> Result<(), InstallError> {
    let err = |source| InstallError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut text = serde_json::to_string_pretty(doc).map_err(|e| err(std::io::Error::other(e)))?;
    text.push('\n');
    let tmp = path.with_extension(format!("json.tyba-{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(err)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// The matcher group tyba installs.
fn entry(agent: Agent, command: &str) -> J {
    let s = |v: &str| J::Str(v.to_string());
    let handler = match agent {
        Agent::ClaudeCode => vec![
            ("type", s("command")),
            ("command", s(command)),
            ("timeout", J::Num(HOOK_TIMEOUT_SECS.into())),
        ],
        Agent::Codex => vec![
            ("type", s("command")),
            ("command", s(command)),
            ("timeout", J::Num(HOOK_TIMEOUT_SECS.into())),
            ("statusMessage", s("tyba: checking the tool call")),
        ],
        // Gemini CLI timeouts are in milliseconds; `name` is how /hooks refers to it.
        Agent::Gemini => vec![
            ("name", s("tyba")),
            ("type", s("command")),
            ("command", s(command)),
            ("timeout", J::Num((HOOK_TIMEOUT_SECS * 1000).into())),
            (
                "description",
                s("tyba: classify every tool call, refuse what the policy refuses"),
            ),
        ],
    };
    obj(vec![
        ("matcher", s("*")),
        ("hooks", J::Arr(vec![obj(handler)])),
    ])
}

fn obj(pairs: Vec<(&str, J)>) -> J {
    J::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// The `sh` script around tyba in the installed command. The agents let a call through when
/// a hook exits with a status other than 0 or 2; this turns every other status (the binary
/// gone, not executable, killed by a signal) into exit 2 with a reason on stderr, which
/// blocks in all three. Single-quoted, it holds no `'` or `\`, so it reaches `sh` unchanged
/// from any shell the agent starts hooks with (`sh`, `bash`, `zsh`, `fish`).
/// The supervisor recognises exactly this command as tyba's own hook
/// ([`tyba_supervisor::agent::is_own_hook`]).
fn wrapper_script(agent: Agent) -> String {
    tyba_supervisor::agent::hook_wrapper_script(agent.cli_name())
}

/// The command tyba installs: `/bin/sh -c '<wrapper>' <absolute path of this binary>`.
fn hook_command(exe: &Path, agent: Agent) -> String {
    format!(
        "/bin/sh -c '{}' {}",
        wrapper_script(agent),
        shell_quote(&exe.to_string_lossy())
    )
}

/// Whether a hook handler is tyba's for `agent`: the installed command around a binary named
/// `exe_name` (or `tyba`), or a bare `<path to tyba> hook <agent>` written by hand or by an
/// older tyba.
fn is_tyba(handler: &J, agent: Agent, exe_name: &str) -> bool {
    let Some(J::Str(command)) = handler.get("command") else {
        return false;
    };
    let command = command.trim();
    let named_tyba = |program: &str| {
        let name = Path::new(program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        name == exe_name || name == "tyba"
    };
    let wrapped = format!("/bin/sh -c '{}' ", wrapper_script(agent));
    if let Some(rest) = command.strip_prefix(&wrapped) {
        return match split_word(rest) {
            Some((program, tail)) => tail.trim().is_empty() && named_tyba(program),
            None => false,
        };
    }
    match split_word(command) {
        Some((program, rest)) => {
            let args: Vec<&str> = rest.split_whitespace().collect();
            named_tyba(program) && args == ["hook", agent.cli_name()]
        }
        None => false,
    }
}

/// The first shell word (bare, or single-quoted without escapes) and the rest.
fn split_word(s: &str) -> Option<(&str, &str)> {
    if let Some(quoted) = s.strip_prefix('\'') {
        let end = quoted.find('\'')?;
        Some((&quoted[..end], &quoted[end + 1..]))
    } else {
        let i = s.find(char::is_whitespace).unwrap_or(s.len());
        Some((&s[..i], &s[i..]))
    }
}

/// The event's array of matcher groups, created if absent.
fn groups_mut<'d>(
    doc: &'d mut J,
    agent: Agent,
    path: &Path,
    create: bool,
) -> Result<Option<&'d mut Vec<J>>, InstallError> {
    let shape = |key: &str, expected| InstallError::Shape {
        path: path.to_path_buf(),
        key: key.to_string(),
        expected,
    };
    let J::Obj(root) = doc else {
        return Err(shape("the file", "a JSON object"));
    };
    if !root.iter().any(|(k, _)| k == "hooks") {
        if !create {
            return Ok(None);
        }
        root.push(("hooks".into(), J::Obj(Vec::new())));
    }
    let Some(J::Obj(hooks)) = field_mut(root, "hooks") else {
        return Err(shape("hooks", "an object"));
    };
    let ev = agent.event();
    if !hooks.iter().any(|(k, _)| k == ev) {
        if !create {
            return Ok(None);
        }
        hooks.push((ev.into(), J::Arr(Vec::new())));
    }
    match field_mut(hooks, ev) {
        Some(J::Arr(groups)) => Ok(Some(groups)),
        _ => Err(shape(&format!("hooks.{ev}"), "an array")),
    }
}

/// Removes tyba's handlers from the groups; a group left without handlers goes too.
fn strip(groups: &mut Vec<J>, agent: Agent, exe_name: &str) -> bool {
    let mut removed = false;
    groups.retain_mut(|g| {
        let Some(J::Arr(handlers)) = g.get_mut("hooks") else {
            return true;
        };
        let before = handlers.len();
        handlers.retain(|h| !is_tyba(h, agent, exe_name));
        if handlers.len() == before {
            return true;
        }
        removed = true;
        !handlers.is_empty()
    });
    removed
}

/// Adds tyba's entry; returns whether the document changed.
fn add_entry(
    doc: &mut J,
    agent: Agent,
    command: &str,
    exe_name: &str,
    path: &Path,
) -> Result<bool, InstallError> {
    let want = entry(agent, command);
    let Some(groups) = groups_mut(doc, agent, path, true)? else {
        return Ok(false);
    };
    let ours = groups
        .iter()
        .filter_map(|g| match g.get("hooks") {
            Some(J::Arr(hs)) => Some(hs.iter().filter(|h| is_tyba(h, agent, exe_name)).count()),
            _ => None,
        })
        .sum::<usize>();
    if ours == 1 && groups.contains(&want) {
        return Ok(false);
    }
    strip(groups, agent, exe_name);
    groups.push(want);
    Ok(true)
}

/// Removes tyba's entry (and the containers it leaves empty); returns whether the document
/// changed.
fn remove_entry(
    doc: &mut J,
    agent: Agent,
    exe_name: &str,
    path: &Path,
) -> Result<bool, InstallError> {
    let Some(groups) = groups_mut(doc, agent, path, false)? else {
        return Ok(false);
    };
    if !strip(groups, agent, exe_name) {
        return Ok(false);
    }
    let empty = groups.is_empty();
    if empty {
        if let J::Obj(root) = doc {
            if let Some(J::Obj(hooks)) = field_mut(root, "hooks") {
                hooks.retain(|(k, _)| k != agent.event());
                if hooks.is_empty() {
                    root.retain(|(k, _)| k != "hooks");
                }
            }
        }
    }
    Ok(true)
}

fn field_mut<'a>(pairs: &'a mut [(String, J)], key: &str) -> Option<&'a mut J> {
    pairs.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A JSON value that keeps the order of object keys as written (the settings belong to the
/// person; tyba should not reorder them).
#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut J> {
        match self {
            J::Obj(pairs) => field_mut(pairs, key),
            _ => None,
        }
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Null => s.serialize_unit(),
            J::Bool(b) => s.serialize_bool(*b),
            J::Num(n) => n.serialize(s),
            J::Str(v) => s.serialize_str(v),
            J::Arr(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for i in items {
                    seq.serialize_element(i)?;
                }
                seq.end()
            }
            J::Obj(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JVisitor)
    }
}

struct JVisitor;

impl<'de> Visitor<'de> for JVisitor {
    type Value = J;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<J, E> {
        Ok(J::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<J, E> {
        Ok(J::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<J, E> {
        Ok(J::Num(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<J, E> {
        Ok(J::Num(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<J, E> {
        serde_json::Number::from_f64(v)
            .map(J::Num)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<J, E> {
        Ok(J::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<J, E> {
        Ok(J::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<J, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(J::Arr(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<J, A::Error> {
        let mut pairs = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, J>()? {
            pairs.push((k, v));
        }
        Ok(J::Obj(pairs))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse(s: &str) -> J {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn keeps_key_order_and_other_hooks() {
        let mut doc = parse(
            r#"{"zeta": 1, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}], "Stop": []}, "alpha": [1.5, null]}"#,
        );
        let p = Path::new("/x/settings.json");
        assert!(add_entry(
            &mut doc,
            Agent::ClaudeCode,
            "/bin/tyba hook claude-code",
            "tyba",
            p
        )
        .unwrap());
        assert!(!add_entry(
            &mut doc,
            Agent::ClaudeCode,
            "/bin/tyba hook claude-code",
            "tyba",
            p
        )
        .unwrap());
        let text = serde_json::to_string(&doc).unwrap();
        assert!(
            text.starts_with(r#"{"zeta":1,"hooks":{"PreToolUse":[{"matcher":"Bash""#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""Stop":[]},"alpha":[1.5,null]}"#),
            "{text}"
        );
        assert!(remove_entry(&mut doc, Agent::ClaudeCode, "tyba", p).unwrap());
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            r#"{"zeta":1,"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"mine"}]}],"Stop":[]},"alpha":[1.5,null]}"#
        );
    }

    #[test]
    fn recognises_tyba_commands_only() {
        let h = |c: &str| obj(vec![("command", J::Str(c.into()))]);
        assert!(is_tyba(
            &h("/usr/bin/tyba hook codex"),
            Agent::Codex,
            "tyba"
        ));
        assert!(is_tyba(
            &h("'/my dir/tyba' hook codex"),
            Agent::Codex,
            "tyba"
        ));
        assert!(!is_tyba(
            &h("/usr/bin/tyba hook gemini"),
            Agent::Codex,
            "tyba"
        ));
        assert!(!is_tyba(
            &h("/usr/bin/tyba hook codex --x"),
            Agent::Codex,
            "tyba"
        ));
        let wrapped = hook_command(Path::new("/opt/my tools/tyba"), Agent::Codex);
        assert!(is_tyba(&h(&wrapped), Agent::Codex, "tyba"));
        assert!(!is_tyba(&h(&wrapped), Agent::Gemini, "tyba"));
        assert!(!is_tyba(
            &h(&format!("{wrapped} extra")),
            Agent::Codex,
            "tyba"
        ));
        assert!(!is_tyba(
            &h("/usr/bin/other hook codex"),
            Agent::Codex,
            "tyba"
        ));
    }
}
