//! Checksums and dumps: they read the files named. A check list (`sha256sum -c`) names
//! paths read at run time; an output operand or option (`xxd in out`, `base64 -o`) writes.

use super::options::{Opt, Role};
use super::{ex, Judge, Operands, Program};
use crate::rules;
use crate::verdict::Verdict::{Green, Yellow};

const RULES: &[crate::rules::Rule] = &[rules::CMD_NOT_READ_ONLY, rules::CMD_DYNAMIC_ARGS];

/// `-c`/`--check`: the paths to hash are read from the file at run time.
const CHECK: Opt = Opt::flag('c', "check").role(Role::PathsFromFile);

pub(super) const PROGRAMS: &[Program] = &[
    Program {
        family: "digest",
        names: &[
            "md5sum",
            "sha1sum",
            "sha224sum",
            "sha256sum",
            "sha384sum",
            "sha512sum",
        ],
        green: true,
        options: &[CHECK],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("sha256sum Cargo.toml", Green),
            ex("md5sum -b a b", Green),
            ex("sha1sum -c sums.txt", Yellow),
        ],
    },
    Program {
        family: "digest",
        names: &["cksum", "b2sum"],
        green: true,
        options: &[Opt::val('l', "length"), Opt::val('a', "algorithm"), CHECK],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("cksum -a sha256 Cargo.toml", Green),
            ex("b2sum -l 256 a", Green),
            ex("b2sum --check sums", Yellow),
        ],
    },
    Program {
        family: "digest",
        names: &["od"],
        green: true,
        options: &[
            Opt::val('A', "address-radix"),
            Opt::val('j', "skip-bytes"),
            Opt::val('N', "read-bytes"),
            Opt::val('t', "format"),
            Opt::val('\0', "endian"),
        ],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[ex("od -A x -t x1z a.bin", Green)],
    },
    Program {
        family: "digest",
        names: &["hexdump"],
        green: true,
        options: &[
            Opt::val('e', "format"),
            Opt::val('f', "format-file").role(Role::ReadsFile),
            Opt::val('n', "length"),
            Opt::val('s', "skip"),
        ],
        operands: Operands::Read,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[ex("hexdump -C -n 64 a.bin", Green)],
    },
    Program {
        family: "digest",
        names: &["xxd"],
        green: true,
        options: &[
            Opt::val('c', "cols"),
            Opt::val('g', "groupsize"),
            Opt::val('l', "len"),
            Opt::val('o', "offset"),
            Opt::val('s', "seek"),
            Opt::val('n', "name"),
        ],
        operands: Operands::InputOutput,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("xxd -l 64 a.bin", Green),
            ex("xxd a.bin out.hex", Yellow),
        ],
    },
    Program {
        family: "digest",
        names: &["base64"],
        green: true,
        options: &[
            Opt::val('w', "wrap"),
            Opt::val('i', "input").role(Role::ReadsFile),
            Opt::val('o', "output").role(Role::WritesFile),
        ],
        operands: Operands::OneInput,
        judge: Judge::Table,
        effects: &[],
        rules: RULES,
        examples: &[
            ex("base64 -w0 a.bin", Green),
            ex("base64 -d a.b64 -o out", Yellow),
            ex("base64 a b", Yellow),
        ],
    },
];
