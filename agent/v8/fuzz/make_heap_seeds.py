#!/usr/bin/env python3
"""Writes heap_corpus/: hand-laid V8 heaps (the layout of agent/v8/tests/synthetic_heap.h, node
20's) that the namer names, so the fuzzer starts from inputs that reach every reader."""
import os
import struct

BASE = 0x10000
here = os.path.dirname(os.path.abspath(__file__))


class Heap:
    def __init__(self):
        self.b = bytearray()

    def alloc(self, size):
        at = BASE + len(self.b)
        self.b += bytes((size + 7) & ~7)
        return at + 1

    def put(self, tagged, off, fmt, v):
        struct.pack_into(fmt, self.b, tagged - 1 - BASE + off, v)

    def obj(self, typ, size):
        m = self.alloc(16)
        self.put(m, 12, '<H', typ)
        o = self.alloc(size)
        self.put(o, 0, '<Q', m)
        return o

    def string(self, s):
        o = self.obj(8, 16 + len(s))
        self.put(o, 12, '<I', len(s))
        self.b[o - 1 - BASE + 16:o - 1 - BASE + 16 + len(s)] = s.encode()
        return o

    def cons(self, a, c):
        o = self.obj(9, 32)
        self.put(o, 16, '<Q', a)
        self.put(o, 24, '<Q', c)
        return o


def smi(v):
    return v << 32


def seed(name, named_by_scope_info):
    h = Heap()
    src = '// a\n\nfunction burn(n) {\n  return n;\n}\n'
    script = h.obj(167, 64)
    h.put(script, 8, '<Q', h.string(src))
    h.put(script, 16, '<Q', h.cons(h.string('/app/'), h.string('x.js')))
    if named_by_scope_info:
        si = h.obj(261, 64)
        for i, v in enumerate([smi(0), smi(0), smi(0), h.string('burn'), smi(0), smi(19), smi(38)]):
            h.put(si, 8 + 8 * i, '<Q', v)
        nosi = si
    else:
        nosi = h.string('burn')
    sfi = h.obj(262, 48)
    h.put(sfi, 16, '<Q', nosi)
    h.put(sfi, 32, '<Q', script)
    fn = h.obj(2066, 32)
    h.put(fn, 24, '<Q', sfi)
    ctx = h.alloc(8)
    with open(os.path.join(here, 'heap_corpus', name), 'wb') as f:
        f.write(struct.pack('<QQ', fn, ctx) + bytes(h.b))


os.makedirs(os.path.join(here, 'heap_corpus'), exist_ok=True)
seed('scope-info-name', True)
seed('string-name', False)
