// PolicySelector: the in-cluster Selector. It answers "what to instrument in this process"
// from the ProfilingPolicies and ClusterProfilingPolicies it knows, the namespaces' labels and
// the pods of this node, all fed by informers.
//
// A process is mapped to its pod through its container id (from /proc/<pid>/cgroup) and the
// pods' status.containerStatuses[].containerID. A ProfilingPolicy selects containers of pods in
// its own namespace, a ClusterProfilingPolicy those of pods in the namespaces whose labels its
// namespaceSelector matches (a namespace not known yet is not matched; a namespace's labels
// changing re-selects): those its targets select minus those its excludes select, at most
// limits.maxTargetsPerNode of them (the rest are reported as LimitExceeded). A container
// selected by several policies, of either kind, gets every instrumentation any of them asks
// for (the highest CPU frequency) and counts in each one's report entry; the Go TLS feature
// holds it to the limits.maxUprobesPerNode of each policy asking Go TLS of it
// (the limits its parameters take, with_limits()). A suspended policy,
// or one whose spec crd::parse_policy_spec() rejects, selects nothing.
//
// Policies are known by namespace/name, cluster policies by name (one object at a time has a
// name; the two never collide as a namespaced key has a '/') and reported by uid: a policy
// re-created under its old name replaces the old one here, and its report entry is a new one.
//
// The selection is recomputed lazily, at the first select() or snapshot after a change, so an
// informer's initial list of N objects costs one recomputation, not N.
//
// Thread-safe: informer threads feed it, the runtime's thread calls select(), the report
// writer reads policies(). The change callback runs on the feeding thread, without the
// selector's lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/agent_runtime.h"
#include "common/crd/profiling_policy.h"
#include "common/kube/informer.h"
#include "common/kube/resource.h"

namespace sonde::agent {

// What the agent knows of a ProfilingPolicy or ClusterProfilingPolicy (id.kind): its identity
// and, when crd::parse_policy_spec() accepts it, its spec.
struct KnownPolicy {
  crd::PolicyId id;
  std::optional<crd::PolicySpec> spec;  // empty: the spec cannot be applied, see `invalid`
  std::string invalid;
  bool operator==(const KnownPolicy&) const = default;
};

struct PodOwner {
  std::string kind;
  std::string name;
  bool operator==(const PodOwner&) const = default;
};

struct PodContainer {
  std::string name;
  std::string container_id;  // 64 hex digits, empty until the container has started
  bool operator==(const PodContainer&) const = default;
};

// What the agent needs of a Pod.
struct PodInfo {
  std::string ns;
  std::string name;
  std::string phase;
  std::map<std::string, std::string> labels;
  std::vector<PodOwner> owners;
  std::vector<PodContainer> containers;
  bool operator==(const PodInfo&) const = default;
};

struct SelectedContainer {
  std::string pod;
  std::string container;
  std::string container_id;  // empty while the container has not started
  std::string ns;            // the pod's namespace
  bool operator==(const SelectedContainer&) const = default;
};

using Labels = std::map<std::string, std::string>;

// What one policy selects on this node, for the node report.
struct PolicyState {
  crd::PolicyId id;
  Instrumentations instrumentations;  // what it asks for (none when invalid)
  bool suspended = false;
  std::string invalid;  // why the agent cannot apply the spec
  int64_t max_targets_per_node = 0;
  std::vector<std::string> matched_pods;      // sorted pod names (namespace/name: cluster kind)
  std::vector<SelectedContainer> containers;  // instrumented ones, within the limit
  std::vector<SelectedContainer> over_limit;  // selected beyond limits.maxTargetsPerNode
};

KnownPolicy parse_policy(const kube::Json& policy,
                         crd::PolicyKind kind = crd::PolicyKind::kNamespaced);
PodInfo parse_pod(const kube::Json& pod);
// The informer Transform for namespaces: keeps only the name, uid, resourceVersion, labels.
kube::Json trim_namespace(kube::Json ns);
// The informer Transform for pods: keeps only the fields parse_pod() and the informer read.
kube::Json trim_pod(kube::Json pod);
// "containerd://<id>", "cri-o://<id>", "docker://<id>" → the 64-hex id (lower case); "" for
// anything else.
std::string container_id_from_status(std::string_view container_id);

// Whether the pod belongs to the workload: a direct owner of that kind and name, or for a
// Deployment its ReplicaSet "<name>-<pod-template-hash>", for a CronJob its Job
// "<name>-<scheduled time>".
bool matches_workload(const crd::WorkloadRef& workload, const PodInfo& pod);
// The pod's containers `policy` selects, in the pod's order (none when it is invalid or
// suspended, or the pod is of another namespace: for a ClusterProfilingPolicy, one whose
// labels, `namespace_labels`, its namespaceSelector does not match, or null, unknown).
std::vector<PodContainer> selected_containers(const KnownPolicy& policy, const PodInfo& pod,
                                              const Labels* namespace_labels = nullptr);

class PolicySelector final : public Selector {
 public:
  // `on_change` is called after every change of the policies or pods (the runtime's
  // request_reselect()).
  explicit PolicySelector(std::function<void()> on_change = {});

  void upsert_policy(const kube::Json& policy, crd::PolicyKind kind = crd::PolicyKind::kNamespaced);
  void remove_policy(const kube::Json& policy);
  void upsert_namespace(const kube::Json& ns);
  void remove_namespace(const kube::Json& ns);
  void upsert_pod(const kube::Json& pod);
  void remove_pod(const kube::Json& pod);

  // Handlers that feed this selector, for the ProfilingPolicy, ClusterProfilingPolicy,
  // Namespace and Pod informers.
  kube::EventHandlers policy_handlers();
  kube::EventHandlers cluster_policy_handlers();
  kube::EventHandlers namespace_handlers();
  kube::EventHandlers pod_handlers();

  std::optional<Selection> select(const ProcessInfo& process) override;

  // Every known policy (sorted by key: cluster policies' names and namespace/name) and what
  // it selects on this node.
  std::vector<PolicyState> policies();

 private:
  struct Plan {
    std::vector<PolicyState> policies;
    std::map<std::string, Selection, std::less<>> by_container_id;
  };
  void changed();
  const Plan& plan_locked();

  const std::function<void()> on_change_;
  std::mutex mu_;
  std::map<std::string, KnownPolicy> policies_;  // by namespace/name; cluster ones by name
  std::map<std::string, Labels> namespaces_;     // by name
  std::map<std::string, PodInfo> pods_;          // by namespace/name
  bool dirty_ = true;
  Plan plan_;
};

}  // namespace sonde::agent
