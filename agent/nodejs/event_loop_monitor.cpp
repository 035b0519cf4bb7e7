#include "agent/nodejs/event_loop_monitor.h"

#include <elf.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>

#include "agent/symbols/elf_file.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

// Asked of every candidate binary in one resolve; absent answers are cached per binary.
enum NameIndex { kNapi = 0, kIoPoll = 1, kDefaultLoop = 2 };
const std::vector<std::string> kNames = {"napi_module_register", "uv__io_poll",
                                         "default_loop_struct"};
constexpr const char* kProgram = "nodejs/uv__io_poll";

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

}  // namespace

const char* loop_mode_name(LoopMode mode) {
  switch (mode) {
    case LoopMode::kPrecise: return "precise";
    case LoopMode::kAnyLoop: return "any-loop";
    case LoopMode::kEpollOnly: return "epoll-only";
  }
  return "unknown";
}

EventLoopMonitor::EventLoopMonitor(LoopProbes& probes, symbols::ProbeTargetCache& cache,
                                   SharedUprobes& uprobes, const ProcReader& proc)
    : probes_(probes), cache_(cache), uprobes_(uprobes), proc_(proc) {}

const std::vector<std::string>& EventLoopMonitor::symbol_names() {
  return kNames;
}

EventLoopMonitor::Outcome EventLoopMonitor::consider(const Candidate& c,
                                                     const ContainerLabels& labels) {
  const pid_t pid = c.info.pid;
  const bool running = c.running;
  {
    std::lock_guard lock(mu_);
    auto it = processes_.find(pid);
    if (it != processes_.end()) {
      if (running && it->second.start_time == c.info.start_time) return Outcome::kTracked;
      // It exec'd again (or the pid was reused after a lost exit event): a new program.
      finish_locked(pid, monotonic_ns());
    }
  }
  const std::string& path = c.path;
  const symbols::OpenBinary* binary = &c.binary;
  auto targets = cache_.resolve(*binary, kNames);
  if (!targets.ok()) {
    log::debug("not an ELF we can read", {{"pid", pid}, {"error", targets.error().message()}});
    return Outcome::kNotNode;
  }
  const auto& t = *targets;
  if (!t[kNapi].found) return Outcome::kNotNode;

  LoopProbes::Start start;
  LoopMode mode = LoopMode::kEpollOnly;
  if (t[kIoPoll].found) {
    auto attached = uprobes_.acquire(
        {binary->identity(), t[kIoPoll].file_offset, kProgram}, path, pid,
        [this](const std::string& p, uint64_t offset) { return probes_.attach_uprobe(p, offset); });
    if (attached.ok()) {
      mode = LoopMode::kAnyLoop;
      auto elf = symbols::ElfFile::parse(binary->bytes());
      if (t[kDefaultLoop].found && elf.ok()) {
        auto addr = runtime_address(proc_, pid, *elf, t[kDefaultLoop].address);
        if (addr.ok()) {
          start.default_loop = *addr;
          mode = LoopMode::kPrecise;
        }
      }
    } else if (is_gone(attached.error())) {
      return Outcome::kGone;
    } else {
      log::warn("uv__io_poll uprobe failed; measuring every main-thread epoll wait",
                {{"pid", pid}, {"error", attached.error().message()}});
    }
  }
  start.any_epfd = mode == LoopMode::kEpollOnly;
  if (running) {
    // Mid-flight: a main thread blocked in epoll now is (almost surely) the loop waiting.
    auto sys = proc_.syscall_of(pid, pid);
    if (sys.ok() && is_epoll_wait(sys->nr)) {
      start.now = LoopProbes::Start::Now::kWaiting;
      start.epfd = static_cast<int>(sys->arg0);
    } else {
      start.now = LoopProbes::Start::Now::kBusy;
    }
  }
  if (auto st = probes_.track(pid, start); !st.ok()) {
    uprobes_.release(pid);
    log::warn("cannot track process", {{"pid", pid}, {"error", st.error().message()}});
    return Outcome::kFailed;
  }

  std::lock_guard lock(mu_);
  processes_[pid] = Process{c.info.start_time, labels, binary->identity(), 0};
  containers_[labels].processes++;
  auto [b, inserted] =
      binaries_.try_emplace(binary->identity().to_string(), Binary{c.info.exe, mode, 0});
  b->second.processes++;
  if (inserted) {
    log::info("instrumenting Node.js binary", {{"binary", c.info.exe},
                                               {"mode", loop_mode_name(mode)},
                                               {"uv__io_poll", t[kIoPoll].found},
                                               {"default_loop_struct", t[kDefaultLoop].found}});
  }
  log::debug("tracking Node.js process", {{"pid", pid}, {"container", labels.container}});
  return Outcome::kTracked;
}

void EventLoopMonitor::exited(pid_t pid, uint64_t exit_ns) {
  std::lock_guard lock(mu_);
  finish_locked(pid, exit_ns);
}

void EventLoopMonitor::finish_locked(pid_t pid, uint64_t end_ns) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  auto final_ns = probes_.untrack(pid, end_ns);
  uint64_t value = std::max(it->second.last_ns, final_ns.ok() ? *final_ns : 0);
  auto& c = containers_[it->second.labels];
  c.finished_ns += value;
  c.processes--;
  auto b = binaries_.find(it->second.binary.to_string());
  if (b != binaries_.end() && --b->second.processes == 0) binaries_.erase(b);
  processes_.erase(it);
  uprobes_.release(pid);
}

void EventLoopMonitor::sweep() {
  std::lock_guard lock(mu_);
  std::vector<pid_t> vanished;
  for (const auto& [pid, p] : processes_) {
    auto start = proc_.start_time(pid);
    if (!start.ok() || *start != p.start_time) vanished.push_back(pid);
  }
  for (pid_t pid : vanished) {
    log::debug("process vanished without an exit event", {{"pid", pid}});
    finish_locked(pid, monotonic_ns());
  }
}

std::vector<EventLoopMonitor::Sample> EventLoopMonitor::samples() {
  std::lock_guard lock(mu_);
  std::map<ContainerLabels, uint64_t> live;
  uint64_t now = monotonic_ns();
  for (auto& [pid, p] : processes_) {
    auto v = probes_.blocked_ns_at(pid, now);
    if (v.ok()) p.last_ns = std::max(p.last_ns, *v);
    live[p.labels] += p.last_ns;
  }
  std::vector<Sample> out;
  out.reserve(containers_.size());
  for (auto& [labels, c] : containers_) {
    uint64_t value = std::max(c.reported_ns, c.finished_ns + live[labels]);
    c.reported_ns = value;
    out.push_back({labels, static_cast<double>(value) / 1e9, c.processes});
  }
  return out;
}

std::vector<EventLoopMonitor::BinaryInfo> EventLoopMonitor::binaries() const {
  std::lock_guard lock(mu_);
  std::vector<BinaryInfo> out;
  for (const auto& [key, b] : binaries_) out.push_back({b.path, b.mode, b.processes});
  return out;
}

size_t EventLoopMonitor::tracked() const {
  std::lock_guard lock(mu_);
  return processes_.size();
}

}  // namespace sonde::agent
