"""nginx `proxy_cache` as a peer for the figure scripts (`cold-cache.py`,
`refresh-figures.py`): one worker pinned to CPU 0 like quire, access log off, its
cache and temporary files in the run's scratch folder, `X-Cache` naming what its
cache did. Each script adds its own cache directives.

`tcp_nopush` is off: with it on, every 64 KiB hit of `cold-cache.py` waited about
44 ms (a corked last segment meeting the client's delayed ACK), a figure of the
setting rather than of nginx.
"""

import os
import subprocess

CONF = """
user root;
worker_processes 1;
worker_cpu_affinity 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy_temp;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    proxy_cache_path {d}/ncache levels=1:2 keys_zone=peer:64m max_size={max_size} inactive=1d use_temp_path=off;
    upstream origin {{ server 127.0.0.1:{origin}; keepalive 16; }}
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
        location / {{
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache peer;
            proxy_cache_lock on;
            add_header X-Cache $upstream_cache_status;
{extra}
        }}
    }}
}}
"""


def command(scratch, port, origin_port, max_size, extra):
    """Writes the config into `scratch` and returns the command that runs nginx on
    CPU 0 with it; `extra` is more directives for the cached location."""
    conf = os.path.join(scratch, "nginx.conf")
    with open(conf, "w") as f:
        f.write(CONF.format(d=scratch, port=port, origin=origin_port, max_size=max_size,
                            extra="\n".join("            " + line for line in extra)))
    return ["taskset", "-c", "0", "nginx", "-c", conf, "-e",
            os.path.join(scratch, "nginx-error.log")]


def available():
    try:
        subprocess.run(["nginx", "-v"], capture_output=True, check=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False
