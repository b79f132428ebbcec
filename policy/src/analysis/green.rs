//! The closed green list (DESIGN.md §2a): read-only commands with the flags and subcommands
//! that keep them read-only. Compiled in; no configuration can extend or shrink it.
//!
//! Each entry says which operands are paths (checked against the worktree), which are
//! patterns or programs (not paths), and which options leave the read-only set: an option
//! that writes a file makes the command yellow, one whose value is a program run as a hook or
//! filter makes it red.

use super::paths::Access;
use super::words::Field;
use crate::verdict::{Finding, Verdict};

/// Programs on the green list (some only with read-only flags or subcommands).
const GREEN: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "nl",
    "tac",
    "rev",
    "cut",
    "tr",
    "paste",
    "fold",
    "column",
    "comm",
    "cmp",
    "diff",
    "stat",
    "du",
    "df",
    "tree",
    "file",
    "realpath",
    "readlink",
    "basename",
    "dirname",
    "pwd",
    "cd",
    "pushd",
    "popd",
    "echo",
    "printf",
    "true",
    "false",
    "test",
    "[",
    "which",
    "type",
    "whoami",
    "id",
    "uname",
    "date",
    "seq",
    "expr",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "od",
    "hexdump",
    "xxd",
    "base64",
    "jq",
    "sort",
    "uniq",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "fd",
    "sed",
    "git",
];

/// Whether `program` is on the green list (with some flags at least).
pub(crate) fn is_green_program(program: &str) -> bool {
    GREEN.contains(&program)
}

/// Option syntax of one command: short letters and long names that take a value.
pub(crate) struct OptSpec {
    pub short_val: &'static str,
    pub long_val: &'static [&'static str],
}

pub(crate) const NO_VALUES: OptSpec = OptSpec {
    short_val: "",
    long_val: &[],
};

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
pub(crate) fn parse_opts(args: &[Field], spec: &OptSpec) -> Vec<Tok> {
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
        let Some(t) = f.known() else {
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
            let takes = spec.long_val.iter().any(|l| *l == name);
            let value = if val.is_some() {
                val
            } else if takes && i < args.len() {
                i += 1;
                Some(args[i - 1].clone())
            } else {
                None
            };
            out.push(Tok::Opt {
                name: format!("--{name}"),
                value,
            });
            continue;
        }
        if t.len() > 1 && t.starts_with('-') {
            let letters: Vec<char> = t[1..].chars().collect();
            let mut j = 0;
            while j < letters.len() {
                let c = letters[j];
                if spec.short_val.contains(c) {
                    let rest: String = letters[j + 1..].iter().collect();
                    let value = if !rest.is_empty() {
                        Some(Field::lit(&rest))
                    } else if i < args.len() {
                        i += 1;
                        Some(args[i - 1].clone())
                    } else {
                        None
                    };
                    out.push(Tok::Opt {
                        name: format!("-{c}"),
                        value,
                    });
                    break;
                }
                out.push(Tok::Opt {
                    name: format!("-{c}"),
                    value: None,
                });
                j += 1;
            }
            continue;
        }
        out.push(Tok::Operand(f.clone()));
    }
    out
}

/// Whether the option as written (`--out`, `-o`) names `full` (`--output`), allowing
/// getopt_long's unambiguous abbreviations (taken broadly: any prefix counts).
pub(crate) fn names(opt: &str, full: &str) -> bool {
    if opt == full {
        return true;
    }
    opt.starts_with("--") && full.starts_with("--") && opt.len() > 2 && full.starts_with(opt)
}

/// What a green-list entry says about one invocation.
#[derive(Debug, Default)]
pub(crate) struct Judgement {
    /// Fields used as paths, with how they are used.
    pub paths: Vec<(Field, Access)>,
    /// Rules that fired (yellow for writing flags, red for program-valued options…).
    pub findings: Vec<Finding>,
    /// The command's default operand is the current directory (`ls`, `grep -r`, `find`).
    pub reads_cwd: bool,
    /// The command recurses following symlinks (`grep -R`, `rg -L`) from these paths: a
    /// symlink out of the worktree beneath them is a read outside.
    pub follows_links: Option<Vec<Field>>,
}

impl Judgement {
    fn not_green(&mut self, program: &str, what: &str) {
        self.findings.push(Finding::new(
            Verdict::Yellow,
            "cmd.not-read-only",
            format!("`{program}` with {what} is not read-only"),
        ));
    }
    fn red(&mut self, rule: &str, reason: String) {
        self.findings.push(Finding::new(Verdict::Red, rule, reason));
    }
    fn path(&mut self, f: Field, a: Access) {
        self.paths.push((f, a));
    }

    /// The paths a search reads: its operands, or the current directory when it recurses
    /// without any; with `follows`, the start points of a recursion that follows symlinks.
    fn search_paths(&mut self, rest: Vec<Field>, recurses_by_default: bool, follows: bool) {
        if rest.is_empty() && recurses_by_default {
            self.reads_cwd = true;
        }
        if follows {
            self.follows_links = Some(if rest.is_empty() {
                vec![Field::lit(".")]
            } else {
                rest.clone()
            });
        }
        for f in rest {
            self.path(f, Access::Read);
        }
    }
}

/// Option values of simple read-only tools.
fn spec_for(program: &str) -> OptSpec {
    match program {
        "head" | "tail" => OptSpec {
            short_val: "ncs",
            long_val: &[
                "lines",
                "bytes",
                "sleep-interval",
                "pid",
                "max-unchanged-stats",
            ],
        },
        "nl" => OptSpec {
            short_val: "bdfhilnsvw",
            long_val: &[
                "body-numbering",
                "section-delimiter",
                "footer-numbering",
                "header-numbering",
                "line-increment",
                "join-blank-lines",
                "number-format",
                "number-separator",
                "starting-line-number",
                "number-width",
            ],
        },
        "tac" => OptSpec {
            short_val: "s",
            long_val: &["separator"],
        },
        "cut" => OptSpec {
            short_val: "bcdf",
            long_val: &[
                "bytes",
                "characters",
                "delimiter",
                "fields",
                "output-delimiter",
            ],
        },
        "paste" => OptSpec {
            short_val: "d",
            long_val: &["delimiters"],
        },
        "fold" => OptSpec {
            short_val: "w",
            long_val: &["width"],
        },
        "column" => OptSpec {
            short_val: "csoNOERHlWTnip",
            long_val: &[
                "columns",
                "separator",
                "output-separator",
                "table-columns",
                "table-order",
                "table-right",
                "table-hide",
                "table-name",
                "table-wrap",
                "table-truncate",
                "table-noextreme",
                "tree",
                "tree-id",
                "tree-parent",
                "output-width",
                "table-columns-limit",
            ],
        },
        "cmp" => OptSpec {
            short_val: "in",
            long_val: &["ignore-initial", "bytes"],
        },
        "diff" => OptSpec {
            short_val: "CUIxXFLD",
            long_val: &[
                "ignore-matching-lines",
                "exclude",
                "exclude-from",
                "show-function-line",
                "label",
                "ifdef",
                "horizon-lines",
                "starting-file",
                "from-file",
                "to-file",
                "line-format",
                "old-line-format",
                "new-line-format",
                "unchanged-line-format",
                "old-group-format",
                "new-group-format",
                "changed-group-format",
                "unchanged-group-format",
                "tabsize",
                "width",
                "palette",
            ],
        },
        "stat" => OptSpec {
            short_val: "c",
            long_val: &["format", "printf"],
        },
        "du" => OptSpec {
            short_val: "dBtX",
            long_val: &[
                "max-depth",
                "block-size",
                "threshold",
                "exclude",
                "exclude-from",
                "files0-from",
                "time-style",
            ],
        },
        "df" => OptSpec {
            short_val: "Btx",
            long_val: &["block-size", "type", "exclude-type"],
        },
        "tree" => OptSpec {
            short_val: "LPIoHT",
            long_val: &[
                "filelimit",
                "charset",
                "timefmt",
                "sort",
                "fromfile",
                "gitfile",
                "infofile",
            ],
        },
        "file" => OptSpec {
            short_val: "mfFeP",
            long_val: &[
                "magic-file",
                "files-from",
                "separator",
                "exclude",
                "exclude-quiet",
                "parameter",
            ],
        },
        "realpath" => OptSpec {
            short_val: "",
            long_val: &["relative-to", "relative-base"],
        },
        "date" => OptSpec {
            short_val: "dfrs",
            long_val: &["date", "file", "reference", "set", "rfc-3339", "resolution"],
        },
        "od" => OptSpec {
            short_val: "AjNt",
            long_val: &[
                "address-radix",
                "skip-bytes",
                "read-bytes",
                "format",
                "endian",
            ],
        },
        "hexdump" => OptSpec {
            short_val: "efns",
            long_val: &["format", "format-file", "length", "skip"],
        },
        "xxd" => OptSpec {
            short_val: "cglosn",
            long_val: &["cols", "groupsize", "len", "offset", "seek", "name"],
        },
        "base64" => OptSpec {
            short_val: "wio",
            long_val: &["wrap", "input", "output"],
        },
        "sort" => OptSpec {
            short_val: "ktSToy",
            long_val: &[
                "key",
                "field-separator",
                "buffer-size",
                "temporary-directory",
                "output",
                "compress-program",
                "files0-from",
                "parallel",
                "batch-size",
                "sort",
                "random-source",
            ],
        },
        "uniq" => OptSpec {
            short_val: "fsw",
            long_val: &["skip-fields", "skip-chars", "check-chars"],
        },
        "wc" => OptSpec {
            short_val: "",
            long_val: &["files0-from", "total"],
        },
        "ls" => OptSpec {
            short_val: "IwT",
            long_val: &[
                "ignore",
                "hide",
                "width",
                "tabsize",
                "block-size",
                "format",
                "sort",
                "time",
                "time-style",
                "quoting-style",
                "indicator-style",
            ],
        },
        "cksum" | "b2sum" => OptSpec {
            short_val: "la",
            long_val: &["length", "algorithm"],
        },
        _ => NO_VALUES,
    }
}

/// Whether the operands of `program` are strings, not paths (echo/printf arguments, program
/// names, numbers, expressions).
fn operands_are_text(program: &str) -> bool {
    matches!(
        program,
        "echo"
            | "printf"
            | "true"
            | "false"
            | "which"
            | "type"
            | "whoami"
            | "id"
            | "uname"
            | "seq"
            | "expr"
            | "basename"
            | "dirname"
            | "tr"
            | "pwd"
            | "date"
    )
}

/// Judges a green-list program (not `find`, `fd`, `sed`, `git`, `cd`, which have their own
/// analysers). `None` when `program` is not one of these.
pub(crate) fn judge_simple(program: &str, args: &[Field]) -> Option<Judgement> {
    if !GREEN.contains(&program)
        || matches!(
            program,
            "find"
                | "fd"
                | "sed"
                | "git"
                | "cd"
                | "pushd"
                | "popd"
                | "grep"
                | "egrep"
                | "fgrep"
                | "rg"
                | "jq"
        )
    {
        return None;
    }
    let mut j = Judgement::default();
    let toks = parse_opts(args, &spec_for(program));
    let mut operands = Vec::new();
    for t in &toks {
        match t {
            Tok::Operand(f) => operands.push(f.clone()),
            Tok::DynamicOpt => {}
            Tok::Opt { name, value } => {
                let n = name.as_str();
                match program {
                    "sort" if names(n, "--compress-program") => j.red(
                        "cmd.program-option",
                        "`sort --compress-program` runs a program".to_string(),
                    ),
                    "sort" if n == "-o" || names(n, "--output") => {
                        j.not_green(program, "an output file");
                        if let Some(v) = value {
                            j.path(v.clone(), Access::Write);
                        }
                    }
                    "sort" if n == "-T" || names(n, "--temporary-directory") => {
                        if let Some(v) = value {
                            j.path(v.clone(), Access::Write);
                        }
                    }
                    "tree" if n == "-o" => {
                        j.not_green(program, "an output file");
                        if let Some(v) = value {
                            j.path(v.clone(), Access::Write);
                        }
                    }
                    "file" if n == "-C" || names(n, "--compile") => {
                        j.not_green(program, "-C (writes a magic file)")
                    }
                    "date" if n == "-s" || names(n, "--set") => {
                        j.not_green(program, "--set (changes the clock)")
                    }
                    "base64" if n == "-o" || names(n, "--output") => {
                        j.not_green(program, "an output file");
                        if let Some(v) = value {
                            j.path(v.clone(), Access::Write);
                        }
                    }
                    "xxd" if n == "-r" => {}
                    // `tree -R` re-runs tree with an output file in every directory.
                    "tree" if n == "-R" => {
                        j.not_green(program, "-R (writes a file in every directory)")
                    }
                    // Paths read from a file at run time cannot be resolved now.
                    _ if names(n, "--files0-from")
                        || (program == "file" && (n == "-f" || names(n, "--files-from")))
                        || (program.ends_with("sum") && (n == "-c" || names(n, "--check"))) =>
                    {
                        j.not_green(program, "paths read from a file at run time");
                        if let Some(v) = value {
                            j.path(v.clone(), Access::Read);
                        }
                    }
                    _ => {
                        // Option values that are files.
                        let file_valued = matches!(
                            (program, n),
                            ("diff", "-X")
                                | ("du", "-X")
                                | ("file", "-m")
                                | ("file", "-f")
                                | ("date", "-f")
                                | ("date", "-r")
                                | ("hexdump", "-f")
                                | ("base64", "-i")
                        ) || n.starts_with("--")
                            && [
                                "from-file",
                                "to-file",
                                "exclude-from",
                                "files0-from",
                                "random-source",
                                "magic-file",
                                "files-from",
                                "file",
                                "reference",
                                "format-file",
                                "relative-to",
                                "relative-base",
                                "fromfile",
                                "gitfile",
                                "infofile",
                                "input",
                            ]
                            .iter()
                            .any(|l| names(n, &format!("--{l}")));
                        if let Some(v) = value {
                            if file_valued {
                                j.path(v.clone(), Access::Read);
                            }
                        }
                    }
                }
            }
        }
    }
    if operands_are_text(program) {
        if program == "date" {
            // `date` operands are formats or a time to set (`date MMDDhhmm` sets the clock).
            if operands
                .iter()
                .any(|o| o.known().is_none_or(|t| !t.starts_with('+')))
            {
                j.not_green(program, "an operand that sets the clock");
            }
        }
        return Some(j);
    }
    match program {
        "uniq" if operands.len() >= 2 => {
            j.not_green(program, "an output file operand");
            for (i, o) in operands.into_iter().enumerate() {
                j.path(o, if i == 1 { Access::Write } else { Access::Read });
            }
        }
        "xxd" if operands.len() >= 2 => {
            j.not_green(program, "an output file operand");
            for (i, o) in operands.into_iter().enumerate() {
                j.path(o, if i == 1 { Access::Write } else { Access::Read });
            }
        }
        "base64" if operands.len() >= 2 => {
            j.not_green(program, "more than one operand");
            for o in operands {
                j.path(o, Access::Any);
            }
        }
        _ => {
            if operands.is_empty() && matches!(program, "ls" | "du" | "tree" | "df") {
                j.reads_cwd = true;
            }
            for o in operands {
                j.path(o, Access::Read);
            }
        }
    }
    Some(j)
}

/// `grep`, `egrep`, `fgrep`: the first operand is the pattern unless `-e`/`-f` gave one.
pub(crate) fn judge_grep(args: &[Field]) -> Judgement {
    let spec = OptSpec {
        short_val: "efmABCdD",
        long_val: &[
            "regexp",
            "file",
            "max-count",
            "after-context",
            "before-context",
            "context",
            "include",
            "exclude",
            "exclude-dir",
            "exclude-from",
            "label",
            "directories",
            "devices",
            "binary-files",
            "group-separator",
        ],
    };
    let mut j = Judgement::default();
    let mut have_pattern = false;
    let mut recursive = false;
    let mut follows = false;
    let mut operands = Vec::new();
    for t in parse_opts(args, &spec) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if n == "-e" || names(n, "--regexp") {
                    have_pattern = true;
                } else if n == "-f" || names(n, "--file") || names(n, "--exclude-from") {
                    if n == "-f" || names(n, "--file") {
                        have_pattern = true;
                    }
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                } else if n == "-r" || names(n, "--recursive") {
                    recursive = true;
                } else if n == "-R" || names(n, "--dereference-recursive") {
                    recursive = true;
                    follows = true;
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if !have_pattern {
        it.next();
    }
    j.search_paths(it.collect(), recursive, follows);
    j
}

/// `rg`: `--pre`/`--hostname-bin` run programs (red); `--pre-glob`, `-z` switch on
/// preprocessors (yellow).
pub(crate) fn judge_rg(args: &[Field]) -> Judgement {
    let spec = OptSpec {
        short_val: "efgtTmABCjMdrEV",
        long_val: &[
            "regexp",
            "file",
            "glob",
            "iglob",
            "type",
            "type-not",
            "type-add",
            "type-clear",
            "max-count",
            "after-context",
            "before-context",
            "context",
            "threads",
            "max-columns",
            "max-depth",
            "max-filesize",
            "ignore-file",
            "path-separator",
            "replace",
            "sort",
            "sortr",
            "color",
            "colors",
            "encoding",
            "engine",
            "field-context-separator",
            "field-match-separator",
            "context-separator",
            "pre",
            "pre-glob",
            "hostname-bin",
            "dfa-size-limit",
            "regex-size-limit",
            "hyperlink-format",
            "generate",
        ],
    };
    let mut j = Judgement::default();
    let mut follows = false;
    let mut have_pattern = false;
    let mut operands = Vec::new();
    for t in parse_opts(args, &spec) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if names(n, "--pre") && !names(n, "--pre-glob") || n == "--pre" {
                    j.red(
                        "cmd.program-option",
                        "`rg --pre` runs a program on every file".to_string(),
                    );
                } else if names(n, "--hostname-bin") {
                    j.red(
                        "cmd.program-option",
                        "`rg --hostname-bin` runs a program".to_string(),
                    );
                } else if names(n, "--pre-glob") {
                    j.not_green("rg", "--pre-glob");
                } else if n == "-z" || names(n, "--search-zip") {
                    j.not_green("rg", "--search-zip (runs decompression programs)");
                } else if n == "-e" || names(n, "--regexp") || n == "--files" || n == "--type-list"
                {
                    // `--files` and `--type-list` take no pattern: every operand is a path.
                    have_pattern = true;
                } else if n == "-L" || n == "--follow" {
                    follows = true;
                } else if n == "-f" || names(n, "--file") || names(n, "--ignore-file") {
                    if n == "-f" || names(n, "--file") {
                        have_pattern = true;
                    }
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if !have_pattern {
        it.next();
    }
    j.search_paths(it.collect(), true, follows);
    j
}

/// `jq`: the filter is not a path; `--rawfile`/`--slurpfile`/`-f`/`-L` values are. A filter
/// that reads the environment (`env`, `$ENV`) prints secrets like `printenv`, and one that
/// loads modules (`import`, `include`) reads files found at run time: neither is green.
pub(crate) fn judge_jq(args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut filter_from_file = false;
    let mut filter: Option<Field> = None;
    let mut files = Vec::new();
    let mut rest_are_args = false;
    let mut i = 0;
    while i < args.len() {
        let f = &args[i];
        i += 1;
        let t = f.known();
        match t.as_deref() {
            Some("--arg") | Some("--argjson") => i += 2,
            Some("--slurpfile") | Some("--rawfile") => {
                if let Some(p) = args.get(i + 1) {
                    j.path(p.clone(), Access::Read);
                }
                i += 2;
            }
            Some("--from-file") => {
                if let Some(p) = args.get(i) {
                    j.path(p.clone(), Access::Read);
                }
                filter_from_file = true;
                i += 1;
            }
            Some("--indent") => i += 1,
            Some("--args") | Some("--jsonargs") => rest_are_args = true,
            Some(s) if s.starts_with("--") => {}
            Some(s) if s.starts_with("-L") && s.len() > 2 => {
                j.path(Field::lit(&s[2..]), Access::Read)
            }
            // Short clusters: `-f FILE` and `-L DIR` take the next word, wherever in the cluster.
            Some(s) if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    if c == 'f' || c == 'L' {
                        if let Some(p) = args.get(i) {
                            j.path(p.clone(), Access::Read);
                        }
                        filter_from_file |= c == 'f';
                        i += 1;
                    }
                }
            }
            // The first positional word is the filter (even after `--args`); after `--args`
            // the others are arguments, not files.
            _ if filter.is_none() && !filter_from_file => filter = Some(f.clone()),
            _ if rest_are_args => {}
            _ => files.push(f.clone()),
        }
    }
    if let Some(filter) = filter {
        let text = filter.known().unwrap_or_default();
        let squeezed = text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace("$ ", "$");
        let words: Vec<&str> = squeezed
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .collect();
        if squeezed.contains("$ENV") || words.contains(&"env") {
            j.not_green("jq", "a filter that reads the environment");
        }
        if words.contains(&"import") || words.contains(&"include") || words.contains(&"modulemeta")
        {
            j.not_green("jq", "a filter that loads modules from files");
        }
    }
    for f in files {
        j.path(f, Access::Read);
    }
    j
}

/// `sed`: green only as `sed -n` whose script prints (`p`, addressed by line numbers, ranges or
/// regular expressions). `-i` writes; `e`, `w`, `W`, `r`, `R` and every other command are not
/// read-only.
pub(crate) fn judge_sed(args: &[Field]) -> Judgement {
    let spec = OptSpec {
        short_val: "efl",
        long_val: &["expression", "file", "line-length"],
    };
    let mut j = Judgement::default();
    let mut quiet = false;
    let mut scripts: Vec<Option<String>> = Vec::new();
    let mut operands = Vec::new();
    let mut in_place = false;
    let mut script_file = false;
    for t in parse_opts(args, &spec) {
        match t {
            Tok::Opt { name, value } => {
                let n = name.as_str();
                if n == "-n" || names(n, "--quiet") || names(n, "--silent") {
                    quiet = true;
                } else if n == "-e" || names(n, "--expression") {
                    scripts.push(value.and_then(|v| v.known()));
                } else if n == "-f" || names(n, "--file") {
                    script_file = true;
                    j.not_green("sed", "a script file");
                    if let Some(v) = value {
                        j.path(v, Access::Read);
                    }
                } else if n == "-i" || names(n, "--in-place") {
                    in_place = true;
                } else if matches!(n, "-E" | "-r" | "-s" | "-u" | "-z" | "-l")
                    || names(n, "--regexp-extended")
                    || names(n, "--separate")
                    || names(n, "--unbuffered")
                    || names(n, "--null-data")
                    || names(n, "--posix")
                    || names(n, "--debug")
                    || names(n, "--follow-symlinks")
                    || names(n, "--line-length")
                {
                } else {
                    j.not_green("sed", &format!("option `{n}`"));
                }
            }
            Tok::DynamicOpt => j.not_green("sed", "a dynamic option"),
            Tok::Operand(f) => operands.push(f),
        }
    }
    let mut it = operands.into_iter();
    if scripts.is_empty() && !script_file {
        scripts.push(it.next().and_then(|f| f.known()));
    }
    let files: Vec<Field> = it.collect();
    if in_place {
        j.not_green("sed", "-i (edits files in place)");
    }
    if !quiet {
        j.not_green("sed", "a script that is not `-n` printing");
    }
    for s in &scripts {
        match s {
            Some(s) if sed_prints_only(s) => {}
            Some(_) => j.not_green("sed", "a script that does more than print"),
            None => j.not_green("sed", "a script that cannot be known"),
        }
    }
    for f in files {
        j.path(
            f,
            if in_place {
                Access::Write
            } else {
                Access::Read
            },
        );
    }
    j
}

/// Whether a sed script only prints: commands separated by `;` or newlines, each an optional
/// address (number, `$`, `/re/`, `\cREc`) or range, optional `!`, then `p`.
fn sed_prints_only(script: &str) -> bool {
    let b = script.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && (b[*i] == b' ' || b[*i] == b'\t') {
            *i += 1;
        }
    };
    let address = |i: &mut usize| -> bool {
        if *i >= b.len() {
            return true;
        }
        match b[*i] {
            b'0'..=b'9' => {
                while *i < b.len() && (b[*i].is_ascii_digit() || b[*i] == b'~') {
                    *i += 1;
                }
                true
            }
            b'$' => {
                *i += 1;
                true
            }
            b'/' | b'\\' => {
                let delim = if b[*i] == b'\\' {
                    *i += 1;
                    match b.get(*i) {
                        Some(d) => *d,
                        None => return false,
                    }
                } else {
                    b'/'
                };
                *i += 1;
                while *i < b.len() && b[*i] != delim {
                    if b[*i] == b'\\' {
                        *i += 1;
                    }
                    *i += 1;
                }
                if *i >= b.len() {
                    return false;
                }
                *i += 1;
                while *i < b.len() && (b[*i] == b'I' || b[*i] == b'M') {
                    *i += 1;
                }
                true
            }
            _ => true,
        }
    };
    let mut saw_command = false;
    loop {
        skip_ws(&mut i);
        while i < b.len() && (b[i] == b';' || b[i] == b'\n') {
            i += 1;
            skip_ws(&mut i);
        }
        if i >= b.len() {
            return saw_command;
        }
        if !address(&mut i) {
            return false;
        }
        skip_ws(&mut i);
        if i < b.len() && b[i] == b',' {
            i += 1;
            skip_ws(&mut i);
            if i < b.len() && (b[i] == b'+' || b[i] == b'~') {
                i += 1;
            }
            if !address(&mut i) {
                return false;
            }
            skip_ws(&mut i);
        }
        if i < b.len() && b[i] == b'!' {
            i += 1;
            skip_ws(&mut i);
        }
        if i < b.len() && b[i] == b'p' {
            i += 1;
            saw_command = true;
            skip_ws(&mut i);
            if i < b.len() && b[i] != b';' && b[i] != b'\n' {
                return false;
            }
        } else {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_print_scripts() {
        for s in [
            "1,5p", "p", "/foo/p", "$p", "10,$p", "1p;3p", "/a/,/b/p", "2!p", "\\,x,p",
        ] {
            assert!(sed_prints_only(s), "{s}");
        }
        for s in [
            "1e id",
            "w out",
            "1,5w /tmp/x",
            "s/a/b/",
            "p;e id",
            "",
            "1r /etc/passwd",
            "1,5pw x",
        ] {
            assert!(!sed_prints_only(s), "{s}");
        }
    }

    #[test]
    fn long_option_abbreviations() {
        assert!(names("--compress-prog", "--compress-program"));
        assert!(names("--output", "--output"));
        assert!(!names("--outputx", "--output"));
        assert!(!names("-o", "--output"));
    }
}
