#!/usr/bin/env python3
"""Checks crds/tests/policy_validation_table.json against the ProfilingPolicy and
ClusterProfilingPolicy CRDs' OpenAPI schemas and CEL rules (as the fake API server enforces
them, common/kube/testing/crd_schema.py), and that the two kinds' schemas differ only by
spec.namespaceSelector (a label selector like the pod selectors), and that every example in
crds/examples/ is valid. The C++ validator checks the same table (common/crd/tests/profiling_policy_test.cpp)."""

import copy
import glob
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "common", "kube", "testing"))
import crd_schema  # noqa: E402


PLURALS = {"ProfilingPolicy": "profilingpolicies",
           "ClusterProfilingPolicy": "clusterprofilingpolicies"}


def without_descriptions(schema):
    if isinstance(schema, dict):
        return {k: without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [without_descriptions(v) for v in schema]
    return schema


def schema_drift(crds):
    """Why the cluster kind's schema is not the namespaced one's plus namespaceSelector, or None."""
    namespaced = without_descriptions(crds["profilingpolicies"]["schema"])
    cluster = copy.deepcopy(without_descriptions(crds["clusterprofilingpolicies"]["schema"]))
    spec = cluster["properties"]["spec"]
    selector = spec["properties"].pop("namespaceSelector", None)
    pod_selector = namespaced["properties"]["spec"]["properties"]["targets"]["items"][
        "properties"]["selector"]
    if selector != pod_selector:
        return "spec.namespaceSelector is not the same label selector schema as the pod selectors"
    if "namespaceSelector" not in spec.get("required", []):
        return "spec.namespaceSelector is not required"
    spec["required"] = [r for r in spec["required"] if r != "namespaceSelector"]
    if cluster != namespaced:
        return "the ClusterProfilingPolicy schema differs from ProfilingPolicy's beyond namespaceSelector"
    return None


def main():
    crds = crd_schema.load_crds(os.path.join(HERE, ".."))
    drift = schema_drift(crds)
    if drift:
        print("FAIL: " + drift)
        return 1
    with open(os.path.join(HERE, "policy_validation_table.json")) as f:
        cases = json.load(f)["cases"]
    failures = 0
    for case in cases:
        kind = case.get("kind", "ProfilingPolicy")
        schema = crds[PLURALS[kind]]["schema"]
        metadata = {"name": "p"} if kind == "ClusterProfilingPolicy" else {"name": "p", "namespace": "shop"}
        obj = {"apiVersion": "sonde.dev/v1alpha1", "kind": kind, "metadata": metadata,
               "spec": case["spec"]}
        errors = crd_schema.validate(schema, crd_schema.prune_and_default(schema, obj))
        if (not errors) != case["valid"]:
            failures += 1
            print("FAIL %s (%s): expected %s, schema says %s" % (
                case["name"], kind, "valid" if case["valid"] else "invalid",
                "; ".join(errors) or "valid"))
    for path in sorted(glob.glob(os.path.join(HERE, "..", "examples", "*.yaml"))):
        with open(path) as f:
            for obj in yaml.safe_load_all(f):
                schema = crds[PLURALS[obj["kind"]]]["schema"]
                errors = crd_schema.validate(schema, crd_schema.prune_and_default(schema, obj))
                if errors:
                    failures += 1
                    print("FAIL example %s: %s" % (os.path.basename(path), "; ".join(errors)))
    print("%d cases and the examples, %d disagree with the CRD schemas; the two kinds differ "
          "only by namespaceSelector" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
