// The agent's composition root: which features exist and how each is built, for both modes
// (`--standalone`, `--cluster`) and `sonde-agent doctor`. The runtime (agent/runtime/) knows
// features only through Feature, the command lines and the doctor only through AgentFeatures;
// this is the one place that names them (and the order they start in).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "agent/nodejs/stall_ring.h"
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
  // order.
  std::vector<NodeChecks> node_checks() const;

  // What AgentRuntime::start() builds the agent from: the kernel's process events and the
  // features `mode` loads, in start order. `on_stall`: called for each long event-loop turn
  // recorded (cluster mode: an Event on the pod), on the stall recorder's thread; may be empty.
  PartsFactory parts(AgentMode mode, std::function<void(const Stall&)> on_stall = {}) const;

 private:
  struct Modules;
  std::shared_ptr<Modules> modules_;  // shared with the factory parts() returns
};

}  // namespace sonde::agent
