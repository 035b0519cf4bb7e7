// PyroscopePusher: sends each container's CPU profile to a Pyroscope server (or anything that
// speaks its ingest API, such as Grafana Alloy's pyroscope.receive_http) every interval.
//
// One POST /ingest per owner and interval: `name=<application>.cpu{namespace=..,pod=..,
// container=..,node=..}`, `from`/`until` (Unix seconds of the window), `format=pprof`,
// `sampleRate` (the sampling frequency), `spyName=sonde`; the body is multipart/form-data
// with the gzipped pprof in the field `profile`. Plain HTTP only (an in-cluster endpoint or a
// local collector); an https URL is rejected at start. A failed push is logged and counted,
// and that window's profile is dropped (the next interval is a new window).
//
// Owns a thread that collects from the profiler continuously; destroying the pusher stops it
// (within the profiler's current window: the profiler must outlive the pusher).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "agent/cpu/cpu_profiler.h"
#include "common/result.h"

namespace sonde::agent::cpu {

struct PushOptions {
  std::string url;  // "http://host:port" with an optional path prefix
  std::string application = "sonde";
  std::chrono::milliseconds interval{std::chrono::seconds(15)};
  std::string node_name;
};

class PyroscopePusher {
 public:
  static Result<std::unique_ptr<PyroscopePusher>> start(CpuProfiler& profiler,
                                                        const PushOptions& options);
  ~PyroscopePusher();
  PyroscopePusher(const PyroscopePusher&) = delete;
  PyroscopePusher& operator=(const PyroscopePusher&) = delete;

  struct Stats {
    uint64_t pushed = 0;  // profiles the server accepted (2xx)
    uint64_t failed = 0;  // profiles that could not be sent or were refused
  };
  Stats stats() const;

 private:
  PyroscopePusher(CpuProfiler& profiler, PushOptions options)
      : profiler_(profiler), options_(std::move(options)) {}
  void run(const std::stop_token& stop);
  Status push(const ContainerLabels& owner, const ProfileBuilder& profile);

  CpuProfiler& profiler_;
  const PushOptions options_;
  std::string host_;
  int port_ = 80;
  std::string path_prefix_;

  mutable std::mutex mu_;
  std::condition_variable_any wake_;  // waits end early when thread_ is asked to stop
  Stats stats_;
  std::jthread thread_;
};

// The Pyroscope application name with labels: app.cpu{k=v,...} (label values with characters
// Pyroscope does not allow in them are not escaped but replaced by '_'). Exposed for tests.
std::string pyroscope_name(const std::string& application, const ContainerLabels& owner,
                           const std::string& node);

}  // namespace sonde::agent::cpu
