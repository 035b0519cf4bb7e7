// Test helper: a Clock the test moves by hand (from any thread: the runtime reads it on its own).
#pragma once

#include <atomic>
#include <cstdint>

#include "agent/runtime/clock.h"

namespace sonde::agent::testing {

class FakeClock final : public Clock {
 public:
  uint64_t now_ns() const override { return now.load(); }
  std::atomic<uint64_t> now{1'000'000'000};
};

}  // namespace sonde::agent::testing
