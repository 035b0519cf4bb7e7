#include "agent/nodejs/event_loop_monitor.h"

#include <elf.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>

#include "agent/symbols/elf_file.h"
#include "agent/v8/process_memory.h"
#include "agent/v8/v8_layout.h"
#include "bpf/nodejs/nodejs.h"
#include "common/files.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

// Asked of every candidate binary in one resolve; absent answers are cached per binary.
enum NameIndex { kNapi = 0, kDefaultLoop = 1 };
const std::vector<std::string> kNames = {"napi_module_register", "default_loop_struct"};

bool is_epoll_wait(long nr) {
#ifdef SYS_epoll_wait
  if (nr == SYS_epoll_wait) return true;
#endif
  return nr == SYS_epoll_pwait || nr == 441 /* epoll_pwait2 */;
}

// The runtime address of a link-time address of the executable of pid.
Result<uint64_t> runtime_address(const ProcReader& proc, pid_t pid, const symbols::ElfFile& elf,
                                 uint64_t vaddr) {
  if (elf.type() == ET_EXEC) return vaddr;
  uint64_t lowest = UINT64_MAX;
  for (size_t i = 0; i < elf.segment_count(); ++i) {
    auto seg = elf.segment(i);
    if (seg.type == PT_LOAD) lowest = std::min(lowest, seg.vaddr & ~uint64_t{0xfff});
  }
  if (lowest == UINT64_MAX) return Error("no PT_LOAD segment");
  ASSIGN_OR_RETURN(uint64_t base, proc.exe_load_base(pid));
  return base + vaddr - lowest;
}

// The default loop's epoll fd, read from the process's memory (process_vm_readv: a read, no
// ptrace stop); -1 when it cannot be read or the loop is not initialised yet.
int default_loop_epfd(pid_t pid, uint64_t default_loop) {
  int fd = -1;
  if (!v8::ProcessMemory(pid).read_value(default_loop + SONDE_UV_LOOP_BACKEND_FD_OFFSET, fd)) {
    return -1;
  }
  return fd > 0 ? fd : -1;
}

// Whether the default loop's epoll set has a member: libuv has polled the loop (its first
// uv__io_poll adds the queued watchers, then waits). False when the loop is not initialised
// yet or its fd cannot be read. Reads at most 256 KiB of fdinfo (a line per member); a longer
// one has members.
bool loop_has_polled(const ProcReader& proc, pid_t pid, uint64_t default_loop) {
  constexpr size_t kMaxFdinfoBytes = 256u << 10;
  const int epfd = default_loop_epfd(pid, default_loop);
  if (epfd < 0) return false;
  auto info = read_file(proc.root() + "/" + std::to_string(pid) + "/fdinfo/" + std::to_string(epfd),
                        kMaxFdinfoBytes);
  if (!info.ok()) return info.error().code() == EFBIG;
  return info->find("tfd:") != std::string::npos;
}

}  // namespace

const char* loop_mode_name(LoopMode mode) {
  switch (mode) {
    case LoopMode::kPrecise: return "precise";
    case LoopMode::kEpollOnly: return "epoll-only";
  }
  return "unknown";
}

EventLoopMonitor::EventLoopMonitor(LoopAccounting& probes, symbols::ProbeTargetCache& cache,
                                   const ProcReader& proc, uint64_t grace_ns, const Clock& clock,
                                   LibcWaitHooks* hooks)
    : probes_(probes),
      cache_(cache),
      proc_(proc),
      clock_(clock),
      hooks_(hooks),
      tracker_(grace_ns) {}

const std::vector<std::string>& EventLoopMonitor::symbol_names() {
  return kNames;
}

EventLoopMonitor::Outcome EventLoopMonitor::consider(const Candidate& c,
                                                     const ContainerLabels& labels,
                                                     std::string* why) {
  const pid_t pid = c.info.pid;
  const bool running = c.running;
  {
    std::lock_guard lock(mu_);
    if (const auto* p = tracker_.find(pid)) {
      if (running && p->start_time == c.info.start_time) return Outcome::kTracked;
      // It exec'd again (or the pid was reused after a lost exit event): a new program.
      finish_locked(pid, clock_.now_ns());
    }
  }
  const symbols::OpenBinary& binary = c.binary;
  auto targets = cache_.resolve(binary, kNames);
  if (!targets.ok()) {
    log::debug("not an ELF we can read", {{"pid", pid}, {"error", targets.error().message()}});
    return Outcome::kNotNode;
  }
  const auto& t = *targets;
  if (!t[kNapi].found) return Outcome::kNotNode;

  LoopProbes::Start start;
  LoopMode mode = LoopMode::kEpollOnly;
  if (t[kDefaultLoop].found) {
    auto elf = symbols::ElfFile::parse(binary.bytes());
    auto addr = elf.ok() ? runtime_address(proc_, pid, *elf, t[kDefaultLoop].address)
                         : Result<uint64_t>(elf.error());
    if (addr.ok()) {
      start.default_loop = *addr;
      mode = LoopMode::kPrecise;
    } else if (is_gone(addr.error())) {
      return Outcome::kGone;
    } else {
      log::warn("default loop address unknown; measuring every main-thread epoll wait",
                {{"pid", pid}, {"error", addr.error().message()}});
    }
  }
  start.any_epfd = mode == LoopMode::kEpollOnly;
  // With per-process hooks, they are in place before the state is read (see the header).
  if (hooks_ != nullptr) {
    LibcWaitHooks::Failure failure = LibcWaitHooks::Failure::kCount;
    auto hooked = hooks_->hook(pid, c.info.start_time, &failure);
    if (!hooked.ok()) {
      if (is_gone(hooked.error())) return Outcome::kGone;
      log::warn("Node.js process not tracked: its epoll waits cannot be hooked",
                {{"pid", pid}, {"binary", c.info.exe}, {"reason", hooked.error().message()}});
      if (why) *why = hooked.error().message();
      return failure == LibcWaitHooks::Failure::kLimitExceeded ? Outcome::kLimitExceeded
                                                               : Outcome::kNoWaitHook;
    }
  }
  bool starting_up = running && probes_.starting_up(pid);
  if (starting_up && hooks_ != nullptr && start.default_loop != 0) {
    // The hook went in after the exec: waits before it cleared no start-up record. The
    // default loop's epoll set tells: libuv registers the loop's watchers (its async watcher
    // at least) right before its first wait, and not before.
    starting_up = !loop_has_polled(proc_, pid, start.default_loop);
  }
  if (starting_up) {
    // Selected after its exec (in a cluster the pod's container id reaches the agent 0.5-2 s
    // later) but still starting up: its main thread has not waited in epoll since the exec
    // (the kernel records every exec and clears the record at the first wait). Bootstrap is
    // not event-loop time; accounting starts at the loop's first wait, as for a process
    // tracked from its exec. The record is exact, not a guess from the process's age: a slow
    // start-up (seconds of require()) is never counted, and a process that has waited even
    // once (its loop, or a nested loop of a spawnSync during start-up, which then counts the
    // rest of its start-up as before) is measured below from its state now. A process whose
    // first wait falls between
    // this check and track() has its first busy period missed, never one counted wrongly.
    start.now = LoopProbes::Start::Now::kUnknown;
  } else if (running) {
    // Mid-flight: the main thread blocked in an epoll wait on the loop's fd is idle; anywhere
    // else (including a nested loop's wait) it is busy, from now: a loop stuck when the agent
    // starts (restarts) shows its blocked time in progress. Without the loop's address, any
    // epoll wait is (almost surely) the loop waiting.
    auto sys = proc_.syscall_of(pid, pid);
    bool waiting = sys.ok() && is_epoll_wait(sys->nr);
    if (waiting && start.default_loop != 0) {
      waiting = default_loop_epfd(pid, start.default_loop) == static_cast<int>(sys->arg0);
    }
    if (waiting) {
      start.now = LoopProbes::Start::Now::kWaiting;
      start.epfd = static_cast<int>(sys->arg0);
    } else {
      start.now = LoopProbes::Start::Now::kBusy;
    }
  }
  if (auto st = probes_.track(pid, start); !st.ok()) {
    if (hooks_ != nullptr) hooks_->unhook(pid);
    log::warn("cannot track process", {{"pid", pid}, {"error", st.error().message()}});
    if (why) *why = st.error().message();
    return Outcome::kFailed;
  }

  const std::string key = binary.identity().to_string();
  // Whether CPU profiles can name this binary's JavaScript frames: read once per binary (its
  // v8dbg_* symbols and their values in this process), outside the lock. Only the inspection
  // worker adds binaries, so two reads of one new binary do not happen.
  std::string js_frames;
  {
    std::lock_guard lock(mu_);
    if (const Binary* known = tracker_.binary(key)) js_frames = known->js_frames;
  }
  if (js_frames.empty()) {
    auto layout = v8::read_process_v8_layout(proc_.root(), pid);
    js_frames = layout.ok() ? "supported" : v8::unsupported_reason(layout.error());
  }

  std::lock_guard lock(mu_);
  const std::string build_id = binary.identity().digest_hex();
  if (tracker_.start(pid, {c.info.start_time, labels, key, {}},
                     Binary{c.info.exe, build_id, mode, js_frames})) {
    log::info("instrumenting Node.js binary", {{"binary", c.info.exe},
                                               {"build_id", build_id},
                                               {"mode", loop_mode_name(mode)},
                                               {"js_frames", js_frames}});
  }
  log::debug("tracking Node.js process", {{"pid", pid}, {"container", labels.container}});
  return Outcome::kTracked;
}

void EventLoopMonitor::exited(pid_t pid, uint64_t exit_ns) {
  std::lock_guard lock(mu_);
  finish_locked(pid, exit_ns);
}

void EventLoopMonitor::finish_locked(pid_t pid, uint64_t end_ns) {
  tracker_.finish(pid, clock_.now_ns(), [&](const auto& p) {
    auto final = probes_.untrack(pid, end_ns);
    if (hooks_ != nullptr) hooks_->unhook(pid);
    LoopCounts value = p.data.last;
    if (final.ok()) raise_to(value, LoopCounts::of(*final));
    return value;
  });
}

void EventLoopMonitor::sweep() {
  std::lock_guard lock(mu_);
  for (pid_t pid : tracker_.vanished(proc_)) {
    log::debug("process vanished without an exit event", {{"pid", pid}});
    finish_locked(pid, clock_.now_ns());
  }
}

std::vector<EventLoopMonitor::Sample> EventLoopMonitor::samples() {
  std::lock_guard lock(mu_);
  std::map<ContainerLabels, size_t> loops;
  const uint64_t now = clock_.now_ns();
  auto totals = tracker_.report(now, [&](pid_t pid, auto& p) {
    ProcessState& s = p.data;
    auto v = probes_.read_at(pid, now);
    if (v.ok()) {
      raise_to(s.last, LoopCounts::of(*v));
    } else if (v.error().code() == ENOENT && !s.lost) {
      s.lost = true;
      ++states_lost_;
      log::warn("Node.js process state evicted from the kernel map",
                {{"pid", pid}, {"max_processes", SONDE_NODEJS_MAX_PROCESSES}});
    }
    if (!s.lost) loops[p.labels]++;
    return s.last;
  });
  std::map<ContainerLabels, LoopTotals> cumulative;
  for (const auto& t : totals) {
    cumulative[t.labels] = {t.value.blocked_ns, t.value.idle_ns, t.value.delays};
  }
  auto windows = windows_.observe(cumulative, now);
  std::vector<Sample> out;
  for (const auto& t : totals) {
    auto l = loops.find(t.labels);
    out.push_back({t.labels, static_cast<double>(t.value.blocked_ns) / 1e9, t.processes,
                   l == loops.end() ? 0 : l->second, t.value.blocks,
                   static_cast<double>(t.value.idle_ns) / 1e9, windows[t.labels]});
  }
  return out;
}

std::vector<EventLoopMonitor::BinaryInfo> EventLoopMonitor::binaries() const {
  std::lock_guard lock(mu_);
  std::vector<BinaryInfo> out;
  for (const auto& [key, b] : tracker_.binaries()) {
    out.push_back({b.data.path, b.data.build_id, b.data.mode, b.data.js_frames, b.processes});
  }
  return out;
}

uint64_t EventLoopMonitor::states_lost() const {
  std::lock_guard lock(mu_);
  return states_lost_;
}

size_t EventLoopMonitor::tracked() const {
  std::lock_guard lock(mu_);
  return tracker_.size();
}

}  // namespace sonde::agent
