//! git's option parsing, re-implemented for the two places the guard needs it: the global
//! options before the subcommand (`git.c`, `handle_options`: exact spellings only) and
//! `git push`'s own options (`parse-options.c`: long-option abbreviations, `--no-` negation,
//! `--verify` as the negation of `--no-verify`, clustered short flags, values attached or in the
//! next word, options anywhere among the operands, `--` and `--end-of-options`).

use crate::error::OptionError;

/// How an option takes its value (`parse-options.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// No value (`OPT_BIT`, `OPT_BOOL`, …).
    None,
    /// A required value: `--opt=V`, `--opt V`, `-oV`, `-o V`.
    Required,
    /// An optional value, only in the attached form `--opt=V` (`PARSE_OPT_OPTARG`).
    Optional,
}

/// One option of a command's table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
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

const fn opt(short: Option<char>, long: &'static str, arg: Arg) -> Spec {
    Spec {
        short,
        long,
        arg,
        negatable: true,
        alias_of: None,
    }
}

/// `git push` options of git 2.47 (`builtin/push.c`, `cmd_push`), in table order: the order
/// matters for git's abbreviation ambiguity rules.
pub(crate) const PUSH_OPTIONS: &[Spec] = &[
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
    Spec {
        short: Some('4'),
        long: "ipv4",
        arg: Arg::None,
        negatable: false,
        alias_of: None,
    },
    Spec {
        short: Some('6'),
        long: "ipv6",
        arg: Arg::None,
        negatable: false,
        alias_of: None,
    },
];

/// One parsed option occurrence, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Occurrence {
    /// The option's long name as in the table (an alias is reported as its target).
    pub long: &'static str,
    /// `true` for the negated form (`--no-force`, `--verify` for `no-verify`).
    pub unset: bool,
    /// The value, if one was given.
    pub value: Option<String>,
}

/// The outcome of parsing a command's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// Options in the order they appeared.
    pub options: Vec<Occurrence>,
    /// Operands, in order.
    pub operands: Vec<String>,
    /// `-h` (or `--help-all`) was given: git prints the usage and exits 129, doing nothing.
    pub help: bool,
}

impl Parsed {
    /// The last-wins state of a boolean option: `Some(true)` set, `Some(false)` unset.
    pub fn last_bool(&self, long: &str) -> Option<bool> {
        self.options
            .iter()
            .rev()
            .find(|o| o.long == long)
            .map(|o| !o.unset)
    }

    /// The last-wins value of a string option (`--no-<opt>` resets it to `None`).
    pub fn last_value(&self, long: &str) -> Option<&str> {
        let o = self.options.iter().rev().find(|o| o.long == long)?;
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
pub(crate) fn parse(words: &[String], table: &[Spec]) -> Result<Parsed, OptionError> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "--" || w == "--end-of-options" {
            out.operands.extend(words[i..].iter().cloned());
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
                            Some(words[i - 1].clone())
                        } else {
                            return Err(OptionError::MissingValue(format!("-{c}")));
                        }
                    }
                };
                out.options.push(Occurrence {
                    long: spec.alias_of.unwrap_or(spec.long),
                    unset: false,
                    value,
                });
            }
        } else {
            out.operands.push(w.clone());
        }
    }
    Ok(out)
}

fn take_value(
    spec: &Spec,
    unset: bool,
    attached: Option<String>,
    words: &[String],
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
                Ok(Some(words[*i - 1].clone()))
            }
            None => Err(OptionError::MissingValue(word.to_string())),
        },
    }
}

/// `parse_long_opt` of git 2.47's `parse-options.c`.
fn parse_long(arg_full: &str, table: &[Spec]) -> Result<LongMatch, OptionError> {
    let (arg, attached) = match arg_full.find('=') {
        Some(p) => (&arg_full[..p], Some(arg_full[p + 1..].to_string())),
        None => (arg_full, None),
    };
    let mut abbrev: Option<(usize, bool)> = None;
    let mut ambiguous: Option<usize> = None;
    for (idx, spec) in table.iter().enumerate() {
        let mut long_name = spec.long;
        let mut opt_unset = false;
        if !arg.starts_with("no-") && spec.negatable {
            if let Some(stripped) = long_name.strip_prefix("no-") {
                long_name = stripped;
                opt_unset = true;
            }
        }
        let mut flags_unset = false;
        if arg == long_name {
            return Ok(LongMatch::Exact(idx, opt_unset, attached));
        }
        let mut is_abbrev = !arg.is_empty() && long_name.starts_with(arg);
        if !is_abbrev {
            if !spec.negatable {
                continue;
            }
            if "no-".starts_with(arg) && !arg.is_empty() {
                // "negated and abbreviated very much"
                flags_unset = true;
                is_abbrev = true;
            } else if let Some(rest) = arg.strip_prefix("no-") {
                flags_unset = true;
                if rest == long_name {
                    return Ok(LongMatch::Exact(idx, !opt_unset, attached));
                }
                if !rest.is_empty() && long_name.starts_with(rest) {
                    is_abbrev = true;
                } else {
                    continue;
                }
            } else {
                continue;
            }
        }
        if is_abbrev {
            if let Some((prev, _)) = abbrev {
                let same_alias = table[prev].alias_of == Some(spec.long)
                    || spec.alias_of == Some(table[prev].long)
                    || (table[prev].alias_of.is_some() && table[prev].alias_of == spec.alias_of);
                if !same_alias {
                    ambiguous = Some(prev);
                }
            }
            abbrev = Some((idx, flags_unset ^ opt_unset));
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
}
