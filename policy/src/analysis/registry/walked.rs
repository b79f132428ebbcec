//! Green programs the analyser walks itself (their entries hold their names and examples;
//! their judges live with the walk because they change its state or analyse the commands
//! they run): `cd`/`pushd`/`popd` move the line's directory, `find`/`fd` run commands
//! (`-exec`, `--exec`), `git` expands aliases, runs hooks and pushes.

use super::options::Opt;
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
        effects: &[],
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
    // The options that take a value; what `-x`/`-X` and the path options do is read by
    // the judge in `commands/search.rs`.
    Program {
        options: &[
            Opt::val('e', "extension"),
            Opt::val('d', "max-depth"),
            Opt::val('E', "exclude"),
            Opt::val('c', "color"),
            Opt::val('t', "type"),
            Opt::val('j', "threads"),
            Opt::val('S', "size"),
            Opt::val('o', "owner"),
            Opt::val('x', ""),
            Opt::val('X', ""),
            Opt::val('\0', "changed-within"),
            Opt::val('\0', "changed-before"),
            Opt::val('\0', "base-directory"),
            Opt::val('\0', "search-path"),
            Opt::val('\0', "max-results"),
            Opt::val('\0', "ignore-file"),
            Opt::val('\0', "path-separator"),
            Opt::val('\0', "batch-size"),
            Opt::val('\0', "format"),
            Opt::val('\0', "min-depth"),
            Opt::val('\0', "exact-depth"),
        ],
        ..walked(
            &["fd", "fdfind"],
            &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS],
            &[ex("fd -e rs", Green), ex("fd -t f main src", Green)],
        )
    },
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
