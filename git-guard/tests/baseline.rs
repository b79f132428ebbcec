//! Baseline: the guard's push resolution against what real git does, over generated
//! combinations of refspecs, options, remotes, configuration and HEAD, on the corpus fixture.
//! For each combination `git push --dry-run --porcelain` lists the remote refs git would
//! update; the guard must list every one of them (soundness), and every destination it calls
//! certain must be among them whenever git succeeds (precision); and resolved as if the
//! remote's refs were unknown (a network remote), it must still list every protected ref git
//! updates. All mismatches are reported at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;
use std::collections::BTreeSet;
use std::process::Command;
use tyba_git_guard::push;
use tyba_git_guard::repo::{Locator, RepoState};

const REFSPECS: &[&[&str]] = &[
    &[],
    &["main"],
    &["feature"],
    &["HEAD"],
    &["@"],
    &["main:feature"],
    &["feature:main"],
    &["feature:heads/main"],
    &["feature:tags/main"],
    &["feature:refs/heads/newb"],
    &["+feature:mainline"],
    &[":"],
    &["+:"],
    &["refs/heads/*:refs/heads/*"],
    &["refs/heads/feat*:refs/heads/ma*"],
    &["refs/heads/*:refs/heads/*", "^refs/heads/main"],
    &["refs/heads/*:refs/heads/*", "^refs/heads/ma*"],
    &["v1"],
    &["tag", "v1"],
    &["v1:main"],
    &["v2:refs/heads/newtag"],
    &[":feature"],
    &["main~1:feature"],
    &["origin/main"],
    &["origin/main:x"],
    &["refs/remotes/origin/main:refs/heads/y"],
    &["feature", "main:mainline"],
    &["main", "^refs/heads/main"],
    &["master:x", "^refs/heads/master"],
    &["HEAD:newbranch"],
    &["feat"],
    &["heads/feature"],
    &["refs/heads/feature"],
    &["mainline:main"],
    &["nonexistent"],
    &["nonexistent:feature"],
    &["feature:Main"],
    &["refs/tags/*:refs/tags/*"],
    &["refs/heads/f*:refs/remotes/x/*"],
    &["feature:master", "+main:feat"],
    &["alias"],
    &["alias:x"],
    &["heads/alias"],
];

const OPTIONS: &[&[&str]] = &[
    &[],
    &["--force"],
    &["--prune"],
    &["--all"],
    &["--mirror"],
    &["--tags"],
    &["-d"],
    &["--follow-tags"],
    &["--branches", "--no-all"],
    &["--mirr"],
];

const REMOTES: &[&str] = &["origin", "upstream", ".", "", "FIXTURE/origin.git"];

const CONFIGS: &[&[&str]] = &[
    &[],
    &["push.default=matching"],
    &["push.default=current"],
    &["push.default=upstream"],
    &["push.default=nothing"],
    &["push.default=simple"],
    &["remote.origin.push=refs/heads/main:refs/heads/feature"],
    &["remote.origin.push=+refs/heads/*:refs/heads/x/*"],
    &["remote.origin.push=:"],
    &["remote.origin.mirror=true"],
    &[
        "branch.main.merge=refs/heads/master",
        "push.default=upstream",
    ],
    &["push.autoSetupRemote=true"],
    &["remote.pushDefault=upstream"],
    &["branch.main.pushRemote=upstream"],
    &[
        "branch.feature.remote=origin",
        "branch.feature.merge=refs/heads/main",
        "push.default=upstream",
    ],
];

/// `alias` is a symbolic ref to `main` (made below): checked out, HEAD -> alias -> main.
const HEADS: &[&str] = &["main", "feature", "--detach", "alias"];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

fn git_dsts(stdout: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() >= 2 {
            if let Some((_, to)) = fields[1].rsplit_once(':') {
                out.insert(to.to_string());
            }
        }
    }
    out
}

#[test]
fn resolution_matches_real_git() {
    let home = isolate_once();
    let root = tempfile::tempdir().unwrap();
    let dir = fixture(root.path(), home);
    let work = dir.join("work");
    let protected = protected();
    // A branch that is a symbolic ref to `main`: git pushes `alias` (no destination) to the
    // remote's `main`, and HEAD on it makes `main` the current branch.
    let mut sym = clean(Command::new("git"), home);
    sym.arg("-C")
        .arg(&work)
        .args(["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
    run_ok(&mut sym);

    // Every refspec set with the defaults, then a deterministic sample of the rest.
    let mut combos: Vec<(usize, usize, usize, usize, usize)> = Vec::new();
    for r in 0..REFSPECS.len() {
        for h in 0..HEADS.len() {
            combos.push((h, 0, 0, r, 0));
        }
    }
    let mut rng = Lcg(0x7479_6261);
    for _ in 0..700 {
        combos.push((
            rng.next(HEADS.len()),
            rng.next(CONFIGS.len()),
            rng.next(OPTIONS.len()),
            rng.next(REFSPECS.len()),
            rng.next(REMOTES.len()),
        ));
    }
    combos.sort();
    combos.dedup();

    let mut failures = Vec::new();
    let mut precise = 0usize;
    let mut compared = 0usize;
    let mut current_head = "";
    for (h, c, o, r, rem) in combos {
        if HEADS[h] != current_head {
            let mut co = clean(Command::new("git"), home);
            co.arg("-C").arg(&work).args(["checkout", "-q", HEADS[h]]);
            run_ok(&mut co);
            current_head = HEADS[h];
        }
        let remote = REMOTES[rem].replace("FIXTURE", &dir.display().to_string());
        let mut args: Vec<String> = OPTIONS[o].iter().map(|s| s.to_string()).collect();
        if !remote.is_empty() {
            args.push(remote.clone());
            args.extend(REFSPECS[r].iter().map(|s| s.to_string()));
        } else if !REFSPECS[r].is_empty() {
            continue; // refspecs need a remote before them
        }
        let mut cmd = clean(Command::new("git"), home);
        cmd.current_dir(&work);
        for kv in CONFIGS[c] {
            cmd.arg("-c").arg(kv);
        }
        cmd.args(["push", "--dry-run", "--porcelain"]).args(&args);
        let out = cmd.output().unwrap();
        let git = git_dsts(&String::from_utf8_lossy(&out.stdout));
        let loc = Locator {
            cwd: work.clone(),
            overrides: CONFIGS[c].iter().map(|s| s.to_string()).collect(),
            ..Locator::default()
        };
        let state = RepoState::open(&loc).unwrap();
        let describe = || {
            format!(
                "HEAD={} git -c {:?} push {}",
                HEADS[h],
                CONFIGS[c],
                args.join(" ")
            )
        };
        let plan = match push::resolve(&state, &args, &protected) {
            Ok(p) => p,
            Err(e) => {
                if !git.is_empty() {
                    failures.push(format!(
                        "{}: guard rejected the options ({e}) but git pushed {git:?}",
                        describe()
                    ));
                }
                continue;
            }
        };
        compared += 1;
        let ours: BTreeSet<String> = plan.updates().map(|(_, u)| u.dst.clone()).collect();
        let certain: BTreeSet<String> = plan
            .updates()
            .filter(|(_, u)| u.certain)
            .map(|(_, u)| u.dst.clone())
            .collect();
        let missing: Vec<&String> = git.difference(&ours).collect();
        if !missing.is_empty() {
            failures.push(format!(
                "{}: git updates {missing:?} the guard missed (guard: {ours:?})",
                describe()
            ));
        }
        // The worst-case assumptions for remotes whose refs cannot be read must cover every
        // protected ref git really updates.
        let blind =
            push::resolve_with(&state, &args, &protected, push::RemoteRefs::AssumeUnknown).unwrap();
        let blind: BTreeSet<String> = blind.updates().map(|(_, u)| u.dst.clone()).collect();
        let missing_blind: Vec<&String> = git
            .difference(&blind)
            .filter(|d| is_protected_dst(d, &protected))
            .collect();
        if !missing_blind.is_empty() {
            failures.push(format!(
                "{}: with the remote's refs unknown, the guard misses {missing_blind:?} (guard: {blind:?})",
                describe()
            ));
        }
        if out.status.success() {
            let extra: Vec<&String> = certain.difference(&git).collect();
            if extra.is_empty() {
                precise += 1;
            } else {
                failures.push(format!(
                    "{}: guard is certain of {extra:?} which git does not push (git: {git:?})",
                    describe()
                ));
            }
        } else if plan.git_fails.is_none()
            && certain.iter().any(|d| is_protected_dst(d, &protected))
            && git.is_empty()
        {
            // git failed for a reason the guard does not model; fine for the guard (it blocks)
        }
    }
    eprintln!("baseline: {compared} combinations compared, {precise} exactly as precise as git");
    assert!(compared > 300, "too few combinations compared: {compared}");
    assert!(
        failures.is_empty(),
        "{} mismatches with real git:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn is_protected_dst(d: &str, protected: &[String]) -> bool {
    tyba_git_guard::is_protected(d, protected)
}
