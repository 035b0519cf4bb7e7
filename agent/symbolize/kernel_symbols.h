// KernelSymbols: kernel address -> symbol for profiles, the /proc/kallsyms table kept current
// for BPF programs (which come and go all the time) by incremental add/remove instead of
// re-reading kallsyms.
//
// A full read builds a KallsymsTable; BPF symbols added afterwards live in a small overlay with
// their exact [start, end), removals of symbols from the full read are remembered as tombstones.
// Both are cleared by the next full read. reload() counts itself, so tests and metrics can tell
// incremental updates from full re-reads. Not thread-safe: one owner applies updates and looks
// up, or callers serialise.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/symbolize/kallsyms.h"
#include "common/result.h"

namespace sonde::symbolize {

class KernelSymbols {
 public:
  // Reads <proc_root>/kallsyms once.
  static Result<KernelSymbols> load(const std::string& proc_root = "/proc");

  // Re-reads kallsyms, dropping the overlay. On error the previous state is kept.
  Status reload();

  // A BPF symbol appeared at [start, end). Re-adding a known symbol replaces it.
  void add_bpf(uint64_t start, uint64_t end, std::string_view name);
  // The BPF symbol starting at `start` is gone. Unknown symbols are ignored (an event that
  // raced with a full read).
  void remove_bpf(uint64_t start);

  // Overlay symbols first (exact ranges), then the table; a removed BPF symbol of the full read
  // resolves to nothing. Like every kallsyms lookup, an address in no symbol's code (a freed
  // program's page) resolves to the preceding table symbol. Views stay valid until the next
  // add_bpf/remove_bpf/reload.
  std::optional<KernelSymbol> lookup(uint64_t address) const;

  uint64_t full_reads() const { return full_reads_; }
  size_t overlay_size() const { return overlay_.size(); }

 private:
  struct Live {
    uint64_t end;
    std::string name;
  };

  explicit KernelSymbols(std::string proc_root) : proc_root_(std::move(proc_root)) {}

  std::string proc_root_;
  KallsymsTable table_;
  std::map<uint64_t, Live> overlay_;
  std::set<uint64_t> removed_;  // starts of table symbols of module "bpf" that were removed
  uint64_t full_reads_ = 0;
};

}  // namespace sonde::symbolize
