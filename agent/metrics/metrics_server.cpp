#include "agent/metrics/metrics_server.h"

#include <civetweb.h>
#include <dlfcn.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <sstream>

#include "common/text.h"

namespace sonde::agent {
namespace {

std::string url_decode(std::string_view s) {
  std::string out(s.size() + 1, '\0');
  int n = mg_url_decode(s.data(), static_cast<int>(s.size()), out.data(),
                        static_cast<int>(out.size()), /*is_form_url_encoded=*/1);
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::map<std::string, std::string> parse_query(const char* query) {
  std::map<std::string, std::string> out;
  if (!query) return out;
  std::string_view q(query);
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q.remove_prefix(amp == std::string_view::npos ? q.size() : amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = url_decode(pair.substr(0, eq));
    out[key] = eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
  }
  return out;
}

// Readies civetweb to serve TLS, once per process. Debian 12's civetweb loads OpenSSL itself, by
// names OpenSSL 3 does not answer to (civetweb_openssl/CMakeLists.txt says how): the two bridge
// libraries in lib/sonde/ beside the executable's bin/ are loaded first, then civetweb's TLS.
// A failure is remembered: civetweb, asked again after a failed load, would report success with
// half its OpenSSL functions missing.
Status init_civetweb_tls() {
  static const Status status = []() -> Status {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return errno_error("readlink /proc/self/exe", errno);
    std::string dir(exe, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/')) + "/../lib/sonde/";
    for (const char* lib : {"libcrypto.so", "libssl.so"}) {
      // Never closed: civetweb holds its functions for the life of the process.
      if (!dlopen((dir + lib).c_str(), RTLD_NOW | RTLD_LOCAL)) {
        return Error(std::string("load ") + dir + lib +
                     " (installed with sonde-agent, for civetweb's TLS): " + dlerror());
      }
    }
    if ((mg_init_library(MG_FEATURES_TLS) & MG_FEATURES_TLS) == 0) {
      return Error("civetweb cannot load OpenSSL through " + dir);
    }
    return ok_status();
  }();
  return status;
}

void send(mg_connection* conn, const HttpResponse& r) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " +
                     mg_get_response_code_text(conn, r.status) +
                     "\r\nContent-Type: " + r.content_type +
                     "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [k, v] : r.headers) head.append(k).append(": ").append(v).append("\r\n");
  head += "\r\n";
  mg_write(conn, head.data(), head.size());
  mg_write(conn, r.body.data(), r.body.size());
}

// FNV-1a, 64 bits: a label's suffix only needs to tell long values apart, not resist a
// tenant that wants two of its own series to collide.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::vector<prometheus::ClientMetric::Label> labels_of(const LabelPairs& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  out.reserve(labels.size());
  for (const auto& [k, v] : labels) out.push_back({k, label_value(v)});
  return out;
}

}  // namespace

std::string label_value(std::string_view value) {
  if (value.size() <= kMaxLabelValueBytes && is_valid_utf8(value)) return std::string(value);
  std::string out = valid_utf8(value);
  if (out.size() <= kMaxLabelValueBytes) return out;
  char suffix[32];
  int n = std::snprintf(suffix, sizeof suffix, "\u2026%016llx",
                        static_cast<unsigned long long>(fnv1a(value)));
  out = valid_utf8(out, kMaxLabelValueBytes - static_cast<size_t>(n));
  return out.append(suffix, static_cast<size_t>(n));
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const std::string& address, Guard debug_guard, Guard metrics_guard,
    std::shared_ptr<ServingCertificate> tls) {
  std::unique_ptr<MetricsServer> self(new MetricsServer());
  self->debug_guard_ = std::move(debug_guard);
  self->metrics_guard_ = std::move(metrics_guard);
  self->tls_ = std::move(tls);
  if (self->tls_) {
    if (auto tls = init_civetweb_tls(); !tls.ok()) {
      return tls.error().wrap("serve TLS on " + address);
    }
  }
  mg_init_library(0);  // counted: each server's destructor exits once
  std::string ports = self->tls_ ? address + "s" : address;
  std::string threads = std::to_string(kThreads);
  std::string timeout = std::to_string(kRequestTimeoutMs);
  const char* options[] = {"listening_ports",    ports.c_str(),   "num_threads", threads.c_str(),
                           "request_timeout_ms", timeout.c_str(), nullptr};
  mg_callbacks callbacks{};
  if (self->tls_) {
    // Returning 1 tells civetweb the context is set up: the certificate is chosen per
    // handshake (ServingCertificate::install), after civetweb's own protocol settings (TLS 1.2
    // and later, its default ssl_protocol_version).
    callbacks.init_ssl = [](void* ssl_ctx, void* user) {
      static_cast<MetricsServer*>(user)->tls_->install(ssl_ctx);
      return 1;
    };
  }
  mg_init_data init{&callbacks, self.get(), options};
  char text[256] = {};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof text};
  self->ctx_ = mg_start2(&init, &error);
  if (!self->ctx_) {
    mg_exit_library();
    return Error("listen for /metrics on " + address + (self->tls_ ? " (TLS)" : "") + ": " + text +
                 " (is the port in use? set --metrics-address)");
  }
  if (self->tls_) {
    self->add([tls = self->tls_] {
      auto st = tls->stats();
      auto expiry = gauge_family("sonde_agent_tls_certificate_not_after_timestamp_seconds",
                                 "When the certificate the agent's endpoints present expires "
                                 "(Unix time); it is read again when its files change.");
      add_sample(expiry, {}, static_cast<double>(st.not_after));
      auto reloads = counter_family("sonde_agent_tls_certificate_reloads_total",
                                    "Certificate files read again because they changed: ok "
                                    "(presented from the next handshake) or error (not a "
                                    "valid pair; the last good one is still presented).");
      add_sample(reloads, {{"result", "ok"}}, static_cast<double>(st.reloads));
      add_sample(reloads, {{"result", "error"}}, static_cast<double>(st.reload_errors));
      return std::vector<prometheus::MetricFamily>{std::move(expiry), std::move(reloads)};
    });
  }
  // One handler for every path: it looks the route up under the lock.
  mg_set_request_handler(self->ctx_, "/", &MetricsServer::on_request, self.get());
  return self;
}

MetricsServer::~MetricsServer() {
  // Stop serving (joins the server threads) before the collectors and routes go away.
  mg_stop(ctx_);
  mg_exit_library();
}

void MetricsServer::add(Collector collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

void MetricsServer::add_route(const std::string& path, Handler handler) {
  std::lock_guard lock(mu_);
  routes_[path] = std::move(handler);
}

int MetricsServer::port() const {
  mg_server_port ports[4] = {};
  int n = mg_get_server_ports(ctx_, 4, ports);
  return n > 0 ? ports[0].port : 0;
}

std::string MetricsServer::render_metrics() const {
  std::vector<Collector> collectors;
  {
    std::lock_guard lock(mu_);
    collectors = collectors_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectors) {
    auto f = c();
    families.insert(families.end(), std::make_move_iterator(f.begin()),
                    std::make_move_iterator(f.end()));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

// A place among the kMaxDebugRequests, held for one request's guard and handler.
class MetricsServer::DebugSlot {
 public:
  explicit DebugSlot(MetricsServer& server) : server_(server) {
    std::lock_guard lock(server_.mu_);
    held_ = server_.debug_in_flight_ < kMaxDebugRequests;
    if (held_) ++server_.debug_in_flight_;
  }
  ~DebugSlot() {
    if (!held_) return;
    std::lock_guard lock(server_.mu_);
    --server_.debug_in_flight_;
  }
  DebugSlot(const DebugSlot&) = delete;
  DebugSlot& operator=(const DebugSlot&) = delete;
  bool held() const { return held_; }

 private:
  MetricsServer& server_;
  bool held_ = false;
};

int MetricsServer::on_request(mg_connection* conn, void* cbdata) {
  auto* self = static_cast<MetricsServer*>(cbdata);
  const mg_request_info* info = mg_get_request_info(conn);
  const char* authorization = mg_get_header(conn, "Authorization");
  HttpRequest request{info->request_method ? info->request_method : "",
                      info->local_uri ? info->local_uri : "", parse_query(info->query_string),
                      authorization ? authorization : ""};
  HttpResponse response;
  std::optional<HttpResponse> refused;
  std::optional<DebugSlot> slot;
  if (request.path.starts_with("/debug/")) {
    slot.emplace(*self);
    if (!slot->held()) {
      refused = HttpResponse{.status = 429,
                             .body = "busy: " + std::to_string(kMaxDebugRequests) +
                                     " /debug/ requests already running; retry later\n",
                             .headers = {{"Retry-After", "5"}}};
    } else if (self->debug_guard_) {
      refused = self->debug_guard_(request);
    }
  }
  if (request.path == "/metrics" && self->metrics_guard_) refused = self->metrics_guard_(request);
  if (refused) {
    response = std::move(*refused);
  } else if (request.path == "/metrics") {
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = self->render_metrics();
  } else {
    Handler handler;
    {
      std::lock_guard lock(self->mu_);
      auto it = self->routes_.find(request.path);
      if (it != self->routes_.end()) handler = it->second;
    }
    if (handler) {
      response = handler(request);
    } else {
      response.status = 404;
      response.body = "not found: " + request.path + "\n";
    }
  }
  send(conn, response);
  return response.status;
}

prometheus::MetricFamily counter_family(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Counter, {}};
}

prometheus::MetricFamily gauge_family(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
}

void add_sample(prometheus::MetricFamily& family, const LabelPairs& labels, double value) {
  prometheus::ClientMetric m;
  m.label = labels_of(labels);
  if (family.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family.metric.push_back(std::move(m));
}

prometheus::MetricFamily histogram_family(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Histogram, {}};
}

void add_histogram(prometheus::MetricFamily& family, const LabelPairs& labels,
                   std::span<const double> bounds, std::span<const uint64_t> counts, double sum) {
  prometheus::ClientMetric m;
  m.label = labels_of(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    double le = i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back({cumulative, le});
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
  family.metric.push_back(std::move(m));
}

}  // namespace sonde::agent
