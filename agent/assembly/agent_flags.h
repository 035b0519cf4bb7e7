// AgentFlags: the flags both agent modes take (`sonde-agent --cluster`, `--standalone`),
// declared once so they are spelled, defaulted and checked the same in each.
#pragma once

#include <optional>
#include <string>

#include "agent/assembly/agent_parts.h"
#include "agent/runtime/agent_runtime.h"
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
  AgentFeatures features;  // each feature's own flags
};

// What the flags set in the runtime's options (the metrics address only when given).
void apply_agent_flags(const AgentFlags& flags, RuntimeOptions& runtime);

// `metrics_default` and `level_default` are what the help says an absent flag means;
// `in_cluster`: for `sonde-agent --cluster`.
void add_agent_flags(CLI::App& app, AgentFlags& flags, const std::string& metrics_default,
                     const std::string& level_default, bool in_cluster);

// After cli::parse(): nullopt when the flags agree, else the exit code (2), the features'
// complaint printed as "<command>: --<flag>: <what>".
std::optional<int> check_agent_flags(const AgentFlags& flags, const std::string& command);

}  // namespace sonde::agent
