// AgentFlags: the flags both agent modes take (`sonde-agent --cluster`, `--standalone`),
// declared once so they are spelled, defaulted and checked the same in each.
#pragma once

#include <cstddef>
#include <string>

#include "agent/nodejs/loop_probes.h"
#include "agent/runtime/fd_budget.h"
#include "common/cli.h"

namespace sonde::agent {

struct AgentFlags {
  std::string metrics_address;  // empty: the mode's default
  std::string proc_root = "/proc";
  cli::LogFlags log;
  LoopProbes::WaitSource wait_source = LoopProbes::WaitSource::kAuto;
  bool go_tls_perform_ret = false;                        // RuntimeOptions::go_tls_perform_ret
  size_t max_go_tls_binaries = kDefaultMaxGoTlsBinaries;  // RuntimeOptions::max_go_tls_binaries
};

// `metrics_default` and `level_default` are what the help says an absent flag means.
void add_agent_flags(CLI::App& app, AgentFlags& flags, const std::string& metrics_default,
                     const std::string& level_default);

}  // namespace sonde::agent
