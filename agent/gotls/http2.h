// http2::Connection: the requests (streams) of one HTTP/2 connection of one instrumented Go
// process, rebuilt in user space from the frames the kernel passes on (RFC 9113, RFC 7541).
//
// What it is given: per direction and in order, every frame's 9-byte header, and the whole
// payload of HEADERS, CONTINUATION, RST_STREAM and PUSH_PROMISE frames (GOAWAY: its payload
// when given, else nothing). DATA payloads never leave the kernel and are never needed.
//
// Semantics:
//   - A stream is a request: the requesting side's first HEADERS on a new odd stream id starts
//     it (outgoing for Side::kClient, incoming for Side::kServer); :method gives `method`,
//     content-type "application/grpc..." makes it gRPC. It ends when the responding side sends
//     END_STREAM (on HEADERS or DATA): one Exchange, duration = that frame's time - the request's
//     first HEADERS frame's time. A streaming RPC is one Exchange however many DATA frames.
//   - :status comes from the responding side's HEADERS; 1xx informational blocks are skipped, a
//     later block carries the final status. A response block before the final status without a
//     valid :status (3 digits, 100..599), or response DATA before it, is malformed.
//   - grpc_code: for gRPC streams, grpc-status from the block that ends the response (trailers,
//     or a Trailers-Only response); -1 when absent, not gRPC, or not a number in 0..16 (the
//     stream is still counted with its :status).
//   - RST_STREAM from either side on a tracked stream ends it with reset = true (status: the
//     final :status if one was seen, else 0). A GOAWAY from the responding side whose payload is
//     given ends every tracked stream above its last-stream-id the same way; a GOAWAY without
//     its payload changes nothing.
//   - close(): the connection ends with its process (it exited). Each tracked stream still open
//     is one Exchange, reset = false, with the final :status if one came (its response was cut
//     short; HTTP/1.x counts a response by its status line alike), else status 0 (no response:
//     "unknown"); grpc_code -1 (no trailers); duration up to close()'s now_ns.
//   - Header blocks of every stream are decoded in full (HPACK state), tracked or not:
//     responses of untracked streams, trailers of the request, pushed promises and their
//     responses (server push is not counted).
//   - Anything off (a frame that breaks RFC 9113 framing rules we can check, a bad HPACK block,
//     a bound below exceeded, lost()) marks the connection broken: every on_frame() after that
//     is ignored and open streams are dropped without an Exchange, so no wrong status is ever
//     emitted. why() says why: "malformed: ..." (the peer broke a rule or a bound), "lost" (the
//     kernel said so) or "lost: ..." (a frame came without the whole payload it needs).
//
// Bounds (peer-controlled costs; each stated here and tested):
//   - a header block being assembled: at most Limits::max_header_block bytes and
//     Limits::max_continuations CONTINUATION frames (empty ones cost no memory but time: the
//     CONTINUATION flood), one block per direction (RFC 9113 forbids interleaving); past either
//     the connection is broken (malformed);
//   - the HPACK dynamic tables: Limits::hpack (table size update above max_table_size,
//     or a field above max_field_bytes: broken, malformed);
//   - open streams: at most Limits::max_open_streams tracked. A request past it is not tracked
//     (its blocks are still decoded) and is counted in untracked_streams(); the connection stays
//     usable. A stream lives until its response ends or it is reset, so a connection that never
//     ends holds at most that many.
//   - memory() <= 2 * (max_header_block + HPACK decoder memory) + max_open_streams * ~64 bytes;
//     between blocks a direction keeps at most 4 KiB of block buffer.
//
// Thread-safety: none; one Connection is driven by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/gotls/hpack.h"

namespace sonde::agent::http2 {

// RFC 9113 6: frame types and flags used here.
enum FrameType : uint8_t {
  kData = 0,
  kHeaders = 1,
  kPriority = 2,
  kRstStream = 3,
  kSettings = 4,
  kPushPromise = 5,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
  kContinuation = 9,
};
inline constexpr uint8_t kFlagEndStream = 0x1;
inline constexpr uint8_t kFlagAck = 0x1;
inline constexpr uint8_t kFlagEndHeaders = 0x4;
inline constexpr uint8_t kFlagPadded = 0x8;
inline constexpr uint8_t kFlagPriority = 0x20;
inline constexpr size_t kFrameHeaderBytes = 9;
inline constexpr uint32_t kMaxFrameLength = (1U << 24) - 1;

struct FrameHeader {
  uint32_t length;
  uint8_t type;
  uint8_t flags;
  uint32_t stream_id;  // the reserved bit cleared
};

// Parses a 9-byte frame header (RFC 9113 4.1).
FrameHeader parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes);

enum class Side { kClient, kServer };  // which end of the connection this process is
enum class Protocol { kHttp2, kGrpc };

struct Exchange {  // one finished stream = one request
  Protocol protocol;
  uint8_t method;        // enum sonde_http_method from bpf/gotls/gotls.h (GET..OPTIONS, OTHER)
  uint16_t status;       // :status, 0 when none was seen (reset or closed before a response)
  int grpc_code;         // 0..16 from grpc-status; -1 when not gRPC or absent
  bool reset;            // ended by RST_STREAM (either side) or GOAWAY, not by END_STREAM
  uint64_t duration_ns;  // request's first HEADERS -> end of the response
};

struct Limits {
  size_t max_header_block = 16384;  // bytes of one header block being assembled
  size_t max_continuations = 64;    // CONTINUATION frames in one header block
  size_t max_open_streams = 1024;   // streams tracked at once
  hpack::Limits hpack;              // per direction
};

class Connection {  // one TLS connection of one process, both directions
 public:
  explicit Connection(Side side, const Limits& limits = {});

  // A frame this process sent (`outgoing`) or received, in order per direction. `payload` is the
  // frame's whole payload for HEADERS, CONTINUATION, RST_STREAM and PUSH_PROMISE (GOAWAY: whole,
  // or empty), empty for every other type. `now_ns`: when the frame was seen (CLOCK_MONOTONIC
  // ns). Finished streams are appended to `out`.
  void on_frame(bool outgoing, const FrameHeader& h, std::span<const uint8_t> payload,
                uint64_t now_ns, std::vector<Exchange>& out);
  // The connection's process exited: its open streams end without a response (see above).
  // Nothing is appended when broken. Streams are forgotten; later frames start afresh.
  void close(uint64_t now_ns, std::vector<Exchange>& out);
  // The kernel lost events of this connection (ring buffer full, header block over its bound):
  // the HPACK state can no longer be trusted; nothing more is counted on it.
  void lost();
  bool broken() const { return !why_.empty(); }
  // Why broken (see the file comment); "" when not broken.
  const char* why() const { return why_.c_str(); }
  // Bytes held (dynamic tables, open streams, a partial header block).
  size_t memory() const;

  size_t open_streams() const { return streams_.size(); }
  uint64_t untracked_streams() const { return untracked_; }  // requests past max_open_streams

 private:
  struct Stream {
    uint64_t start_ns = 0;
    uint8_t method = 0;
    bool grpc = false;
    uint16_t status = 0;  // the final status once seen
  };
  // One direction: its HPACK decoder and the header block it is assembling.
  struct Direction {
    explicit Direction(const hpack::Limits& limits) : decoder(limits) {}
    hpack::Decoder decoder;
    WipedBytes block;  // header bytes: zeroed once decoded (wiped.h)
    bool in_block = false;
    size_t continuations = 0;
    uint64_t block_start_ns = 0;  // when the block's first frame was seen
    uint32_t block_stream = 0;
    bool block_end_stream = false;
    bool block_is_push = false;
  };

  void fail(const std::string& why);
  void on_frame_checked(bool outgoing, Direction& dir, const FrameHeader& h,
                        std::span<const uint8_t> payload, uint64_t now_ns,
                        std::vector<Exchange>& out);
  void start_block(Direction& dir, const FrameHeader& h, std::span<const uint8_t> fragment,
                   bool push, bool outgoing, uint64_t now_ns, std::vector<Exchange>& out);
  void on_block_done(bool outgoing, Direction& dir, uint64_t now_ns, std::vector<Exchange>& out);
  void finish(uint32_t id, bool reset, int grpc_code, uint64_t now_ns, std::vector<Exchange>& out);
  bool is_request_side(bool outgoing) const { return outgoing == (side_ == Side::kClient); }

  Side side_;
  Limits limits_;
  Direction out_;
  Direction in_;
  std::unordered_map<uint32_t, Stream> streams_;
  uint32_t last_request_id_ = 0;  // the highest request stream id seen
  uint64_t untracked_ = 0;
  std::string why_;
};

}  // namespace sonde::agent::http2
