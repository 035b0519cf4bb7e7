// libFuzzer target for what the agent reads from API objects: ProfilingPolicy,
// ClusterProfilingPolicy, Namespace and Pod JSON (parse_policy, parse_pod, trim_pod,
// trim_namespace) and the selection computed from them. The input is a JSON object
// {"policies": [...], "clusterPolicies": [...], "namespaces": [...], "pods": [...]}. Any crash,
// sanitizer report or hang is a bug, and so is trim_pod() dropping a field the selection reads.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "agent/cluster/policy_selector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sonde::kube::Json;
  Json input = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) return 0;
  sonde::agent::PolicySelector selector;
  std::vector<std::string> ids;
  if (auto pods = input.find("pods"); pods != input.end() && pods->is_array()) {
    for (const Json& pod : *pods) {
      if (!(sonde::agent::parse_pod(sonde::agent::trim_pod(pod)) == sonde::agent::parse_pod(pod))) {
        std::abort();
      }
      selector.upsert_pod(sonde::agent::trim_pod(pod));
      for (const auto& c : sonde::agent::parse_pod(pod).containers) ids.push_back(c.container_id);
    }
  }
  if (auto namespaces = input.find("namespaces");
      namespaces != input.end() && namespaces->is_array()) {
    for (const Json& ns : *namespaces) selector.upsert_namespace(sonde::agent::trim_namespace(ns));
  }
  if (auto policies = input.find("policies"); policies != input.end() && policies->is_array()) {
    for (const Json& policy : *policies) selector.upsert_policy(policy);
  }
  if (auto policies = input.find("clusterPolicies");
      policies != input.end() && policies->is_array()) {
    for (const Json& policy : *policies) {
      selector.upsert_policy(policy, sonde::crd::PolicyKind::kCluster);
    }
  }
  for (const auto& id : ids) {
    sonde::agent::ProcessInfo p;
    p.container_id = id;
    (void)selector.select(p);
  }
  (void)selector.policies();
  return 0;
}
