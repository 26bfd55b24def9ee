#!/usr/bin/env python3
"""Hit latency while a template change re-renders every page, against a quiet run.

Starts `quire serve` on a copy of the vault (server on CPU 0, wrk on CPU 1), lets the
prefill task store every public page, then runs wrk over every URL the sitemap lists,
twice per round: once quiet, once with the layout template rewritten RESTYLE_AT
seconds in (every page gets a new version; the watcher republishes and the prefill
task renders every page again while wrk runs). Rounds alternate which run goes first.
wrk's Lua counts answers by `Cache-Status` (hit, hit from the previous version, other)
and reports latency percentiles from its own histogram.

  scripts/restyle-figures.py QUIRE_BINARY [--vault DIR] [--rounds 3] [--seconds 10]
                             [--grace 120]

`--grace 0` runs the same with `template_grace_secs = 0` (no previous versions: every
page misses until it is rendered again). Prints one JSON object at the end.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOKEN = "restyle-figures-admin-token-0123456789"
RESTYLE_AT = 2.0

LUA = r"""
local urls = {}
for line in io.lines(os.getenv("URLS")) do urls[#urls + 1] = line end
local threads = {}
function setup(thread) table.insert(threads, thread) end
local i = 0
hit, prev, other = 0, 0, 0
function init(args) i = math.random(#urls) end
function request()
  i = i % #urls + 1
  return wrk.format("GET", urls[i])
end
function response(status, headers, body)
  local cs = headers["cache-status"] or headers["Cache-Status"] or ""
  if cs:find("previous%-version") then prev = prev + 1
  elseif cs:find("; hit") then hit = hit + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local h, p, o = 0, 0, 0
  for _, t in ipairs(threads) do
    h = h + t:get("hit"); p = p + t:get("prev"); o = o + t:get("other")
  end
  io.write(string.format(
    "JSON {\"requests\": %d, \"seconds\": %.3f, \"hit\": %d, \"previous\": %d, \"other\": %d, " ..
    "\"p50_us\": %d, \"p90_us\": %d, \"p99_us\": %d, \"p999_us\": %d, \"max_us\": %d}\n",
    summary.requests, summary.duration / 1e6, h, p, o,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max))
end
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(base, path, headers=None):
    req = urllib.request.Request(base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode("utf-8", "replace")


def metric(base, name):
    _, _, text = get(base, "/_quire/metrics", {"Authorization": f"Bearer {TOKEN}"})
    total = 0
    for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\d+)$", text, re.M):
        total += int(m.group(1))
    return total


def settle(base):
    """Waits until the prefill task has taken nothing new for 2 s."""
    last, since = None, time.time()
    while True:
        n = metric(base, "quire_prefills_total")
        if n != last:
            last, since = n, time.time()
        elif time.time() - since > 2.0:
            return n
        time.sleep(0.1)


def wrk(base, urls_file, lua, seconds):
    env = dict(os.environ, URLS=urls_file)
    out = subprocess.run(
        ["taskset", "-c", "1", "wrk", "-t2", "-c16", f"-d{seconds}s", "-s", lua, base],
        env=env, capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("JSON "))
    return json.loads(line[5:])


def restyle(vault, marker):
    src = os.path.join(os.path.dirname(__file__), "..", "crates", "quire-site", "templates",
                       "layout.html")
    text = open(src, encoding="utf-8").read().replace("</body>", f"<i>{marker}</i></body>", 1)
    d = os.path.join(vault, ".quire", "templates")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "layout.html.tmp"), "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(os.path.join(d, "layout.html.tmp"), os.path.join(d, "layout.html"))


def restyled_run(base, vault, urls_file, lua, seconds, n):
    renders0 = metric(base, "quire_site_renders_total")
    t = threading.Timer(RESTYLE_AT, restyle, (vault, f"restyle-figures-{n}"))
    t.start()
    r = wrk(base, urls_file, lua, seconds)
    t.join()
    settle(base)
    r["renders"] = metric(base, "quire_site_renders_total") - renders0
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--vault", default="examples/vault")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--grace", type=int, default=120)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="restyle-figures-")
    vault = os.path.join(scratch, "vault")
    shutil.copytree(a.vault, vault, ignore=shutil.ignore_patterns("*.db*", "sessions"))
    site = os.path.join(vault, ".quire", "site.toml")
    text = open(site, encoding="utf-8").read()
    with open(site, "w", encoding="utf-8") as f:
        f.write(f"template_grace_secs = {a.grace}\n{text}")
    lua = os.path.join(scratch, "restyle.lua")
    open(lua, "w").write(LUA)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN)
    proc = subprocess.Popen(
        ["taskset", "-c", "0", a.quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
         "--workers", "1", "--cache", os.path.join(scratch, "cache.vol")],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(scratch, "log"), "w"))
    try:
        t0 = time.time()
        while True:
            try:
                get(base, "/_quire/health")
                break
            except OSError:
                if proc.poll() is not None or time.time() - t0 > 120:
                    sys.exit("quire did not start")
                time.sleep(0.05)
        get(base, "/")
        settle(base)
        _, _, sitemap = get(base, "/sitemap.xml")
        urls = re.findall(r"<loc>https?://[^/]+(/[^<]*)</loc>", sitemap)
        urls_file = os.path.join(scratch, "urls")
        open(urls_file, "w").write("\n".join(urls) + "\n")
        wrk(base, urls_file, lua, 2)  # warm every URL's connections and pages
        rounds = []
        for n in range(a.rounds):
            pair = {}
            for kind in (("quiet", "restyled") if n % 2 == 0 else ("restyled", "quiet")):
                if kind == "quiet":
                    pair[kind] = wrk(base, urls_file, lua, a.seconds)
                else:
                    pair[kind] = restyled_run(base, vault, urls_file, lua, a.seconds, n)
            pair["p99_ratio"] = round(pair["restyled"]["p99_us"] / pair["quiet"]["p99_us"], 2)
            rounds.append(pair)
            print(json.dumps(pair), file=sys.stderr)
        out = {
            "vault": a.vault, "urls": len(urls), "grace_s": a.grace, "seconds": a.seconds,
            "restyle_at_s": RESTYLE_AT, "rounds": rounds,
            "median_p99_ratio": statistics.median(r["p99_ratio"] for r in rounds),
        }
        print(json.dumps(out, indent=1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
