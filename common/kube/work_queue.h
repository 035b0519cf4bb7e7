// WorkQueue: the controller work queue. Keys (e.g. "namespace/name") are added when something
// changed; workers get() a key, reconcile it, and call done().
//
// Promises:
//  - An item is never held twice: adding a queued item again is a no-op.
//  - An item is never processed concurrently: one added while a worker holds it is parked
//    ("dirty") and queued again only when that worker calls done().
//  - add_rate_limited() delays an item by its RateLimiter (per-item exponential backoff and an
//    overall token bucket by default); forget() clears the item's failure history.
//  - add_after() delays an item; of several pending delays for one item the earliest wins.
//  - After shut_down(), get() drains nothing more and returns nullopt.
//
// Thread-safe; any number of producers and workers. Delayed items are moved into the queue by
// whichever worker is waiting in get(), so delays are honoured only while some worker waits.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/clock.h"
#include "common/kube/rate_limiter.h"

namespace sonde::kube {

class WorkQueue {
 public:
  explicit WorkQueue(const Clock& clock = real_clock(),
                     std::unique_ptr<RateLimiter> limiter = nullptr);

  void add(const std::string& item);
  void add_after(const std::string& item, Duration delay);
  void add_rate_limited(const std::string& item);
  void forget(const std::string& item);
  int retries(const std::string& item) const;

  // Blocks until an item is ready or the queue is shut down (nullopt).
  std::optional<std::string> get();
  void done(const std::string& item);
  void shut_down();
  bool shutting_down() const;

  // Items ready to be processed (not counting delayed or in-process ones).
  size_t len() const;
  size_t delayed() const;

 private:
  void add_locked(const std::string& item);
  void promote_due_locked();

  const Clock& clock_;
  std::unique_ptr<RateLimiter> limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;
  std::unordered_set<std::string> processing_;
  std::multimap<SteadyTime, std::string> waiting_;
  std::unordered_map<std::string, SteadyTime> waiting_at_;
  bool shutting_down_ = false;
};

}  // namespace sonde::kube
