// libFuzzer target for Http2Tracker: the ring-buffer records (struct sonde_h2_event) the agent
// reads from the kernel, on connections whose frames a peer chose. The input is a script of
// records: per record one control byte (bits 0-2: kind, 3: outgoing, 4: skip a sequence number,
// 5-7: which of 8 connections), the 9-byte frame header, one length byte, then that many payload
// bytes; sequence numbers are kept per connection and direction unless told to skip, so the
// fuzzer reaches the frame and HPACK parsing behind them. A record shorter than its header, and
// raw bytes as one record, are fed too. Small bounds make eviction reachable. Any crash,
// sanitizer report, hang or unbounded memory is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "agent/gotls/http2_tracker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sonde::agent::Http2TrackerLimits limits;
  limits.max_connections = 4;
  limits.max_memory = 256 << 10;
  limits.max_ignored = 8;
  sonde::agent::Http2Tracker tracker(limits, [](uint32_t, uint64_t) {});
  tracker.on_record({data, size});  // the raw bytes as one record
  std::map<std::pair<uint64_t, bool>, uint64_t> seq;
  size_t at = 0;
  uint64_t ts = 0;
  while (at + 11 <= size) {
    const uint8_t control = data[at];
    sonde_h2_event e{};
    e.kind = static_cast<uint8_t>(control & 0x7);
    e.outgoing = (control >> 3) & 1;
    e.pid = 100 + (control >> 7);
    e.conn = (control >> 5) & 0x3;
    std::memcpy(e.header, data + at + 1, 9);
    const size_t n = std::min<size_t>(data[at + 10], SONDE_GOTLS_H2_CHUNK);
    at += 11;
    const size_t len = std::min(n, size - at);
    e.len = static_cast<uint16_t>(len);
    std::memcpy(e.data, data + at, len);
    at += len;
    uint64_t& s = seq[{e.conn | (uint64_t{e.pid} << 32), e.outgoing != 0}];
    if (e.kind == SONDE_H2_PREFACE) s = 0;
    if ((control >> 4) & 1) s++;
    e.seq = s++;
    e.ts_ns = ts += 1000;
    std::vector<uint8_t> record(SONDE_H2_EVENT_HEAD + len);
    std::memcpy(record.data(), &e, record.size());
    tracker.on_record(record);
    if (len > 0) tracker.on_record(std::span(record).first(SONDE_H2_EVENT_HEAD + len - 1));
  }
  tracker.counts();
  tracker.on_exit_state(100, 0, true, seq[{100ULL << 32, true}], false);
  tracker.take(100, ts + 1000);
  if (tracker.memory() > limits.max_memory) __builtin_trap();
  return 0;
}
