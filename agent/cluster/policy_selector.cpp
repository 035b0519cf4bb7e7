#include "agent/cluster/policy_selector.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace sonde::agent {
namespace {

using kube::Json;

const Json* field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string text(const Json& object, std::string_view key) {
  const Json* v = field(object, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::vector<std::string> strings(const Json* array) {
  std::vector<std::string> out;
  if (!array || !array->is_array()) return out;
  for (const auto& v : *array) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> string_map(const Json* object) {
  std::map<std::string, std::string> out;
  if (!object || !object->is_object()) return out;
  for (const auto& [k, v] : object->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Parses one targets[]/excludes[] entry; an error names what the agent cannot apply.
Result<PodSelection> parse_selection(const Json& entry) {
  PodSelection s;
  if (const Json* selector = field(entry, "selector")) {
    if (!selector->is_object()) return Error("selector is not an object");
    s.has_selector = true;
    s.match_labels = string_map(field(*selector, "matchLabels"));
    if (const Json* exprs = field(*selector, "matchExpressions"); exprs && exprs->is_array()) {
      for (const auto& e : *exprs) {
        LabelRequirement r;
        r.key = text(e, "key");
        const std::string op = text(e, "operator");
        if (op == "In") {
          r.op = LabelRequirement::Op::kIn;
        } else if (op == "NotIn") {
          r.op = LabelRequirement::Op::kNotIn;
        } else if (op == "Exists") {
          r.op = LabelRequirement::Op::kExists;
        } else if (op == "DoesNotExist") {
          r.op = LabelRequirement::Op::kDoesNotExist;
        } else {
          return Error("matchExpressions operator '" + op + "' is not In, NotIn, Exists or " +
                       "DoesNotExist");
        }
        r.values = strings(field(e, "values"));
        s.match_expressions.push_back(std::move(r));
      }
    }
  }
  if (const Json* workload = field(entry, "workload")) {
    s.workload_kind = text(*workload, "kind");
    s.workload_name = text(*workload, "name");
    if (s.workload_kind.empty() || s.workload_name.empty()) {
      return Error("workload needs a kind and a name");
    }
  }
  if (!s.has_selector && s.workload_kind.empty())
    return Error("a target needs a selector or a workload");
  s.containers = strings(field(entry, "containers"));
  return s;
}

bool selection_matches_pod(const PodSelection& s, const PodInfo& pod) {
  if (s.has_selector && !matches_labels(s, pod.labels)) return false;
  if (!s.workload_kind.empty() && !matches_workload(s, pod)) return false;
  return true;
}

bool selection_covers(const PodSelection& s, const PodInfo& pod, const std::string& container) {
  return (s.containers.empty() || contains(s.containers, container)) &&
         selection_matches_pod(s, pod);
}

// Pods whose containers have all terminated for good: nothing of theirs runs any more.
bool finished(const PodInfo& pod) {
  return pod.phase == "Succeeded" || pod.phase == "Failed";
}

}  // namespace

std::string container_id_from_status(std::string_view id) {
  constexpr std::string_view kPrefixes[] = {"containerd://", "cri-o://", "docker://"};
  bool known = false;
  for (auto prefix : kPrefixes) {
    if (id.starts_with(prefix)) {
      id.remove_prefix(prefix.size());
      known = true;
      break;
    }
  }
  if (!known || id.size() != 64) return "";
  std::string out(id);
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
  }
  return out;
}

PolicySpec parse_policy(const Json& policy) {
  PolicySpec p;
  p.ns = kube::namespace_of(policy);
  p.name = kube::name_of(policy);
  p.uid = kube::uid_of(policy);
  p.generation = kube::generation_of(policy);
  const Json* spec = field(policy, "spec");
  if (!spec) {
    p.invalid = "no spec";
    return p;
  }
  auto parse_list = [&](std::string_view key, std::vector<PodSelection>& out) {
    const Json* list = field(*spec, key);
    if (!list || !list->is_array()) return;
    for (const auto& entry : *list) {
      auto s = parse_selection(entry);
      if (!s.ok()) {
        if (p.invalid.empty()) p.invalid = std::string(key) + ": " + s.error().message();
        continue;
      }
      out.push_back(std::move(s).value());
    }
  };
  parse_list("targets", p.targets);
  parse_list("excludes", p.excludes);
  if (p.targets.empty() && p.invalid.empty()) p.invalid = "no targets";
  if (const Json* inst = field(*spec, "instrumentations")) {
    p.nodejs_event_loop = field(*inst, "nodejsEventLoop") != nullptr;
    p.go_tls = field(*inst, "goTLS") != nullptr;
    if (const Json* cpu = field(*inst, "cpu")) {
      p.cpu = true;
      p.cpu_frequency_hz = kDefaultCpuFrequencyHz;
      if (const Json* hz = field(*cpu, "frequencyHz")) {
        const bool in_range = hz->is_number_integer() && hz->get<int64_t>() >= 1 &&
                              hz->get<int64_t>() <= kMaxCpuFrequencyHz;
        if (in_range) {
          p.cpu_frequency_hz = hz->get<uint32_t>();
        } else if (p.invalid.empty()) {
          p.invalid = "instrumentations.cpu.frequencyHz: must be an integer within 1.." +
                      std::to_string(kMaxCpuFrequencyHz) + ", got " + hz->dump();
        }
      }
    }
  }
  if (const Json* limits = field(*spec, "limits")) {
    if (const Json* max = field(*limits, "maxTargetsPerNode"); max && max->is_number_integer()) {
      p.max_targets_per_node = max->get<int64_t>();
    }
  }
  return p;
}

PodInfo parse_pod(const Json& pod) {
  PodInfo info;
  info.ns = kube::namespace_of(pod);
  info.name = kube::name_of(pod);
  if (const Json* meta = field(pod, "metadata")) {
    info.labels = string_map(field(*meta, "labels"));
    if (const Json* owners = field(*meta, "ownerReferences"); owners && owners->is_array()) {
      for (const auto& o : *owners) info.owners.push_back({text(o, "kind"), text(o, "name")});
    }
  }
  // Containers from the spec (known before they start), ids from the status (once they do).
  if (const Json* spec = field(pod, "spec")) {
    if (const Json* cs = field(*spec, "containers"); cs && cs->is_array()) {
      for (const auto& c : *cs) info.containers.push_back({text(c, "name"), ""});
    }
  }
  if (const Json* status = field(pod, "status")) {
    info.phase = text(*status, "phase");
    if (const Json* cs = field(*status, "containerStatuses"); cs && cs->is_array()) {
      for (const auto& c : *cs) {
        const std::string name = text(c, "name");
        const std::string id = container_id_from_status(text(c, "containerID"));
        auto it = std::find_if(info.containers.begin(), info.containers.end(),
                               [&](const PodContainer& pc) { return pc.name == name; });
        if (it == info.containers.end()) {
          info.containers.push_back({name, id});
        } else {
          it->container_id = id;
        }
      }
    }
  }
  return info;
}

Json trim_pod(Json pod) {
  Json out = Json::object();
  if (const Json* meta = field(pod, "metadata")) {
    Json& m = out["metadata"] = Json::object();
    for (const char* key :
         {"name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences"}) {
      if (field(*meta, key)) m[key] = std::move(pod["metadata"][key]);
    }
  }
  if (const Json* spec = field(pod, "spec")) {
    Json names = Json::array();
    if (const Json* cs = field(*spec, "containers"); cs && cs->is_array()) {
      for (const auto& c : *cs) names.push_back({{"name", text(c, "name")}});
    }
    out["spec"] = {{"nodeName", text(*spec, "nodeName")}, {"containers", std::move(names)}};
  }
  if (const Json* status = field(pod, "status")) {
    Json statuses = Json::array();
    if (const Json* cs = field(*status, "containerStatuses"); cs && cs->is_array()) {
      for (const auto& c : *cs) {
        statuses.push_back({{"name", text(c, "name")}, {"containerID", text(c, "containerID")}});
      }
    }
    out["status"] = {{"phase", text(*status, "phase")}, {"containerStatuses", std::move(statuses)}};
  }
  return out;
}

bool matches_labels(const PodSelection& s, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : s.match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& r : s.match_expressions) {
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

bool matches_workload(const PodSelection& s, const PodInfo& pod) {
  // Deployments and CronJobs own their pods through a ReplicaSet or Job whose name derives
  // from theirs; reading the name spares the agent a watch on every ReplicaSet and Job.
  for (const auto& o : pod.owners) {
    if (o.kind == s.workload_kind && o.name == s.workload_name) return true;
    if (s.workload_kind == "Deployment" && o.kind == "ReplicaSet") {
      auto hash = pod.labels.find("pod-template-hash");
      if (hash != pod.labels.end() && !hash->second.empty() &&
          o.name == s.workload_name + "-" + hash->second) {
        return true;
      }
    }
    if (s.workload_kind == "CronJob" && o.kind == "Job" &&
        o.name.starts_with(s.workload_name + "-") &&
        all_digits(std::string_view(o.name).substr(s.workload_name.size() + 1))) {
      return true;
    }
  }
  return false;
}

std::vector<PodContainer> selected_containers(const PolicySpec& policy, const PodInfo& pod) {
  std::vector<PodContainer> out;
  if (!policy.invalid.empty() || pod.ns != policy.ns || finished(pod)) return out;
  for (const auto& c : pod.containers) {
    auto covers = [&](const PodSelection& s) { return selection_covers(s, pod, c.name); };
    if (std::any_of(policy.targets.begin(), policy.targets.end(), covers) &&
        std::none_of(policy.excludes.begin(), policy.excludes.end(), covers)) {
      out.push_back(c);
    }
  }
  return out;
}

PolicySelector::PolicySelector(std::function<void()> on_change)
    : on_change_(std::move(on_change)) {}

void PolicySelector::upsert_policy(const Json& policy) {
  PolicySpec spec = parse_policy(policy);
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = policies_.try_emplace(kube::key_of(policy));
    if (!inserted && it->second == spec) return;  // a status write: nothing to re-select
    if (!spec.invalid.empty() && (inserted || it->second.invalid != spec.invalid)) {
      log::warn("policy selects nothing",
                {{"policy", kube::key_of(policy)}, {"reason", spec.invalid}});
    }
    it->second = std::move(spec);
    dirty_ = true;
  }
  changed();
}

void PolicySelector::remove_policy(const Json& policy) {
  {
    std::lock_guard lock(mu_);
    if (policies_.erase(kube::key_of(policy)) == 0) return;
    dirty_ = true;
  }
  changed();
}

void PolicySelector::upsert_pod(const Json& pod) {
  PodInfo info = parse_pod(pod);
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = pods_.try_emplace(kube::key_of(pod));
    if (!inserted && it->second == info) return;  // e.g. a readiness change
    it->second = std::move(info);
    dirty_ = true;
  }
  changed();
}

void PolicySelector::remove_pod(const Json& pod) {
  {
    std::lock_guard lock(mu_);
    if (pods_.erase(kube::key_of(pod)) == 0) return;
    dirty_ = true;
  }
  changed();
}

kube::EventHandlers PolicySelector::policy_handlers() {
  return {[this](const kube::ObjectPtr& o) { upsert_policy(*o); },
          [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { upsert_policy(*o); },
          [this](const kube::ObjectPtr& o) { remove_policy(*o); }};
}

kube::EventHandlers PolicySelector::pod_handlers() {
  return {[this](const kube::ObjectPtr& o) { upsert_pod(*o); },
          [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { upsert_pod(*o); },
          [this](const kube::ObjectPtr& o) { remove_pod(*o); }};
}

void PolicySelector::changed() {
  if (on_change_) on_change_();
}

std::optional<Selection> PolicySelector::select(const ProcessInfo& process) {
  if (process.container_id.empty()) return std::nullopt;
  std::lock_guard lock(mu_);
  const Plan& plan = plan_locked();
  auto it = plan.by_container_id.find(process.container_id);
  if (it == plan.by_container_id.end()) return std::nullopt;
  return it->second;
}

std::vector<PolicyState> PolicySelector::policies() {
  std::lock_guard lock(mu_);
  return plan_locked().policies;
}

const PolicySelector::Plan& PolicySelector::plan_locked() {
  if (!dirty_) return plan_;
  Plan plan;
  for (const auto& [key, policy] : policies_) {
    PolicyState st{.ns = policy.ns,
                   .name = policy.name,
                   .uid = policy.uid,
                   .generation = policy.generation,
                   .nodejs_event_loop = policy.nodejs_event_loop,
                   .go_tls = policy.go_tls,
                   .cpu = policy.cpu};
    const std::string prefix = policy.ns + "/";
    size_t over_limit = 0;
    for (auto it = pods_.lower_bound(prefix); it != pods_.end() && it->first.starts_with(prefix);
         ++it) {
      const PodInfo& pod = it->second;
      auto containers = selected_containers(policy, pod);
      if (containers.empty()) continue;
      st.matched_pods.push_back(pod.name);
      for (auto& c : containers) {
        if (static_cast<int64_t>(st.containers.size()) < policy.max_targets_per_node) {
          st.containers.push_back({pod.name, c.name, c.container_id});
          continue;
        }
        ++over_limit;
        if (st.problems.size() < kMaxProblemsPerPolicy) {
          st.problems.push_back({"LimitExceeded", pod.name, c.name,
                                 "not instrumented: the policy selects more containers on this "
                                 "node than limits.maxTargetsPerNode (" +
                                     std::to_string(policy.max_targets_per_node) + ")"});
        }
      }
    }
    if (over_limit > 0) {
      log::debug("policy over its node limit",
                 {{"policy", key}, {"containers_left_out", over_limit}});
    }
    if (policy.nodejs_event_loop || policy.go_tls || policy.cpu) {
      for (const auto& c : st.containers) {
        if (c.container_id.empty()) continue;
        Selection& sel = plan.by_container_id[c.container_id];
        sel.labels = {policy.ns, c.pod, c.container};
        sel.nodejs_event_loop = sel.nodejs_event_loop || policy.nodejs_event_loop;
        sel.go_tls = sel.go_tls || policy.go_tls;
        sel.cpu = sel.cpu || policy.cpu;
        sel.cpu_frequency_hz = std::max(sel.cpu_frequency_hz, policy.cpu_frequency_hz);
      }
    }
    plan.policies.push_back(std::move(st));
  }
  plan_ = std::move(plan);
  dirty_ = false;
  return plan_;
}

}  // namespace sonde::agent
