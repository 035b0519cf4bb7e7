// StallWatch: what the Node.js feature asks of the stall recorder (agent/nodejs/stall_recorder.h),
// which lives with the CPU profiler's symbolizers: watch a process whose selection sets
// nodejsEventLoop.stallThresholdMs, forget it, serve the ring, export its counters. The
// composition root (agent/assembly/) connects the two.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "agent/runtime/container_totals.h"
#include "common/result.h"

namespace sonde::agent {

class StallWatch {
 public:
  virtual ~StallWatch() = default;
  // Reports pid's loop turns of at least `threshold_ns` from now on (a new threshold replaces
  // the old). pid's loop must be tracked by the Node.js probes. Reads the process's executable
  // (its V8 layout) once: call it on the inspection worker.
  virtual Status watch(pid_t pid, const ContainerLabels& labels, uint64_t threshold_ns) = 0;
  // Stops watching pid (exited or no longer selected); no-op when it was not watched.
  virtual void forget(pid_t pid) = 0;
  // GET /debug/nodejs/stalls.
  virtual HttpResponse handle_request(const HttpRequest& request) = 0;
  virtual void collect(std::vector<prometheus::MetricFamily>& out) = 0;
};

}  // namespace sonde::agent
