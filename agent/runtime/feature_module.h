// FeatureModule: what a feature folder gives the agent beside its Feature: the flags it takes on
// both modes' command lines and the checks it adds to `sonde-agent doctor`, each in its folder.
// The composition root (agent/assembly/agent_parts.cpp) holds one module per feature and builds
// the features from them, so the command lines and the doctor name no feature.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "agent/runtime/node_check.h"
#include "common/instrumentation.h"
#include "common/result.h"

namespace CLI {
class App;
}

namespace sonde::kube {
class ApiClient;
}

namespace sonde::agent {

// The pod `namespace/name` as the agent's pod informer has it, nullptr when unknown.
using PodLookup = std::function<std::shared_ptr<const nlohmann::json>(const std::string& key)>;

// How the agent runs, which features adapt to.
struct AgentMode {
  // In-cluster, policies choose per container: every feature loads, a selected process stands
  // for its container (its cgroup), and a feature the node cannot run reports the processes
  // selected for it failed (the policies' status) instead of failing the start.
  bool in_cluster = false;
  // Standalone, what the config asks: a kind loads when it asks for it, with these parameters.
  Instrumentations config;
  bool config_selects_all = false;  // the config names no target: every process on the host
  // In-cluster, for a feature's Kubernetes Events on pods: the agent's API client (it outlives
  // the features) and its pods; null and empty standalone.
  kube::ApiClient* api = nullptr;
  PodLookup pod;

  // Whether the feature of `kind` loads at all.
  bool loads(Instrumentation kind) const { return in_cluster || config[kind].has_value(); }
};

class FeatureModule {
 public:
  virtual ~FeatureModule() = default;
  // Its flags; their values stay in the module. `in_cluster`: for `sonde-agent --cluster`.
  virtual void add_flags(CLI::App& /*app*/, bool /*in_cluster*/) {}
  // After the command line is parsed: what its flags together get wrong, the message naming
  // the flag without its leading "--" ("pyroscope-url: ...").
  virtual Status check_flags() const { return ok_status(); }
  // Its own checks for `sonde-agent doctor` (node_check.h).
  virtual std::vector<Check> node_checks() const { return {}; }
  // `sonde-agent doctor --binary PATH`: whether it tells what it would do with an executable.
  virtual bool explains_binaries() const { return false; }
  // What it would do with the executable at `path`, from the file alone (no process, no
  // kernel): lines for the table (`text`, each ending in a newline) and an object (`json`).
  // An error when the file cannot be read.
  virtual Status explain_binary(const std::string& /*path*/, std::string& /*text*/,
                                nlohmann::json& /*json*/) const {
    return ok_status();
  }
};

}  // namespace sonde::agent
