#!/usr/bin/env bash
# Symbol engine benchmarks, side by side in one run: sonde's C++ engine (symbols_bench) and the
# approach of today's Go agents (go-debug-elf: debug/elf Symbols()+DynamicSymbols() per pid).
# Usage: bench/symbols/run.sh [BUILD_DIR]   (default build/bench, configured with
# -DSONDE_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=Release and symbols_bench built)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(realpath "${1:-build/bench}")"
binary="${SONDE_BENCH_BINARY:-/usr/bin/node}"
pids="${SONDE_BENCH_PIDS:-200}"
bench="$build/bin/symbols_bench"
[[ -x "$bench" ]] || { echo "symbols: $bench missing; build the symbols_bench target" >&2; exit 1; }
command -v go > /dev/null || { echo "symbols: go not found (apt-get install golang-go)" >&2; exit 1; }

out="$build/bench-symbols"
mkdir -p "$out"
echo "== sonde symbol engine (C++), $binary =="
"$bench" --benchmark_out="$out/cpp.json" --benchmark_out_format=json | tee "$out/cpp.txt"

echo
echo "== Go debug/elf, $pids pids =="
(cd "$here/go-debug-elf" &&
  env GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 GOCACHE="$out/gocache" \
    go build -o "$out/go-debug-elf" .)
"$out/go-debug-elf" -binary "$binary" -pids "$pids" | tee "$out/go.txt"

echo
echo "== side by side =="
python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
cpp = {b["name"]: b for b in json.load(open(f"{out}/cpp.json"))["benchmarks"]}
text = open(f"{out}/cpp.txt").read()
go = open(f"{out}/go.txt").read()
def go_row(label):
    m = re.search(re.escape(label) + r"\s+([\d.]+) ms\s+allocated\s+([\d.]+) MiB", go)
    return float(m.group(1)), float(m.group(2)) * 2**20
def ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale
cold = cpp["BM_ColdResolve"]
go_first_ms, go_first_alloc = go_row("first pid (cold)")
go_mean_ms, go_mean_alloc = go_row("per pid, mean")
npids = re.search(r"(\d+) pids through", go).group(1)
go_all_ms, _ = go_row(f"all {npids} pids")
retained = int(re.search(r"retained heap \(cache, 6 names\)\s+(\d+)", text).group(1))
print(f"cold resolve:   sonde {ms(cold):8.2f} ms   go first pid {go_first_ms:8.2f} ms"
      f"  mean {go_mean_ms:8.2f} ms  -> {go_mean_ms / ms(cold):5.1f}x faster (vs mean)")
print(f"allocated:      sonde {cold['heap_bytes_per_iter']:8.0f} B    go per pid "
      f"{go_mean_alloc:12.0f} B -> {go_mean_alloc / cold['heap_bytes_per_iter']:7.0f}x less")
print(f"warm lookup:    sonde {cpp['BM_WarmLookup']['real_time']:8.0f} ns"
      f"   per-pid path through the cache {cpp['BM_WarmResolveByPath']['real_time']:.2f} us")
many = cpp["BM_200PidsDistinctPaths"]
print(f"200 pids:       sonde {ms(many):8.2f} ms ({many['parses']:.0f} parse)   go {go_all_ms:8.2f} ms"
      f" ({go_all_ms / ms(many):.0f}x)")
print(f"retained:       sonde {retained} B for the binary's six targets")
PY
