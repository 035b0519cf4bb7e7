// Fuzzes the V8 metadata reader with what a tenant's binary controls: which v8dbg_* symbols
// exist, where they point and what they hold, and the ELF file itself. Input: a count byte n,
// then n records {u8 name index, u32 address, i32 value}, then the rest as an ELF file. The
// reader must return a layout or an Error, never crash, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "agent/symbols/elf_file.h"
#include "agent/v8/v8_layout.h"

namespace {

// Names as node 20 spells them, plus near misses the prefix match must not confuse.
constexpr const char* kNames[] = {
    "v8dbg_HeapObjectTag",
    "v8dbg_HeapObjectTagMask",
    "v8dbg_SmiTag",
    "v8dbg_SmiTagMask",
    "v8dbg_SmiShiftSize",
    "v8dbg_SystemPointerSize",
    "v8dbg_TaggedSize",
    "v8dbg_off_fp_function",
    "v8dbg_off_fp_context_or_frame_type",
    "v8dbg_class_HeapObject__map__Map",
    "v8dbg_class_Map__instance_type__uint16_t",
    "v8dbg_class_JSFunction__shared__SharedFunctionInfo",
    "v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object",
    "v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject",
    "v8dbg_class_SharedFunctionInfo__raw_function_token_offset__int16_t",
    "v8dbg_class_Script__name__Object",
    "v8dbg_class_Script__line_ends__Object",
    "v8dbg_class_Script__source__Object",
    "v8dbg_class_String__length__int32_t",
    "v8dbg_class_SeqOneByteString__chars__char",
    "v8dbg_class_SeqTwoByteString__chars__char",
    "v8dbg_class_ConsString__first__String",
    "v8dbg_class_ConsString__second__String",
    "v8dbg_class_ThinString__actual__String",
    "v8dbg_class_FixedArrayBase__length__SMI",
    "v8dbg_class_FixedArray__data__uintptr_t",
    "v8dbg_class_UncompiledData__start_position__int32_t",
    "v8dbg_IsNotStringMask",
    "v8dbg_StringTag",
    "v8dbg_StringRepresentationMask",
    "v8dbg_SeqStringTag",
    "v8dbg_ConsStringTag",
    "v8dbg_ThinStringTag",
    "v8dbg_StringEncodingMask",
    "v8dbg_OneByteStringTag",
    "v8dbg_TwoByteStringTag",
    "v8dbg_FirstNonstringType",
    "v8dbg_type_JSFunction__JS_FUNCTION_TYPE",
    "v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
    "v8dbg_type_Script__SCRIPT_TYPE",
    "v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE",
    "v8dbg_type_FixedArray__FIXED_ARRAY_TYPE",
    "v8dbg_scopeinfo_idx_ncontextlocals",
    "v8dbg_scopeinfo_idx_first_vars",
    "v8dbg_class_Script__name",
    "v8dbg_",
    "v8dbg_class___",
    "not_v8dbg_SmiTag"};
constexpr size_t kNameCount = sizeof kNames / sizeof kNames[0];
constexpr size_t kRecordBytes = 9;

class FuzzMemory final : public sonde::agent::v8::Memory {
 public:
  std::map<uint64_t, int32_t> values;
  bool read(uint64_t address, std::span<uint8_t> out) const override {
    auto it = values.find(address);
    if (it == values.end() || out.size() != sizeof(int32_t)) return false;
    std::memcpy(out.data(), &it->second, sizeof(int32_t));
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t n = data[0];
  size_t at = 1;
  std::vector<sonde::agent::v8::V8Symbol> symbols;
  FuzzMemory memory;
  for (size_t i = 0; i < n && at + kRecordBytes <= size; ++i, at += kRecordBytes) {
    uint32_t address = 0;
    int32_t value = 0;
    std::memcpy(&address, data + at + 1, 4);
    std::memcpy(&value, data + at + 5, 4);
    symbols.push_back({kNames[data[at] % kNameCount], address, 4});
    memory.values[address] = value;
  }
  auto layout = sonde::agent::v8::read_v8_layout(symbols, 0, memory);
  if (layout.ok()) {
    // A layout that passed validation must keep its promises.
    if (layout->pointer_size != 8 || layout->fp_function >= 0) __builtin_trap();
  }
  auto elf = sonde::symbols::ElfFile::parse(std::span<const uint8_t>(data + at, size - at));
  if (elf.ok()) {
    auto found = sonde::agent::v8::find_v8dbg_symbols(*elf);
    if (found.ok() && found->size() > sonde::agent::v8::kMaxV8Symbols) __builtin_trap();
  }
  return 0;
}
