#include "operator/events.h"

#include "common/log.h"
#include "operator/policy_status.h"

namespace sonde::op {

using kube::Json;

namespace {

const Json* find_condition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return nullptr;
  }
  for (const auto& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

// (status, reason) of a condition, empty when absent.
std::pair<std::string, std::string> state_of(const Json* condition) {
  if (condition == nullptr) return {};
  return {condition->value("status", ""), condition->value("reason", "")};
}

}  // namespace

std::vector<PolicyEvent> policy_events(const Json& old_status, const Json& new_status) {
  std::vector<PolicyEvent> out;
  auto changed = [&](const std::string& type) -> const Json* {
    const Json* now = find_condition(new_status, type);
    if (now == nullptr || state_of(now) == state_of(find_condition(old_status, type))) {
      return nullptr;
    }
    return now;
  };
  if (const Json* accepted = changed("Accepted"); accepted && (*accepted)["status"] == "False") {
    out.push_back({"Warning", "InvalidSpec", accepted->value("message", "")});
  }
  if (const Json* ready = changed("Ready")) {
    const std::string reason = ready->value("reason", "");
    if (reason != "InvalidSpec") {
      const bool fine = (*ready)["status"] == "True" || reason == "WaitingForNodes";
      out.push_back({fine ? "Normal" : "Warning", reason, ready->value("message", "")});
    }
  }
  if (const Json* degraded = changed("Degraded")) {
    const bool bad = (*degraded)["status"] == "True";
    // A first status that is not degraded is no news.
    if (bad || find_condition(old_status, "Degraded") != nullptr) {
      out.push_back({bad ? "Warning" : "Normal", degraded->value("reason", ""),
                     degraded->value("message", "")});
    }
  }
  return out;
}

Json with_policy_type(const Json& policy) {
  Json out = policy;
  const bool cluster = policy.value("metadata", Json::object()).value("namespace", "").empty();
  if (!out.contains("apiVersion")) out["apiVersion"] = "sonde.dev/v1alpha1";
  if (!out.contains("kind")) out["kind"] = cluster ? "ClusterProfilingPolicy" : "ProfilingPolicy";
  return out;
}

}  // namespace sonde::op
