#!/usr/bin/env python3
"""Every metric family the product's code declares is named in the metric tables of the docs
(README.md and docs/*.md).

A family is declared where it is built, once: `counter_family("name", ...)`,
`gauge_family(...)`, `histogram_family(...)`, the operator's `gauges(...)`,
`prometheus::MetricFamily x{"name", ...}` and prometheus-cpp's `.Name("name")`, in the
non-test sources of agent/, operator/ and common/.
This reads those declarations, so a family exported only in some configurations (another wait
hook, the stall recorder, cluster mode) is checked too; e2e/agent_health_test.sh checks what a
running agent exports. A document names a family as `name`, `name{...}` or `name,`.
Exits 1 naming every family missing from them.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DECLARATION = re.compile(
    r'(?:(?:counter|gauge|histogram)_family\(\s*|gauges\(\s*|MetricFamily\s+\w+\s*\{\s*|\.Name\(\s*)'
    r'"([a-z_][a-z0-9_]*)"')


def declared():
    names = {}
    for folder in ("agent", "operator", "common"):
        for path in sorted((ROOT / folder).rglob("*.cpp")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or "fuzz" in parts or "testing" in parts:
                continue
            for name in DECLARATION.findall(path.read_text()):
                names.setdefault(name, str(path.relative_to(ROOT)))
    return names


def main():
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    names = declared()
    if len(names) < 40:
        print(f"check-metrics-documented: only {len(names)} families found; the patterns are stale")
        return 1
    missing = [f"{n} ({where})" for n, where in sorted(names.items())
               if not any(f"`{n}{end}" in readme for end in ("`", "{", ","))]
    if missing:
        print("metric families missing from the docs' tables (README.md, docs/):\n  " + "\n  ".join(missing))
        return 1
    print(f"check-metrics-documented: {len(names)} families, each named in README.md or docs/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
