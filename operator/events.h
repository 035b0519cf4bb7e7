// Kubernetes Events (core/v1) about ProfilingPolicies and ClusterProfilingPolicies (those in the
// "default" namespace, as kubectl records a cluster-scoped object's): what `kubectl describe`
// and `kubectl get events` show when a policy's status changes in a way a user acts on.
//
// policy_events() decides which transitions matter, comparing the old and new status:
//  - Accepted turning False: Warning InvalidSpec, with the field at fault.
//  - Ready changing status or reason: Normal when it turns True (AllNodesReporting) or is
//    waiting for nodes, Warning otherwise (NoAgents, StaleNodeReports); InvalidSpec is left to
//    the Accepted event.
//  - Degraded changing status or reason: Warning with the problem's reason when True, Normal
//    AsExpected when it clears.
// The controller writes them with kube::EventRecorder (common/kube/event_recorder.h) under
// kPolicyEventLimits (burst 10, then one a minute per policy; repeats within 10 minutes
// aggregated), with_policy_type() giving a policy read from a list its apiVersion and kind.
// Only the leader records: the controller calls it from reconcile, which runs only while this
// replica leads.
#pragma once

#include <vector>

#include "common/kube/api_client.h"
#include "common/kube/event_recorder.h"

namespace sonde::op {

inline constexpr kube::EventLimits kPolicyEventLimits{};

using PolicyEvent = kube::EventNote;
using kube::EventRecorder;

// The events a status change from `old_status` (null or {} for a new policy) to `new_status`
// deserves.
std::vector<PolicyEvent> policy_events(const kube::Json& old_status, const kube::Json& new_status);

// `policy` with its apiVersion and kind, which objects from a list may lack (a namespaced
// policy is a ProfilingPolicy, a cluster-scoped one a ClusterProfilingPolicy).
kube::Json with_policy_type(const kube::Json& policy);

}  // namespace sonde::op
