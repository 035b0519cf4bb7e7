#include "agent/symbolize/tests/allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// noinline: with the replacements visible, GCC's -Wmismatched-new-delete pairs the inlined
// malloc with the inlined free and warns.
__attribute__((noinline)) void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace sonde::symbolize::testing {

uint64_t allocations() {
  return g_allocations.load(std::memory_order_relaxed);
}

}  // namespace sonde::symbolize::testing
