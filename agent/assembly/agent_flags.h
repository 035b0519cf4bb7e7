// AgentFlags: the flags both agent modes take (`sonde-agent --cluster`, `--standalone`),
// declared once so they are spelled, defaulted and checked the same in each.
#pragma once

#include <cstddef>
#include <string>

#include "agent/assembly/agent_parts.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/fd_budget.h"
#include "common/cli.h"

namespace sonde::agent {

struct AgentFlags {
  std::string metrics_address;  // empty: the mode's default
  std::string debug_address;    // RuntimeOptions::debug_address
  std::string health_address;   // RuntimeOptions::health_address
  std::string tls_cert_file;    // RuntimeOptions::tls_cert_file
  std::string tls_key_file;     // RuntimeOptions::tls_key_file
  std::string proc_root = "/proc";
  cli::LogFlags log;
  LoopProbes::WaitSource wait_source = LoopProbes::WaitSource::kAuto;
  NodejsMetrics nodejs_metrics = NodejsMetrics::kBoth;    // FeatureOptions::nodejs_metrics
  bool go_tls_perform_ret = false;                        // FeatureOptions::go_tls_perform_ret
  size_t max_go_tls_binaries = kDefaultMaxGoTlsBinaries;  // FeatureOptions::max_go_tls_binaries
  uint64_t go_tls_keep_probes_seconds = kDefaultGoTlsKeepProbesSeconds;  // FeatureOptions's
  uint32_t max_cpu_frequency_hz = 0;  // FeatureOptions::Cpu::max_frequency_hz; 0: the mode's
};

// In-cluster, the CPU sampling cap unless --max-cpu-frequency-hz says otherwise: each policy
// asks its own frequency, and the node's rate costs every CPU of the node, so no tenant may
// raise it past a rate safe to leave on (99 Hz: ~1% of a CPU even with deep stacks).
// Standalone, the node's owner writes the config: no cap below the sampler's own bound.
inline constexpr uint32_t kClusterMaxCpuFrequencyHz = 99;

// What the flags set in both modes' options (the metrics address only when given).
void apply_agent_flags(const AgentFlags& flags, RuntimeOptions& runtime, FeatureOptions& features);

// `metrics_default` and `level_default` are what the help says an absent flag means.
void add_agent_flags(CLI::App& app, AgentFlags& flags, const std::string& metrics_default,
                     const std::string& level_default);

}  // namespace sonde::agent
