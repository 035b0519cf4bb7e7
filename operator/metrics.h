// OperatorMetrics: the operator's Prometheus metrics.
//
// Controller health: sonde_operator_reconciles_total{result}, ..._reconcile_errors_total,
// ..._reconcile_duration_seconds (histogram), ..._status_writes_total, ..._queue_depth,
// ..._leader (1 while this replica leads).
//
// Policy level, built at scrape time from the node reports and exported only by the leader
// (so two replicas never export the same series): the gauges sonde_policy_matched_pods,
// sonde_policy_instrumented_pods and sonde_policy_nodejs_processes, labelled
// {namespace, policy}. Gauges only: a counter summed over pods from node reports would drop
// whenever an agent restarts or a pod leaves, and rate() would read the remaining sum as new
// increase. Policy-level blocked time is aggregated in PromQL from the agents' per-container
// counters joined with their sonde_policy_selection info series (the chart's recording rules).
// Node reports, also from the leader: sonde_node_reports (how many) and
// sonde_node_report_stale{node} 1 for each node whose node Lease was renewed longer ago than the
// report TTL (its agent may be gone; the chart's SondeNodeReportStale alert).
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
};

struct NodeReportSeries {
  double reports = 0;
  std::vector<std::string> stale_nodes;
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
  // result: "written", "dropped" (over the per-policy bound) or "failed".
  void event_recorded(const std::string& result);
  void set_queue_depth(size_t depth) { queue_depth_->Set(static_cast<double>(depth)); }
  void set_leader(bool leading);
  bool leader() const { return leading_.load(); }
  // Where policy series come from (the controller); called at every scrape while leading.
  void set_policy_source(std::function<std::vector<PolicySeries>()> source);
  // Likewise for the node report series.
  void set_node_report_source(std::function<NodeReportSeries()> source);

 private:
  class PolicyCollector;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Counter* errors_;
  prometheus::Histogram* duration_;
  prometheus::Counter* status_writes_;
  prometheus::Family<prometheus::Counter>* events_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* leader_gauge_;
  std::atomic<bool> leading_{false};
  std::shared_ptr<PolicyCollector> policy_collector_;
};

}  // namespace sonde::op
