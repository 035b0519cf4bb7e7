#include "agent/nodejs/nodejs_feature.h"

#include <array>
#include <map>
#include <tuple>

#include "agent/nodejs/nodejs_params.h"
#include "agent/nodejs/stall_events.h"
#include "common/log.h"

namespace sonde::agent {

Result<std::unique_ptr<NodejsFeature>> NodejsFeature::load(LoopProbes::WaitSource source,
                                                           symbols::ProbeTargetCache& cache,
                                                           const ProcReader& proc,
                                                           uint64_t grace_ns, std::string node,
                                                           NodejsMetrics metrics, Stalls stalls) {
  // Only the OpenTelemetry set needs idle time and the simulated timer in the kernel.
  ASSIGN_OR_RETURN(auto probes,
                   LoopProbes::load(source, std::nullopt, metrics != NodejsMetrics::kSonde));
  log::info("event-loop waits measured",
            {{"wait_source", probes->wait_source()},
             {"unselected_cost", LoopProbes::wait_source_cost_class(probes->source())}});
  return std::unique_ptr<NodejsFeature>(new NodejsFeature(
      std::move(probes), cache, proc, grace_ns, std::move(node), metrics, std::move(stalls)));
}

NodejsFeature::NodejsFeature(std::unique_ptr<LoopProbes> probes, symbols::ProbeTargetCache& cache,
                             const ProcReader& proc, uint64_t grace_ns, std::string node,
                             NodejsMetrics metrics, Stalls stalls)
    : probes_(std::move(probes)),
      hooks_(probes_->source() == LoopProbes::WaitSource::kLibcUprobes
                 ? std::make_unique<LibcWaitHooks>(*probes_, cache, proc.root())
                 : nullptr),
      monitor_(*probes_, cache, proc, grace_ns, real_clock(), hooks_.get()),
      node_(std::move(node)),
      metrics_(metrics),
      stall_events_(std::move(stalls.events)) {
  // Loads nothing until a selection sets stallThresholdMs.
  StallRecorderOptions o;
  o.loops_map_fd = probes_->loops_map_fd();
  o.thresholds_map_fd = probes_->stall_thresholds_fd();
  o.events_map = probes_->stall_events_map();
  o.events_lost = [p = probes_.get()] { return p->stall_events_lost(); };
  o.proc_root = proc.root();
  if (stall_events_) o.on_stall = [e = stall_events_.get()](const Stall& s) { e->post(s); };
  o.binaries = std::move(stalls.binaries);
  stalls_ = std::make_unique<StallRecorder>(std::move(o));
}

NodejsFeature::~NodejsFeature() = default;

FeatureResult NodejsFeature::instrument(const Candidate& c, const Selection& selection) {
  using State = ProcessOutcome::State;
  std::string why;
  switch (monitor_.consider(c, selection.labels, &why)) {
    case EventLoopMonitor::Outcome::kTracked:
      watch_stalls(c.info.pid, selection);
      return {State::kInstrumented, ""};
    case EventLoopMonitor::Outcome::kNotNode:
      return {State::kSymbolsNotFound,
              "no Node.js symbols (napi_module_register) in " + c.info.exe};
    case EventLoopMonitor::Outcome::kGone: return {.gone = true};
    case EventLoopMonitor::Outcome::kFailed:
      return {State::kFailed, "Node.js probes could not be attached to " + c.info.exe +
                                  (why.empty() ? "" : ": " + why)};
    case EventLoopMonitor::Outcome::kNoWaitHook:
      return {State::kFailed, "epoll waits of " + c.info.exe + " not hooked: " + why};
    case EventLoopMonitor::Outcome::kLimitExceeded: return {State::kLimitExceeded, why};
  }
  return {State::kFailed, "unknown outcome"};
}

void NodejsFeature::watch_stalls(pid_t pid, const Selection& selection) {
  const auto& params = selection.instrumentations[kind()];
  const uint32_t ms = params ? params.as<NodejsParams>().stall_threshold_ms : 0;
  if (ms == 0) {
    stalls_->forget(pid);
    return;
  }
  if (Status st = stalls_->watch(pid, selection.labels, uint64_t{ms} * 1'000'000); !st.ok()) {
    log::warn("long event-loop turns of this process are not recorded",
              {{"pid", pid}, {"error", st.error().message()}});
  }
}

void NodejsFeature::add_routes(MetricsServer& server) {
  server.add_route(StallRecorder::kRoute,
                   [this](const HttpRequest& request) { return stalls_->handle_request(request); });
}

namespace {

LabelPairs container_labels(const ContainerLabels& c, const std::string& node) {
  return {
      {"namespace", c.namespace_name}, {"pod", c.pod}, {"container", c.container}, {"node", node}};
}

}  // namespace

void NodejsFeature::collect_sonde(const std::vector<EventLoopMonitor::Sample>& samples,
                                  std::vector<prometheus::MetricFamily>& out) const {
  auto blocked = counter_family(
      "container_nodejs_event_loop_blocked_time_seconds_total",
      "Wall time the Node.js main thread's event loop was not waiting for I/O (running "
      "callbacks, timers, microtasks or synchronous calls), including a block in progress.");
  auto blocks = histogram_family(
      "container_nodejs_event_loop_block_duration_seconds",
      "Duration of each contiguous period the Node.js main thread's event loop was not "
      "waiting for I/O (one observation per loop iteration's busy part), counted when it "
      "ends.");
  static const auto kBounds = [] {
    std::array<double, kLoopBlockBoundsNs.size()> out{};
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<double>(kLoopBlockBoundsNs[i]) / 1e9;
    }
    return out;
  }();
  // The divisor of a per-loop blocked ratio: blocked seconds per second over this never exceed
  // 1 per loop, however many node processes a container runs.
  auto loops = gauge_family("container_nodejs_event_loops",
                            "Node.js main-thread event loops measured, per container.");
  for (const auto& s : samples) {
    const LabelPairs labels = container_labels(s.labels, node_);
    add_sample(blocked, labels, s.blocked_seconds);
    add_histogram(blocks, labels, kBounds, s.blocks.counts,
                  static_cast<double>(s.blocks.sum) / 1e9);
    add_sample(loops, labels, static_cast<double>(s.loops));
  }
  out.push_back(std::move(blocked));
  out.push_back(std::move(blocks));
  out.push_back(std::move(loops));
}

void NodejsFeature::collect_otel(const std::vector<EventLoopMonitor::Sample>& samples,
                                 std::vector<prometheus::MetricFamily>& out) const {
  // OpenTelemetry's nodejs.eventloop.* (semantic conventions, model/nodejs/metrics.yaml) as its
  // Prometheus exporter names them; windows as loop_window.h says.
  auto time = counter_family(
      "nodejs_eventloop_time_seconds_total",
      "OpenTelemetry nodejs.eventloop.time: wall time of the Node.js event loops, active "
      "(not waiting for I/O, as container_nodejs_event_loop_blocked_time_seconds_total) or idle "
      "(in the loop's waits), summed over the container's loops.");
  auto utilization = gauge_family(
      "nodejs_eventloop_utilization_ratio",
      "OpenTelemetry nodejs.eventloop.utilization: active / (active + idle) time of the "
      "container's event loops over the last 10 s (or since the previous scrape when longer).");
  struct DelayGauge {
    const char* name;
    const char* what;
    double DelayStats::*field;
  };
  static constexpr std::array<DelayGauge, 7> kDelay = {{
      {"min", "minimum", &DelayStats::min},
      {"max", "maximum", &DelayStats::max},
      {"mean", "mean", &DelayStats::mean},
      {"stddev", "standard deviation", &DelayStats::stddev},
      {"p50", "50th percentile", &DelayStats::p50},
      {"p90", "90th percentile", &DelayStats::p90},
      {"p99", "99th percentile", &DelayStats::p99},
  }};
  std::vector<prometheus::MetricFamily> delay;
  delay.reserve(kDelay.size());
  for (const auto& g : kDelay) {
    delay.push_back(gauge_family(
        std::string("nodejs_eventloop_delay_") + g.name + "_seconds",
        std::string("OpenTelemetry nodejs.eventloop.delay.") + g.name + ": the " + g.what +
            " of what perf_hooks.monitorEventLoopDelay({resolution: 10}) records (intervals "
            "between callbacks of a 10 ms timer, simulated from the loop's turns), over the "
            "utilization's window, the container's loops merged."));
  }
  for (const auto& s : samples) {
    const LabelPairs labels = container_labels(s.labels, node_);
    auto with_state = [&](const char* state) {
      LabelPairs l = labels;
      l.emplace_back("nodejs_eventloop_state", state);
      return l;
    };
    add_sample(time, with_state("active"), s.blocked_seconds);
    add_sample(time, with_state("idle"), s.idle_seconds);
    if (s.window.utilization) add_sample(utilization, labels, *s.window.utilization);
    if (s.window.delay) {
      for (size_t i = 0; i < kDelay.size(); ++i) {
        add_sample(delay[i], labels, (*s.window.delay).*kDelay[i].field);
      }
    }
  }
  out.push_back(std::move(time));
  out.push_back(std::move(utilization));
  for (auto& d : delay) out.push_back(std::move(d));
}

void NodejsFeature::collect(std::vector<prometheus::MetricFamily>& out) {
  const auto samples = monitor_.samples();
  if (metrics_ != NodejsMetrics::kOtel) collect_sonde(samples, out);
  if (metrics_ != NodejsMetrics::kSonde) collect_otel(samples, out);
  auto procs = gauge_family("sonde_agent_nodejs_processes",
                            "Node.js processes instrumented, per container.");
  for (const auto& s : samples) {
    add_sample(procs, container_labels(s.labels, node_), static_cast<double>(s.processes));
  }
  auto binaries = gauge_family("sonde_agent_nodejs_binaries",
                               "Instrumented Node.js binaries: processes per binary (path as "
                               "first seen, build id), measurement mode (precise, epoll-only) "
                               "and whether CPU profiles name its JavaScript frames (js_frames: "
                               "supported, or unsupported: <reason>).");
  std::map<std::tuple<std::string, std::string, std::string, std::string>, size_t> by_labels;
  for (const auto& b : monitor_.binaries()) {
    by_labels[{b.path, b.build_id, loop_mode_name(b.mode), b.js_frames}] += b.processes;
  }
  for (const auto& [l, n] : by_labels) {
    const auto& [path, build_id, mode, js_frames] = l;
    add_sample(binaries,
               {{"binary", path}, {"build_id", build_id}, {"mode", mode}, {"js_frames", js_frames}},
               static_cast<double>(n));
  }
  auto lost = counter_family("sonde_agent_nodejs_states_lost_total",
                             "Tracked Node.js processes whose kernel state was evicted from "
                             "the full process map; their counters stop growing.");
  add_sample(lost, {}, static_cast<double>(monitor_.states_lost()));
  if (hooks_) {
    auto libraries = gauge_family("sonde_agent_nodejs_wait_hook_libraries",
                                  "C library files whose epoll functions carry the wait hook of "
                                  "the Node.js processes using them (wait source "
                                  "uprobe/libc:epoll_wait*): hooked processes per file (path as "
                                  "first seen, build id).");
    for (const auto& l : hooks_->libraries()) {
      add_sample(libraries, {{"library", l.path}, {"build_id", l.build_id}},
                 static_cast<double>(l.processes));
    }
    auto failures = counter_family("sonde_agent_nodejs_wait_hook_failures_total",
                                   "Node.js processes not tracked because their C library's "
                                   "epoll functions could not be hooked, by reason.");
    const auto counts = hooks_->failures();
    for (size_t i = 0; i < counts.size(); ++i) {
      add_sample(failures,
                 {{"reason", LibcWaitHooks::failure_name(static_cast<LibcWaitHooks::Failure>(i))}},
                 static_cast<double>(counts[i]));
    }
    out.push_back(std::move(libraries));
    out.push_back(std::move(failures));
  }
  out.push_back(std::move(procs));
  out.push_back(std::move(binaries));
  out.push_back(std::move(lost));
  stalls_->collect(out);
  if (stall_events_) stall_events_->collect(out);
}

}  // namespace sonde::agent
