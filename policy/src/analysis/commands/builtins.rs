//! Builtins that change the walk's state: `read`/`mapfile`/`let` and `declare`/`export`
//! assign variables, `cd`/`pushd`/`popd` move the line's directory.

use super::*;

impl Analyzer<'_> {
    /// Builtins that assign variables from input: `read`, `mapfile`/`readarray` (whose `-C`
    /// callback is a command), `getopts`, `let` (arithmetic).
    pub(crate) fn assigning_builtin(
        &mut self,
        st: State,
        inv: &Invocation<'_>,
        depth: usize,
    ) -> State {
        let p = inv.program.as_str();
        let args = inv.args;
        self.unlisted(p);
        let mut st = st;
        // The entry's table: which options take a value (`registry/builtins.rs`).
        let table = registry::lookup(p).map_or(&[][..], |e| e.options);
        let mut operands = Vec::new();
        for t in parse_opts(args, table) {
            match t {
                Tok::Opt { name, value } => {
                    if (name == "-a" && p == "read") || name == "-C" {
                        if name == "-C" {
                            match value.as_ref().and_then(Field::known) {
                                Some(code) => {
                                    self.add(
                                        Verdict::Yellow,
                                        "wrapper.mapfile",
                                        format!("`{p} -C` runs a callback"),
                                    );
                                    self.line(&code, st.clone(), depth + 1);
                                }
                                None => self.opaque(p, "a callback that cannot be known"),
                            }
                        } else if let Some(n) = value.as_ref().and_then(Field::known) {
                            self.assigns_variable(&n, Some(p), &st);
                            st.vars.insert(n, vec![None]);
                        }
                    }
                }
                Tok::DynamicOpt => self.opaque(p, "an option that cannot be known"),
                Tok::Operand(f) => operands.push(f),
            }
        }
        let names: Vec<Field> = match p {
            "getopts" => operands.into_iter().skip(1).take(1).collect(),
            "mapfile" | "readarray" => operands.into_iter().last().into_iter().collect(),
            _ => operands,
        };
        // `… | while read f`: a line of a selection piped in (`find`, `fd`) is one of the
        // paths it prints, those of the pre-push hook's tree among them (a whole line, for
        // one name; any other line is not known).
        let lines: Option<Vec<Option<String>>> =
            (p == "read" && names.len() == 1 && inv.stdin == Stdin::Fed)
                .then_some(self.piped_selection.as_ref())
                .flatten()
                .map(|nodes| {
                    nodes
                        .iter()
                        .map(|n| Some(n.word.clone()))
                        .chain([None])
                        .collect()
                });
        if let (Some(values), Some(name)) = (lines, names.first().and_then(Field::known)) {
            if is_identifier(&name) {
                self.assigns_variable(&name, Some(p), &st);
                st.vars.insert(name, values);
                return st;
            }
        }
        for f in names {
            let Some(t) = f.known() else {
                self.opaque(p, "a variable name that cannot be known");
                continue;
            };
            let name = t.split(['=', '[', '+']).next().unwrap_or("").to_string();
            if p == "let" {
                self.arith(&t, &st);
            }
            self.assigns_variable(&name, Some(p), &st);
            st.vars.insert(name, vec![None]);
        }
        st
    }

    /// `export`/`declare`/`local`/`readonly`: assignments, exec-capable variables red.
    pub(crate) fn declare(&mut self, st: State, inv: &Invocation<'_>) -> State {
        let mut st = st;
        let p = inv.program.as_str();
        self.unlisted(p);
        // `declare -n ref=NAME`: assigning `ref` assigns NAME.
        let nameref = inv
            .args
            .iter()
            .filter_map(Field::known)
            .any(|t| t.starts_with('-') && !t.starts_with("--") && t.contains('n'));
        for a in inv.args {
            match a.known() {
                Some(t) if t.starts_with('-') => {}
                Some(t) => {
                    let (n, v) = match t.split_once('=') {
                        Some((n, v)) => (n.trim_end_matches('+').to_string(), Some(v.to_string())),
                        None => (t.clone(), None),
                    };
                    if nameref {
                        if let Some(target) = &v {
                            self.assigns_variable(target, Some("declare -n"), &st);
                        }
                    }
                    if is_exec_assignment(&n, v.as_deref()) {
                        self.add(
                            Verdict::Red,
                            "env.exec-variable",
                            format!("`{p} {n}` makes programs run code"),
                        );
                    }
                    if let Some(v) = &v {
                        self.config_dir_assignment(&n, Some(&Field::lit(v)), &st);
                        self.git_config_env(&n, Some(&Field::lit(v)));
                    }
                    if let Some(v) = v {
                        for f in split_colon_list(&Field::lit(&v)) {
                            self.path_field(&st, &f, Access::Read);
                        }
                        st.vars.insert(n, vec![Some(v)]);
                    }
                }
                None => {
                    if let Some((_, value)) = crate::analysis::assignments::split_assignment(a) {
                        self.assignment_value_paths(&st, &value);
                    }
                    let prefix = a.known_prefix();
                    let name = prefix.split('=').next().unwrap_or("");
                    if name.is_empty() || is_exec_var(name) || !prefix.contains('=') {
                        if name.is_empty() {
                            self.add(
                                Verdict::Red,
                                "env.exec-variable",
                                format!("`{p}` assigns a variable whose name cannot be known"),
                            );
                        } else if is_exec_var(name) {
                            self.add(
                                Verdict::Red,
                                "env.exec-variable",
                                format!("`{p} {name}` makes programs run code"),
                            );
                        }
                    }
                    if !name.is_empty() && prefix.contains('=') {
                        let value = crate::analysis::assignments::split_assignment(a)
                            .map(|(_, value)| value);
                        self.config_dir_assignment(name, value.as_ref(), &st);
                        self.git_config_env(name, None);
                    }
                    if !name.is_empty() {
                        st.vars.insert(name.to_string(), vec![None]);
                    }
                }
            }
        }
        st
    }

    /// `cd DIR`, `pushd DIR`, `popd`, `cd -`: change where later words resolve.
    pub(crate) fn cd(&mut self, st: State, inv: &Invocation<'_>) -> State {
        let p = inv.program.as_str();
        let mut st = st;
        let operands: Vec<&Field> = crate::analysis::bindings::cd_operands(inv.args);
        if p == "popd" {
            let prev = st.cwds.clone();
            st.cwds = st.dirstack.pop().unwrap_or_else(|| vec![None]);
            st.oldpwd = prev;
            return st;
        }
        // Several fields are several possible values (`${x:-..}`): every one is a candidate.
        if operands.len() > 1 {
            let mut all: Vec<Option<PathBuf>> = Vec::new();
            for f in &operands {
                let one = Invocation {
                    program: inv.program.clone(),
                    args: std::slice::from_ref(*f),
                    env: inv.env.clone(),
                    stdin: inv.stdin,
                };
                let after = self.cd(st.clone(), &one);
                crate::analysis::union_vec(&mut all, &after.cwds);
            }
            let mut st = st;
            st.oldpwd = std::mem::replace(&mut st.cwds, all);
            return st;
        }
        let target = operands.first().copied();
        let new_cwds: Vec<Option<PathBuf>> = match target {
            None => {
                if p == "pushd" {
                    st.dirstack.last().cloned().unwrap_or_else(|| vec![None])
                } else {
                    match self.ctx.home {
                        Some(h) => {
                            // A home whose path is no UTF-8 text is judged as unknown.
                            let home = h.to_str().map_or_else(Field::unknown, Field::lit);
                            self.path_field(&st, &home, Access::Read);
                            vec![Some(h.to_path_buf())]
                        }
                        None => {
                            self.add(
                                Verdict::Yellow,
                                "path.unresolved",
                                "`cd` to an unknown home directory".to_string(),
                            );
                            vec![None]
                        }
                    }
                }
            }
            Some(f) if f.known().as_deref() == Some("-") => {
                let old = st.oldpwd.clone();
                if old.contains(&None) {
                    self.add(
                        Verdict::Yellow,
                        "path.unresolved",
                        "`cd -` returns to a directory not known on this line".to_string(),
                    );
                }
                old
            }
            Some(f) => {
                self.path_field(&st, f, Access::Read);
                // Through the links made earlier on the line, each there or not.
                let mut dirs: Vec<Option<PathBuf>> = match f.known() {
                    Some(t) if !f.has_glob() => {
                        let mut dirs = Vec::new();
                        for c in &st.cwds {
                            match c {
                                Some(c) => {
                                    for (d, _) in
                                        crate::analysis::paths::resolve_all(c, &t, &self.links)
                                    {
                                        if !dirs.contains(&Some(d.clone())) {
                                            dirs.push(Some(d));
                                        }
                                    }
                                }
                                None => dirs.push(None),
                            }
                        }
                        dirs
                    }
                    _ => vec![None],
                };
                // A relative name not starting with `.` is looked up in CDPATH first.
                if let Some(t) = f
                    .known()
                    .filter(|t| !t.starts_with('/') && !t.starts_with('.'))
                {
                    if let Some(values) = st.vars.get("CDPATH").cloned() {
                        for v in values {
                            match v {
                                Some(list) => {
                                    for entry in list.split(':').filter(|e| !e.is_empty()) {
                                        let cand = format!("{}/{t}", entry.trim_end_matches('/'));
                                        self.path_field(&st, &Field::lit(&cand), Access::Read);
                                        for c in st.cwds.clone().into_iter().flatten() {
                                            let d =
                                                Some(crate::analysis::paths::resolve(&c, &cand));
                                            if !dirs.contains(&d) {
                                                dirs.push(d);
                                            }
                                        }
                                    }
                                }
                                None => {
                                    self.add(
                                        Verdict::Yellow,
                                        "path.unresolved",
                                        format!("`cd {t}` follows a CDPATH that cannot be known"),
                                    );
                                    dirs.push(None);
                                }
                            }
                        }
                    }
                }
                dirs
            }
        };
        if p == "pushd" {
            st.dirstack.push(st.cwds.clone());
        }
        st.oldpwd = std::mem::replace(&mut st.cwds, new_cwds);
        st
    }
}

#[cfg(test)]
mod tests {
    use super::testing::expect;
    use crate::Verdict::{Blocked, Green, Red};

    #[test]
    fn directories_and_variables_carry_to_later_commands() {
        expect(&[
            ("cd src && ls", Green, ""),
            ("cd / && rm -rf etc", Blocked, ""),
            ("cd ~ && rm -rf .", Blocked, ""),
            ("d=/etc; rm -rf $d", Blocked, ""),
            ("export LD_PRELOAD=/x.so", Red, "env.exec-variable"),
            ("declare -x BASH_ENV=x", Red, "env.exec-variable"),
        ]);
    }
}
