#include "agent/standalone/standalone.h"

#include <fnmatch.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "agent/doctor/doctor.h"
#include "agent/runtime/agent_flags.h"
#include "agent/runtime/agent_runtime.h"
#include "common/cli.h"
#include "common/config.h"
#include "common/log.h"
#include "common/signals.h"

namespace sonde::agent {
namespace {

struct Args {
  std::string config_path;
  AgentFlags agent;
};

// nullopt: go on; otherwise the exit code.
std::optional<int> parse_args(int argc, char** argv, Args& a) {
  CLI::App app{
      "Runs the agent on this host without Kubernetes: instruments the processes the config "
      "selects (every Node.js process when no config is given) and serves Prometheus metrics.",
      "sonde-agent --standalone"};
  app.add_option("--config", a.config_path, "agent config (YAML; see README 'Configuration')");
  add_agent_flags(app, a.agent, "the config's, else 0.0.0.0:9464", "the config's, else info");
  return cli::parse(app, argc, argv);
}

bool selected_by(const AgentConfig& cfg, const ProcessInfo& p) {
  if (cfg.targets.empty()) return true;
  for (const auto& t : cfg.targets) {
    bool exe_ok = t.exe_glob.empty() || fnmatch(t.exe_glob.c_str(), p.exe.c_str(), 0) == 0;
    bool cid_ok = t.container_id.empty() || p.container_id.starts_with(t.container_id);
    if (exe_ok && cid_ok) return true;
  }
  return false;
}

// Standalone selection: the config's targets (every process when there are none), the
// config's instrumentations, and as the container label the container id, else the process
// name (there are no pods).
class ConfigSelector : public Selector {
 public:
  explicit ConfigSelector(const AgentConfig& cfg) : cfg_(cfg) {}
  std::optional<Selection> select(const ProcessInfo& p) override {
    if (!selected_by(cfg_, p)) return std::nullopt;
    return Selection{cfg_.instrumentations.nodejs_event_loop, cfg_.instrumentations.go_tls,
                     ContainerLabels{"", "", p.container_id.empty() ? p.comm : p.container_id},
                     cfg_.instrumentations.cpu.enabled};
  }

 private:
  const AgentConfig& cfg_;
};

}  // namespace

int standalone_main(int argc, char** argv) {
  Args parsed;
  if (auto exit_code = parse_args(argc, argv, parsed)) return *exit_code;
  const Args* args = &parsed;

  AgentConfig cfg;
  if (!args->config_path.empty()) {
    auto loaded = load_agent_config(args->config_path);
    if (!loaded.ok()) {
      (void)std::fprintf(stderr, "sonde-agent: %s\n", loaded.error().message().c_str());
      return 2;
    }
    cfg = std::move(loaded).value();
  }
  cli::apply(args->agent.log, cfg.log_level);
  if (!has_required_capabilities()) return 1;
  RuntimeOptions options;
  options.proc_root = args->agent.proc_root;
  options.metrics_address =
      args->agent.metrics_address.empty() ? cfg.metrics_address : args->agent.metrics_address;
  options.symbol_cache_entries = cfg.symbol_cache_entries;
  options.wait_source = args->agent.wait_source;
  options.go_tls_perform_ret = args->agent.go_tls_perform_ret;
  options.max_go_tls_binaries = args->agent.max_go_tls_binaries;
  options.nodejs_event_loop = cfg.instrumentations.nodejs_event_loop;
  options.go_tls = cfg.instrumentations.go_tls;
  // CPU profiles: the configured targets, and with none configured every process on the host.
  options.cpu.enabled = cfg.instrumentations.cpu.enabled;
  options.cpu.frequency_hz = cfg.instrumentations.cpu.frequency_hz;
  options.cpu.all_processes = cfg.targets.empty();
  options.cpu.pyroscope = cfg.instrumentations.cpu.pyroscope;
  if (!options.nodejs_event_loop && !options.go_tls && !options.cpu.enabled) {
    log::warn("no instrumentation enabled in the config; serving self-metrics only");
  }
  ConfigSelector selector(cfg);
  auto runtime = AgentRuntime::start(options, selector);
  if (!runtime.ok()) {
    log::error("cannot start the agent", {{"error", runtime.error().message()}});
    return 1;
  }
  StopSignals stop;
  if (auto st = (*runtime)->run(stop); !st.ok()) {
    log::error("agent stopped", {{"error", st.error().message()}});
    return 1;
  }
  return 0;
}

}  // namespace sonde::agent
