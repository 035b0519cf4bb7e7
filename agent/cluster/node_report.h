// The agent's side of the ProfilingNodeReport (crd::NodeReportStatus; contract in
// crds/README.md): what each policy selects on this node and what became of it, built from
// the PolicySelector's state and the runtime's outcomes, and the writer that keeps this
// node's report and node Lease current.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/cluster/policy_selector.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/health.h"
#include "common/clock.h"
#include "common/crd/node_report.h"
#include "common/kube/api_client.h"
#include "common/kube/stop_signal.h"

namespace sonde::agent {

// One entry per policy. A selected container (within the policy's limit) counts as
// instrumented when one of its processes has an instrumentation the policy asks for live
// (Node.js event loop, Go TLS: the ones the agent runs); a pod when all its selected containers
// are. A container with nothing live reports what its processes' outcomes say: KernelUnsupported
// when the kernel refused the probes, else SymbolsNotFound when a binary lacks the symbols
// (e.g. it is not Node.js), else nothing (Go TLS asked of a binary without crypto/tls, or no
// process seen yet). Containers beyond limits.maxTargetsPerNode are LimitExceeded; a spec the
// agent cannot apply is one InvalidSpec problem. Each reason is one problem with the number
// of containers and the first of them as the example.
std::vector<crd::PolicyEntry> build_policy_reports(const std::vector<PolicyState>& policies,
                                                   const std::vector<ProcessOutcome>& outcomes);

// What the report says about the agent and its kernel.
struct AgentFacts {
  std::string agent_version;
  std::string kernel_release;
  bool btf = false;
};
// This agent's version, uname's release and whether /sys/kernel/btf/vmlinux exists.
AgentFacts read_agent_facts();

// The status to write: the facts and entries, bounded (crd::bound_report()).
crd::NodeReportStatus report_status(const AgentFacts& facts, std::vector<crd::PolicyEntry> entries);

struct ReportWriterOptions {
  // How often the status is rebuilt and compared with the last one written.
  Duration poll = std::chrono::seconds(1);
  // The shortest time between two report writes: a burst of changes (a rollout replacing the
  // node's pods) becomes one write per interval, not one per pod.
  Duration min_interval = std::chrono::seconds(10);
  // The node Lease, renewed every renew_interval, is valid for lease_duration (the kubelet's
  // node lease: 10 s and 40 s).
  Duration renew_interval = std::chrono::seconds(10);
  Duration lease_duration = std::chrono::seconds(40);
};

// Keeps this node's report and Lease current. The report is created, then replaced (PUT with
// the last resourceVersion; a 409 re-reads and retries) only when its status changes, at most
// once per min_interval; the Lease is renewed every renew_interval whatever the report does.
// Both get an ownerReference to the Node once its uid can be read. Keeps retrying, with
// backoff, while the API server is unreachable.
//
// run() blocks on the calling thread; the counters may be read from any thread. `client`,
// `source` and `clock` must outlive the writer.
class NodeReportWriter {
 public:
  // Builds the current status (see report_status()); called on run()'s thread.
  using StatusSource = std::function<crd::NodeReportStatus()>;

  NodeReportWriter(kube::ApiClient& client, std::string node, std::string ns, StatusSource source,
                   ReportWriterOptions options = {}, const Clock& clock = real_clock());

  void run(kube::StopSignal& stop);

  // Reports to `health` (before run(); it must outlive the writer), as the kubelet's node lease
  // and sync loop would: readiness fails when the Lease was not renewed for lease_duration (the
  // API server does not take it: a restart would not help, and the operator counts the node
  // stale from the Lease), liveness when run()'s loop has not turned for kLoopStaleAfter, far
  // more than the longest an iteration's bounded requests take (one Node read and up to
  // 2 x 5 read-write attempts per object, each within the client's timeout: with the agent's
  // 3 s, about 2 minutes).
  static constexpr std::chrono::minutes kLoopStaleAfter{5};
  void report_health(HealthRegistry& health);

  // Writes the report with `status` now.
  Status write(const crd::NodeReportStatus& status);
  // Renews (or creates) the node Lease now.
  Status renew_lease();

  uint64_t writes() const { return writes_.load(); }
  uint64_t lease_renewals() const { return lease_renewals_.load(); }

 private:
  void learn_node_uid();
  // Creates or replaces `object` (named `name` in ns_) with optimistic concurrency; `rv` is
  // the resourceVersion last read or written, empty to read first.
  Status put(const kube::ResourceType& type, const std::string& name, kube::Json object,
             std::string& rv);

  kube::ApiClient& client_;
  const std::string node_;
  const std::string ns_;
  const StatusSource source_;
  const ReportWriterOptions options_;
  const Clock& clock_;
  std::string node_uid_;
  bool node_uid_warned_ = false;
  bool node_uid_asked_ = false;
  SteadyTime node_uid_asked_at_{};
  std::string report_rv_;
  std::string lease_rv_;
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> lease_renewals_{0};
  HealthRegistry* health_ = nullptr;
  HealthRegistry::CheckId loop_check_ = 0;
  HealthRegistry::CheckId lease_check_ = 0;
};

}  // namespace sonde::agent
