//! The client side of the protocol, for `tyba inbox/approve/deny`, `tyba sessions/autonomy/
//! stop` and the agent hook.

use super::paths;
use super::proto::{HookAnswer, HookAsk, Reply, Request, MAX_LINE_BYTES};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors talking to a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No socket directory could be found.
    #[error("no runtime or state directory: set XDG_RUNTIME_DIR, XDG_STATE_HOME or HOME")]
    NoDir,
    /// The id is not `<session>-<n>`.
    #[error("`{0}` is not an ask id (expected SESSION-N, as `tyba inbox` lists them)")]
    BadId(String),
    /// The session is not running.
    #[error("session {session} is not running (no live socket at {path})")]
    NoSession {
        /// The session id.
        session: String,
        /// Where its socket would be.
        path: PathBuf,
    },
    /// The exchange failed.
    #[error("talking to {path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The reply was not understood.
    #[error("bad reply from {path}: {detail}")]
    BadReply {
        /// The socket.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The session refused the request.
    #[error("{0}")]
    Refused(String),
    /// The socket directory exists but cannot be listed (inside a sandbox, Landlock refuses
    /// it).
    #[error("cannot list the sessions in {path}: {source}")]
    Dir {
        /// The socket directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A session id that is not one (`tyba run` makes 12 hex digits).
    #[error("`{0}` is not a session id (letters and digits, as `tyba sessions` lists them)")]
    BadSession(String),
    /// Several sessions are live and none was named.
    #[error("{n} live sessions ({list}): name one")]
    Ambiguous {
        /// How many.
        n: usize,
        /// Their ids, comma-separated.
        list: String,
    },
    /// No session is live.
    #[error("no live tyba session")]
    NoneLive,
}

/// Sends one request and reads one reply, within `timeout` (`None`: wait as long as it takes).
///
/// # Errors
/// [`ClientError::Io`] / [`ClientError::BadReply`]; a reply with `ok: false` is returned as
/// is (callers decide).
pub fn request(
    path: &Path,
    req: &Request,
    timeout: Option<Duration>,
) -> Result<Reply, ClientError> {
    let io = |source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut s = UnixStream::connect(path).map_err(io)?;
    s.set_read_timeout(timeout).map_err(io)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    let mut line = serde_json::to_string(req).map_err(|e| ClientError::BadReply {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    line.push('\n');
    s.write_all(line.as_bytes()).map_err(io)?;
    let mut r = BufReader::new(s).take(MAX_LINE_BYTES as u64 * 8);
    let mut buf = Vec::new();
    let n = r.read_until(b'\n', &mut buf).map_err(io)?;
    if n == 0 {
        return Err(ClientError::BadReply {
            path: path.to_path_buf(),
            detail: "the session hung up without answering".into(),
        });
    }
    serde_json::from_slice(&buf).map_err(|e| ClientError::BadReply {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// A session whose socket accepted the connection but did not answer: `(socket, what
/// happened)`.
pub type Silent = (PathBuf, String);

/// One live session and its pending asks.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its socket.
    pub socket: PathBuf,
    /// Its reply to `list`.
    pub reply: Reply,
}

/// Lists the user's live sessions (sockets in [`paths::socket_dir`]), oldest socket first.
/// The files of sessions proved dead are removed ([`clear_if_dead`]); nothing of a live or
/// starting session is ever touched.
///
/// # Errors
/// [`ClientError::NoDir`] without a socket directory.
pub fn list_sessions() -> Result<Vec<Listed>, ClientError> {
    list_sessions_and_silent().map(|(live, _)| live)
}

/// The session id a socket path names (`<id>.sock`).
fn socket_session(socket: &Path) -> Option<String> {
    let id = socket.file_stem()?.to_str()?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| id.to_string())
}

/// What became of a socket that refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The session is proved dead (its lock was free) and its files were removed; or it had
    /// already removed them itself.
    Gone,
    /// The session's lock is held: its supervisor lives (starting, ending, or not serving).
    /// Nothing was touched.
    Alive,
}

/// Decides the fate of `socket`, which refused a connection (nobody listens on it).
///
/// Staleness is decided by the session's lock ([`super::lock`]), never by timing: a session
/// publishes its socket only once it listens and holds its lock from before until after, so
/// the socket is removed only when that lock can be taken (the supervisor is dead) or when
/// there is no lock file at all (a tyba that took none; a session of this one always has
/// it while its socket exists).
pub fn clear_if_dead(socket: &Path) -> Refusal {
    let (Some(dir), Some(id)) = (socket.parent(), socket_session(socket)) else {
        return Refusal::Alive;
    };
    match super::lock::probe(dir, &id) {
        super::lock::Probe::Alive => Refusal::Alive,
        super::lock::Probe::Dead(d) => {
            d.clean();
            Refusal::Gone
        }
        super::lock::Probe::NoLock => {
            let _ = std::fs::remove_file(socket);
            Refusal::Gone
        }
    }
}

/// Whether the session of `socket`, which failed to answer, still lives: its socket is
/// there and its lock held (or it has no lock file, from a tyba that took none). A session
/// proved dead has its files removed.
fn still_there(socket: &Path) -> bool {
    if std::fs::symlink_metadata(socket).is_err() {
        return false;
    }
    let (Some(dir), Some(id)) = (socket.parent(), socket_session(socket)) else {
        return true;
    };
    match super::lock::probe(dir, &id) {
        super::lock::Probe::Alive => true,
        super::lock::Probe::Dead(d) => {
            d.clean();
            false
        }
        super::lock::Probe::NoLock => std::fs::symlink_metadata(socket).is_ok(),
    }
}

/// What listing one socket found.
enum Listing {
    Live(Box<Reply>),
    Silent(String),
    Gone,
}

/// Asks the session at `p` for its listing. A session that ends meanwhile (it hangs up or
/// resets the connection, its socket goes) is [`Listing::Gone`]; one whose exchange failed
/// any other way than by timing out is asked once more (`retry`) before it is called silent,
/// since a session that has just started ending may drop a connection it had queued.
fn list_one(p: &Path, retry: bool) -> Listing {
    match request(p, &Request::List, Some(Duration::from_secs(5))) {
        Ok(reply) if reply.ok => Listing::Live(Box::new(reply)),
        Ok(reply) => Listing::Silent(reply.error.unwrap_or_else(|| "refused".into())),
        Err(ClientError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Listing::Gone
        }
        Err(ClientError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            match clear_if_dead(p) {
                Refusal::Gone => Listing::Gone,
                // A session in the middle of ending closes its listener before it lets its
                // lock go: asked once more before it is called silent.
                Refusal::Alive if retry => {
                    std::thread::sleep(Duration::from_millis(50));
                    list_one(p, false)
                }
                Refusal::Alive => Listing::Silent(
                    "nobody listens on its socket, but its supervisor still holds the session's lock"
                        .into(),
                ),
            }
        }
        Err(e) => {
            let timed_out = matches!(&e, ClientError::Io { source, .. }
                if matches!(source.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
            if !still_there(p) {
                Listing::Gone
            } else if retry && !timed_out {
                std::thread::sleep(Duration::from_millis(50));
                list_one(p, false)
            } else {
                Listing::Silent(e.to_string())
            }
        }
    }
}

/// [`list_sessions`], plus the sessions whose socket accepted the connection but did not
/// answer within 5 s, or refused it while their supervisor still holds the session's lock:
/// `(socket, what happened)`. Such a session is alive but busy or stuck; `tyba stop SESSION`
/// still connects to it directly. A session that ended between the directory listing and
/// the end of the exchange (its socket removed, or its lock free) is neither.
///
/// Lock files left by dead supervisors without a socket (one killed while starting) are
/// removed too, under the same proof.
///
/// # Errors
/// [`ClientError::NoDir`] without a socket directory.
pub fn list_sessions_and_silent() -> Result<(Vec<Listed>, Vec<Silent>), ClientError> {
    let dir = paths::socket_dir().ok_or(ClientError::NoDir)?;
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => return Err(ClientError::Dir { path: dir, source }),
    };
    let mut socks: Vec<(std::time::SystemTime, PathBuf)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .map(|p| {
            let t = std::fs::symlink_metadata(&p)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (t, p)
        })
        .collect();
    socks.sort();
    let mut out = Vec::new();
    let mut silent = Vec::new();
    for (_, p) in &socks {
        match list_one(p, true) {
            Listing::Live(reply) => out.push(Listed {
                socket: p.clone(),
                reply: *reply,
            }),
            Listing::Silent(why) => silent.push((p.clone(), why)),
            Listing::Gone => {}
        }
    }
    for id in super::lock::locked_ids(&dir) {
        if socks
            .iter()
            .any(|(_, p)| socket_session(p).as_deref() == Some(id.as_str()))
        {
            continue;
        }
        if let super::lock::Probe::Dead(d) = super::lock::probe(&dir, &id) {
            d.clean();
        }
    }
    Ok((out, silent))
}

/// The socket of the session to act on: `session` when named (checked to be an id; its
/// socket must exist), else the only live one.
///
/// A named session is not looked up through the listing: its socket is connected to
/// directly, so that an attempt from inside a sandbox reaches the notify loop's `connect`
/// refusal (and its audit line) instead of failing quietly on the directory.
///
/// # Errors
/// [`ClientError::BadSession`], [`ClientError::NoSession`], [`ClientError::NoneLive`],
/// [`ClientError::Ambiguous`], and the listing's errors.
pub fn resolve_session(session: Option<&str>) -> Result<PathBuf, ClientError> {
    match session {
        Some(s) => {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(ClientError::BadSession(s.to_string()));
            }
            let dir = paths::socket_dir().ok_or(ClientError::NoDir)?;
            let path = paths::socket_path(&dir, s);
            if std::fs::symlink_metadata(&path).is_err() {
                return Err(ClientError::NoSession {
                    session: s.to_string(),
                    path,
                });
            }
            Ok(path)
        }
        None => {
            let live = list_sessions()?;
            match live.as_slice() {
                [] => Err(ClientError::NoneLive),
                [one] => Ok(one.socket.clone()),
                many => Err(ClientError::Ambiguous {
                    n: many.len(),
                    list: many
                        .iter()
                        .filter_map(|l| l.reply.session.as_ref().map(|s| s.id.clone()))
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            }
        }
    }
}

/// Sends a control request (`set_autonomy`, `stop`) to the session at `socket`.
///
/// # Errors
/// [`ClientError::NoSession`] when nobody listens there any more (the socket is removed when
/// [`clear_if_dead`] proves the session dead); I/O; [`ClientError::Refused`] with the
/// session's reason.
pub fn control(socket: &Path, req: &Request) -> Result<Reply, ClientError> {
    let r = match request(socket, req, Some(Duration::from_secs(30))) {
        Err(ClientError::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
            ) =>
        {
            if source.kind() == std::io::ErrorKind::ConnectionRefused {
                let _ = clear_if_dead(socket);
            }
            let session = socket
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(ClientError::NoSession {
                session,
                path: socket.to_path_buf(),
            });
        }
        other => other?,
    };
    if r.ok {
        Ok(r)
    } else {
        Err(ClientError::Refused(
            r.error.unwrap_or_else(|| "refused".into()),
        ))
    }
}

/// Answers ask `id` in its session.
///
/// # Errors
/// [`ClientError::BadId`], [`ClientError::NoSession`], I/O, or [`ClientError::Refused`] with
/// the session's reason (unknown id, `always` on a red ask, …).
pub fn answer(
    id: &str,
    answer: super::proto::WireAnswer,
    reason: Option<String>,
) -> Result<(), ClientError> {
    let (session, _) = paths::split_id(id).ok_or_else(|| ClientError::BadId(id.to_string()))?;
    let dir = paths::socket_dir().ok_or(ClientError::NoDir)?;
    let path = paths::socket_path(&dir, session);
    if !path.exists() {
        return Err(ClientError::NoSession {
            session: session.to_string(),
            path,
        });
    }
    let req = Request::Answer {
        id: id.to_string(),
        answer,
        reason,
    };
    let r = request(&path, &req, Some(Duration::from_secs(10)))?;
    if r.ok {
        Ok(())
    } else {
        Err(ClientError::Refused(
            r.error.unwrap_or_else(|| "refused".into()),
        ))
    }
}

/// Asks the session through its hook socket and waits up to `timeout` for the person.
///
/// # Errors
/// Any failure; the caller denies.
pub fn ask_hook(path: &Path, ask: &HookAsk, timeout: Duration) -> Result<HookAnswer, ClientError> {
    let r = request(path, &Request::Ask(ask.clone()), Some(timeout))?;
    match (r.ok, r.answer) {
        (true, Some(a)) => Ok(a),
        _ => Err(ClientError::Refused(
            r.error.unwrap_or_else(|| "no answer".into()),
        )),
    }
}
