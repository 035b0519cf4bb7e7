// The Node.js event loop kind's parameters (spec.instrumentations.nodejsEventLoop, the config's
// instrumentations.nodejsEventLoop): parsed and merged here for the registry (the bounds come
// from nodejsEventLoop.crd.yaml), read back by the feature (InstrumentationParams::as<>()).
// Compiled into sonde_common, which the operator links too, so this folder's parameters need
// nothing else of the agent.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "common/instrumentation.h"
#include "common/result.h"

namespace sonde {

struct NodejsParams {
  // Report each loop turn at least this long with its stacks (/debug/nodejs/stalls); 0: off.
  uint32_t stall_threshold_ms = 0;

  // {stallThresholdMs} when set, else {}.
  void write_json(nlohmann::json& out) const;
  bool operator==(const NodejsParams&) const = default;
};

namespace kinds {
// A policy's object, the config's true/false or object; stallThresholdMs (off when absent) asks
// for the stack of each loop turn at least that long (agent/nodejs/stall_recorder.h).
Result<InstrumentationParams> parse_nodejs_event_loop(const nlohmann::json& value,
                                                      ParamsSource source, const std::string& path);
// Two policies asking one process: the lower threshold (the stricter), and one when either sets
// one.
InstrumentationParams merge_nodejs_event_loop(const InstrumentationParams& a,
                                              const InstrumentationParams& b);
}  // namespace kinds

}  // namespace sonde
