#include "common/kube/api_client.h"

#include <cpprest/http_client.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

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

}  // namespace

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
}

ApiClient::~ApiClient() = default;

std::string ApiClient::current_token() {
  std::lock_guard lock(impl_->token_mu);
  if (!config_.bearer_token_file.empty() &&
      std::chrono::steady_clock::now() - impl_->token_read >= kTokenReloadInterval) {
    std::ifstream in(config_.bearer_token_file);
    std::ostringstream text;
    text << in.rdbuf();
    std::string fresh = text.str();
    while (!fresh.empty() && (fresh.back() == '\n' || fresh.back() == ' ')) fresh.pop_back();
    if (in && !fresh.empty()) impl_->token = std::move(fresh);
    impl_->token_read = std::chrono::steady_clock::now();
  }
  return impl_->token;
}

Result<RawResponse> ApiClient::send_once(const std::string& method,
                                         const std::string& path_and_query, const std::string& body,
                                         const std::string& content_type) {
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
    http::http_response response = impl_->http->request(request).get();
    RawResponse out;
    out.status = response.status_code();
    out.retry_after = parse_retry_after(response.headers());
    out.body = response.extract_utf8string(/*ignore_content_type=*/true).get();
    return out;
  } catch (const std::exception& e) {
    return Error(method + " " + path_and_query + ": " + e.what());
  }
}

Result<RawResponse> ApiClient::send(const std::string& method, const std::string& path_and_query,
                                    const std::string& body, const std::string& content_type,
                                    bool retry) {
  Backoff backoff(options_.retry.backoff);
  const int attempts = retry ? std::max(1, options_.retry.max_attempts) : 1;
  for (int attempt = 1;; ++attempt) {
    auto response = send_once(method, path_and_query, body, content_type);
    const bool retryable = !response.ok() || retryable_status(response->status);
    if (!retryable || attempt >= attempts) return response;
    Duration delay = backoff.next();
    if (response.ok() && response->retry_after && *response->retry_after > delay) {
      delay = *response->retry_after;
    }
    log::debug(
        "retrying API request",
        {{"method", method},
         {"path", path_and_query},
         {"status", response.ok() ? response->status : 0},
         {"attempt", attempt},
         {"delay_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
    counters_.retries.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(delay);
  }
}

Result<Json> ApiClient::json_call(const std::string& method, const std::string& path,
                                  const std::string& body, const std::string& content_type) {
  ASSIGN_OR_RETURN(RawResponse response, send(method, path, body, content_type));
  if (response.status < 200 || response.status >= 300) return api_error(method, path, response);
  Json parsed = Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error(method + " " + path + ": response is not JSON");
  return parsed;
}

Result<Json> ApiClient::get(const ResourceType& type, const std::string& ns,
                            const std::string& name) {
  return json_call("GET", object_path(type, ns, name), "", "");
}

Result<ListPage> ApiClient::list(const ResourceType& type, const std::string& ns,
                                 const ListOptions& options) {
  const std::string path =
      collection_path(type, ns) +
      query_string({{"labelSelector", options.label_selector},
                    {"fieldSelector", options.field_selector},
                    {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
                    {"continue", options.continue_token},
                    {"resourceVersion", options.resource_version}});
  ASSIGN_OR_RETURN(Json body, json_call("GET", path, "", ""));
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

Result<Json> ApiClient::create(const ResourceType& type, const std::string& ns,
                               const Json& object) {
  return json_call("POST", collection_path(type, ns), to_body(object), "application/json");
}

Result<Json> ApiClient::replace(const ResourceType& type, const std::string& ns,
                                const std::string& name, const Json& object,
                                const std::string& subresource) {
  return json_call("PUT", object_path(type, ns, name, subresource), to_body(object),
                   "application/json");
}

Result<Json> ApiClient::merge_patch(const ResourceType& type, const std::string& ns,
                                    const std::string& name, const Json& patch,
                                    const std::string& subresource) {
  return json_call("PATCH", object_path(type, ns, name, subresource), to_body(patch),
                   "application/merge-patch+json");
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
  pplx::cancellation_token_source cancel;
  const uint64_t stop_id = stop != nullptr ? stop->on_stop([&cancel] { cancel.cancel(); }) : 0;
  struct Unregister {
    StopSignal* stop;
    uint64_t id;
    ~Unregister() {
      if (stop != nullptr) stop->remove_callback(id);
    }
  } unregister{stop, stop_id};

  http::http_request request("GET");
  request.set_request_uri(path);
  request.headers().add("Accept", "application/json");
  request.headers().add("User-Agent", options_.user_agent);
  if (const std::string token = current_token(); !token.empty()) {
    request.headers().add("Authorization", "Bearer " + token);
  }
  try {
    http::http_response response = watch_client.request(request, cancel.get_token()).get();
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
    std::vector<uint8_t> chunk(64 * 1024);
    using Traits = concurrency::streams::streambuf<uint8_t>::traits;
    while (keep_going && !(stop != nullptr && stop->stopped())) {
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
      RETURN_IF_ERROR(decoder.feed(
          std::string_view(reinterpret_cast<const char*>(chunk.data()), got), deliver));
    }
    if (stop != nullptr && stop->stopped()) return ok_status();
    if (keep_going && decoder.pending_bytes() > 0) {
      return Error("GET " + path + ": stream ended inside an event");
    }
    return ok_status();
  } catch (const std::exception& e) {
    if (stop != nullptr && stop->stopped()) return ok_status();
    return Error("GET " + path + ": watch stream failed: " + e.what());
  }
}

}  // namespace sonde::kube
