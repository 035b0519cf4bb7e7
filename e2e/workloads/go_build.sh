#!/usr/bin/env bash
# go_build.sh WORKLOAD OUT [GO BUILD FLAG...]: builds e2e/workloads/WORKLOAD offline (standard
# library only, no cgo) into OUT, for the e2e tests (go_build in e2e/lib.sh) and the benchmarks
# (build_gotls in bench/agent_lib.sh). One Go build cache serves them all, the same as the
# build's Go test fixtures (SONDE_GOCACHE in agent/CMakeLists.txt): Go keys it by content and
# allows concurrent use, where a cache per run compiled the standard library's TLS and HTTP
# packages again each time (11 s here). SONDE_GOCACHE moves it.
set -euo pipefail
workload="$1" out="$(realpath -m "$2")"
shift 2
cache="${SONDE_GOCACHE:-$HOME/.cache/sonde-go}"
mkdir -p "$(dirname "$out")"
cd "$(dirname "${BASH_SOURCE[0]}")/$workload"
GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$cache" GOPATH="$cache-gopath" CGO_ENABLED=0 \
  exec go build "$@" -o "$out" .
