#include "agent/assembly/agent_parts.h"

#include <chrono>
#include <utility>

#include "agent/cpu/cpu_feature.h"
#include "agent/gotls/gotls_doctor.h"
#include "agent/gotls/gotls_feature.h"
#include "agent/nodejs/nodejs_doctor.h"
#include "agent/nodejs/nodejs_feature.h"
#include "agent/nodejs_threadpool/nodejs_threadpool_feature.h"
#include "agent/procevents/process_events.h"
#include "agent/symbolize/symbolizer_cache.h"

namespace sonde::agent {

PartsFactory agent_parts(FeatureOptions options) {
  return [options = std::move(options)](const RuntimeServices& s) -> Result<RuntimeParts> {
    RuntimeParts parts;
    ASSIGN_OR_RETURN(parts.events, ProcessEventSource::start(s.on_event));
    const auto grace_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(s.options.series_grace).count());
    NodejsFeature* nodejs = nullptr;  // its wait hook and loops map
    // One copy of each binary's symbol tables for the stall recorder and the CPU profiler.
    auto binaries = std::make_shared<symbolize::SymbolizerCache>();
    if (options.load[Instrumentation::kNodejsEventLoop]) {
      ASSIGN_OR_RETURN(auto f,
                       NodejsFeature::load(options.wait_source, s.cache, s.proc, grace_ns, s.node,
                                           options.nodejs_metrics,
                                           {.binaries = binaries, .on_stall = options.on_stall}));
      nodejs = f.get();
      parts.features.push_back(std::move(f));
    }
    if (options.load[Instrumentation::kGoTls]) {
      ASSIGN_OR_RETURN(auto f, GoTlsFeature::load(
                                   s.cache, s.proc, grace_ns, s.node, options.go_tls_cgroup_filter,
                                   options.go_tls_perform_ret, options.max_go_tls_binaries,
                                   options.go_tls_keep_probes_seconds * 1'000'000'000));
      parts.features.push_back(std::move(f));
    }
    if (options.load[Instrumentation::kCpu]) {
      cpu::ProfilerOptions o;
      o.frequency_hz = options.cpu.frequency_hz;
      o.all_processes = options.cpu.all_processes;
      o.nodejs_loops_map_fd = nodejs ? nodejs->loops_map_fd() : -1;
      o.proc_root = s.options.proc_root;
      o.node_name = s.node;
      o.series_grace = s.options.series_grace;
      o.binaries = binaries;
      ASSIGN_OR_RETURN(auto f,
                       CpuFeature::start(o, options.cpu.required, options.cpu.pyroscope,
                                         options.cpu.by_cgroup, options.cpu.max_frequency_hz));
      parts.features.push_back(std::move(f));
    }
    if (options.load[Instrumentation::kNodejsThreadPool]) {
      parts.features.push_back(
          std::make_unique<NodejsThreadPoolFeature>(s.cache, s.proc, grace_ns, s.node));
    }
    // sonde_agent_info: the event-loop wait hook and its cost to processes not selected.
    parts.info_labels = {{"wait_source", nodejs ? nodejs->wait_source() : "none"},
                         {"unselected_cost", nodejs ? nodejs->wait_source_cost() : "none"}};
    return parts;
  };
}

std::vector<NodeChecks> feature_node_checks() {
  return {nodejs_node_checks, gotls_node_checks};
}

}  // namespace sonde::agent
