// NodejsFeature: the Node.js event-loop feature behind the runtime's Feature seam — the kernel
// probes (LoopProbes), the per-process bookkeeping (EventLoopMonitor) and the metric families
// they export (container_nodejs_event_loop_blocked_time_seconds_total, OpenTelemetry's
// nodejs_eventloop_* runtime metrics, sonde_agent_nodejs_*),
// and with the libc-uprobes wait source the per-process hooks (LibcWaitHooks). With a StallWatch
// (set_stall_watch), a process whose selection sets nodejsEventLoop.stallThresholdMs has the
// stack of each loop turn at least that long recorded, served at GET /debug/nodejs/stalls; a
// stall recorder that cannot start leaves the loop's accounting as it is (logged, the process
// stays instrumented).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/nodejs/event_loop_monitor.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/stall_watch.h"
#include "agent/runtime/feature.h"

namespace sonde::agent {

// Which per-container event-loop families are exported (--nodejs-metrics): sonde's own
// (container_nodejs_event_loop_*), OpenTelemetry's Node.js runtime metrics named as its Prometheus
// exporter names them (nodejs_eventloop_*), or both. The agent's own sonde_agent_nodejs_* always.
enum class NodejsMetrics { kBoth, kSonde, kOtel };

class NodejsFeature final : public Feature {
 public:
  // Loads the probes (the wait hook `source`); `node` is the metrics' node label.
  static Result<std::unique_ptr<NodejsFeature>> load(LoopProbes::WaitSource source,
                                                     symbols::ProbeTargetCache& cache,
                                                     const ProcReader& proc, uint64_t grace_ns,
                                                     std::string node,
                                                     NodejsMetrics metrics = NodejsMetrics::kBoth);

  Instrumentation kind() const override { return Instrumentation::kNodejsEventLoop; }
  const std::vector<std::string>& symbol_names() const override {
    return EventLoopMonitor::symbol_names();
  }
  std::optional<FeatureResult> select(const ProcessInfo&, const Selection&) override {
    return std::nullopt;
  }
  FeatureResult instrument(const Candidate& candidate, const Selection& selection) override;
  void release(pid_t pid, uint64_t end_ns) override {
    if (stalls_) stalls_->forget(pid);
    monitor_.exited(pid, end_ns);
  }
  void sweep() override { monitor_.sweep(); }
  size_t tracked() const override { return monitor_.tracked(); }
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer& server) override;

  // Where long turns are recorded (built by the composition root with this feature's maps);
  // once, before the runtime starts.
  void set_stall_watch(std::unique_ptr<StallWatch> stalls) { stalls_ = std::move(stalls); }
  // The probes whose maps a stall recorder uses.
  const LoopProbes& probes() const { return *probes_; }

  // Which kernel hook measures the waits (LoopProbes::wait_source()), and what it costs
  // processes not selected (LoopProbes::wait_source_cost_class()).
  const char* wait_source() const { return probes_->wait_source(); }
  const char* wait_source_cost() const {
    return LoopProbes::wait_source_cost_class(probes_->source());
  }
  // The loops map, for the CPU sampler's blocked-loop marks (LoopProbes::loops_map_fd()).
  int loops_map_fd() const { return probes_->loops_map_fd(); }

 private:
  NodejsFeature(std::unique_ptr<LoopProbes> probes, symbols::ProbeTargetCache& cache,
                const ProcReader& proc, uint64_t grace_ns, std::string node, NodejsMetrics metrics)
      : probes_(std::move(probes)),
        hooks_(probes_->source() == LoopProbes::WaitSource::kLibcUprobes
                   ? std::make_unique<LibcWaitHooks>(*probes_, cache, proc.root())
                   : nullptr),
        monitor_(*probes_, cache, proc, grace_ns, real_clock(), hooks_.get()),
        node_(std::move(node)),
        metrics_(metrics) {}

  // Watches or forgets pid's long turns as its selection's stallThresholdMs says.
  void watch_stalls(pid_t pid, const Selection& selection);
  // The per-container families of each set (NodejsMetrics).
  void collect_sonde(const std::vector<EventLoopMonitor::Sample>& samples,
                     std::vector<prometheus::MetricFamily>& out) const;
  void collect_otel(const std::vector<EventLoopMonitor::Sample>& samples,
                    std::vector<prometheus::MetricFamily>& out) const;

  std::unique_ptr<LoopProbes> probes_;
  std::unique_ptr<LibcWaitHooks> hooks_;  // libc-uprobes only; after the probes it attaches
  EventLoopMonitor monitor_;              // after the probes and hooks it drives
  const std::string node_;
  const NodejsMetrics metrics_;
  std::unique_ptr<StallWatch> stalls_;  // after the probes whose maps it uses; may be null
};

}  // namespace sonde::agent
