// OperatorMetrics: the operator's Prometheus metrics.
//
// Controller health: sonde_operator_reconciles_total{result}, ..._reconcile_errors_total,
// ..._reconcile_duration_seconds (histogram), ..._status_writes_total, ..._queue_depth,
// ..._leader (1 while this replica leads).
//
// Policy level, built at scrape time from the node reports and exported only by the leader
// (so two replicas never export the same series): sonde_policy_matched_pods,
// sonde_policy_instrumented_pods, sonde_policy_nodejs_processes and
// sonde_policy_event_loop_blocked_seconds_total, labelled {namespace, policy}. The last is
// the sum over the policy's pods of the agents'
// container_nodejs_event_loop_blocked_time_seconds_total; it drops when an agent restarts,
// which Prometheus' rate() treats as a counter reset.
//
// Thread-safe.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sonde::op {

struct PolicySeries {
  std::string ns;
  std::string name;
  double matched_pods = 0;
  double instrumented_pods = 0;
  double nodejs_processes = 0;
  double event_loop_blocked_seconds = 0;
};

class OperatorMetrics {
 public:
  OperatorMetrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // The Prometheus text exposition of everything registered.
  std::string serialize() const;

  // result: "written", "unchanged", "deleted" or "error".
  void reconciled(const std::string& result, double seconds);
  void status_written() { status_writes_->Increment(); }
  void set_queue_depth(size_t depth) { queue_depth_->Set(static_cast<double>(depth)); }
  void set_leader(bool leading);
  bool leader() const { return leading_.load(); }
  // Where policy series come from (the controller); called at every scrape while leading.
  void set_policy_source(std::function<std::vector<PolicySeries>()> source);

 private:
  class PolicyCollector;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Counter* errors_;
  prometheus::Histogram* duration_;
  prometheus::Counter* status_writes_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* leader_gauge_;
  std::atomic<bool> leading_{false};
  std::shared_ptr<PolicyCollector> policy_collector_;
};

}  // namespace sonde::op
