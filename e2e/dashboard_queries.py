#!/usr/bin/env python3
"""Evaluates every query of the chart's dashboards and rules through a running Prometheus.

  dashboard_queries.py PROM_URL DASHBOARD_DIR RULES.yaml

Dashboards (as the chart renders them): each constant is its value; each variable's
label_values() query is resolved through Prometheus' label API (in
order, so $namespace narrows $pod; the first value is taken, as Grafana does on load), then
every panel target's expression, with $__rate_interval = 30s, must return series. Targets on
metrics sonde does not export (cAdvisor, kube-state-metrics: there is no kubelet here) are
listed as exempt, with that reason. Rules: every recording rule's series exists; every alert
rule is loaded and healthy, and its expression with its thresholds lowered to ">= 0" returns
series (the signal exists). Prints one line per query; exits 1 if any returns nothing.
"""
import json
import os
import re
import sys
import urllib.parse
import urllib.request

import yaml

EXEMPT = {
    "container_cpu_usage_seconds_total": "cAdvisor (the kubelet's), not run here",
    "kube_pod_container_resource_limits": "kube-state-metrics, not run here",
    "kube_pod_container_resource_requests": "kube-state-metrics, not run here",
    "kube_daemonset_status_desired_number_scheduled": "kube-state-metrics, not run here",
    "sonde_cpu_profile_pushes_total": "a Pyroscope endpoint (agent.pyroscope.url), not run here",
    # Counted while a profile is collected (a /debug/pprof/profile request or a Pyroscope push);
    # agent/cpu/tests/cpu_profiler_bpf_test.cpp checks the series after one.
    "container_cpu_profile_js_frames_total": "a profile being collected (pprof request or Pyroscope push), none here",
    "sonde_agent_nodejs_wait_hook_libraries": "--wait-source libc-uprobes only, not the default",
    "sonde_agent_nodejs_wait_hook_failures_total": "--wait-source libc-uprobes only, not the default",
}
RATE_INTERVAL = "30s"


def get(prom, path, **params):
    url = f"{prom}{path}?{urllib.parse.urlencode(params, doseq=True)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def query(prom, expr):
    return get(prom, "/api/v1/query", query=expr)["result"]


def substitute(expr, values):
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name, value in values.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return expr


def main():
    prom, folder, rules_file = sys.argv[1:4]
    failures = 0
    for fname in sorted(os.listdir(folder)):
        d = json.load(open(os.path.join(folder, fname)))
        print(f"=== dashboard {d['title']} ({fname})")
        values = {}
        for v in d["templating"]["list"]:
            if v["type"] == "constant":  # the chart's (metrics.jobs, a single cluster's "")
                values[v["name"]] = v["query"]
                print(f"  constant ${v['name']} = {v['query']!r}")
                continue
            if v["type"] != "query":
                continue
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", v["definition"].strip())
            selector, label = substitute(m.group(1), values), m.group(2)
            found = get(prom, f"/api/v1/label/{label}/values", **{"match[]": selector})
            if not found:
                print(f"  FAIL variable ${v['name']}: {v['definition']} has no values")
                failures += 1
                values[v["name"]] = ".*"
                continue
            values[v["name"]] = found[0]
            print(f"  variable ${v['name']} = {found[0]!r} (of {found})")
        for p in d["panels"]:
            if p["type"] == "row":
                continue
            for t in p["targets"]:
                expr = substitute(t["expr"], values)
                exempt = [m for m in EXEMPT if m in expr]
                if exempt:
                    print(f"  EXEMPT [{p['title']}] {t['refId']}: {expr}\n"
                          f"         needs {', '.join(EXEMPT[m] for m in exempt)}")
                    continue
                n = len(query(prom, expr))
                status = "ok  " if n else "FAIL"
                failures += 0 if n else 1
                print(f"  {status} [{p['title']}] {t['refId']}: {n} series: {expr}")
    groups = yaml.safe_load(open(rules_file))["groups"]
    loaded = {r["name"]: r for g in get(prom, "/api/v1/rules")["groups"] for r in g["rules"]}
    print("=== rules")
    for g in groups:
        for r in g["rules"]:
            name = r.get("record") or r.get("alert")
            state = loaded.get(name)
            if not state or state.get("health") != "ok":
                print(f"  FAIL {name}: not loaded or unhealthy: {state}")
                failures += 1
                continue
            if "record" in r:
                n = len(query(prom, name))
                expr = name
            else:
                expr = re.sub(r"[<>]=?\s*[0-9.]+(\s*\*\s*[0-9.]+)?", ">= 0", r["expr"])
                exempt = [m for m in EXEMPT if m in expr]
                if exempt:
                    print(f"  EXEMPT {name}: needs {', '.join(EXEMPT[m] for m in exempt)}")
                    continue
                n = len(query(prom, expr))
            status = "ok  " if n else "FAIL"
            failures += 0 if n else 1
            print(f"  {status} {name}: {n} series: {' '.join(expr.split())}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
