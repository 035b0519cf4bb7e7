#include "agent/gotls/gotls_feature.h"

#include <array>
#include <cstdio>
#include <mutex>

#include "agent/gotls/probe_overhead.h"
#include "common/files.h"
#include "common/log.h"

namespace sonde::agent {

Result<std::unique_ptr<GoTlsFeature>> GoTlsFeature::load(symbols::ProbeTargetCache& cache,
                                                         const ProcReader& proc, uint64_t grace_ns,
                                                         std::string node, bool filter_by_cgroup,
                                                         bool perform_ret, size_t max_binaries,
                                                         uint64_t keep_probes_ns) {
  ASSIGN_OR_RETURN(auto probes, TlsProbes::load(perform_ret));
  if (!probes->follows_http2()) {
    log::warn(
        "Go TLS: HTTP/2 streams are not counted on this kernel (no bpf_loop, Linux 5.17+); "
        "HTTP/1.x requests and HTTP/2 connections are",
        {});
  }
  log::info("Go TLS uprobe links", {{"links", uprobe_link_kind_name(probes->links())},
                                    {"why", uprobe_link_support().why},
                                    {"max_binaries", max_binaries},
                                    {"keep_probes_s", keep_probes_ns / 1'000'000'000},
                                    {"fd_reserve", kFdReserve}});
  if (perform_ret) {
    log::info("Go TLS: RET probes performing the ret (--go-tls-perform-ret)",
              {{"register_writes", probes->register_writes()}});
  }
  auto f = std::unique_ptr<GoTlsFeature>(
      new GoTlsFeature(std::move(node), keep_probes_ns, proc.root(), grace_ns));
  if (auto costs = measure_uprobe_hit_costs(); costs.ok()) {
    f->hit_costs_ = *costs;
    log::info("uprobe hit cost on this node",
              {{"emulated_ns", costs->emulated_ns}, {"single_step_ns", costs->single_step_ns}});
  } else {
    log::warn("uprobe hit cost not measured", {{"error", costs.error().message()}});
  }
  f->probes_ = std::move(probes);
  f->monitor_ = std::make_unique<TlsMonitor>(
      *f->probes_, cache, f->uprobes_, proc, grace_ns, f->clock_,
      TlsMonitor::Budget{.max_binaries = max_binaries, .fds = &f->fds_});
  f->drainer_ = std::jthread([p = f.get()](const std::stop_token& stop) { p->drain_loop(stop); });
  auto mounts = read_file(proc.root() + "/self/mounts");
  if (mounts.ok()) f->cgroup2_root_ = cgroup2_mount(*mounts);
  if (!f->cgroup2_root_ || !f->hit_costs_) {
    log::warn("Go TLS overhead budgets (limits.maxOverheadPercent) are not enforced on this node",
              {{"why", !f->hit_costs_ ? "the per-hit cost could not be measured"
                                      : "no cgroup v2 hierarchy to read containers' CPU from"}});
  }
  if (filter_by_cgroup) {
    if (f->cgroup2_root_) {
      f->monitor_->filter_by_cgroup();
    } else {
      log::warn("no cgroup v2 hierarchy: Go TLS counts every process of instrumented binaries",
                {{"mounts", proc.root() + "/self/mounts"}});
    }
  }
  return f;
}

GoTlsFeature::~GoTlsFeature() = default;

void GoTlsFeature::drain_loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    probes_->drain();
    // At most kDrainPeriodMs, less when the kernel wakes it (a flood): stopping waits as long.
    probes_->wait_for_records(TlsProbes::kDrainPeriodMs);
  }
}

std::optional<FeatureResult> GoTlsFeature::suspended(const Selection& selection) {
  const auto& budget = selection.instrumentations[kind()].as<GoTlsParams>().overhead_budget;
  std::lock_guard lock(overhead_mu_);
  auto it = suspended_.find(selection.labels);
  if (it == suspended_.end()) return std::nullopt;
  if (!budget || budget->epoch != it->second.epoch) {
    log::info("Go TLS overhead budget changed: instrumenting the container again",
              {{"namespace", selection.labels.namespace_name},
               {"pod", selection.labels.pod},
               {"container", selection.labels.container}});
    suspended_.erase(it);
    window_.forget(selection.labels);
    return std::nullopt;
  }
  it->second.seen_ns = clock_.now_ns();
  return FeatureResult{ProcessOutcome::State::kOverheadExceeded, it->second.message};
}

std::optional<FeatureResult> GoTlsFeature::select(const ProcessInfo& process,
                                                  const Selection& selection) {
  if (auto r = suspended(selection)) {
    monitor_->exited(process.pid);  // a process of it tracked before: stopped already
    return r;
  }
  monitor_->admit(process, selection.labels);
  return std::nullopt;
}

FeatureResult GoTlsFeature::instrument(const Candidate& c, const Selection& selection) {
  using State = ProcessOutcome::State;
  if (auto r = suspended(selection)) {
    monitor_->exited(c.info.pid);
    return *r;
  }
  const auto& params = selection.instrumentations[kind()].as<GoTlsParams>();
  {
    std::lock_guard lock(overhead_mu_);
    if (params.overhead_budget) {
      budgets_[selection.labels] = *params.overhead_budget;
    } else {
      budgets_.erase(selection.labels);
    }
  }
  std::string why;
  switch (monitor_->consider(c, selection.labels, params.uprobe_limits, &why)) {
    case TlsMonitor::Outcome::kTracked: return {State::kInstrumented, ""};
    case TlsMonitor::Outcome::kNotTlsUser: return {State::kNotApplicable, ""};
    case TlsMonitor::Outcome::kNotInstrumentable:
      return {State::kSymbolsNotFound, "Go TLS not instrumentable in " + c.info.exe};
    case TlsMonitor::Outcome::kGone: return {.gone = true};
    case TlsMonitor::Outcome::kFailed:
      return {State::kFailed, "Go TLS probes could not be attached"};
    case TlsMonitor::Outcome::kOverLimit: return {State::kLimitExceeded, why};
  }
  return {State::kFailed, "unknown outcome"};
}

void GoTlsFeature::sweep() {
  monitor_->sweep();
  const uint64_t now = clock_.now_ns();
  if (now - last_idle_sweep_ns_ >= TlsProbes::kIdleSweepPeriodNs &&
      now > TlsProbes::kIdleStateAgeNs) {
    last_idle_sweep_ns_ = now;
    probes_->forget_idle(now - TlsProbes::kIdleStateAgeNs);
  }
  if (hit_costs_ && cgroup2_root_) check_overhead();
}

Result<double> GoTlsFeature::container_cpu_seconds(pid_t pid) const {
  // By the id the kernel names (any cgroup namespace), else by the path /proc shows (kernels
  // without per-process task iterators, where the agent shares the host's cgroup namespace).
  auto info = ProcReader(proc_root_).read(pid);
  if (info.ok()) {
    auto id = probes_->cgroup_of(pid, info->start_time);
    if (id.ok()) {
      auto by_id = cgroup_cpu_seconds_by_id(*cgroup2_root_, *id);
      if (by_id.ok()) return by_id;
    }
  }
  return cgroup_cpu_seconds(proc_root_, *cgroup2_root_, pid);
}

void GoTlsFeature::check_overhead() {
  const auto pids = monitor_->a_process_per_container();
  const auto stats = monitor_->snapshot();
  std::lock_guard lock(overhead_mu_);
  const uint64_t now = clock_.now_ns();
  for (auto it = suspended_.begin(); it != suspended_.end();) {
    it = now - it->second.seen_ns > grace_ns_ ? suspended_.erase(it) : std::next(it);
  }
  for (auto it = budgets_.begin(); it != budgets_.end();) {
    if (pids.contains(it->first)) {
      ++it;
    } else {  // no tracked process left: nothing to hold against it
      window_.forget(it->first);
      it = budgets_.erase(it);
    }
  }
  for (const auto& [labels, budget] : budgets_) {
    auto own = container_cpu_seconds(pids.at(labels));
    if (!own.ok()) {
      if (unreadable_cpu_.size() < 1024 && unreadable_cpu_.insert(labels).second) {
        log::warn("Go TLS overhead budget not enforced: the container's CPU cannot be read",
                  {{"namespace", labels.namespace_name},
                   {"pod", labels.pod},
                   {"container", labels.container},
                   {"error", own.error().message()}});
      }
      continue;
    }
    auto s = stats.find(labels);
    const double probe = s == stats.end() ? 0 : probe_cpu_seconds(s->second.hits, *hit_costs_);
    if (!window_.observe(labels, probe, *own, budget.max_percent)) continue;
    char share[64];
    (void)std::snprintf(share, sizeof share, "%.2f%% (limit %g%%)", window_.last_percent(labels),
                        budget.max_percent);
    std::string message =
        "Go TLS probes detached: they cost an estimated " + std::string(share) +
        " of the container's CPU in " +
        std::to_string(OverheadWindow<ContainerLabels>::kSustainedIntervals) +
        " consecutive intervals (limits.maxOverheadPercent); instrumented again when the policy "
        "changes or the agent restarts";
    const auto stopped = monitor_->stop_container(labels);
    log::warn("Go TLS overhead budget exceeded: probes detached",
              {{"namespace", labels.namespace_name},
               {"pod", labels.pod},
               {"container", labels.container},
               {"share", share},
               {"processes", static_cast<uint64_t>(stopped.size())}});
    for (pid_t pid : stopped) {
      revisions_.emplace_back(pid,
                              FeatureResult{ProcessOutcome::State::kOverheadExceeded, message});
    }
    suspended_[labels] = {budget.epoch, std::move(message), now};
    window_.forget(labels);
    ++overhead_detaches_;
  }
  for (const auto& [labels, pid] : pids) {
    if (suspended_.contains(labels)) budgets_.erase(labels);
  }
}

std::vector<std::pair<pid_t, FeatureResult>> GoTlsFeature::take_revisions() {
  std::lock_guard lock(overhead_mu_);
  return std::exchange(revisions_, {});
}

// Go TLS families: requests, durations, HTTP/2 connections, bytes; and binary verdicts.
void GoTlsFeature::collect(std::vector<prometheus::MetricFamily>& out) {
  auto requests = counter_family(
      "container_go_tls_requests_total",
      "Requests over Go crypto/tls connections (HTTP/1.x exchanges, HTTP/2 streams, gRPC calls), "
      "by direction (client: sent by this container; server: answered by it), method, status "
      "class (reset: an HTTP/2 stream ended by RST_STREAM or GOAWAY), protocol (http1, http2, "
      "grpc) and gRPC status code name (grpc_code, \"\" unless gRPC with a grpc-status).");
  auto http2 = counter_family("container_go_tls_http2_connections_total",
                              "HTTP/2 connections over Go crypto/tls (their preface seen).");
  auto read = counter_family("container_go_tls_read_bytes_total",
                             "Plaintext bytes read through Go crypto/tls.");
  auto written = counter_family("container_go_tls_written_bytes_total",
                                "Plaintext bytes written through Go crypto/tls.");
  prometheus::MetricFamily durations{"container_go_tls_request_duration_seconds",
                                     "Request duration over Go crypto/tls: request seen to "
                                     "(final) response seen (HTTP/2: first HEADERS to the end "
                                     "of the response), by direction and protocol.",
                                     prometheus::MetricType::Histogram,
                                     {}};
  auto hits = counter_family(
      "container_go_tls_probe_hits_total",
      "Go TLS uprobe hits in the container's processes, one per probed call, by site (entry: "
      "(*Conn).Read and .Write; return: Read's RETs) and kind (emulated: a jump the kernel "
      "emulates; single_step: an instruction it single-steps out of line; bpf_ret: a RET the "
      "program performs).");
  auto probe_cpu = counter_family(
      "container_go_tls_probe_cpu_seconds_total",
      "CPU time sonde's Go TLS uprobes added to the container's processes, estimated: its probe "
      "hits of each kind times the per-hit cost the agent measured at start on this node "
      "(sonde_agent_uprobe_hit_cost_seconds). Absent where the cost could not be measured.");
  auto over_share = counter_family(
      "container_go_tls_share_exceeded_total",
      "Go TLS kernel state the container's processes could not insert because the process held "
      "its share (1/8) of the node-wide map: an HTTP/2 connection not followed (h2_states), a "
      "request whose response is not matched (exchanges), a Read not seen (reads, carried), "
      "an HTTP/2 connection given up because the process had its share (2 MiB) of the "
      "ring buffer's bytes not yet read by the agent (h2_events). Only this container loses "
      "them.");
  auto processes = gauge_family("sonde_agent_gotls_processes", "Go TLS processes instrumented.");
  for (const auto& [labels, s] : monitor_->snapshot()) {
    LabelPairs base{{"namespace", labels.namespace_name},
                    {"pod", labels.pod},
                    {"container", labels.container},
                    {"node", node_}};
    auto with = [&base](LabelPairs extra) {
      LabelPairs l = base;
      l.insert(l.end(), extra.begin(), extra.end());
      return l;
    };
    for (const auto& [k, n] : s.requests) {
      add_sample(requests,
                 with({{"direction", k.direction},
                       {"method", k.method},
                       {"status_class", k.status_class},
                       {"protocol", k.protocol},
                       {"grpc_code", k.grpc_code}}),
                 static_cast<double>(n));
    }
    for (const auto& [direction, n] : s.http2_connections) {
      add_sample(http2, with({{"direction", direction}}), static_cast<double>(n));
    }
    for (const auto& [key, h] : s.durations) {
      // The kernel counts the buckets within the bounds; the rest of `count` is above them all.
      std::array<uint64_t, kTlsDurationBuckets.size() + 1> counts{};
      uint64_t within = 0;
      for (size_t i = 0; i < kTlsDurationBuckets.size(); ++i) {
        counts[i] = h.buckets[i];
        within += h.buckets[i];
      }
      counts.back() = h.count > within ? h.count - within : 0;
      add_histogram(durations, with({{"direction", key.direction}, {"protocol", key.protocol}}),
                    kTlsDurationBuckets, counts, h.sum);
    }
    for (size_t site = 0; site < SONDE_GOTLS_SITE_COUNT; ++site) {
      const ProbeSiteKind kind = probe_site_kind(static_cast<sonde_gotls_site>(site));
      add_sample(hits, with({{"site", kind.site}, {"kind", kind.kind}}),
                 static_cast<double>(s.hits[site]));
    }
    for (size_t t = 0; t < SONDE_GOTLS_SHARED_COUNT; ++t) {
      add_sample(over_share,
                 with({{"map", gotls_shared_table_name(static_cast<sonde_gotls_shared_table>(t))}}),
                 static_cast<double>(s.over_share[t]));
    }
    if (hit_costs_) add_sample(probe_cpu, base, probe_cpu_seconds(s.hits, *hit_costs_));
    add_sample(read, base, static_cast<double>(s.read_bytes));
    add_sample(written, base, static_cast<double>(s.written_bytes));
    add_sample(processes, base, static_cast<double>(s.processes));
  }
  auto binaries = gauge_family("sonde_agent_gotls_binaries",
                               "Go binaries seen with crypto/tls (or stripped): 1 per binary, "
                               "with whether it is instrumented and why not.");
  for (const auto& v : monitor_->verdicts()) {
    const bool limited = !v.limit_exceeded.empty();
    add_sample(binaries,
               {{"binary", v.path},
                {"build_id", v.build_id},
                {"instrumented", v.instrumentable && !limited ? "true" : "false"},
                {"reason", limited ? "LimitExceeded: " + v.limit_exceeded : v.reason},
                {"stripped", v.stripped ? "true" : "false"},
                {"entry_probe", v.entry_probe},
                {"return_probe", v.return_probe}},
               1);
  }
  auto full = counter_family(
      "sonde_agent_gotls_map_full_total",
      "Go TLS kernel map inserts that failed (processes/requests: counts lost; "
      "reads/exchanges/carried: exchanges not matched; h2_states: an HTTP/2 connection not "
      "followed), because the map was full (reason=map_full) or because the process held its "
      "share of the map (reason=process_share: only that process loses), and HTTP/2 connections "
      "given up in the kernel (h2_events: ring buffer full, or the process's share of it; "
      "h2_walk_steps, h2_frame_bytes: a bound hit). Nothing is evicted silently.");
  for (const auto& [map_reason, n] : monitor_->kernel_map_full()) {
    add_sample(full, {{"map", map_reason.first}, {"reason", map_reason.second}},
               static_cast<double>(n));
  }
  auto idle = counter_family(
      "sonde_agent_gotls_idle_state_freed_total",
      "Go TLS kernel state freed because it outlived any request (10 minutes): an HTTP/1.x "
      "request unanswered that long (map=exchanges; counted as a request with "
      "status_class=unknown) or a one-byte Read's byte never joined to a next Read "
      "(map=carried), as a connection closed with no Read pending leaves them.");
  const auto forgotten = probes_->forgotten();
  add_sample(idle, {{"map", "exchanges"}}, static_cast<double>(forgotten.exchanges));
  add_sample(idle, {{"map", "carried"}}, static_cast<double>(forgotten.carried));
  auto discarded = counter_family("sonde_agent_gotls_unattributed_processes_total",
                                  "Processes counted by the Go TLS probes whose counts were "
                                  "discarded: not selected, or exited before they were seen.");
  add_sample(discarded, {}, static_cast<double>(monitor_->discarded_processes()));
  auto filter = gauge_family("sonde_agent_gotls_cgroup_filter",
                             "1 when the kernel counts only selected containers' cgroups, 0 "
                             "when it counts every process of instrumented binaries.");
  add_sample(filter, {}, monitor_->filtering_by_cgroup() ? 1 : 0);
  auto attachments = gauge_family("sonde_agent_uprobe_attachments",
                                  "Uprobe attachments alive: one per (real file, program) with "
                                  "all the program's sites in the file, shared by every process "
                                  "running the file.");
  add_sample(attachments, {{"feature", "gotls"}}, static_cast<double>(uprobes_.size()));
  auto attaches =
      counter_family("sonde_agent_uprobe_attaches_total", "Uprobe attachments made since start.");
  add_sample(attaches, {{"feature", "gotls"}}, static_cast<double>(uprobes_.attach_count()));
  auto by_policy = gauge_family("sonde_agent_policy_uprobes",
                                "Uprobes the processes a policy selects use on this node (each "
                                "binary's once), held against its limits.maxUprobesPerNode.");
  for (const auto& [policy, n] : monitor_->policy_uprobes()) {
    add_sample(by_policy, {{"policy", policy}, {"node", node_}}, static_cast<double>(n));
  }
  auto instrumented = gauge_family("sonde_agent_gotls_instrumented_binaries",
                                   "Go TLS binaries holding uprobes now: instrumented, or idle "
                                   "(kept after their last process exited); together held "
                                   "against --max-go-tls-binaries (the `max` series).");
  add_sample(instrumented, {{"kind", "instrumented"}},
             static_cast<double>(monitor_->instrumented_binaries()));
  add_sample(instrumented, {{"kind", "idle"}}, static_cast<double>(monitor_->idle_binaries()));
  add_sample(instrumented, {{"kind", "max"}}, static_cast<double>(monitor_->max_binaries()));
  auto left_out = counter_family(
      "sonde_agent_gotls_not_instrumented_total",
      "Go TLS processes not instrumented (LimitExceeded) because of a node-wide bound: "
      "binary_limit (--max-go-tls-binaries binaries instrumented already) or fd_reserve (their "
      "uprobe links would leave fewer descriptors than the agent's reserve).");
  const auto counts = monitor_->not_instrumented();
  for (const char* reason : {"binary_limit", "fd_reserve"}) {
    add_sample(left_out, {{"reason", reason}},
               static_cast<double>(counts.contains(reason) ? counts.at(reason) : 0));
  }
  auto hit_cost = gauge_family("sonde_agent_uprobe_hit_cost_seconds",
                               "What one uprobe hit adds to a probed call on this node, measured "
                               "at start: at an emulated jump (Go TLS entry probes) and at a "
                               "single-stepped instruction (Read's RETs).");
  if (hit_costs_) {
    add_sample(hit_cost, {{"kind", "emulated"}}, hit_costs_->emulated_ns / 1e9);
    add_sample(hit_cost, {{"kind", "single_step"}}, hit_costs_->single_step_ns / 1e9);
  }
  auto detaches = counter_family(
      "sonde_agent_gotls_overhead_exceeded_total",
      "Containers whose Go TLS probes were detached because their estimated cost stayed above "
      "their policy's (or the standalone config's) limits.maxOverheadPercent of the container's "
      "CPU "
      "(OverheadExceeded).");
  {
    std::lock_guard lock(overhead_mu_);
    add_sample(detaches, {}, static_cast<double>(overhead_detaches_));
  }
  auto evicted = counter_family("sonde_agent_gotls_evicted_binaries_total",
                                "Go TLS binaries kept after their last exit whose uprobes were "
                                "detached early to make room for a new binary (oldest first).");
  add_sample(evicted, {}, static_cast<double>(monitor_->evicted_binaries()));
  auto unseen = counter_family("sonde_agent_gotls_exited_unseen_processes_total",
                               "Selected Go TLS processes that exited before the agent inspected "
                               "them (short-lived programs), counted for their container from "
                               "the kernel's counts.");
  add_sample(unseen, {}, static_cast<double>(monitor_->exited_unseen()));
  auto attach_delay = histogram_family(
      "sonde_agent_gotls_attach_delay_seconds",
      "Time from a process's exec to its binary's Go TLS probes attached, for processes whose "
      "binary was attached for them (not attached before, or detached since). Calls the process "
      "makes before are not counted.");
  const auto delays = monitor_->attach_delays();
  add_histogram(attach_delay, {}, AttachDelays::kBoundsSeconds, delays.counts, delays.sum_seconds);
  const Http2Tracker& tracker = probes_->http2();
  const auto h2 = tracker.stats();
  auto h2_conns = counter_family(
      "sonde_agent_gotls_http2_connections_total",
      "HTTP/2 connections of instrumented Go processes, by what became of them: followed (preface "
      "seen), unparsed (seen without its start: its streams are not counted), malformed (a peer "
      "broke HTTP/2 or HPACK rules: not counted from then on), lost (kernel events lost: not "
      "counted from then on), evicted (the least recently active past the agent's bounds).");
  for (const auto& [outcome, n] : {std::pair{"followed", h2.followed},
                                   {"unparsed", h2.unparsed},
                                   {"malformed", h2.malformed},
                                   {"lost", h2.lost},
                                   {"evicted", h2.evicted}}) {
    add_sample(h2_conns, {{"outcome", outcome}}, static_cast<double>(n));
  }
  auto h2_live = gauge_family("sonde_agent_gotls_http2_tracked_connections",
                              "HTTP/2 connections the agent follows now, and the bytes their "
                              "state holds (kind=bytes).");
  add_sample(h2_live, {{"kind", "connections"}}, static_cast<double>(tracker.connections()));
  add_sample(h2_live, {{"kind", "bytes"}}, static_cast<double>(tracker.memory()));
  for (auto* f :
       {&requests,    &over_share, &hits,      &probe_cpu,    &http2,       &durations, &read,
        &written,     &processes,  &binaries,  &full,         &idle,        &discarded, &filter,
        &attachments, &attaches,   &by_policy, &instrumented, &left_out,    &hit_cost,  &detaches,
        &evicted,     &unseen,     &h2_conns,  &h2_live,      &attach_delay}) {
    out.push_back(std::move(*f));
  }
}

}  // namespace sonde::agent
