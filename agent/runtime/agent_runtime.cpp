#include "agent/runtime/agent_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "agent/discovery/candidate.h"
#include "agent/kernel/libbpf_log.h"
#include "agent/metrics/metrics_server.h"
#include "agent/metrics/probe_server.h"
#include "agent/procevents/process_events.h"
#include "agent/runtime/fd_budget.h"
#include "agent/runtime/inspection_queue.h"
#include "agent/symbols/probe_target_cache.h"
#include "common/files.h"
#include "common/log.h"
#include "common/text.h"
#include "common/version.h"

namespace sonde::agent {
namespace {

// How often processes that vanished without an exit event (a lost ring-buffer record) are
// looked for (ns).
constexpr uint64_t kSweepIntervalNs = 10'000'000'000;
// After exec events were lost, /proc is scanned again for what they announced; at most this
// often, so an exec storm that keeps the ring buffer full costs one scan per period (ns).
constexpr uint64_t kRescanIntervalNs = 1'000'000'000;
// A process that exited with a problem (a refused or failed instrumentation) stays among the
// outcomes this long, so that the node report written next still says why a container of
// short-lived processes is not instrumented (ns); at most this many are kept, oldest dropped.
constexpr uint64_t kExitedProblemNs = 60'000'000'000;
constexpr size_t kMaxExitedProblems = 256;

bool has_problem(const ProcessOutcome& o) {
  using State = ProcessOutcome::State;
  return std::any_of(o.states.values.begin(), o.states.values.end(), [](State s) {
    return s != State::kInstrumented && s != State::kNotApplicable;
  });
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

struct AgentRuntime::Impl {
  Impl(const RuntimeOptions& o, Selector& s, const Clock& c)
      : options(o), selector(s), clock(c), proc(o.proc_root), cache(o.symbol_cache_entries) {}
  // What the inspection worker and the metrics server call into goes after them; features in
  // the reverse order of their start (the CPU sampler reads the Node.js probes' map).
  ~Impl() {
    probe_server.reset();
    debug_server.reset();
    server.reset();
    inspections.reset();
    while (!features.empty()) features.pop_back();
  }

  Status start(const PartsFactory& build);
  Status run(const StopSignals& stop);
  // `exec`: the exec event that announced it (null for a process found by a scan).
  void consider(pid_t pid, bool running, const ProcessEvent* exec = nullptr);
  void select_exited(const ProcessEvent& exec);
  using ExitSlot = std::shared_ptr<std::optional<uint64_t>>;
  void instrument(ProcessInfo info, const Selection& selection, bool running,
                  const std::vector<Feature*>& on_worker, ProcessOutcome out, const ExitSlot& exit);
  void finish_inspection(pid_t pid, const ExitSlot& exit, std::optional<ProcessOutcome> out);
  void exited(pid_t pid, uint64_t timestamp_ns);
  void reselect();
  void check_inspections();
  void add_collector();
  void record(ProcessOutcome out);
  // Applies a feature's take_revisions() to the recorded outcomes.
  void revise(const Feature& feature,
              const std::vector<std::pair<pid_t, FeatureResult>>& revisions);

  RuntimeOptions options;
  Selector& selector;
  const Clock& clock;
  ProcReader proc;
  symbols::ProbeTargetCache cache;
  std::string node;
  std::optional<std::string> cgroup2_root;  // where cgroup v2 is mounted, if it is

  std::deque<ProcessEvent> pending;
  std::unique_ptr<ProcessEvents> events;
  std::vector<std::unique_ptr<Feature>> features;  // in the order they started
  LabelPairs info_labels;                          // RuntimeParts::info_labels, after `version`
  std::vector<std::string> all_names;              // every feature's symbols, resolved in one parse
  std::atomic<bool> reselect_requested{false};
  mutable std::mutex outcomes_mu;
  std::map<pid_t, ProcessOutcome> outcomes;  // selected processes
  // Exited processes that had a problem, with the time they leave (kExitedProblemNs).
  std::deque<std::pair<uint64_t, ProcessOutcome>> exited_problems;
  // Inspections queued or running, by pid (under outcomes_mu). An exit that comes meanwhile
  // writes its time into the jobs' shared slot and ends the entry (a new process with the pid
  // starts a new one), so the worker releases what it instrumented after the exit was handled.
  struct Inspecting {
    int jobs = 0;
    ExitSlot exit = std::make_shared<std::optional<uint64_t>>();
  };
  std::map<pid_t, Inspecting> inspecting;
  // On the event thread: the name (comm) each selected process had at its exec, by pid, with
  // its start time. A program may rename its main thread after exec -- Node 24 names it
  // MainThread -- and /proc then gives every such process that one name, which standalone mode
  // labels containers with. Erased when the process exits or is no longer selected.
  struct ExecName {
    uint64_t start_time = 0;
    std::string comm;
  };
  std::unordered_map<pid_t, ExecName> exec_names;

  HealthRegistry health;
  HealthRegistry::CheckId event_thread_check =
      health.add("event-thread", HealthRegistry::Probe::kLiveness, kEventThreadStaleAfter);
  HealthRegistry::CheckId inspection_check =
      health.add("inspection", HealthRegistry::Probe::kLiveness);
  HealthRegistry::CheckId started_check = health.add("runtime", HealthRegistry::Probe::kReadiness);
  std::string hung_files;              // the files that hung workers, on the event thread
  bool inspections_exhausted = false;  // reported to `health`

  // Opening and parsing executables (tenants' files) happens here, off the event thread. Its
  // worker finishes the job in hand (or is abandoned) while what the job touches still exists.
  std::unique_ptr<InspectionQueue> inspections;
  std::unique_ptr<MetricsServer> server;
  std::unique_ptr<MetricsServer> debug_server;  // the /debug/ routes, when on their own address
  std::unique_ptr<ProbeServer> probe_server;    // /healthz and /readyz, when on their own address
};

Status AgentRuntime::Impl::start(const PartsFactory& build) {
  route_libbpf_log();
  if (auto mounts = read_file(proc.root() + "/self/mounts"); mounts.ok()) {
    cgroup2_root = cgroup2_mount(*mounts);
  }
  health.set_problem(started_check, "starting: the first /proc scan has not run");
  node = options.node_name.empty() ? host_name() : options.node_name;
  // Events first, then the /proc scan (in run()): a process that starts in between is seen by
  // both (consider() is idempotent), one that exits in between sends an exit event.
  ASSIGN_OR_RETURN(auto parts,
                   build({.options = options,
                          .on_event = [this](const ProcessEvent& e) { pending.push_back(e); },
                          .cache = cache,
                          .proc = proc,
                          .node = node}));
  events = std::move(parts.events);
  features = std::move(parts.features);
  info_labels = {{"version", kVersion}};
  info_labels.insert(info_labels.end(), parts.info_labels.begin(), parts.info_labels.end());
  for (const auto& f : features) {
    const auto& more = f->symbol_names();
    all_names.insert(all_names.end(), more.begin(), more.end());
  }
  inspections = std::make_unique<InspectionQueue>(
      InspectionQueue::Options{.deadline = options.inspection_deadline});
  std::shared_ptr<ServingCertificate> tls;
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(tls, ServingCertificate::load(options.tls_cert_file, options.tls_key_file));
  }
  ASSIGN_OR_RETURN(server, MetricsServer::start(options.metrics_address, options.debug_guard,
                                                options.metrics_guard, tls));
  if (!options.debug_address.empty()) {
    ASSIGN_OR_RETURN(debug_server, MetricsServer::start(options.debug_address, options.debug_guard,
                                                        options.metrics_guard, tls));
  }
  add_collector();
  for (const auto& f : features) f->add_routes(debug_server ? *debug_server : *server);
  auto probe = [this](HealthRegistry::Probe p) {
    return [this, p](const HttpRequest&) {
      auto answer = health.check(p);
      return HttpResponse{.status = answer.ok ? 200 : 503, .body = std::move(answer.body)};
    };
  };
  server->add_route("/healthz", probe(HealthRegistry::Probe::kLiveness));
  server->add_route("/readyz", probe(HealthRegistry::Probe::kReadiness));
  if (!options.health_address.empty()) {
    ASSIGN_OR_RETURN(probe_server,
                     ProbeServer::start(options.health_address,
                                        {{"/healthz", probe(HealthRegistry::Probe::kLiveness)},
                                         {"/readyz", probe(HealthRegistry::Probe::kReadiness)}}));
  }
  return ok_status();
}

namespace {

// Keeps the first problem's message: features report in the order they started.
void merge(ProcessOutcome& out, const Feature& feature, FeatureResult result) {
  out.states[feature.kind()] = result.state;
  if (out.message.empty()) out.message = std::move(result.message);
}

}  // namespace

void AgentRuntime::Impl::revise(const Feature& feature,
                                const std::vector<std::pair<pid_t, FeatureResult>>& revisions) {
  std::lock_guard lock(outcomes_mu);
  for (const auto& [pid, result] : revisions) {
    auto it = outcomes.find(pid);
    if (it == outcomes.end()) continue;  // exited or deselected meanwhile
    it->second.states[feature.kind()] = result.state;
    if (!result.message.empty()) it->second.message = result.message;
  }
}

void AgentRuntime::Impl::record(ProcessOutcome out) {
  std::lock_guard lock(outcomes_mu);
  outcomes[out.pid] = std::move(out);
}

// On the event thread: only /proc is read here, never the process's executable, so an
// unselected process costs a few /proc reads and a selected one is opened by the inspection
// worker (unless no requested feature reads it).
void AgentRuntime::Impl::consider(pid_t pid, bool running, const ProcessEvent* exec) {
  auto info = proc.read(pid);
  if (!info.ok()) {
    // A process gone (selected from its exec event, if it had one) or one even root cannot read
    // (a sandbox's init).
    if (!is_gone(info.error())) {
      log::debug("cannot inspect process", {{"pid", pid}, {"error", info.error().message()}});
    } else if (exec != nullptr) {
      select_exited(*exec);
    }
    return;
  }
  info->exec_ns = exec != nullptr ? exec->timestamp_ns : 0;
  if (exec != nullptr && !exec->comm.empty()) {
    info->comm = valid_utf8(exec->comm);  // what the kernel named it at exec
  } else if (auto it = exec_names.find(pid);
             it != exec_names.end() && it->second.start_time == info->start_time) {
    info->comm = it->second.comm;
  }
  auto selection = selector.select(*info);
  if (!selection) {
    exec_names.erase(pid);
  } else if (exec != nullptr) {
    exec_names[pid] = {info->start_time, info->comm};
  }
  bool was_selected = false;
  {
    std::lock_guard lock(outcomes_mu);
    was_selected = outcomes.count(pid) > 0;
  }
  ProcessOutcome out{.pid = pid, .container_id = info->container_id, .exe = info->exe};
  if (selection) out.labels = selection->labels;
  std::vector<Feature*> on_worker;
  for (const auto& f : features) {
    if (!selection || !f->requested(*selection)) {
      // Deselected (or this feature no longer asked for): release and fold its counters.
      if (was_selected) f->release(pid, clock.now_ns());
      continue;
    }
    if (auto r = f->select(*info, *selection)) {
      if (r->gone) return;
      merge(out, *f, std::move(*r));
    } else {
      on_worker.push_back(f.get());
    }
  }
  const bool requested =
      selection && std::any_of(features.begin(), features.end(),
                               [&](const auto& f) { return f->requested(*selection); });
  if (!requested) {
    std::lock_guard lock(outcomes_mu);
    outcomes.erase(pid);
    return;
  }
  if (on_worker.empty()) {
    record(std::move(out));
    return;
  }
  auto mapping = proc.exe_mapping(pid);
  std::string key = mapping.ok() ? mapping->file : "";
  ExitSlot exit;
  {
    std::lock_guard lock(outcomes_mu);
    auto& entry = inspecting[pid];
    ++entry.jobs;
    exit = entry.exit;
  }
  bool queued = inspections->push(
      key, [this, info = *info, sel = *selection, running, on_worker, out, exit]() mutable {
        instrument(std::move(info), sel, running, on_worker, std::move(out), exit);
      });
  if (!queued) {
    log::debug("process not inspected", {{"pid", pid}, {"exe", info->exe}, {"file", key}});
    finish_inspection(pid, exit, std::move(out));  // what the event thread did (CPU sampling)
  }
}

// A program that exited before its exec event was handled here (a short-lived one on a busy
// node) has nothing left in /proc, yet a kernel probe may have counted it from its first call
// (Go TLS probes kept on its file): it is selected from what its exec event says (the path
// execve() was given, unresolved; its comm; the container of its cgroup v2), and each requested
// feature's select() sees it, so that its exit, which follows, folds those counts into its
// container. Nothing is inspected and no outcome is recorded. Not selected when its cgroup is
// gone or there is no cgroup v2 hierarchy (its container cannot be told then).
void AgentRuntime::Impl::select_exited(const ProcessEvent& exec) {
  if (!cgroup2_root) return;
  auto cgroup = cgroup2_path_of(*cgroup2_root, exec.cgroup_id);
  if (!cgroup.ok()) return;
  ProcessInfo info{.pid = static_cast<pid_t>(exec.pid),
                   .start_time = 0,
                   .comm = valid_utf8(exec.comm),
                   .exe = valid_utf8(exec.filename),
                   .container_id = container_id_from_cgroup("0::" + *cgroup + "\n"),
                   .exec_ns = exec.timestamp_ns};
  auto selection = selector.select(info);
  if (!selection) return;
  for (const auto& f : features) {
    if (f->requested(*selection)) (void)f->select(info, *selection);
  }
}

// The last step of an inspection: the outcome is recorded, unless the process exited while it
// was inspected; then what the features did for it meanwhile is released (the exit event was
// handled before it). `out` is empty for a process found gone.
void AgentRuntime::Impl::finish_inspection(pid_t pid, const ExitSlot& exit,
                                           std::optional<ProcessOutcome> out) {
  std::optional<uint64_t> exited_ns;
  {
    std::lock_guard lock(outcomes_mu);
    exited_ns = *exit;
    auto it = inspecting.find(pid);
    if (it != inspecting.end() && it->second.exit == exit && --it->second.jobs == 0) {
      inspecting.erase(it);
    }
    if (!exited_ns) {
      if (out) outcomes[pid] = std::move(*out);
      return;
    }
  }
  for (const auto& f : features) f->release(pid, *exited_ns);
}

// On the inspection worker: the features that read the executable, with it opened once.
void AgentRuntime::Impl::instrument(ProcessInfo info, const Selection& selection, bool running,
                                    const std::vector<Feature*>& on_worker, ProcessOutcome out,
                                    const ExitSlot& exit) {
  const pid_t pid = info.pid;
  auto c = open_candidate(proc, std::move(info), running);
  if (!c.ok()) {
    if (!is_gone(c.error())) {
      log::debug("cannot open executable", {{"pid", pid}, {"error", c.error().message()}});
      finish_inspection(pid, exit, std::move(out));
    } else {
      finish_inspection(pid, exit, std::nullopt);
    }
    return;
  }
  (void)cache.resolve(c->binary, all_names);
  for (Feature* f : on_worker) {
    FeatureResult r = f->instrument(*c, selection);
    if (r.gone) {
      finish_inspection(pid, exit, std::nullopt);
      return;
    }
    merge(out, *f, std::move(r));
  }
  finish_inspection(pid, exit, std::move(out));
}

void AgentRuntime::Impl::exited(pid_t pid, uint64_t timestamp_ns) {
  exec_names.erase(pid);
  {
    std::lock_guard lock(outcomes_mu);
    if (auto it = outcomes.find(pid); it != outcomes.end()) {
      const uint64_t now = clock.now_ns();
      while (!exited_problems.empty() && (exited_problems.front().first <= now ||
                                          exited_problems.size() >= kMaxExitedProblems)) {
        exited_problems.pop_front();
      }
      if (has_problem(it->second)) {
        exited_problems.emplace_back(now + kExitedProblemNs, std::move(it->second));
      }
      outcomes.erase(it);
    }
    if (auto it = inspecting.find(pid); it != inspecting.end()) {
      *it->second.exit = timestamp_ns;
      inspecting.erase(it);
    }
  }
  for (const auto& f : features) f->release(pid, timestamp_ns);
}

// A worker stuck on a file past the deadline is replaced; the file is not tried again. With
// every worker stuck nothing is inspected any more, which only a restart undoes: liveness.
void AgentRuntime::Impl::check_inspections() {
  const auto hung = inspections->check();
  if (hung.empty() && inspections_exhausted) return;
  const auto stats = inspections->stats();
  for (const auto& file : hung) {
    log::warn("reading an executable hung; not instrumenting that file",
              {{"file", file},
               {"deadline_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(options.inspection_deadline)
                    .count()},
               {"stuck_workers", stats.stuck_workers}});
    hung_files += (hung_files.empty() ? "" : ", ") + file;
  }
  if (stats.exhausted && !inspections_exhausted) {
    inspections_exhausted = true;
    health.set_problem(inspection_check,
                       "every inspection worker (" + std::to_string(stats.stuck_workers) +
                           ") hung reading an executable, none is inspected any more; files: " +
                           (hung_files.empty() ? "(none named)" : hung_files));
  }
}

void AgentRuntime::Impl::reselect() {
  // Every live process: the newly selected are instrumented, the deselected released, the
  // unchanged left as they are (the features recognize a process they already track).
  for (pid_t pid : proc.list_pids()) consider(pid, true);
}

Status AgentRuntime::Impl::run(const StopSignals& stop) {
  for (pid_t pid : proc.list_pids()) consider(pid, true);
  // The start-up line reports what the scan found; a hung file does not delay it past this.
  (void)inspections->drain(options.inspection_deadline);
  health.beat(event_thread_check);
  health.clear_problem(started_check);
  log::info("sonde-agent running", {{"version", kVersion},
                                    {"metrics", options.metrics_address},
                                    {"port", server->port()},
                                    {"tls", !options.tls_cert_file.empty()},
                                    {"features", static_cast<uint64_t>(features.size())}});
  for (const auto& f : features) {
    log::info("feature running",
              {{"feature", f->name()}, {"processes", static_cast<uint64_t>(f->tracked())}});
  }
  uint64_t next_sweep = clock.now_ns() + kSweepIntervalNs;
  uint64_t next_rescan = clock.now_ns();
  uint64_t dropped_seen = events->dropped();
  while (!stop.requested()) {
    health.beat(event_thread_check);
    RETURN_IF_ERROR(events->poll(200));
    while (!pending.empty()) {
      ProcessEvent e = std::move(pending.front());
      pending.pop_front();
      auto pid = static_cast<pid_t>(e.pid);
      if (e.kind == ProcessEvent::Kind::kExec) {
        consider(pid, false, &e);
      } else {
        exited(pid, e.timestamp_ns);
      }
    }
    // Exec events lost to a full ring buffer: the processes they announced are found by a scan.
    if (uint64_t dropped = events->dropped(); dropped != dropped_seen) {
      if (clock.now_ns() >= next_rescan) {
        log::info("process events were lost; rescanning /proc", {{"lost", dropped - dropped_seen}});
        dropped_seen = dropped;
        next_rescan = clock.now_ns() + kRescanIntervalNs;
        reselect_requested.store(true);
      }
    }
    if (reselect_requested.exchange(false)) reselect();
    check_inspections();
    if (clock.now_ns() >= next_sweep) {
      for (const auto& f : features) {
        f->sweep();
        revise(*f, f->take_revisions());
      }
      next_sweep = clock.now_ns() + kSweepIntervalNs;
    }
  }
  health.set_problem(started_check, "shutting down");
  log::info("shutting down", {{"signal", stop.signal()}});
  return ok_status();
}

void AgentRuntime::Impl::add_collector() {
  server->add([this]() {
    std::vector<prometheus::MetricFamily> out;
    for (const auto& f : features) f->collect(out);
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
    auto info = gauge_family("sonde_agent_info",
                             "Agent version, the event-loop wait hook, and what that hook costs "
                             "processes the agent does not select (none, every-syscall).");
    add_sample(info, info_labels, 1);
    for (auto* f : {&entries, &dropped, &rss, &info}) out.push_back(std::move(*f));
    return out;
  });
}

Result<std::unique_ptr<AgentRuntime>> AgentRuntime::start(const RuntimeOptions& options,
                                                          Selector& selector,
                                                          const PartsFactory& build,
                                                          const Clock& clock) {
  // Before anything holds descriptors: uprobe links are held against this limit (fd_budget.h).
  if (auto limits = raise_fd_limit(); limits.ok()) {
    log::info("file descriptor limit", {{"soft_before", limits->soft_before},
                                        {"soft", limits->soft},
                                        {"hard", limits->hard},
                                        {"reserve", static_cast<uint64_t>(kFdReserve)}});
  } else {
    log::warn("file descriptor limit not raised", {{"error", limits.error().message()}});
  }
  auto impl = std::make_unique<Impl>(options, selector, clock);
  RETURN_IF_ERROR(impl->start(build));
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
  out.reserve(impl_->outcomes.size() + impl_->exited_problems.size());
  for (const auto& [pid, o] : impl_->outcomes) out.push_back(o);
  const uint64_t now = impl_->clock.now_ns();
  for (const auto& [until, o] : impl_->exited_problems) {
    if (until > now) out.push_back(o);
  }
  return out;
}

int AgentRuntime::metrics_port() const {
  return impl_->server->port();
}

int AgentRuntime::debug_port() const {
  return impl_->debug_server ? impl_->debug_server->port() : impl_->server->port();
}

int AgentRuntime::health_port() const {
  return impl_->probe_server ? impl_->probe_server->port() : impl_->server->port();
}

void AgentRuntime::add_collector(MetricsServer::Collector collector) {
  impl_->server->add(std::move(collector));
}

HealthRegistry& AgentRuntime::health() {
  return impl_->health;
}

}  // namespace sonde::agent
