#include "agent/v8/v8_layout.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/mapped_file.h"

namespace sonde::agent::v8 {
namespace {

constexpr std::string_view kPrefix = "v8dbg_";

struct Field {
  int32_t V8Layout::*member;
  // Without the v8dbg_ prefix. Ending in "__": a class field, matched whatever its type suffix.
  // Alternatives (names across V8 versions) are separated by '|', the first found wins.
  std::string_view name;
  bool required;
  int32_t min;
  int32_t max;
};

constexpr int32_t kObj = V8Layout::kMaxObjectOffset;
constexpr int32_t kSlot = V8Layout::kMaxFrameSlotOffset;
constexpr int32_t kType = 0xffff;

// Every field the readers use, with the range a sane build gives it.
constexpr Field kFields[] = {
    {&V8Layout::heap_object_tag, "HeapObjectTag", true, 0, 7},
    {&V8Layout::heap_object_tag_mask, "HeapObjectTagMask", true, 1, 7},
    {&V8Layout::smi_tag, "SmiTag", true, 0, 7},
    {&V8Layout::smi_tag_mask, "SmiTagMask", true, 1, 7},
    {&V8Layout::smi_shift_size, "SmiShiftSize", true, 0, 31},
    {&V8Layout::pointer_size, "SystemPointerSize", true, 4, 8},
    {&V8Layout::tagged_size, "TaggedSize", true, 4, 8},
    {&V8Layout::fp_function, "off_fp_function", true, -kSlot, kSlot},
    {&V8Layout::fp_context_or_frame_type, "off_fp_context_or_frame_type", true, -kSlot, kSlot},
    {&V8Layout::heap_object_map, "class_HeapObject__map__", true, 0, kObj},
    {&V8Layout::map_instance_type, "class_Map__instance_type__", true, 0, kObj},
    {&V8Layout::js_function_shared, "class_JSFunction__shared__", true, 0, kObj},
    {&V8Layout::sfi_name_or_scope_info, "class_SharedFunctionInfo__name_or_scope_info__", true, 0,
     kObj},
    // V8 12 renamed it (and keeps debug info elsewhere): either spelling is the script slot.
    {&V8Layout::sfi_script_or_debug_info,
     "class_SharedFunctionInfo__script_or_debug_info__|class_SharedFunctionInfo__script__", true, 0,
     kObj},
    {&V8Layout::sfi_function_token_offset, "class_SharedFunctionInfo__raw_function_token_offset__",
     false, 0, kObj},
    {&V8Layout::script_name, "class_Script__name__", true, 0, kObj},
    {&V8Layout::script_line_ends, "class_Script__line_ends__", true, 0, kObj},
    {&V8Layout::script_source, "class_Script__source__", true, 0, kObj},
    {&V8Layout::string_length, "class_String__length__", true, 0, kObj},
    {&V8Layout::seq_one_byte_chars, "class_SeqOneByteString__chars__", true, 0, kObj},
    {&V8Layout::seq_two_byte_chars, "class_SeqTwoByteString__chars__", true, 0, kObj},
    {&V8Layout::cons_first, "class_ConsString__first__", true, 0, kObj},
    {&V8Layout::cons_second, "class_ConsString__second__", true, 0, kObj},
    {&V8Layout::thin_actual, "class_ThinString__actual__", true, 0, kObj},
    {&V8Layout::fixed_array_length, "class_FixedArrayBase__length__", true, 0, kObj},
    {&V8Layout::fixed_array_data, "class_FixedArray__data__", true, 0, kObj},
    {&V8Layout::uncompiled_start_position, "class_UncompiledData__start_position__", false, 0,
     kObj},
    {&V8Layout::is_not_string_mask, "IsNotStringMask", true, std::numeric_limits<int32_t>::min(),
     std::numeric_limits<int32_t>::max()},  // a bit pattern: -128 is ~0x7f
    {&V8Layout::string_tag, "StringTag", true, 0, kType},
    {&V8Layout::string_representation_mask, "StringRepresentationMask", true, 1, kType},
    {&V8Layout::seq_string_tag, "SeqStringTag", true, 0, kType},
    {&V8Layout::cons_string_tag, "ConsStringTag", true, 0, kType},
    {&V8Layout::thin_string_tag, "ThinStringTag", true, 0, kType},
    {&V8Layout::string_encoding_mask, "StringEncodingMask", true, 1, kType},
    {&V8Layout::one_byte_string_tag, "OneByteStringTag", true, 0, kType},
    {&V8Layout::two_byte_string_tag, "TwoByteStringTag", true, 0, kType},
    {&V8Layout::first_nonstring_type, "FirstNonstringType", true, 1, kType},
    {&V8Layout::type_js_function, "type_JSFunction__JS_FUNCTION_TYPE", true, 0, kType},
    {&V8Layout::type_shared_function_info, "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE",
     true, 0, kType},
    {&V8Layout::type_script, "type_Script__SCRIPT_TYPE", true, 0, kType},
    {&V8Layout::type_scope_info, "type_ScopeInfo__SCOPE_INFO_TYPE", true, 0, kType},
    {&V8Layout::type_fixed_array, "type_FixedArray__FIXED_ARRAY_TYPE", true, 0, kType},
    {&V8Layout::type_uncompiled_data_without_preparse,
     "type_UncompiledDataWithoutPreparseData__UNCOMPILED_DATA_WITHOUT_PREPARSE_DATA_TYPE", false, 0,
     kType},
    {&V8Layout::type_uncompiled_data_with_preparse,
     "type_UncompiledDataWithPreparseData__UNCOMPILED_DATA_WITH_PREPARSE_DATA_TYPE", false, 0,
     kType},
    {&V8Layout::scope_info_context_local_count, "scopeinfo_idx_ncontextlocals", true, 0, 64},
    {&V8Layout::scope_info_first_vars, "scopeinfo_idx_first_vars", true, 0, 64},
};

const V8Symbol* find_one(std::span<const V8Symbol> symbols, std::string_view name) {
  const bool class_field = name.ends_with("__");
  for (const auto& s : symbols) {
    std::string_view n = s.name;
    if (!n.starts_with(kPrefix)) continue;
    n.remove_prefix(kPrefix.size());
    if (class_field ? n.starts_with(name) : n == name) return &s;
  }
  return nullptr;
}

const V8Symbol* find_field(std::span<const V8Symbol> symbols, std::string_view names) {
  while (true) {
    const size_t bar = names.find('|');
    if (const V8Symbol* s = find_one(symbols, names.substr(0, bar))) return s;
    if (bar == std::string_view::npos) return nullptr;
    names.remove_prefix(bar + 1);
  }
}

// The reasons a layout is unusable (unsupported_reason()); each message is "unsupported: " +
// one of these, then the details in parentheses.
constexpr std::string_view kNoSymbols = "no v8dbg symbols";
constexpr std::string_view kMissingSymbol = "missing v8dbg symbol";
constexpr std::string_view kUnreadableValue = "unreadable v8dbg value";
constexpr std::string_view kImplausibleValue = "implausible v8dbg value";
constexpr std::string_view kNot64Bit = "not a 64-bit build";
constexpr std::string_view kPointerCompression = "pointer compression";
constexpr std::string_view kInconsistent = "inconsistent layout";
constexpr std::string_view kUnreadableExecutable = "unreadable executable";
constexpr std::array kReasons{
    kNoSymbols, kMissingSymbol,      kUnreadableValue, kImplausibleValue,
    kNot64Bit,  kPointerCompression, kInconsistent,    kUnreadableExecutable};
constexpr std::string_view kUnsupported = "unsupported: ";

Error unsupported(std::string_view reason, const std::string& details = "") {
  std::string message = std::string(kUnsupported) + std::string(reason);
  if (!details.empty()) message += " (" + details + ")";
  return Error(message);
}

// Cross-field checks: what the readers assume about the build.
Status check_shape(const V8Layout& l) {
  if (l.pointer_size != 8)
    return unsupported(kNot64Bit, "SystemPointerSize " + std::to_string(l.pointer_size));
  if (l.tagged_size != 8)
    return unsupported(kPointerCompression, "TaggedSize " + std::to_string(l.tagged_size));
  if ((l.heap_object_tag & ~l.heap_object_tag_mask) != 0 || (l.smi_tag & ~l.smi_tag_mask) != 0 ||
      l.heap_object_tag == l.smi_tag) {
    return unsupported(kInconsistent, "Smi/heap object tags");
  }
  if (l.smi_shift_size + 1 >= 64) return unsupported(kInconsistent, "SmiShiftSize");
  if (l.fp_function >= 0 || l.fp_context_or_frame_type >= 0) {
    return unsupported(kInconsistent, "frame slots not below the frame pointer");
  }
  if (l.is_not_string_mask == 0 || (l.string_tag & ~l.is_not_string_mask) != 0 ||
      (l.seq_string_tag & ~l.string_representation_mask) != 0 ||
      (l.cons_string_tag & ~l.string_representation_mask) != 0 ||
      (l.thin_string_tag & ~l.string_representation_mask) != 0 ||
      (l.one_byte_string_tag & ~l.string_encoding_mask) != 0 ||
      (l.two_byte_string_tag & ~l.string_encoding_mask) != 0 ||
      l.one_byte_string_tag == l.two_byte_string_tag) {
    return unsupported(kInconsistent, "string tags");
  }
  if (l.scope_info_first_vars <= l.scope_info_context_local_count) {
    return unsupported(kInconsistent, "ScopeInfo indexes");
  }
  return ok_status();
}

Result<std::string> read_link(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf);
  if (n < 0) return errno_error("readlink " + path, errno);
  return std::string(buf, static_cast<size_t>(n));
}

// Start of the mapping at file offset 0 of `exe` in the maps file; nullopt when none.
std::optional<uint64_t> mapping_start(const std::string& maps_path, const std::string& exe) {
  std::ifstream in(maps_path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line) && ++lines <= 65536;) {
    // "start-end perms offset dev inode path"
    unsigned long long start = 0;
    unsigned long long end = 0;
    unsigned long long offset = 0;
    char perms[5];
    int path_at = 0;
    if (sscanf(line.c_str(), "%llx-%llx %4s %llx %*s %*s %n", &start, &end, perms, &offset,
               &path_at) < 4 ||
        path_at <= 0) {
      continue;
    }
    if (offset == 0 && std::string_view(line).substr(static_cast<size_t>(path_at)) == exe) {
      return start;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<V8Symbol>> find_v8dbg_symbols(const symbols::ElfFile& elf) {
  std::vector<V8Symbol> out;
  for (uint32_t type : {static_cast<uint32_t>(SHT_DYNSYM), static_cast<uint32_t>(SHT_SYMTAB)}) {
    ASSIGN_OR_RETURN(auto table, elf.symbol_table(type));
    if (!table) continue;
    for (size_t i = 0; i < table->size() && out.size() < kMaxV8Symbols; ++i) {
      const symbols::ElfSymbol s = table->symbol(i);
      if (s.type() != STT_OBJECT || s.section_index == SHN_UNDEF || s.size < 4) continue;
      auto name = table->name(s.name_offset);
      if (!name || !name->starts_with(kPrefix) || name->size() > kMaxV8SymbolNameBytes) continue;
      out.push_back({std::string(*name), s.value, s.size});
    }
    if (!out.empty()) break;
  }
  return out;
}

Result<V8Layout> read_v8_layout(std::span<const V8Symbol> symbols, uint64_t load_bias,
                                const Memory& memory) {
  if (symbols.empty()) return unsupported(kNoSymbols);
  V8Layout layout;
  for (const Field& f : kFields) {
    const V8Symbol* s = find_field(symbols, f.name);
    if (s == nullptr) {
      if (f.required) {
        return unsupported(kMissingSymbol,
                           "v8dbg_" + std::string(f.name.substr(0, f.name.find('|'))));
      }
      continue;
    }
    int32_t value = 0;
    if (s->address > std::numeric_limits<uint64_t>::max() - load_bias ||
        !memory.read_value(s->address + load_bias, value)) {
      return unsupported(kUnreadableValue, s->name);
    }
    if (value < f.min || value > f.max) {
      return unsupported(kImplausibleValue, s->name + " = " + std::to_string(value));
    }
    layout.*f.member = value;
  }
  RETURN_IF_ERROR(check_shape(layout));
  return layout;
}

namespace {

// What a layout needs from the executable file: its v8dbg symbols and the address of its first
// PT_LOAD at offset 0 (max(): none).
struct ExecutableV8Symbols {
  std::vector<V8Symbol> symbols;
  uint64_t first_load = std::numeric_limits<uint64_t>::max();
};

Result<ExecutableV8Symbols> scan_executable(const symbols::OpenBinary& binary) {
  ExecutableV8Symbols out;
  std::optional<symbols::ElfFile> elf;
  const std::span<const uint8_t> bytes = binary.bytes();
  RETURN_IF_ERROR(binary.check_bytes());  // not mapped (too large, unreadable): why
  RETURN_IF_ERROR(symbols::parse_elf(bytes, elf, [&]() -> Status {
    ASSIGN_OR_RETURN(out.symbols, find_v8dbg_symbols(*elf));
    for (size_t i = 0; i < elf->segment_count(); ++i) {
      const auto seg = elf->segment(i);
      if (seg.type == PT_LOAD && seg.offset == 0)
        out.first_load = std::min(out.first_load, seg.vaddr);
    }
    return ok_status();
  }));
  RETURN_IF_ERROR(binary.check_bytes());  // truncated or rewritten meanwhile: not cached
  return out;
}

// Scanning node's symbol table is most of a layout read (~13 ms of ~13 ms in the sanitizer
// build), and the profiler, the stall recorder and the event-loop monitor each read the layout
// of every node process they meet: the scan is kept per executable file, by binary identity
// (inode, size, mtime and build id or header digest: another build is another file). Bounded:
// kCachedExecutables files, the least recently used forgotten first (an entry is ~531 symbols,
// ~40 KB). Errors are not kept. Thread-safe.
class ExecutableCache {
 public:
  static constexpr size_t kCachedExecutables = 16;

  Result<std::shared_ptr<const ExecutableV8Symbols>> get(const symbols::OpenBinary& binary) {
    {
      std::lock_guard lock(mu_);
      for (auto& e : entries_) {
        if (e.identity == binary.identity()) {
          e.last_use = ++uses_;
          return e.symbols;
        }
      }
    }
    scans_.fetch_add(1);
    ASSIGN_OR_RETURN(ExecutableV8Symbols scanned, scan_executable(binary));
    auto shared = std::make_shared<const ExecutableV8Symbols>(std::move(scanned));
    std::lock_guard lock(mu_);
    if (entries_.size() >= kCachedExecutables) {
      entries_.erase(
          std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; }));
    }
    entries_.push_back({binary.identity(), shared, ++uses_});
    return shared;
  }
  uint64_t scans() const { return scans_.load(); }

 private:
  struct Entry {
    symbols::BinaryIdentity identity;
    std::shared_ptr<const ExecutableV8Symbols> symbols;
    uint64_t last_use = 0;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t uses_ = 0;
  std::atomic<uint64_t> scans_{0};
};

ExecutableCache& executable_cache() {
  static ExecutableCache cache;
  return cache;
}

}  // namespace

uint64_t executable_scans() {
  return executable_cache().scans();
}

Result<V8Layout> read_process_v8_layout(const std::string& proc_root, pid_t pid) {
  ExecutableCache& cache = executable_cache();
  const std::string dir = proc_root + "/" + std::to_string(pid);
  ASSIGN_OR_RETURN(std::string exe, read_link(dir + "/exe"));
  ASSIGN_OR_RETURN(symbols::OpenBinary binary, symbols::OpenBinary::open(dir + "/exe"));
  ASSIGN_OR_RETURN(auto file, cache.get(binary));
  if (file->symbols.empty()) return unsupported(kNoSymbols, exe);
  if (file->first_load == std::numeric_limits<uint64_t>::max()) {
    return unsupported(kUnreadableExecutable, "no PT_LOAD at offset 0 in " + exe);
  }
  auto start = mapping_start(dir + "/maps", exe);
  if (!start)
    return unsupported(kUnreadableExecutable, "no mapping of " + exe + " in " + dir + "/maps");
  const uint64_t bias = *start - (file->first_load & ~uint64_t{0xfff});
  const ProcessMemory memory(pid);
  return read_v8_layout(file->symbols, bias, memory);
}

std::string unsupported_reason(const Error& error) {
  const std::string_view message = error.message();
  for (std::string_view reason : kReasons) {
    std::string label = std::string(kUnsupported) + std::string(reason);
    if (message.starts_with(label) &&
        (message.size() == label.size() || message.substr(label.size()).starts_with(" ("))) {
      return label;
    }
  }
  // Errors from below (readlink, the ELF reader): the executable could not be read.
  return std::string(kUnsupported) + std::string(kUnreadableExecutable);
}

}  // namespace sonde::agent::v8
