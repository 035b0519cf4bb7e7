// HTTP/2 header values sonde does not read (authorization, cookie) leave no byte in the agent's
// heap once their block is decoded (issue 32): the tracker's frame and block buffers and the
// HPACK scratch are zeroed before their memory is released or reused, and the dynamic table
// keeps only the values of :method, :status, content-type and grpc-status.
//
// This binary replaces the global allocator: while the tracker runs (Watch), every block it
// allocates is registered; a block freed with a secret in it is counted, and at the end every
// block still held is scanned. The records fed in are allocated outside the watch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gotls/http2_tracker.h"
#include "agent/gotls/tests/h2_records.h"

namespace {

constexpr std::string_view kToken = "Bearer SECRET-TOKEN-4f2a9c";
constexpr std::string_view kCookie = "session=SECRET-COOKIE-77b1e0";

struct Heap {
  std::mutex mu;
  std::map<void*, size_t>* live = nullptr;  // blocks allocated inside a Watch
  bool inside = false;                      // a Watch is open
  size_t freed_with_secret = 0;
};
Heap& heap() {
  static Heap h;
  return h;
}
thread_local bool in_hook = false;  // the registry's own allocations are not registered

bool holds_secret(const void* p, size_t n) {
  const std::string_view bytes(static_cast<const char*>(p), n);
  return bytes.find(kToken.substr(7)) != std::string_view::npos ||
         bytes.find(kCookie.substr(8)) != std::string_view::npos;
}

void* allocate(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  Heap& h = heap();
  if (!in_hook) {
    in_hook = true;
    {
      std::lock_guard lock(h.mu);
      if (h.inside && h.live != nullptr) (*h.live)[p] = n;
    }
    in_hook = false;
  }
  return p;
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  Heap& h = heap();
  if (!in_hook) {
    in_hook = true;
    {
      std::lock_guard lock(h.mu);
      if (h.live != nullptr) {
        if (auto it = h.live->find(p); it != h.live->end()) {
          if (holds_secret(p, it->second)) h.freed_with_secret++;
          h.live->erase(it);
        }
      }
    }
    in_hook = false;
  }
  std::free(p);
}

// Registers what the tracker allocates while it is in scope.
struct Watch {
  Watch() {
    std::lock_guard lock(heap().mu);
    heap().inside = true;
  }
  ~Watch() {
    std::lock_guard lock(heap().mu);
    heap().inside = false;
  }
};

}  // namespace

void* operator new(size_t n) {
  return allocate(n);
}
void* operator new[](size_t n) {
  return allocate(n);
}
void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, size_t /*n*/) noexcept {
  release(p);
}
void operator delete[](void* p, size_t /*n*/) noexcept {
  release(p);
}

namespace sonde::agent {
namespace {

// A literal field with incremental indexing and a new name, not Huffman coded: its bytes are
// in the block as they are in the header.
void literal(std::vector<uint8_t>& block, std::string_view name, std::string_view value) {
  block.push_back(0x40);
  block.push_back(static_cast<uint8_t>(name.size()));
  block.insert(block.end(), name.begin(), name.end());
  block.push_back(static_cast<uint8_t>(value.size()));
  block.insert(block.end(), value.begin(), value.end());
}

TEST(HeaderSecrets, NoHeaderValueSondeDoesNotReadIsLeftInTheHeap) {
  std::map<void*, size_t> live;
  {
    in_hook = true;
    std::lock_guard lock(heap().mu);
    heap().live = &live;
    in_hook = false;
  }
  auto tracker = std::make_unique<Http2Tracker>();
  Records r(
      [&](std::span<const uint8_t> record) {
        Watch watch;
        tracker->on_record(record);
      },
      kPid, kConn);
  // GET / with the credentials as literals (indexed into the dynamic table), the response, then a
  // second request that refers to both by index (62: the cookie, 63: authorization), split in
  // small records so that the frames are reassembled.
  std::vector<uint8_t> first = {0x82, 0x87, 0x84, 0x41, 0x01, 'a'};
  literal(first, "authorization", kToken);
  literal(first, "cookie", kCookie);
  std::vector<uint8_t> second = {0x82, 0x87, 0x84, 0x41, 0x01, 'a', 0xbe, 0xbf};
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, first, 1000, 16);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, {0x88}, 2000);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 3, second, 3000, 16);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 3, {0x8d}, 4000);

  size_t requests = 0;
  {
    Watch watch;
    const auto counts = tracker->counts();
    for (const auto& [key, stats] : counts.at(kPid)) requests += stats.count;
  }
  EXPECT_EQ(requests, 2u) << "the requests are still counted";
  EXPECT_EQ(tracker->stats().malformed, 0u);

  size_t live_with_secret = 0;
  size_t live_blocks = 0;
  {
    in_hook = true;
    std::lock_guard lock(heap().mu);
    for (const auto& [p, n] : live) {
      live_blocks++;
      if (holds_secret(p, n)) live_with_secret++;
    }
    in_hook = false;
  }
  EXPECT_GT(live_blocks, 0u) << "the watch saw none of the tracker's memory";
  EXPECT_EQ(live_with_secret, 0u) << "blocks the tracker holds contain a header value";
  EXPECT_EQ(heap().freed_with_secret, 0u) << "blocks went back to the heap with a header value";
  {
    Watch watch;
    tracker.reset();
  }
  EXPECT_EQ(heap().freed_with_secret, 0u) << "the tracker's blocks were freed with a header value";
  in_hook = true;
  {
    std::lock_guard lock(heap().mu);
    heap().live = nullptr;
  }
  in_hook = false;
}

}  // namespace
}  // namespace sonde::agent
