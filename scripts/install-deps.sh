#!/usr/bin/env bash
# Installs the Debian packages in scripts/debian-packages.txt (idempotent; a no-op taking well
# under a second when everything is already installed). Needs root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list="${1:-$here/debian-packages.txt}"
mapfile -t packages < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js runs the demo and e2e workloads; any installed node 18+ will do (the machine image may
# ship one from another repository), otherwise Debian's.
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs)
fi

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} packages installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "deps: missing packages: ${missing[*]}; run 'make deps' as root (or with sudo)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian's prometheus package starts a server through systemd where systemd runs; sonde's tests
# start their own on a free port, so a packaged one is not needed.
