//! Classifies command lines given as arguments in a worktree (the current directory), printing
//! verdict and rules: a quick way to try the policy without the CLI.
//!
//! `cargo run -p tyba-policy --example classify_line -- 'rm -rf build' 'ls'`
use tyba_policy::{Action, Context, Policy};

fn main() {
    let Ok(wt) = std::env::current_dir().and_then(std::fs::canonicalize) else {
        eprintln!("cannot read the current directory");
        std::process::exit(2);
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let policy = Policy::embedded_default();
    for line in std::env::args().skip(1) {
        let ctx = Context {
            worktree: &wt,
            cwd: &wt,
            home: home.as_deref(),
            scratch: None,
            git: None,
        };
        let c = policy.classify(
            &Action::Exec {
                command: line.clone(),
            },
            &ctx,
        );
        println!("{:8} {:?}  <= {line}", c.verdict.as_str(), c.rules());
    }
}
