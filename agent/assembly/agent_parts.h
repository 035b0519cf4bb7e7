// The agent's composition root: which features exist and how each is built, for both modes
// (`--standalone`, `--cluster`) and `sonde-agent doctor`. The runtime (agent/runtime/) knows
// features only through Feature, the command lines and the doctor only through AgentFeatures;
// this is the one place that names them (and the order they start in).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/feature_module.h"
#include "common/result.h"

namespace sonde::agent {

// Every feature's module (feature_module.h): its flags, its doctor checks and how it is built.
// Add the flags and parse the command line before parts(); the factory keeps what they set.
class AgentFeatures {
 public:
  AgentFeatures();

  // Every feature's own flags, on a mode's command line.
  void add_flags(CLI::App& app, bool in_cluster);
  // After parsing: the first feature's complaint about its flags ("pyroscope-url: ...").
  Status check_flags() const;
  // Every feature's checks for `sonde-agent doctor` (DoctorOptions::feature_checks), in start
  // order; valid while this object lives.
  std::vector<NodeChecks> node_checks() const;
  // `sonde-agent doctor --binary PATH`: what the features that explain binaries would do with
  // the file (FeatureModule::explain_binary()): their lines, and their object (an array of
  // their objects when several explain binaries). An error: the file cannot be read.
  Status explain_binary(const std::string& path, std::string& text, nlohmann::json& json) const;

  // What AgentRuntime::start() builds the agent from: the kernel's process events and the
  // features `mode` loads, in start order.
  PartsFactory parts(AgentMode mode) const;

 private:
  struct Modules;
  std::shared_ptr<Modules> modules_;  // shared with the factory parts() returns
};

}  // namespace sonde::agent
