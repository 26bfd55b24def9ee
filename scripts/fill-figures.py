#!/usr/bin/env python3
"""Four figures of `quire proxy`'s fill path, measured against a scripted origin.

    python3 scripts/fill-figures.py --quire target/release/quire --out figures.json
        [--race-tries 1000] [--race-batch 25] [--hit-urls 200] [--only race,hit,memory,forget]

The script starts its own origin (a threaded HTTP/1.1 keep-alive server: this file run
with --serve-origin, in a subprocess so its GIL never slows the clients) and, for each
figure, a fresh `quire proxy` in front of it (a new temporary 1 GiB cache volume,
default workers, an admin token). Standard library only. It prints a table and writes
JSON. Every request has a timeout; quire and the origin die with the script.

1. Purge after fill (race). Try i uses /race/<i>/page (40 KB compressible HTML,
   max-age=600, ETag "v<k>", Surrogate-Key race-<i>, body marker VERSION=<k>, k = 0 at
   first). Per try: GET it (a miss, read to the end), wait a random 0-200 ms, publish
   (the origin's version becomes 1), then invalidate by one of six kinds, round-robin:
   PURGE (hard), PURGE with Quire-Soft-Purge: 1, POST /_quire/purge {"urls"},
   {"prefixes": [".../race/<i>/"]}, {"tags": ["race-<i>"]}, and an unsafe POST of the
   page through quire (the origin answers 200). After the purge's answer, wait 1 s and GET
   twice: every body still saying VERSION=0 is a stale hit (a purge lost to a fill that
   committed after it). purged=0 counts purges whose answer said {"purged": 0}: they
   reached quire before the fill was stored. Tries run --race-batch at a time.
2. Miss's last byte -> first hit. For --hit-urls URLs: GET (a miss), and the instant its
   last byte is read send the next GET on the same keep-alive connection; its
   Cache-Status is tallied raw. Then GETs are polled every 1 ms until one says `hit`:
   the delay (last byte of the miss -> sending the GET that hit) is summarised. For as many
   other URLs, a GET with If-None-Match: <the miss's ETag> right after the miss ends
   should get 304; statuses and Cache-Status values are tallied.
3. Memory. 48 concurrent GETs of a 6 MB compressible text/html object (max-age=600),
   each with a unique ?u=<n>, so 48 fills. quire's VmRSS, RssAnon and RssFile
   (/proc/PID/status) are sampled every 20 ms from before the burst until quire is
   idle (its CPU time in /proc/PID/stat has not grown for 2 s). Reports idle RSS, peak
   RSS, peak - idle (total and anon), and the wall time from the burst to idle.
4. Fire and forget. /endless/<n> sends a chunked head (max-age=600, text/html) then one
   byte every 500 ms forever. 300 requests for distinct /endless/<n>, each on its own
   connection closed right after the request is written; from 50 ms later, 10 clients
   ask for 100 distinct small pages /ok/<n> (2 KB, max-age=600, so each needs a fill)
   with a 5 s timeout, and the share answered 200 is reported (503s, timeouts, errors
   counted apart), with the origin's endless streams still open afterwards. Variant
   "held": the 300 connections stay open and are never read.
"""
import argparse
import concurrent.futures as cf
import ctypes
import http.client
import http.server
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import collections
from collections import Counter

HOST = "127.0.0.1"
TOKEN = "fill-figures-admin-token-0123456789"
KINDS = ["purge-hard", "purge-soft", "api-urls", "api-prefixes", "api-tags", "unsafe-post"]
VERSION_RE = re.compile(rb"VERSION=(\d+)")


# ---- the origin (runs in its own process) ---------------------------------------------

def words(n_bytes, seed):
    """Compressible but not trivial HTML text: random words from a 600-word vocabulary."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
             for _ in range(600)]
    out, size = [], 0
    while size < n_bytes:
        line = "<p>" + " ".join(rng.choices(vocab, k=14)) + ".</p>\n"
        out.append(line)
        size += len(line)
    return "".join(out).encode()[:n_bytes]


def serve_origin():
    page_text = words(40_000, 1)
    ok_text = words(2_000, 2)
    big_text = words(6_000_000, 3)
    versions, lock = {}, threading.Lock()
    state = {"stop_gen": 0, "endless_open": 0, "gets": Counter()}

    class Origin(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        log_message = lambda *args: None

        def reply(self, status, body, headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.reply(200, b"published\n", [("Content-Type", "text/plain"),
                                             ("Cache-Control", "no-store")])

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            path, q = url.path, urllib.parse.parse_qs(url.query)
            with lock:
                state["gets"][path.split("/")[1]] += 1
            if path == "/_ctl/set":
                with lock:
                    versions[q["path"][0]] = int(q["v"][0])
                return self.reply(200, b"ok")
            if path == "/_ctl/stop-endless":
                state["stop_gen"] += 1
                return self.reply(200, b"ok")
            if path == "/_ctl/stats":
                with lock:
                    body = json.dumps({"endless_open": state["endless_open"],
                                       "gets": dict(state["gets"])}).encode()
                return self.reply(200, body)
            cacheable = [("Cache-Control", "max-age=600"), ("Content-Type", "text/html")]
            if path.startswith("/endless/"):
                return self.endless(cacheable)
            if path == "/big":
                return self.reply(200, big_text, cacheable)
            if path.startswith("/ok/"):
                return self.reply(200, ok_text, cacheable)
            with lock:
                v = versions.get(path, 0)
            etag = f'"v{v}"'
            headers = cacheable + [("ETag", etag)]
            if path.startswith("/race/"):
                headers.append(("Surrogate-Key", "race-" + path.split("/")[2]))
            if self.headers.get("If-None-Match") == etag:
                return self.reply(304, b"", headers)
            head = f"<!doctype html><html><head><title>{path}</title></head><body>" \
                   f"<p>VERSION={v}</p>\n"
            self.reply(200, head.encode() + page_text + b"</body></html>\n", headers)

        def endless(self, headers):
            self.send_response(200)
            for k, v in headers + [("Transfer-Encoding", "chunked")]:
                self.send_header(k, v)
            self.end_headers()
            with lock:
                gen = state["stop_gen"]
                state["endless_open"] += 1
            try:
                while state["stop_gen"] == gen:
                    self.wfile.write(b"1\r\nx\r\n")
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                pass
            finally:
                with lock:
                    state["endless_open"] -= 1
                self.close_connection = True  # cut off mid-body: never a complete response

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    srv = Server((HOST, 0), Origin)
    print("PORT", srv.server_address[1], flush=True)
    srv.serve_forever()


# ---- processes ------------------------------------------------------------------------

def die_with_parent():
    """preexec_fn: the child gets SIGTERM when this script dies, even by SIGKILL."""
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Quire:
    """One `quire proxy` process with a fresh cache volume."""

    def __init__(self, binary, origin_port, tmp, label):
        self.port = free_port()
        self.cmd = [binary, "proxy", "--origin", f"http://{HOST}:{origin_port}",
                    "--listen", f"{HOST}:{self.port}",
                    "--cache", os.path.join(tmp, f"{label}.vol"), "--cache-size", "1GiB"]
        self.log_path = os.path.join(tmp, f"{label}.log")
        env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=die_with_parent)
        deadline = time.time() + 30
        while True:
            try:
                if get(self.port, "/_quire/health", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                sys.exit(f"quire did not start: {shlex.join(self.cmd)}\n"
                         + open(self.log_path, errors="replace").read()[-3000:])
            time.sleep(0.05)

    def cpu_ticks(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    def memory_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            rows = [line.split() for line in f]
        return {r[0][:-1]: int(r[1]) for r in rows if r[0] in ("VmRSS:", "RssAnon:", "RssFile:")}

    def wait_idle(self, quiet=2.0, limit=600.0):
        """Waits until the CPU time has not grown for `quiet` s; returns when it last grew."""
        last, last_change, start = self.cpu_ticks(), time.perf_counter(), time.perf_counter()
        while time.perf_counter() - last_change < quiet and time.perf_counter() - start < limit:
            time.sleep(0.02)
            now = self.cpu_ticks()
            if now != last:
                last, last_change = now, time.perf_counter()
        return last_change

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---- an HTTP client -------------------------------------------------------------------

class Resp(collections.namedtuple("Resp", "status headers body t_sent t_end")):
    @property
    def cache_status(self):
        return self.headers.get("cache-status", "(none)")

    def version(self):
        m = VERSION_RE.search(self.body)
        return int(m.group(1)) if m else None


def get(port, path, method="GET", headers=None, body=None, conn=None, timeout=5.0):
    """One request; `conn` keeps a connection alive across calls."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        t_sent = time.perf_counter()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        t_end = time.perf_counter()
        return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, data, t_sent, t_end)
    finally:
        if own:
            conn.close()


def is_hit(r):
    return any(part.strip() == "hit" for part in r.cache_status.split(";"))


def summary(xs):
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
    return {"n": len(xs), "min": xs[0], "median": pick(0.5), "p90": pick(0.9), "max": xs[-1]}


# ---- figure 1: purge after fill --------------------------------------------------------

def race(q, origin_port, tries, batch):
    base = f"http://{HOST}:{q.port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def one(i):
        kind, path = KINDS[i % len(KINDS)], f"/race/{i}/page"
        out = {"kind": kind, "stale": 0, "errors": []}
        try:
            out["first"] = get(q.port, path).cache_status
            out["delay_ms"] = random.uniform(0, 200)
            time.sleep(out["delay_ms"] / 1000)
            get(origin_port, f"/_ctl/set?path={urllib.parse.quote(path)}&v=1")
            api = lambda body: get(q.port, "/_quire/purge", "POST", dict(
                auth, **{"Content-Type": "application/json"}), json.dumps(body).encode())
            p = {"purge-hard": lambda: get(q.port, path, "PURGE", auth),
                 "purge-soft": lambda: get(q.port, path, "PURGE", dict(auth, **{"Quire-Soft-Purge": "1"})),
                 "api-urls": lambda: api({"urls": [base + path]}),
                 "api-prefixes": lambda: api({"prefixes": [f"{base}/race/{i}/"]}),
                 "api-tags": lambda: api({"tags": [f"race-{i}"]}),
                 "unsafe-post": lambda: get(q.port, path, "POST", {"Content-Type": "text/plain"},
                                            b"publish")}[kind]()
            if p.status != 200:
                out["errors"].append(f"purge {p.status}")
            elif kind != "unsafe-post":  # a purge that found nothing ran before the commit
                out["missed"] = json.loads(p.body).get("purged") == 0
            time.sleep(1.0)
            conn = http.client.HTTPConnection(HOST, q.port, timeout=5)
            for _ in range(2):
                r = get(q.port, path, conn=conn)
                if r.version() == 0:
                    out["stale"] += 1
                    out["stale_cs"] = r.cache_status
                elif r.version() is None:
                    out["errors"].append(f"after {r.status}")
            conn.close()
        except (OSError, http.client.HTTPException) as e:
            out["errors"].append(type(e).__name__)
        return out

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(batch) as pool:
        results = list(pool.map(one, range(tries)))
    per = {k: dict.fromkeys(["tries", "purged_0", "stale_gets", "tries_with_stale", "errors"], 0)
           for k in KINDS}
    for r in results:
        p = per[r["kind"]]
        p["tries"] += 1
        p["purged_0"] += r.get("missed", False)
        p["stale_gets"] += r["stale"]
        p["tries_with_stale"] += r["stale"] > 0
        p["errors"] += len(r["errors"])
    errors = Counter(e for r in results for e in r["errors"])
    stale = [r for r in results if r["stale"]]
    return {"tries": tries, "concurrency": batch, "seconds": round(time.perf_counter() - t0, 1),
            "per_kind": per, "first_cache_status": dict(Counter(r.get("first") for r in results)),
            "errors": dict(errors), "stale_cache_status": dict(Counter(r["stale_cs"] for r in stale)),
            "stale_delay_ms": summary([round(r["delay_ms"], 1) for r in stale]),
            "total": {k: sum(p[k] for p in per.values()) for k in per[KINDS[0]]}}


# ---- figure 2: miss's last byte -> first hit ---------------------------------------------

def miss_to_hit(q, urls):
    first_probe, polled, delays, probes_needed, never = Counter(), Counter(), [], [], 0
    for i in range(urls):
        conn = http.client.HTTPConnection(HOST, q.port, timeout=5)
        miss = get(q.port, f"/hit/{i}", conn=conn)
        probe, n = get(q.port, f"/hit/{i}", conn=conn), 1
        first_probe[probe.cache_status] += 1
        while not is_hit(probe) and time.perf_counter() - miss.t_end < 5:
            time.sleep(0.001)
            probe, n = get(q.port, f"/hit/{i}", conn=conn), n + 1
            polled[probe.cache_status] += 1
        conn.close()
        if is_hit(probe):
            delays.append(round((probe.t_sent - miss.t_end) * 1000, 3))
            probes_needed.append(n)
        else:
            never += 1
    inm_status, inm_cache = Counter(), Counter()
    for i in range(urls):
        conn = http.client.HTTPConnection(HOST, q.port, timeout=5)
        miss = get(q.port, f"/inm/{i}", conn=conn)
        r = get(q.port, f"/inm/{i}", headers={"If-None-Match": miss.headers.get("etag", "")},
                conn=conn)
        conn.close()
        inm_status[r.status] += 1
        inm_cache[r.cache_status] += 1
    return {"urls": urls, "immediate_next_get": dict(first_probe),
            "polled_cache_status": dict(polled), "delay_to_hit_ms": summary(delays),
            "gets_until_hit": summary(probes_needed), "no_hit_within_5s": never,
            "if_none_match": {"status": {str(k): v for k, v in inm_status.items()},
                              "cache_status": dict(inm_cache)}}


# ---- figure 3: memory under 48 large fills ---------------------------------------------

def memory(q, clients=48):
    samples, stop = [], threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                samples.append((time.perf_counter(), q.memory_kib()))
            except OSError:
                break
            time.sleep(0.02)

    q.wait_idle(quiet=1.0, limit=30)
    idle = q.memory_kib()
    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    time.sleep(0.2)
    start = time.perf_counter()

    def one(n):
        try:
            r = get(q.port, f"/big?u={n}", timeout=120)
            return r.status if len(r.body) == 6_000_000 else f"{r.status} short"
        except (OSError, http.client.HTTPException) as e:
            return type(e).__name__

    with cf.ThreadPoolExecutor(clients) as pool:
        statuses = Counter(pool.map(one, range(clients)))
    answered = time.perf_counter() - start
    idle_at = q.wait_idle(quiet=2.0, limit=600)
    reached = time.perf_counter() - idle_at >= 2.0
    stop.set()
    thread.join()
    peak = {k: max(s[1][k] for s in samples) for k in idle}
    mib = lambda kib: round(kib / 1024, 1)
    return {"clients": clients, "statuses": {str(k): v for k, v in statuses.items()},
            "idle_rss_mib": mib(idle["VmRSS"]), "idle_anon_mib": mib(idle["RssAnon"]),
            "peak_rss_mib": mib(peak["VmRSS"]), "peak_anon_mib": mib(peak["RssAnon"]),
            "peak_file_mib": mib(peak["RssFile"]),
            "peak_minus_idle_mib": mib(peak["VmRSS"] - idle["VmRSS"]),
            "peak_minus_idle_anon_mib": mib(peak["RssAnon"] - idle["RssAnon"]),
            "all_answered_s": round(answered, 2), "burst_to_idle_s": round(idle_at - start, 2),
            "idle_reached": reached, "samples": len(samples),
            "peak_at_s": round(max(samples, key=lambda s: s[1]["VmRSS"])[0] - start, 2)}


# ---- figure 4: fire and forget ----------------------------------------------------------

def forget(q, origin_port, held, n_endless=300, n_ok=100):
    tag = "held" if held else "closed"
    stats = lambda: json.loads(get(origin_port, "/_ctl/stats").body)
    socks, fetched = [], stats()["gets"].get("endless", 0)
    t0 = time.perf_counter()
    for n in range(n_endless):
        s = socket.create_connection((HOST, q.port), timeout=5)
        s.sendall(f"GET /endless/{tag}-{n} HTTP/1.1\r\nHost: {HOST}:{q.port}\r\n\r\n".encode())
        if held:
            socks.append(s)
        else:
            s.close()
    sent = time.perf_counter() - t0
    time.sleep(0.05)

    def ok(n):
        try:
            return str(get(q.port, f"/ok/{tag}-{n}", timeout=5).status)
        except socket.timeout:
            return "timeout"
        except (OSError, http.client.HTTPException) as e:
            return type(e).__name__

    with cf.ThreadPoolExecutor(10) as pool:
        answers = Counter(pool.map(ok, range(n_ok)))
    elapsed = time.perf_counter() - t0
    time.sleep(2)
    after = stats()
    open_streams, fetched = after["endless_open"], after["gets"].get("endless", 0) - fetched
    heads = Counter()
    for s in socks:  # what the held connections were answered (peeked, not read)
        try:
            line = s.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT).split(b"\r\n")[0]
            heads[line.decode(errors="replace") or "closed"] += 1
        except BlockingIOError:
            heads["nothing yet"] += 1
        except OSError as e:
            heads[type(e).__name__] += 1
        s.close()
    get(origin_port, "/_ctl/stop-endless")
    return {"variant": tag, "endless_requests": n_endless, "send_s": round(sent, 3),
            "ok_requests": n_ok, "ok_answers": dict(answers),
            "ok_share_200": round(answers.get("200", 0) / n_ok, 3),
            "ok_phase_s": round(elapsed, 2), "origin_endless_fetched": fetched,
            "origin_endless_open_2s_later": open_streams,
            "held_heads": dict(heads)}


# ---- main ---------------------------------------------------------------------------------

def table(res):
    lines = []
    if "race" in res:
        r = res["race"]
        lines.append(f"1. purge after fill: {r['tries']} tries, {r['concurrency']} at a time, "
                     f"{r['seconds']} s; first GET: {r['first_cache_status']}")
        lines.append(f"   {'kind':<14}{'tries':>7}{'purged=0':>10}{'stale GETs':>12}"
                     f"{'tries w/ stale':>16}{'errors':>8}")
        for k, p in list(r["per_kind"].items()) + [("total", r["total"])]:
            lines.append(f"   {k:<14}{p['tries']:>7}{p['purged_0']:>10}{p['stale_gets']:>12}"
                         f"{p['tries_with_stale']:>16}{p['errors']:>8}")
        lines.append(f"   stale answers' Cache-Status: {r['stale_cache_status']}; random delay "
                     f"(ms) of the tries with stale answers: {r['stale_delay_ms']}; errors: {r['errors']}")
    if "hit" in res:
        h = res["hit"]
        d = h["delay_to_hit_ms"]
        lines.append(f"2. miss's last byte -> first hit, {h['urls']} URLs")
        lines.append(f"   GET sent at the miss's last byte: {h['immediate_next_get']}")
        lines.append(f"   polled answers (1 ms apart) up to the hit: {h['polled_cache_status']}")
        if d["n"]:
            lines.append(f"   delay to first hit ms: min {d['min']} median {d['median']} "
                         f"p90 {d['p90']} max {d['max']} (n={d['n']}, none within 5 s: "
                         f"{h['no_hit_within_5s']}); GETs until hit: median "
                         f"{h['gets_until_hit']['median']} max {h['gets_until_hit']['max']}")
        lines.append(f"   If-None-Match right after the miss: {h['if_none_match']}")
    if "memory" in res:
        m = res["memory"]
        lines.append(f"3. memory, {m['clients']} concurrent 6 MB fills: statuses {m['statuses']}")
        lines.append(f"   idle RSS {m['idle_rss_mib']} MiB, peak RSS {m['peak_rss_mib']} MiB "
                     f"(anon {m['peak_anon_mib']}, file {m['peak_file_mib']}), peak - idle "
                     f"{m['peak_minus_idle_mib']} MiB (anon {m['peak_minus_idle_anon_mib']} MiB)")
        lines.append(f"   peak at {m['peak_at_s']} s, all answered after {m['all_answered_s']} s, "
                     f"idle after {m['burst_to_idle_s']} s"
                     + ("" if m["idle_reached"] else " (NOT idle: gave up after 600 s)"))
    for key in ("forget_closed", "forget_held"):
        if key in res:
            f = res[key]
            lines.append(f"4. fire and forget ({f['variant']}): {f['endless_requests']} endless "
                         f"requests sent in {f['send_s']} s; /ok answers {f['ok_answers']} -> "
                         f"{f['ok_share_200'] * 100:.0f} % answered 200 (in {f['ok_phase_s']} s)")
            lines.append(f"   origin: endless requests received {f['origin_endless_fetched']}, "
                         f"still streaming 2 s later {f['origin_endless_open_2s_later']}"
                         + (f"; held connections' heads: {f['held_heads']}" if f["held_heads"] else ""))
    return "\n".join(lines)


def main():
    if "--serve-origin" in sys.argv:
        return serve_origin()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quire", required=True, help="the quire binary")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--race-tries", type=int, default=1000)
    ap.add_argument("--race-batch", type=int, default=25)
    ap.add_argument("--hit-urls", type=int, default=200)
    ap.add_argument("--only", default="race,hit,memory,forget")
    args = ap.parse_args()
    binary = os.path.abspath(args.quire)
    only = set(args.only.split(","))
    command = shlex.join([sys.executable] + sys.argv)
    print("command:", command, flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))
    origin = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-origin"],
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=die_with_parent)
    quire, res = None, {}
    try:
        origin_port = int(origin.stdout.readline().split()[1])
        with tempfile.TemporaryDirectory(prefix="fill-figures-") as tmp:
            def fresh(label):
                nonlocal quire
                if quire:
                    quire.stop()
                quire = Quire(binary, origin_port, tmp, label)
                print(f"[{label}] {shlex.join(quire.cmd)}", flush=True)
                return quire
            if "race" in only:
                res["race"] = race(fresh("race"), origin_port, args.race_tries, args.race_batch)
            if "hit" in only:
                res["hit"] = miss_to_hit(fresh("hit"), args.hit_urls)
            if "memory" in only:
                res["memory"] = memory(fresh("memory"))
            if "forget" in only:
                res["forget_closed"] = forget(fresh("forget-closed"), origin_port, held=False)
                res["forget_held"] = forget(fresh("forget-held"), origin_port, held=True)
            quire.stop()
    finally:
        if quire:
            quire.stop()
        origin.kill()
        origin.wait()
    res["meta"] = {"command": command, "quire": binary, "quire_command": quire.cmd if quire else None}
    print(table(res))
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
