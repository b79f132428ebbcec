//! The "always" key of a line: the one command it wraps in neutral housekeeping, peeled out
//! of the agent's wrapper text.

use super::*;

impl Analyzer<'_> {
    /// The one command a line wraps in neutral housekeeping, as the agent wrote it, when every
    /// other part of the line is neutral housekeeping and no sourced definition shadowed a
    /// command; `None` otherwise (the whole line is then its own key).
    pub(crate) fn inner_command(&self, text: &str) -> Option<String> {
        if self.shadowed_use || self.left_whole(text) {
            return None;
        }
        self.peeled(text)
    }

    /// [`Self::inner_command`] by the whole walk ([`Peel`]).
    fn peeled(&self, text: &str) -> Option<String> {
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

impl Analyzer<'_> {
    /// Whether peeling leaves the line whole, decided without judging its parts: a line of
    /// one item (no `&`) whose text, less the separators around it, is the whole line, and
    /// which is either one pipeline holding nothing to peel (not a subshell, not `eval`), or
    /// an and-or list of pipelines none of which can be housekeeping. [`Peel::items`] gives
    /// no payload for the first when it is housekeeping and the line itself when it is not,
    /// and the line itself for the second: either way the line is its own key.
    fn left_whole(&self, text: &str) -> bool {
        let parsed = self.parsed(text);
        let Ok((prog, _)) = &*parsed else {
            return false;
        };
        let [list] = prog.complete_commands.as_slice() else {
            return false;
        };
        let [item] = list.0.as_slice() else {
            return false;
        };
        if matches!(item.1, ast::SeparatorOperator::Async) {
            return false;
        }
        let aol = &item.0;
        let whole = if aol.additional.is_empty() {
            !may_contain(&aol.first)
        } else {
            !may_be_housekeeping(&aol.first)
                && aol.additional.iter().all(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => !may_be_housekeeping(p),
                })
        };
        if !whole {
            return false;
        }
        let Some(start) = start_of(item) else {
            return false;
        };
        let payload = trim_separators(slice_chars(text, start, text.chars().count())).trim();
        payload.is_empty() || payload == text.trim()
    }
}

/// A word of these characters is its own one literal field (no quoting, expansion or pattern).
fn plain_word(w: &str) -> bool {
    !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./+-:@%,".contains(&b))
}

/// Whether [`Peel::container`] may peel `p`: not when it is several commands, negated or
/// timed, or one simple command with assignments before it or whose command word is a plain
/// word other than `eval`.
fn may_contain(p: &ast::Pipeline) -> bool {
    if p.seq.len() != 1 || p.bang || p.timed.is_some() {
        return false;
    }
    match &p.seq[0] {
        ast::Command::Simple(s) => {
            s.prefix.is_none()
                && !s
                    .word_or_name
                    .as_ref()
                    .is_some_and(|w| plain_word(&w.value) && w.value != "eval")
        }
        _ => true,
    }
}

/// Whether [`Peel::neutral_pipeline`] may find `p` neutral: not when it is several commands,
/// negated or timed, or one simple command without assignments before it whose command word
/// is a plain word naming no housekeeping builtin.
fn may_be_housekeeping(p: &ast::Pipeline) -> bool {
    if p.seq.len() != 1 || p.bang || p.timed.is_some() {
        return false;
    }
    match &p.seq[0] {
        ast::Command::Simple(s) if s.prefix.is_none() => {
            !s.word_or_name.as_ref().is_some_and(|w| {
                plain_word(&w.value)
                    && w.value != "builtin"
                    && !HOUSEKEEPING.contains(&w.value.as_str())
            })
        }
        _ => true,
    }
}

/// The syntactic walk behind [`Analyzer::inner_command`]: every top-level part must be neutral
/// housekeeping (by the same predicates the analyser uses) except one, which may be a subshell
/// or an `eval` of literal words holding the same shape again.
pub(super) struct Peel<'a, 'p> {
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
    pub(super) fn set_payload(&mut self, text: String) {
        if self.payload.is_some() {
            self.extra = true;
        } else {
            self.payload = Some(text);
        }
    }

    pub(super) fn line(&mut self, text: &str) {
        let parsed = self.a.parsed(text);
        let Ok((prog, _)) = &*parsed else {
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
    pub(super) fn items(&mut self, text: &str, items: &[&ast::CompoundListItem], end: usize) {
        let mut run: Option<usize> = None;
        let mut run_end = end;
        for item in items {
            if matches!(item.1, ast::SeparatorOperator::Async) {
                self.extra = true;
                return;
            }
            let pipes = pipelines(&item.0);
            // Whether each pipeline is neutral depends on the literal variables recorded so far:
            // judged before recording, again as each is recorded, and after; a judgement is
            // reused while no variable changed.
            let before: Vec<bool> = pipes.iter().map(|p| self.neutral_pipeline(p)).collect();
            let all_neutral = before.iter().all(|n| *n);
            let mut changed = false;
            for (p, n) in pipes.iter().zip(&before) {
                let n = if changed {
                    self.neutral_pipeline(p)
                } else {
                    *n
                };
                if n {
                    changed |= self.record(p);
                }
            }
            let neutral = if changed {
                pipes.iter().map(|p| self.neutral_pipeline(p)).collect()
            } else {
                before
            };
            if all_neutral {
                if run.is_some() && run_end == end {
                    run_end = start_of(item).unwrap_or(end);
                }
                continue;
            }
            // An and-or list of housekeeping around one eval or subshell.
            let non_neutral: Vec<&&ast::Pipeline> = pipes
                .iter()
                .zip(&neutral)
                .filter(|(_, n)| !**n)
                .map(|(p, _)| p)
                .collect();
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
    pub(super) fn container(&mut self, text: &str, p: &ast::Pipeline) -> Option<()> {
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
                // Only an `eval` is peeled: other commands need no more words.
                let name = literal_fields(&s.word_or_name.as_ref()?.value)?;
                if name.first().map(String::as_str) != Some("eval") {
                    return None;
                }
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

    /// Remembers the literal values a bare assignment gives; whether the variables may have
    /// changed.
    pub(super) fn record(&mut self, p: &ast::Pipeline) -> bool {
        let [ast::Command::Simple(s)] = p.seq.as_slice() else {
            return false;
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
            return false;
        }
        let mut changed = false;
        for item in s.prefix.iter().flat_map(|p| p.0.iter()) {
            if let ast::CommandPrefixOrSuffixItem::AssignmentWord(a, _) = item {
                changed = true;
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
        changed
    }

    pub(super) fn neutral_pipeline(&self, p: &ast::Pipeline) -> bool {
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

    pub(super) fn neutral_simple(&self, s: &ast::SimpleCommand) -> bool {
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
                    if crate::analysis::commands::is_exec_var(&name)
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
                // Only the names judged below can be housekeeping: others need no more words.
                Some(t) if t == "builtin" || HOUSEKEEPING.contains(&t.as_str()) => words.push(t),
                _ => return false,
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

    pub(super) fn definitions_source(&self, args: &[String]) -> bool {
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
                    !d.vars.iter().any(|v| {
                        crate::analysis::commands::is_exec_var(v) || self.pinned.contains(v)
                    })
                })
            })
    }

    pub(super) fn scratch_redirect(&self, io: &ast::IoRedirect) -> bool {
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
    pub(super) fn literal(&self, raw: &str) -> Option<String> {
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
            params: None,
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

/// The builtins [`Peel::neutral_simple`] may judge neutral housekeeping (each has its arm
/// there; any other command word is not housekeeping).
const HOUSEKEEPING: &[&str] = &[
    "shopt", "set", "jobs", "unalias", "unset", "exit", "return", "true", ":", "pwd", "trap",
    "source", ".",
];

pub(super) fn pipelines(aol: &ast::AndOrList) -> Vec<&ast::Pipeline> {
    let mut out = vec![&aol.first];
    for a in &aol.additional {
        match a {
            ast::AndOr::And(p) | ast::AndOr::Or(p) => out.push(p),
        }
    }
    out
}

pub(super) fn start_of(item: &ast::CompoundListItem) -> Option<usize> {
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn character_positions() {
        assert_eq!(slice_chars("a𐖌bc", 1, 3), "𐖌b");
        assert_eq!(slice_chars("abc", 2, 10), "c");
        assert_eq!(slice_chars("abc", 3, 1), "");
    }

    /// A line the shortcut leaves whole is one the whole walk leaves whole too.
    #[test]
    fn left_whole_agrees_with_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let policy = crate::Policy::embedded_default();
        let ctx = crate::Context {
            worktree: dir.path(),
            cwd: dir.path(),
            home: None,
            scratch: None,
            git: None,
        };
        let a = Analyzer::new(&policy, &ctx);
        let mut whole = 0;
        for line in [
            "ls -la",
            "git status",
            "rm -rf build",
            "cargo test;",
            "  ls ; ",
            "ls &",
            "ls # note",
            "X=1 ls",
            "X=1",
            "shopt -s nullglob",
            "true",
            "eval ls",
            "eval 'ls'",
            "(ls)",
            "{ ls; }",
            "! ls",
            "time ls",
            "cat README.md | grep foo | wc -l",
            "cd src && cat main.rs",
            "cd src || cat main.rs && ls",
            "shopt -s x && cat f",
            "true && eval ls",
            "set -e && (ls)",
            "ls && builtin cd x",
            "unset -f x && ls",
            "ls && X=1",
            "ls; ls",
            "$x && ls",
            "'ls' && ls",
            "\\ls && ls",
        ] {
            if a.left_whole(line) {
                whole += 1;
                assert_eq!(a.peeled(line), None, "{line}");
            }
        }
        assert!(whole >= 10, "{whole}");
    }

    #[test]
    fn payload_separators() {
        assert_eq!(trim_separators(" make test && "), "make test");
        assert_eq!(trim_separators("a;\n"), "a");
        assert_eq!(trim_separators("a || "), "a");
    }
}
