#include "common/kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace sonde::kube {

Duration ItemExponentialRateLimiter::when(const std::string& item) {
  std::lock_guard lock(mu_);
  const int failures = failures_[item]++;
  const double scaled = static_cast<double>(base_.count()) * std::pow(2.0, failures);
  if (scaled >= static_cast<double>(max_.count())) return max_;
  return Duration(static_cast<Duration::rep>(scaled));
}

void ItemExponentialRateLimiter::forget(const std::string& item) {
  std::lock_guard lock(mu_);
  failures_.erase(item);
}

int ItemExponentialRateLimiter::retries(const std::string& item) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucketRateLimiter::TokenBucketRateLimiter(double qps, int burst, const Clock& clock)
    : qps_(qps), burst_(burst), clock_(clock), tokens_(burst), last_(clock.now()) {}

Duration TokenBucketRateLimiter::when(const std::string& /*item*/) {
  std::lock_guard lock(mu_);
  const SteadyTime now = clock_.now();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  // Reserve a token now; a negative balance is a debt repaid at qps.
  tokens_ -= 1.0;
  if (tokens_ >= 0.0) return Duration::zero();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

Duration MaxOfRateLimiter::when(const std::string& item) {
  Duration longest = Duration::zero();
  for (auto& limiter : limiters_) longest = std::max(longest, limiter->when(item));
  return longest;
}

void MaxOfRateLimiter::forget(const std::string& item) {
  for (auto& limiter : limiters_) limiter->forget(item);
}

int MaxOfRateLimiter::retries(const std::string& item) const {
  int most = 0;
  for (const auto& limiter : limiters_) most = std::max(most, limiter->retries(item));
  return most;
}

std::unique_ptr<RateLimiter> default_controller_rate_limiter(const Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialRateLimiter>(std::chrono::milliseconds(5),
                                                                  std::chrono::seconds(1000)));
  limiters.push_back(std::make_unique<TokenBucketRateLimiter>(10.0, 100, clock));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace sonde::kube
