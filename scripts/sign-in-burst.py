#!/usr/bin/env python3
"""400 concurrent wrong sign-ins from 8 loopback addresses against `quire serve`;
prints RSS before, peak (VmHWM) and after (5 s and 30 s after the burst), statuses."""
import socket, sys, threading, time, collections
pid, port = int(sys.argv[1]), int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 400
spray = len(sys.argv) > 4 and sys.argv[4] == "spray"
def rss(key="VmRSS"):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(key): return int(l.split()[1]) // 1024
statuses = collections.Counter()
lock = threading.Lock()
go = threading.Event()
def one(i):
    body = (b"name=user%d&password=wrong&next=/" % i) if spray else (b"name=admin&password=wrong%d&next=/" % i)
    req = (b"POST /login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
    s = socket.socket(); s.settimeout(120)
    s.bind((f"127.0.0.{2 + i % 8}", 0))
    go.wait()
    try:
        s.connect(("127.0.0.1", port)); s.sendall(req)
        data = b""
        while True:
            d = s.recv(65536)
            if not d: break
            data += d
        st = data.split(b" ", 2)[1].decode() if data else "closed"
    except Exception as e:
        st = type(e).__name__
    with lock: statuses[st] += 1
print("rss_before_mb", rss())
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts: t.start()
t0 = time.time(); go.set()
for t in ts: t.join()
print("burst_secs %.1f" % (time.time() - t0))
print("statuses", dict(statuses))
print("peak_rss_mb", rss("VmHWM"))
time.sleep(5); print("rss_after_5s_mb", rss())
time.sleep(25); print("rss_after_30s_mb", rss())
