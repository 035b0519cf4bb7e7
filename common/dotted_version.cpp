#include "common/dotted_version.h"

#include <charconv>

namespace sonde {

std::optional<DottedVersion> parse_dotted_version(std::string_view text) {
  DottedVersion v;
  const char* p = text.data();
  const char* end = p + text.size();
  auto number = [&](int& out) {
    auto [next, ec] = std::from_chars(p, end, out);
    if (ec != std::errc()) return false;
    p = next;
    return true;
  };
  if (!number(v.major) || p == end || *p != '.') return std::nullopt;
  ++p;
  if (!number(v.minor)) return std::nullopt;
  if (p != end && *p == '.') {
    ++p;
    if (!number(v.patch)) v.patch = 0;
  }
  return v;
}

}  // namespace sonde
