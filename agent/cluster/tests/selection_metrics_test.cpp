#include "agent/cluster/selection_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <sstream>
#include <string>

namespace sonde::agent {
namespace {

using kube::Json;

Json pod(const std::string& name, const std::string& app, char id) {
  return {{"metadata", {{"namespace", "shop"}, {"name", name}, {"labels", {{"app", app}}}}},
          {"spec", {{"nodeName", "n1"}, {"containers", {{{"name", "app"}}, {{"name", "proxy"}}}}}},
          {"status",
           {{"phase", "Running"},
            {"containerStatuses",
             {{{"name", "app"}, {"containerID", "containerd://" + std::string(64, id)}}}}}}};
}

Json policy(const std::string& name, Json target, int64_t max_targets = 100) {
  return {{"metadata", {{"namespace", "shop"}, {"name", name}}},
          {"spec",
           {{"targets", {target}},
            {"instrumentations", {{"nodejsEventLoop", Json::object()}}},
            {"limits", {{"maxTargetsPerNode", max_targets}}}}}};
}

std::string exposition(const prometheus::MetricFamily& family) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, {family});
  return out.str();
}

TEST(PolicySelectionFamily, OneSeriesPerSelectedContainerAndPolicy) {
  PolicySelector selector;
  selector.upsert_pod(pod("web-1", "web", 'a'));
  selector.upsert_pod(pod("api-1", "api", 'b'));
  // "web" selects web-1's app container; "all-apps" every app container but stops at one.
  selector.upsert_policy(
      policy("web", {{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"containers", {"app"}}}));
  selector.upsert_policy(policy("all-apps", {{"selector", Json::object()}, {"containers", {"app"}}},
                                /*max_targets=*/1));

  const std::string text = exposition(policy_selection_family(selector.policies(), "n1"));
  EXPECT_NE(text.find("# TYPE sonde_policy_selection gauge"), std::string::npos) << text;
  // A container two policies select is in both: the join by (namespace, pod, container) then
  // attributes it to each.
  EXPECT_NE(text.find("sonde_policy_selection{namespace=\"shop\",pod=\"web-1\",container=\"app\","
                      "policy=\"web\",node=\"n1\"} 1"),
            std::string::npos)
      << text;
  // all-apps' limit of one: pods are visited in name order, so api-1 is in, web-1 is not.
  EXPECT_NE(text.find("sonde_policy_selection{namespace=\"shop\",pod=\"api-1\",container=\"app\","
                      "policy=\"all-apps\",node=\"n1\"} 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("pod=\"web-1\",container=\"app\",policy=\"all-apps\""), std::string::npos)
      << "a container beyond maxTargetsPerNode is not selected:\n"
      << text;
  EXPECT_EQ(text.find("container=\"proxy\""), std::string::npos) << text;
  EXPECT_EQ(policy_selection_family(selector.policies(), "n1").metric.size(), 2U);

  // The pod leaves: its series goes with it.
  selector.remove_pod(pod("web-1", "web", 'a'));
  EXPECT_EQ(exposition(policy_selection_family(selector.policies(), "n1")).find("web-1"),
            std::string::npos);
}

TEST(PolicySelectionFamily, NoPolicyNoSeries) {
  PolicySelector selector;
  selector.upsert_pod(pod("web-1", "web", 'a'));
  EXPECT_TRUE(policy_selection_family(selector.policies(), "n1").metric.empty());
}

TEST(PolicySelectionFamily, AClusterPolicyIsNamedByKindAndItsPodsByTheirNamespace) {
  PolicySelector selector;
  Json ns = {{"metadata", {{"name", "shop"}, {"labels", {{"profile", "yes"}}}}}};
  selector.upsert_namespace(ns);
  selector.upsert_pod(pod("web-1", "web", 'a'));
  selector.upsert_policy({{"metadata", {{"name", "web"}, {"uid", "cu"}}},
                          {"spec",
                           {{"namespaceSelector", {{"matchLabels", {{"profile", "yes"}}}}},
                            {"targets", {{{"selector", Json::object()}, {"containers", {"app"}}}}},
                            {"instrumentations", {{"goTLS", Json::object()}}}}}},
                         crd::PolicyKind::kCluster);
  const std::string text = exposition(policy_selection_family(selector.policies(), "n1"));
  EXPECT_NE(text.find("sonde_policy_selection{namespace=\"shop\",pod=\"web-1\",container=\"app\","
                      "policy=\"clusterprofilingpolicy/web\",node=\"n1\"} 1"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace sonde::agent
