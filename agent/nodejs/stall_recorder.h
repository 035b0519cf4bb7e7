// StallRecorder: the stack of each long event-loop turn of watched Node.js processes, named in
// JavaScript. The Node.js feature (nodejs_feature.h) builds it on its probes' maps and watches
// a process whose selection sets nodejsEventLoop.stallThresholdMs.
//
// How (bpf/nodejs/nodejs_stalls.h has the kernel half):
//   - watch() puts the process's threshold in the Node.js probes' `stall_thresholds` map, so the
//     end of a turn at least that long is one record in their `stall_events` ring buffer, with
//     its exact start and duration; and it gives the process (with its V8 frame slots when its
//     node publishes a usable layout, JsFrames) to the stall sampler.
//   - The stall sampler is a second perf-event program on every CPU at SONDE_STALL_SAMPLE_HZ
//     (199 Hz) that returns at once unless the interrupted task is a watched process's main
//     thread whose loop is busy; then it counts the user stack and V8 walk under the turn.
//     It is loaded at the first watch(), never before: a node where no policy sets
//     stallThresholdMs pays nothing. Its perf events are attached while a process is watched
//     and closed when the last one is forgotten, so a node whose stall thresholds were all
//     removed stops paying the interrupts. The CPU profiles' sampler keeps its own frequency.
//   - A thread runs one round every kRoundInterval: it reads the loop state of the processes
//     with samples pending, takes the end records, then drains the sampler's other generation
//     into per-turn sample counts. A turn whose end record came is a stall: its stacks are
//     symbolized (ELF symbols, perf maps, V8 heap names through JsFrames), the most sampled
//     kept, and it enters the ring (StallRing). A turn seen in an earlier round that is no
//     longer its loop's current one and had no end record was shorter than the threshold: its
//     samples are dropped. A turn still running after StallRing::kOngoingAfterNs (10 s) is
//     reported once, ongoing, and its end is not reported again. A long turn without a sample (the
//     thread was off the CPU: a sync sleep or I/O) is reported with none.
//   - A turn already running when its process was first watched is not reported: its samples
//     would miss its start.
//   - on_stall (cluster mode: a Kubernetes Event on the pod) is called for each stall added,
//     on the recorder's thread.
//
// Bounded: pending turns (kMaxPendingTurns) and distinct stacks per turn (kMaxStacksPerTurn),
// the kernel maps (nodejs_stalls.h), the ring (StallRing). What a bound refuses is counted
// (drops(), sonde_agent_nodejs_stall_drops_total{reason}).
//
// Thread-safe. Destroy it before the Node.js probes whose maps it uses.
#pragma once

#include <prometheus/metric_family.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "agent/kernel/bpf_helpers.h"
#include "agent/metrics/metrics_server.h"
#include "agent/nodejs/stall_ring.h"
#include "agent/runtime/container_totals.h"
#include "agent/stacks/js_frames.h"
#include "agent/stacks/stack_symbolizer.h"
#include "agent/symbolize/symbolizer_cache.h"
#include "common/result.h"
#include "common/unique_fd.h"

struct nodejs_stalls_bpf;
struct bpf_link;
struct bpf_map;

namespace sonde::agent {

struct StallRecorderOptions {
  int loops_map_fd = -1;                  // LoopProbes::loops_map_fd()
  int thresholds_map_fd = -1;             // LoopProbes::stall_thresholds_fd()
  const bpf_map* events_map = nullptr;    // LoopProbes::stall_events_map()
  std::function<uint64_t()> events_lost;  // LoopProbes::stall_events_lost()
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::function<void(const Stall&)> on_stall;  // may be empty
  // Symbol tables, shared with the CPU profiler when it runs (ProfilerOptions::binaries); null:
  // a cache of its own.
  std::shared_ptr<symbolize::SymbolizerCache> binaries;
  // A turn still running this long is reported once, ongoing (tests shorten it).
  uint64_t ongoing_after_ns = StallRing::kOngoingAfterNs;
};

class StallRecorder final {
 public:
  static constexpr std::chrono::milliseconds kRoundInterval{100};
  static constexpr size_t kMaxPendingTurns = 1024;
  static constexpr size_t kMaxStacksPerTurn = 256;
  // Its JavaScript name caches' budget (JsFrames): it names stalls' samples only.
  static constexpr size_t kJsNameCacheBytes = size_t{8} << 20;
  static constexpr const char* kRoute = "/debug/nodejs/stalls";

  explicit StallRecorder(StallRecorderOptions options);
  ~StallRecorder();
  StallRecorder(const StallRecorder&) = delete;
  StallRecorder& operator=(const StallRecorder&) = delete;

  // Reports pid's loop turns of at least `threshold_ns` from now on (a new threshold replaces
  // the old). pid's loop must be tracked by the Node.js probes. Reads the process's executable
  // (its V8 layout) once: call it on the inspection worker. Thread-safe, as every method.
  Status watch(pid_t pid, const ContainerLabels& labels, uint64_t threshold_ns);
  // Stops watching pid (exited or no longer selected); no-op when it was not watched.
  void forget(pid_t pid);
  // GET /debug/nodejs/stalls.
  HttpResponse handle_request(const HttpRequest& request);
  void collect(std::vector<prometheus::MetricFamily>& out);

  const StallRing& ring() const { return ring_; }
  // Whether the stall sampler's perf events are attached: while a process is watched.
  bool sampling() const;

  struct Drops {
    uint64_t samples = 0;      // the kernel's count map was full
    uint64_t stacks = 0;       // the kernel's user stack map was full
    uint64_t v8_stacks = 0;    // the kernel's V8 stack map was full
    uint64_t events = 0;       // the end-of-turn ring buffer was full: a stall went unreported
    uint64_t turns = 0;        // kMaxPendingTurns: a turn's samples were not kept
    uint64_t turn_stacks = 0;  // kMaxStacksPerTurn: samples of a turn kept without their stack
    uint64_t evicted = 0;      // stalls pushed out of the full ring
    uint64_t truncated = 0;    // stacks, frames or names cut by StallRing's bounds
  };
  Drops drops() const;
  uint64_t stalls() const;

 private:
  struct Watched {
    ContainerLabels labels;
    uint64_t threshold_ns = 0;
    uint64_t since_ns = 0;  // CLOCK_MONOTONIC when the first watch() began sampling: earlier
                            // turns are not reported
  };
  struct StackKey {
    std::vector<uint64_t> user;
    std::vector<stacks::V8Frame> v8;
    bool operator<(const StackKey& o) const;
  };
  struct Turn {
    std::map<StackKey, uint64_t> stacks;
    uint64_t samples = 0;
    bool judged_before = false;  // seen in an earlier round: may be judged now
    bool reported = false;       // reported ongoing: later samples are not kept
  };
  struct End {
    uint64_t duration_ns = 0;
  };

  // Loads the program, opens the end-of-turn ring and starts the thread: once.
  Status start_locked();
  // Opens and attaches the per-CPU perf events (links_), or closes them.
  Status attach_locked();
  void detach_locked();
  void run(const std::stop_token& stop);
  void round();  // requires mu_
  void drain_locked();
  void report_locked(pid_t pid, uint64_t turn_ns, Turn& turn, uint64_t duration_ns, bool ongoing);

  const StallRecorderOptions options_;
  const std::shared_ptr<symbolize::SymbolizerCache> binaries_;
  StallRing ring_;

  mutable std::mutex mu_;
  std::unique_ptr<nodejs_stalls_bpf, void (*)(nodejs_stalls_bpf*)> skel_{nullptr, nullptr};
  std::vector<bpf_link*> links_;
  std::unique_ptr<RingBufferReader> events_;
  std::unique_ptr<stacks::StackSymbolizer> symbolizer_;
  std::unique_ptr<stacks::JsFrames> js_frames_;
  std::map<pid_t, Watched> watched_;
  std::map<std::pair<pid_t, uint64_t>, Turn> turns_;
  std::map<std::pair<pid_t, uint64_t>, End> ends_;  // from the ring buffer, this round
  uint64_t turns_dropped_ = 0;
  uint64_t turn_stacks_dropped_ = 0;
  uint64_t stalls_ = 0;

  std::jthread thread_;  // last: started after everything it uses, joined first
};

}  // namespace sonde::agent
