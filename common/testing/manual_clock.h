// ManualClock: a Clock for tests that moves only when advance() is called (from any thread), so
// delays, backoffs, grace periods and lease expiry are checked deterministically without
// sleeping. wait_until() polls (1 ms of real time) so that waiters notice an advance(); callers
// already loop. Thread-safe.
#pragma once

#include <atomic>

#include "common/clock.h"

namespace sonde::testing {

class ManualClock final : public Clock {
 public:
  SteadyTime now() const override { return SteadyTime(Duration(offset_.load())); }
  WallTime wall_now() const override {
    return WallTime(std::chrono::duration_cast<WallTime::duration>(Duration(offset_.load())));
  }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime /*deadline*/) const override {
    cv.wait_for(lock, std::chrono::milliseconds(1));
  }
  void advance(Duration d) { offset_.fetch_add(d.count()); }
  void advance_ns(uint64_t ns) { advance(Duration(static_cast<Duration::rep>(ns))); }

 private:
  std::atomic<Duration::rep> offset_{Duration(std::chrono::hours(1)).count()};
};

}  // namespace sonde::testing
