#include "common/text.h"

#include <cstdint>

namespace sonde {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence at the start of `s` (Unicode Table 3-7), 0 if there is
// none.
size_t sequence_length(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  auto in = [&](size_t i, uint8_t lo, uint8_t hi) {
    return i < s.size() && b(i) >= lo && b(i) <= hi;
  };
  uint8_t c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;  // no surrogates
  if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) {
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  }
  if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

}  // namespace

std::string valid_utf8(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  while (!text.empty()) {
    size_t n = sequence_length(text);
    std::string_view piece = n == 0 ? kReplacement : text.substr(0, n);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    text.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  while (!text.empty()) {
    size_t n = sequence_length(text);
    if (n == 0) return false;
    text.remove_prefix(n);
  }
  return true;
}

}  // namespace sonde
