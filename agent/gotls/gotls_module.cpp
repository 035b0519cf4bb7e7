#include "agent/gotls/gotls_module.h"

#include "common/cli.h"

namespace sonde::agent {

void GoTlsModule::add_flags(CLI::App& app, bool /*in_cluster*/) {
  app.add_flag(
      "--go-tls-perform-ret", perform_ret_,
      "let the Go TLS probes on (*Conn).Read's RETs perform the ret themselves (they write "
      "the Go program's instruction and stack pointers) where the kernel allows uprobe "
      "register writes, instead of the kernel single-stepping it: cheaper per call, but "
      "untested on any kernel sonde was tested on ('sonde-agent doctor' says whether this "
      "kernel allows it); off by default");
  app.add_option("--max-go-tls-binaries", max_binaries_,
                 "Go TLS binaries instrumented at once on this node; a process of one more is "
                 "not instrumented (LimitExceeded, sonde_agent_gotls_not_instrumented_total)")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--go-tls-keep-probes-seconds", keep_probes_seconds_,
                 "how long a Go TLS binary keeps its uprobes after its last process exits, so "
                 "a program run again (a CronJob, a CLI tool) is counted from its first call; "
                 "kept binaries give way, oldest first, when a new one needs their descriptors "
                 "or --max-go-tls-binaries slot; 0 detaches at the last exit")
      ->check(CLI::Range(uint64_t{0}, uint64_t{86400}))
      ->capture_default_str();
}

Result<std::unique_ptr<GoTlsFeature>> GoTlsModule::load(const RuntimeServices& s,
                                                        const AgentMode& mode) const {
  return GoTlsFeature::load(s.cache, s.proc, s.series_grace_ns(), s.node, mode.in_cluster,
                            perform_ret_, max_binaries_, keep_probes_seconds_ * 1'000'000'000);
}

}  // namespace sonde::agent
