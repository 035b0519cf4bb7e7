#include "common/kube/stop_signal.h"

namespace sonde::kube {

void StopSignal::stop() {
  {
    // Callbacks run under the lock so that once remove_callback() returns, its callback is
    // neither running nor about to run.
    std::lock_guard lock(mu_);
    if (stopped_.exchange(true)) return;
    for (auto& [id, fn] : callbacks_) fn();
    callbacks_.clear();
  }
  cv_.notify_all();
}

bool StopSignal::sleep_for(const Clock& clock, Duration d) {
  const SteadyTime deadline = clock.now() + d;
  std::unique_lock lock(mu_);
  while (!stopped_.load() && clock.now() < deadline) clock.wait_until(cv_, lock, deadline);
  return !stopped_.load();
}

uint64_t StopSignal::on_stop(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (!stopped_.load()) {
      callbacks_.emplace(next_id_, std::move(fn));
      return next_id_++;
    }
  }
  fn();
  return 0;
}

void StopSignal::remove_callback(uint64_t id) {
  std::lock_guard lock(mu_);
  callbacks_.erase(id);
}

}  // namespace sonde::kube
