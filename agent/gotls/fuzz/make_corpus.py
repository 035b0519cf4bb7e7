#!/usr/bin/python3
"""Writes the seed corpora of hpack_fuzzer and http2_fuzzer from real encoders (python3-hpack,
python3-h2), through the test scripts in ../tests. Run from anywhere; rewrites hpack_corpus/ and
http2_corpus/ next to this file. Each seed is cut to a few KiB so the fuzzer starts fast."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
WITH_PAYLOAD = {1, 3, 5, 7, 9}  # HEADERS, RST_STREAM, PUSH_PROMISE, GOAWAY, CONTINUATION
MAX_SEED = 6000


def lines(script, *args):
    out = subprocess.run([sys.executable, os.path.join(TESTS, script), *args], check=True,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def hpack_seeds():
    folder = os.path.join(HERE, "hpack_corpus")
    seeds = {}
    name = None
    for line in lines("hpack_blocks.py"):
        kind, _, arg = line.partition(" ")
        if kind == "seq":
            name = arg
            seeds[name] = b""
        elif kind == "block":
            block = bytes.fromhex(arg)
            if len(seeds[name]) + len(block) + 2 <= MAX_SEED:
                seeds[name] += len(block).to_bytes(2, "big") + block
    for name, data in seeds.items():
        write(folder, name, data)


def http2_seeds():
    folder = os.path.join(HERE, "http2_corpus")
    for scenario in ["concurrent", "grpc", "resets", "continuation", "push"]:
        buffers = {"c": bytearray(), "s": bytearray()}
        skip = {"c": len(PREFACE), "s": 0}
        records = []
        for line in lines("h2_conversations.py", scenario):
            parts = line.split()
            if parts[0] != "chunk":
                continue
            side, data = parts[1], bytes.fromhex(parts[3])
            buf = buffers[side]
            buf += data
            cut = min(skip[side], len(buf))
            del buf[:cut]
            skip[side] -= cut
            while len(buf) >= 9:
                length = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + length:
                    break
                frame_type = buf[3]
                payload = bytes(buf[9:9 + length]) if frame_type in WITH_PAYLOAD else b""
                records.append((side, bytes(buf[:9]) + payload))
                del buf[:9 + length]
        for sideflag, who in ((0, "client"), (1, "server")):
            data = bytes([sideflag])
            for side, record in records:
                outgoing = (side == "c") == (who == "client")
                if len(data) + 1 + len(record) > MAX_SEED:
                    break
                data += bytes([int(outgoing)]) + record
            write(folder, "%s-%s" % (scenario, who), data)


hpack_seeds()
http2_seeds()
