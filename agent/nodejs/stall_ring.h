// StallRing: the node's most recent long event-loop turns of Node.js processes ("stalls"), with
// what their main thread ran, as GET /debug/nodejs/stalls serves them.
//
// A stall is one turn of a loop (a busy period between two epoll waits of its main thread) at
// least its process's stallThresholdMs long, reported once its turn ended (duration exact), or
// once it has run kOngoingAfterNs without ending (ongoing: true, duration so far; its end is
// not reported again).
//
// Bounded, whatever the node's processes do: kCapacity stalls (the oldest is evicted first and
// counted), each with at most kMaxStacks stacks (the most sampled), kMaxFrames frames per stack
// (the innermost) and kMaxNameBytes bytes per frame name (cut, marked with "..."); add() applies
// the bounds. About 16 KiB per stall at most: 4 MiB for the ring.
//
// Thread-safe: add() from the recorder's thread, to_json() from the HTTP server's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/runtime/container_totals.h"

namespace sonde::agent {

struct StallStack {
  uint64_t samples = 0;
  std::vector<std::string> frames;  // innermost first: "function (file:line)" or a native name
};

struct Stall {
  ContainerLabels labels;
  pid_t pid = 0;
  int64_t start_unix_ns = 0;  // when the turn began (wall clock)
  uint64_t duration_ns = 0;
  uint64_t threshold_ns = 0;       // the process's stallThresholdMs
  bool ongoing = false;            // reported before its end (see the header)
  uint64_t samples = 0;            // stall-sampler samples of the turn, all stacks included
  std::vector<StallStack> stacks;  // most sampled first
};

class StallRing {
 public:
  static constexpr size_t kCapacity = 256;
  static constexpr size_t kMaxStacks = 5;
  static constexpr size_t kMaxFrames = 48;
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr uint64_t kOngoingAfterNs = 10'000'000'000;

  explicit StallRing(size_t capacity = kCapacity) : capacity_(capacity) {}

  // Keeps `stall` (bounded as the header says), evicting the oldest when full.
  void add(Stall stall);

  // Which stalls to_json() lists; unset fields match every stall. In cluster mode the debug
  // routes' access check authorizes the `namespace` a request names (or every namespace), so
  // the route must never list another namespace's stalls.
  struct Filter {
    std::optional<std::string> namespace_name;
    std::optional<std::string> pod;
    std::optional<std::string> container;
  };
  // {"capacity": N, "evicted": N, "stalls": [...]}, oldest first; see docs/nodejs.md for the shape.
  std::string to_json(const Filter& filter = {}) const;

  size_t size() const;
  uint64_t evicted() const;
  // Stacks, frames and name bytes cut by the bounds, summed over every stall added.
  uint64_t truncated() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Stall> stalls_;
  uint64_t evicted_ = 0;
  uint64_t truncated_ = 0;
};

}  // namespace sonde::agent
