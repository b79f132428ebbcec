//! Sourced definitions files: a file read once per version, its functions and aliases kept in
//! the line's state and analysed where they are used, and `source`/`.` itself.

use super::*;

/// Largest file `source` is analysed from; a larger one keeps the old rules.
pub(super) const MAX_SOURCED_BYTES: u64 = 1 << 20;

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
pub(super) struct Definitions {
    pub(super) defs: Vec<Definition>,
    /// Variables assigned or declared (unknown afterwards).
    pub(super) vars: Vec<String>,
}

/// A file `source` reads, as read: its text, whether it parses, and its definitions when it
/// holds nothing else.
#[derive(Debug)]
pub(super) struct Sourced {
    text: String,
    parses: bool,
    pub(super) defs: Option<Definitions>,
}

/// What identifies one version of a file: device, inode, size, modification and change
/// times (the change time moves on every write).
pub(super) type FileVersion = (PathBuf, u64, u64, u64, i64, i64, i64, i64);

/// Files `source` read, newest last: an agent's wrapper sources the same snapshot for every
/// command, and parsing it each time would cost more than the rest of the line.
pub(super) static SOURCED: std::sync::Mutex<Vec<(FileVersion, Arc<Sourced>)>> =
    std::sync::Mutex::new(Vec::new());
pub(super) const SOURCED_CACHE_ENTRIES: usize = 32;

pub(super) fn version(path: &Path) -> Option<FileVersion> {
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
pub(super) fn load_sourced(path: &Path) -> Option<Arc<Sourced>> {
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

/// The fields of one raw word when each is a known literal (no expansion at all).
pub(super) fn literal_fields(raw: &str) -> Option<Vec<String>> {
    let env = ExpandEnv {
        vars: &Default::default(),
        home: None,
        cwd: None,
        oldpwd: None,
        params: None,
    };
    let mut notes = ExpandNotes::default();
    let fields = words::expand(raw, &env, &mut notes);
    if notes.unparseable || notes.dynamic || !notes.substitutions.is_empty() {
        return None;
    }
    fields.iter().map(Field::known).collect()
}

/// Words of a simple command when every one is a known literal (no expansion at all).
pub(super) fn literal_words(s: &ast::SimpleCommand) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut push = |raw: &str| -> Option<()> {
        out.extend(literal_fields(raw)?);
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
pub(super) fn quiet_redirect(io: &ast::IoRedirect) -> bool {
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
pub(super) fn definitions_only(prog: &ast::Program) -> Option<Definitions> {
    let mut out = Definitions::default();
    for cc in &prog.complete_commands {
        definitions_in_list(cc, &mut out)?;
    }
    Some(out)
}

pub(super) fn definitions_in_list(list: &ast::CompoundList, out: &mut Definitions) -> Option<()> {
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

pub(super) fn definitions_in_command(c: &ast::Command, out: &mut Definitions) -> Option<()> {
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

pub(super) fn assignment_name(a: &ast::Assignment) -> String {
    match &a.name {
        ast::AssignmentName::VariableName(n) | ast::AssignmentName::ArrayElementName(n, _) => {
            n.clone()
        }
    }
}

impl Analyzer<'_> {
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

    pub(super) fn source_floor(&mut self) {
        self.add(
            Verdict::Yellow,
            "shell.source",
            "`source` runs a file's code in the shell".to_string(),
        );
    }

    /// The file `source` reads: a path with a slash, from the one directory the line is in
    /// (a bare name is searched in `PATH` first: not followed).
    pub(super) fn sourced_file(&self, st: &State, t: &str) -> Option<PathBuf> {
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
    pub(super) fn definitions(&mut self, mut st: State, f: &Field, defs: Definitions) -> State {
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
                            Some(k) => t.push_str(&crate::analysis::commands::shell_quote(&k)),
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
}
