#include "agent/nodejs/loop_probes.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/kernel/bpf_helpers.h"
#include "agent/kernel/uprobe_links.h"
#include "bpf/nodejs/nodejs.h"
#include "common/log.h"
#include "nodejs.skel.h"

namespace sonde::agent {
namespace {

// do_epoll_wait is static and may be inlined on some kernels: then fentry cannot attach, and
// the per-process C library uprobes take over.
bool kernel_can_trace_do_epoll_wait() {
  return libbpf_find_vmlinux_btf_id("do_epoll_wait", BPF_TRACE_FENTRY) > 0;
}

// The syscall tracepoints need tracefs for their event ids (libbpf reads them from
// /sys/kernel/tracing, or /sys/kernel/debug/tracing where that exists). A node without it
// mounted gets it mounted at the standard place (in the agent's own mount namespace when it
// runs in a container); without CAP_SYS_ADMIN that fails, and the load says so.
bool tracefs_has_epoll_events() {
  constexpr const char* kEvent = "/sys/kernel/tracing/events/syscalls/sys_enter_epoll_pwait/id";
  if (access("/sys/kernel/debug/tracing", F_OK) == 0) {
    return access("/sys/kernel/debug/tracing/events/syscalls/sys_enter_epoll_pwait/id", R_OK) == 0;
  }
  if (access(kEvent, R_OK) == 0) return true;
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0) {
    log::debug("cannot mount tracefs", {{"error", errno_text(errno)}});
    return false;
  }
  return access(kEvent, R_OK) == 0;
}

LoopReading reading_at(const sonde_loop_state& s, uint64_t now) {
  LoopReading r;
  r.blocked_ns = s.blocked_ns;
  if (s.phase == SONDE_LOOP_BUSY && now > s.busy_since_ns) r.blocked_ns += now - s.busy_since_ns;
  for (size_t i = 0; i < r.blocks.counts.size(); ++i) r.blocks.counts[i] = s.blocks[i];
  r.blocks.sum = s.blocked_ns;
  r.idle_ns = s.idle_ns;
  if (s.phase == SONDE_LOOP_IDLE && now > s.idle_since_ns) r.idle_ns += now - s.idle_since_ns;
  for (size_t i = 0; i < r.delays.counts.size(); ++i) r.delays.counts[i] = s.delay[i];
  r.delays.sum_ns = s.delay_sum_ns;
  r.delays.sumsq_us2 = s.delay_sumsq_us2;
  return r;
}

}  // namespace

Result<std::unique_ptr<LoopProbes>> LoopProbes::load(WaitSource source,
                                                     std::optional<UprobeLinkKind> links,
                                                     bool runtime_metrics) {
  if (source != WaitSource::kAuto) return load_with(source, links, runtime_metrics);
  // fentry needs the function in BTF and BPF trampolines (DYNAMIC_FTRACE_WITH_DIRECT_CALLS),
  // which some kernels lack; trying is the only reliable probe.
  if (kernel_can_trace_do_epoll_wait()) {
    // libbpf would print the expected verifier refusal as a warning; the log line below says it.
    auto previous = libbpf_set_print(nullptr);
    auto probes = load_with(WaitSource::kFentry, links, runtime_metrics);
    libbpf_set_print(previous);
    if (probes.ok()) return probes;
    log::info(
        "fentry on do_epoll_wait unavailable, using uprobes on the C library of each "
        "selected Node.js process",
        {{"reason", probes.error().message()}});
  }
  // Never a syscall tracepoint unless asked: they tax every system call on the node.
  auto probes = load_with(WaitSource::kLibcUprobes, links, runtime_metrics);
  if (probes.ok()) return probes;
  return Error("nodejs probes: no BPF trampolines and no uprobes here (" +
                   probes.error().message() +
                   "); --wait-source epoll-tracepoints measures through the syscall "
                   "tracepoints, which slow every system call of every process on the node",
               probes.error().code());
}

Result<std::unique_ptr<LoopProbes>> LoopProbes::load_with(WaitSource source,
                                                          std::optional<UprobeLinkKind> links,
                                                          bool runtime_metrics) {
  std::unique_ptr<LoopProbes> self(new LoopProbes());
  self->skel_ = {nodejs_bpf__open(), nodejs_bpf__destroy};
  if (!self->skel_) return errno_error("nodejs probes: open BPF object", errno);
  auto* skel = self->skel_.get();
  configure_pid_namespace(skel->rodata);
  skel->rodata->runtime_metrics = runtime_metrics;
  self->source_ = source;
  bool fentry = source == WaitSource::kFentry;
  bool events = source == WaitSource::kEpollTracepoints;
  if (events && !tracefs_has_epoll_events()) {
    return Error(
        "nodejs probes: the epoll syscall tracepoints need tracefs "
        "(/sys/kernel/tracing) and it cannot be mounted; --wait-source syscalls uses "
        "the raw syscall tracepoints");
  }
  bool raw = source == WaitSource::kSyscallTracepoints;
  bool libc = source == WaitSource::kLibcUprobes;
  // Attached per library file by LibcWaitHooks, never by the skeleton (a uprobe without a
  // target cannot be auto-attached).
  bpf_program__set_autoload(skel->progs.libc_wait_enter, libc);
  bpf_program__set_autoload(skel->progs.libc_wait_exit, libc);
  bpf_program__set_autoattach(skel->progs.libc_wait_enter, false);
  bpf_program__set_autoattach(skel->progs.libc_wait_exit, false);
  if (libc) {
    self->links_ = links.value_or(uprobe_link_support().kind);
    prepare_uprobe_program(skel->progs.libc_wait_enter, self->links_);
    prepare_uprobe_program(skel->progs.libc_wait_exit, self->links_);
  }
  bpf_program__set_autoload(skel->progs.epoll_wait_enter, fentry);
  bpf_program__set_autoload(skel->progs.epoll_wait_exit, fentry);
  bpf_program__set_autoload(skel->progs.epoll_pwait_event, events);
  bpf_program__set_autoload(skel->progs.epoll_pwait_exit_event, events);
  bpf_program__set_autoload(skel->progs.epoll_pwait2_event, events);
  bpf_program__set_autoload(skel->progs.epoll_pwait2_exit_event, events);
  bpf_program__set_autoload(skel->progs.sys_enter_wait, raw);
  bpf_program__set_autoload(skel->progs.sys_exit_wait, raw);
#ifdef SYS_epoll_wait
  skel->rodata->nr_epoll_wait = SYS_epoll_wait;  // arm64 has only epoll_pwait
  bpf_program__set_autoload(skel->progs.epoll_wait_event, events);
  bpf_program__set_autoload(skel->progs.epoll_wait_exit_event, events);
#else
  bpf_program__set_autoload(skel->progs.epoll_wait_event, false);
  bpf_program__set_autoload(skel->progs.epoll_wait_exit_event, false);
#endif
  skel->rodata->nr_epoll_pwait = SYS_epoll_pwait;
  skel->rodata->nr_epoll_pwait2 = 441;  // the same number on every architecture

  if (int err = nodejs_bpf__load(skel); err) {
    return errno_error(std::string("nodejs probes: load ") + self->wait_source() +
                           " programs (run 'sonde-agent doctor')",
                       -err);
  }
  if (int err = nodejs_bpf__attach(skel); err) {
    return errno_error(std::string("nodejs probes: attach ") + self->wait_source(), -err);
  }
  return self;
}

LoopProbes::~LoopProbes() = default;

int LoopProbes::loops_map_fd() const {
  return bpf_map__fd(skel_->maps.loops);
}

int LoopProbes::stall_thresholds_fd() const {
  return bpf_map__fd(skel_->maps.stall_thresholds);
}

const bpf_map* LoopProbes::stall_events_map() const {
  return skel_->maps.stall_events;
}

uint64_t LoopProbes::stall_events_lost() const {
  return sum_percpu_counter(skel_->maps.stall_events_lost, 0);
}

const char* LoopProbes::wait_source() const {
  switch (source_) {
    case WaitSource::kFentry: return "fentry/do_epoll_wait";
    case WaitSource::kEpollTracepoints: return "tracepoint/syscalls/epoll_wait*";
    case WaitSource::kLibcUprobes: return "uprobe/libc:epoll_wait*";
    default: return "tp_btf/sys_enter+sys_exit";
  }
}

const char* LoopProbes::wait_source_cost(WaitSource source) {
  switch (source) {
    case WaitSource::kFentry: return "nothing measurable (a trampoline on epoll waits only)";
    case WaitSource::kLibcUprobes:
      return "nothing (breakpoints only in the selected processes' own address spaces)";
    case WaitSource::kEpollTracepoints:
    case WaitSource::kSyscallTracepoints:
    case WaitSource::kAuto: break;
  }
  return "every system call of every process (the syscall tracepoint slow path)";
}

const char* LoopProbes::wait_source_cost_class(WaitSource source) {
  switch (source) {
    case WaitSource::kFentry:
    case WaitSource::kLibcUprobes: return "none";
    case WaitSource::kEpollTracepoints:
    case WaitSource::kSyscallTracepoints:
    case WaitSource::kAuto: break;
  }
  return "every-syscall";
}

Result<std::unique_ptr<Attachment>> LoopProbes::attach(const std::string& path,
                                                       std::span<const UprobeSite> sites,
                                                       UprobeFires fires, pid_t pid) {
  if (source_ != WaitSource::kLibcUprobes) {
    return Error(std::string("nodejs probes: no C library probes with ") + wait_source());
  }
  bpf_program* program =
      fires == UprobeFires::kAtSite ? skel_->progs.libc_wait_enter : skel_->progs.libc_wait_exit;
  return attach_uprobes(program, links_, path, sites, fires, pid);
}

Status LoopProbes::track(pid_t pid, const Start& start) {
  sonde_loop_state s{};
  if (start.default_loop != 0) {
    s.backend_fd_ptr = start.default_loop + SONDE_UV_LOOP_BACKEND_FD_OFFSET;
  }
  s.loop_epfd = -1;
  s.flags = start.any_epfd ? SONDE_LOOP_ANY_EPFD : 0;
  switch (start.now) {
    case Start::Now::kUnknown: s.phase = SONDE_LOOP_UNKNOWN; break;
    case Start::Now::kWaiting:
      s.phase = SONDE_LOOP_IDLE;
      s.loop_epfd = start.epfd;
      s.idle_since_ns = monotonic_ns();
      break;
    case Start::Now::kBusy:
      s.phase = SONDE_LOOP_BUSY;
      s.busy_since_ns = monotonic_ns();
      break;
  }
  auto key = static_cast<uint32_t>(pid);
  if (bpf_map__update_elem(skel_->maps.loops, &key, sizeof key, &s, sizeof s, BPF_ANY) != 0) {
    return errno_error("track pid " + std::to_string(pid) + " in nodejs loops map", errno);
  }
  return ok_status();
}

bool LoopProbes::starting_up(pid_t pid) const {
  auto key = static_cast<uint32_t>(pid);
  uint8_t value = 0;
  return bpf_map__lookup_elem(skel_->maps.starting, &key, sizeof key, &value, sizeof value, 0) == 0;
}

Result<LoopReading> LoopProbes::read_at(pid_t pid, uint64_t now_ns) const {
  auto key = static_cast<uint32_t>(pid);
  sonde_loop_state a{}, b{};
  // A lookup copies the value while the kernel may be writing it; two equal copies in a row
  // cannot both be torn the same way.
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (bpf_map__lookup_elem(skel_->maps.loops, &key, sizeof key, &a, sizeof a, 0) != 0) {
      return errno_error("read nodejs loop state of pid " + std::to_string(pid), errno);
    }
    if (bpf_map__lookup_elem(skel_->maps.loops, &key, sizeof key, &b, sizeof b, 0) != 0) {
      return errno_error("read nodejs loop state of pid " + std::to_string(pid), errno);
    }
    if (std::memcmp(&a, &b, sizeof a) == 0) break;
  }
  return reading_at(b, now_ns);
}

Result<uint64_t> LoopProbes::blocked_ns(pid_t pid) const {
  ASSIGN_OR_RETURN(LoopReading r, read_at(pid, monotonic_ns()));
  return r.blocked_ns;
}

Result<LoopReading> LoopProbes::untrack(pid_t pid, uint64_t end_ns) {
  auto value = read_at(pid, end_ns);
  auto key = static_cast<uint32_t>(pid);
  bpf_map__delete_elem(skel_->maps.loops, &key, sizeof key, 0);
  return value;
}

}  // namespace sonde::agent
