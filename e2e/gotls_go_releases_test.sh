#!/usr/bin/env bash
# Go TLS on the Go releases people build with (issue 31): every TLS server of
# scripts/test-go-binaries.txt that can serve HTTPS (esbuild --serve with --certfile: Go 1.20,
# 1.22, 1.23, 1.25 and 1.26.5, stripped, the last two without build info, 1.26's pclntab with
# textStart 0), none built here, run under the standalone agent:
#  - each answers its HTTP/1.1 and HTTP/2 requests, counted exactly per protocol;
#  - its verdict metric says instrumented with the release `doctor --binary` gives;
#  - the address of crypto/tls.(*Conn).Read that the agent probes is the one the Go runtime itself
#    reports: a connection idles inside Read, SIGQUIT with GOTRACEBACK=system prints its frame's
#    pc and offset from the function's entry.
# Then the repository's Go TLS fixture in the shapes Debian's Go builds it
# (agent/gotls/tests/build_go_variants.sh: stripped plain, PIE, cgo, cgo PIE, and without build
# info), each a TLS client of the Go 1.26 server: one exchange each, counted exactly, client side. Needs `make deps` (the binaries in
# /opt/sonde/test-go).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus=/opt/sonde/test-go
tmp="$SONDE_E2E_TMP"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  stop_agent
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null || fail "openssl req"
mkdir -p "$tmp/www" "$tmp/bin"
echo hello >"$tmp/www/index.html"

port="$(free_port)"
start_agent "$port"
requests() {  # requests CONTAINER PROTOCOL: the agent's server-side count, 0 when none
  curl -sf "http://127.0.0.1:$port/metrics" | awk -v c="container=\"$1\"" -v p="protocol=\"$2\"" '
    /^container_go_tls_requests_total\{/ && index($0, c) && index($0, p) && index($0, "direction=\"server\"") { n += $2 }
    END { print n + 0 }'
}
entry_hits() {  # entry_hits CONTAINER: its entry probes' hits so far
  curl -sf "http://127.0.0.1:$port/metrics" | awk -v c="container=\"$1\"" '
    /^container_go_tls_probe_hits_total\{/ && index($0, c) && index($0, "site=\"entry\"") { n += $2 }
    END { print n + 0 }'
}
n=20
urls() { for _ in $(seq "$n"); do printf 'https://127.0.0.1:%s/index.html ' "$1"; done; }

tested=0
while read -r name _ file _ tls _ verdict; do
  [[ $name == esbuild-* && $name != *arm64 && $tls == tls && $verdict != stack-ABI ]] || continue
  real="$corpus/$name/$(basename "$file")"
  [[ -x "$real" ]] || fail "$real is missing: run make deps"
  "$real" --help 2>&1 | grep -q -- --certfile || continue # HTTPS serving came with esbuild 0.17
  # Its own name, so that its series are its own (standalone labels by program name).
  ln -sf "$real" "$tmp/bin/$name"
  want_read="$("$SONDE_BIN/sonde-agent" doctor --binary "$real" --json | jq -r '.[0].read.address')"
  [[ "$want_read" =~ ^[0-9]+$ && "$want_read" != 0 ]] || fail "$name: doctor --binary gave no Read address"

  # esbuild serves while its stdin is open.
  mkfifo "$tmp/$name.in"
  sleep 600 >"$tmp/$name.in" &
  pids+=($!)
  sport="$(free_port)"
  GOTRACEBACK=system "$tmp/bin/$name" --serve="127.0.0.1:$sport" --servedir="$tmp/www" \
    --certfile="$tmp/cert.pem" --keyfile="$tmp/key.pem" <"$tmp/$name.in" >"$tmp/$name.log" 2>&1 &
  server=$!
  pids+=("$server")
  wait_until 100 curl -sfk -o /dev/null "https://127.0.0.1:$sport/index.html" ||
    { cat "$tmp/$name.log"; fail "$name did not serve HTTPS"; }
  # The first request may come before the agent instrumented the new process: wait until one is
  # counted, then count exactly from there.
  wait_until 300 bash -c "curl -sfk --http1.1 -o /dev/null https://127.0.0.1:$sport/index.html; (( \$($(declare -f requests); port=$port; requests $name http1) > 0 ))" ||
    { cat "$SONDE_E2E_TMP/agent.log" | tail -20; fail "$name: no request counted"; }
  base1="$(requests "$name" http1)" base2="$(requests "$name" http2)"
  # shellcheck disable=SC2046
  curl -sfk --http1.1 $(urls "$sport") >/dev/null || fail "$name: HTTP/1.1 requests failed"
  # shellcheck disable=SC2046
  curl -sfk --http2 $(urls "$sport") >/dev/null || fail "$name: HTTP/2 requests failed"
  want1=$((base1 + n)) want2=$((base2 + n))
  wait_until 100 bash -c "(( \$($(declare -f requests); port=$port; requests $name http1) >= $want1 && \$($(declare -f requests); port=$port; requests $name http2) >= $want2 ))" || true
  sleep 0.5 # nothing more may arrive
  got1="$(requests "$name" http1)" got2="$(requests "$name" http2)"
  echo "$name: HTTP/1.1 $((got1 - base1)) of $n, HTTP/2 $((got2 - base2)) of $n"
  [[ $got1 == "$want1" && $got2 == "$want2" ]] ||
    fail "$name: counted HTTP/1.1 $((got1 - base1)) and HTTP/2 $((got2 - base2)), want $n each"
  metric="$(curl -sf "http://127.0.0.1:$port/metrics" | grep "^sonde_agent_gotls_binaries{" | grep -F "binary=\"$real\"")" ||
    fail "$name: no sonde_agent_gotls_binaries series for $real"
  want_reason="$("$SONDE_BIN/sonde-agent" doctor --binary "$real" --json | jq -r '.[0].reason')"
  expect_contains "$metric" 'instrumented="true"' "$name verdict metric"
  expect_contains "$metric" "reason=\"$want_reason\"" "$name verdict metric"

  # The Go runtime's own account of where (*Conn).Read starts: a connection that finished its
  # handshake and sends nothing leaves a goroutine inside Read. It is there once the entry probe
  # has fired for it (the handshake itself calls neither Read nor Write).
  hits_before="$(entry_hits "$name")"
  python3 - "$sport" >"$tmp/$name.idle" 2>&1 <<'PY' &
import socket, ssl, sys, time
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
conn = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1]))))
print("handshake done", flush=True)
time.sleep(30)
PY
  idle=$!
  pids+=("$idle")
  wait_until 100 grep -q "handshake done" "$tmp/$name.idle" || fail "$name: idle TLS connection"
  wait_until 100 bash -c "(( \$($(declare -f entry_hits); port=$port; entry_hits $name) > $hits_before ))" ||
    fail "$name: the idle connection's Read was never entered"
  kill -QUIT "$server"
  wait "$server" 2>/dev/null || true
  frame="$(grep -A1 '^crypto/tls.(\*Conn).Read(' "$tmp/$name.log" | sed -n 2p)"
  kill "$idle" 2>/dev/null || true
  [[ -n "$frame" ]] || { tail -40 "$tmp/$name.log"; fail "$name: no crypto/tls.(*Conn).Read frame in its traceback"; }
  off="$(sed -E 's/.* \+(0x[0-9a-f]+) .*/\1/' <<<"$frame")"
  pc="$(sed -E 's/.* pc=(0x[0-9a-f]+).*/\1/' <<<"$frame")"
  entry=$((pc - off))
  echo "$name: the runtime says (*Conn).Read starts at $(printf 0x%x "$entry"), the agent probes $(printf 0x%x "$want_read")"
  ((entry == want_read)) || fail "$name: (*Conn).Read at $(printf 0x%x "$want_read"), the Go runtime says $(printf 0x%x "$entry")"
  tested=$((tested + 1))
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/scripts/test-go-binaries.txt")
((tested >= 5)) || fail "only $tested Go releases served HTTPS here (want 1.20, 1.22, 1.23, 1.25, 1.26)"

# The fixture's shapes as clients of a Go 1.26 server (trusting its certificate through Go's
# SSL_CERT_FILE). Each runs twice: the first run is not
# counted (a never-seen binary can make its first call before its probes are attached,
# docs/go-tls.md "A limit"), the second is, from its first call, on the probes kept after the
# first run's exit.
"$root/agent/gotls/tests/build_go_variants.sh" "$(command -v go)" \
  "$root/agent/symbols/tests/go_tls_fixture" "$tmp/variants" >"$tmp/variants.log" 2>&1 ||
  { cat "$tmp/variants.log"; fail "building the fixture's shapes"; }
mkfifo "$tmp/server.in"
sleep 600 >"$tmp/server.in" &
pids+=($!)
sport="$(free_port)"
"$corpus/esbuild-go1.26/esbuild" --serve="127.0.0.1:$sport" --servedir="$tmp/www" \
  --certfile="$tmp/cert.pem" --keyfile="$tmp/key.pem" <"$tmp/server.in" >"$tmp/server.log" 2>&1 &
pids+=($!)
wait_until 100 curl -sfk -o /dev/null "https://127.0.0.1:$sport/index.html" || fail "the Go 1.26 server"
client_requests() {  # client_requests CONTAINER: its client-side count, 0 when none
  curl -sf "http://127.0.0.1:$port/metrics" | awk -v c="container=\"$1\"" '
    /^container_go_tls_requests_total\{/ && index($0, c) && index($0, "direction=\"client\"") { n += $2 }
    END { print n + 0 }'
}
# (plain.notextstart is read only: Go 1.19's own runtime refuses a table whose header lost its text
# start; go_releases_test checks what the agent makes of it.)
for v in plain.stripped pie.stripped cgo.stripped cgo-pie.stripped plain.nobuildinfo; do
  name="v-${v//./-}" # its container label (at most 15 characters, the kernel's comm)
  name="${name:0:15}"
  ln -sf "$tmp/variants/$v" "$tmp/bin/$name"
  SSL_CERT_FILE="$tmp/cert.pem" "$tmp/bin/$name" "127.0.0.1:$sport" >"$tmp/$name.out" 2>&1 || fail "$v exited $?: $(cat "$tmp/$name.out")"
  wait_until 100 bash -c "curl -sf http://127.0.0.1:$port/metrics | grep '^sonde_agent_gotls_binaries{' | grep -F 'binary=\"$tmp/variants/$v\"' | grep -q 'instrumented=\"true\"'" ||
    fail "$v: not instrumented: $(curl -sf "http://127.0.0.1:$port/metrics" | grep -F "$tmp/variants/$v")"
  sleep 0.5 # the first run's count, if any, is in
  before="$(client_requests "$name")"
  out="$(SSL_CERT_FILE="$tmp/cert.pem" "$tmp/bin/$name" "127.0.0.1:$sport" 2>&1)" || fail "$v exited $? under the agent: $out"
  [[ "$out" == *" <nil>" ]] || fail "$v printed '$out'"
  wait_until 100 bash -c "(( \$($(declare -f client_requests); port=$port; client_requests $name) > $before ))" || true
  sleep 0.5
  got=$(($(client_requests "$name") - before))
  echo "$v: $got request counted for one made"
  ((got == 1)) || fail "$v: $got requests counted, want 1"
done
echo "gotls_go_releases: ok ($tested releases, 5 shapes of the fixture)"
