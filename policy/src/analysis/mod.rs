//! The analyser: walks the bash syntax tree of a command line, expands words statically,
//! tracks the directories and variables the line may be in, and applies the command rules.

mod alternatives;
mod assignments;
mod bindings;
mod commands;
mod effects;
mod git_exec;
mod housekeeping;
mod literal;
pub(crate) mod paths;
mod registry;
mod words;

use crate::action::{Action, Context};
use crate::config::RuleSpec;
use crate::verdict::{Classification, Finding, Verdict};
use crate::Policy;
use brush_parser::ast;
use paths::{Access, PathCtx};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use words::{ExpandEnv, ExpandNotes, Field, VarValues};

pub(crate) use literal::literal_commands;

pub(crate) use commands::is_exec_var;
pub(crate) use commands::SYSTEM_BIN_DIRS;
pub(crate) use registry::SHELLS;

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

/// Where the line may be: every directory it may be in (`None` = unknown), the previous
/// directory for `cd -`, the variables assigned earlier on the line, and defined functions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    pub cwds: Vec<Option<PathBuf>>,
    pub oldpwd: Vec<Option<PathBuf>>,
    pub dirstack: Vec<Vec<Option<PathBuf>>>,
    pub vars: HashMap<String, VarValues>,
    pub functions: Vec<String>,
    /// Functions and aliases from sourced definitions files, analysed where they are used.
    pub defs: Vec<housekeeping::Definition>,
}

impl State {
    fn new(cwd: &Path) -> Self {
        State {
            cwds: vec![Some(cwd.to_path_buf())],
            oldpwd: vec![None],
            dirstack: Vec::new(),
            vars: HashMap::new(),
            functions: Vec::new(),
            defs: Vec::new(),
        }
    }

    /// Moves every working directory into `dir` (a `-C DIR` option): relative to each, or
    /// unknown when the word's value is not known.
    pub(crate) fn enter(&mut self, dir: &Field) {
        self.cwds = match dir.known() {
            Some(d) => self
                .cwds
                .iter()
                .map(|c| c.as_ref().map(|c| paths::resolve(c, &d)))
                .collect(),
            None => vec![None],
        };
    }

    /// Every state either branch may leave (worst case of both).
    fn union(&mut self, other: &State) {
        union_vec(&mut self.cwds, &other.cwds);
        union_vec(&mut self.oldpwd, &other.oldpwd);
        for (k, v) in &other.vars {
            match self.vars.get_mut(k) {
                Some(mine) => union_vec(mine, v),
                None => {
                    let mut vals = v.clone();
                    // The other branch did not assign it: its old value is unknown here.
                    if !vals.contains(&None) {
                        vals.push(None);
                    }
                    self.vars.insert(k.clone(), vals);
                }
            }
        }
        let keys: Vec<String> = self
            .vars
            .keys()
            .filter(|k| !other.vars.contains_key(*k))
            .cloned()
            .collect();
        for k in keys {
            if let Some(v) = self.vars.get_mut(&k) {
                if !v.contains(&None) {
                    v.push(None);
                }
            }
        }
        for f in &other.functions {
            if !self.functions.contains(f) {
                self.functions.push(f.clone());
            }
        }
        for d in &other.defs {
            if !self.defs.contains(d) {
                self.defs.push(d.clone());
            }
        }
        if self.dirstack.len() < other.dirstack.len() {
            self.dirstack = other.dirstack.clone();
        }
    }
}

fn union_vec<T: PartialEq + Eq + std::hash::Hash + Clone>(a: &mut Vec<T>, b: &[T]) {
    if a.len() + b.len() <= 16 {
        for x in b {
            if !a.contains(x) {
                a.push(x.clone());
            }
        }
        return;
    }
    // Long sets (many `cd`s that may fail): hash, so a line of thousands stays linear.
    let mut seen: std::collections::HashSet<T> = a.iter().cloned().collect();
    for x in b {
        if seen.insert(x.clone()) {
            a.push(x.clone());
        }
    }
}

/// Where a command's standard input comes from, for "piped or redirected into a shell".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// The agent's own stdin.
    Inherited,
    /// Another command's output (`a | b`), a file (`< f`), a here-document or here-string.
    Fed,
}

pub(crate) struct Analyzer<'p> {
    policy: &'p Policy,
    ctx: &'p Context<'p>,
    opened: std::cell::OnceCell<Vec<PathBuf>>,
    pre_push: std::cell::OnceCell<Option<PathBuf>>,
    pub out: Classification,
    /// Source text of the lines being analysed, innermost last, with their depth.
    sources: Vec<(String, usize)>,
    /// Nesting of arithmetic evaluation through variable values.
    arith_depth: usize,
    /// Commands analysed so far, weighted by the directories they may run in.
    work: usize,
    /// Functions defined on the line and the names each runs in a pipeline or background.
    spawns: Vec<(String, Vec<String>)>,
    /// A `git -c core.hooksPath=…`/`hook.*` override seen, to judge with its subcommand.
    pub(crate) hook_override: bool,
    /// Whether the commands of the line being analysed read a fed stdin (`x | bash -c '…'`).
    fed: Vec<bool>,
    /// Trap bodies set and not yet analysed with the state the shell exits in.
    traps: Vec<String>,
    /// A command used a name a sourced definitions file defines.
    shadowed_use: bool,
    /// Sourced definitions being analysed at their use (against recursion).
    expanding: Vec<String>,
}

impl<'p> Analyzer<'p> {
    fn new(policy: &'p Policy, ctx: &'p Context<'p>) -> Self {
        Analyzer {
            policy,
            ctx,
            opened: std::cell::OnceCell::new(),
            pre_push: std::cell::OnceCell::new(),
            out: Classification::green(),
            sources: Vec::new(),
            arith_depth: 0,
            work: 0,
            spawns: Vec::new(),
            hook_override: false,
            fed: Vec::new(),
            traps: Vec::new(),
            shadowed_use: false,
            expanding: Vec::new(),
        }
    }
}

impl paths::SessionPaths for Analyzer<'_> {
    /// Paths the policy opens, `~` expanded; computed when a path first leaves the worktree.
    fn opened_paths(&self) -> &[PathBuf] {
        self.opened.get_or_init(|| {
            let ctx = self.ctx;
            let expand = |s: &String| -> Option<PathBuf> {
                if let Some(rest) = s.strip_prefix("~/") {
                    ctx.home.map(|h| h.join(rest))
                } else if s == "~" {
                    ctx.home.map(Path::to_path_buf)
                } else if s.starts_with('/') {
                    Some(PathBuf::from(s))
                } else {
                    None
                }
            };
            let fs = &self.policy.config().filesystem;
            fs.read_write
                .iter()
                .chain(&fs.read_only)
                .filter_map(expand)
                .collect()
        })
    }

    /// The pre-push hook git would run here; asked of the inspector when first needed.
    fn pre_push_path(&self) -> Option<&Path> {
        self.pre_push
            .get_or_init(|| {
                self.ctx
                    .git
                    .and_then(|g| g.pre_push_hook_path(self.ctx.cwd))
            })
            .as_deref()
    }
}

impl Analyzer<'_> {
    fn finish(self) -> Classification {
        self.out
    }

    pub(crate) fn add(&mut self, v: Verdict, rule: &str, reason: impl Into<String>) {
        self.out.add(Finding::new(v, rule, reason));
    }

    fn path_ctx(&self) -> PathCtx<'_> {
        PathCtx {
            worktree: self.ctx.worktree,
            scratch: self.ctx.scratch,
            session: self,
        }
    }

    /// Tool actions: every path, worst wins. Tool paths get `~`, `~user` and `$HOME` handling.
    fn tool_paths(&mut self, paths: &[String], access: Access) {
        if paths.is_empty() {
            self.add(Verdict::Yellow, "tool.no-path", "the tool names no path");
        }
        let st = State::new(self.ctx.cwd);
        for p in paths {
            let fields = self.expand_word(p, &st);
            if fields.is_empty() {
                self.add(
                    Verdict::Yellow,
                    "path.unresolved",
                    format!("`{p}` expands to nothing"),
                );
            }
            for f in fields {
                self.path_field(&st, &f, access);
            }
        }
    }

    /// Expands a raw word in a state; analyses command substitutions found on the way.
    pub(crate) fn expand_word(&mut self, raw: &str, st: &State) -> Vec<Field> {
        let mut all = Vec::new();
        let cwd_known = st.cwds.len() == 1;
        let cwd = if cwd_known {
            st.cwds[0].as_deref()
        } else {
            None
        };
        let oldpwd = if st.oldpwd.len() == 1 {
            st.oldpwd[0].as_deref()
        } else {
            None
        };
        let mut notes = ExpandNotes::default();
        {
            let env = ExpandEnv {
                vars: &st.vars,
                home: self.ctx.home,
                cwd,
                oldpwd,
            };
            all.extend(words::expand(raw, &env, &mut notes));
        }
        self.after_expand(notes, st);
        if raw.contains('[') && (raw.contains("$(") || raw.contains('`')) {
            for f in &all {
                let text = f.empty_variant();
                self.embedded_code(&text, st);
            }
        }
        all
    }

    fn after_expand(&mut self, notes: ExpandNotes, st: &State) {
        if notes.unparseable {
            self.add(
                Verdict::Yellow,
                "shell.unparseable-word",
                "a word could not be parsed",
            );
        }
        if notes.dynamic {
            self.add(
                Verdict::Yellow,
                "shell.dynamic-expansion",
                "an expansion assigns or looks up variables indirectly",
            );
        }
        let depth = self.sources.last().map_or(0, |(_, d)| *d) + 1;
        for sub in notes.substitutions {
            self.out.shape.compound = true;
            self.line(&sub, st.clone(), depth);
        }
        for text in notes.arith {
            self.arith(&text, st);
        }
        for name in notes.assigned {
            self.assigns_variable(&name, None, st);
        }
        for text in notes.prompt_code {
            let inner = format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""));
            let _ = self.expand_word(&inner, st);
        }
        if notes.dynamic_code {
            self.out.shape.opaque = true;
            self.add(
                Verdict::Red,
                "shell.dynamic-code",
                "`${x@P}` of a value that cannot be known: code assembled at run time",
            );
        }
    }

    /// Checks one expanded field used as a path, against every directory the line may be in.
    pub(crate) fn path_field(&mut self, st: &State, f: &Field, access: Access) {
        let mut found = Vec::new();
        let mut resolved: Vec<PathBuf> = Vec::new();
        let pc = self.path_ctx();
        match f.known() {
            Some(text) => {
                let candidates: Vec<String> = if f.has_glob() {
                    let mut all = Vec::new();
                    let mut too_wide = false;
                    for cwd in &st.cwds {
                        match cwd {
                            Some(c) => match paths::glob(c, &text) {
                                Some(m) if m.is_empty() => all.push(text.clone()),
                                Some(m) => all.extend(m),
                                None => too_wide = true,
                            },
                            None => all.push(text.clone()),
                        }
                    }
                    if too_wide {
                        found.push(Finding::new(
                            Verdict::Yellow,
                            "path.glob-too-wide",
                            format!("`{text}` matches too many paths to check"),
                        ));
                        let prefix: String = text
                            .chars()
                            .take_while(|c| !matches!(c, '*' | '?' | '['))
                            .collect();
                        for cwd in &st.cwds {
                            paths::check_partial(
                                &pc,
                                cwd.as_deref(),
                                &prefix,
                                &text,
                                access,
                                &mut found,
                            );
                        }
                    }
                    all.sort();
                    all.dedup();
                    all
                } else {
                    vec![text]
                };
                for cand in candidates {
                    for cwd in &st.cwds {
                        match cwd {
                            Some(c) => {
                                if let Some(p) =
                                    paths::check_path(&pc, c, &cand, access, &mut found)
                                {
                                    resolved.push(p);
                                }
                            }
                            None if cand.starts_with('/') => {
                                paths::check_path(&pc, Path::new("/"), &cand, access, &mut found);
                            }
                            None => {
                                if !paths::is_system_exception(&cand) {
                                    paths::check_partial(&pc, None, "", &cand, access, &mut found);
                                }
                                if cand.split('/').any(paths::credential_component) {
                                    found.push(Finding::new(
                                        Verdict::Red,
                                        "path.credential",
                                        format!("`{cand}` is a credential path"),
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            None => {
                let prefix = f.known_prefix();
                let display = f.display();
                // Credential names in any known piece (`$X/.env`, `"$D/.ssh/id_rsa"`).
                for part in &f.parts {
                    if let words::Part::Lit { text, .. } = part {
                        if let Some(c) = text
                            .split(['/', ':'])
                            .find(|c| paths::credential_component(c))
                        {
                            found.push(Finding::new(
                                Verdict::Red,
                                "path.credential",
                                format!("`{display}` names a credential path ({c})"),
                            ));
                        }
                    }
                }
                for cwd in &st.cwds {
                    paths::check_partial(
                        &pc,
                        cwd.as_deref(),
                        &prefix,
                        &display,
                        access,
                        &mut found,
                    );
                }
            }
        }
        for x in found {
            self.out.add(x);
        }
        for p in resolved {
            // The report names the first paths; the verdict already counts every one.
            if access == Access::Write
                && self.out.writes.len() < MAX_REPORTED_PATHS
                && !self.out.writes.contains(&p)
            {
                self.out.writes.push(p.clone());
            }
            if self.out.paths.len() < MAX_REPORTED_PATHS && !self.out.paths.contains(&p) {
                self.out.paths.push(p);
            }
        }
    }

    /// Analyses a whole command line at a nesting depth, starting in `st`; returns the state
    /// the line may leave.
    pub(crate) fn line(&mut self, text: &str, st: State, depth: usize) -> State {
        if depth > MAX_DEPTH {
            self.out.shape.opaque = true;
            self.add(
                Verdict::Blocked,
                "shell.too-deep",
                "the line nests shells and substitutions too deeply to analyse; split it",
            );
            return st;
        }
        if text.trim().is_empty() {
            if depth == 0 {
                self.add(Verdict::Yellow, "shell.empty", "the command is empty");
            }
            return st;
        }
        if nesting(text) > MAX_NESTING {
            self.out.shape.opaque = true;
            self.add(
                Verdict::Blocked,
                "shell.too-deep",
                "the line nests groups and substitutions too deeply to analyse; split it",
            );
            return st;
        }
        match parse(text) {
            Ok(prog) => {
                let mut st = st;
                if prog.complete_commands.len() > 1 {
                    self.out.shape.compound = true;
                }
                self.sources.push((text.to_string(), depth));
                for cc in &prog.complete_commands {
                    st = self.compound_list(cc, st, depth);
                }
                self.sources.pop();
                if depth == 0 {
                    // The shell exits here: its EXIT traps run with the state it is in.
                    self.flush_traps(0, &st, depth);
                }
                st
            }
            Err(e) => {
                self.add(
                    Verdict::Yellow,
                    "shell.parse-error",
                    format!("the line does not parse as bash ({e}); in doubt, yellow"),
                );
                // Nothing of a line that does not parse runs, but a verdict must never drop
                // because a line was broken on purpose: the analysable pieces still count.
                self.salvage(text, &st, depth);
                // bash runs a script line by line: whole lines before the error still run.
                let lines: Vec<&str> = text.split('\n').collect();
                let mut end = lines.len();
                while end > 0 {
                    end -= 1;
                    let prefix = lines[..end].join("\n");
                    if prefix.trim().is_empty() {
                        break;
                    }
                    if let Ok(prog) = parse(&prefix) {
                        let mut s = st.clone();
                        for cc in &prog.complete_commands {
                            s = self.compound_list(cc, s, depth);
                        }
                        break;
                    }
                }
                st
            }
        }
    }

    /// Classifies the pieces of an unparseable line: the segments between operators, and the
    /// line with an unterminated quote closed.
    fn salvage(&mut self, text: &str, st: &State, depth: usize) {
        // An unterminated here-document swallows the rest of the text (a wrapper's closing
        // lines too): analyse each opener with all that follows it as its body.
        if let Some(delims) = heredoc_delimiters(text) {
            let lines: Vec<&str> = text.split('\n').collect();
            for (i, l) in lines.iter().enumerate() {
                if !l.contains("<<") || i == 0 {
                    continue;
                }
                let mut closed = lines[i..].join("\n");
                for d in delims.iter().rev() {
                    closed.push('\n');
                    closed.push_str(d);
                }
                if parse(&closed).is_ok() {
                    self.line(&closed, st.clone(), depth + 1);
                }
            }
        }
        let opts = words::options();
        match brush_parser::tokenize_str_with_options(text, &opts.tokenizer_options()) {
            Ok(tokens) => {
                let mut segment: Vec<String> = Vec::new();
                let mut segments = Vec::new();
                for t in tokens {
                    match t {
                        brush_parser::Token::Word(w, _) => segment.push(w),
                        brush_parser::Token::Operator(op, _) => {
                            if matches!(
                                op.as_str(),
                                ">" | ">>" | "<" | ">|" | "&>" | "&>>" | "<>" | ">&" | "<&" | "<<<"
                            ) {
                                segment.push(op);
                            } else {
                                segments.push(std::mem::take(&mut segment));
                            }
                        }
                    }
                }
                segments.push(segment);
                if segments.len() > 1 || segments.first().is_some_and(|s| s.join(" ") != text) {
                    for mut seg in segments.into_iter().filter(|s| !s.is_empty()) {
                        // Constructs the grammar rejects (`select`, `for ((;;))`) still hold
                        // commands after their keywords.
                        while seg.first().is_some_and(|w| {
                            matches!(
                                w.as_str(),
                                "do" | "then"
                                    | "else"
                                    | "elif"
                                    | "if"
                                    | "while"
                                    | "until"
                                    | "{"
                                    | "}"
                                    | "!"
                                    | "time"
                                    | "done"
                                    | "fi"
                                    | "esac"
                            )
                        }) {
                            seg.remove(0);
                        }
                        if seg.first().is_some_and(|w| w == "select" || w == "for") {
                            if let Some(var) = seg.get(1) {
                                self.assigns_variable(var, Some("select"), st);
                            }
                            continue;
                        }
                        if seg.is_empty() {
                            continue;
                        }
                        let line = seg.join(" ");
                        if parse(&line).is_ok() {
                            self.line(&line, st.clone(), depth + 1);
                        }
                    }
                }
            }
            Err(_) => {
                // An unterminated here-document still runs (bash warns and uses what it read).
                if let Some(delims) = heredoc_delimiters(text) {
                    let mut closed = text.to_string();
                    for d in delims.iter().rev() {
                        closed.push('\n');
                        closed.push_str(d);
                    }
                    if parse(&closed).is_ok() {
                        self.line(&closed, st.clone(), depth + 1);
                        return;
                    }
                }
                for close in ["'", "\"", "`", ")", "}"] {
                    let closed = format!("{text}{close}");
                    if parse(&closed).is_ok() {
                        self.line(&closed, st.clone(), depth + 1);
                        break;
                    }
                }
            }
        }
    }

    fn compound_list(&mut self, list: &ast::CompoundList, mut st: State, depth: usize) -> State {
        if list.0.len() > 1 {
            self.out.shape.compound = true;
        }
        for item in &list.0 {
            if self.work > MAX_WORK {
                break;
            }
            if matches!(item.1, ast::SeparatorOperator::Async) {
                self.out.shape.compound = true;
            }
            // A `cd` may fail: later commands may run in either directory. Assignments only
            // may not have happened when guarded by `&&`/`||`.
            if item.0.additional.is_empty() {
                let (cwds, oldpwd) = (st.cwds.clone(), st.oldpwd.clone());
                st = self.and_or(&item.0, st, depth);
                union_vec(&mut st.cwds, &cwds);
                union_vec(&mut st.oldpwd, &oldpwd);
            } else {
                let before = st.clone();
                st = self.and_or(&item.0, st, depth);
                st.union(&before);
            }
        }
        st
    }

    fn and_or(&mut self, aol: &ast::AndOrList, st: State, depth: usize) -> State {
        let mut cur = self.pipeline(&aol.first, st.clone(), depth);
        let mut prev_before = st;
        for next in &aol.additional {
            self.out.shape.compound = true;
            match next {
                ast::AndOr::And(p) => {
                    let before = cur.clone();
                    cur = self.pipeline(p, cur, depth);
                    prev_before = before;
                }
                ast::AndOr::Or(p) => {
                    let mut s = cur.clone();
                    s.union(&prev_before);
                    let before = s.clone();
                    cur = self.pipeline(p, s, depth);
                    prev_before = before;
                }
            }
        }
        cur
    }

    /// The stdin a command of the current line inherits: fed when the line itself runs with a
    /// fed stdin (`x | bash -c 'LINE'`).
    fn inherited_stdin(&self) -> Stdin {
        if self.fed.last().copied().unwrap_or(false) {
            Stdin::Fed
        } else {
            Stdin::Inherited
        }
    }

    /// Analyses a line whose commands read `stdin` (the code of `sh -c`, `env -S`, `eval`).
    pub(crate) fn line_with_stdin(
        &mut self,
        text: &str,
        st: State,
        depth: usize,
        stdin: Stdin,
    ) -> State {
        self.fed.push(stdin == Stdin::Fed);
        let out = self.line(text, st, depth);
        self.fed.pop();
        out
    }

    fn pipeline(&mut self, p: &ast::Pipeline, st: State, depth: usize) -> State {
        let first = self.inherited_stdin();
        if p.seq.len() == 1 {
            return self.command(&p.seq[0], st, first, depth);
        }
        self.out.shape.compound = true;
        for (i, c) in p.seq.iter().enumerate() {
            let stdin = if i == 0 { first } else { Stdin::Fed };
            // Every stage runs in a subshell: its changes do not outlive the pipeline.
            self.command(c, st.clone(), stdin, depth);
        }
        st
    }

    /// Counts analysis work; true once the budget is spent (the line is then blocked).
    fn over_budget(&mut self, units: usize) -> bool {
        self.work += units;
        if self.work > MAX_WORK {
            if !self.out.rules().contains(&"shell.too-complex") {
                self.out.shape.opaque = true;
                self.add(
                    Verdict::Blocked,
                    "shell.too-complex",
                    "the line is too complex to analyse in full; split it",
                );
            }
            return true;
        }
        false
    }

    fn command(&mut self, c: &ast::Command, st: State, stdin: Stdin, depth: usize) -> State {
        if self.over_budget(st.cwds.len().max(1)) {
            return st;
        }
        match c {
            ast::Command::Simple(s) => self.simple_each_value(s, st, stdin, depth),
            ast::Command::Compound(cc, redirs) => {
                self.out.shape.compound = true;
                let mut stdin = stdin;
                if let Some(r) = redirs {
                    for io in &r.0 {
                        if self.redirect(io, &st, depth) {
                            stdin = Stdin::Fed;
                        }
                    }
                }
                self.compound(cc, st, stdin, depth)
            }
            ast::Command::Function(f) => {
                self.out.shape.compound = true;
                let name = f.fname.value.clone();
                let mut st = st;
                st.functions.push(name.clone());
                self.spawns.push((name.clone(), spawned_names(&f.body.0)));
                if let Some(f) = spawn_cycle(&self.spawns) {
                    self.add(Verdict::Blocked, "vault.fork-bomb", format!("function `{f}` spawns itself (through the functions it runs) in a pipeline or in the background: a fork bomb"));
                }
                // The body is analysed as if it ran (it may, any number of times).
                let inner = st.clone();
                let after = self.compound(&f.body.0, inner, Stdin::Inherited, depth);
                if let Some(r) = &f.body.1 {
                    for io in &r.0 {
                        self.redirect(io, &after, depth);
                    }
                }
                st
            }
            ast::Command::ExtendedTest(t, redirs) => {
                self.out.shape.compound = true;
                self.ext_test(&t.expr, &st);
                if let Some(r) = redirs {
                    for io in &r.0 {
                        self.redirect(io, &st, depth);
                    }
                }
                st
            }
        }
    }

    fn ext_test(&mut self, e: &ast::ExtendedTestExpr, st: &State) {
        match e {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.ext_test(a, st);
                self.ext_test(b, st);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.ext_test(a, st)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                for f in self.expand_word(&w.value, st) {
                    self.path_field(st, &f, Access::Read);
                }
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                for w in [a, b] {
                    for f in self.expand_word(&w.value, st) {
                        self.path_field(st, &f, Access::Read);
                    }
                }
            }
        }
    }

    fn compound(
        &mut self,
        cc: &ast::CompoundCommand,
        st: State,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        match cc {
            ast::CompoundCommand::BraceGroup(g) => {
                self.compound_list_stdin(&g.list, st, stdin, depth)
            }
            ast::CompoundCommand::Subshell(s) => {
                let traps = self.traps.len();
                let end = self.compound_list_stdin(&s.list, st.clone(), stdin, depth);
                // The subshell's EXIT traps run when it ends, in its own final state.
                self.flush_traps(traps, &end, depth);
                st
            }
            ast::CompoundCommand::ForClause(f) => {
                let mut st = st;
                let mut values: VarValues = Vec::new();
                match &f.values {
                    Some(ws) => {
                        for w in ws {
                            // A glob binds the variable to its matches (bindings.rs).
                            for field in self.expand_word(&w.value, &st) {
                                if field.has_glob() {
                                    self.path_field(&st, &field, Access::Read);
                                }
                                values.extend(self.for_word_values(&st, &field));
                            }
                        }
                    }
                    None => values.push(None),
                }
                if values.is_empty() {
                    values.push(None);
                }
                values.dedup();
                let before = st.clone();
                // The loop variable is assigned each value, and the values are words.
                self.assigns_variable(&f.variable_name, Some("for"), &st);
                for v in values.iter().flatten() {
                    let field = words::Field::lit(v);
                    self.path_field(&st, &field, Access::Read);
                }
                st.vars.insert(f.variable_name.clone(), values);
                // Loop bodies may run several times: twice reaches every state a `cd` in the
                // body can leave relative to its start.
                let mut after = self.loop_body(&f.body.list, None, st, depth);
                after.union(&before);
                after
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arith(&e.value, &st);
                }
                let mut after = self.loop_body(&f.body.list, None, st.clone(), depth);
                after.union(&st);
                after
            }
            ast::CompoundCommand::CaseClause(c) => {
                let _ = self.expand_word(&c.value.value, &st);
                let mut out = st.clone();
                for item in &c.cases {
                    for p in &item.patterns {
                        let _ = self.expand_word(&p.value, &st);
                    }
                    if let Some(cmd) = &item.cmd {
                        let after = self.compound_list(cmd, st.clone(), depth);
                        out.union(&after);
                    }
                }
                out
            }
            ast::CompoundCommand::IfClause(i) => {
                let after_cond = self.compound_list(&i.condition, st, depth);
                let mut out = self.compound_list(&i.then, after_cond.clone(), depth);
                let mut cond_state = after_cond.clone();
                let mut has_else = false;
                if let Some(elses) = &i.elses {
                    for e in elses {
                        if let Some(c) = &e.condition {
                            cond_state = self.compound_list(c, cond_state, depth);
                        } else {
                            has_else = true;
                        }
                        let after = self.compound_list(&e.body, cond_state.clone(), depth);
                        out.union(&after);
                    }
                }
                if !has_else {
                    out.union(&cond_state);
                }
                out
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                let mut out = self.loop_body(&w.1.list, Some(&w.0), st.clone(), depth);
                out.union(&st);
                out
            }
            ast::CompoundCommand::Arithmetic(a) => {
                self.arith(&a.expr.value, &st);
                // bash reads `( (cmd) )` (parentheses apart) as nested subshells; the grammar
                // crate reads it as arithmetic. Analyse the text as the subshells bash runs.
                let (start, end) = (a.loc.start.index, a.loc.end.index);
                let src = self.sources.last().cloned();
                if let Some((text, d)) = src {
                    let adjacent = text.get(start..start + 2) == Some("((")
                        && end >= 2
                        && text.get(end - 2..end) == Some("))");
                    if !adjacent {
                        if let Some(inner) = text.get(start + 1..end.saturating_sub(1)) {
                            self.line(inner, st.clone(), d + 1);
                        }
                    }
                }
                st
            }
            ast::CompoundCommand::Coprocess(c) => {
                self.command(&c.body, st.clone(), stdin, depth);
                st
            }
        }
    }

    /// A loop: condition and body analysed from the entry state; when the body changes the
    /// state (a `cd`, an assignment), once more from the union, which reaches every state a
    /// further iteration could (the body's effects are the same each time).
    fn loop_body(
        &mut self,
        body: &ast::CompoundList,
        cond: Option<&ast::CompoundList>,
        st: State,
        depth: usize,
    ) -> State {
        if self.over_budget(1) {
            return st;
        }
        let c1 = match cond {
            Some(c) => self.compound_list(c, st.clone(), depth),
            None => st.clone(),
        };
        let b1 = self.compound_list(body, c1.clone(), depth);
        if b1 == st && c1 == st {
            return b1;
        }
        let mut again = b1.clone();
        again.union(&c1);
        again.union(&st);
        let c2 = match cond {
            Some(c) => self.compound_list(c, again.clone(), depth),
            None => again.clone(),
        };
        let mut out = self.compound_list(body, c2.clone(), depth);
        out.union(&c1);
        out.union(&c2);
        out
    }

    /// A compound list whose first command may read a fed stdin (`… | { sh; }`).
    fn compound_list_stdin(
        &mut self,
        list: &ast::CompoundList,
        st: State,
        stdin: Stdin,
        depth: usize,
    ) -> State {
        if stdin == Stdin::Inherited {
            return self.compound_list(list, st, depth);
        }
        // Any command in the group may read the fed input: analyse each as fed.
        let mut st = st;
        if list.0.len() > 1 {
            self.out.shape.compound = true;
        }
        for item in &list.0 {
            let before = st.clone();
            let mut cur = self.pipeline_fed(&item.0.first, st.clone(), depth);
            for next in &item.0.additional {
                let p = match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                };
                let mut s = cur.clone();
                s.union(&st);
                cur = self.pipeline_fed(p, s, depth);
            }
            st = cur;
            st.union(&before);
        }
        st
    }

    fn pipeline_fed(&mut self, p: &ast::Pipeline, st: State, depth: usize) -> State {
        if p.seq.len() == 1 {
            return self.command(&p.seq[0], st, Stdin::Fed, depth);
        }
        self.pipeline(p, st, depth)
    }

    /// Arithmetic text can run commands through substitutions and array subscripts, and the
    /// values of the variables it names are evaluated as arithmetic in turn.
    pub(crate) fn arith(&mut self, text: &str, st: &State) {
        if self.arith_depth > MAX_DEPTH {
            self.add(
                Verdict::Blocked,
                "shell.too-deep",
                "arithmetic refers to itself too deeply to analyse",
            );
            return;
        }
        self.arith_depth += 1;
        if text.contains(['$', '`']) {
            let inner = format!("\"{}\"", text.replace('"', "\\\""));
            let _ = self.expand_word(&inner, st);
        }
        self.embedded_code(text, st);
        let names: Vec<String> = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
            .map(str::to_string)
            .collect();
        for n in names {
            let values: Vec<String> = st
                .vars
                .get(&n)
                .map(|v| v.iter().flatten().cloned().collect())
                .unwrap_or_default();
            for v in values {
                if v.contains(['$', '`', '[']) && v != text {
                    self.arith(&v, st);
                }
            }
        }
        self.arith_depth -= 1;
    }

    /// Text that bash may evaluate as arithmetic somewhere (a subscript `a[…]` in a test
    /// operand, a variable value, `printf -v`, `unset`, `read`…) runs the command
    /// substitutions inside its brackets: analyse them wherever such text appears.
    pub(crate) fn embedded_code(&mut self, text: &str, st: &State) {
        let Some(open) = text.find('[') else { return };
        let rest = &text[open..];
        if !rest.contains("$(") && !rest.contains('`') {
            return;
        }
        let depth = self.sources.last().map_or(0, |(_, d)| *d) + 1;
        for code in substitutions_in(rest) {
            self.out.shape.compound = true;
            self.add(
                Verdict::Yellow,
                "shell.subscript-code",
                "a subscript holds a command substitution that bash may run",
            );
            self.line(&code, st.clone(), depth);
        }
    }

    /// Analyses one redirection. Returns true when it feeds the command's stdin.
    pub(crate) fn redirect(&mut self, io: &ast::IoRedirect, st: &State, depth: usize) -> bool {
        self.out.shape.compound = true;
        match io {
            ast::IoRedirect::File(fd, kind, target) => {
                let access = match kind {
                    ast::IoFileRedirectKind::Read => Access::Read,
                    ast::IoFileRedirectKind::DuplicateInput
                    | ast::IoFileRedirectKind::DuplicateOutput => {
                        // `>&2`, `<&0`, `>&-` duplicate descriptors; `>& file` writes a file.
                        Access::Write
                    }
                    _ => Access::Write,
                };
                // `< /dev/null` feeds nothing: an empty stdin carries no code (Claude Code
                // runs every command so).
                let from_null = matches!(
                    target,
                    ast::IoFileRedirectTarget::Filename(w) if w.value == "/dev/null"
                );
                let feeds_stdin = (matches!(
                    kind,
                    ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite
                ) && fd.unwrap_or(0) == 0
                    || matches!(kind, ast::IoFileRedirectKind::DuplicateInput)
                        && fd.unwrap_or(0) == 0)
                    && !from_null;
                match target {
                    ast::IoFileRedirectTarget::Filename(w)
                    | ast::IoFileRedirectTarget::Duplicate(w) => {
                        let is_dup = matches!(target, ast::IoFileRedirectTarget::Duplicate(_))
                            || matches!(
                                kind,
                                ast::IoFileRedirectKind::DuplicateInput
                                    | ast::IoFileRedirectKind::DuplicateOutput
                            );
                        for f in self.expand_word(&w.value, st) {
                            if let Some(t) = f.known() {
                                if is_dup
                                    && (t == "-"
                                        || t.trim_end_matches('-')
                                            .bytes()
                                            .all(|b| b.is_ascii_digit()))
                                {
                                    continue;
                                }
                            }
                            self.redirect_target(st, &f, access, kind);
                        }
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                    ast::IoFileRedirectTarget::ProcessSubstitution(kind, sub) => {
                        // `> >(cmd)`: cmd reads what the command writes.
                        let stdin = if matches!(kind, ast::ProcessSubstitutionKind::Write) {
                            Stdin::Fed
                        } else {
                            Stdin::Inherited
                        };
                        self.compound_list_stdin(&sub.list, st.clone(), stdin, depth);
                    }
                }
                feeds_stdin
            }
            ast::IoRedirect::HereDocument(fd, doc) => {
                if doc.requires_expansion && doc.doc.value.contains(['$', '`']) {
                    self.add(Verdict::Yellow, "cmd.dynamic-args", "the here-document expands values that cannot be known (they may be secrets)");
                }
                if doc.requires_expansion {
                    let inner = format!(
                        "\"{}\"",
                        doc.doc.value.replace('\\', "\\\\").replace('"', "\\\"")
                    );
                    let _ = self.expand_word(&inner, st);
                }
                fd.unwrap_or(0) == 0
            }
            ast::IoRedirect::HereString(fd, w) => {
                let fields = self.expand_word(&w.value, st);
                if fields.iter().any(|f| !f.is_known()) {
                    self.add(
                        Verdict::Yellow,
                        "cmd.dynamic-args",
                        "the here-string holds values that cannot be known (they may be secrets)",
                    );
                }
                fd.unwrap_or(0) == 0
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                for f in self.expand_word(&w.value, st) {
                    self.redirect_target(st, &f, Access::Write, &ast::IoFileRedirectKind::Write);
                }
                false
            }
        }
    }

    fn redirect_target(
        &mut self,
        st: &State,
        f: &Field,
        access: Access,
        kind: &ast::IoFileRedirectKind,
    ) {
        if let Some(t) = f.known() {
            if paths::is_system_exception(&t) {
                return;
            }
            if t.starts_with("/dev/tcp/") || t.starts_with("/dev/udp/") {
                let host = t.split('/').nth(3).unwrap_or("").to_string();
                self.out.hosts.push(host);
                self.add(
                    Verdict::Red,
                    "net.dev-tcp",
                    format!("`{t}` opens a network connection"),
                );
            }
            if access == Access::Write
                && (t.starts_with("/dev/")
                    || paths::resolve(Path::new("/"), &t).starts_with("/dev"))
                && t.starts_with('/')
            {
                self.add(
                    Verdict::Blocked,
                    "vault.device-write",
                    format!("redirection writes to the device `{t}`"),
                );
                return;
            }
        }
        if access == Access::Write
            && !matches!(kind, ast::IoFileRedirectKind::Read)
            && !self.in_scratch(st, f)
        {
            // Writes into the session's scratch directory are housekeeping (DESIGN.md §2a).
            self.add(
                Verdict::Yellow,
                "shell.redirect-write",
                format!("the shell writes `{}`", f.display()),
            );
        }
        self.path_field(st, f, access);
    }

    /// The policy's extra rules, matched on a peeled program and its arguments.
    pub(crate) fn extra_rules(&mut self, program: &str, args: &[Field]) {
        if !self
            .policy
            .config()
            .rules
            .iter()
            .any(|r| r.program == program)
        {
            return;
        }
        let known: Vec<String> = args.iter().filter_map(Field::known).collect();
        let hits: Vec<(Verdict, String, String)> = self
            .policy
            .config()
            .rules
            .iter()
            .filter(|r| r.program == program && r.args.iter().all(|a| known.contains(a)))
            .map(|r| (r.verdict, format!("policy.{}", r.id), r.reason.clone()))
            .collect();
        for (v, id, reason) in hits {
            self.add(v, &id, reason);
        }
    }
}

/// Delimiters of the here-documents a line opens (`<<EOF`, `<<-'EOF'`, `<< "EOF"`), in order.
fn heredoc_delimiters(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("<<") {
        let after = &rest[i + 2..];
        if let Some(here_string) = after.strip_prefix('<') {
            rest = here_string;
            continue;
        }
        let after = after.strip_prefix('-').unwrap_or(after).trim_start();
        let word: String = after
            .chars()
            .take_while(|c| {
                !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | '<' | '>' | '(' | ')')
            })
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        if !word.is_empty() {
            out.push(word);
        }
        rest = after;
    }
    (!out.is_empty()).then_some(out)
}

/// The command texts of `$(…)` and backquotes in `text` (parentheses matched, quotes
/// skipped roughly; an unclosed one runs to the end).
fn substitutions_in(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && b.get(i + 1) == Some(&b'(') {
            let start = i + 2;
            let mut depth = 1;
            let mut j = start;
            let mut quote: Option<u8> = None;
            while j < b.len() && depth > 0 {
                match (quote, b[j]) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, b'\'') | (None, b'"') => quote = Some(b[j]),
                    (None, b'(') => depth += 1,
                    (None, b')') => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            let end = if depth == 0 { j - 1 } else { j };
            out.push(text[start..end].to_string());
            i = j;
        } else if b[i] == b'`' {
            let start = i + 1;
            let end = text[start..].find('`').map_or(text.len(), |e| start + e);
            out.push(text[start..end].to_string());
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// Deepest nesting of `(`/`{`/`[` in a line, beyond which the recursive-descent grammar could
/// exhaust the stack; such lines are refused as opaque (stricter, never more permissive).
const MAX_NESTING: usize = 200;

fn nesting(text: &str) -> usize {
    let mut depth: usize = 0;
    let mut max = 0;
    for b in text.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Parses a line with the bash grammar.
fn parse(text: &str) -> Result<ast::Program, String> {
    let opts = words::options();
    let tokens = brush_parser::tokenize_str_with_options(text, &opts.tokenizer_options())
        .map_err(|e| e.to_string())?;
    brush_parser::parse_tokens(&tokens, &opts).map_err(|e| e.to_string())
}

/// Whether a function body runs the function itself in a pipeline or in the background.
/// Names a function body runs in a pipeline or in the background (what a fork bomb does).
fn spawned_names(body: &ast::CompoundCommand) -> Vec<String> {
    let text = body.to_string();
    let Ok(prog) = parse(&text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for cc in &prog.complete_commands {
        for item in &cc.0 {
            let async_ = matches!(item.1, ast::SeparatorOperator::Async);
            visit_pipelines(&item.0, &mut |p: &ast::Pipeline| {
                if p.seq.len() > 1 || async_ {
                    for c in &p.seq {
                        if let Some(n) = command_name(c) {
                            if !out.contains(&n) {
                                out.push(n);
                            }
                        }
                    }
                }
            });
        }
    }
    out
}

/// Whether the functions defined on a line spawn each other in a cycle (`f(){ f|f& }`, or
/// `a(){ b|b& }; b(){ a|a& }`): a fork bomb.
fn spawn_cycle(spawns: &[(String, Vec<String>)]) -> Option<String> {
    for (start, _) in spawns {
        let mut stack = vec![start.clone()];
        let mut seen: Vec<String> = Vec::new();
        while let Some(n) = stack.pop() {
            let Some((_, callees)) = spawns.iter().find(|(f, _)| *f == n) else {
                continue;
            };
            for c in callees {
                if c == start {
                    return Some(start.clone());
                }
                if !seen.contains(c) {
                    seen.push(c.clone());
                    stack.push(c.clone());
                }
            }
        }
    }
    None
}

fn visit_pipelines(aol: &ast::AndOrList, f: &mut dyn FnMut(&ast::Pipeline)) {
    f(&aol.first);
    for a in &aol.additional {
        match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => f(p),
        }
    }
    let inner = |p: &ast::Pipeline, f: &mut dyn FnMut(&ast::Pipeline)| {
        for c in &p.seq {
            if let ast::Command::Compound(ast::CompoundCommand::BraceGroup(g), _) = c {
                for item in &g.list.0 {
                    visit_pipelines(&item.0, f);
                }
            }
        }
    };
    inner(&aol.first, f);
}

fn command_name(c: &ast::Command) -> Option<String> {
    match c {
        ast::Command::Simple(s) => s.word_or_name.as_ref().map(|w| w.value.clone()),
        _ => None,
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
