// StopSignal: a one-shot "please stop" flag that long-running loops (reflectors, leader
// election, workers) wait on instead of sleeping, so shutdown is prompt. Callbacks registered
// with on_stop() run once, on the thread calling stop(), under the signal's lock: they must be
// quick and must not call back into the signal. The API client uses one to abort an in-flight
// watch. Thread-safe; not copyable (share it by reference or shared_ptr).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "common/clock.h"

namespace sonde::kube {

class StopSignal {
 public:
  StopSignal() = default;
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  // Waits for `d` on `clock`; returns false when stopped before or during the wait.
  bool sleep_for(const Clock& clock, Duration d);

  // Registers `fn` to run when stop() is called (immediately if already stopped). The id
  // removes it; remove before anything `fn` touches is destroyed.
  uint64_t on_stop(std::function<void()> fn);
  void remove_callback(uint64_t id);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopped_{false};
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> callbacks_;
};

}  // namespace sonde::kube
