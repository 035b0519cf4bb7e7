// EventLoopMonitor: finds Node.js processes, instruments them, and turns the kernel's per-pid
// accounting into per-container counters of event-loop blocked seconds.
//
// Detection is by symbols, not by file name: a binary is Node.js when it exports
// napi_module_register (kept in .dynsym even when stripped), so a renamed node or a
// single-executable app counts, and a non-node binary costs one parse ever (the probe-target
// cache remembers absent names per binary identity).
//
// Per binary, the best available mode is used and reported:
//   precise      uv__io_poll uprobe + libuv's default loop address: only waits of the default
//                loop are idle; nested loops (spawnSync) count as blocked
//   any-loop     uv__io_poll found, default loop symbol absent: waits of any libuv loop on
//                the main thread are idle
//   epoll-only   no libuv symbols (stripped .symtab): every epoll wait of the main thread is idle
//
// Counters never go backwards: a process's final value is folded into its container's total
// when it exits (pid reuse and restarts inside a container only add), and every reported value
// is at least the previous one.
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
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/symbols/probe_target_cache.h"

namespace sonde::agent {

// The labels of a container's series.
struct ContainerLabels {
  std::string namespace_name;
  std::string pod;
  std::string container;
  auto operator<=>(const ContainerLabels&) const = default;
};

enum class LoopMode { kPrecise, kAnyLoop, kEpollOnly };
const char* loop_mode_name(LoopMode mode);

class EventLoopMonitor {
 public:
  EventLoopMonitor(LoopProbes& probes, symbols::ProbeTargetCache& cache, SharedUprobes& uprobes,
                   const ProcReader& proc);

  // The symbols consider() looks up, so a caller can resolve every feature's names in one
  // parse of a new binary.
  static const std::vector<std::string>& symbol_names();

  enum class Outcome { kTracked, kNotNode, kGone, kFailed };
  // Considers a process: from the start-up scan (it may be mid-loop) or from its exec event.
  // A process that execs again is re-considered.
  Outcome consider(const Candidate& candidate, const ContainerLabels& labels);

  // The process exited at exit_ns (CLOCK_MONOTONIC); no-op when it was not tracked.
  void exited(pid_t pid, uint64_t exit_ns);

  // Drops processes that are gone without an exit event (a dropped ring-buffer record).
  void sweep();

  struct Sample {
    ContainerLabels labels;
    double blocked_seconds;
    size_t processes;  // live Node.js processes of the container
  };
  // Per container, including containers whose processes all exited.
  std::vector<Sample> samples();

  struct BinaryInfo {
    std::string path;  // as first seen
    LoopMode mode;
    size_t processes;
  };
  std::vector<BinaryInfo> binaries() const;
  size_t tracked() const;

 private:
  struct Process {
    uint64_t start_time;
    ContainerLabels labels;
    symbols::BinaryIdentity binary;
    uint64_t last_ns;  // last value read: a lost or evicted map entry never lowers it
  };
  struct Container {
    uint64_t finished_ns = 0;  // blocked time of exited processes
    uint64_t reported_ns = 0;  // last value reported: the floor of the next one
    size_t processes = 0;
  };
  struct Binary {
    std::string path;
    LoopMode mode;
    size_t processes = 0;
  };

  // With mu_ held: stops tracking pid, folding its value (up to end_ns) into its container.
  void finish_locked(pid_t pid, uint64_t end_ns);

  LoopProbes& probes_;
  symbols::ProbeTargetCache& cache_;
  SharedUprobes& uprobes_;
  const ProcReader& proc_;

  mutable std::mutex mu_;
  std::map<pid_t, Process> processes_;
  std::map<ContainerLabels, Container> containers_;
  std::map<std::string, Binary> binaries_;  // by BinaryIdentity::to_string()
};

}  // namespace sonde::agent
