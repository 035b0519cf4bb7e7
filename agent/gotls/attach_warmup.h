// AttachWarmup: starts, early and on its own thread, the RCU grace period the kernel waits for
// before the first uprobe registration of a burst, so that a never-seen binary's attach does not
// wait for all of it after the agent has parsed the binary.
//
// Why: registering a uprobe takes the kernel's `dup_mmap_sem` (a per-CPU rw-semaphore) for
// writing; its rcu_sync waits for a grace period (~10 ms here) unless a writer entered within
// the last one, and a second writer arriving while that wait is under way shares it
// (kernel/events/uprobes.c register_for_each_vma(), kernel/rcu/sync.c rcu_sync_enter()). The
// agent's first BPF_LINK_CREATE for a new binary comes ~3 ms after the exec (opening, symbols,
// plan); a warm-up requested at the exec event begins the grace period then.
//
// What a warm-up does: one uprobe on a memfd of 16 bytes that nothing maps (no process gets a
// breakpoint; the program never runs), attached and at once detached. It holds the semaphore
// only as every attach does (a write section over no mapping), never across a wait of ours.
//
// Which execs ask: request_for() takes the executable's file (device, inode, size, mtime: one
// stat, no read) and asks only for a file not warmed up before, so the execs of a binary already
// attached cost nothing, while a binary rebuilt at the same path (a CI job's) is new. A file is
// remembered only once its warm-up was accepted: one dropped by the bounds is asked for again at
// its next exec.
//
// Bounds (a tenant's exec storm controls how often it is asked): at most one warm-up in flight,
// and none started less than `min_interval_ns` after the previous one started (on `clock`);
// requests past that are dropped (counted: skipped()). At most kMaxFiles files are remembered,
// all forgotten at once past that (a forgotten file costs at most one more warm-up). Requests
// never block.
//
// Thread-safety: request() and request_for() from any thread; the warm-up runs on this object's
// thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "agent/kernel/bpf_helpers.h"
#include "common/clock.h"
#include "common/result.h"

namespace sonde::agent {

class AttachWarmup {
 public:
  // Attaches the warm-up probe at offset 0 of the file at `path`.
  using Attach = std::function<Result<std::unique_ptr<Attachment>>(const std::string& path)>;
  // An executable file as stat() names it: another inode, size or mtime is another binary.
  struct File {
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;
    auto operator<=>(const File&) const = default;
    // stat() of `path` (e.g. /proc/<pid>/exe); an error when it fails.
    static Result<File> of(const std::string& path);
  };
  static constexpr size_t kMaxFiles = 4096;

  // Creates the memfd and the thread; an error when memfd_create fails.
  static Result<std::unique_ptr<AttachWarmup>> create(Attach attach, uint64_t min_interval_ns,
                                                      const Clock& clock = real_clock());
  ~AttachWarmup();
  AttachWarmup(const AttachWarmup&) = delete;
  AttachWarmup& operator=(const AttachWarmup&) = delete;

  // Asks for a warm-up now; false when dropped (one in flight, or within min_interval_ns).
  bool request();
  // request() for the exec of `file`, unless a warm-up was accepted for it before (false then,
  // not counted as skipped).
  bool request_for(const File& file);
  uint64_t done() const;     // warm-ups completed (attached and detached)
  uint64_t failed() const;   // warm-ups whose attach failed (the error is logged once)
  uint64_t skipped() const;  // requests dropped by the bounds

 private:
  AttachWarmup(Attach attach, uint64_t min_interval_ns, const Clock& clock, int fd);
  // request() with mu_ held.
  bool request_locked();
  void run(const std::stop_token& stop);

  const Attach attach_;
  const uint64_t min_interval_ns_;
  const Clock& clock_;
  const int fd_;
  mutable std::mutex mu_;
  std::condition_variable_any wake_;
  bool pending_ = false;
  bool running_ = false;
  uint64_t last_start_ns_ = 0;
  bool started_once_ = false;
  uint64_t done_ = 0, failed_ = 0, skipped_ = 0;
  std::set<File> files_;  // warmed up (accepted), at most kMaxFiles
  bool logged_ = false;
  std::jthread thread_;  // last: stopped and joined first
};

}  // namespace sonde::agent
