#include "agent/nodejs_threadpool/pool_monitor.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.h"
#include "common/result.h"

namespace sonde::agent::threadpool {
namespace {

// A process's memory through process_vm_readv, remembering why the last read failed: ESRCH
// is a process that exited (its exit event follows), anything else a failure to count.
class PidMemory final : public v8::Memory {
 public:
  explicit PidMemory(pid_t pid) : pid_(pid) {}
  bool read(uint64_t address, std::span<uint8_t> out) const override {
    if (out.empty()) return true;
    iovec local{out.data(), out.size()};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address in another process
    iovec remote{reinterpret_cast<void*>(address), out.size()};
    const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(out.size())) return true;
    last_errno_ = n < 0 ? errno : EFAULT;
    return false;
  }
  int last_errno() const { return last_errno_; }

 private:
  pid_t pid_;
  mutable int last_errno_ = 0;
};

// A pidfd (Linux 5.3+) names one process, never a later one given the same pid. Invalid when the
// process is gone (errno ESRCH) or the kernel has none (ENOSYS).
UniqueFd open_pidfd(pid_t pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
}

// Whether the process `pidfd` names has exited (readable), so that its pid may name another
// process by now. An error counts as exited: nothing read through the pid is trusted then.
bool has_exited(int pidfd) {
  pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) != 0;
}

}  // namespace

PoolMonitor::PoolMonitor(symbols::ProbeTargetCache& cache, const ProcReader& proc,
                         uint64_t grace_ns, const Clock& clock, size_t max_processes)
    : cache_(cache),
      proc_(proc),
      clock_(clock),
      max_processes_(max_processes),
      tracker_(grace_ns) {}

PoolMonitor::Outcome PoolMonitor::consider(const Candidate& c, const ContainerLabels& labels,
                                           std::string* why) {
  const pid_t pid = c.info.pid;
  {
    std::lock_guard lock(mu_);
    if (const auto* p = tracker_.find(pid)) {
      if (c.running && p->start_time == c.info.start_time) return Outcome::kTracked;
      finish_locked(pid, clock_.now_ns());  // it exec'd again, or the pid was reused
    }
    forget_refused_locked(pid);
  }
  const symbols::OpenBinary& binary = c.binary;
  auto targets = cache_.resolve(binary, symbol_names());
  if (!targets.ok()) {
    log::debug("not an ELF we can read", {{"pid", pid}, {"error", targets.error().message()}});
    return Outcome::kNotNode;
  }
  const SymbolCheck check = check_symbols(*targets);
  if (!check.is_node) return Outcome::kNotNode;

  const std::string key = binary.identity().to_string();
  RefusedBinary info{c.info.exe, binary.identity().digest_hex(), check.verdict, 0};
  auto refuse = [&](Verdict verdict, const std::string& detail) {
    info.verdict = verdict;
    const std::string message = std::string("libuv thread pool of ") + c.info.exe +
                                " not read: " + verdict_name(verdict) + ": " + detail;
    if (why) *why = message;
    std::lock_guard lock(mu_);
    refuse_locked(pid, c.info.start_time, key, info);
    return Outcome::kRefused;
  };
  if (check.verdict != Verdict::kMeasured) return refuse(check.verdict, check.detail);

  auto elf = symbols::ElfFile::parse(binary.bytes());
  if (!elf.ok()) return refuse(Verdict::kUnreadable, elf.error().message());
  auto bias = load_bias(proc_, pid, *elf);
  if (!bias.ok()) {
    if (is_gone(bias.error())) return Outcome::kGone;
    return refuse(Verdict::kUnreadable, "load address: " + bias.error().message());
  }
  const PoolAddresses at = check.link_time.relocated(*bias);
  // The pid may have been given to another process since the candidate was read: a pidfd
  // opened before the start time is checked again names the candidate for good.
  auto pidfd = std::make_shared<UniqueFd>(open_pidfd(pid));
  if (!pidfd->valid()) {
    const int error = errno;
    if (error == ESRCH) return Outcome::kGone;
    if (error != ENOSYS) {  // out of descriptors or memory: not this binary's fault
      if (why) *why = "libuv thread pool not read: pidfd_open: " + errno_text(error);
      std::lock_guard lock(mu_);
      ++stats_.limit_exceeded;
      return Outcome::kLimitExceeded;
    }
    pidfd.reset();  // read by pid alone: a pid reused before the exit event is not noticed
  }
  if (auto now = proc_.read(pid); !now.ok() || now->start_time != c.info.start_time) {
    return Outcome::kGone;
  }

  std::lock_guard lock(mu_);
  if (tracker_.size() >= max_processes_) {
    ++stats_.limit_exceeded;
    if (why) {
      *why = "libuv thread pools are read in at most " + std::to_string(max_processes_) +
             " processes per node";
    }
    return Outcome::kLimitExceeded;
  }
  if (tracker_.start(pid, {c.info.start_time, labels, key, {}},
                     Binary{c.info.exe, info.build_id})) {
    log::info("reading the libuv thread pool of Node.js binary",
              {{"binary", c.info.exe}, {"build_id", info.build_id}});
  }
  polled_.insert_or_assign(pid, Polled{.at = at, .pidfd = std::move(pidfd)});
  return Outcome::kTracked;
}

void PoolMonitor::refuse_locked(pid_t pid, uint64_t start_time, const std::string& key,
                                const RefusedBinary& binary) {
  auto [b, inserted] = refused_binaries_.try_emplace(key, binary);
  if (inserted) {
    log::info("libuv thread pool of Node.js binary not read",
              {{"binary", binary.path}, {"verdict", verdict_name(binary.verdict)}});
  }
  b->second.processes++;
  refused_.insert_or_assign(pid, Refused{start_time, key});
}

void PoolMonitor::forget_refused_locked(pid_t pid) {
  auto it = refused_.find(pid);
  if (it == refused_.end()) return;
  auto b = refused_binaries_.find(it->second.binary);
  if (b != refused_binaries_.end() && --b->second.processes == 0) refused_binaries_.erase(b);
  refused_.erase(it);
}

void PoolMonitor::exited(pid_t pid, uint64_t end_ns) {
  std::lock_guard lock(mu_);
  finish_locked(pid, end_ns);
  forget_refused_locked(pid);
}

void PoolMonitor::finish_locked(pid_t pid, uint64_t /*end_ns*/) {
  // Saturated time is counted up to the last reading: nothing is claimed after it.
  tracker_.finish(pid, clock_.now_ns(), [&](const auto&) {
    auto it = polled_.find(pid);
    return PoolCounts{it == polled_.end() ? 0 : it->second.saturated_ns};
  });
  polled_.erase(pid);
}

void PoolMonitor::sweep() {
  std::lock_guard lock(mu_);
  for (pid_t pid : tracker_.vanished(proc_)) finish_locked(pid, clock_.now_ns());
  for (pid_t pid : vanished_pids(proc_, refused_)) forget_refused_locked(pid);
}

void PoolMonitor::poll() {
  struct Target {
    pid_t pid;
    uint64_t start_time;
    PoolAddresses at;
    std::shared_ptr<const UniqueFd> pidfd;  // held open while the memory is read unlocked
  };
  struct Read {
    ReadResult result;
    uint64_t at_ns;
    bool gone;
  };
  const uint64_t begin = clock_.now_ns();
  std::vector<Target> targets;
  {
    std::lock_guard lock(mu_);
    targets.reserve(polled_.size());
    for (const auto& [pid, p] : polled_) {
      const auto* process = tracker_.find(pid);
      if (process != nullptr) targets.push_back({pid, process->start_time, p.at, p.pidfd});
    }
  }
  std::vector<Read> reads;
  reads.reserve(targets.size());
  for (const Target& t : targets) {
    PidMemory memory(t.pid);
    const ReadResult r = read_pool(memory, t.at);
    // Alive after the read, so alive during it: the memory was its own, not that of a process
    // given its pid after it exited (whose pool may well sit at the same addresses).
    const bool gone =
        (t.pidfd && has_exited(t.pidfd->get())) ||
        (!r.reading && r.failure == ReadFailure::kUnreadable && memory.last_errno() == ESRCH);
    reads.push_back({r, clock_.now_ns(), gone});
  }
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    const Read& r = reads[i];
    const auto* process = tracker_.find(t.pid);
    auto p = polled_.find(t.pid);
    // Released (or replaced by a new exec) while its memory was read: the reading is not its.
    if (process == nullptr || process->start_time != t.start_time || p == polled_.end()) continue;
    if (r.gone) continue;
    if (!r.result.reading) {
      stats_.failures[static_cast<size_t>(r.result.failure)]++;
      continue;
    }
    const PoolReading& now = *r.result.reading;
    ++stats_.readings;
    if (now.truncated) ++stats_.walks_truncated;
    Polled& s = p->second;
    if (s.last && r.at_ns > s.last_ns && r.at_ns - s.last_ns <= kMaxGapNs) {
      const uint64_t dt = r.at_ns - s.last_ns;
      const int ends = (s.last->saturated() ? 1 : 0) + (now.saturated() ? 1 : 0);
      s.saturated_ns += dt * ends / 2;
    }
    s.last = now;
    s.last_ns = r.at_ns;
  }
  ++stats_.polls;
  stats_.poll_ns += clock_.now_ns() - begin;
}

std::vector<PoolMonitor::Sample> PoolMonitor::samples() {
  std::lock_guard lock(mu_);
  const uint64_t now = clock_.now_ns();
  std::map<ContainerLabels, Sample> gauges;
  auto totals = tracker_.report(now, [&](pid_t pid, const auto& process) {
    auto it = polled_.find(pid);
    if (it == polled_.end()) return PoolCounts{};
    const Polled& s = it->second;
    Sample& g = gauges[process.labels];
    g.processes++;
    if (s.last && now - s.last_ns <= kStaleNs) {
      g.threads += s.last->threads;
      g.busy += s.last->busy;
      g.queued += s.last->queued;
    }
    return PoolCounts{s.saturated_ns};
  });
  std::vector<Sample> out;
  out.reserve(totals.size());
  for (const auto& t : totals) {
    Sample s = gauges[t.labels];
    s.labels = t.labels;
    s.saturated_seconds = static_cast<double>(t.value.saturated_ns) / 1e9;
    out.push_back(s);
  }
  return out;
}

std::vector<PoolMonitor::BinaryInfo> PoolMonitor::binaries() const {
  std::lock_guard lock(mu_);
  std::vector<BinaryInfo> out;
  for (const auto& [key, b] : tracker_.binaries()) {
    out.push_back({b.data.path, b.data.build_id, Verdict::kMeasured, b.processes});
  }
  for (const auto& [key, b] : refused_binaries_) {
    out.push_back({b.path, b.build_id, b.verdict, b.processes});
  }
  return out;
}

PoolMonitor::Stats PoolMonitor::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t PoolMonitor::tracked() const {
  std::lock_guard lock(mu_);
  return tracker_.size();
}

}  // namespace sonde::agent::threadpool
