//! The option engine: splits a program's arguments into options and operands by its option
//! table, getopt_long style (getopt(3), "GNU extensions": `--` ends options, long options may
//! be abbreviated and take `=value` or the next word, short options cluster and take the
//! rest of the word or the next word).
//!
//! A table is a slice of [`Opt`], each option with whether it takes a value and its
//! [`Role`] (what its value is, what it makes the command do); it is the `options` of a
//! program's registry entry. The parser reads a table through [`Syntax`].

use crate::analysis::words::Field;

/// What the parser needs from an option table: which options take a value.
pub(crate) trait Syntax {
    /// Whether the short option `-c` takes a value.
    fn short_takes_value(&self, c: char) -> bool;
    /// Whether the long option `--name` (exact name, without `--`) takes a value.
    fn long_takes_value(&self, name: &str) -> bool;
    /// Whether a long option that takes a value starts with `prefix` (without `--`): the
    /// option `--prefix` may be an abbreviation of it.
    fn long_value_starts(&self, prefix: &str) -> bool;
}

/// What an option does to the command (the judge of a table-only program acts on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Nothing that matters to the policy (a flag, or a value that is not a path).
    Plain,
    /// Its value is a file the command reads.
    ReadsFile,
    /// Its value is a file the command writes: the command is not read-only.
    WritesFile,
    /// Its value is a directory the command writes scratch files in (checked as a write; the
    /// command stays read-only for the worktree).
    ScratchDir,
    /// Its value names paths read from a file at run time: they cannot be resolved now.
    PathsFromFile,
    /// The option is not read-only; the text says what it does (`--set (changes the clock)`).
    NotReadOnly(&'static str),
    /// Its value is a program the command runs (red `cmd.program-option`); the text is the
    /// finding's reason.
    Program(&'static str),
}

/// One option of a program: its short letter and/or long name, whether it takes a value,
/// and its [`Role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Opt {
    /// The short letter (`'\0'` when none).
    pub short: char,
    /// The long name without `--` (`""` when none).
    pub long: &'static str,
    /// Whether the option takes a value (`-n 5`, `-n5`, `--lines 5`, `--lines=5`).
    pub takes_value: bool,
    /// What the option does.
    pub role: Role,
}

impl Opt {
    /// A flag `-c`/`--long` without a value (either may be empty: `'\0'`, `""`).
    pub const fn flag(short: char, long: &'static str) -> Opt {
        Opt {
            short,
            long,
            takes_value: false,
            role: Role::Plain,
        }
    }
    /// An option `-c`/`--long` that takes a value.
    pub const fn val(short: char, long: &'static str) -> Opt {
        Opt {
            short,
            long,
            takes_value: true,
            role: Role::Plain,
        }
    }
    /// The same option with `role`.
    pub const fn role(self, role: Role) -> Opt {
        Opt { role, ..self }
    }

    /// Whether the option as written (`-o`, `--out`) names this option; long names may be
    /// abbreviated (taken broadly: any prefix counts, see [`names`]).
    pub fn is(&self, written: &str) -> bool {
        if self.short != '\0' {
            let mut cs = written.chars();
            if cs.next() == Some('-') && cs.next() == Some(self.short) && cs.next().is_none() {
                return true;
            }
        }
        !self.long.is_empty() && names_long(written, self.long)
    }
}

impl Syntax for [Opt] {
    fn short_takes_value(&self, c: char) -> bool {
        self.iter()
            .any(|o| o.takes_value && o.short == c && c != '\0')
    }
    fn long_takes_value(&self, name: &str) -> bool {
        self.iter()
            .any(|o| o.takes_value && !o.long.is_empty() && o.long == name)
    }
    fn long_value_starts(&self, prefix: &str) -> bool {
        self.iter()
            .any(|o| o.takes_value && !o.long.is_empty() && o.long.starts_with(prefix))
    }
}

/// A parsed argument.
#[derive(Debug, Clone)]
pub(crate) enum Tok {
    /// An option as written (`-o`, `--output`; the long name possibly abbreviated) and its value.
    Opt { name: String, value: Option<Field> },
    /// An option whose spelling is not known statically (`-$X`).
    DynamicOpt,
    /// An operand.
    Operand(Field),
}

/// Splits arguments into options and operands, getopt_long style: `--` ends options, long
/// options may be abbreviated and take `=value` or the next word, short options cluster and
/// take the rest of the word or the next word.
pub(crate) fn parse_opts<S: Syntax + ?Sized>(args: &[Field], spec: &S) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut only_operands = false;
    while i < args.len() {
        let f = &args[i];
        i += 1;
        if only_operands {
            out.push(Tok::Operand(f.clone()));
            continue;
        }
        let Some(t) = f.known_text() else {
            if f.known_prefix().starts_with('-')
                || f.known_prefix().is_empty()
                    && !f.parts.is_empty()
                    && f.empty_variant().is_empty()
            {
                // Unquoted unknown text could be an option as well as an operand.
                out.push(Tok::DynamicOpt);
            }
            out.push(Tok::Operand(f.clone()));
            continue;
        };
        if t == "--" {
            only_operands = true;
            continue;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, val) = match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(Field::lit(v))),
                None => (long.to_string(), None),
            };
            // Only an exact name takes the next word: an abbreviation could equally name a
            // flag (`--time` vs `--time-style`), and taking a path as a value would hide it.
            let takes = spec.long_takes_value(&name);
            let value = if val.is_some() {
                val
            } else if takes && i < args.len() {
                i += 1;
                Some(args[i - 1].clone())
            } else {
                None
            };
            out.push(Tok::Opt {
                name: written('-', &name),
                value,
            });
            continue;
        }
        if t.len() > 1 && t.starts_with('-') {
            let letters = &t[1..];
            for (j, c) in letters.char_indices() {
                if spec.short_takes_value(c) {
                    let rest = &letters[j + c.len_utf8()..];
                    let value = if !rest.is_empty() {
                        Some(Field::lit(rest))
                    } else if i < args.len() {
                        i += 1;
                        Some(args[i - 1].clone())
                    } else {
                        None
                    };
                    out.push(Tok::Opt {
                        name: written(c, ""),
                        value,
                    });
                    break;
                }
                out.push(Tok::Opt {
                    name: written(c, ""),
                    value: None,
                });
            }
            continue;
        }
        out.push(Tok::Operand(f.clone()));
    }
    out
}

/// An option as written: `-` and the letter `c` (`-c`), or, with `c` a `-`, `--` and `long`.
fn written(c: char, long: &str) -> String {
    let mut s = String::with_capacity(2 + long.len() + c.len_utf8());
    s.push('-');
    s.push(c);
    s.push_str(long);
    s
}

/// Whether the option as written (`--out`, `-o`) names `full` (`--output`), allowing
/// getopt_long's unambiguous abbreviations (taken broadly: any prefix counts).
pub(crate) fn names(opt: &str, full: &str) -> bool {
    if opt == full {
        return true;
    }
    opt.starts_with("--") && full.starts_with("--") && opt.len() > 2 && full.starts_with(opt)
}

/// [`names`] for a long name written without its `--` (`names_long("--out", "output")`).
pub(crate) fn names_long(opt: &str, long: &str) -> bool {
    opt.strip_prefix("--")
        .is_some_and(|o| o == long || (!o.is_empty() && long.starts_with(o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(words: &[&str]) -> Vec<Field> {
        words.iter().map(|w| Field::lit(w)).collect()
    }

    /// The options and operands, written `-x`, `-x=VALUE`, `OPERAND`.
    fn shape<S: Syntax + ?Sized>(words: &[&str], spec: &S) -> Vec<String> {
        parse_opts(&lits(words), spec)
            .into_iter()
            .map(|t| match t {
                Tok::Opt { name, value } => match value.and_then(|v| v.known()) {
                    Some(v) => format!("{name}={v}"),
                    None => name,
                },
                Tok::DynamicOpt => "?".to_string(),
                Tok::Operand(f) => f.known().unwrap_or_default(),
            })
            .collect()
    }

    const HEAD: &[Opt] = &[Opt::val('n', "lines"), Opt::val('c', "bytes")];

    #[test]
    fn short_options_cluster_and_take_the_rest_or_the_next_word() {
        assert_eq!(shape(&["-qn5", "f"], HEAD), ["-q", "-n=5", "f"]);
        assert_eq!(shape(&["-n", "5", "f"], HEAD), ["-n=5", "f"]);
        assert_eq!(shape(&["-vq", "f"], HEAD), ["-v", "-q", "f"]);
        // A value-taking letter at the end with nothing after it has no value.
        assert_eq!(shape(&["-n"], HEAD), ["-n"]);
    }

    #[test]
    fn long_options_take_equals_or_the_next_word_only_when_exact() {
        assert_eq!(shape(&["--lines", "5", "f"], HEAD), ["--lines=5", "f"]);
        assert_eq!(shape(&["--lines=5", "f"], HEAD), ["--lines=5", "f"]);
        // An abbreviation does not take the next word (it could name a flag).
        assert_eq!(shape(&["--lin", "5", "f"], HEAD), ["--lin", "5", "f"]);
        assert_eq!(shape(&["--lin=5"], HEAD), ["--lin=5"]);
    }

    #[test]
    fn double_dash_ends_options_and_a_lone_dash_is_an_operand() {
        assert_eq!(shape(&["--", "-n", "5"], HEAD), ["-n", "5"]);
        assert_eq!(shape(&["-", "-n5"], HEAD), ["-", "-n=5"]);
    }

    #[test]
    fn an_unknown_word_may_be_an_option() {
        let args = vec![Field::unknown()];
        let toks = parse_opts(&args, HEAD);
        assert!(matches!(toks[0], Tok::DynamicOpt));
        assert!(matches!(toks[1], Tok::Operand(_)));
    }

    #[test]
    fn flags_take_no_value_and_value_prefixes_are_known() {
        const TABLE: &[Opt] = &[
            Opt::val('n', "lines"),
            Opt::flag('q', "quiet"),
            Opt::val('\0', "lines-max"),
        ];
        assert_eq!(shape(&["-qn5", "f"], TABLE), ["-q", "-n=5", "f"]);
        assert_eq!(shape(&["--quiet", "x"], TABLE), ["--quiet", "x"]);
        assert!(TABLE.long_value_starts("lin"));
        assert!(!TABLE.long_value_starts("qu"));
        assert!(!TABLE.short_takes_value('q'));
        assert!(!TABLE.short_takes_value('\0'));
    }

    #[test]
    fn an_opt_names_its_short_letter_and_its_long_name_abbreviated() {
        let o = Opt::val('o', "output");
        assert!(o.is("-o"));
        assert!(o.is("--output"));
        assert!(o.is("--out"));
        assert!(!o.is("--outputx"));
        assert!(!o.is("-O"));
        assert!(!o.is("--"));
        assert!(!o.is("-oo"));
        let long_only = Opt::val('\0', "pid");
        assert!(!long_only.is("-\0"));
        assert!(long_only.is("--pid"));
    }

    #[test]
    fn long_option_abbreviations() {
        assert!(names("--compress-prog", "--compress-program"));
        assert!(names("--output", "--output"));
        assert!(!names("--outputx", "--output"));
        assert!(!names("-o", "--output"));
        assert!(!names("--", "--output"));
        assert!(names_long("--compress-prog", "compress-program"));
        assert!(!names_long("--", "output"));
        assert!(!names_long("-o", "output"));
    }
}
