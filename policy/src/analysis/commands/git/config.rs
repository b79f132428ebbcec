//! git's configuration: global options (`-c`, `--config-env`, `-C`…), keys whose value git
//! runs or that switch the push guard off, and `git config` reads and writes (DESIGN.md §2a
//! "git").

use super::*;

impl Analyzer<'_> {
    /// One git global option.
    pub(crate) fn git_global(
        &mut self,
        st: &State,
        st_git: &mut State,
        opt: &str,
        v: Option<Field>,
        not_green: &mut Vec<String>,
        config: &mut Vec<(String, Option<String>)>,
    ) {
        let Some(v) = v else {
            not_green.push(format!("`{opt}` without a value"));
            return;
        };
        match opt {
            "-C" => {
                self.path_field(st_git, &v, Access::Read);
                st_git.enter(&v);
            }
            "--git-dir" | "--work-tree" => self.path_field(st_git, &v, Access::Read),
            "--exec-path" => {
                self.add(
                    Verdict::Red,
                    "git.program-option",
                    "`git --exec-path=DIR` runs git programs from another directory".to_string(),
                );
                self.path_field(st, &v, Access::Read);
            }
            "-c" => {
                match v.known() {
                    Some(kv) => {
                        let (k, val) = match kv.split_once('=') {
                            Some((k, val)) => (k.to_string(), Some(val.to_string())),
                            None => (kv.clone(), None),
                        };
                        self.git_config_key(&k, val.as_deref(), "-c");
                        // Values are words: `blame.ignoreRevsFile=.env` names a credential.
                        if let Some(val) = &val {
                            if !val.is_empty() {
                                let v = self.tilde_value(&Field::lit(val), &Field::default());
                                self.path_field(st_git, &v, Access::Read);
                            }
                        }
                        config.push((k, val));
                    }
                    None => {
                        self.opaque("git -c", "a configuration value that cannot be known");
                    }
                }
                not_green.push("`-c`".to_string());
            }
            "--config-env" => {
                match v.known() {
                    Some(kv) => {
                        let k = kv.split_once('=').map(|(k, _)| k.to_string()).unwrap_or(kv);
                        // The value comes from the environment: unknown, treat as code-capable.
                        self.git_config_key(&k, None, "--config-env");
                    }
                    None => self.opaque("git --config-env", "a key that cannot be known"),
                }
                not_green.push("`--config-env`".to_string());
            }
            _ => not_green.push(format!("`{opt}`")),
        }
    }

    /// Configuration keys whose value is a program (red) or that switch the push guard off
    /// (blocked).
    pub(crate) fn git_config_key(&mut self, key: &str, value: Option<&str>, how: &str) {
        let k = key.to_ascii_lowercase();
        if k == "core.hookspath" || k.starts_with("hook.") {
            if how == "-c" || how == "--config-env" {
                // For this one command: it matters when the command can push (decided once
                // the subcommand is known).
                self.hook_override = true;
                return;
            }
            self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git {how} {key}` changes which hooks git runs: it switches the push guard off"));
            return;
        }
        // Keys whose value git runs (git_tables, shared with the git guard).
        let code = crate::git_tables::runs_program(key, value);
        if code {
            // Whether the code could push (checked with the hooks path of the same invocation,
            // which the code's own git inherits): a value that names a push or send-pack, or
            // that cannot be known. Any other code is red here, and each program it runs is
            // judged at its own exec with that environment.
            let lower = value.map(str::to_ascii_lowercase);
            let this_command = how == "-c" || how == "--config-env";
            if this_command
                && lower
                    .as_deref()
                    .is_none_or(|v| v.contains("push") || v.contains("send-pack"))
            {
                self.config_code_may_push = true;
            }
            let shown = value.map(|v| format!("={v}")).unwrap_or_default();
            self.add(
                Verdict::Red,
                "git.config-code",
                format!("`git {how} {key}{shown}` sets a key whose value git runs as a program"),
            );
        }
    }

    /// `git config`: reads (`--get*`, `--list`, `get`, `list`) are green; anything else is a
    /// write (yellow); global/system writes are red; hook keys and sections are blocked. Long
    /// options are matched the way git's parser does, abbreviations included (`--unset-a`,
    /// `--glob`); an option git would not recognise, or an ambiguous one, counts as a write.
    pub(crate) fn git_config(&mut self, known: &[String], rest: &[Field], st: &State) {
        const READ: &[&str] = &[
            "get",
            "get-all",
            "get-regexp",
            "get-urlmatch",
            "get-color",
            "get-colorbool",
            "list",
            "show-origin",
            "show-scope",
            "name-only",
            "null",
            "includes",
            "no-includes",
            "default",
            "type",
            "bool",
            "int",
            "path",
            "local",
            "worktree",
            "expiry-date",
            "bool-or-int",
            "fixed-value",
            "no-type",
            "all",
            "regexp",
            "url",
            "value",
        ];
        const WRITE: &[&str] = &[
            "add",
            "unset",
            "unset-all",
            "replace-all",
            "rename-section",
            "remove-section",
            "edit",
            "global",
            "system",
            "file",
            "blob",
            "comment",
            "append",
        ];
        let mut read = false;
        let mut write = false;
        let mut edit = false;
        let mut global = false;
        let mut system = false;
        // `--file F` / `-f F`: the file it reads or writes instead of the repository's.
        let mut file: Option<Field> = None;
        let mut positional: Vec<&String> = Vec::new();
        // The word `known[i]` was (`known` holds the words whose text is known, in order).
        let fields: Vec<&Field> = rest.iter().filter(|f| f.known().is_some()).collect();
        let mut i = 0;
        while i < known.len() {
            let a = &known[i];
            if let Some(long) = a.strip_prefix("--") {
                let (name, val) = long
                    .split_once('=')
                    .map_or((long, None), |(n, v)| (n, Some(v)));
                let exact = READ.contains(&name) || WRITE.contains(&name);
                let cands: Vec<&str> = READ
                    .iter()
                    .chain(WRITE)
                    .copied()
                    .filter(|o| o.starts_with(name))
                    .collect();
                let full = if exact {
                    Some(name)
                } else if cands.len() == 1 {
                    Some(cands[0])
                } else {
                    None
                };
                match full {
                    Some(f) if READ.contains(&f) => {
                        if f.starts_with("get") || f == "list" {
                            read = true;
                        }
                        if matches!(f, "default" | "type") && val.is_none() {
                            i += 1;
                        }
                    }
                    Some(f) => {
                        edit |= f == "edit";
                        write |= !matches!(f, "file" | "blob" | "global" | "system");
                        if matches!(f, "global" | "system") {
                            global = true;
                            system |= f == "system";
                        }
                        if matches!(f, "file" | "blob") {
                            let v = match val {
                                Some(v) => Some(Field::lit(v)),
                                None => {
                                    i += 1;
                                    fields.get(i).map(|f| (*f).clone())
                                }
                            };
                            match v {
                                Some(v) if f == "file" => file = Some(v),
                                Some(v) => self.path_field(st, &v, Access::Read),
                                None => {}
                            }
                        }
                    }
                    // `--no-file`, `--no-global`, `--no-system`: back to the repository's file.
                    None if matches!(name, "no-file" | "no-global" | "no-system") => {
                        file = None;
                        global = false;
                        system = false;
                    }
                    None => write = true,
                }
            } else if let Some(letters) = a.strip_prefix('-') {
                for (j, c) in letters.char_indices() {
                    match c {
                        'l' => read = true,
                        'z' => {}
                        'e' => {
                            write = true;
                            edit = true;
                        }
                        // `-f F`, or `-fF` (getopt: the rest of the word is the value).
                        'f' => {
                            let attached = &letters[j + 1..];
                            file = if attached.is_empty() {
                                i += 1;
                                fields.get(i).map(|f| (*f).clone())
                            } else {
                                Some(Field::lit(attached))
                            };
                            break;
                        }
                        _ => write = true,
                    }
                }
            } else {
                positional.push(a);
            }
            i += 1;
        }
        // git 2.46+: `git config get|list|set|unset|rename-section|remove-section|edit …`.
        let verb = positional.first().map(|s| s.as_str());
        let verb_form = matches!(
            verb,
            Some("get" | "list" | "set" | "unset" | "rename-section" | "remove-section" | "edit")
        );
        let sub_read = matches!(verb, Some("get" | "list"));
        let args: Vec<&String> = if verb_form {
            positional[1..].to_vec()
        } else {
            positional.clone()
        };
        let sectionwise = known
            .iter()
            .any(|a| a.starts_with("--rename-s") || a.starts_with("--remove-s"))
            || matches!(verb, Some("rename-section" | "remove-section"));
        if verb_form && !sub_read
            || !verb_form && !read && !args.is_empty() && (args.len() >= 2 || write)
        {
            write = true;
        }
        // DESIGN.md §2: a write to `.git/config` is red; an edit names no key, and a push
        // after it is judged with the configuration it left (`git.guard.hooks-path` then).
        if edit || verb == Some("edit") {
            self.add(
                Verdict::Red,
                "path.git-config",
                "`git config --edit` edits the configuration, which can run code later".to_string(),
            );
            // The editor is whatever git is configured with (`core.editor`, `GIT_EDITOR`,
            // `VISUAL`, `EDITOR`), a repository's configuration included: code the policy does
            // not see, which writes the file as it likes (review 19).
            self.add(
                Verdict::Yellow,
                crate::rules::INTERP_CODE.id,
                "`git config --edit` runs the editor git is configured with, which may be a program of the agent's".to_string(),
            );
        }
        if write {
            if let Some(k) = args.first() {
                if sectionwise {
                    // Removing or renaming a section changes every key in it.
                    let sect = k.to_ascii_lowercase();
                    if sect == "core" || sect == "hook" || sect.starts_with("hook.") {
                        self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git config` changing the `{k}` section changes which hooks git runs"));
                    }
                    if sect.starts_with("alias")
                        || sect.starts_with("include")
                        || sect.starts_with("filter")
                        || sect.starts_with("diff")
                        || sect == "core"
                    {
                        self.add(
                            Verdict::Red,
                            "git.config-code",
                            format!(
                                "`git config` changing the `{k}` section changes programs git runs"
                            ),
                        );
                    }
                    if let Some(new) = args.get(1) {
                        let n = new.to_ascii_lowercase();
                        if n == "core"
                            || n.starts_with("hook")
                            || n.starts_with("alias")
                            || n.starts_with("include")
                        {
                            self.add(Verdict::Blocked, "git.guard.hooks-path", format!("`git config` renaming a section to `{new}` can change which hooks or programs git runs"));
                        }
                    }
                } else {
                    self.git_config_key(k, args.get(1).map(|s| s.as_str()), "config");
                }
            }
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                "`git config` that writes configuration".to_string(),
            );
            self.add(
                Verdict::Red,
                crate::rules::GIT_CONFIG_WRITE.id,
                "`git config` writes the repository's configuration (.git/config), which can run code later".to_string(),
            );
            if global {
                self.add(
                    Verdict::Red,
                    "config.global",
                    "`git config --global/--system` writes the user's or the system's configuration".to_string(),
                );
            }
        }
        // The file it writes (git-config(1) "FILES"), saved through its lock file (`F.lock`
        // made beside it, renamed over it): `--file F`, else the system's or the person's
        // own configuration; the repository's is judged by the key (above).
        // Read, `--file F` only is named: every git command reads the others.
        let written = match (&file, system, global) {
            (Some(f), _, _) => Some(f.clone()),
            _ if !write => None,
            (None, true, _) => Some(Field::lit("/etc/gitconfig")),
            (None, false, true) => self.ctx.home.and_then(|h| {
                // `~/.gitconfig`, or `$XDG_CONFIG_HOME/git/config` when only that exists.
                let dot = h.join(".gitconfig");
                let xdg = h.join(".config/git/config");
                let f = if !dot.exists() && xdg.exists() {
                    xdg
                } else {
                    dot
                };
                f.to_str().map(Field::lit)
            }),
            (None, false, false) => None,
        };
        if let Some(f) = written {
            if write {
                self.saved_field(st, &f);
            } else {
                self.path_field(st, &f, Access::Read);
            }
        }
        if !(write || read || sub_read) {
            // DESIGN.md §2a: `config` is green with `--get*`/`--list` only.
            self.add(
                Verdict::Yellow,
                "git.not-read-only",
                "`git config` without `--get`/`--list`".to_string(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::expect;
    use crate::Verdict::{Blocked, Red};

    /// An edit in an editor names no key: a write of `.git/config` (red, DESIGN.md §2); a
    /// write of the keys that move the hook stays blocked.
    #[test]
    fn edits_are_red_guard_keys_blocked() {
        expect(&[
            ("git config --edit", Red, "path.git-config"),
            ("git config -e", Red, "path.git-config"),
            ("git config edit", Red, "path.git-config"),
            ("git config --local --edit", Red, "path.git-config"),
            (
                "git config core.hooksPath /dev/null",
                Blocked,
                "git.guard.hooks-path",
            ),
            (
                "git config set core.hooksPath x",
                Blocked,
                "git.guard.hooks-path",
            ),
            (
                "git config --unset core.hooksPath",
                Blocked,
                "git.guard.hooks-path",
            ),
        ]);
    }
}
