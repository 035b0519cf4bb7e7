// LiveKernelSymbols: KernelSymbols kept current by the kernel itself. Every BPF symbol that is
// registered or unregistered arrives as a PERF_RECORD_KSYMBOL (PerfKsymbolEvents); poll()
// applies them to the overlay. When the kernel had to drop records (a ring buffer was full, the
// perf lost count grew), poll() re-reads /proc/kallsyms exactly once for that — on kernels
// before 6.0 at the first poll after the next record on that CPU (see PerfKsymbolEvents).
//
// Owns its perf events: destroying it closes them, and a failed start() leaves nothing open.
// Not thread-safe: one thread polls and looks up.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "agent/symbolize/kernel_symbols.h"
#include "agent/symbolize/perf_ksymbol_events.h"
#include "common/result.h"

namespace sonde::symbolize {

struct LiveKernelSymbolsOptions {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  // Per-CPU ring buffer pages (power of two). Tests use 1 to force drops.
  size_t ring_pages = 16;
  // How drops are detected; tests force the pre-6.0 way (LOST records) on new kernels.
  PerfKsymbolEvents::LostAccounting lost_accounting = PerfKsymbolEvents::LostAccounting::kAuto;
};

class LiveKernelSymbols {
 public:
  // Opens the events first and reads kallsyms after, so no change between the two is missed (a
  // change seen twice is harmless: add and remove are idempotent). Errors name the failed step.
  static Result<std::unique_ptr<LiveKernelSymbols>> start(
      const LiveKernelSymbolsOptions& options = {});

  // Waits up to timeout_ms, applies every pending change, and re-reads kallsyms once if records
  // were dropped since the last poll. Returns the number of changes applied.
  Result<int> poll(int timeout_ms);

  // Readable when changes are pending, to wait on it together with other fds.
  int fd() const { return events_->fd(); }

  std::optional<KernelSymbol> lookup(uint64_t address) const { return symbols_->lookup(address); }
  // Full reads of kallsyms so far: 1 after start(), +1 per poll that found new drops.
  uint64_t full_reads() const { return symbols_->full_reads(); }
  // Records the kernel dropped, as of the last poll.
  uint64_t lost_events() const { return lost_seen_; }

 private:
  LiveKernelSymbols() = default;

  std::unique_ptr<PerfKsymbolEvents> events_;
  std::optional<KernelSymbols> symbols_;
  uint64_t lost_seen_ = 0;
};

}  // namespace sonde::symbolize
