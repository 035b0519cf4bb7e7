// Test helper: a Clock the test moves by hand.
#pragma once

#include "agent/runtime/clock.h"

namespace sonde::agent::testing {

class FakeClock final : public Clock {
 public:
  uint64_t now_ns() const override { return now; }
  uint64_t now = 1'000'000'000;
};

}  // namespace sonde::agent::testing
