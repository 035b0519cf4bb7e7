#!/usr/bin/env bash
# `sonde-agent doctor` passes on this machine (root, BTF kernel) and, pointed at empty host
# folders, names the failing checks and exits 1.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
agent="$SONDE_BIN/sonde-agent"

out="$("$agent" doctor)" || fail "doctor failed on this machine:"$'\n'"$out"
expect_contains "$out" "The agent can run on this node." "doctor table"
# The features' own checks, which the composition root hands the doctor.
expect_contains "$out" "event-loop wait hook" "doctor table: the Node.js feature's check"
expect_contains "$out" "Go TLS HTTP/2 streams" "doctor table: the Go TLS feature's checks"
expect_contains "$out" "uprobe register writes" "doctor table: the Go TLS feature's checks"
json="$("$agent" doctor --json)"
[[ "$(jq -r .ok <<<"$json")" == true ]] || fail "doctor --json ok != true: $json"
[[ "$(jq -r '[.checks[] | select(.status == "fail")] | length' <<<"$json")" == 0 ]] ||
  fail "failed checks in: $json"
[[ "$(jq -r '.checks[] | select(.name == "process events program") | .status' <<<"$json")" == pass ]] ||
  fail "process events program did not load"

empty="$SONDE_E2E_TMP/empty"
mkdir -p "$empty"
set +e
out="$("$agent" doctor --proc-root "$empty" --sys-root "$empty")"
rc=$?
set -e
[[ $rc == 1 ]] || fail "broken setup: exit $rc, want 1"
for check in "kernel version" "kernel BTF" "capabilities" "uprobe PMU"; do
  grep -E "^$check +FAIL" <<<"$out" >/dev/null || fail "broken setup: '$check' not FAIL:"$'\n'"$out"
done
expect_contains "$out" "fix: " "broken setup"
expect_contains "$out" "cannot run on this node" "broken setup"

# Without privileges: drop every capability (setpriv from util-linux).
set +e
out="$(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
  "$agent" doctor 2>&1)"
rc=$?
set -e
[[ $rc == 1 ]] || fail "unprivileged: exit $rc, want 1:"$'\n'"$out"
grep -E "^CAP_BPF +FAIL" <<<"$out" >/dev/null || fail "unprivileged: CAP_BPF not FAIL:"$'\n'"$out"
# The kernel has every BPF type: a refusal here is the missing permission, never "upgrade".
for check in "BPF program: kprobe/uprobe" "BPF map: ringbuf"; do
  grep -E "^$check +FAIL +missing permission" <<<"$out" >/dev/null ||
    fail "unprivileged: '$check' not a missing permission:"$'\n'"$out"
done
[[ "$out" != *"upgrade the kernel"* ]] || fail "unprivileged: blames the kernel:"$'\n'"$out"
# The agent itself refuses to start and names what to add.
set +e
out="$(timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  --bounding-set=-all "$agent" --standalone --metrics-address 127.0.0.1:0 2>&1)"
rc=$?
set -e
[[ $rc == 1 ]] || fail "unprivileged start: exit $rc, want 1:"$'\n'"$out"
expect_contains "$out" "--cap-add BPF --cap-add PERFMON --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH" \
  "unprivileged start"

"$agent" --version | grep -E '^sonde-agent [0-9]+\.[0-9]+\.[0-9]+$' >/dev/null || fail "--version"
"$agent" doctor --help | grep -q -- '--proc-root' || fail "doctor --help"

# --binary: a Go TLS program built here and Debian's kubectl (stripped Go) are instrumentable;
# a C program is no Go TLS user; a missing file exits 1 and says which.
go_build gotls "$SONDE_E2E_TMP/gotls" -ldflags="-s -w"
out="$("$agent" doctor --binary "$SONDE_E2E_TMP/gotls" --binary /bin/true)" ||
  fail "doctor --binary exited $?: $out"
expect_contains "$out" "go tls        instrumentable: $(go env GOVERSION)" "doctor --binary (Go)"
expect_contains "$out" "found in      function table (text start from " "doctor --binary (Go)"
expect_contains "$out" "gotls/read_return file offsets 0x" "doctor --binary (Go)"
expect_contains "$out" "go tls        not a Go TLS user: does not use crypto/tls (not a Go binary)" "doctor --binary (C)"
set +e
out="$("$agent" doctor --binary "$SONDE_E2E_TMP/missing" 2>&1)"
rc=$?
set -e
[[ $rc == 1 ]] || fail "doctor --binary on a missing file: exit $rc, want 1"
expect_contains "$out" "$SONDE_E2E_TMP/missing" "doctor --binary (missing file)"
echo "doctor: ok"
