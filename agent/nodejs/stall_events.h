// StallEvents: in cluster mode, a Kubernetes Event (Warning NodejsEventLoopStalled) on the pod of
// each Node.js stall the agent records (stall_recorder.h), saying how long the loop was blocked,
// what it ran, and where the stacks are (/debug/nodejs/stalls on this node). The feature makes
// one when the agent runs in a cluster (AgentMode::api) and exports its counts
// (sonde_agent_nodejs_stall_events_total).
//
// Bounded so a pod that stalls all the time costs the API server little:
//  - per pod, at most one Event, then one a minute (kube::EventRecorder's token bucket, with
//    the limits in stall_events.cpp; beyond it the stall is only in the ring and counted as
//    rate_limited);
//  - post() never blocks the recorder's thread: stalls wait in a queue of kQueue for the writer
//    thread; a full queue drops the stall's Event (queue_full);
//  - a message is at most kMaxMessageBytes.
// A stall of a process without a pod (its labels name none, or the pod is not in the informer's
// cache) has no Event (no_pod). Thread-safe; the destructor stops and joins the writer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "agent/nodejs/stall_ring.h"
#include "agent/runtime/feature_module.h"
#include "common/clock.h"
#include "common/kube/stop_signal.h"

// The Kubernetes client stays in stall_events.cpp: what includes this header does not compile it.
namespace sonde::kube {
class ApiClient;
class EventRecorder;
}  // namespace sonde::kube

namespace sonde::agent {

class StallEvents {
 public:
  static constexpr size_t kQueue = 64;
  static constexpr size_t kMaxMessageBytes = 1024;
  static constexpr const char* kReason = "NodejsEventLoopStalled";

  StallEvents(kube::ApiClient& client, std::string node, PodLookup pods,
              const Clock& clock = real_clock());
  ~StallEvents();
  StallEvents(const StallEvents&) = delete;
  StallEvents& operator=(const StallEvents&) = delete;

  // Queues the Event of `stall` (returns at once).
  void post(const Stall& stall);

  // The Event's message for `stall` on `node` (exposed for tests).
  static std::string message(const Stall& stall, const std::string& node);

  struct Stats {
    uint64_t written = 0;
    uint64_t rate_limited = 0;
    uint64_t failed = 0;
    uint64_t queue_full = 0;
    uint64_t no_pod = 0;
  };
  Stats stats() const;
  // sonde_agent_nodejs_stall_events_total{result}, from stats().
  void collect(std::vector<prometheus::MetricFamily>& out) const;

 private:
  void run();

  std::unique_ptr<kube::EventRecorder> recorder_;
  const std::string node_;
  const PodLookup pods_;
  kube::StopSignal stop_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Stall> queue_;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;  // last: started after everything it uses
};

}  // namespace sonde::agent
