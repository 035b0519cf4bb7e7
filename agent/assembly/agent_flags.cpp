#include "agent/assembly/agent_flags.h"

#include <cstdio>

namespace sonde::agent {

void apply_agent_flags(const AgentFlags& flags, RuntimeOptions& runtime) {
  runtime.proc_root = flags.proc_root;
  if (!flags.metrics_address.empty()) runtime.metrics_address = flags.metrics_address;
  runtime.debug_address = flags.debug_address;
  runtime.health_address = flags.health_address;
  runtime.tls_cert_file = flags.tls_cert_file;
  runtime.tls_key_file = flags.tls_key_file;
}

std::optional<int> check_agent_flags(const AgentFlags& flags, const std::string& command) {
  if (auto st = flags.features.check_flags(); !st.ok()) {
    (void)std::fprintf(stderr, "%s: --%s\n", command.c_str(), st.error().message().c_str());
    return 2;
  }
  return std::nullopt;
}

void add_agent_flags(CLI::App& app, AgentFlags& flags, const std::string& metrics_default,
                     const std::string& level_default, bool in_cluster) {
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
  flags.features.add_flags(app, in_cluster);
}

}  // namespace sonde::agent
