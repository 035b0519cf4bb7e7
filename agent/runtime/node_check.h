// Check: one verdict of `sonde-agent doctor` on what this node allows, with what was seen and,
// when it fails or warns, what to do. Most checks are the doctor's own (agent/doctor/doctor.h);
// a feature contributes the checks of what it alone needs from the kernel (NodeChecks), and the
// composition root lists them (agent/assembly/agent_parts.h), so the doctor names no feature.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace sonde::agent {

struct Check {
  enum class Verdict { kPass, kWarn, kFail };
  std::string name;
  Verdict verdict = Verdict::kPass;
  std::string detail;  // what was seen
  std::string fix;     // what to do, for kWarn and kFail
};

// A feature's checks. They may load programs into the running kernel, so the doctor runs them
// only with its kernel probes (not under --no-kernel-probes).
using NodeChecks = std::function<std::vector<Check>()>;

}  // namespace sonde::agent
