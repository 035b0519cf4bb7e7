#include "common/kube/api_client.h"

#include <cpprest/http_client.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/files.h"
#include "common/kube/rate_limiter.h"
#include "common/log.h"

namespace sonde::kube {
namespace http = web::http;
namespace client = web::http::client;

namespace {

// A request body. Objects may carry text from processes on the node (paths in messages): bytes
// that are not UTF-8 become U+FFFD instead of making dump() throw on a writer thread.
std::string to_body(const nlohmann::json& object) {
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

constexpr auto kTokenReloadInterval = std::chrono::minutes(1);

bool retryable_status(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::string status_message(const std::string& body) {
  Json status = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object()) {
    std::string reason = status.value("reason", "");
    std::string message = status.value("message", "");
    if (!reason.empty() || !message.empty()) return reason + ": " + message;
  }
  return body.substr(0, 200);
}

std::optional<Duration> parse_retry_after(const http::http_headers& headers) {
  auto it = headers.find("Retry-After");
  if (it == headers.end()) return std::nullopt;
  try {
    const long seconds = std::stol(it->second);
    if (seconds >= 0) return std::chrono::seconds(seconds);
  } catch (const std::exception&) {
    // HTTP-date forms are not sent by the API server; ignore them.
  }
  return std::nullopt;
}

// Calls on_idle once, from its own thread, when touch() has not been called for `limit`.
// The destructor ends the thread without calling it.
class IdleWatchdog {
 public:
  IdleWatchdog(Duration limit, std::function<void()> on_idle) {
    if (limit <= Duration::zero()) return;
    last_ = std::chrono::steady_clock::now();
    thread_ = std::thread([this, limit, on_idle = std::move(on_idle)] {
      std::unique_lock lock(mu_);
      while (!done_) {
        const auto deadline = last_ + limit;
        if (std::chrono::steady_clock::now() >= deadline) {
          fired_ = true;
          lock.unlock();
          on_idle();
          return;
        }
        cv_.wait_until(lock, deadline);
      }
    });
  }
  ~IdleWatchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  IdleWatchdog(const IdleWatchdog&) = delete;
  IdleWatchdog& operator=(const IdleWatchdog&) = delete;

  void touch() {
    std::lock_guard lock(mu_);
    last_ = std::chrono::steady_clock::now();
  }
  bool fired() const {
    std::lock_guard lock(mu_);
    return fired_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point last_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

}  // namespace

// One call's cancellation: it fires when the client's or the call's StopSignal fires, when the
// call's timeout runs out, or on cancel(). Requests made with token() are aborted then, and
// sleep() returns early.
class ApiClient::CallGuard {
 public:
  CallGuard(StopSignal* client_stop, const CallOptions& call) {
    fired_.on_stop([this] { source_.cancel(); });
    for (StopSignal* signal : {client_stop, call.stop}) {
      if (signal != nullptr) {
        registrations_.emplace_back(signal, signal->on_stop([this] { fired_.stop(); }));
      }
    }
    if (call.timeout > Duration::zero()) {
      timer_ = std::thread([this, timeout = call.timeout] {
        if (finished_.sleep_for(real_clock(), timeout)) {
          expired_.store(true);
          fired_.stop();
        }
      });
    }
  }
  ~CallGuard() {
    for (auto& [signal, id] : registrations_) signal->remove_callback(id);
    finished_.stop();
    if (timer_.joinable()) timer_.join();
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

  pplx::cancellation_token token() const { return source_.get_token(); }
  void cancel() { fired_.stop(); }
  bool fired() const { return fired_.stopped(); }
  // Waits `d`; false when the guard fired before or during the wait.
  bool sleep(Duration d) { return fired_.sleep_for(real_clock(), d); }
  std::string why() const { return expired_.load() ? "call timed out" : "stopped"; }

 private:
  pplx::cancellation_token_source source_;
  StopSignal fired_;
  StopSignal finished_;
  std::atomic<bool> expired_{false};
  std::vector<std::pair<StopSignal*, uint64_t>> registrations_;
  std::thread timer_;
};

Error api_error(const std::string& method, const std::string& path, const RawResponse& response) {
  return Error(method + " " + path + ": " + std::to_string(response.status) + " " +
                   status_message(response.body),
               response.status);
}

struct ApiClient::Impl {
  client::http_client_config http_config(Duration timeout) const {
    client::http_client_config cfg;
    cfg.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    cfg.set_validate_certificates(!config.insecure_skip_tls_verify);
    const std::string ca = config.ca_pem;
    const std::string cert = config.client_cert_pem;
    const std::string key = config.client_key_pem;
    if (!ca.empty() || !cert.empty()) {
      cfg.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& ctx) {
        if (!ca.empty()) ctx.add_certificate_authority(boost::asio::buffer(ca));
        if (!cert.empty()) ctx.use_certificate_chain(boost::asio::buffer(cert));
        if (!key.empty()) {
          ctx.use_private_key(boost::asio::buffer(key), boost::asio::ssl::context::pem);
        }
      });
    }
    return cfg;
  }

  ClientConfig config;
  std::unique_ptr<client::http_client> http;
  std::unique_ptr<TokenBucketRateLimiter> limiter;  // null: no client-side rate limit
  std::mutex token_mu;
  std::string token;
  std::chrono::steady_clock::time_point token_read{};
};

ApiClient::ApiClient(ClientConfig config, ApiClientOptions options)
    : config_(std::move(config)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->config = config_;
  impl_->token = config_.bearer_token;
  impl_->token_read = std::chrono::steady_clock::now();
  impl_->http = std::make_unique<client::http_client>(config_.server,
                                                      impl_->http_config(options_.request_timeout));
  if (options_.qps > 0) {
    impl_->limiter = std::make_unique<TokenBucketRateLimiter>(
        options_.qps, std::max(1, options_.burst), real_clock());
  }
}

ApiClient::~ApiClient() = default;

std::string ApiClient::current_token() {
  std::lock_guard lock(impl_->token_mu);
  if (!config_.bearer_token_file.empty() &&
      std::chrono::steady_clock::now() - impl_->token_read >= kTokenReloadInterval) {
    auto text = read_file(config_.bearer_token_file);
    std::string fresh = text.ok() ? *text : "";
    while (!fresh.empty() && (fresh.back() == '\n' || fresh.back() == ' ')) fresh.pop_back();
    if (!fresh.empty()) impl_->token = std::move(fresh);
    impl_->token_read = std::chrono::steady_clock::now();
  }
  return impl_->token;
}

Status ApiClient::take_token(const std::string& what, CallGuard& guard) {
  if (!impl_->limiter) return ok_status();
  const Duration wait = impl_->limiter->when("");
  if (wait <= Duration::zero()) return ok_status();
  counters_.throttled.fetch_add(1, std::memory_order_relaxed);
  if (guard.sleep(wait)) return ok_status();
  return Error(what + ": " + guard.why() + " while waiting for the client-side rate limit");
}

Result<RawResponse> ApiClient::send_once(const std::string& method,
                                         const std::string& path_and_query, const std::string& body,
                                         const std::string& content_type, CallGuard& guard) {
  RETURN_IF_ERROR(take_token(method + " " + path_and_query, guard));
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  http::http_request request(method);
  request.set_request_uri(path_and_query);
  request.headers().add("Accept", "application/json");
  request.headers().add("User-Agent", options_.user_agent);
  if (const std::string token = current_token(); !token.empty()) {
    request.headers().add("Authorization", "Bearer " + token);
  }
  if (!body.empty()) request.set_body(body, content_type);
  try {
    http::http_response response = impl_->http->request(request, guard.token()).get();
    RawResponse out;
    out.status = response.status_code();
    out.retry_after = parse_retry_after(response.headers());
    out.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
    return out;
  } catch (const std::exception& e) {
    if (guard.fired()) return Error(method + " " + path_and_query + ": " + guard.why());
    return Error(method + " " + path_and_query + ": " + e.what());
  }
}

Result<RawResponse> ApiClient::send(const std::string& method, const std::string& path_and_query,
                                    const std::string& body, const std::string& content_type,
                                    bool retry, const CallOptions& call) {
  CallGuard guard(options_.stop, call);
  Backoff backoff(options_.retry.backoff);
  const int attempts = retry ? std::max(1, options_.retry.max_attempts) : 1;
  for (int attempt = 1;; ++attempt) {
    auto response = send_once(method, path_and_query, body, content_type, guard);
    const bool retryable = !response.ok() || retryable_status(response->status);
    if (!retryable || attempt >= attempts || guard.fired()) return response;
    Duration delay = backoff.next();
    if (response.ok() && response->retry_after && *response->retry_after > delay) {
      delay = std::min(*response->retry_after, options_.retry.max_retry_after);
    }
    log::debug(
        "retrying API request",
        {{"method", method},
         {"path", path_and_query},
         {"status", response.ok() ? response->status : 0},
         {"attempt", attempt},
         {"delay_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    // Interrupted: the last answer (or error) stands.
    if (!guard.sleep(delay)) return response;
  }
}

Result<Json> ApiClient::json_call(const std::string& method, const std::string& path,
                                  const std::string& body, const std::string& content_type,
                                  const CallOptions& call) {
  ASSIGN_OR_RETURN(RawResponse response, send(method, path, body, content_type, true, call));
  if (response.status < 200 || response.status >= 300) return api_error(method, path, response);
  Json parsed = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error(method + " " + path + ": response is not JSON");
  return parsed;
}

Result<Json> ApiClient::get(const ResourceType& type, const std::string& ns,
                            const std::string& name, const CallOptions& call) {
  return json_call("GET", object_path(type, ns, name), "", "", call);
}

Result<ListPage> ApiClient::list(const ResourceType& type, const std::string& ns,
                                 const ListOptions& options, const CallOptions& call) {
  const std::string path =
      collection_path(type, ns) +
      query_string({{"labelSelector", options.label_selector},
                    {"fieldSelector", options.field_selector},
                    {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
                    {"continue", options.continue_token},
                    {"resourceVersion", options.resource_version}});
  ASSIGN_OR_RETURN(Json body, json_call("GET", path, "", "", call));
  ListPage page;
  const Json& meta = body.contains("metadata") ? body["metadata"] : Json::object();
  page.resource_version = meta.value("resourceVersion", "");
  page.continue_token = meta.value("continue", "");
  if (body.contains("items") && body["items"].is_array()) {
    page.items.reserve(body["items"].size());
    for (auto& item : body["items"]) page.items.push_back(std::move(item));
  }
  if (page.resource_version.empty()) {
    return Error("GET " + path + ": list has no metadata.resourceVersion");
  }
  return page;
}

Result<Json> ApiClient::create(const ResourceType& type, const std::string& ns, const Json& object,
                               const CallOptions& call) {
  return json_call("POST", collection_path(type, ns), to_body(object), "application/json", call);
}

Result<Json> ApiClient::replace(const ResourceType& type, const std::string& ns,
                                const std::string& name, const Json& object,
                                const std::string& subresource, const CallOptions& call) {
  return json_call("PUT", object_path(type, ns, name, subresource), to_body(object),
                   "application/json", call);
}

Result<Json> ApiClient::merge_patch(const ResourceType& type, const std::string& ns,
                                    const std::string& name, const Json& patch,
                                    const std::string& subresource, const CallOptions& call) {
  return json_call("PATCH", object_path(type, ns, name, subresource), to_body(patch),
                   "application/merge-patch+json", call);
}

Status ApiClient::remove(const ResourceType& type, const std::string& ns, const std::string& name) {
  const std::string path = object_path(type, ns, name);
  ASSIGN_OR_RETURN(RawResponse response, send("DELETE", path));
  if (response.status < 200 || response.status >= 300) return api_error("DELETE", path, response);
  return ok_status();
}

Status ApiClient::watch(const ResourceType& type, const std::string& ns,
                        const WatchOptions& options,
                        const std::function<bool(WatchEvent)>& on_event, StopSignal* stop) {
  counters_.watches.fetch_add(1, std::memory_order_relaxed);
  const std::string path =
      collection_path(type, ns) +
      query_string({{"watch", "true"},
                    {"resourceVersion", options.resource_version},
                    {"labelSelector", options.label_selector},
                    {"fieldSelector", options.field_selector},
                    {"allowWatchBookmarks", options.allow_bookmarks ? "true" : ""},
                    {"timeoutSeconds",
                     options.timeout_seconds > 0 ? std::to_string(options.timeout_seconds) : ""}});
  // cpprestsdk's timeout closes a connection idle for that long; the server ends the watch
  // after timeoutSeconds, so allow it that plus a margin before calling the stream dead.
  const Duration idle_limit =
      std::chrono::seconds(options.timeout_seconds > 0 ? options.timeout_seconds + 30 : 3600);
  client::http_client watch_client(config_.server, impl_->http_config(idle_limit));
  CallGuard guard(options_.stop, {.stop = stop});
  RETURN_IF_ERROR(take_token("GET " + path, guard));
  // Declared after the guard it cancels, so it is gone before the guard.
  IdleWatchdog watchdog(options.idle_timeout, [&guard] { guard.cancel(); });
  auto idle_end = [&]() -> Status {
    counters_.watch_idle_timeouts.fetch_add(1, std::memory_order_relaxed);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout);
    return Error("GET " + path + ": no byte for " + std::to_string(seconds.count()) + " s",
                 kWatchIdleCode);
  };

  http::http_request request("GET");
  request.set_request_uri(path);
  request.headers().add("Accept", "application/json");
  request.headers().add("User-Agent", options_.user_agent);
  if (const std::string token = current_token(); !token.empty()) {
    request.headers().add("Authorization", "Bearer " + token);
  }
  try {
    http::http_response response = watch_client.request(request, guard.token()).get();
    watchdog.touch();
    if (response.status_code() != 200) {
      RawResponse raw;
      raw.status = response.status_code();
      raw.retry_after = parse_retry_after(response.headers());
      raw.body = response.extract_utf8string(true).get();
      return api_error("GET", path, raw);
    }
    auto buffer = response.body().streambuf();
    WatchDecoder decoder;
    bool keep_going = true;
    auto deliver = [&](WatchEvent event) {
      keep_going = on_event(std::move(event));
      return keep_going;
    };
    std::vector<uint8_t> chunk(size_t{64} * 1024);
    using Traits = concurrency::streams::streambuf<uint8_t>::traits;
    while (keep_going && !guard.fired()) {
      size_t available = buffer.in_avail();
      size_t got;
      if (available == 0) {
        // Blocks until at least one byte arrives or the stream ends.
        const auto c = buffer.bumpc().get();
        if (c == Traits::eof()) break;
        chunk[0] = static_cast<uint8_t>(c);
        got = 1;
        available = std::min(buffer.in_avail(), chunk.size() - 1);
        if (available > 0) got += buffer.getn(chunk.data() + 1, available).get();
      } else {
        got = buffer.getn(chunk.data(), std::min(available, chunk.size())).get();
      }
      watchdog.touch();
      RETURN_IF_ERROR(decoder.feed(
          std::string_view(reinterpret_cast<const char*>(chunk.data()), got), deliver));
    }
    if (watchdog.fired()) return idle_end();
    if (guard.fired()) return ok_status();
    if (keep_going && decoder.pending_bytes() > 0) {
      return Error("GET " + path + ": stream ended inside an event");
    }
    return ok_status();
  } catch (const std::exception& e) {
    if (watchdog.fired()) return idle_end();
    if (guard.fired()) return ok_status();
    return Error("GET " + path + ": watch stream failed: " + e.what());
  }
}

}  // namespace sonde::kube
