#!/usr/bin/env bash
# Makes the Dockerfile's base images locally, without any registry: debian:12 (debootstrap
# minbase of bookworm from the mirror this machine's apt uses) and debian:12-slim (the same,
# without documentation, man pages and locales, and told to keep them out of later installs).
# Cached: an image that already exists is kept; --force rebuilds both. Needs root, podman and
# debootstrap (`make deps`). Usage: scripts/image-base.sh [--force]
set -euo pipefail
force=0
[[ "${1:-}" == --force ]] && force=1
suite=bookworm

if ((!force)) && podman image exists debian:12 && podman image exists debian:12-slim; then
  echo "image-base: debian:12 and debian:12-slim exist (scripts/image-base.sh --force rebuilds)"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "image-base: debootstrap needs root" >&2
  exit 1
fi

# The first Debian mirror in this machine's apt sources (deb822 .sources or one-line .list).
mirror_of_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\// && $i !~ /security/) { print $i; exit } }' "$f"
  done
}
mirror="$(mirror_of_sources | head -n1)"
[[ -n "$mirror" ]] || { echo "image-base: no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }

work="$(mktemp -d /var/tmp/sonde-image-base-XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "image-base: debootstrap --variant=minbase $suite (mirror from this machine's apt sources)"
start=$(date +%s)
debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "image-base: debootstrap failed" >&2
  exit 1
}

# apt inside the images uses the same sources as this machine. A mirror may be a dated
# snapshot whose Release files have expired, so do not reject those.
rm -f "$rootfs"/etc/apt/sources.list
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] && cp "$f" "$rootfs$f"
done
echo 'Acquire::Check-Valid-Until "false";' >"$rootfs/etc/apt/apt.conf.d/90sonde-no-valid-until"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
tar -C "$rootfs" --numeric-owner -c . | podman import --quiet - debian:12 >/dev/null

# The slim variant: what Docker's debian:12-slim leaves out, also for packages installed later.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/90sonde-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$rootfs"/usr/share/{man,info,locale,lintian}/*
tar -C "$rootfs" --numeric-owner -c . | podman import --quiet - debian:12-slim >/dev/null
echo "image-base: debian:12 and debian:12-slim imported in $(($(date +%s) - start)) s"
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '/debian:12(-slim)? '
