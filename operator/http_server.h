// HttpServer: the operator's one HTTP endpoint for Prometheus and the kubelet:
//   GET /metrics  Prometheus text format (OperatorMetrics::serialize)
//   GET /healthz  200 while the operator works; 503 naming the problem when `health` reports
//                 one (a leader that cannot renew its lease, a stuck worker), so the kubelet's
//                 liveness probe restarts it
//   GET /readyz   200 once the caches have synced, 503 before
// One listener serves all three, which is why the operator uses prometheus-cpp's core for
// the registry and text format but not its pull Exposer (that cannot serve other paths).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "operator/metrics.h"

namespace sonde::op {

class HttpServer {
 public:
  // `address`: "host:port"; port 0 is not supported by the underlying listener.
  // `health`: empty when healthy, else what is wrong; called per probe, from a listener
  // thread.
  HttpServer(std::string address, const OperatorMetrics& metrics, std::function<bool()> ready,
             std::function<std::string()> health = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  Status start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonde::op
