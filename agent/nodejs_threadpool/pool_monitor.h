// PoolMonitor: the libuv thread pools of selected Node.js processes, read from their memory
// every poll (pool_reader.h), turned into per-container gauges and the saturated-time counter.
//
// Nothing is written to or run in the process: no uprobe, no breakpoint, no ptrace stop
// (process_vm_readv copies from its pages). A binary is considered once per identity through
// the probe-target cache; its verdict (pool_symbols.h) decides whether its processes are read.
//
// Per process, each poll gives a reading (threads, busy, queued, saturated?) at a CLOCK_MONOTONIC
// instant. Saturated time is integrated over consecutive readings by the trapezoid rule: the
// interval between two readings counts in full when both are saturated, half when one is, not at
// all when neither is, and not at all when they are more than kMaxGapNs apart (the agent was
// not polling: nothing is claimed). With a period P, each change of state is thus placed within
// P/2 on average and P at worst.
//
// Per container (ProcessTracker's rules for the counter, agent/runtime/process_tracker.h):
//   threads, busy, queued  sums over its processes' latest readings no older than kStaleNs
//                          (a process whose reads keep failing stops contributing)
//   saturated seconds      the sum of its processes' saturated time: two pools saturated for
//                          the same second count two seconds
//
// Bounds: at most `max_processes` processes are read per poll; one more is refused
// (kLimitExceeded) and counted. Each reading's reads are bounded by pool_reader.h. Each process
// read holds a pidfd (at most `max_processes` descriptors): a reading taken once it has exited,
// when its pid may already name another process, is dropped, never counted as its own.
//
// Thread-safety: every method may be called concurrently; poll() reads the processes' memory
// without the lock (one poll at a time: the feature's thread).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/nodejs_threadpool/pool_reader.h"
#include "agent/nodejs_threadpool/pool_symbols.h"
#include "agent/runtime/container_totals.h"
#include "agent/runtime/process_tracker.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/clock.h"
#include "common/unique_fd.h"

namespace sonde::agent::threadpool {

// Processes whose pools are read, per node, unless the feature is told otherwise.
inline constexpr size_t kDefaultMaxProcesses = 64;
// Readings further apart than this are not bridged: the time between them is not counted.
inline constexpr uint64_t kMaxGapNs = 1'000'000'000;
// A process's latest reading older than this adds nothing to its container's gauges.
inline constexpr uint64_t kStaleNs = 1'000'000'000;

class PoolMonitor {
 public:
  PoolMonitor(symbols::ProbeTargetCache& cache, const ProcReader& proc, uint64_t grace_ns,
              const Clock& clock = real_clock(), size_t max_processes = kDefaultMaxProcesses);

  enum class Outcome { kTracked, kNotNode, kGone, kRefused, kLimitExceeded };
  // Considers a selected process (from the start-up scan or its exec); an exec'd one again.
  // For kRefused and kLimitExceeded, `why` (when given) says why.
  Outcome consider(const Candidate& candidate, const ContainerLabels& labels,
                   std::string* why = nullptr);
  // The process exited at end_ns (CLOCK_MONOTONIC) or is no longer selected; no-op when unknown.
  void exited(pid_t pid, uint64_t end_ns);
  // Forgets processes gone without an exit event.
  void sweep();
  // Reads every tracked process's pool once.
  void poll();

  struct Sample {
    ContainerLabels labels;
    uint64_t threads = 0;
    uint64_t busy = 0;
    uint64_t queued = 0;
    double saturated_seconds = 0;
    size_t processes = 0;  // live processes whose pool is read
  };
  // Per container, including containers whose processes ended less than `grace` ago.
  std::vector<Sample> samples();

  struct BinaryInfo {
    std::string path;      // as first seen
    std::string build_id;  // BinaryIdentity digest (hex)
    Verdict verdict;
    size_t processes;  // selected live processes running it (read or refused)
  };
  std::vector<BinaryInfo> binaries() const;

  struct Stats {
    uint64_t polls = 0;
    uint64_t poll_ns = 0;                // time spent in poll()
    uint64_t readings = 0;               // successful readings
    uint64_t walks_truncated = 0;        // readings whose queue walk stopped at kMaxQueueNodes
    std::array<uint64_t, 3> failures{};  // by ReadFailure; a process that exited is not one
    uint64_t limit_exceeded = 0;  // processes refused at max_processes (or with no pidfd left)
  };
  Stats stats() const;
  size_t tracked() const;
  size_t max_processes() const { return max_processes_; }

 private:
  struct PoolCounts {
    uint64_t saturated_ns = 0;
    static constexpr auto kCounters = std::tuple{&PoolCounts::saturated_ns};
  };
  struct Polled {
    PoolAddresses at;
    // Names the process for good (null on kernels without pidfds): a reading taken after it
    // exited, maybe from another process given its pid, is dropped.
    std::shared_ptr<const UniqueFd> pidfd;
    uint64_t saturated_ns = 0;
    std::optional<PoolReading> last;
    uint64_t last_ns = 0;
  };
  struct Binary {
    std::string path;
    std::string build_id;
  };
  struct Refused {
    uint64_t start_time;
    std::string binary;
  };
  struct RefusedBinary {
    std::string path;
    std::string build_id;
    Verdict verdict;
    size_t processes = 0;
  };

  // With mu_ held.
  void finish_locked(pid_t pid, uint64_t end_ns);
  void forget_refused_locked(pid_t pid);
  void refuse_locked(pid_t pid, uint64_t start_time, const std::string& key,
                     const RefusedBinary& binary);

  symbols::ProbeTargetCache& cache_;
  const ProcReader& proc_;
  const Clock& clock_;
  const size_t max_processes_;

  mutable std::mutex mu_;
  ProcessTracker<PoolCounts, std::monostate, Binary> tracker_;
  std::map<pid_t, Polled> polled_;
  std::map<pid_t, Refused> refused_;
  std::map<std::string, RefusedBinary> refused_binaries_;
  Stats stats_;
};

}  // namespace sonde::agent::threadpool
