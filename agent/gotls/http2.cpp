#include "agent/gotls/http2.h"

#include <strings.h>

#include <algorithm>

#include "bpf/gotls/gotls.h"

namespace sonde::agent::http2 {
namespace {

uint32_t read_be32(std::span<const uint8_t> bytes) {
  return (static_cast<uint32_t>(bytes[0]) << 24) | (static_cast<uint32_t>(bytes[1]) << 16) |
         (static_cast<uint32_t>(bytes[2]) << 8) | static_cast<uint32_t>(bytes[3]);
}

uint8_t method_of(std::string_view value) {
  static constexpr std::pair<std::string_view, uint8_t> kMethods[] = {
      {"GET", SONDE_HTTP_GET},         {"POST", SONDE_HTTP_POST}, {"PUT", SONDE_HTTP_PUT},
      {"DELETE", SONDE_HTTP_DELETE},   {"HEAD", SONDE_HTTP_HEAD}, {"PATCH", SONDE_HTTP_PATCH},
      {"OPTIONS", SONDE_HTTP_OPTIONS},
  };
  for (const auto& [name, method] : kMethods) {
    if (value == name) return method;
  }
  return SONDE_HTTP_OTHER;
}

// A non-negative decimal of at most `digits` digits, or -1.
int parse_decimal(std::string_view text, size_t digits) {
  if (text.empty() || text.size() > digits) return -1;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

// What a header block says about its stream; everything else in it is decoded and dropped.
struct BlockFields {
  bool has_method = false;
  uint8_t method = SONDE_HTTP_OTHER;
  bool has_status = false;
  int status = -1;  // -1: present but not 3 digits in 100..599
  bool grpc = false;
  int grpc_status = -1;  // -1: absent or not 0..16

  void add(std::string_view name, std::string_view value) {
    if (name == ":method" && !has_method) {
      has_method = true;
      method = method_of(value);
    } else if (name == ":status" && !has_status) {
      has_status = true;
      const int parsed = value.size() == 3 ? parse_decimal(value, 3) : -1;
      status = parsed >= 100 && parsed <= 599 ? parsed : -1;
    } else if (name == "content-type") {
      constexpr std::string_view kGrpc = "application/grpc";
      grpc = value.size() >= kGrpc.size() &&
             strncasecmp(value.data(), kGrpc.data(), kGrpc.size()) == 0;
    } else if (name == "grpc-status") {
      const int parsed = parse_decimal(value, 2);
      grpc_status = parsed <= 16 ? parsed : -1;
    }
  }
};

// The dynamic tables keep the values of BlockFields' names only (hpack.h): nothing else a peer
// sends (authorization, cookies) is kept past the decoding of its block.
Limits reading_fields_only(Limits limits) {
  limits.hpack.kept_values = {":method", ":status", "content-type", "grpc-status"};
  return limits;
}

std::string frame_name(uint8_t type) {
  static constexpr const char* kNames[] = {
      "DATA",         "HEADERS", "PRIORITY", "RST_STREAM",    "SETTINGS",
      "PUSH_PROMISE", "PING",    "GOAWAY",   "WINDOW_UPDATE", "CONTINUATION"};
  if (type < std::size(kNames)) return kNames[type];
  return "frame type " + std::to_string(type);
}

// A block buffer larger than this is released once decoded, so that an idle connection does not
// keep the largest block it ever saw.
constexpr size_t kKeptBlockBytes = 4096;

}  // namespace

FrameHeader parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes) {
  FrameHeader h{};
  h.length = (static_cast<uint32_t>(bytes[0]) << 16) | (static_cast<uint32_t>(bytes[1]) << 8) |
             static_cast<uint32_t>(bytes[2]);
  h.type = bytes[3];
  h.flags = bytes[4];
  h.stream_id = read_be32(bytes.subspan<5, 4>()) & 0x7fffffffU;
  return h;
}

Connection::Connection(Side side, const Limits& limits)
    : side_(side), limits_(reading_fields_only(limits)), out_(limits_.hpack), in_(limits_.hpack) {}

void Connection::lost() {
  fail("lost");
}

void Connection::close(uint64_t now_ns, std::vector<Exchange>& out) {
  if (broken()) return;
  std::vector<uint32_t> open;
  open.reserve(streams_.size());
  for (const auto& [id, stream] : streams_) open.push_back(id);
  std::sort(open.begin(), open.end());  // in request order, so that the output is stable
  for (const uint32_t id : open) finish(id, false, -1, now_ns, out);
}

void Connection::fail(const std::string& why) {
  if (broken()) return;
  why_ = why;
  // Nothing more is decoded: give the memory back now rather than when the connection closes.
  streams_ = {};
  out_ = Direction(limits_.hpack);
  in_ = Direction(limits_.hpack);
}

size_t Connection::memory() const {
  // An unordered_map node holds the pair and a next pointer (and, in libstdc++, no cached hash
  // for integer keys); the bucket array is one pointer per bucket.
  constexpr size_t kNodeBytes = sizeof(std::pair<const uint32_t, Stream>) + sizeof(void*);
  return out_.decoder.memory() + in_.decoder.memory() + out_.block.capacity() +
         in_.block.capacity() + streams_.size() * kNodeBytes +
         streams_.bucket_count() * sizeof(void*);
}

void Connection::on_frame(bool outgoing, const FrameHeader& h, std::span<const uint8_t> payload,
                          uint64_t now_ns, std::vector<Exchange>& out) {
  if (broken()) return;
  on_frame_checked(outgoing, outgoing ? out_ : in_, h, payload, now_ns, out);
}

void Connection::on_frame_checked(bool outgoing, Direction& dir, const FrameHeader& h,
                                  std::span<const uint8_t> payload, uint64_t now_ns,
                                  std::vector<Exchange>& out) {
  const std::string what = frame_name(h.type);
  if (h.length > kMaxFrameLength) return fail("malformed: " + what + " longer than 2^24-1");
  const bool needs_payload = h.type == kHeaders || h.type == kContinuation ||
                             h.type == kRstStream || h.type == kPushPromise;
  if (needs_payload && payload.size() != h.length) {
    return fail("lost: " + what + " of " + std::to_string(h.length) + " bytes passed with " +
                std::to_string(payload.size()));
  }
  // RFC 9113 6.10: a header block is contiguous frames of its stream.
  if (dir.in_block && (h.type != kContinuation || h.stream_id != dir.block_stream)) {
    return fail("malformed: " + what + " on stream " + std::to_string(h.stream_id) +
                " inside the header block of stream " + std::to_string(dir.block_stream));
  }
  const bool stream_frame = h.type == kData || h.type == kHeaders || h.type == kPriority ||
                            h.type == kRstStream || h.type == kPushPromise ||
                            h.type == kContinuation;
  const bool connection_frame = h.type == kSettings || h.type == kPing || h.type == kGoaway;
  if (stream_frame && h.stream_id == 0) return fail("malformed: " + what + " on stream 0");
  if (connection_frame && h.stream_id != 0) {
    return fail("malformed: " + what + " on stream " + std::to_string(h.stream_id));
  }

  switch (h.type) {
    case kData: {
      if (is_request_side(outgoing)) return;
      const auto it = streams_.find(h.stream_id);
      if (it == streams_.end()) return;
      if (it->second.status == 0) {
        return fail("malformed: response DATA on stream " + std::to_string(h.stream_id) +
                    " before its final status");
      }
      if ((h.flags & kFlagEndStream) != 0) finish(h.stream_id, false, -1, now_ns, out);
      return;
    }
    case kHeaders: {
      size_t begin = 0;
      size_t pad = 0;
      if ((h.flags & kFlagPadded) != 0) {
        if (payload.empty()) return fail("malformed: PADDED HEADERS without its pad length");
        pad = payload[0];
        begin = 1;
      }
      if ((h.flags & kFlagPriority) != 0) begin += 5;
      if (begin + pad > payload.size()) return fail("malformed: HEADERS padding past its end");
      return start_block(dir, h, payload.subspan(begin, payload.size() - begin - pad), false,
                         outgoing, now_ns, out);
    }
    case kPushPromise: {
      if (is_request_side(outgoing)) return fail("malformed: PUSH_PROMISE from the client");
      size_t begin = 4;  // the promised stream id
      size_t pad = 0;
      if ((h.flags & kFlagPadded) != 0) {
        if (payload.empty()) return fail("malformed: PADDED PUSH_PROMISE without its pad length");
        pad = payload[0];
        begin += 1;
      }
      if (begin + pad > payload.size()) return fail("malformed: PUSH_PROMISE shorter than needs");
      return start_block(dir, h, payload.subspan(begin, payload.size() - begin - pad), true,
                         outgoing, now_ns, out);
    }
    case kContinuation:
      if (!dir.in_block) return fail("malformed: CONTINUATION without a header block");
      if (++dir.continuations > limits_.max_continuations) {
        return fail("malformed: header block of more than " +
                    std::to_string(limits_.max_continuations) + " CONTINUATION frames");
      }
      if (payload.size() > limits_.max_header_block - dir.block.size()) {
        return fail("malformed: header block over " + std::to_string(limits_.max_header_block) +
                    " bytes");
      }
      dir.block.insert(dir.block.end(), payload.begin(), payload.end());
      if ((h.flags & kFlagEndHeaders) != 0) on_block_done(outgoing, dir, now_ns, out);
      return;
    case kPriority:
      if (h.length != 5) return fail("malformed: PRIORITY of " + std::to_string(h.length));
      return;
    case kRstStream:
      if (h.length != 4) return fail("malformed: RST_STREAM of " + std::to_string(h.length));
      finish(h.stream_id, true, -1, now_ns, out);
      return;
    case kSettings:
      if ((h.flags & kFlagAck) != 0 ? h.length != 0 : h.length % 6 != 0) {
        return fail("malformed: SETTINGS of " + std::to_string(h.length));
      }
      return;
    case kPing:
      if (h.length != 8) return fail("malformed: PING of " + std::to_string(h.length));
      return;
    case kGoaway: {
      if (h.length < 8) return fail("malformed: GOAWAY of " + std::to_string(h.length));
      if (payload.empty() || is_request_side(outgoing)) return;
      if (payload.size() < 8) return fail("lost: GOAWAY passed with part of its first 8 bytes");
      // RFC 9113 6.8: streams above last-stream-id were not and will not be processed.
      const uint32_t last = read_be32(payload) & 0x7fffffffU;
      std::vector<uint32_t> ended;
      for (const auto& [id, stream] : streams_) {
        if (id > last) ended.push_back(id);
      }
      std::sort(ended.begin(), ended.end());
      for (const uint32_t id : ended) finish(id, true, -1, now_ns, out);
      return;
    }
    case kWindowUpdate:
      if (h.length != 4) return fail("malformed: WINDOW_UPDATE of " + std::to_string(h.length));
      return;
    default:  // RFC 9113 5.5: unknown frame types are ignored
      return;
  }
}

void Connection::start_block(Direction& dir, const FrameHeader& h,
                             std::span<const uint8_t> fragment, bool push, bool outgoing,
                             uint64_t now_ns, std::vector<Exchange>& out) {
  if (fragment.size() > limits_.max_header_block) {
    return fail("malformed: header block over " + std::to_string(limits_.max_header_block) +
                " bytes");
  }
  dir.block.assign(fragment.begin(), fragment.end());
  dir.in_block = true;
  dir.continuations = 0;
  dir.block_start_ns = now_ns;
  dir.block_stream = h.stream_id;
  // PUSH_PROMISE's 0x1 is not END_STREAM; the promise never ends its stream.
  dir.block_end_stream = !push && (h.flags & kFlagEndStream) != 0;
  dir.block_is_push = push;
  if ((h.flags & kFlagEndHeaders) != 0) on_block_done(outgoing, dir, now_ns, out);
}

void Connection::on_block_done(bool outgoing, Direction& dir, uint64_t now_ns,
                               std::vector<Exchange>& out) {
  dir.in_block = false;
  BlockFields fields;
  const Status decoded = dir.decoder.decode(
      dir.block,
      [&fields](std::string_view name, std::string_view value) { fields.add(name, value); });
  wipe(dir.block);
  if (dir.block.capacity() > kKeptBlockBytes) WipedBytes().swap(dir.block);
  if (!decoded.ok()) return fail("malformed: HPACK: " + decoded.error().message());
  if (dir.block_is_push) return;  // the promised request is not counted

  const uint32_t id = dir.block_stream;
  if (is_request_side(outgoing)) {
    if (id % 2 == 0) return fail("malformed: request on even stream " + std::to_string(id));
    // A later block of a known stream, or of one already finished: request trailers.
    if (id <= last_request_id_) return;
    last_request_id_ = id;
    if (!fields.has_method) return fail("malformed: request without :method");
    if (streams_.size() >= limits_.max_open_streams) {
      ++untracked_;
      return;
    }
    streams_.emplace(id, Stream{dir.block_start_ns, fields.method, fields.grpc, 0});
    return;
  }

  const auto it = streams_.find(id);
  if (it == streams_.end()) return;  // pushed, untracked, or already reset
  Stream& stream = it->second;
  if (stream.status == 0) {
    if (!fields.has_status || fields.status < 0) {
      return fail("malformed: response on stream " + std::to_string(id) +
                  " without a valid :status");
    }
    if (fields.status < 200) {
      if (dir.block_end_stream) return fail("malformed: 1xx response that ends its stream");
      return;  // informational; the final status follows
    }
    stream.status = static_cast<uint16_t>(fields.status);
  } else if (!dir.block_end_stream) {
    return fail("malformed: trailers on stream " + std::to_string(id) + " without END_STREAM");
  }
  if (dir.block_end_stream) {
    finish(id, false, stream.grpc ? fields.grpc_status : -1, now_ns, out);
  }
}

void Connection::finish(uint32_t id, bool reset, int grpc_code, uint64_t now_ns,
                        std::vector<Exchange>& out) {
  const auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const Stream& stream = it->second;
  out.push_back(Exchange{
      .protocol = stream.grpc ? Protocol::kGrpc : Protocol::kHttp2,
      .method = stream.method,
      .status = stream.status,
      .grpc_code = stream.grpc ? grpc_code : -1,
      .reset = reset,
      .duration_ns = now_ns > stream.start_ns ? now_ns - stream.start_ns : 0,
  });
  streams_.erase(it);
}

}  // namespace sonde::agent::http2
