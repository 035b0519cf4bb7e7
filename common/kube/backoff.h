// Backoff: exponential delays with jitter, for retrying failed API calls and watches. Each
// delay is base * (1 + jitter * U[0,1)) where base starts at `initial`, is multiplied by
// `factor` after every next() and is capped at `max`; reset() after a success. Jitter keeps a
// fleet of agents that lost the API server at the same moment from returning in lock-step.
// Not thread-safe: one Backoff per retrying loop.
#pragma once

#include <cstdint>
#include <random>

#include "common/clock.h"

namespace sonde::kube {

struct BackoffPolicy {
  Duration initial = std::chrono::milliseconds(800);
  Duration max = std::chrono::seconds(30);
  double factor = 2.0;
  double jitter = 1.0;
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy, uint64_t seed = std::random_device{}());

  // The delay to wait before the next attempt; grows the following one.
  Duration next();
  void reset();

 private:
  BackoffPolicy policy_;
  Duration base_;
  std::mt19937_64 rng_;
};

}  // namespace sonde::kube
