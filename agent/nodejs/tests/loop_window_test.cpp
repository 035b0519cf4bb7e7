// The delay histogram's buckets (the kernel's sonde_delay_bucket against the bounds user space
// reads them with), the statistics against exact ones computed from the intervals, and the
// window each scrape reports over.
#include "agent/nodejs/loop_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "agent/nodejs/loop_delay.h"

namespace sonde::agent {
namespace {

// What the kernel adds for each interval (bpf/nodejs/nodejs.bpf.c, delay_record).
LoopDelays record(const std::vector<uint64_t>& intervals_ns) {
  LoopDelays d;
  for (uint64_t v : intervals_ns) {
    d.counts[sonde_delay_bucket(v)] += 1;
    d.sum_ns += v;
    d.sumsq_us2 += (v / 1000) * (v / 1000);
  }
  return d;
}

// HdrHistogram's hdr_value_at_percentile over the exact values.
double exact_percentile_s(std::vector<uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(std::floor(p / 100.0 * static_cast<double>(v.size()) + 0.5));
  rank = std::max<size_t>(rank, 1);
  return static_cast<double>(v[rank - 1]) / 1e9;
}

TEST(LoopDelayTest, EveryIntervalFallsInTheBucketWhoseBoundsHoldIt) {
  uint32_t previous = 0;
  for (uint64_t v = 1'000'000; v < 100'000'000'000; v += v / 97 + 1) {
    const uint32_t b = sonde_delay_bucket(v);
    ASSERT_LT(b, SONDE_DELAY_BUCKETS);
    ASSERT_GE(b, previous) << v;  // monotonic
    previous = b;
    const auto bounds = delay_bucket_bounds(b);
    if (b == SONDE_DELAY_BUCKETS - 1) {
      EXPECT_GE(v, bounds.lower_ns);
      continue;
    }
    EXPECT_GE(v, bounds.lower_ns) << v;
    EXPECT_LT(v, bounds.upper_ns) << v;
    if (b > 0) {  // the promised resolution: a bucket is 1/8 of its octave
      EXPECT_LE(static_cast<double>(bounds.upper_ns - bounds.lower_ns),
                static_cast<double>(bounds.lower_ns) / 8 + 1);
    }
  }
  EXPECT_EQ(sonde_delay_bucket(0), 0u);
  EXPECT_EQ(sonde_delay_bucket((uint64_t{1} << 23) - 1), 0u);
  EXPECT_EQ(sonde_delay_bucket(uint64_t{1} << 23), 1u);
  EXPECT_EQ(sonde_delay_bucket(uint64_t{1} << 36), SONDE_DELAY_BUCKETS - 1);
  EXPECT_EQ(sonde_delay_bucket(~uint64_t{0}), SONDE_DELAY_BUCKETS - 1);
}

// 200 ms blocks every second with an idle loop between: 80 intervals of ~10 ms for each block's.
TEST(LoopDelayTest, StatisticsMatchTheExactOnesWithinABucket) {
  std::vector<uint64_t> v;
  for (int second = 0; second < 10; ++second) {
    for (int i = 0; i < 80; ++i) v.push_back(10'090'000 + static_cast<uint64_t>(i % 7) * 13'000);
    v.push_back(200'400'000 + static_cast<uint64_t>(second) * 100'000);
  }
  auto s = delay_stats(record(v));
  ASSERT_TRUE(s.has_value());
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n / 1e9;
  double var = 0;
  for (uint64_t x : v) var += std::pow(static_cast<double>(x) / 1e9 - mean, 2);
  const double stddev = std::sqrt(var / n);
  EXPECT_NEAR(s->mean, mean, mean * 1e-6);
  EXPECT_NEAR(s->stddev, stddev, stddev * 1e-3);
  for (double p : {50.0, 90.0, 99.0}) {
    const double want = exact_percentile_s(v, p);
    const double got = p == 50 ? s->p50 : p == 90 ? s->p90 : s->p99;
    EXPECT_NEAR(got, want, want * 0.0625) << "p" << p;
  }
  EXPECT_GT(s->p99, 0.18);  // 10 of 810 intervals are the blocks: above the 99th percentile's rank
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_NEAR(s->min, static_cast<double>(*lo) / 1e9, static_cast<double>(*lo) / 1e9 * 0.0625);
  EXPECT_NEAR(s->max, static_cast<double>(*hi) / 1e9, static_cast<double>(*hi) / 1e9 * 0.0625);
}

TEST(LoopDelayTest, NoIntervalNoStatistics) {
  EXPECT_FALSE(delay_stats(LoopDelays{}).has_value());
}

const ContainerLabels kA{"ns", "a", "app"};
const ContainerLabels kB{"ns", "b", "app"};
constexpr uint64_t kS = 1'000'000'000;

LoopTotals totals(uint64_t active_s, uint64_t idle_s) {
  return {active_s * kS, idle_s * kS, {}};
}

TEST(LoopWindowsTest, TheWindowBeginsAtTheNewestReadingAtLeastTenSecondsOld) {
  LoopWindows w;
  // First scrape: since the measurement began.
  auto r = w.observe({{kA, totals(1, 3)}}, 100 * kS);
  EXPECT_EQ(r[kA].length_ns, 0u);
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 0.25);
  // 5 s later: no reading is 10 s old yet, so since the oldest.
  r = w.observe({{kA, totals(2, 7)}}, 105 * kS);
  EXPECT_EQ(r[kA].length_ns, 5 * kS);
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 1.0 / 5);
  // At 112 s: the reading at 100 s is the newest 10 s old one.
  r = w.observe({{kA, totals(6, 9)}}, 112 * kS);
  EXPECT_EQ(r[kA].length_ns, 12 * kS);
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 5.0 / 11);
  // At 115.5 s: the one at 105 s.
  r = w.observe({{kA, totals(8, 10)}}, 115 * kS + kS / 2);
  EXPECT_EQ(r[kA].length_ns, 10 * kS + kS / 2);
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 6.0 / 9);
  // Scrapes 30 s apart: since the previous one.
  r = w.observe({{kA, totals(9, 39)}}, 145 * kS);
  EXPECT_EQ(r[kA].length_ns, 30 * kS - kS / 2);
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 1.0 / 30);
}

TEST(LoopWindowsTest, ReadingsTooCloseAreNotKeptAndForgottenContainersStartAgain) {
  LoopWindows w;
  w.observe({{kA, totals(0, 10)}, {kB, totals(0, 1)}}, 100 * kS);
  w.observe({{kA, totals(1, 10)}}, 100 * kS + 100'000'000);  // 0.1 s later: not kept; B gone
  auto r = w.observe({{kA, totals(2, 18)}, {kB, totals(1, 1)}}, 111 * kS);
  EXPECT_EQ(r[kA].length_ns, 11 * kS);  // the reading at 100 s, not at 100.1 s
  EXPECT_DOUBLE_EQ(*r[kA].utilization, 0.2);
  EXPECT_EQ(r[kB].length_ns, 0u);  // forgotten: since its measurement began
  EXPECT_DOUBLE_EQ(*r[kB].utilization, 0.5);
  EXPECT_FALSE(r[kB].delay.has_value());
}

TEST(LoopWindowsTest, DelayIsTheWindowsIntervalsOnly) {
  LoopWindows w;
  LoopTotals t = totals(0, 1);
  t.delays = record(std::vector<uint64_t>(100, 500'000'000));  // before the window
  w.observe({{kA, t}}, 100 * kS);
  const auto window = record(std::vector<uint64_t>(50, 10'000'000));
  t.delays += window;
  auto r = w.observe({{kA, t}}, 110 * kS);
  ASSERT_TRUE(r[kA].delay.has_value());
  EXPECT_NEAR(r[kA].delay->max, 0.010, 0.010 * 0.0625);
  EXPECT_NEAR(r[kA].delay->mean, 0.010, 1e-9);
  EXPECT_NEAR(r[kA].delay->stddev, 0.0, 1e-9);
}

}  // namespace
}  // namespace sonde::agent
