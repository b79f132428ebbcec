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
    /// `shopt -s dotglob` may be in effect: globs match names starting with `.`.
    pub dotglob: bool,
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
            dotglob: false,
        }
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
        self.dotglob |= other.dotglob;
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
