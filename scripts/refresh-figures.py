#!/usr/bin/env python3
"""Hot objects that never go stale: refresh-ahead in `quire proxy` against nginx's
`proxy_cache_background_update`, on objects that live a few seconds.

An origin (threads) serves OBJECTS objects, each fresh for LIFETIME seconds
(`Cache-Control: max-age`), answering after ORIGIN_MS; the HOT most popular ones carry
`X-Rank: hot` (stored with them, so every answer says whether it is a hot object).
Each server runs on CPU 0 in front of it, and wrk on CPU 1 asks for objects drawn from
Zipf (s = 1) for SECONDS; the first WARM seconds are not counted. For every answer
to a hot object, wrk's Lua counts whether it was a fresh hit, or was answered stale
or from the origin (a miss, an expired entry, a revalidation waited for):

  quire  `Cache-Status: quire; hit` without `detail=stale...` is fresh; anything
         else is not. `[storage] refresh_ahead` as given (`--refresh-ahead`).
  nginx  `X-Cache: HIT` is fresh; STALE, UPDATING, EXPIRED, MISS, REVALIDATED are
         not. `proxy_cache_use_stale updating` and `proxy_cache_background_update on`
         (nginx's refresh in the background: the first request after expiry is
         answered stale while one fetch refreshes).

Prints one JSON object at the end: per server, the share of hot answers that were
not fresh hits.

  scripts/refresh-figures.py QUIRE_BINARY [--seconds 120] [--lifetime 10]
                             [--refresh-ahead 0.1] [--servers quire,nginx]

Needs wrk, taskset and nginx.
"""

import argparse
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

OBJECTS = 1000
HOT = 100
ORIGIN_MS = 5
WARM = 10

LUA = r"""
local urls = {}
for line in io.lines(os.getenv("URLS")) do urls[#urls + 1] = line end
local warm = tonumber(os.getenv("WARM"))
local threads = {}
function setup(thread) table.insert(threads, thread) end
local i = 0
local t0 = nil
fresh, other = 0, 0
function init(args) i = math.random(#urls) end
function request()
  i = i % #urls + 1
  return wrk.format("GET", urls[i])
end
function response(status, headers, body)
  if t0 == nil then t0 = os.time() end
  if os.time() - t0 < warm then return end
  if headers["x-rank"] ~= "hot" and headers["X-Rank"] ~= "hot" then return end
  local cs = headers["cache-status"] or headers["Cache-Status"] or ""
  local xc = headers["x-cache"] or headers["X-Cache"] or ""
  if xc == "HIT" or (cs:find("; hit") and not cs:find("stale")) then
    fresh = fresh + 1
  else
    other = other + 1
  end
end
function done(summary, latency, requests)
  local f, o = 0, 0
  for _, t in ipairs(threads) do f = f + t:get("fresh"); o = o + t:get("other") end
  io.write(string.format("JSON {\"requests\": %d, \"hot_fresh\": %d, \"hot_other\": %d, " ..
    "\"p99_us\": %d}\n", summary.requests, f, o, latency:percentile(99)))
end
"""



def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def origin(lifetime):
    counts = {"requests": 0}
    lock = threading.Lock()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            n = int(self.path.rsplit("/", 1)[-1])
            with lock:
                counts["requests"] += 1
            time.sleep(ORIGIN_MS / 1000)
            body = (f"object {n} " * 50).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Cache-Control", f"public, max-age={lifetime}")
            if n < HOT:
                self.send_header("X-Rank", "hot")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    port = free_port()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return port, counts


def zipf_urls(count):
    rnd = random.Random(11)
    weights = [1.0 / k for k in range(1, OBJECTS + 1)]
    # Rank k is object k-1: objects below HOT are the hot ones.
    return [f"/o/{k}" for k in rnd.choices(range(OBJECTS), weights=weights, k=count)]


def start(kind, a, scratch, origin_port):
    port = free_port()
    if kind == "nginx":
        cmd = nginx_peer.command(scratch, port, origin_port, "1g", [
            "proxy_cache_use_stale updating error timeout;",
            "proxy_cache_background_update on;",
        ])
    else:
        cfg = os.path.join(scratch, "quire.toml")
        with open(cfg, "w") as f:
            f.write(f"[storage]\nrefresh_ahead = {a.refresh_ahead}\n"
                    "[rate_limit]\nhits_per_sec = 0\nmisses_per_sec = 0\n")
        cmd = ["taskset", "-c", "0", a.quire, "proxy", "--origin",
               f"http://127.0.0.1:{origin_port}", "--listen", f"127.0.0.1:{port}",
               "--cache", os.path.join(scratch, "refresh.vol"), "--cache-size", "256MiB",
               "--workers", "1", "--config", cfg]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(scratch, f"log-{kind}"), "w"))
    t0 = time.time()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.time() - t0 > 60:
                sys.exit(f"{kind} did not start")
            time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--lifetime", type=int, default=10)
    ap.add_argument("--refresh-ahead", type=float, default=0.1)
    ap.add_argument("--servers", default="quire,nginx")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="refresh-figures-")
    lua = os.path.join(scratch, "r.lua")
    open(lua, "w").write(LUA)
    urls = os.path.join(scratch, "urls")
    open(urls, "w").write("\n".join(zipf_urls(200_000)) + "\n")
    origin_port, counts = origin(a.lifetime)
    out = {"objects": OBJECTS, "hot": HOT, "lifetime_s": a.lifetime, "seconds": a.seconds,
           "warm_s": WARM, "refresh_ahead": a.refresh_ahead, "runs": {}}
    try:
        for kind in a.servers.split(","):
            proc, port = start(kind, a, scratch, origin_port)
            try:
                before = counts["requests"]
                env = dict(os.environ, URLS=urls, WARM=str(WARM))
                w = subprocess.run(
                    ["taskset", "-c", "1", "wrk", "-t1", "-c16", f"-d{a.seconds}s", "-s", lua,
                     f"http://127.0.0.1:{port}"], env=env, capture_output=True, text=True)
                line = next(l for l in w.stdout.splitlines() if l.startswith("JSON "))
                r = json.loads(line[5:])
                hot = r["hot_fresh"] + r["hot_other"]
                r["hot_not_fresh_share"] = round(r["hot_other"] / hot, 6) if hot else None
                r["origin_requests"] = counts["requests"] - before
                out["runs"][kind] = r
                print(json.dumps({kind: r}), file=sys.stderr)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
