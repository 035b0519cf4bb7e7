#include "agent/v8/v8_heap.h"

#include <algorithm>
#include <cstring>

namespace sonde::agent::v8 {
namespace {

// Window of source before a start position searched for the function's name.
constexpr uint32_t kNameWindow = 128;
// ScopeInfo slots read after the context locals: the name and position info lie within them.
constexpr int kScopeInfoSlots = 24;
constexpr int64_t kMaxContextLocals = 64;
constexpr size_t kSourceChunk = 64 << 10;

bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

// Whether `word` occurs in text as a whole identifier.
bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !is_ident(text[at - 1]);
    const size_t end = at + word.size();
    const bool right = end >= text.size() || !is_ident(text[end]);
    if (left && right) return true;
  }
  return false;
}

// A string's heap allocation (none while it fits the small-string buffer).
size_t heap_bytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

// One hash-map node: the entry, its key, the next pointer and the cached hash.
template <typename Entry>
constexpr size_t kNodeBytes = sizeof(Entry) + 3 * sizeof(uint64_t);

void append_utf8(std::string& out, uint16_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xe0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

}  // namespace

bool V8Namer::read(uint64_t address, void* out, size_t n) {
  if (budget_ == 0) return false;
  --budget_;
  return memory_.read(address, std::span<uint8_t>(static_cast<uint8_t*>(out), n));
}

int V8Namer::instance_type(uint64_t tagged) {
  if (!l_.is_heap_object(tagged)) return -1;
  uint64_t map = 0;
  if (!field(tagged, l_.heap_object_map, map) || !l_.is_heap_object(map)) return -1;
  uint16_t type = 0;
  if (!read(l_.untag(map) + static_cast<uint64_t>(l_.map_instance_type), &type, sizeof type)) {
    return -1;
  }
  return type;
}

bool V8Namer::is_string_type(int type) const {
  return type >= 0 && type < l_.first_nonstring_type &&
         (type & l_.is_not_string_mask) == l_.string_tag;
}

std::optional<std::string> V8Namer::read_string(uint64_t tagged, size_t max_bytes, int depth) {
  if (depth > kMaxStringDepth) return std::nullopt;
  const int type = instance_type(tagged);
  if (!is_string_type(type)) return std::nullopt;
  const int repr = type & l_.string_representation_mask;
  if (repr == l_.cons_string_tag) {
    uint64_t first = 0;
    uint64_t second = 0;
    if (!field(tagged, l_.cons_first, first) || !field(tagged, l_.cons_second, second)) {
      return std::nullopt;
    }
    auto a = read_string(first, max_bytes, depth + 1);
    if (!a) return std::nullopt;
    auto b = read_string(second, max_bytes - std::min(max_bytes, a->size()), depth + 1);
    if (!b) return std::nullopt;
    *a += *b;
    if (a->size() > max_bytes) return std::nullopt;
    return a;
  }
  auto chars = seq_chars(tagged);
  if (!chars || chars->length > max_bytes) return std::nullopt;
  std::string out;
  if (!chars->two_byte) {
    out.resize(chars->length);
    if (chars->length > 0 && !read(chars->address, out.data(), out.size())) return std::nullopt;
    return out;
  }
  std::vector<uint16_t> units(chars->length);
  if (!units.empty() && !read(chars->address, units.data(), units.size() * 2)) {
    return std::nullopt;
  }
  for (uint16_t u : units) append_utf8(out, u);
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

std::optional<V8Namer::SeqChars> V8Namer::seq_chars(uint64_t tagged) {
  for (int depth = 0; depth <= kMaxStringDepth; ++depth) {
    const int type = instance_type(tagged);
    if (!is_string_type(type)) return std::nullopt;
    const int repr = type & l_.string_representation_mask;
    if (repr == l_.thin_string_tag) {
      if (!field(tagged, l_.thin_actual, tagged)) return std::nullopt;
      continue;
    }
    if (repr != l_.seq_string_tag) return std::nullopt;  // cons, sliced, external
    int32_t length = 0;
    if (!read(l_.untag(tagged) + static_cast<uint64_t>(l_.string_length), &length, sizeof length) ||
        length < 0) {
      return std::nullopt;
    }
    const int encoding = type & l_.string_encoding_mask;
    if (encoding != l_.one_byte_string_tag && encoding != l_.two_byte_string_tag) {
      return std::nullopt;
    }
    const bool two = encoding == l_.two_byte_string_tag;
    return SeqChars{l_.untag(tagged) +
                        static_cast<uint64_t>(two ? l_.seq_two_byte_chars : l_.seq_one_byte_chars),
                    static_cast<uint32_t>(length), two};
  }
  return std::nullopt;
}

std::optional<std::string> V8Namer::window(const SeqChars& chars, uint32_t from, uint32_t to) {
  to = std::min(to, chars.length);
  if (from >= to) return std::string();
  std::string out(to - from, '\0');
  if (!chars.two_byte) {
    if (!read(chars.address + from, out.data(), out.size())) return std::nullopt;
    return out;
  }
  std::vector<uint16_t> units(to - from);
  if (!read(chars.address + 2 * uint64_t{from}, units.data(), units.size() * 2)) {
    return std::nullopt;
  }
  for (size_t i = 0; i < units.size(); ++i) {
    out[i] = units[i] < 0x80 ? static_cast<char>(units[i]) : '?';
  }
  return out;
}

bool V8Namer::scope_info_name(uint64_t scope_info, std::string& name,
                              std::vector<std::pair<int64_t, int64_t>>& starts) {
  // Fields follow the map word, one tagged slot each (ScopeInfo is a HeapObject since V8 9.1).
  const uint64_t slots = l_.untag(scope_info) + static_cast<uint64_t>(l_.heap_object_map) + 8;
  uint64_t count_word = 0;
  if (!read_word(slots + 8 * static_cast<uint64_t>(l_.scope_info_context_local_count),
                 count_word) ||
      !l_.is_smi(count_word)) {
    return false;
  }
  const int64_t locals = l_.smi_value(count_word);
  if (locals < 0 || locals > kMaxContextLocals) return false;
  // The context locals' names and their infos come first; what follows holds the function's
  // name (or its inferred name) as the first heap object, then Smi position pairs.
  const uint64_t first = slots + 8 * static_cast<uint64_t>(l_.scope_info_first_vars + 2 * locals);
  // The object's size is not published: a small ScopeInfo at the end of a mapping would fail a
  // long read, so shorter ones are tried.
  uint64_t words[kScopeInfoSlots] = {};
  int count = kScopeInfoSlots;
  while (!read(first, words, sizeof(uint64_t) * static_cast<size_t>(count))) {
    if (count <= kScopeInfoSlots / 4) return false;
    count /= 2;
  }
  int at = 0;
  for (; at < count && !l_.is_heap_object(words[at]); ++at) {
  }
  name.clear();
  if (at < count) {
    auto s = read_string(words[at], kMaxNameBytes);
    if (s) name = *s;  // not a string (undefined, an outer ScopeInfo): V8 has no name for it
  }
  // Position pairs: in V8 < 12.8 after the name (its slot index, a Smi, follows it: pairs start
  // one slot later), since then among the fixed slots before the locals. Both are candidates;
  // the source decides (confirmed_line).
  auto pairs = [&](const uint64_t* w, int from, int count) {
    for (int i = from; i < count; ++i) {
      if (l_.is_smi(w[i - 1]) && l_.is_smi(w[i])) {
        const int64_t a = l_.smi_value(w[i - 1]);
        const int64_t b = l_.smi_value(w[i]);
        if (a >= 0 && a < b) starts.push_back({a, b});
      }
    }
  };
  pairs(words, name.empty() ? 1 : at + 2, count);
  uint64_t head[kScopeInfoSlots] = {};
  const int fixed = std::min(l_.scope_info_first_vars, kScopeInfoSlots);
  if (fixed > l_.scope_info_context_local_count + 2 &&
      read(slots, head, sizeof(uint64_t) * static_cast<size_t>(fixed))) {
    // Slots up to the local count are flags and counts, not positions.
    pairs(head, l_.scope_info_context_local_count + 2, fixed);
  }
  return true;
}

V8Namer::CachedScript* V8Namer::script(uint64_t script_tagged) {
  uint64_t source = 0;
  if (!field(script_tagged, l_.script_source, source)) return nullptr;
  auto it = scripts_.find(script_tagged);
  if (it != scripts_.end() && it->second.source == source) return &it->second;
  if (it != scripts_.end()) {
    script_bytes_ -= entry_bytes(it->second);
  } else if (scripts_.size() >= kMaxCachedScripts) {
    scripts_.clear();
    script_bytes_ = 0;
  }
  CachedScript s;
  s.source = source;
  uint64_t name = 0;
  if (field(script_tagged, l_.script_name, name)) {
    if (auto n = read_string(name, kMaxPathBytes)) s.name = *n;
  }
  if (auto chars = seq_chars(source); chars && chars->length <= kMaxSourceBytes) {
    // Read in chunks outside the per-frame budget: once per script, bounded by kMaxSourceBytes.
    const size_t unit = chars->two_byte ? 2 : 1;
    std::vector<uint8_t> chunk(kSourceChunk);
    bool ok = true;
    for (uint32_t at = 0; at < chars->length && ok; at += kSourceChunk / unit) {
      const uint32_t n = std::min<uint32_t>(chars->length - at, kSourceChunk / unit);
      ok = memory_.read(chars->address + uint64_t{at} * unit,
                        std::span<uint8_t>(chunk.data(), size_t{n} * unit));
      for (uint32_t i = 0; ok && i < n; ++i) {
        const uint16_t c =
            unit == 1
                ? chunk[i]
                : static_cast<uint16_t>(chunk[size_t{2} * i] | (chunk[size_t{2} * i + 1] << 8));
        if (c == '\n') {
          if (s.line_ends.size() >= kMaxLines) {
            ok = false;
            break;
          }
          s.line_ends.push_back(at + i);
        }
      }
    }
    s.has_lines = ok;
    if (!ok) s.line_ends = {};
    s.line_ends.shrink_to_fit();
  }
  script_bytes_ += entry_bytes(s);
  return &(scripts_[script_tagged] = std::move(s));
}

int64_t V8Namer::confirmed_line(uint64_t script_tagged, const CachedScript& s,
                                const std::string& name,
                                const std::vector<std::pair<int64_t, int64_t>>& starts) {
  if (!s.has_lines || starts.empty()) return 0;
  uint64_t source = 0;
  if (!field(script_tagged, l_.script_source, source) || source != s.source) return 0;
  auto chars = seq_chars(source);
  if (!chars) return 0;
  for (const auto& [start, end] : starts) {
    if (end > chars->length) continue;
    const auto p = static_cast<uint32_t>(start);
    auto text = window(*chars, p > kNameWindow ? p - kNameWindow : 0, p + 1);
    if (!text || text->empty()) continue;
    const char at = text->back();
    // A function's start position is its parameter list, or a lone arrow parameter; a named
    // one has its name shortly before, an anonymous one must end in a '}' where V8 says.
    if (at != '(' && !is_ident(at)) continue;
    if (name.empty()) {
      auto last = window(*chars, static_cast<uint32_t>(end) - 1, static_cast<uint32_t>(end));
      if (at != '(' || !last || *last != "}") continue;
    } else if (!has_word(text->substr(0, text->size() - 1), name)) {
      continue;
    }
    const auto line = std::lower_bound(s.line_ends.begin(), s.line_ends.end(), p);
    return static_cast<int64_t>(line - s.line_ends.begin()) + 1;
  }
  return 0;
}

std::optional<JsFunctionName> V8Namer::resolve(uint64_t function, uint64_t sampled_shared,
                                               CachedFunction& entry) {
  if (instance_type(function) != l_.type_js_function) {
    ++stats_.not_function;
    return std::nullopt;
  }
  uint64_t sfi = 0;
  if (!field(function, l_.js_function_shared, sfi) ||
      instance_type(sfi) != l_.type_shared_function_info) {
    ++stats_.inconsistent;
    return std::nullopt;
  }
  if (sfi != sampled_shared) {
    ++stats_.moved;
    return std::nullopt;
  }
  uint64_t nosi = 0;
  uint64_t script_word = 0;
  if (!field(sfi, l_.sfi_name_or_scope_info, nosi) ||
      !field(sfi, l_.sfi_script_or_debug_info, script_word)) {
    ++stats_.inconsistent;
    return std::nullopt;
  }
  if (entry.sfi == sfi && entry.name_or_scope_info == nosi && entry.script == script_word &&
      !entry.name.function.empty()) {
    ++stats_.cache_hits;
    return entry.name;
  }
  JsFunctionName out;
  std::string name;
  std::vector<std::pair<int64_t, int64_t>> starts;
  bool name_from_scope_info = false;
  if (l_.is_smi(nosi)) {
    name.clear();  // V8's "no shared name" sentinel
  } else if (const int type = instance_type(nosi); is_string_type(type)) {
    auto s = read_string(nosi, kMaxNameBytes);
    if (!s) {
      ++stats_.inconsistent;
      return std::nullopt;
    }
    name = *s;
  } else if (type == l_.type_scope_info) {
    if (!scope_info_name(nosi, name, starts)) {
      ++stats_.inconsistent;
      return std::nullopt;
    }
    name_from_scope_info = true;
  } else {
    ++stats_.inconsistent;
    return std::nullopt;
  }
  if (instance_type(script_word) == l_.type_script) {
    if (CachedScript* s = script(script_word)) {
      out.script = s->name;
      out.line = confirmed_line(script_word, *s, name, starts);
    }
  }
  // A name found in a ScopeInfo by position is trusted only when the source confirms it.
  if (name_from_scope_info && out.line == 0) {
    ++stats_.inconsistent;
    return std::nullopt;
  }
  if (budget_ == 0) {
    ++stats_.over_budget;
    return std::nullopt;
  }
  if (out.line == 0) ++stats_.no_line;
  out.function = name.empty() ? "(anonymous)" : name;
  auto cached = functions_.find(function);
  if (cached != functions_.end()) {
    function_bytes_ -= entry_bytes(cached->second);
  } else if (functions_.size() >= kMaxCachedFunctions) {
    functions_.clear();
    function_bytes_ = 0;
  }
  CachedFunction& slot = functions_[function];
  slot = {sfi, nosi, script_word, out};
  function_bytes_ += entry_bytes(slot);
  return out;
}

size_t V8Namer::entry_bytes(const CachedFunction& f) {
  return kNodeBytes<CachedFunction> + heap_bytes(f.name.function) + heap_bytes(f.name.script);
}

size_t V8Namer::entry_bytes(const CachedScript& s) {
  return kNodeBytes<CachedScript> + heap_bytes(s.name) + s.line_ends.capacity() * sizeof(uint32_t);
}

void V8Namer::clear_caches() {
  functions_.clear();
  scripts_.clear();
  function_bytes_ = 0;
  script_bytes_ = 0;
}

std::optional<JsFunctionName> V8Namer::name(uint64_t function, uint64_t context_or_type,
                                            uint64_t sampled_shared) {
  budget_ = kMaxReadsPerFrame;
  if (l_.is_smi(context_or_type)) {
    ++stats_.typed_frame;
    return std::nullopt;
  }
  CachedFunction empty;
  auto it = functions_.find(function);
  auto out = resolve(function, sampled_shared, it == functions_.end() ? empty : it->second);
  if (out) ++stats_.named;
  return out;
}

}  // namespace sonde::agent::v8
