#include "common/kube/informer.h"

#include <unordered_set>

namespace sonde::kube {

Informer::Informer(ApiClient& client, ResourceType type, ReflectorOptions options,
                   Transform transform, const Clock& clock)
    : transform_(std::move(transform)),
      reflector_(client, std::move(type), std::move(options), *this, clock) {}

Informer::~Informer() {
  stop();
}

void Informer::add_handlers(EventHandlers handlers) {
  handlers_.push_back(std::move(handlers));
}

void Informer::start() {
  thread_ = std::thread([this] { reflector_.run(stop_); });
}

void Informer::stop() {
  stop_.stop();
  if (thread_.joinable()) thread_.join();
}

bool Informer::wait_for_sync(Duration timeout) const {
  std::unique_lock lock(mu_);
  return synced_cv_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

ObjectPtr Informer::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::list() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [key, object] : items_) out.push_back(object);
  return out;
}

std::vector<ObjectPtr> Informer::list_namespace(const std::string& ns) const {
  const std::string prefix = ns + "/";
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  for (auto it = items_.lower_bound(prefix);
       it != items_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.push_back(it->second);
  }
  return out;
}

size_t Informer::size() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

ObjectPtr Informer::make_object(Json object) const {
  if (transform_) object = transform_(std::move(object));
  return std::make_shared<const Json>(std::move(object));
}

void Informer::replace(std::vector<Json> items, const std::string& /*resource_version*/) {
  std::vector<Change> changes;
  {
    std::lock_guard lock(mu_);
    std::unordered_set<std::string> seen;
    seen.reserve(items.size());
    for (auto& item : items) {
      std::string key = key_of(item);
      auto it = items_.find(key);
      if (it == items_.end()) {
        ObjectPtr added = make_object(std::move(item));
        items_.emplace(key, added);
        changes.push_back({Change::Kind::kAdd, nullptr, std::move(added)});
      } else if (resource_version_of(*it->second) != resource_version_of(item)) {
        ObjectPtr updated = make_object(std::move(item));
        changes.push_back({Change::Kind::kUpdate, it->second, updated});
        it->second = std::move(updated);
      }
      seen.insert(std::move(key));
    }
    for (auto it = items_.begin(); it != items_.end();) {
      if (seen.count(it->first) == 0) {
        changes.push_back({Change::Kind::kDelete, it->second, nullptr});
        it = items_.erase(it);
      } else {
        ++it;
      }
    }
  }
  dispatch(changes);
  // Synced only once handlers have seen the initial state, so a caller that waits for sync
  // and then acts never races the initial adds.
  {
    std::lock_guard lock(mu_);
    synced_.store(true, std::memory_order_release);
  }
  synced_cv_.notify_all();
}

void Informer::apply(WatchEvent::Type type, Json object) {
  std::vector<Change> changes;
  {
    std::lock_guard lock(mu_);
    const std::string key = key_of(object);
    auto it = items_.find(key);
    if (type == WatchEvent::Type::kDeleted) {
      if (it == items_.end()) return;
      changes.push_back({Change::Kind::kDelete, it->second, nullptr});
      items_.erase(it);
    } else if (it == items_.end()) {
      ObjectPtr added = make_object(std::move(object));
      items_.emplace(key, added);
      changes.push_back({Change::Kind::kAdd, nullptr, std::move(added)});
    } else if (resource_version_of(*it->second) == resource_version_of(object)) {
      duplicates_.fetch_add(1);
      return;
    } else {
      ObjectPtr updated = make_object(std::move(object));
      changes.push_back({Change::Kind::kUpdate, it->second, updated});
      it->second = std::move(updated);
    }
  }
  dispatch(changes);
}

void Informer::dispatch(const std::vector<Change>& changes) {
  for (const auto& change : changes) {
    for (const auto& h : handlers_) {
      switch (change.kind) {
        case Change::Kind::kAdd:
          if (h.on_add) h.on_add(change.new_object);
          break;
        case Change::Kind::kUpdate:
          if (h.on_update) h.on_update(change.old_object, change.new_object);
          break;
        case Change::Kind::kDelete:
          if (h.on_delete) h.on_delete(change.old_object);
          break;
      }
    }
  }
}

}  // namespace sonde::kube
