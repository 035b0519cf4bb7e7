// GoTlsFeature: Go TLS behind the runtime's Feature seam — the kernel probes (TlsProbes), the
// uprobes they share per real file (SharedUprobes), the per-process bookkeeping (TlsMonitor)
// and the metric families they export (container_go_tls_*, sonde_agent_gotls_*, uprobe
// attachments).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
#include "agent/runtime/feature.h"

namespace sonde::agent {

class GoTlsFeature final : public Feature {
 public:
  // Loads the probes; `node` is the metrics' node label. With `filter_by_cgroup` (cluster mode:
  // selection is per container) the kernel counts only the cgroups of selected processes
  // (TlsMonitor::filter_by_cgroup()), when the agent sees a cgroup v2 hierarchy. With
  // `perform_ret` the RET probes perform the `ret` where the kernel allows it (TlsProbes). At
  // most `max_binaries` binaries are instrumented at once, and none past the agent's descriptor
  // reserve (TlsMonitor::Budget).
  static Result<std::unique_ptr<GoTlsFeature>> load(symbols::ProbeTargetCache& cache,
                                                    const ProcReader& proc, uint64_t grace_ns,
                                                    std::string node, bool filter_by_cgroup,
                                                    bool perform_ret, size_t max_binaries);

  ~GoTlsFeature() override;

  Instrumentation kind() const override { return Instrumentation::kGoTls; }
  const std::vector<std::string>& symbol_names() const override {
    return TlsMonitor::symbol_names();
  }
  // Admits the process's cgroup (TlsMonitor::admit()); the binary is read on the worker.
  std::optional<FeatureResult> select(const ProcessInfo& process, const Selection&) override {
    monitor_->admit(process);
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
  explicit GoTlsFeature(std::string node) : node_(std::move(node)) {}
  // Drains the HTTP/2 ring buffer every TlsProbes::kDrainPeriodMs until stopped.
  void drain_loop();

  const std::string node_;
  ProcessDescriptors fds_;
  // Destroyed in reverse: the uprobes first, then the programs they run, then the monitor.
  std::unique_ptr<TlsMonitor> monitor_;
  std::unique_ptr<TlsProbes> probes_;
  SharedUprobes uprobes_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread drainer_;  // last: started after everything it uses, joined first
};

}  // namespace sonde::agent
