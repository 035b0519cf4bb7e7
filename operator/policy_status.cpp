#include "operator/policy_status.h"

#include <algorithm>
#include <ctime>
#include <map>

namespace sonde::op {
namespace {

using kube::Json;

Status validate_selector(const Json& selector, const std::string& where) {
  if (!selector.is_object()) return Error(where + ": must be an object");
  if (selector.contains("matchLabels") && !selector["matchLabels"].is_object()) {
    return Error(where + ".matchLabels: must be a map of strings");
  }
  if (!selector.contains("matchExpressions")) return ok_status();
  const Json& expressions = selector["matchExpressions"];
  if (!expressions.is_array()) return Error(where + ".matchExpressions: must be a list");
  for (size_t i = 0; i < expressions.size(); ++i) {
    const std::string at = where + ".matchExpressions[" + std::to_string(i) + "]";
    const Json& e = expressions[i];
    const std::string op = e.value("operator", "");
    const bool has_values = e.contains("values") && e["values"].is_array() && !e["values"].empty();
    if (e.value("key", "").empty()) return Error(at + ".key: required");
    if (op == "In" || op == "NotIn") {
      if (!has_values) return Error(at + ".values: required for operator " + op);
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (has_values) return Error(at + ".values: must be empty for operator " + op);
    } else {
      return Error(at + ".operator: must be In, NotIn, Exists or DoesNotExist, got \"" + op + "\"");
    }
  }
  return ok_status();
}

int severity(const std::string& reason) {
  static const std::map<std::string, int> kSeverity = {
      {"KernelUnsupported", 4}, {"LimitExceeded", 3}, {"SymbolsNotFound", 2}, {"Conflicting", 1}};
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

std::string format_rfc3339(kube::WallTime t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

Status validate_policy_spec(const Json& spec) {
  if (!spec.is_object()) return Error("spec: required");
  const Json targets = spec.value("targets", Json::array());
  if (!targets.is_array() || targets.empty()) return Error("spec.targets: at least one target");
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string at = "spec.targets[" + std::to_string(i) + "]";
    if (!targets[i].is_object()) return Error(at + ": must be an object");
    if (!targets[i].contains("selector") && !targets[i].contains("workload")) {
      return Error(at + ": needs a selector or a workload");
    }
    if (targets[i].contains("selector")) {
      RETURN_IF_ERROR(validate_selector(targets[i]["selector"], at + ".selector"));
    }
  }
  const Json excludes = spec.value("excludes", Json::array());
  for (size_t i = 0; excludes.is_array() && i < excludes.size(); ++i) {
    if (excludes[i].is_object() && excludes[i].contains("selector")) {
      RETURN_IF_ERROR(validate_selector(excludes[i]["selector"],
                                        "spec.excludes[" + std::to_string(i) + "].selector"));
    }
  }
  const Json inst = spec.value("instrumentations", Json::object());
  if (!inst.is_object() ||
      (!inst.contains("cpu") && !inst.contains("nodejsEventLoop") && !inst.contains("goTLS"))) {
    return Error("spec.instrumentations: at least one of cpu, nodejsEventLoop, goTLS");
  }
  if (inst.contains("cpu")) {
    const Json& cpu = inst["cpu"];
    const int64_t hz = cpu.is_object() ? cpu.value("frequencyHz", int64_t{49}) : 0;
    if (hz < 1 || hz > 1000) {
      return Error("spec.instrumentations.cpu.frequencyHz: must be 1..1000, got " +
                   std::to_string(hz));
    }
  }
  return ok_status();
}

Json compute_status(const Json& policy, const std::vector<NodeEntry>& entries, size_t nodes_total,
                    size_t stale_nodes, const std::string& now) {
  const int64_t generation = kube::generation_of(policy);
  const Json previous = policy.value("status", Json::object());
  const Status valid = validate_policy_spec(policy.value("spec", Json()));

  int64_t matched = 0, instrumented = 0, nodejs = 0, current = 0;
  std::map<std::string, int64_t> reason_counts;
  std::vector<std::string> examples;
  for (const auto& [node, entry] : entries) {
    if (entry.observed_generation != generation) continue;  // stale: not counted
    ++current;
    matched += entry.matched_pods;
    instrumented += entry.instrumented_pods;
    nodejs += entry.nodejs_processes;
    for (const auto& p : entry.problems) {
      const std::string reason = p.reason.empty() ? "Unknown" : p.reason;
      ++reason_counts[reason];
      if (examples.size() < kMaxPodsInMessage) {
        examples.push_back((p.pod.empty() ? "?" : p.pod) + "/" +
                           (p.container.empty() ? "?" : p.container) + " on " + node + ": " +
                           (p.message.empty() ? reason : p.message));
      }
    }
  }

  Json conditions = Json::array();
  conditions.push_back(
      condition(previous, "Accepted", valid.ok(), valid.ok() ? "Valid" : "InvalidSpec",
                valid.ok() ? "spec is valid" : valid.error().message(), generation, now));
  if (!valid.ok()) {
    conditions.push_back(condition(previous, "Ready", false, "InvalidSpec",
                                   "the spec is not accepted", generation, now));
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
      message += reason + ": " + std::to_string(count) + (count == 1 ? " pod" : " pods");
    }
    message += " (";
    for (size_t i = 0; i < examples.size(); ++i) message += (i ? "; " : "") + examples[i];
    message += ")";
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
          {"staleNodes", static_cast<int64_t>(stale_nodes)},
          {"conditions", conditions}};
}

}  // namespace sonde::op
