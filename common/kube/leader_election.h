// LeaderElector: leader election on a coordination.k8s.io/v1 Lease, so that of several
// replicas exactly one acts (writes status) at a time.
//
// Semantics (those of client-go's leaderelection):
//  - A candidate takes the Lease when it does not exist, when it names no holder, or when its
//    record has not changed for leaseDuration as measured on the candidate's own clock since it
//    first saw that record (never by comparing another machine's timestamps to ours).
//  - Every write carries the resourceVersion that was read; a 409 Conflict means another
//    candidate wrote first and this attempt simply failed.
//  - The leader renews every retryPeriod; when no renewal has succeeded for renewDeadline it
//    stops leading. renewDeadline < leaseDuration leaves a margin in which the old leader has
//    stopped acting before anyone else may take over. That holds whatever the server does: a
//    renewal's GET and PUT together get what is left until the deadline (real time), the
//    request in flight is cancelled when it runs out, and the leader steps down then — a
//    server that stops answering mid-renewal cannot keep it leading past the deadline.
//  - On a clean stop the leader releases the Lease (empty holder) so a successor need not wait.
//
// run() blocks on the calling thread. Callbacks run on that thread and must not block.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/kube/api_client.h"
#include "common/kube/stop_signal.h"

namespace sonde::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  Duration lease_duration = std::chrono::seconds(15);
  Duration renew_deadline = std::chrono::seconds(10);
  Duration retry_period = std::chrono::seconds(2);
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading;
  // Leadership lost (renewal failed past the deadline) or given up on stop.
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;
};

// Checks renew_deadline < lease_duration, retry_period < renew_deadline, non-empty names.
Status validate(const LeaderElectionConfig& config);

class LeaderElector {
 public:
  LeaderElector(ApiClient& client, LeaderElectionConfig config, const Clock& clock = real_clock());

  // Campaigns until leading, leads until leadership is lost or `stop` fires, then returns.
  // Returns true when it returned because leadership was lost (not because of `stop`).
  bool run(StopSignal& stop, const LeaderCallbacks& callbacks);

  bool is_leader() const { return leading_.load(); }
  std::string observed_leader() const;
  // For a liveness probe: false while this replica leads but its last successful renewal is
  // older than the renew deadline (its elector is stuck; a working one steps down at the
  // deadline). A replica that does not lead is healthy. Thread-safe.
  bool healthy() const;

  // One acquire-or-renew attempt; exposed for tests. True when we hold the Lease after it.
  bool try_acquire_or_renew() { return attempt(Duration::zero(), nullptr); }

 private:
  // An attempt whose calls together end within `budget` (zero: only the client's timeouts)
  // or when `stop` fires.
  bool attempt(Duration budget, StopSignal* stop);
  void release();

  ApiClient& client_;
  const LeaderElectionConfig config_;
  const Clock& clock_;
  std::atomic<bool> leading_{false};
  std::atomic<SteadyTime::rep> last_renew_{0};  // on clock_, while leading
  mutable std::mutex mu_;
  Json observed_spec_;        // the Lease spec last seen
  SteadyTime observed_at_{};  // when (on our clock) it last changed
  std::string observed_holder_;
};

// RFC 3339 with microseconds, UTC ("2006-01-02T15:04:05.000000Z"): metav1.MicroTime.
std::string format_micro_time(WallTime t);

}  // namespace sonde::kube
