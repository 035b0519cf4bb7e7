#include "agent/cluster/policy_selector.h"

#include <algorithm>
#include <utility>

#include "common/json_fields.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

using kube::Json;

std::string text(const Json& object, std::string_view key) {
  const Json* v = field(object, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::map<std::string, std::string> string_map(const Json* object) {
  std::map<std::string, std::string> out;
  if (!object || !object->is_object()) return out;
  for (const auto& [k, v] : object->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool selection_covers(const crd::PodSelection& s, const PodInfo& pod,
                      const std::string& container) {
  if (!s.containers.empty() &&
      std::find(s.containers.begin(), s.containers.end(), container) == s.containers.end()) {
    return false;
  }
  if (s.selector && !s.selector->matches(pod.labels)) return false;
  if (s.workload && !matches_workload(*s.workload, pod)) return false;
  return true;
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

KnownPolicy parse_policy(const Json& policy, crd::PolicyKind kind) {
  KnownPolicy p{.id = crd::policy_id(policy, kind)};
  const Json* spec = field(policy, "spec");
  auto parsed = crd::parse_policy_spec(spec ? *spec : Json(), kind);
  if (parsed.ok()) {
    p.spec = std::move(parsed).value();
  } else {
    p.invalid = parsed.error().message();
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

Json trim_namespace(Json ns) {
  Json out = Json::object();
  if (const Json* meta = field(ns, "metadata")) {
    Json& m = out["metadata"] = Json::object();
    for (const char* key : {"name", "uid", "resourceVersion", "labels"}) {
      if (field(*meta, key)) m[key] = std::move(ns["metadata"][key]);
    }
  }
  return out;
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

bool matches_workload(const crd::WorkloadRef& w, const PodInfo& pod) {
  // Deployments and CronJobs own their pods through a ReplicaSet or Job whose name derives
  // from theirs; reading the name spares the agent a watch on every ReplicaSet and Job.
  for (const auto& o : pod.owners) {
    if (o.kind == w.kind && o.name == w.name) return true;
    if (w.kind == "Deployment" && o.kind == "ReplicaSet") {
      auto hash = pod.labels.find("pod-template-hash");
      if (hash != pod.labels.end() && !hash->second.empty() &&
          o.name == w.name + "-" + hash->second) {
        return true;
      }
    }
    if (w.kind == "CronJob" && o.kind == "Job" && o.name.starts_with(w.name + "-") &&
        all_digits(std::string_view(o.name).substr(w.name.size() + 1))) {
      return true;
    }
  }
  return false;
}

std::vector<PodContainer> selected_containers(const KnownPolicy& policy, const PodInfo& pod,
                                              const Labels* namespace_labels) {
  std::vector<PodContainer> out;
  if (!policy.spec || policy.spec->suspend || finished(pod)) return out;
  if (policy.id.kind == crd::PolicyKind::kCluster) {
    if (namespace_labels == nullptr || !policy.spec->namespace_selector ||
        !policy.spec->namespace_selector->matches(*namespace_labels)) {
      return out;
    }
  } else if (pod.ns != policy.id.ns) {
    return out;
  }
  const auto& targets = policy.spec->targets;
  const auto& excludes = policy.spec->excludes;
  for (const auto& c : pod.containers) {
    auto covers = [&](const crd::PodSelection& s) { return selection_covers(s, pod, c.name); };
    if (std::any_of(targets.begin(), targets.end(), covers) &&
        std::none_of(excludes.begin(), excludes.end(), covers)) {
      out.push_back(c);
    }
  }
  return out;
}

PolicySelector::PolicySelector(std::function<void()> on_change)
    : on_change_(std::move(on_change)) {}

void PolicySelector::upsert_policy(const Json& policy, crd::PolicyKind kind) {
  KnownPolicy spec = parse_policy(policy, kind);
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = policies_.try_emplace(kube::key_of(policy));
    if (!inserted && it->second == spec) return;  // a status write: nothing to re-select
    if (!spec.invalid.empty() && (inserted || it->second.invalid != spec.invalid)) {
      log::warn("policy selects nothing", {{"kind", crd::kind_name(kind)},
                                           {"policy", kube::key_of(policy)},
                                           {"reason", spec.invalid}});
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

void PolicySelector::upsert_namespace(const Json& ns) {
  Labels labels;
  if (const Json* meta = field(ns, "metadata")) labels = string_map(field(*meta, "labels"));
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = namespaces_.try_emplace(kube::name_of(ns));
    if (!inserted && it->second == labels) return;  // e.g. an annotation or status change
    it->second = std::move(labels);
    dirty_ = true;
  }
  changed();
}

void PolicySelector::remove_namespace(const Json& ns) {
  {
    std::lock_guard lock(mu_);
    if (namespaces_.erase(kube::name_of(ns)) == 0) return;
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

kube::EventHandlers PolicySelector::cluster_policy_handlers() {
  constexpr auto kCluster = crd::PolicyKind::kCluster;
  return {[this](const kube::ObjectPtr& o) { upsert_policy(*o, kCluster); },
          [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { upsert_policy(*o, kCluster); },
          [this](const kube::ObjectPtr& o) { remove_policy(*o); }};
}

kube::EventHandlers PolicySelector::namespace_handlers() {
  return {[this](const kube::ObjectPtr& o) { upsert_namespace(*o); },
          [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { upsert_namespace(*o); },
          [this](const kube::ObjectPtr& o) { remove_namespace(*o); }};
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
    PolicyState st{.id = policy.id, .invalid = policy.invalid};
    if (policy.spec) {
      st.instrumentations = policy.spec->instrumentations;
      st.suspended = policy.spec->suspend;
      st.max_targets_per_node = policy.spec->limits.max_targets_per_node;
    }
    // A namespaced policy reads its namespace's pods, a cluster policy every pod (by
    // namespace/name, so a namespace's labels are looked up once per run of its pods).
    const bool cluster = policy.id.kind == crd::PolicyKind::kCluster;
    const std::string prefix = cluster ? "" : policy.id.ns + "/";
    const Labels* ns_labels = nullptr;
    std::string ns_of_labels;
    for (auto it = pods_.lower_bound(prefix); it != pods_.end() && it->first.starts_with(prefix);
         ++it) {
      const PodInfo& pod = it->second;
      if (cluster && (ns_labels == nullptr || ns_of_labels != pod.ns)) {
        auto ns = namespaces_.find(pod.ns);
        ns_labels = ns == namespaces_.end() ? nullptr : &ns->second;
        ns_of_labels = pod.ns;
      }
      auto containers = selected_containers(policy, pod, ns_labels);
      if (containers.empty()) continue;
      st.matched_pods.push_back(cluster ? pod.ns + "/" + pod.name : pod.name);
      for (auto& c : containers) {
        auto& list = static_cast<int64_t>(st.containers.size()) < st.max_targets_per_node
                         ? st.containers
                         : st.over_limit;
        list.push_back({pod.name, c.name, c.container_id, pod.ns});
      }
    }
    if (!st.over_limit.empty()) {
      log::debug("policy over its node limit",
                 {{"policy", key}, {"containers_left_out", st.over_limit.size()}});
    }
    if (any_requested(st.instrumentations)) {
      // As sonde_policy_selection names it, with the namespace: "shop/web",
      // "clusterprofilingpolicy/web".
      const std::string name = cluster ? "clusterprofilingpolicy/" + policy.id.name
                                       : policy.id.ns + "/" + policy.id.name;
      // Kinds that take the policy's limits (Go TLS) hold them in their parameters.
      const crd::PolicyLimits& limits = policy.spec->limits;
      const Instrumentations asked = with_limits(
          st.instrumentations, Asker{.name = name,
                                     .generation = policy.id.generation,
                                     .max_uprobes_per_node = limits.max_uprobes_per_node,
                                     .max_overhead_percent = limits.max_overhead_percent});
      for (const auto& c : st.containers) {
        if (c.container_id.empty()) continue;
        Selection& sel = plan.by_container_id[c.container_id];
        sel.labels = {c.ns, c.pod, c.container};
        for (const auto& kind : instrumentation_kinds()) {
          const auto& params = asked[kind.id];
          if (!params) continue;
          auto& merged = sel.instrumentations[kind.id];
          merged = merged ? kind.merge(merged, params) : params;
        }
      }
    }
    plan.policies.push_back(std::move(st));
  }
  plan_ = std::move(plan);
  dirty_ = false;
  return plan_;
}

}  // namespace sonde::agent
