// The agent's ProfilingNodeReport (shape and rules in crds/README.md): what each policy
// selects on this node and what became of it, built from the PolicySelector's state and the
// runtime's outcomes, and the writer that keeps the one report of this node current.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/cluster/policy_selector.h"
#include "agent/nodejs/event_loop_monitor.h"
#include "agent/runtime/agent_runtime.h"
#include "common/kube/api_client.h"
#include "common/kube/clock.h"
#include "common/kube/stop_signal.h"

namespace sonde::agent {

// Messages are bounded by the CRD (maxLength 512).
inline constexpr size_t kMaxProblemMessage = 512;

// One status.policies[] entry.
struct PolicyReport {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t observed_generation = 0;
  int64_t matched_pods = 0;
  int64_t instrumented_pods = 0;  // pods whose every selected container is instrumented
  int64_t nodejs_processes = 0;   // Node.js main threads instrumented
  double event_loop_blocked_seconds = 0;
  std::vector<ReportProblem> problems;  // at most kMaxProblemsPerPolicy
  bool operator==(const PolicyReport&) const = default;
};

// One entry per policy. A selected container (within the policy's limit) counts as
// instrumented when one of its processes has an instrumentation the policy asks for live
// (Node.js event loop, Go TLS: the ones the agent runs); a pod when all its selected containers
// are. A container with nothing live reports what its processes' outcomes say: KernelUnsupported
// when the kernel refused the probes, else SymbolsNotFound when a binary lacks the symbols
// (e.g. it is not Node.js), else nothing (Go TLS asked of a binary without crypto/tls, or no
// process seen yet). Blocked seconds are the sum over the selected containers' series.
std::vector<PolicyReport> build_policy_reports(
    const std::vector<PolicyState>& policies, const std::vector<ProcessOutcome>& outcomes,
    const std::vector<EventLoopMonitor::Sample>& samples);

// What the report says about the agent and its kernel.
struct AgentFacts {
  std::string agent_version;
  std::string kernel_release;
  bool btf = false;
};
// This agent's version, uname's release and whether /sys/kernel/btf/vmlinux exists.
AgentFacts read_agent_facts();

// status without heartbeatTime (the writer adds it), so that two builds compare equal when
// nothing changed.
kube::Json report_status(const AgentFacts& facts, const std::vector<PolicyReport>& reports);

// The whole object; `node_uid` empty leaves out the ownerReference to the Node.
kube::Json report_object(const std::string& node, const std::string& ns,
                         const std::string& node_uid, kube::Json status);

// "2026-11-29T09:00:00Z".
std::string rfc3339(kube::WallTime time);

struct ReportWriterOptions {
  // How often the status is rebuilt and compared with the last one written.
  kube::Duration poll = std::chrono::seconds(1);
  // The longest time between two writes: the report's heartbeat.
  kube::Duration heartbeat = std::chrono::seconds(60);
  // A change of the blocked-seconds sums alone is written at most this often: a busy loop
  // changes them every poll, and a write per second per node would load the API server for
  // numbers Prometheus already has at full resolution from the agents.
  kube::Duration blocked_seconds_refresh = std::chrono::seconds(15);
};

// Keeps this node's report current: creates it, then replaces it (PUT with the last
// resourceVersion; a 409 re-reads and retries) whenever the status changes and at least every
// heartbeat. Adds an ownerReference to the Node once the Node's uid can be read. Keeps
// retrying, with backoff, while the API server is unreachable.
//
// run() blocks on the calling thread; writes() may be read from any thread. `client`, `source`
// and `clock` must outlive the writer.
class NodeReportWriter {
 public:
  // Builds the current status (see report_status()); called on run()'s thread.
  using StatusSource = std::function<kube::Json()>;

  NodeReportWriter(kube::ApiClient& client, std::string node, std::string ns, StatusSource source,
                   ReportWriterOptions options = {}, const kube::Clock& clock = kube::real_clock());

  void run(kube::StopSignal& stop);

  // Writes `status` now, with the heartbeat time.
  Status write(const kube::Json& status);

  uint64_t writes() const { return writes_.load(); }

 private:
  void learn_node_uid();

  kube::ApiClient& client_;
  const std::string node_;
  const std::string ns_;
  const StatusSource source_;
  const ReportWriterOptions options_;
  const kube::Clock& clock_;
  std::string node_uid_;
  bool node_uid_warned_ = false;
  std::string resource_version_;  // of our last read or write; empty: read before writing
  std::atomic<uint64_t> writes_{0};
};

}  // namespace sonde::agent
