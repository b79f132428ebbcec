#!/usr/bin/env python3
"""The broker under load: hook asks from several agents and `tyba inbox --watch` clients.

usage: scripts/bench-broker-load.py [--rounds N] NAME=TYBA_BINARY [NAME=TYBA_BINARY …]

For each binary, each round: a fresh repository, home and runtime directory; a session
`tyba run --here --autonomy high -- python3 broker-load-agent.py 5 10 0 go` (5 agents of 10
concurrent asks each, every ask on its own connection to the hook socket); 10 `tyba inbox
--watch --json` clients; and a scripted person on one connection to the session's socket
who lists continuously and answers each ask `once` as soon as it is listed. The rounds of
the binaries alternate, so the machine's load falls on them alike.

Measured, over every ask of every round (wall clock, the same inside the sandbox):
- ask -> listed: the agent's send to the ask's first appearance in the person's listing
  (what `tyba inbox` and the same-terminal prompt read);
- ask -> answer delivered: the agent's send to its reply;
- answer sent -> delivered: the person's answer line written to its reply;
- ask -> seen by a watcher: to its first appearance in a `tyba inbox --watch` output (those
  poll every 200 ms, which dominates);
- the supervisor's resident memory (VmRSS) and threads just before the asks, their peak
  while they wait (sampled every 2 ms), and after.
Every ask must be answered `once` and every watcher must end with nothing pending: the
script fails otherwise.
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
AGENTS, ASKS, WATCHERS = 5, 10, 10


def status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[i]


def wait_for(pred, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    raise SystemExit("bench: never %s" % what)


def run_round(tyba):
    root = tempfile.mkdtemp(prefix="tyba-load-")
    try:
        return _round(tyba, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _round(tyba, root):
    wt, home, rt = (os.path.join(root, d) for d in ("repo", "home", "rt"))
    for d in (wt, home, rt):
        os.makedirs(d, mode=0o700)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "XDG_RUNTIME_DIR": rt,
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    git = lambda *a: subprocess.run(["git", "-C", wt, *a], env=env, check=True, capture_output=True)
    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    shutil.copy(os.path.join(HERE, "broker-load-agent.py"), os.path.join(wt, "agent.py"))
    sess = subprocess.Popen(
        [tyba, "run", "--here", "--autonomy", "high", "--", "python3", "agent.py",
         str(AGENTS), str(ASKS), "0", "go", "end"],
        cwd=wt, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    lines = []

    def collect():
        for l in sess.stdout:
            if l.startswith(b"{"):
                lines.append(l.decode())
    out_t = threading.Thread(target=collect, daemon=True)
    out_t.start()
    sockdir = os.path.join(rt, "tyba")
    sock = wait_for(
        lambda: next((os.path.join(sockdir, f) for f in (os.listdir(sockdir) if os.path.isdir(sockdir) else [])
                      if f.endswith(".sock")), None),
        "a session socket",
    )
    person = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    wait_for(lambda: person.connect_ex(sock) == 0, "a connection to the session")
    pf = person.makefile("rb")

    def req(obj):
        person.sendall((json.dumps(obj) + "\n").encode())
        return json.loads(pf.readline())

    # The agents are connected and waiting for `go`: the supervisor at rest.
    time.sleep(1.0)
    before = status(sess.pid)

    watchers, seen = [], []
    for _ in range(WATCHERS):
        w = subprocess.Popen([tyba, "inbox", "--watch", "--json"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        got = {"first": {}, "last": None}

        def read(w=w, got=got):
            for line in w.stdout:
                now = time.time_ns()
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                acts = [p["action"] for s in v for p in s.get("pending", [])]
                for a in acts:
                    got["first"].setdefault(a, now)
                got["last"] = acts
        threading.Thread(target=read, daemon=True).start()
        watchers.append(w)
        seen.append(got)
    wait_for(lambda: all(g["last"] is not None for g in seen), "every watcher's first listing")

    peak = dict(before)
    sampling = True

    def sample():
        while sampling:
            s = status(sess.pid)
            for k, v in s.items():
                peak[k] = max(peak.get(k, 0), v)
            time.sleep(0.002)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    listed, answered = {}, {}
    open(os.path.join(wt, "go"), "w").close()
    while len(answered) < AGENTS * ASKS:
        r = req({"op": "list"})
        now = time.time_ns()
        for p in r.get("pending", []):
            a = p["action"].split(" (")[0]
            if a in answered:
                continue
            listed.setdefault(a, now)
            t = time.time_ns()
            ok = req({"op": "answer", "id": p["id"], "answer": "once"})
            if not ok.get("ok"):
                raise SystemExit("bench: answer refused: %s" % ok)
            answered[a] = t
        if sess.poll() is not None:
            break
    wait_for(lambda: len(lines) >= AGENTS * ASKS or sess.poll() is not None, "every answer delivered")
    sampling = False
    sampler.join()
    # Watchers see the empty inbox before they are stopped.
    wait_for(lambda: all(g["last"] == [] for g in seen), "every watcher's empty inbox", 10)
    time.sleep(0.5)
    after = status(sess.pid)
    open(os.path.join(wt, "end"), "w").close()
    sess.wait(timeout=120)
    out_t.join()
    err = sess.stderr.read()
    for w in watchers:
        w.kill()
        w.wait()
    person.close()

    recs = [json.loads(l) for l in lines]
    bad = [r for r in recs if r.get("error") or r.get("answer") != "once"]
    if len(recs) != AGENTS * ASKS or bad or sess.returncode != 0:
        raise SystemExit("bench: %d answers of %d, bad %s, exit %s: %s" % (
            len(recs), AGENTS * ASKS, bad[:3], sess.returncode, err.decode()[-2000:]))
    res = {"to_listed": [], "to_delivered": [], "answer_to_delivered": [], "to_watcher": []}
    for r in recs:
        a = r["action"]
        res["to_listed"].append((listed[a] - r["sent_ns"]) / 1e6)
        res["to_delivered"].append((r["replied_ns"] - r["sent_ns"]) / 1e6)
        res["answer_to_delivered"].append((r["replied_ns"] - answered[a]) / 1e6)
        for g in seen:
            if a in g["first"]:
                res["to_watcher"].append((g["first"][a] - r["sent_ns"]) / 1e6)
    res["before"], res["peak"], res["after"] = before, peak, after
    return res


def main():
    args = sys.argv[1:]
    rounds = 3
    if args[:1] == ["--rounds"]:
        rounds, args = int(args[1]), args[2:]
    bins = [a.split("=", 1) for a in args]
    if not bins or any(len(b) != 2 for b in bins):
        raise SystemExit(__doc__)
    acc = {name: [] for name, _ in bins}
    for i in range(rounds):
        for name, path in bins:
            acc[name].append(run_round(path))
            print("round %d %s done" % (i + 1, name), file=sys.stderr)
    print("load average: %s" % open("/proc/loadavg").read().strip())
    summary = {}
    for name, rs in acc.items():
        s = {}
        for k in ("to_listed", "to_delivered", "answer_to_delivered", "to_watcher"):
            xs = [x for r in rs for x in r[k]]
            s[k] = {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99)}
        s["rss_before_kib"] = statistics.median(r["before"].get("VmRSS", 0) for r in rs)
        s["rss_peak_kib"] = statistics.median(r["peak"].get("VmRSS", 0) for r in rs)
        s["threads_before"] = statistics.median(r["before"].get("Threads", 0) for r in rs)
        s["threads_peak"] = statistics.median(r["peak"].get("Threads", 0) for r in rs)
        s["rss_after_kib"] = statistics.median(r["after"].get("VmRSS", 0) for r in rs)
        s["threads_after"] = statistics.median(r["after"].get("Threads", 0) for r in rs)
        s["hwm_after_kib"] = statistics.median(r["after"].get("VmHWM", 0) for r in rs)
        summary[name] = s
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
