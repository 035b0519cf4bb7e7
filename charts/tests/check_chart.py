#!/usr/bin/env python3
"""Checks on the rendered sonde chart, run by scripts/chart-test.sh.

  check_chart.py invariants RENDERED.yaml VALUES.yaml  security and scraping invariants
  check_chart.py rules RENDERED.yaml OUT.yaml           the PrometheusRule's spec as a rules file
  check_chart.py dashboards DASHBOARD_DIR RULES.yaml    the dashboards' JSON model and metric names

Prints what it checked; exits non-zero with the reasons on the first failing document.
"""
import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "..", "sonde")
failures = []


def fail(msg):
    failures.append(msg)


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def documented_capabilities():
    """The capability names listed in agent-daemonset.yaml's header, and which are optional."""
    text = open(os.path.join(CHART, "templates", "agent-daemonset.yaml")).read()
    header = text.split("*/", 1)[0]
    caps, optional = set(), {}
    for line in header.splitlines():
        m = re.match(r"^  ([A-Z_]+)\s{2,}(.*)$", line)
        if m:
            caps.add(m.group(1))
            flag = re.search(r"\((agent\.[A-Za-z]+)\)", m.group(2))
            if flag:
                optional[m.group(1)] = flag.group(1)
    return caps, optional


def pod_specs(objects):
    for o in objects:
        spec = o.get("spec", {})
        if o["kind"] in ("Deployment", "DaemonSet"):
            yield o, spec["template"]["spec"]
        elif o["kind"] == "Pod":
            yield o, spec


def invariants(rendered, values_file):
    values = yaml.safe_load(open(values_file)) or {} if values_file else {}
    objects = docs(rendered)
    kinds = {}
    for o in objects:
        kinds.setdefault(o["kind"], []).append(o)
    caps, optional = documented_capabilities()
    want_caps = {c for c in caps if c not in optional}
    defaults = yaml.safe_load(open(os.path.join(CHART, "values.yaml")))
    for cap, flag in optional.items():
        section, key = flag.split(".")
        value = (values.get(section) or {}).get(key)
        if value is None:
            value = defaults[section][key]
        if value:
            want_caps.add(cap)
    checked = 0
    for o, spec in pod_specs(objects):
        name = f'{o["kind"]}/{o["metadata"]["name"]}'
        is_agent = o["kind"] == "DaemonSet"
        if spec.get("hostNetwork") or spec.get("hostIPC"):
            fail(f"{name}: hostNetwork/hostIPC")
        if bool(spec.get("hostPID")) != is_agent:
            fail(f"{name}: hostPID is {spec.get('hostPID')}, only the agent has it")
        host_volumes = {v["name"]: v["hostPath"] for v in spec.get("volumes", []) if "hostPath" in v}
        # The one host volume: the node's tracefs, on the agent only, when asked for.
        want_host = {}
        if is_agent and (values.get("agent") or {}).get("hostTracefs", defaults["agent"]["hostTracefs"]):
            want_host = {"tracefs": {"path": "/sys/kernel/tracing", "type": "Directory"}}
        if host_volumes != want_host:
            fail(f"{name}: host volumes {host_volumes}, want {want_host}")
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            sc = c.get("securityContext") or {}
            cname = f"{name}/{c['name']}"
            if sc.get("privileged"):
                fail(f"{cname}: privileged")
            if sc.get("allowPrivilegeEscalation") is not False:
                fail(f"{cname}: allowPrivilegeEscalation is not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                fail(f"{cname}: root filesystem not read-only")
            drop = (sc.get("capabilities") or {}).get("drop")
            add = set((sc.get("capabilities") or {}).get("add") or [])
            if drop != ["ALL"]:
                fail(f"{cname}: capabilities.drop is {drop}, want [ALL]")
            expected = want_caps if is_agent else set()
            if add != expected:
                fail(f"{cname}: capabilities.add is {sorted(add)}, documented {sorted(expected)}")
            # Register writes into workloads only when asked for (agent.goTls.performRet).
            perform_ret = ((values.get("agent") or {}).get("goTls") or {}).get(
                "performRet", defaults["agent"]["goTls"]["performRet"])
            if is_agent and ("--go-tls-perform-ret" in c.get("args", [])) != bool(perform_ret):
                fail(f"{cname}: --go-tls-perform-ret in args is not agent.goTls.performRet "
                     f"({perform_ret})")
            max_binaries = ((values.get("agent") or {}).get("goTls") or {}).get(
                "maxBinaries", defaults["agent"]["goTls"]["maxBinaries"])
            if is_agent and f"--max-go-tls-binaries={max_binaries}" not in c.get("args", []):
                fail(f"{cname}: --max-go-tls-binaries in args is not agent.goTls.maxBinaries "
                     f"({max_binaries})")
            for m in c.get("volumeMounts", []):
                if m["name"] in host_volumes and m.get("readOnly") is not True:
                    fail(f"{cname}: host volume {m['name']} mounted read-write")
                if m["name"] == "tracefs" and m["mountPath"] != "/sys/kernel/tracing":
                    fail(f"{cname}: tracefs mounted at {m['mountPath']}, the agent looks in "
                         "/sys/kernel/tracing")
            checked += 1
        if not is_agent:
            psc = spec.get("securityContext") or {}
            if psc.get("runAsNonRoot") is not True:
                fail(f"{name}: runAsNonRoot is not true")
    if checked == 0:
        fail("no containers rendered")
    # The kubelet probes what each binary says of itself: /healthz restarts a binary whose loops
    # stopped, /readyz holds a rollout until its caches listed; never /metrics, which answers
    # whatever the loops do.
    for kind in ("Deployment", "DaemonSet"):
        for o in kinds.get(kind, []):
            for c in o["spec"]["template"]["spec"]["containers"]:
                for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                    got = ((c.get(probe) or {}).get("httpGet") or {})
                    if got.get("path") != path or got.get("port") != "metrics":
                        fail(f'{kind}/{o["metadata"]["name"]}/{c["name"]}: {probe} is {got}, '
                             f'want GET {path} on port metrics')
    # The agents watch the policies the operator watches (operator.watchNamespace).
    scope = (values.get("operator") or {}).get("watchNamespace") or ""
    for o in kinds.get("DaemonSet", []):
        for c in o["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env") or []}
            if (env.get("SONDE_WATCH_NAMESPACE") or "") != scope:
                fail(f'DaemonSet/{o["metadata"]["name"]}/{c["name"]}: SONDE_WATCH_NAMESPACE is '
                     f'{env.get("SONDE_WATCH_NAMESPACE")!r}, operator.watchNamespace is {scope!r}')
    # ClusterProfilingPolicies (and the Namespaces they select by) only when not scoped: a
    # scoped install has no cluster-wide reach. Read, and the operator's /status, never create.
    want = {} if scope else {
        "agent": {"clusterprofilingpolicies": {"get", "list", "watch"},
                  "namespaces": {"get", "list", "watch"}},
        "operator": {"clusterprofilingpolicies": {"get", "list", "watch"},
                     "clusterprofilingpolicies/status": {"get", "update", "patch"}}}
    for o in kinds.get("ClusterRole", []) + kinds.get("Role", []):
        name = o["metadata"]["name"]
        got = {}
        for rule in o.get("rules") or []:
            for res in rule.get("resources") or []:
                if res.startswith("clusterprofilingpolicies") or res == "namespaces":
                    got.setdefault(res, set()).update(rule.get("verbs") or [])
        expected = want.get(name.rsplit("-", 1)[-1], {}) if o["kind"] == "ClusterRole" else {}
        if got != expected:
            fail(f'{o["kind"]}/{name}: cluster-policy and namespace rules {got}, want {expected} '
                 f'(operator.watchNamespace={scope!r})')
    for kind in ("PodMonitor", "ServiceMonitor"):
        for o in kinds.get(kind, []):
            eps = o["spec"].get("podMetricsEndpoints") or o["spec"].get("endpoints")
            for ep in eps:
                if ep.get("honorLabels") is not True:
                    fail(f"{kind}/{o['metadata']['name']}: honorLabels is not true: the "
                         "workload's namespace/pod/container labels would become exported_*")
    metrics = values.get("metrics") or {}
    for key, kind in (("podMonitor", "PodMonitor"), ("serviceMonitor", "ServiceMonitor")):
        want = bool((metrics.get(key) or {}).get("enabled"))
        if want != bool(kinds.get(kind)):
            fail(f"metrics.{key}.enabled={want} but {len(kinds.get(kind, []))} {kind} rendered")
        extra = (metrics.get(key) or {}).get("additionalLabels") or {}
        for o in kinds.get(kind, []):
            for k, v in extra.items():
                if o["metadata"]["labels"].get(k) != v:
                    fail(f"{kind}: additionalLabels {k}={v} missing")
    annotations = metrics.get("scrapeAnnotations", True)
    for o, spec in pod_specs(objects):
        if o["kind"] == "Pod":
            continue
        ann = o["spec"]["template"]["metadata"].get("annotations") or {}
        if (ann.get("prometheus.io/scrape") == "true") != annotations:
            fail(f'{o["kind"]}/{o["metadata"]["name"]}: prometheus.io/scrape annotation is '
                 f'{ann.get("prometheus.io/scrape")}, metrics.scrapeAnnotations={annotations}')
    dash = values.get("dashboards") or {}
    label, label_value = dash.get("label", "grafana_dashboard"), dash.get("labelValue", "1")
    maps = [o for o in kinds.get("ConfigMap", []) if "-dashboard-" in o["metadata"]["name"]]
    want_maps = len(os.listdir(os.path.join(CHART, "dashboards"))) if dash.get("enabled", True) else 0
    if len(maps) != want_maps:
        fail(f"{len(maps)} dashboard ConfigMaps, want {want_maps}")
    for m in maps:
        if m["metadata"]["labels"].get(label) != label_value:
            fail(f'{m["metadata"]["name"]}: label {label}={label_value!r} missing')
        for key, text in m["data"].items():
            json.loads(text)
    print(f"invariants: {checked} containers; agent capabilities {sorted(want_caps)}; "
          f"{len(kinds.get('PodMonitor', []))} PodMonitor, "
          f"{len(kinds.get('ServiceMonitor', []))} ServiceMonitor, {len(maps)} dashboards")


def rules(rendered, out):
    found = [o for o in docs(rendered) if o["kind"] == "PrometheusRule"]
    if len(found) != 1:
        fail(f"{len(found)} PrometheusRule objects rendered, want 1")
        return
    with open(out, "w") as f:
        yaml.safe_dump(found[0]["spec"], f, sort_keys=False)


# Metrics the dashboards may use that sonde does not export: the agent pods' own CPU (cAdvisor,
# from the kubelet) and resources (kube-state-metrics). Only in the agent health dashboard.
EXTERNAL = {"container_cpu_usage_seconds_total", "kube_pod_container_resource_limits",
            "kube_pod_container_resource_requests"}
SONDE_PREFIXES = ("sonde_", "container_nodejs_", "container_go_tls_", "container_cpu_profile_")
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "or", "and",
                   "unless", "bool", "offset"}


def metric_names(expr):
    """The metric names an expression selects (functions, keywords and label names left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"label_values\((.*),\s*\w+\)$", r"\1", expr)  # a variable query's label
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
        tok, call = m.group(1), m.group(2)
        if call or tok in PROMQL_KEYWORDS or expr[max(0, m.start() - 1)] == "$":
            continue
        names.add(tok)
    return names


def dashboards(folder, rules_file):
    recorded = set()
    for g in yaml.safe_load(open(rules_file))["groups"]:
        recorded |= {r["record"] for r in g["rules"] if "record" in r}
    uids = set()
    for fname in sorted(os.listdir(folder)):
        path = os.path.join(folder, fname)
        d = json.load(open(path))
        where = fname
        for key in ("uid", "title", "schemaVersion", "panels", "templating", "time"):
            if key not in d:
                fail(f"{where}: no {key}")
        if not (isinstance(d.get("uid"), str) and 0 < len(d["uid"]) <= 40) or d["uid"] in uids:
            fail(f"{where}: uid {d.get('uid')!r} missing, longer than 40 or not unique")
        uids.add(d.get("uid"))
        variables = {v["name"]: v for v in d["templating"]["list"]}
        ds = variables.get("datasource")
        if not ds or ds["type"] != "datasource" or ds["query"] != "prometheus":
            fail(f"{where}: no Prometheus datasource variable")
        for name in ("namespace", "pod"):
            if name not in variables or variables[name]["type"] != "query":
                fail(f"{where}: no {name} query variable")
        exprs = [v["definition"] for v in variables.values() if v["type"] == "query"]
        ids = set()
        for p in d["panels"]:
            pw = f"{where} panel {p.get('id')} {p.get('title')!r}"
            for key in ("id", "type", "title", "gridPos"):
                if key not in p:
                    fail(f"{pw}: no {key}")
            if p.get("id") in ids:
                fail(f"{pw}: duplicate id")
            ids.add(p.get("id"))
            gp = p.get("gridPos", {})
            if not all(isinstance(gp.get(k), int) for k in "xywh") or gp["x"] + gp["w"] > 24:
                fail(f"{pw}: gridPos {gp} is not within 24 columns")
            if p.get("type") == "row":
                continue
            if p.get("datasource", {}).get("uid") != "${datasource}":
                fail(f"{pw}: datasource is not the $datasource variable")
            if not p.get("targets"):
                fail(f"{pw}: no targets")
            for t in p.get("targets", []):
                if not t.get("refId") or not t.get("expr"):
                    fail(f"{pw}: a target without refId or expr")
                if t.get("datasource", {}).get("uid") != "${datasource}":
                    fail(f"{pw}: target {t.get('refId')} datasource is not $datasource")
                exprs.append(t.get("expr", ""))
        used = set()
        for e in exprs:
            used |= metric_names(e)
        for m in sorted(used):
            if m in recorded:
                fail(f"{where}: uses the recording rule {m}: dashboards must work without the rules")
            elif m in EXTERNAL:
                if d["uid"] != "sonde-agent-health":
                    fail(f"{where}: {m} (not sonde's) outside the agent health dashboard")
            elif not m.startswith(SONDE_PREFIXES):
                fail(f"{where}: {m} is neither sonde's nor an allowed cAdvisor/kube-state-metrics metric")
        print(f"dashboards: {fname}: {len(d['panels'])} panels, metrics {sorted(used)}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"invariants": invariants, "rules": rules, "dashboards": dashboards}[cmd](*args)
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
