#include "common/instrumentation.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"

namespace sonde {

// The registry, generated from the fragments (scripts/gen-crds.py --cpp).
extern const std::array<InstrumentationKind, kInstrumentationCount> kInstrumentationKinds;

namespace {

using Json = nlohmann::json;

}  // namespace

InstrumentationParams InstrumentationParams::no_params() {
  static const InstrumentationParams kShared = make(NoParams{});
  return kShared;
}

void InstrumentationParams::write_json(Json& out) const {
  if (!held_) std::abort();  // a kind not requested has no policy form
  held_->write_json(out);
}

bool InstrumentationParams::operator==(const InstrumentationParams& other) const {
  if (!held_ || !other.held_) return held_ == other.held_;
  return held_ == other.held_ || held_->equals(*other.held_);
}

void NoParams::write_json(Json& out) const {
  out = Json::object();
}

// A policy names a kind by an object (its parameters); the config by true/false.
Result<InstrumentationParams> parse_switch(const Json& value, ParamsSource source,
                                           const std::string& path) {
  if (source == ParamsSource::kPolicy) {
    if (!value.is_object()) return Error(path + ": must be an object");
    return InstrumentationParams::no_params();
  }
  if (!value.is_boolean()) return Error(path + ": must be true or false");
  if (!value.get<bool>()) return InstrumentationParams();
  return InstrumentationParams::no_params();
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
    if (const auto& params = requested[kind.id]) params.write_json(out[std::string(kind.key)]);
  }
  return out;
}

Instrumentations config_defaults() {
  Instrumentations out;
  for (const auto& kind : kInstrumentationKinds) {
    if (kind.config_default) out[kind.id] = default_params(kind.id);
  }
  return out;
}

InstrumentationParams default_params(Instrumentation kind) {
  const InstrumentationKind& k = kind_of(kind);
  // Every kind's policy form admits {}: its schema has no required property.
  auto params = k.parse(Json::object(), ParamsSource::kPolicy, std::string(k.key));
  if (!params.ok()) std::abort();
  return std::move(params).value();
}

bool any_requested(const Instrumentations& requested) {
  return std::any_of(requested.values.begin(), requested.values.end(),
                     [](const InstrumentationParams& p) { return p.has_value(); });
}

Instrumentations with_limits(Instrumentations requested, const Asker& asker) {
  for (const auto& kind : instrumentation_kinds()) {
    auto& params = requested[kind.id];
    if (params && kind.limit != nullptr) params = kind.limit(params, asker);
  }
  return requested;
}

std::string kinds_taking(uint8_t key) {
  std::string out;
  for (const auto& kind : instrumentation_kinds()) {
    if ((kind.limits & key) == 0) continue;
    if (!out.empty()) out += ", ";
    out += kind.key;
  }
  return out;
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
