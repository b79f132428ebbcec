#!/usr/bin/env bash
# What outside files (issue 16, on by default) cost.
#
#   scripts/bench-outside.sh [-n N]
#     A request on an outside path against the same request on a worktree file in the same
#     session: a Python loop opens and reads a small file, and stats it, N times each, timed
#     inside the session. The outside file is approved once (the script answers the ask with
#     `tyba approve`), so the figures are the server's round trip and grant check.
#
#   scripts/bench-outside.sh --launch [-r RUNS] [--home H] [--side S]
#     What the covers add to a launch (`tyba run --here --non-interactive -- /bin/true`),
#     against `--outside-files off` in the same run, in a home of H entries (default 60) and a
#     worktree among S sibling directories (default 20): CPU time of the whole process tree
#     (`perf stat -e task-clock`, load-independent) and system-call counts (`strace -c -f`),
#     with the number of covers.
#
# Needs: python3, git, a readable and writable /dev/fuse; perf and strace for --launch.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=5000
LAUNCH=0
RUNS=30
HOMES=60
SIDES=20
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N=$2; shift 2 ;;
        --launch) LAUNCH=1; shift ;;
        -r) RUNS=$2; shift 2 ;;
        --home) HOMES=$2; shift 2 ;;
        --side) SIDES=$2; shift 2 ;;
        *) echo "usage: $0 [-n N] | --launch [-r RUNS] [--home H] [--side S]" >&2; exit 2 ;;
    esac
done
TYBA=${TYBA:-$ROOT/target/release/tyba}
if [ ! -x "$TYBA" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi

WORK=$(mktemp -d /tmp/tyba-bench-outside.XXXXXX)
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_RUNTIME_DIR="$WORK/rt"
export GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME" "$WORK/rt" "$WORK/O" "$WORK/wt"
chmod 700 "$WORK/rt"
echo outside > "$WORK/O/f.txt"
cd "$WORK/wt"
echo inside > f.txt
git init -q && git add -A && git -c user.name=b -c user.email=b@e commit -q -m t

if [ "$LAUNCH" = 1 ]; then
    for tool in perf strace; do
        command -v "$tool" >/dev/null || { echo "bench: $tool is required for --launch" >&2; exit 2; }
    done
    # A home like a person's, the worktree in it (~/src/wt) among sibling checkouts:
    # dot-directories with a file, dotfiles, plain directories.
    export HOME="$WORK/h" XDG_CONFIG_HOME="$WORK/h/.config" XDG_STATE_HOME="$WORK/h/.local/state"
    mkdir -p "$HOME/src"
    for i in $(seq 1 "$HOMES"); do
        case $((i % 3)) in
            0) mkdir -p "$HOME/.d$i" && echo x > "$HOME/.d$i/f" ;;
            1) echo x > "$HOME/.f$i" ;;
            2) mkdir -p "$HOME/d$i" ;;
        esac
    done
    for i in $(seq 2 "$SIDES"); do mkdir -p "$HOME/src/side$i" && echo x > "$HOME/src/side$i/README"; done
    mv "$WORK/wt" "$HOME/src/wt"
    cd "$HOME/src/wt"
    launch() { "$TYBA" run --here --non-interactive --autonomy high "$@" -- /bin/true >/dev/null 2>&1; }
    # The covers of one session: the bind mounts of the server's filesystem in the sandbox.
    covers=$("$TYBA" run --here --non-interactive --autonomy high -- /usr/bin/python3 -c \
        'print(sum(1 for l in open("/proc/self/mounts") if l.split()[2] == "fuse"))' 2>/dev/null || true)
    echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC, $RUNS runs each, load average $(cut -d' ' -f1-3 /proc/loadavg);"
    echo "home: $HOMES entries, worktree among $SIDES siblings; covers in a session: ${covers:-?}"
    launch --outside-files auto; launch --outside-files off # warm-up
    # Interleaved, run by run, so both meet the same load; the median of each.
    for i in $(seq 1 "$RUNS"); do
        for mode in auto off; do
            perf stat -x, -e task-clock -- "$TYBA" run --here --non-interactive --autonomy high --outside-files "$mode" -- /bin/true 2>&1 >/dev/null \
                | awk -F, -v m="$mode" '/task-clock/ {print m, $1}' >> "$WORK/clock"
        done
    done
    python3 - "$WORK/clock" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m, v = line.split()
    runs.setdefault(m, []).append(float(v))
a, o = statistics.median(runs["auto"]), statistics.median(runs["off"])
print(f"task-clock (CPU of the whole tree, ms), interleaved, median of {len(runs['auto'])}:"
      f" auto {a:.2f}, off {o:.2f}, covers add {a - o:+.2f} ms"
      f" (means {statistics.mean(runs['auto']):.2f} / {statistics.mean(runs['off']):.2f})")
PY
    for mode in auto off; do
        strace -f -c -o "$WORK/strace-$mode" "$TYBA" run --here --non-interactive --autonomy high --outside-files "$mode" -- /bin/true >/dev/null 2>&1 || true
        total=$(awk '/^100.00|total/ {print $4; exit}' "$WORK/strace-$mode")
        echo "--outside-files $mode: $total system calls (strace -c -f), of them:"
        grep -E ' (mount|open_tree|move_mount|fsopen|fsconfig|fsmount|openat2|getdents64|newfstatat|statx|faccessat2?|read|writev|clone3?)$' "$WORK/strace-$mode" \
            | awk '{printf "    %-12s %s\n", $NF, $4}'
    done
    exit 0
fi
cat > loop.py <<EOF
import os, time
n = $N
def per(f):
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6
def rd(p):
    with open(p) as fh:
        fh.read()
open("../O/f.txt").read()  # the one ask
for name, p in [("worktree", "f.txt"), ("outside", "../O/f.txt")]:
    print(f"{name}: open+read {per(lambda: rd(p)):.1f} us, stat {per(lambda: os.stat(p)):.1f} us", flush=True)
EOF
"$TYBA" run --here --autonomy high --outside-files require -- /usr/bin/python3 loop.py > out.txt 2> err.txt &
pid=$!
for _ in $(seq 1 600); do
    id=$("$TYBA" inbox --json 2>/dev/null | python3 -c 'import json,sys
p=[a for s in json.load(sys.stdin) for a in s.get("pending",[])]
print(p[0]["id"] if p else "")' || true)
    if [ -n "$id" ]; then "$TYBA" approve "$id" >/dev/null; break; fi
    sleep 0.05
done
wait $pid || { cat err.txt >&2; exit 1; }
echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC, $N iterations each, load average $(cut -d' ' -f1-3 /proc/loadavg):"
cat out.txt
