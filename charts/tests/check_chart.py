#!/usr/bin/env python3
"""Checks on the rendered sonde chart, run by scripts/chart-test.sh.

  check_chart.py invariants RENDERED.yaml VALUES.yaml  security and scraping invariants
  check_chart.py rules RENDERED.yaml OUT.yaml           the PrometheusRule's spec as a rules file
  check_chart.py dashboards DASHBOARD_DIR RULES.yaml    the dashboards' JSON model and metric names
  check_chart.py rendered-dashboards RENDERED.yaml OUT_DIR  the rendered dashboards, written out
  check_chart.py rule-selectors RULES.yaml AGENT_JOB OPERATOR_JOB  every rule reads sonde's jobs only
  check_chart.py values-doc SCRATCH_DIR                 every leaf of values.yaml is in the chart
                                                        README and changes the rendered chart

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


def tls_invariants(kinds):
    """agent.tls: the agent serves the certificate it mounts, and whatever scrapes it expects TLS
    from that Secret's CA for the name the certificate carries."""
    for ds in kinds.get("DaemonSet", []):
        spec = ds["spec"]["template"]["spec"]
        agent = spec["containers"][0]
        args = agent.get("args") or []
        cert = [a.split("=", 1)[1] for a in args if a.startswith("--tls-cert-file=")]
        key = [a.split("=", 1)[1] for a in args if a.startswith("--tls-private-key-file=")]
        ann = ds["spec"]["template"]["metadata"].get("annotations") or {}
        monitors = [ep for o in kinds.get("PodMonitor", []) for ep in o["spec"]["podMetricsEndpoints"]]
        if not cert:
            if key or any(ep.get("scheme") == "https" for ep in monitors) or \
                    ann.get("prometheus.io/scheme") == "https":
                fail("agent without --tls-cert-file, but a key flag or an https scrape")
            continue
        if len(key) != 1 or os.path.dirname(cert[0]) != os.path.dirname(key[0]):
            fail(f"agent TLS: certificate {cert} and key {key} not from one mounted Secret")
            continue
        mounts = {m["mountPath"]: m["name"] for m in agent.get("volumeMounts") or []
                  if not m.get("subPath")}  # a subPath mount never sees the renewed files
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes") or []
                   if "secret" in v}
        secret = secrets.get(mounts.get(os.path.dirname(cert[0]), ""))
        if not secret:
            fail(f"agent TLS: {os.path.dirname(cert[0])} is not a Secret mounted without subPath")
            continue
        if "prometheus.io/scrape" in ann and ann.get("prometheus.io/scheme") != "https":
            fail("agent TLS: the scrape annotations do not say prometheus.io/scheme: https")
        for ep in monitors:
            ca = ((ep.get("tlsConfig") or {}).get("ca") or {}).get("secret") or {}
            if ep.get("scheme") != "https" or ca.get("name") != secret:
                fail(f"agent TLS: the PodMonitor scrapes {ep.get('scheme')} trusting {ca}, "
                     f"want https and the CA of Secret {secret}")
            names = [n for c in kinds.get("Certificate", []) if c["spec"]["secretName"] == secret
                     for n in c["spec"]["dnsNames"]]
            if kinds.get("Certificate") and ep["tlsConfig"].get("serverName") not in names:
                fail(f"agent TLS: the PodMonitor checks {ep['tlsConfig'].get('serverName')!r}, "
                     f"the Certificate names {names}")


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
            wait_source = (values.get("agent") or {}).get(
                "waitSource", defaults["agent"]["waitSource"])
            if is_agent and f"--wait-source={wait_source}" not in c.get("args", []):
                fail(f"{cname}: --wait-source in args is not agent.waitSource ({wait_source})")
            nodejs_metrics = ((values.get("agent") or {}).get("nodejs") or {}).get(
                "metrics", defaults["agent"]["nodejs"]["metrics"])
            if is_agent and f"--nodejs-metrics={nodejs_metrics}" not in c.get("args", []):
                fail(f"{cname}: --nodejs-metrics in args is not agent.nodejs.metrics "
                     f"({nodejs_metrics})")
            keep = ((values.get("agent") or {}).get("goTls") or {}).get(
                "keepProbesSeconds", defaults["agent"]["goTls"]["keepProbesSeconds"])
            if is_agent and f"--go-tls-keep-probes-seconds={keep}" not in c.get("args", []):
                fail(f"{cname}: --go-tls-keep-probes-seconds in args is not "
                     f"agent.goTls.keepProbesSeconds ({keep})")
            max_hz = ((values.get("agent") or {}).get("cpu") or {}).get(
                "maxFrequencyHz", defaults["agent"]["cpu"]["maxFrequencyHz"])
            if is_agent and f"--max-cpu-frequency-hz={max_hz}" not in c.get("args", []):
                fail(f"{cname}: --max-cpu-frequency-hz in args is not agent.cpu.maxFrequencyHz "
                     f"({max_hz})")
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
    # whatever the loops do. The agent's on its probe listener (--health-address), which slow
    # clients of the metrics port cannot starve.
    for kind, port in (("Deployment", "metrics"), ("DaemonSet", "health")):
        for o in kinds.get(kind, []):
            for c in o["spec"]["template"]["spec"]["containers"]:
                for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
                    got = ((c.get(probe) or {}).get("httpGet") or {})
                    if got.get("path") != path or got.get("port") != port:
                        fail(f'{kind}/{o["metadata"]["name"]}/{c["name"]}: {probe} is {got}, '
                             f'want GET {path} on port {port}')
                if kind == "DaemonSet":
                    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                    want = f"--health-address=0.0.0.0:{ports.get('health')}"
                    if want not in c.get("args", []):
                        fail(f'DaemonSet/{o["metadata"]["name"]}/{c["name"]}: port health is '
                             f'{ports.get("health")} but the agent is not told {want}')
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
        "agent": {"clusterprofilingpolicies": {"list", "watch"},
                  "namespaces": {"list", "watch"}},
        "operator": {"clusterprofilingpolicies": {"list", "watch"},
                     "clusterprofilingpolicies/status": {"update"}}}
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
    # Scoped: pods, events and policies only through Roles in the watched namespace; the only
    # cluster-wide grant left is the agent's get of its Node (and the aggregated user roles).
    release_ns = "sonde-system"
    for o in kinds.get("ClusterRole", []):
        labels = o["metadata"].get("labels") or {}
        aggregated = any(k.startswith("rbac.authorization.k8s.io/aggregate-to-") for k in labels)
        for rule in o.get("rules") or []:
            res = set(rule.get("resources") or [])
            if scope and not aggregated and res & {"pods", "events", "profilingpolicies",
                                                   "profilingpolicies/status"}:
                fail(f'ClusterRole/{o["metadata"]["name"]}: grants {sorted(res)} cluster-wide '
                     f'although operator.watchNamespace={scope!r}')
    if scope:
        for who, want_res in (("agent", {"profilingpolicies", "pods", "events"}),
                              ("operator", {"profilingpolicies", "profilingpolicies/status", "events"})):
            roles = [o for o in kinds.get("Role", [])
                     if o["metadata"]["name"].endswith(f"-{who}-watch")
                     and o["metadata"]["namespace"] == scope]
            got = {r for o in roles for rule in o.get("rules") or [] for r in rule.get("resources") or []}
            if got != want_res:
                fail(f"scoped: the {who}'s Role in {scope} grants {sorted(got)}, want {sorted(want_res)}")
    # The operator writes only its own leader Lease, by name.
    for o in kinds.get("Role", []):
        if o["metadata"]["name"].endswith("-operator") and o["metadata"]["namespace"] == release_ns:
            for rule in o.get("rules") or []:
                if "leases" in (rule.get("resources") or []) and {"update", "get"} & set(rule["verbs"]):
                    if rule.get("resourceNames") != [o["metadata"]["name"]]:
                        fail(f'Role/{o["metadata"]["name"]}: leases {rule["verbs"]} not limited to '
                             f'its leader Lease by resourceNames ({rule.get("resourceNames")})')
    # Namespace users see and write their policies through the standard roles.
    if ((values.get("rbac") or {}).get("aggregateToDefaultRoles", True)):
        agg = {}
        for o in kinds.get("ClusterRole", []):
            for k, v in (o["metadata"].get("labels") or {}).items():
                if k.startswith("rbac.authorization.k8s.io/aggregate-to-") and v == "true":
                    agg[k.rsplit("-", 1)[-1]] = {vb for r in o["rules"] for vb in r["verbs"]}
        if not ({"get", "list", "watch"} <= agg.get("view", set())
                and {"create", "update", "patch", "delete"} <= agg.get("edit", set())):
            fail(f"no ClusterRoles aggregated to view/edit for ProfilingPolicies: {agg}")
    for kind in ("PodMonitor", "ServiceMonitor"):
        for o in kinds.get(kind, []):
            eps = o["spec"].get("podMetricsEndpoints") or o["spec"].get("endpoints")
            jobs = (values.get("metrics") or {}).get("jobs") or {}
            want_job = jobs.get("agent" if kind == "PodMonitor" else "operator",
                                defaults["metrics"]["jobs"]["agent" if kind == "PodMonitor" else "operator"])
            for ep in eps:
                got_job = [r.get("replacement") for r in ep.get("relabelings") or []
                           if r.get("targetLabel") == "job"]
                if got_job != [want_job]:
                    fail(f"{kind}/{o['metadata']['name']}: job relabeled to {got_job}, want "
                         f"[{want_job!r}] (metrics.jobs): the rules and dashboards select on it")
                if ep.get("honorLabels") is not True:
                    fail(f"{kind}/{o['metadata']['name']}: honorLabels is not true: the "
                         "workload's namespace/pod/container labels would become exported_*")
    tls_invariants(kinds)
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
            "kube_pod_container_resource_requests", "kube_daemonset_status_desired_number_scheduled"}
# Series of sonde's targets that sonde does not export itself: Prometheus's own per target.
TARGET_SERIES = {"up"}
# The operator's series; every other sonde_ / container_ series is an agent's.
OPERATOR_PREFIXES = ("sonde_operator_", "sonde_node_report", "sonde_policy_matched_pods",
                     "sonde_policy_instrumented_pods", "sonde_policy_nodejs_processes")
# Self-monitoring series (grepped from the sources) that the agent health dashboard need not
# show, each with the reason. Empty: it shows them all.
HEALTH_NOT_PLACED = {}
# nodejs_eventloop_: OpenTelemetry's Node.js runtime metrics, exported by the agent under
# OpenTelemetry's names.
SONDE_PREFIXES = ("sonde_", "container_nodejs_", "container_go_tls_", "container_cpu_profile_",
                  "nodejs_eventloop_")
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


def selectors(expr):
    """(metric name, its matchers) for every series selector of a PromQL expression."""
    expr_nostr = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: "\0" * len(m.group(0)), expr)
    out = []
    for m in re.finditer(r"(?<![\w:$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{)?", expr_nostr):
        name, brace = m.group(1), m.group(2)
        after = expr_nostr[m.end():m.end() + 1]
        if name in PROMQL_KEYWORDS or (not brace and after == "("):
            continue
        if not (name.startswith(SONDE_PREFIXES) or name in EXTERNAL or name in TARGET_SERIES):
            continue
        matchers = ""
        if brace:
            end = expr_nostr.index("}", m.end())
            matchers = expr[m.end():end]
        out.append((name, matchers))
    return out


def want_job(name, agent, operator):
    if name in EXTERNAL:
        return None
    return operator if name.startswith(OPERATOR_PREFIXES) else agent


def check_selectors(where, expr, agent, operator, cluster):
    for name, matchers in selectors(expr):
        job = want_job(name, agent, operator)
        if job is not None and f'job=~"{job}"' not in matchers:
            fail(f'{where}: {name}{{{matchers}}} does not select job=~"{job}"')
        if cluster and 'cluster=~"$cluster"' not in matchers:
            fail(f'{where}: {name}{{{matchers}}} does not select cluster=~"$cluster"')


def rule_selectors(rules_file, agent, operator):
    """Every selector of every rule carries the chart's job matcher; every alert a runbook."""
    n = 0
    root = os.path.join(HERE, "..", "..")
    for g in yaml.safe_load(open(rules_file))["groups"]:
        for r in g["rules"]:
            name = r.get("record") or r.get("alert")
            check_selectors(f"rule {name}", r["expr"], agent, operator, False)
            n += 1
            if "alert" in r:
                url = r.get("annotations", {}).get("runbook_url", "")
                if not url.endswith(f"/{name}.md"):
                    fail(f"alert {name}: runbook_url {url!r} does not name {name}.md")
                book = os.path.join(root, "docs", "runbooks", f"{name}.md")
                if not os.path.exists(book):
                    fail(f"alert {name}: no runbook docs/runbooks/{name}.md")
                else:
                    text = open(book).read()
                    for part in ("## Meaning", "## Check", "## Fix"):
                        if part not in text:
                            fail(f"docs/runbooks/{name}.md: no {part!r} section")
    print(f"rule-selectors: {n} rules select job=~{agent!r}/{operator!r} only; runbooks present")


def health_series():
    """The agent's and operator's own series names, from the sources."""
    root = os.path.normpath(os.path.join(HERE, "..", ".."))
    names = set()
    for top in ("agent", "operator"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "tests" in os.path.relpath(dirpath, root).split(os.sep):
                continue
            for f in files:
                if not f.endswith(".cpp"):
                    continue
                text = open(os.path.join(dirpath, f)).read()
                names |= set(re.findall(r'"(sonde_(?:agent|operator)_[a-z0-9_]+)"', text))
                # families named from a prefix (the symbol cache's)
                for prefix in re.findall(r'std::string\("(sonde_agent_[a-z_]+_)"\) \+ name \+ "_total"', text):
                    for part in re.findall(r'cache_family\("([a-z]+)"', text):
                        names.add(f"{prefix}{part}_total")
    return {n for n in names if not n.endswith("_")}


def rendered_dashboards(rendered, out):
    os.makedirs(out, exist_ok=True)
    n = 0
    for o in docs(rendered):
        if o["kind"] == "ConfigMap" and "-dashboard-" in o["metadata"]["name"]:
            for key, text in o["data"].items():
                with open(os.path.join(out, key), "w") as f:
                    f.write(text)
                n += 1
    print(f"rendered-dashboards: {n} written to {out}")


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
        if d.get("editable") is not False:
            fail(f"{where}: editable is {d.get('editable')!r}, want false (dashboards.editable)")
        for name in ("agent_job", "operator_job", "cluster") + (
                ("agent_daemonset",) if d.get("uid") == "sonde-agent-health" else ()):
            v = variables.get(name)
            if not v or v["type"] != "constant" or v.get("hide") != 2:
                fail(f"{where}: no hidden constant variable {name}")
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
            check_selectors(where, e, "$agent_job", "$operator_job", True)
            for window in re.findall(r"\[([^\]]*)\]", e):
                if window != "$__rate_interval":
                    fail(f"{where}: range [{window}] in {e!r}: use [$__rate_interval]")
        if d["uid"] == "sonde-agent-health":
            shown = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used} | used
            missing = health_series() - shown - set(HEALTH_NOT_PLACED)
            for m in sorted(missing):
                fail(f"{where}: the health series {m} is on no panel")
        for m in sorted(used):
            if m in recorded:
                fail(f"{where}: uses the recording rule {m}: dashboards must work without the rules")
            elif m in TARGET_SERIES:
                pass
            elif m in EXTERNAL:
                if d["uid"] != "sonde-agent-health":
                    fail(f"{where}: {m} (not sonde's) outside the agent health dashboard")
            elif not m.startswith(SONDE_PREFIXES):
                fail(f"{where}: {m} is neither sonde's nor an allowed cAdvisor/kube-state-metrics metric")
        print(f"dashboards: {fname}: {len(d['panels'])} panels, metrics {sorted(used)}")


# The leaves a generic change cannot exercise, and a value that renders differently for each.
VALUE_CHANGES = {
    "image.digest": "sha256:" + "a" * 64,
    "image.pullPolicy": "Always",
    "image.repository": "registry.example.com/sonde2",
    "global.imageRegistry": "mirror.example.com",
    "global.imagePullSecrets": [{"name": "globalcred"}],
    "imagePullSecrets": [{"name": "regcred"}],
    "operator.logLevel": "debug",
    "agent.logLevel": "debug",
    "agent.waitSource": "epoll-tracepoints",
    "agent.nodejs.metrics": "otel",
    "rbac.agentOwnNodeOnly": True,
    "agent.tls.certManagerIssuer": {"name": "internal-ca", "kind": "ClusterIssuer"},
    "metrics.authorization.subjects": [{"kind": "ServiceAccount", "name": "prometheus",
                                        "namespace": "monitoring"}],
    "operator.watchNamespace": "shop",
    "operator.affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}}},
    "agent.affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}}},
    "operator.tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
    "agent.tolerations": [],
    "operator.extraEnv": [{"name": "TZ", "value": "UTC"}],
    "agent.extraEnv": [{"name": "TZ", "value": "UTC"}],
    "operator.topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                            "whenUnsatisfiable": "ScheduleAnyway"}],
    "operator.updateStrategy": {"type": "Recreate"},
    "agent.updateStrategy.type": "OnDelete",
    "agent.updateStrategy.rollingUpdate.maxUnavailable": "20%",
    "agent.pyroscope.url": "http://pyroscope-2.monitoring:4040",
    "prometheusRule.runbookBaseURL": "https://runbooks.example.com/sonde",
    "metrics.jobs.agent": "other-agent-job",
    "metrics.jobs.operator": "other-operator-job",
    "dashboards.namespace": "monitoring",
}
# Values that act only in one release namespace: checked by rendering there (a refusal turning
# into a rendering is a change).
VALUE_NAMESPACE = {"rbac.allowKubeSystem": "kube-system"}
# Changes that need another value to render at all.
VALUE_NEEDS = {
    "operator.serviceAccount.create": {"operator": {"serviceAccount": {"name": "operator-sa"}}},
    "agent.serviceAccount.create": {"agent": {"serviceAccount": {"name": "agent-sa"}}},
    "metrics.authorization.subjects": {"metrics": {"authorization": {"enabled": True}}},
    "agent.tls.serverName": {"agent": {"tls": {"secretName": "agent-tls"}}},
}
# Switched on underneath every change, so that the values they enable are rendered.
VALUES_BASE = {
    "prometheusRule": {"enabled": True},
    "metrics": {"podMonitor": {"enabled": True}, "serviceMonitor": {"enabled": True}},
    "agent": {"pyroscope": {"url": "http://pyroscope.monitoring:4040"},
              "networkPolicy": {"enabled": True}},
}


def leaves(tree, prefix=""):
    """Dotted paths of values.yaml's leaves (an empty map or list is a leaf)."""
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            yield from leaves(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], tree


def nested(path, value):
    out = {}
    cur = out
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


def merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def candidates(path, value):
    if path in VALUE_CHANGES:
        return [VALUE_CHANGES[path]]
    key = path.rsplit(".", 1)[-1]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, float):
        return [round(value / 2, 3)]
    if isinstance(value, dict):
        return [{"example.com/owner": "platform"}]
    if isinstance(value, list):
        return [[{"name": "x"}]]
    if isinstance(value, str):
        if re.fullmatch(r"[0-9]+(ms|s|m|h)", value):
            return [value[:-1] + "7" + value[-1] if value[-1] != "s" or value.endswith("ms")
                    else "17s", "7m"]
        if re.fullmatch(r"[0-9]+m", value):
            return ["37m"]
        if re.fullmatch(r"[0-9]+(Mi|Gi)", value):
            return ["99Mi"]
        if key == "severity":
            return ["page"]
        return [value + "2" if value else "custom-" + key.lower()]
    return []


def values_doc(scratch):
    import subprocess
    defaults = yaml.safe_load(open(os.path.join(CHART, "values.yaml")))
    readme_path = os.path.join(CHART, "README.md")
    readme = open(readme_path).read() if os.path.exists(readme_path) else ""

    def render(values, namespace="sonde-system"):
        f = os.path.join(scratch, "v.yaml")
        with open(f, "w") as out:
            yaml.safe_dump(values, out)
        r = subprocess.run(["helm", "template", "sonde", CHART, "-n", namespace, "-f", f],
                           capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    code, base, err = render(VALUES_BASE)
    if code:
        fail(f"values-doc: the base values do not render: {err}")
        return
    n = 0
    effective = dict(leaves(merge(defaults, VALUES_BASE)))
    for path, value in leaves(defaults):
        n += 1
        value = effective.get(path, value)
        if f"`{path}`" not in readme:
            fail(f"values-doc: {path} is not documented in charts/sonde/README.md")
        verdicts = []
        if path in VALUE_NAMESPACE:
            ns = VALUE_NAMESPACE[path]
            base_code, base_out, _ = render(VALUES_BASE, ns)
            for cand in candidates(path, value):
                code, out, _ = render(merge(VALUES_BASE, nested(path, cand)), ns)
                if (code, out) != (base_code, base_out):
                    verdicts = None
                    break
                verdicts.append(f"{cand!r} renders the same in {ns}")
            if verdicts is not None:
                fail(f"values-doc: setting {path} changes nothing: {'; '.join(verdicts)}")
            continue
        for cand in candidates(path, value):
            code, out, err = render(merge(merge(VALUES_BASE, VALUE_NEEDS.get(path, {})),
                                          nested(path, cand)))
            if code:
                verdicts.append(f"{cand!r} refused: {err.strip().splitlines()[-1] if err.strip() else code}")
            elif out == base:
                verdicts.append(f"{cand!r} renders the same")
            else:
                verdicts = None
                break
        if verdicts is not None:
            fail(f"values-doc: setting {path} changes nothing: {'; '.join(verdicts) or 'no candidate'}")
    print(f"values-doc: {n} values, each in the chart README and changing the rendered chart")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"invariants": invariants, "rules": rules, "dashboards": dashboards,
     "rendered-dashboards": rendered_dashboards, "rule-selectors": rule_selectors,
     "values-doc": values_doc}[cmd](*args)
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
