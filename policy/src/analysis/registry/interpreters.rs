//! Interpreters that take inline code: at least yellow (`interp.code`), the code is not
//! analysed (DESIGN.md §2a "Shells and interpreters"). Each entry's `Walk::Interpreter`
//! holds the options whose value is inline code. A name with a version suffix
//! (`python3.12`, `lua5.4`) is its base name's entry.

use super::{ex, Effect, Judge, Operands, Program, Walk};
use crate::rules;
use crate::verdict::Verdict::Yellow;

/// An interpreter whose inline code follows one of `flags`.
const fn interpreter(
    names: &'static [&'static str],
    flags: &'static [&'static str],
    examples: &'static [super::Example],
) -> Program {
    Program {
        family: "interpreters",
        names,
        green: false,
        options: &[],
        operands: Operands::Read,
        judge: Judge::Walker(Walk::Interpreter(flags)),
        effects: &[],
        rules: &[rules::INTERP_CODE],
        examples,
    }
}

const JS: &[&str] = &["-e", "--eval", "-p", "--print"];

pub(super) const PROGRAMS: &[Program] = &[
    interpreter(
        &["python", "pypy"],
        &["-c"],
        &[ex("python -c 'print(1)'", Yellow)],
    ),
    interpreter(
        &["node", "nodejs"],
        JS,
        &[ex("node -e 'console.log(1)'", Yellow)],
    ),
    interpreter(&["deno"], JS, &[ex("deno -e 'console.log(1)'", Yellow)]),
    // bun is also a package tool: `bun config set` writes its rc file.
    Program {
        effects: &[Effect::ConfigWrites],
        ..interpreter(&["bun"], JS, &[ex("bun -e 'console.log(1)'", Yellow)])
    },
    interpreter(&["perl"], &["-e", "-E"], &[ex("perl -e 'print 1'", Yellow)]),
    interpreter(&["ruby", "jruby"], &["-e"], &[ex("ruby -e 'p 1'", Yellow)]),
    interpreter(&["php"], &["-r"], &[ex("php -r 'echo 1;'", Yellow)]),
    interpreter(
        &["lua", "luajit"],
        &["-e"],
        &[ex("lua -e 'print(1)'", Yellow)],
    ),
    interpreter(
        &["Rscript", "R"],
        &["-e"],
        &[ex("Rscript -e 'print(1)'", Yellow)],
    ),
    interpreter(
        &["julia"],
        &["-e", "--eval"],
        &[ex("julia -e 'println(1)'", Yellow)],
    ),
    interpreter(&["tclsh", "wish"], &[], &[ex("tclsh script.tcl", Yellow)]),
    interpreter(
        &["pwsh", "powershell"],
        &["-c", "-Command", "-command"],
        &[ex("pwsh -c 'Get-Date'", Yellow)],
    ),
    interpreter(
        &["osascript"],
        &["-e"],
        &[ex("osascript -e 'beep'", Yellow)],
    ),
    interpreter(&["guile"], &["-c"], &[ex("guile -c '(display 1)'", Yellow)]),
    interpreter(
        &["elixir", "erl"],
        &["-e", "-eval"],
        &[ex("elixir -e 'IO.puts 1'", Yellow)],
    ),
    interpreter(&["swift"], &["-e"], &[ex("swift -e 'print(1)'", Yellow)]),
    interpreter(&["groovy"], &["-e"], &[ex("groovy -e 'println 1'", Yellow)]),
    interpreter(&["scala"], &["-e"], &[ex("scala -e 'println(1)'", Yellow)]),
    interpreter(
        &["jshell", "irb"],
        &[],
        &[ex("jshell", Yellow), ex("irb", Yellow)],
    ),
];
