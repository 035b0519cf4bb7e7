#include "operator/report_index.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sonde::op {
namespace {

using kube::Json;

Json report(const std::string& node, const std::string& rv, Json entries) {
  return {{"metadata", {{"name", node}, {"namespace", "sonde-system"}, {"resourceVersion", rv}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"policies", entries}}}};
}

Json entry(const std::string& name, int64_t generation, int matched) {
  return {{"namespace", "a"},
          {"name", name},
          {"observedGeneration", generation},
          {"matchedPods", matched}};
}

struct Changes {
  std::vector<std::string> keys;
  int node_changes = 0;
};

TEST(ReportIndexTest, IndexesByPolicyAndReportsWhatChanged) {
  Changes seen;
  ReportIndex index([&](const std::vector<std::string>& keys, bool nodes_changed) {
    seen.keys.insert(seen.keys.end(), keys.begin(), keys.end());
    seen.node_changes += nodes_changed ? 1 : 0;
  });
  EXPECT_FALSE(index.synced());
  index.replace({report("n1", "r1", {entry("p", 1, 2), entry("q", 1, 0)}),
                 report("n2", "r2", {entry("p", 1, 3)})},
                "r2");
  EXPECT_TRUE(index.synced());
  EXPECT_EQ(index.nodes(), 2u);
  ASSERT_EQ(index.entries_for("a/p").size(), 2u);
  EXPECT_EQ(index.entries_for("a/p")[1].entry.matched_pods, 3);
  EXPECT_EQ(seen.node_changes, 1);

  // The same versions again (a relist after 410): no change reported.
  seen = {};
  index.replace({report("n1", "r1", {entry("p", 1, 2), entry("q", 1, 0)}),
                 report("n2", "r2", {entry("p", 1, 3)})},
                "r2");
  EXPECT_TRUE(seen.keys.empty());
  EXPECT_EQ(seen.node_changes, 0);

  // n1 stops reporting q and changes p; only those two policies are named.
  index.apply(kube::WatchEvent::Type::kModified, report("n1", "r3", {entry("p", 2, 2)}));
  std::sort(seen.keys.begin(), seen.keys.end());
  EXPECT_EQ(seen.keys, (std::vector<std::string>{"a/p", "a/q"}));
  EXPECT_TRUE(index.entries_for("a/q").empty());

  // n2 disappears from a relist: its entries go, and the node set changed.
  seen = {};
  index.replace({report("n1", "r3", {entry("p", 2, 2)})}, "r4");
  EXPECT_EQ(index.nodes(), 1u);
  EXPECT_EQ(seen.keys, (std::vector<std::string>{"a/p"}));
  EXPECT_EQ(seen.node_changes, 1);

  index.apply(kube::WatchEvent::Type::kDeleted, report("n1", "r5", {}));
  EXPECT_EQ(index.nodes(), 0u);
  EXPECT_TRUE(index.entries_for("a/p").empty());
}

TEST(ReportIndexTest, ParsesHeartbeatsAndFindsStaleNodes) {
  const auto t = parse_rfc3339("2026-11-29T09:00:00Z");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1795942800);
  EXPECT_EQ(parse_rfc3339("2026-11-29T10:00:00.123+01:00"), t);
  EXPECT_FALSE(parse_rfc3339("yesterday").has_value());
  EXPECT_FALSE(parse_rfc3339("2026-11-29T09:00:00").has_value()) << "no zone";

  ReportIndex index;
  Json fresh = report("n1", "r1", Json::array());
  fresh["status"]["heartbeatTime"] = "2026-11-29T09:00:00Z";
  Json old = report("n2", "r2", Json::array());
  old["status"]["heartbeatTime"] = "2026-11-29T08:00:00Z";
  index.replace({fresh, old, report("n3", "r3", Json::array())}, "r3");
  EXPECT_EQ(index.stale_nodes(*t - std::chrono::minutes(3)), (std::set<std::string>{"n2"}))
      << "n3 has no heartbeat and is never stale";
}

TEST(ReportIndexTest, MalformedEntriesReadAsEmpty) {
  const EntrySummary s = summarize_entry(
      {{"observedGeneration", "3"}, {"matchedPods", 2.5}, {"problems", {1, {{"reason", 7}}}}});
  EXPECT_EQ(s.observed_generation, 0);
  EXPECT_EQ(s.matched_pods, 0);
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_EQ(s.problems[0].reason, "");
}

}  // namespace
}  // namespace sonde::op
