// TlsMonitor: finds Go programs that use crypto/tls, instruments them, and aggregates their
// HTTP exchanges and TLS bytes per container.
//
// A binary is a candidate when its symbol table has crypto/tls.(*Conn).Write or .Read. It is
// instrumentable when both are present, Read has return sites, and its Go version (from
// .go.buildinfo) uses the register ABI on this architecture; otherwise the binary gets one
// verdict with a reason ("stripped: no .symtab", "Go 1.16 passes arguments on the stack", ...)
// that is logged once, exported as a metric, and never recomputed for that binary.
//
// Uprobes are shared per real file through SharedUprobes (write entry, read entry, one per
// RET of Read). Per-process byte counters fold into container totals at exit, so counters
// never go backwards.
//
// Thread-safety: all methods may be called concurrently (one mutex).
#pragma once

#include <sys/types.h>

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/attach/shared_uprobes.h"
#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/gotls/tls_probes.h"
#include "agent/nodejs/event_loop_monitor.h"
#include "agent/symbols/probe_target_cache.h"

namespace sonde::agent {

// Upper bounds (seconds) of the request duration histogram.
inline constexpr std::array<double, 12> kTlsDurationBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

class TlsMonitor {
 public:
  TlsMonitor(TlsProbes& probes, symbols::ProbeTargetCache& cache, SharedUprobes& uprobes,
             const ProcReader& proc);

  // The symbols consider() looks up (see EventLoopMonitor::symbol_names()).
  static const std::vector<std::string>& symbol_names();

  enum class Outcome { kTracked, kNotTlsUser, kNotInstrumentable, kGone, kFailed };
  Outcome consider(const Candidate& candidate, const ContainerLabels& labels);
  void exited(pid_t pid);
  void sweep();

  // An exchange reported by the kernel (called from TlsProbes::poll).
  void on_event(const sonde_tls_event& e);

  struct RequestKey {
    std::string direction, method, status_class;
    auto operator<=>(const RequestKey&) const = default;
  };
  struct Histogram {
    std::array<uint64_t, kTlsDurationBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct ContainerStats {
    std::map<RequestKey, uint64_t> requests;
    std::map<std::string, Histogram> durations;         // by direction
    std::map<std::string, uint64_t> http2_connections;  // by direction
    uint64_t read_bytes = 0, written_bytes = 0;
    size_t processes = 0;
  };
  // Per container, live byte counters included.
  std::map<ContainerLabels, ContainerStats> snapshot();

  struct BinaryVerdict {
    std::string path;
    bool instrumentable = false;
    bool reported = true;  // false for Go binaries that simply do not use crypto/tls
    std::string reason;    // why not, or the Go version when instrumentable
  };
  std::vector<BinaryVerdict> verdicts() const;
  size_t tracked() const;

 private:
  struct Process {
    uint64_t start_time;
    ContainerLabels labels;
  };
  struct Container {
    ContainerStats stats;  // bytes here are those of exited processes
  };

  // The verdict for binary, computed once per identity.
  BinaryVerdict verdict_for(const symbols::OpenBinary& binary, const std::string& exe,
                            std::vector<symbols::ProbeTarget>& targets);
  // With mu_ held: keeps v for the binary `key`, forgetting an old verdict past kMaxVerdicts.
  void remember_locked(const std::string& key, const BinaryVerdict& v);
  void finish_locked(pid_t pid);

  TlsProbes& probes_;
  symbols::ProbeTargetCache& cache_;
  SharedUprobes& uprobes_;
  const ProcReader& proc_;

  mutable std::mutex mu_;
  std::map<pid_t, Process> processes_;
  std::map<ContainerLabels, Container> containers_;
  std::unordered_map<std::string, BinaryVerdict> verdicts_;  // by BinaryIdentity::to_string()
};

}  // namespace sonde::agent
