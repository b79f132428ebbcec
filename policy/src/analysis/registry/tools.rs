//! Programs not on the green list that tyba knows for their effects alone: judged like any
//! unlisted program (yellow `cmd.unlisted`, their words checked as paths), and their
//! [`Effect`]s applied to every invocation: a compiler's `-o FILE`, `patch -d DIR`, `cpio -D
//! DIR`, `7za -oDIR` are paths written (under a system path blocked, DESIGN.md §2);
//! `systemctl enable|link|edit…` and `loginctl enable-linger` make code run later, outside
//! the sandbox (red, like `crontab`); `tyba`'s own subcommands that switch its guards off or
//! grant approvals are the agent overruling its supervisor ([`Effect::SupervisorControl`]).

use super::{ex, Effect, Judge, Operands, Program, Takes, Walk};
use crate::rules;
use crate::verdict::Verdict::{Blocked, Red, Yellow};

/// An unlisted program with `effects`.
const fn tool(
    names: &'static [&'static str],
    effects: &'static [Effect],
    rules: &'static [crate::rules::Rule],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "tools",
        names,
        green: false,
        options: &[],
        operands: Operands::Text,
        judge: Judge::Walker(Walk::Unlisted),
        effects,
        rules,
        examples,
    }
}

/// What writing under a system path emits, besides `cmd.unlisted`.
const WRITES: &[crate::rules::Rule] = &[
    rules::CMD_UNLISTED,
    rules::VAULT_SYSTEM_PATH,
    rules::PATH_OUTSIDE_WORKTREE,
];

pub(super) const PROGRAMS: &[Program] = &[
    tool(
        &["cc", "gcc", "g++", "c++", "clang", "clang++", "ld", "rustc"],
        &[Effect::WritesTo(&["-o", "--out-dir"], Takes::Separate)],
        WRITES,
        &[
            ex("cc -o app main.c", Yellow),
            ex("gcc -o /usr/bin/app main.c", Blocked),
            ex("rustc --out-dir=/usr/lib main.rs", Blocked),
        ],
    ),
    tool(
        &["patch"],
        &[Effect::WritesTo(
            &["-o", "--output", "-d", "--directory"],
            Takes::Separate,
        )],
        WRITES,
        &[
            ex("patch -p1 -i fix.diff", Yellow),
            ex("patch -d /etc -p1 -i fix.diff", Blocked),
        ],
    ),
    tool(
        &["cpio"],
        &[Effect::WritesTo(&["-D", "--directory"], Takes::Separate)],
        WRITES,
        &[ex("cpio -D /usr -i", Blocked)],
    ),
    // Other spellings of 7-Zip than `7z` (an archiver entry): their output directory only.
    tool(
        &["7za", "7zr"],
        &[Effect::WritesTo(&["-o"], Takes::Attached)],
        WRITES,
        &[
            ex("7za x a.7z", Yellow),
            ex("7za x a.7z -o/usr/bin", Blocked),
        ],
    ),
    tool(
        &["systemctl"],
        &[Effect::ServiceManager],
        &[
            rules::CMD_UNLISTED,
            rules::PERSIST_SERVICE,
            rules::PERSIST_SCHEDULER,
        ],
        &[
            ex("systemctl status sshd", Yellow),
            ex("systemctl enable evil.service", Red),
            ex("systemctl --user link ./x.service", Red),
        ],
    ),
    tool(
        &["loginctl"],
        &[Effect::Linger],
        &[rules::CMD_UNLISTED, rules::PERSIST_SERVICE],
        &[
            ex("loginctl list-sessions", Yellow),
            ex("loginctl enable-linger", Red),
        ],
    ),
    tool(
        &["tyba"],
        &[Effect::SupervisorControl],
        &[
            rules::CMD_UNLISTED,
            rules::GIT_GUARD_HOOK,
            rules::SUPERVISOR_CONTROL,
        ],
        &[
            ex("tyba classify 'ls'", Yellow),
            ex("tyba git-guard uninstall", Blocked),
            ex("tyba hook uninstall claude-code", Blocked),
            ex("tyba approve --always s1-3", Red),
            ex("tyba autonomy s1 high", Red),
        ],
    ),
];
