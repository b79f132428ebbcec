#!/usr/bin/env python3
"""Load on a session's hook socket, from inside `tyba run`: several agents asking at once.

Run as the agent of a session (`tyba run --here -- python3 broker-load-agent.py …`): forks
AGENTS processes, each opening ASKS connections to $TYBA_SESSION_SOCKET (as `tyba hook`
does, one connection per ask), and once the file GO exists in the working directory sends
every ask at once and waits for its answer. HANGUPS more connections send an ask and hang
up at once (a hook killed mid-ask). With END, the agent exits only once the file END exists too (the
driver measures the supervisor after the asks, before the session ends). One JSON line per ask on standard output:
{"action", "sent_ns", "replied_ns", "answer", "reason", "error"}, wall-clock nanoseconds
(the same clock as outside the sandbox).

usage: broker-load-agent.py AGENTS ASKS HANGUPS GO [END]
"""
import json
import os
import socket
import sys
import threading
import time


def ask_line(agent, action):
    cwd = os.getcwd()
    return (
        json.dumps(
            {
                "op": "ask",
                "agent": agent,
                "tool": "Bash",
                "action": action,
                "verdict": "yellow",
                "reasons": ["load test"],
                "rememberable": True,
                "cwd": cwd,
                "worktree": cwd,
            }
        )
        + "\n"
    ).encode()


def one(path, agent, action, out, lock, go):
    rec = {"action": action, "sent_ns": 0, "replied_ns": 0, "answer": None, "reason": None, "error": None}
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        f = c.makefile("rb")
        go.wait()
        rec["sent_ns"] = time.time_ns()
        c.sendall(ask_line(agent, action))
        line = f.readline()
        rec["replied_ns"] = time.time_ns()
        reply = json.loads(line)
        a = reply.get("answer") or {}
        rec["answer"] = a.get("answer")
        rec["reason"] = a.get("reason")
        if not reply.get("ok"):
            rec["error"] = reply.get("error")
        c.close()
    except Exception as e:  # reported, never hidden: the driver asserts on it
        rec["error"] = repr(e)
    with lock:
        out.write(json.dumps(rec) + "\n")
        out.flush()


def hang_up(path, agent, action, go):
    try:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        go.wait()
        c.sendall(ask_line(agent, action))
        time.sleep(0.2)
        c.close()
    except OSError as e:
        print(json.dumps({"action": action, "error": repr(e)}), flush=True)


def agent(n, asks, hangups, go_file):
    path = os.environ["TYBA_SESSION_SOCKET"]
    name = "load-%d" % n
    lock = threading.Lock()
    go = threading.Event()
    threads = [
        threading.Thread(target=one, args=(path, name, "touch f%d-%d" % (n, k), sys.stdout, lock, go))
        for k in range(asks)
    ]
    threads += [
        threading.Thread(target=hang_up, args=(path, name, "touch hangup%d-%d" % (n, k), go))
        for k in range(hangups)
    ]
    for t in threads:
        t.start()
    while not os.path.exists(go_file):
        time.sleep(0.002)
    go.set()
    for t in threads:
        t.join()


def main():
    agents, asks, hangups, go_file = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    kids = []
    for n in range(agents):
        pid = os.fork()
        if pid == 0:
            # The first agent carries the hang-ups.
            agent(n, asks, hangups if n == 0 else 0, go_file)
            sys.stdout.flush()
            os._exit(0)
        kids.append(pid)
    bad = 0
    for pid in kids:
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    if len(sys.argv) > 5:
        while not os.path.exists(sys.argv[5]):
            time.sleep(0.01)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
