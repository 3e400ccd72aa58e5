#!/usr/bin/env python3
"""Shutdown under load: are the requests sent before SIGTERM all answered?

Starts `oka serve --demo` (release build) on loopback, runs 64 keep-alive clients that
send 10,000-key requests, sends SIGTERM after 5 s, and reports the requests written
before the signal and after it (during the drain delay), how many of each were
answered, and the server's exit status. A request counts as written before the signal
only if it was written whole before it (the signal is sent under the clients' lock).

    python3 benches/load/drain.py [--oka target/release/oka] [--delay 3]

Bounded: clients stop when the server stops accepting, and after 40 s in any case.
"""
import argparse, json, os, signal, socket, subprocess, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--oka", default="target/release/oka")
p.add_argument("--delay", type=int, default=3)
p.add_argument("--clients", type=int, default=64)
p.add_argument("--keys", type=int, default=10000)
a = p.parse_args()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port

port, admin = free_port(), free_port()
server = subprocess.Popen([a.oka, "serve", "--demo", "--listen", f"127.0.0.1:{port}",
                           "--admin-listen", f"127.0.0.1:{admin}", "--max-keys", str(a.keys),
                           "--shutdown-delay-s", str(a.delay)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
    except OSError:
        time.sleep(0.1)

keys = [{"id": f"test-id-{i}"} for i in range(a.keys)]
body = json.dumps({"target_features": ["simple_feature"], "keys": keys}).encode()
req = (b"POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
       b"content-length: %d\r\n\r\n" % len(body)) + body
lock = threading.Lock()
signalled = False
stats = dict.fromkeys(["before", "answered_before", "after", "answered_after", "non200"], 0)
stats_lock = threading.Lock()

def read_answer(f):
    line = f.readline()
    if not line:
        return None
    status, length, close = int(line.split()[1]), 0, False
    while (h := f.readline()) not in (b"\r\n", b""):
        k, _, v = h.decode().partition(":")
        length = int(v) if k.lower() == "content-length" else length
        close = close or (k.lower() == "connection" and "close" in v.lower())
    f.read(length)
    return status, close

def client():
    deadline = time.time() + 40
    while time.time() < deadline:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            return  # the listener is closed
        f = s.makefile("rb")
        while True:
            with lock:
                before = not signalled
                try:
                    s.sendall(req)
                except OSError:
                    break
            try:
                answer = read_answer(f)
            except OSError:
                answer = None
            with stats_lock:
                stats["before" if before else "after"] += 1
                if answer is not None:
                    stats["answered_before" if before else "answered_after"] += 1
                    stats["non200"] += answer[0] != 200
            if answer is None or answer[1]:
                break
        s.close()

threads = [threading.Thread(target=client) for _ in range(a.clients)]
for t in threads:
    t.start()
time.sleep(5)
with lock:
    signalled = True
    t0 = time.time()
    server.send_signal(signal.SIGTERM)
for t in threads:
    t.join()
code = server.wait(60)
stats.update(exit_status=code, clients_done_s=round(time.time() - t0, 1))
print(json.dumps(stats))
ok = code == 0 and stats["answered_before"] == stats["before"] and stats["non200"] == 0
if not ok:
    print(server.stderr.read()[-3000:], file=sys.stderr)
sys.exit(0 if ok else 1)
