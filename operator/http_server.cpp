#include "operator/http_server.h"

#include <cpprest/http_listener.h>

namespace sonde::op {

namespace http = web::http;

struct HttpServer::Impl {
  std::string address;
  const OperatorMetrics& metrics;
  std::function<bool()> ready;
  std::function<std::string()> health;
  std::unique_ptr<http::experimental::listener::http_listener> listener;
};

HttpServer::HttpServer(std::string address, const OperatorMetrics& metrics,
                       std::function<bool()> ready, std::function<std::string()> health)
    : impl_(new Impl{std::move(address), metrics, std::move(ready), std::move(health), nullptr}) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  try {
    impl_->listener =
        std::make_unique<http::experimental::listener::http_listener>("http://" + impl_->address);
    Impl* impl = impl_.get();
    impl_->listener->support(http::methods::GET, [impl](const http::http_request& request) {
      const std::string path = request.relative_uri().path();
      if (path == "/metrics") {
        request.reply(http::status_codes::OK, impl->metrics.serialize(),
                      "text/plain; version=0.0.4; charset=utf-8");
      } else if (path == "/healthz") {
        const std::string problem = impl->health ? impl->health() : "";
        request.reply(
            problem.empty() ? http::status_codes::OK : http::status_codes::ServiceUnavailable,
            problem.empty() ? "ok\n" : problem + "\n", "text/plain");
      } else if (path == "/readyz") {
        const bool ready = impl->ready && impl->ready();
        request.reply(ready ? http::status_codes::OK : http::status_codes::ServiceUnavailable,
                      ready ? "ok\n" : "caches not synced\n", "text/plain");
      } else {
        request.reply(http::status_codes::NotFound, "not found\n", "text/plain");
      }
    });
    impl_->listener->open().wait();
  } catch (const std::exception& e) {
    impl_->listener.reset();
    return Error("listen on " + impl_->address + " for /metrics: " + e.what());
  }
  return ok_status();
}

void HttpServer::stop() {
  if (!impl_->listener) return;
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
    // Closing a listener whose connections already failed is not worth reporting at exit.
  }
  impl_->listener.reset();
}

}  // namespace sonde::op
