#!/usr/bin/env python3
"""Every relative link of the project's documents resolves: README.md, docs/ (runbooks too),
crds/README.md, charts/sonde/README.md and bench/RESULTS.md. A link names a file or folder that
exists, and a `#fragment` names a heading of its Markdown file as GitHub makes its anchor
(lowercased, punctuation but `-` and `_` dropped, spaces to `-`). Links inside code blocks and
to other sites are not followed. Exits 1 naming every broken link.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def documents():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))
    for extra in ("crds/README.md", "charts/sonde/README.md", "bench/RESULTS.md"):
        if (ROOT / extra).exists():
            yield ROOT / extra


def prose_lines(path):
    fenced = False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def anchors(path):
    seen = {}
    out = set()
    for line in prose_lines(path):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main():
    broken = []
    checked = 0
    for doc in documents():
        for line in prose_lines(doc):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue  # http:, https:, mailto:
                checked += 1
                path, _, fragment = target.partition("#")
                dest = (doc.parent / path).resolve() if path else doc
                where = f"{doc.relative_to(ROOT)}: ({target})"
                if not dest.exists():
                    broken.append(f"{where}: no {path}")
                elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                    broken.append(f"{where}: no heading #{fragment} in {dest.relative_to(ROOT)}")
    if broken:
        print("broken links:\n  " + "\n  ".join(broken))
        return 1
    print(f"check-docs-links: {checked} links, each resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
