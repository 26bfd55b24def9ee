#!/usr/bin/env python3
"""A crowd of addresses asking for uncached pages, against a reader: what the
budget for uncached work (`[budget]`) keeps for the reader, and what the upstream is
asked to do.

Starts quire (CPU 0, one worker) and runs, from CPU 1:
  - a reader (127.200.0.1), from WARMUP_S after the crowd starts: a hit every 20 ms
    (a page stored before the run) and a new uncached page 500 ms after the last
    one was answered; its hit and miss latencies and errors are kept;
  - a crowd of ADDRESSES source addresses, each on one keep-alive connection, asking
    as fast as they are answered for URLs nobody asked before. `--spread nets` puts
    each address in its own /24 (127.A.B.1: the budget's worst case, one turn per
    address), `--spread few` packs them into /24s of 250 (127.1.N.A).

Modes:
  serve  `quire serve` on a copy of the vault; the crowd asks for searches of new
         words and for paths that do not exist (a 404 render each);
  proxy  `quire proxy` in front of an origin (here, threads) that takes RENDER_MS per
         request, counting what it is asked and how many at once.

Each mode runs three times: the reader alone (quiet), the reader with the crowd and
the default budget, and the reader with the crowd and the budget opened wide
(`slots = 100000`, as if there were none). Prints one JSON object at the end.

  scripts/crowd-figures.py QUIRE_BINARY [--mode serve|proxy] [--addresses 2000]
                           [--spread nets|few] [--seconds 20] [--vault DIR]
                           [--slots N] [--busy-max F] [--config TOML] [--runs quiet,crowd]
                           [--reader-process]

The reader shares CPU 1's event loop with the crowd, so its latencies include the
client's own scheduling: compare builds in alternating runs, not against a figure.
`--reader-process` runs it in a process of its own on the same CPU instead.

Needs taskset.
"""

import argparse
import asyncio
import http.server
import json
import os
import random
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

TOKEN = "crowd-figures-admin-token-0123456789"
RENDER_MS = 20
READER = "127.200.0.1"
WARMUP_S = 4.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(base):
    req = urllib.request.Request(base + "/_quire/metrics",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r'^(quire_budget_\w+)(\{[^}]*\})? ([0-9.e+-]+)$', text, re.M):
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


class Origin:
    """Threads answering every path after RENDER_MS, cacheable, counting requests
    and the most at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0
        self.now = 0
        self.most = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with outer.lock:
                    outer.count += 1
                    outer.now += 1
                    outer.most = max(outer.most, outer.now)
                time.sleep(RENDER_MS / 1000)
                with outer.lock:
                    outer.now -= 1
                body = b"<html><body>" + b"page " * 400 + b"</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Cache-Control", "public, max-age=3600")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.port = free_port()
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def take(self):
        with self.lock:
            c, m = self.count, self.most
            self.count, self.most = 0, self.now
        return c, m


async def request(reader, writer, path):
    """One keep-alive GET; (status, seconds)."""
    t0 = time.perf_counter()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    if m:
        await reader.readexactly(int(m.group(1)))
    return status, time.perf_counter() - t0


async def connect(port, source):
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0), limit=1 << 20)


def crowd_addresses(n, spread):
    if spread == "nets":
        return [f"127.{1 + i // 250}.{i % 250}.1" for i in range(n)]
    return [f"127.1.{i // 250}.{1 + i % 250}" for i in range(n)]


async def crowd_member(port, source, mode, stop, counts):
    rnd = random.Random(source)
    try:
        r, w = await connect(port, source)
    except OSError:
        counts["connect_errors"] = counts.get("connect_errors", 0) + 1
        return
    while not stop.is_set():
        word = "%016x" % rnd.getrandbits(64)
        if mode == "serve":
            path = f"/search?q={word}" if rnd.random() < 0.5 else f"/no-such-page-{word}"
        else:
            path = f"/crowd/{word}"
        try:
            status, _ = await request(r, w, path)
        except (OSError, asyncio.IncompleteReadError):
            counts["dropped"] = counts.get("dropped", 0) + 1
            try:
                r, w = await connect(port, source)
            except OSError:
                return
            continue
        counts[status] = counts.get(status, 0) + 1
    w.close()


async def reader_loop(port, mode, hit_path, stop, out):
    r, w = await connect(port, READER)
    rm, wm = await connect(port, READER)
    n = 0
    next_miss = time.perf_counter()
    while not stop.is_set():
        status, t = await request(r, w, hit_path)
        out["hits"].append(t)
        if status != 200:
            out["errors"] += 1
        if time.perf_counter() >= next_miss:
            n += 1
            path = f"/search?q=reader{n}x{random.getrandbits(32)}" if mode == "serve" else f"/reader/{n}-{random.getrandbits(32)}"
            status, t = await request(rm, wm, path)
            out["misses"].append(t)
            if status != 200:
                out["errors"] += 1
                out["miss_statuses"].append(status)
            # A reader reads before the next page: half a second after this answer,
            # not on a fixed clock that a slow answer would make it catch up on.
            next_miss = time.perf_counter() + 0.5
        await asyncio.sleep(0.02)


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p / 100))] * 1000, 2)


async def reader_alone(port, mode, hit_path, seconds):
    """The reader for `seconds`, on its own event loop (`--reader-process`)."""
    stop = asyncio.Event()
    out = {"hits": [], "misses": [], "errors": 0, "miss_statuses": []}
    reader = asyncio.create_task(reader_loop(port, mode, hit_path, stop, out))
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.wait_for(reader, 30)
    return out


async def reader_in_process(port, mode, hit_path, seconds):
    """The reader in a process of its own (same CPU), so its latencies are not the
    crowd's event loop's: the kernel wakes it when its answer arrives."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.abspath(__file__), "--reader-only",
        f"{port},{mode},{hit_path},{seconds}", stdout=asyncio.subprocess.PIPE)
    got, _ = await proc.communicate()
    return json.loads(got)


async def one_run(port, mode, hit_path, addresses, seconds, own_process=False):
    stop = asyncio.Event()
    out = {"hits": [], "misses": [], "errors": 0, "miss_statuses": []}
    counts = {}
    tasks = [asyncio.create_task(crowd_member(port, a, mode, stop, counts)) for a in addresses]
    # The reader comes once the crowd is established (every member answered at
    # least once): while a crowd arrives, all its networks are new to the budget and
    # a reader's first miss waits behind their first requests (see docs).
    await asyncio.sleep(WARMUP_S if addresses else 0)
    if own_process:
        out = await reader_in_process(port, mode, hit_path, seconds)
    else:
        reader = asyncio.create_task(reader_loop(port, mode, hit_path, stop, out))
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.wait_for(reader, 30)
    stop.set()
    if tasks:
        await asyncio.wait(tasks, timeout=30)
    return {
        "reader_hit_p50_ms": pct(out["hits"], 50),
        "reader_hit_p90_ms": pct(out["hits"], 90),
        "reader_hit_p99_ms": pct(out["hits"], 99),
        "reader_hits": len(out["hits"]),
        "reader_miss_p50_ms": pct(out["misses"], 50),
        "reader_miss_max_ms": pct(out["misses"], 100),
        "reader_misses": len(out["misses"]),
        "reader_errors": out["errors"],
        "reader_miss_statuses": out["miss_statuses"],
        "crowd_answers": {str(k): v for k, v in counts.items()},
    }


def start_quire(a, scratch, slots, origin):
    port = free_port()
    cfg = os.path.join(scratch, f"quire-{slots}.toml")
    with open(cfg, "w") as f:
        busy = f"cpu_busy_max = {a.busy_max}\n" if a.busy_max is not None else ""
        f.write(f"[budget]\nslots = {slots}\n{busy}[rate_limit]\nmisses_per_sec = 0\nhits_per_sec = 0\n")
        f.write("[limits]\nconnections_per_client = 100000\n")
        if a.config:
            f.write(a.config.replace("\\n", "\n") + "\n")
    cache = os.path.join(scratch, f"cache-{slots}.vol")
    if a.mode == "serve":
        vault = os.path.join(scratch, "vault")
        if not os.path.exists(vault):
            shutil.copytree(a.vault, vault, ignore=shutil.ignore_patterns("*.db*", "sessions"))
        cmd = [a.quire, "serve", vault]
    else:
        cmd = [a.quire, "proxy", "--origin", f"http://127.0.0.1:{origin.port}"]
    cmd = ["taskset", "-c", "0"] + cmd + ["--listen", f"127.0.0.1:{port}", "--cache", cache,
                                          "--workers", "1", "--config", cfg]
    env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(scratch, f"log-{slots}"), "w"))
    base = f"http://127.0.0.1:{port}"
    t0 = time.time()
    while True:
        try:
            metrics(base)
            break
        except OSError:
            if proc.poll() is not None or time.time() - t0 > 60:
                sys.exit("quire did not start")
            time.sleep(0.05)
    return proc, port, base


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--reader-only":
        port, mode, hit_path, seconds = sys.argv[2].split(",")
        out = asyncio.run(reader_alone(int(port), mode, hit_path, int(seconds)))
        print(json.dumps(out))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--mode", choices=["serve", "proxy"], default="proxy")
    ap.add_argument("--addresses", type=int, default=2000)
    ap.add_argument("--spread", choices=["nets", "few"], default="few")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--busy-max", type=float, default=None,
                    help="budget.cpu_busy_max (default: quire's)")
    ap.add_argument("--vault", default="examples/vault")
    ap.add_argument("--slots", type=int, default=0,
                    help="budget.slots of the crowd run (default 0: the automatic size)")
    ap.add_argument("--config", default="",
                    help="more TOML for quire's configuration (sections other than budget, "
                         "rate_limit and limits; \\n for a new line)")
    ap.add_argument("--reader-process", action="store_true",
                    help="run the reader in a process of its own (same CPU) rather than on "
                         "the crowd's event loop")
    ap.add_argument("--runs", default="quiet,crowd,crowd_no_budget",
                    help="which runs, comma-separated (quiet, crowd, crowd_no_budget)")
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    scratch = tempfile.mkdtemp(prefix="crowd-figures-")
    origin = Origin() if a.mode == "proxy" else None
    hit_path = "/" if a.mode == "serve" else "/home"
    addresses = crowd_addresses(a.addresses, a.spread)
    runs = {}
    try:
        wanted = a.runs.split(",")
        for name, slots, crowd in [("quiet", a.slots, []), ("crowd", a.slots, addresses),
                                   ("crowd_no_budget", 100000, addresses)]:
            if name not in wanted:
                continue
            proc, port, base = start_quire(a, scratch, slots, origin)
            try:
                urllib.request.urlopen(base + hit_path, timeout=30).read()
                urllib.request.urlopen(base + hit_path, timeout=30).read()
                if origin:
                    origin.take()
                before = metrics(base)
                t0 = time.time()
                r = asyncio.run(one_run(port, a.mode, hit_path, crowd, a.seconds,
                                        a.reader_process))
                took = time.time() - t0
                after = metrics(base)
                admitted = sum(v for k, v in after.items() if k.startswith("quire_budget_admitted_total")) - \
                    sum(v for k, v in before.items() if k.startswith("quire_budget_admitted_total"))
                r["budget_slots"] = after.get('quire_budget_slots{class="everyone"}',
                                              after.get("quire_budget_slots"))
                r["upstream_work_per_s"] = round(admitted / took, 1)
                r["refused"] = {k.split('"')[1]: after[k] - before.get(k, 0)
                                for k in after if k.startswith("quire_budget_refused_total")}
                if origin:
                    c, most = origin.take()
                    r["origin_requests_per_s"] = round(c / took, 1)
                    r["origin_most_at_once"] = most
                runs[name] = r
                print(json.dumps({name: r}), file=sys.stderr)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        quiet = runs.get("quiet", {})
        out = {"mode": a.mode, "addresses": a.addresses, "spread": a.spread,
               "seconds": a.seconds, "runs": runs}
        for name in ("crowd", "crowd_no_budget"):
            if quiet.get("reader_hit_p99_ms") and name in runs:
                out[f"{name}_hit_p99_over_quiet"] = round(
                    runs[name]["reader_hit_p99_ms"] / quiet["reader_hit_p99_ms"], 2)
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
