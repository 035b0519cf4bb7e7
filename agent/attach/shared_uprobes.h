// SharedUprobes: one uprobe attachment per (real file, program), covering every site of that
// program in the file (one uprobe_multi link, or one link per site on older kernels:
// agent/kernel/uprobe_links.h), shared by every process that runs the file and
// reference-counted by their pids.
//
// Two pods of one image reach the same lower-layer file through two overlay mounts (same
// inode, different st_dev); a uprobe attached through either lands on the real inode and fires
// for both. Attaching once per path would count every event twice, so attachments are keyed by
// BinaryIdentity (which ignores the mount) and never by path. Per-process filtering happens in
// the kernel through the feature's tracked-process map.
//
// Detaching is slow and happens on a thread of its own: closing a uprobe link waits for an RCU
// grace period in the kernel (about 100 ms per link on 6.18, measured in bench/gotls), so a Go
// binary's last exit would otherwise hold up its caller (the event thread) for about a second
// with single links (9 per binary), 0.3 s with uprobe_multi links (3).
// An attachment left without users stays attached until that thread gets to it; a process of
// the file that starts meanwhile takes it over, and one that starts while it is being detached
// waits for the detach, so two links never fire for one site.
//
// Idle attachments may be kept (`linger_ns`): a short-lived program (a CLI tool, a CronJob, an
// init container) that runs again is then counted from its first instruction, where attaching
// anew would race its first calls. They are detached once idle for `linger_ns` (expire(), called
// periodically), or earlier, oldest first, when the caller needs their descriptors
// (evict_oldest_idle()). An idle attachment costs its descriptors and nothing else: no process
// runs the file, so its probes never fire.
//
// A process acquires the attachments of all its programs at once, and gets all or none: a
// binary is never left half instrumented (say, Read's entry counted without its returns).
//
// Thread-safety: all methods may be called concurrently. Attachment happens under the lock so
// two threads can never attach the same key twice.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/kernel/bpf_helpers.h"
#include "agent/symbols/binary_identity.h"
#include "common/clock.h"
#include "common/result.h"

namespace sonde::agent {

class SharedUprobes {
 public:
  // Attaches one program at all its sites of the file at `path`, for all processes.
  using AttachFn = std::function<Result<std::unique_ptr<Attachment>>(const std::string& path)>;

  // The sites of one program in one file are a function of the file's content, so they are
  // not part of the key.
  struct Key {
    symbols::BinaryIdentity binary;
    std::string program;  // e.g. "gotls/read"
    bool operator<(const Key& o) const;
  };
  struct Request {
    Key key;
    AttachFn attach;
  };

  // `linger_ns`: how long an attachment left without users is kept (0: detached at once).
  explicit SharedUprobes(uint64_t linger_ns = 0, const Clock& clock = real_clock());
  // Detaches everything, in use or not, before returning.
  ~SharedUprobes();
  SharedUprobes(const SharedUprobes&) = delete;
  SharedUprobes& operator=(const SharedUprobes&) = delete;

  // Adds `pid` as a user of the attachment of every request's key, attaching through `path` (a
  // path valid now, such as /proc/<pid>/exe) those that have none. All or none: on failure
  // `pid` uses none of them, and what this call attached is detached on the detach thread (a
  // process of the file that comes meanwhile may take it over).
  Status acquire(const std::vector<Request>& requests, const std::string& path, pid_t pid);
  // Attachments `requests` would add now (keys not attached, or being detached).
  size_t missing(const std::vector<Request>& requests) const;

  // Removes `pid` from every attachment it uses; those left without users are kept idle for
  // the linger, or detached soon (on the detach thread) without one or when `linger` is false
  // (a workload over its overhead budget must stop paying at once). Returns at once.
  void release(pid_t pid, bool linger = true);

  // Hands the attachments idle for the linger or longer to the detach thread. Returns at once.
  void expire();
  // Detaches every idle attachment of the binary idle the longest, and returns once they are
  // detached (a grace period per link: ~0.1 s); false when no attachment is idle.
  bool evict_oldest_idle();
  // Binaries whose attachments are all idle (kept for the linger).
  size_t idle_binaries() const;

  // Returns once every attachment without users at the time of the call is detached.
  void flush();

  // Attachments alive now (in use, or waiting to be detached).
  size_t size() const;
  // Attachments made since construction (a second pod of an image must not add one).
  uint64_t attach_count() const;

 private:
  struct Shared {
    std::unique_ptr<Attachment> attachment;
    std::set<pid_t> users;
  };
  void detach_unused();
  // With mu_ held: returns once the detach rounds covering unused_ at the time of the call are
  // done.
  void wait_detached_locked(std::unique_lock<std::mutex>& lock);

  const uint64_t linger_ns_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable changed_;  // unused_ grew, a detach finished, or stopping
  std::map<Key, Shared> by_key_;
  std::map<pid_t, std::set<Key>> by_pid_;
  std::map<Key, uint64_t> idle_;  // without users, kept: since when (clock_)
  std::vector<Key> unused_;       // to detach; may have been taken over (or idle again) since
  std::set<Key> detaching_;       // out of by_key_, being detached now
  bool in_round_ = false;         // the detach thread is working through what it took
  uint64_t detach_rounds_ = 0;    // rounds of the detach thread finished
  uint64_t attach_count_ = 0;
  bool stopping_ = false;
  std::thread detacher_;  // last: started after the fields it uses
};

}  // namespace sonde::agent
