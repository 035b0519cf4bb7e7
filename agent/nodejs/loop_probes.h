// LoopProbes: the kernel half of Node.js event-loop accounting (bpf/nodejs.bpf.c).
//
// Loads the programs once per agent: the epoll-wait hooks (fentry/fexit on do_epoll_wait, or
// the raw syscall tracepoints where the running kernel cannot trace that function) and the
// uv__io_poll uprobe program, which callers attach per binary through attach_uprobe(). Owns
// the skeleton; destroying it detaches everything. Map operations are thread-safe (each is a
// syscall); the object itself is not shared across threads without external locking.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "common/result.h"

struct nodejs_bpf;

namespace sonde::agent {

// CLOCK_MONOTONIC in nanoseconds, the clock of bpf_ktime_get_ns().
uint64_t monotonic_ns();

class LoopProbes {
 public:
  enum class WaitSource { kAuto, kFentry, kSyscallTracepoints };

  static Result<std::unique_ptr<LoopProbes>> load(WaitSource source = WaitSource::kAuto);
  ~LoopProbes();

  // Which hook measures the waits ("fentry/do_epoll_wait" or "tp_btf/sys_enter+sys_exit").
  const char* wait_source() const;

  // Attaches the uv__io_poll entry program at `file_offset` of the binary at `path`, for every
  // process running it (filtering happens in the kernel through the tracked-process map).
  Result<std::unique_ptr<Attachment>> attach_uprobe(const std::string& path, uint64_t file_offset);

  struct Start {
    enum class Now {
      kUnknown,  // just exec'd: accounting starts at the loop's first wait
      kWaiting,  // the main thread is waiting in epoll on `epfd` right now
      kBusy,     // the main thread is running now: count from this instant
    };
    uint64_t default_loop = 0;  // runtime address of libuv's default loop, 0 if unknown
    bool any_epfd = false;      // no libuv symbols: every main-thread epoll wait is the loop's
    Now now = Now::kUnknown;
    int epfd = -1;  // for kWaiting
  };
  // Starts accounting for `pid` (replacing any previous state of that pid).
  Status track(pid_t pid, const Start& start);

  // Blocked nanoseconds of `pid` so far, including a busy period in progress. Consistent even
  // while the kernel updates the entry (read until two reads agree).
  Result<uint64_t> blocked_ns(pid_t pid) const { return blocked_ns_at(pid, monotonic_ns()); }
  Result<uint64_t> blocked_ns_at(pid_t pid, uint64_t now_ns) const;

  // The fd of the `loops` map (tgid -> struct sonde_loop_state), for other BPF objects that
  // read the loop state (the CPU sampler marks samples of blocked loops). Owned by this object.
  int loops_map_fd() const;

  // Stops accounting for `pid`; returns its final blocked nanoseconds, with a busy period in
  // progress counted up to `end_ns` (CLOCK_MONOTONIC; the process's exit time when known).
  Result<uint64_t> untrack(pid_t pid, uint64_t end_ns);

 private:
  LoopProbes() = default;
  static Result<std::unique_ptr<LoopProbes>> load_with(WaitSource source);
  std::unique_ptr<nodejs_bpf, void (*)(nodejs_bpf*)> skel_{nullptr, nullptr};
  WaitSource source_ = WaitSource::kFentry;
};

}  // namespace sonde::agent
