// The agent's composition root: which features exist and how each is built, for both modes
// (`--standalone`, `--cluster`). The runtime (agent/runtime/) knows features only through
// Feature; this is the one place that names them (and the order they start in).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "agent/cpu/cpu_params.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/nodejs_feature.h"
#include "agent/nodejs/stall_ring.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/fd_budget.h"
#include "agent/runtime/node_check.h"
#include "agent/stacks/sampler.h"
#include "common/instrumentation.h"

namespace sonde::agent {

// What the features are built with, beside RuntimeOptions.
struct FeatureOptions {
  PerInstrumentation<bool> load;  // load the kind's programs at all
  LoopProbes::WaitSource wait_source = LoopProbes::WaitSource::kAuto;  // Node.js
  NodejsMetrics nodejs_metrics = NodejsMetrics::kBoth;                 // Node.js
  // Count Go TLS in the kernel only for the cgroups of selected processes (cluster mode, where
  // a container is what is selected; standalone targets may pick one process of a cgroup).
  bool go_tls_cgroup_filter = false;
  // Let Go TLS RET probes perform the `ret` (register writes) where the kernel allows it.
  bool go_tls_perform_ret = false;
  // Go TLS binaries instrumented at once on the node (TlsMonitor::Budget).
  size_t max_go_tls_binaries = kDefaultMaxGoTlsBinaries;
  // How long a Go TLS binary keeps its uprobes after its last process exits (SharedUprobes).
  uint64_t go_tls_keep_probes_seconds = kDefaultGoTlsKeepProbesSeconds;
  // Called for each long event-loop turn recorded (cluster mode: an Event on the pod); on the
  // stall recorder's thread. May be empty.
  std::function<void(const Stall&)> on_stall;
  struct Cpu {
    uint32_t frequency_hz = 19;  // unless selections ask for more (the policies' cpu.frequencyHz)
    // The node's cap: no selection samples faster (CpuFeature).
    uint32_t max_frequency_hz = stacks::CpuSampler::kMaxFrequencyHz;
    bool all_processes = false;  // sample every process, not only selected ones
    // Sample a selected process's whole cgroup (cluster mode, where a container is what is
    // selected: what it forks without exec is sampled too); else the process alone.
    bool by_cgroup = false;
    PyroscopeConfig pyroscope;  // push profiles there too (url empty: no push)
    // Whether a node that cannot sample fails the start; otherwise processes selected for
    // sampling are reported kFailed with the reason (cluster mode: the policy status says so).
    bool required = true;
  } cpu;
};

// What AgentRuntime::start() builds the agent from: the kernel's process events and the
// features `options` load, in start order.
PartsFactory agent_parts(FeatureOptions options);

// The features' own checks for `sonde-agent doctor` (DoctorOptions::feature_checks), in start
// order: a feature with node checks of its own adds its function here.
std::vector<NodeChecks> feature_node_checks();

}  // namespace sonde::agent
