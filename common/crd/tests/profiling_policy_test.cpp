#include "common/crd/profiling_policy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

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
  size_t valid = 0, cluster = 0;
  for (const auto& c : cases) {
    const PolicyKind kind = c.value("kind", "ProfilingPolicy") == "ClusterProfilingPolicy"
                                ? PolicyKind::kCluster
                                : PolicyKind::kNamespaced;
    cluster += kind == PolicyKind::kCluster ? 1 : 0;
    auto parsed = parse_policy_spec(c["spec"], kind);
    EXPECT_EQ(parsed.ok(), c["valid"].get<bool>())
        << c["name"] << ": " << (parsed.ok() ? "accepted" : parsed.error().message());
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.error().message().rfind("spec", 0), 0u)
          << "errors name the field: " << parsed.error().message();
      continue;
    }
    ++valid;
    EXPECT_EQ(parsed->namespace_selector.has_value(), kind == PolicyKind::kCluster) << c["name"];
    auto again = parse_policy_spec(to_json(*parsed), kind);
    ASSERT_TRUE(again.ok()) << c["name"] << ": " << again.error().message();
    EXPECT_EQ(*again, *parsed) << c["name"];
  }
  EXPECT_GT(cluster, 5u);
  EXPECT_GT(valid, 3u);
  EXPECT_LT(valid, cases.size());
}

// Every kind of the registry (generated with the CRDs from agent/*/*.crd.yaml) parses alone: a
// policy asking for one kind, as the CRD's CEL rule admits, requests that kind and no other.
TEST(ProfilingPolicyTest, ParsesEveryInstrumentationAlone) {
  for (const auto& asked : instrumentation_kinds()) {
    const Json spec = {{"targets", Json::array({{{"selector", Json::object()}}})},
                       {"instrumentations", {{std::string(asked.key), Json::object()}}}};
    auto parsed = parse_policy_spec(spec);
    ASSERT_TRUE(parsed.ok()) << asked.key << ": " << parsed.error().message();
    for (const auto& kind : instrumentation_kinds()) {
      EXPECT_EQ(parsed->instrumentations[kind.id].has_value(), kind.id == asked.id)
          << "asked for " << asked.key << ", got " << kind.key;
    }
  }
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
  const Json asked = to_json(p.instrumentations);
  EXPECT_EQ(asked, Json({{"cpu", {{"frequencyHz", 19}}}, {"goTLS", Json::object()}}));
  EXPECT_FALSE(p.instrumentations[Instrumentation::kNodejsEventLoop]);
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
  auto pct = parse_policy_spec(Json::parse(
      R"({"targets": [{"selector": {}}], "instrumentations": {"goTLS": {}},
          "limits": {"maxOverheadPercent": 0}})"));
  ASSERT_FALSE(pct.ok());
  EXPECT_EQ(pct.error().message(), "spec.limits.maxOverheadPercent: must be 0.01..100, got 0");
  auto budget = parse_policy_spec(Json::parse(
      R"({"targets": [{"selector": {}}], "instrumentations": {"goTLS": {}},
          "limits": {"maxOverheadPercent": 2.5}})"));
  ASSERT_TRUE(budget.ok()) << budget.error().message();
  EXPECT_EQ(budget->limits.max_overhead_percent, 2.5);
  EXPECT_EQ(to_json(*budget)["limits"]["maxOverheadPercent"], 2.5);
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
  const Json cluster = {{"metadata", {{"name", "all"}, {"uid", "u-2"}, {"generation", 2}}}};
  EXPECT_EQ(policy_id(cluster, PolicyKind::kCluster),
            (PolicyId{"", "all", "u-2", 2, PolicyKind::kCluster}));
  EXPECT_STREQ(kind_name(PolicyKind::kCluster), "ClusterProfilingPolicy");
  EXPECT_STREQ(kind_name(PolicyKind::kNamespaced), "ProfilingPolicy");
}

TEST(ClusterProfilingPolicyTest, SharesTheSpecAndRequiresANamespaceSelector) {
  const Json spec = Json::parse(R"({
    "namespaceSelector": {"matchLabels": {"team": "a"},
                          "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
    "targets": [{"selector": {"matchLabels": {"app": "web"}}}],
    "instrumentations": {"nodejsEventLoop": {}}})");
  auto parsed = parse_policy_spec(spec, PolicyKind::kCluster);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  ASSERT_TRUE(parsed->namespace_selector.has_value());
  EXPECT_TRUE(parsed->namespace_selector->matches({{"team", "a"}, {"env", "prod"}}));
  EXPECT_FALSE(parsed->namespace_selector->matches({{"team", "a"}, {"env", "dev"}}));
  // The rest is ProfilingPolicy's spec, parsed by the same code.
  Json namespaced = spec;
  namespaced.erase("namespaceSelector");
  auto same = parse_policy_spec(namespaced);
  ASSERT_TRUE(same.ok());
  PolicySpec without = *parsed;
  without.namespace_selector.reset();
  EXPECT_EQ(without, *same);
  // Serialized with the selector, read back equal.
  const Json out = to_json(*parsed);
  EXPECT_EQ(out["namespaceSelector"]["matchLabels"]["team"], "a");
  auto again = parse_policy_spec(out, PolicyKind::kCluster);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *parsed);
  // {} is every namespace; a missing selector is an error naming the field.
  Json all = namespaced;
  all["namespaceSelector"] = Json::object();
  auto every = parse_policy_spec(all, PolicyKind::kCluster);
  ASSERT_TRUE(every.ok());
  EXPECT_TRUE(every->namespace_selector->matches({{"anything", "x"}}));
  auto missing = parse_policy_spec(namespaced, PolicyKind::kCluster);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message().rfind("spec.namespaceSelector: required", 0), 0u)
      << missing.error().message();
  Json bad = namespaced;
  bad["namespaceSelector"] = {{"matchExpressions", {{{"key", "team"}, {"operator", "In"}}}}};
  auto in = parse_policy_spec(bad, PolicyKind::kCluster);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.error().message(),
            "spec.namespaceSelector.matchExpressions[0].values: required for operator In");
  // A namespaced policy ignores the field (its schema prunes it).
  auto pruned = parse_policy_spec(spec);
  ASSERT_TRUE(pruned.ok());
  EXPECT_FALSE(pruned->namespace_selector.has_value());
}

}  // namespace
}  // namespace sonde::crd
