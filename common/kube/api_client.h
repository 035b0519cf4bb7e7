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
// exponential backoff with jitter. A create (POST) whose answer was lost in transport may thus
// reach the server twice; the second attempt then fails with 409 AlreadyExists, which callers
// of create() must treat as "it exists". Watches are not retried here: the reflector owns
// that decision because a watch must resume from the right resourceVersion.
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

struct RetryPolicy {
  int max_attempts = 5;  // 1 disables retries
  BackoffPolicy backoff{std::chrono::milliseconds(200), std::chrono::seconds(10), 2.0, 1.0};
};

struct ApiClientOptions {
  std::string user_agent = "sonde";
  Duration request_timeout = std::chrono::seconds(30);
  RetryPolicy retry;
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
};

class ApiClient {
 public:
  ApiClient(ClientConfig config, ApiClientOptions options = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const ClientConfig& config() const { return config_; }
  const ClientCounters& counters() const { return counters_; }

  Result<Json> get(const ResourceType& type, const std::string& ns, const std::string& name);
  Result<ListPage> list(const ResourceType& type, const std::string& ns,
                        const ListOptions& options);
  Result<Json> create(const ResourceType& type, const std::string& ns, const Json& object);
  // PUT; when the object carries metadata.resourceVersion the server rejects a stale write
  // with 409. subresource "status" writes only the status.
  Result<Json> replace(const ResourceType& type, const std::string& ns, const std::string& name,
                       const Json& object, const std::string& subresource = "");
  // application/merge-patch+json (RFC 7386).
  Result<Json> merge_patch(const ResourceType& type, const std::string& ns, const std::string& name,
                           const Json& patch, const std::string& subresource = "");
  Status remove(const ResourceType& type, const std::string& ns, const std::string& name);

  // Opens a watch and calls `on_event` for each event, in order, on the calling thread.
  // Returns OK when the server ends the stream or `on_event` returns false; an Error when the
  // server refuses the watch (code = HTTP status), the connection drops or the stream is
  // malformed. `stop` aborts the stream promptly. An event cut off by a dropped connection is
  // never delivered.
  Status watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
               const std::function<bool(WatchEvent)>& on_event, StopSignal* stop = nullptr);

  // One request with the retry policy (or a single attempt when `retry` is false).
  // `path_and_query` starts with '/'. Non-2xx answers are returned, not turned into errors.
  Result<RawResponse> send(const std::string& method, const std::string& path_and_query,
                           const std::string& body = "", const std::string& content_type = "",
                           bool retry = true);

 private:
  struct Impl;
  Result<RawResponse> send_once(const std::string& method, const std::string& path_and_query,
                                const std::string& body, const std::string& content_type);
  Result<Json> json_call(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& content_type);
  std::string current_token();

  ClientConfig config_;
  ApiClientOptions options_;
  ClientCounters counters_;
  std::unique_ptr<Impl> impl_;
};

// The error for a non-2xx answer: "<method> <path>: <code> <reason>: <message>", code = status.
Error api_error(const std::string& method, const std::string& path, const RawResponse& response);

}  // namespace sonde::kube
