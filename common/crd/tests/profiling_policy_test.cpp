#include "common/crd/profiling_policy.h"

#include <gtest/gtest.h>

#include <fstream>

namespace sonde::crd {
namespace {

Json table_cases() {
  std::ifstream in(SONDE_POLICY_TABLE);
  EXPECT_TRUE(in.good()) << SONDE_POLICY_TABLE;
  return Json::parse(in)["cases"];
}

// crds/tests/check_policy_table.py checks the same cases against the CRD's schema.
TEST(ProfilingPolicyTest, AgreesWithTheCrdSchemaOnTheValidationTable) {
  const Json cases = table_cases();
  ASSERT_GT(cases.size(), 20u);
  size_t valid = 0;
  for (const auto& c : cases) {
    auto parsed = parse_policy_spec(c["spec"]);
    EXPECT_EQ(parsed.ok(), c["valid"].get<bool>())
        << c["name"] << ": " << (parsed.ok() ? "accepted" : parsed.error().message());
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.error().message().rfind("spec", 0), 0u)
          << "errors name the field: " << parsed.error().message();
      continue;
    }
    ++valid;
    auto again = parse_policy_spec(to_json(*parsed));
    ASSERT_TRUE(again.ok()) << c["name"] << ": " << again.error().message();
    EXPECT_EQ(*again, *parsed) << c["name"];
  }
  EXPECT_GT(valid, 3u);
  EXPECT_LT(valid, cases.size());
}

TEST(ProfilingPolicyTest, ParsesEveryFieldAndFillsTheSchemaDefaults) {
  const Json spec = Json::parse(R"({
    "targets": [{"selector": {"matchLabels": {"app": "web"},
                              "matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["a"]}]},
                 "containers": ["app", "side"]},
                {"workload": {"kind": "StatefulSet", "name": "db"}}],
    "excludes": [{"selector": {}}],
    "instrumentations": {"cpu": {}, "goTLS": {}},
    "suspend": true})");
  auto parsed = parse_policy_spec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  const PolicySpec& p = *parsed;
  ASSERT_EQ(p.targets.size(), 2u);
  ASSERT_TRUE(p.targets[0].selector.has_value());
  EXPECT_EQ(p.targets[0].selector->match_labels.at("app"), "web");
  EXPECT_EQ(p.targets[0].selector->match_expressions[0].op, LabelRequirement::Op::kNotIn);
  EXPECT_EQ(p.targets[0].containers, (std::vector<std::string>{"app", "side"}));
  EXPECT_EQ(p.targets[1].workload, (WorkloadRef{"StatefulSet", "db"}));
  ASSERT_EQ(p.excludes.size(), 1u);
  EXPECT_TRUE(p.excludes[0].selector->match_labels.empty());
  EXPECT_EQ(p.instrumentations.cpu, CpuProfiling{19});
  EXPECT_TRUE(p.instrumentations.go_tls);
  EXPECT_FALSE(p.instrumentations.nodejs_event_loop);
  EXPECT_EQ(p.limits, PolicyLimits{});
  EXPECT_EQ(p.limits.max_targets_per_node, 100);
  EXPECT_TRUE(p.suspend);
  // The serialized form carries the defaults, as the API server stores them.
  const Json out = to_json(p);
  EXPECT_EQ(out["instrumentations"]["cpu"]["frequencyHz"], 19);
  EXPECT_EQ(out["limits"]["maxUprobesPerNode"], 1000);
  EXPECT_EQ(out["suspend"], true);
}

TEST(ProfilingPolicyTest, ErrorsNameTheFieldAtFault) {
  auto bad = parse_policy_spec(Json::parse(R"({
    "targets": [{"selector": {}}, {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}],
    "instrumentations": {"nodejsEventLoop": {}}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "spec.targets[1].selector.matchExpressions[0].values: required for operator In");
  auto hz = parse_policy_spec(Json::parse(
      R"({"targets": [{"selector": {}}], "instrumentations": {"cpu": {"frequencyHz": 5000}}})"));
  ASSERT_FALSE(hz.ok());
  EXPECT_EQ(hz.error().message(),
            "spec.instrumentations.cpu.frequencyHz: must be 1..999, got 5000");
  EXPECT_FALSE(parse_policy_spec(Json()).ok());
}

TEST(ProfilingPolicyTest, LabelSelectorsMatchAsKubernetesDoes) {
  LabelSelector s{{{"app", "web"}},
                  {{"tier", LabelRequirement::Op::kIn, {"front", "edge"}},
                   {"canary", LabelRequirement::Op::kDoesNotExist, {}}}};
  EXPECT_TRUE(s.matches({{"app", "web"}, {"tier", "edge"}}));
  EXPECT_FALSE(s.matches({{"app", "web"}, {"tier", "back"}}));
  EXPECT_FALSE(s.matches({{"app", "web"}, {"tier", "edge"}, {"canary", "1"}}));
  EXPECT_FALSE(s.matches({{"tier", "edge"}}));
  EXPECT_TRUE(LabelSelector{}.matches({}));
  LabelSelector not_in{{}, {{"t", LabelRequirement::Op::kNotIn, {"x"}}}};
  EXPECT_TRUE(not_in.matches({}));
  EXPECT_FALSE(not_in.matches({{"t", "x"}}));
}

TEST(ProfilingPolicyTest, PolicyIdReadsTheObjectsIdentity) {
  const Json policy = {
      {"metadata", {{"namespace", "shop"}, {"name", "p"}, {"uid", "u-1"}, {"generation", 4}}}};
  EXPECT_EQ(policy_id(policy), (PolicyId{"shop", "p", "u-1", 4}));
}

}  // namespace
}  // namespace sonde::crd
