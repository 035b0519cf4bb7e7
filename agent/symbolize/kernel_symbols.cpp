#include "agent/symbolize/kernel_symbols.h"

#include <utility>

namespace sonde::symbolize {

Result<KernelSymbols> KernelSymbols::load(const std::string& proc_root) {
  KernelSymbols symbols(proc_root);
  RETURN_IF_ERROR(symbols.reload());
  return symbols;
}

Status KernelSymbols::reload() {
  ASSIGN_OR_RETURN(KallsymsTable table, KallsymsTable::read(proc_root_));
  table_ = std::move(table);
  overlay_.clear();
  removed_.clear();
  ++full_reads_;
  return ok_status();
}

void KernelSymbols::add_bpf(uint64_t start, uint64_t end, std::string_view name) {
  if (end <= start) return;  // an empty range covers no address
  overlay_.insert_or_assign(start, Live{end, std::string(name)});
  removed_.erase(start);
}

void KernelSymbols::remove_bpf(uint64_t start) {
  if (overlay_.erase(start) > 0) return;
  // Only a BPF symbol of the full read can be tombstoned; the kernel image and modules are not
  // what bpf_ksym_del removes.
  auto s = table_.lookup(start);
  if (s && s->offset == 0 && s->module == "bpf") removed_.insert(start);
}

std::optional<KernelSymbol> KernelSymbols::lookup(uint64_t address) const {
  auto it = overlay_.upper_bound(address);
  if (it != overlay_.begin()) {
    --it;
    if (address < it->second.end) {
      KernelSymbol s;
      s.name = it->second.name;
      s.module = "bpf";
      s.address = it->first;
      s.offset = address - it->first;
      s.type = 't';
      return s;
    }
  }
  auto s = table_.lookup(address);
  if (s && s->module == "bpf" && removed_.count(s->address)) return std::nullopt;
  return s;
}

}  // namespace sonde::symbolize
