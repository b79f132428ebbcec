#!/usr/bin/env bash
# Where a launch's time goes, step by step (issue 13's launch figure): builds tyba with the
# `launch-trace` feature (its own target dir, the normal build untouched), runs
# `tyba run --here --non-interactive --autonomy high -- /bin/true` N times in a committed
# 12,000-file repository like scripts/bench-overhead.sh's (a fresh HOME, nothing else in its
# parent directory), and prints the median time of each mark from the process's start, and
# the median length of each step (until the next mark of the same process: the supervisor's
# main thread, stage 1, stage 2, the agent before its exec). The start (exec to `main`) and the
# end (the last mark to the exit the caller sees) are timed from outside with the same clock.
# Usage: scripts/launch-timeline.sh [--runs N] [--keep] [--tyba BIN]
#   --tyba BIN  use a build made with `--features launch-trace` instead of building one
#   --keep      keep the fixture (its path is printed)
# Needs: cargo, git, python3. Docs: docs/performance-run.md (run 15).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=40
KEEP=0
TYBA=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --tyba) TYBA=$2; shift 2 ;;
        *) echo "usage: $0 [--runs N] [--keep] [--tyba BIN]" >&2; exit 2 ;;
    esac
done
for tool in git python3; do
    command -v "$tool" >/dev/null || { echo "launch-timeline: $tool is required" >&2; exit 2; }
done
if [ -z "$TYBA" ]; then
    (cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/launch-trace" \
        cargo build --release --quiet --features launch-trace)
    TYBA="$ROOT/target/launch-trace/release/tyba"
fi

WORK=$(mktemp -d /tmp/tyba-timeline.XXXXXX)
# Run from a copy, as installed: a just-linked executable's cached pages ran about 1 ms slower
# here (scripts/bench-overhead.sh). Not in $WORK, whose entries are covers.
BIN=$(mktemp -d /tmp/tyba-timeline-bin.XXXXXX)
cleanup() { rm -rf "$BIN"; if [ "$KEEP" = 1 ]; then echo "fixture kept: $WORK" >&2; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
cp "$TYBA" "$BIN/tyba"
TYBA="$BIN/tyba"
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
git config --global user.name bench
git config --global user.email bench@example.com
git config --global init.defaultBranch main
git config --global gc.auto 0
git config --global maintenance.auto false
TREE="$WORK/tree"
for d in $(seq 1 120); do
    mkdir -p "$TREE/src/d$d"
    for f in $(seq 1 100); do
        printf 'line %s of %s\n' "$f" "$d" > "$TREE/src/d$d/f$f.rs"
    done
done
git -C "$TREE" init -q && git -C "$TREE" add -A && git -C "$TREE" commit -q -m tree

python3 - "$TYBA" "$TREE" "$RUNS" <<'EOF'
import collections, os, statistics, subprocess, sys, time
tyba, tree, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, TYBA_LAUNCH_TRACE="1")
cmd = [tyba, "run", "--here", "--non-interactive", "--autonomy", "high", "--", "/bin/true"]
now = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
at, step, start, end, total = collections.defaultdict(list), collections.defaultdict(list), [], [], []
for i in range(runs + 3):
    t0 = now()
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    t1 = now()
    marks = []
    for line in p.stderr.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == "TYBA-TRACE":
            marks.append((float(f[1]), f[2], f[3]))
    if p.returncode != 0 or not marks or marks[0][2] != "run:main":
        sys.exit(f"launch-timeline: the launch failed or has no marks (a build without --features launch-trace?):\n{p.stderr}")
    if i < 3:
        continue
    t_main = marks[0][0]
    start.append((t_main - t0) * 1000)
    end.append((t1 - marks[-1][0]) * 1000)
    total.append((t1 - t0) * 1000)
    lane = lambda label: "run" if label.split(":")[0] in ("run", "end") else label.split(":")[0]
    last = {}
    for t, _, label in marks:
        at[label].append((t - t_main) * 1000)
        ln = "s2" if lane(label) == "agent" else lane(label)
        if ln in last:
            step[last[ln][0]].append((t - last[ln][1]) * 1000)
        last[ln] = (label, t)
med = statistics.median
print(f"{runs} launches; medians in ms. Whole launch seen by its caller: {med(total):.2f}")
print(f"exec to main (the executable's start): {med(start):.2f}; last mark to the exit seen: {med(end):.2f}")
print()
print("| mark | at (from main) | step (to the next mark of its process) |")
print("|---|---|---|")
for label in sorted(at, key=lambda l: med(at[l])):
    s = f"{med(step[label]):.2f}" if step[label] else ""
    print(f"| {label} | {med(at[label]):.2f} | {s} |")
EOF
