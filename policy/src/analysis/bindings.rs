//! What words bind: the values a `for` loop gives its variable, and which words of `cd`
//! are its operand.
//!
//! A `for` word that is a glob (`for f in */*.txt`) binds the variable to every path the glob
//! matches, as bash does (bash(1) "Pathname Expansion"), not to the pattern: the body's
//! `cat "$f"` then reads each match, and a match through a symlink out of the worktree
//! (`outdir/secret.txt`) is checked like `cat */*.txt` is. A glob matching more than can be
//! listed, or expanded where the directory is not known, binds a value that cannot be known
//! (never green where it is used).

use super::words::Field;
use super::{paths, Analyzer, State, VarValues};

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
                Some(c) => match paths::glob(c, &text) {
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
