//! Shell housekeeping: the builtins agents wrap every command in (DESIGN.md §2a "Agents wrap
//! commands in shell housekeeping"), recognised by kind, never by an agent's spelling.
//!
//! Neutral (they add no finding, so the line takes the colour of what they wrap):
//! - option builtins whose options only change what the classifier already assumes or makes
//!   bash stricter: `shopt -s|-u|-q|-p NAME…` and `set ±o NAME`/`set ±e…` of the options in
//!   [`SHOPT_OPTIONS`] and [`SET_OPTIONS`] (the tables say, per direction, why); an option that
//!   makes later code expand or run differently from what the analyser models (`shopt -s
//!   nullglob|dotglob|nocaseglob|globstar|lastpipe|extdebug`, `set -k`, `set -a`, `set -o
//!   posix`) is not neutral and stays yellow;
//! - `unalias -a`/`unalias NAME` (definitions seen earlier are kept: bash may have expanded an
//!   alias while reading the line, before `unalias` ran);
//! - `trap 'LITERAL' SIGNALS`: the body is analysed as code that runs, where the trap is set
//!   and again with the state the shell has when it exits (the end of the line or subshell);
//! - `jobs` (listing options only), `exit`/`return` with any status word (`exit $?`, `exit
//!   $__code`), a bare assignment of a special parameter that holds a number (`__code=$?`);
//! - `builtin NAME …` of a bash builtin: analysed as that builtin, with no wrapper floor;
//! - `eval` of literal words: analysed as inline code (the words are the code);
//! - redirections whose target is known and resolves inside the session's scratch directory
//!   (`Context::scratch`, made by tyba for this session), `>|` included;
//! - `source FILE`/`. FILE` of a literal path outside the worktree and the scratch directory
//!   that the classifier can read and that holds only definitions (functions, aliases,
//!   assignments and declarations, neutral option builtins): the definitions join the line's
//!   state, and a later use of a defined name takes the colour of the definition's body as
//!   well as its own. Variables such a file assigns are unknown afterwards, as if inherited
//!   (their values may be secrets; a snapshot's `PATH` is the person's own, so it does not
//!   count as a `PATH` the line changed), and exec-capable variables are red as anywhere. Any other readable file is
//!   analysed as inline code on top of the old rules (yellow `shell.source` and the path
//!   rules); an unreadable or non-literal one keeps the old rules alone.
//!
//! The "always" key of a line whose every part but one is neutral housekeeping is that part's
//! text ([`Analyzer::inner_command`]), so a person's "always" on a bare command matches the
//! agent's next wrapped call of it; a line with any other part keeps its whole text as key.
//!
//! Limits: a sourced file is read when the line is classified; a file changed between then
//! and the run is the kernel layer's to hold (every exec is classified again). Function bodies
//! replayed through `eval "$(… | base64 -d)"` are code assembled at run time (red).

mod peel;
mod sourced;

use sourced::*;
pub(crate) use sourced::{DefKind, Definition};

use super::commands::{Invocation, SHELL_BUILTINS};
use super::paths;
use super::words::{self, ExpandEnv, ExpandNotes, Field};
use super::{parse, Analyzer, State};
use crate::verdict::Verdict;
use brush_parser::ast::{self, SourceLocation};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `shopt` options: `(name, setting is neutral, unsetting is neutral)`. Unsetting restores
/// bash's non-interactive default or switches a feature off; setting is neutral when it only
/// affects interactive use, printing, or makes bash refuse more (the classifier parses with
/// extended globs and expands aliases wherever they are defined). Source: bash(1) "SHELL
/// BUILTIN COMMANDS", `shopt`.
pub(crate) const SHOPT_OPTIONS: &[(&str, bool, bool)] = &[
    ("array_expand_once", false, true),
    ("assoc_expand_once", false, true),
    ("autocd", true, true),
    ("bash_source_fullpath", true, true),
    ("cdable_vars", false, true),
    ("cdspell", true, true),
    ("checkhash", true, true),
    ("checkjobs", true, true),
    ("checkwinsize", true, true),
    ("cmdhist", true, true),
    ("compat31", false, true),
    ("compat32", false, true),
    ("compat40", false, true),
    ("compat41", false, true),
    ("compat42", false, true),
    ("compat43", false, true),
    ("compat44", false, true),
    ("complete_fullquote", true, true),
    ("direxpand", true, true),
    ("dirspell", true, true),
    // Globs would match dot files the classifier's glob leaves out.
    ("dotglob", false, true),
    ("execfail", true, true),
    ("expand_aliases", true, true),
    // DEBUG traps may skip or replace commands.
    ("extdebug", false, true),
    ("extglob", true, true),
    ("extquote", true, true),
    ("failglob", true, true),
    ("force_fignore", true, true),
    ("globasciiranges", true, true),
    ("globskipdots", true, true),
    // `**` would recurse where the classifier's glob does not.
    ("globstar", false, true),
    ("gnu_errfmt", true, true),
    ("histappend", true, true),
    ("histreedit", true, true),
    ("histverify", true, true),
    ("hostcomplete", true, true),
    ("huponexit", true, true),
    ("inherit_errexit", true, true),
    ("interactive_comments", true, true),
    // The last stage of a pipeline would change the shell's directory and variables.
    ("lastpipe", false, true),
    ("lithist", true, true),
    ("localvar_inherit", true, true),
    ("localvar_unset", true, true),
    ("login_shell", true, true),
    ("mailwarn", true, true),
    ("no_empty_cmd_completion", true, true),
    // Case-insensitive globs would match names (`.ENV`) the classifier's glob does not.
    ("nocaseglob", false, true),
    ("nocasematch", true, true),
    ("noexpand_translation", true, true),
    // A glob matching nothing would vanish (`cd *.x` becomes `cd`, to $HOME).
    ("nullglob", false, true),
    ("patsub_replacement", true, true),
    ("progcomp", true, true),
    ("progcomp_alias", true, true),
    ("promptvars", true, true),
    ("restricted_shell", true, true),
    ("shift_verbose", true, true),
    ("sourcepath", true, true),
    ("varredir_close", true, true),
    ("xpg_echo", true, true),
];

/// `set -o` options: `(long name, letter, setting is neutral, unsetting is neutral)`. Source:
/// bash(1) `set`. `allexport` (every later assignment reaches programs' environments),
/// `keyword` (assignment words anywhere become environment) and `posix` (other builtin
/// semantics) change how later code runs; everything else is checking, tracing, job control,
/// history or editing.
pub(crate) const SET_OPTIONS: &[(&str, Option<char>, bool, bool)] = &[
    ("allexport", Some('a'), false, true),
    ("braceexpand", Some('B'), true, true),
    ("emacs", None, true, true),
    ("errexit", Some('e'), true, true),
    ("errtrace", Some('E'), true, true),
    ("functrace", Some('T'), true, true),
    ("hashall", Some('h'), true, true),
    ("histexpand", Some('H'), true, true),
    ("history", None, true, true),
    ("ignoreeof", None, true, true),
    ("interactive-comments", None, true, true),
    ("keyword", Some('k'), false, true),
    ("monitor", Some('m'), true, true),
    ("noclobber", Some('C'), true, true),
    ("noexec", Some('n'), true, true),
    ("noglob", Some('f'), true, true),
    ("nolog", None, true, true),
    ("notify", Some('b'), true, true),
    ("nounset", Some('u'), true, true),
    ("onecmd", Some('t'), true, true),
    ("physical", Some('P'), true, true),
    ("pipefail", None, true, true),
    ("posix", None, false, true),
    ("privileged", Some('p'), true, true),
    ("verbose", Some('v'), true, true),
    ("vi", None, true, true),
    ("xtrace", Some('x'), true, true),
];

/// Whether `shopt ARGS` only changes options in a neutral direction (or prints them).
pub(crate) fn shopt_neutral(args: &[String]) -> bool {
    let mut set = None;
    let mut long = false;
    let mut names = Vec::new();
    for a in args {
        match a.strip_prefix('-') {
            Some(flags) if !names.is_empty() || flags.is_empty() => return false,
            Some(flags) => {
                for c in flags.chars() {
                    match c {
                        's' => set = Some(true),
                        'u' => set = Some(false),
                        'q' | 'p' => {}
                        'o' => long = true,
                        _ => return false,
                    }
                }
            }
            None => names.push(a.as_str()),
        }
    }
    let Some(set) = set else {
        // Printing or querying only.
        return names.iter().all(|n| known_option(n, long));
    };
    names.iter().all(|n| {
        if long {
            set_option_neutral(n, set)
        } else {
            SHOPT_OPTIONS
                .iter()
                .any(|(o, s, u)| o == n && if set { *s } else { *u })
        }
    })
}

fn known_option(name: &str, long: bool) -> bool {
    if long {
        SET_OPTIONS.iter().any(|(o, ..)| *o == name)
    } else {
        SHOPT_OPTIONS.iter().any(|(o, ..)| *o == name)
    }
}

fn set_option_neutral(name: &str, set: bool) -> bool {
    SET_OPTIONS
        .iter()
        .any(|(o, _, s, u)| *o == name && if set { *s } else { *u })
}

/// Whether `set ARGS` only changes options in a neutral direction (`set -euo pipefail`,
/// `set +o posix`, `set -o` to print). `set` alone prints every variable (secrets) and `set --
/// WORDS` sets positional parameters: neither is neutral here (the second is judged with its
/// words where `set` is, `commands.rs`).
pub(crate) fn set_neutral(args: &[String]) -> bool {
    if args.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (on, flags) = match (a.strip_prefix('-'), a.strip_prefix('+')) {
            (Some(f), _) => (true, f),
            (_, Some(f)) => (false, f),
            _ => return false,
        };
        if flags.is_empty() || flags.starts_with('-') {
            return false;
        }
        for c in flags.chars() {
            if c == 'o' {
                i += 1;
                match args.get(i) {
                    // `set -o`/`set +o` alone print the options.
                    None => return true,
                    Some(name) if set_option_neutral(name, on) => {}
                    Some(_) => return false,
                }
            } else {
                let ok = SET_OPTIONS
                    .iter()
                    .any(|(_, l, s, u)| *l == Some(c) && if on { *s } else { *u });
                if !ok {
                    return false;
                }
            }
        }
        i += 1;
    }
    true
}

/// What `set ARGS` does to the positional parameters (bash(1) "set").
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SetParams<'a> {
    /// Only options: the parameters stay.
    Unchanged,
    /// They become these words (after `--`, `-` or the first word that is not an option).
    To(&'a [Field]),
    /// A word that cannot be known may be an option or the first parameter.
    Unknown,
}

/// How `set ARGS` changes the positional parameters, and how many of `ARGS` are options
/// (`-o NAME` counts as two).
pub(crate) fn set_params(args: &[Field]) -> (SetParams<'_>, usize) {
    let mut i = 0;
    while i < args.len() {
        let Some(a) = args[i].known() else {
            return (SetParams::Unknown, i);
        };
        match a.as_str() {
            "--" => return (SetParams::To(&args[i + 1..]), i),
            // `set -`: the rest are the parameters; alone, it changes none.
            "-" if i + 1 < args.len() => return (SetParams::To(&args[i + 1..]), i),
            "-" => return (SetParams::Unchanged, i),
            _ if a.len() > 1 && (a.starts_with('-') || a.starts_with('+')) => {
                if a[1..].contains('o') {
                    i += 1;
                }
            }
            _ => return (SetParams::To(&args[i..]), i),
        }
        i += 1;
    }
    (SetParams::Unchanged, args.len().min(i))
}

/// Whether `jobs ARGS` only lists jobs (`-x` runs a command).
fn jobs_neutral(args: &[String]) -> bool {
    args.iter().all(|a| match a.strip_prefix('-') {
        Some(f) => !f.is_empty() && f.chars().all(|c| "lnprs".contains(c)),
        None => a.starts_with('%') || a.bytes().all(|b| b.is_ascii_digit()),
    })
}

/// A raw assignment value that is only a special parameter holding a number (`$?`, `${?}`,
/// `"$#"`, `$$`, `$!`): never a path or program.
pub(crate) fn numeric_special(raw: &str) -> bool {
    let v = raw.trim_matches('"');
    matches!(
        v,
        "$?" | "${?}" | "$#" | "${#}" | "$$" | "${$}" | "$!" | "${!}"
    )
}

/// A raw word that is one parameter expansion and nothing else (`$__code`, `"${rc}"`): no
/// substitution, no operator that could run or assign anything.
fn plain_parameter(raw: &str) -> bool {
    let v = raw
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(raw);
    let Some(v) = v.strip_prefix('$') else {
        return false;
    };
    let name = v
        .strip_prefix('{')
        .and_then(|v| v.strip_suffix('}'))
        .unwrap_or(v);
    !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Analyzer<'_> {
    /// The housekeeping builtins; `None` when `inv` is not one in a neutral form (the caller's
    /// rules then apply as before).
    pub(crate) fn housekeeping(
        &mut self,
        st: &State,
        inv: &Invocation<'_>,
        depth: usize,
    ) -> Option<State> {
        let p = inv.program.as_str();
        let args: Option<Vec<String>> = inv.args.iter().map(Field::known).collect();
        match p {
            "builtin" => {
                let name = inv.args.first()?.known()?;
                if !SHELL_BUILTINS.contains(&name.as_str()) {
                    return None;
                }
                Some(self.invoke(st.clone(), inv.args, inv.env.clone(), inv.stdin, depth))
            }
            "shopt" if shopt_neutral(args.as_deref()?) => Some(st.clone()),
            "set" if set_neutral(args.as_deref()?) => Some(st.clone()),
            "jobs" if jobs_neutral(args.as_deref()?) => Some(st.clone()),
            "unalias" => {
                let args = args?;
                // `unalias -a`, `unalias [--] NAME…`: it removes aliases; the names are then
                // what they are without them.
                let mut st = st.clone();
                let ok = args
                    .iter()
                    .all(|a| a == "-a" || a == "--" || !a.starts_with('-'));
                if args.iter().any(|a| a == "-a") {
                    st.defs.retain(|d| d.kind != DefKind::Alias);
                }
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    st.defs.retain(|d| d.name != *a || d.kind != DefKind::Alias);
                }
                ok.then_some(st)
            }
            // The status word is a number: it names no path (substitutions in it were analysed
            // when it was expanded).
            "exit" | "return" => Some(st.clone()),
            "trap" => {
                let args = args?;
                let operands: Vec<&String> = args
                    .iter()
                    .skip_while(|a| *a == "--")
                    .filter(|a| !matches!(a.as_str(), "-p" | "-l" | "-P"))
                    .collect();
                if args.iter().any(|a| {
                    a.starts_with('-') && !matches!(a.as_str(), "-p" | "-l" | "-P" | "--" | "-")
                }) {
                    return None;
                }
                // `trap SIG` alone resets it; `trap - SIG…`, `trap '' SIG…` reset or ignore.
                if operands.len() >= 2 && !operands[0].is_empty() && operands[0] != "-" {
                    let code = operands[0].clone();
                    self.line(&code, st.clone(), depth + 1);
                    self.traps.push(code);
                }
                Some(st.clone())
            }
            _ => None,
        }
    }

    /// Analyses the trap bodies set since `from` with the state the shell is in when it exits.
    pub(crate) fn flush_traps(&mut self, from: usize, st: &State, depth: usize) {
        while self.traps.len() > from {
            let Some(code) = self.traps.pop() else { break };
            self.line(&code, st.clone(), depth + 1);
        }
    }

    /// Whether a known redirection target lies in the session's scratch directory from every
    /// directory the line may be in.
    pub(crate) fn in_scratch(&self, st: &State, f: &Field) -> bool {
        let (Some(scratch), Some(t)) = (self.ctx.scratch, f.known()) else {
            return false;
        };
        if f.has_glob() || t.is_empty() {
            return false;
        }
        st.cwds.iter().all(|c| {
            let cwd = match c {
                Some(c) => c.as_path(),
                None if t.starts_with('/') => Path::new("/"),
                None => return false,
            };
            paths::resolve(cwd, &t).starts_with(scratch)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn fields(s: &str) -> Vec<Field> {
        s.split_whitespace().map(Field::lit).collect()
    }

    #[test]
    fn set_operands_are_the_positional_parameters() {
        let to = |args: &str| -> Option<Vec<String>> {
            let a = fields(args);
            match set_params(&a).0 {
                SetParams::To(ws) => Some(ws.iter().filter_map(Field::known).collect()),
                _ => None,
            }
        };
        assert_eq!(to("-- rm -rf build"), Some(w("rm -rf build")));
        assert_eq!(to("rm -rf build"), Some(w("rm -rf build")));
        assert_eq!(to("-e -- a"), Some(w("a")));
        assert_eq!(to("-euo pipefail x y"), Some(w("x y")));
        assert_eq!(to("+o posix -- -x"), Some(w("-x")));
        assert_eq!(to("- a -b"), Some(w("a -b")));
        assert_eq!(to("--"), Some(vec![]));
        assert_eq!(set_params(&fields("-e")).0, SetParams::Unchanged);
        assert_eq!(set_params(&fields("-o")).0, SetParams::Unchanged);
        assert_eq!(set_params(&fields("-")).0, SetParams::Unchanged);
        assert_eq!(set_params(&[]).0, SetParams::Unchanged);
        assert_eq!(set_params(&fields("-e -- a")).1, 1);
        assert_eq!(set_params(&fields("-o pipefail a")).1, 2);
        let unknown = [Field::lit("-e"), Field::unknown(), Field::lit("x")];
        assert_eq!(set_params(&unknown), (SetParams::Unknown, 1));
    }

    #[test]
    fn shopt_directions() {
        assert!(shopt_neutral(&w(
            "-u promptvars nullglob extglob nocaseglob dotglob"
        )));
        assert!(shopt_neutral(&w("-s extglob expand_aliases checkwinsize")));
        assert!(shopt_neutral(&w("-q extglob")));
        assert!(shopt_neutral(&w("-p")));
        assert!(shopt_neutral(&w("-s -o pipefail")));
        assert!(!shopt_neutral(&w("-s nullglob")));
        assert!(!shopt_neutral(&w("-s extglob dotglob")));
        assert!(!shopt_neutral(&w("-s -o posix")));
        assert!(!shopt_neutral(&w("-s frobnicate")));
        assert!(!shopt_neutral(&w("-x extglob")));
        // Options after names are names to bash: not accepted.
        assert!(!shopt_neutral(&w("extglob -s")));
    }

    #[test]
    fn set_directions() {
        assert!(set_neutral(&w("-euo pipefail")));
        assert!(set_neutral(&w("+e")));
        assert!(set_neutral(&w("-o errexit -o nounset")));
        assert!(set_neutral(&w("+o posix +a +k")));
        assert!(set_neutral(&w("-o")));
        assert!(!set_neutral(&[]));
        assert!(!set_neutral(&w("-a")));
        assert!(!set_neutral(&w("-ek")));
        assert!(!set_neutral(&w("-o posix")));
        assert!(!set_neutral(&w("-- x")));
        assert!(!set_neutral(&w("x")));
        assert!(!set_neutral(&w("-e x")));
    }

    #[test]
    fn jobs_and_status_words() {
        assert!(jobs_neutral(&w("-p")));
        assert!(jobs_neutral(&w("-l %1")));
        assert!(!jobs_neutral(&w("-x make")));
        for ok in ["$?", "${?}", "\"$?\"", "$#", "$$", "$!"] {
            assert!(numeric_special(ok), "{ok}");
        }
        for no in ["$x", "$(true)", "1", "$?x"] {
            assert!(!numeric_special(no), "{no}");
        }
        for ok in ["$__code", "\"${rc}\"", "$x1"] {
            assert!(plain_parameter(ok), "{ok}");
        }
        for no in ["$(make install)", "${x:-$(y)}", "$", "${x[0]}", "$1x-"] {
            assert!(!plain_parameter(no), "{no}");
        }
    }

    #[test]
    fn definitions_files() {
        let defs = |t: &str| definitions_only(&parse(t).unwrap());
        let d = defs("f () { rm -rf ~; }\nalias -- ll='ls -l'\nexport PATH=/usr/bin\nshopt -s expand_aliases\nunalias -a 2>/dev/null || true\n").unwrap();
        assert_eq!(d.defs.len(), 2);
        assert_eq!(d.defs[1].kind, DefKind::Alias);
        assert_eq!(&*d.defs[1].body, "ls -l");
        assert_eq!(d.vars, vec!["PATH"]);
        for not in [
            "echo hi",
            "f () { :; } &",
            "X=1 make",
            "shopt -s globstar",
            "eval \"$(echo Zgo= | base64 -d)\"",
            "declare -p",
            "alias ll=\"$(pwd)\"",
            "ls | cat",
        ] {
            assert!(defs(not).is_none(), "{not}");
        }
    }
}
