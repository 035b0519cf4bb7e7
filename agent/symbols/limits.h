// Bounds on the work and memory one binary can cost the agent.
//
// The agent runs on every node and parses binaries its tenants control: a hostile or merely
// unusual file must not turn into an out-of-memory kill or a multi-second parse on the agent's
// hot path. Every reader of binaries (ElfFile, the symbol resolver, the return-site decoder,
// the symbolizers, the Go pclntab and build-info readers) checks these caps before it spends
// work or memory in proportion to what the file claims.
//
// A binary over a cap gets one recognizable verdict: an Error whose code is kTooLargeCode
// (EFBIG) and whose message reads "too large to instrument: <what> (<value>) exceeds <cap>".
// Callers test is_too_large(error), count it in a metric and may cache it as a negative answer
// for the binary's identity: the verdict depends on the file's content only, never on timing or
// on the machine. A function over the decode caps is not an error: its binary still resolves,
// and that function alone reports ReturnSiteStatus::kTooLarge (see return_sites.h).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace sonde::symbols {

// Largest file mapped and parsed. Real executables are far below it (node 99 MB, large Go
// services 100-300 MB, unstripped Chromium-class C++ ~1.5 GB); the mapping itself costs address
// space only, but scans (the pclntab magic scan) are linear in it.
inline constexpr uint64_t kMaxBinaryBytes = uint64_t{2} << 30;

// Most section headers and program headers one file may have. Linked executables and shared
// objects have tens (node: 40 sections, 12 segments); every lookup by name walks the section
// table, so its length must not be the tenant's choice.
inline constexpr uint64_t kMaxSections = uint64_t{1} << 16;
inline constexpr uint64_t kMaxSegments = uint64_t{1} << 16;

// Most entries one symbol table (.symtab or .dynsym) may hold: 40x node's ~109k. The resolver
// streams them without allocating; the address -> name table keeps 16 bytes per function, so
// this also bounds ElfSymbolizer at 64 MiB.
inline constexpr uint64_t kMaxSymbols = uint64_t{1} << 22;

// Largest string table linked to a symbol table (node's .strtab is 7.5 MB). Names are compared
// in place, so this bounds the pages one resolve may touch, not a copy.
inline constexpr uint64_t kMaxStringTableBytes = uint64_t{256} << 20;

// Largest function whose instructions are decoded for return sites. The functions sonde probes
// are a few hundred bytes to a few KiB (crypto/tls.(*Conn).Read ~1 KiB, uv__io_poll ~3 KiB);
// the largest real functions (generated Go tables, interpreter loops) stay under 1 MiB. At the
// cap a decode costs ~60 ms of CPU in the worst case (1 Mi one-byte instructions, measured in
// bench/RESULTS.md on a loaded 2-vCPU VM). A larger function keeps its entry probe but gets no
// return sites.
inline constexpr uint64_t kMaxDecodedFunctionBytes = uint64_t{1} << 20;

// Most return instructions (and, separately, exit jumps) kept for one function. Each is one
// uprobe; real Go functions have fewer than 20 returns. Bounds a cached ProbeTarget at ~2 KiB,
// so the probe-target cache's 4096 entries cannot exceed ~8 MiB whatever the binaries hold.
inline constexpr size_t kMaxReturnSites = 256;

// Largest Go .gopclntab parsed (the Go 1.19 compiler's is 16.6 MB; the biggest Go services
// stay under 100 MB). The lookup index built over it is bounded in proportion.
inline constexpr uint64_t kMaxPclntabBytes = uint64_t{256} << 20;

// Most functions a Go pclntab may list (large Go services have 100-200k). The lookup index
// costs 24 bytes of ranges per function, so at most 24 MiB.
inline constexpr uint64_t kMaxGoFunctions = uint64_t{1} << 20;

// Most bytes scanned for the pclntab magic in binaries without section headers.
inline constexpr uint64_t kMaxMagicScanBytes = uint64_t{512} << 20;

// The Error code of the "too large to instrument" verdict.
inline constexpr int kTooLargeCode = EFBIG;

// "too large to instrument: <what> (<value>) exceeds <cap>", with code kTooLargeCode.
Error too_large_error(std::string_view what, uint64_t value, uint64_t cap);

// Whether error is the "too large to instrument" verdict (also after Error::wrap()).
inline bool is_too_large(const Error& error) {
  return error.code() == kTooLargeCode;
}

}  // namespace sonde::symbols
