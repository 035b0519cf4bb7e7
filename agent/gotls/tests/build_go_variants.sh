#!/usr/bin/env bash
# Builds the Go TLS fixture (agent/symbols/tests/go_tls_fixture) in every shape a Go release
# can take, with the system's Go, for go_releases_test: OUT/<variant> and, for each that is
# stripped, the unstripped twin whose .symtab is the truth. Offline: standard library only; the
# build cache is $GOCACHE when set, else under OUT. Usage: build_go_variants.sh GO SRC OUT
#   plain         internal linking, position dependent
#   pie           -buildmode=pie (internal linking)
#   cgo           CGO_ENABLED=1, external linking by the system linker (runtime.text after .text)
#   cgo-pie       the same, position independent (the table merged into .data.rel.ro)
#   <v>.stripped  each of them through `strip` (no .symtab)
#   plain.nobuildinfo   stripped, .go.buildinfo renamed away (the version from the table)
#   plain.notextstart   stripped, the table header's textStart zeroed as Go 1.26+ writes it
#   plain.nomoduledata  stripped, textStart zeroed and the module data's table pointer broken:
#                       nothing left tells the text start, so it must be refused
set -euo pipefail
go="$1" src="$2" out="$3"
mkdir -p "$out"
export GOFLAGS=-mod=mod GOPROXY=off GOCACHE="${GOCACHE:-$out/gocache}" GOPATH="$out/gopath" GOENV=off
cd "$src"
CGO_ENABLED=0 "$go" build -o "$out/plain" .
CGO_ENABLED=0 "$go" build -buildmode=pie -o "$out/pie" .
CGO_ENABLED=1 "$go" build -ldflags=-linkmode=external -o "$out/cgo" .
CGO_ENABLED=1 "$go" build -buildmode=pie -ldflags=-linkmode=external -o "$out/cgo-pie" .
for v in plain pie cgo cgo-pie; do strip -o "$out/$v.stripped" "$out/$v"; done
objcopy --rename-section .go.buildinfo=.go.elsewhere "$out/plain.stripped" "$out/plain.nobuildinfo"
python3 - "$out/plain.stripped" "$out/plain.notextstart" "$out/plain.nomoduledata" <<'PY'
import struct, subprocess, sys
src, notext, nomd = sys.argv[1:]
data = bytearray(open(src, "rb").read())
sections = {}
for line in subprocess.run(["readelf", "-SW", src], capture_output=True, text=True).stdout.splitlines():
    fields = line.split("]", 1)[1].split() if "]" in line and "[" in line else []
    if len(fields) >= 5:
        try:
            sections[fields[0]] = (int(fields[2], 16), int(fields[3], 16), int(fields[4], 16))
        except ValueError:
            pass
addr, off, _ = sections[".gopclntab"]
# Header: magic, pad, quantum, ptrsize, then nfunc, nfiles, textStart (8-byte words on amd64).
struct.pack_into("<Q", data, off + 8 + 2 * 8, 0)
open(notext, "wb").write(data)
# The module data starts with a pointer to the table: make it point nowhere.
n_addr, n_off, n_size = sections[".noptrdata"]
needle = struct.pack("<Q", addr)
at = data.find(needle, n_off, n_off + n_size)
assert at >= 0, "no module data in .noptrdata"
struct.pack_into("<Q", data, at, 0)
open(nomd, "wb").write(data)
PY
chmod +x "$out"/plain.* "$out"/*.stripped
