#include "common/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>

#include "common/files.h"
#include "common/log.h"

namespace sonde {
namespace {

// Walks a YAML mapping, remembering the key path for error messages and rejecting keys the
// schema does not know.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  Status check(const std::set<std::string>& known) const {
    if (!node_.IsMap()) return Error(where("") + "must be a mapping");
    for (const auto& kv : node_) {
      auto key = kv.first.as<std::string>();
      if (!known.count(key)) return Error(where(key) + "unknown key");
    }
    return ok_status();
  }

  Status get_string(const std::string& key, std::string& out) const {
    auto v = node_[key];
    if (!v) return ok_status();
    if (!v.IsScalar()) return Error(where(key) + "must be a string");
    out = v.as<std::string>();
    return ok_status();
  }

  Status get_bool(const std::string& key, bool& out) const {
    auto v = node_[key];
    if (!v) return ok_status();
    bool b = false;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
      return Error(where(key) + "must be true or false");
    }
    out = b;
    return ok_status();
  }

  Status get_uint(const std::string& key, uint32_t lo, uint32_t hi, uint32_t& out) const {
    auto v = node_[key];
    if (!v) return ok_status();
    long long n = 0;
    if (!v.IsScalar() || !YAML::convert<long long>::decode(v, n)) {
      return Error(where(key) + "must be an integer");
    }
    if (n < lo || n > hi) {
      return Error(where(key) + "must be " + std::to_string(lo) + ".." + std::to_string(hi) +
                   ", got " + std::to_string(n));
    }
    out = static_cast<uint32_t>(n);
    return ok_status();
  }

  YAML::Node child(const std::string& key) const { return node_[key]; }
  const std::string& path() const { return path_; }
  std::string child_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

 private:
  std::string where(const std::string& key) const {
    auto p = key.empty() ? path_ : child_path(key);
    return (p.empty() ? std::string("(top level)") : p) + ": ";
  }

  YAML::Node node_;
  std::string path_;
};

bool looks_like_hex_prefix(const std::string& s) {
  if (s.size() < 12 || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Status parse_targets(const MapReader& top, std::vector<ProcessTarget>& out) {
  auto node = top.child("targets");
  if (!node || node.IsNull()) return ok_status();
  if (!node.IsSequence()) return Error("targets: must be a list");
  for (size_t i = 0; i < node.size(); ++i) {
    MapReader r(node[i], "targets[" + std::to_string(i) + "]");
    RETURN_IF_ERROR(r.check({"exe", "containerId"}));
    ProcessTarget t;
    RETURN_IF_ERROR(r.get_string("exe", t.exe_glob));
    RETURN_IF_ERROR(r.get_string("containerId", t.container_id));
    if (t.exe_glob.empty() && t.container_id.empty()) {
      return Error(r.path() + ": needs exe or containerId");
    }
    if (!t.container_id.empty() && !looks_like_hex_prefix(t.container_id)) {
      return Error(r.child_path("containerId") + ": must be 12 to 64 hex digits");
    }
    out.push_back(std::move(t));
  }
  return ok_status();
}

// The config as JSON, for the parsers it shares with policies. A plain scalar is what YAML's core
// schema makes of it (a boolean, an integer, a number), a quoted one stays a string.
nlohmann::json to_json(const YAML::Node& node) {
  if (!node.IsDefined()) return nullptr;  // an absent key
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      auto out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      auto out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      if (node.Tag() == "?") {
        bool b = false;
        if (YAML::convert<bool>::decode(node, b)) return b;
        long long n = 0;
        if (YAML::convert<long long>::decode(node, n)) return n;
        double d = 0;
        if (YAML::convert<double>::decode(node, d)) return d;
      }
      return node.as<std::string>();
    }
    default: return nullptr;
  }
}

Result<AgentConfig> parse_root(const YAML::Node& root) {
  AgentConfig cfg;
  if (!root || root.IsNull()) return cfg;  // an empty file means all defaults
  MapReader top(root, "");
  RETURN_IF_ERROR(top.check(
      {"metricsAddress", "logLevel", "symbolCache", "targets", "instrumentations", "limits"}));
  RETURN_IF_ERROR(top.get_string("metricsAddress", cfg.metrics_address));
  if (cfg.metrics_address.find(':') == std::string::npos) {
    return Error("metricsAddress: must be host:port, got \"" + cfg.metrics_address + "\"");
  }
  RETURN_IF_ERROR(top.get_string("logLevel", cfg.log_level));
  if (!log::parse_level(cfg.log_level)) {
    return Error("logLevel: must be debug, info, warn or error, got \"" + cfg.log_level + "\"");
  }
  auto cache = top.child("symbolCache");
  if (cache && !cache.IsNull()) {
    MapReader c(cache, "symbolCache");
    RETURN_IF_ERROR(c.check({"maxEntries"}));
    RETURN_IF_ERROR(c.get_uint("maxEntries", 16, 1u << 20, cfg.symbol_cache_entries));
  }
  RETURN_IF_ERROR(parse_targets(top, cfg.targets));
  ASSIGN_OR_RETURN(cfg.instrumentations,
                   parse_instrumentations(to_json(top.child("instrumentations")),
                                          ParamsSource::kConfig, "instrumentations"));
  if (auto limits = top.child("limits"); limits && !limits.IsNull()) {
    MapReader l(limits, "limits");
    RETURN_IF_ERROR(l.check({"maxOverheadPercent"}));
    if (auto pct = l.child("maxOverheadPercent"); pct && !pct.IsNull()) {
      ASSIGN_OR_RETURN(cfg.max_overhead_percent,
                       parse_max_overhead_percent(to_json(pct), "limits.maxOverheadPercent"));
      const bool taken = std::ranges::any_of(instrumentation_kinds(), [&cfg](const auto& kind) {
        return (kind.limits & LimitKey::kMaxOverheadPercent) != 0 &&
               cfg.instrumentations[kind.id].has_value();
      });
      if (!taken) {
        return Error("limits.maxOverheadPercent: budgets the probes of instrumentations " +
                     kinds_taking(LimitKey::kMaxOverheadPercent) +
                     ", which the config does not enable");
      }
    }
  }
  return cfg;
}

}  // namespace

Result<AgentConfig> parse_agent_config(const std::string& yaml, const std::string& origin) {
  try {
    auto result = parse_root(YAML::Load(yaml));
    if (!result.ok()) return result.error().wrap(origin);
    return result;
  } catch (const YAML::Exception& e) {
    return Error(origin + ": invalid YAML: " + e.what());
  }
}

Result<AgentConfig> load_agent_config(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return errno_error("open config " + path, text.error().code());
  return parse_agent_config(*text, path);
}

}  // namespace sonde
