// Structured logging: one line per event on stderr, logfmt (`ts=... level=info msg="..." k=v`)
// by default or JSON objects with --log-format=json. Thread-safe; a line is written with one
// write(2) so lines from different threads never interleave.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace sonde::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class Format { kLogfmt, kJson };

// A key=value pair. Numbers keep their type in JSON output.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v), quoted(true) {}
  Field(std::string_view k, const char* v) : key(k), value(v), quoted(true) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v), quoted(true) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), quoted(false) {}
  template <typename N, typename = std::enable_if_t<std::is_arithmetic_v<N>>>
  Field(std::string_view k, N v) : key(k), value(std::to_string(v)), quoted(false) {}

  std::string_view key;
  std::string value;
  bool quoted;  // strings are quoted in JSON; numbers and booleans are not
};

void set_level(Level level);
void set_format(Format format);
bool enabled(Level level);

// Parses "debug", "info", "warn", "error"; nullopt otherwise.
std::optional<Level> parse_level(std::string_view name);

// Formats one line without the trailing newline (exposed for tests).
std::string format_line(Format format, Level level, std::string_view msg,
                        std::initializer_list<Field> fields);

void write(Level level, std::string_view msg, std::initializer_list<Field> fields);

inline void debug(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (enabled(Level::kDebug)) write(Level::kDebug, msg, fields);
}
inline void info(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (enabled(Level::kInfo)) write(Level::kInfo, msg, fields);
}
inline void warn(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (enabled(Level::kWarn)) write(Level::kWarn, msg, fields);
}
inline void error(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (enabled(Level::kError)) write(Level::kError, msg, fields);
}

}  // namespace sonde::log
