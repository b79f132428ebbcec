#!/usr/bin/env bash
# What the toolchain caches' private layers cost (supervisor/src/caches.rs): launch CPU time
# with the default policy's seven caches present (seven overlays) and with none, and a
# file-heavy read of a cache tree (5,000 files under ~/.cargo/registry/src) through the overlay,
# through the cache as it is (read-only: no layer), and bare.
# Usage: scripts/bench-caches.sh [--runs N]
# Needs: hyperfine, git.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=30
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) RUNS=$2; shift 2 ;;
        *) echo "usage: $0 [--runs N]" >&2; exit 2 ;;
    esac
done
for tool in hyperfine git; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required" >&2; exit 2; }
done
TYBA=${TYBA:-$ROOT/target/release/tyba}
[ -x "$TYBA" ] || (cd "$ROOT" && cargo build --release --quiet --bin tyba)

WORK=$(mktemp -d /tmp/tyba-bench-caches.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export GIT_CONFIG_NOSYSTEM=1 PATH=/usr/local/bin:/usr/bin:/bin
REPO="$WORK/repo"
git init -q -b main "$REPO"
git -C "$REPO" -c user.name=b -c user.email=b@example.com commit -q --allow-empty -m init

# Two homes: one with every cache of the default policy (seven), one with none.
FULL="$WORK/full" EMPTY="$WORK/empty"
mkdir -p "$EMPTY"
for c in .cargo/registry .cargo/git .cache/pip .npm/_cacache .cache/go-build go/pkg/mod .bun/install/cache; do
    mkdir -p "$FULL/$c"
done
# 5,000 files in 50 crates under the registry's src.
SRC="$FULL/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f"
for k in $(seq 1 50); do
    mkdir -p "$SRC/crate$k-1.0.0/src"
    for f in $(seq 1 100); do
        printf 'pub fn f%s() -> u32 { %s }\n' "$f" "$k" > "$SRC/crate$k-1.0.0/src/m$f.rs"
    done
done
# A state directory whose `tyba/caches` is a file: no layer can be made there, so the caches
# are read-only (the cache as it is, with the same Landlock rules) for the "plain" runs.
NOLAYER="$WORK/nolayer-state"
mkdir -p "$NOLAYER/tyba" && : > "$NOLAYER/tyba/caches"

run_in() { # HOME STATE ARGS...
    local home=$1 state=$2; shift 2
    (cd "$REPO" && env -i HOME="$home" PATH="$PATH" XDG_STATE_HOME="$state" GIT_CONFIG_NOSYSTEM=1 "$@")
}
export -f run_in
export REPO TYBA FULL EMPTY NOLAYER

echo "## launch: tyba run --here --non-interactive -- true ($RUNS runs)"
hyperfine -N --warmup 3 --runs "$RUNS" --export-markdown "$WORK/launch.md" \
    -n "no caches" "bash -c 'run_in $EMPTY $EMPTY/.local/state $TYBA run --here --non-interactive -- true'" \
    -n "7 caches, read-only (no layer)" "bash -c 'run_in $FULL $NOLAYER $TYBA run --here --non-interactive -- true'" \
    -n "7 caches, 7 overlays" "bash -c 'run_in $FULL $FULL/.local/state $TYBA run --here --non-interactive -- true'" 2>&1 | grep -v '^ *$'

# The read (`grep -r`: one process opens and reads every file; one exec, so the command's
# classification is not in it), timed inside one session (20 rounds after a warm-up), so
# launch is not in it either; the times go to a file in the worktree.
READ='TIMEFORMAT="%R %U %S"; for i in $(seq 0 20); do { time grep -r -q no-such-needle-in-the-cache "$HOME/.cargo/registry/src"; } 2>> "$OUTF"; done; true'
median() { # FILE: median wall and CPU (user + sys) of all rounds but the first, in ms
    local wall cpu
    wall=$(sed 1d "$1" | awk '{print $1 * 1000}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    cpu=$(sed 1d "$1" | awk '{print ($2 + $3) * 1000}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
    echo "wall $wall ms, CPU $cpu ms"
}
echo "## read of 5,000 files under ~/.cargo/registry/src (median of 20 rounds)"
OUTF="$REPO/bare.txt" HOME="$FULL" bash -c "$READ"
printf 'bare:             '; median "$REPO/bare.txt"
run_in "$FULL" "$NOLAYER" OUTF="$REPO/plain.txt" "$TYBA" run --here --non-interactive --autonomy high -- bash -c "$READ" 2>/dev/null
printf 'tyba, no layer:   '; median "$REPO/plain.txt"
run_in "$FULL" "$FULL/.local/state" OUTF="$REPO/overlay.txt" "$TYBA" run --here --non-interactive --autonomy high -- bash -c "$READ" 2>/dev/null
printf 'tyba, overlay:    '; median "$REPO/overlay.txt"
