#include "agent/runtime/agent_runtime.h"

#include <prometheus/client_metric.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "agent/attach/shared_uprobes.h"
#include "agent/cpu/cpu_profiler.h"
#include "agent/discovery/candidate.h"
#include "agent/gotls/tls_monitor.h"
#include "agent/gotls/tls_probes.h"
#include "agent/kernel/libbpf_log.h"
#include "agent/metrics/metrics_server.h"
#include "agent/procevents/process_events.h"
#include "agent/runtime/inspection_queue.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/log.h"
#include "common/version.h"

namespace sonde::agent {
namespace {

// How often processes that vanished without an exit event (a lost ring-buffer record) are
// looked for.
constexpr auto kSweepInterval = std::chrono::seconds(10);
// After exec events were lost, /proc is scanned again for what they announced; at most this
// often, so an exec storm that keeps the ring buffer full costs one scan per period.
constexpr auto kRescanInterval = std::chrono::seconds(1);

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
void add_tls_families(TlsMonitor& tls, const std::string& node,
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
                {"build_id", v.build_id},
                {"instrumented", v.instrumentable ? "true" : "false"},
                {"reason", v.reason},
                {"stripped", v.stripped ? "true" : "false"},
                {"entry_probe", v.entry_probe},
                {"return_probe", v.return_probe}},
               1);
  }
  auto full = counter_family("sonde_agent_gotls_map_full_total",
                             "Go TLS kernel map inserts that failed because the map was full "
                             "(processes/requests: counts lost; reads/exchanges/carried: "
                             "exchanges not matched). Nothing is evicted silently.");
  for (const auto& [map, n] : tls.kernel_map_full()) {
    add_sample(full, {{"map", map}}, static_cast<double>(n));
  }
  auto discarded = counter_family("sonde_agent_gotls_unattributed_processes_total",
                                  "Processes counted by the Go TLS probes whose counts were "
                                  "discarded: not selected, or exited before they were seen.");
  add_sample(discarded, {}, static_cast<double>(tls.discarded_processes()));
  for (auto* f :
       {&requests, &http2, &durations, &read, &written, &processes, &binaries, &full, &discarded}) {
    out.push_back(std::move(*f));
  }
}

}  // namespace

struct AgentRuntime::Impl {
  Impl(const RuntimeOptions& o, Selector& s)
      : options(o), selector(s), proc(o.proc_root), cache(o.symbol_cache_entries) {}

  Status start();
  Status run(const StopSignals& stop);
  void consider(pid_t pid, bool running);
  void instrument(ProcessInfo info, const Selection& selection, bool running);
  void exited(pid_t pid, uint64_t timestamp_ns);
  void release_cpu(pid_t pid);
  void reselect();
  void check_inspections();
  void add_collector();

  RuntimeOptions options;
  Selector& selector;
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  std::string node;

  std::deque<ProcessEvent> pending;
  std::unique_ptr<ProcessEventSource> events;
  std::unique_ptr<LoopProbes> probes;
  std::unique_ptr<TlsMonitor> tls;  // before its probes: their events call into it
  std::unique_ptr<TlsProbes> tls_probes;
  SharedUprobes tls_uprobes;
  std::unique_ptr<EventLoopMonitor> monitor;
  std::vector<std::string> all_names;  // every feature's symbols, resolved in one parse
  std::atomic<bool> reselect_requested{false};
  mutable std::mutex outcomes_mu;
  std::map<pid_t, ProcessOutcome> outcomes;  // selected processes

  std::unique_ptr<cpu::CpuProfiler> profiler;
  // Processes selected for CPU sampling (event thread only): a release drains the kernel maps,
  // so only these are released, not every process that exits on the node.
  std::set<pid_t> cpu_pids;
  // Opening and parsing executables (tenants' files) happens here, off the event thread. After
  // everything its jobs touch (monitors, cache, outcomes, profiler): destroyed before them, its
  // worker finishes the job in hand (or is abandoned) while they still exist.
  std::unique_ptr<InspectionQueue> inspections;
  std::unique_ptr<MetricsServer> server;  // last: stops serving before the rest goes
};

Status AgentRuntime::Impl::start() {
  route_libbpf_log();
  node = options.node_name.empty() ? host_name() : options.node_name;
  // Events first, then the /proc scan (in run()): a process that starts in between is seen by
  // both (consider() is idempotent), one that exits in between sends an exit event.
  ASSIGN_OR_RETURN(
      events, ProcessEventSource::start([this](const ProcessEvent& e) { pending.push_back(e); }));
  const auto grace_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.series_grace).count());
  if (options.nodejs_event_loop) {
    ASSIGN_OR_RETURN(probes, LoopProbes::load(options.wait_source));
    monitor = std::make_unique<EventLoopMonitor>(*probes, cache, proc, grace_ns);
    all_names = EventLoopMonitor::symbol_names();
  }
  if (options.go_tls) {
    ASSIGN_OR_RETURN(tls_probes, TlsProbes::load());
    tls = std::make_unique<TlsMonitor>(*tls_probes, cache, tls_uprobes, proc, grace_ns);
    const auto& more = TlsMonitor::symbol_names();
    all_names.insert(all_names.end(), more.begin(), more.end());
  }
  inspections = std::make_unique<InspectionQueue>(
      InspectionQueue::Options{.deadline = options.inspection_deadline});
  if (options.cpu.enabled) {
    cpu::ProfilerOptions o;
    o.frequency_hz = options.cpu.frequency_hz;
    o.all_processes = options.cpu.all_processes;
    o.nodejs_loops_map_fd = probes ? probes->loops_map_fd() : -1;
    o.proc_root = options.proc_root;
    o.node_name = node;
    ASSIGN_OR_RETURN(profiler, cpu::CpuProfiler::start(o));
  }
  ASSIGN_OR_RETURN(server, MetricsServer::start(options.metrics_address));
  add_collector();
  if (profiler) {
    server->add([this] { return profiler->metrics(); });
    server->add_route(cpu::CpuProfiler::kRoute, [this](const HttpRequest& request) {
      return profiler->handle_profile_request(request);
    });
  }
  return ok_status();
}

// On the event thread: only /proc is read here, never the process's executable, so an
// unselected process costs a few /proc reads and a selected one is opened by the inspection
// worker.
void AgentRuntime::Impl::consider(pid_t pid, bool running) {
  auto info = proc.read(pid);
  if (!info.ok()) {
    // A process gone, or one even root cannot read (a sandbox's init): nothing to do.
    if (!is_gone(info.error())) {
      log::debug("cannot inspect process", {{"pid", pid}, {"error", info.error().message()}});
    }
    return;
  }
  auto selection = selector.select(*info);
  if (selection && profiler && selection->cpu) {
    // Sampling needs no file of the process: selected here, on the event thread.
    const auto& l = selection->labels;
    if (auto st = profiler->select_pid(pid, {l.namespace_name, l.pod, l.container}); !st.ok()) {
      log::warn("cannot select process for CPU sampling",
                {{"pid", pid}, {"error", st.error().message()}});
    } else {
      cpu_pids.insert(pid);
    }
  } else {
    release_cpu(pid);
  }
  if (!selection || all_names.empty() || !(selection->nodejs_event_loop || selection->go_tls)) {
    bool was_selected = false;
    {
      std::lock_guard lock(outcomes_mu);
      was_selected = outcomes.count(pid) > 0;
    }
    if (was_selected) exited(pid, monotonic_ns());  // deselected: release and fold counters
    return;
  }
  auto mapping = proc.exe_mapping(pid);
  std::string key = mapping.ok() ? mapping->file : "";
  bool queued = inspections->push(key, [this, info = *info, sel = *selection, running]() mutable {
    instrument(std::move(info), sel, running);
  });
  if (!queued) {
    log::debug("process not inspected", {{"pid", pid}, {"exe", info->exe}, {"file", key}});
  }
}

// On the inspection worker.
void AgentRuntime::Impl::instrument(ProcessInfo info, const Selection& selection, bool running) {
  const pid_t pid = info.pid;
  auto c = open_candidate(proc, std::move(info), running);
  if (!c.ok()) {
    if (!is_gone(c.error())) {
      log::debug("cannot open executable", {{"pid", pid}, {"error", c.error().message()}});
    }
    return;
  }
  (void)cache.resolve(c->binary, all_names);
  ProcessOutcome out{.pid = pid,
                     .container_id = c->info.container_id,
                     .labels = selection.labels,
                     .exe = c->info.exe};
  using State = ProcessOutcome::State;
  if (monitor && selection.nodejs_event_loop) {
    switch (monitor->consider(*c, selection.labels)) {
      case EventLoopMonitor::Outcome::kTracked: out.nodejs = State::kInstrumented; break;
      case EventLoopMonitor::Outcome::kNotNode:
        out.nodejs = State::kSymbolsNotFound;
        out.message = "no Node.js symbols (napi_module_register) in " + c->info.exe;
        break;
      case EventLoopMonitor::Outcome::kGone: return;
      case EventLoopMonitor::Outcome::kFailed:
        out.nodejs = State::kFailed;
        out.message = "Node.js probes could not be attached to " + c->info.exe;
        break;
    }
  } else if (monitor) {
    monitor->exited(pid, monotonic_ns());
  }
  if (tls && selection.go_tls) {
    switch (tls->consider(*c, selection.labels)) {
      case TlsMonitor::Outcome::kTracked: out.go_tls = State::kInstrumented; break;
      case TlsMonitor::Outcome::kNotTlsUser: break;
      case TlsMonitor::Outcome::kNotInstrumentable:
        out.go_tls = State::kSymbolsNotFound;
        if (out.message.empty()) out.message = "Go TLS not instrumentable in " + c->info.exe;
        break;
      case TlsMonitor::Outcome::kGone: return;
      case TlsMonitor::Outcome::kFailed:
        out.go_tls = State::kFailed;
        if (out.message.empty()) out.message = "Go TLS probes could not be attached";
        break;
    }
  } else if (tls) {
    tls->exited(pid);
  }
  std::lock_guard lock(outcomes_mu);
  outcomes[pid] = std::move(out);
}

void AgentRuntime::Impl::release_cpu(pid_t pid) {
  if (cpu_pids.erase(pid) > 0) (void)profiler->release_pid(pid);
}

void AgentRuntime::Impl::exited(pid_t pid, uint64_t timestamp_ns) {
  release_cpu(pid);
  if (monitor) monitor->exited(pid, timestamp_ns);
  if (tls) tls->exited(pid);
  std::lock_guard lock(outcomes_mu);
  outcomes.erase(pid);
}

// A worker stuck on a file past the deadline is replaced; the file is not tried again.
void AgentRuntime::Impl::check_inspections() {
  for (const auto& file : inspections->check()) {
    log::warn("reading an executable hung; not instrumenting that file",
              {{"file", file},
               {"deadline_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(options.inspection_deadline)
                    .count()},
               {"stuck_workers", inspections->stats().stuck_workers}});
  }
}

void AgentRuntime::Impl::reselect() {
  // Every live process: the newly selected are instrumented, the deselected released, the
  // unchanged left as they are (the monitors recognize a process they already track).
  for (pid_t pid : proc.list_pids()) consider(pid, true);
}

Status AgentRuntime::Impl::run(const StopSignals& stop) {
  for (pid_t pid : proc.list_pids()) consider(pid, true);
  // The start-up line reports what the scan found; a hung file does not delay it past this.
  (void)inspections->drain(options.inspection_deadline);
  log::info("sonde-agent running", {{"version", kVersion},
                                    {"metrics", options.metrics_address},
                                    {"port", server->port()},
                                    {"nodejs_processes", monitor ? monitor->tracked() : 0},
                                    {"gotls_processes", tls ? tls->tracked() : 0},
                                    {"wait_source", probes ? probes->wait_source() : "none"}});
  auto next_sweep = StopSignals::Clock::now() + kSweepInterval;
  auto next_rescan = StopSignals::Clock::now();
  uint64_t dropped_seen = events->dropped();
  while (!stop.requested()) {
    RETURN_IF_ERROR(events->poll(200));
    while (!pending.empty()) {
      ProcessEvent e = std::move(pending.front());
      pending.pop_front();
      auto pid = static_cast<pid_t>(e.pid);
      if (e.kind == ProcessEvent::Kind::kExec) {
        consider(pid, false);
      } else {
        exited(pid, e.timestamp_ns);
      }
    }
    // Exec events lost to a full ring buffer: the processes they announced are found by a scan.
    if (uint64_t dropped = events->dropped(); dropped != dropped_seen) {
      if (StopSignals::Clock::now() >= next_rescan) {
        log::info("process events were lost; rescanning /proc", {{"lost", dropped - dropped_seen}});
        dropped_seen = dropped;
        next_rescan = StopSignals::Clock::now() + kRescanInterval;
        reselect_requested.store(true);
      }
    }
    if (reselect_requested.exchange(false)) reselect();
    check_inspections();
    if (StopSignals::Clock::now() >= next_sweep) {
      if (monitor) monitor->sweep();
      if (tls) tls->sweep();
      next_sweep = StopSignals::Clock::now() + kSweepInterval;
    }
  }
  log::info("shutting down", {{"signal", stop.signal()}});
  return ok_status();
}

void AgentRuntime::Impl::add_collector() {
  server->add([this]() {
    const std::string wait_source = probes ? probes->wait_source() : "none";
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
                                   "Instrumented Node.js binaries: processes per binary (path as "
                                   "first seen, build id) and measurement mode (precise, "
                                   "epoll-only).");
      std::map<std::tuple<std::string, std::string, std::string>, size_t> by_labels;
      for (const auto& b : monitor->binaries()) {
        by_labels[{b.path, b.build_id, loop_mode_name(b.mode)}] += b.processes;
      }
      for (const auto& [l, n] : by_labels) {
        const auto& [path, build_id, mode] = l;
        add_sample(binaries, {{"binary", path}, {"build_id", build_id}, {"mode", mode}},
                   static_cast<double>(n));
      }
      auto lost = counter_family("sonde_agent_nodejs_states_lost_total",
                                 "Tracked Node.js processes whose kernel state was evicted from "
                                 "the full process map; their counters stop growing.");
      add_sample(lost, {}, static_cast<double>(monitor->states_lost()));
      out.push_back(std::move(blocked));
      out.push_back(std::move(procs));
      out.push_back(std::move(binaries));
      out.push_back(std::move(lost));
    }
    if (tls) add_tls_families(*tls, node, out);
    auto attachments = gauge_family("sonde_agent_uprobe_attachments",
                                    "Uprobe attachments alive: one per (real file, offset, "
                                    "program), shared by every process running the file.");
    add_sample(attachments, {{"feature", "gotls"}}, static_cast<double>(tls_uprobes.size()));
    auto attaches =
        counter_family("sonde_agent_uprobe_attaches_total", "Uprobe attachments made since start.");
    add_sample(attaches, {{"feature", "gotls"}}, static_cast<double>(tls_uprobes.attach_count()));
    auto ins = inspections->stats();
    auto stuck = gauge_family("sonde_agent_inspection_workers_stuck",
                              "Workers abandoned because reading an executable hung past the "
                              "deadline (at 4 no executable is inspected any more).");
    add_sample(stuck, {}, static_cast<double>(ins.stuck_workers));
    auto refused = counter_family("sonde_agent_inspections_refused_total",
                                  "Selected processes whose executable was not inspected: the "
                                  "file hung before, the queue was full, or no worker is left.");
    add_sample(refused, {}, static_cast<double>(ins.refused));
    out.push_back(std::move(stuck));
    out.push_back(std::move(refused));
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
    add_sample(dropped, {}, static_cast<double>(events->dropped()));
    auto rss = gauge_family("sonde_agent_resident_memory_bytes", "Resident memory of the agent.");
    add_sample(rss, {}, resident_bytes());
    auto info = gauge_family("sonde_agent_info", "Agent version and event-loop wait hook.");
    add_sample(info, {{"version", kVersion}, {"wait_source", wait_source}}, 1);
    for (auto* f : {&attachments, &attaches, &entries, &dropped, &rss, &info}) {
      out.push_back(std::move(*f));
    }
    return out;
  });
}

Result<std::unique_ptr<AgentRuntime>> AgentRuntime::start(const RuntimeOptions& options,
                                                          Selector& selector) {
  auto impl = std::make_unique<Impl>(options, selector);
  RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<AgentRuntime>(new AgentRuntime(std::move(impl)));
}

AgentRuntime::AgentRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AgentRuntime::~AgentRuntime() = default;

Status AgentRuntime::run(const StopSignals& stop) {
  return impl_->run(stop);
}

void AgentRuntime::request_reselect() {
  impl_->reselect_requested.store(true);
}

std::vector<ProcessOutcome> AgentRuntime::outcomes() const {
  std::lock_guard lock(impl_->outcomes_mu);
  std::vector<ProcessOutcome> out;
  out.reserve(impl_->outcomes.size());
  for (const auto& [pid, o] : impl_->outcomes) out.push_back(o);
  return out;
}

int AgentRuntime::metrics_port() const {
  return impl_->server->port();
}

void AgentRuntime::add_collector(MetricsServer::Collector collector) {
  impl_->server->add(std::move(collector));
}

}  // namespace sonde::agent
