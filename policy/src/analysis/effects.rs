//! Effects a program's options give it, whatever else its rules say:
//!
//! - **Output directories and files named by an option** (`unzip -d DIR`, `7z x -oDIR`,
//!   `tar -x -C DIR`, `sort -o FILE`, `cc -o FILE`, `pip install --target DIR`, …): the value
//!   is a path written, checked like a redirection's target (DESIGN.md §2: a modification
//!   inside a system path is blocked; a write outside the worktree is red).
//! - **Configuration writes of package tools** (`npm config set`, `npm set`, `pip config set`,
//!   `yarn config set`, …): red whatever the location (DESIGN.md §2: `.npmrc` is a credential
//!   file; the user's and the system's configuration runs code later).
//! - **Persistence through the service manager** (`systemctl enable|link|edit|start|…`,
//!   system or `--user`; `loginctl enable-linger`): red like `crontab`/`at` (DESIGN.md §2: code
//!   that would run outside the sandbox later).

use super::paths::Access;
use super::registry::{self, Effect, Takes};
use super::words::Field;
use super::{Analyzer, State};
use crate::rules;
use crate::verdict::Verdict;

/// tar's short options that take a value (GNU tar 1.35 and bsdtar), in a cluster or the
/// old-style first word.
const TAR_VALUE_LETTERS: &str = "fCTXbgKNVLFIH";

/// `systemctl` verbs that only read (systemctl(1) "Unit Commands", "Unit File Commands"):
/// anything else changes what the service manager runs.
const SYSTEMCTL_READ_VERBS: &[&str] = &[
    "status",
    "show",
    "cat",
    "help",
    "list-units",
    "list-sockets",
    "list-timers",
    "list-jobs",
    "list-unit-files",
    "list-dependencies",
    "list-machines",
    "list-automounts",
    "list-paths",
    "is-active",
    "is-failed",
    "is-enabled",
    "is-system-running",
    "get-default",
    "show-environment",
];

/// `systemctl` options that take a separate value.
const SYSTEMCTL_VALUE_OPTIONS: &[&str] = &[
    "-t",
    "--type",
    "-p",
    "--property",
    "-H",
    "--host",
    "-M",
    "--machine",
    "--root",
    "-n",
    "--lines",
    "-o",
    "--output",
    "--state",
    "-s",
    "--signal",
    "--kill-whom",
    "--job-mode",
    "--what",
    "--timestamp",
    "--image",
    "--drop-in",
    "--when",
    "--message",
];

impl Analyzer<'_> {
    /// The effects of `p`'s options (module doc), as its registry entry lists them; applied
    /// in this order whatever the entry's.
    pub(crate) fn program_effects(&mut self, st: &State, p: &str, args: &[Field]) {
        let effects = registry::lookup(p).map_or(&[][..], |e| e.effects);
        if effects.is_empty() {
            return;
        }
        for e in effects {
            if let Effect::WritesTo(options, takes) = e {
                for t in output_values(options, *takes, args) {
                    self.path_field(st, &t, Access::Write);
                }
            }
        }
        if effects.contains(&Effect::ExtractsInto) {
            let (extract, dirs) = tar_directories(args);
            if extract {
                for d in dirs {
                    self.path_field(st, &d, Access::Write);
                }
            }
        }
        if effects.contains(&Effect::ConfigWrites) {
            self.config_write(p, args);
        }
        if effects.contains(&Effect::ServiceManager) {
            self.systemctl(args);
        }
        if effects.contains(&Effect::SupervisorControl) {
            self.supervisor_control(args);
        }
        if effects.contains(&Effect::Linger)
            && args
                .iter()
                .any(|a| a.known().is_none_or(|t| t == "enable-linger"))
        {
            self.add(
                Verdict::Red,
                rules::PERSIST_SERVICE.id,
                "`loginctl enable-linger` keeps the user's services running after logout"
                    .to_string(),
            );
        }
    }

    /// `tyba`'s subcommands that switch its guards off (blocked) or decide for the person
    /// (red); see [`Effect::SupervisorControl`]. A subcommand word that cannot be known may be
    /// any of them: red.
    fn supervisor_control(&mut self, args: &[Field]) {
        let mut words = args
            .iter()
            .filter(|a| a.known().is_none_or(|t| !t.starts_with('-')));
        let (sub, verb) = (words.next(), words.next());
        let (Some(sub), verb) = (sub.and_then(Field::known), verb.map(Field::known)) else {
            if sub.is_some() {
                self.add(
                    Verdict::Red,
                    rules::SUPERVISOR_CONTROL.id,
                    "`tyba` with a subcommand that cannot be known may approve asks or switch a guard off".to_string(),
                );
            }
            return;
        };
        let unknown_verb = matches!(verb, Some(None));
        let verb = verb.flatten();
        match sub.as_str() {
            "git-guard" if unknown_verb || verb.as_deref() == Some("uninstall") => {
                self.add(
                    Verdict::Blocked,
                    rules::GIT_GUARD_HOOK.id,
                    "`tyba git-guard uninstall` removes the pre-push hook that keeps pushes off protected branches".to_string(),
                );
            }
            "hook" if unknown_verb || verb.as_deref() == Some("uninstall") => {
                self.add(
                    Verdict::Blocked,
                    rules::SUPERVISOR_CONTROL.id,
                    "`tyba hook uninstall` removes the hook through which tyba judges the agent's actions".to_string(),
                );
            }
            "hook" if verb.as_deref() == Some("install") => self.add(
                Verdict::Red,
                rules::SUPERVISOR_CONTROL.id,
                "`tyba hook install` rewrites the agent's settings".to_string(),
            ),
            "approve" | "autonomy" | "clean" => self.add(
                Verdict::Red,
                rules::SUPERVISOR_CONTROL.id,
                format!("`tyba {sub}` is the person's decision, not the agent's"),
            ),
            _ => {}
        }
    }

    fn config_write(&mut self, p: &str, args: &[Field]) {
        let known: Vec<String> = args.iter().filter_map(Field::known).collect();
        let words: Vec<&str> = known
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-'))
            .collect();
        let writes = |w: &str| {
            matches!(
                w,
                "set" | "unset" | "delete" | "edit" | "rm" | "add" | "remove" | "fix"
            )
        };
        let option_writes = known.iter().any(|a| {
            matches!(
                a.split('=').next().unwrap_or(""),
                "--set" | "--add" | "--remove" | "--remove-key" | "--append" | "--prepend"
            )
        });
        let write = match words.first() {
            Some(&"config") => {
                words.get(1).is_some_and(|w| writes(w))
                    || option_writes
                    || args.iter().skip(1).any(|a| !a.is_known())
            }
            Some(&"set") => p == "npm" || p == "pnpm",
            _ => false,
        };
        if !write {
            return;
        }
        let what = if matches!(p, "npm" | "pnpm" | "yarn" | "bun") {
            "`.npmrc` (or the tool's rc file), a credential file"
        } else {
            "the tool's configuration file, which later runs of the tool obey"
        };
        self.add(
            Verdict::Red,
            rules::CONFIG_TOOL_WRITE.id,
            format!("`{p} config` writes {what}"),
        );
    }

    fn systemctl(&mut self, args: &[Field]) {
        let mut i = 0;
        while i < args.len() {
            let Some(t) = args[i].known() else {
                self.add(
                    Verdict::Red,
                    rules::PERSIST_SERVICE.id,
                    "`systemctl` with a word that cannot be known may enable or start a service"
                        .to_string(),
                );
                return;
            };
            i += 1;
            if SYSTEMCTL_VALUE_OPTIONS.contains(&t.as_str()) {
                i += 1;
                continue;
            }
            if t.starts_with('-') {
                continue;
            }
            if !SYSTEMCTL_READ_VERBS.contains(&t.as_str()) {
                self.add(
                    Verdict::Red,
                    rules::PERSIST_SERVICE.id,
                    format!(
                        "`systemctl {t}` changes what the service manager runs, outside the sandbox"
                    ),
                );
            }
            return;
        }
    }
}

/// Values of the output `options` (an [`Effect::WritesTo`]) in `args`.
fn output_values(options: &[&str], takes: Takes, args: &[Field]) -> Vec<Field> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let t = args[i].known();
        i += 1;
        let Some(t) = t else { continue };
        if t == "--" {
            break;
        }
        for o in options.iter() {
            if t == *o && takes == Takes::Separate {
                if let Some(v) = args.get(i) {
                    out.push(v.clone());
                }
                i += 1;
                break;
            }
            if o.starts_with("--") {
                if let Some(v) = t.strip_prefix(o).and_then(|r| r.strip_prefix('=')) {
                    out.push(Field::lit(v));
                    break;
                }
            } else if t.len() > o.len() && t.starts_with(o) {
                out.push(Field::lit(&t[o.len()..]));
                break;
            }
        }
    }
    out
}

/// Whether a tar command line extracts, and the directories it changes into (`-C DIR`,
/// `--directory=DIR`, `C` in a cluster or in the old-style first word). A word that cannot
/// be known counts as extracting.
fn tar_directories(args: &[Field]) -> (bool, Vec<Field>) {
    let mut extract = false;
    let mut dirs = Vec::new();
    let mut i = 0;
    let mut first = true;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let Some(t) = a.known() else {
            extract = true;
            first = false;
            continue;
        };
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            if name.len() >= 3 && ("extract".starts_with(name) || name == "get") {
                extract = true;
            }
            if name.len() >= 3 && "directory".starts_with(name) {
                match value {
                    Some(v) => dirs.push(Field::lit(v)),
                    None => {
                        if let Some(v) = args.get(i) {
                            dirs.push(v.clone());
                        }
                        i += 1;
                    }
                }
            }
            first = false;
            continue;
        }
        let old_style = first && !t.starts_with('-');
        first = false;
        let letters = match t.strip_prefix('-') {
            Some(l) => l,
            None if old_style => t.as_str(),
            None => continue,
        };
        // Values of value-taking letters: attached rest of a dash cluster, else the next words
        // in order.
        let chars: Vec<char> = letters.chars().collect();
        for (k, c) in chars.iter().enumerate() {
            if *c == 'x' {
                extract = true;
            }
            if TAR_VALUE_LETTERS.contains(*c) {
                let attached: String = chars[k + 1..].iter().collect();
                let value = if !old_style && !attached.is_empty() {
                    Some(Field::lit(&attached))
                } else {
                    let v = args.get(i).cloned();
                    i += 1;
                    v
                };
                if *c == 'C' {
                    if let Some(v) = value {
                        dirs.push(v);
                    }
                }
                if !old_style && !attached.is_empty() {
                    break;
                }
            }
        }
    }
    (extract, dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(words: &[&str]) -> Vec<Field> {
        words.iter().map(|w| Field::lit(w)).collect()
    }

    fn dirs(words: &[&str]) -> (bool, Vec<String>) {
        let (x, d) = tar_directories(&f(words));
        (x, d.iter().map(Field::display).collect())
    }

    #[test]
    fn tar_directories_in_every_spelling() {
        assert_eq!(
            dirs(&["-C", "/usr", "-xf", "a.tar"]),
            (true, vec!["/usr".into()])
        );
        assert_eq!(
            dirs(&["-xzvC", "/usr", "-f", "a.tar"]),
            (true, vec!["/usr".into()])
        );
        // getopt: a value-taking letter takes the rest of its cluster (`-fC` names archive C).
        assert_eq!(dirs(&["-xzfC", "a.tar", "/usr"]), (true, vec![]));
        assert_eq!(dirs(&["xfC", "a.tar", "/etc"]), (true, vec!["/etc".into()]));
        assert_eq!(
            dirs(&["-xf", "a.tar", "-C/etc"]),
            (true, vec!["/etc".into()])
        );
        assert_eq!(
            dirs(&["--extract", "--directory=/boot"]),
            (true, vec!["/boot".into()])
        );
        assert!(!dirs(&["-cf", "a.tar", "-C", "src", "."]).0);
    }

    #[test]
    fn output_values_take_separate_and_attached_forms() {
        // By the program's registry entry, as the analyser applies them.
        let shown = |p: &str, w: &[&str]| -> Vec<String> {
            let effects = registry::lookup(p).map_or(&[][..], |e| e.effects);
            effects
                .iter()
                .flat_map(|e| match e {
                    Effect::WritesTo(o, t) => output_values(o, *t, &f(w)),
                    _ => Vec::new(),
                })
                .map(|v| v.display())
                .collect()
        };
        assert_eq!(shown("unzip", &["-d", "/etc/", "x.zip"]), ["/etc/"]);
        assert_eq!(shown("unzip", &["x.zip", "-d/etc"]), ["/etc"]);
        assert_eq!(shown("7z", &["x", "-o/usr/bin/", "a.7z"]), ["/usr/bin/"]);
        assert!(shown("7z", &["x", "-o", "a.7z"]).is_empty());
        assert_eq!(shown("sort", &["--output=/etc/x", "f"]), ["/etc/x"]);
        assert!(shown("ls", &["-d", "/etc"]).is_empty());
        assert_eq!(shown("gcc", &["-o", "/usr/bin/x", "m.c"]), ["/usr/bin/x"]);
        assert_eq!(shown("7za", &["x", "-o/usr/bin", "a.7z"]), ["/usr/bin"]);
        assert_eq!(shown("curl", &["--output=/etc/x", "u"]), ["/etc/x"]);
    }
}
