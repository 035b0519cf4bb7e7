#include "agent/doctor/doctor.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "agent/discovery/proc_reader.h"
#include "agent/kernel/bpf_helpers.h"
#include "agent/kernel/process_cgroups.h"
#include "agent/kernel/uprobe_cost.h"
#include "agent/kernel/uprobe_links.h"
#include "agent/procevents/process_events.h"
#include "agent/v8/v8_layout.h"
#include "common/dotted_version.h"
#include "common/files.h"

namespace sonde::agent {
namespace {

using Verdict = Check::Verdict;

// Oldest kernel the agent supports: BPF ring buffers and tp_btf arrived in 5.8.
constexpr KernelVersion kMinKernel{5, 8, 0};
// From 5.11 BPF memory is charged to the memory cgroup and RLIMIT_MEMLOCK no longer applies.
constexpr KernelVersion kMemcgAccountingKernel{5, 11, 0};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Check kernel_check(const DoctorOptions& o) {
  Check c{.name = "kernel version"};
  auto release = read_file(o.proc_root + "/sys/kernel/osrelease");
  auto v = release ? parse_kernel_version(*release) : std::nullopt;
  if (!v) {
    c.verdict = Verdict::kFail;
    c.detail = "cannot read " + o.proc_root + "/sys/kernel/osrelease";
    c.fix = "mount the host's /proc (hostPID and a /proc volume in a pod)";
    return c;
  }
  c.detail = trim(*release);
  if (*v < kMinKernel) {
    c.verdict = Verdict::kFail;
    c.fix = "the agent needs Linux 5.8 or newer (BPF ring buffer, BTF tracepoints)";
  } else if (*v < kMemcgAccountingKernel) {
    c.verdict = Verdict::kWarn;
    c.fix = "before 5.11 BPF maps count against RLIMIT_MEMLOCK: grant CAP_SYS_RESOURCE";
  }
  return c;
}

Check btf_check(const DoctorOptions& o) {
  Check c{.name = "kernel BTF"};
  std::string path = o.sys_root + "/kernel/btf/vmlinux";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    c.verdict = Verdict::kFail;
    c.detail = path + " missing";
    c.fix = "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (CO-RE programs need it)";
    return c;
  }
  c.detail = path + " (" + std::to_string(st.st_size / 1024) + " KiB)";
  return c;
}

struct CapSpec {
  int cap;
  bool required;
  const char* name;
  const char* why;
};

constexpr CapSpec kCaps[] = {
    {CAP_BPF, true, "CAP_BPF", "load BPF programs and create maps"},
    {CAP_PERFMON, true, "CAP_PERFMON", "BTF tracepoints, perf-event samplers, kernel symbols"},
    {CAP_SYS_PTRACE, true, "CAP_SYS_PTRACE", "read /proc/<pid>/root and maps of other processes"},
    {CAP_DAC_READ_SEARCH, true, "CAP_DAC_READ_SEARCH", "read binaries of every container"},
    {CAP_SYS_RESOURCE, false, "CAP_SYS_RESOURCE", "raise RLIMIT_MEMLOCK on kernels before 5.11"},
    {CAP_SYS_ADMIN, false, "CAP_SYS_ADMIN",
     "create uprobes (Go TLS; Node.js without BPF trampolines) on kernels that ask it, mount "
     "tracefs (optional)"},
};

bool holds(uint64_t caps, int cap) {
  return (caps >> cap) & 1;
}

// Before 5.8 CAP_BPF/CAP_PERFMON did not exist and CAP_SYS_ADMIN covered both; CAP_DAC_OVERRIDE
// bypasses the read and search checks CAP_DAC_READ_SEARCH bypasses.
const char* covered_by(uint64_t caps, int cap) {
  if ((cap == CAP_BPF || cap == CAP_PERFMON) && holds(caps, CAP_SYS_ADMIN)) return "CAP_SYS_ADMIN";
  if (cap == CAP_DAC_READ_SEARCH && holds(caps, CAP_DAC_OVERRIDE)) return "CAP_DAC_OVERRIDE";
  return nullptr;
}

// "CAP_BPF" → "BPF", the spelling of container engines (--cap-add) and Kubernetes.
std::string_view short_name(std::string_view cap) {
  return cap.substr(4);
}

constexpr const char* kNonRootNote =
    "capabilities granted to a container are effective for uid 0 only: run the agent as uid 0 "
    "(--user 0, chart: runAsUser: 0)";

// Effective uid from /proc/<pid>/status ("Uid:\treal\teffective\t..."); nullopt if malformed.
std::optional<unsigned> parse_effective_uid(std::string_view status_text) {
  constexpr std::string_view kKey = "\nUid:";
  auto pos = status_text.find(kKey);
  if (pos == std::string_view::npos) return std::nullopt;
  std::istringstream fields(std::string(status_text.substr(pos + kKey.size(), 64)));
  unsigned real = 0, effective = 0;
  if (!(fields >> real >> effective)) return std::nullopt;
  return effective;
}

std::vector<Check> capability_checks(const DoctorOptions& o) {
  std::vector<Check> out;
  auto status = read_file(o.proc_root + "/self/status");
  auto caps = status ? parse_effective_caps(*status) : std::nullopt;
  if (!caps) {
    out.push_back({.name = "capabilities",
                   .verdict = Verdict::kFail,
                   .detail = "cannot read CapEff from " + o.proc_root + "/self/status",
                   .fix = "mount the host's /proc"});
    return out;
  }
  auto uid = parse_effective_uid(*status);
  for (const auto& spec : kCaps) {
    bool held = holds(*caps, spec.cap);
    const char* cover = held ? nullptr : covered_by(*caps, spec.cap);
    Check c{.name = spec.name};
    c.detail = std::string(held    ? "held"
                           : cover ? std::string("covered by ") + cover
                                   : "missing") +
               ": " + spec.why;
    if (!held && !cover) {
      c.verdict = spec.required ? Verdict::kFail : Verdict::kWarn;
      auto cap = short_name(spec.name);
      c.fix = std::string("grant ") + spec.name + ": --cap-add " + std::string(cap) +
              " (podman/docker), securityContext.capabilities.add: [" + std::string(cap) +
              "] (chart)";
      if (uid && *uid != 0) c.fix += "; " + std::string(kNonRootNote);
    }
    out.push_back(std::move(c));
  }
  return out;
}

// uprobes are required (Node.js, Go TLS); kprobes only speed up following kernel symbols of
// BPF programs, which falls back to re-reading /proc/kallsyms without them.
Check pmu_check(const DoctorOptions& o, const std::string& pmu) {
  bool required = pmu == "uprobe";
  Check c{.name = pmu + " PMU"};
  std::string path = o.sys_root + "/bus/event_source/devices/" + pmu + "/type";
  auto type = read_file(path);
  if (!type) {
    c.verdict = required ? Verdict::kFail : Verdict::kWarn;
    c.detail = path + " missing" + (required ? "" : " (optional)");
    c.fix = required ? "use a kernel with CONFIG_UPROBE_EVENTS=y"
                     : "CONFIG_KPROBE_EVENTS=y lets the agent follow BPF program symbols "
                       "incrementally";
    return c;
  }
  c.detail = "perf type " + trim(*type) + " (attach without tracefs)";
  return c;
}

Check tracefs_check(const DoctorOptions& o) {
  Check c{.name = "tracefs"};
  auto mounts = read_file(o.proc_root + "/self/mounts");
  if (!mounts) {
    c.verdict = Verdict::kWarn;
    c.detail = "cannot read " + o.proc_root + "/self/mounts";
    c.fix = "mount the host's /proc";
    return c;
  }
  std::istringstream in(*mounts);
  std::string dev, dir, type;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    fields >> dev >> dir >> type;
    if (type == "tracefs" || type == "debugfs") {
      if (type == "tracefs" || c.detail.empty()) c.detail.assign(type).append(" at ").append(dir);
    }
  }
  if (c.detail.empty()) {
    // The agent's programs (tp_btf, perf-PMU uprobes/kprobes) do not need it; tools might.
    c.verdict = Verdict::kWarn;
    c.detail = "not mounted (not needed by the agent's programs)";
    c.fix = "for bpftool/perf tracepoints: mount -t tracefs nodev /sys/kernel/tracing";
  }
  return c;
}

Check cgroup_check(const DoctorOptions& o) {
  Check c{.name = "cgroup version"};
  auto mounts = read_file(o.proc_root + "/self/mounts");
  if (!mounts) {
    c.verdict = Verdict::kFail;
    c.detail = "cannot read " + o.proc_root + "/self/mounts";
    c.fix = "mount the host's /proc";
    return c;
  }
  bool v1 = false;
  std::string v2_dir;
  std::istringstream in(*mounts);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string dev, dir, type;
    fields >> dev >> dir >> type;
    if (type == "cgroup2" && v2_dir.empty()) v2_dir = dir;
    if (type == "cgroup") v1 = true;
  }
  if (!v2_dir.empty() && !v1) {
    c.detail = "v2 (unified) at " + v2_dir;
  } else if (!v2_dir.empty()) {
    c.detail = "hybrid: v1 controllers, v2 at " + v2_dir + " (container ids from v1 paths)";
  } else if (v1) {
    c.detail = "v1 only: container ids from v1 paths, no cgroup-id filtering";
    c.verdict = Verdict::kWarn;
    c.fix =
        "cgroup v2 gives in-kernel cgroup filtering; boot with systemd.unified_cgroup_hierarchy=1";
  } else {
    c.verdict = Verdict::kFail;
    c.detail = "no cgroup filesystem mounted";
    c.fix = "mount the host's /sys/fs/cgroup";
  }
  return c;
}

// The kernel's ENOTSUPP (524), which reaches user space from some BPF paths.
constexpr int kEnotsupp = 524;

// Loads the smallest program of `type` ("r0 = 0; exit"). Unlike libbpf_probe_bpf_prog_type,
// which answers "unsupported" for any failure, this keeps the errno so a missing permission
// is not mistaken for a missing kernel feature.
Check prog_type_check(const char* name, bpf_prog_type type, uint64_t caps) {
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  int fd = bpf_prog_load(type, nullptr, "GPL", insns, std::size(insns), nullptr);
  if (fd < 0) return bpf_refusal_check(std::string("BPF program: ") + name, -fd, caps, true);
  ::close(fd);
  return {.name = std::string("BPF program: ") + name, .detail = "loadable"};
}

Check map_type_check(const char* name, bpf_map_type type, uint64_t caps) {
  // A ring buffer's size is a power-of-2 multiple of the page size and it has no key/value.
  bool ringbuf = type == BPF_MAP_TYPE_RINGBUF;
  auto page = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE));
  int fd =
      bpf_map_create(type, nullptr, ringbuf ? 0 : 4, ringbuf ? 0 : 4, ringbuf ? page : 1, nullptr);
  if (fd < 0) return bpf_refusal_check(std::string("BPF map: ") + name, -fd, caps, false);
  ::close(fd);
  return {.name = std::string("BPF map: ") + name, .detail = "creatable"};
}

// The real thing: load and attach the agent's process-event program, then detach.
Check process_events_check() {
  Check c{.name = "process events program"};
  auto source = ProcessEventSource::start([](const ProcessEvent&) {});
  if (!source.ok()) {
    c.verdict = Verdict::kFail;
    c.detail = source.error().message();
    c.fix = "fix the failures above; a kernel log (dmesg) may say more";
    return c;
  }
  c.detail = "loaded and attached (tp_btf sched_process_exec/exit, ring buffer)";
  return c;
}

// The kernel names a process's cgroup (a task iterator for one process): what the Go TLS cgroup
// filter and the CPU sampler's per-container selection use in cluster mode.
Check process_cgroup_check() {
  Check c{.name = "process cgroup iterator"};
  auto self = ProcReader().read(getpid());
  auto cgroups = ProcessCgroups::load();
  auto id = !cgroups.ok() ? Result<uint64_t>(cgroups.error())
            : !self.ok()  ? Result<uint64_t>(self.error())
                          : (*cgroups)->cgroup_of(getpid(), self->start_time);
  if (!id.ok()) {
    c.verdict = Verdict::kWarn;
    c.detail = id.error().message();
    c.fix =
        "needs Linux 6.1+; without it the cluster agent counts Go TLS in every process of an "
        "instrumented binary and samples selected processes only, not what they fork";
    return c;
  }
  c.detail = "names this process's cgroup: id " + std::to_string(*id);
  return c;
}

// Never called: the uprobe check places its probe here, so no code that runs is touched.
[[gnu::noinline, gnu::used]] void uprobe_check_target() {
  asm volatile("");
}

// The file offset of `address` in this process's executable, from /proc/self/maps.
std::optional<uint64_t> own_file_offset(uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t start = 0, end = 0;
    uint64_t offset = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %lx", &start, &end, &offset) != 3) continue;
    if (address >= start && address < end) return address - start + offset;
  }
  return std::nullopt;
}

// Creates (and at once removes) a real uprobe, on a function of this binary that never runs:
// the privilege it takes depends on the kernel (since Linux 6.16 and the 2025 stable updates,
// upstream ba677dbe77af, CAP_SYS_ADMIN; before, CAP_PERFMON), which no capability list tells.
Check uprobe_creation_check(const DoctorOptions& o) {
  Check c{.name = "uprobe creation"};
  auto type = read_file(o.sys_root + "/bus/event_source/devices/uprobe/type");
  auto offset = own_file_offset(reinterpret_cast<uintptr_t>(&uprobe_check_target));
  if (!type || !offset) {
    c.verdict = Verdict::kWarn;
    c.detail = !type ? "not tried: no uprobe PMU" : "not tried: own code not found in maps";
    return c;
  }
  const std::string path = "/proc/self/exe";
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(std::strtoul(type->c_str(), nullptr, 10));
  attr.config1 = reinterpret_cast<uint64_t>(path.c_str());
  attr.config2 = *offset;
  attr.disabled = 1;
  long fd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    c.detail = "created (Go TLS can place its probes)";
    return c;
  }
  int err = errno;
  c.verdict = Verdict::kWarn;
  c.detail = "refused: " + errno_text(err) + " (Go TLS binaries are not instrumented)";
  c.fix = err == EACCES || err == EPERM
              ? "this kernel asks CAP_SYS_ADMIN for uprobes: --cap-add SYS_ADMIN "
                "(podman/docker), agent.uprobes=true (chart)"
              : "a kernel log (dmesg) may say more";
  return c;
}

// Which pid namespace the agent's /proc numbers processes in: the initial one (most nodes), or
// one of its own (kind, k3d, sysbox nodes), where the BPF programs translate the kernel's pids.
Check pid_namespace_check() {
  Check c{.name = "pid namespace"};
  const PidNamespace& ns = agent_pid_namespace();
  c.detail = ns.initial() ? "initial (the kernel's pids are the agent's)"
                          : ns.describe() +
                                " (nested, as on kind/k3d/sysbox nodes: the BPF programs "
                                "translate pids to this namespace's)";
  return c;
}

// Whether the CPU profiler can name the JavaScript frames of the node binaries running here,
// from their V8 heap (v8::read_process_v8_layout: read-only, as the profiler does). Only
// processes whose executable's file name starts with "node" are looked at, one per distinct
// executable and at most kMaxNodeBinaries of them; the profiler itself asks every process it
// samples. The reasons are given in full here (paths and values included); the metric label
// carries only the fixed reason.
Check js_frames_check(const DoctorOptions& o) {
  constexpr size_t kMaxNodeBinaries = 16;
  Check c{.name = "javascript frames"};
  std::map<std::pair<dev_t, ino_t>, std::string> binaries;  // executable → "path: verdict"
  size_t unsupported = 0;
  for (pid_t pid : ProcReader(o.proc_root).list_pids()) {
    if (binaries.size() >= kMaxNodeBinaries) break;
    const std::string exe = o.proc_root + "/" + std::to_string(pid) + "/exe";
    char buf[4096];
    const ssize_t n = readlink(exe.c_str(), buf, sizeof buf);
    if (n <= 0) continue;
    const std::string path(buf, static_cast<size_t>(n));
    if (!std::string_view(path).substr(path.rfind('/') + 1).starts_with("node")) continue;
    struct stat st {};
    if (stat(exe.c_str(), &st) != 0 || binaries.contains({st.st_dev, st.st_ino})) continue;
    auto layout = v8::read_process_v8_layout(o.proc_root, pid);
    if (!layout.ok()) ++unsupported;
    binaries[{st.st_dev, st.st_ino}] =
        path + ": " + (layout.ok() ? std::string("supported") : layout.error().message());
  }
  if (binaries.empty()) {
    c.detail = "no node process running (each sampled process is checked when profiled)";
    return c;
  }
  for (const auto& [id, line] : binaries) c.detail += (c.detail.empty() ? "" : "; ") + line;
  if (unsupported > 0) {
    c.verdict = Check::Verdict::kWarn;
    c.fix =
        "profiles name these binaries' JavaScript frames only from perf maps: start node with "
        "--perf-basic-prof, or use a 64-bit build without pointer compression that exports "
        "v8dbg_* symbols";
  }
  return c;
}

// Which uprobe links Go TLS uses here: what each instrumented binary costs in descriptors.
// Informational: single links work everywhere, at 2 descriptors per probe site.
Check uprobe_links_check() {
  const auto& support = uprobe_link_support();
  Check c{.name = "uprobe links"};
  c.detail = support.kind == UprobeLinkKind::kMulti
                 ? "uprobe_multi: 3 descriptors per instrumented Go binary"
                 : "single (" + support.why +
                       "): 2 descriptors per probe site, ~18 per "
                       "instrumented Go binary (uprobe_multi needs Linux 6.6)";
  return c;
}

// What one uprobe hit adds to a probed call here (measured on the agent's own functions): the
// per-call price a Go TLS workload pays, by the kind of probe site. Informational.
Check uprobe_cost_check() {
  Check c{.name = "uprobe hit cost"};
  auto costs = measure_uprobe_hit_costs();
  if (!costs.ok()) {
    c.verdict = Verdict::kWarn;
    c.detail = "not measured: " + costs.error().message();
    return c;
  }
  c.detail = std::to_string(std::lround(costs->emulated_ns)) +
             " ns at an emulated jump (Go TLS entry probes), " +
             std::to_string(std::lround(costs->single_step_ns)) +
             " ns at a single-stepped instruction (Read's RETs)";
  return c;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kWarn: return "warn";
    case Verdict::kFail: return "fail";
  }
  return "?";
}

// The table shouts failures so they stand out in a long list.
const char* verdict_label(Verdict v) {
  return v == Verdict::kFail ? "FAIL" : verdict_name(v);
}

}  // namespace

std::optional<KernelVersion> parse_kernel_version(std::string_view release) {
  auto v = parse_dotted_version(release);
  if (!v) return std::nullopt;
  return KernelVersion{v->major, v->minor, v->patch};
}

std::optional<uint64_t> parse_effective_caps(std::string_view status_text) {
  constexpr std::string_view kKey = "\nCapEff:";
  auto pos = status_text.find(kKey);
  if (pos == std::string_view::npos) return std::nullopt;
  auto rest = status_text.substr(pos + kKey.size());
  while (!rest.empty() && (rest.front() == '\t' || rest.front() == ' ')) rest.remove_prefix(1);
  uint64_t caps = 0;
  auto [next, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), caps, 16);
  if (ec != std::errc() || next == rest.data()) return std::nullopt;
  return caps;
}

std::optional<uint64_t> effective_caps_of_self() {
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0) return std::nullopt;
  return (uint64_t{data[1].effective} << 32) | data[0].effective;
}

std::string missing_capabilities_message(uint64_t effective, unsigned uid) {
  std::string lines, engine, chart;
  for (const auto& spec : kCaps) {
    if (!spec.required || holds(effective, spec.cap) || covered_by(effective, spec.cap)) continue;
    lines += std::string("  ") + spec.name + ": " + spec.why + "\n";
    engine += " --cap-add " + std::string(short_name(spec.name));
    chart += (chart.empty() ? "" : ", ") + std::string(short_name(spec.name));
  }
  if (lines.empty()) return "";
  std::string out = "missing capabilities:\n" + lines + "add them: podman/docker run" + engine +
                    "; chart: securityContext.capabilities.add: [" + chart + "]";
  if (uid != 0)
    out += std::string("\nthis process runs as uid ") + std::to_string(uid) + ": " + kNonRootNote;
  return out;
}

bool has_required_capabilities() {
  auto caps = effective_caps_of_self();
  if (!caps) return true;
  std::string message = missing_capabilities_message(*caps, ::geteuid());
  if (message.empty()) return true;
  (void)std::fprintf(stderr, "sonde-agent: %s\n", message.c_str());
  return false;
}

Check bpf_refusal_check(std::string name, int err, uint64_t effective, bool needs_perfmon) {
  Check c{.name = std::move(name), .verdict = Verdict::kFail};
  if (err == EPERM || err == EACCES) {
    std::string missing;
    for (int cap : {CAP_BPF, CAP_PERFMON}) {
      if (cap == CAP_PERFMON && !needs_perfmon) continue;
      if (holds(effective, cap) || covered_by(effective, cap)) continue;
      missing += std::string(missing.empty() ? "" : " and ") +
                 (cap == CAP_BPF ? "CAP_BPF" : "CAP_PERFMON");
    }
    if (!missing.empty()) {
      c.detail = "missing permission: the kernel refused it (" + errno_text(err) +
                 ") because this process lacks " + missing;
      c.fix = "grant " + missing + " (see the capability checks above)";
    } else {
      c.detail = "missing permission: refused (" + errno_text(err) +
                 ") although the capabilities are held";
      c.fix =
          "a seccomp profile or an LSM blocks bpf(2), or the capabilities are held in a "
          "user namespace only (rootless containers): run with seccomp Unconfined (the "
          "chart's setting; podman/docker: --security-opt seccomp=unconfined) in a rootful "
          "container";
    }
  } else if (err == EINVAL || err == kEnotsupp) {
    c.detail = "not supported by this kernel (" + errno_text(err) + ")";
    c.fix = "upgrade the kernel: the agent needs Linux 5.8+ built with CONFIG_BPF_SYSCALL";
  } else {
    c.detail = "probe failed: " + errno_text(err);
    c.fix = "a kernel log (dmesg) may say more";
  }
  return c;
}

std::vector<Check> run_doctor(const DoctorOptions& o) {
  std::vector<Check> checks;
  checks.push_back(kernel_check(o));
  checks.push_back(btf_check(o));
  for (auto& c : capability_checks(o)) checks.push_back(std::move(c));
  checks.push_back(pmu_check(o, "uprobe"));
  checks.push_back(pmu_check(o, "kprobe"));
  checks.push_back(tracefs_check(o));
  checks.push_back(cgroup_check(o));
  checks.push_back(pid_namespace_check());
  checks.push_back(js_frames_check(o));
  if (o.probe_kernel) {
    // libbpf prints its own diagnostics for failed probes; the checks say it more clearly.
    auto previous = libbpf_set_print(nullptr);
    // The probes run with this process's real privileges, whatever proc_root points at.
    uint64_t caps = effective_caps_of_self().value_or(0);
    checks.push_back(prog_type_check("kprobe/uprobe", BPF_PROG_TYPE_KPROBE, caps));
    checks.push_back(prog_type_check("perf_event", BPF_PROG_TYPE_PERF_EVENT, caps));
    checks.push_back(prog_type_check("tracepoint", BPF_PROG_TYPE_TRACEPOINT, caps));
    checks.push_back(map_type_check("ringbuf", BPF_MAP_TYPE_RINGBUF, caps));
    checks.push_back(map_type_check("lru_hash", BPF_MAP_TYPE_LRU_HASH, caps));
    checks.push_back(map_type_check("percpu_array", BPF_MAP_TYPE_PERCPU_ARRAY, caps));
    checks.push_back(uprobe_creation_check(o));
    checks.push_back(process_events_check());
    checks.push_back(process_cgroup_check());
    checks.push_back(uprobe_links_check());
    checks.push_back(uprobe_cost_check());
    for (const NodeChecks& feature : o.feature_checks) {
      for (Check& c : feature()) checks.push_back(std::move(c));
    }
    libbpf_set_print(previous);
  }
  return checks;
}

bool all_passed(const std::vector<Check>& checks) {
  for (const auto& c : checks) {
    if (c.verdict == Verdict::kFail) return false;
  }
  return true;
}

std::string render_table(const std::vector<Check>& checks) {
  size_t width = 5;
  for (const auto& c : checks) width = std::max(width, c.name.size());
  std::ostringstream out;
  auto pad = [&](const std::string& s) { return s + std::string(width - s.size() + 2, ' '); };
  out << pad("CHECK") << "STATUS  DETAIL\n";
  int failed = 0, warned = 0;
  for (const auto& c : checks) {
    std::string v = verdict_label(c.verdict);
    out << pad(c.name) << v << std::string(8 - v.size(), ' ') << c.detail << "\n";
    if (!c.fix.empty()) out << std::string(width + 10, ' ') << "fix: " << c.fix << "\n";
    failed += c.verdict == Verdict::kFail;
    warned += c.verdict == Verdict::kWarn;
  }
  out << "\n"
      << checks.size() << " checks: " << (checks.size() - failed - warned) << " passed, " << warned
      << " warnings, " << failed << " failed\n";
  out << (failed ? "The agent cannot run on this node until the failures are fixed.\n"
                 : "The agent can run on this node.\n");
  return out.str();
}

nlohmann::json to_json(const std::vector<Check>& checks) {
  auto list = nlohmann::json::array();
  for (const auto& c : checks) {
    nlohmann::json j{{"name", c.name}, {"status", verdict_name(c.verdict)}, {"detail", c.detail}};
    if (!c.fix.empty()) j["fix"] = c.fix;
    list.push_back(std::move(j));
  }
  return {{"ok", all_passed(checks)}, {"checks", std::move(list)}};
}

}  // namespace sonde::agent
