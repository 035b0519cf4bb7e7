// Buffers that hold a peer's HTTP/2 header bytes (`authorization`, `cookie`, ... arrive in the
// same blocks as the few fields sonde reads): zeroed before their memory goes back to the heap,
// by the allocator (a reallocation or release) and by wipe() (contents kept for reuse), so no
// header value outlives the decoding of its block in the agent's memory.
//
// Cost: one explicit_bzero of the buffer's capacity per release or wipe(); the buffers are
// bounded (a header block, a frame payload, one field).
#pragma once

#include <string.h>

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

// Zeroes every byte the container holds, used or not, and empties it; its capacity stays.
template <typename Container>
void wipe(Container& c) {
  c.resize(c.capacity());
  explicit_bzero(c.data(), c.size() * sizeof(typename Container::value_type));
  c.clear();
}

}  // namespace sonde::agent
