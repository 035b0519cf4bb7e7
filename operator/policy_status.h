// The status of a ProfilingPolicy or ClusterProfilingPolicy (the same for both kinds),
// computed from the policy and its node report entries.
// Pure functions (no I/O): the reconciler calls them, tests call them directly.
//
// Conditions (metav1.Condition shape):
//  - Accepted: the spec is usable. False/InvalidSpec names the field at fault (crd::
//    parse_policy_spec(), the validator the agents use too, which agrees with the CRD's
//    schema); False/RejectedByAgents names the nodes whose agents report that they cannot
//    apply this generation (an InvalidSpec problem: e.g. an agent older than the CRD).
//  - Ready: every node with an agent reports the policy's current generation
//    (True/AllNodesReporting; False/WaitingForNodes, NoAgents, StaleNodeReports — some
//    agent's node Lease is not renewed, so that node is not known to be covered —
//    InvalidSpec, or Suspended when spec.suspend is set).
//  - Degraded: some selected pod could not be (fully) instrumented. The reason is the most
//    frequent problem reason across nodes (counted in containers), ties broken by severity
//    KernelUnsupported > LimitExceeded > OverheadExceeded > SymbolsNotFound > Conflicting; the
//    message counts each
//    reason and names a few pods. False/AsExpected otherwise.
// lastTransitionTime is carried over from the previous status while a condition's status
// stays the same, so an unchanged world yields a byte-identical status (and no write).
#pragma once

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/crd/profiling_policy.h"
#include "common/kube/resource.h"
#include "operator/report_index.h"

namespace sonde::op {

// Problems named in a message, at most; the counts cover all of them.
inline constexpr size_t kMaxPodsInMessage = 3;

// `entries` and `nodes_total` cover nodes with a current report; `stale_nodes` counts those
// whose report is too old to trust (their entries are not passed). `now`: RFC 3339 time for
// new transitions.
kube::Json compute_status(const kube::Json& policy, const std::vector<NodeEntry>& entries,
                          size_t nodes_total, size_t stale_nodes, const std::string& now,
                          crd::PolicyKind kind = crd::PolicyKind::kNamespaced);

}  // namespace sonde::op
