// UprobeBudget: what instrumenting Go TLS binaries may cost on this node, and who holds what of
// it. Two kinds of bound, held against a process before its binary is attached for it:
//   - the node's (TlsMonitorBudget): at most `max_binaries` binaries hold uprobes at once,
//     instrumented or kept after their last exit (SharedUprobes' linger: its idle binaries), and
//     the links of a binary not attached yet must leave kFdReserve descriptors under the soft
//     RLIMIT_NOFILE, counting those set aside for attaches in flight;
//   - each policy's limits.maxUprobesPerNode: a policy's uprobes are the sites of the binaries
//     its tracked processes run, each binary counted once however many of them run it (uprobes
//     are per file).
// use() takes a process's share of both or of neither, and says which bound refused; the node's
// refusals are counted by reason (not_instrumented()). Binaries kept after their last exit give
// way to a new one (SharedUprobes::evict_oldest_idle(), which waits for detaches): room_for()
// says when, note_eviction() counts them; the caller evicts, outside its lock.
//
// Thread-safety: none; TlsMonitor uses it under its mutex (SharedUprobes::idle_binaries() takes
// that class's own lock, which never waits for TlsMonitor's). max_binaries() never changes.
// Cost: use() reads /proc/self/fd (Descriptors::open()) when a binary not attached yet would
// take a slot; the rest is map work in the binaries and policies held.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "agent/attach/shared_uprobes.h"
#include "agent/runtime/fd_budget.h"

namespace sonde::agent {

// Go TLS binaries instrumented at once on a node, unless --max-go-tls-binaries says otherwise.
// A node's pods (kubelet's default maxPods is 110) rarely run more distinct Go TLS binaries than
// that; more is usually a tenant's churn of fresh builds, each costing attach and detach work
// and descriptors: with uprobe_multi links 3 per binary, with single links 2 per site (a Go
// binary has ~9 sites), so 128 binaries stay near 2,300 descriptors even then.
inline constexpr size_t kDefaultMaxGoTlsBinaries = 128;

// How long a Go TLS binary keeps its uprobes after its last process exits, unless
// --go-tls-keep-probes-seconds says otherwise: long enough for a CronJob, a CI step or a CLI
// tool run again minutes later to be counted from its first call. A kept binary holds its
// descriptors and a slot of the binary bound, and gives them up first when a new binary needs
// them; its probes cost nothing else, since no process runs the file.
inline constexpr uint64_t kDefaultGoTlsKeepProbesSeconds = 600;

// Node-wide bounds on what instrumenting Go TLS costs the agent. `fds`: null, no descriptor check.
struct TlsMonitorBudget {
  size_t max_binaries = kDefaultMaxGoTlsBinaries;
  const Descriptors* fds = nullptr;
};

class UprobeBudget {
 public:
  // Policy → its limits.maxUprobesPerNode (GoTlsParams::uprobe_limits).
  using Limits = std::map<std::string, int64_t>;
  struct Refusal {
    enum class Bound { kNode, kPolicy };
    Bound bound;
    std::string why;  // what was refused, and what would allow it
  };

  // `uprobes`: whose idle binaries hold slots too; it must outlive this.
  UprobeBudget(TlsMonitorBudget budget, const SharedUprobes& uprobes);

  // Makes pid a user of the binary `key` (`sites` uprobes, `exe` for the messages) within the
  // node's bounds and each policy's of `limits`, or says which one it would break (and records
  // nothing). `attached`: the binary holds its uprobes already (another process of it, or kept
  // after its last exit), so it takes no slot and `fds` is 0; otherwise its links need `fds`
  // descriptors, set aside until attach_done(fds).
  std::optional<Refusal> use(pid_t pid, const std::string& key, size_t sites, size_t fds,
                             bool attached, const Limits& limits, const std::string& exe);
  // The attach use() set `fds` descriptors aside for is over (their links are open, or failed).
  void attach_done(size_t fds);
  // pid no longer uses the binary `key`, nor counts against any policy.
  void unuse(pid_t pid, const std::string& key);

  // Whether one more binary needing `fds` descriptors fits the node's bounds now.
  bool room_for(size_t fds) const { return !over_node(fds, {}); }
  // A binary kept after its last exit was detached to make room for another.
  void note_eviction() { evicted_++; }

  // Binaries instrumented now (and being attached); with SharedUprobes' idle binaries, held
  // against max_binaries().
  size_t instrumented_binaries() const { return instrumented_.size(); }
  size_t max_binaries() const { return node_.max_binaries; }
  uint64_t evicted_binaries() const { return evicted_; }
  // Processes the node's bounds left out, by reason: "binary_limit", "fd_reserve".
  const std::map<std::string, uint64_t>& not_instrumented() const { return not_instrumented_; }
  // Per policy with a limit whose tracked processes run instrumented binaries: the uprobes they
  // use now.
  std::map<std::string, size_t> policy_uprobes() const;

 private:
  struct NodeRefusal {
    const char* reason;  // not_instrumented()'s
    std::string why;
  };
  // Why one more binary needing `fds` descriptors does not fit the node now, if it does not.
  std::optional<NodeRefusal> over_node(size_t fds, const std::string& exe) const;
  // Why a binary new to one of `limits`' policies would take it past its limit, if one would.
  std::optional<std::string> over_policy(const std::string& key, size_t sites, const Limits& limits,
                                         const std::string& exe) const;

  const TlsMonitorBudget node_;
  const SharedUprobes& uprobes_;
  // Instrumented binaries (and those being attached) → their processes; none empty.
  std::map<std::string, std::set<pid_t>> instrumented_;
  size_t attaching_fds_ = 0;  // set aside for attaches in flight
  std::map<std::string, uint64_t> not_instrumented_;
  uint64_t evicted_ = 0;
  struct PolicyBinary {
    size_t sites = 0;
    std::set<pid_t> pids;  // the policy's tracked processes running it
  };
  struct PolicyUse {
    size_t in_use = 0;                             // sites of `binaries`
    std::map<std::string, PolicyBinary> binaries;  // by BinaryIdentity::to_string()
  };
  std::map<std::string, PolicyUse> policy_use_;  // by policy (Limits' keys); none empty
};

}  // namespace sonde::agent
