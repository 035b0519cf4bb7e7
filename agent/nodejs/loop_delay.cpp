#include "agent/nodejs/loop_delay.h"

#include <algorithm>
#include <cmath>

namespace sonde::agent {
namespace {

// The value a bucket stands for: its middle; the last bucket (above 68.7 s) its lower bound.
double bucket_value_s(uint32_t bucket) {
  const auto b = delay_bucket_bounds(bucket);
  return (static_cast<double>(b.lower_ns) + static_cast<double>(b.upper_ns)) / 2 / 1e9;
}

// hdr_value_at_percentile's rank, over our buckets.
double percentile_s(const LoopDelays& w, uint64_t n, double percentile) {
  // hdr_value_at_percentile truncates p/100 * n + 0.5, i.e. rounds half up.
  auto rank = static_cast<uint64_t>(std::floor(percentile / 100.0 * static_cast<double>(n) + 0.5));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (uint32_t i = 0; i < w.counts.size(); ++i) {
    seen += w.counts[i];
    if (seen >= rank) return bucket_value_s(i);
  }
  return bucket_value_s(SONDE_DELAY_BUCKETS - 1);
}

}  // namespace

uint64_t LoopDelays::count() const {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return n;
}

LoopDelays LoopDelays::since(const LoopDelays& earlier) const {
  auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  LoopDelays d;
  for (size_t i = 0; i < counts.size(); ++i) d.counts[i] = minus(counts[i], earlier.counts[i]);
  d.sum_ns = minus(sum_ns, earlier.sum_ns);
  d.sumsq_us2 = minus(sumsq_us2, earlier.sumsq_us2);
  return d;
}

DelayBucketBounds delay_bucket_bounds(uint32_t bucket) {
  constexpr uint64_t kLowest = uint64_t{1} << SONDE_DELAY_MIN_SHIFT;
  if (bucket == 0) return {0, kLowest};
  if (bucket >= SONDE_DELAY_BUCKETS - 1) {
    constexpr uint64_t kTop = uint64_t{1} << (SONDE_DELAY_MIN_SHIFT + SONDE_DELAY_OCTAVES);
    return {kTop, kTop};
  }
  const uint32_t octave = (bucket - 1) / SONDE_DELAY_SUB;
  const uint32_t sub = (bucket - 1) % SONDE_DELAY_SUB;
  const uint64_t base = kLowest << octave;
  const uint64_t step = base / SONDE_DELAY_SUB;
  return {base + sub * step, base + (sub + 1) * step};
}

std::optional<DelayStats> delay_stats(const LoopDelays& w) {
  const uint64_t n = w.count();
  if (n == 0) return std::nullopt;
  const double count = static_cast<double>(n);
  DelayStats s{};
  s.mean = static_cast<double>(w.sum_ns) / count / 1e9;
  const double mean_us = s.mean * 1e6;
  const double variance_us2 = static_cast<double>(w.sumsq_us2) / count - mean_us * mean_us;
  s.stddev = std::sqrt(std::max(0.0, variance_us2)) / 1e6;
  uint32_t first = 0;
  while (w.counts[first] == 0) ++first;
  uint32_t last = SONDE_DELAY_BUCKETS - 1;
  while (w.counts[last] == 0) --last;
  // A bucket's middle may fall on the wrong side of the exact mean; the extremes never do.
  s.min = std::min(bucket_value_s(first), s.mean);
  s.max = std::max(bucket_value_s(last), s.mean);
  s.p50 = percentile_s(w, n, 50);
  s.p90 = percentile_s(w, n, 90);
  s.p99 = percentile_s(w, n, 99);
  return s;
}

}  // namespace sonde::agent
