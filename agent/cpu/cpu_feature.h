// CpuFeature: CPU sampling behind the runtime's Feature seam. Sampling needs no file of the
// process, so a process is selected on the event thread (select()) and never waits for an
// inspection. Exports the profiler's metric families and serves GET /debug/pprof/profile.
//
// One perf frequency per node: the highest any selected process asks for (a cluster policy's
// cpu.frequencyHz), else the configured one, and never above the node's cap (`max_hz`, the
// chart's agent.cpu.maxFrequencyHz): every CPU of the node pays for the rate, so one tenant's
// policy must not choose it for all. It follows the selections as they come and go. A process
// whose policy asks for less is sampled at the node's rate (its profiles' period says which),
// so its CPU time is right and its profile has more samples than asked for; one whose policy
// asks for more is sampled at the cap, and that is said: its outcome's message, a warning in
// the log, and sonde_cpu_profile_capped_processes.
//
// A node that cannot sample (no perf events, refused) does not stop the agent when sampling is
// optional (cluster mode): every process selected for it is reported kFailed with the reason,
// and the profile route answers 503 with it.
//
// With a Pyroscope URL (standalone config instrumentations.cpu.pyroscope) each container's
// profile is also pushed there every interval (cpu/pyroscope_pusher.h).
//
// By cgroup (cluster mode, where policies select containers): a selected process's cgroup is
// what the kernel samples, named by the kernel (ProcessCgroups), so the container's processes
// that fork without exec (worker pools) are sampled too, under the container's labels, although
// the agent never considers them; the cgroup is sampled while a selected process of it lives.
// Otherwise (standalone targets may pick one process of a cgroup), by process.
//
// Only processes it selected are released: a release drains the kernel maps, and every process
// that exits on the node is released through the seam.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/cpu/cpu_params.h"
#include "agent/cpu/cpu_profiler.h"
#include "agent/cpu/pyroscope_pusher.h"
#include "agent/kernel/process_cgroups.h"
#include "agent/runtime/feature.h"
#include "common/config.h"

namespace sonde::agent {

class CpuFeature final : public Feature {
 public:
  // Starts the profiler (and the pusher when `push.url` is set); when the profiler cannot start
  // and `required` is false, a feature that reports why instead.
  // `max_hz`: the node's cap (1..CpuSampler::kMaxFrequencyHz).
  static Result<std::unique_ptr<CpuFeature>> start(const cpu::ProfilerOptions& options,
                                                   bool required, const PyroscopeConfig& push,
                                                   bool by_cgroup, uint32_t max_hz);

  Instrumentation kind() const override { return Instrumentation::kCpu; }
  const std::vector<std::string>& symbol_names() const override;
  std::optional<FeatureResult> select(const ProcessInfo& process,
                                      const Selection& selection) override;
  FeatureResult instrument(const Candidate&, const Selection&) override {
    return {};  // everything happened in select()
  }
  void release(pid_t pid, uint64_t end_ns) override;
  void sweep() override {}
  size_t tracked() const override;
  void collect(std::vector<prometheus::MetricFamily>& out) override;
  void add_routes(MetricsServer& server) override;

  // The node's sampling frequency now; 0 when it cannot sample.
  uint32_t frequency_hz() const;
  // Selected processes whose policies ask for more than the node's cap.
  size_t capped() const;

 private:
  CpuFeature(std::unique_ptr<cpu::CpuProfiler> profiler, uint32_t default_hz, uint32_t max_hz,
             std::string unavailable, std::string node)
      : profiler_(std::move(profiler)),
        default_hz_(default_hz),
        max_hz_(max_hz),
        unavailable_(std::move(unavailable)),
        node_(std::move(node)) {}
  struct Selected {
    uint32_t hz = 0;                 // the frequency asked for
    std::optional<uint64_t> cgroup;  // sampled through its cgroup, else by pid
  };
  // With mu_ held: the frequency the selected processes ask for, applied.
  void retune_locked();
  // With mu_ held: what the kernel samples for pid, and undoing it (the cgroup's last user).
  Status sample_locked(pid_t pid, std::optional<uint64_t> cgroup, const ContainerLabels& labels);
  void unsample_locked(pid_t pid, const Selected& selected);

  std::unique_ptr<cpu::CpuProfiler> profiler_;    // null when the node cannot sample
  std::unique_ptr<cpu::PyroscopePusher> pusher_;  // after the profiler it collects from
  const uint32_t default_hz_;
  const uint32_t max_hz_;                    // the node's cap: no selection samples faster
  const std::string unavailable_;            // why the node cannot sample
  const std::string node_;                   // the `node` label
  std::unique_ptr<ProcessCgroups> cgroups_;  // set when sampling by cgroup
  mutable std::mutex mu_;
  std::map<pid_t, Selected> pids_;           // selected for sampling
  std::map<uint64_t, size_t> cgroup_users_;  // cgroup sampled → selected processes in it
};

}  // namespace sonde::agent
