//! The repeated-failure guard (DESIGN.md §4, issue 5 §7): after `nudge_after` similar
//! failures in a row the next refusal carries a nudge to change approach; after
//! `pause_after` the agent's processes are frozen (`SIGSTOP`) and the person is asked to
//! resume or end the session.
//!
//! A failure is a refusal or a denial the notify loop reports. Two failures are similar when
//! they are of the same kind (exec, connect, metadata) and name the same program or
//! destination (the first word of what was attempted). Any allowed ask resets the count.
//! Exit statuses of commands are not watched (the supervisor does not see them).

/// What the guard says about one more failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing to add.
    Quiet,
    /// Append this to the refusal.
    Nudge(String),
    /// Append this, and pause the session.
    Pause {
        /// Similar failures in a row.
        failures: u32,
        /// The text to append.
        text: String,
    },
}

/// Counts similar failures in a row.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    nudge_after: u32,
    pause_after: u32,
    last: Option<String>,
    count: u32,
    paused: bool,
}

fn similarity_key(kind: &str, what: &str) -> String {
    // The program that does the work: past wrappers, builtins and prefix assignments
    // (`\builtin eval 'rm -rf x'` is an `rm`, as Claude Code wraps every command).
    const SKIP: &[&str] = &[
        "builtin", "command", "eval", "exec", "env", "sudo", "nohup", "time", "nice", "timeout",
        "source", ".",
    ];
    let mut prog = "";
    for word in what.split(|c: char| {
        c.is_whitespace() || c == '\'' || c == '"' || c == ';' || c == '&' || c == '|'
    }) {
        let w = word.trim_start_matches('\\');
        let w = w.rsplit('/').next().unwrap_or(w);
        if w.is_empty()
            || SKIP.contains(&w)
            || w.contains('=')
            || w.starts_with('-')
            || w.chars().all(|c| c.is_ascii_digit())
        {
            continue;
        }
        prog = w;
        break;
    }
    format!("{kind} {prog}")
}

#[cfg(test)]
mod key_tests {
    use super::similarity_key;

    #[test]
    fn wrappers_do_not_make_different_failures_similar() {
        assert_eq!(
            similarity_key("exec", "\\builtin eval 'rm -rf build'"),
            "exec rm"
        );
        assert_ne!(
            similarity_key("exec", "\\builtin eval 'curl x'"),
            similarity_key("exec", "\\builtin eval 'rm -rf y'")
        );
        assert_eq!(
            similarity_key("exec", "/usr/bin/rm -rf a"),
            similarity_key("exec", "rm -rf b")
        );
        assert_eq!(similarity_key("exec", "FOO=1 sudo -E curl x"), "exec curl");
    }
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

    /// Forgets the run of failures (an allowed action, or the person resumed).
    pub fn reset(&mut self) {
        self.last = None;
        self.count = 0;
        self.paused = false;
    }

    /// One more failure.
    pub fn failure(&mut self, kind: &str, what: &str) -> Step {
        let key = similarity_key(kind, what);
        if self.last.as_deref() == Some(key.as_str()) {
            self.count = self.count.saturating_add(1);
        } else {
            self.last = Some(key);
            self.count = 1;
            self.paused = false;
        }
        let n = self.count;
        if self.pause_after > 0 && n >= self.pause_after && !self.paused {
            self.paused = true;
            return Step::Pause {
                failures: n,
                text: format!(
                    " [tyba: {n} similar refusals in a row: the session is paused until the person decides whether to go on]"
                ),
            };
        }
        if self.nudge_after > 0 && n >= self.nudge_after {
            return Step::Nudge(format!(
                " [tyba: {n} similar refusals in a row: stop retrying this; change approach or ask the person]"
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nudges_after_n_similar_and_pauses_once_after_m() {
        let mut g = Guard::new(3, 5);
        assert_eq!(g.failure("exec", "rm -rf a"), Step::Quiet);
        assert_eq!(g.failure("exec", "/bin/rm -rf b"), Step::Quiet);
        assert!(matches!(g.failure("exec", "rm -rf c"), Step::Nudge(t) if t.contains("3 similar")));
        assert!(matches!(g.failure("exec", "rm x"), Step::Nudge(_)));
        assert!(matches!(
            g.failure("exec", "rm y"),
            Step::Pause { failures: 5, .. }
        ));
        assert!(matches!(g.failure("exec", "rm z"), Step::Nudge(_)));
    }

    #[test]
    fn a_different_failure_or_an_allowed_action_starts_over() {
        let mut g = Guard::new(2, 0);
        assert_eq!(g.failure("exec", "curl a"), Step::Quiet);
        assert_eq!(g.failure("exec", "wget a"), Step::Quiet);
        assert!(matches!(g.failure("exec", "wget b"), Step::Nudge(_)));
        g.reset();
        assert_eq!(g.failure("exec", "wget c"), Step::Quiet);
        assert_eq!(g.failure("connect", "wget"), Step::Quiet);
    }
}
