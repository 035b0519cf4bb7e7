// Where to put the uprobes of one Go function so that the kernel emulates the instruction it
// replaces instead of single-stepping it out of line (ten times the cost per hit: ~1.6 µs
// against ~16 µs measured on a 6.18 VM), proven by decoding the function.
//
// Entry (amd64): Go starts every function that can grow its stack with a bound check,
//   cmp 0x10(%r14),%rsp              (or: lea -N(%rsp),%r12; cmp 0x10(%r14),%r12)
//   jbe <morestack>
// The `jbe` is a conditional jump, which the kernel emulates. Before it only the stack check
// ran, which writes no argument register (RAX..R11), the goroutine (R14) or RSP, so the
// arguments are those of the call. When the jump is taken the function calls morestack and
// starts over from its first instruction, reaching the `jbe` again: the BPF program reads the
// flags and counts only the pass where the jump falls through, once per call. A function whose
// first instructions are not exactly this sequence is probed at its first instruction.
//
// Returns (amd64): every return site must be a one-byte near `ret` (C3) for a BPF program to
// perform it (pop the return address into RIP, RSP += 8); whether the kernel lets it is decided
// at load (TlsProbes). Go emits no other form.
//
// aarch64: probes stay at the first instruction and on each RET (no emulated site proven yet).
//
// Cost: one linear decode of the function. Thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/symbols/return_sites.h"

namespace sonde::agent {

struct GoProbeSites {
  uint32_t entry_offset = 0;          // from the function's start
  bool entry_at_stack_check = false;  // entry_offset is the stack check's `jbe`
  symbols::ReturnSiteStatus return_status = symbols::ReturnSiteStatus::kNoExit;
  std::vector<uint32_t> returns;       // return instructions, offsets from the start
  bool returns_are_plain_ret = false;  // every one of them is a one-byte `ret` (C3)
};

// Decodes code, the bytes of a Go function that starts at virtual address `address`.
GoProbeSites find_go_probe_sites(symbols::Machine machine, std::span<const uint8_t> code,
                                 uint64_t address);

}  // namespace sonde::agent
