#include "common/instrumentation.h"

#include <algorithm>
#include <array>

#include "common/json_fields.h"

namespace sonde {
namespace {

using Json = nlohmann::json;
using Parsed = Result<std::optional<InstrumentationParams>>;

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

Result<std::string> string_in(const Json& object, std::string_view key, std::string fallback,
                              const std::string& path) {
  const Json* v = field(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return Error(path + "." + std::string(key) + ": must be a string");
  return v->get<std::string>();
}

// nodejsEventLoop: a policy's object, the config's true/false or object; stallThresholdMs (off
// when absent) asks for the stack of each loop turn at least that long
// (agent/cpu/stall_recorder.h).
Parsed parse_nodejs(const Json& value, ParamsSource source, const std::string& path) {
  const bool config = source == ParamsSource::kConfig;
  if (config && value.is_boolean()) {
    if (!value.get<bool>()) return std::optional<InstrumentationParams>();
    return std::optional<InstrumentationParams>(Json::object());
  }
  if (!value.is_object()) {
    return Error(path + (config ? ": must be true, false or a mapping" : ": must be an object"));
  }
  RETURN_IF_ERROR(check_keys(value, {"stallThresholdMs"}, path));
  Json params = Json::object();
  if (field(value, "stallThresholdMs") != nullptr) {
    ASSIGN_OR_RETURN(const int64_t ms,
                     integer_in(value, "stallThresholdMs", 0, NodejsParams::kMinStallThresholdMs,
                                NodejsParams::kMaxStallThresholdMs, path));
    params["stallThresholdMs"] = ms;
  }
  return std::optional<InstrumentationParams>(std::move(params));
}

// Two policies asking one process: the lower threshold (the stricter), and one when either
// sets one.
InstrumentationParams merge_nodejs(const InstrumentationParams& a, const InstrumentationParams& b) {
  const uint32_t ta = nodejs_params(a).stall_threshold_ms;
  const uint32_t tb = nodejs_params(b).stall_threshold_ms;
  if (ta == 0) return b;
  if (tb == 0) return a;
  return ta <= tb ? a : b;
}

// The config's cpu also says whether it is on (`enabled`, default off) and where to push.
Result<PyroscopeConfig> parse_pyroscope(const Json& object, const std::string& path) {
  if (!object.is_object()) return Error(path + ": must be a mapping");
  RETURN_IF_ERROR(check_keys(object, {"url", "intervalSeconds", "application"}, path));
  PyroscopeConfig py;
  ASSIGN_OR_RETURN(py.url, string_in(object, "url", py.url, path));
  ASSIGN_OR_RETURN(const int64_t interval,
                   integer_in(object, "intervalSeconds", py.interval_seconds, 5, 3600, path));
  py.interval_seconds = static_cast<uint32_t>(interval);
  ASSIGN_OR_RETURN(py.application, string_in(object, "application", py.application, path));
  if (auto st = check_pyroscope(py); !st.ok()) return Error(path + "." + st.error().message());
  return py;
}

Parsed parse_cpu(const Json& value, ParamsSource source, const std::string& path) {
  const bool config = source == ParamsSource::kConfig;
  if (!value.is_object())
    return Error(path + (config ? ": must be a mapping" : ": must be an object"));
  bool enabled = !config;
  if (config) {
    RETURN_IF_ERROR(check_keys(value, {"enabled", "frequencyHz", "pyroscope"}, path));
    if (const Json* e = field(value, "enabled")) {
      if (!e->is_boolean()) return Error(path + ".enabled: must be true or false");
      enabled = e->get<bool>();
    }
  }
  ASSIGN_OR_RETURN(const int64_t hz,
                   integer_in(value, "frequencyHz", CpuParams{}.frequency_hz, 1, 999, path));
  Json params = {{"frequencyHz", hz}};
  if (const Json* push = config ? field(value, "pyroscope") : nullptr) {
    ASSIGN_OR_RETURN(auto py, parse_pyroscope(*push, path + ".pyroscope"));
    if (!enabled) {
      return Error(path + ".pyroscope: pushes CPU profiles, but " + path + ".enabled is false");
    }
    params["pyroscope"] = {
        {"url", py.url}, {"intervalSeconds", py.interval_seconds}, {"application", py.application}};
  }
  if (!enabled) return std::optional<InstrumentationParams>();
  return std::optional<InstrumentationParams>(std::move(params));
}

// Two policies sampling one container: the higher frequency.
InstrumentationParams merge_cpu(const InstrumentationParams& a, const InstrumentationParams& b) {
  return cpu_params(a).frequency_hz >= cpu_params(b).frequency_hz ? a : b;
}

constexpr std::array<InstrumentationKind, kInstrumentationCount> kKinds = {{
    {Instrumentation::kNodejsEventLoop, "nodejsEventLoop", "nodejs", true, parse_nodejs,
     merge_nodejs},
    {Instrumentation::kGoTls, "goTLS", "gotls", true, parse_switch, merge_first},
    {Instrumentation::kCpu, "cpu", "cpu", false, parse_cpu, merge_cpu},
}};

}  // namespace

std::span<const InstrumentationKind> instrumentation_kinds() {
  return kKinds;
}

const InstrumentationKind& kind_of(Instrumentation id) {
  return kKinds[static_cast<size_t>(id)];
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
      if (std::none_of(kKinds.begin(), kKinds.end(), [&](const auto& k) { return k.key == key; })) {
        return Error(path + "." + key + ": unknown key");
      }
    }
  }
  for (const auto& kind : kKinds) {
    const Json* value = field(object, kind.key);
    if (value == nullptr) continue;
    ASSIGN_OR_RETURN(out[kind.id], kind.parse(*value, source, path + "." + std::string(kind.key)));
  }
  return out;
}

Json to_json(const Instrumentations& requested) {
  Json out = Json::object();
  for (const auto& kind : kKinds) {
    if (const auto& params = requested[kind.id]) out[std::string(kind.key)] = *params;
  }
  return out;
}

Instrumentations config_defaults() {
  Instrumentations out;
  for (const auto& kind : kKinds) {
    if (kind.config_default) out[kind.id] = Json::object();
  }
  return out;
}

bool any_requested(const Instrumentations& requested) {
  return std::any_of(requested.values.begin(), requested.values.end(),
                     [](const auto& p) { return p.has_value(); });
}

Status check_pyroscope(const PyroscopeConfig& push) {
  // The pusher takes plain http only (see agent/cpu/pyroscope_pusher.h).
  if (push.url.rfind("http://", 0) != 0 || push.url.size() == 7) {
    return Error("url: must be an http://host[:port][/prefix] URL, got \"" + push.url + "\"");
  }
  if (push.application.empty()) return Error("application: must not be empty");
  return ok_status();
}

CpuParams cpu_params(const InstrumentationParams& params) {
  CpuParams p;
  p.frequency_hz = params.value("frequencyHz", p.frequency_hz);
  if (const Json* push = field(params, "pyroscope")) {
    p.pyroscope.url = push->value("url", p.pyroscope.url);
    p.pyroscope.interval_seconds = push->value("intervalSeconds", p.pyroscope.interval_seconds);
    p.pyroscope.application = push->value("application", p.pyroscope.application);
  }
  return p;
}

Result<double> parse_max_overhead_percent(const nlohmann::json& value, const std::string& path) {
  if (!value.is_number()) return Error(path + ": must be a number");
  const double v = value.get<double>();
  if (!(v >= kMinOverheadPercent && v <= 100)) {
    return Error(path + ": must be 0.01..100, got " + value.dump());
  }
  return v;
}

NodejsParams nodejs_params(const InstrumentationParams& params) {
  NodejsParams p;
  p.stall_threshold_ms = params.value("stallThresholdMs", p.stall_threshold_ms);
  return p;
}

}  // namespace sonde
