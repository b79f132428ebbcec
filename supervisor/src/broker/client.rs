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
/// Sockets nobody listens on any more (a supervisor that was killed) are removed.
///
/// # Errors
/// [`ClientError::NoDir`] without a socket directory.
pub fn list_sessions() -> Result<Vec<Listed>, ClientError> {
    list_sessions_and_silent().map(|(live, _)| live)
}

/// [`list_sessions`], plus the sessions whose socket accepted the connection but did not
/// answer within 5 s: `(socket, what happened)`. Such a session is alive (its supervisor
/// holds the socket) but busy or stuck; `tyba stop SESSION` still connects to it directly.
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
    for (_, p) in socks {
        match request(&p, &Request::List, Some(Duration::from_secs(5))) {
            Ok(reply) if reply.ok => out.push(Listed { socket: p, reply }),
            Ok(reply) => silent.push((p, reply.error.unwrap_or_else(|| "refused".into()))),
            Err(ClientError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionRefused =>
            {
                let _ = std::fs::remove_file(&p);
            }
            Err(e) => silent.push((p, e.to_string())),
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
/// [`ClientError::NoSession`] when nobody listens there any more (the socket is removed);
/// I/O; [`ClientError::Refused`] with the session's reason.
pub fn control(socket: &Path, req: &Request) -> Result<Reply, ClientError> {
    let r = match request(socket, req, Some(Duration::from_secs(30))) {
        Err(ClientError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            let _ = std::fs::remove_file(socket);
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
