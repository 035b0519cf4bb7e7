#include "operator/events.h"

#include "common/log.h"
#include "operator/policy_status.h"

namespace sonde::op {

using kube::Json;

namespace {

// An Event is not worth holding a worker for: the whole write, retries included, gets this.
constexpr auto kEventWriteTimeout = std::chrono::seconds(10);

const Json* find_condition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return nullptr;
  }
  for (const auto& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

// (status, reason) of a condition, empty when absent.
std::pair<std::string, std::string> state_of(const Json* condition) {
  if (condition == nullptr) return {};
  return {condition->value("status", ""), condition->value("reason", "")};
}

}  // namespace

std::vector<PolicyEvent> policy_events(const Json& old_status, const Json& new_status) {
  std::vector<PolicyEvent> out;
  auto changed = [&](const std::string& type) -> const Json* {
    const Json* now = find_condition(new_status, type);
    if (now == nullptr || state_of(now) == state_of(find_condition(old_status, type))) {
      return nullptr;
    }
    return now;
  };
  if (const Json* accepted = changed("Accepted"); accepted && (*accepted)["status"] == "False") {
    out.push_back({"Warning", "InvalidSpec", accepted->value("message", "")});
  }
  if (const Json* ready = changed("Ready")) {
    const std::string reason = ready->value("reason", "");
    if (reason != "InvalidSpec") {
      const bool fine = (*ready)["status"] == "True" || reason == "WaitingForNodes";
      out.push_back({fine ? "Normal" : "Warning", reason, ready->value("message", "")});
    }
  }
  if (const Json* degraded = changed("Degraded")) {
    const bool bad = (*degraded)["status"] == "True";
    // A first status that is not degraded is no news.
    if (bad || find_condition(old_status, "Degraded") != nullptr) {
      out.push_back({bad ? "Warning" : "Normal", degraded->value("reason", ""),
                     degraded->value("message", "")});
    }
  }
  return out;
}

EventRecorder::EventRecorder(kube::ApiClient& client, std::string component, std::string instance,
                             const kube::Clock& clock)
    : client_(client),
      component_(std::move(component)),
      instance_(std::move(instance)),
      clock_(clock) {}

uint64_t EventRecorder::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

const char* EventRecorder::record(const Json& policy, const PolicyEvent& event,
                                  kube::StopSignal* stop) {
  const Json meta = policy.value("metadata", Json::object());
  // A cluster-scoped object's Events go in "default", as kubectl and client-go record them;
  // their involvedObject has no namespace.
  const std::string object_ns = meta.value("namespace", "");
  const std::string ns = object_ns.empty() ? "default" : object_ns;
  const std::string name = meta.value("name", "");
  const std::string uid = meta.value("uid", ns + "/" + name);
  const std::string key = event.type + "\n" + event.reason + "\n" + event.message;
  const kube::SteadyTime now = clock_.now();

  std::string event_name;
  int64_t count = 1;
  {
    std::lock_guard lock(mu_);
    auto [it, added] = policies_.try_emplace(uid);
    PolicyState& state = it->second;
    if (added) {
      state.refilled = now;
    } else {
      lru_.erase(state.lru);
    }
    lru_.push_front(uid);
    state.lru = lru_.begin();
    while (policies_.size() > kMaxTrackedPolicies) {
      policies_.erase(lru_.back());
      lru_.pop_back();
    }
    const double refill = std::chrono::duration<double>(now - state.refilled) /
                          std::chrono::duration<double>(kEventRefill);
    state.tokens = std::min<double>(kEventBurst, state.tokens + refill);
    state.refilled = now;
    std::erase_if(state.aggregates,
                  [&](const auto& entry) { return now - entry.second.last >= kAggregateWindow; });
    if (state.tokens < 1.0) {
      ++dropped_;
      return "dropped";
    }
    state.tokens -= 1.0;
    if (auto found = state.aggregates.find(key); found != state.aggregates.end()) {
      event_name = found->second.name;
      count = found->second.count + 1;
    }
  }

  const std::string timestamp = format_rfc3339(clock_.wall_now());
  Result<Json> written = Error("not written");
  if (!event_name.empty()) {
    written = client_.merge_patch(kube::kEvents, ns, event_name,
                                  {{"count", count}, {"lastTimestamp", timestamp}}, "",
                                  {.timeout = kEventWriteTimeout, .stop = stop});
    // The API server keeps Events an hour; an aggregate may outlive its object.
    if (!written.ok() && kube::is_not_found(written.error())) event_name.clear();
  }
  if (event_name.empty()) {
    count = 1;
    event_name = name + "." + std::to_string(clock_.wall_now().time_since_epoch().count());
    Json object = {{"apiVersion", "v1"},
                   {"kind", "Event"},
                   {"metadata", {{"name", event_name}, {"namespace", ns}}},
                   {"involvedObject",
                    {{"apiVersion", policy.value("apiVersion", "sonde.dev/v1alpha1")},
                     {"kind", policy.value("kind", object_ns.empty() ? "ClusterProfilingPolicy"
                                                                     : "ProfilingPolicy")},
                     {"namespace", object_ns},
                     {"name", name},
                     {"uid", meta.value("uid", "")},
                     {"resourceVersion", meta.value("resourceVersion", "")}}},
                   {"type", event.type},
                   {"reason", event.reason},
                   {"message", event.message},
                   {"source", {{"component", component_}}},
                   {"reportingComponent", component_},
                   {"reportingInstance", instance_},
                   {"firstTimestamp", timestamp},
                   {"lastTimestamp", timestamp},
                   {"count", 1}};
    written =
        client_.create(kube::kEvents, ns, object, {.timeout = kEventWriteTimeout, .stop = stop});
  }
  if (!written.ok()) {
    log::warn("writing an Event failed", {{"policy", kube::make_key(object_ns, name)},
                                          {"reason", event.reason},
                                          {"error", written.error().message()}});
    return "failed";
  }
  std::lock_guard lock(mu_);
  ++written_;
  if (auto it = policies_.find(uid); it != policies_.end()) {
    it->second.aggregates[key] = {event_name, count, now};
  }
  return "written";
}

}  // namespace sonde::op
