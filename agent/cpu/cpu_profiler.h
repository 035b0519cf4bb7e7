// CpuProfiler: CPU profiles of selected processes or containers — the sampler in the kernel
// (CpuSampler), symbolization on the node (StackSymbolizer), and the outputs: pprof or folded
// profiles of a time window, per-container sample counters, and the HTTP route
// GET /debug/pprof/profile.
//
// Driving it: start() loads the sampler; select_*() and release_*() follow the processes and
// containers a policy selects (labels become profile labels and metric labels); collect()
// returns the profile of the next `duration`, filtered. In all-processes mode every process is
// sampled whatever is selected, and selections only add labels. A container's series
// (container_cpu_profile_*) leave /metrics series_grace after its last selected pid or cgroup
// is released, so pod churn does not grow them for the agent's life.
//
// A background thread drains the kernel maps every drain interval (so they never fill between
// requests). Stacks are symbolized only while a collect() is waiting for them; otherwise a
// drain only counts samples per container. Symbolization parses tenants' binaries, so it runs
// on that thread (or on the thread that releases a process), never on the caller of collect():
// HTTP server threads have small stacks (civetweb's are 100 KiB). Thread-safe: every method may
// be called from any thread; collect() blocks its caller for the duration.
#pragma once

#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>

#include "agent/cpu/profile_builder.h"
#include "agent/metrics/metrics_server.h"
#include "agent/runtime/container_totals.h"
#include "agent/stacks/js_frames.h"
#include "agent/stacks/sampler.h"
#include "agent/stacks/stack_symbolizer.h"
#include "agent/symbolize/live_kernel_symbols.h"
#include "agent/symbolize/symbolizer_cache.h"
#include "common/clock.h"
#include "common/result.h"

namespace sonde::agent::cpu {

struct ProfilerOptions {
  uint32_t frequency_hz =
      stacks::CpuSampler::kDefaultFrequencyHz;  // 1..CpuSampler::kMaxFrequencyHz
  bool all_processes = false;
  // The Node.js probes' `loops` map fd (LoopProbes), or -1: enables SampleOwner::blocked.
  int nodejs_loops_map_fd = -1;
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::string node_name;  // the `node` metric label
  std::chrono::milliseconds drain_interval{1000};
  // How long a container's series stay after its last selection is released (its processes
  // ended, its pod left): then they leave /metrics, as every feature's container series do.
  std::chrono::nanoseconds series_grace = std::chrono::minutes(5);
  const Clock* clock = &real_clock();  // what series_grace is measured on
  // The symbol tables of profiled binaries, shared with whoever else symbolizes stacks of the
  // same processes (the stall recorder); null: a cache of its own (its default budget).
  std::shared_ptr<symbolize::SymbolizerCache> binaries;
  // The budget of every node process's JavaScript name caches together (JsFrames).
  size_t js_name_cache_bytes = stacks::JsFrames::kDefaultCacheBudgetBytes;
};

// Which samples a profile keeps; unset fields match everything.
struct ProfileFilter {
  std::optional<std::string> namespace_name;
  std::optional<std::string> pod;
  std::optional<std::string> container;
  std::optional<pid_t> pid;
  bool blocked_only = false;  // only samples taken while a Node.js loop was blocked
};

class CpuProfiler {
 public:
  static constexpr std::chrono::seconds kMaxDuration{300};
  static constexpr int kMaxConcurrentProfiles = 2;

  static Result<std::unique_ptr<CpuProfiler>> start(const ProfilerOptions& options);
  ~CpuProfiler();
  CpuProfiler(const CpuProfiler&) = delete;
  CpuProfiler& operator=(const CpuProfiler&) = delete;

  Status select_pid(pid_t pid, const ContainerLabels& labels);
  Status release_pid(pid_t pid);
  Status select_cgroup(uint64_t cgroup_id, const ContainerLabels& labels);
  Status release_cgroup(uint64_t cgroup_id);

  // Samples of the next `duration` (at most kMaxDuration) that pass filter. Returns early, with
  // what was gathered, when the profiler is being destroyed. An Error when more than
  // kMaxConcurrentProfiles are being collected already.
  Result<std::unique_ptr<ProfileBuilder>> collect(std::chrono::milliseconds duration,
                                                  const ProfileFilter& filter);

  // The same, one profile per owner (namespace, pod, container; processes without labels share
  // the empty owner), for pushing each container's profile under its own labels.
  Result<std::map<ContainerLabels, std::unique_ptr<ProfileBuilder>>> collect_per_owner(
      std::chrono::milliseconds duration);

  // container_cpu_profile_samples_total{namespace,pod,container,node}, the drop counters, and
  // the JavaScript frames named from the V8 heap (container_cpu_profile_js_frames_total).
  std::vector<prometheus::MetricFamily> metrics() const;

  // GET /debug/pprof/profile?seconds=N[&namespace=&pod=&container=&pid=&blocked=true]
  // [&format=folded]: gzipped pprof (or folded text) of the next N seconds (default 30).
  HttpResponse handle_profile_request(const HttpRequest& request);
  static constexpr const char* kRoute = "/debug/pprof/profile";

  uint32_t frequency_hz() const { return sampler_->frequency_hz(); }
  // Samples at `frequency_hz` from now on (CpuSampler::set_frequency). A profile collected
  // across the change counts its samples at the frequency it started with.
  Status set_frequency(uint32_t frequency_hz);
  bool tracks_nodejs_loops() const { return sampler_->tracks_nodejs_loops(); }

  struct Stats {
    uint64_t drains = 0;
    uint64_t samples = 0;
    symbolize::SymbolizerCache::Stats binaries;
    size_t processes = 0;  // processes whose mappings are kept
    stacks::CpuSampler::Drops drops;
    size_t js_name_cache_bytes = 0;     // stacks::JsFrames::cache_bytes()
    uint64_t js_name_cache_clears = 0;  // stacks::JsFrames::cache_clears()
    size_t js_node_processes = 0;       // processes whose JavaScript frames it can name
  };
  Stats stats() const;

 private:
  struct Subscription {
    ProfileFilter filter;
    std::unique_ptr<ProfileBuilder> builder;  // unless per_owner
    bool per_owner = false;
    std::map<ContainerLabels, std::unique_ptr<ProfileBuilder>> by_owner;  // when per_owner
    int64_t start_unix_ns = 0;
  };

  explicit CpuProfiler(const ProfilerOptions& options)
      : options_(options),
        binaries_(options.binaries ? options.binaries
                                   : std::make_shared<symbolize::SymbolizerCache>()) {}
  void run(const std::stop_token& stop);
  // Runs `sub` for `duration`: the shared part of collect() and collect_per_owner().
  Status subscribe_and_wait(Subscription& sub, std::chrono::milliseconds duration);
  Status drain();  // requires drain_mu_
  // Selection bookkeeping for series expiry; require mu_.
  void selected_locked(const ContainerLabels& labels);
  void released_locked(const ContainerLabels& labels);
  void expire_series_locked();
  // Has the background thread drain now, and waits for it; requires neither lock.
  Status drain_on_profiler_thread();
  ContainerLabels labels_of(pid_t pid, uint64_t cgroup_id) const;  // requires mu_

  const ProfilerOptions options_;
  const std::shared_ptr<symbolize::SymbolizerCache> binaries_;
  std::unique_ptr<symbolize::LiveKernelSymbols> kernel_;

  // Kernel maps and symbolization: one drain at a time.
  mutable std::mutex drain_mu_;
  std::unique_ptr<stacks::CpuSampler> sampler_;
  std::unique_ptr<stacks::StackSymbolizer> symbolizer_;
  std::unique_ptr<stacks::JsFrames> js_frames_;

  // Everything else.
  mutable std::mutex mu_;
  // Woken by a drain request, by a drain served, and by thread_'s stop (std::stop_token waits).
  std::condition_variable_any wake_;
  std::condition_variable_any served_;
  uint64_t drain_requests_ = 0;
  uint64_t drains_served_ = 0;  // drain_requests_ when the last drain began
  Status last_drain_ = ok_status();
  std::unordered_map<pid_t, ContainerLabels> pid_labels_;
  std::unordered_map<uint64_t, ContainerLabels> cgroup_labels_;
  std::list<Subscription*> subscriptions_;
  // Selected pids and cgroups per container, and since when (monotonic ns) a container has none:
  // its series below are dropped series_grace after that.
  std::map<ContainerLabels, size_t> selections_;
  std::map<ContainerLabels, uint64_t> unselected_since_;
  std::map<ContainerLabels, uint64_t> samples_total_;
  std::map<ContainerLabels, stacks::JsFrames::Counts>
      js_frames_total_;                             // weighted by sample counts
  std::map<std::string, uint64_t> node_processes_;  // stacks::JsFrames::node_processes()
  size_t js_cache_bytes_ = 0;                       // stacks::JsFrames::cache_bytes()
  uint64_t drains_ = 0;
  uint64_t samples_ = 0;

  // Last: started after everything it uses; destroyed first, which asks it to stop and joins.
  std::jthread thread_;
};

}  // namespace sonde::agent::cpu
