// Command-line options of sonde-operator, declared on CLI11 like every other sonde command.
#pragma once

#include <string>
#include <vector>

#include "common/cli.h"
#include "common/clock.h"
#include "common/result.h"

namespace sonde::op {

struct OperatorOptions {
  std::string kubeconfig;        // empty: in-cluster, then $KUBECONFIG, then ~/.kube/config
  std::string policy_namespace;  // empty: every namespace
  std::string report_namespace;  // empty: the operator's own namespace
  std::string metrics_address = "0.0.0.0:8080";
  int workers = 2;
  Duration report_ttl = std::chrono::minutes(3);
  cli::LogFlags log;
  bool leader_elect = true;
  std::string leader_election_id = "sonde-operator";  // the Lease's name
  std::string leader_election_namespace;              // empty: the operator's namespace
  std::string identity;                               // empty: hostname_pid
  Duration lease_duration = std::chrono::seconds(15);
  Duration renew_deadline = std::chrono::seconds(10);
  Duration retry_period = std::chrono::seconds(2);
};

// Declares every flag of sonde-operator on `app`, parsed into `options`.
void add_operator_flags(CLI::App& app, OperatorOptions& options);

// The same flags, for tests: parses `args` (without argv[0]); an error names the flag.
Result<OperatorOptions> parse_options(const std::vector<std::string>& args);

// "15s", "500ms", "2m", "1h".
Result<Duration> parse_duration(const std::string& text);

}  // namespace sonde::op
