#!/usr/bin/env python3
"""Pages rendered before anyone asks, measured on a real `quire serve`.

Two figures:
  1. warm-up: from the first request to a fresh server until the prefill task has
     stored every public page (read from `quire_prefills_total`), then a check that
     every page the sitemap lists is a hit;
  2. edits: EDITS edits of public notes, SPACING seconds apart; after each, the
     first anonymous request for the edited note: a hit, with the new text?

  scripts/prefill-figures.py QUIRE_BINARY [--vault DIR] [--edits 100] [--spacing 1]

The vault is copied to a scratch folder first (edits never touch DIR). Prints one
JSON object at the end.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

TOKEN = "prefill-figures-admin-token-0123456789"


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


def prefills(base):
    _, _, text = get(base, "/_quire/metrics", {"Authorization": f"Bearer {TOKEN}"})
    out = {}
    for m in re.finditer(r'^quire_prefills_total\{result="(\w+)"\} (\d+)$', text, re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def wait_ready(base, proc):
    t0 = time.time()
    while time.time() - t0 < 120:
        if proc.poll() is not None:
            sys.exit(f"quire exited with {proc.returncode}")
        try:
            # The admin API: not a fill, so the site learns no origin from it.
            get(base, "/_quire/metrics", {"Authorization": f"Bearer {TOKEN}"})
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("quire did not start")


def public_notes(vault):
    notes = []
    for root, _, files in os.walk(vault):
        if "/." in root:
            continue
        for f in files:
            if f.endswith(".md"):
                p = os.path.join(root, f)
                head = open(p, encoding="utf-8").read(400)
                if re.search(r"^free: true$", head, re.M) and not re.search(
                    r"^draft: true$", head, re.M
                ):
                    notes.append(p)
    return sorted(notes)


def warm_up(base):
    t0 = time.time()
    status, _, _ = get(base, "/")
    assert status == 200, status
    last, last_change = None, time.time()
    while True:
        p = prefills(base)
        taken = sum(v for k, v in p.items() if k != "dropped")
        if taken != last:
            last, last_change = taken, time.time()
        elif time.time() - last_change > 2.0 and taken > 0:
            break
        time.sleep(0.05)
    seconds = last_change - t0
    _, _, sitemap = get(base, "/sitemap.xml")
    urls = re.findall(r"<loc>https?://[^/]+(/[^<]*)</loc>", sitemap)
    hits = 0
    for u in urls:
        _, h, _ = get(base, u)
        hits += "hit" in h.get("Cache-Status", "") or "hit" in h.get("cache-status", "")
    return {"seconds_to_all_prefilled": round(seconds, 2), "prefills": p,
            "sitemap_pages": len(urls), "sitemap_pages_hit": hits}


def edits(base, vault, n, spacing):
    notes = public_notes(vault)
    hits = fresh = 0
    misses = []
    for i in range(n):
        path = notes[i % len(notes)]
        marker = f"edit-marker-{i}-{int(time.time() * 1000)}"
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"\n\n{marker}\n")
        time.sleep(spacing)
        rel = os.path.relpath(path, vault)[:-3]
        url = "/" + "/".join(slug(part) for part in rel.split(os.sep))
        status, h, body = get(base, url)
        cs = h.get("Cache-Status", h.get("cache-status", ""))
        hit = "hit" in cs
        hits += hit
        fresh += marker in body
        if not hit:
            misses.append({"edit": i, "url": url, "status": status, "cache_status": cs})
    return {"edits": n, "spacing_s": spacing, "first_request_hits": hits,
            "with_new_text": fresh, "hit_share": round(hits / n, 3), "misses": misses[:10]}


def slug(s):
    """quire_vault::links::slug: alphanumerics lower-cased, runs of others one dash."""
    out, dash = [], False
    for c in s:
        if c.isalnum():
            out.append(c.lower())
            dash = False
        elif not dash and out:
            out.append("-")
            dash = True
    return urllib.parse.quote("".join(out).rstrip("-") or "-")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("quire")
    ap.add_argument("--vault", default="examples/vault")
    ap.add_argument("--edits", type=int, default=100)
    ap.add_argument("--spacing", type=float, default=1.0)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="prefill-figures-")
    vault = os.path.join(scratch, "vault")
    shutil.copytree(a.vault, vault, ignore=shutil.ignore_patterns("*.db*", "sessions"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [a.quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
         "--cache", os.path.join(scratch, "cache.vol")],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(scratch, "log"), "w"))
    try:
        wait_ready(base, proc)
        out = {"vault": a.vault, "warm_up": warm_up(base)}
        out["edits"] = edits(base, vault, a.edits, a.spacing)
        print(json.dumps(out, indent=1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
