/* The floor of a `tyba run` launch on this machine, for scripts/bench-overhead.sh --floor: the
 * kernel work the sandbox's set-up and end need, in one straight line, with none of tyba's
 * own work (no policy, plan, git stand-ins, classification, audit, threads or end-of-session
 * checks) and a small C executable instead of tyba's. What `tyba run` costs above this is what
 * its own code costs; what this costs above a bare run is what no implementation of the same
 * sandbox can avoid.
 *
 *   launch-floor WORKTREE COMMAND [ARG...]
 *
 * runs COMMAND in WORKTREE the way `tyba run --here` does (docs/sandbox.md), step for step:
 *
 *   supervisor  forks stage 1; takes the sandbox's /dev/fuse from it (SCM_RIGHTS) and answers
 *               FUSE_INIT; waits for stage 1.
 *   stage 1     new user, mount, PID, network, IPC, UTS and cgroup namespaces
 *               (`unshare(2)`), the id maps, /dev/fuse opened in the namespace and a FUSE
 *               filesystem created and mounted detached (`fsopen`/`fsconfig`/`fsmount`), the
 *               device sent to the supervisor; forks stage 2 (the PID namespace's init) and
 *               waits for it.
 *   stage 2     mounts private; a private /proc; a private devpts instance and its ptmx; the
 *               git dir and the directories above its protected files bound in place (their
 *               names pinned), then each protected git file or directory that exists bound
 *               read-only (bind, then remount read-only); the FUSE mount attached
 *               (`move_mount`) and detached again (tyba binds its covers from it, which needs
 *               lookups this program has no server for: left out, so this is a lower bound);
 *               the loopback up; a Landlock ruleset (every filesystem right of ABI 5, TCP
 *               bind and connect, abstract-socket and signal scoping) with a rule per root;
 *               forks the agent, receives its seccomp listener, answers its exec
 *               notifications CONTINUE, waits for it.
 *   agent       new session, parent-death signal, the worktree as working directory,
 *               no_new_privs, the Landlock ruleset enforced, a static seccomp filter (a deny
 *               list) and a user-notification filter on execve/execveat (its listener sent to
 *               stage 2), then exec COMMAND.
 *
 * Exits with COMMAND's status (128 + signal when killed), 125 when a step fails (with a line on
 * stderr). Landlock ABI >= 5 (Linux 6.10); scoping from ABI 6 when the kernel has it.
 * Build: gcc -O2 -o launch-floor launch-floor.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fuse.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
/* Landlock's UAPI (include/uapi/linux/landlock.h, Linux 6.12), spelled out: the system's
 * headers may predate the network rights and scoping. */
struct ll_ruleset_attr {
  __u64 handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath_attr {
  __u64 allowed_access;
  __s32 parent_fd;
} __attribute__((packed));
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

static void die(const char *what) {
  fprintf(stderr, "launch-floor: %s: %s\n", what, strerror(errno));
  _exit(125);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) die(path);
  close(fd);
}

static void send_fd(int sock, int fd) {
  char byte = 'F';
  struct iovec io = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1) die("sendmsg");
}

/* The fd sent on `sock`, or -1 when the peer hung up without one. */
static int recv_fd(int sock) {
  char byte;
  struct iovec io = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) <= 0) return -1;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

static int status_of(int ws) { return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws); }

static int wait_for(pid_t pid) {
  int ws;
  while (waitpid(pid, &ws, __WALL) < 0)
    if (errno != EINTR) die("waitpid");
  return status_of(ws);
}

/* --- the supervisor's FUSE side: answer FUSE_INIT, nothing else comes. */
static void answer_init(int dev) {
  static char buf[FUSE_MIN_READ_BUFFER + 65536];
  ssize_t n = read(dev, buf, sizeof buf);
  /* ENODEV: the filesystem is gone already (a short COMMAND's sandbox ended before this read):
     nothing to answer, as tyba's server does. */
  if (n < 0 && errno == ENODEV) return;
  if (n < (ssize_t)sizeof(struct fuse_in_header)) die("reading FUSE_INIT");
  struct fuse_in_header *in = (void *)buf;
  struct {
    struct fuse_out_header h;
    struct fuse_init_out o;
  } out;
  memset(&out, 0, sizeof out);
  out.h.len = sizeof out;
  out.h.unique = in->unique;
  out.o.major = FUSE_KERNEL_VERSION;
  out.o.minor = 31;
  out.o.max_readahead = 65536;
  out.o.max_write = 65536;
  out.o.max_background = 16;
  out.o.congestion_threshold = 12;
  if (write(dev, &out, sizeof out) != (ssize_t)sizeof out && errno != ENODEV && errno != ENOENT)
    die("answering FUSE_INIT");
}

/* --- stage 2 ------------------------------------------------------------------------------ */

static const char *pinned[] = {".git", ".git/refs", ".git/objects", ".git/refs/heads", ".git/objects/info"};
static const char *protected_files[] = {
    ".git/config",   ".git/hooks",   ".git/info",      ".git/packed-refs",
    ".git/objects/info/alternates",  ".git/objects/info/http-alternates",
    ".git/modules",  ".git/worktrees", ".git/branches", ".git/remotes",
    ".git/config.worktree", ".git/commondir", ".git/refs/heads/main", ".git/refs/heads/master",
    ".git/refs/heads/tyba",
};
static const char *read_only_roots[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc",
                                        "/opt", "/dev", "/proc", "/sys", "/run", "/var"};

static void bind_at(const char *wt, const char *rel, int read_only) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", wt, rel);
  struct stat st;
  if (lstat(p, &st) < 0) return;
  if (mount(p, p, NULL, MS_BIND, NULL) < 0) die(p);
  if (read_only && mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_RELATIME, NULL) < 0) die(p);
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq r;
  memset(&r, 0, sizeof r);
  strcpy(r.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &r) < 0) die("loopback");
  r.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &r) < 0) die("loopback up");
  close(s);
}

static int ruleset(const char *wt) {
  int abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  if (abi < 5) {
    errno = EOPNOTSUPP;
    die("Landlock ABI >= 5");
  }
  __u64 fs = (LL_FS_IOCTL_DEV << 1) - 1; /* every filesystem right of ABI 5 */
  struct ll_ruleset_attr a = {
      .handled_access_fs = fs,
      .handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP,
      .scoped = abi >= 6 ? LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL : 0,
  };
  size_t size = abi >= 6 ? sizeof a : offsetof(struct ll_ruleset_attr, scoped);
  int rs = syscall(SYS_landlock_create_ruleset, &a, size, 0);
  if (rs < 0) die("landlock_create_ruleset");
  const __u64 ro = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_IOCTL_DEV;
  const __u64 rw = fs & ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK);
  const char *rw_roots[] = {wt, "/tmp"};
  const int n_rw = 2, n = n_rw + (int)(sizeof read_only_roots / sizeof *read_only_roots);
  for (int i = 0; i < n; i++) {
    const char *p = i < n_rw ? rw_roots[i] : read_only_roots[i - n_rw];
    int fd = open(p, O_PATH | O_CLOEXEC);
    if (fd < 0) continue;
    struct ll_path_beneath_attr r = {.allowed_access = i < n_rw ? rw : ro, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &r, 0) < 0) die("landlock_add_rule");
    close(fd);
  }
  return rs;
}

#define ALLOW BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define DENY_IF(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)

static void filters(int to_stage2) {
  /* The static filter: a deny list of the size of tyba's. */
  struct sock_filter deny[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      DENY_IF(__NR_ptrace), DENY_IF(__NR_process_vm_writev), DENY_IF(__NR_kexec_load),
      DENY_IF(__NR_init_module), DENY_IF(__NR_finit_module), DENY_IF(__NR_delete_module),
      DENY_IF(__NR_bpf), DENY_IF(__NR_perf_event_open), DENY_IF(__NR_userfaultfd),
      DENY_IF(__NR_io_uring_setup), DENY_IF(__NR_io_uring_enter), DENY_IF(__NR_io_uring_register),
      DENY_IF(__NR_keyctl), DENY_IF(__NR_add_key), DENY_IF(__NR_request_key), DENY_IF(__NR_mount),
      DENY_IF(__NR_umount2), DENY_IF(__NR_pivot_root), DENY_IF(__NR_swapon), DENY_IF(__NR_swapoff),
      DENY_IF(__NR_reboot), DENY_IF(__NR_setns), DENY_IF(__NR_unshare), DENY_IF(__NR_fanotify_init),
      DENY_IF(__NR_open_by_handle_at), DENY_IF(__NR_name_to_handle_at), DENY_IF(__NR_fsopen),
      DENY_IF(__NR_fsmount), DENY_IF(__NR_move_mount), DENY_IF(__NR_open_tree), DENY_IF(__NR_mknod),
      DENY_IF(__NR_mknodat), DENY_IF(__NR_acct), DENY_IF(__NR_quotactl), DENY_IF(__NR_vhangup),
      ALLOW,
  };
  struct sock_fprog p1 = {sizeof deny / sizeof *deny, deny};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p1) < 0) die("seccomp (static)");
  /* The user-notification filter: execve and execveat. */
  struct sock_filter notify[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      ALLOW,
  };
  struct sock_fprog p2 = {sizeof notify / sizeof *notify, notify};
  int l = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                  SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &p2);
  if (l < 0) die("seccomp (notify)");
  send_fd(to_stage2, l);
  close(l);
}

static int stage2(const char *wt, int fuse_mnt, char **cmd) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) die("mount private");
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) die("/proc");
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
    die("devpts");
  if (mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL) < 0) die("ptmx");
  for (size_t i = 0; i < sizeof pinned / sizeof *pinned; i++) bind_at(wt, pinned[i], 0);
  for (size_t i = 0; i < sizeof protected_files / sizeof *protected_files; i++) bind_at(wt, protected_files[i], 1);
  if (fuse_mnt >= 0) {
    char dir[] = "/dev/shm/launch-floor.XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp");
    if (syscall(SYS_move_mount, fuse_mnt, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH) < 0) die("move_mount");
    if (umount2(dir, MNT_DETACH) < 0) die("umount2");
    rmdir(dir);
    close(fuse_mnt);
  }
  loopback_up();
  int rs = ruleset(wt);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) die("socketpair");
  pid_t agent = fork();
  if (agent < 0) die("fork");
  if (agent == 0) {
    close(sv[0]);
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (chdir(wt) < 0) die("chdir");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs");
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) die("landlock_restrict_self");
    close(rs);
    filters(sv[1]);
    close(sv[1]);
    execvp(cmd[0], cmd);
    die(cmd[0]);
  }
  close(sv[1]);
  close(rs);
  int l = recv_fd(sv[0]);
  close(sv[0]);
  if (l >= 0) {
    __u64 flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
    ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags);
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
      struct pollfd pf = {l, POLLIN, 0};
      if (poll(&pf, 1, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (pf.revents & (POLLHUP | POLLERR)) break;
      memset(&req, 0, sizeof req);
      if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue;
      memset(&resp, 0, sizeof resp);
      resp.id = req.id;
      resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    close(l);
  }
  return wait_for(agent);
}

/* --- stage 1 ------------------------------------------------------------------------------ */

static int stage1(const char *wt, int to_sup, uid_t uid, gid_t gid, char **cmd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWCGROUP) < 0)
    die("unshare");
  char map[64];
  write_file("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "%u %u 1", uid, uid);
  write_file("/proc/self/uid_map", map);
  snprintf(map, sizeof map, "%u %u 1", gid, gid);
  write_file("/proc/self/gid_map", map);
  int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (dev < 0) die("/dev/fuse");
  int fs = syscall(SYS_fsopen, "fuse", FSOPEN_CLOEXEC);
  if (fs < 0) die("fsopen");
  char v[32];
  snprintf(v, sizeof v, "%d", dev);
  syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "fd", v, 0);
  syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "rootmode", "40000", 0);
  snprintf(v, sizeof v, "%u", uid);
  syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "user_id", v, 0);
  snprintf(v, sizeof v, "%u", gid);
  syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "group_id", v, 0);
  syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "default_permissions", NULL, 0);
  if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) die("fsconfig create");
  int mnt = syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (mnt < 0) die("fsmount");
  close(fs);
  send_fd(to_sup, dev);
  close(dev);
  close(to_sup);
  pid_t s2 = fork();
  if (s2 < 0) die("fork");
  if (s2 == 0) _exit(stage2(wt, mnt, cmd));
  close(mnt);
  return wait_for(s2);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: launch-floor WORKTREE COMMAND [ARG...]\n");
    return 2;
  }
  char wt[4096];
  if (!realpath(argv[1], wt)) die(argv[1]);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) die("socketpair");
  uid_t uid = geteuid();
  gid_t gid = getegid();
  pid_t s1 = fork();
  if (s1 < 0) die("fork");
  if (s1 == 0) {
    close(sv[0]);
    _exit(stage1(wt, sv[1], uid, gid, argv + 2));
  }
  close(sv[1]);
  int dev = recv_fd(sv[0]);
  close(sv[0]);
  if (dev >= 0) answer_init(dev);
  int code = wait_for(s1);
  if (dev >= 0) close(dev);
  return code;
}
