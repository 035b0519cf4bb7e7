#include "operator/controller.h"

#include <set>
#include <thread>

#include "common/crd/profiling_policy.h"
#include "common/log.h"
#include "common/rfc3339.h"
#include "operator/policy_status.h"
#include "operator/resources.h"

namespace sonde::op {

using kube::Json;
using kube::ObjectPtr;

Controller::Controller(kube::ApiClient& client, ControllerOptions options, OperatorMetrics& metrics,
                       const Clock& clock)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      clock_(clock),
      queue_(clock),
      events_(client_, "sonde-operator", options_.identity, clock_, kPolicyEventLimits),
      index_(
          [this](const std::vector<std::string>& uids, bool nodes_changed) {
            // A node coming, going or turning stale changes every policy's "nodes reporting"
            // denominator.
            if (nodes_changed) {
              enqueue_all_policies();
              return;
            }
            enqueue_policies_with_uids(uids);
          },
          options_.report_ttl, clock_) {
  kube::ReflectorOptions policy_options = options_.reflector;
  policy_options.ns = options_.policy_namespace;
  policies_ = std::make_unique<kube::Informer>(client_, kProfilingPolicies, policy_options,
                                               kube::Transform{}, clock_);
  kube::ReflectorOptions report_options = options_.reflector;
  report_options.ns = options_.report_namespace;
  // A report lists every policy (~200 KB of JSON at 1,000 policies). A server without a watch
  // cache pages the list, and small pages keep its transient parse small as the index digests
  // each page as it arrives; the watch cache answers resourceVersion=0 in one response.
  report_options.page_size = std::min<int64_t>(report_options.page_size, 10);
  reports_ = std::make_unique<kube::Reflector>(client_, kProfilingNodeReports, report_options,
                                               index_, clock_);
  kube::ReflectorOptions lease_options = options_.reflector;
  lease_options.ns = options_.report_namespace;
  lease_options.label_selector = crd::kNodeLeaseLabel;
  leases_ = std::make_unique<kube::Informer>(client_, kube::kLeases, lease_options,
                                             kube::Transform{}, clock_);
  auto heartbeat = [this](const ObjectPtr& lease) {
    const Json spec = lease->value("spec", Json::object());
    const std::string node = spec.value("holderIdentity", "");
    if (!node.empty()) index_.set_heartbeat(node, parse_rfc3339(spec.value("renewTime", "")));
  };
  leases_->add_handlers(
      {heartbeat, [heartbeat](const ObjectPtr&, const ObjectPtr& o) { heartbeat(o); },
       [this](const ObjectPtr& lease) {
         const std::string node = lease->value("spec", Json::object()).value("holderIdentity", "");
         if (!node.empty()) index_.set_heartbeat(node, std::nullopt);
       }});

  auto enqueue = [this](const ObjectPtr& o) { queue_.add(kube::key_of(*o)); };
  const kube::EventHandlers enqueue_handlers{
      enqueue, [this](const ObjectPtr&, const ObjectPtr& o) { queue_.add(kube::key_of(*o)); },
      enqueue};
  policies_->add_handlers(enqueue_handlers);
  if (options_.policy_namespace.empty()) {
    cluster_policies_ = std::make_unique<kube::Informer>(
        client_, kClusterProfilingPolicies, options_.reflector, kube::Transform{}, clock_);
    cluster_policies_->add_handlers(enqueue_handlers);
  }
  metrics_.set_policy_source([this] { return policy_series(); });
  metrics_.set_node_report_source([this] { return node_report_series(); });
}

Controller::~Controller() {
  metrics_.set_policy_source({});
  metrics_.set_node_report_source({});
  queue_.shut_down();
  reports_stop_.stop();
  if (reports_thread_.joinable()) reports_thread_.join();
  leases_->stop();
  policies_->stop();
  if (cluster_policies_) cluster_policies_->stop();
}

void Controller::start() {
  reports_thread_ = std::thread([this] { reports_->run(reports_stop_); });
  leases_->start();
  policies_->start();
  if (cluster_policies_) cluster_policies_->start();
}

bool Controller::synced() const {
  return policies_->has_synced() && (!cluster_policies_ || cluster_policies_->has_synced()) &&
         leases_->has_synced() && index_.synced();
}

bool Controller::wait_for_sync(Duration timeout) const {
  const auto deadline = clock_.now() + timeout;
  if (!index_.wait_for_sync(timeout)) return false;
  if (!leases_->wait_for_sync(std::max(Duration::zero(), deadline - clock_.now()))) {
    return false;
  }
  if (!policies_->wait_for_sync(std::max(Duration::zero(), deadline - clock_.now()))) {
    return false;
  }
  return !cluster_policies_ ||
         cluster_policies_->wait_for_sync(std::max(Duration::zero(), deadline - clock_.now()));
}

std::vector<ObjectPtr> Controller::all_policies() const {
  std::vector<ObjectPtr> out = policies_->list();
  if (cluster_policies_) {
    for (auto& policy : cluster_policies_->list()) out.push_back(std::move(policy));
  }
  return out;
}

void Controller::enqueue_all_policies() {
  for (const auto& policy : all_policies()) queue_.add(kube::key_of(*policy));
}

void Controller::enqueue_policies_with_uids(const std::vector<std::string>& uids) {
  if (uids.empty()) return;
  // Entries name policies by uid; the queue works on namespace/name keys. An entry whose
  // policy is gone (or not listed yet) maps to nothing: the policy's own event enqueues it.
  const std::set<std::string> wanted(uids.begin(), uids.end());
  for (const auto& policy : all_policies()) {
    if (wanted.count(kube::uid_of(*policy)) != 0) queue_.add(kube::key_of(*policy));
  }
}

Result<Controller::Outcome> Controller::reconcile(const std::string& key) {
  const bool cluster = key.find('/') == std::string::npos;
  const crd::PolicyKind kind = cluster ? crd::PolicyKind::kCluster : crd::PolicyKind::kNamespaced;
  if (cluster && !cluster_policies_) return Outcome::kDeleted;  // scoped: not ours
  const ObjectPtr policy = cluster ? cluster_policies_->get(key) : policies_->get(key);
  if (policy == nullptr) return Outcome::kDeleted;
  std::vector<NodeEntry> entries = index_.entries_for(kube::uid_of(*policy));
  size_t stale = 0;
  if (options_.report_ttl > Duration::zero()) {
    const auto stale_nodes = index_.stale_nodes(clock_.wall_now() - options_.report_ttl);
    stale = stale_nodes.size();
    std::erase_if(entries, [&](const NodeEntry& e) { return stale_nodes.count(e.node) != 0; });
  }
  Json status = compute_status(*policy, entries, index_.nodes() - stale, stale,
                               format_rfc3339(clock_.wall_now()), kind);
  if (policy->value("status", Json()) == status) return Outcome::kUnchanged;
  const std::vector<PolicyEvent> events = policy_events(policy->value("status", Json()), status);
  Json updated = *policy;
  updated["status"] = std::move(status);
  const auto [ns, name] = kube::split_key(key);
  kube::StopSignal* acting = acting_.load();
  auto written = client_.replace(cluster ? kClusterProfilingPolicies : kProfilingPolicies, ns, name,
                                 updated, "status", {.stop = acting});
  if (!written.ok()) {
    if (kube::is_not_found(written.error())) return Outcome::kDeleted;  // deleted meanwhile
    return written.error().wrap(std::string("write status of ") + crd::kind_name(kind) + " " + key);
  }
  metrics_.status_written();
  for (const auto& event : events)
    metrics_.event_recorded(events_.record(with_policy_type(*policy), event, acting));
  return Outcome::kWritten;
}

std::string Controller::health_problem() const {
  const SteadyTime now = clock_.now();
  std::lock_guard lock(busy_mu_);
  for (const auto& [worker, busy] : busy_) {
    if (now - busy.second > options_.stuck_after) {
      return "worker " + std::to_string(worker) + " has been reconciling " + busy.first + " for " +
             std::to_string(
                 std::chrono::duration_cast<std::chrono::seconds>(now - busy.second).count()) +
             " s";
    }
  }
  return "";
}

void Controller::process(int worker, const std::string& key) {
  {
    std::lock_guard lock(busy_mu_);
    busy_[worker] = {key, clock_.now()};
  }
  const auto started = std::chrono::steady_clock::now();
  auto outcome = reconcile(key);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (outcome.ok()) {
    queue_.forget(key);
    metrics_.reconciled(*outcome == Outcome::kWritten     ? "written"
                        : *outcome == Outcome::kUnchanged ? "unchanged"
                                                          : "deleted",
                        seconds);
  } else {
    log::warn("reconcile failed; retrying with backoff",
              {{"policy", key}, {"error", outcome.error().message()}});
    metrics_.reconciled("error", seconds);
    queue_.add_rate_limited(key);
  }
  queue_.done(key);
  metrics_.set_queue_depth(queue_.len());
  std::lock_guard lock(busy_mu_);
  busy_.erase(worker);
}

void Controller::run_workers(kube::StopSignal& stop) {
  // Reconciling from half-filled caches would write a wrong status (e.g. NoAgents before the
  // reports are listed) and then correct it; wait for both initial lists first.
  while (!synced()) {
    if (!stop.sleep_for(clock_, std::chrono::milliseconds(50))) return;
  }
  log::info("caches synced; reconciling",
            {{"policies", policies_->size()}, {"reports", index_.nodes()}});
  acting_.store(&stop);
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers.emplace_back([this, i] {
      while (auto key = queue_.get()) process(i, *key);
    });
  }
  if (options_.report_ttl > Duration::zero()) {
    workers.emplace_back([this, &stop] {
      const Duration period =
          std::max<Duration>(options_.report_ttl / 4, std::chrono::milliseconds(100));
      while (stop.sleep_for(clock_, period)) enqueue_all_policies();
    });
  }
  stop.sleep_for(clock_, std::chrono::hours(24 * 365 * 100));
  queue_.shut_down();
  for (auto& w : workers) w.join();
  acting_.store(nullptr);
}

std::vector<PolicySeries> Controller::policy_series() const {
  std::vector<PolicySeries> out;
  for (const auto& policy : all_policies()) {
    PolicySeries s;
    s.ns = kube::namespace_of(*policy);
    // As the agents' sonde_policy_selection names them: a ProfilingPolicy's name cannot
    // contain '/'.
    s.name =
        s.ns.empty() ? "clusterprofilingpolicy/" + kube::name_of(*policy) : kube::name_of(*policy);
    for (const auto& [node, entry, cut] : index_.entries_for(kube::uid_of(*policy))) {
      s.matched_pods += static_cast<double>(entry.matched_pods);
      s.instrumented_pods += static_cast<double>(entry.instrumented_pods);
      s.nodejs_processes += static_cast<double>(entry.nodejs_processes);
    }
    out.push_back(std::move(s));
  }
  return out;
}

NodeReportSeries Controller::node_report_series() const {
  NodeReportSeries out;
  out.reports = static_cast<double>(index_.nodes());
  if (options_.report_ttl > Duration::zero()) {
    for (const auto& node : index_.stale_nodes(clock_.wall_now() - options_.report_ttl)) {
      out.stale_nodes.push_back(node);
    }
  }
  return out;
}

}  // namespace sonde::op
