//! Exec classification off the notify thread: confined to what the agent may read, and
//! bounded in time.
//!
//! Classifying a command reads the filesystem: the policy resolves paths and globs, and the
//! git guard (`tyba_git_guard::Inspector`) opens the repository a `git` command names
//! (`git --git-dir=/elsewhere/.git push`), its configuration, includes and refs. The
//! supervisor runs outside the sandbox, so done on its own thread that would
//!
//! - read repositories the agent cannot, and quote what it found (a remote URL) in a refusal
//!   the agent reads: an information leak past Landlock;
//! - block on whatever the agent put in a repository it made (`mkfifo .git/config`): the
//!   notify thread stuck in `open`, every exec, connect and metadata call of the session
//!   waiting behind it.
//!
//! So classification runs on a **worker thread** that first enforces on itself a Landlock
//! domain granting read (and execute) access to exactly the roots the agent's domain may read
//! ([`crate::sandbox::classifier_roots`], [`crate::sandbox::read_only_ruleset`]); Landlock
//! domains are per thread, so this confines that worker only. A repository outside those
//! roots then cannot be opened, and the guard judges the push blind (blocked when it could
//! reach a protected branch): never a permission. The exec's `/proc` entries (cwd, argv) are
//! read by the notify thread before, outside that domain.
//!
//! The notify thread waits for the answer at most [`CLASSIFY_DEADLINE`]. Past it the exec
//! is refused (fail closed) and the worker, stuck in some read, is abandoned: its job channel
//! is dropped, so it ends as soon as the read returns, and a fresh worker takes the next
//! command. At most [`MAX_STUCK_WORKERS`] abandoned workers may be alive at once; beyond
//! that every exec is refused at once, with the reason, until one of them ends.
//!
//! If the worker cannot confine itself (its Landlock ruleset is refused), it classifies
//! nothing: every exec is refused with the reason (fail closed). With
//! `--allow-weaker-sandbox` the domain is best effort, like the agent's.

use crate::sandbox;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tyba_policy::{Action, Classification, Context, Policy};

/// How long the notify thread waits for one exec's classification before refusing it.
/// Classifying takes milliseconds (`docs/benchmarks.md`); five seconds is far beyond any
/// honest repository, and short enough that a session with a blocking file in its way stays
/// usable.
pub(crate) const CLASSIFY_DEADLINE: Duration = Duration::from_secs(5);

/// How many abandoned (timed-out) workers may still be alive before exec classification
/// refuses at once instead of starting another one. Each holds a thread blocked in a read.
pub(crate) const MAX_STUCK_WORKERS: usize = 4;

/// Stack of a worker: the policy's parser and walkers recurse over the command's syntax tree.
const WORKER_STACK_BYTES: usize = 8 << 20;

/// What every worker needs: the policy and the session's places, and the domain to enforce.
#[derive(Debug)]
pub(crate) struct ClassifySetup {
    pub policy: Policy,
    pub worktree: PathBuf,
    pub scratch: PathBuf,
    pub home: Option<PathBuf>,
    /// Roots the worker may read ([`crate::sandbox::classifier_roots`]).
    pub roots: Vec<PathBuf>,
    /// Landlock ABI of the kernel.
    pub abi: i32,
    /// Whether anything less than full enforcement is an error (no `--allow-weaker-sandbox`).
    pub require_full: bool,
}

type Reply = Result<Classification, String>;

struct Job {
    command: String,
    cwd: PathBuf,
    reply: mpsc::SyncSender<Reply>,
}

/// Classifies exec command lines on confined worker threads under [`CLASSIFY_DEADLINE`].
#[derive(Debug)]
pub(crate) struct Classifier {
    setup: Arc<ClassifySetup>,
    /// The job channel of the current worker; `None` after it was abandoned or died.
    current: Mutex<Option<mpsc::Sender<Job>>>,
    /// Workers alive: the current one and the abandoned ones still stuck.
    live: Arc<AtomicUsize>,
    deadline: Duration,
    max_stuck: usize,
    /// Classifications that depend on their line's text alone ([`text_only`]), by line,
    /// working directory and the identity of the file the exec runs.
    memo: Mutex<std::collections::HashMap<MemoKey, Classification>>,
}

type MemoKey = (String, PathBuf, Option<(u64, u64)>);

/// How many classifications [`Classifier`] keeps before it starts afresh.
const MEMO_ENTRIES: usize = 1024;

/// Whether a classification of `command` depends on nothing but its text (and the file the
/// exec runs, which is part of the key): it names no path, writes none, reaches no host, and
/// the line has nothing the analyser expands or reads from the filesystem — no glob, no `~`,
/// no `source`/`.`, no git (whose repository and aliases are read).
fn text_only(command: &str, c: &Classification) -> bool {
    c.paths.is_empty()
        && c.writes.is_empty()
        && c.hosts.is_empty()
        && !command.contains(['*', '?', '[', '~'])
        && !command.contains("git")
        && !command.contains("source")
        && !command.split_whitespace().any(|w| w == ".")
}

/// Decrements the live count when a worker thread ends (return or panic).
struct LiveGuard(Arc<AtomicUsize>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Classifier {
    /// A classifier with the documented deadline and bound; its first worker starts now.
    pub(crate) fn new(setup: ClassifySetup) -> Classifier {
        Self::with_limits(setup, CLASSIFY_DEADLINE, MAX_STUCK_WORKERS)
    }

    fn with_limits(setup: ClassifySetup, deadline: Duration, max_stuck: usize) -> Classifier {
        let c = Classifier {
            setup: Arc::new(setup),
            current: Mutex::new(None),
            live: Arc::new(AtomicUsize::new(0)),
            deadline,
            max_stuck,
            memo: Mutex::new(std::collections::HashMap::new()),
        };
        if let Ok(mut cur) = c.current.lock() {
            *cur = c.spawn().ok();
        }
        c
    }

    /// Starts a worker, unless too many abandoned ones are still alive.
    fn spawn(&self) -> Result<mpsc::Sender<Job>, String> {
        let alive = self.live.load(Ordering::SeqCst);
        if alive >= self.max_stuck {
            return Err(format!(
                "refused by tyba: {alive} earlier classifications are still stuck (a file they \
                 read blocks); no command is classified until one of them ends"
            ));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        self.live.fetch_add(1, Ordering::SeqCst);
        let guard = LiveGuard(Arc::clone(&self.live));
        let setup = Arc::clone(&self.setup);
        std::thread::Builder::new()
            .name("tyba-classify".into())
            .stack_size(WORKER_STACK_BYTES)
            .spawn(move || {
                let _guard = guard;
                serve(&setup, rx)
            })
            .map_err(|e| format!("refused by tyba: cannot start the command classifier: {e}"))?;
        Ok(tx)
    }

    /// The policy's protected branch names (`[git] protected_branches`).
    pub(crate) fn protected_branches(&self) -> Vec<String> {
        self.setup.policy.config().protected_branches.clone()
    }

    /// The person's home directory, as the policy expands `~`.
    pub(crate) fn home(&self) -> Option<&Path> {
        self.setup.home.as_deref()
    }

    /// Classifies `command` as run in `cwd`, on a confined worker, within the deadline.
    ///
    /// # Errors
    /// The refusal reason (`refused by tyba: …`) when the classification timed out, too many
    /// workers are stuck, or the worker cannot confine itself or died.
    pub(crate) fn classify(&self, command: &str, cwd: &Path, file: Option<(u64, u64)>) -> Reply {
        let key: MemoKey = (command.to_string(), cwd.to_path_buf(), file);
        if let Some(c) = self.memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(c);
        }
        let r = self.classify_on_worker(command, cwd);
        if let Ok(c) = &r {
            if text_only(command, c) {
                if let Ok(mut m) = self.memo.lock() {
                    if m.len() >= MEMO_ENTRIES {
                        m.clear();
                    }
                    m.insert(key, c.clone());
                }
            }
        }
        r
    }

    fn classify_on_worker(&self, command: &str, cwd: &Path) -> Reply {
        let mut cur = self
            .current
            .lock()
            .map_err(|_| "refused by tyba: the command classifier is broken".to_string())?;
        let tx = match cur.as_ref() {
            Some(tx) => tx.clone(),
            None => {
                let tx = self.spawn()?;
                *cur = Some(tx.clone());
                tx
            }
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            command: command.to_string(),
            cwd: cwd.to_path_buf(),
            reply,
        };
        if tx.send(job).is_err() {
            *cur = None;
            return Err("refused by tyba: the command classifier ended unexpectedly".into());
        }
        match answer.recv_timeout(self.deadline) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                // Dropping its channel ends the worker once its read returns.
                *cur = None;
                Err(format!(
                    "refused by tyba: classifying the command took longer than {} s (a file it \
                     reads blocks, like a FIFO in a repository's .git); not run",
                    self.deadline.as_secs_f32()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                *cur = None;
                Err("refused by tyba: the command classifier failed on this command".into())
            }
        }
    }
}

/// A worker: confine this thread, then answer jobs until the channel is dropped.
fn serve(setup: &ClassifySetup, rx: mpsc::Receiver<Job>) {
    // Without Landlock (allowed only with `--allow-weaker-sandbox`) the agent is not confined
    // either; the start-up report says so.
    let unconfined_allowed = setup.abi < 1 && !setup.require_full;
    let confined = if unconfined_allowed {
        Ok(())
    } else {
        sandbox::read_only_ruleset(&setup.roots, setup.abi, setup.require_full)
            .and_then(|r| sandbox::restrict(r, setup.require_full))
            .map(drop)
    }
    .map_err(|e| {
        format!(
            "refused by tyba: the command classifier cannot confine itself to what the \
                 agent may read ({e})"
        )
    });
    let inspector = tyba_git_guard::Inspector::new();
    for job in rx {
        let r = match &confined {
            Ok(_) => {
                let ctx = Context {
                    worktree: &setup.worktree,
                    cwd: &job.cwd,
                    home: setup.home.as_deref(),
                    scratch: Some(&setup.scratch),
                    git: Some(&inspector),
                };
                Ok(setup.policy.classify(
                    &Action::Exec {
                        command: job.command,
                    },
                    &ctx,
                ))
            }
            Err(e) => Err(e.clone()),
        };
        // The notify thread may have given up waiting: nothing to answer then.
        let _ = job.reply.send(r);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tyba_policy::Verdict;

    fn setup(dir: &Path) -> ClassifySetup {
        ClassifySetup {
            policy: Policy::embedded_default(),
            worktree: dir.to_path_buf(),
            scratch: dir.to_path_buf(),
            home: None,
            roots: vec![dir.to_path_buf()],
            // No Landlock: these tests are about time and bounds, and run unprivileged
            // anywhere (the confinement is tested end to end in `tests/run_classify.rs`).
            abi: 0,
            require_full: false,
        }
    }

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success());
    }

    #[test]
    fn only_classifications_of_the_text_alone_are_kept() {
        let mut c = Classification::green();
        assert!(text_only("true", &c));
        assert!(text_only("make -j2", &c));
        for line in [
            "cat *",
            "ls ~",
            "git status",
            "source x.sh; ls",
            ". ./env; ls",
            "ls a?",
        ] {
            assert!(!text_only(line, &c), "{line}");
        }
        c.paths.push(PathBuf::from("/wt/x"));
        assert!(!text_only("cat x", &c));
        let mut h = Classification::green();
        h.hosts.push("example.com".into());
        assert!(!text_only("curl example.com", &h));
    }

    #[test]
    fn stuck_workers_are_bounded_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = setup(dir.path());
        // A repository whose `.git` file points at a git dir with a FIFO `config`: the guard's
        // own check covers the nearest `.git` only, so gix opens the FIFO and blocks.
        let repo = dir.path().join("r");
        let real = dir.path().join("r.git");
        std::fs::create_dir_all(&repo).unwrap();
        let st = std::process::Command::new("git")
            .args(["init", "-q", "--separate-git-dir"])
            .arg(&real)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir.path())
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::remove_file(real.join("config")).unwrap();
        mkfifo(&real.join("config"));
        let fifo = real.join("config");
        s.roots.push(repo.clone());
        let c = Classifier::with_limits(s, Duration::from_millis(300), 2);
        assert_eq!(
            c.classify("ls", dir.path(), None).unwrap().verdict,
            Verdict::Green,
            "classified on the worker"
        );
        let push = "git push origin feature";
        let t = Instant::now();
        let e = c.classify(push, &repo, None).unwrap_err();
        assert!(e.contains("took longer than"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
        // A fresh worker classifies the next command.
        assert_eq!(
            c.classify("ls", dir.path(), None).unwrap().verdict,
            Verdict::Green
        );
        // A second stuck worker reaches the bound (2): refused at once, no new worker.
        assert!(c
            .classify(push, &repo, None)
            .unwrap_err()
            .contains("took longer than"));
        let t = Instant::now();
        let e = c.classify("ls", dir.path(), None).unwrap_err();
        assert!(e.contains("still stuck"), "{e}");
        assert!(t.elapsed() < Duration::from_millis(200));
        // A writer unblocks the stuck reads: the workers end and classification resumes.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            use std::os::unix::fs::OpenOptionsExt;
            // Non-blocking: fails (ENXIO) when no reader waits, never hangs the test.
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo);
            match c.classify("ls", dir.path(), None) {
                Ok(r) => {
                    assert_eq!(r.verdict, Verdict::Green);
                    break;
                }
                Err(e) => {
                    assert!(Instant::now() < deadline, "never resumed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        assert!(c.live.load(Ordering::SeqCst) <= 2);
    }
}
