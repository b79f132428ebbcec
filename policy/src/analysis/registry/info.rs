//! Programs whose operands are words, not paths: output, tests, lookups of programs and
//! users, numbers and expressions (DESIGN.md §2a green list).

use super::options::{Opt, Role};
use super::{ex, Judge, Operands, Program};
use crate::rules;
use crate::verdict::Verdict::{Green, Yellow};

const RULES: &[crate::rules::Rule] = &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS];

/// A green program whose operands are text, judged by the table alone.
const fn text(names: &'static [&'static str], examples: &'static [super::Example]) -> Program {
    Program {
        family: "info",
        names,
        green: true,
        options: &[],
        operands: Operands::Text,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples,
    }
}

pub(super) const PROGRAMS: &[Program] = &[
    text(&["echo"], &[ex("echo hello /etc/passwd", Green)]),
    text(&["printf"], &[ex("printf '%s\\n' a b", Green)]),
    text(
        &["true", "false"],
        &[ex("true", Green), ex("false x", Green)],
    ),
    text(
        &["which", "type"],
        &[ex("which cargo", Green), ex("type -a ls", Green)],
    ),
    text(
        &["whoami", "id", "uname"],
        &[
            ex("whoami", Green),
            ex("id -u", Green),
            ex("uname -a", Green),
        ],
    ),
    text(
        &["seq", "expr"],
        &[ex("seq 1 10", Green), ex("expr 1 + 2", Green)],
    ),
    text(
        &["basename", "dirname"],
        &[
            ex("basename /usr/bin/ls", Green),
            ex("dirname /etc/x", Green),
        ],
    ),
    text(&["pwd"], &[ex("pwd -P", Green)]),
    Program {
        family: "info",
        names: &["date"],
        green: true,
        options: &[
            Opt::val('d', "date"),
            Opt::val('f', "file").role(Role::ReadsFile),
            Opt::val('r', "reference").role(Role::ReadsFile),
            Opt::val('s', "set").role(Role::NotReadOnly("--set (changes the clock)")),
            Opt::val('\0', "rfc-3339"),
            Opt::val('\0', "resolution"),
        ],
        operands: Operands::FormatOrClock,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("date +%s", Green),
            ex("date -d yesterday +%F", Green),
            ex("date -r Cargo.toml", Green),
            ex("date -s 2020-01-01", Yellow),
            ex("date --se=2020-01-01", Yellow),
            ex("date 01010000", Yellow),
        ],
    },
    Program {
        family: "info",
        names: &["test", "["],
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[ex("test -f Cargo.toml", Green), ex("[ -d src ]", Green)],
    },
];
