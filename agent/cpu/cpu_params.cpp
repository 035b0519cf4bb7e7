#include "agent/cpu/cpu_params.h"

#include <nlohmann/json.hpp>

#include "common/json_fields.h"

namespace sonde {
namespace {

using Json = nlohmann::json;

Result<std::string> string_in(const Json& object, std::string_view key, std::string fallback,
                              const std::string& path) {
  const Json* v = field(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return Error(path + "." + std::string(key) + ": must be a string");
  return v->get<std::string>();
}

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

}  // namespace

Status check_pyroscope(const PyroscopeConfig& push) {
  // The pusher takes plain http only (see agent/cpu/pyroscope_pusher.h).
  if (push.url.rfind("http://", 0) != 0 || push.url.size() == 7) {
    return Error("url: must be an http://host[:port][/prefix] URL, got \"" + push.url + "\"");
  }
  if (push.application.empty()) return Error("application: must not be empty");
  return ok_status();
}

void CpuParams::write_json(Json& out) const {
  out = {{std::string(fields::cpu::kFrequencyHz.key), frequency_hz}};
}

namespace kinds {

Result<InstrumentationParams> parse_cpu(const Json& value, ParamsSource source,
                                        const std::string& path) {
  const bool config = source == ParamsSource::kConfig;
  if (!value.is_object()) {
    return Error(path + (config ? ": must be a mapping" : ": must be an object"));
  }
  bool enabled = !config;
  if (config) {
    RETURN_IF_ERROR(check_keys(value, {"enabled", "frequencyHz", "pyroscope"}, path));
    if (const Json* e = field(value, "enabled")) {
      if (!e->is_boolean()) return Error(path + ".enabled: must be true or false");
      enabled = e->get<bool>();
    }
  }
  ASSIGN_OR_RETURN(const auto hz, integer_field(value, fields::cpu::kFrequencyHz, path));
  CpuParams params;
  if (hz) params.frequency_hz = static_cast<uint32_t>(*hz);
  if (const Json* push = config ? field(value, "pyroscope") : nullptr) {
    ASSIGN_OR_RETURN(params.pyroscope, parse_pyroscope(*push, path + ".pyroscope"));
    if (!enabled) {
      return Error(path + ".pyroscope: pushes CPU profiles, but " + path + ".enabled is false");
    }
  }
  if (!enabled) return InstrumentationParams();
  return InstrumentationParams::make(std::move(params));
}

InstrumentationParams merge_cpu(const InstrumentationParams& a, const InstrumentationParams& b) {
  return a.as<CpuParams>().frequency_hz >= b.as<CpuParams>().frequency_hz ? a : b;
}

}  // namespace kinds
}  // namespace sonde
