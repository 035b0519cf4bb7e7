#include "agent/nodejs/stall_ring.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sonde::agent {
namespace {

Stall stall(pid_t pid, uint64_t duration_ms) {
  Stall s;
  s.labels = {"shop", "checkout-1", "app"};
  s.pid = pid;
  s.start_unix_ns = 1'700'000'000'123'000'000;  // 2023-11-14T22:13:20.123Z
  s.duration_ns = duration_ms * 1'000'000 + 456'000;
  s.threshold_ns = 100'000'000;
  s.samples = 40;
  s.stacks = {{30, {"sondeStallCulprit (/app/x.js:7)", "(anonymous) (/app/x.js:19)"}},
              {10, {"uv_run"}}};
  return s;
}

TEST(StallRing, KeepsTheNewestUpToItsCapacityAndCountsTheEvicted) {
  StallRing ring(3);
  for (pid_t pid = 1; pid <= 5; ++pid) ring.add(stall(pid, 200));
  EXPECT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring.evicted(), 2u);
  auto doc = nlohmann::json::parse(ring.to_json());
  EXPECT_EQ(doc["capacity"], 3);
  EXPECT_EQ(doc["evicted"], 2);
  ASSERT_EQ(doc["stalls"].size(), 3u);
  EXPECT_EQ(doc["stalls"][0]["pid"], 3);  // oldest first
  EXPECT_EQ(doc["stalls"][2]["pid"], 5);
}

TEST(StallRing, DefaultCapacityIsTheStatedBound) {
  StallRing ring;
  for (pid_t pid = 1; pid <= static_cast<pid_t>(StallRing::kCapacity) + 10; ++pid) {
    ring.add(stall(pid, 150));
  }
  EXPECT_EQ(ring.size(), StallRing::kCapacity);
  EXPECT_EQ(ring.evicted(), 10u);
}

TEST(StallRing, JsonShape) {
  StallRing ring(4);
  ring.add(stall(42, 200));
  auto doc = nlohmann::json::parse(ring.to_json());
  const auto& s = doc["stalls"][0];
  EXPECT_EQ(s["namespace"], "shop");
  EXPECT_EQ(s["pod"], "checkout-1");
  EXPECT_EQ(s["container"], "app");
  EXPECT_EQ(s["pid"], 42);
  EXPECT_EQ(s["start"], "2023-11-14T22:13:20.123Z");
  EXPECT_DOUBLE_EQ(s["durationMs"].get<double>(), 200.456);
  EXPECT_EQ(s["thresholdMs"], 100);
  EXPECT_EQ(s["ongoing"], false);
  EXPECT_EQ(s["samples"], 40);
  ASSERT_EQ(s["stacks"].size(), 2u);
  EXPECT_EQ(s["stacks"][0]["samples"], 30);
  EXPECT_EQ(s["stacks"][0]["frames"][0], "sondeStallCulprit (/app/x.js:7)");
}

TEST(StallRing, BoundsStacksFramesAndNames) {
  StallRing ring(4);
  Stall s = stall(7, 300);
  s.stacks.clear();
  for (uint64_t i = 0; i < StallRing::kMaxStacks + 3; ++i) {
    StallStack st;
    st.samples = i + 1;  // the last ones are the most sampled
    st.frames.assign(StallRing::kMaxFrames + 2, "f");
    s.stacks.push_back(st);
  }
  s.stacks.back().frames[0] = std::string(10000, 'x');
  // A name cut inside a multi-byte character ends before it (é is 2 bytes).
  std::string accents;
  while (accents.size() < 2 * StallRing::kMaxNameBytes) accents += "\xc3\xa9";
  s.stacks.back().frames[1] = accents;
  ring.add(s);
  auto doc = nlohmann::json::parse(ring.to_json());
  const auto& stacks = doc["stalls"][0]["stacks"];
  ASSERT_EQ(stacks.size(), StallRing::kMaxStacks);
  EXPECT_EQ(stacks[0]["samples"], StallRing::kMaxStacks + 3);  // most sampled first
  for (const auto& st : stacks) EXPECT_EQ(st["frames"].size(), StallRing::kMaxFrames);
  const std::string first = stacks[0]["frames"][0];
  const std::string second = stacks[0]["frames"][1];
  EXPECT_LE(first.size(), StallRing::kMaxNameBytes);
  EXPECT_TRUE(first.ends_with("..."));
  EXPECT_LE(second.size(), StallRing::kMaxNameBytes);
  EXPECT_TRUE(second.ends_with("\xc3\xa9..."));
  // 3 stacks, 2 frames in each of the 5 kept, 2 names.
  EXPECT_EQ(ring.truncated(), 3u + 2u * StallRing::kMaxStacks + 2u);
}

TEST(StallRing, InvalidUtf8FromATenantIsReplacedNotThrown) {
  StallRing ring(1);
  Stall s = stall(9, 120);
  s.stacks[0].frames[0] = "bad\xff\xfe name";
  ring.add(s);
  auto doc = nlohmann::json::parse(ring.to_json());
  EXPECT_EQ(doc["stalls"][0]["stacks"][0]["frames"][0], "bad\xef\xbf\xbd\xef\xbf\xbd name");
}

TEST(StallRing, FiltersByNamespacePodAndContainer) {
  StallRing ring(8);
  Stall a = stall(1, 200);
  Stall b = stall(2, 200);
  b.labels = {"other", "batch-0", "app"};
  ring.add(a);
  ring.add(b);
  auto pids = [&](const StallRing::Filter& f) {
    std::vector<int> out;
    const auto doc = nlohmann::json::parse(ring.to_json(f));
    for (const auto& s : doc["stalls"]) out.push_back(s["pid"]);
    return out;
  };
  EXPECT_EQ(pids({}), (std::vector<int>{1, 2}));
  EXPECT_EQ(pids({.namespace_name = "shop"}), (std::vector<int>{1}));
  EXPECT_EQ(pids({.namespace_name = "other"}), (std::vector<int>{2}));
  EXPECT_EQ(pids({.namespace_name = "shop", .pod = "batch-0"}), (std::vector<int>{}));
  EXPECT_EQ(pids({.container = "app"}), (std::vector<int>{1, 2}));
  EXPECT_EQ(pids({.namespace_name = ""}), (std::vector<int>{}));
}

TEST(StallRing, ZeroCapacityKeepsNothing) {
  StallRing ring(0);
  ring.add(stall(1, 200));
  EXPECT_EQ(ring.size(), 0u);
  EXPECT_EQ(ring.evicted(), 1u);
  EXPECT_EQ(nlohmann::json::parse(ring.to_json())["stalls"].size(), 0u);
}

}  // namespace
}  // namespace sonde::agent
