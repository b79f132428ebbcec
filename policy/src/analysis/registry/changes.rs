//! Programs that change files, their metadata or what runs later, and the tools that build
//! and install: never green (DESIGN.md §2: deletions, writes, metadata and persistence ask;
//! under system paths they are blocked). Their judges are the analyser's (`commands/files.rs`,
//! `commands/tools.rs`); these entries hold their names, so each is registered once.

use super::{ex, Judge, Operands, Program, Walk};
use crate::rules;
use crate::verdict::Verdict::{Red, Yellow};

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
        rules,
        examples,
    }
}

pub(super) const PROGRAMS: &[Program] = &[
    changes(
        &["rm", "unlink", "rmdir", "shred"],
        Walk::Remove,
        &[rules::RM_DELETE, rules::RM_RECURSIVE_FORCE],
        &[
            ex("rm a.o", Yellow),
            ex("rm -rf build", Red),
            ex("rmdir empty", Yellow),
        ],
    ),
    changes(
        &["chmod", "chown", "chgrp", "chattr", "setfacl"],
        Walk::Metadata,
        &[rules::CMD_METADATA],
        &[ex("chmod +x run.sh", Yellow), ex("chown me a", Yellow)],
    ),
    changes(
        &[
            "cp", "mv", "ln", "install", "tee", "touch", "mkdir", "truncate", "dd", "rsync",
            "mkfifo", "mknod",
        ],
        Walk::Writer,
        &[rules::CMD_WRITES, rules::CMD_DEVICE_NODE],
        &[
            ex("cp a b", Yellow),
            ex("mkdir -p out", Yellow),
            ex("touch x", Yellow),
            ex("mknod d c 1 1", Red),
        ],
    ),
    changes(
        &["awk", "gawk", "mawk", "nawk"],
        Walk::Awk,
        &[rules::CMD_AWK],
        &[ex("awk '{print $1}' a.txt", Yellow)],
    ),
    changes(
        &["tar", "bsdtar", "zip", "unzip", "7z"],
        Walk::Archiver,
        &[rules::CMD_UNLISTED, rules::CMD_WRITES],
        &[ex("tar -xf a.tar", Yellow), ex("unzip a.zip", Yellow)],
    ),
    changes(
        &[
            "npm",
            "pnpm",
            "yarn",
            "pip",
            "pip3",
            "uv",
            "poetry",
            "cargo",
            "go",
            "pipenv",
            "bundle",
            "conda",
            "mamba",
            "micromamba",
            "pyenv",
            "rbenv",
            "asdf",
            "opam",
            "stack",
            "pixi",
            "hatch",
            "pdm",
            "rye",
        ],
        Walk::PackageTool,
        &[rules::CMD_BUILD, rules::CMD_UNLISTED],
        &[
            ex("cargo test", Yellow),
            ex("npm install", Yellow),
            ex("pip install -e .", Yellow),
        ],
    ),
    changes(
        &["crontab", "at", "batch", "systemd-run", "launchctl"],
        Walk::Scheduler,
        &[rules::PERSIST_SCHEDULER],
        &[ex("crontab -l", Red), ex("at now", Red)],
    ),
];
