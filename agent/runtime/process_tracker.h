// ProcessTracker: the processes a feature's monitor instruments, and the per-container counters
// built from them. The skeleton every monitor shares (Go TLS, Node.js event loop); what a feature
// reads from the kernel, how it attaches and what it bounds stay in its monitor.
//
// The rules, for every feature's counters:
//   - A process is tracked by pid together with the start time it was seen with (/proc/<pid>/stat
//     field 22), so a reused pid or a new exec is a new process, never the old one continued.
//   - Its counters carry its container's labels from start() until finish(). When it ends (exit
//     event, exec, a sweep finding it gone, the feature giving up on it) its final counts fold
//     into its container (ContainerTotalsOf): pid reuse, exec and restarts inside a container only
//     ever add; a container's reported value never goes below its previous report (a lost kernel
//     entry, or a process finished twice, never lowers a counter); a container's series are
//     forgotten `grace` after its last process ended.
//   - report(): a container's value is its finished processes' plus its live processes' counts
//     now, as the feature reads them.
//   - vanished(): the tracked processes that are gone without an exit event (a lost ring-buffer
//     record): exited, or their pid names another process now. The feature finishes them.
//   - Per binary (the key its feature gives, BinaryIdentity::to_string()), the tracker counts the
//     live processes running it and keeps the feature's BinaryData while one does; the binary is
//     forgotten with its last process.
//
// Counts is a number or a counter set (counter_set.h): `a += b`, `raise_to(a, floor)`.
// ProcessData and BinaryData are what the feature keeps per process and per binary.
//
// Not thread-safe: the monitor calls it under its own lock. Cost: one map entry per tracked
// process, per binary with a live process and per container with series; report() calls the
// feature's reader once per tracked process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/discovery/proc_reader.h"
#include "agent/runtime/container_totals.h"

namespace sonde::agent {

template <typename Counts, typename ProcessData = std::monostate,
          typename BinaryData = std::monostate>
class ProcessTracker {
 public:
  struct Process {
    uint64_t start_time;  // as seen in /proc when it was started
    ContainerLabels labels;
    std::string binary;  // the key of its binary
    ProcessData data{};
  };
  struct Binary {
    BinaryData data;
    size_t processes = 0;  // live, tracked processes running it; never 0 in binaries()
  };
  using Total = typename ContainerTotalsOf<Counts>::Total;

  // `grace_ns`: how long a container's series outlive its last process.
  explicit ProcessTracker(uint64_t grace_ns) : containers_(grace_ns) {}

  // pid's record, or null when it is not tracked.
  const Process* find(pid_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
  }

  // Tracks `process` under pid. `binary_data` is kept for its binary when no live process runs
  // that binary yet; then start() returns true (a binary new to the tracker). A pid must be
  // finished before it is started again; one still tracked is replaced, its old process folded
  // into its container with no counts.
  bool start(pid_t pid, Process process, BinaryData binary_data = {}) {
    if (processes_.contains(pid)) finish(pid, 0, [](const Process&) { return Counts{}; });
    containers_.started(process.labels);
    auto [b, inserted] = binaries_.try_emplace(process.binary, Binary{std::move(binary_data), 0});
    b->second.processes++;
    processes_.insert_or_assign(pid, std::move(process));
    return inserted;
  }

  // Stops tracking pid: its final counts, `final_counts(const Process&)` (called only when pid is
  // tracked), fold into its container at now_ns (CLOCK_MONOTONIC). Returns its record, for the
  // feature to release what it holds for it; nullopt (and nothing done) when pid is not tracked.
  template <typename Final>
  std::optional<Process> finish(pid_t pid, uint64_t now_ns, Final&& final_counts) {
    auto it = processes_.find(pid);
    if (it == processes_.end()) return std::nullopt;
    const Counts final_value = final_counts(std::as_const(it->second));
    containers_.finished(it->second.labels, final_value, now_ns);
    auto b = binaries_.find(it->second.binary);
    if (b != binaries_.end() && --b->second.processes == 0) binaries_.erase(b);
    Process out = std::move(it->second);
    processes_.erase(it);
    return out;
  }

  // A process of `labels` that ended untracked (it exited before its monitor saw it) and whose
  // counts belong to that container: folded like a finished process's.
  void fold_untracked(const ContainerLabels& labels, const Counts& counts, uint64_t now_ns) {
    containers_.started(labels);
    containers_.finished(labels, counts, now_ns);
  }

  // The tracked processes that are gone (see the rules above); one /proc read per process.
  std::vector<pid_t> vanished(const ProcReader& proc) const {
    return vanished_pids(proc, processes_);
  }

  // Every container's total at now_ns (see the rules above). `live(pid, Process&)` gives the
  // counts of a tracked process now; it may update the process's data (a floor, a lost flag).
  template <typename Live>
  std::vector<Total> report(uint64_t now_ns, Live&& live) {
    std::map<ContainerLabels, Counts> sums;
    for (auto& [pid, p] : processes_) sums[p.labels] += live(pid, p);
    return containers_.report(sums, now_ns);
  }

  const std::map<pid_t, Process>& processes() const { return processes_; }
  size_t size() const { return processes_.size(); }

  // By key; only binaries with a live tracked process.
  const std::map<std::string, Binary>& binaries() const { return binaries_; }
  const BinaryData* binary(const std::string& key) const {
    auto it = binaries_.find(key);
    return it == binaries_.end() ? nullptr : &it->second.data;
  }

 private:
  std::map<pid_t, Process> processes_;
  std::map<std::string, Binary> binaries_;
  ContainerTotalsOf<Counts> containers_;
};

}  // namespace sonde::agent
