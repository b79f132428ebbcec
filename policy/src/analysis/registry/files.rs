//! Programs that describe files and directories: listings, sizes, types, resolved names.
//! Without operands, `ls`, `du`, `tree` and `df` read the current directory.

use super::options::{Opt, Role};
use super::{ex, Effect, Judge, Operands, Program};
use crate::rules;
use crate::verdict::Verdict::{Green, Yellow};

const RULES: &[crate::rules::Rule] = &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS];

/// A green program reading the files it names, judged by its table.
const fn reader(
    names: &'static [&'static str],
    options: &'static [Opt],
    operands: Operands,
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "files",
        names,
        green: true,
        options,
        operands,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples,
    }
}

pub(super) const PROGRAMS: &[Program] = &[
    Program {
        effects: &[Effect::FollowsLinks {
            needs: Some('R'),
            letters: "L",
            longs: &["--dereference"],
        }],
        ..reader(
            &["ls"],
            &[
                Opt::val('I', "ignore"),
                Opt::val('w', "width"),
                Opt::val('T', "tabsize"),
                Opt::val('\0', "hide"),
                Opt::val('\0', "block-size"),
                Opt::val('\0', "format"),
                Opt::val('\0', "sort"),
                Opt::val('\0', "time"),
                Opt::val('\0', "time-style"),
                Opt::val('\0', "quoting-style"),
                Opt::val('\0', "indicator-style"),
            ],
            Operands::ReadOrCwd,
            &[ex("ls -la", Green), ex("ls -l --sort=size src", Green)],
        )
    },
    reader(
        &["stat"],
        &[Opt::val('c', "format"), Opt::val('\0', "printf")],
        Operands::Read,
        &[ex("stat -c %s Cargo.toml", Green)],
    ),
    Program {
        effects: &[Effect::FollowsLinks {
            needs: None,
            letters: "L",
            longs: &["--dereference"],
        }],
        ..reader(
            &["du"],
            &[
                Opt::val('d', "max-depth"),
                Opt::val('B', "block-size"),
                Opt::val('t', "threshold"),
                Opt::val('X', "exclude-from").role(Role::ReadsFile),
                Opt::val('\0', "exclude"),
                Opt::val('\0', "files0-from").role(Role::PathsFromFile),
                Opt::val('\0', "time-style"),
            ],
            Operands::ReadOrCwd,
            &[ex("du -sh", Green), ex("du -d 1 src", Green)],
        )
    },
    reader(
        &["df"],
        &[
            Opt::val('B', "block-size"),
            Opt::val('t', "type"),
            Opt::val('x', "exclude-type"),
        ],
        Operands::ReadOrCwd,
        &[ex("df -h", Green)],
    ),
    Program {
        effects: &[Effect::FollowsLinks {
            needs: None,
            letters: "l",
            longs: &[],
        }],
        ..reader(
            &["tree"],
            &[
                Opt::val('L', ""),
                Opt::val('P', ""),
                Opt::val('I', ""),
                Opt::val('o', "").role(Role::WritesFile),
                Opt::val('H', ""),
                Opt::val('T', ""),
                // `tree -R` re-runs tree with an output file in every directory.
                Opt::flag('R', "").role(Role::NotReadOnly("-R (writes a file in every directory)")),
                Opt::val('\0', "filelimit"),
                Opt::val('\0', "charset"),
                Opt::val('\0', "timefmt"),
                Opt::val('\0', "sort"),
                Opt::val('\0', "fromfile").role(Role::ReadsFile),
                Opt::val('\0', "gitfile").role(Role::ReadsFile),
                Opt::val('\0', "infofile").role(Role::ReadsFile),
            ],
            Operands::ReadOrCwd,
            &[
                ex("tree -L 2 src", Green),
                ex("tree -o listing.txt", Yellow),
                ex("tree -R", Yellow),
            ],
        )
    },
    reader(
        &["file"],
        &[
            Opt::val('m', "magic-file").role(Role::ReadsFile),
            Opt::val('f', "files-from").role(Role::PathsFromFile),
            Opt::val('F', "separator"),
            Opt::val('e', "exclude"),
            Opt::val('P', "parameter"),
            Opt::val('\0', "exclude-quiet"),
            Opt::flag('C', "compile").role(Role::NotReadOnly("-C (writes a magic file)")),
        ],
        Operands::Read,
        &[
            ex("file -b Cargo.toml", Green),
            ex("file -f list.txt", Yellow),
            ex("file -C -m magic", Yellow),
        ],
    ),
    reader(
        &["realpath"],
        &[
            Opt::val('\0', "relative-to").role(Role::ReadsFile),
            Opt::val('\0', "relative-base").role(Role::ReadsFile),
        ],
        Operands::Read,
        &[ex("realpath --relative-to=src src/lib.rs", Green)],
    ),
    reader(
        &["readlink"],
        &[],
        Operands::Read,
        &[ex("readlink -f src", Green)],
    ),
];
