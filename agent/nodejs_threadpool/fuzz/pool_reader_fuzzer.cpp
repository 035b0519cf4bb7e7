// Fuzzes read_pool() with what a tenant controls: the whole memory around libuv's statics and
// every queue node, rewritten at will. Input: a memory image mapped at kBase, holding the
// statics at fixed offsets (as pool_reader_test lays them out); a pointer outside the image is
// unreadable. read_pool() must give a reading or a failure, never crash or hang, and never make
// more reads than its bound (pool_reader.h) however the links point.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "agent/nodejs_threadpool/pool_reader.h"

namespace {

constexpr uint64_t kBase = 0x10000;

class ImageMemory final : public sonde::agent::v8::Memory {
 public:
  bool read(uint64_t address, std::span<uint8_t> out) const override {
    ++reads;
    if (address < kBase || address - kBase > bytes.size() ||
        out.size() > bytes.size() - (address - kBase)) {
      return false;
    }
    std::memcpy(out.data(), bytes.data() + (address - kBase), out.size());
    return true;
  }
  std::vector<uint8_t> bytes;
  mutable uint64_t reads = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sonde::agent::threadpool;
  ImageMemory memory;
  memory.bytes.assign(data, data + size);
  constexpr PoolAddresses kAt = {
      .nthreads = kBase,
      .idle_threads = kBase + 4,
      .wq = kBase + 0x10,
      .slow_io_pending_wq = kBase + 0x20,
      .run_slow_work_message = kBase + 0x30,
      .exit_message = kBase + 0x40,
  };
  const ReadResult r = read_pool(memory, kAt);
  // 2 counters, then per queue and attempt: the head, kMaxQueueNodes nodes, the head again.
  if (memory.reads > 2 + 2 * kWalkAttempts * (kMaxQueueNodes + 2)) __builtin_trap();
  if (r.reading) {
    const PoolReading& p = *r.reading;
    if (p.threads > kMaxPoolThreads || p.busy > p.threads || p.queued > 2 * kMaxQueueNodes) {
      __builtin_trap();
    }
  }
  return 0;
}
