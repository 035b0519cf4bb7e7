# Shared helpers for e2e tests (sourced).
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_contains() {  # expect_contains TEXT NEEDLE WHAT
  [[ "$1" == *"$2"* ]] || fail "$3: expected to contain '$2', got:"$'\n'"$1"
}
# Waits until a command succeeds, up to N tenths of a second.
wait_until() {
  local tries="$1"; shift
  for ((i = 0; i < tries; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
