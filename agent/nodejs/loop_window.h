// LoopWindows: the window over which a container's event-loop utilization and delay are
// reported (nodejs_eventloop_utilization_ratio, nodejs_eventloop_delay_*_seconds).
//
// The kernel's counters are cumulative; a gauge needs a window. At each scrape the container's
// totals are kept as a reading, and the window ends now and begins at the newest reading at
// least kWindowNs (10 s) old: the last 10 s when scrapes come at least every 10 s, else since
// the previous scrape (OpenTelemetry's Node.js runtime instrumentation also reports since its
// previous collection). Before any reading is that old, the window begins at the oldest reading;
// at a container's first scrape, at the start of its measurement. A container's several loops
// are one window over their summed counters: utilization = their active time / their active and
// idle time, delay = their histograms merged.
//
// Readings closer than kMinSpacingNs to the newest kept are not kept, so a container holds at
// most kMaxReadings (~1 KiB each). Not thread-safe: EventLoopMonitor calls it under its lock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>

#include "agent/nodejs/loop_delay.h"
#include "agent/runtime/container_totals.h"

namespace sonde::agent {

// A container's cumulative counters, as EventLoopMonitor folds them.
struct LoopTotals {
  uint64_t active_ns = 0;
  uint64_t idle_ns = 0;
  LoopDelays delays;
};

struct LoopWindow {
  uint64_t length_ns = 0;  // 0 at a container's first scrape (since its measurement began)
  std::optional<double> utilization;  // nullopt: no active or idle time in the window
  std::optional<DelayStats> delay;    // nullopt: no timer interval ended in the window
};

class LoopWindows {
 public:
  static constexpr uint64_t kWindowNs = 10'000'000'000;
  static constexpr uint64_t kMinSpacingNs = 250'000'000;
  static constexpr size_t kMaxReadings = 64;

  // Every container's window ending at now_ns (CLOCK_MONOTONIC), from its totals now; keeps them
  // as readings and forgets containers not in `totals`.
  std::map<ContainerLabels, LoopWindow> observe(const std::map<ContainerLabels, LoopTotals>& totals,
                                                uint64_t now_ns);

 private:
  struct Reading {
    uint64_t at_ns;
    LoopTotals totals;
  };
  std::map<ContainerLabels, std::deque<Reading>> readings_;
};

}  // namespace sonde::agent
