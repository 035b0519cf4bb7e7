// Clock: the seam in front of time for everything in sonde::kube that waits or measures
// (backoff, work-queue delays and rate limits, lease expiry). Production code uses
// real_clock(); tests pass a ManualClock (common/kube/testing/manual_clock.h) so that timing
// behaviour is checked without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace sonde::kube {

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
};

// The process-wide clock backed by std::chrono::steady_clock/system_clock. Thread-safe.
const Clock& real_clock();

}  // namespace sonde::kube
