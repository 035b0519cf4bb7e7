#!/usr/bin/env python3
"""`make tidy`: clang-tidy on the given sources with BUILD's compile commands, JOBS at a time.

clang-tidy spends 2 to 25 s of CPU on one translation unit here, most of a `make test` run's CPU
when it is done for all of them. Its verdict depends only on what it reads, so a file found
clean is remembered under the hash of: the clang-tidy version, every .clang-tidy file, the
file's path in the tree, its compile command (paths made relative) and its preprocessed text
with comments kept (NOLINT markers are comments). The next run skips a file whose hash is
remembered; any change to it or to anything it includes runs it again. Findings are never
remembered. The cache is ${XDG_CACHE_HOME:-~/.cache}/sonde-tidy (SONDE_TIDY_CACHE overrides,
SONDE_TIDY_CACHE=off disables it).

Usage: scripts/tidy.py BUILD JOBS FILE...   Prints findings and a last line; exit 1 on findings.
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_dir():
    configured = os.environ.get("SONDE_TIDY_CACHE")
    if configured == "off":
        return None
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sonde-tidy")


def preprocess_command(entry):
    """The compile command with its output replaced by preprocessed text on stdout."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    return out + ["-E", "-P", "-C", "-o", "-"]


def relative(text):
    return text.replace(ROOT + "/", "").replace(ROOT, ".")


def key_of(entry, common):
    pre = subprocess.run(preprocess_command(entry), cwd=entry["directory"], capture_output=True,
                         check=False)
    if pre.returncode != 0:
        return None  # clang-tidy will say why
    h = hashlib.sha256(common)
    h.update(relative(entry["file"]).encode())
    h.update(relative(entry.get("command", " ".join(entry.get("arguments", [])))).encode())
    h.update(relative(pre.stdout.decode(errors="replace")).encode())
    return h.hexdigest()


def tidy(build, path):
    r = subprocess.run(["clang-tidy", "-quiet", "-p", build, path], capture_output=True,
                       text=True, check=False)
    findings = [line for line in r.stdout.splitlines() if "warning:" in line or "error:" in line]
    noise = [line for line in r.stderr.splitlines(keepends=True)
             if "warnings generated" not in line and "suppressed" not in line
             and "Use -header-filter" not in line]
    return r.returncode == 0 and not findings, r.stdout + "".join(noise)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    build, jobs, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    entries = {}
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        for e in json.load(f):
            entries.setdefault(os.path.realpath(e["file"]), e)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    configs = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "*.clang-tidy", ".clang-tidy"],
                             capture_output=True, check=True).stdout.split(b"\0")
    common = version
    for c in filter(None, configs):
        with open(os.path.join(ROOT, c.decode()), "rb") as f:
            common += c + f.read()
    cache = cache_dir()
    if cache:
        os.makedirs(cache, exist_ok=True)

    def check(path):
        entry = entries.get(os.path.realpath(path))
        if entry is None:
            return path, False, f"{path}: error: no compile command in {build}\n", False
        key = key_of(entry, common) if cache else None
        marker = os.path.join(cache, key) if key else None
        if marker and os.path.exists(marker):
            return path, True, "", True
        clean, out = tidy(build, path)
        if clean and marker:
            with open(marker, "w", encoding="utf-8") as f:
                f.write(relative(entry["file"]) + "\n")
        return path, clean, out, False

    failed, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for path, clean, out, hit in pool.map(check, files):
            cached += hit
            if not clean:
                failed.append(path)
                sys.stdout.write(out)
    if failed:
        print(f"tidy: findings in {len(failed)} of {len(files)} files: {' '.join(failed)}")
        return 1
    print(f"tidy: clean ({len(files)} files, {cached} known clean from the cache)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
