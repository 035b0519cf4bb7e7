#!/usr/bin/env bash
# A hostile tenant against the real agent (standalone): what one tenant's input does to the
# node's other tenants.
#   - labels: a Go TLS program whose build-info version is "go1.19.\xff" (Debian's go1.19.8
#     with its last byte patched, same length) is listed on sonde_agent_gotls_binaries with a
#     valid label, and the scrape passes `promtool check metrics` (one invalid label value
#     would make Prometheus drop the whole node's scrape).
# Needs root (BPF), Go and promtool (make deps).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
workloads="$(cd "$(dirname "$0")" && pwd)/workloads"
tmp="$SONDE_E2E_TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

[[ $EUID -eq 0 ]] || fail "needs root (BPF)"
command -v promtool >/dev/null || fail "promtool not found (make deps)"
export GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" CGO_ENABLED=0
mkdir -p "$tmp/bin"
(cd "$workloads/gotls" && go build -o "$tmp/bin/gotls-badver" .) || fail "go build gotls"
python3 "$workloads/go_set_version.py" "$tmp/bin/gotls-badver" 'go1.19.\xff' ||
  fail "cannot patch the Go version"

port="$(free_port)"
start_agent "$port"
metrics() { curl -sf -m 5 "http://127.0.0.1:$port/metrics"; }

echo "--- a Go binary's build-info version that is not UTF-8"
start_gotls_server gotls-badver "$port"
row() { metrics | grep '^sonde_agent_gotls_binaries{' | grep gotls-badver; }
wait_until 100 row || fail "gotls-badver not on sonde_agent_gotls_binaries"
metrics >"$tmp/scrape.txt" || fail "no scrape"
grep '^sonde_agent_gotls_binaries{' "$tmp/scrape.txt" | grep gotls-badver | sed 's/^/  /'
grep -q $'reason="go1.19.\xef\xbf\xbd"' "$tmp/scrape.txt" ||
  fail "the version is not on the row as go1.19.U+FFFD"
promtool check metrics <"$tmp/scrape.txt" >"$tmp/promtool.txt" 2>&1 ||
  { cat "$tmp/promtool.txt"; fail "promtool check metrics refuses the scrape"; }
echo "  promtool check metrics: ok ($(grep -c '^[a-z]' "$tmp/scrape.txt") samples)"

echo "hostile tenant: ok"
