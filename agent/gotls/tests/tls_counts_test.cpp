// add_counts(): the kernel's per-process records in the label values sonde exports, for the
// record kinds the fake kernel of tls_monitor_test never writes (gRPC calls, HTTP/2 streams and
// prefaces, reset streams, values out of range).
#include "agent/gotls/tls_counts.h"

#include <gtest/gtest.h>

namespace sonde::agent {
namespace {

sonde_tls_request_key key(uint8_t direction, uint8_t protocol, uint8_t method, uint8_t status,
                          uint8_t grpc_code = 0) {
  sonde_tls_request_key k{};
  k.direction = direction;
  k.protocol = protocol;
  k.method = method;
  k.status_class = status;
  k.grpc_code = grpc_code;
  return k;
}

sonde_tls_request_stats stats(uint64_t count, uint64_t duration_sum_ns) {
  sonde_tls_request_stats s{};
  s.count = count;
  s.duration_sum_ns = duration_sum_ns;
  s.buckets[0] = count;
  return s;
}

TEST(TlsCountsTest, NamesEveryKindOfKernelRecord) {
  TlsCounters::Counts c;
  c.process.read = 10;
  c.process.written = 20;
  c.requests = {
      {key(SONDE_TLS_CLIENT, SONDE_TLS_GRPC_CALL, 2, 2, /*NOT_FOUND + 1*/ 6),
       stats(3, 1'500'000'000)},
      {key(SONDE_TLS_SERVER, SONDE_TLS_HTTP2_STREAM, 1, SONDE_TLS_STATUS_RESET), stats(1, 0)},
      {key(SONDE_TLS_CLIENT, SONDE_TLS_HTTP2, 0, 0), stats(2, 0)},  // prefaces
      {key(SONDE_TLS_SERVER, SONDE_TLS_HTTP1, 200, 0, 18), stats(1, 0)},
  };
  TlsCounts out;
  add_counts(c, out);
  add_counts(c, out);

  const std::map<TlsRequestKey, uint64_t> requests{
      {{"client", "POST", "2xx", "grpc", "NOT_FOUND"}, 6},
      {{"server", "GET", "reset", "http2", ""}, 2},
      {{"server", "OTHER", "unknown", "http1", ""}, 2},
  };
  EXPECT_EQ(out.requests, requests);
  EXPECT_EQ(out.http2_connections, (std::map<std::string, uint64_t>{{"client", 4}}));
  ASSERT_EQ(out.durations.size(), 3u) << "none for prefaces";
  const TlsHistogram& grpc = out.durations.at({"client", "grpc"});
  EXPECT_EQ(grpc.count, 6u);
  EXPECT_EQ(grpc.buckets[0], 6u);
  EXPECT_DOUBLE_EQ(grpc.sum, 3.0);
  EXPECT_EQ(out.read_bytes, 20u);
  EXPECT_EQ(out.written_bytes, 40u);
}

}  // namespace
}  // namespace sonde::agent
