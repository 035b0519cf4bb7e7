#include "agent/nodejs/stall_events.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/kube/event_recorder.h"

namespace sonde::agent {
namespace {

constexpr kube::EventLimits kLimits{.aggregate_window = std::chrono::minutes(10),
                                    .burst = 1,
                                    .refill = std::chrono::minutes(1),
                                    .max_objects = 10000};

}  // namespace

StallEvents::StallEvents(kube::ApiClient& client, std::string node, PodLookup pods,
                         const Clock& clock)
    : recorder_(std::make_unique<kube::EventRecorder>(client, "sonde-agent", node, clock, kLimits)),
      node_(std::move(node)),
      pods_(std::move(pods)),
      thread_([this] { run(); }) {}

StallEvents::~StallEvents() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  stop_.stop();  // cancels a write in flight
  thread_.join();
}

void StallEvents::post(const Stall& stall) {
  {
    std::lock_guard lock(mu_);
    if (stall.labels.pod.empty()) {
      ++stats_.no_pod;
      return;
    }
    if (queue_.size() >= kQueue) {
      ++stats_.queue_full;
      return;
    }
    queue_.push_back(stall);
  }
  cv_.notify_one();
}

std::string StallEvents::message(const Stall& stall, const std::string& node) {
  // What it ran: the innermost JavaScript frame ("name (file:line)") of the most sampled stack,
  // else its innermost frame.
  std::string ran;
  if (!stall.stacks.empty()) {
    for (const auto& f : stall.stacks.front().frames) {
      if (f.find(" (") != std::string::npos) {
        ran = f;
        break;
      }
    }
    if (ran.empty() && !stall.stacks.front().frames.empty()) ran = stall.stacks.front().frames[0];
  }
  char head[160];
  (void)std::snprintf(head, sizeof head,
                      "Node.js event loop of pid %d (container %s) blocked %.1f ms%s (threshold "
                      "%llu ms)",
                      static_cast<int>(stall.pid), stall.labels.container.c_str(),
                      static_cast<double>(stall.duration_ns) / 1e6, stall.ongoing ? " so far" : "",
                      static_cast<unsigned long long>(stall.threshold_ns / 1'000'000));
  std::string out = head;
  if (!ran.empty()) out += " running " + ran;
  out += "; stacks at /debug/nodejs/stalls of the sonde agent on node " + node;
  if (out.size() > kMaxMessageBytes) {
    size_t end = kMaxMessageBytes - 3;
    while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xc0) == 0x80) --end;
    out.resize(end);
    out += "...";
  }
  return out;
}

void StallEvents::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Stall stall = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const auto pod = pods_(stall.labels.namespace_name + "/" + stall.labels.pod);
    const char* result = "no_pod";
    if (pod) {
      kube::Json object = *pod;
      object["apiVersion"] = "v1";
      object["kind"] = "Pod";
      result = recorder_->record(object, {"Warning", kReason, message(stall, node_)}, &stop_);
    }
    lock.lock();
    const std::string r = result;
    if (r == "written") {
      ++stats_.written;
    } else if (r == "dropped") {
      ++stats_.rate_limited;
    } else if (r == "failed") {
      ++stats_.failed;
    } else {
      ++stats_.no_pod;
    }
  }
}

StallEvents::Stats StallEvents::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void StallEvents::collect(std::vector<prometheus::MetricFamily>& out) const {
  auto family = counter_family("sonde_agent_nodejs_stall_events_total",
                               "Kubernetes Events for Node.js stalls, by result: written, "
                               "rate_limited (one per pod per minute), failed, queue_full, "
                               "no_pod.");
  const Stats st = stats();
  for (const auto& [result, n] : {std::pair{"written", st.written},
                                  {"rate_limited", st.rate_limited},
                                  {"failed", st.failed},
                                  {"queue_full", st.queue_full},
                                  {"no_pod", st.no_pod}}) {
    add_sample(family, {{"result", result}}, static_cast<double>(n));
  }
  out.push_back(std::move(family));
}

}  // namespace sonde::agent
