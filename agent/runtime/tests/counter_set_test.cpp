#include "agent/runtime/counter_set.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

namespace sonde::agent {
namespace {

struct Timing {
  std::array<uint64_t, 2> buckets{};
  double sum = 0;
  static constexpr auto kCounters = std::tuple{&Timing::buckets, &Timing::sum};
};

// Every kind of counter, nested, and one member that is not a counter.
struct Counts {
  uint64_t bytes = 0;
  std::map<std::string, uint64_t> requests;
  std::map<std::string, Timing> timings;
  std::array<uint64_t, 3> hits{};
  std::string note;  // not listed: neither added nor floored
  static constexpr auto kCounters =
      std::tuple{&Counts::bytes, &Counts::requests, &Counts::timings, &Counts::hits};
};

Counts sample(uint64_t n, const std::string& key, const std::string& note) {
  Counts c;
  c.bytes = n;
  c.requests[key] = n;
  c.timings[key] = Timing{{n, 2 * n}, 0.5 * static_cast<double>(n)};
  c.hits = {n, 0, 3 * n};
  c.note = note;
  return c;
}

TEST(CounterSet, AddsEveryDeclaredCounter) {
  Counts a = sample(1, "get", "a");
  a += sample(10, "get", "b");
  a += sample(100, "post", "c");
  EXPECT_EQ(a.bytes, 111u);
  EXPECT_EQ(a.requests, (std::map<std::string, uint64_t>{{"get", 11}, {"post", 100}}));
  EXPECT_EQ(a.timings["get"].buckets, (std::array<uint64_t, 2>{11, 22}));
  EXPECT_DOUBLE_EQ(a.timings["get"].sum, 5.5);
  EXPECT_EQ(a.timings["post"].buckets, (std::array<uint64_t, 2>{100, 200}));
  EXPECT_EQ(a.hits, (std::array<uint64_t, 3>{111, 0, 333}));
  EXPECT_EQ(a.note, "a");
}

// Each counter is floored on its own: a map key, an array element, a histogram's sum.
TEST(CounterSet, RaisesEachCounterToItsFloor) {
  Counts value = sample(5, "get", "value");
  value.hits = {9, 0, 0};
  Counts floor = sample(7, "post", "floor");
  floor.bytes = 3;
  floor.timings["get"] = Timing{{6, 1}, 0.25};
  raise_to(value, floor);
  EXPECT_EQ(value.bytes, 5u);
  EXPECT_EQ(value.requests, (std::map<std::string, uint64_t>{{"get", 5}, {"post", 7}}));
  EXPECT_EQ(value.timings["get"].buckets, (std::array<uint64_t, 2>{6, 10}));
  EXPECT_DOUBLE_EQ(value.timings["get"].sum, 2.5);
  EXPECT_EQ(value.timings["post"].buckets, (std::array<uint64_t, 2>{7, 14}));
  EXPECT_EQ(value.hits, (std::array<uint64_t, 3>{9, 0, 21}));
  EXPECT_EQ(value.note, "value");
}

}  // namespace
}  // namespace sonde::agent
