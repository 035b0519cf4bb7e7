#include "agent/nodejs/nodejs_params.h"

#include <nlohmann/json.hpp>

namespace sonde {

using Json = nlohmann::json;
using fields::nodejs_event_loop::kStallThresholdMs;

void NodejsParams::write_json(Json& out) const {
  out = Json::object();
  if (stall_threshold_ms != 0) out[std::string(kStallThresholdMs.key)] = stall_threshold_ms;
}

namespace kinds {

Result<InstrumentationParams> parse_nodejs_event_loop(const Json& value, ParamsSource source,
                                                      const std::string& path) {
  const bool config = source == ParamsSource::kConfig;
  if (config && value.is_boolean()) {
    if (!value.get<bool>()) return InstrumentationParams();
    return InstrumentationParams::make(NodejsParams{});
  }
  if (!value.is_object()) {
    return Error(path + (config ? ": must be true, false or a mapping" : ": must be an object"));
  }
  RETURN_IF_ERROR(check_keys(value, {kStallThresholdMs.key}, path));
  ASSIGN_OR_RETURN(const auto ms, integer_field(value, kStallThresholdMs, path));
  NodejsParams params;
  if (ms) params.stall_threshold_ms = static_cast<uint32_t>(*ms);
  return InstrumentationParams::make(params);
}

InstrumentationParams merge_nodejs_event_loop(const InstrumentationParams& a,
                                              const InstrumentationParams& b) {
  const uint32_t ta = a.as<NodejsParams>().stall_threshold_ms;
  const uint32_t tb = b.as<NodejsParams>().stall_threshold_ms;
  if (ta == 0) return b;
  if (tb == 0) return a;
  return ta <= tb ? a : b;
}

}  // namespace kinds
}  // namespace sonde
