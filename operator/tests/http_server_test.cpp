// /metrics, /healthz and /readyz over real HTTP.
#include "operator/http_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "common/kube/api_client.h"
#include "common/testing/free_port.h"

namespace sonde::op {
namespace {

TEST(HttpServerTest, ServesMetricsHealthAndReadiness) {
  OperatorMetrics metrics;
  metrics.reconciled("written", 0.002);
  metrics.set_leader(true);
  std::atomic<bool> ready{false};
  std::string problem;  // written before each probe below, read by the listener thread
  std::mutex problem_mu;
  const std::string address = "127.0.0.1:" + std::to_string(sonde::testing::free_port());
  HttpServer server(
      address, metrics, [&] { return ready.load(); },
      [&] {
        std::lock_guard lock(problem_mu);
        return problem;
      });
  ASSERT_TRUE(server.start().ok());

  kube::ClientConfig config;
  config.server = "http://" + address;
  kube::ApiClientOptions options;
  options.retry.max_attempts = 1;
  options.qps = 0;
  kube::ApiClient client(config, options);

  auto health = client.send("GET", "/healthz");
  ASSERT_TRUE(health.ok()) << health.error().message();
  EXPECT_EQ(health->status, 200);
  {
    std::lock_guard lock(problem_mu);
    problem = "leading without renewing the Lease";
  }
  auto unhealthy = client.send("GET", "/healthz");
  ASSERT_TRUE(unhealthy.ok());
  EXPECT_EQ(unhealthy->status, 503);
  EXPECT_EQ(unhealthy->body, "leading without renewing the Lease\n");
  {
    std::lock_guard lock(problem_mu);
    problem.clear();
  }
  EXPECT_EQ(client.send("GET", "/healthz")->status, 200);
  EXPECT_EQ(client.send("GET", "/readyz")->status, 503) << "not ready before the caches sync";
  ready = true;
  EXPECT_EQ(client.send("GET", "/readyz")->status, 200);

  auto scraped = client.send("GET", "/metrics");
  ASSERT_TRUE(scraped.ok());
  EXPECT_EQ(scraped->status, 200);
  EXPECT_NE(scraped->body.find("sonde_operator_reconciles_total{result=\"written\"} 1"),
            std::string::npos)
      << scraped->body;
  EXPECT_NE(scraped->body.find("sonde_operator_reconcile_duration_seconds_count 1"),
            std::string::npos);
  EXPECT_NE(scraped->body.find("sonde_operator_leader 1"), std::string::npos);
  EXPECT_NE(scraped->body.find("sonde_operator_queue_depth"), std::string::npos);
  EXPECT_EQ(client.send("GET", "/nope")->status, 404);
  server.stop();
}

}  // namespace
}  // namespace sonde::op
