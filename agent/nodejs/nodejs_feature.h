// NodejsFeature: the Node.js event-loop feature behind the runtime's Feature seam — the kernel
// probes (LoopProbes), the per-process bookkeeping (EventLoopMonitor) and the metric families
// they export (container_nodejs_event_loop_blocked_time_seconds_total, OpenTelemetry's
// nodejs_eventloop_* runtime metrics, sonde_agent_nodejs_*),
// and with the libc-uprobes wait source the per-process hooks (LibcWaitHooks). A process whose
// selection sets nodejsEventLoop.stallThresholdMs has the stack of each loop turn at least that
// long recorded (StallRecorder, on this feature's probes' maps), served at GET
// /debug/nodejs/stalls; a stall recorder that cannot start leaves the loop's accounting as it is
// (logged, the process stays instrumented).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/nodejs/event_loop_monitor.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/stall_recorder.h"
#include "agent/runtime/feature.h"

namespace sonde::agent {

// Which per-container event-loop families are exported (--nodejs-metrics): sonde's own
// (container_nodejs_event_loop_*), OpenTelemetry's Node.js runtime metrics named as its Prometheus
// exporter names them (nodejs_eventloop_*), or both. The agent's own sonde_agent_nodejs_* always.
enum class NodejsMetrics { kBoth, kSonde, kOtel };

class StallEvents;  // stall_events.h, which brings the Kubernetes client: only where it is made

class NodejsFeature final : public Feature {
 public:
  // What the stall recorder shares with the rest of the agent.
  struct Stalls {
    // Symbol tables, shared with the CPU profiler (ProfilerOptions::binaries); null: its own.
    std::shared_ptr<symbolize::SymbolizerCache> binaries;
    // Cluster mode: an Event on the pod of each stall (its counts among the feature's
    // families); null: none.
    std::unique_ptr<StallEvents> events;
  };
  // Loads the probes (the wait hook `source`); `node` is the metrics' node label.
  static Result<std::unique_ptr<NodejsFeature>> load(LoopProbes::WaitSource source,
                                                     symbols::ProbeTargetCache& cache,
                                                     const ProcReader& proc, uint64_t grace_ns,
                                                     std::string node, NodejsMetrics metrics,
                                                     Stalls stalls);

  ~NodejsFeature() override;

  Instrumentation kind() const override { return Instrumentation::kNodejsEventLoop; }
  const std::vector<std::string>& symbol_names() const override {
    return EventLoopMonitor::symbol_names();
  }
  std::optional<FeatureResult> select(const ProcessInfo&, const Selection&) override {
    return std::nullopt;
  }
  FeatureResult instrument(const Candidate& candidate, const Selection& selection) override;
  void release(pid_t pid, uint64_t end_ns) override {
    stalls_->forget(pid);
    monitor_.exited(pid, end_ns);
  }
  void sweep() override { monitor_.sweep(); }
  size_t tracked() const override { return monitor_.tracked(); }
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer& server) override;

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
                const ProcReader& proc, uint64_t grace_ns, std::string node, NodejsMetrics metrics,
                Stalls stalls);

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
  std::unique_ptr<StallEvents> stall_events_;  // before the recorder that posts to it
  std::unique_ptr<StallRecorder> stalls_;      // after the probes whose maps it uses
};

}  // namespace sonde::agent
