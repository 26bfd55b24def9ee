#!/usr/bin/env python3
"""Bytes on the wire per page view with and without the site's compression
dictionary (RFC 9842): starts `quire serve` on a copy of a vault, takes up to PAGES
page paths from its sitemap, asks for each once (so it is stored and its codings are
made in the background), waits for the `dcz` bodies, then fetches every page with
gzip, with brotli and with `dcz` against the dictionary the pages link, and prints
the body bytes (headers excluded) per page, the dictionary's own bytes (brotli, as
a browser fetches it once) and the ratios, also apart for the pages whose own text
is in the dictionary (sampled) and the others. (That a `dcz` body decodes to the page is checked by
quire-site's tests/dictionary.rs.)

  scripts/dictionary-figures.py QUIRE_BINARY [--vault examples/vault] [--pages 50]
"""

import argparse
import base64
import hashlib
import json
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
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--vault", default="examples/vault")
    ap.add_argument("--pages", type=int, default=50)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    vault = tmp + "/vault"
    shutil.copytree(a.vault, vault, ignore=shutil.ignore_patterns("*.db*", "secret", "sessions"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    p = subprocess.Popen([a.quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
                          "--cache", tmp + "/serve.vol"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                fetch(base, "/", {})
                break
            except Exception:
                time.sleep(0.05)
        _, _, sitemap = fetch(base, "/sitemap.xml", {})
        paths = [re.sub(r"^https?://[^/]+", "", u) for u in re.findall(r"<loc>([^<]+)</loc>", sitemap.decode())]
        paths = [p for p in paths if p][: a.pages]
        _, h, _ = fetch(base, "/", {})
        dict_path = re.search(r"<([^>]+)>", h["link"]).group(1)
        _, _, dict_bytes = fetch(base, dict_path, {})
        ad = ":" + base64.b64encode(hashlib.sha256(dict_bytes).digest()).decode() + ":"
        for path in paths:
            fetch(base, path, {})
        want = {"Accept-Encoding": "gzip, br, zstd, dcz", "Available-Dictionary": ad}
        deadline = time.time() + 120
        pending = list(paths)
        while pending and time.time() < deadline:
            pending = [p for p in pending if fetch(base, p, want)[1].get("content-encoding") != "dcz"]
            time.sleep(0.2)
        sizes = {"identity": 0, "gzip": 0, "br": 0, "dcz": 0}
        # Pages whose own text is in the dictionary (sampled) against the others.
        split = {True: {"pages": 0, "br": 0, "dcz": 0}, False: {"pages": 0, "br": 0, "dcz": 0}}
        not_dcz = 0
        for path in paths:
            _, _, ident = fetch(base, path, {})
            sizes["identity"] += len(ident)
            mid = len(ident) // 2
            sampled = ident[mid:mid + 200] in dict_bytes
            split[sampled]["pages"] += 1
            for name, hdr in (("gzip", {"Accept-Encoding": "gzip"}), ("br", {"Accept-Encoding": "br"}), ("dcz", want)):
                _, h, body = fetch(base, path, hdr)
                if name == "dcz" and h.get("content-encoding") != "dcz":
                    not_dcz += 1
                sizes[name] += len(body)
                if name in ("br", "dcz"):
                    split[sampled][name] += len(body)
        for _ in range(100):
            _, dh, dict_br = fetch(base, dict_path, {"Accept-Encoding": "br"})
            if dh.get("content-encoding") == "br":
                break
            time.sleep(0.1)
        n = len(paths)
        out = {
            "pages": n,
            "not_dcz": not_dcz,
            "per_page": {k: round(v / n) for k, v in sizes.items()},
            "dictionary_bytes": len(dict_bytes),
            "dictionary_br_bytes": len(dict_br) if dh.get("content-encoding") == "br" else None,
            "dcz_over_br": round(sizes["dcz"] / sizes["br"], 3),
            "dcz_over_gzip": round(sizes["dcz"] / sizes["gzip"], 3),
            "sampled_pages": {k: v for k, v in split[True].items()},
            "other_pages": {k: v for k, v in split[False].items()},
            "dcz_over_br_other_pages": round(split[False]["dcz"] / split[False]["br"], 3) if split[False]["br"] else None,
            "walk_dcz_with_dictionary_over_br": round((sizes["dcz"] + len(dict_br)) / sizes["br"], 3),
        }
        print(json.dumps(out, indent=1))
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
