// WatchDecoder: turns the body of a watch response — newline-delimited JSON events arriving
// in chunks that need not align with event boundaries — into WatchEvents. Bytes are untrusted:
// a malformed line or an over-long one is an error value, never a crash. Not thread-safe: one
// decoder per watch stream.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>  // WatchEvent holds its object
#include <string>
#include <string_view>

#include "common/kube/resource.h"
#include "common/result.h"

namespace sonde::kube {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  // The object; for kError a metav1.Status ({"code": 410, "reason": "Expired", ...}).
  Json object;
};

const char* to_string(WatchEvent::Type type);

// Parses one event line ({"type": "...", "object": {...}}).
Result<WatchEvent> parse_watch_event(std::string_view line);

class WatchDecoder {
 public:
  // Lines longer than this are rejected: a broken or hostile server cannot make the
  // decoder buffer without bound.
  static constexpr size_t kMaxLineBytes = 64u << 20;

  // Appends bytes; calls `on_event` for each complete line, in order. Stops early when
  // `on_event` returns false (the rest of the bytes are dropped). Returns an error on a
  // malformed or over-long line.
  Status feed(std::string_view bytes, const std::function<bool(WatchEvent)>& on_event);

  // Bytes of an incomplete last line (non-zero when a connection drops mid-event).
  size_t pending_bytes() const { return partial_.size(); }

 private:
  std::string partial_;
};

}  // namespace sonde::kube
