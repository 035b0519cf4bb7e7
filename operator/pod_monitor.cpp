#include "operator/pod_monitor.h"

namespace sonde::op {

using kube::Json;

namespace {
constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
constexpr const char* kUs = "sonde-operator";
}  // namespace

const char* to_string(PodMonitorSync::Action action) {
  switch (action) {
    case PodMonitorSync::Action::kCrdAbsent: return "crd-absent";
    case PodMonitorSync::Action::kCreated: return "created";
    case PodMonitorSync::Action::kUpdated: return "updated";
    case PodMonitorSync::Action::kUnchanged: return "unchanged";
    case PodMonitorSync::Action::kDeleted: return "deleted";
    case PodMonitorSync::Action::kAbsent: return "absent";
    case PodMonitorSync::Action::kForeign: return "foreign";
  }
  return "unknown";
}

PodMonitorSync::PodMonitorSync(kube::ApiClient& client, std::string ns, std::string name)
    : client_(client), ns_(std::move(ns)), name_(std::move(name)) {}

Json PodMonitorSync::desired() const {
  return {{"apiVersion", "monitoring.coreos.com/v1"},
          {"kind", "PodMonitor"},
          {"metadata", {{"name", name_}, {"namespace", ns_}, {"labels", {{kManagedBy, kUs}}}}},
          {"spec",
           {{"selector",
             {{"matchLabels",
               {{"app.kubernetes.io/name", "sonde"}, {"app.kubernetes.io/component", "agent"}}}}},
            {"namespaceSelector", {{"matchNames", Json::array({ns_})}}},
            {"podMetricsEndpoints", Json::array({{{"port", "metrics"}, {"path", "/metrics"}}})}}}};
}

Result<PodMonitorSync::Action> PodMonitorSync::sync(bool any_policy) {
  auto crd = client_.get(kCustomResourceDefinitions, "", "podmonitors.monitoring.coreos.com");
  if (!crd.ok()) {
    if (kube::is_not_found(crd.error())) return Action::kCrdAbsent;
    return crd.error().wrap("look up the PodMonitor CRD");
  }
  auto current = client_.get(kPodMonitors, ns_, name_);
  if (!current.ok() && !kube::is_not_found(current.error())) {
    return current.error().wrap("read PodMonitor " + ns_ + "/" + name_);
  }
  const bool exists = current.ok();
  const bool ours = exists && current->value("metadata", Json::object())
                                      .value("labels", Json::object())
                                      .value(kManagedBy, "") == kUs;
  if (exists && !ours) return Action::kForeign;

  if (!any_policy) {
    if (!exists) return Action::kAbsent;
    Status removed = client_.remove(kPodMonitors, ns_, name_);
    if (!removed.ok() && !kube::is_not_found(removed.error())) {
      return removed.error().wrap("delete PodMonitor " + ns_ + "/" + name_);
    }
    return Action::kDeleted;
  }
  Json want = desired();
  if (!exists) {
    auto created = client_.create(kPodMonitors, ns_, want);
    if (!created.ok()) return created.error().wrap("create PodMonitor " + ns_ + "/" + name_);
    return Action::kCreated;
  }
  if ((*current)["spec"] == want["spec"]) return Action::kUnchanged;
  want["metadata"]["resourceVersion"] = kube::resource_version_of(*current);
  auto updated = client_.replace(kPodMonitors, ns_, name_, want);
  if (!updated.ok()) return updated.error().wrap("update PodMonitor " + ns_ + "/" + name_);
  return Action::kUpdated;
}

}  // namespace sonde::op
