#include "common/kube/event_recorder.h"

#include <algorithm>

#include "common/log.h"
#include "common/rfc3339.h"

namespace sonde::kube {
namespace {

// An Event is not worth holding a worker for: the whole write, retries included, gets this.
constexpr auto kEventWriteTimeout = std::chrono::seconds(10);

}  // namespace

EventRecorder::EventRecorder(ApiClient& client, std::string component, std::string instance,
                             const Clock& clock, EventLimits limits)
    : client_(client),
      component_(std::move(component)),
      instance_(std::move(instance)),
      clock_(clock),
      limits_(limits) {}

uint64_t EventRecorder::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

const char* EventRecorder::record(const Json& object, const EventNote& event, StopSignal* stop) {
  const Json meta = object.value("metadata", Json::object());
  // A cluster-scoped object's Events go in "default", as kubectl and client-go record them;
  // their involvedObject has no namespace.
  const std::string object_ns = meta.value("namespace", "");
  const std::string ns = object_ns.empty() ? "default" : object_ns;
  const std::string name = meta.value("name", "");
  const std::string uid = meta.value("uid", ns + "/" + name);
  const std::string key = event.type + "\n" + event.reason + "\n" + event.message;
  const SteadyTime now = clock_.now();

  std::string event_name;
  int64_t count = 1;
  {
    std::lock_guard lock(mu_);
    auto [it, added] = objects_.try_emplace(uid);
    ObjectState& state = it->second;
    if (added) {
      state.tokens = limits_.burst;
      state.refilled = now;
    } else {
      lru_.erase(state.lru);
    }
    lru_.push_front(uid);
    state.lru = lru_.begin();
    while (objects_.size() > limits_.max_objects) {
      objects_.erase(lru_.back());
      lru_.pop_back();
    }
    const double refill = std::chrono::duration<double>(now - state.refilled) /
                          std::chrono::duration<double>(limits_.refill);
    state.tokens = std::min<double>(limits_.burst, state.tokens + refill);
    state.refilled = now;
    std::erase_if(state.aggregates, [&](const auto& entry) {
      return now - entry.second.last >= limits_.aggregate_window;
    });
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
    written = client_.merge_patch(kEvents, ns, event_name,
                                  {{"count", count}, {"lastTimestamp", timestamp}}, "",
                                  {.timeout = kEventWriteTimeout, .stop = stop});
    // The API server keeps Events an hour; an aggregate may outlive its object.
    if (!written.ok() && is_not_found(written.error())) event_name.clear();
  }
  if (event_name.empty()) {
    count = 1;
    event_name = name + "." + std::to_string(clock_.wall_now().time_since_epoch().count());
    Json created = {{"apiVersion", "v1"},
                    {"kind", "Event"},
                    {"metadata", {{"name", event_name}, {"namespace", ns}}},
                    {"involvedObject",
                     {{"apiVersion", object.value("apiVersion", "")},
                      {"kind", object.value("kind", "")},
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
    written = client_.create(kEvents, ns, created, {.timeout = kEventWriteTimeout, .stop = stop});
  }
  if (!written.ok()) {
    log::warn("writing an Event failed",
              {{"object", object.value("kind", "") + " " + make_key(object_ns, name)},
               {"reason", event.reason},
               {"error", written.error().message()}});
    return "failed";
  }
  std::lock_guard lock(mu_);
  ++written_;
  if (auto it = objects_.find(uid); it != objects_.end()) {
    it->second.aggregates[key] = {event_name, count, now};
  }
  return "written";
}

}  // namespace sonde::kube
