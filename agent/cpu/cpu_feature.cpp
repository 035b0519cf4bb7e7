#include "agent/cpu/cpu_feature.h"

#include <algorithm>

#include "agent/discovery/candidate.h"
#include "agent/stacks/sampler.h"
#include "common/log.h"

namespace sonde::agent {

Result<std::unique_ptr<CpuFeature>> CpuFeature::start(const cpu::ProfilerOptions& options,
                                                      bool required, const PyroscopeConfig& push,
                                                      bool by_cgroup, uint32_t max_hz) {
  if (max_hz == 0 || max_hz > stacks::CpuSampler::kMaxFrequencyHz) {
    return Error("CPU sampling cap " + std::to_string(max_hz) + " Hz: must be 1.." +
                 std::to_string(stacks::CpuSampler::kMaxFrequencyHz));
  }
  cpu::ProfilerOptions capped = options;
  if (options.frequency_hz > max_hz) {
    log::warn("the configured CPU sampling frequency is above this node's cap: sampling at the cap",
              {{"frequency_hz", options.frequency_hz}, {"max_frequency_hz", max_hz}});
    capped.frequency_hz = max_hz;
  }
  auto profiler = cpu::CpuProfiler::start(capped);
  if (!profiler.ok()) {
    if (required) return profiler.error();
    log::warn("this node cannot sample CPUs; policies asking for cpu are reported so",
              {{"error", profiler.error().message()}});
    return std::unique_ptr<CpuFeature>(
        new CpuFeature(nullptr, capped.frequency_hz, max_hz, profiler.error().message(), ""));
  }
  std::unique_ptr<CpuFeature> self(new CpuFeature(std::move(profiler).value(), capped.frequency_hz,
                                                  max_hz, "", options.node_name));
  if (by_cgroup) {
    auto cgroups = ProcessCgroups::load();
    if (cgroups.ok()) {
      self->cgroups_ = std::move(cgroups).value();
    } else {
      log::warn(
          "CPU sampling selects processes, not their containers' cgroups: processes they "
          "fork without exec are not sampled",
          {{"error", cgroups.error().message()}});
    }
  }
  if (!push.url.empty()) {
    ASSIGN_OR_RETURN(self->pusher_,
                     cpu::PyroscopePusher::start(
                         *self->profiler_, {.url = push.url,
                                            .application = push.application,
                                            .interval = std::chrono::seconds(push.interval_seconds),
                                            .node_name = options.node_name}));
  }
  return self;
}

const std::vector<std::string>& CpuFeature::symbol_names() const {
  static const std::vector<std::string> kNone;
  return kNone;
}

std::optional<FeatureResult> CpuFeature::select(const ProcessInfo& process,
                                                const Selection& selection) {
  using State = ProcessOutcome::State;
  if (!profiler_) return FeatureResult{State::kFailed, "CPU sampling unavailable: " + unavailable_};
  std::optional<uint64_t> cgroup;
  if (cgroups_) {
    auto id = cgroups_->cgroup_of(process.pid, process.start_time);
    if (id.ok()) {
      cgroup = *id;
    } else if (is_gone(id.error())) {
      return FeatureResult{.gone = true};
    } else {
      // The process alone is still sampled right; what it forks without exec is not.
      log::warn("cannot name a process's cgroup; sampling the process alone",
                {{"pid", process.pid}, {"error", id.error().message()}});
    }
  }
  std::lock_guard lock(mu_);
  auto old = pids_.find(process.pid);
  if (old == pids_.end() || old->second.cgroup != cgroup) {
    if (Status st = sample_locked(process.pid, cgroup, selection.labels); !st.ok()) {
      log::warn("cannot select process for CPU sampling",
                {{"pid", process.pid}, {"error", st.error().message()}});
      return FeatureResult{State::kFailed, "CPU sampling refused: " + st.error().message()};
    }
    // A process that moved to another cgroup (or a new one under its pid) leaves the old.
    if (old != pids_.end()) unsample_locked(process.pid, old->second);
  }
  const uint32_t asked = selection.instrumentations[kind()].as<CpuParams>().frequency_hz;
  pids_[process.pid] = {asked, cgroup};
  retune_locked();
  if (asked <= max_hz_) return FeatureResult{State::kInstrumented, ""};
  std::string capped = "CPU sampled at " + std::to_string(profiler_->frequency_hz()) +
                       " Hz, not the " + std::to_string(asked) + " Hz its policy asks: this " +
                       "node's cap is " + std::to_string(max_hz_) +
                       " Hz (the chart's agent.cpu.maxFrequencyHz)";
  log::warn("a policy asks for a CPU sampling frequency above this node's cap",
            {{"pid", process.pid},
             {"namespace", selection.labels.namespace_name},
             {"pod", selection.labels.pod},
             {"frequency_hz", asked},
             {"max_frequency_hz", max_hz_}});
  return FeatureResult{State::kInstrumented, std::move(capped)};
}

Status CpuFeature::sample_locked(pid_t pid, std::optional<uint64_t> cgroup,
                                 const ContainerLabels& labels) {
  if (!cgroup) return profiler_->select_pid(pid, labels);
  if (cgroup_users_[*cgroup]++ > 0) return ok_status();
  Status st = profiler_->select_cgroup(*cgroup, labels);
  if (!st.ok()) cgroup_users_.erase(*cgroup);
  return st;
}

void CpuFeature::unsample_locked(pid_t pid, const Selected& selected) {
  if (!selected.cgroup) {
    (void)profiler_->release_pid(pid);
    return;
  }
  auto it = cgroup_users_.find(*selected.cgroup);
  if (it == cgroup_users_.end() || --it->second > 0) return;
  cgroup_users_.erase(it);
  (void)profiler_->release_cgroup(*selected.cgroup);
}

void CpuFeature::release(pid_t pid, uint64_t /*end_ns*/) {
  std::lock_guard lock(mu_);
  auto it = pids_.find(pid);
  if (it == pids_.end()) return;
  unsample_locked(pid, it->second);
  pids_.erase(it);
  retune_locked();
}

void CpuFeature::retune_locked() {
  uint32_t hz = 0;
  for (const auto& [pid, selected] : pids_) hz = std::max(hz, selected.hz);
  if (hz == 0) hz = default_hz_;
  hz = std::min(hz, max_hz_);
  if (hz == profiler_->frequency_hz()) return;
  if (auto st = profiler_->set_frequency(hz); !st.ok()) {
    log::warn("cannot change the CPU sampling frequency", {{"error", st.error().message()}});
    return;
  }
  log::info("CPU sampling frequency changed", {{"frequency_hz", hz}});
}

size_t CpuFeature::tracked() const {
  std::lock_guard lock(mu_);
  return pids_.size();
}

uint32_t CpuFeature::frequency_hz() const {
  return profiler_ ? profiler_->frequency_hz() : 0;
}

size_t CpuFeature::capped() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(
      pids_.begin(), pids_.end(), [this](const auto& p) { return p.second.hz > max_hz_; }));
}

void CpuFeature::collect(std::vector<prometheus::MetricFamily>& out) {
  if (!profiler_) return;
  for (auto& f : profiler_->metrics()) out.push_back(std::move(f));
  // Dashboards turn samples per second into CPU cores with it.
  auto hz = gauge_family("sonde_cpu_profile_frequency_hertz",
                         "The node's CPU sampling frequency now (samples per second per CPU)");
  add_sample(hz, {{"node", node_}}, static_cast<double>(profiler_->frequency_hz()));
  out.push_back(std::move(hz));
  auto max = gauge_family("sonde_cpu_profile_max_frequency_hertz",
                          "This node's cap on the CPU sampling frequency (--max-cpu-frequency-hz, "
                          "the chart's agent.cpu.maxFrequencyHz): no policy samples faster");
  add_sample(max, {{"node", node_}}, static_cast<double>(max_hz_));
  out.push_back(std::move(max));
  auto capped_family = gauge_family(
      "sonde_cpu_profile_capped_processes",
      "Processes selected for CPU sampling whose policies ask for a frequency above this node's "
      "cap: they are sampled at the cap");
  add_sample(capped_family, {{"node", node_}}, static_cast<double>(capped()));
  out.push_back(std::move(capped_family));
  if (!pusher_) return;
  auto pushes = counter_family("sonde_cpu_profile_pushes_total",
                               "Per-container CPU profiles pushed to the Pyroscope endpoint: "
                               "accepted (ok) or lost with their window (failed).");
  auto st = pusher_->stats();
  add_sample(pushes, {{"result", "ok"}}, static_cast<double>(st.pushed));
  add_sample(pushes, {{"result", "failed"}}, static_cast<double>(st.failed));
  out.push_back(std::move(pushes));
}

void CpuFeature::add_routes(MetricsServer& server) {
  server.add_route(cpu::CpuProfiler::kRoute, [this](const HttpRequest& request) {
    if (!profiler_) {
      return HttpResponse{503, "text/plain", "CPU sampling unavailable: " + unavailable_ + "\n"};
    }
    return profiler_->handle_profile_request(request);
  });
}

}  // namespace sonde::agent
