// V8Namer's checks and bounds on a hand-laid heap (synthetic_heap.h): what it names, what it
// refuses, that a moved object is not trusted from the cache, and that hostile objects (cycles,
// huge lengths, forged scope infos) end in "unnamed" within the read budget. The real node is
// the test of record for naming itself (agent/cpu/tests/v8_frames_bpf_test.cpp).
#include "agent/v8/v8_heap.h"

#include <gtest/gtest.h>

#include "agent/v8/tests/synthetic_heap.h"

namespace sonde::agent::v8 {
namespace {

using testing::node20_layout;
using testing::SyntheticHeap;

constexpr const char* kSource = "// a\n\nfunction burn(n) {\n  return n;\n}\n";
constexpr int64_t kParen = 19;  // the '(' of burn's parameter list, on line 3
constexpr int64_t kEnd = 38;    // after its '}'

TEST(V8NamerTest, NamesAFunctionWithItsScriptAndLine) {
  SyntheticHeap heap;
  const uint64_t script = heap.script(heap.string("/app/x.js"), heap.string(kSource));
  const uint64_t fn =
      heap.function(heap.sfi(heap.scope_info(heap.string("burn"), kParen, kEnd), script));
  V8Namer namer(node20_layout(), heap);
  auto name = namer.name(fn, heap.alloc(8), heap.shared_of(fn));
  ASSERT_TRUE(name);
  EXPECT_EQ(name->function, "burn");
  EXPECT_EQ(name->script, "/app/x.js");
  EXPECT_EQ(name->line, 3);
  // Again: from the cache, after re-validation.
  heap.reads = 0;
  ASSERT_TRUE(namer.name(fn, heap.alloc(8), heap.shared_of(fn)));
  EXPECT_EQ(namer.stats().cache_hits, 1u);
  EXPECT_LE(heap.reads, 8u);
}

TEST(V8NamerTest, CacheBytesCountWhatIsKeptAndEmptiedCachesNameTheSameAgain) {
  SyntheticHeap heap;
  // A path past the small-string buffer, and a source of 3 lines: both are kept.
  const std::string path = "/srv/app/node_modules/some-package/lib/index.js";
  const uint64_t script = heap.script(heap.string(path), heap.string(kSource));
  const uint64_t fn =
      heap.function(heap.sfi(heap.scope_info(heap.string("burn"), kParen, kEnd), script));
  V8Namer namer(node20_layout(), heap);
  EXPECT_EQ(namer.cache_bytes(), 0u);
  auto first = namer.name(fn, heap.alloc(8), heap.shared_of(fn));
  ASSERT_TRUE(first);
  const size_t kept = namer.cache_bytes();
  // The path is held twice (the script's entry and the function's name), the line table once.
  EXPECT_GE(kept, 2 * path.size() + 3 * sizeof(uint32_t));
  EXPECT_LT(kept, 2048u);
  // Naming it again from the cache keeps the same bytes.
  ASSERT_TRUE(namer.name(fn, heap.alloc(8), heap.shared_of(fn)));
  EXPECT_EQ(namer.cache_bytes(), kept);
  EXPECT_EQ(namer.stats().cache_hits, 1u);

  namer.clear_caches();
  EXPECT_EQ(namer.cache_bytes(), 0u);
  EXPECT_EQ(namer.cached_functions(), 0u);
  auto again = namer.name(fn, heap.alloc(8), heap.shared_of(fn));
  ASSERT_TRUE(again);
  EXPECT_EQ(namer.stats().cache_hits, 1u);  // read from the heap, not the cache
  EXPECT_EQ(again->function, first->function);
  EXPECT_EQ(again->script, first->script);
  EXPECT_EQ(again->line, first->line);
  EXPECT_EQ(namer.cache_bytes(), kept);
}

TEST(V8NamerTest, AStringNameNeedsNoSourceAndAnEmptyOneIsAnonymous) {
  SyntheticHeap heap;
  const uint64_t script = heap.script(heap.string("/app/y.js"), heap.string(""));
  V8Namer namer(node20_layout(), heap);
  const uint64_t handler = heap.function(heap.sfi(heap.string("handler"), script));
  auto named = namer.name(handler, 1, heap.shared_of(handler));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->function, "handler");
  EXPECT_EQ(named->line, 0);  // unconfirmed: unknown, not guessed
  const uint64_t lambda = heap.function(heap.sfi(SyntheticHeap::smi(0), script));
  auto anonymous = namer.name(lambda, 1, heap.shared_of(lambda));
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->function, "(anonymous)");
}

TEST(V8NamerTest, AScopeInfoNameTheSourceDoesNotShowIsRefused) {
  SyntheticHeap heap;
  const uint64_t script = heap.script(heap.string("/app/x.js"), heap.string(kSource));
  V8Namer namer(node20_layout(), heap);
  // "other" is not written before the '(' at kParen: a misread slot, not the function's name.
  const uint64_t other =
      heap.function(heap.sfi(heap.scope_info(heap.string("other"), kParen, kEnd), script));
  EXPECT_FALSE(namer.name(other, 1, heap.shared_of(other)));
  // A position that is not a parameter list.
  const uint64_t misplaced =
      heap.function(heap.sfi(heap.scope_info(heap.string("burn"), 3, kEnd), script));
  EXPECT_FALSE(namer.name(misplaced, 1, heap.shared_of(misplaced)));
  EXPECT_EQ(namer.stats().inconsistent, 2u);
}

TEST(V8NamerTest, TypedFramesAndNonFunctionsAreNotNamed) {
  SyntheticHeap heap;
  V8Namer namer(node20_layout(), heap);
  const uint64_t sfi = heap.sfi(heap.string("f"), SyntheticHeap::smi(0));
  EXPECT_FALSE(namer.name(heap.function(sfi), SyntheticHeap::smi(12), sfi));  // a frame marker
  EXPECT_FALSE(namer.name(sfi, 1, sfi));                                      // not a JSFunction
  EXPECT_FALSE(namer.name(0xdead0001, 1, 0));                                 // unreadable
  EXPECT_EQ(namer.stats().typed_frame, 1u);
  EXPECT_EQ(namer.stats().not_function, 2u);
}

// GC moved things between the sample and the read: the function's address now holds another
// function (another SFI). A frame sampled before the move is not named (neither from the cache
// nor from the new object); one sampled after it gets the new name, not the cached one.
TEST(V8NamerTest, AMovedObjectIsNeitherTrustedFromTheCacheNorNamedForAnOlderSample) {
  SyntheticHeap heap;
  const uint64_t script = heap.script(heap.string("/app/x.js"), heap.string(""));
  const uint64_t first = heap.sfi(heap.string("first"), script);
  const uint64_t fn = heap.function(first);
  V8Namer namer(node20_layout(), heap);
  ASSERT_EQ(namer.name(fn, 1, first)->function, "first");
  const uint64_t second = heap.sfi(heap.string("second"), script);
  heap.put64(fn, 24, second);
  EXPECT_FALSE(namer.name(fn, 1, first));  // sampled while `first` lived there
  EXPECT_EQ(namer.stats().moved, 1u);
  auto again = namer.name(fn, 1, second);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->function, "second");
  EXPECT_EQ(namer.stats().cache_hits, 0u);
}

TEST(V8NamerTest, HostileStringsEndUnnamedWithinTheBudget) {
  SyntheticHeap heap;
  const uint64_t script = heap.script(heap.string("/app/x.js"), heap.string(""));
  // A cons string whose halves are itself: a cycle.
  const uint64_t cycle = heap.cons(0, 0);
  heap.put64(cycle, 16, cycle);
  heap.put64(cycle, 24, cycle);
  // A sequential string claiming 2 GiB.
  const uint64_t huge = heap.string("x");
  heap.put32(huge, 12, 0x7fffffff);
  V8Namer namer(node20_layout(), heap);
  for (uint64_t bad : {cycle, huge}) {
    heap.reads = 0;
    const uint64_t fn = heap.function(heap.sfi(bad, script));
    EXPECT_FALSE(namer.name(fn, 1, heap.shared_of(fn)));
    EXPECT_LE(heap.reads, V8Namer::kMaxReadsPerFrame);
  }
}

}  // namespace
}  // namespace sonde::agent::v8
