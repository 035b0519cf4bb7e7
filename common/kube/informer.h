// Informer: a thread-safe local cache of one resource collection, kept current by a Reflector
// on its own thread, with change handlers.
//
// The cache maps "namespace/name" (or "name") to an immutable shared object; readers get
// shared pointers and never see an object change under them. An optional transform trims
// each object before it is stored (an operator that needs three fields of a Pod should not
// keep the whole Pod).
//
// Handlers run on the informer's thread, in the order the changes happened, after the cache
// reflects the change, and without any informer lock held (they may read the cache). A relist
// is turned into the adds, updates and deletes that make the cache equal to the new state, so
// handlers see each change once even across 410s and reconnects: an object whose
// resourceVersion did not change is not reported again, and a duplicate watch event is
// dropped (and counted).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/kube/reflector.h"

namespace sonde::kube {

using ObjectPtr = std::shared_ptr<const Json>;
using Transform = std::function<Json(Json)>;

struct EventHandlers {
  std::function<void(const ObjectPtr&)> on_add;
  std::function<void(const ObjectPtr& old_object, const ObjectPtr& new_object)> on_update;
  // The last state the cache held (which may be older than the deletion when the delete was
  // learned from a relist).
  std::function<void(const ObjectPtr&)> on_delete;
};

class Informer final : private ReflectorSink {
 public:
  Informer(ApiClient& client, ResourceType type, ReflectorOptions options, Transform transform = {},
           const Clock& clock = real_clock());
  ~Informer() override;  // stops and joins
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Must be called before start().
  void add_handlers(EventHandlers handlers);
  void start();
  void stop();

  // True once the first list has been applied and its adds handed to the handlers.
  bool has_synced() const { return synced_.load(std::memory_order_acquire); }
  // Waits up to `timeout` for the first list; false on timeout.
  bool wait_for_sync(Duration timeout) const;

  ObjectPtr get(const std::string& key) const;
  std::vector<ObjectPtr> list() const;
  std::vector<ObjectPtr> list_namespace(const std::string& ns) const;
  size_t size() const;

  ReflectorStats stats() const { return reflector_.stats(); }
  uint64_t duplicate_events() const { return duplicates_.load(); }
  std::string last_resource_version() const { return reflector_.last_resource_version(); }

 private:
  struct Change {
    enum class Kind { kAdd, kUpdate, kDelete } kind;
    ObjectPtr old_object;
    ObjectPtr new_object;
  };

  void replace(std::vector<Json> items, const std::string& resource_version) override;
  void apply(WatchEvent::Type type, Json object) override;
  void dispatch(const std::vector<Change>& changes);
  ObjectPtr make_object(Json object) const;

  Transform transform_;
  Reflector reflector_;
  std::vector<EventHandlers> handlers_;
  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;
  std::map<std::string, ObjectPtr, std::less<>> items_;
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> duplicates_{0};
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace sonde::kube
