//! Shell housekeeping: the builtins agents wrap every command in (DESIGN.md §2a "Agents wrap
//! commands in shell housekeeping"), recognised by kind, never by an agent's spelling.
//!
//! Neutral (they add no finding, so the line takes the colour of what they wrap):
//! - option builtins whose options only change what the classifier already assumes or makes
//!   bash stricter: `shopt -s|-u|-q|-p NAME…` and `set ±o NAME`/`set ±e…` of the options in
//!   [`SHOPT_OPTIONS`] and [`SET_OPTIONS`] (the tables say, per direction, why); an option that
//!   makes later code expand or run differently from what the analyser models (`shopt -s
//!   nullglob|dotglob|nocaseglob|globstar|lastpipe|extdebug`, `set -k`, `set -a`, `set -o
//!   posix`) is not neutral and stays yellow;
//! - `unalias -a`/`unalias NAME` (definitions seen earlier are kept: bash may have expanded an
//!   alias while reading the line, before `unalias` ran);
//! - `trap 'LITERAL' SIGNALS`: the body is analysed as code that runs, where the trap is set
//!   and again with the state the shell has when it exits (the end of the line or subshell);
//! - `jobs` (listing options only), `exit`/`return` with any status word (`exit $?`, `exit
//!   $__code`), a bare assignment of a special parameter that holds a number (`__code=$?`);
//! - `builtin NAME …` of a bash builtin: analysed as that builtin, with no wrapper floor;
//! - `eval` of literal words: analysed as inline code (the words are the code);
//! - redirections whose target is known and resolves inside the session's scratch directory
//!   (`Context::scratch`, made by tyba for this session), `>|` included;
//! - `source FILE`/`. FILE` of a literal path outside the worktree and the scratch directory
//!   that the classifier can read and that holds only definitions (functions, aliases,
//!   assignments and declarations, neutral option builtins): the definitions join the line's
//!   state, and a later use of a defined name takes the colour of the definition's body as
//!   well as its own. Variables such a file assigns are unknown afterwards, as if inherited
//!   (their values may be secrets; a snapshot's `PATH` is the person's own, so it does not
//!   count as a `PATH` the line changed), and exec-capable variables are red as anywhere. Any other readable file is
//!   analysed as inline code on top of the old rules (yellow `shell.source` and the path
//!   rules); an unreadable or non-literal one keeps the old rules alone.
//!
//! The "always" key of a line whose every part but one is neutral housekeeping is that part's
//! text ([`Analyzer::inner_command`]), so a person's "always" on a bare command matches the
//! agent's next wrapped call of it; a line with any other part keeps its whole text as key.
//!
//! Limits: a sourced file is read when the line is classified; a file changed between then
//! and the run is the kernel layer's to hold (every exec is classified again). Function bodies
//! replayed through `eval "$(… | base64 -d)"` are code assembled at run time (red).

use super::commands::{Invocation, SHELL_BUILTINS};
use super::paths;
use super::words::{self, ExpandEnv, ExpandNotes, Field};
use super::{parse, Analyzer, State};
use crate::verdict::Verdict;
use brush_parser::ast::{self, SourceLocation};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest file `source` is analysed from; a larger one keeps the old rules.
const MAX_SOURCED_BYTES: u64 = 1 << 20;

/// `shopt` options: `(name, setting is neutral, unsetting is neutral)`. Unsetting restores
/// bash's non-interactive default or switches a feature off; setting is neutral when it only
/// affects interactive use, printing, or makes bash refuse more (the classifier parses with
/// extended globs and expands aliases wherever they are defined). Source: bash(1) "SHELL
/// BUILTIN COMMANDS", `shopt`.
pub(crate) const SHOPT_OPTIONS: &[(&str, bool, bool)] = &[
    ("array_expand_once", false, true),
    ("assoc_expand_once", false, true),
    ("autocd", true, true),
    ("bash_source_fullpath", true, true),
    ("cdable_vars", false, true),
    ("cdspell", true, true),
    ("checkhash", true, true),
    ("checkjobs", true, true),
    ("checkwinsize", true, true),
    ("cmdhist", true, true),
    ("compat31", false, true),
    ("compat32", false, true),
    ("compat40", false, true),
    ("compat41", false, true),
    ("compat42", false, true),
    ("compat43", false, true),
    ("compat44", false, true),
    ("complete_fullquote", true, true),
    ("direxpand", true, true),
    ("dirspell", true, true),
    // Globs would match dot files the classifier's glob leaves out.
    ("dotglob", false, true),
    ("execfail", true, true),
    ("expand_aliases", true, true),
    // DEBUG traps may skip or replace commands.
    ("extdebug", false, true),
    ("extglob", true, true),
    ("extquote", true, true),
    ("failglob", true, true),
    ("force_fignore", true, true),
    ("globasciiranges", true, true),
    ("globskipdots", true, true),
    // `**` would recurse where the classifier's glob does not.
    ("globstar", false, true),
    ("gnu_errfmt", true, true),
    ("histappend", true, true),
    ("histreedit", true, true),
    ("histverify", true, true),
    ("hostcomplete", true, true),
    ("huponexit", true, true),
    ("inherit_errexit", true, true),
    ("interactive_comments", true, true),
    // The last stage of a pipeline would change the shell's directory and variables.
    ("lastpipe", false, true),
    ("lithist", true, true),
    ("localvar_inherit", true, true),
    ("localvar_unset", true, true),
    ("login_shell", true, true),
    ("mailwarn", true, true),
    ("no_empty_cmd_completion", true, true),
    // Case-insensitive globs would match names (`.ENV`) the classifier's glob does not.
    ("nocaseglob", false, true),
    ("nocasematch", true, true),
    ("noexpand_translation", true, true),
    // A glob matching nothing would vanish (`cd *.x` becomes `cd`, to $HOME).
    ("nullglob", false, true),
    ("patsub_replacement", true, true),
    ("progcomp", true, true),
    ("progcomp_alias", true, true),
    ("promptvars", true, true),
    ("restricted_shell", true, true),
    ("shift_verbose", true, true),
    ("sourcepath", true, true),
    ("varredir_close", true, true),
    ("xpg_echo", true, true),
];

/// `set -o` options: `(long name, letter, setting is neutral, unsetting is neutral)`. Source:
/// bash(1) `set`. `allexport` (every later assignment reaches programs' environments),
/// `keyword` (assignment words anywhere become environment) and `posix` (other builtin
/// semantics) change how later code runs; everything else is checking, tracing, job control,
/// history or editing.
pub(crate) const SET_OPTIONS: &[(&str, Option<char>, bool, bool)] = &[
    ("allexport", Some('a'), false, true),
    ("braceexpand", Some('B'), true, true),
    ("emacs", None, true, true),
    ("errexit", Some('e'), true, true),
    ("errtrace", Some('E'), true, true),
    ("functrace", Some('T'), true, true),
    ("hashall", Some('h'), true, true),
    ("histexpand", Some('H'), true, true),
    ("history", None, true, true),
    ("ignoreeof", None, true, true),
    ("interactive-comments", None, true, true),
    ("keyword", Some('k'), false, true),
    ("monitor", Some('m'), true, true),
    ("noclobber", Some('C'), true, true),
    ("noexec", Some('n'), true, true),
    ("noglob", Some('f'), true, true),
    ("nolog", None, true, true),
    ("notify", Some('b'), true, true),
    ("nounset", Some('u'), true, true),
    ("onecmd", Some('t'), true, true),
    ("physical", Some('P'), true, true),
    ("pipefail", None, true, true),
    ("posix", None, false, true),
    ("privileged", Some('p'), true, true),
    ("verbose", Some('v'), true, true),
    ("vi", None, true, true),
    ("xtrace", Some('x'), true, true),
];

/// Whether `shopt ARGS` only changes options in a neutral direction (or prints them).
pub(crate) fn shopt_neutral(args: &[String]) -> bool {
    let mut set = None;
    let mut long = false;
    let mut names = Vec::new();
    for a in args {
        match a.strip_prefix('-') {
            Some(flags) if !names.is_empty() || flags.is_empty() => return false,
            Some(flags) => {
                for c in flags.chars() {
                    match c {
                        's' => set = Some(true),
                        'u' => set = Some(false),
                        'q' | 'p' => {}
                        'o' => long = true,
                        _ => return false,
                    }
                }
            }
            None => names.push(a.as_str()),
        }
    }
    let Some(set) = set else {
        // Printing or querying only.
        return names.iter().all(|n| known_option(n, long));
    };
    names.iter().all(|n| {
        if long {
            set_option_neutral(n, set)
        } else {
            SHOPT_OPTIONS
                .iter()
                .any(|(o, s, u)| o == n && if set { *s } else { *u })
        }
    })
}

fn known_option(name: &str, long: bool) -> bool {
    if long {
        SET_OPTIONS.iter().any(|(o, ..)| *o == name)
    } else {
        SHOPT_OPTIONS.iter().any(|(o, ..)| *o == name)
    }
}

fn set_option_neutral(name: &str, set: bool) -> bool {
    SET_OPTIONS
        .iter()
        .any(|(o, _, s, u)| *o == name && if set { *s } else { *u })
}

/// Whether `set ARGS` only changes options in a neutral direction (`set -euo pipefail`,
/// `set +o posix`, `set -o` to print). `set` alone prints every variable (secrets) and `set --
/// WORDS` sets positional parameters: neither is neutral.
pub(crate) fn set_neutral(args: &[String]) -> bool {
    if args.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (on, flags) = match (a.strip_prefix('-'), a.strip_prefix('+')) {
            (Some(f), _) => (true, f),
            (_, Some(f)) => (false, f),
            _ => return false,
        };
        if flags.is_empty() || flags.starts_with('-') {
            return false;
        }
        for c in flags.chars() {
            if c == 'o' {
                i += 1;
                match args.get(i) {
                    // `set -o`/`set +o` alone print the options.
                    None => return true,
                    Some(name) if set_option_neutral(name, on) => {}
                    Some(_) => return false,
                }
            } else {
                let ok = SET_OPTIONS
                    .iter()
                    .any(|(_, l, s, u)| *l == Some(c) && if on { *s } else { *u });
                if !ok {
                    return false;
                }
            }
        }
        i += 1;
    }
    true
}

/// Whether `jobs ARGS` only lists jobs (`-x` runs a command).
fn jobs_neutral(args: &[String]) -> bool {
    args.iter().all(|a| match a.strip_prefix('-') {
        Some(f) => !f.is_empty() && f.chars().all(|c| "lnprs".contains(c)),
        None => a.starts_with('%') || a.bytes().all(|b| b.is_ascii_digit()),
    })
}

/// A raw assignment value that is only a special parameter holding a number (`$?`, `${?}`,
/// `"$#"`, `$$`, `$!`): never a path or program.
pub(crate) fn numeric_special(raw: &str) -> bool {
    let v = raw.trim_matches('"');
    matches!(
        v,
        "$?" | "${?}" | "$#" | "${#}" | "$$" | "${$}" | "$!" | "${!}"
    )
}

/// A raw word that is one parameter expansion and nothing else (`$__code`, `"${rc}"`): no
/// substitution, no operator that could run or assign anything.
fn plain_parameter(raw: &str) -> bool {
    let v = raw
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(raw);
    let Some(v) = v.strip_prefix('$') else {
        return false;
    };
    let name = v
        .strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
        .unwrap_or(v);
    !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What a definition binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefKind {
    /// `name() { … }`: the body runs when `name` is used as a command.
    Function,
    /// `alias name='text'`: the text replaces `name` where bash expands aliases.
    Alias,
}

/// A function or alias defined by a sourced definitions file: its body is analysed where the
/// name is used, not where it is defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Definition {
    pub name: String,
    pub kind: DefKind,
    pub body: Arc<str>,
}

/// What a definitions-only file binds.
#[derive(Debug, Default, Clone)]
struct Definitions {
    defs: Vec<Definition>,
    /// Variables assigned or declared (unknown afterwards).
    vars: Vec<String>,
}

/// A file `source` reads, as read: its text, whether it parses, and its definitions when it
/// holds nothing else.
#[derive(Debug)]
struct Sourced {
    text: String,
    parses: bool,
    defs: Option<Definitions>,
}

/// What identifies one version of a file: device, inode, size, modification and change
/// times (the change time moves on every write).
type FileVersion = (PathBuf, u64, u64, u64, i64, i64, i64, i64);

/// Files `source` read, newest last: an agent's wrapper sources the same snapshot for every
/// command, and parsing it each time would cost more than the rest of the line.
static SOURCED: std::sync::Mutex<Vec<(FileVersion, Arc<Sourced>)>> =
    std::sync::Mutex::new(Vec::new());
const SOURCED_CACHE_ENTRIES: usize = 32;

fn version(path: &Path) -> Option<FileVersion> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    if !m.is_file() || m.len() > MAX_SOURCED_BYTES {
        return None;
    }
    Some((
        path.to_path_buf(),
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// Reads a file for `source` when it is a regular, small, UTF-8 file; a version read before
/// is not read again. A file that changes while it is read is not remembered.
fn load_sourced(path: &Path) -> Option<Arc<Sourced>> {
    let before = version(path)?;
    if let Ok(cache) = SOURCED.lock() {
        if let Some((_, s)) = cache.iter().find(|(v, _)| *v == before) {
            return Some(s.clone());
        }
    }
    let text = String::from_utf8(std::fs::read(path).ok()?).ok()?;
    let prog = parse(&text).ok();
    let defs = prog.as_ref().and_then(definitions_only);
    let s = Arc::new(Sourced {
        parses: prog.is_some(),
        text,
        defs,
    });
    if version(path).as_ref() == Some(&before) {
        if let Ok(mut cache) = SOURCED.lock() {
            if cache.len() >= SOURCED_CACHE_ENTRIES {
                cache.remove(0);
            }
            cache.push((before, s.clone()));
        }
    }
    Some(s)
}

/// Words of a simple command when every one is a known literal (no expansion at all).
fn literal_words(s: &ast::SimpleCommand) -> Option<Vec<String>> {
    let env = ExpandEnv {
        vars: &Default::default(),
        home: None,
        cwd: None,
        oldpwd: None,
    };
    let mut out = Vec::new();
    let mut push = |raw: &str| -> Option<()> {
        let mut notes = ExpandNotes::default();
        let fields = words::expand(raw, &env, &mut notes);
        if notes.unparseable || notes.dynamic || !notes.substitutions.is_empty() {
            return None;
        }
        for f in fields {
            out.push(f.known()?);
        }
        Some(())
    };
    if let Some(w) = &s.word_or_name {
        push(&w.value)?;
    }
    if let Some(suffix) = &s.suffix {
        for item in &suffix.0 {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) => push(&w.value)?,
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => push(&w.value)?,
                ast::CommandPrefixOrSuffixItem::IoRedirect(io) if quiet_redirect(io) => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// `2>/dev/null`, `>/dev/null`, `</dev/null`, `2>&1`: redirections that read or write nothing.
fn quiet_redirect(io: &ast::IoRedirect) -> bool {
    match io {
        ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Filename(w)) => {
            w.value == "/dev/null"
        }
        ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Duplicate(w)) => {
            w.value == "-" || w.value.bytes().all(|b| b.is_ascii_digit())
        }
        ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Fd(_)) => true,
        ast::IoRedirect::OutputAndError(w, _) => w.value == "/dev/null",
        _ => false,
    }
}

/// The definitions a file holds when it holds nothing else (see the module docs), else `None`.
fn definitions_only(prog: &ast::Program) -> Option<Definitions> {
    let mut out = Definitions::default();
    for cc in &prog.complete_commands {
        definitions_in_list(cc, &mut out)?;
    }
    Some(out)
}

fn definitions_in_list(list: &ast::CompoundList, out: &mut Definitions) -> Option<()> {
    for item in &list.0 {
        if matches!(item.1, ast::SeparatorOperator::Async) {
            return None;
        }
        let aol = &item.0;
        let mut pipes = vec![&aol.first];
        for a in &aol.additional {
            match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => pipes.push(p),
            }
        }
        for p in pipes {
            if p.seq.len() != 1 || p.timed.is_some() {
                return None;
            }
            definitions_in_command(&p.seq[0], out)?;
        }
    }
    Some(())
}

fn definitions_in_command(c: &ast::Command, out: &mut Definitions) -> Option<()> {
    match c {
        ast::Command::Function(f) => {
            if f.body.1.is_some() {
                return None;
            }
            out.defs.push(Definition {
                name: f.fname.value.clone(),
                kind: DefKind::Function,
                body: Arc::from(f.body.0.to_string()),
            });
            Some(())
        }
        ast::Command::Compound(ast::CompoundCommand::BraceGroup(g), None) => {
            definitions_in_list(&g.list, out)
        }
        ast::Command::Simple(s) => {
            if let Some(prefix) = &s.prefix {
                for item in &prefix.0 {
                    match item {
                        ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                            out.vars.push(assignment_name(a));
                        }
                        ast::CommandPrefixOrSuffixItem::IoRedirect(io) if quiet_redirect(io) => {}
                        _ => return None,
                    }
                }
            }
            if s.word_or_name.is_none() {
                return Some(());
            }
            if s.prefix.is_some() {
                // `X=1 cmd`: a command with a changed environment.
                return None;
            }
            let words = literal_words(s)?;
            let (name, args) = words.split_first()?;
            match name.as_str() {
                "alias" => {
                    for a in args.iter().filter(|a| *a != "--") {
                        let (n, v) = a.split_once('=')?;
                        out.defs.push(Definition {
                            name: n.to_string(),
                            kind: DefKind::Alias,
                            body: Arc::from(v),
                        });
                    }
                    Some(())
                }
                "export" | "declare" | "typeset" | "readonly" | "local" => {
                    for a in args {
                        if let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) {
                            // Attributes only: not `-f` (prints functions) or `-p` (prints).
                            if flags.is_empty() || !flags.chars().all(|c| "xrgilaAtu".contains(c)) {
                                return None;
                            }
                            continue;
                        }
                        let n = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
                        if !n
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
                        {
                            return None;
                        }
                        out.vars.push(n.trim_end_matches('+').to_string());
                    }
                    Some(())
                }
                "unset" => {
                    out.vars
                        .extend(args.iter().filter(|a| !a.starts_with('-')).cloned());
                    Some(())
                }
                "shopt" if shopt_neutral(args) => Some(()),
                "set" if set_neutral(args) => Some(()),
                "unalias" | "true" | ":" => Some(()),
                _ => None,
            }
        }
        _ => None,
    }
}

fn assignment_name(a: &ast::Assignment) -> String {
    match &a.name {
        ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
            n.clone()
        }
    }
}

impl Analyzer<'_> {
    /// The housekeeping builtins; `None` when `inv` is not one in a neutral form (the caller's
    /// rules then apply as before).
    pub(crate) fn housekeeping(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        depth: usize,
    ) -> Option<State> {
        let p = inv.program.as_str();
        let args: Option<Vec<String>> = inv.args.iter().map(Field::known).collect();
        match p {
            "builtin" => {
                let name = inv.args.first()?.known()?;
                if !SHELL_BUILTINS.contains(&name.as_str()) {
                    return None;
                }
                Some(self.invoke(st.clone(), inv.args, inv.env.clone(), inv.stdin, depth))
            }
            "shopt" if shopt_neutral(args.as_deref()?) => Some(st.clone()),
            "set" if set_neutral(args.as_deref()?) => Some(st.clone()),
            "jobs" if jobs_neutral(args.as_deref()?) => Some(st.clone()),
            "unalias" => {
                let args = args?;
                // `unalias -a`, `unalias [--] NAME…`: it removes aliases; the names are then
                // what they are without them.
                let mut st = st.clone();
                let ok = args
                    .iter()
                    .all(|a| a == "-a" || a == "--" || !a.starts_with('-'));
                if args.iter().any(|a| a == "-a") {
                    st.defs.retain(|d| d.kind != DefKind::Alias);
                }
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    st.defs.retain(|d| d.name != *a || d.kind != DefKind::Alias);
                }
                ok.then_some(st)
            }
            // The status word is a number: it names no path (substitutions in it were analysed
            // when it was expanded).
            "exit" | "return" => Some(st.clone()),
            "trap" => {
                let args = args?;
                let operands: Vec<&String> = args
                    .iter()
                    .skip_while(|a| *a == "--")
                    .filter(|a| !matches!(a.as_str(), "-p" | "-l" | "-P"))
                    .collect();
                if args.iter().any(|a| {
                    a.starts_with('-') && !matches!(a.as_str(), "-p" | "-l" | "-P" | "--" | "-")
                }) {
                    return None;
                }
                // `trap SIG` alone resets it; `trap - SIG…`, `trap '' SIG…` reset or ignore.
                if operands.len() >= 2 && !operands[0].is_empty() && operands[0] != "-" {
                    let code = operands[0].clone();
                    self.line(&code, st.clone(), depth + 1);
                    self.traps.push(code);
                }
                Some(st.clone())
            }
            _ => None,
        }
    }

    /// Analyses the trap bodies set since `from` with the state the shell is in when it exits.
    pub(crate) fn flush_traps(&mut self, from: usize, st: &State, depth: usize) {
        while self.traps.len() > from {
            let Some(code) = self.traps.pop() else { break };
            self.line(&code, st.clone(), depth + 1);
        }
    }

    /// Whether a known redirection target lies in the session's scratch directory from every
    /// directory the line may be in.
    pub(crate) fn in_scratch(&self, st: &State, f: &Field) -> bool {
        let (Some(scratch), Some(t)) = (self.ctx.scratch, f.known()) else {
            return false;
        };
        if f.has_glob() || t.is_empty() {
            return false;
        }
        st.cwds.iter().all(|c| {
            let cwd = match c {
                Some(c) => c.as_path(),
                None if t.starts_with('/') => Path::new("/"),
                None => return false,
            };
            paths::resolve(cwd, &t).starts_with(scratch)
        })
    }

    /// `source FILE ARGS…` / `. FILE ARGS…` (see the module docs); returns the state after it.
    pub(crate) fn source(&mut self, st: State, inv: &Invocation<'_>, depth: usize) -> State {
        let Some(f) = inv.args.first() else {
            self.add(
                Verdict::Yellow,
                "shell.source",
                "`source` runs a file's code in the shell".to_string(),
            );
            return st;
        };
        match f.known() {
            Some(t)
                if t == "/dev/stdin"
                    || t == "-"
                    || t.starts_with("/dev/fd/")
                    || t.starts_with("/proc/self/fd/") =>
            {
                self.source_floor();
                self.opaque("source", "code read from a stream");
                st
            }
            Some(t) => {
                let file = self.sourced_file(&st, &t);
                let sourced = file.as_deref().and_then(load_sourced);
                let outside = file.as_deref().is_some_and(|p| {
                    !p.starts_with(self.ctx.worktree)
                        && self.ctx.scratch.is_none_or(|s| !p.starts_with(s))
                });
                if let (true, Some(defs)) =
                    (outside, sourced.as_ref().and_then(|s| s.defs.as_ref()))
                {
                    return self.definitions(st, f, defs.clone());
                }
                self.source_floor();
                self.path_field(&st, f, paths::Access::Read);
                match sourced {
                    Some(s) if s.parses => self.line(&s.text, st, depth + 1),
                    _ => st,
                }
            }
            None => {
                self.source_floor();
                self.opaque(
                    "source",
                    "a file whose path or content is generated at run time",
                );
                st
            }
        }
    }

    fn source_floor(&mut self) {
        self.add(
            Verdict::Yellow,
            "shell.source",
            "`source` runs a file's code in the shell".to_string(),
        );
    }

    /// The file `source` reads: a path with a slash, from the one directory the line is in
    /// (a bare name is searched in `PATH` first: not followed).
    fn sourced_file(&self, st: &State, t: &str) -> Option<PathBuf> {
        if !t.contains('/') {
            return None;
        }
        let cwd = match st.cwds.as_slice() {
            [Some(c)] => c.as_path(),
            _ if t.starts_with('/') => Path::new("/"),
            _ => return None,
        };
        Some(paths::resolve(cwd, t))
    }

    /// A definitions-only file outside the worktree: its credential name still counts, its
    /// definitions join the state, the variables it sets become unknown.
    fn definitions(&mut self, mut st: State, f: &Field, defs: Definitions) -> State {
        if let Some(t) = f.known() {
            if let Some(c) = t.split('/').find(|c| paths::credential_component(c)) {
                self.add(
                    Verdict::Red,
                    "path.credential",
                    format!("`{t}` is a credential path ({c})"),
                );
            }
        }
        for v in defs.vars {
            self.assigns_variable(&v, Some("source"), &st);
            // Unknown afterwards, like a variable the agent inherited (the snapshot's `PATH`
            // is the person's own): not a value the line gave it.
            st.vars.remove(&v);
        }
        for d in defs.defs {
            if !st.defs.contains(&d) {
                st.defs.push(d);
            }
        }
        st
    }

    /// A command word naming sourced definitions: each body is analysed as the code that
    /// runs (the command itself is analysed too by the caller: bash may not have the
    /// definition, and the worse colour wins).
    pub(crate) fn defined_use(&mut self, st: &State, name: &str, args: &[Field], depth: usize) {
        let defs: Vec<Definition> = st.defs.iter().filter(|d| d.name == name).cloned().collect();
        if defs.is_empty() {
            return;
        }
        self.shadowed_use = true;
        // Marks the line as reaching code through a sourced file (its text can change between
        // an ask and the run: the runner gives such a line no grants of its own).
        self.add(
            Verdict::Green,
            "shell.source",
            format!("`{name}` runs a definition from a sourced file"),
        );
        if self.expanding.iter().any(|n| n == name) {
            return;
        }
        self.expanding.push(name.to_string());
        for d in defs {
            let text = match d.kind {
                DefKind::Function => d.body.to_string(),
                DefKind::Alias => {
                    let mut t = d.body.to_string();
                    for (i, a) in args.iter().enumerate() {
                        t.push(' ');
                        match a.known() {
                            Some(k) => t.push_str(&super::commands::shell_quote(&k)),
                            // An unset variable: unknown to the analyser, like the argument.
                            None => t.push_str(&format!("\"$__tyba_unknown_argument_{i}\"")),
                        }
                    }
                    t
                }
            };
            self.line(&text, st.clone(), depth + 1);
        }
        self.expanding.pop();
    }

    /// The one command a line wraps in neutral housekeeping, as the agent wrote it, when every
    /// other part of the line is neutral housekeeping and no sourced definition shadowed a
    /// command; `None` otherwise (the whole line is then its own key).
    pub(crate) fn inner_command(&self, text: &str) -> Option<String> {
        if self.shadowed_use {
            return None;
        }
        let mut pinned: Vec<String> = Vec::new();
        let inner = loop {
            let mut peel = Peel {
                a: self,
                vars: Vec::new(),
                assigned: Vec::new(),
                pinned: pinned.clone(),
                payload: None,
                extra: false,
            };
            peel.line(text);
            if peel.extra {
                return None;
            }
            let inner = peel.payload?;
            // An assignment the payload reads is part of it, not housekeeping: pin it, peel again.
            let read: Vec<String> = peel
                .assigned
                .iter()
                .filter(|v| {
                    !pinned.contains(v)
                        && (inner.contains(&format!("${v}")) || inner.contains(&format!("${{{v}")))
                })
                .cloned()
                .collect();
            if read.is_empty() {
                break inner;
            }
            if pinned.len() > 64 {
                return None;
            }
            pinned.extend(read);
        };
        let inner = inner.trim().to_string();
        (!inner.is_empty() && inner != text.trim()).then_some(inner)
    }
}

/// The syntactic walk behind [`Analyzer::inner_command`]: every top-level part must be neutral
/// housekeeping (by the same predicates the analyser uses) except one, which may be a subshell
/// or an `eval` of literal words holding the same shape again.
struct Peel<'a, 'p> {
    a: &'a Analyzer<'p>,
    /// Variables assigned a literal so far (for redirection targets like `"$_bgpids_file"`).
    vars: Vec<(String, String)>,
    /// Variables the housekeeping parts assign: a payload naming one is not peeled.
    assigned: Vec<String>,
    /// Variables whose assignments belong to the payload (it reads them).
    pinned: Vec<String>,
    payload: Option<String>,
    /// A second payload, or something that cannot be peeled.
    extra: bool,
}

impl Peel<'_, '_> {
    fn set_payload(&mut self, text: String) {
        if self.payload.is_some() {
            self.extra = true;
        } else {
            self.payload = Some(text);
        }
    }

    fn line(&mut self, text: &str) {
        let Ok(prog) = parse(text) else {
            self.extra = true;
            return;
        };
        let items: Vec<&ast::CompoundListItem> = prog
            .complete_commands
            .iter()
            .flat_map(|c| c.0.iter())
            .collect();
        self.items(text, &items, text.chars().count());
    }

    /// Items of one list; `end` is where the list's text ends (for a payload running to it), in
    /// characters like the parser's positions.
    fn items(&mut self, text: &str, items: &[&ast::CompoundListItem], end: usize) {
        let mut run: Option<usize> = None;
        let mut run_end = end;
        for item in items {
            if matches!(item.1, ast::SeparatorOperator::Async) {
                self.extra = true;
                return;
            }
            let pipes = pipelines(&item.0);
            let all_neutral = pipes.iter().all(|p| self.neutral_pipeline(p));
            for p in &pipes {
                if self.neutral_pipeline(p) {
                    self.record(p);
                }
            }
            if all_neutral {
                if run.is_some() && run_end == end {
                    run_end = start_of(item).unwrap_or(end);
                }
                continue;
            }
            // An and-or list of housekeeping around one eval or subshell.
            let non_neutral: Vec<&&ast::Pipeline> =
                pipes.iter().filter(|p| !self.neutral_pipeline(p)).collect();
            if non_neutral.len() == 1 && pipes.len() > 1 {
                if self.container(text, non_neutral[0]).is_some() {
                    continue;
                }
                match non_neutral[0].location() {
                    Some(l) if run.is_none() => {
                        let body = slice_chars(text, l.start.index, l.end.index);
                        self.set_payload(body.to_string());
                        continue;
                    }
                    _ => {
                        self.extra = true;
                        return;
                    }
                }
            }
            if run_end != end {
                // Housekeeping came between two payload items.
                self.extra = true;
                return;
            }
            if pipes.len() == 1 && self.container(text, pipes[0]).is_some() {
                continue;
            }
            if run.is_none() {
                run = start_of(item);
                if run.is_none() {
                    self.extra = true;
                    return;
                }
            }
        }
        if let Some(s) = run {
            let body = slice_chars(text, s, run_end);
            self.set_payload(trim_separators(body).to_string());
        }
    }

    /// A subshell without redirections, or `eval` of literal words: its content is peeled.
    fn container(&mut self, text: &str, p: &ast::Pipeline) -> Option<()> {
        if p.seq.len() != 1 || p.bang || p.timed.is_some() {
            return None;
        }
        match &p.seq[0] {
            ast::Command::Compound(ast::CompoundCommand::Subshell(s), None) => {
                let items: Vec<&ast::CompoundListItem> = s.list.0.iter().collect();
                let end = s.loc.end.index.saturating_sub(1);
                self.items(text, &items, end);
                Some(())
            }
            ast::Command::Simple(s) if s.prefix.is_none() => {
                let words = literal_words(s)?;
                let (name, args) = words.split_first()?;
                if name != "eval" {
                    return None;
                }
                let mut args = args.to_vec();
                // `eval 'CMD' \< /dev/null`: stdin from nothing.
                if args.len() >= 2
                    && args[args.len() - 2] == "<"
                    && args[args.len() - 1] == "/dev/null"
                {
                    args.truncate(args.len() - 2);
                }
                let code = args.join(" ");
                let mut inner = Peel {
                    a: self.a,
                    vars: self.vars.clone(),
                    assigned: Vec::new(),
                    pinned: self.pinned.clone(),
                    payload: None,
                    extra: false,
                };
                if parse(&code).is_err() {
                    self.set_payload(code);
                    return Some(());
                }
                inner.line(&code);
                self.assigned.extend(inner.assigned);
                if inner.extra {
                    self.set_payload(code);
                    return Some(());
                }
                match inner.payload {
                    Some(p) => self.set_payload(p),
                    None => self.set_payload(code),
                }
                Some(())
            }
            _ => None,
        }
    }

    /// Remembers the literal values a bare assignment gives.
    fn record(&mut self, p: &ast::Pipeline) {
        let [ast::Command::Simple(s)] = p.seq.as_slice() else {
            return;
        };
        if s.word_or_name.is_some() {
            // A sourced definitions file assigns its variables too.
            if let Some(words) = literal_words(s) {
                if let (Some(n), Some(f)) = (words.first(), words.get(1)) {
                    if n == "source" || n == "." {
                        let st = State::new(self.a.ctx.cwd);
                        if let Some(s) = self.a.sourced_file(&st, f).and_then(|p| load_sourced(&p))
                        {
                            if let Some(d) = &s.defs {
                                self.assigned.extend(d.vars.iter().cloned());
                            }
                        }
                    }
                }
            }
            return;
        }
        for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
            if let ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) = item {
                let name = assignment_name(a);
                self.vars.retain(|(k, _)| *k != name);
                self.assigned.push(name.clone());
                if let ast::AssignmentValue::Scalar(v) = &a.value {
                    if let Some(v) = self.literal(&v.value) {
                        self.vars.push((name, v));
                    }
                }
            }
        }
    }

    fn neutral_pipeline(&self, p: &ast::Pipeline) -> bool {
        if p.seq.len() != 1 || p.bang || p.timed.is_some() {
            return false;
        }
        match &p.seq[0] {
            ast::Command::Simple(s) => self.neutral_simple(s),
            // `{ \builtin unalias -- 'which'; \builtin unset -f -- 'which'; } >/dev/null 2>&1`:
            // a group of housekeeping whose output goes nowhere is housekeeping.
            ast::Command::Compound(ast::CompoundCommand::BraceGroup(g), redirs) => {
                redirs
                    .as_ref()
                    .is_none_or(|r| r.0.iter().all(quiet_redirect))
                    && g.list.0.iter().all(|item| {
                        !matches!(item.1, ast::SeparatorOperator::Async)
                            && pipelines(&item.0).iter().all(|p| self.neutral_pipeline(p))
                    })
            }
            _ => false,
        }
    }

    fn neutral_simple(&self, s: &ast::SimpleCommand) -> bool {
        // Bare assignments of literals or numeric specials.
        if s.word_or_name.is_none() {
            let Some(prefix) = &s.prefix else {
                return false;
            };
            return prefix.0.iter().all(|item| match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) => {
                    let name = assignment_name(a);
                    let ast::AssignmentValue::Scalar(v) = &a.value else {
                        return false;
                    };
                    if super::commands::is_exec_var(&name)
                        || a.append
                        || self.pinned.contains(&name)
                    {
                        return false;
                    }
                    numeric_special(&v.value) || self.literal(&v.value).is_some()
                }
                _ => false,
            });
        }
        if s.prefix.is_some() {
            return false;
        }
        let mut words = Vec::new();
        if let Some(w) = &s.word_or_name {
            match self.literal(&w.value) {
                Some(t) => words.push(t),
                None => return false,
            }
        }
        if let Some(suffix) = &s.suffix {
            for item in &suffix.0 {
                match item {
                    ast::CommandPrefixOrSuffixItem::Word(w) => match self.literal(&w.value) {
                        Some(t) => words.push(t),
                        None if words.first().is_some_and(|n| n == "exit" || n == "return")
                            && (numeric_special(&w.value) || plain_parameter(&w.value)) =>
                        {
                            words.push(String::new())
                        }
                        None => return false,
                    },
                    ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                        if !quiet_redirect(io) && !self.scratch_redirect(io) {
                            return false;
                        }
                    }
                    _ => return false,
                }
            }
        }
        let (mut name, mut args) = match words.split_first() {
            Some((n, a)) => (n.as_str(), a),
            None => return false,
        };
        if name == "builtin" {
            match args.split_first() {
                Some((n, a)) => {
                    name = n.as_str();
                    args = a;
                }
                None => return false,
            }
        }
        match name {
            "shopt" => shopt_neutral(args),
            "set" => set_neutral(args),
            "jobs" => jobs_neutral(args),
            "unalias" => args
                .iter()
                .all(|a| a == "-a" || a == "--" || !a.starts_with('-')),
            // Removing functions (not variables, which the payload may read): the names are
            // the programs again, as the whole line's analysis sees them.
            "unset" => {
                args.iter().any(|a| a == "-f")
                    && args
                        .iter()
                        .all(|a| a == "-f" || a == "--" || !a.starts_with('-'))
            }
            "exit" | "return" | "true" | ":" => true,
            "pwd" => args.iter().all(|a| a == "-P" || a == "-L"),
            "trap" => {
                let ops: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
                if ops.len() < 2 {
                    return ops.len() <= 1
                        && args.iter().all(|a| matches!(a.as_str(), "-p" | "-l" | "-"));
                }
                let mut inner = Peel {
                    a: self.a,
                    vars: self.vars.clone(),
                    assigned: Vec::new(),
                    pinned: self.pinned.clone(),
                    payload: None,
                    extra: false,
                };
                inner.line(ops[0]);
                !inner.extra && inner.payload.is_none()
            }
            "source" | "." => self.definitions_source(args),
            _ => false,
        }
    }

    fn definitions_source(&self, args: &[String]) -> bool {
        let Some(t) = args.first() else { return false };
        let st = State::new(self.a.ctx.cwd);
        let Some(file) = self.a.sourced_file(&st, t) else {
            return false;
        };
        let outside = !file.starts_with(self.a.ctx.worktree)
            && self.a.ctx.scratch.is_none_or(|s| !file.starts_with(s));
        outside
            && !t.split('/').any(paths::credential_component)
            && load_sourced(&file).is_some_and(|s| {
                s.defs.as_ref().is_some_and(|d| {
                    !d.vars
                        .iter()
                        .any(|v| super::commands::is_exec_var(v) || self.pinned.contains(v))
                })
            })
    }

    fn scratch_redirect(&self, io: &ast::IoRedirect) -> bool {
        let ast::IoRedirect::File(_, kind, ast::IoFileRedirectTarget::Filename(w)) = io else {
            return false;
        };
        if matches!(kind, ast::IoFileRedirectKind::Read) {
            return false;
        }
        let Some(t) = self.literal(&w.value) else {
            return false;
        };
        let st = State::new(self.a.ctx.cwd);
        self.a.in_scratch(&st, &Field::lit(&t))
    }

    /// The value of a raw word made of literals and the variables assigned literals so far.
    fn literal(&self, raw: &str) -> Option<String> {
        let vars = self
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), vec![Some(v.clone())]))
            .collect();
        let env = ExpandEnv {
            vars: &vars,
            home: None,
            cwd: None,
            oldpwd: None,
        };
        let mut notes = ExpandNotes::default();
        let fields = words::expand(raw, &env, &mut notes);
        if notes.unparseable || notes.dynamic || !notes.substitutions.is_empty() {
            return None;
        }
        match fields.as_slice() {
            [f] if !f.has_glob() => f.known(),
            _ => None,
        }
    }
}

fn pipelines(aol: &ast::AndOrList) -> Vec<&ast::Pipeline> {
    let mut out = vec![&aol.first];
    for a in &aol.additional {
        match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => out.push(p),
        }
    }
    out
}

fn start_of(item: &ast::CompoundListItem) -> Option<usize> {
    item.0.location().map(|l| l.start.index)
}

/// A payload's text without the separators and blanks that joined it to housekeeping.
fn trim_separators(s: &str) -> &str {
    let mut s = s.trim();
    loop {
        let t = s
            .strip_suffix("&&")
            .or_else(|| s.strip_suffix(';'))
            .or_else(|| s.strip_suffix("||"))
            .map(str::trim_end);
        match t {
            Some(t) if t != s => s = t,
            _ => return s,
        }
    }
}

/// The text between two character positions (the parser counts characters, not bytes).
fn slice_chars(text: &str, start: usize, end: usize) -> &str {
    let byte = |i: usize| text.char_indices().nth(i).map_or(text.len(), |(b, _)| b);
    let (s, e) = (byte(start), byte(end));
    text.get(s..e.max(s)).unwrap_or("")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn shopt_directions() {
        assert!(shopt_neutral(&w(
            "-u promptvars nullglob extglob nocaseglob dotglob"
        )));
        assert!(shopt_neutral(&w("-s extglob expand_aliases checkwinsize")));
        assert!(shopt_neutral(&w("-q extglob")));
        assert!(shopt_neutral(&w("-p")));
        assert!(shopt_neutral(&w("-s -o pipefail")));
        assert!(!shopt_neutral(&w("-s nullglob")));
        assert!(!shopt_neutral(&w("-s extglob dotglob")));
        assert!(!shopt_neutral(&w("-s -o posix")));
        assert!(!shopt_neutral(&w("-s frobnicate")));
        assert!(!shopt_neutral(&w("-x extglob")));
        // Options after names are names to bash: not accepted.
        assert!(!shopt_neutral(&w("extglob -s")));
    }

    #[test]
    fn set_directions() {
        assert!(set_neutral(&w("-euo pipefail")));
        assert!(set_neutral(&w("+e")));
        assert!(set_neutral(&w("-o errexit -o nounset")));
        assert!(set_neutral(&w("+o posix +a +k")));
        assert!(set_neutral(&w("-o")));
        assert!(!set_neutral(&[]));
        assert!(!set_neutral(&w("-a")));
        assert!(!set_neutral(&w("-ek")));
        assert!(!set_neutral(&w("-o posix")));
        assert!(!set_neutral(&w("-- x")));
        assert!(!set_neutral(&w("x")));
        assert!(!set_neutral(&w("-e x")));
    }

    #[test]
    fn jobs_and_status_words() {
        assert!(jobs_neutral(&w("-p")));
        assert!(jobs_neutral(&w("-l %1")));
        assert!(!jobs_neutral(&w("-x make")));
        for ok in ["$?", "${?}", "\"$?\"", "$#", "$$", "$!"] {
            assert!(numeric_special(ok), "{ok}");
        }
        for no in ["$x", "$(true)", "1", "$?x"] {
            assert!(!numeric_special(no), "{no}");
        }
        for ok in ["$__code", "\"${rc}\"", "$x1"] {
            assert!(plain_parameter(ok), "{ok}");
        }
        for no in ["$(make install)", "${x:-$(y)}", "$", "${x[0]}", "$1x-"] {
            assert!(!plain_parameter(no), "{no}");
        }
    }

    #[test]
    fn definitions_files() {
        let defs = |t: &str| definitions_only(&parse(t).unwrap());
        let d = defs("f () { rm -rf ~; }\nalias -- ll='ls -l'\nexport PATH=/usr/bin\nshopt -s expand_aliases\nunalias -a 2>/dev/null || true\n").unwrap();
        assert_eq!(d.defs.len(), 2);
        assert_eq!(d.defs[1].kind, DefKind::Alias);
        assert_eq!(&*d.defs[1].body, "ls -l");
        assert_eq!(d.vars, vec!["PATH"]);
        for not in [
            "echo hi",
            "f () { :; } &",
            "X=1 make",
            "shopt -s globstar",
            "eval \"$(echo Zgo= | base64 -d)\"",
            "declare -p",
            "alias ll=\"$(pwd)\"",
            "ls | cat",
        ] {
            assert!(defs(not).is_none(), "{not}");
        }
    }

    #[test]
    fn character_positions() {
        assert_eq!(slice_chars("a𐖌bc", 1, 3), "𐖌b");
        assert_eq!(slice_chars("abc", 2, 10), "c");
        assert_eq!(slice_chars("abc", 3, 1), "");
    }

    #[test]
    fn payload_separators() {
        assert_eq!(trim_separators(" make test && "), "make test");
        assert_eq!(trim_separators("a;\n"), "a");
        assert_eq!(trim_separators("a || "), "a");
    }
}
