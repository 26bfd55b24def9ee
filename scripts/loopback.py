"""Shared by the measurement scripts: free loopback ports, waiting for a
listener, and a threaded HTTP/1.1 server that never prints a client's hang-up."""
import socket
import sys
import time
from http.server import ThreadingHTTPServer


def free_port():
    """A port nothing listens on now (the OS's choice)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=15):
    """Waits until something accepts on 127.0.0.1:port, or exits saying so."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


class QuietServer(ThreadingHTTPServer):
    """A threaded server with a deep backlog that ignores clients hanging up."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        pass  # a client that hung up: not the script's business
