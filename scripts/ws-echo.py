#!/usr/bin/env python3
"""WebSocket echo through `quire proxy`, against the same echo origin direct and
through nginx (when installed) as the peer.

Starts a WebSocket echo origin (RFC 6455, stdlib only, a thread per connection) and
`quire proxy` in front of it. Then, direct and through quire, CLIENTS connections each
do the opening handshake and send MESSAGES masked text frames of SIZE bytes one at a
time, waiting for each echo (a closed loop), and check every echo byte for byte.
Two rounds, interleaved. Prints round trips per second and the p50/p99 round trip
for each path, the ratios, and the handshakes' p50. nginx runs with one worker and
the usual WebSocket settings (`proxy_http_version 1.1`, `Upgrade` and
`Connection: upgrade` set).

Usage: scripts/ws-echo.py [--quire target/release/quire] [--clients 4]
                          [--messages 5000] [--size 64]
"""
import argparse
import base64
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from loopback import free_port, wait_port

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("closed")
        buf += chunk
    return buf


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise EOFError("closed in head")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    assert not rest, "no bytes after the head before the first frame"
    return head.decode()


def read_frame(s):
    b0, b1 = read_exact(s, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", read_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", read_exact(s, 8))[0]
    mask = read_exact(s, 4) if b1 & 0x80 else None
    data = read_exact(s, n)
    if mask:
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
    return b0 & 0x0F, data


def frame(opcode, data, masked):
    n = len(data)
    head = bytes([0x80 | opcode])
    mbit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + data
    mask = os.urandom(4)
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data))


def accept_key(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def echo_conn(c):
    try:
        head = read_head(c)
        key = [l.split(":", 1)[1].strip() for l in head.split("\r\n")
               if l.lower().startswith("sec-websocket-key:")][0]
        c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Accept: "
                   f"{accept_key(key)}\r\n\r\n").encode())
        while True:
            op, data = read_frame(c)
            if op == 8:
                c.sendall(frame(8, data, False))
                return
            c.sendall(frame(op, data, False))
    except (EOFError, OSError, IndexError):
        pass
    finally:
        c.close()


def serve_echo(listener):
    while True:
        c, _ = listener.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=echo_conn, args=(c,), daemon=True).start()


def handshake(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = read_head(s)
    assert head.startswith("HTTP/1.1 101"), head.splitlines()[0]
    assert accept_key(key) in head, "the origin's accept key came through"
    return s


def one_client(port, messages, size, out):
    t0 = time.perf_counter()
    s = handshake(port)
    out["handshakes"].append(time.perf_counter() - t0)
    rtts = []
    for i in range(messages):
        msg = (f"{i:08d}" * (size // 8 + 1))[:size].encode()
        t = time.perf_counter()
        s.sendall(frame(1, msg, True))
        op, echo = read_frame(s)
        rtts.append(time.perf_counter() - t)
        if op != 1 or echo != msg:
            out["wrong"] += 1
    s.sendall(frame(8, b"", True))
    read_frame(s)
    s.close()
    out["rtts"].extend(rtts)


def run_load(port, clients, messages, size):
    out = {"rtts": [], "handshakes": [], "wrong": 0}
    threads = [threading.Thread(target=one_client, args=(port, messages, size, out))
               for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    rtts = sorted(out["rtts"])
    hs = sorted(out["handshakes"])
    return {
        "rate": len(rtts) / wall,
        "p50": rtts[len(rtts) // 2] * 1e6,
        "p99": rtts[int(len(rtts) * 0.99)] * 1e6,
        "hs50": hs[len(hs) // 2] * 1e6,
        "echoes": len(rtts),
        "wrong": out["wrong"],
    }


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx.err;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}; proxy_temp_path {dir};
    fastcgi_temp_path {dir}; uwsgi_temp_path {dir}; scgi_temp_path {dir};
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{origin};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 3600s;
        }}
    }}
}}
"""






def start_peers(d, args, origin):
    """quire, and nginx with one worker if it is installed: [(name, port, process)]."""
    listen = free_port()
    q = subprocess.Popen([args.quire, "proxy", "--origin", f"http://127.0.0.1:{origin}",
                          "--listen", f"127.0.0.1:{listen}", "--cache", f"{d}/c.vol",
                          "--cache-size", "16MiB"], stderr=subprocess.DEVNULL)
    peers = [("quire", listen, q)]
    if shutil.which("nginx"):
        port = free_port()
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=d, port=port, origin=origin))
        n = subprocess.Popen(["nginx", "-c", conf, "-e", f"{d}/nginx.err"],
                             stderr=subprocess.DEVNULL)
        peers.append(("nginx", port, n))
    for _, port, _ in peers:
        wait_port(port)
    return peers


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "origin":
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", int(sys.argv[2])))
        lst.listen(256)
        serve_echo(lst)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quire", default="target/release/quire")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args()
    # The origin is a process of its own: sharing the clients' interpreter lock
    # would make the direct path pay for the clients' work.
    origin = free_port()
    echo = subprocess.Popen([sys.executable, __file__, "origin", str(origin)])
    wait_port(origin)
    with tempfile.TemporaryDirectory() as d:
        peers = start_peers(d, args, origin)
        peers.append(("echo", origin, echo))
        try:
            rows = []
            for _ in range(2):
                rows.append(("direct", run_load(origin, args.clients, args.messages, args.size)))
                for name, port, _ in peers[:-1]:
                    rows.append((name, run_load(port, args.clients, args.messages, args.size)))
        finally:
            for _, _, p in peers:
                p.terminate()
                p.wait()
    print(f"{args.clients} connections x {args.messages} echoes of {args.size} bytes")
    print(f"{'path':<7} {'echoes/s':>9} {'p50 us':>7} {'p99 us':>7} {'handshake us':>12} wrong")
    for name, r in rows:
        print(f"{name:<7} {r['rate']:>9.0f} {r['p50']:>7.0f} {r['p99']:>7.0f} "
              f"{r['hs50']:>12.0f} {r['wrong']}")
    def rate(name):
        return sum(r["rate"] for n, r in rows if n == name)

    for name, _, _ in peers[:-1]:
        print(f"{name} / direct, echoes/s: {rate(name) / rate('direct'):.2f}")
    if len(peers) > 2:
        print(f"quire / nginx, echoes/s: {rate('quire') / rate('nginx'):.2f}")
    if any(r["wrong"] for _, r in rows):
        sys.exit("an echo came back wrong")


if __name__ == "__main__":
    main()
