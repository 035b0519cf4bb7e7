// Ring-buffer records as bpf/gotls.bpf.c writes them (struct sonde_h2_event), for the tests of
// Http2Tracker: frames split into records, with the kernel's sequence numbers per direction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "agent/gotls/http2_tracker.h"

namespace sonde::agent {

inline constexpr uint32_t kPid = 4242;
inline constexpr uint64_t kConn = 0xc000123400;
inline constexpr uint8_t kHeaders = 1, kData = 0, kRst = 3, kSettings = 4;
inline constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4;

// Writes records with the kernel's sequence numbers per direction.
class Records {
 public:
  explicit Records(Http2Tracker& t, uint32_t pid = kPid, uint64_t conn = kConn)
      : sink_([&t](std::span<const uint8_t> record) { t.on_record(record); }),
        pid_(pid),
        conn_(conn) {}
  // Records go to `sink` instead (which passes them on to a tracker).
  Records(std::function<void(std::span<const uint8_t>)> sink, uint32_t pid, uint64_t conn)
      : sink_(std::move(sink)), pid_(pid), conn_(conn) {}

  void preface(bool outgoing, uint64_t ts = 1000) { send(SONDE_H2_PREFACE, outgoing, ts, {}, {}); }
  // One frame; its payload (if forwarded) split in records of at most `chunk` bytes.
  void frame(bool outgoing, uint8_t type, uint8_t flags, uint32_t stream,
             const std::vector<uint8_t>& payload, uint64_t ts, size_t chunk = 256) {
    const auto len = static_cast<uint32_t>(payload.size());
    std::vector<uint8_t> header = {static_cast<uint8_t>(len >> 16),
                                   static_cast<uint8_t>(len >> 8),
                                   static_cast<uint8_t>(len),
                                   type,
                                   flags,
                                   static_cast<uint8_t>(stream >> 24),
                                   static_cast<uint8_t>(stream >> 16),
                                   static_cast<uint8_t>(stream >> 8),
                                   static_cast<uint8_t>(stream)};
    if (!sonde_h2_forwarded(type, len)) {
      send(SONDE_H2_FRAME, outgoing, ts, header, {});
      return;
    }
    size_t at = std::min(chunk, payload.size());
    send(SONDE_H2_FRAME, outgoing, ts, header, {payload.begin(), payload.begin() + at});
    while (at < payload.size()) {
      const size_t n = std::min(chunk, payload.size() - at);
      send(SONDE_H2_PAYLOAD, outgoing, ts, {},
           {payload.begin() + static_cast<long>(at), payload.begin() + static_cast<long>(at + n)});
      at += n;
    }
  }
  void lost(bool outgoing) { send(SONDE_H2_LOST, outgoing, 0, {}, {}); }
  // The kernel saw the connection end (a Read failed): sent in the read direction.
  void closed(uint64_t ts) { send(SONDE_H2_CLOSED, false, ts, {}, {}); }
  void skip(bool outgoing) { seq_[outgoing ? 1 : 0]++; }
  // The sequence number of the direction's next record: what the kernel's state says at exit.
  uint64_t next_seq(bool outgoing) const { return seq_[outgoing ? 1 : 0]; }

 private:
  void send(uint8_t kind, bool outgoing, uint64_t ts, const std::vector<uint8_t>& header,
            const std::vector<uint8_t>& data) {
    sonde_h2_event e{};
    e.pid = pid_;
    e.kind = kind;
    e.outgoing = outgoing ? 1 : 0;
    e.len = static_cast<uint16_t>(data.size());
    e.conn = conn_;
    e.seq = seq_[outgoing ? 1 : 0]++;
    e.ts_ns = ts;
    if (!header.empty()) std::memcpy(e.header, header.data(), header.size());
    if (!data.empty()) std::memcpy(e.data, data.data(), data.size());
    std::vector<uint8_t> record(SONDE_H2_EVENT_HEAD + data.size());
    std::memcpy(record.data(), &e, record.size());
    sink_(record);
  }

  std::function<void(std::span<const uint8_t>)> sink_;
  uint32_t pid_;
  uint64_t conn_;
  uint64_t seq_[2] = {0, 0};
};

}  // namespace sonde::agent
