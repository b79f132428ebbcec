//! The listening sockets: the person's (`tyba inbox/approve/deny`) and the hook-only one.
//!
//! Every connection is checked with `SO_PEERCRED`: the peer must run as the same user; on
//! the person's socket it must also be in the supervisor's own PID namespace, so a process
//! of the sandbox (its own PID namespace) is turned away even if it ever reached the path.
//! The hook socket takes only `ask`, the read-only `autonomy`, and `record` (a decision the
//! hook made without asking, written to the audit log).
//!
//! Every refusal of these checks, and every operation the hook socket refuses (an answer, a
//! listing, a change of level, a stop: what a process of the sandbox would try), is written
//! to the session's audit log as a `control` line with decision `refuse`, and shown on the
//! session's terminal.
//!
//! **One task per client.** Both sockets are served on one tokio runtime, shared by the
//! process's brokers and never shut down ([`runtime`]): an accept task per socket and a task
//! per connection, so fifty waiting hook asks and ten `tyba inbox --watch` clients cost
//! fifty-odd small tasks on two worker threads, not a thread each. What may block (the
//! policy's classification of a hook's command, a stop, a change of level, a notice drawn on
//! the person's terminal, the audit log of a refusal) runs on the runtime's bounded blocking
//! pool, never on a worker. The notify loop is not on this runtime: it keeps its own threads
//! and waits on the broker's condition variable.
//!
//! Bad clients are answered and dropped, never followed: a line over [`MAX_LINE_BYTES`] gets
//! an error and the connection is closed; a line that is not a request gets a `bad request`
//! error; a client that reads no reply for [`WRITE_TIMEOUT`] is dropped; a hook client that
//! hangs up while its ask waits has the ask denied at once ([`Broker::withdraw`]: its
//! channel died, so nobody can carry an answer back) and logged so.

use super::proto::{Reply, Request, MAX_LINE_BYTES};
use super::Broker;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// How long one reply may take to be written before its client is dropped (a client that
/// does not read).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Served::stop_all`] waits for the accept tasks to drop their listeners.
const STOP_WAIT: Duration = Duration::from_secs(1);
/// Worker threads of the broker's runtime: one. Its tasks only wait on sockets and timers
/// (classification, controls and notices go to the blocking pool), and each thread started
/// at the launch cost it about 50 µs on a 2-vCPU VM (docs/performance-run.md, run 20).
const WORKERS: usize = 1;
/// Threads of its blocking pool at most (classification, controls, notices).
const BLOCKING_THREADS: usize = 16;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The broker's runtime: built on first use, shared by every broker of the process, never
/// dropped (a runtime may not be dropped from one of its own tasks, which is where the last
/// clone of a broker can go).
///
/// # Errors
/// When its threads cannot be started.
pub(crate) fn runtime() -> std::io::Result<&'static tokio::runtime::Runtime> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name("tyba-broker")
        .enable_io()
        .enable_time()
        .build()?;
    // Two first uses at once: one runtime is kept, the other (never used) is dropped here,
    // outside any runtime.
    let _ = RUNTIME.set(rt);
    RUNTIME
        .get()
        .ok_or_else(|| std::io::Error::other("the broker's runtime is not set"))
}

/// Which socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The person's: list and answer.
    Person,
    /// The agent hook's: ask only.
    Hook,
}

/// A listening socket; [`Served::stop_all`] removes it.
#[derive(Debug)]
pub(crate) struct Served {
    pub path: PathBuf,
    stop: Arc<tokio::sync::Notify>,
    /// Disconnected once the accept task has dropped the listener.
    gone: std::sync::mpsc::Receiver<()>,
}

impl Served {
    /// Removes the sockets' paths, then ends their accept tasks and waits (up to
    /// [`STOP_WAIT`]) for the listeners to be closed, so that a caller releasing the session's
    /// lock next never leaves a listening socket without its lock: every task is told first,
    /// then they are waited for together (one wait on the runtime, not one each).
    /// Connections already accepted go on to their end.
    ///
    /// (A `shutdown(2)` of the listener would refuse connections without the wait, but a
    /// listener shut down reads as closed for good to tokio, whose `accept` then retries
    /// `EAGAIN` in a loop that never yields: the runtime's workers spun.)
    pub fn stop_all(all: Vec<Served>) {
        for s in &all {
            let _ = std::fs::remove_file(&s.path);
            s.stop.notify_one();
        }
        let deadline = std::time::Instant::now() + STOP_WAIT;
        for s in all {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let _ = s.gone.recv_timeout(left);
        }
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
    let rt = runtime()?;
    listener.set_nonblocking(true)?;
    let listener = {
        let _in_runtime = rt.enter();
        tokio::net::UnixListener::from_std(listener)?
    };
    let stop = Arc::new(tokio::sync::Notify::new());
    let (gone_tx, gone) = std::sync::mpsc::channel::<()>();
    let served = Served {
        path: path.to_path_buf(),
        stop: Arc::clone(&stop),
        gone,
    };
    let b = broker.clone();
    rt.spawn(async move {
        loop {
            tokio::select! {
                biased;
                () = stop.notified() => break,
                conn = listener.accept() => match conn {
                    Ok((conn, _)) => {
                        tokio::spawn(handle(b.clone(), conn, role));
                    }
                    // Out of descriptors, or a connection reset before it was taken: the
                    // listener itself is fine; a short pause keeps an error storm from
                    // spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
            }
        }
        drop(listener);
        drop(gone_tx);
    });
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
        Request::Record(r) => format!("record {}", r.action),
        Request::SetAutonomy { level, .. } => format!("set autonomy {level}"),
        Request::Stop => "stop".into(),
    }
}

/// Writes one reply line; `false` when the client is gone or reads nothing for
/// [`WRITE_TIMEOUT`].
async fn send(w: &mut OwnedWriteHalf, r: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_string(r) else {
        return false;
    };
    line.push('\n');
    matches!(
        tokio::time::timeout(WRITE_TIMEOUT, w.write_all(line.as_bytes())).await,
        Ok(Ok(()))
    )
}

/// Runs `f` on the runtime's blocking pool; `None` when it could not finish (it panicked,
/// or the runtime is shutting down).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(f).await.ok()
}

/// Resolves when the client hangs up (end of stream, or an error) before sending anything
/// more; never when it sends more (that is the next request, read after the reply).
async fn hung_up(r: &mut BufReader<OwnedReadHalf>) {
    match r.fill_buf().await {
        Ok([]) | Err(_) => {}
        Ok(_) => std::future::pending().await,
    }
}

/// One client, from its connection to its end.
async fn handle(b: Broker, conn: tokio::net::UnixStream, role: Role) {
    let Ok(cred) = conn.peer_cred() else {
        return;
    };
    let pid = cred.pid().unwrap_or(0);
    let (r, mut w) = conn.into_split();
    let me = nix::unistd::geteuid().as_raw();
    if cred.uid() != me || (role == Role::Person && !same_pid_namespace(pid)) {
        let reason = "refused: not this session's user outside the sandbox";
        let by = format!("uid {} pid {} (as the supervisor sees it)", cred.uid(), pid);
        let b2 = b.clone();
        let _ = blocking(move || {
            b2.refuse_control("connection to the person's socket", &by, reason);
            b2.notice(&format!(
                "refused a connection to this session's socket from {by}"
            ));
        })
        .await;
        let _ = send(&mut w, &Reply::error(reason)).await;
        return;
    }
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut r)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if buf.len() > MAX_LINE_BYTES {
            let _ = send(&mut w, &Reply::error("request too long")).await;
            return;
        }
        let reply = match serde_json::from_slice::<Request>(&buf) {
            Err(e) => Reply::error(format!("bad request: {e}")),
            Ok(req) => match (role, req) {
                (Role::Hook, Request::Ask(ask)) => match hook_ask(&b, ask, pid, &mut r).await {
                    Some(reply) => reply,
                    // The client hung up: nobody to reply to.
                    None => return,
                },
                // Quick and non-blocking: on the task itself.
                (Role::Person, req @ (Request::List | Request::Answer { .. }))
                | (_, req @ Request::Autonomy) => dispatch(&b, req, role, pid),
                // Off the task, and the reply written there at once: a `stop` ends the
                // session, and its process may exit before this task would run again.
                (role, req) => {
                    let b2 = b.clone();
                    let rt = tokio::runtime::Handle::current();
                    let done = blocking(move || {
                        let reply = dispatch(&b2, req, role, pid);
                        let sent = rt.block_on(send(&mut w, &reply));
                        (w, sent)
                    })
                    .await;
                    match done {
                        Some((back, true)) => {
                            w = back;
                            continue;
                        }
                        _ => return,
                    }
                }
            },
        };
        if !send(&mut w, &reply).await {
            return;
        }
    }
}

/// A hook's ask on its connection: queued off the task (classification may take a while),
/// then awaited; a client that hangs up meanwhile has its ask denied and gets no reply
/// (`None`).
async fn hook_ask(
    b: &Broker,
    ask: super::proto::HookAsk,
    pid: i32,
    r: &mut BufReader<OwnedReadHalf>,
) -> Option<Reply> {
    let asked = |a| Reply {
        ok: true,
        answer: Some(a),
        ..Reply::default()
    };
    let b2 = b.clone();
    let pid = u32::try_from(pid).unwrap_or(0);
    let Some(step) = blocking(move || b2.hook_begin(ask, pid)).await else {
        return Some(asked(super::deny_answer(
            "refused by tyba: the approval channel failed",
        )));
    };
    let w = match step {
        super::HookStep::Done(a) => return Some(asked(a)),
        super::HookStep::Waiting(w) => w,
    };
    let mut client_gone = false;
    let answer = tokio::select! {
        (answer, _, _) = b.wait_async(w.id) => answer,
        () = hung_up(r) => {
            client_gone = true;
            b.withdraw(w.id, "the asking client hung up");
            b.wait_async(w.id).await.0
        }
    };
    let a = b.hook_end(w, answer);
    (!client_gone).then(|| asked(a))
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
        (Role::Person, Request::Ask(_) | Request::Record(_)) => Reply::error(
            "asks and hook records come from the session's agent hook, not from this socket",
        ),
        (Role::Hook, Request::Record(r)) => {
            b.record_hook(r);
            Reply::ok()
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

/// [`dispatch`] as the person's socket would run it, for the broker's unit tests.
#[cfg(test)]
pub(crate) fn tests_dispatch_person(b: &Broker, req: Request) -> Reply {
    dispatch(b, req, Role::Person, 0)
}
