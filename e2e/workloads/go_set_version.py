#!/usr/bin/env python3
"""go_set_version.py BINARY VERSION: overwrites the Go version string in BINARY's .go.buildinfo
(the inline form Go 1.18+ writes: a varint length, then the bytes) with VERSION, which must have
the same length in bytes. VERSION is taken as bytes: "\\xff" in it stands for the byte 0xff, so a
test can give a binary a version that is not UTF-8, as a tenant can."""
import sys

MAGIC = b"\xff Go buildinf:"
HEADER = 32
INLINE_STRINGS = 0x2


def main():
    path = sys.argv[1]
    version = sys.argv[2].encode("latin-1").decode("unicode_escape").encode("latin-1")
    data = bytearray(open(path, "rb").read())
    at = data.find(MAGIC)
    if at < 0:
        sys.exit(f"{path}: no .go.buildinfo magic")
    if not data[at + 15] & INLINE_STRINGS:
        sys.exit(f"{path}: .go.buildinfo without inline strings (Go before 1.18)")
    length = data[at + HEADER]
    if length & 0x80 or length != len(version):
        sys.exit(f"{path}: version is {length} bytes, the new one {len(version)}")
    start = at + HEADER + 1
    old = bytes(data[start:start + length])
    data[start:start + length] = version
    open(path, "wb").write(data)
    print(f"{old!r} -> {version!r}")


if __name__ == "__main__":
    main()
