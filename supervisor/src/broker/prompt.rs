//! The same-terminal prompt (issue 5 §3): `tyba run` relays the agent's pty, and when an ask
//! is pending the relay's [`RelayGate`] holds the agent's output, switches the person's
//! terminal to the alternate screen, draws the prompt there and reads single keys:
//!
//! | key | answer |
//! |---|---|
//! | `o` | once |
//! | `a` | always (only offered for yellow commands; refused with a reason otherwise) |
//! | `d` | deny |
//! | `r` | deny with a reason (typed, Enter sends, Esc goes back) |
//! | `?` | details: the process, its argv and directory, every reason, an edit's whole diff |
//! | `l` | later: give the screen back; the ask stays in `tyba inbox` |
//! | `s` | switch the session's autonomy level: then `l` low, `m` medium, `h` high (then `y` to confirm), Esc back |
//!
//! A hook's edit asked at low autonomy shows the diff of the change under the ask, before
//! the keys: its first lines, and with `?` all of it (at most
//! [`super::text::DIFF_MAX_LINES`] lines), or why there is none.
//!
//! A level switched here applies to the next action; the ask on screen stays asked. It is
//! written to the audit log as answered by `terminal`.
//!
//! Then it leaves the alternate screen, which gives the agent's screen back intact, and
//! releases the held output.
//!
//! Not forgeable by the agent: nothing the agent writes reaches the terminal while the prompt
//! is shown (its output is held, and keys go to the prompt only while it is shown), and the
//! prompt carries the session's secret word, printed by `tyba run` on its own terminal before
//! the agent started (the agent never sees it). A prompt without the word is not tyba's.
//!
//! Limit: an agent that is itself in the alternate screen (a full-screen TUI) gets a cleared
//! screen back and redraws on its next output (or Ctrl-L).

use super::proto::{PendingView, WireAnswer};
use super::Broker;
use crate::approve::RelayGate;
use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use tyba_policy::Autonomy;

/// How many lines of an edit's diff the prompt shows before `?` (details) shows all of it.
const DIFF_INLINE_LINES: usize = 12;

/// Appends an edit's diff to the prompt's lines: the first [`DIFF_INLINE_LINES`], or with
/// `details` all of it (the broker bounded it already). Each line is cleaned again, then
/// coloured by tyba itself: additions green, removals red, hunk headers cyan.
fn diff_lines(l: &mut Vec<String>, diff: &str, details: bool) {
    let total = diff.lines().count();
    let shown = if details {
        total
    } else {
        total.min(DIFF_INLINE_LINES)
    };
    l.push(String::new());
    l.push("  diff (the change the tool would make):".to_string());
    for line in diff.lines().take(shown) {
        let line = super::text::clean(line);
        let colour = if line.starts_with("+++") || line.starts_with("---") {
            "\x1b[1m"
        } else if line.starts_with('+') {
            "\x1b[32m"
        } else if line.starts_with('-') {
            "\x1b[31m"
        } else if line.starts_with("@@") {
            "\x1b[36m"
        } else {
            ""
        };
        if colour.is_empty() {
            l.push(format!("    {line}"));
        } else {
            l.push(format!("    {colour}{line}\x1b[0m"));
        }
    }
    if shown < total {
        l.push(format!(
            "    … {} more lines: [?] shows the whole diff",
            total - shown
        ));
    }
}

const WORDS: &[&str] = &[
    "amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kestrel", "lagoon", "maple", "nectar", "onyx", "pepper", "quartz", "raven", "saffron",
    "tundra", "umber", "violet", "willow", "yarrow", "zephyr", "acorn", "birch", "cobalt", "dune",
    "falcon", "glacier", "heron",
];

/// A secret word for the session: two words and two digits from the kernel's random source.
pub fn secret_word() -> String {
    let mut b = [0u8; 4];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    if !ok {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(7);
        b = n.to_le_bytes();
    }
    let w = |x: u8| WORDS[usize::from(x) % WORDS.len()];
    format!("{}-{}-{:02}", w(b[0]), w(b[1]), u16::from(b[2]) % 100)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Keys,
    Reason(String),
    /// Choosing an autonomy level.
    Level,
    /// Confirming the raise to `high`.
    ConfirmHigh,
}

#[derive(Debug)]
struct PState {
    /// The ask on screen.
    showing: Option<PendingView>,
    mode: Mode,
    details: bool,
    message: Option<String>,
    /// Whether the agent has switched its own screen to the alternate buffer.
    agent_alt: bool,
    later: HashSet<String>,
}

/// The prompt; attach it with [`Broker::set_prompt`] and hand it to the relay as its gate.
pub struct Prompt {
    broker: Broker,
    secret: String,
    st: Mutex<PState>,
    cv: Condvar,
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt").finish_non_exhaustive()
    }
}

impl Prompt {
    /// A prompt drawing on `out` (the person's terminal: `tyba run`'s stdout), marked with
    /// `secret`. Starts the thread that follows the broker's pending asks.
    pub fn start(broker: &Broker, secret: String, out: Box<dyn Write + Send>) -> Arc<Prompt> {
        let p = Arc::new(Prompt {
            broker: broker.clone(),
            secret,
            st: Mutex::new(PState {
                showing: None,
                mode: Mode::Keys,
                details: false,
                message: None,
                agent_alt: false,
                later: HashSet::new(),
            }),
            cv: Condvar::new(),
            out: Mutex::new(out),
        });
        broker.set_prompt(Arc::clone(&p));
        let me = Arc::clone(&p);
        let _ = std::thread::Builder::new()
            .name("tyba-prompt".into())
            .spawn(move || {
                let mut seen = 0;
                loop {
                    seen = me.broker.wait_change(seen, Duration::from_millis(300));
                    me.refresh();
                    if me.broker.is_closed() {
                        return;
                    }
                }
            });
        p
    }

    /// Re-reads the pending asks soon (a new one arrived).
    pub fn wake(&self) {
        self.refresh();
    }

    /// Shows a line from tyba (a change of level, a stop, a refused control attempt): in the
    /// prompt when it is up, else as a marked line between the agent's output.
    pub fn notice(&self, text: &str) {
        let clean = super::text::clean(text);
        let more = self.broker.pending().len().saturating_sub(1);
        let Some(mut st) = self.lock() else { return };
        if st.showing.is_some() {
            st.message = Some(clean);
            self.draw(&st, more);
        } else {
            self.write(&format!("\r\n\x1b[7m tyba \x1b[0m {clean}\r\n"));
        }
    }

    fn set_level(&self, st: &mut PState, level: Autonomy, confirmed: bool) {
        st.mode = Mode::Keys;
        st.message = Some(
            match self.broker.set_autonomy(level, confirmed, "terminal") {
                Ok(previous) => format!(
                "autonomy {previous} -> {level}: applies to the next action (this ask stays asked)"
            ),
                Err(e) => e.to_string(),
            },
        );
    }

    fn lock(&self) -> Option<MutexGuard<'_, PState>> {
        self.st.lock().ok()
    }

    fn write(&self, text: &str) {
        if let Ok(mut o) = self.out.lock() {
            let _ = o.write_all(text.as_bytes());
            let _ = o.flush();
        }
    }

    /// Shows the oldest pending ask (not deferred), or gives the screen back.
    fn refresh(&self) {
        let pending = if self.broker.is_closed() {
            Vec::new()
        } else {
            self.broker.pending()
        };
        let Some(mut st) = self.lock() else { return };
        let current: HashSet<&str> = pending.iter().map(|p| p.id.as_str()).collect();
        st.later.retain(|id| current.contains(id.as_str()));
        let next = pending.iter().find(|p| !st.later.contains(&p.id)).cloned();
        let same = matches!((&st.showing, &next), (Some(a), Some(b)) if a.id == b.id);
        if same {
            return;
        }
        match next {
            Some(p) => {
                let entering = st.showing.is_none();
                st.showing = Some(p);
                st.mode = Mode::Keys;
                st.details = false;
                if entering {
                    let enter = if st.agent_alt { "" } else { "\x1b[?1049h" };
                    self.write(&format!("{enter}\x07\x1b]2;tyba: ask waiting\x07"));
                }
                let more = pending.len().saturating_sub(1);
                self.draw(&st, more);
            }
            None => {
                if st.showing.take().is_some() {
                    let leave = if st.agent_alt { "" } else { "\x1b[?1049l" };
                    self.write(&format!("\x1b[H\x1b[2J{leave}\x1b]2;tyba\x07"));
                }
                st.message = None;
                self.cv.notify_all();
            }
        }
    }

    fn draw(&self, st: &PState, more: usize) {
        let Some(p) = &st.showing else { return };
        // Everything but the header comes from the agent's side: no control characters.
        let clean = super::text::clean;
        let mut l: Vec<String> = vec![String::new()];
        l.push(format!("  {}: {}", p.verdict, clean(&p.action)));
        for r in p.reasons.iter().take(if st.details { 64 } else { 2 }) {
            l.push(format!("  why: {}", clean(r)));
        }
        let cwd = if p.cwd.is_empty() { "?" } else { &p.cwd };
        l.push(format!(
            "  by pid {} in {} (waiting {}s)",
            p.pid,
            clean(cwd),
            p.waited_ms / 1000
        ));
        if st.details {
            l.push(format!("  argv: {}", clean(&p.argv.join(" "))));
            l.push(format!("  kind: {}", p.kind));
        }
        if let Some(diff) = &p.diff {
            diff_lines(&mut l, diff, st.details);
        }
        l.push(String::new());
        if p.kind == "pause" {
            l.push("  the agent's processes are frozen".to_string());
            l.push("  [o] resume   [d] end the session   [l] later".to_string());
            return self.draw_lines(st, p, &l, more);
        }
        let always = if p.always_allowed {
            "[a] always (this exact command, this session)"
        } else {
            "[a] always: not offered (only yellow commands can be remembered)"
        };
        l.push(format!(
            "  [o] once   {always}   [d] deny   [r] deny with a reason   [?] details   [l] later"
        ));
        l.push(format!(
            "  [s] switch autonomy (now {})",
            self.broker.control().autonomy()
        ));
        self.draw_lines(st, p, &l, more)
    }

    fn draw_lines(&self, st: &PState, p: &PendingView, lines: &[String], more: usize) {
        let clean = super::text::clean;
        let mut l = lines.to_vec();
        if more > 0 {
            l.push(format!("  ({more} more waiting; `tyba inbox` lists them)"));
        }
        match &st.mode {
            Mode::Reason(text) => {
                l.push(String::new());
                l.push(format!(
                    "  reason (Enter sends, Esc goes back): {}",
                    clean(text)
                ));
            }
            Mode::Level => {
                l.push(String::new());
                l.push(
                    "  autonomy: [l] low   [m] medium   [h] high (trusted workspaces only)   [Esc] back"
                        .to_string(),
                );
            }
            Mode::ConfirmHigh => {
                l.push(String::new());
                l.push("  raise to high? yellow commands (builds, scripts, installs) will run without asking; red still asks.".to_string());
                l.push("  [y] yes, this workspace is trusted   any other key: no".to_string());
            }
            Mode::Keys => {}
        }
        if let Some(m) = &st.message {
            l.push(String::new());
            l.push(format!("  {}", clean(m)));
        }
        let header = format!(
            "\x1b[7m tyba \u{258c} {} \u{258c} session word: {} \x1b[0m",
            p.id, self.secret
        );
        let body: String = l.iter().map(|x| format!("{x}\r\n")).collect();
        self.write(&format!("\x1b[H\x1b[2J{header}\r\n{body}"));
    }

    fn answer(&self, st: &mut PState, id: &str, a: WireAnswer, reason: Option<String>) {
        match self.broker.answer(id, a, reason, "terminal") {
            Ok(()) => st.message = None,
            Err(e) => st.message = Some(e.to_string()),
        }
    }

    fn key(&self, st: &mut PState, b: u8) {
        let Some(p) = st.showing.clone() else { return };
        match st.mode.clone() {
            Mode::Reason(mut text) => match b {
                b'\r' | b'\n' => {
                    let r = Some(text).filter(|t| !t.trim().is_empty());
                    st.mode = Mode::Keys;
                    self.answer(st, &p.id, WireAnswer::Deny, r);
                }
                0x1b => st.mode = Mode::Keys,
                0x7f | 0x08 => {
                    text.pop();
                    st.mode = Mode::Reason(text);
                }
                0x20..=0x7e => {
                    if text.len() < 500 {
                        text.push(char::from(b));
                    }
                    st.mode = Mode::Reason(text);
                }
                _ => {}
            },
            Mode::Level => match b {
                b'l' | b'L' => self.set_level(st, Autonomy::Low, false),
                b'm' | b'M' => self.set_level(st, Autonomy::Medium, false),
                b'h' | b'H' if self.broker.control().autonomy() == Autonomy::High => {
                    self.set_level(st, Autonomy::High, false)
                }
                b'h' | b'H' => st.mode = Mode::ConfirmHigh,
                0x1b => st.mode = Mode::Keys,
                _ => st.message = Some("autonomy: l low, m medium, h high, Esc back".into()),
            },
            Mode::ConfirmHigh => match b {
                b'y' | b'Y' => self.set_level(st, Autonomy::High, true),
                _ => {
                    st.mode = Mode::Keys;
                    st.message = Some(format!(
                        "autonomy stays {}",
                        self.broker.control().autonomy()
                    ));
                }
            },
            Mode::Keys => {
                match b {
                    b'o' | b'O' => self.answer(st, &p.id, WireAnswer::Once, None),
                    b'a' | b'A' => self.answer(st, &p.id, WireAnswer::Always, None),
                    b'd' | b'D' => self.answer(st, &p.id, WireAnswer::Deny, None),
                    b'r' | b'R' => st.mode = Mode::Reason(String::new()),
                    b'?' => st.details = !st.details,
                    b'l' | b'L' => {
                        st.later.insert(p.id.clone());
                    }
                    b's' | b'S' => st.mode = Mode::Level,
                    _ => st.message = Some(
                        "keys: o once, a always, d deny, r reason, ? details, l later, s autonomy"
                            .into(),
                    ),
                }
            }
        }
    }

    fn track_alt(st: &mut PState, bytes: &[u8]) {
        let find = |pat: &[u8]| bytes.windows(pat.len()).rposition(|w| w == pat);
        let on = [&b"\x1b[?1049h"[..], b"\x1b[?1047h", b"\x1b[?47h"]
            .iter()
            .filter_map(|p| find(p))
            .max();
        let off = [&b"\x1b[?1049l"[..], b"\x1b[?1047l", b"\x1b[?47l"]
            .iter()
            .filter_map(|p| find(p))
            .max();
        match (on, off) {
            (Some(a), Some(b)) => st.agent_alt = a > b,
            (Some(_), None) => st.agent_alt = true,
            (None, Some(_)) => st.agent_alt = false,
            (None, None) => {}
        }
    }
}

impl RelayGate for Prompt {
    fn output(&self, bytes: &[u8]) {
        let Some(mut st) = self.lock() else { return };
        while st.showing.is_some() {
            st = match self.cv.wait_timeout(st, Duration::from_millis(200)) {
                Ok((g, _)) => g,
                Err(_) => return,
            };
            if st.showing.is_some() && self.broker.is_closed() {
                drop(st);
                self.refresh();
                st = match self.lock() {
                    Some(g) => g,
                    None => return,
                };
            }
        }
        Prompt::track_alt(&mut st, bytes);
        if let Ok(mut o) = self.out.lock() {
            let _ = o.write_all(bytes);
            let _ = o.flush();
        }
    }

    fn input(&self, bytes: &[u8]) -> bool {
        {
            let Some(mut st) = self.lock() else {
                return true;
            };
            if st.showing.is_none() {
                return false;
            }
            for b in bytes {
                self.key(&mut st, *b);
            }
        }
        self.refresh();
        let more = self.broker.pending().len().saturating_sub(1);
        if let Some(st) = self.lock() {
            let deferred = st
                .showing
                .as_ref()
                .is_some_and(|p| st.later.contains(&p.id));
            if !deferred {
                self.draw(&st, more);
            }
        }
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::proto::HookAsk;
    use super::super::BrokerConfig;
    use super::*;

    /// A terminal that keeps what is drawn on it.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn wait_for(&self, needle: &str) -> String {
            for _ in 0..1000 {
                let t = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
                if t.contains(needle) {
                    return t;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("never drew {needle:?}");
        }
    }

    #[test]
    fn an_edit_ask_shows_its_diff_before_the_answer_and_all_of_it_on_details() {
        let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", "/wt".into());
        cfg.socket = false;
        cfg.audit = false;
        cfg.notices = false;
        let b = Broker::start(cfg).unwrap();
        let screen = Screen::default();
        let p = Prompt::start(&b, "cedar-onyx-42".into(), Box::new(screen.clone()));
        let mut diff = String::from("--- src/a.rs\n+++ src/a.rs\n@@ -1,1 +1,30 @@\n-fn old() {}\n");
        for n in 0..30 {
            diff.push_str(&format!("+\x1b[2Jline {n}\n"));
        }
        let ask = HookAsk {
            agent: "claude-code".into(),
            tool: "Edit".into(),
            action: "write src/a.rs".into(),
            verdict: "green".into(),
            reasons: Vec::new(),
            rememberable: false,
            cwd: "/wt".into(),
            worktree: "/wt".into(),
            diff: Some(diff),
        };
        let hb = b.clone();
        let h = std::thread::spawn(move || hb.ask_hook(ask, std::process::id()));
        let t = screen.wait_for("more lines: [?] shows the whole diff");
        assert!(t.contains("diff (the change the tool would make):"), "{t}");
        assert!(t.contains("\x1b[31m-fn old() {}\x1b[0m"), "{t}");
        assert!(t.contains("\x1b[32m+?[2Jline 0\x1b[0m"), "{t}");
        assert!(
            !t.contains("line 8\x1b"),
            "only the first lines before details: {t}"
        );
        assert!(t.contains("… 22 more lines"), "{t}");
        // The diff comes before the keys.
        assert!(
            t.find("line 7").unwrap() < t.rfind("[o] once").unwrap(),
            "{t}"
        );
        assert!(p.input(b"?"));
        let t = screen.wait_for("line 29");
        assert!(!t.contains("\x1b[2Jline"), "{t}");
        assert!(p.input(b"o"));
        assert_eq!(h.join().unwrap().answer, WireAnswer::Once);
        b.close("over");
    }
}
