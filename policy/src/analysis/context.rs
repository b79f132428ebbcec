//! The narrow API the command rules call: findings, word expansion, paths checked against
//! the worktree, arithmetic and subscripts that run code, and the policy file's extra rules.

use super::paths::{self, Access, PathCtx};
use super::syntax::substitutions_in;
use super::words::{self, ExpandEnv, ExpandNotes, Field};
use super::{Analyzer, State, MAX_DEPTH, MAX_REPORTED_PATHS};
use crate::verdict::{Finding, Verdict};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Leading components of a word tried as the place of a link whose place cannot be known.
const MAX_UNPLACED_SPLITS: usize = 8;

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

    fn worktree_text(&self) -> Option<&str> {
        *self
            .worktree_text
            .get_or_init(|| self.ctx.worktree.to_str().filter(|w| paths::is_normal(w)))
    }

    fn hook(&self) -> &paths::HookPlace {
        self.hook
            .get_or_init(|| paths::HookPlace::new(self.ctx.worktree, self.pre_push_path()))
    }
}

impl Analyzer<'_> {
    pub(crate) fn add(&mut self, v: Verdict, rule: &str, reason: impl Into<String>) {
        self.out.add(Finding::new(v, rule, reason));
    }

    pub(super) fn path_ctx(&self) -> PathCtx<'_> {
        PathCtx {
            worktree: self.ctx.worktree,
            scratch: self.ctx.scratch,
            session: self,
        }
    }

    /// Tool actions: every path, worst wins. Tool paths get `~`, `~user` and `$HOME` handling.
    pub(super) fn tool_paths(&mut self, paths: &[String], access: Access) {
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
        self.expand_word_into(raw, st, &mut all);
        all
    }

    /// [`Self::expand_word`], appending the fields to `all`.
    pub(crate) fn expand_word_into(&mut self, raw: &str, st: &State, all: &mut Vec<Field>) {
        let start = all.len();
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
                params: st.params.as_deref(),
            };
            words::expand_into(raw, &env, &mut notes, all);
        }
        self.after_expand(notes, st);
        if raw.contains('[') && (raw.contains("$(") || raw.contains('`')) {
            for f in &all[start..] {
                let text = f.empty_variant();
                self.embedded_code(&text, st);
            }
        }
    }

    pub(super) fn after_expand(&mut self, notes: ExpandNotes, st: &State) {
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
    /// Checks `word` as resolved through the links the line made before it (and as any of
    /// those made at places that cannot be known)
    /// ([`paths::resolve_in`]), when one is on its way: the path the link leads to is
    /// judged like one written out (DESIGN.md §2: through a symlink counts); a link whose
    /// target cannot be known makes the path unresolved.
    fn through_links(
        &self,
        cwd: &Path,
        word: &str,
        access: Access,
        found: &mut Vec<Finding>,
        resolved: &mut Vec<PathBuf>,
    ) {
        let pc = self.path_ctx();
        // A link at a place that cannot be known may be the word or a directory on its way:
        // the target with each rest of the word.
        // An absolute word counts from the worktree (outside it, it is out of bounds anyway).
        let relative: Option<String> = if word.starts_with('/') {
            paths::lexical(cwd, word)
                .strip_prefix(self.ctx.worktree)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        } else {
            Some(word.to_string())
        };
        let comps: Vec<&str> = relative
            .as_deref()
            .unwrap_or("")
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .take(MAX_UNPLACED_SPLITS)
            .collect();
        for t in &self.unplaced_links {
            let Some(t) = t else {
                found.push(Finding::new(
                    Verdict::Yellow,
                    "path.unresolved",
                    format!("`{word}` may be a link made earlier on the line to a path that cannot be known"),
                ));
                continue;
            };
            for k in 0..comps.len() {
                let rest = comps[k + 1..].join("/");
                let p = if rest.is_empty() {
                    PathBuf::from(t)
                } else {
                    Path::new(t).join(rest)
                };
                // Judged, not reported as a path the command reaches (it may be none).
                match p.to_str() {
                    Some(text) => {
                        let _ = paths::check_path(&pc, Path::new("/"), text, access, found);
                    }
                    None => found.push(paths::not_text(word)),
                }
            }
        }
        for (p, through) in paths::resolve_all(cwd, word, &self.links) {
            match through {
                paths::Through::Nothing => {}
                paths::Through::Links => match p.to_str() {
                    Some(text) => {
                        if let Some(p) = paths::check_path(&pc, Path::new("/"), text, access, found)
                        {
                            resolved.push(p);
                        }
                    }
                    None => found.push(paths::not_text(word)),
                },
                paths::Through::Unknown => found.push(Finding::new(
                    Verdict::Yellow,
                    "path.unresolved",
                    format!("`{word}` goes through a link made earlier on the line to a path that cannot be known"),
                )),
            }
        }
    }

    /// [`Self::path_field`] for a path whose metadata (mode, owner, times) the command
    /// changes and nothing else (`chmod`, `chown`, `chgrp`): judged as a change, and named
    /// among the line's `metadata`, not its `changes` (what an approval lets the command
    /// remove, rename or link).
    ///
    /// `recursive` (`chmod -R`): the change reaches what is beneath it too
    /// (`metadata_trees`).
    pub(crate) fn metadata_field(&mut self, st: &State, f: &Field, recursive: bool) {
        let before = self.out.changes.len();
        self.path_field(st, f, Access::Modify);
        for p in self.out.changes.split_off(before) {
            if recursive && !self.out.metadata_trees.contains(&p) {
                self.out.metadata_trees.push(p.clone());
            }
            if !self.out.metadata.contains(&p) {
                self.out.metadata.push(p);
            }
        }
    }

    /// [`Self::path_field`] for what the command writes (`Access::Write`), returning the paths
    /// it added to the line's `writes`.
    pub(crate) fn written_field(&mut self, st: &State, f: &Field) -> Vec<PathBuf> {
        let before = self.out.writes.len();
        self.path_field(st, f, Access::Write);
        self.out.writes.get(before..).unwrap_or_default().to_vec()
    }

    /// [`Self::path_field`] for a file the command writes and saves by its program's own
    /// rule (`Classification::saved`: `sed -i`, `install`, `cp`).
    pub(crate) fn saved_field(&mut self, st: &State, f: &Field) {
        let written = self.written_field(st, f);
        crate::verdict::push_new(&mut self.out.saved, written);
    }

    /// [`Self::path_field`] for a directory the command makes (`Classification::dirs_made`:
    /// `mkdir`, `install -d`); with `parents` (`mkdir -p`, `install -d`) it makes the missing
    /// directories above it too (`Classification::parents_made`).
    pub(crate) fn dir_field(&mut self, st: &State, f: &Field, parents: bool) {
        let written = self.written_field(st, f);
        if parents {
            crate::verdict::push_new(&mut self.out.parents_made, written.clone());
        }
        crate::verdict::push_new(&mut self.out.dirs_made, written);
    }

    pub(crate) fn path_field(&mut self, st: &State, f: &Field, access: Access) {
        let mut found = Vec::new();
        let mut resolved: Vec<PathBuf> = Vec::new();
        let pc = self.path_ctx();
        match f.known_text() {
            Some(text) => {
                let candidates: Vec<Cow<'_, str>> = if f.has_glob() {
                    let mut all = Vec::new();
                    let mut too_wide = false;
                    for cwd in &st.cwds {
                        match cwd {
                            Some(c) => match paths::glob(c, &text, st.glob_opts()) {
                                Some(m) if m.is_empty() => all.push(text.to_string()),
                                Some(m) => all.extend(m),
                                None => too_wide = true,
                            },
                            None => all.push(text.to_string()),
                        }
                    }
                    if too_wide {
                        found.push(Finding::new(
                            Verdict::Yellow,
                            "path.glob-too-wide",
                            format!("`{text}` matches too many paths to check"),
                        ));
                        let prefix = paths::pattern::literal_prefix(&text).to_string();
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
                    all.into_iter().map(Cow::Owned).collect()
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
                                // Through the links made earlier on the line too: the link
                                // may or may not be there, the worse of both counts.
                                if !self.links.is_empty() || !self.unplaced_links.is_empty() {
                                    self.through_links(c, &cand, access, &mut found, &mut resolved);
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
            if access == Access::Modify
                && self.out.changes.len() < MAX_REPORTED_PATHS
                && !self.out.changes.contains(&p)
            {
                self.out.changes.push(p.clone());
            }
            if self.out.paths.len() < MAX_REPORTED_PATHS && !self.out.paths.contains(&p) {
                self.out.paths.push(p);
            }
        }
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
