#!/usr/bin/env python3
"""Interim hit-path benchmark until `quire bench http` (issue 5) exists.

quire proxy vs nginx proxy_cache on cached ~44 KB HTML pages served gzip, each server
pinned to CPU 0 with one worker, wrk pinned to CPU 1 (64 connections, uniform order
over the 2,000-page corpus), runs interleaved A/B, medians reported. Reuses the peer
set-up in ../shared/bench/peers (corpus, slow origin, wrk script, nginx config).

  python3 scripts/bench-proxy-vs-nginx.py [--duration 10] [--reps 3] [--mode uniform]

Needs: ../shared/bench/peers/setup.sh run once (wrk, nginx, corpus in /tmp/peerbench),
and `cargo build --release -p quire`.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEERS = os.path.abspath(os.path.join(REPO, "..", "shared", "bench", "peers"))
WORK = "/tmp/peerbench"
SITE = os.path.join(WORK, "site")
RUN = os.path.join(WORK, "run-quire")
HOST = "127.0.0.1"
ORIGIN_PORT, QUIRE_PORT, NGINX_PORT = 9000, 8090, 8091
QUIRE_CONFIG = None


def ticks(pid):
    """utime+stime of a process and its threads, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def wait_port(port, timeout=20):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            c = http.client.HTTPConnection(HOST, port, timeout=1)
            c.request("GET", "/_quire/health")
            c.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("port %d never opened" % port)


def fetch_all(port, urls, conc=16):
    def one(chunk):
        c = http.client.HTTPConnection(HOST, port, timeout=30)
        out = []
        for u in chunk:
            c.request("GET", u, headers={"Accept-Encoding": "gzip"})
            r = c.getresponse()
            body = r.read()
            out.append((u, r.status, r.getheader("Cache-Status") or r.getheader("X-Cache") or "",
                        r.getheader("Content-Encoding"), len(body)))
        return out
    chunks = [urls[i::conc] for i in range(conc)]
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        return [x for part in ex.map(one, chunks) for x in part]


def wrk(port, mode, duration, conns):
    argv = ["taskset", "-c", "1", "wrk", "-t1", "-c%d" % conns, "-d%ds" % duration, "--latency",
            "-s", os.path.join(PEERS, "urls.lua"), "http://%s:%d" % (HOST, port), "--", mode,
            os.path.join(SITE, "urls.txt")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = {}
    for p in ("50", "99"):
        m = re.search(r"\s%s(?:\.000)?%%\s+([\d.]+)(us|ms|s)" % p, out)
        v = float(m.group(1))
        lat[p] = v / 1000 if m.group(2) == "us" else (v * 1000 if m.group(2) == "s" else v)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p50_ms": lat["50"], "p99_ms": lat["99"],
            "non2xx": int(errs.group(1)) if errs else 0, "socket_errors": sock.group(1) if sock else "", "raw": out}


def start_quire():
    shutil.rmtree(os.path.join(RUN, "quire"), ignore_errors=True)
    os.makedirs(os.path.join(RUN, "quire"), exist_ok=True)
    exe = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "quire")
    argv = ["taskset", "-c", "0", exe, "proxy", "--origin", "http://%s:%d" % (HOST, ORIGIN_PORT),
            "--listen", "%s:%d" % (HOST, QUIRE_PORT), "--cache", os.path.join(RUN, "quire", "cache.vol"),
            "--cache-size", "1GiB", "--workers", "1"] + (["--config", QUIRE_CONFIG] if QUIRE_CONFIG else [])
    p = subprocess.Popen(argv, stdout=open(os.path.join(RUN, "quire.log"), "w"), stderr=subprocess.STDOUT)
    wait_port(QUIRE_PORT)
    return p, p.pid


def start_nginx():
    conf_in = open(os.path.join(PEERS, "conf", "nginx-proxy.conf.in")).read()
    cache = os.path.join(RUN, "nginx-cache")
    shutil.rmtree(cache, ignore_errors=True)
    kv = dict(WORKERS="1", AFFINITY="1", RUN=RUN, NAME="nginx", CACHE_DIR=cache,
              ORIGIN="%s:%d" % (HOST, ORIGIN_PORT), LISTEN="%s:%d" % (HOST, NGINX_PORT))
    for k, v in kv.items():
        conf_in = conf_in.replace("@%s@" % k, v)
    conf = os.path.join(RUN, "nginx.conf")
    open(conf, "w").write(conf_in)
    p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", RUN, "-c", conf],
                         stdout=open(os.path.join(RUN, "nginx.log"), "w"), stderr=subprocess.STDOUT)
    time.sleep(1.0)
    kids = children(p.pid)
    return p, (kids[0] if kids else p.pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mode", default="uniform")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--json")
    ap.add_argument("--quire-config", help="TOML config for quire (flags still set origin, listen, cache)")
    a = ap.parse_args()
    global QUIRE_CONFIG
    QUIRE_CONFIG = a.quire_config
    os.makedirs(RUN, exist_ok=True)
    urls = [u.strip() for u in open(os.path.join(SITE, "urls.txt")) if u.strip()]
    origin = subprocess.Popen([sys.executable, os.path.join(PEERS, "origin.py"), SITE, "--host", HOST,
                               "--port", str(ORIGIN_PORT), "--delay-ms", "20"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [origin]
    try:
        time.sleep(0.5)
        servers = {}
        for name, start, port in (("quire", start_quire, QUIRE_PORT), ("nginx", start_nginx, NGINX_PORT)):
            p, pid = start()
            procs.append(p)
            t0 = time.time()
            fetch_all(port, urls)
            warm_s = time.time() - t0
            time.sleep(2)  # fills finish storing
            res = fetch_all(port, urls)
            hits = sum(1 for r in res if "hit" in r[2].lower())
            gz = sum(1 for r in res if r[3] == "gzip")
            avg = statistics.mean(r[4] for r in res)
            print("%s: warm %.1fs, second pass %d/%d hits, %d gzip, avg body %.0f B" % (name, warm_s, hits, len(res), gz, avg), flush=True)
            servers[name] = (port, pid, avg)
        runs = []
        for rep in range(a.reps):
            for name, (port, pid, avg) in servers.items():
                t0, c0 = time.time(), ticks(pid)
                r = wrk(port, a.mode, a.duration, a.conns)
                cpu = (ticks(pid) - c0) / os.sysconf("SC_CLK_TCK") / (time.time() - t0) * 100
                r.update(server=name, rep=rep, server_cpu_pct=round(cpu, 1), avg_body=round(avg))
                del r["raw"]
                runs.append(r)
                print("  %-6s rep %d: %8.0f req/s  p50 %.2f ms  p99 %.2f ms  cpu %5.1f%%  non2xx %d %s" % (
                    name, rep, r["rps"], r["p50_ms"], r["p99_ms"], cpu, r["non2xx"], r["socket_errors"]), flush=True)
        med = {n: {k: statistics.median(r[k] for r in runs if r["server"] == n) for k in ("rps", "p50_ms", "p99_ms", "server_cpu_pct")} for n in servers}
        print("\n| server | req/s (median) | p50 ms | p99 ms | server CPU % | avg gzip body B |")
        print("|---|---|---|---|---|---|")
        for n, m in med.items():
            print("| %s | %.0f | %.2f | %.2f | %.0f | %d |" % (n, m["rps"], m["p50_ms"], m["p99_ms"], m["server_cpu_pct"], servers[n][2]))
        print("\nquire / nginx hits per second: %.2fx" % (med["quire"]["rps"] / med["nginx"]["rps"]))
        if a.json:
            json.dump({"runs": runs, "medians": med, "ratio": med["quire"]["rps"] / med["nginx"]["rps"]}, open(a.json, "w"), indent=1)
    finally:
        for p in procs:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(10)
            except Exception:
                p.kill()


if __name__ == "__main__":
    main()
