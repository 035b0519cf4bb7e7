// TlsProbes: the kernel half of Go TLS instrumentation (bpf/gotls.bpf.c).
//
// Loads the programs once; callers attach them per binary (through SharedUprobes) at the
// offsets the symbol engine found: (*Conn).Write entry, (*Conn).Read entry, and each RET of
// (*Conn).Read. Finished exchanges arrive through poll(); byte counts are read per process.
// Owns the skeleton; destroying it detaches everything. Not thread-safe except bytes(), which
// is a map lookup and may run on the metrics thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "common/result.h"
#include "gotls.h"

struct gotls_bpf;

namespace sonde::agent {

class TlsProbes {
 public:
  enum class Program { kWriteEnter, kReadEnter, kReadReturn };
  using EventFn = std::function<void(const sonde_tls_event&)>;

  static Result<std::unique_ptr<TlsProbes>> load(EventFn on_event);
  ~TlsProbes();

  // Attaches `program` at `file_offset` of the file at `path` for every process running it.
  Result<std::unique_ptr<Attachment>> attach(Program program, const std::string& path,
                                             uint64_t file_offset);

  Status track(pid_t pid);
  // Stops counting pid; returns its final byte counts.
  sonde_tls_bytes untrack(pid_t pid);
  sonde_tls_bytes bytes(pid_t pid) const;

  Result<int> poll(int timeout_ms);
  uint64_t dropped() const;

 private:
  explicit TlsProbes(EventFn on_event) : on_event_(std::move(on_event)) {}
  void on_record(std::span<const uint8_t> record);

  EventFn on_event_;
  std::unique_ptr<gotls_bpf, void (*)(gotls_bpf*)> skel_{nullptr, nullptr};
  std::unique_ptr<RingBufferReader> ring_;  // after skel_: freed before the map it reads
};

}  // namespace sonde::agent
