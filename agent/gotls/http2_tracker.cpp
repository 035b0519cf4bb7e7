#include "agent/gotls/http2_tracker.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace sonde::agent {
namespace {

constexpr size_t kHead = SONDE_H2_EVENT_HEAD;
static_assert(kHead == 48, "sonde_h2_event's layout is shared with bpf/gotls/gotls.bpf.c");
static_assert(sizeof(sonde_h2_event) == kHead + SONDE_GOTLS_H2_CHUNK);

// The histogram bounds the kernel uses for HTTP/1.x, so both protocols share buckets.
constexpr uint64_t kBoundsNs[SONDE_GOTLS_BUCKETS] = SONDE_GOTLS_BUCKET_BOUNDS_NS;

}  // namespace

bool Http2Tracker::KeyLess::operator()(const sonde_tls_request_key& a,
                                       const sonde_tls_request_key& b) const {
  return std::tie(a.tgid, a.direction, a.protocol, a.method, a.status_class, a.grpc_code) <
         std::tie(b.tgid, b.direction, b.protocol, b.method, b.status_class, b.grpc_code);
}

Http2Tracker::Http2Tracker(const Limits& limits, std::function<void(uint32_t, uint64_t)> forget)
    : limits_(limits), forget_(std::move(forget)) {}

void Http2Tracker::on_record(std::span<const uint8_t> record) {
  std::lock_guard lock(mu_);
  if (record.size() < kHead) {
    stats_.bad_records++;
    return;
  }
  sonde_h2_event e{};
  std::memcpy(&e, record.data(), kHead);
  if (e.len > SONDE_GOTLS_H2_CHUNK || record.size() < kHead + e.len) {
    stats_.bad_records++;
    return;
  }
  const std::span<const uint8_t> data = record.subspan(kHead, e.len);
  const Key key{e.pid, e.conn};
  if (e.kind == SONDE_H2_PREFACE) {
    start_locked(key, e);
    return;
  }
  if (e.kind == SONDE_H2_CLOSED) {
    end_locked(key, e);
    return;
  }
  auto it = conns_.find(key);
  if (it == conns_.end()) {
    if (!ignored_.contains(key)) {
      stats_.unparsed++;
      ignore_locked(key);
    }
    return;
  }
  Conn& c = *it->second;
  lru_.splice(lru_.end(), lru_, c.lru);
  const bool outgoing = e.outgoing != 0;
  Direction& d = c.dirs[outgoing ? 1 : 0];
  if (e.seq != d.next_seq || e.kind == SONDE_H2_LOST) {
    give_up_locked(it, true);
    return;
  }
  d.next_seq++;
  if (e.kind == SONDE_H2_FRAME) {
    if (d.in_frame) {  // the previous frame's payload did not add up
      give_up_locked(it, true);
      return;
    }
    const http2::FrameHeader h = http2::parse_frame_header(
        std::span<const uint8_t, http2::kFrameHeaderBytes>(e.header, http2::kFrameHeaderBytes));
    if (!sonde_h2_forwarded(h.type, h.length) || h.length == 0) {
      if (!data.empty()) {
        give_up_locked(it, true);
        return;
      }
      deliver_locked(it, outgoing, h, {}, e.ts_ns);
      return;
    }
    if (data.size() > h.length) {
      give_up_locked(it, true);
      return;
    }
    if (data.size() == h.length) {
      deliver_locked(it, outgoing, h, data, e.ts_ns);
      return;
    }
    d.in_frame = true;
    d.header = h;
    d.ts_ns = e.ts_ns;
    d.payload.assign(data.begin(), data.end());
    return;
  }
  if (e.kind != SONDE_H2_PAYLOAD || !d.in_frame || data.empty() ||
      d.payload.size() + data.size() > d.header.length) {
    give_up_locked(it, true);
    return;
  }
  d.payload.insert(d.payload.end(), data.begin(), data.end());
  if (d.payload.size() < d.header.length) return;
  d.in_frame = false;
  // Moved out: delivering may give the connection up, and `d` with it. Zeroed when it goes.
  WipedBytes payload = std::move(d.payload);
  d.payload.clear();
  deliver_locked(it, outgoing, d.header, payload, d.ts_ns);
}

void Http2Tracker::start_locked(const Key& key, const sonde_h2_event& e) {
  if (auto old = conns_.find(key); old != conns_.end()) drop_locked(old, false);
  ignored_.erase(key);
  // The preface came in the direction it names: this process wrote it (client) or read it.
  const bool outgoing = e.outgoing != 0;
  auto c = std::make_unique<Conn>(outgoing ? http2::Side::kClient : http2::Side::kServer,
                                  limits_.connection);
  c->dirs[outgoing ? 1 : 0].next_seq = e.seq + 1;
  c->memory = c->connection.memory();
  memory_ += c->memory;
  Holding& h = holdings_[key.first];
  h.connections++;
  h.memory += c->memory;
  c->lru = lru_.insert(lru_.end(), key);
  conns_.emplace(key, std::move(c));
  stats_.followed++;
  enforce_limits_locked();
}

void Http2Tracker::deliver_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool outgoing,
                                  const http2::FrameHeader& h, std::span<const uint8_t> payload,
                                  uint64_t ts_ns) {
  Conn& c = *it->second;
  scratch_.clear();
  c.connection.on_frame(outgoing, h, payload, ts_ns, scratch_);
  for (const http2::Exchange& x : scratch_) count_locked(it->first.first, c.side, x);
  if (c.connection.broken()) {
    give_up_locked(it, false);
    return;
  }
  size_t now = c.connection.memory();
  for (const Direction& d : c.dirs) now += d.payload.capacity();
  memory_ = memory_ - c.memory + now;
  Holding& held = holdings_[it->first.first];
  held.memory = held.memory - c.memory + now;
  c.memory = now;
  enforce_limits_locked();
}

void Http2Tracker::count_locked(uint32_t pid, http2::Side side, const http2::Exchange& x) {
  sonde_tls_request_key k{};
  k.tgid = pid;
  k.direction = side == http2::Side::kClient ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER;
  k.protocol = x.protocol == http2::Protocol::kGrpc ? SONDE_TLS_GRPC_CALL : SONDE_TLS_HTTP2_STREAM;
  k.method = x.method < SONDE_HTTP_METHOD_COUNT ? x.method : static_cast<uint8_t>(SONDE_HTTP_OTHER);
  if (x.reset) {
    k.status_class = SONDE_TLS_STATUS_RESET;
  } else if (x.status >= 100 && x.status <= 599) {
    k.status_class = static_cast<uint8_t>(x.status / 100);
  }
  if (x.protocol == http2::Protocol::kGrpc && x.grpc_code >= 0 && x.grpc_code <= 16) {
    k.grpc_code = static_cast<uint8_t>(x.grpc_code + 1);
  }
  sonde_tls_request_stats& s = requests_[pid][k];
  s.count++;
  s.duration_sum_ns += x.duration_ns;
  size_t bucket = SONDE_GOTLS_BUCKETS;
  for (size_t i = 0; i < SONDE_GOTLS_BUCKETS; ++i) {
    if (x.duration_ns <= kBoundsNs[i]) {
      bucket = i;
      break;
    }
  }
  s.buckets[bucket]++;
}

void Http2Tracker::give_up_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool lost) {
  if (lost) {
    it->second->connection.lost();
    stats_.lost++;
  } else {
    stats_.malformed++;
  }
  drop_locked(it, true);
}

void Http2Tracker::drop_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool remember) {
  memory_ -= it->second->memory;
  lru_.erase(it->second->lru);
  const Key key = it->first;
  if (auto h = holdings_.find(key.first); h != holdings_.end()) {
    h->second.memory -= it->second->memory;
    if (--h->second.connections == 0) holdings_.erase(h);
  }
  conns_.erase(it);
  if (remember) ignore_locked(key);
}

void Http2Tracker::ignore_locked(const Key& key) {
  if (ignored_.size() < limits_.max_ignored) ignored_.insert(key);
}

void Http2Tracker::enforce_limits_locked() {
  while (!lru_.empty() &&
         (conns_.size() > limits_.max_connections || memory_ > limits_.max_memory)) {
    // The process holding the most of what is over its bound gives up its least recently active
    // connection: a process flooding the tracker evicts its own connections, not its neighbours'.
    const bool by_count = conns_.size() > limits_.max_connections;
    auto most = holdings_.begin();
    for (auto h = holdings_.begin(); h != holdings_.end(); ++h) {
      if (by_count ? h->second.connections > most->second.connections
                   : h->second.memory > most->second.memory) {
        most = h;
      }
    }
    const uint32_t pid = most->first;
    const Key key =
        *std::find_if(lru_.begin(), lru_.end(), [pid](const Key& k) { return k.first == pid; });
    auto it = conns_.find(key);
    stats_.evicted++;
    drop_locked(it, true);
    if (forget_) forget_(key.first, key.second);
  }
}

std::map<uint32_t, Http2Tracker::Requests> Http2Tracker::counts() const {
  std::lock_guard lock(mu_);
  std::map<uint32_t, Requests> out;
  for (const auto& [pid, by_key] : requests_) {
    Requests& r = out[pid];
    for (const auto& [k, s] : by_key) r.emplace_back(k, s);
  }
  return out;
}

void Http2Tracker::end_locked(const Key& key, const sonde_h2_event& e) {
  ignored_.erase(key);
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  if (e.seq != it->second->dirs[e.outgoing != 0 ? 1 : 0].next_seq) {
    give_up_locked(it, true);
    ignored_.erase(key);
    return;
  }
  scratch_.clear();
  it->second->connection.close(e.ts_ns, scratch_);
  for (const http2::Exchange& x : scratch_) count_locked(key.first, it->second->side, x);
  drop_locked(it, false);
}

void Http2Tracker::on_exit_state(uint32_t tgid, uint64_t conn, bool outgoing, uint64_t next_seq,
                                 bool dead) {
  std::lock_guard lock(mu_);
  auto it = conns_.find({tgid, conn});
  if (it == conns_.end()) return;
  if (dead || it->second->dirs[outgoing ? 1 : 0].next_seq != next_seq) give_up_locked(it, true);
}

Http2Tracker::Requests Http2Tracker::take(uint32_t tgid, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  for (auto it = conns_.lower_bound({tgid, 0}); it != conns_.end() && it->first.first == tgid;
       ++it) {
    scratch_.clear();
    it->second->connection.close(now_ns, scratch_);
    for (const http2::Exchange& x : scratch_) count_locked(tgid, it->second->side, x);
  }
  Requests out;
  if (auto it = requests_.find(tgid); it != requests_.end()) {
    for (const auto& [k, s] : it->second) out.emplace_back(k, s);
    requests_.erase(it);
  }
  for (auto it = conns_.lower_bound({tgid, 0}); it != conns_.end() && it->first.first == tgid;) {
    auto next = std::next(it);
    drop_locked(it, false);
    it = next;
  }
  for (auto it = ignored_.lower_bound({tgid, 0}); it != ignored_.end() && it->first == tgid;) {
    it = ignored_.erase(it);
  }
  return out;
}

Http2Tracker::Stats Http2Tracker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t Http2Tracker::connections() const {
  std::lock_guard lock(mu_);
  return conns_.size();
}

size_t Http2Tracker::memory() const {
  std::lock_guard lock(mu_);
  return memory_;
}

}  // namespace sonde::agent
