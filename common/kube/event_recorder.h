// EventRecorder: writes Kubernetes Events (core/v1) about one object each (a policy for the
// operator, a pod for the agent's Node.js stalls), bounded so a flapping object cannot flood
// etcd:
//  - an Event repeated (same object UID, type, reason, message) within `aggregate_window` is
//    one object whose count and lastTimestamp are patched, as client-go's recorder does;
//  - each object has a token bucket (`burst`, then one per `refill`); Events beyond it are
//    dropped and counted in dropped();
//  - state is kept for at most `max_objects` objects, the least recently seen go first.
// Failures are logged, never returned: an Event is not worth a retry loop. Thread-safe; record()
// blocks its caller for the write (at most 10 s).
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/kube/api_client.h"

namespace sonde::kube {

struct EventNote {
  std::string type;  // "Normal" or "Warning"
  std::string reason;
  std::string message;
};

struct EventLimits {
  std::chrono::seconds aggregate_window = std::chrono::minutes(10);
  int burst = 10;
  std::chrono::seconds refill = std::chrono::minutes(1);
  size_t max_objects = 10000;
};

class EventRecorder {
 public:
  // `component`: source.component / reportingController; `instance`: this replica or node.
  EventRecorder(ApiClient& client, std::string component, std::string instance,
                const Clock& clock = real_clock(), EventLimits limits = {});

  // An Event about `object` (its apiVersion, kind and metadata name, namespace, uid and
  // resourceVersion make the involvedObject; a cluster-scoped object's go in "default", as
  // kubectl records them). "written" (created or its count patched), "dropped" (over the
  // object's bound) or "failed".
  const char* record(const Json& object, const EventNote& event, StopSignal* stop = nullptr);

  uint64_t written() const;
  uint64_t dropped() const;

 private:
  struct Aggregate {
    std::string name;  // of the Event object
    int64_t count = 0;
    SteadyTime last{};
  };
  struct ObjectState {
    double tokens = 0;
    SteadyTime refilled{};
    std::map<std::string, Aggregate> aggregates;  // type/reason/message -> its Event
    std::list<std::string>::iterator lru;
  };

  ApiClient& client_;
  const std::string component_;
  const std::string instance_;
  const Clock& clock_;
  const EventLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, ObjectState> objects_;  // by UID
  std::list<std::string> lru_;                  // UIDs, most recent first
  uint64_t written_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace sonde::kube
