#!/usr/bin/env bash
# Operator benchmark (bench/RESULTS.md, "Operator"): Release build without sanitizers, then
# operator_bench [POLICIES NODES PODS SAMPLES] (defaults 1000 100 20000 100).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/h-operator-bench
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_BENCH=ON \
  -DSONDE_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD" --target sonde-operator operator_bench -j2 >/dev/null
echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bin/operator_bench" "$@"
