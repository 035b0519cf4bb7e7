// resolve(): the probe targets (address, file offset, size, return sites) of a few function
// names in one binary, found in a single streaming pass over its symbol tables.
//
// The pass reads .symtab and then .dynsym entry by entry straight from the mapped file and
// compares each defined function symbol's name in place against the wanted names; it allocates
// nothing per symbol visited (a 99 MB node binary has ~109k symbols and a 7.5 MB string table;
// none of it is copied). Only the small answers are kept. resolve_file() maps the file, resolves
// and unmaps before returning, so nothing of the symbol table outlives the call.
//
// Matching rules: a name matches defined STT_FUNC or STT_OBJECT symbols (section index not
// SHN_UNDEF) with exactly that name; a data object (libuv's default_loop_struct, say) comes back
// with its address and size and return_status kNotCode. .symtab wins over .dynsym, the first
// definition wins within a table, and `ambiguous` says that another definition with a
// different address exists (two static functions of one name in different translation units).
//
// A missing name is a result (found == false), not an error; one function without a return
// site never fails the others. Errors are reserved for an unreadable or malformed binary, and
// for one over the caps of limits.h (is_too_large(): a symbol table over kMaxSymbols, a file
// over kMaxBinaryBytes). A function over the decode caps is found, with its entry address and
// offset, and return_status kTooLarge.
//
// resolve_file() reads through a guarded mapping (mapped_file.h): a file truncated or failing
// to read while it is parsed yields an Error, never a SIGBUS.
//
// Thread-safety: free functions with no shared state; safe to call concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/symbols/return_sites.h"
#include "common/result.h"

namespace sonde::symbols {

// Where to attach probes for one function. Small by design: this is what caches keep.
struct ProbeTarget {
  std::string name;
  bool found = false;
  bool ambiguous = false;
  // Why return_offsets may be empty; kFound when it is not. kNotCode when !found.
  ReturnSiteStatus return_status = ReturnSiteStatus::kNotCode;
  uint64_t address = 0;      // st_value: the function's virtual address in the ELF file
  uint64_t file_offset = 0;  // the uprobe attach offset (through the executable PT_LOAD)
  uint64_t size = 0;         // st_size in bytes
  // At most kMaxReturnSites entries each.
  std::vector<uint32_t> return_offsets;     // return instructions, offsets from the start
  std::vector<uint32_t> exit_jump_offsets;  // tail calls / jumps out, offsets from the start

  bool has_return_sites() const { return return_status == ReturnSiteStatus::kFound; }
};

// Resolves names in a parsed ELF file. The result has one entry per name, in the order given
// (duplicates allowed). Errors only for a malformed symbol table.
Result<std::vector<ProbeTarget>> resolve(const ElfFile& elf, std::span<const std::string> names);

// Maps path, parses it, resolves names and unmaps it before returning.
Result<std::vector<ProbeTarget>> resolve_file(const std::string& path,
                                              std::span<const std::string> names);

}  // namespace sonde::symbols
