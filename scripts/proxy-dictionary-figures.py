#!/usr/bin/env python3
"""Bytes on the wire per page view through `quire proxy` with a dictionary made from
the origin's own pages (`[dictionaries]`, RFC 9842), on the peer corpus.

Starts the corpus's origin (../shared/bench/peers/origin.py) and `quire proxy` with
`[dictionaries] hosts = ["127.0.0.1"]`; asks for the first SAMPLE pages of urls.txt
(so quire samples them and makes the dictionary), waits until it is made, then
asks once for each of the next PAGES pages (stored from now on, each names the
dictionary and gets its `dcz` body in the background) and waits for their `dcz`
bodies. Then it walks those PAGES pages as a browser would: every page with gzip,
with brotli, and with `dcz` against the dictionary the pages link, and prints body
bytes per page (headers excluded), the dictionary's own bytes (brotli, fetched once),
the walk with the dictionary counted, and the origin's own `gzip -6` bytes of the
same pages, which is what nginx `proxy_cache` in front of it serves. Each `dcz` body
is decoded with the dictionary and compared with the page (needs the `zstandard`
Python module; skipped, and said, without it).

  scripts/proxy-dictionary-figures.py QUIRE_BINARY [--site /tmp/peerbench/site] [--pages 50]
      [--sample 64] [--max-bytes "128 KiB"]
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(base, path, headers):
    req = urllib.request.Request(base + path, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()


def wait_up(base, path):
    for _ in range(400):
        try:
            fetch(base, path, {})
            return
        except Exception:
            time.sleep(0.05)
    sys.exit(f"{base} never answered")


def metric(base, token, name):
    _, _, text = fetch(base, "/_quire/metrics", {"Authorization": f"Bearer {token}"})
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def check_dcz(body, dictionary, page):
    try:
        import zstandard
    except ImportError:
        return None
    d = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdDecompressor(dict_data=d).decompress(body[40:], max_output_size=1 << 24) == page


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--site", default="/tmp/peerbench/site")
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--sample", type=int, default=64)
    ap.add_argument("--max-bytes", default="128 KiB")
    a = ap.parse_args()
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench", "peers")
    urls = [u.strip() for u in open(os.path.join(a.site, "urls.txt")) if u.strip()]
    sample, walk = urls[: a.sample], urls[a.sample : a.sample + a.pages]
    tmp = tempfile.mkdtemp()
    oport, qport, token = free_port(), free_port(), "figures-admin-token-0123456789"
    with open(tmp + "/q.toml", "w") as f:
        f.write(f'admin_token = "{token}"\n[dictionaries]\nhosts = ["127.0.0.1"]\nsample_pages = {a.sample}\nmax_bytes = "{a.max_bytes}"\n')
    origin = subprocess.Popen([sys.executable, os.path.join(peers, "origin.py"), a.site, "--port", str(oport), "--delay-ms", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    quire = subprocess.Popen([a.quire, "proxy", "--origin", f"http://127.0.0.1:{oport}", "--listen", f"127.0.0.1:{qport}",
                              "--cache", tmp + "/q.vol", "--cache-size", "1GiB", "--config", tmp + "/q.toml"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{qport}"
    try:
        wait_up(f"http://127.0.0.1:{oport}", "/__count")
        wait_up(base, "/_quire/health")
        t0 = time.time()
        for p in sample:
            fetch(base, p, {})
        while metric(base, token, "quire_host_dictionaries_built_total") != 1.0:
            if time.time() - t0 > 60:
                sys.exit("no dictionary made")
            time.sleep(0.05)
        made_s = time.time() - t0
        for p in walk:
            fetch(base, p, {})
        _, h, _ = fetch(base, walk[0], {})
        dict_path = re.search(r"<([^>]+)>", h.get("link", "")).group(1)
        _, _, dictionary = fetch(base, dict_path, {})
        _, dh, dict_br = fetch(base, dict_path, {"Accept-Encoding": "br"})
        ad = ":" + base64.b64encode(hashlib.sha256(dictionary).digest()).decode() + ":"
        want = {"Accept-Encoding": "gzip, br, zstd, dcz", "Available-Dictionary": ad}
        pending, deadline = list(walk), time.time() + 120
        while pending and time.time() < deadline:
            pending = [p for p in pending if fetch(base, p, want)[1].get("content-encoding") != "dcz"]
            time.sleep(0.1)
        sizes = {"identity": 0, "gzip": 0, "br": 0, "dcz": 0, "origin_gzip": 0}
        not_dcz, decoded = 0, []
        for p in walk:
            _, _, ident = fetch(base, p, {})
            sizes["identity"] += len(ident)
            sizes["origin_gzip"] += os.path.getsize(os.path.join(a.site, p.lstrip("/")) + ".gz")
            for name, hdr in (("gzip", {"Accept-Encoding": "gzip"}), ("br", {"Accept-Encoding": "br"}), ("dcz", want)):
                _, rh, body = fetch(base, p, hdr)
                sizes[name] += len(body)
                if name == "dcz":
                    if rh.get("content-encoding") != "dcz":
                        not_dcz += 1
                    else:
                        decoded.append(check_dcz(body, dictionary, ident))
        n = len(walk)
        first_br = sizes["br"] / n
        print(json.dumps({
            "pages_walked": n,
            "pages_sampled": len(sample),
            "dictionary_made_after_s": round(made_s, 2),
            "not_dcz": not_dcz,
            "dcz_decoded_to_the_page": (None if any(d is None for d in decoded) else sum(decoded)),
            "per_page": {k: round(v / n) for k, v in sizes.items()},
            "dictionary_bytes": len(dictionary),
            "dictionary_br_bytes": len(dict_br) if dh.get("content-encoding") == "br" else None,
            "dcz_over_br": round(sizes["dcz"] / sizes["br"], 3),
            "dcz_over_origin_gzip": round(sizes["dcz"] / sizes["origin_gzip"], 3),
            # A walk: the first page as brotli (before the browser has the dictionary),
            # the dictionary once, then dcz.
            "walk_with_dictionary_over_br": round((first_br + len(dict_br) + sizes["dcz"] * (n - 1) / n) / sizes["br"], 3),
        }, indent=1))
    finally:
        for p in (quire, origin):
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
