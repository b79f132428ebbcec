//! Redirections: files read and written, descriptors duplicated, here-documents and
//! here-strings, process substitutions, and whether the command's stdin is fed.

use super::paths::{self, Access};
use super::words::Field;
use super::{Analyzer, State, Stdin};
use crate::verdict::Verdict;
use brush_parser::ast;
use std::path::Path;

impl Analyzer<'_> {
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
                if fd.unwrap_or(0) == 0 {
                    self.fed_script = (!doc.requires_expansion
                        || !doc.doc.value.contains(['$', '`', '\\']))
                    .then(|| doc.doc.value.clone());
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
                if fd.unwrap_or(0) == 0 {
                    self.fed_script = fields
                        .iter()
                        .map(Field::known)
                        .collect::<Option<Vec<String>>>()
                        .map(|t| t.join(" ") + "\n");
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

    pub(super) fn redirect_target(
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
                // `/dev/tcp/HOST/PORT`: the destination with its port, so an approval covers
                // that port only (a service name or a missing port: the bare host, which
                // covers no connection).
                let mut parts = t.split('/').skip(3);
                let host = parts.next().unwrap_or("");
                let host = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]")
                } else {
                    host.to_string()
                };
                let dest = match parts.next().and_then(|p| p.parse::<u16>().ok()) {
                    Some(port) => format!("{host}:{port}"),
                    None => host,
                };
                self.out.hosts.push(dest);
                self.add(
                    Verdict::Red,
                    "net.dev-tcp",
                    format!("`{t}` opens a network connection"),
                );
            }
            // The session's scratch directory is tyba's own, like the worktree, wherever it
            // lies: on a memory filesystem it is under `/dev/shm`, and a write that lands in it
            // (physically, from every directory the line may be in) is no device write.
            if access == Access::Write
                && (t.starts_with("/dev/")
                    || paths::resolve(Path::new("/"), &t).starts_with("/dev"))
                && t.starts_with('/')
                && !self.in_scratch(st, f)
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
}
