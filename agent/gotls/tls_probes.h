// TlsProbes: the kernel half of Go TLS instrumentation (bpf/gotls.bpf.c).
//
// Loads the programs once; callers attach them per binary (through SharedUprobes) at the sites
// probe_sites.h proved: (*Conn).Write and (*Conn).Read at their entry or at the `jbe` of Go's
// stack check, and each RET of (*Conn).Read. At load it asks the kernel whether a uprobe
// program may write registers (kernels after 6.18); if so the RET program performs the `ret` itself
// and the kernel skips the single step (can_perform_ret()).
//
// Counting happens in the kernel, per process (tgid), from the process's first call: there is
// no event stream to drain and nothing to lose between polls. User space reads the counts of a
// process (counts()) and takes them when it exits (take()), which also frees every map entry
// of that process. Failed inserts into a full map are counted per map (full()).
//
// Owns the skeleton; destroying it detaches everything. Not thread-safe (TlsMonitor serializes
// calls).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/kernel/bpf_helpers.h"
#include "common/result.h"
#include "gotls.h"

struct gotls_bpf;

namespace sonde::agent {

class TlsProbes {
 public:
  enum class Program {
    kWriteEnter,    // first instruction of (*Conn).Write
    kWriteChecked,  // the stack check's `jbe` in (*Conn).Write
    kReadEnter,
    kReadChecked,
    kReadReturn,     // a RET of (*Conn).Read, single-stepped by the kernel
    kReadReturnRet,  // a one-byte `ret` of (*Conn).Read, performed by the program
  };

  static Result<std::unique_ptr<TlsProbes>> load();
  ~TlsProbes();

  // Whether kReadReturnRet loaded (the kernel lets uprobe programs write registers).
  bool can_perform_ret() const { return can_perform_ret_; }

  // Attaches `program` at `file_offset` of the file at `path` for every process running it.
  Result<std::unique_ptr<Attachment>> attach(Program program, const std::string& path,
                                             uint64_t file_offset);

  // With the filter on, a process starts being counted only if its cgroup (v2 id) is allowed.
  // Off by default: every process of an instrumented binary is counted.
  void filter_by_cgroup(bool on);
  Status allow_cgroup(uint64_t cgroup_id);
  void disallow_cgroup(uint64_t cgroup_id);

  struct Counts {
    sonde_tls_bytes bytes{};
    std::vector<std::pair<sonde_tls_request_key, sonde_tls_request_stats>> requests;
  };
  // The counts of every process the kernel counts now, by tgid.
  std::map<uint32_t, Counts> counts() const;
  // Whether the kernel counts tgid (one map lookup).
  bool counting(uint32_t tgid) const;
  // Returns tgid's counts and deletes every entry of tgid from every map.
  Counts take(uint32_t tgid);

  // Failed inserts into a full map (enum sonde_gotls_counter), summed over CPUs.
  uint64_t full(sonde_gotls_counter counter) const;

 private:
  TlsProbes() = default;

  std::unique_ptr<gotls_bpf, void (*)(gotls_bpf*)> skel_{nullptr, nullptr};
  bool can_perform_ret_ = false;
};

// The name of a sonde_gotls_counter, for metrics ("processes", "requests", ...).
const char* gotls_counter_map_name(sonde_gotls_counter counter);

}  // namespace sonde::agent
