//! Programs that change files, their metadata or what runs later, and the tools that build
//! and install: never green (DESIGN.md §2: deletions, writes, metadata and persistence ask;
//! under system paths they are blocked). Their judges are the analyser's (`commands/files.rs`,
//! `commands/tools.rs`); these entries hold their names, so each is registered once.

use super::options::Opt;
use super::{ex, Effect, Judge, Operands, Program, Takes, Walk};
use crate::rules;
use crate::verdict::Verdict::{Blocked, Red, Yellow};

/// A program walked by `walk`, judged by the analyser.
const fn changes(
    names: &'static [&'static str],
    walk: Walk,
    rules: &'static [crate::rules::Rule],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "changes",
        names,
        green: false,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Walker(walk),
        effects: &[],
        rules,
        examples,
    }
}

/// cp's, mv's and ln's options that take a value.
const COPY_OPTIONS: &[Opt] = &[
    Opt::val('t', "target-directory"),
    Opt::val('S', "suffix"),
    Opt::val('\0', "sparse"),
    Opt::val('\0', "no-preserve"),
];

/// `cp -L`, `rsync -L`: the copy follows symlinks.
const FOLLOWS_L: Effect = Effect::FollowsLinks {
    needs: None,
    letters: "L",
    longs: &["--dereference", "--copy-links"],
};

/// A writer (`Walk::Writer`) with the options of its table that take a value.
const fn writer(
    names: &'static [&'static str],
    options: &'static [Opt],
    examples: &'static [super::Example],
) -> Program {
    Program {
        options,
        ..changes(
            names,
            Walk::Writer,
            &[
                rules::CMD_WRITES,
                rules::CMD_DEVICE_NODE,
                rules::CMD_PROGRAM_OPTION,
            ],
            examples,
        )
    }
}

/// What an archiver invocation emits in the examples.
const ARCHIVES: &[crate::rules::Rule] = &[
    rules::CMD_UNLISTED,
    rules::CMD_WRITES,
    rules::VAULT_SYSTEM_PATH,
    rules::PATH_OUTSIDE_WORKTREE,
];

/// A package manager or build tool (`Walk::PackageTool`).
const fn package_tool(
    names: &'static [&'static str],
    examples: &'static [super::Example],
) -> Program {
    changes(
        names,
        Walk::PackageTool,
        &[
            rules::CMD_BUILD,
            rules::CMD_UNLISTED,
            rules::CONFIG_TOOL_WRITE,
            rules::VAULT_SYSTEM_PATH,
            rules::PATH_OUTSIDE_WORKTREE,
        ],
        examples,
    )
}

/// `p` with `effects`.
const fn with_effects(p: Program, effects: &'static [Effect]) -> Program {
    Program { effects, ..p }
}

pub(super) const PROGRAMS: &[Program] = &[
    changes(
        &["rm", "unlink", "rmdir"],
        Walk::Remove,
        &[rules::RM_DELETE, rules::RM_RECURSIVE_FORCE],
        &[
            ex("rm a.o", Yellow),
            ex("rm -rf build", Red),
            ex("rmdir empty", Yellow),
        ],
    ),
    // `--remove[=HOW]` and `-u` take no separate value.
    Program {
        options: &[
            Opt::val('n', "iterations"),
            Opt::val('s', "size"),
            Opt::val('\0', "random-source"),
        ],
        ..changes(
            &["shred"],
            Walk::Remove,
            &[rules::RM_DELETE],
            &[ex("shred -n 3 -u secret.txt", Yellow)],
        )
    },
    with_effects(
        changes(
            &["chmod", "chown", "chgrp", "chattr", "setfacl"],
            Walk::Metadata,
            &[rules::CMD_METADATA],
            &[ex("chmod +x run.sh", Yellow), ex("chown me a", Yellow)],
        ),
        // `-R -L` changes what every link to a directory below the start paths leads to
        // (chown(1), chgrp(1), setfacl(1); `-H` follows only the named ones, whose own
        // paths are checked like any operand).
        &[Effect::FollowsLinks {
            needs: Some('R'),
            letters: "L",
            longs: &[],
        }],
    ),
    // The writers' options that take a value; optional-valued ones (`--backup[=C]`,
    // `--context[=CTX]`, `--preserve[=L]`, `--reflink[=W]`, `--update[=U]`, `-Z`) never take
    // the next word. What a value does (`-t DIR`, `--reference F`, `--rsh CMD`) is read by
    // the judge in `commands/files.rs`.
    with_effects(
        writer(
            &["cp"],
            COPY_OPTIONS,
            &[ex("cp a b", Yellow), ex("cp -rL src out", Yellow)],
        ),
        &[FOLLOWS_L],
    ),
    writer(
        &["mv", "ln"],
        COPY_OPTIONS,
        &[ex("mv -t out a", Yellow), ex("ln -s a b", Yellow)],
    ),
    writer(
        &["install"],
        &[
            Opt::val('t', "target-directory"),
            Opt::val('S', "suffix"),
            Opt::val('m', "mode"),
            Opt::val('o', "owner"),
            Opt::val('g', "group"),
            Opt::val('\0', "strip-program"),
        ],
        &[ex("install -m 644 a b", Yellow)],
    ),
    writer(
        &["touch"],
        &[
            Opt::val('d', "date"),
            Opt::val('r', "reference"),
            Opt::val('t', ""),
            Opt::val('\0', "time"),
        ],
        &[ex("touch x", Yellow), ex("touch -r a b", Yellow)],
    ),
    writer(
        &["mkdir", "mkfifo", "mknod"],
        &[Opt::val('m', "mode")],
        &[
            ex("mkdir -p out", Yellow),
            ex("mkfifo -m 600 f", Yellow),
            ex("mknod d c 1 1", Red),
        ],
    ),
    writer(
        &["truncate"],
        &[Opt::val('s', "size"), Opt::val('r', "reference")],
        &[ex("truncate -s 0 log.txt", Yellow)],
    ),
    with_effects(
        writer(
            &["rsync"],
            &[
                Opt::val('e', "rsh"),
                Opt::val('B', ""),
                Opt::val('f', "filter"),
                Opt::val('T', "temp-dir"),
                Opt::val('\0', "rsync-path"),
                Opt::val('\0', "exclude"),
                Opt::val('\0', "include"),
                Opt::val('\0', "exclude-from"),
                Opt::val('\0', "include-from"),
                Opt::val('\0', "files-from"),
                Opt::val('\0', "partial-dir"),
                Opt::val('\0', "backup-dir"),
                Opt::val('\0', "suffix"),
                Opt::val('\0', "chmod"),
                Opt::val('\0', "chown"),
                Opt::val('\0', "log-file"),
                Opt::val('\0', "password-file"),
                Opt::val('\0', "compare-dest"),
                Opt::val('\0', "copy-dest"),
                Opt::val('\0', "link-dest"),
                Opt::val('\0', "max-size"),
                Opt::val('\0', "min-size"),
                Opt::val('\0', "timeout"),
                Opt::val('\0', "bwlimit"),
                Opt::val('\0', "out-format"),
                Opt::val('\0', "port"),
                Opt::val('\0', "sockopts"),
                Opt::val('\0', "protocol"),
                Opt::val('\0', "iconv"),
                Opt::val('\0', "info"),
                Opt::val('\0', "debug"),
            ],
            &[
                ex("rsync -a src/ out/", Yellow),
                ex("rsync -e ssh a b", Red),
            ],
        ),
        &[FOLLOWS_L],
    ),
    writer(
        &["tee", "dd"],
        &[],
        &[ex("tee out.txt", Yellow), ex("dd if=a of=b", Yellow)],
    ),
    // The options that take a value; a program file (`-f`, `-i`) and `--source` are read by
    // the judge in `commands/tools.rs`.
    Program {
        options: &[
            Opt::val('f', "file"),
            Opt::val('v', "assign"),
            Opt::val('F', "field-separator"),
            Opt::val('i', "include"),
            Opt::val('\0', "load"),
            Opt::val('\0', "source"),
        ],
        ..changes(
            &["awk", "gawk", "mawk", "nawk"],
            Walk::Awk,
            &[rules::CMD_AWK],
            &[ex("awk '{print $1}' a.txt", Yellow)],
        )
    },
    with_effects(
        changes(
            &["tar", "bsdtar"],
            Walk::Archiver,
            ARCHIVES,
            &[
                ex("tar -xf a.tar", Yellow),
                ex("tar -C /usr -xf a.tar", Blocked),
            ],
        ),
        &[
            Effect::ExtractsInto,
            Effect::FollowsLinks {
                needs: None,
                letters: "h",
                longs: &["--dereference"],
            },
        ],
    ),
    changes(
        &["zip"],
        Walk::Archiver,
        ARCHIVES,
        &[ex("zip out.zip a", Yellow)],
    ),
    with_effects(
        changes(
            &["unzip"],
            Walk::Archiver,
            ARCHIVES,
            &[
                ex("unzip a.zip", Yellow),
                ex("unzip a.zip -d /etc", Blocked),
            ],
        ),
        &[Effect::WritesTo(&["-d"], Takes::Separate)],
    ),
    with_effects(
        changes(
            &["7z"],
            Walk::Archiver,
            ARCHIVES,
            &[ex("7z x a.7z", Yellow), ex("7z x a.7z -o/usr/bin", Blocked)],
        ),
        &[Effect::WritesTo(&["-o"], Takes::Attached)],
    ),
    // Package managers and build tools: `run`/`exec` subcommands wrap a command (the judge
    // in `commands.rs`); their output directories and `config` writes are effects.
    with_effects(
        package_tool(
            &["npm", "pnpm"],
            &[ex("npm install", Yellow), ex("npm config set x y", Red)],
        ),
        &[
            Effect::WritesTo(&["--prefix"], Takes::Separate),
            Effect::ConfigWrites,
        ],
    ),
    with_effects(
        package_tool(&["yarn"], &[ex("yarn install", Yellow)]),
        &[Effect::ConfigWrites],
    ),
    with_effects(
        package_tool(
            &["pip", "pip3"],
            &[
                ex("pip install -e .", Yellow),
                ex("pip install --target /usr/lib/x y", Blocked),
            ],
        ),
        &[
            Effect::WritesTo(
                &["--target", "-t", "--prefix", "--root", "--src"],
                Takes::Separate,
            ),
            Effect::ConfigWrites,
        ],
    ),
    with_effects(
        package_tool(&["uv", "poetry", "pdm"], &[ex("uv sync", Yellow)]),
        &[Effect::ConfigWrites],
    ),
    with_effects(
        package_tool(&["conda", "mamba"], &[ex("conda list", Yellow)]),
        &[Effect::ConfigWrites],
    ),
    with_effects(
        package_tool(
            &["cargo"],
            &[
                ex("cargo test", Yellow),
                ex("cargo build --target-dir /usr/lib/t", Blocked),
            ],
        ),
        &[Effect::WritesTo(
            &["--target-dir", "--root", "--out-dir", "--artifact-dir"],
            Takes::Separate,
        )],
    ),
    with_effects(
        package_tool(&["go"], &[ex("go build -o app .", Yellow)]),
        &[Effect::WritesTo(&["-o", "--out-dir"], Takes::Separate)],
    ),
    package_tool(
        &[
            "pipenv",
            "bundle",
            "micromamba",
            "pyenv",
            "rbenv",
            "asdf",
            "opam",
            "stack",
            "pixi",
            "hatch",
            "rye",
        ],
        &[ex("bundle install", Yellow)],
    ),
    changes(
        &["crontab", "at", "batch", "systemd-run", "launchctl"],
        Walk::Scheduler,
        &[rules::PERSIST_SCHEDULER],
        &[ex("crontab -l", Red), ex("at now", Red)],
    ),
];
