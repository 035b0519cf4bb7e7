// NodeReportWriter against the fake API server (common/kube/testing).
#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "agent/cluster/node_report.h"
#include "common/kube/sonde_resources.h"
#include "common/kube/testing/fake_apiserver_process.h"

namespace sonde::agent {
namespace {

using kube::Json;

const kube::ResourceType kNodes{"", "v1", "nodes", false};

Json status_with(int matched, double blocked = 0) {
  PolicyReport r{.ns = "shop", .name = "web", .observed_generation = 1, .matched_pods = matched};
  r.event_loop_blocked_seconds = blocked;
  return report_status({"test", "6.1.0", true}, {r});
}

class NodeReportWriterTest : public ::testing::Test {
 protected:
  kube::testing::FakeApiServer server;
  kube::ApiClient client{server.client_config()};

  Json read_report() {
    auto r = client.get(kube::kProfilingNodeReports, "sonde", "node-a");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
    return r.ok() ? *r : Json();
  }
  int count_requests(const std::string& method, int status) {
    int n = 0;
    for (const auto& r : server.requests()) {
      if (r["method"] == method && r["status"] == status &&
          r["path"].get<std::string>().find("profilingnodereports") != std::string::npos) {
        ++n;
      }
    }
    return n;
  }
};

TEST_F(NodeReportWriterTest, CreatesThenReplacesWithOwnerReference) {
  auto node = client.create(kNodes, "", {{"metadata", {{"name", "node-a"}}}});
  ASSERT_TRUE(node.ok());
  NodeReportWriter writer(client, "node-a", "sonde", [] { return Json(); });
  ASSERT_TRUE(writer.write(status_with(1)).ok());
  Json report = read_report();
  EXPECT_EQ(report["spec"]["nodeName"], "node-a");
  EXPECT_EQ(report["status"]["policies"][0]["matchedPods"], 1);
  EXPECT_FALSE(report["status"]["heartbeatTime"].get<std::string>().empty());
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
  NodeReportWriter writer(client, "node-a", "sonde", [] { return Json(); });
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
  NodeReportWriter writer(client, "node-a", "sonde", [] { return Json(); });
  ASSERT_TRUE(writer.write(status_with(1)).ok());
  EXPECT_FALSE(read_report()["metadata"].contains("ownerReferences"));  // no such Node
  ASSERT_TRUE(client.remove(kube::kProfilingNodeReports, "sonde", "node-a").ok());
  ASSERT_TRUE(writer.write(status_with(3)).ok());
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 3);
  EXPECT_EQ(count_requests("POST", 201), 2);
}

TEST_F(NodeReportWriterTest, RunWritesOnChangeAndOnHeartbeatOnly) {
  std::mutex mu;
  Json current = status_with(1);
  ReportWriterOptions options{.poll = std::chrono::milliseconds(20),
                              .heartbeat = std::chrono::milliseconds(1500),
                              .blocked_seconds_refresh = std::chrono::milliseconds(700)};
  NodeReportWriter writer(
      client, "node-a", "sonde",
      [&] {
        std::lock_guard lock(mu);
        return current;
      },
      options);
  kube::StopSignal stop;
  std::thread t([&] { writer.run(stop); });
  auto wait_for_writes = [&](uint64_t n) {
    for (int i = 0; i < 200 && writer.writes() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return writer.writes();
  };
  EXPECT_EQ(wait_for_writes(1), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(writer.writes(), 1u);  // nothing changed, heartbeat not due

  {
    std::lock_guard lock(mu);
    current = status_with(2);
  }
  EXPECT_EQ(wait_for_writes(2), 2u);  // a count changed: written at once
  EXPECT_EQ(read_report()["status"]["policies"][0]["matchedPods"], 2);

  {
    std::lock_guard lock(mu);
    current = status_with(2, 0.5);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(writer.writes(), 2u);  // blocked seconds alone: not before the refresh interval
  EXPECT_EQ(wait_for_writes(3), 3u);
  EXPECT_EQ(read_report()["status"]["policies"][0]["eventLoopBlockedSecondsTotal"], 0.5);

  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(writer.writes(), 3u);
  EXPECT_EQ(wait_for_writes(4), 4u);  // the heartbeat
  stop.stop();
  t.join();
}

}  // namespace
}  // namespace sonde::agent
