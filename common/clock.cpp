#include "common/clock.h"

#include <ctime>

namespace sonde {
namespace {

class RealClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return std::chrono::system_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const Clock& real_clock() {
  static const RealClock clock;
  return clock;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace sonde
