#!/usr/bin/env python3
"""Failover of `quire proxy` between two origins, measured from the client side.

Starts two origins (this script in `origin` mode, one process each), `quire proxy`
in front of both (`[[origins]]`, active health checks every second), and a closed
loop of client threads asking for uncacheable pages (every request reaches an
origin). Then, on a timeline:

  t=4s   origin A is killed (SIGKILL): connections refused, open ones reset
  t=8s   origin A starts again on the same port
  t=12s  origin B hangs (SIGSTOP): connections accepted, nothing answered
  t=18s  origin B resumes (SIGCONT)
  t=22s  end

For each phase it prints the requests, the failed ones (not a 200), the slow ones
(> 1 s), the slowest,
the time from the event to the last failed or slow (> 1 s) request, and how the
requests split between A and B.

Usage: scripts/failover.py [--quire target/release/quire] [--clients 8]
"""
import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler

from loopback import QuietServer, free_port, wait_port

EVENTS = [
    (4.0, "kill -9 A"),
    (8.0, "restart A"),
    (12.0, "SIGSTOP B"),
    (18.0, "SIGCONT B"),
]
END = 22.0
SLOW = 1.0


def serve_origin(port, name):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            body = b"ok" if self.path == "/healthz" else (b"page from " + name.encode())
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Origin", name)
            self.end_headers()
            self.wfile.write(body)


    QuietServer(("127.0.0.1", port), H).serve_forever()






def start_origin(port, name):
    p = subprocess.Popen([sys.executable, __file__, "origin", str(port), name])
    wait_port(port)
    return p


def config(dir, listen, a, b):
    path = os.path.join(dir, "quire.toml")
    entry = """
[[origins]]
url = "http://127.0.0.1:{port}"
health_path = "/healthz"
health_interval = "1s"
health_timeout = "500ms"
"""
    with open(path, "w") as f:
        f.write(f'listen = "127.0.0.1:{listen}"\n')
        f.write("[cache]\n")
        f.write(f'path = "{dir}/cache.vol"\nsize = "64 MiB"\n')
        f.write('[limits]\norigin_read_timeout = "3s"\norigin_connect_timeout = "1s"\n')
        f.write(entry.format(port=a))
        f.write(entry.format(port=b))
    return path


def client(port, start, stop, out, idx):
    conn = None
    n = 0
    while not stop.is_set():
        n += 1
        t0 = time.time()
        status, who = 0, "-"
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", f"/p/{idx}/{n}")
            r = conn.getresponse()
            r.read()
            status, who = r.status, r.getheader("X-Origin") or "-"
        except (OSError, http.client.HTTPException):
            conn = None
        t1 = time.time()
        out.append((t0 - start, t1 - t0, status, who))


def phases():
    marks = [(0.0, "start")] + EVENTS
    for i, (t, name) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else END
        yield name, t, end


def report(results):
    print(f"{'phase':<11} {'requests':>8} {'failed':>6} {'slow':>4} {'slowest':>8} "
          f"{'last bad':>8}  split A/B")
    for name, t, end in phases():
        rows = [r for r in results if t <= r[0] < end]
        failed = [r for r in rows if r[2] != 200]
        bad = [r for r in rows if r[2] != 200 or r[1] > SLOW]
        last = max((r[0] + r[1] - t for r in bad), default=0.0)
        slowest = max((r[1] for r in rows), default=0.0)
        a = sum(1 for r in rows if r[3] == "A")
        b = sum(1 for r in rows if r[3] == "B")
        slow = sum(1 for r in rows if r[1] > SLOW)
        print(f"{name:<11} {len(rows):>8} {len(failed):>6} {slow:>4} {slowest:>7.3f}s "
              f"{last:>7.3f}s  {a}/{b}")


def run(args):
    ports = {"A": free_port(), "B": free_port()}
    listen = free_port()
    origins = {k: start_origin(p, k) for k, p in ports.items()}
    with tempfile.TemporaryDirectory() as dir:
        cfg = config(dir, listen, ports["A"], ports["B"])
        quire = subprocess.Popen([args.quire, "proxy", "--config", cfg],
                                 stderr=open(os.path.join(dir, "quire.log"), "w"))
        try:
            wait_port(listen)
            results = load(args.clients, listen, origins, ports)
        finally:
            quire.terminate()
            quire.wait()
            for p in origins.values():
                p.send_signal(signal.SIGCONT)
                p.kill()
    report(results)


def load(clients, listen, origins, ports):
    results, stop = [], threading.Event()
    start = time.time()
    threads = [threading.Thread(target=client, args=(listen, start, stop, results, i))
               for i in range(clients)]
    for t in threads:
        t.start()
    for at, name in EVENTS:
        time.sleep(max(0.0, start + at - time.time()))
        if name == "kill -9 A":
            origins["A"].kill()
            origins["A"].wait()
        elif name == "restart A":
            origins["A"] = start_origin(ports["A"], "A")
        elif name == "SIGSTOP B":
            origins["B"].send_signal(signal.SIGSTOP)
        elif name == "SIGCONT B":
            origins["B"].send_signal(signal.SIGCONT)
    time.sleep(max(0.0, start + END - time.time()))
    stop.set()
    for t in threads:
        t.join()
    return results


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "origin":
        serve_origin(int(sys.argv[2]), sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quire", default="target/release/quire")
    ap.add_argument("--clients", type=int, default=8)
    run(ap.parse_args())


if __name__ == "__main__":
    main()
