#include "agent/stacks/sampler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "agent/kernel/bpf_helpers.h"
#include "agent/symbolize/perf_ksymbol_events.h"
#include "bpf/nodejs/nodejs.h"
#include "bpf/stacks/cpu_sampler.h"
#include "common/files.h"
#include "common/unique_fd.h"
#include "cpu_sampler.skel.h"

namespace sonde::agent::stacks {

Result<std::vector<int>> online_cpus(const std::string& sys_root) {
  std::string path = sys_root + "/devices/system/cpu/online";
  auto text = read_file(path);
  if (!text.ok()) return text.error().wrap("cannot read the list of online CPUs");
  auto cpus = symbolize::parse_cpu_list(*text);
  if (!cpus.ok()) return cpus.error().wrap(path);
  return cpus;
}

Result<UniqueFd> open_clock_event(int cpu, uint32_t frequency_hz) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency_hz;
  long fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    return errno_error("perf_event_open (cpu-clock) on CPU " + std::to_string(cpu) +
                           " (needs CAP_PERFMON; run 'sonde-agent doctor')",
                       errno);
  }
  return UniqueFd(static_cast<int>(fd));
}

Result<std::unique_ptr<CpuSampler>> CpuSampler::start(const SamplerOptions& options) {
  if (options.frequency_hz < 1 || options.frequency_hz > kMaxFrequencyHz) {
    return Error("cpu sampler: frequency " + std::to_string(options.frequency_hz) +
                 " Hz is outside 1.." + std::to_string(kMaxFrequencyHz));
  }
  ASSIGN_OR_RETURN(std::vector<int> cpus, online_cpus(options.sys_root));

  std::unique_ptr<CpuSampler> self(new CpuSampler());
  self->frequency_hz_ = options.frequency_hz;
  self->skel_ = {cpu_sampler_bpf__open(), cpu_sampler_bpf__destroy};
  if (!self->skel_) return errno_error("cpu sampler: open BPF object", errno);
  auto* skel = self->skel_.get();
  configure_pid_namespace(skel->rodata);
  skel->rodata->all_processes = options.all_processes;
  if (options.nodejs_loops_map_fd >= 0) {
    if (int err = bpf_map__reuse_fd(skel->maps.loops, options.nodejs_loops_map_fd); err) {
      return errno_error("cpu sampler: reuse the Node.js loops map", -err);
    }
    skel->rodata->track_loops = true;
    self->tracks_loops_ = true;
  } else {
    // Unused: one entry instead of the Node.js probes' full size.
    bpf_map__set_max_entries(skel->maps.loops, 1);
  }
  if (int err = cpu_sampler_bpf__load(skel); err) {
    return errno_error("cpu sampler: load BPF programs (run 'sonde-agent doctor')", -err);
  }

  for (int cpu : cpus) {
    auto opened = open_clock_event(cpu, options.frequency_hz);
    if (!opened.ok()) return opened.error().wrap("cpu sampler");
    UniqueFd event = std::move(opened).value();
    bpf_link* link = bpf_program__attach_perf_event(skel->progs.sample, event.get());
    if (!link) {
      return errno_error("cpu sampler: attach to the perf event of CPU " + std::to_string(cpu),
                         errno);
    }
    self->links_.push_back(link);
    // The link closes the perf event when destroyed; a duplicate stays for set_frequency().
    self->events_.emplace_back(fcntl(event.release(), F_DUPFD_CLOEXEC, 0));
    if (self->events_.back().get() < 0) return errno_error("cpu sampler: dup a perf event", errno);
  }
  return self;
}

Status CpuSampler::set_frequency(uint32_t frequency_hz) {
  if (frequency_hz < 1 || frequency_hz > kMaxFrequencyHz) {
    return Error("cpu sampler: frequency " + std::to_string(frequency_hz) + " Hz is outside 1.." +
                 std::to_string(kMaxFrequencyHz));
  }
  // The cpu-clock event is an hrtimer: at creation the kernel turns its frequency into a
  // period and clears attr.freq (perf_swevent_init_hrtimer), so the ioctl takes nanoseconds.
  uint64_t value = 1'000'000'000 / frequency_hz;
  for (const auto& event : events_) {
    if (ioctl(event.get(), PERF_EVENT_IOC_PERIOD, &value) != 0) {
      return errno_error(
          "cpu sampler: set the perf events' frequency to " + std::to_string(frequency_hz) + " Hz",
          errno);
    }
  }
  frequency_hz_.store(frequency_hz);
  return ok_status();
}

CpuSampler::~CpuSampler() {
  for (bpf_link* link : links_) bpf_link__destroy(link);
}

Status CpuSampler::select_cgroup(uint64_t cgroup_id) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.selected_cgroups, &cgroup_id, sizeof cgroup_id, &one,
                           sizeof one, BPF_ANY) != 0) {
    return errno_error("cpu sampler: select cgroup " + std::to_string(cgroup_id) + " (at most " +
                           std::to_string(SONDE_CPU_MAX_SELECTED) + " at once)",
                       errno);
  }
  return ok_status();
}

Status CpuSampler::release_cgroup(uint64_t cgroup_id) {
  if (bpf_map__delete_elem(skel_->maps.selected_cgroups, &cgroup_id, sizeof cgroup_id, 0) != 0 &&
      errno != ENOENT) {
    return errno_error("cpu sampler: release cgroup " + std::to_string(cgroup_id), errno);
  }
  return ok_status();
}

Status CpuSampler::select_pid(pid_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.selected_pids, &key, sizeof key, &one, sizeof one,
                           BPF_NOEXIST) == 0) {
    ++selected_pids_;
  } else if (errno != EEXIST) {
    return errno_error("cpu sampler: select pid " + std::to_string(pid) + " (at most " +
                           std::to_string(SONDE_CPU_MAX_SELECTED) + " at once)",
                       errno);
  }
  skel_->bss->select_pids = true;
  return ok_status();
}

Status CpuSampler::release_pid(pid_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  if (bpf_map__delete_elem(skel_->maps.selected_pids, &key, sizeof key, 0) == 0) {
    if (--selected_pids_ == 0) skel_->bss->select_pids = false;
  } else if (errno != ENOENT) {
    return errno_error("cpu sampler: release pid " + std::to_string(pid), errno);
  }
  return ok_status();
}

Status CpuSampler::watch_v8(pid_t pid, const V8FrameSlots& slots) {
  uint32_t key = static_cast<uint32_t>(pid);
  sonde_v8_process value{slots.function, slots.context_or_frame_type, slots.function_shared, 0};
  if (bpf_map__update_elem(skel_->maps.v8_processes, &key, sizeof key, &value, sizeof value,
                           BPF_ANY) != 0) {
    return errno_error("cpu sampler: watch the V8 frames of pid " + std::to_string(pid), errno);
  }
  return ok_status();
}

Status CpuSampler::unwatch_v8(pid_t pid) {
  uint32_t key = static_cast<uint32_t>(pid);
  if (bpf_map__delete_elem(skel_->maps.v8_processes, &key, sizeof key, 0) != 0 && errno != ENOENT) {
    return errno_error("cpu sampler: unwatch the V8 frames of pid " + std::to_string(pid), errno);
  }
  return ok_status();
}

Result<std::vector<RawSample>> CpuSampler::drain() {
  auto* skel = skel_.get();
  uint8_t old = skel->bss->generation & 1;
  __atomic_store_n(&skel->bss->generation, static_cast<uint8_t>(old ^ 1), __ATOMIC_RELEASE);
  // A program that read the old generation just before the switch finishes within microseconds
  // (it runs with interrupts off); give it that time before reading its maps.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));

  int counts_fd = bpf_map__fd(skel->maps.counts);
  int user_fd = bpf_map__fd(old ? skel->maps.user_stacks_1 : skel->maps.user_stacks_0);
  int kernel_fd = bpf_map__fd(old ? skel->maps.kernel_stacks_1 : skel->maps.kernel_stacks_0);
  int v8_fd = bpf_map__fd(old ? skel->maps.v8_stacks_1 : skel->maps.v8_stacks_0);

  std::vector<RawSample> out;
  std::unordered_map<int32_t, std::vector<uint64_t>> user_stacks;
  std::unordered_map<int32_t, std::vector<uint64_t>> kernel_stacks;
  std::unordered_map<uint64_t, std::vector<V8Frame>> v8_stacks;
  auto stack = [](int fd, int32_t id, std::unordered_map<int32_t, std::vector<uint64_t>>& cache) {
    if (id < 0) return std::vector<uint64_t>{};
    auto it = cache.find(id);
    if (it == cache.end()) {
      uint64_t ips[SONDE_CPU_MAX_FRAMES] = {};
      std::vector<uint64_t> frames;
      if (bpf_map_lookup_elem(fd, &id, ips) == 0) {
        for (uint64_t ip : ips) {
          if (ip == 0) break;
          frames.push_back(ip);
        }
      }
      it = cache.emplace(id, std::move(frames)).first;
    }
    return it->second;
  };

  for (const sonde_cpu_key& key : map_keys<sonde_cpu_key>(counts_fd, SONDE_CPU_MAX_KEYS)) {
    if (key.generation != old) continue;
    uint64_t count = 0;
    if (bpf_map_lookup_elem(counts_fd, &key, &count) != 0) continue;
    bpf_map_delete_elem(counts_fd, &key);
    RawSample s;
    s.pid = key.tgid;
    s.cgroup_id = key.cgroup_id;
    s.blocked = key.blocked != 0;
    s.user = stack(user_fd, key.user_stack_id, user_stacks);
    s.kernel = stack(kernel_fd, key.kernel_stack_id, kernel_stacks);
    if (key.v8_stack != 0) {
      auto it = v8_stacks.find(key.v8_stack);
      if (it == v8_stacks.end()) {
        std::vector<V8Frame> frames;
        sonde_v8_stack st{};
        if (bpf_map_lookup_elem(v8_fd, &key.v8_stack, &st) == 0) {
          for (uint32_t i = 0; i < st.frames && i < SONDE_V8_MAX_FRAMES; ++i) {
            const auto& f = st.frame[i];
            frames.push_back({f.pc, f.function, f.context_or_type, f.shared});
          }
        }
        it = v8_stacks.emplace(key.v8_stack, std::move(frames)).first;
      }
      s.v8 = it->second;
    }
    s.count = count;
    out.push_back(std::move(s));
  }
  for (int fd : {user_fd, kernel_fd}) {
    for (uint32_t id : map_keys<uint32_t>(fd, SONDE_CPU_MAX_STACKS)) bpf_map_delete_elem(fd, &id);
  }
  for (uint64_t hash : map_keys<uint64_t>(v8_fd, SONDE_V8_MAX_STACKS)) {
    bpf_map_delete_elem(v8_fd, &hash);
  }
  return out;
}

CpuSampler::Drops CpuSampler::drops() const {
  return {sum_percpu_counter(skel_->maps.drops, SONDE_CPU_DROP_KEY),
          sum_percpu_counter(skel_->maps.drops, SONDE_CPU_DROP_STACK),
          sum_percpu_counter(skel_->maps.drops, SONDE_CPU_DROP_V8_STACK),
          sum_percpu_counter(skel_->maps.drops, SONDE_CPU_DROP_USER_STACK)};
}

}  // namespace sonde::agent::stacks
