#!/bin/bash
# Regenerates the ELF reader's seed corpus: tiny executables, a relocatable object and a shared
# object with a tail call and a build-id, plus header variants the reader must reject.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)/corpus"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/tiny.c" <<'C'
int helper(int x);
__attribute__((noinline)) int helper(int x) { return x * 3 + 1; }
__attribute__((noinline)) int tail(int x) { return helper(x + 1); }
int poll_fn(int x) { if (x > 2) return tail(x); return helper(x); }
void _start(void) { volatile int r = poll_fn(5); (void)r; for (;;) {} }
C
common=(-Os -nostdlib -fno-asynchronous-unwind-tables)
small=(-Wl,--build-id -Wl,-z,max-page-size=0x10 -Wl,-z,noseparate-code)
gcc "${common[@]}" -static "${small[@]}" -Wl,-z,norelro -o "$out/exec" "$work/tiny.c"
gcc "${common[@]}" -c -o "$out/relocatable.o" "$work/tiny.c"
gcc "${common[@]}" -shared -fPIC "${small[@]}" -o "$out/shared.so" "$work/tiny.c"
# Same bytes, other machine (EM_AARCH64 = 183): decoded with the fixed-width decoder.
cp "$out/exec" "$out/exec-aarch64"
printf '\xb7\x00' | dd of="$out/exec-aarch64" bs=1 seek=18 conv=notrunc status=none
cp "$out/exec" "$out/exec-elf32"
printf '\x01' | dd of="$out/exec-elf32" bs=1 seek=4 conv=notrunc status=none
cp "$out/exec" "$out/exec-big-endian"
printf '\x02' | dd of="$out/exec-big-endian" bs=1 seek=5 conv=notrunc status=none
head -c 300 "$out/exec" > "$out/exec-truncated"
printf '#!/bin/sh\necho not an ELF\n' > "$out/not-elf"
