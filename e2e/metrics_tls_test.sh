#!/usr/bin/env bash
# The agent's endpoints over TLS (--tls-cert-file, the chart's agent.tls), with its certificate
# laid out as kubelet mounts a Secret: the metrics and --debug-address ports answer only TLS
# with that certificate (a client trusting the CA and checking the name gets /metrics and a CPU
# profile; plain HTTP gets nothing; the health port stays plain), Debian's Prometheus scrapes it
# as the chart's PodMonitor does (https, the Secret's CA, the certificate's name), and
# renewals in place: a new pair is presented from the next handshake with no restart and no lost
# scrape, a pair that does not match is refused (counted, logged, the last good one stays), and
# the agent does not start with one. Needs root (the agent loads BPF) and openssl.
# e2e-lane: beside (scripts/run-e2e.sh: no workload, no cgroup, nothing timed on the host)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tmp="$SONDE_E2E_TMP"
name="sonde-agent.sonde-system.svc"  # the chart's default agent.tls.serverName

[[ $EUID -eq 0 ]] || fail "needs root (the agent loads BPF)"
command -v openssl >/dev/null || fail "openssl not found (make deps)"
cleanup() {
  stop_prometheus
  stop_agent
}
trap cleanup EXIT

first="$(serving_cert "$tmp/tls" "$name")" || fail "cannot make a serving certificate"
port="$(free_port)" dport="$(free_port)" hport="$(free_port)"
while [[ "$dport" == "$port" ]]; do dport="$(free_port)"; done
while [[ "$hport" == "$port" || "$hport" == "$dport" ]]; do hport="$(free_port)"; done
tls_args=(--tls-cert-file "$tmp/tls/tls.crt" --tls-private-key-file "$tmp/tls/tls.key")
# CPU profiles on, for a profile served over TLS on the debug port.
printf 'instrumentations:\n  cpu: {enabled: true}\n' >"$tmp/config.yaml"
"$SONDE_BIN/sonde-agent" --standalone --config "$tmp/config.yaml" --metrics-address "127.0.0.1:$port" \
  --debug-address "127.0.0.1:$dport" --health-address "127.0.0.1:$hport" "${tls_args[@]}" \
  >"$tmp/agent.log" 2>&1 &
AGENT_PID=$!
https_get() {  # https_get PORT PATH: the body, trusting only the test CA, checking the name
  curl -sf --max-time 20 --cacert "$tmp/tls/ca.crt" --resolve "$name:$1:127.0.0.1" \
    "https://$name:$1$2"
}
wait_until 300 https_get "$port" /metrics ||
  { tail -20 "$tmp/agent.log"; fail "the agent did not serve /metrics over TLS"; }
# The start-up line follows the first /proc scan, which can end after /metrics is served.
wait_until 300 grep -q 'sonde-agent running.* tls=true' "$tmp/agent.log" ||
  fail "the start-up line does not say tls=true"

[[ "$(presented_serial "$port" "$name")" == "$first" ]] || fail "the metrics port presents another certificate"
[[ "$(presented_serial "$dport" "$name")" == "$first" ]] || fail "the debug port presents another certificate"
: >"$tmp/plain"
code="$(curl -s -o "$tmp/plain" -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/metrics" || true)"
[[ "$code" != 200 ]] && ! grep -q sonde_agent_info "$tmp/plain" ||
  fail "plain HTTP on the TLS port was answered ($code)"
curl -s --max-time 5 --cacert "$tmp/tls/ca.crt" --resolve "other.example:$port:127.0.0.1" \
  -o /dev/null "https://other.example:$port/metrics" &&
  fail "a client checking another name accepted the certificate"
curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$hport/healthz" || fail "the health port is not plain HTTP"
https_get "$dport" "/debug/pprof/profile?seconds=1" >"$tmp/profile.pb" || fail "no profile over TLS"
[[ -s "$tmp/profile.pb" ]] || fail "an empty profile over TLS"
echo "TLS only, with the Secret's certificate, on the metrics and debug ports; health plain"

# Prometheus as the PodMonitor makes it scrape: https, the Secret's ca.crt, the certificate's
# name (pods are scraped by IP).
cat >"$tmp/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: sonde-agent
    scheme: https
    tls_config: {ca_file: "$tmp/tls/ca.crt", server_name: "$name"}
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YAML
run_prometheus "$tmp/prometheus.yml"
scraped() { [[ "$(prom_query "$1")" == "$2" ]]; }
wait_until 300 scraped 'up{job="sonde-agent"}' 1 ||
  fail "Prometheus does not scrape the agent over TLS: $(curl -s "$PROM_URL/api/v1/targets" | jq -c '.data.activeTargets[0].lastError')"
not_after="$(date -d "$(openssl x509 -in "$tmp/tls/tls.crt" -noout -enddate | sed 's/^notAfter=//')" +%s)"
got="$(prom_query sonde_agent_tls_certificate_not_after_timestamp_seconds)"
[[ "$got" == "$not_after" ]] || fail "the expiry Prometheus reads is $got, the certificate's $not_after"
echo "Prometheus scrapes https against the Secret's CA; expiry $not_after"

# Renewed in place (kubelet swaps ..data): presented from the next handshake, no restart.
second="$(serving_cert "$tmp/tls" "$name")"
[[ "$(presented_serial "$port" "$name")" == "$second" ]] || fail "the renewed certificate is not presented"
[[ "$(presented_serial "$dport" "$name")" == "$second" ]] ||
  fail "the renewed certificate is not presented on the debug port"
# Read whole before grep: `grep -q` stops at the match and, with pipefail, curl's broken pipe
# would fail the check.
https_get "$port" /metrics >"$tmp/after-renewal" || fail "no /metrics after the renewal"
grep -q '^sonde_agent_tls_certificate_reloads_total{result="ok"} 1$' "$tmp/after-renewal" ||
  fail "the renewal is not counted: $(grep reloads_total "$tmp/after-renewal")"
sleep 3  # scrapes after the renewal
wait_until 100 scraped 'sonde_agent_tls_certificate_reloads_total{result="ok"}' 1 ||
  fail "Prometheus did not scrape across the renewal"
scraped 'min_over_time(up{job="sonde-agent"}[10s])' 1 || fail "a scrape failed across the renewal"
kill -0 "$AGENT_PID" || fail "the agent exited"
echo "renewed: $first -> $second, presented at the next handshake, every scrape answered"

# A renewal whose key is not the certificate's: refused, the last good pair stays.
serving_cert "$tmp/tls" "$name" mismatched >/dev/null
[[ "$(presented_serial "$port" "$name")" == "$second" ]] || fail "a mismatched pair replaced the good one"
https_get "$port" /metrics >"$tmp/after-bad" || fail "no /metrics after a bad renewal"
grep -q '^sonde_agent_tls_certificate_reloads_total{result="error"} 1$' "$tmp/after-bad" ||
  fail "the bad renewal is not counted: $(grep reloads_total "$tmp/after-bad")"
grep -q 'TLS certificate not reloaded.*is not the key of the certificate' "$tmp/agent.log" ||
  fail "the agent log does not say why the renewal was refused"
# Not read again at every handshake while the files stay the same.
https_get "$port" /metrics >"$tmp/after-bad-again" || fail "no /metrics after a bad renewal"
grep -q '^sonde_agent_tls_certificate_reloads_total{result="error"} 1$' "$tmp/after-bad-again" ||
  fail "the same bad files were read again: $(grep reloads_total "$tmp/after-bad-again")"
echo "a mismatched renewal: refused once, counted and logged; $second still presented"

# Started with that pair, the agent refuses to run and says why.
stop_prometheus
stop_agent
if "$SONDE_BIN/sonde-agent" --standalone --metrics-address "127.0.0.1:$port" "${tls_args[@]}" \
  >"$tmp/refused.log" 2>&1; then
  fail "the agent started with a key that is not its certificate's"
fi
grep -q 'is not the key of the certificate' "$tmp/refused.log" ||
  fail "the agent does not say why it refused: $(tail -3 "$tmp/refused.log")"
"$SONDE_BIN/sonde-agent" --standalone --tls-cert-file "$tmp/tls/tls.crt" >"$tmp/half.log" 2>&1 &&
  fail "the agent started with a certificate and no key"
grep -q 'requires --tls-private-key-file' "$tmp/half.log" ||
  fail "a certificate without a key is not refused by name: $(tail -3 "$tmp/half.log")"
echo "metrics_tls_test: ok"
