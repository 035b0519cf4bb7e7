#include "agent/standalone/standalone.h"

#include <fnmatch.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "agent/doctor/doctor.h"
#include "agent/runtime/agent_runtime.h"
#include "common/config.h"
#include "common/log.h"
#include "common/signals.h"

namespace sonde::agent {
namespace {

constexpr const char* kUsage =
    "Usage: sonde-agent --standalone [OPTIONS]\n"
    "\n"
    "Runs the agent on this host without Kubernetes: instruments the processes the config\n"
    "selects (every Node.js process when no config is given) and serves Prometheus metrics.\n"
    "\n"
    "Options:\n"
    "  --config FILE            agent config (YAML; see README 'Configuration')\n"
    "  --metrics-address ADDR   host:port for /metrics (default 0.0.0.0:9464)\n"
    "  --proc-root DIR          the host's /proc (default /proc)\n"
    "  --log-level LEVEL        debug, info, warn or error (default: config, else info)\n"
    "  --log-format FORMAT      logfmt or json (default logfmt)\n"
    "  --wait-source SOURCE     auto, fentry, epoll-tracepoints or syscalls: the kernel hook\n"
    "                           measuring event-loop waits (default auto: the cheapest the\n"
    "                           kernel supports, in that order)\n"
    "  -h, --help               show this help\n";

struct Args {
  std::string config_path;
  std::optional<std::string> metrics_address;
  std::string proc_root = "/proc";
  std::optional<std::string> log_level;
  LoopProbes::WaitSource wait_source = LoopProbes::WaitSource::kAuto;
};

std::optional<Args> parse_args(int argc, char** argv, int& exit_code) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      exit_code = 0;
      return std::nullopt;
    }
    if (arg == "--config" || arg == "--metrics-address" || arg == "--proc-root" ||
        arg == "--log-level" || arg == "--log-format" || arg == "--wait-source") {
      v = value();
      if (!v) {
        std::fprintf(stderr, "sonde-agent: %s needs a value\n", arg.c_str());
        exit_code = 2;
        return std::nullopt;
      }
    } else {
      std::fprintf(stderr, "sonde-agent: unknown option '%s'\n\n%s", arg.c_str(), kUsage);
      exit_code = 2;
      return std::nullopt;
    }
    if (arg == "--config") a.config_path = *v;
    if (arg == "--metrics-address") a.metrics_address = *v;
    if (arg == "--proc-root") a.proc_root = *v;
    if (arg == "--log-level") a.log_level = *v;
    if (arg == "--log-format") {
      if (*v != "logfmt" && *v != "json") {
        std::fprintf(stderr, "sonde-agent: --log-format must be logfmt or json\n");
        exit_code = 2;
        return std::nullopt;
      }
      log::set_format(*v == "json" ? log::Format::kJson : log::Format::kLogfmt);
    }
    if (arg == "--wait-source") {
      if (*v == "auto")
        a.wait_source = LoopProbes::WaitSource::kAuto;
      else if (*v == "fentry")
        a.wait_source = LoopProbes::WaitSource::kFentry;
      else if (*v == "epoll-tracepoints")
        a.wait_source = LoopProbes::WaitSource::kEpollTracepoints;
      else if (*v == "syscalls")
        a.wait_source = LoopProbes::WaitSource::kSyscallTracepoints;
      else {
        std::fprintf(stderr,
                     "sonde-agent: --wait-source must be auto, fentry, epoll-tracepoints or "
                     "syscalls\n");
        exit_code = 2;
        return std::nullopt;
      }
    }
  }
  return a;
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
  int exit_code = 0;
  auto args = parse_args(argc, argv, exit_code);
  if (!args) return exit_code;

  AgentConfig cfg;
  if (!args->config_path.empty()) {
    auto loaded = load_agent_config(args->config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "sonde-agent: %s\n", loaded.error().message().c_str());
      return 2;
    }
    cfg = std::move(loaded).value();
  }
  std::string level = args->log_level.value_or(cfg.log_level);
  auto parsed_level = log::parse_level(level);
  if (!parsed_level) {
    std::fprintf(stderr, "sonde-agent: unknown log level '%s'\n", level.c_str());
    return 2;
  }
  log::set_level(*parsed_level);
  if (!has_required_capabilities()) return 1;
  RuntimeOptions options;
  options.proc_root = args->proc_root;
  options.metrics_address = args->metrics_address.value_or(cfg.metrics_address);
  options.symbol_cache_entries = cfg.symbol_cache_entries;
  options.wait_source = args->wait_source;
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
