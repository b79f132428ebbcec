//! Operands checked as paths: every operand-like word of a command, option values that look
//! like paths, a registry judgement's paths, and symlinks a recursion follows out of the
//! worktree (DESIGN.md §2a "Words and paths").

use super::*;

impl Analyzer<'_> {
    /// Checks every operand-like word as a path: operands, `--opt=VALUE` values, `key=VALUE`
    /// values and attached short-option values that look like paths.
    pub(crate) fn generic_paths(&mut self, st: &State, args: &[Field], access: Access) {
        for f in args {
            for cand in path_candidates(f) {
                let cand = self.tilde_value(&cand, f);
                self.path_field(st, &cand, access);
            }
        }
    }

    /// bash expands `~` after the `=` of `key=~/x` and `--opt=~/x` words: a value taken out of
    /// such a word gets that expansion.
    pub(super) fn tilde_value(&self, cand: &Field, from: &Field) -> Field {
        if cand == from {
            return cand.clone();
        }
        match (cand.known(), self.ctx.home) {
            (Some(t), Some(h)) if t == "~" || t.starts_with("~/") => {
                Field::lit(&format!("{}{}", h.display(), &t[1..]))
            }
            _ => cand.clone(),
        }
    }

    /// A recursion that follows symlinks reads wherever they point: look for symlinks leading
    /// out of the worktree below the start paths (bounded; too many entries is not green).
    /// When it `changes` what it reaches (`chown -R -L`), a link into a system path is a
    /// modification there: blocked (DESIGN.md §2, the vault).
    pub(super) fn symlinks_out(&mut self, st: &State, starts: &[Field], changes: bool) {
        const MAX_ENTRIES: usize = 4096;
        let mut queue: Vec<PathBuf> = Vec::new();
        for s in starts {
            match s.known() {
                Some(t) => {
                    for cwd in st.cwds.iter().flatten() {
                        queue.push(crate::analysis::paths::resolve(cwd, &t));
                    }
                }
                None => {
                    self.add(
                        Verdict::Yellow,
                        "path.unresolved",
                        "a recursion that follows symlinks from a path that cannot be known"
                            .to_string(),
                    );
                    return;
                }
            }
        }
        let worktree = self.ctx.worktree.to_path_buf();
        let mut seen = 0usize;
        // A link out was reported (a change goes on looking for one into a system path).
        let mut out = false;
        while let Some(dir) = queue.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                seen += 1;
                if seen > MAX_ENTRIES {
                    self.add(
                        Verdict::Yellow,
                        "path.symlink-scan",
                        "a recursion that follows symlinks over more entries than tyba checks"
                            .to_string(),
                    );
                    return;
                }
                let Ok(ft) = e.file_type() else { continue };
                let path = e.path();
                if ft.is_symlink() {
                    let target = crate::analysis::paths::resolve_os(&dir, &e.file_name());
                    if !target.starts_with(&worktree) {
                        if !out {
                            self.add(
                                Verdict::Red,
                                "path.outside-worktree",
                                format!("the recursion follows the symlink `{}` out of the worktree (to {})", path.display(), target.display()),
                            );
                            out = true;
                        }
                        if changes && crate::analysis::paths::is_system_path(&target) {
                            self.add(
                                Verdict::Blocked,
                                "vault.system-path",
                                format!(
                                    "the recursion follows the symlink `{}` into a system path and changes it ({})",
                                    path.display(),
                                    target.display()
                                ),
                            );
                            return;
                        }
                        if !changes {
                            return;
                        }
                        continue;
                    }
                } else if ft.is_dir() && e.file_name() != ".git" {
                    queue.push(path);
                }
            }
        }
    }

    /// `--opt=VALUE` words of green-list commands whose value looks like a path: the value is
    /// a word like any other (DESIGN.md §2a), whatever the option.
    pub(super) fn option_value_paths(&mut self, st: &State, args: &[Field]) {
        for f in args {
            let Some(t) = f.known() else { continue };
            let Some((name, v)) = t.strip_prefix("--").and_then(|l| l.split_once('=')) else {
                continue;
            };
            // Patterns, formats and colours are not paths (`rg --glob=.env` names no file).
            let pattern_valued = [
                "glob",
                "include",
                "exclude",
                "regexp",
                "pattern",
                "format",
                "color",
                "colour",
                "replace",
                "type",
                "sort",
                "label",
                "separator",
                "delimiter",
            ]
            .iter()
            .any(|k| name.contains(k))
                && !name.ends_with("-from");
            if pattern_valued || v.is_empty() {
                continue;
            }
            let cand = self.tilde_value(&Field::lit(v), f);
            self.path_field(st, &cand, Access::Read);
        }
    }

    pub(super) fn judged(&mut self, st: &State, j: Judgement, args: &[Field]) {
        self.option_value_paths(st, args);
        if let Some(starts) = &j.follows_links {
            self.symlinks_out(st, starts, false);
        }
        for f in j.findings {
            self.out.add(f);
        }
        if j.reads_cwd {
            self.path_field(st, &Field::lit("."), Access::Read);
        }
        for (f, a) in j.paths {
            if j.saves && a == Access::Write {
                self.saved_field(st, &f);
            } else {
                self.path_field(st, &f, a);
            }
        }
        for (what, reason) in j.opaque {
            self.opaque(what, reason);
        }
    }
}
