// Return sites of one function, found by decoding its instructions — never by scanning bytes
// for a RET opcode, which also matches immediates, displacements and the middle of longer
// instructions.
//
// x86-64 is decoded with Zydis from the function's first byte to its last (a linear sweep: GCC
// and Clang put jump tables in .rodata and Go emits none inside functions, so the sweep stays
// in step with the real instruction stream). aarch64 instructions are 4 bytes wide and are
// classified directly.
//
// A RET ends the function, but optimized C also leaves through tail calls: a `jmp` to another
// function, a jump into a split `.part`/`.cold` clone, or an indirect `jmp *%reg`. Those are
// reported separately as exit jumps so a caller can tell "no return site, leaves by tail call"
// from "found nothing". Indirect jumps are listed as exit jumps even though some are switch
// dispatches inside the function; the decoder cannot know the table's targets.
//
// Bounded (limits.h): a function larger than kMaxDecodedFunctionBytes is not decoded, and a
// decode stops as soon as it finds more than kMaxReturnSites returns or exit jumps; both report
// kTooLarge with empty lists. So one call costs at most ~1 MiB of decoding and 2 KiB of results,
// whatever the binary claims.
//
// Cost: one decode per instruction, no allocation except for the result vectors. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/symbols/limits.h"

namespace sonde::symbols {

// What the decoder concluded about a function's return sites.
enum class ReturnSiteStatus : uint8_t {
  kFound,               // at least one return instruction; see returns
  kTailCallOnly,        // no return instruction; the function leaves through exit jumps only
  kNoExit,              // neither a return nor a jump out (e.g. a noreturn function)
  kDecodeError,         // the bytes did not decode as instructions of the machine
  kUnsupportedMachine,  // no decoder for this ELF machine
  kNotCode,             // the symbol has no size or lies outside every executable segment
  kTooLarge,  // over kMaxDecodedFunctionBytes, or more than kMaxReturnSites returns/exit jumps
};

const char* return_site_status_name(ReturnSiteStatus status);

struct ReturnSites {
  ReturnSiteStatus status = ReturnSiteStatus::kNoExit;
  std::vector<uint32_t> returns;     // offsets from the function's start, ascending
  std::vector<uint32_t> exit_jumps;  // offsets of jumps that may leave the function, ascending
};

// Decodes code, the bytes of a function that starts at virtual address `address`.
ReturnSites find_return_sites(Machine machine, std::span<const uint8_t> code, uint64_t address);

}  // namespace sonde::symbols
