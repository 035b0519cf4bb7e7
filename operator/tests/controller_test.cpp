// The controller against the fake API server: policy create, change and delete drive status
// (counts, observedGeneration, Accepted/Ready/Degraded), status is written only when it
// changes, policy-level metrics come from the node reports, transitions that matter are told
// as Kubernetes Events (once, aggregated), ClusterProfilingPolicies get the same status and
// Events (in "default") unless the operator is scoped to a namespace, and a stuck worker makes
// the controller unhealthy.
#include "operator/controller.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "operator/tests/operator_fixture.h"

namespace sonde::op::testing {
namespace {

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : client_(fake_.client_config(), client_options()) {
    ControllerOptions options;
    options.report_namespace = "sonde-system";
    options.reflector.backoff = {std::chrono::milliseconds(50), std::chrono::milliseconds(500), 2.0,
                                 0.5};
    controller_ = std::make_unique<Controller>(client_, options, metrics_);
  }
  ~ControllerTest() override {
    stop_.stop();
    if (workers_.joinable()) workers_.join();
  }
  static kube::ApiClientOptions client_options() {
    kube::ApiClientOptions o;
    o.user_agent = "controller-test";
    o.retry.max_attempts = 1;
    o.qps = 0;  // the test polls the server through this client too
    return o;
  }
  // Events about policy `name` in team-a: reason -> [type, count, message].
  std::map<std::string, std::tuple<std::string, int64_t, std::string>> events_of(
      const std::string& name) {
    std::map<std::string, std::tuple<std::string, int64_t, std::string>> out;
    auto page = client_.list(kube::kEvents, "team-a", {});
    EXPECT_TRUE(page.ok());
    if (!page.ok()) return out;
    for (const auto& e : page->items) {
      if (e["involvedObject"]["name"] != name) continue;
      EXPECT_EQ(out.count(e["reason"]), 0u) << "one Event object per reason and message";
      out[e["reason"]] = {e["type"], e["count"], e["message"]};
    }
    return out;
  }
  void start() {
    controller_->start();
    ASSERT_TRUE(controller_->wait_for_sync(std::chrono::seconds(10)));
    metrics_.set_leader(true);
    workers_ = std::thread([this] { controller_->run_workers(stop_); });
  }
  size_t successful_writes() {
    size_t n = 0;
    for (const auto& w : status_writes(fake_)) n += w["status"] == 200 ? 1 : 0;
    return n;
  }
  Json get(const std::string& name) {
    auto p = client_.get(kProfilingPolicies, "team-a", name);
    return p.ok() ? *p : Json();
  }
  // The node's agent renews its Lease and writes its report.
  void put_report(const std::string& node, Json entries) {
    put_lease(node, std::chrono::system_clock::now());
    put_object(client_, kProfilingNodeReports, make_report(node, std::move(entries)));
  }
  void put_lease(const std::string& node, WallTime renewed) {
    put_object(client_, kube::kLeases, make_node_lease(node, renewed));
  }
  std::string create_policy(const std::string& name) {
    auto created = client_.create(kProfilingPolicies, "team-a", make_policy("team-a", name));
    EXPECT_TRUE(created.ok());
    return created.ok() ? kube::uid_of(*created) : "";
  }

  kube::testing::FakeApiServer fake_;
  kube::ApiClient client_;
  OperatorMetrics metrics_;
  std::unique_ptr<Controller> controller_;
  kube::StopSignal stop_;
  std::thread workers_;
};

TEST_F(ControllerTest, PolicyLifecycleDrivesStatus) {
  start();
  const std::string uid = create_policy("web");
  ASSERT_TRUE(
      eventually([&] { return condition_reason(get("web"), "Ready") == "False/NoAgents"; }));
  EXPECT_EQ(condition_reason(get("web"), "Accepted"), "True/Valid");
  EXPECT_EQ(get("web")["status"]["observedGeneration"], 1);

  // Two agents report: one pod on n2 cannot be instrumented (no symbols).
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  put_report("n2", {report_entry(uid, 1, 2, 1,
                                 {{{"reason", "SymbolsNotFound"},
                                   {"count", 1},
                                   {"pod", "web-7"},
                                   {"container", "app"},
                                   {"message", "uv__io_poll not found in /usr/local/bin/node"}}})});
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["nodesReporting"] == 2; }));
  Json web = get("web");
  EXPECT_EQ(web["status"]["matchedPods"], 4);
  EXPECT_EQ(web["status"]["instrumentedPods"], 3);
  EXPECT_EQ(condition_reason(web, "Ready"), "True/AllNodesReporting");
  EXPECT_EQ(condition_reason(web, "Degraded"), "True/SymbolsNotFound");
  EXPECT_NE((*condition_of(web, "Degraded"))["message"].get<std::string>().find("web-7/app on n2"),
            std::string::npos);

  // A spec change: generation 2; nodes still report generation 1 until their agents catch up.
  ASSERT_TRUE(client_
                  .merge_patch(kProfilingPolicies, "team-a", "web",
                               {{"spec", {{"instrumentations", {{"cpu", {{"frequencyHz", 99}}}}}}}})
                  .ok());
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["observedGeneration"] == 2; }));
  web = get("web");
  EXPECT_EQ(condition_reason(web, "Ready"), "False/WaitingForNodes");
  EXPECT_EQ(web["status"]["nodesReporting"], 0);
  put_report("n1", {report_entry(uid, 2, 2, 2)});
  put_report("n2", {report_entry(uid, 2, 2, 2)});
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["instrumentedPods"] == 4; }));
  EXPECT_EQ(condition_reason(get("web"), "Ready"), "True/AllNodesReporting");
  EXPECT_EQ(condition_reason(get("web"), "Degraded"), "False/AsExpected");

  // Delete: no write may follow (there is nothing to write to).
  ASSERT_TRUE(client_.remove(kProfilingPolicies, "team-a", "web").ok());
  ASSERT_TRUE(eventually([&] { return controller_->policy_series().empty(); }));
  const size_t writes = status_writes(fake_).size();
  put_report("n1", {report_entry(uid, 2, 3, 3)});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(status_writes(fake_).size(), writes);
}

// A policy deleted and re-created under the same name is a new policy (a new uid): the old
// one's report entries, still in the agents' reports until they catch up, are not its.
TEST_F(ControllerTest, ARecreatedPolicyInheritsNothing) {
  start();
  const std::string old_uid = create_policy("web");
  put_report("n1", {report_entry(old_uid, 1, 4, 4,
                                 {{{"reason", "LimitExceeded"}, {"count", 2}, {"pod", "web-1"}}})});
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["matchedPods"] == 4; }));
  EXPECT_EQ(condition_reason(get("web"), "Degraded"), "True/LimitExceeded");

  ASSERT_TRUE(client_.remove(kProfilingPolicies, "team-a", "web").ok());
  const std::string new_uid = create_policy("web");
  ASSERT_NE(new_uid, old_uid);
  ASSERT_TRUE(
      eventually([&] { return condition_reason(get("web"), "Ready") == "False/WaitingForNodes"; }));
  Json web = get("web");
  EXPECT_EQ(web["status"]["observedGeneration"], 1);
  EXPECT_EQ(web["status"]["matchedPods"], 0) << "generation 1 of the old policy is not this one";
  EXPECT_EQ(web["status"]["nodesReporting"], 0);
  EXPECT_EQ(condition_reason(web, "Degraded"), "False/AsExpected");

  put_report("n1", {report_entry(new_uid, 1, 1, 1)});
  ASSERT_TRUE(eventually(
      [&] { return condition_reason(get("web"), "Ready") == "True/AllNodesReporting"; }));
  EXPECT_EQ(get("web")["status"]["matchedPods"], 1);
}

TEST_F(ControllerTest, SuspendedAndAgentRejectedPoliciesSaySoInStatus) {
  start();
  Json suspended = make_policy("team-a", "quiet");
  suspended["spec"]["suspend"] = true;
  auto created = client_.create(kProfilingPolicies, "team-a", suspended);
  ASSERT_TRUE(created.ok());
  const std::string uid = create_policy("web");
  put_report("n1", {report_entry(kube::uid_of(*created), 1, 0, 0),
                    report_entry(uid, 1, 0, 0,
                                 {{{"reason", "InvalidSpec"},
                                   {"count", 1},
                                   {"message", "spec.targets[0]: this agent cannot apply it"}}})});
  ASSERT_TRUE(
      eventually([&] { return condition_reason(get("quiet"), "Ready") == "False/Suspended"; }));
  EXPECT_EQ(condition_reason(get("quiet"), "Accepted"), "True/Valid");
  ASSERT_TRUE(eventually(
      [&] { return condition_reason(get("web"), "Accepted") == "False/RejectedByAgents"; }));
  EXPECT_EQ(
      (*condition_of(get("web"), "Accepted"))["message"],
      "1 node's agent cannot apply the spec: n1: spec.targets[0]: this agent cannot apply it");
  EXPECT_EQ(condition_reason(get("web"), "Ready"), "False/InvalidSpec");
}

TEST_F(ControllerTest, WritesStatusOnlyWhenItChanges) {
  const std::string uid = create_policy("api");
  put_report("n1", {report_entry(uid, 1, 1, 1)});
  start();
  ASSERT_TRUE(eventually([&] { return get("api")["status"]["nodesReporting"] == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const size_t writes = successful_writes();
  // A reconcile from a cache that has not yet seen the first write may be refused with 409
  // (optimistic concurrency doing its job); what must not happen is a second accepted write.
  EXPECT_EQ(writes, 1u) << "one write brings the status up to date";

  // Changes that do not change the status: a label on the policy, a renewed node Lease, a
  // report rewritten with the same numbers.
  ASSERT_TRUE(client_
                  .merge_patch(kProfilingPolicies, "team-a", "api",
                               {{"metadata", {{"labels", {{"team", "a"}}}}}})
                  .ok());
  put_lease("n1", std::chrono::system_clock::now() + std::chrono::seconds(1));
  Json report = make_report("n1", {report_entry(uid, 1, 1, 1)});
  report["status"]["agentVersion"] = "test-2";
  ASSERT_TRUE(client_.merge_patch(kProfilingNodeReports, "sonde-system", "n1", report).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(successful_writes(), writes);
  EXPECT_NE(metrics_.serialize().find("sonde_operator_reconciles_total{result=\"unchanged\"}"),
            std::string::npos);
}

// The API server refuses such a spec (the fake enforces the CRD's schema as a real one does);
// one stored before a CRD upgrade tightened a rule still reaches the operator.
TEST_F(ControllerTest, InvalidSpecIsReportedNotRetried) {
  Json bad = make_policy("team-a", "bad");
  bad["spec"]["targets"][0]["selector"] = {
      {"matchExpressions", {{{"key", "app"}, {"operator", "In"}}}}};
  auto refused = client_.create(kProfilingPolicies, "team-a", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("In/NotIn need values"), std::string::npos)
      << refused.error().message();
  fake_.control("crds", {{"enforce", false}});
  ASSERT_TRUE(client_.create(kProfilingPolicies, "team-a", bad).ok());
  start();
  ASSERT_TRUE(
      eventually([&] { return condition_reason(get("bad"), "Accepted") == "False/InvalidSpec"; }));
  EXPECT_NE((*condition_of(get("bad"), "Accepted"))["message"].get<std::string>().find(
                "values: required for operator In"),
            std::string::npos);
}

TEST_F(ControllerTest, ExportsPolicySeriesFromNodeReports) {
  const std::string uid = create_policy("web");
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  put_report("n2", {report_entry(uid, 1, 1, 1)});
  start();
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["nodesReporting"] == 2; }));
  const std::string text = metrics_.serialize();
  EXPECT_NE(text.find("sonde_policy_nodejs_processes{namespace=\"team-a\",policy=\"web\"} 3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sonde_policy_matched_pods{namespace=\"team-a\",policy=\"web\"} 3"),
            std::string::npos);
  // Only gauges: a counter summed over node reports drops when an agent restarts or a pod
  // leaves, and rate() would read the rest of the sum as new increase.
  EXPECT_EQ(text.find("sonde_policy_event_loop_blocked"), std::string::npos);
  EXPECT_EQ(text.find("# TYPE sonde_policy_matched_pods counter"), std::string::npos);
  EXPECT_NE(text.find("sonde_operator_leader 1"), std::string::npos);
  metrics_.set_leader(false);
  EXPECT_EQ(metrics_.serialize().find("sonde_policy_"), std::string::npos)
      << "only the leader exports policy series";
}

// Staleness comes from the node Lease, not from the report: n2's report is as written, but
// its agent stopped renewing the Lease (and n3's never had one).
TEST_F(ControllerTest, ANodeWhoseLeaseIsNotRenewedIsStale) {
  const std::string uid = create_policy("web");
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  put_report("n2", {report_entry(uid, 1, 5, 5)});
  put_lease("n2", std::chrono::system_clock::now() - std::chrono::hours(1));
  start();
  ASSERT_TRUE(eventually(
      [&] { return condition_reason(get("web"), "Ready") == "False/StaleNodeReports"; }));
  Json web = get("web");
  EXPECT_EQ(web["status"]["staleNodes"], 1);
  EXPECT_EQ(web["status"]["nodes"], 1);
  EXPECT_EQ(web["status"]["matchedPods"], 2) << "a stale report's numbers are not counted";
  const std::string text = metrics_.serialize();
  EXPECT_NE(text.find("sonde_node_report_stale{node=\"n2\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("sonde_node_report_stale{node=\"n1\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("sonde_node_reports 2"), std::string::npos) << text;

  // The agent on n2 comes back: it renews its Lease; the report is not rewritten.
  put_lease("n2", std::chrono::system_clock::now());
  ASSERT_TRUE(eventually(
      [&] { return condition_reason(get("web"), "Ready") == "True/AllNodesReporting"; }));
  EXPECT_EQ(get("web")["status"]["matchedPods"], 7);
  EXPECT_EQ(metrics_.serialize().find("sonde_node_report_stale{"), std::string::npos);
}

TEST_F(ControllerTest, TransitionsThatMatterBecomeEventsOnThePolicy) {
  start();
  const std::string uid = create_policy("web");
  ASSERT_TRUE(eventually([&] { return events_of("web").count("NoAgents") == 1; }));
  EXPECT_EQ(std::get<0>(events_of("web")["NoAgents"]), "Warning");

  put_report("n1", {report_entry(uid, 1, 2, 2)});
  ASSERT_TRUE(eventually([&] { return events_of("web").count("AllNodesReporting") == 1; }));
  EXPECT_EQ(std::get<0>(events_of("web")["AllNodesReporting"]), "Normal");

  put_report("n1", {report_entry(uid, 1, 2, 1,
                                 {{{"reason", "SymbolsNotFound"},
                                   {"count", 1},
                                   {"pod", "web-7"},
                                   {"container", "app"},
                                   {"message", "uv__io_poll not found"}}})});
  ASSERT_TRUE(eventually([&] { return events_of("web").count("SymbolsNotFound") == 1; }));
  EXPECT_EQ(std::get<0>(events_of("web")["SymbolsNotFound"]), "Warning");
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  ASSERT_TRUE(eventually([&] { return events_of("web").count("AsExpected") == 1; }));
  EXPECT_EQ(std::get<0>(events_of("web")["AsExpected"]), "Normal");

  // The same transition again is the same Event, counted, not a second object.
  ASSERT_TRUE(client_.remove(kProfilingNodeReports, "sonde-system", "n1").ok());
  ASSERT_TRUE(eventually([&] { return std::get<1>(events_of("web")["NoAgents"]) == 2; }));
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  ASSERT_TRUE(eventually([&] { return std::get<1>(events_of("web")["AllNodesReporting"]) == 2; }));

  // A status write that changes nothing a user acts on (only the counts) tells nothing.
  const size_t before = events_of("web").size();
  const uint64_t written = controller_->events().written();
  put_report("n1", {report_entry(uid, 1, 3, 3)});
  ASSERT_TRUE(eventually([&] { return get("web")["status"]["matchedPods"] == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(events_of("web").size(), before);
  EXPECT_EQ(controller_->events().written(), written);
  EXPECT_NE(metrics_.serialize().find("sonde_operator_events_total{result=\"written\"} " +
                                      std::to_string(written)),
            std::string::npos)
      << metrics_.serialize();
}

TEST_F(ControllerTest, AnInvalidSpecIsAWarningEvent) {
  Json bad = make_policy("team-a", "bad");
  bad["spec"]["targets"][0]["selector"] = {
      {"matchExpressions", {{{"key", "app"}, {"operator", "In"}}}}};
  // A spec the API server would refuse, stored before a CRD upgrade (see the test above).
  fake_.control("crds", {{"enforce", false}});
  ASSERT_TRUE(client_.create(kProfilingPolicies, "team-a", bad).ok());
  start();
  ASSERT_TRUE(eventually([&] { return events_of("bad").count("InvalidSpec") == 1; }));
  const auto [type, count, message] = events_of("bad")["InvalidSpec"];
  EXPECT_EQ(type, "Warning");
  EXPECT_NE(message.find("values: required for operator In"), std::string::npos) << message;
}

Json make_cluster_policy(const std::string& name) {
  Json policy = make_policy("", name);
  policy["kind"] = "ClusterProfilingPolicy";
  policy["metadata"].erase("namespace");
  policy["spec"]["namespaceSelector"] = {{"matchLabels", {{"sonde.dev/profile", "true"}}}};
  return policy;
}

TEST_F(ControllerTest, AClusterPolicyGetsTheSameStatusAndEventsInDefault) {
  start();
  auto created = client_.create(kClusterProfilingPolicies, "", make_cluster_policy("all-web"));
  ASSERT_TRUE(created.ok()) << created.error().message();
  const std::string uid = kube::uid_of(*created);
  auto get_cluster = [&] {
    auto p = client_.get(kClusterProfilingPolicies, "", "all-web");
    return p.ok() ? *p : Json();
  };
  ASSERT_TRUE(
      eventually([&] { return condition_reason(get_cluster(), "Ready") == "False/NoAgents"; }));
  EXPECT_EQ(condition_reason(get_cluster(), "Accepted"), "True/Valid");

  // Its entries are keyed by uid like any policy's; an example names the pod's namespace.
  put_report("n1", {report_entry(uid, 1, 2, 2)});
  put_report("n2", {report_entry(uid, 1, 3, 2,
                                 {{{"reason", "SymbolsNotFound"},
                                   {"count", 1},
                                   {"namespace", "team-b"},
                                   {"pod", "web-7"},
                                   {"container", "app"},
                                   {"message", "uv__io_poll not found"}}})});
  ASSERT_TRUE(eventually([&] { return get_cluster()["status"]["nodesReporting"] == 2; }));
  const Json policy = get_cluster();
  EXPECT_EQ(policy["status"]["matchedPods"], 5);
  EXPECT_EQ(policy["status"]["instrumentedPods"], 4);
  EXPECT_EQ(condition_reason(policy, "Ready"), "True/AllNodesReporting");
  EXPECT_EQ(condition_reason(policy, "Degraded"), "True/SymbolsNotFound");
  EXPECT_NE((*condition_of(policy, "Degraded"))["message"].get<std::string>().find(
                "team-b/web-7/app on n2"),
            std::string::npos)
      << policy["status"].dump();
  // Written through /status, as for the namespaced kind.
  bool through_status = false;
  for (const auto& r : fake_.requests()) {
    through_status =
        through_status ||
        (r["method"] == "PUT" && r["status"] == 200 &&
         r["path"] == "/apis/sonde.dev/v1alpha1/clusterprofilingpolicies/all-web/status");
  }
  EXPECT_TRUE(through_status);

  // Events about a cluster-scoped object are in "default", naming it without a namespace.
  auto has_event = [&](const std::string& reason) {
    auto page = client_.list(kube::kEvents, "default", {});
    if (!page.ok()) return false;
    for (const auto& e : page->items) {
      if (e["involvedObject"]["name"] == "all-web" && e["reason"] == reason) {
        EXPECT_EQ(e["involvedObject"]["kind"], "ClusterProfilingPolicy");
        EXPECT_EQ(e["involvedObject"]["namespace"], "");
        EXPECT_EQ(e["involvedObject"]["uid"], uid);
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(eventually([&] { return has_event("SymbolsNotFound"); }));
  EXPECT_TRUE(has_event("NoAgents"));

  // A cluster policy the agents cannot apply (no namespaceSelector, stored before the CRD
  // required it) is Accepted=False/InvalidSpec.
  fake_.control("crds", {{"enforce", false}});
  Json bad = make_cluster_policy("bad");
  bad["spec"].erase("namespaceSelector");
  ASSERT_TRUE(client_.create(kClusterProfilingPolicies, "", bad).ok());
  ASSERT_TRUE(eventually([&] {
    auto p = client_.get(kClusterProfilingPolicies, "", "bad");
    return p.ok() && condition_reason(*p, "Accepted") == "False/InvalidSpec";
  }));

  // Its series are named as the agents name it in sonde_policy_selection.
  bool series = false;
  for (const auto& s : controller_->policy_series()) {
    series = series ||
             (s.ns.empty() && s.name == "clusterprofilingpolicy/all-web" && s.matched_pods == 5);
  }
  EXPECT_TRUE(series);
}

TEST_F(ControllerTest, AnOperatorScopedToANamespaceLeavesClusterPoliciesAlone) {
  ControllerOptions options;
  options.report_namespace = "sonde-system";
  options.policy_namespace = "team-a";
  controller_ = std::make_unique<Controller>(client_, options, metrics_);
  ASSERT_TRUE(client_.create(kClusterProfilingPolicies, "", make_cluster_policy("all-web")).ok());
  fake_.clear_requests();
  start();
  create_policy("web");
  ASSERT_TRUE(eventually([&] { return get("web").contains("status"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Not watched, not written: the operator never asks for the kind.
  for (const auto& r : fake_.requests()) {
    EXPECT_EQ(r["path"].get<std::string>().find("clusterprofilingpolicies"), std::string::npos)
        << r.dump();
  }
  auto cluster = client_.get(kClusterProfilingPolicies, "", "all-web");
  ASSERT_TRUE(cluster.ok());
  EXPECT_FALSE(cluster->contains("status"));
  auto outcome = controller_->reconcile("all-web");
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, Controller::Outcome::kDeleted);
}

TEST_F(ControllerTest, AWorkerStuckOnOnePolicyMakesTheControllerUnhealthy) {
  ControllerOptions options;
  options.report_namespace = "sonde-system";
  options.stuck_after = std::chrono::milliseconds(500);
  controller_.reset();
  controller_ = std::make_unique<Controller>(client_, options, metrics_);
  // The status write is read and never answered for 4 s (the client gives up after 30 s).
  fake_.control("faults", {{"method", "PUT"}, {"path", "/status$"}, {"hang", 4}, {"times", 1}});
  start();
  EXPECT_EQ(controller_->health_problem(), "");
  ASSERT_TRUE(client_.create(kProfilingPolicies, "team-a", make_policy("team-a", "web")).ok());
  ASSERT_TRUE(eventually([&] { return !controller_->health_problem().empty(); }));
  EXPECT_NE(controller_->health_problem().find("team-a/web"), std::string::npos)
      << controller_->health_problem();
  ASSERT_TRUE(eventually([&] { return get("web").contains("status"); }));
  EXPECT_TRUE(eventually([&] { return controller_->health_problem().empty(); }))
      << "healthy again once the worker moves on";
}

}  // namespace
}  // namespace sonde::op::testing
