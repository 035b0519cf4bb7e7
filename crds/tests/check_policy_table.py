#!/usr/bin/env python3
"""Checks crds/tests/policy_validation_table.json against the ProfilingPolicy CRD's OpenAPI
schema and CEL rules (as the fake API server enforces them, common/kube/testing/crd_schema.py).
The C++ validator checks the same table (common/crd/tests/profiling_policy_test.cpp)."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "common", "kube", "testing"))
import crd_schema  # noqa: E402


def main():
    schema = crd_schema.load_crds(os.path.join(HERE, ".."))["profilingpolicies"]["schema"]
    with open(os.path.join(HERE, "policy_validation_table.json")) as f:
        cases = json.load(f)["cases"]
    failures = 0
    for case in cases:
        obj = {"apiVersion": "sonde.dev/v1alpha1", "kind": "ProfilingPolicy",
               "metadata": {"name": "p", "namespace": "shop"}, "spec": case["spec"]}
        errors = crd_schema.validate(schema, crd_schema.prune_and_default(schema, obj))
        if (not errors) != case["valid"]:
            failures += 1
            print("FAIL %s: expected %s, schema says %s" % (
                case["name"], "valid" if case["valid"] else "invalid",
                "; ".join(errors) or "valid"))
    print("%d cases, %d disagree with the CRD schema" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
