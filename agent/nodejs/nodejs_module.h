// NodejsModule: the Node.js event-loop feature's part of the agent's start (FeatureModule): its
// flags (--wait-source, --nodejs-metrics), its doctor checks (nodejs_doctor.cpp: which wait hook
// the kernel takes here and what it costs processes the agent does not select) and its load.
#pragma once

#include <memory>
#include <vector>

#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/nodejs_feature.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/feature_module.h"
#include "agent/symbolize/symbolizer_cache.h"

namespace sonde::agent {

class NodejsModule final : public FeatureModule {
 public:
  void add_flags(CLI::App& app, bool in_cluster) override;
  // Loads the feature's programs into the running kernel (and, where the hook is the C library's
  // uprobes, attaches them to this process alone).
  std::vector<Check> node_checks() const override;

  // The feature, with the wait hook and metric sets the flags chose; in-cluster, its stalls
  // are also Events on their pods (StallEvents). `binaries`: symbol tables shared with the CPU
  // profiler.
  Result<std::unique_ptr<NodejsFeature>> load(
      const RuntimeServices& s, const AgentMode& mode,
      std::shared_ptr<symbolize::SymbolizerCache> binaries) const;

 private:
  LoopProbes::WaitSource wait_source_ = LoopProbes::WaitSource::kAuto;
  NodejsMetrics metrics_ = NodejsMetrics::kBoth;
};

}  // namespace sonde::agent
