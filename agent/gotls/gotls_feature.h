// GoTlsFeature: Go TLS behind the runtime's Feature seam — the kernel probes (TlsProbes), the
// uprobes they share per real file (SharedUprobes), the per-process bookkeeping (TlsMonitor)
// and the metric families they export (container_go_tls_*, sonde_agent_gotls_*, uprobe
// attachments).
//
// The overhead budget (limits.maxOverheadPercent, GoTlsParams::overhead_budget): at each sweep,
// per container with tracked processes and a budget, the estimated CPU of its probe hits
// (probe_overhead.h) is held against its cgroup's CPU time (OverheadWindow). A container over
// budget has its processes stopped (TlsMonitor::stop_container(): its probes detached unless
// another container's processes run the same binary) and their outcome revised to
// kOverheadExceeded; its later processes, and its processes re-selected, get kOverheadExceeded
// without being instrumented, until its budget's epoch changes (a policy setting it changed) or
// the agent restarts. Nothing else re-attaches it: no flap loop. What stays for such a container:
// its series (frozen, gone a grace period after its last process) and the other features
// (Node.js, CPU profiles). Without a measured per-hit cost or a cgroup v2 hierarchy no budget is
// enforced (logged once at load).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/gotls/gotls_params.h"
#include "agent/gotls/probe_overhead.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
#include "agent/kernel/uprobe_cost.h"
#include "agent/runtime/feature.h"

namespace sonde::agent {

class GoTlsFeature final : public Feature {
 public:
  // Loads the probes; `node` is the metrics' node label. With `filter_by_cgroup` (cluster mode:
  // selection is per container) the kernel counts only the cgroups of selected processes
  // (TlsMonitor::filter_by_cgroup()), when the agent sees a cgroup v2 hierarchy. With
  // `perform_ret` the RET probes perform the `ret` where the kernel allows it (TlsProbes). At
  // most `max_binaries` binaries hold uprobes at once, and none past the agent's descriptor
  // reserve (TlsMonitor::Budget); a binary keeps them `keep_probes_ns` after its last exit.
  static Result<std::unique_ptr<GoTlsFeature>> load(symbols::ProbeTargetCache& cache,
                                                    const ProcReader& proc, uint64_t grace_ns,
                                                    std::string node, bool filter_by_cgroup,
                                                    bool perform_ret, size_t max_binaries,
                                                    uint64_t keep_probes_ns);

  ~GoTlsFeature() override;

  Instrumentation kind() const override { return Instrumentation::kGoTls; }
  const std::vector<std::string>& symbol_names() const override {
    return TlsMonitor::symbol_names();
  }
  // Admits the process (TlsMonitor::admit()); the binary is read on the worker.
  // A container over its overhead budget answers kOverheadExceeded here.
  std::optional<FeatureResult> select(const ProcessInfo& process,
                                      const Selection& selection) override;
  FeatureResult instrument(const Candidate& candidate, const Selection& selection) override;
  void release(pid_t pid, uint64_t) override { monitor_->exited(pid); }
  // Also holds each container with a budget against it.
  void sweep() override;
  std::vector<std::pair<pid_t, FeatureResult>> take_revisions() override;
  size_t tracked() const override { return monitor_->tracked(); }
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer&) override {}

  TlsMonitor& monitor() { return *monitor_; }

 private:
  GoTlsFeature(std::string node, uint64_t keep_probes_ns, std::string proc_root, uint64_t grace_ns)
      : node_(std::move(node)),
        proc_root_(std::move(proc_root)),
        grace_ns_(grace_ns),
        uprobes_(keep_probes_ns) {}
  // The container is over its budget with this epoch: kOverheadExceeded; nullopt otherwise (a
  // suspension of another epoch, or without a budget now, is lifted). Takes overhead_mu_.
  std::optional<FeatureResult> suspended(const Selection& selection);
  // The CPU seconds of process pid's cgroup v2 (its container's).
  Result<double> container_cpu_seconds(pid_t pid) const;
  // Holds every container with a budget against it; called by sweep().
  void check_overhead();
  // Drains the HTTP/2 ring buffer every TlsProbes::kDrainPeriodMs, and as soon as the kernel
  // wakes it (a flood past SONDE_GOTLS_H2_WAKEUP_BYTES), until `stop`.
  void drain_loop(const std::stop_token& stop);

  const std::string node_;
  const std::string proc_root_;
  const uint64_t grace_ns_;
  const Clock& clock_ = real_clock();        // every time this feature and its monitor read
  std::optional<UprobeHitCosts> hit_costs_;  // measured at load, unless the kernel refused
  std::optional<std::string> cgroup2_root_;  // where the cgroup v2 hierarchy is, if any

  struct Suspension {
    std::string epoch;    // of the budget it went over
    std::string message;  // the outcome's
    uint64_t seen_ns;     // last selected: forgotten a grace period after
  };
  mutable std::mutex overhead_mu_;
  std::map<ContainerLabels, OverheadBudget> budgets_;  // as its processes were last selected
  OverheadWindow<ContainerLabels> window_{clock_};
  std::map<ContainerLabels, Suspension> suspended_;
  std::vector<std::pair<pid_t, FeatureResult>> revisions_;
  uint64_t overhead_detaches_ = 0;            // containers stopped for their budget
  uint64_t last_idle_sweep_ns_ = 0;           // TlsProbes::forget_idle(), on sweep()'s thread
  std::set<ContainerLabels> unreadable_cpu_;  // logged once each
  ProcessDescriptors fds_;
  // Destroyed in reverse: the uprobes first, then the programs they run, then the monitor.
  std::unique_ptr<TlsMonitor> monitor_;
  std::unique_ptr<TlsProbes> probes_;
  SharedUprobes uprobes_;
  // Last: started after everything it uses; destroyed first, which stops and joins it.
  std::jthread drainer_;
};

}  // namespace sonde::agent
