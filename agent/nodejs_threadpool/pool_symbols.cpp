#include "agent/nodejs_threadpool/pool_symbols.h"

#include <elf.h>

#include <algorithm>
#include <array>

namespace sonde::agent::threadpool {
namespace {

enum NameIndex {
  kNapi = 0,
  kNthreads,
  kIdleThreads,
  kWq,
  kSlowIoPendingWq,
  kRunSlowWorkMessage,
  kExitMessage,
  kNameCount,
};

// libuv's sizes: `unsigned int`, or a queue head/node of two pointers (x86-64, arm64).
constexpr uint64_t kUnsignedSize = 4;
constexpr uint64_t kQueueSize = 16;

struct PoolSymbol {
  NameIndex index;
  uint64_t size;
  uint64_t PoolAddresses::*field;
};
constexpr std::array<PoolSymbol, kNameCount - 1> kPool = {{
    {kNthreads, kUnsignedSize, &PoolAddresses::nthreads},
    {kIdleThreads, kUnsignedSize, &PoolAddresses::idle_threads},
    {kWq, kQueueSize, &PoolAddresses::wq},
    {kSlowIoPendingWq, kQueueSize, &PoolAddresses::slow_io_pending_wq},
    {kRunSlowWorkMessage, kQueueSize, &PoolAddresses::run_slow_work_message},
    {kExitMessage, kQueueSize, &PoolAddresses::exit_message},
}};

void append(std::string& list, const std::string& name) {
  if (!list.empty()) list += ", ";
  list += name;
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kMeasured: return "measured";
    case Verdict::kSymbolsMissing: return "symbols-missing";
    case Verdict::kSymbolsAmbiguous: return "symbols-ambiguous";
    case Verdict::kLayoutMismatch: return "layout-mismatch";
    case Verdict::kUnreadable: return "unreadable";
  }
  return "unknown";
}

const std::vector<std::string>& symbol_names() {
  static const std::vector<std::string> kNames = {
      "napi_module_register",  "nthreads",     "idle_threads", "wq", "slow_io_pending_wq",
      "run_slow_work_message", "exit_message",
  };
  return kNames;
}

SymbolCheck check_symbols(std::span<const symbols::ProbeTarget> targets) {
  SymbolCheck out;
  if (targets.size() != kNameCount) {
    out.verdict = Verdict::kUnreadable;
    out.detail = "resolved " + std::to_string(targets.size()) + " names, asked " +
                 std::to_string(static_cast<int>(kNameCount));
    return out;
  }
  out.is_node = targets[kNapi].found;
  std::string missing, ambiguous, mismatched;
  for (const PoolSymbol& s : kPool) {
    const symbols::ProbeTarget& t = targets[s.index];
    if (!t.found) {
      append(missing, t.name);
    } else if (t.ambiguous) {
      append(ambiguous, t.name);
    } else if (t.size != s.size || t.address == 0) {
      append(mismatched, t.name + " (" + std::to_string(t.size) + " bytes, libuv's " +
                             std::to_string(s.size) + ")");
    } else {
      out.link_time.*s.field = t.address;
    }
  }
  // The first failing class is the verdict; missing says most about the build.
  if (!missing.empty()) {
    out.verdict = Verdict::kSymbolsMissing;
    out.detail = missing;
  } else if (!ambiguous.empty()) {
    out.verdict = Verdict::kSymbolsAmbiguous;
    out.detail = ambiguous;
  } else if (!mismatched.empty()) {
    out.verdict = Verdict::kLayoutMismatch;
    out.detail = mismatched;
  } else {
    out.verdict = Verdict::kMeasured;
  }
  if (out.verdict != Verdict::kMeasured) out.link_time = {};
  return out;
}

Result<uint64_t> load_bias(const ProcReader& proc, pid_t pid, const symbols::ElfFile& elf) {
  if (elf.type() == ET_EXEC) return uint64_t{0};
  if (elf.type() != ET_DYN)
    return Error("neither an executable nor a PIE (ELF type " + std::to_string(elf.type()) + ")");
  uint64_t lowest = UINT64_MAX;
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    const auto seg = elf.segment(i);
    if (seg.type == PT_LOAD) lowest = std::min(lowest, seg.vaddr & ~uint64_t{0xfff});
  }
  if (lowest == UINT64_MAX) return Error("no PT_LOAD segment");
  ASSIGN_OR_RETURN(const uint64_t base, proc.exe_load_base(pid));
  return base - lowest;
}

}  // namespace sonde::agent::threadpool
