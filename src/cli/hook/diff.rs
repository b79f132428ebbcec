//! The diff an edit tool call would make, shown to the person before the write when the
//! decision says so (autonomy `low`: DESIGN.md §4, "an edit asks (showing the diff)").
//!
//! Built from the hook's own input and the file as it is now, before the tool runs:
//!
//! | agent | tool | diff |
//! |---|---|---|
//! | Claude Code | `Write {file_path, content}` | the file now (`/dev/null` when there is none) → `content` |
//! | | `Edit {file_path, old_string, new_string, replace_all}` | the file now → with the replacement made as the tool makes it |
//! | | `MultiEdit {file_path, edits: [{old_string, new_string, replace_all}]}` | each edit in turn, on the result of the one before |
//! | | `NotebookEdit {new_source, …}` | no diff: the new cell source, each line marked `+` |
//! | Codex | `apply_patch {command}` | the patch itself |
//! | Gemini CLI | `write_file {file_path, content}` | as `Write` |
//! | | `replace {file_path, old_string, new_string, expected_replacements, allow_multiple}` | as `Edit`, with Gemini's count rule |
//! | | `save_memory {fact}` | no diff: the fact it adds to `~/.gemini/GEMINI.md` |
//!
//! Unified diffs come from the `similar` crate (three lines of context). What is shown is
//! cleaned and cut by [`tyba_supervisor::broker::text::clean_diff`] (control characters
//! replaced, at most 200 lines then `… N more lines`).
//!
//! Never fail open: when there is no diff to show (the file cannot be read, is not a regular
//! file or not UTF-8 text, is too large, or the edit does not apply — the text to replace is
//! not in the file, or not as many times as the tool requires), the text says so instead, and
//! the ask goes on as before. The file is opened without blocking (`O_NONBLOCK`) and read only
//! when it is a regular file, so a FIFO or a device named by the agent cannot hold the hook
//! until the agent gives up on it (which would let the call through).

use super::input::Agent;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tyba_supervisor::broker::text;

/// The largest file tyba reads to diff against, in bytes.
const MAX_FILE_BYTES: u64 = 8 << 20;
/// How long the diff algorithm may look for the smallest diff before settling for a larger
/// one (`similar`'s deadline).
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// Why no diff can be shown; the person is told this instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoDiff {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file, as the tool named it.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The path names a directory, a FIFO, a device, a socket.
    #[error("{path} is not a regular file")]
    NotFile {
        /// The file, as the tool named it.
        path: String,
    },
    /// The file is larger than tyba reads for a diff.
    #[error("{path} is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge {
        /// The file, as the tool named it.
        path: String,
    },
    /// The file is not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotText {
        /// The file, as the tool named it.
        path: String,
    },
    /// The edit does not apply: the tool would fail (or, for Gemini CLI, look for a near match).
    #[error("the edit does not apply to {path}{which}: {why}")]
    NotApplied {
        /// The file, as the tool named it.
        path: String,
        /// ` (edit N of M)` for one edit of several, else empty.
        which: String,
        /// What does not match.
        why: String,
    },
    /// A tool argument the diff needs is missing or of the wrong type.
    #[error("the tool input has no usable `{0}`")]
    Input(String),
    /// A tool that writes but whose change tyba cannot show.
    #[error("tyba shows no diff for the {agent} tool `{tool}`")]
    Unsupported {
        /// The agent's product name.
        agent: &'static str,
        /// The tool.
        tool: String,
    },
}

/// What the person is shown for one edit call: the unified diff, or why there is none
/// (`tyba could not compute the diff: …`), cleaned and bounded for the terminal, the inbox and
/// the log. `dir` is the directory relative paths are resolved against (the call's
/// directory).
pub fn for_call(agent: Agent, tool: &str, input: &Value, dir: &Path) -> String {
    let shown = match compute(agent, tool, input, dir) {
        Ok(d) if d.is_empty() => "(no change: the file would keep its content)\n".to_string(),
        Ok(d) => d,
        Err(e) => format!("tyba could not compute the diff: {e}\n"),
    };
    text::clean_diff(&shown)
}

/// The raw diff (or stand-in text) for one call.
fn compute(agent: Agent, tool: &str, input: &Value, dir: &Path) -> Result<String, NoDiff> {
    let args = input
        .as_object()
        .ok_or_else(|| NoDiff::Input("tool_input".into()))?;
    match (agent, tool) {
        (Agent::ClaudeCode, "Write") | (Agent::Gemini, "write_file") => {
            let path = string(args, "file_path")?;
            let now = read_current(&resolve(dir, path), path)?;
            Ok(unified(path, now.as_deref(), string(args, "content")?))
        }
        (Agent::ClaudeCode, "Edit") => {
            let path = string(args, "file_path")?;
            let now = read_current(&resolve(dir, path), path)?;
            let edit = Replace::claude(args)?;
            let new = edit.apply(path, now.as_deref(), "")?;
            Ok(unified(path, now.as_deref(), &new))
        }
        (Agent::ClaudeCode, "MultiEdit") => {
            let path = string(args, "file_path")?;
            let now = read_current(&resolve(dir, path), path)?;
            let edits = match args.get("edits") {
                Some(Value::Array(e)) if !e.is_empty() => e,
                _ => return Err(NoDiff::Input("edits".into())),
            };
            let mut text: Option<String> = now.clone();
            for (i, e) in edits.iter().enumerate() {
                let e = e
                    .as_object()
                    .ok_or_else(|| NoDiff::Input(format!("edits[{i}]")))?;
                let which = format!(" (edit {} of {})", i + 1, edits.len());
                text = Some(Replace::claude(e)?.apply(path, text.as_deref(), &which)?);
            }
            let new = text.unwrap_or_default();
            Ok(unified(path, now.as_deref(), &new))
        }
        (Agent::Gemini, "replace") => {
            let path = string(args, "file_path")?;
            let now = read_current(&resolve(dir, path), path)?;
            let new = Replace::gemini(args)?.apply(path, now.as_deref(), "")?;
            Ok(unified(path, now.as_deref(), &new))
        }
        (Agent::Codex, "apply_patch") => Ok(string(args, "command")?.to_string()),
        (Agent::ClaudeCode, "NotebookEdit") => {
            let path = string(args, "notebook_path")?;
            let mode = args
                .get("edit_mode")
                .and_then(Value::as_str)
                .unwrap_or("replace");
            let cell = args.get("cell_id").and_then(Value::as_str).unwrap_or("?");
            let source = args.get("new_source").and_then(Value::as_str).unwrap_or("");
            Ok(format!(
                "(no diff for a notebook cell: {} {mode}s cell {}; its new source:)\n{}",
                text::clean(path),
                text::clean(cell),
                plus_lines(source)
            ))
        }
        (Agent::Gemini, "save_memory") => Ok(format!(
            "(no diff: save_memory adds this fact to ~/.gemini/GEMINI.md)\n{}",
            plus_lines(string(args, "fact")?)
        )),
        (a, t) => Err(NoDiff::Unsupported {
            agent: a.product(),
            tool: t.to_string(),
        }),
    }
}

fn string<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, NoDiff> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| NoDiff::Input(key.to_string()))
}

/// Each line of `s` marked as added.
fn plus_lines(s: &str) -> String {
    s.lines().map(|l| format!("+{l}\n")).collect()
}

fn resolve(dir: &Path, path: &str) -> PathBuf {
    dir.join(path)
}

/// The file's content now: `None` when it does not exist.
fn read_current(path: &Path, shown: &str) -> Result<Option<String>, NoDiff> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = || shown.to_string();
    let read_err = |source| NoDiff::Read {
        path: shown(),
        source,
    };
    // A first look without opening: opening some devices has effects of its own.
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
        Ok(m) if !m.is_file() => return Err(NoDiff::NotFile { path: shown() }),
        Ok(_) => {}
    }
    // The file may be swapped for a FIFO meanwhile: the open must not wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(NoDiff::NotFile { path: shown() });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(NoDiff::TooLarge { path: shown() });
    }
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(read_err)?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(NoDiff::TooLarge { path: shown() });
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| NoDiff::NotText { path: shown() })
}

/// The unified diff from `old` (`None`: no file) to `new`, headed with the path.
fn unified(path: &str, old: Option<&str>, new: &str) -> String {
    let name = text::clean(path);
    let from = if old.is_some() {
        name.as_str()
    } else {
        "/dev/null"
    };
    similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old.unwrap_or(""), new)
        .unified_diff()
        .context_radius(3)
        .header(from, &name)
        .to_string()
}

/// How many times the text to replace must be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    /// Once (Claude Code without `replace_all`); the first is replaced.
    Unique,
    /// At least once, every one replaced (`replace_all`, Gemini `allow_multiple`).
    All,
    /// Exactly this many, every one replaced (Gemini `expected_replacements`).
    Exactly(usize),
}

/// One text replacement, as an edit tool makes it.
#[derive(Debug)]
struct Replace<'a> {
    old: &'a str,
    new: &'a str,
    count: Count,
    /// Gemini CLI looks for a near match when the exact text is not there.
    near_match: bool,
}

impl<'a> Replace<'a> {
    /// Claude Code `Edit` and each `MultiEdit` edit.
    fn claude(args: &'a Map<String, Value>) -> Result<Self, NoDiff> {
        let all = match args.get("replace_all") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(NoDiff::Input("replace_all".into())),
        };
        Ok(Replace {
            old: string(args, "old_string")?,
            new: string(args, "new_string")?,
            count: if all { Count::All } else { Count::Unique },
            near_match: false,
        })
    }

    /// Gemini CLI `replace`: `allow_multiple` replaces every occurrence; otherwise exactly
    /// `expected_replacements` (default 1) must be found.
    fn gemini(args: &'a Map<String, Value>) -> Result<Self, NoDiff> {
        let all = match args.get("allow_multiple") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(NoDiff::Input("allow_multiple".into())),
        };
        let expected = match args.get("expected_replacements") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| NoDiff::Input("expected_replacements".into()))?,
        };
        Ok(Replace {
            old: string(args, "old_string")?,
            new: string(args, "new_string")?,
            count: if all {
                Count::All
            } else {
                Count::Exactly(expected)
            },
            near_match: true,
        })
    }

    /// The text after the replacement; `now` is `None` for a file that does not exist (an
    /// empty text to replace then creates it).
    fn apply(&self, path: &str, now: Option<&str>, which: &str) -> Result<String, NoDiff> {
        let fail = |why: String| NoDiff::NotApplied {
            path: path.to_string(),
            which: which.to_string(),
            why,
        };
        let Some(now) = now else {
            return if self.old.is_empty() {
                Ok(self.new.to_string())
            } else {
                Err(fail("the file does not exist".into()))
            };
        };
        if self.old.is_empty() {
            return if now.is_empty() {
                Ok(self.new.to_string())
            } else {
                Err(fail(
                    "the text to replace is empty, which only creates a file, and the file exists"
                        .into(),
                ))
            };
        }
        let found = now.matches(self.old).count();
        let near = if self.near_match {
            " (Gemini CLI may still look for a near match and change that)"
        } else {
            ""
        };
        match self.count {
            _ if found == 0 => Err(fail(format!("the text to replace is not in it{near}"))),
            Count::Unique if found > 1 => Err(fail(format!(
                "the text to replace is in it {found} times and `replace_all` is not set"
            ))),
            Count::Unique => Ok(now.replacen(self.old, self.new, 1)),
            Count::Exactly(n) if found != n => Err(fail(format!(
                "the text to replace is in it {found} times, {n} expected{near}"
            ))),
            Count::Exactly(_) | Count::All => Ok(now.replace(self.old, self.new)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir_with(name: &str, content: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(name), content).unwrap();
        d
    }

    #[test]
    fn claude_write_of_a_new_file_is_a_diff_from_dev_null() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("src/new.txt");
        let input = json!({"file_path": path, "content": "hello\nworld\n"});
        let shown = for_call(Agent::ClaudeCode, "Write", &input, d.path());
        let p = path.display();
        assert_eq!(
            shown,
            format!("--- /dev/null\n+++ {p}\n@@ -0,0 +1,2 @@\n+hello\n+world\n")
        );
    }

    #[test]
    fn claude_write_over_a_file_shows_what_changes() {
        let d = dir_with("a.txt", "one\ntwo\nthree\n");
        let input = json!({"file_path": "a.txt", "content": "one\n2\nthree\n"});
        let shown = for_call(Agent::ClaudeCode, "Write", &input, d.path());
        assert_eq!(
            shown,
            "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
        );
        let same = json!({"file_path": "a.txt", "content": "one\ntwo\nthree\n"});
        assert_eq!(
            for_call(Agent::ClaudeCode, "Write", &same, d.path()),
            "(no change: the file would keep its content)\n"
        );
    }

    #[test]
    fn claude_edit_replaces_once_or_all_and_says_when_it_does_not_apply() {
        let d = dir_with("m.rs", "let a = 1;\nlet b = 1;\n");
        let edit = |old: &str, new: &str, all: bool| {
            let input = json!({"file_path": "m.rs", "old_string": old, "new_string": new, "replace_all": all});
            for_call(Agent::ClaudeCode, "Edit", &input, d.path())
        };
        assert_eq!(
            edit("let a", "let x", false),
            "--- m.rs\n+++ m.rs\n@@ -1,2 +1,2 @@\n-let a = 1;\n+let x = 1;\n let b = 1;\n"
        );
        assert_eq!(
            edit("= 1", "= 2", true),
            "--- m.rs\n+++ m.rs\n@@ -1,2 +1,2 @@\n-let a = 1;\n-let b = 1;\n+let a = 2;\n+let b = 2;\n"
        );
        assert_eq!(
            edit("= 1", "= 2", false),
            "tyba could not compute the diff: the edit does not apply to m.rs: the text to replace is in it 2 times and `replace_all` is not set\n"
        );
        assert_eq!(
            edit("let z", "let y", false),
            "tyba could not compute the diff: the edit does not apply to m.rs: the text to replace is not in it\n"
        );
        let missing = json!({"file_path": "gone.rs", "old_string": "a", "new_string": "b"});
        assert!(for_call(Agent::ClaudeCode, "Edit", &missing, d.path())
            .contains("does not apply to gone.rs: the file does not exist"),);
        // An empty text to replace creates a file that is not there.
        let create =
            json!({"file_path": "new.rs", "old_string": "", "new_string": "fn main() {}\n"});
        assert_eq!(
            for_call(Agent::ClaudeCode, "Edit", &create, d.path()),
            "--- /dev/null\n+++ new.rs\n@@ -0,0 +1 @@\n+fn main() {}\n"
        );
    }

    #[test]
    fn claude_multiedit_applies_edits_in_turn_and_names_the_one_that_fails() {
        let d = dir_with("c.txt", "alpha\nbeta\n");
        let input = json!({"file_path": "c.txt", "edits": [
            {"old_string": "alpha", "new_string": "gamma"},
            {"old_string": "gamma\nbeta", "new_string": "gamma\ndelta"}
        ]});
        assert_eq!(
            for_call(Agent::ClaudeCode, "MultiEdit", &input, d.path()),
            "--- c.txt\n+++ c.txt\n@@ -1,2 +1,2 @@\n-alpha\n-beta\n+gamma\n+delta\n"
        );
        let input = json!({"file_path": "c.txt", "edits": [
            {"old_string": "alpha", "new_string": "gamma"},
            {"old_string": "alpha", "new_string": "x"}
        ]});
        assert_eq!(
            for_call(Agent::ClaudeCode, "MultiEdit", &input, d.path()),
            "tyba could not compute the diff: the edit does not apply to c.txt (edit 2 of 2): the text to replace is not in it\n"
        );
    }

    #[test]
    fn codex_apply_patch_is_shown_as_the_patch() {
        let d = tempfile::tempdir().unwrap();
        let patch = "*** Begin Patch\n*** Update File: a.rs\n@@\n-old\n+new\n*** End Patch\n";
        let input = json!({ "command": patch });
        assert_eq!(
            for_call(Agent::Codex, "apply_patch", &input, d.path()),
            patch
        );
    }

    #[test]
    fn gemini_write_and_replace_follow_the_tools_rules() {
        let d = dir_with("g.txt", "x x\ny\n");
        let write = json!({"file_path": "g.txt", "content": "y\n"});
        assert_eq!(
            for_call(Agent::Gemini, "write_file", &write, d.path()),
            "--- g.txt\n+++ g.txt\n@@ -1,2 +1 @@\n-x x\n y\n"
        );
        let replace = |extra: Value| {
            let mut input = json!({"file_path": "g.txt", "old_string": "x", "new_string": "z", "instruction": "rename"});
            for (k, v) in extra.as_object().unwrap() {
                input[k] = v.clone();
            }
            for_call(Agent::Gemini, "replace", &input, d.path())
        };
        assert!(
            replace(json!({})).contains("the text to replace is in it 2 times, 1 expected"),
            "{}",
            replace(json!({}))
        );
        let both = "--- g.txt\n+++ g.txt\n@@ -1,2 +1,2 @@\n-x x\n+z z\n y\n";
        assert_eq!(replace(json!({"expected_replacements": 2})), both);
        assert_eq!(replace(json!({"allow_multiple": true})), both);
        let absent = json!({"file_path": "g.txt", "old_string": "q", "new_string": "z"});
        assert!(for_call(Agent::Gemini, "replace", &absent, d.path())
            .contains("not in it (Gemini CLI may still look for a near match"));
    }

    #[test]
    fn an_unreadable_or_special_file_is_said_not_shown() {
        let d = dir_with("bin", "");
        std::fs::write(d.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        let write = |p: &str| {
            let input = json!({"file_path": p, "content": "x\n"});
            for_call(Agent::ClaudeCode, "Write", &input, d.path())
        };
        assert_eq!(
            write("bin"),
            "tyba could not compute the diff: bin is not UTF-8 text\n"
        );
        assert!(
            write("bin/x").starts_with("tyba could not compute the diff: cannot read bin/x: "),
            "{}",
            write("bin/x")
        );
        assert_eq!(
            write("."),
            "tyba could not compute the diff: . is not a regular file\n"
        );
        assert_eq!(
            write("/dev/zero"),
            "tyba could not compute the diff: /dev/zero is not a regular file\n"
        );
        // A FIFO with no writer: answered at once, never waited on.
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert_eq!(
            write("fifo"),
            "tyba could not compute the diff: fifo is not a regular file\n"
        );
        let big = d.path().join("big");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(
            write("big").contains("big is larger than"),
            "{}",
            write("big")
        );
        let input = json!({"file_path": "x", "new_source": "a"});
        assert!(
            for_call(Agent::ClaudeCode, "NotebookEdit", &input, d.path())
                .contains("tool input has no usable `notebook_path`")
        );
    }

    #[test]
    fn control_characters_never_reach_the_person_and_the_size_is_bounded() {
        let d = tempfile::tempdir().unwrap();
        let content: String = (0..500).map(|n| format!("\x1b[31mline {n}\r\n")).collect();
        let input = json!({"file_path": "evil\n+++ fake\x1b[2J", "content": content});
        let shown = for_call(Agent::ClaudeCode, "Write", &input, d.path());
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\n'),
            "{shown}"
        );
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "--- /dev/null");
        assert_eq!(lines[1], "+++ evil?+++ fake?[2J", "the path stays one line");
        assert_eq!(lines.len(), 201);
        assert_eq!(lines[200], "… 303 more lines");
        assert!(lines[3].starts_with("+?[31mline 0?"), "{}", lines[3]);
    }

    #[test]
    fn a_tool_without_a_diff_says_so_or_shows_what_it_adds() {
        let d = tempfile::tempdir().unwrap();
        let memory = json!({"fact": "likes tabs"});
        assert_eq!(
            for_call(Agent::Gemini, "save_memory", &memory, d.path()),
            "(no diff: save_memory adds this fact to ~/.gemini/GEMINI.md)\n+likes tabs\n"
        );
        let cell = json!({"notebook_path": "n.ipynb", "cell_id": "c1", "new_source": "print(1)", "edit_mode": "insert"});
        assert_eq!(
            for_call(Agent::ClaudeCode, "NotebookEdit", &cell, d.path()),
            "(no diff for a notebook cell: n.ipynb inserts cell c1; its new source:)\n+print(1)\n"
        );
        assert_eq!(
            for_call(Agent::Codex, "Bash", &json!({"command": "ls"}), d.path()),
            "tyba could not compute the diff: tyba shows no diff for the Codex tool `Bash`\n"
        );
    }
}
