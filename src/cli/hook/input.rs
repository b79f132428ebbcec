//! The agents' hook inputs: the JSON each agent writes on the hook's stdin, checked field by
//! field and turned into the tool call tyba classifies.
//!
//! Everything not understood is an error, and every error becomes a refusal (fail closed): an
//! unknown tool, a field tyba does not know (in the call or in the tool's arguments: a new
//! field may change what the tool does, e.g. the directory a command runs in), a missing or
//! mistyped field. The field lists are those of the versions recorded in `docs/agents.md`.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use tyba_policy::Action;

/// The agents whose hook protocols tyba answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code `PreToolUse` hooks.
    #[value(name = "claude-code")]
    ClaudeCode,
    /// Codex CLI `PreToolUse` hooks.
    Codex,
    /// Gemini CLI `BeforeTool` hooks.
    Gemini,
}

impl Agent {
    /// The agent's product name, for messages.
    pub fn product(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
        }
    }

    /// The name on tyba's command line (`tyba hook <name>`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }

    /// The hook event tyba answers for this agent.
    pub fn event(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex => "PreToolUse",
            Agent::Gemini => "BeforeTool",
        }
    }

    /// Top-level fields tyba knows besides the four it reads (`cwd`, `hook_event_name`,
    /// `tool_name`, `tool_input`); their values do not change what the tool does.
    fn metadata_fields(self) -> &'static [&'static str] {
        match self {
            // Claude Code 2.1.332 (recorded here, see docs/agents-offline notes) and the hooks
            // reference's common input fields (2.1.3xx: `scratchpad_dir`); subagent calls add
            // agent_id/agent_type.
            Agent::ClaudeCode => &[
                "session_id",
                "transcript_path",
                "permission_mode",
                "tool_use_id",
                "prompt_id",
                "effort",
                "agent_id",
                "agent_type",
                "scratchpad_dir",
            ],
            // codex-rs/hooks PreToolUseCommandInput.
            Agent::Codex => &[
                "session_id",
                "turn_id",
                "transcript_path",
                "model",
                "permission_mode",
                "tool_use_id",
                "agent_id",
                "agent_type",
            ],
            // gemini-cli docs/hooks/reference.md: base input and BeforeTool fields.
            Agent::Gemini => &[
                "session_id",
                "transcript_path",
                "timestamp",
                "mcp_context",
                "original_request_name",
            ],
        }
    }
}

/// Why a hook input could not be understood; each one is answered with a refusal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The input is not UTF-8.
    #[error("the hook input is not UTF-8 text")]
    Utf8,
    /// The input is not JSON (malformed or truncated).
    #[error("the hook input is not valid JSON ({0})")]
    Json(#[source] serde_json::Error),
    /// The input is JSON but not an object.
    #[error("the hook input is not a JSON object")]
    NotObject,
    /// A field tyba needs is absent.
    #[error("the hook input has no `{0}` field")]
    Missing(String),
    /// A field has the wrong JSON type.
    #[error("the hook input field `{field}` is not {expected}")]
    Type {
        /// Dotted field name.
        field: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A top-level field tyba does not know.
    #[error(
        "unknown field `{field}` in the {agent} hook input; tyba knows the fields of the versions listed in docs/agents.md (update tyba)"
    )]
    UnknownField {
        /// The agent's product name.
        agent: &'static str,
        /// The field.
        field: String,
    },
    /// The hook was installed for another event.
    #[error("tyba answers {agent} `{expected}` hooks, not `{got}`")]
    Event {
        /// The agent's product name.
        agent: &'static str,
        /// The event tyba answers.
        expected: &'static str,
        /// The event in the input.
        got: String,
    },
    /// `cwd` is not absolute.
    #[error("the hook input `cwd` is not an absolute path: {0}")]
    Cwd(String),
    /// A tool tyba does not know.
    #[error("unknown {agent} tool `{tool}`: tyba cannot tell what it does")]
    UnknownTool {
        /// The agent's product name.
        agent: &'static str,
        /// The tool name.
        tool: String,
    },
    /// An argument of a known tool that tyba does not know.
    #[error(
        "unknown argument `{field}` of the {agent} tool `{tool}`: tyba cannot tell what the call does"
    )]
    UnknownToolField {
        /// The agent's product name.
        agent: &'static str,
        /// The tool name.
        tool: String,
        /// The argument.
        field: String,
    },
    /// An `apply_patch` whose text names no file.
    #[error("the patch names no file (no `*** Add File:`, `*** Update File:` or `*** Delete File:` line)")]
    EmptyPatch,
    /// A command given as an empty argument list.
    #[error("the command is an empty argument list")]
    EmptyArgv,
}

/// What a tool call asks for, in tyba's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// An action the colour policy classifies.
    Act(Action),
    /// A tool acting only on the agent's own state (plans, to-do lists, questions to the
    /// person, subagents whose own tool calls are hooked in turn): allowed.
    Internal,
    /// A tool tyba cannot see into (MCP servers): unknown to the policy, so yellow.
    Opaque,
    /// A tool tyba does not know at all (only from [`parse_lenient`]): asked inside a
    /// session with the raw input shown, never allowed by itself.
    Unknown,
}

/// What a hook input held that tyba does not know, found by [`parse_lenient`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unknowns {
    /// Unknown fields, in input order: top-level names (`sandbox`) and tool arguments
    /// (`tool_input.cwd`).
    pub fields: Vec<String>,
    /// The tool's name when the tool itself is unknown.
    pub tool: Option<String>,
}

impl Unknowns {
    /// Whether the input held nothing unknown.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.tool.is_none()
    }
}

impl InputError {
    /// Whether the input failed only for holding a field or tool tyba does not know (inside
    /// a session such an input is asked with its raw text; anything else is refused).
    pub fn is_unknown(&self) -> bool {
        matches!(
            self,
            InputError::UnknownField { .. }
                | InputError::UnknownTool { .. }
                | InputError::UnknownToolField { .. }
        )
    }
}

/// One tool call, understood.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tool's name as the agent sent it.
    pub tool: String,
    /// The agent's working directory (`cwd` of the input), absolute.
    pub cwd: PathBuf,
    /// The directory the action runs in: `cwd`, or the directory the tool names
    /// (Gemini `dir_path`, Codex `workdir`) resolved against it.
    pub action_cwd: PathBuf,
    /// What it asks for.
    pub what: What,
    /// The tool's arguments, for a person who is asked about an opaque tool.
    pub input: Value,
}

/// Parses one hook input of `agent`.
///
/// # Errors
/// Any [`InputError`]: the caller refuses the call with its text.
pub fn parse(agent: Agent, bytes: &[u8]) -> Result<Call, InputError> {
    parse_with(agent, bytes, false).map(|(call, _)| call)
}

/// Parses one hook input of `agent` like [`parse`], but collects unknown fields and an
/// unknown tool instead of failing on them (the tool then maps to [`What::Unknown`], and a
/// known tool ignores its unknown arguments). Every other error is still an error.
///
/// # Errors
/// Any [`InputError`] but the unknown ones.
pub fn parse_lenient(agent: Agent, bytes: &[u8]) -> Result<(Call, Unknowns), InputError> {
    parse_with(agent, bytes, true)
}

fn parse_with(agent: Agent, bytes: &[u8], lenient: bool) -> Result<(Call, Unknowns), InputError> {
    let mut unknowns = Unknowns::default();
    let text = std::str::from_utf8(bytes).map_err(|_| InputError::Utf8)?;
    let value: Value = serde_json::from_str(text).map_err(InputError::Json)?;
    let obj = value.as_object().ok_or(InputError::NotObject)?;
    const READ: [&str; 4] = ["cwd", "hook_event_name", "tool_name", "tool_input"];
    for key in obj.keys() {
        if !READ.contains(&key.as_str()) && !agent.metadata_fields().contains(&key.as_str()) {
            if lenient {
                unknowns.fields.push(key.clone());
                continue;
            }
            return Err(InputError::UnknownField {
                agent: agent.product(),
                field: key.clone(),
            });
        }
    }
    let event = str_field(obj, "hook_event_name", "")?;
    if event != agent.event() {
        return Err(InputError::Event {
            agent: agent.product(),
            expected: agent.event(),
            got: event.to_string(),
        });
    }
    let cwd = str_field(obj, "cwd", "")?;
    if !Path::new(cwd).is_absolute() {
        return Err(InputError::Cwd(cwd.to_string()));
    }
    let cwd = PathBuf::from(cwd);
    let tool = str_field(obj, "tool_name", "")?.to_string();
    let input = obj
        .get("tool_input")
        .ok_or_else(|| InputError::Missing("tool_input".into()))?;
    let args = input.as_object().ok_or(InputError::Type {
        field: "tool_input".into(),
        expected: "an object",
    })?;
    let t = Tool {
        agent,
        name: &tool,
        args,
        lenient,
        unknown: std::cell::RefCell::new(Vec::new()),
    };
    let (what, dir) = match agent {
        Agent::ClaudeCode => claude_code(&t)?,
        Agent::Codex => codex(&t)?,
        Agent::Gemini => gemini(&t)?,
    };
    let action_cwd = match dir {
        Some(d) => cwd.join(d),
        None => cwd.clone(),
    };
    unknowns.fields.extend(t.unknown.take());
    if what == What::Unknown {
        unknowns.tool = Some(tool.clone());
    }
    Ok((
        Call {
            tool: tool.clone(),
            cwd,
            action_cwd,
            what,
            input: input.clone(),
        },
        unknowns,
    ))
}

/// A tool call's name and arguments, for the per-agent mappings.
struct Tool<'a> {
    agent: Agent,
    name: &'a str,
    args: &'a Map<String, Value>,
    /// Collect unknown arguments and tools instead of failing ([`parse_lenient`]).
    lenient: bool,
    unknown: std::cell::RefCell<Vec<String>>,
}

impl Tool<'_> {
    /// Checks that every argument is one of `known`.
    fn only(&self, known: &[&str]) -> Result<(), InputError> {
        if self.lenient {
            let mut u = self.unknown.borrow_mut();
            for k in self.args.keys().filter(|k| !known.contains(&k.as_str())) {
                u.push(format!("tool_input.{k}"));
            }
            return Ok(());
        }
        match self.args.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(InputError::UnknownToolField {
                agent: self.agent.product(),
                tool: self.name.to_string(),
                field: k.clone(),
            }),
            None => Ok(()),
        }
    }

    fn str(&self, key: &str) -> Result<String, InputError> {
        str_field(self.args, key, "tool_input.").map(str::to_string)
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, InputError> {
        match self.args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(InputError::Type {
                field: format!("tool_input.{key}"),
                expected: "a string",
            }),
        }
    }

    /// The first present string argument among `keys` (renamed arguments across versions).
    fn one_of(&self, keys: &[&str]) -> Result<String, InputError> {
        for k in keys {
            if let Some(s) = self.opt_str(k)? {
                return Ok(s);
            }
        }
        Err(InputError::Missing(format!(
            "tool_input.{}",
            keys.join("|")
        )))
    }

    /// A tool tyba does not know: an error, or [`What::Unknown`] when lenient.
    fn unknown(&self) -> Result<Mapped, InputError> {
        if self.lenient {
            return Ok((What::Unknown, None));
        }
        Err(InputError::UnknownTool {
            agent: self.agent.product(),
            tool: self.name.to_string(),
        })
    }
}

fn str_field<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<&'v str, InputError> {
    match obj.get(key) {
        None => Err(InputError::Missing(format!("{prefix}{key}"))),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(InputError::Type {
            field: format!("{prefix}{key}"),
            expected: "a string",
        }),
    }
}

type Mapped = (What, Option<String>);

fn act(a: Action) -> Result<Mapped, InputError> {
    Ok((What::Act(a), None))
}

/// Claude Code tools (hooks reference, "PreToolUse input"; tool inputs of Claude Code 2.1).
fn claude_code(t: &Tool<'_>) -> Result<Mapped, InputError> {
    match t.name {
        "Bash" => {
            t.only(&[
                "command",
                "description",
                "timeout",
                "run_in_background",
                "dangerouslyDisableSandbox",
            ])?;
            act(Action::Exec {
                command: t.str("command")?,
            })
        }
        "Write" => {
            t.only(&["file_path", "content"])?;
            act(Action::Write {
                paths: vec![t.str("file_path")?],
            })
        }
        "Edit" => {
            t.only(&["file_path", "old_string", "new_string", "replace_all"])?;
            act(Action::Write {
                paths: vec![t.str("file_path")?],
            })
        }
        "MultiEdit" => {
            t.only(&["file_path", "edits"])?;
            act(Action::Write {
                paths: vec![t.str("file_path")?],
            })
        }
        "NotebookEdit" => {
            t.only(&[
                "notebook_path",
                "new_source",
                "cell_id",
                "cell_type",
                "edit_mode",
            ])?;
            act(Action::Write {
                paths: vec![t.str("notebook_path")?],
            })
        }
        "Read" => {
            t.only(&["file_path", "offset", "limit", "pages"])?;
            act(Action::Read {
                paths: vec![t.str("file_path")?],
            })
        }
        "Glob" => {
            t.only(&["pattern", "path"])?;
            act(Action::Read {
                paths: glob_paths(t.opt_str("path")?, &[t.str("pattern")?]),
            })
        }
        "Grep" => {
            t.only(&[
                "pattern",
                "path",
                "glob",
                "type",
                "output_mode",
                "-A",
                "-B",
                "-C",
                "-n",
                "-i",
                "context",
                "head_limit",
                "offset",
                "multiline",
            ])?;
            t.str("pattern")?;
            act(Action::Read {
                paths: vec![t.opt_str("path")?.unwrap_or_else(|| ".".into())],
            })
        }
        "LS" => {
            t.only(&["path", "ignore"])?;
            act(Action::Read {
                paths: vec![t.str("path")?],
            })
        }
        "WebFetch" => {
            t.only(&["url", "prompt"])?;
            act(Action::Fetch { url: t.str("url")? })
        }
        "WebSearch" => {
            t.only(&["query", "allowed_domains", "blocked_domains"])?;
            act(Action::Fetch {
                url: t.str("query")?,
            })
        }
        // The agent's own state: plans, to-do and task lists, questions to the person,
        // scheduled prompts, background shells it started, subagents and skills (whose own
        // tool calls come through this hook in turn).
        "Agent" | "Task" | "Skill" | "TodoWrite" | "AskUserQuestion" | "EnterPlanMode"
        | "ExitPlanMode" | "TaskCreate" | "TaskUpdate" | "TaskGet" | "TaskList" | "TaskStop"
        | "TaskOutput" | "CronCreate" | "CronDelete" | "CronList" | "BashOutput" | "KillShell"
        | "KillBash" => Ok((What::Internal, None)),
        n if n.starts_with("mcp__")
            || n == "ListMcpResourcesTool"
            || n == "ReadMcpResourceTool" =>
        {
            Ok((What::Opaque, None))
        }
        _ => t.unknown(),
    }
}

/// Codex tools (codex-rs `HookToolName`: `Bash` for every shell-like tool, `apply_patch`,
/// `mcp__server__tool`, other tools under their flat names).
fn codex(t: &Tool<'_>) -> Result<Mapped, InputError> {
    match t.name {
        "Bash" => {
            t.only(&["command", "workdir"])?;
            let command = match t.args.get("command") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(words)) => argv_line(words)?,
                Some(_) => {
                    return Err(InputError::Type {
                        field: "tool_input.command".into(),
                        expected: "a string or an array of strings",
                    })
                }
                None => return Err(InputError::Missing("tool_input.command".into())),
            };
            Ok((Action::Exec { command }.into(), t.opt_str("workdir")?))
        }
        "apply_patch" => {
            t.only(&["command"])?;
            let paths = patch_paths(&t.str("command")?);
            if paths.is_empty() {
                return Err(InputError::EmptyPatch);
            }
            act(Action::ApplyPatch { paths })
        }
        "view_image" => {
            t.only(&["path"])?;
            act(Action::Read {
                paths: vec![t.str("path")?],
            })
        }
        "update_plan" => Ok((What::Internal, None)),
        n if n.starts_with("mcp__") => Ok((What::Opaque, None)),
        _ => t.unknown(),
    }
}

/// Gemini CLI tools (`packages/core/src/tools/definitions/base-declarations.ts`; older
/// argument names `absolute_path`, `path`, `directory` accepted too).
fn gemini(t: &Tool<'_>) -> Result<Mapped, InputError> {
    const FILTERS: [&str; 4] = [
        "respect_git_ignore",
        "respect_gemini_ignore",
        "file_filtering_options",
        "case_sensitive",
    ];
    let with = |base: &[&'static str]| -> Vec<&'static str> {
        base.iter().chain(FILTERS.iter()).copied().collect()
    };
    match t.name {
        "run_shell_command" => {
            // gemini-cli 0.61 `ShellToolParams`: `delay_ms` (how long a background command
            // runs before its output is returned) and `additional_permissions` (a request to
            // widen Gemini's own sandbox, which tyba's does not follow) do not change what
            // runs.
            t.only(&[
                "command",
                "description",
                "dir_path",
                "directory",
                "is_background",
                "delay_ms",
                "additional_permissions",
            ])?;
            let dir = match t.opt_str("dir_path")? {
                Some(d) => Some(d),
                None => t.opt_str("directory")?,
            };
            Ok((
                Action::Exec {
                    command: t.str("command")?,
                }
                .into(),
                dir,
            ))
        }
        "write_file" => {
            t.only(&[
                "file_path",
                "content",
                "modified_by_user",
                "ai_proposed_content",
            ])?;
            act(Action::Write {
                paths: vec![t.str("file_path")?],
            })
        }
        "replace" => {
            t.only(&[
                "file_path",
                "old_string",
                "new_string",
                "instruction",
                "expected_replacements",
                "allow_multiple",
                "modified_by_user",
                "ai_proposed_content",
            ])?;
            act(Action::Write {
                paths: vec![t.str("file_path")?],
            })
        }
        "read_file" => {
            t.only(&[
                "file_path",
                "absolute_path",
                "offset",
                "limit",
                "start_line",
                "end_line",
            ])?;
            act(Action::Read {
                paths: vec![t.one_of(&["file_path", "absolute_path"])?],
            })
        }
        "read_many_files" => {
            t.only(&with(&[
                "include",
                "exclude",
                "paths",
                "recursive",
                "useDefaultExcludes",
            ]))?;
            let mut patterns = string_list(t, "include")?;
            patterns.extend(string_list(t, "paths")?);
            if patterns.is_empty() {
                patterns.push(".".into());
            }
            act(Action::Read {
                paths: glob_paths(None, &patterns),
            })
        }
        "list_directory" => {
            t.only(&with(&["dir_path", "path", "ignore"]))?;
            act(Action::Read {
                paths: vec![t.one_of(&["dir_path", "path"])?],
            })
        }
        "glob" => {
            t.only(&with(&["pattern", "dir_path", "path"]))?;
            let base = match t.opt_str("dir_path")? {
                Some(d) => Some(d),
                None => t.opt_str("path")?,
            };
            act(Action::Read {
                paths: glob_paths(base, &[t.str("pattern")?]),
            })
        }
        "grep_search" | "search_file_content" => {
            t.only(&with(&[
                "pattern",
                "dir_path",
                "path",
                "include",
                "include_pattern",
                "exclude_pattern",
                "names_only",
                "max_matches_per_file",
                "total_max_matches",
                "fixed_strings",
                "context",
                "after",
                "before",
                "no_ignore",
            ]))?;
            t.str("pattern")?;
            let base = match t.opt_str("dir_path")? {
                Some(d) => d,
                None => t.opt_str("path")?.unwrap_or_else(|| ".".into()),
            };
            act(Action::Read { paths: vec![base] })
        }
        "web_fetch" => {
            t.only(&["prompt", "url"])?;
            act(Action::Fetch {
                url: t.one_of(&["url", "prompt"])?,
            })
        }
        "google_web_search" => {
            t.only(&["query"])?;
            act(Action::Fetch {
                url: t.str("query")?,
            })
        }
        // Gemini's memory tool appends to the user's global context file.
        "save_memory" => {
            t.only(&["fact"])?;
            t.str("fact")?;
            act(Action::Write {
                paths: vec!["~/.gemini/GEMINI.md".into()],
            })
        }
        // The agent's own state: to-do lists, questions to the person, plans, topics, skills,
        // its own docs; the background shells it started (listing them, reading their
        // output); subagents, whose own tool calls come through this hook in turn.
        "write_todos"
        | "ask_user"
        | "enter_plan_mode"
        | "exit_plan_mode"
        | "update_topic"
        | "activate_skill"
        | "get_internal_docs"
        | "list_background_processes"
        | "read_background_output"
        | "invoke_agent"
        | "complete_task" => Ok((What::Internal, None)),
        n if n.starts_with("mcp_") => Ok((What::Opaque, None)),
        _ => t.unknown(),
    }
}

impl From<Action> for What {
    fn from(a: Action) -> Self {
        What::Act(a)
    }
}

fn string_list(t: &Tool<'_>, key: &str) -> Result<Vec<String>, InputError> {
    match t.args.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or(InputError::Type {
                    field: format!("tool_input.{key}"),
                    expected: "an array of strings",
                })
            })
            .collect(),
        Some(_) => Err(InputError::Type {
            field: format!("tool_input.{key}"),
            expected: "an array of strings",
        }),
    }
}

/// The paths a glob search reads: the base directory (default `.`) and, for each pattern,
/// its literal leading directory (a pattern may climb out with `..` or be absolute).
fn glob_paths(base: Option<String>, patterns: &[String]) -> Vec<String> {
    let base = base.unwrap_or_else(|| ".".into());
    let mut out = vec![base.clone()];
    for p in patterns {
        let cut = p.find(['*', '?', '[', '{']).unwrap_or(p.len());
        let literal = &p[..cut];
        let dir = if cut == p.len() {
            literal
        } else {
            match literal.rfind('/') {
                Some(i) => &literal[..=i],
                None => continue,
            }
        };
        if dir.is_empty() {
            continue;
        }
        let joined = if dir.starts_with('/') || dir.starts_with('~') {
            dir.to_string()
        } else {
            format!("{}/{dir}", base.trim_end_matches('/'))
        };
        if !out.contains(&joined) {
            out.push(joined);
        }
    }
    out
}

/// An argument vector as one shell command line, each word quoted where needed.
fn argv_line(words: &[Value]) -> Result<String, InputError> {
    if words.is_empty() {
        return Err(InputError::EmptyArgv);
    }
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        let s = w.as_str().ok_or(InputError::Type {
            field: "tool_input.command".into(),
            expected: "a string or an array of strings",
        })?;
        out.push(shell_quote(s));
    }
    Ok(out.join(" "))
}

/// Quotes one word for bash: bare when it holds only safe characters, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The files an `apply_patch` text touches, in order: the paths of its `*** Add File:`,
/// `*** Update File:`, `*** Delete File:` and `*** Move to:` lines (the Codex patch grammar).
pub fn patch_paths(patch: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut out = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        // Codex accepts headers with surrounding whitespace; so do we, to see every path.
        let trimmed = line.trim_start();
        for h in HEADERS {
            if let Some(p) = trimmed.strip_prefix(h) {
                let p = p.trim();
                if !p.is_empty() && !out.iter().any(|o: &String| o == p) {
                    out.push(p.to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn lenient_parsing_collects_what_the_strict_one_refuses() {
        let input = br#"{"cwd":"/w","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"ls","knob":1},"extra":true}"#;
        let e = parse(Agent::Gemini, input).unwrap_err();
        assert!(e.is_unknown(), "{e}");
        let (call, u) = parse_lenient(Agent::Gemini, input).unwrap();
        assert_eq!(u.fields, vec!["extra", "tool_input.knob"]);
        assert!(u.tool.is_none() && !u.is_empty());
        assert_eq!(
            call.what,
            What::Act(Action::Exec {
                command: "ls".into()
            })
        );
        let tool =
            br#"{"cwd":"/w","hook_event_name":"BeforeTool","tool_name":"frob","tool_input":{}}"#;
        let (call, u) = parse_lenient(Agent::Gemini, tool).unwrap();
        assert_eq!(
            (call.what, u.tool.as_deref()),
            (What::Unknown, Some("frob"))
        );
        // Anything but unknown names is still an error.
        let bad =
            br#"{"cwd":"w","hook_event_name":"BeforeTool","tool_name":"frob","tool_input":{}}"#;
        assert!(parse_lenient(Agent::Gemini, bad).is_err());
        let ok = br#"{"cwd":"/w","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"ls"}}"#;
        assert!(parse_lenient(Agent::Gemini, ok).unwrap().1.is_empty());
    }

    #[test]
    fn patch_headers_give_every_path() {
        let p = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.rs\n*** Move to: ../out/c.rs\n@@\n-a\n+b\n*** Delete File: /etc/passwd\n*** End Patch\n";
        assert_eq!(
            patch_paths(p),
            vec!["a.txt", "src/b.rs", "../out/c.rs", "/etc/passwd"]
        );
    }

    #[test]
    fn argv_is_quoted_into_a_line() {
        let words: Vec<Value> = ["bash", "-lc", "rm -rf ~; echo 'x'"]
            .iter()
            .map(|s| Value::String(s.to_string()))
            .collect();
        assert_eq!(
            argv_line(&words).unwrap(),
            r"bash -lc 'rm -rf ~; echo '\''x'\'''"
        );
        assert!(argv_line(&[]).is_err());
    }

    #[test]
    fn glob_climbing_out_names_its_base() {
        assert_eq!(
            glob_paths(None, &["../../etc/*.conf".into(), "src/**/*.rs".into()]),
            vec![".", "./../../etc/", "./src/"]
        );
        assert_eq!(
            glob_paths(Some("/w".into()), &["/etc/**".into(), "*.rs".into()]),
            vec!["/w", "/etc/"]
        );
    }
}
