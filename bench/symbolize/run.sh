#!/usr/bin/env bash
# Symbolization benchmarks, side by side in one run: sonde's pclntab and kallsyms tables against
# Go's debug/gosym, `go tool addr2line` and `cat /proc/kallsyms`. Run as root (kallsyms
# addresses) from the repository root: bench/symbolize/run.sh [GO_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
GO_BINARY=${1:-/usr/lib/go-1.19/pkg/tool/linux_amd64/compile}
BUILD=build/h-symbolize-bench
WORK=$BUILD/symbolize-bench-work
mkdir -p "$WORK"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_BENCH=ON \
  -DSONDE_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target symbolize_bench -j2 >/dev/null

echo "== machine: $(nproc) cpus, kernel $(uname -r), $(wc -l </proc/kallsyms) kallsyms lines"
echo "== Go binary: $GO_BINARY ($(stat -c %s "$GO_BINARY") bytes)"
echo "== sonde (symbolize_bench)"
SONDE_BENCH_GO_BINARY=$GO_BINARY "$BUILD/bin/symbolize_bench" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true

echo "== Go debug/gosym"
(cd bench/symbolize/go-gosym &&
  env GOCACHE="$PWD/../../../$WORK/gocache" GOPATH="$PWD/../../../$WORK/gopath" GOENV=off \
    GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 go build -o "../../../$WORK/gosym-bench" .)
"$WORK/gosym-bench" "$GO_BINARY"

echo "== go tool addr2line (one process, 10,000 addresses, includes its table build)"
"$WORK/gosym-bench" -addrs "$GO_BINARY" >"$WORK/addrs.txt"
TOOLDIR=$(go env GOTOOLDIR)
for _ in 1 2 3; do
  /usr/bin/time -f "addr2line: %e s wall, %M KB max RSS" "$TOOLDIR/addr2line" "$GO_BINARY" \
    <"$WORK/addrs.txt" >/dev/null
done

echo "== cat /proc/kallsyms"
for _ in 1 2 3; do
  /usr/bin/time -f "cat /proc/kallsyms: %e s wall (%S s sys)" cat /proc/kallsyms >/dev/null
done
