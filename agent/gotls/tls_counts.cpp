#include "agent/gotls/tls_counts.h"

#include <iterator>

namespace sonde::agent {
namespace {

// The kernel's histogram bounds (ns) are the exported ones (s).
constexpr bool same_buckets() {
  constexpr uint64_t kKernelNs[] = SONDE_GOTLS_BUCKET_BOUNDS_NS;
  for (size_t i = 0; i < kTlsDurationBuckets.size(); ++i) {
    // Positive values, and std::lround is not constexpr.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    if (static_cast<uint64_t>(kTlsDurationBuckets[i] * 1e9 + 0.5) != kKernelNs[i]) return false;
  }
  return true;
}
static_assert(same_buckets(), "kTlsDurationBuckets differs from SONDE_GOTLS_BUCKET_BOUNDS_NS");

const char* direction_name(uint16_t d) {
  return d == SONDE_TLS_CLIENT ? "client" : "server";
}

const char* method_name(uint16_t m) {
  static constexpr const char* kMethods[] = {"OTHER",  "GET",  "POST",  "PUT",
                                             "DELETE", "HEAD", "PATCH", "OPTIONS"};
  return m < SONDE_HTTP_METHOD_COUNT ? kMethods[m] : "OTHER";
}

std::string status_class(uint8_t c) {
  if (c == SONDE_TLS_STATUS_RESET) return "reset";
  if (c < 1 || c > 5) return "unknown";
  return std::to_string(c) + "xx";
}

const char* protocol_name(uint8_t p) {
  if (p == SONDE_TLS_HTTP2_STREAM) return "http2";
  if (p == SONDE_TLS_GRPC_CALL) return "grpc";
  return "http1";
}

// gRPC's canonical status codes (grpc/doc/statuscodes.md), by number; grpc_code is code + 1.
const char* grpc_code_name(uint8_t grpc_code) {
  static constexpr const char* kCodes[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (grpc_code == 0 || grpc_code > std::size(kCodes)) return "";
  return kCodes[grpc_code - 1];
}

}  // namespace

void add_counts(const TlsCounters::Counts& counts, TlsCounts& into) {
  into.read_bytes += counts.process.read;
  into.written_bytes += counts.process.written;
  for (size_t i = 0; i < into.hits.size(); ++i) into.hits[i] += counts.process.hits[i];
  for (size_t i = 0; i < into.over_share.size(); ++i)
    into.over_share[i] += counts.process.over_share[i];
  for (const auto& [k, r] : counts.requests) {
    std::string direction = direction_name(k.direction);
    if (k.protocol == SONDE_TLS_HTTP2) {
      into.http2_connections[direction] += r.count;
      continue;
    }
    const std::string protocol = protocol_name(k.protocol);
    into.requests[{direction, method_name(k.method), status_class(k.status_class), protocol,
                   grpc_code_name(k.grpc_code)}] += r.count;
    auto& h = into.durations[{direction, protocol}];
    for (size_t i = 0; i < kTlsDurationBuckets.size(); ++i) h.buckets[i] += r.buckets[i];
    h.count += r.count;
    h.sum += static_cast<double>(r.duration_sum_ns) / 1e9;
  }
}

}  // namespace sonde::agent
