#!/usr/bin/python3
"""Header blocks from a real HPACK encoder (Debian's python3-hpack), for hpack_test.

Prints sequences of blocks that share one encoder state, each block followed by the header list
it encodes and the encoder's dynamic table size after it:
    seq <name>
    block <hex>
    field <hex name>:<hex value>     (one per field, in order)
    table <size>
Deterministic (fixed seeds), so a failure reproduces.
"""
import random
import sys

from hpack import Encoder
from hpack.struct import NeverIndexedHeaderTuple


def emit_block(encoder, headers, huffman):
    block = encoder.encode(headers, huffman=huffman)
    print("block", block.hex())
    for header in headers:
        name, value = header[0], header[1]
        print("field %s:%s" % (name.hex(), value.hex()))
    entries = encoder.header_table.dynamic_entries
    print("table", sum(len(n) + len(v) + 32 for n, v in entries))


def request_headers(rng, i):
    methods = [b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"PROPFIND"]
    headers = [
        (b":method", rng.choice(methods)),
        (b":scheme", b"https"),
        (b":path", b"/api/v1/items/%d?q=%x" % (i, rng.getrandbits(48))),
        (b":authority", b"svc-%d.shop.svc.cluster.local" % rng.randrange(5)),
        (b"content-type", rng.choice([b"application/grpc", b"application/json"])),
        (b"user-agent", b"grpc-go/1.%d.0" % rng.randrange(70)),
    ]
    for k in range(rng.randrange(8)):
        headers.append((b"x-custom-%d" % rng.randrange(40), b"%x" % rng.getrandbits(rng.choice([8, 64, 256]))))
    return headers


def sequence_many(name, huffman, seed, count=300):
    """Many varied headers: the 4096-octet table evicts over and over."""
    print("seq", name)
    rng = random.Random(seed)
    encoder = Encoder()
    for i in range(count):
        emit_block(encoder, request_headers(rng, i), huffman)


def sequence_table_sizes():
    """Table size updates between blocks, shrinking to 0 and growing past the default."""
    print("seq table-sizes")
    rng = random.Random(7)
    encoder = Encoder()
    for i, size in enumerate([4096, 256, 0, 8192, 100, 65536, 4096, 1, 3000]):
        encoder.header_table_size = size
        for j in range(5):
            emit_block(encoder, request_headers(rng, i * 10 + j), huffman=j % 2 == 0)


def sequence_binary_and_sensitive():
    """Octets of every value (every Huffman code length, up to 30 bits), never-indexed fields,
    and values too large for the table."""
    print("seq binary-sensitive")
    rng = random.Random(11)
    encoder = Encoder()
    for i in range(60):
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        headers = [
            (b":status", rng.choice([b"200", b"404", b"503", b"302"])),
            (b"x-bin", value),
            NeverIndexedHeaderTuple(b"authorization", b"Bearer %x" % rng.getrandbits(128)),
            (b"grpc-status", b"%d" % rng.randrange(17)),
        ]
        if i % 10 == 0:
            headers.append((b"x-big", b"z" * 5000))  # larger than the table: empties it
        emit_block(encoder, headers, huffman=i % 3 != 0)


def main():
    sequence_many("huffman", True, 1)
    sequence_many("plain", False, 2)
    sequence_table_sizes()
    sequence_binary_and_sensitive()


if __name__ == "__main__":
    sys.exit(main())
