//! A flat, ordered view of a repository's effective configuration (every file git would read,
//! includes resolved, then `GIT_CONFIG_COUNT`/`GIT_CONFIG_PARAMETERS` and `-c` overrides), read
//! with gix and looked up with git's key rules: section and variable names are
//! case-insensitive, subsection names are case-sensitive, the last value wins
//! (git-config(1), "CONFIGURATION FILE").

use gix::bstr::ByteSlice;

/// One `section.subsection.name = value` entry; `value` is `None` for an implicit boolean
/// (`[push] autoSetupRemote` without `=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub section: String,
    pub sub: Option<String>,
    pub name: String,
    pub value: Option<String>,
}

/// Entries in the order git reads them.
#[derive(Debug, Clone, Default)]
pub(crate) struct FlatConfig {
    pub entries: Vec<Entry>,
}

impl FlatConfig {
    /// Flattens a gix configuration file (the resolved one of a repository).
    pub fn from_gix(file: &gix::config::File) -> FlatConfig {
        let mut entries = Vec::new();
        for section in file.sections() {
            let header = section.header();
            let sec = header.name().to_str_lossy().to_ascii_lowercase();
            let sub = header
                .subsection_name()
                .map(|s| s.to_str_lossy().into_owned());
            let mut seen: Vec<String> = Vec::new();
            for name in section.value_names() {
                let lname = name.to_ascii_lowercase();
                if seen.contains(&lname) {
                    continue;
                }
                seen.push(lname.clone());
                let values = section.values(&name);
                let implicit =
                    values.len() == 1 && matches!(section.value_implicit(&name), Some(None));
                for v in values {
                    entries.push(Entry {
                        section: sec.clone(),
                        sub: sub.clone(),
                        name: lname.clone(),
                        value: if implicit {
                            None
                        } else {
                            Some(v.to_str_lossy().into_owned())
                        },
                    });
                }
            }
        }
        FlatConfig { entries }
    }

    fn matching<'s>(&'s self, section: &str, sub: Option<&str>, name: &str) -> Vec<&'s Entry> {
        self.entries
            .iter()
            .filter(|e| {
                e.section.eq_ignore_ascii_case(section)
                    && e.sub.as_deref() == sub
                    && e.name.eq_ignore_ascii_case(name)
            })
            .collect()
    }

    /// The last value of the key, `Some(None)` for an implicit boolean.
    pub fn last<'s>(
        &'s self,
        section: &str,
        sub: Option<&str>,
        name: &str,
    ) -> Option<Option<&'s str>> {
        self.matching(section, sub, name)
            .last()
            .copied()
            .map(|e| e.value.as_deref())
    }

    /// The last value as a string (implicit booleans read as `"true"`).
    pub fn string<'s>(&'s self, section: &str, sub: Option<&str>, name: &str) -> Option<&'s str> {
        self.last(section, sub, name).map(|v| v.unwrap_or("true"))
    }

    /// All values, in order (implicit booleans omitted).
    pub fn all<'s>(&'s self, section: &str, sub: Option<&str>, name: &str) -> Vec<&'s str> {
        self.matching(section, sub, name)
            .into_iter()
            .filter_map(|e| e.value.as_deref())
            .collect()
    }

    /// The last value read as git reads a boolean (`git_config_bool`); `None` when absent or
    /// not a boolean.
    pub fn boolean(&self, section: &str, sub: Option<&str>, name: &str) -> Option<bool> {
        match self.last(section, sub, name)? {
            None => Some(true),
            Some(v) => tyba_policy::git_options::config_bool(v),
        }
    }
}

/// Splits a config key `section[.subsection].name` the way git does (first and last dot).
/// `None` for a key without a dot.
pub(crate) fn split_key(key: &str) -> Option<(String, Option<String>, String)> {
    let first = key.find('.')?;
    let last = key.rfind('.')?;
    let section = key[..first].to_ascii_lowercase();
    let name = key[last + 1..].to_ascii_lowercase();
    let sub = (first != last).then(|| key[first + 1..last].to_string());
    Some((section, sub, name))
}

/// Whether writing or overriding this key can switch the pre-push hook off or replace it:
/// `core.hooksPath`, any `hook.*`, and includes (`include.path`, `includeIf.*.path`), which
/// can pull in either. Also `core.worktree`-independent keys are not guards. Keys are compared
/// the way git compares them.
pub(crate) fn is_guard_key(key: &str) -> bool {
    let Some((section, sub, name)) = split_key(key) else {
        // `git config --remove-section core` and the like name a section alone.
        let s = key.to_ascii_lowercase();
        return s == "core" || s == "hook" || s == "include" || s.starts_with("includeif");
    };
    match section.as_str() {
        "core" => sub.is_none() && name == "hookspath",
        "hook" => true,
        "include" | "includeif" => name == "path",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_keys() {
        assert!(is_guard_key("core.hooksPath"));
        assert!(is_guard_key("CORE.HOOKSPATH"));
        assert!(is_guard_key("hook.pre-push.command"));
        assert!(is_guard_key("include.path"));
        assert!(is_guard_key("includeIf.gitdir:/x.path"));
        assert!(!is_guard_key("core.pager"));
        assert!(!is_guard_key("remote.origin.push"));
        assert!(is_guard_key("core"));
    }
}
