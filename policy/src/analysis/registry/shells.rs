//! Shells: a `-c STRING`, a script or a fed stdin is analysed as a command line (DESIGN.md
//! §2a "Shells and interpreters"). The supervisor reads an intercepted exec's program with
//! the same names (`tyba_policy::programs::SHELLS`).

use super::{ex, Judge, Operands, Program, Walk};
use crate::rules;
use crate::verdict::Verdict::Yellow;

/// Shells that take `-c STRING`, a script file, or stdin.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh", "rbash", "yash",
    "posh",
];

pub(super) const PROGRAMS: &[Program] = &[Program {
    family: "shells",
    names: SHELLS,
    green: false,
    options: &[],
    operands: Operands::Text,
    judge: Judge::Walker(Walk::Shell),
    effects: &[],
    rules: &[rules::SHELL_INTERPRETER, rules::SHELL_SCRIPT],
    // The inner line's own rules come from its programs' entries.
    examples: &[
        ex("bash -c 'ls -la'", Yellow),
        ex("sh -c 'cat a | wc -l'", Yellow),
        ex("bash script.sh", Yellow),
    ],
}];
