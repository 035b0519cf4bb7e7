// ContainerTotals: per-container counters built from per-process values, with the rules every
// feature's counters follow in one place:
//   - a process's final value is folded into its container when it ends, so pid reuse, exec
//     and restarts inside a container only ever add;
//   - a reported value is never below the previous report for that container (a lost or
//     evicted kernel entry, or a process finished twice, never lowers a counter);
//   - a container with no live process for `grace` is forgotten, so its series leave /metrics
//     instead of accumulating for every pod ever seen. A container that comes back later starts
//     a new series from 0, which Prometheus reads as a counter reset.
//
// Not thread-safe: the owner (a feature's monitor) calls it under its own lock. Cost: one map
// entry per container with series.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sonde::agent {

// The labels of a container's series.
struct ContainerLabels {
  std::string namespace_name;
  std::string pod;
  std::string container;
  auto operator<=>(const ContainerLabels&) const = default;
};

class ContainerTotals {
 public:
  explicit ContainerTotals(uint64_t grace_ns) : grace_ns_(grace_ns) {}

  // A process of `labels` began.
  void started(const ContainerLabels& labels);
  // A process of `labels` ended with `final_value`; at `now_ns` (CLOCK_MONOTONIC).
  void finished(const ContainerLabels& labels, uint64_t final_value, uint64_t now_ns);

  struct Total {
    ContainerLabels labels;
    uint64_t value;
    size_t processes;  // live processes
  };
  // Every container's total: finished processes plus `live` (the current values of its live
  // processes), never below the previous report. Containers empty for longer than the grace
  // period are dropped first.
  std::vector<Total> report(const std::map<ContainerLabels, uint64_t>& live, uint64_t now_ns);

  size_t size() const { return containers_.size(); }

 private:
  struct Container {
    uint64_t finished = 0;  // sum of final values of ended processes
    uint64_t reported = 0;  // the floor of the next report
    size_t processes = 0;
    uint64_t empty_since_ns = 0;  // when processes last dropped to 0
  };
  uint64_t grace_ns_;
  std::map<ContainerLabels, Container> containers_;
};

}  // namespace sonde::agent
