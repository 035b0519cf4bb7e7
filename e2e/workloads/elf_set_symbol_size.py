#!/usr/bin/python3
"""Sets the st_size of a .symtab symbol in a 64-bit little-endian ELF file, in place.

    elf_set_symbol_size.py FILE SYMBOL SIZE

For the hostile-workload test: a binary whose symbol claims to span far more bytes than it has
(the program still runs: .symtab is not loaded).
"""
import struct
import sys

path, name, size = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3], 0)
with open(path, "r+b") as f:
    data = f.read(64)
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "want ELF64 LE"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    f.seek(shoff)
    sections = [struct.unpack("<IIQQQQIIQQ", f.read(shentsize)[:64]) for _ in range(shnum)]
    symtab = next(s for s in sections if s[1] == 2)  # SHT_SYMTAB
    strtab = sections[symtab[6]]
    f.seek(strtab[4])
    strings = f.read(strtab[5])
    for i in range(symtab[5] // 24):
        at = symtab[4] + i * 24
        f.seek(at)
        st_name, = struct.unpack("<I", f.read(4))
        end = strings.index(b"\0", st_name)
        if strings[st_name:end] == name:
            f.seek(at + 16)
            f.write(struct.pack("<Q", size))
            print(f"{name.decode()}: st_size = {size:#x}")
            sys.exit(0)
sys.exit(f"symbol {name.decode()} not found")
