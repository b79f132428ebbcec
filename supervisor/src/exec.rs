//! The exec model (DESIGN.md §5 "exec" and "who is the agent"; issue 11; `docs/sandbox.md`,
//! "The exec model"): what the supervisor knows of each sandboxed process, and the rules that
//! decide one `execve` from it.
//!
//! - Every process has a [`Role`]: the **agent** (the agent program's own runtime, see
//!   [`crate::agent`]), a **command** covered by the command the person or the autonomy level
//!   allowed (its [`Cover`]), or **stray** (nothing known: judged as a command of the agent
//!   with no identity).
//! - Roles live in a [`ProcTable`] keyed by pid and start time, filled at execs only: a fork
//!   child is not in it and has its parent's role until its own exec. Looking a process up
//!   reads `/proc/<pid>/stat` of it and of the ancestors it takes to reach a known process;
//!   nothing walks the whole tree.
//! - The role an exec gives a process is **pending** until the process's image has changed
//!   (its `/proc/<pid>/exe` is the file decided on, and its stack start moved, which every
//!   exec re-randomises): an exec that fails leaves the process its old role, so an approval
//!   never outlives the exec it was made for.
//! - [`covered`] decides an exec under a cover: blocked is refused at every depth, green and
//!   yellow pass, red passes only when the cover was approved red for the same rules,
//!   otherwise it is asked, naming the cover.
//! - [`env_assignments`] reads the exec's environment: variables that make programs run code
//!   and differ from the session's start (or from what the covering command ran with) are
//!   judged as assignments on the command line ([`classified_line`]). The environment an
//!   agent with an installation gives its own execs is its own (its configuration), not
//!   judged; a shell or interpreter named as the agent is the model's interpreter, judged.

use crate::procfs;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tyba_policy::Verdict;

/// The first of the private-use characters U+10FF80..=U+10FFFF that stand, in an exec's
/// strings read as text ([`exec_text`]), for the bytes 0x80..=0xff that are no UTF-8 text.
const BYTE_ESCAPE: u32 = 0x10_FF00;

/// An exec's string (its file name, an argument, an environment entry) as text, exactly: its
/// UTF-8 as it is, and each byte of what is no UTF-8 text (always 0x80 or above) as the
/// private-use character U+10FF00 + byte; a character of U+10FF80..=U+10FFFF of the string
/// itself is written as its bytes so, and the escapes stand for nothing else.
///
/// Never decoded lossily: `cfg\xff` and `cfg\xfe` stay two names, and neither becomes
/// `cfg\u{FFFD}`. Such text names no file the supervisor can open, equals no value of the
/// session's start and no name the policy lists; [`crate::notify::shell_quote`] writes the
/// escapes back as `$'…\xHH…'`, which the policy reads as bytes that are no text: a word it
/// cannot know (docs/policy.md "Names that are not UTF-8").
pub(crate) fn exec_text(bytes: &[u8]) -> String {
    let escape = |out: &mut String, b: u8| {
        out.push(char::from_u32(BYTE_ESCAPE + u32::from(b)).unwrap_or(char::REPLACEMENT_CHARACTER));
    };
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if is_byte_escape(c) {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    escape(&mut out, b);
                }
            } else {
                out.push(c);
            }
        }
        for &b in chunk.invalid() {
            escape(&mut out, b);
        }
    }
    out
}

/// The bytes [`exec_text`] read `s` from: its escapes back to the bytes they stand for.
pub(crate) fn exec_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        match escaped_byte(c) {
            Some(b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

/// The byte an [`exec_text`] escape stands for; `None` for any other character.
pub(crate) fn escaped_byte(c: char) -> Option<u8> {
    is_byte_escape(c).then(|| (u32::from(c) - BYTE_ESCAPE) as u8)
}

fn is_byte_escape(c: char) -> bool {
    (BYTE_ESCAPE + 0x80..=BYTE_ESCAPE + 0xff).contains(&u32::from(c))
}

/// Whether `s` ([`exec_text`]) holds bytes that are no UTF-8 text.
pub(crate) fn has_byte_escapes(s: &str) -> bool {
    s.chars().any(is_byte_escape)
}

/// `(device, inode)` of a file: what an exec ran, checked against `/proc/<pid>/exe`.
pub(crate) type FileId = (u64, u64);

/// What a process is to the supervisor.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// The agent program's own runtime: its execs of its installation stay the agent; its
    /// other execs are commands, decided like a command line the agent typed.
    Agent,
    /// A command (or a process it started) allowed under this cover.
    Command(Arc<Cover>),
    /// Not known (an orphan that never exec'd before it was reparented): a command of the agent
    /// with no identity and no cover.
    Stray,
}

impl Role {
    /// Whether this is the agent's own runtime.
    pub(crate) fn is_agent(&self) -> bool {
        matches!(self, Role::Agent)
    }
}

/// Whether a process with role `a` has exactly the rights of one with role `b`: both the
/// agent, or both under the very same cover (one `Arc`; an equal cover made for another exec
/// is another approval). An exec from `a` to `b` then needs no pending role: whether it
/// succeeds or fails, the process has that role.
pub(crate) fn same_role(a: &Role, b: &Role) -> bool {
    match (a, b) {
        (Role::Agent, Role::Agent) | (Role::Stray, Role::Stray) => true,
        (Role::Command(x), Role::Command(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// The command an approval or an allow was made for, which its descendants run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cover {
    /// The command line as classified (with its environment assignments).
    pub line: String,
    /// The command behind the agent's shell wrapper when the line is one
    /// (`tyba_policy::Classification::inner_command`): what reasons and logs name.
    pub inner_command: Option<String>,
    /// Its verdict.
    pub verdict: Verdict,
    /// The rule ids that fired on it.
    pub rules: Vec<String>,
    /// The code-running variables, with their values, that it ran with: its descendants may
    /// keep them.
    pub env: Vec<(String, String)>,
    /// The network hosts (`host[:port]`, as the policy extracted them from network clients'
    /// operands: `Classification::hosts`) this process's connections and name lookups may
    /// reach unasked: for an approved command, the hosts its line names; for a process under
    /// it, those of them its own exec's line names too ([`narrowed`]). Empty for anything
    /// allowed without an approval.
    pub hosts: Vec<String>,
    /// The paths an approval of it grants on top of the agent's domain
    /// (`crate::runner::grants`: it runs in a domain of its own, which its descendants
    /// inherit). Empty for anything allowed without an approval.
    pub granted: Vec<crate::runner::Grant>,
    /// The pushes to local repositories an approval of it relays (`crate::push_relay`): kept
    /// by everything under it, used only by git's own transport to git's own receive-pack.
    /// Empty for anything allowed without an approval.
    pub pushes: Vec<crate::push_relay::ApprovedPush>,
    /// Whether someone accepted it: the person approved it, the autonomy level let its yellow
    /// or red verdict run, or it is tyba's own hook. Only an accepted cover covers anything:
    /// under one that is not (a green command, which nobody had to accept), each exec is
    /// decided as if the agent had made it (docs/sandbox.md, "What a command can do").
    pub accepted: bool,
    /// Whether it is tyba's own hook (`tyba hook …` in the wrapper `tyba hook install` wrote,
    /// vouched for by the supervisor): tyba's code, not the model's. Its file access outside
    /// the worktree is refused quietly, never asked (`crate::outside_fs::Asker::OwnHook`).
    pub own_hook: bool,
}

impl Cover {
    /// The command as the person reads it on one line
    /// ([`crate::broker::text::shown_action`]).
    pub(crate) fn shown(&self) -> String {
        crate::broker::text::shown_action(&self.line, self.inner_command.as_deref())
    }
}

/// The cover a process under `cover` gets from its own exec, whose line named `own` hosts:
/// `cover` with only the hosts both name (case-insensitive), so a program the approved line
/// runs that is not the network client naming a host (`python3 x.py` after `curl URL;`) gets
/// no network cover. The same `Arc` when nothing changes.
pub(crate) fn narrowed(cover: &Arc<Cover>, own: &[String]) -> Arc<Cover> {
    let hosts: Vec<String> = cover
        .hosts
        .iter()
        .filter(|h| own.iter().any(|o| o.eq_ignore_ascii_case(h)))
        .cloned()
        .collect();
    if hosts == cover.hosts {
        return Arc::clone(cover);
    }
    Arc::new(Cover {
        hosts,
        ..Cover::clone(cover)
    })
}

#[derive(Debug)]
struct Pending {
    role: Role,
    /// What `/proc/<pid>/exe` may be once the exec succeeded: the file, or its `#!`
    /// interpreters.
    files: Vec<FileId>,
    old_exe: Option<FileId>,
    /// The stack start before the exec, read only where the image alone cannot tell whether
    /// the exec happened: a re-exec of the file already running, or an unreadable image.
    /// `None` there when unreadable too.
    old_stack: Option<u64>,
    /// Whether the stack decides ([`resolve`]).
    by_stack: bool,
}

/// The image of a process before a decided exec, which tells afterwards whether the exec
/// happened ([`resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImageMark {
    old_exe: Option<FileId>,
    old_stack: Option<u64>,
    by_stack: bool,
}

impl ImageMark {
    /// Reads the mark of the process behind `dir` before its exec of `files` (the file, then
    /// its `#!` interpreters): its image, and its stack start where the image cannot tell.
    pub(crate) fn read(dir: &procfs::ProcDir, files: &[FileId]) -> ImageMark {
        let old_exe = dir.exe_id();
        let by_stack = old_exe.is_none_or(|e| files.contains(&e));
        let old_stack = if by_stack {
            dir.stack_start().ok()
        } else {
            None
        };
        ImageMark {
            old_exe,
            old_stack,
            by_stack,
        }
    }
}

#[derive(Debug)]
struct Entry {
    start: u64,
    role: Role,
    pending: Option<Pending>,
    /// The pidfd the entry was made with, kept (up to [`MAX_HELD`] of them) so that a child
    /// naming this pid as its parent is known to be this process's while the pidfd does not
    /// poll as exited: a live process keeps its pid, so no other can hold it.
    pidfd: Option<Arc<OwnedFd>>,
}

/// At most this many entries keep their pidfd ([`Entry::pidfd`]); the others are looked up
/// by `pidfd_open` as before.
const MAX_HELD: usize = 256;

/// How deep [`ProcTable::role_of`] looks for a known ancestor.
const MAX_DEPTH: usize = 64;

/// Past this many entries the table drops the ones whose process is gone.
const SWEEP_AT: usize = 4096;

/// A process as an entry of [`ProcTable`] records it.
#[derive(Debug)]
pub(crate) struct Who {
    /// Its pid (thread-group id).
    pub pid: u32,
    /// Its identity ([`procfs::Stat::start`]).
    pub start: u64,
    /// A pidfd of it, when the caller has one to give ([`Entry::pidfd`]).
    pub pidfd: Option<Arc<OwnedFd>>,
}

/// The roles of the session's processes.
#[derive(Debug, Default)]
pub(crate) struct ProcTable {
    entries: HashMap<u32, Entry>,
    sweep_at: usize,
    /// How many entries hold a pidfd.
    held: usize,
}

impl ProcTable {
    /// An empty table.
    pub(crate) fn new() -> ProcTable {
        ProcTable {
            entries: HashMap::new(),
            sweep_at: SWEEP_AT,
            held: 0,
        }
    }

    /// Records `role` for process `pid` (started at `start`) as it is now; `pidfd`, when
    /// given, is a pidfd of that process ([`Entry::pidfd`]).
    pub(crate) fn set(&mut self, pid: u32, start: u64, role: Role, pidfd: Option<Arc<OwnedFd>>) {
        self.sweep();
        let pidfd = self.hold(pidfd);
        let old = self.entries.insert(
            pid,
            Entry {
                start,
                role,
                pending: None,
                pidfd,
            },
        );
        self.release(old);
    }

    /// `pidfd`, if the table may keep one more; sweeps the held ones of gone processes first
    /// when it is full.
    fn hold(&mut self, pidfd: Option<Arc<OwnedFd>>) -> Option<Arc<OwnedFd>> {
        let fd = pidfd?;
        if self.held >= MAX_HELD {
            self.entries
                .retain(|_, e| e.pidfd.as_ref().is_none_or(|fd| !exited(fd.as_fd())));
            self.held = self.entries.values().filter(|e| e.pidfd.is_some()).count();
            if self.held >= MAX_HELD {
                return None;
            }
        }
        self.held += 1;
        Some(fd)
    }

    /// Accounts for an entry replaced or removed.
    fn release(&mut self, old: Option<Entry>) {
        if old.is_some_and(|e| e.pidfd.is_some()) {
            self.held = self.held.saturating_sub(1);
        }
    }

    /// Records that process `who`, now `role_now`, becomes `role` once its exec of a file
    /// succeeds; `files` are that file's identity and its `#!` interpreters' (what
    /// `/proc/<pid>/exe` may then be); `who` and `mark` are the process as it was when the
    /// exec was decided.
    pub(crate) fn set_pending(
        &mut self,
        who: Who,
        role_now: Role,
        role: Role,
        files: Vec<FileId>,
        mark: ImageMark,
    ) {
        self.sweep();
        let Who { pid, start, pidfd } = who;
        let pidfd = self.hold(pidfd);
        let ImageMark {
            old_exe,
            old_stack,
            by_stack,
        } = mark;
        let old = self.entries.insert(
            pid,
            Entry {
                start,
                role: role_now,
                pending: Some(Pending {
                    role,
                    files,
                    old_exe,
                    old_stack,
                    by_stack,
                }),
                pidfd,
            },
        );
        self.release(old);
    }

    /// The role of process `pid`, whose stat is `st`: its own entry, else its nearest known
    /// ancestor's. `keeper` names the role of a process stage 2 forked for an approved command
    /// (`crate::runner`); reaching `stage2`, PID 1 or an unreadable process gives
    /// [`Role::Stray`].
    pub(crate) fn role_of(
        &mut self,
        pid: u32,
        st: &procfs::Stat,
        stage2: u32,
        keeper: &dyn Fn(u32, u64) -> Option<Role>,
    ) -> Role {
        let (mut cur, mut cur_st) = (pid, *st);
        for _ in 0..MAX_DEPTH {
            if let Some(e) = self.entries.get_mut(&cur) {
                if e.start == cur_st.start {
                    if let Some(p) = e.pending.take() {
                        let stack = || procfs::stack_start(cur).ok();
                        e.role = resolve(p, procfs::exe_id(cur), stack, e.role.clone());
                    }
                    return e.role.clone();
                }
            }
            if cur_st.ppid == stage2 {
                if let Some(r) = keeper(cur, cur_st.start) {
                    return r;
                }
                return Role::Stray;
            }
            if cur == stage2 || cur <= 1 || cur_st.ppid <= 1 {
                return Role::Stray;
            }
            cur = cur_st.ppid;
            // The parent's own pidfd, when its entry holds one that has not exited: the
            // parent is that process, with no lookup.
            if let Some(e) = self.entries.get(&cur) {
                if e.pidfd.as_ref().is_some_and(|fd| !exited(fd.as_fd())) {
                    cur_st = procfs::Stat {
                        ppid: 0,
                        start: e.start,
                    };
                    continue;
                }
            }
            cur_st = match procfs::stat_ext(cur) {
                Ok(s) => s,
                Err(_) => return Role::Stray,
            };
        }
        Role::Stray
    }

    /// Drops the entries of processes that are gone, once the table has grown past its mark.
    fn sweep(&mut self) {
        if self.entries.len() < self.sweep_at {
            return;
        }
        self.entries.retain(|pid, e| match &e.pidfd {
            Some(fd) => !exited(fd.as_fd()),
            None => procfs::stat_ext(*pid).is_ok_and(|s| s.start == e.start),
        });
        self.held = self.entries.values().filter(|e| e.pidfd.is_some()).count();
        self.sweep_at = (self.entries.len() * 2).max(SWEEP_AT);
    }
}

/// Whether the process of `pidfd` has exited: the pidfd polls readable then (`pidfd_open(2)`),
/// and a poll that fails counts as exited (the caller then looks the process up afresh).
fn exited(pidfd: BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
    !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// The role a process has after a pending exec: `exe` is its `/proc/<pid>/exe` now, `stack`
/// reads its stack start now.
///
/// Where the process ran another file than the one decided on (the common case: a shell's
/// child execing a program), the image tells: the file decided on (or its interpreter) → the
/// new role; the image it ran before → the exec failed, the old role stays; any other file
/// (swapped in after the decision) → [`Role::Stray`]: nothing decided covers it.
///
/// Where it already ran the file decided on (a re-exec), or its image was unreadable, the
/// stack start tells:
/// - it moved (every exec re-randomises it): the exec happened. The new role when the image
///   is the file decided on; [`Role::Stray`] otherwise;
/// - it did not move (address randomisation off, `setarch -R`): the new role only when the
///   image changed to the file decided on; otherwise the exec failed and the old role stays.
/// - unreadable: [`Role::Stray`].
fn resolve(
    p: Pending,
    exe: Option<FileId>,
    stack: impl FnOnce() -> Option<u64>,
    old: Role,
) -> Role {
    let expected = exe.is_some_and(|e| p.files.contains(&e));
    if !p.by_stack {
        return if expected {
            p.role
        } else if exe.is_some() && exe == p.old_exe {
            old
        } else {
            Role::Stray
        };
    }
    let (Some(stack), Some(old_stack)) = (stack(), p.old_stack) else {
        return Role::Stray;
    };
    if stack != old_stack {
        if expected {
            p.role
        } else {
            Role::Stray
        }
    } else if expected && !p.old_exe.is_some_and(|o| p.files.contains(&o)) {
        p.role
    } else {
        old
    }
}

/// What a system shell reads before its command, besides `BASH_ENV`/`ENV` (code-running
/// variables anyway): for a login shell (`-l`, `--login`, an `argv[0]` starting with `-`), an
/// interactive one (`-i`), and for zsh always (`.zshenv`), the startup files found through
/// `HOME`, `ZDOTDIR` and `XDG_CONFIG_HOME`; and the files named by `--rcfile` and
/// `--init-file` (bash(1) INVOCATION, zsh(1) STARTUP/SHUTDOWN FILES).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StartupFiles {
    /// Variables that choose where the startup files are.
    pub vars: &'static [&'static str],
    /// Files the shell is told to source.
    pub sourced: Vec<String>,
}

/// Shells that read startup files even when neither login nor interactive (`.zshenv`,
/// `.cshrc`, fish's `config.fish`).
const ALWAYS_STARTUP: &[&str] = &["zsh", "csh", "tcsh", "fish"];

/// The variables that say where a shell's startup files are ([`StartupFiles::vars`]).
pub(crate) const STARTUP_VARS: &[&str] = &["HOME", "ZDOTDIR", "XDG_CONFIG_HOME"];

impl StartupFiles {
    /// The startup files of an exec of `file` (canonical) with `argv`, when it is a shell
    /// that reads some.
    pub(crate) fn of(file: &std::path::Path, argv: &[String]) -> Option<StartupFiles> {
        let name = file.file_name()?.to_str()?;
        if !tyba_policy::programs::is_shell(name) && name != "busybox" {
            return None;
        }
        // The options are read by the policy's reader of INVOCATION rules
        // (`tyba_policy::programs::shell_startup`): `-rcfile FILE` is bash's `--rcfile`, an
        // option's value (`-o history`) is no option letter.
        let rest: Vec<Option<&str>> = argv.iter().skip(1).map(|a| Some(a.as_str())).collect();
        let facts = tyba_policy::programs::shell_startup(name, &rest);
        let sourced: Vec<String> = facts
            .sourced
            .iter()
            .filter_map(|&i| argv.get(i + 1).cloned())
            .collect();
        let login = ALWAYS_STARTUP.contains(&name)
            || argv.first().is_some_and(|a| a.starts_with('-'))
            || facts.login
            || facts.interactive
            || !sourced.is_empty();
        login.then_some(StartupFiles {
            vars: STARTUP_VARS,
            sourced,
        })
    }
}

/// Path-list variables whose value, when every entry lies under a system path, only points
/// programs at the system's own code: git exports `GIT_EXEC_PATH=/usr/lib/git-core` to every
/// program it runs.
const SYSTEM_PATH_VARS: &[&str] = &["GIT_EXEC_PATH", "LD_LIBRARY_PATH"];

/// The system paths (DESIGN.md §2), read-only to the agent.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Whether `real` (canonical) is a system program outside the system bin directories
/// (`/usr/lib/gcc/…/cc1`, `/usr/lib/git-core/git-remote-http`): code the person's system
/// installed, read-only to the agent, that programs run by path.
pub(crate) fn is_system_program(real: &std::path::Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| real.starts_with(d))
        && !tyba_policy::programs::SYSTEM_BIN_DIRS
            .iter()
            .any(|d| real.parent() == Some(std::path::Path::new(d)))
}

/// The multi-call programs that take what they do from the name they are run by: git
/// (`git-<sub>` runs `git <sub>`, any other name runs git), busybox and toybox (the applet
/// argv[0] names).
const MULTI_CALL: &[&str] = &["git", "busybox", "toybox"];

/// Directories outside the bin directories where the system keeps a multi-call program.
const MULTI_CALL_DIRS: &[&str] = &["/usr/lib/git-core", "/usr/libexec/git-core"];

/// The system's dynamic loaders (ld.so(8)): a program that runs the program it is given,
/// judged as `ld.so ARGS…` by identity too (a copy or link under another name).
const LOADERS: &[&str] = &[
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
    "/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/ld-musl-aarch64.so.1",
];

/// Which multi-call program ([`MULTI_CALL`], or `ld.so` for one of the [`LOADERS`]) the
/// regular file `real` (canonical) is, whatever
/// its name: by its own name, by identity (a hard link: the same device and inode as the
/// system's program of that name in a bin directory) or by content (a copy: the same size
/// and bytes, compared in full only when the sizes match). `None` for any other file or one
/// that cannot be read.
pub(crate) fn multi_call_of(real: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if let Some(name) = real.file_name().and_then(|n| n.to_str()) {
        if let Some(m) = MULTI_CALL.iter().find(|m| **m == name) {
            return Some(m);
        }
    }
    let md = std::fs::metadata(real).ok()?;
    if !md.is_file() {
        return None;
    }
    let mut content: Option<Vec<u8>> = None;
    multi_call_files()
        .iter()
        .find(|c| {
            (c.dev, c.ino) == (md.dev(), md.ino())
                || (c.len == md.len() && same_bytes(real, &mut content, &c.path, c.len))
        })
        .map(|c| c.name)
}

/// The largest file [`system_copy_of`] compares in full (bytes): a bigger copy of a system
/// program is judged by its own name only.
pub(crate) const MAX_COPY_COMPARE: u64 = 64 << 20;

/// The system program whose bytes the regular file `real` has, when `real` is a copy of
/// one of the programs of the system's bin directories
/// ([`tyba_policy::programs::SYSTEM_BIN_DIRS`]): a copy the agent made (`cp /usr/bin/rm
/// ./x; ./x -rf /`) runs that program's code, whatever it is called (review 31's r31-01, its
/// next spelling). Returns the program's real path, whose name judges it. Compared by size
/// first, against an index of the bin directories made once per supervisor (one `stat` per
/// entry, about 5 ms for 2,500 entries here, on the first exec that needs it), in full
/// ([`same_bytes`]) only where a size matches and up to [`MAX_COPY_COMPARE`] bytes. `None`
/// for any other file and for one that cannot be read.
pub(crate) fn system_copy_of(real: &Path) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    /// Each size's files: (device, inode, a path to it).
    type BySize = HashMap<u64, Vec<(u64, u64, PathBuf)>>;
    static BY_SIZE: std::sync::OnceLock<BySize> = std::sync::OnceLock::new();
    let md = std::fs::metadata(real).ok().filter(|m| m.is_file())?;
    if md.len() == 0 || md.len() > MAX_COPY_COMPARE {
        return None;
    }
    let index = BY_SIZE.get_or_init(|| {
        let mut by: BySize = HashMap::new();
        let mut dirs: Vec<PathBuf> = Vec::new();
        for d in tyba_policy::programs::SYSTEM_BIN_DIRS {
            // `/bin` is `/usr/bin` on a merged system: each directory listed once.
            match std::fs::canonicalize(d) {
                Ok(c) if !dirs.contains(&c) => dirs.push(c),
                _ => continue,
            }
        }
        for e in dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
        {
            let Ok(m) = std::fs::metadata(e.path()) else {
                continue;
            };
            let v = by.entry(m.len()).or_default();
            if m.is_file() && m.len() > 0 && !v.iter().any(|f| (f.0, f.1) == (m.dev(), m.ino())) {
                v.push((m.dev(), m.ino(), e.path()));
            }
        }
        by
    });
    let mut content = None;
    index
        .get(&md.len())?
        .iter()
        .filter(|f| (f.0, f.1) != (md.dev(), md.ino()))
        .find(|f| same_bytes(real, &mut content, &f.2, md.len()))
        .and_then(|f| std::fs::canonicalize(&f.2).ok())
}

/// Whether the file `other` holds the bytes of `file` (both `len` bytes long): `file`'s are
/// read into `content` once, for comparing with several files. `false` when either cannot be
/// read.
fn same_bytes(file: &Path, content: &mut Option<Vec<u8>>, other: &Path, len: u64) -> bool {
    use std::io::Read;
    let read = |p: &Path| -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        std::fs::File::open(p)
            .ok()?
            .take(len)
            .read_to_end(&mut buf)
            .ok()?;
        Some(buf)
    };
    if content.is_none() {
        *content = read(file);
    }
    content.is_some() && read(other).as_deref() == content.as_deref()
}

/// A system file [`multi_call_of`] compares an exec's file with: its name, path and
/// identity (device, inode, size).
struct MultiCallFile {
    name: &'static str,
    path: PathBuf,
    dev: u64,
    ino: u64,
    len: u64,
}

/// The system's multi-call programs and loaders that exist, looked at once per supervisor
/// (about 30 `stat` calls): they lie in system directories the agent cannot write, so their
/// identities hold for the session. A program the person reinstalls during a session is
/// compared by its old identity; its new copy under another name is then an unlisted
/// program, asked, never green.
fn multi_call_files() -> &'static [MultiCallFile] {
    use std::os::unix::fs::MetadataExt;
    static FILES: std::sync::OnceLock<Vec<MultiCallFile>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        MULTI_CALL
            .iter()
            .flat_map(|name| {
                tyba_policy::programs::SYSTEM_BIN_DIRS
                    .iter()
                    .chain(MULTI_CALL_DIRS.iter())
                    .map(move |d| (*name, Path::new(d).join(name)))
            })
            .chain(LOADERS.iter().map(|l| ("ld.so", PathBuf::from(l))))
            .filter_map(|(name, path)| {
                let m = std::fs::metadata(&path).ok().filter(|m| m.is_file())?;
                Some(MultiCallFile {
                    name,
                    dev: m.dev(),
                    ino: m.ino(),
                    len: m.len(),
                    path,
                })
            })
            .collect()
    })
}

fn system_paths_only(value: &str) -> bool {
    !value.is_empty()
        && value.split(':').all(|e| {
            let p = std::path::Path::new(e);
            p.is_absolute()
                && !p
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                && SYSTEM_DIRS.iter().any(|d| p.starts_with(d))
        })
}

/// Variables whose value is a list of files or directories the program loads code from or
/// reads as configuration: `:`-separated (ld.so(8) `LD_LIBRARY_PATH`; git(1)
/// `GIT_EXEC_PATH`; `GCONV_PATH`, python(1) `PYTHONPATH`, perlrun(1) `PERL5LIB`, node(1)
/// `NODE_PATH`…), `LD_PRELOAD` also space-separated (ld.so(8)), or one file or directory
/// (bash(1) `BASH_ENV`/`ENV`, python(1) `PYTHONSTARTUP`/`PYTHONHOME`, rg(1)
/// `RIPGREP_CONFIG_PATH`, `OPENSSL_CONF`…). A value wholly in kept roots is inert
/// ([`KeptRoots::inert`]).
const PATH_VALUED_VARS: &[&str] = &[
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LD_AUDIT",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "BASH_ENV",
    "ENV",
    "FPATH",
    "GCONV_PATH",
    "GETCONF_DIR",
    "OPENSSL_CONF",
    "OPENSSL_CONF_INCLUDE",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONPYCACHEPREFIX",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "GEM_PATH",
    "GEM_HOME",
    "NODE_PATH",
    "NODE_COMPILE_CACHE",
    "CLASSPATH",
    "VIM",
    "VIMRUNTIME",
    "EMACSLOADPATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "RIPGREP_CONFIG_PATH",
];

/// Variables whose value is a program the reader runs on a file or stream it chooses (git(1)
/// ENVIRONMENT `GIT_EDITOR`/`GIT_PAGER`, `EDITOR`/`VISUAL`/`PAGER`, man(1) `MANPAGER`).
const PROGRAM_VALUED_VARS: &[&str] = &[
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "PAGER",
    "MANPAGER",
    "GIT_PAGER",
];

/// Editors, pagers and no-ops: programs that, run on a file or stream the model wrote, show
/// or edit it and run none of it as code. A program-valued variable naming one of these (in a
/// [`KeptRoots`] root) lets the model inject no code; any other program may (`EDITOR=sh` runs
/// the commit message git hands it, `PAGER=python3` runs git's output).
const VIEWERS: &[&str] = &[
    "vi",
    "vim",
    "vim.basic",
    "vim.tiny",
    "nvim",
    "view",
    "nano",
    "rnano",
    "emacs",
    "emacsclient",
    "mg",
    "micro",
    "pico",
    "joe",
    "less",
    "more",
    "most",
    "cat",
    "true",
    "false",
];

/// Roots no process of a session can change: what the agent's domain grants read + execute
/// (system paths, the policy's `read_only` toolchains; `docs/sandbox.md`) without the
/// process-state trees (`/proc`, `/sys`, `/dev`), and not under anything it may write. Code
/// there is the person's, installed before the session.
pub(crate) struct KeptRoots<'a> {
    /// The agent's read + execute roots ([`crate::notify`]'s `readable`).
    pub readable: &'a [std::path::PathBuf],
    /// The agent's read-write roots.
    pub writable: &'a [std::path::PathBuf],
}

impl KeptRoots<'_> {
    /// Whether `p` (absolute, no `..`) lies in a kept root, both as named and, when it
    /// exists, with its links resolved: a link in a kept root could point anywhere.
    pub(crate) fn holds(&self, p: &std::path::Path) -> bool {
        Self::both_ways(p, |p| {
            self.readable.iter().any(|r| p.starts_with(r))
                && !self
                    .writable
                    .iter()
                    .any(|w| p.starts_with(w) || w.starts_with(p))
        })
    }

    /// Whether `p` (absolute, no `..`) lies in the agent's domain, a readable or a writable
    /// root, both as named and, when it exists, with its links resolved.
    pub(crate) fn in_domain(&self, p: &std::path::Path) -> bool {
        Self::both_ways(p, |p| {
            self.readable
                .iter()
                .chain(self.writable)
                .any(|r| p.starts_with(r))
        })
    }

    /// `root_ok` of `p` as named and as resolved, for a plain absolute path outside
    /// `/proc`, `/sys` and `/dev`; a path with nothing there passes on its name.
    fn both_ways(p: &std::path::Path, root_ok: impl Fn(&std::path::Path) -> bool) -> bool {
        let lexical = |p: &std::path::Path| {
            p.is_absolute()
                && !p
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                && !["/proc", "/sys", "/dev"].iter().any(|d| p.starts_with(d))
                && root_ok(p)
        };
        if !lexical(p) {
            return false;
        }
        match std::fs::canonicalize(p) {
            Ok(real) => lexical(&real),
            // Nothing there (for `holds`: and nothing can be made there by the session).
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    /// Whether `name=value` in an exec's environment lets the model inject no code: a
    /// [`PATH_VALUED_VARS`] value whose every entry [`Self::holds`], or a
    /// [`PROGRAM_VALUED_VARS`] value that is one program of [`VIEWERS`] named by a path it
    /// holds or by a bare name that `path` (the exec's `PATH`) resolves first to a file it
    /// holds (rustup's proxy's `LD_LIBRARY_PATH=~/.rustup/toolchains/…/lib`, npm's
    /// `EDITOR=vi`), or a value the classifier finds loads nothing
    /// ([`tyba_policy::is_code_running_assignment`]: `PYTHONWARNINGS=ignore`). An empty entry
    /// is the working directory: not inert.
    pub(crate) fn inert(&self, name: &str, value: &str, path: Option<&str>) -> bool {
        if STARTUP_VARS.contains(&name) {
            // Where a login shell's startup files are: only the exec's shell knows it reads
            // them, so the classifier's rule for a plain assignment does not apply; the
            // policy judges the directory on the classified line.
            return false;
        }
        if !tyba_policy::is_code_running_assignment(name, value) {
            // A value of it that loads nothing (`PYTHONWARNINGS=ignore`): the classifier's own
            // rule for the same assignment on a command line.
            return true;
        }
        if PATH_VALUED_VARS.contains(&name) {
            let entries: Vec<&str> = if name == "LD_PRELOAD" {
                value.split([':', ' ']).filter(|e| !e.is_empty()).collect()
            } else {
                value.split(':').collect()
            };
            return !entries.is_empty()
                && entries.iter().all(|e| self.holds(std::path::Path::new(e)));
        }
        if !PROGRAM_VALUED_VARS.contains(&name) {
            return false;
        }
        let viewer = |p: &std::path::Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| VIEWERS.contains(&n))
        };
        if value.starts_with('/') {
            let p = std::path::Path::new(value);
            return viewer(p) && self.holds(p);
        }
        if value.is_empty()
            || !value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
            || !VIEWERS.contains(&value)
        {
            return false;
        }
        // The program run is the first of `PATH` that is an executable file.
        use std::os::unix::fs::PermissionsExt;
        for dir in path.unwrap_or("").split(':') {
            if !dir.starts_with('/') {
                // A relative entry (or an empty one: the working directory) finds files the
                // session may write, relative to a directory the supervisor does not see.
                return false;
            }
            let cand = std::path::Path::new(dir).join(value);
            let Ok(meta) = std::fs::metadata(&cand) else {
                continue;
            };
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return self.holds(&cand);
            }
        }
        false
    }
}

/// The variables of `assigns` (an exec's [`env_assignments`]) that are no assignment because
/// [`KeptRoots::inert`] says their value lets the model inject no code, dropped; `envp` gives
/// the exec's `PATH` (every occurrence must resolve the same kind).
pub(crate) fn drop_inert(
    assigns: Vec<(String, String)>,
    envp: &[Vec<u8>],
    kept: &KeptRoots<'_>,
) -> Vec<(String, String)> {
    if assigns.is_empty() {
        return assigns;
    }
    // `getenv(3)` takes the first `PATH`, a shell the last: each must find the same kind.
    let paths: Vec<String> = envp
        .iter()
        .filter_map(|e| e.strip_prefix(b"PATH="))
        .map(exec_text)
        .collect();
    // A `PATH` with a directory that is no UTF-8 text finds programs where the supervisor
    // cannot look: no value is inert under it.
    if paths.iter().any(|p| has_byte_escapes(p)) {
        return assigns;
    }
    assigns
        .into_iter()
        .filter(|(n, v)| {
            let inert = |p: Option<&str>| kept.inert(n, v, p);
            !(if paths.is_empty() {
                inert(None)
            } else {
                paths.iter().all(|p| inert(Some(p)))
            })
        })
        .collect()
}

/// The `NAME=VALUE` strings of `envp` split at their first `=`, in order; a string without
/// one is skipped (execve(2) passes it on; `getenv(3)` never finds it).
fn env_entries(envp: &[Vec<u8>]) -> impl Iterator<Item = (&[u8], &[u8])> {
    envp.iter().filter_map(|e| {
        let eq = e.iter().position(|&b| b == b'=')?;
        Some((&e[..eq], &e[eq + 1..]))
    })
}

/// The code-running variables of `envp` (`NAME=VALUE` strings) whose value differs from the
/// session's start (`start`) and from what the covering command ran with (`covered`), in the
/// order of `envp`. Every occurrence of a name counts (`getenv(3)` takes the first, the
/// dynamic loader and shells the last). For a shell that reads startup files (`shell`), the
/// variables that say where they are count too. A path-list value wholly under system paths
/// of [`SYSTEM_PATH_VARS`] is no assignment.
pub(crate) fn env_assignments(
    envp: &[Vec<u8>],
    start: &HashMap<String, String>,
    covered: &[(String, String)],
    shell: Option<&StartupFiles>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in env_entries(envp) {
        // Borrowed, not copied, for the common valid-UTF-8 name: most names do not count.
        let name: std::borrow::Cow<'_, str> = match std::str::from_utf8(name) {
            Ok(n) => n.into(),
            Err(_) => exec_text(name).into(),
        };
        let counts = tyba_policy::is_code_running_var(&name)
            || shell.is_some_and(|s| s.vars.contains(&&*name));
        if !counts {
            continue;
        }
        let name = name.into_owned();
        // Exactly: a value that is no UTF-8 text equals no value of the start.
        let value = exec_text(value);
        if start.get(&name) == Some(&value)
            || covered.iter().any(|(n, v)| *n == name && *v == value)
            || (SYSTEM_PATH_VARS.contains(&name.as_str()) && system_paths_only(&value))
        {
            continue;
        }
        if !out.iter().any(|(n, v)| *n == name && *v == value) {
            out.push((name, value));
        }
    }
    out
}

/// The variables of `envp` that move where programs read their configuration
/// ([`tyba_policy::is_config_dir_var`]: `HOME`, `XDG_CONFIG_HOME`, `GIT_DIR`…) whose value
/// differs from the session's start (`start`), in the order of `envp`, each name once (its
/// first occurrence, as `getenv(3)` reads it). For a push: git reads `~/.gitconfig` and
/// `$XDG_CONFIG_HOME/git/config` from them, and the supervisor's git inspector reads the
/// person's, so a push is judged with them on its line.
///
/// `GIT_DIR` and `GIT_COMMON_DIR` naming the repository git finds from `cwd` anyway (git
/// exports them to the programs it starts: hooks, aliases, `git lfs`) move nothing.
pub(crate) fn config_moves(
    envp: &[Vec<u8>],
    start: &HashMap<String, String>,
    cwd: &Path,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut found: Option<Option<(PathBuf, PathBuf)>> = None;
    for (name, value) in env_entries(envp) {
        let name = exec_text(name);
        if !tyba_policy::is_config_dir_var(&name) || out.iter().any(|(n, _)| *n == *name) {
            continue;
        }
        let value = exec_text(value);
        if start.get(&*name) == Some(&value) {
            continue;
        }
        if name == "GIT_DIR" || name == "GIT_COMMON_DIR" {
            let (git_dir, common) = match found.get_or_insert_with(|| discovered_git_dir(cwd)) {
                Some((g, c)) => (g.clone(), c.clone()),
                None => (PathBuf::new(), PathBuf::new()),
            };
            let named = std::fs::canonicalize(cwd.join(&value)).ok();
            let same = if name == "GIT_DIR" { git_dir } else { common };
            if named.is_some_and(|n| !same.as_os_str().is_empty() && n == same) {
                continue;
            }
        }
        out.push((name, value));
    }
    out
}

/// The git directory and common directory git finds from `cwd` with no variable set
/// (gitrepository-layout(5), `setup.c`: the nearest `.git` of `cwd` or an ancestor, a
/// directory or a gitfile `gitdir: PATH`; a `commondir` file names the common directory),
/// canonical. `None` when there is none or it cannot be read.
fn discovered_git_dir(cwd: &Path) -> Option<(PathBuf, PathBuf)> {
    for dir in cwd.ancestors() {
        let dot = dir.join(".git");
        let Ok(m) = std::fs::metadata(&dot) else {
            continue;
        };
        let git_dir = if m.is_dir() {
            dot
        } else {
            let text = std::fs::read_to_string(&dot).ok()?;
            let target = text.lines().next()?.strip_prefix("gitdir: ")?.trim_end();
            dir.join(target)
        };
        let git_dir = std::fs::canonicalize(git_dir).ok()?;
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(c) => std::fs::canonicalize(git_dir.join(c.trim_end())).ok()?,
            Err(_) => git_dir.clone(),
        };
        return Some((git_dir, common));
    }
    None
}

/// Whether an exec of `path` (as named; `real`, the file it reaches) with `argv` runs git with
/// a subcommand that may push ([`tyba_policy::git_tables::may_push`]: a push, a subcommand that
/// runs a command it is given, or a word that is no builtin: an alias the configuration
/// defines, an external `git-<word>`), also in git's dashed form (`git-push`). Global options
/// are skipped by git's own tables; an option they do not know counts as may push.
pub(crate) fn git_may_push(path: &str, real: Option<&Path>, argv: &[String]) -> bool {
    use tyba_policy::git_tables::{
        may_push, GLOBAL_EXITING_OPTIONS, GLOBAL_FLAGS, GLOBAL_VALUE_OPTIONS,
    };
    // git's dashed form (`git-push`, a link to git in its exec path) names its subcommand.
    let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    let names = [name(Path::new(path)), real.and_then(name)];
    if let Some(sub) = names.iter().flatten().find_map(|n| n.strip_prefix("git-")) {
        return may_push(sub);
    }
    if !names.iter().flatten().any(|n| n == "git") {
        return false;
    }
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        let w = w.as_str();
        if GLOBAL_FLAGS.contains(&w) {
            continue;
        }
        if GLOBAL_VALUE_OPTIONS.contains(&w) {
            words.next();
            continue;
        }
        if w.starts_with("--")
            && w.split_once('=')
                .is_some_and(|(o, _)| GLOBAL_VALUE_OPTIONS.contains(&o))
        {
            continue;
        }
        if GLOBAL_EXITING_OPTIONS.contains(&w) {
            return false;
        }
        return w.starts_with('-') || may_push(w);
    }
    false
}

/// The variables `less` and `more` take commands, files or keys from (less(1) ENVIRONMENT:
/// `LESS` options such as `+!cmd`, the input preprocessor `LESSOPEN`/`LESSCLOSE`, key files,
/// the editor of `v` and the shell of `!`; more(1) `MORE`).
const PAGER_VARS: &[&str] = &[
    "LESS",
    "LESSOPEN",
    "LESSCLOSE",
    "LESSKEY",
    "LESSKEYIN",
    "LESSKEY_CONTENT",
    "LESSKEY_SYSTEM",
    "LESSKEYIN_SYSTEM",
    "LESSEDIT",
    "LESSSECURE",
    "VISUAL",
    "EDITOR",
    "SHELL",
    "MORE",
];

/// Whether `envp` holds every variable of [`PAGER_VARS`] as the session started (`start`),
/// absent where it was absent, except what git itself sets for its pager when unset:
/// `LESS=FRX` (and `LV=-c`, not a pager variable here). Every occurrence counts.
pub(crate) fn pager_env_unchanged(envp: &[Vec<u8>], start: &HashMap<String, String>) -> bool {
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in env_entries(envp) {
        let Ok(name) = std::str::from_utf8(name) else {
            continue;
        };
        let Some(var) = PAGER_VARS.iter().find(|v| **v == name) else {
            continue;
        };
        let value = exec_text(value);
        let ok = match start.get(*var) {
            Some(v) => *v == value,
            None => *var == "LESS" && value == "FRX",
        };
        if !ok {
            return false;
        }
        seen.push(var);
    }
    // A variable the session started with and the exec lacks is unchanged for the pager only
    // if absence means the same (it does not for `LESSSECURE`).
    !start.contains_key("LESSSECURE") || seen.contains(&"LESSSECURE")
}

/// [`env_assignments`] from `code`, the exec's [`code_env`] already read: the same answer,
/// without a second pass over the environment unless `shell` reads startup files.
pub(crate) fn assignments_of(
    code: &[(String, String)],
    envp: &[Vec<u8>],
    start: &HashMap<String, String>,
    covered: &[(String, String)],
    shell: Option<&StartupFiles>,
) -> Vec<(String, String)> {
    if shell.is_some() {
        return env_assignments(envp, start, covered, shell);
    }
    code.iter()
        .filter(|(n, v)| {
            start.get(n) != Some(v) && !covered.iter().any(|(cn, cv)| cn == n && cv == v)
        })
        .cloned()
        .collect()
}

/// Variables that make a shell, or the dynamic loader before any program, run other code
/// than the line it was given: the loader's (`LD_*`, `GCONV_PATH`), bash's start-up and
/// tracing (`BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS`, `PS4`), exported functions
/// (`BASH_FUNC_*`, whose names may shadow a path such as `/bin/sh`), and where a login shell's
/// startup files are ([`STARTUP_VARS`]) (bash(1) INVOCATION, ld.so(8)).
fn runs_before_the_line(name: &str) -> bool {
    name.starts_with("LD_")
        || name.starts_with("BASH_FUNC_")
        || matches!(
            name,
            "GCONV_PATH" | "BASH_ENV" | "ENV" | "SHELLOPTS" | "BASHOPTS" | "PS4"
        )
        || STARTUP_VARS.contains(&name)
}

/// Whether `envp` sets, differently from the session's start (`start`), a variable that
/// makes a shell or the loader run code before the line it is given
/// ([`runs_before_the_line`]): such an exec of a shell is not the line alone.
pub(crate) fn shell_env_changed(envp: &[Vec<u8>], start: &HashMap<String, String>) -> bool {
    envp.iter().any(|e| {
        let Some(eq) = e.iter().position(|&b| b == b'=') else {
            return false;
        };
        let name = exec_text(&e[..eq]);
        runs_before_the_line(&name) && start.get(&*name).map(String::as_bytes) != Some(&e[eq + 1..])
    })
}

/// The code-running variables of `envp` with their values.
pub(crate) fn code_env(envp: &[Vec<u8>]) -> Vec<(String, String)> {
    env_assignments(envp, &HashMap::new(), &[], None)
}

/// The line classified for an exec: `export NAME=VALUE; …` for each of `prefix` (an empty
/// name stands for a file the program sources: `source FILE; …`), then `command` (the exec's
/// own line, `crate::notify::command_line`).
pub(crate) fn classified_line(prefix: &[(String, String)], command: &str) -> String {
    if prefix.is_empty() {
        return command.to_string();
    }
    let mut s = String::new();
    for (n, v) in prefix {
        if n.is_empty() {
            s.push_str("source ");
        } else {
            s.push_str("export ");
            s.push_str(n);
            s.push('=');
        }
        s.push_str(&crate::notify::shell_quote(v));
        s.push_str("; ");
    }
    s.push_str(command);
    s
}

/// Whether `name` (as a process passed it, relative to `cwd`), taken lexically (`.` and `..`
/// folded, no link followed), lies under one of `roots`: there a process of the session could
/// swap a link between the supervisor's check and the kernel's lookup.
pub(crate) fn lexically_within(
    name: &[u8],
    cwd: &std::path::Path,
    roots: &[std::path::PathBuf],
) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(name));
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    let mut norm = std::path::PathBuf::from("/");
    for c in full.components() {
        match c {
            std::path::Component::ParentDir => {
                norm.pop();
            }
            std::path::Component::Normal(x) => norm.push(x),
            _ => {}
        }
    }
    roots.iter().any(|r| norm.starts_with(r))
}

/// Whether an exec's file name reaches its file through the process's own fds or `/proc`
/// entry (`/dev/fd/N`, `/proc/self/…`, `/proc/thread-self/…`, `/dev/stdin`, or `fexecve`'s
/// empty name): the name then says nothing of the program.
pub(crate) fn is_magic_name(raw: &[u8], empty: bool) -> bool {
    empty
        || raw.starts_with(b"/dev/fd/")
        || raw.starts_with(b"/proc/self/")
        || raw.starts_with(b"/proc/thread-self/")
        || raw.starts_with(b"/dev/std")
}

/// The longest single argument or environment string `execve(2)` takes (`MAX_ARG_STRLEN`,
/// 32 pages).
const MAX_ARG_STRLEN: usize = 32 * 4096;

/// `Err(E2BIG)` when the kernel would refuse these argv and envp (`execve(2)`, "Limits on
/// size of arguments and environment"): a string over [`MAX_ARG_STRLEN`], or all of them
/// (with their pointers) over a quarter of the process's stack limit, at least 128 KiB and at
/// most 6 MiB.
pub(crate) fn check_sizes(tgid: u32, argv: &[String], envp: &[Vec<u8>]) -> Result<(), i32> {
    let lens = argv
        .iter()
        .map(|a| a.len())
        .chain(envp.iter().map(Vec::len));
    let mut total = 0usize;
    for l in lens {
        if l + 1 > MAX_ARG_STRLEN {
            return Err(libc::E2BIG);
        }
        total += l + 1 + 8;
    }
    if total <= 128 * 1024 {
        return Ok(());
    }
    let limit = procfs::stack_limit(tgid)
        .map(|s| (s / 4).max(128 * 1024))
        .unwrap_or(usize::MAX)
        .min(6 << 20);
    if total > limit {
        return Err(libc::E2BIG);
    }
    Ok(())
}

/// What git runs a program of the person's configuration for ([`PersonsGitProgram`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GitProgramKind {
    /// The pager (`GIT_PAGER`, `core.pager`, `pager.<cmd>`, `PAGER`): run with no argument.
    Pager,
    /// The external diff (`GIT_EXTERNAL_DIFF`, `diff.external`, `diff.<driver>.command`): run
    /// with the path, or the path and six (a rename: eight) words naming the two sides
    /// (git(1) `GIT_EXTERNAL_DIFF`).
    ExternalDiff,
    /// A diff driver's `textconv`: run with the file to convert.
    Textconv,
    /// A filter driver's `clean`, `smudge` or `process` without `%f`: run with no argument,
    /// the content on its standard input (gitattributes(5) "filter").
    Filter,
}

impl GitProgramKind {
    /// Whether git runs this kind of program with `n` arguments of its own.
    fn takes(self, n: usize) -> bool {
        match self {
            GitProgramKind::Pager => n == 0,
            GitProgramKind::ExternalDiff => matches!(n, 1 | 7 | 9),
            GitProgramKind::Textconv => n == 1,
            GitProgramKind::Filter => n == 0,
        }
    }
}

/// A program the person's own git configuration or environment names for git to run while
/// it shows something (`core.pager = delta`, `diff.external = difft`): the value as written,
/// and where it came from (for the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PersonsGitProgram {
    pub kind: GitProgramKind,
    pub value: String,
    pub origin: String,
}

/// The characters that make git run a command through `sh -c` (run-command.c
/// `prepare_shell_cmd`); a value without them is exec'd as one program name.
const GIT_SHELL_METACHARS: &str = "|&;<>()$`\\\"' \t\n*?[#~=%";

/// The program-valued keys git reads for a command that only shows something, and the kind
/// of each (`pager.<cmd>` when it names a program, not when it is a boolean; the drivers a
/// repository's attributes select: `diff.<driver>.textconv`/`command`, `filter.<driver>.*`,
/// git-lfs's `filter.lfs.process = git-lfs filter-process`).
fn git_program_kind(key: &str, value: &str) -> Option<GitProgramKind> {
    let key = key.to_ascii_lowercase();
    match key.as_str() {
        "core.pager" => Some(GitProgramKind::Pager),
        "diff.external" => Some(GitProgramKind::ExternalDiff),
        k if k.starts_with("diff.") && k.ends_with(".command") => {
            Some(GitProgramKind::ExternalDiff)
        }
        k if k.starts_with("diff.") && k.ends_with(".textconv") => Some(GitProgramKind::Textconv),
        // With `%f` git puts the path in the line: no value to match as written.
        k if k.starts_with("filter.")
            && (k.ends_with(".clean") || k.ends_with(".smudge") || k.ends_with(".process"))
            && !value.contains("%f") =>
        {
            Some(GitProgramKind::Filter)
        }
        k if k.starts_with("pager.") => {
            let boolean = matches!(
                value.trim().to_ascii_lowercase().as_str(),
                "" | "true" | "false" | "yes" | "no" | "on" | "off" | "1" | "0"
            );
            (!boolean).then_some(GitProgramKind::Pager)
        }
        _ => None,
    }
}

/// The programs the person's git configuration files (system and global, with their
/// includes, as `git config --list --show-scope --show-origin` reads them in `worktree` with
/// the session's starting environment `env`) and starting environment (`GIT_PAGER`, `PAGER`, `GIT_EXTERNAL_DIFF`)
/// name for git to run while it shows something. A file under a root the session writes
/// (`writable`: an include of the worktree's) is the agent's, and left out; so is
/// configuration from the command line or environment (`GIT_CONFIG_PARAMETERS`). Nothing when
/// git cannot be run; git is run only when a configuration file names such a key.
pub(crate) fn persons_git_programs(
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    worktree: &Path,
    writable: &[PathBuf],
) -> Vec<PersonsGitProgram> {
    let get = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .filter(|v| !v.is_empty())
    };
    let mut v: Vec<PersonsGitProgram> = [
        ("GIT_PAGER", GitProgramKind::Pager),
        ("PAGER", GitProgramKind::Pager),
        ("GIT_EXTERNAL_DIFF", GitProgramKind::ExternalDiff),
    ]
    .into_iter()
    .filter_map(|(name, kind)| {
        get(name).map(|value| PersonsGitProgram {
            kind,
            value,
            origin: format!("the session's environment ({name})"),
        })
    })
    .collect();
    // Only worth a run of git when a file git reads names such a key (or another file).
    let home = get("HOME").map(PathBuf::from);
    let xdg = get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let files = [
        Some(PathBuf::from("/etc/gitconfig")),
        get("GIT_CONFIG_SYSTEM").map(PathBuf::from),
        get("GIT_CONFIG_GLOBAL").map(PathBuf::from),
        xdg.map(|x| x.join("git/config")),
        home.map(|h| h.join(".gitconfig")),
    ];
    let worth = files.iter().flatten().any(|f| {
        std::fs::read(f).is_ok_and(|b| {
            let t = String::from_utf8_lossy(&b).to_ascii_lowercase();
            [
                "pager", "external", "include", "textconv", "command", "filter",
            ]
            .iter()
            .any(|k| t.contains(k))
        })
    });
    if !worth {
        return v;
    }
    // In the worktree, so that an `includeIf "gitdir:…"` is read as the session's git
    // reads it; only the system and global scopes (and what they include) count.
    for e in crate::sandbox::git_config_list(worktree, Some(env)) {
        if e.scope != "global" && e.scope != "system" {
            continue;
        }
        let (origin, key, value) = (e.origin.as_str(), e.key.as_str(), e.value.as_str());
        let Some(kind) = git_program_kind(key, value) else {
            continue;
        };
        let Some(file) = origin.strip_prefix("file:") else {
            continue;
        };
        let file = Path::new(file);
        let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        if !file.is_absolute()
            || writable
                .iter()
                .any(|w| file.starts_with(w) || real.starts_with(w))
        {
            continue;
        }
        v.push(PersonsGitProgram {
            kind,
            value: value.to_string(),
            origin: format!("`{}` in {}", key.to_ascii_lowercase(), file.display()),
        });
    }
    v
}

/// Which of the person's git programs `progs` an exec with `argv` is, in the shapes git runs
/// one (run-command.c `prepare_shell_cmd`): a value without shell metacharacters exec'd as
/// itself (`argv[0]` the value) with git's arguments; any other value through the system
/// shell (`shell`: the file run is one) as `sh -c VALUE VALUE` (no arguments) or
/// `sh -c 'VALUE "$@"' VALUE ARGS…`; and a value of plain words (`less -R`) exec'd by that
/// shell as those words with git's arguments. The number of git's arguments must be the
/// kind's ([`GitProgramKind::takes`]). The file the caller checks (a system shell, or a file
/// in a root the session cannot change).
pub(crate) fn persons_git_program<'a>(
    progs: &'a [PersonsGitProgram],
    argv: &[String],
    shell: bool,
) -> Option<&'a PersonsGitProgram> {
    progs.iter().find(|p| {
        let v = p.value.as_str();
        if v.trim().is_empty() {
            return false;
        }
        if shell {
            return argv.len() >= 4
                && argv[1] == "-c"
                && argv[3] == v
                && ((argv[2] == v && argv.len() == 4)
                    || (argv[2] == format!("{v} \"$@\"") && p.kind.takes(argv.len() - 4)));
        }
        // git finds a bare name on `PATH` itself and passes the file it found as `argv[0]`
        // (run-command.c `prepare_cmd`); the caller checks that file.
        let names = |a: &str, w: &str| {
            a == w || (!w.contains('/') && a.starts_with('/') && a.rsplit('/').next() == Some(w))
        };
        let plain = !v.contains(|c: char| GIT_SHELL_METACHARS.contains(c));
        if plain {
            return argv.first().is_some_and(|a| names(a, v)) && p.kind.takes(argv.len() - 1);
        }
        // Words separated by blanks only: what the shell runs for `sh -c 'VALUE "$@"'`.
        let words: Vec<&str> = v.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
        let simple = v
            .chars()
            .all(|c| c == ' ' || c == '\t' || !GIT_SHELL_METACHARS.contains(c));
        simple
            && argv.len() >= words.len()
            && argv.iter().zip(&words).enumerate().all(
                |(i, (a, w))| {
                    if i == 0 {
                        names(a, w)
                    } else {
                        a == w
                    }
                },
            )
            && p.kind.takes(argv.len() - words.len())
    })
}

/// What an exec under a cover gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Covered {
    /// Runs: green, yellow, or red for the very rules the cover was approved with.
    Pass,
    /// Waits for the person (never rememberable).
    Ask,
    /// Refused: blocked at any depth.
    Refuse,
}

/// The decision for an exec classified `verdict` with `rules` under `cover`.
pub(crate) fn covered(verdict: Verdict, rules: &[String], cover: &Cover) -> Covered {
    match verdict {
        Verdict::Blocked => Covered::Refuse,
        Verdict::Green | Verdict::Yellow => Covered::Pass,
        Verdict::Red => {
            if cover.verdict == Verdict::Red && rules.iter().all(|r| cover.rules.contains(r)) {
                Covered::Pass
            } else {
                Covered::Ask
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_of_a_system_program_is_that_program() {
        let t = tempfile::tempdir().unwrap();
        let rm = std::fs::canonicalize("/usr/bin/rm").unwrap();
        let copy = t.path().join("x");
        std::fs::copy(&rm, &copy).unwrap();
        let found = system_copy_of(&copy).unwrap();
        assert_eq!(
            std::fs::read(&found).unwrap(),
            std::fs::read(&rm).unwrap(),
            "{found:?}"
        );
        // One byte changed, the same size: another program.
        let mut bytes = std::fs::read(&rm).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let other = t.path().join("y");
        std::fs::write(&other, &bytes).unwrap();
        assert_eq!(system_copy_of(&other), None);
        // A file of a size no system program has, and an empty one.
        std::fs::write(
            t.path().join("z"),
            "#!/bin/sh\necho tyba-test-unique-size-0123456789\n",
        )
        .unwrap();
        assert_eq!(system_copy_of(&t.path().join("z")), None);
        std::fs::write(t.path().join("e"), "").unwrap();
        assert_eq!(system_copy_of(&t.path().join("e")), None);
        // The system program itself is no copy of another.
        assert_eq!(system_copy_of(&rm), None);
    }

    fn cover(verdict: Verdict, rules: &[&str]) -> Cover {
        Cover {
            accepted: verdict >= Verdict::Yellow,
            line: "make ship".into(),
            inner_command: None,
            verdict,
            rules: rules.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            hosts: Vec::new(),
            granted: Vec::new(),
            pushes: Vec::new(),
            own_hook: false,
        }
    }

    #[test]
    fn git_words_that_may_push_are_found_past_global_options() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let may = |a: &[&str]| git_may_push("/usr/bin/git", None, &v(a));
        assert!(may(&["git", "push", "net"]));
        assert!(may(&["git", "-C", "sub", "--no-pager", "p"]), "an alias");
        assert!(may(&["git", "--git-dir=x", "-c", "a.b=c", "lfs", "push"]));
        assert!(may(&["git", "rebase", "-x", "make"]));
        assert!(
            may(&["git", "--unknown-option", "status"]),
            "not read for certain"
        );
        assert!(
            !may(&["git", "-C", "push", "status"]),
            "a value, then status"
        );
        assert!(!may(&["git", "commit", "-m", "push"]));
        assert!(!may(&["git", "--version"]));
        assert!(!may(&["git"]));
        assert!(!git_may_push("/usr/bin/ls", None, &v(&["ls", "push"])));
        assert!(git_may_push(
            "/usr/lib/git-core/git-push",
            None,
            &v(&["git-push", "net"])
        ));
        assert!(!git_may_push(
            "/usr/lib/git-core/git-status",
            None,
            &v(&["git-status"])
        ));
        assert!(git_may_push(
            "/tmp/x",
            Some(Path::new("/usr/lib/git-core/git")),
            &v(&["x", "push"])
        ));
    }

    #[test]
    fn a_git_dir_naming_the_repository_git_finds_anyway_moves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        let other = t.path().join("other");
        for d in [&repo, &other] {
            std::fs::create_dir_all(d.join(".git")).unwrap();
        }
        std::fs::create_dir_all(repo.join("src")).unwrap();
        let start = HashMap::new();
        let env = |v: &[String]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let own = format!("GIT_DIR={}", repo.join(".git").display());
        assert!(config_moves(&env(&[own]), &start, &repo.join("src")).is_empty());
        let rel = "GIT_DIR=../.git".to_string();
        assert!(config_moves(&env(&[rel]), &start, &repo.join("src")).is_empty());
        let elsewhere = format!("GIT_DIR={}", other.join(".git").display());
        assert_eq!(
            config_moves(&env(&[elsewhere]), &start, &repo.join("src")).len(),
            1
        );
        let home = "HOME=/tmp/h".to_string();
        assert_eq!(config_moves(&env(&[home]), &start, &repo).len(), 1);
    }

    #[test]
    fn the_persons_git_programs_match_only_in_the_shapes_git_runs_them() {
        let p = |kind, value: &str| PersonsGitProgram {
            kind,
            value: value.to_string(),
            origin: String::new(),
        };
        let progs = vec![
            p(GitProgramKind::Pager, "delta"),
            p(GitProgramKind::Pager, "less -R"),
            p(GitProgramKind::ExternalDiff, "difft"),
        ];
        let seven = ["f", "/tmp/a", "0000", "100644", "f", "1111", "100644"];
        let argv = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let with = |head: &[&str], rest: &[&str]| argv(&[head, rest].concat());
        let found = |a: &[String], shell| persons_git_program(&progs, a, shell).map(|p| p.kind);
        // As git runs them: bare (its PATH lookup's file as argv[0]), through `sh -c`, and
        // the words that shell then runs.
        assert_eq!(found(&argv(&["delta"]), false), Some(GitProgramKind::Pager));
        assert_eq!(
            found(&argv(&["/home/p/.cargo/bin/delta"]), false),
            Some(GitProgramKind::Pager)
        );
        assert_eq!(
            found(&argv(&["/bin/sh", "-c", "less -R", "less -R"]), true),
            Some(GitProgramKind::Pager)
        );
        assert_eq!(
            found(&argv(&["less", "-R"]), false),
            Some(GitProgramKind::Pager)
        );
        assert_eq!(
            found(&with(&["difft"], &seven), false),
            Some(GitProgramKind::ExternalDiff)
        );
        assert_eq!(
            found(&with(&["/usr/bin/difft"], &seven), false),
            Some(GitProgramKind::ExternalDiff)
        );
        // Anything else is the exec's own line.
        for (a, shell) in [
            (argv(&["delta", "--evil"]), false),
            (argv(&["less", "-R", "+!id"]), false),
            (argv(&["less"]), false),
            (argv(&["sh", "-c", "less -R; id", "less -R; id"]), true),
            (argv(&["sh", "-c", "less -R", "less -R", "x"]), true),
            (argv(&["sh", "-c", "delta", "delta"]), false),
            (argv(&["difft"]), false),
            (with(&["delta"], &seven), false),
            (with(&["difft"], &seven[..6]), false),
            (argv(&["./delta"]), false),
            (argv(&["x/delta"]), false),
            (argv(&["delta2"]), false),
            (argv(&[]), false),
        ] {
            assert_eq!(found(&a, shell), None, "{a:?}");
        }
        // A value with shell syntax is run through the shell only, never word by word.
        let odd = vec![p(GitProgramKind::Pager, "less -R | cat")];
        assert!(persons_git_program(&odd, &argv(&["less", "-R", "|", "cat"]), false).is_none());
        assert!(persons_git_program(
            &odd,
            &argv(&["/bin/sh", "-c", "less -R | cat", "less -R | cat"]),
            true
        )
        .is_some());
        // `pager.<cmd>` names a program only when it is no boolean.
        assert_eq!(git_program_kind("pager.log", "false"), None);
        assert_eq!(git_program_kind("pager.log", "yes"), None);
        assert_eq!(
            git_program_kind("Pager.log", "delta"),
            Some(GitProgramKind::Pager)
        );
        assert_eq!(git_program_kind("core.editor", "vim"), None);
        assert_eq!(
            git_program_kind("filter.lfs.process", "git-lfs filter-process"),
            Some(GitProgramKind::Filter)
        );
        assert_eq!(
            git_program_kind("filter.lfs.clean", "git-lfs clean -- %f"),
            None
        );
        assert_eq!(
            git_program_kind("diff.png.textconv", "exiftool"),
            Some(GitProgramKind::Textconv)
        );
        let lfs = vec![p(GitProgramKind::Filter, "git-lfs filter-process")];
        for (a, shell, ok) in [
            (
                argv(&[
                    "/bin/sh",
                    "-c",
                    "git-lfs filter-process",
                    "git-lfs filter-process",
                ]),
                true,
                true,
            ),
            (argv(&["git-lfs", "filter-process"]), false, true),
            (argv(&["git-lfs", "filter-process", "x"]), false, false),
            (argv(&["git-lfs", "smudge"]), false, false),
        ] {
            assert_eq!(persons_git_program(&lfs, &a, shell).is_some(), ok, "{a:?}");
        }
    }

    #[test]
    fn a_pager_runs_bare_only_with_the_sessions_own_pager_variables() {
        let start: HashMap<String, String> = [("EDITOR".to_string(), "vi".to_string())]
            .into_iter()
            .collect();
        let env = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(pager_env_unchanged(
            &env(&["PATH=/bin", "EDITOR=vi"]),
            &start
        ));
        // What git sets for its pager when unset.
        assert!(pager_env_unchanged(&env(&["LESS=FRX", "LV=-c"]), &start));
        for bad in [
            "LESS=+!touch pwned",
            "LESSOPEN=|touch pwned %s",
            "EDITOR=touch pwned",
            "SHELL=/tmp/x",
            "LESSKEYIN=/tmp/keys",
            "MORE=-d",
        ] {
            assert!(!pager_env_unchanged(&env(&[bad]), &start), "{bad}");
        }
        // Every occurrence counts.
        assert!(!pager_env_unchanged(
            &env(&["EDITOR=vi", "EDITOR=touch pwned"]),
            &start
        ));
    }

    #[test]
    fn only_the_very_same_cover_is_the_same_role() {
        let c = Arc::new(cover(Verdict::Yellow, &["r"]));
        let equal = Arc::new(cover(Verdict::Yellow, &["r"]));
        let cmd = |c: &Arc<Cover>| Role::Command(Arc::clone(c));
        assert!(same_role(&cmd(&c), &cmd(&c)));
        // An equal cover made for another exec is another approval.
        assert!(!same_role(&cmd(&c), &cmd(&equal)));
        assert!(same_role(&Role::Agent, &Role::Agent));
        assert!(!same_role(&Role::Agent, &cmd(&c)));
        assert!(!same_role(&cmd(&c), &Role::Agent));
        assert!(!same_role(&Role::Stray, &Role::Agent));
        // A descendant whose line names none of the cover's hosts keeps the cover itself.
        assert!(same_role(&cmd(&c), &Role::Command(narrowed(&c, &[]))));
    }

    #[test]
    fn a_descendant_keeps_only_the_hosts_its_own_line_names() {
        let c = Arc::new(Cover {
            hosts: vec!["127.0.0.1:8765".into(), "pypi.org".into()],
            ..cover(Verdict::Red, &["net.client"])
        });
        assert!(Arc::ptr_eq(&narrowed(&c, &c.hosts.clone()), &c));
        assert_eq!(narrowed(&c, &["PyPI.org".into()]).hosts, ["pypi.org"]);
        assert!(narrowed(&c, &[]).hosts.is_empty(), "not a network client");
        assert!(narrowed(&c, &["attacker.example".into()]).hosts.is_empty());
        let n = narrowed(&c, &[]);
        assert_eq!((n.line.as_str(), n.verdict), ("make ship", Verdict::Red));
    }

    fn rules(r: &[&str]) -> Vec<String> {
        r.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn under_a_cover_blocked_is_refused_and_red_asked_unless_approved_for_the_same_rules() {
        let y = cover(Verdict::Yellow, &["build.runs-code"]);
        assert_eq!(covered(Verdict::Blocked, &[], &y), Covered::Refuse);
        assert_eq!(covered(Verdict::Green, &[], &y), Covered::Pass);
        assert_eq!(
            covered(Verdict::Yellow, &rules(&["fs.delete"]), &y),
            Covered::Pass
        );
        assert_eq!(
            covered(Verdict::Red, &rules(&["net.client"]), &y),
            Covered::Ask
        );
        let r = cover(Verdict::Red, &["net.client", "shell.pipe-to-shell"]);
        assert_eq!(
            covered(Verdict::Red, &rules(&["net.client"]), &r),
            Covered::Pass
        );
        assert_eq!(
            covered(Verdict::Red, &rules(&["net.client", "fs.rm-rf"]), &r),
            Covered::Ask
        );
        // Nothing approved red covers a blocked descendant.
        assert_eq!(covered(Verdict::Blocked, &[], &r), Covered::Refuse);
    }

    #[test]
    fn a_shells_own_start_up_variables_changed_are_seen() {
        let start: HashMap<String, String> = [("HOME", "/home/u"), ("PAGER", "less")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let e = |v: &[&str]| -> Vec<Vec<u8>> { v.iter().map(|s| s.as_bytes().to_vec()).collect() };
        assert!(!shell_env_changed(
            &e(&["HOME=/home/u", "PAGER=more", "GIT_EDITOR=true"]),
            &start
        ));
        for bad in [
            "HOME=/wt",
            "BASH_ENV=/wt/x.sh",
            "ENV=/wt/x.sh",
            "LD_PRELOAD=/wt/x.so",
            "BASH_FUNC_/bin/sh%%=() { rm -rf ~; }",
            "SHELLOPTS=xtrace",
            "PS4=$(rm -rf ~)",
            "GCONV_PATH=/wt",
            "ZDOTDIR=/wt",
        ] {
            assert!(
                shell_env_changed(&e(&["HOME=/home/u", bad]), &start),
                "{bad}"
            );
        }
    }

    #[test]
    fn values_naming_only_kept_files_are_inert_and_others_are_not() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        let (ro, wt, mixed) = (root.join("ro"), root.join("wt"), root.join("mixed"));
        for d in ["ro/bin", "ro/lib", "wt/bin", "wt/lib", "mixed/w"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "ro/bin/vi",
            "ro/bin/sh",
            "ro/bin/less",
            "wt/bin/vi",
            "ro/bin/plain",
        ] {
            std::fs::write(root.join(f), "#!/bin/sh\n").unwrap();
            let mode = if f.ends_with("plain") { 0o644 } else { 0o755 };
            std::fs::set_permissions(root.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::os::unix::fs::symlink(wt.join("lib"), ro.join("to-wt")).unwrap();
        std::os::unix::fs::symlink(wt.join("bin/vi"), ro.join("bin/vim")).unwrap();
        let readable = vec![ro.clone(), mixed.clone(), std::path::PathBuf::from("/proc")];
        let writable = vec![wt.clone(), mixed.join("w")];
        let kept = KeptRoots {
            readable: &readable,
            writable: &writable,
        };
        let d = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let (rob, rol, wtb, wtl) = (
            d(&ro.join("bin")),
            d(&ro.join("lib")),
            d(&wt.join("bin")),
            d(&wt.join("lib")),
        );
        // rustup's proxy: its toolchain's lib dir, kept; anything the session writes is not.
        assert!(kept.inert("LD_LIBRARY_PATH", &rol, None));
        assert!(kept.inert("LD_LIBRARY_PATH", &format!("{rol}:{rob}"), None));
        assert!(kept.inert("GIT_EXEC_PATH", &d(&ro.join("absent")), None));
        for bad in [
            format!("{rol}:{wtl}"),
            format!("{rol}:"),
            format!(":{rol}"),
            String::new(),
            format!("{rol}/../../wt/lib"),
            d(&ro.join("to-wt")),
            d(&mixed),
            "/proc/self/cwd".into(),
            "lib".into(),
            "/nowhere/lib".into(),
        ] {
            assert!(!kept.inert("LD_LIBRARY_PATH", &bad, None), "{bad}");
        }
        assert!(kept.inert("LD_PRELOAD", &format!("{rol}/a.so {rol}/b.so"), None));
        assert!(!kept.inert("LD_PRELOAD", &format!("{rol}/a.so {wtl}/b.so"), None));
        // The loader-path variables of the other readers: kept paths only.
        for name in [
            "GCONV_PATH",
            "PYTHONPATH",
            "PERL5LIB",
            "NODE_PATH",
            "OPENSSL_CONF",
        ] {
            assert!(kept.inert(name, &rol, None), "{name}");
            assert!(!kept.inert(name, &wtl, None), "{name}");
            assert!(!kept.inert(name, &format!("{rol}:"), None), "{name}");
        }
        // Values that load nothing, whatever the paths; the same variables naming a module.
        assert!(kept.inert("PYTHONWARNINGS", "ignore", None));
        assert!(kept.inert("PYTHONWARNINGS", "error::DeprecationWarning,default", None));
        assert!(kept.inert("PYTHONBREAKPOINT", "0", None));
        assert!(!kept.inert("PYTHONWARNINGS", "error::evil.Warning", None));
        assert!(!kept.inert("PYTHONBREAKPOINT", "evil.hook", None));
        // A loader variable with no path to judge (`LD_*` beyond the three) is never inert.
        assert!(!kept.inert("LD_ORIGIN_PATH", &rol, None));
        // npm's `EDITOR=vi`: a viewer found first on `PATH` in a kept root.
        assert!(kept.inert("EDITOR", "vi", Some(&rob)));
        assert!(kept.inert("GIT_PAGER", "less", Some(&format!("/nowhere:{rob}"))));
        assert!(kept.inert("VISUAL", &format!("{rob}/vi"), None));
        for (name, value, path) in [
            ("EDITOR", "vi", format!("{wtb}:{rob}")),
            ("EDITOR", "vi", format!(":{rob}")),
            ("EDITOR", "vi", format!("bin:{rob}")),
            ("EDITOR", "vi", "/nowhere".to_string()),
            ("EDITOR", "vim", rob.clone()),
            ("EDITOR", "sh", rob.clone()),
            ("PAGER", "plain", rob.clone()),
            ("EDITOR", "vi -c '!id'", rob.clone()),
            ("EDITOR", "vi;id", rob.clone()),
            ("EDITOR", "", rob.clone()),
            ("EDITOR", &format!("{wtb}/vi"), rob.clone()),
            ("EDITOR", &format!("{rob}/sh"), rob.clone()),
            ("GIT_SSH_COMMAND", "vi", rob.clone()),
            ("NODE_OPTIONS", &rol, rob.clone()),
            ("PROMPT_COMMAND", "less", rob.clone()),
            ("PS4", "vi", rob.clone()),
        ] {
            assert!(
                !kept.inert(name, value, Some(&path)),
                "{name}={value} PATH={path}"
            );
        }
        // Every `PATH` of the environment must find a kept one.
        let envp = |paths: &[&str]| -> Vec<Vec<u8>> {
            paths
                .iter()
                .map(|p| format!("PATH={p}").into_bytes())
                .collect()
        };
        let a = vec![("EDITOR".to_string(), "vi".to_string())];
        assert!(drop_inert(a.clone(), &envp(&[&rob]), &kept).is_empty());
        assert_eq!(drop_inert(a.clone(), &envp(&[&rob, &wtb]), &kept), a);
        assert_eq!(drop_inert(a.clone(), &envp(&[&wtb, &rob]), &kept), a);
        assert_eq!(
            drop_inert(a.clone(), &[], &kept),
            a,
            "no PATH finds nothing"
        );
    }

    #[test]
    fn assignments_from_the_read_environment_match_a_fresh_pass() {
        let envp: Vec<Vec<u8>> = [
            "PATH=/usr/bin",
            "PAGER=less",
            "PAGER=more",
            "GIT_CONFIG_COUNT=1",
            "GIT_EXEC_PATH=/usr/lib/git-core",
            "LD_PRELOAD=/wt/x.so",
            "HOME=/wt/h",
            "EDITOR=vim",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let start: HashMap<String, String> = [("PAGER", "less"), ("EDITOR", "vim")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let covered = [("GIT_CONFIG_COUNT".to_string(), "1".to_string())];
        let login = StartupFiles::of(
            std::path::Path::new("/usr/bin/bash"),
            &["bash".into(), "-lc".into(), "ls".into()],
        );
        assert!(login.is_some());
        let code = code_env(&envp);
        for shell in [None, login.as_ref()] {
            for cov in [&[][..], &covered[..]] {
                assert_eq!(
                    assignments_of(&code, &envp, &start, cov, shell),
                    env_assignments(&envp, &start, cov, shell)
                );
            }
        }
    }

    #[test]
    fn only_changed_code_running_variables_are_assignments() {
        let envp: Vec<Vec<u8>> = [
            "PATH=/usr/bin",
            "PAGER=less",
            "GIT_CONFIG_COUNT=1",
            "GIT_CONFIG_KEY_0=core.pager",
            "GIT_CONFIG_VALUE_0=rm -f notes.md",
            "EDITOR=vim",
            "EDITOR=nano",
            "LD_PRELOAD=/tmp/x.so",
            "noequals",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let start: HashMap<String, String> = [("PAGER", "less"), ("EDITOR", "emacs")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let covered = vec![("LD_PRELOAD".to_string(), "/tmp/x.so".to_string())];
        let a = env_assignments(&envp, &start, &covered, None);
        let names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
        // Both occurrences of EDITOR count: loaders and shells take the last.
        assert_eq!(
            names,
            [
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_VALUE_0",
                "EDITOR",
                "EDITOR"
            ]
        );
        assert_eq!((a[3].1.as_str(), a[4].1.as_str()), ("vim", "nano"));
        // git's own exec path is the system's code; one in the worktree is not.
        let g = |v: &str| vec![format!("GIT_EXEC_PATH={v}").into_bytes()];
        assert!(env_assignments(&g("/usr/lib/git-core"), &start, &[], None).is_empty());
        assert_eq!(env_assignments(&g("/wt/x"), &start, &[], None).len(), 1);
        assert_eq!(
            env_assignments(&g("/usr/../wt"), &start, &[], None).len(),
            1
        );
        assert_eq!(
            env_assignments(&g("/usr/lib:/wt"), &start, &[], None).len(),
            1
        );
        // A login shell's HOME counts; a plain command's does not.
        let h = vec![b"HOME=/wt/h".to_vec()];
        let sh = StartupFiles::of(
            std::path::Path::new("/usr/bin/bash"),
            &["bash".into(), "-lc".into(), "ls".into()],
        );
        assert!(sh.is_some());
        assert_eq!(env_assignments(&h, &start, &[], sh.as_ref()).len(), 1);
        assert!(env_assignments(&h, &start, &[], None).is_empty());

        assert_eq!(
            classified_line(&a[2..3], "git log -n1"),
            "export GIT_CONFIG_VALUE_0='rm -f notes.md'; git log -n1"
        );
        assert_eq!(classified_line(&[], "ls"), "ls");
    }

    #[test]
    fn shells_that_read_startup_files_are_known() {
        let of = |f: &str, a: &[&str]| {
            StartupFiles::of(
                std::path::Path::new(f),
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        assert!(of("/usr/bin/bash", &["bash", "-c", "ls"]).is_none());
        assert!(of("/usr/bin/bash", &["bash", "-c", "ls", "-l"]).is_none());
        assert!(of("/usr/bin/bash", &["bash", "-i", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/bash", &["-bash", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/bash", &["bash", "--login", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/zsh", &["zsh", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/cat", &["-cat"]).is_none());
        assert_eq!(
            of("/usr/bin/bash", &["bash", "--rcfile", "x.sh", "-i"]).map(|s| s.sourced),
            Some(vec!["x.sh".to_string()])
        );
        // bash's long options with one dash; an option's value is no option letter.
        assert_eq!(
            of("/usr/bin/bash", &["bash", "-rcfile", "x.sh", "-c", "ls"]).map(|s| s.sourced),
            Some(vec!["x.sh".to_string()])
        );
        assert!(of("/usr/bin/bash", &["bash", "-init-file", "y", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/bash", &["bash", "-login", "-c", "ls"]).is_some());
        assert!(of("/usr/bin/bash", &["bash", "-c", "-o", "history", "ls"]).is_none());
        assert!(of("/usr/bin/bash", &["bash", "--frob", "-c", "ls"]).is_some());
        assert_eq!(
            classified_line(&[(String::new(), "x.sh".into())], "ls"),
            "source x.sh; ls"
        );
    }

    #[test]
    fn names_through_writable_places_are_seen_lexically() {
        let roots = vec![std::path::PathBuf::from("/wt")];
        let cwd = std::path::Path::new("/wt/src");
        assert!(lexically_within(b"lnk", cwd, &roots));
        assert!(lexically_within(b"/wt/x", cwd, &roots));
        assert!(lexically_within(b"/usr/../wt/x", cwd, &roots));
        assert!(!lexically_within(b"/usr/bin/node", cwd, &roots));
        assert!(!lexically_within(b"../../usr/bin/node", cwd, &roots));
        assert!(!lexically_within(b"/wtx/y", cwd, &roots));
    }

    #[test]
    fn sizes_the_kernel_refuses_are_e2big() {
        let me = std::process::id();
        assert_eq!(check_sizes(me, &["ls".into()], &[]), Ok(()));
        let long = "x".repeat(MAX_ARG_STRLEN);
        assert_eq!(check_sizes(me, &[long], &[]), Err(libc::E2BIG));
        let many: Vec<Vec<u8>> = (0..200).map(|_| vec![b'y'; 100_000]).collect();
        assert_eq!(check_sizes(me, &[], &many), Err(libc::E2BIG));
    }

    #[test]
    fn a_pending_role_waits_for_the_image_to_change() {
        // This test process is its own subject: its exe and stack do not change, so a pending
        // role for a file that is not its exe never takes effect.
        let me = std::process::id();
        let st = procfs::stat_ext(me).unwrap();
        let mut t = ProcTable::new();
        let dir = procfs::ProcDir::open(me).unwrap();
        let c = Arc::new(cover(Verdict::Yellow, &[]));
        let files = vec![(1, 1)];
        let mark = ImageMark::read(&dir, &files);
        t.set_pending(
            Who {
                pid: me,
                start: st.start,
                pidfd: None,
            },
            Role::Agent,
            Role::Command(c),
            files,
            mark,
        );
        assert!(t.role_of(me, &st, 0, &|_, _| None).is_agent());
        // Once resolved as failed, the old role stays for good.
        assert!(t.role_of(me, &st, 0, &|_, _| None).is_agent());
        // The same file with the same stack is not taken as a new image either.
        let exe = procfs::exe_id(me).unwrap();
        let c = Arc::new(cover(Verdict::Yellow, &[]));
        let mark = ImageMark::read(&dir, &[exe]);
        assert!(mark.by_stack && mark.old_stack.is_some());
        t.set_pending(
            Who {
                pid: me,
                start: st.start,
                pidfd: None,
            },
            Role::Agent,
            Role::Command(c),
            vec![exe],
            mark,
        );
        assert!(t.role_of(me, &st, 0, &|_, _| None).is_agent());
    }

    #[test]
    fn an_exec_counts_only_once_the_image_changed_to_the_file_decided_on() {
        let new = || Role::Command(Arc::new(cover(Verdict::Yellow, &[])));
        let p = |files: Vec<FileId>, old_exe: Option<FileId>| Pending {
            by_stack: old_exe.is_none_or(|e| files.contains(&e)),
            role: new(),
            files,
            old_exe,
            old_stack: Some(100),
        };
        let is_cmd = |r: &Role| matches!(r, Role::Command(_));
        let stack = |s: u64| move || Some(s);
        // Another file than it ran: the image tells. The file (or its interpreter): done.
        assert!(is_cmd(&resolve(
            p(vec![(1, 2), (1, 3)], Some((1, 9))),
            Some((1, 3)),
            || panic!("the stack is not read when the image tells"),
            Role::Agent
        )));
        // The image it ran before: the exec failed, the old role stays.
        assert!(resolve(
            p(vec![(1, 2)], Some((1, 9))),
            Some((1, 9)),
            stack(200),
            Role::Agent
        )
        .is_agent());
        // A third file (swapped in after the decision), or no readable image: nothing covers it.
        for exe in [Some((1, 7)), None] {
            assert!(matches!(
                resolve(p(vec![(1, 2)], Some((1, 9))), exe, stack(200), Role::Agent),
                Role::Stray
            ));
        }
        // A re-exec of the file it runs: the stack tells. Moved: done.
        assert!(is_cmd(&resolve(
            p(vec![(1, 2)], Some((1, 2))),
            Some((1, 2)),
            stack(200),
            Role::Agent
        )));
        // Unchanged: taken as failed.
        assert!(resolve(
            p(vec![(1, 2)], Some((1, 2))),
            Some((1, 2)),
            stack(100),
            Role::Agent
        )
        .is_agent());
        // Moved to another file than decided: nothing covers it.
        assert!(matches!(
            resolve(
                p(vec![(1, 2)], Some((1, 2))),
                Some((1, 7)),
                stack(200),
                Role::Agent
            ),
            Role::Stray
        ));
        // The old image was unreadable: the stack tells; the image changed to the file with
        // the stack unchanged (ASLR off) still counts.
        assert!(is_cmd(&resolve(
            p(vec![(1, 2)], None),
            Some((1, 2)),
            stack(100),
            Role::Agent
        )));
        // A stack that cannot be read: nothing covers it.
        assert!(matches!(
            resolve(
                p(vec![(1, 2)], Some((1, 2))),
                Some((1, 2)),
                || None,
                Role::Agent
            ),
            Role::Stray
        ));
    }

    #[test]
    fn a_fork_child_has_its_parents_role() {
        let me = std::process::id();
        let st = procfs::stat_ext(me).unwrap();
        let mut t = ProcTable::new();
        t.set(me, st.start, Role::Agent, None);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let cst = procfs::stat_ext(child.id()).unwrap();
        let r = t.role_of(child.id(), &cst, 0, &|_, _| None);
        let _ = child.kill();
        let _ = child.wait();
        assert!(r.is_agent());
        // An unknown lineage is stray.
        let mut empty = ProcTable::new();
        assert!(matches!(
            empty.role_of(me, &st, 0, &|_, _| None),
            Role::Stray
        ));
    }

    /// A parent's held pidfd vouches for it only while that process lives: a pidfd that has
    /// exited sends the lookup back to the process's identity, which then decides.
    #[test]
    fn a_held_pidfd_vouches_for_its_process_only_while_it_lives() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let cst = procfs::stat_ext(child.id()).unwrap();
        let mine = Arc::new(crate::sys::pidfd_open(me as i32).unwrap());
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_fd = Arc::new(crate::sys::pidfd_open(gone.id() as i32).unwrap());
        gone.wait().unwrap();
        // An identity that is not this process's: only the pidfd can make the entry match.
        let other = u64::MAX;
        let mut live = ProcTable::new();
        live.set(me, other, Role::Agent, Some(Arc::clone(&mine)));
        let by_live = live.role_of(child.id(), &cst, 0, &|_, _| None);
        let mut dead = ProcTable::new();
        dead.set(me, other, Role::Agent, Some(gone_fd));
        let by_dead = dead.role_of(child.id(), &cst, 0, &|_, _| None);
        let _ = child.kill();
        let _ = child.wait();
        assert!(by_live.is_agent(), "a live held pidfd names the parent");
        assert!(
            matches!(by_dead, Role::Stray),
            "an exited pidfd must not vouch: {by_dead:?}"
        );
    }

    /// The table keeps at most [`MAX_HELD`] pidfds, and frees those of processes that are gone
    /// when it needs room.
    #[test]
    fn held_pidfds_are_bounded_and_freed_when_their_processes_are_gone() {
        let mut t = ProcTable::new();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_fd = Arc::new(crate::sys::pidfd_open(gone.id() as i32).unwrap());
        gone.wait().unwrap();
        for pid in 0..MAX_HELD as u32 {
            t.set(1_000_000 + pid, 1, Role::Stray, Some(Arc::clone(&gone_fd)));
        }
        assert_eq!(t.held, MAX_HELD);
        let mine = Arc::new(crate::sys::pidfd_open(std::process::id() as i32).unwrap());
        t.set(7, 1, Role::Agent, Some(Arc::clone(&mine)));
        assert_eq!(t.held, 1, "the gone ones are dropped to make room");
        for pid in 0..(MAX_HELD as u32 + 10) {
            t.set(2_000_000 + pid, 1, Role::Stray, Some(Arc::clone(&mine)));
        }
        assert_eq!(t.held, MAX_HELD, "never more than the bound");
        assert_eq!(Arc::strong_count(&mine), MAX_HELD + 1);
    }
}
