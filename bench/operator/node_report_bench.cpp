// Node report benchmark: what the agents' reports and node Leases cost the API server at
// cluster scale. NODES agents' report writers (the agent's own NodeReportWriter, report_status()
// and crd serialization, everything of `sonde-agent --cluster` but the BPF side) run against
// the fake API server with POLICIES ProfilingPolicies; every node reports every policy, and
// each node runs PODS_PER_NODE selected pods spread over the policies. Measured from the fake's
// request log, per phase:
//   - steady state: nothing changes; report writes/s (target: under one per node per minute)
//     and Lease renewals/s, with bytes/s;
//   - churn: every second CHURN_NODES random nodes see a pod come or go (one entry's counts
//     change), and every 10 s one policy is edited (its generation bumps, so every node's
//     entry for it changes);
//   - the largest report body written.
// The fake's CRD schema checks are switched off here (Python validation of 1,000-entry reports
// would be the bottleneck, not what sonde sends); tests check the schema.
//
// Usage: node_report_bench [NODES POLICIES PODS_PER_NODE SECONDS CHURN_NODES]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/cluster/node_report.h"
#include "common/kube/sonde_resources.h"
#include "common/kube/testing/fake_apiserver_process.h"

namespace {

using namespace sonde;
using kube::Json;

// One simulated node: the status its agent would build, changed by the churn.
struct Node {
  std::mutex mu;
  std::vector<crd::PolicyEntry> entries;
  crd::NodeReportStatus status() {
    std::lock_guard lock(mu);
    return agent::report_status({"bench", "6.1.0", true}, entries);
  }
};

struct Totals {
  size_t report_writes = 0, lease_writes = 0, report_bytes = 0, lease_bytes = 0, largest_report = 0,
         other_writes = 0;
};

Totals totals(kube::testing::FakeApiServer& fake) {
  Totals t;
  for (const auto& r : fake.requests()) {
    const std::string method = r["method"];
    const int status = r["status"];
    if ((method != "PUT" && method != "POST" && method != "PATCH") || status < 200 ||
        status >= 300) {
      continue;
    }
    const std::string path = r["path"];
    const size_t bytes = r.value("bytes", 0);
    if (path.find("/profilingnodereports") != std::string::npos) {
      ++t.report_writes;
      t.report_bytes += bytes;
      t.largest_report = std::max(t.largest_report, bytes);
    } else if (path.find("/leases") != std::string::npos) {
      ++t.lease_writes;
      t.lease_bytes += bytes;
    } else {
      ++t.other_writes;
    }
  }
  return t;
}

void print_phase(const char* name, const Totals& t, double seconds, int nodes) {
  std::printf(
      "%-12s %5.0f s: report writes %7.2f/s (%6.3f per node per minute, %8.0f B/s), Lease "
      "renewals %6.2f/s (%7.0f B/s), largest report %zu B\n",
      name, seconds, t.report_writes / seconds, t.report_writes / seconds * 60.0 / nodes,
      t.report_bytes / seconds, t.lease_writes / seconds, t.lease_bytes / seconds,
      t.largest_report);
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int policies = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int pods_per_node = argc > 3 ? std::atoi(argv[3]) : 20;
  const int seconds = argc > 4 ? std::atoi(argv[4]) : 60;
  const int churn_nodes = argc > 5 ? std::atoi(argv[5]) : 20;
  std::printf(
      "%d nodes x %d policies, %d selected pods per node, %d s per phase, churn %d "
      "nodes/s + 1 policy edit per 10 s\n",
      nodes, policies, pods_per_node, seconds, churn_nodes);

  kube::testing::FakeApiServer fake;
  fake.control("crds", {{"enforce", false}});
  kube::ApiClientOptions options;
  options.user_agent = "node-report-bench";
  kube::ApiClient client(fake.client_config(), options);

  std::vector<std::string> uids;
  for (int i = 0; i < policies; ++i) {
    Json p = {{"apiVersion", "sonde.dev/v1alpha1"},
              {"kind", "ProfilingPolicy"},
              {"metadata", {{"name", "p" + std::to_string(i)}, {"namespace", "ns"}}},
              {"spec",
               {{"targets", Json::array({{{"selector", Json::object()}}})},
                {"instrumentations", {{"nodejsEventLoop", Json::object()}}}}}};
    auto created = client.create(kube::kProfilingPolicies, "ns", p);
    if (!created.ok()) {
      std::fprintf(stderr, "create policy: %s\n", created.error().message().c_str());
      return 1;
    }
    uids.push_back(kube::uid_of(*created));
  }

  // The Nodes, so that reports and Leases carry their ownerReference as in a cluster.
  const kube::ResourceType nodes_type{"", "v1", "nodes", false};
  for (int n = 0; n < nodes; ++n) {
    if (!client.create(nodes_type, "", {{"metadata", {{"name", "node-" + std::to_string(n)}}}})
             .ok()) {
      std::fprintf(stderr, "cannot create node-%d\n", n);
      return 1;
    }
  }

  std::mt19937 rng(42);
  std::vector<std::unique_ptr<Node>> state;
  for (int n = 0; n < nodes; ++n) {
    auto node = std::make_unique<Node>();
    for (const auto& uid : uids) node->entries.push_back({.uid = uid, .observed_generation = 1});
    for (int k = 0; k < pods_per_node; ++k) {
      auto& e = node->entries[(n * pods_per_node + k) % policies];
      ++e.matched_pods;
      ++e.instrumented_pods;
      ++e.nodejs_processes;
    }
    state.push_back(std::move(node));
  }

  // Writers as in the agent (agent/cluster/cluster_main.cpp): its defaults, but polling every
  // 2 s instead of 1 s so that a thousand of them leave CPU for the fake.
  agent::ReportWriterOptions writer_options;
  writer_options.poll = std::chrono::seconds(2);
  std::vector<std::unique_ptr<agent::NodeReportWriter>> writers;
  kube::StopSignal stop;
  std::vector<std::thread> threads;
  for (int n = 0; n < nodes; ++n) {
    Node* node = state[n].get();
    writers.push_back(std::make_unique<agent::NodeReportWriter>(
        client, "node-" + std::to_string(n), "sonde-system", [node] { return node->status(); },
        writer_options));
  }
  const auto started = std::chrono::steady_clock::now();
  for (int n = 0; n < nodes; ++n) {
    threads.emplace_back([&, n] { writers[n]->run(stop); });
  }
  auto all_written = [&] {
    return std::all_of(writers.begin(), writers.end(),
                       [](const auto& w) { return w->writes() > 0; });
  };
  while (!all_written()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double startup =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Totals first = totals(fake);
  std::printf(
      "start-up: every node wrote its report in %.1f s (%zu report writes, %zu B, "
      "largest %zu B)\n",
      startup, first.report_writes, first.report_bytes, first.largest_report);

  // Steady state: nothing changes.
  std::this_thread::sleep_for(std::chrono::seconds(12));  // past the first min_interval
  fake.clear_requests();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  print_phase("steady", totals(fake), seconds, nodes);

  // Churn: pods come and go on random nodes, a policy is edited every 10 s.
  fake.clear_requests();
  std::uniform_int_distribution<int> pick_node(0, nodes - 1), pick_policy(0, policies - 1);
  const auto churn_start = std::chrono::steady_clock::now();
  for (int s = 0; s < seconds; ++s) {
    for (int k = 0; k < churn_nodes; ++k) {
      Node& node = *state[pick_node(rng)];
      std::lock_guard lock(node.mu);
      auto& e = node.entries[pick_policy(rng)];
      const int64_t delta = (e.matched_pods > 0 && rng() % 2 == 0) ? -1 : 1;
      e.matched_pods += delta;
      e.instrumented_pods += delta;
      e.nodejs_processes += delta;
    }
    if (s % 10 == 0) {
      const int p = pick_policy(rng);
      auto edited = client.merge_patch(
          kube::kProfilingPolicies, "ns", "p" + std::to_string(p),
          {{"spec", {{"instrumentations", {{"goTLS", s % 20 == 0 ? Json::object() : Json()}}}}}});
      const int64_t generation = edited.ok() ? kube::generation_of(*edited) : 0;
      for (auto& node : state) {  // every agent sees the new generation
        std::lock_guard lock(node->mu);
        node->entries[p].observed_generation = generation;
      }
    }
    std::this_thread::sleep_until(churn_start + std::chrono::seconds(s + 1));
  }
  const Totals churn = totals(fake);
  print_phase("churn", churn, seconds, nodes);
  std::printf("(churn also wrote %zu policies)\n", churn.other_writes);

  stop.stop();
  for (auto& t : threads) t.join();
  return 0;
}
