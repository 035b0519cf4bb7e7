#include "agent/cluster/node_report.h"

#include <gtest/gtest.h>

namespace sonde::agent {
namespace {

using State = ProcessOutcome::State;

// A policy asks for a kind with an object, its parameters.
void ask(PolicyState& p, Instrumentation kind, bool on) {
  p.instrumentations[kind] = on ? default_params(kind) : InstrumentationParams();
}

std::string cid(char c) {
  return std::string(64, c);
}

PolicyState web_policy() {
  PolicyState p;
  p.id = {"shop", "web", "u1", 3};
  ask(p, Instrumentation::kNodejsEventLoop, true);
  p.max_targets_per_node = 100;
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
  o.states[Instrumentation::kNodejsEventLoop] = nodejs;
  o.message = std::move(message);
  return o;
}

TEST(BuildPolicyReports, CountsPodsAndProcesses) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kInstrumented),
      outcome(2, cid('a'), State::kSymbolsNotFound, "no Node.js symbols in /bin/sh"),  // its shell
      outcome(3, cid('b'), State::kInstrumented),
      outcome(4, cid('c'), State::kInstrumented),
      outcome(5, cid('z'), State::kInstrumented),  // another policy's container
  };
  auto reports = build_policy_reports({web_policy()}, outcomes);
  ASSERT_EQ(reports.size(), 1u);
  const auto& r = reports[0];
  EXPECT_EQ(r.uid, "u1");
  EXPECT_EQ(r.observed_generation, 3);
  EXPECT_EQ(r.matched_pods, 2);
  EXPECT_EQ(r.instrumented_pods, 2);
  EXPECT_EQ(r.nodejs_processes, 3);
  EXPECT_TRUE(r.problems.empty());  // the shell beside node is not a problem
}

TEST(BuildPolicyReports, NonNodeContainerIsSymbolsNotFound) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kInstrumented),
      outcome(3, cid('b'), State::kSymbolsNotFound,
              "no Node.js symbols (napi_module_register) in /usr/bin/sleep"),
      outcome(4, cid('c'), State::kInstrumented),
  };
  auto r = build_policy_reports({web_policy()}, outcomes)[0];
  EXPECT_EQ(r.matched_pods, 2);
  EXPECT_EQ(r.instrumented_pods, 1);  // web-1's proxy is not instrumented
  EXPECT_EQ(r.nodejs_processes, 2);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0],
            (crd::PolicyProblem{"SymbolsNotFound", 1, "web-1", "proxy",
                                "no Node.js symbols (napi_module_register) in /usr/bin/sleep"}));
}

// A ClusterProfilingPolicy's pods are of several namespaces: two pods of the same name are
// two pods, and a problem's example names its namespace.
TEST(BuildPolicyReports, AClusterPolicysPodsAreToldApartByNamespace) {
  PolicyState p;
  p.id = {"", "all-web", "cu1", 2, crd::PolicyKind::kCluster};
  ask(p, Instrumentation::kNodejsEventLoop, true);
  p.max_targets_per_node = 100;
  p.matched_pods = {"team-a/web-1", "team-b/web-1"};
  p.containers = {{"web-1", "app", cid('a'), "team-a"}, {"web-1", "app", cid('b'), "team-b"}};
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kInstrumented),
      outcome(2, cid('b'), State::kSymbolsNotFound, "no Node.js symbols in /usr/bin/sleep"),
  };
  auto r = build_policy_reports({p}, outcomes)[0];
  EXPECT_EQ(r.uid, "cu1");
  EXPECT_EQ(r.matched_pods, 2);
  EXPECT_EQ(r.instrumented_pods, 1);
  EXPECT_EQ(r.nodejs_processes, 1);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0], (crd::PolicyProblem{"SymbolsNotFound", 1, "web-1", "app",
                                               "no Node.js symbols in /usr/bin/sleep", "team-b"}));
  // A namespaced policy's example leaves the namespace out (it is the policy's).
  auto namespaced = build_policy_reports(
      {web_policy()}, {outcome(1, cid('a'), State::kSymbolsNotFound, "no symbols")})[0];
  ASSERT_FALSE(namespaced.problems.empty());
  EXPECT_EQ(namespaced.problems[0].ns, "");
}

TEST(BuildPolicyReports, KernelRefusalOutranksMissingSymbols) {
  std::vector<ProcessOutcome> outcomes = {
      outcome(1, cid('a'), State::kSymbolsNotFound, "no symbols"),
      outcome(2, cid('a'), State::kFailed, "Node.js probes could not be attached"),
  };
  auto r = build_policy_reports({web_policy()}, outcomes)[0];
  ASSERT_FALSE(r.problems.empty());
  EXPECT_EQ(r.problems[0].reason, "KernelUnsupported");
  EXPECT_EQ(r.problems[0].container, "app");
  EXPECT_EQ(r.instrumented_pods, 0);
}

// A process a policy's limits.maxUprobesPerNode left out is LimitExceeded, with the feature's
// message (which policy, which limit); a kernel refusal still outranks it.
TEST(BuildPolicyReports, AProcessLeftOutByAnUprobeLimitIsLimitExceeded) {
  auto p = web_policy();
  ask(p, Instrumentation::kNodejsEventLoop, false);
  ask(p, Instrumentation::kGoTls, true);
  ProcessOutcome over = outcome(1, cid('a'), State::kNotApplicable);
  over.states[Instrumentation::kGoTls] = State::kLimitExceeded;
  over.message = "not instrumented: policy shop/web allows limits.maxUprobesPerNode (5)";
  auto r = build_policy_reports({p}, {over})[0];
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "LimitExceeded");
  EXPECT_EQ(r.problems[0].message, over.message);
  EXPECT_EQ(r.problems[0].pod, "web-1");
  EXPECT_EQ(r.instrumented_pods, 0);
  ProcessOutcome refused = outcome(2, cid('a'), State::kNotApplicable);
  refused.states[Instrumentation::kGoTls] = State::kFailed;
  r = build_policy_reports({p}, {over, refused})[0];
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "KernelUnsupported");
}

// A container whose Go TLS probes were detached for its overhead budget is OverheadExceeded,
// with the feature's message; a policy's uprobe limit outranks it.
TEST(BuildPolicyReports, AContainerDetachedForItsOverheadBudgetIsOverheadExceeded) {
  auto p = web_policy();
  ask(p, Instrumentation::kNodejsEventLoop, false);
  ask(p, Instrumentation::kGoTls, true);
  ProcessOutcome detached = outcome(1, cid('a'), State::kNotApplicable);
  detached.states[Instrumentation::kGoTls] = State::kOverheadExceeded;
  detached.message = "Go TLS probes detached: they cost an estimated 43.21% (limit 1%)";
  auto r = build_policy_reports({p}, {detached})[0];
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "OverheadExceeded");
  EXPECT_EQ(r.problems[0].message, detached.message);
  EXPECT_EQ(r.instrumented_pods, 0);
  ProcessOutcome over = outcome(2, cid('a'), State::kNotApplicable);
  over.states[Instrumentation::kGoTls] = State::kLimitExceeded;
  r = build_policy_reports({p}, {detached, over})[0];
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "LimitExceeded");
}

TEST(BuildPolicyReports, ContainersWithoutProcessesAreNotInstrumentedNorProblems) {
  auto p = web_policy();
  p.containers.push_back({"web-3", "app", ""});  // not started
  p.matched_pods.push_back("web-3");
  auto r = build_policy_reports({p}, {})[0];
  EXPECT_EQ(r.matched_pods, 3);
  EXPECT_EQ(r.instrumented_pods, 0);
  EXPECT_TRUE(r.problems.empty());
}

TEST(BuildPolicyReports, GoTlsOnlyCountsNoNodeProcesses) {
  auto p = web_policy();
  ask(p, Instrumentation::kNodejsEventLoop, false);
  ask(p, Instrumentation::kGoTls, true);
  ProcessOutcome tls = outcome(1, cid('a'), State::kInstrumented);  // another policy's nodejs
  tls.states[Instrumentation::kGoTls] = State::kInstrumented;
  ProcessOutcome no_tls = outcome(2, cid('c'), State::kNotApplicable);  // no crypto/tls
  auto r = build_policy_reports({p}, {tls, no_tls})[0];
  EXPECT_EQ(r.nodejs_processes, 0);
  EXPECT_EQ(r.instrumented_pods, 0);  // web-1's proxy has no process, web-2 has nothing live
  EXPECT_TRUE(r.problems.empty());
}

TEST(BuildPolicyReports, CpuSamplingCountsAsLiveAndANodeThatCannotSampleSaysSo) {
  auto p = web_policy();
  ask(p, Instrumentation::kNodejsEventLoop, false);
  ask(p, Instrumentation::kCpu, true);
  ProcessOutcome sampled = outcome(1, cid('a'), State::kNotApplicable);
  sampled.states[Instrumentation::kCpu] = State::kInstrumented;
  ProcessOutcome refused = outcome(2, cid('c'), State::kNotApplicable,
                                   "CPU sampling unavailable: perf_event_open: No such device");
  refused.states[Instrumentation::kCpu] = State::kFailed;
  ProcessOutcome proxy = outcome(3, cid('b'), State::kNotApplicable);
  proxy.states[Instrumentation::kCpu] = State::kInstrumented;
  auto r = build_policy_reports({p}, {sampled, refused, proxy})[0];
  EXPECT_EQ(r.instrumented_pods, 1);  // web-1 is sampled; web-2 is refused
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].reason, "KernelUnsupported");
  EXPECT_EQ(r.problems[0].pod, "web-2");
  EXPECT_NE(r.problems[0].message.find("perf_event_open"), std::string::npos);
}

// One problem per reason: how many containers, and the first as the example.
TEST(BuildPolicyReports, ProblemsAreCountedPerReasonWithOneExample) {
  PolicyState p = web_policy();
  p.containers.clear();
  p.max_targets_per_node = 30;
  p.over_limit = {{"x", "app", cid('x')}, {"y", "app", cid('y')}};
  std::vector<ProcessOutcome> outcomes;
  for (int i = 0; i < 30; ++i) {
    std::string id = std::string(62, 'a') + std::to_string(10 + i);
    p.containers.push_back({"pod-" + std::to_string(i), "app", id});
    outcomes.push_back(outcome(100 + i, id, State::kSymbolsNotFound, std::string(2000, 'm')));
  }
  auto r = build_policy_reports({p}, outcomes)[0];
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0].reason, "LimitExceeded");
  EXPECT_EQ(r.problems[0].count, 2);
  EXPECT_EQ(r.problems[0].pod, "x");
  EXPECT_NE(r.problems[0].message.find("limits.maxTargetsPerNode (30)"), std::string::npos);
  EXPECT_EQ(r.problems[1].reason, "SymbolsNotFound");
  EXPECT_EQ(r.problems[1].count, 30);
  EXPECT_EQ(r.problems[1].pod, "pod-0");
  EXPECT_EQ(r.problems[1].message.size(), crd::kMaxProblemMessage);
}

TEST(BuildPolicyReports, ASpecTheAgentCannotApplyIsAnInvalidSpecProblem) {
  PolicyState p;
  p.id = {"shop", "bad", "u9", 2};
  p.invalid = "spec.targets: at least one target is required";
  auto r = build_policy_reports({p}, {})[0];
  EXPECT_EQ(r.observed_generation, 2);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0], (crd::PolicyProblem{"InvalidSpec", 1, "", "",
                                               "spec.targets: at least one target is required"}));
}

TEST(BuildPolicyReports, PolicyWithNothingOnThisNodeStillHasAnEntry) {
  PolicyState p;
  p.id = {"shop", "idle", "u2", 1};
  auto reports = build_policy_reports({p}, {outcome(1, cid('a'), State::kInstrumented)});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].matched_pods, 0);
  EXPECT_EQ(reports[0].instrumented_pods, 0);
}

TEST(ReportJson, StatusIsBoundedAndSorted) {
  std::vector<crd::PolicyEntry> entries = {{.uid = "u2", .observed_generation = 1},
                                           {.uid = "u1", .observed_generation = 3}};
  auto status = report_status({"0.1.0", "6.1.0", true}, entries);
  EXPECT_EQ(status.agent_version, "0.1.0");
  EXPECT_EQ(status.kernel_release, "6.1.0");
  EXPECT_TRUE(status.btf);
  ASSERT_EQ(status.policies.size(), 2u);
  EXPECT_EQ(status.policies[0].uid, "u1") << "sorted by uid, so equal sets compare equal";
}

}  // namespace
}  // namespace sonde::agent
