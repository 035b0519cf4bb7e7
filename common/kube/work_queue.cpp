#include "common/kube/work_queue.h"

namespace sonde::kube {

WorkQueue::WorkQueue(const Clock& clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(clock),
      limiter_(limiter ? std::move(limiter) : default_controller_rate_limiter(clock)) {}

void WorkQueue::add(const std::string& item) {
  {
    std::lock_guard lock(mu_);
    add_locked(item);
  }
  cv_.notify_one();
}

void WorkQueue::add_locked(const std::string& item) {
  if (shutting_down_ || dirty_.count(item) != 0) return;
  dirty_.insert(item);
  if (processing_.count(item) != 0) return;  // queued again by done()
  queue_.push_back(item);
}

void WorkQueue::add_after(const std::string& item, Duration delay) {
  if (delay <= Duration::zero()) {
    add(item);
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (shutting_down_) return;
    const SteadyTime at = clock_.now() + delay;
    auto existing = waiting_at_.find(item);
    if (existing != waiting_at_.end()) {
      if (existing->second <= at) return;
      for (auto [it, end] = waiting_.equal_range(existing->second); it != end; ++it) {
        if (it->second == item) {
          waiting_.erase(it);
          break;
        }
      }
    }
    waiting_.emplace(at, item);
    waiting_at_[item] = at;
  }
  // Wake every waiter: one may need a shorter wait than it is sleeping for.
  cv_.notify_all();
}

void WorkQueue::add_rate_limited(const std::string& item) {
  add_after(item, limiter_->when(item));
}

void WorkQueue::forget(const std::string& item) {
  limiter_->forget(item);
}

int WorkQueue::retries(const std::string& item) const {
  return limiter_->retries(item);
}

void WorkQueue::promote_due_locked() {
  const SteadyTime now = clock_.now();
  while (!waiting_.empty() && waiting_.begin()->first <= now) {
    std::string item = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    waiting_at_.erase(item);
    add_locked(item);
  }
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  while (true) {
    if (shutting_down_) return std::nullopt;
    promote_due_locked();
    if (!queue_.empty()) break;
    const SteadyTime deadline =
        waiting_.empty() ? clock_.now() + std::chrono::hours(1) : waiting_.begin()->first;
    clock_.wait_until(cv_, lock, deadline);
  }
  std::string item = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(item);
  dirty_.erase(item);
  return item;
}

void WorkQueue::done(const std::string& item) {
  bool requeued = false;
  {
    std::lock_guard lock(mu_);
    processing_.erase(item);
    if (dirty_.count(item) != 0 && !shutting_down_) {
      queue_.push_back(item);
      requeued = true;
    }
  }
  if (requeued) cv_.notify_one();
}

void WorkQueue::shut_down() {
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
  }
  cv_.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::len() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t WorkQueue::delayed() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

}  // namespace sonde::kube
