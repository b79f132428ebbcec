#!/usr/bin/env bash
# The exec path: what the supervisor adds to each `execve` it decides (issue 11), as ratios
# against bare runs, the floor of the mechanism and bubblewrap, measured in the same run.
#   per-exec   a Python program posix_spawns /bin/true N times and times each spawn+wait;
#              the median per exec
#   loop       `for i in $(seq 1000); do /bin/true; done` in bash, whole-run medians; and the
#              same loop with the whole run on one CPU (taskset), without cross-CPU wake-ups
#   CPU        user + system time of the whole process tree of the loop (wait4), less that of
#              the same variant running /bin/true alone (its launch), over the 1,000 execs
# Variants, run interleaved in each round so that load that comes and goes hits all alike:
#   bare       nothing around the commands
#   floor-a    scripts/exec-floor.c `mechanism`: a filter that notifies execve/execveat only,
#              each notification answered CONTINUE at once (synchronous wake-up mode, as tyba)
#   floor-b    scripts/exec-floor.c `reads`: the same plus what tyba's exec model cannot decide
#              without, read the cheapest way found (pidfd, file name, argv, envp, cwd, the
#              file's identity), then CONTINUE
#   tyba       `tyba run --here --non-interactive --autonomy high` (each exec a green command
#              the supervisor reads, checks, classifies, logs and allows)
#   bwrap      bubblewrap with about Codex's Linux sandbox's set-up (no exec notification)
# Usage: scripts/bench-exec.sh [--rounds N] [--out FILE.md]
# Needs: python3, gcc (for the floor), taskset (util-linux); bubblewrap for the reference
# (apt-get install bubblewrap).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=7
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "usage: $0 [--rounds N] [--out FILE.md]" >&2; exit 2 ;;
    esac
done
command -v python3 >/dev/null || { echo "bench: python3 is required" >&2; exit 2; }
HAVE_BWRAP=1
command -v bwrap >/dev/null || { HAVE_BWRAP=0; echo "bench: bwrap not installed: no bubblewrap reference" >&2; }
HAVE_GCC=1
command -v gcc >/dev/null || { HAVE_GCC=0; echo "bench: gcc not installed: no floor variants" >&2; }

TYBA=${TYBA:-$ROOT/target/release/tyba}
if [ ! -x "$TYBA" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi

WORK=$(mktemp -d /tmp/tyba-bench-exec.XXXXXX)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" GIT_CONFIG_NOSYSTEM=1 PATH=/usr/local/bin:/usr/bin:/bin
mkdir -p "$HOME"
FLOOR=""
if [ "$HAVE_GCC" = 1 ]; then
    FLOOR="$WORK/exec-floor"
    gcc -O2 -Wall -o "$FLOOR" "$ROOT/scripts/exec-floor.c"
fi
REPO="$WORK/repo"
mkdir -p "$REPO"
git -C "$REPO" init -q
cat > "$REPO/spawn.py" <<'PY'
import os, sys, time, statistics
n = int(sys.argv[1])
times = []
for _ in range(n):
    t = time.perf_counter_ns()
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    os.waitpid(pid, 0)
    times.append(time.perf_counter_ns() - t)
print(statistics.median(times) / 1000.0)
PY

python3 - "$WORK" "$ROUNDS" "$OUT" "$TYBA" "$HAVE_BWRAP" "$REPO" "$FLOOR" <<'PY'
import datetime, os, platform, statistics, subprocess, sys, tempfile, time
work, rounds, out, tyba, have_bwrap, repo, floor = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1", sys.argv[6], sys.argv[7]
ty = [tyba, "run", "--here", "--non-interactive", "--autonomy", "high", "--"]
bw = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
      "--bind", repo, repo, "--unshare-pid", "--unshare-net", "--die-with-parent",
      "--new-session", "--chdir", repo, "--"]
variants = {"bare": []}
if floor:
    variants["floor-a"] = [floor, "mechanism"]
    variants["floor-b"] = [floor, "reads"]
variants["tyba"] = ty
if have_bwrap:
    variants["bwrap"] = bw
names = {"bare": "bare", "floor-a": "floor (a): notification, CONTINUE at once",
         "floor-b": "floor (b): notification + the exec model's reads",
         "tyba": "tyba run", "bwrap": "bubblewrap"}
N = 1000
LOOP = ["bash", "-c", f"for i in $(seq {N}); do /bin/true; done"]

def run(prefix, cmd):
    """Wall time, stdout, and the CPU time (user + system, s) of the whole waited tree."""
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        t = time.perf_counter()
        p = subprocess.Popen(prefix + cmd, cwd=repo, stdout=o, stderr=e)
        _, status, ru = os.wait4(p.pid, 0)
        w = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0); e.seek(0)
        if p.returncode != 0:
            sys.exit(f"bench: {' '.join(prefix + cmd)} failed: {e.read().decode(errors='replace')[-400:]}")
        return w, o.read().decode(), ru.ru_utime + ru.ru_stime

# The same loop with every process of the run on one CPU (`taskset -c 0`, inherited by the
# supervisor's threads too): no cross-CPU wake-ups, which on a VM cost tens of microseconds
# each and vary with load, so what remains is the work itself.
pin = ["taskset", "-c", "0"]
per = {k: [] for k in variants}
loop = {k: [] for k in variants}
loop1 = {k: [] for k in variants}
cpu = {k: [] for k in variants}
for _ in range(rounds):
    for k, prefix in variants.items():
        _, o, _ = run(prefix, ["/usr/bin/python3", "spawn.py", str(N)])
        per[k].append(float(o.strip().splitlines()[-1]))
        w, _, c = run(prefix, LOOP)
        loop[k].append(w)
        _, _, c0 = run(prefix, ["/bin/true"])
        cpu[k].append(c - c0)
        w, _, _ = run(pin + prefix, LOOP)
        loop1[k].append(w)
pm = {k: statistics.median(v) for k, v in per.items()}
lm = {k: statistics.median(v) for k, v in loop.items()}
l1 = {k: statistics.median(v) for k, v in loop1.items()}
cm = {k: statistics.median(v) / N * 1e6 for k, v in cpu.items()}
load = " ".join(open("/proc/loadavg").read().split()[:3])
lines = [f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
         f"({os.cpu_count()} CPUs, Linux {platform.release()}), {rounds} interleaved rounds, medians; "
         f"load average at the end {load}.", ""]
lines.append("| variant | one posix_spawn + wait (median of 1,000) | − bare | 1,000 /bin/true, bash loop | / bare "
             "| the loop on one CPU | / bare | CPU per exec (tree, less launch) | − bare |")
lines.append("|---|---|---|---|---|---|---|---|---|")
b = "bare"
for k in variants:
    # bubblewrap's sandboxed processes are not waited through (its PID 1 is not waited
    # for by bwrap's caller): no CPU figure for it.
    c = ("–", "–") if k == "bwrap" else (f"{cm[k]:.1f} µs", f"{cm[k]-cm[b]:+.1f} µs")
    lines.append(f"| {names[k]} | {pm[k]:.1f} µs | {pm[k]-pm[b]:+.1f} µs | {lm[k]*1000:.1f} ms | {lm[k]/lm[b]:.2f}× "
                 f"| {l1[k]*1000:.1f} ms | {l1[k]/l1[b]:.2f}× | {c[0]} | {c[1]} |")
lines.append("")
def over(x, y):
    cpu = "" if "bwrap" in (x, y) else f"; CPU {cm[x]-cm[y]:+.1f} µs per exec"
    return (f"one posix_spawn {pm[x]-pm[y]:+.1f} µs; the loop {lm[x]/lm[y]:.2f}× ({(lm[x]-lm[y])/N*1e6:+.1f} µs per exec), "
            f"on one CPU {l1[x]/l1[y]:.2f}×{cpu}")
lines.append(f"- tyba over bare: {over('tyba', 'bare')}.")
if floor:
    lines.append(f"- floor (a) over bare: {over('floor-a', 'bare')}.")
    lines.append(f"- floor (b) over bare: {over('floor-b', 'bare')}.")
    lines.append(f"- tyba over floor (b): {over('tyba', 'floor-b')}.")
if have_bwrap:
    lines.append(f"- bubblewrap over bare: {over('bwrap', 'bare')}.")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
