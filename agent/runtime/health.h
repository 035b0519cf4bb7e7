// HealthRegistry: what the agent's /healthz (liveness) and /readyz (readiness) answer, from
// what its components report about themselves. No thread watches anything: components push
// heartbeats and problems (a mutex and a clock read each), and a probe reads the registry.
//
// A check is one of:
//   heartbeat  the component calls beat() at least every `stale_after` (a loop's iteration);
//              it fails once the last beat, or the registration if none came yet, is older.
//   problem    set_problem()/clear_problem(): fails while a problem is set (a heartbeat check
//              may carry one too). The answer says since when it is set.
//   gate       a one-way condition evaluated at probe time (a cache's first list): fails until
//              it holds once, then is not asked again.
// Each check belongs to a probe. Liveness failing means only a restart helps (a loop that stopped
// turning); readiness failing means the agent works but is not (yet, or right now) doing its
// whole job (the caches not listed, the node Lease not renewed). /readyz answers for both: a pod
// that is not alive is not ready either.
//
// Answers list every check of the probe, one line each, "[+]name ok" or "[-]name: why", as
// kube-apiserver's verbose probes do. Thread-safe; beat() is cheap enough for every iteration of
// a loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"

namespace sonde::agent {

class HealthRegistry {
 public:
  using CheckId = size_t;
  enum class Probe { kLiveness, kReadiness };

  // `clock` must outlive the registry.
  explicit HealthRegistry(const Clock& clock = real_clock());

  // A heartbeat check (stale_after > 0) or a problem-only check (stale_after zero). `silence`
  // names a missed heartbeat in the answer ("no heartbeat", "Lease not renewed").
  CheckId add(std::string name, Probe probe,
              std::chrono::nanoseconds stale_after = std::chrono::nanoseconds::zero(),
              std::string silence = "no heartbeat");
  // A gate: `passed` is called on a probe's thread, under the registry's lock, until it returns
  // true once; it must be cheap, thread-safe and not call into the registry. `pending` says
  // what is awaited ("policies and pods not listed yet"), since `since_ns` (on the registry's
  // clock; 0: now), when the wait began before the gate could be registered.
  void add_gate(std::string name, Probe probe, std::function<bool()> passed, std::string pending,
                uint64_t since_ns = 0);

  void beat(CheckId id);
  // The check fails with `problem` until clear_problem(); setting the same problem again keeps
  // its start time.
  void set_problem(CheckId id, std::string problem);
  void clear_problem(CheckId id);

  struct Answer {
    bool ok = true;
    std::string body;  // one line per check
  };
  // Liveness: the liveness checks; readiness: every check.
  Answer check(Probe probe) const;

 private:
  struct Entry {
    std::string name;
    Probe probe;
    uint64_t stale_after_ns = 0;  // 0: no heartbeat expected
    uint64_t last_beat_ns = 0;    // or the registration time
    std::string silence;
    std::string problem;
    uint64_t problem_since_ns = 0;
    std::function<bool()> gate;  // set for gates, cleared once passed
    std::string pending;
    uint64_t pending_since_ns = 0;
  };

  const Clock& clock_;
  mutable std::mutex mu_;
  mutable std::vector<Entry> entries_;  // gates are cleared as they pass, from check()
};

}  // namespace sonde::agent
