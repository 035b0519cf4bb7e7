// Kubernetes Events (core/v1) about ProfilingPolicies and ClusterProfilingPolicies (those in the
// "default" namespace, as kubectl records a cluster-scoped object's): what `kubectl describe`
// and `kubectl get events` show when a policy's status changes in a way a user acts on.
//
// policy_events() decides which transitions matter, comparing the old and new status:
//  - Accepted turning False: Warning InvalidSpec, with the field at fault.
//  - Ready changing status or reason: Normal when it turns True (AllNodesReporting) or is
//    waiting for nodes, Warning otherwise (NoAgents, StaleNodeReports); InvalidSpec is left to
//    the Accepted event.
//  - Degraded changing status or reason: Warning with the problem's reason when True, Normal
//    AsExpected when it clears.
// EventRecorder writes them, bounded so a flapping policy cannot flood etcd:
//  - an Event repeated (same policy UID, type, reason, message) within kAggregateWindow is
//    one object whose count and lastTimestamp are patched, as client-go's recorder does;
//  - each policy has a token bucket (kEventBurst, then one per kEventRefill); events beyond it
//    are dropped and counted in dropped();
//  - state is kept for at most kMaxTrackedPolicies policies, the least recently seen go first.
// Only the leader records: the controller calls it from reconcile, which runs only while this
// replica leads. Failures are logged, never returned: an Event is not worth a retry loop.
// Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/kube/api_client.h"
#include "common/kube/clock.h"

namespace sonde::op {

inline constexpr auto kAggregateWindow = std::chrono::minutes(10);
inline constexpr int kEventBurst = 10;
inline constexpr auto kEventRefill = std::chrono::minutes(1);
inline constexpr size_t kMaxTrackedPolicies = 10000;

struct PolicyEvent {
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
};

// The events a status change from `old_status` (null or {} for a new policy) to `new_status`
// deserves.
std::vector<PolicyEvent> policy_events(const kube::Json& old_status, const kube::Json& new_status);

class EventRecorder {
 public:
  // `component`: source.component / reportingController; `instance`: this replica.
  EventRecorder(kube::ApiClient& client, std::string component, std::string instance,
                const kube::Clock& clock = kube::real_clock());

  // "written" (created or its count patched), "dropped" (over the policy's bound) or "failed".
  const char* record(const kube::Json& policy, const PolicyEvent& event,
                     kube::StopSignal* stop = nullptr);

  uint64_t written() const;
  uint64_t dropped() const;

 private:
  struct Aggregate {
    std::string name;  // of the Event object
    int64_t count = 0;
    kube::SteadyTime last{};
  };
  struct PolicyState {
    double tokens = kEventBurst;
    kube::SteadyTime refilled{};
    std::map<std::string, Aggregate> aggregates;  // type/reason/message -> its Event
    std::list<std::string>::iterator lru;
  };

  kube::ApiClient& client_;
  const std::string component_;
  const std::string instance_;
  const kube::Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, PolicyState> policies_;  // by policy UID
  std::list<std::string> lru_;                   // policy UIDs, most recent first
  uint64_t written_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace sonde::op
