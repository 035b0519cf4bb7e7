#include "operator/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace sonde::op {

class OperatorMetrics::PolicyCollector final : public prometheus::Collectable {
 public:
  explicit PolicyCollector(const std::atomic<bool>& leading) : leading_(leading) {}

  void set_source(std::function<std::vector<PolicySeries>()> source) {
    std::lock_guard lock(mu_);
    source_ = std::move(source);
  }
  void set_node_source(std::function<NodeReportSeries()> source) {
    std::lock_guard lock(mu_);
    node_source_ = std::move(source);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::function<std::vector<PolicySeries>()> source;
    std::function<NodeReportSeries()> node_source;
    {
      std::lock_guard lock(mu_);
      source = source_;
      node_source = node_source_;
    }
    if (!leading_.load()) return {};
    std::vector<prometheus::MetricFamily> out;
    if (source) collect_policies(source(), out);
    if (node_source) collect_nodes(node_source(), out);
    return out;
  }

 private:
  static void collect_policies(const std::vector<PolicySeries>& series,
                               std::vector<prometheus::MetricFamily>& out) {
    auto gauges = [&](const char* name, const char* help, double PolicySeries::*field) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = prometheus::MetricType::Gauge;
      for (const auto& s : series) {
        prometheus::ClientMetric m;
        m.label = {{"namespace", s.ns}, {"policy", s.name}};
        m.gauge.value = s.*field;
        f.metric.push_back(std::move(m));
      }
      return f;
    };
    out.push_back(gauges("sonde_policy_matched_pods",
                         "Pods selected by the policy, over reporting nodes",
                         &PolicySeries::matched_pods));
    out.push_back(gauges("sonde_policy_instrumented_pods", "Selected pods that are instrumented",
                         &PolicySeries::instrumented_pods));
    out.push_back(gauges("sonde_policy_nodejs_processes",
                         "Node.js processes instrumented for the policy",
                         &PolicySeries::nodejs_processes));
  }

  static void collect_nodes(const NodeReportSeries& nodes,
                            std::vector<prometheus::MetricFamily>& out) {
    prometheus::MetricFamily reports{
        "sonde_node_reports", "ProfilingNodeReports known", prometheus::MetricType::Gauge, {}};
    prometheus::ClientMetric count;
    count.gauge.value = nodes.reports;
    reports.metric.push_back(std::move(count));
    prometheus::MetricFamily stale{
        "sonde_node_report_stale",
        "1 for each node whose agent's node Lease was renewed longer ago than the "
        "report TTL (its agent may be gone)",
        prometheus::MetricType::Gauge,
        {}};
    for (const auto& node : nodes.stale_nodes) {
      prometheus::ClientMetric m;
      m.label = {{"node", node}};
      m.gauge.value = 1;
      stale.metric.push_back(std::move(m));
    }
    out.push_back(std::move(reports));
    out.push_back(std::move(stale));
  }

  const std::atomic<bool>& leading_;
  mutable std::mutex mu_;
  std::function<std::vector<PolicySeries>()> source_;
  std::function<NodeReportSeries()> node_source_;
};

OperatorMetrics::OperatorMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  reconciles_ = &prometheus::BuildCounter()
                     .Name("sonde_operator_reconciles_total")
                     .Help("Policy reconciles by result")
                     .Register(*registry_);
  errors_ = &prometheus::BuildCounter()
                 .Name("sonde_operator_reconcile_errors_total")
                 .Help("Reconciles that failed and were requeued with backoff")
                 .Register(*registry_)
                 .Add({});
  duration_ =
      &prometheus::BuildHistogram()
           .Name("sonde_operator_reconcile_duration_seconds")
           .Help("Time to reconcile one policy, including the status write")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                            0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  status_writes_ = &prometheus::BuildCounter()
                        .Name("sonde_operator_status_writes_total")
                        .Help("ProfilingPolicy /status writes")
                        .Register(*registry_)
                        .Add({});
  events_ = &prometheus::BuildCounter()
                 .Name("sonde_operator_events_total")
                 .Help("Kubernetes Events about policies, by result (written, dropped, failed)")
                 .Register(*registry_);
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("sonde_operator_queue_depth")
                      .Help("Policies waiting to be reconciled")
                      .Register(*registry_)
                      .Add({});
  leader_gauge_ = &prometheus::BuildGauge()
                       .Name("sonde_operator_leader")
                       .Help("1 while this replica holds the leader lease")
                       .Register(*registry_)
                       .Add({});
  policy_collector_ = std::make_shared<PolicyCollector>(leading_);
  registry_->Collect();  // validates the families eagerly
}

std::string OperatorMetrics::serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : policy_collector_->Collect()) families.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

void OperatorMetrics::reconciled(const std::string& result, double seconds) {
  reconciles_->Add({{"result", result}}).Increment();
  if (result == "error") errors_->Increment();
  duration_->Observe(seconds);
}

void OperatorMetrics::event_recorded(const std::string& result) {
  events_->Add({{"result", result}}).Increment();
}

void OperatorMetrics::set_leader(bool leading) {
  leading_.store(leading);
  leader_gauge_->Set(leading ? 1 : 0);
}

void OperatorMetrics::set_policy_source(std::function<std::vector<PolicySeries>()> source) {
  policy_collector_->set_source(std::move(source));
}

void OperatorMetrics::set_node_report_source(std::function<NodeReportSeries()> source) {
  policy_collector_->set_node_source(std::move(source));
}

}  // namespace sonde::op
