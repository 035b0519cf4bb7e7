// read_pool(): one reading of a process's libuv thread pool from its memory (pool_symbols.h says
// which statics), with a fixed number of reads whatever the process's queue holds.
//
// What a reading says, from libuv's src/threadpool.c:
//   threads  nthreads (0 until the pool's first task)
//   busy     nthreads - idle_threads: threads not waiting in uv_cond_wait for work. A thread
//            counts busy from its wake-up until it waits again, so one woken to find the queue
//            empty, or a thread of a process still creating its pool, is busy for those
//            microseconds.
//   queued   tasks posted and not taken: the nodes of wq, less libuv's own marker nodes
//            (run_slow_work_message, exit_message), plus the nodes of slow_io_pending_wq
//            (slow I/O tasks, getaddrinfo for one, waiting behind the marker).
// Saturated: threads > 0, busy == threads and queued > 0.
//
// The queues are read while the process changes them (no lock is taken: nothing runs in the
// process), so a walk is checked as it goes: each node's `prev` must name the node before it,
// a node must not point at itself (libuv re-initialises a node it takes), and the walk must come
// back to the head. A walk that fails a check is torn: it is tried again (kWalkAttempts times
// in all), then the reading fails as torn. A walk that is still consistent after
// kMaxQueueNodes nodes stops there: queued is then a lower bound (`truncated`). Reads per
// reading: at most 2 for the counters plus kMaxQueueNodes + 2 per queue walk attempt.
//
// Thread-safety: a pure function of `memory`.
#pragma once

#include <cstdint>
#include <optional>

#include "agent/nodejs_threadpool/pool_symbols.h"
#include "agent/v8/process_memory.h"

namespace sonde::agent::threadpool {

// Nodes a walk follows before it stops and reports a lower bound (per queue, per attempt).
inline constexpr uint32_t kMaxQueueNodes = 128;
// Walks of one queue per reading before a reading is given up as torn.
inline constexpr int kWalkAttempts = 3;
// libuv's MAX_THREADPOOL_SIZE (1024 since libuv 1.30; 128 before): a larger nthreads is not
// libuv's, and the reading is refused as implausible.
inline constexpr uint32_t kMaxPoolThreads = 1024;

struct PoolReading {
  uint32_t threads = 0;
  uint32_t busy = 0;
  uint32_t queued = 0;
  bool truncated = false;  // a walk stopped at kMaxQueueNodes: queued is at least this
  bool saturated() const { return threads > 0 && busy == threads && queued > 0; }
};

enum class ReadFailure {
  kUnreadable,   // the counters could not be read (the process exited, or unmapped them)
  kTorn,         // every walk of a queue was inconsistent (it changed under the walk)
  kImplausible,  // nthreads or idle_threads out of libuv's range: not libuv's statics
};
const char* read_failure_name(ReadFailure failure);

struct ReadResult {
  std::optional<PoolReading> reading;
  ReadFailure failure = ReadFailure::kUnreadable;  // when !reading
};

// One reading at `at` (the statics' addresses in the process).
ReadResult read_pool(const v8::Memory& memory, const PoolAddresses& at);

}  // namespace sonde::agent::threadpool
