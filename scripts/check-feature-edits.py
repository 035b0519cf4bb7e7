#!/usr/bin/env python3
"""Each feature owns itself: a feature is a folder agent/<folder>/ holding its instrumentation
fragment (<key>.crd.yaml), with its kernel code in bpf/<folder>/. Outside those two folders (tests,
fuzzers and docs aside), only the composition root, agent/assembly/agent_parts.cpp, may name it:
include one of its headers or name its kind (Instrumentation::k<Kind>). What the older features
still need elsewhere is listed below as debt, file by file, with the reason; a new feature has no
entry, so any other file naming it fails this check (ctest `feature_folders`), and so does an
entry that is no longer needed. docs/development.md ("Adding an instrumentation") says what a new
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
        "agent/assembly/agent_parts.h": "the stall sink cluster mode hands the feature",
        "agent/cluster/stall_events.h": "stalls posted as pod Events",
        "agent/cluster/node_report.cpp": "nodejsProcesses in the node report",
        "agent/stacks/sampler.cpp": "the loops map's layout, to mark samples inside a loop turn",
    },
    "gotls": {
        "agent/doctor/doctor_command.cpp": "the Go TLS plan of a binary",
    },
}


def enum_of(key):
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", key)
    return "k" + "".join(w.lower().capitalize() for w in words)


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
    stale = set(DEBT) - set(features)
    failures += ["DEBT lists %s, which is not a feature folder" % f for f in sorted(stale)]
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
