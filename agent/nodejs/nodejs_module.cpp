#include "agent/nodejs/nodejs_module.h"

#include <map>
#include <string>
#include <utility>

#include "agent/nodejs/stall_events.h"
#include "common/cli.h"

namespace sonde::agent {

void NodejsModule::add_flags(CLI::App& app, bool /*in_cluster*/) {
  static const std::map<std::string, LoopProbes::WaitSource> kSources = {
      {"auto", LoopProbes::WaitSource::kAuto},
      {"fentry", LoopProbes::WaitSource::kFentry},
      {"epoll-tracepoints", LoopProbes::WaitSource::kEpollTracepoints},
      {"syscalls", LoopProbes::WaitSource::kSyscallTracepoints},
      {"libc-uprobes", LoopProbes::WaitSource::kLibcUprobes}};
  app.add_option_function<std::string>(
         "--wait-source", [this](const std::string& name) { wait_source_ = kSources.at(name); },
         "the kernel hook measuring event-loop waits: auto (fentry where the kernel has BPF "
         "trampolines, else libc-uprobes; neither costs processes not selected anything), "
         "fentry, libc-uprobes (uprobes on the C library's epoll functions of each selected "
         "process only), or, only when asked, epoll-tracepoints or syscalls (syscall "
         "tracepoints: they slow every system call of every process on the node) (default "
         "auto)")
      ->check(CLI::IsMember({"auto", "fentry", "epoll-tracepoints", "syscalls", "libc-uprobes"}));
  static const std::map<std::string, NodejsMetrics> kMetrics = {{"both", NodejsMetrics::kBoth},
                                                                {"sonde", NodejsMetrics::kSonde},
                                                                {"otel", NodejsMetrics::kOtel}};
  app.add_option_function<std::string>(
         "--nodejs-metrics", [this](const std::string& name) { metrics_ = kMetrics.at(name); },
         "which per-container Node.js event-loop metrics are exported: sonde "
         "(container_nodejs_event_loop_*), otel (OpenTelemetry's runtime metrics, "
         "nodejs_eventloop_*: time, utilization, delay) or both (default both)")
      ->check(CLI::IsMember({"both", "sonde", "otel"}));
}

Result<std::unique_ptr<NodejsFeature>> NodejsModule::load(
    const RuntimeServices& s, const AgentMode& mode,
    std::shared_ptr<symbolize::SymbolizerCache> binaries) const {
  NodejsFeature::Stalls stalls{.binaries = std::move(binaries)};
  if (mode.api != nullptr) {
    stalls.events = std::make_unique<StallEvents>(*mode.api, s.node, mode.pod);
  }
  return NodejsFeature::load(wait_source_, s.cache, s.proc, s.series_grace_ns(), s.node, metrics_,
                             std::move(stalls));
}

}  // namespace sonde::agent
