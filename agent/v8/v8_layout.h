// V8Layout: the object and frame layout of the V8 inside one node binary, taken from the
// postmortem metadata node exports as `v8dbg_*` symbols (one `int` each). Nothing here is a
// table per Node.js version: every offset, tag and type number is read from the binary or,
// because several are set by a static initializer (.bss), from the running process's memory at
// symbol address + load bias.
//
// What is validated: every field the naming needs is present (a class field is matched by
// `v8dbg_class_<Class>__<field>__`, whatever type suffix the V8 version spells), each value lies
// in a plausible range (tags within their masks, object offsets within kMaxObjectOffset, frame
// slots within kMaxFrameSlotOffset below fp), and the build has the shape the readers assume
// (64-bit, no pointer compression). A build that fails any of it gets an Error whose message
// starts "unsupported: " and names what is missing or implausible; callers report it as
// js_frames="unsupported: ..." and name nothing in that process from its heap.
//
// Bounded work: at most kMaxSymbols v8dbg symbols are kept from a binary (node 20 has 531), a
// symbol name is at most kMaxNameBytes, and reading a layout is one 4-byte read per field.
// Immutable after construction; safe to share between threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/v8/process_memory.h"
#include "common/result.h"

namespace sonde::agent::v8 {

struct V8Layout {
  static constexpr int32_t kMaxObjectOffset = 4096;
  static constexpr int32_t kMaxFrameSlotOffset = 256;

  // Tagging (x64 without pointer compression: a Smi is value << 32, a heap object pointer has
  // heap_object_tag in its low bits).
  int32_t heap_object_tag = 0;
  int32_t heap_object_tag_mask = 0;
  int32_t smi_tag = 0;
  int32_t smi_tag_mask = 0;
  int32_t smi_shift_size = 0;
  int32_t pointer_size = 0;
  int32_t tagged_size = 0;

  // Frame slots, bytes from the frame pointer (negative: below it).
  int32_t fp_function = 0;
  int32_t fp_context_or_frame_type = 0;  // a Smi here marks a typed (non-JavaScript) frame

  // Field offsets, bytes from an object's untagged start.
  int32_t heap_object_map = 0;
  int32_t map_instance_type = 0;
  int32_t js_function_shared = 0;
  int32_t sfi_name_or_scope_info = 0;
  int32_t sfi_script_or_debug_info = 0;
  int32_t sfi_function_token_offset = -1;  // -1: not published
  int32_t script_name = 0;
  int32_t script_line_ends = 0;
  int32_t script_source = 0;
  int32_t string_length = 0;
  int32_t seq_one_byte_chars = 0;
  int32_t seq_two_byte_chars = 0;
  int32_t cons_first = 0;
  int32_t cons_second = 0;
  int32_t thin_actual = 0;
  int32_t fixed_array_length = 0;
  int32_t fixed_array_data = 0;
  int32_t uncompiled_start_position = -1;  // -1: not published

  // String instance-type bits.
  int32_t is_not_string_mask = 0;
  int32_t string_tag = 0;
  int32_t string_representation_mask = 0;
  int32_t seq_string_tag = 0;
  int32_t cons_string_tag = 0;
  int32_t thin_string_tag = 0;
  int32_t string_encoding_mask = 0;
  int32_t one_byte_string_tag = 0;
  int32_t two_byte_string_tag = 0;
  int32_t first_nonstring_type = 0;

  // Instance types.
  int32_t type_js_function = 0;
  int32_t type_shared_function_info = 0;
  int32_t type_script = 0;
  int32_t type_scope_info = 0;
  int32_t type_fixed_array = 0;
  int32_t type_uncompiled_data_without_preparse = -1;  // -1: not published
  int32_t type_uncompiled_data_with_preparse = -1;

  // ScopeInfo slot indexes.
  int32_t scope_info_context_local_count = 0;
  int32_t scope_info_first_vars = 0;

  bool is_smi(uint64_t v) const {
    return (v & static_cast<uint64_t>(smi_tag_mask)) == static_cast<uint64_t>(smi_tag);
  }
  int64_t smi_value(uint64_t v) const {
    return static_cast<int64_t>(v) >> (smi_shift_size + 1);  // kSmiTagSize is 1 on every V8
  }
  bool is_heap_object(uint64_t v) const {
    return (v & static_cast<uint64_t>(heap_object_tag_mask)) ==
           static_cast<uint64_t>(heap_object_tag);
  }
  uint64_t untag(uint64_t v) const { return v - static_cast<uint64_t>(heap_object_tag); }
};

// One v8dbg_* symbol of a binary: its link-time address (add the load bias to read it).
struct V8Symbol {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
};

inline constexpr size_t kMaxV8Symbols = 4096;
inline constexpr size_t kMaxV8SymbolNameBytes = 256;

// The v8dbg_* data symbols of .dynsym, else .symtab; an empty vector when the binary has none
// (not node, or a build that hides them). An Error for a malformed symbol table.
Result<std::vector<V8Symbol>> find_v8dbg_symbols(const symbols::ElfFile& elf);

// The layout from those symbols, their values read from memory at address + load_bias.
// An Error "unsupported: <reason> (<details>)" when a field is missing, unreadable or
// implausible.
Result<V8Layout> read_v8_layout(std::span<const V8Symbol> symbols, uint64_t load_bias,
                                const Memory& memory);

// The layout of a running process: its executable (proc_root/<pid>/exe), the load bias from
// proc_root/<pid>/maps, its memory through process_vm_readv. The executable's v8dbg symbols
// are scanned once per file (by binary identity; the last 16 files kept, process-wide), so a
// process of a node binary met before costs its maps and ~100 small memory reads.
Result<V8Layout> read_process_v8_layout(const std::string& proc_root, pid_t pid);
// Executable files read_process_v8_layout has scanned for their v8dbg symbols so far (its
// cache's misses), process-wide.
uint64_t executable_scans();

// "unsupported: <reason>" for an Error of the two readers above, the reason from a fixed set
// (no v8dbg symbols, missing v8dbg symbol, unreadable v8dbg value, implausible v8dbg value, not
// a 64-bit build, pointer compression, inconsistent layout, unreadable executable): a value
// fit for a metric label, where the message's details (paths, values a binary chose) are not.
std::string unsupported_reason(const Error& error);

}  // namespace sonde::agent::v8
