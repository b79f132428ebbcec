#!/usr/bin/env python3
"""Asking latency end to end, excluding human time: a real `tyba run --here` whose agent runs
N asked commands (`touch fI`, yellow) each followed by `date +%s%N` (green, not asked); a
scripted person answers each ask as soon as it shows up, over one connection to the session's
socket (what `tyba approve` sends). Reported per ask:

- notify->visible: from the agent's previous timestamp to the ask being seen by the client
  (exec of touch, seccomp notification, classification, broker, one `list` poll: an upper
  bound, polling every 0.2 ms);
- answer->resumed: from the answer leaving the client to the agent's next timestamp (the
  broker wakes the notify thread, the kernel resumes the exec, `touch` runs, `date` runs);
- baseline iteration: the same loop at `--autonomy high` (nothing asked), to subtract the
  cost of running `touch` and `date` in the sandbox.

Usage: ask_end_to_end.py TYBA_BINARY [N]   (run in an empty scratch dir; makes a git repo)
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

tyba = os.path.abspath(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 50
root = tempfile.mkdtemp(prefix="tyba-ask-bench-")
repo = os.path.join(root, "repo")
os.makedirs(repo)
rt = os.path.join(root, "rt")
os.makedirs(rt, mode=0o700)
env = dict(os.environ, XDG_RUNTIME_DIR=rt, XDG_STATE_HOME=os.path.join(root, "state"))
subprocess.run(["git", "init", "-q", repo], check=True)
script = "date +%s%N > ts; for i in $(seq 1 {n}); do touch f$i; date +%s%N >> ts; done".format(n=n)
p = subprocess.Popen([tyba, "run", "--here", "--", "bash", "-c", script], cwd=repo, env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sockdir = os.path.join(rt, "tyba")
while not (os.path.isdir(sockdir) and os.listdir(sockdir)):
    time.sleep(0.005)
path = os.path.join(sockdir, os.listdir(sockdir)[0])
c = socket.socket(socket.AF_UNIX)
c.connect(path)
f = c.makefile("rwb", buffering=0)

def call(req):
    f.write((json.dumps(req) + "\n").encode())
    return json.loads(f.readline())

seen, sent = [], []
answered = set()
while len(sent) < n:
    r = call({"op": "list"})
    todo = [x for x in r.get("pending", []) if x["id"] not in answered]
    if not todo:
        time.sleep(0.0002)
        continue
    a = todo[0]
    seen.append(time.time_ns())
    sent.append(time.time_ns())
    assert call({"op": "answer", "id": a["id"], "answer": "once"})["ok"]
    answered.add(a["id"])
p.wait()
ts = [int(x) for x in open(os.path.join(repo, "ts")).read().split()]
vis = [(s - t) / 1e6 for s, t in zip(seen, ts)]
res = [(t - s) / 1e6 for s, t in zip(sent, ts[1:])]
# Baseline: the same commands at --autonomy high (touch is not asked): what one iteration
# (exec and run of touch and date through the sandbox) costs without an ask.
b = subprocess.run([tyba, "run", "--here", "--autonomy", "high", "--", "bash", "-c", script],
                   cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
tb = [int(x) for x in open(os.path.join(repo, "ts")).read().split()]
base = [(y - x) / 1e6 for x, y in zip(tb, tb[1:])]
for name, xs in (("notify->visible", vis), ("answer->resumed", res),
                 ("baseline iteration (no ask)", base)):
    xs = sorted(xs)
    print(f"{name}: median {statistics.median(xs):.3f} ms, p90 {xs[int(len(xs)*0.9)]:.3f} ms, "
          f"min {xs[0]:.3f} ms, max {xs[-1]:.3f} ms (n={len(xs)})")
