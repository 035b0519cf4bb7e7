#include "agent/cpu/cpu_profiler.h"

#include <cerrno>
#include <charconv>
#include <ctime>
#include <unordered_set>

#include "common/clock.h"
#include "common/log.h"

namespace sonde::agent::cpu {
namespace {

int64_t unix_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool matches(const ProfileFilter& f, const SampleOwner& o) {
  return (!f.namespace_name || *f.namespace_name == o.namespace_name) &&
         (!f.pod || *f.pod == o.pod) && (!f.container || *f.container == o.container) &&
         (!f.pid || *f.pid == o.pid) && (!f.blocked_only || o.blocked);
}

HttpResponse text_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body) + "\n";
  return r;
}

}  // namespace

Result<std::unique_ptr<CpuProfiler>> CpuProfiler::start(const ProfilerOptions& options) {
  std::unique_ptr<CpuProfiler> self(new CpuProfiler(options));
  stacks::SamplerOptions so;
  so.frequency_hz = options.frequency_hz;
  so.all_processes = options.all_processes;
  so.nodejs_loops_map_fd = options.nodejs_loops_map_fd;
  so.sys_root = options.sys_root;
  ASSIGN_OR_RETURN(self->sampler_, stacks::CpuSampler::start(so));

  symbolize::LiveKernelSymbolsOptions ko;
  ko.proc_root = options.proc_root;
  ko.sys_root = options.sys_root;
  auto kernel = symbolize::LiveKernelSymbols::start(ko);
  if (kernel.ok()) {
    self->kernel_ = std::move(kernel).value();
  } else {
    log::warn("cpu profiles: kernel frames stay unnamed", {{"error", kernel.error().message()}});
  }
  self->symbolizer_ = std::make_unique<stacks::StackSymbolizer>(options.proc_root, *self->binaries_,
                                                                self->kernel_.get());
  self->js_frames_ =
      std::make_unique<stacks::JsFrames>(options.proc_root, options.js_name_cache_bytes);
  self->thread_ = std::jthread([p = self.get()](const std::stop_token& stop) { p->run(stop); });
  return self;
}

CpuProfiler::~CpuProfiler() = default;

void CpuProfiler::run(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    wake_.wait_for(lock, stop, options_.drain_interval,
                   [&] { return drain_requests_ > drains_served_; });
    if (stop.stop_requested()) break;
    // Every request made so far is served by this drain: it reads the maps after them.
    uint64_t serving = drain_requests_;
    lock.unlock();
    Status s = ok_status();
    {
      std::lock_guard drain_lock(drain_mu_);
      s = drain();
    }
    if (!s.ok()) log::warn("cpu profiles: drain", {{"error", s.error().message()}});
    lock.lock();
    drains_served_ = serving;
    last_drain_ = s;
    served_.notify_all();
  }
  served_.notify_all();
}

Status CpuProfiler::drain_on_profiler_thread() {
  std::unique_lock lock(mu_);
  uint64_t ticket = ++drain_requests_;
  wake_.notify_all();
  if (!served_.wait(lock, thread_.get_stop_token(), [&] { return drains_served_ >= ticket; })) {
    return ok_status();  // stopping: keep what was gathered
  }
  return last_drain_;
}

Status CpuProfiler::select_pid(pid_t pid, const ContainerLabels& labels) {
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = pid_labels_.try_emplace(pid, labels);
    if (!inserted) {
      released_locked(it->second);
      it->second = labels;
    }
    selected_locked(labels);
  }
  std::lock_guard drain_lock(drain_mu_);
  return sampler_->select_pid(pid);
}

Status CpuProfiler::release_pid(pid_t pid) {
  std::lock_guard drain_lock(drain_mu_);
  // Samples taken before the release still carry its labels when drained now.
  if (Status s = drain(); !s.ok()) return s;
  symbolizer_->forget(pid);
  js_frames_->forget(pid);
  {
    std::lock_guard lock(mu_);
    if (auto it = pid_labels_.find(pid); it != pid_labels_.end()) {
      released_locked(it->second);
      pid_labels_.erase(it);
    }
  }
  if (Status s = sampler_->unwatch_v8(pid); !s.ok()) return s;
  return sampler_->release_pid(pid);
}

Status CpuProfiler::set_frequency(uint32_t frequency_hz) {
  std::lock_guard drain_lock(drain_mu_);
  return sampler_->set_frequency(frequency_hz);
}

Status CpuProfiler::select_cgroup(uint64_t cgroup_id, const ContainerLabels& labels) {
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = cgroup_labels_.try_emplace(cgroup_id, labels);
    if (!inserted) {
      released_locked(it->second);
      it->second = labels;
    }
    selected_locked(labels);
  }
  std::lock_guard drain_lock(drain_mu_);
  return sampler_->select_cgroup(cgroup_id);
}

Status CpuProfiler::release_cgroup(uint64_t cgroup_id) {
  std::lock_guard drain_lock(drain_mu_);
  if (Status s = drain(); !s.ok()) return s;
  {
    std::lock_guard lock(mu_);
    if (auto it = cgroup_labels_.find(cgroup_id); it != cgroup_labels_.end()) {
      released_locked(it->second);
      cgroup_labels_.erase(it);
    }
  }
  return sampler_->release_cgroup(cgroup_id);
}

void CpuProfiler::selected_locked(const ContainerLabels& labels) {
  ++selections_[labels];
  unselected_since_.erase(labels);
}

void CpuProfiler::released_locked(const ContainerLabels& labels) {
  auto it = selections_.find(labels);
  if (it == selections_.end()) return;
  if (--it->second > 0) return;
  selections_.erase(it);
  unselected_since_[labels] = options_.clock->now_ns();
}

void CpuProfiler::expire_series_locked() {
  const uint64_t now = options_.clock->now_ns();
  const auto grace = static_cast<uint64_t>(options_.series_grace.count());
  std::erase_if(unselected_since_, [&](const auto& entry) {
    if (now < entry.second + grace) return false;
    samples_total_.erase(entry.first);
    js_frames_total_.erase(entry.first);
    return true;
  });
}

ContainerLabels CpuProfiler::labels_of(pid_t pid, uint64_t cgroup_id) const {
  if (auto it = pid_labels_.find(pid); it != pid_labels_.end()) return it->second;
  if (auto it = cgroup_labels_.find(cgroup_id); it != cgroup_labels_.end()) return it->second;
  return {};
}

Status CpuProfiler::drain() {
  ASSIGN_OR_RETURN(std::vector<stacks::RawSample> raw, sampler_->drain());
  std::vector<SampleOwner> owners;
  owners.reserve(raw.size());
  {
    std::lock_guard lock(mu_);
    ++drains_;
    expire_series_locked();
    for (const stacks::RawSample& s : raw) {
      ContainerLabels labels = labels_of(static_cast<pid_t>(s.pid), s.cgroup_id);
      samples_total_[labels] += s.count;
      samples_ += s.count;
      owners.push_back({static_cast<pid_t>(s.pid), labels.namespace_name, labels.pod,
                        labels.container, s.blocked});
    }
  }
  // Every drain, so the kernel's symbol changes never pile up between profiles, and node
  // processes have their V8 frames recorded from their first drain on.
  symbolizer_->refresh();
  std::unordered_set<pid_t> seen;
  for (const stacks::RawSample& s : raw) {
    const auto pid = static_cast<pid_t>(s.pid);
    if (!seen.insert(pid).second) continue;
    if (auto slots = js_frames_->learn(pid, symbolizer_->start_time(pid))) {
      if (Status w = sampler_->watch_v8(pid, *slots); !w.ok()) {
        log::warn("cpu profiles: JavaScript frames stay unnamed", {{"error", w.error().message()}});
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    node_processes_ = js_frames_->node_processes();
  }
  if (subscriptions_.empty()) return ok_status();
  // Naming below may grow the JavaScript name caches (or empty some to fit their budget).
  struct PublishCacheBytes {
    CpuProfiler& self;
    ~PublishCacheBytes() {
      std::lock_guard lock(self.mu_);
      self.js_cache_bytes_ = self.js_frames_->cache_bytes();
    }
  } publish{*this};
  for (size_t i = 0; i < raw.size(); ++i) {
    std::vector<stacks::Location> stack;
    bool symbolized = false;
    for (Subscription* sub : subscriptions_) {
      if (!matches(sub->filter, owners[i])) continue;
      if (!symbolized) {
        stack = symbolizer_->symbolize(static_cast<pid_t>(raw[i].pid), raw[i].user, raw[i].kernel);
        symbolized = true;
        const stacks::JsFrames::Counts js = js_frames_->name(raw[i], stack);
        if (js.named + js.unnamed > 0) {
          std::lock_guard lock(mu_);
          auto& total = js_frames_total_[ContainerLabels{owners[i].namespace_name, owners[i].pod,
                                                         owners[i].container}];
          total.named += js.named * raw[i].count;
          total.unnamed += js.unnamed * raw[i].count;
        }
      }
      ProfileBuilder* builder = sub->builder.get();
      if (sub->per_owner) {
        ContainerLabels key{owners[i].namespace_name, owners[i].pod, owners[i].container};
        auto& slot = sub->by_owner[key];
        if (!slot) slot = std::make_unique<ProfileBuilder>(sampler_->frequency_hz());
        builder = slot.get();
      }
      builder->add(owners[i], stack, raw[i].count);
    }
  }
  return ok_status();
}

Status CpuProfiler::subscribe_and_wait(Subscription& sub, std::chrono::milliseconds duration) {
  duration = std::min<std::chrono::milliseconds>(duration, kMaxDuration);
  // Samples taken before the window belong to nobody waiting.
  RETURN_IF_ERROR(drain_on_profiler_thread());
  {
    std::lock_guard drain_lock(drain_mu_);
    if (subscriptions_.size() >= kMaxConcurrentProfiles) {
      return Error("too many profiles in progress (at most " +
                       std::to_string(kMaxConcurrentProfiles) + "); try again later",
                   EBUSY);
    }
    sub.start_unix_ns = unix_now_ns();
    subscriptions_.push_back(&sub);
  }
  {
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, thread_.get_stop_token(), duration, [] { return false; });
  }
  Status last = drain_on_profiler_thread();
  std::lock_guard drain_lock(drain_mu_);
  subscriptions_.remove(&sub);
  return last;
}

Result<std::unique_ptr<ProfileBuilder>> CpuProfiler::collect(std::chrono::milliseconds duration,
                                                             const ProfileFilter& filter) {
  Subscription sub;
  sub.filter = filter;
  sub.builder = std::make_unique<ProfileBuilder>(sampler_->frequency_hz());
  RETURN_IF_ERROR(subscribe_and_wait(sub, duration));
  sub.builder->set_window(sub.start_unix_ns, unix_now_ns() - sub.start_unix_ns);
  return std::move(sub.builder);
}

Result<std::map<ContainerLabels, std::unique_ptr<ProfileBuilder>>> CpuProfiler::collect_per_owner(
    std::chrono::milliseconds duration) {
  Subscription sub;
  sub.per_owner = true;
  RETURN_IF_ERROR(subscribe_and_wait(sub, duration));
  int64_t end = unix_now_ns();
  for (auto& [owner, builder] : sub.by_owner) {
    builder->set_window(sub.start_unix_ns, end - sub.start_unix_ns);
  }
  return std::move(sub.by_owner);
}

std::vector<prometheus::MetricFamily> CpuProfiler::metrics() const {
  auto samples = counter_family(
      "container_cpu_profile_samples_total",
      "CPU samples taken in the container at the profiler's frequency (a sample stands for "
      "1/frequency seconds of CPU time)");
  {
    std::lock_guard lock(mu_);
    for (const auto& [l, n] : samples_total_) {
      add_sample(samples,
                 {{"namespace", l.namespace_name},
                  {"pod", l.pod},
                  {"container", l.container},
                  {"node", options_.node_name}},
                 static_cast<double>(n));
    }
  }
  // Map reads only: no need to wait for a drain in progress.
  stacks::CpuSampler::Drops d = sampler_->drops();
  symbolize::SymbolizerCache::Stats cache = binaries_->stats();
  auto dropped = counter_family(
      "sonde_cpu_profile_dropped_samples_total",
      "CPU samples lost in the kernel, by reason (key_map_full: the "
      "sample is lost; stack_map_full: it lost a stack; v8_stack_map_full: it lost its "
      "JavaScript frame slots; user_stack_missing: the kernel gave no user stack for a process "
      "that has one)");
  add_sample(dropped, {{"reason", "key_map_full"}, {"node", options_.node_name}},
             static_cast<double>(d.samples));
  add_sample(dropped, {{"reason", "stack_map_full"}, {"node", options_.node_name}},
             static_cast<double>(d.stacks));
  add_sample(dropped, {{"reason", "v8_stack_map_full"}, {"node", options_.node_name}},
             static_cast<double>(d.v8_stacks));
  add_sample(dropped, {{"reason", "user_stack_missing"}, {"node", options_.node_name}},
             static_cast<double>(d.user_stacks));
  auto bytes = gauge_family("sonde_cpu_profile_symbolizer_bytes",
                            "Heap bytes of the symbol tables kept for profiled binaries");
  add_sample(bytes, {{"node", options_.node_name}}, static_cast<double>(cache.bytes));
  auto binaries = gauge_family("sonde_cpu_profile_symbolizer_binaries",
                               "Binaries whose symbol tables are kept for profiles");
  add_sample(binaries, {{"node", options_.node_name}}, static_cast<double>(cache.entries));
  auto js_cache = gauge_family(
      "sonde_cpu_profile_js_name_cache_bytes",
      "Heap bytes of the JavaScript function names and script line tables kept for naming "
      "node processes' frames (all processes together, within a fixed budget)");
  auto js = counter_family(
      "container_cpu_profile_js_frames_total",
      "JavaScript frames in profiled samples (each counted once per sample), by whether the "
      "V8 heap named them (result=named) or not (unnamed: they read [js] 0x... or keep a perf "
      "map or builtin name)");
  auto nodes = gauge_family(
      "sonde_cpu_profile_nodejs_processes",
      "Sampled processes whose executable publishes V8 metadata (v8dbg_* symbols), by whether "
      "their JavaScript frames can be named (js_frames=\"supported\" or \"unsupported: "
      "<reason>\")");
  {
    std::lock_guard lock(mu_);
    for (const auto& [l, c] : js_frames_total_) {
      for (const auto& [result, n] : {std::pair{"named", c.named}, {"unnamed", c.unnamed}}) {
        add_sample(js,
                   {{"namespace", l.namespace_name},
                    {"pod", l.pod},
                    {"container", l.container},
                    {"node", options_.node_name},
                    {"result", result}},
                   static_cast<double>(n));
      }
    }
    for (const auto& [status, n] : node_processes_) {
      add_sample(nodes, {{"js_frames", status}, {"node", options_.node_name}},
                 static_cast<double>(n));
    }
    add_sample(js_cache, {{"node", options_.node_name}}, static_cast<double>(js_cache_bytes_));
  }
  return {std::move(samples), std::move(dropped), std::move(bytes),   std::move(binaries),
          std::move(js),      std::move(nodes),   std::move(js_cache)};
}

CpuProfiler::Stats CpuProfiler::stats() const {
  Stats s;
  {
    std::lock_guard lock(mu_);
    s.drains = drains_;
    s.samples = samples_;
  }
  s.binaries = binaries_->stats();
  s.drops = sampler_->drops();
  std::lock_guard drain_lock(drain_mu_);
  s.processes = symbolizer_->processes();
  s.js_name_cache_bytes = js_frames_->cache_bytes();
  s.js_name_cache_clears = js_frames_->cache_clears();
  s.js_node_processes = js_frames_->node_processes()["supported"];
  return s;
}

HttpResponse CpuProfiler::handle_profile_request(const HttpRequest& request) {
  if (request.method != "GET") return text_response(405, "use GET");
  int64_t seconds = 30;
  if (auto it = request.query.find("seconds"); it != request.query.end()) {
    const std::string& v = it->second;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec != std::errc() || ptr != v.data() + v.size() || seconds < 1 ||
        seconds > kMaxDuration.count()) {
      return text_response(
          400, "seconds must be an integer from 1 to " + std::to_string(kMaxDuration.count()));
    }
  }
  ProfileFilter filter;
  for (const auto& [key, value] : request.query) {
    if (key == "namespace") {
      filter.namespace_name = value;
    } else if (key == "pod") {
      filter.pod = value;
    } else if (key == "container") {
      filter.container = value;
    } else if (key == "pid") {
      pid_t pid = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), pid);
      if (ec != std::errc() || ptr != value.data() + value.size() || pid <= 0) {
        return text_response(400, "pid must be a positive integer");
      }
      filter.pid = pid;
    } else if (key == "blocked") {
      if (value != "true" && value != "false") return text_response(400, "blocked=true|false");
      filter.blocked_only = value == "true";
    } else if (key != "seconds" && key != "format") {
      return text_response(400, "unknown parameter '" + key +
                                    "' (seconds, namespace, pod, container, pid, blocked, "
                                    "format)");
    }
  }
  if (filter.blocked_only && !tracks_nodejs_loops()) {
    return text_response(400,
                         "blocked=true needs the Node.js event-loop probes, which are not "
                         "loaded in this agent");
  }
  std::string format = "pprof";
  if (auto it = request.query.find("format"); it != request.query.end()) format = it->second;
  if (format != "pprof" && format != "folded") {
    return text_response(400, "format must be pprof or folded");
  }

  auto profile = collect(std::chrono::seconds(seconds), filter);
  if (!profile.ok()) {
    return text_response(profile.error().code() == EBUSY ? 429 : 503, profile.error().message());
  }
  HttpResponse r;
  if (format == "folded") {
    r.body = (*profile)->folded();
    return r;
  }
  auto bytes = (*profile)->pprof_gzip();
  if (!bytes.ok()) return text_response(500, bytes.error().message());
  r.content_type = "application/octet-stream";
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"profile.pb.gz\"");
  r.body = std::move(bytes).value();
  return r;
}

}  // namespace sonde::agent::cpu
