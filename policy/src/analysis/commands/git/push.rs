//! Pushes judged from the line alone, when no git inspector is at hand (DESIGN.md §3: a push
//! that may update a protected branch is blocked).

use super::*;

impl Analyzer<'_> {
    /// Without a git inspector: a push naming a protected branch, or switching the hook off,
    /// is blocked; a push whose destination cannot be seen from the line could reach a
    /// protected branch through the repository's configuration, so it is blocked too.
    pub(crate) fn git_push_static(&mut self, args: &[Field], protected: &[String]) {
        let known: Vec<String> = args.iter().filter_map(Field::known).collect();
        let push_at = known.iter().position(|a| a == "push" || a == "send-pack");
        let after = &known[push_at.map(|p| p + 1).unwrap_or(0).min(known.len())..];
        // git's own parser (parse-options: `--no-verif`, `--verify` after it, `--` ends the
        // options); words git would reject, or words that cannot be known, are read one by
        // one below, as options wherever they could be.
        let parsed = (push_at.is_some() && args.iter().all(Field::is_known))
            .then(|| crate::git_options::parse(after, crate::git_options::PUSH_OPTIONS).ok())
            .flatten();
        if let Some(p) = parsed {
            if p.last_bool("no-verify") == Some(true) {
                self.add(
                    Verdict::Blocked,
                    "git.guard.no-verify",
                    "`git push --no-verify` skips the pre-push hook that guards protected branches"
                        .to_string(),
                );
            }
            let mut named = p.last_bool("all") == Some(true) || p.last_bool("mirror") == Some(true);
            // The first operand is the repository; the refspecs follow.
            let explicit = p.operands.len() > 1;
            for a in p.operands.iter().skip(1) {
                named |= push_names_protected(a, protected);
            }
            if named || !explicit {
                self.add(Verdict::Blocked, "git.push.protected", "this push may update a protected branch (main/master) and the repository was not inspected".to_string());
            }
            return;
        }
        let mut named = false;
        let mut explicit = false;
        for a in after {
            if a.starts_with("--no-ver") || a.starts_with("--no-veri") || a == "--no-verify" {
                self.add(
                    Verdict::Blocked,
                    "git.guard.no-verify",
                    "`git push --no-verify` skips the pre-push hook that guards protected branches"
                        .to_string(),
                );
            }
            if a == "--all" || a == "--mirror" || a == "--branches" {
                named = true;
            }
            if a.starts_with('-') {
                continue;
            }
            explicit = true;
            named |= push_names_protected(a, protected);
        }
        if named || !explicit {
            self.add(Verdict::Blocked, "git.push.protected", "this push may update a protected branch (main/master) and the repository was not inspected".to_string());
        }
    }
}

/// Whether the push word `a` (a refspec, or a word read as one) may update a protected
/// branch: its destination names one, or is `HEAD`/`@`, a pattern, or `:` (matching refs).
fn push_names_protected(a: &str, protected: &[String]) -> bool {
    let dst = a
        .rsplit(':')
        .next()
        .unwrap_or(a)
        .trim_start_matches(['+', '^']);
    let short = dst.trim_start_matches("refs/").trim_start_matches("heads/");
    protected.iter().any(|p| p.eq_ignore_ascii_case(short))
        || dst == "HEAD"
        || dst == "@"
        || a.contains('*')
        || a == ":"
        || a == "+:"
}
