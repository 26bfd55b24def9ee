#!/usr/bin/env python3
"""Headless-browser check of `quire serve` with Debian's chromium.

Chromium is driven over the Chrome DevTools Protocol on pipes (--remote-debugging-pipe:
JSON messages ended by a NUL byte, written to the browser on fd 3 and read from it on
fd 4), so only the Python standard library is needed. The script publishes a copy of
examples/vault, loads the index (desktop and mobile), a note (light and dark), a note
with callouts, formulas, diagrams and transclusions (light and dark), the site graph
and a note's local graph (light and dark, readable labels, no hidden note), a base's
views and a canvas (light and dark), the
search page, signs in with hostile and good `next` targets (it must never leave the
site), and the sign-in flow to a private note and back, checks what a reader would
see, checks that hovering a link prefetches it by the pages' speculation rules and
that following it is served from the prefetch, and leaves screenshots and
report.json in the out folder. It serves another copy on plain http://127.0.0.1 (a
potentially trustworthy origin, where chromium uses RFC 9842 compression dictionaries
without flags) and checks dictionaries end to end: with two notes warmed until quire
has their `dcz` variants, the browser loads one, fetches the dictionary its `Link:
rel="compression-dictionary"` names, and then asks for the other with that
dictionary's `Available-Dictionary`, gets `Content-Encoding: dcz` (with `Vary:
Available-Dictionary`), and shows the note's title and text. Then it serves the
vault over HTTPS (a certificate made with openssl for the run, which chromium is told
to accept by its key's hash) with a plain-HTTP redirect listener, and checks the
browser loads pages over HTTP/2 and follows the redirect to them. Last, it serves the
vault with `hover_previews = true` and checks the page script runs under its hashed
CSP: a popover on hovering a link, pan and zoom on /graph.

    python3 scripts/browser-check.py [--quire target/release/quire] [--out DIR]
                                     [--chromium chromium] [--timeout 90]

Exit status: 0 every check passed, 1 a check failed, 2 chromium or quire missing.
"""
import argparse
import base64
import fcntl
import hashlib
import html
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READER, READER_PASSWORD = "reader", "reader-demo-password"
EVIL_HOST = "evil.example"
# `next` values (as written in the query of /login) that would take a reader to
# EVIL_HOST after signing in if quire let them through: a tab browsers delete (the
# issue's case), a scheme-relative path, a backslash browsers read as a slash, CR LF.
HOSTILE_NEXTS = [f"/%09/{EVIL_HOST}", f"//{EVIL_HOST}", f"/%5C{EVIL_HOST}",
                 f"/%0D%0A/{EVIL_HOST}"]


class Timeout(Exception):
    pass


# ---- the vault: which note is private, and where it is published ----------------------

def slug(s):
    """crates/quire-vault/src/links.rs `slug`: lower-case, runs of anything but letters
    and digits become one `-`, no leading or trailing `-`."""
    out, dash = [], False
    for c in s:
        if c.isalnum():
            out.append(c.lower())
            dash = False
        elif not dash and out:
            out.append("-")
            dash = True
    return "".join(out).rstrip("-")


def url_of(rel):
    """crates/quire-vault/src/note.rs `url_of`: `/` + slugged folders and file name."""
    stem = rel[:-3] if rel.endswith(".md") else rel
    return "".join("/" + (slug(seg) or "-") for seg in stem.split("/") if seg) or "/"


def front_matter(text):
    """The `---` block at the top of a note (crates/quire-vault/src/front.rs `split`)."""
    t = text.lstrip("\ufeff")
    if not (t.startswith("---\n") or t.startswith("---\r\n")):
        return None
    lines = []
    for line in t.split("\n")[1:]:
        if line.rstrip("\r") in ("---", "..."):
            return "\n".join(lines)
        lines.append(line)
    return None


def private_note(vault):
    """(url, title, path) of the first note, in path order, that is neither `free: true`
    nor `draft: true`: private, readable once signed in. Only notes with a plain ASCII
    path and a simple front matter, so the URL and title computed here are certain."""
    for dirpath, dirnames, files in os.walk(vault):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(files):
            if not f.endswith(".md"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), vault).replace(os.sep, "/")
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                fm = front_matter(fh.read())
            if fm is None or not rel.isascii():
                continue
            if re.search(r"^(free|draft)\s*:\s*(true|True|TRUE)\s*(#.*)?$", fm, re.M):
                continue
            m = re.search(r"^title\s*:\s*(.+?)\s*$", fm, re.M)
            title = m.group(1).strip("'\"") if m else f[:-3]
            return url_of(rel), title, rel
    return None


def copy_vault(dst):
    """examples/vault without its search index, view counts, session key and sign-outs."""
    src = os.path.join(ROOT, "examples", "vault")

    def skip(d, names):
        if os.path.basename(d) != ".quire":
            return []
        return [n for n in names if ".db" in n or n in ("secret", "sessions")]

    shutil.copytree(src, dst, ignore=skip)


# ---- chromium over CDP -----------------------------------------------------------------

class Cdp:
    """A CDP client on chromium's --remote-debugging-pipe, with one page attached."""

    def __init__(self, chromium, profile, log_path, extra_args=()):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def onto_3_and_4():
            # Move both ends above 10 first so the dup2s cannot clobber each other.
            a = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [chromium, "--headless=new", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--hide-scrollbars", "--mute-audio",
                # The open-redirect checks' foreign host: should a redirect reach it,
                # it fails at once instead of waiting on DNS.
                f"--host-resolver-rules=MAP {EVIL_HOST} ~NOTFOUND",
                *extra_args, "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        self.log = open(log_path, "w")
        # pass_fds keeps 3 and 4 open: the close_fds sweep runs after preexec_fn.
        self.proc = subprocess.Popen(args, preexec_fn=onto_3_and_4, pass_fds=(3, 4),
                                     start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        os.close(to_r)
        os.close(from_w)
        self.log_path = log_path
        self.buf = b""
        self.next_id = 0
        self.events = []      # events not consumed yet
        self.problems = []    # console errors, exceptions, error log entries (CSP, network)
        self.session = None
        self.frame = None
        self.where = "start"  # what the page was doing, for problem reports

    def close(self):
        """Asks the browser to quit, then kills its process group (the browser and the
        renderer, GPU and zygote processes it started)."""
        if self.proc.poll() is None:
            try:
                self.call("Browser.close", session=False, timeout=3)
            except Exception:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("chromium did not answer in time")
            ready, _, _ = select.select([self.from_r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise EOFError(f"chromium closed the pipe (exit {self.proc.poll()}; see {self.log_path})")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        msg = json.loads(msg)
        if "method" in msg:
            self._note_problem(msg)
        return msg

    def _note_problem(self, e):
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.problems.append({"source": "console." + p["type"], "text": text, "url": "", "where": self.where})
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.problems.append({"source": "exception", "text": text, "url": d.get("url", ""), "where": self.where})
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            x = p["entry"]
            self.problems.append({"source": x.get("source", "log"), "text": x.get("text", ""),
                                  "url": x.get("url", ""), "where": self.where})

    def call(self, method, params=None, timeout=20, session=True):
        self.next_id += 1
        want = self.next_id
        m = {"id": want, "method": method, "params": params or {}}
        if session and self.session:
            m["sessionId"] = self.session
        data = json.dumps(m).encode() + b"\0"
        while data:
            data = data[os.write(self.to_w, data):]
        deadline = time.monotonic() + timeout
        while True:
            r = self._read(deadline)
            if r.get("id") == want:
                if "error" in r:
                    raise RuntimeError(f"{method}: {r['error'].get('message', r['error'])}")
                return r.get("result", {})
            if "method" in r:
                self.events.append(r)

    def wait_event(self, method, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            r = self._read(deadline)
            if "method" in r:
                self.events.append(r)

    def pump(self, seconds):
        """Reads events for a while (to collect late console messages)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                r = self._read(deadline)
                if "method" in r:
                    self.events.append(r)
        except Timeout:
            pass

    def open_page(self):
        t = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        a = self.call("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True},
                      session=False)
        self.session, self.frame = a["sessionId"], t["targetId"]
        for d in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{d}.enable")

    def navigate(self, url=None, js=None, timeout=20):
        """Loads `url`, or runs `js` (which must start a navigation, e.g. submit a form),
        waits for the load event; returns (status, lower-cased headers, url) of the main
        document's final response (after redirects)."""
        self.events = [e for e in self.events
                       if e.get("method") not in ("Page.loadEventFired", "Network.responseReceived")]
        self.where = url or js
        if js:
            self.eval(js)
        else:
            r = self.call("Page.navigate", {"url": url}, timeout=timeout)
            err = r.get("errorText")
            if err and err != "net::ERR_HTTP_RESPONSE_CODE_FAILURE":
                raise RuntimeError(f"navigating to {url}: {err}")
        self.wait_event("Page.loadEventFired", timeout)
        docs = [e["params"] for e in self.events
                if e.get("method") == "Network.responseReceived"
                and e["params"].get("type") == "Document" and e["params"].get("frameId") == self.frame]
        self.events = [e for e in self.events if e.get("method") != "Network.responseReceived"]
        if not docs:
            return 0, {}, ""
        r = docs[-1]["response"]
        return r["status"], {k.lower(): v for k, v in r.get("headers", {}).items()}, r.get("url", "")

    def leave(self):
        """Leaves the page for about:blank, so that nothing it would still load
        (a prefetch under a resting pointer, a dictionary fetched when idle) meets
        a server that is about to stop and logs a failed load."""
        try:
            self.navigate("about:blank", timeout=5)
        except Exception:
            pass

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(f"evaluating {expr[:80]!r}: "
                               f"{d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def viewport(self, w, h, mobile):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": mobile})

    def color_scheme(self, scheme):
        self.call("Emulation.setEmulatedMedia",
                  {"features": [{"name": "prefers-color-scheme", "value": scheme}]})

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))


# Contrast (WCAG 2) of the note's body text, a link and the muted meta line against the
# background behind them, from computed colours; null where an element or colour is missing.
CONTRAST_JS = r"""(() => {
  const rgb = c => { const m = c && c.match(/^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/);
                     return m ? [m[1], m[2], m[3]].map(Number) : null; };
  const lum = c => c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
                    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const ratio = (a, b) => { if (!a || !b) return null; const x = lum(a), y = lum(b);
                            return Math.round((Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05) * 100) / 100; };
  // The colour behind the text: body's, else html's, else the canvas (white, or dark
  // when the page opts into a dark color-scheme and dark is preferred).
  const opaque = c => { const m = c.match(/^rgba\(.*,\s*([\d.]+)\)$/); return !m || Number(m[1]) > 0; };
  const bgOf = e => getComputedStyle(e).backgroundColor;
  const canvas = (matchMedia('(prefers-color-scheme: dark)').matches &&
                  /dark/.test(getComputedStyle(document.documentElement).colorScheme)) ? 'rgb(18, 18, 18)' : 'rgb(255, 255, 255)';
  const bg = [bgOf(document.body), bgOf(document.documentElement)].find(opaque) || canvas;
  const col = sel => { const e = document.querySelector(sel); return e ? getComputedStyle(e).color : null; };
  const text = col('article.note .body p') || col('article.note'), link = col('article.note .body a[href]'),
        muted = col('article.note .meta time') || col('.foot');
  return {background: bg, text, link, muted,
          text_ratio: ratio(rgb(text), rgb(bg)), link_ratio: ratio(rgb(link), rgb(bg)),
          muted_ratio: ratio(rgb(muted), rgb(bg))};
})()"""


# ---- the run -----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(server):
    """SIGTERM (quire drains), SIGKILL after 10 s."""
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def wait_until_up(server, base, log_path, seconds=20, context=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            with open(log_path, errors="replace") as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"quire serve exited with {server.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(base + "/robots.txt", timeout=2, context=context) as r:
                r.read()
            return
        except urllib.error.HTTPError:
            return  # it answers, if not with a 200: the checks will say more
        except Exception:
            time.sleep(0.1)
    raise Timeout(f"quire serve did not answer on {base} within {seconds} s")


def sign_in_with_next(cdp, base, nxt):
    """Opens /login?next=`nxt` (`nxt` already URL-encoded), signs in through the form as
    the reader; returns (the form's next value, Location of the sign-in's redirect,
    where the page ended: origin, path and query)."""
    cdp.navigate(base + "/login?next=" + nxt)
    form_next = cdp.eval("(document.querySelector('form.login input[name=next]') || {}).value ?? null")
    cdp.eval(f"(() => {{ const f = document.querySelector('form.login');"
             f" f.elements.name.value = {json.dumps(READER)};"
             f" f.elements.password.value = {json.dumps(READER_PASSWORD)}; return 1; }})()")
    cdp.events = [e for e in cdp.events if e.get("method") != "Network.requestWillBeSent"]
    try:
        cdp.navigate(js="document.querySelector('form.login').submit(); 1", timeout=8)
    except Timeout:
        pass  # a redirect off the site may never load (blocked, or no such host): see below
    location = None
    for e in cdp.events:
        r = e.get("params", {}).get("redirectResponse") if e.get("method") == "Network.requestWillBeSent" else None
        if r and urllib.parse.urlsplit(r.get("url", "")).path == "/login":
            location = {k.lower(): v for k, v in r.get("headers", {}).items()}.get("location")
    landed = cdp.eval("[location.origin, location.pathname + location.search]")
    if landed[0] in (None, "null"):  # an error page: say where it was going
        landed = [cdp.eval("location.href"), ""]
    return form_next, location, landed


def sign_out(cdp):
    """Signs out with the header's Sign out button, if there is one."""
    if cdp.eval("!!document.querySelector('header form[action=\"/logout\"]')"):
        cdp.navigate(js="document.querySelector('header form[action=\"/logout\"]').submit(); 1")


def check_sign_in_targets(cdp, base, check):
    """Signs in through the real form with hostile `next` values: the browser must end
    on this origin at `/`, never on another host; then with a good one, which it must
    reach."""
    origin = urllib.parse.urlsplit(base)
    origin = f"{origin.scheme}://{origin.netloc}"
    for nxt in HOSTILE_NEXTS:
        form_next, location, (at, path) = sign_in_with_next(cdp, base, nxt)
        check(f"signing in with next={nxt} stays on the site, at /",
              at == origin and path == "/" and form_next == "/" and location in (None, "/"),
              f"form next {form_next!r}, Location {location!r}, ended at {at}{path}")
        sign_out(cdp)
    good = "/search?q=cache"
    form_next, location, (at, path) = sign_in_with_next(cdp, base, urllib.parse.quote(good, safe=""))
    check(f"signing in with next={good} lands on that page",
          at == origin and path == good and form_next == good,
          f"form next {form_next!r}, Location {location!r}, ended at {at}{path}")
    sign_out(cdp)


OBSIDIAN_NOTE = "Garden/Drip Irrigation Plan.md"

OBSIDIAN_JS = """({
  callouts: document.querySelectorAll('article .callout').length,
  folded: document.querySelectorAll('article details.callout').length,
  math: document.querySelectorAll('article math').length,
  diagrams: document.querySelectorAll('article figure.diagram svg').length,
  embeds: document.querySelectorAll('article .embed .embed-body').length,
  marks: document.querySelectorAll('article mark').length,
  scripts: document.querySelectorAll('script').length,
})"""


def check_obsidian_note(cdp, base, check, shot):
    url = url_of(OBSIDIAN_NOTE)
    status, _, _ = cdp.navigate(base + url)
    got = cdp.eval(OBSIDIAN_JS) or {}
    wanted = ("callouts", "folded", "math", "diagrams", "embeds", "marks")
    missing = [k for k in wanted if not got.get(k)]
    check("a note with a callout, a formula, a diagram and a transclusion renders them all",
          status == 200 and not missing and got.get("scripts") == 0,
          f"{url}: status {status}, found {got}, missing {missing}")
    shot("obsidian.png")
    cdp.color_scheme("dark")
    shot("obsidian-dark.png")
    cdp.color_scheme("light")


BASES_NOTE = "Reading/Bookshelf.md"
CANVAS_NOTE = "Projects/Quire Plan.md"

# A base's views on the page: table rows, cards laid out as a grid with their images
# loaded, list items, and no script.
BASES_JS = r"""(() => {
  const cards = document.querySelector('ul.base-cards');
  const imgs = Array.from(document.querySelectorAll('ul.base-cards img'));
  return {tables: document.querySelectorAll('section.base-table table tbody tr').length,
          cards: document.querySelectorAll('ul.base-cards > li.base-card').length,
          grid: cards ? getComputedStyle(cards).display : null,
          images_loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length, images: imgs.length,
          lists: document.querySelectorAll('ul.base-list > li').length,
          errors: document.querySelectorAll('.base-error').length,
          scripts: document.querySelectorAll('script').length};
})()"""

# A canvas on the page: nodes placed inside the plane (none outside it), edges drawn,
# labels and the text colour against the node's background.
CANVAS_JS = r"""(() => {
  const plane = document.querySelector('.canvas-plane');
  if (!plane) return null;
  const p = plane.getBoundingClientRect();
  const nodes = Array.from(plane.querySelectorAll('.canvas-node'));
  const outside = nodes.filter(n => { const r = n.getBoundingClientRect();
    return r.left < p.left - 1 || r.top < p.top - 1 || r.right > p.right + 1 || r.bottom > p.bottom + 1; }).length;
  const rgb = c => { const m = c && c.match(/^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/);
                     return m ? [m[1], m[2], m[3]].map(Number) : null; };
  const lum = c => c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
                    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const text = plane.querySelector('.canvas-text p');
  const fg = text && rgb(getComputedStyle(text).color), bg = text && rgb(getComputedStyle(text.closest('.canvas-node')).backgroundColor);
  const ratio = fg && bg ? Math.round((Math.max(lum(fg), lum(bg)) + 0.05) / (Math.min(lum(fg), lum(bg)) + 0.05) * 100) / 100 : null;
  return {nodes: nodes.length, outside, positioned: nodes.every(n => getComputedStyle(n).position === 'absolute'),
          edges: plane.querySelectorAll('svg path.canvas-edge').length,
          labels: plane.querySelectorAll('.canvas-edge-label').length,
          embeds: plane.querySelectorAll('.canvas-file .embed').length,
          ratio, scripts: document.querySelectorAll('script').length};
})()"""


def check_bases_and_canvas(cdp, base, check, shot):
    """A note with a base's table, cards and list views, and a note with a JSON Canvas:
    drawn on the server, laid out, readable in light and dark, no script."""
    url = url_of(BASES_NOTE)
    status, _, _ = cdp.navigate(base + url)
    # The cards' images load lazily: bring them into view and give them a moment.
    cdp.eval("(document.querySelector('ul.base-cards') || document.body).scrollIntoView()")
    time.sleep(1.5)
    got = cdp.eval(BASES_JS) or {}
    cdp.eval("window.scrollTo(0, 0)")
    check("a base's table, cards (a grid, images loaded) and list views render",
          status == 200 and got.get("tables", 0) >= 10 and got.get("cards", 0) >= 5
          and got.get("grid") == "grid" and got.get("images_loaded") == got.get("images")
          and got.get("lists", 0) >= 3 and got.get("errors") == 0 and got.get("scripts") == 0,
          f"{url}: status {status}, {got}")
    shot("bases.png")
    cdp.color_scheme("dark")
    shot("bases-dark.png")
    cdp.color_scheme("light")
    url = url_of(CANVAS_NOTE)
    status, _, _ = cdp.navigate(base + url)
    for scheme in ("light", "dark"):
        cdp.color_scheme(scheme)
        got = cdp.eval(CANVAS_JS) or {}
        check(f"a canvas is drawn with its nodes on the plane, edges and labels ({scheme})",
              status == 200 and got.get("nodes", 0) >= 8 and got.get("outside") == 0
              and got.get("positioned") and got.get("edges", 0) >= 4 and got.get("labels", 0) >= 2
              and got.get("embeds", 0) >= 1 and (got.get("ratio") or 0) >= 4.5 and got.get("scripts") == 0,
              f"{url}: status {status}, {got}")
        shot("canvas.png" if scheme == "light" else "canvas-dark.png")
    cdp.color_scheme("light")


GRAPH_NOTE = "Caching/HTTP Caching Basics.md"

# The graph on the page: nodes, the note itself, labels, scripts, and the contrast of a
# label against the page (the label's fill is a theme colour, on the page background).
GRAPH_JS = r"""((sel) => {
  const svg = document.querySelector(sel);
  if (!svg) return null;
  const rgb = c => { const m = c && c.match(/^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)/);
                     return m ? [m[1], m[2], m[3]].map(Number) : null; };
  const lum = c => c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
                    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const label = svg.querySelector('a.node:not(.quiet) text');
  const fg = label && rgb(getComputedStyle(label).fill), bg = rgb(getComputedStyle(document.body).backgroundColor);
  const ratio = fg && bg ? Math.round((Math.max(lum(fg), lum(bg)) + 0.05) / (Math.min(lum(fg), lum(bg)) + 0.05) * 100) / 100 : null;
  const box = label && label.getBoundingClientRect();
  return {nodes: svg.querySelectorAll('a.node[href]').length, here: svg.querySelectorAll('a.node.here').length,
          titles: Array.from(svg.querySelectorAll('a.node title')).map(t => t.textContent),
          hrefs: Array.from(svg.querySelectorAll('a.node')).map(a => a.getAttribute('href')),
          label_px: box ? Math.round(box.height) : 0, ratio,
          scripts: document.querySelectorAll('script').length};
})"""


def hidden_notes(vault):
    """(url, title) of every note that is not `free: true` (private or draft), for the
    notes whose front matter this script reads with certainty (see `private_note`)."""
    out = []
    for dirpath, dirnames, files in os.walk(vault):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(files):
            if not f.endswith(".md"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), vault).replace(os.sep, "/")
            with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                fm = front_matter(fh.read()) or ""
            free = re.search(r"^free\s*:\s*(true|True|TRUE)\s*(#.*)?$", fm, re.M)
            draft = re.search(r"^draft\s*:\s*(true|True|TRUE)\s*(#.*)?$", fm, re.M)
            if free and not draft:
                continue
            m = re.search(r"^title\s*:\s*(.+?)\s*$", fm, re.M)
            out.append((url_of(rel), m.group(1).strip("'\"") if m else f[:-3]))
    return out


def check_graphs(cdp, base, vault, check, shot):
    """/graph and a note's local graph: drawn, readable in light and dark, no script,
    and no hidden note among their nodes."""
    hidden = hidden_notes(vault)
    hidden_urls = {u for u, _ in hidden}
    hidden_titles = {t for _, t in hidden}
    for path, sel, name in (("/graph", "svg.graph-site", "graph"),
                            (url_of(GRAPH_NOTE), "section.local-graph svg.graph-local", "local-graph")):
        status, _, _ = cdp.navigate(base + path)
        if name == "local-graph":
            cdp.eval("(document.querySelector('section.local-graph') || document.body).scrollIntoView(); 1")
        got = {}
        for scheme in ("light", "dark"):
            cdp.color_scheme(scheme)
            g = cdp.eval(f"{GRAPH_JS}({json.dumps(sel)})") or {}
            got[scheme] = g
            shot(f"{name}.png" if scheme == "light" else f"{name}-dark.png")
        cdp.color_scheme("light")
        g = got["light"]
        leaked = sorted((set(g.get("hrefs", [])) & hidden_urls) | (set(g.get("titles", [])) & hidden_titles))
        want_here = 1 if name == "local-graph" else 0
        check(f"{path}: the {name} is drawn, links its nodes, needs no script",
              status == 200 and g.get("nodes", 0) > (3 if name == "graph" else 1)
              and g.get("here") == want_here and g.get("scripts") == 0,
              f"status {status}, {g.get('nodes')} nodes, {g.get('here')} marked here, {g.get('scripts')} scripts")
        check(f"{path}: the {name} shows no private or draft note", not leaked and hidden,
              f"{len(hidden)} hidden notes known; leaked {leaked[:5]}")
        for scheme in ("light", "dark"):
            r, px = got[scheme].get("ratio"), got[scheme].get("label_px", 0)
            check(f"{path}: {name} labels are readable in {scheme} mode (contrast >= 4.5, >= 10 px)",
                  r is not None and r >= 4.5 and px >= 10, f"contrast {r}:1, label {px} px high")


def run_checks(cdp, base, vault, out, check, shots):
    def shot(name):
        path = os.path.join(out, name)
        cdp.screenshot(path)
        shots.append(path)

    def no_overflow(label, width):
        # Against the emulated width too: on a mobile viewport chromium widens the layout
        # viewport (innerWidth) to fit content that is too wide, hiding the overflow.
        sw, iw = cdp.eval("[document.documentElement.scrollWidth, window.innerWidth]")
        check(f"{label} has no horizontal overflow", sw <= iw == width,
              f"scrollWidth {sw}, innerWidth {iw}, viewport {width}")

    expected_404 = set()

    # 1. The index, at desktop and mobile widths.
    for w, h, mobile, name in ((1280, 800, False, "index-desktop.png"), (390, 844, True, "index-mobile.png")):
        cdp.viewport(w, h, mobile)
        status, _, _ = cdp.navigate(base + "/")
        h1 = cdp.eval("(document.querySelector('h1') || {}).textContent || null")
        notes = cdp.eval("document.querySelectorAll('ul.notes a[href]').length")
        check(f"index at {w}x{h} loads", status == 200 and h1 and notes > 0,
              f"status {status}, h1 {h1!r}, {notes} notes listed in ul.notes")
        no_overflow(f"index at {w}x{h}", w)
        shot(name)
    cdp.viewport(1280, 800, False)

    # 2. A public note: styled, a cache hit when loaded again, light and dark.
    note = cdp.eval("(document.querySelector('ul.notes a[href]') || {}).getAttribute?.('href') || null")
    if not note:
        check("the index links to a note", False, "no link in ul.notes")
        return expected_404
    status, headers, _ = cdp.navigate(base + note)
    first_cs = headers.get("cache-status", "none")
    article = cdp.eval("!!document.querySelector('article.note')")
    styled = cdp.eval("getComputedStyle(document.querySelector('main')).maxWidth")
    check("a public note loads", status == 200 and article,
          f"{note}: status {status}, article.note {'present' if article else 'missing'}")
    check("the note is styled by the stylesheet", styled not in ("none", None),
          f"computed max-width of main: {styled}")
    status, headers, _ = cdp.navigate(base + note)
    cs = headers.get("cache-status", "")
    check("loading the note again is a cache hit", status == 200 and "hit" in cs,
          f"status {status}, Cache-Status first {first_cs!r}, then {cs or 'none'!r}")
    shot("note.png")
    light = cdp.eval(CONTRAST_JS)
    cdp.color_scheme("dark")
    dark = cdp.eval(CONTRAST_JS)
    shot("note-dark.png")
    cdp.color_scheme("light")
    check("dark mode changes the page background", light["background"] != dark["background"],
          f"{light['background']} (light) -> {dark['background']} (dark)")
    for scheme, c in (("light", light), ("dark", dark)):
        ratios = {k: c[k + "_ratio"] for k in ("text", "link", "muted")}
        low = {k: v for k, v in ratios.items() if v is None or v < 4.5}
        check(f"note text is readable in {scheme} mode (contrast >= 4.5)", not low,
              ", ".join(f"{k} {c[k]} {v}:1" for k, v in ratios.items()) + f" on {c['background']}")
    cdp.viewport(390, 844, True)
    cdp.navigate(base + note)
    no_overflow("the note at 390x844", 390)
    shot("note-mobile.png")
    cdp.viewport(1280, 800, False)

    # 2b. Obsidian's constructs, rendered on the server: a callout, a formula, a
    # diagram and a transclusion on one note, light and dark (console errors and CSP
    # violations are collected for the whole run, as for every page).
    check_obsidian_note(cdp, base, check, shot)

    # 2c. The graphs: the site's and a note's, light and dark.
    check_graphs(cdp, base, vault, check, shot)

    # 2d. A base's views and a canvas, light and dark.
    check_bases_and_canvas(cdp, base, check, shot)

    # 3. Search: results with highlights, and a query FTS5 cannot parse as typed.
    status, _, _ = cdp.navigate(base + "/search?q=cache")
    n = cdp.eval("document.querySelectorAll('ol.results li').length")
    marks = cdp.eval("document.querySelectorAll('ol.results mark').length")
    check("search for 'cache' lists highlighted results", status == 200 and n > 0 and marks > 0,
          f"status {status}, {n} results, {marks} <mark>s")
    shot("search.png")
    status, _, _ = cdp.navigate(base + "/search?q=%22unbalanced")
    said = cdp.eval("Array.from(document.querySelectorAll('main [role=status], main [role=alert], main .error'))"
                    ".map(e => e.className + ': ' + e.textContent.trim()).join(' | ')")
    error = cdp.eval("!!document.querySelector('main .error, main [role=alert]') || "
                     "!document.querySelector('form.search-page')")
    check("search for '\"unbalanced' is answered without an error", status == 200 and not error,
          f"status {status}; page says {said!r}")

    # 4. Sign-in targets: hostile ones land on the site's root, a good one on its page.
    check_sign_in_targets(cdp, base, check)

    # 5. Signing in to read a private note, and signing out again.
    found = private_note(vault)
    if not found:
        check("the vault has a private note", False, "every note is free or a draft")
        return expected_404
    purl, ptitle, ppath = found
    expected_404.add(purl)
    status, _, _ = cdp.navigate(base + purl)
    check("a private note is a 404 for an anonymous reader", status == 404,
          f"{ppath} at {purl}: status {status}")
    status, _, _ = cdp.navigate(base + "/login?next=" + urllib.parse.quote(purl, safe="/"))
    form = cdp.eval("!!document.querySelector('form.login input[name=name]') && "
                    "!!document.querySelector('form.login input[name=password]')")
    nxt = cdp.eval("(document.querySelector('form.login input[name=next]') || {}).value || null")
    check("the sign-in page shows the form", status == 200 and form and nxt == purl,
          f"status {status}, form {'present' if form else 'missing'}, next {nxt!r}")
    if not form:
        return expected_404
    cdp.eval(f"(() => {{ const f = document.querySelector('form.login');"
             f" f.elements.name.value = {json.dumps(READER)};"
             f" f.elements.password.value = {json.dumps(READER_PASSWORD)}; return 1; }})()")
    shot("login.png")
    status, headers, _ = cdp.navigate(js="document.querySelector('form.login').submit(); 1")
    path = cdp.eval("location.pathname")
    h1 = cdp.eval("(document.querySelector('article.note h1') || {}).textContent || null")
    check("signing in leads to the private note", status == 200 and path == purl and h1 and ptitle in h1,
          f"landed on {path} with status {status}, h1 {h1!r} (expected {ptitle!r})")
    cc = headers.get("cache-control", "")
    check("the signed-in page is private to the browser", "private" in cc,
          f"Cache-Control {cc or 'none'!r}")
    acct = cdp.eval("(document.querySelector('header a.reader') || {}).textContent || null")
    out_btn = cdp.eval("(document.querySelector('header form[action=\"/logout\"] button') || {}).textContent || null")
    check("the header shows an Account link and a Sign out button",
          acct and acct.strip() == "Account" and out_btn and out_btn.strip() == "Sign out",
          f"link {acct!r}, button {out_btn!r}")
    # Signed-in pages are cached by audience: once the readers' versions are made
    # (in the background, after the first signed-in request), a reload is a hit from
    # the readers' entry, with no name on it.
    cs, deadline = "", time.time() + 10
    while time.time() < deadline:
        status, headers, _ = cdp.navigate(base + purl)
        cs = headers.get("cache-status", "")
        if "hit" in cs and "audience-reader" in cs:
            break
        time.sleep(0.3)
    check("a signed-in reader's page comes from the readers' cached entry",
          status == 200 and "hit" in cs and "audience-reader" in cs, f"Cache-Status {cs!r}")
    body = cdp.eval("document.body.innerText")
    check("the cached page names no reader", "Signed in as" not in body,
          "the page says who is signed in")
    status, _, _ = cdp.navigate(base + "/account")
    name = cdp.eval("(document.querySelector('.reader-name') || {}).textContent || null")
    check("/account shows the reader's name", status == 200 and name == READER,
          f"status {status}, name {name!r}")
    cdp.navigate(base + purl)
    shot("private-note.png")
    status, _, _ = cdp.navigate(js="document.querySelector('header form[action=\"/logout\"]').submit(); 1")
    signin = cdp.eval("!!document.querySelector('header a[href^=\"/login\"]')")
    check("signing out shows a Sign in link again", status == 200 and signin,
          f"status {status}, now at {cdp.eval('location.pathname')}")
    status, _, _ = cdp.navigate(base + purl)
    check("after signing out the private note is a 404 again", status == 404, f"status {status}")
    return expected_404


# ---- HTTPS: a certificate for the run, and the browser over HTTP/2 -------------------

def make_cert(folder):
    """A self-signed P-256 certificate for localhost and 127.0.0.1 made with openssl;
    returns (cert, key, the base64 SHA-256 of its public key) or None without openssl.
    Chromium accepts it by that hash (--ignore-certificate-errors-spki-list), so the
    run needs no change to any trust store."""
    if not shutil.which("openssl"):
        return None
    cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    pub = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"],
                         check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub,
                         check=True, capture_output=True).stdout

    return cert, key, base64.b64encode(hashlib.sha256(der).digest()).decode()


def check_https(cdp, quire, vault, tmp, out, tls, check):
    """Serves `vault` over HTTPS with a redirect listener; checks the browser gets the
    index over HTTP/2 with HSTS-free defaults, and that plain HTTP lands on HTTPS."""

    cert, key, _ = tls
    port, plain = free_port(), free_port()
    base = f"https://localhost:{port}"
    log_path = os.path.join(out, "quire-https.log")
    with open(log_path, "w") as log:
        server = subprocess.Popen([quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
                                   "--listen-http", f"127.0.0.1:{plain}",
                                   "--tls-cert", cert, "--tls-key", key,
                                   "--cache", os.path.join(tmp, "cache-https.vol"),
                                   "--workers", "1"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        wait_until_up(server, base, log_path, context=ssl.create_default_context(cafile=cert))
        status, _, url = cdp.navigate(base + "/")
        proto = cdp.eval("performance.getEntriesByType('navigation')[0].nextHopProtocol")
        check("HTTPS: the index loads over HTTP/2", status == 200 and proto == "h2",
              f"status {status}, protocol {proto!r}, url {url}")
        status, _, url = cdp.navigate(f"http://localhost:{plain}/search")
        proto = cdp.eval("performance.getEntriesByType('navigation')[0].nextHopProtocol")
        check("HTTPS: plain HTTP is redirected to the same path over HTTPS",
              status == 200 and url == base + "/search" and proto == "h2",
              f"status {status}, landed on {url}, protocol {proto!r}")
    finally:
        cdp.leave()
        stop(server)


def check_prefetch(cdp, base, check):
    """Pages name their speculation rules under `script-src 'none'`; hovering a link
    to a stored note prefetches it (quire answers prefetches only from the cache),
    and following the link is served from the prefetch."""
    status, headers, _ = cdp.navigate(base + "/")
    rules = headers.get("speculation-rules", "")
    csp = headers.get("content-security-policy", "")
    check("pages name their speculation rules, under script-src 'none'",
          status == 200 and rules.startswith('"/_static/speculation-rules.json?v=')
          and "script-src 'none'" in csp, f"Speculation-Rules {rules!r}, CSP {csp[:80]!r}")
    link = cdp.eval("""(() => { const skip = /^\/(tags|login|logout|search|graph|account|feed|sitemap|_|attachments|api)/;
        const a = [...document.querySelectorAll('a[href^="/"]')].find(a => a.getAttribute('href') !== '/' &&
            !skip.test(a.getAttribute('href')));
        if (!a) return null; a.scrollIntoView({block: 'center'}); a.id = 'prefetch-me';
        const r = a.getClientRects()[0];
        return {x: r.left + r.width / 2, y: r.top + r.height / 2, href: a.getAttribute('href')}; })()""")
    if not link:
        check("a hovered link is prefetched and its navigation served from the prefetch", False,
              "no link to a note on /")
        return
    # Stored before the hover, so the prefetch is a hit: quire never renders for one.
    for _ in range(2):
        urllib.request.urlopen(base + link["href"], timeout=10).read()
    # Earlier checks may have visited it: out of the browser's HTTP cache, the
    # navigation comes from the prefetch or from quire.
    cdp.call("Network.clearBrowserCache")
    cdp.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": link["x"], "y": link["y"]})
    cdp.pump(1.5)
    cdp.navigate(js="document.getElementById('prefetch-me').click()")
    timing = ("(() => { const n = performance.getEntriesByType('navigation')[0];"
              " return {type: n.deliveryType, ms: n.responseEnd - n.startTime}; })()")
    pre = cdp.eval(timing)
    # The same page again, clicked without a hover (so not prefetched), from quire's
    # cache: what the prefetch saved.
    cdp.navigate(base + "/")
    cdp.call("Network.clearBrowserCache")
    cdp.eval("""(() => { const a = [...document.querySelectorAll('a')].find(a =>
        a.getAttribute('href') === %s); a.id = 'plain-click'; return 1; })()""" % json.dumps(link["href"]))
    cdp.navigate(js="document.getElementById('plain-click').click()")
    plain = cdp.eval(timing)
    check("a hovered link is prefetched and its navigation served from the prefetch",
          pre["type"] == "navigational-prefetch",
          f"{link['href']}: deliveryType {pre['type']!r}, response in {pre['ms']:.1f} ms; "
          f"clicked without a hover: {plain['type']!r}, {plain['ms']:.1f} ms (a cache hit)")


def serve_copy(quire, vault, tmp, out, name, settings=None):
    """Starts `quire serve` (one worker, on a free loopback port) on a copy of `vault`
    with `settings` appended to its site.toml; returns the process, its base URL and
    its log's path (`out/quire-NAME.log`)."""
    copy = os.path.join(tmp, f"vault-{name}")
    shutil.copytree(vault, copy, ignore=shutil.ignore_patterns("*.db", "*.db-*", "secret", "sessions"))
    if settings:
        with open(os.path.join(copy, ".quire", "site.toml"), "a") as f:
            f.write(f"\n{settings}\n")
    port = free_port()
    log_path = os.path.join(out, f"quire-{name}.log")
    with open(log_path, "w") as log:
        server = subprocess.Popen([quire, "serve", copy, "--listen", f"127.0.0.1:{port}",
                                   "--cache", os.path.join(tmp, f"cache-{name}.vol"), "--workers", "1"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    return server, f"http://127.0.0.1:{port}", log_path


def check_page_script(cdp, quire, vault, tmp, out, check, shot):
    """Serves a copy of `vault` with `hover_previews = true`: the page script must run
    under the page's hashed CSP (its violations are collected with the rest of the
    run's), show a preview on hovering a link, and make /graph zoomable."""
    server, base, log_path = serve_copy(quire, vault, tmp, out, "script", "hover_previews = true")
    try:
        wait_until_up(server, base, log_path)
        status, headers, _ = cdp.navigate(base + url_of(GRAPH_NOTE))
        csp = headers.get("content-security-policy", "")
        integrity = cdp.eval("(document.querySelector('script[integrity]') || {}).integrity || null")
        check("with hover_previews the page loads one script allowed by its hash",
              status == 200 and integrity and f"script-src '{integrity}'" in csp,
              f"integrity {integrity!r}, CSP {csp[:160]!r}")
        link = cdp.eval("""(() => { const a = document.querySelector('article .body a.wikilink[href^="/"]');
            if (!a) return null; a.scrollIntoView({block: 'center'});
            const r = a.getClientRects()[0];  // a link wrapped over two lines: its first box
            return {x: r.left + r.width / 2, y: r.top + r.height / 2, href: a.getAttribute('href')}; })()""")
        pop = None
        if link:
            cdp.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": link["x"], "y": link["y"]})
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and not pop:
                cdp.pump(0.2)
                pop = cdp.eval("(() => { const p = document.querySelector('.popover'); "
                               "return p && !p.hidden ? p.textContent.trim().slice(0, 120) : null; })()")
        check("hovering a link shows its note's preview", bool(pop),
              f"link {link and link.get('href')!r}, popover {pop!r}")
        shot("hover-preview.png")
        cdp.navigate(base + "/graph")
        cdp.pump(0.3)
        zoom = cdp.eval("!!document.querySelector('.graph-zoom button') && "
                        "document.querySelector('svg.graph-site').classList.contains('zoomable')")
        check("with hover_previews /graph gets pan and zoom", zoom, f"zoom controls {'present' if zoom else 'missing'}")
        shot("graph-zoomable.png")
    finally:
        cdp.leave()
        stop(server)


DICTIONARY_NOTES = ("Caching/HTTP Caching Basics.md", "Caching/Vary Header.md")


def dcz_variant(base, path, dict_hash, seconds=10):
    """Asks quire for `path` as a browser holding the dictionary `dict_hash` (hex
    SHA-256) would, until the answer is `Content-Encoding: dcz` (the variant is made in
    the background after the first request); returns the last answer's headers."""
    avail = ":" + base64.b64encode(bytes.fromhex(dict_hash)).decode() + ":"
    deadline = time.monotonic() + seconds
    while True:
        req = urllib.request.Request(base + path, headers={
            "Accept-Encoding": "gzip, br, zstd, dcz", "Available-Dictionary": avail})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
            headers = {k.lower(): v for k, v in r.headers.items()}
            vary = ", ".join(r.headers.get_all("Vary") or [])
        headers["vary"] = vary
        if headers.get("content-encoding") == "dcz" or time.monotonic() > deadline:
            return headers
        time.sleep(0.2)


def check_dictionary(cdp, quire, vault, tmp, out, check):
    """RFC 9842 compression dictionaries, end to end: serves a copy of `vault` on plain
    http://127.0.0.1 (a potentially trustworthy origin, where chromium uses dictionaries
    with no flags), warms two notes until quire has their `dcz` variants, loads note A
    in the browser, waits for it to fetch the dictionary its `Link` header names, then
    loads note B: B's request must name that dictionary in `Available-Dictionary`, its
    response must be `Content-Encoding: dcz` varying on `Available-Dictionary`, and the
    page the browser decoded must be the note (title and text as quire serves it
    uncompressed)."""
    name = "a note is fetched with the site's compression dictionary (dcz) and renders"
    server, base, log_path = serve_copy(quire, vault, tmp, out, "dictionary")
    try:
        wait_until_up(server, base, log_path)
        a, b = (url_of(n) for n in DICTIONARY_NOTES)
        # First requests (identity: urllib asks for no compression) store the pages and
        # give B's text as quire serves it, and the dictionary the pages name.
        plain = {}
        for path in (a, b):
            with urllib.request.urlopen(base + path, timeout=10) as r:
                plain[path] = (r.headers.get("Link", ""), r.read().decode("utf-8", "replace"))
        m = re.search(r"</_static/dictionary-([0-9a-f]{64})\.dict>;\s*rel=\"?compression-dictionary", plain[a][0])
        if not m:
            check(name, False, f"{a} has no Link rel=compression-dictionary: {plain[a][0]!r}")
            return
        dict_hash, dict_path = m.group(1), f"/_static/dictionary-{m.group(1)}.dict"
        with urllib.request.urlopen(base + dict_path, timeout=10) as r:
            body = r.read()
        if hashlib.sha256(body).hexdigest() != dict_hash:
            check(name, False, f"{dict_path} hashes to {hashlib.sha256(body).hexdigest()}, not its name")
            return
        warmed = {p: dcz_variant(base, p, dict_hash) for p in (a, b)}
        cold = [p for p, h in warmed.items() if h.get("content-encoding") != "dcz"]
        if cold:
            check(name, False, "quire made no dcz variant within 10 s for "
                  + ", ".join(f"{p} (Content-Encoding {warmed[p].get('content-encoding')!r})" for p in cold))
            return

        # A: the browser fetches the dictionary after the page (at idle priority).
        cdp.events = []
        status_a, _, _ = cdp.navigate(base + a)
        dict_req, fetched = None, False
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not fetched:
            cdp.pump(0.2)
            for e in cdp.events:
                p = e.get("params", {})
                if (e.get("method") == "Network.requestWillBeSent"
                        and urllib.parse.urlsplit(p["request"]["url"]).path == dict_path):
                    dict_req = p["requestId"]
                elif e.get("method") == "Network.loadingFinished" and dict_req and p.get("requestId") == dict_req:
                    fetched = True
        if not fetched:
            check(name, False, f"{a}: status {status_a}, the browser did not fetch {dict_path} within 8 s"
                  f" ({'requested' if dict_req else 'not requested'})")
            return
        cdp.pump(0.5)  # the dictionary is stored once read

        # B: a page the browser has not seen, so its request goes to quire.
        cdp.events = []
        status_b, doc_headers, _ = cdp.navigate(base + b)
        req_id = next((e["params"]["requestId"] for e in cdp.events
                       if e.get("method") == "Network.requestWillBeSent"
                       and e["params"].get("type") == "Document"
                       and urllib.parse.urlsplit(e["params"]["request"]["url"]).path == b), None)
        sent, got = extra_headers(cdp, req_id)
        got = got or doc_headers
        want_avail = ":" + base64.b64encode(bytes.fromhex(dict_hash)).decode() + ":"
        vary = [v.strip().lower() for v in re.split(r"[,\n]", got.get("vary", ""))]

        plain_title = re.search(r"<title>(.*?)</title>", plain[b][1], re.S)
        plain_title = html.unescape(plain_title.group(1)) if plain_title else None
        plain_desc = re.search(r'<meta name="description" content="([^"]*)"', plain[b][1])
        plain_desc = html.unescape(plain_desc.group(1)) if plain_desc else ""
        seen = cdp.eval("({title: document.title, text: document.body ? document.body.innerText : '',"
                        " desc: (document.querySelector('meta[name=description]') || {}).content || ''})") or {}
        # The description is the note's opening text, cut with an ellipsis.
        opening = plain_desc.rstrip("…")[:60]
        renders = (plain_title and seen.get("title") == plain_title and seen.get("desc") == plain_desc
                   and opening and opening in " ".join(seen.get("text", "").split()))
        ok = (status_b == 200 and sent.get("available-dictionary") == want_avail
              and "dcz" in sent.get("accept-encoding", "")
              and got.get("content-encoding") == "dcz" and "available-dictionary" in vary
              and renders)
        check(name, ok,
              f"{b}: status {status_b}; request Accept-Encoding {sent.get('accept-encoding')!r}, "
              f"Available-Dictionary {sent.get('available-dictionary')!r} (want {want_avail!r}), "
              f"Dictionary-ID {sent.get('dictionary-id')!r}; response Content-Encoding "
              f"{got.get('content-encoding')!r}, Vary {got.get('vary', '')!r}; title {seen.get('title')!r} "
              f"(want {plain_title!r}), opening text {'found' if renders else 'NOT found'}: {opening!r}")
    finally:
        cdp.leave()
        stop(server)


def stylesheet_of(base, path):
    """The versioned stylesheet URL (`/_static/style.css?v=...`) the page at `path`
    links, as quire serves the page now."""
    with urllib.request.urlopen(base + path, timeout=10) as r:
        page = html.unescape(r.read().decode("utf-8", "replace"))
    m = re.search(r'href="(/_static/style\.css\?v=[0-9a-f]+)"', page)
    return m.group(1) if m else None


def extra_headers(cdp, req_id, seconds=3):
    """The request and response headers chromium reports for request `req_id`."""
    sent, got = None, None
    deadline = time.monotonic() + seconds
    while req_id and time.monotonic() < deadline and (sent is None or got is None):
        for e in cdp.events:
            p = e.get("params", {})
            if p.get("requestId") != req_id:
                continue
            if e.get("method") == "Network.requestWillBeSentExtraInfo":
                sent = {k.lower(): v for k, v in p.get("headers", {}).items()}
            elif e.get("method") == "Network.responseReceivedExtraInfo":
                got = {k.lower(): v for k, v in p.get("headers", {}).items()}
        if sent is None or got is None:
            cdp.pump(0.2)
    return sent or {}, got or {}


def check_stylesheet_delta(cdp, quire, vault, tmp, out, check):
    """Asset deltas (RFC 9842): the browser loads note A, whose versioned stylesheet
    quire marks `Use-As-Dictionary` for later versions; the site is restyled (one rule
    more in `.quire/templates/style.css`, picked up by the watcher); note B then links
    the new version, and the browser's request for it must name the old stylesheet in
    `Available-Dictionary`, its answer must be `Content-Encoding: dcz`, and the new
    rule must apply to the page."""
    name = "a restyled stylesheet arrives as a dcz delta of the one the browser holds, and applies"
    server, base, log_path = serve_copy(quire, vault, tmp, out, "delta")
    copy = os.path.join(tmp, "vault-delta")
    try:
        wait_until_up(server, base, log_path)
        a, b = (url_of(n) for n in DICTIONARY_NOTES)
        old_url = stylesheet_of(base, a)
        with urllib.request.urlopen(base + old_url, timeout=10) as r:
            old_css, use_as = r.read(), r.headers.get("Use-As-Dictionary", "")
        cdp.events = []
        cdp.navigate(base + a)
        cdp.pump(1.0)  # the stylesheet is kept as a dictionary once read
        marked = "rgb(1, 2, 3)"
        os.makedirs(os.path.join(copy, ".quire", "templates"), exist_ok=True)
        with open(os.path.join(copy, ".quire", "templates", "style.css"), "wb") as f:
            f.write(old_css + b"\nbody { outline: 3px solid " + marked.encode() + b"; }\n")
        new_url, deadline = old_url, time.monotonic() + 20
        while new_url == old_url and time.monotonic() < deadline:
            time.sleep(0.3)
            new_url = stylesheet_of(base, b)
        if new_url == old_url:
            check(name, False, f"{b} still links {old_url} 20 s after the restyle")
            return
        old_hash = hashlib.sha256(old_css).hexdigest()
        warmed = dcz_variant(base, new_url, old_hash)
        if warmed.get("content-encoding") != "dcz":
            check(name, False, f"quire made no dcz variant of {new_url} against {old_url} "
                  f"(Use-As-Dictionary {use_as!r}, Content-Encoding {warmed.get('content-encoding')!r})")
            return
        cdp.events = []
        status_b, _, _ = cdp.navigate(base + b)
        req_id = next((e["params"]["requestId"] for e in cdp.events
                       if e.get("method") == "Network.requestWillBeSent"
                       and e["params"]["request"]["url"].endswith(new_url)), None)
        sent, got = extra_headers(cdp, req_id)
        outline = cdp.eval("getComputedStyle(document.body).outlineColor")
        want = ":" + base64.b64encode(bytes.fromhex(old_hash)).decode() + ":"
        ok = (status_b == 200 and sent.get("available-dictionary") == want
              and got.get("content-encoding") == "dcz" and outline == marked)
        check(name, ok,
              f"{b}: status {status_b}; {new_url} {'requested' if req_id else 'NOT requested'} with "
              f"Available-Dictionary {sent.get('available-dictionary')!r} (want {want!r}); response "
              f"Content-Encoding {got.get('content-encoding')!r}; body outline {outline!r} (want {marked!r})")
    finally:
        cdp.leave()
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_quire = os.path.join(ROOT, "target", "release", "quire")
    if not os.path.exists(default_quire) and os.environ.get("CARGO_TARGET_DIR"):
        default_quire = os.path.join(os.environ["CARGO_TARGET_DIR"], "release", "quire")
    ap.add_argument("--quire", default=default_quire, help="the quire binary (default %(default)s)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "browser-check"),
                    help="folder for screenshots and report.json (default %(default)s)")
    ap.add_argument("--chromium", default="chromium", help="the browser (default %(default)s)")
    ap.add_argument("--timeout", type=int, default=90, help="overall time limit in seconds")
    args = ap.parse_args()

    chromium = shutil.which(args.chromium)
    if not chromium:
        print(f"browser-check: {args.chromium} not found; install Debian's chromium "
              f"(apt-get install chromium) or pass --chromium PATH", file=sys.stderr)
        return 2
    if not (os.path.isfile(args.quire) and os.access(args.quire, os.X_OK)):
        print(f"browser-check: {args.quire} not found; build it (cargo build --release -p quire) "
              f"or pass --quire PATH", file=sys.stderr)
        return 2
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for old in os.listdir(out):
        if old.endswith(".png") or old == "report.json":
            os.remove(os.path.join(out, old))

    results, shots = [], []

    def check(name, ok, why=""):
        results.append({"check": name, "ok": bool(ok), "detail": why})
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + why if why else ''}", flush=True)

    def on_alarm(*_):
        raise Timeout(f"the whole run took longer than {args.timeout} s")

    tmp = tempfile.mkdtemp(prefix="quire-browser-check-")
    server = cdp = None
    version = None
    problems, ignored = [], []
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    try:
        vault = os.path.join(tmp, "vault")
        copy_vault(vault)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        quire_log = os.path.join(out, "quire.log")
        with open(quire_log, "w") as log:
            server = subprocess.Popen([args.quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
                                       "--cache", os.path.join(tmp, "cache.vol"), "--workers", "1"],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        wait_until_up(server, base, quire_log)
        tls = make_cert(tmp)
        extra = [f"--ignore-certificate-errors-spki-list={tls[2]}"] if tls else []
        cdp = Cdp(chromium, os.path.join(tmp, "profile"), os.path.join(out, "chromium.log"),
                  extra)
        version = cdp.call("Browser.getVersion", session=False).get("product")
        cdp.open_page()
        expected_404 = run_checks(cdp, base, vault, out, check, shots)
        check_prefetch(cdp, base, check)
        check_page_script(cdp, args.quire, vault, tmp, out, check,
                          lambda name: (cdp.screenshot(os.path.join(out, name)),
                                        shots.append(os.path.join(out, name))))
        check_dictionary(cdp, args.quire, vault, tmp, out, check)
        check_stylesheet_delta(cdp, args.quire, vault, tmp, out, check)
        if tls:
            check_https(cdp, args.quire, vault, tmp, out, tls, check)
        else:
            print("openssl not found: skipping the HTTPS checks", flush=True)

        # 6. Nothing went wrong in the console over the whole run: no script errors, no
        # CSP violations, no failed loads but the 404s asked for above (and favicons).
        cdp.pump(0.5)

        def expected(p):
            path = urllib.parse.urlsplit(p["url"]).path
            return p["source"] == "network" and (path in expected_404 or path.endswith("/favicon.ico"))

        problems = [p for p in cdp.problems if not expected(p)]
        ignored = [p for p in cdp.problems if expected(p)]
        check("no console errors or CSP violations", not problems,
              "; ".join(f"[{p['source']}] {p['text'][:200]} (at {p['where']})" for p in problems[:5]))
        # ... and that check can see one: break a page's CSP on purpose (on one of the
        # main server's pages: the checks before left theirs for about:blank).
        cdp.navigate(base + "/")
        seen = len(cdp.problems)
        cdp.eval("(() => { const s = document.createElement('script'); s.textContent = '1';"
                 " document.head.appendChild(s); return 1; })()")
        cdp.pump(1.0)
        caught = [p for p in cdp.problems[seen:] if "Content Security Policy" in p["text"]]
        check("a deliberate CSP violation is reported (self-test of the previous check)", caught,
              caught[0]["text"][:160] if caught else "no console message for an inline script")
    except Exception as e:
        check("the run completed", False, f"{type(e).__name__}: {e}")
    finally:
        signal.alarm(0)
        if cdp:
            cdp.close()
        if server and server.poll() is None:
            stop(server)
        shutil.rmtree(tmp, ignore_errors=True)

    failed = [r for r in results if not r["ok"]]
    report = {"ok": not failed, "quire": os.path.abspath(args.quire), "chromium": version,
              "checks": results, "screenshots": [os.path.basename(s) for s in shots],
              "console_problems": problems, "console_expected_404s": ignored}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed.")
    print(f"Screenshots in {out}: {', '.join(os.path.basename(s) for s in shots) or 'none'}")
    print(f"Report: {os.path.join(out, 'report.json')}; logs: quire.log, chromium.log")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
