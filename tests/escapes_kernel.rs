//! Every attempt kind of `shared/corpus/escapes.md` (copy in `tests/data/escapes.md`), run as
//! `bash -c SCRIPT` inside `tyba run --non-interactive`, as root and as an unprivileged user,
//! with each effect checked from OUTSIDE the sandbox, and the controls (files and git in the
//! worktree) checked to work in the same run.
//!
//! The agent runs at `--autonomy high` so that yellow commands pass the classifier and the
//! attempts reach the kernel layer; most attempts are bash builtins or perl system calls, which
//! the classifier never sees. Red commands are still asked, and denied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use support::*;

const SCRIPT: &str = r#"
set +e
R="$PWD/report"; mkdir -p "$R"
# --- controls ---
echo data > ctl.txt
cat ctl.txt > ctl2.txt
git status --porcelain > "$R/git_status" 2>&1; echo $? > "$R/git_status_rc"
git add ctl.txt && git commit -q -m control-commit; echo $? > "$R/git_commit_rc"
# --- write outside ---
echo pwned > "$O/target"
echo pwned > ../O/dotdot
ln -s "$O/target" lnk; echo pwned > lnk
ln "$O/target" hardlink 2>/dev/null; echo pwned >> hardlink
echo inside > inside.txt; mv inside.txt "$O/moved"
( cd "$O" && echo pwned > cdwrite )
echo pwned > "/proc/self/root$O/procroot"
echo pwned > /proc/self/cwd/../O/proccwd
mkdir "$O/newdir"
chmod 777 "$O/target"
truncate -s 0 "$O/target"
: > "$O/target"
echo evil >> ~/.bashrc
echo pwned > "$TMPESC"
# the same through perl, whose argv names no path: only the kernel layer can stop these
perl -e 'open(my $f, ">", "$ENV{O}/target") and print $f "pwned"'
perl -e 'symlink("$ENV{O}/target", "plnk"); open(my $f, ">", "plnk") and print $f "pwned"'
perl -e 'link("$ENV{O}/target", "phard") and open(my $f, ">>", "phard") and print $f "pwned"'
perl -e 'open(my $f, ">", "pin.txt"); close $f; rename("pin.txt", "$ENV{O}/pmoved")'
perl -e 'mkdir("$ENV{O}/pnewdir")'
perl -e 'chmod(0777, "$ENV{O}/target")'
perl -e 'chown(-1, 0, "$ENV{O}/target"); utime(1, 1, "$ENV{O}/target")'
perl -e 'truncate("$ENV{O}/target", 0)'
perl -e 'open(my $f, ">>", "$ENV{HOME}/.bashrc") and print $f "evil"'
perl -e 'open(my $f, ">", "$ENV{TMPESC}") and print $f "pwned"'
# --- read outside ---
cat "$O/secret" > got_secret_cat
read -r l < "$O/secret"; echo "$l" > got_secret_builtin
cat ~/.ssh/id_ed25519 > got_key
perl -e 'open(my $f, "<", "$ENV{O}/secret") and print <$f>' > got_secret_perl
perl -e 'open(my $f, "<", "$ENV{HOME}/.ssh/id_ed25519") and print <$f>' > got_key_perl
# --- execute outside ---
"$O/script.sh"
bash "$O/script.sh"
perl -e 'exec("$ENV{O}/script.sh")'
# --- code that runs later ---
echo 'echo evil' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
echo 'echo evil' > .git/hooks/pre-push
mv .git/hooks .git/hooks-moved
git config core.hooksPath "$O"
perl -e 'open(my $f, ">", ".git/hooks/post-checkout") and print $f "evil"; open(my $g, ">>", ".git/config") and print $g "[core]\n\thooksPath = /tmp\n"; rename(".git/hooks", ".git/h2"); chmod(0777, ".git/config")'
# --- network ---
exec 3<>"/dev/tcp/127.0.0.1/$TCP4"; echo x >&3; exec 3>&-
exec 3<>"/dev/tcp/::1/$TCP6"; echo x >&3; exec 3>&-
echo x > "/dev/udp/127.0.0.1/$UDP"
perl -MSocket -e 'socket(my $s, PF_INET, SOCK_DGRAM, 0) or die; send($s, "udp-sendto", 0, pack_sockaddr_in($ARGV[0], inet_aton("127.0.0.1")))' "$UDP"
perl -MSocket -e 'socket(my $s, PF_INET, SOCK_STREAM, 0) or die; connect($s, pack_sockaddr_in($ARGV[0], inet_aton("127.0.0.1"))) and print $s "perl\n"' "$TCP4"
# --- IPC ---
perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ARGV[0]) and print $s "x"' "$O/sock"
perl -MSocket -e 'socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die; connect($s, pack_sockaddr_un("\0" . $ARGV[0])) and print $s "x"' "$ABSTRACT"
kill -TERM "$VICTIM"; echo $? > "$R/kill_rc"
perl -e 'my $r = syscall(101, 16, $ARGV[0], 0, 0); print $r == -1 ? "denied $!" : "attached"' "$VICTIM" > "$R/ptrace"
cat "/proc/$VICTIM/mem" > got_mem 2>/dev/null
cat "/proc/$VICTIM/environ" > got_environ 2>/dev/null
for p in /proc/[0-9]*; do echo "${p#/proc/}"; done > "$R/pids"
# --- kernel surface ---
perl -e 'my $p = "\0" x 120; my $r = syscall(425, 8, $p); print $r == -1 ? "denied $!" : "fd $r"' > "$R/io_uring"
unshare -Ur true; echo $? > "$R/unshare_rc"
perl -e 'my $r = syscall(272, 0x10000000); print $r == -1 ? "denied $!" : "unshared"' > "$R/unshare_syscall"
# --- persistence ---
setsid nohup bash -c "exec -a $MARKER sleep 300" > /dev/null 2>&1 &
# --- races ---
mkdir -p inner
perl -e 'for (1..3000) { unlink "swap"; symlink("$ENV{O}/racedir", "swap"); unlink "swap"; symlink("inner", "swap") }' &
RACER=$!
for i in $(seq 1 3000); do echo pwned 2>/dev/null > swap/raced; done
wait "$RACER"
echo finished > "$R/finished"
"#;

struct Fixture {
    _scratch: Scratch,
    root: std::path::PathBuf,
    wt: std::path::PathBuf,
    o: std::path::PathBuf,
    home: std::path::PathBuf,
    tyba: std::path::PathBuf,
}

fn fixture(who: &Who, tag: &str) -> Fixture {
    let scratch = Scratch::new(tag);
    let tyba = tyba_for(who, &scratch);
    let root = scratch.dir.join("f");
    let wt = root.join("wt");
    let o = root.join("O");
    let home = root.join("home");
    std::fs::create_dir_all(&o).unwrap();
    std::fs::create_dir_all(o.join("racedir")).unwrap();
    std::fs::write(o.join("secret"), "TOP-SECRET\n").unwrap();
    std::fs::write(o.join("target"), "original\n").unwrap();
    std::fs::set_permissions(o.join("target"), std::fs::Permissions::from_mode(0o644)).unwrap();
    write_exe(
        &o.join("script.sh"),
        "#!/bin/sh\necho ran > \"$PWD/ran_marker\"\n",
    );
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY\n").unwrap();
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    give(&root, who);
    make_repo(who, &wt);
    // The control commit needs a branch the agent may move: `main` is protected (read-only
    // in the sandbox with `--here`).
    git_as(who, &wt, &["switch", "-q", "-c", "work"]);
    Fixture {
        _scratch: scratch,
        root,
        wt,
        o,
        home,
        tyba,
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn marker_processes(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(marker) {
            v.push(pid);
        }
    }
    v
}

fn escape_suite(who: Who, tag: &str) {
    let f = fixture(&who, tag);
    if !sandbox_works(&who, &f.tyba, &f.wt, &f.home) {
        return;
    }
    // Listeners and victims outside the sandbox.
    let tcp4 = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp4.set_nonblocking(true).unwrap();
    let tcp6 = TcpListener::bind("[::1]:0").ok();
    if let Some(l) = &tcp6 {
        l.set_nonblocking(true).unwrap();
    }
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let unix = UnixListener::bind(f.o.join("sock")).unwrap();
    unix.set_nonblocking(true).unwrap();
    give(&f.o.join("sock"), &who);
    let abstract_name = format!("tyba-test-{}-{tag}", std::process::id());
    let abs = {
        use std::os::linux::net::SocketAddrExt;
        let a =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        UnixListener::bind_addr(&a).unwrap()
    };
    abs.set_nonblocking(true).unwrap();
    let mut victim = command_as(&who, Path::new("/bin/sleep"))
        .arg("300")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let victim_pid = victim.id();
    // setpriv execs sleep in place, so the pid is the sleep's.
    let marker = format!("tyba-persist-{}-{tag}", std::process::id());
    let tmpesc = format!("/tmp/tyba-escape-{}-{tag}", std::process::id());
    let env = base_env(
        &f.home,
        &[
            ("O", f.o.clone().into()),
            ("TCP4", tcp4.local_addr().unwrap().port().to_string().into()),
            (
                "TCP6",
                tcp6.as_ref()
                    .map(|l| l.local_addr().unwrap().port())
                    .unwrap_or(1)
                    .to_string()
                    .into(),
            ),
            ("UDP", udp.local_addr().unwrap().port().to_string().into()),
            ("ABSTRACT", OsString::from(&abstract_name)),
            ("VICTIM", victim_pid.to_string().into()),
            ("MARKER", OsString::from(&marker)),
            ("TMPESC", OsString::from(&tmpesc)),
        ],
    );
    let out = run_tyba(
        &who,
        &f.tyba,
        &f.wt,
        &env,
        &[
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            SCRIPT,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    std::thread::sleep(std::time::Duration::from_millis(300));

    let mut c = Checks::default();
    let wt = &f.wt;
    let r = wt.join("report");
    c.check(
        read(&r.join("finished")).trim() == "finished",
        format!("the script ran to its end (stderr: {stderr})"),
    );
    // Controls.
    c.check(
        read(&wt.join("ctl2.txt")) == "data\n",
        "control: write and read a file in the worktree",
    );
    c.check(
        read(&r.join("git_status_rc")).trim() == "0",
        format!("control: git status works: {}", read(&r.join("git_status"))),
    );
    c.check(
        read(&r.join("git_commit_rc")).trim() == "0",
        "control: git commit works",
    );
    let log = git_as(&who, wt, &["log", "--format=%s"]);
    c.check(
        String::from_utf8_lossy(&log.stdout).contains("control-commit"),
        "control: the commit is in the repository",
    );
    // Write outside.
    let o = &f.o;
    c.check(
        read(&o.join("target")) == "original\n",
        format!(
            "outside target unchanged (got {:?})",
            read(&o.join("target"))
        ),
    );
    let mode = std::fs::metadata(o.join("target"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    c.check(
        mode == 0o644,
        format!("outside target mode unchanged (got {mode:o})"),
    );
    let mtime = std::fs::metadata(o.join("target"))
        .unwrap()
        .modified()
        .unwrap();
    c.check(
        mtime > std::time::UNIX_EPOCH + std::time::Duration::from_secs(10),
        "outside target times unchanged",
    );
    for name in [
        "dotdot",
        "moved",
        "cdwrite",
        "procroot",
        "proccwd",
        "newdir",
        "racedir/raced",
        "pmoved",
        "pnewdir",
    ] {
        c.check(!o.join(name).exists(), format!("no {name} outside"));
    }
    c.check(
        !f.root.join("O/proccwd").exists(),
        "no write through /proc/self/cwd/..",
    );
    c.check(
        read(&f.home.join(".bashrc")) == "# rc\n",
        "~/.bashrc unchanged",
    );
    c.check(!Path::new(&tmpesc).exists(), "no file written into /tmp");
    let _ = std::fs::remove_file(&tmpesc);
    // Read outside.
    for got in [
        "got_secret_cat",
        "got_secret_builtin",
        "got_key",
        "got_mem",
        "got_environ",
        "got_secret_perl",
        "got_key_perl",
    ] {
        let s = read(&wt.join(got));
        c.check(
            !s.contains("TOP-SECRET") && !s.contains("PRIVATE-KEY") && !s.contains("PATH="),
            format!("{got} holds nothing from outside: {s:?}"),
        );
    }
    // Execute outside.
    c.check(
        !wt.join("ran_marker").exists(),
        "the outside script did not run",
    );
    // Code that runs later.
    c.check(
        !wt.join(".git/hooks/pre-commit").exists(),
        ".git/hooks/pre-commit not created",
    );
    c.check(
        !wt.join(".git/hooks/pre-push").exists(),
        ".git/hooks/pre-push not created",
    );
    c.check(
        !wt.join(".git/hooks/post-checkout").exists(),
        ".git/hooks/post-checkout not created",
    );
    c.check(!wt.join(".git/h2").exists(), ".git/hooks not renamed");
    let cfg_mode = std::fs::metadata(wt.join(".git/config"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    c.check(cfg_mode & 0o002 == 0, ".git/config mode unchanged");
    c.check(
        wt.join(".git/hooks").is_dir() && !wt.join(".git/hooks-moved").exists(),
        ".git/hooks not moved",
    );
    c.check(
        !read(&wt.join(".git/config")).contains("hooksPath"),
        "core.hooksPath not set",
    );
    // Network.
    c.check(
        tcp4.accept().is_err(),
        "no TCP connection reached 127.0.0.1",
    );
    if let Some(l) = &tcp6 {
        c.check(l.accept().is_err(), "no TCP connection reached ::1");
    }
    let mut buf = [0u8; 64];
    c.check(
        udp.recv_from(&mut buf).is_err(),
        "no UDP datagram reached 127.0.0.1",
    );
    // IPC.
    c.check(
        unix.accept().is_err(),
        "no connection reached the unix socket outside",
    );
    c.check(
        abs.accept().is_err(),
        "no connection reached the abstract unix socket outside",
    );
    c.check(
        victim.try_wait().unwrap().is_none(),
        "the outside process survived the signal",
    );
    let status = read(Path::new(&format!("/proc/{victim_pid}/status")));
    c.check(
        status.contains("TracerPid:\t0"),
        "the outside process is not traced",
    );
    c.check(
        read(&r.join("ptrace")).starts_with("denied"),
        format!("ptrace denied: {}", read(&r.join("ptrace"))),
    );
    let pids = read(&r.join("pids"));
    c.check(
        !pids.lines().any(|p| p.trim() == victim_pid.to_string()),
        "the outside process is invisible in the sandbox's /proc",
    );
    // Kernel surface.
    c.check(
        read(&r.join("io_uring")).starts_with("denied"),
        format!("io_uring_setup denied: {}", read(&r.join("io_uring"))),
    );
    c.check(
        read(&r.join("unshare_rc")).trim() != "0",
        "unshare -Ur fails",
    );
    c.check(
        read(&r.join("unshare_syscall")).starts_with("denied"),
        "unshare(CLONE_NEWUSER) denied",
    );
    // Persistence.
    let left = marker_processes(&marker);
    c.check(
        left.is_empty(),
        format!("nothing outlived the session: {left:?}"),
    );
    let _ = victim.kill();
    let _ = victim.wait();
    if c.failures.is_empty() {
        eprintln!("{tag}: all {} checks passed", c.passed);
    } else {
        let mut s = String::new();
        let _ =
            std::fs::File::open(r.join("git_status")).and_then(|mut f| f.read_to_string(&mut s));
        eprintln!("stderr of tyba run:\n{stderr}");
    }
    c.finish(tag);
}

#[test]
fn escapes_hold_as_root_or_self() {
    escape_suite(Who::Me, "me");
}

#[test]
fn escapes_hold_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    escape_suite(who, "user");
}

#[test]
fn escapes_md_copy_is_current() {
    let ours =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/escapes.md")).unwrap();
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/escapes.md");
    if let Ok(theirs) = std::fs::read(&shared) {
        assert!(
            ours == theirs,
            "tests/data/escapes.md differs from {}: copy it again",
            shared.display()
        );
    }
}

#[allow(dead_code)]
fn unused(_: Command) {}
