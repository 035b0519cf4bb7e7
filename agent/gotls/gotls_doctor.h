// The Go TLS feature's node checks for `sonde-agent doctor` (agent/runtime/node_check.h): whether
// its RET probes could be performed in BPF here, and whether it follows HTTP/2 framing.
#pragma once

#include <vector>

#include "agent/runtime/node_check.h"

namespace sonde::agent {

// Asks the running kernel's verifier (loads no program that stays).
std::vector<Check> gotls_node_checks();

}  // namespace sonde::agent
