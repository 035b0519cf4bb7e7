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
// The value is a number (ContainerTotals) or a counter set (counter_set.h: Go TLS requests per
// method and status, a histogram, bytes; Node.js block durations: Histogram<N>) with `a += b`
// adding and `raise_to(a, floor)` raising every counter of `a` to at least the one in `floor`,
// so "never backwards" holds per counter: each bucket of a histogram is a counter of its own.
//
// Not thread-safe: the owner (a feature's monitor) calls it under its own lock. Cost: one map
// entry per container with series.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "agent/runtime/counter_set.h"

namespace sonde::agent {

// The labels of a container's series.
struct ContainerLabels {
  std::string namespace_name;
  std::string pod;
  std::string container;
  auto operator<=>(const ContainerLabels&) const = default;
};

// A histogram of kBuckets buckets: counts are non-cumulative (the last bucket is above every
// bound), `sum` in the unit of the observations.
template <size_t kBuckets>
struct Histogram {
  std::array<uint64_t, kBuckets> counts{};
  uint64_t sum = 0;
  static constexpr auto kCounters = std::tuple{&Histogram::counts, &Histogram::sum};

  uint64_t count() const {
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    return n;
  }
};

template <typename Value>
class ContainerTotalsOf {
 public:
  explicit ContainerTotalsOf(uint64_t grace_ns) : grace_ns_(grace_ns) {}

  // A process of `labels` began.
  void started(const ContainerLabels& labels) { containers_[labels].processes++; }

  // A process of `labels` ended with `final_value`; at `now_ns` (CLOCK_MONOTONIC).
  void finished(const ContainerLabels& labels, const Value& final_value, uint64_t now_ns) {
    auto& c = containers_[labels];
    c.finished += final_value;
    if (c.processes > 0) --c.processes;
    if (c.processes == 0) c.empty_since_ns = now_ns;
  }

  struct Total {
    ContainerLabels labels;
    Value value;
    size_t processes;  // live processes
  };
  // Every container's total: finished processes plus `live` (the current values of its live
  // processes), never below the previous report. Containers empty for longer than the grace
  // period are dropped first.
  std::vector<Total> report(const std::map<ContainerLabels, Value>& live, uint64_t now_ns) {
    std::erase_if(containers_, [&](const auto& entry) {
      const Container& c = entry.second;
      return c.processes == 0 && now_ns >= c.empty_since_ns + grace_ns_;
    });
    std::vector<Total> out;
    out.reserve(containers_.size());
    for (auto& [labels, c] : containers_) {
      Value value = c.finished;
      if (auto l = live.find(labels); l != live.end()) value += l->second;
      raise_to(value, c.reported);
      c.reported = value;
      out.push_back({labels, value, c.processes});
    }
    return out;
  }

  size_t size() const { return containers_.size(); }

 private:
  struct Container {
    Value finished{};  // sum of final values of ended processes
    Value reported{};  // the floor of the next report
    size_t processes = 0;
    uint64_t empty_since_ns = 0;  // when processes last dropped to 0
  };
  uint64_t grace_ns_;
  std::map<ContainerLabels, Container> containers_;
};

using ContainerTotals = ContainerTotalsOf<uint64_t>;

}  // namespace sonde::agent
