#include "agent/nodejs_threadpool/pool_reader.h"

#include <algorithm>
#include <array>

namespace sonde::agent::threadpool {
namespace {

// A queue head or node as libuv lays it out: {next, prev}.
struct QueueLinks {
  uint64_t next = 0;
  uint64_t prev = 0;
};

bool read_links(const v8::Memory& memory, uint64_t at, QueueLinks& out) {
  std::array<uint64_t, 2> words{};
  if (!memory.read_value(at, words)) return false;
  out = {words[0], words[1]};
  return true;
}

enum class Walk { kDone, kTruncated, kTorn, kUnreadable };

// One walk of the queue at `head`: its task nodes counted into `count`.
Walk walk_once(const v8::Memory& memory, uint64_t head, const PoolAddresses& at, uint32_t& count) {
  count = 0;
  QueueLinks h;
  if (!read_links(memory, head, h)) return Walk::kUnreadable;
  // A pool that never started has its statics still zero.
  if (h.next == 0 && h.prev == 0) return Walk::kDone;
  if (h.next == head) return h.prev == head ? Walk::kDone : Walk::kTorn;
  // Nodes seen in this walk: a walk that strays into another queue (a node taken and moved to
  // its loop's done queue while we stood on it) goes round that queue's cycle, which never
  // reaches `head`; seeing a node twice says so.
  std::array<uint64_t, kMaxQueueNodes> seen{};
  uint32_t nodes = 0;
  uint64_t before = head;
  uint64_t n = h.next;
  while (n != head) {
    if (nodes == kMaxQueueNodes) return Walk::kTruncated;
    if (n == 0 || std::find(seen.begin(), seen.begin() + nodes, n) != seen.begin() + nodes) {
      return Walk::kTorn;
    }
    QueueLinks links;
    // A node freed and unmapped under the walk: torn, not a process that is gone.
    if (!read_links(memory, n, links)) return Walk::kTorn;
    // libuv re-initialises a node it takes (next = prev = itself).
    if (links.prev != before || links.next == n) return Walk::kTorn;
    seen[nodes++] = n;
    if (n != at.run_slow_work_message && n != at.exit_message) ++count;
    before = n;
    n = links.next;
  }
  // Back at the head: it must close the cycle on the node the walk came from.
  if (!read_links(memory, head, h)) return Walk::kUnreadable;
  return h.prev == before ? Walk::kDone : Walk::kTorn;
}

}  // namespace

const char* read_failure_name(ReadFailure failure) {
  switch (failure) {
    case ReadFailure::kUnreadable: return "unreadable";
    case ReadFailure::kTorn: return "torn";
    case ReadFailure::kImplausible: return "implausible";
  }
  return "unknown";
}

ReadResult read_pool(const v8::Memory& memory, const PoolAddresses& at) {
  PoolReading r;
  uint32_t idle = 0;
  if (!memory.read_value(at.nthreads, r.threads) || !memory.read_value(at.idle_threads, idle)) {
    return {std::nullopt, ReadFailure::kUnreadable};
  }
  if (r.threads > kMaxPoolThreads || idle > r.threads) {
    return {std::nullopt, ReadFailure::kImplausible};
  }
  r.busy = r.threads - idle;
  for (const uint64_t head : {at.wq, at.slow_io_pending_wq}) {
    uint32_t count = 0;
    Walk walk = Walk::kTorn;
    for (int attempt = 0; attempt < kWalkAttempts && walk == Walk::kTorn; ++attempt) {
      walk = walk_once(memory, head, at, count);
    }
    switch (walk) {
      case Walk::kDone: break;
      case Walk::kTruncated: r.truncated = true; break;
      case Walk::kTorn: return {std::nullopt, ReadFailure::kTorn};
      case Walk::kUnreadable: return {std::nullopt, ReadFailure::kUnreadable};
    }
    r.queued += count;
  }
  return {r, ReadFailure::kUnreadable};
}

}  // namespace sonde::agent::threadpool
