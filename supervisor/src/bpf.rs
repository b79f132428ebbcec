//! The seccomp filter, assembled by hand from classic BPF (`linux/filter.h`,
//! `linux/seccomp.h`, kernel `Documentation/userspace-api/seccomp_filter.rst`).
//!
//! Why our own assembler (see `docs/sandbox.md`): seccompiler has no `SECCOMP_RET_USER_NOTIF`
//! action and installs filters itself without the listener flag; libseccomp would bring a C
//! library and its headers into the build. The program we need is a short linear list of
//! syscall-number checks with a few argument tests, about a hundred instructions, and it is
//! checked here by an interpreter in the unit tests.
//!
//! Shape of the program (x86_64 only):
//! 1. the architecture must be `AUDIT_ARCH_X86_64`, else the process is killed;
//! 2. x32 system calls (`nr >= 0x4000_0000`) fail with `ENOSYS`;
//! 3. each listed system call jumps to its action (deny with an errno, notify the supervisor,
//!    or an argument test);
//! 4. everything else is allowed.

use crate::sys::SockFilter;

const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_ALU: u16 = 0x04;
const BPF_AND: u16 = 0x50;
const BPF_K: u16 = 0x00;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_JSET: u16 = 0x40;
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
/// Offset of the low 32 bits of argument `i` in `struct seccomp_data` (little-endian).
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

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

/// What the filter does with one system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Fail with this errno.
    Deny(i32),
    /// Hand to the supervisor.
    Notify,
    /// `clone`: fail with `EPERM` when any namespace flag is set in the flags argument.
    CloneNoNamespaces,
    /// `ioctl`: fail with `EPERM` for `TIOCSTI` and `TIOCLINUX`.
    IoctlNoTerminalInjection,
    /// `socket`: only `AF_UNIX`, `AF_INET`, `AF_INET6`, and no raw or packet sockets.
    SocketFamilies,
    /// `sendto`/`sendmsg`: fail with `EPERM` with `MSG_FASTOPEN` in the flags argument `i`
    /// (TCP Fast Open connects inside sendmsg, past the connect checks).
    NoFastOpen(u32),
    /// `personality`: only the query (`0xffffffff`) and `PER_LINUX` (0).
    PersonalityQueryOnly,
    /// `prctl`: fail with `EPERM` for `PR_SET_MM` (35), which rewrites the fields of
    /// `/proc/<pid>/stat` and `/proc/<pid>/exe` the exec model reads to tell that an exec
    /// happened (`crate::exec`): a process could fake an exec it never made.
    PrctlNoSetMm,
}

/// `PR_SET_MM` (`prctl(2)`).
const PR_SET_MM: u32 = 35;

/// Namespace flags of `clone(2)` (`CLONE_NEWTIME` is not accepted by `clone` itself).
const CLONE_NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541c;
const SOCK_TYPE_MASK: u32 = 0xf;
const SOCK_RAW: u32 = 3;
const SOCK_PACKET: u32 = 10;
const MSG_FASTOPEN: u32 = 0x2000_0000;

fn rule_block(rule: Rule) -> Vec<SockFilter> {
    match rule {
        Rule::Deny(e) => vec![ret(errno(e))],
        Rule::Notify => vec![ret(RET_USER_NOTIF)],
        Rule::CloneNoNamespaces => vec![
            ld(arg_lo(0)),
            jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1),
            ret(errno(libc::EPERM)),
            ret(RET_ALLOW),
        ],
        Rule::IoctlNoTerminalInjection => vec![
            ld(arg_lo(1)),
            jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0),
            ret(RET_ALLOW),
            ret(errno(libc::EPERM)),
        ],
        Rule::SocketFamilies => vec![
            ld(arg_lo(0)),
            jump(BPF_JMP | BPF_JEQ | BPF_K, libc::AF_UNIX as u32, 3, 0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, libc::AF_INET as u32, 2, 0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, libc::AF_INET6 as u32, 1, 0),
            ret(errno(libc::EAFNOSUPPORT)),
            ld(arg_lo(1)),
            stmt(BPF_ALU | BPF_AND | BPF_K, SOCK_TYPE_MASK),
            jump(BPF_JMP | BPF_JEQ | BPF_K, SOCK_RAW, 2, 0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, SOCK_PACKET, 1, 0),
            ret(RET_ALLOW),
            ret(errno(libc::EPERM)),
        ],
        Rule::NoFastOpen(i) => vec![
            ld(arg_lo(i)),
            jump(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, 0, 1),
            ret(errno(libc::EPERM)),
            ret(RET_ALLOW),
        ],
        Rule::PrctlNoSetMm => vec![
            ld(arg_lo(0)),
            jump(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_MM, 0, 1),
            ret(errno(libc::EPERM)),
            ret(RET_ALLOW),
        ],
        Rule::PersonalityQueryOnly => vec![
            ld(arg_lo(0)),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 0xffff_ffff, 2, 0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
            ret(errno(libc::EPERM)),
            ret(RET_ALLOW),
        ],
    }
}

/// Errors assembling a program.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssembleError {
    /// An action block is too long for an 8-bit conditional jump.
    #[error("action block for syscall {nr} is too long to jump over")]
    BlockTooLong {
        /// The syscall number.
        nr: i64,
    },
    /// The whole program exceeds `BPF_MAXINSNS` (4096).
    #[error("program has {0} instructions, more than 4096")]
    TooLong(usize),
}

/// Assembles the program for these `(syscall number, rule)` pairs (first match wins; numbers
/// from the x86_64 table).
///
/// # Errors
/// [`AssembleError`] when a block or the program is too long.
pub fn assemble(rules: &[(i64, Rule)]) -> Result<Vec<SockFilter>, AssembleError> {
    let mut p = vec![
        ld(OFF_ARCH),
        jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        ret(RET_KILL_PROCESS),
        ld(OFF_NR),
        jump(BPF_JMP | BPF_JGE | BPF_K, 0x4000_0000, 0, 1),
        ret(errno(libc::ENOSYS)),
    ];
    for &(nr, rule) in rules {
        let block = rule_block(rule);
        let skip = u8::try_from(block.len()).map_err(|_| AssembleError::BlockTooLong { nr })?;
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, nr as u32, 0, skip));
        p.extend(block);
        // Blocks that loaded an argument end in returns on every path, so the accumulator
        // still holds the syscall number when the next comparison runs.
    }
    p.push(ret(RET_ALLOW));
    if p.len() > 4096 {
        return Err(AssembleError::TooLong(p.len()));
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

/// The rule table of tyba's sandbox (DESIGN.md §5, issue 4 §3).
pub fn sandbox_rules() -> Vec<(i64, Rule)> {
    use Rule::*;
    let eperm = Deny(libc::EPERM);
    let mut r: Vec<(i64, Rule)> = vec![
        // Routed to the supervisor: commands, connections, metadata changes.
        (libc::SYS_execve, Notify),
        (libc::SYS_execveat, Notify),
        (libc::SYS_connect, Notify),
        // Argument tests.
        (libc::SYS_clone, CloneNoNamespaces),
        // clone3 passes its flags in memory the filter cannot read: ENOSYS makes libc fall
        // back to clone, whose flags it can.
        (libc::SYS_clone3, Deny(libc::ENOSYS)),
        (libc::SYS_ioctl, IoctlNoTerminalInjection),
        (libc::SYS_socket, SocketFamilies),
        (libc::SYS_sendto, NoFastOpen(3)),
        (libc::SYS_sendmsg, NoFastOpen(2)),
        // sendmmsg can carry per-message addresses on a connected datagram socket; libc's
        // resolver falls back to send on ENOSYS.
        (libc::SYS_sendmmsg, Deny(libc::ENOSYS)),
        (libc::SYS_personality, PersonalityQueryOnly),
        (libc::SYS_prctl, PrctlNoSetMm),
        // Denied outright: what breaks sandboxes and what no coding agent needs.
        (libc::SYS_ptrace, eperm),
        (libc::SYS_process_vm_readv, eperm),
        (libc::SYS_process_vm_writev, eperm),
        (libc::SYS_pidfd_getfd, eperm),
        (libc::SYS_mount, eperm),
        (libc::SYS_umount2, eperm),
        (libc::SYS_pivot_root, eperm),
        (libc::SYS_chroot, eperm),
        (libc::SYS_move_mount, eperm),
        (libc::SYS_open_tree, eperm),
        (libc::SYS_fsopen, eperm),
        (libc::SYS_fsconfig, eperm),
        (libc::SYS_fsmount, eperm),
        (libc::SYS_fspick, eperm),
        (libc::SYS_mount_setattr, eperm),
        (libc::SYS_unshare, eperm),
        (libc::SYS_setns, eperm),
        (libc::SYS_bpf, eperm),
        (libc::SYS_perf_event_open, eperm),
        (libc::SYS_io_uring_setup, eperm),
        (libc::SYS_io_uring_enter, eperm),
        (libc::SYS_io_uring_register, eperm),
        (libc::SYS_userfaultfd, eperm),
        (libc::SYS_keyctl, eperm),
        (libc::SYS_add_key, eperm),
        (libc::SYS_request_key, eperm),
        (libc::SYS_kexec_load, eperm),
        (libc::SYS_kexec_file_load, eperm),
        (libc::SYS_init_module, eperm),
        (libc::SYS_finit_module, eperm),
        (libc::SYS_delete_module, eperm),
        (libc::SYS_open_by_handle_at, eperm),
        (libc::SYS_name_to_handle_at, eperm),
        (libc::SYS_reboot, eperm),
        (libc::SYS_swapon, eperm),
        (libc::SYS_swapoff, eperm),
        (libc::SYS_acct, eperm),
        (libc::SYS_quotactl, eperm),
        (libc::SYS_syslog, eperm),
        (libc::SYS_vhangup, eperm),
        (libc::SYS_settimeofday, eperm),
        (libc::SYS_clock_settime, eperm),
        (libc::SYS_clock_adjtime, eperm),
        (libc::SYS_adjtimex, eperm),
        (libc::SYS_lookup_dcookie, eperm),
        (libc::SYS_iopl, eperm),
        (libc::SYS_ioperm, eperm),
        // Extended attributes: not covered by Landlock and not needed; "not supported" makes
        // cp/tar carry on without them.
        (libc::SYS_setxattr, Deny(libc::EOPNOTSUPP)),
        (libc::SYS_lsetxattr, Deny(libc::EOPNOTSUPP)),
        (libc::SYS_fsetxattr, Deny(libc::EOPNOTSUPP)),
        (libc::SYS_removexattr, Deny(libc::EOPNOTSUPP)),
        (libc::SYS_lremovexattr, Deny(libc::EOPNOTSUPP)),
        (libc::SYS_fremovexattr, Deny(libc::EOPNOTSUPP)),
        (SYS_SETXATTRAT, Deny(libc::EOPNOTSUPP)),
        (SYS_REMOVEXATTRAT, Deny(libc::EOPNOTSUPP)),
    ];
    for &nr in METADATA_SYSCALLS {
        r.push((nr, Notify));
    }
    r
}

/// A tiny interpreter for the instructions [`assemble`] emits, for tests: runs the program on
/// a `seccomp_data` and returns the action.
#[cfg(test)]
pub(crate) fn interpret(prog: &[SockFilter], nr: i64, arch: u32, args: [u64; 6]) -> u32 {
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
        let i = prog[pc];
        pc += 1;
        match i.code {
            c if c == BPF_LD | BPF_W | BPF_ABS => {
                let o = i.k as usize;
                acc = u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
            }
            c if c == BPF_ALU | BPF_AND | BPF_K => acc &= i.k,
            c if c == BPF_RET | BPF_K => return i.k,
            c => {
                let cond = match c & 0xf0 {
                    x if x == BPF_JEQ => acc == i.k,
                    x if x == BPF_JGE => acc >= i.k,
                    x if x == BPF_JSET => acc & i.k != 0,
                    _ => panic!("unknown opcode {c:#x}"),
                };
                pc += if cond { i.jt as usize } else { i.jf as usize };
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn run(nr: i64, args: [u64; 6]) -> u32 {
        let p = assemble(&sandbox_rules()).unwrap();
        interpret(&p, nr, AUDIT_ARCH_X86_64, args)
    }

    #[test]
    fn wrong_arch_is_killed() {
        let p = assemble(&sandbox_rules()).unwrap();
        assert_eq!(interpret(&p, 0, 0x4000_0003, [0; 6]), RET_KILL_PROCESS);
    }

    #[test]
    fn x32_is_enosys() {
        assert_eq!(run(0x4000_0000 + 59, [0; 6]), errno(libc::ENOSYS));
    }

    #[test]
    fn plain_syscalls_are_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_newfstatat,
            libc::SYS_bind,
        ] {
            assert_eq!(run(nr, [0; 6]), RET_ALLOW, "syscall {nr}");
        }
    }

    #[test]
    fn denied_and_notified() {
        assert_eq!(run(libc::SYS_ptrace, [0; 6]), errno(libc::EPERM));
        assert_eq!(run(libc::SYS_io_uring_setup, [0; 6]), errno(libc::EPERM));
        assert_eq!(run(libc::SYS_execve, [0; 6]), RET_USER_NOTIF);
        assert_eq!(run(libc::SYS_fchmodat, [0; 6]), RET_USER_NOTIF);
        assert_eq!(run(libc::SYS_clone3, [0; 6]), errno(libc::ENOSYS));
    }

    #[test]
    fn clone_namespaces() {
        assert_eq!(
            run(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(
            run(
                libc::SYS_clone,
                [(libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0]
            ),
            errno(libc::EPERM)
        );
    }

    #[test]
    fn ioctl_and_socket_args() {
        assert_eq!(
            run(libc::SYS_ioctl, [1, TIOCSTI as u64, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(
            run(libc::SYS_ioctl, [1, TIOCLINUX as u64, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(run(libc::SYS_ioctl, [1, 0x5401, 0, 0, 0, 0]), RET_ALLOW);
        let s = |d: i32, t: i32| run(libc::SYS_socket, [d as u64, t as u64, 0, 0, 0, 0]);
        assert_eq!(
            s(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            RET_ALLOW
        );
        assert_eq!(s(libc::AF_UNIX, libc::SOCK_DGRAM), RET_ALLOW);
        assert_eq!(s(libc::AF_INET, libc::SOCK_RAW), errno(libc::EPERM));
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
            run(libc::SYS_sendto, [3, 0, 0, MSG_FASTOPEN as u64, 1, 16]),
            errno(libc::EPERM)
        );
        assert_eq!(run(libc::SYS_sendto, [3, 0, 0, 0, 1, 16]), RET_ALLOW);
    }

    #[test]
    fn prctl_cannot_rewrite_the_memory_map_fields() {
        assert_eq!(
            run(libc::SYS_prctl, [PR_SET_MM as u64, 8, 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        // PR_SET_NAME, PR_SET_PDEATHSIG and the others stay allowed.
        assert_eq!(run(libc::SYS_prctl, [15, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(libc::SYS_prctl, [1, 9, 0, 0, 0, 0]), RET_ALLOW);
    }
}
