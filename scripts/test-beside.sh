#!/usr/bin/env bash
# What `make test` runs beside the unit, kernel and e2e tests, started at the lowest priority
# (SCHED_IDLE, nice 19) so that it takes only the CPU they leave idle (most of them wait on a
# process or a timer; a test's agent that must keep up with a flood is not slowed): the
# container image build (when there is a container engine), the fuzzers, clang-tidy and the
# chart's checks. None of them measures time (a fuzzer runs for its wall-clock seconds, with less
# CPU when the tests take it). Each step runs even when another failed; each prints its output
# under its own header and its duration. The image's reference is written to BUILD/image.ref
# for the image test, which `make test` runs after the e2e tests. Exit status: the number of
# failed steps. Usage: scripts/test-beside.sh BUILD
set -uo pipefail
build="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
rm -f "$build/image.ref"
failed=0
failed_names=""
step() {  # step NAME COMMAND...
  local name="$1" start
  shift
  start=$(date +%s)
  echo "=== $name"
  if "$@"; then
    echo "--- $name: ok ($(($(date +%s) - start)) s)"
  else
    echo "--- $name: FAILED ($(($(date +%s) - start)) s)"
    failed=$((failed + 1))
    failed_names="$failed_names $name"
  fi
}
image_build() {
  scripts/image.sh | tee "$build/image.log" || return 1
  tail -n1 "$build/image.log" >"$build/image.ref"
}
if bash -c 'source scripts/image-lib.sh && image_engine' >/dev/null 2>&1; then
  step image image_build
else
  echo "image: skipped, no container engine (make deps installs podman)"
fi
step fuzz make --no-print-directory fuzz
step tidy make --no-print-directory tidy TEST_BUILD="$build"
step chart-test make --no-print-directory chart-test
if [ "$failed" -gt 0 ]; then echo "=== beside: FAILED:$failed_names"; fi
exit "$failed"
