//! Signals sent to more than the processes a command names (DESIGN.md §2 red: what ends the
//! session or the machine's other programs is never "always"; `kill -1` is the seed). In
//! tyba's sandbox PID 1 is tyba's own stage 2: signalling it ends the session; outside it PID
//! 1 is the machine's init. Red (`proc.kill-all`) is any of:
//! - `kill` (bash's builtin, procps' and util-linux's program) of PID 1, of `-1` (every
//!   process the caller may signal, kill(2)), of `0` or a negative number (a whole process
//!   group);
//! - `killall5` (every process but the caller's session, whatever its arguments);
//! - `pkill` whose selection reaches PID 1 or tyba: a pattern (POSIX extended regular
//!   expression, pgrep(1)) that matches the name (`-f`: the command line) of init, systemd or
//!   tyba, as `.` or `""` match everything, with `-x`, `-i` and `-v` (inverse) applied; no
//!   pattern at all, so that only `-u`, `-U`, `-g`, `-G`, `-s`, `-t`, `-P`, `--ns`… select
//!   (every process of a user, group, session or terminal); or `-P 1`, `-g 0|1`, `-s 0|1`
//!   (PID 1's children, the caller's or PID 1's group or session);
//! - `killall` (psmisc) of tyba, init or systemd by name (`-I` ignoring case), of a regular
//!   expression (`-r`) that matches one, or with no names and `-u`/`-o`/`-y`/`-Z` selecting;
//! - `fuser -k` (psmisc) of every process using a file system (`-m`/`-M`) or a directory
//!   (the processes whose working or root directory it is: in a session the agent and tyba's
//!   sandbox work in the worktree). `fuser -k 3000/tcp` or of a file stays yellow.
//!
//! A PID or pattern that cannot be known before the command runs (`kill $pid`) stays at the
//! unlisted command's yellow: it names one process the person can see when asked.

use super::*;
use crate::rules;

/// Names PID 1 has inside tyba's sandbox (its stage 2) and outside it, as process names
/// (`comm`) and as the command lines `pkill -f` matches.
const ANCHOR_NAMES: &[&str] = &["tyba", "init", "systemd"];
const ANCHOR_LINES: &[&str] = &[
    "tyba",
    "tyba run",
    "/usr/local/bin/tyba run",
    "/sbin/init",
    "/usr/lib/systemd/systemd --system",
];

impl Analyzer<'_> {
    /// `kill`, `pkill`, `killall`, `killall5` (see the module doc).
    pub(crate) fn signals(&mut self, st: &State, p: &str, args: &[Field]) {
        self.unlisted(p);
        let reason = match p {
            "fuser" => fuser_reaches_all(st, args),
            "killall5" => {
                Some("`killall5` signals every process outside the caller's session".to_string())
            }
            "kill" => kill_reaches_all(args),
            "pkill" => pkill_reaches_all(args),
            "killall" => killall_reaches_all(args),
            _ => None,
        };
        if let Some(r) = reason {
            self.add(Verdict::Red, rules::PROC_KILL_ALL.id, r);
        }
    }
}

/// A PID operand as kill(1) and bash read it (decimal, optional sign, leading blanks).
fn pid(word: &str) -> Option<i64> {
    word.trim_start().parse::<i64>().ok()
}

/// Why a `kill` reaches every process, a process group or PID 1.
fn kill_reaches_all(args: &[Field]) -> Option<String> {
    let words: Vec<Option<String>> = args.iter().map(Field::known).collect();
    // `kill -1` alone: SIGHUP with no PID to bash, but procps reads `-1` as the PID when no
    // other operand follows; either way the word `-1` is taken as "every process".
    if words.iter().any(|w| w.as_deref() == Some("-1")) {
        return Some("`kill -1` signals every process of the user".to_string());
    }
    let mut i = 0;
    // Options: the signal (`-9`, `-KILL`, `-s SIG`, `-n NUM`, `--signal SIG`, util-linux
    // `-q VALUE`, `--timeout MS SIG`), listing (`-l`, `-L`), util-linux flags; `--` ends them.
    let mut signal_seen = false;
    while i < words.len() {
        let Some(w) = words[i].as_deref() else {
            // `-$SIG`: a signal that cannot be known, unless no operand follows it (procps
            // then reads it as the PID: it may be `-1`).
            if !signal_seen && i + 1 < words.len() && args[i].known_prefix().starts_with('-') {
                signal_seen = true;
                i += 1;
                continue;
            }
            break;
        };
        match w {
            "--" => {
                i += 1;
                break;
            }
            "-s" | "-n" | "-q" | "--signal" | "--queue" => i += 2,
            "--timeout" => i += 3,
            "-l" | "-L" | "--list" | "--table" => return None,
            _ if w.starts_with('-') && w.len() > 1 && !signal_seen => {
                // The first `-WORD` is the signal (`-9`, `-KILL`, `-SIGTERM`) or a flag.
                signal_seen = true;
                i += 1;
            }
            _ if w.starts_with("--") => i += 1,
            _ => break,
        }
    }
    for (a, w) in args.iter().zip(&words).skip(i) {
        let Some(w) = w else {
            // A PID whose value cannot be known but whose sign can (`-$pgid`, `-$$`): a
            // process group, whatever the number.
            let shown = a.display();
            if a.known_prefix().trim_start().starts_with('-') {
                return Some(format!(
                    "`kill {shown}` signals a whole process group (or every process), which may hold the agent and tyba's sandbox"
                ));
            }
            continue;
        };
        match pid(w) {
            Some(1) => return Some("`kill` of PID 1: tyba's sandbox (or the machine's init); the session ends".to_string()),
            Some(-1) => return Some("`kill -1` signals every process of the user".to_string()),
            Some(n) if n <= 0 => {
                return Some(format!(
                    "`kill {w}` signals a whole process group, which may hold the agent and tyba's sandbox"
                ))
            }
            _ => {}
        }
    }
    None
}

/// Whether `-WORD`'s `WORD` is a signal (`9`, `KILL`, `SIGKILL`, `RTMIN+3`; signal(7)), which
/// pkill and killall take as their first word.
fn is_signal_spec(word: &str) -> bool {
    const NAMES: &[&str] = &[
        "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "IOT", "BUS", "FPE", "KILL", "USR1", "SEGV",
        "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CLD", "CONT", "STOP", "TSTP", "TTIN",
        "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "POLL", "PWR", "SYS",
        "UNUSED", "RTMIN", "RTMAX",
    ];
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let w = word.to_ascii_uppercase();
    let w = w.strip_prefix("SIG").unwrap_or(&w);
    let base = w.split(['+', '-']).next().unwrap_or(w);
    NAMES.contains(&base)
}

/// pkill's options (procps-ng pgrep(1)), read by the option engine
/// ([`crate::analysis::registry::options`]).
const PKILL_OPTIONS: &[Opt] = &[
    Opt::flag('f', "full"),
    Opt::flag('x', "exact"),
    Opt::flag('i', "ignore-case"),
    Opt::flag('v', "inverse"),
    Opt::flag('c', "count"),
    Opt::flag('e', "echo"),
    Opt::flag('n', "newest"),
    Opt::flag('o', "oldest"),
    Opt::flag('A', "ignore-ancestors"),
    Opt::flag('H', "require-handler"),
    Opt::val('F', "pidfile"),
    Opt::val('d', "delimiter"),
    Opt::val('q', "queue"),
    Opt::val('\0', "signal"),
    Opt::val('\0', "nslist"),
    // The selectors: processes chosen by something other than the pattern.
    Opt::val('g', "pgroup"),
    Opt::val('G', "group"),
    Opt::val('O', "older"),
    Opt::val('P', "parent"),
    Opt::val('s', "session"),
    Opt::val('t', "terminal"),
    Opt::val('u', "euid"),
    Opt::val('U', "uid"),
    Opt::val('r', "runstates"),
    Opt::val('\0', "ns"),
    Opt::val('\0', "cgroup"),
    Opt::val('\0', "env"),
];

/// The selectors of [`PKILL_OPTIONS`], by long name.
const PKILL_SELECTORS: &[&str] = &[
    "pgroup",
    "group",
    "older",
    "parent",
    "session",
    "terminal",
    "euid",
    "uid",
    "runstates",
    "ns",
    "cgroup",
    "env",
];

/// An option of a table as given, with its value (`None`: none, or one not known).
type OptionGiven = (&'static Opt, Option<String>);

/// `args` without a first word `-9`, `-KILL`, `-SIGKILL` (the signal pkill and killall take
/// there), split by `table` into (option of the table and its value, operands); an operand
/// that cannot be known is `None`, an option not in the table is left out.
fn options_and_operands(
    args: &[Field],
    table: &'static [Opt],
) -> (Vec<OptionGiven>, Vec<Option<String>>) {
    let signal = args
        .first()
        .and_then(Field::known)
        .and_then(|w| w.strip_prefix('-').map(is_signal_spec))
        .unwrap_or(false);
    let args = if signal { &args[1..] } else { args };
    let (mut opts, mut operands) = (Vec::new(), Vec::new());
    for t in parse_opts(args, table) {
        match t {
            Tok::Opt { name, value } => {
                if let Some(o) = table.iter().find(|o| o.is(&name)) {
                    opts.push((o, value.as_ref().and_then(Field::known)));
                }
            }
            Tok::DynamicOpt => {}
            Tok::Operand(f) => operands.push(f.known()),
        }
    }
    (opts, operands)
}

/// Why a `pkill` reaches PID 1, tyba or every process of a user, group or session.
fn pkill_reaches_all(args: &[Field]) -> Option<String> {
    let (opts, patterns) = options_and_operands(args, PKILL_OPTIONS);
    let has = |long: &str| opts.iter().any(|(o, _)| o.long == long);
    let (full, exact, icase, inverse, pidfile) = (
        has("full"),
        has("exact"),
        has("ignore-case"),
        has("inverse"),
        has("pidfile"),
    );
    let selectors: Vec<(&str, Option<String>)> = opts
        .iter()
        .filter(|(o, _)| PKILL_SELECTORS.contains(&o.long))
        .map(|(o, v)| (o.long, v.clone()))
        .collect();
    for (name, val) in &selectors {
        let list: Vec<i64> = val
            .as_deref()
            .map(|v| v.split(',').filter_map(pid).collect())
            .unwrap_or_default();
        let anchored = match *name {
            "parent" => list.contains(&1),
            "pgroup" | "session" => list.iter().any(|&n| n == 0 || n == 1),
            _ => false,
        };
        if anchored {
            return Some(format!(
                "`pkill --{name}` selects PID 1's children or the group or session holding the agent and tyba's sandbox"
            ));
        }
    }
    if patterns.is_empty() {
        if !selectors.is_empty() && !pidfile {
            return Some(
                "`pkill` without a pattern signals every process its selection (user, group, session, terminal) holds"
                    .to_string(),
            );
        }
        return None;
    }
    // One pattern (pkill refuses more); a pattern that cannot be known stays yellow.
    let pattern = patterns.first().cloned().flatten()?;
    let samples = if full { ANCHOR_LINES } else { ANCHOR_NAMES };
    let reaches = match regex_matches(&pattern, exact, icase, samples) {
        Some(hit) => hit != inverse,
        // A pattern the regex engine cannot read may match anything.
        None => true,
    };
    reaches.then(|| {
        format!(
            "`pkill` pattern `{pattern}` {}matches tyba's sandbox or init (PID 1)",
            if inverse { "(inverted) " } else { "" }
        )
    })
}

/// Whether `pattern` (an extended regular expression) matches one of `samples`; `None` when it
/// cannot be compiled.
fn regex_matches(pattern: &str, exact: bool, icase: bool, samples: &[&str]) -> Option<bool> {
    let body = if exact {
        format!("^(?:{pattern})$")
    } else {
        pattern.to_string()
    };
    let re = regex::RegexBuilder::new(&body)
        .case_insensitive(icase)
        .size_limit(1 << 20)
        .build()
        .ok()?;
    Some(samples.iter().any(|s| re.is_match(s)))
}

/// Why a `fuser -k` signals every process of a file system or a directory.
fn fuser_reaches_all(st: &State, args: &[Field]) -> Option<String> {
    let mut kill = false;
    let mut mount = false;
    let mut operands: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let w = args[i].known();
        i += 1;
        let Some(w) = w else {
            operands.push(None);
            continue;
        };
        match w.as_str() {
            "--kill" => kill = true,
            "--mount" | "--ismountpoint" => mount = true,
            "-n" | "--namespace" => i += 1,
            "--" => {
                operands.extend(args[i..].iter().map(Field::known));
                break;
            }
            _ if w.starts_with("--") => {}
            _ if w.starts_with('-') && w.len() > 1 && !is_signal_spec(&w[1..]) => {
                kill |= w.contains('k');
                mount |= w.contains('m') || w.contains('M') || w.contains('c');
                if w.ends_with('n') {
                    i += 1;
                }
            }
            _ if w.starts_with('-') => {}
            _ => operands.push(Some(w)),
        }
    }
    if !kill {
        return None;
    }
    let dir = operands.iter().any(|o| match o {
        // A name that cannot be known may be a directory.
        None => true,
        Some(o) => {
            o.ends_with('/')
                || st.cwds.iter().any(|c| match c {
                    Some(c) => crate::analysis::paths::resolve(c, o).is_dir(),
                    None => !o.contains("/tcp") && !o.contains("/udp"),
                })
        }
    });
    (mount || dir).then(|| {
        "`fuser -k` of a file system or a directory signals every process working there: the agent and tyba's sandbox".to_string()
    })
}

/// killall's options (psmisc killall(1)), read by the option engine.
const KILLALL_OPTIONS: &[Opt] = &[
    Opt::flag('r', "regexp"),
    Opt::flag('I', "ignore-case"),
    Opt::flag('e', "exact"),
    Opt::flag('g', "process-group"),
    Opt::flag('i', "interactive"),
    Opt::flag('l', "list"),
    Opt::flag('q', "quiet"),
    Opt::flag('v', "verbose"),
    Opt::flag('w', "wait"),
    Opt::val('s', "signal"),
    Opt::val('n', "ns"),
    // The selectors: processes chosen by user, age or security context.
    Opt::val('u', "user"),
    Opt::val('o', "older-than"),
    Opt::val('y', "younger-than"),
    Opt::val('Z', "context"),
];

/// Why a `killall` reaches PID 1, tyba or every process of a user.
fn killall_reaches_all(args: &[Field]) -> Option<String> {
    let (opts, names) = options_and_operands(args, KILLALL_OPTIONS);
    let has = |long: &str| opts.iter().any(|(o, _)| o.long == long);
    let (regex, icase) = (has("regexp"), has("ignore-case"));
    let selects = ["user", "older-than", "younger-than", "context"]
        .iter()
        .any(|l| has(l));
    if names.is_empty() {
        return selects.then(|| {
            "`killall` without names signals every process its selection (user, age, context) holds"
                .to_string()
        });
    }
    for n in names.iter().flatten() {
        let hit = if regex {
            regex_matches(n, false, icase, ANCHOR_NAMES).unwrap_or(true)
        } else {
            ANCHOR_NAMES.iter().any(|a| {
                if icase {
                    a.eq_ignore_ascii_case(n)
                } else {
                    a == n
                }
            })
        };
        if hit {
            return Some(format!(
                "`killall {n}` signals tyba's sandbox or init (PID 1)"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::testing::expect;
    use crate::Verdict::{Red, Yellow};

    #[test]
    fn signals_to_everything_pid_1_or_a_group_are_red() {
        let r = "proc.kill-all";
        expect(&[
            ("kill -9 -1", Red, r),
            ("kill -1", Red, r),
            ("kill -9 1", Red, r),
            ("kill 1", Red, r),
            ("kill -s KILL 1", Red, r),
            ("kill -n 9 01", Red, r),
            ("kill -SIGKILL -- 1", Red, r),
            ("kill -TERM 0", Red, r),
            ("kill -9 -4242", Red, r),
            ("kill -- -4242", Red, r),
            ("kill -- -$$", Red, r),
            ("kill -9 -$pgid", Red, r),
            ("kill -TERM \"-$(cat pgid)\"", Red, r),
            ("kill -$x", Red, r),
            ("kill -s KILL -- -${PGID}", Red, r),
            ("kill 4242 1", Red, r),
            ("/bin/kill -9 1", Red, r),
            ("killall5", Red, r),
            ("killall5 -9", Red, r),
            ("killall5 -15 -o 4242", Red, r),
            ("pkill -9 .", Red, r),
            ("pkill ''", Red, r),
            ("pkill -f '.*'", Red, r),
            ("pkill -f bin/", Red, r),
            ("pkill tyba", Red, r),
            ("pkill -i TYBA", Red, r),
            ("pkill -x 'ty.a'", Red, r),
            ("pkill -v node", Red, r),
            ("pkill --inverse node", Red, r),
            ("pkill -u root", Red, r),
            ("pkill -9 -U 1000", Red, r),
            ("pkill --euid=me", Red, r),
            ("pkill -t pts/1", Red, r),
            ("pkill -P 1 node", Red, r),
            ("pkill -g 0 sleep", Red, r),
            ("pkill -s0 sleep", Red, r),
            ("pkill 'sy[s]temd'", Red, r),
            ("killall tyba", Red, r),
            ("killall -I INIT", Red, r),
            ("killall -r '^t'", Red, r),
            ("killall -u me", Red, r),
            ("killall -9 --user me", Red, r),
            ("fuser -k .", Red, r),
            ("fuser -km /", Red, r),
            ("fuser -k -9 ./", Red, r),
            ("fuser --kill --mount src/main.rs", Red, r),
        ]);
    }

    #[test]
    fn signals_to_named_processes_stay_yellow() {
        expect(&[
            ("kill 4242", Yellow, "cmd.unlisted"),
            ("kill -9 4242", Yellow, ""),
            ("kill -s TERM 4242 4343", Yellow, ""),
            ("kill %1", Yellow, ""),
            ("kill -l", Yellow, ""),
            ("kill -9 $pid", Yellow, ""),
            ("kill -$sig $pid", Yellow, ""),
            ("kill -s TERM $!", Yellow, ""),
            ("kill $(cat server.pid)", Yellow, ""),
            ("pkill node", Yellow, ""),
            ("pkill -f 'cargo watch'", Yellow, ""),
            ("pkill -x tyb", Yellow, ""),
            ("pkill -u me node", Yellow, ""),
            ("pkill -F server.pid", Yellow, ""),
            ("pkill -9 -f vite", Yellow, ""),
            ("pkill \"$name\"", Yellow, ""),
            ("killall node", Yellow, ""),
            ("killall -9 python3", Yellow, ""),
            ("killall -u me node", Yellow, ""),
            ("killall tyba-dev", Yellow, ""),
            ("fuser -k 3000/tcp", Yellow, ""),
            ("fuser -k -n tcp 8080", Yellow, ""),
            ("fuser -v .", Yellow, ""),
        ]);
    }
}
