#include "agent/gotls/tls_monitor.h"

#include <cerrno>

#include "common/log.h"

namespace sonde::agent {

TlsMonitor::TlsMonitor(TlsCounters& probes, symbols::ProbeTargetCache& cache,
                       SharedUprobes& uprobes, const ProcReader& proc, uint64_t grace_ns,
                       const Clock& clock, Budget budget)
    : probes_(probes),
      cache_(cache),
      uprobes_(uprobes),
      proc_(proc),
      clock_(clock),
      tracker_(grace_ns),
      budget_(budget, uprobes),
      admissions_(probes) {}

TlsMonitor::Binary TlsMonitor::binary_for(const symbols::OpenBinary& binary, const std::string& exe,
                                          const std::vector<symbols::ProbeTarget>& t) {
  std::string key = binary.identity().to_string();
  {
    std::lock_guard lock(mu_);
    if (auto b = verdicts_.find(key)) return *std::move(b);
  }
  Binary b = plan_go_tls(binary, exe, t, probes_.can_perform_ret());
  const BinaryVerdict& v = b.verdict;
  if (v.reported) {
    log::info(v.instrumentable ? "instrumenting Go TLS binary" : "Go TLS binary not instrumentable",
              {{"binary", exe},
               {"reason", v.reason},
               {"stripped", v.stripped},
               {"entry_probe", v.entry_probe},
               {"return_probe", v.return_probe}});
  }
  std::lock_guard lock(mu_);
  verdicts_.remember(key, b);
  return b;
}

const std::vector<std::string>& TlsMonitor::symbol_names() {
  return go_tls_symbol_names();
}

TlsMonitor::Outcome TlsMonitor::consider(const Candidate& c, const ContainerLabels& labels,
                                         const UprobeLimits& limits, std::string* why) {
  const pid_t pid = c.info.pid;
  {
    std::lock_guard lock(mu_);
    if (const auto* p = tracker_.find(pid)) {
      if (c.running && p->start_time == c.info.start_time) return Outcome::kTracked;
      finish_locked(pid);
    }
  }
  const std::string path = c.attach_path();
  auto targets = cache_.resolve(c.binary, go_tls_symbol_names());
  if (!targets.ok() || !may_use_go_tls(c.binary, *targets)) return Outcome::kNotTlsUser;
  Binary b = binary_for(c.binary, c.info.exe, *targets);
  if (!b.verdict.reported) return Outcome::kNotTlsUser;
  if (!b.verdict.instrumentable) return Outcome::kNotInstrumentable;

  const auto& id = c.binary.identity();
  const std::string key = id.to_string();
  std::vector<SharedUprobes::Request> requests;
  size_t fds = 0;
  for (const GoTlsProgramSites& p : b.programs) {
    requests.push_back({{id, p.name}, [this, &p](const std::string& attach_path) {
                          return probes_.attach(p.program, attach_path, p.sites);
                        }});
    fds += probes_.link_fds(p.sites.size());
  }
  // Attached already (another process of it, or kept after its last exit): no new descriptor.
  // Asked before the budget's lock; a detach finishing in between makes acquire() attach again
  // unbudgeted, by one binary's links at most per process in flight.
  const bool attached = uprobes_.missing(requests) == 0;
  if (attached) {
    fds = 0;
  } else {
    make_room(fds);
  }
  {
    std::lock_guard lock(mu_);
    if (auto refused = budget_.use(pid, key, b.sites(), fds, attached, limits, c.info.exe)) {
      // Not counted: the kernel counts it only under another binary (the node's bound), or the
      // file's probes count it for other policies, not for its own.
      admissions_.unadmit(pid);
      if (refused->bound == UprobeBudget::Refusal::Bound::kNode &&
          verdicts_.exceed_limit(key, refused->why)) {
        log::warn("Go TLS binary not instrumented: LimitExceeded",
                  {{"binary", c.info.exe}, {"pid", pid}, {"reason", refused->why}});
      }
      if (why) *why = std::move(refused->why);
      return Outcome::kOverLimit;
    }
  }
  Status st = uprobes_.acquire(requests, path, pid);
  if (!st.ok()) {
    {
      std::lock_guard lock(mu_);
      budget_.attach_done(fds);
      budget_.unuse(pid, key);
    }
    if (is_gone(st.error())) return Outcome::kGone;
    if (st.error().code() == EACCES || st.error().code() == EPERM) {
      // The agent's privileges do not change while it runs: the binary's verdict says so once,
      // and later processes of it are not attached (nor logged) again.
      b.verdict.instrumentable = false;
      b.verdict.reason = std::string(kUprobesRefused);
      b.programs.clear();
      log::warn(
          "Go TLS binary not instrumentable",
          {{"binary", c.info.exe}, {"reason", b.verdict.reason}, {"error", st.error().message()}});
      std::lock_guard lock(mu_);
      verdicts_.replace(key, b);
      return Outcome::kFailed;
    }
    log::warn("cannot instrument Go TLS process", {{"pid", pid}, {"error", st.error().message()}});
    return Outcome::kFailed;
  }
  if (!attached && !c.running && c.info.exec_ns != 0) {
    attach_delays_.observe(c.info.exec_ns, clock_.now_ns());
  }
  std::lock_guard lock(mu_);
  budget_.attach_done(fds);
  verdicts_.within_limit(key);
  tracker_.start(pid, {c.info.start_time, labels, key});
  untracked_seen_.erase(static_cast<uint32_t>(pid));
  return Outcome::kTracked;
}

void TlsMonitor::make_room(size_t fds) {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (budget_.room_for(fds)) return;
    }
    if (!uprobes_.evict_oldest_idle()) return;
    std::lock_guard lock(mu_);
    budget_.note_eviction();
  }
}

uint64_t TlsMonitor::evicted_binaries() const {
  std::lock_guard lock(mu_);
  return budget_.evicted_binaries();
}

uint64_t TlsMonitor::exited_unseen() const {
  std::lock_guard lock(mu_);
  return exited_unseen_;
}

size_t TlsMonitor::instrumented_binaries() const {
  std::lock_guard lock(mu_);
  return budget_.instrumented_binaries();
}

std::map<std::string, uint64_t> TlsMonitor::not_instrumented() const {
  std::lock_guard lock(mu_);
  return budget_.not_instrumented();
}

void TlsMonitor::exited(pid_t pid) {
  std::lock_guard lock(mu_);
  if (tracker_.find(pid) != nullptr) {
    finish_locked(pid);
  } else {
    take_untracked_locked(pid);
  }
  admissions_.unadmit(pid);
}

void TlsMonitor::take_untracked_locked(pid_t pid) {
  const auto tgid = static_cast<uint32_t>(pid);
  if (!probes_.counting(tgid)) return;
  Counters counts;
  add_counts(probes_.take(tgid), counts);
  const auto* a = admissions_.find(pid);
  if (a == nullptr) {
    discarded_++;
    return;
  }
  tracker_.fold_untracked(a->labels, counts, clock_.now_ns());
  exited_unseen_++;
}

std::vector<pid_t> TlsMonitor::stop_container(const ContainerLabels& labels) {
  std::lock_guard lock(mu_);
  std::vector<pid_t> pids;
  for (const auto& [pid, p] : tracker_.processes()) {
    if (p.labels == labels) pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    finish_locked(pid, /*linger=*/false);
    admissions_.unadmit(pid);
  }
  return pids;
}

std::map<ContainerLabels, pid_t> TlsMonitor::a_process_per_container() const {
  std::lock_guard lock(mu_);
  std::map<ContainerLabels, pid_t> out;
  for (const auto& [pid, p] : tracker_.processes()) out.try_emplace(p.labels, pid);
  return out;
}

void TlsMonitor::finish_locked(pid_t pid, bool linger) {
  auto p = tracker_.finish(pid, clock_.now_ns(), [&](const auto&) {
    Counters final_counts;
    add_counts(probes_.take(static_cast<uint32_t>(pid)), final_counts);
    return final_counts;
  });
  if (!p) return;
  uprobes_.release(pid, linger);  // detached later, on SharedUprobes' own thread
  budget_.unuse(pid, p->binary);
}

std::map<std::string, size_t> TlsMonitor::policy_uprobes() const {
  std::lock_guard lock(mu_);
  return budget_.policy_uprobes();
}

void TlsMonitor::sweep() {
  std::lock_guard lock(mu_);
  uprobes_.expire();
  for (pid_t pid : tracker_.vanished(proc_)) finish_locked(pid);
  // Selected processes that vanished without an exit event (a lost ring-buffer record): with the
  // filter on their cgroups must stop being counted now; otherwise they hold only memory, looked
  // for every kFullSweepEvery sweeps, as it costs a /proc read per selected process (in
  // standalone mode without targets: every process on the host).
  if (admissions_.filtering() || ++sweeps_ % kFullSweepEvery == 0) {
    for (pid_t pid : admissions_.vanished(proc_)) {
      take_untracked_locked(pid);
      admissions_.unadmit(pid);
    }
  }
  // Counted by the kernel but not tracked: a selected process consider() has not seen yet (kept)
  // or that exited unseen (counted for its container), one that is not selected, or one that
  // exited before it was selected.
  std::set<uint32_t> untracked;
  for (const auto& [tgid, counts] : probes_.counts()) {
    const auto pid = static_cast<pid_t>(tgid);
    if (tracker_.find(pid) != nullptr) continue;
    if (const auto* a = admissions_.find(pid)) {
      auto start = proc_.start_time(pid);
      if (start.ok() && *start == a->start_time) continue;
      take_untracked_locked(pid);
      admissions_.unadmit(pid);
      continue;
    }
    if (untracked_seen_.contains(tgid)) {
      probes_.take(tgid);
      discarded_++;
    } else {
      untracked.insert(tgid);
    }
  }
  untracked_seen_ = std::move(untracked);
}

void TlsMonitor::filter_by_cgroup() {
  std::lock_guard lock(mu_);
  admissions_.filter_by_cgroup();
}

bool TlsMonitor::filtering_by_cgroup() const {
  std::lock_guard lock(mu_);
  return admissions_.filtering();
}

void TlsMonitor::admit(const ProcessInfo& process, const ContainerLabels& labels) {
  std::lock_guard lock(mu_);
  admissions_.admit(process, labels);
}

std::map<ContainerLabels, TlsMonitor::ContainerStats> TlsMonitor::snapshot() {
  std::lock_guard lock(mu_);
  const auto kernel = probes_.counts();
  auto totals = tracker_.report(clock_.now_ns(), [&](pid_t pid, const auto&) {
    Counters live;
    if (auto k = kernel.find(static_cast<uint32_t>(pid)); k != kernel.end()) {
      add_counts(k->second, live);
    }
    return live;
  });
  std::map<ContainerLabels, ContainerStats> out;
  for (auto& t : totals) {
    ContainerStats& s = out[t.labels];
    static_cast<Counters&>(s) = std::move(t.value);
    s.processes = t.processes;
  }
  return out;
}

std::vector<TlsMonitor::BinaryVerdict> TlsMonitor::verdicts() const {
  std::lock_guard lock(mu_);
  return verdicts_.reported();
}

size_t TlsMonitor::tracked() const {
  std::lock_guard lock(mu_);
  return tracker_.size();
}

std::map<TlsMonitor::MapAndReason, uint64_t> TlsMonitor::kernel_map_full() const {
  std::lock_guard lock(mu_);
  std::map<MapAndReason, uint64_t> out;
  for (uint32_t c = 0; c < SONDE_GOTLS_COUNTER_COUNT; ++c) {
    auto counter = static_cast<sonde_gotls_counter>(c);
    out[{gotls_counter_map_name(counter), gotls_counter_reason(counter)}] = probes_.full(counter);
  }
  return out;
}

uint64_t TlsMonitor::discarded_processes() const {
  std::lock_guard lock(mu_);
  return discarded_;
}

}  // namespace sonde::agent
