// Fuzzes the V8 heap namer with what a tenant controls while it is sampled: its whole heap and
// the frame slots. Input: the function slot word, the context slot word, then the memory image
// mapped at SyntheticHeap::kBase (node 20's layout). name() must return a name or nullopt, never
// crash, hang, or read more than its per-frame budget plus one bounded scan of a script source.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "agent/v8/tests/synthetic_heap.h"
#include "agent/v8/v8_heap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sonde::agent::v8::V8Namer;
  using sonde::agent::v8::testing::SyntheticHeap;
  if (size < 16) return 0;
  uint64_t function = 0;
  uint64_t context = 0;
  std::memcpy(&function, data, 8);
  std::memcpy(&context, data + 8, 8);
  SyntheticHeap heap;
  heap.bytes.assign(data + 16, data + size);
  V8Namer namer(sonde::agent::v8::testing::node20_layout(), heap);
  // Twice: the second call goes through the cache's re-validation.
  for (int i = 0; i < 2; ++i) {
    heap.reads = 0;
    // The shared pointer as the kernel would record it at the sample.
    auto name = namer.name(function, context, heap.shared_of(function));
    // The source scan reads in 64 KiB chunks, at most kMaxSourceBytes: 64 more reads at most.
    if (heap.reads > V8Namer::kMaxReadsPerFrame + 64) __builtin_trap();
    if (name && (name->function.empty() || name->function.size() > V8Namer::kMaxNameBytes ||
                 name->script.size() > V8Namer::kMaxPathBytes)) {
      __builtin_trap();
    }
  }
  return 0;
}
