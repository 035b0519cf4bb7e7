// Operator benchmark: 1,000 ProfilingPolicies and 100 node reports describing 20,000 pods in
// the fake API server; the real sonde-operator binary is started and measured:
//   - time to converge: from exec until every policy's status shows all 100 nodes reporting;
//   - memory: the operator's resident set (VmRSS, VmHWM) once converged;
//   - reconcile latency: a policy's spec is changed and the time until its status shows the new
//     generation is measured, sequentially, for a sample of policies; plus the operator's own
//     sonde_operator_reconcile_duration_seconds histogram (compute + status write).
// The operator reads pods only through the agents' reports (crds/README.md), so the 20,000
// pods exist as report entries: 200 pods per node, each selected by one policy (20 pods per
// policy, spread over the nodes); every report lists every policy, as agents do.
//
// Usage: operator_bench [POLICIES NODES PODS SAMPLES]
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/sonde_resources.h"
#include "common/kube/testing/fake_apiserver_process.h"

extern char** environ;

namespace {

using namespace sonde::kube;
using BenchClock = std::chrono::steady_clock;

double ms_since(BenchClock::time_point t) {
  return std::chrono::duration<double, std::milli>(BenchClock::now() - t).count();
}

long status_kib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field) + 1));
  }
  return -1;
}

Json policy(int i) {
  return {{"apiVersion", "sonde.dev/v1alpha1"},
          {"kind", "ProfilingPolicy"},
          {"metadata",
           {{"name", "p" + std::to_string(i)}, {"namespace", "ns" + std::to_string(i % 50)}}},
          {"spec",
           {{"targets",
             Json::array({{{"selector", {{"matchLabels", {{"app", "a" + std::to_string(i)}}}}}}})},
            {"instrumentations",
             {{"nodejsEventLoop", Json::object()}, {"cpu", {{"frequencyHz", 49}}}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  const int policies = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int nodes = argc > 2 ? std::atoi(argv[2]) : 100;
  const int pods = argc > 3 ? std::atoi(argv[3]) : 20000;
  const int samples = argc > 4 ? std::atoi(argv[4]) : 100;

  testing::FakeApiServer fake;
  ApiClientOptions options;
  options.user_agent = "operator-bench";
  options.qps = 0;  // seeding and polling the fake, not a client under test
  ApiClient client(fake.client_config(), options);

  auto seeded = BenchClock::now();
  std::vector<std::string> uids;
  for (int i = 0; i < policies; ++i) {
    const Json p = policy(i);
    auto created = client.create(kProfilingPolicies, namespace_of(p), p);
    if (!created.ok()) return 1;
    uids.push_back(uid_of(*created));
  }
  // Pod k runs on node k % nodes and is selected by policy k % policies.
  std::vector<std::vector<int>> matched(nodes, std::vector<int>(policies, 0));
  for (int k = 0; k < pods; ++k) ++matched[k % nodes][k % policies];
  // Node Leases renewed at the start of the run: well within the operator's default 3 min
  // report TTL.
  char now[40];
  const std::time_t t = std::time(nullptr);
  std::strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S.000000Z", std::gmtime(&t));
  for (int n = 0; n < nodes; ++n) {
    Json entries = Json::array();
    for (int i = 0; i < policies; ++i) {
      Json e = {{"uid", uids[i]}, {"observedGeneration", 1}};
      if (matched[n][i] != 0) {
        e["matchedPods"] = e["instrumentedPods"] = e["nodejsProcesses"] = matched[n][i];
      }
      entries.push_back(std::move(e));
    }
    const std::string node = "node-" + std::to_string(n);
    Json lease = {
        {"metadata",
         {{"name", "sonde-node-" + node}, {"labels", {{"sonde.dev/node-lease", "true"}}}}},
        {"spec", {{"holderIdentity", node}, {"renewTime", now}}}};
    if (!client.create(kLeases, "sonde-system", lease).ok()) return 1;
    Json report = {{"apiVersion", "sonde.dev/v1alpha1"},
                   {"kind", "ProfilingNodeReport"},
                   {"metadata", {{"name", node}, {"namespace", "sonde-system"}}},
                   {"spec", {{"nodeName", node}}},
                   {"status", {{"agentVersion", "bench"}, {"policies", entries}}}};
    if (!client.create(kProfilingNodeReports, "sonde-system", report).ok()) return 1;
  }
  std::printf("seeded %d policies, %d node reports (%d pods) in %.0f ms\n", policies, nodes, pods,
              ms_since(seeded));

  const std::string kubeconfig = "/tmp/operator-bench-kubeconfig-" + std::to_string(getpid());
  fake.write_kubeconfig(kubeconfig);
  const std::string metrics_port = std::to_string(20000 + getpid() % 20000);
  std::vector<std::string> args = {SONDE_OPERATOR_BINARY, "--kubeconfig=" + kubeconfig,
                                   "--metrics-address=127.0.0.1:" + metrics_port,
                                   "--log-level=warn", "--leader-election-identity=bench"};
  std::vector<char*> argv_c;
  for (auto& a : args) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  pid_t pid;
  const auto started = BenchClock::now();
  if (posix_spawn(&pid, argv_c[0], nullptr, nullptr, argv_c.data(), environ) != 0) return 1;

  auto converged = [&]() {
    auto page = client.list(kProfilingPolicies, "", {});
    if (!page.ok()) return false;
    for (const auto& p : page->items) {
      const Json status = p.value("status", Json::object());
      const int64_t generation = generation_of(p);
      if (status.value("observedGeneration", int64_t{0}) != generation) return false;
      if (status.value("nodesReporting", 0) != nodes) return false;
    }
    return static_cast<int>(page->items.size()) == policies;
  };
  while (!converged()) {
    if (ms_since(started) > 600000) {
      std::fprintf(stderr, "did not converge in 10 minutes\n");
      kill(pid, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double converge_ms = ms_since(started);
  const long rss = status_kib(pid, "VmRSS:");
  const long hwm = status_kib(pid, "VmHWM:");
  std::printf("converged: %.0f ms after exec; operator VmRSS %ld KiB, VmHWM %ld KiB\n", converge_ms,
              rss, hwm);

  std::vector<double> latencies;
  for (int s = 0; s < samples; ++s) {
    const int i = (s * 7919) % policies;
    const std::string ns = "ns" + std::to_string(i % 50);
    const std::string name = "p" + std::to_string(i);
    auto patched = client.merge_patch(
        kProfilingPolicies, ns, name,
        {{"spec", {{"instrumentations", {{"cpu", {{"frequencyHz", 50 + s % 40}}}}}}}});
    if (!patched.ok()) return 1;
    const int64_t generation = generation_of(*patched);
    const auto t = BenchClock::now();
    while (true) {
      auto p = client.get(kProfilingPolicies, ns, name);
      if (p.ok() && p->value("status", Json::object()).value("observedGeneration", int64_t{0}) ==
                        generation) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    latencies.push_back(ms_since(t));
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) { return latencies[static_cast<size_t>(q * (latencies.size() - 1))]; };
  std::printf("spec change -> status (%zu samples): p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
              latencies.size(), pct(0.5), pct(0.9), latencies.back());

  ClientConfig metrics_config;
  metrics_config.server = "http://127.0.0.1:" + metrics_port;
  ApiClient metrics_client(metrics_config, options);
  auto scraped = metrics_client.send("GET", "/metrics");
  if (scraped.ok()) {
    std::istringstream lines(scraped->body);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("sonde_operator_reconcile_duration_seconds_sum", 0) == 0 ||
          line.rfind("sonde_operator_reconcile_duration_seconds_count", 0) == 0 ||
          line.rfind("sonde_operator_reconciles_total", 0) == 0 ||
          line.rfind("sonde_operator_status_writes_total", 0) == 0 ||
          line.rfind("sonde_operator_events_total", 0) == 0) {
        std::printf("  %s\n", line.c_str());
      }
    }
  }
  std::printf("operator VmRSS after the latency run: %ld KiB\n", status_kib(pid, "VmRSS:"));
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::remove(kubeconfig.c_str());
  return 0;
}
