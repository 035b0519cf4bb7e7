#include "agent/metrics/metrics_server.h"

#include <exception>

namespace sonde::agent {
namespace {

class FunctionCollectable : public prometheus::Collectable {
 public:
  explicit FunctionCollectable(MetricsServer::Collector fn) : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return fn_(); }

 private:
  MetricsServer::Collector fn_;
};

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address) {
  std::unique_ptr<MetricsServer> self(new MetricsServer());
  try {
    self->exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
  } catch (const std::exception& e) {
    return Error("listen for /metrics on " + address + ": " + e.what() +
                 " (is the port in use? set --metrics-address)");
  }
  return self;
}

MetricsServer::~MetricsServer() {
  // Stop serving before the collectors (and what they capture) go away.
  exposer_.reset();
}

void MetricsServer::add(Collector collector) {
  auto c = std::make_shared<FunctionCollectable>(std::move(collector));
  exposer_->RegisterCollectable(c);
  collectables_.push_back(std::move(c));
}

int MetricsServer::port() const {
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

prometheus::MetricFamily counter_family(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Counter, {}};
}

prometheus::MetricFamily gauge_family(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
}

void add_sample(prometheus::MetricFamily& family, const LabelPairs& labels, double value) {
  prometheus::ClientMetric m;
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  if (family.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family.metric.push_back(std::move(m));
}

}  // namespace sonde::agent
