// LoopProbes: the kernel half of Node.js event-loop accounting (bpf/nodejs/nodejs.bpf.c).
//
// Loads the programs once per agent: the epoll-wait hooks and the main-thread exit hook. By
// default (kAuto) the wait hook costs processes the agent does not select nothing: fentry/fexit
// on do_epoll_wait where the kernel has BPF trampolines, else uprobes on the C library's epoll
// functions (kLibcUprobes), attached per selected process by LibcWaitHooks (this object only
// loads the programs and attaches them where told). The kernel-wide fallbacks put every system
// call of every process on the slow path and are taken only when asked for: the syscall
// tracepoints of the epoll waits (kEpollTracepoints; tracefs, mounted when the node has not),
// the raw sys_enter/sys_exit tracepoints (kSyscallTracepoints).
// Nothing is attached to Node.js binaries: which epoll fd is the default loop's is read from the
// process's memory (libuv's default_loop_struct), so no breakpoint is ever written into a process.
// Owns the skeleton; destroying it detaches everything. Map operations are thread-safe (each is a
// syscall); the object itself is not shared across threads without external locking.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "agent/nodejs/libc_wait_hooks.h"
#include "agent/nodejs/loop_delay.h"
#include "agent/runtime/container_totals.h"
#include "bpf/nodejs/nodejs.h"
#include "common/clock.h"
#include "common/result.h"

struct nodejs_bpf;
struct bpf_map;

namespace sonde::agent {

// Upper bounds (ns) of the block-duration histogram, as the kernel counts them.
inline constexpr std::array<uint64_t, SONDE_LOOP_BLOCK_BOUNDS> kLoopBlockBoundsNs =
    SONDE_LOOP_BLOCK_BOUNDS_NS;
// Finished busy periods of a loop by duration (the last bucket is above every bound); sum in ns.
using LoopBlocks = Histogram<SONDE_LOOP_BLOCK_BOUNDS + 1>;

// What the kernel counted for one process.
struct LoopReading {
  uint64_t blocked_ns = 0;  // including a busy period in progress (up to the reading's instant)
  LoopBlocks blocks;        // finished busy periods only: a block in progress counts when it ends
  uint64_t idle_ns = 0;     // time in the loop's waits, including a wait in progress
  LoopDelays delays;        // the simulated 10 ms timer's finished intervals (loop_delay.h)
};

// The per-process accounting EventLoopMonitor drives: LoopProbes in the kernel, a fake in unit
// tests.
class LoopAccounting {
 public:
  struct Start {
    enum class Now {
      kUnknown,  // just exec'd, or still starting up (starting_up()): from the loop's first wait
      kWaiting,  // the main thread is waiting in epoll on `epfd` right now
      kBusy,     // the main thread is running now: count from this instant
    };
    // Runtime address of libuv's default loop (default_loop_struct), 0 if unknown: waits on
    // the epoll fd it holds are the loop's idle time, waits of nested loops are not.
    uint64_t default_loop = 0;
    bool any_epfd = false;  // no libuv symbols: every main-thread epoll wait is the loop's
    Now now = Now::kUnknown;
    int epfd = -1;  // for kWaiting
  };
  virtual ~LoopAccounting() = default;
  // Starts accounting for `pid` (replacing any previous state of that pid).
  virtual Status track(pid_t pid, const Start& start) = 0;
  // Whether the kernel saw `pid` exec since the probes were loaded and its main thread has not
  // waited in epoll since: it is still starting up, so tracking it from Now::kUnknown counts
  // exactly what tracking it from its exec would have. False for processes older than the
  // probes (their history is unknown).
  virtual bool starting_up(pid_t pid) const = 0;
  // What the kernel counted for `pid` so far, a busy period in progress counted up to `now_ns`;
  // an error with ENOENT when the kernel holds no state for it (never tracked, or evicted).
  virtual Result<LoopReading> read_at(pid_t pid, uint64_t now_ns) const = 0;
  // Stops accounting for `pid`; its final counts, with a busy period in progress counted as
  // blocked time up to `end_ns` (CLOCK_MONOTONIC; not a finished block). When the main thread
  // has exited, the kernel closed the busy period at that moment and `end_ns` does not matter.
  virtual Result<LoopReading> untrack(pid_t pid, uint64_t end_ns) = 0;
};

class LoopProbes final : public LoopAccounting, public WaitProbeAttacher {
 public:
  // kAuto: kFentry, else kLibcUprobes; never a syscall tracepoint (chosen explicitly only).
  enum class WaitSource { kAuto, kFentry, kEpollTracepoints, kSyscallTracepoints, kLibcUprobes };

  // `links`: how the kLibcUprobes programs attach; by default what the kernel offers
  // (uprobe_link_support()). Tests force kSingle to run older kernels' path here.
  // `runtime_metrics`: whether the kernel counts idle time and the delay histogram
  // (LoopReading's idle_ns and delays stay 0 otherwise, and each turn costs what blocked time
  // alone costs).
  static Result<std::unique_ptr<LoopProbes>> load(
      WaitSource source = WaitSource::kAuto, std::optional<UprobeLinkKind> links = std::nullopt,
      bool runtime_metrics = true);
  ~LoopProbes() override;

  // Which hook measures the waits ("fentry/do_epoll_wait", "tracepoint/syscalls/epoll_wait*",
  // "tp_btf/sys_enter+sys_exit" or "uprobe/libc:epoll_wait*").
  const char* wait_source() const;
  WaitSource source() const { return source_; }
  // What the hook costs processes the agent does not select, for doctor and logs.
  static const char* wait_source_cost(WaitSource source);
  // The same in one word, for sonde_agent_info{unselected_cost}: "none" or "every-syscall".
  static const char* wait_source_cost_class(WaitSource source);

  // kLibcUprobes only: attaches the entry (kAtSite) or return (kOnReturn) program at `sites` of
  // the C library at `path`, for process `pid` alone; an error for the other sources.
  Result<std::unique_ptr<Attachment>> attach(const std::string& path,
                                             std::span<const UprobeSite> sites, UprobeFires fires,
                                             pid_t pid) override;
  size_t attachment_fds(size_t sites) const override { return uprobe_link_fds(links_, sites); }

  // Starts accounting for `pid` (replacing any previous state of that pid).
  Status track(pid_t pid, const Start& start) override;

  bool starting_up(pid_t pid) const override;
  // Consistent even while the kernel updates the entry (read until two reads agree).
  Result<LoopReading> read_at(pid_t pid, uint64_t now_ns) const override;
  // Blocked nanoseconds of `pid` so far, including a busy period in progress.
  Result<uint64_t> blocked_ns(pid_t pid) const;

  // The fd of the `loops` map (tgid -> struct sonde_loop_state), for other BPF objects that
  // read the loop state (the CPU sampler marks samples of blocked loops). Owned by this object.
  int loops_map_fd() const;

  Result<LoopReading> untrack(pid_t pid, uint64_t end_ns) override;

  // Long turns (bpf/nodejs/nodejs_stalls.h), for the stall recorder: the map of watched processes'
  // thresholds (tgid -> ns), the ring buffer of long turns' ends, and how many ends it had no
  // room for. Owned by this object.
  int stall_thresholds_fd() const;
  const bpf_map* stall_events_map() const;
  uint64_t stall_events_lost() const;

 private:
  LoopProbes() = default;
  static Result<std::unique_ptr<LoopProbes>> load_with(WaitSource source,
                                                       std::optional<UprobeLinkKind> links,
                                                       bool runtime_metrics);
  std::unique_ptr<nodejs_bpf, void (*)(nodejs_bpf*)> skel_{nullptr, nullptr};
  WaitSource source_ = WaitSource::kFentry;
  UprobeLinkKind links_ = UprobeLinkKind::kSingle;  // kLibcUprobes
};

}  // namespace sonde::agent
