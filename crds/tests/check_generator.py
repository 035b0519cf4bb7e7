#!/usr/bin/env python3
"""Checks scripts/gen-crds.py on a copy of the tree (ctest crd_generator): that `--check` fails,
naming the stale file, when a source changed without `make crds`, when a generated CRD was
edited by hand and when the chart holds a CRD nobody generates; and that one new fragment in
the kind's own folder (agent/<folder>/<key>.crd.yaml) is all a new instrumentation kind needs
for the CRDs, as the fake API server enforces them, to admit a policy asking for it alone and to
name it when none is asked for, and for the agent's enum and registry (--cpp).
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Every kind's fragment, as the generator finds them: a new kind needs no edit here.
FRAGMENTS = sorted(os.path.relpath(p, ROOT)
                   for p in glob.glob(os.path.join(ROOT, "agent", "*", "*.crd.yaml")))
# The kinds' own parsers: the generator declares those it finds.
PARSERS = sorted(os.path.relpath(p, ROOT)
                 for p in glob.glob(os.path.join(ROOT, "agent", "*", "*_params.cpp")))
COPIED = ["scripts/gen-crds.py", "crds", "charts/sonde/crds", "common/kube/testing/crd_schema.py",
          "common/kube/testing/generated_rules.py"] + FRAGMENTS + PARSERS


def kinds_in_order():
    """[(order, key)] of the fragments, in their order."""
    import yaml
    out = []
    for rel in FRAGMENTS:
        with open(os.path.join(ROOT, rel)) as f:
            out.append((yaml.safe_load(f)["order"], os.path.basename(rel)[:-len(".crd.yaml")]))
    return sorted(out)

# Run in the copy: the named kind's verdict on a policy asking only for `asks` (None: for nothing).
VERDICT = r"""
import json, sys
sys.path.insert(0, "common/kube/testing")
import crd_schema
crds = crd_schema.load_crds("crds")
out = {}
for plural, extra in (("profilingpolicies", {}), ("clusterprofilingpolicies", {"namespaceSelector": {}})):
    schema = crds[plural]["schema"]
    for asks in sys.argv[1:] + [None]:
        spec = dict(extra, targets=[{"selector": {}}], instrumentations={asks: {}} if asks else {})
        obj = {"apiVersion": "sonde.dev/v1alpha1", "kind": crds[plural]["kind"],
               "metadata": {"name": "p"}, "spec": spec}
        out["%s/%s" % (plural, asks)] = crd_schema.validate(schema, crd_schema.prune_and_default(schema, obj))
print(json.dumps(out))
"""

failures = []


def expect(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def run(tree, *args):
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True)


def gen(tree, *args):
    return run(tree, "scripts/gen-crds.py", *args)


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def main():
    with tempfile.TemporaryDirectory(prefix="sonde-gen-crds-") as tree:
        for rel in COPIED:
            src, dst = os.path.join(ROOT, rel), os.path.join(tree, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, dst)
        expect(gen(tree, "--check").returncode == 0, "the checked-in files are current")

        cpu = os.path.join(tree, "agent/cpu/cpu.crd.yaml")
        edit(cpu, "maximum: 999", "maximum: 998")
        r = gen(tree, "--check")
        expect(r.returncode == 1 and "FAIL: crds/profilingpolicies.sonde.dev.yaml is stale: run make crds"
               in r.stderr and "+                          maximum: 998" in r.stderr and
               "charts/sonde/crds/clusterprofilingpolicies.sonde.dev.yaml is stale" in r.stderr,
               "a fragment edited without make crds: --check fails naming the CRDs and the line")
        expect(gen(tree).returncode == 0 and gen(tree, "--check").returncode == 0,
               "make crds makes them current again")
        edit(cpu, "maximum: 998", "maximum: 999")
        gen(tree)

        node_report = os.path.join(tree, "crds/profilingnodereports.sonde.dev.yaml")
        edit(node_report, "maxItems: 5000", "maxItems: 6000")
        r = gen(tree, "--check")
        expect(r.returncode == 1 and "crds/profilingnodereports.sonde.dev.yaml is stale" in r.stderr,
               "a generated CRD edited by hand: --check fails")
        gen(tree)
        shutil.copyfile(node_report, os.path.join(tree, "charts/sonde/crds/old.sonde.dev.yaml"))
        r = gen(tree, "--check")
        expect(r.returncode == 1 and "charts/sonde/crds/old.sonde.dev.yaml is not generated" in r.stderr,
               "a CRD in the chart that crds/src/ does not list: --check fails")
        os.remove(os.path.join(tree, "charts/sonde/crds/old.sonde.dev.yaml"))

        kinds = kinds_in_order()
        last_order, last_key = kinds[-1]
        python = os.path.join(tree, "agent/python/pythonAsyncio.crd.yaml")
        os.makedirs(os.path.dirname(python))
        with open(python, "w") as f:
            f.write("order: %d\nschema:\n  description: Python asyncio loop time.\n"
                    "  type: object\n" % last_order)
        r = gen(tree)
        expect(r.returncode == 1 and "must hold `order` (an integer), `name`" in r.stderr,
               "a fragment without its name and config default: refused")
        edit(python, "schema:", "name: python\nconfigDefault: false\nschema:")
        r = gen(tree)
        expect(r.returncode == 1 and "%s and pythonAsyncio have the same order %d"
               % (last_key, last_order) in r.stderr, "two fragments in one place: refused")
        edit(python, "order: %d" % last_order, "order: %d" % (last_order + 1))
        r = gen(tree, "--check")
        expect(r.returncode == 1 and "generated_rules.py is stale" in r.stderr,
               "a new fragment without make crds: --check fails")
        expect(gen(tree).returncode == 0, "make crds with a new fragment")
        r = run(tree, "-c", VERDICT, "pythonAsyncio", "cpu")
        verdicts = json.loads(r.stdout) if r.returncode == 0 else {}
        for plural in ("profilingpolicies", "clusterprofilingpolicies"):
            expect(verdicts.get(plural + "/pythonAsyncio") == [] and verdicts.get(plural + "/cpu") == [],
                   "%s: a policy asking only for the new kind (or cpu) is admitted" % plural)
            none = verdicts.get(plural + "/None") or []
            listed = ", ".join([k for _, k in kinds] + ["pythonAsyncio"])
            expect(any("at least one instrumentation (%s)" % listed in e for e in none),
                   "%s: a policy asking for nothing is refused, naming the new kind too: %s"
                   % (plural, none or r.stderr.strip()))
        cpp = os.path.join(tree, "build-generated")
        expect(gen(tree, "--cpp", cpp).returncode == 0, "the C++ kinds generate")
        with open(os.path.join(cpp, "common/instrumentation_kinds.h")) as f:
            kinds_h = f.read()
        with open(os.path.join(cpp, "common/instrumentation_registry.cpp")) as f:
            registry = f.read()
        expect("  kPythonAsyncio,  // agent/python/pythonAsyncio.crd.yaml" in kinds_h and
               "inline constexpr size_t kInstrumentationCount = %d;" % (len(kinds) + 1) in kinds_h,
               "the enum has the new kind")
        expect('{Instrumentation::kPythonAsyncio, "pythonAsyncio", "python", false, parse_switch, '
               'merge_first, 0, nullptr}' in registry, "the registry has it, with no parameters to parse")
        expect('inline constexpr IntegerField kFrequencyHz{"frequencyHz", 1, 999, 19};' in kinds_h
               and "kinds::parse_cpu, kinds::merge_cpu" in registry,
               "a kind with parameters: its bounds from its schema, its own parser")
        expect("kinds::merge_go_tls, LimitKey::kMaxOverheadPercent | LimitKey::kMaxUprobesPerNode, "
               "kinds::limit_go_tls}" in registry and "merge_first, 0, nullptr}" in registry,
               "a kind that takes limits: which ones, and its own limit function")
        edit(python, "configDefault: false\n", "configDefault: false\nlimits: [maxTargets]\n")
        r = gen(tree, "--cpp", cpp)
        expect(r.returncode == 1 and "optionally `limits` (a list of maxOverheadPercent, "
               "maxUprobesPerNode)" in r.stderr, "a limit no kind can take: refused")
        edit(python, "limits: [maxTargets]", "limits: [maxOverheadPercent]")
        r = gen(tree, "--cpp", cpp)
        expect(r.returncode == 1 and "a kind that takes limits puts them in its parameters: it "
               "needs a *_params.cpp (kinds::limit_python_asyncio)" in r.stderr,
               "a kind taking limits without a parser of its own: refused")
        edit(python, "limits: [maxOverheadPercent]\n", "")
        edit(python, "  type: object\n", "  type: object\n  properties:\n    depth:\n"
             "      type: integer\n      minimum: 1\n")
        r = gen(tree, "--cpp", cpp)
        expect(r.returncode == 1 and "depth: an integer parameter needs `minimum` and `maximum`"
               in r.stderr, "an integer parameter without both bounds: refused")
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
