#include "agent/cluster/node_report.h"

#include <gtest/gtest.h>

namespace sonde::agent {
namespace {

using State = ProcessOutcome::State;

std::string cid(char c) {
  return std::string(64, c);
}

PolicyState web_policy() {
  PolicyState p;
  p.ns = "shop";
  p.name = "web";
  p.uid = "u1";
  p.generation = 3;
  p.nodejs_event_loop = true;
  p.matched_pods = {"web-1", "web-2"};
  p.containers = {
      {"web-1", "app", cid('a')}, {"web-1", "proxy", cid('b')}, {"web-2", "app", cid('c')}};
  return p;
}

ProcessOutcome outcome(pid_t pid, const std::string& container_id, State nodejs,
                       std::string message = "") {
  ProcessOutcome o;
  o.pid = pid;
  o.container_id = container_id;
  o.nodejs = nodejs;
  o.message = std::move(message);
  return o;
}

TEST(BuildPolicyReports, CountsPodsProcessesAndBlockedSeconds) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kInstrumented),
      outcome(2, cid('a'), State::kSymbolsNotFound, "no Node.js symbols in /bin/sh"),  // its shell
      outcome(3, cid('b'), State::kInstrumented),
      outcome(4, cid('c'), State::kInstrumented),
      outcome(5, cid('z'), State::kInstrumented),  // another policy's container
  };
  std::vector<EventLoopMonitor::Sample> samples = {
      {{"shop", "web-1", "app"}, 1.5, 1},
      {{"shop", "web-2", "app"}, 2.0, 1},
      {{"shop", "other", "app"}, 100.0, 1},
  };
  auto reports = build_policy_reports({web_policy()}, outcomes, samples);
  ASSERT_EQ(reports.size(), 1u);
  const auto& r = reports[0];
  EXPECT_EQ(r.ns, "shop");
  EXPECT_EQ(r.name, "web");
  EXPECT_EQ(r.uid, "u1");
  EXPECT_EQ(r.observed_generation, 3);
  EXPECT_EQ(r.matched_pods, 2);
  EXPECT_EQ(r.instrumented_pods, 2);
  EXPECT_EQ(r.nodejs_processes, 3);
  EXPECT_DOUBLE_EQ(r.event_loop_blocked_seconds, 3.5);
  EXPECT_TRUE(r.problems.empty());  // the shell beside node is not a problem
}

TEST(BuildPolicyReports, NonNodeContainerIsSymbolsNotFound) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kInstrumented),
      outcome(3, cid('b'), State::kSymbolsNotFound,
              "no Node.js symbols (napi_module_register) in /usr/bin/sleep"),
      outcome(4, cid('c'), State::kInstrumented),
  };
  auto r = build_policy_reports({web_policy()}, outcomes, {})[0];
  EXPECT_EQ(r.matched_pods, 2);
  EXPECT_EQ(r.instrumented_pods, 1);  // web-1's proxy is not instrumented
  EXPECT_EQ(r.nodejs_processes, 2);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0],
            (ReportProblem{"SymbolsNotFound", "web-1", "proxy",
                           "no Node.js symbols (napi_module_register) in /usr/bin/sleep"}));
}

TEST(BuildPolicyReports, KernelRefusalOutranksMissingSymbols) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kSymbolsNotFound, "no symbols"),
      outcome(2, cid('a'), State::kFailed, "Node.js probes could not be attached"),
  };
  auto r = build_policy_reports({web_policy()}, outcomes, {})[0];
  ASSERT_FALSE(r.problems.empty());
  EXPECT_EQ(r.problems[0].reason, "KernelUnsupported");
  EXPECT_EQ(r.problems[0].container, "app");
  EXPECT_EQ(r.instrumented_pods, 0);
}

TEST(BuildPolicyReports, ContainersWithoutProcessesAreNotInstrumentedNorProblems) {
  auto p = web_policy();
  p.containers.push_back({"web-3", "app", ""});  // not started
  p.matched_pods.push_back("web-3");
  auto r = build_policy_reports({p}, {}, {})[0];
  EXPECT_EQ(r.matched_pods, 3);
  EXPECT_EQ(r.instrumented_pods, 0);
  EXPECT_TRUE(r.problems.empty());
}

TEST(BuildPolicyReports, GoTlsOnlyCountsNoNodeProcessesOrBlockedTime) {
  auto p = web_policy();
  p.nodejs_event_loop = false;
  p.go_tls = true;
  ProcessOutcome tls = outcome(1, cid('a'), State::kInstrumented);  // another policy's nodejs
  tls.go_tls = State::kInstrumented;
  ProcessOutcome no_tls = outcome(2, cid('c'), State::kNotApplicable);  // no crypto/tls
  auto r = build_policy_reports({p}, {tls, no_tls}, {{{"shop", "web-1", "app"}, 5.0, 1}})[0];
  EXPECT_EQ(r.nodejs_processes, 0);
  EXPECT_DOUBLE_EQ(r.event_loop_blocked_seconds, 0);
  EXPECT_EQ(r.instrumented_pods, 0);  // web-1's proxy has no process, web-2 has nothing live
  EXPECT_TRUE(r.problems.empty());
}

TEST(BuildPolicyReports, CpuSamplingCountsAsLiveAndANodeThatCannotSampleSaysSo) {
  auto p = web_policy();
  p.nodejs_event_loop = false;
  p.cpu = true;
  ProcessOutcome sampled = outcome(1, cid('a'), State::kNotApplicable);
  sampled.cpu = State::kInstrumented;
  ProcessOutcome refused = outcome(2, cid('c'), State::kNotApplicable,
                                   "CPU sampling unavailable: perf_event_open: No such device");
  refused.cpu = State::kFailed;
  ProcessOutcome proxy = outcome(3, cid('b'), State::kNotApplicable);
  proxy.cpu = State::kInstrumented;
  auto r = build_policy_reports({p}, {sampled, refused, proxy}, {})[0];
  EXPECT_EQ(r.instrumented_pods, 1);  // web-1 is sampled; web-2 is refused
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "KernelUnsupported");
  EXPECT_EQ(r.problems[0].pod, "web-2");
  EXPECT_NE(r.problems[0].message.find("perf_event_open"), std::string::npos);
}

TEST(BuildPolicyReports, ProblemsAreBoundedAndKeepSelectorProblemsFirst) {
  PolicyState p = web_policy();
  p.containers.clear();
  p.problems = {{"LimitExceeded", "x", "app", "over the limit"}};
  std::vector<ProcessOutcome> outcomes;
  for (int i = 0; i < 30; ++i) {
    std::string id = std::string(62, 'a') + std::to_string(10 + i);
    p.containers.push_back({"pod-" + std::to_string(i), "app", id});
    outcomes.push_back(outcome(100 + i, id, State::kSymbolsNotFound, std::string(2000, 'm')));
  }
  auto r = build_policy_reports({p}, outcomes, {})[0];
  ASSERT_EQ(r.problems.size(), kMaxProblemsPerPolicy);
  EXPECT_EQ(r.problems[0].reason, "LimitExceeded");
  EXPECT_EQ(r.problems[1].reason, "SymbolsNotFound");
  EXPECT_EQ(r.problems[1].message.size(), kMaxProblemMessage);
}

TEST(BuildPolicyReports, PolicyWithNothingOnThisNodeStillHasAnEntry) {
  PolicyState p;
  p.ns = "shop";
  p.name = "idle";
  p.generation = 1;
  auto reports = build_policy_reports({p}, {outcome(1, cid('a'), State::kInstrumented)}, {});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].matched_pods, 0);
  EXPECT_EQ(reports[0].instrumented_pods, 0);
}

TEST(ReportJson, HasTheContractShape) {
  PolicyReport r{.ns = "shop",
                 .name = "web",
                 .uid = "u1",
                 .observed_generation = 3,
                 .matched_pods = 4,
                 .instrumented_pods = 3,
                 .nodejs_processes = 3,
                 .event_loop_blocked_seconds = 12.5,
                 .problems = {{"SymbolsNotFound", "web-2", "app", "no symbols"}}};
  auto status = report_status({"0.1.0", "6.1.0", true}, {r});
  EXPECT_EQ(status["agentVersion"], "0.1.0");
  EXPECT_EQ(status["kernel"]["release"], "6.1.0");
  EXPECT_EQ(status["kernel"]["btf"], true);
  const auto& e = status["policies"][0];
  EXPECT_EQ(e["namespace"], "shop");
  EXPECT_EQ(e["name"], "web");
  EXPECT_EQ(e["uid"], "u1");
  EXPECT_EQ(e["observedGeneration"], 3);
  EXPECT_EQ(e["matchedPods"], 4);
  EXPECT_EQ(e["instrumentedPods"], 3);
  EXPECT_EQ(e["nodejsProcesses"], 3);
  EXPECT_EQ(e["eventLoopBlockedSecondsTotal"], 12.5);
  EXPECT_EQ(e["problems"][0]["reason"], "SymbolsNotFound");
  EXPECT_EQ(e["problems"][0]["pod"], "web-2");
  EXPECT_EQ(e["problems"][0]["container"], "app");
  EXPECT_FALSE(status.contains("heartbeatTime"));

  auto object = report_object("node-a", "sonde-system", "nuid", status);
  EXPECT_EQ(object["apiVersion"], "sonde.dev/v1alpha1");
  EXPECT_EQ(object["kind"], "ProfilingNodeReport");
  EXPECT_EQ(object["metadata"]["name"], "node-a");
  EXPECT_EQ(object["metadata"]["namespace"], "sonde-system");
  EXPECT_EQ(
      object["metadata"]["ownerReferences"][0],
      (kube::Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "node-a"}, {"uid", "nuid"}}));
  EXPECT_EQ(object["spec"]["nodeName"], "node-a");
  EXPECT_FALSE(report_object("node-a", "ns", "", status)["metadata"].contains("ownerReferences"));
}

TEST(ReportJson, Rfc3339) {
  EXPECT_EQ(rfc3339(kube::WallTime(std::chrono::seconds(1795942800))), "2026-11-29T09:00:00Z");
}

}  // namespace
}  // namespace sonde::agent
