#include "agent/cluster/policy_selector.h"

#include <gtest/gtest.h>

#include <string>

#include "agent/cpu/cpu_params.h"
#include "agent/gotls/gotls_params.h"

namespace sonde::agent {
namespace {

// The CPU sampling frequency a selection asks for; 0 when it asks for no sampling.
uint32_t cpu_hz(const Selection& s) {
  const auto& cpu = s.instrumentations[Instrumentation::kCpu];
  return cpu ? cpu.as<CpuParams>().frequency_hz : 0;
}

// What Go TLS is asked with, from the policies' limits.
const GoTlsParams& go_tls(const Selection& s) {
  return s.instrumentations[Instrumentation::kGoTls].as<GoTlsParams>();
}

using kube::Json;

std::string cid(char c) {
  return std::string(64, c);
}

// A running pod with containers {name: id} (an id of "" means not started yet).
Json pod(const std::string& ns, const std::string& name, Json labels,
         std::vector<std::pair<std::string, std::string>> containers, Json owners = nullptr) {
  Json spec = Json::array();
  Json statuses = Json::array();
  for (const auto& [c, id] : containers) {
    spec.push_back({{"name", c}, {"image", "node:20"}});
    Json st = {{"name", c}, {"ready", true}};
    if (!id.empty()) st["containerID"] = id;
    statuses.push_back(st);
  }
  Json p = {{"metadata",
             {{"namespace", ns}, {"name", name}, {"labels", labels}, {"resourceVersion", "x1"}}},
            {"spec", {{"nodeName", "node-a"}, {"containers", spec}}},
            {"status", {{"phase", "Running"}, {"containerStatuses", statuses}}}};
  if (!owners.is_null()) p["metadata"]["ownerReferences"] = owners;
  return p;
}

Json policy(const std::string& ns, const std::string& name, Json spec) {
  return {
      {"metadata", {{"namespace", ns}, {"name", name}, {"uid", "u-" + name}, {"generation", 2}}},
      {"spec", spec}};
}

ProcessInfo process_in(const std::string& container_id) {
  ProcessInfo p;
  p.pid = 42;
  p.container_id = container_id;
  return p;
}

Json nodejs() {
  return {{"nodejsEventLoop", Json::object()}};
}

TEST(ContainerIdFromStatus, StripsRuntimePrefixes) {
  EXPECT_EQ(container_id_from_status("containerd://" + cid('a')), cid('a'));
  EXPECT_EQ(container_id_from_status("cri-o://" + cid('b')), cid('b'));
  EXPECT_EQ(container_id_from_status("docker://" + cid('c')), cid('c'));
  EXPECT_EQ(container_id_from_status("containerd://" + std::string(64, 'D')), cid('d'));
}

TEST(ContainerIdFromStatus, RejectsOtherText) {
  EXPECT_EQ(container_id_from_status(cid('a')), "");                    // no runtime
  EXPECT_EQ(container_id_from_status("rkt://" + cid('a')), "");         // unknown runtime
  EXPECT_EQ(container_id_from_status("containerd://abc"), "");          // too short
  EXPECT_EQ(container_id_from_status("containerd://" + cid('g')), "");  // not hex
  EXPECT_EQ(container_id_from_status(""), "");
}

// Label selector matching is crd::LabelSelector's, tested in common/crd/tests.

TEST(MatchWorkload, DirectOwnersAndDerivedNames) {
  auto owned = [](const std::string& kind, const std::string& name, Json labels = Json::object()) {
    return parse_pod(pod("shop", "p", labels, {{"app", ""}},
                         Json::array({{{"kind", kind}, {"name", name}, {"controller", true}}})));
  };
  auto target = [](const std::string& kind, const std::string& name) {
    return crd::WorkloadRef{kind, name};
  };
  EXPECT_TRUE(matches_workload(target("StatefulSet", "db"), owned("StatefulSet", "db")));
  EXPECT_FALSE(matches_workload(target("StatefulSet", "db"), owned("StatefulSet", "db2")));
  EXPECT_FALSE(matches_workload(target("DaemonSet", "db"), owned("StatefulSet", "db")));
  // Deployment → ReplicaSet "<name>-<pod-template-hash>".
  EXPECT_TRUE(matches_workload(target("Deployment", "web"),
                               owned("ReplicaSet", "web-7d9f", {{"pod-template-hash", "7d9f"}})));
  EXPECT_FALSE(
      matches_workload(target("Deployment", "web"),
                       owned("ReplicaSet", "web-api-7d9f", {{"pod-template-hash", "7d9f"}})));
  EXPECT_FALSE(matches_workload(target("Deployment", "web"), owned("ReplicaSet", "web-7d9f")));
  EXPECT_TRUE(matches_workload(target("ReplicaSet", "web-7d9f"), owned("ReplicaSet", "web-7d9f")));
  // CronJob → Job "<name>-<scheduled time>".
  EXPECT_TRUE(matches_workload(target("CronJob", "backup"), owned("Job", "backup-28912345")));
  EXPECT_FALSE(matches_workload(target("CronJob", "backup"), owned("Job", "backup-manual")));
  EXPECT_FALSE(matches_workload(target("CronJob", "backup"), owned("Job", "backup-")));
}

TEST(ParsePolicy, ReadsSpecAndRejectsWhatItCannotApply) {
  auto p = parse_policy(policy(
      "shop", "checkout",
      {{"targets",
        {{{"selector", {{"matchLabels", {{"app", "checkout"}}}}}, {"containers", {"app"}}}}},
       {"excludes",
        {{{"selector",
           {{"matchExpressions",
             {{{"key", "track"}, {"operator", "In"}, {"values", {"canary"}}}}}}}}}},
       {"instrumentations", {{"nodejsEventLoop", Json::object()}, {"cpu", {{"frequencyHz", 49}}}}},
       {"limits", {{"maxTargetsPerNode", 20}}}}));
  EXPECT_EQ(p.invalid, "");
  EXPECT_EQ(p.id.uid, "u-checkout");
  EXPECT_EQ(p.id.generation, 2);
  ASSERT_TRUE(p.spec.has_value());
  ASSERT_EQ(p.spec->targets.size(), 1u);
  EXPECT_EQ(p.spec->targets[0].containers, std::vector<std::string>{"app"});
  ASSERT_EQ(p.spec->excludes.size(), 1u);
  EXPECT_EQ(p.spec->excludes[0].selector->match_expressions[0].op, crd::LabelRequirement::Op::kIn);
  EXPECT_TRUE(p.spec->instrumentations[Instrumentation::kNodejsEventLoop]);
  EXPECT_FALSE(p.spec->instrumentations[Instrumentation::kGoTls]);
  EXPECT_EQ(p.spec->limits.max_targets_per_node, 20);

  auto bad = parse_policy(policy(
      "shop", "bad",
      {{"targets", {{{"selector", {{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}}}}}}}}},
       {"instrumentations", nodejs()}}));
  EXPECT_NE(bad.invalid.find("Gt"), std::string::npos) << bad.invalid;
  EXPECT_FALSE(bad.spec.has_value());
  EXPECT_NE(parse_policy(policy("shop", "none", {{"instrumentations", nodejs()}})).invalid, "");
}

TEST(TrimPod, KeepsWhatSelectionNeeds) {
  Json full = pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}},
                  Json::array({{{"kind", "ReplicaSet"}, {"name", "web-x"}}}));
  full["metadata"]["annotations"] = {{"big", std::string(1000, 'x')}};
  full["status"]["conditions"] = Json::array({{{"type", "Ready"}}});
  Json trimmed = trim_pod(full);
  EXPECT_FALSE(trimmed["metadata"].contains("annotations"));
  EXPECT_FALSE(trimmed["status"].contains("conditions"));
  EXPECT_FALSE(trimmed["spec"]["containers"][0].contains("image"));
  EXPECT_EQ(trimmed["metadata"]["resourceVersion"], "x1");
  EXPECT_EQ(parse_pod(trimmed), parse_pod(full));
}

class PolicySelectorTest : public ::testing::Test {
 protected:
  PolicySelector selector{[this] { ++changes; }};
  int changes = 0;
};

TEST_F(PolicySelectorTest, SelectsContainersOfMatchingPodsWithPodLabels) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}},
          {{"app", "containerd://" + cid('a')}, {"sidecar", "cri-o://" + cid('b')}}));
  selector.upsert_pod(pod("shop", "db-0", {{"app", "db"}}, {{"db", "docker://" + cid('c')}}));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));  // no policy yet
  selector.upsert_policy(policy("shop", "web",
                                {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
                                 {"instrumentations", nodejs()}}));
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_FALSE(s->instrumentations[Instrumentation::kGoTls].has_value());
  EXPECT_EQ(s->labels, (ContainerLabels{"shop", "web-1", "app"}));
  auto side = selector.select(process_in(cid('b')));
  ASSERT_TRUE(side);
  EXPECT_EQ(side->labels.container, "sidecar");
  EXPECT_FALSE(selector.select(process_in(cid('c'))));  // other labels
  EXPECT_FALSE(selector.select(process_in(cid('d'))));  // unknown container
  EXPECT_FALSE(selector.select(process_in("")));        // not in a container

  auto states = selector.policies();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].matched_pods, std::vector<std::string>{"web-1"});
  EXPECT_EQ(states[0].containers.size(), 2u);
}

TEST_F(PolicySelectorTest, PolicySelectsOnlyItsOwnNamespace) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_pod(
      pod("blog", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('b')}}));
  selector.upsert_policy(
      policy("blog", "all",
             {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}}));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  auto s = selector.select(process_in(cid('b')));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->labels.namespace_name, "blog");
}

TEST_F(PolicySelectorTest, ExcludesAndContainerNames) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}},
          {{"app", "containerd://" + cid('a')}, {"proxy", "containerd://" + cid('b')}}));
  selector.upsert_pod(
      pod("shop", "web-2", {{"app", "web"}, {"track", "canary"}},
          {{"app", "containerd://" + cid('c')}, {"proxy", "containerd://" + cid('d')}}));
  selector.upsert_policy(policy(
      "shop", "web",
      {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"containers", {"app"}}}}},
       {"excludes",
        {{{"selector",
           {{"matchExpressions",
             {{{"key", "track"}, {"operator", "In"}, {"values", {"canary"}}}}}}}}}},
       {"instrumentations", nodejs()}}));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  EXPECT_FALSE(selector.select(process_in(cid('b'))));  // container not named
  EXPECT_FALSE(selector.select(process_in(cid('c'))));  // excluded pod
  EXPECT_FALSE(selector.select(process_in(cid('d'))));
  EXPECT_EQ(selector.policies()[0].matched_pods, std::vector<std::string>{"web-1"});

  // An exclude naming containers leaves the pod's other containers selected.
  selector.upsert_policy(
      policy("shop", "web",
             {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
              {"excludes", {{{"selector", Json::object()}, {"containers", {"proxy"}}}}},
              {"instrumentations", nodejs()}}));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  EXPECT_FALSE(selector.select(process_in(cid('b'))));
  EXPECT_TRUE(selector.select(process_in(cid('c'))));
  EXPECT_FALSE(selector.select(process_in(cid('d'))));
}

TEST_F(PolicySelectorTest, InstrumentationsAreOredAcrossPolicies) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_policy(
      policy("shop", "a",
             {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}}));
  selector.upsert_policy(policy("shop", "b",
                                {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}}}));
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_TRUE(s->instrumentations[Instrumentation::kGoTls].has_value());
  selector.remove_policy(policy("shop", "a", Json::object()));
  s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_TRUE(s->instrumentations[Instrumentation::kGoTls].has_value());
}

// Each policy asking Go TLS of a container hands its limits.maxUprobesPerNode to the Go TLS
// feature (a Node.js-only policy has no uprobes to limit).
TEST_F(PolicySelectorTest, GoTlsPoliciesCarryTheirUprobeLimits) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_policy(policy("shop", "tls",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}},
                                 {"limits", {{"maxUprobesPerNode", 40}}}}));
  selector.upsert_policy(policy("shop", "tls-default",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}}}));
  selector.upsert_policy(policy("shop", "loop",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", nodejs()},
                                 {"limits", {{"maxUprobesPerNode", 1}}}}));
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_EQ(go_tls(*s).uprobe_limits,
            (std::map<std::string, int64_t>{{"shop/tls", 40}, {"shop/tls-default", 1000}}));
}

// limits.maxOverheadPercent of the Go TLS policies selecting a container: the strictest holds,
// and the epoch names each such policy at its generation (a change re-attaches a container
// detached for going over). A Node.js-only policy's limit does not count, nor does no limit.
TEST_F(PolicySelectorTest, GoTlsPoliciesCarryTheStrictestOverheadBudgetWithTheirGenerations) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_policy(policy("shop", "tls-default",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}}}));
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_FALSE(go_tls(*s).overhead_budget) << "no policy sets a budget";
  selector.upsert_policy(policy("shop", "tls-5",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}},
                                 {"limits", {{"maxOverheadPercent", 5}}}}));
  selector.upsert_policy(policy("shop", "tls-half",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"goTLS", Json::object()}}},
                                 {"limits", {{"maxOverheadPercent", 0.5}}}}));
  selector.upsert_policy(policy("shop", "loop",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", nodejs()},
                                 {"limits", {{"maxOverheadPercent", 0.1}}}}));
  s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  ASSERT_TRUE(go_tls(*s).overhead_budget);
  EXPECT_EQ(go_tls(*s).overhead_budget->max_percent, 0.5);
  EXPECT_EQ(go_tls(*s).overhead_budget->epoch, "shop/tls-5@2,shop/tls-half@2");
  // A new generation of one of them is a new epoch.
  Json changed = policy("shop", "tls-5",
                        {{"targets", {{{"selector", Json::object()}}}},
                         {"instrumentations", {{"goTLS", Json::object()}}},
                         {"limits", {{"maxOverheadPercent", 5}}}});
  changed["metadata"]["generation"] = 3;
  selector.upsert_policy(changed);
  s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  ASSERT_TRUE(go_tls(*s).overhead_budget);
  EXPECT_EQ(go_tls(*s).overhead_budget->epoch, "shop/tls-5@3,shop/tls-half@2");
}

TEST_F(PolicySelectorTest, CpuPolicySelectsForSamplingAtTheHighestFrequencyAskedFor) {
  selector.upsert_pod(pod("shop", "web-1", {}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_pod(
      pod("shop", "web-2", {{"tier", "fast"}}, {{"app", "containerd://" + cid('b')}}));
  selector.upsert_policy(policy("shop", "cpu",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"cpu", {{"frequencyHz", 49}}}}}}));
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->instrumentations[Instrumentation::kCpu].has_value());
  EXPECT_FALSE(s->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_EQ(cpu_hz(*s), 49u);
  EXPECT_EQ(s->labels, (ContainerLabels{"shop", "web-1", "app"}));
  EXPECT_TRUE(selector.policies()[0].instrumentations[Instrumentation::kCpu]);
  // A second policy on web-2 only, faster: web-2 at its rate, web-1 unchanged.
  selector.upsert_policy(
      policy("shop", "fast",
             {{"targets", {{{"selector", {{"matchLabels", {{"tier", "fast"}}}}}}}},
              {"instrumentations", {{"cpu", {{"frequencyHz", 99}}}}}}));
  EXPECT_EQ(cpu_hz(*selector.select(process_in(cid('b')))), 99u);
  EXPECT_EQ(cpu_hz(*selector.select(process_in(cid('a')))), 49u);
  // Without frequencyHz: the CRD's default.
  selector.upsert_policy(policy("shop", "fast",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", {{"cpu", Json::object()}}}}));
  EXPECT_EQ(cpu_hz(*selector.select(process_in(cid('b')))), 49u);
  auto d = parse_policy(policy("shop", "d",
                               {{"targets", {{{"selector", Json::object()}}}},
                                {"instrumentations", {{"cpu", Json::object()}}}}));
  ASSERT_TRUE(d.spec && d.spec->instrumentations[Instrumentation::kCpu]) << d.invalid;
  EXPECT_EQ(d.spec->instrumentations[Instrumentation::kCpu].as<CpuParams>().frequency_hz, 19u);
}

TEST(ParsePolicy, RejectsACpuFrequencyOutsideTheSamplersRange) {
  for (Json hz : {Json(0), Json(1000), Json("fast"), Json(2.5)}) {
    auto p = parse_policy(policy("shop", "bad",
                                 {{"targets", {{{"selector", Json::object()}}}},
                                  {"instrumentations", {{"cpu", {{"frequencyHz", hz}}}}}}));
    EXPECT_NE(p.invalid.find("frequencyHz"), std::string::npos) << hz.dump();
  }
  auto p = parse_policy(policy("shop", "max",
                               {{"targets", {{{"selector", Json::object()}}}},
                                {"instrumentations", {{"cpu", {{"frequencyHz", 999}}}}}}));
  EXPECT_EQ(p.invalid, "");
  ASSERT_TRUE(p.spec && p.spec->instrumentations[Instrumentation::kCpu]);
  EXPECT_EQ(p.spec->instrumentations[Instrumentation::kCpu].as<CpuParams>().frequency_hz, 999u);
}

TEST_F(PolicySelectorTest, DeselectsOnPolicyAndPodChanges) {
  Json web = pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}});
  selector.upsert_pod(web);
  selector.upsert_policy(policy("shop", "web",
                                {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
                                 {"instrumentations", nodejs()}}));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  web["metadata"]["labels"]["app"] = "other";
  selector.upsert_pod(web);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  web["metadata"]["labels"]["app"] = "web";
  selector.upsert_pod(web);
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  web["status"]["phase"] = "Succeeded";
  selector.upsert_pod(web);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  EXPECT_TRUE(selector.policies()[0].matched_pods.empty());
  web["status"]["phase"] = "Running";
  selector.upsert_pod(web);
  selector.remove_pod(web);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
}

TEST_F(PolicySelectorTest, NotifiesOnRealChangesOnly) {
  Json web = pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}});
  Json p = policy("shop", "web",
                  {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}});
  selector.upsert_pod(web);
  selector.upsert_policy(p);
  EXPECT_EQ(changes, 2);
  web["metadata"]["resourceVersion"] = "x2";
  web["status"]["conditions"] = Json::array({{{"type", "Ready"}}});
  selector.upsert_pod(web);  // nothing selection reads changed
  p["status"] = {{"matchedPods", 1}};
  selector.upsert_policy(p);  // the operator's status write
  EXPECT_EQ(changes, 2);
  web["status"]["containerStatuses"][0]["containerID"] = "containerd://" + cid('e');  // restart
  selector.upsert_pod(web);
  EXPECT_EQ(changes, 3);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  EXPECT_TRUE(selector.select(process_in(cid('e'))));
  selector.remove_pod(web);
  selector.remove_pod(web);  // already gone
  EXPECT_EQ(changes, 4);
}

TEST_F(PolicySelectorTest, ContainersBeyondTheLimitAreLimitExceeded) {
  for (char c : {'a', 'b', 'c'}) {
    selector.upsert_pod(
        pod("shop", std::string("web-") + c, {}, {{"app", "containerd://" + cid(c)}}));
  }
  selector.upsert_policy(policy("shop", "web",
                                {{"targets", {{{"selector", Json::object()}}}},
                                 {"instrumentations", nodejs()},
                                 {"limits", {{"maxTargetsPerNode", 2}}}}));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  EXPECT_TRUE(selector.select(process_in(cid('b'))));
  EXPECT_FALSE(selector.select(process_in(cid('c'))));
  auto st = selector.policies()[0];
  EXPECT_EQ(st.matched_pods.size(), 3u);
  EXPECT_EQ(st.containers.size(), 2u);
  ASSERT_EQ(st.over_limit.size(), 1u);
  EXPECT_EQ(st.over_limit[0].pod, "web-c");
  EXPECT_EQ(st.over_limit[0].container, "app");
  EXPECT_EQ(st.max_targets_per_node, 2);
}

TEST_F(PolicySelectorTest, ContainerNotStartedYetIsMatchedButNotSelectable) {
  selector.upsert_pod(pod("shop", "web-1", {}, {{"app", ""}}));
  selector.upsert_policy(
      policy("shop", "web",
             {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}}));
  auto st = selector.policies()[0];
  EXPECT_EQ(st.matched_pods.size(), 1u);
  ASSERT_EQ(st.containers.size(), 1u);
  EXPECT_EQ(st.containers[0].container_id, "");
}

TEST_F(PolicySelectorTest, InvalidPolicyIsKnownButSelectsNothing) {
  selector.upsert_pod(pod("shop", "web-1", {}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_policy(policy("shop", "bad", {{"instrumentations", nodejs()}}));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  auto states = selector.policies();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].id.name, "bad");
  EXPECT_NE(states[0].invalid, "");
  EXPECT_TRUE(states[0].matched_pods.empty());
}

TEST_F(PolicySelectorTest, SuspendedPolicyIsKnownButSelectsNothing) {
  selector.upsert_pod(pod("shop", "web-1", {}, {{"app", "containerd://" + cid('a')}}));
  Json spec = {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}};
  spec["suspend"] = true;
  selector.upsert_policy(policy("shop", "web", spec));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  auto states = selector.policies();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(states[0].suspended);
  EXPECT_TRUE(states[0].matched_pods.empty());

  spec["suspend"] = false;  // resumed: selected again
  selector.upsert_policy(policy("shop", "web", spec));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
}

// A policy deleted and re-created under its name between two informer events (a relist) is
// a new uid at generation 1: its state is the new object's, never the old one's.
TEST_F(PolicySelectorTest, ARecreatedPolicyIsReportedUnderItsNewUid) {
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  Json old_policy =
      policy("shop", "web",
             {{"targets", {{{"selector", Json::object()}}}}, {"instrumentations", nodejs()}});
  old_policy["metadata"]["generation"] = 5;
  selector.upsert_policy(old_policy);
  ASSERT_EQ(selector.policies()[0].id.uid, "u-web");
  Json recreated = policy("shop", "web",
                          {{"targets", {{{"selector", {{"matchLabels", {{"app", "api"}}}}}}}},
                           {"instrumentations", nodejs()}});
  recreated["metadata"]["uid"] = "u-web-2";
  recreated["metadata"]["generation"] = 1;
  selector.upsert_policy(recreated);
  auto states = selector.policies();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].id, (crd::PolicyId{"shop", "web", "u-web-2", 1}));
  EXPECT_TRUE(states[0].matched_pods.empty());
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
}

// --- ClusterProfilingPolicies

Json cluster_policy(const std::string& name, Json namespace_selector, Json spec) {
  spec["namespaceSelector"] = std::move(namespace_selector);
  return {{"metadata", {{"name", name}, {"uid", "cu-" + name}, {"generation", 3}}}, {"spec", spec}};
}

Json ns_object(const std::string& name, Json labels) {
  labels["kubernetes.io/metadata.name"] = name;
  return {{"metadata", {{"name", name}, {"uid", "ns-" + name}, {"labels", labels}}},
          {"status", {{"phase", "Active"}}}};
}

Json web_targets() {
  return {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
          {"instrumentations", nodejs()}};
}

TEST(TrimNamespace, KeepsNameAndLabels) {
  Json full = ns_object("team-a", {{"profile", "yes"}});
  full["metadata"]["annotations"] = {{"big", std::string(1000, 'x')}};
  full["metadata"]["resourceVersion"] = "x7";
  full["spec"] = {{"finalizers", {"kubernetes"}}};
  Json trimmed = trim_namespace(full);
  EXPECT_EQ(
      trimmed,
      (Json{{"metadata",
             {{"name", "team-a"},
              {"uid", "ns-team-a"},
              {"resourceVersion", "x7"},
              {"labels", {{"profile", "yes"}, {"kubernetes.io/metadata.name", "team-a"}}}}}}));
}

TEST(ParsePolicy, AClusterPolicyNeedsANamespaceSelector) {
  KnownPolicy ok =
      parse_policy(cluster_policy("all", Json::object(), web_targets()), crd::PolicyKind::kCluster);
  EXPECT_TRUE(ok.spec) << ok.invalid;
  EXPECT_EQ(ok.id, (crd::PolicyId{"", "all", "cu-all", 3, crd::PolicyKind::kCluster}));
  Json no_selector = cluster_policy("all", Json::object(), web_targets());
  no_selector["spec"].erase("namespaceSelector");
  KnownPolicy bad = parse_policy(no_selector, crd::PolicyKind::kCluster);
  EXPECT_FALSE(bad.spec);
  EXPECT_EQ(bad.invalid.rfind("spec.namespaceSelector: required", 0), 0u) << bad.invalid;
}

TEST_F(PolicySelectorTest, ClusterPolicySelectsPodsOfNamespacesMatchingItsSelector) {
  selector.upsert_namespace(ns_object("team-a", {{"sonde.dev/profile", "true"}}));
  selector.upsert_namespace(ns_object("team-b", {{"sonde.dev/profile", "true"}}));
  selector.upsert_namespace(ns_object("other", {}));
  selector.upsert_pod(
      pod("team-a", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_pod(
      pod("team-b", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('b')}}));
  selector.upsert_pod(
      pod("other", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('c')}}));
  selector.upsert_pod(pod("team-a", "db-0", {{"app", "db"}}, {{"db", "containerd://" + cid('d')}}));
  // A pod of a namespace the agent has not seen (yet) is not selected, even by {}.
  selector.upsert_pod(
      pod("unseen", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('e')}}));
  selector.upsert_policy(
      cluster_policy("profiled", {{"matchLabels", {{"sonde.dev/profile", "true"}}}}, web_targets()),
      crd::PolicyKind::kCluster);

  auto a = selector.select(process_in(cid('a')));
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_EQ(a->labels, (ContainerLabels{"team-a", "web-1", "app"}));
  auto b = selector.select(process_in(cid('b')));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->labels, (ContainerLabels{"team-b", "web-1", "app"}));
  EXPECT_FALSE(selector.select(process_in(cid('c'))));  // namespace not labelled
  EXPECT_FALSE(selector.select(process_in(cid('d'))));  // pod labels do not match
  EXPECT_FALSE(selector.select(process_in(cid('e'))));  // namespace unknown

  auto states = selector.policies();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].id.kind, crd::PolicyKind::kCluster);
  EXPECT_EQ(states[0].id.uid, "cu-profiled");
  EXPECT_EQ(states[0].matched_pods, (std::vector<std::string>{"team-a/web-1", "team-b/web-1"}));
  ASSERT_EQ(states[0].containers.size(), 2u);
  EXPECT_EQ(states[0].containers[1], (SelectedContainer{"web-1", "app", cid('b'), "team-b"}));

  // {} selects every namespace the agent knows; the automatic name label picks one.
  selector.upsert_policy(cluster_policy("profiled", Json::object(), web_targets()),
                         crd::PolicyKind::kCluster);
  EXPECT_TRUE(selector.select(process_in(cid('c'))));
  EXPECT_FALSE(selector.select(process_in(cid('e'))));
  selector.upsert_policy(
      cluster_policy("profiled", {{"matchLabels", {{"kubernetes.io/metadata.name", "other"}}}},
                     web_targets()),
      crd::PolicyKind::kCluster);
  EXPECT_TRUE(selector.select(process_in(cid('c'))));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
}

TEST_F(PolicySelectorTest, ANamespacesLabelsChangingReselects) {
  selector.upsert_namespace(ns_object("team-a", {}));
  selector.upsert_pod(
      pod("team-a", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  selector.upsert_policy(
      cluster_policy(
          "profiled",
          {{"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"gold"}}}}}},
          web_targets()),
      crd::PolicyKind::kCluster);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  const int before = changes;
  selector.upsert_namespace(ns_object("team-a", {{"tier", "gold"}}));
  EXPECT_EQ(changes, before + 1);
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  // The same labels again (an annotation changed): nothing to re-select.
  Json annotated = ns_object("team-a", {{"tier", "gold"}});
  annotated["metadata"]["annotations"] = {{"note", "x"}};
  selector.upsert_namespace(annotated);
  EXPECT_EQ(changes, before + 1);
  selector.upsert_namespace(ns_object("team-a", {{"tier", "silver"}}));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  selector.upsert_namespace(ns_object("team-a", {{"tier", "gold"}}));
  EXPECT_TRUE(selector.select(process_in(cid('a'))));
  selector.remove_namespace(ns_object("team-a", {}));
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  EXPECT_EQ(changes, before + 4);
}

TEST_F(PolicySelectorTest, APodSelectedByBothKindsGetsEveryInstrumentationAndCountsInBoth) {
  selector.upsert_namespace(ns_object("shop", {{"profile", "yes"}}));
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  // The namespaced policy asks for the event loop and CPU at 19 Hz, the cluster one for Go TLS
  // and CPU at 99 Hz, under the same name as the namespaced one.
  selector.upsert_policy(
      policy("shop", "web",
             {{"targets", {{{"selector", Json::object()}}}},
              {"instrumentations",
               {{"nodejsEventLoop", Json::object()}, {"cpu", {{"frequencyHz", 19}}}}}}));
  selector.upsert_policy(
      cluster_policy(
          "web", {{"matchLabels", {{"profile", "yes"}}}},
          {{"targets", {{{"selector", {{"matchLabels", {{"app", "web"}}}}}}}},
           {"instrumentations", {{"goTLS", Json::object()}, {"cpu", {{"frequencyHz", 99}}}}}}),
      crd::PolicyKind::kCluster);
  auto s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->instrumentations[Instrumentation::kNodejsEventLoop].has_value());
  EXPECT_TRUE(s->instrumentations[Instrumentation::kGoTls].has_value());
  EXPECT_TRUE(s->instrumentations[Instrumentation::kCpu].has_value());
  EXPECT_EQ(cpu_hz(*s), 99u);
  EXPECT_EQ(s->labels, (ContainerLabels{"shop", "web-1", "app"}));
  auto states = selector.policies();
  ASSERT_EQ(states.size(), 2u);  // "shop/web" and "web" are two policies
  for (const auto& st : states) {
    EXPECT_EQ(st.containers.size(), 1u) << st.id.name;
    EXPECT_EQ(st.matched_pods.size(), 1u) << st.id.name;
  }
  // Removing the cluster policy leaves the namespaced one's choice.
  selector.remove_policy(cluster_policy("web", Json::object(), Json::object()));
  s = selector.select(process_in(cid('a')));
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->instrumentations[Instrumentation::kGoTls].has_value());
  EXPECT_EQ(cpu_hz(*s), 19u);
  ASSERT_EQ(selector.policies().size(), 1u);
  EXPECT_EQ(selector.policies()[0].id.kind, crd::PolicyKind::kNamespaced);
}

TEST_F(PolicySelectorTest, ASuspendedOrInvalidClusterPolicySelectsNothing) {
  selector.upsert_namespace(ns_object("shop", {}));
  selector.upsert_pod(
      pod("shop", "web-1", {{"app", "web"}}, {{"app", "containerd://" + cid('a')}}));
  Json suspended = web_targets();
  suspended["suspend"] = true;
  selector.upsert_policy(cluster_policy("p", Json::object(), suspended), crd::PolicyKind::kCluster);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  EXPECT_TRUE(selector.policies()[0].suspended);
  Json invalid = cluster_policy("p", Json::object(), web_targets());
  invalid["spec"]["namespaceSelector"] = "everything";
  selector.upsert_policy(invalid, crd::PolicyKind::kCluster);
  EXPECT_FALSE(selector.select(process_in(cid('a'))));
  EXPECT_EQ(selector.policies()[0].invalid, "spec.namespaceSelector: must be an object");
}

}  // namespace
}  // namespace sonde::agent
