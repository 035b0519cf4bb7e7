// NodejsThreadPoolFeature: libuv's thread pool of selected Node.js processes behind the
// runtime's Feature seam (instrumentation nodejsThreadPool, off unless asked for): the monitor
// (pool_monitor.h), the thread that polls it every kPollPeriodNs, and the metric families
// (container_nodejs_threadpool_*, sonde_agent_nodejs_threadpool_*).
//
// Nothing is attached to node and nothing runs in it: each poll copies a few words of each
// process's memory (process_vm_readv). The poll thread sleeps while no process is read; a poll
// that takes longer than the period delays the next one by as long as it took, so polling never
// takes more than half of one CPU, whatever the tenants' queues (their bound: pool_reader.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/nodejs_threadpool/pool_monitor.h"
#include "agent/runtime/feature.h"

namespace sonde::agent {

class NodejsThreadPoolFeature final : public Feature {
 public:
  // How often each process's pool is read: the resolution of the saturated time (each change of
  // state placed within half of it on average) and of the gauges.
  static constexpr uint64_t kPollPeriodNs = 10'000'000;

  // `node` is the metrics' node label.
  NodejsThreadPoolFeature(symbols::ProbeTargetCache& cache, const ProcReader& proc,
                          uint64_t grace_ns, std::string node,
                          size_t max_processes = threadpool::kDefaultMaxProcesses,
                          uint64_t period_ns = kPollPeriodNs);
  ~NodejsThreadPoolFeature() override;
  NodejsThreadPoolFeature(const NodejsThreadPoolFeature&) = delete;
  NodejsThreadPoolFeature& operator=(const NodejsThreadPoolFeature&) = delete;

  Instrumentation kind() const override { return Instrumentation::kNodejsThreadPool; }
  const std::vector<std::string>& symbol_names() const override {
    return threadpool::symbol_names();
  }
  std::optional<FeatureResult> select(const ProcessInfo&, const Selection&) override {
    return std::nullopt;
  }
  FeatureResult instrument(const Candidate& candidate, const Selection& selection) override;
  void release(pid_t pid, uint64_t end_ns) override { monitor_.exited(pid, end_ns); }
  void sweep() override { monitor_.sweep(); }
  size_t tracked() const override { return monitor_.tracked(); }
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer&) override {}

 private:
  void poll_loop();

  threadpool::PoolMonitor monitor_;
  const std::string node_;
  const uint64_t period_ns_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread poller_;  // last: started once the rest is built
};

}  // namespace sonde::agent
