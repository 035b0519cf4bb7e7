// read_pool() on hand-laid memory: what a reading counts (tasks, not libuv's marker nodes; both
// queues), and what it refuses: a walk torn by the process changing its queue, a cycle that
// never reaches the head, implausible counters, unreadable memory; a queue longer than the bound
// is a lower bound after a fixed number of reads.
#include "agent/nodejs_threadpool/pool_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

namespace sonde::agent::threadpool {
namespace {

// Memory made of 8-byte words at chosen addresses; anything else is unreadable. Counts reads.
class FakeMemory final : public v8::Memory {
 public:
  bool read(uint64_t address, std::span<uint8_t> out) const override {
    ++reads;
    for (size_t i = 0; i < out.size(); i += 4) {
      auto it = words.find(address + i);
      if (it == words.end()) return false;
      std::memcpy(out.data() + i, &it->second, std::min<size_t>(4, out.size() - i));
    }
    return true;
  }
  void u32(uint64_t at, uint32_t v) { words[at] = v; }
  void u64(uint64_t at, uint64_t v) {
    words[at] = static_cast<uint32_t>(v);
    words[at + 4] = static_cast<uint32_t>(v >> 32);
  }
  void links(uint64_t at, uint64_t next, uint64_t prev) {
    u64(at, next);
    u64(at + 8, prev);
  }
  // Lays out a circular queue: head, then nodes in order.
  void queue(uint64_t head, const std::vector<uint64_t>& nodes) {
    if (nodes.empty()) {
      links(head, head, head);
      return;
    }
    links(head, nodes.front(), nodes.back());
    for (size_t i = 0; i < nodes.size(); ++i) {
      links(nodes[i], i + 1 < nodes.size() ? nodes[i + 1] : head, i == 0 ? head : nodes[i - 1]);
    }
  }

  std::map<uint64_t, uint32_t> words;
  mutable uint64_t reads = 0;
};

constexpr PoolAddresses kAt = {
    .nthreads = 0x1000,
    .idle_threads = 0x1004,
    .wq = 0x1010,
    .slow_io_pending_wq = 0x1020,
    .run_slow_work_message = 0x1030,
    .exit_message = 0x1040,
};

FakeMemory pool(uint32_t threads, uint32_t idle, const std::vector<uint64_t>& wq,
                const std::vector<uint64_t>& slow = {}) {
  FakeMemory m;
  m.u32(kAt.nthreads, threads);
  m.u32(kAt.idle_threads, idle);
  // The markers alone first; a queue that holds one relinks it.
  m.links(kAt.run_slow_work_message, kAt.run_slow_work_message, kAt.run_slow_work_message);
  m.links(kAt.exit_message, kAt.exit_message, kAt.exit_message);
  m.queue(kAt.wq, wq);
  m.queue(kAt.slow_io_pending_wq, slow);
  return m;
}

std::vector<uint64_t> nodes(size_t n, uint64_t base = 0x10000) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(base + i * 0x100);
  return out;
}

TEST(PoolReaderTest, CountsBusyThreadsAndQueuedTasks) {
  const FakeMemory m = pool(4, 0, nodes(12));
  const auto r = read_pool(m, kAt);
  ASSERT_TRUE(r.reading);
  EXPECT_EQ(r.reading->threads, 4u);
  EXPECT_EQ(r.reading->busy, 4u);
  EXPECT_EQ(r.reading->queued, 12u);
  EXPECT_FALSE(r.reading->truncated);
  EXPECT_TRUE(r.reading->saturated());
}

TEST(PoolReaderTest, IdleThreadsAreNotBusyAndAnEmptyQueueIsNotSaturated) {
  const FakeMemory m = pool(4, 1, {});
  const auto r = read_pool(m, kAt);
  ASSERT_TRUE(r.reading);
  EXPECT_EQ(r.reading->busy, 3u);
  EXPECT_EQ(r.reading->queued, 0u);
  EXPECT_FALSE(r.reading->saturated());
  // Every thread busy, nothing waiting: not saturated either.
  const FakeMemory full = pool(4, 0, {});
  EXPECT_FALSE(read_pool(full, kAt).reading->saturated());
}

TEST(PoolReaderTest, APoolNeverStartedReadsZero) {
  FakeMemory m;
  m.u32(kAt.nthreads, 0);
  m.u32(kAt.idle_threads, 0);
  m.links(kAt.wq, 0, 0);
  m.links(kAt.slow_io_pending_wq, 0, 0);
  const auto r = read_pool(m, kAt);
  ASSERT_TRUE(r.reading);
  EXPECT_EQ(r.reading->threads, 0u);
  EXPECT_EQ(r.reading->queued, 0u);
  EXPECT_FALSE(r.reading->saturated());
}

TEST(PoolReaderTest, MarkerNodesAreNotTasksAndSlowIoTasksAre) {
  // wq: a task, the slow-work marker, a task; slow I/O waiting: three getaddrinfo.
  std::vector<uint64_t> wq = {0x20000, kAt.run_slow_work_message, 0x20100};
  const FakeMemory m = pool(4, 0, wq, nodes(3, 0x30000));
  const auto r = read_pool(m, kAt);
  ASSERT_TRUE(r.reading);
  EXPECT_EQ(r.reading->queued, 5u);
  // At shutdown libuv posts exit_message: not a task.
  const FakeMemory exiting = pool(4, 0, {kAt.exit_message});
  EXPECT_EQ(read_pool(exiting, kAt).reading->queued, 0u);
}

TEST(PoolReaderTest, ALongQueueIsALowerBoundAfterBoundedReads) {
  const FakeMemory m = pool(4, 0, nodes(10'000));
  const auto r = read_pool(m, kAt);
  ASSERT_TRUE(r.reading);
  EXPECT_TRUE(r.reading->truncated);
  EXPECT_EQ(r.reading->queued, kMaxQueueNodes);
  EXPECT_TRUE(r.reading->saturated());
  // 2 counters, head + kMaxQueueNodes nodes of wq, head + tail check of the empty slow queue.
  EXPECT_LE(m.reads, 2u + 1 + kMaxQueueNodes + 2);
}

TEST(PoolReaderTest, ANodeTakenUnderTheWalkTearsIt) {
  // The second node was taken by a thread: libuv re-initialised it (next = prev = itself).
  FakeMemory m = pool(4, 0, nodes(3));
  const uint64_t taken = nodes(3)[1];
  m.links(taken, taken, taken);
  const auto r = read_pool(m, kAt);
  ASSERT_FALSE(r.reading);
  EXPECT_EQ(r.failure, ReadFailure::kTorn);
  EXPECT_LE(m.reads, 2u + kWalkAttempts * 3);
}

TEST(PoolReaderTest, ABrokenPrevLinkOrAHeadThatDoesNotCloseTearsTheWalk) {
  FakeMemory prev = pool(4, 0, nodes(3));
  prev.links(nodes(3)[2], kAt.wq, 0x99999);
  EXPECT_EQ(read_pool(prev, kAt).failure, ReadFailure::kTorn);
  EXPECT_FALSE(read_pool(prev, kAt).reading);
  // A node appended after the walk passed: the head's prev names a node the walk never saw.
  FakeMemory tail = pool(4, 0, nodes(3));
  tail.links(kAt.wq, nodes(3)[0], 0x77700);
  EXPECT_FALSE(read_pool(tail, kAt).reading);
}

TEST(PoolReaderTest, AWalkStrayedIntoAnotherCycleStopsAtTheFirstRepeatedNode) {
  // The walk stood on a node that moved to its loop's done queue: that queue's cycle never
  // reaches wq's head. Its links are consistent, so only the repeat tells.
  FakeMemory m = pool(4, 0, nodes(2));
  const uint64_t other_head = 0x50000;
  const auto other = nodes(3, 0x60000);
  m.links(nodes(2)[1], other[0], nodes(2)[0]);
  m.links(other[0], other[1], nodes(2)[1]);
  m.links(other[1], other[2], other[0]);
  m.links(other[2], other_head, other[1]);
  m.links(other_head, nodes(2)[1], other[2]);
  const auto r = read_pool(m, kAt);
  ASSERT_FALSE(r.reading);
  EXPECT_EQ(r.failure, ReadFailure::kTorn);
  EXPECT_LE(m.reads, 2u + kWalkAttempts * (kMaxQueueNodes + 2));
}

TEST(PoolReaderTest, CountersOutOfLibuvsRangeAreImplausible) {
  EXPECT_EQ(read_pool(pool(4, 5, {}), kAt).failure, ReadFailure::kImplausible);
  EXPECT_EQ(read_pool(pool(kMaxPoolThreads + 1, 0, {}), kAt).failure, ReadFailure::kImplausible);
  EXPECT_TRUE(read_pool(pool(kMaxPoolThreads, 0, {}), kAt).reading);
}

TEST(PoolReaderTest, UnreadableCountersOrHeadAreUnreadable) {
  FakeMemory none;
  EXPECT_EQ(read_pool(none, kAt).failure, ReadFailure::kUnreadable);
  FakeMemory no_head = pool(4, 0, {});
  no_head.words.erase(kAt.slow_io_pending_wq);
  EXPECT_EQ(read_pool(no_head, kAt).failure, ReadFailure::kUnreadable);
  // A node that cannot be read mid-walk was freed under it: torn, not unreadable.
  FakeMemory freed = pool(4, 0, nodes(3));
  freed.words.erase(nodes(3)[1]);
  EXPECT_EQ(read_pool(freed, kAt).failure, ReadFailure::kTorn);
}

}  // namespace
}  // namespace sonde::agent::threadpool
