#!/usr/bin/env bash
# Builds quire's Debian package: scripts/package-deb.sh [--binary PATH] [--out DIR]
#
# Without --binary it builds the `dist` profile (release, no debug info, stripped);
# with one (CI passes the release build it already has) it strips a copy. The
# package holds:
#   /usr/bin/quire                                   the binary
#   /lib/systemd/system/quire.service                `quire proxy` (contrib/quire.service,
#   /lib/systemd/system/quire-serve.service           `quire serve`  as the `quire` user)
#   /lib/systemd/system/quire.socket                 socket activation (contrib/)
#   /etc/quire/quire.toml                            a commented default (a conffile)
#   /usr/share/doc/quire/                            README, docs, copyright
# and maintainer scripts (packaging/deb/) that add the `quire` system user and
# /var/lib/quire, /var/cache/quire. Installing starts nothing; `apt remove` keeps
# configuration, cache and state, `apt purge` deletes them (a vault with notes kept).
# Prints the path of the .deb it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
out="${CARGO_TARGET_DIR:-target}/deb"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR]" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  cargo build --profile dist --locked -p quire >&2
  binary="${CARGO_TARGET_DIR:-target}/dist/quire"
fi
[ -x "$binary" ] || { echo "error: $binary is not an executable" >&2; exit 1; }

version="$("$binary" --version | awk '{print $2}')"
arch="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/quire_${version}_${arch}"

install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" \
    "$root/etc/quire" "$root/usr/share/doc/quire/docs"
strip --strip-all -o "$root/usr/bin/quire" "$binary"
chmod 0755 "$root/usr/bin/quire"

# The packaged units are contrib's, run as the package's `quire` user (whose
# directories postinst makes) instead of a dynamic one, with the binary in /usr/bin
# and only the configuration file and the cache file named on the command line.
unit() { # unit MODE ARGS: contrib/quire.service for `quire MODE ARGS`
  sed -e "s|^ExecStart=.*|ExecStart=/usr/bin/quire $1 --config /etc/quire/quire.toml $2|" \
      -e 's|^DynamicUser=yes|User=quire\nGroup=quire\n# Relative paths in the configuration (an ACME state_dir) land in /var/lib/quire.\nWorkingDirectory=/var/lib/quire|' \
      -e 's|^# Install as /etc/systemd/system/quire.service.*|# Installed by the quire package; enable with `systemctl enable --now`. The|' \
      -e 's|^# in /var/cache/quire and state.*|# cache is in /var/cache/quire, state (ACME, a vault) in /var/lib/quire.|' \
      contrib/quire.service
}
unit proxy "--cache /var/cache/quire/proxy.vol" >"$root/lib/systemd/system/quire.service"
unit serve "--cache /var/cache/quire/serve.vol /var/lib/quire/vault" \
    | sed -e 's|^Description=.*|Description=quire publishing server (quire serve)|' \
    >"$root/lib/systemd/system/quire-serve.service"
cp contrib/quire.socket "$root/lib/systemd/system/quire.socket"
chmod 0644 "$root"/lib/systemd/system/*

install -m 0640 packaging/quire.toml "$root/etc/quire/quire.toml"
install -m 0644 README.md "$root/usr/share/doc/quire/README.md"
install -m 0644 docs/*.md "$root/usr/share/doc/quire/docs/"
cat >"$root/usr/share/doc/quire/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: quire
License: Apache-2.0

Files: *
Copyright: the quire developers
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

for script in postinst prerm postrm; do
  install -m 0755 "packaging/deb/$script" "$root/DEBIAN/$script"
done
echo /etc/quire/quire.toml >"$root/DEBIAN/conffiles"

# The C library the binary was linked against at least (its newest symbol version).
glibc="$(objdump -T "$root/usr/bin/quire" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
cat >"$root/DEBIAN/control" <<EOF
Package: quire
Version: $version
Architecture: $arch
Maintainer: the quire developers <quire@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: libc6 (>= $glibc), libgcc-s1, adduser
Section: web
Priority: optional
Description: page cache for content sites, with a publishing server
 quire serves pages from a memory-mapped cache, already compressed, and
 invalidates them exactly when content changes. quire proxy caches an
 existing site (RFC 9111); quire serve publishes a folder of markdown notes.
 Installing starts nothing: enable quire.service (proxy) or quire-serve.service.
EOF

mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/quire_${version}_${arch}.deb" >&2
echo "$out/quire_${version}_${arch}.deb"
