// TlsProbes: the kernel half of Go TLS instrumentation (bpf/gotls/gotls.bpf.c).
//
// Loads the programs once; callers attach them per binary (through SharedUprobes) at the sites
// probe_sites.h proved: (*Conn).Write and (*Conn).Read at their entry or at the `jbe` of Go's
// stack check, and each RET of (*Conn).Read.
//
// Performing a RET in BPF (the program pops the return address into the instruction pointer and
// the kernel skips the single step) changes what the workload executes. It is off unless the
// agent is told to use it (load(true), the --go-tls-perform-ret flag) and the kernel lets uprobe
// programs write registers (kernels after 6.18, asked at load): can_perform_ret(). It has never
// run on a kernel the agent was tested on (tests/tls_probes_bpf_test.cpp runs it where allowed).
//
// HTTP/1.x is counted in the kernel, per process (tgid), from the process's first call: nothing
// to drain and nothing to lose between polls. HTTP/2 frames come through the ring buffer
// `h2_events` (gotls.h), which drain() empties into an Http2Tracker (http2_tracker.h); the
// kernel does not wake anyone per record, only once SONDE_GOTLS_H2_WAKEUP_BYTES wait, so
// something must call drain() every kDrainPeriodMs and as soon as wait_for_records() returns
// (GoTlsFeature's thread) — below the level the buffer holds seconds of frames at the rates
// measured (bench/RESULTS.md), past it a flood is drained as it comes. counts() and take() drain
// first, so a process's last streams are in its final counts. User space reads the counts of a
// process (counts(), HTTP/1.x and HTTP/2 merged) and takes them when it exits (take()), which also
// frees every map entry and tracked connection of that process. A request still waiting for its
// response then (HTTP/1.x: its exchange entry; HTTP/2: an open stream) is counted as ended at
// take() (the exit, or the agent no longer counting a live process), status_class "unknown" unless
// a final status came (http2_tracker.h), and a loss the kernel had not reported yet gives its
// HTTP/2 connection up as lost. Failed inserts into a full map are counted per map (full()).
//
// Each process holds at most its share (Shares, set at load) of each table it fills at its
// peers' pace (enum sonde_gotls_shared_table, gotls.h): past it, its own new connections,
// exchanges and Reads are not followed, counted in its Counts (over_share) and in full()
// (SONDE_GOTLS_SHARE_*), and nobody else's. The kernel counts what it inserts and deletes; what
// user space deletes from a live process (forget_connection()) it tells the kernel through the
// map `released`. The ring buffer is one of those tables, in bytes (SONDE_GOTLS_SHARED_H2_EVENTS):
// drain() gives each process back the bytes of its records it read.
//
// State is freed when its connection ends (a failed Read), when its process is taken, and, for
// the HTTP/1.x state that must not outlive a request (an exchange waiting for its response, a
// one-byte Read's byte waiting for the next Read), when it is older than kIdleStateAgeNs
// (forget_idle(), every kIdleSweepPeriodNs): a raw tls.Conn closed with no Read pending, or a
// handler that never answers, gives its entries back within minutes rather than at its
// process's exit. An exchange freed so is counted as a request ended then, status unknown.
// Reads pending and HTTP/2 framing states are not aged: an idle keep-alive connection or gRPC
// channel holds them legitimately for hours (a goroutine's next Read replaces its entry; the
// tracker evicts connections past its bounds).
//
// Owns the skeleton, the ring buffer (2 descriptors for the agent, not per binary) and the
// tracker; destroying it detaches everything. drain() and forget_idle() may run on any thread
// concurrently with the rest; everything else is not thread-safe (TlsMonitor serializes calls).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/gotls/http2_tracker.h"
#include "agent/kernel/bpf_helpers.h"
#include "agent/kernel/process_cgroups.h"
#include "agent/kernel/uprobe_links.h"
#include "bpf/gotls/gotls.h"
#include "common/result.h"

struct gotls_bpf;
struct ring_buffer;

namespace sonde::agent {

// What TlsMonitor needs of the kernel half: TlsProbes in the agent, a fake in unit tests.
class TlsCounters {
 public:
  enum class Program {
    kWriteEnter,    // first instruction of (*Conn).Write
    kWriteChecked,  // the stack check's `jbe` in (*Conn).Write
    kReadEnter,
    kReadChecked,
    kReadReturn,     // a RET of (*Conn).Read, single-stepped by the kernel
    kReadReturnRet,  // a one-byte `ret` of (*Conn).Read, performed by the program
  };
  struct Counts {
    // Bytes and probe hits; in counts(), held[] net of what user space released (`released`),
    // the entries (or ring-buffer bytes) the process holds now.
    sonde_tls_process process{};
    std::vector<std::pair<sonde_tls_request_key, sonde_tls_request_stats>> requests;
  };
  virtual ~TlsCounters() = default;

  // Whether kReadReturnRet loaded (asked for, and the kernel lets uprobe programs write
  // registers).
  virtual bool can_perform_ret() const = 0;
  // Attaches `program` at every site of the file at `path` for every process running it, all
  // or none (attach_uprobes()). kReadReturnRet takes each `ret`'s address at run time as its
  // site's cookie (its guard); the others ignore the cookie.
  virtual Result<std::unique_ptr<Attachment>> attach(Program program, const std::string& path,
                                                     std::span<const UprobeSite> sites) = 0;
  // The most descriptors one attach() of `sites` sites holds.
  virtual size_t link_fds(size_t sites) const = 0;
  // With the filter on, a process starts being counted only if its cgroup (v2 id) is allowed.
  // Off by default: every process of an instrumented binary is counted.
  virtual void filter_by_cgroup(bool on) = 0;
  virtual Status allow_cgroup(uint64_t cgroup_id) = 0;
  virtual void disallow_cgroup(uint64_t cgroup_id) = 0;
  // The cgroup (v2 id) the filter sees for process `pid` (the agent's pid namespace), which
  // started at `start_time` (clock ticks since boot, as /proc/<pid>/stat says), read from the
  // kernel (ProcessCgroups): right in any cgroup namespace. An error is_gone() when no such
  // process exists.
  virtual Result<uint64_t> cgroup_of(pid_t pid, uint64_t start_time) const = 0;
  // The counts of every process the kernel counts now, by tgid.
  virtual std::map<uint32_t, Counts> counts() const = 0;
  // Whether the kernel counts tgid (one map lookup).
  virtual bool counting(uint32_t tgid) const = 0;
  // Returns tgid's counts, requests still open counted as ended now (see above), and deletes
  // every entry of tgid from every map.
  virtual Counts take(uint32_t tgid) = 0;
  // Failed inserts into a full map (enum sonde_gotls_counter), summed over CPUs.
  virtual uint64_t full(sonde_gotls_counter counter) const = 0;
};

class TlsProbes final : public TlsCounters {
 public:
  // `perform_ret`: load kReadReturnRet if the kernel allows it (opt-in, see above). `links`: how
  // the programs attach (tests force kSingle to compare; kMulti needs a kernel that has it).
  // `http2`: follow HTTP/2 framing (the programs need bpf_loop, Linux 5.17+; without it the
  // *_h1 programs load: HTTP/1.x and HTTP/2 connection counts only, http2() says so).
  // Entries of each shared table one process may hold, by enum sonde_gotls_shared_table.
  using Shares = std::array<uint32_t, SONDE_GOTLS_SHARED_COUNT>;
  // 1/SONDE_GOTLS_SHARE_DIVISOR of each table.
  static Shares default_shares();
  static Result<std::unique_ptr<TlsProbes>> load(bool perform_ret = false,
                                                 UprobeLinkKind links = uprobe_link_support().kind,
                                                 bool http2 = kernel_has_bpf_loop(),
                                                 const Shares& shares = default_shares());
  // Whether the kernel offers bpf_loop to uprobe programs (asked once).
  static bool kernel_has_bpf_loop();
  ~TlsProbes() override;

  bool can_perform_ret() const override { return can_perform_ret_; }
  // For logs: "off", "on", "refused by the kernel: <why>" or "refused at load: <why>" (then
  // the RETs are single-stepped and everything else loads).
  const std::string& register_writes() const { return register_writes_; }
  UprobeLinkKind links() const { return links_; }
  Result<std::unique_ptr<Attachment>> attach(Program program, const std::string& path,
                                             std::span<const UprobeSite> sites) override;
  size_t link_fds(size_t sites) const override { return uprobe_link_fds(links_, sites); }
  void filter_by_cgroup(bool on) override;
  Status allow_cgroup(uint64_t cgroup_id) override;
  void disallow_cgroup(uint64_t cgroup_id) override;
  Result<uint64_t> cgroup_of(pid_t pid, uint64_t start_time) const override;
  std::map<uint32_t, Counts> counts() const override;
  bool counting(uint32_t tgid) const override;
  Counts take(uint32_t tgid) override;
  uint64_t full(sonde_gotls_counter counter) const override;

  // How often the HTTP/2 ring buffer must be drained.
  static constexpr int kDrainPeriodMs = 100;
  // Hands every record in the HTTP/2 ring buffer to the tracker. Thread-safe.
  void drain() const;
  // Blocks until the kernel wakes user space (records past SONDE_GOTLS_H2_WAKEUP_BYTES, or left
  // since the last wakeup) or timeout_ms pass; true when woken. Takes no lock: drain() and the
  // rest run meanwhile. For one thread at a time.
  bool wait_for_records(int timeout_ms) const;
  const Http2Tracker& http2() const { return *tracker_; }

  // How old an exchange or a carried byte (see above) is when forget_idle() frees it: a request
  // unanswered for 10 minutes is counted as ended, status unknown, and its response, should it
  // come, is not matched. How often the agent calls forget_idle().
  static constexpr uint64_t kIdleStateAgeNs = 600'000'000'000;
  static constexpr uint64_t kIdleSweepPeriodNs = 60'000'000'000;
  // Entries freed by forget_idle() since load, by map.
  struct Forgotten {
    uint64_t exchanges = 0;
    uint64_t carried = 0;
  };
  // Frees every exchange and carried byte that began before before_ns (CLOCK_MONOTONIC), each
  // given back to its process's share; returns the totals since load. Walks each map once
  // (at most its max_entries keys). Thread-safe.
  Forgotten forget_idle(uint64_t before_ns);
  Forgotten forgotten() const {
    std::lock_guard lock(idle_mu_);
    return forgotten_;
  }
  // Whether HTTP/2 framing is followed (load()'s `http2`).
  bool follows_http2() const { return http2_; }

 private:
  TlsProbes() = default;
  // A ring-buffer record (libbpf's callback, under drain_mu_): to the tracker, its bytes counted.
  static int on_h2_record(void* self, void* data, size_t size);
  // Stops following connection `conn` of `pid` in the kernel (the tracker evicted it).
  void forget_connection(uint32_t pid, uint64_t conn) const;
  // Tells the kernel that user space deleted n entries of `table` of the live process tgid
  // (nothing when the kernel counts tgid no more).
  void release(uint32_t tgid, sonde_gotls_shared_table table, uint64_t n) const;
  static Result<std::unique_ptr<TlsProbes>> open_and_load(bool perform_ret, UprobeLinkKind links,
                                                          bool http2, const Shares& shares);

  std::unique_ptr<gotls_bpf, void (*)(gotls_bpf*)> skel_{nullptr, nullptr};
  std::unique_ptr<Http2Tracker> tracker_;
  std::unique_ptr<ring_buffer, void (*)(ring_buffer*)> ring_{nullptr, nullptr};
  mutable std::mutex drain_mu_;  // ring_buffer__consume() is single-consumer
  // Under drain_mu_: bytes of records read per process in this drain, given back to each
  // process's share of the ring buffer (SONDE_GOTLS_SHARED_H2_EVENTS) when it ends.
  mutable std::map<uint32_t, uint64_t> drained_bytes_;
  mutable std::mutex released_mu_;  // `released` is read, added to and written back
  mutable std::mutex idle_mu_;      // forget_idle() against take()
  // Under idle_mu_: requests of live processes counted by forget_idle(), one entry per key.
  std::map<uint32_t, std::vector<std::pair<sonde_tls_request_key, sonde_tls_request_stats>>>
      idle_requests_;
  Forgotten forgotten_;                      // under idle_mu_
  std::unique_ptr<ProcessCgroups> cgroups_;  // null when it could not load: cgroups_error_
  std::optional<Error> cgroups_error_;
  bool can_perform_ret_ = false;
  bool http2_ = true;
  std::string register_writes_ = "off";
  UprobeLinkKind links_ = UprobeLinkKind::kSingle;
};

// Whether this kernel's verifier accepts a uprobe (BPF_PROG_TYPE_KPROBE) program that writes the
// instruction pointer; the error quotes the verifier. x86-64 only (elsewhere an error says so).
Status kernel_allows_uprobe_register_writes();

// The name of a sonde_gotls_counter, for metrics ("processes", "requests", ...).
const char* gotls_counter_map_name(sonde_gotls_counter counter);
// Why a sonde_gotls_counter's inserts failed: "process_share" (SONDE_GOTLS_SHARE_*: the process
// held its share), else "map_full" (the map was full, or a bound was hit).
const char* gotls_counter_reason(sonde_gotls_counter counter);
// The map name of a shared table ("h2_states", "exchanges", "reads", "carried").
const char* gotls_shared_table_name(sonde_gotls_shared_table table);

}  // namespace sonde::agent
