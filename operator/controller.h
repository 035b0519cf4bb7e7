// Controller: turns ProfilingPolicies, ClusterProfilingPolicies and ProfilingNodeReports into
// policy status.
//
// An informer caches policies (in one namespace or all), another the ClusterProfilingPolicies
// (only when not scoped to a namespace: a scoped operator has no cluster-wide permission, and
// cluster policies are then neither honoured by the agents nor given a status). Queue keys are
// "namespace/name" for a ProfilingPolicy, "name" for a ClusterProfilingPolicy (a name has no
// '/'); both kinds get the same status and Events (a cluster policy's in the "default"
// namespace, as kubectl records them). A reflector keeps a compact
// ReportIndex of the agents' node reports (in the operator's namespace) and an informer the
// agents' node Leases there, whose renewTime says which nodes are stale. Both put the keys of
// affected policies on a WorkQueue. Workers — started only while this replica leads — reconcile one
// policy at a time (the queue never hands the same key to two workers): compute its status from the
// cached policy and its report entries, and PUT /status only when it differs from what the
// policy already has, with the cached resourceVersion so a stale view is refused (409) and
// retried. A deleted policy needs no write; its key is forgotten. A written status that changes
// what a user acts on (Accepted, Ready, Degraded) is also told as a Kubernetes Event on the
// policy (operator/events.h). Status writes and Events made while leading are cancelled when
// the workers' stop signal fires (leadership lost), so none lands late. Scraping the agents is the
// chart's business (its PodMonitor or scrape annotations), not the operator's.
//
// Thread-safe; start() once, run_workers() at most once (a replica that loses leadership
// exits rather than resuming).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/kube/api_client.h"
#include "common/kube/informer.h"
#include "common/kube/work_queue.h"
#include "operator/events.h"
#include "operator/metrics.h"
#include "operator/report_index.h"

namespace sonde::op {

struct ControllerOptions {
  std::string policy_namespace;  // empty: every namespace, and ClusterProfilingPolicies
  std::string report_namespace;  // where agents write their ProfilingNodeReports
  int workers = 2;
  // A node whose agent has not renewed its node Lease for this long is not trusted (the agent
  // may be gone): its entries are ignored and the policy is not Ready. Zero disables the
  // check. Policies are re-evaluated every report_ttl / 4 so Leases going stale are noticed
  // without an event.
  Duration report_ttl = std::chrono::minutes(3);
  kube::ReflectorOptions reflector;  // selectors/namespace fields are filled in per informer
  // A worker busy with one policy for longer than this is stuck: health_problem() says so.
  // A reconcile's calls are bounded by the client's timeouts and retries (the status write at
  // most 5 attempts of 30 s with backoff, about 4.5 min; the Events 10 s).
  Duration stuck_after = std::chrono::minutes(5);
  std::string identity = "sonde-operator";  // this replica, as Events' reportingInstance
};

class Controller {
 public:
  Controller(kube::ApiClient& client, ControllerOptions options, OperatorMetrics& metrics,
             const Clock& clock = real_clock());
  ~Controller();

  void start();
  bool synced() const;
  bool wait_for_sync(Duration timeout) const;

  // Waits for both caches to sync, then reconciles until `stop` fires. Blocks.
  void run_workers(kube::StopSignal& stop);

  enum class Outcome { kWritten, kUnchanged, kDeleted };
  // One reconcile of "namespace/name" (a ProfilingPolicy) or "name" (a
  // ClusterProfilingPolicy); exposed for tests.
  Result<Outcome> reconcile(const std::string& key);

  // Empty when every worker is making progress; else which is stuck and since when.
  std::string health_problem() const;
  const EventRecorder& events() const { return events_; }

  std::vector<PolicySeries> policy_series() const;
  NodeReportSeries node_report_series() const;
  size_t queue_depth() const { return queue_.len(); }

 private:
  // Every cached policy of both kinds.
  std::vector<kube::ObjectPtr> all_policies() const;
  void enqueue_all_policies();
  void process(int worker, const std::string& key);
  void enqueue_policies_with_uids(const std::vector<std::string>& uids);

  kube::ApiClient& client_;
  const ControllerOptions options_;
  OperatorMetrics& metrics_;
  const Clock& clock_;
  kube::WorkQueue queue_;
  EventRecorder events_;
  std::atomic<kube::StopSignal*> acting_{nullptr};  // the workers' stop while they run
  mutable std::mutex busy_mu_;
  std::map<int, std::pair<std::string, SteadyTime>> busy_;  // worker -> key, since
  ReportIndex index_;
  std::unique_ptr<kube::Informer> policies_;
  std::unique_ptr<kube::Informer> cluster_policies_;  // null when scoped to a namespace
  std::unique_ptr<kube::Informer> leases_;            // the agents' node Leases: liveness
  std::unique_ptr<kube::Reflector> reports_;
  kube::StopSignal reports_stop_;
  std::thread reports_thread_;
};

}  // namespace sonde::op
