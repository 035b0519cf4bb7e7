#include "common/kube/clock.h"

namespace sonde::kube {
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

}  // namespace sonde::kube
