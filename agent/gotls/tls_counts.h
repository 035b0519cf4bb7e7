// TlsCounts: what sonde counts of Go TLS traffic per container and per process, in the terms it
// exports (label values, seconds), and add_counts(), which turns the kernel's per-process
// records (TlsCounters::Counts, bpf/gotls/gotls.h) into them: names for the kernel's enums
// (direction, method, status class, protocol, gRPC code), and its duration histogram in
// kTlsDurationBuckets, whose bounds are checked at compile time against the kernel's.
//
// Plain values with counter_set.h's `+=` and raise_to (kCounters), as ProcessTracker needs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "agent/gotls/tls_probes.h"

namespace sonde::agent {

// Upper bounds (seconds) of the request duration histogram (SONDE_GOTLS_BUCKET_BOUNDS_NS).
inline constexpr std::array<double, SONDE_GOTLS_BUCKETS> kTlsDurationBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

// protocol: "http1", "http2" or "grpc"; status_class: "1xx".."5xx", "unknown", or "reset" (an
// HTTP/2 stream ended by RST_STREAM or GOAWAY); grpc_code: a gRPC canonical code name
// ("OK".."UNAUTHENTICATED"), "" when not gRPC or when the call ended without grpc-status.
struct TlsRequestKey {
  std::string direction, method, status_class, protocol, grpc_code;
  auto operator<=>(const TlsRequestKey&) const = default;
};
struct TlsDurationKey {
  std::string direction, protocol;
  auto operator<=>(const TlsDurationKey&) const = default;
};
struct TlsHistogram {
  std::array<uint64_t, kTlsDurationBuckets.size()> buckets{};  // non-cumulative
  uint64_t count = 0;
  double sum = 0;
  static constexpr auto kCounters =
      std::tuple{&TlsHistogram::buckets, &TlsHistogram::count, &TlsHistogram::sum};
};
// A container's (or a process's) counters.
struct TlsCounts {
  std::map<TlsRequestKey, uint64_t> requests;
  std::map<TlsDurationKey, TlsHistogram> durations;
  std::map<std::string, uint64_t> http2_connections;  // by direction
  uint64_t read_bytes = 0, written_bytes = 0;
  std::array<uint64_t, SONDE_GOTLS_SITE_COUNT> hits{};  // probe hits by enum sonde_gotls_site
  // Kernel inserts refused because the process held its share of the table, by enum
  // sonde_gotls_shared_table (TlsProbes).
  std::array<uint64_t, SONDE_GOTLS_SHARED_COUNT> over_share{};
  static constexpr auto kCounters =
      std::tuple{&TlsCounts::requests,   &TlsCounts::durations,     &TlsCounts::http2_connections,
                 &TlsCounts::read_bytes, &TlsCounts::written_bytes, &TlsCounts::hits,
                 &TlsCounts::over_share};
};

// Adds the kernel's record of one process to `into`.
void add_counts(const TlsCounters::Counts& counts, TlsCounts& into);

}  // namespace sonde::agent
