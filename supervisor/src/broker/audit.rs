//! The session's audit log: one JSON line per request in
//! `$XDG_STATE_HOME/tyba/log/<session>.jsonl` (issue 5 §6).
//!
//! Logged: every ask with its answer, who answered and how long it waited; every refusal the
//! notify loop made without asking; pauses of the repeated-failure guard. An `always` answer
//! is logged as an answer, never as a rule: nothing ever reads the log back into a session.
//!
//! **Bounded.** A session's log takes at most about [`MAX_SESSION_LOG_BYTES`] on disk, so an
//! agent that floods it can neither fill the disk nor push its later actions out of sight:
//! the first half of the bound keeps the session's first entries (`<session>.jsonl`), then a
//! line of kind `truncated` says the bound was reached, and the newest entries go to
//! `<session>.jsonl.tail`, each a quarter of the bound, the one before kept as
//! `<session>.jsonl.tail.1`. A new tail segment starts with a `truncated` line whose
//! `dropped` counts the entries dropped between the first entries and the newest so far.
//! [`read`] puts them back in order with one `truncated` line where entries are missing.

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
    /// `command`, `connect`, `metadata`, `exec`, `hook`, `file`, `pause`, or `sandbox` (a
    /// note about what the session could not set up, [`crate::approve::Approver::note`]).
    pub kind: String,
    /// What was requested, whole (a command line as the agent wrote it, its wrapper
    /// included).
    pub action: String,
    /// For a command line that is one command in the agent's shell wrapper: that command
    /// (`tyba_policy::Classification::inner_command`), what `tyba log` shows. Absent for
    /// any other line, and in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner_command: Option<String>,
    /// `green`, `yellow`, `red`, `blocked`, or empty when the refusal came without a verdict.
    pub verdict: String,
    /// The policy's decisive reasons, in order (they name the rules that matched).
    pub reasons: Vec<String>,
    /// `allow` (an exec run without asking), `ask`, `refuse`, `pause`, or `note`.
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
    /// For a `truncated` line: how many entries were dropped to keep the log bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
}

/// The most bytes one session's log takes on disk, about (a line is never split, so each
/// part may go over by one line and a `truncated` note).
pub const MAX_SESSION_LOG_BYTES: u64 = 32 << 20;

/// The kind and decision of the lines that say the log was cut.
pub const TRUNCATED: &str = "truncated";

/// The newest entries of a log that reached its bound.
fn tail_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tail");
    PathBuf::from(p)
}

/// The segment of newest entries before the current one.
fn prev_tail_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tail.1");
    PathBuf::from(p)
}

fn open_append(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).mode(0o600);
    if truncate {
        o.write(true).truncate(true);
    } else {
        o.append(true);
    }
    o.custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

#[derive(Debug)]
struct Files {
    head: std::fs::File,
    head_bytes: u64,
    tail: Option<std::fs::File>,
    tail_bytes: u64,
    tail_lines: u64,
    prev_lines: u64,
    dropped: u64,
}

/// An append-only JSONL file, bounded ([`MAX_SESSION_LOG_BYTES`]).
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    bound: u64,
    files: Mutex<Files>,
}

impl AuditLog {
    /// Opens (creates, mode 0600) the log at `path` for appending, bounded to
    /// [`MAX_SESSION_LOG_BYTES`].
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        Self::open_bounded(path, MAX_SESSION_LOG_BYTES)
    }

    /// [`AuditLog::open`] with a bound of `bound` bytes.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open_bounded(path: &Path, bound: u64) -> std::io::Result<AuditLog> {
        let head = open_append(path, false)?;
        let head_bytes = head.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(AuditLog {
            path: path.to_path_buf(),
            bound,
            files: Mutex::new(Files {
                head,
                head_bytes,
                tail: None,
                tail_bytes: 0,
                tail_lines: 0,
                prev_lines: 0,
                dropped: 0,
            }),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `lines` in order, as [`AuditLog::write`] does one by one; a batch that fits in
    /// the part of the log it goes to takes one `write`.
    pub fn write_many(&self, lines: &[AuditLine]) {
        let texts: Vec<String> = lines.iter().filter_map(json_line).collect();
        let total: u64 = texts.iter().map(|t| t.len() as u64).sum();
        {
            let Ok(mut f) = self.files.lock() else { return };
            let joined = || texts.concat();
            if f.tail.is_none() {
                if f.head_bytes + total <= self.bound / 2 {
                    if f.head.write_all(joined().as_bytes()).is_ok() {
                        f.head_bytes += total;
                    }
                    return;
                }
            } else if f.tail_bytes + total <= (self.bound / 4).max(1) {
                let n = texts.len() as u64;
                if let Some(t) = f.tail.as_mut() {
                    if t.write_all(joined().as_bytes()).is_ok() {
                        f.tail_bytes += total;
                        f.tail_lines += n;
                    }
                }
                return;
            }
        }
        // Near a bound: line by line, so the cut falls where `write` puts it.
        for line in lines {
            self.write(line);
        }
    }

    /// Appends one line (one `write`, so concurrent writers never interleave), keeping the
    /// log within its bound (see the module's docs).
    pub fn write(&self, line: &AuditLine) {
        let Some(text) = json_line(line) else { return };
        let n = text.len() as u64;
        let Ok(mut f) = self.files.lock() else { return };
        let head_cap = self.bound / 2;
        let seg_cap = (self.bound / 4).max(1);
        if f.tail.is_none() {
            if f.head_bytes + n <= head_cap {
                if f.head.write_all(text.as_bytes()).is_ok() {
                    f.head_bytes += n;
                }
                return;
            }
            let note = self.note(
                line,
                format!(
                    "the audit log reached its bound ({head_cap} bytes for the first entries): the newest entries follow, older ones beyond the bound are dropped and counted"
                ),
                None,
            );
            let _ = f.head.write_all(note.as_bytes());
            let _ = std::fs::remove_file(prev_tail_path(&self.path));
            match open_append(&tail_path(&self.path), true) {
                Ok(t) => f.tail = Some(t),
                Err(_) => return,
            }
        }
        if f.tail_bytes + n > seg_cap && f.tail_lines > 0 {
            f.dropped += f.prev_lines;
            let (cur, prev) = (tail_path(&self.path), prev_tail_path(&self.path));
            if std::fs::rename(&cur, &prev).is_err() {
                return;
            }
            f.prev_lines = f.tail_lines;
            let mut t = match open_append(&cur, true) {
                Ok(t) => t,
                Err(_) => {
                    f.tail = None;
                    return;
                }
            };
            let dropped = f.dropped;
            let note = self.note(
                line,
                format!("{dropped} entries dropped to keep the audit log within its bound ({} bytes per session)", self.bound),
                Some(dropped),
            );
            let _ = t.write_all(note.as_bytes());
            f.tail_bytes = note.len() as u64;
            f.tail_lines = 0;
            f.tail = Some(t);
        }
        if let Some(t) = f.tail.as_mut() {
            if t.write_all(text.as_bytes()).is_ok() {
                f.tail_bytes += n;
                f.tail_lines += 1;
            }
        }
    }

    /// A `truncated` line for `like`'s session, as text.
    fn note(&self, like: &AuditLine, action: String, dropped: Option<u64>) -> String {
        json_line(&AuditLine {
            time: rfc3339(std::time::SystemTime::now()),
            session: like.session.clone(),
            kind: TRUNCATED.into(),
            action,
            decision: TRUNCATED.into(),
            dropped,
            ..AuditLine::default()
        })
        .unwrap_or_default()
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

fn json_line(line: &AuditLine) -> Option<String> {
    let mut text = serde_json::to_string(line).ok()?;
    text.push('\n');
    Some(text)
}

fn parse(text: &str) -> Vec<AuditLine> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Reads a log back for `tyba log`: every line that parses, in order: the first entries,
/// then, when the log reached its bound, its `truncated` note, one `truncated` line counting
/// the entries dropped (when some were), and the newest entries.
///
/// # Errors
/// The file cannot be read.
pub fn read(path: &Path) -> std::io::Result<Vec<AuditLine>> {
    let mut out = parse(&std::fs::read_to_string(path)?);
    let prev = std::fs::read_to_string(prev_tail_path(path))
        .map(|t| parse(&t))
        .unwrap_or_default();
    let cur = std::fs::read_to_string(tail_path(path))
        .map(|t| parse(&t))
        .unwrap_or_default();
    // The newest segment's note counts every entry dropped so far.
    let note = cur
        .iter()
        .chain(prev.iter())
        .find(|l| l.kind == TRUNCATED && l.dropped.is_some())
        .cloned();
    if let Some(n) = note.filter(|n| n.dropped.unwrap_or(0) > 0) {
        out.push(n);
    }
    out.extend(
        prev.into_iter()
            .chain(cur)
            .filter(|l| !(l.kind == TRUNCATED && l.dropped.is_some())),
    );
    Ok(out)
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

    #[test]
    fn a_flooded_log_stays_bounded_and_keeps_its_first_and_newest_entries() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("s.jsonl");
        let bound = 40_000;
        let log = AuditLog::open_bounded(&path, bound).unwrap();
        let line = |n: usize| AuditLine {
            session: "s".into(),
            kind: "exec".into(),
            action: format!("entry {n} {}", "x".repeat(100)),
            ..AuditLine::default()
        };
        let total = 5_000;
        for n in 0..total {
            log.write(&line(n));
        }
        let on_disk: u64 = [path.clone(), tail_path(&path), prev_tail_path(&path)]
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        assert!(on_disk <= bound + 2_000, "{on_disk} bytes on disk");
        let back = read(&path).unwrap();
        assert_eq!(back[0], line(0), "the first entries stay");
        assert_eq!(
            back.last().unwrap(),
            &line(total - 1),
            "the newest entries stay"
        );
        let notes: Vec<&AuditLine> = back.iter().filter(|l| l.kind == TRUNCATED).collect();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].action.contains("reached its bound"), "{notes:?}");
        let dropped = notes[1].dropped.unwrap();
        let kept = back.iter().filter(|l| l.kind == "exec").count() as u64;
        assert_eq!(
            kept + dropped,
            total as u64,
            "every entry is kept or counted"
        );
        // The kept entries are in order, with one gap where the dropped ones were.
        let ns: Vec<usize> = back
            .iter()
            .filter(|l| l.kind == "exec")
            .map(|l| l.action.split(' ').nth(1).unwrap().parse().unwrap())
            .collect();
        let gaps = ns.windows(2).filter(|w| w[1] != w[0] + 1).count();
        assert_eq!(gaps, 1, "{ns:?}");
        assert!(ns.windows(2).all(|w| w[1] > w[0]));
    }

    #[test]
    fn batches_leave_the_same_log_as_single_writes_across_the_bounds() {
        let line = |n: usize| AuditLine {
            session: "s".into(),
            kind: "exec".into(),
            action: format!("entry {n} {}", "x".repeat(n % 37)),
            ..AuditLine::default()
        };
        // The files' lines, without the time the `truncated` notes take when written.
        let files = |p: &Path| {
            [p.to_path_buf(), tail_path(p), prev_tail_path(p)]
                .iter()
                .map(|f| {
                    std::fs::read_to_string(f)
                        .unwrap_or_default()
                        .lines()
                        .map(|l| {
                            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                            v.as_object_mut().unwrap().remove("time");
                            v
                        })
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let t = tempfile::tempdir().unwrap();
        let (one, many) = (t.path().join("one.jsonl"), t.path().join("many.jsonl"));
        let a = AuditLog::open_bounded(&one, 30_000).unwrap();
        let b = AuditLog::open_bounded(&many, 30_000).unwrap();
        let lines: Vec<AuditLine> = (0..3_000).map(line).collect();
        for l in &lines {
            a.write(l);
        }
        // Batches of every size from 1 to 40, so some end exactly at a bound and some cross it.
        let mut rest = &lines[..];
        let mut k = 1;
        while !rest.is_empty() {
            let (now, later) = rest.split_at(k.min(rest.len()));
            b.write_many(now);
            rest = later;
            k = k % 40 + 1;
        }
        let (fa, fb) = (files(&one), files(&many));
        assert!(!fa[1].is_empty(), "the bound must have been reached");
        assert_eq!(fa, fb, "batched writes must leave the same files");
    }

    #[test]
    fn a_log_under_its_bound_has_no_note() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("s.jsonl");
        let log = AuditLog::open(&path).unwrap();
        log.write(&AuditLine::default());
        let back = read(&path).unwrap();
        assert_eq!(back.len(), 1);
        assert!(!tail_path(&path).exists());
    }
}
