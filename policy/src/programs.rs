//! Program facts the policy decides by, for the crates that must agree with it (the
//! supervisor reads an intercepted exec's program with these, so a shell is the same shell
//! to both).

/// Names of the shells whose `-c STRING` the policy analyses as a command line (DESIGN.md
/// §2a "Shells and interpreters").
pub const SHELLS: &[&str] = crate::analysis::SHELLS;

/// The system program directories: a program path directly in one of them (after folding
/// `/proc/self/root` and `..`) is the program of that name; a bare name resolves there on a
/// standard `PATH`.
pub const SYSTEM_BIN_DIRS: &[&str] = crate::analysis::SYSTEM_BIN_DIRS;

/// Whether `name` (a bare program name) is one of [`SHELLS`].
pub fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// How a shell's arguments (`argv[1..]`) read by the shell's INVOCATION rules (bash(1)
/// "INVOCATION" and "OPTIONS", dash(1) "Invocation"): which words are options, which words
/// are option values, and which operand is the command string or the script.
///
/// Indices are into the slice given to [`read_shell_args`] (`argv[1..]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellArgs {
    /// `-c` was given: `string` is the command string; the operands after it are `$0 $1 …`.
    Command {
        /// Index of the command string.
        string: usize,
    },
    /// `-c` was given but no operand follows the options: the shell refuses to start.
    MissingCommand,
    /// No `-c`: the first operand is a script file the shell runs, the rest `$1 …`.
    Script {
        /// Index of the script file's name.
        file: usize,
    },
    /// No `-c` and no script operand, or `-s`: commands are read from stdin; the operands
    /// (from `operands` on) are `$1 …`.
    Stdin {
        /// Index of the first positional parameter.
        operands: usize,
    },
    /// The words cannot be read with certainty (an unknown or misplaced option, a word not
    /// known statically, a dialect this reader does not model): judge the whole argv, never
    /// one word of it alone.
    Uncertain,
}

/// What a shell's options say it reads before its commands (bash(1) INVOCATION): whether it
/// is a login (`-l`, `--login`) or interactive (`-i`) shell, and the files named by
/// `--rcfile FILE` / `--init-file FILE` (one or two dashes). When the argv is not read with
/// certainty ([`ShellArgs::Uncertain`]), `login` is true and `sourced` names every word after
/// an `rcfile`/`init-file` spelling, so the caller judges the most the shell could read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellStartup {
    /// A login shell (`-l`, `--login`, `-login`).
    pub login: bool,
    /// An interactive shell (`-i`).
    pub interactive: bool,
    /// Indices (into `argv[1..]`) of the files the shell is told to source.
    pub sourced: Vec<usize>,
}

/// The startup facts of a shell's arguments ([`ShellStartup`]), read as by
/// [`read_shell_args`].
pub fn shell_startup(shell: &str, args: &[Option<&str>]) -> ShellStartup {
    let (form, mut facts) = read_both(shell, args);
    if form == ShellArgs::Uncertain {
        facts.login = true;
        facts.sourced = args
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                matches!(
                    w,
                    Some("--rcfile" | "-rcfile" | "--init-file" | "-init-file")
                )
            })
            .map(|(i, _)| i + 1)
            .filter(|i| *i < args.len())
            .collect();
    }
    facts
}

/// bash's long options (bash(1) "OPTIONS"): accepted with one or two dashes, only before the
/// single-character options; `--rcfile FILE` and `--init-file FILE` take a value.
const BASH_LONG: &[&str] = &[
    "debug",
    "debugger",
    "dump-po-strings",
    "dump-strings",
    "help",
    "init-file",
    "login",
    "noediting",
    "noprofile",
    "norc",
    "posix",
    "pretty-print",
    "rcfile",
    "restricted",
    "verbose",
    "version",
    "wordexp",
];
/// bash's single-character options that take no value (`set` flags and the invocation-only
/// `-i -l -r -s -D -c`).
const BASH_FLAGS: &str = "abefhkmnptuvxBCEHPTilrsDc";
/// Single-character options of dash and the other POSIX-style shells (dash(1)) that take no
/// value; any other letter makes the argv [`ShellArgs::Uncertain`].
const POSIX_FLAGS: &str = "abCefhimnsuvxlc";

/// The option dialect of a shell name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Bash,
    Posix,
    /// getopt-style shells (fish, csh, tcsh) whose `-c` takes the next word as its value.
    Getopt,
}

/// Reads a shell's arguments (`args` = `argv[1..]`, `None` for a word not known statically,
/// which makes the reading [`ShellArgs::Uncertain`] where an option may stand)
/// by the INVOCATION rules of the shell named `shell` (a base name from [`SHELLS`]).
///
/// bash (bash(1)): long options first (`--name` or `-name`; `--rcfile`/`--init-file` take a
/// value; an unknown `--name` is an error), then option words starting with `-` or `+`, whose
/// letters `o` and `O` each take the next word as a value (`-eo pipefail`, `-oo a b`); `-` or
/// `--` ends the options; with `-c` (or `+c`) the first operand is the command string, else
/// the first operand is a script unless `-s`. dash and the POSIX shells: the same, with `-o`
/// only. `sh` is read both ways (it is bash on some systems, dash on others) and is
/// [`ShellArgs::Uncertain`] when the two disagree. Anything the reader is not sure of
/// (an unknown letter, a long option out of place, a missing option value) is
/// [`ShellArgs::Uncertain`].
pub fn read_shell_args(shell: &str, args: &[Option<&str>]) -> ShellArgs {
    read_both(shell, args).0
}

/// The reading of `args` by the dialect(s) of `shell`, with its startup facts.
fn read_both(shell: &str, args: &[Option<&str>]) -> (ShellArgs, ShellStartup) {
    match shell {
        "bash" | "rbash" => read_with(Dialect::Bash, args),
        "sh" => {
            let (b, p) = (
                read_with(Dialect::Bash, args),
                read_with(Dialect::Posix, args),
            );
            if b == p {
                b
            } else {
                (ShellArgs::Uncertain, b.1)
            }
        }
        "fish" | "csh" | "tcsh" => read_with(Dialect::Getopt, args),
        _ => read_with(Dialect::Posix, args),
    }
}

fn read_with(dialect: Dialect, args: &[Option<&str>]) -> (ShellArgs, ShellStartup) {
    let mut facts = ShellStartup::default();
    let form = read_into(dialect, args, &mut facts);
    (form, facts)
}

fn read_into(dialect: Dialect, args: &[Option<&str>], facts: &mut ShellStartup) -> ShellArgs {
    use ShellArgs::*;
    let mut i = 0;
    if dialect == Dialect::Getopt {
        // Only the plain `-c STRING …` is read; getopt's permutations and attached values are
        // not modelled.
        return match args.first() {
            Some(Some("-c")) if args.len() > 1 => Command { string: 1 },
            _ => Uncertain,
        };
    }
    if dialect == Dialect::Bash {
        while let Some(w) = args.get(i) {
            let Some(w) = *w else { return Uncertain };
            let Some(name) = w.strip_prefix('-') else {
                break;
            };
            let (double, name) = match name.strip_prefix('-') {
                Some(n) if !n.is_empty() => (true, n),
                _ => (false, name),
            };
            if BASH_LONG.contains(&name) {
                i += 1;
                facts.login |= name == "login";
                if matches!(name, "rcfile" | "init-file") {
                    if args.get(i).is_none() {
                        return Uncertain;
                    }
                    facts.sourced.push(i);
                    i += 1;
                }
                continue;
            }
            if double {
                // bash: "invalid option"; it does not start.
                return Uncertain;
            }
            break;
        }
    }
    let flags = if dialect == Dialect::Bash {
        BASH_FLAGS
    } else {
        POSIX_FLAGS
    };
    let (mut command, mut stdin) = (false, false);
    while let Some(w) = args.get(i) {
        let Some(w) = *w else { return Uncertain };
        if w == "-" || w == "--" {
            i += 1;
            break;
        }
        let Some(letters) = w.strip_prefix('-').or_else(|| w.strip_prefix('+')) else {
            break;
        };
        let mut next = i + 1;
        for l in letters.chars() {
            match l {
                'o' | 'O' if l == 'o' || dialect == Dialect::Bash => {
                    // Each value letter takes the next word, in cluster order.
                    match args.get(next) {
                        Some(Some(_)) => next += 1,
                        // `-o` last lists the options (bash), an unknown value is not sure.
                        _ => return Uncertain,
                    }
                }
                'c' => command = true,
                's' => stdin = true,
                'l' => facts.login = true,
                'i' => facts.interactive = true,
                l if flags.contains(l) => {}
                _ => return Uncertain,
            }
        }
        i = next;
    }
    if command {
        return match args.get(i) {
            Some(_) => Command { string: i },
            None => MissingCommand,
        };
    }
    match args.get(i) {
        Some(_) if !stdin => Script { file: i },
        _ => Stdin { operands: i },
    }
}

#[cfg(test)]
mod tests {
    use super::ShellArgs::*;
    use super::*;

    fn read(shell: &str, line: &[&str]) -> ShellArgs {
        let words: Vec<Option<&str>> = line.iter().map(|w| Some(*w)).collect();
        read_shell_args(shell, &words)
    }

    #[test]
    fn option_values_are_never_the_command_string() {
        assert_eq!(
            read("bash", &["-c", "-o", "history", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("bash", &["-c", "+o", "history", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("bash", &["-c", "-O", "extglob", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("bash", &["+O", "extglob", "-c", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("bash", &["-eo", "pipefail", "-c", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("bash", &["-co", "history", "rm x", "a0", "a1"]),
            Command { string: 2 }
        );
        // Each value letter of a cluster takes its own word.
        assert_eq!(
            read("bash", &["-oOc", "errexit", "extglob", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("dash", &["-c", "-o", "errexit", "rm x"]),
            Command { string: 3 }
        );
        assert_eq!(
            read("sh", &["-eo", "noglob", "-c", "rm x"]),
            Command { string: 3 }
        );
    }

    #[test]
    fn bash_long_options_with_one_or_two_dashes() {
        for rc in ["--rcfile", "-rcfile", "--init-file", "-init-file"] {
            assert_eq!(
                read("bash", &[rc, "/dev/null", "-c", "rm x"]),
                Command { string: 3 },
                "{rc}"
            );
        }
        assert_eq!(
            read(
                "bash",
                &["--noprofile", "-norc", "-c", "-O", "extglob", "rm x"]
            ),
            Command { string: 5 }
        );
        assert_eq!(read("bash", &["--login", "script.sh"]), Script { file: 1 });
        // An unknown long option, a long option after the short ones, a missing value.
        assert_eq!(read("bash", &["--frobnicate", "-c", "rm x"]), Uncertain);
        assert_eq!(read("bash", &["-c", "--norc", "rm x"]), Uncertain);
        assert_eq!(read("bash", &["--rcfile"]), Uncertain);
        // dash has no long options.
        assert_eq!(
            read("dash", &["-rcfile", "/dev/null", "-c", "rm x"]),
            Uncertain
        );
        assert_eq!(
            read("sh", &["-rcfile", "/dev/null", "-c", "rm x"]),
            Uncertain
        );
    }

    #[test]
    fn end_of_options_stdin_and_scripts() {
        assert_eq!(read("bash", &["-c", "--", "rm x"]), Command { string: 2 });
        assert_eq!(read("bash", &["-c", "-", "rm x"]), Command { string: 2 });
        assert_eq!(read("dash", &["-c", "-", "rm x"]), Command { string: 2 });
        assert_eq!(read("bash", &["--", "-c"]), Script { file: 1 });
        assert_eq!(read("bash", &["+c", "rm x"]), Command { string: 1 });
        assert_eq!(read("bash", &["-c", "-s", "rm x"]), Command { string: 2 });
        assert_eq!(read("bash", &["-s", "a", "b"]), Stdin { operands: 1 });
        assert_eq!(read("bash", &["-x"]), Stdin { operands: 1 });
        assert_eq!(read("bash", &[]), Stdin { operands: 0 });
        assert_eq!(read("bash", &["-e", "script.sh", "-c"]), Script { file: 1 });
        assert_eq!(read("bash", &["-c"]), MissingCommand);
        // `-O` takes the would-be command string: bash refuses to start.
        assert_eq!(read("bash", &["-c", "-O", "rm x"]), MissingCommand);
    }

    #[test]
    fn startup_files_and_login_whatever_the_spelling() {
        let st = |sh: &str, line: &[&str]| {
            let words: Vec<Option<&str>> = line.iter().map(|w| Some(*w)).collect();
            shell_startup(sh, &words)
        };
        let s = st("bash", &["-rcfile", "evil", "-c", "ls"]);
        assert_eq!(s.sourced, vec![1]);
        let s = st("bash", &["--init-file", "a", "-login", "-c", "ls"]);
        assert_eq!((s.login, s.sourced), (true, vec![1]));
        assert!(st("bash", &["-lc", "ls"]).login);
        assert!(st("bash", &["-c", "-i", "ls"]).interactive);
        assert!(!st("bash", &["-c", "-o", "history", "ls"]).login);
        // An argv read without certainty is judged for the most it could read.
        let s = st("bash", &["--frob", "--rcfile", "evil", "-c", "ls"]);
        assert_eq!((s.login, s.sourced), (true, vec![2]));
    }

    #[test]
    fn what_is_not_sure_is_uncertain() {
        assert_eq!(read("bash", &["-c", "-o"]), Uncertain);
        assert_eq!(read("bash", &["-cZ", "rm x"]), Uncertain);
        assert_eq!(read("dash", &["-c", "-O", "extglob", "rm x"]), Uncertain);
        // A word not known where an option may stand (`bash -c $X`: `$X` may be `-o`).
        assert_eq!(read_shell_args("bash", &[Some("-c"), None]), Uncertain);
        assert_eq!(
            read_shell_args("bash", &[None, Some("-c"), Some("x")]),
            Uncertain
        );
        assert_eq!(read("fish", &["-c", "ls"]), Command { string: 1 });
        assert_eq!(read("fish", &["-d", "3", "-c", "ls"]), Uncertain);
        // sh read as bash and as dash disagree on `-O`: not sure.
        assert_eq!(read("sh", &["-O", "extglob", "-c", "rm x"]), Uncertain);
    }
}
