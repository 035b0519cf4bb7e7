#include "agent/nodejs/nodejs_params.h"

namespace sonde {

using Json = nlohmann::json;
using fields::nodejs_event_loop::kStallThresholdMs;

NodejsParams nodejs_params(const InstrumentationParams& params) {
  NodejsParams p;
  p.stall_threshold_ms = params.value(kStallThresholdMs.key, p.stall_threshold_ms);
  return p;
}

namespace kinds {

Result<std::optional<InstrumentationParams>> parse_nodejs_event_loop(const Json& value,
                                                                     ParamsSource source,
                                                                     const std::string& path) {
  const bool config = source == ParamsSource::kConfig;
  if (config && value.is_boolean()) {
    if (!value.get<bool>()) return std::optional<InstrumentationParams>();
    return std::optional<InstrumentationParams>(Json::object());
  }
  if (!value.is_object()) {
    return Error(path + (config ? ": must be true, false or a mapping" : ": must be an object"));
  }
  RETURN_IF_ERROR(check_keys(value, {kStallThresholdMs.key}, path));
  ASSIGN_OR_RETURN(const auto ms, integer_field(value, kStallThresholdMs, path));
  Json params = Json::object();
  if (ms) params[std::string(kStallThresholdMs.key)] = *ms;
  return std::optional<InstrumentationParams>(std::move(params));
}

InstrumentationParams merge_nodejs_event_loop(const InstrumentationParams& a,
                                              const InstrumentationParams& b) {
  const uint32_t ta = nodejs_params(a).stall_threshold_ms;
  const uint32_t tb = nodejs_params(b).stall_threshold_ms;
  if (ta == 0) return b;
  if (tb == 0) return a;
  return ta <= tb ? a : b;
}

}  // namespace kinds
}  // namespace sonde
