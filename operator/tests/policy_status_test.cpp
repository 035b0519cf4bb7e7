#include "operator/policy_status.h"

#include <gtest/gtest.h>

namespace sonde::op {
namespace {

using kube::Json;

Json policy(int64_t generation, Json spec = nullptr) {
  if (spec.is_null()) {
    spec = {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
            {"instrumentations", {{"nodejsEventLoop", Json::object()}}}};
  }
  return {{"metadata", {{"name", "web"}, {"namespace", "team-a"}, {"generation", generation}}},
          {"spec", spec}};
}

crd::PolicyEntry entry(int64_t generation, int matched, int instrumented,
                       std::vector<crd::PolicyProblem> problems = {}) {
  return {.uid = "u-web",
          .observed_generation = generation,
          .matched_pods = matched,
          .instrumented_pods = instrumented,
          .nodejs_processes = instrumented,
          .problems = std::move(problems)};
}

const Json* find_condition(const Json& status, const std::string& type) {
  for (const auto& c : status["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

TEST(PolicyStatusTest, SumsCurrentGenerationEntriesAndIsReadyWhenAllNodesReport) {
  const Json status =
      compute_status(policy(3), {{"n1", entry(3, 2, 2)}, {"n2", entry(3, 1, 1)}}, 2, 0, "T0");
  EXPECT_EQ(status["observedGeneration"], 3);
  EXPECT_EQ(status["matchedPods"], 3);
  EXPECT_EQ(status["instrumentedPods"], 3);
  EXPECT_EQ(status["nodesReporting"], 2);
  EXPECT_EQ((*find_condition(status, "Accepted"))["status"], "True");
  EXPECT_EQ((*find_condition(status, "Ready"))["status"], "True");
  EXPECT_EQ((*find_condition(status, "Ready"))["reason"], "AllNodesReporting");
  EXPECT_EQ((*find_condition(status, "Degraded"))["status"], "False");
}

TEST(PolicyStatusTest, StaleEntriesAreNotCountedAndReadyWaits) {
  const Json status =
      compute_status(policy(4), {{"n1", entry(3, 5, 5)}, {"n2", entry(4, 1, 1)}}, 2, 0, "T0");
  EXPECT_EQ(status["matchedPods"], 1);
  EXPECT_EQ(status["nodesReporting"], 1);
  const Json& ready = *find_condition(status, "Ready");
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["reason"], "WaitingForNodes");
  EXPECT_EQ(ready["message"], "1 of 2 nodes report generation 4");
}

TEST(PolicyStatusTest, StaleReportsKeepThePolicyFromReady) {
  const Json status = compute_status(policy(2), {{"n1", entry(2, 1, 1)}}, 1, 1, "T0");
  const Json& ready = *find_condition(status, "Ready");
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["reason"], "StaleNodeReports");
  EXPECT_EQ(ready["message"],
            "1 node has not reported recently; 1 of 1 current nodes report generation 2");
  EXPECT_EQ(status["staleNodes"], 1);
  EXPECT_EQ(status["nodes"], 1);
}

TEST(PolicyStatusTest, NoAgentsYet) {
  const Json status = compute_status(policy(1), {}, 0, 0, "T0");
  EXPECT_EQ((*find_condition(status, "Ready"))["reason"], "NoAgents");
}

TEST(PolicyStatusTest, DegradedNamesTheMostFrequentReasonAndThePods) {
  const Json status = compute_status(
      policy(1),
      {{"n1", entry(1, 3, 0,
                    {{"SymbolsNotFound", 2, "web-1", "app", "no uv__io_poll in /usr/bin/node"},
                     {"LimitExceeded", 1, "web-3", "app", ""}})},
       {"n2", entry(1, 1, 0, {{"SymbolsNotFound", 1, "", "", ""}}), true}},
      2, 0, "T0");
  const Json& degraded = *find_condition(status, "Degraded");
  EXPECT_EQ(degraded["status"], "True");
  EXPECT_EQ(degraded["reason"], "SymbolsNotFound");
  const std::string message = degraded["message"];
  EXPECT_NE(message.find("SymbolsNotFound: 3 containers, LimitExceeded: 1 container"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("web-1/app on n1: no uv__io_poll"), std::string::npos) << message;
  EXPECT_NE(message.find("some node reports left problems out"), std::string::npos)
      << "n2's report was cut: " << message;
}

TEST(PolicyStatusTest, TiesGoToTheMoreSevereReason) {
  const Json status = compute_status(
      policy(1),
      {{"n1",
        entry(1, 2, 0, {{"Conflicting", 1, "a", "", ""}, {"KernelUnsupported", 1, "b", "", ""}})}},
      1, 0, "T0");
  EXPECT_EQ((*find_condition(status, "Degraded"))["reason"], "KernelUnsupported");
}

TEST(PolicyStatusTest, OverheadExceededRanksBetweenLimitExceededAndSymbolsNotFound) {
  auto reason = [](const std::string& a, const std::string& b) {
    const Json status = compute_status(
        policy(1), {{"n1", entry(1, 2, 0, {{a, 1, "a", "", ""}, {b, 1, "b", "", ""}})}}, 1, 0,
        "T0");
    return (*find_condition(status, "Degraded"))["reason"].get<std::string>();
  };
  EXPECT_EQ(reason("OverheadExceeded", "LimitExceeded"), "LimitExceeded");
  EXPECT_EQ(reason("SymbolsNotFound", "OverheadExceeded"), "OverheadExceeded");
}

TEST(PolicyStatusTest, SuspendedPoliciesAreNotReady) {
  Json p = policy(2);
  p["spec"]["suspend"] = true;
  const Json status = compute_status(p, {{"n1", entry(2, 0, 0)}}, 1, 0, "T0");
  const Json& ready = *find_condition(status, "Ready");
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["reason"], "Suspended");
  EXPECT_EQ(ready["message"],
            "spec.suspend is true: no pod is instrumented; 1 of 1 nodes report generation 2");
  EXPECT_EQ((*find_condition(status, "Accepted"))["reason"], "Valid");
}

TEST(PolicyStatusTest, AnAgentThatCannotApplyTheSpecMakesItNotAccepted) {
  const Json status = compute_status(
      policy(1),
      {{"n1", entry(1, 0, 0, {{"InvalidSpec", 1, "", "", "spec.targets[0]: unknown field"}})},
       {"n2", entry(1, 1, 1)}},
      2, 0, "T0");
  const Json& accepted = *find_condition(status, "Accepted");
  EXPECT_EQ(accepted["status"], "False");
  EXPECT_EQ(accepted["reason"], "RejectedByAgents");
  EXPECT_EQ(accepted["message"],
            "1 node's agent cannot apply the spec: n1: spec.targets[0]: unknown field");
  EXPECT_EQ((*find_condition(status, "Ready"))["reason"], "InvalidSpec");
  EXPECT_EQ((*find_condition(status, "Degraded"))["reason"], "AsExpected")
      << "a rejection is not a per-pod problem";
}

TEST(PolicyStatusTest, TransitionTimesSurviveWhileStatusHolds) {
  Json p = policy(1);
  p["status"] = compute_status(p, {{"n1", entry(1, 1, 1)}}, 1, 0, "T0");
  const Json again = compute_status(p, {{"n1", entry(1, 1, 1)}}, 1, 0, "T1");
  EXPECT_EQ(again, p["status"]) << "an unchanged world must give an identical status";

  const Json degraded =
      compute_status(p, {{"n1", entry(1, 1, 0, {{"LimitExceeded", 1, "x", "", ""}})}}, 1, 0, "T2");
  EXPECT_EQ((*find_condition(degraded, "Degraded"))["lastTransitionTime"], "T2");
  EXPECT_EQ((*find_condition(degraded, "Ready"))["lastTransitionTime"], "T0");
}

TEST(PolicyStatusTest, InvalidSpecIsNotAccepted) {
  Json spec = {
      {"targets",
       {{{"selector", {{"matchExpressions", {{{"key", "app"}, {"operator", "Matches"}}}}}}}}},
      {"instrumentations", {{"cpu", {{"frequencyHz", 49}}}}}};
  Json status = compute_status(policy(1, spec), {}, 1, 0, "T0");
  const Json& accepted = *find_condition(status, "Accepted");
  EXPECT_EQ(accepted["status"], "False");
  EXPECT_EQ(accepted["reason"], "InvalidSpec");
  EXPECT_NE(accepted["message"].get<std::string>().find("matchExpressions[0].operator"),
            std::string::npos);
  EXPECT_EQ((*find_condition(status, "Ready"))["reason"], "InvalidSpec");
}

}  // namespace
}  // namespace sonde::op
