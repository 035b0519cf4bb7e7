// The in-cluster agent's policy selection as Prometheus series, so that Prometheus can
// aggregate the per-container series by policy:
//
//   sonde_policy_selection{namespace, pod, container, policy, node} 1
//
// one series per container a policy selects on this node (within its maxTargetsPerNode),
// whether or not anything in it could be instrumented. `namespace` is the pod's; `policy` is a
// ProfilingPolicy's name, or "clusterprofilingpolicy/<name>" for a ClusterProfilingPolicy
// (kubectl's kind/name; a ProfilingPolicy's name cannot contain '/'). Joined on
// (namespace, pod, container) with the agent's per-container counters, e.g.
// container_nodejs_event_loop_blocked_time_seconds_total, it gives policy-level figures as a
// sum of per-container rates: an agent restart or a pod leaving never turns into a spike, as
// a sum of counters exported as one counter would (the chart's recording rules do this).
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <vector>

#include "agent/cluster/policy_selector.h"

namespace sonde::agent {

prometheus::MetricFamily policy_selection_family(const std::vector<PolicyState>& policies,
                                                 const std::string& node);

}  // namespace sonde::agent
