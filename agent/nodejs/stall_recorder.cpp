#include "agent/nodejs/stall_recorder.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <tuple>

#include "agent/stacks/sampler.h"
#include "bpf/nodejs/nodejs.h"
#include "bpf/nodejs/nodejs_stalls.h"
#include "bpf/stacks/cpu_sampler.h"
#include "common/clock.h"
#include "common/log.h"
#include "nodejs_stalls.skel.h"

namespace sonde::agent {
namespace {

int64_t realtime_minus_monotonic_ns() {
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  const uint64_t mono = monotonic_ns();
  return static_cast<int64_t>(real.tv_sec) * 1'000'000'000 + real.tv_nsec -
         static_cast<int64_t>(mono);
}

// "function (file:line)" for a JavaScript frame, the function alone for native ones.
std::string frame_name(const stacks::Line& line) {
  if (line.file.empty()) return line.function;
  return line.function + " (" + line.file + ":" + std::to_string(line.line) + ")";
}

}  // namespace

bool StallRecorder::StackKey::operator<(const StackKey& o) const {
  if (user != o.user) return user < o.user;
  return std::lexicographical_compare(
      v8.begin(), v8.end(), o.v8.begin(), o.v8.end(),
      [](const stacks::V8Frame& a, const stacks::V8Frame& b) {
        return std::tie(a.pc, a.function, a.context_or_type, a.shared) <
               std::tie(b.pc, b.function, b.context_or_type, b.shared);
      });
}

StallRecorder::StallRecorder(StallRecorderOptions options)
    : options_(std::move(options)),
      binaries_(options_.binaries ? options_.binaries
                                  : std::make_shared<symbolize::SymbolizerCache>()) {}

StallRecorder::~StallRecorder() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  for (bpf_link* link : links_) bpf_link__destroy(link);
}

bool StallRecorder::sampling() const {
  std::lock_guard lock(mu_);
  return !links_.empty();
}

Status StallRecorder::start_locked() {
  std::unique_ptr<nodejs_stalls_bpf, void (*)(nodejs_stalls_bpf*)> skel{nodejs_stalls_bpf__open(),
                                                                        nodejs_stalls_bpf__destroy};
  if (!skel) return errno_error("stall sampler: open BPF object", errno);
  configure_pid_namespace(skel->rodata);
  if (int err = bpf_map__reuse_fd(skel->maps.loops, options_.loops_map_fd); err) {
    return errno_error("stall sampler: reuse the Node.js loops map", -err);
  }
  if (int err = nodejs_stalls_bpf__load(skel.get()); err) {
    return errno_error("stall sampler: load BPF program (run 'sonde-agent doctor')", -err);
  }
  auto events = RingBufferReader::open(
      options_.events_map, "nodejs stall events", [this](std::span<const uint8_t> record) {
        if (record.size() < sizeof(sonde_stall_event)) return;
        sonde_stall_event e{};
        std::memcpy(&e, record.data(), sizeof e);
        ends_[{static_cast<pid_t>(e.tgid), e.start_ns}] = End{e.duration_ns};
      });
  if (!events.ok()) return events.error();
  events_ = std::move(events).value();
  skel_ = std::move(skel);
  symbolizer_ = std::make_unique<stacks::StackSymbolizer>(options_.proc_root, *binaries_, nullptr);
  js_frames_ = std::make_unique<stacks::JsFrames>(options_.proc_root, kJsNameCacheBytes);
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
  return ok_status();
}

Status StallRecorder::attach_locked() {
  auto cpus = stacks::online_cpus(options_.sys_root);
  if (!cpus.ok()) return cpus.error().wrap("stall sampler");
  std::vector<bpf_link*> links;
  auto cleanup = [&] {
    for (bpf_link* l : links) bpf_link__destroy(l);
  };
  for (int cpu : *cpus) {
    auto event = stacks::open_clock_event(cpu, SONDE_STALL_SAMPLE_HZ);
    if (!event.ok()) {
      cleanup();
      return event.error().wrap("stall sampler");
    }
    bpf_link* link = bpf_program__attach_perf_event(skel_->progs.stall_sample, event->get());
    if (!link) {
      int e = errno;
      cleanup();
      return errno_error("stall sampler: attach to the perf event of CPU " + std::to_string(cpu),
                         e);
    }
    event->release();  // the link owns the perf event from here (closed with it)
    links.push_back(link);
  }
  links_ = std::move(links);
  log::info("nodejs stall sampler started", {{"frequency_hz", SONDE_STALL_SAMPLE_HZ}});
  return ok_status();
}

void StallRecorder::detach_locked() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
  links_.clear();
  log::info("nodejs stall sampler stopped: no process is watched");
}

Status StallRecorder::watch(pid_t pid, const ContainerLabels& labels, uint64_t threshold_ns) {
  std::lock_guard lock(mu_);
  if (!skel_) RETURN_IF_ERROR(start_locked());
  if (links_.empty()) RETURN_IF_ERROR(attach_locked());
  const bool known = watched_.contains(pid);
  // The threshold first, so the kernel measures the process's turns from here on.
  auto key = static_cast<uint32_t>(pid);
  if (bpf_map_update_elem(options_.thresholds_map_fd, &key, &threshold_ns, BPF_ANY) != 0) {
    return errno_error("nodejs probes: set the stall threshold of pid " + std::to_string(pid),
                       errno);
  }
  if (!known) {
    // A process whose node publishes no usable layout is still sampled: native frames only.
    sonde_stall_process proc{};
    if (auto slots = js_frames_->learn(pid, symbolizer_->start_time(pid))) {
      proc = {slots->function, slots->context_or_frame_type, slots->function_shared, 1};
    }
    if (bpf_map__update_elem(skel_->maps.stall_processes, &key, sizeof key, &proc, sizeof proc,
                             BPF_ANY) != 0) {
      int e = errno;
      bpf_map_delete_elem(options_.thresholds_map_fd, &key);
      return errno_error("stall sampler: watch pid " + std::to_string(pid), e);
    }
  }
  // Turns reported from now on, once the process is sampled: a turn that began while its layout
  // was read (a V8 heap read: up to 100 ms and more on a loaded node) has no sample of its start,
  // and reporting it without stacks would spend the pod's one Event a minute on "no culprit"
  // (e2e/cluster_nodejs_stalls_test.sh failed so once).
  const uint64_t since = known ? watched_[pid].since_ns : monotonic_ns();
  watched_[pid] = {labels, threshold_ns, since};
  return ok_status();
}

void StallRecorder::forget(pid_t pid) {
  std::lock_guard lock(mu_);
  if (!watched_.contains(pid)) return;
  // A long turn that ended just before the exit is reported, not lost with the process.
  round();
  watched_.erase(pid);
  auto key = static_cast<uint32_t>(pid);
  bpf_map_delete_elem(options_.thresholds_map_fd, &key);
  bpf_map__delete_elem(skel_->maps.stall_processes, &key, sizeof key, 0);
  std::erase_if(turns_, [&](const auto& t) { return t.first.first == pid; });
  std::erase_if(ends_, [&](const auto& e) { return e.first.first == pid; });
  symbolizer_->forget(pid);
  js_frames_->forget(pid);
  if (watched_.empty()) detach_locked();
}

void StallRecorder::run(const std::stop_token& stop) {
  std::mutex sleep_mu;
  std::condition_variable_any cv;
  while (!stop.stop_requested()) {
    {
      std::unique_lock sl(sleep_mu);
      cv.wait_for(sl, stop, kRoundInterval, [] { return false; });
    }
    if (stop.stop_requested()) break;
    std::lock_guard lock(mu_);
    round();
  }
}

void StallRecorder::round() {
  // 1. Which turn each process with pending samples is in now, read before the end records:
  //    a turn that is not current here and has no end record below ended short.
  std::map<pid_t, std::optional<uint64_t>> current;  // busy_since_ns while busy
  for (const auto& [id, turn] : turns_) {
    if (current.contains(id.first)) continue;
    auto key = static_cast<uint32_t>(id.first);
    sonde_loop_state s{};
    std::optional<uint64_t> busy;
    if (bpf_map_lookup_elem(options_.loops_map_fd, &key, &s) == 0 && s.phase == SONDE_LOOP_BUSY) {
      busy = s.busy_since_ns;
    }
    current[id.first] = busy;
  }
  // 2. The ends of long turns. Every sample of such a turn was taken before its end record,
  //    so before the generation switch below.
  if (auto n = events_->poll(0); !n.ok()) {
    log::warn("nodejs stalls: ring buffer", {{"error", n.error().message()}});
  }
  // 3. The samples of the other generation.
  drain_locked();
  // 4. Judge.
  const uint64_t now = monotonic_ns();
  bool refreshed = false;
  for (auto it = turns_.begin(); it != turns_.end();) {
    const auto [pid, turn_ns] = it->first;
    Turn& turn = it->second;
    auto end = ends_.find(it->first);
    if (end != ends_.end()) {
      if (!turn.reported) {
        if (!refreshed) symbolizer_->refresh();
        refreshed = true;
        report_locked(pid, turn_ns, turn, end->second.duration_ns, false);
      }
      ends_.erase(end);
      it = turns_.erase(it);
      continue;
    }
    auto cur = current.find(pid);
    const bool running = cur == current.end() || (cur->second && *cur->second == turn_ns);
    if (turn.judged_before && !running) {
      it = turns_.erase(it);  // ended below its threshold (or its state is gone)
      continue;
    }
    if (running && !turn.reported && now > turn_ns && now - turn_ns >= options_.ongoing_after_ns) {
      if (!refreshed) symbolizer_->refresh();
      refreshed = true;
      report_locked(pid, turn_ns, turn, now - turn_ns, true);
      turn.reported = true;
      turn.stacks.clear();
    }
    turn.judged_before = true;
    ++it;
  }
  // Long turns without a sample: the thread was off the CPU.
  for (auto& [id, end] : ends_) {
    if (!watched_.contains(id.first)) continue;
    Turn empty;
    report_locked(id.first, id.second, empty, end.duration_ns, false);
  }
  ends_.clear();
}

void StallRecorder::drain_locked() {
  auto* skel = skel_.get();
  const uint8_t old = skel->bss->generation & 1;
  __atomic_store_n(&skel->bss->generation, static_cast<uint8_t>(old ^ 1), __ATOMIC_RELEASE);
  // A program that read the old generation just before the switch ends within microseconds.
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const int counts_fd = bpf_map__fd(skel->maps.stall_counts);
  const int stacks_fd = bpf_map__fd(old ? skel->maps.stall_stacks_1 : skel->maps.stall_stacks_0);
  const int v8_fd = bpf_map__fd(old ? skel->maps.stall_v8_1 : skel->maps.stall_v8_0);

  for (const auto& k : map_keys<sonde_stall_key>(counts_fd, SONDE_STALL_MAX_KEYS)) {
    if (k.generation != old) continue;
    uint64_t count = 0;
    if (bpf_map_lookup_elem(counts_fd, &k, &count) != 0) continue;
    bpf_map_delete_elem(counts_fd, &k);
    const auto pid = static_cast<pid_t>(k.tgid);
    if (!watched_.contains(pid)) continue;
    auto id = std::make_pair(pid, k.turn_ns);
    auto it = turns_.find(id);
    if (it == turns_.end()) {
      if (turns_.size() >= kMaxPendingTurns) {
        turns_dropped_ += count;
        continue;
      }
      it = turns_.emplace(id, Turn{}).first;
    }
    Turn& turn = it->second;
    if (turn.reported) continue;
    turn.samples += count;
    StackKey stack;
    if (k.user_stack_id >= 0) {
      uint64_t ips[SONDE_CPU_MAX_FRAMES] = {};
      if (bpf_map_lookup_elem(stacks_fd, &k.user_stack_id, ips) == 0) {
        for (uint64_t ip : ips) {
          if (ip == 0) break;
          stack.user.push_back(ip);
        }
      }
    }
    if (k.v8_stack != 0) {
      sonde_v8_stack st{};
      if (bpf_map_lookup_elem(v8_fd, &k.v8_stack, &st) == 0) {
        for (uint32_t i = 0; i < st.frames && i < SONDE_V8_MAX_FRAMES; ++i) {
          const auto& f = st.frame[i];
          stack.v8.push_back({f.pc, f.function, f.context_or_type, f.shared});
        }
      }
    }
    auto s = turn.stacks.find(stack);
    if (s != turn.stacks.end()) {
      s->second += count;
    } else if (turn.stacks.size() < kMaxStacksPerTurn) {
      turn.stacks.emplace(std::move(stack), count);
    } else {
      turn_stacks_dropped_ += count;
    }
  }
  for (uint32_t id : map_keys<uint32_t>(stacks_fd, SONDE_STALL_MAX_STACKS)) {
    bpf_map_delete_elem(stacks_fd, &id);
  }
  for (uint64_t hash : map_keys<uint64_t>(v8_fd, SONDE_STALL_MAX_V8_STACKS)) {
    bpf_map_delete_elem(v8_fd, &hash);
  }
}

void StallRecorder::report_locked(pid_t pid, uint64_t turn_ns, Turn& turn, uint64_t duration_ns,
                                  bool ongoing) {
  auto w = watched_.find(pid);
  if (w == watched_.end() || turn_ns < w->second.since_ns) return;
  Stall stall;
  stall.labels = w->second.labels;
  stall.pid = pid;
  stall.start_unix_ns = static_cast<int64_t>(turn_ns) + realtime_minus_monotonic_ns();
  stall.duration_ns = duration_ns;
  stall.threshold_ns = w->second.threshold_ns;
  stall.ongoing = ongoing;
  stall.samples = turn.samples;
  // Stacks that differ only in addresses within the same functions read the same once named:
  // they are merged before the most sampled are kept (at most kMaxStacksPerTurn symbolized).
  std::map<std::vector<std::string>, uint64_t> named;
  for (const auto& [k, n] : turn.stacks) {
    stacks::RawSample raw;
    raw.pid = static_cast<uint32_t>(pid);
    raw.user = k.user;
    raw.v8 = k.v8;
    raw.count = n;
    std::vector<stacks::Location> locations = symbolizer_->symbolize(pid, raw.user, {});
    js_frames_->name(raw, locations);
    std::vector<std::string> frames;
    for (const stacks::Location& loc : locations) {
      for (const stacks::Line& line : loc.lines) frames.push_back(frame_name(line));
    }
    named[std::move(frames)] += n;
  }
  for (auto& [frames, n] : named) stall.stacks.push_back({n, frames});
  ++stalls_;
  if (options_.on_stall) options_.on_stall(stall);
  ring_.add(std::move(stall));
}

HttpResponse StallRecorder::handle_request(const HttpRequest& request) {
  StallRing::Filter filter;
  auto param = [&](const char* name) -> std::optional<std::string> {
    auto it = request.query.find(name);
    if (it == request.query.end()) return std::nullopt;
    return it->second;
  };
  filter.namespace_name = param("namespace");
  filter.pod = param("pod");
  filter.container = param("container");
  HttpResponse r;
  r.content_type = "application/json";
  r.body = ring_.to_json(filter);
  return r;
}

StallRecorder::Drops StallRecorder::drops() const {
  std::lock_guard lock(mu_);
  Drops d;
  if (skel_) {
    d.samples = sum_percpu_counter(skel_->maps.stall_drops, SONDE_STALL_DROP_KEY);
    d.stacks = sum_percpu_counter(skel_->maps.stall_drops, SONDE_STALL_DROP_STACK);
    d.v8_stacks = sum_percpu_counter(skel_->maps.stall_drops, SONDE_STALL_DROP_V8_STACK);
  }
  if (options_.events_lost) d.events = options_.events_lost();
  d.turns = turns_dropped_;
  d.turn_stacks = turn_stacks_dropped_;
  d.evicted = ring_.evicted();
  d.truncated = ring_.truncated();
  return d;
}

uint64_t StallRecorder::stalls() const {
  std::lock_guard lock(mu_);
  return stalls_;
}

void StallRecorder::collect(std::vector<prometheus::MetricFamily>& out) {
  auto total = counter_family("sonde_agent_nodejs_stalls_total",
                              "Long Node.js event-loop turns (stallThresholdMs) reported at "
                              "/debug/nodejs/stalls.");
  add_sample(total, {}, static_cast<double>(stalls()));
  auto dropped = counter_family(
      "sonde_agent_nodejs_stall_drops_total",
      "What the stall recorder's bounds refused, by reason: samples, stacks, v8_stacks (kernel "
      "maps full), events (end-of-turn ring buffer full: a stall unreported), turns and "
      "turn_stacks (user-space bounds), evicted (stalls pushed out of the ring), truncated "
      "(stacks, frames or names cut).");
  const Drops d = drops();
  const std::pair<const char*, uint64_t> rows[] = {
      {"samples", d.samples}, {"stacks", d.stacks},      {"v8_stacks", d.v8_stacks},
      {"events", d.events},   {"turns", d.turns},        {"turn_stacks", d.turn_stacks},
      {"evicted", d.evicted}, {"truncated", d.truncated}};
  for (const auto& [reason, n] : rows) {
    add_sample(dropped, {{"reason", reason}}, static_cast<double>(n));
  }
  out.push_back(std::move(total));
  out.push_back(std::move(dropped));
}

}  // namespace sonde::agent
