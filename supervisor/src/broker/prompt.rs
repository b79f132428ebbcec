//! The same-terminal prompt (issues 5 §3 and 14): `tyba run` relays the agent's pty, and when
//! an ask is pending the relay's [`RelayGate`] holds the agent's output, switches the person's
//! terminal to the alternate screen, draws the prompt there and reads single keys:
//!
//! | key | answer |
//! |---|---|
//! | `o` | once (on a red ask: then `y` or Enter to confirm, any other key goes back) |
//! | `a` | always (only offered for yellow commands; refused with a reason otherwise) |
//! | `d` | deny |
//! | `r` | deny with a reason (typed, Enter sends, Esc goes back) |
//! | `?` | details: the whole command, the asking process, its argv and directory, every reason, an edit's whole diff; `Space`/`b` page through them |
//! | `l`, Ctrl-C | later: give the screen back; the ask stays in `tyba inbox` |
//! | `s` | switch the session's autonomy level: then `l` low, `m` medium, `h` high, Esc back; a raise is confirmed (`y` or Enter for medium; typing `high` and Enter for high) |
//!
//! **Keys that cannot answer by accident.** Keys typed for the agent must not answer an ask
//! that appears under them (issue 14: the `o` of `echo done` approving a red `curl`):
//! - when a prompt appears, the terminal's unread input is discarded (`tcflush(TCIFLUSH)`):
//!   it was typed before the prompt existed;
//! - for [`ARM`] after an ask appears, and until [`QUIET`] has passed with no key, keys are
//!   dropped (a typing burst that runs into the prompt is dropped whole), and the prompt says
//!   how many it ignored; a read of several keys at once (a paste, or keys typed faster than
//!   tyba read them) is dropped the same way, an escape sequence (an arrow key) is ignored;
//! - allowing a red ask and raising the autonomy level take a second, deliberate key after
//!   [`QUIET`], and raising to `high` takes the level's name typed out.
//!
//! Only the text of a reason (or of `high`) is typed freely.
//!
//! **The header stays on screen.** The prompt is laid out for the terminal's size: its first
//! two rows (the marker with the session word, then the verdict and a one-line summary of the
//! action, cut with `…` to the width) and its last rows (the keys) are always drawn; the rest
//! (reasons, the asking process, the diff) fills the rows between, cut to fit. `?` shows the
//! whole command text wrapped, paged with `Space` and `b`. The waiting time is redrawn each
//! second.
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
//! An agent that is itself in the alternate screen (a full-screen TUI) gets a cleared screen
//! back, and an inline one (Claude Code's) a frame drawn relative to a cursor the prompt
//! moved; either way the relay then makes it redraw by resizing its pty by one row and,
//! a moment later, back (the kernel sends SIGWINCH to its foreground process group each
//! time). The terminal's reports to the agent's own
//! queries (cursor position, device attributes, colours: [`split_reports`]) reach the agent
//! while a prompt is shown, so a TUI waiting for one does not stall. The exec asks' `argv` is the asking
//! process's as `/proc` shows it before the exec (the exec's own argv and environment are in
//! the command line it was classified as, shown whole under `?`).

use super::proto::{PendingView, WireAnswer};
use super::Broker;
use crate::approve::RelayGate;
use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tyba_policy::Autonomy;

/// How long after an ask appears keys are dropped (type-ahead for the agent).
pub const ARM: Duration = Duration::from_millis(800);
/// How long with no key before the next key counts: a dropped key restarts it, and entering a
/// confirmation starts it, so a burst of keys never passes a prompt and its confirmation.
pub const QUIET: Duration = Duration::from_millis(500);

/// The terminal size assumed when it cannot be read: rows, columns.
const FALLBACK_SIZE: (usize, usize) = (24, 80);

/// How many lines of an edit's diff the prompt shows before `?` (details) shows all of it.
const DIFF_INLINE_LINES: usize = 12;
/// One logical line of the prompt: indented text, maybe coloured by tyba itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    indent: usize,
    colour: &'static str,
    text: String,
}

impl Line {
    fn plain(indent: usize, text: impl Into<String>) -> Line {
        Line {
            indent,
            colour: "",
            text: text.into(),
        }
    }

    /// The rows this line takes at `cols` columns (each at most `cols - 1` characters wide,
    /// so no row makes the terminal wrap or scroll), coloured and reset row by row.
    fn rows(&self, cols: usize) -> Vec<String> {
        let width = cols.saturating_sub(1 + self.indent).max(8);
        let chars: Vec<char> = self.text.chars().collect();
        let pad = " ".repeat(self.indent);
        let mut out = Vec::new();
        for seg in chars.chunks(width) {
            let seg: String = seg.iter().collect();
            if self.colour.is_empty() {
                out.push(format!("{pad}{seg}"));
            } else {
                out.push(format!("{pad}{}{seg}\x1b[0m", self.colour));
            }
        }
        if out.is_empty() {
            out.push(String::new());
        }
        out
    }
}

/// `text` cut to `max` characters, ending with `tail` when cut.
fn cut(text: &str, max: usize, tail: &str) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(tail.chars().count());
    let mut s: String = text.chars().take(keep).collect();
    s.push_str(tail);
    s.chars().take(max).collect()
}

/// Appends an edit's diff to the prompt's lines: the first [`DIFF_INLINE_LINES`], or with
/// `details` all of it (the broker bounded it already). Each line is cleaned again, then
/// coloured by tyba itself: additions green, removals red, hunk headers cyan.
fn diff_lines(l: &mut Vec<Line>, diff: &str, details: bool) {
    let total = diff.lines().count();
    let shown = if details {
        total
    } else {
        total.min(DIFF_INLINE_LINES)
    };
    l.push(Line::plain(0, ""));
    l.push(Line::plain(2, "diff (the change the tool would make):"));
    for line in diff.lines().take(shown) {
        let text = super::text::clean(line);
        let colour = if text.starts_with("+++") || text.starts_with("---") {
            "\x1b[1m"
        } else if text.starts_with('+') {
            "\x1b[32m"
        } else if text.starts_with('-') {
            "\x1b[31m"
        } else if text.starts_with("@@") {
            "\x1b[36m"
        } else {
            ""
        };
        l.push(Line {
            indent: 4,
            colour,
            text,
        });
    }
    if shown < total {
        l.push(Line::plain(
            4,
            format!("… {} more lines: [?] shows the whole diff", total - shown),
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
    /// Confirming a raise to `medium` (`y` or Enter).
    ConfirmRaise(Autonomy),
    /// Confirming the raise to `high`: the word typed so far (`high` and Enter confirm).
    ConfirmHigh(String),
    /// Confirming `once` on a red ask (`y` or Enter).
    ConfirmRed,
}

impl Mode {
    /// Modes that take typed text: every key counts, pastes too.
    fn typing(&self) -> bool {
        matches!(self, Mode::Reason(_) | Mode::ConfirmHigh(_))
    }
}

#[derive(Debug)]
struct PState {
    /// The ask on screen.
    showing: Option<PendingView>,
    mode: Mode,
    details: bool,
    /// In details: the first body row shown.
    scroll: usize,
    /// The last body page's first row, as last drawn.
    max_scroll: usize,
    message: Option<String>,
    /// Whether the agent has switched its own screen to the alternate buffer.
    agent_alt: bool,
    later: HashSet<String>,
    /// Keys before this instant are dropped ([`ARM`], [`QUIET`]).
    armed_at: Instant,
    /// Keys dropped since the ask on screen appeared.
    dropped: usize,
    /// A prompt left the agent's full-screen display cleared: the relay makes it redraw.
    redraw: bool,
}

/// The prompt; attach it with [`Broker::set_prompt`] and hand it to the relay as its gate.
pub struct Prompt {
    broker: Broker,
    secret: String,
    st: Mutex<PState>,
    cv: Condvar,
    out: Mutex<Box<dyn Write + Send>>,
    /// The terminal's size, rows and columns, when known.
    size: Box<dyn Fn() -> Option<(usize, usize)> + Send + Sync>,
    /// Whether standard input is the person's terminal (its unread input is discarded when
    /// a prompt appears).
    terminal: bool,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt").finish_non_exhaustive()
    }
}

impl Prompt {
    /// A prompt drawing on `out`, marked with `secret`, laid out for a terminal of
    /// `rows` × `cols` (the size is not read from anywhere: for tests and for outputs that
    /// are not a terminal). Starts the thread that follows the broker's pending asks.
    pub fn start_sized(
        broker: &Broker,
        secret: String,
        out: Box<dyn Write + Send>,
        rows: usize,
        cols: usize,
    ) -> Arc<Prompt> {
        Self::start_with(
            broker,
            secret,
            out,
            Box::new(move || Some((rows, cols))),
            false,
        )
    }

    /// A prompt drawing on `out` (the person's terminal: `tyba run`'s stdout), marked with
    /// `secret`, laid out for standard output's window size (80 × 24 when unknown); the
    /// unread input of standard input (the same terminal) is discarded whenever a prompt
    /// appears. Starts the thread that follows the broker's pending asks.
    pub fn start(broker: &Broker, secret: String, out: Box<dyn Write + Send>) -> Arc<Prompt> {
        let size = Box::new(|| {
            use std::os::fd::AsFd;
            let ws = crate::sys::get_winsize(std::io::stdout().as_fd())?;
            (ws.ws_row > 0 && ws.ws_col > 0)
                .then(|| (usize::from(ws.ws_row), usize::from(ws.ws_col)))
        });
        Self::start_with(broker, secret, out, size, true)
    }

    fn start_with(
        broker: &Broker,
        secret: String,
        out: Box<dyn Write + Send>,
        size: Box<dyn Fn() -> Option<(usize, usize)> + Send + Sync>,
        terminal: bool,
    ) -> Arc<Prompt> {
        let p = Arc::new(Prompt {
            broker: broker.clone(),
            secret,
            st: Mutex::new(PState {
                showing: None,
                mode: Mode::Keys,
                details: false,
                scroll: 0,
                max_scroll: 0,
                message: None,
                agent_alt: false,
                later: HashSet::new(),
                armed_at: Instant::now(),
                dropped: 0,
                redraw: false,
            }),
            cv: Condvar::new(),
            out: Mutex::new(out),
            size,
            terminal,
        });
        broker.set_prompt(Arc::clone(&p));
        let me = Arc::clone(&p);
        let _ = std::thread::Builder::new()
            .name("tyba-prompt".into())
            .spawn(move || {
                let mut seen = 0;
                loop {
                    seen = me.broker.wait_change(seen, Duration::from_millis(250));
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
            self.draw(&mut st, more);
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

    /// Discards what the person typed that tyba has not read yet: it was typed before the
    /// prompt was there (`tcflush(3)`, `TCIFLUSH`). Nothing when standard input is not the
    /// terminal.
    fn discard_typed_ahead(&self) {
        if self.terminal {
            use std::os::fd::AsFd;
            let _ = nix::sys::termios::tcflush(
                std::io::stdin().as_fd(),
                nix::sys::termios::FlushArg::TCIFLUSH,
            );
        }
    }

    /// Shows the oldest pending ask (not deferred), or gives the screen back; redraws the
    /// ask on screen when its waiting time reaches a new second.
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
        let more = pending.len().saturating_sub(1);
        if let (Some(a), Some(b)) = (&st.showing, &next) {
            if a.id == b.id {
                let tick = a.waited_ms / 1000 != b.waited_ms / 1000;
                st.showing = next;
                if tick {
                    self.draw(&mut st, more);
                }
                return;
            }
        }
        match next {
            Some(p) => {
                let entering = st.showing.is_none();
                st.showing = Some(p);
                st.mode = Mode::Keys;
                st.details = false;
                st.scroll = 0;
                st.dropped = 0;
                st.armed_at = Instant::now() + ARM;
                if entering {
                    self.discard_typed_ahead();
                    let enter = if st.agent_alt { "" } else { "\x1b[?1049h" };
                    self.write(&format!("{enter}\x07\x1b]2;tyba: ask waiting\x07"));
                }
                self.draw(&mut st, more);
            }
            None => {
                if st.showing.take().is_some() {
                    let leave = if st.agent_alt { "" } else { "\x1b[?1049l" };
                    self.write(&format!("\x1b[H\x1b[2J{leave}\x1b]2;tyba\x07"));
                    // The agent's screen is redrawn on a resize: a full-screen one was drawn
                    // over, and an inline one (Claude Code's) drew its frame relative to a
                    // cursor the prompt moved, with its output held meanwhile.
                    st.redraw = true;
                }
                st.message = None;
                self.cv.notify_all();
            }
        }
    }

    /// The rows of the prompt for `p` on a terminal of `rows` × `cols`: never more than
    /// `rows`, none wider than `cols - 1`; the first two are the marker (session word) and
    /// the verdict with a one-line summary, the last ones the keys. Updates the details'
    /// scroll bound.
    fn frame(
        &self,
        st: &mut PState,
        p: &PendingView,
        more: usize,
        rows: usize,
        cols: usize,
    ) -> Vec<String> {
        let rows = rows.max(8);
        let cols = cols.max(24);
        // Everything but the marker comes from the agent's side: no control characters.
        let clean = super::text::clean;
        let marker = format!(
            " tyba \u{258c} {} \u{258c} session word: {} ",
            p.id, self.secret
        );
        let marker = cut(&marker, cols - 1, "…");
        let action = clean(&p.action);
        // The command behind the agent's shell wrapper first: the wrapper's housekeeping is
        // neutral, the command is the whole risk; `?` shows the whole line.
        let headline = match &p.inner_command {
            Some(i) => format!("run `{}`", clean(i.trim())),
            None => action.clone(),
        };
        let summary = format!("  {}: {headline}", p.verdict);
        let tail = format!("… ({} characters: [?] shows all)", headline.chars().count());
        let top = vec![
            format!("\x1b[7m{marker}\x1b[0m"),
            cut(&summary, cols - 1, &tail),
        ];

        let mut body: Vec<Line> = Vec::new();
        if p.inner_command.is_some() {
            body.push(Line::plain(
                2,
                format!(
                    "inside the agent's shell wrapper (the whole line: {} characters, [?] shows it)",
                    action.chars().count()
                ),
            ));
        }
        let reasons = if st.details { 64 } else { 2 };
        for r in p.reasons.iter().take(reasons) {
            body.push(Line::plain(2, format!("why: {}", clean(r))));
        }
        if p.reasons.len() > reasons {
            let more = p.reasons.len() - reasons;
            let (noun, them) = if more == 1 {
                ("reason", "it")
            } else {
                ("reasons", "them")
            };
            body.push(Line::plain(
                2,
                format!("… {more} more {noun}: [?] shows {them}"),
            ));
        }
        let cwd = if p.cwd.is_empty() { "?" } else { &p.cwd };
        // A hook's ask names the tool call (its connection is the supervisor's own).
        let by = match &p.caller {
            Some(c) => clean(c),
            None => format!("pid {}", p.pid),
        };
        body.push(Line::plain(
            2,
            format!(
                "by {by} in {} (waiting {}s)",
                clean(cwd),
                p.waited_ms / 1000
            ),
        ));
        if st.details {
            body.push(Line::plain(0, ""));
            body.push(Line::plain(2, format!("{} (the whole text):", p.kind)));
            body.push(Line::plain(4, action.clone()));
            match &p.caller {
                Some(c) => body.push(Line::plain(
                    2,
                    format!(
                        "asked by the agent's hook (tyba hook) before {} runs; the exec it leads to is checked again by the sandbox",
                        clean(c)
                    ),
                )),
                None => {
                    let who = if p.kind == "command" {
                        "argv of the exec"
                    } else {
                        "argv of the asking process"
                    };
                    body.push(Line::plain(
                        2,
                        format!("{who}: {}", clean(&p.argv.join(" "))),
                    ));
                }
            }
            if !p.env.is_empty() {
                body.push(Line::plain(2, "environment it sets, judged with it:"));
                for e in &p.env {
                    body.push(Line::plain(4, clean(e)));
                }
            }
        }
        if let Some(diff) = &p.diff {
            diff_lines(&mut body, diff, st.details);
        }

        let mut foot: Vec<Line> = vec![Line::plain(0, "")];
        if p.kind == "pause" {
            foot.push(Line::plain(2, "the agent's processes are frozen"));
            foot.push(Line::plain(
                2,
                "[o] resume   [d] end the session   [l] later",
            ));
        } else {
            let always = if p.always_allowed {
                "[a] always (this exact command, this session)"
            } else {
                "[a] always: not offered (only yellow commands can be remembered)"
            };
            let once = if p.verdict == "red" {
                "[o] once (then [y] to confirm)"
            } else {
                "[o] once"
            };
            foot.push(Line::plain(
                2,
                format!("{once}   {always}   [d] deny   [r] deny with a reason"),
            ));
            let pages = if st.details {
                "   [Space]/[b] page"
            } else {
                ""
            };
            foot.push(Line::plain(
                2,
                format!(
                    "[?] details{pages}   [l] later (Ctrl-C)   [s] switch autonomy (now {})",
                    self.broker.control().autonomy()
                ),
            ));
        }
        if more > 0 {
            foot.push(Line::plain(
                2,
                format!("({more} more waiting; `tyba inbox` lists them)"),
            ));
        }
        match &st.mode {
            Mode::Reason(text) => {
                foot.push(Line::plain(0, ""));
                foot.push(Line::plain(
                    2,
                    format!("reason (Enter sends, Esc goes back): {}", clean(text)),
                ));
            }
            Mode::Level => {
                foot.push(Line::plain(0, ""));
                foot.push(Line::plain(
                    2,
                    "autonomy: [l] low   [m] medium   [h] high (trusted workspaces only)   [Esc] back",
                ));
            }
            Mode::ConfirmRaise(level) => {
                foot.push(Line::plain(0, ""));
                foot.push(Line::plain(
                    2,
                    format!("raise autonomy to {level}? [y] or Enter: yes   any other key: no"),
                ));
            }
            Mode::ConfirmHigh(text) => {
                foot.push(Line::plain(0, ""));
                foot.push(Line::plain(2, "raise autonomy to HIGH? yellow commands (builds, scripts, installs) will run without asking; red still asks."));
                foot.push(Line::plain(
                    2,
                    format!(
                        "type `high` and Enter if this workspace is trusted (Esc: no): {}",
                        clean(text)
                    ),
                ));
            }
            Mode::ConfirmRed => {
                foot.push(Line::plain(0, ""));
                foot.push(Line::plain(
                    2,
                    format!(
                        "allow this RED action once ({})? [y]: yes, allow it   any other key: no",
                        cut(&action, 60, "…")
                    ),
                ));
            }
            Mode::Keys => {}
        }
        if let Some(m) = &st.message {
            foot.push(Line::plain(0, ""));
            foot.push(Line::plain(2, clean(m)));
        }

        let mut foot_rows: Vec<String> = foot.iter().flat_map(|l| l.rows(cols)).collect();
        // The keys keep at least the rows under the top; the newest lines (mode, message)
        // are the ones kept.
        let room = rows - top.len();
        if foot_rows.len() > room {
            foot_rows.drain(..foot_rows.len() - room);
        }
        let body_rows: Vec<String> = body.iter().flat_map(|l| l.rows(cols)).collect();
        let avail = room - foot_rows.len();
        let mut shown: Vec<String> = Vec::new();
        if body_rows.len() <= avail {
            st.max_scroll = 0;
            shown = body_rows;
        } else if avail > 0 {
            let page = avail - 1;
            st.max_scroll = body_rows.len().saturating_sub(page);
            let from = if st.details {
                st.scroll.min(st.max_scroll)
            } else {
                0
            };
            let to = (from + page).min(body_rows.len());
            shown.extend(body_rows[from..to].iter().cloned());
            let note = if st.details {
                format!(
                    "  … rows {}–{} of {}: [Space] next page, [b] back",
                    from + 1,
                    to,
                    body_rows.len()
                )
            } else {
                format!(
                    "  … {} more rows: [?] shows everything",
                    body_rows.len() - to
                )
            };
            shown.push(cut(&note, cols - 1, "…"));
        }
        let mut out = top;
        out.extend(shown);
        out.extend(foot_rows);
        out
    }

    fn draw(&self, st: &mut PState, more: usize) {
        let Some(p) = st.showing.clone() else { return };
        let (rows, cols) = (self.size)().unwrap_or(FALLBACK_SIZE);
        let frame = self.frame(st, &p, more, rows, cols);
        // Drawn over the previous frame row by row (no clear: no flicker on the timer's
        // redraw), the last row without a line break so the screen never scrolls.
        let mut s = String::from("\x1b[H");
        let n = frame.len();
        for (i, row) in frame.iter().enumerate() {
            s.push_str(row);
            s.push_str("\x1b[K");
            if i + 1 < n {
                s.push_str("\r\n");
            }
        }
        s.push_str("\x1b[J");
        self.write(&s);
    }

    fn answer(&self, st: &mut PState, id: &str, a: WireAnswer, reason: Option<String>) {
        match self.broker.answer(id, a, reason, "terminal") {
            Ok(()) => st.message = None,
            Err(e) => st.message = Some(e.to_string()),
        }
    }

    /// Enters a mode that waits for a deliberate second key: keys before [`QUIET`] has
    /// passed are dropped.
    fn confirm(st: &mut PState, mode: Mode) {
        st.mode = mode;
        st.armed_at = Instant::now() + QUIET;
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
            Mode::Level => {
                let now = self.broker.control().autonomy();
                let level = match b {
                    b'l' | b'L' => Some(Autonomy::Low),
                    b'm' | b'M' => Some(Autonomy::Medium),
                    b'h' | b'H' => Some(Autonomy::High),
                    _ => None,
                };
                match (level, b) {
                    (Some(l), _) if l <= now => self.set_level(st, l, false),
                    (Some(Autonomy::High), _) => {
                        Self::confirm(st, Mode::ConfirmHigh(String::new()))
                    }
                    (Some(l), _) => Self::confirm(st, Mode::ConfirmRaise(l)),
                    (None, 0x1b) => st.mode = Mode::Keys,
                    (None, _) => {
                        st.message = Some("autonomy: l low, m medium, h high, Esc back".into())
                    }
                }
            }
            Mode::ConfirmRaise(level) => match b {
                b'y' | b'Y' | b'\r' | b'\n' => self.set_level(st, level, false),
                _ => {
                    st.mode = Mode::Keys;
                    st.message = Some(format!(
                        "autonomy stays {}",
                        self.broker.control().autonomy()
                    ));
                }
            },
            Mode::ConfirmHigh(mut text) => match b {
                b'\r' | b'\n' if text.trim().eq_ignore_ascii_case("high") => {
                    self.set_level(st, Autonomy::High, true)
                }
                0x7f | 0x08 => {
                    text.pop();
                    st.mode = Mode::ConfirmHigh(text);
                }
                0x20..=0x7e if text.len() < 16 => {
                    text.push(char::from(b));
                    st.mode = Mode::ConfirmHigh(text);
                }
                _ => {
                    st.mode = Mode::Keys;
                    st.message = Some(format!(
                        "autonomy stays {} (raising to high takes the word `high` typed out)",
                        self.broker.control().autonomy()
                    ));
                }
            },
            // Only `y`: Enter would let a word typed for the agent that holds an `o`
            // ("cargo⏎") allow a red action by itself.
            Mode::ConfirmRed => match b {
                b'y' | b'Y' => {
                    st.mode = Mode::Keys;
                    self.answer(st, &p.id, WireAnswer::Once, None);
                }
                _ => {
                    st.mode = Mode::Keys;
                    st.message =
                        Some("not allowed: [o] then [y] allows this red action once".into());
                }
            },
            Mode::Keys => {
                match b {
                    b'o' | b'O' if p.verdict == "red" => Self::confirm(st, Mode::ConfirmRed),
                    b'o' | b'O' => self.answer(st, &p.id, WireAnswer::Once, None),
                    b'a' | b'A' => self.answer(st, &p.id, WireAnswer::Always, None),
                    b'd' | b'D' => self.answer(st, &p.id, WireAnswer::Deny, None),
                    b'r' | b'R' => st.mode = Mode::Reason(String::new()),
                    b'?' => {
                        st.details = !st.details;
                        st.scroll = 0;
                    }
                    b' ' | b'j' if st.details => {
                        st.scroll = (st.scroll + page_step(&self.size)).min(st.max_scroll)
                    }
                    b'b' | b'k' if st.details => {
                        st.scroll = st.scroll.saturating_sub(page_step(&self.size))
                    }
                    b'l' | b'L' => {
                        st.later.insert(p.id.clone());
                    }
                    b's' | b'S' => Self::confirm(st, Mode::Level),
                    _ => st.message = Some(
                        "keys: o once, a always, d deny, r reason, ? details, l later, s autonomy"
                            .into(),
                    ),
                }
            }
        }
    }

    /// Takes one read of the person's keys while an ask is shown.
    fn keys(&self, st: &mut PState, bytes: &[u8]) {
        let Some(p) = st.showing.clone() else { return };
        // Ctrl-C leaves the prompt, whatever the mode and however it was typed.
        if bytes.contains(&0x03) {
            st.mode = Mode::Keys;
            st.later.insert(p.id);
            return;
        }
        let escape_sequence = bytes.len() > 1 && bytes[0] == 0x1b;
        if st.mode.typing() {
            // An arrow key is no text (and its `A` is no answer).
            if escape_sequence {
                return;
            }
            // Typed text ends where the mode does (Enter, Esc): the rest of the read is
            // dropped, never taken as answer keys.
            for b in bytes {
                self.key(st, *b);
                if !st.mode.typing() {
                    break;
                }
            }
            return;
        }
        let now = Instant::now();
        if now < st.armed_at || (bytes.len() > 1 && !escape_sequence) {
            st.dropped += bytes.len();
            st.armed_at = now + QUIET;
            st.message = Some(format!(
                "{} key{} ignored: typed as the prompt appeared or too fast to be an answer; read it, then press one key",
                st.dropped,
                if st.dropped == 1 { "" } else { "s" }
            ));
            return;
        }
        if escape_sequence {
            return;
        }
        if let Some(b) = bytes.first() {
            self.key(st, *b);
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

/// Rows one page of details moves: the terminal's height less the fixed rows, at least one.
fn page_step(size: &(dyn Fn() -> Option<(usize, usize)> + Send + Sync)) -> usize {
    let (rows, _) = size().unwrap_or(FALLBACK_SIZE);
    rows.saturating_sub(8).max(1)
}

/// Splits what the person's terminal sent into the reports it makes to the agent's queries
/// and the rest (keys): cursor position (`CSI row;col R`), device attributes and modes
/// (`CSI ? … c`, `CSI > … c`, `CSI ? … $ y`), window reports (`CSI … t`), focus (`CSI I`,
/// `CSI O`), and OSC and DCS replies (colours, `XTGETTCAP`) ended by BEL or ST (xterm's
/// ctlseqs). A full-screen agent that queries its terminal waits for these; taken as keys by
/// a prompt they would be lost and the agent would stall. They answer nothing: passing them
/// on while a prompt is shown gives the agent no say in it. A sequence cut by the read is a
/// key.
pub(crate) fn split_reports(bytes: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut reports, mut keys) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        match report_len(&bytes[i..]) {
            Some(n) => {
                reports.extend_from_slice(&bytes[i..i + n]);
                i += n;
            }
            None => {
                keys.push(bytes[i]);
                i += 1;
            }
        }
    }
    (reports, keys)
}

/// The length of the terminal report at the start of `b`, if one is there whole.
fn report_len(b: &[u8]) -> Option<usize> {
    if b.first() != Some(&0x1b) {
        return None;
    }
    match b.get(1)? {
        b'[' => {
            // CSI: parameter bytes 0x30–0x3f, intermediates 0x20–0x2f, one final byte.
            let mut j = 2;
            while b.get(j).is_some_and(|c| (0x30..=0x3f).contains(c)) {
                j += 1;
            }
            let params = &b[2..j];
            let mut k = j;
            while b.get(k).is_some_and(|c| (0x20..=0x2f).contains(c)) {
                k += 1;
            }
            let fin = *b.get(k)?;
            let inter = &b[j..k];
            let private = params.first().is_some_and(|c| matches!(c, b'?' | b'>'));
            let digits =
                |p: &[u8]| !p.is_empty() && p.iter().all(|c| c.is_ascii_digit() || *c == b';');
            let is_report = match (fin, inter) {
                (b'R', []) => digits(params) && params.contains(&b';'),
                (b'c', []) => private,
                (b'y', [b'$']) => true,
                (b't', []) => digits(params),
                (b'I' | b'O', []) => params.is_empty(),
                _ => false,
            };
            is_report.then_some(k + 1)
        }
        b']' | b'P' => {
            // OSC / DCS: up to BEL or ST (ESC \).
            let mut j = 2;
            while j < b.len() {
                if b[j] == 0x07 {
                    return Some(j + 1);
                }
                if b[j] == 0x1b {
                    return (b.get(j + 1) == Some(&b'\\')).then_some(j + 2);
                }
                j += 1;
            }
            None
        }
        _ => None,
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

    fn take_redraw(&self) -> bool {
        self.lock()
            .is_some_and(|mut st| std::mem::take(&mut st.redraw))
    }

    fn input(&self, bytes: &[u8]) -> bool {
        {
            let Some(mut st) = self.lock() else {
                return true;
            };
            if st.showing.is_none() {
                return false;
            }
            self.keys(&mut st, bytes);
        }
        self.refresh();
        let more = self.broker.pending().len().saturating_sub(1);
        if let Some(mut st) = self.lock() {
            let deferred = st
                .showing
                .as_ref()
                .is_some_and(|p| st.later.contains(&p.id));
            if !deferred {
                self.draw(&mut st, more);
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

    #[test]
    fn terminal_reports_are_told_from_keys() {
        let (r, k) = split_reports(b"\x1b[12;40R");
        assert_eq!(
            (r.as_slice(), k.as_slice()),
            (&b"\x1b[12;40R"[..], &b""[..])
        );
        // Keys around reports stay keys, in order; reports of every kind are taken out.
        let input = b"o\x1b[?62;22c\x1b]11;rgb:0000/0000/0000\x1b\\y\x1b[I\x1bP1+r544e\x1b\\\x1b[8;40;120t\x1b[?2026;2$y\r";
        let (r, k) = split_reports(input);
        assert_eq!(k, b"oy\r");
        assert_eq!(r.len() + k.len(), input.len());
        // Keys that only look alike stay keys: arrows, function keys, Alt-R, a bare `R`, a cut
        // sequence, an OSC with no end.
        for key in [
            &b"\x1b[A"[..],
            b"\x1b[15~",
            b"\x1bR",
            b"R",
            b"\x1b[12;",
            b"\x1b]11;rgb",
            b"\x1b[5R",
        ] {
            let (r, k) = split_reports(key);
            assert!(r.is_empty(), "{key:?} taken as a report");
            assert_eq!(k, key);
        }
    }

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
        /// Waits until `needle` is drawn, whatever line wrapping split it: escape sequences
        /// and whitespace are left out on both sides (the wrap point moves with the pid and
        /// the working directory a row shows).
        fn wait_for_flat(&self, needle: &str) {
            fn flat(s: &str) -> String {
                let mut out = String::new();
                let mut it = s.chars().peekable();
                while let Some(c) = it.next() {
                    if c == '\x1b' {
                        if it.peek() == Some(&'[') {
                            it.next();
                            for d in it.by_ref() {
                                if d.is_ascii_alphabetic() {
                                    break;
                                }
                            }
                        } else {
                            it.next();
                        }
                    } else if !c.is_whitespace() && !c.is_control() {
                        out.push(c);
                    }
                }
                out
            }
            let want = flat(needle);
            for _ in 0..1000 {
                let t = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
                if flat(&t).contains(&want) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("never drew {needle:?}");
        }

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
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            50,
            120,
        );
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
            files: Vec::new(),
        };
        let hb = b.clone();
        let h = std::thread::spawn(move || hb.ask_hook(ask, std::process::id()));
        let t = screen.wait_for("more lines: [?] shows the whole diff");
        std::thread::sleep(ARM + Duration::from_millis(100));
        // A hook's ask names the tool call and its directory, not the (supervisor's) peer.
        screen.wait_for_flat("by Claude Code's tool call Edit in /wt");
        assert!(
            !t.contains(&format!("by pid {}", std::process::id())),
            "{t}"
        );
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
        std::thread::sleep(QUIET + Duration::from_millis(100));
        assert!(p.input(b"o"));
        assert_eq!(h.join().unwrap().answer, WireAnswer::Once);
        b.close("over");
    }

    fn quiet_broker() -> Broker {
        let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", "/wt".into());
        cfg.socket = false;
        cfg.audit = false;
        cfg.notices = false;
        Broker::start(cfg).unwrap()
    }

    fn kernel_ask(
        b: &Broker,
        command: &str,
        verdict: tyba_policy::Verdict,
    ) -> std::thread::JoinHandle<crate::approve::Answer> {
        let req = crate::approve::AskRequest {
            kind: crate::approve::AskKind::Command {
                command: command.into(),
            },
            verdict,
            reasons: vec!["because".into()],
            rememberable: verdict == tyba_policy::Verdict::Yellow,
            pid: std::process::id(),
            exec: None,
        };
        let hb = b.clone();
        std::thread::spawn(move || crate::approve::Approver::ask(&hb, &req).unwrap())
    }

    fn settle(d: Duration) {
        std::thread::sleep(d + Duration::from_millis(120));
    }

    #[test]
    fn the_header_names_the_command_behind_the_agents_wrapper() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            30,
            100,
        );
        // Gemini CLI's wrapper around a yellow build, as the supervisor classified it.
        let line = "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/tyba-s/gemini-shell-Ab12/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\ncargo build --release\n)\n__code=$?\nexit $__code";
        let req = crate::approve::AskRequest {
            kind: crate::approve::AskKind::Command {
                command: line.into(),
            },
            verdict: tyba_policy::Verdict::Yellow,
            reasons: vec!["cargo runs the project's build scripts".into()],
            rememberable: true,
            pid: std::process::id(),
            exec: Some(crate::approve::ExecAsk {
                argv: vec!["bash".into(), "-c".into(), line.into()],
                cwd: "/wt".into(),
                env: Vec::new(),
                inner_command: Some("cargo build --release".into()),
                reach: Default::default(),
            }),
        };
        let hb = b.clone();
        let h = std::thread::spawn(move || crate::approve::Approver::ask(&hb, &req).unwrap());
        let t = screen.wait_for("inside the agent's shell wrapper");
        assert!(t.contains("yellow: run `cargo build --release`"), "{t}");
        assert!(
            !t.contains("run `shopt"),
            "the wrapper is not the header: {t}"
        );
        assert!(
            !t.contains("shopt -u"),
            "the wrapper is shown on [?] only: {t}"
        );
        // The whole line is one key away.
        settle(ARM);
        assert!(p.input(b"?"));
        let t = screen.wait_for("(the whole text):");
        assert!(t.contains("shopt -u promptvars"), "{t}");
        settle(QUIET);
        assert!(p.input(b"o"));
        assert_eq!(h.join().unwrap(), crate::approve::Answer::Once);
        b.close("over");
    }

    #[test]
    fn keys_typed_as_the_prompt_appears_and_bursts_answer_nothing() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            30,
            100,
        );
        let h = kernel_ask(&b, "touch x", tyba_policy::Verdict::Yellow);
        screen.wait_for("run `touch x`");
        // Type-ahead running into the prompt: one key at a time, as a person types.
        for k in b"echo done" {
            assert!(p.input(&[*k]));
            std::thread::sleep(Duration::from_millis(60));
        }
        screen.wait_for("keys ignored");
        assert_eq!(b.pending().len(), 1, "no key answered");
        // A burst read at once is no answer either, even after the pause.
        settle(QUIET);
        assert!(p.input(b"oooo"));
        assert_eq!(b.pending().len(), 1);
        // An escape sequence (an arrow key) is ignored.
        settle(QUIET);
        assert!(p.input(b"\x1b[A"));
        assert_eq!(b.pending().len(), 1);
        // One deliberate key after a pause answers.
        settle(QUIET);
        assert!(p.input(b"o"));
        assert_eq!(h.join().unwrap(), crate::approve::Answer::Once);
        b.close("over");
    }

    #[test]
    fn keys_after_typed_text_ends_and_arrow_keys_answer_nothing() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            30,
            100,
        );
        let h = kernel_ask(&b, "touch x", tyba_policy::Verdict::Yellow);
        screen.wait_for("run `touch x`");
        settle(ARM);
        assert!(p.input(b"r"));
        screen.wait_for("reason (Enter sends");
        // An arrow key in the reason: ignored, not Esc then `[` then `A` (always).
        assert!(p.input(b"\x1b[A"));
        // Text, Esc, then keys in the same read: the keys are not answers.
        assert!(p.input(b"text\x1boa"));
        settle(QUIET);
        assert_eq!(b.pending().len(), 1);
        settle(QUIET);
        assert!(p.input(b"d"));
        assert!(matches!(
            h.join().unwrap(),
            crate::approve::Answer::Deny { .. }
        ));
        b.close("over");
    }

    #[test]
    fn a_red_once_takes_a_confirmation_after_a_pause() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            30,
            100,
        );
        let h = kernel_ask(&b, "curl http://x", tyba_policy::Verdict::Red);
        screen.wait_for("run `curl http://x`");
        settle(ARM);
        assert!(p.input(b"o"));
        screen.wait_for("allow this RED action once");
        // The confirmation typed straight after is dropped, and so is an Enter.
        assert!(p.input(b"y"));
        assert!(p.input(b"\r"));
        assert_eq!(b.pending().len(), 1);
        // Any other key goes back without an answer.
        settle(QUIET);
        assert!(p.input(b"x"));
        screen.wait_for("not allowed: [o] then [y]");
        assert_eq!(b.pending().len(), 1);
        // A deliberate Enter does not confirm either: a word typed for the agent that holds
        // an `o` ("cargo⏎") would allow the red action by itself.
        settle(QUIET);
        assert!(p.input(b"o"));
        settle(QUIET);
        assert!(p.input(b"\r"));
        screen.wait_for("not allowed: [o] then [y]");
        assert_eq!(b.pending().len(), 1);
        settle(QUIET);
        assert!(p.input(b"o"));
        settle(QUIET);
        assert!(p.input(b"y"));
        assert_eq!(h.join().unwrap(), crate::approve::Answer::Once);
        b.close("over");
    }

    /// A prompt asks the relay for one redraw of the agent's screen when it leaves, over a
    /// full screen (drawn over) and over an ordinary one (an inline TUI's frame is drawn
    /// relative to the cursor).
    #[test]
    fn a_prompt_asks_for_one_redraw_when_it_leaves() {
        for (alt, want) in [(true, true), (false, true)] {
            let b = quiet_broker();
            let screen = Screen::default();
            let p = Prompt::start_sized(
                &b,
                "cedar-onyx-42".into(),
                Box::new(screen.clone()),
                30,
                100,
            );
            if alt {
                p.output(b"\x1b[?1049hTUI");
            }
            let h = kernel_ask(&b, "make", tyba_policy::Verdict::Yellow);
            screen.wait_for("run `make`");
            settle(ARM);
            assert!(p.input(b"o"));
            assert_eq!(h.join().unwrap(), crate::approve::Answer::Once);
            for _ in 0..200 {
                if p.lock().is_some_and(|st| st.showing.is_none()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(p.take_redraw(), want, "alt screen {alt}");
            assert!(!p.take_redraw(), "taken once");
            b.close("over");
        }
    }

    #[test]
    fn raising_autonomy_is_confirmed_and_high_is_typed_out() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(
            &b,
            "cedar-onyx-42".into(),
            Box::new(screen.clone()),
            30,
            100,
        );
        let h = kernel_ask(&b, "touch x", tyba_policy::Verdict::Yellow);
        screen.wait_for("run `touch x`");
        settle(ARM);
        let key = |k: &[u8]| {
            assert!(p.input(k));
            settle(QUIET);
        };
        // `shy` typed slowly: `s` opens the levels, `h` asks for the word, `y` is no word.
        key(b"s");
        key(b"h");
        screen.wait_for("type `high` and Enter");
        key(b"y");
        key(b"\r");
        assert_eq!(b.control().autonomy(), Autonomy::Medium);
        screen.wait_for("autonomy stays medium");
        // Lowering is at once; raising to medium takes `y`.
        key(b"s");
        key(b"l");
        assert_eq!(b.control().autonomy(), Autonomy::Low);
        key(b"s");
        key(b"m");
        screen.wait_for("raise autonomy to medium?");
        assert_eq!(b.control().autonomy(), Autonomy::Low);
        key(b"y");
        assert_eq!(b.control().autonomy(), Autonomy::Medium);
        // The word, typed out.
        key(b"s");
        key(b"h");
        assert!(p.input(b"high\r"));
        assert_eq!(b.control().autonomy(), Autonomy::High);
        assert_eq!(b.pending().len(), 1, "the ask stays asked");
        // Ctrl-C leaves the prompt: the screen is given back, the ask still waits.
        assert!(p.input(b"\x03"));
        screen.wait_for("\x1b[?1049l");
        assert_eq!(b.pending().len(), 1);
        assert!(!p.input(b"o"), "keys go to the agent again");
        b.close("over");
        let _ = h.join();
    }

    #[test]
    fn the_header_stays_whatever_the_command_and_the_waiting_time_moves() {
        let b = quiet_broker();
        let screen = Screen::default();
        let p = Prompt::start_sized(&b, "cedar-onyx-42".into(), Box::new(screen.clone()), 20, 60);
        let long = format!("echo {}", "x".repeat(5000));
        let h = kernel_ask(&b, &long, tyba_policy::Verdict::Yellow);
        screen.wait_for_flat("(waiting 1s)");
        let shown = b.pending()[0].clone();
        for details in [false, true] {
            let mut st = p.lock().unwrap();
            st.details = details;
            for scroll in [0, 3, 1000] {
                st.scroll = scroll;
                let rows = p.frame(&mut st, &shown, 0, 20, 60);
                assert!(rows.len() <= 20, "{rows:?}");
                assert!(rows[0].contains("session word: cedar-onyx-42"), "{rows:?}");
                assert!(rows[1].starts_with("  yellow: run `echo xxx"), "{rows:?}");
                assert!(
                    rows[1].contains("(5011 characters: [?] shows all)"),
                    "{rows:?}"
                );
                assert!(rows.iter().any(|r| r.contains("[o] once")), "{rows:?}");
                for r in &rows {
                    let visible = r.replace("\x1b[7m", "").replace("\x1b[0m", "");
                    assert!(visible.chars().count() < 60, "{r:?}");
                }
                if details {
                    assert!(
                        rows.iter()
                            .any(|r| r.contains("rows ") && r.contains("[Space]")),
                        "{rows:?}"
                    );
                }
            }
        }
        // Paging reaches the end of the whole text.
        {
            let mut st = p.lock().unwrap();
            st.details = true;
            st.scroll = usize::MAX / 2;
            let rows = p.frame(&mut st, &shown, 0, 20, 60);
            assert!(rows.iter().any(|r| r.contains("xxx`")), "{rows:?}");
        }
        b.close("over");
        let _ = h.join();
    }
}
