#!/usr/bin/env python3
"""Headless-browser check of `quire serve`: Debian's chromium, driven over the Chrome
DevTools Protocol (CDP on pipes: JSON messages ended by NUL on fds 3 and 4, so no
websocket library is needed), loads the index, a note, the search page and the
sign-in flow of the bundled example vault, checks what a reader would see, and saves
screenshots plus report.json as artifacts.

    python3 scripts/browser-check.py [--quire target/release/quire] [--out DIR]

Exit status: 0 all checks passed, 1 a check failed, 2 chromium or quire missing.
"""
import argparse, base64, json, os, re, shutil, socket, subprocess, sys, tempfile, time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def slug(s):
    out, dash = [], False
    for c in s:
        if c.isalnum():
            out.append(c.lower()); dash = False
        elif not dash and out:
            out.append("-"); dash = True
    return "".join(out).rstrip("-")


def url_of(rel):
    stem = rel[:-3] if rel.endswith(".md") else rel
    return "".join("/" + (slug(seg) or "-") for seg in stem.split("/") if seg)


class Cdp:
    """A CDP client on chromium's --remote-debugging-pipe."""

    def __init__(self, chromium, profile):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        args = [chromium, "--headless=new", "--disable-gpu", "--no-first-run",
                "--remote-debugging-pipe", f"--user-data-dir={profile}", "--hide-scrollbars",
                "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")
        # close_fds runs after preexec_fn in the child: keep 3 and 4 open by number.
        self.proc = subprocess.Popen(args, preexec_fn=fds, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r); os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            self.proc.kill()
        except Exception:
            pass

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, timeout=20, session=True):
        self.next_id += 1
        m = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            m["sessionId"] = self.session
        os.write(self.to_w, json.dumps(m).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            r = self._read(deadline)
            if r.get("id") == self.next_id:
                if "error" in r:
                    raise RuntimeError(f"{method}: {r['error']}")
                return r.get("result", {})
            self.events.append(r)

    def wait_event(self, method, timeout=20):
        deadline = time.time() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def open_page(self):
        t = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        a = self.call("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True},
                      session=False)
        self.session = a["sessionId"]
        for d in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{d}.enable")

    def navigate(self, url, submit_js=None):
        """Loads `url` (or runs `submit_js`, which navigates); returns (status, headers)
        of the main document as finally loaded."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        if submit_js:
            self.eval(submit_js)
        else:
            self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        doc = [e for e in self.events if e.get("method") == "Network.responseReceived"
               and e["params"].get("type") == "Document"]
        self.events = [e for e in self.events if e.get("method") != "Network.responseReceived"]
        if not doc:
            return 0, {}
        r = doc[-1]["params"]["response"]
        return r["status"], {k.lower(): v for k, v in r["headers"].items()}

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluating {expr!r}: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def viewport(self, w, h, mobile):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": mobile})

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_quire = os.path.join(ROOT, "target/release/quire")
    if not os.path.exists(default_quire) and os.environ.get("CARGO_TARGET_DIR"):
        default_quire = os.path.join(os.environ["CARGO_TARGET_DIR"], "release/quire")
    ap.add_argument("--quire", default=default_quire)
    ap.add_argument("--out", default=os.path.join(ROOT, "target/browser-check"))
    ap.add_argument("--chromium", default="chromium")
    args = ap.parse_args()
    if not shutil.which(args.chromium):
        print(f"{args.chromium} not found: install Debian's chromium"); return 2
    if not os.path.exists(args.quire):
        print(f"{args.quire} not found: cargo build --release -p quire"); return 2
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="quire-browser-")
    vault = os.path.join(tmp, "vault")
    shutil.copytree(os.path.join(ROOT, "examples/vault"), vault,
                    ignore=shutil.ignore_patterns("*.db", "*.db-*", "secret"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([args.quire, "serve", vault, "--listen", f"127.0.0.1:{port}",
                               "--cache", os.path.join(tmp, "cache.vol"), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(args.out, "quire.log"), "w"))
    results = []

    def check(name, ok, why=""):
        results.append({"check": name, "ok": bool(ok), "detail": why})
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + why if why else ''}")

    cdp = None
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/", timeout=1).read(); break
            except Exception:
                time.sleep(0.1)
        cdp = Cdp(args.chromium, os.path.join(tmp, "profile"))
        cdp.open_page()
        shot = lambda n: cdp.screenshot(os.path.join(args.out, n))

        # 1. The index, desktop and mobile.
        for (w, h, mobile, name) in ((1280, 800, False, "index-desktop.png"), (390, 844, True, "index-mobile.png")):
            cdp.viewport(w, h, mobile)
            status, _ = cdp.navigate(base + "/")
            notes = cdp.eval("document.querySelectorAll('ul.notes li a').length")
            overflow = cdp.eval("document.documentElement.scrollWidth - window.innerWidth")
            check(f"index {w}px loads", status == 200 and cdp.eval("!!document.querySelector('h1')") and notes > 10,
                  f"status {status}, {notes} notes listed")
            check(f"index {w}px has no horizontal overflow", overflow <= 0, f"{overflow}px")
            shot(name)
        cdp.viewport(1280, 800, False)

        # 2. A public note: styled, cached on the second load, dark mode.
        note = cdp.eval("document.querySelector('ul.notes li a').getAttribute('href')")
        status, _ = cdp.navigate(base + note)
        styled = cdp.eval("getComputedStyle(document.querySelector('main')).maxWidth")
        check("a note loads and is styled", status == 200 and cdp.eval("!!document.querySelector('article.note')") and styled != "none",
              f"{note}: status {status}, main max-width {styled}")
        status, headers = cdp.navigate(base + note)
        check("the note's second load is a cache hit", "hit" in headers.get("cache-status", ""),
              headers.get("cache-status", "no Cache-Status"))
        shot("note.png")
        light = cdp.eval("getComputedStyle(document.body).backgroundColor")
        cdp.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        dark = cdp.eval("getComputedStyle(document.body).backgroundColor")
        check("dark mode changes the colours", light != dark, f"{light} -> {dark}")
        shot("note-dark.png")
        cdp.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

        # 3. Search.
        status, _ = cdp.navigate(base + "/search?q=cache")
        n = cdp.eval("document.querySelectorAll('ol.results li').length")
        marks = cdp.eval("document.querySelectorAll('ol.results mark').length")
        check("search finds notes with highlights", status == 200 and n > 0 and marks > 0, f"{n} results, {marks} marks")
        shot("search.png")
        status, _ = cdp.navigate(base + "/search?q=%22unbalanced")
        check("a malformed query is answered", status == 200, f"status {status}")

        # 4. Sign-in flow to a private note.
        private = None
        for dirpath, _, files in os.walk(vault):
            if "/." in dirpath.replace(vault, ""):
                continue
            for f in sorted(files):
                if not f.endswith(".md"):
                    continue
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                fm = text.split("---")[1] if text.startswith("---") else ""
                if "free: true" not in fm and "draft: true" not in fm and re.search(r"^title:", fm, re.M):
                    private = (url_of(os.path.relpath(os.path.join(dirpath, f), vault)),
                               re.search(r"^title:\s*(.+)$", fm, re.M).group(1).strip().strip("'\""))
                    break
            if private:
                break
        purl, ptitle = private
        status, _ = cdp.navigate(base + purl)
        check("a private note is a 404 for strangers", status == 404, f"{purl}: {status}")
        status, _ = cdp.navigate(base + "/login?next=" + purl)
        check("the sign-in page loads", status == 200 and cdp.eval("!!document.querySelector('form.login')"), f"status {status}")
        cdp.eval("document.getElementById('name').value='reader';document.getElementById('password').value='reader-demo-password';1")
        shot("login.png")
        status, _ = cdp.navigate(None, submit_js="document.querySelector('form.login').submit();1")
        url = cdp.eval("location.pathname")
        h1 = cdp.eval("document.querySelector('h1') && document.querySelector('h1').textContent")
        who = cdp.eval("document.querySelector('.reader') && document.querySelector('.reader').textContent")
        check("signing in leads to the private note", status == 200 and url == purl and ptitle in (h1 or ""),
              f"{url}, status {status}, h1 {h1!r}")
        check("the header shows the reader and a sign-out button", who == "reader" and cdp.eval("!!document.querySelector('form[action=\"/logout\"] button')"),
              f"reader {who!r}")
        shot("private-note.png")
        cdp.navigate(None, submit_js="document.querySelector('form[action=\"/logout\"]').submit();1")
        status, _ = cdp.navigate(base + purl)
        check("after signing out the private note is a 404 again", status == 404, f"status {status}")

        # 5. Console errors and CSP violations over the whole run.
        errors = []
        for e in cdp.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") == "error":
                errors.append(str(p.get("args")))
            if m == "Log.entryAdded" and p["entry"].get("level") == "error":
                text = p["entry"].get("text", "")
                if "favicon" not in p["entry"].get("url", "") and "404" not in text:
                    errors.append(text)
        check("no console errors or CSP violations", not errors, "; ".join(errors[:3]))
    except Exception as e:
        check("the run completed", False, f"{type(e).__name__}: {e}")
    finally:
        if cdp:
            cdp.close()
        server.terminate()
        try:
            server.wait(10)
        except Exception:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump({"checks": results}, f, indent=2)
    failed = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed; screenshots and report.json in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
