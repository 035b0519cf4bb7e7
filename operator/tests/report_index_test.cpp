#include "operator/report_index.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/testing/manual_clock.h"

namespace sonde::op {
namespace {

using kube::Json;

Json report(const std::string& node, const std::string& rv, Json entries) {
  return {{"metadata", {{"name", node}, {"namespace", "sonde-system"}, {"resourceVersion", rv}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"policies", entries}}}};
}

Json entry(const std::string& uid, int64_t generation, int matched) {
  return {{"uid", uid}, {"observedGeneration", generation}, {"matchedPods", matched}};
}

struct Changes {
  std::vector<std::string> uids;
  int node_changes = 0;
};

TEST(ReportIndexTest, IndexesByPolicyUidAndReportsWhatChanged) {
  Changes seen;
  ReportIndex index([&](const std::vector<std::string>& uids, bool nodes_changed) {
    seen.uids.insert(seen.uids.end(), uids.begin(), uids.end());
    seen.node_changes += nodes_changed ? 1 : 0;
  });
  EXPECT_FALSE(index.synced());
  index.replace({report("n1", "r1", {entry("p", 1, 2), entry("q", 1, 0)}),
                 report("n2", "r2", {entry("p", 1, 3)})},
                "r2");
  EXPECT_TRUE(index.synced());
  EXPECT_EQ(index.nodes(), 2u);
  ASSERT_EQ(index.entries_for("p").size(), 2u);
  EXPECT_EQ(index.entries_for("p")[1].entry.matched_pods, 3);
  EXPECT_EQ(seen.node_changes, 1);

  // The same versions again (a relist after 410): no change reported.
  seen = {};
  index.replace({report("n1", "r1", {entry("p", 1, 2), entry("q", 1, 0)}),
                 report("n2", "r2", {entry("p", 1, 3)})},
                "r2");
  EXPECT_TRUE(seen.uids.empty());
  EXPECT_EQ(seen.node_changes, 0);

  // n1 stops reporting q and changes p; only those two policies are named.
  index.apply(kube::WatchEvent::Type::kModified, report("n1", "r3", {entry("p", 2, 2)}));
  std::sort(seen.uids.begin(), seen.uids.end());
  EXPECT_EQ(seen.uids, (std::vector<std::string>{"p", "q"}));
  EXPECT_TRUE(index.entries_for("q").empty());

  // n2 disappears from a relist: its entries go, and the node set changed.
  seen = {};
  index.replace({report("n1", "r3", {entry("p", 2, 2)})}, "r4");
  EXPECT_EQ(index.nodes(), 1u);
  EXPECT_EQ(seen.uids, (std::vector<std::string>{"p"}));
  EXPECT_EQ(seen.node_changes, 1);

  index.apply(kube::WatchEvent::Type::kDeleted, report("n1", "r5", {}));
  EXPECT_EQ(index.nodes(), 0u);
  EXPECT_TRUE(index.entries_for("p").empty());
}

TEST(ReportIndexTest, StalenessComesFromTheNodeLeases) {
  ::sonde::testing::ManualClock clock;
  int node_changes = 0;
  ReportIndex index([&](const std::vector<std::string>&,
                        bool nodes_changed) { node_changes += nodes_changed ? 1 : 0; },
                    std::chrono::minutes(3), clock);
  const WallTime now = clock.wall_now();
  index.replace({report("n1", "r1", Json::array()), report("n2", "r2", Json::array()),
                 report("n3", "r3", Json::array())},
                "r3");
  node_changes = 0;
  index.set_heartbeat("n1", now);
  index.set_heartbeat("n2", now - std::chrono::minutes(10));
  EXPECT_EQ(node_changes, 1) << "n1 turned fresh; n2 stays stale";
  EXPECT_EQ(index.stale_nodes(now - std::chrono::minutes(3)), (std::set<std::string>{"n2", "n3"}))
      << "n3 has no Lease";
  index.set_heartbeat("n2", now);
  EXPECT_EQ(node_changes, 2);
  index.set_heartbeat("n1", std::nullopt);  // the Lease was deleted
  EXPECT_EQ(node_changes, 3);
  EXPECT_EQ(index.stale_nodes(now - std::chrono::minutes(3)), (std::set<std::string>{"n1", "n3"}));
  index.set_heartbeat("n9", now);  // a Lease without a report changes nothing
  EXPECT_EQ(node_changes, 3);
}

TEST(ReportIndexTest, AnUnreadableReportIsANodeWithoutEntries) {
  ReportIndex index;
  Json bad = report("n1", "r1", {{{"observedGeneration", "3"}, {"matchedPods", 2.5}}});
  index.replace({bad, report("n2", "r2", {entry("p", 1, 1)})}, "r2");
  EXPECT_EQ(index.nodes(), 2u);
  ASSERT_EQ(index.entries_for("p").size(), 1u);
  EXPECT_EQ(index.entries_for("p")[0].node, "n2");
}

}  // namespace
}  // namespace sonde::op
