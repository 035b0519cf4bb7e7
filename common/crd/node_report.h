// ProfilingNodeReport (crds/profilingnodereports.sonde.dev.yaml, contract in crds/README.md)
// as typed C++: the agent builds and serializes it, the operator parses it. One report per
// node, in sonde's namespace, named after the node; its liveness is the node's Lease
// (node_lease_name()), not a field of the report, so the report is written only when what it
// says changes.
//
// Entries are keyed by the policy's uid: a policy deleted and re-created under the same name
// is a different policy and inherits nothing. An entry is written for every policy the agent
// knows, selecting something on the node or not (that is how the operator counts the nodes
// that have seen a generation).
//
// Size: a report has at most kMaxReportPolicies entries and bound_report() keeps its JSON
// within kMaxReportBytes (1 MiB, two thirds of etcd's 1.5 MiB object limit) by cutting
// problem examples, then problem counts, from the last entries first, counting what it cut
// in problemsCut. The fixed part of an entry is bounded (uid, integers), so the budget always
// holds kMaxReportPolicies entries (node_report_test checks the worst case).
//
// Pure functions and value types, no I/O; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/kube/resource.h"
#include "common/result.h"

namespace sonde::crd {

using kube::Json;

inline constexpr size_t kMaxReportPolicies = 5000;
inline constexpr size_t kMaxReportBytes = 1024 * 1024;
inline constexpr size_t kMaxProblemMessage = 512;
inline constexpr size_t kMaxNamespaceName = 63;
inline constexpr size_t kMaxPodName = 253;
inline constexpr size_t kMaxContainerName = 63;
inline constexpr size_t kMaxUid = 36;          // Kubernetes uids are UUIDs
inline constexpr int64_t kMaxCount = 1000000;  // pods, processes, containers per node

// Why selected containers are not (fully) instrumented. kInvalidSpec: the agent cannot apply
// the policy's spec (e.g. an agent older than the CRD); the message says why.
inline constexpr const char* kProblemReasons[] = {"SymbolsNotFound",  "LimitExceeded",
                                                  "OverheadExceeded", "KernelUnsupported",
                                                  "Conflicting",      "InvalidSpec"};
inline constexpr const char* kInvalidSpec = "InvalidSpec";

// The containers of one reason: how many, and one of them as an example (namespace, pod,
// container, message; all empty once bound_report() has cut the example, or for InvalidSpec's
// pod and container).
struct PolicyProblem {
  std::string reason;  // one of kProblemReasons
  int64_t count = 0;   // containers (1 for InvalidSpec)
  std::string pod;     // the pod's name
  std::string container;
  std::string message;  // at most kMaxProblemMessage bytes of UTF-8
  // The pod's namespace, in a ClusterProfilingPolicy's entry; empty in a ProfilingPolicy's
  // (the pod is in the policy's namespace).
  std::string ns;
  bool operator==(const PolicyProblem&) const = default;
};

// One status.policies[] element.
struct PolicyEntry {
  std::string uid;
  int64_t observed_generation = 0;
  int64_t matched_pods = 0;             // pods on this node the policy selects
  int64_t instrumented_pods = 0;        // of those, pods with every selected container instrumented
  int64_t nodejs_processes = 0;         // Node.js main threads instrumented
  std::vector<PolicyProblem> problems;  // at most one per reason
  bool operator==(const PolicyEntry&) const = default;
};

struct NodeReportStatus {
  std::string agent_version;
  std::string kernel_release;
  bool btf = false;
  std::vector<PolicyEntry> policies;  // sorted by uid, at most kMaxReportPolicies
  // Problem examples and counts bound_report() left out, and entries beyond
  // kMaxReportPolicies; the operator says so in the Degraded message.
  int64_t problems_cut = 0;
  int64_t policies_cut = 0;
  bool operator==(const NodeReportStatus&) const = default;
};

Json to_json(const NodeReportStatus& status);
// to_json(status).dump().size(), computed without building the JSON.
size_t serialized_size(const NodeReportStatus& status);
// status of a report object; an error names the field at fault.
Result<NodeReportStatus> parse_node_report_status(const Json& status);

// The node a report object is for (spec.nodeName, else its name).
std::string report_node(const Json& report);

// The whole object; `node_uid` empty leaves out the ownerReference to the Node.
Json report_object(const std::string& node, const std::string& ns, const std::string& node_uid,
                   const NodeReportStatus& status);

// Sorts the entries by uid, keeps at most kMaxReportPolicies, and cuts problems until the
// JSON is at most `max_bytes` (see the header comment).
void bound_report(NodeReportStatus& status, size_t max_bytes = kMaxReportBytes);

// The node's heartbeat Lease (coordination.k8s.io/v1) in sonde's namespace.
std::string node_lease_name(const std::string& node);
// The label that marks node Leases, for the operator's watch.
inline constexpr const char* kNodeLeaseLabel = "sonde.dev/node-lease";
// The Lease object renewed at `renewed` (MicroTime, as the kubelet writes it); `node_uid`
// empty leaves out the ownerReference to the Node.
Json node_lease_object(const std::string& node, const std::string& ns, const std::string& node_uid,
                       Duration lease_duration, WallTime renewed);

}  // namespace sonde::crd
