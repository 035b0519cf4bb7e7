#include "agent/runtime/clock.h"

#include <ctime>

namespace sonde::agent {
namespace {

class MonotonicClock final : public Clock {
 public:
  uint64_t now_ns() const override { return monotonic_ns(); }
};

}  // namespace

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const Clock& monotonic_clock() {
  static const MonotonicClock kClock;
  return kClock;
}

}  // namespace sonde::agent
