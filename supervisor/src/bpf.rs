//! The seccomp filters (`linux/seccomp.h`, kernel
//! `Documentation/userspace-api/seccomp_filter.rst`), x86_64 only.
//!
//! Two kinds, installed one after the other on the sandbox's stage 2 (every process of the
//! sandbox inherits them all; the kernel runs every filter and the most restrictive action
//! wins, `ERRNO` over `USER_NOTIF` over `ALLOW`, `seccomp(2)` "multiple filters"):
//!
//! 1. **The static filters**, built with `seccompiler` (the filter library Firecracker uses):
//!    the denied system calls and the argument tests, one filter per errno (a `seccompiler`
//!    filter has one action on match): [`static_filters`].
//! 2. **The user-notification filter**, assembled here because `seccompiler` has no
//!    `SECCOMP_RET_USER_NOTIF` action and installs without `SECCOMP_FILTER_FLAG_NEW_LISTENER`:
//!    the architecture check (other architectures killed), x32 numbers (`nr >= 0x4000_0000`,
//!    which `seccompiler` does not test) failing with `ENOSYS`, then a syscall-number list
//!    whose calls go to the supervisor: [`notify_filter`].
//!
//! Both are checked by the BPF interpreter of the unit tests, combined as the kernel combines
//! them.

use crate::sys::SockFilter;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_K: u16 = 0x00;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_RET: u16 = 0x06;

/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `SECCOMP_RET_KILL_PROCESS`.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_ERRNO` (the errno goes in the low 16 bits).
pub const RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_USER_NOTIF`.
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// `SECCOMP_RET_ALLOW`.
pub const RET_ALLOW: u32 = 0x7fff_0000;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

fn ld(off: u32) -> SockFilter {
    stmt(BPF_LD | BPF_W | BPF_ABS, off)
}

fn ret(action: u32) -> SockFilter {
    stmt(BPF_RET | BPF_K, action)
}

fn errno(e: i32) -> u32 {
    RET_ERRNO | (e as u32 & 0xffff)
}

/// Errors building the filters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// `seccompiler` refused a filter or a rule.
    #[error("seccompiler: {0}")]
    Seccompiler(#[from] seccompiler::BackendError),
    /// The program exceeds `BPF_MAXINSNS` (4096).
    #[error("program has {0} instructions, more than 4096")]
    TooLong(usize),
}

/// The system calls handed to the supervisor: commands, connections, watches, and the
/// metadata changes Landlock has no rights for.
pub fn notified_syscalls() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_connect,
        // Watches name what they watch by path, and Landlock does not check that path: the
        // supervisor does (`crate::meta::handle_watch`).
        libc::SYS_inotify_add_watch,
    ];
    v.extend_from_slice(METADATA_SYSCALLS);
    v
}

/// Hard links, notified only in a session whose checkout is watched (`crate::here_watch`): a
/// hard link is another name of a file, and writes through it are reported under that name
/// only, so a session that made one gets the full look at its end instead of the events'
/// list. Recorded, then continued (Landlock decides); other sessions pay nothing for them.
pub const LINK_SYSCALLS: [i64; 2] = [libc::SYS_link, libc::SYS_linkat];

/// Assembles the user-notification filter for these syscall numbers: the architecture must
/// be `AUDIT_ARCH_X86_64` (else the process is killed), x32 numbers fail with `ENOSYS`, each
/// listed call returns `SECCOMP_RET_USER_NOTIF`, everything else `SECCOMP_RET_ALLOW`.
///
/// # Errors
/// [`FilterError::TooLong`] past 4096 instructions.
pub fn notify_filter(notified: &[i64]) -> Result<Vec<SockFilter>, FilterError> {
    let mut p = vec![
        ld(OFF_ARCH),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        ret(RET_KILL_PROCESS),
        ld(OFF_NR),
        jump(BPF_JMP | BPF_JGE | BPF_K, 0x4000_0000, 0, 1),
        ret(errno(libc::ENOSYS)),
    ];
    for &nr in notified {
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, 1));
        p.push(ret(RET_USER_NOTIF));
    }
    p.push(ret(RET_ALLOW));
    if p.len() > 4096 {
        return Err(FilterError::TooLong(p.len()));
    }
    Ok(p)
}

/// The metadata system calls Landlock does not cover and the supervisor performs itself.
pub const METADATA_SYSCALLS: &[i64] = &[
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_chown,
    libc::SYS_fchown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_utimensat,
];

/// `setxattrat` and `removexattrat` (Linux 6.13), absent from older libc tables.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// Namespace flags of `clone(2)` (`CLONE_NEWTIME` is not accepted by `clone` itself).
const CLONE_NS_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541c;
const SOCK_TYPE_MASK: u64 = 0xf;
const SOCK_RAW: u64 = 3;
const SOCK_PACKET: u64 = 10;
const MSG_FASTOPEN: u64 = 0x2000_0000;
/// `PR_SET_MM` (`prctl(2)`).
const PR_SET_MM: u64 = 35;
/// The socket families the sandbox may create.
const SOCKET_FAMILIES: &[i32] = &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];

/// Denied outright with `EPERM`: what breaks sandboxes and what no coding agent needs
/// (DESIGN.md §5, issue 4 §3, issue 13).
pub const DENIED_EPERM: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_lookup_dcookie,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    // fanotify reports events (and, with FAN_REPORT_NAME, names) on whole mounts and
    // filesystems, whatever Landlock grants; unprivileged since Linux 5.13.
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
];

/// Extended attribute writes: not covered by Landlock and not needed; "not supported"
/// (`EOPNOTSUPP`) makes cp/tar carry on without them.
pub const DENIED_EOPNOTSUPP: &[i64] = &[
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
];

/// `ENOSYS`: calls whose arguments the filter cannot read, with a fallback libc takes.
/// `clone3` passes its flags in memory (libc falls back to `clone`, whose flags it can read).
/// `sendmmsg` is not here: glibc's resolver sends its A and AAAA queries with it and takes no
/// fallback (its lookups would fail); it is denied with `MSG_FASTOPEN` only, like `sendmsg`.
/// Its per-message addresses reach no further than `sendto`'s: no datagram socket of the
/// host's network namespace is ever given to the sandbox (`docs/sandbox.md`).
pub const DENIED_ENOSYS: &[i64] = &[libc::SYS_clone3];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    Ok(SeccompRule::new(conds)?)
}

/// `(arg & bit) == bit` for one bit.
fn has_bit(arg: u8, bit: u64) -> Result<SeccompRule, FilterError> {
    rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)?])
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, e: i32) -> Result<BpfProgram, FilterError> {
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(e as u32),
        TargetArch::x86_64,
    )?;
    Ok(BpfProgram::try_from(f)?)
}

/// The static filters, built with `seccompiler`, one per errno (each: allow, unless a rule
/// matches):
/// - `EPERM`: [`DENIED_EPERM`]; `clone` with any namespace flag, with `CLONE_PARENT`, or with
///   `CLONE_VM` but neither `CLONE_THREAD` nor `CLONE_VFORK` (memory shared with a process
///   that is neither its thread nor its blocked vfork parent), or with `CLONE_FILES` but not
///   `CLONE_THREAD` (a descriptor table shared with another process); `ioctl` `TIOCSTI` and
///   `TIOCLINUX` (typing into a terminal); `socket` of an allowed family with a raw or packet
///   type; `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (TCP Fast Open connects inside
///   them, past the connect checks); `personality` other than the query (`0xffffffff`) and `PER_LINUX`;
///   `prctl(PR_SET_MM)`, which rewrites the fields of `/proc/<pid>/stat` and
///   `/proc/<pid>/exe` the exec model reads to tell that an exec happened (`crate::exec`): a
///   process could fake an exec it never made;
/// - `EAFNOSUPPORT`: `socket` of a family other than unix, inet, inet6 (netlink, packet,
///   vsock…);
/// - `ENOSYS`: [`DENIED_ENOSYS`];
/// - `EOPNOTSUPP`: [`DENIED_EOPNOTSUPP`].
///
/// Argument tests compare the low 32 bits (`int` arguments).
///
/// # Errors
/// [`FilterError`] when `seccompiler` refuses a rule or a filter.
pub fn static_filters() -> Result<Vec<BpfProgram>, FilterError> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED_EPERM.iter().map(|&nr| (nr, Vec::new())).collect();
    let mut clone_rules: Vec<SeccompRule> = CLONE_NS_FLAGS
        .iter()
        .map(|&f| has_bit(0, f as u64))
        .collect::<Result<_, _>>()?;
    // A process sharing memory with another is a thread of it or a vfork child (blocked
    // parent): `CLONE_VM` without `CLONE_THREAD` or `CLONE_VFORK` is refused, and
    // `CLONE_PARENT` (a child given its caller's parent passes for a sibling of its caller:
    // the exec model tells the agent from its commands by lineage).
    clone_rules.push(rule(vec![cond(
        0,
        MaskedEq((libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_VFORK) as u64),
        libc::CLONE_VM as u64,
    )?])?);
    clone_rules.push(has_bit(0, libc::CLONE_PARENT as u64)?);
    // A descriptor table is shared by threads only: tyba installs its refusal program and
    // an approved command's proxy as fds 3 and 4 of the asking process while it waits in
    // its exec (`SECCOMP_IOCTL_NOTIF_ADDFD`), and another process sharing the table could
    // take the channel or swap fd 3, the file the kernel then runs as `/dev/fd/3` (review
    // 31's r31-03). `CLONE_FILES` without `CLONE_THREAD` is refused.
    clone_rules.push(rule(vec![cond(
        0,
        MaskedEq((libc::CLONE_FILES | libc::CLONE_THREAD) as u64),
        libc::CLONE_FILES as u64,
    )?])?);
    eperm.insert(libc::SYS_clone, clone_rules);
    eperm.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Eq, TIOCSTI)?])?,
            rule(vec![cond(1, Eq, TIOCLINUX)?])?,
        ],
    );
    let mut raw = Vec::new();
    for &fam in SOCKET_FAMILIES {
        for ty in [SOCK_RAW, SOCK_PACKET] {
            raw.push(rule(vec![
                cond(0, Eq, fam as u64)?,
                cond(1, MaskedEq(SOCK_TYPE_MASK), ty)?,
            ])?);
        }
    }
    eperm.insert(libc::SYS_socket, raw);
    eperm.insert(libc::SYS_sendto, vec![has_bit(3, MSG_FASTOPEN)?]);
    eperm.insert(libc::SYS_sendmsg, vec![has_bit(2, MSG_FASTOPEN)?]);
    eperm.insert(libc::SYS_sendmmsg, vec![has_bit(3, MSG_FASTOPEN)?]);
    eperm.insert(libc::SYS_prctl, vec![rule(vec![cond(0, Eq, PR_SET_MM)?])?]);
    eperm.insert(
        libc::SYS_personality,
        vec![rule(vec![cond(0, Ne, 0xffff_ffff)?, cond(0, Ne, 0)?])?],
    );
    let families = SOCKET_FAMILIES
        .iter()
        .map(|&f| cond(0, Ne, f as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let eafnosupport = BTreeMap::from([(libc::SYS_socket, vec![rule(families)?])]);
    let list = |l: &[i64]| -> BTreeMap<i64, Vec<SeccompRule>> {
        l.iter().map(|&nr| (nr, Vec::new())).collect()
    };
    Ok(vec![
        compile(eperm, libc::EPERM)?,
        compile(eafnosupport, libc::EAFNOSUPPORT)?,
        compile(list(DENIED_ENOSYS), libc::ENOSYS)?,
        compile(list(DENIED_EOPNOTSUPP), libc::EOPNOTSUPP)?,
    ])
}

/// An interpreter for classic BPF seccomp programs, for tests: runs `prog` on a
/// `seccomp_data` and returns the action. `(code, jt, jf, k)` per instruction.
#[cfg(test)]
pub(crate) fn interpret(prog: &[(u16, u8, u8, u32)], nr: i64, arch: u32, args: [u64; 6]) -> u32 {
    const BPF_ALU: u16 = 0x04;
    const BPF_AND: u16 = 0x50;
    const BPF_JA: u16 = 0x00;
    const BPF_JGT: u16 = 0x20;
    const BPF_JSET: u16 = 0x40;
    let mut data = Vec::with_capacity(64);
    data.extend((nr as i32).to_le_bytes());
    data.extend(arch.to_le_bytes());
    data.extend(0u64.to_le_bytes());
    for a in args {
        data.extend(a.to_le_bytes());
    }
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    loop {
        let (code, jt, jf, k) = prog[pc];
        pc += 1;
        match code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                let o = k as usize;
                acc = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
            }
            c if c == BPF_ALU | BPF_AND | BPF_K => acc &= k,
            c if c == BPF_RET | BPF_K => return k,
            c if c == BPF_JMP | BPF_JA => pc += k as usize,
            c if c & 0x07 == BPF_JMP && c & 0x08 == BPF_K => {
                let cond = match c & 0xf0 {
                    x if x == BPF_JEQ => acc == k,
                    x if x == BPF_JGT => acc > k,
                    x if x == BPF_JGE => acc >= k,
                    x if x == BPF_JSET => acc & k != 0,
                    _ => panic!("unknown jump {c:#x}"),
                };
                pc += if cond { jt as usize } else { jf as usize };
            }
            c => panic!("unknown opcode {c:#x}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Every filter of the sandbox, in the order stage 2 installs them.
    fn programs() -> Vec<Vec<(u16, u8, u8, u32)>> {
        let mut v: Vec<Vec<(u16, u8, u8, u32)>> = static_filters()
            .unwrap()
            .into_iter()
            .map(|p| p.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect())
            .collect();
        v.push(
            notify_filter(&notified_syscalls())
                .unwrap()
                .iter()
                .map(|i| (i.code, i.jt, i.jf, i.k))
                .collect(),
        );
        v
    }

    /// The kernel's combination (`seccomp_run_filters`): every filter runs, newest first; the
    /// action with the lowest value of `(s32)(ret & SECCOMP_RET_ACTION_FULL)` wins, the first
    /// seen on a tie.
    fn run_on(arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let mut best: Option<u32> = None;
        for p in programs().iter().rev() {
            let r = interpret(p, nr, arch, args);
            let key = |x: u32| (x & 0xffff_0000) as i32;
            if best.is_none_or(|b| key(r) < key(b)) {
                best = Some(r);
            }
        }
        best.unwrap()
    }

    fn run(nr: i64, args: [u64; 6]) -> u32 {
        run_on(AUDIT_ARCH_X86_64, nr, args)
    }

    #[test]
    fn wrong_arch_is_killed() {
        assert_eq!(run_on(0x4000_0003, 0, [0; 6]), RET_KILL_PROCESS);
        assert_eq!(run_on(0x4000_0003, 59, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn x32_is_enosys() {
        assert_eq!(run(0x4000_0000 + 59, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(run(0x4000_0000 + 101, [0; 6]), errno(libc::ENOSYS));
    }

    #[test]
    fn plain_syscalls_are_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_newfstatat,
            libc::SYS_bind,
            libc::SYS_clone,
            libc::SYS_inotify_init1,
            libc::SYS_inotify_rm_watch,
        ] {
            assert_eq!(run(nr, [0; 6]), RET_ALLOW, "syscall {nr}");
        }
    }

    #[test]
    fn denied_and_notified() {
        for &nr in DENIED_EPERM {
            assert_eq!(run(nr, [0; 6]), errno(libc::EPERM), "syscall {nr}");
        }
        for &nr in DENIED_EOPNOTSUPP {
            assert_eq!(run(nr, [0; 6]), errno(libc::EOPNOTSUPP), "syscall {nr}");
        }
        for &nr in DENIED_ENOSYS {
            assert_eq!(run(nr, [0; 6]), errno(libc::ENOSYS), "syscall {nr}");
        }
        for nr in notified_syscalls() {
            assert_eq!(
                run(nr, [3, 0, 0x100, 0, 0, 0]),
                RET_USER_NOTIF,
                "syscall {nr}"
            );
        }
        assert_eq!(run(libc::SYS_ptrace, [0; 6]), errno(libc::EPERM));
        assert_eq!(
            run(libc::SYS_fanotify_init, [0x200, 0, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(run(libc::SYS_execve, [0; 6]), RET_USER_NOTIF);
        assert_eq!(
            run(libc::SYS_inotify_add_watch, [3, 0, 0x100, 0, 0, 0]),
            RET_USER_NOTIF
        );
    }

    #[test]
    fn clone_namespaces() {
        assert_eq!(
            run(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(run(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), RET_ALLOW);
        for &f in CLONE_NS_FLAGS {
            assert_eq!(
                run(libc::SYS_clone, [(f | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0]),
                errno(libc::EPERM),
                "flag {f:#x}"
            );
        }
        // vfork and posix_spawn's clone: memory shared with a blocked parent.
        let vfork = (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64;
        assert_eq!(run(libc::SYS_clone, [vfork, 0, 0, 0, 0, 0]), RET_ALLOW);
        // Memory shared with a running process that is not a thread, and a child passed off
        // as its caller's sibling.
        for flags in [
            libc::CLONE_VM | libc::SIGCHLD,
            libc::CLONE_VM | libc::CLONE_PARENT | libc::SIGCHLD,
            libc::CLONE_PARENT | libc::SIGCHLD,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT | libc::SIGCHLD,
            libc::CLONE_VM | libc::CLONE_FS | libc::CLONE_FILES | libc::SIGCHLD,
            // A descriptor table shared with a process that is not a thread.
            libc::CLONE_FILES | libc::SIGCHLD,
            libc::CLONE_FILES | libc::CLONE_FS | libc::SIGCHLD,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
        ] {
            assert_eq!(
                run(libc::SYS_clone, [flags as u64, 0, 0, 0, 0, 0]),
                errno(libc::EPERM),
                "flags {flags:#x}"
            );
        }
    }

    #[test]
    fn ioctl_and_socket_args() {
        assert_eq!(
            run(libc::SYS_ioctl, [1, TIOCSTI, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(
            run(libc::SYS_ioctl, [1, TIOCLINUX, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        // The command is an unsigned int: high bits do not hide it.
        assert_eq!(
            run(
                libc::SYS_ioctl,
                [1, TIOCSTI | 0xffff_ffff_0000_0000, 0, 0, 0, 0]
            ),
            errno(libc::EPERM)
        );
        assert_eq!(run(libc::SYS_ioctl, [1, 0x5401, 0, 0, 0, 0]), RET_ALLOW);
        let s = |d: i32, t: i32| run(libc::SYS_socket, [d as u64, t as u64, 0, 0, 0, 0]);
        assert_eq!(
            s(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            RET_ALLOW
        );
        assert_eq!(s(libc::AF_UNIX, libc::SOCK_DGRAM), RET_ALLOW);
        assert_eq!(
            s(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK),
            RET_ALLOW
        );
        assert_eq!(s(libc::AF_INET, libc::SOCK_RAW), errno(libc::EPERM));
        assert_eq!(
            s(libc::AF_INET6, libc::SOCK_RAW | libc::SOCK_CLOEXEC),
            errno(libc::EPERM)
        );
        assert_eq!(s(libc::AF_UNIX, SOCK_PACKET as i32), errno(libc::EPERM));
        assert_eq!(
            s(libc::AF_VSOCK, libc::SOCK_STREAM),
            errno(libc::EAFNOSUPPORT)
        );
        assert_eq!(
            s(libc::AF_PACKET, libc::SOCK_RAW),
            errno(libc::EAFNOSUPPORT)
        );
        assert_eq!(
            s(libc::AF_NETLINK, libc::SOCK_RAW),
            errno(libc::EAFNOSUPPORT)
        );
        assert_eq!(
            run(libc::SYS_sendto, [3, 0, 0, MSG_FASTOPEN, 1, 16]),
            errno(libc::EPERM)
        );
        assert_eq!(
            run(libc::SYS_sendmsg, [3, 0, MSG_FASTOPEN | 0x40, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(run(libc::SYS_sendto, [3, 0, 0, 0, 1, 16]), RET_ALLOW);
        assert_eq!(run(libc::SYS_sendmsg, [3, 0, 0x40, 0, 0, 0]), RET_ALLOW);
        // glibc's resolver: two queries, MSG_NOSIGNAL.
        assert_eq!(
            run(
                libc::SYS_sendmmsg,
                [3, 0, 2, libc::MSG_NOSIGNAL as u64, 0, 0]
            ),
            RET_ALLOW
        );
        assert_eq!(
            run(libc::SYS_sendmmsg, [3, 0, 2, MSG_FASTOPEN | 0x4000, 0, 0]),
            errno(libc::EPERM)
        );
    }

    #[test]
    fn personality_query_only() {
        assert_eq!(
            run(libc::SYS_personality, [0xffff_ffff, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(run(libc::SYS_personality, [0, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(
            run(libc::SYS_personality, [0x0040_0000, 0, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
    }

    #[test]
    fn prctl_cannot_rewrite_the_memory_map_fields() {
        assert_eq!(
            run(libc::SYS_prctl, [PR_SET_MM, 8, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        // PR_SET_NAME, PR_SET_PDEATHSIG and the others stay allowed.
        assert_eq!(run(libc::SYS_prctl, [15, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(libc::SYS_prctl, [1, 9, 0, 0, 0, 0]), RET_ALLOW);
    }

    #[test]
    fn the_notify_filter_is_small() {
        let p = notify_filter(&notified_syscalls()).unwrap();
        assert!(p.len() <= 2 * notified_syscalls().len() + 8, "{}", p.len());
    }
}
