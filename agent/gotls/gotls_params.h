// The Go TLS kind's parameters (spec.instrumentations.goTLS, the config's
// instrumentations.goTLS). Its own object has no keys: what it takes comes from whoever asks, a
// policy's spec.limits (maxUprobesPerNode, maxOverheadPercent) or the config's
// limits.maxOverheadPercent (goTLS.crd.yaml's `limits`), which with_limits() puts in
// (kinds::limit_go_tls) before the policies asking one container are merged here. Read back by
// the feature (InstrumentationParams::as<GoTlsParams>()). Compiled into sonde_common, which the
// operator links too, so this folder's parameters need nothing else of the agent.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "common/instrumentation.h"
#include "common/result.h"

namespace sonde {

// A Go TLS overhead budget (limits.maxOverheadPercent) for a container's processes: the
// estimated CPU the probes add to the container, in percent of its own CPU time, above which the
// feature detaches them.
struct OverheadBudget {
  double max_percent = 0;  // the strictest of the policies that set one
  // Which policies at which generations set it ("ns/name@7,..."; "config"): a change re-attaches
  // a container detached for going over (the policy changed).
  std::string epoch;
  bool operator==(const OverheadBudget&) const = default;
};

struct GoTlsParams {
  // Each policy asking Go TLS of the process (cluster mode), as sonde_policy_selection names it
  // ("shop/web"), → its limits.maxUprobesPerNode.
  std::map<std::string, int64_t> uprobe_limits;
  // Set when a policy asking Go TLS of the process, or the config, has limits.maxOverheadPercent.
  std::optional<OverheadBudget> overhead_budget;

  // The policy form, {}: the limits are the policy's, not this object's.
  void write_json(nlohmann::json& out) const;
  bool operator==(const GoTlsParams&) const = default;
};

namespace kinds {
// A policy's object, the config's true/false (as a kind without parameters).
Result<InstrumentationParams> parse_go_tls(const nlohmann::json& value, ParamsSource source,
                                           const std::string& path);
// Two policies asking one process: each one's uprobe limit, and the stricter budget, under an
// epoch naming both.
InstrumentationParams merge_go_tls(const InstrumentationParams& a, const InstrumentationParams& b);
// What `asker` asks with its limits: its maxUprobesPerNode (a policy's) under its name, its
// maxOverheadPercent as a budget whose epoch names it and its generation ("shop/web@7", "config").
InstrumentationParams limit_go_tls(const InstrumentationParams& asked, const Asker& asker);
}  // namespace kinds

}  // namespace sonde
