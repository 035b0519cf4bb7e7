#include <unistd.h>

#include <string>

#include "agent/nodejs/libc_wait_hooks.h"
#include "agent/nodejs/loop_probes.h"
#include "agent/nodejs/nodejs_module.h"
#include "agent/symbols/probe_target_cache.h"

namespace sonde::agent {
namespace {

using Verdict = Check::Verdict;

// Loads the Node.js wait hooks the way the agent will (--wait-source auto) and reports which
// one the kernel took and what it costs processes the agent does not select. Where that is the
// per-process C library uprobes (no BPF trampolines), it also attaches them to this process
// alone: the attach, not the load, is what needs the uprobe privilege.
Check event_loop_hook_check() {
  using Source = LoopProbes::WaitSource;
  Check c{.name = "event-loop wait hook"};
  auto probes = LoopProbes::load(Source::kAuto);
  if (!probes.ok()) {
    c.verdict = Verdict::kFail;
    c.detail = probes.error().message();
    c.fix = "fix the failures above; Node.js event-loop metrics need this hook";
    return c;
  }
  const Source source = (*probes)->source();
  c.detail = std::string((*probes)->wait_source()) +
             "; cost to processes not selected: " + LoopProbes::wait_source_cost(source);
  if (source == Source::kLibcUprobes) {
    symbols::ProbeTargetCache cache(4);
    LibcWaitHooks hooks(**probes, cache);
    auto hooked = hooks.hook(getpid(), 0);
    if (!hooked.ok()) {
      c.verdict = Verdict::kFail;
      c.detail += "; attaching to this process failed: " + hooked.error().message();
      c.fix =
          "no BPF trampolines here, so each selected Node.js process's C library is probed: give "
          "the agent uprobes (CAP_SYS_ADMIN; the chart's agent.uprobes: true), or accept a tax "
          "on every system call of the node with --wait-source epoll-tracepoints";
      return c;
    }
    c.detail += " (no BPF trampolines here; attached to " + hooked->library + " for this process)";
    hooks.unhook(getpid());
  }
  return c;
}

}  // namespace

std::vector<Check> NodejsModule::node_checks() const {
  return {event_loop_hook_check()};
}

}  // namespace sonde::agent
