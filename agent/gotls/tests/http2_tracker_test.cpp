// Http2Tracker: ring-buffer records as bpf/gotls/gotls.bpf.c writes them (struct sonde_h2_event)
// in, per-process requests out. Header blocks use HPACK's static table and plain literals (RFC 7541
// Appendix A indices), so each expected status and method is known from the RFC.
#include "agent/gotls/http2_tracker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "agent/gotls/tests/h2_records.h"

namespace sonde::agent {
namespace {

// RFC 7541 Appendix A: 0x82 :method GET, 0x83 :method POST, 0x84 :path /, 0x87 :scheme https,
// 0x88 :status 200, 0x8d :status 404, 0x8e :status 500.
const std::vector<uint8_t> kGetRequest = {0x82, 0x87, 0x84, 0x41, 0x01, 'a'};
const std::vector<uint8_t> kStatus404 = {0x8d};
const std::vector<uint8_t> kStatus200 = {0x88};

// A gRPC request: POST, and content-type (static index 31) "application/grpc" as a literal
// without indexing (4-bit prefix: 0x0f, then 31 - 15 = 16).
std::vector<uint8_t> grpc_request() {
  std::vector<uint8_t> b = {0x83, 0x87, 0x84, 0x41, 0x01, 'a', 0x0f, 0x10, 16};
  const std::string ct = "application/grpc";
  b.insert(b.end(), ct.begin(), ct.end());
  return b;
}
// Trailers: grpc-status NAME as a literal with a new name, without indexing.
std::vector<uint8_t> grpc_trailers(char code) {
  std::vector<uint8_t> b = {0x00, 11};
  const std::string name = "grpc-status";
  b.insert(b.end(), name.begin(), name.end());
  b.push_back(1);
  b.push_back(static_cast<uint8_t>(code));
  return b;
}

uint64_t total(const Http2Tracker::Requests& r) {
  uint64_t n = 0;
  for (const auto& [k, s] : r) n += s.count;
  return n;
}

TEST(Http2TrackerTest, ClientStreamWithChunkedHeaderBlockIsOneRequest) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kSettings, 0, 0, {}, 1000);
  // The request's block in 2-byte chunks, as the kernel sends a payload split across records.
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 2'000'000, 2);
  r.frame(false, kSettings, 0, 0, {}, 2'100'000);
  r.frame(false, kHeaders, kEndHeaders, 1, kStatus404, 3'000'000);
  EXPECT_TRUE(t.counts().empty());  // the response has not ended
  r.frame(false, kData, kEndStream, 1, std::vector<uint8_t>(100), 5'000'000);
  auto counts = t.counts();
  ASSERT_EQ(counts.size(), 1u);
  ASSERT_EQ(counts[kPid].size(), 1u);
  const auto& [k, s] = counts[kPid][0];
  EXPECT_EQ(k.tgid, kPid);
  EXPECT_EQ(k.direction, SONDE_TLS_CLIENT);
  EXPECT_EQ(k.protocol, SONDE_TLS_HTTP2_STREAM);
  EXPECT_EQ(k.method, SONDE_HTTP_GET);
  EXPECT_EQ(k.status_class, 4);
  EXPECT_EQ(k.grpc_code, 0);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.duration_sum_ns, 3'000'000u);  // first HEADERS -> END_STREAM of the response
  EXPECT_EQ(s.buckets[2], 1u);               // 3 ms: (2.5 ms, 5 ms]
  EXPECT_EQ(t.stats().followed, 1u);
}

TEST(Http2TrackerTest, ServerSideGrpcCallWithTrailers) {
  Http2Tracker t;
  Records r(t);
  r.preface(false);  // read: this process is the server
  r.frame(false, kHeaders, kEndHeaders, 1, grpc_request(), 1'000'000);
  r.frame(false, kData, kEndStream, 1, std::vector<uint8_t>(10), 1'000'000);
  r.frame(true, kHeaders, kEndHeaders, 1, kStatus200, 2'000'000);
  r.frame(true, kData, 0, 1, std::vector<uint8_t>(10), 2'000'000);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, grpc_trailers('5'), 4'000'000);
  auto counts = t.counts();
  ASSERT_EQ(counts[kPid].size(), 1u);
  const auto& [k, s] = counts[kPid][0];
  EXPECT_EQ(k.direction, SONDE_TLS_SERVER);
  EXPECT_EQ(k.protocol, SONDE_TLS_GRPC_CALL);
  EXPECT_EQ(k.method, SONDE_HTTP_POST);
  EXPECT_EQ(k.status_class, 2);
  EXPECT_EQ(k.grpc_code, 5 + 1);  // NOT_FOUND
  EXPECT_EQ(s.count, 1u);
}

TEST(Http2TrackerTest, ResetStreamCountsAsReset) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  r.frame(true, kRst, 0, 1, {0, 0, 0, 8}, 2'000'000);  // CANCEL
  auto counts = t.counts();
  ASSERT_EQ(counts[kPid].size(), 1u);
  EXPECT_EQ(counts[kPid][0].first.status_class, SONDE_TLS_STATUS_RESET);
}

TEST(Http2TrackerTest, SequenceGapLosesTheConnectionAndCountsNothingMore) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  r.skip(false);  // the kernel could not send one incoming record
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 2'000'000);
  EXPECT_TRUE(t.counts().empty());
  EXPECT_EQ(t.stats().lost, 1u);
  EXPECT_EQ(t.connections(), 0u);
  // Later records of that connection are ignored, not counted as unparsed.
  r.frame(false, kSettings, 0, 0, {}, 3'000'000);
  EXPECT_EQ(t.stats().unparsed, 0u);
  EXPECT_TRUE(t.counts().empty());
}

TEST(Http2TrackerTest, LostRecordLosesTheConnection) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  r.lost(false);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 2'000'000);
  EXPECT_TRUE(t.counts().empty());
  EXPECT_EQ(t.stats().lost, 1u);
}

TEST(Http2TrackerTest, ConnectionWithoutPrefaceIsUnparsedOnce) {
  Http2Tracker t;
  Records r(t);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 1'000'000);
  r.frame(false, kSettings, 0, 0, {}, 2'000'000);
  EXPECT_EQ(t.stats().unparsed, 1u);
  EXPECT_TRUE(t.counts().empty());
}

TEST(Http2TrackerTest, MalformedHeaderBlockCountedAndNothingWrongEmitted) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  // Index 0 is never valid in HPACK (RFC 7541 6.1).
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, {0x80}, 1'000'000);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 2'000'000);
  EXPECT_TRUE(t.counts().empty());
  EXPECT_EQ(t.stats().malformed, 1u);
}

TEST(Http2TrackerTest, PayloadLongerThanItsFrameLosesTheConnection) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  sonde_h2_event e{};
  e.pid = kPid;
  e.kind = SONDE_H2_FRAME;
  e.outgoing = 1;
  e.conn = kConn;
  e.seq = 1;
  const uint8_t header[9] = {0, 0, 2, kHeaders, kEndHeaders, 0, 0, 0, 1};  // 2 bytes long
  std::memcpy(e.header, header, sizeof header);
  e.len = 3;  // but 3 bytes come
  std::vector<uint8_t> record(SONDE_H2_EVENT_HEAD + 3);
  std::memcpy(record.data(), &e, record.size());
  t.on_record(record);
  EXPECT_EQ(t.stats().lost, 1u);
}

TEST(Http2TrackerTest, ShortOrInconsistentRecordsAreRejected) {
  Http2Tracker t;
  t.on_record(std::vector<uint8_t>(10));
  sonde_h2_event e{};
  e.kind = SONDE_H2_FRAME;
  e.len = 200;  // more than the record holds
  std::vector<uint8_t> record(SONDE_H2_EVENT_HEAD + 10);
  std::memcpy(record.data(), &e, record.size());
  t.on_record(record);
  e.len = SONDE_GOTLS_H2_CHUNK + 1;
  std::vector<uint8_t> big(sizeof e);
  std::memcpy(big.data(), &e, sizeof e);
  t.on_record(big);
  EXPECT_EQ(t.stats().bad_records, 3u);
  EXPECT_EQ(t.connections(), 0u);
}

TEST(Http2TrackerTest, EvictsTheLeastRecentlyActiveAndTellsTheKernel) {
  std::vector<std::pair<uint32_t, uint64_t>> forgotten;
  Http2TrackerLimits limits;
  limits.max_connections = 2;
  Http2Tracker t(limits, [&](uint32_t pid, uint64_t conn) { forgotten.emplace_back(pid, conn); });
  Records a(t, kPid, 1), b(t, kPid, 2), c(t, kPid, 3);
  a.preface(true);
  b.preface(true);
  a.frame(true, kSettings, 0, 0, {}, 2000);  // a is now more recent than b
  c.preface(true);
  EXPECT_EQ(t.connections(), 2u);
  EXPECT_EQ(t.stats().evicted, 1u);
  ASSERT_EQ(forgotten.size(), 1u);
  EXPECT_EQ(forgotten[0], std::make_pair(kPid, uint64_t{2}));
  // b's later records are ignored without counting it again.
  b.frame(false, kSettings, 0, 0, {}, 3000);
  EXPECT_EQ(t.stats().unparsed, 0u);
}

// Past the bound, the process holding the most connections loses its own least recently active
// one, however recent its neighbour's older connection is.
TEST(Http2TrackerTest, ThePidHoldingTheMostGivesUpItsOwnConnection) {
  std::vector<std::pair<uint32_t, uint64_t>> forgotten;
  Http2TrackerLimits limits;
  limits.max_connections = 3;
  Http2Tracker t(limits, [&](uint32_t pid, uint64_t conn) { forgotten.emplace_back(pid, conn); });
  Records quiet(t, kPid, 1);
  Records h1(t, kPid + 1, 1), h2(t, kPid + 1, 2), h3(t, kPid + 1, 3);
  quiet.preface(true);  // the least recently active of all
  h1.preface(true);
  h2.preface(true);
  h3.preface(true);
  EXPECT_EQ(t.connections(), 3u);
  ASSERT_EQ(forgotten.size(), 1u);
  EXPECT_EQ(forgotten[0], std::make_pair(kPid + 1, uint64_t{1}));
  quiet.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  quiet.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 2'000'000);
  EXPECT_EQ(total(t.counts()[kPid]), 1u) << "the quiet process's connection is still followed";
}

TEST(Http2TrackerTest, MemoryBoundEvicts) {
  Http2TrackerLimits limits;
  limits.max_memory = 1;  // every connection is over it once it holds anything
  Http2Tracker t(limits);
  Records a(t, kPid, 1);
  a.preface(true);
  a.frame(true, kHeaders, kEndHeaders, 1, kGetRequest, 1000);
  EXPECT_LE(t.memory(), limits.max_memory);
  EXPECT_GE(t.stats().evicted, 1u);
}

TEST(Http2TrackerTest, TakeReturnsTheProcessRequestsAndForgetsIt) {
  Http2Tracker t;
  Records r(t);
  Records other(t, kPid + 1, kConn);
  r.preface(true);
  other.preface(true);
  for (uint32_t id = 1; id <= 5; id += 2) {
    r.frame(true, kHeaders, kEndStream | kEndHeaders, id, kGetRequest, uint64_t{1000} * id);
    r.frame(false, kHeaders, kEndStream | kEndHeaders, id, kStatus200, 1000 * id + 500);
  }
  EXPECT_EQ(total(t.take(kPid, 10'000)), 3u);
  EXPECT_FALSE(t.counts().contains(kPid));
  EXPECT_EQ(t.connections(), 1u);  // the other process's
  EXPECT_EQ(total(t.take(kPid, 10'000)), 0u);
}

// The process exits with streams open: each is a request, as HTTP/1.x counts one still waiting
// for its response at exit. Without a response it is "unknown" (0); a response cut short
// counts with its final status, as HTTP/1.x counts a response by its status line; no gRPC code
// without trailers. Durations run to the exit.
TEST(Http2TrackerTest, StreamsOpenAtExitCountedWithTheirStatusOrUnknown) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);  // unanswered
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 3, kGetRequest, 2'000'000);
  r.frame(false, kHeaders, kEndHeaders, 3, kStatus404, 3'000'000);  // body cut by the exit
  r.frame(true, kHeaders, kEndHeaders, 5, grpc_request(), 4'000'000);
  r.frame(false, kHeaders, kEndHeaders, 5, kStatus200, 5'000'000);  // no trailers
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 7, kGetRequest, 6'000'000);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 7, kStatus200, 7'000'000);  // answered
  ASSERT_EQ(total(t.counts()[kPid]), 1u);
  r.frame(false, kData, 0, 3, std::vector<uint8_t>(10), 8'000'000);
  t.on_exit_state(kPid, kConn, true, r.next_seq(true), false);  // nothing lost
  t.on_exit_state(kPid, kConn, false, r.next_seq(false), false);
  const auto taken = t.take(kPid, 11'000'000);
  ASSERT_EQ(taken.size(), 4u);
  std::map<std::tuple<int, int, int>, std::pair<uint64_t, uint64_t>> by;  // count, duration
  for (const auto& [k, s] : taken) {
    EXPECT_EQ(k.direction, SONDE_TLS_CLIENT);
    auto& [count, duration] = by[{k.protocol, k.method, k.status_class}];
    count += s.count;
    duration += s.duration_sum_ns;
    EXPECT_EQ(k.grpc_code, 0);
  }
  using Key = std::tuple<int, int, int>;
  EXPECT_EQ(by[Key(SONDE_TLS_HTTP2_STREAM, SONDE_HTTP_GET, 0)], std::make_pair(1UL, 10'000'000UL));
  EXPECT_EQ(by[Key(SONDE_TLS_HTTP2_STREAM, SONDE_HTTP_GET, 4)], std::make_pair(1UL, 9'000'000UL));
  EXPECT_EQ(by[Key(SONDE_TLS_GRPC_CALL, SONDE_HTTP_POST, 2)], std::make_pair(1UL, 7'000'000UL));
  EXPECT_EQ(by[Key(SONDE_TLS_HTTP2_STREAM, SONDE_HTTP_GET, 2)], std::make_pair(1UL, 1'000'000UL));
  EXPECT_EQ(t.stats().lost, 0u);
  EXPECT_EQ(t.connections(), 0u);
}

// The kernel saw the connection end while its process lives on: its open stream is counted then
// (unknown, its duration up to the end), the connection is forgotten, and a later record of it
// (a Write the process makes after the end) counts it as unparsed, not as a request.
TEST(Http2TrackerTest, AConnectionThatEndedCountsItsOpenStreamsThenAndIsForgotten) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 2'000'000);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 3, kGetRequest, 3'000'000);  // unanswered
  ASSERT_EQ(t.connections(), 1u);
  r.closed(7'000'000);
  EXPECT_EQ(t.connections(), 0u);
  const auto counts = t.counts()[kPid];
  ASSERT_EQ(total(counts), 2u);
  for (const auto& [k, s] : counts) {
    EXPECT_EQ(k.status_class, s.duration_sum_ns == 4'000'000 ? 0 : 2) << s.duration_sum_ns;
  }
  EXPECT_EQ(t.stats().lost, 0u);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 5, kGetRequest, 8'000'000);
  EXPECT_EQ(t.stats().unparsed, 1u);
  EXPECT_EQ(total(t.take(kPid, 9'000'000)), 2u);
}

// A CLOSED record after a gap: the connection was lost before it ended; nothing of it is counted.
TEST(Http2TrackerTest, AConnectionThatEndedAfterAGapIsLost) {
  Http2Tracker t;
  Records r(t);
  r.preface(true);
  r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  r.skip(false);
  r.closed(2'000'000);
  EXPECT_EQ(t.connections(), 0u);
  EXPECT_EQ(t.stats().lost, 1u);
  EXPECT_EQ(total(t.take(kPid, 3'000'000)), 0u);
}

TEST(Http2TrackerTest, ServerExitingWithARequestUnansweredCountsItUnknown) {
  Http2Tracker t;
  Records r(t);
  r.preface(false);
  r.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
  const auto taken = t.take(kPid, 3'000'000);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].first.direction, SONDE_TLS_SERVER);
  EXPECT_EQ(taken[0].first.status_class, 0);
  EXPECT_EQ(taken[0].second.duration_sum_ns, 2'000'000u);
  EXPECT_EQ(taken[0].second.buckets[0], 0u);
  EXPECT_EQ(taken[0].second.buckets[1], 1u);  // (1 ms, 2.5 ms]
}

// The kernel gave a direction up (a full ring buffer) and the process exited before its next
// call, which would have carried the LOST record: the exit tells, through the kernel state's
// sequence number (the gap) or its dead flag. The connection is lost; its open stream is not
// counted; nothing is guessed.
TEST(Http2TrackerTest, LossTheKernelHadNotReportedIsFoldedInAtExit) {
  for (const bool by_flag : {false, true}) {
    Http2Tracker t;
    Records r(t);
    r.preface(true);
    r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1'000'000);
    r.frame(true, kHeaders, kEndStream | kEndHeaders, 3, kGetRequest, 1'000'000);
    r.frame(false, kHeaders, kEndStream | kEndHeaders, 3, kStatus200, 2'000'000);
    if (!by_flag) r.skip(false);  // the response to stream 1, never sent
    t.on_exit_state(kPid, kConn, true, r.next_seq(true), false);
    t.on_exit_state(kPid, kConn, false, r.next_seq(false), by_flag);
    EXPECT_EQ(t.stats().lost, 1u) << by_flag;
    const auto taken = t.take(kPid, 3'000'000);
    EXPECT_EQ(total(taken), 1u) << "stream 3, answered before the loss";
    // Another process's state, or a connection not followed: nothing.
    t.on_exit_state(kPid + 1, kConn, false, 7, true);
    EXPECT_EQ(t.stats().lost, 1u);
  }
}

TEST(Http2TrackerTest, SecondPrefaceOnTheSameAddressIsANewConnection) {
  Http2Tracker t;
  {
    Records r(t);
    r.preface(true);
    r.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 1000);
  }
  Records again(t);  // sequence numbers start over, as for a new kernel state
  again.preface(true);
  again.frame(true, kHeaders, kEndStream | kEndHeaders, 1, kGetRequest, 2000);
  again.frame(false, kHeaders, kEndStream | kEndHeaders, 1, kStatus200, 3000);
  EXPECT_EQ(t.stats().followed, 2u);
  EXPECT_EQ(total(t.counts()[kPid]), 1u);
}

}  // namespace
}  // namespace sonde::agent
