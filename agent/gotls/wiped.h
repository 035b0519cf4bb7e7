// Buffers that hold a peer's HTTP/2 header bytes (`authorization`, `cookie`, ... arrive in the
// same blocks as the few fields sonde reads): zeroed before their memory goes back to the heap,
// by the allocator (a reallocation or release) and by wipe() (contents kept for reuse), so no
// header value outlives the decoding of its block in the agent's memory.
//
// Cost: one explicit_bzero of the bytes used per wipe(), of the capacity per release; the
// buffers are bounded (a header block, a frame payload, one field).
#pragma once

#include <string.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sonde::agent {

template <typename T>
struct WipingAllocator {
  using value_type = T;
  WipingAllocator() = default;
  template <typename U>
  explicit WipingAllocator(const WipingAllocator<U>& /*other*/) {}
  T* allocate(size_t n) { return std::allocator<T>().allocate(n); }
  void deallocate(T* p, size_t n) {
    explicit_bzero(p, n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const WipingAllocator<U>& /*other*/) const {
    return true;
  }
};

using WipedBytes = std::vector<uint8_t, WipingAllocator<uint8_t>>;
using WipedString = std::basic_string<char, std::char_traits<char>, WipingAllocator<char>>;

// Zeroes the container's first max(size(), high_water) elements and empties it; its capacity
// stays. `high_water`: the largest size it had since its last wipe (a string that held a longer
// value before a shorter one); the elements past it must not have held header bytes since (they
// were wiped then, or are fresh from the allocator), so a small block costs a small wipe.
template <typename Container>
void wipe(Container& c, size_t high_water = 0) {
  const size_t n = std::min(std::max(c.size(), high_water), c.capacity());
  c.resize(n);
  explicit_bzero(c.data(), n * sizeof(typename Container::value_type));
  c.clear();
}

}  // namespace sonde::agent
