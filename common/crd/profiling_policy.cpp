#include "common/crd/profiling_policy.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"

namespace sonde::crd {
namespace {

Result<std::vector<std::string>> strings(const Json& array, const std::string& at, size_t max) {
  if (!array.is_array()) return Error(at + ": must be a list of strings");
  if (array.size() > max) {
    return Error(at + ": at most " + std::to_string(max) + " items, got " +
                 std::to_string(array.size()));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string()) return Error(at + "[" + std::to_string(i) + "]: must be a string");
    out.push_back(array[i].get<std::string>());
  }
  return out;
}

Result<LabelSelector> parse_selector(const Json& json, const std::string& at) {
  if (!json.is_object()) return Error(at + ": must be an object");
  LabelSelector s;
  if (const Json* labels = field(json, "matchLabels")) {
    if (!labels->is_object()) return Error(at + ".matchLabels: must be a map of strings");
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return Error(at + ".matchLabels." + k + ": must be a string");
      s.match_labels.emplace(k, v.get<std::string>());
    }
  }
  const Json* exprs = field(json, "matchExpressions");
  if (exprs == nullptr) return s;
  if (!exprs->is_array()) return Error(at + ".matchExpressions: must be a list");
  for (size_t i = 0; i < exprs->size(); ++i) {
    const std::string e_at = at + ".matchExpressions[" + std::to_string(i) + "]";
    const Json& e = (*exprs)[i];
    if (!e.is_object()) return Error(e_at + ": must be an object");
    LabelRequirement r;
    const Json* key = field(e, "key");
    if (key == nullptr || !key->is_string() || key->get<std::string>().empty()) {
      return Error(e_at + ".key: required, a non-empty string");
    }
    r.key = key->get<std::string>();
    const Json* op = field(e, "operator");
    const std::string op_text = op != nullptr && op->is_string() ? op->get<std::string>() : "";
    if (op_text == "In") {
      r.op = LabelRequirement::Op::kIn;
    } else if (op_text == "NotIn") {
      r.op = LabelRequirement::Op::kNotIn;
    } else if (op_text == "Exists") {
      r.op = LabelRequirement::Op::kExists;
    } else if (op_text == "DoesNotExist") {
      r.op = LabelRequirement::Op::kDoesNotExist;
    } else {
      return Error(e_at + ".operator: must be In, NotIn, Exists or DoesNotExist, got \"" + op_text +
                   "\"");
    }
    if (const Json* values = field(e, "values")) {
      ASSIGN_OR_RETURN(r.values, strings(*values, e_at + ".values", SIZE_MAX));
    }
    const bool set_based =
        r.op == LabelRequirement::Op::kIn || r.op == LabelRequirement::Op::kNotIn;
    if (set_based && r.values.empty()) {
      return Error(e_at + ".values: required for operator " + op_text);
    }
    if (!set_based && !r.values.empty()) {
      return Error(e_at + ".values: must be empty for operator " + op_text);
    }
    s.match_expressions.push_back(std::move(r));
  }
  return s;
}

Result<PodSelection> parse_selection(const Json& json, const std::string& at) {
  if (!json.is_object()) return Error(at + ": must be an object");
  PodSelection s;
  if (const Json* selector = field(json, "selector")) {
    ASSIGN_OR_RETURN(s.selector, parse_selector(*selector, at + ".selector"));
  }
  if (const Json* workload = field(json, "workload")) {
    if (!workload->is_object()) return Error(at + ".workload: must be an object");
    const Json* kind = field(*workload, "kind");
    const std::string kind_text =
        kind != nullptr && kind->is_string() ? kind->get<std::string>() : "";
    if (std::find(std::begin(kWorkloadKinds), std::end(kWorkloadKinds), kind_text) ==
        std::end(kWorkloadKinds)) {
      return Error(at +
                   ".workload.kind: must be Deployment, StatefulSet, DaemonSet, ReplicaSet, "
                   "Job or CronJob, got \"" +
                   kind_text + "\"");
    }
    const Json* name = field(*workload, "name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
      return Error(at + ".workload.name: required, a non-empty string");
    }
    s.workload = WorkloadRef{kind_text, name->get<std::string>()};
  }
  if (!s.selector && !s.workload) return Error(at + ": needs a selector or a workload");
  if (const Json* containers = field(json, "containers")) {
    ASSIGN_OR_RETURN(s.containers, strings(*containers, at + ".containers", kMaxContainerNames));
  }
  return s;
}

Result<std::vector<PodSelection>> parse_selections(const Json& spec, const char* key) {
  std::vector<PodSelection> out;
  const Json* list = field(spec, key);
  const std::string at = std::string("spec.") + key;
  if (list == nullptr) return out;
  if (!list->is_array()) return Error(at + ": must be a list");
  if (list->size() > kMaxSelections) {
    return Error(at + ": at most " + std::to_string(kMaxSelections) + " items, got " +
                 std::to_string(list->size()));
  }
  for (size_t i = 0; i < list->size(); ++i) {
    ASSIGN_OR_RETURN(PodSelection s,
                     parse_selection((*list)[i], at + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(s));
  }
  return out;
}

Json selector_json(const LabelSelector& s) {
  Json out = Json::object();
  if (!s.match_labels.empty()) out["matchLabels"] = s.match_labels;
  if (!s.match_expressions.empty()) {
    Json exprs = Json::array();
    for (const auto& r : s.match_expressions) {
      static const char* const kOps[] = {"In", "NotIn", "Exists", "DoesNotExist"};
      Json e = {{"key", r.key}, {"operator", kOps[static_cast<int>(r.op)]}};
      if (!r.values.empty()) e["values"] = r.values;
      exprs.push_back(std::move(e));
    }
    out["matchExpressions"] = std::move(exprs);
  }
  return out;
}

Json selections_json(const std::vector<PodSelection>& list) {
  Json out = Json::array();
  for (const auto& s : list) {
    Json e = Json::object();
    if (s.selector) e["selector"] = selector_json(*s.selector);
    if (s.workload) e["workload"] = {{"kind", s.workload->kind}, {"name", s.workload->name}};
    if (!s.containers.empty()) e["containers"] = s.containers;
    out.push_back(std::move(e));
  }
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& r : match_expressions) {
    auto it = labels.find(r.key);
    const bool present = it != labels.end();
    switch (r.op) {
      case LabelRequirement::Op::kIn:
        if (!present || !contains(r.values, it->second)) return false;
        break;
      case LabelRequirement::Op::kNotIn:
        if (present && contains(r.values, it->second)) return false;
        break;
      case LabelRequirement::Op::kExists:
        if (!present) return false;
        break;
      case LabelRequirement::Op::kDoesNotExist:
        if (present) return false;
        break;
    }
  }
  return true;
}

const char* kind_name(PolicyKind kind) {
  return kind == PolicyKind::kCluster ? "ClusterProfilingPolicy" : "ProfilingPolicy";
}

PolicyId policy_id(const Json& policy, PolicyKind kind) {
  return {kind == PolicyKind::kCluster ? "" : kube::namespace_of(policy), kube::name_of(policy),
          kube::uid_of(policy), kube::generation_of(policy), kind};
}

Result<PolicySpec> parse_policy_spec(const Json& json, PolicyKind kind) {
  if (!json.is_object()) return Error("spec: required, an object");
  PolicySpec spec;
  if (kind == PolicyKind::kCluster) {
    const Json* selector = field(json, "namespaceSelector");
    if (selector == nullptr) {
      return Error(
          "spec.namespaceSelector: required, a label selector on namespaces ({} selects every "
          "namespace)");
    }
    ASSIGN_OR_RETURN(spec.namespace_selector, parse_selector(*selector, "spec.namespaceSelector"));
  }
  ASSIGN_OR_RETURN(spec.targets, parse_selections(json, "targets"));
  if (spec.targets.empty()) return Error("spec.targets: at least one target is required");
  ASSIGN_OR_RETURN(spec.excludes, parse_selections(json, "excludes"));

  const Json* inst = field(json, "instrumentations");
  if (inst == nullptr || !inst->is_object()) {
    return Error("spec.instrumentations: required, an object");
  }
  ASSIGN_OR_RETURN(spec.instrumentations,
                   parse_instrumentations(*inst, ParamsSource::kPolicy, "spec.instrumentations"));
  if (!any_requested(spec.instrumentations)) {
    std::string keys;
    for (const auto& kind : instrumentation_kinds()) {
      keys += (keys.empty() ? "" : ", ") + std::string(kind.key);
    }
    return Error("spec.instrumentations: at least one of " + keys + " is required");
  }

  if (const Json* limits = field(json, "limits")) {
    if (!limits->is_object()) return Error("spec.limits: must be an object");
    const PolicyLimits defaults;
    ASSIGN_OR_RETURN(spec.limits.max_targets_per_node,
                     integer_in(*limits, "maxTargetsPerNode", defaults.max_targets_per_node, 1,
                                10000, "spec.limits"));
    ASSIGN_OR_RETURN(spec.limits.max_uprobes_per_node,
                     integer_in(*limits, "maxUprobesPerNode", defaults.max_uprobes_per_node, 1,
                                100000, "spec.limits"));
    if (const Json* pct = field(*limits, "maxOverheadPercent")) {
      ASSIGN_OR_RETURN(spec.limits.max_overhead_percent,
                       parse_max_overhead_percent(*pct, "spec.limits.maxOverheadPercent"));
    }
  }
  if (const Json* suspend = field(json, "suspend")) {
    if (!suspend->is_boolean()) return Error("spec.suspend: must be true or false");
    spec.suspend = suspend->get<bool>();
  }
  return spec;
}

Json to_json(const PolicySpec& spec) {
  Json out = {{"targets", selections_json(spec.targets)},
              {"instrumentations", to_json(spec.instrumentations)},
              {"limits",
               {{"maxTargetsPerNode", spec.limits.max_targets_per_node},
                {"maxUprobesPerNode", spec.limits.max_uprobes_per_node}}},
              {"suspend", spec.suspend}};
  if (spec.limits.max_overhead_percent) {
    out["limits"]["maxOverheadPercent"] = *spec.limits.max_overhead_percent;
  }
  if (!spec.excludes.empty()) out["excludes"] = selections_json(spec.excludes);
  if (spec.namespace_selector) out["namespaceSelector"] = selector_json(*spec.namespace_selector);
  return out;
}

}  // namespace sonde::crd
