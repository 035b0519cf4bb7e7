#include "agent/attach/shared_uprobes.h"

namespace sonde::agent {

bool SharedUprobes::Key::operator<(const Key& o) const {
  auto fields = [](const Key& k) {
    const auto& b = k.binary;
    return std::tie(b.inode, b.size, b.mtime_ns, b.digest_kind, b.digest_size, b.digest, k.program);
  };
  return fields(*this) < fields(o);
}

SharedUprobes::SharedUprobes() : detacher_([this] { detach_unused(); }) {}

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

void SharedUprobes::release(pid_t pid) {
  bool more = false;
  {
    std::lock_guard lock(mu_);
    auto p = by_pid_.find(pid);
    if (p == by_pid_.end()) return;
    for (const auto& key : p->second) {
      auto it = by_key_.find(key);
      if (it == by_key_.end()) continue;
      it->second.users.erase(pid);
      if (it->second.users.empty()) {
        unused_.push_back(key);
        more = true;
      }
    }
    by_pid_.erase(p);
  }
  if (more) changed_.notify_all();
}

void SharedUprobes::flush() {
  std::unique_lock lock(mu_);
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
    }
    for (const Key& key : unused_) {
      auto it = by_key_.find(key);
      if (it == by_key_.end() || !it->second.users.empty()) continue;  // taken over since
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
