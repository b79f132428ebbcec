//! The listening sockets: the person's (`tyba inbox/approve/deny`) and the hook-only one.
//!
//! Every connection is checked with `SO_PEERCRED`: the peer must run as the same user; on
//! the person's socket it must also be in the supervisor's own PID namespace, so a process
//! of the sandbox (its own PID namespace) is turned away even if it ever reached the path.
//! The hook socket takes only `ask` and the read-only `autonomy`.
//!
//! Every refusal of these checks, and every operation the hook socket refuses (an answer, a
//! listing, a change of level, a stop: what a process of the sandbox would try), is written
//! to the session's audit log as a `control` line with decision `refuse`, and shown on the
//! session's terminal.

use super::proto::{Reply, Request, MAX_LINE_BYTES};
use super::Broker;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Which socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The person's: list and answer.
    Person,
    /// The agent hook's: ask only.
    Hook,
}

/// A listening socket; [`Served::stop`] removes it.
#[derive(Debug)]
pub(crate) struct Served {
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl Served {
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::fs::remove_file(&self.path);
        // Wake the accept loop; it sees the flag and returns.
        let _ = UnixStream::connect(&self.path);
    }
}

fn bind(path: &Path) -> std::io::Result<UnixListener> {
    match UnixListener::bind(path) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            // A socket left by a supervisor that died: nobody answers on it.
            if UnixStream::connect(path).is_ok() {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        Err(e) => Err(e),
    }
}

/// Listens on `path` for `role`. With `staging`, the socket is bound and listening there
/// first and then renamed to `path`, so that `path` never names a socket that is not yet
/// listening (a listing that connects in between would otherwise see it refused, issue 17);
/// the caller holds the session's lock, so whatever is at `staging` or `path` is its own.
pub(crate) fn serve(
    broker: &Broker,
    path: &Path,
    role: Role,
    staging: Option<&Path>,
) -> std::io::Result<Served> {
    let listener = match staging {
        None => {
            let l = bind(path)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            l
        }
        Some(staging) => {
            let _ = std::fs::remove_file(staging);
            let l = UnixListener::bind(staging)?;
            let published =
                std::fs::set_permissions(staging, std::fs::Permissions::from_mode(0o600))
                    .and_then(|()| std::fs::rename(staging, path));
            if let Err(e) = published {
                let _ = std::fs::remove_file(staging);
                return Err(e);
            }
            l
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let served = Served {
        path: path.to_path_buf(),
        stop: Arc::clone(&stop),
    };
    let b = broker.clone();
    std::thread::Builder::new()
        .name("tyba-broker-accept".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let b = b.clone();
                let _ = std::thread::Builder::new()
                    .name("tyba-broker-conn".into())
                    .spawn(move || handle(&b, conn, role));
            }
        })?;
    Ok(served)
}

fn same_pid_namespace(pid: i32) -> bool {
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/pid"));
    let ours = std::fs::read_link("/proc/self/ns/pid");
    matches!((theirs, ours), (Ok(a), Ok(b)) if a == b)
}

/// `pid N on /dev/pts/M` (the terminal of its standard streams), or `pid N`.
fn peer(pid: i32) -> String {
    let tty = (0..3)
        .filter_map(|fd| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok())
        .find(|p| p.starts_with("/dev/pts") || p.starts_with("/dev/tty"));
    match tty {
        Some(t) => format!("pid {pid} on {}", t.display()),
        None => format!("pid {pid}"),
    }
}

fn who(pid: i32) -> String {
    format!("inbox ({})", peer(pid))
}

/// What a request asks for, for the log.
fn op_name(req: &Request) -> String {
    match req {
        Request::List => "list".into(),
        Request::Answer { id, answer, .. } => format!("answer {id} {answer:?}").to_lowercase(),
        Request::Ask(a) => format!("ask {}", a.action),
        Request::Autonomy => "autonomy".into(),
        Request::SetAutonomy { level, .. } => format!("set autonomy {level}"),
        Request::Stop => "stop".into(),
    }
}

fn send(w: &mut UnixStream, r: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_string(r) else {
        return false;
    };
    line.push('\n');
    w.write_all(line.as_bytes()).is_ok()
}

fn handle(b: &Broker, conn: UnixStream, role: Role) {
    let mut w = conn;
    let Ok(cred) = nix::sys::socket::getsockopt(&w, nix::sys::socket::sockopt::PeerCredentials)
    else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    if cred.uid() != me || (role == Role::Person && !same_pid_namespace(cred.pid())) {
        let reason = "refused: not this session's user outside the sandbox";
        let by = format!(
            "uid {} pid {} (as the supervisor sees it)",
            cred.uid(),
            cred.pid()
        );
        b.refuse_control("connection to the person's socket", &by, reason);
        b.notice(&format!(
            "refused a connection to this session's socket from {by}"
        ));
        let _ = send(&mut w, &Reply::error(reason));
        return;
    }
    let Ok(r) = w.try_clone() else { return };
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.len() > MAX_LINE_BYTES {
            let _ = send(&mut w, &Reply::error("request too long"));
            return;
        }
        let reply = match serde_json::from_slice::<Request>(&buf) {
            Err(e) => Reply::error(format!("bad request: {e}")),
            Ok(req) => dispatch(b, req, role, cred.pid()),
        };
        if !send(&mut w, &reply) {
            return;
        }
    }
}

fn dispatch(b: &Broker, req: Request, role: Role, pid: i32) -> Reply {
    match (role, req) {
        (Role::Person, Request::List) => Reply {
            ok: true,
            session: Some(b.session_view()),
            pending: b.pending(),
            ..Reply::default()
        },
        (Role::Person, Request::Answer { id, answer, reason }) => {
            match b.answer(&id, answer, reason, &who(pid)) {
                Ok(()) => Reply::ok(),
                Err(e) => Reply::error(e.to_string()),
            }
        }
        (Role::Hook, Request::Ask(ask)) => Reply {
            ok: true,
            answer: Some(b.ask_hook(ask, u32::try_from(pid).unwrap_or(0))),
            ..Reply::default()
        },
        (Role::Person, Request::Ask(_)) => {
            Reply::error("asks come from the session's agent hook, not from this socket")
        }
        (_, Request::Autonomy) => Reply {
            ok: true,
            autonomy: Some(b.control().autonomy()),
            ..Reply::default()
        },
        (
            Role::Person,
            Request::SetAutonomy {
                level,
                confirm_high,
            },
        ) => {
            let by = format!("tyba autonomy ({})", peer(pid));
            match b.set_autonomy(level, confirm_high, &by) {
                Ok(previous) => {
                    b.notice(&format!("autonomy {previous} -> {level} (by {by})"));
                    Reply {
                        ok: true,
                        session: Some(b.session_view()),
                        previous: Some(previous),
                        ..Reply::default()
                    }
                }
                Err(e) => Reply::error(e.to_string()),
            }
        }
        (Role::Person, Request::Stop) => {
            let by = format!("tyba stop ({})", peer(pid));
            match b.stop(&by) {
                Ok(n) => {
                    b.notice(&format!(
                        "the session is being stopped by {by}: {n} pending ask(s) denied, the agent's processes end, the worktree is kept"
                    ));
                    Reply {
                        ok: true,
                        session: Some(b.session_view()),
                        denied_pending: Some(n),
                        ..Reply::default()
                    }
                }
                Err(e) => Reply::error(e.to_string()),
            }
        }
        (Role::Hook, req) => {
            let what = op_name(&req);
            let reason = "the hook socket only takes asks: the session's controls are not reachable from the sandbox";
            let by = format!(
                "a process of the sandbox ({}) on the hook socket",
                peer(pid)
            );
            b.refuse_control(&what, &by, reason);
            b.notice(&format!("refused `{what}` from {by}"));
            Reply::error(format!("refused: {reason}"))
        }
    }
}
