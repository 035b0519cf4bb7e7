// JsFrames: names the JavaScript frames of node processes in symbolized CPU samples, from the
// V8 heap of each process (agent/v8), with no flag on node.
//
// Per process it learns once (and again when the pid is reused) whether its executable
// publishes a V8 layout it can use (v8::read_process_v8_layout); if so, the caller tells the
// sampler to record that process's V8 frames (CpuSampler::watch_v8). A process without one
// keeps its reason for the metrics (v8::unsupported_reason: a fixed set, so a tenant's binary
// cannot mint label values; the full error is logged) and is never asked again; its frames
// keep whatever perf maps or ELF symbols give.
//
// name() rewrites, in place, the user frames of one sample whose V8 walk agrees with the
// sampled user stack (same pc at the same depth) and that run JavaScript: JIT code ([jit]) or
// node's embedded builtins (Builtins_*: the interpreter and its bytecode handlers). A frame the
// heap names becomes "function" with the script as file and the function's line; a JavaScript
// frame it cannot name is counted as unnamed and, when nothing else named it, reads
// "[js] 0x<pc>". A frame whose context slot holds a frame-type marker is not JavaScript and is
// left alone. See v8::V8Namer for the checks and per-frame read bounds.
//
// Bounded: at most kMaxProcesses processes (the least recently used dropped first), each with
// one V8Namer, whose caches all share one budget of `cache_budget_bytes`: past it, the caches
// of the least recently used processes are emptied (counted in cache_clears()) until the total
// fits again, so a node full of processes with large scripts costs the budget, not ~82 MiB
// each (V8Namer's own bounds). A process whose caches were emptied is named from the heap
// again: more reads, the same names. Not thread-safe: the profiler's drain uses it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/stacks/sampler.h"
#include "agent/stacks/stack_symbolizer.h"
#include "agent/v8/process_memory.h"
#include "agent/v8/v8_heap.h"
#include "agent/v8/v8_layout.h"

namespace sonde::agent::stacks {

class JsFrames {
 public:
  static constexpr size_t kMaxProcesses = 4096;
  static constexpr size_t kDefaultCacheBudgetBytes = size_t{32} << 20;

  explicit JsFrames(std::string proc_root, size_t cache_budget_bytes = kDefaultCacheBudgetBytes)
      : proc_root_(std::move(proc_root)), cache_budget_(cache_budget_bytes) {}

  // Learns pid if it is new (or a reused pid: `start_time`, from StackSymbolizer::start_time,
  // differs from the one it was learned with). Returns the frame slots to watch when pid just
  // turned out to be a supported node, nullopt otherwise (already known, or unsupported).
  std::optional<V8FrameSlots> learn(pid_t pid, uint64_t start_time);
  void forget(pid_t pid);

  struct Counts {
    uint64_t named = 0;
    uint64_t unnamed = 0;
  };
  // Names the JavaScript frames of sample s, whose symbolized stack (kernel frames first, then
  // one location per user address) is `stack`.
  Counts name(const RawSample& s, std::vector<Location>& stack);

  // Processes whose executable publishes v8dbg_* symbols, by status: "supported" or the
  // "unsupported: <reason>" (v8::unsupported_reason) that stopped it.
  std::map<std::string, uint64_t> node_processes() const;
  // Heap-read outcomes summed over the processes kept.
  v8::V8Namer::Stats stats() const;
  // What the processes' name caches hold now (V8Namer::cache_bytes()), at most the budget once
  // a name() call returns.
  size_t cache_bytes() const { return cache_bytes_; }
  // Processes whose caches were emptied to keep the total within the budget.
  uint64_t cache_clears() const { return cache_clears_; }

 private:
  struct Process {
    pid_t pid = 0;
    uint64_t start_time = 0;
    std::string status;  // "supported", "unsupported: ..." or "" (not a node binary)
    std::unique_ptr<v8::ProcessMemory> memory;
    std::unique_ptr<v8::V8Namer> namer;
  };

  using Lru = std::list<Process>;
  // Drops a process and its caches' share of cache_bytes_.
  void erase(Lru::iterator it);
  // Empties the least recently used processes' caches until the total fits the budget.
  void fit_budget();

  std::string proc_root_;
  const size_t cache_budget_;
  size_t cache_bytes_ = 0;  // sum of the namers' cache_bytes()
  uint64_t cache_clears_ = 0;
  Lru lru_;  // most recently used (learned or named) first
  std::unordered_map<pid_t, Lru::iterator> processes_;
};

}  // namespace sonde::agent::stacks
