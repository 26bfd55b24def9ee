#!/usr/bin/env python3
"""Packs a root file system tarball into an OCI image archive (image-layout 1.0.0, one
gzip layer) with quire's container settings, as packaging/Containerfile sets them:
non-root `quire` user, volumes, port 8080, SIGTERM, health check, and `quire serve`
on /var/lib/quire/vault. `docker load` and `podman load` read the archive.

    python3 scripts/oci-pack.py ROOTFS.tar OUT.tar --version 0.1.0
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time


def blob(dir_, data):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(dir_, 'blobs', 'sha256', digest), 'wb') as f:
        f.write(data)
    return 'sha256:' + digest, len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('rootfs')
    ap.add_argument('out')
    ap.add_argument('--version', default='0.1.0')
    a = ap.parse_args()
    raw = open(a.rootfs, 'rb').read()
    diff_id = 'sha256:' + hashlib.sha256(raw).hexdigest()
    layer = gzip.compress(raw, compresslevel=9, mtime=0)
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, 'blobs', 'sha256'))
        layer_digest, layer_size = blob(d, layer)
        created = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
        config = {
            'created': created,
            'architecture': 'amd64',
            'os': 'linux',
            'config': {
                'User': 'quire',
                'WorkingDir': '/var/lib/quire',
                'Entrypoint': ['/usr/bin/quire'],
                'Cmd': ['serve', '--config', '/etc/quire/quire.toml', '--listen', '0.0.0.0:8080',
                        '--cache', '/var/cache/quire/serve.vol', '/var/lib/quire/vault'],
                'ExposedPorts': {'8080/tcp': {}},
                'Volumes': {'/var/lib/quire': {}, '/var/cache/quire': {}},
                'StopSignal': 'SIGTERM',
                'Env': ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
                # Docker's own field; OCI runtimes ignore it.
                'Healthcheck': {
                    'Test': ['CMD', '/usr/bin/quire', 'health', '--server', 'http://127.0.0.1:8080'],
                    'Interval': 15_000_000_000, 'Timeout': 3_000_000_000,
                    'StartPeriod': 60_000_000_000,
                },
                'Labels': {'org.opencontainers.image.title': 'quire',
                           'org.opencontainers.image.version': a.version},
            },
            'rootfs': {'type': 'layers', 'diff_ids': [diff_id]},
            'history': [{'created': created, 'created_by': 'scripts/oci-image.sh'}],
        }
        config_digest, config_size = blob(d, json.dumps(config, sort_keys=True).encode())
        manifest = {
            'schemaVersion': 2,
            'mediaType': 'application/vnd.oci.image.manifest.v1+json',
            'config': {'mediaType': 'application/vnd.oci.image.config.v1+json',
                       'digest': config_digest, 'size': config_size},
            'layers': [{'mediaType': 'application/vnd.oci.image.layer.v1.tar+gzip',
                        'digest': layer_digest, 'size': layer_size}],
        }
        manifest_digest, manifest_size = blob(d, json.dumps(manifest, sort_keys=True).encode())
        index = {
            'schemaVersion': 2,
            'mediaType': 'application/vnd.oci.image.index.v1+json',
            'manifests': [{'mediaType': 'application/vnd.oci.image.manifest.v1+json',
                           'digest': manifest_digest, 'size': manifest_size,
                           'annotations': {'org.opencontainers.image.ref.name': a.version,
                                           'io.containerd.image.name': 'quire:' + a.version}}],
        }
        with open(os.path.join(d, 'index.json'), 'w') as f:
            json.dump(index, f)
        with open(os.path.join(d, 'oci-layout'), 'w') as f:
            json.dump({'imageLayoutVersion': '1.0.0'}, f)
        with tarfile.open(a.out, 'w') as t:
            for name in ['oci-layout', 'index.json', 'blobs']:
                t.add(os.path.join(d, name), arcname=name)
    print(f'layer {layer_size} bytes compressed, {len(raw)} uncompressed')


if __name__ == '__main__':
    main()
