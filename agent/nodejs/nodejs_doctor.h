// The Node.js event-loop feature's node checks for `sonde-agent doctor`
// (agent/runtime/node_check.h): which wait hook the kernel takes here and what it costs processes
// the agent does not select.
#pragma once

#include <vector>

#include "agent/runtime/node_check.h"

namespace sonde::agent {

// Loads the feature's programs into the running kernel (and, where the hook is the C library's
// uprobes, attaches them to this process alone).
std::vector<Check> nodejs_node_checks();

}  // namespace sonde::agent
