#include "agent/cluster/cluster_main.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "agent/assembly/agent_flags.h"
#include "agent/assembly/agent_parts.h"
#include "agent/cluster/node_report.h"
#include "agent/cluster/policy_selector.h"
#include "agent/cluster/route_access.h"
#include "agent/cluster/selection_metrics.h"
#include "agent/doctor/doctor.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/health.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/kube/api_client.h"
#include "common/kube/client_config.h"
#include "common/kube/informer.h"
#include "common/kube/sonde_resources.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/version.h"

namespace sonde::agent {
namespace {

// How long start-up waits for the first policy and pod lists before instrumenting with what
// it has: an unreachable API server must not keep the agent from serving /metrics, and the
// informers keep trying (a late list triggers a re-selection).
constexpr auto kSyncTimeout = std::chrono::seconds(30);

// How long a node report or Lease request may stay without progress. cpprestsdk applies it to
// the sending and the answering phase apart, so a write to an API server that stopped answering
// fails after up to twice this, and the writer's next Lease renewal is not held up behind it.
constexpr auto kReportRequestTimeout = std::chrono::seconds(3);

struct Args {
  std::string kubeconfig;
  std::string node_name;
  std::string ns;
  std::string watch_namespace;
  AgentFlags agent;
  std::string token_audience = "sonde";
  bool metrics_authorization = false;
};

// The ClusterProfilingPolicy and Namespace informers that feed the selector, or none when
// disabled (an agent scoped to one namespace: cluster policies are not honoured then).
class ClusterPolicyInformers {
 public:
  ClusterPolicyInformers(kube::ApiClient& client, PolicySelector& selector, bool enabled) {
    if (!enabled) return;
    policies_ = std::make_unique<kube::Informer>(client, kube::kClusterProfilingPolicies,
                                                 kube::ReflectorOptions{});
    namespaces_ = std::make_unique<kube::Informer>(client, kube::kNamespaces,
                                                   kube::ReflectorOptions{}, trim_namespace);
    policies_->add_handlers(selector.cluster_policy_handlers());
    namespaces_->add_handlers(selector.namespace_handlers());
  }
  void start() {
    if (!policies_) return;
    namespaces_->start();
    policies_->start();
  }
  void stop() {
    if (!policies_) return;
    policies_->stop();
    namespaces_->stop();
  }
  bool has_synced() const {
    return !policies_ || (policies_->has_synced() && namespaces_->has_synced());
  }

 private:
  std::unique_ptr<kube::Informer> policies_;
  std::unique_ptr<kube::Informer> namespaces_;
};

// nullopt: go on; otherwise the exit code.
std::optional<int> parse_args(int argc, char** argv, Args& a) {
  CLI::App app{
      "Runs the agent in a Kubernetes cluster (the default when started without arguments in a "
      "pod): watches ProfilingPolicies, ClusterProfilingPolicies and the pods of this node, "
      "instruments the containers the policies select, serves Prometheus metrics and writes "
      "this node's ProfilingNodeReport.",
      "sonde-agent --cluster"};
  app.add_option("--kubeconfig", a.kubeconfig,
                 "kubeconfig (default: in-cluster service account, then $KUBECONFIG, then "
                 "~/.kube/config)");
  app.add_option("--node-name", a.node_name, "this node (default $NODE_NAME)")
      ->envname("NODE_NAME");
  app.add_option("--namespace", a.ns,
                 "where the node report and Lease are written, sonde's namespace (default "
                 "$POD_NAMESPACE, then the kubeconfig's namespace)")
      ->envname("POD_NAMESPACE");
  app.add_option("--watch-namespace", a.watch_namespace,
                 "watch ProfilingPolicies in this namespace only, as the operator does when "
                 "scoped, and no ClusterProfilingPolicies (default $SONDE_WATCH_NAMESPACE; "
                 "empty: all, and ClusterProfilingPolicies)")
      ->envname("SONDE_WATCH_NAMESPACE");
  add_agent_flags(app, a.agent, "0.0.0.0:9464", "info", /*in_cluster=*/true);
  app.add_option("--token-audience", a.token_audience,
                 "the audience the bearer tokens of /debug/ requests must be issued for (kubectl "
                 "create token SA --audience sonde), so that a token minted for the API server or "
                 "another service is refused; empty: the API server's own audience")
      ->capture_default_str();
  app.add_flag("--metrics-authorization", a.metrics_authorization,
               "serve /metrics only to a bearer token whose user may get the non-resource URL "
               "/metrics (a TokenReview for the API server's audience, then a "
               "SubjectAccessReview, as kube-rbac-proxy asks; decisions cached 2 minutes, one "
               "review at a time); default: to whoever reaches the port");
  if (auto exit_code = cli::parse(app, argc, argv)) return exit_code;
  return check_agent_flags(a.agent, "sonde-agent --cluster");
}

}  // namespace

int cluster_main(int argc, char** argv) {
  Args parsed;
  if (auto exit_code = parse_args(argc, argv, parsed)) return *exit_code;
  const Args* args = &parsed;
  cli::apply(args->agent.log);
  if (args->node_name.empty()) {
    (void)std::fprintf(
        stderr,
        "sonde-agent: no node name: pass --node-name or set NODE_NAME (in a pod, from "
        "the downward API: fieldRef spec.nodeName)\n");
    return 2;
  }
  if (!has_required_capabilities()) return 1;
  auto config = kube::load_client_config(args->kubeconfig);
  if (!config.ok()) {
    log::error("cannot configure the Kubernetes client", {{"error", config.error().message()}});
    return 1;
  }
  const std::string ns = args->ns.empty() ? config->default_namespace : args->ns;
  if (ns.empty()) {
    (void)std::fprintf(stderr,
                       "sonde-agent: no namespace for the node report: pass --namespace or set "
                       "POD_NAMESPACE\n");
    return 2;
  }
  const std::string server = config->server;
  const std::string user_agent = std::string("sonde-agent/") + kVersion;
  // Fired once the main loop ends (SIGTERM, SIGINT): it cancels every API call in flight, rate
  // limit wait and retry sleep of both clients, so a hung API server cannot hold up the exit
  // by a request timeout (30 s) times the retries. Declared before the clients that take it.
  kube::StopSignal api_stop;
  kube::ApiClient client(*config, {.user_agent = user_agent, .stop = &api_stop});
  // Reviews of /debug/ requests' tokens: single short attempts (the requester gets a 503 and
  // may retry), their own rate limit so a burst of profile requests never delays the informers.
  kube::ApiClient review_client(*config, {.user_agent = user_agent,
                                          .request_timeout = kReportRequestTimeout,
                                          .retry = {.max_attempts = 1},
                                          .qps = 20,
                                          .burst = 40,
                                          .stop = &api_stop});
  ApiReviewer reviewer(review_client);
  RouteAccess route_access(reviewer, {.audience = args->token_audience});
  // Prometheus scrapes with an ordinary service account token, every 30 s or so: a longer cache,
  // and one review at a time so that a flood of unknown tokens holds one server thread at most.
  RouteAccess metrics_access(
      reviewer, {.asks = RouteAccess::Asks::kPath, .ttl_ns = 120'000'000'000, .max_in_flight = 1});
  // The report writer retries with its own backoff: single short attempts.
  kube::ApiClient report_client(std::move(config).value(),
                                {.user_agent = user_agent,
                                 .request_timeout = kReportRequestTimeout,
                                 .retry = {.max_attempts = 1},
                                 .stop = &api_stop});

  // The selector may ask for a re-selection before the runtime exists (the first lists) and
  // after it is gone (informers stopping): the pointer says whether there is one to ask.
  std::atomic<AgentRuntime*> runtime_ptr{nullptr};
  PolicySelector selector([&runtime_ptr] {
    if (AgentRuntime* r = runtime_ptr.load()) r->request_reselect();
  });
  kube::Informer policies(client, kube::kProfilingPolicies, {.ns = args->watch_namespace});
  // Scoped like the policies: a policy selects pods of its own namespace only, so a scoped agent
  // needs (and the chart grants, in a Role) the pods of the watched namespace alone.
  kube::Informer pods(
      client, kube::kPods,
      {.ns = args->watch_namespace, .field_selector = "spec.nodeName=" + args->node_name},
      trim_pod);
  policies.add_handlers(selector.policy_handlers());
  pods.add_handlers(selector.pod_handlers());
  // ClusterProfilingPolicies and the namespaces' labels they select by: cluster-wide reads an
  // agent scoped to one namespace has no permission for (the chart grants none then).
  ClusterPolicyInformers cluster_policies(client, selector, args->watch_namespace.empty());

  StopSignals stop;
  log::info("starting in-cluster mode",
            {{"node", args->node_name},
             {"namespace", ns},
             {"policy_namespace", args->watch_namespace.empty() ? "(all)" : args->watch_namespace},
             {"server", server}});
  const uint64_t informers_started_ns = monotonic_ns();
  policies.start();
  pods.start();
  cluster_policies.start();
  const auto deadline = StopSignals::Clock::now() + kSyncTimeout;
  while (!(policies.has_synced() && pods.has_synced() && cluster_policies.has_synced()) &&
         !stop.requested() && StopSignals::Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (stop.requested()) {
    log::info("shutting down before the first lists", {{"signal", stop.signal()}});
    api_stop.stop();
    return 0;
  }
  if (!policies.has_synced() || !pods.has_synced() || !cluster_policies.has_synced()) {
    log::warn("policies or pods not listed yet; starting with what is known",
              {{"policies_synced", policies.has_synced()},
               {"cluster_policies_synced", cluster_policies.has_synced()},
               {"pods_synced", pods.has_synced()}});
  }

  RuntimeOptions options;
  apply_agent_flags(args->agent, options);
  options.node_name = args->node_name;
  options.debug_guard = [&route_access](const HttpRequest& r) { return route_access.check(r); };
  if (args->metrics_authorization) {
    options.metrics_guard = [&metrics_access](const HttpRequest& r) {
      return metrics_access.check(r);
    };
  }
  // Policies choose per container what is used: every feature loads (AgentMode). The client
  // and the pod informer outlive the runtime, whose features post Events on pods with them.
  auto runtime =
      AgentRuntime::start(options, selector,
                          args->agent.features.parts(AgentMode{
                              .in_cluster = true,
                              .api = &client,
                              .pod = [&pods](const std::string& key) { return pods.get(key); }}),
                          real_clock());
  if (!runtime.ok()) {
    log::error("cannot start the agent", {{"error", runtime.error().message()}});
    return 1;
  }
  AgentRuntime& rt = **runtime;
  runtime_ptr.store(&rt);
  rt.add_collector([&selector, &route_access, &metrics_access, node = args->node_name] {
    std::vector<prometheus::MetricFamily> out{policy_selection_family(selector.policies(), node)};
    auto by_result = [](prometheus::MetricFamily& family, const RouteAccess::Stats& st) {
      for (const auto& [result, n] : {std::pair{"allowed", st.allowed},
                                      {"unauthenticated", st.unauthenticated},
                                      {"forbidden", st.forbidden},
                                      {"unavailable", st.unavailable},
                                      {"throttled", st.throttled}}) {
        add_sample(family, {{"result", result}}, static_cast<double>(n));
      }
    };
    const RouteAccess::Stats st = route_access.stats();
    auto requests = counter_family("sonde_agent_debug_requests_total",
                                   "Requests to /debug/ routes (CPU profiles) by what the "
                                   "token review decided.");
    by_result(requests, st);
    const RouteAccess::Stats ms = metrics_access.stats();
    auto scrapes = counter_family("sonde_agent_metrics_requests_total",
                                  "With --metrics-authorization: requests to /metrics by what "
                                  "the token review decided (allowed counts the scrapes served).");
    by_result(scrapes, ms);
    auto reviews = counter_family("sonde_agent_access_reviews_total",
                                  "TokenReviews and SubjectAccessReviews sent for /debug/ "
                                  "requests (decisions cached 10 s) and, with "
                                  "--metrics-authorization, /metrics (cached 2 minutes).");
    add_sample(reviews, {}, static_cast<double>(st.reviews + ms.reviews));
    out.push_back(std::move(requests));
    out.push_back(std::move(scrapes));
    out.push_back(std::move(reviews));
    return out;
  });

  // Not ready until both caches listed once: until then selections miss policies or pods.
  rt.health().add_gate(
      "informers", HealthRegistry::Probe::kReadiness,
      [&policies, &pods, &cluster_policies] {
        return policies.has_synced() && pods.has_synced() && cluster_policies.has_synced();
      },
      "policies and pods not listed yet", informers_started_ns);

  const AgentFacts facts = read_agent_facts();
  NodeReportWriter writer(report_client, args->node_name, ns, [&] {
    return report_status(facts, build_policy_reports(selector.policies(), rt.outcomes()));
  });
  writer.report_health(rt.health());
  std::thread writer_thread([&] { writer.run(api_stop); });

  Status st = rt.run(stop);

  // Everything that calls into the runtime stops before it goes; nothing waits for the API.
  api_stop.stop();
  writer_thread.join();
  runtime_ptr.store(nullptr);
  policies.stop();
  cluster_policies.stop();
  pods.stop();
  if (!st.ok()) {
    log::error("agent stopped", {{"error", st.error().message()}});
    return 1;
  }
  return 0;
}

}  // namespace sonde::agent
