"""What a real API server does with a custom resource's OpenAPI v3 schema, for sonde's tests:
prune unknown fields, apply defaults, validate (python3-jsonschema), and evaluate the CEL rules
(x-kubernetes-validations) that sonde's CRDs use. Test-only.

CEL is not interpreted: each rule text in crds/ has a hand-written Python equivalent in
CEL_RULES, and a rule without one fails loudly (UnknownRule) so a new rule cannot go unchecked
by accident. The rule that requires an instrumentation lists every kind; it and its equivalent
are built from the same list (generated_rules.py, written by scripts/gen-crds.py). Formats (date-time, int64) are not checked, nor are x-kubernetes-list-type
uniqueness constraints.

Used by fake_apiserver.py (on create and update) and crds/tests/check_policy_table.py.
"""

import copy
import glob
import os

import jsonschema
import yaml

import generated_rules  # beside this file, written by scripts/gen-crds.py


class UnknownRule(Exception):
    pass


def _has(obj, key):
    return isinstance(obj, dict) and key in obj and obj[key] is not None


def _in_or_exists(s):
    if s.get("operator") in ("Exists", "DoesNotExist"):
        return not s.get("values")
    return bool(s.get("values"))


# rule text -> (self, oldSelf or None) -> bool. A transition rule (one that reads oldSelf) is
# only evaluated on update, as the real server does.
CEL_RULES = {
    "size(self.targets) > 0": lambda s, o: len(s.get("targets") or []) > 0,
    # Generated with the CRDs from agent/*/*.crd.yaml (scripts/gen-crds.py), as is the
    # rule's text: a new instrumentation kind reaches both at once.
    generated_rules.AT_LEAST_ONE_INSTRUMENTATION_RULE:
        lambda s, o: any(_has(s.get("instrumentations"), k)
                         for k in generated_rules.INSTRUMENTATIONS),
    "has(self.selector) || has(self.workload)":
        lambda s, o: _has(s, "selector") or _has(s, "workload"),
    "self.operator in ['Exists', 'DoesNotExist'] ? !has(self.values) || size(self.values) == 0 "
    ": has(self.values) && size(self.values) > 0": lambda s, o: _in_or_exists(s),
    "self.frequencyHz >= 1 && self.frequencyHz <= 999":
        lambda s, o: isinstance(s.get("frequencyHz"), int) and 1 <= s["frequencyHz"] <= 999,
    "self.nodeName == oldSelf.nodeName": lambda s, o: o is None or s.get("nodeName") == o.get("nodeName"),
}


def load_crds(folder):
    """{plural: {"group", "version", "kind", "scope", "status", "schema"}} for every CRD YAML in
    `folder` (status: whether it has a status subresource)."""
    crds = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml"))):
        with open(path) as f:
            doc = yaml.safe_load(f)
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            crds[spec["names"]["plural"]] = {
                "group": spec["group"], "version": version["name"],
                "kind": spec["names"]["kind"], "scope": spec.get("scope", "Namespaced"),
                "status": "status" in (version.get("subresources") or {}),
                "schema": version["schema"]["openAPIV3Schema"]}
    return crds


def _preserves_unknown(schema):
    return schema.get("x-kubernetes-preserve-unknown-fields") or \
        isinstance(schema.get("additionalProperties"), (dict, bool))


def prune_and_default(schema, obj, root=True):
    """The object as the server stores it: unknown fields dropped, defaults filled in."""
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        out = {}
        for key, value in obj.items():
            if root and key == "metadata":
                out[key] = value  # the server handles ObjectMeta itself
            elif key in props:
                out[key] = prune_and_default(props[key], value, False)
            elif _preserves_unknown(schema):
                extra = schema.get("additionalProperties")
                out[key] = prune_and_default(extra, value, False) if isinstance(extra, dict) else value
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = prune_and_default(sub, copy.deepcopy(sub["default"]), False)
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune_and_default(schema["items"], v, False) for v in obj]
    return obj


def _cel_errors(schema, obj, old, path):
    errors = []
    for rule in schema.get("x-kubernetes-validations") or []:
        check = CEL_RULES.get(rule["rule"])
        if check is None:
            raise UnknownRule("no Python equivalent for CEL rule %r (common/kube/testing/"
                              "crd_schema.py)" % rule["rule"])
        if "oldSelf" in rule["rule"] and old is None:
            continue
        if not check(obj, old):
            errors.append("%s: Invalid value: %s" % (path or "<root>", rule.get("message", rule["rule"])))
    if isinstance(obj, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in obj:
                old_sub = old.get(key) if isinstance(old, dict) else None
                errors += _cel_errors(sub, obj[key], old_sub, path + "." + key if path else key)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            errors += _cel_errors(schema["items"], item, None, "%s[%d]" % (path, i))
    return errors


def validate(schema, obj, old=None):
    """Error strings ("spec.targets: ...") for `obj` (already pruned and defaulted); [] if valid."""
    errors = []
    for e in sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.path)):
        path = "".join("[%d]" % p if isinstance(p, int) else "." + p for p in e.path).lstrip(".")
        errors.append("%s: Invalid value: %s" % (path or "<root>", e.message))
    if not errors:
        errors = _cel_errors(schema, obj, old, "")
    return errors
