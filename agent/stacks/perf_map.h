// PerfMap: the JIT symbol file a runtime writes for perf (/tmp/perf-<pid>.map, e.g. Node.js
// with --perf-basic-prof): one "START SIZE NAME" line per compiled function, hex without 0x.
//
// The file is written by the profiled process, so everything about it is bounded: at most
// kMaxBytes are read and at most kMaxEntries kept; malformed lines are skipped. Later lines
// win for one start address (code moved by the GC is logged again). Immutable after parse;
// lookups may run on several threads.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::agent::stacks {

class PerfMap {
 public:
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  static constexpr size_t kMaxEntries = size_t{1} << 20;

  static PerfMap parse(std::string_view text);
  // Reads and parses the file at path (at most kMaxBytes of it).
  static Result<PerfMap> read(const std::string& path);
  // The same from a file open already (open_perf_map()); `path` names it in errors.
  static Result<PerfMap> read(int fd, const std::string& path);

  struct Symbol {
    std::string_view name;
    uint64_t start = 0;
  };
  // The function whose [start, start + size) holds address.
  std::optional<Symbol> lookup(uint64_t address) const;

  size_t size() const { return entries_.size(); }
  // Heap bytes held (entries and names).
  size_t memory_bytes() const;

 private:
  struct Entry {
    uint64_t start;
    uint64_t size;
    uint32_t name_offset;
    uint32_t name_length;
  };
  std::vector<Entry> entries_;  // sorted by start, unique starts
  std::string names_;
};

// The perf map process `pid` writes, /tmp/perf-<nspid>.map as that process sees it (`nspid`: its
// pid in its own pid namespace): resolved inside its root directory, so a /tmp that is a
// symlink (to /proc/<host-pid>/root/tmp, say) cannot lead the agent to another container's
// map; never waits on a FIFO (symbols/tenant_file.h).
Result<UniqueFd> open_perf_map(const std::string& proc_root, pid_t pid, uint64_t nspid);

}  // namespace sonde::agent::stacks
