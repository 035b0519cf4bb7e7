// GoTlsFeature: Go TLS behind the runtime's Feature seam — the kernel probes (TlsProbes), the
// uprobes they share per real file (SharedUprobes), the per-process bookkeeping (TlsMonitor)
// and the metric families they export (container_go_tls_*, sonde_agent_gotls_*, uprobe
// attachments).
#pragma once

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "agent/attach/shared_uprobes.h"
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
  std::optional<FeatureResult> select(const ProcessInfo& process,
                                      const Selection& selection) override {
    monitor_->admit(process, selection.labels);
    return std::nullopt;
  }
  FeatureResult instrument(const Candidate& candidate, const Selection& selection) override;
  void release(pid_t pid, uint64_t) override { monitor_->exited(pid); }
  void sweep() override { monitor_->sweep(); }
  size_t tracked() const override { return monitor_->tracked(); }
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer&) override {}

  TlsMonitor& monitor() { return *monitor_; }

 private:
  GoTlsFeature(std::string node, uint64_t keep_probes_ns)
      : node_(std::move(node)), uprobes_(keep_probes_ns) {}
  // Drains the HTTP/2 ring buffer every TlsProbes::kDrainPeriodMs until `stop`.
  void drain_loop(const std::stop_token& stop);

  const std::string node_;
  std::optional<UprobeHitCosts> hit_costs_;  // measured at load, unless the kernel refused
  ProcessDescriptors fds_;
  // Destroyed in reverse: the uprobes first, then the programs they run, then the monitor.
  std::unique_ptr<TlsMonitor> monitor_;
  std::unique_ptr<TlsProbes> probes_;
  SharedUprobes uprobes_;
  // Last: started after everything it uses; destroyed first, which stops and joins it.
  std::jthread drainer_;
};

}  // namespace sonde::agent
