#!/usr/bin/env python3
"""Hits when the cache is bigger than memory: hot hits beside cold ones, with and
without a memory limit.

A volume of VOLUME bytes holds OBJECTS objects of SIZE bytes (incompressible, so
stored once, identity), more than the memory the process may use under the limit.
Two wrk processes then run at once on CPU 1 while quire runs on CPU 0:

  - hot:  a handful of objects asked for over and over (always resident): their
          latency is what a reader of a popular page sees while others read cold
          ones;
  - zipf: every object, drawn from a Zipf distribution: most reads hit the head,
          the tail's reads find their pages gone from memory and fault them in.

Modes (`--modes`, run in order, each on a fresh volume):
  free   quire unconstrained (the volume resident in the page cache after the fill);
  never  inside a cgroup-v1 memory limit of LIMIT (the volume's pages charged to
         quire, so only about LIMIT of them stay resident), `[cache] residency =
         "never"`: a cold read faults on the worker that asked;
  auto   the same limit, `residency = "auto"` (the default): under pressure a cold
         entry is read in on the blocking pool;
  always the same limit, `residency = "always"`: every hit checks;
  nginx  nginx `proxy_cache` inside the same limit, one worker pinned like quire,
         its cache a tree of files (read through the page cache, which the limit
         charges to it, so it holds about as much of the volume resident as quire);
  nginx-free  nginx unconstrained.
Prints one JSON object at the end.

  scripts/cold-cache.py QUIRE_BINARY [--objects 49152] [--size 65536]
                        [--volume 4GiB] [--limit 1GiB] [--seconds 20]
                        [--modes free,never,auto,nginx]

Needs root (the memory cgroup), wrk and taskset (and nginx for its modes). The
scratch folder (the volume file, nginx's cache) is removed at the end.
"""

import argparse
import http.client
import http.server
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import nginx_peer

CGROUP = "/sys/fs/cgroup/memory/quire-cold"
TOKEN = "cold-cache-admin-token-0123456789abcdef"

LUA = r"""
local urls = {}
for line in io.lines(os.getenv("URLS")) do urls[#urls + 1] = line end
local i = 0
function init(args) i = math.random(#urls) end
function request()
  i = i % #urls + 1
  return wrk.format("GET", urls[i])
end
function done(summary, latency, requests)
  io.write(string.format(
    "JSON {\"requests\": %d, \"seconds\": %.3f, \"errors\": %d, " ..
    "\"p50_us\": %d, \"p99_us\": %d, \"p999_us\": %d, \"max_us\": %d}\n",
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.status + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
"""


def size_of(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[: -len(u)]) * m)
    return int(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def origin(port, size):
    """Serves /o/N: SIZE bytes derived from N, fresh for a day."""

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            n = int(self.path.rsplit("/", 1)[-1])
            body = random.Random(n).randbytes(size)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Cache-Control", "public, max-age=86400")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def was_hit(r):
    """quire's `Cache-Status` or the `X-Cache` the nginx config adds."""
    return "hit" in (r.getheader("Cache-Status") or "") or r.getheader("X-Cache") == "HIT"


def fill(port, objects, workers=8):
    """Asks for every object twice (the second time it is a hit if it was stored);
    returns how many second asks were hits."""
    hits = [0]
    lock = threading.Lock()

    def run(part):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for n in part:
            for _ in range(2):
                c.request("GET", f"/o/{n}")
                r = c.getresponse()
                r.read()
            if was_hit(r):
                with lock:
                    hits[0] += 1
        c.close()

    parts = [range(w, objects, workers) for w in range(workers)]
    ts = [threading.Thread(target=run, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return hits[0]


def zipf_list(objects, count, s, seed=7):
    rnd = random.Random(seed)
    weights = [1.0 / (k ** s) for k in range(1, objects + 1)]
    # Rank k is object k-1 shuffled, so the head is spread over the volume.
    order = list(range(objects))
    rnd.shuffle(order)
    picks = rnd.choices(range(objects), weights=weights, k=count)
    return [f"/o/{order[k]}" for k in picks]


def wrk(base, urls_file, lua, seconds, conns):
    env = dict(os.environ, URLS=urls_file)
    return subprocess.Popen(
        ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s",
         "-s", lua, base],
        env=env, stdout=subprocess.PIPE, text=True)


def result(p):
    out = p.communicate()[0]
    line = next(l for l in out.splitlines() if l.startswith("JSON "))
    return json.loads(line[5:])


def metric(base, name):
    """A counter from quire's metrics (0 when absent)."""
    import re
    import urllib.request
    try:
        req = urllib.request.Request(base + "/_quire/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(rf"^{name} (\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def cgroup(limit):
    os.makedirs(CGROUP, exist_ok=True)
    with open(os.path.join(CGROUP, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))


def cgroup_usage():
    """Bytes the memory cgroup charges now (process memory plus its page cache)."""
    try:
        with open(os.path.join(CGROUP, "memory.usage_in_bytes")) as f:
            return int(f.read())
    except OSError:
        return None


def resident(path):
    """Bytes of `path` resident in the page cache (fincore, from util-linux)."""
    try:
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], capture_output=True,
                             text=True, check=True).stdout.split()
        return int(out[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None




def server_cmd(a, mode, scratch, port, origin_port):
    """The command that starts the server under test, on CPU 0."""
    if mode.startswith("nginx"):
        shutil.rmtree(os.path.join(scratch, "ncache"), ignore_errors=True)
        return nginx_peer.command(scratch, port, origin_port,
                                  f"{size_of(a.volume) // (1 << 20)}m",
                                  ["proxy_cache_valid 200 1d;"])
    vol = os.path.join(scratch, "cold.vol")
    if os.path.exists(vol):
        os.remove(vol)
    config = os.path.join(scratch, f"{mode}.toml")
    with open(config, "w") as f:
        f.write(f'[cache]\nresidency = "{"auto" if mode == "free" else mode}"\n')
    return ["taskset", "-c", "0", a.quire, "proxy", "--origin", f"http://127.0.0.1:{origin_port}",
            "--listen", f"127.0.0.1:{port}", "--cache", vol, "--cache-size", a.volume,
            "--workers", "1", "--config", config]


def run_one(a, mode, scratch, lua, hot_file, zipf_file):
    limited = mode not in ("free", "nginx-free")
    port, origin_port = free_port(), free_port()
    srv = origin(origin_port, a.size)
    vol = os.path.join(scratch, "cold.vol")
    cmd = server_cmd(a, mode, scratch, port, origin_port)
    if limited:
        cgroup(size_of(a.limit))
        cmd = ["sh", "-c", f'echo $$ > {CGROUP}/cgroup.procs && exec "$@"', "sh"] + cmd
    log = open(os.path.join(scratch, f"log-{mode}"), "w")
    env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        t0 = time.time()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() - t0 > 60:
                    sys.exit("quire did not start")
                time.sleep(0.05)
        t0 = time.time()
        stored = fill(port, a.objects)
        fill_s = time.time() - t0
        srv.shutdown()
        base = f"http://127.0.0.1:{port}"
        hot = wrk(base, hot_file, lua, a.seconds, 4)
        zipf = wrk(base, zipf_file, lua, a.seconds, 16)
        hot, zipf = result(hot), result(zipf)
        quire = not mode.startswith("nginx")
        out = {"mode": mode, "cold_reads": metric(base, "quire_cold_reads_total") if quire else None,
               "fill_s": round(fill_s, 1), "stored_of": [stored, a.objects],
               "hot": hot, "zipf": zipf, "resident_bytes": resident(vol) if quire else None,
               "cgroup_bytes": cgroup_usage() if limited else None}
        print(json.dumps(out), file=sys.stderr)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--objects", type=int, default=49152)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--volume", default="4GiB")
    ap.add_argument("--limit", default="1GiB")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--zipf", type=float, default=0.9)
    ap.add_argument("--hot", type=int, default=64)
    ap.add_argument("--modes", default="free,never,auto")
    ap.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--keep-logs", default=None, help="copy quire's logs here")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="cold-cache-", dir=a.dir)
    lua = os.path.join(scratch, "cold.lua")
    open(lua, "w").write(LUA)
    zipf = zipf_list(a.objects, 500_000, a.zipf)
    hot = [f"/o/{u.rsplit('/', 1)[1]}" for u in dict.fromkeys(zipf)][: a.hot]
    hot_file, zipf_file = os.path.join(scratch, "hot"), os.path.join(scratch, "zipf")
    open(hot_file, "w").write("\n".join(hot) + "\n")
    open(zipf_file, "w").write("\n".join(zipf) + "\n")
    try:
        runs = {m: run_one(a, m, scratch, lua, hot_file, zipf_file) for m in a.modes.split(",")}
        out = {
            "objects": a.objects, "size": a.size, "volume": a.volume, "limit": a.limit,
            "zipf_s": a.zipf, "seconds": a.seconds, "runs": runs,
        }
        for m, r in runs.items():
            # Each limited run against the same server unconstrained, when that ran.
            free = runs.get("nginx-free" if m.startswith("nginx") else "free")
            if free is None or r is free:
                continue
            out[f"{m}_hot_p99_over_free"] = round(r["hot"]["p99_us"] / free["hot"]["p99_us"], 2)
            out[f"{m}_zipf_rate_over_free"] = round(
                (r["zipf"]["requests"] / r["zipf"]["seconds"])
                / (free["zipf"]["requests"] / free["zipf"]["seconds"]), 2)
        print(json.dumps(out, indent=1))
    finally:
        if a.keep_logs:
            os.makedirs(a.keep_logs, exist_ok=True)
            for f in os.listdir(scratch):
                if f.startswith("log-"):
                    shutil.copy(os.path.join(scratch, f), a.keep_logs)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
