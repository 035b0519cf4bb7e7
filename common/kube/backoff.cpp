#include "common/kube/backoff.h"

#include <algorithm>

namespace sonde::kube {

Backoff::Backoff(BackoffPolicy policy, uint64_t seed)
    : policy_(policy), base_(policy.initial), rng_(seed) {}

Duration Backoff::next() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double scaled = static_cast<double>(base_.count()) * (1.0 + policy_.jitter * unit(rng_));
  const Duration delay(static_cast<Duration::rep>(scaled));
  const double grown = static_cast<double>(base_.count()) * policy_.factor;
  base_ = std::min(policy_.max, Duration(static_cast<Duration::rep>(grown)));
  return delay;
}

void Backoff::reset() {
  base_ = policy_.initial;
}

}  // namespace sonde::kube
