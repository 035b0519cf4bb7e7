// MetricsServer: the agent's HTTP endpoint (civetweb): Prometheus metrics on /metrics and the
// extra routes features register (CPU profiles on /debug/pprof/profile).
//
// Metrics are computed at scrape time by collector functions, so a value such as an event
// loop blocked right now is current when Prometheus reads it, not when an update last ran.
// Collectors and route handlers run on the server's threads (kThreads of them); they must be
// thread-safe. Register collectors and routes before traffic matters: registration takes a
// lock that requests also take, never a handler's own.
//
// Whoever reaches the port can hold threads, so neither slow clients nor slow routes may take
// them all: a request must arrive whole within kRequestTimeout (civetweb closes the connection
// otherwise), and at most kMaxDebugRequests requests under /debug/ -- profiles that last
// seconds to minutes, token reviews waiting on the API server -- run at once; one more is
// answered 429 at once. That leaves threads for scrapes. Liveness does not rely on this pool
// at all: the probes have a server of their own (probe_server.h).
//
// With a ServingCertificate the server speaks only TLS (1.2 and 1.3) on its port: bearer tokens
// of /debug/ and /metrics requests, and what /metrics says about every tenant, never cross the
// network in the clear.
#pragma once

#include <prometheus/metric_family.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/metrics/serving_certificate.h"
#include "common/result.h"

struct mg_context;
struct mg_connection;

namespace sonde::agent {

struct HttpRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;  // decoded; a repeated key keeps its last value
  std::string authorization;                 // the Authorization header, "" when absent
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

class MetricsServer {
 public:
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  // Asked before every route under /debug/ (debug_guard) and before /metrics (metrics_guard,
  // when set): nullopt lets the request through, otherwise its answer is sent instead (cluster
  // mode: RouteAccess). The health probes have a server of their own.
  using Guard = std::function<std::optional<HttpResponse>(const HttpRequest&)>;

  static constexpr int kThreads = 4;
  // Slow /debug/ requests (the guard's reviews included) in flight at once: half the pool.
  static constexpr int kMaxDebugRequests = kThreads / 2;
  // Time for a client to send its whole request head, and for each read or write after it.
  // Prometheus sends its scrape request at once; only a client that drips bytes comes near.
  static constexpr int kRequestTimeoutMs = 10'000;

  // Listens on "host:port" (port 0 picks a free one), over TLS with `tls`. Fails with the
  // reason (address in use, bad address, no TLS library) instead of throwing.
  static Result<std::unique_ptr<MetricsServer>> start(
      const std::string& address, Guard debug_guard = {}, Guard metrics_guard = {},
      std::shared_ptr<ServingCertificate> tls = nullptr);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void add(Collector collector);
  // Serves `path` (exact match, any method: the handler checks) with handler.
  void add_route(const std::string& path, Handler handler);
  int port() const;

  // The text exposition of every collector's families, as served on /metrics.
  std::string render_metrics() const;

 private:
  class DebugSlot;
  MetricsServer() = default;
  static int on_request(mg_connection* conn, void* self);

  mg_context* ctx_ = nullptr;
  mutable std::mutex mu_;
  std::vector<Collector> collectors_;
  std::map<std::string, Handler> routes_;
  Guard debug_guard_;                        // set before serving, never changed
  Guard metrics_guard_;                      // likewise
  std::shared_ptr<ServingCertificate> tls_;  // likewise; null: plain HTTP
  int debug_in_flight_ = 0;                  // under mu_: requests under /debug/ being served
};

// Builders for families (labels as name/value pairs, in order).
//
// Label values come from tenants (process names, paths, a binary's build info), and one value
// that is not UTF-8 makes Prometheus reject the node's whole scrape. add_sample() and
// add_histogram() therefore pass every value through label_value(): no caller has to remember.
using LabelPairs = std::vector<std::pair<std::string, std::string>>;
// Longest label value exported, in bytes. Prometheus has no limit of its own, but a path or a
// name a tenant chose can be 4 KiB, and each byte is stored per sample by every Prometheus.
inline constexpr size_t kMaxLabelValueBytes = 1024;
// `value` as a label value: ill-formed UTF-8 replaced by U+FFFD (common/text.h), and a value
// longer than kMaxLabelValueBytes cut at a character and ended with "…" and 16 hex digits of a
// hash of the whole value, so that two long values with a common prefix stay two series.
// Valid values within the bound are returned unchanged.
std::string label_value(std::string_view value);
prometheus::MetricFamily counter_family(std::string name, std::string help);
prometheus::MetricFamily gauge_family(std::string name, std::string help);
void add_sample(prometheus::MetricFamily& family, const LabelPairs& labels, double value);
prometheus::MetricFamily histogram_family(std::string name, std::string help);
// One histogram: `counts` are non-cumulative, one per bound (upper bounds, ascending) and a last
// one above every bound (+Inf); `sum` in the unit of the bounds.
void add_histogram(prometheus::MetricFamily& family, const LabelPairs& labels,
                   std::span<const double> bounds, std::span<const uint64_t> counts, double sum);

}  // namespace sonde::agent
