#include "common/crd/node_report.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/kube/sonde_resources.h"
#include "common/rfc3339.h"
#include "common/text.h"

namespace sonde::crd {
namespace {

Result<int64_t> count(const Json& object, const char* key, const std::string& at) {
  const Json* v = field(object, key);
  if (v == nullptr) return int64_t{0};
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxCount) {
    return Error(at + "." + key + ": must be an integer within 0.." + std::to_string(kMaxCount));
  }
  return v->get<int64_t>();
}

Result<std::string> text(const Json& object, const char* key, const std::string& at, size_t max) {
  const Json* v = field(object, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return Error(at + "." + key + ": must be a string");
  if (v->get_ref<const std::string&>().size() > max) {
    return Error(at + "." + key + ": longer than " + std::to_string(max) + " bytes");
  }
  return v->get<std::string>();
}

bool known_reason(const std::string& reason) {
  return std::any_of(std::begin(kProblemReasons), std::end(kProblemReasons),
                     [&](const char* r) { return reason == r; });
}

Json problem_json(const PolicyProblem& p) {
  Json out = {{"reason", p.reason}, {"count", p.count}};
  if (!p.ns.empty()) out["namespace"] = p.ns;
  if (!p.pod.empty()) out["pod"] = p.pod;
  if (!p.container.empty()) out["container"] = p.container;
  if (!p.message.empty()) out["message"] = p.message;
  return out;
}

// Zero counts and empty lists are left out: most entries are policies that select nothing on
// this node, and each is then {uid, observedGeneration}.
Json entry_json(const PolicyEntry& e) {
  Json out = {{"uid", e.uid}, {"observedGeneration", e.observed_generation}};
  if (e.matched_pods != 0) out["matchedPods"] = e.matched_pods;
  if (e.instrumented_pods != 0) out["instrumentedPods"] = e.instrumented_pods;
  if (e.nodejs_processes != 0) out["nodejsProcesses"] = e.nodejs_processes;
  if (!e.problems.empty()) {
    Json problems = Json::array();
    for (const auto& p : e.problems) problems.push_back(problem_json(p));
    out["problems"] = std::move(problems);
  }
  return out;
}

// The length of nlohmann's dump() of these values, computed without building JSON: bounding a
// report of 5,000 entries must not cost 5,000 serializations.
size_t string_size(const std::string& text) {
  size_t n = 2;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
      n += 2;
    } else if (c < 0x20) {
      n += 6;
    } else {
      n += 1;
    }
  }
  return n;
}

size_t number_size(int64_t v) {
  return std::to_string(v).size();
}

// `"key":` plus the value, and the comma before it when it is not the first member.
size_t member_size(const char* key, size_t value_size, bool first = false) {
  return (first ? 0 : 1) + std::strlen(key) + 3 + value_size;
}

size_t problem_size(const PolicyProblem& p) {
  size_t n = 2 + member_size("reason", string_size(p.reason), true) +
             member_size("count", number_size(p.count));
  if (!p.ns.empty()) n += member_size("namespace", string_size(p.ns));
  if (!p.pod.empty()) n += member_size("pod", string_size(p.pod));
  if (!p.container.empty()) n += member_size("container", string_size(p.container));
  if (!p.message.empty()) n += member_size("message", string_size(p.message));
  return n;
}

size_t entry_size(const PolicyEntry& e) {
  size_t n = 2 + member_size("uid", string_size(e.uid), true) +
             member_size("observedGeneration", number_size(e.observed_generation));
  if (e.matched_pods != 0) n += member_size("matchedPods", number_size(e.matched_pods));
  if (e.instrumented_pods != 0) {
    n += member_size("instrumentedPods", number_size(e.instrumented_pods));
  }
  if (e.nodejs_processes != 0) {
    n += member_size("nodejsProcesses", number_size(e.nodejs_processes));
  }
  if (!e.problems.empty()) {
    size_t list = 2 + e.problems.size() - 1;
    for (const auto& p : e.problems) list += problem_size(p);
    n += member_size("problems", list);
  }
  return n;
}

Result<PolicyEntry> parse_entry(const Json& json, const std::string& at) {
  if (!json.is_object()) return Error(at + ": must be an object");
  PolicyEntry e;
  ASSIGN_OR_RETURN(e.uid, text(json, "uid", at, kMaxUid));
  if (e.uid.empty()) return Error(at + ".uid: required");
  const Json* gen = field(json, "observedGeneration");
  if (gen == nullptr || !gen->is_number_integer()) {
    return Error(at + ".observedGeneration: required, an integer");
  }
  e.observed_generation = gen->get<int64_t>();
  ASSIGN_OR_RETURN(e.matched_pods, count(json, "matchedPods", at));
  ASSIGN_OR_RETURN(e.instrumented_pods, count(json, "instrumentedPods", at));
  ASSIGN_OR_RETURN(e.nodejs_processes, count(json, "nodejsProcesses", at));
  if (const Json* problems = field(json, "problems")) {
    if (!problems->is_array() || problems->size() > std::size(kProblemReasons)) {
      return Error(at + ".problems: must be a list of at most " +
                   std::to_string(std::size(kProblemReasons)) + " items");
    }
    for (size_t i = 0; i < problems->size(); ++i) {
      const std::string p_at = at + ".problems[" + std::to_string(i) + "]";
      const Json& pj = (*problems)[i];
      if (!pj.is_object()) return Error(p_at + ": must be an object");
      PolicyProblem p;
      ASSIGN_OR_RETURN(p.reason, text(pj, "reason", p_at, 64));
      if (!known_reason(p.reason)) return Error(p_at + ".reason: unknown \"" + p.reason + "\"");
      ASSIGN_OR_RETURN(p.count, count(pj, "count", p_at));
      ASSIGN_OR_RETURN(p.ns, text(pj, "namespace", p_at, kMaxNamespaceName));
      ASSIGN_OR_RETURN(p.pod, text(pj, "pod", p_at, kMaxPodName));
      ASSIGN_OR_RETURN(p.container, text(pj, "container", p_at, kMaxContainerName));
      ASSIGN_OR_RETURN(p.message, text(pj, "message", p_at, kMaxProblemMessage));
      e.problems.push_back(std::move(p));
    }
  }
  return e;
}

// Reports and Leases go when their Node goes (a namespaced object may be owned by a
// cluster-scoped one).
void set_node_owner(Json& metadata, const std::string& node, const std::string& node_uid) {
  if (node_uid.empty()) return;
  metadata["ownerReferences"] =
      Json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node_uid}}});
}

}  // namespace

Json to_json(const NodeReportStatus& status) {
  Json policies = Json::array();
  for (const auto& e : status.policies) policies.push_back(entry_json(e));
  Json out = {{"agentVersion", status.agent_version},
              {"kernel", {{"release", status.kernel_release}, {"btf", status.btf}}},
              {"policies", std::move(policies)}};
  if (status.problems_cut != 0) out["problemsCut"] = status.problems_cut;
  if (status.policies_cut != 0) out["policiesCut"] = status.policies_cut;
  return out;
}

size_t serialized_size(const NodeReportStatus& status) {
  // Members in nlohmann's (sorted) order; the size does not depend on the order anyway.
  size_t policies = 2 + (status.policies.empty() ? 0 : status.policies.size() - 1);
  for (const auto& e : status.policies) policies += entry_size(e);
  const size_t kernel = 2 + member_size("btf", status.btf ? 4 : 5, true) +
                        member_size("release", string_size(status.kernel_release));
  size_t n = 2 + member_size("agentVersion", string_size(status.agent_version), true) +
             member_size("kernel", kernel) + member_size("policies", policies);
  if (status.problems_cut != 0) n += member_size("problemsCut", number_size(status.problems_cut));
  if (status.policies_cut != 0) n += member_size("policiesCut", number_size(status.policies_cut));
  return n;
}

Result<NodeReportStatus> parse_node_report_status(const Json& json) {
  NodeReportStatus s;
  if (!json.is_object()) return Error("status: required, an object");
  ASSIGN_OR_RETURN(s.agent_version, text(json, "agentVersion", "status", 256));
  if (const Json* kernel = field(json, "kernel")) {
    if (!kernel->is_object()) return Error("status.kernel: must be an object");
    ASSIGN_OR_RETURN(s.kernel_release, text(*kernel, "release", "status.kernel", 256));
    const Json* btf = field(*kernel, "btf");
    s.btf = btf != nullptr && btf->is_boolean() && btf->get<bool>();
  }
  ASSIGN_OR_RETURN(s.problems_cut, count(json, "problemsCut", "status"));
  ASSIGN_OR_RETURN(s.policies_cut, count(json, "policiesCut", "status"));
  const Json* policies = field(json, "policies");
  if (policies == nullptr) return s;
  if (!policies->is_array() || policies->size() > kMaxReportPolicies) {
    return Error("status.policies: must be a list of at most " +
                 std::to_string(kMaxReportPolicies) + " items");
  }
  for (size_t i = 0; i < policies->size(); ++i) {
    ASSIGN_OR_RETURN(PolicyEntry e,
                     parse_entry((*policies)[i], "status.policies[" + std::to_string(i) + "]"));
    s.policies.push_back(std::move(e));
  }
  return s;
}

std::string report_node(const Json& report) {
  if (const Json* spec = field(report, "spec")) {
    if (const Json* node = field(*spec, "nodeName"); node && node->is_string()) {
      if (!node->get_ref<const std::string&>().empty()) return node->get<std::string>();
    }
  }
  return kube::name_of(report);
}

Json report_object(const std::string& node, const std::string& ns, const std::string& node_uid,
                   const NodeReportStatus& status) {
  Json metadata = {{"name", node}, {"namespace", ns}};
  set_node_owner(metadata, node, node_uid);
  return {{"apiVersion", kube::kProfilingNodeReports.api_version()},
          {"kind", "ProfilingNodeReport"},
          {"metadata", std::move(metadata)},
          {"spec", {{"nodeName", node}}},
          {"status", to_json(status)}};
}

void bound_report(NodeReportStatus& status, size_t max_bytes) {
  auto& entries = status.policies;
  std::sort(entries.begin(), entries.end(),
            [](const PolicyEntry& a, const PolicyEntry& b) { return a.uid < b.uid; });
  if (entries.size() > kMaxReportPolicies) {
    status.policies_cut += static_cast<int64_t>(entries.size() - kMaxReportPolicies);
    entries.resize(kMaxReportPolicies);
  }
  auto bound_text = [](std::string& text, size_t max) {
    if (text.size() > max || !is_valid_utf8(text)) text = valid_utf8(text, max);
  };
  for (auto& e : entries) {
    for (auto& p : e.problems) {
      bound_text(p.ns, kMaxNamespaceName);
      bound_text(p.pod, kMaxPodName);
      bound_text(p.container, kMaxContainerName);
      bound_text(p.message, kMaxProblemMessage);
    }
  }
  // The cut counters are sized at their largest so that setting them cannot overshoot.
  NodeReportStatus head = status;
  head.policies.clear();
  head.problems_cut = head.policies_cut = INT64_MAX;
  std::vector<size_t> sizes(entries.size());
  size_t total = serialized_size(head) + entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    sizes[i] = entry_size(entries[i]);
    total += sizes[i];
  }
  // First the examples, then the counts, from the last entry backwards.
  for (int pass = 0; pass < 2 && total > max_bytes; ++pass) {
    for (size_t i = entries.size(); i-- > 0 && total > max_bytes;) {
      auto& problems = entries[i].problems;
      if (problems.empty()) continue;
      if (pass == 0) {
        for (auto& p : problems) {
          if (p.ns.empty() && p.pod.empty() && p.container.empty() && p.message.empty()) {
            continue;
          }
          p.ns.clear();
          p.pod.clear();
          p.container.clear();
          p.message.clear();
          ++status.problems_cut;
        }
      } else {
        status.problems_cut += static_cast<int64_t>(problems.size());
        problems.clear();
      }
      const size_t now = entry_size(entries[i]);
      total -= sizes[i] - now;
      sizes[i] = now;
    }
  }
}

std::string node_lease_name(const std::string& node) {
  return "sonde-node-" + node;
}

Json node_lease_object(const std::string& node, const std::string& ns, const std::string& node_uid,
                       Duration lease_duration, WallTime renewed) {
  Json metadata = {
      {"name", node_lease_name(node)}, {"namespace", ns}, {"labels", {{kNodeLeaseLabel, "true"}}}};
  set_node_owner(metadata, node, node_uid);
  return {{"apiVersion", kube::kLeases.api_version()},
          {"kind", "Lease"},
          {"metadata", std::move(metadata)},
          {"spec",
           {{"holderIdentity", node},
            {"leaseDurationSeconds",
             std::chrono::duration_cast<std::chrono::seconds>(lease_duration).count()},
            {"renewTime", format_rfc3339(renewed, 6)}}}};
}

}  // namespace sonde::crd
