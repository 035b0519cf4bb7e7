// Http2Tracker: the HTTP/2 requests of every followed Go TLS connection on the node, rebuilt
// from the kernel's ring-buffer records (struct sonde_h2_event, bpf/gotls/gotls.h) and summed per
// process like the kernel sums HTTP/1.x (sonde_tls_request_key / sonde_tls_request_stats).
//
// Semantics:
//   - A connection starts with its preface record (the kernel saw the 24-byte preface written:
//     this process is the client; read: the server): one http2::Connection per (pid, conn). A
//     second preface on the same (pid, conn) is a new connection at a reused address: the old
//     one is dropped, its open streams uncounted.
//   - Records of a connection without a preface record here count the connection once as
//     `unparsed` and are ignored: a MIDWAY record (the kernel recognized frames on a connection
//     older than the probes, whose HPACK history is gone), or any record of a connection whose
//     preface record was lost. An evicted connection is not counted again.
//   - Per direction, records carry sequence numbers 0, 1, 2, ...: a gap, a LOST record, or
//     chunks that do not add up to their frame make the connection `lost`
//     (http2::Connection::lost()): nothing more is counted on it, nothing wrong is emitted.
//   - Forwarded payloads (sonde_h2_forwarded()) are reassembled from their chunks; every frame
//     goes to http2::Connection::on_frame() in order. A connection it finds malformed counts
//     once as `malformed`.
//   - When the kernel sees a connection end (a CLOSED record: a Read of it failed), each stream
//     still open on it is one request, as at the exit below, and the connection is forgotten.
//   - At the process's exit (take()), each stream still open on a followed connection is one
//     request too (http2::Connection::close()): status_class from its final :status if one came,
//     else 0 ("unknown": no response), no gRPC code, its duration up to the exit as the agent
//     saw it. HTTP/1.x counts a request still waiting for its response the same way
//     (TlsProbes::take()). Before that, on_exit_state() folds in a loss the kernel had not
//     reported yet (it reports one at the connection's next call, which never comes): that
//     connection is `lost` and nothing of it is counted.
//   - Each finished stream (http2::Exchange) is one request of its process: protocol
//     SONDE_TLS_HTTP2_STREAM or SONDE_TLS_GRPC_CALL, status_class SONDE_TLS_STATUS_RESET when
//     reset, grpc_code = grpc-status + 1 (0: none), duration in the histogram as HTTP/1.x.
//
// Bounds (the peer controls how many connections and streams there are):
//   - at most Limits::max_connections connections and Limits::max_memory bytes of
//     http2::Connection::memory() in all; past either the least recently active connection of
//     the process holding the most connections (or bytes) is evicted, so that a process that
//     floods the tracker loses its own connections first, not its neighbours' (counted as
//     `evicted`), and `forget` is called so the kernel frees its framing
//     states too: that is how connections that ended unseen (no failed Read: there is no probe
//     on Close) leave the kernel map before their process exits.
//   - connections known to be ignored (unparsed, evicted, lost, malformed): at most
//     Limits::max_ignored remembered; past it an ignored connection's later records may count it
//     as `unparsed` again.
//   - per process: one sonde_tls_request_stats per key, a bounded set (2 directions x 2
//     protocols x 8 methods x 7 status classes x 18 gRPC codes); processes leave with take().
//
// Thread-safety: all methods may be called concurrently (one mutex). Cost: O(log n) per record
// plus http2::Connection's work.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "agent/gotls/http2.h"
#include "agent/gotls/wiped.h"
#include "bpf/gotls/gotls.h"

namespace sonde::agent {

// Http2Tracker's bounds (see above).
struct Http2TrackerLimits {
  size_t max_connections = SONDE_GOTLS_MAX_H2_STATES / 2 - 256;
  size_t max_memory = size_t{64} << 20;
  size_t max_ignored = 65536;
  http2::Limits connection;
};

class Http2Tracker {
 public:
  using Limits = Http2TrackerLimits;
  // What became of connections, node-wide (sonde_agent_gotls_http2_connections_total).
  struct Stats {
    uint64_t followed = 0;     // preface records: connections followed
    uint64_t unparsed = 0;     // records of a connection whose start was not seen
    uint64_t malformed = 0;    // http2::Connection found a peer's bytes malformed
    uint64_t lost = 0;         // events lost between the kernel and here
    uint64_t evicted = 0;      // dropped to keep Limits
    uint64_t bad_records = 0;  // records shorter than their header says (never from our kernel)
  };
  using Requests = std::vector<std::pair<sonde_tls_request_key, sonde_tls_request_stats>>;
  // `forget(pid, conn)`: the kernel should stop following that connection (an eviction).
  explicit Http2Tracker(const Limits& limits = Limits(),
                        std::function<void(uint32_t, uint64_t)> forget = nullptr);

  // One ring-buffer record, as the kernel submitted it.
  void on_record(std::span<const uint8_t> record);
  // The requests counted for each process so far.
  std::map<uint32_t, Requests> counts() const;
  // At tgid's exit, the kernel's framing state of one direction of its connection `conn`: the
  // sequence number of its next event and whether the kernel gave the direction up. Either
  // telling of events this tracker has not seen gives the connection up as `lost`. Call after
  // the ring buffer is drained, before take().
  void on_exit_state(uint32_t tgid, uint64_t conn, bool outgoing, uint64_t next_seq, bool dead);
  // Returns tgid's requests, with each stream still open counted as ended at `now_ns` (the
  // exit; CLOCK_MONOTONIC ns, the kernel's clock), and forgets the process and its connections.
  Requests take(uint32_t tgid, uint64_t now_ns);
  Stats stats() const;
  size_t connections() const;
  size_t memory() const;

 private:
  using Key = std::pair<uint32_t, uint64_t>;  // (pid, conn)
  struct Direction {
    uint64_t next_seq = 0;
    bool in_frame = false;  // a forwarded frame's payload is being reassembled
    http2::FrameHeader header{};
    uint64_t ts_ns = 0;
    WipedBytes payload;  // header bytes of a frame being reassembled (wiped.h)
  };
  struct Conn {
    Conn(http2::Side s, const http2::Limits& limits) : side(s), connection(s, limits) {}
    http2::Side side;
    http2::Connection connection;
    std::array<Direction, 2> dirs;  // [outgoing]
    size_t memory = 0;              // connection.memory() + payload buffers, as last summed
    std::list<Key>::iterator lru;
  };

  void start_locked(const Key& key, const sonde_h2_event& e);
  // A CLOSED record: the connection's open streams end at its time, and it is forgotten (an
  // ignored one too: the kernel freed its state).
  void end_locked(const Key& key, const sonde_h2_event& e);
  void drop_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool remember);
  void ignore_locked(const Key& key);
  // The connection can no longer be trusted: counted once (lost or malformed), then ignored.
  void give_up_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool lost);
  void deliver_locked(std::map<Key, std::unique_ptr<Conn>>::iterator it, bool outgoing,
                      const http2::FrameHeader& h, std::span<const uint8_t> payload,
                      uint64_t ts_ns);
  void count_locked(uint32_t pid, http2::Side side, const http2::Exchange& x);
  void enforce_limits_locked();

  const Limits limits_;
  const std::function<void(uint32_t, uint64_t)> forget_;
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Conn>> conns_;
  std::list<Key> lru_;  // least recently active first
  std::set<Key> ignored_;
  size_t memory_ = 0;
  struct Holding {
    size_t connections = 0;
    size_t memory = 0;  // of its connections, as memory_ sums them
  };
  std::map<uint32_t, Holding> holdings_;  // by pid, of conns_; none empty
  struct KeyLess {
    bool operator()(const sonde_tls_request_key& a, const sonde_tls_request_key& b) const;
  };
  std::map<uint32_t, std::map<sonde_tls_request_key, sonde_tls_request_stats, KeyLess>> requests_;
  Stats stats_;
  std::vector<http2::Exchange> scratch_;
};

}  // namespace sonde::agent
