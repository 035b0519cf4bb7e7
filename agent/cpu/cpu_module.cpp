#include "agent/cpu/cpu_module.h"

#include <string>
#include <utility>

#include "common/cli.h"

namespace sonde::agent {

void CpuModule::add_flags(CLI::App& app, bool in_cluster) {
  app.add_option("--max-cpu-frequency-hz", max_frequency_hz_,
                 "the node's cap on CPU sampling: a policy (or the config) asking for more is "
                 "sampled at this rate, and says so (sonde_cpu_profile_capped_processes) "
                 "(default " +
                     std::to_string(kClusterMaxFrequencyHz) + " in-cluster, " +
                     std::to_string(stacks::CpuSampler::kMaxFrequencyHz) + " standalone)")
      ->check(CLI::Range(uint32_t{1}, stacks::CpuSampler::kMaxFrequencyHz));
  if (!in_cluster) return;  // the config says where to push
  app.add_option("--pyroscope-url", pyroscope_.url,
                 "also push each sampled container's CPU profile to this Pyroscope ingest "
                 "endpoint (http://host[:port][/prefix]; default: no push)");
  app.add_option("--pyroscope-interval", pyroscope_.interval_seconds, "seconds of profile per push")
      ->check(CLI::Range(5, 3600))
      ->capture_default_str();
  app.add_option(
         "--pyroscope-application", pyroscope_.application,
         "the pushed profiles' name prefix: <application>.cpu{namespace,pod,container,node}")
      ->capture_default_str();
}

Status CpuModule::check_flags() const {
  if (pyroscope_.url.empty()) return ok_status();
  if (auto st = check_pyroscope(pyroscope_); !st.ok()) {
    return Error("pyroscope-" + st.error().message());
  }
  return ok_status();
}

Result<std::unique_ptr<CpuFeature>> CpuModule::load(
    const RuntimeServices& s, const AgentMode& mode,
    std::shared_ptr<symbolize::SymbolizerCache> binaries, int nodejs_loops_map_fd) const {
  cpu::ProfilerOptions o;
  PyroscopeConfig push = pyroscope_;
  if (const auto& asked = mode.config[Instrumentation::kCpu]) {
    const auto& p = asked.as<CpuParams>();
    o.frequency_hz = p.frequency_hz;
    push = p.pyroscope;
  }
  o.all_processes = !mode.in_cluster && mode.config_selects_all;
  o.nodejs_loops_map_fd = nodejs_loops_map_fd;
  o.proc_root = s.options.proc_root;
  o.node_name = s.node;
  o.series_grace = s.options.series_grace;
  o.binaries = std::move(binaries);
  const uint32_t max_hz = max_frequency_hz_ != 0 ? max_frequency_hz_
                          : mode.in_cluster      ? kClusterMaxFrequencyHz
                                                 : stacks::CpuSampler::kMaxFrequencyHz;
  return CpuFeature::start(o, /*required=*/!mode.in_cluster, push, /*by_cgroup=*/mode.in_cluster,
                           max_hz);
}

}  // namespace sonde::agent
