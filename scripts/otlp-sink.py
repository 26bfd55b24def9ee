#!/usr/bin/env python3
"""A stand-in OTLP/HTTP collector for trace benchmarks: answers every POST 200 and
counts spans and bytes, or (--stall) accepts connections and never reads a byte,
or (--down) is not there at all (prints a port nothing listens on and exits).

    python3 scripts/otlp-sink.py --port 4318           # a collector that keeps up
    python3 scripts/otlp-sink.py --port 4319 --stall   # one that never reads

A real collector does more per span; this one measures what quire pays to send.
"""
import argparse
import http.server
import json
import socket
import sys
import threading


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    spans = 0
    lock = threading.Lock()

    def do_POST(self):
        n = int(self.headers.get('content-length', '0'))
        body = self.rfile.read(n)
        try:
            doc = json.loads(body)
            count = sum(len(ss['spans']) for rs in doc['resourceSpans'] for ss in rs['scopeSpans'])
        except (ValueError, KeyError):
            count = 0
        with Sink.lock:
            Sink.spans += count
        self.send_response(200)
        self.send_header('content-type', 'application/json')
        self.send_header('content-length', '2')
        self.end_headers()
        self.wfile.write(b'{}')

    def log_message(self, *args):
        pass


def stall(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', port))
    s.listen(128)
    held = []
    while True:
        conn, _ = s.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        held.append(conn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, default=4318)
    ap.add_argument('--stall', action='store_true')
    a = ap.parse_args()
    if a.stall:
        stall(a.port)
        return
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', a.port), Sink)
    try:
        srv.serve_forever()
    finally:
        print(f'spans received: {Sink.spans}', file=sys.stderr)


if __name__ == '__main__':
    main()
