# Shared helpers for e2e tests (sourced).
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_contains() {  # expect_contains TEXT NEEDLE WHAT
  [[ "$1" == *"$2"* ]] || fail "$3: expected to contain '$2', got:"$'\n'"$1"
}
# Waits until a command succeeds, up to N tenths of a second.
wait_until() {
  local tries="$1" i; shift
  for ((i = 0; i < tries; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

# Fake containers for the in-cluster tests: a process exec'd inside a cgroup named like a
# containerd container's, which the agent maps to a pod through the pod's containerStatuses.
# cgroup_v2_dir NAME: where a test's cgroup-v2 folder NAME goes (/sys/fs/cgroup/unified on a
# hybrid hierarchy, cgroup v2 beside v1).
cgroup_v2_dir() {
  if [[ -d /sys/fs/cgroup/unified ]]; then echo "/sys/fs/cgroup/unified/$1"; else echo "/sys/fs/cgroup/$1"; fi
}
# The caller sets `cgroot` (an existing cgroup-v2 folder) and the arrays `pids` and `cgroups`
# its cleanup kills and removes. run_in_container NAME ID COMMAND...: output appended to
# $SONDE_E2E_TMP/NAME.out; sets LAST_PID.
run_in_container() {
  local name="$1" id="$2"; shift 2
  local cg="$cgroot/cri-containerd-$id.scope"
  mkdir -p "$cg"
  cgroups+=("$cg")
  bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@" >>"$SONDE_E2E_TMP/$name.out" 2>&1 &
  LAST_PID=$!
  pids+=("$LAST_PID")
  wait_until 50 grep -q "$id" "/proc/$LAST_PID/cgroup" ||
    fail "$name: /proc/$LAST_PID/cgroup does not name container $id: $(cat "/proc/$LAST_PID/cgroup" 2>&1)"
}
# remove_cgroup DIR: kills every process left in the cgroup (a container's forked workers
# outlive the process run_in_container started, and a busy one would load every later test),
# waits up to 5 s for it to empty, and removes it.
remove_cgroup() {
  local dir="$1" p
  [[ -d "$dir" ]] || return 0
  if [[ -w "$dir/cgroup.kill" ]]; then
    echo 1 >"$dir/cgroup.kill" 2>/dev/null || true
  else
    while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$dir/cgroup.procs"
  fi
  for _ in $(seq 50); do [[ -s "$dir/cgroup.procs" ]] || break; sleep 0.1; done
  rmdir "$dir" 2>/dev/null || true
}
# A random 64-hex container id.
new_id() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# check_metrics_documented PORT: every metric family the agent on PORT exports (its `# TYPE`
# lines) is named in the docs (README.md or docs/*.md, as `name` or `name{...}`), so a new
# metric cannot ship without its row.
check_metrics_documented() {
  local readme names missing=()
  readme="$(cat "$(dirname "${BASH_SOURCE[0]}")"/../README.md "$(dirname "${BASH_SOURCE[0]}")"/../docs/*.md)"
  names="$(curl -sf "http://127.0.0.1:$1/metrics" | awk '$1 == "#" && $2 == "TYPE" { print $3 }' | sort -u)"
  [[ -n "$names" ]] || fail "no metric families on port $1"
  for n in $names; do
    [[ "$readme" == *"\`$n\`"* || "$readme" == *"\`$n{"* || "$readme" == *"\`$n,"* ]] || missing+=("$n")
  done
  ((${#missing[@]} == 0)) || fail "metric families missing from the docs' tables: ${missing[*]}"
  echo "metrics documented: $(wc -w <<<"$names") families, each in README.md or docs/"
}

# start_gotls_server NAME AGENT_PORT: runs $SONDE_E2E_TMP/bin/NAME server (the Go TLS workload,
# e2e/workloads/gotls), waits until it listens and the agent on AGENT_PORT tracks it (its binary
# is then instrumented: a client of the same file is counted from its first call); sets
# server_port and adds its pid to the caller's `pids`.
start_gotls_server() {
  local name="$1" agent_port="$2" out="$SONDE_E2E_TMP/$1.out"
  "$SONDE_E2E_TMP/bin/$name" server >"$out" 2>&1 &
  pids+=($!)
  wait_until 100 grep -q listening "$out" || fail "$name did not start"
  server_port="$(awk '/listening/ { print $2 }' "$out")"
  wait_until 100 bash -c "curl -sf http://127.0.0.1:$agent_port/metrics | grep -q '^sonde_agent_gotls_processes{.*container=\"$name\".*} 1'" ||
    fail "the agent does not track $name: $(curl -sf "http://127.0.0.1:$agent_port/metrics" | grep gotls_processes)"
}

# node_lines: the global associative array `nodes`, each Node.js line the tests cover (18, 20, 22,
# 24) to its binary: Debian's /usr/bin/node for 20, the official builds in $test_nodes (default
# /opt/sonde/test-nodes, scripts/install-test-nodes.sh) for the others; fails naming a missing line.
node_lines() {
  test_nodes="${test_nodes:-${SONDE_TEST_NODES:-/opt/sonde/test-nodes}}"
  declare -gA nodes=([20]=/usr/bin/node)
  local dir line
  for dir in "$test_nodes"/node-*; do
    [[ -x "$dir/node" ]] && nodes[$(basename "$dir" | sed 's/^node-\([0-9]*\).*/\1/')]="$dir/node"
  done
  for line in 18 20 22 24; do
    [[ -n "${nodes[$line]:-}" ]] || fail "no Node.js $line (make deps installs them in $test_nodes)"
  done
}

# The Go build cache e2e/workloads/go_build.sh shares with the build's Go test fixtures.
E2E_GOCACHE="${SONDE_GOCACHE:-$HOME/.cache/sonde-go}"
# go_build WORKLOAD OUT [GO BUILD FLAG...]: e2e/workloads/go_build.sh, or the test fails.
go_build() {
  "$(dirname "${BASH_SOURCE[0]}")/workloads/go_build.sh" "$@" || fail "go build $*"
}

# A free TCP port on loopback.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# A serving certificate for the agent's TLS (--tls-cert-file), laid out as kubelet mounts a
# kubernetes.io/tls Secret: DIR/tls.crt, DIR/tls.key and DIR/ca.crt are links into DIR/..data,
# itself a link to the current version's folder, which a renewal replaces with one rename.
# serving_cert DIR NAME [mismatched]: a new version with a new key and a certificate for the DNS
# name NAME signed by the CA of DIR (made at the first call; its key stays beside DIR); with
# "mismatched", the certificate is for another key than tls.key. Prints the certificate's serial
# (hex, as `openssl x509 -serial` does).
serving_cert() {
  local dir="$1" name="$2" mode="${3:-}" v
  mkdir -p "$dir"
  if [[ ! -f "$dir.ca.key" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=sonde e2e CA" -keyout "$dir.ca.key" -out "$dir.ca.crt" 2>/dev/null || return 1
  fi
  v="$(mktemp -d "$dir/..v-XXXXXX")"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -addext "subjectAltName=DNS:$name" -keyout "$v/tls.key" -out "$v/tls.csr" 2>/dev/null || return 1
  openssl x509 -req -in "$v/tls.csr" -CA "$dir.ca.crt" -CAkey "$dir.ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 1 -copy_extensions copy -out "$v/tls.crt" 2>/dev/null || return 1
  if [[ "$mode" == mismatched ]]; then
    openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:P-256 -out "$v/tls.key" 2>/dev/null || return 1
  fi
  cp "$dir.ca.crt" "$v/ca.crt"
  chmod 0400 "$v/tls.key"
  ln -sfn "$(basename "$v")" "$dir/..data_tmp" && mv -T "$dir/..data_tmp" "$dir/..data"
  for f in tls.crt tls.key ca.crt; do [[ -L "$dir/$f" ]] || ln -s "..data/$f" "$dir/$f"; done
  openssl x509 -in "$v/tls.crt" -noout -serial | sed 's/^serial=//'
}
# The serial of the certificate presented on 127.0.0.1:PORT for NAME: presented_serial PORT NAME.
presented_serial() {
  openssl s_client -connect "127.0.0.1:$1" -servername "$2" </dev/null 2>/dev/null |
    openssl x509 -noout -serial | sed 's/^serial=//'
}

# A standalone config with Go TLS alone, for the processes whose executable matches GLOB (only a
# test's own programs: other Go programs on the machine would attach and detach too):
# gotls_only_config FILE GLOB.
gotls_only_config() {
  cat >"$1" <<YAML
targets:
  - exe: "$2"
instrumentations:
  nodejsEventLoop: false
  goTLS: true
YAML
}

# Starts the agent standalone in the background: start_agent PORT [ARGS...]; sets AGENT_PID.
start_agent() {
  local port="$1"; shift
  "$SONDE_BIN/sonde-agent" --standalone --metrics-address "127.0.0.1:$port" "$@" \
    >"$SONDE_E2E_TMP/agent.log" 2>&1 &
  AGENT_PID=$!
  wait_until 300 curl -sf "http://127.0.0.1:$port/metrics" ||
    { cat "$SONDE_E2E_TMP/agent.log"; fail "agent did not serve /metrics on $port"; }
}

stop_agent() {
  [[ -n "${AGENT_PID:-}" ]] || return 0
  kill -INT "$AGENT_PID" 2>/dev/null || true
  wait "$AGENT_PID" 2>/dev/null || true
  AGENT_PID=
}

# Starts Debian's Prometheus with the configuration file CONFIG and waits until it is ready:
# run_prometheus CONFIG; sets PROM_URL and PROM_PID.
run_prometheus() {
  local port
  port="$(free_port)"
  prometheus --config.file="$1" --storage.tsdb.path="$SONDE_E2E_TMP/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$SONDE_E2E_TMP/prometheus.log" 2>&1 &
  PROM_PID=$!
  PROM_URL="http://127.0.0.1:$port"
  wait_until 300 curl -sf "$PROM_URL/-/ready" ||
    { tail -20 "$SONDE_E2E_TMP/prometheus.log"; fail "prometheus did not start"; }
}

# Starts Debian's Prometheus scraping 127.0.0.1:AGENT_PORT every second: start_prometheus
# AGENT_PORT; sets PROM_URL and PROM_PID.
start_prometheus() {
  cat >"$SONDE_E2E_TMP/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: sonde-agent
    static_configs: [{targets: ["127.0.0.1:$1"]}]
YAML
  run_prometheus "$SONDE_E2E_TMP/prometheus.yml"
  # Prometheus hands new targets to its scrape manager every 5 s: wait for the first scrape.
  wait_until 150 bash -c "[[ \$(curl -sf --get '$PROM_URL/api/v1/query' --data-urlencode 'query=up' | jq -r '.data.result[0].value[1]') == 1 ]]" ||
    fail "prometheus never scraped the agent"
}

stop_prometheus() {
  [[ -n "${PROM_PID:-}" ]] || return 0
  kill "$PROM_PID" 2>/dev/null || true
  wait "$PROM_PID" 2>/dev/null || true
  PROM_PID=
}

# Instant query through Prometheus's HTTP API; prints the first sample's value or "none".
prom_query() {
  curl -sf --get "$PROM_URL/api/v1/query" --data-urlencode "query=$1" |
    jq -r 'if (.data.result | length) > 0 then .data.result[0].value[1] else "none" end'
}

# The agent's own /metrics value of a series (exact label match on the given selector text).
agent_metric() {  # agent_metric PORT 'name{labels}'
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v s="$2" 'index($0, s" ") == 1 { print $2 }'
}

# float comparisons: within VALUE WANT TOL → exit 0 when |VALUE-WANT| <= TOL
within() { awk -v v="$1" -v w="$2" -v t="$3" 'BEGIN { d = v - w; if (d < 0) d = -d; exit !(d <= t) }'; }
at_least() { awk -v v="$1" -v w="$2" 'BEGIN { exit !(v >= w) }'; }

# Starts the fake API server enforcing the RBAC rendered in CHART_YAML (`helm template sonde
# charts/sonde -n NS` output, release name "sonde"): start_fake_apiserver CHART_YAML NS. Sets
# API_URL and API_PID and writes $SONDE_E2E_TMP/kubeconfig-{admin,agent,operator}, whose
# tokens are "admin" (everything: the test's own set-up) and the chart's sonde-agent and
# sonde-operator service accounts, so the binaries run with exactly the chart's permissions.
# More identities for the fake (TOKEN=USER[;aud=A,B][;expired]) go in FAKE_API_IDENTITIES; with
# FAKE_AGENT_NODE set, the agent's token is bound to that node (the user's extra attribute
# authentication.kubernetes.io/node-name, as a pod-bound token on Kubernetes 1.30+).
FAKE_API_IDENTITIES=()
start_fake_apiserver() {
  local chart="$1" ns="$2" out="$SONDE_E2E_TMP/apiserver.out" who
  python3 "$(dirname "${BASH_SOURCE[0]}")/../common/kube/testing/fake_apiserver.py" --port 0 \
    --rbac "$chart" --identity admin-token=admin \
    --identity "agent-token=system:serviceaccount:$ns:sonde-agent${FAKE_AGENT_NODE:+;extra=authentication.kubernetes.io/node-name:$FAKE_AGENT_NODE}" \
    --identity "operator-token=system:serviceaccount:$ns:sonde-operator" \
    "${FAKE_API_IDENTITIES[@]/#/--identity=}" >"$out" 2>&1 &
  API_PID=$!
  wait_until 100 grep -q '^PORT ' "$out" || { cat "$out"; fail "the fake API server did not start"; }
  API_URL="http://127.0.0.1:$(sed -n 's/^PORT //p' "$out")"
  for who in admin agent operator; do
    cat >"$SONDE_E2E_TMP/kubeconfig-$who" <<YAML
apiVersion: v1
kind: Config
current-context: fake
clusters: [{name: fake, cluster: {server: "$API_URL"}}]
users: [{name: $who, user: {token: $who-token}}]
contexts: [{name: fake, context: {cluster: fake, user: $who, namespace: $ns}}]
YAML
  done
}

# The set-up every cluster-mode test shares: cluster_test_start CGROUP_DIR_NAME. Needs root;
# sets tmp, node_name, report_ns, report_path and cgroot (created); empties pids and cgroups (what
# the test starts and creates: cleaned up on exit, with the agent, the operator in op_pid and
# the fake API server); renders the chart and starts the fake API server enforcing its RBAC
# (api_pid, kube = kube_admin).
cluster_test_start() {
  [[ $EUID -eq 0 ]] || fail "needs root (cgroups and BPF)"
  command -v helm >/dev/null || fail "helm not found (make deps)"
  tmp="$SONDE_E2E_TMP"
  node_name="e2e-node"
  report_ns="sonde-system"
  report_path=/apis/sonde.dev/v1alpha1/namespaces/$report_ns/profilingnodereports/$node_name
  cgroot="$(cgroup_v2_dir "$1")"
  pids=() cgroups=() api_pid="" op_pid=""
  trap cluster_test_cleanup EXIT
  mkdir -p "$cgroot"
  helm template sonde "$(dirname "${BASH_SOURCE[0]}")/../charts/sonde" -n "$report_ns" \
    >"$tmp/chart.yaml" || fail "helm template"
  start_fake_apiserver "$tmp/chart.yaml" "$report_ns"
  api_pid=$API_PID
}
kube() { kube_admin "$@"; }

cluster_test_cleanup() {
  local p c
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  stop_agent
  if [[ -n "$op_pid" ]]; then kill "$op_pid" 2>/dev/null || true; wait "$op_pid" 2>/dev/null || true; fi
  if [[ -n "$api_pid" ]]; then  # resumed first: a test may have stopped it
    kill -CONT "$api_pid" 2>/dev/null || true
    kill "$api_pid" 2>/dev/null || true
    wait "$api_pid" 2>/dev/null || true
  fi
  for c in "${cgroups[@]}"; do remove_cgroup "$c"; done
  if [[ -d "$cgroot" ]]; then rmdir "$cgroot" 2>/dev/null || true; fi
}

# kube_admin METHOD PATH [JSON]: one API call as admin (PATCH is a merge patch).
kube_admin() {
  local ctype=application/json
  [[ "$1" == PATCH ]] && ctype=application/merge-patch+json
  curl -sf -X "$1" -H "Authorization: Bearer admin-token" -H "Content-Type: $ctype" \
    "$API_URL$2" ${3:+--data "$3"}
}

# The fake's request log entries with a given status: fake_requests_with STATUS.
fake_requests_with() {
  curl -sf "$API_URL/_fake/requests" | jq -c ".requests[] | select(.status == $1)"
}
