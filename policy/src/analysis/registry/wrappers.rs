//! Wrappers: programs that run another command (DESIGN.md §2a "Wrappers": the worse of
//! yellow `wrapper.<program>` and the command they run). Each entry's option table says which
//! options take a value, so the walk knows where the wrapped command starts; what a value
//! does (`sudo -D DIR`, `time -o FILE`, `xargs -a FILE`) is read by the judge in
//! `commands/wrappers.rs`, selected by the entry's [`Wraps`].

use super::options::Opt;
use super::{ex, Judge, Operands, Program, Walk, Wraps};
use crate::rules;
use crate::verdict::Verdict::{Green, Red, Yellow};

/// A wrapper read by `wraps`.
const fn wrapper(
    names: &'static [&'static str],
    wraps: Wraps,
    options: &'static [Opt],
    rules: &'static [crate::rules::Rule],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "wrappers",
        names,
        green: false,
        options,
        operands: Operands::Text,
        judge: Judge::Walker(Walk::Wrapper(wraps)),
        effects: &[],
        rules,
        examples,
    }
}

/// `wrapper.<program>` and what a wrapped `rm -rf` emits, for the examples.
const WRAPS_RM: &[crate::rules::Rule] =
    &[rules::WRAPPER, rules::RM_DELETE, rules::RM_RECURSIVE_FORCE];

/// What a wrapper feeding the command words from its input emits: the words cannot be known.
const FEEDS_WORDS: &[crate::rules::Rule] = &[
    rules::WRAPPER,
    rules::WRAPPER_PARALLEL,
    rules::RM_DELETE,
    rules::RM_RECURSIVE_FORCE,
    rules::PATH_UNRESOLVED,
    rules::CMD_DYNAMIC_ARGS,
];

/// An opaque wrapper's suffixes are each tried as the command: words that are no program
/// are unlisted.
const OPAQUE: &[crate::rules::Rule] = &[
    rules::WRAPPER,
    rules::CMD_UNLISTED,
    rules::RM_DELETE,
    rules::RM_RECURSIVE_FORCE,
];

pub(super) const PROGRAMS: &[Program] = &[
    wrapper(
        &["sudo", "doas"],
        Wraps::Options,
        &[
            Opt::val('u', "user"),
            Opt::val('g', "group"),
            Opt::val('C', "close-from"),
            Opt::val('D', "chdir"),
            Opt::val('h', "host"),
            Opt::val('p', "prompt"),
            Opt::val('r', "role"),
            Opt::val('t', "type"),
            Opt::val('U', "other-user"),
            Opt::val('T', "command-timeout"),
            Opt::val('c', "login-class"),
        ],
        &[rules::WRAPPER, rules::WRAPPER_SHELL],
        &[
            ex("sudo -u nobody ls", Yellow),
            ex("sudo -s", Yellow),
            ex("doas ls", Yellow),
        ],
    ),
    wrapper(
        &["nice"],
        Wraps::Options,
        &[Opt::val('n', "adjustment")],
        &[rules::WRAPPER],
        &[
            ex("nice -n 5 ls", Yellow),
            ex("nice --adjustment=5 ls", Yellow),
        ],
    ),
    wrapper(
        &["ionice"],
        Wraps::Options,
        &[
            Opt::val('c', "class"),
            Opt::val('n', "classdata"),
            Opt::val('p', "pid"),
            Opt::val('\0', "pgid"),
            Opt::val('\0', "uid"),
        ],
        &[rules::WRAPPER],
        &[ex("ionice -c 3 ls", Yellow)],
    ),
    wrapper(
        &["timeout"],
        Wraps::Options,
        &[Opt::val('s', "signal"), Opt::val('k', "kill-after")],
        WRAPS_RM,
        &[
            ex("timeout 5 ls", Yellow),
            ex("timeout -s KILL 5 ls", Yellow),
            ex("timeout 5 rm -rf build", Red),
        ],
    ),
    wrapper(
        &["stdbuf"],
        Wraps::Options,
        &[
            Opt::val('i', "input"),
            Opt::val('o', "output"),
            Opt::val('e', "error"),
        ],
        &[rules::WRAPPER],
        &[ex("stdbuf -oL ls", Yellow)],
    ),
    // A line's first `time` is bash's keyword, which times the pipeline (`time ls` is `ls`);
    // this entry reads the program, run by a path (`/usr/bin/time -o F CMD`) or a wrapper.
    wrapper(
        &["time"],
        Wraps::Options,
        &[Opt::val('f', "format"), Opt::val('o', "output")],
        &[rules::WRAPPER],
        &[ex("time ls", Green)],
    ),
    wrapper(
        &["nohup", "setsid", "builtin"],
        Wraps::Options,
        &[],
        WRAPS_RM,
        &[
            ex("nohup ls", Yellow),
            ex("setsid ls", Yellow),
            ex("nohup rm -rf build", Red),
        ],
    ),
    wrapper(
        &["exec"],
        Wraps::Options,
        &[Opt::val('a', "")],
        &[rules::WRAPPER],
        &[ex("exec -a name ls", Yellow)],
    ),
    // `command -v NAME`/`-V` is a lookup, not a wrapper (the walk's own arm).
    wrapper(
        &["command"],
        Wraps::Options,
        &[],
        &[rules::WRAPPER, rules::CMD_UNLISTED],
        &[ex("command ls", Yellow), ex("command -v ls", Green)],
    ),
    wrapper(
        &["env"],
        Wraps::Env,
        &[],
        &[
            rules::WRAPPER_ENV,
            rules::ENV_PREFIX_ASSIGNMENT,
            rules::RM_DELETE,
            rules::RM_RECURSIVE_FORCE,
        ],
        &[ex("env X=1 ls", Yellow), ex("env X=1 rm -rf build", Red)],
    ),
    // `-e[EOF]`, `-i[R]`, `-l[N]` and `--eof`, `--replace`, `--max-lines` take optional
    // values that must be attached: never the next word.
    wrapper(
        &["xargs"],
        Wraps::Options,
        &[
            Opt::val('a', "arg-file"),
            Opt::val('d', "delimiter"),
            Opt::val('E', ""),
            Opt::val('I', ""),
            Opt::val('L', ""),
            Opt::val('n', "max-args"),
            Opt::val('P', "max-procs"),
            Opt::val('s', "max-chars"),
            Opt::val('\0', "process-slot-var"),
        ],
        FEEDS_WORDS,
        &[ex("xargs -n 1 ls", Yellow), ex("xargs rm -rf", Red)],
    ),
    wrapper(
        &["parallel"],
        Wraps::Parallel,
        &[],
        FEEDS_WORDS,
        &[ex("parallel ls ::: a b", Yellow)],
    ),
    wrapper(
        &["watch"],
        Wraps::Watch,
        &[
            Opt::val('n', "interval"),
            Opt::val('q', "equexit"),
            Opt::val('\0', "differences"),
        ],
        &[rules::WRAPPER_WATCH],
        &[ex("watch -n 5 ls", Yellow), ex("watch -x ls", Yellow)],
    ),
    wrapper(
        &["chroot"],
        Wraps::Options,
        &[Opt::val('\0', "userspec"), Opt::val('\0', "groups")],
        &[
            rules::WRAPPER,
            rules::WRAPPER_CHROOT,
            rules::PATH_OUTSIDE_WORKTREE,
        ],
        &[ex("chroot /srv/root ls", Red)],
    ),
    // Wrappers whose options are not modelled one by one: every suffix of the arguments is
    // tried as the command, and `-c STRING` is a shell string.
    wrapper(
        &[
            "taskset",
            "chrt",
            "prlimit",
            "numactl",
            "cgexec",
            "setpriv",
            "runuser",
            "su",
            "sg",
            "newgrp",
            "strace",
            "ltrace",
            "valgrind",
            "firejail",
            "bwrap",
            "unshare",
            "nsenter",
            "script",
            "flock",
            "sem",
            "niceload",
            "xvfb-run",
            "dbus-launch",
            "dbus-run-session",
            "systemd-inhibit",
            "caffeinate",
            "proot",
            "tsp",
            "ifne",
            "entr",
            "pkexec",
            "mise",
            "rtx",
            "direnv",
            "nix-shell",
            "perf",
            "gdb",
            "lldb",
            "catchsegv",
            "unbuffer",
            "chronic",
            "fakeroot",
            "faketime",
            "firejail-run",
            "torify",
            "with-contenv",
            "s6-setuidgid",
            "chpst",
            "setarch",
            "linux32",
            "linux64",
            "ionice-run",
            "cpulimit",
            "trickle",
            "tmux",
            "screen",
            "xterm",
            "corepack",
            "dtach",
            "abduco",
        ],
        Wraps::Opaque,
        &[],
        OPAQUE,
        &[
            ex("taskset 1 ls", Yellow),
            ex("su -c 'ls'", Yellow),
            ex("strace rm -rf build", Red),
        ],
    ),
    wrapper(
        &["busybox", "toybox"],
        Wraps::Multicall,
        &[],
        &[rules::WRAPPER_MULTICALL],
        &[ex("busybox ls", Yellow), ex("toybox cat a", Yellow)],
    ),
];
