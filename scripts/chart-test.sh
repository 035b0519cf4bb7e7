#!/usr/bin/env bash
# The Helm chart's tests (make chart-test): helm lint --strict and helm template over each values
# file in charts/tests/values (plus the defaults and sonde as a subchart given `global`), the
# rendered security and scraping invariants, the CRDs current with crds/src/ (scripts/gen-crds.py)
# and the chart's identical to crds/, the dashboards' JSON model, promtool check rules and
# promtool test rules. Needs helm (scripts/install-helm.sh) and promtool (Debian's prometheus).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chart="$root/charts/sonde"
tests="$root/charts/tests"
check="$tests/check_chart.py"
for tool in helm promtool python3; do
  command -v "$tool" >/dev/null || { echo "chart-test: $tool not found (make deps)" >&2; exit 1; }
done
tmp="$(mktemp -d /tmp/sonde-chart-test-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

echo "--- CRDs: crds/ and charts/sonde/crds/ are what crds/src/ generates (make crds)"
python3 "$root/scripts/gen-crds.py" --check
for f in "$root"/crds/*.yaml; do
  cmp "$f" "$chart/crds/$(basename "$f")" ||
    { echo "FAIL: $chart/crds/$(basename "$f") differs from crds/$(basename "$f"): run make crds" >&2; exit 1; }
done
for f in "$chart"/crds/*.yaml; do
  [[ -f "$root/crds/$(basename "$f")" ]] || { echo "FAIL: $f is not in crds/" >&2; exit 1; }
done
echo "$(ls "$root"/crds/*.yaml | wc -l) CRDs identical"

: >"$tmp/empty.yaml"
for values in "$tmp/empty.yaml" "$tests"/values/*.yaml; do
  name="$(basename "$values" .yaml)"; [[ "$name" == empty ]] && name=defaults
  echo "--- values: $name"
  helm lint --strict "$chart" -f "$values" >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out"; exit 1; }
  helm template sonde "$chart" -n sonde-system -f "$values" >"$tmp/$name.yaml"
  echo "rendered $(grep -c '^kind:' "$tmp/$name.yaml") objects"
  python3 "$check" invariants "$tmp/$name.yaml" "$values"
done

echo "--- kube-system: refused unless rbac.allowKubeSystem (the agents write Leases there)"
if helm template sonde "$chart" -n kube-system >"$tmp/kube-system.out" 2>&1; then
  echo "FAIL: the chart renders into kube-system without rbac.allowKubeSystem" >&2; exit 1
fi
grep -q "rbac.allowKubeSystem" "$tmp/kube-system.out" ||
  { cat "$tmp/kube-system.out"; echo "FAIL: the refusal does not name rbac.allowKubeSystem" >&2; exit 1; }
helm template sonde "$chart" -n kube-system --set rbac.allowKubeSystem=true >/dev/null ||
  { echo "FAIL: rbac.allowKubeSystem=true does not render" >&2; exit 1; }
echo "refused, and rendered with rbac.allowKubeSystem=true"

echo "--- sonde as a subchart, with global values"
mkdir -p "$tmp/umbrella/charts" "$tmp/umbrella/templates"
cp -r "$chart" "$tmp/umbrella/charts/sonde"
cat >"$tmp/umbrella/Chart.yaml" <<YAML
apiVersion: v2
name: platform
version: 1.0.0
dependencies: [{name: sonde, version: "*"}]
YAML
cat >"$tmp/umbrella/values.yaml" <<YAML
global: {imageRegistry: registry.example.com, storageClass: fast}
sonde:
  image: {repository: registry.example.com/sonde}
  metrics: {podMonitor: {enabled: true}}
YAML
helm lint --strict "$tmp/umbrella" >"$tmp/lint.out" 2>&1 || { cat "$tmp/lint.out"; exit 1; }
helm template platform "$tmp/umbrella" -n sonde-system >"$tmp/subchart.yaml"
grep -q 'image: registry.example.com/sonde:' "$tmp/subchart.yaml" ||
  { echo "FAIL: the subchart's image values were not applied" >&2; exit 1; }
echo "rendered $(grep -c '^kind:' "$tmp/subchart.yaml") objects"

echo "--- version: Chart.yaml's version and appVersion are the project's"
echo "version $("$root/scripts/chart-version.sh")"

echo "--- image, pull secrets and scheduling knobs as rendered"
helm template sonde "$chart" -n sonde-system --set global.imageRegistry=mirror.example.com \
  --set image.digest="sha256:$(printf 'a%.0s' {1..64})" \
  --set-json 'global.imagePullSecrets=[{"name":"globalcred"}]' \
  --set-json 'imagePullSecrets=[{"name":"regcred"},{"name":"globalcred"}]' \
  --set-json 'agent.podLabels={"azure.workload.identity/use":"true"}' \
  --set-json 'operator.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]' \
  --set-json 'operator.updateStrategy={"type":"Recreate"}' --set agent.updateStrategy.type=OnDelete \
  >"$tmp/knobs.yaml"
python3 - "$tmp/knobs.yaml" <<'PY'
import sys, yaml
objs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
ds, dep = objs[("DaemonSet", "sonde-agent")], objs[("Deployment", "sonde-operator")]
want = "mirror.example.com/sonde@sha256:" + "a" * 64
for o in (ds, dep):
    spec = o["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == want, spec["containers"][0]["image"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "globalcred"}], spec["imagePullSecrets"]
assert ds["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"] == "true"
assert "azure.workload.identity/use" not in ds["spec"]["selector"]["matchLabels"]
assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}, ds["spec"]["updateStrategy"]
assert dep["spec"]["strategy"] == {"type": "Recreate"}
assert dep["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
print("image", want, "; pull secrets regcred, globalcred once; podLabels, updateStrategy, strategy, topologySpreadConstraints applied")
PY

echo "--- a bad value is refused with its name"
for bad in 'imagePullSecrets=["regcred"]' 'agent.tolerations=[{"operator":"Sometimes"}]' \
           'operator.tolerations=["NoSchedule"]' 'global.imagePullSecrets=[{"secret":"x"}]'; do
  if helm template sonde "$chart" --set-json "$bad" >"$tmp/bad.out" 2>&1; then
    echo "FAIL: $bad was accepted: the schema must refuse it" >&2; exit 1
  fi
  echo "$bad: refused: $(grep -o "at '[^']*'.*" "$tmp/bad.out" | head -1)"
done
if helm template sonde "$chart" --set operator.replicas=0 >"$tmp/bad.out" 2>&1 ||
   ! grep -q "replicas" "$tmp/bad.out"; then
  cat "$tmp/bad.out"; echo "FAIL: operator.replicas=0 was not refused by the schema" >&2; exit 1
fi
echo "operator.replicas=0: $(grep -o 'replicas.*' "$tmp/bad.out" | head -1)"

echo "--- rules"
mkdir -p "$tmp/promrules"
python3 "$check" rules "$tmp/rules.yaml" "$tmp/promrules/sonde-rules.yaml"
promtool check rules "$tmp/promrules/sonde-rules.yaml"
cp "$tests/rules_test.yaml" "$tmp/promrules/"
promtool test rules "$tmp/promrules/rules_test.yaml"
python3 "$check" rule-selectors "$tmp/promrules/sonde-rules.yaml" sonde-agent sonde-operator
# The jobs are the chart's: other values reach every rule.
helm template sonde "$chart" -n sonde-system --set prometheusRule.enabled=true \
  --set metrics.jobs.agent=ours-agent --set metrics.jobs.operator=ours-operator >"$tmp/jobs.yaml"
python3 "$check" rules "$tmp/jobs.yaml" "$tmp/jobs-rules.yaml"
python3 "$check" rule-selectors "$tmp/jobs-rules.yaml" ours-agent ours-operator

echo "--- values: each documented in charts/sonde/README.md and changing the rendered chart"
mkdir -p "$tmp/values-doc"
python3 "$check" values-doc "$tmp/values-doc"

echo "--- dashboards"
python3 "$check" dashboards "$chart/dashboards" "$tmp/promrules/sonde-rules.yaml"
echo "--- dashboards as rendered"
python3 "$check" rendered-dashboards "$tmp/defaults.yaml" "$tmp/dash-defaults"
python3 "$check" dashboards "$tmp/dash-defaults" "$tmp/promrules/sonde-rules.yaml" >/dev/null
helm template sonde "$chart" -n sonde-system --set dashboards.multiCluster=true --set dashboards.editable=true \
  --set fullnameOverride=obs-sonde >"$tmp/multicluster.yaml"
python3 "$check" rendered-dashboards "$tmp/multicluster.yaml" "$tmp/dash-multicluster" >/dev/null
python3 - "$tmp/dash-multicluster" <<'PY'
import json, os, sys
for f in sorted(os.listdir(sys.argv[1])):
    d = json.load(open(os.path.join(sys.argv[1], f)))
    v = {x["name"]: x for x in d["templating"]["list"]}
    c = v["cluster"]
    assert c["type"] == "query" and c["hide"] == 0 and "cluster)" in c["definition"], (f, c)
    assert d["editable"] is True, f
    if "agent_daemonset" in v:
        assert v["agent_daemonset"]["query"] == "obs-sonde-agent", v["agent_daemonset"]
print("multiCluster: a visible Cluster variable on every dashboard; editable; the DaemonSet's name")
PY
echo "chart-test: ok"
