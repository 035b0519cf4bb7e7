#include "common/rfc3339.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace sonde {

std::string format_rfc3339(WallTime t, int fraction_digits) {
  using std::chrono::microseconds;
  const auto micros = std::chrono::duration_cast<microseconds>(t.time_since_epoch()).count();
  auto seconds = micros / 1'000'000;
  auto fraction = micros % 1'000'000;
  if (fraction < 0) {  // before 1970: the second below, and what is left of it
    seconds -= 1;
    fraction += 1'000'000;
  }
  const auto whole = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  if (fraction_digits == 3) {
    n += static_cast<size_t>(
        std::snprintf(buf + n, sizeof buf - n, ".%03lld", static_cast<long long>(fraction / 1000)));
  } else if (fraction_digits == 6) {
    n += static_cast<size_t>(
        std::snprintf(buf + n, sizeof buf - n, ".%06lld", static_cast<long long>(fraction)));
  }
  (void)std::snprintf(buf + n, sizeof buf - n, "Z");
  return buf;
}

std::optional<WallTime> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  long offset = 0;
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 6 && rest[3] == ':') {
    const long hours = std::strtol(std::string(rest + 1, 2).c_str(), nullptr, 10);
    const long minutes = std::strtol(std::string(rest + 4, 2).c_str(), nullptr, 10);
    offset = (*rest == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    rest += 6;
  } else {
    return std::nullopt;
  }
  if (*rest != '\0') return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm) - offset);
}

}  // namespace sonde
