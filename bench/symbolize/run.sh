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
ELF_BINARY=/usr/bin/node
# 10,000 random addresses inside node's .text, shared by sonde, llvm-symbolizer and addr2line.
read -r TEXT_ADDR TEXT_SIZE < <(readelf -SW "$ELF_BINARY" |
  awk '$2==".text"{print $4, $6} $3==".text"{print $5, $7}' | head -1)
python3 -c "
import random
random.seed(1)
lo, size = int('$TEXT_ADDR', 16), int('$TEXT_SIZE', 16)
print('\n'.join(hex(lo + random.randrange(size)) for _ in range(10000)))" >"$WORK/elf-addrs.txt"

echo "== sonde (symbolize_bench)"
SONDE_BENCH_GO_BINARY=$GO_BINARY SONDE_BENCH_ELF_BINARY=$ELF_BINARY \
  SONDE_BENCH_ELF_ADDRS=$WORK/elf-addrs.txt "$BUILD/bin/symbolize_bench" \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

echo "== llvm-symbolizer and binutils addr2line on $ELF_BINARY (one process, 10,000 addresses)"
for _ in 1 2 3; do
  /usr/bin/time -f "llvm-symbolizer --no-inlines: %e s wall, %U s user, %M KB max RSS" \
    llvm-symbolizer --no-inlines --obj="$ELF_BINARY" <"$WORK/elf-addrs.txt" >/dev/null
done
# Ten times the addresses: the difference to the 10,000 run is llvm-symbolizer's per-address
# cost without its start-up and table load.
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$WORK/elf-addrs.txt"; done >"$WORK/elf-addrs-100k.txt"
for _ in 1 2 3; do
  /usr/bin/time -f "llvm-symbolizer --no-inlines, 100,000 addresses: %e s wall, %U s user" \
    llvm-symbolizer --no-inlines --obj="$ELF_BINARY" <"$WORK/elf-addrs-100k.txt" >/dev/null
done
for _ in 1 2 3; do
  /usr/bin/time -f "addr2line -f: %e s wall, %U s user, %M KB max RSS" \
    addr2line -f -e "$ELF_BINARY" <"$WORK/elf-addrs.txt" >/dev/null
done

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
