#!/bin/bash
# Instructions one classification of each typical command executes (valgrind's callgrind),
# a figure the machine's load does not move: the release build of
# policy/examples/classify_line classifies the command N times in the fixture worktree of
# tests/data/policy_fixture.sh, then 0 times (after the same warm-up); the difference over N
# is the cost of one classification (printing its verdict line included, about 2,000
# instructions).
# The last figure is the mean over the lines of tests/data/commands.jsonl (the corpus the
# criterion bench also runs), classified once after a first pass over all of them.
# usage: scripts/bench-classify-instructions.sh [CLASSIFY_LINE_BINARY]   (docs/performance.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --release -q -p tyba-policy --example classify_line --manifest-path "$root/Cargo.toml"
    bin=${CARGO_TARGET_DIR:-$root/target}/release/examples/classify_line
fi
bin=$(realpath "$bin")
fixture=$(mktemp -d)
trap 'rm -rf "$fixture"' EXIT
bash "$root/tests/data/policy_fixture.sh" "$fixture" >/dev/null
cd "$fixture/W"
n=100
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 >/dev/null |
        awk '/Collected/ { print $4 }'
}
for c in 'git status' 'cargo test' 'rm -rf build' 'ls -la' \
    'cat README.md | grep foo | wc -l' 'cd src && cat main.rs'; do
    args=()
    for _ in $(seq $n); do args+=("$c"); done
    # `x` and the command are classified first in both runs: the policy loads there, and the
    # tables the command's rules build on first use (the program registry, the parser's) are
    # built there, so neither counts in the difference.
    many=$(count x "$c" "${args[@]}")
    none=$(count x "$c")
    printf '%8d  %s\n' $(((many - none) / n)) "$c"
done
mapfile -d '' -t corpus < <(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.strip() and json.loads(l).get("cmd") is not None:
        sys.stdout.write(json.loads(l)["cmd"] + "\0")
' "$root/tests/data/commands.jsonl")
many=$(count x "${corpus[@]}" "${corpus[@]}")
none=$(count x "${corpus[@]}")
printf '%8d  %s\n' $(((many - none) / ${#corpus[@]})) "the ${#corpus[@]} lines of tests/data/commands.jsonl (mean)"
