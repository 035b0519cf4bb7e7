// NodeReportWriter against the fake API server (common/kube/testing).
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <thread>

#include "agent/cluster/node_report.h"
#include "common/kube/sonde_resources.h"
#include "common/kube/testing/fake_apiserver_process.h"

namespace sonde::agent {
namespace {

using kube::Json;

const kube::ResourceType kNodes{"", "v1", "nodes", false};

crd::NodeReportStatus status_with(int matched) {
  return report_status({"test", "6.1.0", true},
                       {{.uid = "u-web", .observed_generation = 1, .matched_pods = matched}});
}

class NodeReportWriterTest : public ::testing::Test {
 protected:
  kube::testing::FakeApiServer server;
  kube::ApiClient client{server.client_config()};

  Json read_lease() {
    auto r = client.get(kube::kLeases, "sonde", "sonde-node-node-a");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? *r : Json();
  }
  Json read_report() {
    auto r = client.get(kube::kProfilingNodeReports, "sonde", "node-a");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? *r : Json();
  }
  int count_requests(const std::string& method, int status,
                     const std::string& plural = "profilingnodereports") {
    int n = 0;
    for (const auto& r : server.requests()) {
      if (r["method"] == method && r["status"] == status &&
          r["path"].get<std::string>().find(plural) != std::string::npos) {
        ++n;
      }
    }
    return n;
  }
};

TEST_F(NodeReportWriterTest, CreatesThenReplacesWithOwnerReference) {
  auto node = client.create(kNodes, "", {{"metadata", {{"name", "node-a"}}}});
  ASSERT_TRUE(node.ok());
  NodeReportWriter writer(client, "node-a", "sonde", [] { return crd::NodeReportStatus(); });
  ASSERT_TRUE(writer.write(status_with(1)).ok());
  Json report = read_report();
  EXPECT_EQ(report["spec"]["nodeName"], "node-a");
  EXPECT_EQ(report["status"]["policies"][0]["matchedPods"], 1);
  EXPECT_FALSE(report["status"].contains("heartbeatTime")) << "liveness is the Lease's";
  ASSERT_TRUE(report["metadata"].contains("ownerReferences"));
  EXPECT_EQ(report["metadata"]["ownerReferences"][0]["uid"], kube::uid_of(*node));
  EXPECT_EQ(report["metadata"]["ownerReferences"][0]["kind"], "Node");

  ASSERT_TRUE(writer.write(status_with(2)).ok());
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 2);
  EXPECT_EQ(writer.writes(), 2u);
  EXPECT_EQ(count_requests("POST", 201), 1);
  EXPECT_EQ(count_requests("PUT", 200), 1);
}

TEST_F(NodeReportWriterTest, RereadsAndRetriesOnConflict) {
  NodeReportWriter writer(client, "node-a", "sonde", [] { return crd::NodeReportStatus(); });
  ASSERT_TRUE(writer.write(status_with(1)).ok());
  // Someone else writes the report: our resourceVersion is stale.
  ASSERT_TRUE(client
                  .merge_patch(kube::kProfilingNodeReports, "sonde", "node-a",
                               {{"metadata", {{"labels", {{"x", "y"}}}}}})
                  .ok());
  ASSERT_TRUE(writer.write(status_with(5)).ok());
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 5);
  EXPECT_EQ(count_requests("PUT", 409), 1);
  EXPECT_EQ(count_requests("PUT", 200), 1);
}

TEST_F(NodeReportWriterTest, RecreatesADeletedReportAndWorksWithoutANode) {
  NodeReportWriter writer(client, "node-a", "sonde", [] { return crd::NodeReportStatus(); });
  ASSERT_TRUE(writer.write(status_with(1)).ok());
  EXPECT_FALSE(read_report()["metadata"].contains("ownerReferences"));  // no such Node
  ASSERT_TRUE(client.remove(kube::kProfilingNodeReports, "sonde", "node-a").ok());
  ASSERT_TRUE(writer.write(status_with(3)).ok());
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 3);
  EXPECT_EQ(count_requests("POST", 201), 2);
}

TEST_F(NodeReportWriterTest, RenewsTheNodeLeaseWithoutTouchingTheReport) {
  auto node = client.create(kNodes, "", {{"metadata", {{"name", "node-a"}}}});
  ASSERT_TRUE(node.ok());
  NodeReportWriter writer(client, "node-a", "sonde", [] { return crd::NodeReportStatus(); });
  ASSERT_TRUE(writer.renew_lease().ok());
  Json lease = read_lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease["metadata"]["labels"]["sonde.dev/node-lease"], "true");
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["uid"], kube::uid_of(*node));
  const std::string first = lease["spec"]["renewTime"];
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(writer.renew_lease().ok());
  EXPECT_NE(read_lease()["spec"]["renewTime"], first);
  EXPECT_EQ(writer.lease_renewals(), 2u);
  EXPECT_EQ(count_requests("PUT", 200, "leases"), 1);
  EXPECT_EQ(count_requests("POST", 201, "profilingnodereports"), 0);
}

// The report is written when what it says changes, at most once per min_interval, and never
// for a heartbeat; the Lease is renewed on its own clock.
TEST_F(NodeReportWriterTest, RunWritesTheReportOnChangeOnlyAndRenewsTheLease) {
  std::mutex mu;
  crd::NodeReportStatus current = status_with(1);
  ReportWriterOptions options{.poll = std::chrono::milliseconds(20),
                              .min_interval = std::chrono::milliseconds(1000),
                              .renew_interval = std::chrono::milliseconds(200)};
  NodeReportWriter writer(
      client, "node-a", "sonde",
      [&] {
        std::lock_guard lock(mu);
        return current;
      },
      options);
  kube::StopSignal stop;
  std::thread t([&] { writer.run(stop); });
  auto wait_for = [&](const std::function<uint64_t()>& counter, uint64_t n) {
    for (int i = 0; i < 300 && counter() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return counter();
  };
  auto writes = [&] { return writer.writes(); };
  EXPECT_EQ(wait_for(writes, 1), 1u);
  EXPECT_GE(wait_for([&] { return writer.lease_renewals(); }, 3), 3u);
  EXPECT_EQ(writer.writes(), 1u) << "nothing changed: no report write, only Lease renewals";

  {
    std::lock_guard lock(mu);
    current = status_with(2);
  }
  EXPECT_EQ(wait_for(writes, 2), 2u);
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 2);

  // A burst of changes within min_interval: one write with the last state.
  for (int m = 3; m <= 6; ++m) {
    {
      std::lock_guard lock(mu);
      current = status_with(m);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_EQ(wait_for(writes, 3), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(writer.writes(), 3u);
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 6);
  stop.stop();
  t.join();
  EXPECT_EQ(count_requests("PUT", 200), 2);
}

}  // namespace
}  // namespace sonde::agent
