//! git's two option dialects, one engine for the policy's git judge and the git guard
//! (tyba-git-guard), git 2.47:
//!
//! - the global options before the subcommand ([`parse_global`], `git.c` `handle_options`):
//!   exact spellings only, `-C DIR` and `-c KEY=VALUE` with the value in the next word only,
//!   `--git-dir=DIR` or `--git-dir DIR`, no `--` or `--end-of-options`;
//! - a subcommand's own options ([`parse`], `parse-options.c` `parse_options` with flags 0):
//!   unambiguous abbreviations of long options, `--no-` negation (and `--verify` as the
//!   negation of `--no-verify`), clustered short flags, values stuck (`-oV`, `--opt=V`) or in
//!   the next word, options anywhere among the operands, `--` and `--end-of-options`.
//!
//! Both are checked against the real git by `policy/tests/git_options_baseline.rs` (git's own
//! `git rev-parse --parseopt` for the dialect, `git --git-completion-helper-all` for the
//! tables, real global options on a temporary repository).

/// A command line git itself would reject while parsing its options (git dies with a usage
/// message, exit 129, and does nothing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// An option git does not know.
    #[error("unknown option `{0}`")]
    Unknown(String),
    /// An abbreviation matching more than one option.
    #[error("ambiguous option {0}")]
    Ambiguous(String),
    /// An option that needs a value got none.
    #[error("option `{0}` requires a value")]
    MissingValue(String),
    /// A value given to an option that takes none.
    #[error("option `{0}` takes no value")]
    UnexpectedValue(String),
}

/// How an option takes its value (`parse-options.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// No value (`OPT_BIT`, `OPT_BOOL`, …).
    None,
    /// A required value: `--opt=V`, `--opt V`, `-oV`, `-o V`.
    Required,
    /// An optional value, only in the attached form `--opt=V` (`PARSE_OPT_OPTARG`).
    Optional,
}

/// One option of a command's table.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Short name, if any.
    pub short: Option<char>,
    /// Long name as git spells it (`no-verify` keeps its `no-`).
    pub long: &'static str,
    /// How it takes a value.
    pub arg: Arg,
    /// Whether `--no-<long>` is accepted (`PARSE_OPT_NONEG` absent).
    pub negatable: bool,
    /// Another option this one is an alias of (`OPT_ALIAS`): the alias is reported under the
    /// target's name.
    pub alias_of: Option<&'static str>,
}

/// An option `-s`/`--long` (either may be absent: `None`, `""`) that `--no-long` negates.
pub const fn opt(short: Option<char>, long: &'static str, arg: Arg) -> Spec {
    Spec {
        short,
        long,
        arg,
        negatable: true,
        alias_of: None,
    }
}

impl Spec {
    /// The same option without its `--no-` form (`PARSE_OPT_NONEG`).
    pub const fn no_negation(self) -> Spec {
        Spec {
            negatable: false,
            ..self
        }
    }
}

/// `git push` options of git 2.47 (`builtin/push.c`, `cmd_push`), in table order: the order
/// matters for git's abbreviation ambiguity rules.
pub const PUSH_OPTIONS: &[Spec] = &[
    opt(Some('v'), "verbose", Arg::None),
    opt(Some('q'), "quiet", Arg::None),
    opt(None, "repo", Arg::Required),
    opt(None, "all", Arg::None),
    Spec {
        short: None,
        long: "branches",
        arg: Arg::None,
        negatable: true,
        alias_of: Some("all"),
    },
    opt(None, "mirror", Arg::None),
    opt(Some('d'), "delete", Arg::None),
    opt(None, "tags", Arg::None),
    opt(Some('n'), "dry-run", Arg::None),
    opt(None, "porcelain", Arg::None),
    opt(Some('f'), "force", Arg::None),
    opt(None, "force-with-lease", Arg::Optional),
    opt(None, "force-if-includes", Arg::None),
    opt(None, "recurse-submodules", Arg::Required),
    opt(None, "thin", Arg::None),
    opt(None, "receive-pack", Arg::Required),
    opt(None, "exec", Arg::Required),
    opt(Some('u'), "set-upstream", Arg::None),
    opt(None, "progress", Arg::None),
    opt(None, "prune", Arg::None),
    opt(None, "no-verify", Arg::None),
    opt(None, "follow-tags", Arg::None),
    opt(None, "signed", Arg::Optional),
    opt(None, "atomic", Arg::None),
    opt(Some('o'), "push-option", Arg::Required),
    opt(Some('4'), "ipv4", Arg::None).no_negation(),
    opt(Some('6'), "ipv6", Arg::None).no_negation(),
];

/// `git clean` options of git 2.47 (`builtin/clean.c`, `cmd_clean`), in table order. `-d`,
/// `-x` and `-X` have no long name; `--force` counts up and `--no-force` resets it.
pub const CLEAN_OPTIONS: &[Spec] = &[
    opt(Some('q'), "quiet", Arg::None),
    opt(Some('n'), "dry-run", Arg::None),
    opt(Some('f'), "force", Arg::None),
    opt(Some('i'), "interactive", Arg::None),
    opt(Some('d'), "", Arg::None),
    opt(Some('e'), "exclude", Arg::Required).no_negation(),
    opt(Some('x'), "", Arg::None),
    opt(Some('X'), "", Arg::None),
];

/// One parsed option occurrence, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// The option's long name as in the table (an alias is reported as its target); `""`
    /// for an option with a short name only.
    pub long: &'static str,
    /// The option's short letter in the table, if it has one.
    pub short: Option<char>,
    /// `true` for the negated form (`--no-force`, `--verify` for `no-verify`).
    pub unset: bool,
    /// The value, if one was given.
    pub value: Option<String>,
}

/// The outcome of parsing a command's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Options in the order they appeared.
    pub options: Vec<Occurrence>,
    /// Operands, in order.
    pub operands: Vec<String>,
    /// `-h` (or `--help-all`) was given: git prints the usage and exits 129, doing nothing.
    pub help: bool,
}

impl Occurrence {
    /// Whether this is the option named `name`: its long name, or its short letter written
    /// as a one-letter string (`"d"` for `git clean -d`).
    pub fn is(&self, name: &str) -> bool {
        if !self.long.is_empty() && self.long == name {
            return true;
        }
        let mut cs = name.chars();
        matches!((cs.next(), cs.next(), self.short), (Some(c), None, Some(s)) if c == s)
    }
}

impl Parsed {
    /// The last-wins state of a boolean option named `name` (see [`Occurrence::is`]):
    /// `Some(true)` set, `Some(false)` unset, `None` not given.
    pub fn last_bool(&self, name: &str) -> Option<bool> {
        self.options
            .iter()
            .rev()
            .find(|o| o.is(name))
            .map(|o| !o.unset)
    }

    /// The last-wins value of a string option (`--no-<opt>` resets it to `None`).
    pub fn last_value(&self, name: &str) -> Option<&str> {
        let o = self.options.iter().rev().find(|o| o.is(name))?;
        if o.unset {
            None
        } else {
            o.value.as_deref()
        }
    }
}

enum LongMatch {
    Exact(usize, bool, Option<String>),
    Abbrev(usize, bool, Option<String>),
}

/// Parses `words` (the words after the subcommand) against `table` like `parse_options` with
/// flags 0 (options may follow operands).
///
/// # Errors
/// [`OptionError`] for an unknown or ambiguous option, or a missing or unexpected value:
/// git dies with a usage message in those cases.
pub fn parse<S: AsRef<str>>(words: &[S], table: &[Spec]) -> Result<Parsed, OptionError> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_ref();
        i += 1;
        if w == "--" || w == "--end-of-options" {
            out.operands
                .extend(words[i..].iter().map(|w| w.as_ref().to_string()));
            break;
        }
        if let Some(rest) = w.strip_prefix("--") {
            if rest == "help-all" || rest == "help" {
                out.help = true;
                continue;
            }
            let (idx, unset, attached) = match parse_long(rest, table)? {
                LongMatch::Exact(a, b, c) | LongMatch::Abbrev(a, b, c) => (a, b, c),
            };
            let spec = &table[idx];
            let value = take_value(spec, unset, attached, words, &mut i, w)?;
            out.options.push(Occurrence {
                long: spec.alias_of.unwrap_or(spec.long),
                short: spec.short,
                unset,
                value,
            });
        } else if w.len() > 1 && w.starts_with('-') {
            let chars: Vec<char> = w[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                if c == 'h' && chars.len() == 1 {
                    out.help = true;
                    break;
                }
                let Some(spec) = table.iter().find(|s| s.short == Some(c)) else {
                    return Err(OptionError::Unknown(format!("-{c}")));
                };
                let value = match spec.arg {
                    Arg::None => None,
                    Arg::Optional => {
                        let rest: String = chars[k..].iter().collect();
                        k = chars.len();
                        (!rest.is_empty()).then_some(rest)
                    }
                    Arg::Required => {
                        let rest: String = chars[k..].iter().collect();
                        k = chars.len();
                        if !rest.is_empty() {
                            Some(rest)
                        } else if i < words.len() {
                            i += 1;
                            Some(words[i - 1].as_ref().to_string())
                        } else {
                            return Err(OptionError::MissingValue(format!("-{c}")));
                        }
                    }
                };
                out.options.push(Occurrence {
                    long: spec.alias_of.unwrap_or(spec.long),
                    short: spec.short,
                    unset: false,
                    value,
                });
            }
        } else {
            out.operands.push(w.to_string());
        }
    }
    Ok(out)
}

fn take_value<S: AsRef<str>>(
    spec: &Spec,
    unset: bool,
    attached: Option<String>,
    words: &[S],
    i: &mut usize,
    word: &str,
) -> Result<Option<String>, OptionError> {
    if unset {
        if attached.is_some() {
            return Err(OptionError::UnexpectedValue(word.to_string()));
        }
        return Ok(None);
    }
    match spec.arg {
        Arg::None => match attached {
            Some(_) => Err(OptionError::UnexpectedValue(word.to_string())),
            None => Ok(None),
        },
        Arg::Optional => Ok(attached),
        Arg::Required => match attached {
            Some(v) => Ok(Some(v)),
            None if *i < words.len() => {
                *i += 1;
                Ok(Some(words[*i - 1].as_ref().to_string()))
            }
            None => Err(OptionError::MissingValue(word.to_string())),
        },
    }
}

/// `parse_long_opt` of git 2.47's `parse-options.c`, as git 2.47 behaves (checked against
/// `git rev-parse --parseopt` by the baseline test): an exact spelling wins wherever it is in
/// the table; otherwise each way an option can be abbreviated counts once (the name itself,
/// `--n`/`--no`/`--no-` as its negation, `--no-PREFIX`), and two counts are ambiguous even for
/// one option (`--no-` for any negatable option).
fn parse_long(arg_full: &str, table: &[Spec]) -> Result<LongMatch, OptionError> {
    let (arg, attached) = match arg_full.find('=') {
        Some(p) => (&arg_full[..p], Some(arg_full[p + 1..].to_string())),
        None => (arg_full, None),
    };
    let mut abbrev: Option<(usize, bool)> = None;
    let mut ambiguous: Option<usize> = None;
    for (idx, spec) in table.iter().enumerate() {
        if spec.long.is_empty() {
            continue;
        }
        // `--verify` names `no-verify` unset.
        let (long_name, opt_unset) = match spec.long.strip_prefix("no-") {
            Some(stripped) if !arg.starts_with("no-") && spec.negatable => (stripped, true),
            _ => (spec.long, false),
        };
        if arg == long_name {
            return Ok(LongMatch::Exact(idx, opt_unset, attached));
        }
        let negated = arg.strip_prefix("no-").filter(|_| spec.negatable);
        if negated == Some(long_name) {
            return Ok(LongMatch::Exact(idx, !opt_unset, attached));
        }
        let mut matches: Vec<bool> = Vec::new();
        if !arg.is_empty() && long_name.starts_with(arg) {
            matches.push(opt_unset);
        }
        if spec.negatable {
            // "negated and abbreviated very much": `--n`, `--no`, `--no-`.
            if !arg.is_empty() && "no-".starts_with(arg) {
                matches.push(!opt_unset);
            }
            // `--no-PREFIX`; a double negation must spell its `no-` whole (`--no-no-v`).
            if let Some(rest) = negated {
                let whole_no = !long_name.starts_with("no-") || rest.starts_with("no-");
                if long_name.starts_with(rest) && whole_no {
                    matches.push(!opt_unset);
                }
            }
        }
        for unset in matches {
            if let Some((prev, _)) = abbrev {
                let same_alias = prev != idx
                    && (table[prev].alias_of == Some(spec.long)
                        || spec.alias_of == Some(table[prev].long)
                        || (table[prev].alias_of.is_some()
                            && table[prev].alias_of == spec.alias_of));
                if !same_alias {
                    ambiguous = Some(prev);
                }
            }
            abbrev = Some((idx, unset));
        }
    }
    if let Some(prev) = ambiguous {
        return Err(OptionError::Ambiguous(format!(
            "--{arg} (could be --{})",
            table[prev].long
        )));
    }
    match abbrev {
        Some((idx, unset)) => Ok(LongMatch::Abbrev(idx, unset, attached)),
        None => Err(OptionError::Unknown(format!("--{arg}"))),
    }
}

/// How a global option of `git.c` takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobalArg {
    /// A flag (`--no-pager`, `-P`).
    None,
    /// A value in the next word only (`-C DIR`, `-c KEY=VALUE`; `-CDIR` is unknown to git).
    Next,
    /// A value after `=` or in the next word (`--git-dir=DIR`, `--git-dir DIR`).
    EqualsOrNext,
    /// A value after `=` only (`--list-cmds=builtins`).
    Equals,
    /// No value: git prints something and exits; with `=VALUE` it sets it and goes on
    /// (`--exec-path` prints the directory, `--exec-path=DIR` runs git programs from `DIR`).
    ExitsOrEquals,
}

/// One global option of git 2.47 (`git.c`, `handle_options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalSpec {
    /// The option exactly as git spells it (`-C`, `--git-dir`).
    pub name: &'static str,
    /// How it takes its value.
    pub arg: GlobalArg,
    /// Whether git prints something and exits after it (or runs `git help`/`git version`):
    /// no subcommand of the line runs.
    pub exits: bool,
}

const fn global(name: &'static str, arg: GlobalArg) -> GlobalSpec {
    GlobalSpec {
        name,
        arg,
        exits: false,
    }
}

const fn exiting(name: &'static str, arg: GlobalArg) -> GlobalSpec {
    GlobalSpec {
        name,
        arg,
        exits: true,
    }
}

/// The global options of git 2.47 (`git.c`, `handle_options`; git(1) "OPTIONS"). git matches
/// them exactly: no abbreviations, no `--no-` forms but the ones listed.
pub const GLOBAL_OPTIONS: &[GlobalSpec] = &[
    exiting("--exec-path", GlobalArg::ExitsOrEquals),
    exiting("--html-path", GlobalArg::None),
    exiting("--man-path", GlobalArg::None),
    exiting("--info-path", GlobalArg::None),
    global("-p", GlobalArg::None),
    global("--paginate", GlobalArg::None),
    global("-P", GlobalArg::None),
    global("--no-pager", GlobalArg::None),
    global("--no-replace-objects", GlobalArg::None),
    global("--git-dir", GlobalArg::EqualsOrNext),
    global("--namespace", GlobalArg::EqualsOrNext),
    global("--work-tree", GlobalArg::EqualsOrNext),
    global("--bare", GlobalArg::None),
    global("-c", GlobalArg::Next),
    global("--config-env", GlobalArg::EqualsOrNext),
    global("--literal-pathspecs", GlobalArg::None),
    global("--no-literal-pathspecs", GlobalArg::None),
    global("--glob-pathspecs", GlobalArg::None),
    global("--noglob-pathspecs", GlobalArg::None),
    global("--icase-pathspecs", GlobalArg::None),
    global("--no-optional-locks", GlobalArg::None),
    exiting("--list-cmds", GlobalArg::Equals),
    global("--attr-source", GlobalArg::EqualsOrNext),
    global("--shallow-file", GlobalArg::Next),
    global("-C", GlobalArg::Next),
    global("--no-advice", GlobalArg::None),
    global("--no-lazy-fetch", GlobalArg::None),
    // git.c rewrites these to the `help` and `version` subcommands.
    exiting("-h", GlobalArg::None),
    exiting("--help", GlobalArg::None),
    exiting("-v", GlobalArg::None),
    exiting("--version", GlobalArg::None),
];

/// One global option as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalOccurrence {
    /// The option's entry in [`GLOBAL_OPTIONS`].
    pub spec: &'static GlobalSpec,
    /// Its value, if it took one.
    pub value: Option<String>,
}

/// Where the global options end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobalEnd {
    /// The subcommand is the word at this index.
    Subcommand(usize),
    /// The option at this index makes git print something and exit, or run `git help` or
    /// `git version` on the words after it: the line's subcommand does not run.
    Exits(usize),
    /// The word at this index is not a global option: git dies with a usage message.
    Unknown(usize),
    /// The option at this index needs a value and none follows: git dies.
    MissingValue(usize),
    /// The words end without a subcommand (git prints its usage).
    NoSubcommand,
}

/// The global options before the subcommand, parsed as `git.c` `handle_options` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Globals {
    /// The options, in order.
    pub options: Vec<GlobalOccurrence>,
    /// Where they end.
    pub end: GlobalEnd,
}

impl Globals {
    /// The subcommand's index, when git runs one.
    pub fn subcommand(&self) -> Option<usize> {
        match self.end {
            GlobalEnd::Subcommand(i) => Some(i),
            _ => None,
        }
    }
}

/// A git configuration value read as a boolean the way `git_config_bool` does (git-config(1)
/// "Values", `config.c`): `true`/`yes`/`on` and `false`/`no`/`off`/the empty value, any case,
/// or an integer (non-zero is true). `None` for anything else (git refuses such a value).
pub fn config_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        other => other.parse::<i64>().ok().map(|n| n != 0),
    }
}

/// The entry of [`GLOBAL_OPTIONS`] for `word` as written (`--git-dir=x` names `--git-dir`
/// only when that option takes a value after `=`), and the value after `=` if any.
pub fn global_option(word: &str) -> Option<(&'static GlobalSpec, Option<&str>)> {
    if let Some(spec) = GLOBAL_OPTIONS.iter().find(|g| g.name == word) {
        if spec.arg == GlobalArg::Equals {
            // `--list-cmds` without `=` is unknown to git.
            return None;
        }
        return Some((spec, None));
    }
    let (name, value) = word.split_once('=')?;
    let spec = GLOBAL_OPTIONS.iter().find(|g| g.name == name)?;
    match spec.arg {
        GlobalArg::EqualsOrNext | GlobalArg::Equals | GlobalArg::ExitsOrEquals => {
            Some((spec, Some(value)))
        }
        GlobalArg::None | GlobalArg::Next => None,
    }
}

/// Parses the words after `git` up to the subcommand, the way `git.c` `handle_options` does:
/// exact spellings, values in the forms [`GlobalArg`] says; the first word not starting with
/// `-` is the subcommand.
pub fn parse_global<S: AsRef<str>>(words: &[S]) -> Globals {
    let mut options = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_ref();
        if !w.starts_with('-') {
            return Globals {
                options,
                end: GlobalEnd::Subcommand(i),
            };
        }
        let Some((spec, attached)) = global_option(w) else {
            return Globals {
                options,
                end: GlobalEnd::Unknown(i),
            };
        };
        let value = match (spec.arg, attached) {
            (_, Some(v)) => Some(v.to_string()),
            (GlobalArg::Next | GlobalArg::EqualsOrNext, None) => match words.get(i + 1) {
                Some(v) => {
                    i += 1;
                    Some(v.as_ref().to_string())
                }
                None => {
                    return Globals {
                        options,
                        end: GlobalEnd::MissingValue(i),
                    }
                }
            },
            _ => None,
        };
        let exits = spec.exits && !(spec.arg == GlobalArg::ExitsOrEquals && value.is_some());
        options.push(GlobalOccurrence { spec, value });
        if exits {
            return Globals {
                options,
                end: GlobalEnd::Exits(i),
            };
        }
        i += 1;
    }
    Globals {
        options,
        end: GlobalEnd::NoSubcommand,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn p(words: &[&str]) -> Result<Parsed, OptionError> {
        let w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        parse(&w, PUSH_OPTIONS)
    }

    #[test]
    fn no_verify_spellings_and_last_wins() {
        for w in ["--no-verify", "--no-verif"] {
            assert_eq!(p(&[w]).unwrap().last_bool("no-verify"), Some(true), "{w}");
        }
        assert_eq!(
            p(&["--no-verify", "--verify"])
                .unwrap()
                .last_bool("no-verify"),
            Some(false)
        );
        assert_eq!(
            p(&["--verify", "--no-verify"])
                .unwrap()
                .last_bool("no-verify"),
            Some(true)
        );
        assert_eq!(p(&["--veri"]).unwrap().last_bool("no-verify"), Some(false));
        // `--no-v` could be --no-verbose or --no-verify: git calls it ambiguous
        assert!(p(&["--no-v"]).is_err());
        assert!(p(&["--no-ver"]).is_err());
        assert_eq!(p(&["--no-verb"]).unwrap().last_bool("verbose"), Some(false));
    }

    #[test]
    fn clusters_values_and_operands() {
        let r = p(&["origin", "-fd", "x", "-o", "ci.skip", "--repo=r", "--del"]).unwrap();
        assert_eq!(r.operands, vec!["origin", "x"]);
        assert_eq!(r.last_bool("force"), Some(true));
        assert_eq!(r.last_bool("delete"), Some(true));
        assert_eq!(r.last_value("push-option"), Some("ci.skip"));
        assert_eq!(r.last_value("repo"), Some("r"));
        assert_eq!(p(&["--bra"]).unwrap().last_bool("all"), Some(true));
        assert!(p(&["--a"]).is_err());
        assert_eq!(p(&["--", "--all"]).unwrap().operands, vec!["--all"]);
        assert_eq!(
            p(&["-ofoo"]).unwrap().last_value("push-option"),
            Some("foo")
        );
        assert!(p(&["-h"]).unwrap().help);
    }

    #[test]
    fn short_only_options_and_counted_force() {
        let w = |words: &[&str]| parse(words, CLEAN_OPTIONS).unwrap();
        let r = w(&["-fdx"]);
        assert_eq!(r.last_bool("force"), Some(true));
        assert_eq!(r.last_bool("f"), Some(true));
        assert_eq!(r.last_bool("d"), Some(true));
        assert_eq!(r.last_bool("x"), Some(true));
        assert_eq!(r.last_bool("X"), None);
        // `-e` takes the rest of the word: `-exd` excludes the pattern `xd`.
        let r = w(&["-f", "-exd"]);
        assert_eq!(r.last_value("exclude"), Some("xd"));
        assert_eq!(r.last_bool("d"), None);
        assert_eq!(w(&["-f", "--no-force"]).last_bool("force"), Some(false));
        assert_eq!(w(&["--forc", "-d"]).last_bool("force"), Some(true));
        // `--no-exclude` is not an option (PARSE_OPT_NONEG), `-x` has no long name, and
        // `--d` abbreviates `--dry-run`, not `-d`.
        assert!(parse(&["--no-exclude"], CLEAN_OPTIONS).is_err());
        assert!(parse(&["--x"], CLEAN_OPTIONS).is_err());
        assert_eq!(w(&["--d"]).last_bool("dry-run"), Some(true));
        assert_eq!(w(&["--d"]).last_bool("d"), None);
    }

    #[test]
    fn global_options_are_exact_and_c_takes_the_next_word_only() {
        let g = parse_global(&["-C", "dir", "-c", "a.b=c", "--git-dir=.git", "status", "-C"]);
        assert_eq!(g.end, GlobalEnd::Subcommand(5));
        let names: Vec<_> = g.options.iter().map(|o| o.spec.name).collect();
        assert_eq!(names, ["-C", "-c", "--git-dir"]);
        assert_eq!(g.options[1].value.as_deref(), Some("a.b=c"));
        assert_eq!(g.options[2].value.as_deref(), Some(".git"));
        assert_eq!(
            parse_global(&["-Cdir", "status"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(
            parse_global(&["-ca.b=c", "status"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(
            parse_global(&["--no-pag", "status"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(parse_global(&["--", "status"]).end, GlobalEnd::Unknown(0));
        assert_eq!(
            parse_global(&["--end-of-options", "x"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(
            parse_global(&["--shallow-file=x", "log"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(
            parse_global(&["--work-tree", "w", "log"]).end,
            GlobalEnd::Subcommand(2)
        );
        assert_eq!(parse_global(&["-c"]).end, GlobalEnd::MissingValue(0));
        assert_eq!(parse_global(&["--exec-path"]).end, GlobalEnd::Exits(0));
        assert_eq!(
            parse_global(&["--exec-path=/x", "log"]).end,
            GlobalEnd::Subcommand(1)
        );
        assert_eq!(
            parse_global(&["--list-cmds=main", "log"]).end,
            GlobalEnd::Exits(0)
        );
        assert_eq!(
            parse_global(&["--list-cmds", "main"]).end,
            GlobalEnd::Unknown(0)
        );
        assert_eq!(parse_global(&["-v", "push"]).end, GlobalEnd::Exits(0));
        assert_eq!(parse_global(&["-P"]).end, GlobalEnd::NoSubcommand);
    }
}
