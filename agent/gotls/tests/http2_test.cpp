// http2::Connection against real HTTP/2 peers (Debian's python3-h2 client and server talking in
// memory: 200 concurrent streams, gRPC with trailers and Trailers-Only, streaming, resets from
// both sides, GOAWAY, CONTINUATION, server push, table size changes), seen from both ends of
// each connection, and against bad input: malformed frames, interleaved header blocks, blocks
// over the bound, CONTINUATION floods, a 4 GiB table size update, too many streams, a
// connection that never ends.
#include "agent/gotls/http2.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "agent/gotls/tests/h2_test_util.h"
#include "bpf/gotls/gotls.h"

namespace sonde::agent::http2 {
namespace {

using sonde::agent::testing::command_lines;
using sonde::agent::testing::unhex;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// What the kernel hands over: frame headers, and the payloads of the types that name a stream.
bool kernel_passes_payload(uint8_t type) {
  return type == kHeaders || type == kContinuation || type == kRstStream || type == kPushPromise ||
         type == kGoaway;
}

using Row = std::tuple<int, int, int, int, int, uint64_t>;  // grpc, method, status, code, reset, ns

Row row_of(const Exchange& e) {
  return {e.protocol == Protocol::kGrpc ? 1 : 0,
          e.method,
          e.status,
          e.grpc_code,
          e.reset ? 1 : 0,
          e.duration_ns};
}

struct Conversation {
  std::vector<Row> want;
  std::vector<Row> client;  // Exchanges of the client process's Connection
  std::vector<Row> server;
  size_t frames = 0;
  size_t continuations = 0;
  size_t max_open = 0;
  size_t max_memory = 0;
  Connection client_conn{Side::kClient};
  Connection server_conn{Side::kServer};
};

// Splits each direction's bytes into frames and feeds both ends' Connections.
class Splitter {
 public:
  explicit Splitter(bool client) : skip_(client ? kPreface.size() : 0) {}
  template <typename Fn>
  void feed(const std::vector<uint8_t>& bytes, Fn&& on_frame) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    size_t pos = std::min(skip_, buffer_.size());
    skip_ -= pos;
    while (buffer_.size() - pos >= kFrameHeaderBytes) {
      const FrameHeader h = parse_frame_header(
          std::span<const uint8_t, kFrameHeaderBytes>(buffer_.data() + pos, kFrameHeaderBytes));
      if (buffer_.size() - pos - kFrameHeaderBytes < h.length) break;
      on_frame(h, std::span<const uint8_t>(buffer_.data() + pos + kFrameHeaderBytes, h.length));
      pos += kFrameHeaderBytes + h.length;
    }
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(pos));
  }

 private:
  size_t skip_;
  std::vector<uint8_t> buffer_;
};

// Runs a scenario of h2_conversations.py. `strip_goaway`: pass GOAWAY without its payload.
void run(const std::string& scenario, Conversation& r, const Limits& limits = {},
         bool strip_goaway = false) {
  r.client_conn = Connection(Side::kClient, limits);
  r.server_conn = Connection(Side::kServer, limits);
  const auto lines =
      command_lines(std::string(SONDE_PYTHON3) + " " + SONDE_H2_CONVERSATIONS_PY + " " + scenario);
  Splitter from_client(true);
  Splitter from_server(false);
  std::vector<Exchange> client_out;
  std::vector<Exchange> server_out;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "expect") {
      Row row;
      in >> std::get<0>(row) >> std::get<1>(row) >> std::get<2>(row) >> std::get<3>(row) >>
          std::get<4>(row) >> std::get<5>(row);
      r.want.push_back(row);
      continue;
    }
    ASSERT_EQ(kind, "chunk");
    std::string side;
    uint64_t t = 0;
    std::string hex;
    in >> side >> t >> hex;
    const bool by_client = side == "c";
    (by_client ? from_client : from_server)
        .feed(unhex(hex), [&](const FrameHeader& h, std::span<const uint8_t> payload) {
          ++r.frames;
          if (h.type == kContinuation) ++r.continuations;
          if (!kernel_passes_payload(h.type) || (strip_goaway && h.type == kGoaway)) {
            payload = {};
          }
          r.client_conn.on_frame(by_client, h, payload, t, client_out);
          r.server_conn.on_frame(!by_client, h, payload, t, server_out);
          r.max_open = std::max(r.max_open, r.client_conn.open_streams());
          r.max_memory = std::max({r.max_memory, r.client_conn.memory(), r.server_conn.memory()});
        });
  }
  for (const Exchange& e : client_out) r.client.push_back(row_of(e));
  for (const Exchange& e : server_out) r.server.push_back(row_of(e));
  std::sort(r.want.begin(), r.want.end());
  std::sort(r.client.begin(), r.client.end());
  std::sort(r.server.begin(), r.server.end());
}

void expect_exact(const Conversation& r) {
  EXPECT_FALSE(r.client_conn.broken()) << r.client_conn.why();
  EXPECT_FALSE(r.server_conn.broken()) << r.server_conn.why();
  EXPECT_EQ(r.client, r.want);
  EXPECT_EQ(r.server, r.want);
  EXPECT_EQ(r.client_conn.open_streams(), 0U);
  EXPECT_EQ(r.server_conn.open_streams(), 0U);
}

size_t count_if(const std::vector<Row>& rows, auto&& pred) {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), pred));
}

TEST(Http2GroundTruthTest, ConcurrentStreams) {
  Conversation r;
  run("concurrent", r);
  expect_exact(r);
  EXPECT_EQ(r.want.size(), 200U);
  EXPECT_GE(r.max_open, 50U);  // in flight at once on one connection
  // Every method and several statuses, 1xx skipped: no 100 is ever counted.
  for (int method = SONDE_HTTP_OTHER; method <= SONDE_HTTP_OPTIONS; ++method) {
    EXPECT_GT(count_if(r.client, [&](const Row& x) { return std::get<1>(x) == method; }), 0U);
  }
  EXPECT_EQ(count_if(r.client, [](const Row& x) { return std::get<2>(x) < 200; }), 0U);
  EXPECT_GT(count_if(r.client, [](const Row& x) { return std::get<2>(x) == 503; }), 0U);
}

TEST(Http2GroundTruthTest, Grpc) {
  Conversation r;
  run("grpc", r);
  expect_exact(r);
  EXPECT_EQ(r.want.size(), 120U);
  // Every code 0..16 seen, and -1 for out-of-range or absent grpc-status.
  for (int code = -1; code <= 16; ++code) {
    EXPECT_GT(count_if(r.client, [&](const Row& x) { return std::get<3>(x) == code; }), 0U) << code;
  }
  EXPECT_EQ(count_if(r.client, [](const Row& x) { return std::get<0>(x) == 1; }), 120U);
}

TEST(Http2GroundTruthTest, ResetsAndGoaway) {
  Conversation r;
  run("resets", r);
  expect_exact(r);
  EXPECT_EQ(r.want.size(), 30U);
  // 5 by RST_STREAM before a response, 5 after its HEADERS (status kept), 5 refused by the
  // server, 5 by GOAWAY.
  EXPECT_EQ(count_if(r.client, [](const Row& x) { return std::get<4>(x) == 1; }), 20U);
  EXPECT_EQ(
      count_if(r.client, [](const Row& x) { return std::get<4>(x) == 1 && std::get<2>(x) == 200; }),
      5U);
}

TEST(Http2GroundTruthTest, GoawayWithoutPayloadEndsNothing) {
  Conversation r;
  run("resets", r, {}, /*strip_goaway=*/true);
  EXPECT_FALSE(r.client_conn.broken());
  EXPECT_EQ(r.client.size(), 25U);
  EXPECT_EQ(r.client_conn.open_streams(), 5U);
  EXPECT_EQ(r.server_conn.open_streams(), 5U);
}

TEST(Http2GroundTruthTest, ContinuationWithinTheBound) {
  Limits limits;
  limits.max_header_block = 256 * 1024;
  Conversation r;
  run("continuation", r, limits);
  expect_exact(r);
  EXPECT_EQ(r.want.size(), 6U);
  EXPECT_GT(r.continuations, 6U);
  EXPECT_GT(r.max_memory, 16384U);  // one block of more than 16 KiB held while assembled
  // Once idle, the large block buffers and scratch strings are given back: two 4096-octet
  // tables (at most 128 entries each), small buffers, an empty stream map.
  const size_t idle = 2 * (4096 + 128 * 64 + 2 * 1024 + 4096) + 4096;
  EXPECT_LT(r.client_conn.memory(), idle);
  EXPECT_LT(r.server_conn.memory(), idle);
}

TEST(Http2GroundTruthTest, ContinuationOverTheBoundBreaks) {
  Conversation r;
  run("continuation", r);  // 16 KiB: every block here is larger
  EXPECT_TRUE(r.client_conn.broken());
  EXPECT_TRUE(r.server_conn.broken());
  EXPECT_NE(std::string(r.client_conn.why()).find("header block over 16384"), std::string::npos)
      << r.client_conn.why();
  EXPECT_TRUE(r.client.empty());
  EXPECT_TRUE(r.server.empty());
  EXPECT_LE(r.max_memory, 2 * 16384 + 70000);
}

TEST(Http2GroundTruthTest, ServerPushIsDecodedNotCounted) {
  Conversation r;
  run("push", r);
  expect_exact(r);
  EXPECT_EQ(r.want.size(), 10U);
}

TEST(Http2GroundTruthTest, StreamsPastTheBoundAreNotTracked) {
  Limits limits;
  limits.max_open_streams = 50;
  Conversation r;
  run("concurrent", r, limits);
  EXPECT_FALSE(r.client_conn.broken());
  EXPECT_LE(r.max_open, 50U);
  EXPECT_EQ(r.client.size() + r.client_conn.untracked_streams(), 200U);
  EXPECT_GT(r.client_conn.untracked_streams(), 0U);
  // What is counted is exact: each counted stream is one of the real ones.
  for (const Row& row : r.client) {
    EXPECT_TRUE(std::find(r.want.begin(), r.want.end(), row) != r.want.end());
  }
}

// Hand-built frames for bad input. Static-table blocks: 82 = :method GET, 87 = :scheme https,
// 84 = :path /, 88 = :status 200.
const std::vector<uint8_t> kRequest = unhex("82 87 84");
const std::vector<uint8_t> kResponse = unhex("88");

FrameHeader frame(uint8_t type, uint8_t flags, uint32_t stream, size_t length) {
  return FrameHeader{static_cast<uint32_t>(length), type, flags, stream};
}

struct Harness {
  explicit Harness(const Limits& limits = {}) : conn(Side::kClient, limits) {}
  void send(uint8_t type, uint8_t flags, uint32_t stream, const std::vector<uint8_t>& payload,
            size_t length = SIZE_MAX) {
    conn.on_frame(true, frame(type, flags, stream, length == SIZE_MAX ? payload.size() : length),
                  payload, ++now, out);
  }
  void receive(uint8_t type, uint8_t flags, uint32_t stream, const std::vector<uint8_t>& payload,
               size_t length = SIZE_MAX) {
    conn.on_frame(false, frame(type, flags, stream, length == SIZE_MAX ? payload.size() : length),
                  payload, ++now, out);
  }
  void request(uint32_t stream) {
    send(kHeaders, kFlagEndHeaders | kFlagEndStream, stream, kRequest);
  }
  void respond(uint32_t stream) {
    receive(kHeaders, kFlagEndHeaders | kFlagEndStream, stream, kResponse);
  }
  std::string why() const { return conn.why(); }
  Connection conn;
  std::vector<Exchange> out;
  uint64_t now = 0;
};

TEST(Http2BadInputTest, MalformedFrames) {
  struct Case {
    const char* name;
    std::function<void(Harness&)> act;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"PING of 7", [](Harness& h) { h.receive(kPing, 0, 0, {}, 7); }, "PING of 7"},
      {"SETTINGS on a stream", [](Harness& h) { h.receive(kSettings, 0, 1, {}, 6); },
       "SETTINGS on stream 1"},
      {"SETTINGS of 5", [](Harness& h) { h.receive(kSettings, 0, 0, {}, 5); }, "SETTINGS of 5"},
      {"SETTINGS ACK with payload", [](Harness& h) { h.receive(kSettings, kFlagAck, 0, {}, 6); },
       "SETTINGS of 6"},
      {"HEADERS on stream 0", [](Harness& h) { h.send(kHeaders, kFlagEndHeaders, 0, kRequest); },
       "on stream 0"},
      {"DATA on stream 0", [](Harness& h) { h.receive(kData, 0, 0, {}, 10); }, "on stream 0"},
      {"padding past the end",
       [](Harness& h) { h.send(kHeaders, kFlagEndHeaders | kFlagPadded, 1, unhex("05 82 87")); },
       "padding past its end"},
      {"PADDED without a pad length",
       [](Harness& h) { h.send(kHeaders, kFlagEndHeaders | kFlagPadded, 1, {}); },
       "without its pad length"},
      {"PRIORITY flag on 3 bytes",
       [](Harness& h) { h.send(kHeaders, kFlagEndHeaders | kFlagPriority, 1, unhex("00 00 00")); },
       "padding past its end"},
      {"PRIORITY of 4", [](Harness& h) { h.send(kPriority, 0, 1, {}, 4); }, "PRIORITY of 4"},
      {"RST_STREAM of 5", [](Harness& h) { h.receive(kRstStream, 0, 1, unhex("0000000000")); },
       "RST_STREAM of 5"},
      {"WINDOW_UPDATE of 3", [](Harness& h) { h.receive(kWindowUpdate, 0, 0, {}, 3); },
       "WINDOW_UPDATE of 3"},
      {"GOAWAY of 4", [](Harness& h) { h.receive(kGoaway, 0, 0, {}, 4); }, "GOAWAY of 4"},
      {"over 2^24-1", [](Harness& h) { h.receive(kData, 0, 1, {}, 1U << 24); }, "longer than"},
      {"CONTINUATION alone",
       [](Harness& h) { h.send(kContinuation, kFlagEndHeaders, 1, kRequest); },
       "CONTINUATION without a header block"},
      {"payload not whole", [](Harness& h) { h.send(kHeaders, kFlagEndHeaders, 1, kRequest, 10); },
       "lost: HEADERS of 10 bytes passed with 3"},
      {"request on an even stream", [](Harness& h) { h.request(2); }, "even stream"},
      {"request without :method",
       [](Harness& h) { h.send(kHeaders, kFlagEndHeaders, 1, unhex("87 84")); }, "without :method"},
      {"response without :status",
       [](Harness& h) {
         h.request(1);
         h.receive(kHeaders, kFlagEndHeaders, 1, unhex("5f 00"));  // content-type: ""
       },
       "without a valid :status"},
      {"status not 3 digits",
       [](Harness& h) {
         h.request(1);
         h.receive(kHeaders, kFlagEndHeaders, 1, unhex("08 04 32 30 30 30"));  // "2000"
       },
       "without a valid :status"},
      {"status not a number",
       [](Harness& h) {
         h.request(1);
         h.receive(kHeaders, kFlagEndHeaders, 1, unhex("08 03 61 62 63"));  // "abc"
       },
       "without a valid :status"},
      {"1xx that ends the stream",
       [](Harness& h) {
         h.request(1);
         h.receive(kHeaders, kFlagEndHeaders | kFlagEndStream, 1, unhex("08 03 31 30 33"));
       },
       "1xx response that ends"},
      {"trailers without END_STREAM",
       [](Harness& h) {
         h.request(1);
         h.receive(kHeaders, kFlagEndHeaders, 1, kResponse);
         h.receive(kHeaders, kFlagEndHeaders, 1, unhex("5f 00"));
       },
       "without END_STREAM"},
      {"response DATA before the status",
       [](Harness& h) {
         h.request(1);
         h.receive(kData, kFlagEndStream, 1, {}, 3);
       },
       "DATA on stream 1 before its final status"},
      {"PUSH_PROMISE from the client",
       [](Harness& h) { h.send(kPushPromise, kFlagEndHeaders, 1, unhex("00000002 82")); },
       "PUSH_PROMISE from the client"},
      {"HPACK: table size update to 4 GiB",
       [](Harness& h) {
         h.send(kHeaders, kFlagEndHeaders, 1, unhex("3f e1 ff ff ff 0f 82 87 84"));
       },
       "HPACK: integer overflow"},
      {"HPACK: table size update to 4 GiB - 1",
       [](Harness& h) {
         h.send(kHeaders, kFlagEndHeaders, 1, unhex("3f e0 ff ff ff 0f 82 87 84"));
       },
       "HPACK: table size update to 4294967295 over the bound"},
      {"HPACK: integer of many octets",
       [](Harness& h) { h.send(kHeaders, kFlagEndHeaders, 1, unhex("ff 80 80 80 80 80 80 01")); },
       "HPACK: integer longer"},
  };
  for (const Case& c : cases) {
    Harness h;
    c.act(h);
    EXPECT_TRUE(h.conn.broken()) << c.name;
    EXPECT_NE(h.why().find(c.why), std::string::npos) << c.name << ": " << h.why();
    EXPECT_TRUE(h.out.empty()) << c.name;
    // Broken is for good: a valid exchange afterwards is not counted.
    h.request(101);
    h.respond(101);
    EXPECT_TRUE(h.out.empty()) << c.name;
  }
}

TEST(Http2BadInputTest, InterleavedHeaderBlocks) {
  Harness h;
  h.send(kHeaders, 0, 1, {0x82});  // no END_HEADERS
  h.receive(kData, 0, 1, {}, 4);   // the other direction may go on
  EXPECT_FALSE(h.conn.broken());
  h.send(kHeaders, kFlagEndHeaders, 3, kRequest);
  EXPECT_TRUE(h.conn.broken());
  EXPECT_NE(h.why().find("HEADERS on stream 3 inside the header block of stream 1"),
            std::string::npos)
      << h.why();

  Harness c;
  c.send(kHeaders, 0, 1, {0x82});
  c.send(kContinuation, kFlagEndHeaders, 3, {0x87, 0x84});
  EXPECT_NE(c.why().find("CONTINUATION on stream 3 inside"), std::string::npos) << c.why();

  Harness d;
  d.send(kHeaders, 0, 1, {0x82});
  d.send(kData, 0, 1, {}, 5);
  EXPECT_NE(d.why().find("DATA on stream 1 inside"), std::string::npos) << d.why();
}

TEST(Http2BadInputTest, HeaderBlockSplitAcrossContinuations) {
  Harness h;
  h.send(kHeaders, kFlagEndStream, 1, {0x82});  // END_STREAM applies once the block is whole
  h.send(kContinuation, 0, 1, {0x87});
  h.send(kContinuation, kFlagEndHeaders, 1, {0x84});
  h.receive(kHeaders, kFlagEndHeaders, 1, unhex("08 03 31 30 30"));  // 100: informational
  h.receive(kHeaders, 0, 1, {});                                     // 200 over two frames
  h.receive(kContinuation, kFlagEndHeaders, 1, kResponse);
  EXPECT_TRUE(h.out.empty());
  h.receive(kData, kFlagEndStream, 1, {}, 10);
  ASSERT_EQ(h.out.size(), 1U) << h.why();
  EXPECT_EQ(h.out[0].method, SONDE_HTTP_GET);
  EXPECT_EQ(h.out[0].status, 200);
  EXPECT_EQ(h.out[0].grpc_code, -1);
  EXPECT_FALSE(h.out[0].reset);
  EXPECT_EQ(h.out[0].duration_ns, 6U);  // the first HEADERS at 1, the DATA at 7
}

TEST(Http2BadInputTest, HeaderBlockOverTheBound) {
  Harness h;
  std::vector<uint8_t> big(16385, 0x82);
  h.send(kHeaders, kFlagEndHeaders, 1, big);
  EXPECT_NE(h.why().find("header block over 16384 bytes"), std::string::npos) << h.why();
  EXPECT_LT(h.conn.memory(), 1024U);  // released when broken
}

TEST(Http2BadInputTest, ContinuationFloods) {
  // Empty CONTINUATIONs cost no memory, but are bounded in number.
  Harness empty;
  empty.send(kHeaders, 0, 1, {0x82});
  for (int i = 0; i < 100000 && !empty.conn.broken(); ++i) empty.send(kContinuation, 0, 1, {});
  EXPECT_NE(empty.why().find("more than 64 CONTINUATION frames"), std::string::npos) << empty.why();

  // Full ones are bounded in bytes, and memory never passes the bound on the way.
  Harness full;
  full.send(kHeaders, 0, 1, {0x82});
  size_t peak = 0;
  for (int i = 0; i < 100000 && !full.conn.broken(); ++i) {
    full.send(kContinuation, 0, 1, std::vector<uint8_t>(1000, 0x82));
    peak = std::max(peak, full.conn.memory());
  }
  EXPECT_NE(full.why().find("header block over 16384 bytes"), std::string::npos) << full.why();
  EXPECT_LE(peak, 2 * 16384U + 4096);
}

TEST(Http2BadInputTest, NeverEndingConnection) {
  Harness h;
  size_t peak = 0;
  // 100,000 requests never answered, and one stream answered with DATA forever.
  h.request(1);
  h.receive(kHeaders, kFlagEndHeaders, 1, kResponse);
  for (uint32_t i = 1; i <= 100000; ++i) {
    h.request(2 * i + 1);
    h.receive(kData, 0, 1, {}, 16384);
    peak = std::max(peak, h.conn.memory());
  }
  EXPECT_FALSE(h.conn.broken()) << h.why();
  EXPECT_EQ(h.conn.open_streams(), 1024U);
  EXPECT_EQ(h.conn.untracked_streams(), 100000U - 1023U);
  EXPECT_TRUE(h.out.empty());
  // Streams and the map's buckets, nothing per frame.
  EXPECT_LE(peak, 1024 * 64 + 2048 * 8 + 4096);
  // The one stream still ends normally.
  h.receive(kData, kFlagEndStream, 1, {}, 0);
  ASSERT_EQ(h.out.size(), 1U);
  EXPECT_EQ(h.out[0].status, 200);
}

TEST(Http2BadInputTest, LostStopsCounting) {
  Harness h;
  h.request(1);
  h.respond(1);
  ASSERT_EQ(h.out.size(), 1U);
  h.request(3);
  h.conn.lost();
  EXPECT_STREQ(h.conn.why(), "lost");
  EXPECT_EQ(h.conn.open_streams(), 0U);
  h.respond(3);
  h.request(5);
  h.respond(5);
  EXPECT_EQ(h.out.size(), 1U);
}

TEST(Http2Test, ServerSideAndReset) {
  Connection conn(Side::kServer);
  std::vector<Exchange> out;
  // The request arrives (incoming), padded and with priority; the response goes out.
  conn.on_frame(false, frame(kHeaders, kFlagEndHeaders | kFlagPadded | kFlagPriority, 1, 11),
                unhex("02 00000000 10 83 87 84 00 00"), 100, out);  // POST, 2 pad octets
  conn.on_frame(true, frame(kRstStream, 0, 1, 4), unhex("00000008"), 350, out);
  ASSERT_EQ(out.size(), 1U) << conn.why();
  EXPECT_EQ(out[0].method, SONDE_HTTP_POST);
  EXPECT_EQ(out[0].status, 0);
  EXPECT_TRUE(out[0].reset);
  EXPECT_EQ(out[0].duration_ns, 250U);
  EXPECT_EQ(out[0].protocol, Protocol::kHttp2);
}

TEST(Http2Test, FrameHeaderParse) {
  const auto bytes = unhex("00 40 01 01 25 80 00 00 07");
  const FrameHeader h = parse_frame_header(std::span<const uint8_t, 9>(bytes.data(), 9));
  EXPECT_EQ(h.length, 0x4001U);
  EXPECT_EQ(h.type, kHeaders);
  EXPECT_EQ(h.flags, 0x25);
  EXPECT_EQ(h.stream_id, 7U);  // the reserved bit cleared
}

}  // namespace
}  // namespace sonde::agent::http2
