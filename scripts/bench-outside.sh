#!/usr/bin/env bash
# What a request on an outside path costs under `tyba run --ask-outside-files` (issue 16),
# against the same request on a worktree file in the same session: a Python loop opens and
# reads a small file, and stats it, N times each, timed inside the session. The outside file
# is approved once (the script answers the ask with `tyba approve`), so the figures are the
# server's round trip and grant check, not the person.
# Usage: scripts/bench-outside.sh [-n N]
# Needs: python3, git, a readable and writable /dev/fuse.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=5000
while [ $# -gt 0 ]; do
    case "$1" in
        -n) N=$2; shift 2 ;;
        *) echo "usage: $0 [-n N]" >&2; exit 2 ;;
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
"$TYBA" run --here --autonomy high --ask-outside-files -- /usr/bin/python3 loop.py > out.txt 2> err.txt &
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
