//! The fault classes of the second review of the kernel layer (issue 13), each attempted from
//! inside `tyba run --here --non-interactive --autonomy high` as root and as the unprivileged
//! `TYBA_TEST_USER`, with the effect checked from outside the sandbox, and each with a
//! control: the same attempt run as the same user without the sandbox, which must succeed
//! (so the check can fail).
//!
//! - IPC, UTS and cgroup namespaces: SysV shared memory and message queues of outside
//!   processes unreachable; SysV and POSIX objects made inside gone with the session.
//! - Terminals: the host's ptys unreachable (not listed, not openable); the agent's own pty
//!   is in a private devpts instance, sized like the person's terminal, relayed both ways.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Runs `perl -e CODE ARGS…` as `who` outside any sandbox; returns stdout.
fn perl_as(who: &Who, code: &str, args: &[&str]) -> String {
    let o = command_as(who, Path::new("/usr/bin/perl"))
        .arg("-e")
        .arg(code)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `tyba run --here --non-interactive --autonomy high -- bash -c SCRIPT` in the worktree.
fn tyba_bash(r: &SandboxRepo, who: &Who, env: &[(OsString, OsString)], script: &str) -> String {
    let o = run_tyba(
        who,
        &r.tyba,
        &r.wt,
        env,
        &[
            "run",
            "--here",
            "--non-interactive",
            "--autonomy",
            "high",
            "--",
            "bash",
            "-c",
            script,
        ],
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn unique(tag: &str) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    (std::process::id() ^ nanos ^ tag.bytes().map(u32::from).sum::<u32>()) & 0x00ff_fff0
}

// ---------------------------------------------------------------- IPC, UTS, cgroup ----

/// The attempts on SysV and POSIX IPC: read and write an outside shared memory segment (by
/// key and by id), send to an outside message queue, and leave objects of its own behind.
const IPC_SCRIPT: &str = r#"
set +e
R="$PWD/report"; mkdir -p "$R"
perl -e '$id = shmget($ENV{K_SHM}, 0, 0); if (defined $id) { shmread($id, $v, 0, 15) and print $v } else { print "denied $!" }' > "$R/shm_by_key"
perl -e 'if (shmread($ENV{SHM_ID}, $v, 0, 15)) { print $v } else { print "denied $!" }' > "$R/shm_by_id"
perl -e 'shmwrite($ENV{SHM_ID}, "AGENT-WROTE-SHM", 0, 15)'
perl -e '$id = shmget($ENV{K_SHM}, 0, 0); defined $id and shmwrite($id, "AGENT-WROTE-SHM", 0, 15)'
perl -e 'msgsnd($ENV{MSG_ID}, pack("l! a*", 1, "AGENT-MSG"), 2048)'
perl -e '$id = msgget($ENV{K_MSG}, 0); defined $id and msgsnd($id, pack("l! a*", 1, "AGENT-MSG"), 2048)'
# objects of its own, which must not outlive the session
perl -e 'shmget($ENV{K_OWN_SHM}, 4096, 01600)'
perl -e 'msgget($ENV{K_OWN_MSG}, 01600)'
perl -e 'syscall(240, $ENV{MQ_NAME}, 0100 | 02, 0600, 0)'
# UTS and cgroup: the sandbox's own view
perl -e 'syscall(170, "tyba-agent-host", 15)'
uname -n > "$R/uname"
while read -r l; do echo "$l"; done < /proc/self/cgroup > "$R/cgroup"
echo finished > "$R/finished"
"#;

fn ipc_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let base = unique(tag);
    let k = |n: u32| (0x7b00_0000 | base | n).to_string();
    let (k_shm, k_msg, k_own_shm, k_own_msg) = (k(1), k(2), k(3), k(4));
    let mq_name = format!("tyba-test-mq-{base}");
    // Outside: a segment holding a secret and a message queue, both the user's own.
    let shm_id = perl_as(
        &who,
        r#"$id = shmget($ARGV[0], 4096, 01600) // die "shmget $!"; shmwrite($id, "HOST-SHM-SECRET", 0, 15) or die; print $id"#,
        &[&k_shm],
    );
    let msg_id = perl_as(
        &who,
        r#"$id = msgget($ARGV[0], 01600) // die "msgget $!"; print $id"#,
        &[&k_msg],
    );
    assert!(
        !shm_id.is_empty() && !msg_id.is_empty(),
        "outside IPC set up"
    );
    let shm_now = |id: &str| perl_as(&who, r#"shmread($ARGV[0], $v, 0, 15) and print $v"#, &[id]);
    let msg_take = |id: &str| {
        perl_as(
            &who,
            r#"msgrcv($ARGV[0], $m, 256, 0, 2048) and print substr($m, length(pack("l!", 0)))"#,
            &[id],
        )
    };
    let exists_shm = |key: &str| {
        perl_as(
            &who,
            r#"$id = shmget($ARGV[0], 0, 0); print defined $id ? $id : """#,
            &[key],
        )
    };
    let exists_msg = |key: &str| {
        perl_as(
            &who,
            r#"$id = msgget($ARGV[0], 0); print defined $id ? $id : """#,
            &[key],
        )
    };
    let mq_exists = || {
        perl_as(
            &who,
            r#"$r = syscall(240, $ARGV[0], 02, 0, 0); print $r >= 0 ? "exists" : "none"; syscall(241, $ARGV[0]) if $r >= 0"#,
            &[&mq_name],
        ) == "exists"
    };
    let remove_own = || {
        let id = exists_shm(&k_own_shm);
        if !id.is_empty() {
            perl_as(&who, "shmctl($ARGV[0], 0, 0)", &[&id]);
        }
        let id = exists_msg(&k_own_msg);
        if !id.is_empty() {
            perl_as(&who, "msgctl($ARGV[0], 0, 0)", &[&id]);
        }
    };
    let env = base_env(
        &r.home,
        &[
            ("K_SHM", k_shm.clone().into()),
            ("K_MSG", k_msg.clone().into()),
            ("SHM_ID", shm_id.clone().into()),
            ("MSG_ID", msg_id.clone().into()),
            ("K_OWN_SHM", k_own_shm.clone().into()),
            ("K_OWN_MSG", k_own_msg.clone().into()),
            ("MQ_NAME", mq_name.clone().into()),
        ],
    );
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let outside_cgroup = read(Path::new("/proc/self/cgroup"));

    // Control: the same attempts without the sandbox reach the outside objects and leave
    // their own behind.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    bare_bash_as(&who, &ctl, &env, IPC_SCRIPT);
    let mut c = Checks::default();
    let cr = ctl.join("report");
    c.check(
        read(&cr.join("shm_by_key")) == "HOST-SHM-SECRET",
        format!(
            "control: without the sandbox the outside segment is read by key ({:?})",
            read(&cr.join("shm_by_key"))
        ),
    );
    c.check(
        read(&cr.join("shm_by_id")) == "HOST-SHM-SECRET",
        "control: without the sandbox the outside segment is read by id",
    );
    c.check(
        shm_now(&shm_id) == "AGENT-WROTE-SHM",
        "control: without the sandbox the outside segment is written",
    );
    c.check(
        msg_take(&msg_id) == "AGENT-MSG",
        "control: without the sandbox a message reaches the outside queue",
    );
    let _ = msg_take(&msg_id);
    c.check(
        !exists_shm(&k_own_shm).is_empty() && !exists_msg(&k_own_msg).is_empty(),
        "control: without the sandbox the script's own SysV objects outlive it",
    );
    c.check(
        mq_exists(),
        "control: without the sandbox its POSIX queue outlives it",
    );
    remove_own();
    perl_as(
        &who,
        r#"shmwrite($ARGV[0], "HOST-SHM-SECRET", 0, 15)"#,
        &[&shm_id],
    );

    // In the sandbox.
    let stderr = tyba_bash(&r, &who, &env, IPC_SCRIPT);
    let rr = r.wt.join("report");
    c.check(
        read(&rr.join("finished")).trim() == "finished",
        format!("the script ran to its end: {stderr}"),
    );
    for f in ["shm_by_key", "shm_by_id"] {
        let got = read(&rr.join(f));
        c.check(
            !got.contains("HOST-SHM-SECRET") && got.starts_with("denied"),
            format!("{f}: the outside segment is not readable from the sandbox ({got:?})"),
        );
    }
    c.check(
        shm_now(&shm_id) == "HOST-SHM-SECRET",
        "the outside segment is unchanged",
    );
    c.check(
        msg_take(&msg_id).is_empty(),
        "no message reached the outside queue",
    );
    let own_shm = exists_shm(&k_own_shm);
    let own_msg = exists_msg(&k_own_msg);
    c.check(
        own_shm.is_empty(),
        "the sandbox's shared memory segment is gone with it",
    );
    c.check(
        own_msg.is_empty(),
        "the sandbox's message queue is gone with it",
    );
    c.check(
        !mq_exists(),
        "the sandbox's POSIX message queue is gone with it",
    );
    remove_own();
    c.check(
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap() == host_name,
        "the host name is unchanged",
    );
    let cg = read(&rr.join("cgroup"));
    c.check(
        !cg.is_empty() && cg.lines().all(|l| l.ends_with(":/")),
        format!("the sandbox sees its own cgroup as the root: {cg:?}"),
    );
    if outside_cgroup.lines().all(|l| l.ends_with(":/")) {
        eprintln!(
            "note: this process's cgroup is the root already; the cgroup check cannot fail here"
        );
    }
    perl_as(&who, "shmctl($ARGV[0], 0, 0)", &[&shm_id]);
    perl_as(&who, "msgctl($ARGV[0], 0, 0)", &[&msg_id]);
    c.finish(tag);
}

#[test]
fn ipc_of_outside_processes_is_unreachable_and_nothing_outlives_the_session_as_root_or_self() {
    ipc_suite(Who::Me, "ipc-me");
}

#[test]
fn ipc_of_outside_processes_is_unreachable_and_nothing_outlives_the_session_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    ipc_suite(who, "ipc-user");
}

// ------------------------------------------------------------------------ terminals ----

/// Attempts on another terminal of the host, named by `$HOST_PTS`: list, open, write, read,
/// resize.
const PTS_SCRIPT: &str = r#"
set +e
R="$PWD/report"; mkdir -p "$R"
for p in /dev/pts/*; do echo "$p"; done > "$R/pts_list"
echo INJECTED-BY-ECHO > "$HOST_PTS"
perl -e 'if (open(my $f, ">", $ENV{HOST_PTS})) { print $f "INJECTED-BY-PERL\n"; print "opened" } else { print "denied $!" }' > "$R/pts_write"
perl -e 'sysopen(my $f, $ENV{HOST_PTS}, 2 | 0400) or exit; my $w = pack("S4", 3, 3, 0, 0); ioctl($f, 0x5414, $w) and print "resized"' > "$R/pts_resize"
perl -e 'opendir(my $d, "/dev/pts") or exit; print join("\n", readdir $d)' > "$R/pts_readdir"
echo finished > "$R/finished"
"#;

fn winsize_of(path: &str) -> String {
    let o = Command::new("stty")
        .arg("-F")
        .arg(path)
        .arg("size")
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Everything readable on the master now (non-blocking), as text.
fn drain(master: &std::os::fd::OwnedFd) -> String {
    use std::os::fd::AsFd;
    let flags = nix::fcntl::fcntl(master.as_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
    let _ = nix::fcntl::fcntl(
        master.as_fd(),
        nix::fcntl::FcntlArg::F_SETFL(
            nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK,
        ),
    );
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = nix::unistd::read(master.as_fd(), &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn host_pts_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    // A terminal of the person's: a pty of the host, owned by the user.
    let ws = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&ws), None).unwrap();
    let name = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&pty.slave)
    ))
    .unwrap();
    let name = name.to_string_lossy().into_owned();
    if let Who::User { uid, gid, .. } = &who {
        let _ = Command::new("chown")
            .arg(format!("{uid}:{gid}"))
            .arg(&name)
            .status();
    }
    let env = base_env(&r.home, &[("HOST_PTS", name.clone().into())]);

    // Control: without the sandbox the same attempts reach the terminal.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    bare_bash_as(&who, &ctl, &env, PTS_SCRIPT);
    let mut c = Checks::default();
    let seen = drain(&pty.master);
    c.check(
        seen.contains("INJECTED-BY-ECHO") && seen.contains("INJECTED-BY-PERL"),
        format!("control: without the sandbox the host terminal is written ({seen:?})"),
    );
    c.check(
        winsize_of(&name) == "3 3",
        "control: without the sandbox the host terminal is resized",
    );
    c.check(
        read(&ctl.join("report/pts_list")).contains(&name),
        "control: without the sandbox the host terminal is listed",
    );
    Command::new("stty")
        .args(["-F", &name, "rows", "24", "cols", "80"])
        .status()
        .unwrap();

    let stderr = tyba_bash(&r, &who, &env, PTS_SCRIPT);
    let rr = r.wt.join("report");
    c.check(
        read(&rr.join("finished")).trim() == "finished",
        format!("the script ran to its end: {stderr}"),
    );
    let seen = drain(&pty.master);
    c.check(
        !seen.contains("INJECTED"),
        format!("nothing was written on the host terminal ({seen:?})"),
    );
    c.check(
        read(&rr.join("pts_write")).starts_with("denied"),
        format!(
            "the host terminal cannot be opened ({:?})",
            read(&rr.join("pts_write"))
        ),
    );
    c.check(
        winsize_of(&name) == "24 80",
        "the host terminal's size is unchanged",
    );
    let list = read(&rr.join("pts_list"));
    c.check(
        list.lines().all(|l| l == "/dev/pts/ptmx"),
        format!("no terminal of the host is listed in the sandbox: {list:?}"),
    );
    c.finish(tag);
}

#[test]
fn host_terminals_are_unreachable_as_root_or_self() {
    host_pts_suite(Who::Me, "pts-me");
}

#[test]
fn host_terminals_are_unreachable_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    host_pts_suite(who, "pts-user");
}

/// The agent's own terminal: its name, size, device (the devpts instance), input and output.
const OWN_TTY_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
tty > "$R/tty"
stty size > "$R/size"
perl -e '@s = stat(STDIN); print $s[0]' > "$R/dev"
echo READY-FOR-INPUT
read -r line
echo "$line" > "$R/typed"
echo RELAY-OUT-OK
"#;

/// Runs `program args` as `who` in `dir` on a pty of the test's, sized 37×111, types a line
/// once `READY-FOR-INPUT` shows; returns everything the terminal showed.
fn on_test_pty(
    who: &Who,
    program: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(OsString, OsString)],
) -> String {
    let ws = nix::pty::Winsize {
        ws_row: 37,
        ws_col: 111,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&ws), None).unwrap();
    let mut c = command_as(who, program);
    c.args(args).current_dir(dir).env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut typed = false;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(b) => seen.extend(b),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(_) => {}
        }
        if !typed && String::from_utf8_lossy(&seen).contains("READY-FOR-INPUT") {
            master.write_all(b"typed-by-the-person\r").unwrap();
            typed = true;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        if child.try_wait().unwrap().is_some() {
            // Collect what is still buffered, then stop.
            while let Ok(b) = rx.recv_timeout(std::time::Duration::from_millis(300)) {
                seen.extend(b);
            }
            break;
        }
    }
    let _ = child.wait();
    String::from_utf8_lossy(&seen).into_owned()
}

fn own_tty_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let host_dev = std::fs::metadata("/dev/pts").unwrap().dev();
    let env = base_env(&r.home, &[("TERM", "xterm".into())]);
    let mut c = Checks::default();

    // Control: without the sandbox the terminal is the host's devpts.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    let shown = on_test_pty(
        &who,
        Path::new("/bin/bash"),
        &["-c", OWN_TTY_SCRIPT],
        &ctl,
        &env,
    );
    let cr = ctl.join("report");
    c.check(
        read(&cr.join("dev")).trim() == host_dev.to_string(),
        format!(
            "control: without the sandbox the terminal is in the host's devpts ({:?} vs {host_dev}; {shown:?})",
            read(&cr.join("dev"))
        ),
    );
    c.check(
        read(&cr.join("typed")).trim() == "typed-by-the-person",
        "control: the typed line reaches the script",
    );

    let args = [
        "run",
        "--here",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        OWN_TTY_SCRIPT,
    ];
    let shown = on_test_pty(&who, &r.tyba, &args, &r.wt, &env);
    let rr = r.wt.join("report");
    let dev = read(&rr.join("dev"));
    c.check(
        !dev.trim().is_empty() && dev.trim() != host_dev.to_string(),
        format!("the agent's terminal is not in the host's devpts ({dev:?} vs {host_dev}; shown {shown:?})"),
    );
    c.check(
        read(&rr.join("tty")).trim().starts_with("/dev/pts/"),
        format!("tty names the agent's pty ({:?})", read(&rr.join("tty"))),
    );
    c.check(
        read(&rr.join("size")).trim() == "37 111",
        format!(
            "the agent's terminal has the person's size ({:?})",
            read(&rr.join("size"))
        ),
    );
    c.check(
        read(&rr.join("typed")).trim() == "typed-by-the-person",
        format!(
            "what the person types reaches the agent ({:?})",
            read(&rr.join("typed"))
        ),
    );
    c.check(
        shown.contains("RELAY-OUT-OK"),
        format!("the agent's output reaches the person's terminal ({shown:?})"),
    );
    c.finish(tag);
}

#[test]
fn the_agents_terminal_is_its_own_pty_as_root_or_self() {
    own_tty_suite(Who::Me, "tty-me");
}

#[test]
fn the_agents_terminal_is_its_own_pty_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    own_tty_suite(who, "tty-user");
}

// ----------------------------------------------------------------------- watches ----

/// Starts `tyba run --here --non-interactive --autonomy high -- bash -c SCRIPT` as `who`
/// without waiting for it.
fn spawn_tyba_bash(
    r: &SandboxRepo,
    who: &Who,
    env: &[(OsString, OsString)],
    script: &str,
) -> std::process::Child {
    let mut c = command_as(who, &r.tyba);
    c.args([
        "run",
        "--here",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        script,
    ])
    .current_dir(&r.wt)
    .env_clear()
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// Waits until `p` holds something (at most `secs`); returns it.
fn wait_for(p: &Path, secs: u64) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let s = read(p);
        if !s.is_empty() || std::time::Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits for `child` at most `secs`, killing it past that; returns its stderr.
fn finish(mut child: std::process::Child, secs: u64) -> (Option<std::process::ExitStatus>, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    (status, err)
}

/// Watches `$WATCHED` for created files, writes `watching` (or `denied ERR`) to
/// `$R/watch_state`, then the first name reported (10 s at most) to `$R/watch_name`; the same
/// on a directory of the worktree, where the script makes the file itself; and fanotify.
const WATCH_SCRIPT: &str = r#"
set +e
R="$PWD/report"; mkdir -p "$R" inner
perl -e 'my $r = syscall(300, 0x200, 0); print $r < 0 ? "denied $!" : "fd $r"' > "$R/fanotify"
cat > watch.pl <<'PL'
my ($dir, $state, $out, $make) = @ARGV;
# The outside path comes from the environment: only the kernel layer sees it.
$dir = $ENV{WATCHED} if $dir eq "from-env";
my $fd = syscall(294, 0);
my $wd = syscall(254, $fd, $dir, 0x100);
my $err = "$!";
open(my $s, ">", $state);
if ($wd < 0) { print $s "denied $err"; close $s; exit }
print $s "watching"; close $s;
if ($make) { open(my $m, ">", "$dir/$make"); close $m }
open(my $f, "<&=", $fd) or die;
local $SIG{ALRM} = sub { exit };
alarm 10;
sysread($f, my $buf, 4096) or exit;
my ($w, $mask, $cookie, $len) = unpack("lLLL", $buf);
my $name = unpack("Z*", substr($buf, 16, $len));
open(my $o, ">", $out); print $o $name;
PL
perl watch.pl "$PWD/inner" "$R/inner_state" "$R/inner_name" made-inside
perl watch.pl from-env "$R/watch_state" "$R/watch_name"
echo finished > "$R/finished"
"#;

fn watch_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let watched = r.root.join("private");
    std::fs::create_dir_all(&watched).unwrap();
    std::fs::set_permissions(
        &watched,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    give(&watched, &who);
    let env = base_env(&r.home, &[("WATCHED", watched.clone().into())]);
    let mut c = Checks::default();

    // Control: without the sandbox the watch reports the name the person creates.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    let mut bare = command_as(&who, Path::new("/bin/bash"));
    bare.arg("-c")
        .arg(WATCH_SCRIPT)
        .current_dir(&ctl)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in &env {
        bare.env(k, v);
    }
    let child = bare.spawn().unwrap();
    let state = wait_for(&ctl.join("report/watch_state"), 20);
    std::fs::write(watched.join("persons-file-control"), "x").unwrap();
    finish(child, 30);
    c.check(
        state == "watching" && read(&ctl.join("report/watch_name")) == "persons-file-control",
        format!(
            "control: without the sandbox the watch lists the directory ({state:?}, {:?})",
            read(&ctl.join("report/watch_name"))
        ),
    );
    c.check(
        read(&ctl.join("report/fanotify")).starts_with("fd"),
        format!(
            "control: without the sandbox fanotify_init succeeds ({:?})",
            read(&ctl.join("report/fanotify"))
        ),
    );

    let child = spawn_tyba_bash(&r, &who, &env, WATCH_SCRIPT);
    let rr = r.wt.join("report");
    let state = wait_for(&rr.join("watch_state"), 30);
    std::fs::write(watched.join("persons-secret-name"), "x").unwrap();
    let (_, stderr) = finish(child, 60);
    c.check(
        read(&rr.join("finished")).trim() == "finished",
        format!("the script ran to its end: {stderr}"),
    );
    c.check(
        state.starts_with("denied") && state.contains("Permission denied"),
        format!("the watch outside the readable roots is refused with EACCES ({state:?})"),
    );
    c.check(
        !read(&rr.join("watch_name")).contains("persons-secret-name"),
        "no name from the unlistable directory reached the agent",
    );
    c.check(
        read(&rr.join("inner_state")) == "watching"
            && read(&rr.join("inner_name")) == "made-inside",
        format!(
            "control: a watch in the worktree works and reports names ({:?}, {:?})",
            read(&rr.join("inner_state")),
            read(&rr.join("inner_name"))
        ),
    );
    c.check(
        read(&rr.join("fanotify")).starts_with("denied"),
        format!("fanotify_init is denied ({:?})", read(&rr.join("fanotify"))),
    );
    c.finish(tag);
}

#[test]
fn watches_outside_the_readable_roots_are_refused_as_root_or_self() {
    watch_suite(Who::Me, "watch-me");
}

#[test]
fn watches_outside_the_readable_roots_are_refused_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    watch_suite(who, "watch-user");
}

// ------------------------------------------------------------ secrets in the env ----

const ENV_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
export -p > "$R/env"
"#;

fn env_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let bundle = r.home.join("ca-bundle.pem");
    std::fs::write(&bundle, "-----BEGIN CERTIFICATE-----\n").unwrap();
    give(&bundle, &who);
    let secrets: &[(&str, &str)] = &[
        ("BW_SESSION", "bw-SECRET-1"),
        ("OP_SESSION_myaccount", "op-SECRET-2"),
        ("MYSQL_PWD", "mysql-SECRET-3"),
        ("DEPLOY_URL", "https://deploy:SECRET-4@example.com/app"),
        (
            "SLACK_NOTIFY",
            "https://hooks.slack.com/services/T0001/B0002/SECRET5abcdef",
        ),
        (
            "CHAT_ALERTS",
            "https://discord.com/api/webhooks/123456789012/SECRET-6",
        ),
        ("PG_CONN", "host=db user=app password=SECRET-7"),
        ("MODEL", "sk-ant-api03-SECRET8abcdefghijklmnopqrstu"),
        ("FEED", "https://example.com/feed?token=SECRET-9"),
    ];
    let kept: Vec<(&str, String)> = vec![
        ("AWS_CA_BUNDLE", bundle.display().to_string()),
        ("DATABASE_URL", "postgres://localhost/app".to_string()),
        ("UPSTREAM", "ssh://git@github.com/o/r.git".to_string()),
    ];
    let mut extra: Vec<(&str, OsString)> = secrets.iter().map(|(k, v)| (*k, v.into())).collect();
    extra.extend(kept.iter().map(|(k, v)| (*k, OsString::from(v))));
    let env = base_env(&r.home, &extra);
    let mut c = Checks::default();

    // Control: without the sandbox every value is there.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    bare_bash_as(&who, &ctl, &env, ENV_SCRIPT);
    let seen = read(&ctl.join("report/env"));
    for (k, v) in secrets {
        c.check(
            seen.contains(v),
            format!("control: without the sandbox {k} is seen"),
        );
    }

    let stderr = tyba_bash(&r, &who, &env, ENV_SCRIPT);
    let seen = read(&r.wt.join("report/env"));
    c.check(
        seen.contains("declare -x PATH="),
        format!("the agent's environment was written: {stderr}"),
    );
    for (k, v) in secrets {
        c.check(
            !seen.contains(v) && !seen.contains(&format!(" {k}=")),
            format!("{k} is withheld"),
        );
        c.check(
            stderr.contains(k),
            format!("{k} is named in the start-up report"),
        );
        c.check(!stderr.contains(v), format!("{k}'s value is not printed"));
    }
    for (k, v) in &kept {
        c.check(
            seen.contains(&format!("{k}=\"{v}\"")),
            format!("{k}={v} is passed (not a secret): {seen}"),
        );
    }
    c.finish(tag);
}

#[test]
fn secrets_in_the_environment_are_withheld_by_name_and_value_as_root_or_self() {
    env_suite(Who::Me, "env-me");
}

#[test]
fn secrets_in_the_environment_are_withheld_by_name_and_value_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    env_suite(who, "env-user");
}

// ---------------------------------------------------------------------- clean-up ----

/// Fills the session's temp dir, reports its path, waits for `go`, then makes it
/// unremovable for a plain `rm -rf` by its owner (`chmod 000`, through perl: only the kernel
/// layer sees these paths).
const CHMOD_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
mkdir -p "$TMPDIR/a/b/c" && echo x > "$TMPDIR/a/b/c/f" && echo y > "$TMPDIR/top"
echo "$TMPDIR" > "$R/tmpdir"
for i in $(seq 1 200); do [ -e go ] && break; sleep 0.1; done
perl -e 'for my $d ("a/b/c", "a/b", "a", "") { chmod(0, "$ENV{TMPDIR}/$d") or print "chmod $d: $!\n" }' > "$R/chmod"
echo finished > "$R/finished"
"#;

fn chmod_cleanup_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env = base_env(&r.home, &[]);
    let mut c = Checks::default();

    // Control: the same tree, made unremovable the same way, defeats a plain removal by its
    // (unprivileged) owner.
    if who != Who::Me || my_uid() != 0 {
        let ctl = r.root.join("control");
        std::fs::create_dir_all(&ctl).unwrap();
        give(&ctl, &who);
        let script = r#"T="$PWD/t"; mkdir -p "$T/a/b/c" && echo x > "$T/a/b/c/f"; chmod 0 "$T/a/b/c" "$T/a/b" "$T/a" "$T"; rm -rf "$T" 2>/dev/null; [ -e "$T" ] && echo left > still-there"#;
        bare_bash_as(&who, &ctl, &env, script);
        c.check(
            ctl.join("still-there").exists(),
            "control: a plain rm -rf by the owner leaves the chmod 000 tree",
        );
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+rwx")
            .arg(&ctl)
            .status();
    }

    let child = spawn_tyba_bash(&r, &who, &env, CHMOD_SCRIPT);
    let rr = r.wt.join("report");
    let tmp = wait_for(&rr.join("tmpdir"), 30).trim().to_string();
    c.check(
        !tmp.is_empty() && Path::new(&tmp).join("top").is_file(),
        format!("control: the session's temp dir exists outside while it runs ({tmp:?})"),
    );
    std::fs::write(r.wt.join("go"), "").unwrap();
    let (status, stderr) = finish(child, 60);
    c.check(
        read(&rr.join("finished")).trim() == "finished" && read(&rr.join("chmod")).is_empty(),
        format!(
            "the agent made its temp dir mode 000 ({:?}): {stderr}",
            read(&rr.join("chmod"))
        ),
    );
    c.check(
        status.is_some_and(|s| s.success()),
        "the session ended normally",
    );
    c.check(
        !tmp.is_empty() && std::fs::symlink_metadata(&tmp).is_err(),
        format!("the temp dir {tmp} is removed after the session: {stderr}"),
    );
    if !tmp.is_empty() {
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+rwx")
            .arg(&tmp)
            .status();
        let _ = std::fs::remove_dir_all(&tmp);
    }
    c.finish(tag);
}

#[test]
fn the_temp_dir_is_removed_after_chmod_000_as_root_or_self() {
    chmod_cleanup_suite(Who::Me, "chmod-me");
}

#[test]
fn the_temp_dir_is_removed_after_chmod_000_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    chmod_cleanup_suite(who, "chmod-user");
}

/// Reports the temp dir, leaves a daemon behind, then waits to be ended from outside.
const SIGNAL_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
echo y > "$TMPDIR/top"
setsid nohup bash -c "exec -a $MARKER sleep 300" > /dev/null 2>&1 &
echo "$TMPDIR" > "$R/tmpdir"
sleep 300
echo not-ended > "$R/finished"
"#;

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

fn signal_cleanup_suite(who: Who, tag: &str) {
    for sig in [nix::sys::signal::SIGTERM, nix::sys::signal::SIGHUP] {
        let tag = format!("{tag}-{}", sig.as_str().to_ascii_lowercase());
        let Some(r) = sandbox_repo(&who, &tag) else {
            return;
        };
        let marker = format!("tyba-signal-{}-{tag}", std::process::id());
        let env = base_env(&r.home, &[("MARKER", OsString::from(&marker))]);
        let mut c = Checks::default();
        let child = spawn_tyba_bash(&r, &who, &env, SIGNAL_SCRIPT);
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let rr = r.wt.join("report");
        let tmp = wait_for(&rr.join("tmpdir"), 30).trim().to_string();
        // Control: the temp dir and the daemon exist outside while the session runs.
        c.check(
            !tmp.is_empty() && Path::new(&tmp).join("top").is_file(),
            format!("control: the session's temp dir exists while it runs ({tmp:?})"),
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while marker_processes(&marker).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        c.check(
            !marker_processes(&marker).is_empty(),
            "control: the agent's daemon runs during the session",
        );
        nix::sys::signal::kill(pid, sig).unwrap();
        let (status, stderr) = finish(child, 20);
        std::thread::sleep(std::time::Duration::from_millis(200));
        c.check(status.is_some(), format!("tyba ended within 20 s of {sig}"));
        c.check(
            status.and_then(|s| s.code()) == Some(128 + sig as i32),
            format!("tyba exits with 128 + {sig} ({status:?}): {stderr}"),
        );
        c.check(
            !tmp.is_empty() && std::fs::symlink_metadata(&tmp).is_err(),
            format!("the temp dir {tmp} is removed after {sig}: {stderr}"),
        );
        let left = marker_processes(&marker);
        c.check(
            left.is_empty(),
            format!("nothing of the session is left after {sig}: {left:?}"),
        );
        c.check(
            read(&rr.join("finished")).is_empty(),
            "the agent was ended, not left to finish",
        );
        for p in left {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p as i32),
                nix::sys::signal::SIGKILL,
            );
        }
        if !tmp.is_empty() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        c.finish(&tag);
    }
}

#[test]
fn a_signal_to_tyba_ends_the_session_and_cleans_up_as_root_or_self() {
    signal_cleanup_suite(Who::Me, "sig-me");
}

#[test]
fn a_signal_to_tyba_ends_the_session_and_cleans_up_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    signal_cleanup_suite(who, "sig-user");
}

/// With only standard output a terminal (`tyba run … < /dev/null` in a terminal): read what
/// the person typed from fd 1, resize it, and show output.
const OUT_TTY_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
[ -t 1 ] && echo tty > "$R/stdout_is_tty"
read -t 3 -r line <&1; echo "got=$line" > "$R/read_fd1"
perl -e 'open(my $t, ">&=", 3) or die; my $w = pack("S4", 3, 3, 0, 0); print ioctl($t, 0x5414, $w) ? "resized" : "denied $!"' 3>&1 > "$R/resize_fd1"
echo RELAY-OUT-OK
"#;

/// Runs `program args` as `who` with standard input `/dev/null` and standard output a pty of
/// the test's (24×80) on which `typed-secret` waits unread; returns (what the terminal
/// showed, its size after, what is still unread on it).
fn on_output_pty(
    who: &Who,
    program: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(OsString, OsString)],
) -> (String, String, String) {
    let ws = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&ws), None).unwrap();
    let name = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&pty.slave)
    ))
    .unwrap()
    .to_string_lossy()
    .into_owned();
    let mut master = std::fs::File::from(pty.master);
    master.write_all(b"typed-secret\n").unwrap();
    let mut c = command_as(who, program);
    c.args(args).current_dir(dir).env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::null());
    let child = c.spawn().unwrap();
    let (_, _) = finish(child, 60);
    let size = winsize_of(&name);
    let unread = {
        use std::os::fd::AsFd;
        let s = pty.slave;
        let flags = nix::fcntl::fcntl(s.as_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
        nix::fcntl::fcntl(
            s.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(
                nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK,
            ),
        )
        .unwrap();
        let mut buf = [0u8; 256];
        let n = nix::unistd::read(s.as_fd(), &mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let shown = drain(&master.into());
    (shown, size, unread)
}

fn output_tty_suite(who: Who, tag: &str) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let env = base_env(&r.home, &[]);
    let mut c = Checks::default();

    // Control: without the sandbox the program reads the typed line from fd 1 and resizes.
    let ctl = r.root.join("control");
    std::fs::create_dir_all(&ctl).unwrap();
    give(&ctl, &who);
    let (_, size, _) = on_output_pty(
        &who,
        Path::new("/bin/bash"),
        &["-c", OUT_TTY_SCRIPT],
        &ctl,
        &env,
    );
    c.check(
        read(&ctl.join("report/read_fd1")).contains("typed-secret"),
        format!(
            "control: without the sandbox the typed line is read from fd 1 ({:?})",
            read(&ctl.join("report/read_fd1"))
        ),
    );
    c.check(
        size == "3 3",
        format!("control: without the sandbox the terminal is resized ({size})"),
    );

    let args = [
        "run",
        "--here",
        "--non-interactive",
        "--autonomy",
        "high",
        "--",
        "bash",
        "-c",
        OUT_TTY_SCRIPT,
    ];
    let (shown, size, unread) = on_output_pty(&who, &r.tyba, &args, &r.wt, &env);
    let rr = r.wt.join("report");
    c.check(
        read(&rr.join("read_fd1")).starts_with("got=")
            && !read(&rr.join("read_fd1")).contains("typed-secret"),
        format!(
            "the typed line does not reach the agent ({:?})",
            read(&rr.join("read_fd1"))
        ),
    );
    c.check(
        unread.contains("typed-secret"),
        format!("the typed line is still unread on the person's terminal ({unread:?})"),
    );
    c.check(
        size == "24 80",
        format!("the person's terminal keeps its size ({size})"),
    );
    c.check(
        read(&rr.join("stdout_is_tty")).trim() == "tty",
        "the agent's standard output is a terminal (its own pty)",
    );
    c.check(
        shown.contains("RELAY-OUT-OK"),
        format!("the agent's output reaches the person's terminal ({shown:?})"),
    );
    c.finish(tag);
}

#[test]
fn an_output_only_terminal_is_relayed_not_handed_over_as_root_or_self() {
    output_tty_suite(Who::Me, "outtty-me");
}

#[test]
fn an_output_only_terminal_is_relayed_not_handed_over_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    output_tty_suite(who, "outtty-user");
}
