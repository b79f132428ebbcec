//! The repeated-failure guard (DESIGN.md §4, issue 5 §7): when the agent retries the same
//! refused action, after `nudge_after` refusals of it within [`WINDOW`] the refusal carries
//! a nudge to change approach; after `pause_after` the agent's processes are frozen
//! (`SIGSTOP`) and the person is asked to resume or end the session.
//!
//! A failure is a refusal or a denial the notify loop reports. Two failures are the same
//! action when they are of the same kind (exec, connect, metadata) and have the same action
//! key: for a command, the key "always" uses (the command behind the agent's shell wrapper,
//! `tyba_policy::Classification::inner_command`, else the whole line), with runs of
//! whitespace made one space; for anything else, what was attempted. Different refusals are
//! not a loop, however many, and whatever wrapper the agent puts around each (every wrapped
//! line of an agent starts with the same housekeeping). Any allowed ask starts every count
//! over. Exit statuses of commands are not watched (the supervisor does not see them).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a refusal counts towards a loop of the same action.
pub const WINDOW: Duration = Duration::from_secs(300);

/// The most different actions whose refusals are remembered at once (the oldest is
/// forgotten first), so an agent refused many different things holds bounded memory.
const MAX_KEYS: usize = 256;

/// What the guard says about one more failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to add.
    Quiet,
    /// Append this to the refusal.
    Nudge(String),
    /// Append this, and pause the session.
    Pause {
        /// Refusals of the same action within the window.
        failures: u32,
        /// The text to append.
        text: String,
    },
}

/// Counts the refusals of each action within [`WINDOW`].
#[derive(Debug, Clone, Default)]
pub struct Guard {
    nudge_after: u32,
    pause_after: u32,
    /// Per action key: when it was refused (within the window), and whether this run of
    /// refusals has paused the session already.
    seen: HashMap<String, (Vec<Instant>, bool)>,
}

/// The action key of a failure of `kind` (see the module documentation).
fn action_key(kind: &str, what: &str) -> String {
    let words: Vec<&str> = what.split_whitespace().collect();
    format!("{kind} {}", words.join(" "))
}

impl Guard {
    /// A guard with these thresholds (0 turns a step off).
    pub fn new(nudge_after: u32, pause_after: u32) -> Guard {
        Guard {
            nudge_after,
            pause_after,
            ..Guard::default()
        }
    }

    /// Forgets every count (an allowed action, or the person resumed).
    pub fn reset(&mut self) {
        self.seen.clear();
    }

    /// One more failure of `kind` for the action `key` (the command behind the agent's
    /// wrapper, or what was attempted), at `now`.
    pub fn failure(&mut self, kind: &str, key: &str, now: Instant) -> Step {
        let key = action_key(kind, key);
        for (times, _) in self.seen.values_mut() {
            times.retain(|t| now.saturating_duration_since(*t) < WINDOW);
        }
        self.seen.retain(|_, (times, _)| !times.is_empty());
        if !self.seen.contains_key(&key) && self.seen.len() >= MAX_KEYS {
            let oldest = self
                .seen
                .iter()
                .min_by_key(|(_, (times, _))| times.last().copied())
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.seen.remove(&k);
            }
        }
        let (times, paused) = self.seen.entry(key).or_default();
        times.push(now);
        let n = u32::try_from(times.len()).unwrap_or(u32::MAX);
        let mins = WINDOW.as_secs() / 60;
        if self.pause_after > 0 && n >= self.pause_after && !*paused {
            *paused = true;
            return Step::Pause {
                failures: n,
                text: format!(
                    " [tyba: the same action refused {n} times within {mins} minutes: the session is paused until the person decides whether to go on]"
                ),
            };
        }
        if self.nudge_after > 0 && n >= self.nudge_after {
            return Step::Nudge(format!(
                " [tyba: the same action refused {n} times within {mins} minutes: stop retrying it; change approach or ask the person]"
            ));
        }
        Step::Quiet
    }
}

/// Sends `sig` to every descendant process of the supervisor (the sandbox's whole tree; not
/// `notify-send` helpers). Returns how many processes were signalled.
pub fn signal_tree(sig: i32) -> usize {
    let tree = crate::procfs::descendants(std::process::id());
    let mut n = 0;
    for pid in tree {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "notify-send" {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        let Ok(s) = nix::sys::signal::Signal::try_from(sig) else {
            continue;
        };
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), s).is_ok() {
            n += 1;
        }
    }
    n
}

/// The agent among the supervisor's descendants: the first, nearest the supervisor, that is in
/// the sandbox's PID namespace (its pid there is another: not a program the
/// supervisor runs itself, `git`, `notify-send`) and is not one of tyba's own processes there
/// (stage 2, the approved commands' keepers: forks of the supervisor, named `tyba`). `None`
/// when there is none.
pub fn paused_agent() -> Option<u32> {
    crate::procfs::descendants(std::process::id())
        .into_iter()
        .find(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let nested = crate::procfs::ns_pid(*pid).is_some_and(|n| n != *pid);
            nested && !matches!(comm.trim(), "tyba" | "")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_action_retried_is_nudged_then_paused_once() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut g = Guard::new(3, 5);
        assert_eq!(g.failure("exec", "rm -rf build", at(0)), Step::Quiet);
        assert_eq!(g.failure("exec", "rm  -rf\tbuild", at(1)), Step::Quiet);
        assert!(
            matches!(g.failure("exec", "rm -rf build", at(2)), Step::Nudge(t) if t.contains("refused 3 times") && t.contains("change approach"))
        );
        assert!(matches!(
            g.failure("exec", "rm -rf build", at(3)),
            Step::Nudge(_)
        ));
        assert!(matches!(
            g.failure("exec", "rm -rf build", at(4)),
            Step::Pause { failures: 5, .. }
        ));
        assert!(matches!(
            g.failure("exec", "rm -rf build", at(5)),
            Step::Nudge(_)
        ));
    }

    #[test]
    fn different_refusals_are_no_loop_however_many_and_however_alike() {
        let t0 = Instant::now();
        let mut g = Guard::new(2, 3);
        // Gemini CLI's trial: three different commands refused (each behind the same
        // wrapper: the caller passes the command inside), then more of the same program.
        for (i, what) in [
            "cargo build",
            "rm -rf build",
            "curl http://example.com/",
            "rm -rf target",
            "rm -rf /tmp/x",
            "/bin/rm -rf build",
        ]
        .iter()
        .enumerate()
        {
            let now = t0 + Duration::from_secs(i as u64);
            assert_eq!(g.failure("exec", what, now), Step::Quiet, "{what}");
        }
        // Interleaved with others, the same one retried is still the agent's loop.
        assert!(matches!(
            g.failure("exec", "rm -rf build", t0 + Duration::from_secs(9)),
            Step::Nudge(_)
        ));
        // The same text of another kind is another action.
        assert_eq!(
            g.failure("connect", "rm -rf build", t0 + Duration::from_secs(10)),
            Step::Quiet
        );
    }

    #[test]
    fn a_refusal_older_than_the_window_or_an_allowed_action_starts_over() {
        let t0 = Instant::now();
        let mut g = Guard::new(2, 0);
        assert_eq!(g.failure("exec", "curl a", t0), Step::Quiet);
        assert_eq!(g.failure("exec", "curl a", t0 + WINDOW), Step::Quiet);
        assert!(matches!(
            g.failure("exec", "curl a", t0 + WINDOW + Duration::from_secs(1)),
            Step::Nudge(_)
        ));
        g.reset();
        assert_eq!(
            g.failure("exec", "curl a", t0 + WINDOW + Duration::from_secs(2)),
            Step::Quiet
        );
    }

    #[test]
    fn memory_stays_bounded_over_many_different_refusals() {
        let t0 = Instant::now();
        let mut g = Guard::new(2, 0);
        for i in 0..(MAX_KEYS * 4) {
            let _ = g.failure("exec", &format!("touch f{i}"), t0);
        }
        assert!(g.seen.len() <= MAX_KEYS);
    }
}
