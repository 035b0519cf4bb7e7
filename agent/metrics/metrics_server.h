// MetricsServer: the agent's Prometheus endpoint (prometheus-cpp's exposer on civetweb).
//
// Metrics are computed at scrape time by collector functions, so a value such as an event
// loop blocked right now is current when Prometheus reads it, not when an update last ran.
// Collectors run on the server's threads; they must be thread-safe.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace sonde::agent {

class MetricsServer {
 public:
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;

  // Listens on "host:port" (port 0 picks a free one). Fails with the reason (address in use,
  // bad address) instead of throwing.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address);
  ~MetricsServer();

  void add(Collector collector);
  int port() const;

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
};

// Builders for families (labels as name/value pairs, in order).
using LabelPairs = std::vector<std::pair<std::string, std::string>>;
prometheus::MetricFamily counter_family(std::string name, std::string help);
prometheus::MetricFamily gauge_family(std::string name, std::string help);
void add_sample(prometheus::MetricFamily& family, const LabelPairs& labels, double value);

}  // namespace sonde::agent
