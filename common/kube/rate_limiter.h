// Rate limiters for the work queue: how long an item must wait before it is retried.
//
//  - ItemExponentialRateLimiter: base * 2^(failures of this item), capped; forget() resets the
//    item. A failing item backs off alone without slowing the others.
//  - TokenBucketRateLimiter: an overall limit (qps, burst) across all items, so a burst of
//    failures cannot hammer the API server.
//  - MaxOfRateLimiter: the longest delay of several; default_controller_rate_limiter() is
//    max(per-item 5 ms..1000 s, bucket 10 qps / 100 burst), the usual controller defaults.
//
// All are thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"

namespace sonde::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // The delay before `item` may be processed again; records one more retry of it.
  virtual Duration when(const std::string& item) = 0;
  // The item succeeded: forget its failures.
  virtual void forget(const std::string& item) = 0;
  virtual int retries(const std::string& item) const = 0;
};

class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  ItemExponentialRateLimiter(Duration base, Duration max) : base_(base), max_(max) {}
  Duration when(const std::string& item) override;
  void forget(const std::string& item) override;
  int retries(const std::string& item) const override;

 private:
  const Duration base_;
  const Duration max_;
  mutable std::mutex mu_;
  std::map<std::string, int> failures_;
};

class TokenBucketRateLimiter final : public RateLimiter {
 public:
  TokenBucketRateLimiter(double qps, int burst, const Clock& clock);
  Duration when(const std::string& item) override;
  void forget(const std::string&) override {}
  int retries(const std::string&) const override { return 0; }

 private:
  const double qps_;
  const double burst_;
  const Clock& clock_;
  std::mutex mu_;
  double tokens_;
  SteadyTime last_;
};

class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
      : limiters_(std::move(limiters)) {}
  Duration when(const std::string& item) override;
  void forget(const std::string& item) override;
  int retries(const std::string& item) const override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

std::unique_ptr<RateLimiter> default_controller_rate_limiter(const Clock& clock);

}  // namespace sonde::kube
