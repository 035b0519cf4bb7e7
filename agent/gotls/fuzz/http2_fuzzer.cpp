// libFuzzer target for http2::Connection: frames as the kernel would pass them, from the fuzz
// input. Input: one octet whose bit 0 picks the side (client/server), then records of
//   [control: bit 0 outgoing, bit 1 claim the header's length even if fewer octets follow]
//   [9-octet frame header]
//   [payload, for HEADERS/CONTINUATION/RST_STREAM/PUSH_PROMISE/GOAWAY only: min(length, rest)]
// A peer chooses every frame. Any crash, sanitizer report, hang, broken memory bound, or an
// Exchange that could not be true (status outside 0 and 200..599, grpc code outside -1..16, or
// any Exchange once the connection is broken) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "agent/gotls/http2.h"

using sonde::agent::http2::Connection;
using sonde::agent::http2::Exchange;
using sonde::agent::http2::FrameHeader;
namespace h2 = sonde::agent::http2;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  h2::Limits limits;
  limits.max_header_block = 4096;
  limits.max_open_streams = 64;
  limits.hpack.max_table_size = 8192;
  limits.hpack.max_field_bytes = 2048;
  Connection conn((data[0] & 1) != 0 ? h2::Side::kServer : h2::Side::kClient, limits);
  std::vector<Exchange> out;
  size_t pos = 1;
  uint64_t now = 0;
  while (size - pos >= 1 + h2::kFrameHeaderBytes) {
    const uint8_t control = data[pos++];
    FrameHeader h = h2::parse_frame_header(
        std::span<const uint8_t, h2::kFrameHeaderBytes>(data + pos, h2::kFrameHeaderBytes));
    pos += h2::kFrameHeaderBytes;
    std::span<const uint8_t> payload;
    if (h.type == h2::kHeaders || h.type == h2::kContinuation || h.type == h2::kRstStream ||
        h.type == h2::kPushPromise || h.type == h2::kGoaway) {
      const size_t take = std::min<size_t>(h.length, size - pos);
      payload = std::span<const uint8_t>(data + pos, take);
      pos += take;
      if ((control & 2) == 0) h.length = static_cast<uint32_t>(take);
    }
    const bool was_broken = conn.broken();
    const size_t before = out.size();
    now += 1000;
    conn.on_frame((control & 1) != 0, h, payload, now, out);
    if (was_broken && out.size() != before) __builtin_trap();
    for (size_t i = before; i < out.size(); ++i) {
      const Exchange& e = out[i];
      if (e.status != 0 && (e.status < 200 || e.status > 599)) __builtin_trap();
      if (e.grpc_code < -1 || e.grpc_code > 16) __builtin_trap();
      if (e.protocol != h2::Protocol::kGrpc && e.grpc_code != -1) __builtin_trap();
      if (!e.reset && e.status == 0) __builtin_trap();
    }
    if (conn.open_streams() > limits.max_open_streams) __builtin_trap();
    // Two blocks in assembly, two tables with their overheads and scratch, the streams.
    const size_t bound =
        2 * limits.max_header_block +
        2 * (limits.hpack.max_table_size + (limits.hpack.max_table_size / 32) * 64 +
             4 * limits.hpack.max_field_bytes) +
        limits.max_open_streams * 64 + 4096;
    if (conn.memory() > bound) __builtin_trap();
  }
  return 0;
}
