#!/usr/bin/env bash
# Operator benchmarks (bench/RESULTS.md, "Operator" and "Node reports"): Release build without
# sanitizers, then operator_bench [POLICIES NODES PODS SAMPLES] (defaults 1000 100 20000 100)
# and node_report_bench [NODES POLICIES PODS_PER_NODE SECONDS CHURN_NODES] (defaults 1000
# 1000 20 60 20), each with the arguments in OPERATOR_BENCH_ARGS / NODE_REPORT_BENCH_ARGS.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/h-operator-bench
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSONDE_BUILD_BENCH=ON \
  -DSONDE_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD" --target sonde-operator operator_bench node_report_bench -j2 >/dev/null
echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$BUILD/bin/operator_bench" ${OPERATOR_BENCH_ARGS:-}
echo "== machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$BUILD/bin/node_report_bench" ${NODE_REPORT_BENCH_ARGS:-}
