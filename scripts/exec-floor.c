/* The floor of an exec supervisor on this machine, for scripts/bench-exec.sh: what a seccomp
 * user-notification supervisor of `execve`/`execveat` costs before it decides anything.
 *
 *   exec-floor MODE COMMAND [ARG...]
 *
 * runs COMMAND under a filter that notifies only `execve` and `execveat` (every other system
 * call is allowed in the filter), with the listener in synchronous wake-up mode
 * (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux >= 6.6), as tyba's notify thread has it. Each
 * notification is answered CONTINUE, after:
 *
 *   mechanism  nothing: the notification round trip alone.
 *   reads      what tyba's exec model cannot decide without, read the cheapest way found:
 *              a pidfd of the process (its identity), the file name and the argv and envp
 *              pointer arrays (one process_vm_readv), every argv and envp string (one
 *              process_vm_readv of the distinct pages they start on, more only for a string
 *              that runs past them), the working directory (readlink of /proc/PID/cwd), the
 *              file the exec names opened O_PATH and fstat'ed (its identity and change
 *              stamps), then SECCOMP_IOCTL_NOTIF_ID_VALID (what was read belongs to this
 *              exec); the descriptors are closed after the answer.
 *   reads-mem  as `reads`, the strings read through /proc/PID/mem (opened from the
 *              process's /proc directory, one pread per run of pages) instead of
 *              process_vm_readv. For comparison only.
 *
 * With EXEC_FLOOR_STATS=FILE it writes one line to FILE at the end:
 *   execs N cpu_us C work_p50_us W
 * N notifications, C the supervisor's own CPU time (user + system, getrusage RUSAGE_SELF:
 * this process has one thread) over the whole run, W the median of the time from receiving a
 * notification to answering it.
 *
 * Exits with COMMAND's status. Build: gcc -O2 -o exec-floor exec-floor.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif

enum { MECHANISM, READS, READS_MEM };
#define PAGE 4096UL
#define MAX_PTRS 4096 /* argv + envp pointers read; more are left unread */
#define MAX_RUNS 512  /* distinct runs of pages read in one call */
#define MAX_TIMES 1000000

static int mode;
static double *times;
static size_t ntimes;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads `n` remote ranges into `local`, in one call; returns the bytes read. */
static ssize_t vm_read(pid_t pid, struct iovec *local, struct iovec *remote, size_t n) {
  return process_vm_readv(pid, local, n, remote, n, 0);
}

/* The pointer arrays at `argv` and `envp`, read on page by page past the first (read with
 * the name) until each ends with NULL or MAX_PTRS pointers are in `ptrs`. Returns the count. */
static size_t pointers(pid_t pid, uint64_t argv, const uint64_t *first_argv, size_t argv_len,
                       uint64_t envp, const uint64_t *first_envp, size_t envp_len, uint64_t *ptrs) {
  size_t n = 0;
  const uint64_t bases[2] = {argv, envp};
  const uint64_t *firsts[2] = {first_argv, first_envp};
  const size_t lens[2] = {argv_len, envp_len};
  for (int k = 0; k < 2; k++) {
    if (!bases[k]) continue;
    const uint64_t *words = firsts[k];
    size_t have = lens[k] / 8;
    uint64_t at = bases[k] + lens[k];
    uint64_t page[PAGE / 8];
    for (;;) {
      size_t i = 0;
      for (; i < have && words[i] && n < MAX_PTRS; i++) ptrs[n++] = words[i];
      if (i < have || n >= MAX_PTRS) break;
      struct iovec l = {page, PAGE}, r = {(void *)at, PAGE};
      if (vm_read(pid, &l, &r, 1) != (ssize_t)PAGE) break;
      words = page;
      have = PAGE / 8;
      at += PAGE;
    }
  }
  return n;
}

/* Page runs covering each pointer's page, sorted and merged: `starts[i]`, `lens[i]`. */
static size_t page_runs(uint64_t *pages, size_t np, uint64_t *starts, uint64_t *lens) {
  qsort(pages, np, sizeof *pages, cmp_u64);
  size_t nr = 0;
  for (size_t i = 0; i < np; i++) {
    if (nr && pages[i] < starts[nr - 1] + lens[nr - 1]) continue;
    if (nr && pages[i] == starts[nr - 1] + lens[nr - 1]) {
      lens[nr - 1] += PAGE;
      continue;
    }
    if (nr == MAX_RUNS) break;
    starts[nr] = pages[i];
    lens[nr] = PAGE;
    nr++;
  }
  return nr;
}

static char *strings_buf;
static size_t strings_cap;

/* Every string at `ptrs`: the distinct pages they start on in one read, then, for a string
 * with no NUL before the end of what was read, the pages it runs on into, one at a time. */
static void read_strings(pid_t pid, int memfd, uint64_t *ptrs, size_t n) {
  static uint64_t pages[MAX_PTRS], starts[MAX_RUNS], lens[MAX_RUNS];
  static struct iovec local[MAX_RUNS], remote[MAX_RUNS];
  for (size_t i = 0; i < n; i++) pages[i] = ptrs[i] & ~(PAGE - 1);
  size_t nr = page_runs(pages, n, starts, lens);
  size_t total = 0;
  for (size_t i = 0; i < nr; i++) total += lens[i];
  if (total > strings_cap) {
    free(strings_buf);
    strings_cap = total;
    strings_buf = malloc(total);
    if (!strings_buf) {
      strings_cap = 0;
      return;
    }
  }
  size_t off = 0;
  for (size_t i = 0; i < nr; i++) {
    local[i] = (struct iovec){strings_buf + off, lens[i]};
    remote[i] = (struct iovec){(void *)starts[i], lens[i]};
    off += lens[i];
  }
  if (memfd >= 0) {
    for (size_t i = 0; i < nr; i++)
      if (pread(memfd, local[i].iov_base, lens[i], (off_t)starts[i]) != (ssize_t)lens[i]) return;
  } else if (vm_read(pid, local, remote, nr) != (ssize_t)total) {
    return;
  }
  /* Strings that run past their run: read on until their NUL. */
  for (size_t i = 0; i < n; i++) {
    uint64_t p = ptrs[i];
    size_t r = 0;
    while (r + 1 < nr && starts[r + 1] <= p) r++;
    size_t base = 0;
    for (size_t k = 0; k < r; k++) base += lens[k];
    const char *s = strings_buf + base + (p - starts[r]);
    size_t room = starts[r] + lens[r] - p;
    if (memchr(s, 0, room)) continue;
    char page[PAGE];
    for (uint64_t at = starts[r] + lens[r];; at += PAGE) {
      struct iovec l = {page, PAGE}, rm = {(void *)at, PAGE};
      if (vm_read(pid, &l, &rm, 1) != (ssize_t)PAGE || memchr(page, 0, PAGE)) break;
    }
  }
}

/* Descriptors a notification's reads opened, closed once it is answered. */
static int to_close[8];
static int n_to_close;

static void close_later(int fd) {
  if (fd >= 0 && n_to_close < 8) to_close[n_to_close++] = fd;
}

/* The work of `reads` / `reads-mem` for one notification. */
static void read_exec(const struct seccomp_notif *req) {
  pid_t pid = req->pid;
  uint64_t name = req->data.args[0], argv = req->data.args[1], envp = req->data.args[2];
  int dirfd = AT_FDCWD;
  if (req->data.nr == SYS_execveat) {
    dirfd = (int)req->data.args[0];
    name = req->data.args[1];
    argv = req->data.args[2];
    envp = req->data.args[3];
  }
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  /* The name, and the first page of each pointer array, in one call. */
  static char path[PATH_MAX + 1];
  static uint64_t first[2][PAGE / 8];
  size_t name_len = PAGE - (name & (PAGE - 1));
  if (name_len > PATH_MAX) name_len = PATH_MAX;
  size_t alen = argv ? PAGE - (argv & (PAGE - 1)) : 0, elen = envp ? PAGE - (envp & (PAGE - 1)) : 0;
  struct iovec l[3] = {{path, name_len}, {first[0], alen}, {first[1], elen}};
  struct iovec r[3] = {{(void *)name, name_len}, {(void *)argv, alen}, {(void *)envp, elen}};
  memset(path, 0, sizeof path);
  ssize_t got = vm_read(pid, l, r, 3);
  if (got < (ssize_t)(name_len + alen + elen)) alen = elen = 0;
  static uint64_t ptrs[MAX_PTRS];
  size_t n = pointers(pid, argv, first[0], alen, envp, first[1], elen, ptrs);
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d", pid);
  int procdir = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int memfd = -1;
  if (mode == READS_MEM && procdir >= 0) memfd = openat(procdir, "mem", O_RDONLY | O_CLOEXEC);
  read_strings(pid, memfd, ptrs, n);
  close_later(memfd);
  char cwd[PATH_MAX];
  if (procdir >= 0) readlinkat(procdir, "cwd", cwd, sizeof cwd);
  /* The file: a relative name from the process's working directory (or its dirfd). */
  int base = -1;
  if (path[0] != '/' && procdir >= 0) {
    char at[32];
    if (dirfd == AT_FDCWD)
      snprintf(at, sizeof at, "cwd");
    else
      snprintf(at, sizeof at, "fd/%d", dirfd);
    base = openat(procdir, at, O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  int fd = openat(path[0] == '/' ? AT_FDCWD : base, path, O_PATH | O_CLOEXEC);
  struct stat st;
  if (fd >= 0) fstat(fd, &st);
  close_later(fd);
  close_later(base);
  close_later(procdir);
  close_later(pidfd);
}

static void serve(int listener) {
  struct seccomp_notif_sizes sizes;
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0) {
    perror("exec-floor: SECCOMP_GET_NOTIF_SIZES");
    return;
  }
  struct seccomp_notif *req = calloc(1, sizes.seccomp_notif);
  struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp);
  if (!req || !resp) return;
  for (;;) {
    memset(req, 0, sizes.seccomp_notif);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
      if (errno == EINTR) continue;
      /* ENOENT: the caller died before the read, or no task uses the filter any more. */
      if (errno == ENOENT) {
        /* The caller died before the read, or no task uses the filter any more: then the
         * listener polls as hung up and every read fails at once. */
        struct pollfd p = {listener, POLLIN, 0};
        if (poll(&p, 1, 0) != 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) return;
        continue;
      }
      return;
    }
    double t0 = now_us();
    if (mode != MECHANISM) {
      read_exec(req);
      ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id);
    }
    if (times && ntimes < MAX_TIMES) times[ntimes++] = now_us() - t0;
    memset(resp, 0, sizes.seccomp_notif_resp);
    resp->id = req->id;
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
    while (n_to_close) close(to_close[--n_to_close]);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: exec-floor mechanism|reads|reads-mem COMMAND [ARG...]\n");
    return 2;
  }
  if (!strcmp(argv[1], "mechanism"))
    mode = MECHANISM;
  else if (!strcmp(argv[1], "reads"))
    mode = READS;
  else if (!strcmp(argv[1], "reads-mem"))
    mode = READS_MEM;
  else {
    fprintf(stderr, "exec-floor: unknown mode %s\n", argv[1]);
    return 2;
  }
  const char *stats = getenv("EXEC_FLOOR_STATS");
  if (stats) times = malloc(MAX_TIMES * sizeof *times);
  int to_parent[2], go[2];
  if (pipe2(to_parent, O_CLOEXEC) || pipe2(go, O_CLOEXEC)) {
    perror("exec-floor: pipe");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("exec-floor: fork");
    return 1;
  }
  if (child == 0) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) _exit(126);
    int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) {
      perror("exec-floor: seccomp");
      _exit(126);
    }
    /* The fd number through a pipe; the parent takes the fd with pidfd_getfd (a sendmsg of
     * it would not be notified here, but keeps the two programs alike). */
    if (write(to_parent[1], &fd, sizeof fd) != sizeof fd) _exit(126);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(126);
    close(fd);
    execvp(argv[2], argv + 2);
    perror("exec-floor: exec");
    _exit(127);
  }
  int child_fd;
  if (read(to_parent[0], &child_fd, sizeof child_fd) != sizeof child_fd) return 1;
  int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
  int listener = (int)syscall(SYS_pidfd_getfd, pidfd, child_fd, 0);
  if (listener < 0) {
    perror("exec-floor: pidfd_getfd");
    return 1;
  }
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, 0) < 0) {
    perror("exec-floor: SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP");
    return 1;
  }
  if (write(go[1], "g", 1) != 1) return 1;
  close(go[1]);
  serve(listener);
  int status;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (stats) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    double p50 = 0;
    if (ntimes) {
      qsort(times, ntimes, sizeof *times, cmp_double);
      p50 = times[ntimes / 2];
    }
    FILE *f = fopen(stats, "w");
    if (f) {
      fprintf(f, "execs %zu cpu_us %.0f work_p50_us %.1f\n", ntimes, cpu, p50);
      fclose(f);
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
