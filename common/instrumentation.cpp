#include "common/instrumentation.h"

#include <algorithm>
#include <array>

#include "common/json_fields.h"

namespace sonde {

// The registry, generated from the fragments (scripts/gen-crds.py --cpp).
extern const std::array<InstrumentationKind, kInstrumentationCount> kInstrumentationKinds;

namespace {

using Json = nlohmann::json;
using Parsed = Result<std::optional<InstrumentationParams>>;

}  // namespace

// A policy names a kind by an object (its parameters); the config by true/false.
Parsed parse_switch(const Json& value, ParamsSource source, const std::string& path) {
  if (source == ParamsSource::kPolicy) {
    if (!value.is_object()) return Error(path + ": must be an object");
    return std::optional<InstrumentationParams>(Json::object());
  }
  if (!value.is_boolean()) return Error(path + ": must be true or false");
  if (!value.get<bool>()) return std::optional<InstrumentationParams>();
  return std::optional<InstrumentationParams>(Json::object());
}

InstrumentationParams merge_first(const InstrumentationParams& a, const InstrumentationParams&) {
  return a;
}

Status check_keys(const Json& object, std::initializer_list<std::string_view> known,
                  const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Error(path + "." + key + ": unknown key");
    }
  }
  return ok_status();
}

Result<std::optional<int64_t>> integer_field(const Json& object, const IntegerField& f,
                                             const std::string& path) {
  if (field(object, f.key) == nullptr) return f.fallback;
  ASSIGN_OR_RETURN(const int64_t v, integer_in(object, f.key, 0, f.minimum, f.maximum, path));
  return std::optional<int64_t>(v);
}

std::span<const InstrumentationKind> instrumentation_kinds() {
  return kInstrumentationKinds;
}

const InstrumentationKind& kind_of(Instrumentation id) {
  return kInstrumentationKinds[static_cast<size_t>(id)];
}

Result<Instrumentations> parse_instrumentations(const Json& object, ParamsSource source,
                                                const std::string& path) {
  Instrumentations out;
  if (source == ParamsSource::kConfig) {
    out = config_defaults();
    if (object.is_null()) return out;
    if (!object.is_object()) return Error(path + ": must be a mapping");
    for (const auto& item : object.items()) {
      const std::string& key = item.key();
      if (std::none_of(kInstrumentationKinds.begin(), kInstrumentationKinds.end(),
                       [&](const auto& k) { return k.key == key; })) {
        return Error(path + "." + key + ": unknown key");
      }
    }
  }
  for (const auto& kind : kInstrumentationKinds) {
    const Json* value = field(object, kind.key);
    if (value == nullptr) continue;
    ASSIGN_OR_RETURN(out[kind.id], kind.parse(*value, source, path + "." + std::string(kind.key)));
  }
  return out;
}

Json to_json(const Instrumentations& requested) {
  Json out = Json::object();
  for (const auto& kind : kInstrumentationKinds) {
    if (const auto& params = requested[kind.id]) out[std::string(kind.key)] = *params;
  }
  return out;
}

Instrumentations config_defaults() {
  Instrumentations out;
  for (const auto& kind : kInstrumentationKinds) {
    if (kind.config_default) out[kind.id] = Json::object();
  }
  return out;
}

bool any_requested(const Instrumentations& requested) {
  return std::any_of(requested.values.begin(), requested.values.end(),
                     [](const auto& p) { return p.has_value(); });
}

Result<double> parse_max_overhead_percent(const nlohmann::json& value, const std::string& path) {
  if (!value.is_number()) return Error(path + ": must be a number");
  const double v = value.get<double>();
  if (!(v >= kMinOverheadPercent && v <= 100)) {
    return Error(path + ": must be 0.01..100, got " + value.dump());
  }
  return v;
}

}  // namespace sonde
