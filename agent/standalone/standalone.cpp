#include "agent/standalone/standalone.h"

#include <fnmatch.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <fstream>
#include <optional>
#include <string>

#include "agent/attach/shared_uprobes.h"
#include "agent/discovery/proc_reader.h"
#include "agent/kernel/libbpf_log.h"
#include "agent/metrics/metrics_server.h"
#include "agent/nodejs/event_loop_monitor.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/procevents/process_events.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/config.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/version.h"

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
    "  --wait-source SOURCE     auto, fentry or syscalls: the kernel hook measuring event-loop\n"
    "                           waits (default auto: fentry where the kernel supports it)\n"
    "  -h, --help               show this help\n";

constexpr int kSweepSeconds = 10;

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
      else if (*v == "syscalls")
        a.wait_source = LoopProbes::WaitSource::kSyscallTracepoints;
      else {
        std::fprintf(stderr, "sonde-agent: --wait-source must be auto, fentry or syscalls\n");
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

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

}  // namespace

int standalone_main(int argc, char** argv) {
  int exit_code = 0;
  auto args = parse_args(argc, argv, exit_code);
  if (!args) return exit_code;
  route_libbpf_log();

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
  std::string metrics_address = args->metrics_address.value_or(cfg.metrics_address);
  if (!cfg.instrumentations.nodejs_event_loop) {
    log::warn("no instrumentation enabled in the config; serving self-metrics only");
  }

  // Events first, then the /proc scan: a process that starts in between is seen by both
  // (consider() is idempotent), one that exits in between sends an exit event.
  std::deque<ProcessEvent> pending;
  auto events = ProcessEventSource::start([&](const ProcessEvent& e) { pending.push_back(e); });
  if (!events.ok()) {
    log::error("cannot start process discovery", {{"error", events.error().message()}});
    return 1;
  }
  std::unique_ptr<LoopProbes> probes;
  if (cfg.instrumentations.nodejs_event_loop) {
    auto loaded = LoopProbes::load(args->wait_source);
    if (!loaded.ok()) {
      log::error("cannot load the Node.js probes", {{"error", loaded.error().message()}});
      return 1;
    }
    probes = std::move(loaded).value();
  }

  ProcReader proc(args->proc_root);
  symbols::ProbeTargetCache cache(cfg.symbol_cache_entries);
  SharedUprobes uprobes;
  std::unique_ptr<EventLoopMonitor> monitor;
  if (probes) {
    EventLoopMonitor::Options options;
    options.selected = [&cfg](const ProcessInfo& p) { return selected_by(cfg, p); };
    // Standalone: no pods; the container is the container id, else the process name.
    options.labels = [](const ProcessInfo& p) {
      return ContainerLabels{"", "", p.container_id.empty() ? p.comm : p.container_id};
    };
    monitor = std::make_unique<EventLoopMonitor>(*probes, cache, uprobes, proc, options);
  }

  auto server = MetricsServer::start(metrics_address);
  if (!server.ok()) {
    log::error("cannot serve metrics", {{"error", server.error().message()}});
    return 1;
  }
  const std::string node = host_name();
  const std::string wait_source = probes ? probes->wait_source() : "none";
  (*server)->add([&]() {
    std::vector<prometheus::MetricFamily> out;
    if (monitor) {
      auto blocked = counter_family(
          "container_nodejs_event_loop_blocked_time_seconds_total",
          "Wall time the Node.js main thread's event loop was not waiting for I/O (running "
          "callbacks, timers, microtasks or synchronous calls), including a block in progress.");
      auto procs = gauge_family("sonde_agent_nodejs_processes",
                                "Node.js processes instrumented, per container.");
      for (const auto& s : monitor->samples()) {
        LabelPairs labels{{"namespace", s.labels.namespace_name},
                          {"pod", s.labels.pod},
                          {"container", s.labels.container},
                          {"node", node}};
        add_sample(blocked, labels, s.blocked_seconds);
        add_sample(procs, labels, static_cast<double>(s.processes));
      }
      auto binaries = gauge_family("sonde_agent_nodejs_binaries",
                                   "Instrumented Node.js binaries: processes per binary and "
                                   "measurement mode (precise, any-loop, epoll-only).");
      for (const auto& b : monitor->binaries()) {
        add_sample(binaries, {{"binary", b.path}, {"mode", loop_mode_name(b.mode)}},
                   static_cast<double>(b.processes));
      }
      out.push_back(std::move(blocked));
      out.push_back(std::move(procs));
      out.push_back(std::move(binaries));
    }
    auto attachments = gauge_family("sonde_agent_uprobe_attachments",
                                    "Uprobe attachments alive: one per (real file, offset), "
                                    "shared by every process running the file.");
    add_sample(attachments, {}, static_cast<double>(uprobes.size()));
    auto attaches =
        counter_family("sonde_agent_uprobe_attaches_total", "Uprobe attachments made since start.");
    add_sample(attaches, {}, static_cast<double>(uprobes.attach_count()));
    auto st = cache.stats();
    auto cache_family = [&](const char* name, const char* help, double v) {
      auto f = counter_family(std::string("sonde_agent_symbol_cache_") + name + "_total", help);
      add_sample(f, {}, v);
      out.push_back(std::move(f));
    };
    cache_family("hits", "Symbol lookups answered from the probe-target cache.",
                 static_cast<double>(st.hits));
    cache_family("misses", "Symbol lookups not in the cache.", static_cast<double>(st.misses));
    cache_family("parses", "Binaries parsed to answer misses.", static_cast<double>(st.parses));
    cache_family("evictions", "Cache entries evicted by the LRU bound.",
                 static_cast<double>(st.evictions));
    auto entries = gauge_family("sonde_agent_symbol_cache_entries", "Entries in the cache.");
    add_sample(entries, {}, static_cast<double>(st.entries));
    auto dropped =
        counter_family("sonde_agent_process_events_dropped_total",
                       "Process exec/exit events lost because the ring buffer was full.");
    add_sample(dropped, {}, static_cast<double>((*events)->dropped()));
    auto rss = gauge_family("sonde_agent_resident_memory_bytes", "Resident memory of the agent.");
    add_sample(rss, {}, resident_bytes());
    auto info = gauge_family("sonde_agent_info", "Agent version and event-loop wait hook.");
    add_sample(info, {{"version", kVersion}, {"wait_source", wait_source}}, 1);
    for (auto* f : {&attachments, &attaches, &entries, &dropped, &rss, &info}) {
      out.push_back(std::move(*f));
    }
    return out;
  });

  if (monitor) {
    size_t found = 0;
    for (pid_t pid : proc.list_pids()) {
      found += monitor->consider(pid, true) == EventLoopMonitor::Outcome::kTracked;
    }
    log::info("initial scan done", {{"nodejs_processes", found}});
  }
  log::info("sonde-agent standalone running", {{"version", kVersion},
                                               {"metrics", metrics_address},
                                               {"port", (*server)->port()},
                                               {"wait_source", wait_source}});

  StopSignals stop;
  auto next_sweep = StopSignals::Clock::now() + std::chrono::seconds(kSweepSeconds);
  while (!stop.requested()) {
    auto n = (*events)->poll(200);
    if (!n.ok()) {
      log::error("process events", {{"error", n.error().message()}});
      break;
    }
    while (!pending.empty()) {
      ProcessEvent e = std::move(pending.front());
      pending.pop_front();
      if (!monitor) continue;
      if (e.kind == ProcessEvent::Kind::kExec) {
        monitor->consider(static_cast<pid_t>(e.pid), false);
      } else {
        monitor->exited(static_cast<pid_t>(e.pid), e.timestamp_ns);
      }
    }
    if (monitor && StopSignals::Clock::now() >= next_sweep) {
      monitor->sweep();
      next_sweep = StopSignals::Clock::now() + std::chrono::seconds(kSweepSeconds);
    }
  }
  log::info("shutting down", {{"signal", stop.signal()}});
  return 0;
}

}  // namespace sonde::agent
