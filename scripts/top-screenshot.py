#!/usr/bin/env python3
"""A screenshot of `quire top`'s live view on a loaded server, for the docs: starts
`quire serve` on examples/vault with an admin token, loads it with `quire bench load`
(pages and a few missing URLs), runs `quire top` in a pseudo-terminal of 110x34 for
a few seconds, replays what it drew through a terminal emulator (pyte), and renders
the final screen as HTML, which headless chromium turns into a PNG. Also writes the
`quire top --once` text of the same moment.

    pip install pyte; python3 scripts/top-screenshot.py --quire target/release/quire --out DIR
"""
import argparse
import html
import os
import pty
import select
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pyte

COLS, ROWS = 110, 34
TOKEN = 'screenshot-token-0123456789'
COLOURS = {'default': None, 'black': '#000', 'red': '#e06c75', 'green': '#98c379',
           'yellow': '#e5c07b', 'blue': '#61afef', 'magenta': '#c678dd', 'cyan': '#56b6c2',
           'white': '#dcdfe4', 'brightblack': '#7f848e'}


def colour(c, fallback):
    if c in COLOURS and COLOURS[c]:
        return COLOURS[c]
    if isinstance(c, str) and len(c) == 6 and all(ch in '0123456789abcdefABCDEF' for ch in c):
        return '#' + c
    return fallback


def screen_html(screen):
    rows = []
    for y in range(screen.lines):
        line = screen.buffer[y]
        out = []
        for x in range(screen.columns):
            ch = line[x]
            fg = colour(ch.fg, '#dcdfe4')
            bg = colour(ch.bg, '#1e2127')
            if ch.reverse:
                fg, bg = bg, fg
            weight = 'bold' if ch.bold else 'normal'
            out.append(f'<span style="color:{fg};background:{bg};font-weight:{weight}">'
                       f'{html.escape(ch.data or " ")}</span>')
        rows.append(''.join(out))
    return ('<!doctype html><meta charset=utf-8><body style="margin:0;background:#1e2127">'
            '<pre style="margin:12px;font:14px/1.25 DejaVu Sans Mono,monospace">'
            + '\n'.join(rows) + '</pre>')


def wait_up(url):
    for _ in range(200):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f'{url} did not come up')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quire', default='target/release/quire')
    ap.add_argument('--out', default='.')
    ap.add_argument('--port', type=int, default=18097)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp()
    vault = os.path.join(work, 'vault')
    shutil.copytree('examples/vault', vault, ignore=shutil.ignore_patterns('*.db*', 'secret', 'sessions'))
    env = dict(os.environ, QUIRE_ADMIN_TOKEN=TOKEN, NO_COLOR='1')
    base = f'http://127.0.0.1:{a.port}'
    serve = subprocess.Popen([a.quire, 'serve', '--listen', f'127.0.0.1:{a.port}',
                              '--cache', os.path.join(work, 'c.vol'), vault],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [serve]
    try:
        wait_up(base + '/')
        urls = os.path.join(work, 'urls.txt')
        sitemap = urllib.request.urlopen(base + '/sitemap.xml').read().decode()
        paths = [l.split('<loc>')[1].split('</loc>')[0].split(str(a.port), 1)[1]
                 for l in sitemap.splitlines() if '<loc>' in l]
        with open(urls, 'w') as f:
            f.write('\n'.join(paths + ['/no-such-note', '/missing/page', '/old-link']) + '\n')
        load = subprocess.Popen([a.quire, 'bench', 'load', '--host', f'127.0.0.1:{a.port}',
                                 '--paths', urls, '--connections', '8', '--duration', '20',
                                 '--accept-encoding', 'gzip'],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(load)
        time.sleep(3)
        pid, fd = pty.fork()
        if pid == 0:
            os.environ.update(env, COLUMNS=str(COLS), LINES=str(ROWS), TERM='xterm-256color')
            os.execv(a.quire, [a.quire, 'top', '--server', base, '--interval', '1'])
        import fcntl, struct, termios
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', ROWS, COLS, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        screen = pyte.Screen(COLS, ROWS)
        stream = pyte.ByteStream(screen)
        end = time.time() + 6
        while time.time() < end:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    stream.feed(os.read(fd, 65536))
                except OSError:
                    break
        os.write(fd, b'q')
        time.sleep(0.5)
        os.waitpid(pid, 0)
        page = os.path.join(a.out, 'quire-top.html')
        with open(page, 'w') as f:
            f.write(screen_html(screen))
        png = os.path.join(a.out, 'quire-top.png')
        subprocess.run(['chromium', '--headless', '--no-sandbox', '--disable-gpu',
                        f'--screenshot={png}', '--window-size=1000,640', 'file://' + page],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        once = subprocess.run([a.quire, 'top', '--server', base, '--once'], env=env,
                              capture_output=True, text=True, check=True).stdout
        with open(os.path.join(a.out, 'quire-top-once.txt'), 'w') as f:
            f.write(once)
        print(f'{png}\n{once}')
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
