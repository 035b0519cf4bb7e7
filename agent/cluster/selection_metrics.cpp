#include "agent/cluster/selection_metrics.h"

#include "agent/metrics/metrics_server.h"

namespace sonde::agent {

prometheus::MetricFamily policy_selection_family(const std::vector<PolicyState>& policies,
                                                 const std::string& node) {
  auto family = gauge_family("sonde_policy_selection",
                             "1 for each container a ProfilingPolicy or ClusterProfilingPolicy "
                             "(policy=\"clusterprofilingpolicy/<name>\") selects on this node; "
                             "join on (namespace, pod, container) to aggregate by policy.");
  for (const auto& policy : policies) {
    const std::string name = policy.id.kind == crd::PolicyKind::kCluster
                                 ? "clusterprofilingpolicy/" + policy.id.name
                                 : policy.id.name;
    for (const auto& c : policy.containers) {
      add_sample(family,
                 {{"namespace", c.ns},
                  {"pod", c.pod},
                  {"container", c.container},
                  {"policy", name},
                  {"node", node}},
                 1);
    }
  }
  return family;
}

}  // namespace sonde::agent
