#include "agent/symbols/tests/heap_peak.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_live{0};
std::atomic<uint64_t> g_peak{0};
std::atomic<uint64_t> g_base{0};

void note_allocated(void* p) {
  const uint64_t live =
      g_live.fetch_add(malloc_usable_size(p), std::memory_order_relaxed) + malloc_usable_size(p);
  uint64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}
}  // namespace

// noinline: with the replacements visible, GCC's -Wmismatched-new-delete pairs the inlined
// malloc with the inlined free and warns.
__attribute__((noinline)) void* operator new(size_t size) {
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    note_allocated(p);
    return p;
  }
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  if (p != nullptr) g_live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept {
  operator delete(p);
}

namespace sonde::symbols::testing {

void reset_heap_peak() {
  const uint64_t live = g_live.load(std::memory_order_relaxed);
  g_base.store(live, std::memory_order_relaxed);
  g_peak.store(live, std::memory_order_relaxed);
}

uint64_t heap_peak_since_reset() {
  return g_peak.load(std::memory_order_relaxed) - g_base.load(std::memory_order_relaxed);
}

}  // namespace sonde::symbols::testing
