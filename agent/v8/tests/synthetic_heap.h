// Test helper: a small V8 heap laid out by hand in one buffer, read through the Memory seam,
// with node 20's published layout (its v8dbg_* values, as read from /usr/bin/node). For the
// namer's bounds and failure paths (cycles, moved objects, forged scope infos) and as the
// fuzzer's memory; the namer's test of record is the real node (v8_frames_bpf_test).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "agent/v8/process_memory.h"
#include "agent/v8/v8_layout.h"

namespace sonde::agent::v8::testing {

inline V8Layout node20_layout() {
  V8Layout l;
  l.heap_object_tag = 1;
  l.heap_object_tag_mask = 3;
  l.smi_tag = 0;
  l.smi_tag_mask = 1;
  l.smi_shift_size = 31;
  l.pointer_size = 8;
  l.tagged_size = 8;
  l.fp_function = -16;
  l.fp_context_or_frame_type = -8;
  l.heap_object_map = 0;
  l.map_instance_type = 12;
  l.js_function_shared = 24;
  l.sfi_name_or_scope_info = 16;
  l.sfi_script_or_debug_info = 32;
  l.sfi_function_token_offset = 44;
  l.script_name = 16;
  l.script_line_ends = 56;
  l.script_source = 8;
  l.string_length = 12;
  l.seq_one_byte_chars = 16;
  l.seq_two_byte_chars = 16;
  l.cons_first = 16;
  l.cons_second = 24;
  l.thin_actual = 16;
  l.fixed_array_length = 8;
  l.fixed_array_data = 16;
  l.uncompiled_start_position = 16;
  l.is_not_string_mask = -128;
  l.string_tag = 0;
  l.string_representation_mask = 7;
  l.seq_string_tag = 0;
  l.cons_string_tag = 1;
  l.thin_string_tag = 5;
  l.string_encoding_mask = 8;
  l.one_byte_string_tag = 8;
  l.two_byte_string_tag = 0;
  l.first_nonstring_type = 128;
  l.type_js_function = 2066;
  l.type_shared_function_info = 262;
  l.type_script = 167;
  l.type_scope_info = 261;
  l.type_fixed_array = 175;
  l.scope_info_context_local_count = 2;
  l.scope_info_first_vars = 3;
  return l;
}

class SyntheticHeap final : public Memory {
 public:
  static constexpr uint64_t kBase = 0x10000;
  static constexpr uint16_t kOneByteString = 8;  // sequential, one-byte (internalized)
  static constexpr uint16_t kConsString = 9;     // cons, one-byte

  std::vector<uint8_t> bytes;
  mutable uint64_t reads = 0;

  bool read(uint64_t address, std::span<uint8_t> out) const override {
    ++reads;
    if (address < kBase || address - kBase > bytes.size() ||
        out.size() > bytes.size() - (address - kBase)) {
      return false;
    }
    std::memcpy(out.data(), bytes.data() + (address - kBase), out.size());
    return true;
  }

  // A zeroed object of `size` bytes; returns its tagged pointer.
  uint64_t alloc(size_t size) {
    const uint64_t at = kBase + bytes.size();
    bytes.resize(bytes.size() + ((size + 7) & ~size_t{7}), 0);
    return at + 1;
  }
  void put64(uint64_t tagged, int32_t offset, uint64_t v) { put(tagged, offset, &v, 8); }
  void put32(uint64_t tagged, int32_t offset, uint32_t v) { put(tagged, offset, &v, 4); }
  void put16(uint64_t tagged, int32_t offset, uint16_t v) { put(tagged, offset, &v, 2); }
  static uint64_t smi(int64_t v) { return static_cast<uint64_t>(v) << 32; }

  uint64_t map(uint16_t type) {
    const uint64_t m = alloc(16);
    put16(m, 12, type);
    return m;
  }
  uint64_t object(uint16_t type, size_t size) {
    const uint64_t mp = map(type);
    const uint64_t o = alloc(size);
    put64(o, 0, mp);
    return o;
  }
  uint64_t string(const std::string& s) {
    const uint64_t o = object(kOneByteString, 16 + s.size());
    put32(o, 12, static_cast<uint32_t>(s.size()));
    std::memcpy(bytes.data() + (o - 1 - kBase) + 16, s.data(), s.size());
    return o;
  }
  uint64_t cons(uint64_t first, uint64_t second) {
    const uint64_t o = object(kConsString, 32);
    put64(o, 16, first);
    put64(o, 24, second);
    return o;
  }
  uint64_t script(uint64_t name, uint64_t source) {
    const uint64_t o = object(167, 64);
    put64(o, 8, source);
    put64(o, 16, name);
    return o;
  }
  // A ScopeInfo: flags, parameter count, no context locals, then the function name with its
  // slot index, then the (start, end) position pair.
  uint64_t scope_info(uint64_t name, int64_t start, int64_t end) {
    const uint64_t o = object(261, 8 * 8);
    put64(o, 8, smi(0));
    put64(o, 16, smi(0));
    put64(o, 24, smi(0));
    put64(o, 32, name);
    put64(o, 40, smi(0));
    put64(o, 48, smi(start));
    put64(o, 56, smi(end));
    return o;
  }
  uint64_t sfi(uint64_t name_or_scope_info, uint64_t script) {
    const uint64_t o = object(262, 48);
    put64(o, 16, name_or_scope_info);
    put64(o, 32, script);
    return o;
  }
  uint64_t function(uint64_t sfi) {
    const uint64_t o = object(2066, 32);
    put64(o, 24, sfi);
    return o;
  }
  // What the kernel records with a frame: the word in the function's shared slot (0 when
  // unreadable), read without counting as the namer's read.
  uint64_t shared_of(uint64_t function) const {
    uint64_t v = 0;
    const uint64_t before = reads;
    if (!read_value(function - 1 + 24, v)) v = 0;
    reads = before;
    return v;
  }

 private:
  void put(uint64_t tagged, int32_t offset, const void* v, size_t n) {
    std::memcpy(bytes.data() + (tagged - 1 - kBase) + offset, v, n);
  }
};

}  // namespace sonde::agent::v8::testing
