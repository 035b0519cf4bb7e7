#include "common/crd/node_report.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace sonde::crd {
namespace {

NodeReportStatus sample() {
  NodeReportStatus s{.agent_version = "0.1.0", .kernel_release = "6.1.0", .btf = true};
  s.policies.push_back(
      {.uid = "b-uid",
       .observed_generation = 3,
       .matched_pods = 4,
       .instrumented_pods = 3,
       .nodejs_processes = 3,
       .problems = {{"SymbolsNotFound", 1, "web-1", "app", "uv__io_poll not found"},
                    {"LimitExceeded", 2, "web-2", "app", "over the limit"}}});
  s.policies.push_back({.uid = "a-uid", .observed_generation = 1});
  return s;
}

TEST(NodeReportTest, RoundTripsThroughJson) {
  NodeReportStatus s = sample();
  auto parsed = parse_node_report_status(to_json(s));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_EQ(*parsed, s);
}

TEST(NodeReportTest, SerializedSizeIsTheLengthOfTheJson) {
  NodeReportStatus s = sample();
  EXPECT_EQ(serialized_size(s), to_json(s).dump().size());
  s.policies[0].problems[0].message = "quote \" backslash \\ tab \t nul " + std::string(1, '\0') +
                                      " bell \a utf-8 \xc3\xa9 del \x7f";
  s.problems_cut = 12;
  s.policies_cut = 3;
  s.btf = false;
  EXPECT_EQ(serialized_size(s), to_json(s).dump().size());
  EXPECT_EQ(serialized_size(NodeReportStatus{}), to_json(NodeReportStatus{}).dump().size());
}

TEST(NodeReportTest, AnEntryThatSelectsNothingIsOnlyItsUidAndGeneration) {
  const Json j = to_json(sample());
  EXPECT_EQ(j["policies"][1], Json::parse(R"({"uid": "a-uid", "observedGeneration": 1})"));
  EXPECT_FALSE(j.contains("problemsCut"));
  EXPECT_FALSE(j.contains("heartbeatTime"));
}

TEST(NodeReportTest, AClusterPolicysProblemNamesThePodsNamespace) {
  NodeReportStatus s = sample();
  s.policies.push_back(
      {.uid = "0-uid",
       .observed_generation = 2,
       .matched_pods = 1,
       .problems = {{"SymbolsNotFound", 1, "api-1", "app", "no uv__io_poll", "team-a"}}});
  const Json j = to_json(s);
  EXPECT_EQ(j["policies"][2]["problems"][0]["namespace"], "team-a");
  EXPECT_FALSE(j["policies"][0]["problems"][0].contains("namespace"));
  EXPECT_EQ(serialized_size(s), j.dump().size());
  auto parsed = parse_node_report_status(j);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_EQ(*parsed, s);
  // The namespace is part of the example: cut with it.
  bound_report(s, serialized_size(s) - 1);
  EXPECT_EQ(s.policies[0].uid, "0-uid");
  EXPECT_EQ(s.policies[0].problems[0].ns, "team-a") << "the first entry is cut last";
  bound_report(s, 10);
  EXPECT_TRUE(s.policies[0].problems.empty());
}

TEST(NodeReportTest, ParseErrorsNameTheField) {
  auto no_uid =
      parse_node_report_status(Json::parse(R"({"policies": [{"observedGeneration": 1}]})"));
  ASSERT_FALSE(no_uid.ok());
  EXPECT_EQ(no_uid.error().message(), "status.policies[0].uid: required");
  auto reason = parse_node_report_status(Json::parse(
      R"({"policies": [{"uid": "u", "observedGeneration": 1, "problems": [{"reason": "Oops"}]}]})"));
  ASSERT_FALSE(reason.ok());
  EXPECT_EQ(reason.error().message(), "status.policies[0].problems[0].reason: unknown \"Oops\"");
  EXPECT_FALSE(parse_node_report_status(Json::parse(R"({"policies": {}})")).ok());
  EXPECT_FALSE(
      parse_node_report_status(
          Json::parse(
              R"({"policies": [{"uid": "u", "observedGeneration": 1, "matchedPods": -1}]})"))
          .ok());
}

TEST(NodeReportTest, BoundingSortsByUidAndKeepsAFittingReportWhole) {
  NodeReportStatus s = sample();
  bound_report(s);
  EXPECT_EQ(s.policies[0].uid, "a-uid");
  EXPECT_EQ(s.policies[1].problems.size(), 2u);
  EXPECT_EQ(s.problems_cut, 0);
}

TEST(NodeReportTest, BoundingCutsExamplesThenCountsFromTheLastEntries) {
  NodeReportStatus s = sample();
  const size_t whole = to_json(s).dump().size();
  NodeReportStatus examples_cut = s;
  bound_report(examples_cut, whole - 20);
  EXPECT_LE(to_json(examples_cut).dump().size(), whole - 20);
  const auto& kept = examples_cut.policies[1].problems;  // "b-uid" sorts last
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0], (PolicyProblem{"SymbolsNotFound", 1, "", "", ""}));
  EXPECT_EQ(kept[1].count, 2);
  EXPECT_EQ(examples_cut.problems_cut, 2);

  NodeReportStatus all_cut = s;
  bound_report(all_cut, 10);
  EXPECT_TRUE(all_cut.policies[1].problems.empty());
  EXPECT_EQ(all_cut.problems_cut, 4);  // two examples, then two counts
  EXPECT_EQ(all_cut.policies[1].matched_pods, 4) << "the numbers are never cut";
}

// The worst case the CRD allows: kMaxReportPolicies entries with the longest uid, the largest
// numbers and every reason with a maximal example. Bounded, it stays within kMaxReportBytes,
// and its fixed part alone leaves room to spare under etcd's 1.5 MiB.
TEST(NodeReportTest, TheLargestPossibleReportStaysUnderTheBudget) {
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  NodeReportStatus s{
      .agent_version = std::string(256, 'v'), .kernel_release = std::string(256, 'k'), .btf = true};
  for (size_t i = 0; i < kMaxReportPolicies + 7; ++i) {
    PolicyEntry e{.uid = std::string(kMaxUid - 8, 'u') + std::to_string(10000000 + i),
                  .observed_generation = kBig,
                  .matched_pods = kMaxCount,
                  .instrumented_pods = kMaxCount,
                  .nodejs_processes = kMaxCount};
    for (const char* reason : kProblemReasons) {
      e.problems.push_back(
          {reason, kMaxCount, std::string(kMaxPodName, 'p'), std::string(kMaxContainerName, 'c'),
           std::string(kMaxProblemMessage, 'm'), std::string(kMaxNamespaceName, 's')});
    }
    s.policies.push_back(std::move(e));
  }
  bound_report(s);
  const size_t bytes = to_json(s).dump().size();
  EXPECT_LE(bytes, kMaxReportBytes);
  EXPECT_EQ(s.policies.size(), kMaxReportPolicies);
  EXPECT_EQ(s.policies_cut, 7);
  EXPECT_GT(s.problems_cut, 0);
  NodeReportStatus fixed = s;
  for (auto& e : fixed.policies) e.problems.clear();
  EXPECT_LT(serialized_size(fixed), kMaxReportBytes);
  // The object around it (metadata, ownerReference) adds about 1 KiB; etcd's limit is 1.5 MiB.
  const Json object = report_object(std::string(253, 'n'), "sonde-system", std::string(36, 'x'), s);
  EXPECT_LT(object.dump().size(), kMaxReportBytes + 2048);
}

TEST(NodeReportTest, ReportObjectCarriesTheNodeAndItsOwner) {
  const Json o = report_object("node-a", "sonde-system", "nuid", sample());
  EXPECT_EQ(report_node(o), "node-a");
  EXPECT_EQ(o["metadata"]["ownerReferences"][0]["uid"], "nuid");
  EXPECT_EQ(o["kind"], "ProfilingNodeReport");
  EXPECT_FALSE(report_object("node-a", "ns", "", sample())["metadata"].contains("ownerReferences"));
  EXPECT_EQ(node_lease_name("node-a"), "sonde-node-node-a");
}

TEST(NodeReportTest, TheNodeLeaseHasTheKubeletsShape) {
  const auto lease = node_lease_object("node-a", "sonde-system", "nuid", std::chrono::seconds(40),
                                       WallTime(std::chrono::microseconds(1795942800123456)));
  EXPECT_EQ(lease["metadata"]["name"], "sonde-node-node-a");
  EXPECT_EQ(lease["metadata"]["labels"]["sonde.dev/node-lease"], "true");
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["uid"], "nuid");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-29T09:00:00.123456Z");
}

}  // namespace
}  // namespace sonde::crd
