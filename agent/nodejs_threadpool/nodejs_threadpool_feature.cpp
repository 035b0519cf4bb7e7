#include "agent/nodejs_threadpool/nodejs_threadpool_feature.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

namespace sonde::agent {

NodejsThreadPoolFeature::NodejsThreadPoolFeature(symbols::ProbeTargetCache& cache,
                                                 const ProcReader& proc, uint64_t grace_ns,
                                                 std::string node, size_t max_processes,
                                                 uint64_t period_ns)
    : monitor_(cache, proc, grace_ns, real_clock(), max_processes),
      node_(std::move(node)),
      period_ns_(period_ns),
      poller_([this] { poll_loop(); }) {}

NodejsThreadPoolFeature::~NodejsThreadPoolFeature() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  poller_.join();
}

void NodejsThreadPoolFeature::poll_loop() {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (monitor_.tracked() == 0) {
      // Nothing to read: asleep until instrument() adds a process (checked once a second too,
      // so a wake-up lost to a race costs at most that).
      wake_.wait_for(lock, std::chrono::seconds(1));
      next = Clock::now();
      continue;
    }
    lock.unlock();
    const auto begin = Clock::now();
    monitor_.poll();
    const auto took = Clock::now() - begin;
    lock.lock();
    next += std::chrono::nanoseconds(period_ns_);
    // Late (a long poll, a busy machine): start again from now, and rest at least as long as
    // the poll took.
    next = std::max(next, Clock::now() + took);
    wake_.wait_until(lock, next, [&] { return stop_; });
  }
}

FeatureResult NodejsThreadPoolFeature::instrument(const Candidate& c, const Selection& selection) {
  using State = ProcessOutcome::State;
  using Outcome = threadpool::PoolMonitor::Outcome;
  std::string why;
  switch (monitor_.consider(c, selection.labels, &why)) {
    case Outcome::kTracked: wake_.notify_all(); return {State::kInstrumented, ""};
    case Outcome::kNotNode:
      return {State::kNotApplicable, "no Node.js symbols (napi_module_register) in " + c.info.exe};
    case Outcome::kGone: return {.gone = true};
    case Outcome::kRefused: return {State::kSymbolsNotFound, why};
    case Outcome::kLimitExceeded: return {State::kLimitExceeded, why};
  }
  return {State::kFailed, "unknown outcome"};
}

void NodejsThreadPoolFeature::collect(std::vector<prometheus::MetricFamily>& out) {
  auto threads = gauge_family("container_nodejs_threadpool_threads",
                              "Threads of the libuv thread pools of the container's Node.js "
                              "processes (0 until a process's pool runs its first task).");
  auto busy = gauge_family("container_nodejs_threadpool_busy_threads",
                           "Thread-pool threads not waiting for work, at the latest reading.");
  auto queued = gauge_family("container_nodejs_threadpool_queued_tasks",
                             "Thread-pool tasks (fs, dns.lookup, crypto, zlib) waiting for a "
                             "thread, at the latest reading (at most 128 per queue read).");
  auto pools = gauge_family("container_nodejs_threadpools",
                            "Node.js processes of the container whose libuv thread pool is read.");
  auto saturated = counter_family(
      "container_nodejs_threadpool_saturated_seconds_total",
      "Time during which every thread of a pool was busy and tasks waited, sampled every 10 ms, "
      "summed over the container's pools.");
  for (const auto& s : monitor_.samples()) {
    const LabelPairs labels = {{"namespace", s.labels.namespace_name},
                               {"pod", s.labels.pod},
                               {"container", s.labels.container},
                               {"node", node_}};
    add_sample(threads, labels, static_cast<double>(s.threads));
    add_sample(busy, labels, static_cast<double>(s.busy));
    add_sample(queued, labels, static_cast<double>(s.queued));
    add_sample(saturated, labels, s.saturated_seconds);
    add_sample(pools, labels, static_cast<double>(s.processes));
  }
  out.push_back(std::move(threads));
  out.push_back(std::move(busy));
  out.push_back(std::move(queued));
  out.push_back(std::move(saturated));
  out.push_back(std::move(pools));

  auto binaries = gauge_family("sonde_agent_nodejs_threadpool_binaries",
                               "Node.js binaries of selected processes and whether their libuv "
                               "thread pool is read (verdict: measured, symbols-missing, "
                               "symbols-ambiguous, layout-mismatch, unreadable): live processes "
                               "per binary (path as first seen, build id).");
  std::map<std::tuple<std::string, std::string, std::string>, size_t> by_labels;
  for (const auto& b : monitor_.binaries()) {
    by_labels[{b.path, b.build_id, threadpool::verdict_name(b.verdict)}] += b.processes;
  }
  for (const auto& [l, n] : by_labels) {
    const auto& [path, build_id, verdict] = l;
    add_sample(binaries, {{"binary", path}, {"build_id", build_id}, {"verdict", verdict}},
               static_cast<double>(n));
  }
  out.push_back(std::move(binaries));

  const auto stats = monitor_.stats();
  auto readings = counter_family("sonde_agent_nodejs_threadpool_readings_total",
                                 "Readings of Node.js processes' thread pools that succeeded.");
  add_sample(readings, {}, static_cast<double>(stats.readings));
  out.push_back(std::move(readings));
  auto failures = counter_family("sonde_agent_nodejs_threadpool_read_failures_total",
                                 "Readings of a thread pool given up, by reason: torn (its queue "
                                 "changed under every walk), implausible (counters out of "
                                 "libuv's range), unreadable (memory not readable). A process "
                                 "that exited is not one.");
  for (size_t i = 0; i < stats.failures.size(); ++i) {
    add_sample(failures,
               {{"reason", threadpool::read_failure_name(static_cast<threadpool::ReadFailure>(i))}},
               static_cast<double>(stats.failures[i]));
  }
  out.push_back(std::move(failures));
  auto truncated = counter_family(
      "sonde_agent_nodejs_threadpool_walks_truncated_total",
      "Readings whose queue walk stopped at its bound (128 nodes per queue): the queued tasks "
      "reported are a lower bound.");
  add_sample(truncated, {}, static_cast<double>(stats.walks_truncated));
  out.push_back(std::move(truncated));
  auto refused = counter_family("sonde_agent_nodejs_threadpool_limit_exceeded_total",
                                "Node.js processes whose thread pool is not read because the "
                                "node's bound of processes read was reached, or no descriptor "
                                "was left for the process's pidfd.");
  add_sample(refused, {}, static_cast<double>(stats.limit_exceeded));
  out.push_back(std::move(refused));
  auto poll_seconds = counter_family("sonde_agent_nodejs_threadpool_poll_seconds_total",
                                     "Wall time the agent spent reading thread pools.");
  add_sample(poll_seconds, {}, static_cast<double>(stats.poll_ns) / 1e9);
  out.push_back(std::move(poll_seconds));
}

}  // namespace sonde::agent
