// Objects and helpers shared by the operator tests that run against the fake API server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/kube/api_client.h"
#include "common/kube/testing/fake_apiserver_process.h"
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

// A node report (the shape in crds/README.md) with one entry per given policy entry.
inline Json make_report(const std::string& node, Json entries) {
  return {{"apiVersion", "sonde.dev/v1alpha1"},
          {"kind", "ProfilingNodeReport"},
          {"metadata", {{"name", node}, {"namespace", "sonde-system"}}},
          {"spec", {{"nodeName", node}}},
          {"status",
           {{"heartbeatTime", format_rfc3339(std::chrono::system_clock::now())},
            {"policies", entries}}}};
}

inline Json report_entry(const std::string& ns, const std::string& name, int64_t generation,
                         int matched, int instrumented, Json problems = Json::array(),
                         double blocked_seconds = 0) {
  return {{"namespace", ns},
          {"name", name},
          {"observedGeneration", generation},
          {"matchedPods", matched},
          {"instrumentedPods", instrumented},
          {"nodejsProcesses", instrumented},
          {"eventLoopBlockedSecondsTotal", blocked_seconds},
          {"problems", problems}};
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
