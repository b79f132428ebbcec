//! The session's audit log: one JSON line per request in
//! `$XDG_STATE_HOME/tyba/log/<session>.jsonl` (issue 5 §6).
//!
//! Logged: every ask with its answer, who answered and how long it waited; every refusal the
//! notify loop made without asking; pauses of the repeated-failure guard. An `always` answer
//! is logged as an answer, never as a rule: nothing ever reads the log back into a session.

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One line of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AuditLine {
    /// UTC time the request was made, RFC 3339 with milliseconds.
    pub time: String,
    /// The session id.
    pub session: String,
    /// The ask id (`<session>-<n>`), for asks and pauses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `command`, `connect`, `metadata`, `exec`, `hook` or `pause`.
    pub kind: String,
    /// What was requested.
    pub action: String,
    /// `green`, `yellow`, `red`, `blocked`, or empty when the refusal came without a verdict.
    pub verdict: String,
    /// The policy's decisive reasons, in order (they name the rules that matched).
    pub reasons: Vec<String>,
    /// `allow` (an exec run without asking), `ask`, `refuse` or `pause`.
    pub decision: String,
    /// `once`, `always`, `deny` (asks), `resume`, `end` (pauses); absent for refusals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The refusal text the agent got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who answered and where (`terminal`, `inbox pid 123 on /dev/pts/4`, `session end`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// How long the ask waited, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// The asking process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// For a hook's edit asked at low autonomy: the diff the person was shown (as listed in
    /// [`super::proto::PendingView::diff`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// For an exec: its own argv.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// For an exec: its working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// An append-only JSONL file.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creates, mode 0600) the log at `path` for appending.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)?;
        Ok(AuditLog {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line (one `write`, so concurrent writers never interleave).
    pub fn write(&self, line: &AuditLine) {
        let Ok(mut text) = serde_json::to_string(line) else {
            return;
        };
        text.push('\n');
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(text.as_bytes());
        }
    }
}

/// `time` formatted as RFC 3339 UTC with milliseconds (`2026-11-30T01:20:29.123Z`).
pub fn rfc3339(time: std::time::SystemTime) -> String {
    let d = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Reads a log back for `tyba log`: every line that parses, in order.
///
/// # Errors
/// The file cannot be read.
pub fn read(path: &Path) -> std::io::Result<Vec<AuditLine>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_915_229_123);
        assert_eq!(rfc3339(t), "2026-11-29T01:20:29.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn lines_round_trip() {
        let t = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&t.path().join("s.jsonl")).unwrap();
        let l = AuditLine {
            session: "s".into(),
            kind: "command".into(),
            action: "cargo test".into(),
            answer: Some("always".into()),
            ..AuditLine::default()
        };
        log.write(&l);
        log.write(&l);
        assert_eq!(read(log.path()).unwrap(), vec![l.clone(), l]);
    }
}
