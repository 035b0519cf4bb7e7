// CpuModule: the CPU profiler's part of the agent's start (FeatureModule): its flags
// (--max-cpu-frequency-hz; in-cluster also --pyroscope-*, which the standalone config holds
// instead, instrumentations.cpu.pyroscope) and its load, as the mode wants it.
#pragma once

#include <cstdint>
#include <memory>

#include "agent/cpu/cpu_feature.h"
#include "agent/cpu/cpu_params.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/feature_module.h"
#include "agent/symbolize/symbolizer_cache.h"

namespace sonde::agent {

class CpuModule final : public FeatureModule {
 public:
  // In-cluster, the node's sampling cap unless --max-cpu-frequency-hz says otherwise: each
  // policy asks its own frequency, and the node's rate costs every CPU of the node, so no tenant
  // may raise it past a rate safe to leave on (99 Hz: ~1% of a CPU even with deep stacks).
  // Standalone, the node's owner writes the config: no cap below the sampler's own bound.
  static constexpr uint32_t kClusterMaxFrequencyHz = 99;

  void add_flags(CLI::App& app, bool in_cluster) override;
  // A Pyroscope URL given: that it is one, and the application is named.
  Status check_flags() const override;

  // The profiler. In-cluster: a selected process's cgroup is sampled, at the frequency its
  // policies ask (CpuFeature), and a node that cannot sample reports why instead of failing the
  // start. Standalone: the config's frequency and push; every process when it names no target.
  // `binaries`: symbol tables shared with the stall recorder; `nodejs_loops_map_fd`: the Node.js
  // probes' loops map (samples inside a loop turn are marked blocked), or -1.
  Result<std::unique_ptr<CpuFeature>> load(const RuntimeServices& s, const AgentMode& mode,
                                           std::shared_ptr<symbolize::SymbolizerCache> binaries,
                                           int nodejs_loops_map_fd) const;

 private:
  uint32_t max_frequency_hz_ = 0;  // 0: the mode's cap
  PyroscopeConfig pyroscope_;      // in-cluster, from the flags (url empty: no push)
};

}  // namespace sonde::agent
