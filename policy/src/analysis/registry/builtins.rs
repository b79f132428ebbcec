//! bash builtins (and the process-signalling programs) the analyser walks itself, by name:
//! they change the walk's state (`read`, `declare`, `unset` assign or remove variables and
//! functions), run code they are given (`eval`, `source`, `alias`, `trap`, `mapfile -C`), or
//! signal processes (`kill -1`, `killall5`). None is on the green list; their judges are in
//! `commands/builtins.rs`, `commands/code.rs`, `housekeeping.rs` and the dispatch of
//! `commands.rs`. bash(1) "SHELL BUILTIN COMMANDS" is the source of the option tables.

use super::options::Opt;
use super::{ex, Judge, Operands, Program, Walk};
use crate::rules;
use crate::verdict::Verdict::{Blocked, Green, Red, Yellow};

/// A builtin walked by name, with the options of its table that take a value.
const fn builtin(
    names: &'static [&'static str],
    options: &'static [Opt],
    rules: &'static [crate::rules::Rule],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "builtins",
        names,
        green: false,
        options,
        operands: Operands::Text,
        judge: Judge::Walker(Walk::Own),
        effects: &[],
        rules,
        examples,
    }
}

/// What running given code can emit in the examples (a wrapped `rm -rf`).
const RUNS_CODE: &[crate::rules::Rule] = &[
    rules::CMD_UNLISTED,
    rules::RM_DELETE,
    rules::RM_RECURSIVE_FORCE,
    rules::VAULT_CATASTROPHIC,
    rules::PATH_OUTSIDE_WORKTREE,
    rules::WRAPPER_MAPFILE,
];

pub(super) const PROGRAMS: &[Program] = &[
    builtin(
        &["eval"],
        &[],
        &[rules::SHELL_EVAL, rules::SHELL_DYNAMIC_CODE],
        &[ex("eval ls", Green), ex("eval \"$X\"", Red)],
    ),
    builtin(
        &["source", "."],
        &[],
        &[rules::SHELL_SOURCE],
        &[ex("source defs.sh", Yellow), ex(". defs.sh", Yellow)],
    ),
    // `read -a NAME`, `-d DELIM`, `-i TEXT`, `-n N`, `-N N`, `-p PROMPT`, `-t SECS`, `-u FD`.
    builtin(
        &["read"],
        &[
            Opt::val('a', ""),
            Opt::val('d', ""),
            Opt::val('i', ""),
            Opt::val('n', ""),
            Opt::val('N', ""),
            Opt::val('p', ""),
            Opt::val('t', ""),
            Opt::val('u', ""),
        ],
        &[rules::CMD_UNLISTED],
        &[
            ex("read -r line", Yellow),
            ex("read -a arr -p prompt", Yellow),
        ],
    ),
    // `-C CALLBACK` runs a command every `-c QUANTUM` lines.
    builtin(
        &["mapfile", "readarray"],
        &[
            Opt::val('d', ""),
            Opt::val('n', ""),
            Opt::val('O', ""),
            Opt::val('s', ""),
            Opt::val('u', ""),
            Opt::val('C', ""),
            Opt::val('c', ""),
        ],
        RUNS_CODE,
        &[
            ex("mapfile -t lines", Yellow),
            ex("readarray -C 'rm -rf /' lines", Blocked),
        ],
    ),
    builtin(
        &["getopts", "let"],
        &[],
        &[rules::CMD_UNLISTED],
        &[ex("getopts ab opt", Yellow), ex("let x=1+2", Yellow)],
    ),
    builtin(
        &["export", "declare", "typeset", "local", "readonly"],
        &[],
        &[
            rules::CMD_UNLISTED,
            rules::ENV_EXEC_VARIABLE,
            rules::PATH_OUTSIDE_WORKTREE,
        ],
        &[
            ex("export X=1", Yellow),
            ex("declare -x X=1", Yellow),
            ex("export LD_PRELOAD=/tmp/x.so", Red),
        ],
    ),
    builtin(
        &["unset"],
        &[],
        &[],
        &[ex("unset X", Green), ex("unset -f f", Green)],
    ),
    builtin(
        &["alias"],
        &[],
        RUNS_CODE,
        &[
            ex("alias ll='ls -l'", Yellow),
            ex("alias x='rm -rf build'", Red),
        ],
    ),
    builtin(
        &["trap"],
        &[],
        RUNS_CODE,
        &[
            ex("trap 'echo hi' INT", Green),
            ex("trap 'rm -f t' EXIT", Yellow),
        ],
    ),
    builtin(
        &["kill", "pkill", "killall", "killall5", "fuser"],
        &[],
        &[rules::CMD_UNLISTED, rules::PROC_KILL_ALL],
        &[
            ex("kill 1234", Yellow),
            ex("kill -1", Red),
            ex("kill -9 1", Red),
            ex("kill -- -1234", Red),
            ex("pkill node", Yellow),
            ex("pkill -9 .", Red),
            ex("pkill -u me", Red),
            ex("killall node", Yellow),
            ex("killall5 -9", Red),
            ex("fuser -k 3000/tcp", Yellow),
            ex("fuser -k .", Red),
        ],
    ),
    builtin(
        &["set"],
        &[],
        &[rules::CMD_UNLISTED],
        &[
            ex("set -euo pipefail", Green),
            ex("set -- a b", Green),
            ex("set -a -- x", Yellow),
            ex("set", Yellow),
        ],
    ),
    builtin(
        &["printenv"],
        &[],
        &[rules::CMD_UNLISTED],
        &[ex("printenv HOME", Yellow)],
    ),
];
