// PodMonitorSync: when the Prometheus Operator is installed (its podmonitors CRD exists),
// keeps one PodMonitor that scrapes the sonde agents' /metrics while at least one
// ProfilingPolicy exists, and deletes it when none does — so Prometheus only scrapes agents
// that have something to report. The PodMonitor selects the agent pods by the chart's labels
// (app.kubernetes.io/name=sonde, app.kubernetes.io/component=agent) and their "metrics" port.
//
// Only objects labelled app.kubernetes.io/managed-by=sonde-operator are changed or deleted:
// a PodMonitor of the same name made by someone else is left alone (and reported).
// Not thread-safe: the controller calls sync() from one thread.
#pragma once

#include <string>

#include "common/kube/api_client.h"
#include "common/result.h"

namespace sonde::op {

inline const kube::ResourceType kPodMonitors{"monitoring.coreos.com", "v1", "podmonitors", true};
inline const kube::ResourceType kCustomResourceDefinitions{"apiextensions.k8s.io", "v1",
                                                           "customresourcedefinitions", false};

class PodMonitorSync {
 public:
  enum class Action { kCrdAbsent, kCreated, kUpdated, kUnchanged, kDeleted, kAbsent, kForeign };

  PodMonitorSync(kube::ApiClient& client, std::string ns, std::string name = "sonde-agents");

  // One pass: make the PodMonitor exist (any_policy) or not.
  Result<Action> sync(bool any_policy);

  // The object sync() maintains.
  kube::Json desired() const;

 private:
  kube::ApiClient& client_;
  const std::string ns_;
  const std::string name_;
};

const char* to_string(PodMonitorSync::Action action);

}  // namespace sonde::op
