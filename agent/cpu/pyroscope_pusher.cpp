#include "agent/cpu/pyroscope_pusher.h"

#include <civetweb.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <random>

#include "common/log.h"

namespace sonde::agent::cpu {
namespace {

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      (void)std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// Pyroscope's label values may not hold the characters that delimit the name's label set.
std::string label_value(std::string v) {
  for (char& c : v) {
    if (c == ',' || c == '{' || c == '}' || c == '=' || c == '"') c = '_';
  }
  return v;
}

}  // namespace

std::string pyroscope_name(const std::string& application, const ContainerLabels& owner,
                           const std::string& node) {
  std::string name = application + ".cpu{";
  bool first = true;
  auto add = [&](const char* k, const std::string& v) {
    if (v.empty()) return;
    if (!first) name += ',';
    first = false;
    name += std::string(k) + "=" + label_value(v);
  };
  add("namespace", owner.namespace_name);
  add("pod", owner.pod);
  add("container", owner.container);
  add("node", node);
  return name + "}";
}

Result<std::unique_ptr<PyroscopePusher>> PyroscopePusher::start(CpuProfiler& profiler,
                                                                const PushOptions& options) {
  std::unique_ptr<PyroscopePusher> self(new PyroscopePusher(profiler, options));
  std::string_view url = options.url;
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error("pyroscope push: " + options.url +
                 ": only http:// URLs are supported (use a local collector for TLS)");
  }
  url.remove_prefix(kScheme.size());
  size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  if (slash != std::string_view::npos) {
    self->path_prefix_ = std::string(url.substr(slash));
    while (!self->path_prefix_.empty() && self->path_prefix_.back() == '/') {
      self->path_prefix_.pop_back();
    }
  }
  size_t colon = authority.rfind(':');
  self->host_ = std::string(authority.substr(0, colon));
  if (colon != std::string_view::npos) {
    std::string_view p = authority.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), self->port_);
    if (ec != std::errc() || ptr != p.data() + p.size() || self->port_ <= 0 ||
        self->port_ > 65535) {
      return Error("pyroscope push: bad port in " + options.url);
    }
  }
  if (self->host_.empty()) return Error("pyroscope push: no host in " + options.url);
  if (options.interval < std::chrono::seconds(1) || options.interval > CpuProfiler::kMaxDuration) {
    return Error("pyroscope push: the interval must be 1 s to 300 s");
  }
  mg_init_library(0);
  self->thread_ = std::jthread([p = self.get()](const std::stop_token& stop) { p->run(stop); });
  return self;
}

PyroscopePusher::~PyroscopePusher() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();  // before the library it pushes with goes
  if (!host_.empty()) mg_exit_library();
}

PyroscopePusher::Stats PyroscopePusher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void PyroscopePusher::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    auto profiles = profiler_.collect_per_owner(options_.interval);
    if (!profiles.ok()) {
      log::warn("pyroscope push: collect", {{"error", profiles.error().message()}});
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, stop, options_.interval, [] { return false; });
      continue;
    }
    for (const auto& [owner, profile] : *profiles) {
      Status s = push(owner, *profile);
      std::lock_guard lock(mu_);
      if (s.ok()) {
        ++stats_.pushed;
      } else {
        ++stats_.failed;
        log::warn("pyroscope push", {{"error", s.error().message()}});
      }
    }
  }
}

Status PyroscopePusher::push(const ContainerLabels& owner, const ProfileBuilder& profile) {
  ASSIGN_OR_RETURN(std::string pprof, profile.pprof_gzip());
  int64_t from = profile.start_unix_ns() / 1'000'000'000;
  int64_t until = (profile.start_unix_ns() + profile.duration_ns()) / 1'000'000'000;
  std::string target = path_prefix_ + "/ingest?name=" +
                       url_encode(pyroscope_name(options_.application, owner, options_.node_name)) +
                       "&from=" + std::to_string(from) + "&until=" + std::to_string(until) +
                       "&format=pprof&sampleRate=" + std::to_string(profiler_.frequency_hz()) +
                       "&spyName=sonde";
  std::string boundary = "sonde-" + std::to_string(std::random_device{}());
  std::string body =
      "--" + boundary +
      "\r\nContent-Disposition: form-data; name=\"profile\"; "
      "filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
      pprof + "\r\n--" + boundary + "--\r\n";
  std::string head =
      "POST " + target + " HTTP/1.1\r\nHost: " + host_ + ":" + std::to_string(port_) +
      "\r\nContent-Type: multipart/form-data; boundary=" + boundary +
      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";

  char error[256] = {};
  mg_connection* conn = mg_connect_client(host_.c_str(), port_, 0, error, sizeof error);
  if (!conn) return Error("connect to " + options_.url + ": " + error);
  std::unique_ptr<mg_connection, void (*)(mg_connection*)> closer(conn, mg_close_connection);
  if (mg_write(conn, head.data(), head.size()) <= 0 ||
      mg_write(conn, body.data(), body.size()) <= 0) {
    return Error("send to " + options_.url + ": write failed");
  }
  constexpr int kTimeoutMs = 10'000;
  if (mg_get_response(conn, error, sizeof error, kTimeoutMs) < 0) {
    return Error("response from " + options_.url + ": " + error);
  }
  int status = mg_get_response_info(conn)->status_code;
  if (status < 200 || status > 299) {
    return Error(options_.url + " answered " + std::to_string(status) + " to a profile push");
  }
  return ok_status();
}

}  // namespace sonde::agent::cpu
