//! Issue 13, class 9: the toolchain caches the person's next build trusts. Each session writes
//! them through a private layer (an overlay in the sandbox's mount namespace,
//! `supervisor/src/caches.rs`): inside, a `build.rs` planted in an extracted crate, a package
//! added to npm's `_cacache`, a `.pth` in pip's cache, a changed, removed or renamed file all
//! succeed and stay visible to the session's later commands; outside, the person's caches are
//! byte for byte as they were, and the layer is gone after the session. Attempted as root and
//! as the unprivileged `TYBA_TEST_USER`, each with a control: the same script run without the
//! sandbox changes the caches (so the checks can fail). A cache that cannot get a layer is
//! read-only, never writable as it is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

const CRATE: &str = ".cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tybatest-1.0.0";
const NPM: &str = ".npm/_cacache";
const PIP: &str = ".cache/pip";

/// Makes the person's caches in `home`: an extracted crate, npm's content cache, pip's cache,
/// a git checkout of cargo's.
fn make_caches(home: &Path) {
    let w = |rel: &str, text: &str| {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(
        &format!("{CRATE}/Cargo.toml"),
        "[package]\nname = \"tybatest\"\nversion = \"1.0.0\"\n",
    );
    w(&format!("{CRATE}/src/lib.rs"), "pub fn f() {}\n");
    w(
        &format!("{NPM}/index-v5/3f/a1/0123456789abcdef"),
        "{\"key\":\"make-fetch-happen:request-cache:https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz\"}\n",
    );
    w(
        &format!("{NPM}/content-v2/sha512/aa/bb/ccddeeff"),
        "TARBALL-BYTES\n",
    );
    w(&format!("{PIP}/http-v2/a/b/c/entry"), "WHEEL-BYTES\n");
    w(
        ".npm/_logs/2026-01-01T00_00_00_000Z-debug-0.log",
        "0 verbose cli\n",
    );
    w(
        ".cargo/git/checkouts/dep-1234/abcdef/build.rs",
        "fn main() {}\n",
    );
}

/// Every entry under `root`: relative path → kind, mode, modification time and contents (or
/// link target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode();
            let mtime = std::os::unix::fs::MetadataExt::mtime_nsec(&m)
                + 1_000_000_000 * std::os::unix::fs::MetadataExt::mtime(&m);
            let what = if m.is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).unwrap())
            } else if m.is_dir() {
                todo.push(p.clone());
                format!("dir {mode:o} {mtime}")
            } else {
                format!(
                    "file {mode:o} {mtime} {:?}",
                    std::fs::read(&p).unwrap_or_default()
                )
            };
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), what);
        }
    }
    out
}

/// The writes a hostile agent makes to the caches, each recorded as `ok` or the error; then a
/// separate process of the same session reads back what the first wrote.
const CACHE_SCRIPT: &str = r#"
set +e
R="$PWD/report"; mkdir -p "$R"
C="$HOME/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tybatest-1.0.0"
try() { local name="$1"; shift; if "$@" 2> "$R/$name.err"; then echo ok > "$R/$name"; else echo "failed: $(cat "$R/$name.err")" > "$R/$name"; fi; }
try build_rs sh -c 'printf "fn main() { std::process::Command::new(\"touch\").arg(\"/tmp/pwned\"); }\n" > "$0/build.rs"' "$C"
try lib_rs sh -c 'echo "// AGENT" >> "$0/src/lib.rs"' "$C"
try rm_toml rm "$C/Cargo.toml"
try new_crate sh -c 'mkdir -p "$0/../evil-0.1.0/src" && echo "fn main() {}" > "$0/../evil-0.1.0/build.rs"' "$C"
try npm_plant sh -c 'echo EVIL-TARBALL > "$HOME/.npm/_cacache/content-v2/sha512/aa/bb/planted"'
try npm_modify sh -c 'echo EVIL > "$HOME/.npm/_cacache/content-v2/sha512/aa/bb/ccddeeff"'
try npm_rename mv "$HOME/.npm/_cacache/index-v5/3f" "$HOME/.npm/_cacache/index-v5/40"
try npm_log sh -c 'echo "0 verbose cli" > "$HOME/.npm/_logs/2026-12-01T00_00_00_000Z-debug-0.log"'
try pip_pth sh -c 'echo "import os" > "$HOME/.cache/pip/evil.pth"'
try pip_link ln -s entry "$HOME/.cache/pip/http-v2/a/b/c/link"
try chmod_x chmod 0755 "$C/src/lib.rs"
try utimes touch -d 2001-02-03 "$HOME/.npm/_cacache/index-v5/40/a1/0123456789abcdef"
try git_build sh -c 'echo "fn main() { evil() }" > "$HOME/.cargo/git/checkouts/dep-1234/abcdef/build.rs"'
# Later commands of the same session see what the first wrote.
bash -c 'cat "$0/build.rs"' "$C" > "$R/seen_build_rs" 2>&1
bash -c 'cat "$HOME/.npm/_cacache/content-v2/sha512/aa/bb/planted"' > "$R/seen_npm" 2>&1
bash -c 'ls "$HOME/.npm/_cacache/index-v5"' > "$R/seen_rename" 2>&1
echo finished > "$R/finished"
"#;

/// The writes that must have succeeded (in the session: through its layer).
const WRITES: &[&str] = &[
    "build_rs",
    "lib_rs",
    "rm_toml",
    "new_crate",
    "npm_plant",
    "npm_modify",
    "npm_rename",
    "npm_log",
    "pip_pth",
    "pip_link",
    "chmod_x",
    "utimes",
    "git_build",
];

/// `tyba run --here --non-interactive --autonomy high [--policy P] -- bash -c SCRIPT`.
fn tyba_bash(
    r: &SandboxRepo,
    who: &Who,
    env: &[(OsString, OsString)],
    policy: Option<&Path>,
    script: &str,
) -> String {
    let mut args: Vec<String> = ["run", "--here", "--non-interactive", "--autonomy", "high"]
        .map(String::from)
        .to_vec();
    if let Some(p) = policy {
        args.push("--policy".into());
        args.push(p.display().to_string());
    }
    args.extend(["--", "bash", "-c", script].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_tyba(who, &r.tyba, &r.wt, env, &args);
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The session layers left in the state directory (none once sessions ended).
fn layers_left(home: &Path) -> Vec<String> {
    std::fs::read_dir(home.join(".local/state/tyba/caches"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "registry.lock")
                .collect()
        })
        .unwrap_or_default()
}

/// [`layers_left`] once they are gone, or when `limit` has passed.
fn layers_left_after(home: &Path, limit: std::time::Duration) -> Vec<String> {
    let start = std::time::Instant::now();
    loop {
        let left = layers_left(home);
        if left.is_empty() || start.elapsed() > limit {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn caches_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();

    // Control: without the sandbox every write reaches the person's caches.
    let ctl_home = r.root.join("control-home");
    make_caches(&ctl_home);
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl_home, &who);
    give(&ctl, &who);
    let before_ctl = snapshot(&ctl_home);
    bare_bash_as(&who, &ctl, &base_env(&ctl_home, &[]), CACHE_SCRIPT);
    for w in WRITES {
        let got = read(&ctl.join("report").join(w));
        c.check(
            got.trim() == "ok",
            format!("control: without the sandbox {w} succeeds: {got}"),
        );
    }
    c.check(
        ctl_home.join(CRATE).join("build.rs").exists() && snapshot(&ctl_home) != before_ctl,
        "control: without the sandbox the person's caches change",
    );

    // In the sandbox.
    make_caches(&r.home);
    give(&r.home, &who);
    let before = snapshot(&r.home);
    let env = base_env(&r.home, &[]);
    let err = tyba_bash(&r, &who, &env, None, CACHE_SCRIPT);
    let rep = r.wt.join("report");
    c.check(
        read(&rep.join("finished")).trim() == "finished",
        format!("the script ran to its end: {err}"),
    );
    for w in WRITES {
        let got = read(&rep.join(w));
        c.check(
            got.trim() == "ok",
            format!("in the session {w} succeeds (through its layer): {got} / {err}"),
        );
    }
    c.check(
        read(&rep.join("seen_build_rs")).contains("pwned"),
        format!(
            "a later command of the session reads the planted build.rs: {}",
            read(&rep.join("seen_build_rs"))
        ),
    );
    c.check(
        read(&rep.join("seen_npm")).trim() == "EVIL-TARBALL",
        format!(
            "a later command of the session reads the planted package: {}",
            read(&rep.join("seen_npm"))
        ),
    );
    c.check(
        read(&rep.join("seen_rename")).trim() == "40",
        format!(
            "a later command of the session sees the rename: {}",
            read(&rep.join("seen_rename"))
        ),
    );
    let after = snapshot(&r.home);
    let changed: Vec<String> = before
        .iter()
        // tyba's own state directory (logs, sockets) is not a cache.
        .filter(|(p, v)| !p.starts_with(".local") && after.get(*p) != Some(*v))
        .map(|(p, _)| format!("{} changed or gone", p.display()))
        .chain(
            after
                .keys()
                .filter(|p| !before.contains_key(*p) && !p.starts_with(".local"))
                .map(|p| format!("{} added", p.display())),
        )
        .collect();
    c.check(
        changed.is_empty(),
        format!("the person's caches are unchanged after the session: {changed:?}"),
    );
    c.check(
        !r.home.join(CRATE).join("build.rs").exists(),
        "no build.rs in the person's extracted crate",
    );
    c.check(
        err.contains("private layer"),
        format!("the start-up report says the caches are layered: {err}"),
    );
    // Removed by a process of its own once `tyba run` has exited (`CacheLayers::remove_detached`).
    let left = layers_left_after(&r.home, std::time::Duration::from_secs(10));
    c.check(
        left.is_empty(),
        format!("the session's layer is removed after its end: {left:?}"),
    );
    // A second session starts from the person's caches again, not from the first's layer.
    let _ = std::fs::remove_dir_all(&rep);
    let err2 = tyba_bash(
        &r,
        &who,
        &env,
        None,
        r#"mkdir -p report; C="$HOME/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tybatest-1.0.0"; if [ -e "$C/build.rs" ]; then echo present; else echo absent; fi > report/again"#,
    );
    c.check(
        read(&rep.join("again")).trim() == "absent",
        format!(
            "the next session does not see the last one's writes: {} / {err2}",
            read(&rep.join("again"))
        ),
    );
    c.finish(tag);
}

#[test]
fn the_toolchain_caches_are_written_through_a_private_layer_as_root_or_self() {
    caches_suite(Who::Me, "caches-me");
}

#[test]
fn the_toolchain_caches_are_written_through_a_private_layer_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    caches_suite(who, "caches-user");
}

/// A cache that cannot get a private layer is read-only in the session, never writable as it
/// is: one whose path an overlay's options cannot carry (a `,`), refused when the plan is
/// made, and one too long for the options page (`mount(2)` takes one page), refused by stage
/// 2 just before mounting. Writes to them fail inside, and the control shows they succeed
/// without the sandbox.
fn fail_closed_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let mut c = Checks::default();
    let odd = r.home.join("odd,cache");
    // Nested 200-byte names: a cache path of about 3,900 bytes (below PATH_MAX).
    let mut long = r.home.join("long");
    while long.as_os_str().len() + 201 < 3900 {
        long.push("d".repeat(200));
    }
    for d in [&odd, &long] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("existing"), "PERSONS\n").unwrap();
    }
    let policy = r.root.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[filesystem]\nread_write = [{:?}, {:?}]\n",
            odd.display().to_string(),
            long.display().to_string()
        ),
    )
    .unwrap();
    give(&r.root, &who);
    let script = r#"
R="$PWD/report"; mkdir -p "$R"
for d in "$ODD" "$LONG"; do
  n=$(basename "$(dirname "$d/x")" | cut -c1-4)
  if echo AGENT > "$d/planted" 2>/dev/null; then echo ok; else echo denied; fi > "$R/plant-$n"
  if echo AGENT >> "$d/existing" 2>/dev/null; then echo ok; else echo denied; fi > "$R/modify-$n"
  if cat "$d/existing" > /dev/null 2>&1; then echo ok; else echo denied; fi > "$R/read-$n"
done
echo finished > "$R/finished"
"#;
    let env = base_env(
        &r.home,
        &[
            ("ODD", odd.clone().into_os_string()),
            ("LONG", long.clone().into_os_string()),
        ],
    );
    // Control: without the sandbox both are writable.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    bare_bash_as(&who, &ctl, &env, script);
    for n in ["odd,", "dddd"] {
        c.check(
            read(&ctl.join(format!("report/plant-{n}"))).trim() == "ok",
            format!("control: without the sandbox {n} is writable"),
        );
    }
    for d in [&odd, &long] {
        let _ = std::fs::remove_file(d.join("planted"));
        std::fs::write(d.join("existing"), "PERSONS\n").unwrap();
    }
    give(&r.root, &who);
    let err = tyba_bash(&r, &who, &env, Some(&policy), script);
    let rep = r.wt.join("report");
    c.check(
        read(&rep.join("finished")).trim() == "finished",
        format!("the script ran: {err}"),
    );
    for n in ["odd,", "dddd"] {
        for w in ["plant", "modify"] {
            let got = read(&rep.join(format!("{w}-{n}")));
            c.check(
                got.trim() == "denied",
                format!("{w} in the cache {n} without a layer is denied: {got} / {err}"),
            );
        }
        let got = read(&rep.join(format!("read-{n}")));
        c.check(
            got.trim() == "ok",
            format!("the cache {n} stays readable: {got}"),
        );
    }
    for d in [&odd, &long] {
        c.check(
            !d.join("planted").exists() && read(&d.join("existing")) == "PERSONS\n",
            format!("{} is unchanged", d.display()),
        );
    }
    c.check(
        err.contains("which an overlay cannot name")
            && err.contains("is read-only for this session"),
        format!("the start-up report says which caches are read-only and why: {err}"),
    );
    c.finish(tag);
}

#[test]
fn a_cache_without_a_private_layer_is_read_only_as_root_or_self() {
    fail_closed_suite(Who::Me, "cclosed-me");
}

#[test]
fn a_cache_without_a_private_layer_is_read_only_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    fail_closed_suite(who, "cclosed-user");
}
