//! Marks along a launch, for measuring where its time goes (issue 13's launch figure;
//! `scripts/launch-timeline.sh`, docs/performance-run.md run 15).
//!
//! Built with the `launch-trace` feature and run with `TYBA_LAUNCH_TRACE` set, each [`mark`]
//! writes one line on stderr: `TYBA-TRACE <seconds>.<nanoseconds> <thread id> <label>`, the
//! time from `CLOCK_MONOTONIC` (clock_gettime(2)), comparable across the supervisor, stage 1,
//! stage 2 and the agent's process before its exec. The line is written with one `write(2)`
//! on fd 2, taking no lock, so a fork child of the multi-threaded supervisor may mark too.
//! Without the feature [`mark`] and [`enable_from_env`] are empty and compile to nothing.

#[cfg(feature = "launch-trace")]
static ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the marks on when `TYBA_LAUNCH_TRACE` is set. Called once at the start of `main`,
/// before any thread (reading the environment later could race a thread that writes it).
pub fn enable_from_env() {
    #[cfg(feature = "launch-trace")]
    if std::env::var_os("TYBA_LAUNCH_TRACE").is_some() {
        ON.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One mark: `label` (a step of the launch, `phase-step`) with the time now.
#[cfg_attr(not(feature = "launch-trace"), allow(unused_variables))]
#[inline(always)]
pub fn mark(label: &str) {
    #[cfg(feature = "launch-trace")]
    {
        if !ON.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Ok(t) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) else {
            return;
        };
        let line = format!(
            "TYBA-TRACE {}.{:09} {} {label}\n",
            t.tv_sec(),
            t.tv_nsec(),
            nix::unistd::gettid()
        );
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    }
}
