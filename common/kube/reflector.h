// Reflector: keeps a ReflectorSink in step with one resource collection on the API server,
// with client-go's reflector semantics:
//
//  - List with resourceVersion=0 — served from the API server's watch cache, not a quorum read
//    of etcd, so a DaemonSet rollout does not send one etcd read per node — and hand the full
//    state to the sink, then watch from the list's resourceVersion with bookmarks allowed.
//    The list may be older than what this reflector saw before a relist (another API server's
//    cache can lag); the watch from its version replays forward, so the sink converges.
//    Paging: the watch cache ignores `limit` for resourceVersion=0 and answers with the whole
//    collection in one response; a server with the watch cache disabled serves the list from
//    etcd and honours `limit`, so page_size is still sent and continue tokens followed (a
//    continued page carries no resourceVersion: the token holds it).
//  - Every event and every BOOKMARK moves the resume point (the last resourceVersion seen).
//    A watch the server ends (timeoutSeconds, randomised in [min, 2*min) so a fleet does not
//    reconnect in step) or a dropped connection resumes from that point: nothing is listed
//    again, nothing is delivered twice, an event cut off mid-line is not delivered and comes
//    again on the resumed watch.
//  - 410 Gone — as the watch's HTTP status, as an ERROR event inside the stream, or any
//    "too old resource version" — means the resume point was compacted away: list again.
//    A 410 on a list page (expired continue token) restarts the list unpaged.
//  - Other failures (refused, 429, 5xx, ERROR events) back off exponentially with jitter
//    and retry; the backoff resets once a watch delivers again.
//  - resourceVersion is opaque: stored and sent back, never compared or parsed.
//
// run() blocks on the calling thread until the StopSignal fires, which ends a list or watch in
// flight at once; the sink is called only from that thread. stats() and last_resource_version() may
// be read from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/kube/api_client.h"
#include "common/kube/backoff.h"
#include "common/kube/stop_signal.h"

namespace sonde::kube {

class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;

  // A (re)list arrives as begin_list(), list_item() per object as pages come in, and
  // end_list(); a list that fails part-way is abandoned by calling begin_list() again, so a
  // sink must not act on items before end_list(). The default collects the items and calls
  // replace(); a sink that can digest objects one at a time overrides all three so a large
  // list is never held whole.
  virtual void begin_list() { pending_.clear(); }
  virtual void list_item(Json item) { pending_.push_back(std::move(item)); }
  virtual void end_list(const std::string& resource_version) {
    std::vector<Json> items = std::move(pending_);
    pending_.clear();
    replace(std::move(items), resource_version);
  }

  // The complete state after a (re)list; anything the sink holds that is absent is gone.
  virtual void replace(std::vector<Json> items, const std::string& resource_version) = 0;
  // One watch event: kAdded, kModified or kDeleted.
  virtual void apply(WatchEvent::Type type, Json object) = 0;

 private:
  std::vector<Json> pending_;
};

struct ReflectorOptions {
  std::string ns;  // empty: every namespace (or a cluster-scoped resource)
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  Duration min_watch_timeout = std::chrono::minutes(5);
  // A watch silent this long is abandoned and resumed at once, so a dead connection costs at
  // most this (plus one request) rather than timeoutSeconds. An idle collection's watch is
  // thus re-opened about this often: one cheap request, answered from the watch cache.
  Duration watch_idle_timeout = std::chrono::seconds(50);
  BackoffPolicy backoff;  // 800 ms doubling to 30 s, full jitter
};

struct ReflectorStats {
  uint64_t lists = 0;  // completed (re)lists
  uint64_t list_errors = 0;
  uint64_t relists_after_gone = 0;
  uint64_t watches = 0;              // watch requests made
  uint64_t watch_errors = 0;         // watches that failed other than by 410
  uint64_t watch_idle_restarts = 0;  // watches abandoned after watch_idle_timeout of silence
  uint64_t events = 0;               // ADDED/MODIFIED/DELETED delivered to the sink
  uint64_t bookmarks = 0;
};

class Reflector {
 public:
  // `client`, `sink` and `clock` must outlive the reflector.
  Reflector(ApiClient& client, ResourceType type, ReflectorOptions options, ReflectorSink& sink,
            const Clock& clock = real_clock());

  void run(StopSignal& stop);

  std::string last_resource_version() const;
  ReflectorStats stats() const;

 private:
  enum class WatchOutcome { kResume, kRelist, kBackoff };

  Status list_and_replace(StopSignal& stop);
  WatchOutcome watch_once(StopSignal& stop, bool& healthy);
  void set_resource_version(const std::string& rv);

  ApiClient& client_;
  const ResourceType type_;
  const ReflectorOptions options_;
  ReflectorSink& sink_;
  const Clock& clock_;
  mutable std::mutex mu_;  // guards stats_ and last_rv_ for readers on other threads
  ReflectorStats stats_;
  std::string last_rv_;
};

}  // namespace sonde::kube
