// PolicySelector: the in-cluster Selector. It answers "what to instrument in this process"
// from the ProfilingPolicies it knows and the pods of this node, both fed by informers.
//
// A process is mapped to its pod through its container id (from /proc/<pid>/cgroup) and the
// pods' status.containerStatuses[].containerID. A policy selects containers of pods in its own
// namespace: those its targets select minus those its excludes select, at most
// limits.maxTargetsPerNode of them (the rest are reported as LimitExceeded). A container
// selected by several policies gets every instrumentation any of them asks for.
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
#include "common/kube/informer.h"
#include "common/kube/resource.h"

namespace sonde::agent {

// A label requirement of a matchExpressions list.
struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kExists;
  std::vector<std::string> values;
  bool operator==(const LabelRequirement&) const = default;
};

// One entry of a policy's targets or excludes.
struct PodSelection {
  bool has_selector = false;  // an empty selector ({}) selects every pod
  std::map<std::string, std::string> match_labels;
  std::vector<LabelRequirement> match_expressions;
  std::string workload_kind;  // empty: any workload
  std::string workload_name;
  std::vector<std::string> containers;  // empty: every container
  bool operator==(const PodSelection&) const = default;
};

// What the agent needs of a ProfilingPolicy: every instrumentation (cpu with its frequency,
// Node.js event loop, Go TLS).
struct PolicySpec {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t generation = 0;
  std::vector<PodSelection> targets;
  std::vector<PodSelection> excludes;
  bool nodejs_event_loop = false;
  bool go_tls = false;
  bool cpu = false;
  uint32_t cpu_frequency_hz =
      0;  // when cpu: 1..kMaxCpuFrequencyHz (default kDefaultCpuFrequencyHz)
  int64_t max_targets_per_node = 100;
  std::string invalid;  // why the spec cannot be applied; such a policy selects nothing
  bool operator==(const PolicySpec&) const = default;
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

// instrumentations.cpu.frequencyHz: its default and range (the CRD's, and the sampler's).
inline constexpr uint32_t kDefaultCpuFrequencyHz = 19;
inline constexpr uint32_t kMaxCpuFrequencyHz = 999;

// The CRD's bound on problems per policy entry.
inline constexpr size_t kMaxProblemsPerPolicy = 20;

// A reason and where, as the node report carries it (crds/README.md).
struct ReportProblem {
  std::string reason;  // SymbolsNotFound | LimitExceeded | KernelUnsupported | Conflicting
  std::string pod;
  std::string container;
  std::string message;
  bool operator==(const ReportProblem&) const = default;
};

struct SelectedContainer {
  std::string pod;
  std::string container;
  std::string container_id;  // empty while the container has not started
  bool operator==(const SelectedContainer&) const = default;
};

// What one policy selects on this node, for the node report.
struct PolicyState {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t generation = 0;
  bool nodejs_event_loop = false;
  bool go_tls = false;
  bool cpu = false;
  std::vector<std::string> matched_pods;      // sorted pod names
  std::vector<SelectedContainer> containers;  // instrumented ones, within the limit
  std::vector<ReportProblem> problems;        // LimitExceeded for those beyond it
};

PolicySpec parse_policy(const kube::Json& policy);
PodInfo parse_pod(const kube::Json& pod);
// The informer Transform for pods: keeps only the fields parse_pod() and the informer read.
kube::Json trim_pod(kube::Json pod);
// "containerd://<id>", "cri-o://<id>", "docker://<id>" → the 64-hex id (lower case); "" for
// anything else.
std::string container_id_from_status(std::string_view container_id);

bool matches_labels(const PodSelection& selection,
                    const std::map<std::string, std::string>& labels);
// Whether the pod belongs to the workload: a direct owner of that kind and name, or for a
// Deployment its ReplicaSet "<name>-<pod-template-hash>", for a CronJob its Job
// "<name>-<scheduled time>".
bool matches_workload(const PodSelection& selection, const PodInfo& pod);
// The pod's containers `policy` selects, in the pod's order.
std::vector<PodContainer> selected_containers(const PolicySpec& policy, const PodInfo& pod);

class PolicySelector final : public Selector {
 public:
  // `on_change` is called after every change of the policies or pods (the runtime's
  // request_reselect()).
  explicit PolicySelector(std::function<void()> on_change = {});

  void upsert_policy(const kube::Json& policy);
  void remove_policy(const kube::Json& policy);
  void upsert_pod(const kube::Json& pod);
  void remove_pod(const kube::Json& pod);

  // Handlers that feed this selector, for the policy and the pod informers.
  kube::EventHandlers policy_handlers();
  kube::EventHandlers pod_handlers();

  std::optional<Selection> select(const ProcessInfo& process) override;

  // Every known policy (sorted by namespace/name) and what it selects on this node.
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
  std::map<std::string, PolicySpec> policies_;  // by namespace/name
  std::map<std::string, PodInfo> pods_;         // by namespace/name
  bool dirty_ = true;
  Plan plan_;
};

}  // namespace sonde::agent
