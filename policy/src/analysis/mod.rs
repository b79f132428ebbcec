//! The analyser: walks the bash syntax tree of a command line, expands words statically,
//! tracks the directories and variables the line may be in, and applies the command rules.

mod alternatives;
mod assignments;
mod bindings;
mod commands;
mod context;
mod effects;
mod git_exec;
mod grammar_gaps;
mod housekeeping;
mod links;
mod literal;
pub(crate) mod paths;
mod redirect;
mod registry;
mod state;
mod syntax;
mod walk;
mod words;

use crate::action::{Action, Context};
use crate::config::RuleSpec;
use crate::verdict::{Classification, Finding, Verdict};
use crate::Policy;
use paths::Access;
use std::path::PathBuf;

pub(crate) use literal::literal_commands;

pub(crate) use assignments::moves_config;
pub(crate) use commands::SYSTEM_BIN_DIRS;
pub(crate) use commands::{is_exec_assignment, is_exec_var};
pub(crate) use registry::SHELLS;
use state::union_vec;
pub(crate) use state::{State, Stdin};
use syntax::{nesting, parse};
use words::VarValues;

/// Nesting (`bash -c` in `bash -c`, substitutions in substitutions) beyond which a line is not
/// analysed further: it is then red and opaque (stricter, never more permissive).
const MAX_DEPTH: usize = 24;

/// Classifies one action.
pub(crate) fn classify(policy: &Policy, action: &Action, ctx: &Context<'_>) -> Classification {
    if let Action::Exec { command } = action {
        if nesting(command) > SMALL_STACK_NESTING {
            // Deeply nested lines recurse deeply in the grammar and the walk: give them a large
            // stack of their own rather than risk the caller's (a stack overflow aborts, and an
            // aborted hook would let the action through).
            let run = || classify_on_this_stack(policy, action, ctx);
            return std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(DEEP_STACK_BYTES)
                    .spawn_scoped(s, run)
                    .ok()
                    .and_then(|h| h.join().ok())
            })
            .unwrap_or_else(|| {
                let mut c = Classification::green();
                c.shape.opaque = true;
                c.add(Finding::new(
                    Verdict::Blocked,
                    "shell.too-deep",
                    "the line could not be analysed; split it",
                ));
                c
            });
        }
    }
    classify_on_this_stack(policy, action, ctx)
}

/// Analysis work (commands × the directories each may run in) after which a line is refused
/// as too complex: a bound on time that fails closed.
const MAX_WORK: usize = 30_000;

/// Paths listed in a classification's report.
const MAX_REPORTED_PATHS: usize = 64;

/// Nesting below which the caller's stack is enough (measured: a debug build at 1 MiB overflows
/// near 60 levels).
const SMALL_STACK_NESTING: usize = 12;
/// Stack for deeply nested lines (reserved, committed only as used).
const DEEP_STACK_BYTES: usize = 512 << 20;

fn classify_on_this_stack(policy: &Policy, action: &Action, ctx: &Context<'_>) -> Classification {
    // The disk as this classification finds it, each path looked at once (`paths::seen`).
    let _seen = paths::seen::Seen::start();
    let mut a = Analyzer::new(policy, ctx);
    match action {
        Action::Exec { command } => {
            let st = State::new(ctx.cwd);
            a.line(command, st, 0);
            a.out.inner_command = a.inner_command(command);
        }
        Action::Write { paths } | Action::ApplyPatch { paths } => {
            a.tool_paths(paths, Access::Write)
        }
        Action::Read { paths } => a.tool_paths(paths, Access::Read),
        Action::Fetch { url } => {
            a.out.hosts.push(
                commands::host_of(url)
                    .unwrap_or_else(|| crate::redact::redact_url(url).into_owned()),
            );
            a.add(
                Verdict::Red,
                "net.fetch",
                format!(
                    "the web tool reaches the network ({})",
                    crate::redact::redact_url(url)
                ),
            );
        }
    }
    a.finish()
}

/// Checks a policy-file rule when it loads: not green, a program name, no green-list
/// program, and its examples match it (and its counter-examples do not).
pub(crate) fn validate_rule(r: &RuleSpec) -> Result<(), String> {
    if r.verdict == Verdict::Green {
        return Err("a policy file cannot add to the green list".to_string());
    }
    if r.program.is_empty() || r.program.contains('/') || r.program.contains(char::is_whitespace) {
        return Err(format!(
            "`program` must be a bare program name, got `{}`",
            r.program
        ));
    }
    if registry::is_green_program(&r.program) {
        return Err(format!(
            "`{}` is on the green list; a policy file cannot make a green command ask",
            r.program
        ));
    }
    if r.reason.trim().is_empty() {
        return Err("`reason` must say why".to_string());
    }
    let single = Policy::with_rules_only(vec![r.clone()]);
    let dir = std::env::temp_dir();
    let ctx = Context {
        worktree: &dir,
        cwd: &dir,
        home: None,
        scratch: None,
        git: None,
    };
    let rule_id = format!("policy.{}", r.id);
    for ex in &r.examples {
        let c = single.classify(
            &Action::Exec {
                command: ex.clone(),
            },
            &ctx,
        );
        if !c.findings.iter().any(|f| f.rule == rule_id) {
            return Err(format!("example `{ex}` does not match the rule"));
        }
    }
    for ex in &r.not_examples {
        let c = single.classify(
            &Action::Exec {
                command: ex.clone(),
            },
            &ctx,
        );
        if c.findings.iter().any(|f| f.rule == rule_id) {
            return Err(format!("counter-example `{ex}` matches the rule"));
        }
    }
    Ok(())
}

pub(crate) struct Analyzer<'p> {
    policy: &'p Policy,
    ctx: &'p Context<'p>,
    opened: std::cell::OnceCell<Vec<PathBuf>>,
    pre_push: std::cell::OnceCell<Option<PathBuf>>,
    /// The pre-push hook's place, computed when a rule first needs it.
    hook: std::cell::OnceCell<paths::HookPlace>,
    /// The worktree's path as normal text, computed when a rule first needs it.
    worktree_text: std::cell::OnceCell<Option<&'p str>>,
    pub out: Classification,
    /// Source text of the lines being analysed, innermost last, with their depth.
    sources: Vec<(String, usize)>,
    /// Nesting of arithmetic evaluation through variable values.
    arith_depth: usize,
    /// Commands analysed so far, weighted by the directories they may run in.
    work: usize,
    /// Functions defined on the line and the names each calls, with whether the call runs in
    /// a process of its own (`syntax::called_names`).
    spawns: Vec<(String, Vec<(String, bool)>)>,
    /// A `git -c core.hooksPath=…`/`hook.*` override seen, to judge with its subcommand.
    pub(crate) hook_override: bool,
    /// A `-c` key of the same git invocation whose value git runs may push (its value names
    /// a push, or cannot be known): with the hooks path switched off, that push skips the
    /// guard.
    pub(crate) config_code_may_push: bool,
    /// A command earlier on the line may have switched the repository's current branch
    /// (`git checkout BRANCH`, `switch`, `symbolic-ref HEAD`…): the inspector's view of
    /// `HEAD` is then stale for a later push.
    pub(crate) head_moved: bool,
    /// The literal text the previous stage of the pipeline being analysed writes (`echo
    /// 'LINE' | …`), when it can be known.
    pub(crate) piped_script: Option<String>,
    /// Whether the output of the command being analysed goes into a pipe (it is not the
    /// last stage of a pipeline, or its pipeline's output does).
    pub(crate) stdout_piped: bool,
    /// What the last `find`/`fd` analysed with its output piped prints of the pre-push
    /// hook's tree: the nodes its tests may select (`commands::guard_tree`).
    pub(crate) selection: Option<Vec<commands::HookNode>>,
    /// What the stdin of the pipeline stage being analysed carries of a selection: the
    /// previous stage's [`Self::selection`], through filters that only drop or reorder lines
    /// (`grep`, `sort`, `head`…). `xargs` runs its command on each node of it.
    pub(crate) piped_selection: Option<Vec<commands::HookNode>>,
    /// The literal text the command being analysed reads on stdin: the pipe's
    /// ([`Self::piped_script`]) or its own here-string or here-document's.
    pub(crate) fed_script: Option<String>,
    /// Functions defined on the line and their bodies' text, for calls that pass arguments.
    pub(crate) function_bodies: Vec<(String, String)>,
    /// Functions whose call is being analysed with its arguments (no recursion).
    pub(crate) calling: Vec<String>,
    /// Whether the commands of the line being analysed read a fed stdin (`x | bash -c '…'`).
    fed: Vec<bool>,
    /// Trap bodies set and not yet analysed with the state the shell exits in.
    traps: Vec<String>,
    /// A command used a name a sourced definitions file defines.
    shadowed_use: bool,
    /// Sourced definitions being analysed at their use (against recursion).
    expanding: Vec<String>,
    /// Links the commands analysed so far make (`links::made_by`): kept for the whole line,
    /// since a link made in a subshell or a substitution stays on the disk after it.
    pub(crate) links: Vec<paths::Link>,
    /// Targets of links made at places that cannot be known (`links::Made::unplaced`).
    pub(crate) unplaced_links: Vec<Option<String>>,
    /// Lines parsed so far, by their text ([`Analyzer::parsed`]).
    parses: std::cell::RefCell<Vec<(String, std::rc::Rc<syntax::Parsed>)>>,
}

impl<'p> Analyzer<'p> {
    fn new(policy: &'p Policy, ctx: &'p Context<'p>) -> Self {
        Analyzer {
            policy,
            ctx,
            opened: std::cell::OnceCell::new(),
            pre_push: std::cell::OnceCell::new(),
            hook: std::cell::OnceCell::new(),
            worktree_text: std::cell::OnceCell::new(),
            out: Classification::green(),
            sources: Vec::new(),
            arith_depth: 0,
            work: 0,
            spawns: Vec::new(),
            hook_override: false,
            config_code_may_push: false,
            head_moved: false,
            piped_script: None,
            stdout_piped: false,
            selection: None,
            piped_selection: None,
            fed_script: None,
            function_bodies: Vec::new(),
            calling: Vec::new(),
            fed: Vec::new(),
            traps: Vec::new(),
            shadowed_use: false,
            expanding: Vec::new(),
            links: Vec::new(),
            unplaced_links: Vec::new(),
            parses: std::cell::RefCell::new(Vec::new()),
        }
    }
}

impl Analyzer<'_> {
    fn finish(self) -> Classification {
        self.out
    }
}

impl Policy {
    /// A policy holding only these rules (for checking a rule's examples when it loads).
    pub(crate) fn with_rules_only(rules: Vec<RuleSpec>) -> Policy {
        let mut p = Policy::bare();
        p.set_rules(rules);
        p
    }
}
