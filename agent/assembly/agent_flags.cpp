#include "agent/assembly/agent_flags.h"

#include <map>

namespace sonde::agent {

void apply_agent_flags(const AgentFlags& flags, RuntimeOptions& runtime, FeatureOptions& features) {
  runtime.proc_root = flags.proc_root;
  if (!flags.metrics_address.empty()) runtime.metrics_address = flags.metrics_address;
  runtime.debug_address = flags.debug_address;
  runtime.health_address = flags.health_address;
  runtime.tls_cert_file = flags.tls_cert_file;
  runtime.tls_key_file = flags.tls_key_file;
  features.wait_source = flags.wait_source;
  features.nodejs_metrics = flags.nodejs_metrics;
  features.go_tls_perform_ret = flags.go_tls_perform_ret;
  features.max_go_tls_binaries = flags.max_go_tls_binaries;
  features.go_tls_keep_probes_seconds = flags.go_tls_keep_probes_seconds;
  if (flags.max_cpu_frequency_hz != 0) features.cpu.max_frequency_hz = flags.max_cpu_frequency_hz;
}

void add_agent_flags(CLI::App& app, AgentFlags& flags, const std::string& metrics_default,
                     const std::string& level_default) {
  app.add_option("--metrics-address", flags.metrics_address,
                 "host:port for /metrics (default " + metrics_default + ")");
  app.add_option("--debug-address", flags.debug_address,
                 "host:port for the /debug/ routes (CPU profiles), e.g. 127.0.0.1:9465 to reach "
                 "them only from inside the agent's network namespace (kubectl port-forward); "
                 "default: the metrics address");
  app.add_option("--health-address", flags.health_address,
                 "host:port for /healthz and /readyz on a listener of their own, which slow "
                 "clients of the metrics port cannot starve (point kubelet's probes here); "
                 "default: only on the metrics address");
  auto* cert = app.add_option(
      "--tls-cert-file", flags.tls_cert_file,
      "serve the metrics and --debug-address ports over TLS only (1.2 and later), presenting "
      "this PEM certificate (intermediates after it); read again when it or the key changes, "
      "as a mounted Secret does on renewal. The health address stays plain HTTP (it says "
      "nothing but ok)");
  auto* key = app.add_option("--tls-private-key-file", flags.tls_key_file,
                             "the PEM private key of --tls-cert-file");
  cert->needs(key);
  key->needs(cert);
  app.add_option("--proc-root", flags.proc_root, "the host's /proc")->capture_default_str();
  cli::add_log_flags(app, flags.log, level_default);
  static const std::map<std::string, LoopProbes::WaitSource> kSources = {
      {"auto", LoopProbes::WaitSource::kAuto},
      {"fentry", LoopProbes::WaitSource::kFentry},
      {"epoll-tracepoints", LoopProbes::WaitSource::kEpollTracepoints},
      {"syscalls", LoopProbes::WaitSource::kSyscallTracepoints},
      {"libc-uprobes", LoopProbes::WaitSource::kLibcUprobes}};
  app.add_option_function<std::string>(
         "--wait-source",
         [&flags](const std::string& name) { flags.wait_source = kSources.at(name); },
         "the kernel hook measuring event-loop waits: auto (fentry where the kernel has BPF "
         "trampolines, else libc-uprobes; neither costs processes not selected anything), "
         "fentry, libc-uprobes (uprobes on the C library's epoll functions of each selected "
         "process only), or, only when asked, epoll-tracepoints or syscalls (syscall "
         "tracepoints: they slow every system call of every process on the node) (default "
         "auto)")
      ->check(CLI::IsMember({"auto", "fentry", "epoll-tracepoints", "syscalls", "libc-uprobes"}));
  static const std::map<std::string, NodejsMetrics> kNodejsMetrics = {
      {"both", NodejsMetrics::kBoth},
      {"sonde", NodejsMetrics::kSonde},
      {"otel", NodejsMetrics::kOtel}};
  app.add_option_function<std::string>(
         "--nodejs-metrics",
         [&flags](const std::string& name) { flags.nodejs_metrics = kNodejsMetrics.at(name); },
         "which per-container Node.js event-loop metrics are exported: sonde "
         "(container_nodejs_event_loop_*), otel (OpenTelemetry's runtime metrics, "
         "nodejs_eventloop_*: time, utilization, delay) or both (default both)")
      ->check(CLI::IsMember({"both", "sonde", "otel"}));
  app.add_flag(
      "--go-tls-perform-ret", flags.go_tls_perform_ret,
      "let the Go TLS probes on (*Conn).Read's RETs perform the ret themselves (they write "
      "the Go program's instruction and stack pointers) where the kernel allows uprobe "
      "register writes, instead of the kernel single-stepping it: cheaper per call, but "
      "untested on any kernel sonde was tested on ('sonde-agent doctor' says whether this "
      "kernel allows it); off by default");
  app.add_option("--max-go-tls-binaries", flags.max_go_tls_binaries,
                 "Go TLS binaries instrumented at once on this node; a process of one more is "
                 "not instrumented (LimitExceeded, sonde_agent_gotls_not_instrumented_total)")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  app.add_option("--go-tls-keep-probes-seconds", flags.go_tls_keep_probes_seconds,
                 "how long a Go TLS binary keeps its uprobes after its last process exits, so "
                 "a program run again (a CronJob, a CLI tool) is counted from its first call; "
                 "kept binaries give way, oldest first, when a new one needs their descriptors "
                 "or --max-go-tls-binaries slot; 0 detaches at the last exit")
      ->check(CLI::Range(uint64_t{0}, uint64_t{86400}))
      ->capture_default_str();
  app.add_option("--max-cpu-frequency-hz", flags.max_cpu_frequency_hz,
                 "the node's cap on CPU sampling: a policy (or the config) asking for more is "
                 "sampled at this rate, and says so (sonde_cpu_profile_capped_processes) "
                 "(default " +
                     std::to_string(kClusterMaxCpuFrequencyHz) + " in-cluster, " +
                     std::to_string(stacks::CpuSampler::kMaxFrequencyHz) + " standalone)")
      ->check(CLI::Range(uint32_t{1}, stacks::CpuSampler::kMaxFrequencyHz));
}

}  // namespace sonde::agent
