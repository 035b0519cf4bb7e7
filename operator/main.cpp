// sonde-operator: reconciles ProfilingPolicy objects into status (issue 7). See --help.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "common/kube/api_client.h"
#include "common/kube/leader_election.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/version.h"
#include "operator/controller.h"
#include "operator/http_server.h"
#include "operator/options.h"

namespace {

using namespace sonde;

std::string default_identity() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) (void)std::snprintf(host, sizeof(host), "unknown");
  return std::string(host) + "_" + std::to_string(getpid());
}

int run(const op::OperatorOptions& options) {
  auto config = kube::load_client_config(options.kubeconfig);
  if (!config.ok()) {
    log::error("no Kubernetes API configuration", {{"error", config.error().message()}});
    return 1;
  }
  const std::string own_namespace =
      config->default_namespace.empty() ? "default" : config->default_namespace;
  const std::string identity = options.identity.empty() ? default_identity() : options.identity;

  // Declared before the clients that take it; fired on SIGTERM/SIGINT or leadership loss.
  kube::StopSignal stop;

  kube::ApiClientOptions client_options;
  client_options.user_agent = std::string("sonde-operator/") + kVersion + " (" + identity + ")";
  // Above client-go's 5/10 default, as kube-controller-manager's are: a start-up or resync
  // writes one status per policy, and 1,000 policies at 5/s would take minutes to converge.
  client_options.qps = 50;
  client_options.burst = 100;
  client_options.stop = &stop;
  kube::ApiClient client(*config, client_options);

  kube::LeaderElectionConfig election;
  election.lease_name = options.leader_election_id;
  election.lease_namespace =
      options.leader_election_namespace.empty() ? own_namespace : options.leader_election_namespace;
  election.identity = identity;
  election.lease_duration = options.lease_duration;
  election.renew_deadline = options.renew_deadline;
  election.retry_period = options.retry_period;
  if (options.leader_elect) {
    if (Status valid = kube::validate(election); !valid.ok()) {
      log::error("invalid leader election settings", {{"error", valid.error().message()}});
      return 2;
    }
  }
  // Lease calls must fail fast rather than retry past the renew deadline. The elector bounds
  // each renewal itself and passes the stop signal per call: releasing the Lease on the way
  // out must not be cancelled by the stop that asked for it.
  kube::ApiClientOptions lease_options = client_options;
  lease_options.stop = nullptr;
  lease_options.retry.max_attempts = 1;
  lease_options.request_timeout =
      std::max<Duration>(std::chrono::milliseconds(500), options.renew_deadline / 2);
  kube::ApiClient lease_client(*config, lease_options);

  op::OperatorMetrics metrics;
  op::ControllerOptions controller_options;
  controller_options.policy_namespace = options.policy_namespace;
  controller_options.report_namespace =
      options.report_namespace.empty() ? own_namespace : options.report_namespace;
  controller_options.workers = options.workers;
  controller_options.report_ttl = options.report_ttl;
  controller_options.identity = identity;
  op::Controller controller(client, controller_options, metrics);

  std::unique_ptr<kube::LeaderElector> elector;
  if (options.leader_elect) elector = std::make_unique<kube::LeaderElector>(lease_client, election);
  op::HttpServer http(
      options.metrics_address, metrics, [&] { return controller.synced(); },
      [&]() -> std::string {
        if (elector && !elector->healthy()) {
          return "leading without renewing the Lease for longer than the renew deadline";
        }
        return controller.health_problem();
      });
  if (Status listening = http.start(); !listening.ok()) {
    log::error("cannot serve metrics", {{"error", listening.error().message()}});
    return 1;
  }

  StopSignals signals;
  std::atomic<bool> done{false};
  std::thread signal_watch([&] {
    while (!done.load() && !signals.requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    stop.stop();
  });

  log::info("starting", {{"version", kVersion},
                         {"identity", identity},
                         {"server", config->server},
                         {"policy_namespace",
                          options.policy_namespace.empty() ? "(all)" : options.policy_namespace},
                         {"report_namespace", controller_options.report_namespace}});
  controller.start();

  std::thread workers;
  bool lost = false;
  auto lead = [&] {
    metrics.set_leader(true);
    workers = std::thread([&] { controller.run_workers(stop); });
  };
  if (elector) {
    // Stopping at once cancels the workers' writes in flight: none lands after the lease.
    lost = elector->run(stop, {lead,
                               [&] {
                                 metrics.set_leader(false);
                                 stop.stop();
                               },
                               [](const std::string& leader) {
                                 log::info("leader observed", {{"leader", leader}});
                               }});
    // Whether lost or stopped, this replica must not act any more.
    stop.stop();
  } else {
    lead();
    stop.sleep_for(real_clock(), std::chrono::hours(24 * 365 * 100));
  }
  if (workers.joinable()) workers.join();
  done.store(true);
  signal_watch.join();
  http.stop();
  if (lost) {
    log::error("exiting: leadership lost");
    return 1;
  }
  log::info("stopped");
  return 0;
}

int operator_main(int argc, char** argv) {
  op::OperatorOptions options;
  CLI::App app{
      "Reconciles ProfilingPolicy objects into status from the agents' ProfilingNodeReports, "
      "and serves /metrics, /healthz and /readyz.",
      "sonde-operator"};
  op::add_operator_flags(app, options);
  app.set_version_flag("-V,--version", std::string("sonde-operator ") + kVersion);
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;
  cli::apply(options.log);
  return run(options);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return operator_main(argc, argv);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "sonde-operator: %s\n", e.what());
  } catch (...) {
    (void)std::fprintf(stderr, "sonde-operator: unknown exception\n");
  }
  return 1;
}
