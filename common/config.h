// The agent's configuration file (YAML), for standalone mode and for the chart's ConfigMap.
//
//   metricsAddress: "127.0.0.1:9464"   # loopback unless told: /debug/ is unauthenticated here
//   logLevel: info                 # debug | info | warn | error
//   symbolCache:
//     maxEntries: 4096             # (binary, symbol) entries kept, LRU
//   targets:                       # which processes; omitted or empty = every process
//     - exe: "/usr/bin/node*"      # glob on the executable path as seen by the process
//     - containerId: "3f9a..."     # full or prefix (at least 12 hex digits)
//   instrumentations:              # the kinds (common/instrumentation.h) and their parameters
//     nodejsEventLoop: true
//     goTLS: true
//     cpu:
//       enabled: false
//       frequencyHz: 19            # 1..999 samples per second per CPU
//       pyroscope:                 # also push each container's profile (needs cpu.enabled)
//         url: "http://pyroscope.monitoring:4040"   # plain http, optional path prefix
//         intervalSeconds: 15      # 5..3600: one profile per container and interval
//         application: sonde       # the name's prefix: <application>.cpu{namespace=,...}
//   limits:
//     maxOverheadPercent: 2        # Go TLS: detach a container whose probes cost more than this
//                                  # % of its own CPU (0.01..100; needs goTLS); absent: no budget
//
// Loading is strict: an unknown key, a wrong type or an out-of-range value is an error naming
// the key's path ("instrumentations.cpu.frequencyHz: must be 1..999, got 5000"), so a typo
// never silently falls back to a default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/instrumentation.h"
#include "common/result.h"

namespace sonde {

struct ProcessTarget {
  std::string exe_glob;      // empty: any executable
  std::string container_id;  // empty: any container (or none)
};

struct AgentConfig {
  // Loopback by default: standalone has no API server to authorize /debug/ (profiles of every
  // process on the host), so reaching it from the network is something to ask for.
  std::string metrics_address = "127.0.0.1:9464";
  std::string log_level = "info";
  uint32_t symbol_cache_entries = 4096;
  std::vector<ProcessTarget> targets;
  Instrumentations instrumentations = config_defaults();
  std::optional<double> max_overhead_percent;  // limits.maxOverheadPercent
};

// Parses YAML text; `origin` names the source in error messages (a path or "<string>").
Result<AgentConfig> parse_agent_config(const std::string& yaml, const std::string& origin);
Result<AgentConfig> load_agent_config(const std::string& path);

}  // namespace sonde
