// StackSymbolizer: sampled instruction pointers of a process -> locations with function
// names, on the node, with the engines of agent/symbolize:
//   - file-backed code: /proc/<pid>/maps gives the mapping, the PT_LOAD segment gives the
//     link-time address (PIE load bias removed), SymbolizerCache's BinarySymbolizer the frames
//     (Go pclntab with inlined frames, else the ELF symbol table);
//   - anonymous executable memory (JIT code): the process's perf map, read through its root
//     (/proc/<pid>/root/tmp/perf-<pid in its namespace>.map), when the runtime writes one;
//   - the [vdso]: the agent's own vDSO image (vdso.h), when the process's holds the same bytes;
//   - kernel addresses: LiveKernelSymbols (kallsyms plus BPF programs followed incrementally).
// An address nothing resolves is kept as one frame "module+0xoffset" (or "[unknown]"), never
// dropped.
//
// Per process it keeps the executable mappings (re-read at most once per refresh() when an
// address falls outside them, e.g. after exec or dlopen) and the perf map (re-read at most once
// per refresh() when an anonymous address misses and the file grew). Everything a process
// controls is bounded: mappings per process (kMaxMappings), perf map bytes and entries
// (PerfMap), processes kept (kMaxProcesses, least recently used evicted).
//
// Not thread-safe: one thread (the profiler's drain) calls it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/stacks/perf_map.h"
#include "agent/stacks/vdso.h"
#include "agent/symbolize/binary_symbolizer.h"
#include "agent/symbolize/live_kernel_symbols.h"
#include "agent/symbolize/symbolizer_cache.h"

namespace sonde::agent::stacks {

// One source line of a location; a location with inlined calls has several, innermost first.
struct Line {
  std::string function;  // demangled; "module+0x1234" when unknown
  std::string file;      // empty when unknown
  int64_t line = 0;
};

// One sampled address, resolved.
struct Location {
  std::string module;    // binary path as the process sees it, "[kernel.kallsyms]", "[jit]"...
  std::string build_id;  // hex GNU build-id or Go build-id; empty when none
  uint64_t address = 0;  // link-time address for binaries, runtime address otherwise
  std::vector<Line> lines;
};

class StackSymbolizer {
 public:
  static constexpr size_t kMaxMappings = 4096;
  static constexpr size_t kMaxProcesses = 4096;
  static constexpr uint64_t kIdleRounds = 60;

  // kernel may be null (kernel frames then stay "[kernel]+0x..."). Both must outlive this.
  StackSymbolizer(std::string proc_root, symbolize::SymbolizerCache& binaries,
                  symbolize::LiveKernelSymbols* kernel)
      : proc_root_(std::move(proc_root)), binaries_(binaries), kernel_(kernel) {}

  // Starts a new round: applies pending kernel symbol changes, re-allows one re-read of each
  // process's maps and perf map, and forgets processes not sampled for kIdleRounds rounds.
  void refresh();

  // The locations of one sample: kernel frames first, then user frames, innermost first.
  std::vector<Location> symbolize(pid_t pid, std::span<const uint64_t> user,
                                  std::span<const uint64_t> kernel);

  // Drops what is kept for pid (it exited or was released).
  void forget(pid_t pid);
  // The process's start time (clock ticks since boot, /proc/<pid>/stat), read at most once per
  // round: tells a reused pid apart. 0 when the process is gone.
  uint64_t start_time(pid_t pid) { return process(pid).start_time; }

  size_t processes() const { return processes_.size(); }

 private:
  struct Mapping {
    uint64_t start = 0;
    uint64_t end = 0;
    uint64_t pgoff = 0;
    std::string path;  // "" for anonymous memory, "[vdso]" and the like for special ones
    // Resolved on first use:
    bool opened = false;
    std::shared_ptr<const symbolize::BinarySymbolizer> symbolizer;
    std::vector<symbols::ElfSegment> loads;  // PT_LOAD segments of the file
    std::string build_id;
    bool own_vdso = false;  // a [vdso] holding the agent's own image (vdso_ names it)
  };
  struct Process {
    pid_t pid = 0;
    uint64_t start_time = 0;        // from /proc/<pid>/stat: tells a reused pid apart
    std::vector<Mapping> mappings;  // executable ones, sorted by start
    uint64_t round = 0;             // the refresh() round of the last start-time check
    uint64_t maps_round = 0;        // the round maps were last read in
    uint64_t perf_map_round = 0;    // the round the perf map was last looked at in
    std::optional<PerfMap> perf_map;
    int64_t perf_map_size = -1;
  };

  Process& process(pid_t pid);
  void read_maps(Process& p);
  void open_mapping(const Process& p, Mapping& m);
  // Whether p's [vdso] mapping m holds the agent's vDSO image (read once from its memory).
  bool is_own_vdso(const Process& p, const Mapping& m);
  const Mapping* find_mapping(Process& p, uint64_t address);
  void maybe_read_perf_map(Process& p);
  Location user_location(Process& p, uint64_t address);
  Location kernel_location(uint64_t address);

  std::string proc_root_;
  symbolize::SymbolizerCache& binaries_;
  symbolize::LiveKernelSymbols* kernel_;
  std::optional<Vdso> vdso_;  // read at the first [vdso] frame; nullopt when it could not be
  bool vdso_read_ = false;
  uint64_t round_ = 1;
  std::list<Process> lru_;  // most recently used first
  std::unordered_map<pid_t, std::list<Process>::iterator> processes_;
};

// Parses one line of /proc/<pid>/maps; nullopt for malformed lines. Exposed for tests.
struct MapsLine {
  uint64_t start = 0;
  uint64_t end = 0;
  bool executable = false;
  uint64_t pgoff = 0;
  std::string path;
};
std::optional<MapsLine> parse_maps_line(std::string_view line);

}  // namespace sonde::agent::stacks
