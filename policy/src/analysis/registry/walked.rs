//! Green programs the analyser walks itself (their entries hold their names and examples;
//! their judges live with the walk because they change its state or analyse the commands
//! they run): `cd`/`pushd`/`popd` move the line's directory, `find`/`fd` run commands
//! (`-exec`, `--exec`), `git` expands aliases, runs hooks and pushes.

use super::{ex, Judge, Operands, Program, Walk};
use crate::rules;
use crate::verdict::Verdict::{Green, Red, Yellow};

/// A program with its own judge in the walk.
const fn walked(
    names: &'static [&'static str],
    rules: &'static [crate::rules::Rule],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "walked",
        names,
        green: true,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Walker(Walk::Own),
        rules,
        examples,
    }
}

pub(super) const PROGRAMS: &[Program] = &[
    walked(
        &["cd", "pushd", "popd"],
        &[],
        &[
            ex("cd src", Green),
            ex("pushd src", Green),
            ex("popd", Green),
        ],
    ),
    walked(
        &["find"],
        &[
            rules::CMD_NOT_READ_ONLY,
            rules::RM_FIND_DELETE,
            rules::CMD_DYNAMIC_ARGS,
        ],
        &[
            ex("find . -name '*.rs'", Green),
            ex("find src -type f -newer Cargo.toml", Green),
            ex("find . -delete", Red),
        ],
    ),
    walked(
        &["fd"],
        &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS],
        &[ex("fd -e rs", Green), ex("fd -t f main src", Green)],
    ),
    walked(
        &["git"],
        &[
            rules::GIT_NOT_READ_ONLY,
            rules::NET_GIT,
            rules::GIT_CONFIG_WRITE,
        ],
        &[
            ex("git status", Green),
            ex("git log --oneline -5", Green),
            ex("git diff HEAD~1", Green),
            ex("git commit -m x", Yellow),
            ex("git fetch origin", Red),
        ],
    ),
];
