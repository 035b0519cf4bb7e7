// LoopDelays: the event-loop delay the kernel counts per process (bpf/nodejs/nodejs.h: the
// intervals between callbacks of a simulated 10 ms libuv timer, what Node's
// perf_hooks.monitorEventLoopDelay({resolution: 10}) records), and the statistics that API
// reports, computed from a window of it (the difference of two readings).
//
// Statistics come from the log-linear buckets (8 per power of two): a percentile, the minimum and
// the maximum are their bucket's middle (at most 6.25% off the interval counted), the mean and the
// standard deviation are exact (from the sums). Percentiles rank as HdrHistogram's
// hdr_value_at_percentile, which Node uses: the first bucket whose cumulative count reaches
// p/100 * count + 0.5 (at least 1).
//
// Plain values, no state beyond the counters; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>

#include "bpf/nodejs/nodejs.h"

namespace sonde::agent {

struct LoopDelays {
  std::array<uint64_t, SONDE_DELAY_BUCKETS> counts{};  // per sonde_delay_bucket, non-cumulative
  uint64_t sum_ns = 0;
  uint64_t sumsq_us2 = 0;  // sum of squared intervals in microseconds
  static constexpr auto kCounters =
      std::tuple{&LoopDelays::counts, &LoopDelays::sum_ns, &LoopDelays::sumsq_us2};

  uint64_t count() const;
  // Counter-wise `this - earlier`, 0 where `earlier` is larger (not a reading of the same loops).
  LoopDelays since(const LoopDelays& earlier) const;
};

// The bounds of bucket i in nanoseconds: [lower, upper); the last bucket's upper is its lower.
struct DelayBucketBounds {
  uint64_t lower_ns;
  uint64_t upper_ns;
};
DelayBucketBounds delay_bucket_bounds(uint32_t bucket);

// What monitorEventLoopDelay reports, in seconds.
struct DelayStats {
  double min, max, mean, stddev, p50, p90, p99;
};
// nullopt when `window` holds no interval.
std::optional<DelayStats> delay_stats(const LoopDelays& window);

}  // namespace sonde::agent
