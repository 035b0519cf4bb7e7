#include "agent/attach/shared_uprobes.h"

#include <algorithm>

namespace sonde::agent {

bool SharedUprobes::Key::operator<(const Key& o) const {
  auto fields = [](const Key& k) {
    const auto& b = k.binary;
    return std::tie(b.inode, b.size, b.mtime_ns, b.digest_kind, b.digest_size, b.digest, k.program);
  };
  return fields(*this) < fields(o);
}

SharedUprobes::SharedUprobes(uint64_t linger_ns, const Clock& clock)
    : linger_ns_(linger_ns), clock_(clock), detacher_([this] { detach_unused(); }) {}

SharedUprobes::~SharedUprobes() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  detacher_.join();
}

Status SharedUprobes::acquire(const std::vector<Request>& requests, const std::string& path,
                              pid_t pid) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] {
    for (const auto& r : requests) {
      if (detaching_.contains(r.key)) return false;
    }
    return true;
  });
  std::vector<const Key*> attached;  // by this call
  for (const auto& r : requests) {
    if (by_key_.contains(r.key)) continue;
    auto attachment = r.attach(path);
    if (!attachment.ok()) {
      // Left without users, like a release: detached on the detach thread.
      for (const Key* k : attached) unused_.push_back(*k);
      if (!attached.empty()) changed_.notify_all();
      return attachment.error();
    }
    by_key_.emplace(r.key, Shared{std::move(attachment).value(), {}});
    attached.push_back(&r.key);
    ++attach_count_;
  }
  for (const auto& r : requests) {
    by_key_.at(r.key).users.insert(pid);
    by_pid_[pid].insert(r.key);
    idle_.erase(r.key);
  }
  return ok_status();
}

size_t SharedUprobes::missing(const std::vector<Request>& requests) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& r : requests) {
    if (!by_key_.contains(r.key) || detaching_.contains(r.key)) ++n;
  }
  return n;
}

void SharedUprobes::release(pid_t pid, bool linger) {
  bool more = false;
  {
    std::lock_guard lock(mu_);
    auto p = by_pid_.find(pid);
    if (p == by_pid_.end()) return;
    for (const auto& key : p->second) {
      auto it = by_key_.find(key);
      if (it == by_key_.end()) continue;
      it->second.users.erase(pid);
      if (!it->second.users.empty()) continue;
      if (linger && linger_ns_ > 0) {
        idle_[key] = clock_.now_ns();
      } else {
        unused_.push_back(key);
        more = true;
      }
    }
    by_pid_.erase(p);
  }
  if (more) changed_.notify_all();
}

void SharedUprobes::expire() {
  bool more = false;
  {
    std::lock_guard lock(mu_);
    const uint64_t now = clock_.now_ns();
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (now - it->second < linger_ns_) {
        ++it;
        continue;
      }
      unused_.push_back(it->first);
      it = idle_.erase(it);
      more = true;
    }
  }
  if (more) changed_.notify_all();
}

bool SharedUprobes::evict_oldest_idle() {
  std::unique_lock lock(mu_);
  auto oldest = std::min_element(idle_.begin(), idle_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
  if (oldest == idle_.end()) return false;
  const symbols::BinaryIdentity binary = oldest->first.binary;
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (it->first.binary != binary) {
      ++it;
      continue;
    }
    unused_.push_back(it->first);
    it = idle_.erase(it);
  }
  changed_.notify_all();
  wait_detached_locked(lock);
  return true;
}

size_t SharedUprobes::idle_binaries() const {
  std::lock_guard lock(mu_);
  std::set<std::string> binaries;
  for (const auto& [key, since] : idle_) binaries.insert(key.binary.to_string());
  return binaries.size();
}

void SharedUprobes::flush() {
  std::unique_lock lock(mu_);
  wait_detached_locked(lock);
}

void SharedUprobes::wait_detached_locked(std::unique_lock<std::mutex>& lock) {
  // The round in progress took what was unused when it started; what was released since
  // waits for the next one.
  const uint64_t until = detach_rounds_ + (in_round_ ? 1 : 0) + (unused_.empty() ? 0 : 1);
  changed_.wait(lock, [&] { return detach_rounds_ >= until || stopping_; });
}

void SharedUprobes::detach_unused() {
  std::unique_lock lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !unused_.empty(); });
    std::vector<std::unique_ptr<Attachment>> doomed;
    if (stopping_) {
      for (auto& [key, shared] : by_key_) doomed.push_back(std::move(shared.attachment));
      by_key_.clear();
      by_pid_.clear();
      idle_.clear();
    }
    for (const Key& key : unused_) {
      auto it = by_key_.find(key);
      // Taken over since, or taken over and left idle again.
      if (it == by_key_.end() || !it->second.users.empty() || idle_.contains(key)) continue;
      doomed.push_back(std::move(it->second.attachment));
      detaching_.insert(key);
      by_key_.erase(it);
    }
    unused_.clear();
    in_round_ = true;
    lock.unlock();
    doomed.clear();  // a grace period per link, outside the lock
    lock.lock();
    detaching_.clear();
    in_round_ = false;
    ++detach_rounds_;
    changed_.notify_all();
    if (stopping_) return;
  }
}

size_t SharedUprobes::size() const {
  std::lock_guard lock(mu_);
  return by_key_.size() + detaching_.size();
}

uint64_t SharedUprobes::attach_count() const {
  std::lock_guard lock(mu_);
  return attach_count_;
}

}  // namespace sonde::agent
