#include "operator/options.h"

#include <charconv>

namespace sonde::op {
namespace {

// A duration flag: checked by parse_duration, stored in `out`.
void add_duration(CLI::App& app, const std::string& name, Duration& out, const std::string& help) {
  app.add_option_function<std::string>(
         name, [&out](const std::string& v) { out = *parse_duration(v); }, help)
      ->check(CLI::Validator(
          [](std::string& v) {
            auto d = parse_duration(v);
            return d.ok() ? std::string() : d.error().message();
          },
          "DURATION"));
}

}  // namespace

Result<Duration> parse_duration(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr == text.data() || value < 0) {
    return Error("invalid duration \"" + text + "\" (use e.g. 15s, 500ms)");
  }
  const std::string unit(ptr, end);
  if (unit == "ms") return Duration(std::chrono::milliseconds(value));
  if (unit == "s") return Duration(std::chrono::seconds(value));
  if (unit == "m") return Duration(std::chrono::minutes(value));
  if (unit == "h") return Duration(std::chrono::hours(value));
  return Error("invalid duration \"" + text + "\" (units: ms, s, m, h)");
}

void add_operator_flags(CLI::App& app, OperatorOptions& options) {
  app.add_option("--kubeconfig", options.kubeconfig,
                 "kubeconfig (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)");
  app.add_option("--namespace", options.policy_namespace,
                 "watch ProfilingPolicies in this namespace only, and no ClusterProfilingPolicies "
                 "(default: every namespace and the cluster policies)");
  app.add_option("--report-namespace", options.report_namespace,
                 "where agents write node reports (default: the operator's namespace)");
  app.add_option("--metrics-address", options.metrics_address, "/metrics, /healthz, /readyz")
      ->capture_default_str();
  app.add_option("--workers", options.workers, "concurrent reconciles")
      ->check(cli::positive())
      ->capture_default_str();
  cli::add_log_flags(app, options.log);
  add_duration(app, "--report-ttl", options.report_ttl,
               "nodes whose node Lease is older than this are stale (default 3m; 0s disables)");
  app.add_flag("--leader-elect{true}", options.leader_elect,
               "Lease leader election; --leader-elect=false runs without (default true)");
  app.add_option("--leader-election-id", options.leader_election_id, "the Lease's name")
      ->capture_default_str();
  app.add_option("--leader-election-namespace", options.leader_election_namespace,
                 "the Lease's namespace (default: the operator's)");
  app.add_option("--leader-election-identity", options.identity,
                 "this replica's identity (default: hostname_pid)");
  add_duration(app, "--lease-duration", options.lease_duration, "default 15s");
  add_duration(app, "--renew-deadline", options.renew_deadline, "default 10s");
  add_duration(app, "--retry-period", options.retry_period, "default 2s");
}

Result<OperatorOptions> parse_options(const std::vector<std::string>& args) {
  OperatorOptions options;
  CLI::App app{"", "sonde-operator"};
  add_operator_flags(app, options);
  cli::ParseOutcome outcome = cli::parse_args(app, args);
  if (outcome.exit_code) return Error(outcome.err.empty() ? outcome.out : outcome.err);
  return options;
}

}  // namespace sonde::op
