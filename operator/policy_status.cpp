#include "operator/policy_status.h"

#include <algorithm>
#include <map>

#include "common/crd/profiling_policy.h"
#include "common/rfc3339.h"

namespace sonde::op {
namespace {

using kube::Json;

int severity(const std::string& reason) {
  static const std::map<std::string, int> kSeverity = {{"KernelUnsupported", 5},
                                                       {"LimitExceeded", 4},
                                                       {"OverheadExceeded", 3},
                                                       {"SymbolsNotFound", 2},
                                                       {"Conflicting", 1}};
  auto it = kSeverity.find(reason);
  return it == kSeverity.end() ? 0 : it->second;
}

Json condition(const Json& previous_status, const std::string& type, bool status,
               const std::string& reason, const std::string& message, int64_t generation,
               const std::string& now) {
  const std::string value = status ? "True" : "False";
  std::string since = now;
  if (previous_status.is_object() && previous_status.contains("conditions") &&
      previous_status["conditions"].is_array()) {
    for (const auto& old : previous_status["conditions"]) {
      if (old.is_object() && old.value("type", "") == type && old.value("status", "") == value) {
        since = old.value("lastTransitionTime", now);
      }
    }
  }
  return {{"type", type},
          {"status", value},
          {"reason", reason},
          {"message", message},
          {"observedGeneration", generation},
          {"lastTransitionTime", since}};
}

}  // namespace

Json compute_status(const Json& policy, const std::vector<NodeEntry>& entries, size_t nodes_total,
                    size_t stale_nodes, const std::string& now, crd::PolicyKind kind) {
  const int64_t generation = kube::generation_of(policy);
  const Json previous = policy.value("status", Json::object());
  const auto spec = crd::parse_policy_spec(policy.value("spec", Json()), kind);

  int64_t matched = 0, instrumented = 0, nodejs = 0, current = 0;
  std::map<std::string, int64_t> reason_counts;
  std::vector<std::string> examples;
  std::vector<std::string> rejections;  // nodes whose agent cannot apply this generation
  bool cut = false;
  for (const auto& [node, entry, report_cut] : entries) {
    if (entry.observed_generation != generation) continue;  // stale: not counted
    ++current;
    matched += entry.matched_pods;
    instrumented += entry.instrumented_pods;
    nodejs += entry.nodejs_processes;
    cut = cut || report_cut;
    for (const auto& p : entry.problems) {
      if (p.reason == crd::kInvalidSpec) {
        rejections.push_back(node + ": " + p.message);
        continue;
      }
      reason_counts[p.reason] += p.count;
      if (examples.size() < kMaxPodsInMessage && !p.pod.empty()) {
        examples.push_back((p.ns.empty() ? "" : p.ns + "/") + p.pod + "/" +
                           (p.container.empty() ? "?" : p.container) + " on " + node + ": " +
                           (p.message.empty() ? p.reason : p.message));
      }
    }
  }

  std::string rejected;
  for (size_t i = 0; i < rejections.size() && i < kMaxPodsInMessage; ++i) {
    rejected += (i ? "; " : "") + rejections[i];
  }
  if (rejections.size() > kMaxPodsInMessage) {
    rejected += " (and " + std::to_string(rejections.size() - kMaxPodsInMessage) + " more nodes)";
  }
  Json conditions = Json::array();
  if (!spec.ok()) {
    conditions.push_back(condition(previous, "Accepted", false, "InvalidSpec",
                                   spec.error().message(), generation, now));
  } else if (!rejections.empty()) {
    conditions.push_back(
        condition(previous, "Accepted", false, "RejectedByAgents",
                  std::to_string(rejections.size()) +
                      (rejections.size() == 1 ? " node's agent" : " nodes' agents") +
                      " cannot apply the spec: " + rejected,
                  generation, now));
  } else {
    conditions.push_back(
        condition(previous, "Accepted", true, "Valid", "spec is valid", generation, now));
  }
  if (!spec.ok() || !rejections.empty()) {
    conditions.push_back(condition(previous, "Ready", false, "InvalidSpec",
                                   "the spec is not accepted", generation, now));
  } else if (spec->suspend) {
    conditions.push_back(condition(
        previous, "Ready", false, "Suspended",
        "spec.suspend is true: no pod is instrumented; " + std::to_string(current) + " of " +
            std::to_string(nodes_total) + " nodes report generation " + std::to_string(generation),
        generation, now));
  } else if (stale_nodes > 0) {
    conditions.push_back(
        condition(previous, "Ready", false, "StaleNodeReports",
                  std::to_string(stale_nodes) + (stale_nodes == 1 ? " node has" : " nodes have") +
                      " not reported recently; " + std::to_string(current) + " of " +
                      std::to_string(nodes_total) + " current nodes report generation " +
                      std::to_string(generation),
                  generation, now));
  } else if (nodes_total == 0) {
    conditions.push_back(condition(previous, "Ready", false, "NoAgents",
                                   "no node agent has reported yet", generation, now));
  } else if (static_cast<size_t>(current) < nodes_total) {
    conditions.push_back(condition(previous, "Ready", false, "WaitingForNodes",
                                   std::to_string(current) + " of " + std::to_string(nodes_total) +
                                       " nodes report generation " + std::to_string(generation),
                                   generation, now));
  } else {
    conditions.push_back(condition(
        previous, "Ready", true, "AllNodesReporting",
        std::to_string(current) + " nodes report generation " + std::to_string(generation),
        generation, now));
  }
  if (reason_counts.empty()) {
    conditions.push_back(condition(previous, "Degraded", false, "AsExpected",
                                   "no node reports a problem", generation, now));
  } else {
    std::vector<std::pair<std::string, int64_t>> ranked(reason_counts.begin(), reason_counts.end());
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      if (a.second != b.second) return a.second > b.second;
      return severity(a.first) > severity(b.first);
    });
    std::string message;
    for (const auto& [reason, count] : ranked) {
      if (!message.empty()) message += ", ";
      message +=
          reason + ": " + std::to_string(count) + (count == 1 ? " container" : " containers");
    }
    if (!examples.empty()) {
      message += " (";
      for (size_t i = 0; i < examples.size(); ++i) message += (i ? "; " : "") + examples[i];
      message += ")";
    }
    if (cut) message += "; some node reports left problems out to stay within their size limit";
    conditions.push_back(
        condition(previous, "Degraded", true, ranked.front().first, message, generation, now));
  }

  return {{"observedGeneration", generation},
          {"matchedPods", matched},
          {"instrumentedPods", instrumented},
          {"nodejsProcesses", nodejs},
          {"nodesReporting", current},
          {"nodes", static_cast<int64_t>(nodes_total)},
          {"staleNodes", static_cast<int64_t>(stale_nodes)},
          {"conditions", conditions}};
}

}  // namespace sonde::op
