#include "agent/symbolize/live_kernel_symbols.h"

#include <utility>

#include "common/log.h"

namespace sonde::symbolize {

Result<std::unique_ptr<LiveKernelSymbols>> LiveKernelSymbols::start(
    const LiveKernelSymbolsOptions& options) {
  std::unique_ptr<LiveKernelSymbols> self(new LiveKernelSymbols());
  auto events =
      PerfKsymbolEvents::open(options.ring_pages, options.sys_root, options.lost_accounting);
  if (!events.ok()) return events.error().wrap("kernel symbols");
  self->events_ = std::move(events).value();
  // The lost count is taken before the full read: drops after this point may be after the
  // read's snapshot and must trigger another one.
  auto lost = self->events_->lost();
  if (!lost.ok()) return lost.error().wrap("kernel symbols");
  self->lost_seen_ = *lost;
  auto symbols = KernelSymbols::load(options.proc_root);
  if (!symbols.ok()) return symbols.error().wrap("kernel symbols");
  self->symbols_.emplace(std::move(symbols).value());
  return self;
}

Result<int> LiveKernelSymbols::poll(int timeout_ms) {
  ASSIGN_OR_RETURN(int n, events_->poll(timeout_ms, [this](const KsymbolRecord& r) {
    if (r.unregister) {
      symbols_->remove_bpf(r.address);
    } else {
      symbols_->add_bpf(r.address, r.address + r.length, r.name);
    }
  }));
  ASSIGN_OR_RETURN(uint64_t lost, events_->lost());
  if (lost != lost_seen_) {
    log::warn("kernel symbol records dropped; re-reading kallsyms",
              {{"dropped", lost - lost_seen_}, {"full_reads", symbols_->full_reads() + 1}});
    lost_seen_ = lost;
    RETURN_IF_ERROR(symbols_->reload());
  }
  return n;
}

}  // namespace sonde::symbolize
