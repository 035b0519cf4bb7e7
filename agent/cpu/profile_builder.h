// ProfileBuilder: symbolized CPU samples -> a profile, written as gzipped pprof (the format of
// `go tool pprof`, Pyroscope, Grafana) or as folded stacks ("root;...;leaf count", the input
// of flame-graph tools).
//
// Samples with the same locations and labels are merged. Strings, functions, mappings and
// locations are interned, so memory grows with the distinct stacks, not with the sample count.
// Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "agent/stacks/stack_symbolizer.h"
#include "common/result.h"

namespace sonde::agent::cpu {

// Who a sample belongs to; becomes pprof sample labels (empty strings are left out).
struct SampleOwner {
  pid_t pid = 0;
  std::string namespace_name;
  std::string pod;
  std::string container;
  bool blocked = false;  // taken while the process's Node.js event loop was blocked
  auto operator<=>(const SampleOwner&) const = default;
};

class ProfileBuilder {
 public:
  // frequency_hz sets the period: one sample stands for 1e9 / frequency_hz ns of CPU.
  explicit ProfileBuilder(uint32_t frequency_hz);

  void add(const SampleOwner& owner, std::span<const stacks::Location> stack, uint64_t count);
  // The window the samples cover (Unix time), recorded in the pprof header.
  void set_window(int64_t start_unix_ns, int64_t duration_ns);

  // Serialized and gzipped pprof. An Error only when compression fails.
  Result<std::string> pprof_gzip() const;
  // Folded stacks, one line per distinct stack, sorted.
  std::string folded() const;

  int64_t start_unix_ns() const { return start_unix_ns_; }
  int64_t duration_ns() const { return duration_ns_; }
  uint64_t total_samples() const { return total_; }
  size_t distinct_stacks() const { return samples_.size(); }

 private:
  struct LocationKey {
    uint64_t mapping;
    uint64_t address;
    std::string first_function;
    // JavaScript frames at one pc (the interpreter's) differ by function, file and line.
    std::string first_file;
    int64_t first_line;
    auto operator<=>(const LocationKey&) const = default;
  };
  struct StoredLocation {
    uint64_t mapping;
    uint64_t address;
    std::vector<std::pair<uint64_t, int64_t>> lines;  // function id, line
  };
  struct StoredFunction {
    int64_t name;
    int64_t file;
  };
  struct StoredMapping {
    int64_t file;
    int64_t build_id;
  };

  int64_t intern(const std::string& s);
  uint64_t function_id(const std::string& name, const std::string& file);
  uint64_t mapping_id(const std::string& module, const std::string& build_id);
  uint64_t location_id(const stacks::Location& loc);

  uint64_t period_ns_;
  int64_t start_unix_ns_ = 0;
  int64_t duration_ns_ = 0;
  uint64_t total_ = 0;
  std::vector<std::string> strings_{""};
  std::unordered_map<std::string, int64_t> string_index_;
  std::vector<StoredFunction> functions_;  // id = index + 1
  std::map<std::pair<int64_t, int64_t>, uint64_t> function_index_;
  std::vector<StoredMapping> mappings_;  // id = index + 1
  std::map<std::pair<int64_t, int64_t>, uint64_t> mapping_index_;
  std::vector<StoredLocation> locations_;  // id = index + 1
  std::map<LocationKey, uint64_t> location_index_;
  std::map<std::pair<SampleOwner, std::vector<uint64_t>>, uint64_t> samples_;  // -> count
};

}  // namespace sonde::agent::cpu
