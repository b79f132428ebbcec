#!/usr/bin/env bash
# What the notify thread does per exec, counted rather than timed where it can be (the
# machine's load moves wall-clock figures, not counts): the agent runs
# `bash -c 'for i in $(seq N); do /bin/true; done'` under `tyba run --here --non-interactive
# --autonomy high`, and the thread named tyba-notify is watched three times over:
#   syscalls   strace -c of the thread: system calls per exec, in all;
#   answered   perf's raw_syscalls tracepoints on the thread: per notification, the system calls
#              made and the time from SECCOMP_IOCTL_NOTIF_RECV's return to
#              SECCOMP_IOCTL_NOTIF_SEND (the exec waits for exactly that), median; the trace
#              itself adds about a microsecond per system call;
#   cpu        perf stat -e task-clock of the thread: its CPU time per exec.
# The same for scripts/exec-floor.c `reads` (floor (b) of scripts/bench-exec.sh) and
# `mechanism` (floor (a)), whose notifier is a one-thread process.
# Instructions are not counted: this VM has no hardware counters (perf: `instructions` not
# supported) and valgrind cannot run `tyba run` (it implements neither seccomp nor Landlock
# for the sandbox's stages, nor pidfd_open).
# Usage: scripts/bench-exec-counts.sh [--execs N] [TYBA...]   (default: target/release/tyba)
# Needs: strace, perf, gcc; root or perf_event_paranoid <= 1 for the tracepoints.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=1000
if [ "${1:-}" = --execs ]; then N=$2; shift 2; fi
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$ROOT/target/release/tyba")
for t in strace perf gcc python3; do
    command -v $t >/dev/null || { echo "bench: $t is required" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/tyba-bench-counts.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" GIT_CONFIG_NOSYSTEM=1 PATH=/usr/local/bin:/usr/bin:/bin
mkdir -p "$HOME" "$WORK/repo"
git -C "$WORK/repo" init -q
gcc -O2 -o "$WORK/exec-floor" "$ROOT/scripts/exec-floor.c"
LOOP="sleep 1; for i in \$(seq $N); do /bin/true; done"

# Starts `$@` in the background (its loop waits a second first) and sets TID to the thread
# to watch: tyba's notify thread, or the floor's one thread.
start() {
    (cd "$WORK/repo" && exec "$@" >/dev/null 2>"$WORK/err") &
    PID=$!
    TID=""
    for _ in $(seq 100); do
        if [ "$KIND" = floor ]; then
            TID=$PID
        else
            TID=$(grep -l '^tyba-notify$' /proc/$PID/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5 || true)
        fi
        [ -n "$TID" ] && break
        sleep 0.02
    done
    [ -n "$TID" ] || { echo "bench: no notify thread in $*" >&2; cat "$WORK/err" >&2; exit 1; }
}

measure() {
    local name=$1
    shift
    # System calls in all.
    start "$@"
    strace -c -q -p "$TID" -o "$WORK/strace" &
    local s=$!
    wait "$PID"
    sleep 0.3
    kill "$s" 2>/dev/null || true
    wait "$s" 2>/dev/null || true
    local calls
    calls=$(awk '$NF == "total" { print $(NF-2) }' "$WORK/strace")
    # The answer's critical path.
    start "$@"
    perf record -q -o "$WORK/perf.data" -e raw_syscalls:sys_enter,raw_syscalls:sys_exit -t "$TID" 2>/dev/null &
    local p=$!
    wait "$PID"
    sleep 0.3
    kill -INT "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    perf script -i "$WORK/perf.data" -F time,event,trace 2>/dev/null >"$WORK/trace"
    # CPU time.
    start "$@"
    perf stat -x, -e task-clock -t "$TID" -o "$WORK/stat" &
    p=$!
    wait "$PID"
    sleep 0.3
    kill -INT "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    python3 - "$name" "$N" "$calls" "$WORK/trace" "$WORK/stat" <<'PY'
import re, statistics, sys
name, n, calls, trace, stat = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
RECV, SEND = 0xc0502100, 0xc0182101
work, count, inside, t_recv, pending = [], [], 0, None, False
for l in open(trace):
    m = re.match(r"\s*([\d.]+):\s+raw_syscalls:sys_(enter|exit):\s+NR (\d+) (.*)", l)
    if not m:
        continue
    t, kind, nr, rest = float(m.group(1)) * 1e6, m.group(2), int(m.group(3)), m.group(4)
    if kind == "enter":
        if nr == 16:
            cmd = int(rest.split(",")[1].strip(), 16)
            if cmd == RECV:
                pending = True
                continue
            if cmd == SEND and t_recv is not None:
                work.append(t - t_recv)
                count.append(inside)
                t_recv = None
                continue
        if t_recv is not None:
            inside += 1
    elif nr == 16 and pending:
        pending = False
        if rest.strip() == "= 0":
            t_recv, inside = t, 0
ms = 0.0
for l in open(stat):
    f = l.strip().split(",")
    if len(f) > 2 and "task-clock" in f[2]:
        ms = float(f[0])
if not work:
    sys.exit(f"bench: no notification traced for {name}")
print(f"| {name} | {int(calls) / n:.1f} | {statistics.median(count):.0f} | "
      f"{statistics.median(work):.0f} µs | {ms * 1000 / n:.1f} µs |")
PY
}

echo "$N execs of /bin/true from a bash loop; load average $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| notifier | system calls per exec, in all | of them before the answer (median) | notification to answer, traced (median) | CPU time per exec |"
echo "|---|---|---|---|---|"
KIND=floor
measure "floor (a): CONTINUE at once" "$WORK/exec-floor" mechanism bash -c "$LOOP"
measure "floor (b): the exec model's reads" "$WORK/exec-floor" reads bash -c "$LOOP"
KIND=tyba
for b in "${BINS[@]}"; do
    measure "tyba run ($(basename "$b"))" "$b" run --here --non-interactive --autonomy high -- bash -c "$LOOP"
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
