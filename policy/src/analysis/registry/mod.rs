//! The program registry: every program the analyser knows by name, each in one entry of
//! its family's file, as data (names, option table, what its operands are, the rules it can
//! emit, examples) plus a judge function where data is not enough (DESIGN.md §2a: the green
//! list is closed and compiled in; nothing configurable extends it).
//!
//! The registry is checked when it loads ([`check`]): a name registered twice, an option
//! spelled twice in one table, an example that does not run the entry's program, an entry
//! without examples, or a table-judged entry that is not green make it refuse to load, and
//! then no program is known (every command is at best yellow `cmd.unlisted`). The examples'
//! colours are checked by this module's tests against the real classifier.
//!
//! Adding a program is one entry in one family file (`docs/adding-a-program.md`).

pub(crate) mod options;

mod builtins;
mod changes;
mod digest;
mod files;
mod info;
mod interpreters;
mod network;
mod search;
mod shells;
mod text;
mod tools;
mod walked;
mod wrappers;

use super::paths::Access;
use super::words::Field;
use crate::rules::{self, Rule};
use crate::verdict::{Finding, Verdict};
use options::{parse_opts, Opt, Role, Tok};
pub(crate) use shells::SHELLS;
use std::collections::HashMap;
use std::sync::OnceLock;

/// One program, or a family of spellings of one program (`grep`, `egrep`, `fgrep`).
#[derive(Debug)]
pub(crate) struct Program {
    /// The family file it is registered in (`text`, `search`…), for messages.
    pub family: &'static str,
    /// The bare names it is invoked by; each name is registered once in the whole registry.
    pub names: &'static [&'static str],
    /// On the green list (DESIGN.md §2a): read-only with the options its judge accepts.
    pub green: bool,
    /// Its options (getopt_long syntax) and what each does ([`Role`]).
    pub options: &'static [Opt],
    /// What its operands are.
    pub operands: Operands,
    /// How an invocation is judged.
    pub judge: Judge,
    /// What its options or subcommands make it do whatever its judge says (`-o FILE`
    /// written, `config set`, `systemctl enable`), applied by `analysis/effects.rs` to every
    /// invocation before the judge.
    pub effects: &'static [Effect],
    /// The rules an invocation can emit by this entry (paths' rules, which every operand
    /// path can raise, aside). Checked against what the examples emit by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub rules: &'static [Rule],
    /// Command lines and the colour each classifies as in an empty worktree.
    pub examples: &'static [Example],
}

/// What a program's operands are, for the table judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operands {
    /// Strings, not paths (`echo` words, program names, numbers, expressions).
    Text,
    /// Formats (`+%s`) or a time to set the clock to (`date MMDDhhmm`): not read-only unless
    /// every operand is a format.
    FormatOrClock,
    /// Files read.
    Read,
    /// Files read; none means the current directory (`ls`, `du`).
    ReadOrCwd,
    /// `INPUT [OUTPUT]`: a second operand is a file written (`uniq in out`, `xxd in out`).
    InputOutput,
    /// One file read; more than one operand is not read-only (`base64`).
    OneInput,
}

/// How an invocation of a program is judged.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Judge {
    /// By the data alone: [`Program::options`]' roles and [`Program::operands`].
    Table,
    /// By a function beside the entry (its own option table and operand rules).
    Fn(fn(entry: &Program, program: &str, args: &[Field]) -> Judgement),
    /// By the analyser's own code for this program: it changes the walk's state (`cd`) or
    /// analyses commands it runs (`find -exec`, `git`'s aliases and hooks, a shell's `-c`).
    Walker(Walk),
}

/// Which of the analyser's own judges walks a program (the analyser asks [`walk`] where
/// it once asked a list of names; the order of its questions is the precedence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// A judge the analyser selects by the program's name (`cd`, `find`, `git`…).
    Own,
    /// A shell: its `-c` string, script or stdin is a command line.
    Shell,
    /// A network client: red, its hosts reported.
    Network,
    /// A runner that fetches code from the network and runs it (`npx`).
    FetchRunner,
    /// An interpreter whose inline code follows one of these options (`python -c`).
    Interpreter(&'static [&'static str]),
    /// A deletion (`rm`, `shred`).
    Remove,
    /// A change of file metadata (`chmod`, `chown`).
    Metadata,
    /// A program that writes, creates, moves or links files (`cp`, `dd`, `rsync`).
    Writer,
    /// An awk, whose program can run commands and write files.
    Awk,
    /// An archiver (`tar`, `unzip`, `7z`).
    Archiver,
    /// A package manager or build tool; `run`/`exec` subcommands wrap a command.
    PackageTool,
    /// A scheduler of code that runs later, outside the sandbox (`crontab`, `at`).
    Scheduler,
    /// A wrapper that runs another command (`timeout`, `sudo`, `xargs`): the worse of yellow
    /// and the command it runs (DESIGN.md §2a "Wrappers").
    Wrapper(Wraps),
    /// A server or listener: red `net.server`, its words checked as paths.
    Server,
    /// Not on the green list, judged like a program nobody registered (`cmd.unlisted`, its
    /// words checked as paths); the entry holds its effects (`cc -o`, `systemctl enable`).
    Unlisted,
}

/// How a wrapper's arguments are read to find the command it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wraps {
    /// Its options by the entry's table, then the command (`timeout` a duration first,
    /// `chroot` a directory, `sudo` `NAME=VALUE` words).
    Options,
    /// `env`: options, `NAME=VALUE` words, `-S STRING`, then the command.
    Env,
    /// `parallel`: the command with `:::` argument lists, run through a shell.
    Parallel,
    /// `watch`: the words joined are a `sh -c` line (unless `-x`).
    Watch,
    /// Options not modelled one by one: every suffix of the arguments is tried as the
    /// command, and `-c STRING` is a shell string.
    Opaque,
    /// A multi-call binary: its first argument names the applet it runs.
    Multicall,
}

/// An effect of a program's options or subcommands (DESIGN.md §2: a write is checked as a
/// path written, under a system path blocked; configuration and service-manager writes run
/// code later, outside the sandbox: red).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// The values of these options (written as given: `-o`, `--output`) are files or
    /// directories written (`unzip -d DIR`, `cc -o FILE`, `pip install --target DIR`).
    WritesTo(&'static [&'static str], Takes),
    /// tar: an extraction writes under its `-C DIR`/`--directory=DIR` directories.
    ExtractsInto,
    /// A `config set|unset|delete|edit…` subcommand (npm, pnpm: `set` too) writes the tool's
    /// configuration: `.npmrc` and the like hold credentials, and later runs obey it
    /// (`config.tool-write`, red).
    ConfigWrites,
    /// A verb other than the read-only ones changes what the service manager runs
    /// (`systemctl enable|link|edit|start…`, `persist.service`, red).
    ServiceManager,
    /// `enable-linger` keeps the user's services running after logout (`persist.service`).
    Linger,
    /// A recursion that follows symbolic links reads wherever they point: with one of these
    /// short `letters` in a cluster or one of the `longs` (exact), and the letter `needs` too
    /// when set (`ls -R`), the start paths are scanned for links out of the worktree
    /// (`path.outside-worktree`; `ls -RL`, `du -L`, `tree -l`, `tar -h`, `cp -L`).
    FollowsLinks {
        needs: Option<char>,
        letters: &'static str,
        longs: &'static [&'static str],
    },
    /// tyba's own control subcommands: removing the pre-push hook or the agent's hook entry
    /// (`git-guard uninstall`, `hook uninstall`) switches a guard off (blocked); approving
    /// asks, changing autonomy, writing hook entries or removing worktrees is the agent
    /// deciding what its supervisor lets it do (`supervisor.control`, red).
    SupervisorControl,
}

/// How an option of [`Effect::WritesTo`] takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Takes {
    /// `-o FILE`, `-oFILE`, `--output FILE`, `--output=FILE`.
    Separate,
    /// Only attached (`7z -oDIR`).
    Attached,
}

/// One example of an entry: a command line and the colour it classifies as.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Example {
    pub line: &'static str,
    /// Checked against the classifier by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub verdict: Verdict,
}

/// An example (`ex("head -n 5 f", Verdict::Green)`).
pub(crate) const fn ex(line: &'static str, verdict: Verdict) -> Example {
    Example { line, verdict }
}

/// What a judge says about one invocation.
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
    /// Code the command runs that cannot be known (`what`, `reason`): red and opaque
    /// (`shell.dynamic-code`).
    pub opaque: Vec<(&'static str, &'static str)>,
    /// The program saves the files it writes (`Access::Write` paths) through a temporary copy
    /// beside each, renamed over it (`sed -i` with a script that runs nothing): they are the
    /// line's `saved` (`crate::Classification::saved`).
    pub saves: bool,
}

impl Judgement {
    pub(crate) fn not_green(&mut self, program: &str, what: &str) {
        self.findings.push(Finding::new(
            Verdict::Yellow,
            rules::CMD_NOT_READ_ONLY.id,
            format!("`{program}` with {what} is not read-only"),
        ));
    }
    pub(crate) fn red(&mut self, rule: &str, reason: String) {
        self.findings.push(Finding::new(Verdict::Red, rule, reason));
    }
    pub(crate) fn path(&mut self, f: Field, a: Access) {
        self.paths.push((f, a));
    }

    /// The paths a search reads: its operands, or the current directory when it recurses
    /// without any; with `follows`, the start points of a recursion that follows symlinks.
    pub(crate) fn search_paths(
        &mut self,
        rest: Vec<Field>,
        recurses_by_default: bool,
        follows: bool,
    ) {
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

/// Every family's entries.
fn families() -> [&'static [Program]; 13] {
    [
        changes::PROGRAMS,
        shells::PROGRAMS,
        interpreters::PROGRAMS,
        network::PROGRAMS,
        info::PROGRAMS,
        text::PROGRAMS,
        files::PROGRAMS,
        digest::PROGRAMS,
        search::PROGRAMS,
        walked::PROGRAMS,
        wrappers::PROGRAMS,
        tools::PROGRAMS,
        builtins::PROGRAMS,
    ]
}

/// Why the registry refused to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegistryError {
    /// A name is registered by two entries.
    #[error("`{name}` is registered twice (families `{first}` and `{second}`)")]
    DuplicateName {
        name: &'static str,
        first: &'static str,
        second: &'static str,
    },
    /// One option table spells an option twice.
    #[error("`{program}`'s option table has `{option}` twice")]
    DuplicateOption {
        program: &'static str,
        option: String,
    },
    /// An example whose command word is not one of the entry's names.
    #[error("`{program}`'s example `{line}` does not run it")]
    ExampleNamesOther {
        program: &'static str,
        line: &'static str,
    },
    /// An entry without examples.
    #[error("`{program}` has no examples")]
    NoExamples { program: &'static str },
    /// An entry judged by its data (or a function) that is not on the green list: such
    /// judges only say what keeps a program read-only.
    #[error("`{program}` is judged as a green program but is not green")]
    JudgedButNotGreen { program: &'static str },
}

/// The index of a checked registry: name → entry.
pub(crate) type Index =
    HashMap<&'static str, &'static Program, std::hash::BuildHasherDefault<NameHasher>>;

/// FNV-1a over a program name's bytes: the index is looked up several times per command
/// with names of a few bytes, where the default hasher's setup costs more than the search.
/// Only the registry's own names are ever inserted, so a name an agent writes cannot make
/// the table slow (it is hashed and compared, never stored).
#[derive(Debug)]
pub(crate) struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Checks `families` and indexes them by name (see the module doc for what is refused).
pub(crate) fn check(families: &[&'static [Program]]) -> Result<Index, RegistryError> {
    let mut index: Index = HashMap::default();
    for family in families {
        for p in family.iter() {
            let program = p.names.first().copied().unwrap_or("");
            for name in p.names {
                if let Some(first) = index.insert(name, p) {
                    return Err(RegistryError::DuplicateName {
                        name,
                        first: first.family,
                        second: p.family,
                    });
                }
            }
            for (i, o) in p.options.iter().enumerate() {
                let again = p.options[..i].iter().find(|e| {
                    (o.short != '\0' && e.short == o.short)
                        || (!o.long.is_empty() && e.long == o.long)
                });
                if again.is_some() {
                    let option = if o.short != '\0' {
                        format!("-{}", o.short)
                    } else {
                        format!("--{}", o.long)
                    };
                    return Err(RegistryError::DuplicateOption { program, option });
                }
            }
            if p.examples.is_empty() {
                return Err(RegistryError::NoExamples { program });
            }
            for e in p.examples {
                let word = e.line.split_whitespace().next().unwrap_or("");
                if !p.names.contains(&word) {
                    return Err(RegistryError::ExampleNamesOther {
                        program,
                        line: e.line,
                    });
                }
            }
            if !p.green && !matches!(p.judge, Judge::Walker(_)) {
                return Err(RegistryError::JudgedButNotGreen { program });
            }
        }
    }
    Ok(index)
}

/// The loaded registry (checked once, on first use).
fn index() -> Option<&'static Index> {
    static INDEX: OnceLock<Result<Index, RegistryError>> = OnceLock::new();
    INDEX.get_or_init(|| check(&families())).as_ref().ok()
}

/// The entry registering `name`, if any (none when the registry failed its check: every
/// program is then unlisted).
pub(crate) fn lookup(name: &str) -> Option<&'static Program> {
    index()?.get(name).copied()
}

/// How the analyser walks `program`, when it is registered as walked.
pub(crate) fn walk(program: &str) -> Option<Walk> {
    match lookup(program)?.judge {
        Judge::Walker(w) => Some(w),
        Judge::Table | Judge::Fn(_) => None,
    }
}

/// The inline-code options of `program` when it is an interpreter: its own entry's, or
/// (for a version suffix, `python3.12`) its base name's.
pub(crate) fn interpreter_flags(program: &str) -> Option<&'static [&'static str]> {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match walk(program).or_else(|| walk(base))? {
        Walk::Interpreter(flags) => Some(flags),
        _ => None,
    }
}

/// Whether `program` is on the green list (with some flags at least).
pub(crate) fn is_green_program(program: &str) -> bool {
    lookup(program).is_some_and(|p| p.green)
}

/// The entry of `program` when its registry entry judges it ([`Judge::Table`] or
/// [`Judge::Fn`]); `None` for programs the analyser walks itself and for unknown names.
pub(crate) fn judged(program: &str) -> Option<&'static Program> {
    lookup(program).filter(|p| !matches!(p.judge, Judge::Walker(_)))
}

impl Program {
    /// Judges `args` of an invocation by the name `program` (one of [`Program::names`]).
    pub(crate) fn judge(&self, program: &str, args: &[Field]) -> Judgement {
        match self.judge {
            Judge::Table => judge_table(self, program, args),
            Judge::Fn(f) => f(self, program, args),
            Judge::Walker(_) => Judgement::default(),
        }
    }
}

/// Options every table-judged program is read by, whatever its own table says: a value
/// given to one of these (`--files0-from=F`, `--exclude-from=F`…) is a file read (stricter
/// than ignoring an option a program may not have).
const COMMON: &[Opt] = &[
    Opt::val('\0', "files0-from").role(Role::PathsFromFile),
    Opt::val('\0', "from-file").role(Role::ReadsFile),
    Opt::val('\0', "to-file").role(Role::ReadsFile),
    Opt::val('\0', "exclude-from").role(Role::ReadsFile),
    Opt::val('\0', "random-source").role(Role::ReadsFile),
    Opt::val('\0', "magic-file").role(Role::ReadsFile),
    Opt::val('\0', "files-from").role(Role::ReadsFile),
    Opt::val('\0', "file").role(Role::ReadsFile),
    Opt::val('\0', "reference").role(Role::ReadsFile),
    Opt::val('\0', "format-file").role(Role::ReadsFile),
    Opt::val('\0', "relative-to").role(Role::ReadsFile),
    Opt::val('\0', "relative-base").role(Role::ReadsFile),
    Opt::val('\0', "fromfile").role(Role::ReadsFile),
    Opt::val('\0', "gitfile").role(Role::ReadsFile),
    Opt::val('\0', "infofile").role(Role::ReadsFile),
    Opt::val('\0', "input").role(Role::ReadsFile),
];

/// The table judge: each option by the first entry of the program's table (then
/// [`COMMON`]) that names it, taken in three passes (what the option does, then paths read
/// from a file at run time, then a file read), then the operands by [`Operands`].
fn judge_table(p: &Program, program: &str, args: &[Field]) -> Judgement {
    let mut j = Judgement::default();
    let mut operands = Vec::new();
    for t in parse_opts(args, p.options) {
        match t {
            Tok::Operand(f) => operands.push(f),
            Tok::DynamicOpt => {}
            Tok::Opt { name, value } => option(p, program, &name, value, &mut j),
        }
    }
    match p.operands {
        Operands::Text => {}
        Operands::FormatOrClock => {
            if operands
                .iter()
                .any(|o| o.known().is_none_or(|t| !t.starts_with('+')))
            {
                j.not_green(program, "an operand that sets the clock");
            }
        }
        Operands::InputOutput if operands.len() >= 2 => {
            j.not_green(program, "an output file operand");
            for (i, o) in operands.into_iter().enumerate() {
                j.path(o, if i == 1 { Access::Write } else { Access::Read });
            }
        }
        Operands::OneInput if operands.len() >= 2 => {
            j.not_green(program, "more than one operand");
            for o in operands {
                j.path(o, Access::Any);
            }
        }
        Operands::Read | Operands::ReadOrCwd | Operands::InputOutput | Operands::OneInput => {
            if operands.is_empty() && p.operands == Operands::ReadOrCwd {
                j.reads_cwd = true;
            }
            for o in operands {
                j.path(o, Access::Read);
            }
        }
    }
    j
}

/// One option of a table-judged invocation.
fn option(p: &Program, program: &str, name: &str, value: Option<Field>, j: &mut Judgement) {
    let find = |pass: fn(Role) -> bool| {
        p.options
            .iter()
            .chain(COMMON)
            .find(|o| pass(o.role) && o.is(name))
    };
    let acts = |r: Role| {
        matches!(
            r,
            Role::WritesFile | Role::ScratchDir | Role::NotReadOnly(_) | Role::Program(_)
        )
    };
    if let Some(o) = find(acts) {
        match o.role {
            Role::Program(reason) => j.red(rules::CMD_PROGRAM_OPTION.id, reason.to_string()),
            Role::WritesFile => {
                j.not_green(program, "an output file");
                if let Some(v) = value {
                    j.path(v, Access::Write);
                }
            }
            Role::ScratchDir => {
                if let Some(v) = value {
                    j.path(v, Access::Write);
                }
            }
            Role::NotReadOnly(what) => j.not_green(program, what),
            Role::Plain | Role::ReadsFile | Role::PathsFromFile => {}
        }
        return;
    }
    if find(|r| r == Role::PathsFromFile).is_some() {
        j.not_green(program, "paths read from a file at run time");
        if let Some(v) = value {
            j.path(v, Access::Read);
        }
        return;
    }
    if let Some(v) = value {
        if find(|r| r == Role::ReadsFile).is_some() {
            j.path(v, Access::Read);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
