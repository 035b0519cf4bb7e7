// For tests that make cgroups: where this host mounts the cgroup v2 hierarchy.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "agent/discovery/proc_reader.h"

namespace sonde::testing {

// The cgroup2 mount (/sys/fs/cgroup, .../unified on hybrid hosts), "" when there is none.
inline std::string cgroup2_root() {
  std::stringstream mounts;
  mounts << std::ifstream("/proc/self/mounts").rdbuf();
  return agent::cgroup2_mount(mounts.str()).value_or("");
}

}  // namespace sonde::testing
