// ProfilingPolicy (crds/profilingpolicies.sonde.dev.yaml) and ClusterProfilingPolicy
// (crds/clusterprofilingpolicies.sonde.dev.yaml), sonde.dev/v1alpha1, as typed C++: the one
// parser, validator and serializer of both kinds' spec, linked by the operator (which reports
// a spec it rejects as Accepted=False/InvalidSpec) and the agent (which selects nothing for
// such a spec and says so in its node report). The two kinds share the spec; the cluster-scoped
// one adds a required spec.namespaceSelector (which namespaces' pods targets and excludes
// apply to; {} is every namespace), the namespaced one applies to its own namespace.
//
// parse_policy_spec() accepts exactly what the CRD's OpenAPI schema and CEL rules accept,
// and additionally rejects what they cannot express (a label selector's empty key). The table
// in crds/tests/policy_validation_table.json is checked against both, in `make test`, so the
// two cannot drift apart. Defaults are the schema's: a spec the API server stored has them
// already; one read from elsewhere gets the same values here.
//
// Pure functions and value types, no I/O; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/instrumentation.h"
#include "common/kube/resource.h"
#include "common/result.h"

namespace sonde::crd {

using kube::Json;

// A matchExpressions entry of a metav1.LabelSelector.
struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kExists;
  std::vector<std::string> values;
  bool operator==(const LabelRequirement&) const = default;
};

// metav1.LabelSelector. An empty selector ({}) selects everything.
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelRequirement> match_expressions;
  bool matches(const std::map<std::string, std::string>& labels) const;
  bool operator==(const LabelSelector&) const = default;
};

inline constexpr const char* kWorkloadKinds[] = {"Deployment", "StatefulSet", "DaemonSet",
                                                 "ReplicaSet", "Job",         "CronJob"};

struct WorkloadRef {
  std::string kind;  // one of kWorkloadKinds
  std::string name;
  bool operator==(const WorkloadRef&) const = default;
};

// One entry of spec.targets or spec.excludes: it covers a container when every part given
// matches (at least one of selector and workload is given).
struct PodSelection {
  std::optional<LabelSelector> selector;
  std::optional<WorkloadRef> workload;
  std::vector<std::string> containers;  // empty: every container
  bool operator==(const PodSelection&) const = default;
};

struct PolicyLimits {
  int64_t max_targets_per_node = 100;
  int64_t max_uprobes_per_node = 1000;
  // Go TLS: the estimated CPU its probes add to a container, in percent of the container's own
  // CPU time, above which the agent detaches the container's probes (OverheadExceeded). Absent:
  // no budget. kMinOverheadPercent..100.
  std::optional<double> max_overhead_percent;
  bool operator==(const PolicyLimits&) const = default;
};

// Which of the two kinds a policy object is.
enum class PolicyKind {
  kNamespaced,  // ProfilingPolicy: pods of the policy's namespace
  kCluster,     // ClusterProfilingPolicy: pods of the namespaces namespaceSelector selects
};
// "ProfilingPolicy" or "ClusterProfilingPolicy".
const char* kind_name(PolicyKind kind);

// spec. Bounds are the schema's (kMax* below).
struct PolicySpec {
  // ClusterProfilingPolicy only (required there; {} selects every namespace): the namespaces,
  // by their labels, whose pods targets and excludes apply to. Always empty for a
  // ProfilingPolicy (its schema has no such field; the API server prunes it).
  std::optional<LabelSelector> namespace_selector;
  std::vector<PodSelection> targets;  // 1..kMaxSelections
  std::vector<PodSelection> excludes;
  Instrumentations instrumentations;  // at least one (common/instrumentation.h)
  PolicyLimits limits;
  // True: nothing is instrumented (what was stops), the policy still appears in node reports
  // and its status says Ready=False/Suspended.
  bool suspend = false;
  bool operator==(const PolicySpec&) const = default;
};

inline constexpr size_t kMaxSelections = 32;
inline constexpr size_t kMaxContainerNames = 64;

// The identity of a policy object. uid tells apart a policy deleted and re-created under the
// same name; generation is the spec version the agents report back.
struct PolicyId {
  std::string ns;  // empty for a ClusterProfilingPolicy
  std::string name;
  std::string uid;
  int64_t generation = 0;
  PolicyKind kind = PolicyKind::kNamespaced;
  bool operator==(const PolicyId&) const = default;
};

PolicyId policy_id(const Json& policy, PolicyKind kind = PolicyKind::kNamespaced);

// The spec of a policy object of `kind` or an error that names the field at fault, e.g.
// "spec.targets[1].selector.matchExpressions[0].values: required for operator In".
Result<PolicySpec> parse_policy_spec(const Json& spec, PolicyKind kind = PolicyKind::kNamespaced);

// The spec as the API would hold it (defaults filled in); parse_policy_spec(to_json(s), k) == s
// for the kind k that `s` is of (namespace_selector set: kCluster).
Json to_json(const PolicySpec& spec);

}  // namespace sonde::crd
