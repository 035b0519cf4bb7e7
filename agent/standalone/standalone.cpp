#include "agent/standalone/standalone.h"

#include <fnmatch.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "agent/assembly/agent_flags.h"
#include "agent/assembly/agent_parts.h"
#include "agent/doctor/doctor.h"
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
  app.add_option("--config", a.config_path, "agent config (YAML; see docs/configuration.md)");
  add_agent_flags(app, a.agent, "the config's, else 127.0.0.1:9464", "the config's, else info",
                  /*in_cluster=*/false);
  if (auto exit_code = cli::parse(app, argc, argv)) return exit_code;
  return check_agent_flags(a.agent, "sonde-agent --standalone");
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
  // Kinds that take the config's limits (Go TLS's overhead budget) hold them in their
  // parameters. The config does not change while the agent runs: a container detached for its
  // budget stays detached until a restart.
  explicit ConfigSelector(const AgentConfig& cfg)
      : cfg_(cfg),
        asked_(with_limits(
            cfg.instrumentations,
            Asker{.name = "config", .max_overhead_percent = cfg.max_overhead_percent})) {}
  std::optional<Selection> select(const ProcessInfo& p) override {
    if (!selected_by(cfg_, p)) return std::nullopt;
    return Selection{
        .labels = ContainerLabels{"", "", p.container_id.empty() ? p.comm : p.container_id},
        .instrumentations = asked_};
  }

 private:
  const AgentConfig& cfg_;
  Instrumentations asked_;
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
  options.metrics_address = cfg.metrics_address;
  options.symbol_cache_entries = cfg.symbol_cache_entries;
  apply_agent_flags(args->agent, options);
  if (!any_requested(cfg.instrumentations)) {
    log::warn("no instrumentation enabled in the config; serving self-metrics only");
  }
  ConfigSelector selector(cfg);
  // Each kind the config asks for loads, with its parameters; with no target configured,
  // every process on the host is selected.
  auto runtime = AgentRuntime::start(
      options, selector,
      args->agent.features.parts(
          AgentMode{.config = cfg.instrumentations, .config_selects_all = cfg.targets.empty()}),
      real_clock());
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
