// TlsMonitor: finds Go programs that use crypto/tls, instruments them, and aggregates their
// HTTP exchanges and TLS bytes per container.
//
// Each binary gets one verdict and its probe sites (go_tls_plan.h: candidate, instrumentable, or
// why not, e.g. "Go 1.16 passes arguments on the stack"), computed once per binary identity,
// logged once, exported as a metric, and never recomputed for that binary (go_tls_verdicts.h).
//
// Uprobes are shared per real file through SharedUprobes: per program (write entry, read entry,
// the RETs of Read) one attachment with all its sites in the file, taken all or none.
//
// A binary keeps its uprobes after its last process exits, for SharedUprobes' linger (the
// agent's --go-tls-keep-probes-seconds), so a program that runs again (a CLI tool, a CronJob) is
// counted from its first call instead of racing a new attach; sweep() lets the linger expire.
//
// Node-wide bounds (Budget, uprobe_budget.h), checked when a process of a binary not attached yet
// would be: at most `max_binaries` binaries hold uprobes at once (instrumented or kept after their
// last exit), and the binary's links must leave kFdReserve descriptors under the soft
// RLIMIT_NOFILE. Binaries kept after their last exit give way first, the one idle the longest
// first (SharedUprobes::evict_oldest_idle(): a grace period per link on the caller's thread). Past
// either bound, the process is not instrumented (kOverLimit, `why` says which; the binary's
// verdict says LimitExceeded until a process of it is instrumented; logged once per binary then;
// counted in not_instrumented()). The kernel counts every process of an instrumented file from
// its first call, per tgid (TlsProbes); a process's counts (tls_counts.h) are attributed to its
// container once consider() tracks it, and follow ProcessTracker's rules from then on
// (agent/runtime/process_tracker.h). A selected process (admit(), tls_admissions.h) that exits
// before consider() gets to it, as a short-lived program does, is attributed to the container it
// was selected with. Counts of other processes never tracked are discarded (exited(), sweep()).
//
// The uprobes are per file, so without a filter every process of an instrumented file is
// counted, selected or not: another pod of the same image fills the kernel maps and is parsed
// in the kernel, then discarded here. With filter_by_cgroup() (cluster mode, where containers
// are what is selected) the kernel counts only processes of admitted cgroups: an unselected
// process then costs its uprobe hits and one map lookup per call, and holds no map entry.
//
// Thread-safety: all methods may be called concurrently. One mutex guards the process tracker and
// the parts above (GoTlsVerdicts, UprobeBudget, TlsAdmissions), none of which is thread-safe on
// its own. SharedUprobes, ProbeTargetCache and AttachDelays have locks of their own, taken under
// it or without it, and never call back into TlsMonitor; planning a binary, attaching and
// evicting happen without it.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/gotls/attach_delay.h"
#include "agent/gotls/go_tls_plan.h"
#include "agent/gotls/go_tls_verdicts.h"
#include "agent/gotls/tls_admissions.h"
#include "agent/gotls/tls_counts.h"
#include "agent/gotls/tls_probes.h"
#include "agent/gotls/uprobe_budget.h"
#include "agent/runtime/container_totals.h"
#include "agent/runtime/process_tracker.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/clock.h"

namespace sonde::agent {

// The verdict of a binary whose uprobes the kernel refused for lack of privilege: since Linux 6.16
// and the 2025 stable updates of older series (upstream ba677dbe77af) creating a uprobe needs
// CAP_SYS_ADMIN, CAP_PERFMON no longer suffices.
inline constexpr std::string_view kUprobesRefused =
    "uprobes refused: this kernel requires CAP_SYS_ADMIN to create them (chart: agent.uprobes)";

class TlsMonitor {
 public:
  // `grace_ns`: how long a container's series outlive its last process. `probes` and `clock`
  // are the kernel's counters and CLOCK_MONOTONIC in the agent, fakes in unit tests.
  using Budget = TlsMonitorBudget;
  TlsMonitor(TlsCounters& probes, symbols::ProbeTargetCache& cache, SharedUprobes& uprobes,
             const ProcReader& proc, uint64_t grace_ns = kDefaultSeriesGraceNs,
             const Clock& clock = real_clock(), Budget budget = {});
  static constexpr uint64_t kDefaultSeriesGraceNs = 300'000'000'000;

  // The symbols consider() looks up (see EventLoopMonitor::symbol_names()).
  static const std::vector<std::string>& symbol_names();

  // Policy → its limits.maxUprobesPerNode (GoTlsParams::uprobe_limits).
  using UprobeLimits = UprobeBudget::Limits;
  enum class Outcome { kTracked, kNotTlsUser, kNotInstrumentable, kGone, kFailed, kOverLimit };
  // kOverLimit: the node's Budget leaves the binary out, or a binary new to one of `limits`'
  // policies would take its uprobes past the limit, so the process is not instrumented (`why`
  // says which). A policy's uprobes are the
  // sites of the binaries its tracked processes run, each binary counted once however many of
  // them run it (uprobes are per file). Checked when a process is instrumented.
  Outcome consider(const Candidate& candidate, const ContainerLabels& labels,
                   const UprobeLimits& limits = {}, std::string* why = nullptr);
  // The process exited or is no longer selected: its counts fold into its container (if
  // tracked) or are discarded, and its probes are released.
  void exited(pid_t pid);
  // Stops instrumenting the container `labels` (it went over its overhead budget): each of its
  // tracked processes is finished as if it had exited (counts folded, no longer admitted, so
  // the cgroup filter stops counting it) and its uprobes released without the linger: a binary
  // no other tracked process runs is detached at once. A binary others run keeps its probes,
  // which go on costing this container its hits, uncounted (the kernel counts it no more with
  // the cgroup filter; without it, its counts are discarded). Returns the pids stopped.
  std::vector<pid_t> stop_container(const ContainerLabels& labels);
  // Per container with tracked processes, one of them (the lowest pid): whose cgroup to read.
  std::map<ContainerLabels, pid_t> a_process_per_container() const;
  // Finishes tracked processes that vanished; discards the kernel's counts of processes that
  // were never tracked for two sweeps in a row (unselected, or exited unseen).
  void sweep();

  // From now on the kernel counts only processes of admitted cgroups (cgroup v2). Call it
  // before any process is considered.
  void filter_by_cgroup();
  // `process` is selected for Go TLS, its series labelled `labels`: called when it is selected,
  // before consider() (on another thread, maybe much later), so that its counts reach its
  // container even when it exits before consider() sees it. Held until exited(), a sweep that
  // finds it gone, or a consider() that does not track it (one entry per selected live process).
  // With the filter on, its cgroup (named by the kernel, TlsCounters::cgroup_of) is also counted
  // while the process lives, so that the container's processes are counted from their first
  // call. A cgroup the kernel cannot name (a kernel without per-process task iterators), or a
  // full cgroup map, turns the filter off for good, with a warning: every process of an
  // instrumented file is counted again (and unselected ones discarded here), rather than a
  // selected process silently never counted.
  void admit(const ProcessInfo& process, const ContainerLabels& labels);
  bool filtering_by_cgroup() const;

  // What is counted per container and per process (tls_counts.h).
  using RequestKey = TlsRequestKey;
  using DurationKey = TlsDurationKey;
  using Histogram = TlsHistogram;
  using Counters = TlsCounts;
  struct ContainerStats : Counters {
    size_t processes = 0;  // live processes
  };
  // Per container, live processes' kernel counts included.
  std::map<ContainerLabels, ContainerStats> snapshot();

  using BinaryVerdict = GoTlsVerdict;
  std::vector<BinaryVerdict> verdicts() const;
  size_t tracked() const;

  // Map inserts that failed, by map name ("processes", "requests", "reads", "exchanges",
  // "carried", ...) and reason ("map_full": the map was full or a bound was hit;
  // "process_share": the process held its share of the map); nothing is evicted silently.
  using MapAndReason = std::pair<std::string, std::string>;
  std::map<MapAndReason, uint64_t> kernel_map_full() const;
  // Kernel counts discarded because their process was never tracked.
  uint64_t discarded_processes() const;
  // Selected processes that exited before consider() saw them, counted for their container.
  uint64_t exited_unseen() const;
  // Binaries whose kept uprobes were detached early to make room for another.
  uint64_t evicted_binaries() const;
  // Per policy with a limit whose tracked processes run instrumented binaries: the uprobes
  // they use now (what limits.maxUprobesPerNode is held against).
  std::map<std::string, size_t> policy_uprobes() const;
  // Binaries instrumented now; with idle_binaries(), held against Budget::max_binaries.
  size_t instrumented_binaries() const;
  // Binaries whose uprobes are kept after their last process exited.
  size_t idle_binaries() const { return uprobes_.idle_binaries(); }
  size_t max_binaries() const { return budget_.max_binaries(); }
  // Processes the node's Budget left out, by reason: "binary_limit", "fd_reserve".
  std::map<std::string, uint64_t> not_instrumented() const;
  // Exec → probes attached, for processes whose binary was attached for them (attach_delay.h).
  AttachDelays::Snapshot attach_delays() const { return attach_delays_.snapshot(); }

 private:
  using Binary = GoTlsPlan;  // the verdict and probe sites of one binary

  // The verdict and probe sites for binary, computed once per identity.
  Binary binary_for(const symbols::OpenBinary& binary, const std::string& exe,
                    const std::vector<symbols::ProbeTarget>& targets);
  // `linger`: the binary keeps its probes after its last process (SharedUprobes' linger).
  void finish_locked(pid_t pid, bool linger = true);
  // Evicts binaries kept after their last exit, oldest first, until one more binary needing
  // `fds` descriptors fits or none is left. Without mu_ held (an eviction waits for detaches).
  void make_room(size_t fds);
  // With mu_ held: the kernel's counts of pid, which exited untracked, go to the container it
  // was selected with, or are discarded.
  void take_untracked_locked(pid_t pid);

  TlsCounters& probes_;
  symbols::ProbeTargetCache& cache_;
  SharedUprobes& uprobes_;
  const ProcReader& proc_;
  const Clock& clock_;

  mutable std::mutex mu_;
  ProcessTracker<Counters> tracker_;   // binaries by BinaryIdentity::to_string()
  GoTlsVerdicts verdicts_;             // by BinaryIdentity::to_string()
  std::set<uint32_t> untracked_seen_;  // counted by the kernel, untracked at the last sweep
  uint64_t discarded_ = 0;
  uint64_t exited_unseen_ = 0;
  static constexpr uint64_t kFullSweepEvery = 6;
  uint64_t sweeps_ = 0;
  UprobeBudget budget_;
  TlsAdmissions admissions_;
  AttachDelays attach_delays_;  // its own lock
};

}  // namespace sonde::agent
