// Objects and helpers shared by the operator tests that run against the fake API server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/kube/api_client.h"
#include "common/kube/testing/fake_apiserver_process.h"
#include "common/rfc3339.h"
#include "operator/policy_status.h"
#include "operator/resources.h"

namespace sonde::op::testing {

using kube::Json;

inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

inline Json make_policy(const std::string& ns, const std::string& name, int frequency = 49) {
  Json target = {{"selector", {{"matchLabels", {{"app", name}}}}}};
  Json instrumentations = {{"nodejsEventLoop", Json::object()},
                           {"cpu", {{"frequencyHz", frequency}}}};
  return {{"apiVersion", "sonde.dev/v1alpha1"},
          {"kind", "ProfilingPolicy"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"targets", Json::array({target})}, {"instrumentations", instrumentations}}}};
}

// A node report (the shape in crds/README.md) with the given status.policies[] entries.
inline Json make_report(const std::string& node, Json entries) {
  return {{"apiVersion", "sonde.dev/v1alpha1"},
          {"kind", "ProfilingNodeReport"},
          {"metadata", {{"name", node}, {"namespace", "sonde-system"}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"agentVersion", "test"}, {"policies", entries}}}};
}

// `problems`: [{"reason", "count", "pod", "container", "message"}].
inline Json report_entry(const std::string& uid, int64_t generation, int matched, int instrumented,
                         Json problems = Json::array()) {
  Json e = {{"uid", uid},
            {"observedGeneration", generation},
            {"matchedPods", matched},
            {"instrumentedPods", instrumented},
            {"nodejsProcesses", instrumented}};
  if (!problems.empty()) e["problems"] = std::move(problems);
  return e;
}

// The node Lease an agent renews (crds/README.md), renewed at `renewed`.
inline Json make_node_lease(const std::string& node, WallTime renewed) {
  const std::string time = format_rfc3339(renewed);
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", "sonde-node-" + node},
            {"namespace", "sonde-system"},
            {"labels", {{"sonde.dev/node-lease", "true"}}}}},
          {"spec",
           {{"holderIdentity", node},
            {"leaseDurationSeconds", 40},
            {"renewTime", time.substr(0, time.size() - 1) + ".000000Z"}}}};
}

// Creates or replaces `object` (of `type`, in sonde-system) whatever its resourceVersion.
inline void put_object(kube::ApiClient& client, const kube::ResourceType& type, Json object) {
  const std::string name = object["metadata"]["name"];
  auto existing = client.get(type, "sonde-system", name);
  if (existing.ok()) {
    object["metadata"]["resourceVersion"] = kube::resource_version_of(*existing);
    ASSERT_TRUE(client.replace(type, "sonde-system", name, object).ok());
  } else {
    ASSERT_TRUE(client.create(type, "sonde-system", object).ok());
  }
}

inline const Json* condition_of(const Json& policy, const std::string& type) {
  if (!policy.contains("status")) return nullptr;
  for (const auto& c : policy["status"]["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

inline std::string condition_reason(const Json& policy, const std::string& type) {
  const Json* c = condition_of(policy, type);
  return c == nullptr ? ""
                      : (*c)["status"].get<std::string>() + "/" + (*c)["reason"].get<std::string>();
}

// PUT/PATCH requests to a policy's /status, from the fake's request log.
inline std::vector<Json> status_writes(kube::testing::FakeApiServer& fake) {
  std::vector<Json> out;
  for (const auto& r : fake.requests()) {
    const std::string path = r["path"];
    if ((r["method"] == "PUT" || r["method"] == "PATCH") &&
        path.find("/profilingpolicies/") != std::string::npos && path.size() > 7 &&
        path.compare(path.size() - 7, 7, "/status") == 0) {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace sonde::op::testing
