#!/usr/bin/env bash
# What `tyba run` adds, as ratios against bare runs and against bubblewrap, measured in the
# same run with hyperfine (issue 4 §9). Workloads:
#   launch      `true` alone, under `tyba run --here`, under bwrap
#   launch-linked  the same under `tyba run` in its default linked worktree (a worktree made
#               and removed each run, the git dir's private layer mounted) of a one-file repo
#   file-heavy  grep -r, read every file, git status, write 200 files, over a ~12k-file tree
#   compile     make -j2 -B of a generated C project (60 files)
# Usage: scripts/bench-overhead.sh [--runs N] [--out FILE.md] [--only "launch file-heavy compile"]
#        [--outside]   also `tyba run --outside-files off`, in the same run: what the outside
#                      files (on by default where /dev/fuse opens) cost against none
#        [--baseline BIN]  also another tyba binary (a build before a change), in the same run:
#                      a before/after table per workload
#        [--floor]     also, for `launch`, scripts/launch-floor.c: the kernel work of tyba's
#                      sandbox set-up and end with none of tyba's own (the launch's lower bound)
#        [--dev-home]  run in a home like a developer's instead of an empty one: the toolchain
#                      caches of the default policy that cargo, npm and pip make (each gets a
#                      session-private layer), Claude Code's state and shell startup files
# Needs: hyperfine and bubblewrap (apt-get install hyperfine bubblewrap), gcc, make, git.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=20
OUT=""
ONLY="launch file-heavy compile"
OUTSIDE=0
BASE=""
FLOOR=0
DEV_HOME=0
while [ $# -gt 0 ]; do
    case "$1" in
        --outside) OUTSIDE=1; shift ;;
        --floor) FLOOR=1; shift ;;
        --dev-home) DEV_HOME=1; shift ;;
        --runs) RUNS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --baseline) BASE=$2; shift 2 ;;
        *) echo "usage: $0 [--runs N] [--out FILE.md] [--only WORKLOADS] [--outside] [--baseline BIN] [--floor] [--dev-home]" >&2; exit 2 ;;
    esac
done
wanted() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

for tool in hyperfine git gcc make python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is required (apt-get install hyperfine bubblewrap gcc make)" >&2; exit 2; }
done
HAVE_BWRAP=1
command -v bwrap >/dev/null || { HAVE_BWRAP=0; echo "bench: bwrap not installed: no bubblewrap reference" >&2; }

TYBA=${TYBA:-$ROOT/target/release/tyba}
if [ ! -x "$TYBA" ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi

WORK=$(mktemp -d /tmp/tyba-bench.XXXXXX)
# The builds measured run from copies, as `cargo install` puts one in ~/.cargo/bin: the pages
# of an executable the linker has just written stay in the page cache as it wrote them, and
# the same build ran about 1 ms slower from there on this VM (every step of the launch, from
# the argument parsing on) than from a copy, or than after its cached pages were dropped and
# read again (docs/performance-run.md, run 19). Kept apart from $WORK, whose entries beside
# the worktree are covers of the outside files.
BIN=$(mktemp -d /tmp/tyba-bench-bin.XXXXXX)
cleanup() { rm -rf "$WORK" "$BIN"; }
trap cleanup EXIT
cp "$TYBA" "$BIN/tyba"
TYBA="$BIN/tyba"
if [ -n "$BASE" ]; then
    cp "$BASE" "$BIN/tyba-before"
    BASE="$BIN/tyba-before"
fi
LF=""
if [ "$FLOOR" = 1 ]; then
    LF="$WORK/launch-floor"
    gcc -O2 -Wall -o "$LF" "$ROOT/scripts/launch-floor.c"
fi
export HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
git config --global user.name bench
git config --global user.email bench@example.com
git config --global init.defaultBranch main
# The fixtures' commits (12,000 new objects) would start a detached `git gc --auto` that runs
# through the first measured launches, competing for the CPUs and the disk.
git config --global gc.auto 0
git config --global maintenance.auto false
if [ "$DEV_HOME" = 1 ]; then
    # What `cargo build`, `npm install` and `pip install` leave in a home, a few files each,
    # and an installed Claude Code's state.
    mkdir -p "$HOME/.cargo/registry/index/index.crates.io-1949cf8c6b5b557f/.cache/se" \
        "$HOME/.cargo/registry/cache/index.crates.io-1949cf8c6b5b557f" \
        "$HOME/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.0/src" \
        "$HOME/.npm/_cacache/index-v5/ab/cd" "$HOME/.npm/_cacache/content-v2/sha512/ab/cd" \
        "$HOME/.npm/_logs" "$HOME/.cache/pip/http-v2/a/b" "$HOME/.claude/projects"
    echo '{"name":"serde"}' > "$HOME/.cargo/registry/index/index.crates.io-1949cf8c6b5b557f/.cache/se/serde"
    head -c 65536 /dev/urandom > "$HOME/.cargo/registry/cache/index.crates.io-1949cf8c6b5b557f/serde-1.0.0.crate"
    echo 'pub fn f() {}' > "$HOME/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.0/src/lib.rs"
    echo '{"key":"make-fetch-happen"}' > "$HOME/.npm/_cacache/index-v5/ab/cd/0123"
    head -c 65536 /dev/urandom > "$HOME/.npm/_cacache/content-v2/sha512/ab/cd/0123"
    echo 'verbose cli' > "$HOME/.npm/_logs/2026-12-05T00_00_00_000Z-debug-0.log"
    head -c 4096 /dev/urandom > "$HOME/.cache/pip/http-v2/a/b/0123"
    echo '{"permissions":{}}' > "$HOME/.claude/settings.json"
    echo '{"numStartups":1}' > "$HOME/.claude.json"
    printf 'export PATH=$HOME/.cargo/bin:$PATH\n' > "$HOME/.profile"
    printf 'alias ll="ls -l"\n' > "$HOME/.bashrc"
fi

# --- a ~12k-file tree in a git repository ---
TREE="$WORK/tree"
mkdir -p "$TREE"
for d in $(seq 1 120); do
    mkdir -p "$TREE/src/d$d"
    for f in $(seq 1 100); do
        printf 'line one of %s/%s\nfn value_%s() -> u32 { %s }\nneedle? not here\n' "$d" "$f" "$f" "$f" > "$TREE/src/d$d/f$f.rs"
    done
done
cat > "$TREE/.bench-file-heavy.sh" <<'EOF'
grep -r "value_77()" src > /dev/null
find src -type f -print0 | xargs -0 cat > /dev/null
git status --porcelain > /dev/null
mkdir -p out
for i in $(seq 1 200); do printf '%s\n' "$i" > "out/f$i.txt"; done
EOF
echo "out/" > "$TREE/.gitignore"
git -C "$TREE" init -q && git -C "$TREE" add -A && git -C "$TREE" commit -q -m tree

# --- a C project ---
CPROJ="$WORK/cproj"
mkdir -p "$CPROJ"
for i in $(seq 1 60); do
    {
        echo "#include <stdio.h>"
        for j in $(seq 1 40); do
            echo "int f${i}_$j(int x) { int s = 0; for (int k = 0; k < x; k++) s += k * $j; return s; }"
        done
    } > "$CPROJ/m$i.c"
done
{
    echo "int main(void) { return 0; }"
} > "$CPROJ/main.c"
cat > "$CPROJ/Makefile" <<'EOF'
SRC := $(wildcard *.c)
OBJ := $(SRC:.c=.o)
prog: $(OBJ)
	$(CC) -o $@ $(OBJ)
%.o: %.c
	$(CC) -O1 -c $< -o $@
EOF
git -C "$CPROJ" init -q && git -C "$CPROJ" add -A && git -C "$CPROJ" commit -q -m c

# --- a one-file repository for the linked-worktree launch ---
SMALL="$WORK/small"
mkdir -p "$SMALL" && echo hello > "$SMALL/README"
git -C "$SMALL" init -q && git -C "$SMALL" add -A && git -C "$SMALL" commit -q -m small

TY="$TYBA run --here --non-interactive --autonomy high --"
TYO="$TYBA run --here --non-interactive --autonomy high --outside-files off --"
TYL="$TYBA run --non-interactive --autonomy high --"
TYB="" TYBL=""
if [ -n "$BASE" ]; then
    TYB="$BASE run --here --non-interactive --autonomy high --"
    TYBL="$BASE run --non-interactive --autonomy high --"
fi
bw() { echo "bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind $1 $1 --unshare-pid --unshare-net --die-with-parent --new-session --chdir $1 --"; }

bench() { # name dir bare-command...
    local name=$1 dir=$2; shift 2
    wanted "$name" || return 0
    local cmd="$*" ty=$TY tyb=$TYB
    if [ "$name" = launch-linked ]; then ty=$TYL tyb=$TYBL; fi
    local args=(-n bare "$cmd" -n tyba "$ty $cmd")
    if [ -n "$BASE" ]; then args+=(-n tyba-before "$tyb $cmd"); fi
    if [ "$HAVE_BWRAP" = 1 ]; then args+=(-n bwrap "$(bw "$dir") $cmd"); fi
    if [ "$OUTSIDE" = 1 ]; then args+=(-n tyba-off "$TYO $cmd"); fi
    if [ -n "$LF" ] && [ "$name" = launch ]; then args+=(-n floor "$LF $dir $cmd"); fi
    (cd "$dir" && hyperfine -N --style basic --warmup 3 --runs "$RUNS" --export-json "$WORK/$name.json" "${args[@]}" >&2)
}

bench launch "$TREE" /bin/true
bench launch-linked "$SMALL" /bin/true
bench file-heavy "$TREE" bash .bench-file-heavy.sh
bench compile "$CPROJ" make -s -j2 -B

# Interleaved medians: bare, tyba and bwrap alternate run by run, so load that comes and goes
# (a shared VM) hits all three alike; medians ignore the spikes.
cat > "$WORK/interleave.all" <<EOF
launch	$TREE	/bin/true
launch-linked	$SMALL	/bin/true
file-heavy	$TREE	bash .bench-file-heavy.sh
compile	$CPROJ	make -s -j2 -B
EOF
while IFS= read -r line; do
    if wanted "${line%%	*}"; then printf '%s\n' "$line"; fi
done < "$WORK/interleave.all" > "$WORK/interleave.tsv"

BENCH_DEV_HOME=$DEV_HOME python3 - "$WORK" "$RUNS" "$OUT" "$TY" "$HAVE_BWRAP" "$OUTSIDE" "$TYO" "$TYL" "$TYB" "$TYBL" "$LF" <<'EOF'
import json, sys, os, platform, datetime, shlex, statistics, subprocess, time
work, runs, out, ty, have_bwrap = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
outside, tyo = sys.argv[6] == "1", sys.argv[7]
tyl, tyb, tybl = sys.argv[8], sys.argv[9], sys.argv[10]
floor = sys.argv[11]

def bwrap(d):
    return (f"bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind {d} {d} --unshare-pid "
            f"--unshare-net --die-with-parent --new-session --chdir {d} --")

def once(cmd, cwd):
    t = time.perf_counter()
    p = subprocess.Popen(shlex.split(cmd), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime

inter = []
for line in open(os.path.join(work, "interleave.tsv")):
    name, cwd, cmd = line.rstrip("\n").split("\t")
    linked = name == "launch-linked"
    variants = {"bare": cmd, "tyba": f"{tyl if linked else ty} {cmd}"}
    if tyb:
        variants["tyba-before"] = f"{tybl if linked else tyb} {cmd}"
    if have_bwrap:
        variants["bwrap"] = f"{bwrap(cwd)} {cmd}"
    if outside:
        variants["tyba-off"] = f"{tyo} {cmd}"
    if floor and name == "launch":
        variants["floor"] = f"{floor} {cwd} {cmd}"
    wall = {k: [] for k in variants}
    for _ in range(int(runs)):
        for k, c in variants.items():
            w, _ = once(c, cwd)
            wall[k].append(w)
    med = {k: statistics.median(v) for k, v in wall.items()}
    inter.append((name, med))
rows = []
WORKLOADS = ["launch", "launch-linked", "file-heavy", "compile"]
for name in WORKLOADS:
    if not os.path.exists(os.path.join(work, name + ".json")):
        continue
    data = {r["command"]: r for r in json.load(open(os.path.join(work, name + ".json")))["results"]}
    bare = data["bare"]["mean"]
    tyba = data["tyba"]["mean"]
    bw = data.get("bwrap", {}).get("mean")
    cpu = lambda r: r["user"] + r["system"]
    rows.append((name, bare, tyba, bw, data["tyba"]["stddev"], cpu(data["tyba"]) / max(cpu(data["bare"]), 1e-9)))
lines = []
lines.append(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
             f"({os.cpu_count()} CPUs, Linux {platform.release()}), hyperfine, {runs} runs each after 3 warm-ups"
             + (", in a developer's home (`--dev-home`: toolchain caches, Claude Code's state)." if os.environ.get("BENCH_DEV_HOME") == "1" else ", in an empty home."))
lines.append("")
lines.append("| workload | bare | tyba run | tyba / bare | tyba − bare | CPU tyba / bare | bwrap | bwrap / bare | tyba / bwrap |")
lines.append("|---|---|---|---|---|---|---|---|---|")
for name, bare, tyba, bw, sd, cpu_ratio in rows:
    bws = f"{bw*1000:.1f} ms" if bw else "–"
    bwr = f"{bw/bare:.2f}×" if bw else "–"
    tbw = f"{tyba/bw:.2f}×" if bw else "–"
    lines.append(f"| {name} | {bare*1000:.1f} ms | {tyba*1000:.1f} ms (σ {sd*1000:.1f}) | {tyba/bare:.2f}× | "
                 f"{(tyba-bare)*1000:+.1f} ms | {cpu_ratio:.2f}× | {bws} | {bwr} | {tbw} |")
lines.append("")
lines.append("Interleaved (bare, tyba, bwrap alternating run by run), medians:")
lines.append("")
lines.append("| workload | bare | tyba run | tyba / bare | tyba − bare | bwrap | tyba / bwrap |")
lines.append("|---|---|---|---|---|---|---|")
for name, med in inter:
    b, t, w = med["bare"], med["tyba"], med.get("bwrap")
    ws = f"{w*1000:.1f} ms" if w else "–"
    tw = f"{t/w:.2f}×" if w else "–"
    lines.append(f"| {name} | {b*1000:.1f} ms | {t*1000:.1f} ms | {t/b:.2f}× | {(t-b)*1000:+.1f} ms | {ws} | {tw} |")
lines.append("")
lines.append("CPU = user + system time of the process tree hyperfine waited for (bwrap's sandboxed")
lines.append("children are not waited through, so no CPU figure for it). Load average at the end: "
             + " ".join(open("/proc/loadavg").read().split()[:3]) + ".")
if outside:
    lines.append("")
    lines.append("`tyba run` (outside files on, the default) against `--outside-files off` in the same run")
    lines.append("(the workloads touch only the worktree, which is not on FUSE):")
    lines.append("")
    lines.append("| workload | tyba run (on) | --outside-files off | on / off | interleaved medians: on | off | on / off |")
    lines.append("|---|---|---|---|---|---|---|")
    med_by = dict(inter)
    for name in WORKLOADS:
        f = os.path.join(work, name + ".json")
        if not os.path.exists(f):
            continue
        data = {r["command"]: r for r in json.load(open(f))["results"]}
        t, o = data["tyba"]["mean"], data["tyba-off"]["mean"]
        m = med_by.get(name, {})
        mt, mo = m.get("tyba"), m.get("tyba-off")
        ms = f"{mt*1000:.1f} ms | {mo*1000:.1f} ms | {mt/mo:.2f}×" if mt and mo else "– | – | –"
        lines.append(f"| {name} | {t*1000:.1f} ms (σ {data['tyba']['stddev']*1000:.1f}) | {o*1000:.1f} ms (σ {data['tyba-off']['stddev']*1000:.1f}) | {t/o:.2f}× | {ms} |")
if floor:
    f = os.path.join(work, "launch.json")
    if os.path.exists(f):
        data = {r["command"]: r for r in json.load(open(f))["results"]}
        b, t, fl = data["bare"]["mean"], data["tyba"]["mean"], data["floor"]["mean"]
        m = dict(inter).get("launch", {})
        mb, mt, mf = m.get("bare"), m.get("tyba"), m.get("floor")
        lines.append("")
        lines.append("The launch's floor (`scripts/launch-floor.c`: the same namespaces, mounts, Landlock")
        lines.append("ruleset, seccomp filters and exec notification, none of tyba's own work) in the same run:")
        lines.append("")
        lines.append("| | floor | floor − bare | tyba run − floor | tyba run / floor |")
        lines.append("|---|---|---|---|---|")
        lines.append(f"| means | {fl*1000:.1f} ms (σ {data['floor']['stddev']*1000:.1f}) | {(fl-b)*1000:+.1f} ms | "
                     f"{(t-fl)*1000:+.1f} ms | {t/fl:.2f}× |")
        if mb and mt and mf:
            lines.append(f"| interleaved medians | {mf*1000:.1f} ms | {(mf-mb)*1000:+.1f} ms | "
                         f"{(mt-mf)*1000:+.1f} ms | {mt/mf:.2f}× |")
if tyb:
    lines.append("")
    lines.append("The baseline binary (`--baseline`) against this one, in the same run:")
    lines.append("")
    lines.append("| workload | before: mean (σ) | after: mean (σ) | after − before | CPU before | CPU after | interleaved medians: before | after | after − before |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    med_by = dict(inter)
    for name in WORKLOADS:
        f = os.path.join(work, name + ".json")
        if not os.path.exists(f):
            continue
        data = {r["command"]: r for r in json.load(open(f))["results"]}
        b, a = data["tyba-before"], data["tyba"]
        m = med_by.get(name, {})
        mb, ma = m.get("tyba-before"), m.get("tyba")
        ms = f"{mb*1000:.1f} ms | {ma*1000:.1f} ms | {(ma-mb)*1000:+.1f} ms" if mb and ma else "– | – | –"
        cpu = lambda r: (r["user"] + r["system"]) * 1000
        lines.append(f"| {name} | {b['mean']*1000:.1f} ms ({b['stddev']*1000:.1f}) | {a['mean']*1000:.1f} ms ({a['stddev']*1000:.1f}) | "
                     f"{(a['mean']-b['mean'])*1000:+.1f} ms | {cpu(b):.1f} ms | {cpu(a):.1f} ms | {ms} |")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
EOF
