// EventLoopMonitor: finds Node.js processes, instruments them, and turns the kernel's per-pid
// accounting into per-container counters of event-loop blocked seconds.
//
// Detection is by symbols, not by file name: a binary is Node.js when it exports
// napi_module_register (kept in .dynsym even when stripped), so a renamed node or a
// single-executable app counts, and a non-node binary costs one parse ever (the probe-target
// cache remembers absent names per binary identity).
//
// Per binary, the best available mode is used and reported:
//   precise      libuv's default_loop_struct found: only waits on the default loop's epoll fd
//                (read from the loop in the process's memory by the kernel hook) are idle;
//                nested loops (spawnSync) count as blocked
//   epoll-only   no libuv symbols (stripped .symtab): every epoll wait of the main thread is idle
// Nothing is written into Node.js processes: no uprobe (see bpf/nodejs/nodejs.bpf.c for why).
//
// With the libc-uprobes wait source (`hooks`), a process is tracked only once its C library's
// epoll functions are hooked for it (LibcWaitHooks); a process whose library cannot be hooked
// is not tracked, and its reason is the verdict (LimitExceeded past the hooks' bounds). The
// hook goes in after the process's exec, which changes two things against the kernel-wide
// hooks:
//   - A wait that began before the return probe was attached returns without firing it (the
//     kernel swaps the return address at the entry). Caught in such a wait, a process starts
//     as Now::kWaiting all the same: its return goes unseen, the phase stays IDLE until the
//     next wait's entry, and the busy period in between is not counted -- at most one period
//     per process, an undercount, never idle time counted as blocked. Now::kUnknown would lose
//     that same period; Now::kBusy would count the rest of the wait as blocked. A process busy
//     when caught is exact (kBusy: its next wait's entry is seen).
//   - The kernel's "still starting up" record is cleared only by waits the hook saw, so it may
//     outlive waits made before the attach. With the default loop's address, the loop's epoll
//     set decides instead: empty, libuv has never polled it (start-up: Now::kUnknown, exact);
//     not empty, it has (mid-flight, as above). Without the address (epoll-only mode) the
//     record is trusted: a loop already running and busy when caught then has that one busy
//     period uncounted.
//
// Counters (blocked time, idle time, the histogram of block durations: each finished busy period
// of the loop, counted in the kernel, and the delay histogram: loop_delay.h) follow
// ProcessTracker's rules (agent/runtime/process_tracker.h). Utilization and delay are reported
// over a window of them (loop_window.h), taken at each samples() call.
//
// Thread-safety: all methods may be called concurrently (one mutex); samples() is what the
// metrics scrape calls, and it reads the kernel map only for live processes.
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/nodejs/libc_wait_hooks.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/loop_window.h"
#include "agent/runtime/container_totals.h"
#include "agent/runtime/process_tracker.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/clock.h"

namespace sonde::agent {

enum class LoopMode { kPrecise, kEpollOnly };
const char* loop_mode_name(LoopMode mode);

class EventLoopMonitor {
 public:
  // `grace_ns`: how long a container's series outlive its last process. `probes` and `clock`
  // are the kernel's accounting and CLOCK_MONOTONIC in the agent, fakes in unit tests.
  // `hooks`: the per-process wait hooks of the libc-uprobes source; nullptr for the kernel-wide
  // sources (nothing to attach per process).
  EventLoopMonitor(LoopAccounting& probes, symbols::ProbeTargetCache& cache, const ProcReader& proc,
                   uint64_t grace_ns, const Clock& clock = real_clock(),
                   LibcWaitHooks* hooks = nullptr);

  // The symbols consider() looks up, so a caller can resolve every feature's names in one
  // parse of a new binary.
  static const std::vector<std::string>& symbol_names();

  enum class Outcome { kTracked, kNotNode, kGone, kFailed, kNoWaitHook, kLimitExceeded };
  // Considers a process: from the start-up scan (it may be mid-loop) or from its exec event.
  // A process that execs again is re-considered. For kNoWaitHook, kLimitExceeded and kFailed,
  // `why` (when given) says why.
  Outcome consider(const Candidate& candidate, const ContainerLabels& labels,
                   std::string* why = nullptr);

  // The process exited at exit_ns (CLOCK_MONOTONIC); no-op when it was not tracked.
  void exited(pid_t pid, uint64_t exit_ns);

  // Drops processes that are gone without an exit event (a dropped ring-buffer record).
  void sweep();

  struct Sample {
    ContainerLabels labels;
    double blocked_seconds;
    size_t processes;     // live Node.js processes of the container
    size_t loops;         // of those, the ones measured: their kernel state not lost
    LoopBlocks blocks;    // finished blocks by duration (kLoopBlockBoundsNs), sum in ns
    double idle_seconds;  // time in the loops' waits
    LoopWindow window;    // utilization and delay over the window ending now
  };
  // Per container, including containers whose processes exited less than `grace` ago. Each call
  // is a reading of the windows (loop_window.h): the metrics scrape calls it.
  std::vector<Sample> samples();

  struct BinaryInfo {
    std::string path;      // as first seen
    std::string build_id;  // BinaryIdentity digest (hex): tells two binaries at one path apart
    LoopMode mode;
    // Whether CPU profiles can name its JavaScript frames from the V8 heap: "supported" or
    // "unsupported: <reason>" (v8::unsupported_reason, a fixed set), read once per binary.
    std::string js_frames;
    size_t processes;
  };
  std::vector<BinaryInfo> binaries() const;
  size_t tracked() const;
  // Tracked processes whose kernel state vanished while they lived: the LRU map was full and
  // evicted them. Their counters keep their last value instead of growing.
  uint64_t states_lost() const;

 private:
  // The counters folded per container: blocked time and the block-duration histogram.
  struct LoopCounts {
    uint64_t blocked_ns = 0;
    LoopBlocks blocks;
    uint64_t idle_ns = 0;
    LoopDelays delays;
    static constexpr auto kCounters = std::tuple{&LoopCounts::blocked_ns, &LoopCounts::blocks,
                                                 &LoopCounts::idle_ns, &LoopCounts::delays};
    static LoopCounts of(const LoopReading& r) {
      return {r.blocked_ns, r.blocks, r.idle_ns, r.delays};
    }
  };
  struct ProcessState {
    LoopCounts last;    // last value read: a lost or evicted map entry never lowers it
    bool lost = false;  // its map entry was evicted (counted once)
  };
  struct Binary {
    std::string path;
    std::string build_id;
    LoopMode mode;
    std::string js_frames;
  };

  // With mu_ held: stops tracking pid, folding its value (up to end_ns) into its container.
  void finish_locked(pid_t pid, uint64_t end_ns);

  LoopAccounting& probes_;
  symbols::ProbeTargetCache& cache_;
  const ProcReader& proc_;
  const Clock& clock_;
  LibcWaitHooks* const hooks_;

  mutable std::mutex mu_;
  // Binaries by BinaryIdentity::to_string().
  ProcessTracker<LoopCounts, ProcessState, Binary> tracker_;
  uint64_t states_lost_ = 0;
  LoopWindows windows_;
};

}  // namespace sonde::agent
