//! What words bind: the values a `for` loop gives its variable, what `read` takes from a
//! here-string, and which words of `cd` are its operand.
//!
//! A `for` word that is a glob (`for f in */*.txt`) binds the variable to every path the glob
//! matches, as bash does (bash(1) "Pathname Expansion"), not to the pattern: the body's
//! `cat "$f"` then reads each match, and a match through a symlink out of the worktree
//! (`outdir/secret.txt`) is checked like `cat */*.txt` is. A glob matching more than can be
//! listed, or expanded where the directory is not known, binds a value that cannot be known
//! (never green where it is used).
//!
//! `read [-r] NAME… <<< WORD` binds the names to the fields of WORD's first line, split on the
//! default IFS (the last name takes the rest), as bash(1) "read" does; other forms of `read`
//! (another IFS, `-a`, `-d`, `-N`, backslashes without `-r`) bind values that cannot be known.

use super::words::Field;
use super::{paths, Analyzer, State, VarValues};
use brush_parser::ast;

impl Analyzer<'_> {
    /// The values a `for` word binds: its matches when it is a glob that matches (the pattern
    /// itself when nothing matches), the word's value otherwise; `None` for what cannot be
    /// known.
    pub(crate) fn for_word_values(&self, st: &State, field: &Field) -> VarValues {
        let Some(text) = field.known() else {
            return vec![None];
        };
        if !field.has_glob() {
            return vec![Some(text)];
        }
        let mut values: VarValues = Vec::new();
        for cwd in &st.cwds {
            let found = match cwd {
                Some(c) => match paths::glob(c, &text, st.glob_opts()) {
                    Some(m) if m.is_empty() => vec![Some(text.clone())],
                    Some(m) => m.into_iter().map(Some).collect(),
                    None => vec![None],
                },
                None => vec![None],
            };
            for v in found {
                if !values.contains(&v) {
                    values.push(v);
                }
            }
        }
        values
    }
}

impl Analyzer<'_> {
    /// The variables `read NAME… <<< WORD` binds, when WORD and the split are known; set in
    /// `after` (the state the command left, where `read` bound them to unknown values).
    pub(crate) fn bind_here_string_read(
        &mut self,
        s: &ast::SimpleCommand,
        st: &State,
        after: &mut State,
    ) {
        // `IFS=… read`, or an IFS assigned earlier, splits otherwise: left unknown.
        if s.word_or_name.as_ref().map(|w| w.value.as_str()) != Some("read")
            || st.vars.contains_key("IFS")
            || s.prefix.as_ref().is_some_and(|p| {
                p.0.iter()
                    .any(|i| matches!(i, ast::CommandPrefixOrSuffixItem::AssignmentWord(..)))
            })
        {
            return;
        }
        let mut word = None;
        let mut names: Vec<String> = Vec::new();
        let mut raw = false;
        let mut options = true;
        for item in s.suffix.iter().flat_map(|x| x.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(ast::IoRedirect::HereString(fd, w))
                    if fd.is_none_or(|n| n == 0) =>
                {
                    word = Some(w.value.clone())
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    let t = &w.value;
                    if options && t == "-r" {
                        raw = true;
                    } else if options && t == "--" {
                        options = false;
                    } else if options && t.starts_with('-') {
                        // Any other option (`-a`, `-d`, `-N`, `-p`…): left unknown.
                        return;
                    } else if t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !t.is_empty()
                    {
                        options = false;
                        names.push(t.clone());
                    } else {
                        return;
                    }
                }
                _ => {}
            }
        }
        let Some(word) = word else { return };
        if names.is_empty() {
            return;
        }
        // A here-string is one word: expanded, not split or globbed.
        let value = Field::joined(self.expand_word(&word, st)).known();
        let Some(value) = value else { return };
        let line = value.lines().next().unwrap_or("");
        if !raw && line.contains('\\') {
            return;
        }
        let mut rest = line.trim_matches([' ', '\t']);
        for (i, name) in names.iter().enumerate() {
            let v = if i + 1 == names.len() {
                std::mem::take(&mut rest).to_string()
            } else {
                let (head, tail) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
                rest = tail.trim_start_matches([' ', '\t']);
                head.to_string()
            };
            after.vars.insert(name.clone(), vec![Some(v)]);
        }
    }
}

/// The operand of `cd`/`pushd` (bash(1) "cd [-L|[-P [-e]] [-@]] [dir]"): options end at the
/// first word that is not one, or after `--`; `-` alone is an operand (the previous
/// directory). `cd --` has no operand; `cd -- -weird` has `-weird`.
pub(crate) fn cd_operands(args: &[Field]) -> Vec<&Field> {
    let mut out = Vec::new();
    let mut options = true;
    for a in args {
        if options {
            match a.known() {
                Some(t) if t == "--" => {
                    options = false;
                    continue;
                }
                Some(t) if t.starts_with('-') && t.len() > 1 => continue,
                _ => options = false,
            }
        }
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cd_operands;
    use crate::analysis::words::Field;

    fn ops(words: &[&str]) -> Vec<String> {
        let f: Vec<Field> = words.iter().map(|w| Field::lit(w)).collect();
        cd_operands(&f)
            .into_iter()
            .map(|f| f.known().unwrap_or_default())
            .collect()
    }

    #[test]
    fn double_dash_ends_the_options_of_cd() {
        assert!(ops(&["--"]).is_empty());
        assert_eq!(ops(&["--", "-weird"]), ["-weird"]);
        assert_eq!(ops(&["-L", "--", "--"]), ["--"]);
        assert_eq!(ops(&["-P", "src"]), ["src"]);
        assert_eq!(ops(&["-"]), ["-"]);
        assert_eq!(ops(&["src", "-x"]), ["src", "-x"]);
    }
}
