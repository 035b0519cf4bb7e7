#include "agent/nodejs/nodejs_feature.h"

#include <array>
#include <map>
#include <tuple>

#include "common/log.h"

namespace sonde::agent {

Result<std::unique_ptr<NodejsFeature>> NodejsFeature::load(LoopProbes::WaitSource source,
                                                           symbols::ProbeTargetCache& cache,
                                                           const ProcReader& proc,
                                                           uint64_t grace_ns, std::string node) {
  ASSIGN_OR_RETURN(auto probes, LoopProbes::load(source));
  return std::unique_ptr<NodejsFeature>(
      new NodejsFeature(std::move(probes), cache, proc, grace_ns, std::move(node)));
}

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
  if (!stalls_) return;
  const auto& params = selection.instrumentations[kind()];
  const uint32_t ms = params ? nodejs_params(*params).stall_threshold_ms : 0;
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
  server.add_route("/debug/nodejs/stalls", [this](const HttpRequest& request) {
    if (!stalls_) {
      return HttpResponse{404, "text/plain", "no stall recorder on this agent\n", {}};
    }
    return stalls_->handle_request(request);
  });
}

void NodejsFeature::collect(std::vector<prometheus::MetricFamily>& out) {
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
  auto procs = gauge_family("sonde_agent_nodejs_processes",
                            "Node.js processes instrumented, per container.");
  // The divisor of a per-loop blocked ratio: blocked seconds per second over this never exceed
  // 1 per loop, however many node processes a container runs.
  auto loops = gauge_family("container_nodejs_event_loops",
                            "Node.js main-thread event loops measured, per container.");
  for (const auto& s : monitor_.samples()) {
    LabelPairs labels{{"namespace", s.labels.namespace_name},
                      {"pod", s.labels.pod},
                      {"container", s.labels.container},
                      {"node", node_}};
    add_sample(blocked, labels, s.blocked_seconds);
    add_histogram(blocks, labels, kBounds, s.blocks.counts,
                  static_cast<double>(s.blocks.sum) / 1e9);
    add_sample(procs, labels, static_cast<double>(s.processes));
    add_sample(loops, labels, static_cast<double>(s.loops));
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
  out.push_back(std::move(blocked));
  out.push_back(std::move(blocks));
  out.push_back(std::move(procs));
  out.push_back(std::move(loops));
  out.push_back(std::move(binaries));
  out.push_back(std::move(lost));
  if (stalls_) stalls_->collect(out);
}

}  // namespace sonde::agent
