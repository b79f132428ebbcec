//! Text filters (coreutils, util-linux, diffutils): they read the files named and print.
//! Options that write (`sort -o`) or run programs (`sort --compress-program`) leave the
//! green list.

use super::options::{Opt, Role};
use super::{ex, Effect, Judge, Operands, Program, Takes};
use crate::rules;
use crate::verdict::Verdict::{Green, Red, Yellow};

const RULES: &[crate::rules::Rule] = &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS];
const RUNS_PROGRAMS: &[crate::rules::Rule] = &[
    rules::CMD_NOT_READ_ONLY,
    rules::CMD_PROGRAM_OPTION,
    rules::CMD_DYNAMIC_ARGS,
];

/// A green filter of the files it names, judged by its table.
const fn filter(
    names: &'static [&'static str],
    options: &'static [Opt],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "text",
        names,
        green: true,
        options,
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples,
    }
}

/// [`filter`] with options that run programs.
const fn filter_running(
    names: &'static [&'static str],
    options: &'static [Opt],
    examples: &'static [super::Example],
) -> Program {
    Program {
        rules: RUNS_PROGRAMS,
        ..filter(names, options, examples)
    }
}

pub(super) const PROGRAMS: &[Program] = &[
    filter(
        &["cat"],
        &[],
        &[ex("cat README.md", Green), ex("cat -n src/main.rs", Green)],
    ),
    filter(
        &["head", "tail"],
        &[
            Opt::val('n', "lines"),
            Opt::val('c', "bytes"),
            Opt::val('s', "sleep-interval"),
            Opt::val('\0', "pid"),
            Opt::val('\0', "max-unchanged-stats"),
        ],
        &[
            ex("head -n 5 README.md", Green),
            ex("tail -n5 -f log.txt", Green),
        ],
    ),
    filter(
        &["wc"],
        &[
            Opt::val('\0', "files0-from").role(Role::PathsFromFile),
            Opt::val('\0', "total"),
        ],
        &[
            ex("wc -l src/lib.rs", Green),
            ex("wc --files0-from=list", Yellow),
        ],
    ),
    filter(
        &["nl"],
        &[
            Opt::val('b', "body-numbering"),
            Opt::val('d', "section-delimiter"),
            Opt::val('f', "footer-numbering"),
            Opt::val('h', "header-numbering"),
            Opt::val('i', "line-increment"),
            Opt::val('l', "join-blank-lines"),
            Opt::val('n', "number-format"),
            Opt::val('s', "number-separator"),
            Opt::val('v', "starting-line-number"),
            Opt::val('w', "number-width"),
        ],
        &[ex("nl -ba file.txt", Green)],
    ),
    filter(
        &["tac"],
        &[Opt::val('s', "separator")],
        &[ex("tac -s , file.txt", Green)],
    ),
    filter(&["rev"], &[], &[ex("rev file.txt", Green)]),
    filter(
        &["cut"],
        &[
            Opt::val('b', "bytes"),
            Opt::val('c', "characters"),
            Opt::val('d', "delimiter"),
            Opt::val('f', "fields"),
            Opt::val('\0', "output-delimiter"),
        ],
        &[ex("cut -d: -f1 data.txt", Green)],
    ),
    Program {
        family: "text",
        names: &["tr"],
        green: true,
        options: &[],
        operands: Operands::Text,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[ex("tr a-z A-Z", Green)],
    },
    filter(
        &["paste"],
        &[Opt::val('d', "delimiters")],
        &[ex("paste -d, a b", Green)],
    ),
    filter(
        &["fold"],
        &[Opt::val('w', "width")],
        &[ex("fold -w 80 a.txt", Green)],
    ),
    filter(
        &["column"],
        &[
            Opt::val('c', "columns"),
            Opt::val('s', "separator"),
            Opt::val('o', "output-separator"),
            Opt::val('N', "table-columns"),
            Opt::val('O', "table-order"),
            Opt::val('E', "table-noextreme"),
            Opt::val('R', "table-right"),
            Opt::val('H', "table-hide"),
            Opt::val('l', "table-columns-limit"),
            Opt::val('W', "table-wrap"),
            Opt::val('T', "table-truncate"),
            Opt::val('n', "table-name"),
            Opt::val('i', "tree-id"),
            Opt::val('p', "tree-parent"),
            Opt::val('\0', "tree"),
            Opt::val('\0', "output-width"),
        ],
        &[ex("column -t -s, data.csv", Green)],
    ),
    filter(&["comm"], &[], &[ex("comm -12 a b", Green)]),
    filter(
        &["cmp"],
        &[Opt::val('i', "ignore-initial"), Opt::val('n', "bytes")],
        &[ex("cmp -n 10 a b", Green)],
    ),
    filter(
        &["diff"],
        &[
            Opt::val('C', ""),
            Opt::val('U', ""),
            Opt::val('I', "ignore-matching-lines"),
            Opt::val('x', "exclude"),
            Opt::val('X', "exclude-from").role(Role::ReadsFile),
            Opt::val('F', "show-function-line"),
            Opt::val('L', "label"),
            Opt::val('D', "ifdef"),
            Opt::val('\0', "horizon-lines"),
            Opt::val('\0', "starting-file"),
            Opt::val('\0', "from-file").role(Role::ReadsFile),
            Opt::val('\0', "to-file").role(Role::ReadsFile),
            Opt::val('\0', "line-format"),
            Opt::val('\0', "old-line-format"),
            Opt::val('\0', "new-line-format"),
            Opt::val('\0', "unchanged-line-format"),
            Opt::val('\0', "old-group-format"),
            Opt::val('\0', "new-group-format"),
            Opt::val('\0', "changed-group-format"),
            Opt::val('\0', "unchanged-group-format"),
            Opt::val('\0', "tabsize"),
            Opt::val('\0', "width"),
            Opt::val('\0', "palette"),
        ],
        &[
            ex("diff -u a.txt b.txt", Green),
            ex("diff -r -X ignore a b", Green),
        ],
    ),
    // `sort -o FILE` is also an effect: the file is written whatever the table says.
    Program {
        effects: &[Effect::WritesTo(&["-o", "--output"], Takes::Separate)],
        ..filter_running(
            &["sort"],
            &[
                // First: `--c` names it (getopt_long takes the first match here too).
                Opt::val('\0', "compress-program")
                    .role(Role::Program("`sort --compress-program` runs a program")),
                Opt::val('o', "output").role(Role::WritesFile),
                Opt::val('T', "temporary-directory").role(Role::ScratchDir),
                Opt::val('k', "key"),
                Opt::val('t', "field-separator"),
                Opt::val('S', "buffer-size"),
                Opt::val('y', ""),
                Opt::val('\0', "files0-from").role(Role::PathsFromFile),
                Opt::val('\0', "parallel"),
                Opt::val('\0', "batch-size"),
                Opt::val('\0', "sort"),
                Opt::val('\0', "random-source").role(Role::ReadsFile),
            ],
            &[
                ex("sort -u -k2 data.txt", Green),
                ex("sort -o out.txt data.txt", Yellow),
                ex("sort --compress-program=gzip data.txt", Red),
            ],
        )
    },
    Program {
        family: "text",
        names: &["uniq"],
        green: true,
        options: &[
            Opt::val('f', "skip-fields"),
            Opt::val('s', "skip-chars"),
            Opt::val('w', "check-chars"),
        ],
        operands: Operands::InputOutput,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("uniq -c data.txt", Green),
            ex("uniq data.txt out.txt", Yellow),
        ],
    },
];
