// The node checks behind `sonde-agent doctor`: everything the agent needs from the kernel and
// its own privileges, each with a verdict and, when it fails, what to do.
//
// Host paths are parameters so tests (and users debugging a container's view) can point them
// elsewhere; the kernel probes (loading tiny BPF programs) always use the running kernel.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::agent {

struct Check {
  enum class Verdict { kPass, kWarn, kFail };
  std::string name;
  Verdict verdict = Verdict::kPass;
  std::string detail;  // what was seen
  std::string fix;     // what to do, for kWarn and kFail
};

struct DoctorOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // Load probe programs into the running kernel (prog/map types, the process-event program).
  bool probe_kernel = true;
};

struct KernelVersion {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const KernelVersion&) const = default;
};

// "6.18.44-fc-v595" → {6, 18, 44}; nullopt when it does not start with major.minor.
std::optional<KernelVersion> parse_kernel_version(std::string_view release);

// CapEff from /proc/<pid>/status text; nullopt when the line is missing or malformed.
std::optional<uint64_t> parse_effective_caps(std::string_view status_text);

std::vector<Check> run_doctor(const DoctorOptions& options);

// True when no check failed (warnings allowed).
bool all_passed(const std::vector<Check>& checks);

std::string render_table(const std::vector<Check>& checks);
nlohmann::json to_json(const std::vector<Check>& checks);

}  // namespace sonde::agent
