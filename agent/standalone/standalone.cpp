#include "agent/standalone/standalone.h"

#include <fnmatch.h>
#include <prometheus/client_metric.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "agent/attach/shared_uprobes.h"
#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
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

// Go TLS families: requests, durations, HTTP/2 connections, bytes; and binary verdicts.
void add_tls_families(TlsMonitor& tls, const TlsProbes& probes, const std::string& node,
                      std::vector<prometheus::MetricFamily>& out) {
  auto requests = counter_family("container_go_tls_requests_total",
                                 "HTTP/1.x requests over Go crypto/tls connections, by direction "
                                 "(client: sent by this container; server: answered by it), "
                                 "method and status class.");
  auto http2 = counter_family("container_go_tls_http2_connections_total",
                              "HTTP/2 connections over Go crypto/tls (streams are not parsed).");
  auto read = counter_family("container_go_tls_read_bytes_total",
                             "Plaintext bytes read through Go crypto/tls.");
  auto written = counter_family("container_go_tls_written_bytes_total",
                                "Plaintext bytes written through Go crypto/tls.");
  prometheus::MetricFamily durations{"container_go_tls_request_duration_seconds",
                                     "HTTP/1.x request duration over Go crypto/tls: request "
                                     "seen to response seen, by direction.",
                                     prometheus::MetricType::Histogram,
                                     {}};
  auto processes = gauge_family("sonde_agent_gotls_processes", "Go TLS processes instrumented.");
  for (const auto& [labels, s] : tls.snapshot()) {
    LabelPairs base{{"namespace", labels.namespace_name},
                    {"pod", labels.pod},
                    {"container", labels.container},
                    {"node", node}};
    auto with = [&base](LabelPairs extra) {
      LabelPairs l = base;
      l.insert(l.end(), extra.begin(), extra.end());
      return l;
    };
    for (const auto& [k, n] : s.requests) {
      add_sample(
          requests,
          with(
              {{"direction", k.direction}, {"method", k.method}, {"status_class", k.status_class}}),
          static_cast<double>(n));
    }
    for (const auto& [direction, n] : s.http2_connections) {
      add_sample(http2, with({{"direction", direction}}), static_cast<double>(n));
    }
    for (const auto& [direction, h] : s.durations) {
      prometheus::ClientMetric m;
      for (const auto& [k, v] : with({{"direction", direction}})) m.label.push_back({k, v});
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kTlsDurationBuckets.size(); ++i) {
        cumulative += h.buckets[i];
        m.histogram.bucket.push_back({cumulative, kTlsDurationBuckets[i]});
      }
      m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
      m.histogram.sample_count = h.count;
      m.histogram.sample_sum = h.sum;
      durations.metric.push_back(std::move(m));
    }
    add_sample(read, base, static_cast<double>(s.read_bytes));
    add_sample(written, base, static_cast<double>(s.written_bytes));
    add_sample(processes, base, static_cast<double>(s.processes));
  }
  auto binaries = gauge_family("sonde_agent_gotls_binaries",
                               "Go binaries seen with crypto/tls (or stripped): 1 per binary, "
                               "with whether it is instrumented and why not.");
  for (const auto& v : tls.verdicts()) {
    add_sample(binaries,
               {{"binary", v.path},
                {"instrumented", v.instrumentable ? "true" : "false"},
                {"reason", v.reason}},
               1);
  }
  auto dropped = counter_family("sonde_agent_gotls_events_dropped_total",
                                "Go TLS exchanges lost because the ring buffer was full.");
  add_sample(dropped, {}, static_cast<double>(probes.dropped()));
  for (auto* f :
       {&requests, &http2, &durations, &read, &written, &processes, &binaries, &dropped}) {
    out.push_back(std::move(*f));
  }
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
  if (!cfg.instrumentations.nodejs_event_loop && !cfg.instrumentations.go_tls) {
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

  std::unique_ptr<TlsMonitor> tls;  // declared before the probes: events call into it
  std::unique_ptr<TlsProbes> tls_probes;
  if (cfg.instrumentations.go_tls) {
    auto loaded = TlsProbes::load([&tls](const sonde_tls_event& e) {
      if (tls) tls->on_event(e);
    });
    if (!loaded.ok()) {
      log::error("cannot load the Go TLS probes", {{"error", loaded.error().message()}});
      return 1;
    }
    tls_probes = std::move(loaded).value();
  }

  ProcReader proc(args->proc_root);
  symbols::ProbeTargetCache cache(cfg.symbol_cache_entries);
  // One registry per feature: releasing a pid from one must not detach the other's probes.
  SharedUprobes uprobes, tls_uprobes;
  // Standalone: no pods; the container is the container id, else the process name.
  auto labels = [](const ProcessInfo& p) {
    return ContainerLabels{"", "", p.container_id.empty() ? p.comm : p.container_id};
  };
  std::unique_ptr<EventLoopMonitor> monitor;
  if (probes) {
    monitor = std::make_unique<EventLoopMonitor>(*probes, cache, uprobes, proc,
                                                 EventLoopMonitor::Options{labels});
  }
  if (tls_probes) {
    tls = std::make_unique<TlsMonitor>(*tls_probes, cache, tls_uprobes, proc,
                                       TlsMonitor::Options{labels});
  }
  // Every feature's symbols, resolved together: a new binary is parsed once, not per feature.
  std::vector<std::string> all_names;
  if (monitor) all_names = EventLoopMonitor::symbol_names();
  if (tls) {
    const auto& more = TlsMonitor::symbol_names();
    all_names.insert(all_names.end(), more.begin(), more.end());
  }
  // Returns which features took the process.
  auto consider = [&](pid_t pid, bool running) -> std::pair<bool, bool> {
    auto c = open_candidate(proc, pid, running);
    if (!c.ok()) {
      // A process gone, or one even root cannot read (a sandbox's init): nothing to do.
      if (!is_gone(c.error()))
        log::debug("cannot inspect process", {{"pid", pid}, {"error", c.error().message()}});
      return {false, false};
    }
    if (!selected_by(cfg, c->info) || all_names.empty()) return {false, false};
    (void)cache.resolve(c->binary, all_names);
    bool node = monitor && monitor->consider(*c) == EventLoopMonitor::Outcome::kTracked;
    bool go = tls && tls->consider(*c) == TlsMonitor::Outcome::kTracked;
    return {node, go};
  };

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
    if (tls) add_tls_families(*tls, *tls_probes, node, out);
    auto attachments = gauge_family("sonde_agent_uprobe_attachments",
                                    "Uprobe attachments alive: one per (real file, offset, "
                                    "program), shared by every process running the file.");
    add_sample(attachments, {{"feature", "nodejs"}}, static_cast<double>(uprobes.size()));
    add_sample(attachments, {{"feature", "gotls"}}, static_cast<double>(tls_uprobes.size()));
    auto attaches =
        counter_family("sonde_agent_uprobe_attaches_total", "Uprobe attachments made since start.");
    add_sample(attaches, {{"feature", "nodejs"}}, static_cast<double>(uprobes.attach_count()));
    add_sample(attaches, {{"feature", "gotls"}}, static_cast<double>(tls_uprobes.attach_count()));
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

  size_t found_node = 0, found_tls = 0;
  for (pid_t pid : proc.list_pids()) {
    auto [node_found, tls_found] = consider(pid, true);
    found_node += node_found;
    found_tls += tls_found;
  }
  log::info("initial scan done",
            {{"nodejs_processes", found_node}, {"gotls_processes", found_tls}});
  log::info("sonde-agent standalone running", {{"version", kVersion},
                                               {"metrics", metrics_address},
                                               {"port", (*server)->port()},
                                               {"wait_source", wait_source}});

  StopSignals stop;
  auto next_sweep = StopSignals::Clock::now() + std::chrono::seconds(kSweepSeconds);
  while (!stop.requested()) {
    // TLS exchanges first: a process's last exchanges come before its exit event.
    if (tls_probes) {
      if (auto t = tls_probes->poll(0); !t.ok())
        log::warn("go tls events", {{"error", t.error().message()}});
    }
    auto n = (*events)->poll(200);
    if (!n.ok()) {
      log::error("process events", {{"error", n.error().message()}});
      break;
    }
    while (!pending.empty()) {
      ProcessEvent e = std::move(pending.front());
      pending.pop_front();
      auto pid = static_cast<pid_t>(e.pid);
      if (e.kind == ProcessEvent::Kind::kExec) {
        consider(pid, false);
      } else {
        if (tls_probes) (void)tls_probes->poll(0);
        if (monitor) monitor->exited(pid, e.timestamp_ns);
        if (tls) tls->exited(pid);
      }
    }
    if (StopSignals::Clock::now() >= next_sweep) {
      if (monitor) monitor->sweep();
      if (tls) tls->sweep();
      next_sweep = StopSignals::Clock::now() + std::chrono::seconds(kSweepSeconds);
    }
  }
  log::info("shutting down", {{"signal", stop.signal()}});
  return 0;
}

}  // namespace sonde::agent
