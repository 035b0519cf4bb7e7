// V8Namer: names a sampled V8 frame of one node process from the process's heap, read from the
// outside: the frame's function slot (a JSFunction) -> its SharedFunctionInfo -> the function's
// name (a String, or the name kept in its ScopeInfo), its Script's name (file or URL) and the
// line the function starts on.
//
// Correct or unnamed, never wrong: every object is checked for the instance type its place
// requires before it is read (JSFunction, SharedFunctionInfo, ScopeInfo, Script, String,
// FixedArray), every length against a bound, and a line is given only when the script's source
// confirms the start position (the function's name or parameter list stands there); otherwise
// the line is 0 (unknown) and the frame keeps its name. A frame whose context slot holds a Smi
// is a typed (non-JavaScript) frame and is not named. Anything unreadable or inconsistent makes
// name() return nullopt with the reason counted in stats(); callers keep the frame as
// "[js] 0x…". There are no retries.
//
// Objects move in GC, between the sample and the read (up to a drain interval). The kernel
// keeps, with each frame's function pointer, the SharedFunctionInfo pointer the function held
// at the sample; a frame is named only if the object now at the function pointer is a
// JSFunction holding that same SharedFunctionInfo (else it counts as `moved`): for a wrong name,
// both addresses would have to be reused by a matching pair. The cache (per function pointer)
// is trusted again only after the function's map still says JSFunction and its shared pointer,
// and that SharedFunctionInfo's map, name-or-scope-info and script pointers, are still the
// cached ones (4 reads per hit).
//
// Bounds, per name() call: at most kMaxReadsPerFrame reads (then nullopt, counted), strings of
// at most kMaxNameBytes (names) / kMaxPathBytes (script names) through at most
// kMaxStringDepth cons/thin links, kMaxSourceBytes of a script's source scanned for newlines
// (once per script, cached). The caches hold at most kMaxCachedFunctions functions and
// kMaxCachedScripts scripts (cleared when full), so memory per process is bounded by roughly
// kMaxCachedFunctions * (kMaxNameBytes + kMaxPathBytes) plus kMaxCachedScripts line tables of at
// most kMaxLines entries (~82 MiB at worst); cache_bytes() is what they hold now, which lets a
// caller naming many processes hold them all to one budget (clear_caches()).
//
// Not thread-safe: one thread (the profiler's drain) uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/v8/process_memory.h"
#include "agent/v8/v8_layout.h"

namespace sonde::agent::v8 {

struct JsFunctionName {
  std::string function;  // "(anonymous)" when V8 has no name for it
  std::string script;    // file or URL; empty when the script has none
  int64_t line = 0;      // 1-based line the function starts on; 0 when not confirmed
};

class V8Namer {
 public:
  static constexpr uint32_t kMaxReadsPerFrame = 64;
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxPathBytes = 4096;
  static constexpr int kMaxStringDepth = 8;
  static constexpr size_t kMaxSourceBytes = 4 << 20;
  static constexpr size_t kMaxLines = 1 << 18;
  static constexpr size_t kMaxCachedFunctions = 4096;
  static constexpr size_t kMaxCachedScripts = 64;

  struct Stats {
    uint64_t named = 0;         // frames named from the heap (cache hits included)
    uint64_t cache_hits = 0;    // of those, from a revalidated cache entry
    uint64_t typed_frame = 0;   // the context slot held a frame-type marker: not JavaScript
    uint64_t not_function = 0;  // the function slot is not a JSFunction (or unreadable)
    uint64_t inconsistent = 0;  // a JSFunction whose SFI, name or script did not check out
    uint64_t moved = 0;         // the function's SFI is not the one it held at the sample
    uint64_t over_budget = 0;   // gave up after kMaxReadsPerFrame reads
    uint64_t no_line = 0;       // named, but the line could not be confirmed
  };

  // memory must outlive the namer.
  V8Namer(const V8Layout& layout, const Memory& memory) : l_(layout), memory_(memory) {}

  // The function of a frame whose slots held `function` and `context_or_type`, when that
  // function's SharedFunctionInfo is still `sampled_shared` (what it held at the sample).
  std::optional<JsFunctionName> name(uint64_t function, uint64_t context_or_type,
                                     uint64_t sampled_shared);

  const Stats& stats() const { return stats_; }
  const V8Layout& layout() const { return l_; }
  size_t cached_functions() const { return functions_.size(); }
  // The heap bytes the caches hold (entries, strings, line tables; hash-table slack aside).
  size_t cache_bytes() const { return function_bytes_ + script_bytes_; }
  // Empties the caches: later frames are named from the heap again (and cached anew).
  void clear_caches();

 private:
  struct CachedFunction {
    uint64_t sfi = 0;
    uint64_t name_or_scope_info = 0;
    uint64_t script = 0;
    JsFunctionName name;
  };
  struct CachedScript {
    uint64_t source = 0;  // the source String the line table was computed from
    std::string name;
    std::vector<uint32_t> line_ends;  // offsets of '\n' in the source, in characters
    bool has_lines = false;           // the source was a readable sequential string
  };
  // A sequential string's characters, behind at most kMaxStringDepth thin links.
  struct SeqChars {
    uint64_t address = 0;
    uint32_t length = 0;
    bool two_byte = false;
  };

  // Budgeted reads; false once the budget is spent or a read fails.
  bool read(uint64_t address, void* out, size_t n);
  bool read_word(uint64_t address, uint64_t& out) { return read(address, &out, 8); }
  // The instance type of a tagged heap object, or -1.
  int instance_type(uint64_t tagged);
  // The field at offset of a tagged heap object.
  bool field(uint64_t tagged, int32_t offset, uint64_t& out) {
    return read_word(l_.untag(tagged) + static_cast<uint64_t>(offset), out);
  }
  bool is_string_type(int type) const;
  // A V8 String as UTF-8, at most max_bytes; nullopt when not a string or unsupported.
  std::optional<std::string> read_string(uint64_t tagged, size_t max_bytes, int depth = 0);
  std::optional<SeqChars> seq_chars(uint64_t tagged);
  // Characters [from, to) of a sequential string as ASCII ('?' for others).
  std::optional<std::string> window(const SeqChars& chars, uint32_t from, uint32_t to);
  // The name a ScopeInfo holds and the candidate (start, end) positions after it.
  bool scope_info_name(uint64_t scope_info, std::string& name,
                       std::vector<std::pair<int64_t, int64_t>>& starts);
  CachedScript* script(uint64_t script_tagged);
  // The 1-based line of the first candidate start the source confirms, 0 when none does.
  int64_t confirmed_line(uint64_t script_tagged, const CachedScript& s, const std::string& name,
                         const std::vector<std::pair<int64_t, int64_t>>& starts);
  std::optional<JsFunctionName> resolve(uint64_t function, uint64_t sampled_shared,
                                        CachedFunction& entry);
  static size_t entry_bytes(const CachedFunction& f);
  static size_t entry_bytes(const CachedScript& s);

  V8Layout l_;
  const Memory& memory_;
  uint32_t budget_ = 0;
  Stats stats_;
  std::unordered_map<uint64_t, CachedFunction> functions_;
  std::unordered_map<uint64_t, CachedScript> scripts_;
  size_t function_bytes_ = 0;  // of functions_' entries (entry_bytes)
  size_t script_bytes_ = 0;    // of scripts_' entries
};

}  // namespace sonde::agent::v8
