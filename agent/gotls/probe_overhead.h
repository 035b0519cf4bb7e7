// What sonde's Go TLS probes cost a workload, and the brake on it.
//
// Cost: the kernel counts a process's probe hits by kind of site (bpf/gotls/gotls.h, enum
// sonde_gotls_site); the agent measured at start what one hit adds on this node, by kind
// (agent/kernel/uprobe_cost.h). The estimate is hits × that cost: an emulated site costs the
// emulated figure, a single-stepped one the single-step figure, and a RET the program performs
// (`bpf_ret`: one trap, no single step) the emulated figure, the closest measured kind. It leaves
// out what the BPF program itself does per hit (map lookups, the HTTP/2 frame walk), which the
// measurement's empty program does not.
//
// Brake (OverheadWindow): per container, estimated probe CPU over the container's own CPU time
// (cgroup v2 cpu.stat usage_usec, which the probes' time is part of), sampled at each sweep.
// Above the policy's limits.maxOverheadPercent in kSustainedIntervals consecutive intervals of
// at least kMinIntervalNs each, the container is over budget, and stays so: no sample brings it
// back (no flap loop). Only a new budget (the policy changed) or forget() (an explicit retry,
// the container gone) clears it. An interval in which the container used no CPU proves nothing
// and breaks the streak, as does one below the limit.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "agent/kernel/uprobe_cost.h"
#include "bpf/gotls/gotls.h"
#include "common/clock.h"
#include "common/result.h"

namespace sonde::agent {

// The labels of a kind of site in container_go_tls_probe_hits_total.
struct ProbeSiteKind {
  const char* site;  // "entry" or "return"
  const char* kind;  // "emulated", "single_step" or "bpf_ret"
};
ProbeSiteKind probe_site_kind(sonde_gotls_site site);

// Estimated CPU seconds the hits added (see above).
double probe_cpu_seconds(const std::array<uint64_t, SONDE_GOTLS_SITE_COUNT>& hits,
                         const UprobeHitCosts& costs);

// The cgroup v2 path in /proc/<pid>/cgroup text (its "0::" line); nullopt when there is none or
// it is not below the reader's cgroup root (a private cgroup namespace shows "/../..").
std::optional<std::string> cgroup2_path(std::string_view cgroup_text);
// usage_usec of cgroup v2 cpu.stat text; nullopt when absent.
std::optional<uint64_t> cpu_stat_usage_usec(std::string_view cpu_stat_text);
// The CPU seconds the cgroup v2 of process `pid` has used (its cpu.stat usage_usec, which counts
// every process of the cgroup and its children): `proc_root`/<pid>/cgroup names it below
// `cgroup2_root` (where the agent sees the v2 hierarchy). An error when the process is gone
// or its cgroup cannot be named from here.
Result<double> cgroup_cpu_seconds(const std::string& proc_root, const std::string& cgroup2_root,
                                  pid_t pid);

// The CPU seconds of the cgroup v2 whose id is `cgroup_id` (as the kernel names it, e.g.
// TlsCounters::cgroup_of()), opened by that id through the hierarchy mounted at `cgroup2_root`
// (open_by_handle_at: needs CAP_DAC_READ_SEARCH). Unlike paths it works from a private cgroup
// namespace (an agent in a pod), where /proc/<pid>/cgroup shows other pods' cgroups as "/..".
Result<double> cgroup_cpu_seconds_by_id(const std::string& cgroup2_root, uint64_t cgroup_id);

// Per key (a container), whether its probes' estimated CPU stayed above a share of its own CPU
// for a sustained window. Not thread-safe: the caller serializes (one sweep at a time).
template <typename Key>
class OverheadWindow {
 public:
  // The sustained window: 3 consecutive intervals of at least 10 s (the agent's sweep period),
  // i.e. 30 s of the workload's life. Shorter would brake on a burst (a start-up handshake
  // storm); longer lets a chatty service pay for minutes before anything happens.
  static constexpr int kSustainedIntervals = 3;
  static constexpr uint64_t kMinIntervalNs = 10'000'000'000;

  explicit OverheadWindow(const Clock& clock) : clock_(clock) {}

  // A sample of `key`'s cumulative probe CPU and own CPU (seconds), held against
  // `max_percent` (none: no budget, nothing is tracked). Returns true exactly once, when the
  // key goes over budget. A sample closer than kMinIntervalNs to the interval's start only
  // waits for the interval to end. A budget other than the last one starts the key over.
  bool observe(const Key& key, double probe_cpu_s, double own_cpu_s,
               std::optional<double> max_percent) {
    if (!max_percent) {
      state_.erase(key);
      return false;
    }
    const uint64_t now = clock_.now_ns();
    auto [it, fresh] = state_.try_emplace(key);
    State& s = it->second;
    if (fresh || s.max_percent != *max_percent) {
      s = State{.max_percent = *max_percent,
                .start_ns = now,
                .probe_cpu_s = probe_cpu_s,
                .own_cpu_s = own_cpu_s};
      return false;
    }
    if (s.exceeded || now - s.start_ns < kMinIntervalNs) return false;
    const double probe = probe_cpu_s - s.probe_cpu_s;
    const double own = own_cpu_s - s.own_cpu_s;
    s.start_ns = now;
    s.probe_cpu_s = probe_cpu_s;
    s.own_cpu_s = own_cpu_s;
    s.last_percent = own > 0 ? probe * 100 / own : 0;
    const bool above = own > 0 && s.last_percent > *max_percent;
    s.streak = above ? s.streak + 1 : 0;
    if (s.streak < kSustainedIntervals) return false;
    s.exceeded = true;
    return true;
  }
  bool exceeded(const Key& key) const {
    auto it = state_.find(key);
    return it != state_.end() && it->second.exceeded;
  }
  // The estimated share (percent) in key's last full interval; 0 before one.
  double last_percent(const Key& key) const {
    auto it = state_.find(key);
    return it == state_.end() ? 0 : it->second.last_percent;
  }
  void forget(const Key& key) { state_.erase(key); }
  size_t size() const { return state_.size(); }

 private:
  struct State {
    double max_percent = 0;
    uint64_t start_ns = 0;  // the current interval's start, and the cumulative values then
    double probe_cpu_s = 0, own_cpu_s = 0;
    double last_percent = 0;
    int streak = 0;  // consecutive intervals above the budget
    bool exceeded = false;
  };
  const Clock& clock_;
  std::map<Key, State> state_;
};

}  // namespace sonde::agent
