//! The walk's state: the directories a line may be in, the variables assigned on it, the
//! functions and sourced definitions it has, and where a command's stdin comes from.

use super::housekeeping;
use super::paths;
use super::words::{Field, VarValues};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the line may be: every directory it may be in (`None` = unknown), the previous
/// directory for `cd -`, the variables assigned earlier on the line, and defined functions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    pub cwds: Vec<Option<PathBuf>>,
    pub oldpwd: Vec<Option<PathBuf>>,
    pub dirstack: Vec<Vec<Option<PathBuf>>>,
    pub vars: HashMap<String, VarValues>,
    pub functions: Vec<String>,
    /// Functions and aliases from sourced definitions files, analysed where they are used.
    pub defs: Vec<housekeeping::Definition>,
    /// The positional parameters (`$1`, `$@`, `$#`) the line may have: `None` until `set`
    /// with operands or `shift` changes them (the line's own, see `words::params`), else
    /// every list they may be, `None` for a list that cannot be known (bash(1) "Positional
    /// Parameters"; DESIGN.md §2a: unknown values are never empty).
    pub params: Option<Vec<Option<Vec<String>>>>,
    /// `shopt -s dotglob` may be in effect: globs match names starting with `.`.
    pub dotglob: bool,
    /// `shopt -s nocaseglob` may be in effect: globs match letters in either case.
    pub nocaseglob: bool,
    /// `shopt -s globstar` may be in effect: `**` matches at any depth.
    pub globstar: bool,
}

impl State {
    pub(super) fn new(cwd: &Path) -> Self {
        State {
            cwds: vec![Some(cwd.to_path_buf())],
            oldpwd: vec![None],
            dirstack: Vec::new(),
            vars: HashMap::new(),
            functions: Vec::new(),
            defs: Vec::new(),
            params: None,
            dotglob: false,
            nocaseglob: false,
            globstar: false,
        }
    }

    /// `shopt [-s|-u] NAME…`: the glob options it may switch on. An option name that cannot
    /// be known may be any of them. Switching one off is not counted (another branch may
    /// have it on; on matches more).
    pub(crate) fn shopt(&mut self, args: &[Field]) {
        let mut on = false;
        let mut set_o = false;
        for a in args {
            match a.known() {
                Some(t) if t.starts_with('-') && t.len() > 1 => {
                    on |= t.contains('s');
                    set_o |= t.contains('o');
                }
                Some(name) if on && !set_o => match name.as_str() {
                    "nocaseglob" => self.nocaseglob = true,
                    "dotglob" => self.dotglob = true,
                    "globstar" => self.globstar = true,
                    _ => {}
                },
                Some(_) => {}
                None => {
                    self.nocaseglob = true;
                    self.dotglob = true;
                    self.globstar = true;
                }
            }
        }
    }

    /// Sets the positional parameters (`set -- WORDS`): the words' values, or a list that
    /// cannot be known when one of them cannot or is a glob (its matches are the words).
    pub(crate) fn set_params(&mut self, words: &[Field]) {
        let list: Option<Vec<String>> = words
            .iter()
            .map(|w| if w.has_glob() { None } else { w.known() })
            .collect();
        self.params = Some(vec![list]);
    }

    /// `shift N`: drops the first `n` positional parameters of every list (`None`: a count
    /// that cannot be known, which leaves lists that cannot be known). bash(1): a count
    /// beyond `$#` fails and changes nothing.
    pub(crate) fn shift_params(&mut self, n: Option<usize>) {
        let lists = match self.params.take() {
            Some(lists) => lists,
            // The line's own: none (a shift fails), or, as `$1` reads them, not known.
            None => vec![Some(Vec::new()), None],
        };
        let mut out = Vec::new();
        for l in lists {
            let next = match (l, n) {
                (Some(words), Some(n)) if n <= words.len() => Some(words[n..].to_vec()),
                (Some(words), Some(_)) => Some(words),
                _ => None,
            };
            if !out.contains(&next) {
                out.push(next);
            }
        }
        self.params = Some(out);
    }

    /// Moves every working directory into `dir` (a `-C DIR` option): relative to each, or
    /// unknown when the word's value is not known.
    pub(crate) fn enter(&mut self, dir: &Field) {
        self.cwds = match dir.known() {
            Some(d) => self
                .cwds
                .iter()
                .map(|c| c.as_ref().map(|c| paths::resolve(c, &d)))
                .collect(),
            None => vec![None],
        };
    }

    /// Whether globs may match names starting with `.`: after `shopt -s dotglob`, or once
    /// `GLOBIGNORE` is assigned a value that is not empty or cannot be known (bash(1):
    /// "setting GLOBIGNORE to a non-null value has the effect of enabling dotglob"; the names
    /// it then leaves out are not modelled, so every dot name counts).
    pub(crate) fn dotglob_on(&self) -> bool {
        self.dotglob
            || self
                .vars
                .get("GLOBIGNORE")
                .is_some_and(|v| v.iter().any(|x| x.as_deref() != Some("")))
    }

    /// The glob options that may be in effect ([`Self::dotglob_on`], `nocaseglob`).
    pub(crate) fn glob_opts(&self) -> paths::GlobOpts {
        paths::GlobOpts {
            nocase: self.nocaseglob,
            dot: self.dotglob_on(),
            star: self.globstar,
        }
    }

    /// Every state either branch may leave (worst case of both).
    pub(super) fn union(&mut self, other: &State) {
        union_vec(&mut self.cwds, &other.cwds);
        union_vec(&mut self.oldpwd, &other.oldpwd);
        for (k, v) in &other.vars {
            match self.vars.get_mut(k) {
                Some(mine) => union_vec(mine, v),
                None => {
                    let mut vals = v.clone();
                    // The other branch did not assign it: its old value is unknown here.
                    if !vals.contains(&None) {
                        vals.push(None);
                    }
                    self.vars.insert(k.clone(), vals);
                }
            }
        }
        let keys: Vec<String> = self
            .vars
            .keys()
            .filter(|k| !other.vars.contains_key(*k))
            .cloned()
            .collect();
        for k in keys {
            if let Some(v) = self.vars.get_mut(&k) {
                if !v.contains(&None) {
                    v.push(None);
                }
            }
        }
        for f in &other.functions {
            if !self.functions.contains(f) {
                self.functions.push(f.clone());
            }
        }
        for d in &other.defs {
            if !self.defs.contains(d) {
                self.defs.push(d.clone());
            }
        }
        if self.params != other.params {
            // A side that never set them has the line's own, counted as not known here.
            let mut mine = self.params.take().unwrap_or_else(|| vec![None]);
            union_vec(&mut mine, other.params.as_deref().unwrap_or(&[None]));
            self.params = Some(mine);
        }
        self.dotglob |= other.dotglob;
        self.nocaseglob |= other.nocaseglob;
        self.globstar |= other.globstar;
        if self.dirstack.len() < other.dirstack.len() {
            self.dirstack = other.dirstack.clone();
        }
    }
}

pub(super) fn union_vec<T: PartialEq + Eq + std::hash::Hash + Clone>(a: &mut Vec<T>, b: &[T]) {
    if a.len() + b.len() <= 16 {
        for x in b {
            if !a.contains(x) {
                a.push(x.clone());
            }
        }
        return;
    }
    // Long sets (many `cd`s that may fail): hash, so a line of thousands stays linear.
    let mut seen: std::collections::HashSet<T> = a.iter().cloned().collect();
    for x in b {
        if seen.insert(x.clone()) {
            a.push(x.clone());
        }
    }
}

/// Where a command's standard input comes from, for "piped or redirected into a shell".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// The agent's own stdin.
    Inherited,
    /// Another command's output (`a | b`), a file (`< f`), a here-document or here-string.
    Fed,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn list(s: &str) -> Option<Vec<String>> {
        Some(s.split_whitespace().map(str::to_string).collect())
    }

    #[test]
    fn set_and_shift_change_every_list() {
        let mut st = State::new(Path::new("/w"));
        assert_eq!(st.params, None);
        st.set_params(&[Field::lit("x"), Field::lit("rm"), Field::lit("-rf")]);
        assert_eq!(st.params, Some(vec![list("x rm -rf")]));
        st.shift_params(Some(1));
        assert_eq!(st.params, Some(vec![list("rm -rf")]));
        // A count beyond `$#` fails and changes nothing.
        st.shift_params(Some(3));
        assert_eq!(st.params, Some(vec![list("rm -rf")]));
        st.shift_params(None);
        assert_eq!(st.params, Some(vec![None]));
        st.set_params(&[Field::lit("a"), Field::unknown()]);
        assert_eq!(st.params, Some(vec![None]));
        // Shifting the line's own: none, or not known.
        let mut own = State::new(Path::new("/w"));
        own.shift_params(Some(1));
        assert_eq!(own.params, Some(vec![Some(vec![]), None]));
    }

    #[test]
    fn shopt_switches_glob_options_on() {
        let mut st = State::new(Path::new("/w"));
        st.shopt(&[Field::lit("-s"), Field::lit("nocaseglob")]);
        assert_eq!(
            st.glob_opts(),
            paths::GlobOpts {
                nocase: true,
                dot: false,
                star: false
            }
        );
        st.shopt(&[Field::lit("-u"), Field::lit("nocaseglob")]);
        assert!(st.nocaseglob, "switching off is not counted");
        let mut st = State::new(Path::new("/w"));
        st.shopt(&[Field::lit("-so"), Field::lit("dotglob")]);
        assert!(!st.dotglob, "`-o` names set -o options");
        st.shopt(&[
            Field::lit("-s"),
            Field::lit("extglob"),
            Field::lit("dotglob"),
        ]);
        assert!(st.dotglob && !st.nocaseglob);
        let mut st = State::new(Path::new("/w"));
        st.shopt(&[Field::lit("-s"), Field::unknown()]);
        assert!(st.dotglob && st.nocaseglob);
        let mut other = State::new(Path::new("/w"));
        other.union(&st);
        assert!(other.dotglob && other.nocaseglob);
    }

    #[test]
    fn a_branch_that_set_them_and_one_that_did_not_give_both() {
        let start = State::new(Path::new("/w"));
        let mut set = start.clone();
        set.set_params(&[Field::lit("rm")]);
        let mut a = set.clone();
        a.union(&start);
        assert_eq!(a.params, Some(vec![list("rm"), None]));
        let mut b = start.clone();
        b.union(&set);
        assert_eq!(b.params, Some(vec![None, list("rm")]));
        let mut same = set.clone();
        same.union(&set);
        assert_eq!(same.params, Some(vec![list("rm")]));
    }
}
