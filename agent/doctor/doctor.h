// The node checks behind `sonde-agent doctor`: everything the agent needs from the kernel and
// its own privileges, each with a verdict and, when it fails, what to do.
//
// Host paths are parameters so tests (and users debugging a container's view) can point them
// elsewhere; the kernel probes (loading tiny BPF programs) always use the running kernel.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/node_check.h"

namespace sonde::agent {

struct DoctorOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // Load probe programs into the running kernel (prog/map types, the process-event program).
  bool probe_kernel = true;
  // The features' own checks (agent/assembly/agent_parts.h: AgentFeatures::node_checks()), run
  // after the kernel probes, in this order; only with probe_kernel.
  std::vector<NodeChecks> feature_checks;
};

struct KernelVersion {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const KernelVersion&) const = default;
};

// "6.18.44-fc-v595" → {6, 18, 44}; nullopt when it does not start with major.minor.
std::optional<KernelVersion> parse_kernel_version(std::string_view release);

// CapEff from /proc/<pid>/status text; nullopt when the line is missing or malformed.
std::optional<uint64_t> parse_effective_caps(std::string_view status_text);

// This process's effective capabilities (capget(2)); nullopt when the call fails.
std::optional<uint64_t> effective_caps_of_self();

// What to grant when `effective` lacks capabilities the agent cannot work without (CAP_SYS_ADMIN
// stands in for CAP_BPF and CAP_PERFMON, CAP_DAC_OVERRIDE for CAP_DAC_READ_SEARCH): one line per
// missing capability with its purpose, then the flags to add in a container engine and in the
// chart, and a note when `uid` is not 0 (a container's capabilities are root's only). Empty
// when nothing required is missing. The agent prints it at start instead of failing later.
std::string missing_capabilities_message(uint64_t effective, unsigned uid);

// For the agent's start: prints missing_capabilities_message for this process to stderr and
// returns false when a required capability is missing (true when capget fails: the BPF loads
// will then say what went wrong).
bool has_required_capabilities();

// The verdict for a BPF program or map type the kernel refused with `err` (a positive errno)
// while this process held `effective` capabilities. EPERM/EACCES is a missing permission:
// capabilities when they are missing (needs_perfmon: program types that also need
// CAP_PERFMON), else a seccomp profile or LSM; EINVAL and ENOTSUPP mean the kernel lacks the
// type; anything else is reported as it is.
Check bpf_refusal_check(std::string name, int err, uint64_t effective, bool needs_perfmon);

std::vector<Check> run_doctor(const DoctorOptions& options);

// True when no check failed (warnings allowed).
bool all_passed(const std::vector<Check>& checks);

std::string render_table(const std::vector<Check>& checks);
nlohmann::json to_json(const std::vector<Check>& checks);

}  // namespace sonde::agent
