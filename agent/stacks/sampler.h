// CpuSampler: the kernel half of CPU profiles (bpf/stacks/cpu_sampler.bpf.c). One perf event per
// online CPU runs the sampling program at a fixed frequency; samples of selected processes are
// aggregated in kernel maps and handed to user space by drain().
//
// Selection happens in the kernel: by cgroup id (containers), by pid (the `profile` command),
// or every process (a standalone agent without targets). An unselected sample costs one hash
// lookup (two while some pid is selected). Nothing is lost silently: samples or stacks the maps
// had no room for are counted in drops().
//
// Owns the skeleton and the perf events; destroying it detaches everything. Not thread-safe:
// one thread (or callers under one lock) uses it, except drops(), which any thread may call.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

struct cpu_sampler_bpf;
struct bpf_link;

namespace sonde::agent::stacks {

struct SamplerOptions {
  // Samples per second per CPU: 1..kMaxFrequencyHz.
  uint32_t frequency_hz = 19;
  // Sample every process; select_*() are then unnecessary.
  bool all_processes = false;
  // The fd of the Node.js probes' `loops` map (bpf/nodejs/nodejs.bpf.c), or -1. When given, samples
  // of a tracked main thread taken while its loop is blocked are marked blocked.
  int nodejs_loops_map_fd = -1;
  std::string sys_root = "/sys";  // where devices/system/cpu/online is read
};

// One frame of a Node.js process's frame-pointer walk (bpf/stacks/cpu_sampler.h sonde_v8_frame):
// raw values from the process's stack, not trusted until checked against its heap.
struct V8Frame {
  uint64_t pc = 0;
  uint64_t function = 0;
  uint64_t context_or_type = 0;
  uint64_t shared = 0;  // the function's SharedFunctionInfo when sampled (sonde_v8_frame)
};

// Where a process's V8 frames keep their slots, bytes from the frame pointer (V8Layout).
struct V8FrameSlots {
  int32_t function = 0;
  int32_t context_or_frame_type = 0;
  int32_t function_shared = 0;  // bytes from a tagged JSFunction pointer to its shared slot
};

// One aggregated sample: a process's stacks and how many times they were seen.
struct RawSample {
  uint32_t pid = 0;
  uint64_t cgroup_id = 0;
  bool blocked = false;
  std::vector<uint64_t> user;    // innermost first; empty for kernel threads
  std::vector<uint64_t> kernel;  // innermost first; empty when sampled in user mode
  std::vector<V8Frame> v8;       // innermost first; only for processes given to watch_v8()
  uint64_t count = 0;
};

class CpuSampler {
 public:
  static constexpr uint32_t kDefaultFrequencyHz = 19;
  static constexpr uint32_t kMaxFrequencyHz = 999;

  // Opens, configures, loads and attaches. Errors name the step and CPU.
  static Result<std::unique_ptr<CpuSampler>> start(const SamplerOptions& options);
  ~CpuSampler();
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  Status select_cgroup(uint64_t cgroup_id);
  Status release_cgroup(uint64_t cgroup_id);
  Status select_pid(pid_t pid);
  Status release_pid(pid_t pid);
  // Records the V8 frames (up to SONDE_V8_MAX_FRAMES) of pid's samples from now on, at most
  // SONDE_V8_MAX_PROCESSES processes (least recently sampled dropped first: an LRU map).
  Status watch_v8(pid_t pid, const V8FrameSlots& slots);
  Status unwatch_v8(pid_t pid);

  // Every sample since the previous drain. Switches the kernel to the other generation of maps
  // first, so samples taken during the drain go to the next one.
  Result<std::vector<RawSample>> drain();

  struct Drops {
    uint64_t samples = 0;    // the count map was full: the sample is lost
    uint64_t stacks = 0;     // a stack map was full: the sample is kept without that stack
    uint64_t v8_stacks = 0;  // the V8 stack map was full: the sample has no V8 frames
    // the kernel gave no user stack for a process with one: the sample has no user frames
    uint64_t user_stacks = 0;
  };
  Drops drops() const;

  // Changes the sampling frequency of every CPU's perf event (PERF_EVENT_IOC_PERIOD with the
  // period that frequency means); 1..kMaxFrequencyHz.
  Status set_frequency(uint32_t frequency_hz);
  uint32_t frequency_hz() const { return frequency_hz_.load(); }
  bool tracks_nodejs_loops() const { return tracks_loops_; }

 private:
  CpuSampler() = default;

  std::unique_ptr<cpu_sampler_bpf, void (*)(cpu_sampler_bpf*)> skel_{nullptr, nullptr};
  std::vector<bpf_link*> links_;  // destroyed before the skeleton
  std::vector<UniqueFd> events_;  // the links' perf events (duplicates), for set_frequency()
  std::atomic<uint32_t> frequency_hz_ = kDefaultFrequencyHz;  // read from any thread
  bool tracks_loops_ = false;
  size_t selected_pids_ = 0;
};

// The CPUs online (sys_root/devices/system/cpu/online), for a perf event on each.
Result<std::vector<int>> online_cpus(const std::string& sys_root);
// A cpu-clock perf event on `cpu` at `frequency_hz`, for a BPF program to attach to.
Result<UniqueFd> open_clock_event(int cpu, uint32_t frequency_hz);

}  // namespace sonde::agent::stacks
