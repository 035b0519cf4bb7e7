// Clock: the one seam in front of time, for everything in sonde that waits or measures: the
// Kubernetes client (backoff, work-queue delays and rate limits, lease expiry), the operator,
// and the agent's monitors and runtime (grace periods, sweeps, exits at a known instant).
// Production code uses real_clock(); tests pass a ManualClock (common/testing/manual_clock.h)
// so that timing behaviour is checked without sleeping.
//
// Monotonic time is std::chrono::steady_clock, which is CLOCK_MONOTONIC on Linux, the clock of
// bpf_ktime_get_ns(): now_ns() compares directly with kernel timestamps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sonde {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;

  // Monotonic time, for deadlines and intervals.
  virtual SteadyTime now() const = 0;
  // Calendar time, for timestamps written to the API (Lease renewTime, conditions).
  virtual WallTime wall_now() const = 0;
  // Blocks on `cv` (whose mutex `lock` holds) until notified or until `deadline` on this
  // clock. May return early (spurious wake-up, or a manual clock re-checking), so callers loop
  // on their own condition. Thread-safe.
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          SteadyTime deadline) const = 0;

  // now() in nanoseconds of CLOCK_MONOTONIC, the kernel's timestamps' unit and origin.
  uint64_t now_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<Duration>(now().time_since_epoch()).count());
  }
};

// The process-wide clock backed by std::chrono::steady_clock/system_clock. Thread-safe.
const Clock& real_clock();

// CLOCK_MONOTONIC in nanoseconds, without a Clock: for code that only stamps (log lines,
// timings), never for a decision a test must be able to move.
uint64_t monotonic_ns();

}  // namespace sonde
