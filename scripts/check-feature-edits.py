#!/usr/bin/env python3
"""Each feature owns itself: a feature is a folder agent/<folder>/ holding its instrumentation
fragment (<key>.crd.yaml), with its kernel code in bpf/<folder>/. Outside those two folders (tests,
fuzzers and docs aside), only the composition root, agent/assembly/agent_parts.cpp, may name it:
include one of its headers or name its kind (Instrumentation::k<Kind>). What the older features
still need elsewhere is listed below as debt, file by file, with the reason; a new feature has no
entry, so any other file naming it fails this check (ctest `feature_folders`), and so does an
entry that is no longer needed. Stricter for the shared code, agent/runtime/ and common/: none of
it may name any feature, by include, kind, key string or a type a feature folder declares, and
no debt is allowed there. docs/development.md ("Adding an instrumentation") says what a new
feature edits by hand.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ALLOWED = {"agent/assembly/agent_parts.cpp"}  # the one registration line (a load block)

DEBT = {
    "nodejs": {
        "agent/cluster/node_report.cpp": "nodejsProcesses in the node report",
        "agent/stacks/sampler.cpp": "the loops map's layout, to mark samples inside a loop turn",
    },
}


def enum_of(key):
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", key)
    return "k" + "".join(w.lower().capitalize() for w in words)


def code_of(text):
    """`text` without its comments and with its string literals kept (a key is a string)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def declared_types(paths, nested=False):
    """The classes, structs, enums and aliases declared in `paths`: at namespace scope (column
    0), or with `nested` also inside classes."""
    names = set()
    indent = r"[ \t]*" if nested else ""
    for path in paths:
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r"^%s(?:class|struct|enum class|enum|using)\s+(\w+)" % indent,
                                    f.read(), flags=re.M))
    return names


def shared_code_names_no_feature(features, sources):
    """agent/runtime/ and common/ hold no feature: none of their sources (tests aside) includes a
    feature's header or names its kind, its key as a string, or a type a feature folder
    declares (unless the shared code declares one of that name too). No debt is allowed here."""
    shared = [p for p in sources if p.startswith(("agent/runtime/", "common/"))]
    generic = declared_types((p for p in shared if p.endswith(".h")), nested=True)
    failures = []
    for folder, enum in features.items():
        key = os.path.basename(glob.glob("agent/%s/*.crd.yaml" % folder)[0])[:-len(".crd.yaml")]
        types = declared_types(glob.glob("agent/%s/*.h" % folder)) - generic
        pattern = r'#include "(?:agent|bpf)/%s/|\bInstrumentation::%s\b|"%s"' % (
            re.escape(folder), enum, re.escape(key))
        if types:
            pattern += r"|\b(?:%s)\b" % "|".join(sorted(types))
        naming = re.compile(pattern)
        for path in shared:
            with open(path, encoding="utf-8") as f:
                m = naming.search(code_of(f.read()))
            if m:
                failures.append("%s names the feature %s (agent/%s/: %s): agent/runtime/ and "
                                "common/ hold no feature's includes, kinds, keys or types"
                                % (path, enum, folder, m.group(0)))
    print("agent/runtime/ and common/: %d source(s) checked for any feature's includes, kinds, "
          "keys and types" % len(shared))
    return failures


def main():
    os.chdir(ROOT)
    features = {}
    for fragment in sorted(glob.glob("agent/*/*.crd.yaml")):
        folder = os.path.basename(os.path.dirname(fragment))
        features[folder] = enum_of(os.path.basename(fragment)[:-len(".crd.yaml")])
    files = subprocess.run(["git", "ls-files", "agent", "bpf", "common", "operator"],
                           capture_output=True, text=True, check=True).stdout.split()
    sources = [f for f in files if f.endswith((".c", ".cpp", ".h"))
               and "/tests/" not in f and "/fuzz/" not in f]
    failures = []
    for folder, enum in features.items():
        naming = re.compile(r'#include "(agent|bpf)/%s/|\bInstrumentation::%s\b'
                            % (re.escape(folder), enum))
        found = set()
        for path in sources:
            if path.startswith(("agent/%s/" % folder, "bpf/%s/" % folder)) or path in ALLOWED:
                continue
            with open(path, encoding="utf-8") as f:
                if naming.search(f.read()):
                    found.add(path)
        debt = DEBT.get(folder, {})
        for path in sorted(found - set(debt)):
            failures.append("%s names the feature %s (agent/%s/): only its folders and %s may; "
                            "give the feature what it needs through its own folder"
                            % (path, enum, folder, ", ".join(sorted(ALLOWED))))
        for path in sorted(set(debt) - found):
            failures.append("%s no longer names %s: remove its entry from DEBT in %s"
                            % (path, folder, os.path.relpath(__file__, ROOT)))
        print("feature %s: %d file(s) outside its folders name it (%s)"
              % (folder, len(found), ", ".join(sorted(found)) or "none"))
    print("a new feature may be named outside its folders by: %s" % ", ".join(sorted(ALLOWED)))
    failures += shared_code_names_no_feature(features, sources)
    stale = set(DEBT) - set(features)
    failures += ["DEBT lists %s, which is not a feature folder" % f for f in sorted(stale)]
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
