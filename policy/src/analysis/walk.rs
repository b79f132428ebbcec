//! The syntax-tree walk: lines, lists, pipelines and compound commands, with the state each
//! may leave (DESIGN.md §2a: every branch and loop iteration counts, the worst wins).

use super::paths::Access;
use super::state::union_vec;
use super::syntax::{
    called_names, endless_spawning_loop, heredoc_delimiters, nesting, parse, spawn_cycle,
    MAX_NESTING,
};
use super::words::{self, VarValues};
use super::{Analyzer, State, Stdin, MAX_DEPTH, MAX_WORK};
use crate::verdict::Verdict;
use brush_parser::ast;

impl Analyzer<'_> {
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
        let parsed = self.parsed(text);
        match &*parsed {
            Ok((prog, rewritten)) => {
                let mut st = st;
                if prog.complete_commands.len() > 1 {
                    self.out.shape.compound = true;
                }
                self.sources
                    .push((rewritten.clone().unwrap_or_else(|| text.to_string()), depth));
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
    pub(super) fn salvage(&mut self, text: &str, st: &State, depth: usize) {
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

    pub(super) fn compound_list(
        &mut self,
        list: &ast::CompoundList,
        mut st: State,
        depth: usize,
    ) -> State {
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

    pub(super) fn and_or(&mut self, aol: &ast::AndOrList, st: State, depth: usize) -> State {
        if aol.additional.is_empty() {
            return self.pipeline(&aol.first, st, depth);
        }
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
    pub(super) fn inherited_stdin(&self) -> Stdin {
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

    pub(super) fn pipeline(&mut self, p: &ast::Pipeline, st: State, depth: usize) -> State {
        let first = self.inherited_stdin();
        if p.seq.len() == 1 {
            return self.command(&p.seq[0], st, first, depth);
        }
        self.out.shape.compound = true;
        let outer = self.piped_script.take();
        let outer_selection = self.piped_selection.take();
        let outer_piped = self.stdout_piped;
        let mut selection = None;
        for (i, c) in p.seq.iter().enumerate() {
            let stdin = if i == 0 { first } else { Stdin::Fed };
            self.piped_script = match i {
                0 => outer.clone(),
                _ => self.literal_output(&p.seq[i - 1], &st),
            };
            self.piped_selection = match i {
                0 => outer_selection.clone(),
                _ => selection.take(),
            };
            self.selection = None;
            self.stdout_piped = i + 1 < p.seq.len() || outer_piped;
            // Every stage runs in a subshell: its changes do not outlive the pipeline.
            self.command(c, st.clone(), stdin, depth);
            // What it prints of a selection: its own, or what it passes through.
            selection = match self.selection.take() {
                Some(s) => Some(s),
                None if passes_lines_through(c) => self.piped_selection.take(),
                None => None,
            };
        }
        self.piped_script = outer;
        self.piped_selection = outer_selection;
        self.stdout_piped = outer_piped;
        // The pipeline prints what its last stage prints.
        self.selection = selection;
        st
    }

    /// What a pipeline stage writes when it is `echo` or `printf` of literal words (`echo
    /// 'LINE'`, `printf '%s\n' A B`, `printf 'TEXT'`), approximately: enough to analyse a
    /// script piped into a shell. `None` otherwise.
    fn literal_output(&mut self, c: &ast::Command, st: &State) -> Option<String> {
        let ast::Command::Simple(s) = c else {
            return None;
        };
        if s.prefix.is_some() {
            return None;
        }
        // Decided by the name before any word is expanded (a glob reads directories).
        let name = s.word_or_name.as_ref()?.value.as_str();
        if !matches!(name, "echo" | "printf") {
            return None;
        }
        let mut words = Vec::new();
        for item in s.suffix.iter().flat_map(|x| x.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::Word(w) if !w.value.contains(['$', '`']) => {
                    for f in self.expand_word(&w.value, st) {
                        words.push(f.known()?);
                    }
                }
                _ => return None,
            }
        }
        let unescape = |t: &str| t.replace("\\n", "\n").replace("\\t", "\t");
        match name {
            "echo" => {
                let start = words
                    .iter()
                    .take_while(|w| matches!(w.as_str(), "-n" | "-e" | "-E" | "-ne" | "-en"))
                    .count();
                Some(unescape(&words[start..].join(" ")) + "\n")
            }
            "printf" => match words.split_first() {
                Some((format, [])) if !format.contains('%') => Some(unescape(format)),
                Some((format, rest))
                    if matches!(format.as_str(), "%s" | "%s\\n" | "%b" | "%b\\n") =>
                {
                    Some(unescape(&rest.join("\n")) + "\n")
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// Counts analysis work; true once the budget is spent (the line is then blocked).
    pub(super) fn over_budget(&mut self, units: usize) -> bool {
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

    pub(super) fn command(
        &mut self,
        c: &ast::Command,
        st: State,
        stdin: Stdin,
        depth: usize,
    ) -> State {
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
                if stdin == Stdin::Inherited {
                    return self.compound(cc, st, stdin, depth);
                }
                // Every command inside a loop, a branch or a group reads what the compound
                // command reads (`x | while read l; do sh; done`: `sh` reads the rest of
                // `x`), unless its own redirection replaces it.
                self.fed.push(true);
                let out = self.compound(cc, st, stdin, depth);
                self.fed.pop();
                out
            }
            ast::Command::Function(f) => {
                self.out.shape.compound = true;
                let name = f.fname.value.clone();
                let mut st = st;
                st.functions.push(name.clone());
                self.spawns.push((name.clone(), called_names(&f.body.0)));
                self.function_bodies
                    .push((name.clone(), f.body.0.to_string()));
                if let Some(f) = spawn_cycle(&self.spawns) {
                    self.add(Verdict::Blocked, "vault.fork-bomb", format!("function `{f}` calls itself (directly or through the functions it runs) with a call in a process of its own: a fork bomb"));
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

    pub(super) fn ext_test(&mut self, e: &ast::ExtendedTestExpr, st: &State) {
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

    pub(super) fn compound(
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
                // bash(1): an omitted condition (`for ((;;))`) evaluates to 1.
                let endless = f.condition.as_ref().is_none_or(|c| {
                    let c = c.value.trim();
                    c.is_empty() || c.parse::<i64>().is_ok_and(|n| n != 0)
                });
                if endless && endless_spawning_loop(None, false, &f.body.list) {
                    self.endless_spawning_loop();
                }
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
                let until = matches!(cc, ast::CompoundCommand::UntilClause(_));
                if endless_spawning_loop(Some(&w.0), until, &w.1.list) {
                    self.endless_spawning_loop();
                }
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

    /// A loop that never ends and starts a background job each round.
    fn endless_spawning_loop(&mut self) {
        self.add(
            Verdict::Blocked,
            "vault.fork-bomb",
            "an endless loop starts background jobs without end: a fork bomb",
        );
    }

    /// A loop: condition and body analysed from the entry state; when the body changes the
    /// state (a `cd`, an assignment), once more from the union, which reaches every state a
    /// further iteration could (the body's effects are the same each time).
    pub(super) fn loop_body(
        &mut self,
        body: &ast::CompoundList,
        cond: Option<&ast::CompoundList>,
        st: State,
        depth: usize,
    ) -> State {
        if self.over_budget(1) {
            return st;
        }
        let links_before = self.links.len() + self.unplaced_links.len();
        let c1 = match cond {
            Some(c) => self.compound_list(c, st.clone(), depth),
            None => st.clone(),
        };
        let b1 = self.compound_list(body, c1.clone(), depth);
        // A link the body made is there for the next iteration's words too.
        let made_links = self.links.len() + self.unplaced_links.len() != links_before;
        if b1 == st && c1 == st && !made_links {
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
    pub(super) fn compound_list_stdin(
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

    pub(super) fn pipeline_fed(&mut self, p: &ast::Pipeline, st: State, depth: usize) -> State {
        if p.seq.len() == 1 {
            return self.command(&p.seq[0], st, Stdin::Fed, depth);
        }
        self.pipeline(p, st, depth)
    }
}

/// Whether a pipeline stage prints only lines it reads (some of them, in some order):
/// `grep`, `rg`, `sort`, `head`, `tail`, `uniq`, `cat`, `tac`, `tee` named by a plain word.
/// Their options are not read: one that changes the lines (`grep -c`, `uniq -c`) makes the
/// selection carried through them wider than what they print, never narrower.
fn passes_lines_through(c: &ast::Command) -> bool {
    let ast::Command::Simple(s) = c else {
        return false;
    };
    s.word_or_name.as_ref().is_some_and(|w| {
        matches!(
            w.value.as_str(),
            "grep"
                | "egrep"
                | "fgrep"
                | "rg"
                | "sort"
                | "head"
                | "tail"
                | "uniq"
                | "cat"
                | "tac"
                | "tee"
        )
    })
}
