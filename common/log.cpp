#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/text.h"

namespace sonde::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<int> g_format{static_cast<int>(Format::kLogfmt)};

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "unknown";
}

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      static_cast<int>(ms.count()));
  return buf;
}

// JSON string escaping; also used for logfmt values that need quoting. Fields may carry text
// from processes (paths, names): bytes that are not UTF-8 become U+FFFD.
void append_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : valid_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          (void)std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

bool needs_logfmt_quotes(std::string_view s) {
  if (s.empty()) return true;
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  }
  return false;
}

void append_logfmt(std::string& out, std::string_view key, std::string_view value) {
  out += ' ';
  out += key;
  out += '=';
  if (needs_logfmt_quotes(value)) {
    out += '"';
    append_escaped(out, value);
    out += '"';
  } else {
    out += value;
  }
}

void append_json(std::string& out, std::string_view key, std::string_view value, bool quoted) {
  out += ",\"";
  append_escaped(out, key);
  out += "\":";
  if (quoted) {
    out += '"';
    append_escaped(out, value);
    out += '"';
  } else {
    out += value;
  }
}

}  // namespace

void set_level(Level level) {
  g_level.store(static_cast<int>(level));
}
void set_format(Format format) {
  g_format.store(static_cast<int>(format));
}
bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load();
}

std::optional<Level> parse_level(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

std::string format_line(Format format, Level level, std::string_view msg,
                        std::initializer_list<Field> fields) {
  std::string out;
  out.reserve(128);
  if (format == Format::kJson) {
    out += "{\"ts\":\"" + timestamp() + "\",\"level\":\"" + level_name(level) + "\",\"msg\":\"";
    append_escaped(out, msg);
    out += '"';
    for (const auto& f : fields) append_json(out, f.key, f.value, f.quoted);
    out += '}';
  } else {
    out += "ts=" + timestamp() + " level=" + level_name(level);
    append_logfmt(out, "msg", msg);
    for (const auto& f : fields) append_logfmt(out, f.key, f.value);
  }
  return out;
}

void write(Level level, std::string_view msg, std::initializer_list<Field> fields) {
  std::string line = format_line(static_cast<Format>(g_format.load()), level, msg, fields) + "\n";
  // One write(2) per line keeps lines whole across threads; a short write to stderr is ignored.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace sonde::log
