#include "agent/kernel/uprobe_cost.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "common/clock.h"
#include "uprobe_cost.skel.h"

#if defined(__x86_64__)
// The probe targets: a jump to the next instruction (emulated by the kernel's uprobe code, as
// the `jbe` of Go's stack check is) and a `cmp` (copied out of line and single-stepped, as most
// instructions are). Assembly, so the compiler decides neither their first instruction nor
// whether they are called.
asm(R"(
  .text
  .globl sonde_uprobe_cost_emulated
  .type sonde_uprobe_cost_emulated, @function
sonde_uprobe_cost_emulated:
  jmp 1f
1:
  ret
  .size sonde_uprobe_cost_emulated, .-sonde_uprobe_cost_emulated
  .globl sonde_uprobe_cost_stepped
  .type sonde_uprobe_cost_stepped, @function
sonde_uprobe_cost_stepped:
  cmp %rsp, %rax
  ret
  .size sonde_uprobe_cost_stepped, .-sonde_uprobe_cost_stepped
)");
extern "C" void sonde_uprobe_cost_emulated();
extern "C" void sonde_uprobe_cost_stepped();
#endif

namespace sonde::agent {
namespace {

using Target = void (*)();

// The offset in the agent's executable of the code at `address` (from /proc/self/maps).
Result<uint64_t> file_offset_of(const void* address) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return errno_error("read /proc/self/exe", errno);
  exe[n] = '\0';
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uint64_t>(address);
  while (std::getline(maps, line)) {
    uint64_t start = 0, end = 0, offset = 0;
    char path[4096] = "";
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %4095s", &start,
                    &end, &offset, path) < 3) {
      continue;
    }
    if (at >= start && at < end && std::string(path) == exe) return at - start + offset;
  }
  return Error("the probe target is not in a mapping of " + std::string(exe), ENOENT);
}

// Nanoseconds per call of `target`, the least of three runs of `calls` (the least is the one
// the scheduler disturbed least).
double ns_per_call(Target target, int calls) {
  volatile Target call = target;  // through memory: no call is folded away
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const uint64_t start = monotonic_ns();
    for (int i = 0; i < calls; ++i) call();
    const double ns = static_cast<double>(monotonic_ns() - start) / calls;
    best = run == 0 ? ns : std::min(best, ns);
  }
  return best;
}

}  // namespace

Result<UprobeHitCosts> measure_uprobe_hit_costs(int calls) {
#if defined(__x86_64__)
  std::unique_ptr<uprobe_cost_bpf, decltype(&uprobe_cost_bpf__destroy)> skel(
      uprobe_cost_bpf__open_and_load(), uprobe_cost_bpf__destroy);
  if (!skel) return errno_error("uprobe cost: load the counting program", errno);
  auto cost_of = [&](Target target, const char* what) -> Result<double> {
    ASSIGN_OR_RETURN(uint64_t offset, file_offset_of(reinterpret_cast<const void*>(target)));
    const double bare = ns_per_call(target, calls);
    skel->bss->hits = 0;
    bpf_link* raw = bpf_program__attach_uprobe(skel->progs.count_hit, false, 0 /* this process */,
                                               "/proc/self/exe", offset);
    if (raw == nullptr) return errno_error(std::string("uprobe cost: attach at ") + what, errno);
    const BpfLink link(raw);
    const double probed = ns_per_call(target, calls);
    const uint64_t hits = skel->bss->hits;
    if (hits != 3 * static_cast<uint64_t>(calls)) {
      return Error(std::string("uprobe cost: the probe at ") + what + " fired " +
                       std::to_string(hits) + " times for " + std::to_string(3 * calls) + " calls",
                   EIO);
    }
    return std::max(0.0, probed - bare);
  };
  UprobeHitCosts costs;
  ASSIGN_OR_RETURN(costs.emulated_ns, cost_of(sonde_uprobe_cost_emulated, "a jump"));
  ASSIGN_OR_RETURN(costs.single_step_ns, cost_of(sonde_uprobe_cost_stepped, "a cmp"));
  return costs;
#else
  (void)calls;
  return Error("uprobe cost: measured on x86-64 only", ENOTSUP);
#endif
}

}  // namespace sonde::agent
