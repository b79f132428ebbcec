//! One ask per intent on the network (issue 14): an approved command's connections to the
//! hosts its line names, and its lookups of them, are covered by that approval; a host the
//! line does not name, and a program of the line that is not the network client naming it,
//! are still asked. Real `tyba run` sessions answered through `tyba approve` by a scripted
//! person who approves everything and counts the asks, as the test's user and as the
//! unprivileged `TYBA_TEST_USER`; servers started by the test on loopback, what reached them
//! checked from outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ask_support.rs"]
mod ask;

use ask::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An HTTP server on 127.0.0.1 answering every request with `body`, or with a redirect to
/// `redirect` when given; counts the requests it served.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn serve(body: &'static str, redirect: Option<u16>) -> Server {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            h.fetch_add(1, Ordering::SeqCst);
            let resp = match redirect {
                Some(p) => format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{p}/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                ),
                None => format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ),
            };
            let _ = c.write_all(resp.as_bytes());
        }
    });
    Server { port, hits }
}

/// Approves every ask of the session until it ends, but for the outside-files server's (kind
/// `file`: one file beside the worktree or in the home at a time, on by default), which it
/// denies: these tests are about commands and connections, approved whole. The asks' actions
/// in order, and the session's (status, stdout, stderr).
fn approve_all(fx: &Fx, s: Session) -> (Vec<String>, (i32, String, String)) {
    answer(fx, s, |_| true)
}

/// Answers every ask of the session until it ends: `approve(action)` for commands and
/// connections, deny for the outside-files server's (as [`approve_all`]). The asks' actions
/// in order, and the session's (status, stdout, stderr).
fn answer(
    fx: &Fx,
    mut s: Session,
    approve: impl Fn(&str) -> bool,
) -> (Vec<String>, (i32, String, String)) {
    let mut seen: Vec<String> = Vec::new();
    let mut actions = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while s.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        let (code, out, _) = fx.cli(&["inbox", "--json"]);
        if code == 0 {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
            for p in v
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["pending"].as_array().cloned().unwrap_or_default())
            {
                let id = p["id"].as_str().unwrap_or_default().to_string();
                if id.is_empty() || seen.contains(&id) {
                    continue;
                }
                actions.push(p["action"].as_str().unwrap_or_default().to_string());
                let action = p["action"].as_str().unwrap_or_default();
                let answer = if p["kind"] != "file" && approve(action) {
                    "approve"
                } else {
                    "deny"
                };
                let _ = fx.cli(&[answer, &id]);
                seen.push(id);
            }
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    (actions, s.finish())
}

#[test]
fn an_approved_curl_of_a_local_server_is_asked_once() {
    for who in whos() {
        let Some(fx) = setup(&who, "net-one-ask") else {
            continue;
        };
        let srv = serve("hello-from-the-test-server", None);
        let script = format!("curl -sS http://127.0.0.1:{}/; echo curl=$?", srv.port);
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("hello-from-the-test-server") && out.contains("curl=0"),
            "{who:?}: the approved curl reached the server: {out} / {err}"
        );
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1, "{who:?}: {err}");
        assert_eq!(asks.len(), 1, "{who:?}: one ask for one intent: {asks:?}");
        assert!(asks[0].contains("curl"), "{who:?}: {asks:?}");
    }
}

/// A network client whose host is an operand, not a URL (`nc HOST PORT`; ssh, scp, rsync
/// and git's `host:path` the same way, `policy/src/analysis/commands/net_hosts.rs`): the
/// approval of the line covers its connection to that host and port, so the person is asked
/// once per command (before, each approved `nc` was asked again for its connection).
#[test]
fn an_approved_client_naming_its_host_as_an_operand_is_asked_once() {
    assert!(
        std::path::Path::new("/usr/bin/nc.openbsd").exists(),
        "netcat-openbsd is installed (scripts/install-test-agents)"
    );
    for who in whos() {
        let Some(fx) = setup(&who, "net-operand") else {
            continue;
        };
        let srv = serve("hello-from-nc", None);
        let other = serve("other-port", None);
        let script = format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc.openbsd -q 2 -w 5 127.0.0.1 {} ; echo nc=$?; \
             printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc.openbsd -q 2 -w 5 127.0.0.1 {} ; echo nc2=$?",
            srv.port, other.port
        );
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        let ctx = format!("{who:?}: asks {asks:?} / out {out} / err {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(
            out.contains("hello-from-nc") && out.contains("nc=0"),
            "{ctx}"
        );
        assert!(out.contains("other-port") && out.contains("nc2=0"), "{ctx}");
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1, "{ctx}");
        // One ask per command, none for their connections.
        assert_eq!(asks.len(), 2, "{ctx}");
        assert!(asks.iter().all(|a| a.contains("nc.openbsd")), "{ctx}");
        assert!(!asks.iter().any(|a| a.contains("connects to")), "{ctx}");
    }
}

#[test]
fn hosts_the_line_does_not_name_and_programs_that_are_not_its_client_are_still_asked() {
    for who in whos() {
        let Some(fx) = setup(&who, "net-still-asked") else {
            continue;
        };
        let other = serve("the-host-nobody-named", None);
        let named = serve("", Some(other.port));
        // One approved line (the inner shell's): curl follows a redirect to a port the line
        // does not name, and python3 (named on the line, but no network client the policy
        // reads hosts from) fetches the named host itself.
        let inner = format!(
            "curl -sSL http://127.0.0.1:{n}/; echo curl=$?; \
             python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{o}/').read().decode())\" http://127.0.0.1:{n}/; \
             echo py=$?",
            n = named.port,
            o = other.port
        );
        let script = format!("bash -c '{}'", inner.replace('\'', r"'\''"));
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("curl=0") && out.contains("py=0"),
            "{who:?}: every ask approved, both ran: {out} / {err}"
        );
        let other_addr = format!("127.0.0.1:{}", other.port);
        assert_eq!(
            asks.len(),
            3,
            "{who:?}: the line, the redirect's host, python3's connect: {asks:?}"
        );
        assert!(asks[0].contains("curl -sSL"), "{who:?}: {asks:?}");
        for a in &asks[1..] {
            assert!(
                a.starts_with("command connects to") && a.contains(&other_addr),
                "{who:?}: {asks:?}"
            );
        }
        assert_eq!(named.hits.load(Ordering::SeqCst), 1, "{who:?}");
        assert_eq!(other.hits.load(Ordering::SeqCst), 2, "{who:?}");
    }
}

/// A listener on `ip:port` counting the connections it accepted (answering HTTP with `body`),
/// `None` when the address cannot be bound (port 80 needs root; it may be in use).
fn listen_on(ip: &str, port: u16, body: &'static str) -> Option<Server> {
    let l = TcpListener::bind((ip, port)).ok()?;
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = c.write_all(resp.as_bytes());
        }
    });
    Some(Server { port, hits })
}

/// review r3-05: an approved URL covers the port it connects to (the scheme's default when it
/// names none), never every port of the host. The approved line's curl, through a `-K` config
/// file the line does not show, also fetches another port of the same host: that connection
/// is asked on its own and, denied, never reaches the listener on that port (checked from
/// outside). Spelled as an IP literal without a port (port 80 of an address of 127/8), as
/// `localhost` and as `[::1]` where port 80 can be bound there; the control approves every
/// ask and the other port's listener is reached.
#[test]
fn an_approved_url_covers_its_own_port_and_no_other_port_of_the_host() {
    // A loopback address of its own, so port 80 is free whatever else the machine runs.
    let ip = format!(
        "127.{}.{}.9",
        std::process::id() % 200 + 20,
        std::process::id() % 7
    );
    let spellings: Vec<(String, String)> = vec![
        (ip.clone(), format!("http://{ip}")),
        ("127.0.0.1".into(), "http://localhost/".into()),
        ("::1".into(), "http://[::1]/".into()),
        // The explicit port (control of the spelling: covered before too).
        (ip.clone(), format!("http://{ip}:80/x")),
    ];
    let mut ran = 0;
    let mut listeners: std::collections::HashMap<String, (Server, Server)> = Default::default();
    for (bind, url) in spellings {
        if !listeners.contains_key(&bind) {
            let Some(shown) = listen_on(&bind, 80, "the-approved-port") else {
                eprintln!("skipping {url}: cannot listen on port 80 of {bind}");
                continue;
            };
            let other = listen_on(&bind, 0, "another-port-of-the-host").unwrap();
            listeners.insert(bind.clone(), (shown, other));
        }
        let (shown, other) = &listeners[&bind];
        let host = if bind.contains(':') {
            format!("[{bind}]")
        } else {
            bind.clone()
        };
        let other_url = format!("http://{host}:{}/other", other.port);
        for who in whos() {
            for deny_others in [true, false] {
                let Some(fx) = setup(&who, "net-port") else {
                    continue;
                };
                ran += 1;
                let before = (
                    shown.hits.load(Ordering::SeqCst),
                    other.hits.load(Ordering::SeqCst),
                );
                let script = format!(
                    "printf 'url = \"{other_url}\"\\n' > cfg.txt; \
                     curl -sS -m 10 -K cfg.txt {url}; echo curl=$?"
                );
                let first = std::sync::Mutex::new(true);
                let (asks, (code, out, err)) = answer(&fx, fx.start(&[], &script), |_| {
                    let mut f = first.lock().unwrap();
                    let is_first = *f;
                    *f = false;
                    is_first || !deny_others
                });
                let ctx = format!("{who:?} {url} deny={deny_others}: {asks:?} {out} / {err}");
                assert_eq!(code, 0, "{ctx}");
                assert!(asks.first().is_some_and(|a| a.contains("curl")), "{ctx}");
                assert!(out.contains("the-approved-port"), "{ctx}");
                assert_eq!(shown.hits.load(Ordering::SeqCst), before.0 + 1, "{ctx}");
                assert_eq!(asks.len(), 2, "{ctx}: the other port is asked on its own");
                assert!(
                    asks[1].starts_with("command connects to")
                        && asks[1].contains(&format!(":{}", other.port)),
                    "{ctx}"
                );
                let reached = other.hits.load(Ordering::SeqCst) - before.1;
                if deny_others {
                    assert_eq!(reached, 0, "{ctx}: the denied port was reached");
                    assert!(!out.contains("another-port-of-the-host"), "{ctx}");
                } else {
                    assert_eq!(reached, 1, "{ctx}: control: approved, it is reached");
                    assert!(out.contains("another-port-of-the-host"), "{ctx}");
                }
            }
        }
    }
    assert!(ran > 0 || whos().is_empty(), "no spelling could be checked");
}

/// A registry name the host resolves, if any (the relay asks the host's name server).
fn resolvable() -> Option<&'static str> {
    [
        "pypi.org",
        "crates.io",
        "registry.npmjs.org",
        "deb.debian.org",
    ]
    .into_iter()
    .find(|h| {
        std::process::Command::new("getent")
            .args(["hosts", h])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[test]
fn approved_lookups_of_the_named_host_resolve_a_and_aaaa_and_other_names_do_not() {
    let Some(name) = resolvable() else {
        eprintln!("skipped: the host resolves none of the registry names");
        return;
    };
    for who in whos() {
        let Some(fx) = setup(&who, "net-lookup") else {
            continue;
        };
        // curl resolves with getaddrinfo(AF_UNSPEC): glibc sends A and AAAA together
        // (sendmmsg). getent, run by the same approved line, names no host: its lookup of the
        // same name is its own, and refused by the relay.
        let inner = format!(
            "curl -sS -o /dev/null -w \"ip=%{{remote_ip}}\\n\" https://{name}/; echo curl=$?; \
             getent ahosts {name}; echo getent=$?"
        );
        let script = format!("bash -c '{}'", inner.replace('\'', r"'\''"));
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            !out.contains("curl=6") && out.lines().any(|l| l.len() > 3 && l.starts_with("ip=")),
            "{who:?}: the approved curl resolved {name}: {out} / {err}"
        );
        assert!(out.contains("getent=2"), "{who:?}: {out} / {err}");
        assert_eq!(asks.len(), 1, "{who:?}: {asks:?}");
    }
}

#[test]
fn the_agents_own_host_resolves_with_a_and_aaaa_and_a_commands_connect_is_asked_by_name() {
    let Some(name) = resolvable() else {
        eprintln!("skipped: the host resolves none of the registry names");
        return;
    };
    for who in whos() {
        let Some(fx) = setup(&who, "net-agent-lookup") else {
            continue;
        };
        // The relay answers the agent's own host names for every process; a command (python3,
        // opaque) that then connects there is asked, and the ask names the host it resolved.
        let host = format!("{name}:443");
        let script = format!(
            "/usr/bin/python3 -c 'import socket; print(\"families\", sorted({{a[0].name for a in socket.getaddrinfo(\"{name}\", 443)}})); socket.create_connection((\"{name}\", 443), timeout=20).close(); print(\"connected\")'; echo py=$?"
        );
        let (asks, (code, out, err)) =
            approve_all(&fx, fx.start(&["--allow-host", &host], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("families") && out.contains("connected") && out.contains("py=0"),
            "{who:?}: {out} / {err}"
        );
        assert_eq!(asks.len(), 2, "{who:?}: {asks:?}");
        assert!(
            asks[1].starts_with(&format!("command connects to {name}:443 (")),
            "{who:?}: the connect is asked by the name it resolved: {asks:?}"
        );
    }
}

/// `git rev-parse REF` in the repository at `dir`, read from outside the session.
fn rev(dir: &std::path::Path, r: &str) -> Option<String> {
    let o = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "-C"])
        .arg(dir)
        .args(["rev-parse", "--verify", "-q", r])
        .output()
        .unwrap();
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// An approved push to a repository on a local path gets no write access to it from git's
/// configuration: the remote's path comes from configuration the agent can write (a nested
/// repository's `remote.*.url`, `receivepack`, hooks), so granting it let agent code run with
/// read-write on any directory the configuration named (a hostile review moved a remote's
/// `main` and wrote the person's `~/.bashrc` this way). The plain push lands through tyba's
/// relay (the supervisor's own receive-pack); the nested repository's pushes, whose
/// `receivepack` is the agent's script, get no relay: they are asked and fail in the agent's
/// domain, and the remote's other refs, its `main` and the person's files are unchanged. A
/// push to `main` is refused without an ask.
#[test]
fn an_approved_push_to_a_local_remote_gets_no_grant_from_configuration() {
    for who in whos() {
        let Some(fx) = setup(&who, "net-local-push") else {
            continue;
        };
        let remote = fx.home.join("remote.git");
        let o = git_as(&who, &fx.home, &["init", "-q", "--bare", "remote.git"]);
        assert!(o.status.success(), "{o:?}");
        let url = remote.display().to_string();
        assert!(git_as(&who, &fx.wt, &["remote", "add", "origin", &url])
            .status
            .success());
        let o = git_as(
            &who,
            &fx.wt,
            &["push", "-q", "origin", "HEAD:refs/heads/main"],
        );
        assert!(o.status.success(), "{o:?}");
        // The agent commits on a branch of its own (`main` is read-only with `--here`).
        assert!(git_as(&who, &fx.wt, &["switch", "-q", "-c", "work"])
            .status
            .success());
        let main_before = rev(&remote, "refs/heads/main").unwrap();
        let planted = remote.join("planted");
        let home_file = fx.home.join("planted-home");
        // A nested repository of the agent's whose configuration names the remote and runs
        // the agent's own code as git's receive-pack, and a second remote that is the home.
        let script = format!(
            "echo change > feature.txt && git add feature.txt && git commit -q -m feature && echo committed=$?
git push origin HEAD:feature-x; echo push=$?
git push origin HEAD:main; echo main=$?
mkdir sub && cd sub && git init -q && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m EVIL
printf 'echo x > {p}\necho x > {h}\nexec git-receive-pack \"$@\"\n' > ../rp.sh
git remote add origin {url} && git config remote.origin.receivepack \"sh $PWD/../rp.sh\"
git push origin HEAD:feature-y; echo nested=$?
git remote add home {home} && git config remote.home.receivepack \"sh $PWD/../rp.sh\"
git push home HEAD:x; echo home=$?",
            p = planted.display(),
            h = home_file.display(),
            home = fx.home.display(),
        );
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("committed=0"), "{who:?}: {out} / {err}");
        assert!(
            out.contains("nested="),
            "{who:?}: the script ran to the end: {out} / {err}"
        );
        // The person was asked for, and approved, the pushes of the nested repository.
        assert!(
            asks.iter().any(|a| a.contains("HEAD:feature-y")),
            "{who:?}: the nested push must have been asked: {asks:?} / {out} / {err}"
        );
        // The approved plain push landed; nothing else reached the remote or the home, though
        // every ask was approved.
        assert!(out.contains("push=0"), "{who:?}: {out} / {err}");
        assert_eq!(
            rev(&remote, "refs/heads/feature-x"),
            rev(&fx.wt, "HEAD"),
            "{who:?}: {asks:?}"
        );
        // The nested push's receivepack is the agent's script, which execs git's own
        // receive-pack: no relay (it would have landed feature-y), so it ran in the agent's
        // domain and could not write the remote.
        assert_eq!(
            rev(&remote, "refs/heads/feature-y"),
            None,
            "{who:?}: an agent-set receivepack got the relay: {asks:?}"
        );
        let (_, log, _) = fx.cli(&["log"]);
        assert_eq!(
            log.matches("relayed: git receive-pack on").count(),
            1,
            "{who:?}: only the plain push was relayed: {log}"
        );
        assert!(
            !planted.exists(),
            "{who:?}: agent code wrote into the remote: {asks:?}"
        );
        assert!(
            !home_file.exists(),
            "{who:?}: agent code wrote into the home: {asks:?}"
        );
        assert!(!out.contains("main=0"), "{who:?}: {out} / {err}");
        assert_eq!(
            rev(&remote, "refs/heads/main").unwrap(),
            main_before,
            "{who:?}"
        );
        assert!(
            asks.iter().all(|a| !a.contains("HEAD:main")),
            "{who:?}: a blocked push is not asked: {asks:?}"
        );
    }
}

/// The relay of an approved push to a local bare remote (`docs/sandbox.md`, "Pushes to a
/// repository on a local path"): `git push origin HEAD:feature-x` to `~/remote.git` is asked
/// once (git's transport asks nothing more) and lands, the remote's ref read from outside;
/// the ask names the repository and the ref. Agent code running under an approved push (a
/// line that pushes, then sources a script feeding git's own transport shell ref updates of
/// its own) reaches the relay and is refused there: `main` (protected) and a ref the approval
/// did not name never move. A hook written into the remote during the session (by an
/// approved command granted the remote's hooks directory) makes the relay refuse: it would
/// run outside the sandbox.
#[test]
fn an_approved_push_to_a_local_bare_remote_lands_on_its_feature_branch_and_nothing_else() {
    for who in whos() {
        let Some(fx) = setup(&who, "net-relay-push") else {
            continue;
        };
        let remote = fx.home.join("remote.git");
        let o = git_as(&who, &fx.home, &["init", "-q", "--bare", "remote.git"]);
        assert!(o.status.success(), "{o:?}");
        let url = remote.display().to_string();
        assert!(git_as(&who, &fx.wt, &["remote", "add", "origin", &url])
            .status
            .success());
        let o = git_as(
            &who,
            &fx.wt,
            &["push", "-q", "origin", "HEAD:refs/heads/main"],
        );
        assert!(o.status.success(), "{o:?}");
        // The agent commits on a branch of its own (`main` is read-only with `--here`).
        assert!(git_as(&who, &fx.wt, &["switch", "-q", "-c", "work"])
            .status
            .success());
        let main_before = rev(&remote, "refs/heads/main").unwrap();
        let marker = fx.home.join("hook-ran");
        // The person's global configuration names hooks in the worktree (an approved
        // command of a session could have written it): the relay's receive-pack reads no
        // global configuration, so that hook never runs outside the sandbox.
        let global_marker = fx.home.join("global-hook-ran");
        let hk = fx.wt.join(".hk");
        std::fs::create_dir_all(&hk).unwrap();
        std::fs::write(
            hk.join("pre-receive"),
            format!("#!/bin/sh\ntouch {}\n", global_marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(
            hk.join("pre-receive"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let gitconfig = fx.home.join(".gitconfig");
        let mut g = std::fs::read_to_string(&gitconfig).unwrap_or_default();
        g.push_str(&format!("[core]\n\thooksPath = {}\n", hk.display()));
        std::fs::write(&gitconfig, g).unwrap();
        give(&hk, &who);
        give(&gitconfig, &who);
        // After its push, the approved line sends ref updates of its own through git's
        // transport shell, exactly as git starts it, and reports the shell's status.
        let forge = format!(
            r#"z=0000000000000000000000000000000000000000
new=$(git rev-parse HEAD)
for ref in refs/heads/main refs/heads/other; do
  line="$z $new $ref"
  printf '%04x%s\n0000' $((${{#line}} + 5)) "$line" | sh -c "git-receive-pack '{url}'" "git-receive-pack '{url}'" >/dev/null
  echo "forged $ref=$?"
done
"#
        );
        let script = format!(
            "echo change > feature.txt && git add feature.txt && git commit -q -m feature && echo committed=$?
git push origin HEAD:feature-x; echo push=$?
git push origin HEAD:main; echo main=$?
cat > forge.sh <<'FORGE'
{forge}FORGE
bash -c 'git push origin HEAD:feature-h; . ./forge.sh'; echo line=$?
printf '#!/bin/sh\ntouch {marker}\n' > pr.sh && chmod +x pr.sh
cp pr.sh {hook}; echo cp=$?
git push origin HEAD:feature-z; echo pushz=$?",
            marker = marker.display(),
            hook = remote.join("hooks/pre-receive").display(),
        );
        let (asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(out.contains("committed=0"), "{who:?}: {out} / {err}");
        assert!(
            out.contains("push=0"),
            "{who:?}: the push landed: {out} / {err}"
        );
        assert_eq!(
            rev(&remote, "refs/heads/feature-x"),
            rev(&fx.wt, "HEAD"),
            "{who:?}: {asks:?} / {err}"
        );
        assert!(
            !global_marker.exists(),
            "{who:?}: a hook named by the global configuration ran outside the sandbox"
        );
        assert_eq!(
            asks.iter().filter(|a| a.contains("git push")).count(),
            3,
            "{who:?}: each push was asked once: {asks:?}"
        );
        assert!(
            asks.iter().any(|a| a.contains("HEAD:feature-x")),
            "{who:?}: the push was asked: {asks:?}"
        );
        assert!(
            asks.iter().all(|a| !a.contains("receive-pack")),
            "{who:?}: git's own transport is not asked: {asks:?}"
        );
        assert!(!out.contains("main=0"), "{who:?}: {out} / {err}");
        assert!(
            asks.iter().all(|a| !a.contains("HEAD:main")),
            "{who:?}: a blocked push is not asked: {asks:?}"
        );
        // The line's own updates reached the relay and were refused there.
        assert!(out.contains("line="), "{who:?}: {out} / {err}");
        assert!(
            out.contains("forged refs/heads/main=126")
                && err.contains("the push updates the protected branch refs/heads/main"),
            "{who:?}: {out} / {err}"
        );
        assert!(
            out.contains("forged refs/heads/other=126")
                && err
                    .contains("the push updates refs/heads/other, which the approval did not name"),
            "{who:?}: {out} / {err}"
        );
        assert_eq!(
            rev(&remote, "refs/heads/main").unwrap(),
            main_before,
            "{who:?}"
        );
        assert_eq!(rev(&remote, "refs/heads/other"), None, "{who:?}");
        assert!(
            rev(&remote, "refs/heads/feature-h").is_some(),
            "{who:?}: the line's own push landed: {out} / {err}"
        );
        // A hook an approved command wrote into the remote during the session is never run
        // by the relay: the push is refused.
        assert!(
            out.contains("cp=0"),
            "{who:?}: the hook was written: {out} / {err}"
        );
        assert!(
            !out.contains("pushz=0") && err.contains("changed during this session"),
            "{who:?}: {out} / {err}"
        );
        assert!(!marker.exists(), "{who:?}: the remote's new hook ran");
        assert_eq!(rev(&remote, "refs/heads/feature-z"), None, "{who:?}");
        let (_, log, _) = fx.cli(&["log"]);
        assert!(
            log.contains("relayed: git receive-pack on"),
            "{who:?}: the audit log says the push was relayed: {log}"
        );
    }
}

/// A name server for one test on a loopback address of its own, port 53: answers every A
/// query with 127.0.0.1 and every AAAA query with ::1 (RFC 1035 §4.1, RFC 3596), and records
/// each question it was asked (lower-case name, type).
struct NameServer {
    ip: std::net::Ipv4Addr,
    asked: Arc<std::sync::Mutex<Vec<(String, u16)>>>,
}

/// The question of a DNS query: (name in lower case, type, end offset of the question).
fn dns_question(q: &[u8]) -> Option<(String, u16, usize)> {
    let mut i = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*q.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(i..i + len)?).to_ascii_lowercase());
        i += len;
    }
    let ty = u16::from_be_bytes([*q.get(i)?, *q.get(i + 1)?]);
    Some((labels.join("."), ty, i + 4))
}

/// Starts a [`NameServer`], or `None` when port 53 cannot be bound here (not root).
fn name_server() -> Option<NameServer> {
    let pid = std::process::id();
    let sock = (0..64u32).find_map(|k| {
        let n = pid.wrapping_add(k);
        let ip = std::net::Ipv4Addr::new(127, 53, (n >> 8) as u8, (n as u8).max(1));
        std::net::UdpSocket::bind((ip, 53)).ok().map(|s| (s, ip))
    });
    let (sock, ip) = sock?;
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let a = Arc::clone(&asked);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let q = &buf[..n];
            let Some((name, ty, end)) = dns_question(q) else {
                continue;
            };
            a.lock().unwrap().push((name, ty));
            let data: &[u8] = match ty {
                1 => &[127, 0, 0, 1],
                28 => &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                _ => &[],
            };
            let mut r = q[..2].to_vec();
            r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, u8::from(!data.is_empty()), 0, 0, 0, 0]);
            r.extend_from_slice(&q[12..end]);
            if !data.is_empty() {
                r.extend_from_slice(&[0xc0, 0x0c]);
                r.extend_from_slice(&ty.to_be_bytes());
                r.extend_from_slice(&[0, 1, 0, 0, 0, 60, 0, data.len() as u8]);
                r.extend_from_slice(data);
            }
            let _ = sock.send_to(&r, from);
        }
    });
    Some(NameServer { ip, asked })
}

/// `tyba run --here -- bash -c SCRIPT` as [`Fx::start`] starts it, in a mount namespace of
/// its own where `/etc/resolv.conf` is `resolv` (a bind mount): the file tyba reads its name
/// servers from, and the one the sandbox's resolvers read.
fn start_with_resolv_conf(fx: &Fx, resolv: &std::path::Path, script: &str) -> Session {
    use std::process::{Command, Stdio};
    let mut c = Command::new("/usr/bin/unshare");
    c.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/resolv.conf && exec "$@""#)
        .arg(resolv);
    if let Who::User { uid, gid, .. } = &fx.who {
        c.arg("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .args(["--clear-groups", "--"]);
    }
    c.arg(&fx.tyba)
        .args(["run", "--here", "--", "bash", "-c", script]);
    c.current_dir(&fx.wt).env_clear().stdin(Stdio::null());
    for (k, v) in fx.env() {
        c.env(k, v);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Session { child }
}

/// An approved curl's lookup of the host its line names, A and AAAA together (glibc's
/// `getaddrinfo(AF_UNSPEC)` sends both with `sendmmsg`), succeeds through tyba's resolver
/// relay against a name server on loopback the test starts, named by the resolver
/// configuration as tyba reads it (and as the sandbox's resolvers read it): both questions
/// reach the server, curl reaches the HTTP server at the address it got, and a name the line
/// does not name (`getent` of another name, in the same approved line) never reaches it.
#[test]
fn an_approved_a_and_aaaa_lookup_succeeds_against_a_resolver_the_test_starts() {
    let Some(ns) = name_server() else {
        eprintln!("skipped: port 53 on loopback cannot be bound here (not root)");
        return;
    };
    let name = "registry.tyba-test.example";
    // The test's own mount namespace needs the privilege to bind-mount over /etc/resolv.conf.
    let probe = std::process::Command::new("/usr/bin/unshare")
        .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg("mount --bind /dev/null /etc/resolv.conf")
        .stderr(std::process::Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: /etc/resolv.conf cannot be bind-mounted in a mount namespace here");
        return;
    }
    for who in whos() {
        let Some(fx) = setup(&who, "net-own-resolver") else {
            continue;
        };
        ns.asked.lock().unwrap().clear();
        let resolv = fx.home.join("resolv.conf");
        std::fs::write(&resolv, format!("nameserver {}\n", ns.ip)).unwrap();
        let srv = serve("hello-through-the-test-resolver", None);
        let inner = format!(
            "curl -sS http://{name}:{p}/; echo curl=$?; getent ahosts other.tyba-test.example; echo getent=$?",
            p = srv.port
        );
        let script = format!("bash -c '{}'", inner.replace('\'', r"'\''"));
        let (asks, (code, out, err)) =
            approve_all(&fx, start_with_resolv_conf(&fx, &resolv, &script));
        assert_eq!(code, 0, "{who:?}: {err}");
        assert!(
            out.contains("hello-through-the-test-resolver") && out.contains("curl=0"),
            "{who:?}: the approved curl resolved {name} and reached the server: {out} / {err}"
        );
        assert_eq!(srv.hits.load(Ordering::SeqCst), 1, "{who:?}");
        assert!(out.contains("getent=2"), "{who:?}: {out} / {err}");
        let asked = ns.asked.lock().unwrap().clone();
        for ty in [1u16, 28] {
            assert!(
                asked.contains(&(name.to_string(), ty)),
                "{who:?}: the relay asked the test's server for type {ty}: {asked:?}"
            );
        }
        assert!(
            asked.iter().all(|(n, _)| n == name),
            "{who:?}: only the named host reached the server: {asked:?}"
        );
        assert_eq!(asks.len(), 1, "{who:?}: one ask for one intent: {asks:?}");
    }
}

/// A lookup the relay refuses is never dropped silently: an approved command whose line names
/// no host (as `npm install x` names none) that looks a name up gets `tyba: refused the lookup
/// of NAME by `LINE`…` on its stderr at once, and the session's audit log has a `lookup` line
/// naming it; the name never reaches a name server (refused before any upstream query, so no
/// answer comes and the resolver fails). No name server needs to answer: the name is made up.
#[test]
fn a_refused_lookup_is_told_to_the_command_and_logged() {
    if !std::fs::read_to_string("/etc/resolv.conf").is_ok_and(|t| {
        t.lines().any(|l| {
            l.trim()
                .strip_prefix("nameserver")
                .is_some_and(|v| v.trim().parse::<std::net::Ipv4Addr>().is_ok())
        })
    }) {
        eprintln!("skipped: no IPv4 name server in /etc/resolv.conf, so no resolver relay");
        return;
    }
    for who in whos() {
        let Some(fx) = setup(&who, "net-refused-lookup") else {
            continue;
        };
        let name = "nothing-named-here.tyba-test.example";
        let script = format!(
            "/usr/bin/python3 -c 'import socket\ntry:\n socket.getaddrinfo(\"{name}\", 443)\n print(\"resolved\")\nexcept OSError as e:\n print(\"failed\", e.errno)'; echo py=$?"
        );
        let (_asks, (code, out, err)) = approve_all(&fx, fx.start(&[], &script));
        let ctx = format!("{who:?}: out {out} / err {err}");
        assert_eq!(code, 0, "{ctx}");
        assert!(out.contains("failed") && !out.contains("resolved"), "{ctx}");
        assert!(
            err.contains(&format!("tyba: refused the lookup of `{name}` by `"))
                && err.contains("python3"),
            "{ctx}: the command is told, naming itself"
        );
        let (_, log, _) = fx.cli(&["log", "--json"]);
        let line = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["kind"] == "lookup")
            .unwrap_or_else(|| panic!("{ctx}: no lookup in the log: {log}"));
        assert!(
            line["action"]
                .as_str()
                .unwrap_or_default()
                .starts_with(name),
            "{ctx}: {line}"
        );
        assert_ne!(line["decision"], "allow", "{ctx}: {line}");
    }
}
