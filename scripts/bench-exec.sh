#!/usr/bin/env bash
# The exec path: what the supervisor adds to each `execve` it decides (issue 11), as ratios
# against bare runs and bubblewrap, measured in the same run.
#   per-exec   a Python program posix_spawns /bin/true N times and times each spawn+wait;
#              the median per exec, bare, under `tyba run` (each exec a green command the
#              supervisor classifies and allows) and under bwrap
#   loop       `for i in $(seq 1000); do /bin/true; done` in bash, whole-run medians; and the
#              same loop with the whole run on one CPU (taskset), without cross-CPU wake-ups
# Runs are interleaved (bare, tyba, bwrap in turn) so that load that comes and goes hits all
# three alike.
# Usage: scripts/bench-exec.sh [--rounds N] [--out FILE.md]
# Needs: python3, taskset (util-linux); bubblewrap for the reference (apt-get install bubblewrap).
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

TYBA=${TYBA:-$ROOT/target/release/tyba}
if [ ! -x "$TYBA" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi

WORK=$(mktemp -d /tmp/tyba-bench-exec.XXXXXX)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" GIT_CONFIG_NOSYSTEM=1 PATH=/usr/local/bin:/usr/bin:/bin
mkdir -p "$HOME"
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

python3 - "$WORK" "$ROUNDS" "$OUT" "$TYBA" "$HAVE_BWRAP" "$REPO" <<'PY'
import datetime, os, platform, statistics, subprocess, sys, time
work, rounds, out, tyba, have_bwrap, repo = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1", sys.argv[6]
ty = [tyba, "run", "--here", "--non-interactive", "--autonomy", "high", "--"]
bw = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
      "--bind", repo, repo, "--unshare-pid", "--unshare-net", "--die-with-parent",
      "--new-session", "--chdir", repo, "--"]
variants = {"bare": [], "tyba": ty}
if have_bwrap:
    variants["bwrap"] = bw

def run(prefix, cmd):
    t = time.perf_counter()
    p = subprocess.run(prefix + cmd, cwd=repo, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(prefix + cmd)} failed: {p.stderr[-400:]}")
    return time.perf_counter() - t, p.stdout

# The same loop with every process of the run on one CPU (`taskset -c 0`, inherited by the
# supervisor's threads too): no cross-CPU wake-ups, which on a VM cost tens of microseconds
# each and vary with load, so what remains is the work itself.
pin = ["taskset", "-c", "0"]
per = {k: [] for k in variants}
loop = {k: [] for k in variants}
loop1 = {k: [] for k in variants}
for _ in range(rounds):
    for k, prefix in variants.items():
        _, o = run(prefix, ["/usr/bin/python3", "spawn.py", "1000"])
        per[k].append(float(o.strip().splitlines()[-1]))
        w, _ = run(prefix, ["bash", "-c", "for i in $(seq 1000); do /bin/true; done"])
        loop[k].append(w)
        w, _ = run(pin + prefix, ["bash", "-c", "for i in $(seq 1000); do /bin/true; done"])
        loop1[k].append(w)
pm = {k: statistics.median(v) for k, v in per.items()}
lm = {k: statistics.median(v) for k, v in loop.items()}
l1 = {k: statistics.median(v) for k, v in loop1.items()}
lines = [f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
         f"({os.cpu_count()} CPUs, Linux {platform.release()}), {rounds} interleaved rounds, medians.", ""]
lines.append("| workload | bare | tyba run | tyba / bare | tyba − bare | bwrap | bwrap / bare | tyba / bwrap |")
lines.append("|---|---|---|---|---|---|---|---|")
def row(name, m, unit, scale):
    b, t, w = m["bare"], m["tyba"], m.get("bwrap")
    ws = f"{w*scale:.1f} {unit}" if w else "–"
    return (f"| {name} | {b*scale:.1f} {unit} | {t*scale:.1f} {unit} | {t/b:.2f}× | {(t-b)*scale:+.1f} {unit} | "
            f"{ws} | {(w/b) if w else 0:.2f}× | {(t/w) if w else 0:.2f}× |")
lines.append(row("one posix_spawn + wait of /bin/true (median of 1,000)", pm, "µs", 1))
lines.append(row("1,000 /bin/true from a bash loop", lm, "ms", 1000))
lines.append(row("1,000 /bin/true from a bash loop, all on one CPU", l1, "ms", 1000))
lines.append("")
lines.append("Load average at the end: " + " ".join(open("/proc/loadavg").read().split()[:3]) + ".")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
PY
