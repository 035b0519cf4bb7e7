#include "common/kube/watch_decoder.h"

namespace sonde::kube {

const char* to_string(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded: return "ADDED";
    case WatchEvent::Type::kModified: return "MODIFIED";
    case WatchEvent::Type::kDeleted: return "DELETED";
    case WatchEvent::Type::kBookmark: return "BOOKMARK";
    case WatchEvent::Type::kError: return "ERROR";
  }
  return "UNKNOWN";
}

Result<WatchEvent> parse_watch_event(std::string_view line) {
  Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Error("watch event is not a JSON object");
  }
  auto type = parsed.find("type");
  auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string() || object == parsed.end() ||
      !object->is_object()) {
    return Error("watch event lacks a string \"type\" or an object \"object\"");
  }
  WatchEvent event;
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "ADDED") {
    event.type = WatchEvent::Type::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEvent::Type::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEvent::Type::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEvent::Type::kBookmark;
  } else if (name == "ERROR") {
    event.type = WatchEvent::Type::kError;
  } else {
    return Error("unknown watch event type \"" + name + "\"");
  }
  event.object = std::move(*object);
  return event;
}

Status WatchDecoder::feed(std::string_view bytes, const std::function<bool(WatchEvent)>& on_event) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      if (partial_.size() + bytes.size() > kMaxLineBytes) {
        return Error("watch event longer than " + std::to_string(kMaxLineBytes) + " bytes");
      }
      partial_.append(bytes);
      return ok_status();
    }
    std::string_view line = bytes.substr(0, newline);
    bytes.remove_prefix(newline + 1);
    std::string joined;
    if (!partial_.empty()) {
      joined = std::move(partial_);
      partial_.clear();
      joined.append(line);
      line = joined;
    }
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    ASSIGN_OR_RETURN(WatchEvent event, parse_watch_event(line));
    if (!on_event(std::move(event))) {
      partial_.clear();
      return ok_status();
    }
  }
  return ok_status();
}

}  // namespace sonde::kube
