// ApiClient: a Kubernetes REST client on cpprestsdk for what sonde needs — get, paged list,
// streaming watch, create, replace (PUT, also /status), JSON merge patch and delete.
//
// Failures are Error values. An error the API server answered carries the HTTP status as
// Error::code() (404, 409, 410, 429, ...) and its metav1.Status message; transport failures
// (connection refused or dropped, timeout, TLS) carry code 0. The helpers below test for the
// cases callers branch on.
//
// Retries: ordinary requests answered 429 or 5xx, or failing in transport, are retried up to
// RetryPolicy::max_attempts times, waiting the longer of the server's Retry-After and an
// exponential backoff with jitter (a Retry-After above RetryPolicy::max_retry_after is cut to it).
// A create (POST) whose answer was lost in transport may thus
// reach the server twice; the second attempt then fails with 409 AlreadyExists, which callers
// of create() must treat as "it exists". Watches are not retried here: the reflector owns
// that decision because a watch must resume from the right resourceVersion.
//
// Client-side rate limit: every request, watches included, first takes a token from one
// bucket per client (ApiClientOptions::qps/burst; client-go's defaults are 5 and 10), so a
// burst of work cannot flood the API server. Waits for a token, retry sleeps and requests in
// flight end early when the client's or the call's StopSignal fires or the call's timeout
// (CallOptions) runs out; the call then fails.
//
// Thread-safe: one client is shared by all informers, workers and the leader elector.
// Each watch holds its own connection for its lifetime.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/kube/backoff.h"
#include "common/kube/client_config.h"
#include "common/kube/resource.h"
#include "common/kube/stop_signal.h"
#include "common/kube/watch_decoder.h"
#include "common/result.h"

namespace sonde::kube {

inline bool is_not_found(const Error& e) {
  return e.code() == 404;
}
inline bool is_conflict(const Error& e) {
  return e.code() == 409;
}  // also AlreadyExists
inline bool is_gone(const Error& e) {
  return e.code() == 410;
}
inline bool is_transport(const Error& e) {
  return e.code() == 0;
}
// The code of a watch ended by WatchOptions::idle_timeout; no HTTP status has it.
inline constexpr int kWatchIdleCode = -1;
inline bool is_watch_idle(const Error& e) {
  return e.code() == kWatchIdleCode;
}

struct RetryPolicy {
  int max_attempts = 5;  // 1 disables retries
  BackoffPolicy backoff{std::chrono::milliseconds(200), std::chrono::seconds(10), 2.0, 1.0};
  // A server asking for a longer Retry-After is retried after this long instead, so a
  // misbehaving server cannot park a worker for hours.
  Duration max_retry_after = std::chrono::seconds(30);
};

struct ApiClientOptions {
  std::string user_agent = "sonde";
  Duration request_timeout = std::chrono::seconds(30);  // per attempt, of an idle connection
  RetryPolicy retry;
  // Token bucket over every request: `qps` sustained, `burst` at once. qps <= 0 disables it.
  double qps = 5;
  int burst = 10;
  // The process's stop signal, when set: rate-limit waits, retry sleeps and requests in flight
  // end when it fires. Must outlive the client.
  StopSignal* stop = nullptr;
};

// Bounds of one call, on top of the client's.
struct CallOptions {
  // The whole call — rate-limit wait, every attempt, retry sleeps — ends when this runs out
  // (real time), cancelling the request in flight. Zero: no overall bound.
  Duration timeout = Duration::zero();
  StopSignal* stop = nullptr;  // cancels the call when it fires
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;             // page size; 0 = everything in one response
  std::string continue_token;    // from the previous page
  std::string resource_version;  // empty: a consistent read of the latest state
};

struct ListPage {
  std::vector<Json> items;
  std::string resource_version;  // of the list; a watch resumes from it
  std::string continue_token;    // empty on the last page
};

struct WatchOptions {
  std::string resource_version;
  std::string label_selector;
  std::string field_selector;
  int64_t timeout_seconds = 300;  // the server ends the watch after this
  bool allow_bookmarks = true;
  // No byte for this long (no event, no bookmark, no FIN: a dead peer or a hung server) ends
  // the watch as if the server had closed it, so the caller resumes at once. Zero disables.
  Duration idle_timeout = std::chrono::seconds(50);
};

struct RawResponse {
  int status = 0;
  std::string body;
  std::optional<Duration> retry_after;
};

struct ClientCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> watches{0};
  std::atomic<uint64_t> watch_idle_timeouts{0};  // watches ended by WatchOptions::idle_timeout
  std::atomic<uint64_t> throttled{0};            // requests that waited for a rate-limit token
};

class ApiClient {
 public:
  ApiClient(ClientConfig config, ApiClientOptions options = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const ClientConfig& config() const { return config_; }
  const ClientCounters& counters() const { return counters_; }

  Result<Json> get(const ResourceType& type, const std::string& ns, const std::string& name,
                   const CallOptions& call = {});
  Result<ListPage> list(const ResourceType& type, const std::string& ns, const ListOptions& options,
                        const CallOptions& call = {});
  Result<Json> create(const ResourceType& type, const std::string& ns, const Json& object,
                      const CallOptions& call = {});
  // PUT; when the object carries metadata.resourceVersion the server rejects a stale write
  // with 409. subresource "status" writes only the status.
  Result<Json> replace(const ResourceType& type, const std::string& ns, const std::string& name,
                       const Json& object, const std::string& subresource = "",
                       const CallOptions& call = {});
  // application/merge-patch+json (RFC 7386).
  Result<Json> merge_patch(const ResourceType& type, const std::string& ns, const std::string& name,
                           const Json& patch, const std::string& subresource = "",
                           const CallOptions& call = {});
  Status remove(const ResourceType& type, const std::string& ns, const std::string& name);

  // Opens a watch and calls `on_event` for each event, in order, on the calling thread.
  // Returns OK when the server ends the stream or `on_event` returns false; an Error when the
  // server refuses the watch (code = HTTP status), the connection drops or the stream is
  // malformed. `stop` aborts the stream promptly. An event cut off by a dropped connection is
  // never delivered. A stream silent for options.idle_timeout fails with an Error for which
  // is_watch_idle() holds (and counts in counters().watch_idle_timeouts).
  Status watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
               const std::function<bool(WatchEvent)>& on_event, StopSignal* stop = nullptr);

  // One request with the retry policy (or a single attempt when `retry` is false).
  // `path_and_query` starts with '/'. Non-2xx answers are returned, not turned into errors.
  Result<RawResponse> send(const std::string& method, const std::string& path_and_query,
                           const std::string& body = "", const std::string& content_type = "",
                           bool retry = true, const CallOptions& call = {});

 private:
  struct Impl;
  class CallGuard;
  Result<RawResponse> send_once(const std::string& method, const std::string& path_and_query,
                                const std::string& body, const std::string& content_type,
                                CallGuard& guard);
  Result<Json> json_call(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& content_type,
                         const CallOptions& call);
  Status take_token(const std::string& what, CallGuard& guard);
  std::string current_token();

  ClientConfig config_;
  ApiClientOptions options_;
  ClientCounters counters_;
  std::unique_ptr<Impl> impl_;
};

// The error for a non-2xx answer: "<method> <path>: <code> <reason>: <message>", code = status.
Error api_error(const std::string& method, const std::string& path, const RawResponse& response);

}  // namespace sonde::kube
