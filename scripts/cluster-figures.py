#!/usr/bin/env python3
"""Figures of a three-node quire cluster on loopback: purge propagation, origin
fetches with and without peer fill, and one node's hits/s with [cluster] on vs off.

Starts redis-server, an origin (this script in `origin` mode: every path is a small
page, max-age=3600, and /__count says how many pages it served), and three
`quire proxy` nodes sharing the stream. Then:

  1. propagation: PURGES purges on node a with wait=all, one at a time; the time
     from sending each to its answer is the time until every node had applied it
     (wait=all polls the nodes' positions every 2 ms); p50/p99/max;
  2. peer fill: URLS distinct URLs requested once on each node, with peers
     configured and then (fresh volumes) without: the origin's fetch count;
  3. hits/s: `wrk` on one cached URL of a node with [cluster] and of a plain
     node, alternated ROUNDS times (needs wrk); the ratio.

Usage: scripts/cluster-figures.py [--quire target/release/quire] [--purges 1000]
                                  [--urls 1000] [--rounds 3]
"""
import argparse
import http.client
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
from http.server import BaseHTTPRequestHandler

from loopback import QuietServer, free_port, wait_port

TOKEN = "cluster-figures-admin-token"
COUNT = [0]
LOCK = threading.Lock()


def serve_origin(port):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            if self.path == "/__count":
                body, cc = str(COUNT[0]).encode(), "no-store"
            else:
                with LOCK:
                    COUNT[0] += 1
                body, cc = (b"<p>page " + self.path.encode() + b"</p>\n") * 20, "max-age=3600"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", cc)
            self.end_headers()
            self.wfile.write(body)


    QuietServer(("127.0.0.1", port), H).serve_forever()






def request(port, method, path, body=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": "site.test"}
    if path.startswith("/_quire/"):
        headers["Authorization"] = f"Bearer {TOKEN}"
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    return r.status, data


class Cluster:
    def __init__(self, quire, work, origin_port, redis_url, peers, stream):
        self.procs = []
        self.ports = {n: free_port() for n in "abc"}
        for n, port in self.ports.items():
            cfg = os.path.join(work, f"{n}.toml")
            with open(cfg, "w") as f:
                f.write(node_config(n, port, origin_port, redis_url, work, stream,
                                    self.ports if peers else None))
            p = subprocess.Popen([quire, "proxy", "--config", cfg],
                                 stderr=open(os.path.join(work, f"{n}.log"), "w"))
            self.procs.append(p)
        for port in self.ports.values():
            wait_port(port)

    def stop(self):
        for p in self.procs:
            p.terminate()
            p.wait()


def node_config(name, port, origin_port, redis_url, work, stream, peers):
    lines = [
        f'listen = "127.0.0.1:{port}"',
        f'origin = "http://127.0.0.1:{origin_port}"',
        f'admin_token = "{TOKEN}"',
        "[cache]",
        f'path = "{work}/{stream}-{name}.vol"',
        'size = "64 MiB"',
        "[cluster]",
        f'redis = "{redis_url}"',
        f'node = "{name}"',
        f'stream = "{stream}"',
    ]
    if peers:
        lines.append("[cluster.peers]")
        lines += [f'{n} = "http://127.0.0.1:{p}"' for n, p in peers.items()]
    return "\n".join(lines) + "\n"


def propagation(cluster, purges):
    a = cluster.ports["a"]
    conn = http.client.HTTPConnection("127.0.0.1", a, timeout=30)
    times, incomplete = [], 0
    for i in range(purges):
        body = json.dumps({"urls": [f"http://site.test/p/{i}"], "wait": "all"})
        t0 = time.perf_counter()
        status, data = request(a, "POST", "/_quire/purge", body, conn)
        times.append((time.perf_counter() - t0) * 1000)
        answer = json.loads(data)
        if status != 200 or not answer.get("cluster", {}).get("all_applied"):
            incomplete += 1
    times.sort()
    return {
        "purges": purges,
        "p50_ms": round(times[len(times) // 2], 2),
        "p99_ms": round(times[int(len(times) * 0.99)], 2),
        "max_ms": round(times[-1], 2),
        "not_all_applied": incomplete,
    }


def fetches(cluster, urls, origin_port):
    before = int(request(origin_port, "GET", "/__count")[1])
    for port in cluster.ports.values():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(urls):
            status, _ = request(port, "GET", f"/f/{i}", conn=conn)
            assert status == 200, status
    return int(request(origin_port, "GET", "/__count")[1]) - before


def wrk(port, seconds=5):
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", "-H", "Host: site.test",
                          f"http://127.0.0.1:{port}/hot"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    return 0.0


def hits_ab(quire, work, origin_port, redis_url, rounds):
    plain_port = free_port()
    cfg = os.path.join(work, "plain.toml")
    with open(cfg, "w") as f:
        f.write(f'listen = "127.0.0.1:{plain_port}"\norigin = "http://127.0.0.1:{origin_port}"\n'
                f'[cache]\npath = "{work}/plain.vol"\nsize = "64 MiB"\n')
    plain = subprocess.Popen([quire, "proxy", "--config", cfg], stderr=subprocess.DEVNULL)
    wait_port(plain_port)
    on = Cluster(quire, work, origin_port, redis_url, False, "hits")
    a = on.ports["a"]
    try:
        for port in (plain_port, a):
            request(port, "GET", "/hot")
            request(port, "GET", "/hot")
        rows = []
        for _ in range(rounds):
            rows.append((wrk(plain_port), wrk(a)))
    finally:
        on.stop()
        plain.terminate()
        plain.wait()
    off = statistics.median(r[0] for r in rows)
    with_cluster = statistics.median(r[1] for r in rows)
    return {"rounds": [[round(x) for x in r] for r in rows],
            "off_median": round(off), "on_median": round(with_cluster),
            "on_over_off": round(with_cluster / off, 3)}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "origin":
        serve_origin(int(sys.argv[2]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quire", default="target/release/quire")
    ap.add_argument("--purges", type=int, default=1000)
    ap.add_argument("--urls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    origin_port, redis_port = free_port(), free_port()
    origin = subprocess.Popen([sys.executable, __file__, "origin", str(origin_port)])
    with tempfile.TemporaryDirectory() as work:
        redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                                  "--appendonly", "no", "--dir", work],
                                 stdout=subprocess.DEVNULL)
        wait_port(origin_port)
        wait_port(redis_port)
        redis_url = f"redis://127.0.0.1:{redis_port}/"
        out = {}
        try:
            c = Cluster(args.quire, work, origin_port, redis_url, True, "peers")
            time.sleep(1.5)  # heartbeats: every node live for wait=all
            out["propagation"] = propagation(c, args.purges)
            out["origin_fetches_with_peer_fill"] = fetches(c, args.urls, origin_port)
            c.stop()
            c = Cluster(args.quire, work, origin_port, redis_url, False, "nopeers")
            out["origin_fetches_without_peer_fill"] = fetches(c, args.urls, origin_port)
            c.stop()
            if shutil.which("wrk"):
                out["hits_per_sec"] = hits_ab(args.quire, work, origin_port, redis_url, args.rounds)
        finally:
            redis.terminate()
            redis.wait()
            origin.kill()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
